// Where a pack's budget went: a stacked bar by section, a table of the sections, and every
// ContextStats field under its proto name (`data-stat="<name>"`; derived figures carry
// `data-section`: the sections' keys, e.g. `priming` for the reply priming).

import { ContextStatsSchema, type BuildContextResponse, type ContextStats } from "../../../clients/typescript/src/gen/ctxd/v1/context_pb.js";
import { h } from "../dom.js";
import { num } from "../format.js";

/** One part of the budget. */
export interface Section {
  key: string;
  label: string;
  tokens: number;
  /** Where the figure comes from, for the table. */
  from: string;
}

/** The pack's sections, `pinned` being the HISTORY messages of the pack that are pinned. */
export function sections(stats: ContextStats, pinnedTokens: number): Section[] {
  const parts = stats.systemPromptTokens + stats.summaryTokens + stats.workingMemoryTokens
    + stats.truncationNoticeTokens + stats.historyTokens + stats.pendingTokens + stats.recallTokens;
  return [
    { key: "system_prompt", label: "system prompt", tokens: stats.systemPromptTokens, from: "system_prompt_tokens" },
    { key: "pinned", label: "pinned", tokens: pinnedTokens, from: "pinned history messages of the pack" },
    { key: "summary", label: "summary", tokens: stats.summaryTokens, from: "summary_tokens" },
    { key: "working_memory", label: "working memory", tokens: stats.workingMemoryTokens, from: "working_memory_tokens" },
    { key: "notice", label: "notice / placeholder", tokens: stats.truncationNoticeTokens, from: "truncation_notice_tokens" },
    { key: "recall", label: "recall", tokens: stats.recallTokens, from: "recall_tokens" },
    { key: "history", label: "history (not pinned)", tokens: stats.historyTokens - pinnedTokens, from: "history_tokens − pinned" },
    { key: "pending", label: "pending", tokens: stats.pendingTokens, from: "pending_tokens" },
    { key: "priming", label: "reply priming", tokens: Math.max(0, stats.totalTokens - parts), from: "total_tokens − the sections: the tokens that prime the reply, which total_tokens includes" },
    { key: "free", label: "free", tokens: Math.max(0, stats.budgetTokens - stats.totalTokens), from: "budget_tokens − total_tokens" },
  ];
}

/** The stacked bar and the table of sections. */
export function budgetElement(stats: ContextStats, pinnedTokens: number): HTMLElement {
  const parts = sections(stats, pinnedTokens);
  const scale = Math.max(stats.budgetTokens, stats.totalTokens, 1);
  const bar = h("div", { class: "bar", id: "budget-bar", role: "img", "aria-label": "budget by section" });
  for (const s of parts) {
    if (s.tokens <= 0) continue;
    const seg = h("div", { class: `seg seg-${s.key}`, "data-segment": s.key, title: `${s.label}: ${num(s.tokens)} tokens` });
    seg.style.setProperty("width", `${((100 * s.tokens) / scale).toFixed(3)}%`);
    bar.append(seg);
  }
  const over = stats.totalTokens > stats.budgetTokens;
  const table = h("table", { class: "sections", id: "sections" },
    h("thead", null, h("tr", null, h("th", null, ""), h("th", null, "section"), h("th", { class: "n" }, "tokens"), h("th", { class: "n" }, "of budget"), h("th", null, "from"))),
    h("tbody", null, parts.map((s) => h("tr", null,
      h("td", null, h("span", { class: `swatch seg-${s.key}` })),
      h("td", null, s.label),
      h("td", { class: "n", "data-section": s.key }, s.tokens),
      h("td", { class: "n" }, stats.budgetTokens ? `${((100 * s.tokens) / stats.budgetTokens).toFixed(1)}%` : "—"),
      h("td", { class: "from" }, s.from)))));
  return h("section", { class: "budget" },
    h("h3", null, `Budget: ${num(stats.totalTokens)} of ${num(stats.budgetTokens)} tokens used`,
      over ? h("span", { class: "badge badge-error" }, `over by ${num(stats.totalTokens - stats.budgetTokens)}`) : null),
    bar, table);
}

/** What each stat means, for the table's tooltips (from context.proto). */
const STAT_HELP: Record<string, string> = {
  messages_dropped: "history messages after the summary watermark left out",
  tool_groups_dropped: "complete tool-call groups left out whole",
  incomplete_tool_groups: "tool-call groups whose results are not yet in the log, left out",
  stable_prefix_tokens: "tokens at the start the next pack is expected to repeat byte for byte",
  history_step_tokens: "step between cache-stable turn anchors",
  final_assistant_omitted: "assistant replies left out because they would end the pack",
  tool_result_tokens_cleared: "tokens saved by clearing",
  reasoning_tokens_omitted: "reasoning of completed turns left out",
};

/** Every stat, named as in the proto, plus the response's own flags, in three columns. */
export function statsElement(res: BuildContextResponse): HTMLElement {
  const stats = res.stats!;
  const row = (name: string, value: string, help = STAT_HELP[name] ?? "") =>
    h("tr", { class: value === "true" ? "flag-on" : "" }, h("th", { title: help }, name), h("td", { class: "n", "data-stat": name }, value));
  const rows = ContextStatsSchema.fields.map((f) => row(f.name, String((stats as unknown as Record<string, unknown>)[f.localName])));
  rows.push(row("needs_summary", String(res.needsSummary), "dropped history exists that the summary does not cover: call Summarize"));
  rows.push(row("previous_response_id", res.previousResponseId || "—", "the newest assistant response_id of the log"));
  const per = Math.ceil(rows.length / 3);
  const columns = [0, 1, 2].map((i) => h("table", { class: "stats-table" }, h("tbody", null, rows.slice(i * per, (i + 1) * per))));
  return h("section", { class: "stats", id: "stats" }, h("h3", null, "Stats"), h("div", { class: "stats-columns" }, columns));
}
