"""The HTML report: one page a person opens from disk to see what a run decided and why.

The JSON document is for machines, the Markdown for a pull-request comment, the terminal
table for the end of a run. A concurrency failure needs a picture as well: which workers'
calls overlapped, which of them an anomaly is about, where the faults were, how slow each
kind of call got. This renderer draws that picture from the document alone (a renderer never
looks at pytest: docs/architecture.md), as one file whose style and script are inline and
which names no external asset, so a CI artefact opens offline, on any machine, years later
(the style and the script are kept as package data, ``assets/report.css`` and
``assets/report.js``, and inlined into every page).
The document is already masked; every string taken from it is escaped here (``html.escape``
in markup, ``\\u003c`` in the embedded JSON), because call texts and failure messages quote
whatever a store returned.

Choices, and why:

* **Clauses are grouped by the guide section they cite first** (``§2``, ``§5`` ...), not by
  the id prefix. A section is the guide chapter an author reads to fix the clause, the
  cross-process clause then sits beside the one-process clauses it builds on
  (``XP-SAVE-ATOMIC`` with ``SAVE-CAS``), and there are 8 groups instead of 23 prefixes,
  most of them of one or two clauses. The group's title is read off the guide link's
  anchor, so no guide file is needed at render time. A FAIL or NOT VERIFIED row is
  expanded (``<details open>``) when it has something the row cannot hold: a failed test
  (message, replay command, blame) or a test's message; a NOT VERIFIED clause that no test
  ran shows its note and guide link in the row itself (a run of a few tests leaves dozens,
  and a dozen identical boxes would bury the failures).
* **Time runs left to right, one lane per worker** (Porcupine's layout rather than
  Jepsen's columns): a run has a handful of workers and many calls, a page is wider than a
  screen is tall, and the latency view below shares the same time axis, so a fault band
  lines up in both pictures.
* **SVG is drawn here, in Python**: the page opens at once (no layout script to run over
  10 000 calls), works with scripting off, and can be tested without a browser. The inline
  script only filters the clause table and fills the details panel on hover or focus; call
  texts stay in an unparsed JSON block until the first hover.
* **What a person cannot see is thinned, and the page says so**: in the overview, calls
  narrower than :data:`MIN_CALL_PX` pixels that are neither core nor context of an anomaly
  are merged with their neighbours of the same outcome (a conflict among ok calls stays
  its own bar); the anomalies get zoomed views where every call is its own bar (anomalies
  whose calls fall inside one view share it, at most :data:`ZOOMS_SHOWN` views); above
  :data:`LATENCY_POINTS_LIMIT` returned calls the latency scatter becomes a density of
  :data:`LATENCY_CELL_PX`-pixel cells (rare outcomes stay individual marks).
* **Meaning survives greyscale**: outcomes differ by pattern (solid, stripes, cross-hatch,
  dark hatch with a dashed outline) as well as colour, and every outcome is also written as
  text (the table, the legend, the details panel).

Over the kit's 600-line limit (tests/test_module_size.py): the page's markup and the
SVG drawing of a stress history share one set of layout constants; its stylesheet and
script are package data (``report/assets/``). Splitting the history drawing out is
pending.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from html import escape
from importlib import resources
from typing import Any

from .coverage import render_coverage_html
from .records import DEVIATION, FAIL, NOT_VERIFIED, OUTCOMES, PARTIAL_BANNER, PASS, UNSUPPORTED
from .replay import replay_command, seeds_line
from .terminal import left_out_line

__all__ = [
    "ANOMALIES_LISTED",
    "ANOMALY_BANDS",
    "HISTORY_SCHEMA",
    "LATENCY_CELL_PX",
    "LATENCY_POINTS_LIMIT",
    "MIN_CALL_PX",
    "PLOT_WIDTH",
    "ZOOMS_SHOWN",
    "ZOOM_FROM_CALLS",
    "render_html",
]

#: The ``schema`` a test entry's ``history`` declares (version 1 is what this module draws).
HISTORY_SCHEMA = "chongming-history"
#: Width of the time axis, in pixels: what the overview fits a whole run into.
PLOT_WIDTH = 1040
#: A call narrower than this (in the overview) is merged with its plain neighbours.
MIN_CALL_PX = 2.0
#: Above this many returned calls, the latency view is binned instead of one mark per call.
LATENCY_POINTS_LIMIT = 2500
#: Side of a latency density cell, in pixels.
LATENCY_CELL_PX = 4
#: A history with more calls than this gets a zoomed view per anomaly (below: the overview
#: already shows every call at a readable width).
ZOOM_FROM_CALLS = 60
#: Zoomed views per history (anomalies that fall inside one share it; the rest are listed).
ZOOMS_SHOWN = 4
#: Anomalies listed in full above the fold; the rest behind one ``<details>``.
ANOMALIES_LISTED = 6
#: Up to this many anomalies, each is also shaded across the lanes of the overview (more
#: would cover the run in yellow); every anomaly always gets its mark above the lanes.
ANOMALY_BANDS = 3

_LEFT = 58  # lane labels
_RIGHT = 16
_SVG_W = _LEFT + PLOT_WIDTH + _RIGHT
_ROW = 15  # one sub-row of a lane
_BAR = 11  # bar height inside a sub-row
_LANE_GAP = 5
_LABEL_ROW = 13  # one row of fault labels above the lanes
_LABEL_ROWS = 3
_AXIS = 30
_CHAR_PX = 6.1  # width of one character of the 10-px labels, for fitting text into bars
_CALL_OUTCOMES = ("ok", "conflict", "raised", "crashed")
_OUTCOME_WORDS = {
    "ok": "ok (returned)",
    "conflict": "conflict (refused: no effect)",
    "raised": "raised (an error: effect unknown)",
    "crashed": "crashed or never returned (drawn to the end of the run)",
}
_GLYPHS = {PASS: "✓", FAIL: "✗", NOT_VERIFIED: "?", UNSUPPORTED: "–", DEVIATION: "≠"}
_EXPANDED = (FAIL, NOT_VERIFIED)


# -- small helpers ----------------------------------------------------------------------------

def _e(value: object) -> str:
    """Text for markup: every dynamic string passes through here."""
    return escape(str(value), quote=True)


def _n(x: float) -> str:
    """A coordinate rounded to what a pixel shows (a tenth), without a trailing ``.0``."""
    s = f"{x:.1f}"
    return s[:-2] if s.endswith(".0") else s


def _slug(outcome: str) -> str:
    return outcome.lower().replace(" ", "-")


def _secs(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x * 1000:.1f} ms" if abs(x) < 1 else f"{x:.3g} s" if abs(x) < 100 else f"{x:.0f} s"


def _safe_href(link: object) -> str | None:
    """The guide link, if it is a relative path or a fragment: never a URL with a scheme or
    a host, so the page can never make the reader's browser fetch anything."""
    if not isinstance(link, str) or not link or link.startswith("//") or "\\" in link:
        return None
    head = link.split("#", 1)[0]
    if ":" in head or any(ch.isspace() for ch in link):
        return None
    return link


