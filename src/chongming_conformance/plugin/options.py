"""The plugin's settings, resolved once (option > environment > ini) into :class:`Options`.

Every later part of the plugin reads the frozen :class:`Options`, never
``config.getoption`` again, so precedence and validation live in one place.
A bad value is a :class:`pytest.UsageError` (exit 4) naming where it came from.
"""

from __future__ import annotations

import importlib
import importlib.util
import math
import os
import secrets
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from ..seam.timeouts import DEFAULT_TIMEOUT

__all__ = ["ENV_SHARED", "ENV_STORE", "SHARED_ATTR", "Options", "add_options", "load_profile",
           "read_options"]

ENV_STORE = "CHONGMING_STORE"
ENV_SHARED = "CHONGMING_SHARED_STORE"
SHARED_ATTR = "make_shared_store"


def add_options(parser: pytest.Parser) -> None:
    """Declare every ``--chongming-*`` option and ini key (pytest_addoption)."""
    group = parser.getgroup("chongming", "chongming-conformance: TaskStore conformance kit")
    group.addoption(
        "--chongming-store",
        metavar="MODULE:ATTR",
        default=None,
        help="Run the conformance suite against this store factory (zero-argument callable, "
        f"generator function or context manager). Also env {ENV_STORE} or ini chongming_store.",
    )
    group.addoption(
        "--chongming-shared-store",
        metavar="MODULE:ATTR",
        default=None,
        help="Factory giving a picklable opener of one shared store location, for the "
        f"cross-process clauses. Also env {ENV_SHARED} or ini chongming_shared_store. "
        f"Default: {SHARED_ATTR} in the store's module, if it exists.",
    )
    group.addoption(
        "--chongming-no-reuse",
        action="store_true",
        default=False,
        help="Open a new store for every test and hypothesis example even when the store's "
        "module exports reset_store (slower; for telling a reset_store bug from a store bug).",
    )
    group.addoption(
        "--chongming-timeout",
        metavar="SECONDS",
        type=float,
        default=None,
        help=f"Seconds one store call may take before its test fails (default "
        f"{DEFAULT_TIMEOUT:g}; 0 disables). Also ini chongming_timeout.",
    )
    group.addoption(
        "--chongming-report",
        metavar="PATH",
        action="append",
        default=[],
        help="Write the conformance report to PATH (.json, .md or .html); may be repeated.",
    )
    group.addoption(
        "--chongming-attest",
        metavar="FILE",
        default=None,
        help="Write an in-toto attestation of the result to FILE (.json): a Statement v1 with "
        "the test-result predicate, bound by digest to the store's code, the kit and the "
        "catalogue (docs/attestation.md).",
    )
    group.addoption(
        "--chongming-attest-key",
        metavar="PRIVATE.pem",
        default=None,
        help="Sign the attestation (DSSE envelope) with this local private key; needs the "
        "'sign' extra.",
    )
    group.addoption(
        "--chongming-badge",
        metavar="FILE",
        default=None,
        help="Write a shields.io endpoint badge JSON (verdict, catalogue and kit version) to "
        "FILE.",
    )
    group.addoption(
        "--chongming-gate",
        choices=("must", "should"),
        default=None,
        help="Exit non-zero when a clause at this level or above is FAIL or NOT VERIFIED "
        "(review clauses excluded), or the run is partial.",
    )
    group.addoption(
        "--chongming-profile",
        metavar="NAME",
        default=None,
        help="Hypothesis profile for the property checks (quick, ci, thorough).",
    )
    group.addoption(
        "--chongming-shrink",
        action="store_true",
        default=False,
        help="Shrink a property or state-machine failure to a minimal example (slow: minutes "
        "on a broken store). Off by default: a failure still names its clause and prints a "
        "replayable @reproduce_failure blob.",
    )
    group.addoption(
        "--chongming-stress",
        metavar="PROFILE",
        choices=("quick", "ci", "thorough"),
        default=None,
        help="Stress-harness profile for the cross-process clauses (quick, ci, thorough; "
        "default ci). Only used when a shared store is configured.",
    )
    group.addoption(
        "--chongming-stress-processes",
        metavar="N",
        type=int,
        default=None,
        help="Override the stress profile's number of racing worker processes (>= 2).",
    )
    group.addoption(
        "--chongming-stress-rounds",
        metavar="N",
        type=int,
        default=None,
        help="Override the stress profile's rounds per scenario (>= 1).",
    )
    group.addoption(
        "--chongming-stress-deadline",
        metavar="SECONDS",
        type=float,
        default=None,
        help="Override the wall-clock bound of one stress scenario; stuck workers are "
        "terminated and the scenario fails.",
    )
    group.addoption(
        "--chongming-faults",
        choices=("none", "pause", "network", "deployment"),
        default=None,
        help="Run the fault workload (the mixed workload under a nemesis, docs/faults.md): "
        "'pause' stops worker processes mid-call; 'network' also resets, blackholes, slows and "
        "cuts the store's connections through the kit's proxy (make_shared_store(network=...)); "
        "'deployment' also takes the store's own actions, such as crashing and restarting its "
        "server (chongming_deployment() in the store's module), and judges durability. "
        "Default none: the XP-FAULT-* clauses are left out of the gate.",
    )
    group.addoption(
        "--chongming-seed",
        metavar="N|random",
        default=None,
        help="One seed for everything the run draws: the hypothesis checks (as "
        "--hypothesis-seed, which wins if given), the stress workers' choices and the fault "
        "schedule. 'random' draws a fresh one and prints it. Default: the gate's fixed "
        "schedule (stress seed 0, hypothesis derandomized). Every failure prints the command "
        "that replays it.",
    )
    group.addoption(
        "--chongming-stress-crash-cycles",
        metavar="N",
        type=int,
        default=None,
        help="Override the stress profile's crash cycles: how many holders the crash "
        "scenarios and the mixed workload SIGKILL mid-call (>= 1).",
    )
    group.addoption(
        "--chongming-scope",
        choices=("all", "single"),
        default="all",
        help="'single' runs only the single-process clauses: no worker process is spawned, "
        "every cross-process clause (XP-*, XP-CTRL-*) is NOT VERIFIED and the run is partial. "
        "The fast loop while porting a store; not evidence.",
    )
    group.addoption(
        "--chongming-cases",
        action="store_true",
        default=False,
        help="After the clause table, print how many examples of each generated check met "
        "each targeted input case (always in the JSON report, tests[].cases).",
    )
    group.addoption(
        "--chongming-suite-only",
        action="store_true",
        default=False,
        help="Collect only the conformance suite, not the tests of the current project.",
    )
    parser.addini("chongming_store", "Store factory MODULE:ATTR (see --chongming-store).")
    parser.addini(
        "chongming_shared_store", "Shared store factory MODULE:ATTR (see --chongming-shared-store)."
    )
    parser.addini("chongming_timeout", "Per-call timeout in seconds (see --chongming-timeout).")


