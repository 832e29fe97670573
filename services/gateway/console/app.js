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
let listAsked = 0; // the newest list request: an older answer gives way to it
let filterTimer = null;
let current = null; // { id, session, lastSeq, pending: Map(tool_call_id -> li) }

const may = (action) => !!me && me.actions.includes(action);
// The gateway's own rules (deps.writable_session, deps.deletable_session): its owner (or a
// service acting for the tenant) writes to a session; its owner or a tenant admin deletes it.
const owns = (session) => me.role === "service" || session.owner === me.actor;
const mayDelete = (session) => may("session.delete") && (me.role === "admin" || session.owner === me.actor);

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
  $("access-log").hidden = !may("audit.access_log");
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
// The filters go to the server (GET /v1/sessions?status=&owner=&model=&q=), so a page is a
// page of matches, however many sessions the tenant holds.
function listQuery() {
  const q = new URLSearchParams({ limit: String(PAGE) });
  for (const [name, id] of [["status", "f-status"], ["owner", "f-owner"], ["model", "f-model"], ["q", "f-text"]]) {
    const value = $(id).value.trim();
    if (value) q.set(name, value);
  }
  return q;
}

const WHEN = new Intl.DateTimeFormat(undefined, { dateStyle: "short", timeStyle: "medium" });
const tokens = (n) => (n >= 10000 ? `${Math.round(n / 1000)}k` : String(n));

function row(s) {
  const li = el("li", { tabindex: "0", "data-session": s.session_id },
    el("div", {},
      el("strong", { class: "title", text: s.title || s.session_id }), " ",
      el("span", { class: `status ${s.status}`, text: s.ended_reason ? `${s.status} (${s.ended_reason})` : s.status }),
      el("div", { class: "quiet", text: `${s.owner} · ${s.model || "?"} · last activity ${WHEN.format(new Date(s.updated_at))} · seq ${s.last_seq}` }),
      el("div", { class: "quiet cost", text: `cost: ${s.cost.model_calls} model calls, ${tokens(s.cost.input_tokens)} in / ${tokens(s.cost.output_tokens)} out tokens` })));
  if (mayDelete(s)) {
    const bin = el("button", { type: "button", class: "bin danger", "aria-label": `Delete ${s.title || s.session_id}`, text: "🗑" });
    bin.addEventListener("click", (e) => { e.stopPropagation(); confirmDelete(s, li); });
    li.append(bin);
  }
  li.addEventListener("click", () => { location.hash = `#/s/${s.session_id}`; });
  li.addEventListener("keydown", (e) => {
    if (e.target !== li) return;
    if (e.key === "Enter") location.hash = `#/s/${s.session_id}`;
    else if (e.key === "Delete" && mayDelete(s)) { e.preventDefault(); confirmDelete(s, li); }
    else if (e.key === "ArrowDown" && li.nextElementSibling) li.nextElementSibling.focus();
    else if (e.key === "ArrowUp" && li.previousElementSibling) li.previousElementSibling.focus();
  });
  return li;
}

function drawList() {
  const started = performance.now();
  const filtered = [...listQuery().keys()].length > 1;
  $("session-list").replaceChildren(...sessions.map(row));
  $("list-notice").textContent = sessions.length ? "" : (filtered ? "No session matches the filter." : "No sessions yet.");
  $("more").hidden = !cursor;
  return performance.now() - started;
}

async function loadSessions(more = false) {
  const started = performance.now();
  const asked = ++listAsked;
  try {
    const q = listQuery();
    if (more && cursor) q.set("cursor", cursor);
    const page = await get(`/v1/sessions?${q}`);
    if (asked !== listAsked) return;
    sessions = more ? sessions.concat(page.data) : page.data;
    cursor = page.next_cursor;
    const renderMs = drawList();
    measure("console:list", started, { sessions: $("session-list").childElementCount, render_ms: renderMs });
  } catch (err) { $("list-notice").textContent = explain(err); }
}

