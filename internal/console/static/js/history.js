// One object of a stream: its status, its columns and every backfill run
// of it, newest first, updated live from pushed events: each brings a
// re-read of the object, so that its counters change with its runs.
import { api, APIError, get, q } from "./api.js";
import { ago, badge, bytes, dialog, errorBox, field, h, num, page, refresher, replace, throttle, time, toast } from "./ui.js";
import {
  ahead, backfillAction, fact, duration, elapsed, initiateBlock, loadedCell, objectReason, optionsText, progressBar, rangesText, rank, statusCell, stopBlock,
  streamHref, streamPath, verifyCell,
} from "./streamkit.js";

export async function objectPage(main, [name, object], ctx) {
  const s = {
    view: null,
    obj: null, // the object view, null when the stream has no such object
    runs: new Map(), // id → run
    seen: new Map(), // id → when an initiation's answer brought it
    held: [], // pushed runs shown with the next answer of the API, which has their counters
    touched: -1, // when an event last changed the object
    rows: new Map(), // id → {tr, err, sig}
  };

  const initBtn = h("button", { type: "button", class: "btn primary", dataset: { action: "initiate", need: "operator" }, disabled: true, onclick: () => act("initiate") }, "Initiate backfill");
  const stopBtn = h("button", { type: "button", class: "btn danger", dataset: { action: "stop", need: "operator" }, disabled: true, onclick: () => act("stop") }, "Stop backfill");
  const rateBtn = h("button", { type: "button", class: "btn", dataset: { action: "rate", need: "operator" }, disabled: true, onclick: () => setRate() }, "Rate limit…");
  const content = page(main, { title: object, crumbs: [["Streams", "#/streams"], [name, streamHref(name)]], actions: [rateBtn, initBtn, stopBtn] });
  const facts = h("div", { class: "sk-facts" });
  const cols = h("div", { class: "sk-colpanel" });
  const tbody = h("tbody");
  const cols1 = [
    ["ID", "num"], ["Status", "sk-runstatus"],
    ["Verify", "sk-verifycol", "The verify that ended the backfill: source and destination compared over what it covered, key range by key range"],
    ["Started by"], ["Created", "sk-time"], ["Started", "sk-time"], ["Finished", "sk-time"], ["Loaded", "sk-time"], ["Duration", "num"],
    ["Read", "num", "Rows read from the source"], ["Written", "num", "Rows written to the destination after the merge with the live changes"],
    ["Removed", "num", "Destination rows deleted because the source no longer had them"], ["Bytes", "num", "Bytes read from the source"],
    ["Chunks", "num", "Chunks committed in the destination"], ["Retries", "num", "Chunk reads repeated after an error or for a fresh merge"],
    ["Conflicts", "num", "Live changes merged into chunks (window conflicts)"],
  ];
  const grid = h("table", { class: "grid sk-runs" },
    h("thead", {}, h("tr", {}, cols1.map(([l, c, t]) => h("th", { class: c || null, title: t || null }, l)))), tbody);
  const empty = h("p", { class: "empty" }, "No backfill of " + object + " yet.");
  const notice = h("div", { class: "sk-notice", hidden: true });
  const missing = h("div", { class: "error-box", hidden: true });
  // What the object's backfills caused: re-runs of the cycles of tasks
  // reading it whose rows they changed (docs/lineage.md).
  const caused = h("div", { class: "sk-caused" });
  content.append(missing, facts, cols, h("h3", { class: "sk-h" }, "Backfills"), h("div", { class: "sk-scroll" }, grid), empty, notice, caused);

  // An answer older than one already shown is dropped.
  let asked = 0, shown = 0;
  async function load() {
    const n = ++asked;
    const askedAt = performance.now();
    const pushed = s.held.splice(0);
    // The counters are read after the runs, so that they count at least
    // what the runs shown have written.
    const [view, objs, runs] = await Promise.all([
      get(streamPath(name)),
      get("/api/v1/backfills" + q({ stream: name, object, limit: 1000 })),
    ]).then(async ([v, rs]) => [v, await get(streamPath(name) + "/objects"), rs]).catch((e) => {
      // The error page of an unknown object leads back to its stream.
      if (!s.view && e.unknown && e.unknown.some((u) => u.kind === "object")) e.back = ["stream " + name, streamHref(name)];
      throw e;
    });
    if (!ctx.alive() || n < shown) return;
    shown = n;
    const o = objs.find((x) => x.object === object) || null;
    // An unknown object is an error page, not an empty object page; one
    // that disappears later (a reset) keeps its page with a notice.
    if (!o && !s.view) {
      const err = new APIError(404, "not_found", "no object " + object + " in stream " + name + ": objects appear once the stream has discovered its tables, and only those its include patterns select.");
      err.back = ["stream " + name, streamHref(name)];
      throw err;
    }
    s.view = view;
    if (!(s.obj && s.touched > askedAt && (s.obj.backfill_id || 0) >= ((o && o.backfill_id) || 0))) s.obj = o;
    else s.obj = { ...o, status: s.obj.status, reason: s.obj.reason, loaded: s.obj.loaded, backfill_id: s.obj.backfill_id };
    for (const r of runs) {
      if ((s.seen.get(r.id) ?? -1) <= askedAt) s.runs.set(r.id, r);
    }
    for (const r of pushed) if (!s.runs.has(r.id) || ahead(r, s.runs.get(r.id))) s.runs.set(r.id, r);
    render();
    loadCaused();
  }

  async function loadCaused() {
    let ps;
    try {
      ps = await get("/api/v1/lineage/proposals");
    } catch {
      return; // the runs above say what matters; this is an aside
    }
    if (!ctx.alive()) return;
    const lines = [];
    for (const p of ps.slice().reverse()) {
      for (const c of p.causes.filter((c) => c.stream === name && c.object === object)) {
        const what = p.batch_backfill_id
          ? ["caused batch backfill ", h("a", { href: "#/batch/" + p.batch_backfill_id }, "#" + p.batch_backfill_id), " of " + p.task]
          : ["caused proposal #" + p.id + " (" + p.state + ") to re-run " + p.task];
        lines.push(h("li", { dataset: { backfill: c.backfill_id, proposal: p.id } }, c.backfill_id ? "Backfill #" + c.backfill_id + " " : "Late data ", ...what,
          ` for ${p.cycles.length} ${p.cycles.length === 1 ? "cycle" : "cycles"}: `, h("span", { class: "mono" }, p.cycles.join(", ")),
          " (", h("a", { href: "#/lineage" }, "lineage"), ")"));
      }
    }
    replace(caused, ...(lines.length ? [h("h3", { class: "sk-h" }, "Re-runs caused"), h("ul", {}, lines)] : []));
  }

  const refresh = refresher(ctx, notice, load);
  const refreshSoon = throttle(refresh, 800);
  const showPushed = throttle(refresh, 250);

  function render() {
    renderHead();
    renderRuns();
  }

  function renderHead() {
    const o = s.obj;
    missing.hidden = !!o;
    if (!o) {
      replace(missing, object + " is not an object of stream " + name + ": objects appear once the stream has discovered its tables, and only those its include patterns select.");
    }
    const runs = [...s.runs.values()];
    const done = runs.filter((r) => r.status === "completed");
    const lastLoaded = done.map((r) => r.loaded_at).filter(Boolean).sort().pop();
    replace(facts,
      o ? fact("Status", h("div", { class: "sk-state" }, statusCell(o))) : null,
      o ? fact("Loaded", loadedCell(o), lastLoaded ? "loaded " + ago(lastLoaded) : "", time(lastLoaded, undefined, true)) : null,
      o ? fact("Events 7d", num(o.events_7d), num(o.events_loaded_7d) + " loaded") : null,
      o ? fact("Bytes 30d", bytes(o.bytes_30d)) : null,
      fact("Backfills", num(runs.length), runs.length ? num(done.length) + " completed" : ""),
      fact("Stream", h("a", { href: streamHref(name) }, name), s.view.state.replaceAll("_", " ")),
    );
    if (o && o.columns && o.columns.length) {
      replace(cols, h("div", { class: "k" }, "Columns (" + o.columns.length + ")"),
        h("div", { class: "sk-chips" }, o.columns.map((c) => h("span", { class: c.key ? "sk-chip key" : "sk-chip", title: c.key ? "row key column" : null },
          h("span", { class: "n" }, c.name), h("span", { class: "t" }, c.type), c.key ? h("span", { class: "kk" }, "key") : null))));
    } else {
      replace(cols, h("div", { class: "k" }, "Columns"), h("div", { class: "muted" }, o && o.columns === null ? "Not streamed: the stream cannot key this table." : "Not described yet."));
    }
    const sel = o ? [o] : [];
    const ib = o ? initiateBlock(sel) : "Not an object of the stream";
    const sb = o ? stopBlock(sel) : "Not an object of the stream";
    initBtn.disabled = !!ib;
    initBtn.title = ib || "Initiate a backfill of " + object;
    stopBtn.disabled = !!sb;
    stopBtn.title = sb || "Stop the backfill of " + object;
    const run = latestRun();
    rateBtn.disabled = !run;
    rateBtn.title = run ? "Change the read limit of backfill #" + run.id + " without stopping it" : "Only a pending or active backfill's limit can be changed";
  }

  // latestRun is the object's pending or active run, if any.
  function latestRun() {
    const r = s.obj && s.obj.backfill_id ? s.runs.get(s.obj.backfill_id) : null;
    return r && rank(r.status) < 2 ? r : null;
  }

  async function setRate() {
    const run = latestRun();
    if (!run) return;
    const now = run.options && run.options.rows_per_second;
    const input = h("input", { type: "number", name: "rows_per_second", min: "0", step: "any", value: now ? String(now) : "", placeholder: "the stream's limit" });
    const problem = h("div", { class: "sk-problem" });
    let updated = null;
    const v = await dialog({
      title: "Rate limit of backfill #" + run.id,
      name: "rate",
      body: [h("p", {}, "The backfill reads at most this many rows per second from now on, without stopping. Empty or 0: the stream's backfill.rows_per_second."),
        field("Rows per second", input), problem],
      buttons: [{ label: "Cancel" }, { label: "Set limit", value: "yes", kind: "primary" }],
      onPress: async () => {
        problem.replaceChildren();
        try {
          updated = await api("PATCH", "/api/v1/backfills/" + run.id, { rows_per_second: input.value === "" ? 0 : Number(input.value) });
          return true;
        } catch (e) {
          problem.replaceChildren(errorBox(e));
          return false;
        }
      },
    });
    if (v !== "yes" || !updated || !ctx.alive()) return;
    toast("Backfill #" + run.id + (updated.options && updated.options.rows_per_second ? " reads at most " + num(updated.options.rows_per_second) + " rows/s" : " reads at the stream's limit"));
    s.runs.set(run.id, { ...s.runs.get(run.id), options: updated.options });
    render();
  }

  function renderRuns() {
    const ids = [...s.runs.keys()].sort((a, b) => b - a);
    let prev = null;
    for (const id of ids) {
      let row = s.rows.get(id);
      if (!row) {
        row = { tr: h("tr", { dataset: { backfill: String(id) } }), err: h("tr", { class: "sk-errrow", hidden: true }, h("td", { colspan: String(cols1.length) })), sig: "" };
        s.rows.set(id, row);
      }
      fillRun(row, s.runs.get(id));
      const want = prev ? prev.nextSibling : tbody.firstChild;
      if (want !== row.tr) tbody.insertBefore(row.tr, want);
      if (row.tr.nextSibling !== row.err) tbody.insertBefore(row.err, row.tr.nextSibling);
      prev = row.err;
    }
    grid.hidden = !ids.length;
    empty.hidden = !!ids.length;
  }

  function fillRun(row, r) {
    const live = rank(r.status) < 2;
    const sig = JSON.stringify([r, live ? Math.floor(Date.now() / 1000) : 0]);
    if (sig === row.sig) return;
    row.sig = sig;
    const day = time(r.created_at).slice(0, 10);
    const when = (iso) => {
      if (!iso) return h("span", { class: "muted" }, "–");
      const t = time(iso);
      return h("span", { title: time(iso, undefined, true) + " · " + ago(iso) }, t.slice(0, 10) === day ? t.slice(11) : t);
    };
    const d = elapsed(r);
    row.tr.dataset.status = r.status;
    // The cells stay; what they hold is redrawn.
    if (!row.tr.cells.length) for (const [, c] of cols1) row.tr.append(h("td", { class: c || null }));
    const cells = [
      [h("span", { class: "sk-id" }, "#" + r.id), r.run_id ? h("div", { class: "sk-sub sk-runid", dataset: { run: String(r.run_id) }, title: "Initiated with other objects as one run: GET /api/v1/runs/" + r.run_id }, "run " + r.run_id) : null],
      [badge(r.status), r.status === "active" ? progressBar(r) : null],
      verifyCell(r.verify),
      [r.started_by, optionLines(r)],
      h("span", { title: time(r.created_at, undefined, true) + " · " + ago(r.created_at) }, h("span", { class: "sk-date" }, day), " ", time(r.created_at).slice(11)),
      when(r.started_at),
      when(r.finished_at),
      r.loaded_at ? when(r.loaded_at) : r.status === "completed" ? h("span", { class: "muted" }, "loading") : when(null),
      d === null ? h("span", { class: "muted" }, "–") : duration(d),
      num(r.rows_read),
      num(r.rows_written),
      zero(r.rows_removed, num),
      zero(r.bytes, bytes),
      num(r.chunks),
      zero(r.retries, num),
      zero(r.window_conflicts, num),
    ];
    cells.forEach((c, i) => replace(row.tr.cells[i], c));
    row.err.hidden = !r.error;
    replace(row.err.firstChild, r.error ? [h("span", { class: "sk-errlabel" }, "error"), " ", r.error] : null);
  }

  async function act(kind) {
    if (!s.obj) return;
    const answer = await backfillAction(kind, name, [s.obj], s.view.state);
    if (!answer || !ctx.alive()) return;
    if (kind === "initiate" && Array.isArray(answer)) {
      for (const r of answer) if (!s.runs.has(r.id)) apply(r);
    }
    refreshSoon();
  }

  // apply shows at once a run the API answered an initiation with.
  function apply(b) {
    const now = performance.now();
    s.runs.set(b.id, b);
    s.seen.set(b.id, now);
    if (s.obj && !(s.obj.backfill_id && b.id < s.obj.backfill_id)) {
      s.obj = { ...s.obj, backfill_id: b.id, status: b.status, loaded: b.status === "completed" && !!b.loaded_at, reason: objectReason(b, s.obj.object) };
      s.touched = now;
    }
    render();
  }

  // A run is this object's when its schema and table are the object's
  // (the object's name may be quoted; the runs listed for it tell).
  function mine(b) {
    if (s.obj) return b.schema === s.obj.schema && b.table === s.obj.table;
    const known = [...s.runs.values()][0];
    return known ? b.schema === known.schema && b.table === known.table : b.schema + "." + b.table === object;
  }

  ctx.onEvent((ev) => {
    if (ev.stream !== name || !s.view) return;
    if (ev.backfill && mine(ev.backfill)) {
      s.held.push(ev.backfill);
      showPushed();
    }
    if (ev.state) {
      s.view = { ...s.view, state: ev.state.state, reason: ev.state.reason, updated_at: ev.state.updated_at };
      renderHead();
    }
  });

  await load();
  ctx.every(5000, refresh);
  ctx.every(1000, () => {
    for (const [id, row] of s.rows) {
      const r = s.runs.get(id);
      if (rank(r.status) < 2) fillRun(row, r);
    }
  });
}

const zero = (n, f) => (n ? f(n) : h("span", { class: "muted" }, "0"));

// optionLines shows what a run was asked for under who started it: the
// careful options on one line, then its filter, its columns and a repair's
// key ranges each on a line of its own (the whole text as the title).
function optionLines(r) {
  const o = r.options || {};
  const rest = optionsText({ options: { ...o, filter: undefined, columns: undefined, ranges: undefined } });
  const line = (cls, label, text) => h("div", { class: "sk-sub " + cls, title: text }, h("span", { class: "sk-optk" }, label), " ", text);
  return [
    rest ? h("div", { class: "sk-sub", title: rest }, rest) : null,
    o.filter ? line("sk-optfilter", "where", o.filter) : null,
    Array.isArray(o.columns) ? line("sk-optcols", "columns", o.columns.join(", ")) : null,
    Array.isArray(o.ranges) ? h("div", { class: "sk-sub sk-optranges", title: rangesText(o.ranges) }, rangesText(o.ranges)) : null,
  ];
}
