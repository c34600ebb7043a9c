#!/usr/bin/env bash
# scripts/gpu_check.sh rehearsed on the CPU (GPU_CHECK_DEVICE=cpu) against
# this build: every part, (a) to (e), runs its areal programs, transformers
# (.venv-vllm) as the reference, the report and its checks, on tiny models.
# A GPU session has 15 minutes; a bug in the script, its helpers or a path
# only it takes (LoRA with checkpointing in part e was one) is found here.
# It runs the way a device machine runs it, through scripts/gpu_device_run.sh,
# so what comes back fits that machine's limits (8 files of 16 MiB at most).
#   gpu_check_rehearsal.sh BUILD_DIR SOURCE_DIR WORK
set -euo pipefail
build=$(cd "$1" && pwd) src=$(cd "$2" && pwd) work=$3
py=$src/.venv-vllm/bin/python
[ -x "$py" ] || { echo "FAIL: $py is missing: run scripts/setup.sh with AREAL_TEST_PYTHON=1 (scripts/test.sh does)"; exit 1; }
rm -rf "$work" && mkdir -p "$work/out"
status=0
# No bundle (this build took the system's packages); the device's OUT is a folder here.
OUT="$work/out" BUNDLE_TAR=/nonexistent/gpu-bundle.tar.gz LIMIT_S=800 TAG=rehearsal \
  GPU_CHECK_DEVICE=cpu BUILD_DIR="$build" PYTHON="$py" WORK_DIR="$work/check" PARTS="a b c d e" bash "$src/scripts/gpu_device_run.sh" || status=$?
report="$work/out/rehearsal.report.md"
[ -f "$report" ] || { echo "FAIL: no report came back in OUT ($(ls "$work/out"))"; cat "$work/out/rehearsal.log"; exit 1; }
# Every part reported, and the checks ran: a part that printed nothing fails too.
for part in "(a) Log-prob parity" "(b) GRPO steps" "(c) Throughput" "(e) GRPO on the Qwen3-4B shape" "(d) Where areal's GPU time goes" \
            "Bitwise mode" "Recorded log-probs" "Ragged RL-like batch" "model made in the background"; do
  grep -qF "$part" "$report" || { echo "FAIL: the report has no '$part'"; status=1; }
done
# What comes back fits the device machine's limits, and holds the parts' results.
n=$(find "$work/out" -type f | wc -l)
[ "$n" -le 8 ] || { echo "FAIL: $n files in OUT, more than the 8 a device call brings back"; status=1; }
for f in "$work/out"/*; do
  [ "$(stat -c %s "$f")" -le $((16 * 1024 * 1024)) ] || { echo "FAIL: $f is over 16 MiB"; status=1; }
  case "$(basename "$f")" in *[!A-Za-z0-9._-]*) echo "FAIL: $(basename "$f") has characters a device call does not bring back"; status=1 ;; esac
done
listing=$(tar -tzf "$work/out/rehearsal.results.tgz") || { echo "FAIL: rehearsal.results.tgz does not read"; status=1; }
for want in ./bench.areal.0.json ./bench.hf.0.json ./runs/gpu-grpo/trial0/metrics.jsonl; do
  grep -qxF "$want" <<< "$listing" || { echo "FAIL: rehearsal.results.tgz has no $want"; status=1; }
done
# Traces where the build has the profiler module (a CUDA libtorch's; Debian's has none).
grep -q "No profiler module" "$report" || [ -f "$work/out/rehearsal.traces.tgz" ] || { echo "FAIL: no traces came back"; status=1; }
[ $status = 0 ] && grep -q "^gpu_check: all checks passed" "$report" && echo "gpu_check rehearsal: passed" && exit 0
echo "FAIL: gpu_check rehearsal (report: $report, log: $work/out/rehearsal.log)"
exit 1
