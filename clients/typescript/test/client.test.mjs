// The client over every transport: gRPC (Node, HTTP/2), Connect and gRPC-Web (Node's
// connect-node and the universal fetch-based entry), against a live ctxd.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as universal from "@ctxd/client";
import * as node from "@ctxd/client/node";
import { Role, Format, Code, ConnectError, fieldViolations, appendNative, openaiChatParams, openaiResponsesParams, anthropicParams, geminiParams } from "@ctxd/client";
import { baseUrl, uniqueId } from "./env.mjs";

const variants = [
  ["node grpc", () => node.createCtxdClient({ baseUrl, transport: "grpc", timeoutMs: 10_000 })],
  ["node connect", () => node.createCtxdClient({ baseUrl, transport: "connect", timeoutMs: 10_000 })],
  ["node connect http2", () => node.createCtxdClient({ baseUrl, transport: "connect", httpVersion: "2", timeoutMs: 10_000 })],
  ["node grpc-web", () => node.createCtxdClient({ baseUrl, transport: "grpc-web", timeoutMs: 10_000 })],
  ["fetch connect", () => universal.createCtxdClient({ baseUrl, transport: "connect", timeoutMs: 10_000 })],
  ["fetch connect binary", () => universal.createCtxdClient({ baseUrl, transport: "connect", useBinaryFormat: true })],
  ["fetch grpc-web", () => universal.createCtxdClient({ baseUrl, transport: "grpc-web", timeoutMs: 10_000 })],
];

for (const [name, make] of variants) {
  test(`${name}: append, build, list, refusal with field violations`, async () => {
    const client = make();
    const conversationId = uniqueId(name.replace(/ /g, "-"));
    const appended = await client.appendMessage({
      conversationId,
      messages: [
        { role: Role.USER, content: "What is the weather in Paris?" },
        { role: Role.ASSISTANT, toolCalls: [{ id: "call_1", name: "get_weather", arguments: '{"city":"Paris"}' }] },
        { role: Role.TOOL, toolCallId: "call_1", content: "18C" },
      ],
    });
    assert.equal(appended.firstSequence, 1n);
    assert.equal(appended.lastSequence, 3n);

    const pack = await client.buildContext({ conversationId, budget: { maxTokens: 1000 }, systemPrompt: "Be brief.", format: Format.OPENAI_CHAT });
    const { messages } = openaiChatParams(pack);
    assert.deepEqual(messages.map((m) => m.role), ["system", "user", "assistant", "tool"]);
    assert.equal(messages[2].tool_calls[0].id, "call_1");
    assert.ok(pack.stats.totalTokens > 0);

    const listed = await client.listMessages({ conversationId, format: Format.ANTHROPIC_MESSAGES });
    assert.equal(listed.messages.length, 3);
    assert.equal(listed.messages[2].toolCallId, "call_1");
    assert.ok(Array.isArray(JSON.parse(listed.rendered).messages));

    let error;
    try {
      await client.appendMessage({ conversationId, messages: [{ role: Role.TOOL, toolCallId: "call_nope", content: "x" }] });
    } catch (e) {
      error = e;
    }
    assert.ok(error instanceof ConnectError, `expected a ConnectError, got ${error}`);
    assert.equal(error.code, Code.InvalidArgument);
    const violations = fieldViolations(error);
    assert.ok(violations.some((v) => v.field === "messages[0].tool_call_id" && v.description), JSON.stringify(violations));
    assert.equal((await client.getConversation({ conversationId })).conversation.lastSequence, 3n, "nothing stored");
  });
}

test("grpc is refused by the fetch entry point with a pointer to /node", () => {
  assert.throws(() => universal.createCtxdClient({ baseUrl, transport: "grpc" }), /@ctxd\/client\/node/);
  assert.throws(() => universal.createCtxdClient({ baseUrl: "localhost:1" }), /http\(s\) URL/);
});

test("tenant header scopes conversations; deadlines apply", async () => {
  const a = node.createCtxdClient({ baseUrl, tenant: "tenant-a" });
  const b = universal.createCtxdClient({ baseUrl, tenant: "tenant-b" });
  const conversationId = uniqueId("tenant");
  await a.appendMessage({ conversationId, messages: [{ role: Role.USER, content: "hi" }] });
  await assert.rejects(b.getConversation({ conversationId }), (e) => e.code === Code.NotFound);
  assert.equal((await a.getConversation({ conversationId })).conversation.lastSequence, 1n);
  // A call that takes longer than its deadline (counting 900 kB of prose takes several ms; a
  // one-character text could be answered before a microsecond deadline was noticed).
  const text = "the ledger job failed twice before it was restarted by hand. ".repeat(15_000);
  await assert.rejects(a.countTokens({ text }, { timeoutMs: 1 }), (e) => e.code === Code.DeadlineExceeded);
});

