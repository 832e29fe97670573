// The console: sign in, sessions, one session live, audit. Views are sections of
// index.html switched by the URL's hash; the role's allowed actions (GET /v1/me) decide
// which controls exist at all, and the server checks every request again.
import { ApiError, call, download, follow, get, key } from "./api.js";
import { el, renderEvent } from "./render.js";

const $ = (id) => document.getElementById(id);
const VIEWS = ["signin", "sessions", "session", "audit"];
const PAGE = 20;
const STORE_NOTE = "On this deployment's Postgres store, delete marks the session deleted (who, when): it disappears "
  + "from every list, read and replay through the API, but its events stay in the append-only record, "
  + "because the events table refuses DELETE.";

let me = null;
let stopStream = null;
let sessions = [];
let cursor = null;
let current = null; // { id, session, lastSeq, pending: Map(tool_call_id -> li) }

const may = (action) => !!me && me.actions.includes(action);
const owns = (session) => me.role === "service" || session.owner === me.actor;

function show(view) {
  for (const v of VIEWS) $(v).hidden = v !== view;
  $("nav").hidden = view === "signin";
}

function explain(err) {
  if (err instanceof ApiError) return `${err.status}: ${err.message}`;
  return String(err && err.message ? err.message : err);
}

// ---- sign in ---------------------------------------------------------------------------
async function signIn() {
  try {
    me = await get("/v1/me");
  } catch (err) {
    key.clear();
    me = null;
    $("signin-error").textContent = err instanceof ApiError && err.status === 401
      ? "That key was not accepted (unknown, revoked or malformed)." : explain(err);
    show("signin");
    return false;
  }
  $("signin-error").textContent = "";
  $("who").textContent = `${me.principal} · ${me.role} · tenant ${me.tenant}`;
  $("nav-audit").hidden = !may("audit.read");
  $("new-session").hidden = !may("session.create");
  return true;
}

$("signin-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  key.set($("key").value.trim());
  $("key").value = "";
  if (await signIn()) route(location.hash === "#/audit" || location.hash.startsWith("#/s/") ? location.hash : "#/sessions");
});
$("sign-out").addEventListener("click", () => {
  key.clear(); me = null; $("who").textContent = "";
  if (stopStream) stopStream();
  location.hash = "";
  show("signin");
});
$("nav-sessions").addEventListener("click", () => { location.hash = "#/sessions"; });
$("nav-audit").addEventListener("click", () => { location.hash = "#/audit"; });
$("back").addEventListener("click", () => { location.hash = "#/sessions"; });

// ---- sessions --------------------------------------------------------------------------
function matches(s) {
  const status = $("f-status").value;
  const owner = $("f-owner").value.trim().toLowerCase();
  const model = $("f-model").value.trim().toLowerCase();
  const text = $("f-text").value.trim().toLowerCase();
  return (!status || s.status === status)
    && (!owner || s.owner.toLowerCase().includes(owner))
    && (!model || (s.model || "").toLowerCase().includes(model))
    && (!text || (s.title || "").toLowerCase().includes(text));
}

function row(s) {
  const li = el("li", { tabindex: "0", "data-session": s.session_id },
    el("div", {},
      el("strong", { class: "title", text: s.title || s.session_id }), " ",
      el("span", { class: `status ${s.status}`, text: s.ended_reason ? `${s.status} (${s.ended_reason})` : s.status }),
      el("div", { class: "quiet", text: `${s.owner} · ${s.model || "?"} · last activity ${new Date(s.updated_at).toLocaleString()} · seq ${s.last_seq}` })));
  if (may("session.delete") && owns(s)) {
    const bin = el("button", { type: "button", class: "bin danger", "aria-label": `Delete ${s.title || s.session_id}`, text: "🗑" });
    bin.addEventListener("click", (e) => { e.stopPropagation(); confirmDelete(s, li); });
    li.append(bin);
  }
  li.addEventListener("click", () => { location.hash = `#/s/${s.session_id}`; });
  li.addEventListener("keydown", (e) => {
    if (e.target !== li) return;
    if (e.key === "Enter") location.hash = `#/s/${s.session_id}`;
    else if (e.key === "Delete" && may("session.delete") && owns(s)) { e.preventDefault(); confirmDelete(s, li); }
    else if (e.key === "ArrowDown" && li.nextElementSibling) li.nextElementSibling.focus();
    else if (e.key === "ArrowUp" && li.previousElementSibling) li.previousElementSibling.focus();
  });
  return li;
}

