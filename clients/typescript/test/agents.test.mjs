// CtxdSession with the Agents SDK's own ScriptedModel: a two-turn run where the model calls a
// tool, then the log, the pack, the stored usage, the second turn's model input, popItem and
// compaction; 300 model turns of tool loops where every model call gets a pack within the
// budget with valid call/result pairs and the usage adds up; the Responses request the SDK's
// OpenAIResponsesModel sends (fake OpenAI client); forced compaction of short and empty
// sessions; usage of a run resumed from a serialized RunState.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Agent, run, tool, setTracingDisabled, Usage, RunState, OpenAIResponsesModel } from "@openai/agents";
import { ScriptedModel, assistantMessage, functionCall, modelResponder } from "@openai/agents/testing";
import { z } from "zod";
import { createCtxdClient, Format, ContextSource, Role } from "@ctxd/client/node";
import { CtxdSession, DEFAULT_BUDGET_TOKENS, toResponsesItem, fromResponsesItem } from "@ctxd/client/agents";
import { baseUrl, uniqueId } from "./env.mjs";

setTracingDisabled(true);
const client = createCtxdClient({ baseUrl, transport: "grpc", timeoutMs: 10_000 });
const plain = (x) => JSON.parse(JSON.stringify(x));

const getWeather = tool({
  name: "get_weather",
  description: "Weather of a city",
  parameters: z.object({ city: z.string() }),
  execute: async ({ city }) => `18C and sunny in ${city}`,
});

