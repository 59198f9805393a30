"""``chongming-conformance``: check a store, soak it, probe its scale, print the catalogue,
attest a result, verify an attestation, compare two reports, write a badge.

``check`` is a thin front for pytest with the plugin: it runs only the packaged
suite (``--chongming-suite-only``) in a fresh interpreter, so it works in any
directory without collecting that directory's own tests, and returns pytest's
exit status.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Sequence

from .. import __version__
from ..protocol.clauses import CATALOGUE_VERSION
from ..report.catalogue import render_catalogue
from ..report.masking import masked_logging
from ..seam.specs import USAGE_ERROR_EXIT
from ..seam.usage import UsageParser

__all__ = ["DEFAULT_SPEC", "main"]

#: The subcommands of :mod:`.attest.command` (it owns their arguments).
ATTEST_COMMANDS = ("attest", "verify", "diff", "badge")

#: The store ``check`` verifies when given no spec: the embedded default backend.
DEFAULT_SPEC = "reference_stores.sqlite:make_store"


def _parser() -> argparse.ArgumentParser:
    parser = UsageParser(
        prog="chongming-conformance",
        description="Prove a TaskStore backend meets the chongming persistence contract.",
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"chongming-conformance {__version__} (clause catalogue {CATALOGUE_VERSION})",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    check = sub.add_parser(
        "check",
        usage="chongming-conformance check [MODULE:ATTR] [--report PATH] [--gate LEVEL] "
        "[--attest FILE [--attest-key PEM]] [--badge FILE] [pytest args ...]",
        help="run the conformance suite against a store (extra arguments go to pytest)",
        description="Run the conformance suite against MODULE:ATTR (default: "
        f"{DEFAULT_SPEC}). Unknown arguments are passed to pytest, e.g. -x, -k, -q.",
    )
    # The spec is taken by main() (first argument after `check` without a leading dash), so
    # that pytest's own positional values (`-k save`) are never mistaken for it.
    check.add_argument("--spec", dest="spec", default=None, help=argparse.SUPPRESS)
    check.add_argument(
        "--report", metavar="PATH", action="append", default=[],
        help="write the report (.json, .md or .html); may be repeated",
    )
    check.add_argument("--gate", choices=("must", "should"), help="fail unless conformant")
    check.add_argument("--attest", metavar="FILE",
                       help="write the in-toto attestation of the result (.json)")
    check.add_argument("--attest-key", metavar="PRIVATE.pem", help="sign the attestation")
    check.add_argument("--badge", metavar="FILE", help="write the shields.io badge JSON")
    check.add_argument("--shared-store", metavar="MODULE:ATTR", help="shared store factory")
    check.add_argument("--timeout", metavar="SECONDS", help="per-call timeout")
    check.add_argument("--profile", metavar="NAME", help="hypothesis profile")
    sub.add_parser(
        "bench",
        add_help=False,
        help="scale probe: growth of each hot call's latency with the store's size (never gates)",
    )
    sub.add_parser(
        "soak",
        add_help=False,
        help="fresh seeds until the time is up or something fails: stress, state machine, "
        "properties (a nightly campaign, never the gate)",
    )
    for name, text in (
        ("attest", "write the in-toto attestation of a JSON report (optionally signed)"),
        ("verify", "check an attestation against the installed store code, kit and catalogue"),
        ("diff", "compare two JSON reports clause by clause (exit 1 on a regression)"),
        ("badge", "write the shields.io endpoint badge JSON of a report"),
    ):
        sub.add_parser(name, add_help=False, help=text)
    clauses = sub.add_parser("clauses", help="print the clause catalogue")
    clauses.add_argument("--format", choices=("md", "json"), default="md")
    return parser


def _pytest_args(ns: argparse.Namespace, extra: Sequence[str]) -> list[str]:
    args = [f"--chongming-store={ns.spec or os.environ.get('CHONGMING_STORE') or DEFAULT_SPEC}"]
    args.append("--chongming-suite-only")
    if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        args += ["-p", "chongming_conformance.plugin"]
    args += [f"--chongming-report={path}" for path in ns.report]
    for flag, value in (
        ("--chongming-gate", ns.gate),
        ("--chongming-attest", ns.attest),
        ("--chongming-attest-key", ns.attest_key),
        ("--chongming-badge", ns.badge),
        ("--chongming-shared-store", ns.shared_store),
        ("--chongming-timeout", ns.timeout),
        ("--chongming-profile", ns.profile),
    ):
        if value:
            args.append(f"{flag}={value}")
    return args + list(extra)


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point; returns the process exit status."""
    parser = _parser()
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["soak"]:
        # The campaign opens the store in this process (the stress scenarios' parent side).
        from . import soak

        restore_logging = masked_logging()
        try:
            return soak.main(args[1:])
        finally:
            restore_logging()
    if args[:1] == ["bench"]:
        # The probe owns its arguments (``bench --help`` shows them).
        from . import bench

        # The probe opens the store in this process: its driver's logs are masked too.
        restore_logging = masked_logging()
        try:
            return bench.main(args[1:])
        finally:
            restore_logging()
    if args[:1] and args[0] in ATTEST_COMMANDS:
        from ..attest.command import main as attest_main

        return attest_main(args[0], args[1:])
    spec: str | None = None
    if len(args) >= 2 and args[0] == "check" and not args[1].startswith("-"):
        spec = args.pop(1)
    ns, extra = parser.parse_known_args(args)
    if "--" in extra:
        # `check ... -- -x`: the separator is ours; pytest gets what follows it.
        extra.remove("--")
    if spec is not None:
        ns.spec = spec
    if ns.command == "clauses":
        if extra:
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        print(render_catalogue(ns.format))
        return 0
    if ns.command == "check":
        # A fresh interpreter: this one has already imported the package, which would
        # keep pytest from rewriting its asserts (and warn about it).
        return subprocess.call([sys.executable, "-m", "pytest", *_pytest_args(ns, extra)])
    parser.print_help(sys.stderr)
    return USAGE_ERROR_EXIT


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
