"""A TaskStore on a key-value store WITHOUT multi-key transactions, and five ways to break it.

The store runs on Redis but uses only what JetStream KV, etcd without ``Txn`` or Consul
offer: atomic operations on ONE key (a compare-and-set on a per-key revision, a
conditional put, a conditional delete -- here each is a one-key Lua script or a plain
one-key command). Nothing ever touches two keys atomically. Secondary indexes (per status,
name, tag, bucket, pipeline run, plus an "all tasks" index and the command queue) are
kept by hand, and the rules that keep them right are the point of the module
(docs/kv-stores.md explains each one and cites the code):

1. **Index entries go in BEFORE the record's CAS** (``_write``). An entry may point at a
   task that does not (yet, or ever) match; every reader checks the record, which is the
   truth. So no reader can miss a task that exists: the task's entries for its current
   values were all in place when its record took those values.
2. **An entry carries a revision bound**: the highest *base revision* (the record
   revision a writer read and compare-and-sets against) of any writer that added it
   (``_IX_ADD`` keeps the maximum). A stale entry is removed only if its bound is below
   the record revision the remover read, atomically on the index key
   (``_IX_DEL_BOUNDED``): every writer that added it has either landed (and been
   overwritten) or can never land, because per-key revisions only grow. A writer still in
   flight on the current revision has raised the bound to it, so its entry stays.
3. **Deleting a record leaves a tombstone** with a revision (as JetStream's delete
   marker does), so a revision is never reused and rule 2 stays sound across a prune and
   a re-create of the same id.
4. **counts() without GROUP BY**: the number of entries of a status index (``HLEN``, one
   O(1) call per status) is exact except for tasks a writer is changing -- or crashed
   while changing. Every writer marks the task "dirty" (``P:dirty``, one field per write,
   removed by that writer when its index work is done, left behind by a crash) BEFORE its
   first index write. ``counts()`` reads the marks, then per status index the entry count
   and which dirty tasks have an entry -- in one atomic read of that index key
   (``_COUNT_IX``) -- and corrects the count for the dirty tasks from their records. Cost:
   O(statuses + dirty tasks), and a crash mid-save leaves a mark, not a wrong count.
5. **Prune is a conditional delete per task, retried while the task stays terminal**
   (``_drop``): a touch moves a record's revision without changing its status.

Each store gets its own key prefix (a uuid); ``make_store``/``make_shared_store`` delete
its keys on teardown. Every Redis call has a timeout (``CALL_TIMEOUT``) and every Redis
error reaches the caller as ``StoreError``.

The broken variants at the end each change one thing, the way the store's author could
have got it wrong (issue 31, item 4); each is still correct on one connection.
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
import urllib.parse
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, ClassVar, TypeVar

import redis

from chongming_conformance import (
    Command,
    ConcurrencyConflict,
    Progress,
    StoreError,
    TaskQuery,
    TaskSnapshot,
    TaskStatus,
    Transition,
)
from chongming_conformance.protocol.codec import (
    COMMAND_COLUMNS,
    SNAPSHOT_COLUMNS,
    command_to_row,
    encode_dt,
    progress_to_row,
    row_to_command,
    row_to_snapshot,
    row_to_transition,
    snapshot_to_row,
    transition_to_row,
)
from chongming_conformance.protocol.model import TERMINAL_STATUSES

__all__ = [
    "ALL_VARIANTS",
    "CountsFromStaleIndex",
    "CreateRaceUndoesWinnerIndex",
    "GivesUpOnMovedPrune",
    "IndexAfterRecord",
    "KvTaskStore",
    "UnboundedCleanup",
    "make_shared_store",
    "make_store",
    "redis_url",
    "shared_store",
]

#: Seconds any one Redis call may take (connect or reply) before it raises StoreError.
CALL_TIMEOUT = 5.0
#: How many times a CAS that lost only to a touch (same status_version) is tried again.
CAS_ATTEMPTS = 64
_INT_COLUMNS = frozenset({"status_version", "bucket", "progress_done", "progress_total"})
_WIDTH = len(encode_dt(datetime(2030, 1, 1).astimezone()) or "")  # fixed-width UTC text

S = TypeVar("S", bound="KvTaskStore")


def redis_url() -> str:
    """The server the tests use (``CHONGMING_TEST_REDIS``, default the local one)."""
    return os.environ.get("CHONGMING_TEST_REDIS", "redis://127.0.0.1:6379/0")


# -- one-key scripts: each reads and writes KEYS[1] only ------------------------------------
#: Compare-and-set on the record's revision (0: the key does not exist). On success the
#: record is replaced by the given fields with revision + 1: {1, new}; else {0, current}.
_CAS_PUT = """
local cur = tonumber(redis.call('HGET', KEYS[1], 'rev') or '0')
if cur ~= tonumber(ARGV[1]) then return {0, cur} end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'rev', cur + 1, unpack(ARGV, 2))
return {1, cur + 1}
"""
#: touch: set / delete the named fields of a live record, revision + 1; missing: no-op.
_TOUCH = """
if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('HEXISTS', KEYS[1], 'dead') == 1 then
  return 0
