"""The three Galera facts docs/galera.md rests on, each measured on a private 3-node cluster.

1. ``skip-locked``: ``SELECT ... FOR UPDATE SKIP LOCKED`` on two nodes returns the same
   row to both; the first COMMIT wins, the second fails certification at COMMIT (1213).
2. ``stale-reads``: an autocommit UPDATE on node 0, then a SELECT of the row on node 1,
   200 times: how many reads miss the write, without and with ``wsrep_sync_wait = 7``.
3. ``proxy``: the kit's FaultProxy in front of node 2's gcomm port, nodes 0 and 1 given the
   proxy's address: how many connections it carries once synced, and whether taking it
   down (resets, refuses) cuts node 2 off (the cluster size after 20 s).

    python benchmarks/galera_probe.py [--probe skip-locked|stale-reads|proxy]

Needs mariadbd, mariadb-install-db, galera-4 and rsync.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "integration"))
sys.path.insert(0, str(ROOT))


def skip_locked_and_stale_reads(probes: set[str]) -> None:
    import pymysql
    from galera_servers import ThrowawayGalera

    with ThrowawayGalera(3) as cluster:
        a, b = cluster.nodes[0].connect(), cluster.nodes[1].connect()
        with a.cursor() as cur:
            cur.execute("CREATE TABLE t (id INT PRIMARY KEY, lease INT) ENGINE=InnoDB")
            cur.execute("INSERT INTO t VALUES (1, 0), (2, 0)")
        cluster.wait_synced()
        for conn in (a, b):
            with conn.cursor() as cur:
                cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
                cur.execute("SET SESSION wsrep_sync_wait = 1")  # both start from the inserts
        if "skip-locked" in probes:
            a.begin()
            b.begin()
            claim = "SELECT id FROM t WHERE lease = 0 ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED"
            ca, cb = a.cursor(), b.cursor()
            ca.execute(claim)
            cb.execute(claim)
            ra, rb = ca.fetchall(), cb.fetchall()
            print(f"skip-locked: node 0 claims {ra}, node 1 claims {rb}")
            ca.execute("UPDATE t SET lease = 10 WHERE id = %s", [ra[0][0]])
            cb.execute("UPDATE t SET lease = 11 WHERE id = %s", [rb[0][0]])
            a.commit()
            print("skip-locked: node 0 COMMIT ok")
            try:
                b.commit()
                print("skip-locked: node 1 COMMIT ok (a lease held twice)")
            except pymysql.Error as exc:
                print(f"skip-locked: node 1 COMMIT raised {exc.args}")
        if "stale-reads" in probes:
            for sync_wait in (0, 7):
                with b.cursor() as cur:
                    cur.execute(f"SET SESSION wsrep_sync_wait = {sync_wait}")
                misses = 0
                for i in range(200):
                    with a.cursor() as cur:
                        cur.execute("UPDATE t SET lease = %s WHERE id = 2", [i + 1000 * sync_wait])
                    with b.cursor() as cur:
                        cur.execute("SELECT lease FROM t WHERE id = 2")
                        misses += cur.fetchone()[0] != i + 1000 * sync_wait
                print(f"stale-reads: wsrep_sync_wait={sync_wait}: {misses} of 200 reads on "
                      "node 1 missed node 0's acknowledged write")
        a.close()
        b.close()


def proxy() -> None:
    from galera_servers import GaleraNode, ThrowawayGalera
    from throwaway_servers import free_port

    from chongming_conformance.faults.proxy import FaultProxy

    ports = [free_port() for _ in range(3)]
    fault_proxy = FaultProxy(("127.0.0.1", ports[2]))
    host, port = fault_proxy.start()
    via_proxy = f"127.0.0.1:{ports[0]},127.0.0.1:{ports[1]},{host}:{port}"

    class ViaProxy(GaleraNode):
        def _argv(self) -> list[str]:
            argv = super()._argv()
            if self.index == 2:
                return argv
            return [f"--wsrep-cluster-address=gcomm://{via_proxy}"
                    if a.startswith("--wsrep-cluster-address=") else a for a in argv]

    cluster: Any = ThrowawayGalera.__new__(ThrowawayGalera)
    cluster.cluster_name, cluster.nodes, cluster._isolated = "probe", [], set()
    try:
        for i in range(3):
            cluster.nodes.append(ViaProxy(f"node{i}", i, "probe", ports, bootstrap=i == 0))
            cluster.wait_synced(size=i + 1)
        print(f"proxy: synced; connections through the proxy: {len(fault_proxy.connections())}")
        listing = subprocess.run(["ss", "-tn"], capture_output=True, text=True, check=False)
        direct = [ln for ln in listing.stdout.splitlines()
                  if f":{ports[2]} " in ln and "ESTAB" in ln]
        print(f"proxy: TCP connections to node 2's own gcomm port: {len(direct)}")
        fault_proxy.down()
        time.sleep(20)
        for node in cluster.nodes:
            s = node.status()
            print(f"proxy: 20 s after proxy.down(): {node.name} cluster_size "
                  f"{s['wsrep_cluster_size']} {s['wsrep_cluster_status']} "
                  f"{s['wsrep_local_state_comment']}")
    finally:
        for node in cluster.nodes:
            node.close()
        fault_proxy.stop()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--probe", action="append", choices=("skip-locked", "stale-reads",
                                                             "proxy"))
    args = parser.parse_args()
    probes = set(args.probe or ("skip-locked", "stale-reads", "proxy"))
    if probes & {"skip-locked", "stale-reads"}:
        skip_locked_and_stale_reads(probes)
    if "proxy" in probes:
        proxy()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
