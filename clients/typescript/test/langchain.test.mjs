// The LangChain.js middleware through LangChain's own createAgent with its scripted fakeModel (no
// provider network): a 100-turn tool loop with a restart halfway, every model input a pack within
// the budget, calls never split from their results, the log equal to what the agent produced.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createAgent, tool } from "langchain";
import { fakeModel } from "@langchain/core/testing";
import { AIMessage, HumanMessage, ToolMessage, SystemMessage } from "@langchain/core/messages";
import { MemorySaver } from "@langchain/langgraph";
import { z } from "zod";
import { createCtxdClient } from "@ctxd/client/node";
import { ctxdContextMiddleware, fromCtxd, toCtxd } from "@ctxd/client/langchain";
import { baseUrl, uniqueId } from "./env.mjs";

const client = createCtxdClient({ baseUrl, timeoutMs: 20_000 });
const BUDGET = 3_000;
const TURNS = 100;

const lookup = tool(async ({ turn }) => `ledger row ${turn}: ` + Array.from({ length: 40 }, (_, k) => `crate-${turn}-${k}`).join(" "), {
  name: "lookup",
  description: "Looks up the ledger row of a turn.",
  schema: z.object({ turn: z.number() }),
});

/** A fakeModel scripted for `turns` turns from `first`: a tool call, then the answer. */
function scripted(first, turns) {
  const model = fakeModel();
  for (let n = first; n < first + turns; n++) {
    model.respond(new AIMessage({ content: "", tool_calls: [{ name: "lookup", args: { turn: n }, id: `call_${n}`, type: "tool_call" }],
      usage_metadata: { input_tokens: 50, output_tokens: 5, total_tokens: 55 } }));
    model.respond(new AIMessage({ content: `Turn ${n}: the ledger says ${n * 7} crates.`,
      usage_metadata: { input_tokens: 60, output_tokens: 9, total_tokens: 69 } }));
  }
  return model;
}

/** Rough tokens of messages (4 characters a token), for the printed comparison. */
const approx = (messages) => messages.reduce((n, m) => n + Math.ceil(JSON.stringify(m.content).length / 4) + 4, 0);

async function allMessages(conversationId) {
  const out = [];
  let afterSequence = 0n;
  for (;;) {
    const page = await client.listMessages({ conversationId, afterSequence, pageSize: 1000 });
    out.push(...page.messages);
    if (!page.nextAfterSequence) return out;
    afterSequence = page.nextAfterSequence;
  }
}

test("messages map both ways losslessly", async () => {
  const id = uniqueId("langchain-map");
  const sent = [
    new SystemMessage({ content: "You are terse.", id: "s1" }),
    new HumanMessage({ id: "h1", name: "ann", content: [
      { type: "text", text: "What is in this picture?" },
      { type: "image_url", image_url: { url: "https://example.com/cat.png" } },
    ] }),
    new AIMessage({ id: "a1", content: "Let me look.", tool_calls: [{ name: "lookup", args: { q: "cat" }, id: "call_a1", type: "tool_call" }],
      usage_metadata: { input_tokens: 120, output_tokens: 15, total_tokens: 135, input_token_details: { cache_read: 100 } },
      response_metadata: { model_name: "scripted" } }),
    new ToolMessage({ id: "t1", content: "no such cat", tool_call_id: "call_a1", status: "error", artifact: { rows: [1, 2] } }),
    new AIMessage({ id: "a2", content: "" }),
  ];
  await client.appendMessage({ conversationId: id, messages: sent.map(toCtxd) });
  const stored = await allMessages(id);
  assert.equal(stored[1].attachments[0].source.value, "https://example.com/cat.png");
  assert.equal(stored[2].usage.cachedInputTokens, 100n);
  const back = stored.map(fromCtxd);
  for (const [i, m] of back.entries()) {
    assert.equal(m.type, sent[i].type);
    assert.equal(m.id, sent[i].id);
    assert.deepEqual(m.content, sent[i].content);
  }
  assert.deepEqual(back[2].tool_calls, sent[2].tool_calls);
  assert.deepEqual(back[2].usage_metadata, sent[2].usage_metadata);
  assert.deepEqual(back[2].response_metadata, sent[2].response_metadata);
  assert.equal(back[3].status, "error");
  assert.deepEqual(back[3].artifact, { rows: [1, 2] });
  assert.equal(back[3].tool_call_id, "call_a1");
});

test("a 100-turn tool loop through createAgent gets packs and keeps the log", async () => {
  const thread = uniqueId("langchain-loop");
  const config = { configurable: { thread_id: thread } };
  const packs = [];
  const agentOf = (model) =>
    createAgent({
      model,
      tools: [lookup],
      systemPrompt: "You keep the ledger.",
      checkpointer: new MemorySaver(),
      middleware: [ctxdContextMiddleware(client, { budgetTokens: BUDGET, threadIdPrefix: "lc-js/", onPack: (p) => packs.push(p) })],
    });
  const half = TURNS / 2;
  const first = scripted(0, half);
  let agent = agentOf(first);
  const whole = [];
  let state;
  for (let n = 0; n < half; n++) {
    state = await agent.invoke({ messages: [new HumanMessage(`Turn ${n}: how many crates?`)] }, config);
    whole.push(approx(state.messages));
  }
  const firstRun = state.messages;
  // The agent process restarts: new agent, model and checkpointer; the thread continues in ctxd.
  const second = scripted(half, TURNS - half);
  agent = agentOf(second);
  for (let n = half; n < TURNS; n++) {
    state = await agent.invoke({ messages: [new HumanMessage(`Turn ${n}: how many crates?`)] }, config);
    whole.push(approx(firstRun) + approx(state.messages));
  }
  const inputs = [...first.calls, ...second.calls].map((c) => c.messages);
  assert.equal(inputs.length, 2 * TURNS);
  assert.ok(Math.max(...packs.map((p) => p.stats.totalTokens)) <= BUDGET);
  for (const messages of inputs) {
    let open = new Set();
    for (const m of messages) {
      if (m.type === "tool") {
        assert.ok(open.has(m.tool_call_id), "a result without its call");
        open.delete(m.tool_call_id);
      } else {
        assert.equal(open.size, 0, "a call without its result");
      }
      if (m.type === "ai") open = new Set((m.tool_calls ?? []).map((c) => c.id));
    }
  }
  assert.ok(second.calls[0].messages.some((m) => String(m.content).includes("Turn 49: the ledger says 343 crates.")));
  const logged = (await allMessages(`lc-js/${thread}`)).map(fromCtxd);
  const produced = [...firstRun, ...state.messages];
  assert.equal(logged.length, produced.length);
  for (const [i, m] of logged.entries()) {
    assert.equal(m.type, produced[i].type);
    assert.equal(m.id, produced[i].id);
    assert.deepEqual(m.content, produced[i].content);
    if (m.type === "ai") assert.deepEqual(m.tool_calls, produced[i].tool_calls);
  }
  const sent = inputs.map(approx);
  const mean = (xs) => Math.round(xs.reduce((a, b) => a + b, 0) / xs.length);
  console.log(`${TURNS}-turn tool loop, ${logged.length} messages logged: model input tokens (approximate) with ctxd largest ` +
    `${Math.max(...sent)}, mean ${mean(sent)} (budget ${BUDGET}); the framework's default (whole history) largest ` +
    `${Math.max(...whole)}, mean ${mean(whole)}`);
  assert.ok(Math.max(...sent) < Math.max(...whole) / 3);
});
