"""``python -m chongming_conformance.stress MODULE:ATTR``: run the scenarios, print a table.

``MODULE:ATTR`` names a ``make_shared_store`` factory. Exit status 0 when every
scenario passes, 1 otherwise. The same numbers feed docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from collections.abc import Sequence

from .integrity import sqlite_opener_integrity
from .runner import IntegrityCheck, run_all
from .scenarios import SCENARIOS
from .stress_profiles import PROFILES


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m chongming_conformance.stress")
    parser.add_argument("factory", help="MODULE:ATTR of a make_shared_store() factory")
    parser.add_argument("--profile", default="ci", choices=sorted(PROFILES))
    parser.add_argument("--scenario", action="append", choices=list(SCENARIOS),
                        help="run only this scenario (repeatable)")
    parser.add_argument("--sqlite-integrity", action="store_true",
                        help="run PRAGMA integrity_check (opener = partial(Store, path))")
    args = parser.parse_args(argv)
    module_name, _, attr = args.factory.partition(":")
    factory = getattr(importlib.import_module(module_name), attr or "make_shared_store")
    integrity: IntegrityCheck | None = sqlite_opener_integrity if args.sqlite_integrity else None
    started = time.monotonic()
    results = run_all(factory, args.profile, scenarios=args.scenario, integrity=integrity)
    total = time.monotonic() - started
    print(f"{'scenario':<20} {'verdict':<8} {'ops':>6} {'ops/s':>8} {'wall s':>7}")
    for r in results:
        verdict = "PASS" if r.ok else "FAIL"
        print(f"{r.scenario:<20} {verdict:<8} {r.ops:>6} {r.ops_per_second:>8.0f} "
              f"{r.wall_seconds:>7.1f}")
    print(f"total wall time {total:.1f} s (profile {args.profile})")
    for r in results:
        if not r.ok:
            print(r.report(), file=sys.stderr)
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
