#!/usr/bin/env bash
# areal's log-probs (plugins/torch_model, through areal_score_logprobs)
# against Hugging Face transformers' own model classes
# (reference_logprobs_transformers.py in .venv-vllm), fp32, every family and
# shape we make: qwen3, qwen2, llama3, qwen3_moe (Qwen3MoeForCausalLM) and
# gpt_oss (GptOssForCausalLM) in the tiny preset (16-wide heads, tied
# embeddings but llama3's and gpt_oss's; MoE: every layer 8 experts, top 2)
# and tiny-hd32 (32-wide, untied; qwen3_moe: a dense layer, then an expert
# layer), every tensor perturbed (gpt_oss: sinks, biases, a 16-key sliding
# window on layer 0 that sequences of 23 and more cross, YaRN); and qwen3 tiny-hd32 with
# YaRN rope scaling (factor 4 over an original context of 32, so the
# sequences reach 4x past it); and gpt_oss tiny-hd32 with its experts in
# MXFP4 (areal reads the blocks and scales, transformers its own
# dequantization of them); and, with prefix sharing (issue #36), qwen3,
# qwen3_moe and gpt_oss tiny scoring rows that share prefixes (a GRPO group,
# a session's turns, retries branching off a turn, an unrelated row) in one
# forward over their prefix tree (areal_score_logprobs --tree, through fsdp's rows_logprobs) against
# transformers on each row alone. Bound: 1e-5 on every token of sequences
# of 2 to 130.
#   logprobs_transformers.sh AREAL_HOST SCORE_BIN SOURCE_DIR WORK
set -euo pipefail
host=$1 score=$2 src=$(cd "$3" && pwd) work=$4
py=$src/.venv-vllm/bin/python
ref=$src/tests/parity/reference_logprobs_transformers.py
[ -x "$py" ] || { echo "FAIL: $py is missing: run scripts/setup.sh with AREAL_TEST_PYTHON=1 (scripts/test.sh does)"; exit 1; }
rm -rf "$work" && mkdir -p "$work"
bound=1e-5 failed=0 compared=0 seed=0 cases=()
rows=("qwen3 tiny" "qwen3 tiny-hd32" "qwen2 tiny" "qwen2 tiny-hd32" "llama3 tiny" "llama3 tiny-hd32" "qwen3_moe tiny" "qwen3_moe tiny-hd32"
      "gpt_oss tiny" "gpt_oss tiny-hd32" "gpt_oss tiny-hd32 mxfp4"
      "qwen3 tiny-hd32 yarn" "qwen3 tiny tree" "qwen3_moe tiny tree" "gpt_oss tiny tree")
# The reference's work runs in one Python process per phase (each start
# imports torch and transformers, about 10 s on CI's machines): the models
# and their sequences first, then transformers' scores.
prepare=$work/prepare.txt scoring=$work/score.txt
: > "$prepare"; : > "$scoring"
for row in "${rows[@]}"; do
    read -r family preset variant <<<"$row"
    seed=$((seed + 1))
    dir=$work/$family-$preset${variant:+-$variant}
    cases+=("$dir $family $preset ${variant:--}")
    "$host" init-model --family "$family" --preset "$preset" --tokenizer bytes --out "$dir" --seed "$seed" 2>/dev/null
    if [ "$variant" = yarn ]; then
      /usr/bin/python3 - "$dir/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["rope_scaling"] = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32}
json.dump(c, open(sys.argv[1], "w"), indent=2)
PY
    fi
    echo "perturb '$dir' $seed" >> "$prepare"
    # areal reads the MXFP4 folder, transformers its own dequantization of it
    if [ "$variant" = mxfp4 ]; then echo "mxfp4 '$dir' '$dir-quantized'" >> "$prepare"; fi
    echo "sequences '$dir' '$dir/in.json' $seed" >> "$prepare"
    echo "score '$dir' '$dir/in.json' '$dir/hf.json'" >> "$scoring"
done
"$py" "$ref" batch < "$prepare"
for c in "${cases[@]}"; do
  read -r dir family preset variant <<<"$c"
  if [ "$variant" = tree ]; then  # rows sharing prefixes, cut from the random sequences
    /usr/bin/python3 - "$dir/in.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["sequences"]
long, mid = s[4], s[3]  # 130 and 64 random tokens
prompt, session = long[:40], mid[:12]
rows = [prompt + long[40 + 7 * i: 40 + 7 * i + n] for i, n in enumerate((5, 12, 1, 30))]  # a group
turns = [long[70:76], long[80:89], long[95:99], long[100:120]]
for t in range(1, 5):
    rows.append(session + sum(turns[:t], []))  # a session a row per call
rows.append(session + turns[0] + mid[20:31])  # a retry of the second turn
rows.append(session + turns[0] + mid[20:31] + mid[40:60])  # and the session going on from it
rows.append(s[2])  # unrelated
json.dump({"sequences": rows}, open(sys.argv[1], "w"))
PY
  fi
done
HF_HUB_OFFLINE=1 "$py" "$ref" batch < "$scoring"
for c in "${cases[@]}"; do
    read -r dir family preset variant <<<"$c"
    [ "$variant" = - ] && variant=
    ours=$dir tree=()
    [ "$variant" = mxfp4 ] && ours=$dir-quantized
    [ "$variant" = tree ] && tree=(--tree)
    "$score" "${tree[@]}" "$ours" "$dir/in.json" "$dir/areal.json"
    read -r n worst < <(/usr/bin/python3 - "$dir/hf.json" "$dir/areal.json" <<'PY'
import json, sys
hf, ours = (json.load(open(p))["logprobs"] for p in sys.argv[1:3])
assert len(hf) == len(ours) and all(len(a) == len(b) for a, b in zip(hf, ours)), "shapes differ"
diffs = [abs(a - b) for x, y in zip(hf, ours) for a, b in zip(x, y)]
print(len(diffs), max(diffs))
PY
)
    if [ "$family" = qwen3_moe ] || [ "$family" = gpt_oss ]; then
      # The routers chose the same experts for every token and layer, and the
      # load-balancing loss is transformers' (1e-5).
      /usr/bin/python3 - "$dir/hf.json" "$dir/areal.json" <<'PY' || failed=$((failed + 1))
import json, sys
hf, ours = (json.load(open(p)) for p in sys.argv[1:3])
same = sum(a == b for x, y in zip(hf["experts"], ours["experts"]) for a, b in zip(x, y))
total = sum(len(x) for x in hf["experts"])
aux = max(abs(a - b) for a, b in zip(hf["aux_loss"], ours["aux_loss"]))
print(f"{'ok' if same == total and aux <= 1e-5 else 'FAIL'} routing: {same}/{total} tokens with the same experts in every layer; "
      f"aux loss max |transformers - areal| = {aux:.3g} (values {min(ours['aux_loss']):.4f}..{max(ours['aux_loss']):.4f})")
sys.exit(0 if same == total and aux <= 1e-5 else 1)
PY
    fi
    compared=$((compared + n))
    ok=$(/usr/bin/python3 -c "print(int($worst <= $bound))")
    echo "$([ "$ok" = 1 ] && echo ok || echo FAIL) $family $preset${variant:+ $variant}: $n log-probs, max |transformers - areal| = $worst"
    [ "$ok" = 1 ] || failed=$((failed + 1))
done
echo "versions: $("$py" -c 'import transformers, torch; print("transformers", transformers.__version__, "torch", torch.__version__)')"
echo "logprobs vs transformers: $compared log-probs, $((${#cases[@]} - failed)) passed, $failed failed (bound $bound)"
[ "$failed" = 0 ]
