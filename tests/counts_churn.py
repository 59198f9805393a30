"""Counters must equal a recount: many creates, saves, conflicts and prunes, checked often.

Shared by the SQLite and Postgres store tests. ``counts()`` there reads
counters maintained beside the tasks (docs/reference-stores.md), so the only
thing that makes it right is that every write path keeps them in step; a
recount over ``query()`` is the independent answer.
"""

from __future__ import annotations

import random
from collections import Counter

from chongming_conformance import ConcurrencyConflict, TaskStatus, TaskStore
from chongming_conformance.strategies.samples import at, snapshot

STATUSES = list(TaskStatus)


def recount(store: TaskStore) -> dict[TaskStatus, int]:
    """Tasks per status by reading every task: slow, obviously right."""
    found = Counter(task.status for task in store.query())
    return {status: found.get(status, 0) for status in TaskStatus}


def churn_and_check(store: TaskStore, *, operations: int = 400, seed: int = 14) -> int:
    """Run a seeded mix of writes; after every 25 compare counts() with recount().

    Returns how many comparisons were made (so a caller can see it really checked).
    """
    rng = random.Random(seed)
    versions: dict[str, int] = {}
    checked = 0
    for step in range(operations):
        roll = rng.random()
        if roll < 0.4 or not versions:
            task_id = f"t{step:05d}"
            store.create(snapshot(task_id, status=rng.choice(STATUSES), created=step))
            versions[task_id] = 1
        elif roll < 0.8:
            task_id = rng.choice(sorted(versions))
            new = snapshot(task_id, status=rng.choice(STATUSES), version=versions[task_id] + 1)
            store.save(new, expect_version=versions[task_id])
            versions[task_id] += 1
        elif roll < 0.9:
            # A lost save must not move a counter.
            task_id = rng.choice(sorted(versions))
            stale = snapshot(task_id, status=rng.choice(STATUSES), version=99)
            try:
                store.save(stale, expect_version=versions[task_id] + 7)
            except ConcurrencyConflict:
                pass
            else:
                raise AssertionError(f"save at a wrong version of {task_id} succeeded")
        elif roll < 0.95:
            store.touch(task_id=rng.choice(sorted(versions)), heartbeat_at=at(step))
        else:
            store.prune(keep_terminal=rng.randrange(0, 10))
            alive = {t.task_id for t in store.query()}
            versions = {k: v for k, v in versions.items() if k in alive}
        if step % 25 == 24:
            assert dict(store.counts()) == recount(store), f"after step {step}"
            checked += 1
    assert dict(store.counts()) == recount(store), "at the end"
    return checked + 1