def _json_block(value: object) -> str:
    """JSON safe inside a ``<script>`` element: no ``<``, ``>`` or ``&`` left to end it."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _nice_step(span: float, target: int = 10) -> float:
    """A 1-2-5 tick step giving at most ``target`` ticks over ``span``."""
    if span <= 0:
        return 1.0
    raw = span / target
    base = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if base * m >= raw:
            return float(base * m)
    return float(base * 10)  # pragma: no cover - the loop always returns


def _tick_label(t: float, step: float) -> str:
    digits = max(0, -math.floor(math.log10(step))) if step < 1 else 0
    return f"{t:.{digits}f} s"


# -- the page ---------------------------------------------------------------------------------

def render_html(doc: Mapping[str, Any]) -> str:
    """The report as one self-contained HTML5 file (``doc`` is the masked JSON document)."""
    histories = _collect_histories(doc)
    store = doc["store"]
    parts = [
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        # No network, whatever a string in the document says: this is a file read from disk.
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
        "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">\n"
        f"<title>Conformance report: {_e(store['spec'])}</title>\n",
        f"<style>{_CSS}</style>\n</head>\n<body>\n",
        _DEFS,
        _header(doc),
        _nav(histories),
        "<main>\n",
        _clause_section(doc, histories),
        render_coverage_html(doc),
        _histories_section(doc, histories),
        _environment_section(doc),
        "</main>\n",
        f"<script>{_JS}</script>\n</body>\n</html>\n",
    ]
    return "".join(parts)


def _verdict_tone(verdict: str) -> str:
    if verdict.startswith("conforms"):
        return "good"
    if verdict.startswith("does not conform"):
        return "bad"
    return "warn"


def _header(doc: Mapping[str, Any]) -> str:
    run, store = doc["run"], doc["store"]
    verdict = str(doc["verdict"])
    gate = run.get("gate")
    if not gate:
        gate_text, gate_tone = "no gate (--chongming-gate not given)", "none"
    elif run.get("gate_passed"):
        gate_text, gate_tone = f"{gate}: passed", "good"
    else:
        gate_text, gate_tone = f"{gate}: FAILED", "bad"
    out = [
        "<header>\n<p class=\"kicker\">chongming conformance report</p>\n",
        f"<h1><code>{_e(store['spec'])}</code></h1>\n",
        f"<p class=\"sub\">{_e(store.get('type') or '?')} · kit {_e(doc.get('kit_version'))} · "
        f"catalogue {_e(doc.get('catalogue_version'))} · started "
        f"{_e(run.get('started_at', '?'))} · {_e(_secs(run.get('duration_s')))}</p>\n",
        f"<div class=\"verdict {_verdict_tone(verdict)}\" role=\"status\">"
        f"<span class=\"vl\">Verdict</span> <strong>{_e(verdict)}</strong></div>\n",
        f"<p class=\"gate {gate_tone}\"><span class=\"vl\">Gate</span> {_e(gate_text)}</p>\n",
    ]
    if run.get("partial"):
        reasons = "; ".join(str(r) for r in run.get("partial_reasons") or ())
        out.append(f"<p class=\"partial\"><strong>{_e(PARTIAL_BANNER)}.</strong> "
                   f"{_e(reasons)}</p>\n")
    out.append(_summary_table(doc))
    left_out = left_out_line(doc)
    if left_out:
        out.append(f"<p class=\"muted\">{_e(left_out[0].upper() + left_out[1:])}.</p>\n")
    out.append(f"<p class=\"muted\">{_e(seeds_line(doc).capitalize())}.</p>\n")
    out.append("</header>\n")
    return "".join(out)


def _summary_table(doc: Mapping[str, Any]) -> str:
    summary: Mapping[str, Mapping[str, int]] = doc.get("summary") or {}
    if not summary:
        return ""
    head = "".join(f"<th scope=\"col\">{_e(o)}</th>" for o in OUTCOMES)
    rows = []
    for level, counts in summary.items():
        cells = "".join(
            f"<td class=\"num{' hot-' + _slug(o) if counts.get(o) else ''}\">"
            f"{_e(counts.get(o, 0))}</td>" for o in OUTCOMES)
        rows.append(f"<tr><th scope=\"row\">{_e(level)}</th>{cells}</tr>")
    return ("<table class=\"summary\"><caption>Clauses per level and outcome</caption>"
            f"<thead><tr><th scope=\"col\">Level</th>{head}</tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table>\n")


def _nav(histories: Sequence[_History]) -> str:
    links = ["<a href=\"#clauses\">Clauses</a>"]
    if histories:
        links.append("<a href=\"#histories\">Histories</a>")
    links.append("<a href=\"#environment\">Run and environment</a>")
    return f"<nav aria-label=\"Sections\">{' · '.join(links)}</nav>\n"


# -- clauses ----------------------------------------------------------------------------------

def _section_key(section: str) -> tuple[int, str]:
    first = (section.split() or ["?"])[0]
    digits = re.sub(r"\D", "", first)
    return (int(digits) if digits else 10**6, first)


def _section_title(entry: Mapping[str, Any]) -> str:
    """``§2 Snapshots``: the section and the guide heading its link's anchor spells."""
    first = (str(entry.get("section") or "?").split() or ["?"])[0]
    anchor = str(entry.get("guide") or "").partition("#")[2]
    words = re.sub(r"^\d+-", "", anchor).replace("-", " ").strip()
    return f"{first} {words[:1].upper()}{words[1:]}" if words else first


def _guide_cell(entry: Mapping[str, Any]) -> str:
    """The clause's sections, the first linked to the guide when the link is local."""
    first, *rest = str(entry.get("section") or "?").split() or ["?"]
    href = _safe_href(entry.get("guide"))
    head = f"<a href=\"{_e(href)}\">{_e(first)}</a>" if href else _e(first)
    return " ".join([head, *(_e(r) for r in rest)])


def _outcome_badge(outcome: str, gated: bool = True) -> str:
    extra = "" if gated else " <span class=\"muted small\">(not gated)</span>"
    return (f"<span class=\"badge o-{_slug(outcome)}\"><span aria-hidden=\"true\">"
            f"{_GLYPHS.get(outcome, '·')}</span> {_e(outcome)}</span>{extra}")


def _clause_section(doc: Mapping[str, Any], histories: Sequence[_History]) -> str:
    clauses: Sequence[Mapping[str, Any]] = doc.get("clauses") or ()
    anchors = {h.nodeid: h.anchor for h in histories}
    counts = {o: sum(1 for c in clauses if c["outcome"] == o) for o in OUTCOMES}
    filters = "".join(
        f"<label class=\"flt\"><input type=\"checkbox\" data-filter=\"{_e(o)}\" checked> "
        f"<span aria-hidden=\"true\">{_GLYPHS[o]}</span> {_e(o)} ({counts[o]})</label>"
        for o in OUTCOMES if counts[o])
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for entry in clauses:
        groups.setdefault(_section_key(str(entry.get("section") or "?"))[1], []).append(entry)
    order = sorted(groups, key=lambda k: _section_key(k))
    shown: dict[str, str] = {}  # nodeid -> the element id its message is shown under
    bodies = []
    for key in order:
        entries = groups[key]
        title = _section_title(entries[0])
        href = _safe_href(entries[0].get("guide"))
        title_html = f"<a href=\"{_e(href)}\">{_e(title)}</a>" if href else _e(title)
        bad = "".join(f", {n} {o}" for o in _EXPANDED
                      if (n := sum(1 for e in entries if e["outcome"] == o)))
        rows = [f"<tr class=\"gh\"><th colspan=\"5\" scope=\"rowgroup\">{title_html} "
                f"<span class=\"muted small\">{len(entries)} clause(s){bad}</span></th></tr>"]
        for entry in entries:
            rows.append(_clause_row(doc, entry, anchors, shown))
        bodies.append(f"<tbody class=\"group\" data-section=\"{_e(key)}\">"
                      + "".join(rows) + "</tbody>\n")
    return (
        "<section id=\"clauses\" aria-labelledby=\"clauses-h\">\n"
        "<h2 id=\"clauses-h\">Clauses</h2>\n"
        "<fieldset id=\"filters\" class=\"filters\" hidden><legend>Show clauses whose outcome "
        f"is</legend>{filters} <span id=\"filter-count\" class=\"muted small\" "
        "aria-live=\"polite\"></span></fieldset>\n"
        "<table class=\"clauses\">\n<caption>Every catalogue clause, grouped by the section "
        "of the backend guide it cites; FAIL and NOT VERIFIED clauses are expanded with their "
        "tests, messages and replay commands</caption>\n"
        "<colgroup><col class=\"c-id\"><col class=\"c-lv\"><col class=\"c-out\">"
        "<col class=\"c-sec\"><col></colgroup>\n"
        "<thead><tr><th scope=\"col\">Clause</th><th scope=\"col\">Level</th>"
        "<th scope=\"col\">Outcome</th><th scope=\"col\">Guide</th>"
        "<th scope=\"col\">Failing tests / note</th></tr></thead>\n"
        + "".join(bodies) + "</table>\n"
        + _unmapped(doc) + "</section>\n"
    )


