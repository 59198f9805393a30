"""The fault run's wiring: which scenarios run, the seam, set-up and teardown faults, the CLI.

The verdicts themselves have teeth in test_fault_teeth.py (broken stores caught on their
own clause); here: what a run covers and says, and that the kit never crashes on a fault.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from chongming_conformance.faults import Network, takes_network
from chongming_conformance.faults.plan import WRITES, Cell
from chongming_conformance.stress import StressContract, fault_coverage, run_all
from chongming_conformance.stress.contract import NotVerified
from chongming_conformance.stress.runner import selected
from chongming_conformance.stress.stress_profiles import get_profile
from chongming_conformance.stress.timeline import main as timeline_main
from reference_stores import sqlite as sqlite_store

ROOT = Path(__file__).resolve().parents[2]
QUICK = get_profile("quick")


def test_fault_run_is_left_out_unless_faults_are_requested() -> None:
    assert "fault_workload" not in selected(QUICK)
    assert "fault_workload" in selected(dataclasses.replace(QUICK, faults="pause"))
    assert "mixed_workload" in selected(QUICK)


def test_a_profile_refuses_an_unknown_fault_mode() -> None:
    with pytest.raises(ValueError, match="faults must be one of none, pause, network"):
        dataclasses.replace(QUICK, faults="chaos")


def test_the_seam_is_read_off_the_signature() -> None:
    def without() -> None: ...

    def with_keyword(network: Any = None) -> None: ...

    def keyword_only(*, network: Any = None) -> None: ...

    assert not takes_network(without)
    assert takes_network(with_keyword) and takes_network(keyword_only)


def test_a_network_never_crosses_a_process_boundary() -> None:
    import pickle

    with Network() as net, pytest.raises(TypeError, match="stays in the parent process"):
        pickle.dumps(net)


def test_route_refuses_a_bad_address_with_the_cause() -> None:
    with Network() as net:
        with pytest.raises(TypeError, match=r"port must be an int in 1\.\.65535"):
            net.route("127.0.0.1", 0)
        with pytest.raises(TypeError, match="host must be a non-empty str"):
            net.route("", 5432)


class _NotRequested(StressContract):
    stress_profile = QUICK

    def make_shared_store(self) -> Any:
        raise AssertionError("a fault run that was not requested must not set anything up")


def test_the_contract_reports_an_unrequested_fault_run_not_verified() -> None:
    case = _NotRequested()
    case.setup_method()
    try:
        with pytest.raises(NotVerified, match="faults were not requested"):
            case.assert_stress("fault_workload")
    finally:
        case.teardown_method()


def test_sqlite_under_pauses_passes_and_says_what_it_covered(
        capsys: pytest.CaptureFixture[str]) -> None:
    """The correct SQLite store, pauses only (it declares no network): PASS, and the result
    names the seed, the kinds and the faults applied."""
    profile = dataclasses.replace(QUICK, faults="network", seed=3, fault_seconds=4.0)
    [result] = run_all(sqlite_store.make_shared_store, profile, scenarios=["fault_workload"],
                       network_absent="a file on local disk", keep_logs=True)
    assert result.ok, result.report()
    line, deployed = result.coverage
    assert deployed == ("deployment: not described (the store's module has no "
                        "chongming_deployment()): no deployment action ran, durability after a "
                        "server crash not judged")
    assert "faults network (seed 3): kinds pause;" in line
    assert "no network (declared: a file on local disk)" in line
    assert result.stats["fault_seed"] == 3 and result.stats["faults_applied"].get("pause", 0) >= 1
    # The timeline shows each fault among the calls, as a line of the nemesis.
    assert result.log_dir is not None
    assert timeline_main([result.log_dir, "--task", "mix-t0"]) == 0
    lines = capsys.readouterr().out.splitlines()
    faults = [x for x in lines if " nemesis #" in x]
    assert faults and all(("pause one worker for" in x or "pause the next worker inside" in x)
                          and "paused worker" in x for x in faults)
    assert any("get('mix-t0')" in x for x in lines)


def test_a_fault_run_short_of_its_cells_is_not_verified_not_pass(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A run that did not land what a fault clause's verdict needs -- here a minimum of 500
    pauses inside writes, out of any run's reach -- is NOT VERIFIED on that clause, with the
    short cell named: a correct store gets no PASS for what the run did not exercise. Its
    matrix says what did land."""
    unreachable = Cell(("pause",), WRITES, 500, "more than any run lands")
    monkeypatch.setitem(fault_coverage.REQUIRED, "pause",
                        {"XP-FAULT-SAFETY": (unreachable,)})
    profile = dataclasses.replace(QUICK, faults="pause", seed=1, fault_seconds=1.0)
    [result] = run_all(sqlite_store.make_shared_store, profile, scenarios=["fault_workload"],
                       network_absent="a file on local disk")
    assert not result.failed and not result.errors, result.report()
    assert result.verdict == "NOT VERIFIED", result.report()
    assert set(result.unproven) == {"XP-FAULT-SAFETY"}, result.unproven
    why = result.unproven["XP-FAULT-SAFETY"]
    assert "of 500" in why and "seed 1" in why, why
    coverage = result.fault_coverage
    assert coverage is not None and coverage["seed"] == 1
    [cell] = coverage["required"]
    assert not cell["met"] and 1 <= cell["landed"] < 500  # pauses landed, too few
    assert coverage["rows"]["pause"]


