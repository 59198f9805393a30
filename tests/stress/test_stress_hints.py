"""stress.hints.common_cause: one hint when a scenario's anomalies share one cause, else none."""

from __future__ import annotations

from typing import Any

from stress_helpers import until_caught
from stress_stores import CachingReads, CheckThenWriteSave, shared

from chongming_conformance.stress.harness import Anomaly
from chongming_conformance.stress.hints import common_cause
from chongming_conformance.stress.runner import ScenarioResult


def _anomaly(kind: str, **evidence: Any) -> Anomaly:
    return Anomaly("scenario", kind, f"{kind} {evidence}", evidence)


def test_others_writes_unseen_points_at_uncommitted_transactions() -> None:
    anomalies = [_anomaly("stale-read", worker=w, writer=(w + 1) % 3, round=r)
                 for w in range(3) for r in range(2)]
    anomalies.append(_anomaly("stale-read", worker=1, round=0, version=0))  # a spin read
    hint = common_cause(anomalies)
    assert hint is not None and "autocommit off" in hint


def test_a_worker_missing_its_own_write_is_not_the_autocommit_pattern() -> None:
    anomalies = [_anomaly("stale-read", worker=0, writer=1),
                 _anomaly("stale-read", worker=2, writer=2)]
    assert common_cause(anomalies) is None


def test_mixed_symptoms_get_no_hint() -> None:
    anomalies = [_anomaly("stale-read", worker=0, writer=1), _anomaly("torn-read", worker=1)]
    assert common_cause(anomalies) is None
    assert common_cause([_anomaly("stale-read", worker=0, writer=1)]) is None, "one is no pattern"
    assert common_cause([]) is None


def test_one_error_everywhere_is_named() -> None:
    error = {"type": "OperationalError", "message": "(1213, 'Deadlock found')"}
    anomalies = [_anomaly("unexpected-error", worker=w, error=error) for w in range(3)]
    hint = common_cause(anomalies)
    assert hint is not None and "OperationalError: (1213, 'Deadlock found')" in hint
    other = {"type": "KeyError", "message": "'x'"}
    assert common_cause([*anomalies, _anomaly("unexpected-error", worker=0, error=other)]) is None


def test_one_kind_with_a_known_cause_is_named() -> None:
    hint = common_cause([_anomaly("lost-update", round=r) for r in range(3)])
    assert hint is not None and "conditional UPDATE" in hint
    hint = common_cause([_anomaly("no-winner", round=r) for r in range(2)])
    assert hint is not None and "FOUND_ROWS" in hint
    assert common_cause([_anomaly("starved", command="c"), _anomaly("starved", command="d")]) \
        is None, "a kind without a known cause gets no guess"


def test_a_per_process_cache_gets_the_visibility_hint_end_to_end() -> None:
    _, result = until_caught(shared(CachingReads), "shared_visibility", "quick", attempts=5)
    assert result.kinds() == {"stale-read"}, result.report()
    hint = common_cause(result.anomalies)
    assert hint is not None and "per-process cache" in hint, result.report()
    # The failure message the contract raises (ScenarioResult.report) carries it, second line.
    assert result.report().splitlines()[1] == f"  hint: {hint}"


def test_a_non_atomic_save_gets_the_cas_hint_end_to_end() -> None:
    _, result = until_caught(shared(CheckThenWriteSave), "save_race", "quick", attempts=5)
    assert result.kinds() == {"lost-update"}, result.report()
    hint = common_cause(result.anomalies)
    assert hint is not None and "conditional UPDATE" in hint, result.report()
    assert f"  hint: {hint}" in result.report().splitlines()


def test_a_report_without_a_shared_cause_has_no_hint_line() -> None:
    result = ScenarioResult("save_race", ("XP-SAVE-ATOMIC",), "quick",
                            anomalies=[_anomaly("lost-update"), _anomaly("torn-read")])
    assert result.hint is None
    assert "hint:" not in result.report()
