"""The HTML report, read off a hand-made document: hooks, pictures, escaping, size.

No browser here: the page is parsed with the standard library's HTML parser and its
elements are counted through the stable hooks a browser test would use.
"""

from __future__ import annotations

import copy
import json
import re
from html.parser import HTMLParser
from typing import Any

import pytest

from chongming_conformance.report.html import (
    HISTORY_SCHEMA,
    PLOT_WIDTH,
    render_html,
)
from chongming_conformance.report.replay import replay_command

STRESS_TEST = ("chongming_conformance/suite/test_stress.py::TestStoreStress::"
               "test_xp_mixed_workload__linearizable")
ATOMIC_TEST = "chongming_conformance/suite/test_stress.py::TestStoreStress::test_xp_save_atomic"
VERDICT = "does not conform: 1 MUST clause(s) FAIL"


# -- a hand-made document -------------------------------------------------------------------

def history() -> dict[str, Any]:
    """10 calls on 3 lanes: a 2-call core (w0 #2, w1 #2), one context call (w2 #2), one
    crashed call (w2 #3, never returned) and one fault interval."""
    calls = [
        [0, 1, 0, 0.00, 0.10, "ok", 0],
        [1, 1, 1, 0.02, 0.12, "ok", 1],
        [2, 1, 0, 0.05, 0.09, "ok", 2],
        [0, 2, 1, 0.20, 0.35, "ok", 3],        # 3: core
        [1, 2, 0, 0.22, 0.30, "ok", 4],        # 4: core
        [2, 2, 2, 0.21, 0.40, "raised", 5],    # 5: context
        [0, 3, 1, 0.50, 0.60, "conflict", 6],
        [1, 3, 2, 0.55, 0.70, "ok", 7],
        [2, 3, 1, 0.80, None, "crashed", 8],   # 8: crashed
        [0, 4, 0, 0.90, 1.00, "ok", -1],       # text thinned away
    ]
    details = [[f"get('t{k}')", f"Task(t{k} v1 pending)"] for k in range(9)]
    details[3] = ["save(Task(t1 v2 running 'w0'), expect_version=1)", "ok"]
    details[4] = ["get('t1')", "Task(t1 v1 pending)"]
    return {
        "schema": HISTORY_SCHEMA, "version": 1,
        "scenario": "mixed_workload", "clause": "XP-MIXED-WORKLOAD", "profile": "quick",
        "seed": 123, "verdict": "FAIL", "duration_s": 1.2,
        "lanes": ["w0", "w1", "w2"], "kinds": ["get", "save", "touch"],
        "calls": calls, "details": details,
        "anomalies": [{"kind": "not-linearizable", "clause": "XP-MIXED-WORKLOAD",
                       "message": "No order of the 2 call(s) marked » fits the model.",
                       "core": [3, 4], "context": [5],
                       "stuck": "t1: Task(t1 v2 running) after w0 save"}],
        "faults": [{"label": "nemesis #1", "what": "blackhole every connection for 0.3 s",
                    "detail": "proxy :41000", "start": 0.45, "end": 0.75}],
        "thinned": None,
        "text": "» +0.2000s  +0.3500s  w0 #2  save(Task(t1 v2 running 'w0'), "
                "expect_version=1) → ok\n» +0.2200s  +0.3000s  w1 #2  get('t1') → "
                "Task(t1 v1 pending)",
    }


def passing_history() -> dict[str, Any]:
    return {"scenario": "save_atomic", "clause": "XP-SAVE-ATOMIC", "profile": "quick",
            "seed": None, "verdict": "PASS", "duration_s": 0.5, "lanes": ["w0", "w1"],
            "kinds": ["save"], "calls": [[0, 1, 0, 0.0, 0.2, "ok", 0],
                                         [1, 1, 0, 0.1, 0.3, "ok", 0]],
            "details": [["save(Task(a v1))", "ok"]], "anomalies": [], "faults": [],
            "thinned": None, "text": "+0.0000s  +0.2000s  w0 #1  save(Task(a v1)) → ok"}


