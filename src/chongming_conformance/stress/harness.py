"""Process machinery: spawn workers, line them up, bound them, collect their logs.

Only the *opener* (a picklable zero-argument callable that opens a new store on
the shared location, see ``factory.enter_opener`` and docs/stress.md "Sharing a
store") and plain parameters cross the process boundary; every worker calls
the opener to get its own connection. Everything is bounded three ways: a deadline shared by
the parent and every worker (barrier and event waits time out at it), a
self-destruct in each child (``SIGALRM`` with its default action, plus a timer
calling ``os._exit``), and terminate-then-kill by the parent. A worker still
alive at the deadline is reported by name with the store call it is stuck in.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import re
import signal
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Generic, TypeVar

import multiprocess

from ..oracle.messages import elide, summarize_error
from ..protocol import TaskStore
from ..protocol.codec import encode_dt
from ..protocol.errors import ConcurrencyConflict, StoreError
from ..report.masking import masked_logging
from ..seam.factory import enter_store
from ..seam.progress import note
from .board import BOARD_NAME, Board, BoardWriter
from .calls import encode_value, method_of, recorded_call
from .diagnosis import deadline_report
from .log import Logs, Op, OpLog, read_logs
from .stress_profiles import StressProfile
from .timeline import run_entries, slice_of

__all__ = [
    "Anomaly",
    "Group",
    "Harness",
    "Opener",
    "Outcome",
    "WorkerContext",
    "WorkerSpec",
]

Opener = Callable[[], Any]
T = TypeVar("T")

#: How much of an error's text a worker log keeps (cut at a token boundary, never mid-word).
ERROR_CHARS = 500

#: Seconds a child outlives the scenario deadline before it destroys itself.
SELF_DESTRUCT_GRACE = 10.0
#: Seconds the parent waits after terminate() before kill().
TERMINATE_GRACE = 2.0
#: Seconds between two progress notes of a running scenario (``progress.note``).
PROGRESS_EVERY = 3.0
#: Anomalies that get their slice of the timeline (``Harness.quote_timelines``).
QUOTED = 50
#: A round number as a worker's log line records it (compact JSON, see ``log.OpLog``).
_ROUND = re.compile(rb'"round":(\d+)')


class DeadlineReached(Exception):
    """A worker's wait ran into the scenario deadline."""


@dataclass(frozen=True, slots=True)
class Anomaly:
    """A broken guarantee, with the minimal evidence to find it again.

    ``cites`` are the logged calls the message is about; once the scenario has run,
    ``timeline`` is every worker's calls around them, merged in time order
    (``timeline.cited_slice``), and ``command`` the shell command that prints the same
    lines from the kept logs.
    """

    scenario: str
    kind: str
    message: str
    evidence: Mapping[str, Any] = field(default_factory=dict)
    cites: tuple[Op, ...] = field(default=(), repr=False, compare=False)
    timeline: str = ""
    command: str = ""
    #: The clause it is evidence against, for a scenario that judges several (None: the
    #: scenario's own clause).
    clause: str | None = None
    #: Calls that may or may not have taken effect around the cited ones (the checker's
    #: ``~`` context writes): drawn faint in the report's picture.
    context: tuple[Op, ...] = field(default=(), repr=False, compare=False)

    def __str__(self) -> str:
        return f"[{self.scenario}/{self.kind}] {self.message}"

    def block(self) -> str:
        """The anomaly with its slice of the timeline, as a report quotes it."""
        if not self.timeline:
            return str(self)
        shown = "\n".join(f"      {line}" for line in self.timeline.splitlines())
        return f"{self}\n    timeline ({self.command}):\n{shown}"


@dataclass(frozen=True, slots=True)
class Outcome(Generic[T]):
    """What a logged store call gave: the value, or the error it raised."""

    ok: bool
    value: T | None = None
    error: str | None = None
    conflict: bool = False


