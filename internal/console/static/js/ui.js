// DOM and formatting helpers shared by every page. Text from the API goes
// into the page as text (textContent), never as markup.

// h builds an element: h("a", {href: "#/x", class: "btn"}, "text", child…).
// Attributes starting with "on" are listeners; "dataset" sets data-*;
// false, null and undefined attributes and children are skipped.
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === false || v === null || v === undefined) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else if (k === "class") el.className = v;
    else if (k === "value" || k === "checked" || k === "disabled" || k === "selected") el[k] = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === false || c === null || c === undefined) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// replace empties el and appends children.
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

// User's time zone, as the browser reports it.
export const userZone = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";

const fmtCache = new Map();
function formatter(zone, withZone) {
  const key = zone + "|" + withZone;
  if (!fmtCache.has(key)) {
    fmtCache.set(key, new Intl.DateTimeFormat("sv-SE", {
      timeZone: zone, year: "numeric", month: "2-digit", day: "2-digit",
      hour: "2-digit", minute: "2-digit", second: "2-digit", hour12: false,
      timeZoneName: withZone ? "short" : undefined,
    }));
  }
  return fmtCache.get(key);
}

// time formats an ISO time in zone (default: the user's) as
// "2026-11-30 14:05:09"; "" for none.
export function time(iso, zone = userZone, withZone = false) {
  if (!iso || iso.startsWith("0001-")) return "";
  const d = new Date(iso);
  if (isNaN(d)) return String(iso);
  return formatter(zone, withZone).format(d);
}

// localTime reads "YYYY-MM-DD HH:MM" (or with a T) as a time of the user's
// zone; null when it is not one.
export function localTime(text) {
  const m = /^(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d)$/.exec((text || "").trim());
  if (!m) return null;
  const d = new Date(+m[1], +m[2] - 1, +m[3], +m[4], +m[5]);
  return d.getMonth() === +m[2] - 1 && d.getDate() === +m[3] && d.getHours() === +m[4] ? d : null;
}

// timeInput is a text input for a time written YYYY-MM-DD HH:MM in the
// user's zone: a datetime-local input shows the browser locale's form.
export function timeInput(name, attrs = {}) {
  return h("input", { type: "text", name, placeholder: "YYYY-MM-DD HH:MM", maxlength: "16", size: "16", autocomplete: "off", spellcheck: "false", ...attrs });
}

// readTime is the time a timeInput holds, in RFC 3339 UTC; "" when empty.
// Another form throws an error that names label and shows the form.
export function readTime(input, label) {
  const v = input.value.trim();
  input.removeAttribute("aria-invalid");
  if (!v) return "";
  const d = localTime(v);
  if (d) return d.toISOString();
  input.setAttribute("aria-invalid", "true");
  throw new Error(label + ": " + JSON.stringify(v) + " is not a time as YYYY-MM-DD HH:MM (your time zone, " + userZone + "): write it like " + time(new Date().toISOString()).slice(0, 10) + " 18:30");
}

// ago says how long ago iso was: "5s ago", "3m ago", "2h ago", "4d ago".
export function ago(iso, now = Date.now()) {
  if (!iso || iso.startsWith("0001-")) return "";
  const s = Math.round((now - new Date(iso)) / 1000);
  if (s < 0) return "in " + span(-s);
  return span(s) + " ago";
}

// span formats seconds as "42s", "3m 05s", "2h 10m", "3d 4h".
export function span(s) {
  s = Math.round(s);
  if (s < 60) return s + "s";
  if (s < 3600) return Math.floor(s / 60) + "m " + String(s % 60).padStart(2, "0") + "s";
  if (s < 86400) return Math.floor(s / 3600) + "h " + String(Math.floor(s / 60) % 60).padStart(2, "0") + "m";
  return Math.floor(s / 86400) + "d " + Math.floor(s / 3600) % 24 + "h";
}

const numFmt = new Intl.NumberFormat("en-US");
export const num = (n) => (n === undefined || n === null ? "" : numFmt.format(n));

export function bytes(n) {
  if (!n) return "0 B";
  const units = ["B", "kB", "MB", "GB", "TB", "PB"];
  let i = 0;
  while (n >= 1000 && i < units.length - 1) { n /= 1000; i++; }
  return (i === 0 ? n : n.toFixed(n < 10 ? 2 : n < 100 ? 1 : 0)) + " " + units[i];
}

// badge shows a status or state as a coloured pill; its class is the status.
export function badge(status, title) {
  const s = status || "-";
  return h("span", { class: "badge s-" + s.replace(/[^a-z_-]/gi, ""), title: title || null, dataset: { status: s } }, s.replaceAll("_", " "));
}