end
local nset = tonumber(ARGV[1])
if nset > 0 then redis.call('HSET', KEYS[1], unpack(ARGV, 2, 1 + 2 * nset)) end
if #ARGV > 1 + 2 * nset then redis.call('HDEL', KEYS[1], unpack(ARGV, 2 + 2 * nset)) end
redis.call('HINCRBY', KEYS[1], 'rev', 1)
return 1
"""
#: Add an index entry, keeping the highest base revision of the writers that added it.
_IX_ADD = """
local c = redis.call('HGET', KEYS[1], ARGV[1])
if (not c) or tonumber(c) < tonumber(ARGV[2]) then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
end
return 1
"""
#: Remove an index entry only if every writer that added it based its CAS on a revision
#: below ARGV[2] (the record revision the caller read): none of them can land any more.
_IX_DEL_BOUNDED = """
local c = redis.call('HGET', KEYS[1], ARGV[1])
if c and tonumber(c) < tonumber(ARGV[2]) then
  redis.call('HDEL', KEYS[1], ARGV[1])
  return 1
end
return 0
"""
#: One atomic read of a status index: its size and which of the given entries it holds.
_COUNT_IX = """
local out = {redis.call('HLEN', KEYS[1])}
for i = 1, #ARGV do out[#out + 1] = redis.call('HEXISTS', KEYS[1], ARGV[i]) end
return out
"""
#: Insert a record only if the key does not exist (submit_command).
_PUT_NEW = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV))
return 1
"""
#: Lease one command if it is unfinished and free at ARGV[1]; ARGV[3]: the created_at the
#: queue entry names (another value: the entry is a losing duplicate's).
_CLAIM_ONE = """
if redis.call('EXISTS', KEYS[1]) == 0 then return {'missing'} end
if redis.call('HGET', KEYS[1], 'created_at') ~= ARGV[3] then return {'other'} end
if redis.call('HEXISTS', KEYS[1], 'finished_at') == 1 then return {'finished'} end
local lease = redis.call('HGET', KEYS[1], 'lease_until')
if lease and lease > ARGV[1] then return {'leased'} end
redis.call('HSET', KEYS[1], 'lease_until', ARGV[2])
local out = {'ok'}
for _, v in ipairs(redis.call('HGETALL', KEYS[1])) do out[#out + 1] = v end
return out
"""
#: Finish an unfinished command (outcome: ARGV[2], absent when ARGV[3] == '0').
_COMPLETE = """
if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('HEXISTS', KEYS[1], 'finished_at') == 1 then
  return 0
end
redis.call('HSET', KEYS[1], 'finished_at', ARGV[1])
if ARGV[3] == '1' then redis.call('HSET', KEYS[1], 'outcome', ARGV[2]) end
return 1
"""
#: Clear the lease of an unfinished command.
_RELEASE = """
if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('HEXISTS', KEYS[1], 'finished_at') == 1 then
  return 0
end
redis.call('HDEL', KEYS[1], 'lease_until')
return 1
"""


def _member(created_at: str, task_id: str) -> str:
    """An index entry: fixed-width UTC created_at, then the id -- text order is query order."""
    return f"{created_at}|{task_id}"


def _member_id(member: str) -> str:
    return member[_WIDTH + 1:]


