"""The reference Postgres store on a primary and a hot standby that the deployment fails over.

Issue 42, parts 1-2: the deployment seam's evidence that failover keeps (or loses) what
the store acknowledged. :class:`FailoverPostgres` builds, on private servers
(tests/integration/throwaway_servers.py, never the shared 5432):

* a primary (``ThrowawayPostgres``) and a hot standby (``ThrowawayStandby``, a
  ``pg_basebackup -R`` of it) whose ``primary_conninfo`` goes through the kit's fault
  proxy (``faults/proxy.py``) -- the replication link, with ``link_latency_ms`` of
  latency on the WAL's way down (a standby in another zone). On loopback an
  asynchronous standby keeps up within a millisecond, so a crash would seldom find an
  acknowledged commit missing on it; across a real link the last milliseconds of WAL
  are still on the wire when the primary's zone goes, and that is the window modelled;
* the reference ``PostgresTaskStore``, unchanged, opened with a libpq multi-host DSN
  (``host=127.0.0.1,127.0.0.1 port=P1,P2 target_session_attrs=read-write``): libpq tries
  the hosts in order and keeps the first that accepts writes, so after a promotion the
  pool's new connections reach the new primary without anything moving an address;
* the deployment action ``failover`` (``Action(crash=True)``): the primary's zone is
  lost -- the replication link goes down (the proxy resets it: WAL on the wire is gone)
  and the primary is crashed (``pg_ctl stop -m immediate``) -- then the standby is
  promoted (``pg_ctl promote``). Its ``end`` re-makes the crashed server as a standby
  of the new primary (a fresh ``pg_basebackup -R`` on the old port, through a new proxy
  with the same latency), so the next failover in the same run works the same way
  with the roles swapped (the nemesis may draw the action more than once: each draw is
  3-6 s after the last, ``faults/plan.py``);
* with ``partition=True``, instead, ``partition_then_failover``: the replication link
  is blackholed (the proxy keeps the connection and drops every byte, both ways) for
  :data:`PARTITION_HOLD` seconds -- longer than the store's ``call_timeout``, so every
  commit made meanwhile has had its whole bound to wait for the standby -- and then the
  failover above follows. It is one action, not two, because the clause it tests is
  "never acknowledge a write the standby lacks *when a failover follows*": a partition
  that heals loses nothing whatever the store did.

``synchronous=True`` sets ``synchronous_standby_names = '*'`` and ``synchronous_commit =
on`` (the standby has flushed the WAL before COMMIT returns): nothing acknowledged is
lost (XP-FAULT-DURABILITY passes). ``synchronous=False`` (Postgres's default, no
synchronous standby) is the tooth: commits acknowledged in the last moments before the
crash are missing on the promoted standby.

:class:`CancelOnTimeout` (the fault run's tooth of the same name, ``fault_stores.py``)
is the partition's tooth: the reference store whose client timeout *cancels* the query
(``PGcancel``, as asyncpg's ``timeout=``, JDBC's
``setQueryTimeout`` or a cancelled Go context in pgx do) instead of cutting the socket.
Postgres's known trap: a cancel that reaches a COMMIT waiting for the synchronous
standby ends the wait with only a WARNING ("canceling wait for synchronous replication
due to user request ... committed locally, but might not have been replicated") and
COMMIT returns *success* -- so that store acknowledges a write the standby lacks, and
the failover after the partition loses it. ``statement_timeout`` does not do this: the
server disables it before the commit proper (``finish_xact_command``), so a COMMIT
waiting for the standby is never stopped by it (tests/integration/test_sync_commit_cancel.py).
The reference store's watchdog shuts the socket down instead of cancelling, so its call
fails with StoreError (unknown effect) and the backend keeps waiting: it is right as it
is, and is not changed.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import threading
import time
import uuid
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

from chongming_conformance.faults import Action, Deployment
from chongming_conformance.faults.proxy import FaultProxy
from chongming_conformance.faults.toxics import Latency, Timeout
from reference_stores.postgres import PostgresTaskStore

_INTEGRATION = str(Path(__file__).resolve().parent.parent / "integration")
if _INTEGRATION not in sys.path:  # throwaway_servers
    sys.path.insert(0, _INTEGRATION)

from fault_stores import CancelOnTimeout  # noqa: E402  (the fault run's tooth, reused)
from throwaway_servers import ThrowawayPostgres, ThrowawayStandby  # noqa: E402

__all__ = ["CALL_TIMEOUT", "PARTITION_HOLD", "CancelOnTimeout", "FailoverPostgres"]

#: The workers' client timeout: short, so that a commit waiting for an unreachable
#: synchronous standby fails well inside the kit's no-hang bound (20 s), and so that the
#: partition's hold (below) stays within the "few seconds" an action may take.
CALL_TIMEOUT = 2.0
#: Waiting for a pooled connection: a connection attempt during a failover finds no
#: primary until the standby is promoted (libpq skips a read-only server).
POOL_TIMEOUT = 5.0
#: How long the partition holds before the failover: twice the call timeout and a margin
#: (a watchdog tick is call_timeout / 10), so each worker's commits have been timed out
#: (cut, or -- the tooth -- cancelled and acknowledged) about twice by then. With one
#: call timeout and a margin (3.5 s) the cancelling tooth was caught on 2 of 6 seeds: a
#: worker got about one write acknowledged during the hold, and a lost write is caught
#: only when a later call reads what it wrote.
PARTITION_HOLD = 2 * CALL_TIMEOUT + 1.0
#: The store may fail calls this long after the action's end: the pool finds the crashed
#: primary's connections broken by using them, and (synchronous) commits on the new
#: primary wait until the re-made standby has connected.
RECOVERY_SECONDS = 15.0
#: Default latency of the replication link, primary to standby (milliseconds): a standby
#: in another zone of the same region.
LINK_LATENCY_MS = 50.0


class FailoverPostgres:
    """A primary, a standby behind a fault proxy, the failover action, and the reference
    store's shared-store factory (module docstring)."""

    engine = "PostgreSQL 15"

    def __init__(self, synchronous: bool, *, link_latency_ms: float = LINK_LATENCY_MS,
                 partition: bool = False, store: type[PostgresTaskStore] = PostgresTaskStore,
                 seed: int = 0) -> None:
        self.synchronous = synchronous
        self.link_latency_ms = float(link_latency_ms)
        self.partition = partition
        self.store = store
        self._seed = seed
        self._lock = threading.Lock()
        self.failovers = 0
        self.settings = ({"synchronous_standby_names": "*", "synchronous_commit": "on"}
                         if synchronous else {})
        self.primary: Any = ThrowawayPostgres(self.settings)
        self.standby: Any = None
        self.proxy: FaultProxy | None = None
        try:
            self._attach_standby(port=None)
        except BaseException:
            self.close()
            raise
        # The ports stay those two whatever the roles: the DSN names both.
        self.ports = (self.primary.port, self.standby.port)

    # -- the servers -----------------------------------------------------------------------
    def _attach_standby(self, port: int | None) -> None:
        """A standby of ``self.primary`` streaming through a new proxy (with the latency)."""
        proxy = FaultProxy(("127.0.0.1", self.primary.port), name="replication link",
                           seed=self._seed)
        address = proxy.start()
        try:
            if self.link_latency_ms > 0:
                proxy.add_toxic("zone", Latency(self.link_latency_ms), direction="downstream")
            self.standby = ThrowawayStandby(self.primary, upstream=address, port=port)
        except BaseException:
            proxy.stop()
            raise
        self.proxy = proxy

    @property
    def dsn(self) -> str:
        """Both servers, the writable one chosen by libpq at each connection."""
        hosts = ",".join("127.0.0.1" for _ in self.ports)
        ports = ",".join(str(p) for p in self.ports)
        return (f"host={hosts} port={ports} user=postgres dbname=postgres "
                "target_session_attrs=read-write connect_timeout=5")

    def fail_over(self) -> None:
        """The primary's zone is lost: the link goes down, the primary crashes, the
        standby is promoted."""
        with self._lock:
            assert self.proxy is not None
            self.proxy.down()  # what was on the wire to the standby is gone with the zone
            self.primary.crash()
            self.standby.promote()
            self.failovers += 1

    def partition_then_fail_over(self) -> None:
        """The link is blackholed for :data:`PARTITION_HOLD` s, then :meth:`fail_over`."""
        assert self.proxy is not None
        for direction in ("downstream", "upstream"):
            self.proxy.add_toxic(f"partition-{direction}", Timeout(0.0), direction=direction)
        time.sleep(PARTITION_HOLD)
        self.fail_over()

    def remake_standby(self) -> None:
        """The crashed server becomes a standby of the new primary, on its old port."""
        with self._lock:
            old, new = self.primary, self.standby
            if old.running():  # no failover happened since the last end
                return
            port = old.port
            old.close()
            assert self.proxy is not None
            self.proxy.stop()
            self.proxy = None
            self.primary = new
            self._attach_standby(port=port)

    # -- the seams -------------------------------------------------------------------------
    def describe(self) -> str:
        mode = ("synchronous replication (synchronous_standby_names = '*', "
                "synchronous_commit = on)" if self.synchronous
                else "asynchronous replication (no synchronous standby)")
        link = f"replication link through the kit's fault proxy, {self.link_latency_ms:g} ms " \
               "latency primary to standby"
        if self.partition:
            link += f", blackholed for {PARTITION_HOLD:g} s before each failover"
        return (f"{self.engine}, primary + hot standby on 127.0.0.1:{self.ports[0]} and "
                f":{self.ports[1]}, {mode}; {link}; the store reaches the writable one "
                f"through a multi-host DSN (target_session_attrs=read-write); store "
                f"{self.store.__name__}, call_timeout {CALL_TIMEOUT:g} s")

    def deployment(self) -> Deployment:
        if self.partition:
            actions = {"partition_then_failover": Action(
                begin=self.partition_then_fail_over, end=self.remake_standby,
                recovery_seconds=RECOVERY_SECONDS, crash=True)}
        else:
            actions = {"failover": Action(begin=self.fail_over, end=self.remake_standby,
                                          recovery_seconds=RECOVERY_SECONDS, crash=True)}
        return Deployment(topology=self.describe(), actions=actions)

    def make_shared_store(self, network: Any = None) -> Generator[Callable[[], Any], None, None]:
        """A fresh schema on the primary (dropped after), and the store's opener.

        ``network`` is not used: the DSN names two hosts, which the kit's network seam
        cannot route (``routed_dsn`` refuses it), and a deployment run breaks no link of
        the workers' (``open_location`` passes no network for ``faults="deployment"``).
        """
        del network
        from reference_stores.postgres import drop_schema, install_schema

        schema = f"chongming_failover_{uuid.uuid4().hex[:12]}"
        install_schema(self.dsn, schema)
        try:
            yield functools.partial(self.store.open, self.dsn, schema=schema,
                                    call_timeout=CALL_TIMEOUT, timeout=POOL_TIMEOUT)
        finally:
            with contextlib.suppress(Exception):  # the servers are deleted right after
                drop_schema(self.dsn, schema)

    def close(self) -> None:
        for part in (self.proxy, self.standby, self.primary):
            if part is not None:
                with contextlib.suppress(Exception):
                    part.close() if not isinstance(part, FaultProxy) else part.stop()
