"""How often the kit catches each broken key-value store of ``tests/stress/kv_stores.py``.

Issue 31, item 4: a store on a key-value engine without multi-key transactions (per-key
compare-and-set, indexes kept by hand) had five realistic bugs; two were caught only off
the gate's seed, three passed the mixed workload outright. This prints, for the correct
``KvTaskStore`` and each broken variant:

* **gate (seed 0)**: every scenario of the ``quick`` profile (``run_all``, seed 0, what the
  plugin's gate runs at that profile): which scenarios failed, and which clauses they blame
  (``ScenarioResult.blamed()``);
* **mixed, seed 0, crash_cycles=4**: the mixed workload at seed 0 as the user ran it;
* **fresh seeds**: the mixed workload (quick, ``crash_cycles=4``) at seeds 1..N -- how many
  runs caught it, the blamed clauses and the anomaly kinds (with how many runs showed each).

With ``--aimed`` it measures instead the power of one gate run (issue 41): the mixed
workload as ``pytest --chongming-store=... --chongming-faults=network`` runs it -- the
default (ci) profile, the store routed through the kit's proxies, so every check phase
freezes a write between two of its requests and the crashes are aimed there -- at seeds
0..N-1, one run each (``tests/stress/test_kv_teeth.py``'s ``_run(..., aimed=True)``):
caught per single run, the clauses blamed, the mean wall.

Needs Redis (``CHONGMING_TEST_REDIS``, default ``redis://127.0.0.1:6379/0``). Runs one
scenario at a time (it is meant for a shared, noisy machine).

    .venv/bin/python benchmarks/kv_teeth.py [--seeds 20] [--variant NAME ...] [--no-gate]
    .venv/bin/python benchmarks/kv_teeth.py --aimed --seeds 10 --variant IndexAfterRecord
    .venv/bin/python benchmarks/kv_teeth.py --aimed --seeds 10 --variant GivesUpOnMovedPrune \\
        --scenario prune_race
"""

from __future__ import annotations

import argparse
import collections
import functools
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "stress"))

import kv_stores

from chongming_conformance.faults.network import Network
from chongming_conformance.stress import (
    ScenarioResult,
    StressProfile,
    run_all,
    run_scenario,
)

STORES: dict[str, type[kv_stores.KvTaskStore]] = {
    cls.__name__: cls for cls in (kv_stores.KvTaskStore, *kv_stores.ALL_VARIANTS)}


def mixed(seed: int) -> StressProfile:
    """The user's runs: the quick profile with four crashing workers."""
    return StressProfile(name="quick", processes=3, rounds=10, deadline=60.0,
                         crash_cycles=4, seed=seed)


def run_mixed(cls: type[kv_stores.KvTaskStore], seed: int) -> ScenarioResult:
    with kv_stores.shared_store(cls) as opener:
        return run_scenario("mixed_workload", opener, mixed(seed), keep_logs=False)


def describe(result: ScenarioResult) -> str:
    if result.ok:
        return "PASS"
    if result.errors:
        return f"{result.verdict} (error: {result.errors[0][:80]})"
    return f"{result.verdict} {result.blamed()} {sorted(result.kinds())}"


def gate(cls: type[kv_stores.KvTaskStore]) -> str:
    results = run_all(functools.partial(kv_stores.shared_store, cls), "quick", keep_logs=False)
    failed = [r for r in results if not r.ok]
    if not failed:
        return f"all {len(results)} scenarios PASS"
    return "; ".join(f"{r.scenario}: {describe(r)}" for r in failed)


def aimed_power(names: list[str], seeds: int, scenario: str = "mixed_workload") -> None:
    """One aimed gate run of ``scenario`` per seed 0..seeds-1 of each store: caught,
    blamed, wall."""
    import test_kv_teeth

    print(f"| store | caught / runs (seeds 0-{seeds - 1}) | blamed (runs) | errors "
          "| wall mean (max) |")
    print("|---|---|---|---|---|")
    for name in names:
        caught, errors, walls = 0, 0, []
        blamed: collections.Counter[str] = collections.Counter()
        for seed in range(seeds):
            started = time.monotonic()
            if scenario == "mixed_workload":  # asserts the aim ran (its kills)
                result = test_kv_teeth._run(name, seed, scenario, aimed=True)
            else:  # the same gate run of a scenario that aims nothing
                with Network(seed) as network, \
                        kv_stores.shared_store(STORES[name], network) as opener:
                    result = run_scenario(scenario, opener,
                                          test_kv_teeth._profile(seed, aimed=True),
                                          keep_logs=False, network=network)
            walls.append(time.monotonic() - started)
            errors += bool(result.errors)
            if result.failed and not result.errors:
                caught += 1
                blamed.update(result.blamed())
            print(f"  {name} seed {seed}: {describe(result)} [{walls[-1]:.1f} s]", flush=True)
        print(f"| `{name}` | {caught}/{seeds} | "
              f"{', '.join(f'{k} ({n})' for k, n in sorted(blamed.items())) or '-'} | "
              f"{errors} | {sum(walls) / len(walls):.1f} s ({max(walls):.1f} s) |", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=20, help="fresh seeds 1..N (default 20)")
    parser.add_argument("--variant", action="append", choices=sorted(STORES),
                        help="only these stores (repeatable); default: all")
    parser.add_argument("--no-gate", action="store_true",
                        help="skip the run_all(quick) pass at seed 0")
    parser.add_argument("--aimed", action="store_true",
                        help="the gate's aimed mixed-workload run, seeds 0..N-1 (issue 41)")
    parser.add_argument("--scenario", default="mixed_workload",
                        help="with --aimed: the scenario (prune_race catches (a))")
    args = parser.parse_args(argv)
    names = args.variant or list(STORES)
    if args.aimed:
        aimed_power(names, args.seeds, args.scenario)
        return 0
    rows = []
    for name in names:
        cls = STORES[name]
        started = time.monotonic()
        gate_text = "-" if args.no_gate else gate(cls)
        seed0 = describe(run_mixed(cls, 0))
        caught = 0
        blamed: collections.Counter[str] = collections.Counter()
        kinds: collections.Counter[str] = collections.Counter()
        first: int | None = None
        for seed in range(1, args.seeds + 1):
            result = run_mixed(cls, seed)
            if result.failed:
                caught += 1
                first = seed if first is None else first
                blamed.update(result.blamed() or ["(error)"])
                kinds.update(result.kinds())
        seconds = time.monotonic() - started
        rows.append((name, gate_text, seed0, caught, first, blamed, kinds, seconds))
        print(f"{name}: gate: {gate_text} | mixed seed 0: {seed0} | seeds 1..{args.seeds}: "
              f"{caught}/{args.seeds} caught (first at {first}), blamed {dict(blamed)}, "
              f"kinds {dict(kinds)} [{seconds:.0f} s]", flush=True)
    print()
    print(f"| store | gate, seed 0 (run_all quick) | mixed_workload seed 0 (crash_cycles=4) "
          f"| caught over seeds 1..{args.seeds} | first seed | blamed (runs) | kinds (runs) |")
    print("|---|---|---|---|---|---|---|")
    for name, gate_text, seed0, caught, first, blamed, kinds, _ in rows:
        print(f"| `{name}` | {gate_text} | {seed0} | {caught}/{args.seeds} | "
              f"{first if first is not None else '-'} | "
              f"{', '.join(f'{k} ({n})' for k, n in sorted(blamed.items())) or '-'} | "
              f"{', '.join(f'{k} ({n})' for k, n in sorted(kinds.items())) or '-'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