def _flat(row: Mapping[str, Any]) -> list[str]:
    """A row as HSET arguments; None columns are left out (absent field = None)."""
    out: list[str] = []
    for key, value in row.items():
        if value is not None:
            out += [key, str(value)]
    return out


def _decode_row(raw: Mapping[str, str], columns: Sequence[str]) -> dict[str, Any]:
    row: dict[str, Any] = {}
    for c in columns:
        v = raw.get(c)
        row[c] = int(v) if v is not None and c in _INT_COLUMNS else v
    return row


def _pairs(flat: Sequence[str]) -> dict[str, str]:
    return {flat[i]: flat[i + 1] for i in range(0, len(flat), 2)}


class KvTaskStore:
    """The careful store: single-key CAS only, indexes by hand (module docstring, rules 1-5)."""

    #: Seconds between a record's CAS and its index writes -- only IndexAfterRecord uses it.
    INDEX_DELAY: ClassVar[float] = 0.0

    def __init__(self, url: str, prefix: str) -> None:
        self._prefix = prefix
        self._closed = False
        try:
            self._r: redis.Redis = redis.Redis.from_url(
                url, decode_responses=True, socket_timeout=CALL_TIMEOUT,
                socket_connect_timeout=CALL_TIMEOUT)
            self._cas_put = self._r.register_script(_CAS_PUT)
            self._touch = self._r.register_script(_TOUCH)
            self._ix_add = self._r.register_script(_IX_ADD)
            self._ix_del = self._r.register_script(_IX_DEL_BOUNDED)
            self._count_ix = self._r.register_script(_COUNT_IX)
            self._put_new = self._r.register_script(_PUT_NEW)
            self._claim_one = self._r.register_script(_CLAIM_ONE)
            self._complete = self._r.register_script(_COMPLETE)
            self._release = self._r.register_script(_RELEASE)
        except redis.RedisError as exc:
            raise StoreError(f"cannot open the store: {exc}") from exc

    @classmethod
    def open(cls: type[S], url: str, prefix: str) -> S:
        """The opener's target (``functools.partial(cls.open, url, prefix)``)."""
        return cls(url, prefix)

    # -- keys ---------------------------------------------------------------------------------
    def _k(self, *parts: str) -> str:
        return ":".join((self._prefix, *parts))

    def _task_key(self, task_id: str) -> str:
        return self._k("t", task_id)

    def _indexes(self, row: Mapping[str, Any], tags: Iterable[str]) -> list[str]:
        """Every index key a task with these values belongs to."""
        keys = [self._k("ix", "all"), self._k("ix", "s", row["status"]),
                self._k("ix", "n", row["name"])]
        keys += [self._k("ix", "g", t) for t in sorted(tags)]
        if row["bucket"] is not None:
            keys.append(self._k("ix", "b", str(row["bucket"])))
        if row["pipeline_run_id"] is not None:
            keys.append(self._k("ix", "p", row["pipeline_run_id"]))
        return keys

    def _status_key(self, status: TaskStatus) -> str:
        return self._k("ix", "s", status.value)

    # -- plumbing -------------------------------------------------------------------------------
    def _check_open(self, op: str) -> None:
        if self._closed:
            raise StoreError(f"{op}() on a closed KvTaskStore")

    @contextlib.contextmanager
    def _call(self, op: str) -> Iterator[None]:
        self._check_open(op)
        try:
            yield
        except redis.RedisError as exc:
            raise StoreError(f"{op}(): {type(exc).__name__}: {exc}") from exc

    def _read(self, task_id: str) -> tuple[int, dict[str, str] | None]:
        """(revision, live fields or None) of one record: one read of one key."""
        raw: dict[str, str] = self._r.hgetall(self._task_key(task_id))
        rev = int(raw.get("rev", "0"))
        return rev, (None if not raw or "dead" in raw else raw)

    def _cas(self, task_id: str, base: int, fields: Sequence[str]) -> tuple[bool, int]:
        won, rev = self._cas_put(keys=[self._task_key(task_id)], args=[base, *fields])
        return bool(won), int(rev)

    def _mark(self, member: str) -> str:
        """Mark a task dirty (rule 4) before any index write; the field to remove after."""
        field = f"{member}#{uuid.uuid4().hex}"
        self._r.hset(self._k("dirty"), field, "1")
        return field

    def _unmark(self, field: str) -> None:
        self._r.hdel(self._k("dirty"), field)

    def _add_entries(self, keys: Iterable[str], member: str, base: int) -> None:
        for key in keys:
            self._ix_add(keys=[key], args=[member, base])

    def _drop_stale(self, keys: Iterable[str], member: str, rev: int, keep: Iterable[str]
                    ) -> None:
        """Remove the entries of ``keys`` the record at revision ``rev`` no longer has (rule 2)."""
        keep = set(keep)
        for key in keys:
            if key not in keep:
                self._ix_del(keys=[key], args=[member, rev])

    def _write(self, task_id: str, base: int, fields: Sequence[str], member: str,
               new_keys: Sequence[str], old_member: str, old_keys: Sequence[str]
               ) -> tuple[bool, int]:
        """Indexes, then the record's CAS at ``base``, then the cleanup: rules 1 and 2.

        ``member``/``new_keys``: the entries of the values written; ``old_member``/
        ``old_keys``: those of the values read at ``base``. Returns (won, the record's
        revision after the CAS attempt)."""
        marks = [self._mark(m) for m in dict.fromkeys((member, old_member))]
        try:
            self._add_entries(new_keys, member, base)
            won, rev = self._cas(task_id, base, fields)
            if won:  # the old values' entries are stale now; a later writer's stay (bound)
                keep = new_keys if old_member == member else []
                self._drop_stale(old_keys, old_member, rev, keep)
            else:  # ours may be stale: those the winner also needs it keeps (bound/match)
                self._after_lost_cas(task_id, member, new_keys)
            return won, rev
        finally:
            for mark in marks:
                self._unmark(mark)

    def _record_keys(self, raw: Mapping[str, str] | None, member: str) -> list[str]:
        """The index keys a record read holds ``member`` in (none: missing, deleted, or a
        record created at another instant than the entry says)."""
        if raw is None or raw.get("created_at") != member[:_WIDTH]:
            return []
        return self._indexes(_decode_row(raw, SNAPSHOT_COLUMNS), _tags(raw))

    def _after_lost_cas(self, task_id: str, member: str, our_keys: Sequence[str]) -> None:
        """A lost CAS: remove the entries we added that the record does not have."""
        rev, raw = self._read(task_id)
        self._drop_stale(our_keys, member, rev, self._record_keys(raw, member))

    # -- task snapshots -------------------------------------------------------------------------
    def create(self, snapshot: TaskSnapshot) -> None:
        with self._call("create"):
            row = snapshot_to_row(snapshot)
            base, raw = self._read(snapshot.task_id)
            if raw is not None:
                raise StoreError(f"task {snapshot.task_id!r} already exists")
            member = _member(row["created_at"], snapshot.task_id)
            won, _ = self._write(snapshot.task_id, base, _flat(row), member,
                                 self._indexes(row, snapshot.tags), member, [])
            if not won:
                raise StoreError(f"task {snapshot.task_id!r} already exists")

    def save(self, snapshot: TaskSnapshot, *, expect_version: int) -> None:
        with self._call("save"):
            row = snapshot_to_row(snapshot)
            for _ in range(CAS_ATTEMPTS):
                base, raw = self._read(snapshot.task_id)
                if raw is None:
                    raise ConcurrencyConflict(snapshot.task_id, expect_version, None)
                actual = int(raw["status_version"])
                if actual != expect_version:
                    raise ConcurrencyConflict(snapshot.task_id, expect_version, actual)
                # The lease is touch's: carry the stored one (the CAS fails if a touch moves it).
                row["lease_owner"] = raw.get("lease_owner")
                row["lease_until"] = raw.get("lease_until")
                old_member = _member(raw["created_at"], snapshot.task_id)
                won, _ = self._write(snapshot.task_id, base, _flat(row),
                                     _member(row["created_at"], snapshot.task_id),
                                     self._indexes(row, snapshot.tags), old_member,
                                     self._record_keys(raw, old_member))
                if won:
                    return
                # Lost the CAS: to a touch (same version: try again) or a save (conflict).
            raise StoreError(f"save({snapshot.task_id!r}): {CAS_ATTEMPTS} CAS attempts lost "
                             "to touches")

    def get(self, task_id: str) -> TaskSnapshot | None:
        with self._call("get"):
            _, raw = self._read(task_id)
            return None if raw is None else _snapshot(raw)

    def _index_for(self, q: TaskQuery) -> list[str] | None:
        """The smallest index (a union of keys) that holds every match; None: nothing can."""
        options: list[list[str]] = [[self._k("ix", "all")]]
        if q.statuses is not None:
            options.append([self._status_key(s) for s in q.statuses])
        if q.name is not None:
            options.append([self._k("ix", "n", q.name)])
        if q.tag is not None:
            options.append([self._k("ix", "g", q.tag)])
        if q.buckets is not None:
            options.append([self._k("ix", "b", str(b)) for b in q.buckets])
        if q.pipeline_run_id is not None:
            options.append([self._k("ix", "p", q.pipeline_run_id)])
        if any(not keys for keys in options):
            return None  # an empty statuses / buckets set matches nothing
        pipe = self._r.pipeline(transaction=False)
        for keys in options:
            for key in keys:
                pipe.hlen(key)
        sizes = iter(pipe.execute())
        totals = [sum(next(sizes) for _ in keys) for keys in options]
        return options[totals.index(min(totals))]

    def query(self, query: TaskQuery | None = None) -> Sequence[TaskSnapshot]:
        q = query or TaskQuery()
        with self._call("query"):
            keys = self._index_for(q)
            if keys is None or q.limit == 0:
                return []
            entries: dict[str, str] = {}  # member -> the index key it came from
            for key in keys:
                for member in self._r.hkeys(key):
                    entries.setdefault(member, key)
            members = sorted(entries, reverse=q.newest_first)
            found: list[TaskSnapshot] = []
            seen: set[str] = set()
            batch = 64
            for start in range(0, len(members), batch):
                chunk = members[start:start + batch]
                pipe = self._r.pipeline(transaction=False)
                for member in chunk:
                    pipe.hgetall(self._task_key(_member_id(member)))
                for member, raw in zip(chunk, pipe.execute(), strict=True):
                    task_id = _member_id(member)
                    rev = int(raw.get("rev", "0"))
                    live = bool(raw) and "dead" not in raw
                    snap = _snapshot(raw) if live else None
                    if snap is None or encode_dt(snap.created_at) != member[:_WIDTH] \
                            or not _matches(snap, q):
                        self._repair(entries[member], member, rev, raw if live else None)
                        continue
                    if task_id in seen:
                        continue
                    seen.add(task_id)
                    found.append(snap)
                    if q.limit is not None and len(found) >= q.limit:
                        return found
            return found

    def _repair(self, key: str, member: str, rev: int, raw: Mapping[str, str] | None) -> None:
        """A reader met an entry whose record (at ``rev``) is not in ``key``: rule 2."""
        if key in self._record_keys(raw, member):
            return  # it is in the index, it only missed this query's other filters
        self._ix_del(keys=[key], args=[member, rev])

    def counts(self) -> Mapping[TaskStatus, int]:
        with self._call("counts"):
            statuses = list(TaskStatus)
            marks = self._r.hkeys(self._k("dirty"))
            dirty = sorted({m.rsplit("#", 1)[0] for m in marks})
            pipe = self._r.pipeline(transaction=False)
            for s in statuses:
                self._count_ix(keys=[self._status_key(s)], args=dirty, client=pipe)
            for member in dirty:
                pipe.hmget(self._task_key(_member_id(member)), ["status", "dead", "created_at"])
            replies = pipe.execute()
            result = {}
            for s, reply in zip(statuses, replies[:len(statuses)], strict=True):
                result[s] = int(reply[0]) - sum(int(x) for x in reply[1:])
            for member, (status, dead, created) in zip(dirty, replies[len(statuses):],
                                                       strict=True):
                if status is not None and dead is None and created == member[:_WIDTH]:
                    result[TaskStatus(status)] += 1
            return result

    # -- history --------------------------------------------------------------------------------
    def append(self, transition: Transition) -> None:
        with self._call("append"):
            row = transition_to_row(transition)
            self._r.hsetnx(self._k("h", transition.task_id), str(transition.version),
                           _encode_json(row))

    def history(self, task_id: str, *, since_version: int = 0) -> Sequence[Transition]:
        with self._call("history"):
            rows = self._r.hgetall(self._k("h", task_id))
            found = sorted((int(v), text) for v, text in rows.items() if int(v) > since_version)
            return [row_to_transition(_decode_json(text)) for _, text in found]

    # -- touch ------------------------------------------------------------------------------
    def touch(
        self,
        task_id: str,
        *,
        progress: Progress | None = None,
        heartbeat_at: datetime | None = None,
        lease_owner: str | None = None,
        lease_until: datetime | None = None,
    ) -> None:
        with self._call("touch"):
            sets: dict[str, Any] = {}
            dels: list[str] = []
            if progress is not None:
                for k, v in progress_to_row(progress).items():
                    if v is None:
                        dels.append(k)
                    else:
                        sets[k] = v
            if heartbeat_at is not None:
                sets["heartbeat_at"] = encode_dt(heartbeat_at)
            if lease_owner is not None:
                sets["lease_owner"] = lease_owner
            if lease_until is not None:
                sets["lease_until"] = encode_dt(lease_until)
            if not sets and not dels:
                return
            self._touch(keys=[self._task_key(task_id)],
                        args=[len(sets), *_flat(sets), *dels])

    # -- commands ---------------------------------------------------------------------------
    def submit_command(self, command: Command) -> None:
        with self._call("submit_command"):
            row = command_to_row(command)
            entry = _member(row["created_at"], command.command_id)
            # The queue entry and the task's list first (rule 1); the claim checks the record.
            self._r.zadd(self._k("q"), {entry: 0})
            self._r.sadd(self._k("ct", command.task_id), command.command_id)
            if not self._put_new(keys=[self._k("c", command.command_id)], args=_flat(row)):
                raise StoreError(f"command {command.command_id!r} already exists")

    def claim_commands(
        self, *, now: datetime, lease_seconds: float, limit: int = 50
    ) -> Sequence[Command]:
        with self._call("claim_commands"):
            if limit <= 0:
                return []
            now_text = encode_dt(now)
            until = encode_dt(now + timedelta(seconds=lease_seconds))
            claimed: list[Command] = []
            for entry in self._r.zrange(self._k("q"), 0, -1):  # created_at, then id
                cid = _member_id(entry)
                reply = self._claim_one(keys=[self._k("c", cid)],
                                        args=[now_text, until, entry[:_WIDTH]])
                if reply[0] == "ok":
                    claimed.append(row_to_command(_decode_row(_pairs(reply[1:]),
                                                              COMMAND_COLUMNS)))
                    if len(claimed) >= limit:
                        break
                elif reply[0] in ("finished", "other"):  # stale for good: never claimable
                    self._r.zrem(self._k("q"), entry)
            return claimed

    def complete_command(
        self, command_id: str, *, now: datetime, outcome: str | None = None
    ) -> None:
        with self._call("complete_command"):
            self._complete(keys=[self._k("c", command_id)],
                           args=[encode_dt(now), outcome or "", "0" if outcome is None else "1"])

    def release_command(self, command_id: str, *, now: datetime) -> None:
        with self._call("release_command"):
            self._release(keys=[self._k("c", command_id)])

    # -- operations -------------------------------------------------------------------------
    def prune(self, *, keep_terminal: int) -> int:
        with self._call("prune"):
            entries: set[str] = set()
            for s in TERMINAL_STATUSES:
                entries.update(self._r.hkeys(self._status_key(s)))
            terminal: list[tuple[str, int, dict[str, str]]] = []
            for member in sorted(entries):
                rev, raw = self._read(_member_id(member))
                if raw is not None and raw.get("created_at") == member[:_WIDTH] \
                        and TaskStatus(raw["status"]).is_terminal:
                    terminal.append((member, rev, raw))
            unique = {m: (m, r, raw) for m, r, raw in terminal}
            ordered = sorted(unique.values(), key=lambda t: t[0])
            doomed = ordered[:max(len(ordered) - keep_terminal, 0)]
            return sum(self._drop(member, rev, raw) for member, rev, raw in doomed)

    def _drop(self, member: str, rev: int, raw: Mapping[str, str]) -> int:
        """Delete one terminal task (rule 5): a tombstone by CAS, retried while it stays
        terminal; then its entries (bounded), history and commands. 1 if it was dropped."""
        task_id = _member_id(member)
        mark = self._mark(member)
        try:
            for _ in range(CAS_ATTEMPTS):
                won, now_rev = self._cas(task_id, rev, ["dead", "1"])
                if won:
                    break
                if not self._retry_drop():
                    return 0
                rev, fresh = self._read(task_id)
                if fresh is None or not TaskStatus(fresh["status"]).is_terminal:
                    return 0  # revived (or gone): not ours to drop
                raw = fresh
            else:
                return 0
            self._drop_stale(self._record_keys(raw, member), member, now_rev, [])
            self._r.delete(self._k("h", task_id))
            for cid in self._r.smembers(self._k("ct", task_id)):
                cmd: dict[str, str] = self._r.hgetall(self._k("c", cid))
                if cmd.get("task_id") == task_id:
                    self._r.delete(self._k("c", cid))
                    self._r.zrem(self._k("q"), _member(cmd["created_at"], cid))
            self._r.delete(self._k("ct", task_id))
            return 1
        finally:
            self._unmark(mark)

    def _retry_drop(self) -> bool:
        """Whether a prune whose delete lost its CAS looks at the task again."""
        return True

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(redis.RedisError):
            self._r.close()
            self._r.connection_pool.disconnect()


