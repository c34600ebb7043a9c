// The real `@anthropic-ai/sdk` against areal's gateway: messages (the SDK
// authenticates with x-api-key), streaming, a tool_use / tool_result
// conversation, Anthropic-shaped errors, and the export checked with
// Hugging Face's tokenizer.
//   node anthropic_client.mjs BASE_URL ADMIN_KEY TOKENIZER_DIR
import assert from 'node:assert/strict';
import { adminClient, endSession, assertTrainedSpansEqual } from './common.mjs';
import Anthropic from '@anthropic-ai/sdk';

const [base, adminKey, tokenizerDir] = process.argv.slice(2);

const admin = adminClient(base, adminKey);

const session = await admin('/rl/start_session', { task_id: 'anthropic' });
const client = new Anthropic({ baseURL: base, apiKey: session.api_key, maxRetries: 0 });

// 1. A message.
const msg = await client.messages.create({ model: 'mock', max_tokens: 8, messages: [{ role: 'user', content: 'Hi there' }], top_k: 50 });
assert.equal(msg.type, 'message');
assert.equal(msg.role, 'assistant');
assert.ok(['end_turn', 'max_tokens'].includes(msg.stop_reason), msg.stop_reason);
assert.equal(msg.content[0].type, 'text');
assert.ok(msg.usage.input_tokens > 0 && msg.usage.output_tokens > 0);
console.log('message ok:', JSON.stringify(msg.content[0].text));

// 2. Streaming, with the SDK's event accumulator.
const stream = client.messages.stream({ model: 'mock', max_tokens: 8, messages: [{ role: 'user', content: 'Stream please' }] });
let text = '';
stream.on('text', (t) => { text += t; });
const final = await stream.finalMessage();
assert.equal(final.content.filter((b) => b.type === 'text').map((b) => b.text).join(''), text);
assert.equal(final.usage.output_tokens, 8);
console.log('stream ok');

// 3. Tool use over three turns: the agent echoes content blocks and answers tool_use ids.
const tools = [{ name: 'search', description: 'Search the web.', input_schema: { type: 'object', properties: { q: { type: 'string' } } } }];
const messages = [{ role: 'user', content: 'Find the capital of Peru.' }];
const seen = [];
for (let turn = 0; turn < 3; turn++) {
  const r = await client.messages.create({ model: 'mock', max_tokens: 5, system: 'Use tools when useful.', tools, messages });
  seen.push(r.content.filter((b) => b.type === 'text').map((b) => b.text).join(''));
  messages.push({ role: 'assistant', content: r.content });
  messages.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: `toolu_${turn}`, content: `result ${turn}` }] });
}
console.log('tool conversation ok');

// 4. Errors come back in Anthropic's shape.
await assert.rejects(
  client.messages.create({ model: 'mock', max_tokens: 8, messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'url', url: 'http://x' } }] }] }),
  (e) => e.status === 400 && e.error?.type === 'error' && e.error?.error?.type === 'invalid_request_error');
const stranger = new Anthropic({ baseURL: base, apiKey: 'sk-sess-not-a-session', maxRetries: 0 });
await assert.rejects(stranger.messages.create({ model: 'mock', max_tokens: 4, messages: [{ role: 'user', content: 'x' }] }),
  (e) => e.status === 401 && e.error?.error?.type === 'authentication_error');
console.log('errors ok');

await endSession(base, session.api_key);
const exported = await admin('/export_trajectories', { session_id: session.session_id, style: 'concat' });
const conversation = exported.rows.find((r) => r.turns === 3);
assert.ok(conversation, `the tool conversation is one row (rows: ${exported.rows.map((r) => r.turns)})`);
await assertTrainedSpansEqual(conversation, seen, tokenizerDir);
console.log('anthropic sdk e2e: 5 passed, 0 failed');
