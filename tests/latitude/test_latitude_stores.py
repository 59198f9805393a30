"""Each latitude store really uses its freedom (and nothing else of it changed).

``test_latitude.py`` proves the kit passes these stores; that proof is worth nothing if a
store does not actually do what its docstring says. These direct checks pin each freedom,
in milliseconds, without the plugin.
"""

from __future__ import annotations

import inspect
import sqlite3
import types
from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path

import latitude_sqlite as lsql
import latitude_stores as lmem
import pytest

from chongming_conformance import (
    Command,
    ConcurrencyConflict,
    Failure,
    Progress,
    StoreError,
    TaskQuery,
    TaskSnapshot,
    TaskStatus,
)
from chongming_conformance.seam.factory import protocol_mismatches, signature_advisories
from chongming_conformance.strategies.samples import at, command, snapshot, transition
from reference_stores.memory import InMemoryTaskStore
from reference_stores.sqlite import SqliteTaskStore

REFUSALS = (StoreError, ValueError)


def _twins(base: type[InMemoryTaskStore]) -> list[type[InMemoryTaskStore]]:
    """The StoreError store and its ValueError twin."""
    twins = [base, getattr(lmem, f"{base.__name__}ValueError")]
    assert [t.refusal for t in twins] == list(REFUSALS)  # type: ignore[attr-defined]
    return twins


def _ids(records: Iterable[TaskSnapshot]) -> list[str]:
    return [r.task_id for r in records]


def _cids(records: Iterable[Command]) -> list[str]:
    return [r.command_id for r in records]


@pytest.mark.parametrize("cls", [*lmem.STORES, *lsql.STORES], ids=lambda c: c.__name__)
def test_every_store_has_the_protocol_shape(cls: type, tmp_path: Path) -> None:
    store = cls() if issubclass(cls, InMemoryTaskStore) else cls(tmp_path / "tasks.db")
    try:
        assert protocol_mismatches(store) == []
        expected_advice = cls is lmem.KeywordsAlsoPositional
        assert bool(signature_advisories(store)) is expected_advice
    finally:
        store.close()


@pytest.mark.parametrize("cls", lmem.STORES, ids=lambda c: c.__name__)
def test_memory_stores_declare_cross_process_unsupported(cls: type) -> None:
    assert "cross_process" in cls.CHONGMING_CAPABILITIES["unsupported"]


# -- refusing unspecified inputs -------------------------------------------------------------


@pytest.mark.parametrize("cls", _twins(lmem.RefuseNonRisingSave), ids=lambda c: c.__name__)
def test_refuses_a_save_that_does_not_raise_the_version(cls: type) -> None:
    store = cls()
    store.create(snapshot("t", version=3))
    for version in (3, 2):
        with pytest.raises(cls.refusal) as info:
            store.save(snapshot("t", version=version, status=TaskStatus.RUNNING), expect_version=3)
        assert not isinstance(info.value, ConcurrencyConflict)
    assert store.get("t") == snapshot("t", version=3), "a refused save changed nothing"
    # The specified checks come first: missing task, version mismatch.
    with pytest.raises(ConcurrencyConflict):
        store.save(snapshot("gone", version=1), expect_version=1)
    with pytest.raises(ConcurrencyConflict):
        store.save(snapshot("t", version=2), expect_version=2)
    store.save(snapshot("t", version=2**40), expect_version=3)  # any rise is accepted
    assert store.get("t").status_version == 2**40


@pytest.mark.parametrize("cls", _twins(lmem.RefuseNonPositiveLease), ids=lambda c: c.__name__)
def test_refuses_a_non_positive_lease(cls: type) -> None:
    store = cls()
    store.submit_command(command("c"))
    for lease in (0.0, -1.0):
        with pytest.raises(cls.refusal):
            store.claim_commands(now=at(0), lease_seconds=lease)
    assert _cids(store.claim_commands(now=at(0), lease_seconds=0.25)) == ["c"]


