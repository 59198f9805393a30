"""Caught per single gate run: every fault tooth of tests/stress, seeds 0-9, one table.

Usage (from the repository root)::

    CHONGMING_TEST_POSTGRES=postgresql://... CHONGMING_TEST_MARIADB=mysql://... \\
        python benchmarks/teeth_power.py --engine postgres --json pg.json
    python benchmarks/teeth_power.py --engine mariadb --json my.json
    python benchmarks/teeth_power.py --teeth RetryingSave,SplitCreate --engine mariadb
    python benchmarks/teeth_power.py --engine postgres --first-seed 3 --runs 7  # seeds 3-9

Each run is the fault run of the gate -- ``run_all(make_<tooth>, ci profile, faults=
"network", scenarios=["fault_workload"])``, the one scenario of ``pytest --chongming-store=
... --chongming-faults=network`` a fault-only tooth can fail (it passes every other: it is
the reference store with one mistake on an error path, ``test_tooth_is_green_without_faults``)
-- on a fresh schema, seed ``0..N-1``. A run *catches* the tooth when the clauses it blames
are exactly the tooth's (``tests/stress/test_fault_teeth.py``, ``TEETH``); a run that blames
anything else is listed. Prints one line per run and a Markdown table: caught / runs,
other clauses blamed, runs NOT VERIFIED, mean and max wall. docs/benchmarks.md records it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
for extra in (ROOT, ROOT / "tests", ROOT / "tests" / "stress"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

from fault_campaign import one_run  # noqa: E402

from chongming_conformance.stress import get_profile  # noqa: E402


def teeth(engine: str) -> list[Any]:
    """The teeth of ``engine`` as ``test_fault_teeth`` declares them."""
    import test_fault_teeth

    return [t for t in test_fault_teeth.TEETH if t.engine == engine]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--engine", choices=("postgres", "mariadb"), required=True)
    parser.add_argument("--teeth", default="", help="comma-separated names (default: all)")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--first-seed", type=int, default=0,
                        help="seeds first..first+runs-1 (to extend a campaign)")
    parser.add_argument("--profile", default="ci")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    wanted = {t for t in args.teeth.split(",") if t}
    chosen = [t for t in teeth(args.engine)
              if not wanted or t.name in wanted or t.name.split("-", 1)[-1] in wanted]
    base = dataclasses.replace(get_profile(args.profile), faults="network")
    rows: list[dict[str, Any]] = []
    for tooth in chosen:
        runs = []
        for seed in range(args.first_seed, args.first_seed + args.runs):
            run = one_run(tooth.factory, None, dataclasses.replace(base, seed=seed))
            run["caught"] = run["blamed"] == [tooth.clause]
            runs.append(run)
            print(f"{tooth.name:<30} seed {seed}  {run['verdict']:<12} "
                  f"blamed {','.join(run['blamed']) or '-':<40} {run['wall']:>6.1f} s",
                  flush=True)
        walls = [r["wall"] for r in runs]
        rows.append({"tooth": tooth.name, "clause": tooth.clause,
                     "caught": sum(r["caught"] for r in runs), "runs": len(runs),
                     "other": sorted({c for r in runs for c in r["blamed"]} - {tooth.clause}),
                     "not_verified": sum(r["verdict"] == "NOT VERIFIED" for r in runs),
                     "errors": sum(r["errors"] for r in runs),
                     "wall_mean": round(statistics.mean(walls), 1), "wall_max": max(walls),
                     "seeds": runs})
    print("\n| tooth | clause | caught / runs | other clauses blamed | NOT VERIFIED | errors "
          "| wall mean (max) |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| `{r['tooth']}` | {r['clause']} | {r['caught']}/{r['runs']} | "
              f"{', '.join(r['other']) or 'none'} | {r['not_verified']} | {r['errors']} | "
              f"{r['wall_mean']} s ({r['wall_max']} s) |")
    if args.json:
        for r in rows:
            for run in r["seeds"]:
                run.pop("report", None)
        args.json.write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
