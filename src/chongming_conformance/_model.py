"""Deprecated old name of :mod:`chongming_conformance.oracle` (the reference model).

Renamed because ``_model`` next to ``model`` (the data classes) made a reader
guess which is which. Importing this gives the very same module object as
``chongming_conformance.oracle``.
"""

from __future__ import annotations

from . import oracle as _new
from ._renamed import alias_module
from .oracle import *  # noqa: F403  (the names, for type checkers)
from .oracle import __all__ as __all__

alias_module(__name__, _new, deprecated=True)
