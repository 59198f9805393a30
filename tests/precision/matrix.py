"""The precision matrix: every broken store of the test suite, run through the plugin.

Each :class:`Case` names one broken store as a third party would configure it
(``--chongming-store=MODULE:ATTR``, plus a shared store for the stress ones)
and the exact set of clauses its run must report FAIL. :func:`run_case` runs
pytest in a fresh interpreter and returns the clause outcomes of its JSON
report; ``test_precision_matrix.py`` asserts them, and
``python tests/precision/matrix.py`` prints the table docs/benchmarks.md records.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent
ROOT = TESTS.parent
#: Where the broken stores live; the subprocess imports them by module name.
PATHS = (HERE, TESTS, TESTS / "properties", TESTS / "stress", ROOT)
#: A whole broken run takes seconds; this only stops a hung one.
RUN_TIMEOUT = 600.0


@dataclass(frozen=True)
class Case:
    """One broken store and the clauses it must FAIL (and no other)."""

    store: str
    fails: frozenset[str]
    shared: str | None = None
    #: The clause the store was written to break: it must be among the FAILs.
    own: str | None = None
    #: A store whose methods do not match the protocol is refused before any test runs
    #: (a usage error naming the difference), so it has no clause table.
    refused: bool = False
    #: More pytest arguments: where the docs say the clause is checked (PRUNE-LARGE under
    #: the thorough profile, narrowed to its test: such a run is partial by design).
    args: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        return self.store.replace("precision_stores:make_", "stress_stores:")


@dataclass(frozen=True)
class Outcome:
    """What one run reported: every clause's outcome and note, the verdict, the wall time."""

    clauses: dict[str, tuple[str, str | None]]
    verdict: str
    seconds: float
    output: str
    exit_code: int

    @property
    def failing(self) -> frozenset[str]:
        return frozenset(c for c, (outcome, _) in self.clauses.items() if outcome == "FAIL")


def command(case: Case, report: Path, profile: str = "quick") -> list[str]:
    """The pytest command line a backend author would type for this store."""
    args = [
        sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
        f"--chongming-store={case.store}",
        f"--chongming-profile={profile}",
        # The quick profile is not derandomized; a fixed seed makes the FAIL set repeatable.
        "--hypothesis-seed=0",
        "--chongming-suite-only",
        f"--chongming-report={report}",
    ]
    if case.shared:
        args += [f"--chongming-shared-store={case.shared}", "--chongming-stress=quick"]
    return [*args, *case.args]


def run_case(case: Case, workdir: Path, profile: str = "quick") -> Outcome:
    """Run the plugin on ``case.store`` in a fresh interpreter; read back its JSON report."""
    report = workdir / "report.json"
    env = dict(os.environ)
    for name in ("CHONGMING_STORE", "CHONGMING_SHARED_STORE", "PYTEST_ADDOPTS"):
        env.pop(name, None)
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in PATHS)
    start = time.perf_counter()
    proc = subprocess.run(
        command(case, report, profile), cwd=workdir, env=env, capture_output=True, text=True,
        timeout=RUN_TIMEOUT, check=False,
    )
    seconds = time.perf_counter() - start
    output = proc.stdout + proc.stderr
    if not report.exists():
        return Outcome({}, "", seconds, output, proc.returncode)
    doc: dict[str, Any] = json.loads(report.read_text(encoding="utf-8"))
    clauses = {c["id"]: (c["outcome"], c.get("note")) for c in doc["clauses"]}
    return Outcome(clauses, doc["verdict"], seconds, output, proc.returncode)


def _contract_cases() -> list[Case]:
    import broken_stores

    return [
        Case(
            f"broken_stores:{cls.__name__}",
            frozenset(EXPECTED.get(f"broken_stores:{cls.__name__}", {cid})),
            refused=cid == "PROTOCOL-METHODS",
            own=cid,
            args=LARGE if cid == "PRUNE-LARGE" else (),
        )
        for cid, classes in broken_stores.BROKEN.items()
        for cls in classes
    ]


#: Where PRUNE-LARGE is checked: the thorough profile (its one test, so the run is short).
LARGE = ("--chongming-profile=thorough", "-k", "prune_large")


#: The measured FAIL set of every store (``python tests/precision/matrix.py --record``
#: writes it, with the wall times docs/benchmarks.md quotes): case id -> clauses.
RECORDED = HERE / "recorded.json"


def _recorded() -> dict[str, Any]:
    if not RECORDED.exists():
        return {}
    data: dict[str, Any] = json.loads(RECORDED.read_text(encoding="utf-8"))
    return data


#: case id -> the clauses it must FAIL, where that is more than (or other than) its own.
EXPECTED: dict[str, set[str]] = {
    cid: set(entry["fails"]) for cid, entry in _recorded().get("stores", {}).items()
}


