// Vercel AI SDK helpers with the SDK's own mock model (ai/test MockLanguageModelV4): two turns of
// streamText where the model calls a tool, persisted with persistOnFinish, prompts from
// buildPrompt, UI history from loadChat.
import { test } from "node:test";
import assert from "node:assert/strict";
import { streamText, generateText, tool, isStepCount, convertToModelMessages, createIdGenerator } from "ai";
import { MockLanguageModelV4, convertArrayToReadableStream } from "ai/test";
import { z } from "zod";
import { createCtxdClient, Role, ContextSource } from "@ctxd/client";
import { loadChat, persistOnFinish, buildPrompt, splitSystem, DEFAULT_BUDGET_TOKENS } from "@ctxd/client/ai";
import { baseUrl, uniqueId } from "./env.mjs";

// The universal (fetch) client over Connect: what an edge route handler would use.
const client = createCtxdClient({ baseUrl, transport: "connect", timeoutMs: 10_000 });

const usage = { inputTokens: { total: 10, noCache: 10, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 5, text: 5, reasoning: 0 } };
const finish = (unified) => ({ type: "finish", finishReason: { unified, raw: unified }, usage });
const textStep = (id, text) => ({
  stream: convertArrayToReadableStream([
    { type: "stream-start", warnings: [] },
    { type: "response-metadata", id: `resp-${id}`, modelId: "mock" },
    { type: "text-start", id },
    { type: "text-delta", id, delta: text },
    { type: "text-end", id },
    finish("stop"),
  ]),
});
const toolStep = (toolCallId, toolName, input) => ({
  stream: convertArrayToReadableStream([
    { type: "stream-start", warnings: [] },
    { type: "tool-call", toolCallId, toolName, input: JSON.stringify(input) },
    finish("tool-calls"),
  ]),
});
const tools = {
  get_weather: tool({
    description: "Weather of a city",
    inputSchema: z.object({ city: z.string() }),
    execute: async ({ city }) => ({ city, temperature: 18, sky: "sunny" }),
  }),
};
const SYSTEM = "You are a weather assistant.";

async function turn({ model, chatId, userMessage }) {
  const stored = await loadChat(client, chatId);
  const messages = [...stored, userMessage];
  const prompt = await buildPrompt(client, chatId, {
    system: SYSTEM,
    budget: { maxTokens: 8000 },
    pending: await convertToModelMessages([userMessage]),
  });
  let finished;
  const persisted = new Promise((resolve, reject) => {
    const persist = persistOnFinish(client, chatId);
    finished = async (event) => {
      try {
        await persist(event);
        resolve(event.messages);
      } catch (e) {
        reject(e);
      }
    };
  });
  const result = streamText({ model, messages: prompt, allowSystemInMessages: true, tools, stopWhen: isStepCount(3) });
  const response = result.toUIMessageStreamResponse({
    originalMessages: messages,
    generateMessageId: createIdGenerator({ prefix: "msg", size: 16 }),
    onFinish: finished,
  });
  await response.text();
  return { prompt, uiMessages: await persisted };
}

