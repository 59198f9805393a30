"""How big the HTML report gets and how fast it opens, for a history of 1k and 10k calls.

Usage::

    python benchmarks/html_render.py [--sizes 1000,10000] [--loads 5] [--out DIR]
        [--screenshot PATH] [--no-browser]

The HTML report must stay usable on the largest history a stress run keeps: a 10 000-call
history has to render in a browser in at most 1 s and the file must stay under 5 MB
(report/html.py thins and bins what a person cannot see at that scale to get there). This
script measures both on synthetic documents: 4 worker lanes, calls of realistic length
(~100 characters of call text), a 3-call anomaly core with context, 5 fault intervals with
slow and failing calls inside them, and one crashed call.

For each size it prints one row: calls, file size, the Python render time (best of 3) and
two browser times, medians over ``--loads`` loads of the ``file://`` page in headless
Chromium, in milliseconds since navigation start: the end of the load event
(``performance.timing``), and the ``chongming-drawn`` mark the page's script sets once the
first frame after the load event has been painted (``requestAnimationFrame``, then a task).
Chromium and its driver are the system's (/usr/bin/chromium, /usr/bin/chromedriver):
nothing is downloaded. ``--screenshot`` saves the largest page.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from chongming_conformance.report.html import render_html

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
KINDS = ["create", "get", "save", "touch", "query", "append", "history"]
STATUSES = ["pending", "running", "succeeded", "failed"]


def _call_text(rng: random.Random, kind: str, lane: int, seq: int) -> tuple[str, str]:
    """A call and its result, shaped like the stress timeline's (about 100 characters)."""
    task = f"mix-t{rng.randrange(24)}"
    v = rng.randrange(1, 40)
    status = rng.choice(STATUSES)
    snap = (f"Task({task} v{v} {status} 'w{lane}-s{seq}' p{rng.randrange(10)} "
            f"hb t+{rng.randrange(90)}s lease w{lane}→t+{rng.randrange(90)}s)")
    if kind == "create":
        return f"create({snap})", "ok"
    if kind == "get":
        return f"get('{task}')", snap
    if kind == "save":
        return f"save({snap}, expect_version={v - 1})", "ok"
    if kind == "touch":
        return (f"touch('{task}', heartbeat_at=t+{rng.randrange(90)}s, "
                f"progress=Progress({rng.randrange(10)}/10 'step {seq}'))", "None")
    if kind == "query":
        return (f"query(TaskQuery(statuses=['{status}'], name_prefix='mix-', limit=5))",
                f"[Task({task} v{v} {status}), Task(mix-t{rng.randrange(24)} v2 pending), "
                f"… +{rng.randrange(9)} more]")
    if kind == "append":
        return (f"append(Tr({task} v{v} pending→{status} 'worker w{lane} moved it'))", "ok")
    return f"history('{task}', since_version={rng.randrange(5)})", \
        f"[Tr({task} v1 ∅→pending None), Tr({task} v2 pending→running None)]"


