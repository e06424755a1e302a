// The task DAG drawn as SVG: a layered layout (a task's layer is its longest
// path from a root), long edges broken by virtual points so that they are
// ordered like nodes, a few barycenter sweeps to reduce crossings, then
// vertical positions pulled towards the neighbours. Upstream is on the
// left. Nodes are g.node[data-task=ID]; text goes in as text nodes.

const NS = "http://www.w3.org/2000/svg";
const W = 192, H = 52, GAPX = 66, GAPY = 16, VGAP = 12, PAD = 22;

// s builds an SVG element; attributes are set as attributes (presentation
// attributes, not style, which the CSP forbids inline).
function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === false || v === null || v === undefined) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) if (c !== null && c !== undefined && c !== false) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

// layout places tasks ({id, upstream}) and returns {nodes: Map id → {x, y,
// layer}, edges: [{from, to, points}], width, height}.
export function layout(tasks) {
  const ids = new Set(tasks.map((t) => t.id));
  const ups = new Map(tasks.map((t) => [t.id, (t.upstream || []).filter((u) => ids.has(u))]));
  // Layers: longest path from a root, in topological order (Kahn).
  const downs = new Map(tasks.map((t) => [t.id, []]));
  for (const [id, us] of ups) for (const u of us) downs.get(u).push(id);
  const indeg = new Map([...ups].map(([id, us]) => [id, us.length]));
  const layer = new Map();
  const queue = tasks.filter((t) => indeg.get(t.id) === 0).map((t) => t.id);
  for (let i = 0; i < queue.length; i++) {
    const id = queue[i];
    layer.set(id, Math.max(0, ...ups.get(id).map((u) => layer.get(u) + 1)));
    for (const d of downs.get(id)) {
      indeg.set(d, indeg.get(d) - 1);
      if (indeg.get(d) === 0) queue.push(d);
    }
  }
  for (const t of tasks) if (!layer.has(t.id)) layer.set(t.id, 0); // a cycle: cannot happen, config refuses them
  const nLayers = Math.max(0, ...layer.values()) + 1;

  // Items per layer: tasks and virtual points of long edges.
  const items = new Map(); // key → {key, layer, real, ups: [keys], downs: [keys]}
  const layers = Array.from({ length: nLayers }, () => []);
  const add = (key, l, real) => {
    const it = { key, layer: l, real, ups: [], downs: [], pos: 0, y: 0 };
    items.set(key, it);
    layers[l].push(it);
    return it;
  };
  const sorted = [...tasks].sort((a, b) => (a.project || "").localeCompare(b.project || "") || a.id.localeCompare(b.id));
  for (const t of sorted) add(t.id, layer.get(t.id), true);
  const chains = []; // [from, to, [virtual keys]]
  for (const t of sorted) {
    for (const u of ups.get(t.id)) {
      let prev = items.get(u);
      const virt = [];
      for (let l = layer.get(u) + 1; l < layer.get(t.id); l++) {
        const v = add("v:" + u + ">" + t.id + ":" + l, l, false);
        v.ups.push(prev.key);
        prev.downs.push(v.key);
        virt.push(v.key);
        prev = v;
      }
      const to = items.get(t.id);
      to.ups.push(prev.key);
      prev.downs.push(to.key);
      chains.push([u, t.id, virt]);
    }
  }
  layers.forEach((ls) => ls.forEach((it, i) => { it.pos = i; }));

  // Crossing reduction: barycenter sweeps, keeping the best order seen.
  const bary = (it, dir) => {
    const ns = dir === "down" ? it.ups : it.downs;
    if (!ns.length) return it.pos;
    return ns.reduce((a, k) => a + items.get(k).pos, 0) / ns.length;
  };
  const sweep = (dir) => {
    const range = dir === "down" ? [...layers.keys()].slice(1) : [...layers.keys()].reverse().slice(1);
    for (const l of range) {
      const ls = layers[l];
      const b = new Map(ls.map((it) => [it, bary(it, dir)]));
      ls.sort((x, y) => b.get(x) - b.get(y) || x.pos - y.pos);
      ls.forEach((it, i) => { it.pos = i; });
    }
  };
  const edgesCount = [...items.values()].reduce((a, it) => a + it.downs.length, 0);
  let best = crossings(layers, items), bestOrder = layers.map((ls) => [...ls]);
  for (let i = 0; i < 6 && best > 0; i++) {
    sweep(i % 2 ? "up" : "down");
    if (edgesCount > 4000) continue; // counting is quadratic: trust the sweeps
    const c = crossings(layers, items);
    if (c < best) { best = c; bestOrder = layers.map((ls) => [...ls]); }
  }
  if (edgesCount <= 4000) {
    bestOrder.forEach((ls, l) => { layers[l] = ls; ls.forEach((it, i) => { it.pos = i; }); });
  }

  // Vertical positions: stacked, then pulled towards the neighbours' mean
  // while keeping the order and the gaps.
  const size = (it) => (it.real ? H + GAPY : VGAP);
  for (const ls of layers) {
    let y = 0;
    for (const it of ls) { it.y = y; y += size(it); }
  }
  for (let iter = 0; iter < 8; iter++) {
    for (const ls of iter % 2 ? [...layers].reverse() : layers) {
      const want = ls.map((it) => {
        const ns = [...it.ups, ...it.downs].map((k) => items.get(k));
        if (!ns.length) return it.y;
        return ns.reduce((a, n) => a + center(n), 0) / ns.length - half(it);
      });
      place(ls, want, size);
    }
  }
  const minY = Math.min(0, ...[...items.values()].map((it) => it.y));
  let maxY = 0;
  for (const it of items.values()) {
    it.y += PAD - minY;
    maxY = Math.max(maxY, it.y + (it.real ? H : 0));
  }
  const x = (l) => PAD + l * (W + GAPX);
  const nodes = new Map();
  for (const it of items.values()) if (it.real) nodes.set(it.key, { x: x(it.layer), y: it.y, layer: it.layer });
  const edges = chains.map(([from, to, virt]) => {
    const a = nodes.get(from), b = nodes.get(to);
    const points = [[a.x + W, a.y + H / 2]];
    for (const k of virt) {
      const v = items.get(k);
      points.push([x(v.layer), v.y], [x(v.layer) + W, v.y]);
    }
    points.push([b.x, b.y + H / 2]);
    return { from, to, points };
  });
  return { nodes, edges, width: x(nLayers - 1) + W + PAD, height: maxY + PAD, crossings: best };
}

