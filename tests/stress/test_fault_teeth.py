"""Teeth of the fault run: Postgres and MariaDB stores, each green on a healthy network and
each wrong in one realistic way under faults (tests/stress/fault_stores.py,
tests/stress/fault_stores_mariadb.py; the mistakes themselves in fault_mistakes.py), must be
failed by ``fault_workload`` on their own clause and on no other.

Every tooth runs in CI, at the quick profile with network faults (8 s of aimed faults, three
mixers, about 25-40 s a run): since the faults are aimed at kinds of call and every fault
clause needs its cells met (``stress.fault_coverage``), even that short run catches each
tooth at nearly every seed; the seeds below are tried in turn and the test fails only if
every one misses. The gate's own run -- the default (ci) profile, ``faults="network"``, what
``pytest --chongming-store=... --chongming-faults=network`` runs, about 60-90 s -- is the
``full_evidence`` twin (``-m full_evidence``) and the per-seed power table of
docs/benchmarks.md ("Power per gate run", ``benchmarks/teeth_power.py``). Every run, caught
or not, must blame nothing but the tooth's clause and end without an error. Without faults
(``mixed_workload`` at quick) every tooth passes.

Each tooth skips visibly without its server (``CHONGMING_TEST_POSTGRES``,
``CHONGMING_TEST_MARIADB``); CI's ``CHONGMING_REQUIRE_POSTGRES=1`` and
``CHONGMING_REQUIRE_MARIADB=1`` turn the skip into a failure (tests/conftest.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import fault_stores
import fault_stores_mariadb
import pytest

from chongming_conformance.stress import ScenarioResult, StressProfile, run_all
from chongming_conformance.stress.scenarios.fault_workload import NO_HANG, RECOVERY, SAFETY
from chongming_conformance.stress.stress_profiles import get_profile

QUICK = get_profile("quick")
#: CI's fault run of a tooth: the quick profile with network faults.
SHORT = dataclasses.replace(QUICK, faults="network")
#: The gate's fault run: the default profile with network faults.
GATE = dataclasses.replace(get_profile("ci"), faults="network")


@dataclass(frozen=True)
class Tooth:
    name: str
    factory: Callable[..., Any]
    clause: str
    #: Tried in turn until a run blames ``clause``.
    seeds: tuple[int, ...]
    #: The server it needs: the fixture that gates it (``postgres_dsn``, ``mariadb_dsn``).
    engine: str = "postgres"


#: A catch is a probability (a seed fixes the fault plan and the workers' choices, not the
#: interleavings): measured per single run (docs/benchmarks.md, "Power per gate run"), so
#: three seeds tried in turn leave a miss on all of them rare.
SEEDS = (0, 1, 2)
_PG, _MY = fault_stores, fault_stores_mariadb
TEETH = [
    Tooth("RetryingSave", _PG.make_retrying_save, SAFETY, seeds=SEEDS),
    Tooth("SwallowingWrites", _PG.make_swallowing_writes, SAFETY, seeds=SEEDS),
    Tooth("OneConnection", _PG.make_one_connection, RECOVERY, seeds=SEEDS),
    Tooth("NoClientTimeout", _PG.make_no_client_timeout, NO_HANG, seeds=SEEDS),
    Tooth("EmptyClaimOnError", _PG.make_empty_claim_on_error, SAFETY, seeds=SEEDS),
    Tooth("SwallowingRelease", _PG.make_swallowing_release, SAFETY, seeds=SEEDS),
    Tooth("SwallowingTouch", _PG.make_swallowing_touch, SAFETY, seeds=SEEDS),
    Tooth("ReadBackInsert", _PG.make_read_back_insert, SAFETY, seeds=SEEDS),
    Tooth("PruneZeroOnError", _PG.make_prune_zero_on_error, SAFETY, seeds=SEEDS),
    Tooth("CancelOnTimeout", _PG.make_cancel_on_timeout, NO_HANG, seeds=SEEDS),
    *(Tooth(f"mariadb-{name}", factory, clause, seeds=SEEDS, engine="mariadb")
      for name, factory, clause in (
          ("RetryingSave", _MY.make_retrying_save, SAFETY),
          ("SwallowingWrites", _MY.make_swallowing_writes, SAFETY),
          ("OneConnection", _MY.make_one_connection, RECOVERY),
          ("NoClientTimeout", _MY.make_no_client_timeout, NO_HANG),
          ("EmptyClaimOnError", _MY.make_empty_claim_on_error, SAFETY),
          ("SwallowingRelease", _MY.make_swallowing_release, SAFETY),
          ("SwallowingTouch", _MY.make_swallowing_touch, SAFETY),
          ("ReadBackInsert", _MY.make_read_back_insert, SAFETY),
          ("PruneZeroOnError", _MY.make_prune_zero_on_error, SAFETY),
          ("SplitCreate", _MY.make_split_create, SAFETY),
          ("CancelOnTimeout", _MY.make_cancel_on_timeout, NO_HANG),
      )),
]


def _verdict(result: ScenarioResult) -> str:
    return "FAIL" if result.failed else "NOT VERIFIED" if result.unverified else "PASS"


def _params(teeth: list[Tooth]) -> list[Any]:
    """Each tooth as a parameter marked with its engine (``-m postgres``, ``-m mariadb``)."""
    return [pytest.param(t, id=t.name, marks=getattr(pytest.mark, t.engine)) for t in teeth]


@pytest.fixture
def _server(request: pytest.FixtureRequest, tooth: Tooth) -> None:
    """The tooth's server, or a visible skip (the factories read the DSN themselves)."""
    assert request.getfixturevalue(f"{tooth.engine}_dsn")


@pytest.mark.usefixtures("_server")
@pytest.mark.parametrize("tooth", _params(TEETH))
def test_tooth_is_green_without_faults(tooth: Tooth) -> None:
    """The mistake shows only under faults: on a healthy network the store passes."""
    [result] = run_all(tooth.factory, QUICK, scenarios=["mixed_workload"])
    assert _verdict(result) == "PASS", result.report()


def _caught(tooth: Tooth, base: StressProfile) -> None:
    """Fault runs of ``tooth`` at ``base``, seed after seed, until one blames its clause;
    every run blames nothing else and ends without an error."""
    tried = []
    for seed in tooth.seeds:
        profile = dataclasses.replace(base, seed=seed)
        [result] = run_all(tooth.factory, profile, scenarios=["fault_workload"])
        assert not result.errors, result.report()
        blamed = result.blamed()
        assert set(blamed) <= {tooth.clause}, (
            f"{tooth.name} (seed {seed}) blamed {blamed}, only {tooth.clause} is its fault:\n"
            + result.report())
        if blamed == [tooth.clause]:
            assert _verdict(result) == "FAIL", result.report()
            return
        tried.append(f"seed {seed}: {_verdict(result)}")
    pytest.fail(f"the fault run ({base.name}) missed {tooth.name} on every seed "
                f"({'; '.join(tried)}); it must fail {tooth.clause}")


@pytest.mark.usefixtures("_server")
@pytest.mark.parametrize("tooth", _params(TEETH))
def test_fault_run_fails_the_tooth_on_its_clause_only(tooth: Tooth) -> None:
    _caught(tooth, SHORT)


@pytest.mark.full_evidence
@pytest.mark.usefixtures("_server")
@pytest.mark.parametrize("tooth", _params(TEETH))
def test_the_gates_fault_run_fails_the_tooth_on_its_clause_only(tooth: Tooth) -> None:
    """The same at the gate's own profile (ci): what a backend author's CI runs."""
    _caught(tooth, GATE)