def document(hist: dict[str, Any] | None = None) -> dict[str, Any]:
    """A minimal report: one FAIL clause whose stress test carries a history, one PASS
    clause with a passing history, one PASS and one NOT VERIFIED contract clause."""
    failing = {"nodeid": STRESS_TEST, "outcome": "failed", "duration_s": 4.5,
               "message": "XP-MIXED-WORKLOAD: not linearizable\nreplay: see below",
               "hypothesis": None, "blames": ["XP-MIXED-WORKLOAD"],
               "history": history() if hist is None else hist}
    clauses = [
        {"id": "XP-MIXED-WORKLOAD", "level": "MUST", "section": "§8",
         "guide": "docs/backend-guide.md#8-sharing-between-processes", "scope": "cross_process",
         "text": "A mixed workload is linearizable.", "outcome": "FAIL", "gated": True,
         "note": "blamed by the lincheck", "tests": [failing]},
        {"id": "SAVE-CAS", "level": "MUST", "section": "§2",
         "guide": "docs/backend-guide.md#2-snapshots", "scope": "contract",
         "text": "save() compares and sets.", "outcome": "PASS", "gated": True, "note": None,
         "tests": [{"nodeid": "s::test_cas", "outcome": "passed", "duration_s": 0.1,
                    "message": None, "hypothesis": None, "blames": []}]},
        {"id": "QUERY-LIMIT", "level": "SHOULD", "section": "§2 §10",
         "guide": "docs/backend-guide.md#2-snapshots", "scope": "contract",
         "text": "query() honours limit.", "outcome": "NOT VERIFIED", "gated": True,
         "note": "skipped: the store declares no limit",
         "tests": [{"nodeid": "s::test_limit", "outcome": "skipped", "duration_s": 0.0,
                    "message": "store declares no limit", "hypothesis": None, "blames": []}]},
        {"id": "XP-SAVE-ATOMIC", "level": "MUST", "section": "§2",
         "guide": "docs/backend-guide.md#2-snapshots", "scope": "cross_process",
         "text": "save() is atomic across processes.", "outcome": "PASS", "gated": True,
         "note": None, "tests": [{"nodeid": ATOMIC_TEST, "outcome": "passed",
                                  "duration_s": 1.0, "message": None, "hypothesis": None,
                                  "blames": [], "history": passing_history()}]},
    ]
    return {
        "schema": "chongming-conformance-report", "schema_version": 1,
        "kit_version": "0.1.0", "catalogue_version": "1.6",
        "store": {"spec": "mypkg:make_store", "source": "--chongming-store", "type": "S",
                  "repr": None, "shared_spec": "mypkg:make_shared_store",
                  "shared_source": "--chongming-shared-store"},
        "environment": {"python": "3.11.7", "implementation": "CPython",
                        "platform": "Linux-x86_64", "pytest": "9.2", "hypothesis": "6.1"},
        "run": {"started_at": "2026-01-01T00:00:00+00:00", "duration_s": 12.0,
                "partial": False, "partial_reasons": [], "timeout_s": 30.0,
                "timeout_mechanism": "SIGALRM", "profile": "chongming-quick",
                "stress_profile": {"name": "quick", "processes": 3, "rounds": 5,
                                   "deadline": 60.0, "crash_cycles": 4, "seed": 123,
                                   "faults": "network", "fault_seconds": 8.0},
                "hypothesis_seed": "4242", "topology": "network faults on the proxy",
                "seed": 123, "gate": "must", "gate_passed": False, "pytest_exit_status": 1,
                "tests_collected": 4, "collection_errors": []},
        "capabilities": {"origin": None, "unsupported": {}, "deviations": {}},
        "verdict": VERDICT,
        "summary": {"MUST": {"PASS": 2, "FAIL": 1, "NOT VERIFIED": 0, "UNSUPPORTED": 0,
                             "DEVIATION": 0},
                    "SHOULD": {"PASS": 0, "FAIL": 0, "NOT VERIFIED": 1, "UNSUPPORTED": 0,
                               "DEVIATION": 0}},
        "clauses": clauses, "unmapped_tests": [],
    }


# -- reading the page -----------------------------------------------------------------------

