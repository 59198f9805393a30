"""Issue 42, parts 1-2: XP-FAULT-DURABILITY across a PostgreSQL failover.

The reference Postgres store on a primary and a hot standby (tests/stress/
failover_stores.py) runs the fault workload with ``faults="deployment"``; the
deployment's ``failover`` action loses the primary's zone (the replication link goes
down, the primary is crashed with ``pg_ctl stop -m immediate``) and promotes the
standby, which the store reaches through its multi-host DSN
(``target_session_attrs=read-write``):

* synchronous replication (``synchronous_standby_names = '*'``, ``synchronous_commit =
  on``): the standby has every acknowledged commit, nothing is lost -- PASS, and the
  coverage line says durability was judged across at least one crash (the default
  selection's one gate: 36-57 s measured; everything else here is ``full_evidence``,
  since the default selection's budget is about a minute);
* asynchronous replication (the tooth): what the primary acknowledged while its WAL was
  still on the 50 ms link is missing after the promotion -- FAIL, blamed on
  XP-FAULT-DURABILITY alone. A catch is a probability (the failover may land while
  nothing is written), so the tooth gets up to three seeds and fails only if every one
  misses (caught on 10 of 10 seeds, benchmarks/failover_campaign.py);
* the partition (``partition_then_failover``: the link blackholed past the store's
  call_timeout, then the failover): the reference store, whose timeout cuts the socket,
  raises on each commit that waits for the standby and loses nothing; the store whose
  timeout *cancels* the query (``CancelOnTimeout``) is acknowledged "committed locally"
  by Postgres and loses those writes -- blamed on XP-FAULT-DURABILITY alone.

The heavier evidence (partition runs, the 10-seed campaign) is ``full_evidence`` and
benchmarks/failover_campaign.py. Skips visibly without the PostgreSQL binaries;
``CHONGMING_REQUIRE_POSTGRES=1`` turns that into a failure.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import Any

import pytest

from chongming_conformance.stress import StressProfile, run_scenario
from chongming_conformance.stress.runner import ScenarioResult, open_location

REQUIRE_ENV = "CHONGMING_REQUIRE_POSTGRES"
DURABILITY = "XP-FAULT-DURABILITY"
SEEDS = (0, 1, 2)

try:
    import failover_stores
except ImportError as exc:  # psycopg is an optional extra
    if os.environ.get(REQUIRE_ENV, "").strip() not in ("", "0"):
        raise
    pytest.skip(f'psycopg is not installed ({exc}): pip install "chongming-conformance[postgres]"',
                allow_module_level=True)

pytestmark = pytest.mark.postgres


def profile(seed: int) -> StressProfile:
    """The quick profile's size; the fault phase goes on until one failover has run."""
    return StressProfile("quick", processes=3, rounds=10, deadline=90.0, crash_cycles=1,
                         fault_seconds=8.0, faults="deployment", seed=seed)


def servers(make: Callable[[], Any]) -> Any:
    """``make()``, or a visible skip (a failure under the REQUIRE flag) without binaries."""
    from throwaway_servers import MissingBinaries

    try:
        return make()
    except MissingBinaries as exc:
        if os.environ.get(REQUIRE_ENV, "").strip() not in ("", "0"):
            pytest.fail(f"{exc} (and {REQUIRE_ENV}=1 forbids skipping)", pytrace=False)
        pytest.skip(str(exc))


def run(failover: Any, seed: int) -> ScenarioResult:
    """One fault run of the reference store's workload with the deployment's actions."""
    p = profile(seed)
    with contextlib.ExitStack() as stack:
        opener, network = open_location(failover.make_shared_store, "fault_workload", p,
                                        stack, takes=False)
        return run_scenario("fault_workload", opener, p, network=network,
                            deployment=failover.deployment(), keep_logs=False)


def judged(result: ScenarioResult) -> None:
    """The run's coverage says durability was judged across at least one failover."""
    line = next(c for c in result.coverage if c.startswith("deployment:"))
    assert "durability judged across" in line and "across 0 " not in line, line


def caught_on_durability(make: Callable[[], Any], what: str) -> None:
    """The tooth ``make()`` builds fails XP-FAULT-DURABILITY alone on one of :data:`SEEDS`."""
    failover = servers(make)
    misses = []
    try:
        for seed in SEEDS:
            result = run(failover, seed)
            assert not result.errors, result.report()
            if result.failed:
                assert result.blamed() == [DURABILITY], result.report()
                judged(result)
                return
            misses.append(seed)
    finally:
        failover.close()
    pytest.fail(f"{what} lost no acknowledged write across a failover in seeds {misses}: "
                "the durability clause has no teeth here")


def clean(make: Callable[[], Any], seed: int) -> None:
    failover = servers(make)
    try:
        result = run(failover, seed)
    finally:
        failover.close()
    assert result.ok, result.report()
    judged(result)


def test_synchronous_replication_keeps_every_write_across_a_failover() -> None:
    clean(lambda: failover_stores.FailoverPostgres(synchronous=True), seed=0)


@pytest.mark.full_evidence  # 35-53 s: over the default selection's budget beside the gate
def test_asynchronous_replication_is_caught_on_durability_alone() -> None:
    caught_on_durability(lambda: failover_stores.FailoverPostgres(synchronous=False),
                         "asynchronous replication")


@pytest.mark.full_evidence
def test_a_partition_then_failover_loses_nothing_with_the_reference_store() -> None:
    clean(lambda: failover_stores.FailoverPostgres(synchronous=True, partition=True), seed=0)


@pytest.mark.full_evidence
def test_a_timeout_that_cancels_the_commit_is_caught_on_durability_alone() -> None:
    caught_on_durability(
        lambda: failover_stores.FailoverPostgres(
            synchronous=True, partition=True, store=failover_stores.CancelOnTimeout),
        "a store whose timeout cancels a COMMIT waiting for the synchronous standby")


@pytest.mark.full_evidence
def test_two_failovers_in_a_row_swap_the_roles_and_keep_the_rows() -> None:
    """The tooling: after a failover and its end (the crashed server re-made as a
    standby), a second failover works, and the multi-host DSN follows the primary."""
    import psycopg

    failover = servers(lambda: failover_stores.FailoverPostgres(synchronous=True))
    try:
        first = failover.primary.port
        with psycopg.connect(failover.dsn, autocommit=True) as conn:
            conn.execute("CREATE TABLE kept (x int)")
            conn.execute("INSERT INTO kept VALUES (1)")
        for round_ in (2, 3):
            failover.fail_over()
            failover.remake_standby()
            with psycopg.connect(failover.dsn, autocommit=True) as conn:
                conn.execute("INSERT INTO kept VALUES (%s)", [round_])
                total = conn.execute("SELECT sum(x) FROM kept").fetchone()
                assert total == (sum(range(round_ + 1)),)
                assert conn.info.port == failover.primary.port
        assert failover.failovers == 2
        assert failover.primary.port == first  # swapped twice: back where it began
    finally:
        failover.close()
