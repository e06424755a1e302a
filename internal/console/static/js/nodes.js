// The nodes of a cluster (docs/cluster.md): each node's host, heartbeat and
// what it runs — streams, the batch engine's lead, its task worker — with each lease's
// epoch. The page looks again every 2 s: heartbeats have no events.
import { api } from "./api.js";
import { ago, badge, errorBox, h, page, replace, table } from "./ui.js";

const enc = encodeURIComponent;

export async function nodesPage(main, _params, ctx) {
  const content = page(main, { title: "Nodes", crumbs: [["The daemons sharing this metadata store"]] });
  const body = h("div", {}, h("p", { class: "muted" }, "Loading…"));
  content.append(body);

  // A lease is the batch engine's lead, a node's task worker ("worker:"
  // and its name: it runs the attempts the leader queues) or a stream.
  const work = (l) => {
    const attrs = (href) => ({ href, title: `epoch ${l.epoch} since ${l.acquired_at}`, dataset: { lease: l.name } });
    if (l.name === "batch") return h("a", attrs("#/batch"), "batch engine");
    if (l.name.startsWith("worker:")) return h("a", attrs("#/batch"), "task worker");
    return h("a", attrs("#/streams/" + enc(l.name.replace(/^stream:/, ""))), l.name.replace(/^stream:/, ""));
  };

  let runs = {};
  let self = "";
  const columns = [
    { label: "Node", cell: (n) => [h("span", { class: "mono" }, n.name), n.name === self ? h("span", { class: "muted" }, " (this)") : ""] },
    { label: "State", cell: (n) => badge(n.live ? "live" : "gone", n.live ? "heartbeating" : "no heartbeat since " + n.heartbeat_at) },
    { label: "Host", cell: (n) => n.host },
    { label: "PID", class: "num", cell: (n) => String(n.pid) },
    { label: "Heartbeat", cell: (n) => ago(n.heartbeat_at) },
    { label: "Runs", cell: (n) => (runs[n.name] || []).map((l, i) => [i ? ", " : "", work(l)]) },
    { label: "API", cell: (n) => h("span", { class: "mono" }, n.api) },
  ];

  async function load() {
    let v;
    try {
      v = await api("GET", "/api/v1/cluster");
    } catch (e) {
      if (ctx.alive()) replace(body, errorBox(e));
      return;
    }
    if (!ctx.alive()) return;
    self = v.node;
    runs = {};
    for (const l of v.leases) if (l.live) (runs[l.node] ||= []).push(l);
    replace(body,
      table(columns, v.nodes, { empty: "No node has joined.", rowAttrs: (n) => ({ dataset: { node: n.name, live: String(n.live) } }) }),
      h("p", { class: "hint" }, `Answered by node ${v.node}. A stream runs on one node at a time; when its node stops, another takes it over within the cluster's lease time.`));
  }
  await load();
  ctx.every(2000, load);
}
