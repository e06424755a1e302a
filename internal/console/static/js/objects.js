// A stream's Objects tab: every object (source table) of the stream with
// its backfill status, and the initiate and stop actions on a selection.
// A pushed backfill event brings a re-read of the list, and the row shows
// the event and the counters it changed together (the daemon records the
// counters of a commit before it tells of it); the list is also re-read
// every few seconds for anything an event missed.
// A stream may have thousands of objects: the table is sorted by any
// column and paged, and only the shown page's rows are in the document.
import { get, q } from "./api.js";
import { ago, bytes, h, num, page, refresher, replace, select, throttle, time } from "./ui.js";
import {
  ahead, backfillAction, fact, columnsCell, initiateBlock, list, loadedCell, objectHref, objectReason, pairKey, progressCell, rank,
  stateCell, statusCell, stopBlock, streamControls, streamPath,
} from "./streamkit.js";

const statuses = ["-", "pending", "active", "completed", "stopped", "failed"];

// pageSize is how many objects a page of the table shows.
export const pageSize = 100;

// sorters compare two objects by one column, ascending.
const sorters = {
  object: (a, b) => a.object.localeCompare(b.object),
  status: (a, b) => statuses.indexOf(a.status) - statuses.indexOf(b.status),
  loaded: (a, b) => Number(!!a.loaded) - Number(!!b.loaded),
  events: (a, b) => (a.events_7d || 0) - (b.events_7d || 0),
  loaded7: (a, b) => (a.events_loaded_7d || 0) - (b.events_loaded_7d || 0),
  bytes: (a, b) => (a.bytes_30d || 0) - (b.bytes_30d || 0),
  columns: (a, b) => (a.columns ? a.columns.length : -1) - (b.columns ? b.columns.length : -1),
  run: (a, b) => (a.backfill_id || 0) - (b.backfill_id || 0),
};

