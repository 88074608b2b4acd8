// Calls ctxd with the official Connect-ES clients (@connectrpc/connect-node, pinned in
// package.json) over HTTP/1.1 both ways: the Connect protocol (unary, JSON) and gRPC-Web
// (binary), and checks that they agree byte for byte on what ctxd renders.
//
// The stubs are generated, not committed. Exactly what CI runs:
//   cd scripts/connect-node && npm ci && npx buf generate && node check.mjs http://127.0.0.1:PORT
// (`npx buf generate` reads buf.gen.yaml here: protoc-gen-es, target=js+dts, input ../../proto,
// output gen/.) Prints one "ok ..." line per check; on the first failure prints "FAIL ..." and
// exits 1 (2 for a usage error).
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";

class CheckFailure extends Error {}
const fail = (message) => {
  throw new CheckFailure(message);
};
const expect = (condition, message) => condition || fail(message);
const ok = (message) => console.log(`ok ${message}`);

const baseUrl = process.argv[2];
if (!baseUrl || !/^https?:\/\/[^/]+\/?$/.test(baseUrl) || process.argv.length > 3) {
  console.error("usage: node check.mjs http://127.0.0.1:PORT");
  process.exit(2);
}

let ContextService, Role, Format;
try {
  ({ ContextService } = await import("./gen/ctxd/v1/context_service_pb.js"));
  ({ Role, Format } = await import("./gen/ctxd/v1/messages_pb.js"));
} catch (e) {
  console.error(`FAIL generated stubs not loadable (${e.message}); run \`npx buf generate\` in scripts/connect-node first`);
  process.exit(1);
}

// google.rpc.BadRequest { repeated FieldViolation field_violations = 1; } with
// FieldViolation { string field = 1; string description = 2; ... }, read off the wire (the
// google.rpc error-detail types ship with neither @bufbuild/protobuf nor @connectrpc/connect).
function decodeBadRequest(bytes) {
  const fields = (buf, each) => {
    const reader = new BinaryReader(buf);
    while (reader.pos < reader.len) {
      const [no, wireType] = reader.tag();
      if (wireType === WireType.LengthDelimited) each(no, reader.bytes());
      else reader.skip(wireType, no);
    }
  };
  const violations = [];
  fields(bytes, (no, violationBytes) => {
    if (no !== 1) return;
    const violation = { field: "", description: "" };
    const utf8 = new TextDecoder("utf-8", { fatal: true });
    fields(violationBytes, (n, v) => {
      if (n === 1) violation.field = utf8.decode(v);
      if (n === 2) violation.description = utf8.decode(v);
    });
    violations.push(violation);
  });
  return violations;
}

// Records the Content-Type each call sent and got back, to show which protocol really ran.
const contentTypes = [];
const recorder = (next) => async (req) => {
  const res = await next(req);
  contentTypes.push({ method: req.method.name, sent: req.header.get("content-type"), got: res.header.get("content-type") });
  return res;
};

const transports = [
  {
    name: "connect-json",
    transport: createConnectTransport({ baseUrl, httpVersion: "1.1", useBinaryFormat: false, defaultTimeoutMs: 10_000, interceptors: [recorder] }),
    sent: /^application\/json$/,
    got: /^application\/json(; ?charset=utf-?8)?$/i,
  },
  {
    name: "grpc-web",
    transport: createGrpcWebTransport({ baseUrl, httpVersion: "1.1", defaultTimeoutMs: 10_000, interceptors: [recorder] }),
    sent: /^application\/grpc-web\+proto$/,
    got: /^application\/grpc-web(\+proto)?$/i,
  },
];

const conversation = [
  { role: "USER", content: "What is the weather in Paris?" },
  { role: "ASSISTANT", toolCalls: [{ id: "call_1", name: "get_weather", arguments: '{"city":"Paris"}' }] },
  { role: "TOOL", toolCallId: "call_1", content: "18C" },
];

