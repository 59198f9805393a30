"""Which process owns the client end of a proxied connection (Linux ``/proc``).

The nemesis aims a fault at one worker's call, but the proxy only sees TCP connections:
the store opens them inside the worker, in its own driver, and never tells the kit. The
kernel knows. The proxy's accepted socket has the client's address as its peer; the
client end of that connection is the socket whose *local* address is that peer and whose
remote address is the proxy's listening address. ``/proc/net/tcp`` (and ``tcp6``) lists
every TCP socket of the network namespace with its inode, and ``/proc/PID/fd`` links to
``socket:[INODE]`` for each socket a process holds. So a connection is mapped to the
worker that owns it by reading one table and the fd folders of the few worker pids.

Elsewhere than Linux (no ``/proc/net/tcp``) :func:`owner_pid` returns None: the faults
then land without a call to aim at, and the coverage the fault run reports says so.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable
from pathlib import Path

__all__ = ["available", "owner_pid", "socket_inode"]

_TABLES = (Path("/proc/net/tcp"), Path("/proc/net/tcp6"))


def available() -> bool:
    """Whether connections can be mapped to processes here (Linux with ``/proc``)."""
    return _TABLES[0].exists()


def _hex_address(host: str, port: int, *, v6: bool) -> str:
    """An address as ``/proc/net/tcp{,6}`` writes it: the IP's bytes in host order, hex."""
    if not v6:
        packed = socket.inet_aton(host)
        return f"{int.from_bytes(packed, 'little'):08X}:{port:04X}"
    if ":" not in host:
        host = "::ffff:" + host  # an IPv4 address as an IPv6 socket sees it
    packed = socket.inet_pton(socket.AF_INET6, host)
    words = "".join(f"{int.from_bytes(packed[k:k + 4], 'little'):08X}" for k in range(0, 16, 4))
    return f"{words}:{port:04X}"


def socket_inode(local: tuple[str, int], remote: tuple[str, int]) -> int | None:
    """The inode of the TCP socket whose local address is ``local`` and remote ``remote``."""
    for table in _TABLES:
        v6 = table.name == "tcp6"
        try:
            want_local = _hex_address(local[0], local[1], v6=v6)
            want_remote = _hex_address(remote[0], remote[1], v6=v6)
            lines = table.read_text(encoding="ascii").splitlines()[1:]
        except (OSError, ValueError):
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[1] == want_local and fields[2] == want_remote:
                try:
                    return int(fields[9])
                except ValueError:
                    return None
    return None


def owner_pid(peer: tuple[str, int], listening: tuple[str, int],
              candidates: Iterable[int]) -> int | None:
    """Which of ``candidates`` holds the client end of the connection the proxy listening on
    ``listening`` accepted from ``peer``; None if none does (or this is not Linux)."""
    inode = socket_inode(peer, listening)
    if inode is None:
        return None
    target = f"socket:[{inode}]"
    for pid in candidates:
        folder = f"/proc/{pid}/fd"
        try:
            names = os.listdir(folder)
        except OSError:
            continue  # it exited, or this is not Linux
        for name in names:
            try:
                if os.readlink(f"{folder}/{name}") == target:
                    return pid
            except OSError:
                continue
    return None