@pytest.mark.parametrize("cls", _twins(lmem.RefuseNegativeKeep), ids=lambda c: c.__name__)
def test_refuses_a_negative_keep(cls: type) -> None:
    store = cls()
    store.create(snapshot("t", status=TaskStatus.SUCCEEDED))
    with pytest.raises(cls.refusal):
        store.prune(keep_terminal=-1)
    assert store.get("t") is not None
    assert store.prune(keep_terminal=0) == 1


@pytest.mark.parametrize("cls", _twins(lmem.RefuseUnknownTaskAppend), ids=lambda c: c.__name__)
def test_refuses_history_for_an_unknown_task(cls: type) -> None:
    store = cls()
    with pytest.raises(cls.refusal):
        store.append(transition("never", 1))
    store.create(snapshot("t", status=TaskStatus.SUCCEEDED))
    store.append(transition("t", 1))
    store.append(transition("t", 1))  # a replay of an existing task's row is fine
    assert len(store.history("t")) == 1
    store.prune(keep_terminal=0)
    with pytest.raises(cls.refusal):
        store.append(transition("t", 2))


@pytest.fixture
def fk_store(tmp_path: Path) -> Iterator[SqliteTaskStore]:
    store = lsql.ForeignKeyHistory(tmp_path / "tasks.db")
    yield store
    store.close()


def test_foreign_key_refuses_orphan_history_and_prune_still_works(
    fk_store: SqliteTaskStore,
) -> None:
    with pytest.raises(StoreError, match="FOREIGN KEY") as info:
        fk_store.append(transition("never", 1))
    assert isinstance(info.value.__cause__, sqlite3.IntegrityError)
    fk_store.create(snapshot("t", status=TaskStatus.FAILED))
    fk_store.append(transition("t", 1))
    assert fk_store.prune(keep_terminal=0) == 1, "history is deleted before its task"
    assert fk_store.history("t") == []
    with pytest.raises(StoreError):
        fk_store.append(transition("t", 2))
    ddl = fk_store._conn.execute(  # type: ignore[union-attr]
        "SELECT sql FROM sqlite_master WHERE name = 'transitions'"
    ).fetchone()["sql"]
    # The reference store's own schema (v3) declares the key on the column; either form counts.
    assert "REFERENCES tasks (task_id)" in ddl


def test_foreign_key_holds_on_every_opened_connection(tmp_path: Path) -> None:
    opener_gen = lsql.make_shared_store_ForeignKeyHistory()
    opener = next(opener_gen)
    try:
        for _ in range(2):
            store = opener()
            try:
                with pytest.raises(StoreError):
                    store.append(transition("never", 1))
            finally:
                store.close()
    finally:
        opener_gen.close()


# -- orders and shapes --------------------------------------------------------------------------


def test_reverse_ties_in_query_claim_and_prune() -> None:
    store = lmem.ReverseTies()
    for task_id in ("a", "b", "c"):
        store.create(snapshot(task_id, status=TaskStatus.CANCELLED))
    store.create(snapshot("z-later", created=1))
    assert _ids(store.query()) == ["c", "b", "a", "z-later"]
    assert _ids(store.query(TaskQuery(newest_first=True))) == ["z-later", "a", "b", "c"]
    assert _ids(store.query(TaskQuery(limit=2))) == ["c", "b"]
    for command_id in ("c1", "c2", "c3"):
        store.submit_command(command(command_id))
    assert _cids(store.claim_commands(now=at(5), lease_seconds=1.0, limit=2)) == ["c3", "c2"]
    assert store.prune(keep_terminal=1) == 2
    assert _ids(store.query()) == ["a", "z-later"], "the tie dropped first is the highest id"


def test_tuples_and_read_only_mappings() -> None:
    store = lmem.TuplesAndProxies()
    store.create(snapshot("t"))
    store.append(transition("t", 1))
    store.submit_command(command("c"))
    assert type(store.query()) is tuple
    assert type(store.history("t")) is tuple
    assert type(store.claim_commands(now=at(0), lease_seconds=1.0)) is tuple
    counts = store.counts()
    assert type(counts) is types.MappingProxyType
    assert counts[TaskStatus.PENDING] == 1
    with pytest.raises(TypeError):
        counts[TaskStatus.PENDING] = 5  # type: ignore[index]


