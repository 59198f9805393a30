"""append() and history(): the transition log, idempotent and ordered."""

from __future__ import annotations

from ...protocol.alphabet import describe
from ...protocol.clauses import checks
from ...protocol.model import (
    TaskStatus,
    Transition,
)
from ...strategies.samples import (
    ST_JOHNS,
    at,
    full_transition,
    snapshot,
    transition,
)
from ._base import ContractBase, _history_culprit, _versions, expect_on

__all__ = ["HistoryContract"]


class HistoryContract(ContractBase):
    """The append / history clauses of ``StoreContract``."""

    # ========================================================================================
    # append / history
    # ========================================================================================
    @checks("APPEND-IDEMPOTENT")
    def test_append_idempotent__replay_leaves_one_row(self) -> None:
        # Every append is for a task that exists: an append for a task that was never
        # created is left open by the guide (a foreign key may refuse it).
        self._given(snapshot("t-1"))
        rows = [transition("t-1", v, when=v) for v in (1, 2, 3)]
        for row in rows:
            self.store.append(row)
        for row in rows:  # crash recovery replays the whole buffer
            self.store.append(row)
        self.store.append(rows[1])
        self._assert_history("t-1", rows, "history after replays")

    @checks("APPEND-FIRST-WINS")
    def test_append_first_wins__conflicting_replay_keeps_first(self) -> None:
        self._given(snapshot("t-1"))
        first = transition("t-1", 1, reason="first")
        self.store.append(first)
        self.store.append(transition("t-1", 1, to=TaskStatus.FAILED, reason="second"))
        self._assert_history("t-1", [first], "a replay must keep the first row")

    @checks("HISTORY-ORDERED")
    def test_history_ordered__ascending_whatever_append_order(self) -> None:
        self._given(snapshot("t-1"))
        for v in (7, 2, 4, 1):
            self.store.append(transition("t-1", v, when=v))
        assert _versions(self.store.history("t-1")) == [1, 2, 4, 7]

    @checks("HISTORY-SINCE")
    def test_history_since__strictly_greater(self) -> None:
        self._given(snapshot("t-1"))
        for v in (1, 2, 4, 7):
            self.store.append(transition("t-1", v, when=v))
        # Which rows is this clause's subject; their order is HISTORY-ORDERED's
        # (_assert_versions blames the right rows out of order there).
        for since, want, why in ((None, [1, 2, 4, 7], "default since_version=0"),
                                 (0, [1, 2, 4, 7], "since_version=0"),
                                 (2, [4, 7], "> not >="), (3, [4, 7], "gap"),
                                 (7, [], "nothing newer"), (99, [], "since_version=99")):
            rows = (self.store.history("t-1") if since is None
                    else self.store.history("t-1", since_version=since))
            self._assert_versions(list(rows), want, why)

    @checks("HISTORY-PER-TASK")
    def test_history_per_task__only_that_task(self) -> None:
        self._given(snapshot("t-1"), snapshot("t-10", created=1))
        for v in (1, 2, 3):
            self.store.append(transition("t-1", v, when=v))
            self.store.append(transition("t-10", v, when=v, reason="other"))
        got = list(self.store.history("t-1"))
        assert {t.task_id for t in got} == {"t-1"}, f"history('t-1') leaked {got}"
        self._assert_versions(got, [1, 2, 3], "history('t-1')")

    @checks("HISTORY-PER-TASK")
    def test_history_per_task__adversarial_task_ids(self) -> None:
        values = self._adversarial_values()
        self._given(*(snapshot(value, created=i) for i, value in enumerate(values)))
        for i, value in enumerate(values):
            self.store.append(transition(value, 1, when=i, reason=value))
        for i, value in enumerate(values):
            got = list(self.store.history(value))
            expected = [transition(value, 1, when=i, reason=value)]
            if got != expected and [t.task_id for t in got] == [value]:
                self._assert_history(value, expected, "the task's one row")  # a field differs
            assert got == expected, (
                f"history({describe(value)}) returned "
                f"{[(describe(t.task_id), describe(t.reason or '')) for t in got]}, "
                "expected that task's one row: task ids compare code point by code point"
            )

    @checks("HISTORY-UNKNOWN-EMPTY")
    def test_history_unknown_empty__no_error(self) -> None:
        assert list(self.store.history("nope")) == [], "history() of an unknown task"
        self._given(snapshot("t-1"))
        assert list(self.store.history("t-1")) == [], "history() of a task with no transitions"

    @checks("TRANSITION-ROUNDTRIP", "TIME-UTC-ROUNDTRIP")
    def test_transition_roundtrip__every_field(self) -> None:
        self._given(snapshot("t-1"))
        full = full_transition("t-1", 3)
        first = Transition("t-1", 1, None, TaskStatus.PENDING, at(0, ST_JOHNS), None)
        self.store.append(full)
        self.store.append(first)
        got = list(self.store.history("t-1"))
        # Appended out of order: the same rows read back in another order are
        # HISTORY-ORDERED's failure, not this clause's (_history_culprit).
        expect_on(_history_culprit([first, full], got, "TRANSITION-ROUNDTRIP"),
                  got == [first, full], f"transitions changed: {got}")
        for row in got:
            expect_on("TIME-UTC-ROUNDTRIP", row.at.utcoffset() is not None,
                      "history() returned a naive datetime")
            expect_on("TRANSITION-ROUNDTRIP", isinstance(row.to_status, TaskStatus),
                      "to_status must be a TaskStatus")
        expect_on("TIME-UTC-ROUNDTRIP", got[1].at.microsecond == full.at.microsecond,
                  "microseconds lost")
