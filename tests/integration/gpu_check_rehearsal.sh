#!/usr/bin/env bash
# scripts/gpu_check.sh rehearsed on the CPU (GPU_CHECK_DEVICE=cpu) against
# this build: every part, (a) to (e), runs its areal programs, transformers
# (.venv-vllm) as the reference, the report and its checks, on tiny models.
# A GPU session has 15 minutes; a bug in the script, its helpers or a path
# only it takes (LoRA with checkpointing in part e was one) is found here.
#   gpu_check_rehearsal.sh BUILD_DIR SOURCE_DIR WORK
set -euo pipefail
build=$(cd "$1" && pwd) src=$(cd "$2" && pwd) work=$3
py=$src/.venv-vllm/bin/python
[ -x "$py" ] || { echo "FAIL: $py is missing: run scripts/setup.sh with AREAL_TEST_PYTHON=1 (scripts/test.sh does)"; exit 1; }
rm -rf "$work" && mkdir -p "$work"
status=0
GPU_CHECK_DEVICE=cpu BUILD_DIR="$build" PYTHON="$py" WORK_DIR="$work" PARTS="a b c d e" bash "$src/scripts/gpu_check.sh" || status=$?
# Every part reported, and the checks ran: a part that printed nothing fails too.
for part in "(a) Log-prob parity" "(b) GRPO steps" "(c) Throughput" "(e) GRPO on the Qwen3-4B shape" "(d) Where areal's GPU time goes" \
            "Bitwise mode" "Recorded log-probs" "Ragged RL-like batch"; do
  grep -qF "$part" "$work/gpu_check_report.md" || { echo "FAIL: the report has no '$part'"; status=1; }
done
[ $status = 0 ] && grep -q "^gpu_check: all checks passed" "$work/gpu_check_report.md" && echo "gpu_check rehearsal: passed" && exit 0
echo "FAIL: gpu_check rehearsal (report: $work/gpu_check_report.md)"
exit 1