#: The property suite's broken stores (tests/properties/property_broken_stores.py) and
#: the one clause each breaks.
PROPERTY_CLAUSES: dict[str, str] = {
    "SaveRequiresNextVersion": "SAVE-VERSION-SKIP",
    "TouchBumpsVersion": "TOUCH-NO-VERSION",
    "SaveClobbersLease": "SAVE-KEEPS-LEASE",
    "TagSubstringMatch": "QUERY-TAG-EXACT",
    "UnescapedLikePrefix": "QUERY-NAME-PREFIX-LITERAL",
    "StoresLocalTime": "TIME-UTC-ROUNDTRIP",
    "ClaimIgnoresLease": "CLAIM-LEASE-EXCLUSIVE",
    "ReleaseMarksComplete": "RELEASE-NOT-COMPLETE",
    "PruneDropsNonTerminal": "PRUNE-TERMINAL-ONLY",
    "TaskIdPadSpace": "CREATE-THEN-GET",
}
#: The stress suite's broken SQLite stores (tests/stress/stress_stores.py), run with a
#: shared store so the cross-process clauses are exercised, and the clause each breaks.
STRESS_CLAUSES: dict[str, str] = {
    "CheckThenWriteSave": "XP-SAVE-ATOMIC",
    "UnlockedClaim": "XP-CLAIM-EXCLUSIVE",
    "NoLeaseClaim": "CLAIM-LEASE-EXCLUSIVE",
    "ExpiryIgnoredClaim": "CLAIM-EXPIRED-RECLAIM",
    "LeaseWritingSave": "SAVE-KEEPS-LEASE",
    "CheckThenInsertAppend": "XP-APPEND-REPLAY",
    "CachingReads": "XP-SHARED-VISIBILITY",
    "ReleaseKeepsLease": "RELEASE-NOT-COMPLETE",
    "StaleRowTouch": "XP-TOUCH-SAVE",
    "TouchBumpsVersion": "TOUCH-NO-VERSION",
    "LocationPoolClose": "XP-CLOSE-ISOLATED",
}


def _property_cases() -> list[Case]:
    return [
        Case(
            f"property_broken_stores:{name}",
            frozenset(EXPECTED.get(f"property_broken_stores:{name}", {cid})),
            own=cid,
        )
        for name, cid in PROPERTY_CLAUSES.items()
    ]


def _stress_cases() -> list[Case]:
    return [
        Case(
            f"precision_stores:make_{name}",
            frozenset(EXPECTED.get(f"stress_stores:{name}", {cid})),
            shared=f"precision_stores:shared_{name}",
            own=cid,
        )
        for name, cid in STRESS_CLAUSES.items()
    ]


def cases() -> list[Case]:
    """Every broken store of the test suite, contract ones first."""
    return _contract_cases() + _property_cases() + _stress_cases()


def _measure(case: Case) -> tuple[Case, Outcome]:
    with tempfile.TemporaryDirectory() as tmp:
        return case, run_case(case, Path(tmp))


if __name__ == "__main__":
    from concurrent.futures import ThreadPoolExecutor

    record = "--record" in sys.argv
    only = [a for a in sys.argv[1:] if a != "--record"]
    green = [
        Case("reference_stores.memory:InMemoryTaskStore", frozenset()),
        Case("precision_stores:make_SqliteTaskStore", frozenset(),
             shared="precision_stores:shared_SqliteTaskStore"),
    ]
    chosen = [c for c in cases() if not only or any(o in c.store for o in only)]
    with ThreadPoolExecutor(2) as pool:
        measured = list(pool.map(_measure, green + chosen))
    if record:
        # Stores not run this time keep their entries. A race store (shared) keeps the union
        # of what every recorded run saw: which of its clauses one run catches is chance.
        stores: dict[str, Any] = dict(_recorded().get("stores", {}))
        for c, o in measured[2:]:
            seen = set(o.failing)
            if c.shared is not None and c.id in stores:
                seen |= set(stores[c.id]["fails"])
            stores[c.id] = {"fails": sorted(seen), "seconds": round(o.seconds, 1),
                            "refused": c.refused}
        RECORDED.write_text(json.dumps({
            "command": "python tests/precision/matrix.py --record",
            "green_seconds": {c.store: round(o.seconds, 1) for c, o in measured[:2]},
            "stores": {c.id: stores[c.id] for c in cases() if c.id in stores},
        }, indent=1) + "\n", encoding="utf-8")
    measured = measured[2:]
    for case, got in measured:
        extra = sorted(got.failing - case.fails)
        missing = sorted(case.fails - got.failing)
        if case.refused:
            mark = "ok (refused)" if got.exit_code == 4 else f"NOT REFUSED ({got.exit_code})"
        else:
            mark = "ok" if not extra and not missing else f"EXTRA {extra} MISSING {missing}"
        print(f"{case.id}\t{got.seconds:.1f}s\t{sorted(got.failing)}\t{mark}", flush=True)
