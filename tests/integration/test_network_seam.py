"""The network seam of the Postgres and MariaDB reference stores, through a proxy of our own.

``make_shared_store(network=...)`` must route the *workers* (the opener's stores)
through ``network.route(host, port)`` and keep the schema's set-up and teardown
on the direct address; and a store behind a faulty link must neither hang nor
stay broken. A tiny forwarding proxy, defined here (the kit's fault proxy is
not used, so these tests judge the stores alone), sits in front of the server
and can reset every connection (RST), blackhole them (accept, then drop every
byte both ways, the sockets left open) and heal. For each store:

* (i) the opener's stores connect through the proxy, set-up and teardown do not;
* (ii) after every connection is reset, a call may fail with StoreError, but a
  call a moment later succeeds: the store replaced its connections;
* (iii) in a blackhole a call raises StoreError within ``call_timeout`` (2 s
  here) plus a little -- the client-side timeout, not a hang -- and after the
  link heals calls succeed again.

Every wait is a bound that fails the test, never a speed target.
"""

from __future__ import annotations

import contextlib
import functools
import selectors
import socket
import struct
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from chongming_conformance import StoreError
from chongming_conformance.strategies.samples import snapshot

CALL_TIMEOUT = 2.0  # the stores of (iii)
SLACK = 3.0  # (iii): a blackholed call must end within CALL_TIMEOUT + SLACK
HEAL_BOUND = 15.0  # a healed link must carry a successful call within this


class _Proxy:
    """A TCP forwarder to one server: one thread, one selector, every socket its own.

    ``reset()`` ends every open connection with an RST (SO_LINGER 0, then close);
    ``blackhole()`` keeps accepting and reading but forwards nothing (a hung
    server or a link that drops packets: nobody's socket closes); ``heal()``
    forwards again. The sockets are only ever touched by the proxy's thread: a
    close from another thread would not wake, or RST, a socket blocked in recv.
    """

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.routed: list[tuple[str, int]] = []
        self.accepted = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.address: tuple[str, int] = self._listener.getsockname()[:2]
        self._blackholed = False
        self._reset = threading.Event()
        self._reset_done = threading.Event()
        self._closing = False
        self._thread = threading.Thread(target=self._serve, name="test proxy", daemon=True)
        self._thread.start()

    # the kit's seam: called by make_shared_store in this (the parent) process
    def route(self, host: str, port: int) -> tuple[str, int]:
        self.routed.append((host, port))
        return self.address

    def reset(self) -> None:
        self._reset_done.clear()
        self._reset.set()
        assert self._reset_done.wait(5), "the proxy did not reset its connections"

    def blackhole(self) -> None:
        self._blackholed = True

    def heal(self) -> None:
        self._blackholed = False

    def close(self) -> None:
        self._closing = True
        self._thread.join(5)

    def _serve(self) -> None:
        sel = selectors.DefaultSelector()
        sel.register(self._listener, selectors.EVENT_READ)
        peer: dict[socket.socket, socket.socket] = {}

        def drop(sock: socket.socket, *, rst: bool) -> None:
            for s in (sock, peer.pop(sock, None)):
                if s is None:
                    continue
                peer.pop(s, None)
                sel.unregister(s)
                if rst:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                s.close()

        while not self._closing:
            if self._reset.is_set():
                for sock in list(peer):
                    if sock in peer:
                        drop(sock, rst=True)
                self._reset.clear()
                self._reset_done.set()
            for key, _ in sel.select(0.02):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                if sock is self._listener:
                    client, _ = sock.accept()
                    upstream = socket.create_connection(self.target, timeout=5)
                    upstream.settimeout(None)
                    peer[client], peer[upstream] = upstream, client
                    sel.register(client, selectors.EVENT_READ)
                    sel.register(upstream, selectors.EVENT_READ)
                    self.accepted += 1
                    continue
                if sock not in peer:
                    continue  # dropped earlier in this round
                try:
                    data = sock.recv(65536)
                except OSError:
                    data = b""
                if not data:
                    drop(sock, rst=False)
                elif not self._blackholed:
                    try:
                        peer[sock].sendall(data)
                    except OSError:
                        drop(sock, rst=False)
        for sock in list(peer):
            if sock in peer:
                drop(sock, rst=False)
        sel.close()
        self._listener.close()


class _NoRoute:
    """A seam that must not be used: the factory has to refuse the DSN first."""

    def route(self, host: str, port: int) -> tuple[str, int]:
        pytest.fail(f"route({host!r}, {port}) called for a DSN without a TCP host")


