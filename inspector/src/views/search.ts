// The search view: SearchMessages with every filter it takes; the query lives in the route
// (`?q=...&roles=...&tools=...&size=...`) so a search can be linked to, and further pages are
// added below with the response's page token.

import { api } from "../api.js";
import { Role, RoleSchema } from "../../../clients/typescript/src/gen/ctxd/v1/messages_pb.js";
import type { SearchHit } from "../../../clients/typescript/src/gen/ctxd/v1/context_service_pb.js";
import { field, h, on, type Child } from "../dom.js";
import { enumLabel } from "../format.js";
import { messageHref, viewHref } from "../routes.js";
import type { View, ViewContext } from "../view.js";

const ROLES = [Role.SYSTEM, Role.USER, Role.ASSISTANT, Role.TOOL];

export const searchView: View = async (ctx) => {
  const p = ctx.params;
  const query = h("input", { id: "search-query", type: "search", value: p.get("q") ?? "", placeholder: "words to find", required: true, class: "wide-input" });
  const size = h("input", { id: "search-size", type: "number", min: 0, max: 50, value: p.get("size") ?? "0", class: "narrow" });
  const tools = h("input", { id: "search-tools", type: "text", value: p.get("tools") ?? "", placeholder: "tool names, comma-separated" });
  const chosen = new Set((p.get("roles") ?? "").split(",").filter(Boolean));
  const roleBoxes = ROLES.map((r) => {
    const name = enumLabel(RoleSchema, r);
    return [name, h("input", { type: "checkbox", "data-role": name, checked: chosen.has(name) })] as const;
  });
  const form = on(h("form", { id: "search-form", class: "search-form" },
    field("query", query), field("page_size", size, "0 = 10, at most 50"),
    h("fieldset", { class: "roles" }, h("legend", null, "roles (none = all)"),
      roleBoxes.map(([name, box]) => h("label", { class: "toggle" }, box, ` ${name}`))),
    field("tool_names", tools),
    h("button", { type: "submit", id: "search-submit", class: "primary" }, "Search")), "submit", (e) => {
    e.preventDefault();
    const roles = roleBoxes.filter(([, box]) => box.checked).map(([name]) => name).join(",");
    const params: Record<string, string> = { q: query.value };
    if (roles) params.roles = roles;
    if (tools.value.trim()) params.tools = tools.value.trim();
    if (size.value && size.value !== "0") params.size = size.value;
    const next = viewHref(ctx.id, "search", params);
    if (location.hash === next) window.dispatchEvent(new HashChangeEvent("hashchange"));
    else location.hash = next;
  });
  const results = h("div", { id: "search-results" });
  ctx.root.append(form, results);
  const q = p.get("q");
  if (!q) {
    results.append(h("p", { class: "note", id: "search-hint" }, "Type a query and press Search: the messages that match come here, best first."));
    return;
  }
  results.append(h("p", { class: "status", id: "search-loading" }, "searching…"));
  const request = {
    conversationId: ctx.id,
    query: q,
    pageSize: Number(p.get("size") ?? 0) || 0,
    roles: ROLES.filter((r) => chosen.has(enumLabel(RoleSchema, r))),
    toolNames: (p.get("tools") ?? "").split(/[\s,]+/).filter(Boolean),
  };
  await page(ctx, request, "", results, 0);
};

type SearchRequest = { conversationId: string; query: string; pageSize: number; roles: Role[]; toolNames: string[] };

async function page(ctx: ViewContext, request: SearchRequest, token: string, results: HTMLElement, shown: number): Promise<void> {
  const res = await api.searchMessages({ ...request, pageToken: token });
  if (!ctx.live()) return;
  results.querySelector("#search-loading")?.remove();
  results.querySelector(".more")?.remove();
  if (shown === 0 && res.hits.length === 0) {
    results.append(h("p", { class: "note", id: "search-empty" }, "No message matches."));
    return;
  }
  let table = results.querySelector("tbody");
  if (!table) {
    table = h("tbody");
    results.append(h("table", { class: "hits", id: "hits" },
      h("thead", null, h("tr", null, ["", "sequence", "role", "tool", "score", "relevance", "snippet"].map((t) => h("th", null, t)))), table));
  }
  table.append(...res.hits.map((hit, i) => hitRow(ctx.id, hit, shown + i + 1)));
  // A second click while the next page loads is ignored (the button waits).
  const more: Child = res.nextPageToken ? on(h("button", { type: "button", class: "more" }, "Next page"), "click", (e) => {
    const button = e.currentTarget as HTMLButtonElement;
    if (button.disabled) return;
    button.disabled = true;
    page(ctx, request, res.nextPageToken, results, shown + res.hits.length).catch((err) => {
      button.disabled = false;
      ctx.fail(err);
    });
  }) : null;
  if (more) results.append(more);
}

function hitRow(id: string, hit: SearchHit, rank: number): HTMLElement {
  return h("tr", { class: "hit", "data-sequence": hit.sequence },
    h("td", { class: "n" }, rank),
    h("td", null, h("a", { href: messageHref(id, hit.sequence) }, `#${hit.sequence}`)),
    h("td", null, enumLabel(RoleSchema, hit.role)),
    h("td", null, hit.toolName),
    h("td", { class: "n" }, hit.score.toFixed(3)),
    h("td", { class: "n", title: "the share of the query's weight it matches, 0 to 1" }, hit.relevance.toFixed(2)),
    h("td", { class: "snippet" }, hit.snippet));
}