test("two turns of streamText with a tool call, persisted and rebuilt from ctxd", async () => {
  const chatId = uniqueId("ai");
  const model = new MockLanguageModelV4({
    doStream: [
      toolStep("call_w1", "get_weather", { city: "Paris" }),
      textStep("t1", "It is 18C and sunny in Paris."),
      textStep("t2", "You asked about Paris."),
    ],
  });

  const u1 = { id: "u1", role: "user", parts: [{ type: "text", text: "What is the weather in Paris?" }] };
  const first = await turn({ model, chatId, userMessage: u1 });
  // A new chat: the prompt is the system prompt and the pending user message.
  assert.deepEqual(first.prompt.map((m) => m.role), ["system", "user"]);
  assert.equal(first.prompt[0].content, SYSTEM);

  // The log: user, assistant (tool call), tool result, assistant text.
  const listed = await client.listMessages({ conversationId: chatId });
  assert.deepEqual(listed.messages.map((m) => Role[m.role]), ["USER", "ASSISTANT", "TOOL", "ASSISTANT"]);
  assert.equal(listed.messages[1].toolCalls[0].id, "call_w1");
  assert.deepEqual(JSON.parse(listed.messages[1].toolCalls[0].arguments), { city: "Paris" });
  assert.deepEqual(JSON.parse(listed.messages[2].content), { city: "Paris", temperature: 18, sky: "sunny" });
  assert.equal(listed.messages[3].content, "It is 18C and sunny in Paris.");

  // loadChat gives back the UI messages exactly as the stream's onFinish had them.
  const loaded = await loadChat(client, chatId);
  assert.deepEqual(loaded, JSON.parse(JSON.stringify(first.uiMessages)));
  const toolPart = loaded[1].parts.find((p) => p.type === "tool-get_weather");
  assert.equal(toolPart.state, "output-available");

  // Second turn: the prompt built from the pack holds the first turn, tool call and result included.
  const u2 = { id: "u2", role: "user", parts: [{ type: "text", text: "Which city did I ask about?" }] };
  const second = await turn({ model, chatId, userMessage: u2 });
  assert.deepEqual(second.prompt.map((m) => m.role), ["system", "user", "assistant", "tool", "assistant", "user"]);
  const call = second.prompt[2].content.find((p) => p.type === "tool-call");
  assert.deepEqual(call, { type: "tool-call", toolCallId: "call_w1", toolName: "get_weather", input: { city: "Paris" } });
  assert.deepEqual(second.prompt[3].content[0], {
    type: "tool-result", toolCallId: "call_w1", toolName: "get_weather",
    output: { type: "json", value: { city: "Paris", temperature: 18, sky: "sunny" } },
  });
  // ... and the model really got it: the third model call's prompt contains turn one.
  const modelPrompt = JSON.stringify(model.doStreamCalls[2].prompt);
  for (const needle of [SYSTEM, "What is the weather in Paris?", "call_w1", "sunny", "It is 18C and sunny in Paris.", "Which city did I ask about?"]) {
    assert.ok(modelPrompt.includes(needle), `turn 2 model prompt lacks ${needle}`);
  }

  // Only the new messages were appended (sequences 5.., nothing rewritten).
  const all = await client.listMessages({ conversationId: chatId });
  assert.deepEqual(all.messages.map((m) => Number(m.sequence)), [1, 2, 3, 4, 5, 6]);
  assert.deepEqual(all.messages.slice(0, 4).map((m) => m.createdAt?.seconds), listed.messages.map((m) => m.createdAt?.seconds));
  assert.deepEqual((await loadChat(client, chatId)).map((m) => m.id), ["u1", first.uiMessages[1].id, "u2", second.uiMessages[3].id]);

  // Persisting the same list again appends nothing.
  await persistOnFinish(client, chatId)({ messages: second.uiMessages });
  assert.equal((await client.getConversation({ conversationId: chatId })).conversation.lastSequence, 6n);

  const { instructions, messages } = splitSystem(second.prompt);
  assert.equal(instructions, SYSTEM);
  assert.equal(messages[0].role, "user");
});

test("generateText onFinish (ModelMessages) persisted with the turn's prompt", async () => {
  const chatId = uniqueId("ai-gen");
  const model = new MockLanguageModelV4({
    doGenerate: [
      { content: [{ type: "tool-call", toolCallId: "call_g1", toolName: "get_weather", input: "{\"city\":\"Oslo\"}" }], finishReason: { unified: "tool-calls", raw: "tool_calls" }, usage, warnings: [] },
      { content: [{ type: "text", text: "Oslo: 18C." }], finishReason: { unified: "stop", raw: "stop" }, usage, warnings: [] },
    ],
  });
  const user = { role: "user", content: "Weather in Oslo?" };
  const prompt = await buildPrompt(client, chatId, { pending: [user] });
  let done;
  const persisted = new Promise((r) => (done = r));
  const persist = persistOnFinish(client, chatId, { prompt: [user] });
  await generateText({ model, messages: prompt, tools, stopWhen: isStepCount(3), onFinish: async (e) => { await persist(e); done(); } });
  await persisted;
  const next = await buildPrompt(client, chatId, { budget: { maxTokens: 4000 } });
  assert.deepEqual(next.map((m) => m.role), ["user", "assistant", "tool", "assistant"]);
  assert.equal(next[3].content[0].text, "Oslo: 18C.");
});