export async function streamPage(main, [name], ctx) {
  const s = {
    view: null,
    order: [], // object names, as the API orders them
    objects: new Map(), // object name → object view
    byPair: new Map(), // pairKey(schema, table) → object name
    runs: new Map(), // backfill id → run
    touched: new Map(), // object name → when an event last changed it (performance.now())
    runSeen: new Map(), // backfill id → when an initiation's answer brought it
    stateSeen: -1, // when an event last brought the stream's state
    held: [], // pushed runs shown with the next answer of the API, which has their counters
    controls: null, // the pause, resume and reset buttons
    selected: new Set(),
    anchor: null, // the row last clicked, for shift-click ranges
    rows: new Map(), // object name → {tr, check, cells, sig}, made for the rows shown so far
    sort: { key: "", dir: 1 }, // "" keeps the API's order
    page: 0,
    matching: [], // object names the filter shows, in the table's order
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

  const all = h("input", { type: "checkbox", dataset: { selectAll: "" }, "aria-label": "Select every object the filter shows, on every page", onchange: () => selectAll(all.checked) });
  const heads = new Map(); // sort key → th
  const th = (label, title, cls, key) => {
    const cell = h("th", { class: cls || null, title: title || null, dataset: { sort: key } },
      h("button", { type: "button", class: "sk-sortbtn", onclick: () => sortBy(key) }, label));
    heads.set(key, cell);
    return cell;
  };
  const tbody = h("tbody");
  const widths = ["check", "object", "status", "loaded", "n", "n", "n", "cols", "ended", "run"];
  const grid = h("table", { class: "grid sk-objtable" },
    h("colgroup", {}, widths.map((w) => h("col", { class: "w-" + w }))),
    h("thead", {}, h("tr", {},
      h("th", { class: "sk-check" }, all),
      th("Object", "", "", "object"),
      th("Status", "The status of the object's latest backfill; - when it has none", "", "status"),
      th("Loaded", "The latest backfill's last chunk is committed in the destination", "", "loaded"),
      th("Events 7d", "Changes and backfilled rows processed for the object today and the 6 days before (UTC days)", "num", "events"),
      th("Loaded 7d", "The same count, as committed in the destination", "num", "loaded7"),
      th("Bytes 30d", "Bytes of changes written for the object today and the 29 days before", "num", "bytes"),
      th("Columns", "Columns as last described, in table order; key columns are marked", "", "columns"),
      th("Ended", "When the latest backfill ended (completed, stopped or failed), in your time zone", "", "ended"),
      th("Latest backfill", "", "", "run"))),
    tbody);
  const pageInfo = h("span", { class: "sk-pageinfo", "aria-live": "polite" });
  const prevBtn = h("button", { type: "button", class: "btn", dataset: { action: "prev-page" }, onclick: () => turn(-1) }, "‹ Previous");
  const nextBtn = h("button", { type: "button", class: "btn", dataset: { action: "next-page" }, onclick: () => turn(1) }, "Next ›");
  const pager = h("div", { class: "sk-pager" }, pageInfo, prevBtn, nextBtn);
  const banner = h("div", { class: "sk-banner", dataset: { banner: "" }, hidden: true });
  const empty = h("p", { class: "empty", hidden: true }, "No objects yet: they appear once the stream has started and discovered its tables.");
  const nomatch = h("p", { class: "empty", hidden: true }, "No object matches the filter.");
  const box = h("div", { class: "sk-tablebox" }, toolbar, hint, banner, grid, pager);
  content.append(facts, box, empty, nomatch, notice);

  // Merging: an answer of the API is as new as the moment it was asked
  // for, so what an initiation's answer brought after that moment wins.
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
      const pushed = s.held.splice(0);
      const runs = "/api/v1/backfills";
      const [view, active, pending, recent] = await Promise.all([
        get(streamPath(name)),
        get(runs + q({ stream: name, status: "active" })),
        get(runs + q({ stream: name, status: "pending" })),
        initial ? get(runs + q({ stream: name, limit: 1000 })) : [],
      ]);
      // The counters are read after the runs, so that they count at least
      // what the runs shown have written.
      const objs = await get(streamPath(name) + "/objects");
      // The latest runs no list brought, or that finished unseen.
      const listed = new Map([...recent, ...pending, ...active].map((r) => [r.id, r]));
      // Pushed events come in order, so a run's last one is its newest: an
      // earlier one must not hide it (a verify ending changes no count).
      const newest = new Map(pushed.map((r) => [r.id, r]));
      for (const r of newest.values()) if (!listed.has(r.id) || ahead(r, listed.get(r.id))) listed.set(r.id, r);
      const known = (id) => listed.get(id) || s.runs.get(id);
      // A run is re-read when its object says more than the run known here
      // (another status, or loaded while the run is still loading), so a
      // row never shows a loaded object beside a loading run.
      const stale = (o, r) => !r || r.status !== o.status || (o.status === "completed" && o.loaded && !r.loaded_at);
      const missing = objs.filter((o) => o.backfill_id && stale(o, known(o.backfill_id))).slice(0, 20);
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
  const showPushed = throttle(refresh, 250);

  function render() {
    renderHead();
    syncRows();
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
      fact("Source", (v.source || {}).type || "?", (v.source || {}).where || "", (v.source || {}).where),
      fact("Destination", (v.destination || {}).title || (v.destination || {}).type || "?", (v.destination || {}).where || "",
        destinationTitle(v.destination)),
      fact("Retained WAL", bytes(v.retained_wal_bytes), "held back on the source by the slot"),
      fact("Objects", num(s.objects.size), s.objects.size ? num(loaded) + " fully loaded" : "none discovered yet"),
      fact("Backfills", h("div", { class: "sk-counts" }, statuses.filter((st) => counts[st]).map((st) =>
        h("span", { class: "sk-count s-" + (st === "-" ? "none" : st), dataset: { count: st } }, h("b", {}, num(counts[st])), " ", st === "-" ? "not backfilled" : st))),
      counts.active || counts.pending ? "running now" : ""),
    );
  }

  // destinationTitle says what the destination can do beyond applying
  // changes: a log cannot replace key ranges, so filtered backfills into
  // it are refused.
  function destinationTitle(d) {
    if (!d) return null;
    const can = d.capabilities || [];
    return (d.where || "") + "\n" + (can.length ? "It can " + list(can, 4) + "." : "It appends events: it cannot replace key ranges or alter tables.");
  }

  // syncRows puts the current page of the filtered, sorted objects in the
  // table, and only those: rows are made when first shown and kept for
  // later pages, but only one page is ever in the document.
  function syncRows() {
    for (const n of s.rows.keys()) {
      if (!s.objects.has(n)) {
        s.rows.get(n).tr.remove();
        s.rows.delete(n);
      }
    }
    for (const n of s.selected) if (!s.objects.has(n)) s.selected.delete(n);
    s.matching = orderedNames().filter(matches);
    const pages = Math.max(1, Math.ceil(s.matching.length / pageSize));
    s.page = Math.min(s.page, pages - 1);
    const shown = s.matching.slice(s.page * pageSize, (s.page + 1) * pageSize);
    const keep = new Set(shown);
    for (const tr of [...tbody.children]) if (!keep.has(tr.dataset.object)) tr.remove();
    let prev = null;
    for (const n of shown) {
      let row = s.rows.get(n);
      if (!row) {
        row = makeRow(n);
        s.rows.set(n, row);
      }
      fillRow(row, s.objects.get(n));
      // Keep the order without moving rows that are in place.
      const want = prev ? prev.nextSibling : tbody.firstChild;
      if (want !== row.tr) tbody.insertBefore(row.tr, want);
      prev = row.tr;
    }
    const from = shown.length ? s.page * pageSize + 1 : 0;
    pageInfo.textContent = num(from) + "–" + num(s.page * pageSize + shown.length) + " of " + num(s.matching.length) +
      (s.matching.length < s.objects.size ? " shown by the filter (" + num(s.objects.size) + " in all)" : "");
    prevBtn.disabled = s.page === 0;
    nextBtn.disabled = s.page >= pages - 1;
    pager.hidden = s.matching.length <= pageSize;
    for (const [key, cell] of heads) {
      cell.setAttribute("aria-sort", s.sort.key === key ? (s.sort.dir > 0 ? "ascending" : "descending") : "none");
    }
    renderBanner();
    empty.hidden = s.objects.size > 0;
    box.hidden = s.objects.size === 0;
    nomatch.hidden = !(s.objects.size && !s.matching.length);
    updateToolbar();
  }

  // orderedNames is every object in the table's order: the API's, or by
  // the chosen column with the API's order breaking ties.
  function orderedNames() {
    if (!s.sort.key) return s.order;
    const by = s.sort.key === "ended" ? (a, b) => (Date.parse(endedAt(a)) || 0) - (Date.parse(endedAt(b)) || 0) : sorters[s.sort.key];
    const at = new Map(s.order.map((n, i) => [n, i]));
    return [...s.order].sort((a, b) => s.sort.dir * by(s.objects.get(a), s.objects.get(b)) || at.get(a) - at.get(b));
  }

  function sortBy(key) {
    s.sort = s.sort.key === key ? { key, dir: -s.sort.dir } : { key, dir: 1 };
    s.page = 0;
    syncRows();
  }

  function turn(by) {
    s.page += by;
    syncRows();
  }

  // renderBanner says once what every object without a backfill shares,
  // rather than leaving it to be read row by row.
  function renderBanner() {
    const none = [...s.objects.values()].filter((o) => o.status === "-");
    const reasons = new Set(none.map((o) => o.reason || ""));
    const shared = none.length > 1 && reasons.size === 1 ? [...reasons][0] : "";
    banner.hidden = !shared;
    banner.textContent = shared ? num(none.length) + (none.length === s.objects.size ? " objects" : " of " + num(s.objects.size) + " objects") + " not backfilled: " + shared : "";
  }

  function makeRow(n) {
    const check = h("input", { type: "checkbox", dataset: { select: n }, "aria-label": "Select " + n, checked: s.selected.has(n) });
    // Shift-click selects (or clears) the shown rows from the last one clicked.
    check.addEventListener("click", (ev) => {
      const names = s.matching;
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
    const classes = ["sk-objcell", "sk-statuscell", "", "num", "num", "num", "sk-colcell", "sk-endcell", "sk-runcell"];
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
    const [, cStatus, cLoaded, cEvents, cLoaded7, cBytes, cCols, cEnded, cRun] = row.cells;
    row.tr.dataset.status = o.status;
    replace(cStatus, statusCell(o));
    replace(cLoaded, loadedCell(o));
    replace(cEvents, num(o.events_7d));
    replace(cLoaded7, o.events_loaded_7d === o.events_7d ? num(o.events_loaded_7d) : h("span", { class: "sk-behind", title: num(o.events_7d - o.events_loaded_7d) + " not committed yet" }, num(o.events_loaded_7d)));
    replace(cBytes, o.bytes_30d ? bytes(o.bytes_30d) : h("span", { class: "muted" }, "0"));
    replace(cCols, columnsCell(o.columns));
    const ended = endedAt(o);
    replace(cEnded, ended ? h("span", { dataset: { ended }, title: time(ended, undefined, true) }, time(ended)) : h("span", { class: "muted" }, "–"));
    // A run whose record lags behind the object's status shows once re-read.
    replace(cRun, progressCell(o, r && r.status === o.status ? r : null, s.view.state));
  }

  // endedAt is when the object's latest backfill ended, "" while it runs,
  // before any, or while its record is not read yet.
  function endedAt(o) {
    const r = o.backfill_id ? s.runs.get(o.backfill_id) : null;
    return r && r.status === o.status && rank(r.status) === 2 ? r.finished_at || "" : "";
  }

  function matches(n) {
    const text = filter.value.trim().toLowerCase();
    const st = statusFilter.value;
    return (!text || n.toLowerCase().includes(text)) && (!st || s.objects.get(n).status === st);
  }

  function applyFilter() {
    s.page = 0;
    syncRows();
  }

  function selectAll(on) {
    for (const n of s.matching) {
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
    const picked = s.matching.filter((n) => s.selected.has(n)).length;
    all.checked = s.matching.length > 0 && picked === s.matching.length;
    all.indeterminate = picked > 0 && picked < s.matching.length;
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
    if (kind === "initiate" && Array.isArray(answer)) for (const r of answer) applyRun(r);
    refreshSoon();
  }

  // applyRun shows at once a run the API answered an initiation with; it
  // only fills in what is unknown.
  function applyRun(b) {
    const now = performance.now();
    if (s.runs.has(b.id)) return;
    s.runs.set(b.id, b);
    s.runSeen.set(b.id, now);
    const key = s.byPair.get(pairKey(b.schema, b.table));
    const o = key && s.objects.get(key);
    if (!o) { refreshSoon(); return; }
    if (o.backfill_id && b.id < o.backfill_id) return; // an older run no longer says the status
    const next = { ...o, backfill_id: b.id, status: b.status, loaded: b.status === "completed" && !!b.loaded_at, reason: objectReason(b, key) };
    s.objects.set(key, next);
    s.touched.set(key, now);
    renderHead();
    syncRows();
  }

  ctx.onEvent((ev) => {
    if (ev.stream !== name || !s.view) return;
    if (ev.backfill) {
      s.held.push(ev.backfill);
      showPushed();
    }
    if (ev.state) {
      s.stateSeen = performance.now();
      s.view = { ...s.view, state: ev.state.state, reason: ev.state.reason, updated_at: ev.state.updated_at };
      renderHead();
      syncRows();
    }
  });

  await load(true);
  ctx.every(5000, refresh);
  // Relative times of running rows.
  ctx.every(1000, () => {
    for (const tr of tbody.children) {
      const o = s.objects.get(tr.dataset.object);
      if (o && (o.status === "pending" || o.status === "active")) fillRow(s.rows.get(tr.dataset.object), o);
    }
  });
}

