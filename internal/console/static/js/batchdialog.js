// The backfill dialog: every option of a batch backfill request
// (docs/batch-planner.md), a preview of the plan with times in the task's
// zone and the user's, and the submission (with the confirmation the
// daemon asks for above batch.confirm_above instances).
import { api, APIError, enc, get } from "./api.js";
import { dialog, errorBox, field, h, localTime, num, replace, select, timeInput, toast, userZone } from "./ui.js";

const levels = [["0", "none"], ...Array.from({ length: 10 }, (_, i) => [String(i + 1), String(i + 1) + (i ? " levels" : " level")]), ["-1", "all levels"]];
const coverages = [
  ["descendants", "All descendants", false, "The start task and everything below it."],
  ["children", "Level-1 children and their descendants", true, "Direct children of the start task (IDs or names); each with everything below it."],
  ["projects", "Descendants in projects", true, "Project names: descendants of the start task in those projects."],
  ["outputs", "Descendants with outputs", true, "Output names: descendants of the start task that produce them."],
  ["names", "Descendants with names", true, "Task names among the descendants (an ambiguous name is refused: use IDs)."],
  ["ids", "Descendants with IDs", true, "Task IDs (project.name) downstream of the start task."],
  ["end_points", "Paths to end points", true, "Every task on a path from the start task to each end point."],
  ["start_points", "Paths from start points", true, "Every task on a path from each start point to the start task."],
  ["ancestors", "All ancestors", false, "The start task and everything above it."],
  ["ancestors_descendants", "All ancestors and descendants", false, "The start task, everything above it and everything below it."],
];
const weekdays = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
const dayBased = (t) => /^(daily|weekly|monthly)/.test(t.schedule || "");

// isoInput makes a text input for a date written YYYY-MM-DD.
const isoInput = { type: "text", inputmode: "numeric", placeholder: "YYYY-MM-DD", pattern: "\\d{4}-\\d{2}-\\d{2}", maxlength: "10", size: "10", autocomplete: "off", required: true };
const isoDay = /^\d{4}-\d{2}-\d{2}$/;

// isoDate is the user's local date daysAgo days back, YYYY-MM-DD.
function isoDate(daysAgo) {
  const d = new Date(Date.now() - daysAgo * 86400000);
  return d.getFullYear() + "-" + String(d.getMonth() + 1).padStart(2, "0") + "-" + String(d.getDate()).padStart(2, "0");
}