function drawList() {
  const shown = sessions.filter(matches);
  $("session-list").replaceChildren(...shown.map(row));
  $("list-notice").textContent = shown.length ? "" : (sessions.length ? "No loaded session matches the filter." : "No sessions yet.");
  $("more").hidden = !cursor;
}

async function loadSessions(more = false) {
  try {
    const page = await get(`/v1/sessions?limit=${PAGE}${more && cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
    sessions = more ? sessions.concat(page.data) : page.data;
    cursor = page.next_cursor;
    drawList();
  } catch (err) { $("list-notice").textContent = explain(err); }
}

for (const id of ["f-status", "f-owner", "f-model", "f-text"]) $(id).addEventListener("input", drawList);
$("filters").addEventListener("submit", (e) => e.preventDefault());
$("more").addEventListener("click", () => loadSessions(true));

$("new-session").addEventListener("submit", async (e) => {
  e.preventDefault();
  const body = { message: $("new-task").value }; // waits (bounded) until the session exists
  const model = $("new-model").value.trim();
  const title = $("new-title").value.trim();
  if (model) body.config = { model };
  if (title) body.title = title;
  try {
    const { body: answer } = await call("POST", "/v1/sessions", body);
    $("new-task").value = "";
    location.hash = `#/s/${answer.session_id}`;
  } catch (err) { $("list-notice").textContent = explain(err); }
});

// Inline confirmation in place of a dialog; says what delete means on this store.
function confirmDelete(s, anchor) {
  const box = el("div", { class: "confirm", role: "alertdialog", "aria-label": "Confirm delete" },
    el("p", { text: `Delete “${s.title || s.session_id}”? ${s.status === "running" ? "It is running and will be stopped first. " : ""}${STORE_NOTE}` }));
  const yes = el("button", { type: "button", class: "danger confirm-delete", text: "Delete" });
  const no = el("button", { type: "button", class: "cancel-delete", text: "Keep" });
  box.append(yes, " ", no);
  const close = () => { box.remove(); anchor.focus(); };
  no.addEventListener("click", (e) => { e.stopPropagation(); close(); });
  box.addEventListener("click", (e) => e.stopPropagation());
  box.addEventListener("keydown", (e) => { e.stopPropagation(); if (e.key === "Escape") close(); });
  yes.addEventListener("click", async (e) => {
    e.stopPropagation();
    yes.disabled = true;
    try {
      const { body } = await call("DELETE", `/v1/sessions/${encodeURIComponent(s.session_id)}`);
      box.replaceChildren(el("p", { text: body.status === "done" ? `Deleted. ${STORE_NOTE}` : `Delete sent; ${body.note || ""}` }));
      sessions = sessions.filter((x) => x.session_id !== s.session_id);
      setTimeout(() => { if (location.hash.startsWith("#/s/")) location.hash = "#/sessions"; else drawList(); }, 600);
    } catch (err) {
      const text = err instanceof ApiError && err.status === 501
        ? "This deployment's store keeps an append-only record: sessions cannot be deleted here."
        : explain(err);
      box.replaceChildren(el("p", { class: "error", text }), no);
    }
  });
  if (anchor.tagName === "LI") anchor.append(box); else anchor.after(box);
  no.focus();
}

// ---- one session -----------------------------------------------------------------------
function setStream(state) { $("s-stream").textContent = `stream: ${state}`; }

function notice(text, isError = false) {
  $("s-notice").textContent = text;
  $("s-notice").className = isError ? "error" : "";
}

