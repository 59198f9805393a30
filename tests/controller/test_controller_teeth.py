"""The controller checks have teeth: each guide §9 trap fails the CTRL clause where a
deployment would notice it.

* save writes the lease -> reconcile marks a live task LOST
  (CTRL-RESTART-RECOVERY);
* release completes -> a stop request never reaches its holder
  (CTRL-STOP-REACHES-HOLDER, XP-CTRL-NO-STARVATION);
* claim ignores the lease -> one stop delivered twice (CTRL-STOP-DELIVERED-ONCE);
* save insists on version + 1 -> a task frozen after one outage
  (CTRL-OUTAGE-RECOVERY);
* append is a plain insert -> duplicate history after a replay
  (CTRL-OUTAGE-RECOVERY);
* counts cached at create -> a dashboard whose counts never move (CTRL-PLUGS-IN's
  check fails; the preflight blames it on COUNTS-PER-STATUS, test_controller_blame.py);
* claim ignores an expired lease -> a dead holder's stop stuck forever
  (XP-CTRL-KILLED-HOLDER);
* get answers from a cache -> the stopper never sees CANCELLED (XP-CTRL-STOP).

Every failure must be an ``AssertionError`` raised by the check itself. The
reference stores pass the same checks (test_controller_reference_stores.py), so
each failure is the one mistake's doing.
"""

from __future__ import annotations

import traceback
from typing import Any

import ctrl_broken_stores as xp
import pytest
from broken_stores import (
    AppendDuplicates,
    ClaimIgnoresLease,
    CountsCachedAtCreate,
    ReleaseCompletes,
    SaveRequiresSuccessor,
    SaveWritesLease,
)

from chongming_conformance.checking.controller import ControllerContract
from chongming_conformance.controller import Controller, ManualClock
from chongming_conformance.protocol import TaskStore
from chongming_conformance.protocol.clauses import clauses_of

IN_PROCESS = [
    ("CTRL-RESTART-RECOVERY", SaveWritesLease),
    ("CTRL-STOP-REACHES-HOLDER", ReleaseCompletes),
    ("CTRL-STOP-DELIVERED-ONCE", ClaimIgnoresLease),
    ("CTRL-OUTAGE-RECOVERY", SaveRequiresSuccessor),
    ("CTRL-OUTAGE-RECOVERY", AppendDuplicates),
    ("CTRL-PLUGS-IN", CountsCachedAtCreate),
]

CROSS_PROCESS = [
    ("XP-CTRL-NO-STARVATION", xp.ReleaseCompletesSqlite),
    ("XP-CTRL-KILLED-HOLDER", xp.ExpiryIgnoredClaimSqlite),
    ("XP-CTRL-STOP", xp.CachingGetSqlite),
]


def checks_declaring(clause_id: str) -> list[str]:
    return [n for n in dir(ControllerContract)
            if n.startswith("test_") and clause_id in clauses_of(getattr(ControllerContract, n))]


def run_check(contract: ControllerContract, name: str) -> BaseException | None:
    contract.setup_method()
    try:
        getattr(contract, name)()
    except Exception as exc:
        return exc
    finally:
        contract.teardown_method()
    return None


def assert_caught(clause_id: str, what: str, failures: dict[str, BaseException | None]) -> None:
    caught = {n: e for n, e in failures.items() if e is not None}
    assert caught, f"{what} breaks {clause_id}, yet {sorted(failures)} all passed"
    for exc in caught.values():
        assert isinstance(exc, AssertionError), f"{what} crashed the check: {exc!r}"
        frames = traceback.extract_tb(exc.__traceback__)
        assert any("/checking/controller/" in f.filename for f in frames), (
            f"{what} failed outside the controller checks: {exc!r}")


@pytest.mark.parametrize(("clause_id", "broken"), IN_PROCESS,
                         ids=[f"{c}-{b.__name__}" for c, b in IN_PROCESS])
def test_broken_store_fails_its_controller_clause(clause_id: str, broken: type) -> None:
    class Check(ControllerContract):
        def make_store(self) -> Any:
            return broken()

    names = checks_declaring(clause_id)
    assert names, f"no controller check declares {clause_id}"
    assert_caught(clause_id, broken.__name__, {n: run_check(Check(), n) for n in names})


@pytest.mark.parametrize(("clause_id", "broken"), CROSS_PROCESS,
                         ids=[f"{c}-{b.__name__}" for c, b in CROSS_PROCESS])
def test_broken_shared_store_fails_its_cross_process_clause(clause_id: str,
                                                            broken: type) -> None:
    from reference_stores import sqlite

    class Check(ControllerContract):
        cross_process_deadline = 15.0  # the broken stores fail by never delivering

        def make_store(self) -> Any:
            return sqlite.make_store()

        def make_shared_store(self) -> Any:
            return xp.shared(broken)()

    names = checks_declaring(clause_id)
    assert names, f"no controller check declares {clause_id}"
    assert_caught(clause_id, broken.__name__, {n: run_check(Check(), n) for n in names})


class EagerController(Controller):
    """A consumer mistake, not a store one: it polls commands from the start."""

    def __init__(self, store: TaskStore, **kwargs: Any) -> None:
        super().__init__(store, **kwargs)
        self._start_polling()


def test_a_controller_that_polls_before_submitting_fails_the_read_only_check() -> None:
    """CTRL-READ-ONLY-NO-CLAIM is about the consumer; prove the check sees a poller."""
    from reference_stores import memory

    class Check(ControllerContract):
        def make_store(self) -> Any:
            return memory.make_store()

        def controller(self, owner: str, clock: ManualClock,
                       store: TaskStore | None = None) -> Controller:
            if owner != "dashboard":
                return super().controller(owner, clock, store)
            c = EagerController(store or self.store, owner=owner,
                                command_poll_interval=3600.0, clock=clock)
            self._stack.callback(c.close)
            return c

    names = checks_declaring("CTRL-READ-ONLY-NO-CLAIM")
    assert_caught("CTRL-READ-ONLY-NO-CLAIM", "EagerController",
                  {n: run_check(Check(), n) for n in names})
