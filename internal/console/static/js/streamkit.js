// What the stream pages share: the rules of docs/statuses.md for what may be
// initiated and stopped, the confirmation dialogs that act on objects, the
// stream controls (pause, resume, reset) and a few cells. The rules only
// pre-empt: the API stays the judge, and a refusal is shown as it says.
import { enc, get, post } from "./api.js";
import { ago, badge, bytes, dialog, errorBox, field, h, needs, num, readTime, replace, span, time, timeInput, toast, userZone } from "./ui.js";

// The statuses a backfill may be initiated from, and stopped from.
const initiable = new Set(["-", "completed", "stopped", "failed"]);
const stoppable = new Set(["pending", "active"]);

export const streamHref = (stream) => "#/streams/" + enc(stream);
export const objectHref = (stream, object) => streamHref(stream) + "/objects/" + enc(object);
export const streamPath = (stream) => "/api/v1/streams/" + enc(stream);

// rank orders the statuses a run goes through.
export const rank = (status) => ({ pending: 0, active: 1 }[status] ?? 2);

// ahead says whether run a is further along than b (the same run).
export function ahead(a, b) {
  if (rank(a.status) !== rank(b.status)) return rank(a.status) > rank(b.status);
  if (a.rows_read !== b.rows_read) return a.rows_read > b.rows_read;
  if (a.chunks !== b.chunks) return a.chunks > b.chunks;
  return !!a.loaded_at && !b.loaded_at;
}

// list joins names: "a", "a and b", "a, b and 2 more".
export function list(names, max = 3) {
  if (names.length <= 1) return names.join("");
  if (names.length <= max) return names.slice(0, -1).join(", ") + " and " + names[names.length - 1];
  return names.slice(0, max).join(", ") + " and " + (names.length - max) + " more";
}

// initiateBlock says why none of objs (object views) may be initiated, or
// "" when all may.
export function initiateBlock(objs) {
  if (!objs.length) return "Select one or more objects first";
  const busy = objs.filter((o) => !initiable.has(o.status));
  if (!busy.length) return "";
  return "Cannot initiate: the backfill of " + list(busy.map((o) => o.object + " is " + o.status)) +
    ". Stop it first or wait for it to finish.";
}

// stopBlock says why the backfills of objs may not be stopped, or "".
export function stopBlock(objs) {
  if (!objs.length) return "Select one or more objects first";
  const idle = objs.filter((o) => !stoppable.has(o.status));
  if (!idle.length) return "";
  return "Cannot stop: " + list(idle.map((o) => o.object + (o.status === "-" ? " has no backfill running" : " is already " + o.status))) + ".";
}

