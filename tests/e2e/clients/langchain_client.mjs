// The real `@langchain/openai` ChatOpenAI against areal's gateway (Chat
// Completions): bound tools, a tool round-trip with ToolMessage, streaming.
// The mock backend is scripted to call the tool, then answer.
//   node langchain_client.mjs BASE_URL ADMIN_KEY TOKENIZER_DIR
import assert from 'node:assert/strict';
import { adminClient, endSession, assertTrainedSpansEqual } from './common.mjs';
import { ChatOpenAI } from '@langchain/openai';
import { HumanMessage, ToolMessage } from '@langchain/core/messages';
import { tool } from '@langchain/core/tools';
import { z } from 'zod';

const [base, adminKey] = process.argv.slice(2);
const admin = adminClient(base, adminKey);

const session = await admin('/rl/start_session', { task_id: 'langchain' });
const llm = new ChatOpenAI({ model: 'mock', apiKey: session.api_key, configuration: { baseURL: `${base}/v1` }, maxRetries: 0, temperature: 0.7 });
const multiply = tool(async ({ a, b }) => String(a * b), { name: 'multiply', description: 'Multiply two numbers.', schema: z.object({ a: z.number(), b: z.number() }) });
const withTools = llm.bindTools([multiply]);

const messages = [new HumanMessage('What is 6 times 7?')];
const first = await withTools.invoke(messages);
assert.equal(first.tool_calls.length, 1);
assert.equal(first.tool_calls[0].name, 'multiply');
assert.deepEqual(first.tool_calls[0].args, { a: 6, b: 7 });
messages.push(first);
messages.push(new ToolMessage({ content: await multiply.invoke(first.tool_calls[0].args), tool_call_id: first.tool_calls[0].id }));
const second = await withTools.invoke(messages);
assert.equal(second.content, '6 times 7 is 42.');
console.log('tool round-trip ok');

let streamed = '';
for await (const chunk of await llm.stream([new HumanMessage('Stream something.')])) streamed += chunk.content;
assert.equal(streamed, 'Streaming works.');
console.log('stream ok');

await endSession(base, session.api_key);
const exported = await admin('/export_trajectories', { session_id: session.session_id, style: 'concat' });
assert.ok(exported.rows.some((r) => r.turns === 2), `the tool round-trip is one row (turns: ${exported.rows.map((r) => r.turns)})`);
console.log('langchain e2e: 3 passed, 0 failed');
