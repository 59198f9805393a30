"""The plugin's verdicts on misbehaving stores: hangs, broken clauses, deviations, secrets, gate."""

from __future__ import annotations

import json

import pytest
from plugin_helpers import clause, load_report, run, table_outcome

from chongming_conformance import CLAUSES, Level, Scope

STORES = '''
import time
from dataclasses import replace

from chongming_conformance import StoreError
from reference_stores.memory import InMemoryTaskStore

DSN = "postgresql://alice:s3cret-pw@db.internal:5432/tasks"


class Hanging(InMemoryTaskStore):
    def get(self, task_id):
        time.sleep(3600)


def make_hanging():
    return Hanging()


class LeaseClobbering(InMemoryTaskStore):
    """save() writes the whole snapshot, lease included: the bug the guide warns about."""

    def save(self, snapshot, *, expect_version):
        super().save(snapshot, expect_version=expect_version)
        with self._lock:
            self._tasks[snapshot.task_id] = snapshot


def make_clobbering():
    return LeaseClobbering()


class SubstringTags(InMemoryTaskStore):
    """tag matches as a substring of any tag: 'io' finds 'ios' (a known deviation)."""

    def query(self, query=None):
        if query is None or query.tag is None:
            return super().query(query)
        rest = super().query(replace(query, tag=None))
        return [t for t in rest if any(query.tag in tag for tag in t.tags)]


def make_substring_tags():
    return SubstringTags()


make_substring_tags.CHONGMING_CAPABILITIES = {
    "deviations": {"QUERY-TAG-EXACT": "legacy LIKE matching"}
}


def make_falsely_deviating():
    return InMemoryTaskStore()


make_falsely_deviating.CHONGMING_CAPABILITIES = {
    "deviations": {"QUERY-TAG-EXACT": "we thought tags were substring-matched"}
}


def make_single_process():
    return InMemoryTaskStore()


make_single_process.CHONGMING_CAPABILITIES = {
    "unsupported": {"cross_process": "lives in one process's memory"}
}


class Leaky(InMemoryTaskStore):
    """Repr and errors carry the DSN with its password."""

    def __repr__(self):
        return f"Leaky({DSN})"

    def counts(self):
        raise StoreError(f"cannot reach {DSN} (password=hunter2)")


def make_leaky():
    return Leaky()


def make_generator():
    with open("lifecycle.log", "a") as log:
        log.write("open\\n")
    yield InMemoryTaskStore()
    with open("lifecycle.log", "a") as log:
        log.write("teardown\\n")
'''


