// swarmrl report: the swarm timeline. One rollout of one step: agents are lanes on the
// simulated-time axis, each turn a bar, each message an arrow from the end of the sender's
// turn to its delivery on the recipient's lane; channel posts, archive reads, hires, fires
// and submissions are marked; the deadline is a line. A step's samples are parsed only when
// the step is picked (each step is its own <script type="application/json"> block), so a
// run with many rollouts of 64 agents stays responsive.
"use strict";

const SVGNS = "http://www.w3.org/2000/svg";
const LANE_H = 24, BAR_H = 14, LEFT = 120, RIGHT = 30, TOP = 28;
const ROLE_COLOURS = ["#60a5fa", "#fbbf24", "#34d399", "#f472b6", "#a78bfa", "#fb923c", "#94a3b8", "#2dd4bf"];
const stepCache = new Map();
const view = { rows: [], row: null, x: null };

function stepRows(step) {
  if (!stepCache.has(step)) {
    const el = document.getElementById(`samples-${step}`);
    stepCache.set(step, el ? JSON.parse(el.textContent) : []);
  }
  return stepCache.get(step);
}

function el(tag, attrs, parent, text) {
  const e = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  if (parent) parent.appendChild(e);
  return e;
}

function titled(e, text) {
  el("title", {}, e, text);
  return e;
}

function lanesOf(row) {
  // Agents in the order they joined; senders that are no agent (a workflow's router) get a lane on top.
  const agents = (row.agents || row.team || []).map(a => ({ name: a.name, role: a.role }));
  const known = new Set(agents.map(a => a.name));
  const extra = [...new Set((row.messages || []).map(m => m.sender).filter(s => !known.has(s)))];
  return extra.map(name => ({ name, role: "(router)" })).concat(agents);
}

function recipients(row, m, lanes) {
  if (row.deliveries && row.deliveries[String(m.id)]) return row.deliveries[String(m.id)];
  if (m.kind === "direct") return [m.to];
  return lanes.map(l => l.name).filter(n => n !== m.sender);  // schema 1: no membership record
}

function scale(row) {
  const ends = (row.turns || []).map(t => t.end).concat([row.time_limit || 0, row.finished_at || 0]);
  const tMax = Math.max(1e-6, ...ends) * 1.04;
  const width = Math.max(900, document.getElementById("timeline-box").clientWidth - 4);
  const pxPerS = (width - LEFT - RIGHT) / tMax;
  return { tMax, width, pxPerS, x: t => LEFT + t * pxPerS };
}

function drawAxis(svg, sc, height) {
  const g = el("g", { class: "axis" }, svg);
  const step = niceStep(sc.tMax / 10);
  for (let t = 0; t <= sc.tMax; t += step) {
    el("line", { x1: sc.x(t), x2: sc.x(t), y1: TOP - 4, y2: height }, g);
    el("text", { x: sc.x(t), y: TOP - 8, "text-anchor": "middle" }, g, `${+t.toFixed(3)} s`);
  }
}

function niceStep(raw) {
  const p = Math.pow(10, Math.floor(Math.log10(raw)));
  return [1, 2, 5, 10].map(m => m * p).find(s => s >= raw);
}

function drawLanes(svg, lanes, sc, colour) {
  lanes.forEach((lane, i) => {
    const y = TOP + i * LANE_H;
    const g = el("g", { class: "lane", "data-agent": lane.name }, svg);
    el("rect", { class: `lane-bg${i % 2 ? " odd" : ""}`, x: 0, y, width: sc.width, height: LANE_H }, g);
    el("rect", { x: 4, y: y + 7, width: 9, height: 9, fill: colour(lane.role) }, g);
    titled(el("text", { class: "lane-label", x: 18, y: y + 16 }, g, lane.name), `${lane.name} (${lane.role})`);
  });
}

function drawTurns(svg, row, laneY, sc, colour) {
  const g = el("g", { class: "turns" }, svg);
  (row.turns || []).forEach((t, i) => {
    const cls = ["turn", t.after_deadline ? "late" : "", (t.errors || []).length ? "has-errors" : ""].join(" ");
    const bar = el("rect", {
      class: cls, "data-index": i, "data-agent": t.agent, x: sc.x(t.start), y: laneY(t.agent) + (LANE_H - BAR_H) / 2,
      // 1 px shorter, so back-to-back turns of one agent stay two bars
      width: Math.max(2, (t.end - t.start) * sc.pxPerS - 1), height: BAR_H, fill: colour(t.role), rx: 2,
    }, g);
    titled(bar, `${t.agent} ${t.start.toFixed(3)}-${t.end.toFixed(3)} s: ${(t.actions || []).join(" ") || "(no actions)"}`);
    bar.addEventListener("click", () => showTurn(i));
  });
}

