"""A TCP fault proxy modelled on Toxiproxy: pure asyncio, in a daemon thread, standard library only.

Why our own proxy: Toxiproxy itself is a Go server (not installable with pip,
not available here), and the maintained Python option, ``faulty`` (0.2.1, alpha),
does not fit: it pulls in ``rich`` and ``typer``, has no TCP reset at all (no
``SO_LINGER`` RST, no ``reset_peer``, no ``timeout`` or ``limit_data``), applies
rules to every connection with no per-connection faults and no connection list,
cannot remove one rule by name, is not safe to drive from another thread, draws
from the global ``random``, closes a direction on EOF instead of half-closing,
and leaves the other direction running when one ends. The part we need is a
few hundred lines of asyncio we can type, test and keep deterministic, so the
kit owns it.

:class:`FaultProxy` listens on an ephemeral port and forwards every accepted
connection to one upstream address, applying the toxics of
:mod:`chongming_conformance.faults.toxics` per direction (``"upstream"``: client to
server; ``"downstream"``: server to client), chained in the order added, as
Toxiproxy does. The event loop runs in a daemon thread; every public method may
be called from any other thread, runs its work on the loop and returns once the
effect is in place (a reset has been sent, a toxic applies to the next chunk
read). Beyond the toxics:

* a peer's EOF is passed on as EOF (half-close); a connection is closed once
  both directions ended;
* a reset (:meth:`FaultProxy.reset`, :meth:`FaultProxy.down`,
  :class:`~chongming_conformance.faults.toxics.ResetPeer`) closes both sockets
  with ``SO_LINGER(1, 0)``: each peer sees a TCP RST (``ECONNRESET``);
* an error on one side (a peer's own reset, a failed upstream connect) resets
  the whole connection, so the other peer sees it too;
* an error in one connection never touches another; the proxy logs only at
  debug level (``logging.getLogger(__name__)``), asyncio's own reports included.

Over the kit's 600-line limit (tests/test_module_size.py): one class over state every
connection shares (the toxics, the holds, the request log the aim reads); a split is
pending.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import logging
import random
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal, Self, TypeVar

from .toxics import Direction, Latency, LimitData, ResetPeer, Timeout, Toxic

__all__ = ["CALL_TIMEOUT", "ChunkSeen", "FaultProxy", "Interceptor"]

log = logging.getLogger(__name__)

CALL_TIMEOUT = 10.0
"""Seconds a public method waits for the event loop before raising ``RuntimeError``."""

CONNECT_TIMEOUT = 10.0
"""Seconds the upstream connect of one accepted client may take before the client is reset."""

READ_SIZE = 65536
BUSY_SECONDS = 0.1
"""How recent a request must be for its connection to count as busy (a call in flight)."""
MAX_DELAYED = 4 * 1024 * 1024
"""Bytes a direction may hold back for latency before it stops reading until they are sent."""

STAT_KEYS = (
    "accepted", "resets", "bytes_up", "bytes_down", "dropped_up", "dropped_down", "live",
)
DIRECTIONS: tuple[Direction, ...] = ("upstream", "downstream")
TOXIC_TYPES = (Latency, Timeout, ResetPeer, LimitData)

_LINGER_RST = struct.pack("ii", 1, 0)
_RESOLUTION = time.get_clock_info("monotonic").resolution

_T = TypeVar("_T")
_Close = Literal["fin", "rst", "abort"]


@dataclass(frozen=True, slots=True)
class ChunkSeen:
    """What an :class:`Interceptor` is shown of a chunk: which connection of which proxy
    (``peer`` is the client's address, ``listening`` the proxy's), the direction and the
    size. The bytes themselves are never shown: the kit knows no wire protocol."""

    proxy: str
    connection: int
    peer: tuple[str, int] | None
    listening: tuple[str, int]
    direction: Direction
    size: int


#: What an interceptor decides for one chunk: ``None`` forward it as usual (through the
#: toxics); ``"drop"`` drop it and close the connection (FIN); ``"reset"`` drop it and
#: reset the connection (RST); ``"stall"`` drop it and everything after it, both ways,
#: until the toxics are cleared (a blackhole on that connection alone); a float: hold it
#: back that many seconds more (latency on this chunk alone).
Decision = Literal["drop", "reset", "stall"] | float | None


class Interceptor:
    """A hook the proxy asks about every chunk before its toxics apply (the nemesis's
    aim, ``faults.aim``). It runs on the proxy's event loop thread: it must be quick and
    never block. The default forwards everything."""

    def on_chunk(self, chunk: ChunkSeen) -> Decision:
        return None

    def on_close(self, proxy: str, connection: int) -> None:
        """Connection ``connection`` of ``proxy`` is gone (closed or reset)."""


def _rst(writer: asyncio.StreamWriter) -> None:
    """Close at once with ``SO_LINGER(1, 0)``: the kernel sends RST, unsent data is discarded."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RST)
    writer.transport.abort()