@dataclass(frozen=True, slots=True)
class WorkerSpec:
    """One worker process: its index, role name, module-level target and parameters.

    ``target`` must be importable by name (a module-level function) because the
    spawn context pickles it by reference.
    """

    index: int
    role: str
    target: Callable[[WorkerContext], None]
    params: Mapping[str, Any] = field(default_factory=dict)


class WorkerContext:
    """What a worker target gets: its store, its log, the barrier and the events."""

    def __init__(
        self,
        spec: WorkerSpec,
        store: TaskStore,
        log: OpLog,
        barrier: Any,
        events: Mapping[str, Any],
        deadline: float,
        opener: Opener | None = None,
        board: BoardWriter | None = None,
    ) -> None:
        self.index = spec.index
        self.role = spec.role
        self.params = spec.params
        self.store = store
        self.log = log
        self.round: int | None = None
        #: Log every call in full (``call(record=...)``'s default); a role that wants its
        #: history checked (``stress.lincheck``) sets it before its first call.
        self.record_calls = False
        self._barrier = barrier
        self._events = events
        self._deadline = deadline
        self._opener = opener
        #: Its call-board slot (``stress.board``), for the nemesis to aim; None outside a group.
        self._board = board

    def open_store(self, stack: contextlib.ExitStack) -> TaskStore:
        """Another instance on the shared location, in this process (closed with
        ``stack`` unless the role closes it first): what a process with two connections
        -- a worker and a dashboard thread -- holds."""
        if self._opener is None:
            raise RuntimeError("this worker context has no opener")
        return enter_store(self._opener, stack, origin="the shared-store opener")

    def remaining(self) -> float:
        return self._deadline - time.monotonic()

    def sync(self) -> None:
        """Wait for every barrier party; raises BrokenBarrierError at the deadline."""
        remaining = self.remaining()
        if remaining <= 0:
            raise DeadlineReached("scenario deadline reached before a barrier")
        self.log.note("barrier", round=self.round)  # what a deadline report says we waited on
        self._barrier.wait(remaining)

    def wait_event(self, name: str) -> None:
        """Block until the parent (or a peer) sets event ``name``; bounded by the deadline."""
        if not self._events[name].wait(max(self.remaining(), 0.0)):
            raise DeadlineReached(f"event {name!r} never came")

    def set_event(self, name: str) -> None:
        self._events[name].set()

    def call(
        self, op: str, detail: dict[str, Any], fn: Callable[[], T], *,
        now: datetime | None = None, summarize: Callable[[T], Any] | None = None,
        record: bool | None = None, qualifier: str | None = None,
    ) -> Outcome[T]:
        """Run one store call, logging invoke and result; never raises a store error.

        ``qualifier``: the call's kind beyond its method, on the call board
        (``faults.plan.QUALIFIERS``: the faults aimed at kinds of call read it).
        ``record=True`` (default: ``self.record_calls``) also logs the full call -- the
        protocol method with every argument, and the whole result -- in codec form
        (``stress.calls``), which the linearizability checker and the timeline read.
        ``fn`` must then be a bound store method or a ``functools.partial`` of one.
        """
        if record is None:
            record = self.record_calls
        call = recorded_call(fn) if record else None
        seq = self.log.invoke(op, detail, round_=self.round, now=encode_dt(now), call=call)
        if (board := self._board) is not None:
            board.invoke(seq, call["method"] if call is not None else method_of(fn), qualifier)
        try:
            value = fn()
            returned = time.monotonic()
            if board is not None:
                board.result(seq, ok=True)
            summary = summarize(value) if summarize is not None else None
        except ConcurrencyConflict as exc:
            if board is not None:
                board.result(seq, ok=False, conflict=True)
            self.log.result(seq, ok=False, error={
                "type": type(exc).__name__, "message": elide(str(exc), ERROR_CHARS),
                "conflict": True,
                "expected": exc.expected, "actual": exc.actual})
            return Outcome(False, error=type(exc).__name__, conflict=True)
        except Exception as exc:
            if board is not None:
                board.result(seq, ok=False)
            name = f"{type(exc).__module__}.{type(exc).__qualname__}"
            cause = exc.__cause__  # the driver's error says whether a lock was busy
            summary = summarize_error(exc)  # class, code, first line, SQL cut at a token
            self.log.result(seq, ok=False, error={
                "type": name, "message": elide(str(exc), ERROR_CHARS), "summary": summary,
                "store_error": isinstance(exc, StoreError),
                "cause": None if cause is None
                else elide(f"{type(cause).__name__}: {cause}", ERROR_CHARS)})
            return Outcome(False, error=summary)
        if record:
            self.log.result(seq, ok=True, value=summary, result=encode_value(value), t=returned)
        else:
            self.log.result(seq, ok=True, value=summary, t=returned)
        return Outcome(True, value)