class Element:
    def __init__(self, tag: str, attrs: dict[str, str], parents: list[Element]) -> None:
        self.tag, self.attrs, self.parents = tag, attrs, parents
        self.text = ""

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())

    def inside(self, tag: str, cls: str | None = None) -> Element | None:
        for p in reversed(self.parents):
            if p.tag == tag and (cls is None or cls in p.classes):
                return p
        return None

    def holder(self, tag: str, cls: str) -> Element:
        """The nearest ancestor ``tag.cls`` (the test fails if there is none)."""
        found = self.inside(tag, cls)
        assert found is not None, f"no {tag}.{cls} around this {self.tag}"
        return found


class Page(HTMLParser):
    """Every element of the page with its attributes, ancestors and own text."""

    VOID = frozenset({"meta", "input", "br", "col", "img", "link", "hr", "wbr"})

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[Element] = []
        self.stack: list[Element] = []
        self.feed(html)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        el = Element(tag, {k: v or "" for k, v in attrs}, list(self.stack))
        self.elements.append(el)
        if tag not in self.VOID:
            self.stack.append(el)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append(Element(tag, {k: v or "" for k, v in attrs}, list(self.stack)))

    def handle_endtag(self, tag: str) -> None:
        for k in range(len(self.stack) - 1, -1, -1):
            if self.stack[k].tag == tag:
                del self.stack[k:]
                return

    def handle_data(self, data: str) -> None:
        for el in self.stack:
            el.text += data

    def find(self, tag: str, cls: str | None = None, **attrs: str) -> list[Element]:
        return [e for e in self.elements if e.tag == tag
                and (cls is None or cls in e.classes)
                and all(e.attrs.get(k.replace("_", "-")) == v for k, v in attrs.items())]


@pytest.fixture(scope="module")
def html() -> str:
    return render_html(document())


@pytest.fixture(scope="module")
def page(html: str) -> Page:
    return Page(html)


def timeline_of(page: Page, scenario: str) -> Element:
    [svg] = page.find("svg", "timeline", data_scenario=scenario)
    return svg


def in_svg(page: Page, svg: Element, tag: str, cls: str | None = None,
           **attrs: str) -> list[Element]:
    return [e for e in page.find(tag, cls, **attrs) if svg in e.parents]


# -- the tests ------------------------------------------------------------------------------

def test_the_verdict_and_the_gate_come_first(html: str, page: Page) -> None:
    assert html.startswith("<!DOCTYPE html>")
    [verdict] = page.find("div", "verdict")
    assert VERDICT in verdict.text and "bad" in verdict.classes
    [gate] = page.find("p", "gate")
    assert "must: FAILED" in gate.text
    assert html.index(VERDICT) < html.index("id=\"clauses\"") < html.index("id=\"histories\"")


def test_clause_rows_carry_their_hooks_grouped_by_guide_section(page: Page) -> None:
    rows = [e for e in page.find("tr") if "data-clause" in e.attrs]
    assert [(r.attrs["data-clause"], r.attrs["data-outcome"]) for r in rows] == [
        ("SAVE-CAS", "PASS"), ("QUERY-LIMIT", "NOT VERIFIED"), ("XP-SAVE-ATOMIC", "PASS"),
        ("XP-MIXED-WORKLOAD", "FAIL")]  # §2 before §8, the document's order within each
    assert [r.holder("tbody", "group").attrs["data-section"] for r in rows] == [
        "§2", "§2", "§2", "§8"]
    [failing] = page.find("tr", data_clause="XP-MIXED-WORKLOAD", data_outcome="FAIL")
    [table] = page.find("table", "clauses")
    assert page.find("caption") and [c for c in page.find("caption") if table in c.parents]
    assert all(th.attrs.get("scope") for th in page.find("th") if table in th.parents)
    assert "FAIL" in failing.text  # the outcome is written, not only coloured


