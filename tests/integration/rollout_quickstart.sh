#!/usr/bin/env bash
# Runs configs/rollout_token_match.yaml (shortened by overrides) through areal-host and
# checks the output: one record per episode, the gateway log line, rewards
# that agree with the tokens actually recorded, and a live /health.
set -euo pipefail
host=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
out="$work/rollouts.jsonl"
"$host" --config "$src/configs/rollout_token_match.yaml" rollout.episodes=40 rollout.output="$out" experiment.seed=5 \
  2> "$work/stderr.log"
cat "$work/stderr.log"
grep -Eq "gateway listening at http://127\.0\.0\.1:[0-9]+" "$work/stderr.log"
grep -q "done: 40 ok, 0 failed" "$work/stderr.log"
[ "$(wc -l < "$out")" -eq 40 ]
# Each reward must equal the fraction of target ids reproduced by the
# recorded output ids (recomputed here, independently of the plugin).
/usr/bin/python3 - "$out" "$src/configs/data/token_match.jsonl" <<'PY'
import json, sys
records = [json.loads(l) for l in open(sys.argv[1])]
data = [json.loads(l) for l in open(sys.argv[2])]
assert sorted(r["episode_id"] for r in records) == sorted(f"t{i}-e0" for i in range(40))
for r in records:
    assert r["status"] == "ok", r
    (c,) = r["completions"]
    item = data[r["data_index"]]
    assert c["input_ids"] == item["input_ids"]
    assert len(c["output_ids"]) == len(c["logprobs"]) == len(c["versions"]) == 4
    assert all(lp <= 0 for lp in c["logprobs"]) and all(v == 0 for v in c["versions"])
    want = sum(a == b for a, b in zip(c["output_ids"], item["target_ids"])) / len(item["target_ids"])
    assert abs(c["reward"] - want) < 1e-12 and r["result"]["reward"] == c["reward"], (c, item)
print("rollout records verified:", len(records))
PY
# The same seed reproduces the same tokens.
"$host" --config "$src/configs/rollout_token_match.yaml" rollout.episodes=40 rollout.output="$work/again.jsonl" experiment.seed=5 2>/dev/null
/usr/bin/python3 -c "
import json,sys
a={r['episode_id']:r['completions'] for r in map(json.loads,open('$out'))}
b={r['episode_id']:r['completions'] for r in map(json.loads,open('$work/again.jsonl'))}
assert a==b, 'same seed, different tokens'
print('seeded rerun identical')"
