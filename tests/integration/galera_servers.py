"""A private three-node MariaDB Galera cluster on loopback, for the project's own tests.

``ThrowawayGalera(nodes=3)`` starts ``nodes`` mariadbd processes, each a
``ThrowawayMariaDB`` (tests/integration/throwaway_servers.py: its own temp dir, free
client port, unix socket, SIGKILL crash, cleanup on close / garbage collection / exit)
with ``wsrep_on=ON`` and the galera-4 provider. What Galera needs, and why it is set so:

* ``binlog_format=ROW`` and ``innodb_autoinc_lock_mode=2``: Galera replicates row
  events and cannot replicate the table-level auto-increment lock (its documented
  requirements; the server refuses to start a wsrep node with statement binlogs).
* Every node's group-communication (``gmcast.listen_addr``), IST (``ist.recv_addr``)
  and SST (``wsrep_sst_receive_address``) endpoints are on free ports of 127.0.0.1,
  so the cluster touches neither the shared server on 3306 nor the default 4567/4568/4444.
* SST by ``rsync`` (``/usr/bin/rsync`` is a Debian package; mariabackup would need a
  user with backup rights, rsync needs nothing): a joiner with an empty or stale data
  directory gets a full copy. A node that was SIGKILLed rejoins by IST from the donor's
  gcache (128 MB here, larger than anything a test writes).
* Failure detection keeps Galera's suspect timeout (5 s) and shortens the inactive one
  (15 s) to 10 s: a crashed or isolated node stalls every node's commits until the
  others evict it, and the kit's fault run allows a bounded recovery. Not shorter: with
  suspect 3 s / inactive 6 s a fault-free run on this 2-core machine at load 12 once saw
  node 0 leave the primary component (error 1047 in a teardown) -- healthy nodes evicted.
* The first node bootstraps the cluster (``--wsrep-new-cluster``) on its first start
  only; the others join it and every later start of any node joins the running cluster.

``crash(i)`` is SIGKILL of node ``i`` (the others keep quorum: 2 of 3); ``rejoin(i)``
starts it again and waits until the cluster has every node again and it is ``Synced``.
``isolate(i)`` / ``heal(i)`` cut node ``i`` off the group communication and give it back
(``gmcast.isolate``, see there for why not the kit's fault proxy); its client port stays
open, so its sessions see what a partitioned minority node does.

Missing binaries (mariadbd, mariadb-install-db, the provider, rsync) raise
``MissingBinaries`` naming them, so each test decides skip or (under
``CHONGMING_REQUIRE_MARIADB``) failure.
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Mapping
from pathlib import Path

from throwaway_servers import (
    ClosesOnExit,
    MissingBinaries,
    ServerError,
    ThrowawayMariaDB,
    free_port,
    mariadb_binaries,
    missing,
)

__all__ = ["GALERA_PROVIDER", "SYNC_TIMEOUT", "GaleraNode", "ThrowawayGalera", "galera_binaries"]

GALERA_PROVIDER = Path(os.environ.get("CHONGMING_GALERA_PROVIDER",
                                      "/usr/lib/galera/libgalera_smm.so"))
RSYNC = Path(os.environ.get("CHONGMING_RSYNC", "/usr/bin/rsync"))
#: Bound on a node reaching Synced with the full cluster (SST included); never a speed target.
SYNC_TIMEOUT = 90.0
#: Provider options shared by every node (see the module docstring for the timeouts).
_PROVIDER_OPTIONS = (
    "gcache.size=128M",
    "evs.keepalive_period=PT1S",
    "evs.inactive_check_period=PT1S",
    "evs.suspect_timeout=PT5S",
    "evs.inactive_timeout=PT10S",
    "evs.install_timeout=PT10S",
    "gmcast.peer_timeout=PT3S",
    "pc.announce_timeout=PT1S",
)


def galera_binaries() -> list[Path]:
    return [*mariadb_binaries(), GALERA_PROVIDER, RSYNC]


class GaleraNode(ThrowawayMariaDB):
    """One wsrep node: a ``ThrowawayMariaDB`` whose command line makes it a Galera member."""

    def __init__(self, name: str, index: int, cluster: str, gcomm_ports: list[int],
                 bootstrap: bool, settings: Mapping[str, str] | None = None) -> None:
        self.name = name
        self.index = index
        self.gcomm_port = gcomm_ports[index]
        self._cluster = cluster
        self._peers = ",".join(f"127.0.0.1:{p}" for p in gcomm_ports)
        self._ist_port = free_port()
        self._sst_port = free_port()
        self._bootstrap = bootstrap
        super().__init__(settings)

    def _argv(self) -> list[str]:
        options = ";".join((
            *_PROVIDER_OPTIONS,
            f"gmcast.listen_addr=tcp://127.0.0.1:{self.gcomm_port}",
            f"ist.recv_addr=127.0.0.1:{self._ist_port}",
        ))
        argv = super()._argv()
        # --skip-log-bin from the parent stays: Galera 4 on 10.11 needs no binary log.
        argv += [
            "--wsrep-on=ON", f"--wsrep-provider={GALERA_PROVIDER}",
            f"--wsrep-cluster-name={self._cluster}",
            f"--wsrep-cluster-address=gcomm://{self._peers}",
            f"--wsrep-node-name={self.name}", "--wsrep-node-address=127.0.0.1",
            f"--wsrep-provider-options={options}",
            "--wsrep-sst-method=rsync", f"--wsrep-sst-receive-address=127.0.0.1:{self._sst_port}",
            "--binlog-format=ROW", "--innodb-autoinc-lock-mode=2",
            "--default-storage-engine=InnoDB", "--wsrep-slave-threads=2",
        ]  # fmt: skip
        if self._bootstrap:
            argv.append("--wsrep-new-cluster")
        return argv

    def start(self) -> None:
        """Start mariadbd and wait (bounded) until this node is Synced and serves queries.

        A joiner accepts connections before it has caught up; a statement then fails
        with 1047 (``WSREP has not yet prepared node``) -- the parent's ``CREATE
        DATABASE`` right after the start did, once in three starts on a loaded machine.
        """
        super().start()
        self._bootstrap = False  # every later start joins the running cluster
        deadline = time.monotonic() + SYNC_TIMEOUT
        last: object = None
        while time.monotonic() < deadline:
            try:
                status = self.status()
            except Exception as exc:  # still starting
                last = exc
            else:
                last = (status.get("wsrep_ready"), status.get("wsrep_local_state_comment"))
                if last == ("ON", "Synced"):
                    return
            time.sleep(0.2)
        raise ServerError(f"{self.name} not ready and Synced after {SYNC_TIMEOUT:g} s: {last}"
                          f"\nserver log:\n{_tail(self.log)}")

    def status(self) -> dict[str, str]:
        """The node's ``wsrep_%`` status variables (raises if it does not answer)."""
        conn = self.connect(database=None, connect_timeout=3, read_timeout=5)
        try:
            with conn.cursor() as cur:
                cur.execute("SHOW STATUS LIKE 'wsrep_%'")
                return {str(k): str(v) for k, v in cur.fetchall()}
        finally:
            conn.close()

    def provider_option(self, option: str) -> None:
        """``SET GLOBAL wsrep_provider_options = option`` (a dynamic provider option)."""
        conn = self.connect(database=None, connect_timeout=3, read_timeout=10)
        try:
            with conn.cursor() as cur:
                cur.execute("SET GLOBAL wsrep_provider_options = %s", [option])
        finally:
            conn.close()