test("buildPrompt packs within the budget: newest history that fits, calls with their results", async () => {
  const chatId = uniqueId("ai-budget");
  // 60 turns, each: question, a tool call, its (long) result, the answer.
  const messages = [];
  for (let t = 0; t < 60; t++) {
    messages.push({ role: Role.USER, content: `Question ${t}: what is the reading at station ${t}?` });
    messages.push({ role: Role.ASSISTANT, content: "", toolCalls: [{ id: `call_b${t}`, name: "read_station", arguments: JSON.stringify({ station: t }) }] });
    messages.push({ role: Role.TOOL, toolCallId: `call_b${t}`, content: JSON.stringify({ station: t, readings: Array.from({ length: 20 }, (_, i) => i * t) }) });
    messages.push({ role: Role.ASSISTANT, content: `Station ${t} reads ${19 * t} at most.` });
  }
  for (let i = 0; i < messages.length; i += 100) await client.appendMessage({ conversationId: chatId, messages: messages.slice(i, i + 100) });

  const text = (prompt) => prompt.map((m) => (typeof m.content === "string" ? m.content : m.content.map((p) => p.text ?? JSON.stringify(p.input ?? p.output ?? "")).join(" "))).join("\n");
  const { tokens: chatTokens } = await client.countTokens({ text: text((await buildPrompt(client, chatId, { budgetTokens: 1_000_000 })) ) });

  for (const budgetTokens of [600, 1500, 4000]) {
    let pack;
    const prompt = await buildPrompt(client, chatId, {
      budgetTokens,
      system: "You read weather stations.",
      pending: [{ role: "user", content: "And station 60?" }],
      onPack: (p) => (pack = p),
    });
    assert.equal(pack.stats.budgetTokens, budgetTokens);
    assert.ok(pack.stats.totalTokens <= budgetTokens && !pack.stats.overBudget, `${pack.stats.totalTokens} tokens for a budget of ${budgetTokens}`);
    const { tokens } = await client.countTokens({ text: text(prompt) });
    assert.ok(tokens <= budgetTokens && tokens < chatTokens, `prompt text ${tokens} tokens, chat ${chatTokens}`);
    assert.ok(pack.messages.some((m) => m.source === ContextSource.TRUNCATION_NOTICE), "what was left out is said");
    // First the system prompt (and the notice), last the pending question; the newest turn is in.
    assert.equal(prompt[0].content, "You read weather stations.");
    assert.deepEqual(prompt.at(-1), { role: "user", content: "And station 60?" });
    assert.equal(prompt.at(-2).content[0].text, "Station 59 reads 1121 at most.");
    // Every tool-call part is answered by the tool message after it, and every result has its call.
    for (const [i, m] of prompt.entries()) {
      if (m.role === "assistant") for (const part of m.content.filter((p) => p.type === "tool-call")) {
        assert.equal(prompt[i + 1]?.role, "tool");
        assert.ok(prompt[i + 1].content.some((r) => r.toolCallId === part.toolCallId), `call ${part.toolCallId} answered`);
      }
      if (m.role === "tool") for (const r of m.content) {
        assert.ok(prompt[i - 1]?.role === "assistant" && prompt[i - 1].content.some((p) => p.toolCallId === r.toolCallId), `result ${r.toolCallId} after its call`);
      }
    }
  }

  // Without a budget: DEFAULT_BUDGET_TOKENS.
  let pack;
  await buildPrompt(client, chatId, { onPack: (p) => (pack = p) });
  assert.equal(DEFAULT_BUDGET_TOKENS, 32_000);
  assert.equal(pack.stats.budgetTokens, DEFAULT_BUDGET_TOKENS);
  // budget.maxTokens wins over budgetTokens; reserveOutputTokens is kept free inside it.
  await buildPrompt(client, chatId, { budgetTokens: 9000, budget: { maxTokens: 3000, reserveOutputTokens: 1000 }, onPack: (p) => (pack = p) });
  assert.equal(pack.stats.budgetTokens, 2000);
  assert.ok(pack.stats.totalTokens <= 2000);
});
