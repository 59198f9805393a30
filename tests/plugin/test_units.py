"""In-process checks of the plugin's parts: masking, capabilities, timeouts, schema, verdicts."""

from __future__ import annotations

import inspect
import signal
import time
from typing import Any

import pytest

from chongming_conformance import CLAUSES, Scope
from chongming_conformance.plugin.harvest import hypothesis_info
from chongming_conformance.protocol import TaskStore
from chongming_conformance.protocol.capabilities import (
    Capabilities,
    CapabilityError,
    parse_capabilities,
)
from chongming_conformance.report import (
    REPORT_SCHEMA,
    TestResult,
    evaluate,
    gate_failures,
    mask_secrets,
    validate_report,
)
from chongming_conformance.seam.factory import protocol_mismatches
from chongming_conformance.seam.timeouts import StoreCallTimeout, TimeoutProxy, call_with_timeout
from reference_stores.memory import InMemoryTaskStore

# -- masking -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "masked"),
    [
        ("postgresql://alice:s3cret@db:5432/x", "postgresql://alice:***@db:5432/x"),
        ("redis://:p%40ss@cache:6379/0", "redis://:***@cache:6379/0"),
        ("host=db user=bob password=hunter2 dbname=x", "host=db user=bob password=*** dbname=x"),
        ("password='q w' host=db", "password='***' host=db"),
        # A bare value runs to the next whitespace or quote: a password may hold '&', so the
        # rest of a query string is masked with it (over-masking is the accepted side).
        ("https://example.org/path?token=abc&x=1", "https://example.org/path?token=***"),
        ("postgresql://alice@db/x (no password)", "postgresql://alice@db/x (no password)"),
    ],
)
def test_mask_secrets(raw: str, masked: str) -> None:
    assert mask_secrets(raw).startswith(masked)
    for secret in ("s3cret", "p%40ss", "hunter2", "abc", "q w"):
        assert secret not in mask_secrets(raw)


# -- capabilities -------------------------------------------------------------------------


def test_capabilities_unsupported_cross_process_covers_exactly_the_xp_clauses() -> None:
    caps = parse_capabilities({"unsupported": {"cross_process": "one process"}}, "m.CAPS")
    xp = {cid for cid, c in CLAUSES.items() if c.scope is Scope.CROSS_PROCESS}
    assert set(caps.unsupported_clauses()) == xp and xp


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ([], "must be a mapping"),
        ({"unsuported": {}}, "did you mean 'unsupported'"),
        ({"unsupported": {"cross_process": ""}}, "non-empty reason"),
        ({"unsupported": {"threads": "x"}}, "unknown capability 'threads'"),
        ({"deviations": {"SAVE-CASS": "x"}}, "did you mean 'SAVE-CAS'"),
        ({"deviations": {"QUERY-PUSHDOWN": "x"}}, "review clause"),
        (
            {"unsupported": {"cross_process": "x"}, "deviations": {"XP-SAVE-ATOMIC": "y"}},
            "already excused",
        ),
    ],
)
def test_capability_errors(raw: Any, fragment: str) -> None:
    with pytest.raises(CapabilityError) as info:
        parse_capabilities(raw, "mod.CHONGMING_CAPABILITIES")
    assert fragment in str(info.value)


# -- timeouts ------------------------------------------------------------------------------


def test_proxy_keeps_the_store_shape() -> None:
    proxy: Any = TimeoutProxy(InMemoryTaskStore(), 5.0)
    assert isinstance(proxy, TaskStore)
    assert protocol_mismatches(proxy) == []
    assert str(inspect.signature(proxy.save)) == str(inspect.signature(InMemoryTaskStore().save))
    assert proxy.counts()  # calls go through


def test_proxy_of_an_incomplete_store_is_incomplete() -> None:
    class Half:
        def get(self, task_id: str) -> None:
            return None

    problems = protocol_mismatches(TimeoutProxy(Half(), 5.0))
    assert "missing method create()" in problems and "missing method get()" not in problems


