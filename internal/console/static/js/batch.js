// Batch backfills: the list, live from pushed events, and one backfill's
// page: its request, its tasks' DAG coloured by their latest state, its
// instances as a task × date grid or by concurrency group and date with the
// actions their states allow, live as well.
import { api, enc, get, post, q } from "./api.js";
import { ago, badge, confirm, errorBox, h, num, page, replace, select, span, table, throttle, time, toast, userZone } from "./ui.js";
import { actionButtons, instancePage as instPage, openInstance } from "./instance.js";
import { datesLabel } from "./batchdialog.js";
import { drawDag } from "./dag.js";
import { colourDag, held, instanceGrid } from "./grid.js";

export const instancePage = instPage;

// gridAbove is the number of instances above which a backfill's page
// starts with the grid rather than the list.
const gridAbove = 20;

// pointAt brings el into view, focused and highlighted for a moment.
function pointAt(el) {
  el.scrollIntoView({ block: "nearest" });
  el.focus();
  el.classList.remove("pointed");
  void el.offsetWidth; // restart the animation
  el.classList.add("pointed");
}

const stateOrder = ["succeeded", "dry_run", "running", "waiting", "failed", "stopped", "blocked"];
const ended = (s) => !["waiting", "running"].includes(s);

// stackBar is a thin bar of instance counts by state, with the count done.
export function stackBar(states, total) {
  const bar = h("div", { class: "stack", title: stateOrder.filter((s) => states[s]).map((s) => `${s.replace("_", " ")} ${num(states[s])}`).join(" · ") });
  for (const s of stateOrder) {
    if (!states[s]) continue;
    const seg = h("span", { class: "st-" + s });
    seg.style.width = (100 * states[s] / Math.max(total, 1)) + "%";
    bar.append(seg);
  }
  const done = (states.succeeded || 0) + (states.dry_run || 0);
  return h("div", { class: "stack-box" }, bar, h("span", { class: "stack-n" }, `${num(done)}/${num(total)}`),
    states.failed ? h("span", { class: "stack-failed" }, num(states.failed) + " failed") : null);
}

function took(b) {
  if (!b.started_at) return "";
  return span(((b.finished_at ? new Date(b.finished_at) : Date.now()) - new Date(b.started_at)) / 1000);
}

export async function batchListPage(main, _params, ctx) {
  const state = select("state", [["", "any state"], ...["waiting", "running", "succeeded", "failed", "stopped", "blocked"].map((s) => [s, s])], ctx.query.get("state") || "");
  const task = h("input", { type: "search", name: "task", placeholder: "start task id", value: ctx.query.get("task") || "" });
  const content = page(main, {
    title: "Batch backfills", crumbs: [["Recurring tasks run again for past dates"]],
    actions: [state, task, h("a", { class: "btn primary", href: "#/tasks" }, "New backfill…")],
  });
  const out = h("div", {}, h("p", { class: "muted" }, "Loading…"));
  content.append(out);
  const columns = [
    { label: "#", class: "num", cell: (b) => h("a", { href: "#/batch/" + b.id }, "#" + b.id) },
    { label: "Backfill", cell: (b) => [h("a", { href: "#/batch/" + b.id, class: "strong" }, b.name), b.error ? h("div", { class: "hint err-hint", title: b.error }, b.error) : null] },
    { label: "Start task", cell: (b) => h("a", { href: "#/tasks/" + enc(b.task) }, b.task) },
    { label: "State", cell: (b) => badge(b.state) },
    { label: "Instances", cell: (b) => stackBar(b.states || {}, b.instances) },
    { label: "Started by", cell: (b) => b.started_by },
    { label: "Created", cell: (b) => h("span", { title: time(b.created_at) + " " + userZone }, ago(b.created_at)) },
    { label: "Starts at", cell: (b) => Math.abs(new Date(b.start_at) - new Date(b.created_at)) < 2000 ? h("span", { class: "muted" }, "at once") : time(b.start_at) },
    { label: "Took", class: "num", cell: took },
  ];
  async function load() {
    try {
      const list = await get("/api/v1/batch/backfills" + q({ state: state.value, task: task.value.trim(), limit: 200 }));
      if (!ctx.alive()) return;
      replace(out, table(columns, list, {
        empty: state.value || task.value ? "No backfill matches these filters." : "No batch backfill yet: open a task and press Backfill….",
        rowAttrs: (b) => ({ dataset: { backfill: b.id, state: b.state } }),
      }));
    } catch (e) {
      if (ctx.alive()) replace(out, errorBox(e));
    }
  }
  state.addEventListener("change", load);
  task.addEventListener("input", throttle(load, 300));
  const reload = throttle(load, 800);
  ctx.onEvent((ev) => { if (ev.kind === "batch_backfill" || (ev.kind === "instance" && ev.batch_backfill_id)) reload(); });
  ctx.every(30000, load); // the "ago" column
  await load();
}

