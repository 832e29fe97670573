// Builds the transcript's DOM. Everything an event carries is untrusted: it is placed with
// textContent only (never parsed as markup), so markup in a tool's output stays visible text.
export const TRUNCATE = 2000;
const MARKERS = new Set(["turn_started", "turn_ended", "woke", "snapshot", "title", "message_queued",
  "file_reference", "compaction"]);

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (name === "class") node.className = value;
    else if (name === "text") node.textContent = value;
    else if (name.startsWith("data-") || name === "type" || name === "tabindex" || name === "role"
             || name.startsWith("aria-") || name === "id") node.setAttribute(name, value);
  }
  for (const child of children) if (child) node.append(child);
  return node;
}

// Long text cut at TRUNCATE characters, with a button that shows the rest.
export function block(text, cls = "") {
  const pre = el("pre", { class: cls });
  if (text.length <= TRUNCATE) {
    pre.textContent = text;
    return pre;
  }
  pre.textContent = `${text.slice(0, TRUNCATE)}…`;
  const more = el("button", { type: "button", class: "show-all", text: `show all (${text.length} characters)` });
  more.addEventListener("click", () => { pre.textContent = text; more.remove(); });
  return el("div", {}, pre, more);
}

// A turn's reasoning for people to read, as `events.reasoning_of` has it: from the thinking
// blocks where the turn kept them (reasoning is stored once, there), else `reasoning`.
export function reasoningOf(p) {
  if (!p.blocks || !p.blocks.length) return p.reasoning || [];
  return p.blocks.filter((b) => b.type === "thinking" || b.type === "redacted_thinking")
    .map((b) => (b.type === "thinking" ? String(b.thinking || "") : "[redacted thinking]"));
}

// Collapsed, and marked as the model's reasoning rather than its answer.
export function reasoning(text) {
  const d = el("details", { class: "reasoning" }, el("summary", { text: "reasoning" }));
  d.append(block(text, "reasoning-text"));
  return d;
}

// One formatter for every event: `toLocaleTimeString` builds one per call, which a
// thousand-event transcript paid a thousand times.
const CLOCK = new Intl.DateTimeFormat(undefined, { hour: "numeric", minute: "2-digit", second: "2-digit" });

function head(event) {
  return el("div", { class: "head" },
    el("span", { class: "seq", text: `#${event.seq}` }),
    el("span", { class: "type", text: event.type }),
    el("span", { class: "actor", text: event.actor }),
    el("span", { class: `trust trust-${event.trust}`, text: event.trust }),
    el("time", { text: CLOCK.format(new Date(event.ts)) }));
}

function summary(event) {
  const p = event.payload || {};
  switch (event.type) {
    case "turn_started": return `turn ${p.turn}`;
    case "title": return p.title;
    case "message_queued": return p.text;
    case "woke": return "woke";
    case "compaction": return `compacted up to seq ${p.covered_from_seq}`;
    default: return "";
  }
}

// A budget's caps in words: `usd 5, output_tokens 20000`.
function caps(budget) {
  return Object.entries(budget || {}).map(([cap, value]) => `${cap} ${value}`).join(", ");
}

// One rendered event; `pairs` maps tool_call_id -> the result cell beside its call.
export function renderEvent(event, pairs) {
  const p = event.payload || {};
  const li = el("li", { class: event.type, "data-seq": String(event.seq), "data-type": event.type });
  if (MARKERS.has(event.type)) {
    li.classList.add("marker");
    li.append(head(event), el("span", { class: "text", text: summary(event) }));
    return li;
  }
  li.append(head(event));
  switch (event.type) {
    case "session_created":
      li.append(el("div", { class: "text", text: `model ${p.config && p.config.model}, owner ${p.owner}` }));
      break;
    case "user_message":
      li.append(el("div", { class: "text", text: p.text }));
      break;
    case "model_turn": {
      const thought = reasoningOf(p);
      if (thought.length) li.append(reasoning(thought.join("\n\n")));
      li.append(el("div", { class: "text", text: p.text }));
      break;
    }
    case "tool_call": {
      // A declared tool's call is answered by the session's own harness, never by a runner.
      const harness = p.answered_by === "client";
      const result = el("div", { class: "result", "data-result-for": p.tool_call_id },
        el("div", { class: "quiet", text: harness ? "waiting for the session's harness…" : "waiting for the result…" }));
      const call = el("div", { class: "call" }, el("strong", { text: p.name }),
        ...(harness ? [el("span", { class: "harness", text: " answered by your harness" })] : []),
        block(JSON.stringify(p.input, null, 2)));
      li.append(el("div", { class: "pair" }, call, result));
      pairs.set(p.tool_call_id, result);
      break;
    }
    case "tool_result": {
      const cell = pairs.get(p.tool_call_id);
      const details = el("details", { open: "" }, el("summary", {
        text: `${p.name} output${p.is_error ? " (error)" : ""}${p.duration_ms != null ? `, ${p.duration_ms} ms` : ""}` }));
      details.open = true;
      details.append(block(p.output, "output"));
      if (cell) { // shown beside its call; the event itself stays a quiet line in order
        cell.replaceChildren(head(event), details);
        cell.classList.toggle("error", !!p.is_error);
        li.classList.add("marker");
        li.append(el("span", { class: "text", text: `result of ${p.tool_call_id}, shown beside its call` }));
      } else {
        li.append(details);
      }
      break;
    }
    case "approval_requested":
      li.append(el("div", { class: "text", text: p.reason || `tool call ${p.tool_call_id} needs approval` }));
      break;
    case "approval_granted": case "approval_denied":
      li.append(el("div", { class: "text", text: `${p.tool_call_id}${p.reason ? `: ${p.reason}` : ""}` }));
      break;
    case "session_ended":
      li.append(el("div", { class: "text", text: `ended: ${p.reason}${p.detail ? ` (${p.detail})` : ""}` }));
      break;
    case "budget_changed":
      li.append(el("div", { class: "text", text: `budget set: ${caps(p.budget)}${p.previous ? ` (was ${caps(p.previous)})` : ""}` }));
      break;
    case "input_rejected":
      li.append(el("div", { class: "text error", text: `${p.code || ""} ${p.reason || ""}` }));
      break;
    case "turn_queued":
      li.append(el("div", { class: "text", text: `turn ${p.turn} queued: ${p.running} of ${p.limit} running sessions in use` }));
      break;
    default:
      li.append(block(JSON.stringify(p, null, 2)));
  }
  return li;
}
