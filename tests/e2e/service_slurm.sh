#!/usr/bin/env bash
# The managed service on a real Slurm (issue #37, "runs where users outgrow
# one machine"): a one-node cluster on localhost (tests/support/slurm_cluster.sh);
# `areal-host service` runs as a batch job; its base model's engine is an
# areal-engine-server speaking vLLM's protocol, started by the service as an
# srun step (the template's launcher.servers), serving each job's LoRA
# adapter through vLLM's runtime LoRA API; a job trains on 2 train ranks,
# srun steps too (train.world_size 2). Checks: a user's agent trains the job
# to the end with both ranks taking every step and the reward rising
# (tests/support/check_quickstart_run.py); the model answers by
# experiment/trial; scancel ends the service and leaves no process.
#   service_slurm.sh AREAL_HOST SOURCE_DIR WORK
set -euo pipefail
host=$1 src=$(cd "$2" && pwd) work=$3
source "$src/tests/support/trainer_runs.sh"
source "$src/tests/support/slurm_cluster.sh"
require_agent_modules "$src"
fresh_model_workdir "$work" 1 --initializer-range 0.1
format_warmup "$src" "$work"
export AREAL_TEST_MARK=$work
trap 'pkill -f "$work/agent-mark" || true; slurm_cluster_stop || true' EXIT
slurm_cluster_start "$work/slurm"

port=$(free_port)
cat > "$work/job.yaml" <<YAML
extends: $src/configs/service_job_quickstart.yaml
inference: {plugin: vllm, servers: []}
gateway: {tokenizer: $work/model}
train: {model_path: $work/model, world_size: 2}
launcher:
  type: slurm
  servers: {count: 1, model_path: $work/model}
  slurm: {nodes: 1}
YAML
cat > "$work/service.yaml" <<YAML
service:
  host: 0.0.0.0
  port: $port
  state_dir: $work/state
  admin_api_key: operator-secret-0123456789
  models:
    digits: {config: $work/job.yaml}
  hyperparameters:
    trainer.total_steps: {min: 1, max: 2000}
    experiment.seed: {min: 0, max: 1000}
YAML
"$host" tenants --config "$work/service.yaml" add-user alice > /dev/null
key=$("$host" tenants --config "$work/service.yaml" create-key alice 2> /dev/null)
job_id=$(sbatch --parsable --nodes 1 --ntasks 3 --output "$work/service.log" --wrap "exec $host service --config $work/service.yaml")
echo "service submitted as Slurm job $job_id"
url=http://$(hostname):$port
for _ in $(seq 600); do curl -sf "$url/health" > /dev/null && break; sleep 0.2; done
curl -sf "$url/health" > /dev/null || { echo "FAIL: the service did not come up"; tail -30 "$work/service.log"; exit 1; }
grep -q "srun on" "$work/service.log" || { echo "FAIL: the engine server was not an srun step"; tail -30 "$work/service.log"; exit 1; }

steps=100  # 20-step windows of a 150-step run: 0.11 0.13 0.61 0.90 0.91...; the check's window after step 80 is far above the start
job=$(curl -sf -X POST "$url/v1/jobs" -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \
  -d "{\"base_model\": \"digits\", \"experiment\": \"after\", \"trial\": \"t1\", \"hyperparameters\": {\"trainer.total_steps\": $steps, \"experiment.seed\": 7}}")
id=$(echo "$job" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
# The agent, marked by an argument of its own so the trap finds it.
AREAL_GATEWAY_URL=$url/jobs/$id AREAL_API_KEY=$key node "$src/examples/quickstart_agent/agent.mjs" --concurrency 9 --group-size 16 \
  --seed 1 "$work/agent-mark" > "$work/agent.log" 2>&1 &
state=
for _ in $(seq 1800); do
  state=$(curl -sf "$url/v1/jobs/$id" -H "Authorization: Bearer $key" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])')
  [ "$state" = running ] || break
  sleep 0.5
done
pkill -f "$work/agent-mark" || true
[ "$state" = finished ] || { echo "FAIL: the job ended $state"; tail -40 "$work/service.log"; exit 1; }
run=$work/state/users/alice/after/t1
/usr/bin/python3 "$src/tests/support/check_quickstart_run.py" "$run" $steps
slurm_ranks_trained "$run" $steps || exit 1
echo "both train ranks (srun steps) trained $steps steps"
grep -q "LoRA adapter 'job-" "$work/state/engines/digits/logs/server0.log" || grep -q "adapter 'job-.*' version .* loaded" "$work/service.log" ||
  { echo "FAIL: the engine server was not handed the job's adapters"; exit 1; }
answer=$(curl -sf "$url/v1/chat/completions" -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \
  -d '{"model": "after/t1", "messages": [{"role": "user", "content": "Which digit comes after 4?"}], "temperature": 0, "max_tokens": 4}')
echo "Phase 3 after/t1: $(echo "$answer" | /usr/bin/python3 -c 'import json,sys; print(repr(json.load(sys.stdin)["choices"][0]["message"]["content"]))')"
scancel "$job_id"
for _ in $(seq 100); do [ -z "$(squeue -h)" ] && break; sleep 0.2; done
[ -z "$(squeue -h)" ] || { echo "FAIL: the service job did not end"; squeue; exit 1; }
for _ in $(seq 50); do
  /usr/bin/python3 "$src/tests/support/leftover_processes.py" "$work" > "$work/left.txt" && ! pgrep -x slurmstepd > /dev/null && break
  sleep 0.2
done
/usr/bin/python3 "$src/tests/support/leftover_processes.py" "$work" > "$work/left.txt" || { echo "FAIL: left processes:"; cat "$work/left.txt"; exit 1; }
echo OK
