"""Every field survives a round-trip; time is compared as an instant."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC

from ..blame import snapshot_culprit
from ..clauses import checks
from ..model import (
    Failure,
    Progress,
    TaskStatus,
    Transition,
)
from ..samples import (
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
from ._base import LEASE, ContractBase, _diff, expect_on

__all__ = ["RoundTripContract"]


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
    def test_length_ids__255_characters_everywhere(self) -> None:
        """Ids, tags, run ids, lease owners and issuers of ID_LENGTH characters (every UTF-8
        width, 4-byte included), in pairs that differ only in their last character: a column
        too short refuses them or, truncating, makes the two one.

        Every kind of write is first made with short values, as a precondition blamed on its
        own clause, so only the length can fail here.
        """
        self._given(snapshot("short", tags=frozenset({"s"}), pipeline_run_id="r"))
        self._given_touched("short", lease_owner="o", lease_until=at(60))
        ids = {k: long_text(ID_LENGTH, tail=k) for k in ("A", "B")}
        tags = {k: long_text(ID_LENGTH, tail=f"tag{k}") for k in ("A", "B")}
        runs = {k: long_text(ID_LENGTH, tail=f"run{k}") for k in ("A", "B")}
        for n, k in enumerate(("A", "B")):
            self.store.create(snapshot(ids[k], created=n, tags=frozenset({tags[k]}),
                                       pipeline_run_id=runs[k]))
        for k in ("A", "B"):
            got = self._get(ids[k])
            assert (got.task_id, got.tags, got.pipeline_run_id) == (
                ids[k], frozenset({tags[k]}), runs[k]), f"task {k} changed on its way back"
            self._assert_query([ids[k]], f"a {ID_LENGTH}-character tag matches only itself",
                               tag=tags[k])
            self._assert_query([ids[k]], f"a {ID_LENGTH}-character run id matches only itself",
                               pipeline_run_id=runs[k])
        owner = long_text(ID_LENGTH, tail="owner")
        self.store.touch(ids["A"], lease_owner=owner, lease_until=at(60))
        assert self._get(ids["A"]).lease_owner == owner, "a long lease_owner changed"
        self.store.append(transition(ids["A"], 1))
        assert [t.task_id for t in self.store.history(ids["A"])] == [ids["A"]]
        self._given_command(command("c-short", "short"))
        sent = [replace(command(long_text(ID_LENGTH, tail=f"cmd{k}"), ids[k], created=n),
                        issued_by=long_text(ID_LENGTH, tail=f"by{k}"))
                for n, k in enumerate(("A", "B"))]
        for c in sent:
            self.store.submit_command(c)
        got_cmds = [c for c in self._claim(now=at(10), lease_seconds=LEASE)
                    if c.command_id != "c-short"]
        pairs = sorted((c.command_id, c.task_id, c.issued_by) for c in got_cmds)
        assert pairs == sorted((c.command_id, c.task_id, c.issued_by) for c in sent), (
            "long command ids or issuers changed on their way back")

    @checks("LENGTH-TEXT")
    def test_length_text__long_names_and_messages(self) -> None:
        """A NAME_LENGTH-character name and TEXT_LENGTH-character free text, every UTF-8
        width; each write made first with short values (a precondition on its own clause)."""
        short = snapshot("t-short", name="n", progress=Progress(done=1, total=2, message="m"),
                         failure=Failure("t", "m", "d"))
        self._given(short)
        self._given_appended(Transition("t-short", 1, None, TaskStatus.PENDING, at(0), "r"))
        self._given_command(replace(command("c-short", "t-short"), outcome="o"))
        text = {k: long_text(TEXT_LENGTH, tail=k) for k in
                ("progress", "type", "message", "detail", "reason", "outcome")}
        name = long_text(NAME_LENGTH, tail="name")
        task = snapshot(
            "t-long", name=name,
            progress=Progress(done=1, total=2, message=text["progress"]),
            failure=Failure(text["type"], text["message"], text["detail"]),
        )
        self.store.create(task)
        got = self._get("t-long")
        assert (got.name, got.progress, got.failure) == (name, task.progress, task.failure), (
            "a long name or long free text changed on its way back")
        self._assert_query(["t-long"], f"a {NAME_LENGTH}-character name matches itself",
                           name=name)
        self._assert_query(["t-long"], "a long name prefix", name_prefix=name[:-1])
        row = Transition("t-long", 1, None, TaskStatus.PENDING, at(0), text["reason"])
        self.store.append(row)
        assert [t.reason for t in self.store.history("t-long")] == [text["reason"]], (
            "a long transition reason changed")
        sent = replace(command("c-long", "t-long", created=1), outcome=text["outcome"])
        self.store.submit_command(sent)
        got_cmds = [c for c in self._claim(now=at(10), lease_seconds=LEASE)
                    if c.command_id == "c-long"]
        assert [c.outcome for c in got_cmds] == [text["outcome"]], "a long outcome changed"