@dataclass(slots=True)
class _Entry:
    """A toxic as added: where it applies."""

    name: str
    toxic: Toxic
    direction: Direction
    connection: int | None


@dataclass(slots=True)
class _Applied:
    """A toxic's state on one connection."""

    entry: _Entry
    forwarded: int = 0
    timer: asyncio.TimerHandle | None = None


class _Lane:
    """One direction of a connection: what latency holds back, in order, until its deadline."""

    def __init__(self, proxy: FaultProxy, conn: _Conn, direction: Direction) -> None:
        self.proxy = proxy
        self.conn = conn
        self.direction = direction
        self.pending: deque[tuple[float, bytes]] = deque()
        self.pending_bytes = 0
        self.last_deadline = 0.0
        self.handle: asyncio.TimerHandle | None = None
        self.idle = asyncio.Event()
        self.idle.set()

    @property
    def writer(self) -> asyncio.StreamWriter | None:
        return self.conn.server if self.direction == "upstream" else self.conn.client

    def send(self, data: bytes, deadline: float) -> None:
        loop = asyncio.get_running_loop()
        if not self.pending and deadline <= loop.time():
            self._write(data)
            return
        deadline = max(deadline, self.last_deadline)
        self.last_deadline = deadline
        self.pending.append((deadline, data))
        self.pending_bytes += len(data)
        self.idle.clear()
        if self.handle is None:
            self.handle = loop.call_at(self.pending[0][0], self._flush)

    def _flush(self) -> None:
        self.handle = None
        loop = asyncio.get_running_loop()
        now = loop.time() + _RESOLUTION
        while self.pending and self.pending[0][0] <= now:
            _, data = self.pending.popleft()
            self.pending_bytes -= len(data)
            self._write(data)
        if self.pending:
            self.handle = loop.call_at(self.pending[0][0], self._flush)
        else:
            self.idle.set()

    def _write(self, data: bytes) -> None:
        writer = self.writer
        if self.conn.closed or writer is None or writer.transport.is_closing():
            self.proxy._count_dropped(self.direction, len(data))
            return
        writer.write(data)
        self.proxy._stats["bytes_up" if self.direction == "upstream" else "bytes_down"] += len(data)

    def hurry(self) -> None:
        """Everything held back is due now (in order)."""
        if not self.pending:
            return
        now = asyncio.get_running_loop().time()
        self.pending = deque((now, data) for _, data in self.pending)
        self.last_deadline = now
        if self.handle is not None:
            self.handle.cancel()
        self._flush()

    def discard(self) -> None:
        if self.handle is not None:
            self.handle.cancel()
            self.handle = None
        self.proxy._count_dropped(self.direction, self.pending_bytes)
        self.pending.clear()
        self.pending_bytes = 0
        self.idle.set()


