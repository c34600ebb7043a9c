#!/usr/bin/env bash
# The seeds' Python frameworks trained through areal (issue #28, point 4): the openai package
# (sync and async), the OpenAI Agents SDK (a function tool, two turns), LangChain
# (langchain-openai, a tool bound) and CAMEL-AI (a ChatAgent), each 2 GRPO steps in inline mode
# (python_inline, in process) and in subproc mode (agent_pool worker processes), all from the
# pinned .venv-tests. Every call each framework made is in its episode's export, with token ids
# (framework_agents.py rewards call k of n with k, by the id the framework got back).
#   python_frameworks.sh AREAL_HOST SOURCE_DIR WORK_DIR
set -euo pipefail
host=$1 src=$(cd "$2" && pwd) work=$3
source "$src/tests/support/trainer_runs.sh"
venv_python="$src/.venv-tests/bin/python"
[ -x "$venv_python" ] || { echo ".venv-tests is missing: run scripts/test.sh (AREAL_TEST_PYTHON=1 scripts/setup.sh makes it)" >&2; exit 1; }
fresh_model_workdir "$work" 11
frameworks="openai_sync openai_async openai_agents langchain camel"
for f in $frameworks; do echo "{\"framework\": \"$f\"}"; done > "$work/frameworks.jsonl"

train() {  # train MODE WORKFLOW
  cat > "$work/$1.yaml" <<YAML
experiment: {name: frameworks-$1, trial: t, output_dir: $work/runs}
inference: {plugin: local, model_path: $work/model}
gateway: {plugin: gateway, port: 0, tokenizer: $work/model, default_max_tokens: 8}
workflow: $2
train: {plugin: fsdp, model_path: $work/model, lr: 0.002}
algorithm: {plugin: grpo}
rollout: {dataset: $work/frameworks.jsonl, n_samples: 2, openai: {mode: $1, turn_discount: 0}}  # rows carry their own reward
trainer: {total_steps: 2, batch_size: 5}
YAML
  "$host" run --config "$work/$1.yaml" 2> "$work/$1.log" || { tail -40 "$work/$1.log"; exit 1; }
  /usr/bin/python3 - "$work/runs/frameworks-$1/t" "$1" $frameworks <<'PY'
import json, sys
run, mode, frameworks = sys.argv[1], sys.argv[2], sys.argv[3:]
episodes = [json.loads(l) for l in open(f"{run}/rollouts.jsonl")]
seen = {}
for e in episodes:
    assert e["status"] == "ok", (e.get("data"), e.get("error"))
    rows = e["session"]["rows"]
    # Rewards 1..n land on n rows, one each: exactly the calls the framework made, each recorded.
    assert sorted(r["reward"] for r in rows) == [float(k) for k in range(1, len(rows) + 1)], [r["reward"] for r in rows]
    for r in rows:
        assert len(r["input_ids"]) == len(r["loss_mask"]) == len(r["logprobs"]) == len(r["versions"]) and sum(r["loss_mask"]) > 0, r
    f = frameworks[e["data_index"]]
    seen.setdefault(f, []).append(len(rows))
assert sorted(seen) == sorted(frameworks), seen
assert all(min(n) >= 2 for n in seen.values()), seen  # two turns each
metrics = [json.loads(l) for l in open(f"{run}/metrics.jsonl")]
assert [m["step"] for m in metrics] == [1, 2], metrics
print(f"{mode}: 2 steps trained; calls per episode {seen}")
PY
}
train inline "{plugin: python_inline, agent: \"framework_agents:FrameworkAgent\", python_path: [\"$src/tests/fixtures/agents\"], interpreter: \"$venv_python\", timeout_seconds: 120}"
train subproc "{plugin: agent_pool, agent: \"framework_agents:FrameworkAgent\", python_path: [\"$src/tests/fixtures/agents\"], interpreter: \"$venv_python\", workers: 2, timeout_seconds: 120}"
echo "python frameworks: 2 passed, 0 failed"