def _clause_row(doc: Mapping[str, Any], entry: Mapping[str, Any], anchors: Mapping[str, str],
                shown: dict[str, str]) -> str:
    cid, outcome = str(entry["id"]), str(entry["outcome"])
    tests: Sequence[Mapping[str, Any]] = entry.get("tests") or ()
    failing = [t for t in tests if t.get("outcome") == "failed"]
    if failing:
        bits = []
        for t in failing:
            name = _e(str(t["nodeid"]).rsplit("::", 1)[-1])
            anchor = anchors.get(str(t["nodeid"]))
            link = f" <a href=\"#{_e(anchor)}\" class=\"small\">timeline ↓</a>" if anchor else ""
            bits.append(f"<code>{name}</code>{link}")
        detail = ", ".join(bits)
    else:
        detail = _e(entry.get("note") or "") if outcome != PASS else ""
    row = (f"<tr data-clause=\"{_e(cid)}\" data-outcome=\"{_e(outcome)}\" "
           f"class=\"r-{_slug(outcome)}\">"
           f"<th scope=\"row\"><code>{_e(cid)}</code><div class=\"ctext\">"
           f"{_e(entry.get('text') or '')}</div></th>"
           f"<td>{_e(entry.get('level') or '')}</td>"
           f"<td>{_outcome_badge(outcome, bool(entry.get('gated', True)))}</td>"
           f"<td>{_guide_cell(entry)}</td><td>{detail}</td></tr>")
    if outcome not in _EXPANDED or not any(_worth_showing(t) for t in tests):
        return row  # nothing beyond the note and the guide link the row already shows
    return row + _clause_more(doc, entry, anchors, shown)


def _worth_showing(test: Mapping[str, Any]) -> bool:
    """A test whose failure, message or hypothesis notes the expanded row shows."""
    return test.get("outcome") == "failed" or bool(test.get("message"))


def _clause_more(doc: Mapping[str, Any], entry: Mapping[str, Any], anchors: Mapping[str, str],
                 shown: dict[str, str]) -> str:
    """The expanded part of a FAIL / NOT VERIFIED row: why, and how to see it again."""
    cid = str(entry["id"])
    tests: Sequence[Mapping[str, Any]] = entry.get("tests") or ()
    out = [f"<tr class=\"more\" data-for=\"{_e(cid)}\"><td colspan=\"5\"><details open>"
           f"<summary>{_e(cid)}: {_e(entry['outcome'])} — details</summary>"]
    if entry.get("note"):
        out.append(f"<p><span class=\"vl\">Note</span> {_e(entry['note'])}</p>")
    out.append(f"<p><span class=\"vl\">Guide</span> {_guide_cell(entry)}</p>")
    for t in tests:
        if not _worth_showing(t):
            continue
        nodeid = str(t["nodeid"])
        head = (f"<p><code class=\"nodeid\">{_e(nodeid)}</code> — {_e(t.get('outcome'))}"
                f"{', ' + _e(_secs(t.get('duration_s'))) if t.get('duration_s') else ''}")
        blames = t.get("blames") or ()
        if blames:
            head += f"; blamed on {_e(', '.join(str(b) for b in blames))}"
        anchor = anchors.get(nodeid)
        if anchor:
            head += f" · <a href=\"#{_e(anchor)}\">its timeline ↓</a>"
        out.append(head + "</p>")
        if t.get("outcome") == "failed":
            out.append("<p><span class=\"vl\">Replay</span> <code class=\"cmd\">"
                       f"{_e(replay_command(doc, nodeid))}</code></p>")
        message = t.get("message")
        if message and nodeid in shown:
            out.append(f"<p class=\"muted\">Message: shown under "
                       f"<a href=\"#{_e(shown[nodeid])}\">{_e(shown[nodeid][2:])}</a>.</p>")
        elif message:
            shown[nodeid] = f"m-{cid}"
            out.append(f"<pre class=\"msg\" id=\"m-{_e(cid)}\">{_e(str(message).strip())}</pre>")
        hypo = t.get("hypothesis")
        if isinstance(hypo, Mapping) and any(hypo.get(k) for k in
                                             ("seeds", "falsifying_examples", "notes")):
            lines = [f"seed: {s}" for s in hypo.get("seeds") or ()]
            lines += [str(x) for x in hypo.get("falsifying_examples") or ()]
            lines += [str(x) for x in hypo.get("notes") or ()]
            out.append(f"<pre class=\"hypo\">{_e(chr(10).join(lines))}</pre>")
    out.append("</details></td></tr>")
    return "".join(out)


def _unmapped(doc: Mapping[str, Any]) -> str:
    out = []
    unmapped: Sequence[Mapping[str, Any]] = doc.get("unmapped_tests") or ()
    if unmapped:
        items = "".join(f"<li><code>{_e(t['nodeid'])}</code> — {_e(t.get('outcome'))}</li>"
                        for t in unmapped)
        out.append(f"<h3>Suite tests that declare no clause</h3><ul>{items}</ul>\n")
    errors: Sequence[str] = doc["run"].get("collection_errors") or ()
    if errors:
        items = "".join(f"<li><pre class=\"msg\">{_e(err)}</pre></li>" for err in errors)
        out.append(f"<h3>Suite collection errors</h3><ul>{items}</ul>\n")
    return "".join(out)


# -- histories: the data ----------------------------------------------------------------------

class _History:
    """One drawn history: the test it belongs to, and the geometry every view shares."""

    def __init__(self, index: int, nodeid: str, clause: str, hist: Mapping[str, Any]) -> None:
        self.index = index
        self.nodeid = nodeid
        self.clause = clause
        self.hist = hist
        self.anchor = f"history-{index}"
        self.data_id = f"h{index}"
        self.lanes = [str(x) for x in hist.get("lanes") or ()]
        self.kinds = [str(x) for x in hist.get("kinds") or ()]
        self.calls: list[Sequence[Any]] = [c for c in hist.get("calls") or () if len(c) >= 7]
        self.details: Sequence[Sequence[Any]] = hist.get("details") or ()
        self.anomalies: list[Mapping[str, Any]] = list(hist.get("anomalies") or ())
        self.faults: list[Mapping[str, Any]] = list(hist.get("faults") or ())
        self.core: dict[int, list[int]] = {}  # call index -> the anomalies (1-based) it is core of
        self.context: set[int] = set()
        for k, a in enumerate(self.anomalies, 1):
            for i in a.get("core") or ():
                self.core.setdefault(int(i), []).append(k)
            self.context.update(int(i) for i in a.get("context") or ())
        self.context -= set(self.core)
        self.kind_stats: list[_KindStats] | None = None
        ends = [float(c[3]) for c in self.calls] + [float(c[4]) for c in self.calls
                                                    if c[4] is not None]
        ends += [float(f.get("end") or f.get("start") or 0) for f in self.faults]
        self.end = max([float(hist.get("duration_s") or 0), *ends, 1e-3])

    @property
    def verdict(self) -> str:
        return str(self.hist.get("verdict") or "?")

    @property
    def scenario(self) -> str:
        return str(self.hist.get("scenario") or "history")

    def lane_of(self, call: Sequence[Any]) -> str:
        i = int(call[0])
        return self.lanes[i] if 0 <= i < len(self.lanes) else f"lane{i}"

    def label(self, i: int) -> str:
        c = self.calls[i]
        return f"{self.lane_of(c)} #{c[1]}"

    def kind(self, call: Sequence[Any]) -> str:
        i = int(call[2])
        return self.kinds[i] if 0 <= i < len(self.kinds) else "?"

    def outcome(self, call: Sequence[Any]) -> str:
        o = str(call[5])
        return o if o in _CALL_OUTCOMES else "raised"

    def span(self, call: Sequence[Any], end: float | None = None) -> tuple[float, float]:
        """Invoke and end time; a call that never returned lasts to ``end`` (the run's)."""
        t0 = float(call[3])
        t1 = float(call[4]) if call[4] is not None else (self.end if end is None else end)
        return t0, max(t0, t1)


