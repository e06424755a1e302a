// One task instance: its log (per attempt), the code it ran and its
// details, as a dialog from a backfill's page or as #/instances/ID; and
// the actions its state allows (internal/batch/engine rerun.go and
// commands.go decide; the daemon refuses the others with a 409).
import { APIError, bus, enc, get, post } from "./api.js";
import { ago, badge, confirm, dialog, errorBox, h, page, replace, span, time, toast, userZone } from "./ui.js";

const open = (s) => s === "waiting" || s === "running";

// allowed says which actions an instance's state allows: stop a waiting or
// running one of an open backfill; re-run a failed or stopped one (a
// blocked one of the recurring schedule too); mark succeeded one that is
// neither running nor already succeeded or dry-run.
export function allowed(inst, backfillState) {
  const scheduled = !inst.batch_backfill_id;
  return {
    stop: open(inst.state) && (scheduled || open(backfillState || "running")),
    rerun: inst.state === "failed" || inst.state === "stopped" || (scheduled && inst.state === "blocked"),
    "mark-succeeded": !["running", "succeeded", "dry_run"].includes(inst.state),
  };
}

const why = {
  stop: "only waiting or running instances of a backfill that has not ended can be stopped",
  rerun: "only failed and stopped instances can be re-run",
  "mark-succeeded": "a running instance must be stopped first; a succeeded one needs nothing",
};

// act runs one instance action after asking when it is destructive.
export async function act(inst, action, done) {
  const label = `${inst.task} #${inst.id}`;
  if (action === "stop" && !(await confirm("Stop instance?", `Stop ${label}? A running attempt is ended; it will not run again unless re-run.`, "Stop", "danger"))) return;
  if (action === "mark-succeeded" && !(await confirm("Mark succeeded?", `Record ${label} as succeeded without running it? What waits for it proceeds.`, "Mark succeeded"))) return;
  try {
    const got = await post(`/api/v1/batch/instances/${inst.id}/${action}`);
    toast({ stop: "Stopping ", rerun: "Re-running ", "mark-succeeded": "Marked succeeded: " }[action] + label);
    if (done) done(got);
  } catch (e) {
    toast(e.message, "error");
  }
}

// actionButtons are the stop / re-run / mark-succeeded buttons, enabled by
// state.
export function actionButtons(inst, backfillState, done) {
  const ok = allowed(inst, backfillState);
  return [["stop", "Stop", "danger"], ["rerun", "Re-run", ""], ["mark-succeeded", "Mark succeeded", ""]].map(([a, l, kind]) =>
    h("button", { type: "button", class: "btn small " + kind, dataset: { action: a, need: "operator" }, disabled: !ok[a], title: ok[a] ? null : why[a], onclick: () => act(inst, a, done) }, l));
}

// zoned shows an instant in the task's zone with the user's beside it.
function zoned(iso, zone) {
  if (!iso || iso.startsWith("0001-")) return "—";
  const a = time(iso, zone, true);
  return zone === userZone ? a : [a, h("span", { class: "muted" }, " · " + time(iso, userZone, true) + " yours")];
}

function duration(inst) {
  if (!inst.started_at) return "";
  const end = inst.finished_at ? new Date(inst.finished_at) : Date.now();
  return span((end - new Date(inst.started_at)) / 1000);
}

