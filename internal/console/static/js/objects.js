// A stream's Objects tab: every object (source table) of the stream with
// its backfill status, and the initiate and stop actions on a selection.
// Pushed backfill events update the rows in place; the list is re-read
// every few seconds for the 7-day counters and for anything an event missed.
import { get, q } from "./api.js";
import { ago, bytes, h, num, page, refresher, replace, select, throttle, time } from "./ui.js";
import {
  backfillAction, fact, columnsCell, initiateBlock, list, loadedCell, objectHref, objectReason, pairKey, progressCell, rank,
  stateCell, statusCell, stopBlock, streamControls, streamPath,
} from "./streamkit.js";

const statuses = ["-", "pending", "active", "completed", "stopped", "failed"];

export async function streamPage(main, [name], ctx) {
  const s = {
    view: null,
    order: [], // object names, as the API orders them
    objects: new Map(), // object name → object view
    byPair: new Map(), // pairKey(schema, table) → object name
    runs: new Map(), // backfill id → run
    touched: new Map(), // object name → when an event last changed it (performance.now())
    runSeen: new Map(), // backfill id → when an event last brought it
    stateSeen: -1, // when an event last brought the stream's state
    controls: null, // the pause, resume and reset buttons
    selected: new Set(),
    anchor: null, // the row last clicked, for shift-click ranges
    rows: new Map(), // object name → {tr, check, cells, sig}
  };

  const controls = h("span", { class: "actions" });
  const content = page(main, { title: name, crumbs: [["Streams", "#/streams"], [name]], actions: [controls] });

  const facts = h("div", { class: "sk-facts" });
  const filter = h("input", { type: "search", class: "sk-filter", placeholder: "Filter objects", "aria-label": "Filter objects by name", oninput: () => applyFilter() });
  const statusFilter = select("status", [["", "Any status"], ...statuses.map((v) => [v, v === "-" ? "- (no backfill)" : v])], "");
  statusFilter.addEventListener("change", () => applyFilter());
  const selInfo = h("span", { class: "sk-selinfo" });
  const initBtn = h("button", { type: "button", class: "btn primary", dataset: { action: "initiate", need: "operator" }, disabled: true, onclick: () => act("initiate") }, "Initiate backfill");
  const stopBtn = h("button", { type: "button", class: "btn danger", dataset: { action: "stop", need: "operator" }, disabled: true, onclick: () => act("stop") }, "Stop backfill");
  const hint = h("div", { class: "sk-hint", "aria-live": "polite" });
  const toolbar = h("div", { class: "sk-toolbar" }, filter, statusFilter, h("span", { class: "spacer" }), selInfo, initBtn, stopBtn);
  const notice = h("div", { class: "sk-notice", hidden: true });

  const all = h("input", { type: "checkbox", dataset: { selectAll: "" }, "aria-label": "Select every object shown", onchange: () => selectAll(all.checked) });
  const th = (label, title, cls) => h("th", { class: cls || null, title: title || null }, label);
  const tbody = h("tbody");
  const widths = ["check", "object", "status", "loaded", "n", "n", "n", "cols", "run"];
  const grid = h("table", { class: "grid sk-objtable" },
    h("colgroup", {}, widths.map((w) => h("col", { class: "w-" + w }))),
    h("thead", {}, h("tr", {},
      h("th", { class: "sk-check" }, all),
      th("Object"),
      th("Status", "The status of the object's latest backfill; - when it has none"),
      th("Loaded", "The latest backfill's last chunk is committed in the destination"),
      th("Events 7d", "Changes and backfilled rows processed for the object today and the 6 days before (UTC days)", "num"),
      th("Loaded 7d", "The same count, as committed in the destination", "num"),
      th("Bytes 30d", "Bytes of changes written for the object today and the 29 days before", "num"),
      th("Columns", "Columns as last described, in table order; key columns are marked"),
      th("Latest backfill"))),
    tbody);
  const empty = h("p", { class: "empty", hidden: true }, "No objects yet: they appear once the stream has started and discovered its tables.");
  const nomatch = h("p", { class: "empty", hidden: true }, "No object matches the filter.");
  const box = h("div", { class: "sk-tablebox" }, toolbar, hint, grid);
  content.append(facts, box, empty, nomatch, notice);

  // Merging: an answer of the API is as new as the moment it was asked
  // for, so what an event brought after that moment wins over it.
  function mergeRun(r, askedAt) {
    const old = s.runs.get(r.id);
    if (old && (s.runSeen.get(r.id) ?? -1) > askedAt && !ahead(r, old)) return;
    s.runs.set(r.id, r);
  }

  function mergeObjects(objs, askedAt) {
    const next = new Map();
    for (const o of objs) {
      const local = s.objects.get(o.object);
      if (local && (s.touched.get(o.object) ?? -1) > askedAt && (local.backfill_id || 0) >= (o.backfill_id || 0)) {
        next.set(o.object, { ...o, status: local.status, reason: local.reason, loaded: local.loaded, backfill_id: local.backfill_id });
      } else {
        next.set(o.object, o);
      }
    }
    s.objects = next;
    s.order = objs.map((o) => o.object);
    s.byPair = new Map(objs.map((o) => [pairKey(o.schema, o.table), o.object]));
  }

  let loading = null;
  let again = false;
  async function load(initial) {
    if (loading) { again = true; return loading; }
    loading = (async () => {
      const askedAt = performance.now();
      const runs = "/api/v1/backfills";
      const [view, objs, active, pending, recent] = await Promise.all([
        get(streamPath(name)),
        get(streamPath(name) + "/objects"),
        get(runs + q({ stream: name, status: "active" })),
        get(runs + q({ stream: name, status: "pending" })),
        initial ? get(runs + q({ stream: name, limit: 1000 })) : [],
      ]);
      // The latest runs no list brought, or that finished unseen.
      const listed = new Map([...recent, ...pending, ...active].map((r) => [r.id, r]));
      const known = (id) => listed.get(id) || s.runs.get(id);
      const missing = objs.filter((o) => o.backfill_id && (!known(o.backfill_id) || known(o.backfill_id).status !== o.status)).slice(0, 20);
      const fetched = await Promise.all(missing.map((o) => get(runs + "/" + o.backfill_id).catch(() => null)));
      if (!ctx.alive()) return;
      // From here on nothing waits: the state and the page change together.
      if (s.stateSeen <= askedAt) s.view = view;
      else s.view = { ...view, state: s.view.state, reason: s.view.reason, updated_at: s.view.updated_at };
      for (const r of [...listed.values(), ...fetched.filter(Boolean)]) mergeRun(r, askedAt);
      mergeObjects(objs, askedAt);
      render();
    })();
    try {
      await loading;
    } finally {
      loading = null;
    }
    if (again) {
      again = false;
      await load(false);
    }
  }

  const refresh = refresher(ctx, notice, () => load(false));
  const refreshSoon = throttle(refresh, 800);

  function render() {
    renderHead();
    syncRows();
    applyFilter();
  }

  function renderHead() {
    const v = s.view;
    if (!s.controls) {
      s.controls = streamControls(v, () => refreshSoon());
      replace(controls, s.controls.nodes);
    }
    s.controls.update(v);
    const counts = {};
    for (const o of s.objects.values()) counts[o.status] = (counts[o.status] || 0) + 1;
    const loaded = [...s.objects.values()].filter((o) => o.loaded).length;
    replace(facts,
      fact("State", h("div", { class: "sk-state" }, stateCell(v)), v.updated_at ? "changed " + ago(v.updated_at) : "", time(v.updated_at, undefined, true)),
      fact("Retained WAL", bytes(v.retained_wal_bytes), "held back on the source by the slot"),
      fact("Objects", num(s.objects.size), s.objects.size ? num(loaded) + " fully loaded" : "none discovered yet"),
      fact("Backfills", h("div", { class: "sk-counts" }, statuses.filter((st) => counts[st]).map((st) =>
        h("span", { class: "sk-count s-" + (st === "-" ? "none" : st), dataset: { count: st } }, h("b", {}, num(counts[st])), " ", st === "-" ? "not backfilled" : st))),
      counts.active || counts.pending ? "running now" : ""),
    );
  }

  function syncRows() {
    for (const [n, row] of s.rows) {
      if (!s.objects.has(n)) {
        row.tr.remove();
        s.rows.delete(n);
        s.selected.delete(n);
      }
    }
    let prev = null;
    for (const n of s.order) {
      let row = s.rows.get(n);
      if (!row) {
        row = makeRow(n);
        s.rows.set(n, row);
      }
      fillRow(row, s.objects.get(n));
      // Keep the API's order without moving rows that are in place.
      const want = prev ? prev.nextSibling : tbody.firstChild;
      if (want !== row.tr) tbody.insertBefore(row.tr, want);
      prev = row.tr;
    }
    empty.hidden = s.objects.size > 0;
    box.hidden = s.objects.size === 0;
    updateToolbar();
  }

  function makeRow(n) {
    const check = h("input", { type: "checkbox", dataset: { select: n }, "aria-label": "Select " + n, checked: s.selected.has(n) });
    // Shift-click selects (or clears) the shown rows from the last one clicked.
    check.addEventListener("click", (ev) => {
      const names = s.order.filter((x) => visible(s.rows.get(x)));
      const from = names.indexOf(s.anchor);
      const to = names.indexOf(n);
      if (ev.shiftKey && from >= 0 && to >= 0) {
        for (const x of names.slice(Math.min(from, to), Math.max(from, to) + 1)) {
          if (check.checked) s.selected.add(x);
          else s.selected.delete(x);
        }
      } else if (check.checked) s.selected.add(n);
      else s.selected.delete(n);
      s.anchor = n;
      updateToolbar();
    });
    const tr = h("tr", { dataset: { object: n } }, h("td", { class: "sk-check" }, check));
    const classes = ["sk-objcell", "sk-statuscell", "", "num", "num", "num", "sk-colcell", "sk-runcell"];
    const cells = classes.map((c) => tr.appendChild(h("td", { class: c || null })));
    const o = s.objects.get(n);
    const plain = n === o.schema + "." + o.table; // else the name is quoted: show it as the API writes it
    cells[0].append(h("a", { href: objectHref(name, n), class: "sk-name", title: "Backfill history of " + n }, plain ? [h("span", { class: "sk-schema" }, o.schema + "."), o.table] : n));
    return { tr, check, cells, sig: "" };
  }

  function fillRow(row, o) {
    const r = o.backfill_id ? s.runs.get(o.backfill_id) : null;
    const live = r && rank(r.status) < 2;
    // Running rows show times relative to now: redraw them each second.
    const sig = JSON.stringify([o, r, s.view.state, live ? Math.floor(Date.now() / 1000) : 0]);
    if (sig === row.sig) return;
    row.sig = sig;
    const [, cStatus, cLoaded, cEvents, cLoaded7, cBytes, cCols, cRun] = row.cells;
    row.tr.dataset.status = o.status;
    replace(cStatus, statusCell(o));
    replace(cLoaded, loadedCell(o));
    replace(cEvents, num(o.events_7d));
    replace(cLoaded7, o.events_loaded_7d === o.events_7d ? num(o.events_loaded_7d) : h("span", { class: "sk-behind", title: num(o.events_7d - o.events_loaded_7d) + " not committed yet" }, num(o.events_loaded_7d)));
    replace(cBytes, o.bytes_30d ? bytes(o.bytes_30d) : h("span", { class: "muted" }, "0"));
    replace(cCols, columnsCell(o.columns));
    // A run whose record lags behind the object's status shows once re-read.
    replace(cRun, progressCell(o, r && r.status === o.status ? r : null, s.view.state));
  }

  function visible(row) {
    return !row.tr.hidden;
  }

  function applyFilter() {
    const text = filter.value.trim().toLowerCase();
    const st = statusFilter.value;
    let shown = 0;
    for (const [n, row] of s.rows) {
      const o = s.objects.get(n);
      const ok = (!text || n.toLowerCase().includes(text)) && (!st || o.status === st);
      row.tr.hidden = !ok;
      if (ok) shown++;
    }
    nomatch.hidden = !(s.objects.size && !shown);
    updateToolbar();
  }

  function selectAll(on) {
    for (const [n, row] of s.rows) {
      if (!visible(row)) continue;
      if (on) s.selected.add(n);
      else s.selected.delete(n);
    }
    updateToolbar();
  }

  function selection() {
    return s.order.filter((n) => s.selected.has(n)).map((n) => s.objects.get(n));
  }

  function updateToolbar() {
    for (const [n, row] of s.rows) {
      const on = s.selected.has(n);
      if (row.check.checked !== on) row.check.checked = on;
      row.tr.classList.toggle("selected", on);
    }
    const sel = selection();
    const names = sel.map((o) => o.object);
    const ib = initiateBlock(sel);
    const sb = stopBlock(sel);
    initBtn.disabled = !!ib;
    initBtn.title = ib || "Initiate a backfill of " + list(names);
    stopBtn.disabled = !!sb;
    stopBtn.title = sb || "Stop the backfill of " + list(names);
    const rows = [...s.rows.values()].filter(visible);
    const picked = rows.filter((row) => s.selected.has(row.tr.dataset.object)).length;
    all.checked = rows.length > 0 && picked === rows.length;
    all.indeterminate = picked > 0 && picked < rows.length;
    const hidden = sel.length - picked;
    selInfo.textContent = sel.length ? sel.length + " selected" + (hidden > 0 ? " (" + hidden + " hidden by the filter)" : "") : "";
    // With a selection, say why an action is unavailable.
    const why = sel.length ? [ib, sb].filter(Boolean) : [];
    hint.textContent = why.join(" ");
    hint.hidden = !why.length;
  }

  async function act(kind) {
    const sel = selection();
    const answer = await backfillAction(kind, name, sel, s.view.state);
    if (!answer || !ctx.alive()) return;
    if (kind === "initiate" && Array.isArray(answer)) for (const r of answer) applyRun(r, false);
    refreshSoon();
  }

  // applyRun shows a run on its object's row; pushed events are in order,
  // so each one is the newest; an API answer only fills in what is unknown.
  function applyRun(b, pushed) {
    const now = performance.now();
    if (!pushed && s.runs.has(b.id)) return;
    s.runs.set(b.id, b);
    s.runSeen.set(b.id, now);
    const key = s.byPair.get(pairKey(b.schema, b.table));
    const o = key && s.objects.get(key);
    if (!o) { refreshSoon(); return; }
    if (o.backfill_id && b.id < o.backfill_id) return; // an older run no longer says the status
    const next = { ...o, backfill_id: b.id, status: b.status, loaded: b.status === "completed" && !!b.loaded_at, reason: objectReason(b, key) };
    s.objects.set(key, next);
    s.touched.set(key, now);
    fillRow(s.rows.get(key), next);
    renderHead();
    applyFilter();
    // A finished run changes the counters: re-read them.
    if (rank(b.status) === 2) refreshSoon();
  }

  ctx.onEvent((ev) => {
    if (ev.stream !== name || !s.view) return;
    if (ev.backfill) applyRun(ev.backfill, true);
    if (ev.state) {
      s.stateSeen = performance.now();
      s.view = { ...s.view, state: ev.state.state, reason: ev.state.reason, updated_at: ev.state.updated_at };
      renderHead();
      for (const [n, row] of s.rows) fillRow(row, s.objects.get(n));
    }
  });

  await load(true);
  ctx.every(5000, refresh);
  // Relative times of running rows.
  ctx.every(1000, () => {
    for (const [n, row] of s.rows) {
      const o = s.objects.get(n);
      if (o.status === "pending" || o.status === "active") fillRow(row, o);
    }
  });
}

// ahead says whether run a is further along than b (the same run).
function ahead(a, b) {
  if (rank(a.status) !== rank(b.status)) return rank(a.status) > rank(b.status);
  if (a.rows_read !== b.rows_read) return a.rows_read > b.rows_read;
  if (a.chunks !== b.chunks) return a.chunks > b.chunks;
  return !!a.loaded_at && !b.loaded_at;
}
