// Unit test of the pack view's classification and explanations (src/views/pack_classify.ts,
// pack_why.ts): small logs and packs written out by hand as the packer makes them
// (src/domain/context/pack/), checked for the fate of every sequence and the words of the why.
//
//   node --test inspector/test/classify.test.mjs
//
// The TypeScript is bundled with esbuild into a temporary module first (no browser, no ctxd).
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath, pathToFileURL } from "node:url";
import { build } from "esbuild";
import { stubsImportFromInspector } from "../stubs.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
let m; // the bundled modules
let dir;

before(async () => {
  const out = await build({
    stdin: {
      contents: [
        'export * from "./src/views/pack_classify.ts";',
        'export * from "./src/views/pack_why.ts";',
        'export { create } from "@bufbuild/protobuf";',
        'export { BuildContextRequestSchema, BuildContextResponseSchema, ContextMessageSchema, ContextSource, FinalAssistant, HistoryPolicy } from "../clients/typescript/src/gen/ctxd/v1/context_pb.ts";',
        'export { Format, MessageSchema, Provider, Role } from "../clients/typescript/src/gen/ctxd/v1/messages_pb.ts";',
      ].join("\n"),
      resolveDir: root,
      loader: "ts",
    },
    bundle: true, format: "esm", platform: "node", target: "node20", write: false, logLevel: "warning",
    plugins: [stubsImportFromInspector],
  });
  dir = mkdtempSync(join(tmpdir(), "inspector-classify-"));
  const file = join(dir, "classify.mjs");
  writeFileSync(file, out.outputFiles[0].text);
  m = await import(pathToFileURL(file).href);
});

after(() => rmSync(dir, { recursive: true, force: true }));

// Log messages: [role, content, extra] by sequence from 1.
const U = (content = "question", extra = {}) => ["USER", content, extra];
const A = (content = "reply", extra = {}) => ["ASSISTANT", content, extra];
const S = (content = "note") => ["SYSTEM", content, {}];
const CALL = (...ids) => ["ASSISTANT", "", { toolCalls: ids.map((id) => ({ id, name: `tool_${id}`, arguments: `{"id":"${id}"}` })) }];
const R = (id, content = `result ${id}`) => ["TOOL", content, { toolCallId: id }];

/**
 * Facts as the page has them: `log` as written, `pack` the sequences the pack holds (or
 * [sequence, overrides]), `stats` and `req` fields, `recall` the recalled turn's content.
 */
function facts({ log, pack = [], stats = {}, req = {}, stored = 0, recall, extra = [] }) {
  const messages = log.map(([role, content, x], i) => m.create(m.MessageSchema, { ...x, role: m.Role[role], content, sequence: BigInt(i + 1) }));
  const bySeq = new Map(messages.map((msg) => [msg.sequence, msg]));
  const history = pack.map((p) => {
    const [s, over] = Array.isArray(p) ? p : [p, {}];
    const l = bySeq.get(BigInt(s));
    return m.create(m.ContextMessageSchema, {
      role: l.role, content: l.content, toolCalls: l.toolCalls, toolCallId: l.toolCallId,
      source: m.ContextSource.HISTORY, sequence: BigInt(s), tokens: 10, ...over,
    });
  });
  const recallTurn = recall ? [m.create(m.ContextMessageSchema, { role: m.Role.USER, content: recall, source: m.ContextSource.RECALL, tokens: 50 })] : [];
  const { needsSummary = false, ...rest } = stats;
  const s = Object.fromEntries(Object.entries({ logLastSequence: log.length, budgetTokens: 1000, ...rest }).map(([k, v]) => [k, /Sequence$/.test(k) ? BigInt(v) : v]));
  const res = m.create(m.BuildContextResponseSchema, { messages: [...extra, ...history, ...recallTurn], stats: s, needsSummary });
  return {
    req: m.create(m.BuildContextRequestSchema, { conversationId: "c", budget: { maxTokens: 1000 }, ...req }),
    res, log: bySeq, logFrom: 1n, storedSummaryThrough: BigInt(stored),
  };
}