test("two-turn agent run with a tool call, stored natively and read back", async () => {
  const sessionId = uniqueId("agents");
  const session = new CtxdSession({ sessionId, client });
  const added = [];
  const spy = Object.create(session);
  spy.addItems = async (items, ...runContext) => {
    added.push(...plain(items));
    return session.addItems(items, ...runContext);
  };

  // Each response reports usage; the session stores it on the assistant messages.
  const usage = (input, output, cached, reasoning) => new Usage({ requests: 1, inputTokens: input, outputTokens: output, inputTokensDetails: { cached_tokens: cached }, outputTokensDetails: { reasoning_tokens: reasoning } });
  const model = new ScriptedModel([
    {
      output: [
        { type: "reasoning", id: "rs_1", content: [{ type: "input_text", text: "Use the weather tool." }], providerData: { encryptedContent: "gAAAAenc" } },
        functionCall("get_weather", { city: "Paris" }, { callId: "call_paris", id: "fc_1" }),
      ],
      usage: usage(120, 30, 0, 12),
    },
    { output: [assistantMessage("It is 18C and sunny in Paris.", { id: "msg_1" })], usage: usage(160, 9, 100, 0) },
    { output: [assistantMessage("You asked about Paris.", { id: "msg_2" })], usage: usage(180, 6, 150, 0) },
  ]);
  const agent = new Agent({ name: "weather", instructions: "Answer with the tool.", model, tools: [getWeather] });

  const first = await run(agent, "What is the weather in Paris?", { session: spy });
  assert.equal(first.finalOutput, "It is 18C and sunny in Paris.");
  const second = await run(agent, "Which city did I ask about?", { session: spy });
  assert.equal(second.finalOutput, "You asked about Paris.");
  model.assertComplete();

  // Every item the runner stored is in ctxd and comes back exactly: the log, and getItems with wholeLog.
  const items = plain(await session.getAllItems());
  assert.deepEqual(items, added, "the log holds what addItems was given");
  assert.deepEqual(plain(await new CtxdSession({ sessionId, client, wholeLog: true }).getItems()), added);
  const types = items.map((i) => i.type ?? i.role);
  assert.deepEqual(types, ["message", "reasoning", "function_call", "function_call_result", "message", "message", "message"]);

  // getItems is the pack: BuildContext in Responses format at the default budget. The first
  // turn is complete, so its reasoning (and the ids paired with it) stay out, as the server's
  // reasoning policy says; the conversation fits, so every turn is there.
  assert.equal(session.budgetTokens, DEFAULT_BUDGET_TOKENS);
  const pack = await client.buildContext({ conversationId: sessionId, budget: { maxTokens: DEFAULT_BUDGET_TOKENS }, format: Format.OPENAI_RESPONSES });
  const packed = plain(await session.getItems());
  assert.deepEqual(packed.map(toResponsesItem).map((w) => toResponsesItem(fromResponsesItem(w))), JSON.parse(pack.rendered).map((w) => toResponsesItem(fromResponsesItem(w))));
  assert.deepEqual(packed.map((i) => i.type ?? i.role), ["message", "function_call", "function_call_result", "message", "message", "message"]);
  assert.ok(!JSON.stringify(packed).includes("gAAAAenc"), "completed turn's reasoning left out of the pack");
  // getItems leaves reserveTokens (default a quarter of the budget) free for what the run adds.
  let seen;
  await new CtxdSession({ sessionId, client, budgetTokens: 1000, onPack: (p) => (seen = p) }).getItems();
  assert.equal(seen.stats.budgetTokens, 750);
  await new CtxdSession({ sessionId, client, budgetTokens: 1000, reserveTokens: 0, onPack: (p) => (seen = p) }).getItems();
  assert.equal(seen.stats.budgetTokens, 1000);
  assert.throws(() => new CtxdSession({ sessionId, client, budgetTokens: 1000, reserveTokens: 1000 }), /reserveTokens/);

  // The usage the runner reported is stored (Message.usage) and adds up (Conversation.usage).
  const { conversation } = await client.getConversation({ conversationId: sessionId });
  assert.deepEqual(
    [conversation.usage.inputTokens, conversation.usage.outputTokens, conversation.usage.cachedInputTokens, conversation.usage.reasoningTokens],
    [120n + 160n + 180n, 30n + 9n + 6n, 250n, 12n],
  );

  // ListMessages holds every item, natively (Responses JSON), with the call and its result typed.
  const listed = await client.listMessages({ conversationId: sessionId, format: Format.OPENAI_RESPONSES });
  const rendered = JSON.parse(listed.rendered);
  assert.equal(rendered.length, added.length);
  assert.deepEqual(rendered, added.map(toResponsesItem).map(plain));
  const call = listed.messages.find((m) => m.toolCalls.length);
  assert.equal(call.toolCalls[0].id, "call_paris");
  assert.equal(call.reasoning[0]?.id, "rs_1", "reasoning item id kept");
  assert.equal(call.reasoning[0]?.data, "gAAAAenc", "encrypted reasoning kept");
  assert.equal(listed.messages.find((m) => m.content === "It is 18C and sunny in Paris.")?.contentItemId, "msg_1");
  assert.ok(listed.messages.every((m) => m.native?.format === Format.OPENAI_RESPONSES));

  // The second turn's model input contains the first turn (user, call, result, answer).
  const secondInput = model.calls[2].request.input;
  const text = JSON.stringify(secondInput);
  for (const needle of ["What is the weather in Paris?", "call_paris", "18C and sunny in Paris", "It is 18C and sunny in Paris.", "Which city did I ask about?"]) {
    assert.ok(text.includes(needle), `second turn input lacks ${needle}: ${text}`);
  }

  // getItems(limit): the newest items, in order.
  // (A pack drops the id of an answer whose response sent no reasoning item.)
  const withoutIds = (items) => items.map(({ id, ...rest }) => rest);
  assert.deepEqual(withoutIds(plain(await session.getItems(2))), withoutIds(added.slice(-2)));

  // popItem removes the newest item and returns it; the rest stays.
  const popped = plain(await session.popItem());
  assert.deepEqual(popped, added.at(-1));
  assert.deepEqual(plain(await session.getAllItems()), added.slice(0, -1));
  assert.equal(await session.getSessionId(), sessionId);

  await session.clearSession();
  assert.deepEqual(await session.getItems(), []);
});