// describe summarizes a request in a few lines.
function describe(r) {
  const d = r.dates || {};
  const lv = (n) => (n === -1 ? "all levels" : n ? n + (n === 1 ? " level" : " levels") : "none");
  const dates = d.mode === "custom" ? (d.list || []).join(", ")
    : `${d.from} → ${d.to}` + (d.mode === "cycle" ? ` on ${[...(d.weekdays || []).map((w) => ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"][w]), ...(d.month_days || []).map((m) => (m === -1 ? "month end" : "day " + m))].join(", ")}` : "");
  const s = r.scope || {};
  const scope = s.mode === "list" ? `list: upstream ${lv(s.upstream || 0)}, downstream ${lv(s.downstream || 0)}`
    : s.mode === "mass" ? `mass: ${(s.coverage || "").replaceAll("_", " ")}${(s.values || []).length ? " " + s.values.join(", ") : ""}` : "this task only";
  const excl = [...(s.exclude_tasks || []), ...(s.exclude_outputs || []).map((o) => "output " + o)];
  const pol = [];
  if (r.paused && r.paused !== "block") pol.push("paused tasks: " + r.paused.replace("_", "-"));
  if (r.dry_run === "run") pol.push("dry-run tasks run");
  if (r.succeeded && r.succeeded !== "rerun") pol.push("succeeded dates: " + r.succeeded.replace("_", " "));
  if (r.running === "skip") pol.push("running dates skipped");
  if (r.dry_run_task) pol.push("start task dry-runs");
  if (r.wait_scheduled) pol.push("waits for scheduled times");
  if (r.stop_on_failure) pol.push("stops at the first failure");
  if (r.single_instance) pol.push("single instance");
  if (r.resource_group) pol.push("resource group " + r.resource_group);
  if (r.keep_paused || s.keep_paused) pol.push("keeps paused tasks");
  return [
    ["Dates", dates + (r.time_range ? ` · ${r.time_range.from}–${r.time_range.to}` + (r.hourly_scope === "within" ? " (day-based tasks only within)" : "") : "")],
    ["Tasks", scope + (excl.length ? " · excluding " + excl.join(", ") : "")],
    ["Groups", `${r.groups || 1} · ${r.order === "desc" ? "newest first" : "oldest first"}`],
    ["Options", pol.length ? pol.join(" · ") : "defaults"],
  ];
}

// loadInstances reads up to 5,000 instances of a backfill, of one state
// when state is set.
async function loadInstances(id, state) {
  const all = [];
  for (let after = 0; all.length < 5000;) {
    const page = await get(`/api/v1/batch/backfills/${id}/instances` + q({ state, after: after || undefined, limit: 1000 }));
    all.push(...page);
    if (page.length < 1000) break;
    after = page[page.length - 1].id;
  }
  return all;
}

async function downloadCSV(id) {
  try {
    const text = await api("GET", `/api/v1/batch/backfills/${id}/nodes.csv`);
    const url = URL.createObjectURL(new Blob([text], { type: "text/csv" }));
    const a = h("a", { href: url, download: `backfill-${id}-nodes.csv` });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 1000);
  } catch (e) {
    toast(e.message, "error");
  }
}

