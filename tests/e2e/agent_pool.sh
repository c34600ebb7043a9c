#!/usr/bin/env bash
# The agent_pool workflow (rollout.openai.mode subproc) with seed-style agents:
#  1. configs/python_agent_subproc.yaml (the seeds' multi-turn math agent) trains 2 steps;
#  2. rewards returned as {completion_id: reward} land on those calls;
#  3. an agent that raises, hangs, returns garbage, exits or names an unknown
#     call fails only its episode, with a clear message, and the pool carries on;
#  4. a Node.js agent (export async function run) runs in the Node worker.
set -euo pipefail
host=$1 src=$2 work=$3
source "$src/tests/support/trainer_runs.sh"
fresh_model_workdir "$work" 11
py=/usr/bin/python3

# 1. Training with the shipped config.
run_config "$src/configs/python_agent_subproc.yaml" "$work" "$work/train.log" trainer.total_steps=2 workflow.interpreter=$py
$py - "$work/runs/python-agent/trial0" <<'PY'
import json, sys
run = sys.argv[1]
episodes = [json.loads(l) for l in open(f"{run}/rollouts.jsonl")]
assert len(episodes) >= 2 * 2 * 4, len(episodes)
for e in episodes:
    assert e["status"] == "ok", e.get("error")
    rows = e["session"]["rows"]
    assert 1 <= len(rows) <= 3, len(rows)
    assert all(r["reward"] is not None for r in rows), rows
metrics = [json.loads(l) for l in open(f"{run}/metrics.jsonl")]
assert [m["step"] for m in metrics] == [1, 2], metrics
print(f"1. trained 2 steps on {len(episodes)} multi-turn episodes from 4 Python workers")
PY

# A rollout-only run of one agent over a dataset (tests/support/trainer_runs.sh).
rollout() {  # rollout NAME AGENT DATA_JSONL EXTRA_WORKFLOW_KEYS
  rollout_only "$1" "{plugin: agent_pool, agent: \"$2\", python_path: [\"$src/tests/fixtures/agents\"], workers: 2, $4}" "$3" \
    "concurrency: 2, openai: {mode: subproc}"
}

# 2. Rewards by completion id.
rollout dict pool_test_agents:DictRewardAgent "$(for i in 0 1 2 3; do echo "{\"i\": $i}"; done)" "timeout_seconds: 60, interpreter: $py"
$py - "$work/runs/dict/t/rollouts.jsonl" <<'PY'
import json, sys
episodes = [json.loads(l) for l in open(sys.argv[1])]
assert len(episodes) == 4
for e in episodes:
    assert e["status"] == "ok", e.get("error")
    assert sorted(r["reward"] for r in e["session"]["rows"]) == [0.25, 0.75], e["session"]["rows"]
print("2. {completion_id: reward} results reached their calls (0.25 and 0.75 in every episode)")
PY

# 3. Failures stay in their episode.
modes="ok raise ok hang garbage exit unknown_id ok ok ok"
ALLOW_FAILED=1 rollout flaky pool_test_agents:FlakyAgent "$(for m in $modes; do echo "{\"mode\": \"$m\"}"; done)" "timeout_seconds: 3, interpreter: $py"
$py - "$work/runs/flaky/t/rollouts.jsonl" "$work/flaky.log" $modes <<'PY'
import json, sys
episodes = [json.loads(l) for l in open(sys.argv[1])]
log = open(sys.argv[2]).read()
modes = sys.argv[3:]
by_mode = {}
for e in episodes:
    by_mode.setdefault(modes[e["data_index"]], []).append(e)
assert len(episodes) == 10, len(episodes)
want = {"raise": "ValueError: the agent gave up on purpose", "hang": "timeout_seconds", "garbage": "run() returned str",
        "exit": "exited with status 3", "unknown_id": "404"}
for mode, text in want.items():
    [e] = by_mode[mode]
    assert e["status"] == "error" and text in e["error"], (mode, e.get("error"))
for e in by_mode["ok"]:
    assert e["status"] == "ok" and e["result"]["reward"] == 0.5, e
    assert e["session"]["rows"][0]["reward"] == 0.5
