"""The faults a :class:`~chongming_conformance.faults.proxy.FaultProxy` injects: Toxiproxy's toxics.

Each toxic is a frozen value with the same meaning as the Toxiproxy toxic of the
same name (``toxics/*.go`` in Shopify/toxiproxy); the proxy applies it to one
direction of a connection -- ``"upstream"`` is client to server, ``"downstream"``
server to client -- from the moment it is added to that connection (or, for a
connection opened later, from its accept). Toxics in one direction chain in the
order they were added, as in Toxiproxy.

Where Toxiproxy starts a clock on the first chunk of data (``reset_peer``), the
proxy starts it when the toxic starts applying, so a reset or a close happens
even on an idle connection.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

__all__ = ["Direction", "Latency", "LimitData", "ResetPeer", "Timeout", "Toxic"]

Direction = Literal["upstream", "downstream"]
"""``"upstream"``: client to server; ``"downstream"``: server to client (as Toxiproxy)."""


def _milliseconds(owner: str, field: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{owner}: {field} must be a number of milliseconds, not {value!r}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{owner}: {field} must be a finite number >= 0 ms, not {value!r}")


def _ms(value: float) -> str:
    return f"{value:g}"


@dataclass(frozen=True, slots=True)
class Latency:
    """Delay every chunk by ``latency_ms`` plus a uniform draw in ``±jitter_ms`` (never below 0).

    The delay counts from when the proxy read the chunk; order within the
    direction is kept (a chunk never overtakes an earlier one), so a chunk may
    wait longer than its own draw. Data already delayed when the toxic is
    removed is still delivered, as in Toxiproxy.
    """

    latency_ms: float
    jitter_ms: float = 0.0

    def __post_init__(self) -> None:
        _milliseconds("Latency", "latency_ms", self.latency_ms)
        _milliseconds("Latency", "jitter_ms", self.jitter_ms)

    def describe(self) -> str:
        if self.jitter_ms:
            return f"latency {_ms(self.latency_ms)}±{_ms(self.jitter_ms)} ms"
        return f"latency {_ms(self.latency_ms)} ms"


@dataclass(frozen=True, slots=True)
class Timeout:
    """Stop forwarding: data in the direction is read and dropped (as Toxiproxy's ``timeout``).

    With ``timeout_ms > 0`` the connection is closed (both sides, a normal close)
    that long after the toxic starts applying to it; with ``0`` data is dropped
    until the toxic is removed -- a blackhole until healed. Data dropped while the
    toxic was active stays lost. One difference from Toxiproxy, on purpose: there,
    removing a ``timeout`` toxic closes the connections it held (its ``Cleanup``);
    here the connection lives on and later data flows again, so a partition can
    heal without the client noticing anything but the loss.
    """

    timeout_ms: float = 0.0

    def __post_init__(self) -> None:
        _milliseconds("Timeout", "timeout_ms", self.timeout_ms)

    def describe(self) -> str:
        if self.timeout_ms:
            return f"timeout: drop, close after {_ms(self.timeout_ms)} ms"
        return "timeout: drop until removed"


@dataclass(frozen=True, slots=True)
class ResetPeer:
    """Reset the connection ``timeout_ms`` after the toxic starts applying (``0``: at once).

    Both sockets are closed with ``SO_LINGER(1, 0)``, so each peer sees a TCP RST
    (``ECONNRESET``), not an orderly end of stream. Until then data in the
    toxic's direction is dropped, as Toxiproxy's ``reset_peer`` does.
    """

    timeout_ms: float = 0.0

    def __post_init__(self) -> None:
        _milliseconds("ResetPeer", "timeout_ms", self.timeout_ms)

    def describe(self) -> str:
        if self.timeout_ms:
            return f"reset peer after {_ms(self.timeout_ms)} ms"
        return "reset peer"


@dataclass(frozen=True, slots=True)
class LimitData:
    """Forward at most ``bytes`` more bytes in the direction, then close the connection.

    Counted from when the toxic starts applying to the connection. When the
    limit is reached (a chunk may be cut in the middle) both sides are closed
    normally; like Toxiproxy's ``limit_data``, the close happens on the chunk that
    reaches the limit, so ``LimitData(0)`` closes on the next chunk in the
    direction, not at once.
    """

    bytes: int

    def __post_init__(self) -> None:
        if isinstance(self.bytes, bool) or not isinstance(self.bytes, int):
            raise ValueError(f"LimitData: bytes must be an int, not {self.bytes!r}")
        if self.bytes < 0:
            raise ValueError(f"LimitData: bytes must be >= 0, not {self.bytes}")

    def describe(self) -> str:
        return f"limit data to {self.bytes} bytes"


Toxic = Latency | Timeout | ResetPeer | LimitData
"""Any one of the toxics the proxy knows."""