// Asked again a moment after typing stops; an answer to an older filter is dropped.
for (const id of ["f-status", "f-owner", "f-model", "f-text"]) {
  $(id).addEventListener("input", () => { clearTimeout(filterTimer); filterTimer = setTimeout(() => loadSessions(), 250); });
}
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
// Events after which the cost line is out of date: it is asked again then.
const COST_EVENTS = new Set(["turn_ended", "compaction", "session_ended", "budget_changed"]);

// Figures for the bench (bench/console_render.py): from `start` until drawn, with one
// forced layout at the end so that style and layout are in the figure too.
function measure(name, start, detail) {
  void document.body.offsetHeight;
  performance.measure(name, { start, end: performance.now(), detail });
}

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

// One event's element, and what it changes in the view; null if shown already (a view
// draws each seq once).
function drawEvent(event) {
  if (event.seq <= current.lastSeq) return null;
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
  if (event.type === "session_ended") current.session.status = "ended";
  else if (event.type === "user_message" || event.type === "turn_started") current.session.status = "running";
  if (event.type === "model_turn") dropLive(); // the finished turn replaces what streamed
  if (event.type === "turn_ended" || event.type === "session_ended") {
    // A delta can reach the page after the turn it streams is drawn whole: once the turn is over
    // nothing of it streams any more, so what is live goes and its late deltas are not drawn.
    current.endedTurn = Math.max(current.endedTurn || 0, p.turn || current.startedTurn || 0);
    dropLive();
  }
  if (event.type === "turn_started") current.startedTurn = p.turn;
  return li;
}

// Events are drawn once per frame, however many arrived since (a history of a thousand
// comes in a few frames): one layout read, one append and one scroll per frame, where
// reading scrollHeight after each append forced a layout per event. A hidden tab, which
// runs no frames, still draws within a tenth of a second.
function onEvents(events) {
  current.queue.push(...events);
  if (current.flushing) return;
  const view = current;
  let done = false;
  const go = () => { if (!done && current === view) { done = true; flush(); } };
  view.flushing = true;
  requestAnimationFrame(go);
  setTimeout(go, 100);
}

function flush() {
  const started = performance.now();
  const events = current.queue;
  current.queue = [];
  current.flushing = false;
  // While the history at open is still arriving nothing is read from the layout and nothing
  // scrolled (each would lay out the whole growing transcript again); it scrolls once, at the end.
  const catchingUp = !current.measured;
  const stick = !catchingUp && window.innerHeight + window.scrollY >= document.body.scrollHeight - 40;
  const batch = document.createDocumentFragment();
  let lastLi = null;
  let hands = false;
  let costly = 0; // the newest seq after which the cost line is out of date
  for (const event of events) {
    const li = drawEvent(event);
    if (!li) continue;
    batch.append(li);
    lastLi = li;
    hands ||= ["tool_call", "takeover", "handback"].includes(event.type);
    if (COST_EVENTS.has(event.type)) costly = Math.max(costly, event.seq);
  }
  if (!lastLi) return;
  const live = current.live && current.live.node.isConnected ? current.live.node : null;
  if (live) live.before(batch); else $("transcript").append(batch); // the streaming turn stays last
  drawMeta();
  if (hands) drawHands();
  if (costly && !catchingUp) drawCost(costly); // the history's cost is the one asked at open
  if (stick) (live || lastLi).scrollIntoView({ block: "end" });
  if (catchingUp && current.lastSeq >= current.session.last_seq) {
    current.measured = true; // the history as it was at open is drawn: the bench's figure
    (live || lastLi).scrollIntoView({ block: "end" });
    current.renderMs += performance.now() - started;
    measure("console:transcript", current.openedAt,
      { events: $("transcript").childElementCount, render_ms: current.renderMs });
    return;
  }
  current.renderMs += performance.now() - started;
}

// ---- the model writing, live (deltas: never in the log; the model_turn replaces them) ----
function dropLive() {
  if (current.live) current.live.node.remove();
  current.live = null;
}

