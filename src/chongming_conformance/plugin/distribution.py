"""pytest-xdist support: the controller process gets what a serial run's plugin sees.

Under ``pytest -n N`` the controller collects nothing and runs nothing: it only
receives the workers' test reports. A serial run's report needs more than that
(which suite tests were collected, with which clauses, what was deselected), so:

* every worker puts its collection facts in ``config.workeroutput`` (sent to the
  controller when the worker finishes), and the controller adopts the first
  worker's facts (every worker collects the same items);
* each suite test carries its clauses in ``user_properties`` (see
  :mod:`.itemdata`; JUnit XML shows them too);
* the stress scenarios, which start their own processes, all go to one worker,
  one after the other, as in a serial run: xdist's default ``load`` mode (and
  ``loadgroup``) is given a scheduler that treats them as one group. (xdist's
  own ``xdist_group`` mark cannot be used: it renames node ids, and on pytest 9
  the rename silently does nothing, so the group is lost.) The same scheduler
  hands the long work out first (the stress group, the state machine, the
  property checks; :func:`.itemdata.dispatch_rank`), and queues a short test,
  never a long one, behind a worker's long test, so the workers finish together
  instead of one running the state machine with a property check waiting behind
  it while the other idles. ``loadscope`` and
  ``loadfile`` keep them together already (one class, one file); ``worksteal``
  and ``each`` are left as the user chose.

pytest-xdist is optional: its hooks here are ``optionalhook`` and it is imported
only inside them, so without xdist nothing here changes a run.
"""

from __future__ import annotations

from typing import Any

import pytest

from .collection import SuiteCollection
from .itemdata import SHORT_RANK, STRESS_GROUP, dispatch_rank, is_stress_nodeid

__all__ = ["Distribution", "is_worker", "stress_together_scheduler"]

_WORKEROUTPUT_KEY = "chongming_collection"
_REUSE_KEY = "chongming_reuse"
#: xdist modes whose scheduler is replaced by :func:`stress_together_scheduler`.
_GROUPED_MODES = ("load", "loadgroup")


def is_worker(config: pytest.Config) -> bool:
    """Whether this process is an xdist worker (the controller writes the reports)."""
    return hasattr(config, "workerinput")


def stress_together_scheduler(config: pytest.Config, log: Any) -> Any:
    """xdist's load scheduling with every stress scenario in one work unit, long work first."""
    from xdist.scheduler import LoadGroupScheduling

    class StressTogetherScheduling(LoadGroupScheduling):  # type: ignore[misc]
        """``loadgroup``, plus the packaged stress scenarios as one group, long units first."""

        ordered = False

        def _split_scope(self, nodeid: str) -> str:
            if is_stress_nodeid(nodeid):
                return STRESS_GROUP
            scope: str = super()._split_scope(nodeid)
            return scope

        def _assign_work_unit(self, node: Any) -> None:
            # The queue is complete when the first unit is handed out; sort it once by
            # rank (stable: equal ranks keep collection order, the user's tests included).
            if not self.ordered:
                self.ordered = True
                for scope in sorted(self.workqueue, key=dispatch_rank):
                    self.workqueue.move_to_end(scope)
            # A worker holds one unit queued behind the one it runs. Behind long work that
            # unit is a short one, so a long unit is never stuck waiting on a busy worker
            # while the other worker takes the short ones.
            if self._busy_with_long_work(node):
                short = next((s for s in self.workqueue if dispatch_rank(s) == SHORT_RANK), None)
                if short is not None:
                    self.workqueue.move_to_end(short, last=False)
            super()._assign_work_unit(node)

        def _busy_with_long_work(self, node: Any) -> bool:
            return any(
                not all(unit.values()) and dispatch_rank(scope) < SHORT_RANK
                for scope, unit in self.assigned_work.get(node, {}).items()
            )

    return StressTogetherScheduling(config, log)


class Distribution:
    """Hooks that carry collection facts from the workers to the controller."""

    def __init__(self, config: pytest.Config, collection: SuiteCollection) -> None:
        self.config = config
        self.collection = collection
        self.adopted = False
        #: Stores opened and reuses, summed over the workers that reported them.
        self.reuse_totals: dict[str, int] = {}

    # -- controller -------------------------------------------------------------------
    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        if config.getvalue("dist") not in _GROUPED_MODES:
            return None
        return stress_together_scheduler(config, log)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: object) -> None:
        """Adopt the collection facts of the first worker that reported them."""
        output = getattr(node, "workeroutput", {})
        for key, value in (output.get(_REUSE_KEY) or {}).items():
            self.reuse_totals[key] = self.reuse_totals.get(key, 0) + int(value)
        facts = output.get(_WORKEROUTPUT_KEY)
        if facts is None or self.adopted:
            return
        self.adopted = True
        col = self.collection
        col.declared = {nodeid: tuple(cids) for nodeid, cids in facts["declared"]}
        col.may_blame = {nodeid: tuple(cids) for nodeid, cids in facts.get("may_blame", ())}
        col.hypothesis_items = set(facts["hypothesis_items"])
        col.deselected = list(facts["deselected"])

    # -- worker -----------------------------------------------------------------------
    def send_reuse(self, summary: dict[str, int]) -> None:
        """Hand this worker's store-reuse counts to the controller (sent when it finishes)."""
        output = getattr(self.config, "workeroutput", None)
        if output is not None:
            output[_REUSE_KEY] = summary

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """Hand the (already filtered) collection facts to the controller."""
        output = getattr(self.config, "workeroutput", None)
        if output is None:
            return
        col = self.collection
        output[_WORKEROUTPUT_KEY] = {
            "declared": [[nodeid, list(cids)] for nodeid, cids in col.declared.items()],
            "may_blame": [[nodeid, list(cids)] for nodeid, cids in col.may_blame.items()],
            "hypothesis_items": sorted(col.hypothesis_items),
            "deselected": list(col.deselected),
        }
