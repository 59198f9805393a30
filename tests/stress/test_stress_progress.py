"""A running scenario says how far it is: the harness reads the workers' logs as they grow
and notes the highest round started (chongming_conformance.seam.progress)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from chongming_conformance.seam import progress
from chongming_conformance.stress.harness import RoundWatcher


def _line(record: dict[str, object]) -> str:
    return json.dumps(record, separators=(",", ":")) + "\n"


def test_the_watcher_notes_the_highest_round_any_worker_started(tmp_path: Path) -> None:
    paths = {0: tmp_path / "w0.jsonl", 1: tmp_path / "w1.jsonl"}
    paths[0].write_text(_line({"ev": "inv", "w": 0, "seq": 1, "op": "save", "round": 1}))
    # A half-written line is not read until it is complete.
    paths[1].write_text(_line({"ev": "inv", "w": 1, "seq": 1, "op": "get", "round": 2})
                        + '{"ev":"inv","w":1,"round":7')
    profile = SimpleNamespace(rounds=8, deadline=60.0)
    harness = SimpleNamespace(scenario="save_race", profile=profile, limit=60.0,
                              remaining=lambda: 51.0)
    notes: list[str] = []
    watch = RoundWatcher(paths)
    with progress.reporting(notes.append):
        watch.next_note = 0.0
        watch.tick(harness)  # type: ignore[arg-type]
        with paths[1].open("a") as f:
            f.write(',"seq":2}\n')
        watch.next_note = 0.0
        watch.tick(harness)  # type: ignore[arg-type]
    assert notes == [
        "stress save_race: round 3/8, 9 s of at most 60 s",
        "stress save_race: round 8/8, 9 s of at most 60 s",
    ]


def test_the_watcher_waits_between_notes(tmp_path: Path) -> None:
    harness = SimpleNamespace(scenario="x", profile=SimpleNamespace(rounds=2, deadline=6.0),
                              limit=6.0, remaining=lambda: 5.0)
    notes: list[str] = []
    watch = RoundWatcher({0: tmp_path / "missing.jsonl"})
    with progress.reporting(notes.append):
        watch.tick(harness)  # type: ignore[arg-type]  # too soon after it started
        watch.next_note = 0.0
        watch.tick(harness)  # type: ignore[arg-type]  # no log yet: time only
    assert notes == ["stress x: 1 s of at most 6 s"]


def test_a_note_without_a_reporter_is_dropped_and_a_failing_reporter_is_harmless() -> None:
    progress.note("nobody listens")  # no reporter installed: nothing happens

    def broken(text: str) -> None:
        raise OSError("terminal gone")

    with progress.reporting(broken):
        progress.note("still fine")
    seen: list[str] = []
    with progress.reporting(seen.append):
        with progress.reporting(None):
            progress.note("muted")
        progress.note("heard")
    assert seen == ["heard"]


def test_a_closing_phase_logged_as_round_n_shows_as_the_last_round(tmp_path: Path) -> None:
    path = tmp_path / "w.jsonl"
    path.write_text(_line({"ev": "inv", "w": 0, "seq": 9, "op": "get", "round": 30}))
    harness = SimpleNamespace(scenario="touch_save",
                              profile=SimpleNamespace(rounds=30, deadline=120.0),
                              limit=120.0, remaining=lambda: 117.0)
    notes: list[str] = []
    watch = RoundWatcher({0: path})
    watch.next_note = 0.0
    with progress.reporting(notes.append):
        watch.tick(harness)  # type: ignore[arg-type]
    assert notes == ["stress touch_save: round 30/30, 3 s of at most 120 s"]


@pytest.mark.parametrize("rounds", [1, 3])
def test_round_numbers_are_one_based_of_the_profile(tmp_path: Path, rounds: int) -> None:
    path = tmp_path / "w.jsonl"
    path.write_text(_line({"ev": "note", "w": 0, "what": "barrier", "round": 0}))
    harness = SimpleNamespace(scenario="s", profile=SimpleNamespace(rounds=rounds, deadline=9.0),
                              limit=9.0, remaining=lambda: 9.0)
    notes: list[str] = []
    watch = RoundWatcher({0: path})
    watch.next_note = 0.0
    with progress.reporting(notes.append):
        watch.tick(harness)  # type: ignore[arg-type]
    assert notes == [f"stress s: round 1/{rounds}, 0 s of at most 9 s"]