function onDelta(delta) {
  if (current.queue.length) flush(); // what committed before this delta is drawn before it
  if (current.endedTurn && delta.turn <= current.endedTurn) return; // a late piece of a turn already over
  let live = current.live;
  if (!live || live.call !== delta.call) {
    // A finished call is replaced by its model_turn, so a call still on the page when
    // another starts never finished: the turn is redone (after a kill or a cut stream),
    // what the lost attempt wrote goes, and the page says it restarted.
    const restarted = !!live;
    dropLive();
    const text = el("div", { class: "text live-text" });
    const thinking = el("pre", { class: "reasoning-text" });
    const details = el("details", { class: "reasoning" }, el("summary", { text: "reasoning (streaming)" }), thinking);
    details.hidden = true;
    const node = el("li", { class: "live", "data-live-call": delta.call, "aria-live": "polite" },
      el("div", { class: "head" }, el("span", { class: "type", text: "model writing…" }),
        restarted ? el("span", { class: "restart", text: "restarted: the previous attempt was lost and is redone" }) : null),
      details, text);
    live = current.live = { call: delta.call, turn: delta.turn, node, text, thinking, details };
    $("transcript").append(node);
  }
  if (delta.kind === "text") live.text.append(delta.text); // appended as a text node, never markup
  else if (delta.kind === "thinking") { live.details.hidden = false; live.thinking.append(delta.text); }
}

function drawMeta() {
  const s = current.session;
  $("s-title").textContent = s.title || s.session_id;
  $("s-meta").textContent = `${s.session_id} · ${s.owner} · ${s.model || "?"} · ${s.status}${s.ended_reason ? ` (${s.ended_reason})` : ""} · seq ${current.lastSeq}`
    + (s.parent_session_id ? ` · fork of ${s.parent_session_id} at ${s.fork_seq}` : "");
}

// Asked at open and again after each turn end, compaction and end (COST_EVENTS): the
// figures move as the session does. The newest answer wins over a slower older one. The
// cost is counted from the archive, which can trail the live stream by a batch: an answer
// that has not counted up to `seq` (its `upto_seq`) is asked again, a few times.
async function drawCost(seq = 0, tries = 0) {
  const view = current;
  const asked = (view.costAsked = (view.costAsked || 0) + 1);
  try {
    const c = await get(`/v1/sessions/${encodeURIComponent(view.id)}/cost`);
    if (current !== view || asked !== view.costAsked) return;
    if (c.upto_seq < seq && tries < 20) {
      setTimeout(() => { if (current === view && asked === view.costAsked) drawCost(seq, tries + 1); }, 150);
    }
    const tokens = Object.entries(c.tokens).map(([k, v]) => `${k} ${v}`).join(", ");
    $("s-cost").textContent = `cost: ${c.turns} turns, ${c.model_calls} model calls, ${c.tool_calls} tool calls, `
      + `${c.compactions.length} compactions; tokens ${tokens || "none"}`;
    drawBudget(c);
    $("s-compactions").replaceChildren(...c.compactions.map((k) => el("li", { "data-compaction": String(k.seq),
      text: `compaction at seq ${k.seq} (seqs ${k.covered_from_seq}–${k.covered_to_seq}): `
        + `${k.tokens_before} tokens before, ${k.tokens_after} after${k.resets_prompt_cache ? ", prompt cache reset" : ""}` })));
  } catch { if (current === view) $("s-cost").textContent = ""; }
}

// Spend against the budget in force, as the brain decides by it (the log's figures).
const CAPS = [["usd", "US$"], ["input_tokens", "input tokens"], ["output_tokens", "output tokens"]];

