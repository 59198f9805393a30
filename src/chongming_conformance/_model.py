"""Deprecated old name of :mod:`chongming_conformance.oracle` (the reference model).

Renamed because ``_model`` next to ``model`` (the data classes) made a reader
guess which is which. Importing this gives the very same module object as
``chongming_conformance.oracle``.
"""

from __future__ import annotations

import sys
import warnings

from . import oracle as _renamed
from .oracle import *  # noqa: F403  (the names, for type checkers)
from .oracle import __all__ as __all__

warnings.warn(
    "chongming_conformance._model is deprecated: import chongming_conformance.oracle",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _renamed
