"""The fault teeth's mistakes, written once: each a mixin over an engine's reference store.

A mistake about errors is the same on every engine -- a failed claim answered with
``[]``, a release whose error is swallowed -- so it is written here once, as a class that
overrides one protocol method and calls the reference store's (``super()``); each
engine's module (``fault_stores.py`` for Postgres, ``fault_stores_mariadb.py`` for
MariaDB) puts it in front of its reference store, and says only what is the engine's own:
how a connection's failure looks (``_lost_connection``). The mistakes that live in an
engine's plumbing -- one connection, no client timeout, a cancel instead of a cut socket,
a read-back, a create split over two transactions -- stay in the engine's module.

Each is correct on a healthy network, where these error paths never run, and each must be
failed by the fault run on its clause alone (tests/stress/test_fault_teeth.py).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from chongming_conformance import Command, Progress, StoreError, TaskSnapshot, Transition

__all__ = [
    "EmptyClaimOnError",
    "PruneZeroOnError",
    "RetryingSave",
    "SwallowingRelease",
    "SwallowingTouch",
    "SwallowingWrites",
]

_log = logging.getLogger(__name__)


class RetryingSave:
    """"Save retried after a connection error": a lost connection looks transient, so
    ``save`` tries once more.

    When the first attempt committed and only its reply was lost (a lost reply, a reset or
    a cut reply after the COMMIT), the retry finds the version already moved and raises
    ``ConcurrencyConflict`` -- "no effect" -- for a save that took effect.
    XP-FAULT-SAFETY. A correct store raises StoreError there (unknown outcome) and leaves
    the retry to a caller that can re-read.
    """

    def _lost_connection(self, exc: StoreError) -> bool:
        raise NotImplementedError  # the engine's module says how a lost connection looks

    def save(self, snapshot: TaskSnapshot, *, expect_version: int) -> None:
        try:
            super().save(snapshot, expect_version=expect_version)
        except StoreError as exc:
            if not self._lost_connection(exc):
                raise
            super().save(snapshot, expect_version=expect_version)


class SwallowingWrites:
    """"Best effort" bookkeeping writes: ``complete_command`` and ``append`` log and swallow
    a StoreError and return as if they had succeeded ("the worker must not crash over a
    history row").

    A request the fault swallowed (a lost request, a blackhole, the server down, a reset
    before the statement reached the server) then says "done" for a command that stays
    claimable and a transition that is not there. XP-FAULT-SAFETY.
    """

    def complete_command(self, command_id: str, *, now: Any, outcome: str | None = None) -> None:
        with contextlib.suppress(StoreError):  # "best effort": the mistake modelled here
            super().complete_command(command_id, now=now, outcome=outcome)

    def append(self, transition: Transition) -> None:
        with contextlib.suppress(StoreError):  # "best effort": the mistake modelled here
            super().append(transition)


class EmptyClaimOnError:
    """"No commands this poll; the next poll retries": a claim that fails returns ``[]``, so
    the consumer's polling loop never sees an exception.

    A claim whose COMMIT ran and whose reply was lost (a lost reply, a reset or a cut
    reply after the commit) has leased its commands -- to nobody: the caller was told
    there were none, and every other consumer skips them until the lease runs out. A
    claim whose request was lost says "nothing claimable" while commands wait. Either
    way a returned ``[]`` is an answer, not an unknown effect. XP-FAULT-SAFETY: the next
    claim that no other command call overlaps (the check phase's) misses commands the
    model says are claimable. A correct store raises StoreError (unknown outcome).
    """

    _closed: bool

    def claim_commands(
        self, *, now: datetime, lease_seconds: float, limit: int = 50
    ) -> Sequence[Command]:
        try:
            return super().claim_commands(
                now=now, lease_seconds=lease_seconds, limit=limit)
        except StoreError as exc:
            if self._closed:
                raise
            _log.warning("claim failed, no commands this poll: %s", exc)
            return []  # the mistake modelled here


class SwallowingRelease:
    """"Release is an optimisation, the lease runs out anyway": ``release_command`` logs and
    swallows a StoreError and returns.

    When the request never reached the server (a lost request, a reset before it, the
    server down) the command stays leased although release returned: the model says it
    is claimable at once, and a claim no other command call overlaps (the check phase's,
    inside the lease) leaves it out. XP-FAULT-SAFETY. A correct store raises StoreError.
    """

    _closed: bool

    def release_command(self, command_id: str, *, now: datetime) -> None:
        try:
            super().release_command(command_id, now=now)
        except StoreError as exc:
            if self._closed:
                raise
            _log.warning("release of %s failed, the lease will run out: %s", command_id, exc)


class SwallowingTouch:
    """"A heartbeat is best effort": ``touch`` logs and swallows a StoreError and returns
    ("the next heartbeat writes it anyway; a supervisor must not crash over one").

    A touch whose request was lost (or whose COMMIT never arrived) wrote nothing, yet
    returned: the lease owner, lease end and progress it reported written are not there,
    and the next read of the task -- before another touch overwrites them -- shows the
    old ones. XP-FAULT-SAFETY. A correct store raises StoreError.
    """

    _closed: bool

    def touch(
        self,
        task_id: str,
        *,
        progress: Progress | None = None,
        heartbeat_at: datetime | None = None,
        lease_owner: str | None = None,
        lease_until: datetime | None = None,
    ) -> None:
        try:
            super().touch(task_id, progress=progress,
                          heartbeat_at=heartbeat_at, lease_owner=lease_owner,
                          lease_until=lease_until)
        except StoreError as exc:
            if self._closed:
                raise
            _log.warning("heartbeat of %s lost, the next one writes it: %s", task_id, exc)


class PruneZeroOnError:
    """"Prune is housekeeping": when it fails, the store logs it and reports that nothing
    was pruned ("the next run catches up; the cron job must not fail over it").

    A prune whose COMMIT ran and whose reply was lost (a lost reply, a reset or a cut reply
    after the commit) deleted its terminal tasks -- with their history and commands --
    and says it deleted none: ``0`` is an answer, not an unknown effect, so the model
    keeps tasks that every later query, ``get`` and ``counts()`` shows gone.
    XP-FAULT-SAFETY. A correct store raises StoreError (unknown outcome).
    """

    _closed: bool

    def prune(self, *, keep_terminal: int) -> int:
        try:
            return super().prune(keep_terminal=keep_terminal)
        except StoreError as exc:
            if self._closed:
                raise
            _log.warning("prune failed, nothing pruned this time: %s", exc)
            return 0  # the mistake modelled here
