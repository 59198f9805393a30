"""Steps more than one scenario takes: a logged claim (a role's step) and two verdict helpers.

Kept here, once, so the scenarios that claim commands log their claims the
same way and every verdict words unexpected errors and logical instants alike.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from functools import partial

from ...oracle.messages import with_hint
from ...protocol.model import Command
from ..contention import CONTENTION_HINT, LOCK_CONTENTION, contention_kind, error_text
from ..harness import Harness, WorkerContext
from ..log import Op
from ..records import at, commands_summary

__all__ = ["logged_claim", "report_errors", "when"]


def logged_claim(ctx: WorkerContext, now: float | datetime, lease: float,
                 limit: int, *, qualifier: str | None = None) -> list[Command]:
    """One logged claim at logical ``now`` (seconds after BASE, or a datetime);
    ``qualifier``: its kind of call on the call board (``faults.plan.QUALIFIERS``)."""
    instant = now if isinstance(now, datetime) else at(now)
    out = ctx.call(
        "claim", {"lease_seconds": lease, "limit": limit},
        partial(ctx.store.claim_commands, now=instant, lease_seconds=lease, limit=limit),
        now=instant, summarize=commands_summary, qualifier=qualifier,
    )
    return list(out.value) if out.ok and out.value is not None else []


def when(seconds: float | None) -> str:
    """A logical instant for a message: ``t+12s`` (seconds after BASE), or ``none``."""
    return "none" if seconds is None else f"t+{seconds:g}s"


def report_errors(h: Harness, ops: Iterable[Op], *, conflict_ok: bool = False,
                  kind: str | None = None, clause: str | None = None) -> None:
    """Every store call that raised something it should not have.

    A busy lock or serialization failure gets the kind ``lock-contention`` and
    the hint that fixes it; anything else is ``unexpected-error`` (``kind`` and
    ``clause``, when given, label every anomaly instead). Interleaving
    assumption: none -- a healthy store raises nothing but what the scenario allows
    (the caller passes only the calls that must not raise), whatever runs beside it.
    """
    for op in ops:
        if op.pending or op.ok or (conflict_ok and op.conflict):
            continue
        error = op.error or {}
        found = contention_kind(error, "unexpected-error")
        hint = CONTENTION_HINT if found == LOCK_CONTENTION else None
        h.anomaly(
            kind or found,
            with_hint(f"worker {op.worker}: {op.describe()} raised {error_text(error)}", hint),
            cites=[op], clause=clause, worker=op.worker, op=op.op, round=op.round, error=error,
        )
