#!/usr/bin/env bash
# The `evaluation` section (issue #15): a command run beside training every
# N steps and on the final weights, told what to do through AREAL_EVAL_*,
# answering through the gateway with the admin key; its result line becomes
# {"eval": true} rows of metrics.jsonl and areal_eval_* gauges on /metrics.
# A failing, silent or hanging command never stops training: its row says
# eval_failed and why, and a failed final evaluation makes the run exit 1.
#   evaluation.sh AREAL_HOST SOURCE_DIR WORK
set -euo pipefail
host=$1 src=$(cd "$2" && pwd) work=$3
rm -rf "$work" && mkdir -p "$work/probe"
"$host" init-model --family qwen3 --preset tiny --tokenizer bytes --out "$work/model" --seed 2 >/dev/null
/usr/bin/python3 - "$work" <<'PY'
import json, sys
work = sys.argv[1]
with open(f"{work}/data.jsonl", "w") as f:
    for d in range(10):
        prompt = [257] + list(f"user\nSay {d}".encode()) + [258, 10, 257] + list(b"assistant\n")
        f.write(json.dumps({"input_ids": prompt, "target_ids": [48 + d, 258]}) + "\n")
with open(f"{work}/eval.jsonl", "w") as f:
    for d in range(3):
        f.write(json.dumps({"prompt": f"Say {d}", "digit": d}) + "\n")
PY
cat > "$work/cfg.yaml" <<YAML
experiment: {name: ev, seed: 3, output_dir: runs}
inference: {plugin: local, model_path: model}
gateway: {plugin: gateway, port: 0, tokenizer: model}
workflow: {plugin: token_match, temperature: 1.0}
train: {plugin: fsdp, model_path: model, lr: 0.003}
algorithm: {plugin: grpo}
rollout: {dataset: data.jsonl, n_samples: 4, max_head_offpolicyness: 1}
trainer: {total_steps: 12, batch_size: 4}
evaluation: {agent_command: "/usr/bin/python3 $src/tests/integration/eval_probe.py ok $work/probe", dataset: eval.jsonl,
             every_steps: 4, n_samples: 2}
YAML
"$host" run --config "$work/cfg.yaml" experiment.trial=ok 2> "$work/ok.log" || { tail -30 "$work/ok.log"; exit 1; }
grep -o "done: .*" "$work/ok.log"
grep -q "| evaluation [0-9.]* (greedy, final weights) |" "$work/ok.log"
/usr/bin/python3 - "$work" <<'PY'
import json, sys
work = sys.argv[1]
rows = [json.loads(l) for l in open(f"{work}/runs/ev/ok/metrics.jsonl")]
steps = [r["step"] for r in rows if not r.get("eval")]
evals = [r for r in rows if r.get("eval")]
assert steps == list(range(1, 13)), steps
# Every 4 steps; each result lands after its step's row; a busy evaluator may skip one, never the final.
assert [e["step"] for e in evals][-1] == 12 and set(e["step"] for e in evals) <= {4, 8, 12}, [e["step"] for e in evals]
assert len(evals) >= 2, evals
for e in evals:
    assert not e["eval_failed"], e
    assert e["eval_answers"] == 6 and 0 <= e["eval_reward_mean"] <= 1, e   # 3 items x n_samples 2
    assert "eval_note" not in e, "a string became a metric"
    assert e["policy_version"] == e["step"] and e["policy_version_end"] >= e["policy_version"], e
    log = open(e["eval_log"]).read()
    assert f"AREAL_EVAL_GREEDY=1 AREAL_EVAL_TEMPERATURE=0 AREAL_EVAL_N_SAMPLES=2 AREAL_EVAL_STEP={e['step']}" in log, log
    assert f"AREAL_EVAL_DATASET={work}/eval.jsonl" in log, log
    assert "/v1" in log
# The gauges of an earlier evaluation are on the gateway's /metrics when a later one runs.
later = [e["step"] for e in evals][1]
text = open(f"{work}/probe/metrics_at_step_{later}.txt").read()
assert "areal_eval_reward_mean " in text and "areal_trainer_step " in text, text[:400]
assert 'areal_evaluations_total{status="ok"}' in text, text[:400]
print("evaluation rows:", [(e["step"], e["eval_reward_mean"]) for e in evals])
PY
# Failures: training completes, rows say why, a failed final evaluation exits 1.
check_failed() {  # TRIAL MODE EXTRA_KEY MESSAGE
  if "$host" run --config "$work/cfg.yaml" experiment.trial=$1 trainer.total_steps=4 \
      "evaluation.agent_command=/usr/bin/python3 $src/tests/integration/eval_probe.py $2 $work/probe" $3 2> "$work/$1.log"; then
    echo "FAIL ($1): a failed final evaluation exited 0"; exit 1
  fi
  grep -q "training finished, but the final evaluation failed" "$work/$1.log" || { tail -20 "$work/$1.log"; exit 1; }
  test -f "$work/runs/ev/$1/final/model.safetensors"
  /usr/bin/python3 - "$work/runs/ev/$1/metrics.jsonl" "$4" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert [r["step"] for r in rows if not r.get("eval")] == [1, 2, 3, 4]
final = [r for r in rows if r.get("eval")][-1]
assert final["eval_failed"] and sys.argv[2] in final["eval_error"], final
print(sys.argv[1].split("/")[-2], "->", final["eval_error"].splitlines()[0])
PY
}
check_failed fail fail evaluation.every_steps=0 "exited with status 3"
check_failed noresult noresult evaluation.every_steps=2 "no JSON object line"
check_failed sleep sleep evaluation.timeout_seconds=2 "ran past evaluation.timeout_seconds"
echo OK