@dataclass(frozen=True)
class Options:
    """One run's settings as the user gave them, validated; sources say where each came from."""

    store_spec: str
    store_source: str
    shared_spec: str
    shared_source: str
    #: --chongming-no-reuse: ignore the module's reset_store.
    no_reuse: bool
    timeout: float
    reports: tuple[Path, ...]
    #: --chongming-attest / --chongming-attest-key / --chongming-badge (checked before the run).
    attest: Path | None
    attest_key: Path | None
    badge: Path | None
    gate: str | None
    profile: str | None
    #: --chongming-shrink: hypothesis shrinks failures to a minimal example.
    shrink: bool
    #: A ``chongming_conformance.stress.StressProfile`` with the command line's overrides.
    stress_profile: Any
    suite_only: bool
    #: --chongming-cases: print the input-case table.
    show_cases: bool
    #: --chongming-scope: "all", or "single" (no cross-process check, the run partial).
    scope: str
    collect_only: bool
    hypothesis_seed: str | None
    #: --chongming-seed, resolved ('random' drawn once); None: the gate's fixed schedule.
    seed: int | None
    #: The options that can deselect suite tests, as named in a partial-run reason.
    deselecting: str
    invocation_dir: Path


def _setting(config: pytest.Config, option: str, env: str | None, ini: str) -> tuple[str, str]:
    """(value, where it came from): the option wins, then the environment, then the ini."""
    value = config.getoption(option)
    if value:
        return str(value), "--" + option.replace("_", "-")
    if env and os.environ.get(env):
        return os.environ[env], f"environment variable {env}"
    ini_value = config.getini(ini)
    if ini_value:
        return str(ini_value).strip(), f"ini option {ini}"
    return "", ""


