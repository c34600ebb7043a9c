#!/usr/bin/env bash
# Issue #33's bitwise mode through the whole run: the quickstart's agent,
# gateway, recorder and GRPO trainer, 4 steps with rollouts never stale and
# the trainer recomputing every batch, inference.batch_invariant and
# train.batch_invariant on. On every step the engine's recorded log-probs of
# the fresh tokens equal the trainer's recomputation exactly
# (logprob_drift_max 0 over logprob_drift_tokens > 0), with the trainer's
# prefix trees and micro-batches and the engine's prefix cache in play. The
# same run without the mode drifts by float rounding (> 0), so the check
# can tell the two apart.
#   batch_invariant_run.sh AREAL_HOST SOURCE_DIR WORK
set -euo pipefail
host=$(realpath "$1") src=$(cd "$2" && pwd) work=$3
rm -rf "$work" && mkdir -p "$work"
[ -d "$src/examples/quickstart_agent/node_modules" ] || { echo "FAIL: examples/quickstart_agent/node_modules is missing: run scripts/setup.sh"; exit 1; }
cd "$src/configs"
"$host" init-model --family qwen3 --preset tiny --tokenizer bytes --out "$work/model" --seed 1 --initializer-range 0.1 2> /dev/null
args=("inference.model_path=$work/model" "gateway.tokenizer=$work/model" "train.model_path=$work/model" evaluation.every_steps=0
      rollout.max_head_offpolicyness=0 trainer.recompute_logprob=true trainer.total_steps=4)
# OpenBLAS's FMA kernels compute a row by where it sits, which the mode refuses (docs/gpu.md).
OPENBLAS_CORETYPE=Nehalem "$host" run --config quickstart.yaml "${args[@]}" "experiment.output_dir=$work/invariant" inference.batch_invariant=true train.batch_invariant=true \
  2> "$work/invariant.log" || { tail -30 "$work/invariant.log"; exit 1; }
"$host" run --config quickstart.yaml "${args[@]}" "experiment.output_dir=$work/default" 2> "$work/default.log" || { tail -30 "$work/default.log"; exit 1; }
/usr/bin/python3 - "$work/invariant/quickstart/trial0" "$work/default/quickstart/trial0" <<'PY'
import json, sys
def steps(run): return [json.loads(l) for l in open(f"{run}/metrics.jsonl") if '"eval"' not in l]
inv, default = steps(sys.argv[1]), steps(sys.argv[2])
failed = 0
def check(ok, what):
    global failed
    failed += not ok
    print(("ok " if ok else "FAIL ") + what)
check(len(inv) == 4 and len(default) == 4, f"{len(inv)} and {len(default)} steps trained")
tokens = sum(r["logprob_drift_tokens"] for r in inv)
check(all(r["logprob_drift_tokens"] > 0 for r in inv) and all(r["logprob_drift_max"] == 0 for r in inv),
      f"batch_invariant: engine vs trainer log-probs on {tokens} fresh tokens, max difference per step {[r['logprob_drift_max'] for r in inv]} (must be 0)")
check(max(r["logprob_drift_max"] for r in default) > 0,
      f"default mode: max difference per step {[r['logprob_drift_max'] for r in default]} (float rounding: the check can see a difference)")
sys.exit(1 if failed else 0)
PY
