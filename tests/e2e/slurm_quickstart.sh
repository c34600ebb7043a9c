#!/usr/bin/env bash
# The quickstart through the Slurm launcher on a real Slurm (issue #14): a
# one-node cluster on localhost (tests/support/slurm_cluster.sh: Debian's
# slurmctld, slurmd, munge), `areal-host launch` of configs/quickstart_slurm.yaml:
# 2 train ranks and 1 launched SGLang-protocol server (areal-engine-server
# over the local engine, an srun step like the ranks). Checks: the job
# completes; the gateway URL is printed and in its file; the quickstart's
# promises (tests/support/check_quickstart_run.py: steps, staleness, reward
# rises - which needs the server to serve the trained weights); both ranks
# trained every step (their log); Ctrl-C on a second launch cancels the
# job; no job, Slurm step or process of ours is left.
#   slurm_quickstart.sh AREAL_HOST SOURCE_DIR WORK
set -euo pipefail
host=$1 src=$(cd "$2" && pwd) work=$3
source "$src/tests/support/trainer_runs.sh"
source "$src/tests/support/slurm_cluster.sh"
require_agent_modules "$src"
fresh_model_workdir "$work" 1 --initializer-range 0.1  # the base scripts/quickstart.sh makes
format_warmup "$src" "$work"
export AREAL_TEST_MARK=$work  # inherited by everything we start, srun's tasks too
trap 'slurm_cluster_stop || true' EXIT
slurm_cluster_start "$work/slurm"
no_leftovers() {
  for _ in $(seq 50); do  # steps end a few seconds after their job (KillWait)
    /usr/bin/python3 "$src/tests/support/leftover_processes.py" "$work" > "$work/left.txt" && ! pgrep -x slurmstepd > /dev/null && return 0
    sleep 0.2
  done
  echo "FAIL: left $1:"; cat "$work/left.txt"; pgrep -a -x slurmstepd || true; exit 1
}

launch=("$host" launch --config "$src/configs/quickstart_slurm.yaml" experiment.output_dir="$work/runs" train.model_path="$work/model"
  gateway.tokenizer="$work/model" experiment.seed=7 evaluation.every_steps=0 dashboard.enabled=false)
steps=100  # 20-step windows of a 150-step run on this base: 0.10 0.12 0.48 0.83 0.97... (on HF's 0.02 CI once saw 0.105 -> 0.113 in 250)
start=$(date +%s)
"${launch[@]}" experiment.trial=t trainer.total_steps=$steps > "$work/launch.log" 2>&1 || { tail -40 "$work/launch.log"; exit 1; }
echo "the job ran $(( $(date +%s) - start )) s"
grep "^areal-host launch:" "$work/launch.log"
run=$work/runs/quickstart/t
url=$(cat "$run/gateway_url")
grep -q "^areal-host launch: gateway $url (written to $run/gateway_url)" "$work/launch.log" || { echo "FAIL: the gateway URL was not printed"; exit 1; }
grep -q "^areal-host launch: job [0-9]* COMPLETED (exit code 0:0)" "$work/launch.log" || { echo "FAIL: the job did not complete"; exit 1; }
/usr/bin/python3 "$src/tests/support/check_quickstart_run.py" "$run" $steps
slurm_ranks_trained "$run" $steps || exit 1
echo "both ranks trained $steps steps"
# The server bound every interface and is reached at its node's name, as on a real cluster.
grep -q "listening at http://$(hostname):" "$run/logs/server0.log" || { echo "FAIL: the server did not serve at the node's name"; head "$run/logs/server0.log"; exit 1; }
[ -z "$(squeue -h)" ] || { echo "FAIL: jobs left"; squeue; exit 1; }
no_leftovers "after the job"

# Ctrl-C while the job runs: scancel, and nothing left.
"${launch[@]}" experiment.trial=cancel trainer.total_steps=100000 > "$work/cancel.log" 2>&1 & pid=$!  # areal-host itself, not a subshell
for _ in $(seq 600); do grep -q "step 3/" "$work/cancel.log" && break; sleep 0.1; done
grep -q "step 3/" "$work/cancel.log" || { echo "FAIL: the second job did not start training"; tail -30 "$work/cancel.log"; exit 1; }
kill -INT $pid
if wait $pid; then echo "FAIL: a cancelled launch exited 0"; exit 1; fi
grep -q "interrupted; cancelling job" "$work/cancel.log" && grep -q "^areal-host launch: job [0-9]* CANCELLED" "$work/cancel.log" ||
  { echo "FAIL: the job was not cancelled"; tail -20 "$work/cancel.log"; exit 1; }
[ -z "$(squeue -h)" ] || { echo "FAIL: jobs left after cancel"; squeue; exit 1; }
no_leftovers "after the cancel"
trap - EXIT
slurm_cluster_stop
echo OK
