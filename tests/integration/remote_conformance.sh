#!/usr/bin/env bash
# The sglang or vllm plugin against areal-engine-server (mock engine):
# 1. the conformance suite, over two servers at once;
# 2. a server that reports raw (temperature 1) log-probs is refused at create,
#    and the message names the server flag that fixes it;
# 3. a server that never answers gives a clear startup error, not a hang.
#   remote_conformance.sh AREAL_HOST AREAL_TEST_BACKEND SOURCE_DIR sglang|vllm
set -euo pipefail
host=$1 bin=$2 src=$(cd "$3" && pwd) kind=$4
source "$src/tests/support/test_backend.sh"
tmp=$(mktemp -d)
pids=()
trap 'kill ${pids[@]:-} 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
engine='{"vocab_size": 97, "token_delay_ms": 2}'
start_test_backend "$bin" "$tmp/a.log" "$kind" --plugin mock_inference --engine-config "$engine" $(test_backend_logprob_flags "$kind")
pids+=("$BACKEND_PID"); a=$BACKEND_URL
start_test_backend "$bin" "$tmp/b.log" "$kind" --plugin mock_inference --engine-config "$engine" $(test_backend_logprob_flags "$kind")
pids+=("$BACKEND_PID"); b=$BACKEND_URL

out=$("$host" conformance "$kind" --config "{\"servers\": [\"$a\", \"$b\"]}" 2>&1) || true
echo "$out"
echo "$out" | grep -q "conformance: [0-9]* passed, 0 failed" || { echo "FAIL: conformance over two $kind servers"; exit 1; }

# The servers' raw modes: SGLang with SGLANG_RETURN_ORIGINAL_LOGPROB=1, vLLM by default.
if [ "$kind" = sglang ]; then
  SGLANG_RETURN_ORIGINAL_LOGPROB=1 start_test_backend "$bin" "$tmp/raw.log" sglang --plugin mock_inference --engine-config "$engine"
  fix="SGLANG_RETURN_ORIGINAL_LOGPROB"
else
  start_test_backend "$bin" "$tmp/raw.log" vllm --plugin mock_inference --engine-config "$engine"
  fix="--logprobs-mode processed_logprobs"
fi
pids+=("$BACKEND_PID")
out=$("$host" conformance "$kind" --config "{\"servers\": [\"$BACKEND_URL\"]}" 2>&1) || true
echo "$out" | grep -q "reports raw (temperature 1) log-probs" || { echo "FAIL: a raw-mode server was not refused:"; echo "$out"; exit 1; }
echo "$out" | grep -q -- "$fix" || { echo "FAIL: the refusal does not name $fix:"; echo "$out"; exit 1; }
echo "[PASS] a server reporting raw log-probs is refused at create, naming $fix"

# Nothing listens on port 9 (discard) of loopback in the test environment.
start=$(date +%s)
out=$("$host" conformance "$kind" --config '{"servers": ["http://127.0.0.1:9"], "startup_timeout_s": 1}' 2>&1) || true
echo "$out" | grep -q "did not answer /health within startup_timeout_s" || { echo "FAIL: no clear startup error:"; echo "$out"; exit 1; }
[ $(( $(date +%s) - start )) -lt 30 ] || { echo "FAIL: the startup error took too long"; exit 1; }
echo "[PASS] an unreachable server gives a clear startup error"
