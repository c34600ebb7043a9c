#!/usr/bin/env bash
# The trainer in inline mode (a workflow plugin runs the episodes): the
# token_match workflow on the local engine, GRPO on fsdp, with a model from
# init-model. max_head_offpolicyness 0 must be strictly synchronous (every
# trained token from the weights being trained); 1 must stay within one
# version and actually use it. Every episode lands in rollouts.jsonl.
set -euo pipefail
host=$1 work=$2
rm -rf "$work" && mkdir -p "$work"
"$host" init-model --family qwen3 --preset tiny --tokenizer bytes --out "$work/model" --seed 2 >/dev/null
/usr/bin/python3 - "$work/data.jsonl" <<'PY'
import json, sys
with open(sys.argv[1], "w") as f:
    for d in range(10):
        prompt = [257] + list(f"user\nSay {d}".encode()) + [258, 10, 257] + list(b"assistant\n")
        f.write(json.dumps({"input_ids": prompt, "target_ids": [48 + d, 258]}) + "\n")
PY
cat > "$work/cfg.yaml" <<YAML
experiment: {name: inline, seed: 3, output_dir: runs}
inference: {plugin: local, model_path: model}
gateway: {plugin: none}
workflow: {plugin: token_match, temperature: 1.0}
train: {plugin: fsdp, model_path: model, lr: 0.003}
algorithm: {plugin: grpo}
rollout: {dataset: data.jsonl, n_samples: 4}
trainer: {total_steps: 12, batch_size: 4, recompute_logprob: true}
YAML
# Bound 0 updates the inference engine through HF files on disk, bound 1 in memory (ABI 1.1).
for bound in 0 1; do
  update=$([ $bound = 0 ] && echo disk || echo memory)
  "$host" run --config "$work/cfg.yaml" rollout.max_head_offpolicyness=$bound experiment.trial=b$bound trainer.weight_update=$update \
    2> "$work/b$bound.log" || { tail -20 "$work/b$bound.log"; exit 1; }
done
/usr/bin/python3 - "$work/runs/inline" <<'PY'
import json, sys
root = sys.argv[1]
for bound in (0, 1):
    rows = [json.loads(l) for l in open(f"{root}/b{bound}/metrics.jsonl")]
    assert [r["step"] for r in rows] == list(range(1, 13))
    stale = [r["policy_version"] - v for r in rows for v in r["sample_versions"]]
    assert len(stale) == 12 * 4 * 4, len(stale)
    assert max(stale) <= bound and min(stale) >= 0, (bound, max(stale), min(stale))
    if bound == 1:
        assert max(stale) == 1, "max_head_offpolicyness 1 never used its slack"
    assert all("algo_clip_fraction" in r and r["loss_tokens"] > 0 for r in rows)
    assert {r["weight_update"] for r in rows} == {"disk" if bound == 0 else "memory"}
    episodes = [json.loads(l) for l in open(f"{root}/b{bound}/rollouts.jsonl")]
    ok = [e for e in episodes if e["status"] == "ok"]
    assert len(ok) >= 12 * 4 * 4, len(ok)
    # A group that finishes after the trainer moved past its bound is dropped,
    # and recorded as such (a slow episode on a loaded machine); never when synchronous.
    dropped = [e for e in episodes if e["status"] != "ok"]
    assert all(e["status"] == "dropped_stale" and e["trainer_version"] - e["oldest_version"] > bound for e in dropped), dropped
    assert bound > 0 or not dropped, dropped
    print(f"bound {bound}: max staleness {max(stale)}, {len(episodes)} episodes recorded ({len(dropped)} dropped as stale)")
PY
test -f "$work/runs/inline/b0/final/model.safetensors" && test -s "$work/runs/inline/b0/reward_curve.svg"

# A workflow whose every episode fails (here: data it refuses) must end the
# run with the episodes' error after max_failed_groups_in_a_row groups, not
# retry forever.
echo '{"prompt": "no input_ids here"}' > "$work/bad.jsonl"
set +e
timeout 120 "$host" run --config "$work/cfg.yaml" rollout.dataset=bad.jsonl rollout.max_failed_groups_in_a_row=3 experiment.trial=bad \
  2> "$work/bad.log"
rc=$?
set -e
[ $rc -ne 0 ] && [ $rc -ne 124 ] || { echo "a run whose every episode fails exited $rc (124: it hung)"; tail -5 "$work/bad.log"; exit 1; }
grep -q "groups in a row had no successful episode" "$work/bad.log" && grep -q "needs a non-empty integer array 'input_ids'" "$work/bad.log" \
  || { echo "the failing run does not say why:"; tail -5 "$work/bad.log"; exit 1; }
echo OK
