// Recurring tasks: the list with the DAG drawn as a graph, and one task's
// page with its code, parameters, its neighbourhood in the DAG and the
// backfills that ran it. Backfills start from either.
import { APIError, enc, get, q } from "./api.js";
import { ago, badge, errorBox, h, num, page, replace, table, throttle, time, toast, userZone } from "./ui.js";
import { backfillIcon, drawDag, lineage, withReads } from "./dag.js";
import { openBackfillDialog } from "./batchdialog.js";
import { stackBar } from "./batch.js";

// loadTasks answers the tasks, or null after showing why there are none.
async function loadTasks(main, title) {
  try {
    return await get("/api/v1/tasks");
  } catch (e) {
    const content = page(main, { title });
    if (e instanceof APIError && e.code === "no_tasks") {
      content.append(h("div", { class: "empty" }, h("strong", {}, "No recurring tasks are configured."), h("p", {}, "Declare them under tasks: in the daemon's config (docs/config.md, “Recurring tasks”) and restart it.")));
    } else {
      content.append(errorBox(e));
    }
    return null;
  }
}

function backfill(id, tasks) {
  openBackfillDialog(id, tasks).catch((e) => {
    const dlg = document.querySelector('dialog[data-dialog="backfill"]');
    if (dlg) dlg.close();
    toast(e.message || String(e), "error");
  });
}

const open = (id) => { location.hash = "#/tasks/" + enc(id); };

function flags(t) {
  return [t.paused ? badge("paused") : null, t.dry_run ? badge("dry_run") : null,
    t.self_dependent ? h("span", { class: "tag", title: "each instance waits for the task's previous cycle" }, "self-dependent") : null,
    t.single_instance ? h("span", { class: "tag", title: "can handle many dates in one run" }, "single instance") : null];
}

export async function tasksPage(main, _params, ctx) {
  const tasks = await loadTasks(main, "Tasks");
  if (!tasks || !ctx.alive()) return;
  const projects = [...new Set(tasks.map((t) => t.project))].sort();
  const search = h("input", { type: "search", name: "filter", placeholder: "Filter: name, project, owner, output, table read…", class: "filter", value: ctx.query.get("q") || "" });
  const content = page(main, { title: "Tasks", crumbs: [["Recurring tasks and their dependencies"]], actions: [search] });
  const matches = (t) => {
    const s = search.value.trim().toLowerCase();
    return !s || [t.id, t.owner, t.output, t.type, t.schedule, ...(t.reads || []).map((r) => r.object)].some((v) => (v || "").toLowerCase().includes(s));
  };
  const stat = (k, v) => h("div", { class: "card" }, h("div", { class: "k" }, k), h("div", { class: "v" }, v));
  const edges = tasks.reduce((a, t) => a + t.upstream.length, 0);
  const graphBox = h("div", {});
  const tableBox = h("div", {});
  content.append(
    h("div", { class: "cards" }, stat("Tasks", num(tasks.length)), stat("Projects", num(projects.length)), stat("Dependencies", num(edges)),
      stat("Paused", num(tasks.filter((t) => t.paused).length)), stat("Dry-run", num(tasks.filter((t) => t.dry_run).length))),
    h("section", { class: "panel dag-panel" },
      h("div", { class: "panel-head" }, h("h2", {}, "Dependency graph"),
        h("span", { class: "legend" }, h("span", { class: "lg-up" }, "upstream"), " → ", h("span", {}, "downstream"),
          h("span", { class: "muted" }, " · click a task to open it · ", backfillIcon(), " or right-click to backfill"))),
      graphBox),
    tableBox);

  const columns = [
    { label: "Task", cell: (t) => [h("a", { href: "#/tasks/" + enc(t.id), class: "strong" }, t.name), h("div", { class: "hint mono" }, t.id)] },
    { label: "Project", cell: (t) => t.project },
    { label: "Type", cell: (t) => h("span", { class: "tag type-" + t.type }, t.type) },
    { label: "Schedule", cell: (t) => h("span", { class: "mono" }, t.schedule) },
    { label: "Time zone", cell: (t) => t.timezone },
    { label: "Owner", cell: (t) => t.owner || h("span", { class: "muted" }, "—") },
    { label: "Flags", cell: flags },
    { label: "Up", class: "num", title: "Upstream tasks (direct)", cell: (t) => num(t.upstream.length) },
    { label: "Down", class: "num", title: "Downstream tasks (direct)", cell: (t) => num(t.downstream.length) },
    { label: "", cell: (t) => h("button", { class: "btn small", type: "button", dataset: { action: "backfill", task: t.id, need: "operator" }, onclick: () => backfill(t.id, tasks) }, "Backfill…") },
  ];
  function render() {
    replace(graphBox, drawDag(withReads(tasks), { onOpen: open, onBackfill: (id) => backfill(id, tasks), match: search.value.trim() ? matches : null }));
    const shown = tasks.filter(matches);
    replace(tableBox, table(columns, shown, { empty: "No task matches “" + search.value + "”.", rowAttrs: (t) => ({ dataset: { task: t.id } }) }));
  }
  search.addEventListener("input", throttle(render, 150));
  render();
}