def _arm_self_destruct(seconds: float) -> None:
    """Make sure this child dies even if the parent and every wait are gone."""
    if hasattr(signal, "SIGALRM"):
        # Default action of SIGALRM terminates the process, even inside a C call.
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        signal.alarm(max(1, math.ceil(seconds)))
    timer = threading.Timer(seconds + 2.0, os._exit, args=(70,))
    timer.daemon = True
    timer.start()


EXIT_CRASH, EXIT_BARRIER, EXIT_DEADLINE = 2, 3, 4


def _worker_main(
    spec: WorkerSpec,
    opener: Opener,
    barrier: Any,
    events: Mapping[str, Any],
    log_path: str,
    deadline: float,
    board_path: str | None = None,
) -> None:
    """Entry point of every worker process (runs in the spawned child)."""
    masked_logging()  # the store's driver logs to this process's stderr
    _arm_self_destruct(deadline - time.monotonic() + SELF_DESTRUCT_GRACE)
    log = OpLog(Path(log_path), spec.index, spec.role)
    log.note("start", pid=os.getpid())
    board = None if board_path is None else BoardWriter(board_path, spec.index)
    code = 0
    try:
        with contextlib.ExitStack() as stack:
            log.note("opening")
            store = enter_store(opener, stack, origin="the shared-store opener")
            spec.target(WorkerContext(spec, store, log, barrier, events, deadline, opener,
                                      board))
        log.note("done")
    except threading.BrokenBarrierError:
        log.note("barrier-broken")
        code = EXIT_BARRIER
    except DeadlineReached as exc:
        log.note("deadline", error=str(exc))
        code = EXIT_DEADLINE
    except BaseException as exc:
        log.note("crash", error=f"{type(exc).__name__}: {exc}"[:500],
                 traceback=traceback.format_exc()[-4000:])
        code = EXIT_CRASH
    finally:
        log.close()
    raise SystemExit(code)