test("native helpers: provider objects in, provider SDK params out (every format)", async () => {
  const client = node.createCtxdClient({ baseUrl });
  const conversationId = uniqueId("native");
  await appendNative(client, conversationId, [{ role: "user", content: "Who won?" }], "openai-chat");
  // An Anthropic Message (response object) with thinking and a tool call, then its result.
  await appendNative(client, conversationId, {
    id: "msg_01", type: "message", role: "assistant", model: "claude",
    content: [
      { type: "thinking", thinking: "Look it up.", signature: "EqQB" },
      { type: "tool_use", id: "toolu_1", name: "search", input: { q: "final" } },
    ],
    stop_reason: "tool_use", usage: { input_tokens: 12, output_tokens: 9 },
  }, Format.ANTHROPIC_MESSAGES);
  await appendNative(client, conversationId, [{ role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: "The home team." }] }], "anthropic");
  // A Responses `Response` answering it.
  const res = await appendNative(client, conversationId, {
    id: "resp_1", object: "response", status: "completed",
    output: [{ type: "message", id: "msg_r1", role: "assistant", status: "completed", content: [{ type: "output_text", text: "The home team won.", annotations: [] }] }],
    usage: { input_tokens: 30, output_tokens: 6, total_tokens: 36 },
  }, "openai-responses", { expectedLastSequence: 3 });
  assert.equal(res.lastSequence, 4n);
  const { conversation } = await client.getConversation({ conversationId });
  assert.equal(conversation.usage.inputTokens, 42n);

  const build = (format) => client.buildContext({ conversationId, budget: { maxTokens: 4000 }, systemPrompt: "Be brief.", format });
  const chat = openaiChatParams(await build(Format.OPENAI_CHAT));
  assert.equal(chat.messages[0].role, "system");
  const responses = openaiResponsesParams(await build(Format.OPENAI_RESPONSES));
  assert.ok(responses.input.some((i) => i.type === "function_call" && i.call_id === "toolu_1"));
  const anthropic = anthropicParams(await build(Format.ANTHROPIC_MESSAGES));
  assert.ok(anthropic.system, "system prompt as Anthropic system");
  assert.ok(anthropic.messages.some((m) => Array.isArray(m.content) && m.content.some((b) => b.type === "tool_use" && b.id === "toolu_1")));
  const gemini = geminiParams(await build(Format.GEMINI));
  assert.ok(gemini.config.systemInstruction.parts[0].text.includes("Be brief."));
  assert.ok(gemini.contents.some((c) => c.parts.some((p) => p.functionCall?.name === "search")));
  assert.throws(() => anthropicParams(chat && { rendered: JSON.stringify(chat.messages) }), /FORMAT_ANTHROPIC_MESSAGES/);

  // A refused native append names the JSON path.
  const refused = await appendNative(client, conversationId, [{ role: "user", content: [{ type: "tool_result", tool_use_id: "nope", content: "x" }] }], "anthropic").catch((e) => e);
  assert.equal(refused.code, Code.InvalidArgument);
  assert.ok(fieldViolations(refused).some((v) => v.field.startsWith("native.json[0]")), JSON.stringify(fieldViolations(refused)));
});

test("searchMessages and recall over Connect JSON", async () => {
  const client = universal.createCtxdClient({ baseUrl, transport: "connect", timeoutMs: 10_000 });
  const conversationId = uniqueId("search");
  const messages = [{ role: Role.USER, content: "The invoice number for the March order is INV-4471." }];
  for (let i = 0; i < 45; i++) {
    messages.push({ role: Role.ASSISTANT, content: `Module ${i} refactored; the tests pass.` });
    messages.push({ role: Role.USER, content: `Now module ${i + 1}, please.` });
  }
  await client.appendMessage({ conversationId, messages });
  const page = await client.searchMessages({ conversationId, query: "which invoice did we get for the march order?", pageSize: 3 });
  assert.equal(page.hits[0].sequence, 1n);
  assert.match(page.hits[0].snippet, /INV-4471/);
  const pack = await client.buildContext({
    conversationId,
    budget: { maxTokens: 400 },
    pendingMessages: [{ role: Role.USER, content: "Which invoice was the March order?" }],
    recall: { maxTokens: 120 },
  });
  assert.equal(pack.stats.messagesRecalled, 1);
  assert.match(pack.messages.at(-1).content, /INV-4471/);
});
