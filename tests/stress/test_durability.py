"""XP-FAULT-DURABILITY: the deployment seam's crash action, judged from the recorded history.

The reference Postgres and MariaDB stores run the fault workload with
``faults="deployment"`` on a private server (tests/stress/crash_stores.py) that the
nemesis crashes (``pg_ctl stop -m immediate``; SIGKILL of mariadbd) and starts again
mid-workload:

* with the servers' durable defaults they lose nothing: PASS, and the run's coverage
  says durability was judged across at least one crash;
* with a configuration that acknowledges a commit before it is on disk
  (``synchronous_commit = off``; ``innodb_flush_log_at_trx_commit = 0``) they lose
  acknowledged writes, and the failure is blamed on XP-FAULT-DURABILITY and no other
  clause. (``innodb_flush_log_at_trx_commit = 2`` writes the log to the OS at each
  commit: a process crash loses nothing, only an OS crash would; the kit cannot cause
  one, so 2 is not a tooth here -- benchmarks/durability_probe.py measured 0 of 20.)

Each crash loses what the last fraction of a second acknowledged, so a run misses only
when its crash lands while nothing is written; a tooth gets up to three seeds and fails
only if every one misses (docs/benchmarks.md has the catch rate per run). The 10-seed
evidence for the durable stores is benchmarks/durability_campaign.py.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import Any

import pytest
from crash_stores import CrashableMariaDB, CrashablePostgres

from chongming_conformance.stress import StressProfile, run_scenario
from chongming_conformance.stress.runner import ScenarioResult, open_location

DURABILITY = "XP-FAULT-DURABILITY"
SEEDS = (0, 1, 2)


def _profile(seed: int) -> StressProfile:
    # The quick profile's size; the nemesis crashes the server at least once (the fault
    # phase goes on until it has).
    return StressProfile("quick", processes=3, rounds=10, deadline=60.0, crash_cycles=1,
                         fault_seconds=8.0, faults="deployment", seed=seed)


def _required(env: str) -> bool:
    return os.environ.get(env, "").strip() not in ("", "0")


def _server(make: Callable[[], Any], env: str) -> Any:
    from throwaway_servers import MissingBinaries

    try:
        return make()
    except MissingBinaries as exc:
        if _required(env):
            pytest.fail(f"{exc} (and {env}=1 forbids skipping)", pytrace=False)
        pytest.skip(str(exc))


def _run(crashable: Any, seed: int) -> ScenarioResult:
    profile = _profile(seed)
    with contextlib.ExitStack() as stack:
        opener, network = open_location(crashable.make_shared_store, "fault_workload", profile,
                                        stack, takes=False)
        return run_scenario("fault_workload", opener, profile, network=network,
                            deployment=crashable.deployment(), keep_logs=False)


def _judged(result: ScenarioResult) -> None:
    line = next(c for c in result.coverage if c.startswith("deployment:"))
    assert "durability judged across" in line and "across 0 " not in line, line


POSTGRES = pytest.param(CrashablePostgres, "CHONGMING_REQUIRE_POSTGRES", id="postgres")
MARIADB = pytest.param(CrashableMariaDB, "CHONGMING_REQUIRE_MARIADB", id="mariadb")


@pytest.mark.parametrize(("kind", "env"), [POSTGRES, MARIADB])
def test_durable_reference_store_keeps_every_acknowledged_write(kind: Any, env: str) -> None:
    crashable = _server(kind, env)
    try:
        result = _run(crashable, seed=0)
    finally:
        crashable.close()
    assert result.ok, result.report()
    _judged(result)


@pytest.mark.parametrize(("kind", "env", "settings"), [
    pytest.param(CrashablePostgres, "CHONGMING_REQUIRE_POSTGRES",
                 {"synchronous_commit": "off"}, id="postgres-synchronous_commit-off"),
    pytest.param(CrashableMariaDB, "CHONGMING_REQUIRE_MARIADB",
                 {"innodb_flush_log_at_trx_commit": "0"}, id="mariadb-flush-at-commit-0"),
])
def test_acknowledging_before_disk_is_caught_on_durability_alone(
    kind: Any, env: str, settings: dict[str, str]
) -> None:
    crashable = _server(lambda: kind(settings), env)
    misses = []
    try:
        for seed in SEEDS:
            result = _run(crashable, seed)
            assert not result.errors, result.report()
            if result.failed:
                assert result.blamed() == [DURABILITY], result.report()
                assert "(seed " in result.report()
                _judged(result)
                return
            misses.append(seed)
    finally:
        crashable.close()
    pytest.fail(f"{kind.__name__} with {settings} lost no acknowledged write in seeds "
                f"{misses}: the durability clause has no teeth here")
