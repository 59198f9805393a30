"""Every field survives a round-trip; time is compared as an instant."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime

from ...oracle.blame import blamed, blamed_write, snapshot_culprit
from ...protocol.clauses import checks
from ...protocol.errors import StoreError
from ...protocol.model import (
    Command,
    Failure,
    Progress,
    TaskSnapshot,
    TaskStatus,
    Transition,
)
from ...strategies.samples import (
    ID_LENGTH,
    KATHMANDU,
    NAME_LENGTH,
    ST_JOHNS,
    TEXT_LENGTH,
    at,
    command,
    full_snapshot,
    long_text,
    snapshot,
    transition,
)
from ._base import LEASE, ContractBase, _diff, _ids, expect_on

__all__ = ["RoundTripContract"]

#: Ids as the controller makes them (``uuid.uuid4().hex``: 32 hex digits). The original
#: guide names no length, so a store may refuse a long id -- but not these, or the
#: controller cannot submit a task or a stop request at all (LENGTH-IDS).
_CONTROLLER_TASK_ID = "3f2c8e41a9b04d7e8c6a1b5d0e9f7a24"
_CONTROLLER_COMMAND_ID = "b71d04e9c3a2468f9e5d1c0a8b6f3e52"


def _taken(what: str, call: Callable[[], object]) -> bool:
    """Make a write of a long value: True if the store took it, False if it refused it with
    StoreError. Any other exception fails LENGTH-IDS: a value a store cannot hold is refused
    as the guide refuses everything else, with StoreError, never a driver or Python error."""
    try:
        call()
    except StoreError:
        return False
    except Exception as exc:
        raise AssertionError(
            f"{what} raised {type(exc).__name__}: {exc}; a value a store cannot hold is "
            "refused with StoreError"
        ) from exc
    return True


def _taken_or_fail(what: str, call: Callable[[], object]) -> None:
    """A write the store must take whatever lengths it refuses (the controller's own ids)."""
    if not _taken(what, call):
        raise AssertionError(f"{what} was refused: the controller makes ids of this length")


class RoundTripContract(ContractBase):
    """The round-trip and time clauses of ``StoreContract``."""

    # ========================================================================================
    # round-trip and time
    # ========================================================================================
    @checks("SNAPSHOT-FULL-ROUNDTRIP", "TIME-UTC-ROUNDTRIP")
    def test_snapshot_full_roundtrip__create_get_every_field(self) -> None:
        full = full_snapshot("t-1")
        self.store.create(full)
        got = self._get("t-1")
        expect_on(snapshot_culprit(full, got, "SNAPSHOT-FULL-ROUNDTRIP"), got == full,
                  f"full snapshot changed: {_diff(full, got)}")
        expect_on("SNAPSHOT-FULL-ROUNDTRIP", isinstance(got.tags, frozenset),
                  f"tags came back as {type(got.tags).__name__}")
        expect_on("SNAPSHOT-FULL-ROUNDTRIP", isinstance(got.status, TaskStatus),
                  "status must be a TaskStatus")
        for name in ("created_at", "updated_at", "started_at", "finished_at", "heartbeat_at"):
            value = getattr(got, name)
            expect_on("TIME-UTC-ROUNDTRIP", value.utcoffset() is not None,
                      f"{name} came back naive")
            expect_on("TIME-UTC-ROUNDTRIP",
                      value.microsecond == getattr(full, name).astimezone(UTC).microsecond,
                      f"{name} lost microseconds")

    @checks("TIME-UTC-ROUNDTRIP")
    def test_time_utc_roundtrip__dates_past_2038_taken(self) -> None:
        """Instants a 32-bit ``TIMESTAMP`` column cannot hold: the first second past
        2038-01-19T03:14:07Z, a date in 2040 and the last microsecond of 2199 (the kit draws
        1970-2200). The controller writes the wall clock, so a store refusing them stops
        working in 2038: a refusal is a failure naming the date (docs/backend-guide.md §10)."""
        for n, when in enumerate((datetime(2038, 1, 19, 3, 14, 8, tzinfo=UTC),
                                  datetime(2040, 3, 1, tzinfo=UTC),
                                  datetime(2199, 12, 31, 23, 59, 59, 999999, tzinfo=UTC))):
            sent = snapshot(f"t-{n}", created=0)
            sent = replace(sent, created_at=when, updated_at=when)
            blamed_write(("TIME-UTC-ROUNDTRIP",), functools.partial(self.store.create, sent),
                         sent)
            got = self._get(sent.task_id)
            expect_on(snapshot_culprit(sent, got, "TIME-UTC-ROUNDTRIP"), got == sent,
                      f"a snapshot created at {when.isoformat()} changed: {_diff(sent, got)}")

    @checks("SNAPSHOT-FULL-ROUNDTRIP")
    def test_snapshot_full_roundtrip__save_get_every_field(self) -> None:
        self._given(snapshot("t-1", version=1))
        full = full_snapshot("t-1", status_version=2, lease_owner=None, lease_until=None)
        self.store.save(full, expect_version=1)
        self._assert_stored(full, "full snapshot through save()")
        back = snapshot("t-1", version=3)  # every optional field None again
        self.store.save(back, expect_version=2)
        self._assert_stored(back, "None must stay None after save()")

    @checks("SNAPSHOT-FULL-ROUNDTRIP")
    def test_snapshot_full_roundtrip__empty_and_edge_values(self) -> None:
        edge = snapshot(
            "t-1",
            name="",
            version=0,
            tags=frozenset({""}),
            bucket=0,
            pipeline_run_id="",
            progress=Progress(done=0, total=0, message=""),
        )
        plain = snapshot("t-2", created=1)
        self._create_all(edge, plain)
        self._assert_stored(edge, "empty strings, zeros and the empty tag")
        got = self._get("t-2")
        assert got.tags == frozenset() and isinstance(got.tags, frozenset), "no tags"
        assert got.progress is None and got.failure is None, "None must stay None"

    @checks("TIME-INSTANT-ORDER")
    def test_time_instant_order__query_orders_by_instant_not_text(self) -> None:
        # 'east' is earlier as an instant but later as wall-clock text.
        self._given(
            snapshot("west", created_at=at(3600, ST_JOHNS)),
            snapshot("east", created_at=at(1800, KATHMANDU)),
            snapshot("utc", created_at=at(2700)),
        )
        assert self._query_ids() == ["east", "utc", "west"], "query() must order by instant"
        self._given_newest_first()
        assert self._query_ids(newest_first=True) == ["west", "utc", "east"]

    # ========================================================================================
    # lengths (docs/backend-guide.md §7)
    # ========================================================================================
    @checks("LENGTH-IDS")
    def test_length_ids__exact_or_refused_never_truncated(self) -> None:
        """Ids, tags, run ids, lease owners and issuers of ID_LENGTH characters (every UTF-8
        width, 4-byte included), in pairs that differ only in their last character: each
        write is either taken -- and then read back, matched and told apart exactly -- or
        refused with StoreError and leaves nothing behind. A column that truncates makes the
        two one, or stores a value nobody asked for.

        Refusing is allowed because the original guide names no length (§10); the ids the
        controller makes, 32 hex characters, must be taken. Whether a store takes the long
        values is LENGTH-IDS-CAPACITY (a SHOULD, its own test). Every kind of write is first
        made with short values, as a precondition blamed on its own clause, so only the
        length can fail here.
        """
        self._given(snapshot("short", tags=frozenset({"s"}), pipeline_run_id="r"))
        self._given_touched("short", lease_owner="o", lease_until=at(60))
        self._given_command(command("c-short", "short"))
        # The filters the long values are matched through, with short values (and a task
        # neither matches): a filter that does not work at all is its own clause's failure,
        # not the length's.
        self._given(snapshot("plain", created=0.5))
        blamed(("QUERY-TAG-EXACT",), functools.partial(
            self._assert_query, ["short"], "precondition: tag='s'", tag="s"))
        blamed(("QUERY-PIPELINE",), functools.partial(
            self._assert_query, ["short"], "precondition: pipeline_run_id='r'",
            pipeline_run_id="r"))
        controller_task = snapshot(_CONTROLLER_TASK_ID, created=1)
        _taken_or_fail("create() of a task with the controller's 32-character id",
                       functools.partial(self.store.create, controller_task))
        # Tasks: a long task id, a long tag, a long run id, each on a task of its own, each
        # created at its own instant (no tie for query() to lose: QUERY-TIES-COMPLETE's).
        ids = {k: long_text(ID_LENGTH, tail=k) for k in ("A", "B")}
        tasks: dict[str, TaskSnapshot] = {}
        for n, k in enumerate(("A", "B")):
            tasks[f"task id {k}"] = snapshot(ids[k], created=2 + 3 * n)
            tasks[f"tag {k}"] = snapshot(f"tag-{k}", created=3 + 3 * n, tags=frozenset(
                {long_text(ID_LENGTH, tail=f"tag{k}")}))
            tasks[f"run id {k}"] = snapshot(f"run-{k}", created=4 + 3 * n,
                                            pipeline_run_id=long_text(ID_LENGTH, tail=f"run{k}"))
        kept = {what: t for what, t in tasks.items() if _taken(
            f"create() of a task with a {ID_LENGTH}-character {what[:-2]}",
            functools.partial(self.store.create, t))}
        stored = sorted(_ids(self._all_tasks()))
        want = sorted({"short", "plain", controller_task.task_id,
                       *(t.task_id for t in kept.values())})
        assert stored == want, (
            f"after creating tasks with {ID_LENGTH}-character values (taken: {sorted(kept)}; "
            f"refused: {sorted(set(tasks) - set(kept))}), query() holds {len(stored)} task "
            f"id(s), expected {len(want)}: an id was truncated, or a refused create left a row"
        )
        for what, t in (*kept.items(), ("controller's id", controller_task)):
            got = self.store.get(t.task_id)
            assert got == t, f"the task made for {what!r} changed on its way back: {_diff(t, got)}"
            for tag in t.tags:
                self._assert_query([t.task_id], f"a {ID_LENGTH}-character tag matches only "
                                   "itself", tag=tag)
            if t.pipeline_run_id is not None:
                self._assert_query([t.task_id], f"a {ID_LENGTH}-character run id matches only "
                                   "itself", pipeline_run_id=t.pipeline_run_id)
        # A long lease owner, written by touch() on the short task.
        for n, k in enumerate(("A", "B")):
            owner, until = long_text(ID_LENGTH, tail=f"owner{k}"), at(70 + n)
            before = self._present("short")
            touched = _taken(f"touch() with a {ID_LENGTH}-character lease_owner",
                             functools.partial(self.store.touch, "short", lease_owner=owner,
                                               lease_until=until))
            after = self._present("short")
            if touched:
                assert (after.lease_owner, after.lease_until) == (owner, until), (
                    f"a {ID_LENGTH}-character lease_owner changed on its way back")
            else:
                assert after == before, (
                    f"a refused touch() changed the task: {_diff(before, after)}")
        # History of the long task ids the store took (never of a task it refused: history for
        # a task that does not exist is left open).
        for k in ("A", "B"):
            if f"task id {k}" not in kept:
                continue
            row = transition(ids[k], 1)
            if _taken(f"append() for a {ID_LENGTH}-character task id",
                      functools.partial(self.store.append, row)):
                self._assert_history(ids[k], [row], f"history of a {ID_LENGTH}-character task id")
            else:
                assert list(self.store.history(ids[k])) == [], "a refused append() left a row"
        # Commands: a long command id, a long task id, a long issuer, each on its own command
        # and at its own instant.
        sent: dict[str, Command] = {}
        for n, k in enumerate(("A", "B")):
            sent[f"command id {k}"] = command(long_text(ID_LENGTH, tail=f"cmd{k}"), "short",
                                              created=2 + 3 * n)
            sent[f"task id {k}"] = command(f"c-for-{k}", ids[k], created=3 + 3 * n)
            sent[f"issued_by {k}"] = replace(command(f"c-by-{k}", "short", created=4 + 3 * n),
                                             issued_by=long_text(ID_LENGTH, tail=f"by{k}"))
        controller_command = command(_CONTROLLER_COMMAND_ID, _CONTROLLER_TASK_ID, created=1)
        _taken_or_fail("submit_command() of a command with the controller's 32-character ids",
                       functools.partial(self.store.submit_command, controller_command))
        taken = [controller_command, *(c for what, c in sent.items() if _taken(
            f"submit_command() of a command with a {ID_LENGTH}-character {what[:-2]}",
            functools.partial(self.store.submit_command, c)))]
        got_cmds = [c for c in self._claim(now=at(10), lease_seconds=LEASE, limit=1000)
                    if c.command_id != "c-short"]
        pairs = sorted((c.command_id, c.task_id, c.issued_by) for c in got_cmds)
        assert pairs == sorted((c.command_id, c.task_id, c.issued_by) for c in taken), (
            f"the commands taken ({len(taken)}) did not come back as sent ({len(got_cmds)} "
            "claimed): a long command id, task id or issuer changed, or a refused submit left "
            "a command"
        )

    @checks("LENGTH-IDS-CAPACITY")
    def test_length_ids_capacity__255_characters_taken(self) -> None:
        """Every kind of write of an ID_LENGTH-character id, tag, run id, lease owner and
        issuer (every UTF-8 width) is taken, not refused with StoreError.

        Only the refusal is this clause's: whether the values come back exactly is LENGTH-IDS
        (a MUST, its own test). One value per field, so a store that truncates (and would
        then refuse the second of a pair as a duplicate) is LENGTH-IDS's failure, not this.
        """
        self._given(snapshot("short"))
        task_id = long_text(ID_LENGTH, tail="A")
        refused: list[str] = []

        def write(what: str, call: Callable[[], object]) -> bool:
            try:
                call()
            except StoreError as exc:
                refused.append(f"{what}: {type(exc).__name__}: {exc}")
                return False
            return True

        created = write("create() with a long task id, tag and run id", lambda: self.store.create(
            snapshot(task_id, tags=frozenset({long_text(ID_LENGTH, tail="tag")}),
                     pipeline_run_id=long_text(ID_LENGTH, tail="run"))))
        write("touch() with a long lease_owner", lambda: self.store.touch(
            "short", lease_owner=long_text(ID_LENGTH, tail="owner"), lease_until=at(60)))
        if created:  # history for a task that does not exist is left open
            write("append() for a long task id", lambda: self.store.append(transition(task_id, 1)))
        write("submit_command() with a long command id, task id and issuer",
              lambda: self.store.submit_command(replace(
                  command(long_text(ID_LENGTH, tail="cmd"), task_id),
                  issued_by=long_text(ID_LENGTH, tail="by"))))
        assert not refused, (
            f"{ID_LENGTH}-character values refused (a SHOULD: the guide asks for {ID_LENGTH}, "
            "the original names no length): " + "; ".join(refused)
        )

    @checks("LENGTH-TEXT")
    def test_length_text__exact_or_refused_never_truncated(self) -> None:
        """NAME_LENGTH-character names (a pair differing only in the last character) and
        TEXT_LENGTH-character free text, every UTF-8 width: each write is taken -- and read
        back, matched and told apart exactly -- or refused with StoreError, leaving nothing.

        Refusing is allowed because the original guide names no length (§10) -- except for
        the text the controller writes itself: a failed task's error type, message and
        detail (``traceback.format_exc(limit=8)``) and the transition's reason. A store
        refusing them cannot record a failure (the controller's write-through fails and the
        transition stays buffered: CTRL-PLUGS-IN's scenario shows it at 255 characters), so
        those must be taken. Whether the rest is taken is LENGTH-TEXT-CAPACITY (a SHOULD).
        Each write is first made with short values (a precondition on its own clause).
        """
        short = snapshot("t-short", name="n", progress=Progress(done=1, total=2, message="m"),
                         failure=Failure("t", "m", "d"))
        self._given(short)
        self._given_appended(Transition("t-short", 1, None, TaskStatus.PENDING, at(0), "r"))
        self._given_command(replace(command("c-short", "t-short"), outcome="o"))
        text = {k: long_text(TEXT_LENGTH, tail=k) for k in
                ("progress", "type", "message", "detail", "reason", "outcome")}
        # What the controller writes: taken, and back exactly.
        failed = snapshot("t-failed", created=1, status=TaskStatus.FAILED,
                          failure=Failure(text["type"], text["message"], text["detail"]))
        _taken_or_fail(f"create() of a failure of {TEXT_LENGTH}-character type, message and "
                       "detail (the controller writes a traceback there)",
                       functools.partial(self.store.create, failed))
        got = self._get("t-failed")
        assert got.failure == failed.failure, (
            f"a long failure changed on its way back: {_diff(failed, got)}")
        row = Transition("t-failed", 1, None, TaskStatus.PENDING, at(0), text["reason"])
        _taken_or_fail(f"append() of a {TEXT_LENGTH}-character reason (the controller writes "
                       "the exception there)", functools.partial(self.store.append, row))
        assert [t.reason for t in self.store.history("t-failed")] == [text["reason"]], (
            "a long transition reason changed")
        # Names and the progress message: taken exactly, or refused leaving nothing.
        tasks = {f"name {k}": snapshot(f"t-name-{k}", created=2 + n,
                                       name=long_text(NAME_LENGTH, tail=f"name{k}"))
                 for n, k in enumerate(("A", "B"))}
        tasks["progress message"] = snapshot("t-progress", created=4, progress=Progress(
            done=1, total=2, message=text["progress"]))
        kept = {what: t for what, t in tasks.items() if _taken(
            f"create() of a task with a long {what[:-2] if what.startswith('name') else what}",
            functools.partial(self.store.create, t))}
        stored = sorted(_ids(self._all_tasks()))
        want = sorted({"t-short", "t-failed", *(t.task_id for t in kept.values())})
        assert stored == want, (
            f"after creating tasks with long names and text (taken: {sorted(kept)}; refused: "
            f"{sorted(set(tasks) - set(kept))}), query() holds {stored}: a refused create "
            "left a row")
        for what, t in kept.items():
            got = self._get(t.task_id)
            assert (got.name, got.progress) == (t.name, t.progress), (
                f"the task made for {what!r} changed on its way back: {_diff(t, got)}")
            if what.startswith("name"):
                self._assert_query([t.task_id], f"a {NAME_LENGTH}-character name matches only "
                                   "itself", name=t.name)
                prefix = t.name[:-1]  # the pair's common prefix: both match it
                self._assert_query(
                    [x.task_id for w, x in kept.items()
                     if w.startswith("name") and x.name.startswith(prefix)],
                    "a long name's prefix", name_prefix=prefix)
        # A command outcome, at submit and at complete.
        sent = replace(command("c-long", "t-failed", created=1), outcome=text["outcome"])
        if _taken(f"submit_command() with a {TEXT_LENGTH}-character outcome",
                  functools.partial(self.store.submit_command, sent)):
            got_cmds = [c for c in self._claim(now=at(10), lease_seconds=LEASE)
                        if c.command_id == "c-long"]
            assert [c.outcome for c in got_cmds] == [text["outcome"]], "a long outcome changed"
        else:
            got_cmds = self._claim(now=at(10), lease_seconds=LEASE)
            assert "c-long" not in [c.command_id for c in got_cmds], (
                "a refused submit_command() left a command")

    @checks("LENGTH-TEXT-CAPACITY")
    def test_length_text_capacity__long_names_and_text_taken(self) -> None:
        """A NAME_LENGTH-character name and TEXT_LENGTH-character free text (every UTF-8
        width) in every kind of write are taken, not refused with StoreError. Only the
        refusal is this clause's: whether they come back exactly is LENGTH-TEXT's."""
        self._given(snapshot("short"))
        # Not the failure or the reason: the controller writes those, LENGTH-TEXT requires them.
        text = {k: long_text(TEXT_LENGTH, tail=k) for k in ("progress", "outcome")}
        refused: list[str] = []

        def write(what: str, call: Callable[[], object]) -> None:
            try:
                call()
            except StoreError as exc:
                refused.append(f"{what}: {type(exc).__name__}: {exc}")

        write("create() with a long name and progress message", lambda: self.store.create(
            snapshot("t-long", name=long_text(NAME_LENGTH, tail="name"),
                     progress=Progress(done=1, total=2, message=text["progress"]))))
        write("touch() with a long progress message", lambda: self.store.touch(
            "short", progress=Progress(done=1, total=2, message=text["progress"])))
        write("submit_command() with a long outcome", lambda: self.store.submit_command(
            replace(command("c-long", "short"), outcome=text["outcome"])))
        self.store.submit_command(command("c-done", "short", created=1))
        write("complete_command() with a long outcome", lambda: self.store.complete_command(
            "c-done", now=at(1), outcome=text["outcome"]))
        assert not refused, (
            f"names of {NAME_LENGTH} or free text of {TEXT_LENGTH} characters refused (a "
            "SHOULD: the original names no length): " + "; ".join(refused)
        )