function approvalControls(event) {
  const id = event.payload.tool_call_id;
  const box = el("div", { class: "actions approval", "data-approval": id });
  const approve = el("button", { type: "button", class: "approve", text: `Approve ${id}` });
  const deny = el("button", { type: "button", class: "deny danger", text: "Deny" });
  approve.addEventListener("click", () => command("POST", `approvals/${encodeURIComponent(id)}`, "approved"));
  deny.addEventListener("click", () => command("POST", `denials/${encodeURIComponent(id)}`, "denied", {}));
  box.append(approve, deny);
  return box;
}

// Whole steps a fork may end at: after a message, a reply or a result, never between a
// call and its result (the gateway refuses that with 409 and says where it could).
const FORKABLE = new Set(["user_message", "model_turn", "tool_result"]);

function forkControl(event, li) {
  const open = el("button", { type: "button", class: "fork", text: "continue from here" });
  open.addEventListener("click", () => {
    if (li.querySelector(".fork-form")) return;
    const text = el("input", { "aria-label": `First message of a fork at seq ${event.seq}` });
    text.required = true;
    const go = el("button", { type: "submit", text: `Fork at seq ${event.seq}` });
    const form = el("form", { class: "fork-form" }, text, go);
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      try {
        const { body } = await call("POST", `/v1/sessions/${encodeURIComponent(current.id)}/fork`,
          { at_seq: event.seq, message: text.value });
        location.hash = `#/s/${body.session_id}`;
      } catch (err) { notice(explain(err), true); }
    });
    li.append(form);
    text.focus();
  });
  return open;
}

function onEvent(event) {
  if (event.seq <= current.lastSeq) return; // shown already: a view draws each seq once
  current.lastSeq = event.seq;
  const li = renderEvent(event, current.pairs);
  const p = event.payload || {};
  if (FORKABLE.has(event.type) && may("session.create") && (owns(current.session) || me.role === "admin")) {
    li.querySelector(".head").append(forkControl(event, li));
  }
  if (event.type === "approval_requested" && may("session.write") && owns(current.session)) {
    li.append(approvalControls(event));
    current.pending.set(p.tool_call_id, li);
  }
  if ((event.type === "approval_granted" || event.type === "approval_denied") && current.pending.has(p.tool_call_id)) {
    const box = current.pending.get(p.tool_call_id).querySelector(".approval");
    if (box) box.remove();
    current.pending.delete(p.tool_call_id);
  }
  if (event.type === "session_ended") { // its waiting calls are over: an Approve left here would run nothing
    for (const pending of current.pending.values()) {
      const box = pending.querySelector(".approval");
      if (box) box.remove();
    }
    current.pending.clear();
  }
  if (event.type === "tool_call") current.open.set(p.tool_call_id, p.name);
  if (event.type === "tool_result") current.open.delete(p.tool_call_id);
  if (event.type === "takeover") current.hands = p.by;
  if (event.type === "handback") current.hands = null;
  if (["tool_call", "takeover", "handback"].includes(event.type)) drawHands();
  if (event.type === "session_ended") current.session.status = "ended";
  else if (event.type === "user_message" || event.type === "turn_started") current.session.status = "running";
  const stick = window.innerHeight + window.scrollY >= document.body.scrollHeight - 40;
  $("transcript").append(li);
  drawMeta();
  if (stick) li.scrollIntoView({ block: "end" });
}

function drawMeta() {
  const s = current.session;
  $("s-title").textContent = s.title || s.session_id;
  $("s-meta").textContent = `${s.session_id} · ${s.owner} · ${s.model || "?"} · ${s.status}${s.ended_reason ? ` (${s.ended_reason})` : ""} · seq ${current.lastSeq}`
    + (s.parent_session_id ? ` · fork of ${s.parent_session_id} at ${s.fork_seq}` : "");
}

async function drawCost() {
  try {
    const c = await get(`/v1/sessions/${encodeURIComponent(current.id)}/cost`);
    const tokens = Object.entries(c.tokens).map(([k, v]) => `${k} ${v}`).join(", ");
    $("s-cost").textContent = `cost: ${c.turns} turns, ${c.model_calls} model calls, ${c.tool_calls} tool calls, ${c.compactions.length} compactions; tokens ${tokens || "none"}`;
  } catch { $("s-cost").textContent = ""; }
}

