"""The public surface holds: what the docs show a backend author importing, imports.

The kit is 0.x and keeps no alias modules (docs/architecture.md, "Public paths"), so a
module that moves is renamed everywhere at once -- and this test is what makes "everywhere"
include README.md and docs/*.md. It reads every ``from chongming_conformance... import
...``, ``import chongming_conformance...``, ``python -m chongming_conformance...`` and dotted
``chongming_conformance.x.y`` reference in them and resolves each one; and it pins the
public modules by name with their ``__all__``, so adding or removing a public name is a
decision taken here, not a side effect of a refactor.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
KIT = "chongming_conformance"

#: The public modules, each with its ``__all__``: the faces a backend author imports in
#: their own code and tests (docs/architecture.md, "Public paths").
PUBLIC: dict[str, tuple[str, ...]] = {
    KIT: (
        "CATALOGUE_VERSION", "CLAUSES", "Clause", "Command", "CommandKind",
        "ConcurrencyConflict", "Failure", "Level", "PROTOCOL_METHODS", "Progress", "Scope",
        "StoreError", "TERMINAL_STATUSES", "TaskQuery", "TaskSnapshot", "TaskStatus",
        "TaskStore", "Transition", "__version__", "checks",
    ),
    f"{KIT}.protocol": ("PROTOCOL_METHODS", "TaskStore"),
    f"{KIT}.protocol.model": (
        "Command", "CommandKind", "Failure", "Progress", "TERMINAL_STATUSES", "TaskQuery",
        "TaskSnapshot", "TaskStatus", "Transition",
    ),
    f"{KIT}.protocol.errors": ("ConcurrencyConflict", "StoreError"),
    f"{KIT}.protocol.codec": (
        "COMMAND_COLUMNS", "LEASE_COLUMNS", "SAVE_COLUMNS", "SNAPSHOT_COLUMNS",
        "TRANSITION_COLUMNS", "command_to_row", "decode_dt", "decode_tags", "encode_dt",
        "encode_tags", "progress_to_row", "row_to_command", "row_to_snapshot",
        "row_to_transition", "snapshot_to_row", "transition_to_row",
    ),
    f"{KIT}.strategies": (
        "ADVERSARIAL_POOL", "BUCKET_POOL", "CONFUSABLE_IDS", "FIXED_OFFSETS", "ID_POOL",
        "INT64_MAX", "INTEGER_BOUNDARIES", "NAME_POOL", "PIPELINE_POOL", "PREFIX_POOL",
        "SPECIAL_CHARACTERS", "TAG_POOL", "aware_datetimes", "buckets", "command_ids",
        "command_lists", "commands", "counts_and_totals", "failures", "identifiers",
        "instant_pools", "lease_seconds", "limits", "names", "offsets", "pick_times",
        "progresses", "queries", "queries_for", "snapshot_lists", "snapshots", "statuses",
        "tag_sets", "tags", "task_ids", "texts", "transitions", "version_paths", "versions",
    ),
    f"{KIT}.checking.contract": (
        "CommandContract", "ContractBase", "HistoryContract", "LifecycleContract",
        "QueryContract", "RoundTripContract", "StoreContract", "TaskContract", "TouchContract",
    ),
    f"{KIT}.checking.properties": ("CodecProperties", "StoreProperties"),
    f"{KIT}.checking.stateful": (
        "EPOCH", "STATE_MACHINE_CLAUSES", "StoreStateMachine", "StoreStateMachineTests",
    ),
    f"{KIT}.checking.controller": (
        "ControllerContract", "FaultyStore", "SCENARIOS", "WRITE_METHODS", "run_cross_process",
    ),
    f"{KIT}.checking.hypothesis_profiles": (
        "DEFAULT_PROFILE", "FAST_PHASES", "PROFILES", "active_profile_name", "active_settings",
        "force_seed", "load_profile", "profile_name", "set_shrink", "shrinking",
    ),
    f"{KIT}.seam": ("OPEN_STEP", "RESET_STEP", "StoreSeam", "TEARDOWN_STEP"),
    f"{KIT}.seam.progress": ("Reporter", "note", "reporting"),
    f"{KIT}.oracle": (
        "FILTER_CLAUSES", "Model", "check_claim", "check_prune", "check_query",
        "claim_culprits", "claimable", "expected_counts", "history_culprits", "instant",
        "lease_culprit", "matches", "query_culprits",
    ),
    f"{KIT}.controller": (
        "BucketPolicy", "Clock", "Controller", "ControllerClosed", "ManualClock",
        "PolicyMismatch", "TaskContext", "TaskFn", "TaskStopped", "WriteThrough",
        "assert_policies_agree", "utc_now",
    ),
    f"{KIT}.faults": (
        "Action", "Applied", "Deployment", "DeploymentError", "Fault", "FaultProxy", "Latency",
        "LimitData", "NETWORK_KEYWORD", "NETWORK_KINDS", "Nemesis", "Network", "PAUSE_KINDS",
        "ResetPeer", "Timeout", "Toxic", "plan", "read_nemesis_log", "takes_network",
    ),
    f"{KIT}.stress": (
        "Anomaly", "DEFAULT_PROFILE", "IntegrityCheck", "NotVerified", "Opener", "PROFILES",
        "SCENARIOS", "Scenario", "ScenarioResult", "StressContract", "StressProfile",
        "get_profile", "run_all", "run_scenario", "sqlite_integrity", "sqlite_opener_integrity",
    ),
    f"{KIT}.stress.lincheck": (
        "Budget", "Call", "CheckResult", "Outcome", "UnrecordedCalls", "Verdict", "Violation",
        "calls_from_logs", "check", "check_logs", "read_history",
    ),
    f"{KIT}.report": (
        "Assessment", "ClauseResult", "Conclusion", "DEVIATION", "Environment", "FAIL",
        "HypothesisInfo", "MASK", "NOT_VERIFIED", "OUTCOMES", "PARTIAL_BANNER", "PASS",
        "REPORT_SCHEMA", "RunSettings", "SCHEMA_VERSION", "SETUP_PREFIX", "StoreInfo",
        "StoreReuseInfo", "SuiteRecords", "TEST_OUTCOMES", "TestResult", "UNSUPPORTED",
        "assess", "blamed_among", "build_document", "clause_entry", "conclude",
        "describe_environment", "dumps", "evaluate", "exit_status", "failing_test_names",
        "gate_failures", "left_out_line", "mask_all", "mask_secrets", "masked_logging",
        "parse_blames", "partial_reasons", "render_cases", "render_catalogue", "render_gate",
        "render_markdown", "render_terminal", "section_link", "summary_counts",
        "validate_report",
    ),
}

#: Modules the docs tell a person to run with ``python -m``.
COMMANDS = (f"{KIT}.stress", f"{KIT}.commands.bench")

_FROM = re.compile(r"from\s+(chongming_conformance[\w.]*)\s+import\s+(\([^)]*\)|[^\n`]+)")
_IMPORT = re.compile(r"(?<![\w.])import\s+(chongming_conformance[\w.]*)")
_RUN = re.compile(r"python -m\s+(chongming_conformance[\w.]*)")
_DOTTED = re.compile(r"(?<![\w/.])chongming_conformance(?:\.[A-Za-z_]\w*)+")


def _doc_texts() -> dict[str, str]:
    return {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for p in DOCS}


def _names(clause: str) -> list[str]:
    names = []
    for part in clause.strip("()").split(","):
        name = part.split("#")[0].split(" as ")[0].strip()
        if re.fullmatch(r"[A-Za-z_]\w*", name):
            names.append(name)
    return names


def _resolve(dotted: str) -> object:
    """The module, or the longest importable module prefix's attribute chain."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            found = getattr(found, attr)
        return found
    raise ModuleNotFoundError(dotted)