class Group:
    """One set of concurrently running workers sharing a barrier and events."""

    def __init__(
        self,
        harness: Harness,
        specs: Sequence[WorkerSpec],
        *,
        barrier_parties: int | None,
        events: Sequence[str],
    ) -> None:
        self._h = harness
        mp = multiprocess.get_context("spawn")
        self.specs = {s.index: s for s in specs}
        parties = barrier_parties if barrier_parties is not None else len(specs)
        self.barrier = mp.Barrier(max(parties, 1))
        self.events = {name: mp.Event() for name in events}
        harness.groups += 1
        self.number = harness.groups
        folder = harness.logdir / f"group{harness.groups}"
        folder.mkdir(parents=True, exist_ok=True)
        self.paths = {i: folder / f"worker{i}-{s.role}.jsonl" for i, s in self.specs.items()}
        #: Which call each worker is in (``stress.board``): what the nemesis aims at.
        self.board = Board(folder / BOARD_NAME, max(self.specs, default=0) + 1)
        self.procs = {
            i: mp.Process(
                target=_worker_main,
                args=(s, harness.opener, self.barrier, self.events, str(self.paths[i]),
                      harness.deadline, str(self.board.path)),
                name=f"{harness.scenario}-w{i}-{s.role}",
                daemon=True,
            )
            for i, s in self.specs.items()
        }
        self.killed: set[int] = set()

    def start(self) -> None:
        for proc in self.procs.values():
            proc.start()

    def logs(self) -> Logs:
        return read_logs(self.paths)

    def wait_event(self, name: str, *, by: int | None = None) -> bool:
        """Wait for an event set by a worker (``by``, if given); False at the deadline or
        as soon as the worker that should set it (or every worker) has exited."""
        event = self.events[name]
        while self._h.remaining() > 0:
            if event.wait(min(0.1, self._h.remaining())):
                return True
            setters = [self.procs[by]] if by is not None else list(self.procs.values())
            if not any(p.is_alive() for p in setters):
                break
        return bool(event.is_set())

    def set_event(self, name: str) -> None:
        self.events[name].set()

    def kill(self, index: int) -> None:
        """SIGKILL one worker on purpose (its exit is then not an error)."""
        proc = self.procs[index]
        self.killed.add(index)
        if proc.pid is not None and proc.is_alive():
            os.kill(proc.pid, getattr(signal, "SIGKILL", signal.SIGTERM))
        proc.join(TERMINATE_GRACE + 5.0)

    def _failed_early(self) -> bool:
        return any(
            p.exitcode not in (None, 0) and i not in self.killed for i, p in self.procs.items()
        )

    def finish(self, watch: Callable[[], None] | None = None) -> Logs:
        """Join every worker by the deadline, reporting stuck and crashed ones; return logs.

        ``watch`` is called every tick while workers run (a fault run's hang watch)."""
        h = self._h
        rounds = RoundWatcher(self.paths)
        while any(p.is_alive() for p in self.procs.values()) and h.remaining() > 0:
            rounds.tick(h)
            if watch is not None:
                watch()
            if self._failed_early():
                # A crashed peer never reaches the barrier: release the others now.
                self.barrier.abort()
            for proc in self.procs.values():
                proc.join(min(0.2, max(h.remaining(), 0.0)))
        stuck = [i for i, p in self.procs.items() if p.is_alive()]
        if stuck:
            self.barrier.abort()
            for event in self.events.values():
                event.set()
            end = time.monotonic() + TERMINATE_GRACE
            for proc in self.procs.values():
                proc.join(max(end - time.monotonic(), 0.0))
            stuck = [i for i, p in self.procs.items() if p.is_alive()]
        logs = self.logs()
        for i in stuck:
            h.errors.append(self._stuck_message(i, logs))
            proc = self.procs[i]
            proc.terminate()
            proc.join(TERMINATE_GRACE)
            if proc.is_alive():
                proc.kill()
                proc.join(TERMINATE_GRACE)
        hit_deadline = stuck or any(p.exitcode == EXIT_DEADLINE for p in self.procs.values())
        if hit_deadline or h.remaining() <= 0:
            roles = {i: spec.role for i, spec in self.specs.items()}
            report = deadline_report(h.scenario, h.limit, logs, roles,
                                     time.monotonic())
            if report is not None:
                h.errors.append(report)
        for i, proc in self.procs.items():
            if i in stuck:
                continue
            # A worker killed on purpose exits by SIGKILL; only a crash before it counts.
            code = 0 if i in self.killed else proc.exitcode
            h.errors.extend(self._exit_problem(i, code, logs))
        h.ops += logs.count()
        h.busy += logs.span()
        h.group_logs.append((self.number, logs))
        self.board.close()
        return logs

    def _stuck_message(self, index: int, logs: Logs) -> str:
        spec = self.specs[index]
        pending = logs.last_pending(index)
        who = f"worker {index} ({spec.role}, pid {self.procs[index].pid})"
        limit = f"{self._h.limit:g} s"
        if pending is not None:
            age = time.monotonic() - pending.t_invoke
            return (f"scenario {self._h.scenario!r} hit its {limit} deadline: {who} is stuck in "
                    f"{pending.describe()}, called {age:.1f} s ago and never returned "
                    "(deadlocked or hanging store); terminated")
        notes = [n.get("what") for n in logs.notes.get(index, [])]
        last = notes[-1] if notes else "nothing logged (never started)"
        return (f"scenario {self._h.scenario!r} hit its {limit} deadline: {who} is stuck outside "
                f"any store call (last event: {last}; opening the store hangs if it is "
                "'opening'); terminated")

    def _exit_problem(self, index: int, code: int | None, logs: Logs) -> list[str]:
        spec = self.specs[index]
        who = f"worker {index} ({spec.role})"
        notes = logs.notes.get(index, [])
        crash = next((n for n in notes if n.get("what") == "crash"), None)
        if crash is not None:
            return [f"scenario {self._h.scenario!r}: {who} crashed: {crash.get('error')}\n"
                    f"{crash.get('traceback', '')}"]
        if code == 0:
            return []
        if code == EXIT_BARRIER:
            return []  # a consequence: the peer that broke the barrier is reported
        if code == EXIT_DEADLINE:
            return [f"scenario {self._h.scenario!r}: {who} gave up waiting at the deadline"]
        if code is not None and code < 0:
            return [f"scenario {self._h.scenario!r}: {who} died from signal {-code}"]
        return [f"scenario {self._h.scenario!r}: {who} exited with code {code}"]