/** The fate of each sequence, as "from-to:fate" runs. */
function fates(f) {
  return m.classify(f).runs.map((r) => `${r.from === r.to ? r.from : `${r.from}-${r.to}`}:${r.fate}`).join(" ");
}

/** The why of the run holding `seq`. */
function whyOf(f, seq) {
  const c = m.classify(f);
  const run = c.runs.find((r) => r.from <= BigInt(seq) && BigInt(seq) <= r.to);
  return m.why(run, f, c);
}

const anthropic = { format: 2 };

test("a note typed while tools ran: the reply between results is omitted, the call ends the stretch", () => {
  // 4 is an assistant note between two results of parallel calls: the walk (newest first) steps
  // over result 5, leaves 4 out, steps over 3 and stops at the complete call 2.
  const f = facts({ log: [U(), CALL("a", "b"), R("a"), A("one moment"), R("b")], pack: [1, 2, 3, 5], req: anthropic, stats: { oldestIncludedSequence: 1, finalAssistantOmitted: 1 } });
  assert.equal(fates(f), "1-3:in 4:final 5:in");
  // A user note typed while tools ran ends the stretch; the reply after the results is omitted.
  const g = facts({ log: [U(), CALL("a", "b"), R("a"), U("hurry"), R("b"), A()], pack: [1, 2, 3, 4, 5], req: anthropic, stats: { oldestIncludedSequence: 1, finalAssistantOmitted: 1 } });
  assert.equal(fates(g), "1-5:in 6:final");
  assert.match(whyOf(g, 6), /may not end on an assistant reply/);
});

test("a trailing system note does not end the stretch", () => {
  const f = facts({ log: [U(), A(), S()], pack: [1, 3], req: anthropic, stats: { oldestIncludedSequence: 1, finalAssistantOmitted: 1 } });
  assert.equal(fates(f), "1:in 2:final 3:in");
  // OpenAI formats keep the reply (the format's rule): nothing is omitted.
  const g = facts({ log: [U(), A(), S()], pack: [1, 2, 3], stats: { oldestIncludedSequence: 1 } });
  assert.equal(fates(g), "1-3:in");
});

