#!/usr/bin/env bash
# LoRA against full-weight training (issue #34), side by side in one run on
# the same batch and threads: areal's fsdp engine in full and LoRA mode
# (train.lora, rank 16, alpha 32, all-linear) and Hugging Face PEFT +
# torch.optim on the transformers model class (reference_peft.py, in
# .venv-vllm). Each in its own process, so peak RSS is its own; "state"
# is what stays between steps (trained weights + AdamW moments; LoRA keeps
# the frozen base besides, counted in RSS). All first losses must agree
# (a fresh adapter is the base model).
#   bench/model/lora.sh [BUILD_DIR] [THREADS]
# The 0.6b row (Qwen3-0.6B's shape, 151k vocabulary) needs about 12 GB of
# memory for full training and takes a few minutes on 2 cores.
set -euo pipefail
source "$(dirname "$0")/bench_env.sh" "$@"
require_venv
lora='{"lora": {"rank": 16, "alpha": 32, "target_modules": "all-linear"}}'
#            preset batch seqlen steps
for row in "tiny   4     128    5" \
           "small  4     128    3" \
           "0.6b   1     256    2"; do
  set -- $row
  preset=$1 batch=$2 seqlen=$3 steps=$4
  "$build/bin/areal-host" init-model --family qwen3 --preset "$preset" --tokenizer "$tok" --out "$work/$preset" --seed 1 > /dev/null
  "$build/bin/areal_model_bench" "$work/$preset" "$threads" "$batch" "$seqlen" "$steps" 0 0 0 > "$work/$preset.full.json"
  AREAL_BENCH_TRAIN="$lora" "$build/bin/areal_model_bench" "$work/$preset" "$threads" "$batch" "$seqlen" "$steps" 0 0 0 > "$work/$preset.lora.json"
  HF_HUB_OFFLINE=1 "$py" "$here/reference_peft.py" "$work/$preset" "$threads" "$batch" "$seqlen" "$steps" 16 32 > "$work/$preset.peft.json"
  /usr/bin/python3 - "$preset" "$batch" "$seqlen" "$steps" "$work/$preset".{full,lora,peft}.json <<'PY'
import json, sys
preset, batch, seqlen, steps = sys.argv[1:5]
full, lora, peft = (json.load(open(p)) for p in sys.argv[5:8])
mib = lambda b: f"{b / 2**20:8.1f} MiB"
print(f"\n{preset} (batch {batch} x {seqlen} tokens, {steps} timed steps)")
print(f"  {'':50} {'tokens/s':>10} {'state':>13} {'peak RSS':>13} {'first loss':>11}")
for label, r in (("areal fsdp, every weight", full), ("areal fsdp, train.lora r=16", lora), (peft["impl"] + ", LoRA r=16", peft)):
    print(f"  {label:50} {r['train_tokens_per_s']:10.1f} {mib(r.get('train_resident_state_bytes', r.get('resident_state_bytes', 0))):>13} {mib(r['peak_rss_bytes']):>13} {r['first_loss']:11.6f}")
print(f"  LoRA step time: areal {lora['train_step_s']:.3f} s, PEFT {peft['train_step_s']:.3f} s ({peft['train_step_s'] / lora['train_step_s']:.2f}x); "
      f"areal LoRA vs areal full {full['train_step_s'] / lora['train_step_s']:.2f}x faster, state {full['train_resident_state_bytes'] / lora['train_resident_state_bytes']:.0f}x smaller")
assert abs(full["first_loss"] - lora["first_loss"]) < 1e-4 and abs(lora["first_loss"] - peft["first_loss"]) < 1e-3, "first losses differ: not the same model"
PY
done