// While this person holds the hands, each call without a result gets a form to answer it.
const myHands = () => (me.role === "service" ? me.actor : `human:${me.principal}`);

function drawHands() {
  for (const form of $("transcript").querySelectorAll(".hands-form")) form.remove();
  if (current.hands !== myHands()) return;
  for (const [id, name] of current.open) {
    const cell = current.pairs.get(id);
    if (!cell) continue;
    const output = el("textarea", { rows: "3", "aria-label": `Result of ${name} (${id})` });
    const form = el("form", { class: "hands-form", "data-call": id }, output,
      el("button", { type: "submit", text: "Submit result" }));
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      command("POST", `tool-results/${encodeURIComponent(id)}`, "result submitted", { output: output.value });
    });
    cell.append(form);
  }
}

// The session's place in its tree: its parent and its own forks, each a link.
async function drawForks() {
  const box = $("s-forks");
  box.replaceChildren();
  try {
    const node = await get(`/v1/sessions/${encodeURIComponent(current.id)}/tree`);
    const link = (id, label) => {
      const b = el("button", { type: "button", class: "link", "data-goto": id, text: label });
      b.addEventListener("click", () => { location.hash = `#/s/${id}`; });
      return b;
    };
    if (current.session.parent_session_id) box.append(link(current.session.parent_session_id, "parent"), " ");
    for (const fork of node.forks || []) box.append(link(fork.session_id, `fork at seq ${fork.fork_seq}: ${fork.title || fork.session_id}`), " ");
  } catch { /* the tree is an extra; the transcript does not depend on it */ }
}

async function command(method, path, what, body) {
  try {
    const { body: answer } = await call(method, `/v1/sessions/${encodeURIComponent(current.id)}/${path}`, body);
    notice(answer.status === "done" ? `${what} (${answer.outcome || "done"})` : `${what}: sent, ${answer.note || "pending"}`);
  } catch (err) { notice(explain(err), true); }
}