export async function taskPage(main, [id], ctx) {
  const tasks = await loadTasks(main, id);
  if (!tasks || !ctx.alive()) return;
  const byID = new Map(tasks.map((t) => [t.id, t]));
  let task = byID.get(id);
  if (!task) {
    // A unique name works too; the API says what is wrong otherwise.
    try {
      task = await get("/api/v1/tasks/" + enc(id));
    } catch (e) {
      page(main, { title: id, crumbs: [["Tasks", "#/tasks"]] }).append(errorBox(e));
      return;
    }
  }
  const content = page(main, {
    title: task.name,
    crumbs: [["Tasks", "#/tasks"], [task.project], [task.id]],
    actions: [h("button", { class: "btn primary", type: "button", dataset: { action: "backfill", need: "operator" }, onclick: () => backfill(task.id, tasks) }, "Backfill…")],
  });
  const links = (ids) => ids.length ? ids.map((u, i) => [i ? ", " : "", h("a", { href: "#/tasks/" + enc(u) }, u)]) : h("span", { class: "muted" }, "none");
  const reads = (rs) => rs && rs.length
    ? h("ul", { class: "reads" }, rs.map((r) => h("li", { dataset: { read: r.stream + "/" + r.object } },
      h("a", { href: "#/streams/" + enc(r.stream) + "/objects/" + enc(r.object) }, r.object), " of ", h("a", { href: "#/streams/" + enc(r.stream) }, r.stream),
      h("span", { class: "muted" }, ` by ${r.date_column} (${r.timezone})`))))
    : h("span", { class: "muted" }, "no streamed objects");
  const kv = (pairs) => h("dl", { class: "kv" }, pairs.filter(Boolean).map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
  const params = (ps, empty) => ps && ps.length
    ? h("table", { class: "mini" }, ps.map((p) => h("tr", {}, h("td", { class: "mono" }, p.name), h("td", { class: "mono" }, p.value))))
    : h("p", { class: "muted" }, empty);
  const near = lineage(byID, task.id, 1);
  near.delete(task.id);
  let scope = lineage(byID, task.id);
  if (scope.size > 150) scope = lineage(byID, task.id, 2);
  const sub = tasks.filter((t) => scope.has(t.id));
  const recent = h("div", {}, h("p", { class: "muted" }, "Loading…"));
  content.append(
    h("div", { class: "task-cols" },
      h("section", { class: "panel" }, h("h2", {}, "Details"),
        kv([["ID", h("span", { class: "mono" }, task.id)], ["Project", task.project], ["Owner", task.owner || "—"], ["Output", task.output || "—"],
          ["Type", task.type], ["Schedule", h("span", { class: "mono" }, task.schedule)], ["Time zone", task.timezone],
          ["Resource group", task.resource_group], ["Flags", flags(task).some(Boolean) ? flags(task) : "—"],
          ["Upstream", links(task.upstream)], ["Downstream", links(task.downstream)], ["Reads", reads(task.reads)]]),
        h("h3", {}, "Parameters"), params(task.params, "No parameters."),
        h("h3", {}, "Output parameters"), params(task.outputs, "No output parameters.")),
      h("section", { class: "panel code-panel" }, h("h2", {}, task.type === "sql" ? "SQL" : "Command"),
        task.code ? h("pre", { class: "code" }, task.code) : h("p", { class: "muted" }, task.type === "noop" ? "A no-op task runs nothing: it groups dependencies." : "No code."),
        task.code ? h("p", { class: "hint" }, "${…} expressions are rendered for each instance (docs/batch-expressions.md); an instance's Code tab shows the code as run.") : null)),
    h("section", { class: "panel dag-panel" },
      h("div", { class: "panel-head" }, h("h2", {}, "Lineage"),
        h("span", { class: "legend muted" }, `${num(sub.length)} of ${num(tasks.length)} tasks: everything above and below ${task.name}; direct neighbours highlighted`)),
      drawDag(withReads(sub), { focus: task.id, near, onOpen: (t) => { if (t !== task.id) open(t); }, onBackfill: (t) => backfill(t, tasks) })),
    h("section", {}, h("h2", {}, "Recent backfills that ran it"), recent));

  async function loadRecent() {
    try {
      const [ins, started, all] = await Promise.all([
        get("/api/v1/batch/instances" + q({ task: task.id, limit: 5000 })),
        get("/api/v1/batch/backfills" + q({ task: task.id, limit: 50 })),
        get("/api/v1/batch/backfills" + q({ limit: 300 })),
      ]);
      if (!ctx.alive()) return;
      const mine = new Map(); // backfill id → {states}
      for (const i of ins) {
        if (!i.batch_backfill_id) continue;
        if (!mine.has(i.batch_backfill_id)) mine.set(i.batch_backfill_id, {});
        const s = mine.get(i.batch_backfill_id);
        s[i.state] = (s[i.state] || 0) + 1;
      }
      const seen = new Map();
      for (const b of [...started, ...all]) if (mine.has(b.id) || b.task === task.id) seen.set(b.id, b);
      const rows = [...seen.values()].sort((a, b) => b.id - a.id).slice(0, 25);
      const scheduled = ins.filter((i) => !i.batch_backfill_id).slice(-5).reverse();
      replace(recent,
        table([
          { label: "#", class: "num", cell: (b) => h("a", { href: "#/batch/" + b.id }, "#" + b.id) },
          { label: "Backfill", cell: (b) => [h("a", { href: "#/batch/" + b.id }, b.name), b.task !== task.id ? h("div", { class: "hint" }, "from " + b.task) : null] },
          { label: "State", cell: (b) => badge(b.state) },
          { label: "This task's instances", cell: (b) => { const s = mine.get(b.id) || {}; const n = Object.values(s).reduce((a, x) => a + x, 0); return n ? stackBar(s, n) : h("span", { class: "muted" }, "—"); } },
          { label: "Started by", cell: (b) => b.started_by },
          { label: "Created", cell: (b) => h("span", { title: time(b.created_at) + " " + userZone }, ago(b.created_at)) },
        ], rows, { empty: "No backfill has run this task yet. Use Backfill… to start one.", rowAttrs: (b) => ({ dataset: { backfill: b.id } }) }),
        scheduled.length ? [h("h3", {}, "Latest runs of the recurring schedule"), table([
          { label: "Instance", cell: (i) => h("a", { href: "#/instances/" + i.id }, "#" + i.id) },
          { label: "Business time", cell: (i) => h("span", { class: "mono" }, time(i.biz_time, task.timezone).slice(0, 16)) },
          { label: "State", cell: (i) => badge(i.state) },
          { label: "Finished", cell: (i) => time(i.finished_at) },
        ], scheduled)] : null);
    } catch (e) {
      if (ctx.alive()) replace(recent, errorBox(e));
    }
  }
  const reload = throttle(() => { if (ctx.alive()) loadRecent(); }, 1500);
  ctx.onEvent((ev) => { if (ev.kind === "batch_backfill") reload(); });
  await loadRecent();
}