def _collect_histories(doc: Mapping[str, Any]) -> list[_History]:
    """Every test history, once per test: FAIL verdicts first (they are what a reader is
    here for), then the rest."""
    found: dict[str, tuple[str, Mapping[str, Any]]] = {}
    for entry in doc.get("clauses") or ():
        for test in entry.get("tests") or ():
            hist = test.get("history")
            if isinstance(hist, Mapping) and test["nodeid"] not in found:
                found[str(test["nodeid"])] = (str(hist.get("clause") or entry["id"]), hist)
    ordered = sorted(found.items(), key=lambda kv: kv[1][1].get("verdict") != FAIL)
    return [_History(k, nodeid, clause, hist) for k, (nodeid, (clause, hist))
            in enumerate(ordered)]


# -- histories: the section -------------------------------------------------------------------

def _histories_section(doc: Mapping[str, Any], histories: Sequence[_History]) -> str:
    if not histories:
        return ""
    out = ["<section id=\"histories\" aria-labelledby=\"histories-h\">\n"
           "<h2 id=\"histories-h\">Histories</h2>\n"
           "<p class=\"muted\">Every store call the workers of a stress scenario made, one lane "
           "per worker process, time running left to right. Hover a bar, or move to a marked "
           "call with Tab, to read it in the panel at the bottom of the window.</p>\n",
           _legend()]
    for h in histories:
        body = _history(h)
        if h.verdict == FAIL:
            out.append(body)
        else:
            out.append(f"<details class=\"hist-pass\"><summary>{_e(h.scenario)} "
                       f"({_e(h.clause)}): {_e(h.verdict)}, {len(h.calls)} calls</summary>"
                       f"{body}</details>\n")
    # Hidden until the script that fills it runs: without scripting it could only mislead.
    out.append("<div id=\"call-details\" class=\"panel\" aria-live=\"polite\" role=\"status\" "
               "hidden><div class=\"muted\">Hover or focus a call to read it here.</div></div>\n")
    out.append("</section>\n")
    return "".join(out)


def _legend() -> str:
    items = []
    for o in _CALL_OUTCOMES:
        dash = " stroke=\"#5a1a17\" stroke-dasharray=\"3 2\"" if o == "crashed" else ""
        items.append(
            f"<li><svg width=\"30\" height=\"12\" aria-hidden=\"true\"><rect x=\"1\" y=\"1\" "
            f"width=\"28\" height=\"10\" fill=\"url(#p-{o})\"{dash}/></svg> "
            f"{_e(_OUTCOME_WORDS[o])}</li>")
    items.append("<li><svg width=\"30\" height=\"14\" aria-hidden=\"true\"><rect x=\"2\" y=\"3\" "
                 "width=\"26\" height=\"9\" fill=\"url(#p-ok)\" stroke=\"#000\" "
                 "stroke-width=\"2.5\"/><path d=\"M15 3l-3.5-3h7z\" fill=\"#000\"/></svg> "
                 "core call of an anomaly (numbered)</li>")
    items.append("<li><svg width=\"30\" height=\"12\" aria-hidden=\"true\"><rect x=\"1\" y=\"1\" "
                 "width=\"28\" height=\"10\" fill=\"url(#p-ok)\" opacity=\".6\" stroke=\"#222\"/>"
                 "</svg> context call (may or may not have taken effect)</li>")
    items.append("<li><svg width=\"30\" height=\"12\" aria-hidden=\"true\"><rect x=\"1\" y=\"1\" "
                 "width=\"28\" height=\"10\" fill=\"url(#p-ok)\" opacity=\".3\"/></svg> "
                 "other call (faint when the history has an anomaly)</li>")
    items.append("<li><svg width=\"30\" height=\"12\" aria-hidden=\"true\"><rect width=\"30\" "
                 "height=\"12\" fill=\"url(#p-fault)\"/></svg> fault interval (nemesis)</li>")
    return f"<ul class=\"legend\" aria-label=\"Legend\">{''.join(items)}</ul>\n"


def _history(h: _History) -> str:
    hist = h.hist
    seed = hist.get("seed")
    meta = [f"clause <code>{_e(h.clause)}</code>",
            f"profile {_e(hist.get('profile') or '-')}",
            f"seed {_e('-' if seed is None else seed)}",
            f"{len(h.lanes)} worker(s)", f"{len(h.calls)} calls",
            f"{_e(_secs(float(hist.get('duration_s') or h.end)))}",
            f"{len(h.faults)} fault(s)", f"{len(h.anomalies)} anomaly(ies)"]
    out = [f"<article class=\"history\" id=\"{h.anchor}\" aria-labelledby=\"{h.anchor}-h\">",
           f"<h3 id=\"{h.anchor}-h\">{_e(h.scenario)} "
           f"{_outcome_badge(h.verdict)}</h3>",
           f"<p class=\"muted\"><code class=\"nodeid\">{_e(h.nodeid)}</code><br>"
           f"{' · '.join(meta)}</p>"]
    timeline, merged = _timeline(h)
    notes = []
    if hist.get("schema", HISTORY_SCHEMA) != HISTORY_SCHEMA:
        notes.append(f"This history says it is {_e(hist['schema'])}; it is drawn as "
                     f"{HISTORY_SCHEMA} v1.")
    if hist.get("thinned"):
        notes.append(_e(hist["thinned"]))
    if merged:
        calls, bars = merged
        notes.append(f"At this scale {calls} calls narrower than {MIN_CALL_PX:g} px are merged "
                     f"into {bars} bars of the same outcome (hover one for the calls it "
                     "holds); the anomalies' calls are always drawn one by one"
                     + (", and the anomalies are zoomed below." if _zoomed(h) else "."))
    out.append(timeline)
    if notes:
        out.append("<p class=\"thinned\"><span class=\"vl\">Thinned</span> "
                   + " ".join(notes) + "</p>")
    out.append(_anomaly_list(h))
    if _zoomed(h):
        out.append(_zooms(h))
    out.append(_fault_list(h))
    latency, latency_note = _latency(h)
    out.append(f"<h4>Latency per call kind</h4>{latency}")
    if latency_note:
        out.append(f"<p class=\"thinned\"><span class=\"vl\">Binned</span> {latency_note}</p>")
    out.append(_latency_table(h))
    text = hist.get("text")
    if text:
        out.append("<details class=\"textalt\"><summary>Text timeline</summary>"
                   f"<pre>{_e(text)}</pre></details>")
    data = {k: v for k, v in hist.items() if k != "text"}
    out.append(f"<script type=\"application/json\" id=\"{h.data_id}\">{_json_block(data)}"
               "</script>")
    out.append("</article>\n")
    return "".join(out)


def _zoomed(h: _History) -> bool:
    return len(h.calls) > ZOOM_FROM_CALLS and any(a.get("core") for a in h.anomalies)


def _anomaly_list(h: _History) -> str:
    if not h.anomalies:
        return ""
    items = []
    for k, a in enumerate(h.anomalies, 1):
        if k == ANOMALIES_LISTED + 1:
            items.append(f"</ol><details class=\"more-anomalies\"><summary>"
                         f"{len(h.anomalies) - ANOMALIES_LISTED} more anomalies</summary>"
                         f"<ol class=\"anomalies\" start=\"{k}\">")
        core = ", ".join(f"{h.label(int(i))} {h.kind(h.calls[int(i)])}"
                         for i in a.get("core") or () if 0 <= int(i) < len(h.calls))
        stuck = (f"<div><span class=\"vl\">Stuck at</span> <code>{_e(a['stuck'])}</code></div>"
                 if a.get("stuck") else "")
        items.append(
            f"<li><strong>Anomaly {k}</strong> — {_e(a.get('kind') or '?')} "
            f"(<code>{_e(a.get('clause') or h.clause)}</code>)"
            f"{'; core: ' + _e(core) if core else ''}"
            f"<div class=\"amsg\">{_e(a.get('message') or '')}</div>{stuck}</li>")
    tail = "</ol></details>" if len(h.anomalies) > ANOMALIES_LISTED else "</ol>"
    return f"<ol class=\"anomalies\">{''.join(items)}{tail}"


