"""Teeth of the fault run: four Postgres stores that are correct on a healthy network and
each wrong in one realistic way once the network breaks.

Each is the reference ``PostgresTaskStore`` with one mistake, and each has a
``make_<name>(network=None)`` factory shaped like the reference ``make_shared_store``: a
fresh schema installed and dropped on the direct DSN, the workers' opener routed through
``network.route(host, port)`` when the kit passes the seam. The openers are
``functools.partial`` of a classmethod of a class in this module, so spawned workers
unpickle them by importing ``fault_stores`` (tests/stress is on ``sys.path``, see
conftest.py).

Which fault clause each must fail, and only that one (tests/stress/test_fault_teeth.py):

* :class:`RetryingSave` -- XP-FAULT-SAFETY (a conflict reported for a save that happened);
* :class:`SwallowingWrites` -- XP-FAULT-SAFETY (a write reported done that never happened);
* :class:`OneConnection` -- XP-FAULT-RECOVERY (a dead connection kept for ever);
* :class:`NoClientTimeout` -- XP-FAULT-NO-HANG (a call waiting for ever on a blackhole).
"""

from __future__ import annotations

import contextlib
import functools
import math
import uuid
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

from chongming_conformance import StoreError, Transition
from reference_stores.postgres import (
    NETWORK_CALL_TIMEOUT,
    PostgresTaskStore,
    _configure,
    _dropped_on_exit,
    _dsn_from_env,
    _Lease,
    _Watchdog,
    install_schema,
    routed_dsn,
)
from reference_stores.postgres_schema import _failure, validate_schema_name

__all__ = [
    "NoClientTimeout",
    "OneConnection",
    "RetryingSave",
    "SwallowingWrites",
    "make_no_client_timeout",
    "make_one_connection",
    "make_retrying_save",
    "make_swallowing_writes",
]


class RetryingSave(PostgresTaskStore):
    """"Save retried after a connection error": a lost connection looks transient, so
    ``save`` tries once more.

    When the first attempt committed and only its reply was lost (a reset or a cut reply
    after the COMMIT), the retry finds the version already moved and raises
    ``ConcurrencyConflict`` -- "no effect" -- for a save that took effect. A correct store
    raises StoreError there (unknown outcome) and leaves the retry to a caller that can
    re-read.
    """

    def save(self, snapshot: Any, *, expect_version: int) -> None:
        try:
            super().save(snapshot, expect_version=expect_version)
        except StoreError as exc:
            if not isinstance(exc.__cause__, psycopg.OperationalError):
                raise
            super().save(snapshot, expect_version=expect_version)


class SwallowingWrites(PostgresTaskStore):
    """"Best effort" bookkeeping writes: ``complete_command`` and ``append`` log and swallow
    a StoreError and return as if they had succeeded ("the worker must not crash over a
    history row").

    A request the fault swallowed (a blackhole, the server down, a reset before the
    statement reached the server) then says "done" for a command that stays claimable and
    a transition that is not there.
    """

    def complete_command(self, command_id: str, *, now: Any, outcome: str | None = None) -> None:
        with contextlib.suppress(StoreError):  # "best effort": the mistake modelled here
            super().complete_command(command_id, now=now, outcome=outcome)

    def append(self, transition: Transition) -> None:
        with contextlib.suppress(StoreError):  # "best effort": the mistake modelled here
            super().append(transition)


