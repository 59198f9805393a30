"""FaultProxy forwards faithfully and injects Toxiproxy's faults when told, from any thread.

Upstream is a small threaded echo server on 127.0.0.1. Every wait is bounded by a
generous ``WAIT`` and ends on an event (bytes arrive, the peer closes, a counter
moves); the only timed reads check that nothing arrives while a fault holds data
back. The last test drives psycopg through the proxy when a Postgres server is
configured (``CHONGMING_TEST_POSTGRES``; required in CI, see tests/conftest.py).
"""

from __future__ import annotations

import random
import socket
import socketserver
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from chongming_conformance.faults.proxy import ChunkSeen, Decision, FaultProxy, Interceptor
from chongming_conformance.faults.toxics import Latency, LimitData, ResetPeer, Timeout

WAIT = 10.0  # bound on any wait; never a speed target
QUIET = 0.4  # how long "nothing arrives" is watched


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        sock: socket.socket = self.request
        try:
            while data := sock.recv(65536):
                sock.sendall(data)
        except OSError:
            pass  # a reset from the proxy: the test is about the client side


class _EchoServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


@pytest.fixture
def echo() -> Iterator[tuple[str, int]]:
    server = _EchoServer(("127.0.0.1", 0), _Echo)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    try:
        host, port = server.server_address[:2]
        yield str(host), int(port)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(WAIT)


@pytest.fixture
def proxy(echo: tuple[str, int]) -> Iterator[FaultProxy]:
    with FaultProxy(echo, name="test-proxy", seed=7) as p:
        yield p


def _connect(proxy: FaultProxy) -> socket.socket:
    sock = socket.create_connection(proxy.address, timeout=WAIT)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < n:
        chunk = sock.recv(n - len(chunks))
        if not chunk:
            raise AssertionError(f"EOF after {len(chunks)} of {n} bytes")
        chunks += chunk
    return bytes(chunks)


def _round_trip(sock: socket.socket, payload: bytes = b"ping") -> float:
    start = time.monotonic()
    sock.sendall(payload)
    assert _recv_exact(sock, len(payload)) == payload
    return time.monotonic() - start


def _read_to_end(sock: socket.socket) -> tuple[bytes, str]:
    """Everything until the connection ends, and how it ended: ``"eof"`` or ``"reset"``."""
    got = bytearray()
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return bytes(got), "reset"
        if not chunk:
            return bytes(got), "eof"
        got += chunk


def _assert_reset(sock: socket.socket) -> None:
    """The peer reset the connection: the next operation raises ECONNRESET, not a clean EOF."""
    with pytest.raises(ConnectionResetError):
        sock.sendall(b"x")
        sock.recv(1)


def _assert_turned_away(proxy: FaultProxy) -> None:
    """A new connection is reset: at once, or (when the RST wins the race) during connect."""
    try:
        sock = socket.create_connection(proxy.address, timeout=WAIT)
    except (ConnectionResetError, ConnectionRefusedError):
        return
    with sock:
        _assert_reset(sock)


def _assert_silent(sock: socket.socket) -> None:
    sock.settimeout(QUIET)
    try:
        with pytest.raises(TimeoutError):
            sock.recv(1)
    finally:
        sock.settimeout(WAIT)


def _wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {WAIT:g} s waiting for {what}")
        time.sleep(0.01)


def test_forwards_a_megabyte_both_ways_unchanged(proxy: FaultProxy) -> None:
    payload = random.Random(1).randbytes(1 << 20)
    with _connect(proxy) as sock:
        sender = threading.Thread(target=sock.sendall, args=(payload,))
        sender.start()
        echoed = _recv_exact(sock, len(payload))
        sender.join(WAIT)
        assert echoed == payload
    stats = proxy.stats()
    assert stats["bytes_up"] == stats["bytes_down"] == len(payload)
    assert stats["accepted"] == 1 and stats["resets"] == 0


def test_half_close_passes_eof_on(proxy: FaultProxy) -> None:
    with _connect(proxy) as sock:
        sock.sendall(b"last words")
        sock.shutdown(socket.SHUT_WR)
        assert _read_to_end(sock) == (b"last words", "eof")
    _wait_until(lambda: proxy.connections() == [], "the closed connection to be forgotten")


def test_latency_delays_the_round_trip(proxy: FaultProxy) -> None:
    with _connect(proxy) as sock:
        plain = min(_round_trip(sock) for _ in range(3))
        proxy.add_toxic("slow", Latency(200), direction="downstream")
        slowed = _round_trip(sock)
        proxy.remove_toxic("slow")
        healed = min(_round_trip(sock) for _ in range(3))
    assert slowed >= 0.2
    assert plain < 0.1 and healed < 0.1, (plain, healed)


