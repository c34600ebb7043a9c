#!/usr/bin/env bash
# Compiles areal's own CUDA kernels (plugins/torch_model/cuda_kernels) with
# the pinned nvcc of .venv-nvcc (scripts/setup.sh), for the architectures a
# GPU build targets (cmake/AREALTorch.cmake), warnings as errors, and no
# register spills or local memory in any kernel: what a GPU user's build
# compiles, checked where no GPU and no CUDA toolkit are.
#   cuda_kernels_compile.sh SRC_DIR WORK_DIR
set -euo pipefail
src=$1 work=$2
nvcc=$(ls "$src"/.venv-nvcc/lib/python3*/site-packages/nvidia/cu13/bin/nvcc 2>/dev/null | head -1 || true)
[ -n "$nvcc" ] && [ -x "$nvcc" ] || { echo "cuda_kernels_compile: no nvcc in $src/.venv-nvcc (run AREAL_TEST_PYTHON=1 scripts/setup.sh)" >&2; exit 1; }
mkdir -p "$work"
n=0
for cu in "$src"/plugins/torch_model/cuda_kernels/*.cu; do
  "$nvcc" -std=c++17 -O3 -c "$cu" -o "$work/$(basename "$cu" .cu).o" \
    -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code='[sm_90,compute_90]' \
    -Werror all-warnings -Xcompiler -Wall,-Wextra,-Werror -Xptxas --warn-on-spills,--warn-on-local-memory-usage,--warning-as-error
  n=$((n + 1))
done
[ "$n" -gt 0 ] || { echo "cuda_kernels_compile: no .cu file under $src/plugins/torch_model/cuda_kernels" >&2; exit 1; }
echo "cuda kernels compile: $n files, sm_80 and sm_90, $("$nvcc" --version | grep -o 'release [0-9.]*')"