class OneConnection(PostgresTaskStore):
    """One connection, opened at construction and never replaced: "a connection per store
    instance is enough, the store is used by one thread".

    It keeps the reference store's client-side timeout (the watchdog cuts a call that
    waits too long), so no call hangs; but once a reset, a cut reply or a timeout has
    broken the connection, every later call of this instance raises StoreError, long after
    the network healed. A correct store replaces a broken connection (the reference
    store's pool checks and discards them).
    """

    def __init__(
        self,
        dsn: str,
        *,
        schema: str,
        min_size: int = 1,
        max_size: int = 1,
        timeout: float = 15.0,
        close_pool: bool | None = None,
        call_timeout: float | None = 30.0,
    ) -> None:
        del min_size, max_size, close_pool  # one connection, no pool
        self._schema = validate_schema_name(schema)
        self._closed = False
        self._owns_pool = False
        self._watchdog = (
            None if call_timeout is None else _Watchdog(call_timeout, f"one:{schema}")
        )
        limit = timeout if call_timeout is None else min(timeout, call_timeout)
        try:
            self._conn = psycopg.connect(
                dsn, autocommit=True, connect_timeout=max(2, math.ceil(limit))
            )
            _configure(
                self._conn,
                statement_timeout_ms=None if call_timeout is None else int(call_timeout * 900),
            )
        except psycopg.Error as exc:
            raise StoreError(f"cannot connect to PostgreSQL: {exc}") from exc
        self._build_statements()
        try:
            self._check_schema()
        except BaseException:
            self.close()
            raise

    @contextmanager
    def _connection(self, operation: str) -> Iterator[psycopg.Connection[Any]]:
        if self._closed:
            raise StoreError(f"{operation}() on a closed OneConnection store")
        lease: _Lease | None = None
        try:
            if self._watchdog is None:
                yield self._conn
            else:
                with self._watchdog.watch(self._conn) as lease:
                    yield self._conn
        except psycopg.Error as exc:
            if lease is not None and lease.cut:
                raise StoreError(f"{operation}() exceeded its client-side timeout") from exc
            raise _failure(f"{operation}()", exc) from exc

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._watchdog is not None:
            self._watchdog.stop()
        self._conn.close()


class NoClientTimeout(PostgresTaskStore):
    """The reference store with its client-side timeout turned off (``call_timeout=None``):
    "the server has statement_timeout and TCP has keepalives".

    Neither fires for a request a blackhole swallowed: the server never saw it, and the
    proxy's kernel still acknowledges, so the call waits for a reply for ever. Everything
    else is the reference store's (the pool's wait for a connection stays bounded).
    """

    @classmethod
    def open(
        cls,
        dsn: str,
        *,
        schema: str,
        max_size: int = 2,
        call_timeout: float | None = None,
        timeout: float = 15.0,
    ) -> PostgresTaskStore:
        return cls(dsn, schema=schema, min_size=1, max_size=max_size, timeout=timeout,
                   call_timeout=None)


# -- factories ------------------------------------------------------------------------------
def _shared(
    cls: type[PostgresTaskStore], network: Any, *, call_timeout: float | None = 30.0
) -> Generator[Callable[[], PostgresTaskStore], None, None]:
    """The reference ``make_shared_store`` with ``cls`` as the store: install and drop on the
    direct DSN, the workers routed through ``network`` (with the reference's short network
    bounds) when given."""
    dsn = _dsn_from_env()
    opener_dsn = None if network is None else routed_dsn(dsn, network)  # refuse before install
    schema = f"chongming_t_{uuid.uuid4().hex[:16]}"
    with _dropped_on_exit(dsn, schema):  # as the reference: a failed install leaves nothing
        install_schema(dsn, schema)
        if opener_dsn is None:
            yield functools.partial(cls.open, dsn, schema=schema, call_timeout=call_timeout)
        else:
            yield functools.partial(
                cls.open,
                opener_dsn,
                schema=schema,
                call_timeout=None if call_timeout is None else NETWORK_CALL_TIMEOUT,
                timeout=NETWORK_CALL_TIMEOUT,
            )


def make_retrying_save(network: Any = None) -> Generator[Callable[[], Any], None, None]:
    yield from _shared(RetryingSave, network)


def make_swallowing_writes(network: Any = None) -> Generator[Callable[[], Any], None, None]:
    yield from _shared(SwallowingWrites, network)


def make_one_connection(network: Any = None) -> Generator[Callable[[], Any], None, None]:
    yield from _shared(OneConnection, network)


def make_no_client_timeout(network: Any = None) -> Generator[Callable[[], Any], None, None]:
    yield from _shared(NoClientTimeout, network, call_timeout=None)