def test_latency_keeps_order_under_jitter(proxy: FaultProxy) -> None:
    proxy.add_toxic("jitter", Latency(20, jitter_ms=20), direction="upstream")
    with _connect(proxy) as sock:
        sent = b"".join(i.to_bytes(2, "big") for i in range(200))
        for i in range(0, len(sent), 8):
            sock.sendall(sent[i:i + 8])
        assert _recv_exact(sock, len(sent)) == sent


def test_timeout_zero_blackholes_until_removed_and_the_dropped_data_stays_lost(
        proxy: FaultProxy) -> None:
    with _connect(proxy) as sock:
        _round_trip(sock)
        proxy.add_toxic("blackhole", Timeout(), direction="upstream")
        sock.sendall(b"lost")
        _assert_silent(sock)
        _wait_until(lambda: proxy.stats()["dropped_up"] == 4, "the proxy to drop 4 bytes")
        proxy.remove_toxic("blackhole")
        # Order is kept, so had "lost" been held rather than dropped it would come first.
        _round_trip(sock, b"found")
        _assert_silent(sock)


def test_timeout_closes_the_connection_after_its_time(proxy: FaultProxy) -> None:
    proxy.add_toxic("timeout", Timeout(300), direction="downstream")
    start = time.monotonic()
    with _connect(proxy) as sock:
        sock.sendall(b"never answered")
        got, how = _read_to_end(sock)
    elapsed = time.monotonic() - start
    assert (got, how) == (b"", "eof")
    assert 0.25 <= elapsed < 5.0, elapsed


def test_reset_peer_resets_at_once(proxy: FaultProxy) -> None:
    with _connect(proxy) as sock:
        _round_trip(sock)
        proxy.add_toxic("rst", ResetPeer())
        _assert_reset(sock)
    assert proxy.stats()["resets"] == 1
    assert proxy.connections() == []


def test_reset_peer_after_a_timeout_fires_on_an_idle_connection(proxy: FaultProxy) -> None:
    proxy.add_toxic("rst", ResetPeer(timeout_ms=200), direction="upstream")
    start = time.monotonic()
    with _connect(proxy) as sock:
        with pytest.raises(ConnectionResetError):
            sock.recv(1)  # nothing sent: the clock runs anyway
        assert time.monotonic() - start >= 0.15


def test_reset_one_connection_then_all(proxy: FaultProxy) -> None:
    a, b = _connect(proxy), _connect(proxy)
    with a, b:
        _round_trip(a)
        _round_trip(b)
        assert proxy.connections() == [1, 2]
        assert proxy.reset(connection=1) == 1
        _assert_reset(a)
        _round_trip(b)
        assert proxy.reset(connection=1) == 0  # gone
        with _connect(proxy) as c:
            _round_trip(c)
            assert proxy.connections() == [2, 3]
            assert proxy.reset() == 2
            _assert_reset(b)
            _assert_reset(c)
    assert proxy.connections() == []
    assert proxy.stats()["resets"] == 3


def test_limit_data_cuts_the_reply_after_exactly_that_many_bytes(proxy: FaultProxy) -> None:
    with _connect(proxy) as sock:
        _round_trip(sock)
        proxy.add_toxic("cut", LimitData(10), direction="downstream")
        sock.sendall(bytes(range(100)))
        got, _how = _read_to_end(sock)
    assert got == bytes(range(10))
    assert proxy.connections() == []


def test_per_connection_toxic_stays_on_its_connection_and_a_global_one_reaches_later_ones(
        proxy: FaultProxy) -> None:
    a, b = _connect(proxy), _connect(proxy)
    with a, b:
        _round_trip(a)
        _round_trip(b)
        proxy.add_toxic("only-a", ResetPeer(), connection=1)
        _assert_reset(a)
        _round_trip(b)
        proxy.add_toxic("only-a-again", Latency(100), connection=1)  # gone: ignored
        with _connect(proxy) as c:
            _round_trip(c)
        _round_trip(b)
        proxy.add_toxic("everyone", LimitData(3), direction="downstream")
        with _connect(proxy) as d:
            d.sendall(b"abcdef")
            assert _read_to_end(d)[0] == b"abc"
        b.sendall(b"uvwxyz")
        assert _read_to_end(b)[0] == b"uvw"  # b was live: 3 more bytes there too
    # a per-connection toxic ends with its connection: the name is free again
    proxy.add_toxic("only-a", Latency(1))


def test_down_resets_everyone_and_refuses_until_up(proxy: FaultProxy) -> None:
    with _connect(proxy) as a:
        _round_trip(a)
        proxy.down()
        _assert_reset(a)
    _assert_turned_away(proxy)
    proxy.up()
    with _connect(proxy) as fine:
        _round_trip(fine)
    stats = proxy.stats()
    assert stats["accepted"] == 3 and stats["resets"] == 2


def test_failed_upstream_connect_resets_the_client() -> None:
    with socket.socket() as placeholder:
        placeholder.bind(("127.0.0.1", 0))
        port = placeholder.getsockname()[1]
    with FaultProxy(("127.0.0.1", port)) as proxy:
        _assert_turned_away(proxy)
        assert proxy.stats()["resets"] == 1


