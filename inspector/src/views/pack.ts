// The pack view: BuildContext with the options of the form, and what came back: where the
// budget went, which parts of the log are in and why the rest is not, every message of the
// pack, every stat, and the rendering with the bytes shared with the previous build. The log
// is read after the build, up to the pack's `log_last_sequence`, so that both describe the same
// moment; the pack is shown even when that read fails.

import { clone, toJson } from "@bufbuild/protobuf";
import { api, callError } from "../api.js";
import { currentIdentity, ScopedCache } from "../cache.js";
import { BuildContextRequestSchema, ContextSource, ContextSourceSchema, HistoryPolicy, type BuildContextRequest, type BuildContextResponse } from "../../../clients/typescript/src/gen/ctxd/v1/context_pb.js";
import { RoleSchema } from "../../../clients/typescript/src/gen/ctxd/v1/messages_pb.js";
import { h, on, replace } from "../dom.js";
import { enumLabel, num } from "../format.js";
import { packLog, type LoadedLog } from "../log_data.js";
import { messageHref, viewHref } from "../routes.js";
import type { View, ViewContext } from "../view.js";
import { budgetElement, statsElement } from "./pack_budget.js";
import { packedFate, packHistory, isPinned, type Fate, type PackFacts } from "./pack_classify.js";
import { DEFAULT_OPTIONS, optionsFromParams, optionsToParams, packForm, packRequest, type PackOptions } from "./pack_form.js";
import { rangesElement } from "./pack_ranges.js";
import { renderedElement, type Previous } from "./pack_rendered.js";
import { historyFitsBadge } from "./pack_why.js";

/** The form's values per conversation, while the page is open. */
const optionsOf = new ScopedCache<PackOptions>();
/** The last rendering per conversation, with the request (as JSON) that made it: "Build again"
 *  compares with it when the request is the same. */
const previousOf = new ScopedCache<Previous & { request: string }>();

export const packView: View = async (ctx) => {
  // A link's options first (the route's parameters), then this page's last ones for the conversation.
  const linked = optionsFromParams(ctx.params);
  const { form, read } = packForm(linked ?? optionsOf.get(ctx.id) ?? DEFAULT_OPTIONS);
  const requestPre = h("pre", { id: "pack-request", class: "json" });
  const result = h("div", { id: "pack-result" });
  const again = form.querySelector<HTMLButtonElement>("#pack-build-again")!;
  let last: BuildContextRequest | undefined;
  /** Bumped by every build: only the newest one's answer is drawn. */
  let builds = 0;
  const run = async (req: BuildContextRequest) => {
    const n = ++builds;
    const current = () => n === builds && ctx.live();
    last = req;
    again.disabled = true;
    requestPre.textContent = JSON.stringify(toJson(BuildContextRequestSchema, req), null, 2);
    replace(result, h("p", { class: "status" }, "building…"));
    try {
      await build(ctx, req, result, current);
    } catch (err) {
      // Drawing failed: say so rather than leave "building…" up.
      if (current()) {
        replace(result, h("p", { class: "note warn", id: "pack-draw-failed" }, "The result could not be drawn (see the banner)."));
        ctx.fail(err);
      }
    } finally {
      if (n === builds) again.disabled = false;
    }
  };
  on(form, "submit", (e) => {
    e.preventDefault();
    const options = read();
    optionsOf.set(ctx.id, options, currentIdentity());
    // The options go into the URL (a link to this pack); a new URL re-opens the view, which builds.
    const href = viewHref(ctx.id, "pack", optionsToParams(options));
    if (location.hash !== href) location.hash = href;
    else void run(packRequest(ctx.id, options));
  });
  on(again, "click", () => { if (last) void run(last); });
  ctx.root.append(h("div", { class: "pack" }, form,
    h("details", { class: "request" }, h("summary", null, "BuildContextRequest as sent (JSON)"), requestPre), result));
  if (linked && ctx.params.get("build") === "1") {
    await run(packRequest(ctx.id, linked));
  } else {
    replace(result, h("p", { class: "note", id: "pack-hint" },
      "Set the options and press Build: the pack comes here, with where the budget went. The URL then holds the options, so a link opens this pack built."));
  }
};

/** Builds `req`, reads the log and the conversation's stored summary watermark, and draws it
 *  all into `result` while `current()` holds. */