def _until_success(call: Callable[[], Any]) -> float:
    """Seconds until ``call()`` first succeeds (StoreError is retried); fail past HEAL_BOUND."""
    start = time.monotonic()
    errors: list[str] = []
    while True:
        try:
            call()
            return time.monotonic() - start
        except StoreError as exc:
            errors.append(str(exc))
        if time.monotonic() - start > HEAL_BOUND:
            pytest.fail(f"no call succeeded within {HEAL_BOUND:g} s of healing: {errors[-3:]}")
        time.sleep(0.1)


@contextlib.contextmanager
def _shared(
    module: Any, env: str, dsn: str, monkeypatch: pytest.MonkeyPatch, target: tuple[str, int]
) -> Iterator[tuple[_Proxy, Callable[[], Any]]]:
    """make_shared_store(network=proxy); checks that set-up and teardown bypassed the proxy."""
    monkeypatch.setenv(env, dsn)
    proxy = _Proxy(target)
    try:
        gen = module.make_shared_store(network=proxy)
        opener = next(gen)
        try:
            assert proxy.routed == [target], proxy.routed
            assert proxy.accepted == 0, "install_schema went through the proxy"
            yield proxy, opener
        finally:
            proxy.heal()
            before = proxy.accepted
            gen.close()  # drop_schema
            assert proxy.accepted == before, "drop_schema went through the proxy"
    finally:
        proxy.close()


def _check_seam(proxy: _Proxy, opener: Callable[[], Any]) -> None:
    """(i), (ii) and (iii) on the stores ``opener`` makes (one with call_timeout=2)."""
    # (i) the opener's store talks through the proxy.
    store = opener()
    try:
        assert proxy.accepted >= 1, "the opener's store did not connect through the proxy"
        store.create(snapshot("t-seam"))
        seen = proxy.accepted

        # (ii) every connection reset: the store heals.
        proxy.reset()
        with contextlib.suppress(StoreError):
            store.get("t-seam")
        _until_success(lambda: store.get("t-seam"))
        assert store.get("t-seam") is not None
        assert proxy.accepted > seen, "the store did not reconnect after the reset"
    finally:
        store.close()

    # (iii) a blackhole: the call ends by the client-side timeout; then it heals.
    bounded = functools.partial(opener.func, *opener.args, **{  # type: ignore[attr-defined]
        **opener.keywords, "call_timeout": CALL_TIMEOUT  # type: ignore[attr-defined]
    })
    store = bounded()
    try:
        assert store.get("t-seam") is not None
        proxy.blackhole()
        start = time.monotonic()
        with pytest.raises(StoreError, match=f"client-side timeout of {CALL_TIMEOUT:g} s"):
            store.get("t-seam")
        took = time.monotonic() - start
        assert took < CALL_TIMEOUT + SLACK, f"a blackholed call took {took:.1f} s"
        proxy.heal()
        _until_success(lambda: store.get("t-seam"))
        assert store.get("t-seam") is not None
    finally:
        proxy.heal()
        store.close()


@pytest.mark.postgres
def test_postgres_network_seam(postgres_dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from psycopg.conninfo import conninfo_to_dict

    from reference_stores import postgres as pgstore

    params = conninfo_to_dict(postgres_dsn)
    target = (str(params.get("host") or "127.0.0.1"), int(params.get("port") or 5432))
    with _shared(pgstore, pgstore.DSN_ENV, postgres_dsn, monkeypatch, target) as (proxy, opener):
        _check_seam(proxy, opener)


@pytest.mark.postgres
def test_postgres_network_seam_refuses_a_unix_socket(
    postgres_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from reference_stores import postgres as pgstore

    monkeypatch.delenv("PGHOST", raising=False)
    monkeypatch.delenv("PGHOSTADDR", raising=False)
    monkeypatch.setenv(pgstore.DSN_ENV, f"dbname=test_{uuid.uuid4().hex[:8]}")
    with (
        contextlib.closing(pgstore.make_shared_store(network=_NoRoute())) as gen,
        pytest.raises(StoreError, match="needs a single TCP host"),
    ):
        next(gen)


@pytest.mark.mariadb
def test_mariadb_network_seam(mariadb_dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from reference_stores import mariadb as mstore
    from reference_stores.mariadb_schema import parse_dsn

    params = parse_dsn(mariadb_dsn)
    target = (params.host, params.port)
    with _shared(mstore, mstore.DSN_ENV, mariadb_dsn, monkeypatch, target) as (proxy, opener):
        _check_seam(proxy, opener)


@pytest.mark.mariadb
def test_mariadb_network_seam_refuses_a_unix_socket(
    mariadb_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from reference_stores import mariadb as mstore

    monkeypatch.setenv(mstore.DSN_ENV, "mysql://root@localhost/test?unix_socket=/run/x.sock")
    with (
        contextlib.closing(mstore.make_shared_store(network=_NoRoute())) as gen,
        pytest.raises(StoreError, match="needs a TCP host"),
    ):
        next(gen)