def _timeout(config: pytest.Config) -> float:
    value: Any = config.getoption("chongming_timeout")
    source = "--chongming-timeout"
    if value is None:
        raw = config.getini("chongming_timeout")
        if not raw:
            return DEFAULT_TIMEOUT
        source = "ini option chongming_timeout"
        try:
            value = float(str(raw))
        except ValueError:
            raise pytest.UsageError(f"{source}={raw!r} is not a number of seconds.") from None
    if not math.isfinite(value) or value < 0:
        raise pytest.UsageError(
            f"{source}={value!r} must be a finite number >= 0 (0 disables the timeout)."
        )
    return float(value)


def _unwritable(target: Path) -> str | None:
    """Why a report cannot be written to ``target``, checked before any test runs."""
    if target.is_dir():
        return "is a directory"
    parent = target.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent  # the first existing ancestor: the directories below it are made
    if not parent.is_dir():
        return f"needs {parent} to be a directory, but it is a file"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"cannot be created: {parent} is not writable"
    if target.exists() and not os.access(target, os.W_OK):
        return "exists and is not writable"
    return None


def _reports(config: pytest.Config) -> tuple[Path, ...]:
    from ..report.formats import format_problem

    paths = []
    for report_path in config.getoption("chongming_report"):
        problem = format_problem(report_path)
        if problem is not None:
            raise pytest.UsageError(f"--chongming-report={problem}.")
        target = Path(report_path)
        if not target.is_absolute():
            target = config.invocation_params.dir / target
        problem = _unwritable(target)
        if problem is not None:
            # Found now, not after the whole run: a verdict nobody can read is a lost run.
            raise pytest.UsageError(f"--chongming-report={report_path!r}: {target} {problem}.")
        paths.append(target)
    return tuple(paths)


def _extra_file(config: pytest.Config, option: str) -> Path | None:
    """A JSON file written with the reports (attestation, badge), checked like them."""
    value = config.getoption(option.lstrip("-").replace("-", "_"))
    if value is None:
        return None
    target = Path(value)
    if target.suffix != ".json":
        raise pytest.UsageError(f"{option}={value!r} must end in .json.")
    if not target.is_absolute():
        target = config.invocation_params.dir / target
    problem = _unwritable(target)
    if problem is not None:
        raise pytest.UsageError(f"{option}={value!r}: {target} {problem}.")
    return target


def _attest_key(config: pytest.Config, attest: Path | None) -> Path | None:
    value = config.getoption("chongming_attest_key")
    if value is None:
        return None
    if attest is None:
        raise pytest.UsageError("--chongming-attest-key signs an attestation: give "
                                "--chongming-attest=FILE too.")
    key = Path(value)
    if not key.is_file():
        raise pytest.UsageError(f"--chongming-attest-key={value!r}: no such file.")
    if importlib.util.find_spec("securesystemslib") is None:
        raise pytest.UsageError("--chongming-attest-key needs securesystemslib: pip install "
                                "'chongming-conformance[sign]'.")
    return key


def _profile(config: pytest.Config) -> str | None:
    """``--chongming-profile``, checked before the store is opened (usage error if unknown)."""
    name: str | None = config.getoption("chongming_profile")
    if name:
        from ..checking.hypothesis_profiles import profile_name

        try:
            profile_name(name)
        except ValueError as exc:
            raise pytest.UsageError(f"--chongming-profile={name!r}: {exc}.") from None
    return name


#: The largest seed ``random`` draws (a seed is an int >= 0; hypothesis takes any int).
_RANDOM_SEEDS = 2**31


def resolve_seed(config: pytest.Config) -> int | None:
    """--chongming-seed as an int (None when not given); ``random`` is drawn once and written
    back into the option, so xdist workers (which get the controller's option values) and
    every later read see the same seed."""
    raw = config.getoption("chongming_seed")
    if raw is None:
        return None
    text = str(raw).strip()
    if text == "random":
        drawn = secrets.randbelow(_RANDOM_SEEDS)
        config.option.chongming_seed = str(drawn)
        return drawn
    try:
        seed = int(text)
    except ValueError:
        raise pytest.UsageError(f"--chongming-seed={text!r}: give a whole number >= 0, or "
                                "'random' for a fresh one.") from None
    if seed < 0:
        raise pytest.UsageError(f"--chongming-seed={seed}: a seed is a whole number >= 0.")
    return seed


