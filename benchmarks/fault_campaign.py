"""The fault run over many seeds: verdicts, blamed clauses, faults applied and wall time.

Usage (from the repository root)::

    CHONGMING_TEST_POSTGRES=postgresql://... python benchmarks/fault_campaign.py \\
        --store postgres --runs 30
    CHONGMING_TEST_MARIADB=mysql://... python benchmarks/fault_campaign.py \\
        --store mariadb --runs 30
    python benchmarks/fault_campaign.py --store sqlite --runs 30          # pauses only
    python benchmarks/fault_campaign.py --store fault_stores:make_retrying_save --runs 10

``--store`` is a reference store (``sqlite``, ``postgres``, ``mariadb``), or
``MODULE:ATTR`` of a ``make_shared_store`` (``tests/stress`` is on the path, so the
fault-only broken stores of ``tests/stress/fault_stores.py`` are ``fault_stores:make_...``).
Each run is ``run_all(..., scenarios=["fault_workload"])`` at ``--profile`` (default
quick) with ``--faults`` (default network) and seed ``--first-seed + i``, on a fresh
shared location (through the network seam when the factory takes it). Prints one line per
run and a summary: how many runs passed, failed (and on which clauses), or were not
verified. ``--json FILE`` writes every run. docs/benchmarks.md records the results.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import statistics
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
for extra in (ROOT, ROOT / "tests" / "stress"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

from chongming_conformance.protocol.capabilities import declared_capabilities  # noqa: E402
from chongming_conformance.stress import get_profile, run_all  # noqa: E402

REFERENCE = {"sqlite": "reference_stores.sqlite:make_shared_store",
             "postgres": "reference_stores.postgres:make_shared_store",
             "mariadb": "reference_stores.mariadb:make_shared_store"}


def factory_of(name: str) -> tuple[Callable[..., Any], str | None]:
    """(make_shared_store, why it has no network, if it declares so)."""
    spec = REFERENCE.get(name, name)
    module_name, _, attr = spec.partition(":")
    module = importlib.import_module(module_name)
    factory = getattr(module, attr or "make_shared_store")
    caps = declared_capabilities(factory, module, spec)
    return factory, caps.unsupported.get("network")


def one_run(factory: Callable[..., Any], absent: str | None, profile: Any) -> dict[str, Any]:
    [result] = run_all(factory, profile, scenarios=["fault_workload"], network_absent=absent)
    return {"seed": profile.seed, "verdict": result.verdict, "blamed": result.blamed(),
            "kinds": sorted(Counter(a.kind for a in result.anomalies).items()),
            "errors": len(result.errors), "unverified": result.unverified,
            "wall": round(result.wall_seconds, 2), "ops": result.ops,
            "applied": result.stats.get("faults_applied", {}),
            "log_dir": result.log_dir, "report": None if result.ok else result.report()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--store", required=True)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--profile", default="quick")
    parser.add_argument("--faults", default="network", choices=("pause", "network"))
    parser.add_argument("--json", type=Path)
    parser.add_argument("--show", action="store_true", help="print each failing run's report")
    args = parser.parse_args(argv)
    factory, absent = factory_of(args.store)
    base = dataclasses.replace(get_profile(args.profile), faults=args.faults)
    runs = []
    for i in range(args.runs):
        profile = dataclasses.replace(base, seed=args.first_seed + i)
        run = one_run(factory, absent, profile)
        runs.append(run)
        applied = sum(run["applied"].values())
        blamed_text = ",".join(run["blamed"]) or "-"
        print(f"seed {run['seed']:>3}  {run['verdict']:<12} blamed {blamed_text:<40} faults "
              f"{applied:>3}  ops {run['ops']:>6}  {run['wall']:>6.1f} s", flush=True)
        if args.show and run["report"]:
            print(run["report"])
    verdicts = Counter(r["verdict"] for r in runs)
    blamed = Counter(c for r in runs for c in r["blamed"])
    walls = [r["wall"] for r in runs]
    faults = [sum(r["applied"].values()) for r in runs]
    print(f"\n{args.store}: {args.runs} runs at {args.profile}, faults {args.faults}, seeds "
          f"{args.first_seed}-{args.first_seed + args.runs - 1}: "
          + ", ".join(f"{n} {v}" for v, n in sorted(verdicts.items()))
          + (f"; blamed {dict(blamed)}" if blamed else "")
          + f"; faults per run {statistics.mean(faults):.1f} (min {min(faults)}); wall "
          f"mean {statistics.mean(walls):.1f} s, max {max(walls):.1f} s")
    if args.json:
        args.json.write_text(json.dumps(runs, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