def test_hung_call_raises_naming_the_method_and_restores_sigalrm() -> None:
    class Stuck:
        def claim_commands(self, **kwargs: Any) -> None:
            time.sleep(60)

    before = signal.getsignal(signal.SIGALRM)
    proxy: Any = TimeoutProxy(Stuck(), 0.2)
    with pytest.raises(StoreCallTimeout, match=r"store call claim_commands\(\) did not return"):
        proxy.claim_commands(now=None, lease_seconds=1)
    assert signal.getsignal(signal.SIGALRM) is before
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_timeout_is_not_an_exception_a_store_could_swallow() -> None:
    def swallowing() -> str:
        try:
            time.sleep(60)
        except Exception:  # a store wrapping driver errors must not hide the hang
            return "swallowed"
        return "slept"

    with pytest.raises(StoreCallTimeout):
        call_with_timeout("get()", 0.2, swallowing)


def test_zero_disables_the_timeout() -> None:
    assert call_with_timeout("get()", 0, lambda: 42) == 42


# -- schema and verdicts -------------------------------------------------------------------


def test_validator_finds_departures() -> None:
    assert validate_report({}, REPORT_SCHEMA)[:1] == ["$: missing key 'schema'"]
    doc = {"schema": "other", "schema_version": "1"}
    problems = validate_report(doc)
    assert "$.schema: 'other' is not one of ['chongming-conformance-report']" in problems
    assert "$.schema_version: expected integer, got str" in problems


def _results(**outcomes: list[str]) -> dict[str, list[TestResult]]:
    return {
        cid.replace("_", "-"): [TestResult(f"t::{cid}{i}", o) for i, o in enumerate(outs)]
        for cid, outs in outcomes.items()
    }


def test_clause_outcome_rules() -> None:
    caps = Capabilities(deviations={"QUERY-TAG-EXACT": "legacy", "QUERY-NAME-EXACT": "legacy"})
    results = {
        r.clause.id: r
        for r in evaluate(
            _results(
                SAVE_CAS=["passed", "passed"],
                CREATE_THEN_GET=["passed", "failed"],
                QUERY_LIMIT=["passed", "skipped"],
                QUERY_TAG_EXACT=["xfailed"],
                QUERY_NAME_EXACT=["xpassed"],
                QUERY_ALL=["xpassed"],  # strict xpass of a test deviating elsewhere: passed
                XP_SAVE_ATOMIC=["passed"],
            ),
            caps,
            shared_available=False,
        )
    }
    assert results["SAVE-CAS"].outcome == "PASS"
    assert results["CREATE-THEN-GET"].outcome == "FAIL"
    assert results["QUERY-LIMIT"].outcome == "NOT VERIFIED"
    assert results["QUERY-TAG-EXACT"].outcome == "DEVIATION"
    assert results["QUERY-NAME-EXACT"].outcome == "FAIL"
    assert results["QUERY-ALL"].outcome == "PASS"
    assert results["XP-SAVE-ATOMIC"].outcome == "NOT VERIFIED"  # never PASS without sharing
    assert results["HISTORY-SINCE"].outcome == "NOT VERIFIED"  # no test at all
    assert results["QUERY-PUSHDOWN"].outcome == "NOT VERIFIED"
    gated = {r.clause.id for r in gate_failures(results.values(), "should")}
    assert "QUERY-PUSHDOWN" not in gated and "CREATE-THEN-GET" in gated
    assert "SAVE-CONFLICT-DETAILS" in gated
    assert "SAVE-CONFLICT-DETAILS" not in {
        r.clause.id for r in gate_failures(results.values(), "must")
    }


def test_hypothesis_failure_details_are_extracted(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_prop="""
        from hypothesis import given, settings, strategies as st

        @settings(database=None, print_blob=True)
        @given(st.integers())
        def test_small(n):
            assert n < 5
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == 1
    info = hypothesis_info([result.stdout.str()])
    [example] = info["falsifying_examples"]
    assert "test_small(" in example and "n=5" in example
    assert any(note.startswith("@reproduce_failure(") for note in info["notes"])