test("popItem splits a ctxd message holding several items (reasoning + text + call)", async () => {
  const sessionId = uniqueId("agents-pop");
  const session = new CtxdSession({ sessionId, client });
  const items = [
    { type: "message", role: "user", content: "Plan, then call." },
    { type: "reasoning", id: "rs_1", content: [{ type: "input_text", text: "Think." }], providerData: { encryptedContent: "gAAAA" } },
    { type: "message", id: "msg_9", role: "assistant", status: "completed", content: [{ type: "output_text", text: "Calling." }] },
    { type: "function_call", id: "fc_9", callId: "call_9", name: "lookup", arguments: "{\"q\":1}", status: "completed" },
  ];
  await session.addItems(items);
  const listed = await client.listMessages({ conversationId: sessionId });
  assert.equal(listed.messages.length, 2, "the model-side run is one ctxd message");
  assert.deepEqual(plain(await session.getAllItems()), items);
  assert.equal(listed.messages[1].reasoning[0].data, "gAAAA");

  assert.deepEqual(plain(await session.popItem()), items[3]);
  assert.deepEqual(plain(await session.getAllItems()), items.slice(0, 3));
  assert.deepEqual(plain(await session.popItem()), items[2]);
  assert.deepEqual(plain(await session.getAllItems()), items.slice(0, 2));
  assert.deepEqual(plain(await session.popItem()), items[1]);
  assert.deepEqual(plain(await session.popItem()), items[0]);
  assert.equal(await session.popItem(), undefined);
});

test("runCompaction: Summarize (server summarizer), then history from the summary", async () => {
  const sessionId = uniqueId("agents-compact");
  const session = new CtxdSession({ sessionId, client, compaction: { keepRecentTokens: 50 } });
  assert.equal(await session.runCompaction(), null, "no conversation yet: nothing to do");
  for (let i = 0; i < 6; i++) {
    await session.addItems([
      { type: "message", role: "user", content: `Question ${i}: ${"details ".repeat(40)}` },
      { type: "message", id: `msg_${i}`, role: "assistant", status: "completed", content: [{ type: "output_text", text: `Answer ${i}.` }] },
    ]);
  }
  assert.equal(await session.runCompaction(), null, "not forced, and the pack leaves nothing out: nothing");
  const result = await session.runCompaction({ force: true });
  assert.ok(result && typeof result.usage.inputTokens === "number");
  assert.equal(result.compacted, true);
  const { conversation } = await client.getConversation({ conversationId: sessionId });
  assert.ok(conversation.summaryThroughSequence > 0n);
  const items = plain(await session.getItems());
  assert.equal(items[0].role, "system");
  assert.ok(items.length < 12, `compacted history has ${items.length} items`);
  assert.deepEqual(items.at(-1).content[0].text, "Answer 5.");
  assert.equal((await session.getAllItems()).length, 12, "the log keeps everything");

  // Bring-your-own-LLM compaction: PREPARE, the caller's model, PROVIDED.
  const byo = new CtxdSession({ sessionId, client, compaction: { keepRecentTokens: 10, summarize: async (prepared) => {
    assert.ok(JSON.parse(prepared.rendered).length > 0);
    return "The user asked six questions.";
  } } });
  await session.addItems([{ type: "message", role: "user", content: `More ${"x ".repeat(100)}` }]);
  const again = await byo.runCompaction({ force: true });
  assert.ok(again);
  const after = plain(await byo.getItems());
  assert.match(after[0].content, /six questions/);
});

test("the runner's compaction hook summarizes once the history passes triggerTokens", async () => {
  const sessionId = uniqueId("agents-auto-compact");
  const session = new CtxdSession({ sessionId, client, compaction: { triggerTokens: 60, keepRecentTokens: 20 } });
  const model = new ScriptedModel([[assistantMessage("Noted.")], [assistantMessage("Noted again.")]]);
  const agent = new Agent({ name: "notes", instructions: "Acknowledge.", model });
  await run(agent, `First note: ${"alpha ".repeat(30)}`, { session });
  await run(agent, `Second note: ${"beta ".repeat(30)}`, { session });
  const { conversation } = await client.getConversation({ conversationId: sessionId });
  assert.ok(conversation.summaryThroughSequence > 0n, "the runner's runCompaction call stored a summary");
  const items = plain(await session.getItems());
  assert.equal(items[0].role, "system");
  assert.equal(items.at(-1).content[0].text, "Noted again.");
});

// Every model call's input: calls answered by results after them, results after their calls.
function assertPairs(input, where) {
  const calls = new Map();
  input.forEach((it, i) => {
    if (it.type === "function_call") calls.set(it.callId, i);
  });
  const answered = new Set();
  input.forEach((it, i) => {
    if (it.type !== "function_call_result") return;
    assert.ok(calls.has(it.callId) && calls.get(it.callId) < i, `${where}: result of ${it.callId} without its call before it`);
    answered.add(it.callId);
  });
  for (const id of calls.keys()) assert.ok(answered.has(id), `${where}: call ${id} without its result`);
}

