#!/usr/bin/env bash
# The dashboard (issue #15) in a real headless Chromium: during a short
# quickstart run (format stage, then RL with evaluations every 20 steps) the
# page served by `areal-host run` must show curves that match the run's
# metrics.jsonl as it grows; afterwards `areal-host dashboard RUN_DIR` must
# show the whole run (every step, the evaluations, the latest sessions as
# text), with no request leaving the dashboard. Screenshots in WORK.
#   dashboard.sh AREAL_HOST SOURCE_DIR WORK
set -euo pipefail
host=$1 src=$(cd "$2" && pwd) work=$3
source "$src/tests/support/trainer_runs.sh"
require_agent_modules "$src"
[ -x /usr/bin/chromium ] || { echo "FAIL: /usr/bin/chromium is missing: run scripts/setup.sh (Debian package chromium)"; exit 1; }
[ -d "$src/tests/dashboard/node_modules/playwright-core" ] || { echo "FAIL: tests/dashboard/node_modules is missing: run scripts/setup.sh"; exit 1; }
check="$src/tests/dashboard/check_dashboard.mjs"
fresh_model_workdir "$work" 1
format_warmup "$src" "$work"
run="$work/runs/quickstart/t"
"$host" run --config "$src/configs/quickstart.yaml" experiment.output_dir="$work/runs" inference.model_path="$work/model" \
  train.model_path="$work/model" gateway.tokenizer="$work/model" experiment.trial=t trainer.total_steps=60 \
  evaluation.every_steps=20 2> "$work/run.log" &
pid=$!
trap 'kill $pid $board 2>/dev/null || true' EXIT
board=
for _ in $(seq 300); do grep -q "dashboard at http" "$work/run.log" && break; kill -0 $pid || { tail -20 "$work/run.log"; exit 1; }; sleep 0.1; done
url=$(grep -o "dashboard at http://[0-9.:]*" "$work/run.log" | awk '{print $3}')
echo "live dashboard at $url"
node "$check" "$url" "$run" "$work/live.png" --live 10
wait $pid || { tail -30 "$work/run.log"; exit 1; }
grep -o "done: .*" "$work/run.log"
# Afterwards, from the run directory alone.
"$host" dashboard "$run" --port 0 > "$work/board.log" 2>&1 &
board=$!
for _ in $(seq 100); do grep -q "at http" "$work/board.log" && break; sleep 0.1; done
url=$(grep -o "at http://[0-9.:]*" "$work/board.log" | awk '{print $2}')
node "$check" "$url" "$run" "$work/dashboard.png"
# A directory that is not a run is refused with a clear message.
if "$host" dashboard "$work" > "$work/bad.log" 2>&1; then echo "FAIL: a directory without metrics.jsonl was served"; exit 1; fi
grep -q "has no metrics.jsonl: name a run directory" "$work/bad.log" || { cat "$work/bad.log"; exit 1; }
echo OK
