#!/usr/bin/env bash
# The bitwise mode's price (issue #33): areal's engines with and without
# batch_invariant (engine and trainer both), side by side in one run on the
# same model, batch, requests and threads. Each row reports training and
# generation tokens/s and the largest |engine log-prob - trainer log-prob|
# over every generated token: 0 is the mode's promise, the default mode's
# gap is float rounding.
#   bench/model/batch_invariant.sh [BUILD_DIR] [THREADS]
set -euo pipefail
source "$(dirname "$0")/bench_env.sh" "$@"
#            preset batch seqlen steps gen_requests gen_prompt gen_tokens
for row in "tiny   4     128    5     8            32         32" \
           "small  4     128    3     8            32         32"; do
  set -- $row
  preset=$1; shift
  "$build/bin/areal-host" init-model --family qwen3 --preset "$preset" --tokenizer "$tok" --out "$work/$preset" --seed 1 > /dev/null
  AREAL_BENCH_CONSISTENCY=1 "$build/bin/areal_model_bench" "$work/$preset" "$threads" "$@" > "$work/$preset.default.json"
  # OpenBLAS's FMA kernels compute a row by where it sits (docs/gpu.md): the
  # invariant run takes its SSE kernels, so its cost includes theirs.
  OPENBLAS_CORETYPE=Nehalem AREAL_BENCH_CONSISTENCY=1 AREAL_BENCH_ENGINE='{"batch_invariant": true}' \
    "$build/bin/areal_model_bench" "$work/$preset" "$threads" "$@" > "$work/$preset.invariant.json"
  /usr/bin/python3 - "$preset" "$work/$preset.default.json" "$work/$preset.invariant.json" "$*" <<'PY'
import json, sys
preset, d, b, args = sys.argv[1], json.load(open(sys.argv[2])), json.load(open(sys.argv[3])), sys.argv[4].split()
print(f"\n{preset} (batch {args[0]} x {args[1]} tokens, {args[2]} timed steps; generation {args[3]} requests, prompt {args[4]}, {args[5]} new tokens each)")
print(f"  {'':<34} {'default':>10} {'batch_invariant':>16} {'ratio':>7}")
for key, label in (("train_tokens_per_s", "train tokens/s (fwd+bwd+AdamW)"), ("gen_tokens_per_s", "generation tokens/s")):
    print(f"  {label:<34} {d[key]:>10.1f} {b[key]:>16.1f} {b[key] / d[key]:>6.2f}x")
key = "engine_trainer_logprob_max_abs_diff"
print(f"  {'engine/trainer max |log-prob diff|':<34} {d[key]:>10.2e} {b[key]:>16.2e}   ({b['engine_trainer_tokens']} tokens)")
print(f"  first loss: default {d['first_loss']:.6f}, batch_invariant {b['first_loss']:.6f}")
assert b[key] == 0, "batch_invariant: the engine's and the trainer's log-probs differ"
assert abs(d["first_loss"] - b["first_loss"]) < 1e-4, "batch_invariant computes another loss"
PY
done