// The text the model reads in an input (lower bound of what it costs: no per-item overhead).
function textOf(input) {
  return input.map((it) => {
    if (it.type === "function_call") return `${it.name} ${it.arguments}`;
    if (it.type === "function_call_result") return typeof it.output === "string" ? it.output : it.output?.text ?? JSON.stringify(it.output);
    if (typeof it.content === "string") return it.content;
    return (it.content ?? []).map((c) => c.text ?? "").join(" ");
  }).join("\n");
}

test("300 model turns of tool loops: every model call gets a pack within the budget, valid pairs, usage adds up", async () => {
  const sessionId = uniqueId("agents-loop");
  const BUDGET = 1500;
  const RUNS = 100; // three model turns each: two tool calls, then the answer
  const packs = [];
  const session = new CtxdSession({
    sessionId,
    client,
    budgetTokens: BUDGET,
    compaction: { maxSummaryTokens: 250 },
    onPack: (pack, use) => packs.push({ pack, use }),
  });
  const lookup = tool({
    name: "lookup",
    description: "Looks a step up",
    parameters: z.object({ task: z.number(), step: z.number() }),
    execute: async ({ task, step }) => `Task ${task} step ${step}: ${"measured value ".repeat(25)}done.`,
  });
  const reported = { input: 0n, output: 0n, cached: 0n, reasoning: 0n };
  let maxInputText = 0;
  const respond = async (call) => {
    const n = call.index;
    const task = Math.floor(n / 3);
    const step = n % 3;
    const input = plain(call.request.input);
    const where = `model call ${n} (task ${task}, step ${step})`;
    // The input is the pack the session built for this call, within the budget.
    const last = packs.at(-1);
    assert.equal(last.use, "modelInput", where);
    assert.ok(last.pack.stats.totalTokens <= BUDGET && !last.pack.stats.overBudget, `${where}: pack of ${last.pack.stats.totalTokens} tokens`);
    assert.deepEqual(input.map(toResponsesItem), JSON.parse(last.pack.rendered).map((w) => toResponsesItem(fromResponsesItem(w))), `${where}: the model got the pack`);
    // Counted independently: the text alone is within the budget too.
    const { tokens } = await client.countTokens({ text: textOf(input) });
    assert.ok(tokens <= BUDGET, `${where}: ${tokens} tokens of text`);
    maxInputText = Math.max(maxInputText, tokens);
    assertPairs(input, where);
    // The current turn is there: the task's question and the newest result.
    const text = JSON.stringify(input);
    assert.ok(text.includes(`Task ${task}: do the two steps.`), `${where}: the question is missing`);
    if (step > 0) assert.equal(input.at(-1).type, "function_call_result", where);
    if (step > 0) assert.equal(input.at(-1).callId, `call_${task}_${step}`, where);
    const usage = { input: 200 + n, output: 20 + (n % 7), cached: n % 5 === 0 ? 0 : 150, reasoning: n % 3 };
    reported.input += BigInt(usage.input);
    reported.output += BigInt(usage.output);
    reported.cached += BigInt(usage.cached);
    reported.reasoning += BigInt(usage.reasoning);
    const output = step < 2
      ? [functionCall("lookup", { task, step: step + 1 }, { callId: `call_${task}_${step + 1}`, id: `fc_${task}_${step + 1}` })]
      : [assistantMessage(`Task ${task} done.`, { id: `msg_${task}` })];
    return {
      output,
      responseId: `resp_${n}`,
      usage: new Usage({ requests: 1, inputTokens: usage.input, outputTokens: usage.output, inputTokensDetails: { cached_tokens: usage.cached }, outputTokensDetails: { reasoning_tokens: usage.reasoning } }),
    };
  };
  const model = new ScriptedModel();
  const agent = new Agent({ name: "worker", instructions: "Do the steps with the tool.", model, tools: [lookup] });
  for (let task = 0; task < RUNS; task++) {
    model.enqueue(modelResponder(respond), modelResponder(respond), modelResponder(respond));
    const result = await run(agent, `Task ${task}: do the two steps.`, { session, callModelInputFilter: session.callModelInputFilter });
    assert.equal(result.finalOutput, `Task ${task} done.`);
  }
  model.assertComplete();
  assert.equal(model.calls.length, 3 * RUNS);

  // The log holds every item once, in order: per task the question, two call/result pairs, the answer.
  const log = plain(await session.getAllItems());
  assert.equal(log.length, 6 * RUNS);
  for (let task = 0; task < RUNS; task++) {
    const [q, c1, r1, c2, r2, a] = log.slice(6 * task, 6 * task + 6);
    assert.equal(q.content, `Task ${task}: do the two steps.`);
    assert.deepEqual([c1.callId, r1.callId, c2.callId, r2.callId], [`call_${task}_1`, `call_${task}_1`, `call_${task}_2`, `call_${task}_2`]);
    assert.equal(a.content[0].text, `Task ${task} done.`);
  }
  // ... far more than the budget: the packs really left history out, and compaction summarized it.
  const { tokens: logTokens } = await client.countTokens({ text: textOf(log) });
  assert.ok(logTokens > 10 * BUDGET, `the log has ${logTokens} tokens`);
  assert.ok(packs.some(({ pack }) => pack.messages.some((m) => m.source === ContextSource.SUMMARY)), "a pack carried the summary");

  // Usage: on each model turn's assistant message, and the conversation's totals are what the
  // model reported.
  const { conversation } = await client.getConversation({ conversationId: sessionId });
  assert.ok(conversation.summaryThroughSequence > 0n, "compaction ran on tokens");
  assert.deepEqual(
    { input: conversation.usage.inputTokens, output: conversation.usage.outputTokens, cached: conversation.usage.cachedInputTokens, reasoning: conversation.usage.reasoningTokens },
    reported,
  );
  let withUsage = 0;
  for (let after = 0n; ;) {
    const page = await client.listMessages({ conversationId: sessionId, afterSequence: after, pageSize: 1000 });
    withUsage += page.messages.filter((m) => m.role === Role.ASSISTANT && (m.usage?.outputTokens ?? 0n) > 0n).length;
    if (page.nextAfterSequence === 0n) break;
    after = page.nextAfterSequence;
  }
  assert.equal(withUsage, 3 * RUNS, "one assistant message per model call carries its usage");
  assert.ok(maxInputText > BUDGET / 3, `packs used the budget (largest input ${maxInputText} tokens of text)`);
});

