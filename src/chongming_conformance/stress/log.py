"""Per-worker JSON-lines operation logs, written by workers and read by the verdicts.

One line per event, flushed as it is written: a line the worker finished
writing is in the OS page cache, so it survives a SIGKILL of the worker (only
a machine crash could lose it, which is not what the harness simulates).

Line shapes (``t`` is ``time.monotonic()``, system-wide on Linux and macOS,
used for evidence and "stuck for N s" messages, never for a verdict):

* ``{"ev": "inv", "w", "seq", "op", "round", "now", "detail", "t"}`` -- a call starts;
  a call made with ``record=True`` also has ``"call": {"method", "args"}`` (the full
  arguments, ``stress.calls``);
* ``{"ev": "ret", "w", "seq", "ok", "value", "error", "t"}`` -- it returned or raised;
  a recorded call that returned also has ``"result"`` (the whole value, ``stress.calls``);
* ``{"ev": "note", "w", "what", ...}`` -- start, done, barrier-broken, crash.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from ..report.masking import mask_all

__all__ = ["Logs", "Op", "OpLog", "read_log_dir", "read_logs"]

#: The fields that carry exception text (masked); values and details are left exact.
_MASKED = frozenset({"error", "traceback"})
#: "No full result logged" (None is a result: ``get`` of a missing task).
_ABSENT: Any = object()


class OpLog:
    """Append-only writer of one worker's log."""

    def __init__(self, path: Path, worker: int, role: str) -> None:
        self.worker = worker
        self.role = role
        self._seq = 0
        self._file: IO[str] = path.open("a", encoding="utf-8", buffering=1)

    def _write(self, record: dict[str, Any]) -> None:
        # Error texts may quote the store's DSN; kept logs are attached to CI runs.
        record = {k: mask_all(v) if k in _MASKED else v for k, v in record.items()}
        self._file.write(json.dumps(record, separators=(",", ":"), default=str) + "\n")
        self._file.flush()

    def invoke(
        self, op: str, detail: dict[str, Any], *, round_: int | None, now: str | None,
        call: dict[str, Any] | None = None,
    ) -> int:
        """Log the start of a store call; returns its sequence number.

        The stamp ``t`` is taken before the line is written, so it is never later than
        the call's real start (a checker that orders calls by it stays sound).
        """
        self._seq += 1
        record = {"ev": "inv", "w": self.worker, "seq": self._seq, "op": op, "round": round_,
                  "now": now, "detail": detail, "t": time.monotonic()}
        if call is not None:
            record["call"] = call
        self._write(record)
        return self._seq

    def result(self, seq: int, *, ok: bool, value: Any = None,
               error: dict[str, Any] | None = None, result: Any = _ABSENT,
               t: float | None = None) -> None:
        """Log how the call ``seq`` ended; ``t`` is when it returned (default: now), never
        earlier than the real return. ``result`` is the full value of a recorded call."""
        record = {"ev": "ret", "w": self.worker, "seq": seq, "ok": ok, "value": value,
                  "error": error, "t": time.monotonic() if t is None else t}
        if result is not _ABSENT:
            record["result"] = result
        self._write(record)

    def note(self, what: str, **extra: Any) -> None:
        """Log a non-store event (start, done, barrier-broken, crash)."""
        self._write({"ev": "note", "w": self.worker, "role": self.role, "what": what,
                     "t": time.monotonic(), **extra})

    def close(self) -> None:
        self._file.close()


@dataclass(slots=True)
class Op:
    """One store call as a verdict sees it; ``pending`` if it never returned."""

    worker: int
    seq: int
    op: str
    round: int | None
    now: str | None
    detail: dict[str, Any]
    t_invoke: float
    t_return: float | None = None
    ok: bool = False
    value: Any = None
    error: dict[str, Any] | None = None
    #: ``{"method", "args"}`` of a call made with ``record=True`` (``stress.calls``).
    call: dict[str, Any] | None = None
    #: The whole encoded result of a recorded call that returned (``has_result``).
    result: Any = None
    has_result: bool = False

    @property
    def pending(self) -> bool:
        return self.t_return is None

    @property
    def conflict(self) -> bool:
        return self.error is not None and bool(self.error.get("conflict"))

    def describe(self) -> str:
        """Short human form for messages: ``save(task='t', expect=2) at round 3``."""
        args = ", ".join(f"{k}={v!r}" for k, v in self.detail.items())
        where = "" if self.round is None else f" in round {self.round}"
        return f"{self.op}({args}){where}"


