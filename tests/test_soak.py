"""``chongming-conformance soak``: fresh seeds until the time is up or the first failure.

A correct store soaks green and the summary says what ran; a broken one stops the
campaign at its first failure with a replay command that fails the same way through the
plugin (the seed fixes the workers' choices; the broken store here fails on every
interleaving, so one replay is enough).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from chongming_conformance.commands.soak import parse_duration

ROOT = Path(__file__).resolve().parent.parent
STRESS = ROOT / "tests" / "stress"


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "chongming_conformance.commands.cli", *args], cwd=tmp_path,
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(tmp_path), str(STRESS), str(ROOT), os.environ.get("PYTHONPATH", "")])})


def test_durations_read_like_a_person_writes_them() -> None:
    assert parse_duration("90s") == 90 and parse_duration("30m") == 1800
    assert parse_duration("1h30m") == 5400 and parse_duration("2.5") == 2.5
    for bad in ("0", "soon", "30x", ""):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_duration(bad)


def test_a_correct_store_soaks_green_and_the_summary_says_what_ran(tmp_path: Path) -> None:
    proc = _run(tmp_path, "soak", "reference_stores.sqlite:make_store", "--for", "2s",
                "--no-hypothesis", "--json", "soak.json")
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    summary = json.loads((tmp_path / "soak.json").read_text(encoding="utf-8"))
    assert summary["verdict"] == "PASS" and summary["stopped"] == "time is up"
    assert summary["seeds"] and summary["calls"] > 0 and summary["anomalies"] == 0
    assert summary["steps"][0]["what"] == "stress mixed_workload"  # the mixed workload first
    assert all(s["seed"] in summary["seeds"] for s in summary["steps"])
    assert "calls checked" in proc.stdout and "soak summary: PASS" in proc.stdout


def test_a_broken_store_stops_the_soak_with_a_replay_that_fails_through_the_plugin(
    tmp_path: Path,
) -> None:
    (tmp_path / "bumping.py").write_text(
        "from stress_stores import TouchBumpsVersion, shared, single\n"
        "make_store = single(TouchBumpsVersion)\n"
        "make_shared_store = shared(TouchBumpsVersion)\n", encoding="utf-8")
    proc = _run(tmp_path, "soak", "bumping:make_store", "--for", "5m", "--no-hypothesis",
                "--json", "soak.json", "--html", "soak.html")
    assert proc.returncode == 1, proc.stdout + proc.stderr[-3000:]
    summary = json.loads((tmp_path / "soak.json").read_text(encoding="utf-8"))
    failure = summary["failure"]
    assert summary["stopped"].startswith("first failure") and failure["verdict"] == "FAIL"
    assert summary["steps"][-1] == failure  # it stopped there
    # --html: the failing step's report, its history drawn, saying it is a soak's.
    page = (tmp_path / "soak.html").read_text(encoding="utf-8")
    scenario = failure["what"].removeprefix("stress ")
    assert f'data-scenario="{scenario}"' in page and 'data-core="1"' in page
    assert "a soak campaign" in page and 'data-outcome="FAIL"' in page
    [line] = [x for x in proc.stdout.splitlines() if x.startswith("replay through the plugin: ")]
    replay = shlex.split(line.removeprefix("replay through the plugin: "))
    assert replay[0] == "pytest" and f"--chongming-seed={failure['seed']}" in replay
    again = subprocess.run(
        [sys.executable, "-m", *replay, "-p", "no:cacheprovider", "--chongming-report=r.json"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(tmp_path), str(STRESS), str(ROOT), os.environ.get("PYTHONPATH", "")])})
    assert again.returncode == 1, again.stdout[-3000:]
    doc = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert doc["run"]["seed"] == failure["seed"]
    assert any(c["outcome"] == "FAIL" for c in doc["clauses"]), again.stdout[-3000:]


def test_sigterm_stops_the_soak_with_the_summary_of_what_ran(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "chongming_conformance.commands.cli", "soak",
         "reference_stores.sqlite:make_store", "--for", "10m", "--no-hypothesis",
         "--json", "soak.json"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT),
                                                         os.environ.get("PYTHONPATH", "")])})
    assert proc.stdout is not None
    first = proc.stdout.readline()  # the first step's progress line: something ran
    assert first.startswith("soak reference_stores.sqlite:make_store: "), first
    proc.terminate()
    out, err = proc.communicate(timeout=300)
    summary = json.loads((tmp_path / "soak.json").read_text(encoding="utf-8"))
    assert summary["stopped"] == "interrupted (Ctrl-C or SIGTERM)", err[-2000:]
    assert summary["steps"] and summary["verdict"] == "PASS"
    assert "soak summary: PASS" in out and proc.returncode == 0


def test_a_set_up_that_fails_stops_the_soak_as_an_error_not_a_failure(tmp_path: Path) -> None:
    """The bad day of issue 43: the network resets the set-up. The soak cannot go on, so it
    stops there as it does at a FAIL, but says ERROR: nothing ran, no evidence either way."""
    (tmp_path / "unreachable.py").write_text(
        "from reference_stores.sqlite import make_store\n"
        "def make_shared_store():\n"
        "    raise ConnectionResetError(104, 'Connection reset by peer')\n"
        "    yield\n", encoding="utf-8")
    proc = _run(tmp_path, "soak", "unreachable:make_store", "--for", "5m", "--no-hypothesis",
                "--json", "soak.json")
    assert proc.returncode == 1, proc.stdout + proc.stderr[-3000:]
    summary = json.loads((tmp_path / "soak.json").read_text(encoding="utf-8"))
    assert summary["verdict"] == "ERROR" and summary["failure"]["verdict"] == "ERROR"
    assert summary["stopped"].startswith("first error (set-up failed)"), summary["stopped"]
    assert len(summary["steps"]) == 1 and summary["calls"] == 0
    assert "soak summary: ERROR" in proc.stdout and "error (its set-up failed)" in proc.stdout