def test_methods_from_other_threads_and_stop_is_idempotent(echo: tuple[str, int]) -> None:
    proxy = FaultProxy(echo, name="threads")
    address = proxy.start()
    assert proxy.address == address
    errors: list[BaseException] = []

    def nemesis(worker: int) -> None:
        try:
            for i in range(20):
                proxy.add_toxic(f"w{worker}-{i}", Latency(1), direction="upstream")
                proxy.connections()
                proxy.remove_toxic(f"w{worker}-{i}")
            proxy.reset(connection=99)
        except BaseException as exc:  # reported below
            errors.append(exc)

    with _connect(proxy) as sock:
        _round_trip(sock)
        threads = [threading.Thread(target=nemesis, args=(w,)) for w in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(WAIT)
        assert errors == []
        _round_trip(sock)
    proxy.stop()
    proxy.stop()
    assert not [t for t in threading.enumerate() if t.name.startswith("fault-proxy threads")]
    assert proxy.stats()["accepted"] == 1
    with pytest.raises(RuntimeError, match="threads"):
        proxy.add_toxic("late", Latency(1))
    with pytest.raises(RuntimeError):
        proxy.start()


def test_stop_does_not_hang_on_a_peer_that_never_reads(proxy: FaultProxy) -> None:
    with _connect(proxy) as sock:
        sock.setblocking(False)
        with pytest.raises(BlockingIOError):  # the echo comes back and is never read
            for _ in range(100_000):
                sock.send(b"x" * 65536)
        start = time.monotonic()
        proxy.stop()
        assert time.monotonic() - start < 2.0


def test_toxics_validate_their_arguments(proxy: FaultProxy) -> None:
    with pytest.raises(ValueError, match="latency_ms must be a finite number >= 0"):
        Latency(-1)
    with pytest.raises(ValueError, match="jitter_ms"):
        Latency(10, jitter_ms=float("nan"))
    with pytest.raises(ValueError, match="timeout_ms"):
        Timeout(-5)
    with pytest.raises(ValueError, match="timeout_ms"):
        ResetPeer(-0.5)
    with pytest.raises(ValueError, match="bytes must be >= 0"):
        LimitData(-1)
    with pytest.raises(ValueError, match="bytes must be an int"):
        LimitData(1.5)  # type: ignore[arg-type]
    proxy.add_toxic("slow", Latency(1))
    with pytest.raises(ValueError, match="'slow' is already in use"):
        proxy.add_toxic("slow", Timeout())
    with pytest.raises(ValueError, match="direction"):
        proxy.add_toxic("sideways", Latency(1), direction="sideways")  # type: ignore[arg-type]
    assert Latency(300, 100).describe() == "latency 300±100 ms"
    assert LimitData(10).describe() == "limit data to 10 bytes"


@pytest.mark.postgres
def test_psycopg_through_the_proxy_fails_on_a_reset(postgres_dsn: str) -> None:
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    params = conninfo_to_dict(postgres_dsn)
    host = str(params.get("hostaddr") or params.get("host") or "127.0.0.1")
    assert not host.startswith("/"), f"the proxy needs a TCP DSN, not a socket path: {host}"
    port = int(str(params.get("port") or 5432))
    with FaultProxy((host, port), name="postgres") as proxy:
        phost, pport = proxy.address
        via = make_conninfo(postgres_dsn, host=phost, hostaddr=phost, port=str(pport))
        with psycopg.connect(via, connect_timeout=10, autocommit=True) as conn:
            assert conn.execute("select 1").fetchone() == (1,)
            assert proxy.reset() == 1
            with pytest.raises(psycopg.OperationalError):
                conn.execute("select 1")


class _HoldFirst(Interceptor):
    """Holds the first request of every connection back for a long time (the aim's freeze)."""

    def __init__(self) -> None:
        self.held = 0

    def on_chunk(self, chunk: ChunkSeen) -> Decision:
        if chunk.direction == "upstream" and self.held == 0:
            self.held += 1
            return 60.0
        return None


def test_release_sends_at_once_what_a_hold_keeps_back_in_order(proxy: FaultProxy) -> None:
    """A frozen request goes on when the aim says so, long before its hold would end, and
    what the client sent after it still comes after it."""
    proxy.set_interceptor(_HoldFirst())
    with _connect(proxy) as sock:
        sock.sendall(b"first")
        _assert_silent(sock)
        sock.sendall(b"second")
        _assert_silent(sock)
        [conn] = proxy.connections()
        assert proxy.release(conn) is True
        assert _recv_exact(sock, len(b"firstsecond")) == b"firstsecond"
        _round_trip(sock)  # and the connection carries on as usual
    _wait_until(lambda: not proxy.connections(), "the connection to close")
    assert proxy.release(conn) is False  # gone: nothing to release
