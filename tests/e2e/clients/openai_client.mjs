// The real `openai` npm SDK against areal's gateway: chat, streaming, a
// multi-turn tool conversation, then the concat export checked token by
// token with Hugging Face's tokenizer (npm `tokenizers`), independently of
// areal's own decoder.
//   node openai_client.mjs BASE_URL ADMIN_KEY TOKENIZER_DIR
import assert from 'node:assert/strict';
import { adminClient, endSession, assertTrainedSpansEqual } from './common.mjs';
import OpenAI from 'openai';

const [base, adminKey, tokenizerDir] = process.argv.slice(2);

const admin = adminClient(base, adminKey);

const session = await admin('/rl/start_session', { task_id: 'sdk-test' });
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: session.api_key, maxRetries: 0 });

// 1. Plain chat completion.
const plain = await client.chat.completions.create({ model: 'mock', messages: [{ role: 'user', content: 'Hello!' }], max_tokens: 8, seed: 7 });
assert.equal(plain.object, 'chat.completion');
assert.equal(typeof plain.choices[0].message.content, 'string');
assert.equal(plain.usage.completion_tokens, plain.choices[0].finish_reason === 'length' ? 8 : plain.usage.completion_tokens);
console.log('chat ok:', JSON.stringify(plain.choices[0].message.content));

// 2. Streaming gives the same text for the same seed.
const stream = await client.chat.completions.create({
  model: 'mock', messages: [{ role: 'user', content: 'Hello!' }], max_tokens: 8, seed: 7, stream: true, stream_options: { include_usage: true },
});
let streamed = '';
let usage = null;
for await (const chunk of stream) {
  if (chunk.choices.length) streamed += chunk.choices[0].delta.content ?? '';
  if (chunk.usage) usage = chunk.usage;
}
assert.equal(streamed, plain.choices[0].message.content);
assert.equal(usage.completion_tokens, plain.usage.completion_tokens);
console.log('stream ok');

// 3. A three-turn tool conversation, echoing replies as agents do.
const tools = [{ type: 'function', function: { name: 'lookup', description: 'Look a word up.', parameters: { type: 'object', properties: { word: { type: 'string' } } } } }];
const messages = [{ role: 'system', content: 'You may call tools.' }, { role: 'user', content: 'Define "gradient".' }];
const seen = [];
for (let turn = 0; turn < 3; turn++) {
  const r = await client.chat.completions.create({ model: 'mock', messages, tools, max_tokens: 5, seed: 100 + turn });
  const message = r.choices[0].message;
  seen.push(message.content ?? '');
  messages.push(message);
  messages.push({ role: 'tool', tool_call_id: `call_${turn}`, content: `result ${turn}` });
}
await client.post('/rl/set_reward', { body: { reward: 1.0 } });
await client.post('/rl/end_session', { body: {} });
console.log('tool conversation ok');

// 4. Export: the plain call, the streamed call, and the conversation as one row.
const exported = await admin('/export_trajectories', { session_id: session.session_id, style: 'concat' });
assert.equal(exported.rows.length, 3, `rows: ${exported.rows.length}`);
const conversation = exported.rows.find((r) => r.turns === 3);
assert.ok(conversation, 'the tool conversation is one row with 3 turns');
await assertTrainedSpansEqual(conversation, seen, tokenizerDir);
console.log(`export ok: ${exported.rows.length} rows, conversation row of ${conversation.input_ids.length} tokens`);
console.log('openai sdk e2e: 4 passed, 0 failed');
