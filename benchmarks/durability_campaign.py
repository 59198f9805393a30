"""The durability evidence of issue 30: seeded fault runs with the deployment's crash action.

For each configuration, ``--runs`` seeded runs of the fault workload (quick size,
``faults="deployment"``) on a private server that the nemesis crashes and restarts
(tests/stress/crash_stores.py): how many PASS, how many FAIL and on which clauses. The
durable reference stores must PASS every run; the teeth (a server that acknowledges a
commit before it is on disk) are caught per run at the rate printed.

    python benchmarks/durability_campaign.py --runs 10

Needs the PostgreSQL and MariaDB server binaries (not the running servers). Numbers go
to docs/benchmarks.md ("Durability across a server crash").
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "stress"))
sys.path.insert(0, str(ROOT))

CONFIGS = {
    "postgres": ("CrashablePostgres", {}),
    "postgres-synchronous_commit-off": ("CrashablePostgres", {"synchronous_commit": "off"}),
    "mariadb": ("CrashableMariaDB", {}),
    "mariadb-flush-0": ("CrashableMariaDB", {"innodb_flush_log_at_trx_commit": "0"}),
}


def main() -> int:
    import crash_stores
    from test_durability import _run

    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--config", action="append", choices=list(CONFIGS))
    args = parser.parse_args()
    for name in args.config or list(CONFIGS):
        cls, settings = CONFIGS[name]
        crashable = getattr(crash_stores, cls)(settings)
        verdicts: list[str] = []
        started = time.monotonic()
        try:
            for seed in range(args.runs):
                r = _run(crashable, seed)
                verdicts.append(r.verdict + ("" if not r.failed else
                                             " " + ",".join(r.blamed() or ["error"])))
                print(f"{name} seed {seed}: {verdicts[-1]} ({r.wall_seconds:.1f} s)",
                      flush=True)
        finally:
            crashable.close()
        passed = sum(v == "PASS" for v in verdicts)
        durable = sum(v == "FAIL XP-FAULT-DURABILITY" for v in verdicts)
        print(f"== {name}: {passed}/{len(verdicts)} PASS, {durable}/{len(verdicts)} FAIL on "
              f"XP-FAULT-DURABILITY alone, others {len(verdicts) - passed - durable}; "
              f"{time.monotonic() - started:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
