"""AReaL's proxy server vs areal's gateway on the same vLLM server, same
workload, one run (bench/real_peers/run.sh starts the servers).

Each target runs SESSIONS sessions, CONCURRENCY at a time; a session is
start (admin key), TURNS chat turns with the openai SDK (session key,
max_tokens 16, temperature 1), a reward on the last call, end, and export
(admin key; both answer AReaL's `interactions` form, parsed by AReaL's own
deserialize_interactions). Measured:
  - latency of each chat call at the client, and the same calls sent to
    vLLM's own /v1/chat/completions directly: the difference is what the
    proxy adds;
  - throughput: chat calls per second over the whole run;
  - exactness of what was captured: every sampled token's recorded log-prob
    against areal's recomputation on the recorded ids (within 1e-5), and
    how many follow-up turns' prompts begin with the previous turn's prompt
    and sampled ids exactly (no re-tokenization drift).

    proxy_vs_gateway.py VLLM_URL MODEL_DIR SCORE_BIN WORK SESSIONS CONCURRENCY NAME=URL=ADMIN_KEY...
"""
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time

import aiohttp
import openai
from areal.experimental.openai.proxy.server import deserialize_interactions

vllm_url, model_dir, score_bin, work = sys.argv[1:5]
sessions, concurrency = int(sys.argv[5]), int(sys.argv[6])
targets = [t.split("=", 2) for t in sys.argv[7:]]
TURNS, MAX_TOKENS = 3, 16


def question(s):
    return f"Session {s}: name three prime numbers and explain."


async def admin_post(http, url, key, path, body):
    async with http.post(url + path, json=body, headers={"Authorization": f"Bearer {key}"}) as r:
        r.raise_for_status()
        return await r.json()


async def run_target(url, key):
    latencies, rows = [], []
    control = {"start": [], "reward+end": [], "export": []}  # session calls around the chats
    sem = asyncio.Semaphore(concurrency)
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600)) as http:

        async def session(s):
            async with sem:
                t0 = time.perf_counter()
                started = await admin_post(http, url, key, "/rl/start_session", {"task_id": f"bench-{s}"})
                control["start"].append(time.perf_counter() - t0)
                oa = openai.AsyncOpenAI(base_url=url + "/v1", api_key=started["api_key"], max_retries=0)
                messages = [{"role": "user", "content": question(s)}]
                ids = []
                for turn in range(TURNS):
                    t0 = time.perf_counter()
                    r = await oa.chat.completions.create(model="served", messages=messages, max_tokens=MAX_TOKENS,
                                                         temperature=1.0, seed=s * 10 + turn)
                    latencies.append(time.perf_counter() - t0)
                    ids.append(r.id)
                    messages += [{"role": "assistant", "content": r.choices[0].message.content or ""},
                                 {"role": "user", "content": "And then?"}]
                t0 = time.perf_counter()
                async with http.post(url + "/rl/set_reward", json={"interaction_id": None, "reward": 1.0},
                                     headers={"Authorization": f"Bearer {started['api_key']}"}) as r:
                    r.raise_for_status()
                async with http.post(url + "/rl/end_session", json={}, headers={"Authorization": f"Bearer {started['api_key']}"}) as r:
                    r.raise_for_status()
                control["reward+end"].append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                exported = await admin_post(http, url, key, "/export_trajectories",
                                            {"session_id": started["session_id"], "discount": 1.0, "style": "individual"})
                control["export"].append(time.perf_counter() - t0)
                inter = deserialize_interactions(exported["interactions"])
                for i in ids:  # in turn order
                    t = inter[i].to_tensor_dict()
                    rows.append({"session": s, "input_ids": t["input_ids"][0].tolist(), "loss_mask": t["loss_mask"][0].tolist(),
                                 "logprobs": t["logprobs"][0].tolist()})

        t0 = time.perf_counter()
        await asyncio.gather(*(session(s) for s in range(sessions)))
        wall = time.perf_counter() - t0
    return latencies, rows, wall, {k: 1000 * statistics.mean(v) for k, v in control.items()}


