// CtxdSession with the Agents SDK's own ScriptedModel: a two-turn run where the model calls a
// tool, then the log, the second turn's model input, popItem and compaction.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Agent, run, tool, setTracingDisabled } from "@openai/agents";
import { ScriptedModel, assistantMessage, functionCall } from "@openai/agents/testing";
import { z } from "zod";
import { createCtxdClient, Format } from "@ctxd/client/node";
import { CtxdSession, toResponsesItem, fromResponsesItem } from "@ctxd/client/agents";
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
  spy.addItems = async (items) => {
    added.push(...plain(items));
    return session.addItems(items);
  };

  const model = new ScriptedModel([
    [
      { type: "reasoning", id: "rs_1", content: [{ type: "input_text", text: "Use the weather tool." }], providerData: { encryptedContent: "gAAAAenc" } },
      functionCall("get_weather", { city: "Paris" }, { callId: "call_paris", id: "fc_1" }),
    ],
    [assistantMessage("It is 18C and sunny in Paris.", { id: "msg_1" })],
    [assistantMessage("You asked about Paris.", { id: "msg_2" })],
  ]);
  const agent = new Agent({ name: "weather", instructions: "Answer with the tool.", model, tools: [getWeather] });

  const first = await run(agent, "What is the weather in Paris?", { session: spy });
  assert.equal(first.finalOutput, "It is 18C and sunny in Paris.");
  const second = await run(agent, "Which city did I ask about?", { session: spy });
  assert.equal(second.finalOutput, "You asked about Paris.");
  model.assertComplete();

  // Every item the runner stored is in ctxd and comes back exactly.
  const items = plain(await session.getItems());
  assert.deepEqual(items, added, "getItems returns what addItems was given");
  const types = items.map((i) => i.type ?? i.role);
  assert.deepEqual(types, ["message", "reasoning", "function_call", "function_call_result", "message", "message", "message"]);

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
  assert.deepEqual(plain(await session.getItems(2)), added.slice(-2));

  // popItem removes the newest item and returns it; the rest stays.
  const popped = plain(await session.popItem());
  assert.deepEqual(popped, added.at(-1));
  assert.deepEqual(plain(await session.getItems()), added.slice(0, -1));
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
  assert.deepEqual(plain(await session.getItems()), items);
  assert.equal(listed.messages[1].reasoning[0].data, "gAAAA");

  assert.deepEqual(plain(await session.popItem()), items[3]);
  assert.deepEqual(plain(await session.getItems()), items.slice(0, 3));
  assert.deepEqual(plain(await session.popItem()), items[2]);
  assert.deepEqual(plain(await session.getItems()), items.slice(0, 2));
  assert.deepEqual(plain(await session.popItem()), items[1]);
  assert.deepEqual(plain(await session.popItem()), items[0]);
  assert.equal(await session.popItem(), undefined);
});

test("runCompaction: Summarize (server summarizer), then history from the summary", async () => {
  const sessionId = uniqueId("agents-compact");
  const session = new CtxdSession({ sessionId, client, compaction: { keepRecentTokens: 50 } });
  for (let i = 0; i < 6; i++) {
    await session.addItems([
      { type: "message", role: "user", content: `Question ${i}: ${"details ".repeat(40)}` },
      { type: "message", id: `msg_${i}`, role: "assistant", status: "completed", content: [{ type: "output_text", text: `Answer ${i}.` }] },
    ]);
  }
  assert.equal(await session.runCompaction(), null, "not forced and no trigger: nothing");
  const result = await session.runCompaction({ force: true });
  assert.ok(result && typeof result.usage.inputTokens === "number");
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

test("converters: SDK items <-> Responses wire items", () => {
  const result = { type: "function_call_result", callId: "c1", name: "f", status: "completed", output: { type: "text", text: "ok" } };
  assert.deepEqual(toResponsesItem(result), { type: "function_call_output", call_id: "c1", output: "ok", status: "completed" });
  assert.deepEqual(plain(fromResponsesItem(toResponsesItem(result), new Map([["c1", "f"]]))), result);
});
