"""``python -m chongming_conformance.stress MODULE:ATTR``: run the scenarios, print a table.

``MODULE:ATTR`` names a ``make_shared_store`` factory. Exit status 0 when every
scenario passes, 1 when one fails or is ERROR (its set-up failed, so the run is
incomplete: an error of the run, not evidence against the store), 2 when none fails but
one is NOT VERIFIED (its verdict could not be reached: the linearizability checker ran
out of its budget).
The same numbers feed docs/benchmarks.md.

Two commands read the worker logs a run kept (the first argument picks them):

* ``python -m chongming_conformance.stress timeline LOGDIR [--task ID] [--command ID]
  [--around SECONDS]`` prints every worker's calls merged in time order
  (``stress.timeline``);
* ``python -m chongming_conformance.stress lincheck LOGDIR`` checks the recorded
  history for linearizability (``stress.lincheck``; exit 0 linearizable, 1 violation,
  2 not verified).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import secrets
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from ..faults.deployment import DeploymentError, describe_topology, find_deployment
from ..protocol.capabilities import CapabilityError, declared_capabilities
from ..protocol.clauses import unjudged_fault_clauses
from ..report.coverage import render_coverage_text
from .integrity import sqlite_opener_integrity
from .runner import IntegrityCheck, run_all
from .scenarios import SCENARIOS
from .stress_profiles import FAULT_MODES, PROFILES, StressProfile, get_profile


def lincheck_main(argv: Sequence[str]) -> int:
    """``lincheck LOGDIR``: the linearizability verdict on a kept run's recorded history."""
    from .lincheck import Budget, UnrecordedCalls, Verdict, check, read_history

    defaults = Budget()
    parser = argparse.ArgumentParser(prog="python -m chongming_conformance.stress lincheck")
    parser.add_argument("logdir", help="the folder a run kept its worker logs in")
    parser.add_argument("--max-states", type=int, default=defaults.max_states)
    parser.add_argument("--max-seconds", type=float, default=defaults.max_seconds)
    parser.add_argument("--reports", type=int, default=defaults.reports,
                        help="how many failing partitions to minimise and print")
    parser.add_argument("--skip", choices=["any", "concurrent"], default="any",
                        help="which commands a claim may skip: any (SKIP LOCKED, default) or "
                             "only those a concurrent call may hold locked")
    args = parser.parse_args(argv)
    try:
        calls = read_history(args.logdir)
    except (FileNotFoundError, UnrecordedCalls) as exc:
        print(exc, file=sys.stderr)
        return 4
    budget = Budget(max_states=args.max_states, max_seconds=args.max_seconds,
                    minimise_seconds=defaults.minimise_seconds, reports=args.reports)
    result = check(calls, budget=budget, skip=args.skip)
    print(result.report(limit=args.reports))
    return {Verdict.LINEARIZABLE: 0, Verdict.VIOLATION: 1, Verdict.INCONCLUSIVE: 2}[
        result.verdict]


def _network_absent(factory: object, module: object) -> str | None:
    """The reason the store declares it talks to no server (``CHONGMING_CAPABILITIES``)."""
    try:
        caps = declared_capabilities(factory, module, "the factory")
    except CapabilityError:
        return None  # the plugin reports a malformed declaration; the harness ignores it
    return caps.unsupported.get("network")


def _report_paths(parser: argparse.ArgumentParser, paths: Sequence[str]) -> list[Path]:
    """``--report``/``--html`` paths, each checked before anything runs."""
    from ..report.formats import format_problem

    out = []
    for p in paths:
        problem = format_problem(p)
        if problem is not None:
            parser.error(f"--report {problem}")
        out.append(Path(p).resolve())
    return out


def _seed(text: str) -> int:
    """``--seed``: a whole number >= 0, or ``random`` (drawn here, once, and printed)."""
    if text == "random":
        return secrets.randbelow(2**31)
    try:
        seed = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("give a whole number >= 0, or 'random'") from None
    if seed < 0:
        raise argparse.ArgumentTypeError("a seed is a whole number >= 0")
    return seed


