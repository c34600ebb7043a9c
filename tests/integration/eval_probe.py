#!/usr/bin/python3
"""An evaluation command for tests/integration/evaluation.sh, speaking the
`evaluation` contract from outside: it reads AREAL_EVAL_* and the gateway's
URL and admin key from its environment, asks the model (real HTTP, the admin
key: nothing recorded) to say each dataset item's digit, saves the gateway's
/metrics, and prints its result as the last JSON line.

    eval_probe.py ok|fail|noresult|sleep OUT_DIR
"""
import json
import os
import sys
import time
import urllib.request

mode, out_dir = sys.argv[1], sys.argv[2]
env = {k: os.environ.get(k, "") for k in ("AREAL_EVAL_DATASET", "AREAL_EVAL_GREEDY", "AREAL_EVAL_TEMPERATURE",
                                           "AREAL_EVAL_N_SAMPLES", "AREAL_EVAL_STEP", "OPENAI_BASE_URL")}
print("env " + " ".join(f"{k}={v}" for k, v in env.items()), flush=True)
if mode == "fail":
    print("eval_probe: failing on purpose", file=sys.stderr)
    sys.exit(3)
if mode == "sleep":
    time.sleep(60)
if mode == "noresult":
    print("no result here")
    sys.exit(0)
url, key = os.environ["AREAL_GATEWAY_URL"], os.environ["AREAL_ADMIN_KEY"]


def call(path, body=None):
    req = urllib.request.Request(url + path, data=None if body is None else json.dumps(body).encode(),
                                 headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return r.read().decode()


items = [json.loads(l) for l in open(env["AREAL_EVAL_DATASET"]) if l.strip()]
n = int(env["AREAL_EVAL_N_SAMPLES"])
rewards = []
for item in items:
    for _ in range(n):
        reply = json.loads(call("/v1/chat/completions", {
            "model": "default", "messages": [{"role": "user", "content": item["prompt"]}], "max_tokens": 2,
            "temperature": float(env["AREAL_EVAL_TEMPERATURE"])}))["choices"][0]["message"]["content"]
        rewards.append(1.0 if reply.startswith(str(item["digit"])) else 0.0)
# An Anthropic-SDK evaluator finds its own URL and key (the admin key) too.
anthropic = urllib.request.Request(os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages", data=json.dumps({
    "model": "default", "max_tokens": 2, "messages": [{"role": "user", "content": items[0]["prompt"]}]}).encode(),
    headers={"x-api-key": os.environ["ANTHROPIC_API_KEY"], "anthropic-version": "2023-06-01", "Content-Type": "application/json"})
with urllib.request.urlopen(anthropic, timeout=60) as r:
    assert json.loads(r.read().decode())["type"] == "message"
with open(f"{out_dir}/metrics_at_step_{env['AREAL_EVAL_STEP']}.txt", "w") as f:
    f.write(call("/metrics"))
print(json.dumps({"reward_mean": sum(rewards) / len(rewards), "answers": len(rewards), "note": "strings are not metrics"}))