def _tags(raw: Mapping[str, str]) -> frozenset[str]:
    return _snapshot_tags(raw.get("tags"))


def _snapshot_tags(text: str | None) -> frozenset[str]:
    from chongming_conformance.protocol.codec import decode_tags
    return decode_tags(text)


def _snapshot(raw: Mapping[str, str]) -> TaskSnapshot:
    return row_to_snapshot(_decode_row(raw, SNAPSHOT_COLUMNS))


def _matches(task: TaskSnapshot, q: TaskQuery) -> bool:
    if q.statuses is not None and task.status not in q.statuses:
        return False
    if q.name is not None and task.name != q.name:
        return False
    if q.name_prefix is not None and not task.name.startswith(q.name_prefix):
        return False
    if q.tag is not None and q.tag not in task.tags:
        return False
    if q.buckets is not None and task.bucket not in q.buckets:
        return False
    return q.pipeline_run_id is None or task.pipeline_run_id == q.pipeline_run_id


def _encode_json(row: Mapping[str, Any]) -> str:
    import json
    return json.dumps(row, ensure_ascii=False)


def _decode_json(text: str) -> dict[str, Any]:
    import json
    value: dict[str, Any] = json.loads(text)
    return value


# -- the broken variants: one mistake each ---------------------------------------------------
class GivesUpOnMovedPrune(KvTaskStore):
    """(a) prune's conditional delete lost to a touch (same status, new revision) and the
    prune gave up on the task instead of reading it again: a terminal task stays."""

    def _retry_drop(self) -> bool:
        return False


