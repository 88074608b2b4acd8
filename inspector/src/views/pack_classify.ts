// What became of each sequence of the log in a pack, worked out the way the packer decides it
// (src/domain/context/pack/: walk.rs, left_out.rs, window.rs, finish.rs) from what a client
// sees: the pack's messages, its stats, the request, and the log read after the build. Pure (no
// DOM), so that test/classify.test.mjs runs it in Node.

import { ContextSource, FinalAssistant, type BuildContextRequest, type BuildContextResponse, type ContextMessage } from "../../../clients/typescript/src/gen/ctxd/v1/context_pb.js";
import { Format, Provider, Role, type Message } from "../../../clients/typescript/src/gen/ctxd/v1/messages_pb.js";

/** What a pack, the request it answers and the log say together. */
export interface PackFacts {
  req: BuildContextRequest;
  res: BuildContextResponse;
  /** The log's messages read after the build, by sequence (empty when the read failed). */
  log: Map<bigint, Message>;
  /** The oldest sequence the read holds: older ones were not read. */
  logFrom: bigint;
  /** The conversation's stored summary watermark (0 without a summary). */
  storedSummaryThrough: bigint;
}

/** What became of one sequence of the log. */
export type Fate =
  | "in" | "pinned" | "cleared" | "cut" | "args-cleared" | "reasoning-omitted"
  | "ui-only" | "final" | "summary" | "compacted" | "left-out" | "dropped" | "summary-out" | "missing" | "unread";

/** A run of sequences with one fate. */
export interface Run { fate: Fate; from: bigint; to: bigint }

/** The fates of messages the pack holds. */
export const IN_PACK: ReadonlySet<Fate> = new Set<Fate>(["in", "pinned", "cleared", "cut", "args-cleared", "reasoning-omitted"]);

/** The placeholder of a cleared tool result (docs/design.md, "Context editing"). */
const CLEARED = /^\[tool result cleared to save context: .* returned \d+ tokens; ListMessages returns it at sequence (\d+)\]$/s;
/** The marker inside a tool output cut by `tool_output_max_tokens`. */
const CUT = /\n\[\.\.\. \d+ tokens of this tool output omitted; ListMessages returns it in full at sequence (\d+) \.\.\.\]\n/;
/** The header of one item of the recalled turn (recall.rs: after the turn's header and a
 *  blank line, `[message N, ...]`; at the start of the turn in case it ever opens with one). */
