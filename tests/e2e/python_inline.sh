#!/usr/bin/env bash
# The python_inline workflow (rollout.openai.mode inline, the seeds' default):
#  1. configs/python_agent_inline.yaml (the seeds' multi-turn math agent) trains 2 steps;
#  2. the injected http_client is an httpx.AsyncClient, episodes overlap on the one
#     event loop, and {completion_id: reward} results land on those calls;
#  3. an agent that raises, hangs past timeout_seconds, returns garbage or names
#     an unknown call fails only its episode, with a clear message and traceback.
set -euo pipefail
host=$1 src=$2 work=$3
source "$src/tests/support/trainer_runs.sh"
fresh_model_workdir "$work" 12
py=/usr/bin/python3

run_config "$src/configs/python_agent_inline.yaml" "$work" "$work/train.log" trainer.total_steps=2
$py - "$work/runs/python-inline/trial0" <<'PY'
import json, sys
run = sys.argv[1]
episodes = [json.loads(l) for l in open(f"{run}/rollouts.jsonl")]
assert len(episodes) >= 2 * 2 * 4, len(episodes)
for e in episodes:
    assert e["status"] == "ok", e.get("error")
    assert 1 <= len(e["session"]["rows"]) <= 3
metrics = [json.loads(l) for l in open(f"{run}/metrics.jsonl")]
assert [m["step"] for m in metrics] == [1, 2], metrics
print(f"1. trained 2 steps on {len(episodes)} multi-turn episodes run in process")
PY

rollout() {  # rollout NAME AGENT DATA_JSONL EXTRA_WORKFLOW_KEYS (tests/support/trainer_runs.sh)
  rollout_only "$1" "{plugin: python_inline, agent: \"$2\", python_path: [\"$src/tests/fixtures/agents\"], $4}" "$3" "concurrency: 4"
}

rollout httpx pool_test_agents:HttpxAgent "$(for i in 0 1 2 3 4 5 6 7; do echo "{\"i\": $i}"; done)" "timeout_seconds: 60"
$py - "$work/runs/httpx/t/rollouts.jsonl" <<'PY'
import json, sys
episodes = [json.loads(l) for l in open(sys.argv[1])]
assert len(episodes) == 8 and all(e["status"] == "ok" for e in episodes), [e.get("error") for e in episodes]
rewards = [r["reward"] for e in episodes for r in e["session"]["rows"]]
assert len(rewards) == 8 and max(rewards) >= 2, rewards
print(f"2. httpx.AsyncClient injected, up to {max(rewards):g} episodes at once on one loop, dict rewards on their calls")
PY

modes="ok raise ok hang garbage unknown_id ok ok"
ALLOW_FAILED=1 rollout flaky pool_test_agents:AsyncFlakyAgent "$(for m in $modes; do echo "{\"mode\": \"$m\"}"; done)" "timeout_seconds: 3"
$py - "$work/runs/flaky/t/rollouts.jsonl" "$work/flaky.log" $modes <<'PY'
import json, sys
episodes = [json.loads(l) for l in open(sys.argv[1])]
log = open(sys.argv[2]).read()
modes = sys.argv[3:]
assert len(episodes) == len(modes), len(episodes)
want = {"raise": "ValueError: the agent gave up on purpose", "hang": "timeout_seconds", "garbage": "run() returned str",
        "unknown_id": "404"}
for e in episodes:
    mode = modes[e["data_index"]]
    if mode == "ok":
        assert e["status"] == "ok" and e["result"]["reward"] == 0.5, e
    else:
        assert e["status"] == "error" and want[mode] in e["error"], (mode, e.get("error"))
assert "Traceback" in log and "the agent gave up on purpose" in log
print("3. raise / hang / garbage / unknown id failed only their episodes; the ok ones around them passed")
PY

# 3b. Sync runs that hang past timeout_seconds (threads that cannot be stopped)
# hold nothing the later episodes need: more of them than the loop's default
# executor has threads, then sync episodes that must still run.
modes="hang hang hang hang hang hang hang hang ok ok ok ok"
ALLOW_FAILED=1 rollout synchang pool_test_agents:SyncInlineAgent "$(for m in $modes; do echo "{\"mode\": \"$m\"}"; done)" "timeout_seconds: 2"
$py - "$work/runs/synchang/t/rollouts.jsonl" $modes <<'PY'
import json, sys
episodes = [json.loads(l) for l in open(sys.argv[1])]
modes = sys.argv[2:]
assert len(episodes) == len(modes), len(episodes)
for e in episodes:
    mode = modes[e["data_index"]]
    if mode == "ok":
        assert e["status"] == "ok" and e["result"]["reward"] == 0.5, e.get("error")
    else:
        assert e["status"] == "error" and "timeout_seconds" in e["error"], e.get("error")
print("3b. eight hung sync runs, then four sync episodes that ran")
PY
# 4. workflow.interpreter names a virtual environment: its site-packages import.
$py -m venv --without-pip "$work/venv"
site=$(ls -d "$work"/venv/lib/python3*/site-packages)
printf 'MARK = "from-the-venv"\n' > "$site/only_in_the_venv.py"
cat > "$site/venv_agent.py" <<'PY'
import asyncio, sys
import only_in_the_venv
from pool_test_agents import chat
class Agent:
    async def run(self, data, **kw):
        await asyncio.to_thread(chat, kw["base_url"], kw["api_key"], only_in_the_venv.MARK)
        return 1.0 if sys.prefix.endswith("/venv") else 0.0
PY
rollout venv venv_agent:Agent "$(for i in 0 1; do echo "{\"i\": $i}"; done)" "interpreter: $work/venv/bin/python"
$py - "$work/runs/venv/t/rollouts.jsonl" <<'PY'
import json, sys
episodes = [json.loads(l) for l in open(sys.argv[1])]
assert len(episodes) == 2 and all(e["status"] == "ok" and e["result"]["reward"] == 1.0 for e in episodes), episodes
print("4. interpreter: a venv's python; a package only in its site-packages imported, sys.prefix is the venv")
PY
echo "python_inline e2e: 4 passed, 0 failed"
