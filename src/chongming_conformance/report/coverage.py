"""The fault run's coverage matrix in every report format: what the faults exercised.

A fault run's test carries its matrix (``stress.fault_coverage.matrix``, schema
``chongming-fault-coverage``) in the report document, under the test's ``coverage``
key. Each renderer here turns it into lines of text (the terminal, the stress command),
a Markdown section or an HTML section: per fault kind and kind of call, how many faults
landed inside such a call and how those calls ended (raised / returned), then every cell
the fault clauses need with its minimum -- so a reader sees what a PASS stands for, and
which cells a NOT VERIFIED is short of.
"""

from __future__ import annotations

import html
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

__all__ = ["coverages", "render_coverage_html", "render_coverage_markdown",
           "render_coverage_text"]

SCHEMA = "chongming-fault-coverage"
#: Short column names of the long protocol methods.
SHORT = {"submit_command": "submit", "claim_commands": "claim", "complete_command": "complete",
         "release_command": "release"}


def coverages(doc: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(test name, matrix) of every test in ``doc`` that carries one, each test once."""
    seen: set[str] = set()
    for entry in doc.get("clauses", ()):
        for test in entry.get("tests", ()):
            cov = test.get("coverage")
            if not isinstance(cov, Mapping) or cov.get("schema") != SCHEMA:
                continue
            if test["nodeid"] in seen:
                continue
            seen.add(test["nodeid"])
            yield test["nodeid"].rsplit("::", 1)[-1], cov


def _cell_text(c: Mapping[str, int] | None) -> str:
    """``landed:raised/returned`` ("." when nothing landed); a conflict and a call that
    never returned count as raised (neither said "done")."""
    if c is None:
        return "."
    not_done = c.get("raised", 0) + c.get("conflict", 0) + c.get("pending", 0)
    return f"{c.get('landed', 0)}:{not_done}/{c.get('returned', 0)}"


def _head(cov: Mapping[str, Any]) -> str:
    return (f"fault coverage ({cov.get('mode')}, seed {cov.get('seed')}): "
            f"{cov.get('faults', 0)} faults, {cov.get('aimed', 0)} aimed at a kind of call "
            f"({cov.get('aimed_missed', 0)} found none); per cell landed:raised/returned")


def _short_cells(cov: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [c for c in cov.get("required", ()) if not c.get("met")]


def render_coverage_text(cov: Mapping[str, Any]) -> list[str]:
    """The matrix as aligned text lines, then the cells short or "every cell met"."""
    methods: Sequence[str] = cov.get("methods", ())
    rows: Mapping[str, Mapping[str, Mapping[str, int]]] = cov.get("rows", {})
    lines = [_head(cov)]
    if rows:
        names = [SHORT.get(m, m) for m in methods]
        width = max(len(k) for k in rows)
        cols = [max(len(n), 7) for n in names]
        lines.append(" " * (width + 2) + " ".join(n.rjust(w) for n, w in zip(names, cols,
                                                                              strict=True)))
        for kind, cells in rows.items():
            lines.append(f"{kind:<{width}}  " + " ".join(
                _cell_text(cells.get(m)).rjust(w) for m, w in zip(methods, cols, strict=True)))
    else:
        lines.append("no fault landed inside a call")
    short = _short_cells(cov)
    required = cov.get("required", ())
    if short:
        lines.append("short: " + "; ".join(
            f"{c['clause']} needs {c['label']} x{c['minimum']}, landed {c['landed']}"
            for c in short))
    elif required:
        lines.append(f"every cell the fault clauses need was met ({len(required)} cells)")
    return lines


def render_coverage_markdown(doc: Mapping[str, Any]) -> str:
    """A "Fault coverage" section per fault run in ``doc`` ("" when there is none)."""
    out: list[str] = []
    for name, cov in coverages(doc):
        methods: Sequence[str] = cov.get("methods", ())
        rows: Mapping[str, Mapping[str, Mapping[str, int]]] = cov.get("rows", {})
        out += ["", f"## Fault coverage ({name})", "", _head(cov) + ".", ""]
        if rows:
            out.append("| fault | " + " | ".join(SHORT.get(m, m) for m in methods) + " |")
            out.append("|---|" + "---|" * len(methods))
            for kind, cells in rows.items():
                out.append(f"| {kind} | " + " | ".join(_cell_text(cells.get(m))
                                                     for m in methods) + " |")
            out.append("")
        required = cov.get("required", ())
        if required:
            out += ["| clause | cell | minimum | landed | met | why |", "|---|---|---|---|---|---|"]
            for c in required:
                out.append(f"| {c['clause']} | {c['label']} | {c['minimum']} | {c['landed']} | "
                           f"{'yes' if c['met'] else '**no**'} | {c.get('reason', '')} |")
    return "\n".join(out)


def render_coverage_html(doc: Mapping[str, Any]) -> str:
    """An HTML section per fault run in ``doc`` ("" when there is none)."""
    parts: list[str] = []
    for name, cov in coverages(doc):
        e = html.escape
        methods: Sequence[str] = cov.get("methods", ())
        rows: Mapping[str, Mapping[str, Mapping[str, int]]] = cov.get("rows", {})
        body = [f'<section class="coverage" aria-label="fault coverage">'
                f"<h2>Fault coverage <small>{e(name)}</small></h2><p>{e(_head(cov))}</p>"]
        if rows:
            body.append("<table class=\"coverage-matrix\"><thead><tr><th>fault</th>"
                        + "".join(f"<th>{e(SHORT.get(m, m))}</th>" for m in methods)
                        + "</tr></thead><tbody>")
            for kind, cells in rows.items():
                body.append(f"<tr><th>{e(kind)}</th>" + "".join(
                    f"<td>{e(_cell_text(cells.get(m)))}</td>" for m in methods) + "</tr>")
            body.append("</tbody></table>")
        required = cov.get("required", ())
        if required:
            body.append("<table class=\"coverage-cells\"><thead><tr><th>clause</th><th>cell"
                        "</th><th>minimum</th><th>landed</th><th>met</th><th>why</th></tr>"
                        "</thead><tbody>")
            for c in required:
                met = "yes" if c["met"] else "<strong>no</strong>"
                body.append(f"<tr><td>{e(c['clause'])}</td><td>{e(c['label'])}</td>"
                            f"<td>{c['minimum']}</td><td>{c['landed']}</td><td>{met}</td>"
                            f"<td>{e(c.get('reason', ''))}</td></tr>")
            body.append("</tbody></table>")
        body.append("</section>")
        parts.append("".join(body))
    return "".join(parts)
