#!/usr/bin/env bash
# What a GPU session would build and run, on a machine without a GPU: builds
# areal against a CUDA PyTorch (by default .venv-vllm's, which also has
# transformers) with areal's own CUDA kernels, compiled by the pinned nvcc of
# .venv-nvcc; runs the torch tests on the CPU against that libtorch; then
# rehearses scripts/gpu_check.sh on that build (GPU_CHECK_DEVICE=cpu). Run it
# before spending device time: a compile error in code only a CUDA libtorch
# compiles, or a broken gpu_check path, shows here. Needs
# `AREAL_TEST_PYTHON=1 scripts/setup.sh` (the two venvs); about 45 minutes on
# 2 cores from nothing, a few with ccache warm.
#
#   scripts/gpu_rehearsal.sh                   # WORK_DIR defaults to build-gpu-rehearsal/
#   PYTHON=/path/to/python3 WORK_DIR=/tmp/r PARTS="c d" scripts/gpu_rehearsal.sh
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-$src/.venv-vllm/bin/python}
work=${WORK_DIR:-$src/build-gpu-rehearsal}
fail() { echo "gpu_rehearsal: FAILED: $*" >&2; exit 1; }
[ -x "$PYTHON" ] || fail "$PYTHON missing (AREAL_TEST_PYTHON=1 scripts/setup.sh installs .venv-vllm)"
torch_prefix=$("$PYTHON" -c 'import torch; assert torch.version.cuda, "torch without CUDA"; print(torch.utils.cmake_prefix_path)') ||
  fail "$PYTHON has no CUDA PyTorch"
site=$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
nvcc_root=$(ls -d "$src"/.venv-nvcc/lib/python3*/site-packages/nvidia/cu13 2>/dev/null | head -1)
[ -x "$nvcc_root/bin/nvcc" ] || fail "no nvcc in .venv-nvcc (AREAL_TEST_PYTHON=1 scripts/setup.sh installs it)"
mkdir -p "$work"

# A CUDA toolkit folder as CMake's FindCUDA and nvcc expect one: nvcc's wheel
# (bin copied: nvcc finds its siblings through its own real path) and the
# runtime libraries PyTorch's wheels ship, headers and libraries side by side.
toolkit="$work/cuda"
rm -rf "$toolkit" && mkdir -p "$toolkit/bin" "$toolkit/include" "$toolkit/lib64"
cp -a "$nvcc_root/bin/." "$toolkit/bin/"
ln -s "$nvcc_root/nvvm" "$toolkit/nvvm"
for root in "$nvcc_root" "$site/nvidia/cu13"; do
  for f in "$root"/include/* "$root"/lib/*; do
    [ -e "$f" ] || continue
    dest="$toolkit/$([ "$(basename "$(dirname "$f")")" = include ] && echo include || echo lib64)/$(basename "$f")"
    [ -e "$dest" ] || ln -s "$f" "$dest"
  done
done
for f in "$toolkit"/lib64/*.so.*; do  # the unversioned names the linker looks for
  base=${f%%.so.*}.so
  [ -e "$base" ] || ln -s "$(basename "$f")" "$base"
done
ln -sfn lib64 "$toolkit/lib"

t0=$(date +%s)
build="$work/build"
launcher=()
command -v ccache > /dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
CUDACXX="$toolkit/bin/nvcc" cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCUDA_TOOLKIT_ROOT_DIR="$toolkit" \
  -DCMAKE_PREFIX_PATH="$torch_prefix" -DAREAL_CUDA_KERNELS=ON "${launcher[@]}" > "$work/configure.log" 2>&1 ||
  { tail -30 "$work/configure.log"; fail "configure (log: $work/configure.log)"; }
cat "$build/areal_torch.txt"
cmake --build "$build" -- -k 0 > "$work/build.log" 2>&1 || { grep -B2 -A12 "error" "$work/build.log" | head -60 || true; fail "build (log: $work/build.log)"; }
cmake --build "$build" --target areal_bench_profiler >> "$work/build.log" 2>&1 || fail "the profiler module (log: $work/build.log)"
echo "gpu_rehearsal: built in $(( $(date +%s) - t0 )) s"

"$build/bin/areal_torch_tests" --gtest_brief=1 > "$work/torch_tests.log" 2>&1 || { tail -40 "$work/torch_tests.log"; fail "torch tests (log: $work/torch_tests.log)"; }
grep -m1 "PASSED" "$work/torch_tests.log"

GPU_CHECK_DEVICE=cpu BUILD_DIR="$build" PYTHON="$PYTHON" WORK_DIR="$work/gpu-check" PARTS="${PARTS:-a b c d e}" "$src/scripts/gpu_check.sh" ||
  fail "the gpu_check rehearsal (report: $work/gpu-check/gpu_check_report.md)"
echo "gpu_rehearsal: passed in $(( $(date +%s) - t0 )) s"