assert "Traceback" in log and "the agent gave up on purpose" in log, "the traceback is in the log"
assert "[worker" in log and " ok" in log, "the agent's own stdout is in the log"
print("3. raise / hang / garbage / exit / unknown id failed only their episodes; 5 ok episodes around them")
PY

# 3b. A worker that died while idle is replaced for the next episode (the host
# once died of SIGPIPE writing to it), and a worker that exits leaving a child
# behind fails its episode at once (its logger once waited on the child) and
# takes the child with it. One worker, so each episode meets the last one's.
modes="ok close_requests ok exit_with_child ok"
start=$(date +%s)
ALLOW_FAILED=1 rollout_only idle "{plugin: agent_pool, agent: \"pool_test_agents:FlakyAgent\", python_path: [\"$src/tests/fixtures/agents\"], workers: 1, timeout_seconds: 60, interpreter: $py}" \
  "$(for m in $modes; do echo "{\"mode\": \"$m\"}"; done)" "concurrency: 1, openai: {mode: subproc}"
took=$(( $(date +%s) - start ))
$py - "$work/runs/idle/t/rollouts.jsonl" $modes <<'PY'
import json, sys
episodes = [json.loads(l) for l in open(sys.argv[1])]
modes = sys.argv[2:]
assert len(episodes) == 5, len(episodes)
for e in episodes:
    mode = modes[e["data_index"]]
    if mode == "exit_with_child":
        assert e["status"] == "error" and "exited with status 3" in e["error"], e.get("error")
    else:
        assert e["status"] == "ok" and e["result"]["reward"] == 0.5, (mode, e.get("error"))
print("3b. a worker dead while idle was replaced; one that left a child behind failed only its episode")
PY
[ "$took" -lt 50 ] || { echo "FAIL: the run took ${took}s: an episode waited on a leftover child"; exit 1; }
if pgrep -f "^sleep 3600$" > /dev/null; then echo "FAIL: the agent's child outlived its worker"; pkill -f "^sleep 3600$"; exit 1; fi

# 4. Node.js.
rollout node "$src/tests/fixtures/agents/pool_test_agent.mjs" "$(for i in 0 1 2 3; do echo "{\"i\": $i}"; done)" "timeout_seconds: 60"
$py - "$work/runs/node/t/rollouts.jsonl" <<'PY'
import json, sys
episodes = [json.loads(l) for l in open(sys.argv[1])]
assert len(episodes) == 4 and all(e["status"] == "ok" for e in episodes), [e.get("error") for e in episodes]
assert all([r["reward"] for r in e["session"]["rows"]] == [1.0] for e in episodes)
print("4. the Node.js worker ran 4 episodes")
PY
# 4b. A Node worker that exits leaving a child (detached: out of its process
# group) fails its episode at once: the child inherited no pipe of the host's.
start=$(date +%s)
ALLOW_FAILED=1 rollout_only nodechild "{plugin: agent_pool, agent: \"$src/tests/fixtures/agents/pool_test_agent.mjs\", workers: 1, timeout_seconds: 40}" \
  "$(printf '%s\n' '{"mode": "exit_with_child", "i": 0}' '{"i": 1}')" "concurrency: 1, openai: {mode: subproc}"
took=$(( $(date +%s) - start ))
pkill -f "^sleep 3600$" || true
$py - "$work/runs/nodechild/t/rollouts.jsonl" <<'PY'
import json, sys
episodes = {json.loads(l)["data_index"]: json.loads(l) for l in open(sys.argv[1])}
assert episodes[0]["status"] == "error" and "exited with status 3" in episodes[0]["error"], episodes[0].get("error")
assert episodes[1]["status"] == "ok", episodes[1].get("error")
print("4b. a Node worker that left a detached child behind was reported at once")
PY
[ "$took" -lt 30 ] || { echo "FAIL: ${took}s: the host waited on a pipe the agent's child inherited"; exit 1; }
echo "agent_pool e2e: 4 passed, 0 failed"
