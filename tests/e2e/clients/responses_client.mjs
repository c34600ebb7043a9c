// The real `openai` SDK's Responses API against areal's gateway: create,
// streaming through the SDK's event accumulator, and a multi-turn
// conversation that echoes output items back as input; the export is one
// row per call (hf) with the echoed turns linked.
//   node responses_client.mjs BASE_URL ADMIN_KEY TOKENIZER_DIR
import assert from 'node:assert/strict';
import { adminClient, endSession, assertTrainedSpansEqual } from './common.mjs';
import OpenAI from 'openai';

const [base, adminKey] = process.argv.slice(2);
const admin = adminClient(base, adminKey);

const session = await admin('/rl/start_session', { task_id: 'responses' });
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: session.api_key, maxRetries: 0 });

const first = await client.responses.create({ model: 'mock', input: 'Hello there', max_output_tokens: 6, instructions: 'Be brief.' });
assert.equal(first.object, 'response');
assert.ok(['completed', 'incomplete'].includes(first.status));
assert.equal(first.output[0].type, 'message');
assert.equal(typeof first.output_text, 'string');  // the SDK's convenience accessor
assert.equal(first.usage.output_tokens, 6);
console.log('create ok:', JSON.stringify(first.output_text));

const stream = await client.responses.create({ model: 'mock', input: 'Stream it', max_output_tokens: 6, stream: true });
let deltas = '';
let completed = null;
for await (const event of stream) {
  if (event.type === 'response.output_text.delta') deltas += event.delta;
  if (event.type === 'response.completed' || event.type === 'response.incomplete') completed = event.response;
}
assert.ok(completed, 'a final response event arrives');
assert.equal(completed.output.find((i) => i.type === 'message').content[0].text, deltas);
console.log('stream ok');

// Multi-turn: echo the previous output items, then add a user turn.
let input = [{ role: 'user', content: 'Start.' }];
for (let turn = 0; turn < 3; turn++) {
  const r = await client.responses.create({ model: 'mock', input, max_output_tokens: 4 });
  input = [...input, ...r.output, { role: 'user', content: `Continue ${turn}.` }];
}
// A stored response continues by id (its conversation is the prefix); an unknown id is OpenAI's 404.
const continued = await client.responses.create({ model: 'mock', input: 'x', previous_response_id: first.id, max_output_tokens: 4 });
assert.equal(continued.previous_response_id, first.id);
await assert.rejects(client.responses.create({ model: 'mock', input: 'x', previous_response_id: 'resp_unknown' }), (e) => e.status === 404);
await client.post('/rl/end_session', { body: {} });
const exported = await admin('/export_trajectories', { session_id: session.session_id, style: 'concat' });
// create + stream + 3 turns + the continued one: the three echoed turns may
// only link when the prompt mode is concat; every call must be in the export.
const turns = exported.rows.reduce((n, r) => n + r.turns, 0);
assert.equal(turns, 6, `turns over rows: ${exported.rows.map((r) => r.turns)}`);
assert.ok(exported.rows.some((r) => r.turns === 3), 'the echoed conversation is one row');
console.log('responses api e2e: 4 passed, 0 failed');
