// Why each run of the log is where it is in a pack, in words that hold for the request and the
// stats at hand (docs/design.md: "Context assembly", "Provider rules", "Context editing",
// "Recall", "Cache-stable packs"). Pure, like pack_classify.ts, and tested with it.

import { ContextSource, FinalAssistant, HistoryPolicy, ReasoningPolicy, type BuildContextRequest, type BuildContextResponse } from "../../../clients/typescript/src/gen/ctxd/v1/context_pb.js";
import { Role } from "../../../clients/typescript/src/gen/ctxd/v1/messages_pb.js";
import { num } from "../format.js";
import type { Classified, Fate, PackFacts, Run } from "./pack_classify.js";

/** How the legend and the table name each fate. */
export const LABELS: Record<Fate, string> = {
  in: "in the pack", pinned: "in the pack (pinned)", cleared: "in, result cleared", cut: "in, output cut",
  "args-cleared": "in, arguments cleared", "reasoning-omitted": "in, reasoning left out (completed turn)",
  "ui-only": "UI-only event", final: "final assistant reply omitted", summary: "covered by the summary",
  compacted: "covered by the provider's compaction",
  "left-out": "left out: incomplete tool-call group", dropped: "left out (older history)",
  "summary-out": "left out with the stored summary", missing: "not in the pack, no reason found", unread: "not read",
};

/** Recall's default `max_tokens`. */
const RECALL_DEFAULT_TOKENS = 1000;

/** `a–b` of a range of sequences, or an empty log's words. */
export function span(from: bigint, to: bigint): string {
  if (to < from) return "none";
  return to > from ? `#${from}–#${to}` : `#${from}`;
}

/** The room the packer keeps for recall (Recall::room): `max_tokens` (0 = 1,000), at most half
 *  of the budget; none when the pack ends on an assistant reply (it takes no recalled turn). */
export function recallRoom(req: BuildContextRequest, res: BuildContextResponse): number {
  if (!req.recall || endsOnReply(res)) return 0;
  return Math.min(req.recall.maxTokens || RECALL_DEFAULT_TOKENS, Math.floor((res.stats?.budgetTokens ?? 0) / 2));
}

/** Whether the pack ends on an assistant message of the log (before any recalled turn). */
export function endsOnReply(res: BuildContextResponse): boolean {
  const last = res.messages.filter((m) => m.source !== ContextSource.RECALL).at(-1);
  return last?.source === ContextSource.HISTORY && last.role === Role.ASSISTANT;
}

/** The badge for a pack that left no history out, or undefined. Clearing only happens when not
 *  all history fits whole, so a pack with cleared results gets none. */
export function historyFitsBadge(res: BuildContextResponse): string | undefined {
  const s = res.stats!;
  const fits = !s.overBudget && !s.truncated && !s.summaryCut && !res.needsSummary && s.messagesDropped === 0 && s.toolResultsCleared === 0;
  if (!fits) return undefined;
  return s.summaryThroughSequence > 0n ? "all history after the summary fits" : "all history fits";
}

/** Why the messages of `run` are where they are. */
export function why(run: Run, facts: PackFacts, classified: Classified): string {
  const { req, res } = facts;
  const stats = res.stats!;
  switch (run.fate) {
    case "summary": return `the summary covers #1–#${stats.summaryThroughSequence} and stands in for them${stats.summaryCut
      ? "; it did not fit whole (summary_cut): its beginning and end are in the pack, around a marker saying that part of it was cut" : ""}`;
    case "compacted": return `the provider's compaction in #${stats.compactionSequence} stands in for them: packs of its format start from it and send nothing it replaced (compaction_sequence)`;
    case "dropped":
    case "summary-out": return dropped(run, facts);
    case "in": return "verbatim";
    case "pinned": return "pinned messages are always kept";
    case "cleared": return "context editing (clear_tool_results): the result's content is a placeholder naming the tool, its tokens and where ListMessages returns it";
    case "cut": return "longer than tool_output_max_tokens: head and tail kept around a marker naming the sequence";
    case "args-cleared": return "clear_arguments: the call's arguments are {} in the pack, as its results were cleared";
    case "reasoning-omitted": return req.reasoning === ReasoningPolicy.ALL
      ? "the log's reasoning for this message is not in the pack"
      : "reasoning policy current turn: the reasoning of completed turns is left out (reasoning_tokens_omitted)";
    case "ui-only": return "exclude_from_context: kept in the log, never in a pack";
    case "final": return `the pack may not end on an assistant reply (final_assistant: ${finalRule(req)}); the next pack, built after a new user message, includes it`;
    case "left-out": return groupGaps(run, classified);
    case "missing": return "inside the part of the log the pack covers, yet not in it, and none of the reasons above applies: compare with the log";
    case "unread": return `the page read the log from #${facts.logFrom} on (the newest ${num(20_000)} messages at most); not in the pack`;
  }
}

