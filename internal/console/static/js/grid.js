// A batch backfill's instances as a task × business date grid: one row per
// task, one column per date, each cell an instance coloured by its state
// (held ones hatched), its reason as the tooltip, a click away from its
// log and actions. A cell is one element, so that a year of ten tasks is a
// few thousand elements and a page a few hundred pixels high. Also the
// colouring of a backfill's DAG by each task's latest state.
import { enc } from "./api.js";
import { h, num, time } from "./ui.js";

// held says whether instance i waits because a failure holds it back (its
// reason then says which).
export const held = (i) => i.state === "waiting" && (i.reason || "").startsWith("held: ");

// stateLabel is an instance's state in words, "held" for a waiting one a
// failure holds back.
export const stateLabel = (i) => (held(i) ? "held" : i.state.replaceAll("_", " "));

// The legend's order.
const legend = ["succeeded", "dry_run", "running", "waiting", "held", "failed", "stopped", "blocked"];

// cellAttrs makes el show instance i.
function cellAttrs(el, i) {
  el.className = "gc st-" + i.state + (held(i) ? " held" : "");
  el.dataset.instance = i.id;
  el.dataset.state = i.state;
  if (held(i)) el.dataset.held = "";
  el.tabIndex = 0;
  el.setAttribute("role", "button");
}

// instanceGrid draws insts (instance views) as a grid. zone(task) is a
// task's time zone (its business dates are read there); open(i) is a click
// or Enter on a cell.
export function instanceGrid(insts, { zone, open }) {
  const byKey = new Map(); // task → date → [instances]
  const dates = new Set();
  const first = new Map(); // task → its earliest planned order
  const bizOf = new Map(); // instance → its business time in its task's zone
  for (const i of insts) {
    const biz = time(i.biz_time, zone(i.task));
    bizOf.set(i, biz);
    const d = biz.slice(0, 10);
    dates.add(d);
    if (!byKey.has(i.task)) byKey.set(i.task, new Map());
    const row = byKey.get(i.task);
    if (!row.has(d)) row.set(d, []);
    row.get(d).push(i);
    first.set(i.task, Math.min(first.get(i.task) ?? Infinity, i.order));
  }
  const cols = [...dates].sort();
  const tasks = [...byKey.keys()].sort((a, b) => first.get(a) - first.get(b) || a.localeCompare(b));
  const byID = new Map(insts.map((i) => [String(i.id), i]));
  const titleOf = (i) => {
    const biz = bizOf.get(i);
    return `${i.task} · ${biz.slice(0, 16)} (${zone(i.task)}) · #${i.id}\n${stateLabel(i)}${i.attempt ? " · attempt " + i.attempt : ""}` +
      (i.error ? "\n" + i.error : i.reason ? "\n" + i.reason : "") + "\nClick for its log and actions";
  };

  // Two header rows: each month once, then the days.
  const months = [];
  for (const d of cols) {
    const m = d.slice(0, 7);
    if (months.length && months[months.length - 1][0] === m) months[months.length - 1][1]++;
    else months.push([m, 1]);
  }
  const head = h("thead", {},
    h("tr", { class: "g-months" }, h("th", { class: "g-corner", rowspan: 2 }, "Task \\ date"), months.map(([m, n]) => h("th", { colspan: n, title: m }, m))),
    h("tr", { class: "g-days" }, cols.map((d) => h("th", { dataset: { date: d }, title: d }, d.slice(8)))));
  const body = h("tbody");
  for (const task of tasks) {
    const tr = h("tr", { dataset: { task } }, h("th", { class: "g-task", title: task }, h("a", { href: "#/tasks/" + enc(task) }, task)));
    const row = byKey.get(task);
    for (const d of cols) {
      const ins = row.get(d);
      const td = document.createElement("td");
      td.dataset.date = d;
      if (!ins) {
        td.className = "g-none";
      } else if (ins.length === 1) {
        cellAttrs(td, ins[0]);
      } else {
        // Several instances of a date (a sub-daily task): a slice each.
        td.className = "g-multi";
        const split = td.appendChild(document.createElement("div"));
        ins.sort((a, b) => a.biz_time.localeCompare(b.biz_time));
        for (const i of ins) {
          const s = document.createElement("span");
          cellAttrs(s, i);
          split.append(s);
        }
      }
      tr.append(td);
    }
    body.append(tr);
  }
  const table = h("table", { class: "bf-grid", dataset: { tasks: tasks.length, dates: cols.length } }, head, body);
  const pick = (ev) => {
    const cell = ev.target.closest("[data-instance]");
    if (!cell || !table.contains(cell)) return;
    const i = byID.get(cell.dataset.instance);
    if (i) open(i);
  };
  table.addEventListener("click", pick);
  // A cell's tooltip is written when the pointer or the focus reaches it:
  // thousands of them are not built for nothing.
  const tip = (ev) => {
    const cell = ev.target.closest?.("[data-instance]");
    const i = cell && byID.get(cell.dataset.instance);
    if (i && !cell.title) cell.title = titleOf(i);
  };
  table.addEventListener("mouseover", tip);
  table.addEventListener("focusin", tip);
  table.addEventListener("keydown", (ev) => { if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); pick(ev); } });
  const counts = {};
  for (const i of insts) { const s = held(i) ? "held" : i.state; counts[s] = (counts[s] || 0) + 1; }
  const key = h("div", { class: "g-legend" }, legend.filter((s) => counts[s]).map((s) =>
    h("span", { class: "g-key", dataset: { key: s } }, h("span", { class: "gc " + (s === "held" ? "st-waiting held" : "st-" + s) }), s.replace("_", " ") + " " + num(counts[s]))),
  h("span", { class: "muted" }, ` · ${num(tasks.length)} task${tasks.length === 1 ? "" : "s"} × ${num(cols.length)} date${cols.length === 1 ? "" : "s"}; hover a cell for its reason, click it for its log and actions`));
  return h("div", { class: "bf-gridbox" }, key, h("div", { class: "bf-gridwrap" }, table));
}

// latestStates is, for each task of insts, its latest instance: the one
// started last, else (none started) the one of the latest business time.
export function latestStates(insts) {
  const out = new Map();
  const later = (a, b) => (a.started_at || "").localeCompare(b.started_at || "") || a.biz_time.localeCompare(b.biz_time) || a.id - b.id;
  for (const i of insts) {
    const cur = out.get(i.task);
    if (!cur || later(i, cur) > 0) out.set(i.task, i);
  }
  return out;
}

// colourDag sets each node of a DAG drawn by drawDag to its task's latest
// instance's state (data-state, and data-held for a held one).
export function colourDag(wrap, insts) {
  const latest = latestStates(insts);
  for (const g of wrap.querySelectorAll("g.node[data-task]")) {
    const i = latest.get(g.dataset.task);
    if (!i) {
      delete g.dataset.state;
      continue;
    }
    g.dataset.state = i.state;
    if (held(i)) g.dataset.held = "";
    else delete g.dataset.held;
    g.setAttribute("aria-label", `${g.dataset.task}: ${stateLabel(i)}`);
  }
}
