"""What the state machine draws and sends: its clock, leases, limits, ids and snapshots.

One job: the inputs of :class:`chongming_conformance.checking.stateful.StoreStateMachine` -- clock
steps that land on lease boundaries, the leases and limits the guide defines, id pools with
LIKE and case collisions, snapshot fields with ties, and the call each method gets after
``close()``. Split out so the machine's rules read as calls and checks, and so what it never
sends (a lease of 0, ``limit=0``) is stated in one place. Private: import ``EPOCH`` from
:mod:`chongming_conformance.checking.stateful`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import strategies as st

from ... import strategies as cst
from ...protocol import TaskStore
from ...protocol.model import Command, CommandKind, TaskSnapshot, TaskStatus, Transition

__all__ = ["EPOCH", "REUSED_CLOSE_ODDS"]

#: Clock zero of the machine: the store sees ``EPOCH + clock`` in a random offset.
EPOCH = datetime(2030, 1, 1, tzinfo=UTC)
# Positive leases only (a lease of 0 or less is left open by the guide), fractional ones
# too: a store that keeps whole seconds holds a 1.5 s lease until +2 s or drops it at +1 s.
_LEASES = (0.5, 1.0, 1.5, 5.0)
# Claim limits: never 0, which the guide leaves open (a store may refuse it; the contract
# checks it alone, accepting either answer).
_LIMITS = (1, 2, 50)
# Clock steps that land a microsecond before, exactly on and a microsecond after the end of
# every lease above, wherever the claim was.
_STEPS_US = (
    0, 1, 499_999, 500_000, 500_001, 999_999, 1_000_000, 1_000_001, 1_499_999, 1_500_000,
    1_500_001, 4_999_999, 5_000_000, 5_000_001, 60_000_000,
)
#: What a claim can blame (both claim rules declare it).
_CLAIM_CLAUSES = (
    "SUBMIT-THEN-CLAIM",
    "COMMAND-ROUNDTRIP",
    "CLAIM-LEASE-EXCLUSIVE",
    "CLAIM-EXPIRED-RECLAIM",
    "CLAIM-LEASE-PRECISE",
    "CLAIM-ORDER",
    "CLAIM-LIMIT",
    "COMPLETE-NEVER-RECLAIMED",
    "COMPLETE-IDEMPOTENT",
    "RELEASE-NOT-COMPLETE",
    "RELEASE-FINISHED-NOOP",
    "TIME-INSTANT-ORDER",
    "TIME-UTC-ROUNDTRIP",
)
_MAX_VERSION = 2**62  # room for stored + 2**40 gaps without leaving BIGINT
#: One run in this many may close a reused store (see ``StoreStateMachine.reuses_store``).
REUSED_CLOSE_ODDS = 10

# Few instants (ties, 1 µs apart) in random offsets: ordering bugs live there.
_CREATED = st.builds(
    lambda us, zone: (EPOCH + timedelta(microseconds=us)).astimezone(zone),
    st.sampled_from((0, 0, 1, 2, 1_000_000, 3_600_000_000)),
    cst.offsets(),
)
_IDS = st.sampled_from(("t1", "t2", "t3", "t%", "t_", "T1", "t1 ")) | cst.task_ids()
_COMMAND_IDS = st.sampled_from(("c1", "c2", "c3")) | cst.command_ids()
_VERSIONS = st.integers(0, 5) | st.integers(0, _MAX_VERSION)
_GAPS = st.sampled_from((1, 1, 2, 7, 2**40))
_SNAPSHOT_FIELDS: dict[str, Any] = {
    "task_id": _IDS,
    "name": st.sampled_from(cst.NAME_POOL) | cst.names(),  # LIKE and prefix collisions
    "tags": st.frozensets(st.sampled_from(cst.TAG_POOL), max_size=3) | cst.tag_sets(),
    "created_at": _CREATED,
    "status_version": _VERSIONS,
    "bucket": st.none() | st.sampled_from(cst.BUCKET_POOL),
    "pipeline_run_id": st.none() | st.sampled_from(cst.PIPELINE_POOL),
}

_AFTER_CLOSE: dict[str, Callable[[TaskStore], object]] = {
    "create": lambda s: s.create(TaskSnapshot("x", "x", TaskStatus.PENDING, 1, EPOCH, EPOCH)),
    "save": lambda s: s.save(
        TaskSnapshot("x", "x", TaskStatus.PENDING, 2, EPOCH, EPOCH), expect_version=1
    ),
    "get": lambda s: s.get("x"),
    "query": lambda s: s.query(),
    "counts": lambda s: s.counts(),
    "append": lambda s: s.append(Transition("x", 1, None, TaskStatus.PENDING, EPOCH)),
    "history": lambda s: s.history("x"),
    "touch": lambda s: s.touch("x", heartbeat_at=EPOCH),
    "submit_command": lambda s: s.submit_command(Command("x", "x", CommandKind.STOP, "me", EPOCH)),
    "claim_commands": lambda s: s.claim_commands(now=EPOCH, lease_seconds=1.0),
    "complete_command": lambda s: s.complete_command("x", now=EPOCH),
    "release_command": lambda s: s.release_command("x", now=EPOCH),
    "prune": lambda s: s.prune(keep_terminal=0),
}
