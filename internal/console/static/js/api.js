// The API client: every console action is an API call, as in the CLI.
// A token, when the daemon asks for one, is kept in this tab's session
// storage only.

const tokenKey = "tidemark.token";

export class APIError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

function headers(extra = {}) {
  // The daemon records "console" (or "console:TOKEN NAME") as who started a backfill.
  const h = { Accept: "application/json", "X-Tidemark-Client": "console", ...extra };
  const token = sessionStorage.getItem(tokenKey);
  if (token) h.Authorization = "Bearer " + token;
  return h;
}

// auth is the token flow. askToken is set by the app: it asks the user for
// a token (saying the last one was refused when refused is true) and
// resolves to it, or to null when they cancel. A cancel sticks: nothing
// asks again until the user does (useToken), and the requests that need a
// token fail with the daemon's 401. onToken is called with each new token.
export const auth = {
  askToken: async (_refused) => null,
  declined: false,
  onToken: () => {},
  waiting: [],
};

// useToken keeps token for this tab and wakes whatever waits for one.
export function useToken(token) {
  sessionStorage.setItem(tokenKey, token);
  auth.declined = false;
  for (const wake of auth.waiting.splice(0)) wake();
  auth.onToken(token);
}

// newToken is called on a 401 to a request that carried sent (null for
// none); it resolves true when there is another token to try.
async function newToken(sent) {
  const now = sessionStorage.getItem(tokenKey);
  if (now && now !== sent) return true; // another request got one meanwhile
  if (auth.declined) return false;
  const token = await auth.askToken(!!sent);
  if (sessionStorage.getItem(tokenKey) !== now) return true; // asked and answered elsewhere
  if (!token) {
    auth.declined = true;
    if (sent) sessionStorage.removeItem(tokenKey); // it was refused
    return false;
  }
  useToken(token);
  return true;
}

// tokenChanged resolves when useToken is next called.
const tokenChanged = () => new Promise((r) => auth.waiting.push(r));

// api sends one request and returns the decoded JSON body (or text for
// non-JSON answers). Errors become APIError with the API's code and message.
export async function api(method, path, body) {
  for (;;) {
    const init = { method, headers: headers() };
    if (body !== undefined) {
      init.body = JSON.stringify(body);
      init.headers["Content-Type"] = "application/json";
    }
    let res;
    try {
      res = await fetch(path, init);
    } catch (e) {
      throw new APIError(0, "unreachable", "the daemon did not answer: is it running? (" + e.message + ")");
    }
    // Asked again after a refused token until the user gives one that works, or cancels.
    if (res.status === 401 && await newToken(sentToken(init))) continue;
    const type = res.headers.get("Content-Type") || "";
    const data = type.includes("json") ? await res.json() : await res.text();
    if (!res.ok) {
      const err = (data && data.error) || {};
      const e = new APIError(res.status, err.code || "http_" + res.status, err.message || String(data));
      e.unknown = err.unknown; // what a 404 did not find
      throw e;
    }
    return data;
  }
}

// Shortcuts.
export const get = (path) => api("GET", path);
export const post = (path, body) => api("POST", path, body);

// q builds a query string from the defined, non-empty values of params.
export function q(params) {
  const s = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== "") s.set(k, v);
  }
  const str = s.toString();
  return str ? "?" + str : "";
}

// enc quotes one path segment.
export const enc = encodeURIComponent;

// The live event feed: one server-sent event connection (read with fetch so
// the token can go in a header), re-opened with backoff when it drops.
// Every event is kept in bus.history (newest last, bounded) and dispatched
// to subscribers.
export const bus = {
  history: [],
  subscribers: new Set(),
  state: "connecting",
  onState: () => {},
  subscribe(fn) {
    this.subscribers.add(fn);
    return () => this.subscribers.delete(fn);
  },
  publish(ev) {
    ev.received_at = new Date().toISOString();
    this.history.push(ev);
    if (this.history.length > 5000) this.history.splice(0, this.history.length - 5000);
    for (const fn of this.subscribers) {
      try { fn(ev); } catch (e) { console.error(e); }
    }
  },
  setState(s) {
    this.state = s;
    this.onState(s);
  },
};

export async function runEvents() {
  let delay = 500;
  for (;;) {
    try {
      const init = { headers: headers({ Accept: "text/event-stream" }) };
      const res = await fetch("/api/v1/events", init);
      if (res.status === 401) {
        bus.setState("locked");
        if (!(await newToken(sentToken(init)))) await tokenChanged();
        continue;
      }
      if (!res.ok || !res.body) throw new Error("HTTP " + res.status);
      bus.setState("live");
      delay = 500;
      await readEvents(res.body);
    } catch (e) {
      // fall through to the backoff
    }
    bus.setState("reconnecting");
    await sleep(delay);
    delay = Math.min(delay * 2, 10000);
  }
}

async function readEvents(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += value;
    let i;
    while ((i = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, i);
      buf = buf.slice(i + 2);
      const data = block.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart()).join("\n");
      if (data) {
        try { bus.publish(JSON.parse(data)); } catch (e) { console.error("bad event", e); }
      }
    }
  }
}

// sentToken is the token a request's init carried, or null.
const sentToken = (init) => (init.headers.Authorization || "").replace(/^Bearer /, "") || null;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
