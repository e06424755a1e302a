// The streams list: every configured stream with its state, the WAL its
// slot holds back and its objects' backfills, with pause, resume and reset.
// A stream's Objects tab is in objects.js, an object's history in
// history.js.
import { bus, get } from "./api.js";
import { ago, bytes, h, num, page, refresher, replace, throttle, time } from "./ui.js";
import { stateCell, streamControls, streamHref, streamPath } from "./streamkit.js";
import { streamPage } from "./objects.js";
import { objectPage } from "./history.js";

export { streamPage, objectPage };

export async function streamsPage(main, _params, ctx) {
  const content = page(main, { title: "Streams" });
  const s = {
    views: new Map(), // name → stream view
    order: [],
    objects: new Map(), // name → object views (null: could not be read)
    lag: new Map(), // name → the latest lag alert pushed
    stateSeen: new Map(), // name → when an event last brought its state
    rows: new Map(), // name → tr
  };
  // Lag alerts pushed before the page opened.
  for (const ev of bus.history) if (ev.lag) s.lag.set(ev.stream, ev.lag);

  const tbody = h("tbody");
  const grid = h("table", { class: "grid sk-streams" },
    h("thead", {}, h("tr", {},
      h("th", {}, "Stream"),
      h("th", {}, "State"),
      h("th", { title: "The source the stream reads and the destination it writes (hover for where)" }, "From → to"),
      h("th", { title: "The stream's objects (source tables) by the status of their latest backfill" }, "Objects"),
      h("th", { class: "num", title: "WAL the replication slot holds back on the source, as last measured" }, "Retained WAL"),
      h("th", { title: "When the state last changed" }, "Updated"),
      h("th", { class: "sk-actcol" }, ""))),
    tbody);
  const empty = h("p", { class: "empty", hidden: true }, "No streams are configured.");
  const notice = h("div", { class: "sk-notice", hidden: true });
  content.append(grid, empty, notice);

  async function loadStreams() {
    const askedAt = performance.now();
    const views = await get("/api/v1/streams");
    if (!ctx.alive()) return;
    s.order = views.map((v) => v.name);
    const next = new Map();
    for (const v of views) {
      const local = s.views.get(v.name);
      next.set(v.name, local && (s.stateSeen.get(v.name) ?? -1) > askedAt ? { ...v, state: local.state, reason: local.reason, updated_at: local.updated_at } : v);
    }
    s.views = next;
    render();
  }

  async function loadObjects() {
    const all = await Promise.all(s.order.map((n) => get(streamPath(n) + "/objects").catch(() => null)));
    if (!ctx.alive()) return;
    s.order.forEach((n, i) => s.objects.set(n, all[i]));
    render();
  }

  const refresh = refresher(ctx, notice, async () => {
    await loadStreams();
    await loadObjects();
  });
  const refreshSoon = throttle(refresh, 1000);
  const objectsSoon = throttle(() => loadObjects().catch(() => {}), 4000);

  function render() {
    for (const [n, row] of s.rows) {
      if (!s.views.has(n)) {
        row.tr.remove();
        s.rows.delete(n);
      }
    }
    let prev = null;
    for (const n of s.order) {
      let row = s.rows.get(n);
      if (!row) {
        row = makeRow(s.views.get(n));
        s.rows.set(n, row);
      }
      // In order, without moving rows that are in place.
      const want = prev ? prev.nextSibling : tbody.firstChild;
      if (want !== row.tr) tbody.insertBefore(row.tr, want);
      prev = row.tr;
      fill(row, s.views.get(n));
    }
    grid.hidden = !s.order.length;
    empty.hidden = !!s.order.length;
  }

  // A row's cells and buttons stay; fill redraws what the cells say.
  function makeRow(v) {
    const controls = streamControls(v, () => refreshSoon());
    const cells = [h("td", {}, h("a", { class: "sk-streamname", href: streamHref(v.name) }, v.name)),
      h("td", { class: "sk-statecell" }), h("td", { class: "sk-ends" }), h("td"), h("td", { class: "num" }), h("td")];
    const tr = h("tr", { dataset: { stream: v.name } }, cells,
      h("td", { class: "sk-actcol" }, h("div", { class: "sk-rowactions" },
        h("a", { class: "btn small", href: streamHref(v.name), dataset: { action: "objects" } }, "Objects"), controls.nodes)));
    return { tr, cells, controls, sig: "" };
  }

  // endsCell names the source and destination types, where each is as
  // the title.
  function endsCell(v) {
    const src = v.source || {}, dst = v.destination || {};
    return h("span", { title: "source: " + (src.where || "?") + "\ndestination: " + (dst.where || "?"), dataset: { source: src.type || "", destination: dst.type || "" } },
      src.type || "?", h("span", { class: "muted" }, " → "), dst.title || dst.type || "?");
  }

  function fill(row, v) {
    row.controls.update(v);
    const lag = s.lag.get(v.name);
    const objs = s.objects.get(v.name);
    const sig = JSON.stringify([v, lag, objs && objs.map((o) => [o.status, o.loaded]), objs === null, ago(v.updated_at)]);
    if (row.sig === sig) return;
    row.sig = sig;
    const [, state, ends, objects, wal, updated] = row.cells;
    replace(ends, endsCell(v));
    replace(state, stateCell(v),
      lag && lag.over ? h("div", { class: "sk-lag", title: lag.reason || "" }, "lag " + secs(lag.lag_seconds) + " (warns over " + secs(lag.threshold_seconds) + ")") : null);
    replace(objects, objectsSummary(v.name, objs));
    replace(wal, bytes(v.retained_wal_bytes));
    replace(updated, ago(v.updated_at));
    updated.title = time(v.updated_at, undefined, true);
  }

  ctx.onEvent((ev) => {
    const v = s.views.get(ev.stream);
    if (!v) return;
    if (ev.state) {
      s.stateSeen.set(ev.stream, performance.now());
      s.views.set(ev.stream, { ...v, state: ev.state.state, reason: ev.state.reason, updated_at: ev.state.updated_at });
      fill(s.rows.get(ev.stream), s.views.get(ev.stream));
      refreshSoon(); // the retained WAL and the rest
    }
    if (ev.lag) {
      s.lag.set(ev.stream, ev.lag);
      fill(s.rows.get(ev.stream), v);
    }
    if (ev.backfill) objectsSoon(); // at most every 4s while backfills run
  });

  await loadStreams();
  loadObjects().catch(() => {});
  ctx.every(10000, refresh);
}

