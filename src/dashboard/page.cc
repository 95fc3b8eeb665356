// The dashboard's one page: plain HTML, CSS and JS, no library and no CDN (cluster nodes
// have no internet). Live, it polls the JSON views every 2 s with fetch() (carrying the
// page's ?token= along); in a report, `window.PRISM_REPORT` holds the same views inlined
// and nothing is fetched. Every value reaches the DOM through textContent, never as HTML.
// Plots (tasks/s, memory per rank, the libraries' curves) are inline SVG drawn by lineChart
// below: a few dozen lines that earn no chart library.
#include <string>

#include "dashboard/dashboard.h"

namespace prism::dashboard {

namespace {

const char* const kPage = R"PRISM_PAGE(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Prism dashboard</title>
<link rel="icon" href="data:,">
<style>
body { font-family: system-ui, sans-serif; margin: 0; color: #222; background: #fafafa; }
header { background: #283b5a; color: #fff; padding: 8px 16px; }
header h1 { font-size: 18px; margin: 0 12px 0 0; display: inline; }
header span { font-size: 13px; margin-right: 14px; opacity: 0.9; }
nav { background: #e8ecf3; padding: 0 12px; }
nav button { border: 0; background: none; padding: 8px 12px; cursor: pointer; font-size: 14px; }
nav button.on { border-bottom: 3px solid #283b5a; font-weight: 600; }
main { padding: 12px 16px; }
section { display: none; }
section.on { display: block; }
table { border-collapse: collapse; margin: 6px 0 16px; font-size: 13px; background: #fff; }
th, td { border: 1px solid #d5d9e0; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #eef1f6; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.dead, .FAILED, .DEAD { color: #b00020; font-weight: 600; }
.ALIVE, .FINISHED, .alive { color: #1b7a2b; }
.bar { display: inline-block; height: 8px; background: #5b8bd6; vertical-align: middle; margin-right: 4px; }
pre { background: #fff; border: 1px solid #d5d9e0; padding: 8px; max-height: 60vh; overflow: auto; font-size: 12px; }
#status.bad { color: #ffb4b4; }
h2 { font-size: 15px; margin: 10px 0 2px; }
.plot { display: inline-block; margin: 0 18px 12px 0; vertical-align: top; }
.plot svg { background: #fff; border: 1px solid #d5d9e0; }
#ended-by { color: #ffd27f; }
</style>
</head>
<body>
<header><h1>Prism</h1><span id="job"></span><span id="uptime"></span><span id="status"></span><span id="ended-by"></span></header>
<nav id="tabs"></nav>
<main>
<section id="ranks"><h2>Ranks</h2><table id="ranks-table"></table></section>
<section id="tasks"><h2>Tasks by state</h2><table id="tasks-state-table"></table>
  <h2>Tasks by function</h2><table id="tasks-function-table"></table>
  <h2>Latest failures</h2><table id="failures-table"></table></section>
<section id="actors"><h2>Actors</h2><table id="actors-table"></table></section>
<section id="placement_groups"><h2>Placement groups</h2><table id="pg-table"></table></section>
<section id="kv"><h2>KV keys</h2><table id="kv-table"></table></section>
<section id="libraries"><div id="panels-list"></div></section>
<section id="plots"><h2>Tasks and memory over time</h2><div id="plots-job"></div>
  <div id="plots-libraries"></div></section>
<section id="timeline"><h2 id="timeline-title">Timeline</h2><div id="timeline-chart"></div>
  <div id="timeline-legend"></div></section>
<section id="logs"><h2>Logs</h2>
  <form id="log-search-form"><label>Search every rank's log <input id="log-search" size="40" maxlength="256"
    placeholder="text (case-insensitive)"></label> <button id="log-search-go" type="submit">Search</button>
    <span id="log-search-note"></span></form>
  <table id="log-search-table"></table>
  <label>Rank <select id="log-rank"></select></label>
  <pre id="log-text"></pre></section>
</main>
<script>
"use strict";
const REPORT = window.PRISM_REPORT || null;
const TABS = [["ranks", "Ranks"], ["tasks", "Tasks"], ["actors", "Actors"],
              ["placement_groups", "Placement groups"], ["kv", "KV"], ["libraries", "Libraries"], ["plots", "Plots"], ["timeline", "Timeline"], ["logs", "Logs"]];
const TIMELINE_WINDOW_MS = 5 * 60 * 1000;  // live: the last 5 minutes
const token = new URLSearchParams(location.search).get("token");
let current = "ranks";
let ranks = [];

function q(extra) {
  const p = new URLSearchParams(extra || {});
  if (token) p.set("token", token);
  const s = p.toString();
  return s ? "?" + s : "";
}
function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}
function bytes(n) {
  if (n === null || n === undefined) return "";
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; ++i; }
  return (i ? n.toFixed(1) : n) + " " + u[i];
}
function pct(x) { return x === null || x === undefined ? "" : x.toFixed(1) + " %"; }
// rows: [[cell, ...], ...]; a cell is a value or {v, cls, num, bar}.
function fill(id, head, rows) {
  const t = typeof id === "string" ? document.getElementById(id) : id;
  t.replaceChildren();
  const thead = el("thead"), tr = el("tr");
  for (const h of head) tr.appendChild(el("th", h));
  thead.appendChild(tr);
  const tbody = el("tbody");
  for (const row of rows) {
    const r = el("tr");
    if (row.key !== undefined) r.dataset.key = row.key;
    for (const c of row.cells || row) {
      const cell = (c !== null && typeof c === "object") ? c : {v: c};
      const td = el("td", undefined, (cell.cls || "") + (cell.num ? " num" : ""));
      if (cell.bar !== undefined) {
        const b = el("span", undefined, "bar");
        b.style.width = Math.max(0, Math.min(100, cell.bar)) + "px";
        td.appendChild(b);
      }
      td.appendChild(document.createTextNode(cell.v === undefined || cell.v === null ? "" : String(cell.v)));
      r.appendChild(td);
    }
    tbody.appendChild(r);
  }
  if (!rows.length) {
    const r = el("tr"), td = el("td", "(none)");
    td.colSpan = head.length;
    r.appendChild(td);
    tbody.appendChild(r);
  }
  t.append(thead, tbody);
}

function showJob(j) {
  document.getElementById("job").textContent =
      "job " + j.job_id + " \u00b7 " + j.num_ranks + " ranks \u00b7 " + j.launcher + " \u00b7 " + j.entrypoint;
  const secs = Math.max(0, (j.time_ns - j.start_time_ns) / 1e9);
  document.getElementById("uptime").textContent =
      (REPORT ? "ran " : "up ") + Math.floor(secs / 60) + " min " + Math.floor(secs % 60) + " s";
  document.getElementById("ended-by").textContent = j.ended_by ? "stopped: " + j.ended_by : "";
}
function showRanks(rs) {
  ranks = rs;
  fill("ranks-table", ["rank", "host", "pid", "state", "CPU (process)", "host CPU", "RSS",
                       "host memory", "object store", "spilled", "running tasks", "actors",
                       "tasks done", "sample age"],
       rs.map(r => ({key: r.rank, cells: [
         r.rank + (r.is_head ? " (head)" : ""), r.host, r.pid,
         {v: r.alive ? "ALIVE" : "DEAD", cls: r.alive ? "alive" : "dead"},
         r.proc ? {v: pct(r.proc.process_cpu_percent), num: true, bar: r.proc.process_cpu_percent / Math.max(1, r.num_cpus)} : "",
         r.proc ? {v: pct(r.proc.host_cpu_percent), num: true} : "",
         r.proc ? {v: bytes(r.proc.process_rss_bytes), num: true} : "",
         r.proc ? {v: bytes(r.proc.host_mem_used_bytes) + " / " + bytes(r.proc.host_mem_total_bytes), num: true} : "",
         r.store ? {v: bytes(r.store.used_bytes) + " / " + bytes(r.store.capacity_bytes), num: true,
                    bar: r.store.capacity_bytes ? 100 * r.store.used_bytes / r.store.capacity_bytes : 0} : "",
         r.store ? {v: bytes(r.store.spilled_bytes), num: true} : "",
         {v: r.running_tasks, num: true}, {v: r.num_actors, num: true}, {v: r.tasks_finished, num: true},
         r.sample_age_ms < 0 ? "no sample yet" : (r.sample_age_ms / 1000).toFixed(1) + " s"]})));
  const sel = document.getElementById("log-rank");
  if (sel.options.length !== rs.length) {
    sel.replaceChildren(...rs.map(r => { const o = el("option", r.rank + " (" + r.host + ")"); o.value = r.rank; return o; }));
  }
}
function showTasks(t) {
  fill("tasks-state-table", ["state", "tasks"],
       Object.entries(t.by_state).map(([s, n]) => [{v: s, cls: s}, {v: n, num: true}]));
  const states = [...new Set(t.by_function.flatMap(f => Object.keys(f.state_counts)))].sort();
  const ms = x => x === undefined ? "" : (x < 1 ? x.toFixed(3) : x < 100 ? x.toFixed(1) : x.toFixed(0)) + " ms";
  fill("tasks-function-table", ["function or class", "type", ...states, "p50", "p99", "ended/s (1 min)"],
       t.by_function.map(f => {
         const d = t.times[f.func_or_class_name] || {};
         return [f.func_or_class_name, f.type, ...states.map(s => ({v: f.state_counts[s] || 0, num: true})),
                 {v: ms(d.p50_ms), num: true}, {v: ms(d.p99_ms), num: true},
                 {v: d.per_s_last_min === undefined ? "" : d.per_s_last_min.toFixed(2), num: true}];
       }));
  fill("failures-table", ["task", "function", "rank", "attempt", "error type", "error"],
       t.failures.slice().reverse().map(f => [f.task_id, f.func_name, f.rank, f.attempt, f.error_type,
                                               {v: f.error_message, cls: "FAILED"}]));
}
function showActors(a) {
  fill("actors-table", ["actor", "class", "name", "state", "rank", "pending calls", "restarts", "death cause"],
       a.map(x => ({key: x.actor_id, cells: [x.actor_id, x.class_name, x.name, {v: x.state, cls: x.state}, x.rank,
                    {v: x.pending_calls || 0, num: true}, x.num_restarts + " / " + x.max_restarts, x.death_cause]})));
}
function showGroups(g) {
  fill("pg-table", ["id", "name", "strategy", "state", "bundles", "bundle ranks"],
       g.map(x => [x.placement_group_id, x.name, x.strategy, x.state,
                   x.bundles.map(b => Object.entries(b).map(([k, v]) => k + ":" + v).join(",")).join(" | "),
                   x.bundle_ranks.join(", ")]));
}
function showKv(kv) {
  fill("kv-table", ["key"], kv.keys.map(k => [k]).concat(kv.truncated ? [["(only the first 1000)"]] : []));
}
// Libraries' panels (prism/platform/panel.h): a title, a few lines, a table each.
function showPanels(ps) {
  const box = document.getElementById("panels-list");
  box.replaceChildren();
  if (!ps.length) box.appendChild(el("p", "No library has published a panel yet (Tune shows its trials here)."));
  for (const p of ps) {
    box.appendChild(el("h2", p.title || p.name));
    for (const line of p.lines) box.appendChild(el("div", line));
    const t = el("table");
    t.dataset.panel = p.name;
    box.appendChild(t);
    fill(t, p.columns, p.rows);
  }
}
const SVG_NS = "http://www.w3.org/2000/svg";
function svgEl(tag, attrs) {
  const e = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  return e;
}
function num(x) {
  const a = Math.abs(x);
  return a >= 1e9 ? (x / 1e9).toFixed(1) + "G" : a >= 1e6 ? (x / 1e6).toFixed(1) + "M" : a >= 1e4 ? (x / 1e3).toFixed(0) + "k"
       : a >= 100 ? x.toFixed(0) : a >= 1 ? x.toFixed(2).replace(/\.?0+$/, "") : x.toPrecision(2);
}
const PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                 "#bcbd22", "#17becf"];
// One plot: series [{name, points: [[x, y], ...]}] as lines on shared axes, in an inline SVG.
function lineChart(title, series, xLabel, yFmt) {
  const box = el("div", undefined, "plot");
  box.dataset.plot = title;
  box.appendChild(el("h2", title));
  const W = 480, H = 200, L = 60, R = 10, T = 8, B = 30;
  const pts = series.flatMap(s => s.points).filter(p => p[1] !== null && isFinite(p[1]));
  const svg = svgEl("svg", {width: W, height: H + 16 * Math.ceil(series.length / 3)});
  if (!pts.length) {
    const t = svgEl("text", {x: L, y: H / 2, "font-size": 12});
    t.textContent = "no data yet";
    svg.appendChild(t);
    box.appendChild(svg);
    return box;
  }
  let x0 = Math.min(...pts.map(p => p[0])), x1 = Math.max(...pts.map(p => p[0]));
  let y0 = Math.min(0, ...pts.map(p => p[1])), y1 = Math.max(...pts.map(p => p[1]));
  if (x1 <= x0) x1 = x0 + 1;
  if (y1 <= y0) y1 = y0 + 1;
  const X = x => L + (x - x0) / (x1 - x0) * (W - L - R), Y = y => T + (1 - (y - y0) / (y1 - y0)) * (H - T - B);
  svg.appendChild(svgEl("line", {x1: L, y1: H - B, x2: W - R, y2: H - B, stroke: "#888"}));
  svg.appendChild(svgEl("line", {x1: L, y1: T, x2: L, y2: H - B, stroke: "#888"}));
  for (let i = 0; i <= 4; ++i) {
    const yv = y0 + (y1 - y0) * i / 4, xv = x0 + (x1 - x0) * i / 4;
    const yt = svgEl("text", {x: L - 4, y: Y(yv) + 4, "font-size": 10, "text-anchor": "end"});
    yt.textContent = (yFmt || num)(yv);
    svg.appendChild(yt);
    const xt = svgEl("text", {x: X(xv), y: H - B + 14, "font-size": 10, "text-anchor": i ? (i === 4 ? "end" : "middle") : "start"});
    xt.textContent = num(xv);
    svg.appendChild(xt);
  }
  const xl = svgEl("text", {x: (L + W - R) / 2, y: H - 4, "font-size": 10, "text-anchor": "middle"});
  xl.textContent = xLabel;
  svg.appendChild(xl);
  series.forEach((s, i) => {
    const ok = s.points.filter(p => p[1] !== null && isFinite(p[1]));
    if (!ok.length) return;
    const color = PALETTE[i % PALETTE.length];
    const line = svgEl("polyline", {fill: "none", stroke: color, "stroke-width": 1.5,
                                    points: ok.map(p => X(p[0]).toFixed(1) + "," + Y(p[1]).toFixed(1)).join(" ")});
    const tip = svgEl("title", {});
    tip.textContent = s.name;
    line.appendChild(tip);
    svg.appendChild(line);
    const lg = svgEl("text", {x: L + (i % 3) * 140, y: H + 12 + 16 * Math.floor(i / 3), "font-size": 11, fill: color});
    lg.textContent = "\u2014 " + s.name;
    svg.appendChild(lg);
  });
  box.appendChild(svg);
  return box;
}
// The job's history (GET /api/history) and the libraries' curves (their panels' series).
function showPlots(h, ps) {
  const t = h.t_ms.map(x => x / 1000);
  const rankIds = Object.keys(h.ranks).sort((a, b) => a - b);
  const mem = key => rankIds.map(r => ({name: "rank " + r, points: t.map((x, i) => [x, h.ranks[r][key][i]])}));
  document.getElementById("plots-job").replaceChildren(
      lineChart("Tasks ended per second", [{name: "tasks/s", points: t.map((x, i) => [x, h.tasks_per_s[i]])}],
                "seconds since the job started"),
      lineChart("Memory per rank (RSS)", mem("rss"), "seconds since the job started", bytes),
      lineChart("Object store per rank (in memory)", mem("store"), "seconds since the job started", bytes));
  const box = document.getElementById("plots-libraries");
  box.replaceChildren();
  for (const p of ps) {
    const plots = new Map();
    for (const s of p.series || []) {
      if (!plots.has(s.plot)) plots.set(s.plot, []);
      plots.get(s.plot).push(s);
    }
    for (const [plot, series] of plots) box.appendChild(lineChart((p.title || p.name) + ": " + plot, series, plot.split(" by ").pop() || "x"));
  }
}
function hue(name) {
  let h = 0;
  for (const c of name) h = (h * 31 + c.charCodeAt(0)) % 360;
  return "hsl(" + h + ",60%,55%)";
}
// Tasks per rank as bars over time; a rank's overlapping tasks on lanes of their own.
function showTimeline(tl) {
  const now = (tl.now_ns - tl.origin_ns) / 1e6;
  let t0 = REPORT ? now : Math.max(0, now - TIMELINE_WINDOW_MS);
  if (REPORT) for (const s of tl.spans) t0 = Math.min(t0, s[2]);
  const t1 = Math.max(now, t0 + 1);
  const byRank = new Map();
  for (const s of tl.spans) {
    if (s[3] < t0) continue;
    if (!byRank.has(s[0])) byRank.set(s[0], []);
    byRank.get(s[0]).push(s);
  }
  const left = 70, width = 1000, laneH = 9, gap = 6;
  const x = t => left + (Math.max(t, t0) - t0) / (t1 - t0) * width;
  const rows = [];
  let y = 4, shown = 0;
  for (const rank of [...byRank.keys()].sort((a, b) => a - b)) {
    const lanes = [];
    const placed = byRank.get(rank).map(s => {
      let lane = lanes.findIndex(end => end <= s[2]);
      if (lane < 0) { lane = lanes.length; lanes.push(0); }
      lanes[lane] = s[3];
      return [s, lane];
    });
    rows.push({rank, y, placed});
    y += Math.max(1, lanes.length) * laneH + gap;
    shown += placed.length;
  }
  const svg = svgEl("svg", {width: left + width + 10, height: y + 24});
  for (const row of rows) {
    const label = svgEl("text", {x: 4, y: row.y + 9, "font-size": 11});
    label.textContent = "rank " + row.rank;
    svg.appendChild(label);
    for (const [s, lane] of row.placed) {
      const name = tl.names[s[1]];
      const r = svgEl("rect", {x: x(s[2]), y: row.y + lane * laneH, width: Math.max(1, x(s[3]) - x(s[2])),
                               height: laneH - 1, fill: s[4] ? "#b00020" : hue(name)});
      const title = svgEl("title", {});
      title.textContent = name + " on rank " + row.rank + ": " + (s[3] - s[2]).toFixed(1) + " ms" + (s[4] ? " (FAILED)" : "");
      r.appendChild(title);
      svg.appendChild(r);
    }
  }
  for (let i = 0; i <= 5; ++i) {
    const t = t0 + (t1 - t0) * i / 5;
    const tick = svgEl("text", {x: x(t), y: y + 16, "font-size": 11, "text-anchor": i ? (i === 5 ? "end" : "middle") : "start"});
    tick.textContent = (t / 1000).toFixed(1) + " s";
    svg.appendChild(tick);
  }
  document.getElementById("timeline-chart").replaceChildren(svg);
  document.getElementById("timeline-title").textContent =
      "Timeline: " + shown + " ended tasks " + (REPORT ? "(every one rank 0 kept)" : "of the last 5 minutes") +
      ", seconds since the job started";
  const legend = document.getElementById("timeline-legend");
  legend.replaceChildren(...tl.names.map(n => {
    const item = el("span", " " + n + "  ");
    const dot = el("span", undefined, "bar");
    dot.style.width = "10px";
    dot.style.background = hue(n);
    item.prepend(dot);
    return item;
  }));
}
function showLog(l) {
  document.getElementById("log-text").textContent =
      l.reachable ? l.text : "no log of rank " + l.rank + " that rank 0 can read (on another host's local disk, or none written)";
}

function showSearch(r) {
  fill("log-search-table", ["rank", "file", "line", "text"],
       r.matches.map(m => [m.rank, m.file.split("/").pop(), {v: m.line, num: true}, m.text]));
  document.getElementById("log-search-note").textContent =
      r.matches.length + " lines" + (r.truncated ? " (the first " + r.limit + ")" : "") +
      (r.partial_scan ? "; long logs: only their ends were searched (16 MiB each, 256 MiB in all)" : "") +
      (r.unreadable_ranks && r.unreadable_ranks.length ? "; not readable from rank 0: ranks " + r.unreadable_ranks.join(", ") : "");
}
// The report searches the log tails it holds; the live page asks rank 0 (every rank's log).
function searchReport(text) {
  const needle = text.toLowerCase(), matches = [];
  let truncated = false;
  for (const [rank, log] of Object.entries(REPORT.logs)) {
    log.split("\n").forEach((line, i) => {
      if (!line.toLowerCase().includes(needle)) return;
      if (matches.length === 200) { truncated = true; return; }
      matches.push({rank: Number(rank), file: "rank-" + rank + " (the report's tail)", line: i + 1, text: line.slice(0, 512)});
    });
  }
  return {matches, truncated, limit: 200};
}
async function search(event) {
  if (event) event.preventDefault();
  const text = document.getElementById("log-search").value;
  if (!text) return;
  const note = document.getElementById("log-search-note");
  try {
    showSearch(REPORT ? searchReport(text) : await get("api/logs/search", {q: text, rank: "all"}));
  } catch (e) {
    note.textContent = "search failed: " + e.message;
  }
}
async function get(path, extra) {
  const r = await fetch(path + q(extra), {cache: "no-store"});
  if (!r.ok) throw new Error(path + ": HTTP " + r.status);
  return r.json();
}
const VIEWS = {ranks: ["api/ranks", showRanks], tasks: ["api/tasks", showTasks], actors: ["api/actors", showActors],
               placement_groups: ["api/placement_groups", showGroups], kv: ["api/kv", showKv],
               timeline: ["api/timeline", showTimeline], libraries: ["api/panels", showPanels]};
async function refresh() {
  const status = document.getElementById("status");
  try {
    showJob(await get("api/job"));
    if (VIEWS[current]) { const [p, f] = VIEWS[current]; f(await get(p)); }
    if (current !== "ranks") showRanks(await get("api/ranks"));
    if (current === "logs") showLog(await get("api/logs", {rank: document.getElementById("log-rank").value || 0}));
    if (current === "plots") showPlots(await get("api/history"), await get("api/panels"));
    status.textContent = "updated " + new Date().toLocaleTimeString();
    status.className = "";
  } catch (e) {
    status.textContent = "cannot reach the job (" + e.message + "); it may have ended";
    status.className = "bad";
  }
}
function showReport() {
  const d = REPORT.snapshot;
  showJob(d.job); showRanks(d.ranks); showTasks(d.tasks); showActors(d.actors);
  showGroups(d.placement_groups); showKv(d.kv); showTimeline(d.timeline); showPanels(d.panels || []);
  showPlots(d.history, d.panels || []);
  const rank = document.getElementById("log-rank").value || 0;
  const text = REPORT.logs[String(rank)];
  showLog({rank: rank, reachable: text !== undefined, text: text || ""});
  document.getElementById("status").textContent = "report written " + new Date(d.job.time_ns / 1e6).toLocaleString();
}
function select(name) {
  current = name;
  for (const [id] of TABS) {
    document.getElementById(id).className = id === name ? "on" : "";
    document.getElementById("tab-" + id).className = id === name ? "on" : "";
  }
  if (REPORT) showReport(); else refresh();
}
for (const [id, label] of TABS) {
  const b = el("button", label);
  b.id = "tab-" + id;
  b.onclick = () => select(id);
  document.getElementById("tabs").appendChild(b);
}
document.getElementById("log-rank").onchange = () => select("logs");
document.getElementById("log-search-form").onsubmit = search;
select("ranks");
if (!REPORT) setInterval(refresh, 2000);
</script>
</body>
</html>
)PRISM_PAGE";

/// JSON inside <script>: "</script>" or "<!--" in a string would change how the browser
/// reads the element, so every '<' (only ever inside JSON strings) becomes \u003c.
std::string ScriptSafe(const std::string& json) {
  std::string out;
  out.reserve(json.size());
  for (char c : json) {
    if (c == '<') {
      out += "\\u003c";
    } else {
      out += c;
    }
  }
  return out;
}

std::string EscapeHtml(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace

const std::string& PageHtml() {
  static const std::string page(kPage);
  return page;
}

std::string ReportHtml(const Snapshot& snapshot, const std::map<int, std::string>& log_tails) {
  nlohmann::json logs = nlohmann::json::object();
  for (const auto& [rank, text] : log_tails) logs[std::to_string(rank)] = text;
  const nlohmann::json data = {{"snapshot", SnapshotJson(snapshot)}, {"logs", std::move(logs)}};
  const std::string script =
      "<script>window.PRISM_REPORT = " +
      ScriptSafe(data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)) + ";</script>\n";
  std::string page = PageHtml();
  const std::string title = "<title>Prism dashboard</title>";
  page.replace(page.find(title), title.size(),
               "<title>Prism report: job " + EscapeHtml(snapshot.job.job_id) + "</title>");
  // The data goes before the page's own script, which reads it.
  page.insert(page.find("<script>"), script);
  return page;
}

}  // namespace prism::dashboard