// backfillAction asks to initiate ("initiate") or stop ("stop") the
// backfills of objs in stream, sends the request on confirmation and
// resolves to the API's answer, or null when the user cancelled. A refusal
// stays in the dialog with the API's message. Initiating shows the
// source's estimate of the work and offers what to backfill (a row filter,
// a column subset, several objects as one run) and the careful-backfill
// options.
export async function backfillAction(kind, stream, objs, streamState) {
  const names = objs.map((o) => o.object);
  const initiate = kind === "initiate";
  const verb = initiate ? "Initiate backfill" : "Stop backfill";
  const title = verb + " of " + (names.length === 1 ? names[0] : names.length + " objects") + "?";
  const notes = h("div", { class: "sk-notes" });
  const scoped = initiate ? scope(objs) : null;
  const describe = () => {
    const parts = [];
    if (initiate) {
      const sc = scoped.state();
      parts.push(h("p", {}, initiateNote(names.length, sc)));
      const again = objs.filter((o) => o.status === "completed");
      if (again.length && !sc.filter && !sc.columns) parts.push(h("p", { class: "muted" }, list(again.map((o) => o.object)) + (again.length === 1 ? " is" : " are") + " already backfilled: each key range of the destination is replaced with the source's rows."));
      if (streamState && streamState !== "running") parts.push(h("p", { class: "sk-note" }, "The stream is " + streamState.replaceAll("_", " ") + ": the backfills stay pending until it runs."));
    } else {
      parts.push(h("p", {}, "The backfill" + (names.length === 1 ? " becomes" : "s become") + " stopped. The rows copied so far stay in the destination; initiating again copies every row anew."));
    }
    notes.replaceChildren(...parts);
  };
  describe();
  if (scoped) scoped.onChange(describe);
  const sizes = new Map(names.map((n) => [n, h("span", { class: "sk-size" })]));
  const items = h("ul", { class: "sk-objects" }, objs.map((o) => h("li", {}, h("span", { class: "sk-objname" }, o.object), h("span", { class: "sk-right" }, sizes.get(o.object), badge(o.status)))));
  const total = h("div", { class: "sk-estimate" });
  const problem = h("div", { class: "sk-problem" });
  const opts = initiate ? careful() : null;
  if (initiate) estimate(stream, names, sizes, total);
  let answer = null;
  const v = await dialog({
    title,
    name: "confirm",
    body: [notes, items, total, scoped && scoped.node, opts && opts.node, problem],
    buttons: [{ label: "Cancel" }, { label: verb, value: "yes", kind: initiate ? "primary" : "danger" }],
    onPress: async () => {
      problem.replaceChildren();
      try {
        const body = { objects: names, ...(scoped ? scoped.values() : {}), ...(opts ? opts.values() : {}) };
        answer = await post(streamPath(stream) + (initiate ? "/backfills" : "/backfills/stop"), body);
        return true;
      } catch (e) {
        problem.replaceChildren(errorBox(e));
        problem.scrollIntoView({ block: "nearest" });
        return false;
      }
    },
  });
  if (v !== "yes") return null;
  const run = initiate && Array.isArray(answer) && answer.length ? answer[0].run_id : 0;
  toast((initiate ? "Initiated the backfill of " : "Stopped the backfill of ") + list(names) + (run ? " as run " + run : ""));
  return answer;
}

// initiateNote says what an initiation copies, given the scope chosen.
function initiateNote(count, sc) {
  const one = count === 1;
  const queue = one ? "" : " Backfills run a few at a time (backfill.max_concurrent); the others wait in this order.";
  if (!sc.filter && !sc.columns) {
    return (one ? "Every row the table holds is copied" : "Every row the tables hold is copied") + " from the source again, chunk by chunk, merged with the live changes." + queue;
  }
  const held = " written over the rows the destination already holds (a row it lacks is not inserted)";
  const s = !sc.columns ? "Only the source rows matching the filter are copied again; the destination's other rows are left alone, even ones the source no longer has." :
    !sc.filter ? "Only the key and the named columns are read from the source and" + held + "; their other columns are left alone." :
      "Only the key and the named columns of the source rows matching the filter are read and" + held + "; other rows and columns are left alone.";
  return s + " Chunk by chunk, merged with the live changes." + queue;
}