// objectsSummary counts a stream's objects by status.
function objectsSummary(stream, objs) {
  if (objs === undefined) return h("span", { class: "muted" }, "…");
  if (objs === null) return h("span", { class: "muted" }, "unavailable");
  if (!objs.length) return h("span", { class: "muted" }, "none discovered yet");
  const by = {};
  for (const o of objs) by[o.status] = (by[o.status] || 0) + 1;
  const loaded = objs.filter((o) => o.loaded).length;
  return h("div", { class: "sk-counts" },
    h("a", { href: streamHref(stream), class: "sk-total" }, num(objs.length) + (objs.length === 1 ? " object" : " objects")),
    ["active", "pending", "failed", "stopped", "-"].filter((st) => by[st]).map((st) =>
      h("span", { class: "sk-count s-" + (st === "-" ? "none" : st), dataset: { count: st }, title: st === "-" ? "objects with no backfill" : null }, h("b", {}, num(by[st])), " ", st === "-" ? "not backfilled" : st)),
    loaded ? h("span", { class: "sk-count s-loaded", title: "completed and loaded" }, loaded === objs.length ? "all loaded" : [h("b", {}, num(loaded)), " loaded"]) : null);
}

function secs(s) {
  return s >= 90 ? Math.round(s / 60) + "m" : Math.round(s) + "s";
}
