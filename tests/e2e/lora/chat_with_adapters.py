"""Sends chat completions through areal's gateway with the `openai` SDK,
choosing the LoRA adapter by `model` (see serve_adapters.sh), all at once,
each in a session of its own; then exports each session and writes, per
model served, the recorded sequences and log-probs:
  WORK/in-{a,b,base}.json        {"sequences": [[ids]]} (prompt + output)
  WORK/recorded-{a,b,base}.json  {"logprobs": [[...]], "loss_mask": [[...]], "versions": [[...]]}
  chat_with_adapters.py URL ADMIN_KEY WORK [--adapters-only]
--adapters-only sends no base-model requests (vLLM on CPU applies an
adapter to the base rows of a mixed batch: docs/backends.md).
"""
import json
import sys
import urllib.request
from concurrent.futures import ThreadPoolExecutor

from openai import OpenAI

url, admin_key, work = sys.argv[1:4]
adapters_only = "--adapters-only" in sys.argv[4:]


def admin(path, body):
    req = urllib.request.Request(url + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Authorization": f"Bearer {admin_key}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req) as r:
        return json.load(r)


# GET /v1/models: the base, then both adapters with the base as their parent.
models = OpenAI(base_url=f"{url}/v1", api_key=admin_key).models.list()
ids = [m.id for m in models.data]
base_name = ids[0]
assert ids[1:] == ["a", "b"], f"/v1/models lists {ids}"
for m in models.data[1:]:
    assert m.model_extra.get("parent") == base_name, f"{m.id}: parent is {m.model_extra.get('parent')}"

# (model sent, which weights must have served it)
served_by = [("a", "a"), ("b", "b")] + ([] if adapters_only else [(base_name, "base"), ("gpt-4o", "base")])
jobs = [(name, served) for name, served in served_by for _ in range(3)]
prompts = ["Say something about rivers.", "Count to five.", "What is LoRA?"]


def run(i):
    sent, served = jobs[i]
    s = admin("/rl/start_session", {"task_id": f"lora-{i}"})
    client = OpenAI(base_url=f"{url}/v1", api_key=s["api_key"], max_retries=0)
    r = client.chat.completions.create(model=sent, temperature=1.0, max_tokens=24, seed=i,
                                       messages=[{"role": "user", "content": prompts[i % len(prompts)]}])
    assert r.model == sent, f"the reply names model {r.model}, the request {sent}"
    urllib.request.urlopen(urllib.request.Request(f"{url}/rl/end_session", data=b"{}", method="POST",
                                                  headers={"Authorization": f"Bearer {s['api_key']}",
                                                           "Content-Type": "application/json"})).read()
    return served, admin("/export_trajectories", {"session_id": s["session_id"]})


with ThreadPoolExecutor(len(jobs)) as pool:
    results = list(pool.map(run, range(len(jobs))))
by_served = {}
for served, exported in results:
    rows = exported["rows"]
    assert len(rows) == 1, f"expected one recorded call, got {len(rows)}"
    by_served.setdefault(served, []).append(rows[0])
for served, rows in by_served.items():
    json.dump({"sequences": [r["input_ids"] for r in rows]}, open(f"{work}/in-{served}.json", "w"))
    json.dump({k: [r[k] for r in rows] for k in ("logprobs", "loss_mask", "versions")}, open(f"{work}/recorded-{served}.json", "w"))
print(f"{len(jobs)} calls recorded: " + ", ".join(f"{k}: {len(v)}" for k, v in sorted(by_served.items())))
