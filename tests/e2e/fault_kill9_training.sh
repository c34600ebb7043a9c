#!/usr/bin/env bash
# Fault test (issue #17): `kill -9` of an online training run (the
# quickstart: gateway, trainer and the real example agent in one process
# group) mid-training, then trainer.resume=true on the same run dir.
# fault_kill9_training.py then checks, and counts what was lost:
#   - every session the gateway held at the kill (ended, or handed to the
#     trainer in a step after the last checkpoint) with a call that answered
#     is trained after the resume or dropped on the record: as stale, or as
#     sampled after the checkpoint by weights the resumed run never had;
#   - no session is trained twice (sessions are told apart by their calls'
#     ids: a restarted agent may reuse task ids, and with them session
#     ids); steps run once each, in order, with
#     policy versions continuing from the checkpoint;
#   - no trained sample is staler than max_head_offpolicyness.
# Sessions whose agent died with the run stay open after the restart (an
# external agent would continue them); a 10 s idle timeout ends them here so
# that they are trained too.
#   fault_kill9_training.sh AREAL_HOST SOURCE_DIR WORK
set -euo pipefail
host=$1 src=$(cd "$2" && pwd) work=$3
source "$src/tests/support/trainer_runs.sh"
require_agent_modules "$src"
fresh_model_workdir "$work" 1
run="$work/runs/quickstart/t"
common=(experiment.output_dir="$work/runs" inference.model_path="$work/model" train.model_path="$work/model"
        gateway.tokenizer="$work/model" experiment.trial=t experiment.seed=7 trainer.checkpoint_every=10
        trainer.total_steps=40 trainer.batch_size=16 gateway.session_timeout_seconds=10 "evaluation.agent_command=''")
# setsid: the run and its agent get a process group of their own, killed together.
setsid "$host" run --config "$src/configs/quickstart.yaml" "${common[@]}" 2> "$work/first.log" &
leader=$!
trap 'kill -9 -- -$leader 2>/dev/null || true' EXIT
for _ in $(seq 1200); do
  [ -f "$run/metrics.jsonl" ] && [ "$(wc -l < "$run/metrics.jsonl")" -ge 14 ] && break
  kill -0 "$leader" 2>/dev/null || { echo "the run ended before it could be killed"; tail -30 "$work/first.log"; exit 1; }
  sleep 0.1
done
kill -9 -- "-$leader"
wait "$leader" 2>/dev/null || true
# The agent lives in a process group of its own: its watchdog must stop it
# when areal-host dies, or it runs on against a dead gateway.
orphans() { for p in $(pgrep -f "quickstart_agent/agent.mjs" || true); do [ "$(readlink /proc/$p/fd/1 2>/dev/null)" = "$run/agent.log" ] && echo $p; done; }
for _ in $(seq 80); do [ -z "$(orphans)" ] && break; sleep 0.1; done
[ -z "$(orphans)" ] || { echo "the killed run's agent is still running: $(orphans)"; exit 1; }
echo "the killed run's agent stopped with it"

steps_before=$(wc -l < "$run/metrics.jsonl")
echo "killed the run after $steps_before steps"
test -f "$run/checkpoints/step_10/host_state.json" || { echo "no checkpoint at step 10"; exit 1; }
# What the gateway held at the kill, read from its state dir before anything reopens it.
/usr/bin/python3 "$src/tests/e2e/fault_kill9_training.py" snapshot "$run/gateway_state/gateway_state.sqlite3" "$work/pending.json"
cp "$run/metrics.jsonl" "$work/metrics_before_kill.jsonl"
cp "$run/rollouts.jsonl" "$work/rollouts_before_kill.jsonl"  # what the killed process took; the resumed one appends

run_config "$src/configs/quickstart.yaml" "$work" "$work/second.log" "${common[@]}" trainer.resume=true
grep -o "resumed from .*" "$work/second.log" | head -1
grep -o "recovered [0-9]* active and [0-9]* ended sessions[^\"]*" "$work/second.log" || { echo "the gateway recovered nothing"; exit 1; }
# The checkpoint the run resumed from: step_10 at least; a later one when a
# loaded machine let the run pass step 20 before the kill landed.
ckpt=$(grep -o "resumed from .*/step_[0-9]* at step [0-9]*" "$work/second.log" | head -1 | sed 's/.* at step //')
[ -n "$ckpt" ] && [ "$ckpt" -ge 10 ] || { echo "the run did not resume from a checkpoint at step 10 or later"; tail -30 "$work/second.log"; exit 1; }
/usr/bin/python3 "$src/tests/e2e/fault_kill9_training.py" check "$run" "$work" 40 "$ckpt" 2
