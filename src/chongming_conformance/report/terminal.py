"""The terminal rendering: the clause table and verdict printed at the end of a pytest run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .coverage import coverages, render_coverage_text
from .records import FAIL, NOT_VERIFIED, OUTCOMES, PARTIAL_BANNER, PASS
from .replay import failing_nodeids, replay_command, seeds_line

__all__ = ["failing_test_names", "left_out_line", "render_cases", "render_gate",
           "render_terminal"]

#: Replay commands printed at the end of a run; the rest differ only in their -k name.
REPLAYS_SHOWN = 8


def failing_test_names(entry: Mapping[str, Any]) -> list[str]:
    """The short names of a clause entry's failed tests."""
    return [t["nodeid"].rsplit("::", 1)[-1] for t in entry["tests"] if t["outcome"] == "failed"]


def render_terminal(doc: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The clause table for the end of the terminal output, as (line, colour) pairs."""
    rows = []
    for entry in doc["clauses"]:
        failing = failing_test_names(entry)
        detail = ", ".join(failing) if failing else ""
        if not failing and entry["outcome"] != PASS and entry["note"]:
            detail = entry["note"]
        colour = ""
        if entry["gated"]:
            colour = {PASS: "green", FAIL: "red", NOT_VERIFIED: "yellow"}.get(
                entry["outcome"], "yellow"
            )
        rows.append((entry["id"], entry["level"], entry["outcome"], detail, colour))
    width = max(len(r[0]) for r in rows)
    lines = [(f"{'CLAUSE':<{width}}  LEVEL   OUTCOME       FAILING TESTS / NOTE", "")]
    for cid, level, outcome, detail, colour in rows:
        lines.append((f"{cid:<{width}}  {level:<6}  {outcome:<12}  {detail}".rstrip(), colour))
    lines.append(("", ""))
    for lvl, counts in doc["summary"].items():
        text = f"{lvl}: " + ", ".join(f"{counts[o]} {o}" for o in OUTCOMES if counts[o])
        # The verdict counts gated clauses only: say how many of these it leaves out, so
        # "5 NOT VERIFIED" here and "1 NOT VERIFIED" in the verdict read as one story.
        out = sum(1 for e in doc["clauses"] if e["level"] == lvl and not e["gated"]
                  and e["outcome"] == NOT_VERIFIED)
        if out:
            text += (f" ({out} NOT VERIFIED left out of the verdict: review clauses, or "
                     "faults not requested)")
        lines.append((text, ""))
    left_out = left_out_line(doc)
    if left_out:
        lines.append((left_out, ""))
    if doc["run"].get("topology"):
        lines.append((f"cross-process verdicts ran on: {doc['run']['topology']}", ""))
    for _, cov in coverages(doc):
        lines += [(line, "") for line in render_coverage_text(cov)]
    lines.append((seeds_line(doc), ""))
    failing = failing_nodeids(doc)
    for nodeid in failing[:REPLAYS_SHOWN]:
        lines.append((f"replay {nodeid.rsplit('::', 1)[-1]}: {replay_command(doc, nodeid)}",
                      ""))
    if len(failing) > REPLAYS_SHOWN:
        lines.append((f"... and {len(failing) - REPLAYS_SHOWN} more failing test(s): the same "
                      "command with their names after -k", ""))
    if doc["unmapped_tests"]:
        lines.append((
            f"{len(doc['unmapped_tests'])} suite test(s) declare no clause: "
            + ", ".join(t["nodeid"] for t in doc["unmapped_tests"]),
            "yellow",
        ))
    for err in doc["run"]["collection_errors"]:
        lines.append((f"suite collection error: {err.splitlines()[0]}", "red"))
    if doc["run"]["partial"]:
        lines.append((
            f"{PARTIAL_BANNER.upper()}: " + "; ".join(doc["run"]["partial_reasons"]),
            "red",
        ))
    lines.append((f"verdict: {doc['verdict']}", "bold"))
    return lines


def left_out_line(doc: Mapping[str, Any]) -> str | None:
    """Which clauses the gate and the verdict leave out, so the counts above them are read
    right: review clauses (never observable), and fault clauses whose faults were not
    requested."""
    review = [e["id"] for e in doc["clauses"] if e.get("scope") == "review"]
    faults = [e["id"] for e in doc["clauses"] if not e["gated"] and e.get("scope") != "review"
              and e["outcome"] != "UNSUPPORTED"]
    parts = []
    if review:
        parts.append(f"{len(review)} review clause(s) (checked by review, not by tests)")
    if faults:
        parts.append(f"{len(faults)} fault clause(s) ({', '.join(faults)}: their faults "
                     "not requested, see --chongming-faults)")
    return "left out of the gate and the verdict: " + "; ".join(parts) if parts else None


def render_cases(doc: Mapping[str, Any]) -> list[str]:
    """Per generated check, how many examples met each targeted input case (the
    ``--chongming-cases`` table): evidence that the run tried what matters."""
    lines: list[str] = []
    seen: set[str] = set()
    for entry in doc["clauses"]:
        for test in entry["tests"]:
            cases = test.get("cases")
            if not cases or test["nodeid"] in seen:
                continue
            seen.add(test["nodeid"])
            examples = cases.get("examples", 0)
            lines.append(f"{test['nodeid'].rsplit('::', 1)[-1]}: {examples} examples")
            for case, n in sorted(cases.items()):
                if case != "examples":
                    lines.append(f"  {n:>6}  {case}")
    return lines


def render_gate(doc: Mapping[str, Any], failed_ids: Sequence[str]) -> tuple[str, str] | None:
    """The gate's line (text, colour), or None when the run had no gate."""
    gate = doc["run"]["gate"]
    if not gate:
        return None
    if doc["run"]["gate_passed"]:
        return f"chongming gate ({gate}): passed", "green"
    ids = list(failed_ids)
    why = ", ".join(ids[:6]) + (f" and {len(ids) - 6} more" if len(ids) > 6 else "")
    why = why or str(doc["verdict"])
    if doc["run"]["partial"]:
        why = f"partial run; {why}" if ids else "partial run"
    return f"chongming gate ({gate}): FAILED ({why})", "red"