// scope is the part of an initiation that narrows it: a row filter, a
// column subset and, for several objects, one run (docs/backfill.md,
// backfilling part of a table). Only what is filled in is sent.
let listSeq = 0;
function scope(objs) {
  const filter = h("input", { type: "text", name: "filter", class: "mono", spellcheck: "false", autocomplete: "off",
    placeholder: "e.g. region = 'eu' AND created_at >= '2026-01-01'", "aria-label": "Filter: a condition on the table's columns" });
  // With one object, its non-key columns are offered: in a datalist that
  // completes the name being typed after the last comma, and as buttons.
  const one = objs.length === 1 ? objs[0] : null;
  const offered = one && one.columns ? one.columns.filter((c) => !c.key).map((c) => c.name) : [];
  const listId = "sk-columns-" + ++listSeq;
  const datalist = h("datalist", { id: listId });
  const columns = h("input", { type: "text", name: "columns", class: "mono", spellcheck: "false", autocomplete: "off",
    list: offered.length ? listId : null, placeholder: offered.length ? offered.slice(0, 3).join(", ") : "name, name",
    "aria-label": "Columns: non-key column names, separated by commas" });
  const chosen = () => columns.value.split(",").map((c) => c.trim()).filter(Boolean);
  const suggest = () => {
    const v = columns.value;
    const cut = v.lastIndexOf(",");
    const prefix = cut < 0 ? "" : v.slice(0, cut + 1).trimEnd() + " ";
    const have = new Set(chosen());
    datalist.replaceChildren(...offered.filter((c) => !have.has(c) || v.slice(cut + 1).trim() === c).map((c) => h("option", { value: prefix + c })));
  };
  const pick = (c) => {
    const have = chosen();
    if (!have.includes(c)) have.push(c);
    columns.value = have.join(", ");
    columns.dispatchEvent(new Event("input"));
    columns.focus();
  };
  const oneRun = objs.length > 1 ? h("input", { type: "checkbox", name: "as_one_run" }) : null;
  const listeners = [];
  const changed = () => { suggest(); for (const fn of listeners) fn(); };
  for (const el of [filter, columns, oneRun]) if (el) el.addEventListener("input", changed);
  suggest();
  const colsHint = one ? (one.columns === null ? "Not streamed: its columns are not known." :
    offered.length ? "Non-key columns of " + one.object + ":" : "It has no non-key column.") :
    "Non-key column names, for every selected object.";
  const node = h("div", { class: "sk-scope" },
    needs("admin", field("Filter", filter, "A condition on the table's columns, as after WHERE (comparisons, AND/OR/NOT, IN, BETWEEN, LIKE, IS NULL, casts and a list of built-in functions; see docs/backfill.md, Row filters): only the rows matching it are backfilled, the destination's other rows are left alone. The estimate above is of whole tables.")),
    h("div", { class: "field sk-colfield", dataset: { need: "admin" } },
      h("label", { class: "field-label", for: listId + "-in" }, "Columns"),
      columns, datalist,
      h("span", { class: "hint" }, "Fill only these columns, on the rows the destination holds; the key is always read. ", colsHint,
        offered.length ? h("span", { class: "sk-colpicks" }, offered.map((c) => h("button", { type: "button", class: "sk-colpick", dataset: { column: c }, title: "Add " + c, onclick: () => pick(c) }, c))) : null)),
    oneRun ? h("label", { class: "check sk-onerun" }, oneRun,
      h("span", {}, "As one run", h("span", { class: "hint" }, "One run id for these backfills, completed when every one is"))) : null);
  columns.id = listId + "-in";
  return {
    node,
    onChange(fn) { listeners.push(fn); },
    state() {
      return { filter: filter.value.trim() !== "", columns: columns.value.trim() !== "" };
    },
    values() {
      const v = {};
      if (filter.value.trim() !== "") v.filter = filter.value.trim();
      // Commas alone send an empty list, which the daemon refuses, saying so.
      if (columns.value.trim() !== "") v.columns = chosen();
      if (oneRun && oneRun.checked) v.as_one_run = true;
      return v;
    },
  };
}

