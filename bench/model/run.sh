#!/usr/bin/env bash
# areal's libtorch engines vs the same model in Debian's python3-torch, side
# by side in one run, same threads, same tokens (the first training loss of
# both is printed: they must agree). Also the peak memory per rank of fsdp
# data parallelism with 1 and 2 ranks.
#   bench/model/run.sh [BUILD_DIR] [THREADS]
# Needs a build (scripts/setup.sh), tests/parity/node_modules, and python3-torch
# (apt-get install python3-torch; benchmarks only, not the test suite).
set -euo pipefail
/usr/bin/python3 -c "import torch" 2>/dev/null || { echo "python3-torch is missing: apt-get install python3-torch"; exit 1; }
source "$(dirname "$0")/bench_env.sh" "$@"
#            preset batch seqlen steps gen_requests gen_prompt gen_tokens
# The third row: one request, as a single agent on a CPU serves.
for row in "tiny   4     128    5     8            32         32" \
           "small  4     128    3     8            32         32" \
           "tiny   4     128    5     1            32         128"; do
  set -- $row
  preset=$1; shift
  "$build/bin/areal-host" init-model --family qwen3 --preset "$preset" --tokenizer "$tok" --out "$work/$preset" --seed 1 > /dev/null
  "$build/bin/areal_model_bench" "$work/$preset" "$threads" "$@" > "$work/$preset.areal.json"
  /usr/bin/python3 "$here/reference_model.py" "$work/$preset" "$threads" "$@" > "$work/$preset.ref.json"
  /usr/bin/python3 - "$preset" "$work/$preset.areal.json" "$work/$preset.ref.json" "$*" <<'PY'
import json, sys
preset, a, r, args = sys.argv[1], json.load(open(sys.argv[2])), json.load(open(sys.argv[3])), sys.argv[4].split()
print(f"\n{preset} (batch {args[0]} x {args[1]} tokens, {args[2]} timed steps; generation {args[3]} requests, prompt {args[4]}, {args[5]} new tokens each)")
print(f"  first loss: areal {a['first_loss']:.6f}  reference {r['first_loss']:.6f}")
for key, label in (("train_tokens_per_s", "train tokens/s (fwd+bwd+AdamW)"), ("gen_tokens_per_s", "generation tokens/s")):
    print(f"  {label:<32} areal {a[key]:>9.1f}   {r['impl']} {r[key]:>9.1f}   ratio {a[key] / r[key]:.2f}x")
assert abs(a["first_loss"] - r["first_loss"]) < 1e-3, "areal and the reference disagree on the loss: not the same model"
PY
done
# Peak memory per rank, fsdp data parallelism on the small preset.
echo
"$build/bin/areal_dp_driver" train "$work/small" "$work/one" 1 0 "" > "$work/one.log"
"$build/bin/areal_dp_driver" train "$work/small" "$work/two" 2 0 "file://$work/store" > "$work/two.0.log" &
"$build/bin/areal_dp_driver" train "$work/small" "$work/two" 2 1 "file://$work/store" > "$work/two.1.log"
wait
for f in one two.0 two.1; do
  state=$(grep '^rank' "$work/$f.log" | tail -1 | /usr/bin/python3 -c "import json,sys; print(json.loads(sys.stdin.read().split(' ',2)[2])['resident_state_bytes'] // 2**20)")
  echo "fsdp $f: peak RSS $(grep '^peak' "$work/$f.log" | awk '{print $4, $5}'), parameter+optimizer state kept between steps ${state} MiB"
done
