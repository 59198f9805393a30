"""``Controller``: the reference consumer of a ``TaskStore`` (guide §5).

It uses nothing but the 14 protocol methods, so any conforming store plugs in.
The wiring it implements, and why each part is shaped the way it is:

* **write** -- every state transition goes through :meth:`Controller._apply`,
  which writes through (``save`` with ``expect_version`` = last persisted, then
  ``append``) via the :class:`~.writethrough.WriteThrough` buffer, so an
  outage delays a transition but never loses one;
* **read** -- ``get``, ``list_tasks``, ``stats``, ``bucket_counts`` and
  ``tasks_in_buckets`` go to the store, never to a local cache, so every
  controller on a shared store sees the same thing;
* **control** -- ``stop`` on a task this controller holds stops it locally;
  on any other task it writes a STOP command for the holder to claim;
* **side path** -- a poll thread writes progress and the heartbeat with
  ``touch``, renews the supervisor lease for every held task, flushes the
  buffer and handles commands. It starts only after this controller submitted
  a task: a read-only client (a dashboard) never claims a command, so it can
  never take a stop request away from its holder.

Threads: one worker thread per task plus the poll thread. Store calls from one
controller are serialised by a lock, so a store only has to tolerate calls
from several threads one at a time.
"""

from __future__ import annotations

import threading
import traceback
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, TypeVar

from ..protocol import TaskStore
from ..protocol.errors import ConcurrencyConflict, StoreError
from ..protocol.model import (
    TERMINAL_STATUSES,
    Command,
    CommandKind,
    Failure,
    TaskQuery,
    TaskSnapshot,
    TaskStatus,
    Transition,
)
from .buckets import BucketPolicy
from .clock import Clock, utc_now
from .context import TaskContext, TaskStopped
from .writethrough import WriteThrough

__all__ = ["Controller", "ControllerClosed", "TaskFn"]

T = TypeVar("T")
TaskFn = Callable[[TaskContext], object]

#: Outcomes written by ``complete_command`` (guide §2.4).
OUTCOME_STOPPED = "stopped"
OUTCOME_ALREADY_TERMINAL = "already-terminal"
OUTCOME_UNSUPPORTED = "unsupported-kind"

ACTIVE_STATUSES = frozenset(TaskStatus) - TERMINAL_STATUSES
#: How many ended tasks a controller remembers (to answer a late STOP "already-terminal"
#: and for ``wait``/``transitions``); older ones are forgotten, oldest first.
FINISHED_MEMORY = 10_000


class ControllerClosed(RuntimeError):
    """The controller was closed; it accepts no more work."""


@dataclass(slots=True)
class _Held:
    """A task this controller runs: its in-memory snapshot is the source of truth."""

    snapshot: TaskSnapshot
    ctx: TaskContext
    applied: list[Transition] = field(default_factory=list)
    done: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None


@dataclass(slots=True)
class _InFlight:
    """A STOP this controller claimed and is carrying out (completed once the task ends)."""

    command_id: str
    task_id: str
    lease_until: datetime