class CreateRaceUndoesWinnerIndex(KvTaskStore):
    """(b) a create that lost the race "undoes" the index entries it wrote -- without the
    revision bound or a look at the winner's record. The entries are the winner's too
    (same created_at and id), so the winner's task drops out of its indexes."""

    def _after_lost_cas(self, task_id: str, member: str, our_keys: Sequence[str]) -> None:
        for key in our_keys:
            self._r.hdel(key, member)


class IndexAfterRecord(KvTaskStore):
    """(c) the record's CAS first, the index entries after it (~2 ms later): in between the
    task is in no index for its new values, and a crash there leaves it so for good."""

    INDEX_DELAY = 0.002

    def _write(self, task_id: str, base: int, fields: Sequence[str], member: str,
               new_keys: Sequence[str], old_member: str, old_keys: Sequence[str]
               ) -> tuple[bool, int]:
        marks = [self._mark(m) for m in dict.fromkeys((member, old_member))]
        try:
            won, rev = self._cas(task_id, base, fields)
            if won:
                time.sleep(self.INDEX_DELAY)
                self._add_entries(new_keys, member, base)
                keep = new_keys if old_member == member else []
                self._drop_stale(old_keys, old_member, rev, keep)
            return won, rev
        finally:
            for mark in marks:
                self._unmark(mark)