async function build(ctx: ViewContext, req: BuildContextRequest, result: HTMLElement, current: () => boolean): Promise<void> {
  const identity = currentIdentity();
  let res: BuildContextResponse;
  try {
    res = await api.buildContext(req);
  } catch (err) {
    if (current()) {
      replace(result);
      ctx.fail(err);
    }
    return;
  }
  if (!current()) return;
  const stats = res.stats!;
  replace(result, h("p", { class: "status" }, `built; reading the log through #${stats.logLastSequence}…`));
  const [logRead, conversationRead] = await Promise.allSettled([
    packLog(ctx.id, stats.logLastSequence, { live: current }),
    api.getConversation({ conversationId: ctx.id }),
  ]);
  if (!current()) return;
  const log: LoadedLog | undefined = logRead.status === "fulfilled" ? logRead.value : undefined;
  const stored = conversationRead.status === "fulfilled" ? conversationRead.value.conversation : ctx.conversation;
  const facts: PackFacts = {
    req, res,
    log: new Map((log?.messages ?? []).map((m) => [m.sequence, m])),
    logFrom: log ? log.after + 1n : stats.logLastSequence + 1n,
    storedSummaryThrough: stored?.summaryThroughSequence ?? 0n,
  };
  const request = JSON.stringify(toJson(BuildContextRequestSchema, req));
  const kept = previousOf.get(ctx.id);
  const previous = kept?.request === request ? kept : undefined;
  previousOf.set(ctx.id, { request, rendered: res.rendered, stablePrefixTokens: stats.stablePrefixTokens }, identity);
  replace(result,
    flags(res),
    logRead.status === "rejected" ? logMissing(logRead.reason) : null,
    budgetElement(stats, pinnedTokens(facts)),
    rangesElement(ctx.id, facts, () => api.buildContext(newestThatFits(req))),
    packMessages(ctx.id, facts),
    statsElement(res),
    renderedElement(res.rendered, stats.stablePrefixTokens, previous, req.format));
  result.dataset.built = String(Date.now());
}

/** The same request with newest-that-fits history. */
function newestThatFits(req: BuildContextRequest): BuildContextRequest {
  const newest = clone(BuildContextRequestSchema, req);
  newest.historyPolicy = HistoryPolicy.NEWEST;
  return newest;
}

/** Tokens of the pack's pinned history messages. */
function pinnedTokens(facts: PackFacts): number {
  let tokens = 0;
  for (const [seq, m] of packHistory(facts.res)) if (isPinned(seq, facts)) tokens += m.tokens;
  return tokens;
}

function logMissing(err: unknown): HTMLElement {
  const e = callError(err);
  return h("p", { class: "note warn", id: "pack-log-missing" },
    `The log could not be read (${e.code}: ${e.message}), so what the page works out from it is missing: which messages are UI-only, `
    + "pinned inside the window or part of incomplete tool groups, which replies were omitted, whose arguments or reasoning were left out. "
    + "The pack and its stats are complete.");
}

function flags(res: BuildContextResponse): HTMLElement {
  const s = res.stats!;
  const badge = (cond: boolean, text: string, cls = "badge-warn") => (cond ? h("span", { class: `badge ${cls}` }, text) : null);
  const fits = historyFitsBadge(res);
  return h("p", { class: "flags", id: "pack-flags" },
    `${res.messages.length} pack messages · ${num(s.totalTokens)} tokens · `,
    badge(s.overBudget, "over_budget", "badge-error"), badge(s.truncated, "truncated"), badge(s.summaryCut, "summary_cut"),
    badge(res.needsSummary, "needs_summary: call Summarize"), badge(s.toolResultsCleared > 0, `${s.toolResultsCleared} results cleared`),
    badge(s.messagesDropped > 0, `${s.messagesDropped} dropped`),
    fits ? h("span", { class: "badge badge-ok", id: "history-fits" }, fits) : null);
}

/** How the pack table notes a history message's fate. */
const FATE_NOTES: Partial<Record<Fate, string>> = {
  pinned: "pinned", cleared: "cleared", cut: "cut", "args-cleared": "arguments cleared", "reasoning-omitted": "reasoning left out",
};

/** The pack's messages in order: where each comes from and what it costs. */
function packMessages(id: string, facts: PackFacts): HTMLElement {
  const { res } = facts;
  const rows = res.messages.map((m, i) => {
    const fate = m.source === ContextSource.HISTORY && m.sequence > 0n ? packedFate(m, facts) : undefined;
    const notes = [
      fate ? FATE_NOTES[fate] ?? "" : "",
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
