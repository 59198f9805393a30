"""``chongming-conformance soak MODULE:ATTR --for 30m``: fresh schedules until one fails.

The gate runs one schedule -- stress seed 0, hypothesis derandomized -- so that a green
gate means the same thing every time. A store whose bug only some schedules reach passes
it for ever; Jepsen finds such bugs with long campaigns over fresh schedules. A soak is
that campaign: round after round, each on a new seed, it runs

1. every stress scenario on the store's ``make_shared_store`` (the mixed workload first:
   it makes every collision the others make), in this process, each on a fresh location;
2. the stateful model test and the property checks, through the plugin in a fresh
   interpreter with ``--chongming-seed`` set to the round's seed;

until the time is up, the first failure, or Ctrl-C. A progress line follows each step
(elapsed, seeds tried, calls checked, faults injected, anomalies); a failure stops the
campaign with the command that replays it through the plugin (the same seed: the same
workers' choices and fault schedule, not the same interleaving -- a replay may need a few
runs) and where its logs are kept. The campaign ends with a summary, printed and (with
``--json FILE``) written as JSON; an interrupted campaign writes the summary of what ran.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import re
import secrets
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..faults.deployment import DeploymentError, find_deployment
from ..protocol.capabilities import CapabilityError, declared_capabilities
from ..report.masking import mask_secrets
from ..seam.specs import USAGE_ERROR_EXIT, SpecError, resolve_spec
from ..seam.timeouts import DEFAULT_TIMEOUT

__all__ = ["Campaign", "main", "parse_duration"]

#: The test classes the hypothesis part of a round runs (``-k``).
HYPOTHESIS_TESTS = "TestStoreStateMachine or TestStoreProperties"
SHARED_ATTR = "make_shared_store"


def parse_duration(text: str) -> float:
    """``90s``, ``30m``, ``2h``, ``1h30m`` or plain seconds -> seconds (> 0)."""
    t = text.strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", t):
        seconds = float(t)
    else:
        parts = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", t)
        if not parts or not any(parts.groups()):
            raise argparse.ArgumentTypeError(f"{text!r}: a duration such as 90s, 30m, 2h, "
                                             "1h30m or a number of seconds")
        h, m, s = (int(g or 0) for g in parts.groups())
        seconds = float(h * 3600 + m * 60 + s)
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: the duration must be positive")
    return seconds


@dataclass
class Step:
    """One thing a round ran, as the summary lists it."""

    round: int
    seed: int
    what: str
    verdict: str
    seconds: float
    calls: int = 0
    faults: int = 0
    anomalies: int = 0
    replay: str | None = None
    logs: str | None = None
    detail: str | None = None


@dataclass
class Campaign:
    """What a soak ran so far: its summary, whenever it stops."""

    spec: str
    started: float = field(default_factory=time.monotonic)
    seeds: list[int] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    stopped: str = "time is up"
    #: The stress results of the round running now (the last round, once it stops): what
    #: ``--html`` draws. Not part of the summary.
    results: list[Any] = field(default_factory=list, repr=False)
    profile: Any = field(default=None, repr=False)
    wall_started: float = field(default_factory=time.time, repr=False)

    @property
    def failure(self) -> Step | None:
        """The step the soak stopped at: the first FAIL, or the first ERROR (a set-up
        that failed: the soak cannot go on, but it is no evidence against the store)."""
        return next((s for s in self.steps if s.verdict in ("FAIL", "ERROR")), None)

    def totals(self) -> dict[str, int]:
        return {"calls": sum(s.calls for s in self.steps),
                "faults": sum(s.faults for s in self.steps),
                "anomalies": sum(s.anomalies for s in self.steps)}

    def progress(self) -> str:
        t = self.totals()
        return (f"soak {self.spec}: {time.monotonic() - self.started:.0f} s, {len(self.seeds)} "
                f"seed(s) tried, {len(self.steps)} step(s), {t['calls']} calls checked, "
                f"{t['faults']} faults injected, {t['anomalies']} anomalies")

    def summary(self) -> dict[str, Any]:
        failure = self.failure
        not_verified = [s for s in self.steps if s.verdict == "NOT VERIFIED"]
        return {
            "spec": self.spec,
            "seconds": round(time.monotonic() - self.started, 1),
            "stopped": self.stopped,
            "verdict": (failure.verdict if failure else "NOT VERIFIED" if not_verified else
                        "PASS" if self.steps else "NOTHING RAN"),
            "seeds": list(self.seeds),
            **self.totals(),
            "failure": None if failure is None else dataclasses.asdict(failure),
            "steps": [dataclasses.asdict(s) for s in self.steps],
        }


def _stress_step(round_: int, seed: int, name: str,
                 factory: Callable[..., Any], profile: Any, spec: str, options: Any,
                 network_absent: str | None, deployment: Any,
                 keep: list[Any]) -> Step:
    from ..stress.runner import run_all
    from ..stress.scenarios import SCENARIOS

    started = time.monotonic()
    [result] = run_all(factory, profile, scenarios=[name], network_absent=network_absent,
                       deployment=deployment)
    keep.append(result)
    test = SCENARIOS[name].test_name
    replay = shlex.join([
        "pytest", f"--chongming-store={spec}", f"--chongming-stress={options.stress}",
        f"--chongming-seed={seed}",
        *([f"--chongming-faults={options.faults}"] if options.faults != "none" else []),
        "-k", test])
    applied = result.stats.get("faults_applied") or {}
    return Step(round_, seed, f"stress {name}", result.verdict, time.monotonic() - started,
                calls=result.ops, faults=sum(applied.values()), anomalies=len(result.anomalies),
                replay=replay if not result.ok else None, logs=result.log_dir,
                detail=None if result.ok else mask_secrets(result.report(limit=2, chars=3000)))


def _hypothesis_step(round_: int, seed: int, spec: str, options: Any, workdir: Path) -> Step:
    """The state machine and the properties through the plugin, on ``seed``."""
    report = workdir / f"round-{round_}.json"
    args = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
            f"--chongming-store={spec}", "--chongming-suite-only", f"--chongming-seed={seed}",
            "--chongming-scope=single", "-k", HYPOTHESIS_TESTS,
            f"--chongming-report={report}"]
    if options.profile:
        args.append(f"--chongming-profile={options.profile}")
    started = time.monotonic()
    proc = subprocess.run(args, capture_output=True, text=True, cwd=workdir,
                          timeout=options.step_timeout)
    seconds = time.monotonic() - started
    try:
        doc = json.loads(report.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return Step(round_, seed, "state machine and properties", "FAIL", seconds,
                    detail=mask_secrets(f"pytest exited {proc.returncode} without a report:\n"
                                        + (proc.stdout + proc.stderr)[-3000:]))
    from ..report.replay import failing_nodeids, replay_command

    failing = failing_nodeids(doc)
    tests = {t["nodeid"] for c in doc["clauses"] for t in c.get("tests", ())}
    verdict = "FAIL" if failing or proc.returncode not in (0,) else "PASS"
    replay = replay_command(doc, failing[0]) if failing else None
    return Step(round_, seed, "state machine and properties", verdict, seconds,
                calls=0, anomalies=len(failing),
                replay=replay, logs=str(report) if verdict != "PASS" else None,
                detail=None if verdict == "PASS" else
                f"{len(failing)} of {len(tests)} test(s) failed: {', '.join(failing[:4])}"
                + ("" if failing else f"; pytest exited {proc.returncode}"))


def run_campaign(spec: str, options: Any, out: Callable[[str], None] = print) -> Campaign:
    """The soak itself (see the module docstring); never raises for the store."""
    from ..stress import get_profile
    from ..stress.runner import selected

    factory, module, label = resolve_spec(spec, "soak", Path.cwd(), DEFAULT_TIMEOUT)
    shared = getattr(module, SHARED_ATTR, None)
    if not callable(shared):
        raise SpecError(f"soak {spec}: {module.__name__} has no {SHARED_ATTR}(): the stress "
                        "scenarios need a shared store (docs/stress.md)")
    try:
        caps = declared_capabilities(factory, module, label)
        deployment = find_deployment(module)
    except (CapabilityError, DeploymentError) as exc:
        raise SpecError(f"soak {spec}: {exc}") from None
    base = dataclasses.replace(get_profile(options.stress), faults=options.faults)
    names = selected(base)
    names.sort(key=lambda n: n != "mixed_workload")  # the mixed workload first
    campaign = Campaign(spec)
    deadline = campaign.started + options.duration
    workdir = Path(options.keep or tempfile.mkdtemp(prefix="chongming-soak-"))
    workdir.mkdir(parents=True, exist_ok=True)
    round_ = 0
    try:
        while time.monotonic() < deadline:
            round_ += 1
            seed = secrets.randbelow(2**31)
            campaign.seeds.append(seed)
            profile = dataclasses.replace(base, seed=seed)
            campaign.results = []
            campaign.profile = profile
            todo: list[str | None] = [*names, *([] if options.no_hypothesis else [None])]
            for name in todo:
                if time.monotonic() >= deadline:
                    break
                if name is None:
                    done = _hypothesis_step(round_, seed, spec, options, workdir)
                else:
                    done = _stress_step(round_, seed, name, shared, profile, spec, options,
                                        caps.unsupported.get("network"), deployment,
                                        campaign.results)
                campaign.steps.append(done)
                out(f"{campaign.progress()} -- round {round_} seed {seed}: {done.what} "
                    f"{done.verdict}")
                if done.verdict in ("FAIL", "ERROR"):
                    first = "failure" if done.verdict == "FAIL" else "error (set-up failed)"
                    campaign.stopped = f"first {first}: {done.what}, seed {seed}"
                    return campaign
    except KeyboardInterrupt:
        campaign.stopped = "interrupted (Ctrl-C or SIGTERM)"
    return campaign


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="chongming-conformance soak",
        description="Run the stress scenarios, the state machine and the property checks "
                    "under fresh seeds until the time is up or something fails.")
    parser.add_argument("spec", metavar="MODULE:ATTR",
                        help="the store factory; make_shared_store must be beside it")
    parser.add_argument("--for", dest="duration", type=parse_duration, default=1800.0,
                        metavar="DURATION", help="how long: 90s, 30m, 2h (default 30m)")
    parser.add_argument("--stress", default="quick", choices=("quick", "ci", "thorough"),
                        help="stress profile of each round (default quick: more seeds)")
    parser.add_argument("--faults", default="none",
                        choices=("none", "pause", "network", "deployment"),
                        help="also run the fault workload under this mode (docs/faults.md)")
    parser.add_argument("--profile", default=None, choices=("quick", "ci", "thorough"),
                        help="hypothesis profile of the state machine and properties")
    parser.add_argument("--no-hypothesis", action="store_true",
                        help="stress scenarios only")
    parser.add_argument("--json", metavar="FILE", help="write the campaign summary as JSON")
    parser.add_argument("--html", metavar="FILE", action="append", default=[],
                        help="write the failing step's report as HTML, its history drawn "
                             "(no failure: the last round's scenarios)")
    parser.add_argument("--keep", metavar="DIR",
                        help="where the rounds' reports go (default: a temporary folder)")
    parser.add_argument("--step-timeout", type=float, default=1800.0, metavar="SECONDS",
                        help=argparse.SUPPRESS)
    return parser


def _print_summary(summary: dict[str, Any], out: Callable[[str], None]) -> None:
    out(f"soak summary: {summary['verdict']} after {summary['seconds']:.0f} s "
        f"({summary['stopped']}); {len(summary['seeds'])} seed(s), {len(summary['steps'])} "
        f"step(s), {summary['calls']} calls checked, {summary['faults']} faults injected, "
        f"{summary['anomalies']} anomalies")
    failure = summary["failure"]
    if failure:
        said = "error (its set-up failed)" if failure["verdict"] == "ERROR" else "failed"
        out(f"{said}: {failure['what']} on seed {failure['seed']}")
        if failure.get("detail"):
            out(failure["detail"])
        if failure.get("logs"):
            out(f"kept: {failure['logs']}")
        if failure.get("replay"):
            out(f"replay through the plugin: {failure['replay']}")


def _base_profile() -> Any:
    from ..stress import get_profile

    return get_profile("quick")


def _write_html(campaign: Campaign, summary: dict[str, Any], target: Path) -> None:
    """The HTML report of the failing step (the plugin's own report of a failing
    hypothesis step), else of the last round's stress scenarios."""
    from ..report.formats import write_report

    failure = campaign.failure
    if failure is not None and failure.what.startswith("state machine") and failure.logs:
        with contextlib.suppress(OSError, ValueError):
            write_report(json.loads(Path(failure.logs).read_text(encoding="utf-8")), target)
            return
    from ..stress.report_document import stress_document

    if campaign.profile is None:  # stopped before its first round
        write_report(stress_document([], spec=campaign.spec, profile=_base_profile(),
                                     started=campaign.wall_started,
                                     why_partial="a soak campaign that ran nothing"), target)
        return
    results = campaign.results[-1:] if failure is not None else campaign.results
    why = (f"a soak campaign ({summary['stopped']}; {len(campaign.seeds)} seed(s), "
           f"{summary['calls']} calls checked): this report shows "
           + ("its failing step" if failure is not None else "its last round's scenarios"))
    doc = stress_document(results, spec=campaign.spec, profile=campaign.profile,
                          started=campaign.wall_started, why_partial=why)
    write_report(doc, target)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    """Exit 0: every step passed; 1: a failure, or an ERROR (a set-up that failed); 2:
    nothing failed but a step is NOT VERIFIED (or nothing ran); 4: a bad spec or option."""
    parser = _parser()
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    for target in args.html:
        if Path(target).suffix != ".html":
            parser.error(f"--html {target!r} must end in .html")
    # A CI timeout sends SIGTERM: stop as Ctrl-C does, with the summary of what ran.
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        campaign = run_campaign(args.spec, args)
    except SpecError as exc:
        print(exc, file=sys.stderr)
        return USAGE_ERROR_EXIT
    finally:
        signal.signal(signal.SIGTERM, previous)
    summary = campaign.summary()
    _print_summary(summary, print)
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
        print(f"soak summary written to {os.path.abspath(args.json)}")
    for target in args.html:
        _write_html(campaign, summary, Path(target).resolve())
        print(f"soak report written to {os.path.abspath(target)}")
    return {"PASS": 0, "FAIL": 1, "ERROR": 1}.get(summary["verdict"], 2)