def _fault_list(h: _History) -> str:
    if not h.faults:
        return ""
    items = "".join(
        f"<li><strong>{_e(f.get('label') or 'fault')}</strong> "
        f"{_e(_secs(f.get('start')))} → {_e(_secs(f.get('end')))}: {_e(f.get('what') or '')}"
        f"{' — ' + _e(f['detail']) if f.get('detail') else ''}</li>" for f in h.faults)
    return f"<details class=\"faults\"><summary>Faults ({len(h.faults)})</summary>" \
           f"<ul>{items}</ul></details>"


# -- histories: the timeline ------------------------------------------------------------------

def _pack(h: _History, indexes: Iterable[int], end: float) -> list[list[int]]:
    """A lane's calls in sub-rows so that none overlaps another (a worker's calls follow one
    another; a call that never returned runs on, and the next call goes below it)."""
    rows: list[list[int]] = []
    row_end: list[float] = []
    for i in sorted(indexes, key=lambda i: (float(h.calls[i][3]), i)):
        t0, t1 = h.span(h.calls[i], end)
        for r, e in enumerate(row_end):
            if e <= t0:
                rows[r].append(i)
                row_end[r] = t1
                break
        else:
            rows.append([i])
            row_end.append(t1)
    return rows or [[]]


def _call_rect(h: _History, i: int, x0: float, x1: float, y: float, *, cls: str = "call",
               min_w: float = 1.0, label: bool = False) -> str:
    c = h.calls[i]
    outcome = h.outcome(c)
    w = max(x1 - x0, min_w)
    attrs = f"class=\"{cls}{' open' if c[4] is None else ''}\" data-call=\"{i}\" " \
            f"data-outcome=\"{outcome}\""
    core = h.core.get(i)
    if core:
        attrs += (f" data-core=\"1\" tabindex=\"0\" aria-label=\"{_e(h.label(i))} "
                  f"{_e(h.kind(c))}, {outcome}, core of anomaly "
                  f"{', '.join(str(k) for k in core)}\"")
    elif i in h.context:
        attrs += (f" data-context=\"1\" tabindex=\"0\" aria-label=\"{_e(h.label(i))} "
                  f"{_e(h.kind(c))}, {outcome}, context call\"")
    out = f"<rect {attrs} x=\"{_n(x0)}\" y=\"{_n(y)}\" width=\"{_n(w)}\" height=\"{_BAR}\"/>"
    if label:
        text = f"{h.label(i)} {h.kind(c)}"
        if len(text) * _CHAR_PX + 6 > w:
            text = h.kind(c)
        if len(text) * _CHAR_PX + 6 <= w:
            out += (f"<text class=\"bl\" x=\"{_n(x0 + 3)}\" y=\"{_n(y + _BAR - 2.5)}\">"
                    f"{_e(text)}</text>")
    return out


def _axis(x_of: Any, t_from: float, t_to: float, y_top: float, y_axis: float) -> str:
    """Grid lines and labelled ticks along the time axis."""
    step = _nice_step(t_to - t_from)
    first = math.ceil(t_from / step - 1e-9) * step
    out = [f"<g class=\"axis\"><line x1=\"{_LEFT}\" x2=\"{_LEFT + PLOT_WIDTH}\" "
           f"y1=\"{_n(y_axis)}\" y2=\"{_n(y_axis)}\"/>"]
    t = first
    while t <= t_to + step * 1e-6:
        x = x_of(t)
        out.append(f"<line class=\"grid\" x1=\"{_n(x)}\" x2=\"{_n(x)}\" y1=\"{_n(y_top)}\" "
                   f"y2=\"{_n(y_axis + 4)}\"/><text x=\"{_n(x)}\" y=\"{_n(y_axis + 15)}\" "
                   f"text-anchor=\"middle\">{_tick_label(t, step)}</text>")
        t += step
    out.append(f"<text x=\"{_LEFT + PLOT_WIDTH}\" y=\"{_n(y_axis + 27)}\" text-anchor=\"end\" "
               "class=\"muted\">seconds since the run's first call</text></g>")
    return "".join(out)


def _fault_rects(h: _History, x_of: Any, t_from: float, t_to: float, y0: float, y1: float,
                 cls: str) -> str:
    """Fault intervals shaded across every lane (or every latency panel)."""
    out = []
    for k, f in enumerate(h.faults):
        start = float(f.get("start") or 0)
        end = h.end if f.get("end") is None else float(f["end"])
        if end < t_from or start > t_to:
            continue
        x0, x1 = x_of(max(start, t_from)), x_of(min(end, t_to))
        out.append(f"<rect class=\"{cls}\" data-fault=\"{k}\" x=\"{_n(x0)}\" y=\"{_n(y0)}\" "
                   f"width=\"{_n(max(x1 - x0, 1.5))}\" height=\"{_n(y1 - y0)}\"><title>"
                   f"{_e(f.get('label') or 'fault')}: {_e(f.get('what') or '')} "
                   f"({_secs(start)} → {_secs(end)})</title></rect>")
    return "".join(out)


def _fault_labels(h: _History, x_of: Any, t_from: float, t_to: float) -> tuple[str, int]:
    """Each fault's label above the lanes, in the first of :data:`_LABEL_ROWS` rows where it
    does not run into another; a label that fits nowhere is left to the fault list (and
    the fault's own tooltip). Returns the markup and the rows used."""
    out = []
    label_end = [-1e9] * _LABEL_ROWS
    used = 0
    for f in h.faults:
        start = float(f.get("start") or 0)
        end = h.end if f.get("end") is None else float(f["end"])
        if end < t_from or start > t_to:
            continue
        x0 = x_of(max(start, t_from))
        name = str(f.get("label") or "fault")
        text = name if not f.get("what") else f"{name}: {f['what']}"
        if len(text) > 44:
            text = text[:42] + "…"
        width = len(text) * _CHAR_PX
        for r in range(_LABEL_ROWS):
            if label_end[r] < x0:
                label_end[r] = x0 + width + 8
                used = max(used, r + 1)
                out.append(f"<text class=\"fl\" x=\"{_n(x0 + 2)}\" "
                           f"y=\"{_n(4 + (r + 1) * _LABEL_ROW - 3)}\">{_e(text)}</text>")
                break
    return "".join(out), used


def _lanes(h: _History, x_of: Any, t_from: float, t_to: float, y: float, *, zoom: bool,
           merge: bool) -> tuple[str, str, float, tuple[int, int] | None, list[str]]:
    """The lanes' backgrounds and labels, the lanes (their calls), the y below them,
    (calls merged, bars they made) and the core markers: separate layers, so the fault
    shading can go between the backgrounds and the calls."""
    lane_cls, call_cls = ("zlane", "zc") if zoom else ("lane", "call")
    by_lane: dict[int, list[int]] = {}
    for i, c in enumerate(h.calls):
        t0, t1 = h.span(c)
        if zoom and (t1 < t_from or t0 > t_to):
            continue
        by_lane.setdefault(int(c[0]), []).append(i)
    lanes = sorted(set(range(len(h.lanes))) | set(by_lane))
    room = 9 if h.core else 0  # above each row of bars: the core calls' markers
    bg: list[str] = []
    out: list[str] = []
    markers: list[str] = []
    merged_calls = merged_bars = 0
    for n, lane in enumerate(lanes):
        rows = _pack(h, by_lane.get(lane, ()), h.end)
        name = h.lanes[lane] if 0 <= lane < len(h.lanes) else f"lane{lane}"
        row_h = _ROW + room
        height = len(rows) * row_h + 4
        bg.append(f"<rect class=\"lb{' alt' if n % 2 else ''}\" x=\"0\" y=\"{_n(y)}\" "
                  f"width=\"{_SVG_W}\" height=\"{height}\"/>"
                  f"<text class=\"ln\" x=\"{_LEFT - 8}\" y=\"{_n(y + 2 + room + _BAR)}\" "
                  f"text-anchor=\"end\">{_e(name)}</text>")
        out.append(f"<g class=\"{lane_cls}\" data-lane=\"{_e(name)}\">")
        for r, row in enumerate(rows):
            ry = y + 2 + room + r * row_h
            calls, bars = _row(h, row, x_of, ry, call_cls, merge, out, markers)
            merged_calls += calls
            merged_bars += bars
        out.append("</g>")
        y += height + _LANE_GAP
    stats = (merged_calls, merged_bars) if merged_calls else None
    return "".join(bg), "".join(out), y, stats, markers