function drawBudget(c) {
  const line = $("s-budget");
  line.hidden = !c.budget;
  if (!c.budget) return;
  const { budget, spent, reached } = c.budget;
  const figures = CAPS.filter(([cap]) => budget[cap] != null).map(([cap, name]) =>
    `${name} ${cap === "usd" && spent.usd == null ? "unknown (no price)" : spent[cap]} of ${budget[cap]}`);
  line.textContent = `budget: ${figures.join(", ")}`
    + (reached.length ? ` — reached (${reached.join(", ")}): the session stops before its next model call; `
      + "raise it under Budget to go on" : "");
  line.classList.toggle("reached", reached.length > 0);
}

// The caps typed into the send form's Budget, or null when none is.
function budgetTyped() {
  const budget = {};
  for (const [cap, input] of [["usd", "send-usd"], ["input_tokens", "send-input-tokens"],
    ["output_tokens", "send-output-tokens"]]) {
    const value = $(input).value.trim();
    if (value) budget[cap] = Number(value);
  }
  return Object.keys(budget).length ? budget : null;
}

// While this person holds the hands, each call without a result gets a form to answer it.
const myHands = () => (me.role === "service" ? me.actor : `human:${me.principal}`);

function drawHands() {
  for (const form of current.handsForms) form.remove(); // kept, not searched for in a long transcript
  current.handsForms = [];
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
    current.handsForms.push(form);
  }
}

// The whole tree the session belongs to: up to its root through the parents, then the root's
// tree (forks of forks, any depth), each node a link and this session marked.
async function drawForks() {
  const view = current;
  const box = $("s-forks");
  box.replaceChildren();
  try {
    let root = view.session;
    for (let hops = 0; root.parent_session_id && hops < 100; hops += 1) {
      root = await get(`/v1/sessions/${encodeURIComponent(root.parent_session_id)}`);
    }
    const tree = await get(`/v1/sessions/${encodeURIComponent(root.session_id)}/tree`);
    if (current !== view || (!tree.forks.length && !view.session.parent_session_id)) return;
    box.append(el("span", { text: "tree: " }), el("ul", { class: "tree" }, treeNode(tree, view.id)));
  } catch { /* the tree is an extra; the transcript does not depend on it (a parent may be out of sight) */ }
}

function treeNode(node, here) {
  const label = `${node.fork_seq != null ? `fork at seq ${node.fork_seq}: ` : ""}${node.title || node.session_id} (${node.status})`;
  const li = el("li", { "data-node": node.session_id });
  if (node.session_id === here) li.append(el("strong", { class: "here", "aria-current": "true", text: label }));
  else {
    const b = el("button", { type: "button", class: "link", "data-goto": node.session_id, text: label });
    b.addEventListener("click", () => { location.hash = `#/s/${node.session_id}`; });
    li.append(b);
  }
  if (node.forks && node.forks.length) li.append(el("ul", {}, ...node.forks.map((f) => treeNode(f, here))));
  return li;
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
  const openedAt = performance.now();
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
  const view = { id, session, lastSeq: 0, pairs: new Map(), pending: new Map(), open: new Map(), hands: null,
    live: null, openedAt, renderMs: 0, measured: false, queue: [], flushing: false, handsForms: [] };
  current = view;
  drawMeta();
  const writable = owns(session);
  for (const button of $("s-actions").querySelectorAll("button")) {
    const needs = button.dataset.needs;
    if (needs === "session.delete") button.hidden = !mayDelete(session);
    else button.hidden = needs ? !(may(needs) && writable) : false;
  }
  $("send").hidden = !(may("session.write") && writable);
  drawCost();
  drawForks();
  stopStream = follow(id, 0, { deltas: true, onEvents: (events) => { if (current === view) onEvents(events); },
    onDelta: (delta) => { if (current === view) onDelta(delta); }, onState: (state) => {
    setStream(state);
    if (state === "gone") notice("This session was deleted.");
  } });
}