def test_a_failing_row_expands_with_message_note_replay_and_guide(html: str,
                                                                   page: Page) -> None:
    [more] = page.find("tr", "more", data_for="XP-MIXED-WORKLOAD")
    [details] = [d for d in page.find("details") if more in d.parents]
    assert "open" in details.attrs
    text = details.text
    assert "XP-MIXED-WORKLOAD: not linearizable" in text
    assert "blamed by the lincheck" in text
    assert replay_command(document(), STRESS_TEST) in text
    links = [a.attrs["href"] for a in page.find("a") if more in a.parents]
    assert "docs/backend-guide.md#8-sharing-between-processes" in links
    assert "#history-0" in links
    # The NOT VERIFIED clause shows its skip message; PASS clauses are not expanded.
    assert page.find("tr", "more", data_for="QUERY-LIMIT")
    assert not page.find("tr", "more", data_for="SAVE-CAS")


def test_filters_exist_and_hide_nothing_without_script(page: Page) -> None:
    assert {e.attrs["data-filter"] for e in page.find("input")} == {
        "PASS", "FAIL", "NOT VERIFIED"}
    [fieldset] = page.find("fieldset")
    assert "hidden" in fieldset.attrs  # shown by the script, which is what makes them work
    assert not [e for e in page.elements if e.tag in ("tr", "tbody") and "hidden" in e.attrs]


def test_the_failing_history_is_drawn_with_lanes_calls_core_context_and_fault(
        page: Page) -> None:
    svg = timeline_of(page, "mixed_workload")
    assert svg.attrs["role"] == "img" and "mixed_workload" in svg.attrs["aria-label"]
    assert in_svg(page, svg, "title")
    lanes = in_svg(page, svg, "g", "lane")
    assert [g.attrs["data-lane"] for g in lanes] == ["w0", "w1", "w2"]
    calls = in_svg(page, svg, "rect", "call")
    assert sorted(int(c.attrs["data-call"]) for c in calls) == list(range(10))
    hist = history()
    for c in calls:
        call = hist["calls"][int(c.attrs["data-call"])]
        assert c.holder("g", "lane").attrs["data-lane"] == hist["lanes"][call[0]]
        assert c.attrs["data-outcome"] == call[5]
    core = [c for c in calls if c.attrs.get("data-core") == "1"]
    context = [c for c in calls if c.attrs.get("data-context") == "1"]
    assert sorted(c.attrs["data-call"] for c in core) == ["3", "4"]
    assert [c.attrs["data-call"] for c in context] == ["5"]
    assert all(c.attrs.get("tabindex") == "0" for c in core + context)
    assert not [c for c in calls if c not in core + context and "tabindex" in c.attrs]
    assert len(in_svg(page, svg, "rect", "fault")) == 1
    assert len(in_svg(page, svg, "path", "mk")) == 2  # a marker per core call


def test_every_picture_is_as_tall_as_what_it_draws() -> None:
    many = history()
    many["anomalies"] = [dict(many["anomalies"][0]) for _ in range(8)]  # past the bands
    page = Page(render_html(document(many)))
    for svg in page.find("svg"):
        if "data-h" not in svg.attrs:
            continue
        height = float(svg.attrs["height"])
        assert svg.attrs["viewbox"].split()[3] == svg.attrs["height"]
        bottoms = [float(r.attrs["y"]) + float(r.attrs["height"])
                   for r in in_svg(page, svg, "rect") if "y" in r.attrs]
        assert bottoms and max(bottoms) <= height, svg.attrs["class"]


def test_a_crashed_call_runs_to_the_end_of_the_run(page: Page) -> None:
    svg = timeline_of(page, "mixed_workload")
    [crashed] = in_svg(page, svg, "rect", "call", data_call="8")
    assert crashed.attrs["data-outcome"] == "crashed" and "open" in crashed.classes
    right = float(crashed.attrs["x"]) + float(crashed.attrs["width"])
    [axis] = [g for g in in_svg(page, svg, "g", "axis")]
    [baseline] = [ln for ln in in_svg(page, svg, "line") if axis in ln.parents
                  and "grid" not in ln.classes]
    assert right == pytest.approx(float(baseline.attrs["x2"]), abs=0.1)  # the run's end
    assert float(baseline.attrs["x2"]) - float(baseline.attrs["x1"]) == PLOT_WIDTH
    others = [float(c.attrs["x"]) + float(c.attrs["width"])
              for c in in_svg(page, svg, "rect", "call") if c is not crashed]
    assert max(others) < right - 1


