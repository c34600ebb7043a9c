#!/usr/bin/env bash
# Issue #34 through real vLLM on CPU (.venv-vllm): the vllm plugin loads
# LoRA adapters into a running vLLM with its runtime LoRA API and names
# them per request.
#   1. Serving: `areal-host serve` with inference.plugin=vllm and two PEFT
#      adapters (inference.adapters); the openai SDK chooses them by `model`,
#      all at once; every recorded log-prob equals PEFT's on the same tokens
#      within 1e-5 (float32; docs/backends.md). Only adapter requests: vLLM
#      on CPU applies an adapter to the base rows of a mixed batch.
#   2. Training: the quickstart through vLLM with train.lora; after each step
#      the plugin writes the trainer's adapter (handed over in memory) as a
#      PEFT folder, vLLM loads it under a new name, requests move to it and
#      the old one is unloaded once unused. Checks every step handed over
#      the adapter alone, vLLM's log-probs of the new version equal the
#      trainer's recomputation (logprob_drift_max), the staleness bound held,
#      and retired versions left vLLM and the disk.
#   vllm_adapters.sh AREAL_HOST SOURCE_DIR WORK
set -euo pipefail
host=$1 src=$(cd "$2" && pwd) work=$3 steps=6
ref_py=$src/.venv-vllm/bin/python     # peft + transformers (tests/python/vllm/requirements.lock)
client_py=$src/.venv-tests/bin/python # the openai SDK (tests/python/requirements.lock)
for p in "$ref_py" "$client_py"; do
  [ -x "$p" ] || { echo "FAIL: $p is missing: run scripts/setup.sh with AREAL_TEST_PYTHON=1 (scripts/test.sh does)"; exit 1; }
done
source "$src/tests/support/trainer_runs.sh"
source "$src/tests/support/real_vllm.sh"
source "$src/tests/support/start_gateway.sh"
require_agent_modules "$src"
export HF_HUB_OFFLINE=1
# The quickstart's model in the shape vLLM's CPU attention takes, warmed up on the format.
rm -rf "$work" && mkdir -p "$work"
"$host" init-model --family qwen3 --preset tiny-hd32 --tokenizer bytes --out "$work/model" --seed 1 --initializer-range 0.1 >/dev/null 2>&1
format_warmup "$src" "$work"
peft=$src/tests/parity/reference_lora_peft.py  # its `ref` commands are reference_logprobs_transformers.py's
"$ref_py" "$peft" batch <<EOF
make '$work/model' '$work/adapter-a' 1 4 8 all-linear 0
make '$work/model' '$work/adapter-b' 2 8 16 q_proj,v_proj,down_proj 1
EOF
pids=()
trap 'kill ${pids[@]:-} 2>/dev/null || true; stop_real_vllm' EXIT
export VLLM_ALLOW_RUNTIME_LORA_UPDATING=1
start_real_vllm "$src" "$work/model" "$work/vllm.log" --enable-lora --max-lora-rank 8 --max-loras 4

echo "--- 1. serving PEFT adapters through vLLM"
start_gateway "$host" lora-admin-key "$work/serve.log" --tokenizer "$work/model" inference.plugin=vllm "inference.servers=[\"$VLLM_URL\"]" \
  inference.launcher=stock "inference.adapters={\"a\": \"$work/adapter-a\", \"b\": \"$work/adapter-b\"}"
"$client_py" "$src/tests/e2e/lora/chat_with_adapters.py" "$url" lora-admin-key "$work" --adapters-only || { tail -20 "$work/serve.log"; exit 1; }
"$ref_py" "$peft" batch <<EOF
score '$work/model' '$work/adapter-a' '$work/in-a.json' '$work/ref-a.json'
score '$work/model' '$work/adapter-b' '$work/in-b.json' '$work/ref-b.json'
ref score '$work/model' '$work/in-a.json' '$work/ref-a-on-base.json'
EOF
/usr/bin/python3 "$src/tests/e2e/lora/compare_recorded.py" "$work" 1e-5 a b
kill "${pids[@]}" && wait "${pids[@]}" 2>/dev/null || true
pids=()

echo "--- 2. LoRA training, each step's adapter loaded into vLLM"
loads_before=$(grep -c 'POST /v1/load_lora_adapter HTTP/1.1" 200' "$work/vllm.log" || true)
start=$SECONDS
"$host" run --config "$src/configs/quickstart_vllm.yaml" experiment.output_dir="$work/runs" train.model_path="$work/model" \
  gateway.tokenizer="$work/model" "inference.servers=[\"$VLLM_URL\"]" inference.launcher=stock inference.adapter_dir="$work/handed-over" \
  train.lora.rank=8 train.lora.alpha=16 trainer.weight_update=adapter trainer.recompute_logprob=true trainer.total_steps=$steps \
  evaluation.every_steps=0 experiment.trial=t experiment.seed=7 2> "$work/run.log" || { tail -30 "$work/run.log"; exit 1; }
echo "$steps LoRA steps through vLLM in $((SECONDS - start)) s"
/usr/bin/python3 "$src/tests/e2e/lora/check_adapter_run.py" "$work/runs/quickstart/t" "$steps" 1e-5 "$work/vllm.log" "$loads_before" "$work/handed-over"
echo OK
