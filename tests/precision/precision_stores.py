"""Zero-argument store factories for the precision matrix, importable by ``MODULE:ATTR``.

The contract and property broken stores are zero-argument classes already
(``broken_stores:CreateOverwrites``). The stress suite's broken SQLite stores
need a fresh file each, and a shared-store factory for the cross-process
clauses; ``make_<Class>`` and ``shared_<Class>`` give them those, for any class
in ``tests/stress/stress_stores.py``, by name (a module ``__getattr__``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import stress_stores


def _store_class(name: str) -> Any:
    cls = getattr(stress_stores, name, None)
    if not isinstance(cls, type):
        raise AttributeError(f"no broken stress store {name!r} in stress_stores")
    return cls


def __getattr__(attr: str) -> Callable[[], Any]:
    if attr.startswith("make_"):
        return stress_stores.single(_store_class(attr.removeprefix("make_")))
    if attr.startswith("shared_"):
        return stress_stores.shared(_store_class(attr.removeprefix("shared_")))
    raise AttributeError(attr)