// estimate fills in what the source says the backfill of names would
// read; it never fails the dialog. The total is aria-busy until it is in:
// its arrival grows the dialog, which moves the buttons.
async function estimate(stream, names, sizes, total) {
  total.replaceChildren(h("span", { class: "muted" }, "Estimating the work…"));
  total.setAttribute("aria-busy", "true");
  try {
    const est = await get(streamPath(stream) + "/estimate?" + names.map((n) => "object=" + enc(n)).join("&"));
    for (const o of est.objects || []) {
      const cell = sizes.get(o.object);
      if (!cell) continue;
      if (o.error) cell.replaceChildren(h("span", { class: "muted", title: o.error }, "size unknown"));
      else cell.replaceChildren(rowsText(o.rows, o.rows_exact), o.bytes ? " · " + bytes(o.bytes) : "");
    }
    const parts = [];
    if (est.rows > 0) parts.push(rowsText(est.rows, (est.objects || []).every((o) => o.rows_exact)));
    if (est.bytes > 0) parts.push(bytes(est.bytes));
    const eta = est.seconds > 0 ? "about " + duration(est.seconds) + " at " + num(Math.round(est.rows_per_second)) + " rows/s" : "";
    replace(total,
      h("span", {}, parts.length ? "In all " + parts.join(", ") : "Nothing to size"),
      eta ? h("span", {}, "; " + eta) : null,
      est.basis ? h("div", { class: "muted" }, est.basis) : null);
  } catch (e) {
    total.replaceChildren(h("span", { class: "muted" }, "No estimate: " + e.message));
  } finally {
    total.removeAttribute("aria-busy");
  }
}

function rowsText(rows, exact) {
  if (rows < 0) return "rows unknown (never analyzed)";
  return (exact ? "" : "≈ ") + num(rows) + (rows === 1 ? " row" : " rows");
}

// careful is the optional part of an initiation: a rows/s limit, a sample
// and a start time (docs/api.md, careful backfills).
function careful() {
  const rate = h("input", { type: "number", name: "rows_per_second", min: "0", step: "any", placeholder: "the stream's limit" });
  const sample = h("input", { type: "number", name: "sample_rows", min: "0", step: "1", placeholder: "every row" });
  const at = timeInput("run_at");
  const node = h("details", { class: "sk-careful" },
    h("summary", {}, "Options: rate limit, sample, start time"),
    h("div", { class: "sk-careful-grid" },
      field("Rows per second", rate, "Each backfill's read limit, changeable while it runs"),
      field("Sample rows", sample, "Copy only about the first N rows in key order; the rest of the destination is left alone"),
      field("Start at", at, "YYYY-MM-DD HH:MM in your time zone (" + userZone + "); stays pending until then")));
  return {
    node,
    values() {
      const v = {};
      if (rate.value !== "") v.rows_per_second = Number(rate.value);
      if (sample.value !== "") v.sample_rows = Number(sample.value);
      const start = readTime(at, "Start at");
      if (start) v.start_at = start;
      return v;
    },
  };
}

// startAt is when a backfill was asked to start: start_at, or run_at, its
// deprecated alias, the only name events carry.
const startAt = (r) => r.options && (r.options.start_at || r.options.run_at);

// optionsText says what a backfill was asked for beyond the stream's settings.
export function optionsText(r) {
  const o = r.options || {};
  const parts = [];
  if (o.reason) parts.push(o.reason);
  if (o.sample_rows > 0) parts.push("sample of " + num(o.sample_rows) + " rows");
  if (o.rows_per_second > 0) parts.push(num(o.rows_per_second) + " rows/s");
  if (startAt(r)) parts.push("at " + time(startAt(r)));
  if (o.filter) parts.push("where " + o.filter);
  if (Array.isArray(o.columns)) parts.push("columns " + o.columns.join(", "));
  if (Array.isArray(o.ranges)) parts.push(rangesText(o.ranges));
  return parts.join(" · ");
}

// rangesText names a repair's key ranges (low exclusive, high inclusive,
// none unbounded), as a count, then each range.
export function rangesText(ranges) {
  const key = (k) => (Array.isArray(k) && k.length ? k.length === 1 ? k[0] : "(" + k.join(", ") + ")" : null);
  const one = (r) => {
    const lo = key(r && r.low), hi = key(r && r.high);
    return lo === null && hi === null ? "all keys" : lo === null ? "keys ≤ " + hi : hi === null ? "keys > " + lo : lo + " < key ≤ " + hi;
  };
  return num(ranges.length) + (ranges.length === 1 ? " key range: " : " key ranges: ") + ranges.map(one).join(", ");
}

