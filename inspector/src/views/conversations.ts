// The conversation list: ListConversations with its filters (status, labels) and page size in
// the route (`#/?status=...&labels=k=v,k2=v2&size=...`), and its keyset paging as next/back.

import { api } from "../api.js";
import { ConversationStatusSchema, type Conversation } from "../../../clients/typescript/src/gen/ctxd/v1/conversations_pb.js";
import { field, h, on, replace } from "../dom.js";
import { enumLabel, num, time } from "../format.js";
import { viewHref } from "../routes.js";
import type { View, ViewContext } from "../view.js";
import { enumSelect } from "./pack_form.js";
import { usage } from "./message.js";

export const conversationsView: View = async (ctx) => {
  const p = ctx.params;
  const status = enumSelect("filter-status", ConversationStatusSchema, Number(p.get("status") ?? 0) || 0, "any status");
  const labels = h("input", { id: "filter-labels", type: "text", value: p.get("labels") ?? "", placeholder: "key=value, key2=value2" });
  const size = h("input", { id: "filter-size", type: "number", min: 0, max: 1000, value: p.get("size") ?? "50", class: "narrow" });
  const openId = h("input", { id: "open-id", type: "text", placeholder: "conversation id" });
  const filters = on(h("form", { class: "filters", id: "filters" },
    field("status", status), field("labels (all must match)", labels), field("page size", size),
    h("button", { type: "submit" }, "Apply")), "submit", (e) => {
    e.preventDefault();
    const q = new URLSearchParams();
    if (status.value !== "0") q.set("status", status.value);
    if (labels.value.trim()) q.set("labels", labels.value.trim());
    if (size.value && size.value !== "50") q.set("size", size.value);
    location.hash = `#/${q.toString() ? `?${q}` : ""}`;
  });
  const open = on(h("form", { class: "filters" }, field("open by id", openId), h("button", { type: "submit" }, "Open")), "submit", (e) => {
    e.preventDefault();
    if (openId.value) location.hash = viewHref(openId.value, "log");
  });
  const list = h("div", { id: "conversations" }, h("p", { class: "status", id: "conversations-loading" }, "loading conversations…"));
  ctx.root.append(h("h2", null, "Conversations"), h("div", { class: "toolbar" }, filters, open), list);
  const request = {
    pageSize: Number(size.value) || 0,
    status: Number(status.value) || 0,
    labels: parseLabels(labels.value),
  };
  await showPage(ctx, request, [""], list);
};

type ListRequest = { pageSize: number; status: number; labels: Record<string, string> };

/** Shows the page of the last token of `tokens` (the tokens of the pages so far, "" first). */
async function showPage(ctx: ViewContext, request: ListRequest, tokens: string[], list: HTMLElement): Promise<void> {
  const res = await api.listConversations({ ...request, pageToken: tokens.at(-1)! });
  if (!ctx.live()) return;
  const back = tokens.length > 1 ? h("button", { type: "button", id: "page-back" }, "Previous page") : null;
  const next = res.nextPageToken ? h("button", { type: "button", id: "page-next" }, "Next page") : null;
  // One page at a time: both buttons wait while a page loads (a second click is ignored).
  const go = (to: string[]) => {
    if (back) back.disabled = true;
    if (next) next.disabled = true;
    showPage(ctx, request, to, list).catch((err) => {
      if (back) back.disabled = false;
      if (next) next.disabled = false;
      ctx.fail(err);
    });
  };
  if (back) on(back, "click", () => go(tokens.slice(0, -1)));
  if (next) on(next, "click", () => go([...tokens, res.nextPageToken]));
  replace(list,
    res.conversations.length === 0 ? h("p", { class: "note", id: "no-conversations" }, "No conversations.") : table(res.conversations),
    h("div", { class: "pager" }, `page ${tokens.length} · ${res.conversations.length} conversations `, back, next));
  list.dataset.page = String(tokens.length);
}

function table(conversations: Conversation[]): HTMLElement {
  return h("div", { class: "table-wrap" }, h("table", { class: "conversations" },
    h("thead", null, h("tr", null, ["title", "id", "status", "labels", "usage", "last activity", "messages", "summary through", "memory", "origin"].map((t) => h("th", null, t)))),
    h("tbody", null, conversations.map((c) => h("tr", { class: "conversation", "data-id": c.conversationId },
      h("td", null, h("a", { href: viewHref(c.conversationId, "log") }, c.title || "(untitled)")),
      h("td", null, h("a", { class: "conv-id", href: viewHref(c.conversationId, "log") }, c.conversationId)),
      h("td", null, h("span", { class: `status status-${enumLabel(ConversationStatusSchema, c.status).replaceAll(" ", "-")}` }, enumLabel(ConversationStatusSchema, c.status))),
      h("td", null, labelChips(c.labels)),
      h("td", { class: "usage" }, c.usage && (c.usage.inputTokens || c.usage.outputTokens) ? usage(c.usage) : "—"),
      h("td", null, h("time", null, time(c.updatedAt))),
      h("td", { class: "n messages" }, num(c.lastSequence)),
      h("td", { class: "n" }, c.summaryThroughSequence ? num(c.summaryThroughSequence) : "—"),
      h("td", { class: "n" }, c.memoryVersion ? `v${c.memoryVersion}` : "—"),
      h("td", null, origin(c)))))));
}

/** Labels as `key=value` chips, sorted by key. */
export function labelChips(labels: Record<string, string>): HTMLElement {
  const entries = Object.entries(labels).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return h("span", { class: "labels" }, entries.map(([k, v]) => h("span", { class: "chip" }, `${k}=${v}`)));
}

function origin(c: Conversation): HTMLElement | string {
  const parts: (HTMLElement | string)[] = [];
  if (c.forkedFrom) parts.push("fork of ", h("a", { href: viewHref(c.forkedFrom.conversationId, "log", { seq: c.forkedFrom.sequence }) }, `${c.forkedFrom.conversationId} #${c.forkedFrom.sequence}`));
  if (c.expireTime) parts.push(` expires ${time(c.expireTime)}`);
  return parts.length ? h("span", null, parts) : "—";
}

/** `k=v, k2=v2` (commas or new lines between pairs) as a map. */
function parseLabels(text: string): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const pair of text.split(/[,\n]/)) {
    const eq = pair.indexOf("=");
    if (eq > 0) labels[pair.slice(0, eq).trim()] = pair.slice(eq + 1).trim();
  }
  return labels;
}
