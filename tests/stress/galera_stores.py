"""The reference MariaDB store on a private three-node Galera cluster: issue 42's evidence.

``GaleraStores(cluster, spread=...)`` is the wiring of ``reference_stores/mariadb.py``,
unchanged, on a ``ThrowawayGalera`` (tests/integration/galera_servers.py):

* ``spread=False`` -- *single node*: every worker connects to node 0; the other two
  nodes only replicate. This is Galera behind a proxy that pins all traffic to one
  writer (a common deployment).
* ``spread=True`` -- *multi-primary*: each store the opener opens goes to the next node in
  turn (a counter in a file under a lock, shared by the worker processes: picklable and
  balanced, where ``pid % 3`` may put every worker on one node). Writes from different
  nodes race through Galera's certification instead of InnoDB's row locks.

``deployment(kind)`` is what a store module's ``chongming_deployment()`` returns:

* ``"crash"``: SIGKILL of node 1 and its rejoin (IST). ``crash=True``: a commit returns
  only after its write set is delivered to every node of the primary component, and the
  other two nodes keep quorum, so a single node's crash must lose no acknowledged write --
  XP-FAULT-DURABILITY is judged.
* ``"partition"``: node 2 cut off the group communication (``gmcast.isolate``; the
  module docstring of galera_servers.py says why not the kit's fault proxy) and healed.
  ``crash=False``: the node keeps its memory, and what it did not get it receives by IST.

The opener's bounds are the reference wiring's under faults (5 s per call and per wait
for a connection), so calls on a node that is gone fail fast as StoreError (an unknown
outcome, never an anomaly by itself). ``store_class`` lets a tooth run a variant of the
template (``NoSyncWaitStore``: the template without its Galera read fix).
"""

from __future__ import annotations

import fcntl
import functools
import os
import sys
import tempfile
import uuid
from collections.abc import Callable, Generator, Sequence
from pathlib import Path
from typing import Any

from chongming_conformance.faults import Action, Deployment

_INTEGRATION = str(Path(__file__).resolve().parent.parent / "integration")
if _INTEGRATION not in sys.path:  # galera_servers, throwaway_servers
    sys.path.insert(0, _INTEGRATION)

from galera_servers import ThrowawayGalera  # noqa: E402

from reference_stores.mariadb import MariaDBTaskStore  # noqa: E402

__all__ = ["CALL_TIMEOUT", "RECOVERY_SECONDS", "GaleraStores", "NoSyncWaitStore", "SplitReads",
           "SplitReadsNoSyncWait", "open_spread", "schema_everywhere"]

#: A call waits at most this for a connection and again for the server.
CALL_TIMEOUT = 5.0
#: After the node is back (rejoin/heal already waited for Synced), the workers' pools find
#: their broken connections by using them and reconnect; the evicted node's sessions may
#: also hit a commit that waits for the cluster to settle (up to the evs timeouts, 6 s).
RECOVERY_SECONDS = 20.0
CRASHED_NODE = 1
PARTITIONED_NODE = 2


class NoSyncWaitStore(MariaDBTaskStore):
    """The template without its Galera fix: no ``wsrep_sync_wait`` in its sessions.

    A tooth: on a multi-primary cluster a read on one node may miss a write another node
    already acknowledged (Galera applies remote write sets asynchronously), which the kit
    must catch on the visibility clause.
    """

    WSREP_SYNC_WAIT = 0


class SplitReads(MariaDBTaskStore):
    """The template behind a read/write split -- MaxScale's ``readwritesplit`` in front of
    Galera, a common deployment: its writes (and ``claim_commands``, which writes) on one
    node, its reads (``get``, ``query``, ``counts``, ``history``) on another.

    Every read then crosses nodes, also the one a worker makes right after its own save,
    so a node that has not applied a write set yet answers an older state unless the
    session waits for causality (``wsrep_sync_wait``). With the template's fix it is
    correct (the control); without it (:class:`SplitReadsNoSyncWait`) it is the tooth
    CI catches: the race of a plain multi-primary run -- another worker's read landing in
    the millisecond before the apply -- becomes every read after a write.
    """

    def __init__(self, dsn: str, *, read_dsn: str, **kwargs: Any) -> None:
        super().__init__(dsn, **kwargs)
        reader = MariaDBTaskStore if self.WSREP_SYNC_WAIT else NoSyncWaitStore
        try:
            self._reader = reader(read_dsn, **kwargs)
        except BaseException:
            super().close()
            raise

    def get(self, task_id: str) -> Any:
        return self._reader.get(task_id)

    def query(self, query: Any = None) -> Any:
        return self._reader.query(query)

    def counts(self) -> Any:
        return self._reader.counts()

    def history(self, task_id: str, *, since_version: int = 0) -> Any:
        return self._reader.history(task_id, since_version=since_version)

    def close(self) -> None:
        try:
            self._reader.close()
        finally:
            super().close()


class SplitReadsNoSyncWait(SplitReads):
    """The tooth: the split without the template's Galera fix."""

    WSREP_SYNC_WAIT = 0