function drawMessages(svg, row, lanes, laneY, sc) {
  const g = el("g", { class: "messages" }, svg);
  const agents = new Set((row.agents || row.team || []).map(a => a.name));
  for (const m of row.messages || []) {
    const kind = agents.has(m.sender) ? m.kind : "workflow";
    const y0 = laneY(m.sender) + LANE_H / 2;
    if (m.kind === "channel") {  // the post itself: a diamond on the sender's lane
      titled(el("path", { class: "mark post", d: diamond(sc.x(m.sent_at), y0, 5), fill: "#7c3aed" }, g),
             `post #${m.channel} by ${m.sender} at ${m.sent_at.toFixed(3)} s: ${m.text}`);
    }
    for (const to of recipients(row, m, lanes)) {
      const y1 = laneY(to);
      if (y1 === undefined) continue;
      const a = el("line", { class: `msg ${kind}`, "data-id": m.id, x1: sc.x(m.sent_at), y1: y0, x2: sc.x(m.deliver_at),
                             y2: y1 + LANE_H / 2, "marker-end": `url(#arrow-${kind})` }, g);
      titled(a, `${m.sender} -> ${to}${m.channel ? " #" + m.channel : ""} sent ${m.sent_at.toFixed(3)} s, delivered ${m.deliver_at.toFixed(3)} s: ${m.text}`);
    }
  }
}

function diamond(x, y, r) {
  return `M${x},${y - r} L${x + r},${y} L${x},${y + r} L${x - r},${y} Z`;
}

function drawEvents(svg, row, laneY, sc) {
  const g = el("g", { class: "events" }, svg);
  for (const e of row.events || []) {
    const y = laneY(e.agent) + LANE_H / 2, x = sc.x(e.time);
    if (y === undefined || isNaN(y)) continue;
    if (e.kind === "hire") {
      titled(el("path", { class: "mark hire", d: `M${x},${y - 8} L${x + 7},${y + 6} L${x - 7},${y + 6} Z`, fill: "#16a34a" }, g),
             `${e.agent} hired at ${e.time.toFixed(3)} s`);
    } else if (e.kind === "fire") {
      titled(el("path", { class: "mark fire", d: `M${x - 6},${y - 6} L${x + 6},${y + 6} M${x + 6},${y - 6} L${x - 6},${y + 6}`,
                          stroke: "#dc2626", "stroke-width": 3 }, g), `${e.agent} fired at ${e.time.toFixed(3)} s`);
    } else if (e.kind === "read") {
      titled(el("rect", { class: "mark read", x: x - 4, y: y - 4, width: 8, height: 8, fill: "#0ea5e9" }, g),
             `${e.agent} read #${e.channel} (${e.returned} messages) at ${e.time.toFixed(3)} s`);
    }
  }
  for (const s of row.submissions || []) {
    const y = laneY(s.agent) + LANE_H / 2;
    if (isNaN(y)) continue;
    const fill = !s.final ? "#9ca3af" : s.correct ? "#16a34a" : "#dc2626";
    const label = s.label || s.item;
    titled(el("circle", { class: `mark submission ${s.correct ? "right" : "wrong"}`, cx: sc.x(s.t), cy: y, r: 5,
                          fill, stroke: "#fff" }, g),
           `${s.agent} submitted ${label}=${s.answer} at ${s.t.toFixed(3)} s: ${s.correct ? "right" : "wrong"}${s.final ? "" : " (not graded: item already decided)"}`);
  }
}

function drawDeadline(svg, row, sc, height) {
  const x = sc.x(row.time_limit);
  el("line", { id: "deadline", class: "deadline", "data-time": row.time_limit, x1: x, x2: x, y1: TOP - 4, y2: height }, svg);
  el("text", { x: x - 4, y: height + 12, fill: "#dc2626", "font-size": 11, "text-anchor": "end" }, svg,
     `deadline ${row.time_limit} s`);
}

function defs(svg) {
  const d = el("defs", {}, svg);
  for (const [kind, colour] of [["direct", "#2563eb"], ["channel", "#7c3aed"], ["workflow", "#0d9488"]]) {
    const m = el("marker", { id: `arrow-${kind}`, viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 6,
                             markerHeight: 6, orient: "auto-start-reverse" }, d);
    el("path", { d: "M0,0 L10,5 L0,10 Z", fill: colour }, m);
  }
}

function drawRollout(row) {
  const svg = document.getElementById("timeline-svg");
  svg.innerHTML = "";
  view.row = row;
  if (!row) return;
  const lanes = lanesOf(row);
  const roles = [...new Set(lanes.map(l => l.role))];
  const colour = role => ROLE_COLOURS[roles.indexOf(role) % ROLE_COLOURS.length];
  const index = new Map(lanes.map((l, i) => [l.name, TOP + i * LANE_H]));
  const laneY = name => index.get(name);
  const sc = scale(row);
  view.x = sc.x;
  const height = TOP + lanes.length * LANE_H + 6;
  svg.setAttribute("width", sc.width);
  svg.setAttribute("height", height + 16);  // room for the deadline's label below the lanes
  svg.dataset.pxPerS = sc.pxPerS;
  svg.dataset.left = LEFT;
  defs(svg);
  drawLanes(svg, lanes, sc, colour);
  drawAxis(svg, sc, height);
  drawTurns(svg, row, laneY, sc, colour);
  drawMessages(svg, row, lanes, laneY, sc);
  drawEvents(svg, row, laneY, sc);
  drawDeadline(svg, row, sc, height);
  rolloutSummary(row, lanes);
}

