"""What a report says about its seeds, and the command that replays each failure.

A run draws: the hypothesis checks their examples, the stress workers their calls, the
nemesis its faults. The gate's run draws the same every time (stress seed 0, hypothesis
derandomized); ``--chongming-seed=N|random`` moves all three to another schedule. A report
that failed must therefore say which schedule it ran and give, per failing test, the one
command that runs it again on that schedule -- read off the report document alone, like
every renderer (architecture.md: a renderer never looks at pytest).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

__all__ = ["failing_nodeids", "replay_command", "seeds_line"]

#: Registered hypothesis profile -> the --chongming-profile short name that loads it.
_PROFILE_FLAGS = {"chongming-quick": "quick", "chongming-thorough": "thorough"}
#: Stress profile knobs and the options that override them, for a changed profile (``*``).
_STRESS_FLAGS = (("processes", "--chongming-stress-processes"),
                 ("rounds", "--chongming-stress-rounds"),
                 ("deadline", "--chongming-stress-deadline"),
                 ("crash_cycles", "--chongming-stress-crash-cycles"))


def seeds_line(doc: Mapping[str, Any]) -> str:
    """One line naming the seeds the run drew from."""
    run = doc["run"]
    stress = run.get("stress_profile")
    stress_part = "no stress run" if not stress else f"stress and fault schedules {stress['seed']}"
    hypo = run.get("hypothesis_seed")
    seed = run.get("seed")
    if seed is not None:
        hypo_part = f"hypothesis {hypo}" if hypo is not None else "hypothesis derandomized"
        return f"seeds: --chongming-seed={seed} ({stress_part}, {hypo_part})"
    hypo_part = (f"hypothesis --hypothesis-seed={hypo}" if hypo is not None else
                 "hypothesis derandomized")
    return f"seeds: the gate's fixed schedule ({stress_part}, {hypo_part})"


def failing_nodeids(doc: Mapping[str, Any]) -> list[str]:
    """Every suite test that failed, once, in the order the clauses list them."""
    seen: dict[str, None] = {}
    for entry in doc["clauses"]:
        for test in entry.get("tests", ()):
            if test.get("outcome") == "failed":
                seen.setdefault(test["nodeid"], None)
    return list(seen)


def replay_command(doc: Mapping[str, Any], nodeid: str) -> str:
    """The pytest command that runs ``nodeid`` again on the same store, profiles and seeds."""
    run, store = doc["run"], doc["store"]
    args = ["pytest", f"--chongming-store={store['spec']}"]
    shared = store.get("shared_spec")
    if shared and not str(store.get("shared_source") or "").startswith("found "):
        args.append(f"--chongming-shared-store={shared}")
    profile = _PROFILE_FLAGS.get(str(run.get("profile")))
    if profile:
        args.append(f"--chongming-profile={profile}")
    stress = run.get("stress_profile")
    if stress:
        base = str(stress["name"]).rstrip("*")
        if base != "ci":
            args.append(f"--chongming-stress={base}")
        if str(stress["name"]).endswith("*"):
            args += [f"{flag}={stress[key]:g}" if isinstance(stress[key], float)
                     else f"{flag}={stress[key]}" for key, flag in _STRESS_FLAGS]
        if stress.get("faults", "none") != "none":
            args.append(f"--chongming-faults={stress['faults']}")
    if run.get("seed") is not None:
        args.append(f"--chongming-seed={run['seed']}")
    elif run.get("hypothesis_seed") is not None:
        args.append(f"--hypothesis-seed={run['hypothesis_seed']}")
    test = nodeid.rsplit("::", 1)[-1].split("[", 1)[0]
    args += ["-k", test]
    return shlex.join(args)