def _draw_lanes(h: _History, cls: str, label: str, t_from: float, t_to: float, *,
                zoom: bool, bands: bool, extra: str = "") -> tuple[str, tuple[int, int] | None]:
    """One timeline picture of ``[t_from, t_to]``: lanes, faults, anomaly bands, axis."""
    span = max(t_to - t_from, 1e-6)

    def x_of(t: float) -> float:
        return _LEFT + (t - t_from) / span * PLOT_WIDTH

    labels, rows = _fault_labels(h, x_of, t_from, t_to)
    top = 6 + rows * _LABEL_ROW  # the fault labels, then the lanes
    bg, lanes, bottom, merged, markers = _lanes(h, x_of, t_from, t_to, top, zoom=zoom,
                                                merge=True)
    height = bottom + _AXIS
    shaded = []
    full = len(h.anomalies) <= ANOMALY_BANDS
    for k, a in enumerate(h.anomalies if bands else (), 1):
        idx = [int(i) for i in a.get("core") or () if 0 <= int(i) < len(h.calls)]
        if not idx:
            continue
        t0 = min(float(h.calls[i][3]) for i in idx)
        t1 = max(float(h.calls[i][4]) if h.calls[i][4] is not None else float(h.calls[i][3])
                 for i in idx)
        x0, x1 = x_of(t0), x_of(max(t1, t0))
        pad = max(0.0, (6 - (x1 - x0)) / 2)  # at least 6 px wide, so it can be found
        band = bottom - top + 6 if full else 3
        shaded.append(f"<rect class=\"aband\" x=\"{_n(x0 - pad)}\" y=\"{_n(top - 6)}\" "
                      f"width=\"{_n(x1 - x0 + 2 * pad)}\" height=\"{_n(band)}\">"
                      f"<title>anomaly {k}</title></rect>")
    svg = "".join([
        _svg_open(cls, h, height, label, extra), bg,
        "<g class=\"faults\">",
        _fault_rects(h, x_of, t_from, t_to, 2, bottom - _LANE_GAP,
                     "zfault" if zoom else "fault"),
        labels, "</g>", *shaded,
        _axis(x_of, t_from, t_to, top - 4, bottom),  # its grid under the calls
        lanes, f"<g class=\"markers\">{''.join(markers)}</g></svg>",
    ])
    return f"<div class=\"scroll\">{svg}</div>", merged


def _row(h: _History, row: Sequence[int], x_of: Any, y: float, call_cls: str, merge: bool,
         out: list[str], markers: list[str]) -> tuple[int, int]:
    """One sub-row of a lane, appended to ``out``; returns (calls merged, bars they made).

    With ``merge``, a plain call narrower than :data:`MIN_CALL_PX` joins the run of plain
    calls before it when they share its outcome and the gap between them is under that
    width too: what a person would see as one bar is drawn as one."""
    merged_calls = merged_bars = 0
    x_min, x_max = _LEFT, _LEFT + PLOT_WIDTH
    run: list[Any] | None = None  # [first, last, x0, x1, outcome, count]
    label_end = -1e9  # where the last marker number in this row ends

    def flush() -> None:
        nonlocal merged_calls, merged_bars
        if run is None:
            return
        if run[5] == 1:
            out.append(_call_rect(h, run[0], run[2], run[3], y, cls=call_cls))
            return
        merged_calls += run[5]
        merged_bars += 1
        out.append(f"<rect class=\"run\" data-o=\"{run[4]}\" data-a=\"{run[0]}\" "
                   f"data-b=\"{run[1]}\" data-n=\"{run[5]}\" x=\"{_n(run[2])}\" "
                   f"y=\"{_n(y)}\" width=\"{_n(max(run[3] - run[2], 1))}\" "
                   f"height=\"{_BAR}\"/>")

    for i in row:
        c = h.calls[i]
        t0, t1 = h.span(c)
        x0 = min(max(x_of(t0), x_min), x_max)
        x1 = min(max(x_of(t1), x_min), x_max)
        marked = i in h.core or i in h.context
        outcome = h.outcome(c)
        if merge and not marked and x1 - x0 < MIN_CALL_PX:
            if run is not None and run[4] == outcome and x0 - run[3] < MIN_CALL_PX:
                run[1], run[3], run[5] = i, max(run[3], x1), run[5] + 1
                continue
            flush()
            run = [i, i, x0, x1, outcome, 1]
            continue
        flush()
        run = None
        out.append(_call_rect(h, i, x0, x1, y, cls=call_cls, min_w=3.0 if marked else 1.0,
                              label=True))
        anomalies = h.core.get(i)
        if anomalies:
            # One marker per core call, numbered with its (first) anomaly; a number that
            # would run into the previous one in this row is left to the details panel.
            mx = x0 + min(max(x1 - x0, 3) / 2, 8)
            markers.append(f"<path class=\"mk\" d=\"M{_n(mx)} {_n(y - 1)}l-4.5-6h9z\"/>")
            text = str(anomalies[0]) + (f" +{len(anomalies) - 1}" if len(anomalies) > 1 else "")
            if mx + 5 > label_end:
                markers.append(f"<text class=\"mkt\" x=\"{_n(mx + 5)}\" y=\"{_n(y - 1.5)}\">"
                               f"{text}</text>")
                label_end = mx + 5 + len(text) * _CHAR_PX + 3
    flush()
    return merged_calls, merged_bars


def _svg_open(cls: str, h: _History, height: float, label: str, extra: str = "") -> str:
    return (f"<svg class=\"{cls}\" data-scenario=\"{_e(h.scenario)}\" data-h=\"{h.data_id}\" "
            f"{extra}role=\"img\" aria-label=\"{_e(label)}\" width=\"{_SVG_W}\" "
            f"height=\"{_n(height)}\" viewBox=\"0 0 {_SVG_W} {_n(height)}\">"
            f"<title>{_e(label)}</title>")


def _timeline(h: _History) -> tuple[str, tuple[int, int] | None]:
    core = [i for i in sorted(h.core) if 0 <= i < len(h.calls)]
    core_labels = ", ".join(f"{h.label(i)} {h.kind(h.calls[i])}" for i in core[:6])
    if len(core) > 6:
        core_labels += f" and {len(core) - 6} more"
    label = (f"Timeline of {h.scenario} ({h.verdict}): {len(h.lanes)} worker lanes, "
             f"{len(h.calls)} calls over {_secs(h.end)}, {len(h.faults)} fault interval(s), "
             f"{len(h.anomalies)} anomaly(ies)"
             + (f"; core calls {core_labels}" if core_labels else "")
             + ". The text timeline below says the same in words.")
    focus = " focus" if h.core else ""
    return _draw_lanes(h, f"timeline{focus}", label, 0.0, h.end, zoom=False, bands=True)


def _zoom_windows(h: _History) -> tuple[list[tuple[list[int], float, float]], int]:
    """The zoomed views to draw: (anomaly numbers, from, to) each, and how many anomalies
    got none. An anomaly whose calls all fall inside a view already chosen joins it (a
    run often fails the same way a few times in a row, around one call)."""
    windows: list[tuple[list[int], float, float]] = []
    left = 0
    for k, a in enumerate(h.anomalies, 1):
        idx = [int(i) for i in [*(a.get("core") or ()), *(a.get("context") or ())]
               if 0 <= int(i) < len(h.calls)]
        if not idx:
            continue
        lo = min(float(h.calls[i][3]) for i in idx)
        hi = max(float(h.calls[i][4]) if h.calls[i][4] is not None else float(h.calls[i][3])
                 for i in idx)
        for w in windows:
            if w[1] <= lo and hi <= w[2]:
                w[0].append(k)
                break
        else:
            if len(windows) == ZOOMS_SHOWN:
                left += 1
                continue
            pad = max((hi - lo) * 0.2, h.end * 0.002, 1e-4)
            windows.append(([k], max(0.0, lo - pad), min(h.end, hi + pad)))
    return windows, left