test("with the filter, repeated inputs and answers are each stored once (streamed or not)", async () => {
  // Every run asks "Next." and ends "OK." (no item id), so the packs the filter hands the model
  // hold items equal to the run's own; the log must still get each exactly once, in order.
  const lookup = tool({ name: "lookup", description: "Looks up", parameters: z.object({ n: z.number() }), execute: async ({ n }) => `value ${n}: ${"x ".repeat(20)}` });
  for (const stream of [false, true]) {
    const session = new CtxdSession({ sessionId: uniqueId(`agents-same-${stream}`), client, budgetTokens: 400 });
    const respond = (call) => {
      const t = Math.floor(call.index / 2);
      const output = call.index % 2 === 0 ? [functionCall("lookup", { n: t }, { callId: `call_s${t}` })] : [assistantMessage("OK.")];
      return { output, usage: new Usage({ requests: 1, inputTokens: 10, outputTokens: 1 }) };
    };
    const model = new ScriptedModel();
    const agent = new Agent({ name: "same", instructions: "Look up, then say OK.", model, tools: [lookup] });
    for (let t = 0; t < 30; t++) {
      model.enqueue(modelResponder(respond), modelResponder(respond));
      const result = await run(agent, "Next.", { session, stream, callModelInputFilter: session.callModelInputFilter });
      if (stream) {
        for await (const _ of result) { /* drain */ }
        await result.completed;
      }
    }
    const log = plain(await session.getAllItems());
    assert.equal(log.length, 4 * 30, `stream=${stream}`);
    log.forEach((it, i) => {
      const t = Math.floor(i / 4);
      const expected = [["message", "user"], ["function_call", `call_s${t}`], ["function_call_result", `call_s${t}`], ["message", "assistant"]][i % 4];
      assert.deepEqual([it.type, it.role ?? it.callId], expected, `stream=${stream} item ${i}`);
    });
    const { conversation } = await client.getConversation({ conversationId: session.sessionId });
    assert.equal(conversation.usage.inputTokens, 600n, `stream=${stream}`);
  }
});