// toast shows a short message; kind is "ok" or "error".
export function toast(message, kind = "ok") {
  const box = document.getElementById("toasts");
  const el = h("div", { class: "toast " + kind, role: kind === "error" ? "alert" : "status" }, message);
  box.append(el);
  setTimeout(() => el.remove(), kind === "error" ? 12000 : 5000);
}

// errorBox is an inline error: the API's message, which says what to do.
export function errorBox(err) {
  return h("div", { class: "error-box", role: "alert" }, h("strong", {}, err.code ? err.code.replaceAll("_", " ") + ": " : "error: "), err.message || String(err));
}

// dialog opens a modal <dialog> holding body (nodes) with buttons; it
// resolves to the value of the button pressed, or null when dismissed.
// A button is {label, value, kind ("primary" | "danger"), disabled}.
// onPress(value) may return false (or a promise of false) to keep the
// dialog open, e.g. when a submission failed and shows its error.
export function dialog({ title, body, buttons, onPress, wide, name }) {
  return new Promise((resolve) => {
    const foot = h("div", { class: "dialog-foot" });
    const dlg = h("dialog", { class: wide ? "wide" : null, dataset: { dialog: name || "" } },
      h("form", { method: "dialog", class: "dialog-form", onsubmit: (e) => e.preventDefault() },
        h("h2", {}, title),
        h("div", { class: "dialog-body" }, body),
        foot));
    for (const b of buttons) {
      const btn = h("button", { type: "button", class: "btn " + (b.kind || ""), value: b.value ?? "", disabled: !!b.disabled, dataset: { action: b.value ?? "cancel" } }, b.label);
      btn.addEventListener("click", async () => {
        if (b.value === null || b.value === undefined) { dlg.close(); return; }
        btn.disabled = true;
        let keep = false;
        try { keep = onPress ? (await onPress(b.value)) === false : false; } finally { btn.disabled = false; }
        if (!keep) { result = b.value; dlg.close(); }
      });
      foot.append(btn);
    }
    let result = null;
    dlg.addEventListener("close", () => { dlg.remove(); resolve(result); });
    document.body.append(dlg);
    dlg.showModal();
  });
}

// confirm asks a yes/no question; resolves true on yes.
export async function confirm(title, message, yes = "Confirm", kind = "primary") {
  const v = await dialog({ title, name: "confirm", body: [h("p", {}, message)], buttons: [{ label: "Cancel" }, { label: yes, value: "yes", kind }] });
  return v === "yes";
}

// field wraps an input with its label and an optional hint.
// needs marks el as needing a role: app.css hides it from a caller whose
// role is lower (the daemon would refuse it anyway).
export function needs(role, el) {
  el.dataset.need = role;
  return el;
}

export function field(label, input, hint) {
  return h("label", { class: "field" }, h("span", { class: "field-label" }, label), input, hint ? h("span", { class: "hint" }, hint) : null);
}

// select builds a <select> of [value, label] pairs.
export function select(name, options, value) {
  return h("select", { name }, options.map(([v, l]) => h("option", { value: v, selected: v === value }, l)));
}

// table builds a table from column specs {label, cell(row) → node|text,
// class} and rows; empty is shown when there are none.
export function table(columns, rows, { empty = "Nothing here yet.", rowAttrs } = {}) {
  if (!rows.length) return h("p", { class: "empty" }, empty);
  return h("table", { class: "grid" },
    h("thead", {}, h("tr", {}, columns.map((c) => h("th", { class: c.class || null, title: c.title || null }, c.label)))),
    h("tbody", {}, rows.map((r) => h("tr", rowAttrs ? rowAttrs(r) : {}, columns.map((c) => h("td", { class: c.class || null }, c.cell(r)))))));
}

// refresher returns a page's refresh: load, and on failure a notice that
// the page shows the last answer (until a later refresh succeeds).
export function refresher(ctx, notice, load) {
  return async () => {
    try {
      await load();
      notice.hidden = true;
    } catch (e) {
      if (!ctx.alive()) return;
      replace(notice, errorBox({ code: "refresh failed", message: e.message + " (showing the last answer; retrying)" }));
      notice.hidden = false;
    }
  };
}

// throttle runs fn at most once per ms, trailing.
export function throttle(fn, ms) {
  let timer = null;
  return (...args) => {
    if (timer) return;
    timer = setTimeout(() => { timer = null; fn(...args); }, ms);
  };
}

// page sets the main area's heading row: a title, optional crumbs and
// actions; it returns the content container below it.
export function page(main, { title, crumbs = [], actions = [] }) {
  const content = h("div", { class: "content" });
  replace(main,
    h("div", { class: "page-head" },
      h("div", {},
        crumbs.length ? h("div", { class: "crumbs" }, crumbs.map(([label, href], i) => [i ? " / " : "", href ? h("a", { href }, label) : label])) : null,
        h("h1", {}, title)),
      h("div", { class: "actions" }, actions)),
    content);
  document.title = title + " · tidemark";
  return content;
}
