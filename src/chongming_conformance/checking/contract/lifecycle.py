"""A store's shape and the end of things: the protocol check, prune(), close()."""

from __future__ import annotations

import unittest
from collections.abc import Callable

from ...oracle.blame import blame
from ...protocol import PROTOCOL_METHODS, TaskStore
from ...protocol.alphabet import describe
from ...protocol.clauses import checks
from ...protocol.errors import StoreError
from ...protocol.model import (
    TaskStatus,
)
from ...seam.factory import protocol_mismatches, signature_advisories
from ...seam.timeouts import unwrap
from ...strategies.samples import (
    at,
    command,
    confusable_id_twins,
    snapshot,
    transition,
)
from ._base import LEASE, ContractBase, _cmd_ids, expect_on

__all__ = ["LifecycleContract"]


#: Terminal tasks PRUNE-LARGE drops in one call: beyond every bind-parameter limit
#: (SQLite 32,766, PostgreSQL and MySQL 65,535).
LARGE_PRUNE = 100_000


class LifecycleContract(ContractBase):
    """The protocol-shape, prune and close clauses of ``StoreContract``."""

    # ========================================================================================
    # structure
    # ========================================================================================
    @checks("PROTOCOL-METHODS")
    def test_protocol_methods__store_is_structurally_a_taskstore(self) -> None:
        target = unwrap(self.store)
        assert isinstance(target, TaskStore), "isinstance(store, TaskStore) is False"
        problems = protocol_mismatches(target)
        assert not problems, "store differs from the protocol: " + "; ".join(problems)
        for name in PROTOCOL_METHODS:
            assert callable(getattr(target, name)), f"{name} is not callable"

    @checks("PROTOCOL-KEYWORD-ONLY")
    def test_protocol_keyword_only__markers_declared(self) -> None:
        target = unwrap(self.store)
        advice = signature_advisories(target)
        assert not advice, "looser than the protocol: " + "; ".join(advice)

    # ========================================================================================
    # prune
    # ========================================================================================
    def _prune_fixture(self) -> None:
        """Old non-terminal tasks, then five terminal ones inserted out of order."""
        self._given(
            snapshot("old-pending", status=TaskStatus.PENDING, created=-100),
            snapshot("old-running", status=TaskStatus.RUNNING, created=-50),
        )
        terminal = [
            TaskStatus.SUCCEEDED,
            TaskStatus.FAILED,
            TaskStatus.CANCELLED,
            TaskStatus.LOST,
            TaskStatus.SUCCEEDED,
        ]
        for i in (3, 0, 4, 1, 2):
            self._given(snapshot(f"done-{i}", status=terminal[i], created=i))
        for tid in ("old-running", "done-0", "done-3"):
            self.store.append(transition(tid, 1))
            self.store.append(transition(tid, 2, to=TaskStatus.SUCCEEDED))

    def _prune(self, keep_terminal: int) -> int:
        """``prune`` on the fixture, then the non-terminal tasks must still be there: if
        one is gone, the failure is PRUNE-TERMINAL-ONLY's, whatever the test checks next."""
        dropped = self.store.prune(keep_terminal=keep_terminal)
        gone = [t for t in ("old-pending", "old-running") if self._absent(t)]
        if gone:
            exc = AssertionError(f"prune(keep_terminal={keep_terminal}) dropped non-terminal "
                                 f"task(s) {gone}")
            blame(exc, ("PRUNE-TERMINAL-ONLY",))
            raise exc
        return dropped

    @checks("PRUNE-TERMINAL-ONLY")
    def test_prune_terminal_only__non_terminal_survive(self) -> None:
        self._prune_fixture()
        self.store.prune(keep_terminal=0)
        left = set(self._query_ids())
        assert left == {"old-pending", "old-running"}, f"after prune(keep_terminal=0): {left}"

    @checks("PRUNE-OLDEST-FIRST")
    def test_prune_oldest_first__keeps_newest_and_counts(self) -> None:
        self._prune_fixture()
        dropped = self._prune(2)
        assert dropped == 3, f"prune() returned {dropped}, it should drop 3"
        left = self._query_ids()
        assert left == ["old-pending", "old-running", "done-3", "done-4"], f"left: {left}"
        assert self.store.prune(keep_terminal=2) == 0, "a second prune has nothing to drop"
        assert self.store.prune(keep_terminal=10) == 0, "keep more than exist"

    @checks("PRUNE-OLDEST-FIRST")
    def test_prune_oldest_first__by_created_at_not_updated_or_finished(self) -> None:
        """"Oldest" is created_at: a task created first but updated (or finished) last is
        still the one to go (a prune ordered by updated_at keeps it)."""
        self._given(
            snapshot("old", status=TaskStatus.SUCCEEDED, created=0,
                     updated_at=at(100), finished_at=at(100)),
            snapshot("new", status=TaskStatus.SUCCEEDED, created=1,
                     updated_at=at(1), finished_at=at(1)),
        )
        dropped = self.store.prune(keep_terminal=1)
        left = self._query_ids()
        assert (dropped, left) == (1, ["new"]), (
            f"prune(keep_terminal=1) returned {dropped} and kept {left}; it must drop 'old' "
            "(created first, updated and finished last): prune goes by created_at"
        )

    @checks("PRUNE-LARGE")
    def test_prune_large__100k_terminal_tasks_in_one_call(self) -> None:
        """One prune of 100,000 terminal tasks (no bind-parameter list, no statement-size
        bound), non-terminal ones kept. Writing 100k tasks costs time, so it runs under the
        thorough profile only: elsewhere the clause is NOT VERIFIED with this reason."""
        from ..hypothesis_profiles import PROFILES, active_profile_name

        if active_profile_name() != PROFILES["thorough"]:
            raise unittest.SkipTest(
                "PRUNE-LARGE writes 100,000 tasks: it runs under --chongming-profile=thorough")
        self._given(snapshot("keep-running", status=TaskStatus.RUNNING, created=-1))
        for i in range(LARGE_PRUNE):
            self.store.create(snapshot(f"bulk-{i:06d}", status=TaskStatus.SUCCEEDED,
                                       created=i / 1000))
        dropped = self.store.prune(keep_terminal=0)
        assert dropped == LARGE_PRUNE, f"prune(keep_terminal=0) returned {dropped}"
        assert self._query_ids() == ["keep-running"], "prune left terminal tasks (or none)"

    @checks("PRUNE-HISTORY")
    def test_prune_history__dropped_with_task_others_kept(self) -> None:
        self._prune_fixture()
        self._prune(1)  # keeps done-4 only
        assert list(self.store.history("done-0")) == [], "history of a pruned task survived"
        assert list(self.store.history("done-3")) == [], "history of a pruned task survived"
        self._assert_versions(list(self.store.history("old-running")), [1, 2],
                              "unrelated history lost")

    @checks("PRUNE-COMMANDS")
    def test_prune_commands__pruned_tasks_commands_dropped(self) -> None:
        self._prune_fixture()
        self.store.submit_command(command("c-pruned", "done-0"))
        self.store.submit_command(command("c-kept", "old-running", created=1))
        self._prune(0)
        got = _cmd_ids(self._claim(now=at(10), lease_seconds=LEASE))
        assert got == ["c-kept"], f"after prune, claimable commands are {got}"

    def _twins_fixture(self) -> tuple[list[str], list[str]]:
        """Terminal tasks whose ids are the targets of ``confusable_id_twins``, and a running
        task for every twin, each with one history row. A prune drops every target and no
        twin; returns (targets, twins)."""
        pairs = confusable_id_twins()
        targets = list(dict.fromkeys(t for t, _ in pairs))
        twins = [w for _, w in pairs]
        self._given(*(snapshot(w, status=TaskStatus.RUNNING, created=-100 + i)
                      for i, w in enumerate(twins)))
        self._given(*(snapshot(t, status=TaskStatus.SUCCEEDED, created=i)
                      for i, t in enumerate(targets)))
        for task_id in [*targets, *twins]:
            self._given_appended(transition(task_id, 1, reason=task_id))
        return targets, twins

    def _prune_twins(self) -> tuple[list[str], list[str]]:
        """The twins fixture, pruned to no terminal task; every twin (running) must still be
        there, or the failure is PRUNE-TERMINAL-ONLY's whatever the test checks next."""
        targets, twins = self._twins_fixture()
        self.store.prune(keep_terminal=0)
        gone = [describe(w) for w in twins if self._absent(w)]
        expect_on("PRUNE-TERMINAL-ONLY", not gone,
                  f"prune(keep_terminal=0) dropped running task(s) {', '.join(gone)}: their "
                  "ids look like a pruned task's id (a pattern match, a collation, a prefix?)")
        return targets, twins

    @checks("PRUNE-HISTORY")
    def test_prune_history__confusable_ids_kept(self) -> None:
        """The pruned tasks' history goes by exact id: a delete that binds the id into a LIKE
        pattern (``_``, ``%``), folds case or trims takes the history of look-alike tasks."""
        targets, twins = self._prune_twins()
        for target in targets:
            left = list(self.store.history(target))
            assert left == [], f"history of the pruned task {describe(target)} survived: {left}"
        lost = [describe(w) for w in twins
                if list(self.store.history(w)) != [transition(w, 1, reason=w)]]
        assert not lost, (
            f"prune dropped (or changed) the history of kept task(s) {', '.join(lost)}, whose "
            "ids look like a pruned task's id: history must be deleted by exact id, never by "
            "a pattern (LIKE with '_'/'%'), a case-insensitive collation or a prefix")

    @checks("PRUNE-COMMANDS")
    def test_prune_commands__confusable_ids_kept(self) -> None:
        """Commands go with their task by exact task id, as the history does."""
        targets, twins = self._twins_fixture()
        ids = {task_id: f"c-{i:02d}" for i, task_id in enumerate([*targets, *twins])}
        for task_id, command_id in ids.items():
            self.store.submit_command(command(command_id, task_id))
        self.store.prune(keep_terminal=0)
        gone = [describe(w) for w in twins if self._absent(w)]
        expect_on("PRUNE-TERMINAL-ONLY", not gone,
                  f"prune(keep_terminal=0) dropped running task(s) {', '.join(gone)}")
        got = set(_cmd_ids(self._claim(now=at(10), lease_seconds=LEASE, limit=1000)))
        kept = {ids[w] for w in twins}
        lost = sorted(f"{ids[w]} (task {describe(w)})" for w in twins if ids[w] not in got)
        assert not lost, (
            f"prune dropped the commands {', '.join(lost)} of kept tasks whose ids look like "
            "a pruned task's id: commands must go by exact task id")
        stale = sorted(got - kept)
        assert not stale, f"commands of pruned tasks are still claimable: {stale}"

    # ========================================================================================
    # close
    # ========================================================================================
    @checks("CLOSE-IDEMPOTENT")
    def test_close_idempotent__twice_no_error(self) -> None:
        self._given(snapshot("t-1"))
        self.store.close()
        self.store.close()

    @checks("CLOSE-THEN-STOREERROR")
    def test_close_then_storeerror__every_method(self) -> None:
        self.store.create(snapshot("t-1"))
        self.store.submit_command(command("c-1"))
        self.store.close()
        now = at(0)
        calls: dict[str, Callable[[], object]] = {
            "create": lambda: self.store.create(snapshot("t-2")),
            "save": lambda: self.store.save(snapshot("t-1", version=2), expect_version=1),
            "get": lambda: self.store.get("t-1"),
            "query": lambda: self.store.query(),
            "counts": lambda: self.store.counts(),
            "append": lambda: self.store.append(transition("t-1", 1)),
            "history": lambda: self.store.history("t-1"),
            "touch": lambda: self.store.touch("t-1", heartbeat_at=now),
            "submit_command": lambda: self.store.submit_command(command("c-2")),
            "claim_commands": lambda: self.store.claim_commands(now=now, lease_seconds=LEASE),
            "complete_command": lambda: self.store.complete_command("c-1", now=now),
            "release_command": lambda: self.store.release_command("c-1", now=now),
            "prune": lambda: self.store.prune(keep_terminal=0),
        }
        assert set(calls) | {"close"} == set(PROTOCOL_METHODS), "contract misses a method"
        wrong = []
        for name, call in calls.items():
            try:
                call()
            except StoreError:
                continue
            except Exception as exc:
                wrong.append(f"{name}() raised {type(exc).__name__}: {exc}")
            else:
                wrong.append(f"{name}() succeeded")
        assert not wrong, "after close() every method must raise StoreError: " + "; ".join(wrong)

    @checks("CLOSE-THEN-STOREERROR")
    def test_close_then_storeerror__closing_one_store_spares_another(self) -> None:
        other = self.open_store()
        self.store.close()
        other.create(snapshot("t-1"))
        assert other.get("t-1") is not None, "closing one store broke another instance"
