#!/usr/bin/env bash
# A gateway built against ABI 1.2 (no session slots) still loads into this
# host: a rollout job that needs no sessions runs through it, and online
# training, which needs the 1.4 session slots, is refused with a clear
# reason before anything starts.
set -euo pipefail
host=$1 src=$2 fixture=$3 work=$4
rm -rf "$work" && mkdir -p "$work"

"$host" --config "$src/configs/rollout_token_match.yaml" gateway.plugin="$fixture" rollout.episodes=8 \
  rollout.output="$work/rollouts.jsonl" 2> "$work/rollout.log" || { cat "$work/rollout.log"; exit 1; }
cat "$work/rollout.log"
grep -q "fixture_abi12_gateway 0.0.1 \[gateway\] ABI 1.2" "$work/rollout.log"
grep -q "done: 8 ok, 0 failed" "$work/rollout.log"
[ "$(wc -l < "$work/rollouts.jsonl")" -eq 8 ]

cat > "$work/online.yaml" <<YAML
experiment: {output_dir: $work/runs}
inference: {plugin: mock_inference, vocab_size: 64}
gateway: {plugin: $fixture}
train: {plugin: $(dirname "$fixture")/libareal-fixture_toy_train.so}
algorithm: {plugin: grpo}
rollout: {openai: {mode: online}}
trainer: {total_steps: 1, batch_size: 1}
YAML
set +e
"$host" run --config "$work/online.yaml" 2> "$work/online.log"; rc=$?
set -e
cat "$work/online.log"
[ "$rc" -eq 2 ] || { echo "FAIL: expected exit code 2, got $rc"; exit 1; }
grep -q "online needs a gateway with the ABI 1.4 session slots; 'fixture_abi12_gateway' (ABI 1.2) has none" "$work/online.log"
echo OK