// A session just started (or created elsewhere) may take a moment to be stored: a 404
// is asked again for a few seconds before it is believed.
async function sessionSoon(id) {
  for (let attempt = 0; ; attempt += 1) {
    try {
      return await get(`/v1/sessions/${encodeURIComponent(id)}`);
    } catch (err) {
      if (!(err instanceof ApiError && err.status === 404) || attempt >= 10) throw err;
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  }
}

let opening = 0; // the newest openSession: an older one still awaiting gives way to it

async function openSession(id) {
  const mine = ++opening;
  if (stopStream) stopStream();
  stopStream = null;
  show("session");
  $("transcript").replaceChildren();
  $("s-confirm").hidden = true;
  notice("");
  let session;
  try {
    session = await sessionSoon(id);
  } catch (err) {
    $("s-title").textContent = id;
    $("s-meta").textContent = "";
    notice(err instanceof ApiError && err.status === 404 ? "No such session (or not one this key may see)." : explain(err), true);
    return;
  }
  // Opened twice at once (sign-in routing to the hash while the hash changes), both would
  // follow a stream into one transcript and every event would show twice.
  if (mine !== opening) return;
  const view = { id, session, lastSeq: 0, pairs: new Map(), pending: new Map(), open: new Map(), hands: null };
  current = view;
  drawMeta();
  const writable = owns(session);
  for (const button of $("s-actions").querySelectorAll("button")) {
    const needs = button.dataset.needs;
    button.hidden = needs ? !(may(needs) && writable) : false;
  }
  $("send").hidden = !(may("session.write") && writable);
  drawCost();
  drawForks();
  stopStream = follow(id, 0, { onEvent: (event) => { if (current === view) onEvent(event); }, onState: (state) => {
    setStream(state);
    if (state === "gone") notice("This session was deleted.");
  } });
}

$("send").addEventListener("submit", async (e) => {
  e.preventDefault();
  const text = $("send-text").value;
  try {
    await call("POST", `/v1/sessions/${encodeURIComponent(current.id)}/messages`, { text, expected_seq: current.lastSeq });
    $("send-text").value = "";
    notice("Message sent.");
  } catch (err) {
    if (err instanceof ApiError && err.status === 409) {
      notice(`Not sent: the session moved on since this view was drawn (you saw up to seq ${current.lastSeq}). `
        + "The new events are arriving below; read them, then send again. " + `(${err.message})`, true);
    } else notice(explain(err), true);
  }
});

$("s-actions").addEventListener("click", async (e) => {
  const act = e.target.dataset && e.target.dataset.act;
  if (!act) return;
  const id = encodeURIComponent(current.id);
  if (act === "cancel" || act === "wake" || act === "takeover" || act === "handback") {
    await command("POST", act, act === "takeover" ? "taken over" : act === "handback" ? "handed back" : `${act}`);
  } else if (act === "delete") {
    const box = $("s-confirm");
    box.replaceChildren();
    box.hidden = false;
    confirmDelete(current.session, box);
  } else if (act === "export-html") {
    download(`/v1/sessions/${id}/transcript?format=html`, `${current.id}.html`).catch((err) => notice(explain(err), true));
  } else if (act === "export-json") {
    download(`/v1/sessions/${id}/transcript?format=json`, `${current.id}.json`).catch((err) => notice(explain(err), true));
  } else if (act === "verify") {
    try {
      const r = await get(`/v1/sessions/${id}/verify`);
      notice(r.ok ? `Chain intact: ${r.events} events, last seq ${r.last_seq}.`
        : `Chain broken at seq ${r.first_bad_seq}: ${r.reason}`, !r.ok);
    } catch (err) { notice(explain(err), true); }
  }
});

// ---- audit -----------------------------------------------------------------------------
let auditCursor = null;

function auditParams() {
  const q = new URLSearchParams();
  const add = (name, id) => { const v = $(id).value.trim(); if (v) q.append(name, v); };
  add("principal", "a-principal"); add("actor", "a-actor"); add("since", "a-since"); add("until", "a-until");
  for (const t of $("a-type").value.split(/[\s,]+/).filter(Boolean)) q.append("type", t);
  add("tool", "a-tool"); add("outcome", "a-outcome");
  return q;
}

async function runAudit(more = false) {
  const q = auditParams();
  q.set("limit", "50");
  if (more && auditCursor) q.set("cursor", auditCursor);
  try {
    const page = await get(`/v1/audit/events?${q}`);
    const rows = page.data.map((ev) => el("tr", {},
      el("td", { text: ev.ts }), el("td", { text: ev.session_id }), el("td", { text: String(ev.seq) }),
      el("td", { text: ev.type }), el("td", { text: ev.actor }), el("td", { text: ev.trust })));
    const body = $("a-results").tBodies[0];
    if (more) body.append(...rows); else body.replaceChildren(...rows);
    auditCursor = page.next_cursor;
    $("a-more").hidden = !auditCursor;
    $("a-notice").textContent = `${body.rows.length} events${auditCursor ? ", more on the next page" : ""}.`;
  } catch (err) { $("a-notice").textContent = explain(err); }
}

$("audit-form").addEventListener("submit", (e) => { e.preventDefault(); runAudit(); });
$("a-more").addEventListener("click", () => runAudit(true));
for (const format of ["csv", "jsonl"]) {
  $(`a-${format}`).addEventListener("click", () => {
    const q = auditParams();
    q.set("format", format);
    download(`/v1/audit/events/export?${q}`, `audit-events.${format}`)
      .catch((err) => { $("a-notice").textContent = explain(err); });
  });
}

// ---- routing ---------------------------------------------------------------------------
function route(hash) {
  if (hash !== undefined && location.hash !== hash) { location.hash = hash; return; }
  if (!me) { show("signin"); return; }
  const h = location.hash;
  if (!h.startsWith("#/s/") && stopStream) { stopStream(); stopStream = null; }
  if (h.startsWith("#/s/")) openSession(decodeURIComponent(h.slice(4)));
  else if (h === "#/audit" && may("audit.read")) { show("audit"); }
  else { show("sessions"); loadSessions(); }
}

window.addEventListener("hashchange", () => route());

(async () => {
  if (key.get() && await signIn()) route();
  else show("signin");
})();