def test_exception_subclasses() -> None:
    store = lmem.ExceptionSubclasses()
    store.create(snapshot("t"))
    with pytest.raises(lmem.DuplicateTask):
        store.create(snapshot("t"))
    store.submit_command(command("c"))
    with pytest.raises(lmem.DuplicateCommand):
        store.submit_command(command("c"))
    with pytest.raises(lmem.StaleVersion) as info:
        store.save(snapshot("t", version=2), expect_version=7)
    assert (info.value.task_id, info.value.expected, info.value.actual) == ("t", 7, 1)
    store.close()
    store.close()
    with pytest.raises(lmem.StoreClosed):
        store.get("t")
    for cls in (lmem.DuplicateTask, lmem.DuplicateCommand, lmem.StoreClosed):
        assert cls is not StoreError and issubclass(cls, StoreError)
    assert lmem.StaleVersion is not ConcurrencyConflict
    assert issubclass(lmem.StaleVersion, ConcurrencyConflict)


def test_extra_methods_and_optional_keywords() -> None:
    store = lmem.ExtraMethodsAndKeywords()
    assert {"exists", "task_count", "vacuum"} <= set(dir(store))
    extras = {
        "create": "comment", "get": "consistent", "query": "consistent", "history": "limit",
        "touch": "source", "claim_commands": "claimed_by", "close": "timeout",
    }
    for method, extra in extras.items():
        param = inspect.signature(getattr(store, method)).parameters[extra]
        assert param.kind is inspect.Parameter.KEYWORD_ONLY
        assert param.default is not inspect.Parameter.empty
    store.create(snapshot("t"))
    assert store.exists("t") and store.task_count() == 1


def test_datetimes_come_back_in_another_zone_same_instant() -> None:
    store = lmem.OtherZoneDatetimes()
    given = snapshot("t", heartbeat_at=at(3), lease_until=at(9))
    store.create(given)
    store.append(transition("t", 1, when=4))
    store.submit_command(command("c"))
    got = store.get("t")
    assert got == given  # equal instants
    zone = lmem.RETURN_ZONE.utcoffset(None)
    for value in (got.created_at, got.updated_at, got.heartbeat_at, got.lease_until,
                  store.query()[0].created_at, store.history("t")[0].at,
                  store.claim_commands(now=at(0), lease_seconds=1.0)[0].lease_until):
        assert value.utcoffset() == zone
    assert given.created_at.utcoffset() != zone


def test_conflict_without_actual() -> None:
    store = lmem.ConflictWithoutActual()
    store.create(snapshot("t", version=2))
    with pytest.raises(ConcurrencyConflict) as info:
        store.save(snapshot("t", version=5), expect_version=4)
    assert (info.value.task_id, info.value.expected, info.value.actual) == ("t", 4, None)


def test_keywords_also_positional() -> None:
    store = lmem.KeywordsAlsoPositional()
    store.create(snapshot("t", version=1))
    store.save(snapshot("t", version=2), 1)
    assert store.get("t").status_version == 2


def test_lease_held_at_its_boundary(tmp_path: Path) -> None:
    store = lsql.LeaseHeldAtBoundary(tmp_path / "tasks.db")
    try:
        store.submit_command(command("c"))
        store.submit_command(command("b", created=1))
        assert _cids(store.claim_commands(now=at(0), lease_seconds=30.0, limit=1)) == ["c"]
        assert _cids(store.claim_commands(now=at(30), lease_seconds=30.0)) == ["b"]
        assert _cids(store.claim_commands(now=at(30.000001), lease_seconds=30.0)) == ["c"]
        assert store.claim_commands(now=at(99), lease_seconds=30.0, limit=0) == []
    finally:
        store.close()


