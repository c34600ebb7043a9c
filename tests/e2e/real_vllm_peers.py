"""Real vLLM behind our gateway, checked by peers' own code (issue #28):

  1. AReaL's own OpenAIProxyClient (areal 1.0.4 from PyPI) drives a session
     against our gateway: start, chat (openai SDK with the session key),
     rewards by id and "last", end, export; the export parses into AReaL's
     own InteractionWithTokenLogpReward, whose tensors must equal the rows
     our gateway appended to gateway.trajectories_jsonl.
  2. Every log-prob vLLM reported (recorded by the gateway) against areal's
     own recomputation on the same ids (tests/torch/score_logprobs.cpp), at
     temperature 1 and 0.7, within BOUND (docs/backends.md).

Run with .venv-vllm's python (scripts/setup.sh):
  real_vllm_peers.py GATEWAY_URL ADMIN_KEY MODEL_DIR SCORE_BIN TRAJECTORIES_JSONL WORK_DIR
"""
import asyncio
import json
import os
import subprocess
import sys

import aiohttp
import openai
import torch
from areal.experimental.openai.proxy.client_session import OpenAIProxyClient
from areal.experimental.openai.types import InteractionWithTokenLogpReward

# fp32 on both sides; vLLM's CPU kernels (oneDNN GEMMs, its own attention)
# sum in other orders than libtorch's. Measured: up to 1.9e-6 on this model.
BOUND = 1e-5

gateway, admin, model, score_bin, jsonl, work = sys.argv[1:7]
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def jsonl_rows():
    rows = {}
    with open(jsonl) as f:
        for line in f:
            for row in json.loads(line)["rows"]:
                rows[row["interaction_id"]] = row
    return rows


async def areal_client_session():
    async with aiohttp.ClientSession() as http:
        client = OpenAIProxyClient(session=http, base_url=gateway, task_id="areal-peer", admin_api_key=admin)
        ids = []
        async with client:
            oa = openai.AsyncOpenAI(base_url=gateway + "/v1", api_key=client.session_api_key)
            messages = [{"role": "user", "content": "Count from one to five."}]
            for turn in range(3):
                r = await oa.chat.completions.create(model="served", messages=messages, max_tokens=12, temperature=1.0, seed=turn)
                ids.append(r.id)
                messages += [{"role": "assistant", "content": r.choices[0].message.content}, {"role": "user", "content": "Go on."}]
            await client.set_reward(ids[0], 0.5)
            await client.set_last_reward(2.0)
        interactions = await client.export_interactions(discount=1.0, style="individual")
    check(sorted(interactions) == sorted(ids), f"AReaL's export_interactions holds exactly the 3 chat ids {ids}")
    rows = jsonl_rows()
    for cid, inter in interactions.items():
        check(isinstance(inter, InteractionWithTokenLogpReward), f"{cid} parses into AReaL's InteractionWithTokenLogpReward")
        t = inter.to_tensor_dict()
        row = rows.get(cid)
        check(row is not None, f"{cid} is in our trajectories JSONL")
        if row is None:
            continue
        n = len(row["input_ids"])
        check(t["input_ids"].dtype == torch.int64 and list(t["input_ids"].shape) == [1, n], f"{cid}: input_ids int64 [1, {n}]")
        check(t["input_ids"][0].tolist() == row["input_ids"], f"{cid}: input_ids equal our row's")
        check(t["loss_mask"][0].tolist() == row["loss_mask"], f"{cid}: loss_mask equal")
        check(t["versions"][0].tolist() == row["versions"], f"{cid}: versions equal")
        check(torch.equal(t["logprobs"][0], torch.tensor(row["logprobs"], dtype=torch.float32)), f"{cid}: logprobs bit-equal")
        check(bool(t["attention_mask"].all()) and t["attention_mask"].dtype == torch.bool, f"{cid}: attention_mask all true")
        check(abs(inter.reward - row["reward"]) < 1e-9 and abs(t["rewards"].item() - row["reward"]) < 1e-6, f"{cid}: reward {inter.reward}")
    # Returns-to-go along the conversation with discount 1: 0.5 + 2.0, then 2.0, 2.0.
    want = {ids[0]: 2.5, ids[1]: 2.0, ids[2]: 2.0}
    check(all(abs(interactions[i].reward - want[i]) < 1e-9 for i in ids if i in interactions), f"rewards {want}")


def admin_post(path, body):
    r = subprocess.run(["curl", "-sf", "-X", "POST", gateway + path, "-H", "Authorization: Bearer " + admin,
                        "-H", "Content-Type: application/json", "-d", json.dumps(body)], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"POST {path} failed: {r.stdout} {r.stderr}")
    return json.loads(r.stdout)


def sampled_session(name, temperature, calls):
    started = admin_post("/rl/start_session", {"task_id": name})
    oa = openai.OpenAI(base_url=gateway + "/v1", api_key=started["api_key"])
    for i in range(calls):
        oa.chat.completions.create(model="served", messages=[{"role": "user", "content": f"Tell me about the number {i}."}],
                                   max_tokens=48, temperature=temperature, seed=100 + i)
    subprocess.run(["curl", "-sf", "-X", "POST", gateway + "/rl/end_session", "-H", "Authorization: Bearer " + started["api_key"],
                    "-H", "Content-Type: application/json", "-d", "{}"], check=True, capture_output=True)
    return admin_post("/export_trajectories", {"session_id": started["session_id"], "format": "rows"})["rows"]


def compare_logprobs(rows, temperature, label):
    seqs = [r["input_ids"] for r in rows]
    path_in, path_out = os.path.join(work, f"{label}.in.json"), os.path.join(work, f"{label}.out.json")
    json.dump({"sequences": seqs}, open(path_in, "w"))
    subprocess.run([score_bin, model, path_in, path_out, str(temperature)], check=True)
    ours = json.load(open(path_out))["logprobs"]
    worst, compared = 0.0, 0
    for row, mine in zip(rows, ours):
        for t in range(1, len(row["input_ids"])):
            if row["loss_mask"][t]:
                worst = max(worst, abs(row["logprobs"][t] - mine[t - 1]))
                compared += 1
    check(compared >= 100, f"{label}: {compared} sampled tokens compared")
    check(worst <= BOUND, f"{label}: vLLM's recorded log-probs within {worst:.3g} of areal's recomputation (bound {BOUND})")
    print(f"logprobs {label}: {compared} tokens, max |vLLM - areal| = {worst:.3g}")


asyncio.run(areal_client_session())
compare_logprobs(sampled_session("logprobs-t1", 1.0, 8), 1.0, "temperature-1")
compare_logprobs(sampled_session("logprobs-t07", 0.7, 8), 0.7, "temperature-0.7")
print(f"real vLLM peers: {0 if failures else 1} passed, {1 if failures else 0} failed")
sys.exit(1 if failures else 0)