class RoundWatcher:
    """Reads the workers' logs as they grow and says, every few seconds, how far the
    scenario is (``progress.note``): the highest round any worker has started, of the
    profile's rounds. Reading the files the workers flush line by line needs nothing
    from them, so a scenario reports progress without a line of its own."""

    def __init__(self, paths: Mapping[int, Path]) -> None:
        self.paths = dict(paths)
        self.offsets = dict.fromkeys(self.paths, 0)
        self.round: int | None = None
        self.next_note = time.monotonic() + PROGRESS_EVERY

    def _scan(self) -> None:
        for i, path in self.paths.items():
            try:
                with path.open("rb") as f:
                    f.seek(self.offsets[i])
                    chunk = f.read()
            except OSError:
                continue
            complete = chunk[: chunk.rfind(b"\n") + 1]
            self.offsets[i] += len(complete)
            for found in _ROUND.findall(complete):
                r = int(found)
                self.round = r if self.round is None else max(self.round, r)

    def tick(self, h: Harness) -> None:
        if time.monotonic() < self.next_note:
            return
        self.next_note = time.monotonic() + PROGRESS_EVERY
        self._scan()
        elapsed = h.limit - h.remaining()
        # Some scenarios log a closing phase as round ``rounds``: show it as the last round.
        shown = None if self.round is None else min(self.round + 1, h.profile.rounds)
        where = f"round {shown}/{h.profile.rounds}, " if shown is not None else ""
        note(f"stress {h.scenario}: {where}{elapsed:.0f} s of at most {h.limit:g} s")


