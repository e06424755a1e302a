// Proposals to re-run tasks' past cycles whose rows backfills changed
// (docs/lineage.md): pending ones first, each with its cycles, causes and
// Approve / Dismiss; decided ones with their batch backfill.
import { api } from "./api.js";
import { ago, badge, errorBox, h, page, replace, table, toast } from "./ui.js";

const enc = encodeURIComponent;

export async function lineagePage(main, _params, ctx) {
  const content = page(main, { title: "Lineage", crumbs: [["Re-runs of past cycles whose rows backfills changed"]] });
  const pending = h("div", {}, h("p", { class: "muted" }, "Loading…"));
  const decided = h("div", {});
  content.append(
    h("section", {}, h("h2", {}, "Pending proposals"), pending),
    h("section", {}, h("h2", {}, "Decided"), decided));

  const causes = (p) => p.causes.map((c, i) => [i ? ", " : "", c.backfill_id ? "" : "late data in ",
    h("a", { href: "#/streams/" + enc(c.stream) + "/objects/" + enc(c.object) }, c.object), c.backfill_id ? ` backfill #${c.backfill_id}` : ""]);
  const cycles = (p) => h("span", { class: "mono", title: p.cycles.join(", ") }, p.cycles.length > 6 ? p.cycles.slice(0, 6).join(", ") + ` … (${p.cycles.length})` : p.cycles.join(", "));
  const task = (p) => h("a", { href: "#/tasks/" + enc(p.task) }, p.task);

  async function decide(p, verb) {
    try {
      const out = await api("POST", `/api/v1/lineage/proposals/${p.id}/${verb}`);
      toast(verb === "approve" ? `Batch backfill ${out.batch_backfill_id} submitted for ${p.task}` : `Proposal ${p.id} dismissed`);
    } catch (e) {
      toast(e.message, "error");
    }
    load();
  }

  const pendingColumns = [
    { label: "ID", class: "num", cell: (p) => String(p.id) },
    { label: "Task", cell: task },
    { label: "Cycles", cell: cycles },
    { label: "Changed by", cell: causes },
    { label: "Due", cell: (p) => p.auto ? ago(p.due_at) : h("span", { class: "muted", title: p.note || "waits for a person" }, p.note ? "held" : "on approval") },
    { label: "", cell: (p) => [
      h("button", { type: "button", class: "btn primary", dataset: { action: "approve", need: "operator" }, title: p.summary, onclick: () => decide(p, "approve") }, "Approve"),
      " ",
      h("button", { type: "button", class: "btn", dataset: { action: "dismiss", need: "operator" }, onclick: () => decide(p, "dismiss") }, "Dismiss")] },
  ];
  const decidedColumns = [
    { label: "ID", class: "num", cell: (p) => String(p.id) },
    { label: "Task", cell: task },
    { label: "State", cell: (p) => badge(p.state) },
    { label: "Cycles", cell: cycles },
    { label: "Changed by", cell: causes },
    { label: "Batch backfill", cell: (p) => p.batch_backfill_id ? h("a", { href: "#/batch/" + p.batch_backfill_id }, "#" + p.batch_backfill_id) : "—" },
    { label: "By", cell: (p) => p.decided_by || "—" },
    { label: "When", cell: (p) => ago(p.updated_at) },
  ];

  let shown = ""; // what is drawn: redrawn only when it changes, so that a button stays under the pointer
  async function load() {
    let ps;
    try {
      ps = await api("GET", "/api/v1/lineage/proposals");
    } catch (e) {
      if (ctx.alive()) replace(pending, errorBox(e));
      return;
    }
    if (!ctx.alive()) return;
    const sig = JSON.stringify(ps);
    if (sig === shown) return;
    shown = sig;
    const rowAttrs = (p) => ({ dataset: { proposal: p.id, state: p.state } });
    const open = ps.filter((p) => p.state === "pending");
    replace(pending, table(pendingColumns, open, { empty: "No proposal waits: no backfill changed rows of a date a task with on_change has run.", rowAttrs }),
      ...open.map((p) => h("p", { class: "hint", dataset: { summary: p.id } }, `#${p.id}: ${p.summary}`)));
    replace(decided, table(decidedColumns, ps.filter((p) => p.state !== "pending"), { empty: "None yet.", rowAttrs }));
  }
  await load();
  // Proposals change without events of their own; a batch backfill's
  // events say one was submitted, and the page looks again every 3 s.
  ctx.onEvent((ev) => { if (ev.kind === "batch_backfill") load(); });
  ctx.every(3000, load);
}