def _zooms(h: _History) -> str:
    """Each anomaly's core and context calls and everything around them, call by call."""
    windows, left = _zoom_windows(h)
    out = []
    for ks, t_from, t_to in windows:
        names = (f"Anomaly {ks[0]}" if len(ks) == 1 else
                 "Anomalies " + ", ".join(str(k) for k in ks))
        label = (f"{names} of {h.scenario}, zoomed to {_secs(t_from)} → {_secs(t_to)}: "
                 "core calls outlined and marked, context calls outlined.")
        svg, merged = _draw_lanes(h, "zoom focus", label, t_from, t_to, zoom=True,
                                  bands=False, extra=f"data-anomaly=\"{ks[0]}\" ")
        note = "" if not merged else (f" ({merged[0]} calls narrower than {MIN_CALL_PX:g} "
                                      f"px merged into {merged[1]} bars even here)")
        out.append(f"<h4>{_e(names)}, zoomed: {_e(_secs(t_from))} → {_e(_secs(t_to))}"
                   f"{_e(note)}</h4>{svg}")
    if left:
        out.append(f"<p class=\"muted\">{left} more anomalies are not zoomed: their calls are "
                   "marked in the timeline above and named in the list.</p>")
    return "".join(out)


# -- histories: latency -----------------------------------------------------------------------

_LAT_TITLE = 15  # one kind's panel: its title, the never-returned strip, the plot
_LAT_STRIP = 10
_LAT_PLOT = 56
_LAT_H = _LAT_TITLE + _LAT_STRIP + 8 + _LAT_PLOT + 4
_LAT_GAP = 8


def _decade_label(p: int) -> str:
    value = 10.0 ** p
    if value < 1e-3:
        return f"{value * 1e6:g} µs"
    if value < 1:
        return f"{value * 1e3:g} ms"
    return f"{value:g} s"


class _KindStats:
    """One call kind's calls, outcome counts and sorted latencies (returned calls)."""

    def __init__(self, h: _History, kind: int, calls: list[int]) -> None:
        self.name = h.kinds[kind] if 0 <= kind < len(h.kinds) else "?"
        self.calls = calls
        self.counts = dict.fromkeys(_CALL_OUTCOMES, 0)
        for i in calls:
            self.counts[h.outcome(h.calls[i])] += 1
        self.latencies = sorted(float(h.calls[i][4]) - float(h.calls[i][3])
                                for i in calls if h.calls[i][4] is not None)

    def quantile(self, q: float) -> float | None:
        lat = self.latencies
        return lat[min(len(lat) - 1, max(0, math.ceil(q * len(lat)) - 1))] if lat else None


def _kinds(h: _History) -> list[_KindStats]:
    """Per call kind, in the order of ``kinds`` (computed once per history)."""
    if h.kind_stats is None:
        by_kind: dict[int, list[int]] = {}
        for i, c in enumerate(h.calls):
            by_kind.setdefault(int(c[2]), []).append(i)
        h.kind_stats = [_KindStats(h, k, by_kind[k]) for k in sorted(by_kind)]
    return h.kind_stats