class _Conn:
    """One proxied client connection and its upstream connection."""

    def __init__(self, proxy: FaultProxy, ident: int, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        self.id = ident
        self.client_reader = reader
        self.client = writer
        self.server_reader: asyncio.StreamReader | None = None
        self.server: asyncio.StreamWriter | None = None
        self.applied: dict[str, _Applied] = {}
        self.lanes = {d: _Lane(proxy, self, d) for d in DIRECTIONS}
        self.tasks: list[asyncio.Task[None]] = []
        self.closed = False
        self.how: _Close | None = None
        #: When the last chunk arrived from the client, and from the server (loop time): a
        #: request is outstanding while the first is the later one (``busy``).
        self.last_up = 0.0
        self.last_down = 0.0
        #: The client sent EOF (it is closing the connection: nothing more to answer).
        self.up_eof = False
        #: The client's address (the peer of the accepted socket), if the OS told it.
        peer = writer.get_extra_info("peername")
        self.peer: tuple[str, int] | None = (
            (str(peer[0]), int(peer[1])) if isinstance(peer, tuple) and len(peer) >= 2 else None)

    def busy(self, now: float) -> bool:
        """A request went up less than :data:`BUSY_SECONDS` ago and no reply has started
        coming down since (a client that said goodbye, or went quiet long ago, is not
        waiting for an answer the way a call in flight is)."""
        return (not self.up_eof and self.last_up > self.last_down
                and now - self.last_up < BUSY_SECONDS)

    def writers(self) -> list[asyncio.StreamWriter]:
        return [w for w in (self.client, self.server) if w is not None]


class FaultProxy:
    """A TCP proxy in front of ``upstream`` that injects Toxiproxy-style faults on demand.

    ``start()`` binds an ephemeral port on ``listen_host`` and returns the
    address clients connect to instead of ``upstream``; ``stop()`` (idempotent)
    closes everything. Connections get ids 1, 2, 3... in accept order.
    ``seed`` makes the latency jitter draws repeatable.
    """

    def __init__(self, upstream: tuple[str, int], *, listen_host: str = "127.0.0.1",
                 name: str | None = None, seed: int = 0) -> None:
        host, port = upstream
        if not isinstance(host, str) or not host:
            raise ValueError(f"FaultProxy: upstream host must be a non-empty str, not {host!r}")
        if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
            raise ValueError(f"FaultProxy: upstream port must be an int in 1..65535, not {port!r}")
        self.upstream = (host, port)
        self.name = name if name is not None else f"{host}:{port}"
        self.listen_host = listen_host
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._state: Literal["new", "running", "stopping", "stopped"] = "new"
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._address: tuple[str, int] | None = None
        # Everything below is touched only on the loop thread while the proxy runs.
        self._toxics: dict[str, _Entry] = {}
        self._live: dict[int, _Conn] = {}
        self._closing: set[_Conn] = set()
        self._background: set[asyncio.Task[None]] = set()
        self._handlers: set[asyncio.Task[Any]] = set()
        self._ids = itertools.count(1)
        self._down = False
        self._stats: dict[str, int] = dict.fromkeys(STAT_KEYS, 0)
        self._interceptor: Interceptor | None = None

    def __repr__(self) -> str:
        where = f"{self._address[0]}:{self._address[1]}" if self._address else "unbound"
        return (f"<FaultProxy {self.name!r} {where} -> {self.upstream[0]}:{self.upstream[1]}"
                f" {self._state}>")

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> tuple[str, int]:
        """Bind an ephemeral port, run the loop in a daemon thread; the listening address."""
        with self._lock:
            if self._state != "new":
                raise RuntimeError(f"fault proxy {self.name!r} was already started ({self._state});"
                                   f" a proxy starts once")
            loop = asyncio.new_event_loop()
            loop.set_exception_handler(self._quiet)
            thread = threading.Thread(target=self._run_loop, args=(loop,),
                                      name=f"fault-proxy {self.name}", daemon=True)
            thread.start()
            self._loop, self._thread = loop, thread
            future = asyncio.run_coroutine_threadsafe(self._open(), loop)
            try:
                self._address = future.result(timeout=CALL_TIMEOUT)
            except BaseException:
                future.cancel()
                loop.call_soon_threadsafe(loop.stop)
                thread.join(CALL_TIMEOUT)
                self._state = "stopped"
                raise
            self._state = "running"
            log.debug("fault proxy %s: %s:%d -> %s:%d", self.name, *self._address, *self.upstream)
            return self._address

    @property
    def address(self) -> tuple[str, int]:
        """The address clients connect to (``start()`` must have been called)."""
        if self._address is None:
            raise RuntimeError(f"fault proxy {self.name!r} has no address: call start() first")
        return self._address

    def stop(self) -> None:
        """Close the listener and every connection, stop the loop, join the thread (idempotent)."""
        with self._lock:
            if self._state in ("new", "stopped"):
                self._state = "stopped"
                return
            self._state = "stopping"
            loop, thread = self._loop, self._thread
            assert loop is not None and thread is not None
            if thread.is_alive():
                future = asyncio.run_coroutine_threadsafe(self._shutdown(), loop)
                try:
                    future.result(timeout=CALL_TIMEOUT)
                except Exception as exc:  # a stuck loop must not make stop() hang or raise
                    future.cancel()
                    log.debug("fault proxy %s: shutdown: %r", self.name, exc)
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(loop.stop)
                thread.join(CALL_TIMEOUT)
                if thread.is_alive():
                    log.debug("fault proxy %s: loop thread still alive after stop", self.name)
            self._state = "stopped"

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # -- faults --------------------------------------------------------------------------------

    def add_toxic(self, name: str, toxic: Toxic, *, direction: Direction = "downstream",
                  connection: int | None = None) -> None:
        """Apply ``toxic`` to ``direction``: of every live and later connection, or of one.

        ``connection=None``: every live connection and every one accepted later,
        until removed. An int: only that live connection (nothing happens when it
        is gone; the toxic ends with it). A name already in use: ``ValueError``.
        """
        if not isinstance(name, str) or not name:
            raise ValueError(f"fault proxy {self.name!r}: a toxic name must be a non-empty str, "
                             f"not {name!r}")
        if not isinstance(toxic, TOXIC_TYPES):
            raise TypeError(f"fault proxy {self.name!r}: {toxic!r} is not a toxic "
                            f"(Latency, Timeout, ResetPeer or LimitData)")
        if direction not in DIRECTIONS:
            raise ValueError(f"fault proxy {self.name!r}: direction must be 'upstream' or "
                             f"'downstream', not {direction!r}")
        if connection is not None and (isinstance(connection, bool)
                                       or not isinstance(connection, int)):
            raise ValueError(f"fault proxy {self.name!r}: connection must be an int id or None, "
                             f"not {connection!r}")
        entry = _Entry(name, toxic, direction, connection)
        self._call(lambda: self._add(entry))

    def set_interceptor(self, interceptor: Interceptor | None) -> None:
        """Ask ``interceptor`` about every chunk from now on (None: stop asking)."""
        self._interceptor = interceptor

    def remove_toxic(self, name: str) -> None:
        """Stop applying the toxic ``name`` (an unknown name: nothing happens)."""
        self._call(lambda: self._remove([name]))

    def clear_toxics(self) -> None:
        """Remove every toxic."""
        self._call(lambda: self._remove(None))

    def connections(self) -> list[int]:
        """Ids of the live connections, ascending."""
        if self._state == "stopped":
            return []
        return self._call(self._connections)

    def busy_connections(self) -> list[int]:
        """Ids of the live connections with a request outstanding: data went up and no reply
        has started coming down since. A fault aimed at one of them lands on a call in
        flight -- between its request and its reply, after the server may have committed."""
        if self._state == "stopped":
            return []
        return self._call(self._busy)

    def reset(self, connection: int | None = None) -> int:
        """Reset (RST) one live connection, or every one when None; how many were reset."""
        return self._call(lambda: self._reset(connection))

    def release(self, connection: int) -> bool:
        """Send at once what an interceptor's hold (or latency) keeps back on ``connection``,
        both ways -- the end of a freeze the aim holds open until the readers are done;
        False when the connection is gone."""
        return self._call(lambda: self._release(connection))

    def down(self) -> None:
        """Toxiproxy's "disable": reset every live connection; reset new ones on accept."""
        self._call(lambda: self._set_down(True))

    def up(self) -> None:
        """Accept and proxy new connections again after :meth:`down`."""
        self._call(lambda: self._set_down(False))

    def stats(self) -> dict[str, int]:
        """Counters: accepted, resets, bytes_up, bytes_down, dropped_up, dropped_down, live.

        ``accepted`` counts every accepted TCP connection (those reset while the
        proxy is down included); ``resets`` every connection the proxy closed with
        RST; ``bytes_*`` the bytes forwarded; ``dropped_*`` the bytes read and never
        forwarded (toxics, and data cut off by a close); ``live`` the open
        connections. After ``stop()``: the final counts.
        """
        if self._state in ("new", "stopped"):
            return {**self._stats, "live": 0}
        return self._call(self._snapshot)

    # -- the thread boundary -------------------------------------------------------------------

    def _call(self, make: Callable[[], Coroutine[Any, Any, _T]]) -> _T:
        """Run ``make()`` on the loop, wait (bounded) for its result."""
        loop, thread = self._loop, self._thread
        if (self._state != "running" or loop is None or thread is None or not thread.is_alive()
                or loop.is_closed()):
            raise RuntimeError(f"fault proxy {self.name!r} is not running ({self._state})")
        if threading.current_thread() is thread:
            raise RuntimeError(f"fault proxy {self.name!r}: its methods block on its event loop; "
                               f"call them from another thread, not from the loop's own")
        coro = make()
        try:
            future = asyncio.run_coroutine_threadsafe(coro, loop)
        except RuntimeError:
            coro.close()
            raise RuntimeError(f"fault proxy {self.name!r}: its event loop is closed") from None
        try:
            return future.result(timeout=CALL_TIMEOUT)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise RuntimeError(f"fault proxy {self.name!r}: its event loop did not answer within "
                               f"{CALL_TIMEOUT:g} s") from None
        except concurrent.futures.CancelledError:
            raise RuntimeError(f"fault proxy {self.name!r} stopped during the call") from None

    def _run_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
            tasks = asyncio.all_tasks(loop)
            for task in tasks:
                task.cancel()
            if tasks:
                loop.run_until_complete(asyncio.wait(tasks, timeout=CALL_TIMEOUT))
        except Exception as exc:
            log.debug("fault proxy %s: loop thread: %r", self.name, exc)
        finally:
            loop.close()

    def _quiet(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """asyncio's error reports, at debug level instead of on stderr."""
        log.debug("fault proxy %s: %s", self.name, context.get("message"),
                  exc_info=context.get("exception"))

    # -- on the loop ---------------------------------------------------------------------------

    async def _open(self) -> tuple[str, int]:
        self._server = await asyncio.start_server(self._accept, self.listen_host, 0)
        host, port = self._server.sockets[0].getsockname()[:2]
        return str(host), int(port)

    async def _shutdown(self) -> None:
        current = asyncio.current_task()
        # asyncio's own tasks first: a connection accepted but not yet handed to _accept (which
        # aborts it while stopping), a call from another thread. Cancelled before its first
        # step, an accept would leak its socket; and on Python 3.11 an accept that completes
        # after Server.close() fails an assertion and leaks it too. So the listener is closed
        # in the same step as the last check that no accept is under way.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 1.0
        while loop.time() < deadline:
            mine = self._tasks()
            foreign = [t for t in asyncio.all_tasks() if t is not current and t not in mine]
            if not foreign:
                break
            log.debug("fault proxy %s: stopping: waiting for %d tasks", self.name, len(foreign))
            await asyncio.wait(foreign, timeout=max(deadline - loop.time(), 0.0))
        if self._server is not None:
            self._server.close()
        for conn in [*self._live.values(), *self._closing]:
            self._close(conn, "abort")
        self._closing.clear()
        tasks = [t for t in asyncio.all_tasks() if t is not current]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=CALL_TIMEOUT / 2)

    def _tasks(self) -> set[asyncio.Task[Any]]:
        """The tasks the proxy started: connection handlers, pumps, reapers."""
        pumps = {t for conn in [*self._live.values(), *self._closing] for t in conn.tasks}
        return {*self._handlers, *self._background, *pumps}

    async def _add(self, entry: _Entry) -> None:
        if entry.name in self._toxics:
            held = self._toxics[entry.name]
            raise ValueError(f"fault proxy {self.name!r}: a toxic named {entry.name!r} is already "
                             f"in use ({held.toxic.describe()}, {held.direction})")
        if entry.connection is None:
            targets = list(self._live.values())
        else:
            conn = self._live.get(entry.connection)
            if conn is None or conn.closed:
                return
            targets = [conn]
        self._toxics[entry.name] = entry
        for conn in targets:
            self._attach(conn, entry)
        await self._settle([c for c in targets if c.closed])

    async def _remove(self, names: list[str] | None) -> None:
        for name in list(self._toxics) if names is None else names:
            if self._toxics.pop(name, None) is None:
                continue
            for conn in self._live.values():
                applied = conn.applied.pop(name, None)
                if applied is not None and applied.timer is not None:
                    applied.timer.cancel()

    async def _connections(self) -> list[int]:
        return sorted(self._live)

    async def _busy(self) -> list[int]:
        now = asyncio.get_running_loop().time()
        return sorted(i for i, c in self._live.items() if c.busy(now))

    async def _release(self, connection: int) -> bool:
        conn = self._live.get(connection)
        if conn is None or conn.closed:
            return False
        for lane in conn.lanes.values():
            lane.hurry()
        return True

    async def _reset(self, connection: int | None) -> int:
        if connection is None:
            targets = list(self._live.values())
        else:
            conn = self._live.get(connection)
            targets = [] if conn is None else [conn]
        for conn in targets:
            self._close(conn, "rst")
        await self._settle(targets)
        return len(targets)

    async def _set_down(self, down: bool) -> None:
        self._down = down
        if down:
            await self._reset(None)

    async def _snapshot(self) -> dict[str, int]:
        return {**self._stats, "live": len(self._live)}

    async def _settle(self, conns: list[_Conn]) -> None:
        """Wait until the sockets of connections just reset are closed (bounded)."""
        waits = [asyncio.ensure_future(w.wait_closed())
                 for conn in conns if conn.how != "fin" for w in conn.writers()]
        if waits:
            await asyncio.wait(waits, timeout=CALL_TIMEOUT / 2)
            for wait in waits:
                if wait.done() and not wait.cancelled():
                    wait.exception()  # retrieved: a reset connection's error is expected
                else:
                    wait.cancel()

    def _count_dropped(self, direction: Direction, n: int) -> None:
        self._stats["dropped_up" if direction == "upstream" else "dropped_down"] += n

    def _attach(self, conn: _Conn, entry: _Entry) -> None:
        """Start applying ``entry`` to ``conn``; start its clock if it has one."""
        applied = _Applied(entry)
        conn.applied[entry.name] = applied
        toxic = entry.toxic
        if isinstance(toxic, ResetPeer | Timeout) and (toxic.timeout_ms > 0
                                                       or isinstance(toxic, ResetPeer)):
            if toxic.timeout_ms == 0:
                self._close(conn, "rst")
                return
            loop = asyncio.get_running_loop()
            applied.timer = loop.call_later(toxic.timeout_ms / 1000, self._fire, conn, entry.name)

    def _fire(self, conn: _Conn, name: str) -> None:
        applied = conn.applied.get(name)
        if conn.closed or applied is None:
            return
        applied.timer = None
        how: _Close = "rst" if isinstance(applied.entry.toxic, ResetPeer) else "fin"
        log.debug("fault proxy %s: connection %d: %s (%s)", self.name, conn.id, name,
                  applied.entry.toxic.describe())
        self._close(conn, how)

    def _close(self, conn: _Conn, how: _Close) -> None:
        """Close both sides of ``conn``: ``fin`` flushes then closes, ``rst`` resets, ``abort``
        drops buffered data and closes at once."""
        if conn.closed:
            if how != "fin" and conn.how == "fin":  # stop() while a normal close still flushes
                for writer in conn.writers():
                    writer.transport.abort()
            return
        conn.closed = True
        conn.how = how
        self._live.pop(conn.id, None)
        if self._interceptor is not None:
            try:
                self._interceptor.on_close(self.name, conn.id)
            except Exception as exc:  # an interceptor's bug must not break the proxy
                log.debug("fault proxy %s: interceptor on_close: %r", self.name, exc)
        for applied in conn.applied.values():
            if applied.timer is not None:
                applied.timer.cancel()
        conn.applied.clear()
        for name in [n for n, e in self._toxics.items() if e.connection == conn.id]:
            del self._toxics[name]
        for lane in conn.lanes.values():
            lane.discard()
        current = asyncio.current_task()
        for task in conn.tasks:
            if task is not current:
                task.cancel()
        for writer in conn.writers():
            if how == "rst":
                _rst(writer)
            elif how == "abort":
                writer.transport.abort()
            else:
                writer.close()
        if how == "rst":
            self._stats["resets"] += 1
        elif how == "fin":
            self._closing.add(conn)
            reap = asyncio.ensure_future(self._reap(conn))
            self._background.add(reap)
            reap.add_done_callback(self._background.discard)
        log.debug("fault proxy %s: connection %d closed (%s)", self.name, conn.id, how)

    async def _reap(self, conn: _Conn) -> None:
        """Forget a normally closed connection once its sockets are closed."""
        for writer in conn.writers():
            with contextlib.suppress(Exception):
                await writer.wait_closed()
        self._closing.discard(conn)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._handlers.add(task)
        try:
            await self._serve(reader, writer)
        except Exception as exc:
            log.debug("fault proxy %s: connection handler: %r", self.name, exc)
        except asyncio.CancelledError:
            if self._state == "running":
                raise
            # stop(): end quietly; asyncio would report a cancelled handler as an error
        finally:
            if task is not None:
                self._handlers.discard(task)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._stats["accepted"] += 1
        if self._state != "running":  # stopping
            writer.transport.abort()
            return
        if self._down:
            _rst(writer)
            self._stats["resets"] += 1
            return
        conn = _Conn(self, next(self._ids), reader, writer)
        self._live[conn.id] = conn
        log.debug("fault proxy %s: connection %d accepted", self.name, conn.id)
        for entry in list(self._toxics.values()):
            if entry.connection is None and not conn.closed:
                self._attach(conn, entry)
        if conn.closed:
            return
        try:
            server_reader, server = await asyncio.wait_for(
                asyncio.open_connection(*self.upstream), CONNECT_TIMEOUT)
        except Exception as exc:
            log.debug("fault proxy %s: connection %d: upstream connect failed: %r",
                      self.name, conn.id, exc)
            self._close(conn, "rst")
            return
        if conn.closed:  # reset or closed while connecting: the upstream side goes the same way
            if conn.how == "fin":
                server.close()
            elif conn.how == "rst":
                _rst(server)
            else:
                server.transport.abort()
            return
        conn.server_reader, conn.server = server_reader, server
        loop = asyncio.get_running_loop()
        conn.tasks = [loop.create_task(self._pump(conn, d)) for d in DIRECTIONS]
        await asyncio.wait(conn.tasks)
        if not conn.closed:
            self._close(conn, "fin")

    async def _pump(self, conn: _Conn, direction: Direction) -> None:
        """Forward one direction until EOF, through the toxics that apply to it."""
        loop = asyncio.get_running_loop()
        lane = conn.lanes[direction]
        reader = conn.client_reader if direction == "upstream" else conn.server_reader
        writer = lane.writer
        assert reader is not None and writer is not None
        try:
            while True:
                data = await reader.read(READ_SIZE)
                if conn.closed:
                    return
                if not data:
                    if direction == "upstream":
                        conn.up_eof = True
                    break
                arrived = loop.time()
                if direction == "upstream":
                    conn.last_up = arrived
                else:
                    conn.last_down = arrived
                held = 0.0
                if self._interceptor is not None:
                    decision = self._ask(conn, direction, len(data))
                    if decision in ("drop", "reset"):
                        self._count_dropped(direction, len(data))
                        self._close(conn, "fin" if decision == "drop" else "rst")
                        return
                    if decision == "stall":
                        self._count_dropped(direction, len(data))
                        self._stall(conn)
                        continue
                    if isinstance(decision, float | int) and decision > 0:
                        held = float(decision)
                data, delay, cut = self._chain(conn, direction, data)
                delay += held
                if data:
                    lane.send(data, arrived + delay)
                if cut:
                    await lane.idle.wait()
                    self._close(conn, "fin")
                    return
                await writer.drain()
                if lane.pending_bytes > MAX_DELAYED:
                    await lane.idle.wait()
            await lane.idle.wait()
            if not conn.closed and writer.can_write_eof():
                writer.write_eof()
        except Exception as exc:  # a peer's reset, a broken pipe: the whole connection goes
            log.debug("fault proxy %s: connection %d %s: %r", self.name, conn.id, direction, exc)
            self._close(conn, "rst")

    def _ask(self, conn: _Conn, direction: Direction, size: int) -> Decision:
        """The interceptor's decision on one chunk (forward, on any error of its own)."""
        assert self._interceptor is not None and self._address is not None
        try:
            return self._interceptor.on_chunk(ChunkSeen(
                self.name, conn.id, conn.peer, self._address, direction, size))
        except Exception as exc:  # an interceptor's bug must not break the proxy
            log.debug("fault proxy %s: interceptor: %r", self.name, exc)
            return None

    def _stall(self, conn: _Conn) -> None:
        """A blackhole on ``conn`` alone, both ways, until the toxics are cleared."""
        for direction in DIRECTIONS:
            name = f"stall-c{conn.id}-{direction}"
            if name not in self._toxics:
                entry = _Entry(name, Timeout(0.0), direction, conn.id)
                self._toxics[name] = entry
                self._attach(conn, entry)

    def _chain(self, conn: _Conn, direction: Direction, data: bytes) -> tuple[bytes, float, bool]:
        """The chunk after the direction's toxics, in order: what is left, its delay, cut?"""
        delay = 0.0
        cut = False
        for applied in list(conn.applied.values()):
            entry = applied.entry
            if entry.direction != direction:
                continue
            toxic = entry.toxic
            if isinstance(toxic, Timeout | ResetPeer):
                self._count_dropped(direction, len(data))
                return b"", 0.0, cut
            if isinstance(toxic, Latency):
                ms = toxic.latency_ms
                if toxic.jitter_ms:
                    ms += self._rng.uniform(-toxic.jitter_ms, toxic.jitter_ms)
                delay += max(0.0, ms) / 1000
            else:
                room = max(toxic.bytes - applied.forwarded, 0)
                if len(data) > room:
                    self._count_dropped(direction, len(data) - room)
                    data = data[:room]
                applied.forwarded += len(data)
                if applied.forwarded >= toxic.bytes:
                    cut = True
        return data, delay, cut