// instanceView is the tabbed Log / Code / Details view; stop() ends its
// live refresh.
export function instanceView(inst, task, tab = "log") {
  const zone = (task && task.timezone) || "UTC";
  const tabs = h("div", { class: "tabs", role: "tablist" });
  const body = h("div", { class: "tab-body" });
  const el = h("div", { class: "instance-view", dataset: { instance: inst.id } }, tabs, body);
  let current = tab;
  let attempt = 0; // 0: the latest
  let timer = null;

  async function showLog() {
    const pre = h("pre", { class: "log", dataset: { loading: "" } }, "Loading…");
    const bar = h("div", { class: "log-bar" });
    if (inst.attempt > 1) {
      const sel = h("select", { name: "attempt", onchange: () => { attempt = +sel.value; render(); } },
        Array.from({ length: inst.attempt }, (_, i) => inst.attempt - i).map((n) => h("option", { value: n, selected: n === (attempt || inst.attempt) }, `Attempt ${n}${n === inst.attempt ? " (latest)" : ""}`)));
      bar.append(sel);
    } else {
      bar.append(h("span", { class: "muted" }, inst.attempt ? "Attempt 1" : "Not run yet"));
    }
    bar.append(h("span", { class: "spacer" }), h("button", { type: "button", class: "btn small", dataset: { action: "refresh-log" }, onclick: render }, "Refresh"));
    replace(body, bar, pre);
    if (!inst.attempt) {
      replace(pre, inst.state === "dry_run" ? "Dry-run: recorded as succeeded without running." : inst.state === "blocked" ? "Blocked: its task is paused; it does not run." : "This instance has not run yet.");
      delete pre.dataset.loading;
      return;
    }
    try {
      const lv = await get(`/api/v1/batch/instances/${inst.id}/log` + (attempt ? "?attempt=" + attempt : ""));
      replace(pre, lv.log || "(the attempt wrote nothing)");
      pre.dataset.attempt = lv.attempt;
    } catch (e) {
      if (e instanceof APIError && e.status === 404) {
        replace(pre, inst.state === "running" ? "The attempt is running: its log is kept when it ends (this view refreshes then)." : "No log was kept for this attempt.");
      } else {
        body.append(errorBox(e));
      }
    }
    delete pre.dataset.loading;
  }

  function showCode() {
    const rendered = inst.rendered;
    replace(body,
      h("p", { class: "hint" }, rendered ? "The code as run" + (inst.attempt ? ` (attempt ${inst.attempt})` : "") + ", expressions rendered for business time " + time(inst.biz_time, zone).slice(0, 16) + "."
        : "Not run yet: the task's code as configured; its ${…} expressions are rendered when the instance runs."),
      rendered || (task && task.code) ? h("pre", { class: "code" }, rendered || task.code) : h("p", { class: "muted" }, task && task.type === "noop" ? "A no-op task runs nothing." : "No code."));
  }

  function showDetails() {
    const kv = (pairs) => h("dl", { class: "kv" }, pairs.filter(Boolean).map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
    const outputs = Object.entries(inst.outputs || {});
    replace(body, kv([
      ["Instance", "#" + inst.id],
      ["Backfill", inst.batch_backfill_id ? h("a", { href: "#/batch/" + inst.batch_backfill_id }, "#" + inst.batch_backfill_id) : "the recurring schedule"],
      ["Task", h("a", { href: "#/tasks/" + enc(inst.task) }, inst.task)],
      ["State", [badge(inst.state), inst.mode !== "run" ? h("span", { class: "muted" }, " planned as " + inst.mode.replace("_", "-")) : null]],
      inst.reason && ["Reason", inst.reason],
      inst.error && ["Error", h("span", { class: "err" }, inst.error)],
      ["Business time", zoned(inst.biz_time, zone)],
      inst.biz_end && inst.biz_end !== inst.biz_time && !inst.biz_end.startsWith("0001-") && ["Business time, last", zoned(inst.biz_end, zone)],
      ["Scheduled", zoned(inst.scheduled, zone)],
      ["Group", `group ${inst.group}, date ${inst.seq + 1} of the group, dispatch order ${inst.order}`],
      ["Resource group", inst.resource_group],
      ["Attempt", String(inst.attempt)],
      inst.next_try && ["Next try", zoned(inst.next_try, zone)],
      ["Started", zoned(inst.started_at, zone)],
      ["Finished", zoned(inst.finished_at, zone)],
      inst.started_at && ["Duration", duration(inst)],
      ["Waits for", (inst.deps || []).length ? inst.deps.map((d, i) => [i ? ", " : "", h("a", { href: "#/instances/" + d }, "#" + d)]) : "nothing"],
      outputs.length && ["Outputs", h("table", { class: "mini" }, outputs.map(([k, v]) => h("tr", {}, h("td", { class: "mono" }, k), h("td", { class: "mono" }, v))))],
    ]));
  }

  function render() {
    for (const b of tabs.children) b.classList.toggle("active", b.dataset.tab === current);
    if (current === "log") return showLog();
    if (current === "code") return showCode();
    return showDetails();
  }
  for (const [k, l] of [["log", "Log"], ["code", "Code"], ["details", "Details"]]) {
    tabs.append(h("button", { type: "button", role: "tab", dataset: { tab: k }, onclick: () => { current = k; render(); } }, l));
  }
  render();

  // Live: re-read the instance when an event names it.
  const unsubscribe = bus.subscribe(async (ev) => {
    if (ev.kind !== "instance" || ev.instance_id !== inst.id) return;
    clearTimeout(timer);
    timer = setTimeout(async () => {
      try {
        inst = await get("/api/v1/batch/instances/" + inst.id);
        el.dispatchEvent(new CustomEvent("instance", { detail: inst }));
        render();
      } catch { /* the next event or a refresh retries */ }
    }, 300);
  });
  return { el, stop: () => { unsubscribe(); clearTimeout(timer); } };
}

// openInstance shows an instance in a dialog, on tab.
export async function openInstance(inst, task, tab, backfillState, done) {
  const v = instanceView(inst, task, tab);
  const badgeBox = h("span", {}, badge(inst.state));
  const actions = h("div", { class: "actions" }, actionButtons(inst, backfillState, done));
  v.el.addEventListener("instance", (e) => {
    replace(badgeBox, badge(e.detail.state));
    replace(actions, actionButtons(e.detail, backfillState, done));
  });
  const head = h("div", { class: "inst-head" }, badgeBox, h("span", { class: "mono" }, time(inst.biz_time, (task && task.timezone) || "UTC").slice(0, 16)),
    h("a", { href: "#/instances/" + inst.id, onclick: () => document.querySelector('dialog[data-dialog="instance"]')?.close() }, "Open as a page"), h("span", { class: "spacer" }), actions);
  try {
    await dialog({ title: `${inst.task} · instance #${inst.id}`, name: "instance", wide: true, body: [head, v.el], buttons: [{ label: "Close" }] });
  } finally {
    v.stop();
  }
}

export async function instancePage(main, [id], ctx) {
  let inst, tasks = [];
  try {
    [inst, tasks] = await Promise.all([get("/api/v1/batch/instances/" + id), get("/api/v1/tasks").catch(() => [])]);
  } catch (e) {
    page(main, { title: "Instance #" + id, crumbs: [["Batch backfills", "#/batch"]] }).append(errorBox(e));
    return;
  }
  if (!ctx.alive()) return;
  const task = tasks.find((t) => t.id === inst.task);
  let bf = null;
  if (inst.batch_backfill_id) bf = await get("/api/v1/batch/backfills/" + inst.batch_backfill_id).catch(() => null);
  if (!ctx.alive()) return;
  const actions = h("div", { class: "actions" });
  const state = h("span", {});
  const content = page(main, {
    title: `${inst.task} · #${inst.id}`,
    crumbs: [["Batch backfills", "#/batch"], inst.batch_backfill_id ? [bf ? bf.name : "#" + inst.batch_backfill_id, "#/batch/" + inst.batch_backfill_id] : ["recurring schedule"], [inst.task, "#/tasks/" + enc(inst.task)]],
    actions: [state, actions],
  });
  const reload = async () => {
    try {
      inst = await get("/api/v1/batch/instances/" + id);
      if (inst.batch_backfill_id) bf = await get("/api/v1/batch/backfills/" + inst.batch_backfill_id);
      if (ctx.alive()) paint();
    } catch (e) {
      toast(e.message, "error");
    }
  };
  const paint = () => {
    replace(state, badge(inst.state), h("span", { class: "muted" }, " " + (inst.finished_at ? "finished " + ago(inst.finished_at) : inst.started_at ? "started " + ago(inst.started_at) : "")));
    replace(actions, actionButtons(inst, bf && bf.state, reload));
  };
  paint();
  const v = instanceView(inst, task, ctx.query.get("tab") || "log");
  v.el.addEventListener("instance", (e) => { inst = e.detail; paint(); });
  ctx.onLeave(v.stop);
  content.append(h("section", { class: "panel" }, v.el));
}
