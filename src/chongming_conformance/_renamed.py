"""Keeping a renamed module importable under its old name, as the very same module object.

An alias that re-imported the names into a second module would let state
drift apart (a profile loaded through one name, looked up through the other);
replacing the old name in ``sys.modules`` makes both names one module.
"""

from __future__ import annotations

import sys
import warnings
from types import ModuleType

__all__ = ["alias_module"]


def alias_module(old_name: str, renamed: ModuleType, *, deprecated: bool) -> None:
    """Make ``import old_name`` give ``renamed``; warn first if the old name is deprecated."""
    if deprecated:
        warnings.warn(
            f"{old_name} is deprecated: import {renamed.__name__}",
            DeprecationWarning,
            stacklevel=3,
        )
    sys.modules[old_name] = renamed
