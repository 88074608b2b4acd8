// Which parts of the log a pack holds, and why the rest is not there: each sequence of
// 1..log_last_sequence classified from the pack's messages (source, sequence, content), the
// stats and the log's flags, drawn as a strip and listed as ranges linked into the log.

import { ContextSource, HistoryPolicy, type BuildContextRequest, type BuildContextResponse, type ContextMessage } from "../gen/ctxd/v1/context_pb.js";
import { Role, type Message } from "../gen/ctxd/v1/messages_pb.js";
import { h } from "../dom.js";
import { num } from "../format.js";
import { messageHref } from "../routes.js";

/** The placeholder of a cleared tool result (docs/design.md, "Context editing"). */
export const CLEARED = /^\[tool result cleared to save context: .* returned (\d+) tokens; ListMessages returns it at sequence (\d+)\]$/s;
/** The marker inside a tool output cut by `tool_output_max_tokens`. */
export const CUT = /\n\[\.\.\. (\d+) tokens of this tool output omitted; ListMessages returns it in full at sequence (\d+) \.\.\.\]\n/;
/** How the recalled turn names each message it quotes. */
const RECALLED = /^\[message (\d+), /gm;

/** What became of one sequence of the log. */
export type Fate = "summary" | "dropped" | "in" | "pinned" | "cleared" | "cut" | "ui-only" | "final" | "left-out" | "unread";

/** A run of sequences with one fate. */
export interface Run { fate: Fate; from: bigint; to: bigint }

const LABELS: Record<Fate, string> = {
  summary: "covered by the summary", dropped: "left out", in: "in the pack", pinned: "in the pack (pinned)",
  cleared: "in, result cleared", cut: "in, output cut", "ui-only": "UI-only event", final: "final assistant reply omitted",
  "left-out": "left out inside the window", unread: "not read",
};

/** The pack's history messages by sequence. */
export function packHistory(res: BuildContextResponse): Map<bigint, ContextMessage> {
  const bySeq = new Map<bigint, ContextMessage>();
  for (const m of res.messages) if (m.source === ContextSource.HISTORY && m.sequence > 0n) bySeq.set(m.sequence, m);
  return bySeq;
}

/** The sequences the recalled turn quotes. */
export function recalledSequences(res: BuildContextResponse): bigint[] {
  const found: bigint[] = [];
  for (const m of res.messages) {
    if (m.source !== ContextSource.RECALL) continue;
    for (const match of m.content.matchAll(RECALLED)) found.push(BigInt(match[1]!));
  }
  return found;
}

/** The fate of every sequence, as runs. `log` holds the log's messages by sequence. */
export function classify(res: BuildContextResponse, log: Map<bigint, Message>): Run[] {
  const stats = res.stats!;
  const packed = packHistory(res);
  const last = stats.logLastSequence;
  const finals = finalOmitted(log, packed, last, stats.finalAssistantOmitted);
  const runs: Run[] = [];
  for (let s = 1n; s <= last; s++) {
    const fate = fateOf(s, packed.get(s), log.get(s), finals, stats.summaryThroughSequence, stats.oldestIncludedSequence);
    const run = runs.at(-1);
    if (run && run.fate === fate && run.to === s - 1n) run.to = s;
    else runs.push({ fate, from: s, to: s });
  }
  return runs;
}

function fateOf(s: bigint, packed: ContextMessage | undefined, logged: Message | undefined, finals: Set<bigint>, watermark: bigint, oldest: bigint): Fate {
  if (packed) {
    if (packed.role === Role.TOOL && CLEARED.test(packed.content)) return "cleared";
    if (packed.role === Role.TOOL && CUT.test(packed.content)) return "cut";
    return logged?.pinned ? "pinned" : "in";
  }
  if (s <= watermark) return "summary";
  if (!logged) return "unread";
  if (logged.excludeFromContext) return "ui-only";
  if (finals.has(s)) return "final";
  if (oldest === 0n || s < oldest) return "dropped";
  return "left-out";
}

/** The trailing assistant replies the pack left out (`final_assistant_omitted` of them). */
function finalOmitted(log: Map<bigint, Message>, packed: Map<bigint, ContextMessage>, last: bigint, count: number): Set<bigint> {
  const finals = new Set<bigint>();
  for (let s = last; s > 0n && finals.size < count; s--) {
    const m = log.get(s);
    if (!m || packed.has(s)) break;
    if (m.excludeFromContext) continue;
    if (m.role !== Role.ASSISTANT || m.toolCalls.length > 0) break;
    finals.add(s);
  }
  return finals;
}

/** Why a run's messages are where they are. */
function why(run: Run, req: BuildContextRequest, res: BuildContextResponse): string {
  const stats = res.stats!;
  switch (run.fate) {
    case "summary": return `the summary covers 1–${stats.summaryThroughSequence} and stands in for them`;
    case "dropped": {
      const limits = [req.budget?.maxMessages ? `max_messages ${req.budget.maxMessages}` : "", req.budget?.maxTurns ? `max_turns ${req.budget.maxTurns}` : ""].filter(Boolean).join(", ");
      const policy = req.historyPolicy === HistoryPolicy.NEWEST
        ? "newest-that-fits history: older messages did not fit the budget"
        : `cache-stable history begins at a turn anchor (#${stats.oldestIncludedSequence}) that moves in steps of about ${num(stats.historyStepTokens)} tokens: older messages did not fit the budget`;
      const uncovered = res.needsSummary ? "; no summary covers them (needs_summary)" : "";
      return `${policy}${limits ? ` or the limits (${limits})` : ""}${uncovered}`;
    }
    case "in": return "verbatim";
    case "pinned": return "pinned messages are always kept";
    case "cleared": return "context editing: the result's content is a placeholder naming where ListMessages returns it";
    case "cut": return "longer than tool_output_max_tokens: head and tail kept around a marker";
    case "ui-only": return "exclude_from_context: kept in the log, never in a pack";
    case "final": return "the pack may not end on an assistant reply (final_assistant / the format's rule)";
    case "left-out": return "inside the window but not in the pack: an incomplete tool-call group (results not yet appended)";
    case "unread": return "beyond the part of the log this page read";
  }
}

/** The strip, the counts and the list of ranges. */
export function rangesElement(id: string, req: BuildContextRequest, res: BuildContextResponse, log: Map<bigint, Message>): HTMLElement {
  const stats = res.stats!;
  const runs = classify(res, log);
  const last = Number(stats.logLastSequence) || 1;
  const strip = h("div", { class: "strip", id: "log-strip", role: "img", "aria-label": "the log by fate" });
  for (const run of runs) {
    const seg = h("div", { class: `fate fate-${run.fate}`, title: `${span(run)}: ${LABELS[run.fate]}` });
    seg.style.setProperty("width", `${((100 * Number(run.to - run.from + 1n)) / last).toFixed(4)}%`);
    strip.append(seg);
  }
  const counts = new Map<Fate, number>();
  for (const run of runs) counts.set(run.fate, (counts.get(run.fate) ?? 0) + Number(run.to - run.from + 1n));
  const recalled = recalledSequences(res);
  const shown = runs.slice(0, 500);
  return h("section", { class: "ranges", id: "ranges" },
    h("h3", null, `The log, 1–${stats.logLastSequence}: what the pack holds`),
    strip,
    h("ul", { class: "legend" }, [...counts].map(([fate, n]) =>
      h("li", { "data-fate": fate, "data-count": n }, h("span", { class: `swatch fate-${fate}` }), `${LABELS[fate]}: ${num(n)}`))),
    checks(res, counts),
    recalled.length > 0 ? h("p", { id: "recalled" }, `recalled (quoted in the recall turn, ${stats.messagesRecalled} per stats): `,
      recalled.map((s, i) => [i ? ", " : "", h("a", { href: messageHref(id, s) }, `#${s}`)])) : null,
    h("table", { class: "runs" },
      h("thead", null, h("tr", null, h("th", null, "sequences"), h("th", { class: "n" }, "count"), h("th", null, "fate"), h("th", null, "why"))),
      h("tbody", null, shown.map((run) => h("tr", { class: `fate-row-${run.fate}`, "data-fate": run.fate, "data-from": run.from, "data-to": run.to },
        h("td", null, h("a", { href: messageHref(id, run.from) }, `#${run.from}`), run.to > run.from ? ["–", h("a", { href: messageHref(id, run.to) }, `#${run.to}`)] : null),
        h("td", { class: "n" }, num(run.to - run.from + 1n)), h("td", null, LABELS[run.fate]), h("td", { class: "why" }, why(run, req, res), recalledIn(run, recalled)))))),
    runs.length > shown.length ? h("p", { class: "note" }, `… ${num(runs.length - shown.length)} more ranges`) : null);
}

/** The pack's own counts next to what the strip found, so a mismatch shows. */
function checks(res: BuildContextResponse, counts: Map<Fate, number>): HTMLElement {
  const s = res.stats!;
  const item = (label: string, found: number, stat: number, name: string) =>
    h("li", { class: found === stat ? "" : "mismatch" }, `${label}: ${num(found)} found in the pack; ${name} = ${num(stat)}`);
  return h("ul", { class: "checks" },
    item("cleared results", counts.get("cleared") ?? 0, s.toolResultsCleared, "tool_results_cleared"),
    s.toolResultTokensCleared ? h("li", null, `clearing saved ${num(s.toolResultTokensCleared)} tokens (tool_result_tokens_cleared)`) : null,
    h("li", null, `cut outputs: ${num(counts.get("cut") ?? 0)}; truncated = ${s.truncated}`),
    item("final replies omitted", counts.get("final") ?? 0, s.finalAssistantOmitted, "final_assistant_omitted"),
    h("li", null, `history messages included: ${s.messagesIncluded} (considered ${s.messagesConsidered}, dropped ${s.messagesDropped}, tool groups dropped ${s.toolGroupsDropped}, incomplete ${s.incompleteToolGroups})`));
}

function recalledIn(run: Run, recalled: bigint[]): string {
  const quoted = recalled.filter((s) => s >= run.from && s <= run.to);
  return quoted.length ? ` · quoted by recall: ${quoted.map((s) => `#${s}`).join(", ")}` : "";
}

function span(run: Run): string {
  return run.to > run.from ? `#${run.from}–#${run.to}` : `#${run.from}`;
}
