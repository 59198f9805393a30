"""The mixed workload, run again and again: anomalies, wall time and checker time per run.

Usage (from the repository root)::

    python benchmarks/mixed_workload_runs.py --store sqlite --runs 50
    CHONGMING_TEST_POSTGRES=postgresql://... python benchmarks/mixed_workload_runs.py \\
        --store postgres --runs 30
    CHONGMING_TEST_MARIADB=mysql://... python benchmarks/mixed_workload_runs.py \\
        --store mariadb --runs 30
    python benchmarks/mixed_workload_runs.py --store CheckThenWriteSave --runs 5

``--store`` is a reference store (``sqlite``, ``postgres``, ``mariadb``: their
``make_shared_store``), ``MODULE:ATTR`` of another correct store's ``make_shared_store``,
or the name of a broken store of ``tests/stress/stress_stores.py``.
Each run is ``run_scenario("mixed_workload", ...)`` at the ``--profile`` (default ci)
with seed ``--first-seed + i``, on a fresh shared location. Prints one line per run
(verdict, anomaly kinds, wall seconds, the checker's calls, states and seconds) and a
summary; ``--json FILE`` writes every run. docs/benchmarks.md records the results.
Exit status 0 when every run of a reference store passed (every run of a broken store
failed), 1 otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib
import json
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
for extra in (ROOT, ROOT / "tests" / "stress"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

from chongming_conformance.seam.factory import enter_opener  # noqa: E402
from chongming_conformance.stress import get_profile, run_scenario  # noqa: E402

REFERENCE = {"sqlite": "reference_stores.sqlite", "postgres": "reference_stores.postgres",
             "mariadb": "reference_stores.mariadb"}


def factory_of(name: str) -> tuple[Callable[[], Any], bool]:
    """(make_shared_store, is a correct store) for a ``--store`` name: a reference store,
    ``MODULE:ATTR`` of any correct store's ``make_shared_store``, or a broken store."""
    if name in REFERENCE:
        return importlib.import_module(REFERENCE[name]).make_shared_store, True
    if ":" in name:
        module, _, attr = name.partition(":")
        return getattr(importlib.import_module(module), attr), True
    stores = importlib.import_module("stress_stores")
    return stores.shared(getattr(stores, name)), False


def one_run(factory: Callable[[], Any], profile: Any, keep: bool) -> dict[str, Any]:
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        opener = enter_opener(factory, stack)
        result = run_scenario("mixed_workload", opener, profile,
                              keep_logs=True if keep else None)
    return {"seed": profile.seed, "verdict": result.verdict,
            "kinds": sorted(Counter(a.kind for a in result.anomalies).items()),
            "errors": len(result.errors), "unverified": result.unverified,
            "wall": round(result.wall_seconds, 2),
            "total": round(time.monotonic() - started, 2), "ops": result.ops,
            "log_dir": result.log_dir, **result.stats,
            "report": None if result.ok else result.report()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--store", required=True)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--profile", default="ci")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--keep-logs", action="store_true")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--quiet", action="store_true", help="no report of failing runs")
    args = parser.parse_args(argv)
    factory, reference = factory_of(args.store)
    base = get_profile(args.profile)
    runs = []
    for i in range(args.runs):
        profile = dataclasses.replace(base, seed=args.first_seed + i)
        run = one_run(factory, profile, args.keep_logs)
        runs.append(run)
        kinds = ", ".join(f"{k}×{n}" for k, n in run["kinds"]) or "-"
        print(f"{args.store} seed {run['seed']:>3}: {run['verdict']:<12} {kinds:<40} "
              f"wall {run['wall']:6.2f} s  checker {run.get('checker_calls', 0):>6} calls "
              f"{run.get('checker_states', 0):>7} states {run.get('checker_seconds', 0):6.2f} s",
              flush=True)
        if run["report"] and not args.quiet and reference:
            print(run["report"], flush=True)
    walls = [r["wall"] for r in runs]
    checker = [r.get("checker_seconds", 0.0) for r in runs]
    failed = sum(1 for r in runs if r["verdict"] == "FAIL")
    unverified = sum(1 for r in runs if r["verdict"] == "NOT VERIFIED")
    anomalies = sum(n for r in runs for _, n in r["kinds"])
    print(f"{args.store}: {len(runs)} runs at {args.profile}: {failed} FAIL, {unverified} NOT "
          f"VERIFIED, {anomalies} anomalies; wall per run median {statistics.median(walls):.1f} s"
          f" (min {min(walls):.1f}, max {max(walls):.1f}); checker median "
          f"{statistics.median(checker):.2f} s (max {max(checker):.2f})")
    if args.json:
        args.json.write_text(json.dumps(runs, indent=1) + "\n", encoding="utf-8")
    if reference:
        return 0 if failed == 0 and unverified == 0 else 1
    return 0 if failed == len(runs) else 1


if __name__ == "__main__":
    sys.exit(main())
