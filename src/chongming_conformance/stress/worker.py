"""Deprecated alias of ``records``: the module holds what workers write and log, not a worker."""

from __future__ import annotations

from .records import *  # noqa: F403
from .records import __all__ as __all__
