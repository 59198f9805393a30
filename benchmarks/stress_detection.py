"""Per-run detection rate of the stress harness's broken stores (a rate, not a yes).

Usage: PYTHONPATH=tests:tests/stress python benchmarks/stress_detection.py [N] [PROFILE]

Runs every (broken store, scenario) pair of tests/stress/test_stress_broken.py N times
(default 5) at PROFILE (default ``quick``), each on a fresh shared SQLite file, and prints
one Markdown row per pair: caught runs / N, the anomaly kinds seen, the mean wall time.
Then the mixed random workload (``mixed_workload``, ``ci`` profile) against every broken
store, the same way. docs/benchmarks.md records the table; the tests themselves only
require a catch within ``ATTEMPTS`` runs.
"""

from __future__ import annotations

import statistics
import sys
import time

from stress_helpers import run_shared
from stress_stores import shared
from test_stress_broken import CASES
from test_stress_mixed import BROKEN, CI


def _rate(store: type, scenario: str, profile: object, n: int) -> str:
    caught, kinds, walls = 0, set(), []
    for _ in range(n):
        started = time.perf_counter()
        result = run_shared(shared(store), scenario, profile)  # type: ignore[arg-type]
        walls.append(time.perf_counter() - started)
        if result.anomalies:
            caught += 1
            kinds |= result.kinds()
    seen = ", ".join(sorted(kinds)) or "-"
    return (f"| {store.__name__} | {scenario} | {caught}/{n} | {seen} | "
            f"{statistics.mean(walls):.1f} s |")


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    profile = sys.argv[2] if len(sys.argv) > 2 else "quick"
    print(f"| broken store | scenario ({profile}) | caught | anomaly kinds | mean wall |")
    print("|---|---|---|---|---|")
    for store, scenario, _kinds, _contract in CASES:
        print(_rate(store, scenario, profile, n), flush=True)
    for store in BROKEN:
        print(_rate(store, "mixed_workload", CI, n), flush=True)


if __name__ == "__main__":
    main()
