"""The argument parser every console front of the kit uses: mistakes exit with status 4.

``chongming-conformance check --gate maybe``, ``chongming-conformance bench`` with
a bad option and ``pytest --chongming-gate=maybe`` are the same kind of mistake;
a CI script should not need to know which front it went through. ``cli`` and
``bench`` both build their parsers from :class:`UsageParser`, which is why it
lives below both of them.
"""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

from .specs import USAGE_ERROR_EXIT

__all__ = ["UsageParser"]


class UsageParser(argparse.ArgumentParser):
    """An argument parser whose mistakes exit with pytest's usage-error status (4)."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(USAGE_ERROR_EXIT, f"{self.prog}: error: {message}\n")
