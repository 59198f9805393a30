(() => {
"use strict";
const d = document;
d.documentElement.classList.add("js");
const bar = d.getElementById("filters");
const boxes = [...d.querySelectorAll("input[data-filter]")];
const count = d.getElementById("filter-count");
const apply = () => {
  const on = new Set(boxes.filter(b => b.checked).map(b => b.dataset.filter));
  let shown = 0, total = 0;
  for (const tb of d.querySelectorAll("tbody.group")) {
    let any = false;
    for (const tr of tb.querySelectorAll("tr[data-clause]")) {
      const vis = on.has(tr.dataset.outcome);
      tr.hidden = !vis; total++;
      if (vis) { shown++; any = true; }
      const more = tr.nextElementSibling;
      if (more && more.dataset.for === tr.dataset.clause) more.hidden = !vis;
    }
    tb.hidden = !any;
  }
  if (count) count.textContent = `showing ${shown} of ${total} clauses`;
};
if (bar) { bar.hidden = false; boxes.forEach(b => b.addEventListener("change", apply)); apply(); }

const panel = d.getElementById("call-details");
if (panel) panel.hidden = false;
const cache = new Map();
const data = id => {
  if (!cache.has(id)) cache.set(id, JSON.parse(d.getElementById(id).textContent));
  return cache.get(id);
};
const at = t => t == null ? "never" : `+${(+t).toFixed(4)} s`;
const dur = x => x < 1 ? `${(x * 1000).toFixed(1)} ms` : `${x.toFixed(3)} s`;
const name = (h, c) => `${h.lanes[c[0]] ?? "lane" + c[0]} #${c[1]}`;
const kind = (h, c) => h.kinds[c[2]] ?? "?";
function describe(el, h) {
  const out = [];
  const line = (text, cls) => out.push([text, cls]);
  if (el.dataset.call != null) {
    const i = +el.dataset.call, c = h.calls[i];
    const det = c[6] >= 0 ? h.details[c[6]] : null;
    line(`${name(h, c)} ${kind(h, c)} — ${c[5]}`, "b");
    line(det ? det[0] : "(the call's text was thinned away)", "code");
    if (det) line("→ " + det[1], "code");
    line(`invoked ${at(c[3])}, ` + (c[4] == null ? "never returned (crashed, killed or pending)"
      : `returned ${at(c[4])} after ${dur(c[4] - c[3])}`));
    // A call can be in the core of dozens of anomalies (one prune, every task it dropped):
    // the first two in full, the rest as their numbers, so the panel stays a panel.
    const anomalies = h.anomalies || [];
    const core = anomalies.map((a, k) => k).filter(k => (anomalies[k].core || []).includes(i));
    const ctx = anomalies.map((a, k) => k).filter(k => !core.includes(k)
      && (anomalies[k].context || []).includes(i));
    core.slice(0, 2).forEach(k => {
      const a = anomalies[k];
      line(`core call of anomaly ${k + 1}: ${a.kind} (${a.clause})`, "b");
      if (a.stuck) line("stuck: " + a.stuck, "code");
    });
    if (core.length > 2) {
      const rest = core.slice(2).map(k => k + 1);
      line(`and of ${rest.length} more: anomal${rest.length > 1 ? "ies" : "y"} `
        + rest.slice(0, 12).join(", ") + (rest.length > 12 ? ", …" : ""), "b");
    }
    if (ctx.length) {
      line(`context call of anomal${ctx.length > 1 ? "ies" : "y"} `
        + ctx.slice(0, 12).map(k => k + 1).join(", ") + (ctx.length > 12 ? ", …" : "")
        + ": it may or may not have taken effect");
    }
  } else if (el.dataset.a != null) {
    const a = h.calls[+el.dataset.a], b = h.calls[+el.dataset.b];
    line(`${el.dataset.n} calls merged (each narrower than the pixels this view gives it)`, "b");
    line(`${name(h, a)} … ${name(h, b)}, all ${el.dataset.o}, ${at(a[3])} to ${at(b[4])}`);
  } else if (el.dataset.fault != null) {
    const f = h.faults[+el.dataset.fault];
    line(`${f.label}: ${f.what}`, "b");
    line(`${at(f.start)} to ${at(f.end)}`);
    if (f.detail) line(f.detail, "code");
  }
  panel.replaceChildren(...out.map(([t, cls]) => {
    const p = d.createElement("div"); p.textContent = t; if (cls) p.className = cls; return p;
  }));
}
let current = null, marked = [];
function show(ev) {
  const t = ev.target;
  const el = t instanceof Element ? t.closest("[data-call],[data-a],[data-fault]") : null;
  if (!el || el === current || !panel) return;
  const svg = el.closest("svg[data-h]");
  if (!svg) return;
  current = el;
  marked.forEach(m => m.classList.remove("sel"));
  marked = [];
  if (el.dataset.call != null) {
    const sel = `svg[data-h="${svg.dataset.h}"] [data-call="${el.dataset.call}"]`;
    marked = [...d.querySelectorAll(sel)];
    marked.forEach(m => m.classList.add("sel"));
  }
  describe(el, data(svg.dataset.h));
}
d.addEventListener("mouseover", show);
d.addEventListener("focusin", show);
addEventListener("load", () => requestAnimationFrame(() =>
  setTimeout(() => performance.mark("chongming-drawn"), 0)));
})();
