#!/usr/bin/env bash
# Mixture-of-experts models (issue #35), areal beside Hugging Face
# transformers in one run, on the same MoE folder (init-model --family
# qwen3_moe, or $MOE_FAMILY: 8 experts, top 2, the real Qwen3 tokenizer), the
# same threads and the same token ids:
#   training    areal's fsdp plugin (areal_model_bench) vs transformers'
#               Qwen3MoeForCausalLM + torch.optim.AdamW
#               (bench/real_peers/reference_transformers_train.py); both
#               print their first loss, which must agree. The balancing loss
#               is off on our side (train.moe.aux_loss_coef 0), as the
#               reference's loss has none.
#   generation  areal's local engine (areal_model_bench, all requests in one
#               batch) vs transformers' generate() (bench/real_peers/reference_transformers_generate.py)
#   bench/model/moe.sh [BUILD_DIR] [THREADS]
#   MOE_FAMILY=gpt_oss bench/model/moe.sh ...   the same on GPT-OSS folders
#               (transformers' GptOssForCausalLM as it loads by default:
#               eager attention, its grouped_mm experts)
# Needs a build and .venv-vllm (AREAL_TEST_PYTHON=1 scripts/setup.sh).
set -euo pipefail
source "$(dirname "$0")/bench_env.sh" "$@"
require_venv
family=${MOE_FAMILY:-qwen3_moe}
#            preset batch seqlen steps gen_requests gen_prompt gen_tokens
for row in "tiny   4     128    5     8            32         64" \
           "small  4     128    3     8            32         64"; do
  set -- $row
  preset=$1; shift
  batch=$1 seqlen=$2 steps=$3 requests=$4 prompt=$5 new=$6
  "$build/bin/areal-host" init-model --family "$family" --preset "$preset" --tokenizer "$tok" --out "$work/$preset" --seed 1 2>&1 | head -1
  AREAL_BENCH_TRAIN='{"moe": {"aux_loss_coef": 0}}' "$build/bin/areal_model_bench" "$work/$preset" "$threads" "$@" > "$work/$preset.areal.json"
  HF_HUB_OFFLINE=1 "$py" "$src/bench/real_peers/reference_transformers_train.py" "$work/$preset" "$threads" "$batch" "$seqlen" "$steps" > "$work/$preset.train.json"
  HF_HUB_OFFLINE=1 "$py" "$src/bench/real_peers/reference_transformers_generate.py" "$work/$preset" "$threads" "$requests" "$prompt" "$new" > "$work/$preset.gen.json"
  /usr/bin/python3 - "$family $preset" "$work/$preset".{areal,train,gen}.json "$*" <<'PY'
import json, sys
preset, a, t, g, args = sys.argv[1], *(json.load(open(p)) for p in sys.argv[2:5]), sys.argv[5].split()
print(f"\n{preset} (training: batch {args[0]} x {args[1]} tokens, {args[2]} timed steps; generation: {args[3]} requests, prompt {args[4]}, {args[5]} new tokens each, T=1)")
print(f"  first loss: areal {a['first_loss']:.6f}   {t['impl']} {t['first_loss']:.6f}")
print(f"  train tokens/s       areal fsdp {a['train_tokens_per_s']:9.1f}   transformers {t['train_tokens_per_s']:9.1f}   ratio {a['train_tokens_per_s'] / t['train_tokens_per_s']:.2f}x")
print(f"  generation tokens/s  areal local {a['gen_tokens_per_s']:8.1f}   transformers {g['gen_tokens_per_s']:9.1f}   ratio {a['gen_tokens_per_s'] / g['gen_tokens_per_s']:.2f}x")
assert abs(a["first_loss"] - t["first_loss"]) < 1e-3, "areal and transformers disagree on the loss: not the same model"
PY
done