function rolloutSummary(row, lanes) {
  const labels = row.item_labels || {};
  const solved = Object.keys(row.solved || {}).map(i => labels[i] || i).join(", ") || "none";
  document.getElementById("rollout-summary").textContent =
    `${row.workflow} · score ${(+row.score).toFixed(3)} · ${row.end_reason} at ${(+row.finished_at).toFixed(3)} s · ` +
    `team ${lanes.length} · ${(row.turns || []).length} turns · ${(row.messages || []).length} messages · solved: ${solved}`;
  document.getElementById("detail").innerHTML =
    `<h3>problem ${escapeHtml(row.problem_id)}</h3><pre class="problem">${escapeHtml(row.problem)}</pre>` +
    `<p class="hint">Click a turn (a bar) to see its observation, reply, actions and errors.</p>`;
}

function showTurn(i) {
  const row = view.row, t = row.turns[i];
  document.querySelectorAll(".turn.selected").forEach(e => e.classList.remove("selected"));
  const bar = document.querySelector(`.turn[data-index="${i}"]`);
  if (bar) bar.classList.add("selected");
  const agent = (row.agents || []).find(a => a.name === t.agent);
  const first = row.turns.findIndex(u => u.agent === t.agent) === i;
  const context = first && agent && agent.first_context
    ? `<details><summary>full first context (${agent.first_context.length} chars)</summary><pre class="first-context">${escapeHtml(agent.first_context)}</pre></details>` : "";
  const list = xs => (xs && xs.length ? xs.map(x => `<li>${escapeHtml(x)}</li>`).join("") : "<li>(none)</li>");
  document.getElementById("detail").innerHTML =
    `<h3>${escapeHtml(t.agent)} (${escapeHtml(t.role)}) · ${t.start.toFixed(3)}-${t.end.toFixed(3)} s` +
    `${t.after_deadline ? " · after the deadline: no effect" : ""}</h3>` +
    `<p class="hint">context ${t.context_tokens} tokens (${t.new_prompt_tokens} new) · generated ${t.generated_tokens}</p>` +
    context + `<b>observation</b><pre class="observation">${escapeHtml(t.observation)}</pre>` +
    `<b>reply</b><pre class="reply">${escapeHtml(t.reply)}</pre>` +
    `<b>actions</b><ul class="actions">${list(t.actions)}</ul><b>errors</b><ul class="errors">${list(t.errors)}</ul>`;
}

function pickStep(step) {
  view.rows = stepRows(step);
  const sel = document.getElementById("rollout-select");
  sel.innerHTML = "";
  view.rows.forEach((r, i) => {
    const o = document.createElement("option");
    o.value = i;
    o.textContent = `#${r.index} (group ${r.group}, score ${(+r.score).toFixed(2)}, team ${(r.agents || r.team || []).length})`;
    sel.appendChild(o);
  });
  drawRollout(view.rows[0]);
}

function legend() {
  document.getElementById("legend").innerHTML = [
    "bar: a turn (faded: after the deadline; red edge: errors)", "<span style='color:#2563eb'>→ direct message</span>",
    "<span style='color:#7c3aed'>◆ ⇢ channel post</span>", "<span style='color:#0ea5e9'>■ archive read</span>",
    "<span style='color:#16a34a'>▲ hire</span>", "<span style='color:#dc2626'>✕ fire</span>",
    "<span style='color:#16a34a'>● right</span> / <span style='color:#dc2626'>● wrong</span> / <span style='color:#9ca3af'>● not graded</span> submission",
    "<span style='color:#dc2626'>┆ deadline</span>",
  ].map(s => `<span>${s}</span>`).join("");
}

function initTimeline() {
  legend();
  const steps = REPORT.sample_steps;
  const sel = document.getElementById("step-select");
  if (!steps.length) {
    document.getElementById("detail").textContent = "This run has no samples (samples/ is empty; see run.samples_per_step).";
    return;
  }
  for (const s of steps) {
    const o = document.createElement("option");
    o.value = s;
    o.textContent = `step ${s}`;
    sel.appendChild(o);
  }
  sel.addEventListener("change", () => pickStep(+sel.value));
  document.getElementById("rollout-select").addEventListener("change", e => drawRollout(view.rows[+e.target.value]));
  pickStep(steps[0]);
}

window.swarmTimeline = { pickStep, showTurn, xOf: t => view.x(t), current: () => view.row };
drawMetrics();
initTimeline();
document.body.dataset.ready = "1";
