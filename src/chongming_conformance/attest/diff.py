"""Two reports compared clause by clause: what changed, regressions first.

Reports from any kit version are read, using only the keys every version has had
(``catalogue_version``, ``verdict`` and each clause's ``id``, ``level``, ``text`` and
``outcome``). Between catalogue versions a clause may be added, removed or renamed:

* renamed: the kit's own record of renames
  (:data:`~chongming_conformance.protocol.clauses.RENAMED`), or an id gone and another new
  one with the very same text;
* added or removed: reported as such, whatever their outcome, never as a regression.

A *regression* is a clause present in both (under its old or new id) whose outcome got
worse: it now FAILs and did not, or it PASSed and is now NOT VERIFIED (the evidence
is gone). ``diff`` exits 1 when there is one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..protocol.clauses import RENAMED

__all__ = ["ClauseChange", "Comparison", "compare_reports", "render_comparison",
           "report_problem"]

_WORSE = {("PASS", "NOT VERIFIED")}


@dataclass(frozen=True)
class ClauseChange:
    """One clause's change between two reports."""

    kind: str  # regression, outcome, renamed, added, removed, level, text
    id: str
    old_id: str | None = None
    old: str | None = None
    new: str | None = None

    def describe(self) -> str:
        if self.kind == "renamed":
            return f"{self.old_id} -> {self.id} (renamed; {self.old} -> {self.new})"
        if self.kind == "added":
            return f"{self.id} (new clause): {self.new}"
        if self.kind == "removed":
            return f"{self.id} (no longer in the catalogue; was {self.old})"
        if self.kind in ("level", "text"):
            return f"{self.id}: {self.kind} changed: {self.old!r} -> {self.new!r}"
        label = self.id if self.old_id in (None, self.id) else f"{self.old_id} -> {self.id}"
        return f"{label}: {self.old} -> {self.new}"


@dataclass(frozen=True)
class Comparison:
    old_catalogue: str
    new_catalogue: str
    old_verdict: str
    new_verdict: str
    changes: list[ClauseChange]

    @property
    def regressions(self) -> list[ClauseChange]:
        return [c for c in self.changes if c.kind == "regression"]


def report_problem(doc: Any) -> str | None:
    """Why ``doc`` is not a report ``diff`` can read (None: it is one)."""
    if not isinstance(doc, Mapping) or doc.get("schema") != "chongming-conformance-report":
        return "not a chongming-conformance JSON report"
    clauses = doc.get("clauses")
    if not isinstance(clauses, list):
        return "its 'clauses' is not a list"
    for entry in clauses:
        if not isinstance(entry, Mapping) or not all(
            isinstance(entry.get(k), str) for k in ("id", "level", "text", "outcome")
        ):
            return "a clause entry lacks id, level, text or outcome"
    return None


def _is_regression(old: str, new: str) -> bool:
    return (new == "FAIL" and old != "FAIL") or (old, new) in _WORSE


def _pairs(old: Mapping[str, Mapping[str, Any]], new: Mapping[str, Mapping[str, Any]]
           ) -> tuple[list[tuple[str, str]], list[str], list[str]]:
    """(old id, new id) pairs for clauses in both, then ids only in old, only in new."""
    pairs = [(i, i) for i in old if i in new]
    gone = [i for i in old if i not in new]
    fresh = [i for i in new if i not in old]
    for old_id in list(gone):
        target = RENAMED.get(old_id)
        if target is None:
            same_text = [i for i in fresh if new[i]["text"] == old[old_id]["text"]]
            target = same_text[0] if len(same_text) == 1 else None
        if target in fresh:
            pairs.append((old_id, target))
            gone.remove(old_id)
            fresh.remove(target)
    return pairs, gone, fresh


def compare_reports(old_doc: Mapping[str, Any], new_doc: Mapping[str, Any]) -> Comparison:
    """Every clause-level change from ``old_doc`` to ``new_doc`` (both pass
    :func:`report_problem`), regressions first, then other outcome changes, renames,
    added and removed clauses, level and text changes."""
    old = {c["id"]: c for c in old_doc["clauses"]}
    new = {c["id"]: c for c in new_doc["clauses"]}
    pairs, gone, fresh = _pairs(old, new)
    buckets: dict[str, list[ClauseChange]] = {k: [] for k in (
        "regression", "outcome", "renamed", "added", "removed", "level", "text")}
    for old_id, new_id in pairs:
        before, after = old[old_id]["outcome"], new[new_id]["outcome"]
        if before != after:
            kind = "regression" if _is_regression(before, after) else "outcome"
            buckets[kind].append(ClauseChange(kind, new_id, old_id, before, after))
        if old_id != new_id:
            buckets["renamed"].append(ClauseChange("renamed", new_id, old_id, before, after))
        for key in ("level", "text"):
            if old[old_id][key] != new[new_id][key]:
                buckets[key].append(ClauseChange(key, new_id, old_id, old[old_id][key],
                                                 new[new_id][key]))
    buckets["added"] = [ClauseChange("added", i, new=new[i]["outcome"]) for i in fresh]
    buckets["removed"] = [ClauseChange("removed", i, old=old[i]["outcome"]) for i in gone]
    # PASS -> FAIL leads, then the other regressions, each group in catalogue order.
    buckets["regression"].sort(key=lambda c: c.old != "PASS" or c.new != "FAIL")
    return Comparison(
        old_catalogue=str(old_doc.get("catalogue_version")),
        new_catalogue=str(new_doc.get("catalogue_version")),
        old_verdict=str(old_doc.get("verdict")),
        new_verdict=str(new_doc.get("verdict")),
        changes=[c for bucket in buckets.values() for c in bucket],
    )


_HEADINGS = {
    "regression": "Regressions", "outcome": "Other outcome changes", "renamed": "Renamed",
    "added": "Added to the catalogue", "removed": "Removed from the catalogue",
    "level": "Level changed", "text": "Requirement text changed",
}


def render_comparison(comparison: Comparison) -> Sequence[str]:
    """The comparison as lines of text."""
    lines = [f"catalogue {comparison.old_catalogue} -> {comparison.new_catalogue}",
             f"verdict: {comparison.old_verdict}",
             f"      -> {comparison.new_verdict}"]
    for kind, heading in _HEADINGS.items():
        group = [c for c in comparison.changes if c.kind == kind]
        if group:
            lines.append(f"{heading} ({len(group)}):")
            lines += [f"  {c.describe()}" for c in group]
    if not comparison.changes:
        lines.append("no clause changed")
    lines.append(f"{len(comparison.regressions)} regression(s)")
    return lines