const half = (it) => (it.real ? H / 2 : 0);
const center = (it) => it.y + half(it);

// place sets y as close to want as the order and gaps allow: a forward
// pass pushes down, a backward pass pulls up, then the two are averaged.
function place(ls, want, size) {
  const n = ls.length;
  if (!n) return;
  const down = new Array(n), up = new Array(n);
  for (let i = 0; i < n; i++) down[i] = i ? Math.max(want[i], down[i - 1] + size(ls[i - 1])) : want[i];
  for (let i = n - 1; i >= 0; i--) up[i] = i < n - 1 ? Math.min(want[i], up[i + 1] - size(ls[i])) : want[i];
  for (let i = 0; i < n; i++) ls[i].y = (down[i] + up[i]) / 2;
  for (let i = 1; i < n; i++) ls[i].y = Math.max(ls[i].y, ls[i - 1].y + size(ls[i - 1]));
}

// crossings counts the edge crossings between adjacent layers.
function crossings(layers, items) {
  let c = 0;
  for (const ls of layers) {
    const es = [];
    for (const it of ls) for (const d of it.downs) es.push([it.pos, items.get(d).pos]);
    for (let i = 0; i < es.length; i++) {
      for (let j = i + 1; j < es.length; j++) {
        if ((es[i][0] - es[j][0]) * (es[i][1] - es[j][1]) < 0) c++;
      }
    }
  }
  return c;
}

