// The live dashboard: the latest state of each process, from the topic process.state, kept current
// by a live subscription (docs/PROTOCOL.md, "Live subscriptions") of the TypeScript client.
//
// 1. GET /latest reads the latest record of each key (a page at a time).
// 2. subscribeLive resumes after the lowest of the pages' highest seqs: every record published
//    since the first page was read comes live, none is missed. A row takes a record only when its
//    seq is above the row's, so a record seen twice changes nothing.
// 3. The client subscribes again after its position on every reconnect, by itself. A gap (records
//    deleted before the page saw them) makes the page read /latest again.
//
// The URL's fragment may carry the token (#token=...) and another topic (#topic=...).
import { PromClient } from "./promlib/index.js";

const tokenKey = "promlib.live.token";
const body = document.body;
const $ = (id) => document.getElementById(id);
const rows = new Map(); // processId -> { tr, seq, state }

const params = new URLSearchParams(location.hash.slice(1));
if (params.has("token")) {
  sessionStorage.setItem(tokenKey, params.get("token"));
  params.delete("token");
  history.replaceState(null, "", location.pathname + location.search + (String(params) !== "" ? `#${params}` : ""));
}
const topic = params.get("topic") || "process.state";
$("topic").textContent = topic;
const tokenInput = $("token");
tokenInput.value = sessionStorage.getItem(tokenKey) || "";
tokenInput.addEventListener("change", () => {
  sessionStorage.setItem(tokenKey, tokenInput.value.trim());
  location.reload();
});
const token = () => sessionStorage.getItem(tokenKey) || undefined;

let gaps = 0;
let recoveries = 0;
let client;
let sub;

function status(text, state) {
  $("status").textContent = text;
  if (state) {
    body.dataset.state = state;
  }
}

function showPosition() {
  if (!sub) {
    return;
  }
  body.dataset.position = String(sub.position);
  body.dataset.connections = String(client.connectionCount);
  $("position").textContent = `position ${sub.position} · ${client.connectionCount} connection(s) · ${gaps} seq(s) in gaps`;
}

const fields = ["name", "host", "pid", "status", "cpu_pct", "mem_mb", "last_seen", "seq"];

function cell(tr, field) {
  return tr.querySelector(`td[data-field="${field}"]`);
}

function ago(ts) {
  const s = Math.max(0, Math.round((Date.now() - ts) / 1000));
  return s < 60 ? `${s}s ago` : s < 3600 ? `${Math.floor(s / 60)}m ago` : new Date(ts).toLocaleString();
}

// apply shows the record if it is newer than what its row shows.
function apply(rec) {
  const st = rec.payload;
  if (st === null || typeof st !== "object") {
    return;
  }
  const id = rec.key || st.processId;
  if (!id) {
    return;
  }
  let row = rows.get(id);
  if (row && row.seq >= rec.seq) {
    return;
  }
  if (!row) {
    const tr = document.createElement("tr");
    tr.dataset.process = id;
    for (const f of fields) {
      const td = document.createElement("td");
      td.dataset.field = f;
      tr.appendChild(td);
    }
    row = { tr, seq: 0, state: st };
    rows.set(id, row);
    const tbody = $("processes");
    const after = [...tbody.children].find((other) => other.dataset.process > id);
    tbody.insertBefore(tr, after ?? null);
    $("empty").hidden = true;
  }
  row.seq = rec.seq;
  row.state = st;
  const tr = row.tr;
  tr.dataset.status = st.status ?? "";
  tr.dataset.seq = String(rec.seq);
  cell(tr, "name").textContent = st.name ?? "";
  cell(tr, "host").textContent = st.host ?? "";
  cell(tr, "pid").textContent = st.pid ?? "";
  cell(tr, "status").textContent = st.status ?? "";
  cell(tr, "cpu_pct").textContent = typeof st.cpu_pct === "number" ? st.cpu_pct.toFixed(1) : "";
  cell(tr, "mem_mb").textContent = typeof st.mem_mb === "number" ? st.mem_mb.toFixed(0) : "";
  cell(tr, "last_seen").textContent = typeof st.last_seen_ts === "number" ? ago(st.last_seen_ts) : "";
  cell(tr, "last_seen").title = typeof st.last_seen_ts === "number" ? new Date(st.last_seen_ts).toISOString() : "";
  cell(tr, "seq").textContent = String(rec.seq);
  tr.classList.remove("changed");
  void tr.offsetWidth; // restart the animation
  tr.classList.add("changed");
}

// readLatest applies the latest record of every key and returns the seq to resume after: the
// lowest of the pages' highest seqs (a page read later may show keys that changed after an earlier
// page was read), 0 for a topic without records, or undefined when /latest cannot be read.
async function readLatest() {
  const headers = { Accept: "application/json" };
  if (token()) {
    headers.Authorization = `Bearer ${token()}`;
  }
  let since;
  let after = "";
  for (;;) {
    const q = new URLSearchParams({ topic, limit: "500" });
    if (after) {
      q.set("after", after);
    }
    const res = await fetch(`../latest?${q}`, { headers, cache: "no-store" });
    if (!res.ok) {
      let msg = `HTTP ${res.status}`;
      try {
        msg = (await res.json()).error?.msg ?? msg;
      } catch {
        // not JSON
      }
      console.warn(`live dashboard: /latest: ${msg}; following the topic from its start instead`);
      return undefined;
    }
    const page = await res.json();
    let top = 0;
    for (const rec of page.events) {
      apply(rec);
      top = Math.max(top, rec.seq);
    }
    if (page.events.length > 0) {
      since = since === undefined ? top : Math.min(since, top);
    }
    if (!page.next_after) {
      return since ?? 0;
    }
    after = page.next_after;
  }
}

async function main() {
  const url = `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}${new URL("../ws", location.href).pathname}`;
  status("connecting…", "connecting");
  client = await PromClient.connect(url, {
    token: token(),
    maxBackoffMs: 5000,
    onStateChange: (state, err) => {
      status(state === "open" ? `live: following ${topic}` : err ? `${state}: ${err.message}` : state, state);
      showPosition();
    },
    onError: (err) => console.warn("live dashboard:", err.message),
  });
  status("reading the latest states…", "open");
  // Without /latest (a token without replay, a store without latest records) the page reads the
  // whole topic instead: since 0.
  const since = (await readLatest()) ?? 0;
  sub = await client.subscribeLive(topic, (ev) => {
    apply(ev);
    queueMicrotask(showPosition);
  }, {
    since,
    onGap: (gap) => {
      gaps += gap.to - gap.from + 1;
      body.dataset.gaps = String(gaps);
      showPosition();
      console.warn(`live dashboard: seqs ${gap.from}..${gap.to} not delivered (${gap.reason}); reading the latest states again`);
      void readLatest();
    },
    onRecovery: (r) => {
      recoveries++;
      body.dataset.recoveries = String(recoveries);
      if (r.reset) {
        // The hub's log is another one (a new store): what the rows show is of the old one.
        for (const row of rows.values()) {
          row.tr.remove();
        }
        rows.clear();
        $("empty").hidden = false;
        void readLatest();
      }
    },
  });
  status(`live: following ${topic}`, client.state);
  showPosition();
  window.livedash = { client, sub, rows };
}

setInterval(() => {
  for (const row of rows.values()) {
    if (typeof row.state.last_seen_ts === "number") {
      cell(row.tr, "last_seen").textContent = ago(row.state.last_seen_ts);
    }
  }
}, 1000);

main().catch((err) => {
  status(`error: ${err && err.message ? err.message : String(err)}`, "error");
  console.error(err);
});