@pytest.fixture
def stores(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(mystores=STORES)
    return pytester


def test_hanging_call_fails_its_test_naming_the_method_and_the_run_goes_on(
    stores: pytest.Pytester,
) -> None:
    result = run(
        stores, "--chongming-store=mystores:make_hanging", "--chongming-timeout=0.5",
        "-k", "create_then_get__returns or counts_all_keys", "--chongming-report=r.json",
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    assert "StoreCallTimeout: store call get() did not return within 0.5 s" in out
    assert table_outcome(out, "CREATE-THEN-GET") == "FAIL"
    assert table_outcome(out, "COUNTS-ALL-KEYS") != "FAIL"
    doc = load_report(stores.path / "r.json")
    [failed] = clause(doc, "CREATE-THEN-GET")["tests"]
    assert "get() did not return" in failed["message"]
    assert doc["run"]["partial"] is True


def test_broken_store_fails_under_the_right_clause(stores: pytest.Pytester) -> None:
    result = run(
        stores,
        "--chongming-store=mystores:make_clobbering",
        "--chongming-profile=quick",
        "--chongming-report=r.json",
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = result.stdout.str()
    assert table_outcome(out, "SAVE-KEEPS-LEASE") == "FAIL"
    assert "test_save_keeps_lease__lease_from_touch_survives" in out
    doc = load_report(stores.path / "r.json")
    failing = {c["id"] for c in doc["clauses"] if c["outcome"] == "FAIL"}
    assert "SAVE-KEEPS-LEASE" in failing
    # A clause only passing tests declare stays PASS.
    assert clause(doc, "APPEND-FIRST-WINS")["outcome"] == "PASS"
    # The hypothesis properties and the state machine trip over the clobbered lease too.
    # Their failures are blamed on SAVE-KEEPS-LEASE alone, so CREATE-THEN-GET does not
    # FAIL -- but a failed test proves none of the clauses it declares, so it is NOT
    # VERIFIED (never PASS beside a failing test), with a note naming the knock-on.
    create = clause(doc, "CREATE-THEN-GET")
    assert create["outcome"] == "NOT VERIFIED"
    assert "test_snapshot_roundtrip failed on SAVE-KEEPS-LEASE (a knock-on)" in create["note"]
    lease_tests = clause(doc, "SAVE-KEEPS-LEASE")["tests"]
    props = [t for t in lease_tests if "test_properties.py" in t["nodeid"]]
    assert [t["outcome"] for t in props if t["outcome"] == "failed"], props
    assert all(t["blames"] == ["SAVE-KEEPS-LEASE"] for t in props if t["outcome"] == "failed")
    # ... and the controller check shows the deployment's symptom: a live task whose
    # lease the RUNNING save clobbered is marked LOST by reconcile().
    assert failing == {"SAVE-KEEPS-LEASE", "CTRL-RESTART-RECOVERY"}, failing
    assert doc["verdict"].startswith("does not conform")
    assert doc["run"]["partial"] is False


def test_declared_deviation_that_deviates_is_reported_deviation(stores: pytest.Pytester) -> None:
    result = run(
        stores, "--chongming-store=mystores:make_substring_tags", "-k", "tag_exact__no_substring",
        "--chongming-report=r.json",
    )
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.assert_outcomes(xfailed=1)
    assert table_outcome(result.stdout.str(), "QUERY-TAG-EXACT") == "DEVIATION"
    doc = load_report(stores.path / "r.json")
    assert clause(doc, "QUERY-TAG-EXACT")["note"] == "declared deviation: legacy LIKE matching"
    assert doc["capabilities"]["deviations"] == {"QUERY-TAG-EXACT": "legacy LIKE matching"}


def test_declared_deviation_that_passes_fails_the_run(stores: pytest.Pytester) -> None:
    result = run(
        stores, "--chongming-store=mystores:make_falsely_deviating",
        "-k", "tag_exact__no_substring",
        "--chongming-report=r.json",
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = result.stdout.str()
    assert "XPASS(strict)" in out
    assert table_outcome(out, "QUERY-TAG-EXACT") == "FAIL"
    entry = clause(load_report(stores.path / "r.json"), "QUERY-TAG-EXACT")
    assert "remove the deviation" in entry["note"]
    assert [t["outcome"] for t in entry["tests"]] == ["xpassed"]


def test_unsupported_cross_process_is_never_pass_and_passes_the_must_gate(
    stores: pytest.Pytester,
) -> None:
    result = run(
        stores, "--chongming-store=mystores:make_single_process", "--chongming-gate=must",
        "--chongming-report=r.json",
    )
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    doc = load_report(stores.path / "r.json")
    for cid, c in CLAUSES.items():
        if c.scope is Scope.CROSS_PROCESS:
            assert clause(doc, cid)["outcome"] == "UNSUPPORTED", cid
            assert table_outcome(result.stdout.str(), cid) == "UNSUPPORTED"
    assert doc["run"]["gate"] == "must" and doc["run"]["gate_passed"] is True
    result.stdout.fnmatch_lines(["chongming gate (must): passed"])


def test_gate_fails_on_not_verified_and_ignores_review_clauses(stores: pytest.Pytester) -> None:
    result = run(
        stores, "--chongming-store=reference_stores.memory:make_store", "--chongming-gate=should",
        "--chongming-report=r.json",
    )
    # Every test passed; the gate alone makes the exit status non-zero.
    assert result.parseoutcomes().get("failed", 0) == 0
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    doc = load_report(stores.path / "r.json")
    assert doc["run"]["gate_passed"] is False
    gate_line = next(
        line for line in result.stdout.lines if line.startswith("chongming gate (should)")
    )
    assert "XP-SAVE-ATOMIC" in gate_line
    review = [cid for cid, c in CLAUSES.items() if c.scope is Scope.REVIEW]
    assert review and not any(cid in gate_line for cid in review)
    for cid in review:
        entry = clause(doc, cid)
        assert entry["outcome"] == "NOT VERIFIED" and entry["gated"] is False
        assert "review" in entry["note"]


def test_must_gate_passes_a_store_whose_should_clause_fails(stores: pytest.Pytester) -> None:
    """Only MUST clauses count for --chongming-gate=must (SHOULD ones fail only 'should')."""
    should = [cid for cid, c in CLAUSES.items() if c.level is Level.SHOULD]
    assert "APPEND-FIRST-WINS" in should
    result = run(
        stores, "--chongming-store=mystores:make_single_process", "--chongming-gate=must",
        "--deselect",
        "chongming_conformance/suite/test_contract.py::TestStoreContract::"
        "test_append_first_wins__conflicting_replay_keeps_first",
    )
    # Deselecting makes the run partial, and a partial run never passes a gate.
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = result.stdout.str()
    assert "PARTIAL — NOT A CONFORMANCE CLAIM: 1 suite test(s) deselected by --deselect" in out
    assert "chongming gate (must): FAILED (partial run)" in out


def test_secrets_are_masked_in_terminal_summary_and_reports(stores: pytest.Pytester) -> None:
    result = run(
        stores, "--chongming-store=mystores:make_leaky", "-k", "counts",
        "--chongming-report=r.json", "--chongming-report=r.md",
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    everything = result.stdout.str() + result.stderr.str()
    json_text = (stores.path / "r.json").read_text(encoding="utf-8")
    md_text = (stores.path / "r.md").read_text(encoding="utf-8")
    for text in (everything, json_text, md_text):
        assert "s3cret-pw" not in text and "hunter2" not in text
    assert "postgresql://alice:***@db.internal:5432/tasks" in json_text
    assert "alice:***@db.internal" in md_text
    assert "Leaky(postgresql://alice:***@db.internal" in everything  # the header
    doc = load_report(stores.path / "r.json")
    assert doc["store"]["repr"] == "Leaky(postgresql://alice:***@db.internal:5432/tasks)"
    assert "password=***" in json.dumps(doc)


def test_generator_factory_is_torn_down_after_every_test(stores: pytest.Pytester) -> None:
    result = run(
        stores, "--chongming-store=mystores:make_generator", "-k", "TestStoreContract and query"
    )
    assert result.ret == pytest.ExitCode.OK
    ran = result.parseoutcomes()["passed"]
    log = (stores.path / "lifecycle.log").read_text().split()
    # One extra open/teardown pair: the plugin's validation at configure time.
    assert log.count("open") == log.count("teardown") == ran + 1
    assert log == ["open", "teardown"] * (ran + 1)


def test_narrowed_run_is_partial_everywhere(stores: pytest.Pytester) -> None:
    result = run(
        stores, "--chongming-store=reference_stores.memory:make_store", "-k", "prune",
        "--chongming-report=r.md",
    )
    assert result.ret == pytest.ExitCode.OK
    assert "PARTIAL — NOT A CONFORMANCE CLAIM" in result.stdout.str()
    md = (stores.path / "r.md").read_text(encoding="utf-8")
    assert md.startswith("# Conformance report: `reference_stores.memory:make_store`")
    assert "> **partial — not a conformance claim.**" in md
    assert "| `PRUNE-HISTORY` | MUST | [§6](docs/backend-guide.md#6-operations) | PASS |" in md
    assert (
        "| `CREATE-THEN-GET` | MUST | [§2](docs/backend-guide.md#2-snapshots) | **NOT VERIFIED** "
        "| no test in this run checks it |"
    ) in md
    assert "| Clause | Level | Guide | Outcome | Failing tests / note |" in md


def test_hanging_close_fails_the_teardown_and_the_run_goes_on(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        stuckclose="""
        import time
        from reference_stores.memory import InMemoryTaskStore

        class StuckClose(InMemoryTaskStore):
            calls = 0

            def close(self):
                StuckClose.calls += 1
                if StuckClose.calls > 1:  # the configure-time check closes once, fine
                    time.sleep(3600)
                super().close()

        def make_store():
            return StuckClose()
        """
    )
    result = run(
        pytester, "--chongming-store=stuckclose:make_store", "--chongming-timeout=0.5",
        "-k", "create_then_get__returns or counts_all_keys",
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = result.stdout.str()
    assert "store call close() / the factory's teardown did not return within 0.5 s" in out
    # Both tests pass, both teardowns hang and error: the second test ran after the first hang.
    result.assert_outcomes(passed=2, errors=2)


def test_explicit_node_id_reruns_one_test_and_is_partial(pytester: pytest.Pytester) -> None:
    nodeid = (
        "chongming_conformance/suite/test_contract.py::TestStoreContract::"
        "test_create_then_get__returns_what_was_created"
    )
    result = run(pytester, "--chongming-store=reference_stores.memory:make_store", nodeid)
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(passed=1)
    out = result.stdout.str()
    assert "PARTIAL — NOT A CONFORMANCE CLAIM: suite narrowed to explicit paths or node ids" in out
    assert table_outcome(out, "CREATE-THEN-GET") == "PASS"
    assert table_outcome(out, "SAVE-CAS") == "NOT VERIFIED"


def test_a_factory_that_fails_to_open_a_store_fails_no_clause(pytester: pytest.Pytester) -> None:
    """Opening the store raised before the test checked anything: NOT VERIFIED, never FAIL
    by association -- and the run still does not conform (a failing test is never green)."""
    pytester.makepyfile(
        flaky="""
        from reference_stores.memory import InMemoryTaskStore

        calls = 0

        def make_store():
            global calls
            calls += 1
            if calls > 1:  # the configure-time check opens one store, fine
                raise RuntimeError("too many connections")
            return InMemoryTaskStore()
        """
    )
    report = pytester.path / "r.json"
    result = run(pytester, "--chongming-store=flaky:make_store",
                 "-k", "create_then_get__returns or save_cas__matching",
                 f"--chongming-report={report}")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    doc = load_report(report)
    for cid in ("CREATE-THEN-GET", "SAVE-CAS"):
        entry = clause(doc, cid)
        assert entry["outcome"] == "NOT VERIFIED", entry
        assert "set-up" in entry["note"], entry
    assert not [c["id"] for c in doc["clauses"] if c["outcome"] == "FAIL"]
