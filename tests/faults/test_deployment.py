"""The deployment seam: a store module's own fault actions, declared, planned, applied, judged.

No server here: the actions are callables that record when they ran (the real crash
actions on real servers are tests/stress/test_durability.py).
"""

from __future__ import annotations

import itertools
import time
import types
from pathlib import Path

import pytest

from chongming_conformance.faults import Action, Deployment, DeploymentError, Nemesis, plan
from chongming_conformance.faults.deployment import find_deployment
from chongming_conformance.faults.nemesis import Fault, kinds_for


def _nothing() -> None:
    return None


def test_an_action_and_a_deployment_refuse_what_they_cannot_run() -> None:
    with pytest.raises(DeploymentError, match="begin must be callable"):
        Action(begin="pg_ctl stop")  # type: ignore[arg-type]
    with pytest.raises(DeploymentError, match="recovery_seconds"):
        Action(begin=_nothing, recovery_seconds=-1)
    with pytest.raises(DeploymentError, match="recovery_seconds"):
        Action(begin=_nothing, recovery_seconds=float("inf"))
    with pytest.raises(DeploymentError, match="identifier"):
        Deployment(actions={"crash server": Action(begin=_nothing)})
    with pytest.raises(DeploymentError, match="must be an Action"):
        Deployment(actions={"crash": _nothing})  # type: ignore[dict-item]
    d = Deployment(topology="one server", actions={
        "crash_server": Action(begin=_nothing, end=_nothing, recovery_seconds=20, crash=True),
        "failover": Action(begin=_nothing, recovery_seconds=40)})
    assert d.crashes == ["crash_server"] and d.recovery_seconds == 40
    assert d.describe() == ("topology one server; deployment actions offered: "
                            "crash_server (crash), failover")


def _module(name: str, **attrs: object) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    return module


def test_find_deployment_names_the_attribute_and_the_mistake() -> None:
    assert find_deployment(None) is None
    assert find_deployment(_module("plain")) is None
    d = Deployment(topology="t")
    assert find_deployment(_module("good", chongming_deployment=lambda: d)) is d
    with pytest.raises(DeploymentError, match=r"bad\.chongming_deployment is a dict"):
        find_deployment(_module("bad", chongming_deployment={}))
    with pytest.raises(DeploymentError, match=r"returned str, not a"):
        find_deployment(_module("bad", chongming_deployment=lambda: "crash"))

    def boom() -> Deployment:
        raise OSError("pg_ctl: not found")

    with pytest.raises(DeploymentError, match=r"raised OSError: pg_ctl: not found"):
        find_deployment(_module("bad", chongming_deployment=boom))


def test_deployment_actions_are_planned_only_in_the_deployment_mode_with_health_before() -> None:
    assert kinds_for("network", network=True, actions=["crash"]) == kinds_for("network",
                                                                              network=True)
    kinds = kinds_for("deployment", network=False, actions=["crash", "failover"])
    assert kinds == ("pause", "deployment:crash", "deployment:failover")
    assert "reset" in kinds_for("deployment", network=True, actions=["crash"])
    faults = list(itertools.islice(plan(3, kinds), 60))
    assert faults == list(itertools.islice(plan(3, kinds), 60))  # replayable
    deployed = [f for f in faults if f.kind.startswith("deployment:")]
    assert {f.kind for f in deployed} == {"deployment:crash", "deployment:failover"}
    # A store recovering from one crash is not crashed again before it could reconnect.
    assert all(f.gap >= 3.0 for f in deployed)


def test_the_nemesis_begins_and_ends_an_action_and_logs_its_interval(tmp_path: Path) -> None:
    ran: list[tuple[str, float]] = []
    action = Action(begin=lambda: ran.append(("begin", time.monotonic())),
                    end=lambda: ran.append(("end", time.monotonic())), crash=True)
    fault = Fault(1, "deployment:crash_server", 0.0, 0.2, True, 0)
    nemesis = Nemesis(iter([fault]), network=None, pausable=dict,
                      log_path=tmp_path / "nemesis.jsonl", actions={"crash_server": action})
    nemesis.start()
    deadline = time.monotonic() + 10
    while not nemesis.applied and time.monotonic() < deadline:
        time.sleep(0.01)
    nemesis.stop()
    assert [what for what, _ in ran] == ["begin", "end"]
    [applied] = nemesis.applied
    assert applied.start <= ran[0][1] and ran[1][1] <= applied.end
    assert ran[1][1] - ran[0][1] >= 0.2  # the server stayed down for the planned duration
    assert nemesis.crashes() == [applied]
    assert "crash_server" in (tmp_path / "nemesis.jsonl").read_text(encoding="utf-8")


def test_an_action_that_raises_stops_the_nemesis_with_its_error(tmp_path: Path) -> None:
    def broken() -> None:
        raise RuntimeError("pg_ctl exited 1")

    nemesis = Nemesis(iter([Fault(1, "deployment:crash", 0.0, 0.1, True, 0)]), network=None,
                      pausable=dict, log_path=tmp_path / "n.jsonl",
                      actions={"crash": Action(begin=broken)})
    nemesis.start()
    deadline = time.monotonic() + 10
    while nemesis.error is None and time.monotonic() < deadline:
        time.sleep(0.01)
    nemesis.stop()
    assert nemesis.error is not None and "pg_ctl exited 1" in nemesis.error

