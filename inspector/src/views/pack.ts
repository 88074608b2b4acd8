// The pack view: BuildContext with the options of the form, and what came back: where the
// budget went, which parts of the log are in and why the rest is not, every message of the
// pack, every stat, and the rendering with the bytes shared with the previous build.

import { toJson } from "@bufbuild/protobuf";
import { api } from "../api.js";
import { BuildContextRequestSchema, ContextSource, ContextSourceSchema, type BuildContextRequest, type BuildContextResponse } from "../gen/ctxd/v1/context_pb.js";
import { RoleSchema, type Message } from "../gen/ctxd/v1/messages_pb.js";
import { h, on, replace } from "../dom.js";
import { enumLabel, num } from "../format.js";
import { currentLog } from "../log_data.js";
import { messageHref } from "../routes.js";
import type { View, ViewContext } from "../view.js";
import { budgetElement, statsElement } from "./pack_budget.js";
import { DEFAULT_OPTIONS, packForm, packRequest, type PackOptions } from "./pack_form.js";
import { CLEARED, CUT, packHistory, rangesElement } from "./pack_ranges.js";
import { renderedElement, type Previous } from "./pack_rendered.js";

/** The form's values per conversation, while the page is open. */
const optionsOf = new Map<string, PackOptions>();
/** The last rendering per request (conversation and options), for the shared-prefix view. */
const previousOf = new Map<string, Previous>();

export const packView: View = async (ctx) => {
  const { form, read } = packForm(optionsOf.get(ctx.id) ?? DEFAULT_OPTIONS);
  const requestPre = h("pre", { id: "pack-request", class: "json" });
  const result = h("div", { id: "pack-result" });
  const again = form.querySelector<HTMLButtonElement>("#pack-build-again")!;
  let last: BuildContextRequest | undefined;
  const run = async (req: BuildContextRequest) => {
    last = req;
    again.disabled = true;
    requestPre.textContent = JSON.stringify(toJson(BuildContextRequestSchema, req), null, 2);
    replace(result, h("p", { class: "status" }, "building…"));
    await build(ctx, req, result);
    again.disabled = false;
  };
  on(form, "submit", (e) => {
    e.preventDefault();
    const options = read();
    optionsOf.set(ctx.id, options);
    void run(packRequest(ctx.id, options));
  });
  on(again, "click", () => { if (last) void run(last); });
  ctx.root.append(h("div", { class: "pack" }, form,
    h("details", { class: "request" }, h("summary", null, "BuildContextRequest as sent (JSON)"), requestPre), result));
};

async function build(ctx: ViewContext, req: BuildContextRequest, result: HTMLElement): Promise<void> {
  let res: BuildContextResponse;
  let messages: Message[];
  try {
    [res, { messages }] = await Promise.all([api.buildContext(req), currentLog(ctx.id)]);
  } catch (err) {
    if (ctx.live()) {
      replace(result);
      ctx.fail(err);
    }
    return;
  }
  if (!ctx.live()) return;
  const key = JSON.stringify(toJson(BuildContextRequestSchema, req));
  const previous = previousOf.get(key);
  const stats = res.stats!;
  previousOf.set(key, { rendered: res.rendered, stablePrefixTokens: stats.stablePrefixTokens });
  const log = new Map(messages.map((m) => [m.sequence, m]));
  let pinned = 0;
  for (const [seq, m] of packHistory(res)) if (log.get(seq)?.pinned) pinned += m.tokens;
  replace(result,
    flags(res),
    budgetElement(stats, pinned),
    rangesElement(ctx.id, req, res, log),
    packMessages(ctx.id, res, log),
    statsElement(res),
    renderedElement(res.rendered, stats.stablePrefixTokens, previous));
  result.dataset.built = String(Date.now());
}

function flags(res: BuildContextResponse): HTMLElement {
  const s = res.stats!;
  const badge = (cond: boolean, text: string, cls = "badge-warn") => (cond ? h("span", { class: `badge ${cls}` }, text) : null);
  return h("p", { class: "flags", id: "pack-flags" },
    `${res.messages.length} pack messages · ${num(s.totalTokens)} tokens · `,
    badge(s.overBudget, "over_budget", "badge-error"), badge(s.truncated, "truncated"), badge(s.summaryCut, "summary_cut"),
    badge(res.needsSummary, "needs_summary: call Summarize"), badge(s.toolResultsCleared > 0, `${s.toolResultsCleared} results cleared`),
    badge(s.messagesDropped > 0, `${s.messagesDropped} dropped`),
    !s.overBudget && !s.truncated && !s.summaryCut && !res.needsSummary && s.messagesDropped === 0 ? h("span", { class: "badge badge-ok" }, "all history fits") : null);
}

/** The pack's messages in order: where each comes from and what it costs. */
function packMessages(id: string, res: BuildContextResponse, log: Map<bigint, Message>): HTMLElement {
  const rows = res.messages.map((m, i) => {
    const notes = [
      m.source === ContextSource.HISTORY && log.get(m.sequence)?.pinned ? "pinned" : "",
      CLEARED.test(m.content) ? "cleared" : "", CUT.test(m.content) ? "cut" : "",
      m.toolCalls.length ? `calls ${m.toolCalls.map((c) => c.name).join(", ")}` : "",
      m.error ? `error ${m.error.code}` : "", m.attachments.length ? `${m.attachments.length} attachment${m.attachments.length === 1 ? "" : "s"}` : "",
      m.reasoning.length ? `${m.reasoning.length} reasoning blocks` : "",
    ].filter(Boolean).join(" · ");
    const preview = m.content.length > 200 ? `${m.content.slice(0, 200)}…` : m.content;
    return h("tr", { "data-source": enumLabel(ContextSourceSchema, m.source) },
      h("td", { class: "n" }, i + 1),
      h("td", null, enumLabel(ContextSourceSchema, m.source)),
      h("td", null, enumLabel(RoleSchema, m.role)),
      h("td", null, m.sequence > 0n ? h("a", { href: messageHref(id, m.sequence) }, `#${m.sequence}`) : "—"),
      h("td", { class: "n" }, m.tokens),
      h("td", null, notes),
      h("td", { class: "preview" }, preview));
  });
  return h("details", { class: "pack-messages", open: res.messages.length <= 200 },
    h("summary", null, `Pack messages (${res.messages.length})`),
    h("table", { class: "pack-table" },
      h("thead", null, h("tr", null, ["", "source", "role", "seq", "tokens", "notes", "content"].map((t) => h("th", null, t)))),
      h("tbody", null, rows)));
}
