# Sourced by test scripts: starts areal-engine-server (an SGLang- or
# vLLM-protocol server over one of our engines) and waits until it listens.
#   start_test_backend BIN LOG PROTOCOL [server args...]
# Sets BACKEND_URL and BACKEND_PID; the caller stops it (kill $BACKEND_PID).
start_test_backend() {
  local bin=$1 log=$2 protocol=$3
  shift 3
  "$bin" --protocol "$protocol" "$@" > "$log" 2>&1 &
  BACKEND_PID=$!
  BACKEND_URL=""
  for _ in $(seq 300); do
    BACKEND_URL=$(grep -o 'listening at http://[0-9.:]*' "$log" | sed 's/listening at //') && [ -n "$BACKEND_URL" ] && return 0
    kill -0 "$BACKEND_PID" 2>/dev/null || { echo "areal-engine-server ($protocol) exited:"; cat "$log"; return 1; }
    sleep 0.1
  done
  echo "areal-engine-server ($protocol) did not start:"; cat "$log"
  return 1
}

# The flags that make areal-engine-server report the log-probs our plugins
# accept (SGLang's default already does; vLLM's needs processed_logprobs).
test_backend_logprob_flags() {
  [ "$1" = vllm ] && echo "--logprobs-mode processed_logprobs"
  return 0
}
