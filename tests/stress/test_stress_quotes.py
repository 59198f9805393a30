"""Every stress anomaly quotes a merged, time-ordered slice of every worker's calls around
the calls it cites, the report says where the worker logs are kept, and the ``timeline``
command prints the very same slice from the kept logs (issue 24, item 3)."""

from __future__ import annotations

import contextlib
import shlex
import shutil

import pytest
from stress_stores import CachingReads, CheckThenWriteSave, shared

from chongming_conformance.seam.factory import enter_opener
from chongming_conformance.stress import ScenarioResult, run_scenario
from chongming_conformance.stress.__main__ import main as stress_main
from chongming_conformance.stress.timeline import SLICE_LINES


def _failing(store: type, scenario: str) -> ScenarioResult:
    with contextlib.ExitStack() as stack:
        opener = enter_opener(shared(store), stack)
        return run_scenario(scenario, opener, "quick")


@pytest.mark.parametrize(("store", "scenario"), [(CachingReads, "shared_visibility"),
                                                 (CheckThenWriteSave, "save_race")])
def test_a_failure_quotes_every_workers_calls_and_the_command_prints_them(
        store: type, scenario: str, capsys: pytest.CaptureFixture[str]) -> None:
    result = _failing(store, scenario)
    try:
        assert result.failed and result.log_dir is not None, result.report()
        report = result.report()
        assert any(line.startswith(f"  worker logs kept in {result.log_dir} ")
                   for line in report.splitlines()[1:3])  # after the head (and a hint)
        quoted = [a for a in result.anomalies if a.timeline]
        assert quoted and all(a.cites for a in quoted), report
        first = quoted[0]
        lines = first.timeline.splitlines()
        assert len([x for x in lines if not x.lstrip().startswith("…")]) <= SLICE_LINES
        marked = [x for x in lines if x.startswith("»")]
        assert len(marked) == len(first.cites)
        # every worker's calls, not only the cited ones: other workers appear too
        workers = {x.split()[3] for x in lines if x[:1] in "» " and "#" in x}
        assert len(workers) > 1, first.timeline
        # the report shows the slice (indented) and the command that prints it
        assert first.command in report
        assert all(line in report for line in lines[:3])
        # ... and the command prints exactly those lines from the kept logs
        argv = shlex.split(first.command)
        assert argv[:4] == ["python", "-m", "chongming_conformance.stress", "timeline"]
        capsys.readouterr()
        assert stress_main(argv[3:]) == 0
        assert capsys.readouterr().out == first.timeline + "\n"
    finally:
        shutil.rmtree(result.log_dir or "", ignore_errors=True)


def test_a_long_report_leaves_out_whole_blocks_and_keeps_the_log_path() -> None:
    result = _failing(CheckThenWriteSave, "save_race")
    try:
        short = result.report(chars=1200)
        assert len(short) <= 1200
        assert f"worker logs kept in {result.log_dir}" in short
        assert "more block(s) not shown" in short
        assert all(not line.endswith("…") for line in short.splitlines())
    finally:
        shutil.rmtree(result.log_dir or "", ignore_errors=True)