def shown_references(texts: dict[str, str]) -> dict[str, set[str]]:
    """Every ``module[:name]`` the texts show, with the files that show it."""
    found: dict[str, set[str]] = {}
    for name, text in texts.items():
        refs: set[str] = set()
        for module, clause in _FROM.findall(text):
            refs.add(module)
            refs.update(f"{module}:{n}" for n in _names(clause))
        refs.update(_IMPORT.findall(text))
        refs.update(_RUN.findall(text))
        refs.update(_DOTTED.findall(text))
        for ref in refs:
            found.setdefault(ref.rstrip("."), set()).add(name)
    return found


def _unresolved(refs: dict[str, set[str]]) -> list[str]:
    bad = []
    for ref, where in sorted(refs.items()):
        module, _, name = ref.partition(":")
        try:
            target = _resolve(module)
            if name:
                getattr(target, name)
        except (ImportError, AttributeError) as exc:
            bad.append(f"{ref} (in {', '.join(sorted(where))}): {exc}")
    return bad


def test_the_docs_show_imports() -> None:
    refs = shown_references(_doc_texts())
    assert len(refs) > 40
    assert f"{KIT}.checking.contract:StoreContract" in refs  # README's first example


def test_every_path_the_docs_show_imports() -> None:
    bad = _unresolved(shown_references(_doc_texts()))
    assert bad == [], "docs name import paths that do not import:\n" + "\n".join(bad)


