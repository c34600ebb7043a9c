#!/usr/bin/env bash
# The quickstart as scripts/quickstart.sh runs it, seeded: a model made by
# init-model, the format stage (areal-host sft), then configs/quickstart.yaml
# with the real example agent (npm `openai`) in online mode. Checks what
# issues #6 and #15 promise:
#   - the task is mastered: the last 50 steps' mean reward and the greedy
#     evaluation of the final weights on held-out phrasings are >= 0.9,
#   - no trained sample is staler than max_head_offpolicyness (2), from the
#     per-sample versions recorded in metrics.jsonl, and asynchrony happened,
#   - resuming from a checkpoint continues the curve (steps once each, same
#     staleness bound, reward stays at the trained level, not the initial one),
#   - the final model is served again by `areal-host serve --model`.
set -euo pipefail
host=$1 src=$2 work=$3
source "$src/tests/support/trainer_runs.sh"
require_agent_modules "$src"
fresh_model_workdir "$work" 1 --initializer-range 0.1  # the base scripts/quickstart.sh makes
format_warmup "$src" "$work"
common=(experiment.trial=t experiment.seed=7 trainer.checkpoint_every=50)
# The first 250 of the shipped 350 steps (its learning rate is constant, so
# they are the shipped run's first 250): the reward is usually past 0.9 by
# about step 100 (20-step windows of a 120-step run, seed 7: 0.12 0.16 0.70
# 0.94 0.97 0.98), but asynchrony makes runs differ: one clean-clone run
# learnt later (evaluation 0.78 at step 100, 0.72 at 150, 1.0 at 200) and its
# steps 151-200 averaged 0.896. The last 50 steps are therefore 201-250.
run_config "$src/configs/quickstart.yaml" "$work" "$work/first.log" "${common[@]}" trainer.total_steps=200
run="$work/runs/quickstart/t"
test -f "$run/checkpoints/step_200/host_state.json"
# Resume from step 200 and continue to 250.
run_config "$src/configs/quickstart.yaml" "$work" "$work/second.log" "${common[@]}" trainer.total_steps=250 trainer.resume=true
grep -q "resumed from .*step_200 at step 200 (version 200)" "$work/second.log"
grep -o "done: .*" "$work/second.log"
test -s "$run/reward_curve.svg"
/usr/bin/python3 "$src/tests/support/check_quickstart_run.py" "$run" 250 --resume-at 200 --masters
# The final model is an HF folder the local engine serves again.
test -f "$run/final/config.json" && test -f "$run/final/model.safetensors" && test -f "$run/final/tokenizer.json"
"$host" serve --model "$run/final" --port 0 "gateway.state_dir=$work/serve-state" > "$work/serve.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 100); do grep -q "gateway listening at" "$work/serve.log" && break; sleep 0.1; done
url=$(grep -o "gateway listening at http://[0-9.:]*" "$work/serve.log" | awk '{print $4}')
key=$(curl -sf -X POST "$url/rl/start_session" -H "Authorization: Bearer areal-admin-key" -H "Content-Type: application/json" -d '{"task_id":"probe"}' | /usr/bin/python3 -c "import json,sys; print(json.load(sys.stdin)['api_key'])")
reply=$(curl -sf "$url/v1/chat/completions" -H "Authorization: Bearer $key" -H "Content-Type: application/json" \
  -d '{"model":"default","messages":[{"role":"user","content":"Which digit comes after 4?"}],"max_tokens":4,"temperature":0}')
/usr/bin/python3 -c "import json,sys; r=json.loads(sys.argv[1]); print('served final model answers:', repr(r['choices'][0]['message']['content']))" "$reply"
echo OK