// A zone's offset from UTC at ms, in ms.
function offset(ms, zone) {
  const p = {};
  for (const x of new Intl.DateTimeFormat("en-US", { timeZone: zone, hourCycle: "h23", year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit", second: "2-digit" }).formatToParts(new Date(ms))) p[x.type] = x.value;
  return Date.UTC(+p.year, +p.month - 1, +p.day, +p.hour, +p.minute, +p.second) - ms;
}

// inZone reads "YYYY-MM-DD HH:MM[ ABBR]" as a wall time of zone and shows it
// in userZone as "YYYY-MM-DD HH:MM".
export function inZone(text, zone, to = userZone) {
  const m = /^(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d)/.exec(text || "");
  if (!m || !zone) return "";
  const wall = Date.UTC(+m[1], +m[2] - 1, +m[3], +m[4], +m[5]);
  let t = wall - offset(wall, zone);
  t = wall - offset(t, zone);
  return fmtWall(t, to);
}

function fmtWall(ms, zone) {
  const p = {};
  for (const x of new Intl.DateTimeFormat("en-US", { timeZone: zone, hourCycle: "h23", year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit" }).formatToParts(new Date(ms))) p[x.type] = x.value;
  return `${p.year}-${p.month}-${p.day} ${p.hour}:${p.minute}`;
}

// datesLabel lists a few dates, or the first and last of many.
export const datesLabel = (ds, sep) => (ds.length > 6 ? `${ds[0]} … ${ds[ds.length - 1]} (${ds.length} dates)` : ds.join(sep));

const lines = (v) => v.split(/[\n,]+/).map((s) => s.trim()).filter(Boolean);

// openBackfillDialog opens the dialog for the start task taskID; tasks is
// every task (fetched when not given). It navigates to the backfill once
// submitted.
export async function openBackfillDialog(taskID, tasks) {
  tasks = tasks || await get("/api/v1/tasks");
  const byID = new Map(tasks.map((t) => [t.id, t]));
  const task = byID.get(taskID);
  if (!task) throw new APIError(404, "not_found", "task " + taskID + " is not configured");
  const subDaily = tasks.some((t) => !dayBased(t));
  const groupsKnown = [...new Set(tasks.map((t) => t.resource_group).filter(Boolean))].sort();

  // Inputs, named after the request's JSON paths.
  const inp = (name, attrs = {}) => h("input", { name, ...attrs });
  const radios = (name, opts, value) => h("div", { class: "seg", role: "radiogroup" }, opts.map(([v, l]) =>
    h("label", {}, h("input", { type: "radio", name, value: v, checked: v === value }), h("span", {}, l))));
  const check = (name, label, hint) => h("label", { class: "check" }, h("input", { type: "checkbox", name }), h("span", {}, label, hint ? h("span", { class: "hint" }, hint) : null));
  const area = (name, placeholder) => h("textarea", { name, rows: 3, placeholder });
  const fld = (path, label, input, hint) => { const f = field(label, input, hint); f.dataset.field = path; return f; };
  // grp is a field holding several inputs: a div, so that its label does not
  // forward clicks to the first of them.
  const grp = (path, label, content, hint) => h("div", { class: "field", dataset: { field: path } }, h("span", { class: "field-label" }, label), content, hint ? h("span", { class: "hint" }, hint) : null);

  const f = {
    name: inp("name", { placeholder: task.name + "_YYYYMMDD_n (automatic)", autocomplete: "off" }),
    when: radios("run_when", [["now", "Now"], ["at", "At a time"]], "now"),
    runAt: timeInput("run_at", { disabled: true }),
    runAtHint: h("span", { class: "hint" }),
    datesMode: radios("dates.mode", [["range", "Range"], ["cycle", "By cycle"], ["custom", "Custom"]], "range"),
    // Text, not type=date: a date input shows the browser locale's form
    // (01/11/2025 or 11.01.2025); these are YYYY-MM-DD like the CLI and the API.
    from: inp("dates.from", { ...isoInput, value: isoDate(1) }),
    to: inp("dates.to", { ...isoInput, value: isoDate(1) }),
    weekdays: h("div", { class: "chips" }, weekdays.map((d, i) => h("label", {}, h("input", { type: "checkbox", name: "dates.weekdays", value: i }), h("span", {}, d)))),
    monthDays: h("div", { class: "chips days" }, [...Array.from({ length: 31 }, (_, i) => [i + 1, String(i + 1)]), [-1, "Last"]].map(([v, l]) =>
      h("label", { title: v === -1 ? "The last day of the month" : null }, h("input", { type: "checkbox", name: "dates.month_days", value: v }), h("span", {}, l)))),
    list: area("dates.list", "2025-01-11\n2025-02-01"),
    trOn: check("time_range.on", "Only cycles starting within a time of day", subDaily ? "minute, hourly and cron tasks, in each task's local time" : "no task here runs more often than daily"),
    trFrom: inp("time_range.from", { type: "time", value: "00:00", disabled: true }),
    trTo: inp("time_range.to", { type: "time", value: "23:59", disabled: true }),
    hourly: select("hourly_scope", [["all", "Daily, weekly and monthly tasks run as selected"], ["within", "…only when their scheduled time is within the range"]], "all"),
    scopeMode: radios("scope.mode", [["task", "This task only"], ["list", "Upstream / downstream levels"], ["mass", "Mass selection"]], "task"),
    up: select("scope.upstream", levels, "0"),
    down: select("scope.downstream", levels, "-1"),
    coverage: select("scope.coverage", coverages.map(([v, l]) => [v, l]), "descendants"),
    coverageHint: h("span", { class: "hint" }),
    values: area("scope.values", "one per line"),
    exTasks: area("scope.exclude_tasks", "task IDs or names, one per line"),
    exOutputs: area("scope.exclude_outputs", "output names, one per line"),
    keepPaused: check("scope.keep_paused", "Keep paused tasks and what is below them"),
    groups: inp("groups", { type: "number", min: 1, max: 12, value: 1, required: true }),
    order: radios("order", [["asc", "Oldest first"], ["desc", "Newest first"]], "asc"),
    waitScheduled: check("wait_scheduled", "Wait for each instance's scheduled time"),
    stopOnFailure: check("stop_on_failure", "Stop the whole backfill at the first failure"),
    dryRunTask: check("dry_run_task", "Dry-run this task", "it succeeds without running; what is below it runs"),
    single: check("single_instance", "One instance for all dates", task.single_instance ? "this task declares single_instance" : "only for tasks that declare single_instance"),
    rg: inp("resource_group", { placeholder: "each task's own", list: "bf-rgs", autocomplete: "off" }),
    paused: select("paused", [["block", "Block: hold back what depends on them"], ["dry_run", "Dry-run: succeed without running"], ["run", "Run normally"]], "block"),
    dryRun: select("dry_run", [["dry_run", "Dry-run: succeed without running"], ["run", "Run normally"]], "dry_run"),
    succeeded: select("succeeded", [["rerun", "Run them again"], ["skip", "Skip dates whose last run succeeded"], ["failed_only", "Only dates that failed or were stopped"]], "rerun"),
    running: select("running", [["wait", "Run after the running one ends"], ["skip", "Leave them out"]], "wait"),
    confirm: h("input", { type: "checkbox", name: "confirm" }),
  };
  const val = (name) => (form.querySelector(`input[name="${name}"]:checked`) || {}).value;
  const box = (cls, ...c) => h("div", { class: cls }, c);

  const rangeBox = box("row2", fld("dates.from", "From", f.from), fld("dates.to", "To (included)", f.to));
  const cycleBox = box("", grp("dates.weekdays", "Days of the week", f.weekdays), grp("dates.month_days", "Days of the month", f.monthDays, "a date is chosen when its weekday or its day of the month is ticked"));
  const customBox = box("", fld("dates.list", "Dates (YYYY-MM-DD, one per line)", f.list));
  const datesCount = h("span", { class: "hint dates-count" });
  const listBox = box("row2", fld("scope.upstream", "Upstream", f.up), fld("scope.downstream", "Downstream", f.down));
  const valuesField = fld("scope.values", "Values", f.values);
  const massBox = box("", fld("scope.coverage", "Coverage", f.coverage), f.coverageHint, valuesField);
  const exclBox = box("", box("row2", fld("scope.exclude_tasks", "Exclude tasks", f.exTasks), fld("scope.exclude_outputs", "Exclude outputs", f.exOutputs)), f.keepPaused);
  const errors = h("div", { class: "bf-errors" });

  const form = h("div", { class: "bf-form" },
    errors,
    h("fieldset", { dataset: { field: "dates" } }, h("legend", {}, "Data timestamps"),
      h("div", { class: "seg-row" }, f.datesMode, datesCount), rangeBox, cycleBox, customBox,
      h("p", { class: "hint" }, "Dates are read in each task's own time zone.")),
    subDaily ? h("fieldset", { dataset: { field: "time_range" } }, h("legend", {}, "Time of day"),
      f.trOn, h("div", { class: "row2" }, fld("time_range.from", "From", f.trFrom), fld("time_range.to", "To (included)", f.trTo)),
      fld("hourly_scope", "Day-based tasks", f.hourly))
      : h("fieldset", { dataset: { field: "time_range" }, class: "muted-set" }, h("legend", {}, "Time of day"), h("p", { class: "hint" }, "No task runs more often than daily: there is no time of day to pick.")),
    h("fieldset", { dataset: { field: "scope" } }, h("legend", {}, "Tasks"),
      f.scopeMode, listBox, massBox, exclBox),
    h("fieldset", {}, h("legend", {}, "Run"),
      h("div", { class: "row2" }, fld("groups", "Concurrency groups (1–12)", f.groups, "dates split into lanes that run side by side"), grp("order", "Order", f.order)),
      f.waitScheduled, f.stopOnFailure, f.dryRunTask, f.single,
      fld("resource_group", "Resource group", f.rg, "runs every instance in this group instead of each task's"),
      h("datalist", { id: "bf-rgs" }, groupsKnown.map((g) => h("option", { value: g })))),
    h("fieldset", {}, h("legend", {}, "Policies"),
      fld("paused", "Paused tasks", f.paused), fld("dry_run", "Dry-run tasks", f.dryRun),
      fld("succeeded", "Dates that already succeeded", f.succeeded), fld("running", "Dates with a run in progress", f.running)),
    h("fieldset", {}, h("legend", {}, "Name and start"),
      fld("name", "Name", f.name),
      grp("run_at", "Start", h("div", { class: "seg-row" }, f.when, f.runAt), f.runAtHint)));

  const preview = h("div", { class: "bf-preview empty-preview" },
    h("div", { class: "placeholder" }, h("strong", {}, "Preview"), h("p", {}, "Press Preview to see every instance the backfill would run: its group and date, what it waits for, and its times in the task's zone and in yours (" + userZone + ").")));

  const intro = h("div", { class: "bf-intro" },
    h("span", { class: "bf-task" }, task.id), h("span", { class: "muted" }, ` · ${task.type} · ${task.schedule} · ${task.timezone}`),
    task.paused ? h("span", { class: "badge s-paused" }, "paused") : null, task.dry_run ? h("span", { class: "badge s-dry_run" }, "dry-run") : null);

  // Showing and hiding what the modes select.
  function sync() {
    const dm = val("dates.mode");
    rangeBox.hidden = dm === "custom";
    cycleBox.hidden = dm !== "cycle";
    customBox.hidden = dm !== "custom";
    const sm = val("scope.mode");
    listBox.hidden = sm !== "list";
    massBox.hidden = sm !== "mass";
    exclBox.hidden = sm === "task";
    const cov = coverages.find((c) => c[0] === f.coverage.value);
    valuesField.hidden = !cov[2];
    f.coverageHint.textContent = cov[3];
    f.runAt.disabled = val("run_when") !== "at";
    const tr = f.trOn.querySelector("input");
    tr.disabled = !subDaily;
    f.trFrom.disabled = f.trTo.disabled = f.hourly.disabled = !tr.checked;
    f.runAtHint.textContent = "";
    if (!f.runAt.disabled && localTime(f.runAt.value) && task.timezone !== userZone) {
      f.runAtHint.textContent = "= " + fmtWall(localTime(f.runAt.value).getTime(), task.timezone) + " in the task's zone (" + task.timezone + ")";
    }
    datesCount.textContent = "";
    if (dm === "range" && f.from.value && f.to.value) {
      const n = Math.round((Date.parse(f.to.value) - Date.parse(f.from.value)) / 86400000) + 1;
      datesCount.textContent = n > 0 ? num(n) + (n === 1 ? " date" : " dates") : "";
    } else if (dm === "custom") {
      const n = new Set(lines(f.list.value)).size;
      datesCount.textContent = n ? num(n) + (n === 1 ? " date" : " dates") : "";
    }
  }
  form.addEventListener("change", () => { sync(); stale(); });
  form.addEventListener("input", () => { sync(); stale(); });

  function stale() {
    if (preview.dataset.count !== undefined) preview.classList.add("stale");
  }

  // build reads the form into a request; a client-side refusal names its
  // field like the daemon's.
  function build() {
    const bad = (field, msg) => { throw new APIError(400, "bad_request", field + ": " + msg); };
    const r = { task: task.id };
    if (f.name.value.trim()) r.name = f.name.value.trim();
    if (val("run_when") === "at") {
      if (!f.runAt.value.trim()) bad("run_at", "enter the date and time to start at, as YYYY-MM-DD HH:MM in your time zone");
      const at = localTime(f.runAt.value);
      if (!at) bad("run_at", JSON.stringify(f.runAt.value.trim()) + " is not a time as YYYY-MM-DD HH:MM: write it like " + isoDate(0) + " 18:30");
      r.start_at = at.toISOString();
    }
    const dm = val("dates.mode");
    r.dates = { mode: dm };
    if (dm === "custom") {
      r.dates.list = [...new Set(lines(f.list.value))];
      if (!r.dates.list.length) bad("dates.list", "enter at least one date");
    } else {
      if (!f.from.value.trim()) bad("dates.from", "enter the first date, as YYYY-MM-DD");
      if (!f.to.value.trim()) bad("dates.to", "enter the last date, as YYYY-MM-DD (the same as the first for one day)");
      for (const [path, input] of [["dates.from", f.from], ["dates.to", f.to]]) {
        if (!isoDay.test(input.value.trim())) bad(path, JSON.stringify(input.value.trim()) + " is not a date as YYYY-MM-DD: write it like " + isoDate(1));
      }
      r.dates.from = f.from.value.trim();
      r.dates.to = f.to.value.trim();
    }
    if (dm === "cycle") {
      r.dates.weekdays = [...f.weekdays.querySelectorAll("input:checked")].map((i) => +i.value);
      r.dates.month_days = [...f.monthDays.querySelectorAll("input:checked")].map((i) => +i.value);
      if (!r.dates.weekdays.length && !r.dates.month_days.length) bad("dates.weekdays", "tick days of the week or of the month");
    }
    if (f.trOn.querySelector("input").checked) {
      r.time_range = { from: f.trFrom.value, to: f.trTo.value };
      r.hourly_scope = f.hourly.value;
    }
    const sm = val("scope.mode");
    r.scope = { mode: sm };
    if (sm === "list") {
      r.scope.upstream = +f.up.value;
      r.scope.downstream = +f.down.value;
    }
    if (sm === "mass") {
      r.scope.coverage = f.coverage.value;
      if (!valuesField.hidden) r.scope.values = lines(f.values.value);
    }
    if (sm !== "task") {
      const et = lines(f.exTasks.value), eo = lines(f.exOutputs.value);
      if (et.length) r.scope.exclude_tasks = et;
      if (eo.length) r.scope.exclude_outputs = eo;
      if (f.keepPaused.querySelector("input").checked) r.scope.keep_paused = true;
    }
    const groups = Number(f.groups.value);
    if (!Number.isInteger(groups) || groups < 1 || groups > 12) bad("groups", "use a whole number from 1 to 12");
    r.groups = groups;
    r.order = val("order");
    for (const [k, el] of [["wait_scheduled", f.waitScheduled], ["stop_on_failure", f.stopOnFailure], ["dry_run_task", f.dryRunTask], ["single_instance", f.single]]) {
      if (el.querySelector("input").checked) r[k] = true;
    }
    if (f.rg.value.trim()) r.resource_group = f.rg.value.trim();
    r.paused = f.paused.value;
    r.dry_run = f.dryRun.value;
    r.succeeded = f.succeeded.value;
    r.running = f.running.value;
    if (f.confirm.checked) r.confirm = true;
    return r;
  }

  // showError puts a refusal next to the form and marks its field.
  function showError(e) {
    for (const el of form.querySelectorAll(".invalid")) el.classList.remove("invalid");
    for (const el of form.querySelectorAll(".field-error")) el.remove();
    replace(errors);
    if (!e) return;
    errors.append(errorBox(e));
    const m = /^([a-z_]+(?:\.[a-z_]+)*)(?:\[\d+\])?: /.exec(e.message || "");
    if (!m) return;
    let path = m[1], el = null;
    while (path && !(el = form.querySelector(`[data-field="${path}"]`))) path = path.includes(".") ? path.slice(0, path.lastIndexOf(".")) : "";
    if (el && !el.hidden) {
      el.classList.add("invalid");
      el.append(h("span", { class: "field-error" }, e.message.slice(m[0].length)));
      el.scrollIntoView({ block: "nearest" });
    }
  }

  function showPlan(p) {
    preview.classList.remove("empty-preview", "stale");
    preview.dataset.count = p.count;
    const stat = (k, v) => h("div", { class: "stat" }, h("div", { class: "v" }, v), h("div", { class: "k" }, k));
    const byIndex = new Map(p.instances.map((i) => [i.index, i]));
    const zoneOf = (id) => (byID.get(id) || {}).timezone || "UTC";
    const groups = new Map();
    for (const i of p.instances) {
      if (!groups.has(i.group)) groups.set(i.group, new Map());
      const g = groups.get(i.group);
      if (!g.has(i.date)) g.set(i.date, []);
      g.get(i.date).push(i);
    }
    const head = h("tr", {}, h("th", {}, "#"), h("th", {}, "Task"),
      h("th", {}, "Business time", h("small", {}, "task's zone")), h("th", {}, "Business time", h("small", {}, p.user_timezone)),
      h("th", {}, "Scheduled", h("small", {}, "task's zone")), h("th", {}, "Scheduled", h("small", {}, p.user_timezone)), h("th", {}, "Waits for"));
    const row = (i) => h("tr", { dataset: { index: i.index, task: i.task } },
      h("td", { class: "num muted" }, "#" + i.index),
      h("td", {}, h("span", { class: "t-name", title: i.task + (i.resource_group ? " · resource group " + i.resource_group : "") }, i.task),
        i.mode !== "run" ? h("span", { class: "badge s-" + i.mode, title: i.reason || null }, i.mode.replace("_", "-")) : null),
      h("td", { class: "mono" }, i.biz_time), h("td", { class: "mono" }, inZone(i.biz_time, zoneOf(i.task), p.user_timezone)),
      h("td", { class: "mono" }, i.scheduled), h("td", { class: "mono" }, (i.scheduled_user || "").replace(/ [^ ]+$/, "")),
      h("td", { class: "waits" }, (i.waits_for || []).map((w) => { const d = byIndex.get(w); return h("span", { class: "dep", title: d ? d.task + " " + d.date : null }, "#" + w); }),
        i.seq > 0 ? h("span", { class: "dep gate", title: "every instance of the previous date of group " + i.group }, "prev. date") : null));
    replace(preview,
      h("div", { class: "stats" }, stat("instances", num(p.count)), stat("skipped", num(p.skipped)), stat("dates", num((p.dates || []).length)),
        stat("groups", num((p.groups || []).length)), stat("tasks", num((p.tasks || []).length))),
      h("div", { class: "plan-meta" }, h("span", {}, h("span", { class: "muted" }, "Name "), p.name), h("span", {}, h("span", { class: "muted" }, "Starts "), new Date(p.start_at) > Date.now() + 60000 ? fmtWall(Date.parse(p.start_at), userZone) + " (" + userZone + ")" : "now"),
        h("span", { class: "plan-tasks", title: (p.tasks || []).join("\n") }, h("span", { class: "muted" }, "Tasks "), (p.tasks || []).join(", "))),
      (p.warnings || []).length ? h("ul", { class: "warnings" }, p.warnings.map((w) => h("li", {}, w))) : null,
      p.truncated ? h("p", { class: "hint" }, `Showing the first ${num(p.instances.length)} of ${num(p.count)} instances.`) : null,
      h("div", { class: "plan-groups" }, [...groups].map(([g, dates]) => h("section", { class: "plan-group", dataset: { group: g } },
        h("h4", {}, "Group " + g, h("span", { class: "muted" }, " · " + datesLabel([...dates.keys()], ", "))),
        h("table", { class: "plan" }, h("thead", {}, head.cloneNode(true)),
          [...dates].map(([d, ins]) => h("tbody", {}, h("tr", { class: "date-row" }, h("td", { colspan: 7 }, d, h("span", { class: "muted" }, ` · ${ins.length} instance${ins.length === 1 ? "" : "s"}`))), ins.map(row))))))));
  }

  function showConfirm(e) {
    for (const old of preview.querySelectorAll(".confirm-box")) old.remove();
    const go = h("button", { type: "button", class: "btn primary", dataset: { action: "confirm-submit", need: "operator" }, onclick: () => {
      f.confirm.checked = true;
      dlg().querySelector('button[data-action="submit"]').click();
    } }, "Confirm and submit");
    preview.prepend(h("div", { class: "confirm-box", role: "alert" },
      h("strong", {}, "This backfill needs confirmation"), h("p", {}, e.message.replace(/^confirm: (.)/, (_, c) => c.toUpperCase()) + "."),
      h("label", { class: "check" }, f.confirm, h("span", {}, "I have checked the dates and the selection")), go));
  }

  const dlg = () => document.querySelector('dialog[data-dialog="backfill"]');
  let submitted = null;
  const tz = "?tz=" + enc(userZone);
  const body = [intro, h("div", { class: "bf-cols" }, form, preview)];
  sync();
  const pressed = await dialog({
    title: "Backfill", name: "backfill", wide: true, body,
    buttons: [{ label: "Cancel" }, { label: "Preview", value: "preview" }, { label: "Submit", value: "submit", kind: "primary" }],
    onPress: async (v) => {
      let req;
      try {
        req = build();
      } catch (e) {
        showError(e);
        return false;
      }
      showError(null);
      preview.classList.add("loading");
      preview.setAttribute("aria-busy", "true");
      try {
        if (v === "preview") {
          showPlan(await api("POST", "/api/v1/batch/preview" + tz, req));
          return false;
        }
        submitted = await api("POST", "/api/v1/batch/backfills" + tz, req);
        return true;
      } catch (e) {
        if (e.code === "confirm") showConfirm(e);
        else showError(e);
        return false;
      } finally {
        preview.classList.remove("loading");
        preview.removeAttribute("aria-busy");
      }
    },
  });
  if (pressed === "submit" && submitted) {
    const b = submitted.batch_backfill;
    toast(`Batch backfill #${b.id} ${b.name} submitted: ${num(submitted.plan.count)} instances`);
    location.hash = "#/batch/" + b.id;
  }
  return submitted;
}