const RECALLED_ITEM = /(?:^|\n\n)\[message (\d+), /g;

/** Whether a pack message is a tool result the pack cleared: the placeholder naming its own
 *  sequence (a result that merely quotes one names another, or is not a tool message). */
export function isCleared(m: ContextMessage): boolean {
  return m.role === Role.TOOL && m.sequence > 0n && CLEARED.exec(m.content)?.[1] === String(m.sequence);
}

/** Whether a pack message is a tool result cut by `tool_output_max_tokens` (its own marker). */
export function isCut(m: ContextMessage): boolean {
  return m.role === Role.TOOL && m.sequence > 0n && CUT.exec(m.content)?.[1] === String(m.sequence);
}

/** Whether `clear_arguments` emptied some of the call's arguments: `{}` in the pack where the
 *  log has others. */
export function argumentsCleared(packed: ContextMessage, logged: Message | undefined): boolean {
  if (!logged || packed.toolCalls.length === 0) return false;
  const stored = new Map(logged.toolCalls.map((c) => [c.id, c.arguments]));
  return packed.toolCalls.some((c) => {
    const was = (stored.get(c.id) ?? "").trim();
    return c.arguments === "{}" && was !== "" && was !== "{}";
  });
}

/** The provider whose reasoning a format's packs may carry. */
function providerOf(format: Format): Provider {
  switch (format) {
    case Format.ANTHROPIC_MESSAGES: return Provider.ANTHROPIC;
    case Format.OPENAI_RESPONSES: return Provider.OPENAI;
    case Format.GEMINI: return Provider.GEMINI;
    default: return Provider.UNSPECIFIED;
  }
}

/** Whether the log holds reasoning of the format's provider for the message that the pack
 *  leaves out (completed turns under the current-turn policy, pinned messages always). */
export function reasoningLeftOut(packed: ContextMessage, logged: Message | undefined, format: Format): boolean {
  const provider = providerOf(format);
  if (!logged || provider === Provider.UNSPECIFIED || packed.reasoning.length > 0) return false;
  return logged.reasoning.some((r) => r.provider === provider);
}

/** The pack's history messages by sequence. */
export function packHistory(res: BuildContextResponse): Map<bigint, ContextMessage> {
  const bySeq = new Map<bigint, ContextMessage>();
  for (const m of res.messages) if (m.source === ContextSource.HISTORY && m.sequence > 0n) bySeq.set(m.sequence, m);
  return bySeq;
}

/** Whether a history message of the pack is pinned: the log says so, or it lies before the
 *  window (`oldest_included_sequence`), where only pinned messages are sent. */
export function isPinned(seq: bigint, facts: PackFacts): boolean {
  const oldest = facts.res.stats?.oldestIncludedSequence ?? 0n;
  return facts.log.get(seq)?.pinned === true || oldest === 0n || seq < oldest;
}

/** The sequences the recalled turn quotes: its item headers, each at the start of an item (a
 *  line inside an excerpt that looks like one is not an item when no blank line precedes it). */
export function recalledSequences(res: BuildContextResponse): bigint[] {
  const found: bigint[] = [];
  for (const m of res.messages) {
    if (m.source !== ContextSource.RECALL) continue;
    for (const match of m.content.matchAll(RECALLED_ITEM)) found.push(BigInt(match[1]!));
  }
  return found;
}

/** Whether a message of the log is a turn in the pack's format (render/turns.rs
 *  `renders_as_turn`, for user messages and replies): blank ones are none for Anthropic, Gemini
 *  and Responses. A native message counts as a turn (the server looks into its JSON). */
export function rendersAsTurn(m: Message, format: Format): boolean {
  if (m.role === Role.SYSTEM) return false;
  if (m.role === Role.TOOL || m.toolCalls.length > 0) return true;
  if (format === Format.UNSPECIFIED || format === Format.OPENAI_CHAT) return true;
  const text = format === Format.OPENAI_RESPONSES ? m.content : m.content.trim();
  const visible = text !== "" || m.error !== undefined || m.native !== undefined;
  return visible || (m.role === Role.USER && m.attachments.length > 0);
}

/** Whether the request leaves out replies that would end the pack (`FinalAssistant`). */
export function omitsFinalReplies(req: BuildContextRequest): boolean {
  if (req.finalAssistant === FinalAssistant.KEEP) return false;
  if (req.finalAssistant === FinalAssistant.OMIT) return true;
  return req.format === Format.ANTHROPIC_MESSAGES || req.format === Format.GEMINI;
}

/** The calls of the log read by id, and whether every one of a message's calls has a result. */
interface Groups {
  /** Call id -> sequence of the message that made it. */
  callAt: Map<string, bigint>;
  /** Sequences of call messages with a call no result answers yet. */
  incomplete: Set<bigint>;
}

function toolGroups(log: Map<bigint, Message>): Groups {
  const callAt = new Map<string, bigint>();
  const answered = new Set<string>();
  for (const m of log.values()) {
    for (const c of m.toolCalls) callAt.set(c.id, m.sequence);
    if (m.role === Role.TOOL) answered.add(m.toolCallId);
  }
  const incomplete = new Set<bigint>();
  for (const m of log.values()) if (m.toolCalls.some((c) => !answered.has(c.id))) incomplete.add(m.sequence);
  return { callAt, incomplete };
}

/**
 * The replies the walk left out because they would end the pack (left_out.rs
 * `omit_trailing_reply`): from the log's end back, assistant messages without calls (not
 * pinned, not in the pack), stepping over UI-only events, system parts, tool results, messages
 * of incomplete tool groups and blank messages that are no turn of the format; a user turn, a
 * complete call or a reply the pack holds ends the stretch. Below the newest user message (from
 * the start without one) the walk stops at the included summary's watermark.
 */
export function finalOmitted(facts: PackFacts, groups = toolGroups(facts.log)): Set<bigint> {
  const finals = new Set<bigint>();
  const { req, res, log } = facts;
  if (!omitsFinalReplies(req) || req.pendingMessages.length > 0) return finals;
  const stats = res.stats!;
  const packed = packHistory(res);
  let newestUser = 0n;
  for (const m of log.values()) if (m.role === Role.USER && !m.excludeFromContext && m.sequence > newestUser) newestUser = m.sequence;
  for (let s = stats.logLastSequence; s > 0n; s--) {
    const m = log.get(s);
    if (!m) break;
    // The walk is past the mandatory part (the newest user message on): its floor is the
    // included summary's watermark.
    if (s <= stats.summaryThroughSequence && (newestUser === 0n || s < newestUser)) break;
    if (m.excludeFromContext || m.role === Role.SYSTEM || m.role === Role.TOOL) continue;
    if (m.toolCalls.length > 0) {
      if (!packed.has(s) && groups.incomplete.has(s)) continue;
      break;
    }
    if (m.role === Role.ASSISTANT && !m.pinned && !packed.has(s)) {
      finals.add(s);
      continue;
    }
    if (rendersAsTurn(m, req.format)) break;
    // A blank message the format does not send goes with the replies around it.
    if (!m.pinned && !packed.has(s)) finals.add(s);
  }
  return finals;
}

/** Why a message is left out as part of an incomplete tool group, if it is: a call some of
 *  whose results are not in the log, one of its results, or a result whose call is covered by
 *  the summary the pack includes (a result is never sent without its call). */
export type GroupGap = { kind: "incomplete"; call: bigint } | { kind: "call-summarized"; call: bigint };

function groupGap(m: Message, groups: Groups, watermark: bigint): GroupGap | undefined {
  if (groups.incomplete.has(m.sequence)) return { kind: "incomplete", call: m.sequence };
  if (m.role !== Role.TOOL) return undefined;
  const call = groups.callAt.get(m.toolCallId);
  if (call === undefined) return undefined;
  if (groups.incomplete.has(call)) return { kind: "incomplete", call };
  if (call <= watermark) return { kind: "call-summarized", call };
  return undefined;
}

/** The fate of a message the pack holds. */
export function packedFate(packed: ContextMessage, facts: PackFacts): Fate {
  const logged = facts.log.get(packed.sequence);
  if (isCleared(packed)) return "cleared";
  if (isCut(packed)) return "cut";
  if (isPinned(packed.sequence, facts)) return "pinned";
  if (argumentsCleared(packed, logged)) return "args-cleared";
  if (reasoningLeftOut(packed, logged, facts.req.format)) return "reasoning-omitted";
  return "in";
}

/** Everything classify works out once for all sequences. */
export interface Classified {
  runs: Run[];
  /** The replies left out because they would end the pack. */
  finals: Set<bigint>;
  /** Left-out messages of incomplete tool groups, by sequence. */
  gaps: Map<bigint, GroupGap>;
}

/**
 * The fate of every sequence 1..log_last_sequence, as runs. In order: in the pack (and how),
 * UI-only, final reply left out, covered by the included summary, part of an incomplete tool
 * group, older history left out (split where a stored summary that is not in the pack ends), and
 * what is inside the pack's range without a reason (a mismatch) or was not read.
 */
export function classify(facts: PackFacts): Classified {
  const stats = facts.res.stats!;
  const packed = packHistory(facts.res);
  const groups = toolGroups(facts.log);
  const finals = finalOmitted(facts, groups);
  const gaps = new Map<bigint, GroupGap>();
  const watermark = stats.summaryThroughSequence;
  const oldest = stats.oldestIncludedSequence;
  const stored = watermark > 0n ? 0n : facts.storedSummaryThrough;
  const runs: Run[] = [];
  for (let s = 1n; s <= stats.logLastSequence; s++) {
    const fate = fateOf(s);
    const run = runs.at(-1);
    if (run && run.fate === fate && run.to === s - 1n) run.to = s;
    else runs.push({ fate, from: s, to: s });
  }
  return { runs, finals, gaps };

  function fateOf(s: bigint): Fate {
    const p = packed.get(s);
    if (p) return packedFate(p, facts);
    const m = facts.log.get(s);
    if (m?.excludeFromContext) return "ui-only";
    if (finals.has(s)) return "final";
    if (s <= watermark) return "summary";
    // The provider's compaction the pack starts from stands in for everything before it.
    if (stats.compactionSequence > 0n && s < stats.compactionSequence) return "compacted";
    if (!m) return s < facts.logFrom ? "unread" : "missing";
    const gap = groupGap(m, groups, watermark);
    if (gap) {
      gaps.set(s, gap);
      return "left-out";
    }
    if (oldest === 0n || s < oldest) return s <= stored ? "summary-out" : "dropped";
    return "missing";
  }
}

/** Counts of sequences per fate. */
export function fateCounts(runs: Run[]): Map<Fate, number> {
  const counts = new Map<Fate, number>();
  for (const run of runs) counts.set(run.fate, (counts.get(run.fate) ?? 0) + Number(run.to - run.from + 1n));
  return counts;
}
