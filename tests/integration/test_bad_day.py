"""A bad day, seen from outside (issue 43): set-ups cut off half-way leave nothing behind.

The user's flaky CI: the network to the database resets connections outside the kit's
control. A :class:`FaultProxy` sits in front of the real server and the reference
factories reach it through the proxy (``CHONGMING_TEST_POSTGRES`` /
``CHONGMING_TEST_MARIADB`` name the proxy's address). To cut an install *half-way* at
every point it can be cut, not at whatever moment a timer happens to hit, an
interceptor resets chosen connections at a chosen reply: ``arm(k)`` makes the next
connection lose the server's ``k``-th reply (the proxy drops it and resets both sides),
so the statement that reply answers has run on the server while the client sees an
error. Sweeping ``k`` over every reply of an install cuts it after each of its
statements -- including after the last (MariaDB's DDL has committed table by table;
PostgreSQL's COMMIT went through and only its reply was lost).

For each engine:

* **the fault is real**: ``install_schema`` alone, cut at each reply, fails every time,
  and at some cuts leaves its schema/database on the server (counted: without that
  count above zero the rest would prove nothing);
* **the factories clean up**: ``make_store`` and ``make_shared_store``, by turns, cut at
  the same replies (and, at every third, the cleanup's first drop cut too) raise the
  install's error, and none of their schemas/databases remains;
* **the teardown retries**: a drop whose first attempt is cut at each of its replies
  still drops, and the factory's close does not raise;
* **a drop that cannot succeed is reported, not hidden**: the install's error is the
  one raised, with a note naming the leftover and the statement that drops it;
* **the stress command** (``main`` in this process, so the arming reaches its
  factory calls): two scenarios whose set-up is cut are ERROR, not FAIL, the scenario
  between them runs and passes, the exit status is 1 and the report leaves the cut
  scenarios' clauses NOT VERIFIED (failed in set-up); nothing is left behind.

Leftovers are looked for by name: every name the factories draw goes through their name
maker, wrapped here to record it (and to arm the cut for that factory call), and the
server is asked about exactly those names over a direct connection. Other tests -- other
xdist workers -- create and drop their own ``chongming_t_*`` names meanwhile, so a
before/after listing of the server would not be deterministic; the names are unique.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from chongming_conformance import StoreError
from chongming_conformance.faults import FaultProxy
from chongming_conformance.faults.proxy import ChunkSeen, Decision, Interceptor
from chongming_conformance.stress.__main__ import main as stress_main
from chongming_conformance.stress.scenarios import SCENARIOS

#: A reply index no install reaches: "count, never cut".
NEVER = 10**9


class _Cutter(Interceptor):
    """Resets the connections of a plan at the reply the plan names.

    ``arm(k1, k2, ...)``: the i-th connection the proxy sees after the call (in the order
    their first chunk arrives, which is the order they were opened: every caller here
    opens one connection at a time) is reset instead of receiving its ``ki``-th
    downstream chunk; None leaves it alone. ``replies()`` counts the downstream chunks of
    each planned connection (what a plan of NEVERs measures).
    """

    def __init__(self, proxy: FaultProxy) -> None:
        self.proxy = proxy
        self.cuts = 0
        self._lock = threading.Lock()
        self._plan: list[int | None] = []
        self._floor = 0
        self._seen = 0
        self._order: dict[int, int] = {}
        self._replies: dict[int, int] = {}

    def arm(self, *plan: int | None) -> None:
        live = self.proxy.connections()
        with self._lock:
            self._floor = max([self._seen, *live])
            self._plan = list(plan)
            self._order = {}
            self._replies = {}

    def replies(self) -> list[int]:
        with self._lock:
            return [self._replies.get(c, 0) for c in sorted(self._order, key=self._order.get)]

    def on_chunk(self, chunk: ChunkSeen) -> Decision:
        with self._lock:
            conn = chunk.connection
            self._seen = max(self._seen, conn)
            if conn <= self._floor:
                return None
            if conn not in self._order:
                self._order[conn] = len(self._order)
            index = self._order[conn]
            if index >= len(self._plan) or chunk.direction != "downstream":
                return None
            self._replies[conn] = self._replies.get(conn, 0) + 1
            cut = self._plan[index]
            if cut is not None and self._replies[conn] == cut:
                self.cuts += 1
                return "reset"
            return None


class _Route:
    """The network seam's shape, to let a store's own ``routed_dsn`` point a DSN at a
    new fault proxy in front of the server that DSN names."""

    def __init__(self) -> None:
        self.proxy: FaultProxy | None = None

    def route(self, host: str, port: int) -> tuple[str, int]:
        self.proxy = FaultProxy((host, port), name="bad day")
        return self.proxy.start()


@dataclass
class _Engine:
    """One server: its factories module, its schema module, and how to look at it."""

    name: str
    direct: str  # the DSN of the server itself
    env: str  # the variable the factories read
    module: ModuleType
    schema_module: ModuleType
    name_maker: str
    kind: str  # what a schema is called on this engine
    drop_statement: str
    made: list[str] = field(default_factory=list)

    def existing(self, names: list[str]) -> list[str]:
        """Which of ``names`` exist on the server (asked directly, not through the proxy)."""
        if not names:
            return []
        if self.name == "postgres":
            import psycopg

            with psycopg.connect(self.direct, autocommit=True, connect_timeout=10) as conn:
                rows = conn.execute("SELECT nspname FROM pg_namespace WHERE nspname = ANY(%s)",
                                    [names]).fetchall()
        else:
            conn = self.schema_module.parse_dsn(self.direct).connect()
            try:
                with conn.cursor() as cur:
                    cur.execute("SELECT schema_name FROM information_schema.schemata "
                                "WHERE schema_name IN %s", [tuple(names)])
                    rows = cur.fetchall()
            finally:
                conn.close()
        return sorted(str(r[0]) for r in rows)

    def fresh(self) -> str:
        name = f"chongming_t_{uuid.uuid4().hex[:16]}"
        self.made.append(name)
        return name

    def drop_directly(self, name: str) -> None:
        self.schema_module.drop_schema(self.direct, name)


ENGINES = [
    pytest.param("postgres", marks=pytest.mark.postgres, id="postgres"),
    pytest.param("mariadb", marks=pytest.mark.mariadb, id="mariadb"),
]


@pytest.fixture(params=ENGINES)
def bad_day(request: pytest.FixtureRequest,
            monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[_Engine, _Cutter, list[Any]]]:
    """The engine, with its factories reaching the server through a fault proxy whose
    cutter is armed by the factories' own name maker: each factory call takes the next
    plan of ``plans`` (the list yielded; an empty plan, or none left, cuts nothing)."""
    if request.param == "postgres":
        direct = request.getfixturevalue("postgres_dsn")
        from reference_stores import postgres as module
        from reference_stores import postgres_schema as schema_module

        engine = _Engine("postgres", direct, "CHONGMING_TEST_POSTGRES", module, schema_module,
                         "_fresh_schema_name", "schema", "DROP SCHEMA IF EXISTS")
    else:
        direct = request.getfixturevalue("mariadb_dsn")
        from reference_stores import mariadb as module
        from reference_stores import mariadb_schema as schema_module

        engine = _Engine("mariadb", direct, "CHONGMING_TEST_MARIADB", module, schema_module,
                         "_fresh_database_name", "database", "DROP DATABASE IF EXISTS")
    route = _Route()
    via_proxy = module.routed_dsn(direct, route)
    assert route.proxy is not None
    cutter = _Cutter(route.proxy)
    route.proxy.set_interceptor(cutter)
    plans: list[Any] = []
    make = getattr(module, engine.name_maker)  # the session guard's recorder, if it wraps it

    def armed_name(*args: Any, **kwargs: Any) -> str:
        name = str(make(*args, **kwargs))
        engine.made.append(name)
        cutter.arm(*(plans.pop(0) if plans else ()))
        return name

    monkeypatch.setenv(engine.env, via_proxy)
    monkeypatch.setattr(module, engine.name_maker, armed_name)
    try:
        yield engine, cutter, plans
    finally:
        route.proxy.stop()
        left = engine.existing(engine.made)
        for name in left:  # never leave the server dirty, even when the test failed
            engine.drop_directly(name)


def _install_replies(engine: _Engine, cutter: _Cutter) -> int:
    """How many replies one install through the proxy receives (its statements, plus the
    connection's handshake)."""
    name = engine.fresh()
    cutter.arm(NEVER)
    engine.schema_module.install_schema(engine.module._dsn_from_env(), name)
    engine.drop_directly(name)
    [replies] = cutter.replies()
    assert replies > 5, replies
    return replies


def _set_up_fails(factory: Callable[[], Iterator[Any]]) -> StoreError:
    """The error a factory's set-up raises (it must raise one)."""
    gen = factory()
    with contextlib.closing(gen), pytest.raises(StoreError) as raised:
        next(gen)
    return raised.value


def test_set_ups_cut_half_way_leave_nothing_behind(
    bad_day: tuple[_Engine, _Cutter, list[Any]],
) -> None:
    engine, cutter, plans = bad_day
    dsn = engine.module._dsn_from_env()
    install = _install_replies(engine, cutter)

    # The fault is real: the install alone, cut after each of its statements, leaves its
    # schema or database behind at some cuts.
    half_way = []
    for k in range(1, install + 1):
        name = engine.fresh()
        cutter.arm(k)
        with pytest.raises(StoreError):
            engine.schema_module.install_schema(dsn, name)
        if engine.existing([name]):
            half_way.append(k)
            engine.drop_directly(name)
    assert half_way, f"no cut of {install} left a {engine.kind} behind: the test proves nothing"

    # The factories, cut at the same replies (make_store and make_shared_store by turns;
    # every third time the cleanup's first drop is cut too, at one of its first replies),
    # raise the install's error and leave nothing behind.
    factories = (engine.module.make_store, engine.module.make_shared_store)
    before = len(engine.made)
    cuts = cutter.cuts
    for k in range(1, install + 1):
        plans.append((k, 1 + k % 4) if k % 3 == 0 else (k,))
        error = _set_up_fails(factories[k % 2])
        assert "drop_schema" not in str(error), error  # the install's error, not the drop's
        assert not getattr(error, "__notes__", None), error.__notes__  # the drop succeeded
    made = engine.made[before:]
    assert len(made) == install
    assert engine.existing(made) == []
    assert cutter.cuts - cuts == install + install // 3  # every set-up cut, and those cleanups

    # The teardown: its drop's first attempt cut at each of its replies, and retried.
    before = len(engine.made)
    gen = factories[0]()
    next(gen)
    cutter.arm(NEVER)
    gen.close()
    [drop] = cutter.replies()
    for k in range(1, drop + 1):
        gen = factories[k % 2]()
        next(gen)
        cuts = cutter.cuts
        cutter.arm(k)
        gen.close()  # does not raise: the drop was retried
        assert cutter.cuts == cuts + 1
    assert engine.existing(engine.made[before:]) == []

    print(f"\n{engine.name}: an install receives {install} replies; cut at each, the install "
          f"alone left its {engine.kind} behind at {len(half_way)} cuts ({half_way}); "
          f"{install} factory set-ups cut, {len(made)} {engine.kind}s made, 0 left; "
          f"teardown drops cut at each of {drop} replies, retried, 0 left")


def test_a_drop_that_cannot_succeed_is_named_on_the_install_error(
    bad_day: tuple[_Engine, _Cutter, list[Any]],
) -> None:
    """The install completes but its last reply is lost, and every attempt of the cleanup's
    drop is cut: the install's error is raised, with a note naming what is left behind and
    how to drop it -- and that is exactly what is on the server."""
    engine, cutter, plans = bad_day
    install = _install_replies(engine, cutter)
    attempts = engine.schema_module.DROP_ATTEMPTS
    plans.append((install, *[1] * attempts))
    error = _set_up_fails(engine.module.make_shared_store)
    name = engine.made[-1]
    assert str(error).startswith(f"install_schema({name!r}) failed"), error
    [note] = error.__notes__
    assert f"(attempt {attempts} of {attempts})" in note, note
    assert f"the {engine.kind} {name!r} may be left behind: drop it with " \
           f"{engine.drop_statement}" in note, note
    assert engine.existing([name]) == [name]  # what the note names is really there
    engine.drop_directly(name)
    assert engine.existing([name]) == []


#: The scenarios of the stress run: the first and the last set-up cut, the middle one runs.
STRESS = ("create_race", "close_isolated", "save_race")


def test_the_stress_command_shows_cut_set_ups_as_errors(
    bad_day: tuple[_Engine, _Cutter, list[Any]], tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    engine, cutter, plans = bad_day
    install = _install_replies(engine, cutter)
    capsys.readouterr()
    before = len(engine.made)
    # create_race: cut at the install's last reply (all of it done, the reply lost);
    # close_isolated: nothing cut; save_race: cut half-way, and the cleanup's first drop.
    plans.extend([(install,), (), (install // 2, 2)])
    report = tmp_path / "r.json"
    status = stress_main([f"{engine.module.__name__}:make_shared_store", "--profile", "quick",
                          *[a for s in STRESS for a in ("--scenario", s)],
                          "--report", str(report)])
    out, err = capsys.readouterr()
    assert status == 1, out + err  # the run is incomplete: never green
    verdicts = dict(re.findall(r"^(\w+) +(PASS|FAIL|ERROR|NOT VERIFIED) ", out, re.MULTILINE))
    assert verdicts == {"create_race": "ERROR", "close_isolated": "PASS",
                        "save_race": "ERROR"}, out + err
    assert "ERROR: 2 scenario(s) could not be set up (create_race, save_race)" in err, err
    assert "replay" not in err  # nothing FAILed: there is nothing to replay
    doc = json.loads(report.read_text(encoding="utf-8"))
    outcomes = {c["id"]: c for c in doc["clauses"]}
    for scenario in ("create_race", "save_race"):
        for cid in SCENARIOS[scenario].clauses:
            assert outcomes[cid]["outcome"] == "NOT VERIFIED", outcomes[cid]
            assert "failed in set-up" in outcomes[cid]["note"], outcomes[cid]
    assert not [c for c in doc["clauses"] if c["outcome"] == "FAIL"]
    for cid in SCENARIOS["close_isolated"].clauses:
        assert outcomes[cid]["outcome"] == "PASS", outcomes[cid]
    made = engine.made[before:]
    assert len(made) == len(STRESS)
    assert engine.existing(made) == []
    print(f"\n{engine.name} stress: {verdicts}; exit status {status}; "
          f"{len(made)} {engine.kind}s made, 0 left")
