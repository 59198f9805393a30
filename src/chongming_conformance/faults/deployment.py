"""The deployment seam: faults only the store's author knows how to cause.

The kit can break the network between a store and its servers (``faults.network``) and
stop the store's own processes (pauses, kills), but it cannot crash a database server,
restart it or fail it over: where the servers run and how they are managed is the
deployment's business. Jepsen splits a test the same way -- the harness drives the
client and the checker, the "db" layer and its nemesis belong to the system under test.

So the store's module (the one that holds ``make_shared_store``) may define a function
``chongming_deployment()`` returning a :class:`Deployment`: a line describing the
topology (for every report), and named :class:`Action` s -- a zero-argument callable that
begins the fault (``crash_server``), optionally one that ends it (``restart_server``),
how long the store may take to recover after it ends, and whether the servers lose what
they held in memory (``crash``: durability is then judged across it)::

    def chongming_deployment():
        return Deployment(
            topology="PostgreSQL 15, one server, local disk",
            actions={"crash": Action(begin=crash_server, end=restart_server,
                                     recovery_seconds=20.0, crash=True)},
        )

With ``--chongming-faults=deployment`` (``--faults deployment`` on the stress command)
the nemesis schedules these actions among its own faults, on the same seeded plan, and the
fault run judges the history as for any other fault; a crash action also makes the run
judge XP-FAULT-DURABILITY (every write acknowledged before the crash is there after it).
It is called in the parent process, once per run, after the shared store is set up.
A store without the function is judged without deployment faults, and the report says so.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

__all__ = [
    "DEPLOYMENT_ATTR",
    "Action",
    "Deployment",
    "DeploymentError",
    "describe_topology",
    "find_deployment",
]

#: The function in the store's module that describes its deployment.
DEPLOYMENT_ATTR = "chongming_deployment"
#: The longest recovery an action may ask for: longer would outlast the scenario's deadline.
MAX_RECOVERY_SECONDS = 120.0


class DeploymentError(ValueError):
    """A malformed deployment declaration; the message names the attribute and the fix."""


@dataclass(frozen=True)
class Action:
    """One fault of the deployment.

    ``begin`` starts it (crash the server, cut over to a replica); ``end``, if given,
    undoes it after the planned duration (start the server again). Both are called in
    the parent process, from the nemesis's thread, and must return within a few seconds
    (a call that raises stops the nemesis and is the run's error). ``recovery_seconds``:
    how long after ``end`` (or ``begin``, for an instant action) the store may still
    fail calls while it reconnects; after that every call must succeed again.
    ``crash``: the servers lose what they held in memory, so every write acknowledged
    before ``begin`` must still be there once they are back (XP-FAULT-DURABILITY).
    """

    begin: Callable[[], Any]
    end: Callable[[], Any] | None = None
    recovery_seconds: float = 30.0
    crash: bool = False

    def __post_init__(self) -> None:
        if not callable(self.begin):
            raise DeploymentError(f"Action.begin must be callable, not {self.begin!r}")
        if self.end is not None and not callable(self.end):
            raise DeploymentError(f"Action.end must be callable or None, not {self.end!r}")
        r = self.recovery_seconds
        if isinstance(r, bool) or not isinstance(r, int | float) or not math.isfinite(r) \
                or not 0 <= r <= MAX_RECOVERY_SECONDS:
            raise DeploymentError(f"Action.recovery_seconds must be a number of seconds in "
                                  f"0..{MAX_RECOVERY_SECONDS:g}, not {r!r}")


@dataclass(frozen=True)
class Deployment:
    """What the store runs on (``topology``, shown in every report) and the faults it offers."""

    topology: str = ""
    actions: Mapping[str, Action] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.topology, str):
            raise DeploymentError(f"Deployment.topology must be a str, not "
                                  f"{type(self.topology).__name__}")
        for name, action in self.actions.items():
            if not isinstance(name, str) or not name.isidentifier():
                raise DeploymentError(f"a deployment action's name must be an identifier "
                                      f"(it names the fault in reports), not {name!r}")
            if not isinstance(action, Action):
                raise DeploymentError(f"deployment action {name!r} must be an Action(begin=..., "
                                      f"end=..., recovery_seconds=..., crash=...), not "
                                      f"{type(action).__name__}")

    @property
    def crashes(self) -> list[str]:
        """The names of the actions that crash a server (durability is judged across them)."""
        return [n for n, a in self.actions.items() if a.crash]

    @property
    def recovery_seconds(self) -> float:
        """The longest recovery any action asks for (0 without actions)."""
        return max((a.recovery_seconds for a in self.actions.values()), default=0.0)

    def describe(self) -> str:
        """One line for the reports: the topology and the actions offered."""
        offered = ", ".join(f"{n}{' (crash)' if a.crash else ''}"
                            for n, a in self.actions.items()) or "none"
        return f"topology {self.topology or 'not described'}; deployment actions offered: {offered}"


def find_deployment(module: ModuleType | None) -> Deployment | None:
    """The :class:`Deployment` that ``module``'s ``chongming_deployment()`` returns, or None
    when it defines none. Raises :class:`DeploymentError` for one that is not callable,
    raises, or returns something else."""
    if module is None:
        return None
    fn = getattr(module, DEPLOYMENT_ATTR, None)
    if fn is None:
        return None
    where = f"{module.__name__}.{DEPLOYMENT_ATTR}"
    if not callable(fn):
        raise DeploymentError(f"{where} is a {type(fn).__name__}, not a function returning a "
                              "Deployment (docs/faults.md, 'The deployment seam')")
    try:
        found = fn()
    except DeploymentError as exc:
        raise DeploymentError(f"{where}(): {exc}") from None
    except Exception as exc:
        raise DeploymentError(f"{where}() raised {type(exc).__name__}: {exc}") from None
    if not isinstance(found, Deployment):
        raise DeploymentError(f"{where}() returned {type(found).__name__}, not a "
                              "chongming_conformance.faults.Deployment")
    return found


def describe_topology(faults: str, network_absent: str | None, deployment: Deployment | None,
                      shared_spec: str) -> str:
    """What the cross-process verdicts ran on and under, as every report states it: the
    faults requested, the deployment the store describes and the actions it offers."""
    where = f"; the store declares no network ({network_absent})" if network_absent else ""
    if deployment is None:
        described = ("deployment not described (no chongming_deployment() beside "
                     f"{shared_spec}): no deployment fault offered")
    else:
        described = "deployment " + deployment.describe()
    return f"faults {faults}{where}; {described}"
