// areal agent_pool worker for Node.js agents.
//
//   node node_worker.mjs path/to/agent.mjs[:exportName]
//
// Imports the module once (export `run`, or the named export; a class is
// instantiated once and its `run` used), answers {"op": "ready"} on fd 4,
// then runs one episode per JSON line read on fd 3:
// `await run(data, {base_url, api_key, anthropic_base_url, episode_id})`,
// with OPENAI_/ANTHROPIC_ base URL and key also in process.env. The result
// is a number (the reward), an object {completionId: reward}, or undefined.
// See docs/agent-workflows.md, "Worker protocol".
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import readline from 'node:readline';
import { pathToFileURL } from 'node:url';

// The host's pipes arrive on fds 3 and 4 without close-on-exec, so every
// process the agent starts would inherit them, and one that outlives this
// worker would hold the reply pipe open (the host would see no exit until its
// timeout). Reopened here (Node opens close-on-exec) and the originals closed.
function reopen(fd, flags) {
  const again = fs.openSync(`/proc/self/fd/${fd}`, flags);
  fs.closeSync(fd);
  return again;
}
const requestsFd = reopen(3, 'r');
const repliesFd = reopen(4, 'a');
// Pipes as libuv pipe handles, not fs streams: an fs read of a pipe blocks a
// thread of libuv's pool, and process.exit (an agent's, or ours) then waits for it.
const replies = new net.Socket({ fd: repliesFd, readable: false, writable: true });
const send = (m) => new Promise((resolve) => replies.write(JSON.stringify(m) + '\n', resolve));

function split(spec) {
  const colon = spec.lastIndexOf(':');
  if (colon > 0 && !/[\\/.]/.test(spec.slice(colon + 1))) return [spec.slice(0, colon), spec.slice(colon + 1)];
  return [spec, 'run'];
}

async function load(spec) {
  const [file, name] = split(spec);
  const mod = await import(pathToFileURL(path.resolve(file)).href);
  let target = mod[name] ?? (name === 'run' ? mod.default : undefined);
  if (typeof target !== 'function') throw new TypeError(`${file} has no function export '${name}'`);
  if (/^class\s/.test(Function.prototype.toString.call(target))) {
    const instance = new target();
    target = instance.run.bind(instance);
  }
  return target;
}

function checkReward(value, what) {
  if (typeof value !== 'number' || !Number.isFinite(value)) throw new TypeError(`${what} must be a finite number, got ${JSON.stringify(value)}`);
  return value;
}

async function setRewards(baseUrl, apiKey, rewards) {
  for (const [completionId, reward] of Object.entries(rewards)) {
    const r = await fetch(baseUrl.replace(/\/$/, '') + '/rl/set_reward', {
      method: 'POST',
      headers: { Authorization: `Bearer ${apiKey}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ interaction_id: completionId, reward }),
    });
    if (!r.ok) throw new Error(`reward for '${completionId}': the gateway answered ${r.status}: ${await r.text()}`);
  }
}

async function runEpisode(run, req) {
  Object.assign(process.env, {
    OPENAI_BASE_URL: req.base_url, OPENAI_API_KEY: req.api_key,
    ANTHROPIC_BASE_URL: req.anthropic_base_url ?? req.base_url, ANTHROPIC_API_KEY: req.api_key, AREAL_EPISODE_ID: req.episode_id ?? '',
  });
  const result = await run(req.data, { base_url: req.base_url, api_key: req.api_key, anthropic_base_url: req.anthropic_base_url, episode_id: req.episode_id });
  if (result === undefined || result === null) return { op: 'result', reward: null };
  if (typeof result === 'object' && !Array.isArray(result)) {
    const rewards = Object.fromEntries(Object.entries(result).map(([k, v]) => [k, checkReward(v, `the reward of completion '${k}'`)]));
    await setRewards(req.base_url, req.api_key, rewards);
    return { op: 'result', reward: null, rewards };
  }
  return { op: 'result', reward: checkReward(result, `run() returned ${typeof result}; the reward`) };
}

let run;
try {
  if (process.argv.length !== 3) throw new Error('usage: node node_worker.mjs agent.mjs[:exportName]');
  run = await load(process.argv[2]);
} catch (e) {
  await send({ op: 'fatal', message: `${e.name}: ${e.message}`, traceback: e.stack ?? '' });
  process.exit(1);
}
await send({ op: 'ready', pid: process.pid, node: process.version });
const requests = readline.createInterface({ input: new net.Socket({ fd: requestsFd, readable: true, writable: false }), crlfDelay: Infinity });
for await (const line of requests) {
  if (!line.trim()) continue;
  const req = JSON.parse(line);
  let reply;
  try {
    reply = await runEpisode(run, req);
  } catch (e) {
    reply = { op: 'error', message: `${e?.name ?? 'Error'}: ${e?.message ?? String(e)}`, traceback: e?.stack ?? '' };
  }
  await send(reply);
}
process.exit(0);
