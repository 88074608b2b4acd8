// The log view: every message of the conversation (up to 20,000 per read) in one timeline,
// tool-call groups boxed, drawn into a DocumentFragment and appended once. The time from
// building to the next frame is measured and shown (`data-render-ms` on #log).

import { Role, type Message } from "../../../clients/typescript/src/gen/ctxd/v1/messages_pb.js";
import { append, h, on, type Child } from "../dom.js";
import { num } from "../format.js";
import { loadLog, MAX_LOG_MESSAGES } from "../log_data.js";
import { viewHref } from "../routes.js";
import type { View } from "../view.js";
import { messageElement, type LogIndex } from "./message.js";

const ROLES = ["system", "user", "assistant", "tool"] as const;

export const logView: View = async (ctx) => {
  const seq = parseSequence(ctx.params.get("seq"));
  let after = parseSequence(ctx.params.get("from")) ?? 0n;
  if (!ctx.params.has("from") && seq !== undefined && seq > BigInt(MAX_LOG_MESSAGES)) after = seq - 100n;
  const status = h("p", { class: "status", id: "log-status" }, "loading…");
  ctx.root.append(status);
  // Paging stops when the person leaves the view (`live`).
  const log = await loadLog(ctx.id, after, MAX_LOG_MESSAGES, {
    onPage: (n) => { status.textContent = `loading… ${num(n)} messages`; },
    live: ctx.live,
  });
  if (!ctx.live()) return;
  const container = h("div", { id: "log", class: "log" });
  append(ctx.root, [toolbar(ctx.id, container), rangeNote(ctx.id, log.messages, log.after, log.truncated, log.nextAfter), container]);

  const started = performance.now();
  container.append(timeline(ctx.id, log.messages));
  container.getBoundingClientRect(); // one layout for the whole log, inside the measurement
  await new Promise<void>((resolve) => requestAnimationFrame(() => resolve()));
  const ms = performance.now() - started;
  container.dataset.renderMs = ms.toFixed(1);
  container.dataset.count = String(log.messages.length);
  status.textContent = `rendered ${num(log.messages.length)} messages in ${ms.toFixed(1)} ms`;
  if (seq !== undefined) highlight(seq, status);
};

/** Groups the messages (an assistant message with calls and the results right after it) and
 *  draws them into one fragment. */
export function timeline(conversationId: string, messages: Message[]): DocumentFragment {
  const index: LogIndex = { conversationId, calls: new Map() };
  for (const m of messages) for (const call of m.toolCalls) index.calls.set(call.id, { call, sequence: m.sequence });
  const fragment = document.createDocumentFragment();
  for (let i = 0; i < messages.length;) {
    const m = messages[i]!;
    if (m.role !== Role.ASSISTANT || m.toolCalls.length === 0) {
      fragment.append(messageElement(m, index));
      i++;
      continue;
    }
    const ids = new Set(m.toolCalls.map((c) => c.id));
    let j = i + 1;
    while (j < messages.length && messages[j]!.role === Role.TOOL && ids.has(messages[j]!.toolCallId)) j++;
    fragment.append(toolGroup(messages.slice(i, j), index));
    i = j;
  }
  return fragment;
}

function toolGroup(group: Message[], index: LogIndex): HTMLElement {
  const [call, ...results] = group as [Message, ...Message[]];
  const names = call.toolCalls.map((c) => c.name).join(", ");
  const answered = `${results.length} of ${call.toolCalls.length} answered here`;
  return h("section", { class: "tool-group", "data-sequence": call.sequence, "data-calls": call.toolCalls.length, "data-results": results.length },
    h("div", { class: "group-head" }, `tool calls #${call.sequence}: ${names} · ${answered}`),
    group.map((m) => messageElement(m, index)));
}

function toolbar(id: string, container: HTMLElement): HTMLElement {
  const toggles = [...ROLES.map((r) => [r, `hide-role-${r}`] as const), ["UI-only", "hide-ui"] as const].map(([label, cls]) =>
    h("label", { class: "toggle" }, on(h("input", { type: "checkbox", checked: true }), "change", (e) => {
      container.classList.toggle(cls, !(e.target as HTMLInputElement).checked);
    }), ` ${label}`));
  const jump = h("input", { type: "number", min: 1, placeholder: "sequence", class: "narrow", "aria-label": "go to sequence" });
  const form = on(h("form", { class: "inline" }, jump, h("button", { type: "submit" }, "go")), "submit", (e) => {
    e.preventDefault();
    if (jump.value) location.hash = viewHref(id, "log", { seq: jump.value });
  });
  return h("div", { class: "toolbar" }, h("span", { class: "label" }, "show"), toggles, form,
    on(h("button", { type: "button" }, "reload"), "click", () => window.dispatchEvent(new HashChangeEvent("hashchange"))));
}

function rangeNote(id: string, messages: Message[], after: bigint, truncated: boolean, nextAfter: bigint): Child {
  const first = messages[0]?.sequence;
  const last = messages.at(-1)?.sequence;
  if (first === undefined || last === undefined) return h("p", { class: "note" }, "The log is empty.");
  if (!truncated && after === 0n) return null;
  return h("p", { class: "note warn", id: "log-truncated" },
    `Showing messages ${first}–${last}`,
    truncated ? ` (at most ${num(MAX_LOG_MESSAGES)} per read; the log goes on). ` : ". ",
    after > 0n ? [h("a", { href: viewHref(id, "log") }, "from the start"), " "] : null,
    truncated ? h("a", { href: viewHref(id, "log", { from: nextAfter }) }, `continue after ${nextAfter}`) : null);
}

function highlight(seq: bigint, status: HTMLElement): void {
  const el = document.getElementById(`m-${seq}`);
  if (!el) {
    status.append(` · message ${seq} is not in this part of the log`);
    return;
  }
  el.classList.add("highlight");
  el.scrollIntoView({ block: "center" });
}

function parseSequence(raw: string | null): bigint | undefined {
  return raw && /^\d{1,19}$/.test(raw) ? BigInt(raw) : undefined;
}
