// streams ui: draws what /api/ answers (the replay verbs' own results) as plain SVG.
// No framework and no build step: this file is served as it is from the Python package.
// Stable hooks: every op drawn is an element with data-op="<origin>:<shard>:<seq>" (a local op:
// "local <region>:<shard>:<seq>") and data-region="<origin region name>".
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const LANE = 110; // px between lanes
const ROW = 22; // px between ops
const TOP = 40; // px above the first op (lane names)
const view = document.getElementById("view");
const panel = document.getElementById("state");

function el(tag, attrs, text) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

function svg(tag, attrs, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

async function get(url) {
  const reply = await fetch(url);
  const body = await reply.json();
  if (!reply.ok) throw new Error(body.error || reply.statusText);
  return body;
}

function fail(where, err) {
  where.replaceChildren(el("p", { class: "error" }, String(err.message || err)));
}

// --- the key list --------------------------------------------------------------------------

async function keyList(fresh) {
  const info = await get("/api/info");
  document.getElementById("where").textContent =
    ` region ${info.region} on ${info.bootstrap}` + (info.at ? ` at ${info.at}` : "");
  const { keys } = await get("/api/keys" + (fresh ? "?fresh=1" : ""));
  const table = el("table", { id: "keys" });
  const header = el("tr");
  header.append(
    el("th", {}, "key"), el("th", {}, "ops"), el("th", {}, "entries"), el("th", {}, "groups"));
  table.append(header);
  for (const k of keys) {
    const row = el("tr", { "data-key": k.key });
    const cell = el("td");
    cell.append(el("a", { href: "/key/" + encodeURIComponent(k.key) }, k.key));
    row.append(cell, el("td", {}, k.ops),
      el("td", {}, k.exists ? k.length : "(deleted)"), el("td", {}, k.groups));
    table.append(row);
  }
  const reload = el("button", {}, "reload");
  reload.onclick = () => keyList(true).catch((e) => fail(view, e));
  view.replaceChildren(el("h2", {}, `${keys.length} key(s) touched by an op`), reload, table);
  if (!keys.length) view.append(el("p", { class: "note" }, "no op in these logs yet"));
}

// --- a key's page --------------------------------------------------------------------------

async function keyPage(key, offset, fresh) {
  const q = `?offset=${offset}` + (fresh ? "&fresh=1" : "");
  const page = await get("/api/key/" + encodeURIComponent(key) + q);
  document.getElementById("where").textContent =
    ` key ${page.key} as region ${page.region} applied it, at ${page.at || "(empty)"}`;
  const head = el("div", { class: "pager" });
  head.append(el("h2", {}, `${page.key}: ${page.applied} op(s) applied, ` +
    `${page.not_applied} read but not applied`));
  if (page.message) {
    view.replaceChildren(head, el("p", { class: "note", id: "message" }, page.message));
    return;
  }
  const last = Math.min(page.offset + page.limit, page.total);
  const nav = (label, to) => {
    const b = el("button", {}, label);
    b.onclick = () => go(key, to);
    return b;
  };
  if (page.offset > 0) head.append(nav("« earlier", Math.max(0, page.offset - page.limit)));
  head.append(el("span", {}, `ops ${page.offset + 1}–${last} of ${page.total} `));
  if (last < page.total) head.append(nav("later »", last));
  const reload = el("button", {}, "reload");
  reload.onclick = () => keyPage(key, offset, true).catch((e) => fail(view, e));
  head.append(reload);
  const banners = el("div", { id: "diff" });
  view.replaceChildren(head, legend(), banners, draw(page, key));
  diff(key, page, banners); // after the drawing: comparing regions may take longer
}

const LEGEND = [
  ["XAdd", "#4a4"], ["XDel / XTrim", "#e90"], ["Del", "#d22"],
  ["group create / destroy, XSETID", "#36c"], ["AckEffect", "#96c"],
  ["local op (square: delivery, ack, claim…)", "#bbb"], ["not applied (dashed)", "#fff"],
];

function legend() {
  const box = el("p", { class: "legend note" });
  for (const [name, color] of LEGEND) {
    const dot = el("span", { class: "swatch" });
    dot.style.background = color;
    box.append(dot, name + "   ");
  }
  box.append("arrow: the newest op of another region on this key that the op's causal " +
    "context had seen. Click an op: the key's state just after it.");
  return box;
}

function go(key, offset) {
  history.pushState({}, "", `/key/${encodeURIComponent(key)}?offset=${offset}`);
  keyPage(key, offset, false).catch((e) => fail(view, e));
}

function draw(page, key) {
  const lanes = new Map(page.lanes.map((l, i) => [l.id, { ...l, x: 30 + i * LANE }]));
  const width = 30 + page.lanes.length * LANE + 760;
  const height = TOP + page.ops.length * ROW + 10;
  const root = svg("svg", { width, height, id: "picture", "data-key": page.key });
  const defs = svg("defs");
  const marker = svg("marker", {
    id: "head", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7,
    orient: "auto-start-reverse",
  });
  marker.append(svg("path", { d: "M0,0 L10,5 L0,10 z", fill: "#678" }));
  defs.append(marker);
  root.append(defs);
  for (const lane of lanes.values()) {
    root.append(svg("text", { x: lane.x - 12, y: 16, class: "lane-head lane",
      "data-lane": lane.region }, lane.region));
    root.append(svg("line", { x1: lane.x, y1: 24, x2: lane.x, y2: height, class: "lane-line" }));
  }
  const where = new Map();
  const rows = svg("g", { class: "rows" });
  const arrows = svg("g", { class: "arrows" });
  const marks = svg("g", { class: "marks" });
  const labelX = 30 + page.lanes.length * LANE;
  page.ops.forEach((op, i) => {
    const y = TOP + i * ROW;
    const x = lanes.get(op.origin).x;
    where.set(op.id, { x, y });
    const row = svg("g", { class: "row" });
    row.append(svg("rect", { x: 0, y: y - ROW / 2, width, height: ROW, class: "hover" }));
    const index = op.index === null ? "   -" : `#${op.index}`.padStart(5);
    const label = svg("text", { x: labelX, y: y + 4,
      class: op.applied ? "" : "unapplied-text" },
      `${index} ${op.dot.padEnd(10)} ${op.op}${op.args.group ? " " + op.args.group : ""}: ` +
      op.change);
    row.append(label);
    rows.append(row);
    const classes = ["mark", op.op, op.kind, op.applied ? "applied" : "unapplied"].join(" ");
    const attrs = { class: classes, "data-op": op.id, "data-region": op.region,
      "data-index": op.index === null ? "" : op.index, tabindex: 0 };
    const mark = op.kind === "local"
      ? svg("rect", { ...attrs, x: x - 6, y: y - 6, width: 12, height: 12 })
      : svg("circle", { ...attrs, cx: x, cy: y, r: 7 });
    mark.append(svg("title", {}, `${op.dot} ${op.op} (${op.topic}@${op.offset}): ${op.change}`));
    mark.addEventListener("click", () => select(key, op, mark));
    row.addEventListener("click", (e) => { if (e.target !== mark) select(key, op, mark); });
    marks.append(mark);
  });
  page.ops.forEach((op) => {
    const from = where.get(op.id);
    for (const target of op.seen) {
      const to = where.get(target);
      const attrs = { "data-from": op.id, "data-to": target };
      if (to) {
        const bend = (from.x + to.x) / 2 + (to.y - from.y) * 0.15;
        arrows.append(svg("path", { ...attrs, class: "arrow",
          d: `M${from.x},${from.y} Q${bend},${(from.y + to.y) / 2} ${to.x},${to.y + 7}` }));
      } else { // the op it had seen is on an earlier page (or was not read here)
        const origin = Number(target.split(":")[0]);
        const lane = lanes.get(origin);
        if (!lane) continue;
        const line = svg("path", { ...attrs, class: "arrow off-page",
          d: `M${from.x},${from.y} L${lane.x},${Math.max(from.y - 30, 26)}` });
        line.append(svg("title", {}, `had seen ${target} (not on this page)`));
        arrows.append(line);
      }
    }
  });
  root.append(rows, arrows, marks);
  return root;
}

async function diff(key, page, banners) {
  let answer;
  try {
    answer = await get("/api/diff/" + encodeURIComponent(key));
  } catch (err) {
    banners.append(el("p", { class: "error" }, "diff: " + err.message));
    return;
  }
  if (!answer.available) {
    banners.append(el("p", { class: "note" }, answer.why));
    return;
  }
  for (const other of answer.regions) {
    const d = other.diverged;
    if (d) {
      const text = `${answer.region} and ${other.region} differ at the same position ` +
        `(${other.shared}): ${d.text} (streams diff)`;
      banners.append(el("p", { class: "banner diverged", "data-diverged": d.op || "" }, text));
      const mark = d.op && document.querySelector(`[data-op="${d.op}"]`);
      if (mark) mark.classList.add("diverged");
    }
    for (const [behind, missing] of Object.entries(other.missing_in)) {
      const names = missing.map((m) => m.op + (m.held ? " (held)" : ""));
      banners.append(el("p", { class: "note lagging", "data-behind": behind },
        `${behind} has not applied ${names.join(", ")}`));
      for (const m of missing) {
        const mark = document.querySelector(`[data-op="${m.op}"]`);
        if (!mark) continue;
        const x = Number(mark.getAttribute("cx") || Number(mark.getAttribute("x")) + 6);
        const y = Number(mark.getAttribute("cy") || Number(mark.getAttribute("y")) + 6);
        const badge = svg("circle", { cx: x + 10, cy: y - 6, r: 4, class: "lag",
          "data-missing-in": behind, "data-of": m.op });
        badge.append(svg("title", {}, `not applied in ${behind}` + (m.held ? " (held)" : "")));
        mark.parentNode.append(badge);
      }
    }
    if (!d && !Object.keys(other.missing_in).length) {
      banners.append(el("p", { class: "note" },
        `${other.region}: same ${page.key} as ${answer.region} (streams diff)`));
    }
  }
}

// --- the state at a point -------------------------------------------------------------------

async function select(key, op, mark) {
  document.querySelectorAll(".mark.selected").forEach((m) => m.classList.remove("selected"));
  mark.classList.add("selected");
  panel.hidden = false;
  if (op.index === null) {
    panel.replaceChildren(el("h3", {}, `${op.dot} ${op.op}`),
      el("p", { class: "note" }, op.change));
    return;
  }
  panel.replaceChildren(el("p", { class: "note" }, "folding…"));
  let s;
  try {
    s = await get(`/api/state/${encodeURIComponent(key)}?index=${op.index}`);
  } catch (err) {
    fail(panel, err);
    return;
  }
  panel.setAttribute("data-index", s.index);
  panel.setAttribute("data-at", s.at);
  panel.replaceChildren(
    el("h3", {}, `after #${op.index} ${op.dot} ${op.op}`),
    el("p", {}, op.change),
    el("p", { class: "note" }, "= "),
  );
  panel.lastChild.append(el("code", { id: "command" }, s.command));
  panel.append(el("h4", {}, "what each region had applied"));
  const vt = el("table", { id: "vectors" });
  for (const [region, v] of Object.entries(s.vectors)) {
    const text = Object.entries(v.vector).map(([r, n]) => `${r}=${n}`).join(",") || "(none)";
    const row = el("tr", { "data-region": region, "data-exact": v.exact });
    row.append(el("td", {}, region), el("td", {}, (v.exact ? "" : "≥ ") + text));
    row.title = v.why;
    vt.append(row);
  }
  panel.append(vt);
  if (!s.exists) {
    panel.append(el("p", { id: "absent" }, `${s.key} does not exist at this point`));
    return;
  }
  const st = s.state;
  panel.append(el("h4", {}, `${st.length} entr${st.length === 1 ? "y" : "ies"}, ` +
    `last id ${st.last_id}`));
  const et = el("table", { id: "entries" });
  for (const e of st.entries) {
    const row = el("tr", { "data-entry": e.id, "data-origin": e.origin });
    row.append(el("td", {}, e.id), el("td", {}, `r${e.origin}`),
      el("td", {}, e.fields.join(" ")));
    et.append(row);
  }
  panel.append(et, el("h4", {}, `${st.groups.length} group(s)`));
  const gt = el("table", { id: "groups" });
  for (const g of st.groups) {
    const row = el("tr", { "data-group": g.name });
    row.append(el("td", {}, g.name), el("td", {}, `last-delivered ${g.last_delivered}`),
      el("td", {}, `${g.pending.length} pending`),
      el("td", {}, g.consumers.map((c) => c.name).join(", ")));
    gt.append(row);
  }
  panel.append(gt);
}

// --- routing --------------------------------------------------------------------------------

function route() {
  const path = location.pathname;
  if (path.startsWith("/key/")) {
    const key = decodeURIComponent(path.slice("/key/".length));
    const offset = Number(new URLSearchParams(location.search).get("offset") || 0);
    keyPage(key, offset, false).catch((e) => fail(view, e));
  } else {
    keyList(false).catch((e) => fail(view, e));
  }
}

window.addEventListener("popstate", route);
route();