// verifyText says in words what a run's ending verify found; "" when it
// has none.
export function verifyText(v) {
  if (!v) return "";
  switch (v.status) {
    case "match": return "verify: match";
    case "differ": return "verify: " + num(v.differing_ranges) + " of " + num(v.ranges) + (v.ranges === 1 ? " key range differs" : " key ranges differ");
    case "error": return "verify failed: " + (v.error || "error");
    case "off": return "not verified (backfill.verify is off)";
    case "running": return "verifying…";
  }
  return "verify: " + v.status;
}

// verifyCell shows a run's ending verify: match, differ N of M ranges,
// error (its message as the title), off, running, or – for none.
export function verifyCell(v) {
  if (!v) return h("span", { class: "muted", title: "No verify yet: a run is verified once it completes" }, "–");
  const counts = num(v.source_rows) + " source rows, " + num(v.destination_rows) + " destination rows, " + num(v.ranges) + (v.ranges === 1 ? " key range" : " key ranges") + " compared" +
    (v.finished_at ? "; finished " + time(v.finished_at, undefined, true) : "");
  const text = { match: "match", differ: "differ", error: "error", off: "off", running: "running" }[v.status] || v.status;
  const title = v.status === "error" ? v.error || "error" : v.status === "off" ? "Not verified: the stream's backfill.verify is off" :
    v.status === "running" ? "Verifying what the run covered" : counts;
  return h("span", { class: "sk-verify v-" + String(v.status).replace(/[^a-z]/g, ""), dataset: { verify: v.status }, title },
    text, v.status === "differ" ? h("span", { class: "sk-vn" }, " " + num(v.differing_ranges) + " of " + num(v.ranges) + (v.ranges === 1 ? " range" : " ranges")) : null);
}

// pendingReason is the reason a pending object shows, as the daemon words
// it: when a scheduled backfill starts.
export function pendingReason(r) {
  const at = startAt(r);
  return at && new Date(at) > Date.now() ? "scheduled to start at " + new Date(at).toISOString().replace(/\.\d+Z$/, "Z") : "";
}

// objectReason is the reason an object (named object, as the API writes
// it) shows once run r is its latest; for a verify that differed, as the
// daemon words it.
export function objectReason(r, object) {
  if (r.status === "failed") return r.error || "";
  if (r.status === "pending") return pendingReason(r);
  const v = r.verify;
  if (r.status === "completed" && v && v.status === "differ") {
    return "the verify after backfill " + r.id + " found " + v.differing_ranges + " of " + v.ranges + " key ranges differing: run tidemark verify --repair " +
      r.stream + " " + (object || r.schema + "." + r.table);
  }
  return "";
}

// pairKey identifies an object by its schema and table, whatever the
// quoting of its name.
export const pairKey = (schema, table) => schema + "\u0000" + table;

// streamControls makes the pause, resume and reset buttons of a stream:
// {nodes, update(view)}. The buttons stay in place (a click is never lost
// to a redraw); update sets what they allow. After an action they call
// changed(view).
export function streamControls(view, changed = () => {}) {
  let current = view;
  const act = (what) => async (ev) => {
    const btn = ev.currentTarget;
    const name = current.name;
    if (what === "reset" && !(await confirmReset(name))) return;
    btn.disabled = true;
    try {
      const v = await post(streamPath(name) + "/" + what);
      toast({ pause: "Pausing ", resume: "Resuming ", reset: "Resetting " }[what] + name);
      changed(v);
    } catch (e) {
      toast(e.message, "error");
    } finally {
      update(current);
    }
  };
  const pause = h("button", { type: "button", class: "btn small", dataset: { action: "pause", need: "admin" }, onclick: act("pause") }, "Pause");
  const resume = h("button", { type: "button", class: "btn small", dataset: { action: "resume", need: "admin" }, onclick: act("resume") }, "Resume");
  const reset = h("button", { type: "button", class: "btn small danger", dataset: { action: "reset", need: "admin" }, onclick: act("reset"),
    title: "Recover a stream whose replication slot was lost" }, "Reset…");
  function update(v) {
    current = v;
    const paused = v.state === "paused";
    const resumable = paused || v.state === "failed";
    pause.disabled = paused;
    pause.title = paused ? "The stream is already paused" : "Stop streaming at a committed position; backfills continue from their cursors on resume";
    resume.disabled = !resumable;
    resume.title = resumable ? "Start the " + v.state + " stream again" : "Only a paused or failed stream can be resumed";
    reset.disabled = false;
  }
  update(view);
  return { nodes: [pause, resume, reset], update };
}