def _stress_profile(config: pytest.Config) -> Any:
    """The StressProfile from --chongming-stress and its overrides (usage error if invalid)."""
    # Imported here: the stress package is heavy, and an idle plugin must stay light.
    from ..stress import get_profile

    name = config.getoption("chongming_stress")
    overrides: dict[str, Any] = {
        field: value
        for field, value in (
            ("processes", config.getoption("chongming_stress_processes")),
            ("rounds", config.getoption("chongming_stress_rounds")),
            ("deadline", config.getoption("chongming_stress_deadline")),
            ("crash_cycles", config.getoption("chongming_stress_crash_cycles")),
            ("seed", resolve_seed(config)),
        )
        if value is not None
    }
    faults = config.getoption("chongming_faults")
    try:
        profile = get_profile(name)
        if overrides:
            profile = replace(profile, name=f"{profile.name}*", **overrides)
        # The fault mode is not a change of the profile's strength: it keeps its name.
        return replace(profile, faults=faults) if faults else profile
    except ValueError as exc:
        raise pytest.UsageError(f"--chongming-stress: {exc}.") from None


def _deselecting(config: pytest.Config) -> str:
    opts = [
        name
        for name, value in (
            ("-k", config.getoption("keyword", "")),
            ("-m", config.getoption("markexpr", "")),
            ("--deselect", config.getoption("deselect", None)),
            ("--lf", config.getoption("lf", False)),
            ("--sw", config.getoption("stepwise", False)),
        )
        if value
    ]
    return "/".join(opts) if opts else "a plugin"


def read_options(config: pytest.Config) -> Options | None:
    """The run's :class:`Options`, or None when no store is configured (the plugin stays idle)."""
    if config.getoption("help", False) or config.getoption("version", 0):
        return None
    # Checked even when the plugin stays idle: a profile given without a store is a mistake
    # the user should hear about, not an option silently ignored.
    profile = _profile(config)
    spec, source = _setting(config, "chongming_store", ENV_STORE, "chongming_store")
    if not spec:
        return None
    timeout = _timeout(config)
    reports = _reports(config)
    attest = _extra_file(config, "--chongming-attest")
    attest_key = _attest_key(config, attest)
    badge = _extra_file(config, "--chongming-badge")
    shared_spec, shared_source = _setting(
        config, "chongming_shared_store", ENV_SHARED, "chongming_shared_store"
    )
    chongming_seed = resolve_seed(config)
    seed = config.getoption("hypothesis_seed", None)
    if seed is None and chongming_seed is not None:
        seed = chongming_seed
    return Options(
        store_spec=spec,
        store_source=source,
        shared_spec=shared_spec,
        shared_source=shared_source,
        no_reuse=bool(config.getoption("chongming_no_reuse")),
        timeout=timeout,
        reports=reports,
        attest=attest,
        attest_key=attest_key,
        badge=badge,
        gate=config.getoption("chongming_gate"),
        profile=profile,
        shrink=bool(config.getoption("chongming_shrink")),
        stress_profile=_stress_profile(config),
        suite_only=bool(config.getoption("chongming_suite_only")),
        show_cases=bool(config.getoption("chongming_cases")),
        scope=str(config.getoption("chongming_scope")),
        collect_only=bool(config.getoption("collectonly")),
        hypothesis_seed=None if seed is None else str(seed),
        seed=chongming_seed,
        deselecting=_deselecting(config),
        invocation_dir=config.invocation_params.dir,
    )


def load_profile(name: str | None, *, shrink: bool = False) -> None:
    """Load the hypothesis profile ``--chongming-profile`` names (usage error if unknown),
    and switch shrinking on for ``--chongming-shrink``."""
    if shrink:
        from ..checking.hypothesis_profiles import set_shrink

        set_shrink(True)
    if not name:
        return
    try:
        profiles = importlib.import_module("chongming_conformance.checking.hypothesis_profiles")
    except ModuleNotFoundError as exc:
        if exc.name == "chongming_conformance.checking.hypothesis_profiles":
            raise pytest.UsageError(
                f"--chongming-profile={name!r}: this build of chongming-conformance has no "
                "profiles module (chongming_conformance.checking.hypothesis_profiles)."
            ) from None
        raise
    try:
        profiles.load_profile(name)
    except Exception as exc:
        raise pytest.UsageError(
            f"--chongming-profile={name!r}: {type(exc).__name__}: {exc}"
        ) from None