export async function batchPage(main, [id], ctx) {
  let b, insts, tasks;
  try {
    [b, insts, tasks] = await Promise.all([get("/api/v1/batch/backfills/" + id), loadInstances(id, ctx.query.get("state") || ""), get("/api/v1/tasks").catch(() => [])]);
  } catch (e) {
    page(main, { title: "Batch backfill #" + id, crumbs: [["Batch backfills", "#/batch"]] }).append(errorBox(e));
    return;
  }
  if (!ctx.alive()) return;
  const byID = new Map(tasks.map((t) => [t.id, t]));
  const zone = (task) => (byID.get(task) || {}).timezone || "UTC";
  const headState = h("span", { class: "bf-state" });
  const stopBtn = h("button", { type: "button", class: "btn danger", dataset: { action: "stop-backfill", need: "operator" }, onclick: stop }, "Stop");
  const rerunBtn = h("button", { type: "button", class: "btn", dataset: { action: "rerun-backfill", need: "operator" }, onclick: rerun }, "Re-run failed");
  const csvBtn = h("button", { type: "button", class: "btn", dataset: { action: "export" }, title: "The backfill's selected tasks as CSV", onclick: () => downloadCSV(id) }, "nodes.csv");
  const content = page(main, { title: b.name, crumbs: [["Batch backfills", "#/batch"], ["#" + id]], actions: [headState, csvBtn, rerunBtn, stopBtn] });
  const summary = h("div", {});
  const dagBox = h("details", { class: "panel bf-dag", open: true }, h("summary", {}, h("strong", {}, "Tasks"), h("span", { class: "muted" }, " · coloured by each task's latest instance: the one started last")));
  const filterBox = h("div", { class: "inst-filter" });
  const groupsBox = h("div", { class: "groups bf-groups" });
  // A batch backfill of a lineage proposal says what caused it.
  const causes = (b.caused_by || []).length
    ? h("p", { class: "hint bf-caused" }, h("a", { href: "#/lineage" }, "Lineage"), ": ", b.caused_by.join("; "))
    : null;
  content.append(...[causes, summary, dagBox, filterBox, groupsBox].filter(Boolean));
  let filter = ctx.query.get("state") || "";
  // The grid is the compact view, the list the detailed one; a small
  // backfill starts as the list.
  let view = ctx.query.get("view") || (b.instances > gridAbove ? "grid" : "list");
  let dagKey = "", dagWrap = null;
  const taskFilter = h("input", { type: "search", name: "task-filter", placeholder: "filter tasks", oninput: () => paintGroups() });
  const openDates = new Map(); // "group|date" → open, as the user left it

  async function stop() {
    if (!(await confirm("Stop backfill?", `Stop ${b.name}? Running attempts are ended and nothing else of it runs. Failed and stopped instances can be re-run later.`, "Stop backfill", "danger"))) return;
    try {
      b = await post(`/api/v1/batch/backfills/${id}/stop`);
      toast("Stopping " + b.name);
      refresh();
    } catch (e) { toast(e.message, "error"); }
  }
  async function rerun() {
    const n = (b.states.failed || 0) + (b.states.stopped || 0);
    if (!(await confirm("Re-run backfill?", `Re-run the ${num(n)} failed and stopped instance${n === 1 ? "" : "s"} of ${b.name}? What waits for them then proceeds.`, "Re-run"))) return;
    try {
      b = await post(`/api/v1/batch/backfills/${id}/rerun`);
      toast("Re-running " + num(n) + " instance" + (n === 1 ? "" : "s"));
      refresh();
    } catch (e) { toast(e.message, "error"); }
  }

  function paintHead() {
    b.states = b.states || {};
    headState.dataset.backfillState = b.state;
    replace(headState, badge(b.state));
    stopBtn.disabled = ended(b.state);
    stopBtn.title = stopBtn.disabled ? "The backfill has ended" : null;
    const n = (b.states.failed || 0) + (b.states.stopped || 0);
    rerunBtn.disabled = !n;
    rerunBtn.textContent = n ? `Re-run failed (${num(n)})` : "Re-run failed";
    rerunBtn.title = n ? null : "No failed or stopped instance";
    let req = b.request || {};
    if (typeof req === "string") try { req = JSON.parse(req); } catch { req = {}; }
    const card = (k, v, cls) => h("div", { class: "card " + (cls || "") }, h("div", { class: "k" }, k), h("div", { class: "v" }, v));
    replace(summary,
      h("div", { class: "cards bf-cards" },
        card("Progress", stackBar(b.states, b.instances), "wide"),
        card("Start task", h("a", { href: "#/tasks/" + enc(b.task) }, b.task)),
        card("Started by", b.started_by),
        card("Created", h("span", { title: time(b.created_at) + " " + userZone }, ago(b.created_at))),
        card(b.finished_at ? "Took" : b.started_at ? "Running for" : "Starts at", b.started_at ? took(b) : time(b.start_at))),
      b.error ? h("div", { class: "notice " + (b.state === "failed" ? "bad" : ""), dataset: { banner: "" } }, b.error,
        n ? h("div", { class: "notice-next", dataset: { need: "operator" } }, "Once the cause is fixed, ",
          h("a", { href: "#", dataset: { action: "point-rerun" }, onclick: (ev) => { ev.preventDefault(); pointAt(rerunBtn); } }, `Re-run failed (${num(n)})`),
          " at the top right runs the failed and stopped instances again.") : null) : null,
      h("details", { class: "panel request" }, h("summary", {}, h("strong", {}, "Request"), h("span", { class: "muted" }, " · " + describe(req).map(([k, v]) => v).slice(0, 2).join(" · "))),
        h("dl", { class: "kv" }, describe(req).map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])),
        h("pre", { class: "code" }, JSON.stringify(req, null, 2))));
    // State filter chips, with the backfill's counts.
    const chip = (s, n) => h("button", { type: "button", class: "chip" + (filter === s ? " on" : ""), dataset: { filter: s }, onclick: () => { filter = filter === s ? "" : s; paintHead(); paintGroups(); refresh(); } },
      s ? badge(s) : "All", h("span", { class: "n" }, num(n)));
    const viewBtn = (v, label) => h("button", { type: "button", class: "btn small" + (view === v ? " on" : ""), dataset: { view: v }, "aria-pressed": String(view === v), onclick: () => { view = v; paintHead(); paintGroups(); } }, label);
    replace(filterBox, chip("", b.instances), stateOrder.filter((s) => b.states[s]).map((s) => chip(s, b.states[s])), h("span", { class: "spacer" }), taskFilter,
      h("span", { class: "seg-btns" }, viewBtn("grid", "Grid"), viewBtn("list", "List")),
      view === "list" ? [h("button", { type: "button", class: "btn small", onclick: () => toggleAll(true) }, "Expand all"), h("button", { type: "button", class: "btn small", onclick: () => toggleAll(false) }, "Collapse all")] : null);
  }

  // paintDag draws the DAG of the backfill's tasks once (again when they
  // change) and colours its nodes by the instances shown.
  function paintDag() {
    const ids = [...new Set(insts.map((i) => i.task))].sort();
    const key = ids.join("\n");
    if (key !== dagKey) {
      dagKey = key;
      const sub = ids.map((t) => byID.get(t)).filter(Boolean);
      dagWrap = sub.length ? drawDag(sub, { onOpen: (t) => { location.hash = "#/tasks/" + enc(t); } }) : null;
      replace(dagBox, dagBox.firstChild, dagWrap);
      dagBox.hidden = !dagWrap;
    }
    if (dagWrap) colourDag(dagWrap, insts);
  }

  function toggleAll(open) {
    for (const d of groupsBox.querySelectorAll("details.date-block")) { d.open = open; openDates.set(d.dataset.key, open); }
  }

  function row(i) {
    const tz = zone(i.task);
    const times = i.started_at ? [h("span", { class: "mono" }, time(i.started_at).slice(11)), " → ", i.finished_at ? h("span", { class: "mono" }, time(i.finished_at).slice(11)) : h("span", { class: "muted" }, "…"),
      h("span", { class: "dur" }, " " + span(((i.finished_at ? new Date(i.finished_at) : Date.now()) - new Date(i.started_at)) / 1000))] : h("span", { class: "muted" }, "—");
    const note = i.error ? h("span", { class: "err", title: i.error }, i.error) : i.reason ? h("span", { class: "muted", title: i.reason }, i.reason)
      : i.next_try ? h("span", { class: "muted" }, "retry " + ago(i.next_try)) : "";
    const task = byID.get(i.task);
    const hourly = task && !/^(daily|weekly|monthly)/.test(task.schedule);
    return h("div", { class: "inst", dataset: { instance: i.id, task: i.task, state: i.state } },
      h("div", { class: "i-task" }, h("a", { href: "#/tasks/" + enc(i.task) }, i.task), hourly ? h("span", { class: "mono muted" }, " " + time(i.biz_time, tz).slice(11, 16)) : null,
        h("a", { class: "i-id", href: "#/instances/" + i.id, title: "Open instance #" + i.id }, "#" + i.id)),
      h("div", { class: "i-state" }, badge(held(i) ? "held" : i.state, i.reason), i.mode !== "run" && i.mode !== i.state ? h("span", { class: "hint" }, " " + i.mode.replace("_", "-")) : null),
      h("div", { class: "i-attempt muted", title: "attempt" }, i.attempt ? "×" + i.attempt : ""),
      h("div", { class: "i-times", title: `started ${time(i.started_at)} · finished ${time(i.finished_at)} (${userZone})` }, times),
      h("div", { class: "i-note" }, note),
      h("div", { class: "i-actions" },
        actionButtons(i, b.state, refresh),
        h("button", { type: "button", class: "btn small", dataset: { action: "log" }, disabled: !i.attempt, title: i.attempt ? null : "Not run yet", onclick: () => openInstance(i, task, "log", b.state, refresh) }, "Log"),
        h("button", { type: "button", class: "btn small", dataset: { action: "code" }, onclick: () => openInstance(i, task, "code", b.state, refresh) }, "Code")));
  }

  function paintGroups() {
    paintDag();
    const tf = taskFilter.value.trim().toLowerCase();
    const shown = insts.filter((i) => (!filter || i.state === filter) && (!tf || i.task.toLowerCase().includes(tf)));
    const more = (filter ? b.states[filter] || 0 : b.instances) > insts.length ? h("p", { class: "hint" }, `Showing the first ${num(insts.length)} of ${num(filter ? b.states[filter] : b.instances)} instances${filter ? "" : "; filter by state to see others"}.`) : null;
    const none = h("p", { class: "empty" }, insts.length ? "No instance matches the filter." : "This backfill has no instances.");
    if (view === "grid") {
      // A redraw keeps where the grid was scrolled to.
      const old = groupsBox.querySelector(".bf-gridwrap");
      const at = old && (old.scrollLeft || old.scrollTop) ? [old.scrollLeft, old.scrollTop] : null;
      replace(groupsBox, shown.length ? instanceGrid(shown, { zone, open: (i) => openInstance(i, byID.get(i.task), "log", b.state, refresh) }) : none, more);
      const wrap = groupsBox.querySelector(".bf-gridwrap");
      if (at && wrap) [wrap.scrollLeft, wrap.scrollTop] = at;
      return;
    }
    const groups = new Map();
    for (const i of shown) {
      const date = time(i.biz_time, zone(i.task)).slice(0, 10);
      if (!groups.has(i.group)) groups.set(i.group, new Map());
      const g = groups.get(i.group);
      if (!g.has(date)) g.set(date, []);
      g.get(date).push(i);
    }
    const counts = (list) => { const s = {}; for (const i of list) s[i.state] = (s[i.state] || 0) + 1; return s; };
    const many = shown.length > 300;
    const blocks = [...groups].sort((a, b) => a[0] - b[0]).map(([g, dates]) => {
      const list = [...dates.values()].flat();
      return h("section", { class: "group", dataset: { group: g } },
        h("h3", {}, "Group " + g, h("span", { class: "muted g-dates" }, datesLabel([...dates.keys()], " → ")), h("span", { class: "spacer" }), stackBar(counts(list), list.length)),
        [...dates].map(([d, ins]) => {
          const key = g + "|" + d;
          const busy = ins.some((i) => !["succeeded", "dry_run"].includes(i.state));
          const det = h("details", { class: "date-block", dataset: { key, date: d }, open: openDates.has(key) ? openDates.get(key) : !many || busy },
            h("summary", {}, h("span", { class: "date" }, d), h("span", { class: "muted" }, ` ${ins.length} instance${ins.length === 1 ? "" : "s"}`), h("span", { class: "spacer" }), stackBar(counts(ins), ins.length)),
            ins.sort((a, b) => a.order - b.order || a.id - b.id).map(row));
          det.addEventListener("toggle", () => openDates.set(key, det.open));
          return det;
        }));
    });
    replace(groupsBox, blocks.length ? blocks : none, more);
  }

  // refresh reads the backfill and its instances again; an answer older
  // than one already painted is dropped.
  let asked = 0, painted = 0;
  async function refresh() {
    const n = ++asked;
    try {
      const [nb, ni] = await Promise.all([get("/api/v1/batch/backfills/" + id), loadInstances(id, filter)]);
      if (!ctx.alive() || n < painted) return;
      painted = n;
      b = nb;
      insts = ni;
      paintHead();
      paintGroups();
    } catch (e) {
      if (ctx.alive()) toast(e.message, "error");
    }
  }

  paintHead();
  paintGroups();
  // Live: the pushed events of this backfill bring a throttled refresh
  // (times, reasons, attempts and counts come with it).
  const later = throttle(refresh, b.instances > 1000 ? 3000 : 400);
  ctx.onEvent((ev) => { if (String(ev.batch_backfill_id) === String(id)) later(); });
  ctx.every(10000, () => { if (!ended(b.state)) refresh(); });
}