class Controller:
    """Runs tasks and writes their lifecycle through to ``store``; see the module docstring."""

    def __init__(
        self,
        store: TaskStore,
        *,
        owner: str,
        command_poll_interval: float = 0.5,
        command_lease: float = 30.0,
        bucket_policy: BucketPolicy | None = None,
        clock: Clock = utc_now,
        join_timeout: float = 10.0,
    ) -> None:
        if not isinstance(store, TaskStore):
            raise TypeError(
                f"{type(store).__qualname__} is not a TaskStore (it lacks some of the 14 "
                "protocol methods)"
            )
        if command_poll_interval <= 0 or command_lease <= 0:
            raise ValueError("command_poll_interval and command_lease must be positive")
        self.store = store
        self.owner = owner
        self.command_poll_interval = command_poll_interval
        self.command_lease = command_lease
        self.bucket_policy = bucket_policy if bucket_policy is not None else BucketPolicy()
        self.clock = clock
        self.join_timeout = join_timeout
        self._store_lock = threading.RLock()
        self._lock = threading.RLock()
        self._poll_lock = threading.Lock()
        self._held: dict[str, _Held] = {}
        self._finished: dict[str, TaskSnapshot] = {}
        self._applied: dict[str, tuple[Transition, ...]] = {}
        self._in_flight: dict[str, _InFlight] = {}
        self._buffer = WriteThrough(store, self._call)
        self._closing = threading.Event()
        self._closed = False
        self._poller: threading.Thread | None = None
        #: Poll cycles run so far (by the thread or by :meth:`poll_once`).
        self.polls = 0
        #: Command ids handed out by claim_commands, in order (a log of deliveries).
        self.deliveries: list[str] = []
        #: Commands claimed again while this controller still held their lease -- a
        #: store whose claim ignores the lease delivers one stop twice.
        self.duplicate_deliveries: list[str] = []
        #: ``(command_id, outcome)`` for every command this controller completed.
        self.completed: list[tuple[str, str]] = []
        #: Command ids this controller released (they were for tasks it does not hold).
        self.released: list[str] = []
        #: Side-path and command failures (outages), newest last, for diagnosis.
        self.side_path_errors: list[str] = []

    # ================================================================================
    # store access
    # ================================================================================
    def _call(self, method: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        with self._store_lock:
            return method(*args, **kwargs)

    def _now(self) -> datetime:
        return self.clock()

    def _lease_until(self, now: datetime) -> datetime:
        return now + timedelta(seconds=self.command_lease)

    def _ensure_open(self) -> None:
        if self._closed or self._closing.is_set():
            raise ControllerClosed(f"controller {self.owner!r} is closed")

    # ================================================================================
    # write: submit and the state machine
    # ================================================================================
    def submit(
        self,
        fn: TaskFn,
        *,
        name: str,
        tags: Iterable[str] = (),
        pipeline_run_id: str | None = None,
        key: str | None = None,
    ) -> str:
        """Create a task and run ``fn(ctx)`` in a worker thread; return its task id.

        The create is not buffered: if the store is down, ``submit`` raises and
        nothing runs (the caller learns at once that the task does not exist).
        """
        self._ensure_open()
        task_id = uuid.uuid4().hex
        now = self._now()
        bucket = self.bucket_policy.bucket_for(key if key is not None else task_id)
        created = TaskSnapshot(
            task_id=task_id,
            name=name,
            status=TaskStatus.PENDING,
            status_version=1,
            created_at=now,
            updated_at=now,
            tags=frozenset(tags),
            bucket=bucket,
            pipeline_run_id=pipeline_run_id,
            lease_owner=self.owner,
            lease_until=self._lease_until(now),
        )
        first = Transition(task_id, 1, None, TaskStatus.PENDING, now, f"submitted by {self.owner}")
        self._call(self.store.create, created)
        # The lease lives on the side path (touch), never in the in-memory snapshot.
        held = _Held(created.evolve(lease_owner=None, lease_until=None),
                     TaskContext(task_id, self.clock))
        held.applied.append(first)
        self._buffer.track(held.snapshot, first)
        self._buffer.flush(task_id)
        thread = threading.Thread(
            target=self._run, args=(held, fn), name=f"chongming-task-{task_id[:8]}", daemon=True
        )
        held.thread = thread
        with self._lock:
            self._held[task_id] = held
        thread.start()
        self._start_polling()
        return task_id

    def _run(self, held: _Held, fn: TaskFn) -> None:
        ctx = held.ctx
        try:
            try:
                if ctx.stop_requested:
                    raise TaskStopped(ctx.stop_reason or "stop requested")
                self._apply(held, TaskStatus.RUNNING, started_at=self._now())
                fn(ctx)
            except TaskStopped as stopped:
                self._apply(held, TaskStatus.CANCELLED, reason=str(stopped),
                            finished_at=self._now())
            except Exception as exc:
                failure = Failure(type(exc).__name__, str(exc), traceback.format_exc(limit=8))
                self._apply(held, TaskStatus.FAILED, reason=f"{type(exc).__name__}: {exc}",
                            failure=failure, finished_at=self._now())
            else:
                self._apply(held, TaskStatus.SUCCEEDED, finished_at=self._now())
        finally:
            with self._lock:
                self._held.pop(held.snapshot.task_id, None)
                self._finished[held.snapshot.task_id] = held.snapshot
                self._applied[held.snapshot.task_id] = tuple(held.applied)
                while len(self._finished) > FINISHED_MEMORY:  # oldest first
                    oldest = next(iter(self._finished))
                    self._finished.pop(oldest)
                    self._applied.pop(oldest, None)
            held.done.set()
            self._settle_stops()

    def _apply(
        self, held: _Held, to_status: TaskStatus, *, reason: str | None = None, **changes: Any
    ) -> None:
        """The one place a transition happens: new snapshot + transition, written through."""
        with self._lock:
            current = held.snapshot
            now = self._now()
            progress, heartbeat = held.ctx.signals()
            new = current.evolve(
                status=to_status,
                status_version=current.status_version + 1,
                updated_at=now,
                progress=progress if progress is not None else current.progress,
                heartbeat_at=heartbeat if heartbeat is not None else current.heartbeat_at,
                **changes,
            )
            transition = Transition(new.task_id, new.status_version, current.status,
                                    to_status, now, reason)
            held.snapshot = new
            held.applied.append(transition)
            self._buffer.record(new, transition)
        self._buffer.flush(new.task_id)

    # ================================================================================
    # control
    # ================================================================================
    def stop(self, task_id: str) -> str | None:
        """Stop a task: locally if this controller holds it (None), else by a STOP command.

        Returns the command id when a command was written; the holder claims it
        on its next poll.
        """
        self._ensure_open()
        with self._lock:
            held = self._held.get(task_id)
        if held is not None:
            held.ctx.request_stop(f"stopped locally by {self.owner}")
            return None
        command = Command(
            command_id=uuid.uuid4().hex,
            task_id=task_id,
            kind=CommandKind.STOP,
            issued_by=self.owner,
            created_at=self._now(),
        )
        self._call(self.store.submit_command, command)
        return command.command_id

    @property
    def polling(self) -> bool:
        """Whether the poll thread runs (only after this controller submitted a task)."""
        return self._poller is not None

    def _start_polling(self) -> None:
        with self._lock:
            if self._poller is not None or self._closing.is_set():
                return
            self._poller = threading.Thread(
                target=self._poll_loop, name=f"chongming-poll-{self.owner}", daemon=True
            )
            self._poller.start()

    def _poll_loop(self) -> None:
        while not self._closing.wait(self.command_poll_interval):
            try:
                self.poll_once()
            except Exception as exc:  # never let one bad cycle end the side path
                self.side_path_errors.append(f"poll: {type(exc).__name__}: {exc}")

    def poll_once(self) -> None:
        """One cycle of the side path: flush, touch (progress, heartbeat, lease), commands.

        The poll thread calls this every ``command_poll_interval``; tests may call
        it directly to advance a controller one step at a time.
        """
        with self._poll_lock:
            self.polls += 1
            self._buffer.flush_all()
            self._touch_held()
            self._handle_commands()
            self._settle_stops()
            with self._lock:
                finished = list(self._finished)
            for task_id in finished:
                self._buffer.forget_clean(task_id)

    def _touch_held(self) -> None:
        with self._lock:
            held = list(self._held.values())
        now = self._now()
        until = self._lease_until(now)
        for h in held:
            progress, heartbeat = h.ctx.signals()
            try:
                self._call(self.store.touch, h.snapshot.task_id, progress=progress,
                           heartbeat_at=heartbeat, lease_owner=self.owner, lease_until=until)
            except Exception as exc:
                self.side_path_errors.append(f"touch {h.snapshot.task_id}: {exc}")

    def _handle_commands(self) -> None:
        now = self._now()
        try:
            claimed = self._call(self.store.claim_commands, now=now,
                                 lease_seconds=self.command_lease)
        except Exception as exc:
            self.side_path_errors.append(f"claim_commands: {exc}")
            return
        for command in claimed:
            self.deliveries.append(command.command_id)
            try:
                self._dispatch(command, now)
            except Exception as exc:
                self.side_path_errors.append(f"command {command.command_id}: {exc}")

    def _dispatch(self, command: Command, now: datetime) -> None:
        """Act on a command for a task we hold; hand any other back at once (release)."""
        with self._lock:
            previous = self._in_flight.get(command.command_id)
            if previous is not None and now < previous.lease_until:
                # We hold this command's lease and the store handed it out again.
                self.duplicate_deliveries.append(command.command_id)
                return
            held = self._held.get(command.task_id)
            finished = command.task_id in self._finished
            if held is not None and command.kind is CommandKind.STOP:
                lease_until = command.lease_until or self._lease_until(now)
                self._in_flight[command.command_id] = _InFlight(
                    command.command_id, command.task_id, lease_until
                )
        if held is not None and command.kind is CommandKind.STOP:
            held.ctx.request_stop(
                f"stopped by {command.issued_by} (command {command.command_id})"
            )
        elif held is not None:
            self._complete(command.command_id, OUTCOME_UNSUPPORTED)
        elif finished:
            self._complete(command.command_id, OUTCOME_ALREADY_TERMINAL)
        else:
            self._call(self.store.release_command, command.command_id, now=self._now())
            self.released.append(command.command_id)

    def _settle_stops(self) -> None:
        """Complete every claimed STOP whose task has ended ("stopped" if the stop ended it).

        Called from the poll cycle and from a task's thread as it ends; each flight
        is taken out under the lock first, so a command is completed once.
        """
        with self._lock:
            ready = [
                (self._in_flight.pop(command_id), self._finished[f.task_id])
                for command_id, f in list(self._in_flight.items())
                if f.task_id in self._finished
            ]
        for flight, final in ready:
            outcome = (
                OUTCOME_STOPPED if final.status is TaskStatus.CANCELLED
                else OUTCOME_ALREADY_TERMINAL
            )
            try:
                self._complete(flight.command_id, outcome)
            except Exception as exc:
                self.side_path_errors.append(f"complete {flight.command_id}: {exc}")
                with self._lock:  # try again next cycle
                    self._in_flight.setdefault(flight.command_id, flight)

    def _complete(self, command_id: str, outcome: str) -> None:
        self._call(self.store.complete_command, command_id, now=self._now(), outcome=outcome)
        self.completed.append((command_id, outcome))

    # ================================================================================
    # read: everything goes to the store
    # ================================================================================
    def get(self, task_id: str) -> TaskSnapshot | None:
        return self._call(self.store.get, task_id)

    def history(self, task_id: str, *, since_version: int = 0) -> Sequence[Transition]:
        return self._call(self.store.history, task_id, since_version=since_version)

    def list_tasks(self, query: TaskQuery | None = None) -> Sequence[TaskSnapshot]:
        return self._call(self.store.query, query)

    def stats(self) -> dict[TaskStatus, int]:
        """Tasks per status, every status present (the store's ``counts``)."""
        counts = self._call(self.store.counts)
        return {status: int(counts.get(status, 0)) for status in TaskStatus}

    def bucket_counts(self) -> dict[int, int]:
        """Tasks per bucket of this deployment's policy, every bucket present.

        One ``query(buckets=...)`` per bucket: the filter runs in the store (its
        bucket index), the same query "my buckets" uses.
        """
        return {
            b: len(self.tasks_in_buckets([b])) for b in self.bucket_policy.buckets()
        }

    def tasks_in_buckets(self, buckets: Iterable[int]) -> Sequence[TaskSnapshot]:
        """The distributed "my buckets" query."""
        return self._call(self.store.query, TaskQuery(buckets=frozenset(buckets)))

    # ================================================================================
    # local state (for tests and diagnosis)
    # ================================================================================
    def wait(self, task_id: str, timeout: float | None = None) -> TaskSnapshot:
        """Block until a task this controller runs has ended; return its final snapshot."""
        with self._lock:
            held = self._held.get(task_id)
            final = self._finished.get(task_id)
        if held is not None:
            if not held.done.wait(timeout):
                raise TimeoutError(f"task {task_id} still running after {timeout} s")
            return held.snapshot
        if final is None:
            raise KeyError(f"task {task_id} was not run by controller {self.owner!r}")
        return final

    def local_snapshot(self, task_id: str) -> TaskSnapshot | None:
        """The in-memory snapshot of a task this controller runs or ran (may be ahead of
        the store during an outage)."""
        with self._lock:
            held = self._held.get(task_id)
            return held.snapshot if held is not None else self._finished.get(task_id)

    def transitions(self, task_id: str) -> tuple[Transition, ...]:
        """Every transition this controller applied to ``task_id``, in order."""
        with self._lock:
            held = self._held.get(task_id)
            return tuple(held.applied) if held is not None else self._applied.get(task_id, ())

    def buffered(self, task_id: str) -> tuple[Transition, ...]:
        """Transitions of ``task_id`` not yet confirmed in the store."""
        return self._buffer.buffered(task_id)

    def held(self) -> frozenset[str]:
        """Ids of the tasks this controller is running now."""
        with self._lock:
            return frozenset(self._held)

    def flush(self) -> bool:
        """Write everything buffered; True when nothing is left."""
        return self._buffer.flush_all()

    @property
    def write_errors(self) -> Sequence[str]:
        """Conflicts that stopped a task's writes (a second writer exists)."""
        return tuple(self._buffer.errors)

    # ================================================================================
    # restart recovery
    # ================================================================================
    def reconcile(self) -> list[str]:
        """Mark LOST every active task whose supervisor lease has expired; return their ids.

        Only the lease counts ("is anyone still supervising it?"). The heartbeat
        ("is it advancing?") is never consulted: a healthy CPU-bound task that
        never checkpoints has a stale heartbeat and a live lease, and must not
        be killed (guide §2.3). A lease covers [renewal, lease_until), so a
        lease ending exactly now has expired.
        """
        self._ensure_open()
        now = self._now()
        lost: list[str] = []
        active = self._call(self.store.query, TaskQuery(statuses=ACTIVE_STATUSES))
        for snap in active:
            with self._lock:
                if snap.task_id in self._held:
                    continue
            if not self._buffer.is_clean(snap.task_id):
                continue  # we ran it and its last transitions are still on their way
            if snap.lease_until is not None and snap.lease_until > now:
                continue
            new = snap.evolve(status=TaskStatus.LOST, status_version=snap.status_version + 1,
                              updated_at=now, finished_at=now)
            reason = (
                f"supervisor lease of {snap.lease_owner or 'nobody'} expired "
                f"({snap.lease_until.isoformat() if snap.lease_until else 'no lease'}); "
                f"reconciled by {self.owner}"
            )
            try:
                self._call(self.store.save, new, expect_version=snap.status_version)
            except ConcurrencyConflict:
                continue  # its writer moved it meanwhile: not ours to judge
            self._call(self.store.append, Transition(snap.task_id, new.status_version,
                                                     snap.status, TaskStatus.LOST, now, reason))
            lost.append(snap.task_id)
        return lost

    # ================================================================================
    # shutdown
    # ================================================================================
    def close(self) -> None:
        """Stop held tasks and the poll thread, flush what can be flushed; idempotent.

        The store is not closed: the controller does not own it.
        """
        if self._closed:
            return
        self._closing.set()
        with self._lock:
            held = list(self._held.values())
        for h in held:
            h.ctx.request_stop(f"controller {self.owner} closing")
        for h in held:
            if h.thread is not None:
                h.thread.join(self.join_timeout)
        if self._poller is not None:
            self._poller.join(self.join_timeout)
        try:
            self._buffer.flush_all()
            self._settle_stops()
        except StoreError as exc:
            self.side_path_errors.append(f"close: {exc}")
        self._closed = True

    def __enter__(self) -> Controller:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
