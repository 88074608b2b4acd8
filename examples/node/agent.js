// A minimal agent loop against ctxd from Node (@grpc/grpc-js + @grpc/proto-loader).
//   node examples/node/agent.js [host:port]
// Appends the user's turn, builds the context, lets a (fake) LLM answer with a tool call, runs
// the tool, appends the result, and builds the context again for the final answer.
'use strict';
const path = require('node:path');
const assert = require('node:assert');
const crypto = require('node:crypto');
const grpc = require('@grpc/grpc-js');
const loader = require('@grpc/proto-loader');

const protoDir = path.resolve(__dirname, '../../proto');
const definition = loader.loadSync('ctxd/v1/context_service.proto', {
  includeDirs: [protoDir],
  keepCase: true,
  longs: String,
  enums: String,
  defaults: false,
});
const { ContextService } = grpc.loadPackageDefinition(definition).ctxd.v1;
const addr = process.argv[2] || process.env.CTXD_ADDR || 'localhost:50051';
const client = new ContextService(addr, grpc.credentials.createInsecure());
const call = (method, request) =>
  new Promise((resolve, reject) => client[method](request, (err, res) => (err ? reject(err) : resolve(res))));

function fakeLlm(messages) {
  const last = messages[messages.length - 1];
  if (last.role === 'tool') return { role: 'assistant', content: `It is ${last.content} in Paris.` };
  return { role: 'assistant', tool_calls: [{ id: `call_${crypto.randomBytes(4).toString('hex')}`, name: 'weather', arguments: '{"city":"Paris"}' }] };
}

async function main() {
  const conversation_id = `examples/node/${crypto.randomBytes(4).toString('hex')}`;
  const budget = { max_tokens: 4000, reserve_output_tokens: 500 };
  const system_prompt = 'You are a travel assistant.';
  await call('AppendMessage', { conversation_id, idempotency_key: 'turn-1', messages: [{ role: 'ROLE_USER', content: 'What is the weather in Paris?' }] });
  let pack = await call('BuildContext', { conversation_id, budget, system_prompt });
  const reply = fakeLlm(JSON.parse(pack.rendered));
  const tool = reply.tool_calls[0];
  await call('AppendMessage', {
    conversation_id,
    messages: [
      { role: 'ROLE_ASSISTANT', tool_calls: [tool] },
      { role: 'ROLE_TOOL', tool_call_id: tool.id, content: '18C and sunny' },
    ],
  });
  pack = await call('BuildContext', { conversation_id, budget, system_prompt, format: 'FORMAT_ANTHROPIC_MESSAGES' });
  const anthropic = JSON.parse(pack.rendered);
  // system is one text block, marked as a prompt-cache breakpoint like the last two messages.
  assert.strictEqual(anthropic.system[0].text, system_prompt);
  assert.deepStrictEqual(anthropic.system[0].cache_control, { type: 'ephemeral' });
  assert.deepStrictEqual(anthropic.messages.map((m) => m.role), ['user', 'assistant', 'user']);
  assert.strictEqual(anthropic.messages[2].content[0].type, 'tool_result');
  const final = fakeLlm([{ role: 'tool', content: anthropic.messages[2].content[0].content }]);
  await call('AppendMessage', { conversation_id, messages: [{ role: 'ROLE_ASSISTANT', content: final.content }] });
  // The conversation as a resource: title and status by field mask; then a message removed for good.
  const updated = await call('UpdateConversation', {
    conversation: { conversation_id, title: 'Weather in Paris', status: 'CONVERSATION_STATUS_IDLE' },
    update_mask: { paths: ['title', 'status'] },
  });
  if (updated.conversation.status !== 'CONVERSATION_STATUS_IDLE') throw new Error(`update: ${JSON.stringify(updated)}`);
  const redacted = await call('RedactMessage', { conversation_id, sequence: 1 });
  if (redacted.message.content !== '[redacted]') throw new Error(`redact: ${JSON.stringify(redacted)}`);
  const { conversation } = await call('GetConversation', { conversation_id });
  console.log(`  ${conversation.conversation_id}: '${conversation.title}', ${conversation.last_sequence} messages`);
  console.log(`node agent OK: ${final.content} (${pack.stats.total_tokens} tokens in the last pack)`);
  await call('DeleteConversation', { conversation_id });
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