async def direct_vllm():
    """The same chat calls straight to vLLM (no session, no recording)."""
    latencies = []
    sem = asyncio.Semaphore(concurrency)
    oa = openai.AsyncOpenAI(base_url=vllm_url + "/v1", api_key="none", max_retries=0)

    async def session(s):
        async with sem:
            messages = [{"role": "user", "content": question(s)}]
            for turn in range(TURNS):
                t0 = time.perf_counter()
                r = await oa.chat.completions.create(model=model_dir, messages=messages, max_tokens=MAX_TOKENS, temperature=1.0,
                                                     seed=s * 10 + turn)
                latencies.append(time.perf_counter() - t0)
                messages += [{"role": "assistant", "content": r.choices[0].message.content or ""},
                             {"role": "user", "content": "And then?"}]

    t0 = time.perf_counter()
    await asyncio.gather(*(session(s) for s in range(sessions)))
    return latencies, time.perf_counter() - t0


def exactness(name, rows):
    path_in, path_out = os.path.join(work, f"{name}.in.json"), os.path.join(work, f"{name}.out.json")
    json.dump({"sequences": [r["input_ids"] for r in rows]}, open(path_in, "w"))
    subprocess.run([score_bin, model_dir, path_in, path_out, "1.0"], check=True)
    ours = json.load(open(path_out))["logprobs"]
    sampled = within = 0
    worst = 0.0
    for r, mine in zip(rows, ours):
        for t in range(1, len(r["input_ids"])):
            if r["loss_mask"][t]:
                d = abs(r["logprobs"][t] - mine[t - 1])
                worst = max(worst, d)
                sampled += 1
                within += d <= 1e-5
    followups = kept = 0
    for prev, cur in zip(rows, rows[1:]):
        if prev["session"] == cur["session"]:
            followups += 1
            kept += cur["input_ids"][:len(prev["input_ids"])] == prev["input_ids"]
    return {"sampled": sampled, "logprob_within": within, "worst": worst, "followups": followups, "prefix_kept": kept}


def summary(latencies):
    q = statistics.quantiles(latencies, n=20)
    return statistics.mean(latencies), statistics.median(latencies), q[18]


async def main():
    base, base_wall = await direct_vllm()
    b_mean, b_med, b_p95 = summary(base)
    print(f"{sessions} sessions x {TURNS} turns, {concurrency} at a time, max_tokens {MAX_TOKENS}")
    print(f"  {'vLLM directly':<24} chat latency mean {b_mean * 1000:7.1f} ms  median {b_med * 1000:7.1f}  p95 {b_p95 * 1000:7.1f}"
          f"   {len(base) / base_wall:6.1f} calls/s")
    results = {"direct": {"mean_ms": b_mean * 1000, "calls_per_s": len(base) / base_wall}}
    for name, url, key in targets:
        lat, rows, wall, control = await run_target(url, key)
        mean, med, p95 = summary(lat)
        ex = exactness(name, rows)
        results[name] = {"mean_ms": mean * 1000, "added_ms": (mean - b_mean) * 1000, "calls_per_s": len(lat) / wall, "control_ms": control, **ex}
        print(f"  {name:<24} chat latency mean {mean * 1000:7.1f} ms  median {med * 1000:7.1f}  p95 {p95 * 1000:7.1f}"
              f"   {len(lat) / wall:6.1f} calls/s   added {1000 * (mean - b_mean):+7.1f} ms")
        print(f"  {'':<24} session calls, mean: " + ", ".join(f"{k} {v:.1f} ms" for k, v in control.items()))
        print(f"  {'':<24} captured: {ex['logprob_within']}/{ex['sampled']} log-probs within 1e-5 of areal's recomputation"
              f" (worst {ex['worst']:.2g}); {ex['prefix_kept']}/{ex['followups']} follow-up prompts extend the previous turn's ids")
    json.dump(results, open(os.path.join(work, f"proxy-{concurrency}.json"), "w"))


asyncio.run(main())
