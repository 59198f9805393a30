"""How hard a stress run pushes: processes, rounds, and the time bound.

Correctness never depends on these numbers (every check is on the logical
``now`` timeline or on counts); they only decide how many chances a race gets
to show itself and how long CI may spend looking.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_PROFILE", "FAULT_MODES", "PROFILES", "StressProfile", "get_profile"]

#: What the nemesis may do during the fault run (``stress.scenarios.fault_workload``):
#: ``none`` -- no fault run; ``pause`` -- SIGSTOP/SIGCONT of worker processes (needs no
#: network, so a store on a local file is judged too); ``network`` -- pauses and the network
#: faults of the proxy (resets, blackholes, latency, replies cut mid-stream, the server down);
#: ``deployment`` -- all that and the store's own deployment actions (crash a server and
#: restart it, fail over: ``faults.deployment``). Each mode includes the ones before it.
FAULT_MODES = ("none", "pause", "network", "deployment")


@dataclass(frozen=True, slots=True)
class StressProfile:
    """Knobs of one stress run.

    ``processes`` worker processes race per scenario (at least 2); ``rounds``
    barrier-aligned rounds per scenario; ``deadline`` is the wall-clock bound
    (seconds) of one scenario, after which stuck workers are terminated and the
    scenario fails; ``crash_cycles`` is how many holders the crash scenario
    SIGKILLs; ``seed`` fixes every worker's choices and the nemesis's fault schedule
    (not the interleavings); ``faults`` is one of :data:`FAULT_MODES` (docs/faults.md),
    ``fault_seconds`` how long a fault run's faults go on.
    """

    name: str = "custom"
    processes: int = 4
    rounds: int = 30
    deadline: float = 120.0
    crash_cycles: int = 2
    seed: int = 0
    faults: str = "none"
    fault_seconds: float = 20.0

    def __post_init__(self) -> None:
        if self.faults not in FAULT_MODES:
            raise ValueError(f"faults must be one of {', '.join(FAULT_MODES)}, not "
                             f"{self.faults!r}")
        if self.fault_seconds <= 0:
            raise ValueError("fault_seconds must be positive (seconds)")
        if self.seed < 0:
            raise ValueError("seed must be >= 0")
        if self.processes < 2:
            raise ValueError("a stress profile needs at least 2 processes to race")
        if self.rounds < 1:
            raise ValueError("a stress profile needs at least 1 round")
        if self.deadline <= 0:
            raise ValueError("deadline must be positive (seconds)")
        if self.crash_cycles < 1:
            raise ValueError("crash_cycles must be at least 1")


PROFILES: dict[str, StressProfile] = {
    "quick": StressProfile("quick", processes=3, rounds=10, deadline=60.0, crash_cycles=1,
                           fault_seconds=8.0),
    "ci": StressProfile("ci", processes=4, rounds=30, deadline=120.0, crash_cycles=2,
                        fault_seconds=20.0),
    "thorough": StressProfile("thorough", processes=6, rounds=200, deadline=600.0, crash_cycles=5,
                              fault_seconds=120.0),
}
DEFAULT_PROFILE = "ci"


def get_profile(profile: StressProfile | str | None) -> StressProfile:
    """A profile object from itself, a name in ``PROFILES``, or None (the default)."""
    if profile is None:
        return PROFILES[DEFAULT_PROFILE]
    if isinstance(profile, StressProfile):
        return profile
    try:
        return PROFILES[profile]
    except KeyError:
        names = ", ".join(sorted(PROFILES))
        raise ValueError(f"unknown stress profile {profile!r}; choose one of {names}") from None
