#!/usr/bin/env bash
# What routing replay buys (issue #35): on a Qwen3-MoE folder made here
# (init-model --family qwen3_moe, HF's default init), the share of routes
# the trainer would choose differently from the rollout's and the log-prob
# mismatch between engine and trainer, with train.moe.routing_replay none
# and rollout (bench/model/routing_mismatch.cpp says how).
#   bench/model/routing_mismatch.sh [BUILD_DIR] [PRESET] [SIGMA]
set -euo pipefail
preset=${2:-small}
sigma=${3:-0.1}
source "$(dirname "$0")/bench_env.sh" "${1:-}"
echo "preset $preset, sigma $sigma"
"$build/bin/areal-host" init-model --family qwen3_moe --preset "$preset" --tokenizer bytes --out "$work/model" --seed 1 2>&1 | head -1
"$build/bin/areal_routing_mismatch" "$work/model" 16 64 "$sigma"
