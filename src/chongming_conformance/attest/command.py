"""``chongming-conformance attest | verify | diff | badge``: the console front of :mod:`.attest`.

Exit statuses: 0 success (verify: the statement matches and is PASSED; diff: no
regression), 1 a finding (verify: the first mismatch; diff: a regression), 4 a usage
mistake (a missing or unreadable file, a file that is not what the command reads),
said in one line before anything else runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..report.masking import mask_secrets
from ..seam.specs import USAGE_ERROR_EXIT
from ..seam.usage import UsageParser
from . import (
    compare_reports,
    render_comparison,
    report_problem,
    verify_statement,
    write_attestation,
    write_badge,
)
from .signing import SigningUnavailable, is_envelope, open_envelope

__all__ = ["main"]

_DESCRIPTIONS = {
    "attest": "Write the in-toto attestation of a JSON report.",
    "verify": "Check a statement against the installed store code, kit and catalogue; exit 0 "
              "only if all match and the result is PASSED.",
    "diff": "Compare two JSON reports clause by clause; exit 1 on a regression.",
    "badge": "Write the shields.io endpoint badge JSON of a report.",
}


def _parser(command: str) -> argparse.ArgumentParser:
    parser = UsageParser(prog=f"chongming-conformance {command}",
                         description=_DESCRIPTIONS[command])
    if command in ("attest", "badge"):
        parser.add_argument("report", metavar="REPORT.json")
        parser.add_argument("-o", "--output", metavar="FILE", required=True)
    if command == "attest":
        parser.add_argument("--key", metavar="PRIVATE.pem",
                            help="sign it (DSSE envelope) with this local private key")
    elif command == "verify":
        parser.add_argument("statement", metavar="STATEMENT")
        parser.add_argument("--store", metavar="MODULE:ATTR",
                            help="the store whose code to check (default: the one recorded)")
        parser.add_argument("--key", metavar="PUBLIC.pem",
                            help="check a signed statement's signature with this public key")
        parser.add_argument("--allow-warned", action="store_true",
                            help="accept a WARNED result (a SHOULD clause FAILs)")
    elif command == "diff":
        parser.add_argument("old", metavar="OLD.json")
        parser.add_argument("new", metavar="NEW.json")
    return parser


class _Usage(Exception):
    """A mistake in what the user gave: one line, exit status 4."""


def _read_json(path: str, what: str) -> Any:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise _Usage(f"{path}: no such file ({what})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise _Usage(f"{path}: cannot be read ({type(exc).__name__}: {exc})") from None
    except json.JSONDecodeError as exc:
        raise _Usage(f"{path}: not JSON ({exc})") from None


def _read_report(path: str) -> Any:
    doc = _read_json(path, "a JSON report")
    problem = report_problem(doc)
    if problem is not None:
        raise _Usage(f"{path}: {problem}")
    return doc


def _key(path: str | None) -> Path | None:
    if path is not None and not Path(path).is_file():
        raise _Usage(f"--key {path}: no such file")
    return None if path is None else Path(path)


def _run(command: str, ns: argparse.Namespace) -> int:
    if command == "diff":
        comparison = compare_reports(_read_report(ns.old), _read_report(ns.new))
        print("\n".join(render_comparison(comparison)))
        return 1 if comparison.regressions else 0
    if command == "verify":
        document = _read_json(ns.statement, "an attestation")
        if is_envelope(document):
            document = open_envelope(document, _key(ns.key))
        elif ns.key is not None:
            raise _Usage(f"{ns.statement} is not signed (no DSSE envelope): drop --key or "
                         "attest with --key")
        problem = verify_statement(document, ns.store, allow_warned=ns.allow_warned)
        if problem is not None:
            print(f"verify: FAILED: {problem}", file=sys.stderr)
            return 1
        print(f"verify: OK: {ns.statement} matches this installation and is "
              f"{document['predicate']['result']}")
        return 0
    doc = _read_report(ns.report)
    target = Path(ns.output)
    if command == "badge":
        write_badge(doc, target)
    else:
        write_attestation(doc, target, _key(ns.key))
    print(f"{command}: written to {target}")
    return 0


def main(command: str, argv: Sequence[str]) -> int:
    """Run ``command`` with its arguments; returns the exit status."""
    ns = _parser(command).parse_args(list(argv))
    try:
        return _run(command, ns)
    except _Usage as exc:
        print(f"chongming-conformance {command}: {mask_secrets(str(exc))}", file=sys.stderr)
        return USAGE_ERROR_EXIT
    except (ValueError, LookupError, SigningUnavailable) as exc:
        # A statement whose signature fails, a report of another catalogue, a store
        # whose code is not found: a finding about the input, said in one line.
        print(f"chongming-conformance {command}: {mask_secrets(str(exc))}", file=sys.stderr)
        return 1 if command == "verify" else USAGE_ERROR_EXIT