def replay(args: argparse.Namespace, profile: StressProfile, scenario: str) -> str:
    """The command that runs ``scenario`` again on the same schedule."""
    parts = ["python", "-m", "chongming_conformance.stress", args.factory, "--profile",
             args.profile, "--scenario", scenario, "--seed", str(profile.seed)]
    if args.crash_cycles is not None:
        parts += ["--crash-cycles", str(profile.crash_cycles)]
    if profile.faults != "none":
        parts += ["--faults", profile.faults]
    if args.sqlite_integrity:
        parts.append("--sqlite-integrity")
    return shlex.join(parts)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "timeline":
        from .timeline import main as timeline_main

        return timeline_main(argv[1:])
    if argv and argv[0] == "lincheck":
        return lincheck_main(argv[1:])
    parser = argparse.ArgumentParser(
        prog="python -m chongming_conformance.stress",
        epilog="Kept logs: 'python -m chongming_conformance.stress timeline LOGDIR' and "
               "'python -m chongming_conformance.stress lincheck LOGDIR'.")
    parser.add_argument("factory", help="MODULE:ATTR of a make_shared_store() factory")
    parser.add_argument("--profile", default="ci", choices=sorted(PROFILES))
    parser.add_argument("--scenario", action="append", choices=list(SCENARIOS),
                        help="run only this scenario (repeatable)")
    parser.add_argument("--sqlite-integrity", action="store_true",
                        help="run PRAGMA integrity_check (opener = partial(Store, path))")
    parser.add_argument("--faults", choices=FAULT_MODES, default="none",
                        help="also run the fault workload: 'pause' stops workers mid-call, "
                             "'network' also breaks the connections make_shared_store(network="
                             "...) routes through the kit's proxy, 'deployment' also takes the "
                             "actions the module's chongming_deployment() offers (crash and "
                             "restart its server) and judges durability (docs/faults.md)")
    parser.add_argument("--seed", type=_seed, default=None, metavar="N|random",
                        help="seed of the stress schedules and the fault schedule (default: "
                             "the profile's, 0; 'random' draws a fresh one and prints it)")
    parser.add_argument("--crash-cycles", type=int, default=None, metavar="N",
                        help="how many holders the crash scenarios and the mixed workload "
                             "SIGKILL mid-call (default: the profile's)")
    parser.add_argument("--keep-logs", action="store_true",
                        help="keep every scenario's worker logs, not only a failing one's "
                             "(for 'timeline' and 'lincheck')")
    parser.add_argument("--report", metavar="FILE", action="append", default=[],
                        help="also write the run as a conformance report: .html (the "
                             "histories drawn), .json or .md; repeatable. Every clause the "
                             "run did not check is NOT VERIFIED and the report says it is "
                             "partial")
    parser.add_argument("--html", metavar="FILE", action="append", default=[],
                        help="the same as --report FILE for an .html file")
    args = parser.parse_args(argv)
    reports = _report_paths(parser, [*args.report, *args.html])
    module_name, _, attr = args.factory.partition(":")
    module = importlib.import_module(module_name)
    factory = getattr(module, attr or "make_shared_store")
    try:
        deployment = find_deployment(module)
    except DeploymentError as exc:
        print(f"{args.factory}: {exc}", file=sys.stderr)
        return 4
    integrity: IntegrityCheck | None = sqlite_opener_integrity if args.sqlite_integrity else None
    profile = dataclasses.replace(get_profile(args.profile), faults=args.faults)
    if args.seed is not None:
        profile = dataclasses.replace(profile, seed=args.seed)
    if args.crash_cycles is not None:
        try:
            profile = dataclasses.replace(profile, crash_cycles=args.crash_cycles)
        except ValueError as exc:
            parser.error(f"--crash-cycles: {exc}")
    started, wall = time.monotonic(), time.time()
    results = run_all(factory, profile, scenarios=args.scenario, integrity=integrity,
                      keep_logs=True if args.keep_logs else None,
                      network_absent=_network_absent(factory, module), deployment=deployment)
    total = time.monotonic() - started
    print(f"{'scenario':<20} {'verdict':<12} {'ops':>6} {'ops/s':>8} {'wall s':>7}")
    for r in results:
        print(f"{r.scenario:<20} {r.verdict:<12} {r.ops:>6} {r.ops_per_second:>8.0f} "
              f"{r.wall_seconds:>7.1f}")
    print(f"total wall time {total:.1f} s (profile {args.profile}, seed {profile.seed}, "
          f"faults {profile.faults})")
    for r in results:
        for line in r.coverage:
            print(f"{r.scenario}: covered {line}")
        if r.fault_coverage is not None:
            for line in render_coverage_text(r.fault_coverage):
                print(f"{r.scenario}: {line}")
        for clause, why in r.unproven.items():
            print(f"{r.scenario}: NOT VERIFIED {clause}: {why}")
    for r in results:
        if r.ok and r.log_dir:
            print(f"{r.scenario}: worker logs kept in {r.log_dir}")
    for r in results:
        if not r.ok:
            print(r.report(), file=sys.stderr)
    for r in results:
        if r.failed:
            print(f"replay {r.scenario}: {replay(args, profile, r.scenario)}", file=sys.stderr)
    unjudged = unjudged_fault_clauses(profile.faults, crash_offered=deployment is not None
                                      and bool(deployment.crashes))
    if reports:
        from ..report.formats import write_report
        from .report_document import stress_document

        doc = stress_document(
            results, spec=args.factory, profile=profile, started=wall,
            topology=describe_topology(profile.faults, _network_absent(factory, module),
                                       deployment, args.factory))
        for target in reports:
            write_report(doc, target)
            print(f"report written to {target}")
    for clause, why in unjudged.items():
        print(f"NOT VERIFIED {clause}: {why}", file=sys.stderr)
    errored = [r.scenario for r in results if r.errored]
    if errored:
        print(f"ERROR: {len(errored)} scenario(s) could not be set up ({', '.join(errored)}): "
              "the run is incomplete, and says nothing about the store", file=sys.stderr)
    if errored or any(r.failed for r in results):
        return 1
    return 2 if unjudged or any(r.unverified for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
