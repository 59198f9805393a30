"""``close_isolated`` proves XP-CLOSE-ISOLATED: closing one instance spares the others.

A store that keeps one pool (or connection, or file handle) per location and hands
it to every instance opened there makes ``close()`` of one instance close it for
all of them: the next call of another instance -- often in another thread of the
same process, long after -- fails or hangs. The contract cannot see it (each of its
stores is a location of its own); the shared-store opener can: every instance it
opens is on one location.

In the parent process (the bug is per process), the scenario opens three instances
through the opener, writes through each, closes one, and then needs the other two
to go on reading and writing, and an instance opened after the close to work too.
No interleaving is involved: every call runs one after the other, so nothing a
correct store may do under concurrency can make it fail.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from ...protocol import TaskStore
from ...seam.factory import enter_store
from ..harness import Harness
from ..records import task
from ._registry import Scenario, register

__all__ = ["SCENARIO", "run"]


def _step(h: Harness, what: str, call: Callable[[], Any]) -> bool:
    """Run one call; an exception is the anomaly (True: it worked)."""
    try:
        call()
    except Exception as exc:
        h.anomaly("close-not-isolated",
                  f"after one instance on the shared location was closed, {what} raised "
                  f"{type(exc).__name__}: {exc}", call=what, error=f"{type(exc).__name__}")
        return False
    return True


def run(h: Harness) -> None:
    """Three instances on one location; close one; the others and a new one keep working."""
    with contextlib.ExitStack() as stack:
        stores: list[TaskStore] = [
            enter_store(h.opener, stack, origin="the shared-store opener") for _ in range(3)
        ]
        first, closed, other = stores
        for i, store in enumerate(stores):
            store.create(task(f"iso-{i}"))
        closed.close()
        ok = _step(h, "get() on another instance", lambda: first.get("iso-1"))
        ok = ok and _step(h, "create() on another instance",
                          lambda: other.create(task("iso-after")))
        ok = ok and _step(h, "query() on another instance", lambda: list(first.query()))
        if not ok:
            return
        with contextlib.ExitStack() as later:
            fresh = enter_store(h.opener, later, origin="the shared-store opener")
            if not _step(h, "get() on an instance opened after the close",
                         lambda: fresh.get("iso-after")):
                return
            seen = fresh.get("iso-after")
            if seen is None:
                h.anomaly("close-not-isolated",
                          "a task created through another instance after one instance was "
                          "closed is missing from a new instance: the write was lost")


SCENARIO = register(Scenario(name="close_isolated", clause="XP-CLOSE-ISOLATED",
                             rule="closing_one_instance_spares_the_others", run=run))
