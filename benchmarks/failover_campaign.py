"""Issue 42's evidence: seeded fault runs across a PostgreSQL failover.

For each configuration, ``--runs`` seeded runs (seeds 0..runs-1) of the fault workload
(quick size, ``faults="deployment"``) on a private primary + hot standby that the
deployment fails over (tests/stress/failover_stores.py): per seed the verdict, the
clauses blamed, how many failovers ran, the acknowledged writes the checker found lost
(its anomalies) and the wall time. The synchronous reference must PASS every run; the
asynchronous tooth and the cancelling-timeout tooth are caught per run at the rate
printed.

    python benchmarks/failover_campaign.py --runs 10
    python benchmarks/failover_campaign.py --runs 10 --config async --config sync

Needs the PostgreSQL server binaries (not the running server). Numbers go to
docs/failover.md.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "stress"))
sys.path.insert(0, str(ROOT))


def _configs() -> dict[str, Callable[[int], Any]]:
    from failover_stores import CancelOnTimeout, FailoverPostgres

    return {
        "sync": lambda seed: FailoverPostgres(synchronous=True, seed=seed),
        "async": lambda seed: FailoverPostgres(synchronous=False, seed=seed),
        "partition-sync": lambda seed: FailoverPostgres(synchronous=True, partition=True,
                                                        seed=seed),
        "partition-cancel": lambda seed: FailoverPostgres(synchronous=True, partition=True,
                                                          store=CancelOnTimeout, seed=seed),
    }


def main() -> int:
    from test_failover import run

    configs = _configs()
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--config", action="append", choices=list(configs))
    args = parser.parse_args()
    for name in args.config or list(configs):
        verdicts: list[str] = []
        started = time.monotonic()
        for seed in range(args.runs):
            failover = configs[name](seed)  # fresh servers per run: runs are independent
            try:
                r = run(failover, seed)
                failovers = failover.failovers
            finally:
                failover.close()
            blamed = ",".join(r.blamed() or (["error"] if r.errors else []))
            verdicts.append(r.verdict + (f" {blamed}" if r.failed else ""))
            hung = any(a.kind == "hang" for a in r.anomalies)
            print(f"{name} seed {seed}: {verdicts[-1]}; failovers {failovers}; anomalies "
                  f"{len(r.anomalies)}{' (a hang)' if hung else ''}; errors {len(r.errors)}; "
                  f"ops {r.ops}; {r.wall_seconds:.1f} s", flush=True)
            if r.failed and r.anomalies:
                print(f"    first anomaly: {r.anomalies[0].message[:300]}", flush=True)
        passed = sum(v == "PASS" for v in verdicts)
        durable = sum(v == "FAIL XP-FAULT-DURABILITY" for v in verdicts)
        print(f"== {name}: {passed}/{len(verdicts)} PASS, {durable}/{len(verdicts)} FAIL on "
              f"XP-FAULT-DURABILITY alone, others {len(verdicts) - passed - durable}; "
              f"{time.monotonic() - started:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
