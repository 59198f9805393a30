"""The reference SQL stores on servers the test may crash: the deployment seam's evidence.

The kit cannot crash a store's server; the store's module offers the action
(``chongming_deployment()``, docs/faults.md). This module is that wiring for the
project's own tests: the reference Postgres and MariaDB stores, unchanged, each on a
private server (tests/integration/throwaway_servers.py) that a crash action stops the
hard way -- Postgres ``pg_ctl stop -m immediate`` (shared memory, WAL buffers included,
is gone), MariaDB SIGKILL -- and starts again (crash recovery runs).

Run with the server's durable defaults they must lose nothing (XP-FAULT-DURABILITY
PASS); with ``settings`` that acknowledge a commit before it is on disk
(``synchronous_commit = off``; ``innodb_flush_log_at_trx_commit = 0``) they are the
durability clause's teeth. Nothing but the server's configuration differs.

``CrashableServer.make_shared_store`` is a ``make_shared_store`` for the harness (it
takes the ``network`` seam too, so a deployment run also routes the workers'
connections through the kit's proxies); ``deployment()`` is what a store module's
``chongming_deployment()`` would return.
"""

from __future__ import annotations

import functools
import sys
import uuid
from collections.abc import Callable, Generator, Mapping
from pathlib import Path
from typing import Any

from chongming_conformance.faults import Action, Deployment

_INTEGRATION = str(Path(__file__).resolve().parent.parent / "integration")
if _INTEGRATION not in sys.path:  # throwaway_servers
    sys.path.insert(0, _INTEGRATION)

from throwaway_servers import ThrowawayMariaDB, ThrowawayPostgres  # noqa: E402

__all__ = ["RECOVERY_SECONDS", "CrashableMariaDB", "CrashablePostgres"]

#: How long the store may take to serve again after the server is back: its pool finds
#: the broken connections by using them (each call on one fails once) and reconnects.
RECOVERY_SECONDS = 15.0
#: The workers' bounds, as in the reference stores' fault wiring: a call waits at most
#: this for a connection and again for the server.
CALL_TIMEOUT = 5.0


class _Crashable:
    """A private server, the deployment that crashes it, and (in subclasses) the reference
    store's shared-store factory on it."""

    engine = ""
    server: Any

    def deployment(self) -> Deployment:
        extra = ", ".join(f"{k} = {v}" for k, v in self.settings.items()) or "durable defaults"
        return Deployment(
            topology=f"{self.engine}, one private server on 127.0.0.1:{self.server.port} "
                     f"({extra})",
            actions={"crash_server": Action(begin=self.server.crash, end=self.server.start,
                                            recovery_seconds=RECOVERY_SECONDS, crash=True)})

    def __init__(self, settings: Mapping[str, str] | None = None) -> None:
        self.settings = dict(settings or {})

    def close(self) -> None:
        self.server.close()


class CrashablePostgres(_Crashable):
    """A private PostgreSQL server and the reference store on it."""

    engine = "PostgreSQL 15"

    def __init__(self, settings: Mapping[str, str] | None = None) -> None:
        super().__init__(settings)
        self.server = ThrowawayPostgres(self.settings)

    def make_shared_store(self, network: Any = None) -> Generator[Callable[[], Any], None, None]:
        from reference_stores.postgres import (
            PostgresTaskStore,
            drop_schema,
            install_schema,
            routed_dsn,
        )

        dsn = self.server.dsn
        opener_dsn = dsn if network is None else routed_dsn(dsn, network)
        schema = f"chongming_crash_{uuid.uuid4().hex[:12]}"
        install_schema(dsn, schema)
        try:
            yield functools.partial(PostgresTaskStore.open, opener_dsn, schema=schema,
                                    call_timeout=CALL_TIMEOUT, timeout=CALL_TIMEOUT)
        finally:
            drop_schema(dsn, schema)


class CrashableMariaDB(_Crashable):
    """A private MariaDB server and the reference store on it."""

    engine = "MariaDB 10.11"

    def __init__(self, settings: Mapping[str, str] | None = None) -> None:
        super().__init__(settings)
        self.server = ThrowawayMariaDB(self.settings)

    def make_shared_store(self, network: Any = None) -> Generator[Callable[[], Any], None, None]:
        from reference_stores.mariadb import (
            MariaDBTaskStore,
            drop_schema,
            install_schema,
            routed_dsn,
        )

        dsn = self.server.dsn
        opener_dsn = dsn if network is None else routed_dsn(dsn, network)
        database = f"chongming_crash_{uuid.uuid4().hex[:12]}"
        install_schema(dsn, database)
        try:
            yield functools.partial(MariaDBTaskStore.open, opener_dsn, database=database,
                                    call_timeout=CALL_TIMEOUT, timeout=CALL_TIMEOUT)
        finally:
            drop_schema(dsn, database)
