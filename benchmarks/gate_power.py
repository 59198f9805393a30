"""Power per gate run: how often ONE run of the gate command catches a broken store, on
which clauses.

Usage (from the repository root)::

    CHONGMING_TEST_POSTGRES=postgresql://... python benchmarks/gate_power.py \\
        --shared fault_stores:make_retrying_save --seeds 0-9
    python benchmarks/gate_power.py --store kv_variant_stores.index_after_record:make_store \\
        --seeds 0-9 --stress-only
    python benchmarks/gate_power.py --shared fault_stores:make_retrying_save \\
        --shared fault_stores_mariadb:make_retrying_save --seeds 0-9 --json power.json

Each run is the gate a backend author's CI makes, in a fresh temporary directory::

    pytest -p no:cacheprovider -q --chongming-suite-only --chongming-store=STORE \\
        [--chongming-shared-store=SHARED] --chongming-faults=network \\
        --chongming-gate=must --chongming-seed=N --chongming-report=report.json

at the default (ci) profile. ``--shared`` pairs a fault-only broken shared store with the
reference store of its engine for the single-process suite (its module name says which:
``..._mariadb`` is MariaDB, else Postgres), which is how such a store is gated: the
contract suite judges the store itself, the stress harness the shared one. ``--stress-only``
adds ``-k TestStoreStress``: only the cross-process scenarios run (the run is then partial,
which changes no FAIL: a fault-only or key-value tooth passes the single-process suite --
check that once with a full run). ``tests/stress`` and ``tests`` are on ``PYTHONPATH``.

Prints one line per run -- the seed, the clauses that FAIL, the cross-process clauses left
NOT VERIFIED, the wall time -- and per store the runs whose FAIL set is exactly
``--expect`` (default: any non-empty set) out of all. docs/benchmarks.md records the results.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def seeds_of(text: str) -> list[int]:
    """``"0-9"`` or ``"0,3,5"`` -> the seeds."""
    out: list[int] = []
    for part in text.split(","):
        first, _, last = part.partition("-")
        out += list(range(int(first), int(last or first) + 1))
    return out


def reference_for(shared: str) -> str:
    """The single-process store gated beside a broken shared store: its engine's reference."""
    module = shared.partition(":")[0]
    engine = "mariadb" if "mariadb" in module else "postgres"
    return f"reference_stores.{engine}:make_store"


def one_run(store: str, shared: str | None, seed: int, *, stress_only: bool,
            extra: list[str]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="chongming-power-") as work:
        report = Path(work) / "report.json"
        cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
               "--chongming-suite-only", f"--chongming-store={store}",
               "--chongming-faults=network", "--chongming-gate=must",
               f"--chongming-seed={seed}", f"--chongming-report={report}", *extra]
        if shared:
            cmd.append(f"--chongming-shared-store={shared}")
        if stress_only:
            cmd += ["-k", "TestStoreStress"]
        env = dict(os.environ)
        paths = [str(ROOT), str(ROOT / "tests" / "stress"), str(ROOT / "tests")]
        env["PYTHONPATH"] = os.pathsep.join([*paths, env.get("PYTHONPATH", "")])
        started = time.monotonic()
        proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True,
                              check=False)
        wall = time.monotonic() - started
        if not report.exists():
            return {"seed": seed, "fail": None, "exit": proc.returncode, "wall": wall,
                    "output": proc.stdout[-3000:] + proc.stderr[-2000:]}
        doc = json.loads(report.read_text(encoding="utf-8"))
    clauses = doc["clauses"]
    fail = sorted(c["id"] for c in clauses if c["outcome"] == "FAIL")
    unverified = sorted(c["id"] for c in clauses
                        if c["outcome"] == "NOT VERIFIED" and c["scope"] == "cross_process")
    coverage = [t.get("coverage") for t in doc.get("tests", ()) if t.get("coverage")]
    short = [f"{c['label']} {c['landed']}/{c['minimum']}" for cov in coverage
             for c in cov.get("required", ()) if not c["met"]]
    return {"seed": seed, "fail": fail, "unverified": unverified, "short": short,
            "exit": proc.returncode, "verdict": doc.get("verdict"), "wall": round(wall, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--store", action="append", default=[],
                        help="a store spec MODULE:ATTR gated alone (its make_shared_store "
                             "beside it)")
    parser.add_argument("--shared", action="append", default=[],
                        help="a broken shared store MODULE:ATTR, gated beside its engine's "
                             "reference store")
    parser.add_argument("--seeds", default="0-9")
    parser.add_argument("--stress-only", action="store_true")
    parser.add_argument("--expect", default="",
                        help="the FAIL set a catch must be, comma-separated (default: any)")
    parser.add_argument("--json", type=Path)
    parser.add_argument("extra", nargs="*", help="more pytest arguments (after --)")
    args = parser.parse_args(argv)
    expect = sorted(x for x in args.expect.split(",") if x)
    runs: list[dict[str, Any]] = []
    targets = [(s, None) for s in args.store] + [(reference_for(s), s) for s in args.shared]
    for store, shared in targets:
        name = shared or store
        caught = 0
        seeds = seeds_of(args.seeds)
        for seed in seeds:
            run = one_run(store, shared, seed, stress_only=args.stress_only, extra=args.extra)
            run["store"] = name
            runs.append(run)
            hit = bool(run["fail"]) and (not expect or run["fail"] == expect)
            caught += hit
            fail = ",".join(run["fail"] or []) if run["fail"] is not None else "NO REPORT"
            print(f"{name}  seed {seed:>2}  FAIL {fail or '-':<45} NOT VERIFIED(XP) "
                  f"{','.join(run.get('unverified') or []) or '-'}  short "
                  f"{'; '.join(run.get('short') or []) or '-'}  {run['wall']:.0f} s",
                  flush=True)
            if run["fail"] is None:
                print(run["output"], flush=True)
        print(f"{name}: caught {caught}/{len(seeds)}"
              + (f" (FAIL set exactly {expect})" if expect else ""), flush=True)
    if args.json:
        args.json.write_text(json.dumps(runs, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
