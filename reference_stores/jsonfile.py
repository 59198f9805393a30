"""JSON-file TaskStore: the third-party template (docs/backend-guide.md §8). ONE PROCESS ONLY.

This is what a backend written outside the kit looks like: it implements the 14
``TaskStore`` methods without inheriting or registering anything, and imports
nothing but the model, the errors and the codec. It passes the whole contract.

It is correct in one process only. There is no inter-process lock: two
processes doing read-modify-write on the file at the same time lose each
other's updates, and two consumers may claim the same command. The kit's
stress harness uses ``make_shared_store`` to *prove* this, not to bless it.
To share a store between processes use ``reference_stores.sqlite.SqliteTaskStore``
(file locks, WAL and ``BEGIN IMMEDIATE`` do the work there).

Two lessons are built in (docs/backend-guide.md §8):

1. No cache. Every operation re-reads the file, so two instances on one file
   (e.g. a controller and a worker) see each other's writes at once.
2. Atomic writes. The new content goes to a temporary file named after the pid
   and replaces the old file with ``os.replace``; a reader or a crash sees the
   old file or the new one, never half of one.

File layout: ``{"format": 1, "tasks": {task_id: row}, "transitions":
{task_id: {version: row}}, "commands": {command_id: row}}``, rows from the codec.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from chongming_conformance.protocol.codec import (
    SAVE_COLUMNS,
    command_to_row,
    decode_dt,
    encode_dt,
    progress_to_row,
    row_to_command,
    row_to_snapshot,
    row_to_transition,
    snapshot_to_row,
    transition_to_row,
)
from chongming_conformance.protocol.errors import ConcurrencyConflict, StoreError
from chongming_conformance.protocol.model import (
    Command,
    Progress,
    TaskQuery,
    TaskSnapshot,
    TaskStatus,
    Transition,
)

__all__ = ["JsonFileTaskStore", "make_shared_store", "make_store"]

#: Read by the kit's pytest plugin. Declaring ``cross_process`` unsupported makes
#: every cross-process clause UNSUPPORTED (never PASS) instead of running the
#: stress harness on a store that is known to fail it; tests/stress pins that
#: failure through ``make_shared_store`` directly.
CHONGMING_CAPABILITIES = {
    "unsupported": {
        "cross_process": "one JSON file without a lock: correct in one process only "
        "(docs/backend-guide.md §8)"
    }
}

FORMAT = 1
Row = dict[str, Any]

# One lock per file for the whole process, shared by every instance on that file:
# it makes read-modify-write atomic among threads and instances of ONE process.
# It does nothing across processes -- that is the documented limit of this store.
_FILE_LOCKS: dict[str, threading.Lock] = {}
_FILE_LOCKS_GUARD = threading.Lock()


def _lock_for(path: Path) -> threading.Lock:
    key = os.path.realpath(path)
    with _FILE_LOCKS_GUARD:
        return _FILE_LOCKS.setdefault(key, threading.Lock())


@dataclass
class _State:
    """The whole file, decoded to codec rows."""

    tasks: dict[str, Row] = field(default_factory=dict)
    transitions: dict[str, dict[str, Row]] = field(default_factory=dict)  # version as str
    commands: dict[str, Row] = field(default_factory=dict)


def _matches(task: TaskSnapshot, q: TaskQuery) -> bool:
    if q.statuses is not None and task.status not in q.statuses:
        return False  # an empty set matches nothing
    if q.name is not None and task.name != q.name:
        return False
    if q.name_prefix is not None and not task.name.startswith(q.name_prefix):
        return False  # str.startswith: literal and case-sensitive
    if q.tag is not None and q.tag not in task.tags:
        return False  # set membership: exact, never a substring
    if q.buckets is not None and task.bucket not in q.buckets:
        return False  # a None bucket is never in the set
    return q.pipeline_run_id is None or task.pipeline_run_id == q.pipeline_run_id


class JsonFileTaskStore:
    """All state in one JSON file; see the module docstring for the one-process limit."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = _lock_for(self.path)
        self._closed = False

    # -- file access: the only two places that touch the disk ----------------------
    def _read(self) -> _State:
        # Deliberately no cache: a cached copy would hide another instance's writes
        # (a command submitted by the controller would never reach the worker).
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return _State()  # nothing written yet: an empty store
        except OSError as exc:
            raise StoreError(f"cannot read {self.path}: {exc}") from exc
        try:
            data = json.loads(text)
            if data.get("format") != FORMAT:
                raise ValueError(f"unknown format {data.get('format')!r}")
            return _State(data["tasks"], data["transitions"], data["commands"])
        except (ValueError, KeyError, AttributeError) as exc:
            raise StoreError(f"{self.path} is not a JsonFileTaskStore file: {exc}") from exc

    def _write(self, state: _State) -> None:
        data = {
            "format": FORMAT,
            "tasks": state.tasks,
            "transitions": state.transitions,
            "commands": state.commands,
        }
        # ensure_ascii: the file is pure ASCII, so any str (even a lone surrogate)
        # round-trips and the encoding can never fail half-way.
        text = json.dumps(data, ensure_ascii=True, sort_keys=True)
        # Temp file in the same directory (os.replace is only atomic within one
        # filesystem), named after the pid so two processes never share a temp file.
        temp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        try:
            with open(temp, "w", encoding="ascii") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())  # the data is on disk before the rename
            os.replace(temp, self.path)  # atomic: readers see old or new, never half
        except OSError as exc:
            # The old file is untouched; drop the orphaned temp file.
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise StoreError(f"cannot write {self.path}: {exc}") from exc

    @contextmanager
    def _state(self, op: str) -> Iterator[_State]:
        """Lock, refuse a closed store, read the file fresh (read-only use)."""
        with self._lock:
            if self._closed:
                raise StoreError(f"{op}() on a closed JsonFileTaskStore")
            yield self._read()

    def _update(self, op: str, change: Callable[[_State], bool]) -> None:
        """Read, apply ``change``, write back if it reports a modification."""
        with self._state(op) as state:
            if change(state):
                self._write(state)

    # -- task snapshots --------------------------------------------------------------
    def create(self, snapshot: TaskSnapshot) -> None:
        def change(state: _State) -> bool:
            if snapshot.task_id in state.tasks:
                raise StoreError(f"task {snapshot.task_id!r} already exists")
            state.tasks[snapshot.task_id] = snapshot_to_row(snapshot)
            return True

        self._update("create", change)

    def save(self, snapshot: TaskSnapshot, *, expect_version: int) -> None:
        def change(state: _State) -> bool:
            current = state.tasks.get(snapshot.task_id)
            actual = None if current is None else int(current["status_version"])
            if actual != expect_version:  # equality is the only rule: versions may skip
                raise ConcurrencyConflict(snapshot.task_id, expect_version, actual)
            assert current is not None
            fresh = snapshot_to_row(snapshot)
            # Write exactly codec.SAVE_COLUMNS; the lease columns keep the stored value.
            current.update({c: fresh[c] for c in SAVE_COLUMNS})
            return True

        self._update("save", change)

    def get(self, task_id: str) -> TaskSnapshot | None:
        with self._state("get") as state:
            row = state.tasks.get(task_id)
        return None if row is None else row_to_snapshot(row)

    def query(self, query: TaskQuery | None = None) -> Sequence[TaskSnapshot]:
        q = query or TaskQuery()
        with self._state("query") as state:
            tasks = [row_to_snapshot(r) for r in state.tasks.values()]
        # A file has no index: filtering in Python is all a JSON file can do.
        found = [t for t in tasks if _matches(t, q)]
        found.sort(key=lambda t: (t.created_at, t.task_id), reverse=q.newest_first)
        return found if q.limit is None else found[: q.limit]

    def counts(self) -> Mapping[TaskStatus, int]:
        with self._state("counts") as state:
            statuses = [TaskStatus(r["status"]) for r in state.tasks.values()]
        result = dict.fromkeys(TaskStatus, 0)
        for status in statuses:
            result[status] += 1
        return result

    # -- history ---------------------------------------------------------------------
    def append(self, transition: Transition) -> None:
        def change(state: _State) -> bool:
            rows = state.transitions.setdefault(transition.task_id, {})
            key = str(transition.version)  # JSON object keys are strings
            if key in rows:
                return False  # a replay keeps the first row
            rows[key] = transition_to_row(transition)
            return True

        self._update("append", change)

    def history(self, task_id: str, *, since_version: int = 0) -> Sequence[Transition]:
        with self._state("history") as state:
            rows = list(state.transitions.get(task_id, {}).values())
        found = [row_to_transition(r) for r in rows]
        return sorted((t for t in found if t.version > since_version), key=lambda t: t.version)

    # -- touch -----------------------------------------------------------------------
    def touch(
        self,
        task_id: str,
        *,
        progress: Progress | None = None,
        heartbeat_at: datetime | None = None,
        lease_owner: str | None = None,
        lease_until: datetime | None = None,
    ) -> None:
        changes: Row = {}
        if progress is not None:
            changes.update(progress_to_row(progress))
        if heartbeat_at is not None:
            changes["heartbeat_at"] = encode_dt(heartbeat_at)
        if lease_owner is not None:
            changes["lease_owner"] = lease_owner
        if lease_until is not None:
            changes["lease_until"] = encode_dt(lease_until)

        def change(state: _State) -> bool:
            row = state.tasks.get(task_id)
            if row is None or not changes:
                return False  # unknown task: a late heartbeat is not an error
            row.update(changes)  # status_version deliberately untouched
            return True

        self._update("touch", change)

    # -- commands --------------------------------------------------------------------
    def submit_command(self, command: Command) -> None:
        def change(state: _State) -> bool:
            if command.command_id in state.commands:
                raise StoreError(f"command {command.command_id!r} already exists")
            state.commands[command.command_id] = command_to_row(command)
            return True

        self._update("submit_command", change)

    def claim_commands(
        self, *, now: datetime, lease_seconds: float, limit: int = 50
    ) -> Sequence[Command]:
        lease_until = encode_dt(now + timedelta(seconds=lease_seconds))
        claimed: list[Command] = []

        def change(state: _State) -> bool:
            free = [
                row_to_command(r)
                for r in state.commands.values()
                if r["finished_at"] is None
                and (r["lease_until"] is None or _before_or_at(r["lease_until"], now))
            ]
            free.sort(key=lambda c: (c.created_at, c.command_id))
            for command in free[: max(limit, 0)]:
                row = state.commands[command.command_id]
                row["lease_until"] = lease_until
                claimed.append(row_to_command(row))
            return bool(claimed)

        self._update("claim_commands", change)
        return claimed

    def complete_command(
        self, command_id: str, *, now: datetime, outcome: str | None = None
    ) -> None:
        def change(state: _State) -> bool:
            row = state.commands.get(command_id)
            if row is None or row["finished_at"] is not None:
                return False  # unknown or already finished: nothing to do
            row.update(finished_at=encode_dt(now), outcome=outcome)
            return True

        self._update("complete_command", change)

    def release_command(self, command_id: str, *, now: datetime) -> None:
        def change(state: _State) -> bool:
            row = state.commands.get(command_id)
            if row is None or row["finished_at"] is not None:
                return False
            row["lease_until"] = None  # clear the lease; do not finish
            return True

        self._update("release_command", change)

    # -- operations ------------------------------------------------------------------
    def prune(self, *, keep_terminal: int) -> int:
        dropped: list[str] = []

        def change(state: _State) -> bool:
            snapshots = (row_to_snapshot(r) for r in state.tasks.values())
            terminal = sorted(
                (t for t in snapshots if t.status.is_terminal),  # never a live task
                key=lambda t: (t.created_at, t.task_id),
            )
            doomed = terminal[: max(len(terminal) - keep_terminal, 0)]
            dropped.extend(t.task_id for t in doomed)
            gone = set(dropped)
            for task_id in gone:
                del state.tasks[task_id]
                state.transitions.pop(task_id, None)
            state.commands = {k: r for k, r in state.commands.items() if r["task_id"] not in gone}
            return bool(gone)

        self._update("prune", change)
        return len(dropped)

    def close(self) -> None:
        # Nothing is held open between operations; closing only forbids further use.
        with self._lock:
            self._closed = True


def _before_or_at(encoded: str, now: datetime) -> bool:
    """Stored lease_until <= now, compared as instants (claimable again AT lease_until)."""
    until = decode_dt(encoded)
    assert until is not None
    return until <= now


# -- factories for the kit ------------------------------------------------------------
def make_store() -> Iterator[JsonFileTaskStore]:
    """A fresh store on a file in its own temporary directory, removed afterwards."""
    directory = tempfile.mkdtemp(prefix="chongming-json-")
    store = JsonFileTaskStore(Path(directory) / "tasks.json")
    try:
        yield store
    finally:
        store.close()
        shutil.rmtree(directory, ignore_errors=True)


def make_shared_store() -> Iterator[Callable[[], JsonFileTaskStore]]:
    """One shared file; yields a picklable opener of new instances on it.

    It exists so the stress harness can demonstrate that this store is NOT safe
    across processes (lost updates, double claims) -- not as a way to share it.
    """
    directory = tempfile.mkdtemp(prefix="chongming-json-shared-")
    try:
        yield functools.partial(JsonFileTaskStore, str(Path(directory) / "tasks.json"))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
