"""Are the audit's realistic bugs caught every time? (issue 23's "10 runs out of 10")

Usage (from the repository root)::

    python benchmarks/blind_spots.py [--runs 10] [--only NAME ...]

Each broken store below is run through the plugin exactly as a third party would, at the
default (ci) profile, once per hypothesis seed 1..RUNS (``--hypothesis-seed`` switches the
profile's derandomisation off, so each run draws other examples). A run counts as a catch
when the store's own clause is FAIL and the exit status is non-zero; the table also shows
every clause that FAILed, so a misattribution shows. PRUNE-LARGE is checked where the docs
say: under ``--chongming-profile=thorough`` (narrowed to that check with ``-k``, so those
runs are partial by design and exit non-zero for that reason too).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PATHS = (ROOT / "tests", ROOT / "tests" / "stress", ROOT / "tests" / "precision", ROOT)


@dataclass(frozen=True)
class Row:
    bug: str
    store: str
    clause: str
    shared: str | None = None
    extra: tuple[str, ...] = ()


ROWS = (
    Row("limit applied before filtering", "broken_stores:LimitBeforeFilter", "QUERY-LIMIT"),
    Row("prune ordered by updated_at", "broken_stores:PruneByUpdatedAt", "PRUNE-OLDEST-FIRST"),
    Row("leases in whole seconds", "broken_stores:WholeSecondLeases", "CLAIM-LEASE-PRECISE"),
    Row("name_prefix via GLOB", "broken_stores:GlobPrefix", "QUERY-NAME-PREFIX-LITERAL"),
    Row("name_prefix via a regex", "broken_stores:RegexPrefix", "QUERY-NAME-PREFIX-LITERAL"),
    Row("tag via a JSON path", "broken_stores:JsonPathTag", "QUERY-TAG-EXACT"),
    Row("close() closes the location's pool", "precision_stores:make_LocationPoolClose",
        "XP-CLOSE-ISOLATED", shared="precision_stores:shared_LocationPoolClose"),
    Row("ids in VARCHAR(200)", "broken_stores:ShortIdColumns", "LENGTH-IDS"),
    Row("text cut to 512 characters", "broken_stores:TruncatedText", "LENGTH-TEXT"),
    Row("prune with a bind-parameter list", "broken_stores:PruneWithParameterList",
        "PRUNE-LARGE", extra=("--chongming-profile=thorough", "-k", "prune_large")),
)


def run(row: Row, seed: int) -> tuple[set[str], int, float]:
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        args = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                f"--chongming-store={row.store}", "--chongming-suite-only",
                f"--hypothesis-seed={seed}", f"--chongming-report={report}", *row.extra]
        if row.shared:
            args += [f"--chongming-shared-store={row.shared}", "--chongming-stress=quick"]
        env = {k: v for k, v in os.environ.items()
               if k not in ("CHONGMING_STORE", "CHONGMING_SHARED_STORE", "PYTEST_ADDOPTS")}
        env["PYTHONPATH"] = os.pathsep.join(str(p) for p in PATHS)
        started = time.perf_counter()
        proc = subprocess.run(args, cwd=tmp, env=env, capture_output=True, text=True,
                              timeout=1800, check=False)
        seconds = time.perf_counter() - started
        if not report.exists():
            return set(), proc.returncode, seconds
        doc = json.loads(report.read_text(encoding="utf-8"))
        return ({c["id"] for c in doc["clauses"] if c["outcome"] == "FAIL"}, proc.returncode,
                seconds)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--only", nargs="*", default=[])
    ns = parser.parse_args()
    rows = [r for r in ROWS if not ns.only or any(o in r.store for o in ns.only)]
    print("| bug | store | clause | caught | other FAIL clauses seen | mean s |")
    print("|---|---|---|---|---|---|")
    missed = 0
    for row in rows:
        hits, others, times = 0, set(), []
        for seed in range(1, ns.runs + 1):
            failing, code, seconds = run(row, seed)
            times.append(seconds)
            if row.clause in failing and code != 0:
                hits += 1
            others |= failing - {row.clause}
        missed += ns.runs - hits
        print(f"| {row.bug} | `{row.store.split(':')[1]}` | {row.clause} | {hits}/{ns.runs} | "
              f"{', '.join(sorted(others)) or '-'} | {sum(times) / len(times):.1f} |",
              flush=True)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