class UnboundedCleanup(KvTaskStore):
    """(d) a stale entry is removed whenever the record the remover read does not match it
    -- no revision bound -- so it can delete the entry a save in flight has just added
    (and that save's record then lands in no index)."""

    def _drop_stale(self, keys: Iterable[str], member: str, rev: int, keep: Iterable[str]
                    ) -> None:
        keep = set(keep)
        for key in keys:
            if key not in keep:
                self._r.hdel(key, member)

    def _repair(self, key: str, member: str, rev: int, raw: Mapping[str, str] | None) -> None:
        if key in self._record_keys(raw, member):
            return
        self._r.hdel(key, member)


class CountsFromStaleIndex(KvTaskStore):
    """(e) counts() is the size of each status index: right while every save completes, but
    a save in flight or killed between its index writes and its cleanup is counted twice
    (or a create killed before its CAS counted once too often)."""

    def counts(self) -> Mapping[TaskStatus, int]:
        with self._call("counts"):
            pipe = self._r.pipeline(transaction=False)
            for s in TaskStatus:
                pipe.hlen(self._status_key(s))
            return dict(zip(TaskStatus, (int(n) for n in pipe.execute()), strict=True))


ALL_VARIANTS: tuple[type[KvTaskStore], ...] = (
    GivesUpOnMovedPrune, CreateRaceUndoesWinnerIndex, IndexAfterRecord, UnboundedCleanup,
    CountsFromStaleIndex)


