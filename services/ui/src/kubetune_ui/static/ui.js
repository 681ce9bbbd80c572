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
const numCell = (v) => `<td class="num" title="${esc(v)}">${esc(readable(v))}</td>`;
// plotly.js loads async (4.8 MB to parse): tables are drawn first, charts once it is there.
const plotlyReady = new Promise((resolve) => {
  if (window.Plotly) { resolve(); return; }
  const tag = document.getElementById("plotly");
  if (tag) tag.addEventListener("load", () => resolve());
});
const parts = location.pathname.split("/").filter(Boolean).map(decodeURIComponent);

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

function drawObjective(data) {
  const e = data.experiment;
  const xs = data.trials.map((_, i) => i + 1);
  Plotly.react("objective-chart", [
    {x: xs, y: data.trials.map((r) => r.objective), text: data.trials.map((r) => r.name), mode: "markers", name: e.objectiveMetric || "objective"},
    {x: xs, y: data.bestSoFar, mode: "lines", line: {shape: "hv"}, name: "best so far"},
  ], {title: {text: `${e.objectiveMetric} per trial (${e.objectiveType})`}, xaxis: {title: {text: "trial"}}, margin: {t: 40}}, {responsive: true, displaylogo: false});
}

// Parallel coordinates are WebGL: cheap on a GPU, seconds for 1,000 lines in software GL (a
// headless or GPU-less browser). So they are drawn after the rest, at most once per 5 s.
let parcoordsData = null, parcoordsTimer = null, parcoordsAt = 0;
function scheduleParcoords(data) {
  parcoordsData = data;
  if (parcoordsTimer) return;
  const wait = Math.max(0, parcoordsAt + 5000 - Date.now());
  parcoordsTimer = setTimeout(() => {
    parcoordsTimer = null;
    parcoordsAt = Date.now();
    drawParcoords(parcoordsData);
    if (!document.body.dataset.parcoordsMs) document.body.dataset.parcoordsMs = String(Math.round(performance.now()));
  }, wait);
}

function drawParcoords(data) {
  const e = data.experiment;
  const done = data.trials.filter((r) => r.objective !== null);
  const dims = data.parameters.map((p) => {
    const raw = done.map((r) => r.parameters[p]);
    if (raw.every((v) => v !== undefined && v !== "" && !isNaN(Number(v)))) return {label: p, values: raw.map(Number)};
    const cats = [...new Set(raw)].sort();
    return {label: p, values: raw.map((v) => cats.indexOf(v)), tickvals: cats.map((_, i) => i), ticktext: cats};
  });
  dims.push({label: e.objectiveMetric || "objective", values: done.map((r) => r.objective)});
  Plotly.react("parcoords", [{type: "parcoords", dimensions: dims,
    line: {color: done.map((r) => r.objective), colorscale: "Viridis", showscale: true, reversescale: e.objectiveType === "minimize"}}],
    {title: {text: "parameters against the objective"}, margin: {t: 60, l: 60, r: 60}}, {displaylogo: false});
}

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
    $("best-name").textContent = data.best.trial ? `${data.best.trial}: ${e.objectiveMetric} = ${readable(data.best.objective)}` : "no trial has an objective value yet";
    $("best").textContent = data.best.trial ? JSON.stringify(data.best.parameters, null, 2) : "";
    drawTrials(data);
    $("page-error").textContent = "";
    if (!document.body.dataset.drawnMs) document.body.dataset.drawnMs = String(Math.round(performance.now()));
    await plotlyReady;
    drawObjective(data);
    scheduleParcoords(data);
  });
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
        xaxis: {title: {text: curves.length ? "report" : ""}}, margin: {t: 40}}, {displaylogo: false});
    }
    await logs();
  });
  $("refresh-logs").addEventListener("click", logs);
}

({experiments: experimentsPage, experiment: experimentPage, trial: trialPage})[document.body.dataset.page]();
