// Runs in Deno (not Node): the universal entry point over Connect (JSON) and gRPC-Web with
// Deno's own fetch. Prints "N passed, 0 failed"; exits 1 on a failure.
//   deno run --allow-net --allow-env=CTXD_URL --allow-read test/deno/smoke.mjs
import { createCtxdClient, Role, Format, Code, fieldViolations, openaiResponsesParams } from "../../dist/index.js";

const baseUrl = Deno.env.get("CTXD_URL");
if (!baseUrl) {
  console.error("CTXD_URL is not set");
  Deno.exit(2);
}
let passed = 0;
let failed = 0;
for (const transport of ["connect", "grpc-web"]) {
  try {
    const client = createCtxdClient({ baseUrl, transport, timeoutMs: 10_000 });
    const conversationId = `ts-client/deno/${transport}/${Date.now()}`;
    const res = await client.appendMessage({ conversationId, messages: [{ role: Role.USER, content: `hello from Deno ${Deno.version.deno}` }] });
    if (res.lastSequence !== 1n) throw new Error(`lastSequence ${res.lastSequence}`);
    const pack = await client.buildContext({ conversationId, budget: { maxTokens: 500 }, format: Format.OPENAI_RESPONSES });
    const { input } = openaiResponsesParams(pack);
    if (!JSON.stringify(input).includes("hello from Deno")) throw new Error(`pack: ${pack.rendered}`);
    const err = await client.appendMessage({ conversationId, messages: [{ role: Role.TOOL, toolCallId: "nope", content: "x" }] }).catch((e) => e);
    if (err?.code !== Code.InvalidArgument || !fieldViolations(err).some((v) => v.field === "messages[0].tool_call_id")) {
      throw new Error(`refusal: ${err}`);
    }
    console.log(`ok deno ${Deno.version.deno} ${transport}: append, buildContext (responses), InvalidArgument with field violation`);
    passed++;
  } catch (e) {
    console.log(`FAIL deno ${transport}: ${e?.stack ?? e}`);
    failed++;
  }
}
console.log(`${passed} passed, ${failed} failed`);
Deno.exit(failed ? 1 : 0);