test("the Responses request the SDK's OpenAI provider sends is the session's pack", async () => {
  // The SDK's own OpenAIResponsesModel over a fake OpenAI client (no network): what it would
  // POST to /v1/responses is checked against the pack the session built for that call.
  const packs = [];
  const session = new CtxdSession({ sessionId: uniqueId("agents-wire"), client, budgetTokens: 400, onPack: (p, use) => use === "modelInput" && packs.push(p) });
  const sent = [];
  const fakeOpenAI = { responses: { create: async (params) => {
    sent.push(plain(params));
    const i = sent.length - 1;
    const output = i % 2 === 0
      ? [
          { type: "reasoning", id: `rs_${i}`, summary: [{ type: "summary_text", text: `Look it up (${i}).` }], encrypted_content: `gAAAA${i}` },
          { type: "function_call", id: `fc_${i}`, call_id: `call_w${i}`, name: "lookup", arguments: JSON.stringify({ q: i / 2 }), status: "completed" },
        ]
      : [{ type: "message", id: `msg_${i}`, role: "assistant", status: "completed", content: [{ type: "output_text", text: `Answer ${(i - 1) / 2}.`, annotations: [] }] }];
    return { id: `resp_${i}`, object: "response", created_at: 0, model: "gpt-test", status: "completed", output,
      usage: { input_tokens: 100, output_tokens: 10, total_tokens: 110, input_tokens_details: { cached_tokens: 60 }, output_tokens_details: { reasoning_tokens: 4 } } };
  } } };
  const lookup = tool({ name: "lookup", description: "Looks up", parameters: z.object({ q: z.number() }), execute: async ({ q }) => `value ${q}: ${"data ".repeat(30)}` });
  const agent = new Agent({ name: "wire", instructions: "Look things up.", model: new OpenAIResponsesModel(fakeOpenAI, "gpt-test"), tools: [lookup] });
  for (let t = 0; t < 12; t++) {
    await run(agent, `Question ${t}?`, { session, callModelInputFilter: session.callModelInputFilter });
  }
  assert.equal(sent.length, 24);
  assert.equal(packs.length, 24);
  // The SDK sends its own shapes: a user message without `type`, a reply left without its id (a
  // completed turn) as output_text parts with status; otherwise the pack's items as rendered.
  const norm = (items) => plain(items.map((it) => (it.type === undefined && it.role ? { type: "message", ...it } : it)));
  for (const [i, params] of sent.entries()) {
    const pack = JSON.parse(packs[i].rendered);
    assert.deepEqual(norm(params.input), norm(pack.map((w) => toResponsesItem(fromResponsesItem(w)))), `call ${i}`);
    assert.ok(packs[i].stats.totalTokens <= 400, `call ${i}: ${packs[i].stats.totalTokens} tokens`);
    // Within a tool loop the model gets its reasoning back (encrypted), with the call's ids.
    if (i % 2 === 1) {
      const reasoning = params.input.find((it) => it.type === "reasoning" && it.id === `rs_${i - 1}`);
      assert.equal(reasoning?.encrypted_content, `gAAAA${i - 1}`, `call ${i}`);
      assert.equal(params.input.at(-1).type, "function_call_output");
    }
  }
  const { stats } = packs.at(-1);
  assert.ok(stats.messagesIncluded < Number(stats.logLastSequence) && stats.summaryThroughSequence > 0n, "the budget left history out, a summary stands for it");
  const { conversation } = await client.getConversation({ conversationId: session.sessionId });
  assert.deepEqual(
    [conversation.usage.inputTokens, conversation.usage.outputTokens, conversation.usage.cachedInputTokens, conversation.usage.reasoningTokens],
    [2400n, 240n, 1440n, 96n],
  );
});

