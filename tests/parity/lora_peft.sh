#!/usr/bin/env bash
# Issue #34: areal's LoRA adapters against Hugging Face PEFT
# (reference_lora_peft.py in .venv-vllm), float32, qwen3/qwen2/llama3 tiny
# models with every base tensor perturbed:
#   1. PEFT makes an adapter (random A and B) and scores sequences through
#      PeftModel; areal loads PEFT's folder and scores the same sequences
#      (areal_score_logprobs --lora): equal within 1e-5;
#   2. areal writes the adapter back out (--save-lora) and PEFT loads that
#      folder: the same log-probs again, so what we write is what PEFT reads.
# Two adapter shapes: all-linear r=4 alpha=8, and q/v/down r=8 alpha=16 with rsLoRA.
#   3. an adapter areal trained (train.lora, a few sft steps): see below.
#   lora_peft.sh AREAL_HOST SCORE_BIN SOURCE_DIR WORK
set -euo pipefail
host=$1 score=$2 src=$(cd "$3" && pwd) work=$4
py=$src/.venv-vllm/bin/python
peft=$src/tests/parity/reference_lora_peft.py
[ -x "$py" ] || { echo "FAIL: $py is missing: run scripts/setup.sh with AREAL_TEST_PYTHON=1 (scripts/test.sh does)"; exit 1; }
rm -rf "$work" && mkdir -p "$work"
export HF_HUB_OFFLINE=1
bound=1e-5 failed=0 compared=0 runs=0 seed=0
compare() {  # compare A.json B.json LABEL
  local n worst ok
  read -r n worst < <(/usr/bin/python3 - "$1" "$2" <<'PY'
import json, sys
a, b = (json.load(open(p))["logprobs"] for p in sys.argv[1:3])
assert len(a) == len(b) and all(len(x) == len(y) for x, y in zip(a, b)), "shapes differ"
diffs = [abs(p - q) for x, y in zip(a, b) for p, q in zip(x, y)]
print(len(diffs), max(diffs))
PY
)
  compared=$((compared + n)) runs=$((runs + 1))
  ok=$(/usr/bin/python3 -c "print(int($worst <= $bound))")
  echo "$([ "$ok" = 1 ] && echo ok || echo FAIL) $3: $n log-probs, max difference $worst"
  [ "$ok" = 1 ] || failed=$((failed + 1))
}
# The reference's work runs in two Python processes (each start imports
# torch, transformers and PEFT, about 10 s on CI's machines): the models,
# sequences, PEFT's adapters and their scores first; after areal's turn,
# PEFT reading what areal wrote and the trained adapter's references.
before=$work/before.txt after=$work/after.txt cases=()
: > "$before"; : > "$after"
for family in qwen3 qwen2 llama3; do
  for shape in "4 8 all-linear 0" "8 16 q_proj,v_proj,down_proj 1"; do
    read -r rank alpha targets rslora <<< "$shape"
    seed=$((seed + 1))
    dir=$work/$family-$seed
    cases+=("$dir $family $rank $targets $rslora")
    "$host" init-model --family "$family" --preset tiny --tokenizer bytes --out "$dir/model" --seed "$seed" 2>/dev/null
    cat >> "$before" <<EOF
ref perturb '$dir/model' $seed
ref sequences '$dir/model' '$dir/in.json' $seed
make '$dir/model' '$dir/peft-adapter' $seed $rank $alpha $targets $rslora
score '$dir/model' '$dir/peft-adapter' '$dir/in.json' '$dir/peft.json'
EOF
    echo "score '$dir/model' '$dir/areal-adapter' '$dir/in.json' '$dir/peft-reads-areal.json'" >> "$after"
  done
done
# 3. Training: `areal-host sft` with train.lora trains only the adapter; its
#    final/ holds the merged model and final/adapter the adapter. PEFT's
#    adapter on the untouched base, transformers on the merged folder and
#    areal on either agree.
trained=$work/trained
final=$trained/runs/quickstart_format/trial0/final
"$host" init-model --family qwen3 --preset tiny --tokenizer bytes --out "$trained/model" --seed 21 2>/dev/null
echo "ref sequences '$trained/model' '$trained/in.json' 21" >> "$before"
cat >> "$after" <<EOF
score '$trained/model' '$final/adapter' '$trained/in.json' '$trained/peft.json'
ref score '$final' '$trained/in.json' '$trained/merged-transformers.json'
EOF
"$py" "$peft" batch < "$before"
for c in "${cases[@]}"; do
  read -r dir family rank targets rslora <<< "$c"
  "$score" --lora "$dir/peft-adapter" --save-lora "$dir/areal-adapter" "$dir/model" "$dir/in.json" "$dir/areal.json"
  compare "$dir/peft.json" "$dir/areal.json" "$family r=$rank $targets rslora=$rslora: PEFT's adapter, PEFT vs areal"
done
"$host" sft --config "$src/configs/quickstart_format.yaml" "train.model_path=$trained/model" "experiment.output_dir=$trained/runs" \
  "sft.dataset=$src/configs/data/quickstart_format.jsonl" trainer.total_steps=8 train.lr=0.01 \
  'train.lora={"rank": 4, "alpha": 8, "target_modules": ["q_proj", "o_proj", "up_proj"]}' 2> "$trained/sft.log" || { tail -20 "$trained/sft.log"; exit 1; }
[ -f "$final/adapter/adapter_config.json" ] || { echo "FAIL: $final/adapter has no adapter_config.json"; exit 1; }
cmp -s "$trained/model/model.safetensors" "$final/model.safetensors" && { echo "FAIL: final/ is the untouched base"; exit 1; }
"$py" "$peft" batch < "$after"
for c in "${cases[@]}"; do
  read -r dir family rank targets rslora <<< "$c"
  compare "$dir/peft.json" "$dir/peft-reads-areal.json" "$family r=$rank $targets rslora=$rslora: the adapter areal wrote, read by PEFT"
done
"$score" "$final" "$trained/in.json" "$trained/merged-areal.json"
"$score" --lora "$final/adapter" "$trained/model" "$trained/in.json" "$trained/adapter-areal.json"
compare "$trained/peft.json" "$trained/merged-transformers.json" "trained: PEFT (base + adapter/) vs transformers (merged final/)"
compare "$trained/peft.json" "$trained/merged-areal.json" "trained: PEFT vs areal on the merged final/"
compare "$trained/peft.json" "$trained/adapter-areal.json" "trained: PEFT vs areal on base + adapter/"
echo "versions: $("$py" -c 'import peft, transformers, torch; print("peft", peft.__version__, "transformers", transformers.__version__, "torch", torch.__version__)')"
echo "lora vs peft: $compared log-probs, $((runs - failed)) passed, $failed failed (bound $bound)"
[ "$failed" = 0 ]
