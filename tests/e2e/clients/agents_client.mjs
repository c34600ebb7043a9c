// The real `@openai/agents` SDK: an agent with a function tool runs against
// areal's gateway (Responses API). The mock backend is scripted to call the
// tool twice and then answer, so the agent loop really executes tools over
// three model turns; the export must hold them as one conversation row.
//   node agents_client.mjs BASE_URL ADMIN_KEY TOKENIZER_DIR
import assert from 'node:assert/strict';
import { adminClient, endSession, assertTrainedSpansEqual } from './common.mjs';
import OpenAI from 'openai';
import { Agent, run, tool, setDefaultOpenAIClient, setTracingDisabled } from '@openai/agents';
import { z } from 'zod';

const [base, adminKey] = process.argv.slice(2);
const admin = adminClient(base, adminKey);

setTracingDisabled(true);  // nothing may leave the machine
const session = await admin('/rl/start_session', { task_id: 'agent' });
setDefaultOpenAIClient(new OpenAI({ baseURL: `${base}/v1`, apiKey: session.api_key, maxRetries: 0 }));

const calls = [];
const getWeather = tool({
  name: 'get_weather',
  description: 'Current weather of a city.',
  parameters: z.object({ city: z.string() }),
  execute: async ({ city }) => {
    calls.push(city);
    return city === 'Paris' ? 'sunny' : 'rainy';
  },
});
const agent = new Agent({ name: 'Weather', instructions: 'Answer with the tool.', tools: [getWeather], model: 'mock' });
const result = await run(agent, 'How is the weather in Paris and Tokyo?');
assert.deepEqual(calls, ['Paris', 'Tokyo'], 'the agent executed both tool calls the model made');
assert.equal(result.finalOutput, 'Paris is sunny and Tokyo is rainy.');
console.log('agent ok:', result.finalOutput);

await endSession(base, session.api_key);
const exported = await admin('/export_trajectories', { session_id: session.session_id, style: 'concat' });
assert.equal(exported.rows.length, 1, `rows: ${exported.rows.map((r) => r.turns)}`);
assert.equal(exported.rows[0].turns, 3);
console.log('openai agents e2e: 2 passed, 0 failed');
