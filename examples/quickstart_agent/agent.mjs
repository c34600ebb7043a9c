// The quickstart's agent: an ordinary OpenAI-SDK program. It knows nothing
// about RL except four HTTP calls to areal's gateway: start a session (admin
// key), chat with the session's key as the API key, report a reward, end the
// session. areal records every token of every call and trains on it.
//
// Task: "Which digit comes after D?" for D in 0..8; the answer is D+1.
// Reward (reward() below): 1 for exactly the right digit, 0.5 for the right
// digit followed by anything, else 0. A random model scores ~0.005; a
// trained one approaches 1.
//
// Run by areal-host in online mode (rollout.openai.online_agent_command),
// which sets AREAL_GATEWAY_URL and AREAL_ADMIN_KEY; or, with --episode, once
// per episode by the subproc workflow (configs/subproc_agent.yaml). Flags:
//   --concurrency N   groups in flight (default 8)
//   --group-size G    sessions per question, one GRPO group (default 8)
//   --seed S          question order (default 1)
import OpenAI from 'openai';

const arg = (name, dflt) => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? Number(process.argv[i + 1]) : dflt;
};
const CONCURRENCY = arg('--concurrency', 8);
const GROUP_SIZE = arg('--group-size', 8);
let seed = arg('--seed', 1) >>> 0;
const GATEWAY = process.env.AREAL_GATEWAY_URL;
const ADMIN_KEY = process.env.AREAL_ADMIN_KEY;
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
  const r = await fetch(GATEWAY + path, {
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
  const client = new OpenAI({ baseURL: `${GATEWAY}/v1`, apiKey: session.api_key, maxRetries: 2 });
  try {
    const completion = await client.chat.completions.create({
      model: 'default',
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

async function worker(id) {
  for (let round = 0; !stopping; ++round) {
    const d = Math.floor(nextRandom() * 9);
    const question = `Which digit comes after ${d}?`;
    const groupId = `w${id}-r${round}-d${d}`;
    const results = await Promise.allSettled(
      Array.from({ length: GROUP_SIZE }, (_, k) => episode(question, d + 1, `${groupId}-s${k}`, groupId)));
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

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split('/').pop())) {
  if (process.argv.includes('--episode')) {
    await subprocEpisode();
  } else {
    console.log(`agent: ${CONCURRENCY} workers x groups of ${GROUP_SIZE} against ${GATEWAY}`);
    await Promise.all(Array.from({ length: CONCURRENCY }, (_, i) => worker(i)));
    console.log('agent: stopped');
  }
}
