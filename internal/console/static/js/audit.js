// The audit trail: every backfill, stream and batch, filtered as the API
// filters it (the API checks every filter and says what it accepts), and
// exported as CSV or JSON.
import { api, APIError, q } from "./api.js";
import { ago, badge, bytes, errorBox, field, h, localTime, num, page, readTime, replace, select, table, throttle, time, timeInput } from "./ui.js";

const filters = ["kind", "stream", "object", "task", "state", "started_by", "since", "until", "limit"];

export async function auditPage(main, _params, ctx) {
  const form = h("form", { class: "panel audit-filters", onsubmit: (e) => { e.preventDefault(); apply(); } });
  const inputs = {
    kind: select("kind", [["", "stream and batch"], ["stream", "stream"], ["batch", "batch"]], ctx.query.get("kind") || ""),
    stream: h("input", { name: "stream", placeholder: "stream name" }),
    object: h("input", { name: "object", placeholder: "schema.table" }),
    task: h("input", { name: "task", placeholder: "task id" }),
    state: h("input", { name: "state", placeholder: "e.g. failed" }),
    started_by: h("input", { name: "started_by", placeholder: "cli, api:ci, automatic" }),
    // Text, not datetime-local (shown in the browser locale's form).
    since: timeInput("since"),
    until: timeInput("until"),
    limit: h("input", { name: "limit", type: "number", min: 1, max: 100000, placeholder: "1000" }),
  };
  for (const k of filters) if (ctx.query.get(k) && k !== "kind") inputs[k].value = ctx.query.get(k);
  // A link's RFC 3339 time is shown as the inputs write it.
  for (const k of ["since", "until"]) {
    const v = inputs[k].value;
    if (v && !localTime(v) && !isNaN(Date.parse(v))) inputs[k].value = time(v).slice(0, 16);
  }
  const hints = { since: "YYYY-MM-DD HH:MM, your time zone", until: "YYYY-MM-DD HH:MM, your time zone" };
  replace(form,
    h("div", { class: "form-grid" }, filters.map((k) => field(k.replace("_", " "), inputs[k], hints[k]))),
    h("div", { class: "row" },
      h("button", { class: "btn primary", type: "submit" }, "Apply"),
      h("button", { class: "btn", type: "button", dataset: { action: "export-csv" }, onclick: () => download("csv") }, "Export CSV"),
      h("button", { class: "btn", type: "button", dataset: { action: "export-json" }, onclick: () => download("json") }, "Export JSON")));
  const out = h("div", {});
  const content = page(main, { title: "Audit trail", crumbs: [["Every backfill, stream and batch, newest first"]] });
  content.append(form, out);

  function params() {
    const p = {};
    for (const k of filters) {
      p[k] = k === "since" || k === "until" ? readTime(inputs[k], k) : inputs[k].value.trim();
    }
    return p;
  }

  async function apply() {
    try {
      const recs = await api("GET", "/api/v1/audit" + q(params()));
      if (!ctx.alive()) return;
      replace(out, table(columns, recs, { empty: "No backfill matches these filters.", rowAttrs: (r) => ({ dataset: { kind: r.kind, id: r.id } }) }));
    } catch (e) {
      // A time in another form is refused here, naming the filter.
      replace(out, errorBox(e instanceof APIError ? e : new APIError(0, "bad_request", e.message)));
    }
  }

  async function download(format) {
    try {
      const body = await api("GET", "/api/v1/audit" + q({ ...params(), format }));
      const text = typeof body === "string" ? body : JSON.stringify(body, null, 2);
      const url = URL.createObjectURL(new Blob([text], { type: format === "csv" ? "text/csv" : "application/json" }));
      const a = h("a", { href: url, download: "tidemark-audit." + format });
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 1000);
    } catch (e) {
      replace(out, errorBox(e instanceof APIError ? e : new APIError(0, "bad_request", e.message)));
    }
  }

  ctx.onEvent(throttle(() => { if (ctx.alive()) apply(); }, 1000));
  await apply();
}

const columns = [
  { label: "Kind", cell: (r) => r.kind },
  { label: "Backfill", cell: (r) => h("a", { href: link(r) }, r.name) },
  { label: "State", cell: (r) => [badge(r.state), r.error ? h("div", { class: "hint" }, r.error) : null] },
  { label: "Started by", cell: (r) => r.started_by },
  { label: "Created", cell: (r) => h("span", { title: ago(r.created_at) }, time(r.created_at)) },
  { label: "Finished", cell: (r) => time(r.finished_at) },
  { label: "Figures", cell: figures },
];

function link(r) {
  if (r.kind === "batch") return "#/batch/" + r.id;
  return "#/streams/" + encodeURIComponent(r.stream) + "/objects/" + encodeURIComponent(r.object);
}

function figures(r) {
  const f = r.figures || {};
  if (r.kind === "batch") {
    const states = Object.entries(f.states || {}).map(([s, n]) => s + " " + n).join(", ");
    return num(f.instances) + " instances" + (states ? " (" + states + ")" : "");
  }
  return num(f.rows_written) + " rows written · " + bytes(f.bytes) + " · " + num(f.chunks) + " chunks";
}
