// The quickstart's agent: an ordinary OpenAI-SDK program. It knows nothing
// about RL except four HTTP calls to areal's gateway: start a session (admin
// key), chat with the session's key as the API key, report a reward, end the
// session. areal records every token of every call and trains on it.
//
// Task: "Which digit comes after D?" for D in 0..8; the answer is D+1
// (--task before: "Which digit comes before D?" for D in 1..9, answer D-1).
// Reward (reward() below): 1 for exactly the right digit, 0.5 for the right
// digit followed by anything, else 0. A random model scores ~0.005; a
// trained one approaches 1.
//
// Run by areal-host in online mode (rollout.openai.online_agent_command),
// which sets AREAL_GATEWAY_URL and AREAL_ADMIN_KEY; with --eval by the
// `evaluation` section (AREAL_EVAL_* variables; the admin key, so nothing is
// trained); or, with --episode, once per episode by the subproc workflow
// (configs/subproc_agent.yaml). Flags:
//   --concurrency N   groups in flight (default 8)
//   --group-size G    sessions per question, one GRPO group (default 8)
//   --seed S          question order (default 1)
//   --task T          after (default) or before
//   --phrasings K     train on the first K (1 to 4, default 1) of the
//                     training phrasings below, one drawn per group; none of
//                     them is an evaluation phrasing (configs/data/quickstart_eval.jsonl)
//   --model M         the `model` of every chat call (default "default"; the
//                     managed service serves a trained job as "experiment/trial")
// Against the managed service (docs/service.md), AREAL_GATEWAY_URL is the
// job's base URL and AREAL_ADMIN_KEY (or AREAL_API_KEY) the user's key.
import OpenAI from 'openai';
import { keepAliveFetch } from './keep_alive_fetch.mjs';

const arg = (name, dflt) => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? Number(process.argv[i + 1]) : dflt;
};
const CONCURRENCY = arg('--concurrency', 8);
const GROUP_SIZE = arg('--group-size', 8);
let seed = arg('--seed', 1) >>> 0;
const GATEWAY = process.env.AREAL_GATEWAY_URL;
const ADMIN_KEY = process.env.AREAL_ADMIN_KEY ?? process.env.AREAL_API_KEY;
const strArg = (name, dflt) => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : dflt;
};
const TASK = strArg('--task', 'after');
const MODEL = strArg('--model', 'default');
if (TASK !== 'after' && TASK !== 'before') {
  console.error(`agent: --task must be after or before, got ${TASK}`);
  process.exit(2);
}
// The task's questions and answer for digit d (after: d in 0..8; before: d in 1..9).
// The first phrasing is the one the format stage (configs/data/quickstart_format.jsonl)
// and the default run use; the others are for --phrasings.
const PHRASINGS = [
  (d) => `Which digit comes ${TASK} ${d}?`,
  (d) => `Which digit is ${TASK} ${d}?`,
  (d) => `Give the digit ${TASK} ${d}.`,
  (d) => `Say which digit comes ${TASK} ${d}.`,
];
const N_PHRASINGS = arg('--phrasings', 1);
if (!Number.isInteger(N_PHRASINGS) || N_PHRASINGS < 1 || N_PHRASINGS > PHRASINGS.length) {
  console.error(`agent: --phrasings must be 1 to ${PHRASINGS.length}, got ${process.argv[process.argv.indexOf('--phrasings') + 1]}`);
  process.exit(2);
}
const question = PHRASINGS[0];
const answerOf = (d) => (TASK === 'after' ? d + 1 : d - 1);
const DIGITS = TASK === 'after' ? [0, 1, 2, 3, 4, 5, 6, 7, 8] : [1, 2, 3, 4, 5, 6, 7, 8, 9];
if (!process.argv.includes('--episode') && (!GATEWAY || !ADMIN_KEY)) {
  console.error('agent: AREAL_GATEWAY_URL and AREAL_ADMIN_KEY must be set (areal-host sets them in online mode)');
  process.exit(2);
}

let stopping = false;
process.on('SIGTERM', () => { stopping = true; });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function nextRandom() {  // mulberry32, so runs are repeatable
  seed = (seed + 0x6d2b79f5) >>> 0;
  let t = Math.imul(seed ^ (seed >>> 15), seed | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}

export function reward(reply, answer) {
  const text = reply.trim();
  if (text === String(answer)) return 1.0;       // exactly the answer
  if (text.startsWith(String(answer))) return 0.5; // the answer, then noise
  return 0.0;
}

async function post(path, key, body) {
  const r = await keepAliveFetch(GATEWAY + path, {
    method: 'POST',
    headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: r.status, body: await r.json().catch(() => ({})) };
}

// A session starts only when the trainer has granted capacity (429 until then).
async function startSession(taskId, groupId) {
  for (let wait = 20; !stopping; wait = Math.min(wait * 2, 500)) {
    const r = await post('/rl/start_session', ADMIN_KEY, { task_id: taskId, group_id: groupId });
    if (r.status === 200) return r.body;
    if (r.status !== 429) throw new Error(`start_session: ${r.status} ${JSON.stringify(r.body)}`);
    await sleep(wait);
  }
  return null;
}

async function episode(question, answer, taskId, groupId) {
  const session = await startSession(taskId, groupId);
  if (!session) return;
  const client = new OpenAI({ baseURL: `${GATEWAY}/v1`, apiKey: session.api_key, maxRetries: 2, fetch: keepAliveFetch });
  try {
    const completion = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: question }],
      max_tokens: 4,
      temperature: 1.0,
    });
    const r = reward(completion.choices[0].message.content ?? '', answer);
    await post('/rl/set_reward', session.api_key, { reward: r });
  } finally {
    await post('/rl/end_session', session.api_key, {});
  }
}

