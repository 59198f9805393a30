"""The deployment seam through the plugin, as a backend author runs it.

``--chongming-faults=deployment`` with a store module whose ``chongming_deployment()``
offers a crash action: the fault run crashes and restarts the (private) server and
XP-FAULT-DURABILITY is judged -- PASS for the reference Postgres store on a durable
server -- and every report names the topology. A module that describes its deployment
but offers no crash action leaves the clause NOT VERIFIED, gated, with the reason: never
PASS for a crash that did not happen.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from plugin_helpers import clause, load_report, run, table_outcome

TESTS = Path(__file__).resolve().parent.parent

CRASHY = f'''
"""The reference Postgres store; its shared store on a private server the kit may crash."""
import atexit
import sys

sys.path[:0] = [{str(TESTS / "stress")!r}, {str(TESTS / "integration")!r}]

from crash_stores import CrashablePostgres
from reference_stores.postgres import make_store  # the contract's stores: the shared server

_crashable = None


def _server():
    global _crashable
    if _crashable is None:
        _crashable = CrashablePostgres()
        atexit.register(_crashable.close)
    return _crashable


def make_shared_store(network=None):
    yield from _server().make_shared_store(network)


def chongming_deployment():
    return _server().deployment()
'''

DESCRIBED_ONLY = '''
"""The reference SQLite store, its deployment described but no fault offered."""
from chongming_conformance.faults import Deployment
from reference_stores.sqlite import CHONGMING_CAPABILITIES, make_shared_store, make_store


def chongming_deployment():
    return Deployment(topology="one SQLite file on a laptop's SSD")
'''


@pytest.mark.postgres
@pytest.mark.usefixtures("postgres_dsn")  # visible skip, or a failure when required
def test_a_crash_action_gets_durability_judged_through_the_plugin(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(crashy=CRASHY)
    result = run(pytester, "--chongming-store=crashy:make_store",
                 "--chongming-faults=deployment", "--chongming-stress=quick",
                 "-k", "history_linearizable_under_faults", "--chongming-report=r.json")
    out = result.stdout.str()
    assert result.ret == 0, out
    doc = load_report(pytester.path / "r.json")
    durability = clause(doc, "XP-FAULT-DURABILITY")
    assert durability["outcome"] == "PASS" and durability["gated"], durability
    assert all(clause(doc, c)["outcome"] == "PASS"
               for c in ("XP-FAULT-SAFETY", "XP-FAULT-RECOVERY", "XP-FAULT-NO-HANG"))
    topology = doc["run"]["topology"]
    assert topology.startswith("faults deployment; deployment topology PostgreSQL 15, one "
                               "private server"), topology
    assert "deployment actions offered: crash_server (crash)" in topology
    assert "chongming: faults deployment; deployment topology PostgreSQL 15" in out


def test_deployment_faults_without_a_crash_action_never_pass_durability(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(described=DESCRIBED_ONLY)
    result = run(pytester, "--chongming-store=described:make_store",
                 "--chongming-faults=deployment", "--chongming-stress=quick",
                 "--chongming-stress-rounds=5", "-k", "history_linearizable_under_faults",
                 "--chongming-report=r.json")
    doc = load_report(pytester.path / "r.json")
    durability = clause(doc, "XP-FAULT-DURABILITY")
    assert durability["outcome"] == "NOT VERIFIED" and durability["gated"], durability
    assert "offers no crash action" in durability["note"]
    assert clause(doc, "XP-FAULT-SAFETY")["outcome"] == "PASS"  # the pauses still ran
    assert doc["run"]["topology"] == (
        "faults deployment; the store declares no network (a database file on local disk: no "
        "connection a network fault could break); deployment topology one SQLite file on a "
        "laptop's SSD; deployment actions offered: none")
    assert table_outcome(result.stdout.str(), "XP-FAULT-DURABILITY") == "NOT VERIFIED"


def test_a_malformed_deployment_is_one_usage_error_before_any_test(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(misdeployed=(
        "from reference_stores.sqlite import make_shared_store, make_store\n"
        "def chongming_deployment():\n"
        "    return 'crash the server with pg_ctl'\n"))
    result = run(pytester, "--chongming-store=misdeployed:make_store")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*found make_shared_store in misdeployed: misdeployed."
                                 "chongming_deployment() returned str, not a "
                                 "chongming_conformance.faults.Deployment*"])
    assert "Traceback" not in result.stderr.str()