@dataclass(slots=True)
class Logs:
    """Everything one group of workers logged, keyed by worker index."""

    ops: dict[int, list[Op]] = field(default_factory=dict)
    notes: dict[int, list[dict[str, Any]]] = field(default_factory=dict)

    def all_ops(self) -> Iterator[Op]:
        for worker in sorted(self.ops):
            yield from self.ops[worker]

    def done(self, op: str) -> Iterator[Op]:
        """Returned calls of one kind (ok or raised), all workers."""
        return (o for o in self.all_ops() if o.op == op and not o.pending)

    def last_pending(self, worker: int) -> Op | None:
        pending = [o for o in self.ops.get(worker, []) if o.pending]
        return pending[-1] if pending else None

    def count(self) -> int:
        return sum(1 for o in self.all_ops() if not o.pending)

    def span(self) -> float:
        """Seconds from the first call to the last return (0 when nothing ran)."""
        starts = [o.t_invoke for o in self.all_ops()]
        ends = [o.t_return for o in self.all_ops() if o.t_return is not None]
        return max(ends) - min(starts) if starts and ends else 0.0


def _read_lines(path: Path) -> Iterator[dict[str, Any]]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line torn by SIGKILL mid-write: the call it starts counts as pending
        if isinstance(record, dict):
            yield record


def read_logs(paths: dict[int, Path]) -> Logs:
    """Pair invoke and result lines of every worker's log."""
    logs = Logs()
    for worker, path in paths.items():
        by_seq: dict[int, Op] = {}
        ops: list[Op] = []
        notes: list[dict[str, Any]] = []
        for rec in _read_lines(path):
            ev = rec.get("ev")
            if ev == "inv":
                op = Op(worker, rec["seq"], rec["op"], rec.get("round"), rec.get("now"),
                        rec.get("detail") or {}, rec["t"], call=rec.get("call"))
                by_seq[op.seq] = op
                ops.append(op)
            elif ev == "ret" and rec.get("seq") in by_seq:
                op = by_seq[rec["seq"]]
                op.t_return = rec["t"]
                op.ok = bool(rec.get("ok"))
                op.value = rec.get("value")
                op.error = rec.get("error")
                if "result" in rec:
                    op.result, op.has_result = rec["result"], True
            elif ev == "note":
                notes.append(rec)
        logs.ops[worker] = ops
        logs.notes[worker] = notes
    return logs


def read_log_dir(logdir: str | Path) -> list[tuple[str, Logs]]:
    """Every group of a kept run's log folder (``group<k>/worker<i>-<role>.jsonl``, as the
    harness writes it), in group order, each with the prefix that names its workers in
    merged output: ``""`` when the run had one group, else ``"g<k>."``.

    A folder that holds worker files directly (no group folders) is one group.
    """
    root = Path(logdir)
    if not root.is_dir():
        raise FileNotFoundError(f"no such log folder: {root}")

    def group_number(folder: Path) -> int:
        digits = folder.name[len("group"):]
        return int(digits) if digits.isdigit() else 0

    folders = sorted((d for d in root.iterdir() if d.is_dir() and d.name.startswith("group")),
                     key=group_number)
    if not folders and any(root.glob("worker*.jsonl")):
        folders = [root]
    groups: list[tuple[str, Logs]] = []
    for folder in folders:
        paths: dict[int, Path] = {}
        for path in sorted(folder.glob("worker*.jsonl")):
            digits = path.name[len("worker"):].split("-", 1)[0].split(".", 1)[0]
            if digits.isdigit():
                paths[int(digits)] = path
        prefix = "" if len(folders) == 1 else f"g{group_number(folder)}."
        groups.append((prefix, read_logs(paths)))
    return groups
