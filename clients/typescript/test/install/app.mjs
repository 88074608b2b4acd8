// A small app run by ci.sh in a fresh project that installed @ctxd/client (the packed tarball, or
// the folder with install-links), then `ai`, `@openai/agents` and `@ai-sdk/openai-compatible` in a
// second `npm install`: every entry point loads and works against the live ctxd, the Agents SDK
// session runs with the SDK's ScriptedModel, and the AI SDK runs an OpenAI-compatible provider
// (the README's pinned version) against a local fake chat-completions endpoint.
//   node app.mjs http://127.0.0.1:PORT
import http from "node:http";
import { createCtxdClient, Role } from "@ctxd/client/node";
import * as web from "@ctxd/client";
import { CtxdSession } from "@ctxd/client/agents";
import { buildPrompt, loadChat, persistOnFinish } from "@ctxd/client/ai";
import { Agent, run, setTracingDisabled, Usage } from "@openai/agents";
import { ScriptedModel, assistantMessage } from "@openai/agents/testing";
import { generateText } from "ai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { createAgent, tool } from "langchain";
import { fakeModel } from "@langchain/core/testing";
import { AIMessage, HumanMessage } from "@langchain/core/messages";
import { MemorySaver } from "@langchain/langgraph";
import { z } from "zod";
import { ctxdContextMiddleware } from "@ctxd/client/langchain";

const [url] = process.argv.slice(2);
const check = (ok, what) => {
  if (!ok) {
    console.error(`FAIL ${what}`);
    process.exit(1);
  }
};
const id = (what) => `ts-client/install/${what}/${process.pid}-${Date.now()}`;

// gRPC append (the Node entry, @connectrpc/connect-node), Connect read (the universal entry).
const grpc = createCtxdClient({ baseUrl: url });
const plainId = id("plain");
const r = await grpc.appendMessage({ conversationId: plainId, messages: [{ role: Role.USER, content: "hi" }] });
const fetched = await web.createCtxdClient({ baseUrl: url }).getConversation({ conversationId: plainId });
check(r.lastSequence === 1n && fetched.conversation.lastSequence === 1n, "gRPC append, Connect read");

// Agents SDK: two runs on a CtxdSession; the second model call gets the first turn in its pack.
setTracingDisabled(true);
const session = new CtxdSession({ sessionId: id("agents"), client: grpc, budgetTokens: 4000 });
const usage = () => new Usage({ requests: 1, inputTokens: 50, outputTokens: 5 });
const model = new ScriptedModel([
  { output: [assistantMessage("Noted: the code is 4417.")], usage: usage() },
  { output: [assistantMessage("The code is 4417.")], usage: usage() },
]);
const agent = new Agent({ name: "notes", instructions: "Remember codes.", model });
const opts = { session, callModelInputFilter: session.callModelInputFilter };
await run(agent, "The code is 4417.", opts);
const second = await run(agent, "What is the code?", opts);
check(second.finalOutput === "The code is 4417.", "agents run");
check(JSON.stringify(model.calls[1].request.input).includes("Noted: the code is 4417."), "the second model call holds the first turn");
const { conversation } = await grpc.getConversation({ conversationId: session.sessionId });
check(conversation.lastSequence === 4n && conversation.usage?.inputTokens === 100n, "agents items and usage stored");

// AI SDK 7 with @ai-sdk/openai-compatible against a fake OpenAI-compatible endpoint.
const requests = [];
const server = http.createServer((req, res) => {
  let body = "";
  req.on("data", (c) => (body += c));
  req.on("end", () => {
    requests.push(JSON.parse(body));
    const n = requests.length;
    res.setHeader("content-type", "application/json");
    res.end(JSON.stringify({
      id: `chatcmpl-${n}`, object: "chat.completion", created: 0, model: "fake-model",
      choices: [{ index: 0, message: { role: "assistant", content: n === 1 ? "Blue." : "You asked for a colour; I said blue." }, finish_reason: "stop" }],
      usage: { prompt_tokens: 20, completion_tokens: 4, total_tokens: 24 },
    }));
  });
});
await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
const provider = createOpenAICompatible({ name: "local", baseURL: `http://127.0.0.1:${server.address().port}/v1` });
const chatId = id("ai");
for (const text of ["Name a colour.", "What did I ask?"]) {
  const user = { role: "user", content: text };
  const messages = await buildPrompt(grpc, chatId, { system: "Be brief.", pending: [user], budgetTokens: 2000 });
  const result = await generateText({ model: provider.chatModel("fake-model"), messages, allowSystemInMessages: true });
  await persistOnFinish(grpc, chatId, { prompt: [user] })(result);
}
server.close();
check(requests.length === 2 && JSON.stringify(requests[1].messages).includes("Name a colour.") && JSON.stringify(requests[1].messages).includes("Blue."), "the second AI SDK call holds the first turn");
const chat = await loadChat(grpc, chatId);
check(chat.length === 4 && chat[3].parts.some((p) => p.text === "You asked for a colour; I said blue."), "AI SDK chat stored");

// LangChain.js: the README's createAgent with the middleware, one tool-using turn with
// LangChain's fakeModel; the thread's messages are in ctxd.
const lcModel = fakeModel();
lcModel.respond(new AIMessage({ content: "", tool_calls: [{ name: "lookup", args: { turn: 1 }, id: "call_lc_1", type: "tool_call" }] }));
lcModel.respond(new AIMessage("Turn 1: the ledger says 7 crates."));
const lookup = tool(async ({ turn }) => `ledger row ${turn}`, { name: "lookup", description: "Looks up a ledger row.", schema: z.object({ turn: z.number() }) });
const lcAgent = createAgent({ model: lcModel, tools: [lookup], checkpointer: new MemorySaver(), middleware: [ctxdContextMiddleware(grpc, { budgetTokens: 32_000 })] });
const threadId = id("langchain");
const lcState = await lcAgent.invoke({ messages: [new HumanMessage("How many crates?")] }, { configurable: { thread_id: threadId } });
check(lcState.messages.at(-1).content === "Turn 1: the ledger says 7 crates.", "LangChain.js answer");
const lcLog = await grpc.listMessages({ conversationId: threadId });
check(lcLog.messages.length === 4, `LangChain.js log of ${lcLog.messages.length} messages`);

console.log("ok installed package: gRPC append, Connect read, CtxdSession with @openai/agents, buildPrompt + persistOnFinish with ai and @ai-sdk/openai-compatible, ctxdContextMiddleware with langchain");
