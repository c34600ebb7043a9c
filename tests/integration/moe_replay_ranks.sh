#!/usr/bin/env bash
# Routing replay through a workflow and across train ranks (issue #35): a
# tiny Qwen3-MoE model, the token_match workflow (api->generate) with
# rollout.record_routing, and train.moe.routing_replay: rollout, which
# refuses a batch without the rollout's routing. Checks:
#  1. a run with 1 rank and one with 2 ranks (the batch's routed_experts
#     split between them) give the same rewards and, within 1e-4, the same
#     loss and gradient norm, step by step (the load-balancing loss is off:
#     it is per rank, as HF's is per forward, so it differs by design);
#  2. without rollout.record_routing the first step fails with the keys to set.
#   moe_replay_ranks.sh AREAL_HOST SOURCE_DIR WORK
set -euo pipefail
host=$1 src=$(cd "$2" && pwd) work=$3
rm -rf "$work" && mkdir -p "$work" && cd "$work"
"$host" init-model --family qwen3_moe --preset tiny --tokenizer bytes --out model --seed 2 --end-turn-logit 4 >/dev/null
/usr/bin/python3 - data.jsonl <<'PY'
import json, sys
with open(sys.argv[1], "w") as f:
    for d in range(10):
        prompt = [257] + list(f"user\nSay {d}".encode()) + [258, 10, 257] + list(b"assistant\n")
        f.write(json.dumps({"input_ids": prompt, "target_ids": [258]}) + "\n")
PY
cat > cfg.yaml <<YAML
experiment: {name: moe, seed: 3, output_dir: runs}
inference: {plugin: local, model_path: model}
gateway: {plugin: none}
workflow: {plugin: token_match, temperature: 1.0}
train: {plugin: fsdp, model_path: model, lr: 0.003, moe: {routing_replay: rollout, aux_loss_coef: 0}}
algorithm: {plugin: grpo}
rollout: {dataset: data.jsonl, n_samples: 4, concurrency: 1, max_concurrent_rollouts: 1, record_routing: true}
trainer: {total_steps: 6, batch_size: 2, recompute_logprob: true}
dashboard: {enabled: false}
YAML
"$host" run --config cfg.yaml experiment.trial=one 2> one.log || { tail -20 one.log; exit 1; }
"$host" run --config cfg.yaml experiment.trial=two train.world_size=2 2> two.log || { tail -30 two.log; exit 1; }
/usr/bin/python3 - runs/moe <<'PY'
import json, sys
root = sys.argv[1]
one = [json.loads(l) for l in open(f"{root}/one/metrics.jsonl")]
two = [json.loads(l) for l in open(f"{root}/two/metrics.jsonl")]
assert len(one) == len(two) == 6, (len(one), len(two))
assert any(r["grad_norm"] > 0 for r in one), "no step had a learning signal: the comparison would be empty"
worst = 0.0
for a, b in zip(one, two):
    assert a["reward_mean"] == b["reward_mean"], ("the ranks' weights sampled other tokens", a["step"], a["reward_mean"], b["reward_mean"])
    assert b["world_size"] == 2, b
    for k in ("loss", "grad_norm", "algo_pg_loss", "algo_approx_kl"):
        d = abs(a[k] - b[k]) / max(1.0, abs(a[k]))
        worst = max(worst, d)
        assert d <= 1e-4, (a["step"], k, a[k], b[k])
print(f"replayed routing on 2 ranks matches 1 rank over {len(one)} steps: largest relative difference {worst:.2e}")
PY
if "$host" run --config cfg.yaml experiment.trial=unrecorded rollout.record_routing=false 2> unrecorded.log; then
  echo "FAIL: rollout replay trained on rows without routing"; exit 1
fi
grep -q "the batch has no routed_experts: record the rollout's routing" unrecorded.log || { echo "FAIL: unclear error"; tail unrecorded.log; exit 1; }
echo "without rollout.record_routing: refused with the keys to set"
echo OK