def test_the_details_panel_latency_view_and_text_alternative(page: Page, html: str) -> None:
    [panel] = page.find("div", id="call-details")
    assert panel.attrs["aria-live"] == "polite"
    assert "hidden" in panel.attrs  # until the script that fills it runs
    [latency] = page.find("svg", "latency", data_scenario="mixed_workload")
    assert latency.attrs["role"] == "img" and latency.attrs["aria-label"]
    assert len(in_svg(page, latency, "rect", "lfault")) == 1
    texts = [d for d in page.find("details", "textalt")]
    assert len(texts) == 2
    [summary] = [s for s in page.find("summary") if texts[0] in s.parents]
    assert summary.text == "Text timeline"
    [pre] = [p for p in page.find("pre") if texts[0] in p.parents]
    assert pre.text == history()["text"]
    # The hover data: the history itself, minus the text the page already shows.
    [blob] = page.find("script", id="h0", type="application/json")
    assert json.loads(blob.text) == {k: v for k, v in history().items() if k != "text"}


def test_anomalies_and_faults_are_also_listed_in_words(page: Page) -> None:
    [anomalies] = page.find("ol", "anomalies")
    for needle in ("not-linearizable", "No order of the 2 call(s)", "w0 #2 save, w1 #2 get",
                   "t1: Task(t1 v2 running) after w0 save"):
        assert needle in anomalies.text, needle
    [faults] = page.find("details", "faults")
    assert "nemesis #1" in faults.text and "blackhole every connection" in faults.text
    assert "450.0 ms → 750.0 ms" in faults.text


def test_a_passing_history_is_drawn_collapsed_after_the_failing_one(page: Page) -> None:
    svg = timeline_of(page, "save_atomic")
    holder = svg.inside("details", "hist-pass")
    assert holder is not None and "open" not in holder.attrs
    assert "focus" not in svg.classes  # no anomaly: nothing is faint
    assert page.elements.index(timeline_of(page, "mixed_workload")) < page.elements.index(svg)


def test_the_environment_names_versions_store_profiles_seeds_topology(page: Page) -> None:
    [section] = page.find("section", id="environment")
    text = section.text
    for needle in ("0.1.0", "1.6", "mypkg:make_store", "chongming-quick", "processes=3",
                   "--chongming-seed=123", "4242", "network faults on the proxy"):
        assert needle in text, needle


def test_no_external_url_anywhere(html: str) -> None:
    assert not re.search(r"(?i)(src|href)\s*=\s*[\"']?\s*(https?:)?//", html)
    assert not re.search(r"(?i)url\(\s*[\"']?\s*(https?:)?//", html)
    assert not re.search(r"(?i)https?://", html)


def test_a_guide_link_is_kept_only_when_relative() -> None:
    doc = document()
    doc["clauses"][1]["guide"] = "https://evil.example/guide#2"
    doc["clauses"][2]["guide"] = "javascript:alert(1)"
    page = Page(render_html(doc))
    hrefs = [a.attrs["href"] for a in page.find("a")]
    assert not [h for h in hrefs if "evil" in h or "javascript" in h]
    assert "docs/backend-guide.md#2-snapshots" in hrefs  # XP-SAVE-ATOMIC's, still relative


EVIL = "<script>alert('x')</script><x-evil a=\"1\">"


def test_every_dynamic_string_is_escaped() -> None:
    doc = document()
    hist = doc["clauses"][0]["tests"][0]["history"]
    doc["store"]["spec"] = f"m:{EVIL}"
    doc["environment"]["platform"] = EVIL
    doc["clauses"][0]["note"] = EVIL
    doc["clauses"][0]["text"] = EVIL
    doc["clauses"][0]["tests"][0]["message"] = f"boom {EVIL}"
    hist["details"][3] = [f"save({EVIL})", f"result {EVIL}"]
    hist["kinds"][1] = f"save{EVIL}"
    hist["lanes"][2] = f"w2{EVIL}"
    hist["anomalies"][0]["message"] = EVIL
    hist["anomalies"][0]["stuck"] = EVIL
    hist["faults"][0]["label"] = EVIL
    hist["faults"][0]["what"] = EVIL
    hist["thinned"] = EVIL
    hist["text"] = EVIL
    out = render_html(doc)
    assert "<x-evil" not in out and "<script>alert" not in out
    assert out.count("<script") == 3  # the page's own, and one JSON block per history
    page = Page(out)
    assert not page.find("x-evil")
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in out
    assert "\\u003cscript\\u003ealert('x')\\u003c/script\\u003e" in out  # the JSON block
    [blob] = page.find("script", id="h0")
    assert json.loads(blob.text)["details"][3][0] == f"save({EVIL})"