// Questions come from a shuffled deck of all nine, so every digit is asked
// equally often: a training batch then pushes every answer up about as much,
// and only what depends on the question is left to learn.
let deck = [];
function nextDigit() {
  if (deck.length === 0) {
    deck = [...DIGITS];
    for (let i = deck.length - 1; i > 0; --i) {
      const j = Math.floor(nextRandom() * (i + 1));
      [deck[i], deck[j]] = [deck[j], deck[i]];
    }
  }
  return deck.pop();
}

async function worker(id) {
  for (let round = 0; !stopping; ++round) {
    const d = nextDigit();
    // One phrasing per group: GRPO compares the answers to one prompt. With one
    // phrasing nothing is drawn, so the default run's question order is as before.
    const phrasing = N_PHRASINGS > 1 ? PHRASINGS[Math.floor(nextRandom() * N_PHRASINGS)] : question;
    const groupId = `w${id}-r${round}-d${d}`;
    const results = await Promise.allSettled(
      Array.from({ length: GROUP_SIZE }, (_, k) => episode(phrasing(d), answerOf(d), `${groupId}-s${k}`, groupId)));
    for (const r of results) if (r.status === 'rejected' && !stopping) console.error(`agent: episode failed: ${r.reason}`);
    if (results.every((r) => r.status === 'rejected')) await sleep(200);  // e.g. the gateway is going away
  }
}

// One episode in subproc mode: areal gives this process its own session
// (OPENAI_BASE_URL, OPENAI_API_KEY) and the dataset item (AREAL_EPISODE_DATA);
// the agent answers once and prints its reward as the last stdout line.
async function subprocEpisode() {
  const item = JSON.parse(process.env.AREAL_EPISODE_DATA ?? '{}');
  const d = Number(item.digit ?? 0);
  const client = new OpenAI({ maxRetries: 2 });  // base URL and key from the environment
  const completion = await client.chat.completions.create({
    model: 'default',
    messages: [{ role: 'user', content: `Which digit comes after ${d}?` }],
    max_tokens: 4,
    temperature: 1.0,
  });
  console.log(JSON.stringify({ reward: reward(completion.choices[0].message.content ?? '', d + 1) }));
}

// Eval mode: every item of AREAL_EVAL_DATASET ({"question", "answer"} per
// line; default: the nine training questions), AREAL_EVAL_N_SAMPLES answers
// each, greedy when AREAL_EVAL_GREEDY=1, through the gateway with the admin
// key (the model answers, nothing is recorded). Prints per-item lines, then
// the result line areal-host reads: {"reward_mean", "exact_fraction", ...}.
async function evaluate() {
  const path = process.env.AREAL_EVAL_DATASET;
  const items = path
    ? (await import('node:fs')).readFileSync(path, 'utf8').split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l))
    : DIGITS.map((d) => ({ question: question(d), answer: answerOf(d) }));
  const greedy = process.env.AREAL_EVAL_GREEDY !== '0';
  const temperature = greedy ? 0 : Number(process.env.AREAL_EVAL_TEMPERATURE ?? 1);
  const n = Math.max(1, Number(process.env.AREAL_EVAL_N_SAMPLES ?? 1));
  const client = new OpenAI({ baseURL: `${GATEWAY}/v1`, apiKey: ADMIN_KEY, maxRetries: 2, fetch: keepAliveFetch });
  const jobs = items.flatMap((item) => Array.from({ length: n }, () => item));
  const rewards = new Array(jobs.length);
  let next = 0;
  async function runner() {
    for (let i = next++; i < jobs.length; i = next++) {
      const { question, answer } = jobs[i];
      const completion = await client.chat.completions.create({
        model: MODEL, messages: [{ role: 'user', content: question }], max_tokens: 4, temperature,
      });
      const reply = completion.choices[0].message.content ?? '';
      rewards[i] = reward(reply, answer);
      console.log(`item ${JSON.stringify({ question, answer, reply, reward: rewards[i] })}`);
    }
  }
  await Promise.all(Array.from({ length: 8 }, runner));
  const mean = rewards.reduce((a, b) => a + b, 0) / rewards.length;
  console.log(JSON.stringify({
    reward_mean: mean, exact_fraction: rewards.filter((r) => r === 1).length / rewards.length,
    items: items.length, answers: rewards.length, greedy: greedy ? 1 : 0,
  }));
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split('/').pop())) {
  if (process.argv.includes('--eval')) {
    await evaluate();
  } else if (process.argv.includes('--episode')) {
    await subprocEpisode();
  } else {
    console.log(`agent: ${CONCURRENCY} workers x groups of ${GROUP_SIZE} against ${GATEWAY}`);
    await Promise.all(Array.from({ length: CONCURRENCY }, (_, i) => worker(i)));
    console.log('agent: stopped');
  }
}
