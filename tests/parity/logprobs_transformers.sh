#!/usr/bin/env bash
# areal's log-probs (plugins/torch_model, through areal_score_logprobs)
# against Hugging Face transformers' own model classes
# (reference_logprobs_transformers.py in .venv-vllm), fp32, every family and
# shape we make: qwen3, qwen2 and llama3 in the tiny preset (16-wide heads,
# tied embeddings but llama3's) and tiny-hd32 (32-wide, untied), every
# tensor perturbed. Bound: 1e-5 on every token of sequences of 2 to 130.
#   logprobs_transformers.sh AREAL_HOST SCORE_BIN SOURCE_DIR WORK
set -euo pipefail
host=$1 score=$2 src=$(cd "$3" && pwd) work=$4
py=$src/.venv-vllm/bin/python
ref=$src/tests/parity/reference_logprobs_transformers.py
[ -x "$py" ] || { echo "FAIL: $py is missing: run scripts/setup.sh with AREAL_TEST_PYTHON=1 (scripts/test.sh does)"; exit 1; }
rm -rf "$work" && mkdir -p "$work"
bound=1e-5 failed=0 compared=0 seed=0
for family in qwen3 qwen2 llama3; do
  for preset in tiny tiny-hd32; do
    seed=$((seed + 1))
    dir=$work/$family-$preset
    "$host" init-model --family "$family" --preset "$preset" --tokenizer bytes --out "$dir" --seed "$seed" 2>/dev/null
    "$py" "$ref" perturb "$dir" "$seed"
    "$py" "$ref" sequences "$dir" "$dir/in.json" "$seed"
    HF_HUB_OFFLINE=1 "$py" "$ref" score "$dir" "$dir/in.json" "$dir/hf.json"
    "$score" "$dir" "$dir/in.json" "$dir/areal.json"
    read -r n worst < <(/usr/bin/python3 - "$dir/hf.json" "$dir/areal.json" <<'PY'
import json, sys
hf, ours = (json.load(open(p))["logprobs"] for p in sys.argv[1:3])
assert len(hf) == len(ours) and all(len(a) == len(b) for a, b in zip(hf, ours)), "shapes differ"
diffs = [abs(a - b) for x, y in zip(hf, ours) for a, b in zip(x, y)]
print(len(diffs), max(diffs))
PY
)
    compared=$((compared + n))
    ok=$(/usr/bin/python3 -c "print(int($worst <= $bound))")
    echo "$([ "$ok" = 1 ] && echo ok || echo FAIL) $family $preset: $n log-probs, max |transformers - areal| = $worst"
    [ "$ok" = 1 ] || failed=$((failed + 1))
  done
done
echo "versions: $("$py" -c 'import transformers, torch; print("transformers", transformers.__version__, "torch", torch.__version__)')"
echo "logprobs vs transformers: $compared log-probs, $((6 - failed)) passed, $failed failed (bound $bound)"
[ "$failed" = 0 ]
