"""Scale probe: how each hot call of a store grows with the number of tasks.

``chongming-conformance bench MODULE:ATTR [--sizes 1000,10000,100000] [--json PATH]``

The review clauses QUERY-PUSHDOWN and COUNTS-AGGREGATED cannot be decided by
a contract test: a store that fetches every row and filters in Python returns
the right answer, just slower with every task. This probe is the evidence. It
fills ONE store through its own API (``create``, ``append``,
``submit_command``) up to each size in turn, and after each step times every
hot call (p50/p95 over several calls). A flat row means the call does not
depend on the table size; a row that grows like the size (×100 from 1k to
100k) is a call that reads every task.

It never gates: wall-clock timings on a shared machine are noisy, so the
output is a table (and JSON) for a person or a report note, not a verdict.

The data mirrors the controller's: 64 buckets, 128 RUNNING tasks (the rest
SUCCEEDED), 16 tags, pipelines of 10 tasks, two history rows and a command
for every tenth task. Each call is asked about a fixed-size answer (one
bucket's RUNNING tasks, 50 rows, one pipeline), so only the work the store
does to *find* the answer can grow -- once the table is big enough for the
answer to be full: one bucket holds 50 tasks from 3,200 tasks on, so below
that ``query(buckets={b}, limit=50)`` returns fewer rows and looks cheaper.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, TextIO

from ..protocol import TaskStore
from ..protocol.model import Command, CommandKind, TaskQuery, TaskSnapshot, TaskStatus, Transition
from ..report.files import write_atomically
from ..seam.factory import enter_store
from ..seam.specs import USAGE_ERROR_EXIT, SpecError, open_check, resolve_spec
from ..seam.timeouts import DEFAULT_TIMEOUT
from ..seam.usage import UsageParser
from ..strategies.samples import T0

__all__ = [
    "DEFAULT_SIZES",
    "HotCall",
    "ProbeResult",
    "format_table",
    "hot_calls",
    "main",
    "resolve_factory",
    "run_probe",
]

DEFAULT_SIZES: tuple[int, ...] = (1_000, 10_000, 100_000)
BUCKETS = 64
RUNNING = 128
TAGS = 16
PIPELINE = 10
HISTORY_EVERY = 10  # every tenth task gets two transitions and a command
LEASE_SECONDS = 3600.0

Clock = Callable[[], float]


@dataclass(frozen=True, slots=True)
class HotCall:
    """One row of the table: a label and the call, given the store, size and an RNG."""

    label: str
    call: Callable[[TaskStore, int, random.Random], object]


@dataclass(slots=True)
class ProbeResult:
    """p50/p95 in µs per call label and size, in the order measured."""

    spec: str
    sizes: list[int] = field(default_factory=list)
    p50: dict[str, dict[int, float]] = field(default_factory=dict)
    p95: dict[str, dict[int, float]] = field(default_factory=dict)
    samples: dict[str, dict[int, int]] = field(default_factory=dict)

    def growth(self, label: str) -> float:
        """p50 at the largest size divided by p50 at the smallest (1.0 = flat)."""
        first, last = self.p50[label][self.sizes[0]], self.p50[label][self.sizes[-1]]
        return last / first if first > 0 else float("inf")

    def to_json(self) -> dict[str, Any]:
        return {
            "store": self.spec,
            "sizes": self.sizes,
            "unit": "microseconds",
            "calls": {
                label: {
                    str(n): {
                        "p50": self.p50[label][n],
                        "p95": self.p95[label][n],
                        "samples": self.samples[label][n],
                    }
                    for n in self.sizes
                }
                for label in self.p50
            },
            "growth": {label: self.growth(label) for label in self.p50},
        }


# -- resolving MODULE:ATTR ---------------------------------------------------------------
def resolve_factory(spec: str) -> Callable[[], Any]:
    """Import ``MODULE:ATTR`` and return the attribute (a store factory).

    The plugin's resolver (:func:`chongming_conformance.seam.specs.resolve_spec`), so
    the probe names a bad spec exactly as ``pytest --chongming-store`` does;
    raises :class:`~chongming_conformance.seam.specs.SpecError` (masked).
    """
    factory, _, _ = resolve_spec(spec, "bench", Path.cwd())
    return factory


# -- the data --------------------------------------------------------------------------
def _task(i: int) -> TaskSnapshot:
    created = T0 + timedelta(seconds=i)
    running = i < RUNNING
    return TaskSnapshot(
        task_id=f"t{i:08d}",
        name=f"job-{i % 100}",
        status=TaskStatus.RUNNING if running else TaskStatus.SUCCEEDED,
        status_version=2,
        created_at=created,
        updated_at=created,
        started_at=created,
        finished_at=None if running else created,
        tags=frozenset({f"tag{i % TAGS}"}),
        bucket=i % BUCKETS,
        pipeline_run_id=f"p{i // PIPELINE}",
    )


def _load_one(store: TaskStore, i: int) -> None:
    task = _task(i)
    store.create(task)
    if i % HISTORY_EVERY == 0:
        store.append(Transition(task.task_id, 1, None, TaskStatus.PENDING, task.created_at))
        store.append(
            Transition(task.task_id, 2, TaskStatus.PENDING, task.status, task.created_at)
        )
        store.submit_command(
            Command(f"c{i:08d}", task.task_id, CommandKind.STOP, "bench", task.created_at)
        )


def _claim_and_release(store: TaskStore, n: int, rng: random.Random) -> object:
    # Claimed then released at once, so the queue is the same for the next sample.
    now = T0 + timedelta(days=365)
    claimed = store.claim_commands(now=now, lease_seconds=LEASE_SECONDS, limit=10)
    for command in claimed:
        store.release_command(command.command_id, now=now)
    return claimed


def hot_calls() -> list[HotCall]:
    """The controller's hot calls, each with an answer whose size does not grow with n."""
    running = frozenset({TaskStatus.RUNNING})

    def bucket(rng: random.Random) -> frozenset[int]:
        return frozenset({rng.randrange(BUCKETS)})

    def pipelines(n: int) -> int:
        return max(n // PIPELINE, 1)

    def with_history(n: int) -> int:
        """How many tasks have history: 0, 10, 20, ... below n."""
        return max((n + HISTORY_EVERY - 1) // HISTORY_EVERY, 1)

    return [
        HotCall("get", lambda s, n, r: s.get(f"t{r.randrange(n):08d}")),
        HotCall(
            "query(buckets={b}, statuses={RUNNING})",
            lambda s, n, r: s.query(TaskQuery(buckets=bucket(r), statuses=running)),
        ),
        HotCall(
            "query(buckets={b}, limit=50)",
            lambda s, n, r: s.query(TaskQuery(buckets=bucket(r), limit=50)),
        ),
        HotCall(
            "query(pipeline_run_id=p)",
            lambda s, n, r: s.query(TaskQuery(pipeline_run_id=f"p{r.randrange(pipelines(n))}")),
        ),
        HotCall(
            "query(tag=t, limit=50)",
            lambda s, n, r: s.query(TaskQuery(tag=f"tag{r.randrange(TAGS)}", limit=50)),
        ),
        HotCall(
            "query(newest_first, limit=50)",
            lambda s, n, r: s.query(TaskQuery(newest_first=True, limit=50)),
        ),
        HotCall("counts()", lambda s, n, r: s.counts()),
        HotCall(
            "history(t)",
            lambda s, n, r: s.history(f"t{HISTORY_EVERY * r.randrange(with_history(n)):08d}"),
        ),
        HotCall("claim_commands(limit=10) + release", _claim_and_release),
    ]


# -- measuring ---------------------------------------------------------------------------
def _percentile(values: Sequence[float], fraction: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]


def _time_call(
    store: TaskStore,
    n: int,
    call: HotCall,
    *,
    samples: int,
    budget_seconds: float,
    clock: Clock,
) -> list[float]:
    """``samples`` timings in µs, fewer (never under 5) if the budget runs out first."""
    rng = random.Random(14)
    call.call(store, n, rng)  # warm-up: caches, the pool's connection
    timings: list[float] = []
    deadline = time.monotonic() + budget_seconds
    while len(timings) < samples and (len(timings) < 5 or time.monotonic() < deadline):
        start = clock()
        call.call(store, n, rng)
        timings.append((clock() - start) * 1e6)
    return timings


class _Progress:
    """One line on stderr, rewritten in place on a terminal, every 10 % otherwise."""

    def __init__(self, stream: TextIO | None) -> None:
        self._stream = stream
        self._tty = bool(stream is not None and stream.isatty())
        self._last_shown = -1

    def loading(self, done: int, target: int) -> None:
        if self._stream is None:
            return
        step = max(target // 10, 1) if not self._tty else max(target // 200, 1)
        if done != target and done // step == self._last_shown:
            return
        self._last_shown = done // step
        width = 30
        filled = width * done // max(target, 1)
        line = f"loading [{'#' * filled}{'.' * (width - filled)}] {done:,}/{target:,} tasks"
        self._stream.write(("\r" + line) if self._tty else line + "\n")
        if self._tty and done == target:
            self._stream.write("\n")
        self._stream.flush()

    def note(self, text: str) -> None:
        if self._stream is not None:
            self._stream.write(text + "\n")
            self._stream.flush()


def run_probe(
    factory: Callable[[], Any],
    sizes: Sequence[int] = DEFAULT_SIZES,
    *,
    spec: str = "",
    samples: int = 50,
    budget_seconds: float = 2.0,
    clock: Clock = time.perf_counter,
    calls: Sequence[HotCall] | None = None,
    progress: TextIO | None = None,
) -> ProbeResult:
    """Grow one store to each size in ``sizes`` (ascending) and time every hot call there.

    ``clock`` is injectable so a test can count work instead of time and get
    exact, noise-free growth ratios.
    """
    ordered = sorted(set(sizes))
    if not ordered or ordered[0] <= 0:
        raise ValueError(f"sizes must be positive, got {list(sizes)}")
    chosen = list(calls) if calls is not None else hot_calls()
    result = ProbeResult(spec=spec, sizes=ordered)
    show = _Progress(progress)
    with contextlib.ExitStack() as stack:
        store = enter_store(factory, stack, origin=spec or "the factory")
        loaded = 0
        for n in ordered:
            while loaded < n:
                _load_one(store, loaded)
                loaded += 1
                show.loading(loaded, n)
            show.note(f"timing {len(chosen)} calls at {n:,} tasks")
            for call in chosen:
                timings = _time_call(
                    store, n, call, samples=samples, budget_seconds=budget_seconds, clock=clock
                )
                result.p50.setdefault(call.label, {})[n] = statistics.median(timings)
                result.p95.setdefault(call.label, {})[n] = _percentile(timings, 0.95)
                result.samples.setdefault(call.label, {})[n] = len(timings)
    return result


def format_table(result: ProbeResult) -> str:
    """Markdown: p50 and p95 (µs) at each size, then the p50 growth first -> last."""
    sizes = result.sizes
    header = ["call"]
    header += [f"p50 {n:,}" for n in sizes]
    header += [f"p95 {n:,}" for n in sizes]
    if len(sizes) > 1:
        header.append(f"growth {sizes[0]:,}→{sizes[-1]:,}")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for label in result.p50:
        cells = [f"`{label}`"]
        cells += [f"{result.p50[label][n]:,.0f}" for n in sizes]
        cells += [f"{result.p95[label][n]:,.0f}" for n in sizes]
        if len(sizes) > 1:
            cells.append(f"×{result.growth(label):.1f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# -- command line ----------------------------------------------------------------------
def _parse_sizes(text: str) -> list[int]:
    try:
        sizes = [int(part.replace("_", "")) for part in text.split(",") if part.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--sizes wants integers like 1000,10000: {exc}") from exc
    if not sizes or min(sizes) <= 0:
        raise argparse.ArgumentTypeError("--sizes wants positive integers")
    return sizes


def build_parser() -> argparse.ArgumentParser:

    parser = UsageParser(
        prog="chongming-conformance bench",
        description="Time a store's hot calls at growing sizes (never gates; evidence for "
        "QUERY-PUSHDOWN and COUNTS-AGGREGATED).",
    )
    parser.add_argument("spec", metavar="MODULE:ATTR", help="the store factory")
    parser.add_argument(
        "--sizes",
        type=_parse_sizes,
        default=list(DEFAULT_SIZES),
        help="comma-separated task counts (default 1000,10000,100000)",
    )
    parser.add_argument("--samples", type=int, default=50, help="timed calls per row and size")
    parser.add_argument(
        "--budget", type=float, default=2.0, help="seconds per row and size before stopping early"
    )
    parser.add_argument("--json", type=Path, help="also write the results as JSON here")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point for ``chongming-conformance bench``; exit 0 unless the probe cannot run."""
    args = build_parser().parse_args(argv)
    try:
        factory = resolve_factory(args.spec)
        # One store opened and closed first: a factory that cannot open is a usage error
        # with a masked message, not a traceback after minutes of loading.
        open_check(factory, args.spec, "bench", DEFAULT_TIMEOUT)
        if args.json is not None and args.json.parent.exists() and not args.json.parent.is_dir():
            raise SpecError(f"--json={str(args.json)!r}: {args.json.parent} is a file")
    except SpecError as exc:
        print(f"chongming-conformance bench: {exc}", file=sys.stderr)
        return USAGE_ERROR_EXIT
    result = run_probe(
        factory,
        args.sizes,
        spec=args.spec,
        samples=args.samples,
        budget_seconds=args.budget,
        progress=sys.stderr,
    )
    print(f"{args.spec}: median (p50) and p95 µs per call; growth = p50 at the largest size / "
          "p50 at the smallest (×1 flat, ×size-ratio linear)")
    print(format_table(result))
    if args.json is not None:
        write_atomically(args.json, json.dumps(result.to_json(), indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