class ThrowawayGalera(ClosesOnExit):
    """``with ThrowawayGalera() as cluster: ... cluster.dsns ...``: a private Galera cluster.

    The constructor starts every node and returns once all of them are ``Synced`` in a
    cluster of ``nodes``; ``close()`` kills and deletes them all, whatever happened.
    ``settings`` are server options given to every node.
    """

    def __init__(self, nodes: int = 3, settings: Mapping[str, str] | None = None) -> None:
        absent = missing([*mariadb_binaries(), RSYNC])
        if not GALERA_PROVIDER.is_file():  # a shared library: readable, not executable
            absent.append(GALERA_PROVIDER)
        if absent:
            names = ", ".join(str(p) for p in absent)
            raise MissingBinaries(
                f"Galera binaries missing: {names} (apt-get install galera-4 rsync; or set "
                "CHONGMING_GALERA_PROVIDER / CHONGMING_RSYNC)"
            )
        if nodes < 1:
            raise ValueError("a cluster needs at least one node")
        self.cluster_name = f"chongming-{uuid.uuid4().hex[:8]}"
        self._gcomm_ports = [free_port() for _ in range(nodes)]
        self.nodes: list[GaleraNode] = []
        self._isolated: set[int] = set()
        try:
            for index in range(nodes):
                self.nodes.append(GaleraNode(
                    f"node{index}", index, self.cluster_name, self._gcomm_ports,
                    bootstrap=index == 0, settings=settings,
                ))  # fmt: skip
                self.wait_synced(size=index + 1)
        except BaseException:
            self.close()
            raise

    @property
    def dsns(self) -> list[str]:
        return [node.dsn for node in self.nodes]

    def wait_synced(self, size: int | None = None, timeout: float = SYNC_TIMEOUT) -> None:
        """Wait (bounded) until every running, connected node is Synced in a cluster of ``size``."""
        want = str(len(self.nodes) if size is None else size)
        deadline = time.monotonic() + timeout
        last: dict[str, object] = {}
        while time.monotonic() < deadline:
            states: dict[str, object] = {}
            for node in self.nodes:
                try:
                    status = node.status()
                except Exception as exc:  # not up yet (SST, IST), or just killed
                    states[node.name] = f"unreachable: {exc}"
                    continue
                states[node.name] = (status.get("wsrep_local_state_comment"),
                                     status.get("wsrep_cluster_size"),
                                     status.get("wsrep_cluster_status"))
            last = states
            if all(s == ("Synced", want, "Primary") for s in states.values()):
                return
            time.sleep(0.2)
        logs = "\n".join(f"--- {n.name}:\n{_tail(n.log)}" for n in self.nodes)
        raise ServerError(f"Galera cluster not Synced with {want} nodes after {timeout:g} s: "
                          f"{last}\n{logs}")

    def crash(self, index: int) -> None:
        """SIGKILL node ``index`` (the rest keep quorum while a majority of nodes is left)."""
        self.nodes[index].crash()

    def rejoin(self, index: int) -> None:
        """Start node ``index`` again (IST, or SST if need be); wait until all are Synced."""
        self.nodes[index].start()
        self.wait_synced()

    def isolate(self, index: int) -> None:
        """Cut node ``index`` off the group communication: a partition of that one node.

        ``gmcast.isolate=1`` makes the node's group-communication layer drop every
        connection to its peers and refuse new ones, while its client port stays open.
        The rest (a majority) evict it after the suspect timeout and go on as the primary
        component; the isolated node becomes non-primary and refuses queries (error 1047)
        until it is healed. Why not the kit's fault proxy in front of its gcomm port:
        every node dials every other at the listen address it advertises (learned from
        the handshake and the peers' gossip), and a node dials out as well as accepts, so
        a proxy in front of one listening port carries only the connections that happen
        to be dialled through it -- not a cut. Galera's own partition tests use this option.
        """
        self.nodes[index].provider_option("gmcast.isolate=1")
        self._isolated.add(index)

    def heal(self, index: int) -> None:
        """Give node ``index`` its group communication back; wait until all are Synced."""
        self.nodes[index].provider_option("gmcast.isolate=0")
        self._isolated.discard(index)
        self.wait_synced()

    def close(self) -> None:
        """Kill every node and delete its directory; never raises. Idempotent."""
        for node in self.nodes:
            with contextlib.suppress(Exception):
                node.close()


def _tail(path: Path, size: int = 1500) -> str:
    try:
        return path.read_text(errors="replace")[-size:]
    except OSError as exc:
        return f"(no log: {exc})"
