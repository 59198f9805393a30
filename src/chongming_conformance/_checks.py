"""Deprecated old name of :mod:`chongming_conformance.assertions`.

Importing this gives the very same module object as
``chongming_conformance.assertions``.
"""

from __future__ import annotations

import sys
import warnings

from . import assertions as _renamed
from .assertions import *  # noqa: F403  (the names, for type checkers)
from .assertions import __all__ as __all__

warnings.warn(
    "chongming_conformance._checks is deprecated: import chongming_conformance.assertions",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _renamed