def test_claim_returns_the_oldest_newest_first() -> None:
    store = lmem.ClaimNewestFirstList()
    for i in range(4):
        store.submit_command(command(f"c{i}", created=i))
    assert _cids(store.claim_commands(now=at(10), lease_seconds=1.0, limit=3)) == [
        "c2", "c1", "c0",
    ]


# -- inputs the original leaves open (issue 33) -------------------------------------------------


def test_refuses_long_ids_and_never_truncates() -> None:
    store = lmem.RefusesLongIds()
    ok, long = "x" * lmem.MAX_ID_LENGTH, "x" * (lmem.MAX_ID_LENGTH + 1)
    controller_id = "0123456789abcdef0123456789abcdef"  # uuid4().hex: 32 characters
    for refused in (snapshot(long), snapshot("t", tags=frozenset({long})),
                    snapshot("t", pipeline_run_id=long), snapshot("t", lease_owner=long)):
        with pytest.raises(StoreError):
            store.create(refused)
        assert store.query() == [], "a refused create stores nothing"
    for taken in (snapshot(ok), snapshot(controller_id, tags=frozenset({ok}),
                                         pipeline_run_id=ok, lease_owner=ok)):
        store.create(taken)
        assert store.get(taken.task_id) == taken
    with pytest.raises(StoreError):
        store.touch(ok, lease_owner=long, lease_until=at(1))
    assert store.get(ok) == snapshot(ok), "a refused touch changes nothing"
    store.touch("missing", lease_owner=long)  # a touch of a missing task writes nothing
    with pytest.raises(StoreError):
        store.save(snapshot(ok, version=2, tags=frozenset({long})), expect_version=1)
    with pytest.raises(ConcurrencyConflict):  # the specified conflict comes first
        store.save(snapshot(ok, version=3, tags=frozenset({long})), expect_version=7)
    with pytest.raises(StoreError):
        store.append(transition(long, 1))
    for refused_command in (command(long, ok), command("c", long),
                            command("c", ok, issued_by=long)):
        with pytest.raises(StoreError):
            store.submit_command(refused_command)
    store.submit_command(command(controller_id, controller_id, issued_by=ok))
    assert _cids(store.claim_commands(now=at(0), lease_seconds=1.0)) == [controller_id]


def test_refuses_long_text_and_never_truncates() -> None:
    store = lmem.RefusesLongText()
    ok, long = "x" * lmem.MAX_TEXT_LENGTH, "x" * (lmem.MAX_TEXT_LENGTH + 1)
    for refused in (snapshot("t", name=long),
                    snapshot("t", progress=Progress(done=0, message=long))):
        with pytest.raises(StoreError):
            store.create(refused)
        assert store.query() == [], "a refused create stores nothing"
    failure = Failure("E" * 8192, "m" * 8192, "d" * 8192)  # the controller's: taken
    taken = snapshot("t", name=ok, progress=Progress(done=0, message=ok), failure=failure)
    store.create(taken)
    assert store.get("t") == taken
    with pytest.raises(StoreError):
        store.touch("t", progress=Progress(done=1, message=long))
    assert store.get("t") == taken, "a refused touch changes nothing"
    with pytest.raises(StoreError):
        store.save(snapshot("t", version=2, name=long), expect_version=1)
    with pytest.raises(ConcurrencyConflict):  # the specified conflict comes first
        store.save(snapshot("t", version=3, name=long), expect_version=7)
    row = transition("t", 1, reason="r" * 8192)
    store.append(row)  # the controller's reason: taken
    assert list(store.history("t")) == [row]
    with pytest.raises(StoreError):
        store.submit_command(replace(command("c", "t"), outcome=long))
    store.submit_command(command("c", "t"))
    with pytest.raises(StoreError):
        store.complete_command("c", now=at(1), outcome=long)
    assert _cids(store.claim_commands(now=at(0), lease_seconds=1.0)) == ["c"]