def _next_index(counter: str, n: int) -> int:
    """The next node, round robin, across processes: a counter file under an exclusive lock."""
    fd = os.open(counter, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        raw = os.read(fd, 32)
        value = int(raw) if raw.strip() else 0
        os.lseek(fd, 0, os.SEEK_SET)
        os.ftruncate(fd, 0)
        os.write(fd, str(value + 1).encode())
        return value % n
    finally:
        os.close(fd)  # closing drops the lock


def open_spread(dsns: Sequence[str], counter: str, database: str,
                store_class: type[MariaDBTaskStore] = MariaDBTaskStore) -> MariaDBTaskStore:
    """A store on the next node of ``dsns`` (round robin over every call, all processes);
    a :class:`SplitReads` reads on the node after it."""
    i = _next_index(counter, len(dsns))
    if issubclass(store_class, SplitReads):
        return store_class(dsns[i], read_dsn=dsns[(i + 1) % len(dsns)], database=database,
                           max_size=2, call_timeout=CALL_TIMEOUT, timeout=CALL_TIMEOUT)
    return store_class(dsns[i], database=database, max_size=2, call_timeout=CALL_TIMEOUT,
                       timeout=CALL_TIMEOUT)


def schema_everywhere(cluster: ThrowawayGalera, database: str) -> None:
    """Return once every node has applied the DDL that installed ``database``.

    DDL replicates in total order (TOI), but the other nodes apply it after it returned
    on the node that ran it: a store opened on another node right after
    ``install_schema`` failed with 1049 (``Unknown database``) in the plugin's must gate
    (docs/galera.md). A ``SELECT`` under ``wsrep_sync_wait = 1`` waits until the node
    has applied everything committed before it, DDL included.
    """
    for node in cluster.nodes:
        conn = node.connect(database=None)
        try:
            with conn.cursor() as cur:
                cur.execute("SET SESSION wsrep_sync_wait = 1")
                cur.execute("SELECT COUNT(*) FROM information_schema.tables "
                            "WHERE table_schema = %s", [database])
                (tables,) = cur.fetchone()
        finally:
            conn.close()
        if not tables:
            raise RuntimeError(f"{node.name} has no table of {database!r} after a causal wait")


class GaleraStores:
    """The reference store's shared-store factory and deployment on a Galera cluster."""

    def __init__(self, cluster: ThrowawayGalera, *, spread: bool,
                 store_class: type[MariaDBTaskStore] = MariaDBTaskStore) -> None:
        self.cluster = cluster
        self.spread = spread
        self.store_class = store_class
        self._dir = tempfile.mkdtemp(prefix="chongming-galera-counter-")

    def make_shared_store(self, network: Any = None) -> Generator[Callable[[], Any], None, None]:
        from reference_stores.mariadb import drop_schema, install_schema, routed_dsn

        admin = self.cluster.nodes[0].dsn  # DDL replicates to every node (TOI)
        dsns = self.cluster.dsns if self.spread else [admin]
        if network is not None:
            dsns = [routed_dsn(d, network) for d in dsns]
        database = f"chongming_galera_{uuid.uuid4().hex[:12]}"
        counter = os.path.join(self._dir, database)
        install_schema(admin, database)
        schema_everywhere(self.cluster, database)
        try:
            yield functools.partial(open_spread, tuple(dsns), counter, database,
                                    self.store_class)
        finally:
            drop_schema(admin, database)

    def topology(self) -> str:
        ports = ", ".join(str(n.port) for n in self.cluster.nodes)
        where = "workers spread over every node (multi-primary)" if self.spread else (
            "every worker on node 0")
        return (f"MariaDB 10.11 + Galera 4, {len(self.cluster.nodes)} nodes on 127.0.0.1 "
                f"(client ports {ports}), {where}; store {self.store_class.__name__}")

    def deployment(self, kind: str = "none") -> Deployment:
        """``"none"``, ``"crash"`` (node 1 SIGKILLed, rejoins) or ``"partition"`` (node 2)."""
        if kind == "none":
            return Deployment(topology=self.topology())
        if kind == "crash":
            action = Action(begin=functools.partial(self.cluster.crash, CRASHED_NODE),
                            end=functools.partial(self.cluster.rejoin, CRASHED_NODE),
                            recovery_seconds=RECOVERY_SECONDS, crash=True)
            return Deployment(topology=self.topology(), actions={"crash_node1": action})
        if kind == "partition":
            action = Action(begin=functools.partial(self.cluster.isolate, PARTITIONED_NODE),
                            end=functools.partial(self.cluster.heal, PARTITIONED_NODE),
                            recovery_seconds=RECOVERY_SECONDS, crash=False)
            return Deployment(topology=self.topology(), actions={"isolate_node2": action})
        raise ValueError(f"unknown Galera deployment {kind!r}: none, crash or partition")

    def close(self) -> None:
        import shutil

        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> GaleraStores:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
