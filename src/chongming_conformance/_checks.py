"""Deprecated old name of :mod:`chongming_conformance.assertions`.

Importing this gives the very same module object as
``chongming_conformance.assertions``.
"""

from __future__ import annotations

from . import assertions as _new
from ._renamed import alias_module
from .assertions import *  # noqa: F403  (the names, for type checkers)
from .assertions import __all__ as __all__

alias_module(__name__, _new, deprecated=True)
