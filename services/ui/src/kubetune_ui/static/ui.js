// kubetune UI: fetch the page's JSON, draw it, and redraw when the server's event stream says
// something shown has changed (the server watches the Kubernetes API; nothing polls).
"use strict";

const $ = (id) => document.getElementById(id);
const esc = (s) => String(s ?? "").replace(/[&<>"']/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
// Numbers as people read them (the CLI's tables do the same): a number with a fraction or an
// exponent shows 4 significant digits (0.7698433199853741 reads 0.7698), whole numbers below
// 1e15 in full; integers, categories, `unavailable` and non-finite values as written. A cell
// keeps the stored value in its title, and the JSON API keeps every digit.
const NUMBER = /^[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$/;
function readable(v) {
  if (v === null || v === undefined || v === "") return "";
  const text = String(v);
  if (typeof v !== "number" && !(NUMBER.test(text) && /[.eE]/.test(text))) return text;
  const x = Number(v);
  if (!Number.isFinite(x)) return text;
  if (x === 0) return "0";
  const [mantissa, power] = x.toExponential(3).split("e");
  const exponent = Number(power);
  const trim = (s) => (s.includes(".") ? s.replace(/\.?0+$/, "") : s);
  if (exponent >= 4 && Math.abs(x) < 1e15) return x.toFixed(0);
  if (exponent < -4 || exponent >= 4) {
    return `${trim(mantissa)}e${exponent < 0 ? "-" : "+"}${String(Math.abs(exponent)).padStart(2, "0")}`;
  }
  return trim(x.toFixed(3 - exponent));
}
// Plotly reads a few HTML tags in titles, labels and ticks (<b>, <br>, <a href>): names from
// an Experiment (parameters, metrics, categories) are shown as written, never as markup.
const plain = (s) => String(s ?? "").replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
const count = (n) => Number(n).toLocaleString("en-US");
const numCell = (v) => `<td class="num" title="${esc(v)}">${esc(readable(v))}</td>`;
// plotly.js loads async (4.8 MB to parse): tables are drawn first, charts once it is there.
const plotlyReady = new Promise((resolve) => {
  if (window.Plotly) { resolve(); return; }
  const tag = document.getElementById("plotly");
  if (tag) tag.addEventListener("load", () => resolve());
});
const parts = location.pathname.split("/").filter(Boolean).map(decodeURIComponent);

// Integer axes (trial numbers, report steps, int parameters) get whole-number ticks only:
// plotly's automatic ticks would put 1.5 and 2.5 between trials 1 to 3. The step is a 1-2-5
// multiple near an eighth of the shown range, at least 1; it is recomputed on zoom.
function integerStep(lo, hi) {
  const raw = Math.max(1, hi - lo) / 8;
  const base = Math.pow(10, Math.floor(Math.log10(raw)));
  return Math.max(1, Math.round([1, 2, 5, 10].map((m) => m * base).find((s) => s >= raw)));
}
function integerAxis(values) {
  const numbers = values.map(Number).filter(Number.isFinite);
  const lo = numbers.length ? Math.min(...numbers) : 0, hi = numbers.length ? Math.max(...numbers) : 1;
  return {tickmode: "linear", tick0: 0, dtick: integerStep(lo, hi), tickformat: "d"};
}
function keepIntegerTicks(id, axes) {
  const el = $(id);
  if (el.dataset.integerTicks) return;
  el.dataset.integerTicks = "1";
  el.on("plotly_relayout", (ev) => {
    const update = {};
    for (const axis of axes) {
      const range = el.layout[axis] && el.layout[axis].range;
      if (!el.layout[axis] || el.layout[axis].tickmode !== "linear" || !range) continue;
      if (ev[`${axis}.range[0]`] === undefined && !ev[`${axis}.autorange`]) continue;
      update[`${axis}.dtick`] = integerStep(range[0], range[1]);
    }
    if (Object.keys(update).length) Plotly.relayout(el, update);
  });
}

// Each chart's draw is timed: `<name>Ms` on <body>, milliseconds from navigation start to its
// first draw, and `<name>DrawMs`, how long its last fetch and draw took (the bench reads both).
async function timed(name, draw) {
  const start = performance.now();
  await draw();
  const data = document.body.dataset;
  data[name + "DrawMs"] = String(Math.round(performance.now() - start));
  if (!data[name + "Ms"]) data[name + "Ms"] = String(Math.round(performance.now()));
}

// At most one run every `ms` with the newest argument (the first one at once): for charts too
// costly to redraw on every change notice of a running experiment.
function throttled(ms, run) {
  let latest = null, timer = null, at = -Infinity;
  return (arg) => {
    latest = arg;
    if (timer) return;
    timer = setTimeout(async () => {
      timer = null;
      at = Date.now();
      await run(latest);
    }, Math.max(0, at + ms - Date.now()));
  };
}

// Known results a warm start fed to the algorithm (`status.warmStart`): said apart from the
// trial counts, never counted among them, since no Trial ran for them. `source` writes one
// source (kind, name, and why nothing came, if so): as escaped HTML or as plain text.
function warmStartLine(w, source) {
  const from = w.sources.map(source).join(", ");
  return `warm start: ${count(w.imported)} known results imported, ${count(w.skipped)} skipped (not trials)` +
    (from ? " from " + from : "");
}
const warmSourceText = (s) => `${s.kind} ${s.name}${s.message ? ` (${s.message})` : ""}`;
const warmSourceHtml = (s) => `<span class="warm-source" title="${esc(`${count(s.imported)} imported, ${count(s.skipped)} skipped`)}">` +
  `${esc(s.kind)} ${esc(s.name)}</span>${s.message ? ` <span class="muted">(${esc(s.message)})</span>` : ""}`;

function age(ts) {
  if (!ts) return "";
  const s = Math.max(0, (Date.now() - Date.parse(ts)) / 1000);
  if (s < 120) return Math.round(s) + "s";
  if (s < 7200) return Math.round(s / 60) + "m";
  if (s < 172800) return Math.round(s / 3600) + "h";
  return Math.round(s / 86400) + "d";
}

function duration(a, b) {
  if (!a) return "";
  const s = ((b ? Date.parse(b) : Date.now()) - Date.parse(a)) / 1000;
  return s < 120 ? Math.round(s) + "s" : Math.round(s / 60) + "m";
}

async function getJSON(url) {
  const r = await fetch(url, {cache: "no-store"});
  const body = await r.json();
  if (!r.ok) throw new Error(body.message || r.statusText);
  return body;
}

async function write(method, url, body) {
  const r = await fetch(url, {
    method, headers: {"Content-Type": "application/json", "X-Kubetune-UI": "1"},
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const answer = await r.json().catch(() => ({message: r.statusText}));
  if (!r.ok) throw new Error(answer.message || r.statusText);
  return answer;
}

// Redraw on every change notice; `loads` counts finished draws (tests and the bench wait on it).
function live(topics, load) {
  let running = false, again = false;
  const run = async () => {
    if (running) { again = true; return; }
    running = true;
    try { await load(); } catch (e) { const el = $("page-error") || $("list-error"); if (el) el.textContent = e.message; }
    running = false;
    // Milliseconds from navigation start to the first complete draw (the bench reads it).
    if (!document.body.dataset.loads) document.body.dataset.chartsMs = String(Math.round(performance.now()));
    document.body.dataset.loads = String(Number(document.body.dataset.loads || 0) + 1);
    if (again) { again = false; run(); }
  };
  const q = topics.map((t) => "topic=" + encodeURIComponent(t)).join("&");
  const events = new EventSource("/api/events?" + q);
  events.addEventListener("change", run);
  run();
}

// ---- experiments list ----
function experimentsPage() {
  live(["experiments"], async () => {
    const data = await getJSON("/api/experiments");
    const writable = data.writes !== "off";
    $("experiments").tBodies[0].innerHTML = data.experiments.map((e) => {
      const link = `/experiments/${encodeURIComponent(e.namespace)}/${encodeURIComponent(e.name)}`;
      const actions = writable
        ? `<button class="delete" data-ns="${esc(e.namespace)}" data-name="${esc(e.name)}">Delete</button>
           <input class="max-trials" size="4" value="${esc(e.maxTrialCount ?? "")}" title="maxTrialCount">
           <button class="restart" data-ns="${esc(e.namespace)}" data-name="${esc(e.name)}">Set max trials</button>`
        : "";
      return `<tr data-name="${esc(e.name)}"><td>${esc(e.namespace)}</td><td><a href="${link}">${esc(e.name)}</a></td>
        <td class="state-${esc(e.state)}">${esc(e.state)}</td><td class="num">${e.counts.trials}</td>
        <td class="num warm-start" title="${esc(e.warmStart ? warmStartLine(e.warmStart, warmSourceText) : "")}">${e.warmStart ? count(e.warmStart.imported) : ""}</td>
        <td class="num">${e.counts.succeeded}</td><td class="num">${e.counts.running}</td><td class="num">${e.counts.failed}</td>
        ${numCell(e.bestObjective)}<td>${age(e.created)}</td><td>${actions}</td></tr>`;
    }).join("");
    $("create").disabled = !writable;
  });
  $("experiments").addEventListener("click", async (ev) => {
    const b = ev.target.closest("button");
    if (!b) return;
    const url = `/api/experiments/${encodeURIComponent(b.dataset.ns)}/${encodeURIComponent(b.dataset.name)}`;
    try {
      if (b.classList.contains("delete")) {
        if (!confirm(`Delete experiment ${b.dataset.name} and all its trials?`)) return;
        await write("DELETE", url);
      } else if (b.classList.contains("restart")) {
        const count = Number(b.parentElement.querySelector(".max-trials").value);
        await write("POST", url + "/max-trials", {maxTrialCount: count});
      }
      $("list-error").textContent = "";
    } catch (e) { $("list-error").textContent = e.message; }
  });
  $("create").addEventListener("click", async () => {
    $("create-error").textContent = "";
    try {
      const made = await write("POST", "/api/experiments", {yaml: $("yaml").value, namespace: $("namespace").value});
      location.href = `/experiments/${encodeURIComponent(made.namespace)}/${encodeURIComponent(made.name)}`;
    } catch (e) { $("create-error").textContent = e.message; }
  });
}

// ---- one experiment ----
const sortState = {key: "created", desc: false};

function sortValue(row, key) {
  if (key.startsWith("p:")) return row.parameters[key.slice(2)];
  if (key.startsWith("m:")) return row.metrics[key.slice(2)];
  if (key === "duration") return row.start ? ((row.end ? Date.parse(row.end) : Date.now()) - Date.parse(row.start)) : null;
  return row[key];
}

function compare(a, b) {
  const empty = (v) => v === null || v === undefined || v === "";
  if (empty(a)) return empty(b) ? 0 : 1;
  if (empty(b)) return -1;
  const x = Number(a), y = Number(b);
  if (!isNaN(x) && !isNaN(y)) return x - y;
  return String(a).localeCompare(String(b));
}

function drawTrials(data) {
  const ns = parts[1];
  const cols = [["name", "Trial"], ["state", "State"], ["objective", "Objective"]]
    .concat(data.parameters.map((p) => ["p:" + p, p]))
    .concat(data.metrics.map((m) => ["m:" + m, m]))
    .concat([["duration", "Duration"], ["created", "Created"]]);
  const head = $("trials").tHead;
  head.innerHTML = "<tr>" + cols.map(([k, label]) => {
    const cls = k === sortState.key ? (sortState.desc ? " sorted-desc" : " sorted-asc") : "";
    return `<th class="sortable${cls}" data-key="${esc(k)}">${esc(label)}</th>`;
  }).join("") + "</tr>";
  const rows = data.trials.slice();
  rows.sort((a, b) => {
    const c = compare(sortValue(a, sortState.key), sortValue(b, sortState.key));
    return sortState.desc ? -c : c;
  });
  $("trials").tBodies[0].innerHTML = rows.map((r) => {
    const link = `/trials/${encodeURIComponent(ns)}/${encodeURIComponent(r.name)}`;
    return `<tr data-name="${esc(r.name)}"><td><a href="${link}">${esc(r.name)}</a></td>
      <td class="state-${esc(r.state)}">${esc(r.state)}</td>${numCell(r.objective)}` +
      data.parameters.map((p) => numCell(r.parameters[p])).join("") +
      data.metrics.map((m) => numCell(r.metrics[m])).join("") +
      `<td>${duration(r.start, r.end)}</td><td>${esc(r.created)}</td></tr>`;
  }).join("");
}

// Charts of every trial draw at most CHART_POINTS of them, evenly spaced over the run (the
// first and the last kept), so a page of 10,000 trials stays quick; the table keeps them all.
const CHART_POINTS = 2000;
function evenlySample(items, limit = CHART_POINTS) {
  if (items.length <= limit) return items;
  return Array.from({length: limit}, (_, i) => items[Math.round(i * (items.length - 1) / (limit - 1))]);
}

function drawObjective(data) {
  const e = data.experiment;
  const shown = evenlySample(data.trials.map((r, i) => [i + 1, r]));
  // The best-so-far line only changes at a new best: its steps (and the last trial) draw it.
  const steps = data.bestSoFar.map((v, i) => [i + 1, v]).filter(([i, v]) => i === data.bestSoFar.length || v !== data.bestSoFar[i - 2]);
  const sampled = shown.length < data.trials.length ? ` (${count(shown.length)} of ${count(data.trials.length)} trials drawn)` : "";
  Plotly.react("objective-chart", [
    {x: shown.map(([i]) => i), y: shown.map(([, r]) => r.objective), text: shown.map(([, r]) => r.name), mode: "markers", name: plain(e.objectiveMetric || "objective")},
    {x: steps.map(([i]) => i), y: steps.map(([, v]) => v), mode: "lines", line: {shape: "hv"}, name: "best so far"},
  ], {title: {text: `${plain(e.objectiveMetric)} per trial (${e.objectiveType})${sampled}`}, xaxis: {title: {text: "trial"}, ...integerAxis([1, data.trials.length])}, margin: {t: 40}}, {responsive: true, displaylogo: false});
  keepIntegerTicks("objective-chart", ["xaxis"]);
}

// Parallel coordinates are WebGL: cheap on a GPU, seconds for 1,000 lines in software GL (a
// headless or GPU-less browser). So they are drawn after the rest, at most once per 5 s.
const scheduleParcoords = throttled(5000, (data) => timed("parcoords", () => drawParcoords(data)));

function drawParcoords(data) {
  const e = data.experiment;
  const done = evenlySample(data.trials.filter((r) => r.objective !== null));
  const dims = data.parameters.map((p) => {
    const raw = done.map((r) => r.parameters[p]);
    if (raw.every((v) => v !== undefined && v !== "" && !isNaN(Number(v)))) {
      const values = raw.map(Number);
      if ((data.parameterTypes || {})[p] !== "int" || !values.length) return {label: plain(p), values};
      const lo = Math.min(...values), hi = Math.max(...values), step = integerStep(lo, hi);
      const ticks = [];
      for (let v = Math.ceil(lo / step) * step; v <= hi; v += step) ticks.push(v);
      return {label: plain(p), values, tickvals: ticks, ticktext: ticks.map(String)};
    }
    const cats = [...new Set(raw)].sort();
    return {label: plain(p), values: raw.map((v) => cats.indexOf(v)), tickvals: cats.map((_, i) => i), ticktext: cats.map(plain)};
  });
  dims.push({label: plain(e.objectiveMetric || "objective"), values: done.map((r) => r.objective)});
  return Plotly.react("parcoords", [{type: "parcoords", dimensions: dims,
    line: {color: done.map((r) => r.objective), colorscale: "Viridis", showscale: true, reversescale: e.objectiveType === "minimize"}}],
    {title: {text: "parameters against the objective"}, margin: {t: 60, l: 60, r: 60}}, {displaylogo: false});
}

// ---- the study: importance, slices, contour, distribution, intermediate values, Pareto ----
// The server sends bounded samples and aggregates (at most a few thousand points a chart,
// whatever the number of trials); the page says how many of how many are drawn.
const experimentUrl = () => `/api/experiments/${encodeURIComponent(parts[1])}/${encodeURIComponent(parts[2])}`;
const chartConfig = {displaylogo: false};
let study = null;

function axisOf(parameter, values) {
  if (!parameter) return {};
  if (parameter.type === "int") return integerAxis(values);
  if (parameter.log) return {type: "log"};
  if (parameter.type === "categorical") return {type: "category"};
  return {};
}

async function drawImportance() {
  const data = await getJSON(experimentUrl() + "/importance");
  const rows = data.importances.slice().reverse();  // the most important on top
  $("importance-note").textContent = data.message ||
    `${data.evaluator}, on ${count(data.used)} of ${count(data.of)} succeeded trials (at most ${count(data.limit)}, evenly spaced)`;
  return Plotly.react("importance-chart", [{type: "bar", orientation: "h", x: rows.map((r) => r.importance), y: rows.map((r) => plain(r.name)),
    text: rows.map((r) => readable(r.importance)), textposition: "auto"}],
    {title: {text: "hyperparameter importance"}, xaxis: {range: [0, 1]}, yaxis: {automargin: true}, margin: {t: 40}}, chartConfig);
}

function drawSlices(data) {
  const s = data.sample, box = $("slices");
  for (const p of data.parameters) {
    const id = "slice-" + p.name;
    let el = document.getElementById(id);
    if (!el) {
      el = document.createElement("div");
      el.id = id;
      el.className = "chart small slice";
      el.dataset.parameter = p.name;
      box.appendChild(el);
    }
    const xs = p.type === "categorical" ? s.params[p.name].map(plain) : s.params[p.name];
    Plotly.react(el, [{x: xs, y: s.values, text: s.trials, mode: "markers", type: "scatter",
      marker: {size: 5, color: s.index, colorscale: "Blues", showscale: false}}],
      {title: {text: plain(p.name)}, xaxis: {title: {text: plain(p.name)}, ...axisOf(p, xs)}, yaxis: {title: {text: plain(data.objective.metric)}},
        margin: {t: 40}, showlegend: false}, chartConfig);
    if (p.type === "int") keepIntegerTicks(id, ["xaxis"]);
  }
}

function drawEdf(data) {
  const d = data.edf;
  return Plotly.react("edf-chart", [{x: d.x, y: d.y, mode: "lines+markers", line: {shape: "hv"}, marker: {size: 3}, name: "EDF"}],
    {title: {text: `empirical distribution of ${plain(data.objective.metric)} (${count(d.of)} trials)`},
      xaxis: {title: {text: plain(data.objective.metric)}}, yaxis: {title: {text: "share of trials ≤ value"}, range: [0, 1.02]}, margin: {t: 40}}, chartConfig);
}

function drawIntermediate(data) {
  const d = data.intermediate;
  // One trace per kind, curves separated by gaps: hundreds of traces would each cost a redraw.
  const joined = (trials) => {
    const out = {x: [], y: [], text: []};
    for (const t of trials) {
      out.x.push(...t.steps, null); out.y.push(...t.values, null); out.text.push(...t.steps.map(() => t.name), "");
    }
    return out;
  };
  const stopped = d.trials.filter((t) => t.earlyStopped), ran = d.trials.filter((t) => !t.earlyStopped);
  const a = joined(ran), b = joined(stopped);
  const steps = d.trials.flatMap((t) => t.steps);
  Plotly.react("intermediate-chart", [
    {...a, mode: "lines", name: "trials", line: {width: 1, color: "#1f77b4"}, connectgaps: false},
    {...b, mode: "lines", name: "early stopped", line: {width: 1, color: "#d62728", dash: "dot"}, connectgaps: false},
    {x: stopped.map((t) => t.steps[t.steps.length - 1]), y: stopped.map((t) => t.values[t.values.length - 1]),
      text: stopped.map((t) => t.name), mode: "markers", name: "stopped here", marker: {symbol: "x", size: 8, color: "#d62728"}},
  ], {title: {text: `intermediate ${plain(data.objective.metric)} (${count(d.trials.length)} of ${count(d.of)} trials; ${count(d.earlyStopped)} early stopped)`},
    xaxis: {title: {text: "step"}, ...integerAxis(steps)}, margin: {t: 40}}, chartConfig);
  keepIntegerTicks("intermediate-chart", ["xaxis"]);
}

function drawPareto(data) {
  const d = data.pareto, el = $("pareto-chart");
  el.hidden = d.objectives.length < 2;
  if (el.hidden) return;
  const names = d.objectives.map((o) => `${plain(o.metric)} (${plain(o.type)})`);
  const title = {text: `Pareto front: ${count(d.front.length)} trials (of ${count(d.frontSize)}); ${count(d.trials.length)} of ${count(d.of)} others`};
  if (d.objectives.length === 2) {
    const front = d.front.slice().sort((p, q) => p.values[0] - q.values[0]);
    return Plotly.react(el, [
      {x: d.trials.map((t) => t.values[0]), y: d.trials.map((t) => t.values[1]), text: d.trials.map((t) => t.trial),
        mode: "markers", name: "trials", marker: {color: "#bbb", size: 5}},
      {x: front.map((t) => t.values[0]), y: front.map((t) => t.values[1]), text: front.map((t) => t.trial),
        mode: "lines+markers", line: {shape: "hv"}, name: "Pareto front", marker: {color: "#d62728", size: 8}},
    ], {title, xaxis: {title: {text: names[0]}}, yaxis: {title: {text: names[1]}}, margin: {t: 40}}, chartConfig);
  }
  const all = d.trials.concat(d.front);
  return Plotly.react(el, [{type: "parcoords",
    dimensions: names.map((label, i) => ({label, values: all.map((t) => t.values[i])})),
    line: {color: all.map((_, i) => (i >= d.trials.length ? 1 : 0)), colorscale: [[0, "#ccc"], [1, "#d62728"]], cmin: 0, cmax: 1}}],
    {title, margin: {t: 80, l: 60, r: 60}}, chartConfig);
}

function fillContourChoices(data) {
  const names = data.parameters.map((p) => p.name);
  for (const [id, at] of [["contour-x", 0], ["contour-y", 1]]) {
    const select = $(id), chosen = select.value;
    if (select.options.length === names.length) continue;
    select.innerHTML = names.map((n) => `<option value="${esc(n)}">${esc(n)}</option>`).join("");
    select.value = names.includes(chosen) ? chosen : (names[at] ?? names[0] ?? "");
  }
}

async function drawContour() {
  const x = $("contour-x").value, y = $("contour-y").value;
  $("contour-error").textContent = "";
  if (!x || !y || x === y) {
    $("contour-error").textContent = x && x === y ? "choose two different parameters" : "the contour needs two parameters";
    return Plotly.purge("contour-chart");
  }
  let d;
  try {
    d = await getJSON(`${experimentUrl()}/contour?x=${encodeURIComponent(x)}&y=${encodeURIComponent(y)}`);
  } catch (e) { $("contour-error").textContent = e.message; return; }
  // Categories are drawn at their index, labelled with their name.
  const place = (axis, values) => (axis.type === "categorical" ? values.map((v) => d.grid[axis === d.x ? "x" : "y"].indexOf(v)) : values);
  const layoutOf = (axis, values) => (axis.type === "categorical"
    ? {tickvals: values.map((_, i) => i), ticktext: values.map(plain)} : axisOf(axis, values));
  return Plotly.react("contour-chart", [
    {type: "contour", x: place(d.x, d.grid.x), y: place(d.y, d.grid.y), z: d.grid.z, connectgaps: true,
      colorscale: "Viridis", reversescale: !study.objective.maximize, colorbar: {title: {text: plain(study.objective.metric)}}},
    {x: place(d.x, d.points.x), y: place(d.y, d.points.y), text: d.points.trials, mode: "markers",
      marker: {size: 4, color: "#222"}, name: "trials", showlegend: false},
  ], {title: {text: `best ${plain(study.objective.metric)} by ${plain(d.x.name)} and ${plain(d.y.name)} (${count(d.of)} trials)`},
    xaxis: {title: {text: plain(d.x.name)}, ...layoutOf(d.x, d.grid.x)}, yaxis: {title: {text: plain(d.y.name)}, ...layoutOf(d.y, d.grid.y)}, margin: {t: 40}}, chartConfig);
}

// The study charts cost more than the table (a model for the importance, WebGL for 3+
// objectives): redrawn at most once per 5 s while the experiment runs.
const scheduleStudy = throttled(5000, async () => {
  await timed("study", async () => { study = await getJSON(experimentUrl() + "/study"); });
  const s = study.sample;
  $("study-note").textContent = `Charts drawn from ${count(s.trials.length)} of ${count(s.of)} succeeded trials ` +
    `(at most ${count(study.limits.points)}, evenly spaced over the run); contour cells hold the best value of every trial in them.`;
  fillContourChoices(study);
  await timed("slices", () => drawSlices(study));
  await timed("edf", () => drawEdf(study));
  await timed("intermediate", () => drawIntermediate(study));
  await timed("pareto", () => drawPareto(study));
  await timed("contour", drawContour);
  try { await timed("importance", drawImportance); } catch (e) { $("importance-note").textContent = e.message; }
});

function experimentPage() {
  const [ns, name] = [parts[1], parts[2]];
  let last = null;
  $("title").textContent = `${ns} / ${name}`;
  live([`experiment/${ns}/${name}`], async () => {
    const data = await getJSON(`/api/experiments/${encodeURIComponent(ns)}/${encodeURIComponent(name)}`);
    last = data;
    const e = data.experiment, c = e.counts;
    $("summary").innerHTML = `<span class="state-${esc(e.state)}" id="state">${esc(e.state)}</span> · ${esc(e.algorithm)} ·
      ${c.trials} trials (${c.succeeded} succeeded, ${c.running} running, ${c.failed} failed) of max ${esc(e.maxTrialCount)} ·
      ${esc(e.objectiveType)} ${esc(e.objectiveMetric)}`;
    $("warm-start").innerHTML = e.warmStart ? warmStartLine(e.warmStart, warmSourceHtml) : "";
    $("warm-start").hidden = !e.warmStart;
    $("best-name").textContent = data.best.trial ? `${data.best.trial}: ${e.objectiveMetric} = ${readable(data.best.objective)}` : "no trial has an objective value yet";
    $("best").textContent = data.best.trial ? JSON.stringify(data.best.parameters, null, 2) : "";
    drawTrials(data);
    $("page-error").textContent = "";
    if (!document.body.dataset.drawnMs) document.body.dataset.drawnMs = String(Math.round(performance.now()));
    await plotlyReady;
    drawObjective(data);
    scheduleParcoords(data);
    scheduleStudy(data);
  });
  for (const id of ["contour-x", "contour-y"]) $(id).addEventListener("change", () => timed("contour", drawContour));
  $("trials").tHead.addEventListener("click", (ev) => {
    const th = ev.target.closest("th");
    if (!th || !last) return;
    sortState.desc = sortState.key === th.dataset.key ? !sortState.desc : false;
    sortState.key = th.dataset.key;
    drawTrials(last);
  });
  $("copy-best").addEventListener("click", () => navigator.clipboard && navigator.clipboard.writeText($("best").textContent));
}

// ---- one trial ----
function trialPage() {
  const [ns, name] = [parts[1], parts[2]];
  $("title").textContent = `${ns} / ${name}`;
  const logs = async () => {
    const r = await fetch(`/api/trials/${encodeURIComponent(ns)}/${encodeURIComponent(name)}/logs`, {cache: "no-store"});
    $("logs").textContent = await r.text();
  };
  live([`trial/${ns}/${name}`], async () => {
    const data = await getJSON(`/api/trials/${encodeURIComponent(ns)}/${encodeURIComponent(name)}`);
    const t = data.trial;
    if (data.experiment) {
      $("experiment-link").href = `/experiments/${encodeURIComponent(ns)}/${encodeURIComponent(data.experiment)}`;
      $("experiment-link").textContent = `Experiment ${data.experiment}`;
    }
    $("summary").innerHTML = `<span class="state-${esc(t.state)}" id="state">${esc(t.state)}</span> · objective ${readable(t.objective)} · ran ${duration(t.start, t.end)}`;
    $("parameters").textContent = JSON.stringify(t.parameters, null, 2);
    $("conditions").tBodies[0].innerHTML = data.conditions.map((c) =>
      `<tr><td>${esc(c.type)}</td><td>${esc(c.status)}</td><td>${esc(c.reason)}</td><td>${esc(c.message)}</td><td>${esc(c.lastTransitionTime)}</td></tr>`).join("");
    const h = data.history;
    $("metric-summary").tBodies[0].innerHTML = Object.entries(h.summary).map(([m, s]) =>
      `<tr><td>${esc(m)}</td>${numCell(s.min)}${numCell(s.max)}${numCell(s.latest)}</tr>`).join("");
    const curves = Object.entries(h.curves);
    await plotlyReady;
    {
      const traces = curves.length
        ? curves.map(([m, c]) => ({x: c.steps, y: c.values, mode: "lines+markers", name: m}))
        : Object.entries(h.summary).map(([m, s]) => ({x: ["min", "max", "latest"], y: [s.min, s.max, s.latest].map(Number), type: "bar", name: m}));
      Plotly.react("metric-chart", traces, {title: {text: curves.length ? "metric history" : "no history recorded: min / max / latest"},
        xaxis: curves.length ? {title: {text: "report"}, ...integerAxis(curves.flatMap(([, c]) => c.steps))} : {}, margin: {t: 40}}, {displaylogo: false});
      if (curves.length) keepIntegerTicks("metric-chart", ["xaxis"]);
    }
    await logs();
  });
  $("refresh-logs").addEventListener("click", logs);
}

({experiments: experimentsPage, experiment: experimentPage, trial: trialPage})[document.body.dataset.page]();