@pytest.mark.parametrize("cls", _twins(lmem.RefusesLimitZero), ids=lambda c: c.__name__)
def test_refuses_limit_zero(cls: type) -> None:
    store = cls()
    store.create(snapshot("t"))
    store.submit_command(command("c"))
    with pytest.raises(cls.refusal):
        store.query(TaskQuery(limit=0))
    with pytest.raises(cls.refusal):
        store.claim_commands(now=at(0), lease_seconds=1.0, limit=0)
    assert _ids(store.query(TaskQuery(limit=1))) == ["t"]
    assert _ids(store.query()) == ["t"]
    assert _cids(store.claim_commands(now=at(0), lease_seconds=1.0, limit=1)) == ["c"], (
        "the refused claim leased nothing"
    )


def test_raises_on_unknown_command_only() -> None:
    store = lmem.RaisesOnUnknownCommand()
    for call in (lambda: store.complete_command("never", now=at(0)),
                 lambda: store.release_command("never", now=at(0))):
        with pytest.raises(StoreError):
            call()
    store.submit_command(command("c"))
    store.submit_command(command("d", created=1))
    store.claim_commands(now=at(0), lease_seconds=1.0, limit=1)
    store.release_command("c", now=at(0))  # taken, handed back
    store.complete_command("c", now=at(1), outcome="stopped")
    store.complete_command("c", now=at(2), outcome="again")  # finished: a silent no-op
    store.release_command("c", now=at(2))
    assert _cids(store.claim_commands(now=at(3), lease_seconds=1.0)) == ["d"]
    store.create(snapshot("t", status=TaskStatus.SUCCEEDED))
    store.submit_command(command("e", "t", created=2))
    store.prune(keep_terminal=0)  # drops the task's commands: "e" is unknown now
    with pytest.raises(StoreError):
        store.complete_command("e", now=at(4))


# -- a query in several transactions ----------------------------------------------------------

QUERIES = (
    None,
    TaskQuery(limit=0),
    TaskQuery(limit=3),
    TaskQuery(newest_first=True),
    TaskQuery(newest_first=True, limit=5),
    TaskQuery(statuses=frozenset({TaskStatus.RUNNING})),
    TaskQuery(statuses=frozenset()),
    TaskQuery(buckets=frozenset({1}), limit=2),
)


def test_paged_query_reads_pages_and_answers_like_the_reference(tmp_path: Path) -> None:
    paged = lsql.PagedQuery(tmp_path / "paged.db")
    reference = SqliteTaskStore(tmp_path / "reference.db")
    try:
        for i in range(7):
            status = TaskStatus.RUNNING if i % 2 else TaskStatus.PENDING
            task = snapshot(f"t{i}", created=i // 2, status=status, bucket=i % 3)
            paged.create(task)
            reference.create(task)
        statements: list[str] = []
        paged._conn.set_trace_callback(statements.append)  # type: ignore[union-attr]
        for q in QUERIES:
            assert paged.query(q) == reference.query(q), q
        assert sum(s.lstrip().startswith("SELECT") for s in statements) > len(QUERIES), (
            "at least one query took several pages"
        )
        assert not any(s.startswith("BEGIN") for s in statements), "no enclosing transaction"
    finally:
        paged.close()
        reference.close()


def test_paged_query_sees_a_commit_between_its_pages(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    reader, writer = lsql.PagedQuery(path), SqliteTaskStore(path)
    try:
        for i in range(4):
            writer.create(snapshot(f"t{i}", created=i))
        later = snapshot("t9", created=10)
        original = lsql.SqliteTaskStore._connection

        pages: list[str] = []

        def after_first_page(self: SqliteTaskStore, op: str, **kw: bool):  # type: ignore[no-untyped-def]
            if self is reader and op == "query":
                pages.append(op)
                if len(pages) == 2:  # the first page is read: t0, t1
                    writer.create(later)  # committed by another connection mid-scan
            return original(self, op, **kw)

        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(lsql.SqliteTaskStore, "_connection", after_first_page)
            got = reader.query()
        assert len(pages) > 2
        assert _ids(got) == ["t0", "t1", "t2", "t3", "t9"], "no single snapshot: t9 is seen"
    finally:
        reader.close()
        writer.close()