async function exercise({ name, transport, sent, got }) {
  const client = createClient(ContextService, transport);
  const conversationId = `connect-node/${name}/${process.pid}-${Date.now()}`;
  const call = async (what, promise) => {
    try {
      return await promise;
    } catch (e) {
      const cause = e?.cause?.message && !String(e.message).includes(e.cause.message) ? ` (cause: ${e.cause.message})` : "";
      fail(`${name}: ${what} failed: ${e?.message ?? e}${cause}`);
    }
  };
  const messages = conversation.map((m) => ({ ...m, role: Role[m.role] }));

  const appended = await call("appendMessage", client.appendMessage({ conversationId, messages }));
  expect(appended.firstSequence === 1n && appended.lastSequence === 3n, `${name}: appendMessage stored sequences ${appended.firstSequence}..${appended.lastSequence}, expected 1..3`);
  const types = contentTypes.at(-1);
  expect(sent.test(types.sent ?? ""), `${name}: request Content-Type ${types.sent}`);
  expect(got.test(types.got ?? ""), `${name}: response Content-Type ${types.got}, expected ${got}`);
  ok(`${name}: appendMessage stored 1..3 (sent ${types.sent}, got ${types.got})`);

  const built = await call("buildContext", client.buildContext({ conversationId, budget: { maxTokens: 1000 }, format: Format.ANTHROPIC_MESSAGES }));
  let pack;
  try {
    pack = JSON.parse(built.rendered);
  } catch (e) {
    fail(`${name}: buildContext rendered is not JSON (${e.message}): ${built.rendered.slice(0, 200)}`);
  }
  expect(Array.isArray(pack.messages) && pack.messages.length === 3, `${name}: buildContext rendered has no 3 messages: ${built.rendered.slice(0, 300)}`);
  const blocks = pack.messages.flatMap((m) => (Array.isArray(m.content) ? m.content : []));
  const use = blocks.find((b) => b.type === "tool_use");
  const result = blocks.find((b) => b.type === "tool_result");
  expect(use?.id === "call_1" && use.name === "get_weather" && use.input?.city === "Paris", `${name}: no tool_use call_1 get_weather {"city":"Paris"} in ${built.rendered}`);
  expect(result?.tool_use_id === "call_1", `${name}: no tool_result for call_1 in ${built.rendered}`);
  expect(built.messages.length === 3 && built.stats?.totalTokens > 0, `${name}: buildContext typed messages ${built.messages.length}, stats ${built.stats?.totalTokens}`);
  ok(`${name}: buildContext rendered Anthropic JSON with ${pack.messages.length} messages, ${built.stats.totalTokens} tokens`);

  const listed = await call("listMessages", client.listMessages({ conversationId, format: Format.ANTHROPIC_MESSAGES }));
  const [user, assistant, tool] = listed.messages;
  expect(listed.messages.length === 3 && user.role === Role.USER && user.content === conversation[0].content, `${name}: listMessages returned ${listed.messages.length} messages`);
  expect(assistant.role === Role.ASSISTANT && assistant.toolCalls[0]?.arguments === '{"city":"Paris"}', `${name}: listMessages assistant message lost its tool call`);
  expect(tool.role === Role.TOOL && tool.toolCallId === "call_1" && tool.sequence === 3n, `${name}: listMessages tool message wrong: role ${tool.role}, toolCallId ${tool.toolCallId}, sequence ${tool.sequence}`);
  expect(user.createdAt?.seconds > 0n && user.tokens?.o200kBase > 0, `${name}: listMessages server-set createdAt/tokens missing`);
  expect(Array.isArray(JSON.parse(listed.rendered).messages), `${name}: listMessages rendered has no messages: ${listed.rendered.slice(0, 200)}`);
  ok(`${name}: listMessages returned 3 messages (roles, tool call, sequence, timestamp) and rendered JSON`);

  const fetched = await call("getConversation", client.getConversation({ conversationId }));
  expect(fetched.conversation?.conversationId === conversationId && fetched.conversation.lastSequence === 3n, `${name}: getConversation: ${fetched.conversation?.conversationId} at ${fetched.conversation?.lastSequence}`);
  ok(`${name}: getConversation names the conversation at sequence 3`);

  const counted = await call("countTokens", client.countTokens({ text: "hello world" }));
  expect(counted.tokens > 0, `${name}: countTokens returned ${counted.tokens}`);
  ok(`${name}: countTokens("hello world") = ${counted.tokens}`);

  let error;
  try {
    await client.appendMessage({ conversationId, messages: [{ role: Role.TOOL, toolCallId: "call_nope", content: "x" }] });
  } catch (e) {
    error = ConnectError.from(e);
  }
  expect(error, `${name}: a tool result answering call_nope was accepted`);
  expect(error.code === Code.InvalidArgument, `${name}: call_nope failed with ${Code[error.code]} (${error.message}), expected InvalidArgument`);
  const detail = error.details.find((d) => d.type === "google.rpc.BadRequest");
  expect(detail, `${name}: no google.rpc.BadRequest detail; details: ${JSON.stringify(error.details.map((d) => d.type ?? d.desc?.typeName))}`);
  const violations = decodeBadRequest(detail.value);
  expect(violations.some((v) => v.field === "messages[0].tool_call_id"), `${name}: BadRequest names ${JSON.stringify(violations)}, not messages[0].tool_call_id`);
  const after = await call("getConversation after the refusal", client.getConversation({ conversationId }));
  expect(after.conversation.lastSequence === 3n, `${name}: the refused append stored something: last sequence ${after.conversation.lastSequence}`);
  ok(`${name}: call_nope refused: InvalidArgument, BadRequest field messages[0].tool_call_id ("${violations[0].description}"), nothing stored`);

  return { build: built.rendered, list: listed.rendered };
}

try {
  const [connect, grpcWeb] = [await exercise(transports[0]), await exercise(transports[1])];
  expect(connect.build === grpcWeb.build, `buildContext rendered differs between Connect JSON and gRPC-Web:\n${connect.build}\n${grpcWeb.build}`);
  expect(connect.list === grpcWeb.list, `listMessages rendered differs between Connect JSON and gRPC-Web:\n${connect.list}\n${grpcWeb.list}`);
  ok(`rendered packs byte-identical across Connect JSON and gRPC-Web (buildContext ${Buffer.byteLength(connect.build)} bytes, listMessages ${Buffer.byteLength(connect.list)} bytes)`);
} catch (e) {
  console.error(`FAIL ${e instanceof CheckFailure ? e.message : e?.stack ?? e}`);
  process.exit(1);
}
