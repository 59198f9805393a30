"""How much longer the packaged suite takes than at an earlier revision (issues 23 and 24).

Usage (from the repository root; Postgres rows need a server)::

    CHONGMING_TEST_POSTGRES=postgresql://postgres@127.0.0.1:5432/test \\
        python benchmarks/kit_growth.py --base ed1e889 [--rounds 2] [--workers 2] \\
        [--only memory sqlite postgres]

The base revision's ``src/`` and ``reference_stores/`` are exported with ``git archive`` to
a temporary directory and put first on ``PYTHONPATH``, so the same interpreter and the same
installed dependencies run both kits. Each store's default-profile run (``--chongming-suite-only``,
``-n WORKERS``) alternates base / head / head / base ... in one session, so both kits see the
same machine load. Prints every wall time and CPU time (user + system of every worker, which a
busy neighbour disturbs far less than the wall clock) and the head/base ratios per store: the
numbers the docs record. Absolute times move 20-50 % between sessions on a shared 2-core box;
the ratio within one session is what counts.

Every test must pass with both kits (a red run's time means nothing). The gate is not asked
for: the memory store cannot be shared, so its cross-process clauses stay NOT VERIFIED under
either kit. The base kit's stores are its own (a store is measured with the kit it
shipped with).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

STORES = {
    "memory": "reference_stores.memory:make_store",
    "sqlite": "reference_stores.sqlite:make_store",
    "postgres": "reference_stores.postgres:make_store",
}


def export(revision: str, into: Path) -> Path:
    """The revision's kit and reference stores as plain files (no checkout is touched)."""
    archive = into / "base.tar"
    with archive.open("wb") as out:
        subprocess.run(["git", "archive", revision, "src", "reference_stores"], cwd=ROOT,
                       stdout=out, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into / "base", filter="data")
    return into / "base"


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(tree: Path, spec: str, workers: int) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system, every worker) of one run."""
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items()
               if k not in ("CHONGMING_STORE", "CHONGMING_SHARED_STORE", "PYTEST_ADDOPTS")}
        env["PYTHONPATH"] = os.pathsep.join([str(tree / "src"), str(tree)])
        args = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                f"--chongming-store={spec}", "--chongming-suite-only"]
        if workers > 1:
            args += ["-n", str(workers)]
        started, cpu = time.perf_counter(), _children_cpu()
        proc = subprocess.run(args, cwd=tmp, env=env, capture_output=True, text=True,
                              timeout=3600, check=False)
        seconds, cpu = time.perf_counter() - started, _children_cpu() - cpu
        summary = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
        if " passed" not in summary or " failed" in summary or " error" in summary:
            raise SystemExit(f"{spec} with the kit at {tree} had a failing test:\n"
                             f"{proc.stdout[-3000:]}")
        return seconds, cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", required=True, help="the earlier revision, e.g. ed1e889")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--only", nargs="*", default=list(STORES))
    ns = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"base": export(ns.base, Path(tmp)), "head": ROOT}
        print("| store | base wall (s) | head wall (s) | wall head / base "
              "| base CPU (s) | head CPU (s) | CPU head / base |")
        print("|---|---|---|---|---|---|---|")
        for name in ns.only:
            wall: dict[str, list[float]] = {"base": [], "head": []}
            cpu: dict[str, list[float]] = {"base": [], "head": []}
            for r in range(ns.rounds):
                order = ["base", "head"] if r % 2 == 0 else ["head", "base"]  # ABBA
                for kit in order:
                    seconds, used = run(trees[kit], STORES[name], ns.workers)
                    wall[kit].append(seconds)
                    cpu[kit].append(used)

            def cells(d: dict[str, list[float]]) -> str:
                ratio = statistics.mean(d["head"]) / statistics.mean(d["base"])
                return (f"{', '.join(f'{t:.1f}' for t in d['base'])} | "
                        f"{', '.join(f'{t:.1f}' for t in d['head'])} | ×{ratio:.2f}")

            print(f"| {name} | {cells(wall)} | {cells(cpu)} |", flush=True)


if __name__ == "__main__":
    main()