// curve is a smooth path through points (pairs of a layer's entry and exit).
function curve(points) {
  let d = `M${points[0][0]},${points[0][1]}`;
  for (let i = 1; i < points.length; i++) {
    const [x0, y0] = points[i - 1], [x1, y1] = points[i];
    if (y0 === y1 || x1 - x0 > W / 2) {
      const dx = Math.max(24, (x1 - x0) / 2);
      d += ` C${x0 + dx},${y0} ${x1 - dx},${y1} ${x1},${y1}`;
    } else {
      d += ` L${x1},${y1}`;
    }
  }
  return d;
}

let markers = 0;

// backfillIcon is the nodes' backfill symbol, for legends.
export function backfillIcon() {
  return s("svg", { class: "bf-icon", width: 18, height: 18, viewBox: "0 0 24 24", "aria-hidden": "true" },
    s("rect", { width: 24, height: 24, rx: 6 }), s("path", { d: "M12 7 L5 12 L12 17 Z M19 7 L12 12 L19 17 Z" }));
}

// projectHue gives each project a stable colour.
function projectHue(p) {
  let x = 7;
  for (const ch of p || "") x = (x * 31 + ch.charCodeAt(0)) >>> 0;
  return x % 360;
}

// stripe is the project's colour band; its fill is set through the CSSOM
// (the stylesheet's rule for node rects would win over an attribute).
function stripe(project) {
  const r = s("rect", { class: "stripe", width: 4, height: H - 18, x: 6, y: 9 });
  r.style.fill = `hsl(${projectHue(project)} 62% 52%)`;
  return r;
}

function fit(text, max) {
  return text.length > max ? text.slice(0, max - 1) + "…" : text;
}