async function confirmReset(name) {
  const v = await dialog({
    title: "Reset stream " + name + "?",
    name: "confirm",
    body: [
      h("p", {}, "The stream reconnects. If its replication slot was lost (dropped or invalidated), it re-creates the slot, streams from the new slot's position and ",
        h("strong", {}, "backfills every streamed object again"), ": pending and active backfills are stopped first, since chunks applied before the loss may be stale."),
      h("p", { class: "muted" }, "If the slot is fine, a reset only reconnects the stream. It also ends a pause."),
    ],
    buttons: [{ label: "Cancel" }, { label: "Reset stream", value: "yes", kind: "danger" }],
  });
  return v === "yes";
}

// stateCell shows a stream's state with its reason below.
export function stateCell(view) {
  return [badge(view.state, view.reason), view.reason ? h("div", { class: "sk-reason", title: view.reason }, view.reason) : null];
}

// statusCell shows an object's status; the reason for "-" and for failed
// goes below it.
export function statusCell(o) {
  return [badge(o.status, o.reason || null), o.reason ? h("div", { class: "sk-reason" + (o.status === "failed" ? " bad" : ""), title: o.reason }, o.reason) : null];
}

// columnsCell shows a table's columns as their count and key, with the
// whole list (name, type, key marked) in a popover opened by a click.
export function columnsCell(cols) {
  if (!cols) return h("span", { class: "muted" }, "not streamed");
  if (!cols.length) return h("span", { class: "muted" }, "none");
  const key = cols.filter((c) => c.key).map((c) => c.name);
  return h("details", { class: "sk-cols" },
    h("summary", { title: "Show the columns" }, num(cols.length) + (cols.length === 1 ? " column" : " columns"),
      key.length ? h("span", { class: "sk-type" }, " · key " + key.join(", ")) : null),
    h("ul", { class: "sk-colpop" }, cols.map((c) => h("li", {}, h("span", { class: c.key ? "sk-col key" : "sk-col" }, c.name), " ", h("span", { class: "sk-type" }, c.type)))));
}

// elapsed is a run's duration so far or in all, in seconds.
export function elapsed(r, now = Date.now()) {
  if (!r || !r.started_at) return null;
  const end = r.finished_at ? new Date(r.finished_at) : now;
  return Math.max(0, (end - new Date(r.started_at)) / 1000);
}

// duration formats seconds, with tenths under a minute.
export function duration(s) {
  if (s === null || s === undefined) return "";
  return s < 60 ? s.toFixed(s < 10 ? 1 : 0) + "s" : span(s);
}

// progressBar is a bar over the run's estimated rows, or an indeterminate
// one while the total is unknown.
export function progressBar(r) {
  const bar = h("progress", { class: "sk-bar" });
  if (r.rows_estimate > 0) {
    bar.max = r.rows_estimate;
    bar.value = Math.min(r.rows_read, r.rows_estimate);
    bar.title = num(r.rows_read) + " of about " + num(r.rows_estimate) + " rows read";
  }
  return bar;
}