def test_network_faults_without_the_seam_are_not_verified() -> None:
    """A store whose factory takes no 'network' keyword and declares nothing: pauses run,
    and the run is NOT VERIFIED (never PASS for network faults that never reached it)."""
    profile = dataclasses.replace(QUICK, faults="network", fault_seconds=2.0)
    [result] = run_all(sqlite_store.make_shared_store, profile, scenarios=["fault_workload"])
    assert result.verdict == "NOT VERIFIED", result.report()
    assert "takes no 'network' keyword" in result.unverified[0]


def _ignores_network(network: Any = None) -> Iterator[Callable[[], Any]]:
    yield from sqlite_store.make_shared_store()


def test_a_seam_that_routes_nothing_is_not_verified() -> None:
    profile = dataclasses.replace(QUICK, faults="network", fault_seconds=2.0)
    [result] = run_all(_ignores_network, profile, scenarios=["fault_workload"])
    assert result.verdict == "NOT VERIFIED", result.report()
    assert any("routed no connection" in u for u in result.unverified)


def _teardown_fails() -> Iterator[Callable[[], Any]]:
    yield from sqlite_store.make_shared_store()
    raise ConnectionResetError(104, "Connection reset by peer")


def _setup_fails() -> Iterator[Callable[[], Any]]:
    error = ConnectionResetError(104, "Connection reset by peer")
    error.add_note("the database 'chongming_t_x' may be left behind: drop it with ...")
    raise error
    yield  # a generator factory


def test_run_all_reports_a_set_up_or_teardown_fault_on_its_line() -> None:
    """The MariaDB failure the issue measured: a reset during drop_schema escaped run_all and
    crashed the CLI. Now it is that scenario's error; the other scenarios still run. A
    failed set-up is ERROR, not FAIL: nothing ran, so it is no evidence against the store."""
    [torn] = run_all(_teardown_fails, QUICK, scenarios=["close_isolated"])
    assert torn.verdict == "FAIL"
    assert any("teardown failed: ConnectionResetError" in e for e in torn.errors), torn.errors
    [unset] = run_all(_setup_fails, QUICK, scenarios=["close_isolated"])
    assert unset.verdict == "ERROR", unset.report()
    assert unset.errored and not unset.failed and not unset.ok
    assert unset.blamed() == []
    assert "make_shared_store() failed: ConnectionResetError" in unset.errors[0]
    # What the factory could not clean up (its error's note) is on the scenario's line too.
    assert "'chongming_t_x' may be left behind: drop it with" in unset.errors[0]


