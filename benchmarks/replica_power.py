"""Caught per single run: the replica tooth at the gate's profile, seeds 0..N-1.

Usage (from the repository root; needs the PostgreSQL server binaries, not a server)::

    python benchmarks/replica_power.py --runs 10 [--profile ci] [--json out.json]

The tooth is ``tests/stress/replica_store.py``'s ``ReplicaReads`` -- the reference Postgres
store with its reads sent to a hot standby (asynchronous streaming replication) -- on a
private primary and standby this script makes (``ThrowawayPostgres``, ``ThrowawayStandby``).
Each run is the gate's mixed workload (``run_all(..., scenarios=["mixed_workload"])``, the
scenario ``tests/stress/test_replica_tooth.py`` catches it with) at ``--profile``, one seed.
A run *catches* it when it blames XP-MIXED-WORKLOAD and nothing outside the visibility
clauses; the control is the same wiring reading from the primary, which must PASS every
seed. Prints one line per run and a summary; docs/benchmarks.md records the result.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
for extra in (ROOT, ROOT / "tests" / "stress", ROOT / "tests" / "integration"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

import replica_store  # noqa: E402
import throwaway_servers as ts  # noqa: E402

from chongming_conformance.stress import get_profile, run_all  # noqa: E402

#: A stale read may be blamed on these and nothing else.
VISIBILITY = {"XP-SHARED-VISIBILITY", "XP-MIXED-WORKLOAD"}


def one_run(primary: str, reads_from: str, profile: Any) -> dict[str, Any]:
    factory = functools.partial(replica_store.make_replica_reads, primary, reads_from)
    [result] = run_all(factory, profile, scenarios=["mixed_workload"], keep_logs=False)
    blamed = result.blamed()
    return {"seed": profile.seed, "verdict": result.verdict, "blamed": blamed,
            "caught": "XP-MIXED-WORKLOAD" in blamed and set(blamed) <= VISIBILITY,
            "errors": len(result.errors), "wall": round(result.wall_seconds, 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--profile", default="ci")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    base = get_profile(args.profile)
    out: dict[str, list[dict[str, Any]]] = {"replica": [], "primary": []}
    with ts.ThrowawayPostgres() as primary, ts.ThrowawayStandby(primary) as standby:
        for seed in range(args.first_seed, args.first_seed + args.runs):
            profile = dataclasses.replace(base, seed=seed)
            for wiring, reads_from in (("replica", standby.dsn), ("primary", primary.dsn)):
                run = one_run(primary.dsn, reads_from, profile)
                out[wiring].append(run)
                print(f"{wiring:<8} seed {seed}  {run['verdict']:<12} blamed "
                      f"{','.join(run['blamed']) or '-':<40} {run['wall']:>6.1f} s", flush=True)
    for wiring, runs in out.items():
        good = (sum(r["caught"] for r in runs) if wiring == "replica"
                else sum(r["verdict"] == "PASS" for r in runs))
        what = "caught" if wiring == "replica" else "PASS"
        walls = [r["wall"] for r in runs]
        print(f"{wiring}: {what} {good}/{len(runs)}, errors {sum(r['errors'] for r in runs)}, "
              f"wall mean {statistics.mean(walls):.1f} s (max {max(walls):.1f} s)")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
