#!/usr/bin/env bash
# configs/subproc_agent.yaml, shortened: the subproc workflow runs the
# example agent (node + npm `openai`) once per episode against its own
# gateway session. Checks each episode's session holds the agent's call,
# the reward the agent printed is the one trained, and training ran.
set -euo pipefail
host=$1 src=$2 work=$3
source "$src/tests/support/trainer_runs.sh"
require_agent_modules "$src"
fresh_model_workdir "$work" 5
run_config "$src/configs/subproc_agent.yaml" "$work" "$work/log" trainer.total_steps=2
/usr/bin/python3 - "$work/runs/subproc/trial0" <<'PY'
import json, sys
run = sys.argv[1]
episodes = [json.loads(l) for l in open(f"{run}/rollouts.jsonl")]
assert len(episodes) >= 2 * 2 * 8, len(episodes)
for e in episodes:
    assert e["status"] == "ok", e.get("error")
    rows = e["session"]["rows"]
    assert len(rows) == 1, f"the agent makes one call per episode, got {len(rows)}"
    assert e["result"]["reward"] in (0, 0.5, 1.0) and rows[0]["reward"] == e["result"]["reward"]
    prompt = bytes(t for t, m in zip(rows[0]["input_ids"], rows[0]["loss_mask"]) if not m and t < 256).decode()
    assert "Which digit comes after" in prompt, prompt
metrics = [json.loads(l) for l in open(f"{run}/metrics.jsonl")]
assert [m["step"] for m in metrics] == [1, 2] and all(m["rows"] == 16 for m in metrics)
print(f"{len(episodes)} agent processes, one session each, rewards as printed")
PY
echo OK
