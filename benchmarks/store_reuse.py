"""A third-party Postgres store with ``reset_store`` against the reference store (issue 24).

Usage (from the repository root, with a server)::

    CHONGMING_TEST_POSTGRES=postgresql://postgres@127.0.0.1:5432/test \\
        python benchmarks/store_reuse.py [--rounds 2] [--workers 2]

Runs, in one session and alternating (ABBA...), the default profile under ``-n WORKERS``
for: the Postgres reference store, the third-party store of ``benchmarks/third_party_pg.py``
(its ``reset_store`` in use), the same store with ``--chongming-no-reuse`` (a schema per test
and per example, what a third party paid before the seam). Every run must pass the must gate.
(The memory store's time before and after the seam is ``benchmarks/kit_growth.py``'s: it
cannot be shared, so it never passes the must gate and is not run here.) Prints the wall
times and the ratios docs/benchmarks.md records; absolute numbers move 20-50 % between runs
on a shared 2-core box, the ratios within one session are what count.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

STORES = {
    "postgres reference": ("reference_stores.postgres:make_store", ()),
    "third party, reset_store": ("third_party_pg:make_store", ()),
    "third party, no reuse": ("third_party_pg:make_store", ("--chongming-no-reuse",)),
}


def run(spec: str, extra: tuple[str, ...], workers: int) -> tuple[float, dict[str, object]]:
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        env = {k: v for k, v in os.environ.items()
               if k not in ("CHONGMING_STORE", "CHONGMING_SHARED_STORE", "PYTEST_ADDOPTS")}
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "benchmarks"), str(ROOT)])
        args = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                f"--chongming-store={spec}", "--chongming-suite-only", "--chongming-gate=must",
                f"--chongming-report={report}", *extra]
        if workers > 1:
            args += ["-n", str(workers)]
        started = time.perf_counter()
        proc = subprocess.run(args, cwd=tmp, env=env, capture_output=True, text=True,
                              timeout=3600, check=False)
        seconds = time.perf_counter() - started
        if proc.returncode != 0:
            raise SystemExit(f"{spec} {extra} failed the gate:\n{proc.stdout[-3000:]}")
        doc: dict[str, object] = json.loads(report.read_text(encoding="utf-8"))
        return seconds, doc


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--only", nargs="*", default=list(STORES))
    ns = parser.parse_args()
    chosen = [name for name in STORES if name in ns.only]
    times: dict[str, list[float]] = {name: [] for name in chosen}
    for r in range(ns.rounds):
        order = chosen if r % 2 == 0 else list(reversed(chosen))  # ABBA
        for name in order:
            spec, extra = STORES[name]
            seconds, doc = run(spec, extra, ns.workers)
            times[name].append(seconds)
            run_info = doc["run"]
            assert isinstance(run_info, dict)
            print(f"round {r + 1} {name}: {seconds:.1f} s, store_reuse "
                  f"{run_info.get('store_reuse')}", flush=True)
    print("\n| store | runs (s) | mean | ratio to postgres reference |")
    print("|---|---|---|---|")
    base = statistics.mean(times["postgres reference"]) if "postgres reference" in times else 0
    for name in chosen:
        mean = statistics.mean(times[name])
        ratio = f"×{mean / base:.2f}" if base else "-"
        print(f"| {name} | {', '.join(f'{t:.1f}' for t in times[name])} | {mean:.1f} | {ratio} |")


if __name__ == "__main__":
    main()
