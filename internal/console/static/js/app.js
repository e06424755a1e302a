// The console's shell: hash routes to pages, the live-event indicator and
// the token prompt. Each page is render(main, params, ctx); ctx.onEvent
// subscribes to pushed events until the user leaves the page, and
// ctx.every runs a refresh on an interval until then.
import { auth, bus, get, runEvents, useToken } from "./api.js";
import { dialog, field, h, replace, userZone, errorBox } from "./ui.js";
import { streamsPage, streamPage, objectPage } from "./streams.js";
import { tasksPage, taskPage } from "./tasks.js";
import { batchListPage, batchPage, instancePage } from "./batch.js";
import { auditPage } from "./audit.js";
import { lineagePage } from "./lineage.js";
import { nodesPage } from "./nodes.js";

const routes = [
  [/^\/?$/, () => { location.hash = "#/streams"; }],
  [/^\/streams$/, streamsPage, "streams"],
  [/^\/streams\/([^/]+)$/, streamPage, "streams"],
  [/^\/streams\/([^/]+)\/objects\/([^/]+)$/, objectPage, "streams"],
  [/^\/tasks$/, tasksPage, "tasks"],
  [/^\/tasks\/([^/]+)$/, taskPage, "tasks"],
  [/^\/batch$/, batchListPage, "batch"],
  [/^\/batch\/(\d+)$/, batchPage, "batch"],
  [/^\/instances\/(\d+)$/, instancePage, "batch"],
  [/^\/lineage$/, lineagePage, "lineage"],
  [/^\/audit$/, auditPage, "audit"],
  [/^\/nodes$/, nodesPage, "nodes"],
];

let leave = () => {};

async function show() {
  leave();
  const cleanups = [];
  leave = () => { cleanups.splice(0).forEach((f) => f()); };
  const path = location.hash.replace(/^#/, "").split("?")[0] || "/";
  const query = new URLSearchParams(location.hash.split("?")[1] || "");
  const main = document.getElementById("main");
  for (const [re, render, nav] of routes) {
    const m = path.match(re);
    if (!m) continue;
    for (const a of document.querySelectorAll("[data-nav]")) a.classList.toggle("active", a.dataset.nav === nav);
    let left = false;
    cleanups.push(() => { left = true; });
    const ctx = {
      query,
      onEvent(fn) { cleanups.push(bus.subscribe(fn)); },
      every(ms, fn) { const t = setInterval(fn, ms); cleanups.push(() => clearInterval(t)); },
      onLeave(fn) { cleanups.push(fn); },
      // alive() is false once the user has left the page: late answers are dropped.
      alive: () => !left,
    };
    try {
      await render(main, m.slice(1).map(decodeURIComponent), ctx);
    } catch (e) {
      // A page that failed shows only the error: what it drew so far goes,
      // and so do its subscriptions and timers. A page already left says nothing.
      if (left) return;
      leave();
      errorPage(main, e, e.back || [nav, "#/" + nav]);
    }
    return;
  }
  replace(main, h("h1", {}, "Not found"), h("p", {}, "No page at " + path + ". ", h("a", { href: "#/streams" }, "Go to streams")));
}

// errorPage shows err alone, with a link back to where the user can go on
// (back is [label, href]; a page sets err.back for a nearer place).
function errorPage(main, err, [label, href]) {
  const title = err.status === 404 ? "Not found" : err.status === 401 ? "Token needed" : "Something went wrong";
  replace(main, h("h1", { dataset: { errorPage: "" } }, title), errorBox(err),
    err.status === 401 ? h("p", {}, h("button", { type: "button", class: "btn primary", dataset: { action: "token" }, onclick: askAgain }, "Enter a token")) : null,
    h("p", { class: "error-back" }, h("a", { href, dataset: { back: "" } }, "← Back to " + label)));
  document.title = title + " · tidemark";
}

// The token prompt, shown when the daemon answers 401; every request
// waiting for a token shares the one prompt.
let asking = null;
auth.askToken = (refused) => {
  if (!asking) {
    const input = h("input", { type: "password", name: "token", autocomplete: "off", required: true });
    const why = refused
      ? h("p", { class: "error-box", dataset: { refused: "" } }, "The daemon refused that token: it is not one of the api.tokens in its config. Enter another.")
      : h("p", {}, "This daemon requires an API token (api.tokens in its config). It is kept in this tab only.");
    asking = dialog({
      title: "API token",
      name: "token",
      body: [why, field("Token", input)],
      buttons: [{ label: "Cancel" }, { label: "Use token", value: "ok", kind: "primary" }],
    }).then((v) => { asking = null; return v === "ok" && input.value ? input.value : null; });
  }
  return asking;
};

// askAgain is the user asking for the prompt after a cancel.
async function askAgain() {
  const token = await auth.askToken(false);
  if (token) useToken(token);
}

// A new token shows again the page that failed without one (or with a
// refused one), and reads the caller's role anew.
auth.onToken = () => {
  loadRole();
  if (document.querySelector("main [data-error-page]")) show();
};

const live = document.getElementById("live");
bus.onState = (s) => {
  live.dataset.state = s;
  live.textContent = { live: "live", reconnecting: "reconnecting…", locked: "token needed", connecting: "connecting" }[s] || s;
  live.title = s === "locked" ? "The daemon needs an API token: click to enter one" : "Live updates pushed by the daemon";
};
live.addEventListener("click", () => { if (live.dataset.state === "locked") askAgain(); });
document.getElementById("tz").textContent = userZone;

// Tests and the curious read the pushed events here.
window.tidemark = { events: bus.history, bus };

// The caller's role (body data-role): app.css hides the actions marked
// data-need with a higher role. Until it is known nothing is hidden.
async function loadRole() {
  try {
    document.body.dataset.role = (await get("/api/v1/whoami")).role;
  } catch (e) {
    // the pages show what failed
  }
}

// The Nodes link shows in a cluster only (GET /api/v1/cluster is 404
// for a daemon that runs alone).
async function showNodesLink() {
  try {
    await get("/api/v1/cluster");
    document.querySelector('[data-nav="nodes"]').hidden = false;
  } catch (e) {
    // alone, or not allowed yet: the link stays hidden
  }
}

window.addEventListener("hashchange", show);
show();
loadRole();
showNodesLink();
runEvents();