@pytest.mark.postgres
@pytest.mark.usefixtures("postgres_dsn")  # the suite's guard: a failure when required
def test_the_cli_prints_its_table_when_a_proxy_resets_the_teardown(tmp_path: Path) -> None:
    """A real proxy between the factory and Postgres, resetting every connection while the
    factory tears the schema down: the CLI prints its table and exits 1, no traceback."""
    proc = subprocess.run(
        [sys.executable, "-m", "chongming_conformance.stress",
         "resetting_teardown:make_shared_store", "--profile", "quick",
         "--scenario", "close_isolated", "--scenario", "create_race"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(Path(__file__).parent), str(ROOT), os.environ.get("PYTHONPATH", "")])},
    )
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.returncode == 1, proc.stdout + proc.stderr[-3000:]
    assert "close_isolated" in proc.stdout and "create_race" in proc.stdout
    assert "teardown failed" in proc.stderr
    assert proc.stdout.count("FAIL") == 2


def test_partial_network_seam_keyword_reaches_the_factory() -> None:
    seen: list[Any] = []

    def factory(network: Any = None) -> Iterator[Callable[[], Any]]:
        seen.append(network)
        yield from sqlite_store.make_shared_store()

    profile = dataclasses.replace(QUICK, faults="network", fault_seconds=1.0)
    run_all(factory, profile, scenarios=["close_isolated"])
    assert seen == [None]  # only the fault run gets the seam
    run_all(factory, profile, scenarios=["fault_workload"])
    assert isinstance(seen[-1], Network)


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "chongming_conformance.stress", *args], cwd=tmp_path,
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(tmp_path), str(ROOT), os.environ.get("PYTHONPATH", "")])})


def test_the_cli_says_durability_was_not_judged_without_a_crash_action(tmp_path: Path) -> None:
    """Deployment faults asked for, none offered: exit 2 (NOT VERIFIED), with the reason;
    a malformed chongming_deployment() is refused before any scenario, exit 4."""
    proc = _cli(tmp_path, "reference_stores.sqlite:make_shared_store", "--profile", "quick",
                "--faults", "deployment", "--scenario", "close_isolated")
    assert proc.returncode == 2, proc.stdout + proc.stderr[-3000:]
    assert "NOT VERIFIED XP-FAULT-DURABILITY: not judged" in proc.stderr
    assert "offers no crash action" in proc.stderr
    (tmp_path / "misdeployed.py").write_text(
        "from reference_stores.sqlite import make_shared_store\n"
        "chongming_deployment = {'crash': 'pg_ctl stop'}\n", encoding="utf-8")
    proc = _cli(tmp_path, "misdeployed:make_shared_store", "--profile", "quick",
                "--faults", "deployment")
    assert proc.returncode == 4, proc.stdout + proc.stderr[-3000:]
    assert "misdeployed.chongming_deployment is a dict" in proc.stderr
    assert "scenario" not in proc.stdout  # refused before any scenario ran


def test_a_failing_cli_run_prints_the_command_that_replays_it(tmp_path: Path) -> None:
    """--seed random is drawn once and printed; the replay line names scenario, profile and
    seed, and running it fails the same way."""
    (tmp_path / "bumping.py").write_text(
        f"import sys\nsys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "from stress_stores import TouchBumpsVersion, shared\n"
        "make_shared_store = shared(TouchBumpsVersion)\n", encoding="utf-8")
    proc = _cli(tmp_path, "bumping:make_shared_store", "--profile", "quick", "--seed", "random",
                "--crash-cycles", "2", "--scenario", "touch_save")
    assert proc.returncode == 1, proc.stdout + proc.stderr[-3000:]
    [line] = [x for x in proc.stderr.splitlines() if x.startswith("replay touch_save: ")]
    command = shlex.split(line.removeprefix("replay touch_save: "))
    seed = command[command.index("--seed") + 1]
    assert f"seed {seed}," in proc.stdout  # the table's summary names the drawn seed
    assert command[:4] == ["python", "-m", "chongming_conformance.stress",
                           "bumping:make_shared_store"]
    assert command[4:] == ["--profile", "quick", "--scenario", "touch_save", "--seed", seed,
                           "--crash-cycles", "2"]
    again = _cli(tmp_path, *command[3:])
    assert again.returncode == 1, again.stdout + again.stderr[-3000:]
    assert line in again.stderr