def _latency(h: _History) -> tuple[str, str | None]:
    """Latency (return - invoke, log scale) against invoke time, one panel per call kind,
    on the timeline's time axis so a fault band lines up with the calls it slowed."""
    end = h.end

    def x_of(t: float) -> float:
        return _LEFT + t / end * PLOT_WIDTH

    kinds = _kinds(h)
    positive = [x for k in kinds for x in k.latencies if x > 0]
    returned = sum(len(k.latencies) for k in kinds)
    lo = math.floor(math.log10(max(min(positive, default=1e-3), 1e-6)))
    hi = max(math.ceil(math.log10(max(max(positive, default=1.0), 1e-6))), lo + 1)
    binned = returned > LATENCY_POINTS_LIMIT
    marks_binned = 0
    every = 1 if hi - lo <= 4 else 2  # decade labels a panel has room for

    def y_of(base: float, v: float) -> float:
        p = (math.log10(max(v, 10.0 ** lo)) - lo) / (hi - lo)
        return base + _LAT_TITLE + _LAT_STRIP + 8 + _LAT_PLOT * (1 - p)

    bg: list[str] = []
    body: list[str] = []
    top = 4
    y = top
    for n, ks in enumerate(kinds):
        median, p99 = ks.quantile(0.5), ks.quantile(0.99)
        title = (f"{ks.name} — {len(ks.calls)} calls"
                 + (f" · median {_secs(median)} · p99 {_secs(p99)}" if median is not None
                    else "")
                 + "".join(f" · {ks.counts[o]} {o}" for o in _CALL_OUTCOMES[1:]
                           if ks.counts[o]))
        strip = y + _LAT_TITLE + _LAT_STRIP / 2
        bg.append(f"<rect class=\"lb{' alt' if n % 2 else ''}\" x=\"0\" y=\"{_n(y)}\" "
                  f"width=\"{_SVG_W}\" height=\"{_LAT_H}\"/>")
        body.append(f"<g class=\"kind\" data-kind=\"{_e(ks.name)}\">"
                    f"<text class=\"kt\" x=\"{_LEFT}\" y=\"{_n(y + 11)}\">{_e(title)}</text>"
                    f"<text class=\"tiny\" x=\"{_LEFT - 5}\" y=\"{_n(strip + 3)}\" "
                    "text-anchor=\"end\">no return</text>"
                    f"<line class=\"strip\" x1=\"{_LEFT}\" x2=\"{_LEFT + PLOT_WIDTH}\" "
                    f"y1=\"{_n(strip)}\" y2=\"{_n(strip)}\"/>")
        for p in range(lo, hi + 1):
            yy = y_of(y, 10.0 ** p)
            text = _decade_label(p) if (p - lo) % every == 0 else ""
            body.append(f"<line class=\"grid\" x1=\"{_LEFT}\" x2=\"{_LEFT + PLOT_WIDTH}\" "
                        f"y1=\"{_n(yy)}\" y2=\"{_n(yy)}\"/><text class=\"tiny\" "
                        f"x=\"{_LEFT - 5}\" y=\"{_n(yy + 3)}\" text-anchor=\"end\">{text}</text>")
        paths: dict[str, list[str]] = {o: [] for o in _CALL_OUTCOMES}
        cells: dict[tuple[int, int], int] = {}
        rings = []
        for i in ks.calls:
            c = h.calls[i]
            outcome = h.outcome(c)
            x = x_of(float(c[3]))
            if c[4] is None:
                paths["crashed"].append(f"M{_n(x - 3)} {_n(strip - 3)}l6 6m0-6l-6 6")
                if i in h.core:
                    rings.append(f"<circle class=\"lcore\" cx=\"{_n(x)}\" cy=\"{_n(strip)}\" "
                                 "r=\"6\"/>")
                continue
            yy = y_of(y, float(c[4]) - float(c[3]))
            if binned and outcome == "ok" and i not in h.core:
                key = (int((x - _LEFT) // LATENCY_CELL_PX), int((yy - y) // LATENCY_CELL_PX))
                cells[key] = cells.get(key, 0) + 1
                marks_binned += 1
                continue
            if outcome == "ok":
                paths["ok"].append(f"M{_n(x)} {_n(yy)}h0")
            elif outcome == "conflict":
                paths["conflict"].append(f"M{_n(x - 2)} {_n(yy - 2)}h4v4h-4z")
            else:
                paths["raised"].append(f"M{_n(x)} {_n(yy - 3)}l3 5h-6z")
            if i in h.core:
                rings.append(f"<circle class=\"lcore\" cx=\"{_n(x)}\" cy=\"{_n(yy)}\" r=\"6\"/>")
        if cells:
            most = max(cells.values())
            for (cx, cy), count in cells.items():
                q = 1 + min(4, int(4 * math.log1p(count) / math.log1p(most)))
                body.append(f"<rect class=\"q{q}\" x=\"{_LEFT + cx * LATENCY_CELL_PX}\" "
                            f"y=\"{_n(y + cy * LATENCY_CELL_PX)}\" width=\"{LATENCY_CELL_PX}\" "
                            f"height=\"{LATENCY_CELL_PX}\"/>")
        for o, segs in paths.items():
            if segs:
                body.append(f"<path class=\"lp-{o}\" d=\"{''.join(segs)}\"/>")
        body.append("".join(rings) + "</g>")
        y += _LAT_H + _LAT_GAP
    bottom = y - _LAT_GAP
    height = bottom + _AXIS
    label = (f"Latency of {h.scenario}'s calls per kind ({', '.join(k.name for k in kinds)}), "
             "log scale, against the time each call was invoked; fault intervals shaded, core "
             "calls ringed. The table below gives the same numbers per kind.")
    svg = (f"<div class=\"scroll\"><svg class=\"latency\" data-scenario=\"{_e(h.scenario)}\" "
           f"data-h=\"{h.data_id}\" role=\"img\" aria-label=\"{_e(label)}\" width=\"{_SVG_W}\" "
           f"height=\"{_n(height)}\" viewBox=\"0 0 {_SVG_W} {_n(height)}\">"
           f"<title>{_e(label)}</title>{''.join(bg)}"
           f"<g class=\"faults\">{_fault_rects(h, x_of, 0.0, end, top, bottom, 'lfault')}</g>"
           + _axis(x_of, 0.0, end, top, bottom) + "".join(body) + "</svg></div>")
    note = None
    if binned:
        note = (f"{returned} returned calls are more marks than a person can tell apart, so "
                f"the {marks_binned} ok ones are counted in {LATENCY_CELL_PX}-px cells "
                "(darker: more calls); conflicts, errors, calls that never returned and core "
                "calls are still one mark each.")
    return svg, note


def _latency_table(h: _History) -> str:
    """The latency view in numbers: its text alternative, and what one wants to quote."""
    rows = []
    for ks in _kinds(h):
        stats = "".join(f"<td class=\"num\">{_e(_secs(ks.quantile(q)))}</td>"
                        for q in (0.5, 0.99, 1.0))
        rows.append(f"<tr><th scope=\"row\">{_e(ks.name)}</th>"
                    f"<td class=\"num\">{len(ks.calls)}</td>"
                    + "".join(f"<td class=\"num\">{ks.counts[o]}</td>" for o in _CALL_OUTCOMES)
                    + stats + "</tr>")
    head = "".join(f"<th scope=\"col\">{o}</th>" for o in
                   ("kind", "calls", *_CALL_OUTCOMES, "median", "p99", "max"))
    return (f"<details class=\"lat\"><summary>Latency in numbers</summary><table class=\"lat\">"
            f"<caption>Calls and latency per kind ({_e(h.scenario)}); latency of returned "
            f"calls</caption><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody>"
            "</table></details>")


# -- environment ------------------------------------------------------------------------------

def _environment_section(doc: Mapping[str, Any]) -> str:
    run, store, env = doc["run"], doc["store"], doc.get("environment") or {}
    caps = doc.get("capabilities") or {}
    stress = run.get("stress_profile")
    stress_text = ("none (no stress run)" if not stress else
                   ", ".join(f"{k}={v}" for k, v in stress.items()))
    reuse = run.get("store_reuse")
    reuse_text = ("none (a new store per test and example)" if not reuse else
                  f"{reuse.get('reset_store')}: {reuse.get('stores_opened')} opened, "
                  f"{reuse.get('reuses')} reuses")
    shared = store.get("shared_spec")
    rows: list[tuple[str, object]] = [
        ("Kit version", doc.get("kit_version")),
        ("Catalogue version", doc.get("catalogue_version")),
        ("Store", f"{store['spec']} (from {store.get('source')})"),
        ("Store type", store.get("type") or "?"),
        ("Store repr", store.get("repr") or "-"),
        ("Shared store", f"{shared} (from {store.get('shared_source')})" if shared else "none"),
        ("Hypothesis profile", run.get("profile") or "-"),
        ("Stress profile", stress_text),
        ("Seeds", seeds_line(doc).removeprefix("seeds: ")),
        ("--chongming-seed", "none (the gate's fixed schedule)" if run.get("seed") is None
         else run["seed"]),
        ("Hypothesis seed", run.get("hypothesis_seed") or "none (derandomized)"),
        ("Topology", run.get("topology") or "none (no shared store)"),
        ("Store reuse", reuse_text),
        ("Timeout", f"{run.get('timeout_s')} s per test ({run.get('timeout_mechanism')})"),
        ("Started", run.get("started_at")),
        ("Duration", _secs(run.get("duration_s"))),
        ("Tests collected", run.get("tests_collected")),
        ("pytest exit status", run.get("pytest_exit_status")),
        ("Python", f"{env.get('implementation')} {env.get('python')}"),
        ("Platform", env.get("platform")),
        ("pytest / hypothesis", f"{env.get('pytest')} / {env.get('hypothesis') or '-'}"),
        ("Capabilities from", caps.get("origin") or "none declared"),
    ]
    for what, key in (("Unsupported", "unsupported"), ("Deviation", "deviations")):
        for name, why in (caps.get(key) or {}).items():
            rows.append((f"{what}: {name}", why))
    body = "".join(f"<tr><th scope=\"row\">{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in rows)
    return ("<section id=\"environment\" aria-labelledby=\"environment-h\">\n"
            "<h2 id=\"environment-h\">Run and environment</h2>\n"
            "<table class=\"env\"><caption>What ran, where, and on which schedule</caption>"
            f"<tbody>{body}</tbody></table>\n</section>\n")


# -- style, patterns, script ------------------------------------------------------------------

#: Fills shared by every picture: outcome patterns that survive greyscale.
_DEFS = (
    "<svg width=\"0\" height=\"0\" style=\"position:absolute\" aria-hidden=\"true\"><defs>"
    "<pattern id=\"p-ok\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\">"
    "<rect width=\"6\" height=\"6\" fill=\"#7cc48f\"/></pattern>"
    "<pattern id=\"p-conflict\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
    "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#c99be0\"/>"
    "<rect width=\"2.2\" height=\"6\" fill=\"#fff\"/></pattern>"
    "<pattern id=\"p-raised\" width=\"5\" height=\"5\" patternUnits=\"userSpaceOnUse\">"
    "<rect width=\"5\" height=\"5\" fill=\"#f3a83b\"/>"
    "<path d=\"M0 0L5 5M5 0L0 5\" stroke=\"#6b3d00\" stroke-width=\".9\"/></pattern>"
    "<pattern id=\"p-crashed\" width=\"4\" height=\"4\" patternUnits=\"userSpaceOnUse\" "
    "patternTransform=\"rotate(-45)\"><rect width=\"4\" height=\"4\" fill=\"#e3706b\"/>"
    "<rect width=\"1.6\" height=\"4\" fill=\"#4d1210\"/></pattern>"
    "<pattern id=\"p-fault\" width=\"8\" height=\"8\" patternUnits=\"userSpaceOnUse\" "
    "patternTransform=\"rotate(45)\"><rect width=\"8\" height=\"8\" fill=\"#fdeed6\"/>"
    "<rect width=\"1.2\" height=\"8\" fill=\"#efc58a\"/></pattern>"
    "</defs></svg>\n"
)

def _asset(name: str) -> str:
    """A file of ``report/assets/`` (package data: the wheel carries it), as text."""
    return resources.files(__name__.rpartition(".")[0]).joinpath("assets", name).read_text(
        encoding="utf-8")


#: The page's stylesheet and script, inlined into every page so it names no external asset.
#: They are files (``assets/report.css``, ``assets/report.js``) so an editor, a linter or
#: ``node --check`` can read them as what they are; tests/report/test_html_assets.py does.
_CSS = "\n" + _asset("report.css")
_JS = "\n" + _asset("report.js")
