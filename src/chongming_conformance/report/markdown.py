"""The Markdown report: a document fit for a pull-request comment."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .coverage import render_coverage_markdown
from .records import FAIL, NOT_VERIFIED, OUTCOMES, PARTIAL_BANNER
from .replay import failing_nodeids, replay_command, seeds_line
from .terminal import failing_test_names, left_out_line

__all__ = ["render_markdown"]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _guide_cell(entry: Mapping[str, Any]) -> str:
    """The clause's guide sections, the first linked (reports older than the link: plain)."""
    first, *rest = entry["section"].split()
    link = entry.get("guide")
    return " ".join([f"[{first}]({link})" if link else first, *rest])


def render_markdown(doc: Mapping[str, Any]) -> str:
    """A report fit for a pull-request comment (already masked: ``doc`` is)."""
    run, store, env = doc["run"], doc["store"], doc["environment"]
    shared = f"`{store['shared_spec']}`" if store["shared_spec"] else "none"
    lines = [f"# Conformance report: `{store['spec']}`", ""]
    # The verdict first: a partial run that FAILs a MUST clause reads "does not conform"
    # before the banner saying the run is partial.
    lines += [f"**Verdict:** {doc['verdict']}", ""]
    if run["partial"]:
        lines += [
            f"> **{PARTIAL_BANNER}.** " + "; ".join(run["partial_reasons"]),
            "",
        ]
    lines += [
        "| | |",
        "|---|---|",
        f"| Store | `{store['spec']}` ({_cell(store['type'] or '?')}) |",
        f"| Shared store | {shared} |",
        f"| Kit / catalogue | {doc['kit_version']} / {doc['catalogue_version']} |",
        f"| Python | {env['implementation']} {env['python']} on {_cell(env['platform'])} |",
        f"| pytest / hypothesis | {env['pytest']} / {env['hypothesis'] or '-'} |",
        *([f"| Topology | {_cell(run['topology'])} |"] if run.get("topology") else []),
        f"| Seeds | {_cell(seeds_line(doc).removeprefix('seeds: '))} |",
        f"| Gate | {run['gate'] or 'none'}"
        + ("" if run["gate_passed"] is None else (" — passed" if run["gate_passed"] else
                                                  " — **failed**"))
        + " |",
        "",
        "| Level | " + " | ".join(OUTCOMES) + " |",
        "|---|" + "---|" * len(OUTCOMES),
    ]
    for lvl, counts in doc["summary"].items():
        lines.append(f"| {lvl} | " + " | ".join(str(counts[o]) for o in OUTCOMES) + " |")
    left_out = left_out_line(doc)
    if left_out:
        lines += ["", left_out[0].upper() + left_out[1:] + "."]
    lines += [
        "",
        "| Clause | Level | Guide | Outcome | Failing tests / note |",
        "|---|---|---|---|---|",
    ]
    for entry in doc["clauses"]:
        failing = failing_test_names(entry)
        detail = ", ".join(f"`{n}`" for n in failing) if failing else (entry["note"] or "")
        outcome = entry["outcome"]
        shown = f"**{outcome}**" if outcome in (FAIL, NOT_VERIFIED) and entry["gated"] else outcome
        lines.append(
            f"| `{entry['id']}` | {entry['level']} | {_guide_cell(entry)} | {shown} "
            f"| {_cell(detail)} |"
        )
    failures = [
        (entry["id"], t) for entry in doc["clauses"] for t in entry["tests"]
        if t["outcome"] == "failed" and t["message"]
    ]
    if failing_nodeids(doc):
        lines += ["", f"Every failure below replays on the same schedule "
                  f"({seeds_line(doc).removeprefix('seeds: ')}) with its command."]
    if failures:
        lines += ["", "## Failures", ""]
        seen: set[str] = set()
        for cid, t in failures:
            if t["nodeid"] in seen:
                continue
            seen.add(t["nodeid"])
            lines += [
                f"<details><summary><code>{t['nodeid']}</code> ({cid})</summary>",
                "",
                "Replay: `" + replay_command(doc, t["nodeid"]) + "`",
                "",
                "```text",
                t["message"].strip(),
                "```",
                "",
                "</details>",
                "",
            ]
    coverage = render_coverage_markdown(doc)
    if coverage:
        lines.append(coverage)
    return "\n".join(lines).rstrip() + "\n"
