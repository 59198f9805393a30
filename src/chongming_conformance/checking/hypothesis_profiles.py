"""The kit's named hypothesis settings profiles, and how its checks pick their settings.

Three profiles are registered on import, each under a ``chongming-`` name so
they never shadow a project's own profiles:

========================  =============  ===========  ===================================
profile                   max_examples   state steps  for
========================  =============  ===========  ===================================
``chongming-quick``       10             30           a fast local loop; keeps the example
                                                      database so a failure replays first
``chongming-ci``          100            50           CI and the default: derandomized, no
                                                      database, so every run is identical
``chongming-thorough``    400            100          a nightly / pre-release bug hunt
========================  =============  ===========  ===================================

All three set ``deadline=None`` (a store does I/O; one slow fsync on a busy
machine is not a bug), ``print_blob=True`` (a failure prints the
``@reproduce_failure`` blob) and suppress ``HealthCheck.too_slow``: building
lists of full-field snapshots with adversarial text is slow to *generate* on a
shared 2-core runner, and that says nothing about the store.

None of them shrinks (:data:`FAST_PHASES`): shrinking a failure of a broken
store took 90-300 s per run, while every failing check already names its clause
(a blame note) and prints a replayable counterexample (the
``@reproduce_failure`` blob, or the derandomized seed). A red run therefore
takes about as long as a green one. ``--chongming-shrink`` (:func:`set_shrink`)
turns the shrink phase back on when an author wants the *minimal* example.

Precedence, decided once in :func:`active_settings`:

1. ``--hypothesis-profile=NAME`` (or ``settings.load_profile`` in a conftest)
   wins: whatever profile is loaded is used as is;
2. if nothing chose a profile (hypothesis' own ``default``, or its ``ci``
   profile that it auto-loads on CI), the kit's :data:`DEFAULT_PROFILE` is used,
   keeping the verbosity and phases that ``--hypothesis-verbosity`` /
   ``--hypothesis-explain`` put on top of it;
3. ``--hypothesis-seed=N`` is honoured even under a derandomized profile:
   derandomization is switched off for that run, so the seed takes effect
   (hypothesis would otherwise silently ignore it). ``--chongming-seed=N`` sets the
   same seed (:func:`force_seed`) unless ``--hypothesis-seed`` is given.
"""

from __future__ import annotations

from hypothesis import HealthCheck, Phase, settings
from hypothesis import core as _hypothesis_core

__all__ = [
    "DEFAULT_PROFILE",
    "FAST_PHASES",
    "PROFILES",
    "active_profile_name",
    "active_settings",
    "force_seed",
    "load_profile",
    "profile_name",
    "set_shrink",
    "shrinking",
]

#: Short name -> registered hypothesis profile name.
PROFILES: dict[str, str] = {
    "quick": "chongming-quick",
    "ci": "chongming-ci",
    "thorough": "chongming-thorough",
}
#: The short name used when nobody chose a profile.
DEFAULT_PROFILE = "ci"

#: Every phase but shrink (and explain, which needs a shrunk example): the default.
FAST_PHASES: tuple[Phase, ...] = tuple(p for p in Phase if p not in (Phase.shrink, Phase.explain))

_shrink = False  # set by --chongming-shrink through set_shrink()

_UNCHOSEN = frozenset({"default", "ci"})  # hypothesis' built-ins, loaded without being asked

# Every profile: stores do I/O, so no per-example deadline and no too_slow health
# check; a failure prints its reproduction blob.
_BASE = settings(
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
    phases=FAST_PHASES,
)
settings.register_profile(PROFILES["quick"], parent=_BASE, max_examples=10, stateful_step_count=30)
settings.register_profile(
    PROFILES["ci"],
    parent=_BASE,
    max_examples=100,
    stateful_step_count=50,
    derandomize=True,
    database=None,
)
settings.register_profile(
    PROFILES["thorough"],
    parent=_BASE,
    max_examples=400,
    stateful_step_count=100,
)


def set_shrink(enabled: bool) -> None:
    """Shrink failures to a minimal example (``--chongming-shrink``), or not (the default)."""
    global _shrink
    _shrink = enabled


def shrinking() -> bool:
    """Whether kit checks shrink their failures (see :func:`set_shrink`)."""
    return _shrink


def profile_name(name: str) -> str:
    """``quick`` / ``ci`` / ``thorough`` (or the full ``chongming-...`` name) -> registered name.

    Raises ValueError naming the valid choices for anything else.
    """
    if name in PROFILES:
        return PROFILES[name]
    if name in PROFILES.values():
        return name
    raise ValueError(
        f"unknown chongming profile {name!r}; choose one of {', '.join(sorted(PROFILES))}"
    )


def load_profile(name: str) -> settings:
    """Make the kit profile ``name`` hypothesis' active profile and return its settings.

    This is what ``--chongming-profile=NAME`` does; it changes the settings of
    every hypothesis test in the session, exactly like ``--hypothesis-profile``.
    """
    full = profile_name(name)
    settings.load_profile(full)
    return settings.get_profile(full)


def active_profile_name() -> str:
    """The registered name of the profile :func:`active_settings` starts from now.

    What a report records as ``run.profile``: the kit's default when nothing
    chose a profile, else the chosen one (``--hypothesis-verbosity`` and
    ``--hypothesis-explain`` variants named by the profile they derive from).
    """
    current = settings.get_current_profile_name().split("-with-")[0]
    return PROFILES[DEFAULT_PROFILE] if current in _UNCHOSEN else current


def active_settings() -> settings:
    """The settings a kit check runs with now (precedence in the module docstring).

    Resolved at call time, not import time, so a profile loaded by a plugin or
    conftest after the kit was imported still applies.
    """
    current = settings.get_current_profile_name()
    # pytest's --hypothesis-verbosity / --hypothesis-explain derive "<profile>-with-...".
    if current.split("-with-")[0] in _UNCHOSEN:
        active = settings.default
        assert active is not None
        kit = settings.get_profile(PROFILES[DEFAULT_PROFILE])
        # --hypothesis-explain asks for the explain phase; keep it (it implies shrinking).
        explain = "explain" in current and Phase.explain in active.phases
        base = settings(
            kit,
            verbosity=active.verbosity,
            phases=active.phases if explain else kit.phases,
        )
    else:
        chosen = settings.default
        assert chosen is not None
        base = chosen
    if _shrink and Phase.shrink not in base.phases:
        base = settings(base, phases=(*base.phases, Phase.shrink))
    if base.derandomize and _hypothesis_core.global_force_seed is not None:
        # --hypothesis-seed was given: honour it instead of the derandomized seed.
        return settings(base, derandomize=False)
    return base


def force_seed(seed: int) -> None:
    """Run every hypothesis check of this process from ``seed`` (``--chongming-seed``), as
    ``--hypothesis-seed`` does; :func:`active_settings` then drops derandomization."""
    _hypothesis_core.global_force_seed = seed  # type: ignore[assignment]
