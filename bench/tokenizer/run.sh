#!/usr/bin/env bash
# Tokenizer throughput, side by side in one run: areal vs Hugging Face's Rust
# tokenizer (npm `tokenizers`), one thread each, same corpus.
#   bench/tokenizer/run.sh [BUILD_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../../build}
work=$(mktemp -d)
/usr/bin/python3 "$here/make_corpus.py" "$work/corpus.jsonl"
"$build/bin/areal_tokenizer_bench" "$work/corpus.jsonl" "$here/../../tests/parity/node_modules" \
  --benchmark_format=json --benchmark_out="$work/areal.json" > /dev/null
TOKENIZERS_PARALLELISM=false RAYON_NUM_THREADS=1 RAYON_RS_NUM_CPUS=1 \
  node "$here/hf_reference.js" "$work/corpus.jsonl" qwen3 llama3_1 deepseek_v3 > "$work/hf.jsonl"
/usr/bin/python3 - "$work/areal.json" "$work/hf.jsonl" <<'PY'
import json, sys
areal = {b["name"].split("/")[1]: b for b in json.load(open(sys.argv[1]))["benchmarks"]}
hf = {}
for line in open(sys.argv[2]):
    r = json.loads(line)
    best = hf.get(r["family"])
    if best is None or r["seconds"] < best["seconds"]:
        hf[r["family"]] = r
print(f"{'family':<12} {'areal MB/s':>11} {'HF MB/s':>9} {'speedup':>8} {'areal Mtok/s':>13} {'HF Mtok/s':>10} {'HF mode':>12} {'load s':>7}")
for fam, a in areal.items():
    h = hf[fam]
    a_mbs = a["bytes_per_second"] / 1e6
    h_mbs = h["bytes"] / h["seconds"] / 1e6
    print(f"{fam:<12} {a_mbs:>11.2f} {h_mbs:>9.2f} {a_mbs / h_mbs:>7.2f}x {a['tokens_per_s'] / 1e6:>13.3f} "
          f"{h['tokens'] / h['seconds'] / 1e6:>10.3f} {h['mode']:>12} {a['load_s']:>7.2f}")
PY
rm -rf "$work"
