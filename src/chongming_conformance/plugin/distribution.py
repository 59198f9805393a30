"""pytest-xdist support: the controller process gets what a serial run's plugin sees.

Under ``pytest -n N`` the controller collects nothing and runs nothing: it only
receives the workers' test reports. A serial run's report needs more than that
(which suite tests were collected, with which clauses, what was deselected), so:

* every worker puts its collection facts in ``config.workeroutput`` (sent to the
  controller when the worker finishes), and the controller adopts the first
  worker's facts (every worker collects the same items);
* each suite test carries its clauses in ``user_properties`` (set at collection
  on the worker, so JUnit XML shows them too);
* the stress scenarios, which start their own processes, are sent to one worker
  as an ``xdist_group`` with ``--dist loadgroup`` (the plugin switches xdist's
  default ``load`` mode to it; other modes are left as the user chose). xdist
  appends ``@group`` to those node ids; :func:`.itemdata.serial_nodeid` takes it
  off so a report's node ids are a serial run's.

pytest-xdist is optional: every hook here is ``optionalhook`` or plain pytest,
and without xdist nothing here changes a run.
"""

from __future__ import annotations

from typing import Any

import pytest

from ..clauses import CLAUSES, Scope
from .collection import SuiteCollection
from .itemdata import STRESS_GROUP

__all__ = ["Distribution", "is_worker", "prefer_loadgroup"]

_WORKEROUTPUT_KEY = "chongming_collection"
_WORKERINPUT_KEY = "chongming_loadgroup"


def is_worker(config: pytest.Config) -> bool:
    """Whether this process is an xdist worker (the controller writes the reports)."""
    return hasattr(config, "workerinput")


def prefer_loadgroup(config: pytest.Config) -> None:
    """On the controller, turn xdist's default ``load`` mode into ``loadgroup``.

    ``loadgroup`` is ``load`` plus honouring ``xdist_group``, so nothing else
    changes; any other mode the user asked for is kept.
    """
    if not is_worker(config) and getattr(config.option, "dist", None) == "load":
        config.option.dist = "loadgroup"


class Distribution:
    """Hooks that carry collection facts from the workers to the controller."""

    def __init__(self, config: pytest.Config, collection: SuiteCollection) -> None:
        self.config = config
        self.collection = collection
        self.adopted = False

    # -- controller -------------------------------------------------------------------
    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        """Tell each worker whether the stress tests are grouped (it adds the @group ids)."""
        node.workerinput[_WORKERINPUT_KEY] = getattr(self.config.option, "dist", None) == (
            "loadgroup"
        )

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: object) -> None:
        """Adopt the collection facts of the first worker that reported them."""
        facts = getattr(node, "workeroutput", {}).get(_WORKEROUTPUT_KEY)
        if facts is None or self.adopted:
            return
        self.adopted = True
        col = self.collection
        col.declared = {nodeid: tuple(cids) for nodeid, cids in facts["declared"]}
        col.hypothesis_items = set(facts["hypothesis_items"])
        col.deselected = list(facts["deselected"])

    # -- worker -----------------------------------------------------------------------
    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """Group the cross-process tests, before xdist's worker turns groups into node ids."""
        workerinput = getattr(self.config, "workerinput", None)
        if workerinput is None or not workerinput.get(_WORKERINPUT_KEY):
            return
        self.config.option.loadgroup = True
        for item in items:
            cids = self.collection.clauses_of_item(item)
            if any(CLAUSES[c].scope is Scope.CROSS_PROCESS for c in cids):
                item.add_marker(pytest.mark.xdist_group(STRESS_GROUP))

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