# -- factories --------------------------------------------------------------------------------
def _delete_prefix(url: str, prefix: str) -> None:
    client = redis.Redis.from_url(url, socket_timeout=CALL_TIMEOUT,
                                  socket_connect_timeout=CALL_TIMEOUT)
    try:
        keys = list(client.scan_iter(match=f"{prefix}:*", count=1000))
        for start in range(0, len(keys), 500):
            client.delete(*keys[start:start + 500])
    finally:
        client.close()


def _fresh_prefix() -> str:
    return f"ckv:{uuid.uuid4().hex}"


def routed_url(url: str, network: Any) -> str:
    """``url`` with its server address replaced by ``network.route(host, port)`` (the kit's
    network seam): the workers' connections then go through the kit's fault proxy."""
    parts = urllib.parse.urlsplit(url)
    host, port = network.route(parts.hostname or "127.0.0.1", parts.port or 6379)
    auth = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{auth}{host}:{port}"))


@contextlib.contextmanager
def shared_store(cls: type[KvTaskStore] = KvTaskStore, network: Any = None
                 ) -> Iterator[Callable[[], KvTaskStore]]:
    """A fresh prefix, an opener for ``cls`` on it (picklable; through the kit's proxies when
    ``network`` is given), the keys deleted after (directly)."""
    url, prefix = redis_url(), _fresh_prefix()
    opened = url if network is None else routed_url(url, network)
    try:
        yield functools.partial(cls.open, opened, prefix)
    finally:
        _delete_prefix(url, prefix)


def factories(cls: type[KvTaskStore]) -> tuple[
        Callable[[], Iterator[KvTaskStore]], Callable[[], Iterator[Callable[[], KvTaskStore]]]]:
    """The kit's two factories for ``cls``: ``make_store`` (a fresh, empty store on its own
    prefix) and ``make_shared_store`` (one shared prefix, an opener per worker). A module
    that binds them to those names is a spec the plugin and the soak accept
    (``kv_variant_stores``)."""

    def make_store() -> Iterator[KvTaskStore]:
        url, prefix = redis_url(), _fresh_prefix()
        store = cls(url, prefix)
        try:
            yield store
        finally:
            store.close()
            _delete_prefix(url, prefix)

    def make_shared_store(network: Any = None) -> Iterator[Callable[[], KvTaskStore]]:
        with shared_store(cls, network) as opener:
            yield opener

    return make_store, make_shared_store


make_store, make_shared_store = factories(KvTaskStore)