def test_every_command_the_docs_run_exists() -> None:
    runs = {m for text in _doc_texts().values() for m in _RUN.findall(text)}
    assert runs == set(COMMANDS)
    for module in COMMANDS:
        assert importlib.util.find_spec(module) is not None, module


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_a_public_module_exports_exactly_its_pinned_names(module: str) -> None:
    imported: ModuleType = importlib.import_module(module)
    assert sorted(imported.__all__) == sorted(PUBLIC[module])
    for name in PUBLIC[module]:
        assert hasattr(imported, name), f"{module}.{name}"


def test_every_public_module_is_one_the_docs_or_the_stores_show() -> None:
    """The pinned list is the docs' and the reference stores' own, not a wish list."""
    texts = _doc_texts()
    texts.update({str(p.relative_to(ROOT)): p.read_text(encoding="utf-8")
                  for p in sorted((ROOT / "reference_stores").glob("*.py"))})
    shown = {ref.partition(":")[0] for ref in shown_references(texts)}
    shown |= {f"{KIT}.{m}" for t in texts.values() for m in re.findall(
        r"from chongming_conformance import (\w+) as", t)}
    missing = sorted(m for m in PUBLIC if m != KIT and not any(
        s == m or s.startswith(f"{m}.") for s in shown))
    assert missing == []


def test_the_checker_catches_a_moved_path() -> None:
    """Teeth: an old path of a module that moved, and a name a module lacks, are reported."""
    refs = shown_references({"x.md": "from chongming_conformance.contract import StoreContract\n"
                                      "`chongming_conformance.seam.NoSuchSeam`"})
    assert sorted(refs) == [f"{KIT}.contract", f"{KIT}.contract:StoreContract",
                            f"{KIT}.seam.NoSuchSeam"]
    assert len(_unresolved(refs)) == 3


def test_no_public_name_of_the_package_is_also_one_of_its_modules() -> None:
    """``chongming_conformance.checks`` is the decorator; a subpackage of that name would
    replace it on the package as soon as anything imported the subpackage, and
    ``from chongming_conformance import checks`` would then depend on import order."""
    import pkgutil

    import chongming_conformance

    modules = {m.name for m in pkgutil.iter_modules(chongming_conformance.__path__)}
    assert not modules & set(chongming_conformance.__all__), modules & set(
        chongming_conformance.__all__)
    import chongming_conformance.checking.contract  # every part loaded
    from chongming_conformance import checks

    assert callable(checks)