class Harness:
    """One scenario run: the opener, the deadline, the logs folder and the findings."""

    def __init__(self, scenario: str, opener: Opener, profile: StressProfile,
                 logdir: Path, *, network: Any = None, network_absent: str | None = None,
                 deadline: float | None = None, deployment: Any = None) -> None:
        self.scenario = scenario
        self.opener = opener
        self.profile = profile
        self.logdir = logdir
        #: The network seam the shared store's connections go through
        #: (``faults.Network``), when faults are requested and the factory takes it.
        self.network = network
        #: Why the store has no network to break, when it declares so (capabilities).
        self.network_absent = network_absent
        #: The store's own deployment (``faults.Deployment``: topology and fault actions),
        #: when its module describes one.
        self.deployment = deployment
        #: Seconds the scenario may take (the profile's deadline unless it sets its own).
        self.limit = profile.deadline if deadline is None else deadline
        self.deadline = time.monotonic() + self.limit
        #: What the run covered beyond the profile (seed, faults applied, proxies), one
        #: line each, for every report of it.
        self.coverage: list[str] = []
        self.anomalies: list[Anomaly] = []
        self.errors: list[str] = []
        #: Why the verdict could not be reached (e.g. the linearizability checker ran out
        #: of its budget): the scenario is then NOT VERIFIED, neither PASS nor FAIL.
        self.unverified: list[str] = []
        #: Clauses of a scenario judging several that this run could not judge, and why
        #: (a fault run short of the coverage a clause needs): NOT VERIFIED, the others not.
        self.unproven: dict[str, str] = {}
        #: What a fault run exercised (``stress.fault_coverage.matrix``), for the reports.
        self.fault_coverage: dict[str, Any] | None = None
        #: Numbers a scenario reports about itself (e.g. what its checker spent).
        self.stats: dict[str, Any] = {}
        #: Every finished group's logs with its number, as ``Group.finish`` read them.
        self.group_logs: list[tuple[int, Logs]] = []
        self.ops = 0
        self.busy = 0.0
        self.groups = 0

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    @contextlib.contextmanager
    def store(self) -> Iterator[TaskStore]:
        """A parent-side connection (setup and final checks), closed afterwards."""
        with contextlib.ExitStack() as stack:
            yield enter_store(self.opener, stack, origin="the shared-store opener")

    def group(self, specs: Sequence[WorkerSpec], *, barrier_parties: int | None = None,
              events: Sequence[str] = ()) -> Group:
        return Group(self, specs, barrier_parties=barrier_parties, events=events)

    def run(self, specs: Sequence[WorkerSpec], *, barrier_parties: int | None = None) -> Logs:
        """Start the workers, wait for them (bounded) and return their logs."""
        group = self.group(specs, barrier_parties=barrier_parties)
        group.start()
        return group.finish()

    def anomaly(self, kind: str, message: str, *, cites: Sequence[Op] = (),
                clause: str | None = None, context: Sequence[Op] = (),
                **evidence: Any) -> None:
        """Record a broken guarantee. ``cites``: the logged calls it is about; the report
        then quotes every worker's calls around them (``quote_timelines``). ``clause``: the
        clause it is evidence against, when the scenario judges several. ``context``: calls
        of unknown effect the verdict allowed either way (drawn, not cited)."""
        self.anomalies.append(Anomaly(self.scenario, kind, message, evidence,
                                      tuple(o for o in cites if o is not None),
                                      clause=clause,
                                      context=tuple(o for o in context if o is not None)))

    def not_verified(self, reason: str) -> None:
        """The verdict could not be reached (neither PASS nor FAIL): say why."""
        self.unverified.append(reason)

    def named_groups(self) -> list[tuple[str, Logs]]:
        """The finished groups with the prefixes ``log.read_log_dir`` gives their workers."""
        several = self.groups > 1
        return [(f"g{n}." if several else "", logs) for n, logs in sorted(
            self.group_logs, key=lambda g: g[0])]

    def quote_timelines(self, limit: int = QUOTED) -> None:
        """Give every anomaly that cites calls (the first ``limit`` of them: a broken store
        can produce hundreds) its slice of the timeline -- every worker's calls around the
        cited ones -- and the command printing it. Called once every group has finished,
        so the workers are named as in the kept logs."""
        if not any(a.cites and not a.timeline for a in self.anomalies):
            return  # a clean run: decoding every logged call (2 s on a mixed workload) for nothing
        entries = run_entries(self.named_groups(), self.logdir)
        done = 0
        for k, a in enumerate(self.anomalies):
            if done >= limit:
                break
            if not a.cites or a.timeline:
                continue
            cut = slice_of(entries, a.cites)
            if cut is None:
                continue
            done += 1
            self.anomalies[k] = dataclasses.replace(a, timeline=cut.text,
                                                    command=cut.command(self.logdir))
