"""The reference MariaDB store on a private Galera cluster, as a store module for the plugin.

``pytest --chongming-store=galera_plugin_store:make_store --chongming-gate=must``
(with tests/stress and tests/integration on ``sys.path``) runs the whole must gate on a
3-node cluster this module starts on first use and kills at exit: the single-process
contract on stores opened on the nodes in turn (each on its own fresh database), the
stress and cross-process clauses with the workers spread over the three nodes
(multi-primary), and with ``--chongming-faults=deployment`` node 1 SIGKILLed and rejoined
mid-run (``chongming_deployment``). docs/galera.md has the measured run. Pass
``--chongming-timeout=120``: the first ``make_store()`` starts the cluster (15-40 s on a
loaded 2-core machine), longer than the default 30 s bound on one store call.
"""

from __future__ import annotations

import atexit
import itertools
from collections.abc import Callable, Generator
from typing import Any

from galera_stores import CALL_TIMEOUT, GaleraStores, schema_everywhere

from chongming_conformance.faults import Deployment
from reference_stores.mariadb import MariaDBTaskStore, drop_schema, install_schema

_stores: GaleraStores | None = None
_turn = itertools.count()


def _cluster_stores() -> GaleraStores:
    global _stores
    if _stores is None:
        from galera_servers import ThrowawayGalera

        cluster = ThrowawayGalera(3)
        _stores = GaleraStores(cluster, spread=True)
        atexit.register(cluster.close)
        atexit.register(_stores.close)
    return _stores


def make_store() -> Generator[MariaDBTaskStore, None, None]:
    """A store on the next node, on a fresh database installed through node 0, dropped after."""
    stores = _cluster_stores()
    nodes = stores.cluster.nodes
    turn = next(_turn)
    database = f"chongming_galera_c{turn}"
    install_schema(nodes[0].dsn, database)
    schema_everywhere(stores.cluster, database)
    store = MariaDBTaskStore(nodes[turn % len(nodes)].dsn, database=database,
                             call_timeout=CALL_TIMEOUT * 6)
    try:
        yield store
    finally:
        store.close()
        drop_schema(nodes[0].dsn, database)


def make_shared_store(network: Any = None) -> Generator[Callable[[], Any], None, None]:
    yield from _cluster_stores().make_shared_store(network)


def chongming_deployment() -> Deployment:
    return _cluster_stores().deployment("crash")