test("forced compaction of a short session summarizes what it can, or says why not", async () => {
  const opener = [
    { type: "message", role: "user", content: "Book a table for two at eight." },
    { type: "message", id: "msg_1", role: "assistant", status: "completed", content: [{ type: "output_text", text: "Booked: two people, 8 pm." }] },
  ];
  // An empty session: nothing to summarize, and the result says so (never a silent null).
  const empty = new CtxdSession({ sessionId: uniqueId("agents-force-empty"), client });
  const none = await empty.runCompaction({ force: true });
  assert.equal(none.compacted, false);
  assert.match(none.reason, /empty/);
  assert.equal(await empty.runCompaction(), null, "not forced: null when not due");

  // One exchange, far below keepRecentTokens: not due, but forced it summarizes all of it.
  const sessionId = uniqueId("agents-force-short");
  const session = new CtxdSession({ sessionId, client });
  await session.addItems(opener);
  assert.equal(await session.runCompaction(), null, "a short session is not due");
  const done = await session.runCompaction({ force: true });
  assert.equal(done.compacted, true);
  assert.equal(done.throughSequence, 2n);
  assert.equal(done.usage.inputTokens, 0);
  // The pack opens with the summary (ctxd keeps the current turn verbatim in packs as well).
  const items = plain(await session.getItems());
  assert.equal(items[0].role, "system");
  assert.match(items[0].content, /^Summary of the conversation so far \(messages 1 to 2\)/);
  assert.match(items[0].content, /table for two/);
  assert.equal((await session.getAllItems()).length, 2, "the log keeps both items");

  // Forced again with nothing new: explained.
  const again = await session.runCompaction({ force: true });
  assert.equal(again.compacted, false);
  assert.equal(again.throughSequence, 2n);
  assert.match(again.reason, /summarized already/);

  // Bring-your-own summarizer on a short session: it gets the request for what can be summarized.
  const byoId = uniqueId("agents-force-byo");
  let asked = 0;
  const byo = new CtxdSession({ sessionId: byoId, client, compaction: { summarize: async (prepared) => {
    asked++;
    assert.match(prepared.rendered, /table for two/);
    return "Table for two booked at 8 pm.";
  } } });
  await byo.addItems(opener);
  const byoDone = await byo.runCompaction({ force: true });
  assert.equal(asked, 1);
  assert.equal(byoDone.compacted, true);
  assert.match(plain(await byo.getItems())[0].content, /Table for two booked/);
  const byoAgain = await byo.runCompaction({ force: true });
  assert.equal(asked, 1, "nothing new: the model is not asked");
  assert.equal(byoAgain.compacted, false);
  assert.match(byoAgain.reason, /summarized already/);
});

test("usage of a run resumed from a serialized RunState (tool approval) is stored once", async () => {
  const sessionId = uniqueId("agents-resume");
  const usage = (input, output) => new Usage({ requests: 1, inputTokens: input, outputTokens: output });
  const remove = tool({
    name: "delete_file",
    description: "Deletes a file",
    parameters: z.object({ path: z.string() }),
    needsApproval: true,
    execute: async ({ path }) => `deleted ${path}`,
  });
  const model = new ScriptedModel([
    { output: [functionCall("delete_file", { path: "a.txt" }, { callId: "call_del", id: "fc_del" })], usage: usage(100, 10) },
    { output: [assistantMessage("Deleted a.txt.")], usage: usage(150, 5) },
  ]);
  const agent = new Agent({ name: "files", instructions: "Delete what you are asked to.", model, tools: [remove] });
  const before = new CtxdSession({ sessionId, client });
  const first = await run(agent, "Delete a.txt", { session: before, callModelInputFilter: before.callModelInputFilter });
  assert.equal(first.interruptions.length, 1);
  const usageOf = async () => (await client.getConversation({ conversationId: sessionId })).conversation.usage;
  assert.equal((await usageOf()).inputTokens, 100n);

  // Another process: the state comes back from its JSON, with the usage of the first call in it.
  const state = await RunState.fromString(agent, first.state.toString());
  state.approve(state.getInterruptions()[0]);
  const after = new CtxdSession({ sessionId, client });
  const second = await run(agent, state, { session: after });
  assert.equal(second.finalOutput, "Deleted a.txt.");
  assert.deepEqual(plain(await after.getAllItems()).map((i) => i.type), ["message", "function_call", "function_call_result", "message"]);
  const total = await usageOf();
  assert.deepEqual([total.inputTokens, total.outputTokens], [250n, 15n]);
});

test("converters: SDK items <-> Responses wire items", () => {
  const result = { type: "function_call_result", callId: "c1", name: "f", status: "completed", output: { type: "text", text: "ok" } };
  assert.deepEqual(toResponsesItem(result), { type: "function_call_output", call_id: "c1", output: "ok", status: "completed" });
  assert.deepEqual(plain(fromResponsesItem(toResponsesItem(result), new Map([["c1", "f"]]))), result);
});
