// Structured output and logit_bias through the real SDKs against a real
// (random-weight) model: OpenAI chat `response_format`, streamed and not,
// Responses `text.format`, Anthropic `output_config.format`. A random model
// only writes valid JSON when decoding is constrained, so every reply
// parsing and matching the schema is the proof. The schema is checked here
// by hand, not by areal's matcher.
//   node structured_output_client.mjs BASE_URL ADMIN_KEY TOKENIZER_DIR
import assert from 'node:assert/strict';
import { adminClient } from './common.mjs';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';

const [base, adminKey] = process.argv.slice(2);
const admin = adminClient(base, adminKey);
const session = await admin('/rl/start_session', { task_id: 'structured-output' });
const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: session.api_key, maxRetries: 0 });

const schema = {
  type: 'object',
  properties: {
    city: { type: 'string', maxLength: 8 },
    rank: { type: 'integer' },
    tags: { type: 'array', items: { enum: ['warm', 'cold'] }, maxItems: 2 },
  },
  required: ['city', 'rank', 'tags'],
  additionalProperties: false,
};

function checkReply(text, where) {
  let v;
  try {
    v = JSON.parse(text);
  } catch (e) {
    assert.fail(`${where}: not JSON: ${JSON.stringify(text)}`);
  }
  assert.deepEqual(Object.keys(v).sort(), ['city', 'rank', 'tags'], where);
  assert.equal(typeof v.city, 'string', where);
  assert.ok([...v.city].length <= 8, where);
  assert.ok(Number.isInteger(v.rank), where);
  assert.ok(Array.isArray(v.tags) && v.tags.length <= 2 && v.tags.every((t) => t === 'warm' || t === 'cold'), where);
  return v;
}

const messages = [{ role: 'user', content: 'Describe a city as JSON.' }];
let passed = 0;

// 1. Chat completions, json_schema, several seeds; finish_reason stop (the JSON closed, then the turn ended).
for (const seed of [1, 2, 3]) {
  const r = await openai.chat.completions.create({
    model: 'm', messages, max_tokens: 400, seed,
    response_format: { type: 'json_schema', json_schema: { name: 'city', schema, strict: true } },
  });
  checkReply(r.choices[0].message.content, `chat seed ${seed}`);
  assert.equal(r.choices[0].finish_reason, 'stop');
}
passed++;
console.log('chat json_schema ok');

// 2. Streaming gives the same JSON for the same seed.
const once = await openai.chat.completions.create({
  model: 'm', messages, max_tokens: 400, seed: 9, response_format: { type: 'json_schema', json_schema: { name: 'city', schema } },
});
const stream = await openai.chat.completions.create({
  model: 'm', messages, max_tokens: 400, seed: 9, stream: true, response_format: { type: 'json_schema', json_schema: { name: 'city', schema } },
});
let streamed = '';
for await (const chunk of stream) if (chunk.choices.length) streamed += chunk.choices[0].delta.content ?? '';
assert.equal(streamed, once.choices[0].message.content);
checkReply(streamed, 'chat stream');
passed++;
console.log('chat stream ok');

// 3. Responses API text.format.
const resp = await openai.responses.create({
  model: 'm', input: 'Describe a city as JSON.', max_output_tokens: 400,
  text: { format: { type: 'json_schema', name: 'city', schema, strict: true } },
});
checkReply(resp.output_text, 'responses');
passed++;
console.log('responses text.format ok');

// 4. Anthropic Messages output_config.format.
const anthropic = new Anthropic({ baseURL: base, apiKey: session.api_key, maxRetries: 0 });
const msg = await anthropic.messages.create({
  model: 'm', max_tokens: 400, messages, output_config: { format: { type: 'json_schema', schema } },
});
checkReply(msg.content.find((b) => b.type === 'text').text, 'anthropic');
passed++;
console.log('anthropic output_config.format ok');

// 5. logit_bias +100 on one token: the model samples nothing else, and the
// session's export shows those ids with log-probs near 0.
const biased = await openai.chat.completions.create({ model: 'm', messages, max_tokens: 6, seed: 4, logit_bias: { 15: 100 } });
assert.equal(biased.choices[0].message.content, '000000');
await openai.post('/rl/set_reward', { body: { reward: 1 } });
await openai.post('/rl/end_session', { body: {} });
const exported = await admin('/export_trajectories', { session_id: session.session_id, style: 'individual' });
const sampled = (r) => r.input_ids.map((id, i) => ({ id, lp: r.logprobs[i] })).filter((_, i) => r.loss_mask[i] === 1);
const row = exported.rows.find((r) => { const s = sampled(r); return s.length === 6 && s.every((t) => t.id === 15); });
assert.ok(row, 'the biased call is exported with its token ids');
assert.ok(sampled(row).every((t) => t.lp > -1e-3), `log-probs under the biased distribution: ${JSON.stringify(sampled(row))}`);
passed++;
console.log('logit_bias ok');

console.log(`structured output e2e: ${passed} passed, 0 failed`);