$("send").addEventListener("submit", async (e) => {
  e.preventDefault();
  const text = $("send-text").value;
  const budget = budgetTyped();
  try {
    await call("POST", `/v1/sessions/${encodeURIComponent(current.id)}/messages`,
      { text, expected_seq: current.lastSeq, ...(budget ? { budget } : {}) });
    $("send-text").value = "";
    for (const input of ["send-usd", "send-input-tokens", "send-output-tokens"]) $(input).value = "";
    notice(budget ? "Budget set and message sent." : "Message sent.");
  } catch (err) {
    if (err instanceof ApiError && err.body && err.body.code === "budget_exhausted") {
      $("send-budget").open = true;
      notice(`Not sent: ${err.message.replace(/^the brain rejected the command: /, "")}`, true);
    } else if (err instanceof ApiError && err.status === 409) {
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

// The sessions the matching events belong to: the same form, another question.
async function auditSessions() {
  const q = auditParams();
  q.set("limit", "200");
  try {
    const page = await get(`/v1/audit/sessions?${q}`);
    $("as-results").tBodies[0].replaceChildren(...page.data.map((s) => {
      const open = el("button", { type: "button", class: "link", "data-goto": s.session_id, text: s.session_id });
      open.addEventListener("click", () => { location.hash = `#/s/${s.session_id}`; });
      return el("tr", { "data-session": s.session_id }, el("td", {}, open), el("td", { text: s.title || "" }),
        el("td", { text: s.owner || "" }), el("td", { text: s.first_ts }), el("td", { text: s.last_ts }),
        el("td", { text: String(s.events) }), el("td", { text: s.types.join(", ") }),
        el("td", { text: s.deleted_at || "" }));
    }));
    $("as-notice").textContent = `${page.count} sessions${page.truncated ? " (the first 200; narrow the query for the rest)" : ""}.`;
  } catch (err) { $("as-notice").textContent = explain(err); }
}

$("a-sessions").addEventListener("click", auditSessions);

// The access log (admin): paged by the id of the last entry read.
let accessAfter = null;

async function accessLog(more = false) {
  const q = new URLSearchParams();
  const add = (name, id) => { const v = $(id).value.trim(); if (v) q.append(name, v); };
  add("principal", "al-principal"); add("since", "al-since"); add("until", "al-until");
  q.set("limit", "50");
  if (more && accessAfter != null) q.set("after", String(accessAfter));
  try {
    const page = await get(`/v1/audit/access-log?${q}`);
    const rows = page.data.map((a) => el("tr", { "data-entry": String(a.id) },
      el("td", { text: String(a.id) }), el("td", { text: a.at }), el("td", { text: a.principal }),
      el("td", { text: a.role }), el("td", { text: a.key_id }), el("td", { text: `${a.method} ${a.path}` }),
      el("td", { text: JSON.stringify(a.query) })));
    const body = $("al-results").tBodies[0];
    if (more) body.append(...rows); else body.replaceChildren(...rows);
    accessAfter = page.next_after;
    $("al-more").hidden = accessAfter == null;
    $("al-notice").textContent = `${body.rows.length} entries${accessAfter != null ? ", more on the next page" : ""}.`;
  } catch (err) { $("al-notice").textContent = explain(err); }
}

$("al-form").addEventListener("submit", (e) => { e.preventDefault(); accessLog(); });
$("al-more").addEventListener("click", () => accessLog(true));

// ---- routing ---------------------------------------------------------------------------
function route(hash) {
  if (hash !== undefined && location.hash !== hash) { location.hash = hash; return; }
  if (!me) { show("signin"); return; }
  const h = location.hash;
  if (!h.startsWith("#/s/") && stopStream) { stopStream(); stopStream = null; }
  if (h.startsWith("#/s/")) openSession(decodeURIComponent(h.slice(4)));
  else if (h === "#/audit" && may("audit.read")) { show("audit"); }
  else {
    // Rows left from the last visit go at once: the fresh page replaces them anyway, and a
    // stale row would take a key press (or an inline confirmation) with it when it does.
    $("session-list").replaceChildren();
    show("sessions");
    loadSessions();
  }
}

window.addEventListener("hashchange", () => route());

(async () => {
  if (key.get() && await signIn()) route();
  else show("signin");
})();
