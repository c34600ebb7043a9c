#!/usr/bin/env bash
# Issue #34: LoRA training hands the engine the adapter alone after every
# step (trainer.weight_update auto -> adapter), and the engine serves it as
# the policy without token drift. The quickstart's agent and model, 12 GRPO
# steps at lr 0.01 with rollouts never stale (max_head_offpolicyness 0) and
# the trainer recomputing every batch, stopped after 6 steps and resumed:
#   - every step's hand-off is the adapter: its bytes are the adapter's
#     tensors (read from the saved adapter's safetensors header), not the model's;
#   - on every step the engine's log-probs equal the trainer's recompute
#     within 1e-5 (logprob_drift_max over logprob_drift_tokens > 0 tokens);
#   - and that says something: the trained adapter moves the model's
#     log-probs by more than 1e-3 on the run's own rollouts (so an engine
#     serving the base instead would have drifted).
#   lora_adapter_handoff.sh AREAL_HOST SCORE_BIN SOURCE_DIR WORK
set -euo pipefail
host=$(realpath "$1") score=$(realpath "$2") src=$(cd "$3" && pwd) work=$4
rm -rf "$work" && mkdir -p "$work"
[ -d "$src/examples/quickstart_agent/node_modules" ] || { echo "FAIL: examples/quickstart_agent/node_modules is missing: run scripts/setup.sh"; exit 1; }
cd "$src/configs"
"$host" init-model --family qwen3 --preset tiny --tokenizer bytes --out "$work/model" --seed 1 2> /dev/null
"$host" sft --config quickstart_format.yaml "train.model_path=$work/model" "experiment.output_dir=$work/runs" 2> "$work/sft.log"
base=$work/runs/quickstart_format/trial0/final
args=("experiment.output_dir=$work/runs" "inference.model_path=$base" "gateway.tokenizer=$base" "train.model_path=$base"
      train.lr=0.01 'train.lora={"rank": 8, "alpha": 16}' evaluation.every_steps=0 rollout.max_head_offpolicyness=0
      trainer.recompute_logprob=true trainer.checkpoint_every=6)
# 6 steps, then a resumed run to 12: the engine must get the checkpoint's
# adapter on its untouched base (the merged checkpoint as its base would
# count the adapter twice, and drift).
"$host" run --config quickstart.yaml "${args[@]}" trainer.total_steps=6 2> "$work/run.log" || { tail -30 "$work/run.log"; exit 1; }
"$host" run --config quickstart.yaml "${args[@]}" trainer.total_steps=12 trainer.resume=true 2> "$work/resume.log" \
  || { tail -30 "$work/resume.log"; exit 1; }
grep -q "resumed from" "$work/resume.log" || { echo "FAIL: the second run did not resume"; exit 1; }
run=$work/runs/quickstart/trial0
# The rollouts' sequences, for scoring with and without the trained adapter.
/usr/bin/python3 - "$run/rollouts.jsonl" "$work/in.json" <<'PY'
import json, sys
rows = [r for line in open(sys.argv[1]) for r in json.loads(line)["rows"]]
json.dump({"sequences": [r["input_ids"] for r in rows[-32:]]}, open(sys.argv[2], "w"))
PY
"$score" "$base" "$work/in.json" "$work/base.json"
"$score" --lora "$run/final/adapter" "$base" "$work/in.json" "$work/adapter.json"
/usr/bin/python3 - "$run" "$work" <<'PY'
import json, struct, sys
run, work = sys.argv[1:3]
rows = [json.loads(l) for l in open(f"{run}/metrics.jsonl") if '"eval"' not in l]
with open(f"{run}/final/adapter/adapter_model.safetensors", "rb") as f:
    header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
adapter_bytes = sum(4 * v["shape"][0] * v["shape"][1] for k, v in header.items() if k != "__metadata__")
failed = 0
def check(ok, what):
    global failed
    failed += not ok
    print(("ok " if ok else "FAIL ") + what)
check(len(rows) == 12, f"{len(rows)} steps trained")
check(all(r["weight_update"] == "adapter" for r in rows), "every hand-off was the adapter: " + str(sorted({r["weight_update"] for r in rows})))
check(all(r["weight_update_bytes"] == adapter_bytes for r in rows),
      f"each hand-off moved the adapter's {adapter_bytes} bytes: {sorted({r['weight_update_bytes'] for r in rows})}")
drift = max(r["logprob_drift_max"] for r in rows)
check(all(r["logprob_drift_tokens"] > 0 for r in rows) and drift <= 1e-5,
      f"engine vs trainer log-probs on {sum(r['logprob_drift_tokens'] for r in rows)} fresh tokens: max difference {drift:.3g} (bound 1e-5)")
base = json.load(open(f"{work}/base.json"))["logprobs"]
adapted = json.load(open(f"{work}/adapter.json"))["logprobs"]
moved = max(abs(a - b) for x, y in zip(base, adapted) for a, b in zip(x, y))
check(moved > 1e-3, f"the trained adapter moves the rollouts' log-probs by up to {moved:.3g} (an engine serving the base would have drifted)")
print(f"hand-off: {adapter_bytes} bytes in {1000 * sum(r['seconds_weight_update'] for r in rows) / len(rows):.2f} ms a step on average")
sys.exit(1 if failed else 0)
PY