test("a reply followed by an unanswered call: the reply is omitted, the call left out as incomplete", () => {
  const f = facts({ log: [U(), A(), CALL("x")], pack: [1], req: anthropic, stats: { oldestIncludedSequence: 1, finalAssistantOmitted: 1, incompleteToolGroups: 1 } });
  assert.equal(fates(f), "1:in 2:final 3:left-out");
  assert.match(whyOf(f, 3), /incomplete tool-call group: not every call of #3/);
  // A call with one of its two results: both left out; an answered call ends the stretch.
  const g = facts({ log: [U(), A(), CALL("x", "y"), R("x")], pack: [1], req: anthropic, stats: { oldestIncludedSequence: 1, finalAssistantOmitted: 1 } });
  assert.equal(fates(g), "1:in 2:final 3-4:left-out");
  const h = facts({ log: [U(), A(), CALL("x"), R("x")], pack: [1, 2, 3, 4], req: anthropic, stats: { oldestIncludedSequence: 1 } });
  assert.equal(fates(h), "1-4:in");
});

test("a summary covering everything, with an omitted final reply", () => {
  const f = facts({
    log: [U(), CALL("a"), R("a"), U("and now?"), A()], pack: [4], req: anthropic,
    stats: { oldestIncludedSequence: 4, summaryThroughSequence: 5, finalAssistantOmitted: 1, summaryCut: true },
  });
  // The reply is counted in final_assistant_omitted, so it is "final", not "summary".
  assert.equal(fates(f), "1-3:summary 4:in 5:final");
  assert.match(whyOf(f, 1), /the summary covers #1–#5/);
  assert.match(whyOf(f, 1), /summary_cut/);
  // Without a user message the walk starts above the watermark: only the reply after it is omitted.
  const g = facts({ log: [A("welcome"), A(), A()], pack: [], req: anthropic, stats: { summaryThroughSequence: 2, finalAssistantOmitted: 1 } });
  assert.equal(fates(g), "1-2:summary 3:final");
});

test("a stored summary that did not fit: left out with the history it covers, the range split at its watermark", () => {
  const log = [U(), A(), U(), A(), U(), A(), U("now"), A()];
  const f = facts({ log, pack: [7, 8], stored: 4, stats: { oldestIncludedSequence: 7, messagesDropped: 6, needsSummary: true } });
  assert.equal(fates(f), "1-4:summary-out 5-6:dropped 7-8:in");
  assert.match(whyOf(f, 2), /stored summary through #4 did not fit, not even cut, and was left out with the history it covers/);
  assert.doesNotMatch(whyOf(f, 2), /no summary covers/);
  assert.match(whyOf(f, 5), /no summary covers them \(needs_summary/);
  assert.match(whyOf(f, 5), /did not fit, not even cut, so no older history went in/);
  // With omit_summary the same messages are covered by a summary the request leaves out.
  const g = facts({ log, pack: [7, 8], stored: 4, req: { omitSummary: true, historyPolicy: m.HistoryPolicy.NEWEST }, stats: { oldestIncludedSequence: 7, messagesDropped: 6, needsSummary: true } });
  assert.match(whyOf(g, 2), /omit_summary leaves it out/);
  assert.doesNotMatch(whyOf(g, 2), /no summary covers/);
  // The badge never says all history fits when some was dropped.
  assert.equal(m.historyFitsBadge(f.res), undefined);
});

test("cache-stable and newest-that-fits wording", () => {
  const log = [U(), A(), U(), A(), U(), A()];
  const stable = facts({ log, pack: [5, 6], stats: { oldestIncludedSequence: 5, messagesDropped: 4, historyStepTokens: 256 } });
  assert.equal(fates(stable), "1-4:dropped 5-6:in");
  const w = whyOf(stable, 1);
  assert.match(w, /cache-stable history starts at a turn anchor \(#5\)/);
  assert.match(w, /repeats byte for byte/);
  assert.match(w, /might have fit/);
  assert.match(w, /half a step \(~128 tokens\)/);
  assert.equal(m.anchoredStart(stable), true);
  // No step: no anchor named, never "#0".
  const flat = facts({ log, pack: [5, 6], stats: { oldestIncludedSequence: 5, messagesDropped: 4 } });
  assert.doesNotMatch(whyOf(flat, 1), /anchor \(#|#0/);
  assert.equal(m.anchoredStart(flat), false);
  const nothing = facts({ log, pack: [], stats: { messagesDropped: 6, historyStepTokens: 0, overBudget: true } });
  assert.doesNotMatch(whyOf(nothing, 1), /#0/);
  assert.match(whyOf(nothing, 1), /over_budget/);
  const newest = facts({ log, pack: [5, 6], req: { historyPolicy: m.HistoryPolicy.NEWEST, budget: { maxTokens: 1000, maxTurns: 1 } }, stats: { oldestIncludedSequence: 5, messagesDropped: 4 } });
  assert.match(whyOf(newest, 1), /^newest-that-fits history: older messages did not fit the budget or the limits \(max_turns 1\)/);
});

test("recall's room is named, and none is kept when the pack ends on a reply", () => {
  const log = [U(), A(), U(), A(), U("now")];
  const f = facts({ log, pack: [5], req: { recall: { query: "x" } }, stats: { oldestIncludedSequence: 5, messagesDropped: 4, budgetTokens: 1500, recallTokens: 300, messagesRecalled: 1 },
    recall: "[Recalled from earlier in this conversation: ...]\n\n[message 2, assistant]\nreply" });
  const w = whyOf(f, 1);
  assert.match(w, /recall's room \(up to 750 tokens: max_tokens 0 = 1,000, at most half the budget\) was kept out of older history/);
  assert.match(w, /recall used 300 of it, and what it leaves unused stays unused/);
  assert.equal(m.recallRoom(f.req, f.res), 750);
  const g = facts({ log: [U(), A(), U(), A()], pack: [3, 4], req: { recall: { maxTokens: 200 } }, stats: { oldestIncludedSequence: 3, messagesDropped: 2, budgetTokens: 1500 } });
  assert.match(whyOf(g, 1), /ends on an assistant reply, so it takes no recalled turn/);
  assert.equal(m.recallRoom(g.req, g.res), 0);
});

test("markers count only on the message they name; recalled items only at their headers", () => {
  const cleared = (s) => `[tool result cleared to save context: evil"><b> returned 120 tokens; ListMessages returns it at sequence ${s}]`;
  const f = facts({
    log: [U(cleared(3)), CALL("a"), R("a", "long"), CALL("b"), R("b", "long")],
    pack: [1, 2, [3, { content: cleared(3) }], 4, [5, { content: cleared(3) }]],
    stats: { oldestIncludedSequence: 1, toolResultsCleared: 1 },
  });
  // The user message quoting a placeholder is verbatim; #5 carries a placeholder naming #3.
  assert.equal(fates(f), "1-2:in 3:cleared 4-5:in");
  const recall = "[Recalled from earlier in this conversation: ...]\n\n[message 2, user]\nsaid\n[message 9, user] inside\n\n[message 4, assistant calling tool t]\n{}";
  const g = facts({ log: [U()], pack: [1], stats: { oldestIncludedSequence: 1 }, recall });
  assert.deepEqual(m.recalledSequences(g.res), [2n, 4n]);
});

test("in, but not verbatim: cleared arguments and reasoning left out", () => {
  const reasoning = [{ provider: m.Provider.ANTHROPIC, type: "thinking", text: "hm", signature: "s" }];
  const f = facts({
    log: [U(), ["ASSISTANT", "", { toolCalls: [{ id: "a", name: "t", arguments: '{"q":1}' }], reasoning }], R("a"), U(), A("done", { reasoning })],
    pack: [1, [2, { toolCalls: [{ id: "a", name: "t", arguments: "{}" }] }], 3, 4, [5, { reasoning }]],
    req: { ...anthropic, finalAssistant: m.FinalAssistant.KEEP, clearToolResults: { clearArguments: true } },
    stats: { oldestIncludedSequence: 1 },
  });
  assert.equal(fates(f), "1:in 2:args-cleared 3-5:in");
  const g = facts({
    log: [U(), A("thought", { reasoning }), U(), A("done")],
    pack: [1, 2, 3, 4], req: { ...anthropic, finalAssistant: m.FinalAssistant.KEEP }, stats: { oldestIncludedSequence: 1 },
  });
  assert.equal(fates(g), "1:in 2:reasoning-omitted 3-4:in");
  assert.match(whyOf(g, 2), /completed turns is left out/);
});

test("the badge: not with cleared results; after the summary when one is in", () => {
  const log = [U(), A()];
  assert.equal(m.historyFitsBadge(facts({ log, pack: [1, 2], stats: { oldestIncludedSequence: 1 } }).res), "all history fits");
  assert.equal(m.historyFitsBadge(facts({ log, pack: [2], stats: { oldestIncludedSequence: 2, summaryThroughSequence: 1 } }).res), "all history after the summary fits");
  assert.equal(m.historyFitsBadge(facts({ log, pack: [1, 2], stats: { oldestIncludedSequence: 1, toolResultsCleared: 1 } }).res), undefined);
  // An empty log: no runs, no "1–0".
  const empty = facts({ log: [], stats: {} });
  assert.deepEqual(m.classify(empty).runs, []);
  assert.equal(m.span(1n, 0n), "none");
});
