#!/usr/bin/env bash
# The quickstart learning through real vLLM on CPU (issue #28):
# configs/quickstart_vllm.yaml with inference.launcher=stock, vLLM (from
# .venv-vllm) serving the format-warmed model, weights reloaded from the
# trainer's folder after every step (/collective_rpc reload_weights, then
# /reset_prefix_cache). The model is the quickstart's tiny one in the shape
# vLLM's CPU attention takes (init-model --preset tiny-hd32: 32-wide heads,
# untied embeddings). Checks the quickstart's promises
# (tests/support/check_quickstart_run.py): every step, staleness <= 2 with
# asynchrony, the reward improving - which needs vLLM to serve the trained
# weights.
# The base is the quickstart's (--initializer-range 0.1): on HF's 0.02 a run
# sometimes stays near chance for 150 steps (CI, 2026-11-26: best 20-step
# window 0.122). 100 steps by default, at 0.9 s a step through vLLM: on this
# base the reward leaves chance by step 80 (20-step windows of a 150-step
# run: 0.10 0.11 0.12 0.44 0.82 0.92 0.94 0.98), and the check's window after
# step 80 is then steps 81-100; more would only cost CI time.
#   real_vllm_quickstart.sh AREAL_HOST SOURCE_DIR WORK [STEPS]
set -euo pipefail
host=$1 src=$(cd "$2" && pwd) work=$3 steps=${4:-100}
source "$src/tests/support/trainer_runs.sh"
source "$src/tests/support/real_vllm.sh"
require_agent_modules "$src"
rm -rf "$work" && mkdir -p "$work"
"$host" init-model --family qwen3 --preset tiny-hd32 --tokenizer bytes --out "$work/model" --seed 1 --initializer-range 0.1 >/dev/null 2>&1
format_warmup "$src" "$work"
trap stop_real_vllm EXIT
start_real_vllm "$src" "$work/model" "$work/vllm.log"
start=$SECONDS
"$host" run --config "$src/configs/quickstart_vllm.yaml" experiment.output_dir="$work/runs" train.model_path="$work/model" \
  gateway.tokenizer="$work/model" "inference.servers=[\"$VLLM_URL\"]" inference.launcher=stock experiment.trial=t experiment.seed=7 \
  trainer.total_steps=$steps evaluation.every_steps=0 2> "$work/run.log" || { tail -30 "$work/run.log"; exit 1; }
echo "$steps steps through real vLLM in $((SECONDS - start)) s"
reloads=$(grep -c 'POST /collective_rpc HTTP/1.1" 200' "$work/vllm.log" || true)
echo "vLLM answered $reloads reloads (/collective_rpc)"
[ "$reloads" -ge "$steps" ] || { echo "FAIL: $reloads weight reloads for $steps steps"; exit 1; }
/usr/bin/python3 "$src/tests/support/check_quickstart_run.py" "$work/runs/quickstart/t" "$steps"
echo OK
