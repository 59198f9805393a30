"""Issue 42, part 3: the reference MariaDB store on a 3-node Galera cluster, four setups.

* ``single`` -- every worker on node 0; the kit's stress scenarios (quick profile).
* ``multi`` -- workers spread over the three nodes (multi-primary); the same scenarios.
* ``crash`` -- multi-primary, the fault workload with the deployment's crash action
  (node 1 SIGKILLed mid-run, then rejoined): XP-FAULT-DURABILITY judged.
* ``partition`` -- multi-primary, the fault workload with node 2 cut off the group
  communication (``gmcast.isolate``) and healed.

Per seed it prints each scenario's verdict, the clauses blamed and the wall time; one
cluster per setup (started once, ~15 s), a fresh database per scenario. ``--store
nosyncwait`` runs the template without its Galera read fix (the tooth).

    python benchmarks/galera_campaign.py --seeds 3
    python benchmarks/galera_campaign.py --setup multi --store nosyncwait --seeds 3

Needs mariadbd, mariadb-install-db, galera-4 and rsync (not the shared server).
Numbers go to docs/galera.md.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "stress"))
sys.path.insert(0, str(ROOT / "tests" / "integration"))
sys.path.insert(0, str(ROOT))

SETUPS = ("single", "multi", "crash", "partition")
#: The scenarios of the single/multi setups: every stress scenario that injects no fault.
FAULT_SCENARIO = "fault_workload"


def _profile(seed: int, faults: str) -> Any:
    from chongming_conformance.stress import StressProfile

    return StressProfile("quick", processes=3, rounds=10, deadline=60.0, crash_cycles=1,
                         fault_seconds=8.0, faults=faults, seed=seed)


def run_setup(stores: Any, setup: str, seed: int, scenarios: list[str] | None) -> list[Any]:
    from chongming_conformance.stress import run_scenario
    from chongming_conformance.stress.runner import open_location
    from chongming_conformance.stress.scenarios import SCENARIOS

    if setup in ("crash", "partition"):
        names = [FAULT_SCENARIO]
        profile = _profile(seed, "deployment")
        deployment = stores.deployment(setup)
    else:
        names = scenarios or [n for n, s in SCENARIOS.items() if not s.faults]
        profile = _profile(seed, "none")
        deployment = None
    results = []
    for name in names:
        with contextlib.ExitStack() as stack:
            opener, network = open_location(stores.make_shared_store, name, profile, stack,
                                            takes=False)
            results.append(run_scenario(name, opener, profile, network=network,
                                        deployment=deployment, keep_logs=False))
    return results


def main() -> int:
    from galera_servers import ThrowawayGalera
    from galera_stores import GaleraStores, NoSyncWaitStore

    from reference_stores.mariadb import MariaDBTaskStore

    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--setup", action="append", choices=SETUPS)
    parser.add_argument("--store", choices=("fixed", "nosyncwait"), default="fixed")
    parser.add_argument("--scenario", action="append",
                        help="for single/multi: only these scenarios (default: all fault-free)")
    args = parser.parse_args()
    store_class = MariaDBTaskStore if args.store == "fixed" else NoSyncWaitStore
    for setup in args.setup or list(SETUPS):
        started = time.monotonic()
        cluster = ThrowawayGalera(3)
        print(f"== {setup} ({args.store}): cluster up in {time.monotonic() - started:.1f} s",
              flush=True)
        stores = GaleraStores(cluster, spread=setup != "single", store_class=store_class)
        try:
            for seed in range(args.first_seed, args.first_seed + args.seeds):
                t0 = time.monotonic()
                results = run_setup(stores, setup, seed, args.scenario)
                bad = [r for r in results if not r.ok]
                for r in bad:
                    blamed = ",".join(r.blamed()) or "-"
                    first = (r.errors or [f"{a.kind}: {a.message}" for a in r.anomalies] or
                             [str(r.unproven or r.unverified)])[0]
                    print(f"   {setup} seed {seed} {r.scenario}: {r.verdict} blamed {blamed} "
                          f"({r.wall_seconds:.1f} s): {first[:300]}", flush=True)
                verdict = "PASS" if not bad else "FAIL" if any(r.failed for r in bad) else (
                    "NOT VERIFIED/ERROR")
                clauses = sorted({c for r in bad for c in r.blamed()})
                print("   " + ", ".join(f"{r.scenario} {r.verdict} {r.wall_seconds:.1f}s"
                                        for r in results), flush=True)
                for r in results:
                    for line in r.coverage:
                        if line.startswith("deployment:"):
                            print(f"   {setup} seed {seed} {r.scenario}: {line[:240]}", flush=True)
                print(f"{setup} seed {seed}: {verdict} ({len(results)} scenarios, "
                      f"{len(bad)} not PASS; blamed {clauses or '-'}) "
                      f"{time.monotonic() - t0:.1f} s", flush=True)
        finally:
            stores.close()
            cluster.close()
        print(f"== {setup}: {time.monotonic() - started:.0f} s in all", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