// drawDag returns an element holding the DAG of tasks. Options: focus (a
// task id, drawn highlighted), near (ids drawn as its neighbours), onOpen(id)
// and onBackfill(id) (the node's backfill button and its context menu).
export function drawDag(tasks, { focus, near = new Set(), onOpen, onBackfill, match } = {}) {
  const lay = layout(tasks);
  const m = ++markers;
  const byID = new Map(tasks.map((t) => [t.id, t]));
  const svg = s("svg", { class: "dag", width: lay.width, height: lay.height, viewBox: `0 0 ${lay.width} ${lay.height}`, role: "img", "aria-label": "Task dependency graph, upstream on the left" },
    s("defs", {},
      s("marker", { id: `dag-arrow-${m}`, class: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" }, s("path", { d: "M0,0 L10,5 L0,10 z" })),
      s("marker", { id: `dag-arrow-hl-${m}`, class: "arrow hl", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" }, s("path", { d: "M0,0 L10,5 L0,10 z" }))));
  const edgeLayer = s("g", { class: "edges" });
  const nodeLayer = s("g", { class: "nodes" });
  svg.append(edgeLayer, nodeLayer);
  const edgeEls = [];
  for (const e of lay.edges) {
    const hl = focus && (e.from === focus || e.to === focus);
    const p = s("path", { class: "edge" + (hl ? " hl" : ""), d: curve(e.points), "marker-end": `url(#dag-arrow${hl ? "-hl" : ""}-${m})`, "data-from": e.from, "data-to": e.to });
    edgeEls.push(p);
    edgeLayer.append(p);
  }
  for (const [id, pos] of lay.nodes) {
    const t = byID.get(id);
    if (t.read) {
      nodeLayer.append(objectNode(t, pos));
      continue;
    }
    const cls = ["node", id === focus ? "focus" : "", near.has(id) ? "near" : "", t.paused ? "paused" : "", t.dry_run ? "dryrun" : "", match && !match(t) ? "dim" : ""].filter(Boolean).join(" ");
    const flags = [t.paused ? "paused" : "", t.dry_run ? "dry-run" : ""].filter(Boolean);
    const btn = s("g", { class: "node-bf", transform: `translate(${W - 30},6)`, role: "button", "aria-label": "Backfill " + id, "data-action": "node-backfill" },
      s("title", {}, "Backfill " + id + "…"),
      s("rect", { width: 24, height: 22, rx: 6 }),
      s("path", { d: "M12 6 L5 11 L12 16 Z M19 6 L12 11 L19 16 Z" }));
    const g = s("g", { class: cls, transform: `translate(${pos.x},${pos.y})`, tabindex: 0, role: "link", "data-task": id, "aria-label": id },
      s("title", {}, `${id}\n${t.type} · ${t.schedule} (${t.timezone})${t.owner ? "\nowner " + t.owner : ""}${flags.length ? "\n" + flags.join(", ") : ""}\nClick to open; right-click or its backfill button to backfill.`),
      s("rect", { class: "box", width: W, height: H }),
      stripe(t.project),
      s("text", { class: "name", x: 16, y: 22 }, fit(t.name, 19)),
      s("text", { class: "sub", x: 16, y: 40 }, fit(`${t.project} · ${t.schedule}`, flags.length ? 18 : 28),
        flags.length ? s("tspan", { class: "flag" }, " · " + flags.join(" · ")) : null),
      onBackfill ? btn : null);
    g.addEventListener("click", (ev) => {
      if (onBackfill && ev.target.closest(".node-bf")) { ev.stopPropagation(); onBackfill(id); return; }
      if (onOpen) onOpen(id);
    });
    g.addEventListener("keydown", (ev) => {
      if (ev.key === "Enter" && onOpen) onOpen(id);
      if ((ev.key === "b" || ev.key === "B") && onBackfill) onBackfill(id);
    });
    if (onBackfill) g.addEventListener("contextmenu", (ev) => { ev.preventDefault(); onBackfill(id); });
    g.addEventListener("mouseenter", () => edgeEls.forEach((p) => p.classList.toggle("hover", p.dataset.from === id || p.dataset.to === id)));
    g.addEventListener("mouseleave", () => edgeEls.forEach((p) => p.classList.remove("hover")));
    nodeLayer.append(g);
  }
  const wrap = document.createElement("div");
  wrap.className = "dag-wrap";
  wrap.append(svg);
  return wrap;
}

// withReads adds the streamed objects tasks read ({stream, object}) as
// source nodes upstream of their readers, so that the DAG shows where a
// task's data comes from (docs/lineage.md). An object node's id is
// "object:STREAM/OBJECT", its read the first read naming it.
export function withReads(tasks) {
  const objects = new Map();
  const readers = tasks.map((t) => {
    const ids = (t.reads || []).map((r) => {
      const id = "object:" + r.stream + "/" + r.object;
      if (!objects.has(id)) objects.set(id, { id, name: r.object, project: "", upstream: [], downstream: [], read: r, readers: [] });
      objects.get(id).readers.push(t.id);
      return id;
    });
    return ids.length ? { ...t, upstream: [...ids, ...t.upstream] } : t;
  });
  return [...objects.values(), ...readers];
}

// objectNode draws a streamed object a task reads; it opens the object's
// page.
function objectNode(o, pos) {
  const r = o.read;
  const href = "#/streams/" + encodeURIComponent(r.stream) + "/objects/" + encodeURIComponent(r.object);
  const g = s("g", { class: "node object", transform: `translate(${pos.x},${pos.y})`, tabindex: 0, role: "link", "data-object": r.stream + "/" + r.object, "aria-label": `${r.object} of stream ${r.stream}` },
    s("title", {}, `${r.object}, streamed by ${r.stream}\nread by ${o.readers.join(", ")}\nClick to open the object.`),
    s("rect", { class: "box", width: W, height: H }),
    s("text", { class: "name", x: 16, y: 22 }, fit(r.object, 24)),
    s("text", { class: "sub", x: 16, y: 40 }, fit("stream " + r.stream, 28)));
  g.addEventListener("click", () => { location.hash = href; });
  g.addEventListener("keydown", (ev) => { if (ev.key === "Enter") location.hash = href; });
  return g;
}

// lineage is id with its ancestors and descendants up to levels each way
// (all when levels is Infinity), as a set.
export function lineage(byID, id, levels = Infinity) {
  const out = new Set([id]);
  for (const dir of ["upstream", "downstream"]) {
    let frontier = [id];
    for (let l = 0; l < levels && frontier.length; l++) {
      const next = [];
      for (const f of frontier) {
        for (const n of (byID.get(f) || {})[dir] || []) {
          if (!out.has(n)) { out.add(n); next.push(n); }
        }
      }
      frontier = next;
    }
  }
  return out;
}
