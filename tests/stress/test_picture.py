"""The picture of a stress run (``stress.picture``): what the HTML report draws.

A failing run carries every call as a bar (lane, kind, invoke and return times, outcome),
the anomaly's cited calls as its core, and the text timeline as the picture's text
alternative; a passing run without faults carries none. A long history keeps every bar
and thins only the texts, and says so.
"""

from __future__ import annotations

import json

from stress_helpers import until_caught
from stress_stores import SelectThenDeleteEachPrune, shared

from chongming_conformance.stress import StressProfile, run_scenario
from chongming_conformance.stress.picture import (
    DETAIL_LIMIT,
    OUTCOMES,
    SCHEMA,
    keep_picture,
    picture_of_entries,
    take_pictures,
)
from chongming_conformance.stress.timeline import NEMESIS, Entry
from reference_stores.sqlite import make_shared_store


def test_a_failing_run_is_drawn_with_its_core() -> None:
    _, result = until_caught(shared(SelectThenDeleteEachPrune), "prune_race", "quick",
                             attempts=5)
    assert result.failed, result.report()
    p = result.picture
    assert p is not None and p["schema"] == SCHEMA
    assert p["scenario"] == "prune_race" and p["clause"] == "XP-PRUNE-SAVE-RACE"
    assert p["verdict"] == "FAIL"
    assert p["lanes"] == [f"w{i}" for i in range(len(p["lanes"]))] and len(p["lanes"]) >= 2
    assert len(p["calls"]) == result.ops
    for lane, _seq, kind, t0, t1, outcome, detail in p["calls"]:
        assert 0 <= lane < len(p["lanes"]) and 0 <= kind < len(p["kinds"])
        assert t0 >= 0 and (t1 is None or t1 >= t0) and outcome in OUTCOMES
        assert -1 <= detail < len(p["details"])
    assert {"prune", "save", "get"} <= set(p["kinds"])
    assert "conflict" in {c[5] for c in p["calls"]}  # saves that lost to the prune
    first = p["anomalies"][0]
    assert first["kind"] == "revived-task-pruned" and first["core"]
    cited = [p["calls"][i] for i in first["core"]]
    assert {p["kinds"][c[2]] for c in cited} >= {"save", "prune"}
    assert all(c[6] >= 0 for c in cited)  # the core keeps its text
    assert "»" in p["text"]  # the text alternative is the quoted timeline
    assert json.loads(json.dumps(p)) == p  # plain JSON, as the report carries it


def test_a_passing_run_without_faults_has_no_picture(tmp_path: object) -> None:
    gen = make_shared_store()
    opener = next(gen)
    try:
        result = run_scenario("save_race", opener, StressProfile(
            name="quick", processes=2, rounds=2, deadline=60.0), keep_logs=False)
    finally:
        gen.close()
    assert result.ok, result.report()
    assert result.picture is None


def _entries(n: int, lanes: int = 4) -> list[Entry]:
    out = []
    for i in range(n):
        t = i * 0.001
        out.append(Entry(f"w{i % lanes}", i // lanes, f"get('task-{i}') " + "x" * 100,
                         "ok" if i % 7 else "raised StoreError: boom", t, t + 0.0005,
                         result="Task(...)", ref=i + 1))
    out.append(Entry(NEMESIS, 1, "blackhole every connection for 1.0 s", "applied", 2.0, 3.0))
    return out


def test_a_long_history_keeps_every_bar_and_thins_the_texts() -> None:
    entries = _entries(10_000)
    core, context = [5001, 5002], [4990]
    p = picture_of_entries(entries, [("not-linearizable", None, "m", core, context, "stuck")],
                           scenario="mixed_workload", clause="XP-MIXED-WORKLOAD",
                           profile="thorough", seed=7, verdict="FAIL")
    assert len(p["calls"]) == 10_000
    assert len(p["details"]) == DETAIL_LIMIT < 10_000
    assert p["thinned"] and "7,000 of 10,000 calls" in p["thinned"]
    a = p["anomalies"][0]
    assert [p["calls"][i][6] >= 0 for i in a["core"] + a["context"]] == [True] * 3
    assert a["stuck"] == "stuck" and a["clause"] == "XP-MIXED-WORKLOAD"
    # the detailed calls are the ones nearest the core in time
    kept_times = [p["calls"][i][3] for i in range(10_000) if p["calls"][i][6] >= 0]
    assert min(kept_times) > 2.0 and max(kept_times) < 8.0
    assert p["faults"] == [{"label": "nemesis #1", "what": "blackhole every connection for "
                            "1.0 s", "detail": "applied", "start": 2.0, "end": 3.0}]
    assert {c[5] for c in p["calls"]} == {"ok", "raised"}
    assert len(json.dumps(p)) < 2_000_000


def test_a_short_history_keeps_every_text() -> None:
    p = picture_of_entries(_entries(50), [], scenario="s", clause="XP-MIXED-WORKLOAD",
                           profile="quick", seed=None, verdict="PASS")
    assert p["thinned"] is None and len(p["details"]) == 50
    assert all(c[6] >= 0 for c in p["calls"])


def test_pictures_are_kept_until_taken() -> None:
    take_pictures()
    keep_picture({"scenario": "a"})
    keep_picture({"scenario": "b"})
    assert [p["scenario"] for p in take_pictures()] == ["a", "b"]
    assert take_pictures() == []
