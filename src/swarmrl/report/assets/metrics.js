// swarmrl report: the metric plots (Plotly, inlined in the page) and the alert table.
// Reads the JSON in <script id="report-data">; written by report/html.py.
"use strict";

const REPORT = JSON.parse(document.getElementById("report-data").textContent);
const ROLLING = 5;

function column(rows, key) {
  return rows.map(r => (typeof r[key] === "number" ? r[key] : null));
}

function stepsOf(rows) {
  return rows.map((r, i) => (typeof r.step === "number" ? r.step : i));
}

function rolling(y) {
  // Trailing mean over ROLLING rows, ignoring gaps (report/plots.py rolling_mean).
  return y.map((_, i) => {
    const w = y.slice(Math.max(0, i - ROLLING + 1), i + 1).filter(v => v !== null);
    return w.length ? w.reduce((a, b) => a + b, 0) / w.length : null;
  });
}

function hasData(rows, key) {
  return rows.some(r => typeof r[key] === "number");
}

function alertShapes() {
  // One dotted red line per step with alerts, on every plot.
  return REPORT.alerts.map(a => ({
    type: "line", xref: "x", yref: "paper", x0: a.step, x1: a.step, y0: 0, y1: 1,
    line: { color: "#dc2626", width: 1, dash: "dot" },
  }));
}

function alertMarkers(rows, key) {
  // Markers on the curve at alert steps, the alert text as hover.
  const x = [], y = [], text = [];
  const byStep = new Map(stepsOf(rows).map((s, i) => [s, rows[i]]));
  for (const a of REPORT.alerts) {
    const row = byStep.get(a.step);
    x.push(a.step);
    y.push(row && typeof row[key] === "number" ? row[key] : 0);
    text.push(a.text.join("<br>"));
  }
  return { x, y, text, name: "alert", mode: "markers", hoverinfo: "text+x",
           marker: { color: "#dc2626", size: 11, symbol: "x" } };
}

function newPlot(title, traces, layoutExtra) {
  const div = document.createElement("div");
  div.className = "plot";
  div.dataset.title = title;
  document.getElementById("plots").appendChild(div);
  const layout = Object.assign({
    title: { text: title, font: { size: 14 } }, margin: { l: 50, r: 50, t: 36, b: 36 },
    xaxis: { title: { text: "step" } }, shapes: alertShapes(), legend: { font: { size: 10 } },
    hovermode: "x unified",
  }, layoutExtra || {});
  Plotly.newPlot(div, traces, layout, { displaylogo: false, responsive: true });
}

function linePlot(rows, title, keys) {
  const present = keys.filter(k => hasData(rows, k));
  if (!present.length) return;
  const x = stepsOf(rows);
  const traces = present.map(k => ({ x, y: column(rows, k), name: k, mode: "lines+markers",
                                     marker: { size: 3 }, connectgaps: false }));
  if (REPORT.alerts.length) traces.push(alertMarkers(rows, present[0]));
  newPlot(title, traces);
}

function scorePlot(rows) {
  // score_mean and reward_mean coincide unless latency shaping is on: the reward is drawn
  // dashed and on top so both stay visible (and both are in the legend).
  const x = stepsOf(rows), traces = [];
  const styles = { score_mean: { dash: "solid", width: 1 }, reward_mean: { dash: "dash", width: 2 } };
  for (const k of ["score_mean", "reward_mean"]) {
    if (!hasData(rows, k)) continue;
    const y = column(rows, k);
    traces.push({ x, y, name: k, mode: "lines", opacity: 0.45, line: styles[k] });
    traces.push({ x, y: rolling(y), name: `${k} (rolling ${ROLLING})`, mode: "lines", line: styles[k] });
  }
  if (!traces.length) return;
  if (hasData(rows, "time_limit")) {
    traces.push({ x, y: column(rows, "time_limit"), name: "time_limit", yaxis: "y2", mode: "lines",
                  line: { color: "gray", dash: "dot" } });
  }
  if (REPORT.alerts.length) traces.push(alertMarkers(rows, "score_mean"));
  newPlot("score", traces, { yaxis2: { overlaying: "y", side: "right", title: { text: "time_limit (s)" } } });
}

function rolePlots(rows) {
  // role/<role>/<metric>: one plot per metric, one line per role.
  const byMetric = new Map();
  for (const k of new Set(rows.flatMap(r => Object.keys(r)))) {
    if (!k.startsWith("role/") || !hasData(rows, k)) continue;
    const rest = k.slice(5), cut = rest.lastIndexOf("/");
    if (cut < 0) continue;
    const metric = rest.slice(cut + 1);
    if (!byMetric.has(metric)) byMetric.set(metric, []);
    byMetric.get(metric).push([rest.slice(0, cut), k]);
  }
  const x = stepsOf(rows);
  for (const metric of [...byMetric.keys()].sort()) {
    const traces = byMetric.get(metric).sort().map(([role, k]) => (
      { x, y: column(rows, k), name: role, mode: "lines+markers", marker: { size: 3 } }));
    newPlot(`per role: ${metric}`, traces);
  }
}

function alertTable() {
  const box = document.getElementById("alert-list");
  if (!REPORT.alerts.length) { box.textContent = "No alerts."; return; }
  const rows = REPORT.alerts.map(a => `<tr><td>${a.step}</td><td>${a.text.map(escapeHtml).join("<br>")}</td></tr>`);
  box.innerHTML = `<table><tr><th>step</th><th>alerts</th></tr>${rows.join("")}</table>`;
}

function escapeHtml(s) {
  return String(s).replace(/[&<>"']/g, c => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}

function summary() {
  const s = REPORT.summary;
  document.getElementById("run-summary").textContent = Object.entries(s).map(([k, v]) => `${k}: ${v}`).join(" · ");
  const w = document.getElementById("warnings");
  for (const text of REPORT.warnings) {
    const li = document.createElement("li");
    li.textContent = text;
    w.appendChild(li);
  }
}

function drawMetrics() {
  const rows = REPORT.metrics;
  summary();
  alertTable();
  if (!rows.length) { document.getElementById("plots").textContent = "No metrics."; return; }
  scorePlot(rows);
  linePlot(rows, "team and communication", ["team_size_mean", "messages_per_rollout", "direct_messages_per_rollout",
                                            "channel_posts_per_rollout", "archive_reads_per_rollout",
                                            "hires_per_rollout", "fires_per_rollout"]);
  linePlot(rows, "message tokens", ["message_tokens_per_rollout"]);
  linePlot(rows, "useful work", ["useful_work", "useful_work_per_agent", "expert_work_share", "accuracy"]);
  linePlot(rows, "latency", ["latency_mean", "critical_path_s"]);
  linePlot(rows, "optimisation", ["loss", "grad_norm", "entropy", "approx_kl", "clip_frac"]);
  linePlot(rows, "errors", ["invalid_actions", "hit_token_cap", "wrong_submits"]);
  linePlot(rows, "speed: seconds per step", ["step_s", "rollout_s", "perf/update_s"]);
  linePlot(rows, "speed: MFU and the ranks' idle share", ["perf/mfu_update", "perf/mfu_generation",
                                                          "perf/rollout_rank_idle", "perf/update_rank_idle"]);
  rolePlots(rows);
}
