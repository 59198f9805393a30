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
  the rename silently does nothing, so the group is lost.) ``loadscope`` and
  ``loadfile`` keep them together already (one class, one file); ``worksteal``
  and ``each`` are left as the user chose.

pytest-xdist is optional: its hooks here are ``optionalhook`` and it is imported
only inside them, so without xdist nothing here changes a run.
"""

from __future__ import annotations

from typing import Any

import pytest

from .collection import SuiteCollection
from .itemdata import STRESS_GROUP, is_stress_nodeid

__all__ = ["Distribution", "is_worker", "stress_together_scheduler"]

_WORKEROUTPUT_KEY = "chongming_collection"
_REUSE_KEY = "chongming_reuse"
#: xdist modes whose scheduler is replaced by :func:`stress_together_scheduler`.
_GROUPED_MODES = ("load", "loadgroup")


def is_worker(config: pytest.Config) -> bool:
    """Whether this process is an xdist worker (the controller writes the reports)."""
    return hasattr(config, "workerinput")


def stress_together_scheduler(config: pytest.Config, log: Any) -> Any:
    """xdist's load scheduling with every stress scenario in one work unit."""
    from xdist.scheduler import LoadGroupScheduling

    class StressTogetherScheduling(LoadGroupScheduling):  # type: ignore[misc]
        """``loadgroup``, plus the packaged stress scenarios as one group."""

        def _split_scope(self, nodeid: str) -> str:
            if is_stress_nodeid(nodeid):
                return STRESS_GROUP
            scope: str = super()._split_scope(nodeid)
            return scope

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
            "hypothesis_items": sorted(col.hypothesis_items),
            "deselected": list(col.deselected),
        }
