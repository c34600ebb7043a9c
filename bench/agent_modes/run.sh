#!/usr/bin/env bash
# Episodes per second of the quickstart task ("Which digit comes after D?", one
# call of up to 4 tokens per episode) on the quickstart's tiny model, rollout
# only (no training), for each way of running an agent:
#   inline      python_inline: DigitAgent coroutines on the embedded loop
#   pool        agent_pool: the same DigitAgent in 8 Python worker processes
#   per-process subproc: a fresh `node agent.mjs --episode` per episode (the npm agent)
#   online      `areal-host serve` + the npm agent driving sessions itself
# Same model, gateway, dataset and concurrency (8) for all four; prints a table.
#   bench/agent_modes/run.sh [EPISODES]   (default 400; needs a build and scripts/setup.sh's npm installs)
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
host=$src/build/bin/areal-host
episodes=${1:-400}
work=$(mktemp -d)
trap 'kill ${serve_pid:-} ${agent_pid:-} 2>/dev/null; rm -rf "$work"' EXIT
"$host" init-model --family qwen3 --preset tiny --tokenizer bytes --out "$work/model" --seed 1 >/dev/null
for i in $(seq 0 8); do echo "{\"digit\": $i}"; done > "$work/digits.jsonl"

rollout() {  # rollout NAME WORKFLOW_YAML MODE -> seconds
  cat > "$work/$1.yaml" <<YAML
experiment: {name: $1, trial: t, output_dir: $work/runs}
inference: {plugin: local, model_path: $work/model, max_batch: 8}
gateway: {plugin: gateway, port: 0, tokenizer: $work/model}
workflow: $2
rollout: {dataset: $work/digits.jsonl, episodes: $episodes, concurrency: 8, openai: {mode: $3}}
YAML
  local t0=$(date +%s.%N)
  "$host" run --config "$work/$1.yaml" 2> "$work/$1.log" || { tail -20 "$work/$1.log"; exit 1; }
  local t1=$(date +%s.%N)
  local ok=$(grep -c '"status":"ok"' "$work/runs/$1/t/rollouts.jsonl")
  [ "$ok" = "$episodes" ] || { echo "$1: $ok of $episodes episodes ok"; exit 1; }
  echo "$t0 $t1" | awk '{printf "%.2f", $2 - $1}'
}

agents=$src/examples/python_agents
inline=$(rollout inline "{plugin: python_inline, agent: 'quickstart_agent:DigitAgent', python_path: ['$agents']}" inline)
pool=$(rollout pool "{plugin: agent_pool, agent: 'quickstart_agent:DigitAgent', python_path: ['$agents'], interpreter: /usr/bin/python3, workers: 8}" subproc)
perproc=$(rollout perproc "{plugin: subproc, command: 'node $src/examples/quickstart_agent/agent.mjs --episode', max_workers: 8}" subproc)

# Online: the npm agent drives sessions against `serve` until $episodes sessions ended.
"$host" serve --model "$work/model" --port 0 gateway.admin_api_key=bench-admin inference.max_batch=8 > "$work/serve.out" 2> "$work/serve.log" &
serve_pid=$!
for _ in $(seq 100); do url=$(grep -o 'http://127.0.0.1:[0-9]*' "$work/serve.log" | head -1 || true); [ -n "$url" ] && break; sleep 0.1; done
count() { curl -s "$url/metrics" | awk '/^areal_gateway_model_requests_total/ {s += $2} END {print s + 0}'; }
t0=$(date +%s.%N)
AREAL_GATEWAY_URL=$url AREAL_ADMIN_KEY=bench-admin node "$src/examples/quickstart_agent/agent.mjs" --concurrency 1 --group-size 8 > "$work/agent.log" 2>&1 &
agent_pid=$!
while [ "$(count)" -lt "$episodes" ]; do sleep 0.05; done
t1=$(date +%s.%N)
kill $agent_pid; wait $agent_pid 2>/dev/null || true
online=$(echo "$t0 $t1" | awk '{printf "%.2f", $2 - $1}')

printf '\n%s episodes, concurrency 8, tiny byte model on the local engine\n\n' "$episodes"
printf '| mode | workflow | seconds | episodes/s |\n|---|---|---|---|\n'
for row in "inline python_inline $inline" "subproc agent_pool(8) $pool" "subproc subproc(process/episode) $perproc" "online serve+npm-agent $online"; do
  set -- $row
  printf '| %s | %s | %s | %s |\n' "$1" "$2" "$3" "$(echo "$episodes $3" | awk '{printf "%.1f", $1 / $2}')"
done