function finalRule(req: BuildContextRequest): string {
  if (req.finalAssistant === FinalAssistant.OMIT) return "omit";
  return "the format's rule, which leaves such replies out for Anthropic and Gemini";
}

/** The reasons of the incomplete tool groups in `run`. */
function groupGaps(run: Run, classified: Classified): string {
  const incomplete = new Set<bigint>();
  const summarized = new Set<bigint>();
  for (let s = run.from; s <= run.to; s++) {
    const gap = classified.gaps.get(s);
    if (gap?.kind === "incomplete") incomplete.add(gap.call);
    if (gap?.kind === "call-summarized") summarized.add(gap.call);
  }
  const calls = (set: Set<bigint>) => [...set].map((s) => `#${s}`).join(", ");
  return [
    incomplete.size ? `an incomplete tool-call group: not every call of ${calls(incomplete)} has its result in the log yet, so the calls and the results they have are left out (incomplete_tool_groups)` : "",
    summarized.size ? `the result's call (${calls(summarized)}) is covered by the summary: a result is never sent without its call` : "",
  ].filter(Boolean).join("; ");
}

/** Why older history is left out: what stopped it (over budget, a summary that did not fit,
 *  the history policy or the limits), recall's room, and what covers it. */
function dropped(run: Run, facts: PackFacts): string {
  const { req, res } = facts;
  const stats = res.stats!;
  const stored = facts.storedSummaryThrough;
  const summaryOut = stored > 0n && stats.summaryThroughSequence === 0n;
  const covered = run.fate === "summary-out";
  const parts: string[] = [];
  if (stats.overBudget) {
    parts.push("over_budget: the mandatory part (system prompt, pinned and pending messages, the current turn) alone exceeds the budget, so neither the summary nor older history went in");
  } else if (summaryOut && !req.omitSummary) {
    parts.push(covered
      ? `the stored summary through #${stored} did not fit, not even cut, and was left out with the history it covers; the truncation notice names these messages`
      : `the stored summary through #${stored} did not fit, not even cut, so no older history went in after it (each section is considered only once the one above it fits)`);
  } else {
    parts.push(policy(facts));
    const room = recallRoom(req, res);
    if (req.recall && room === 0) parts.push("the pack ends on an assistant reply, so it takes no recalled turn and kept no room for one");
    if (room > 0) {
      parts.push(`recall's room (up to ${num(room)} tokens: max_tokens ${req.recall!.maxTokens || `0 = ${num(RECALL_DEFAULT_TOKENS)}`}, at most half the budget) was kept out of older history; `
        + `recall used ${num(stats.recallTokens)} of it, and what it leaves unused stays unused`);
    }
  }
  if (covered && req.omitSummary) parts.push(`the stored summary through #${stored} covers them, but omit_summary leaves it out`);
  else if (covered && stats.overBudget) parts.push(`the stored summary through #${stored} covers them`);
  else if (!covered && res.needsSummary) parts.push("no summary covers them (needs_summary: call Summarize)");
  return parts.join("; ");
}

/** What the history policy and the request's limits did. */
function policy(facts: PackFacts): string {
  const { req, res } = facts;
  const stats = res.stats!;
  const limits = [req.budget?.maxMessages ? `max_messages ${req.budget.maxMessages}` : "", req.budget?.maxTurns ? `max_turns ${req.budget.maxTurns}` : ""].filter(Boolean).join(", ");
  const orLimits = limits ? ` or the limits (${limits})` : "";
  const step = stats.historyStepTokens;
  if (req.historyPolicy === HistoryPolicy.NEWEST) return `newest-that-fits history: older messages did not fit the budget${orLimits}`;
  if (step > 0 && stats.oldestIncludedSequence > 0n) {
    return `older messages did not fit the budget${orLimits}, and cache-stable history starts at a turn anchor (#${stats.oldestIncludedSequence}) `
      + `so that the pack's beginning repeats byte for byte from call to call (it jumps by steps of about ${num(step)} tokens); `
      + `some of the older messages left out might have fit: cache-stable packs use about half a step (~${num(Math.round(step / 2))} tokens) less than newest-that-fits`;
  }
  return `older messages did not fit the budget${orLimits} (no turn anchor moved the start: history starts where newest-that-fits starts it)`;
}

/** Whether the cache-stable explanation (and its comparison with newest-that-fits) applies. */
export function anchoredStart(facts: PackFacts): boolean {
  const s = facts.res.stats!;
  return facts.req.historyPolicy !== HistoryPolicy.NEWEST && s.historyStepTokens > 0 && s.oldestIncludedSequence > 0n && !s.overBudget;
}
