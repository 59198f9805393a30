"""How long the linearizability checker takes on histories of 1k to 10k calls from 4 workers.

Usage::

    python benchmarks/linearizability_speed.py [--sizes 1000,2000,5000,10000] [--repeat 3]
        [--source run|simulated] [--store MODULE:ATTR]

``--source run`` (default) records real histories: the mixed workload
(``mixed_workload``, every call recorded) with 4 worker processes on a shared store
(default the SQLite reference store), with as many rounds as give about the size
asked for (about 131 calls a round). ``--source simulated`` makes them without
processes: 4 workers issuing a seeded random mix on the in-memory reference store,
each call taking effect at a random instant inside its own interval (so the
history is linearizable and the checker must find an order for every call).

For each size it prints one Markdown row: calls, partitions, the largest one,
states explored, the time to read and decode the logs, and the best of
``--repeat`` check times. docs/benchmarks.md records the table.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import random
import shutil
import statistics
import sys
import time
from typing import Any

from chongming_conformance.protocol.errors import ConcurrencyConflict, StoreError
from chongming_conformance.protocol.model import Progress
from chongming_conformance.stress import StressProfile, enter_shared, run_scenario
from chongming_conformance.stress.lincheck import Call, Outcome, check, read_history
from chongming_conformance.stress.records import at, command, task, transition

CALLS_PER_ROUND = 131  # the mixed workload with 4 workers, measured


def recorded(size: int, factory: Any) -> tuple[list[Call], float, str]:
    rounds = max(1, round(size / CALLS_PER_ROUND))
    profile = StressProfile("bench", processes=4, rounds=rounds, deadline=900.0)
    with contextlib.ExitStack() as stack:
        opener = enter_shared(factory, stack)
        result = run_scenario("mixed_workload", opener, profile, keep_logs=True)
    assert result.log_dir is not None
    if not result.ok:
        print(f"warning: the run itself reported: {result.report(limit=2)}", file=sys.stderr)
    started = time.perf_counter()
    calls = read_history(result.log_dir)
    return calls, time.perf_counter() - started, result.log_dir


def simulated(size: int, seed: int = 0) -> list[Call]:
    from reference_stores.memory import InMemoryTaskStore

    rng = random.Random(seed)
    store = InMemoryTaskStore()
    tasks = [f"t{k}" for k in range(8)]
    calls: list[Call] = []
    clock = 0.0
    inflight: dict[int, dict[str, Any]] = {}
    made = 0
    version = {t: 0 for t in tasks}

    def new_call(w: int) -> dict[str, Any]:
        nonlocal made
        made += 1
        tid = rng.choice(tasks)
        now = at(int(clock))
        pick = rng.random()
        if made <= len(tasks):
            return {"method": "create", "args": {"snapshot": task(tasks[made - 1])}}
        if pick < 0.25:
            v = version[tid]
            return {"method": "save", "args": {"snapshot": task(tid, version=v + 1,
                                                                name=f"w{w}-{made}"),
                                               "expect_version": v}}
        if pick < 0.45:
            return {"method": "get", "args": {"task_id": tid}}
        if pick < 0.55:
            return {"method": "touch", "args": {
                "task_id": tid, "progress": Progress(done=made), "heartbeat_at": None,
                "lease_owner": f"w{w}", "lease_until": at(1000 + made)}}
        if pick < 0.62:
            return {"method": "append", "args": {"transition": transition(
                tid, rng.randrange(1, 30), reason=f"w{w}")}}
        if pick < 0.67:
            return {"method": "history", "args": {"task_id": tid, "since_version": 0}}
        if pick < 0.70:
            return {"method": "query", "args": {"query": None}}
        if pick < 0.72:
            return {"method": "counts", "args": {}}
        if pick < 0.80:
            cmd = command(f"c{made}", tid, made / 1000)
            return {"method": "submit_command", "args": {"command": cmd}}
        if pick < 0.90:
            return {"method": "claim_commands", "args": {"now": now, "lease_seconds": 2.0,
                                                         "limit": rng.randint(1, 3)}}
        cid = f"c{rng.randrange(max(made - 60, 1), made)}"
        if pick < 0.95:
            return {"method": "complete_command", "args": {"command_id": cid, "now": now,
                                                           "outcome": "ok"}}
        return {"method": "release_command", "args": {"command_id": cid, "now": now}}

    while len(calls) < size:
        clock += rng.random() * 0.01
        w = rng.randrange(4)
        c = inflight.get(w)
        if c is None:
            inflight[w] = {**new_call(w), "t_invoke": clock}
        elif "outcome" not in c:
            try:
                c["result"] = getattr(store, c["method"])(**c["args"])
                c["outcome"] = Outcome.OK
                if c["method"] == "save":
                    version[c["args"]["snapshot"].task_id] += 1
            except ConcurrencyConflict:
                c["outcome"] = Outcome.CONFLICT
            except StoreError:
                c["outcome"] = Outcome.FAILED
        else:
            result = c.get("result")
            if isinstance(result, list | tuple):
                result = list(result)
            elif isinstance(result, dict):
                result = dict(result)
            calls.append(Call(len(calls), f"w{w}", c["method"], c["args"], c["outcome"],
                              c["t_invoke"], clock,
                              result=result if c["outcome"] is Outcome.OK else None))
            del inflight[w]
    return calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,2000,5000,10000")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--source", choices=["run", "simulated"], default="run")
    parser.add_argument("--store", default="reference_stores.sqlite:make_shared_store")
    args = parser.parse_args()
    module, _, attr = args.store.partition(":")
    factory = getattr(importlib.import_module(module), attr)
    print(f"| calls | partitions | largest | states | read s | check s (best of "
          f"{args.repeat}) | verdict |")
    print("|---|---|---|---|---|---|---|")
    base: float | None = None
    for size in (int(s) for s in args.sizes.split(",")):
        logdir = None
        if args.source == "run":
            calls, read_s, logdir = recorded(size, factory)
        else:
            calls, read_s = simulated(size), 0.0
        times = []
        result = None
        for _ in range(args.repeat):
            started = time.perf_counter()
            result = check(calls)
            times.append(time.perf_counter() - started)
        assert result is not None
        best = min(times)
        base = base or best / len(calls)
        largest = result.largest[1] if result.largest else 0
        print(f"| {len(calls)} | {result.partitions} | {largest} | {result.states} | "
              f"{read_s:.2f} | {best:.2f} (median {statistics.median(times):.2f}; "
              f"{best / len(calls) / base:.1f}x per call) | {result.verdict.value} |",
              flush=True)
        if logdir is not None:
            shutil.rmtree(logdir, ignore_errors=True)


if __name__ == "__main__":
    main()