def synthetic_history(n_calls: int, *, lanes: int = 4, seed: int = 7) -> dict[str, Any]:
    """A chongming-history v1 document of ``n_calls`` calls from ``lanes`` workers."""
    rng = random.Random(seed)
    per_lane = n_calls // lanes
    span = max(0.5, per_lane * 0.0021)  # ~2 ms per call and gap: what the SQL stores do
    faults: list[dict[str, Any]] = []
    for k in range(5):
        start = span * (0.08 + 0.18 * k) + rng.uniform(0, span * 0.03)
        length = span * rng.uniform(0.03, 0.08)
        what = rng.choice(["blackhole every connection", "latency +40 ms on every packet",
                           "reset every connection", "pause the server process"])
        faults.append({"label": f"nemesis #{k + 1}", "what": f"{what} for {length:.2f} s",
                       "detail": f"proxy 127.0.0.1:{41000 + k} → 127.0.0.1:5432",
                       "start": round(start, 4), "end": round(start + length, 4)})

    def in_fault(t: float) -> bool:
        return any(f["start"] <= t <= f["end"] for f in faults)

    calls: list[list[Any]] = []
    details: list[list[str]] = []
    crashed_lane = lanes - 1
    for lane in range(lanes):
        t = rng.uniform(0, 0.002)
        for seq in range(1, per_lane + 1):
            kind = rng.randrange(len(KINDS))
            lat = rng.lognormvariate(-6.6, 0.55)  # median ~1.4 ms
            outcome = "ok"
            if in_fault(t):
                lat *= rng.uniform(3, 30)
                if rng.random() < 0.25:
                    outcome = "raised"
            elif KINDS[kind] == "save" and rng.random() < 0.12:
                outcome = "conflict"
            text, result = _call_text(rng, KINDS[kind], lane, seq)
            if outcome == "conflict":
                result = "ConcurrencyConflict(expected v3, found v4)"
            elif outcome == "raised":
                result = "StoreError(OperationalError: server closed the connection unexpectedly)"
            t1: float | None = t + lat
            if lane == crashed_lane and seq == int(per_lane * 0.9):
                outcome, t1, result = "crashed", None, "(never returned: worker killed)"
            details.append([text, result])
            calls.append([lane, seq, kind, round(t, 6), None if t1 is None else round(t1, 6),
                          outcome, len(details) - 1])
            # The killed worker is restarted in its lane after a while.
            t = (t + 0.05) if t1 is None else t1 + rng.uniform(0.0001, 0.0009)
    calls.sort(key=lambda c: c[3])
    span = max(c[4] if c[4] is not None else c[3] for c in calls)
    # The anomaly: three overlapping calls on three lanes at ~60 % of the run, and the four
    # calls of other lanes that overlap them as context.
    mid = span * 0.6
    core: list[int] = []
    for lane in range(3):
        best = min((i for i, c in enumerate(calls) if c[0] == lane and c[4] is not None),
                   key=lambda i: abs(calls[i][3] - mid))
        core.append(best)
    lo = min(calls[i][3] for i in core)
    hi = max(calls[i][4] for i in core)
    context = [i for i, c in enumerate(calls) if i not in core and c[4] is not None
               and c[3] < hi + 0.004 and c[4] > lo - 0.004][:4]
    text_lines = []
    for i, c in enumerate(calls):
        if lo - 0.01 <= c[3] <= hi + 0.01:
            mark = "»" if i in core else "~" if i in context else " "
            end = "pending" if c[4] is None else f"+{c[4]:.4f}s"
            text_lines.append(f"{mark} +{c[3]:.4f}s  {end:>9}  w{c[0]} #{c[1]}  "
                              f"{details[c[6]][0]} → {details[c[6]][1]}")
    return {
        "schema": "chongming-history", "version": 1,
        "scenario": "mixed_workload", "clause": "XP-MIXED-WORKLOAD", "profile": "quick",
        "seed": seed, "verdict": "FAIL", "duration_s": round(span, 3),
        "lanes": [f"w{k}" for k in range(lanes)], "kinds": KINDS,
        "calls": calls, "details": details,
        "anomalies": [{
            "kind": "not-linearizable", "clause": "XP-MIXED-WORKLOAD",
            "message": ("No order of the 3 call(s) marked » fits the model, whatever the ~ "
                        "calls did. The furthest any order gets is [w0 save, w1 get]; then "
                        "w2 save cannot take effect: expected version 4, the task is at v5."),
            "core": core, "context": context,
            "stuck": "mix-t3: Task(mix-t3 v5 running 'w1-s25' p3) after w0 save, w1 get",
        }],
        "faults": faults,
        "thinned": None,
        "text": "\n".join(text_lines),
    }


