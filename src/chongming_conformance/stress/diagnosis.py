"""What a deadline report says: the store calls blocked for most of it, and the peers' waits.

A scenario that runs into its deadline is almost always one store call
blocked on a lock some other worker holds. The workers log every call before
making it, so even when the holder has exited since (breaking the barrier
releases it, and its lock with it) the logs still show which call sat blocked
and what everybody else was doing meanwhile. Built from the logs alone: no
verdict depends on the timings, they only point at the culprit.
"""

from __future__ import annotations

from collections.abc import Mapping

from .log import Logs, Op

__all__ = ["BLOCKED_SHARE", "blocked_calls", "deadline_report"]

#: A call is "blocked for most of the deadline" when it lasted this share of it.
BLOCKED_SHARE = 0.5


def _duration(op: Op, now: float) -> float:
    return (op.t_return if op.t_return is not None else now) - op.t_invoke


def blocked_calls(logs: Logs, deadline: float, now: float) -> list[Op]:
    """Every store call that took (or has been pending for) most of the deadline."""
    limit = BLOCKED_SHARE * deadline
    return sorted((o for o in logs.all_ops() if _duration(o, now) >= limit),
                  key=lambda o: o.t_invoke)


def _last_wait(logs: Logs, worker: int, before: float) -> str:
    """What ``worker`` was doing at monotonic instant ``before``: a call or the barrier."""
    events: list[tuple[float, str]] = []
    for op in logs.ops.get(worker, []):
        if op.t_invoke <= before:
            ended = op.t_return is not None and op.t_return <= before
            events.append((op.t_invoke, f"{'had finished' if ended else 'was in'} "
                                        f"{op.describe()}"))
    for note in logs.notes.get(worker, []):
        t = note.get("t")
        if isinstance(t, (int, float)) and t <= before:
            what = note.get("what")
            if what == "barrier":
                events.append((t, f"was waiting at the barrier of round {note.get('round')}"))
            elif what in ("opening", "start"):
                doing = "opening the store" if what == "opening" else "starting"
                events.append((t, f"was {doing}"))
    if not events:
        return "had logged nothing yet"
    return max(events, key=lambda e: e[0])[1]


def deadline_report(scenario: str, deadline: float, logs: Logs, roles: Mapping[int, str],
                    now: float) -> str | None:
    """One message naming each blocked call (method, worker, duration) and, at the moment
    it started, what every other worker was waiting on; None if no call was blocked."""
    blocked = blocked_calls(logs, deadline, now)
    if not blocked:
        return None
    lines = [f"scenario {scenario!r} ran into its {deadline:g} s deadline; store calls blocked "
             f"for most of it (>= {BLOCKED_SHARE:.0%}):"]
    for op in blocked:
        took = _duration(op, now)
        end = ("never returned" if op.t_return is None else
               "then " + ("returned" if op.ok else
                          f"raised {(op.error or {}).get('type')}"))
        lines.append(f"  worker {op.worker} ({roles.get(op.worker, '?')}): {op.op}() -- "
                     f"{op.describe()} blocked {took:.1f} s, {end}")
        # Look just after the blocked call began: the peer holding the lock is the one
        # that was inside (or had just finished) a write and then waited elsewhere.
        for peer in sorted(roles):
            if peer != op.worker:
                lines.append(f"    meanwhile worker {peer} ({roles[peer]}) "
                             f"{_last_wait(logs, peer, op.t_invoke + 0.5)}")
    return "\n".join(lines)
