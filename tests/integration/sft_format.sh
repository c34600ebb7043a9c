#!/usr/bin/env bash
# `areal-host sft` (the quickstart's format stage, configs/quickstart_format.yaml)
# on a fresh init-model model, checked from outside: the final model's next-
# token distribution, computed by the independent PyTorch forward pass
# (tests/torch/hf_reference_logprobs.py), must give every question a near-
# uniform choice of digit and then end the turn, which is what a dataset
# pairing each question with every digit once teaches. Also: one metrics row
# per step with a falling loss, and clear errors for a bad dataset line.
#   sft_format.sh AREAL_HOST SOURCE_DIR WORK
set -euo pipefail
host=$1 src=$(cd "$2" && pwd) work=$3
rm -rf "$work" && mkdir -p "$work"
"$host" init-model --family qwen3 --preset tiny --tokenizer bytes --out "$work/model" --seed 3 >/dev/null
"$host" sft --config "$src/configs/quickstart_format.yaml" train.model_path="$work/model" experiment.output_dir="$work/runs" \
  experiment.trial=t 2> "$work/sft.log" || { tail -30 "$work/sft.log"; exit 1; }
grep -o "done: .*" "$work/sft.log"
out="$work/runs/quickstart_format/t"
test -f "$out/final/model.safetensors" && test -f "$out/final/tokenizer_config.json"
# The prompts as the gateway renders them (our template), then the reference forward pass.
for d in 0 1 2 3 4 5 6 7 8; do
  printf '{"messages": [{"role": "user", "content": "Which digit comes after %s?"}]}' $d > "$work/q$d.json"
  "$host" tokenize --tokenizer "$out/final" --chat "$work/q$d.json" > "$work/p$d.json"
done
/usr/bin/python3 - "$out" "$work" "$src/tests/torch/hf_reference_logprobs.py" <<'PY'
import json, math, subprocess, sys
out, work, ref = sys.argv[1:4]
rows = [json.loads(l) for l in open(f"{out}/metrics.jsonl")]
assert [r["step"] for r in rows] == list(range(1, 61)), [r["step"] for r in rows][:5]
first, last = rows[0]["algo_nll"], sum(r["algo_nll"] for r in rows[-10:]) / 10
# Per reply: -log(1/10) for the digit, ~0 for the end of turn, averaged over 2 tokens.
assert first > 2.5 and last < 1.3, f"loss {first:.3f} -> {last:.3f}"
eos, digits = 258, [48 + k for k in range(10)]
seqs = []
for d in range(9):
    prompt = json.load(open(f"{work}/p{d}.json"))["ids"]
    seqs += [prompt + [k] for k in digits]            # log p(digit k | prompt)
    seqs.append(prompt + [48 + (d + 1) % 10, eos])    # log p(eos | prompt, digit)
json.dump({"sequences": seqs}, open(f"{work}/in.json", "w"))
subprocess.run(["/usr/bin/python3", ref, f"{out}/final", f"{work}/in.json", f"{work}/lp.json"], check=True)
lps = json.load(open(f"{work}/lp.json"))["logprobs"]
for d in range(9):
    block = lps[d * 11:(d + 1) * 11]
    p = [math.exp(b[-1]) for b in block[:10]]
    p_eos = math.exp(block[10][-1])
    assert sum(p) > 0.9, f"question {d}: digits take only {sum(p):.3f} of the first token"
    assert max(p) < 0.2 and min(p) > 0.04, f"question {d}: not a near-uniform digit: {[round(x, 3) for x in p]}"
    assert p_eos > 0.9, f"question {d}: the turn does not end after the digit (p={p_eos:.3f})"
    print(f"question {d}: P(digit) in [{min(p):.3f}, {max(p):.3f}], sum {sum(p):.3f}; P(end | digit) {p_eos:.3f}")
PY
# A bad line is named by file and line, and nothing is trained.
printf '{"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"}]}\n{"messages": [{"role": "user", "content": "Hi"}]}\n' > "$work/bad.jsonl"
if "$host" sft --config "$src/configs/quickstart_format.yaml" train.model_path="$work/model" experiment.output_dir="$work/runs" \
  experiment.trial=bad sft.dataset="$work/bad.jsonl" 2> "$work/bad.log"; then
  echo "FAIL: a dataset line without the reply was accepted"; exit 1
fi
grep -q "bad.jsonl:2: needs {\"messages\": \[...\]} with at least a prompt message and the reply" "$work/bad.log" || { cat "$work/bad.log"; exit 1; }
test ! -e "$work/runs/quickstart_format/bad/final"
# An RL algorithm (a config extending the RL run's) would give every SFT row
# advantage 0 and train nothing: refused before anything runs.
set +e
"$host" sft --config "$src/configs/quickstart_format.yaml" train.model_path="$work/model" experiment.output_dir="$work/runs" \
  experiment.trial=rl algorithm.plugin=grpo 2> "$work/rl.log"
code=$?
set -e
[ "$code" = 2 ] || { echo "FAIL: sft with grpo exited $code, not 2"; cat "$work/rl.log"; exit 1; }
grep -q "algorithm.plugin is grpo, an RL algorithm" "$work/rl.log" || { cat "$work/rl.log"; exit 1; }
test ! -e "$work/runs/quickstart_format/rl/final"
echo OK