// progressCell summarises a run for a row of the objects table: progress
// while pending or active, what it did once finished.
export function progressCell(o, r, streamState) {
  if (o.status === "-" || !r) return null;
  const by = r.started_by ? " by " + r.started_by : "";
  switch (r.status) {
    case "pending": {
      const at = startAt(r);
      const waits = at && new Date(at) > Date.now() ? "scheduled for " + time(at) :
        streamState && streamState !== "running" ? "the stream is " + streamState.replaceAll("_", " ") : "";
      return [h("div", {}, "queued", waits ? h("span", { class: "muted" }, " · " + waits) : null),
        h("div", { class: "sk-sub", title: time(r.created_at, undefined, true) }, "initiated " + ago(r.created_at) + by)];
    }
    case "active":
      return [h("div", { class: "sk-figs" }, h("span", {}, h("b", {}, num(r.rows_read)), " read"), h("span", {}, h("b", {}, num(r.rows_written)), " written"),
        h("span", {}, h("b", {}, num(r.chunks)), r.chunks === 1 ? " chunk" : " chunks")),
        progressBar(r),
        h("div", { class: "sk-sub" }, "started " + ago(r.started_at) + by + (r.rows_estimate > 0 ? " · " + Math.floor(100 * Math.min(1, r.rows_read / r.rows_estimate)) + "%" : "") +
          (r.options && r.options.rows_per_second > 0 ? " · limit " + num(r.options.rows_per_second) + " rows/s" : "")),
        speedLine(r)];
    case "completed":
      return [h("div", { class: "sk-sub" }, num(r.rows_written) + " rows · " + num(r.chunks) + (r.chunks === 1 ? " chunk" : " chunks") +
        (r.bytes ? " · " + bytes(r.bytes) : "") + " · " + duration(elapsed(r)) + (r.loaded_at ? "" : " · loading")),
      r.verify ? h("div", { class: "sk-sub sk-vsub v-" + String(r.verify.status).replace(/[^a-z]/g, ""), title: r.verify.error || null, dataset: { verify: r.verify.status } }, verifyText(r.verify)) : null];
    case "stopped":
      return h("div", { class: "sk-sub" }, "stopped after " + num(r.rows_written) + " rows, " + ago(r.finished_at));
    case "failed":
      return h("div", { class: "sk-sub" }, "failed after " + num(r.rows_written) + " rows, " + ago(r.finished_at));
  }
  return null;
}

// speedLine is an active run's read rate since it started and, with an
// estimate of its rows, the time left at that rate.
export function speedLine(r, now = Date.now()) {
  const secs = elapsed(r, now);
  if (!secs || secs < 1 || !r.rows_read) return null;
  const rate = r.rows_read / secs;
  const left = r.rows_estimate > r.rows_read ? (r.rows_estimate - r.rows_read) / rate : null;
  return h("div", { class: "sk-sub sk-speed", dataset: { rate: Math.round(rate) } }, num(Math.round(rate)) + " rows/s" +
    (left !== null ? " · ETA " + duration(left) : r.rows_estimate > 0 ? " · finishing" : ""));
}

// loadedCell says whether the latest backfill's last chunk is committed, or
// which earlier backfill loaded the table when the latest was stopped.
export function loadedCell(o) {
  if (o.status === "-") return h("span", { class: "muted" }, "no");
  if (!o.loaded && o.loaded_by) {
    return h("span", { class: "sk-yes", title: "The latest backfill was stopped; backfill " + o.loaded_by + " loaded the whole table" }, "by backfill " + o.loaded_by);
  }
  return o.loaded ? h("span", { class: "sk-yes", title: "The destination committed the last chunk" }, "yes") :
    h("span", { class: "muted", title: o.status === "completed" ? "Completed: the last chunk goes through the next commit" : "The latest backfill is not loaded yet" }, "no");
}

// fact is one labelled figure of a page's summary strip.
export function fact(label, value, sub, title) {
  return h("div", { class: "sk-fact", title: title || null }, h("div", { class: "k" }, label), h("div", { class: "v" }, value), sub ? h("div", { class: "sub" }, sub) : null);
}
