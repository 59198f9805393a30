"""What the nemesis applied: each fault as it landed, and the log a run keeps of them.

An applied fault (:class:`Applied`) is the nemesis's evidence -- its real interval on the
workers' clock, what it hit, and the calls it landed in (:class:`Landing`) -- which the
coverage matrix counts (``stress.fault_coverage``), the durability verdict reads (when a
crash began) and the timeline draws among the calls. Kept apart from the nemesis that
applies them, so that what reads a run's faults needs nothing of how they were applied.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .aim import Hit
from .plan import Fault

__all__ = ["LOG_NAME", "PRECISE_UNAIMED", "Applied", "Landing", "read_nemesis_log"]

#: The file a nemesis logs its applied faults to, in the run's log folder.
LOG_NAME = "nemesis.jsonl"
#: Kinds whose landing is recorded, and counts toward a run's coverage, even when not
#: aimed: a pause is applied to a worker the call board shows inside a call; a blackhole,
#: a reset or the server down on a connection with a request in flight leaves that call
#: without its reply for sure. An unaimed lost reply, lost request, cut or latency acts on
#: a connection's *next* chunks, which may belong to a later call or to none: its landings
#: are not known, so none is recorded.
PRECISE_UNAIMED = frozenset({"pause", "blackhole", "reset", "down"})


@dataclass(frozen=True, slots=True)
class Landing:
    """A call a fault landed in: the worker's index and the call's ``seq`` in its log, the
    method, at which round trip (0: not known, a pause or an unaimed fault) of how many the
    method usually makes, and whether the fault was aimed at it."""

    worker: int
    seq: int
    method: str
    round_trip: int = 0
    round_trips: int | None = None
    aimed: bool = False

    def counts(self, kind: str) -> bool:
        """Whether this landing counts toward a run's coverage cells."""
        return self.aimed or kind in PRECISE_UNAIMED

    @classmethod
    def of(cls, hit: Hit) -> Landing:
        return cls(hit.worker, hit.seq, hit.method, hit.round_trip, hit.round_trips, True)

@dataclass(frozen=True, slots=True)
class Applied:
    """A fault as it was applied: its real interval (``time.monotonic()``, the clock of the
    workers' logs), what it hit, and the calls it landed in (``landed``)."""

    fault: Fault
    start: float
    end: float
    detail: str
    landed: tuple[Landing, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        return {"fault": asdict(self.fault), "start": self.start, "end": self.end,
                "detail": self.detail, "landed": [asdict(x) for x in self.landed]}

    @classmethod
    def from_json(cls, rec: Mapping[str, Any]) -> Applied:
        return cls(Fault(**rec["fault"]), float(rec["start"]), float(rec["end"]),
                   str(rec.get("detail", "")),
                   tuple(Landing(**x) for x in rec.get("landed", ())))

    def tally(self) -> Counter[tuple[str, str]]:
        """(kind, method) -> landings that count toward coverage."""
        return Counter((self.fault.kind, x.method) for x in self.landed
                       if x.counts(self.fault.kind))


def read_nemesis_log(logdir: str | Path) -> list[dict[str, Any]]:
    """The applied faults a kept run logged (``[]`` when the run had no nemesis)."""
    path = Path(logdir) / LOG_NAME
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out