def synthetic_doc(history: dict[str, Any]) -> dict[str, Any]:
    """A report document around one failing stress test that carries ``history``."""
    nodeid = ("chongming_conformance/suite/test_stress.py::TestStoreStress::"
              "test_xp_mixed_workload__linearizable")
    failing = {"nodeid": nodeid, "outcome": "failed", "duration_s": 12.5,
               "message": "XP-MIXED-WORKLOAD: not linearizable\n" + history["text"][:4000],
               "hypothesis": None, "blames": ["XP-MIXED-WORKLOAD"], "history": history}
    passing = {"nodeid": "chongming_conformance/suite/test_contract.py::TestStoreContract::"
                         "test_cas", "outcome": "passed", "duration_s": 0.2, "message": None,
               "hypothesis": None, "blames": []}
    clauses = [
        {"id": "SAVE-CAS", "level": "MUST", "section": "§2",
         "guide": "docs/backend-guide.md#2-snapshots", "scope": "contract",
         "text": "save() with expect_version stores only if the version matches.",
         "outcome": "PASS", "gated": True, "note": None, "tests": [passing]},
        {"id": "XP-MIXED-WORKLOAD", "level": "MUST", "section": "§8",
         "guide": "docs/backend-guide.md#8-sharing-between-processes",
         "scope": "cross_process", "text": "A mixed workload from several processes is "
         "linearizable.", "outcome": "FAIL", "gated": True, "note": None, "tests": [failing]},
    ]
    return {
        "schema": "chongming-conformance-report", "schema_version": 1,
        "kit_version": "0.1.0", "catalogue_version": "1.6",
        "store": {"spec": "reference_stores.sqlite:make_store", "source": "--chongming-store",
                  "type": "SqliteTaskStore", "repr": None,
                  "shared_spec": "reference_stores.sqlite:make_shared_store",
                  "shared_source": "found make_shared_store in reference_stores.sqlite"},
        "environment": {"python": "3.11.7", "implementation": "CPython",
                        "platform": "Linux", "pytest": "9.2.0", "hypothesis": "6.170"},
        "run": {"started_at": "2026-01-01T00:00:00+00:00", "duration_s": 30.0,
                "partial": False, "partial_reasons": [], "timeout_s": 30.0,
                "timeout_mechanism": "SIGALRM", "profile": "chongming-quick",
                "stress_profile": {"name": "quick", "processes": 4, "rounds": 40,
                                   "deadline": 60.0, "crash_cycles": 4, "seed": 7,
                                   "faults": "network", "fault_seconds": 8.0},
                "hypothesis_seed": None, "topology": "network faults on 127.0.0.1",
                "seed": 7, "gate": "must", "gate_passed": False, "pytest_exit_status": 1,
                "tests_collected": 2, "collection_errors": []},
        "capabilities": {"origin": None, "unsupported": {}, "deviations": {}},
        "verdict": "does not conform: 1 MUST clause(s) FAIL",
        "summary": {"MUST": {"PASS": 1, "FAIL": 1, "NOT VERIFIED": 0, "UNSUPPORTED": 0,
                             "DEVIATION": 0}},
        "clauses": clauses, "unmapped_tests": [],
    }


def browser_ms(path: Path, loads: int, screenshot: Path | None = None) -> tuple[float, float]:
    """Median ms from navigation start to the load event's end, and to the page's
    ``chongming-drawn`` mark (the first frame after the load event, painted)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,1000",
                "--disable-dev-shm-usage"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    try:
        times: list[float] = []
        loaded: list[float] = []
        for _ in range(loads):
            driver.get("about:blank")
            driver.get(path.resolve().as_uri())
            for _ in range(200):
                mark = driver.execute_script(
                    "const m = performance.getEntriesByName('chongming-drawn');"
                    "return m.length ? m[0].startTime : null;")
                if mark is not None:
                    break
                time.sleep(0.02)
            else:
                raise RuntimeError("the page never set its chongming-drawn mark")
            times.append(float(mark))
            loaded.append(float(driver.execute_script(
                "const t = performance.timing; return t.loadEventEnd - t.navigationStart;")))
        if screenshot is not None:
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            driver.execute_script("document.getElementById('histories').scrollIntoView()")
            driver.save_screenshot(str(screenshot))
        return statistics.median(loaded), statistics.median(times)
    finally:
        driver.quit()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--loads", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path("/tmp/h"))
    parser.add_argument("--screenshot", type=Path, default=Path("/tmp/h/html-10k.png"))
    parser.add_argument("--no-browser", action="store_true")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"| calls | file size | Python render | browser load event (median of {args.loads}) "
          "| browser drawn |\n|---:|---:|---:|---:|---:|")
    for n in sizes:
        doc = synthetic_doc(synthetic_history(n))
        best = float("inf")
        for _ in range(3):
            started = time.perf_counter()
            page = render_html(doc)
            best = min(best, time.perf_counter() - started)
        path = args.out / f"html-{n // 1000}k.html"
        path.write_text(page, encoding="utf-8")
        size = path.stat().st_size
        shot = args.screenshot if n == max(sizes) else None
        if args.no_browser:
            browser = "- | -"
        else:
            load, drawn = browser_ms(path, args.loads, shot)
            browser = f"{load:.0f} ms | {drawn:.0f} ms"
        print(f"| {len(doc['clauses'][1]['tests'][0]['history']['calls'])} "
              f"| {size / 1e6:.2f} MB | {best * 1000:.0f} ms | {browser} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
