"""A shared-store factory whose teardown goes through a proxy that resets every connection.

What the issue measured on MariaDB: a connection reset while ``drop_schema`` ran in the
first scenario's teardown escaped ``run_all`` and crashed the stress CLI. The schema is
then dropped again directly, so the database is left clean; the reset still propagates.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator

from psycopg.conninfo import conninfo_to_dict, make_conninfo

from chongming_conformance.faults import FaultProxy, ResetPeer
from reference_stores.postgres import PostgresTaskStore, _fresh_schema_name
from reference_stores.postgres_schema import drop_schema, install_schema


def make_shared_store() -> Iterator[Callable[[], PostgresTaskStore]]:
    dsn = os.environ["CHONGMING_TEST_POSTGRES"]
    params = conninfo_to_dict(dsn)
    proxy = FaultProxy((str(params.get("host") or "127.0.0.1"), int(params.get("port") or 5432)))
    host, port = proxy.start()
    routed = make_conninfo(dsn, host=host, port=str(port))
    schema = _fresh_schema_name()
    install_schema(dsn, schema)
    try:
        yield functools.partial(PostgresTaskStore.open, dsn, schema=schema)
    finally:
        proxy.add_toxic("reset", ResetPeer(0.0), direction="upstream")
        try:
            drop_schema(routed, schema)  # reset at once: raises
        finally:
            proxy.stop()
            drop_schema(dsn, schema)