def big_history(n: int, thinned: str | None = None) -> dict[str, Any]:
    """``n`` back-to-back calls on 4 lanes over about ``n / 2`` ms, core of 3, 5 faults."""
    calls: list[list[Any]] = []
    details = []
    for k in range(n):
        lane, seq = k % 4, k // 4 + 1
        t0 = seq * 0.002 + lane * 0.0003
        outcome = "conflict" if k % 97 == 0 else "raised" if k % 211 == 0 else "ok"
        details.append([f"save(Task(mix-t{k % 24} v{seq} running 'w{lane}-s{seq}' p3 hb t+12s "
                        f"lease w{lane}→t+40s), expect_version={seq - 1})", "ok"])
        calls.append([lane, seq, k % 3, round(t0, 6), round(t0 + 0.0015, 6), outcome, k])
    core = [n // 2, n // 2 + 1, n // 2 + 2]
    end = calls[-1][4]
    return {
        "scenario": "mixed_workload", "clause": "XP-MIXED-WORKLOAD", "profile": "quick",
        "seed": 1, "verdict": "FAIL", "duration_s": end, "lanes": ["w0", "w1", "w2", "w3"],
        "kinds": ["get", "save", "touch"], "calls": calls, "details": details,
        "anomalies": [{"kind": "not-linearizable", "clause": "XP-MIXED-WORKLOAD",
                       "message": "m", "core": core, "context": [n // 2 + 3],
                       "stuck": "s"}],
        "faults": [{"label": f"nemesis #{k}", "what": "pause", "detail": None,
                    "start": end * k / 6, "end": end * k / 6 + end / 20} for k in range(1, 6)],
        "thinned": thinned, "text": "\n".join(" ".join(map(str, d)) for d in details[:50]),
    }


def test_every_call_is_drawn_or_counted_in_a_merged_bar(page: Page) -> None:
    svg = timeline_of(page, "mixed_workload")
    assert not in_svg(page, svg, "rect", "run")  # 10 calls: nothing to merge
    big = Page(render_html(document(big_history(3000))))
    svg = timeline_of(big, "mixed_workload")
    drawn = len(in_svg(big, svg, "rect", "call"))
    merged = sum(int(r.attrs["data-n"]) for r in in_svg(big, svg, "rect", "run"))
    assert drawn < 3000 and drawn + merged == 3000


def test_a_10k_call_history_stays_under_5_mb_and_says_what_it_thinned() -> None:
    note = "1 200 calls of the setup phase were left out."
    out = render_html(document(big_history(10_000, thinned=note)))
    assert len(out.encode("utf-8")) < 5_000_000
    page = Page(out)
    svg = timeline_of(page, "mixed_workload")
    assert len(in_svg(page, svg, "rect", "call")) < 2_000  # merged: a pixel cannot show more
    assert len(in_svg(page, svg, "rect", "call", data_core="1")) == 3
    assert len(in_svg(page, svg, "rect", "fault")) == 5
    thinned = " ".join(e.text for e in page.find("p", "thinned"))
    assert note in thinned
    assert "merged into" in thinned
    assert "counted in 4-px cells" in thinned  # latency binned, and the page says so
    [zoom] = page.find("svg", "zoom", data_anomaly="1")
    assert len(in_svg(page, zoom, "rect", "zc", data_core="1")) == 3


def test_a_document_without_history_renders_without_the_histories_section() -> None:
    doc = copy.deepcopy(document())
    for entry in doc["clauses"]:
        for t in entry["tests"]:
            t.pop("history", None)
    out = render_html(doc)
    assert "svg class=\"timeline" not in out and "id=\"histories\"" not in out
    assert VERDICT in out
