"""The network seam: how a store's connections are routed through the kit's fault proxies.

A store whose ``make_shared_store`` takes a keyword ``network`` gets a :class:`Network`
when faults are requested. Inside the factory (in the parent process) it calls
``network.route(host, port)`` for each server endpoint its workers connect to, and
puts the address it gets back into the opener instead of the real one::

    def make_shared_store(network=None):
        host, port = "127.0.0.1", 5432
        install_schema(host, port)                      # set-up: the direct address
        if network is not None:
            host, port = network.route(host, port)      # the workers: through the proxy
        yield functools.partial(MyStore, host=host, port=port)
        drop_schema("127.0.0.1", 5432)                  # teardown: the direct address

Each endpoint gets one :class:`~chongming_conformance.faults.proxy.FaultProxy`
listening on 127.0.0.1; the nemesis (``faults.nemesis``) then resets, blackholes, slows
and cuts the connections that pass through it. The kit keeps the network healthy while
the factory sets up and tears down; faults happen only during the workload.

Why a keyword and not an environment variable or a monkeypatched socket: the store's
author knows which connections are the workers' (and which are set-up's), and a
picklable opener must carry the routed address into the worker processes anyway.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from typing import Any

from .proxy import FaultProxy, Interceptor

__all__ = ["NETWORK_KEYWORD", "Network", "takes_network"]

#: The keyword argument of ``make_shared_store`` through which the kit passes the seam.
NETWORK_KEYWORD = "network"


def takes_network(factory: Callable[..., Any]) -> bool:
    """Whether ``factory`` (a ``make_shared_store``) accepts the ``network`` keyword."""
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return False
    param = params.get(NETWORK_KEYWORD)
    return param is not None and param.kind in (
        inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


class Network:
    """The seam object: one fault proxy per routed endpoint, owned by the parent process.

    ``seed`` seeds the proxies' own random choices (latency jitter). It never crosses a
    process boundary: pickling it is refused with the reason, since a worker process
    that called ``route`` would start a proxy nobody injects faults into.
    """

    def __init__(self, seed: int = 0) -> None:
        self._seed = seed
        self._pid = os.getpid()
        self._proxies: dict[tuple[str, int], FaultProxy] = {}
        self._closed = False
        self._interceptor: Interceptor | None = None

    def route(self, host: str, port: int) -> tuple[str, int]:
        """The address to connect to instead of ``(host, port)``: a proxy in front of it."""
        if os.getpid() != self._pid:
            raise RuntimeError("network.route() was called in a worker process; call it in "
                               "make_shared_store and put the address it returns in the opener")
        if self._closed:
            raise RuntimeError("network.route() after the run ended")
        if not isinstance(host, str) or not host:
            raise TypeError(f"network.route(host, port): host must be a non-empty str, "
                            f"not {host!r}")
        if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
            raise TypeError(f"network.route(host, port): port must be an int in 1..65535, "
                            f"not {port!r}")
        key = (host, port)
        proxy = self._proxies.get(key)
        if proxy is None:
            proxy = FaultProxy(key, name=f"{host}:{port}",
                               seed=self._seed * 1_000_003 + len(self._proxies))
            proxy.start()
            proxy.set_interceptor(self._interceptor)
            self._proxies[key] = proxy
        return proxy.address

    def aim(self, interceptor: Interceptor | None) -> None:
        """Let ``interceptor`` (the nemesis's aim, ``faults.aim.Aimer``) see every chunk of
        every proxy, routed now or later; None: stop."""
        self._interceptor = interceptor
        for proxy in self._proxies.values():
            proxy.set_interceptor(interceptor)

    @property
    def proxies(self) -> list[FaultProxy]:
        """The proxies started so far, in the order their endpoints were routed."""
        return list(self._proxies.values())

    def endpoints(self) -> list[str]:
        """``host:port -> 127.0.0.1:port`` per routed endpoint (for the report)."""
        return [f"{h}:{p} -> {':'.join(map(str, x.address))}"
                for (h, p), x in self._proxies.items()]

    def heal(self) -> None:
        """Remove every toxic and bring every proxy up: the network is healthy again."""
        for proxy in self._proxies.values():
            proxy.clear_toxics()
            proxy.up()

    def close(self) -> None:
        """Stop every proxy (idempotent)."""
        self._closed = True
        for proxy in self._proxies.values():
            proxy.stop()

    def __enter__(self) -> Network:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __reduce__(self) -> Any:
        raise TypeError("a Network stays in the parent process: call network.route() in "
                        "make_shared_store and put the address it returns in the opener")
