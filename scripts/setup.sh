#!/usr/bin/env bash
# Installs the Debian packages the build needs (only what is missing; no-op
# when all are present), then configures and builds Release into ./build,
# with ccache when available.
#
#   scripts/setup.sh            # install + build everything: tests, benchmarks, every plugin
#   AREAL_SETUP=quickstart scripts/setup.sh   # only what the CPU quickstart runs (scripts/quickstart.sh)
#   BUILD_DIR=out scripts/setup.sh
#   AREAL_TORCH=pytorch|debian scripts/setup.sh   # which libtorch (default: PyTorch's with CUDA if installed)
set -euo pipefail
cd "$(dirname "$0")/.."
setup_for=${AREAL_SETUP:-all}
case "$setup_for" in all|quickstart) ;; *) echo "setup: AREAL_SETUP must be all or quickstart, got '$setup_for'" >&2; exit 1 ;; esac

# What areal-host, its plugins and the quickstart need.
packages=(
  g++ cmake ninja-build pkg-config ccache binutils python3
  libpoco-dev libboost-dev nlohmann-json3-dev libyaml-cpp-dev libspdlog-dev libdlpack-dev
  libicu-dev libsqlite3-dev libtorch-dev
  # Debian's libtorch calls the system BLAS; without OpenBLAS it gets the
  # netlib reference BLAS, about 9x slower on the model's matmuls.
  libopenblas0-openmp
)
# What the test suite, the benchmarks and the plugins the quickstart does not
# use need besides.
[ "$setup_for" = all ] && packages+=(
  libgtest-dev libgmock-dev libbenchmark-dev libpython3-dev python3-aiohttp python3-httpx python3-jsonschema python3-jinja2 python3-torch python3-venv
  libgloo-dev
  # The sanitizer and fuzzing build (scripts/sanitize.sh): clang and its
  # runtimes (ASan, UBSan, libFuzzer).
  clang libclang-rt-14-dev
  # The dashboard's browser test: Debian's Chromium (headless) and a font.
  chromium fonts-dejavu-core
  # The Slurm launcher's integration test: a one-node cluster on localhost
  # (tests/support/slurm_cluster.sh starts and stops it; no service is enabled).
  slurmctld slurmd slurm-client munge
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Node.js runs the parity references (HF's own tokenizer and Jinja, from npm).
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "setup: installing nodejs and npm"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends nodejs npm
fi
# npm projects pinned by their package-lock.json: the parity references
# (HF's tokenizer and Jinja), the real client SDKs of the e2e tests, the
# real agent programs (Claude Code, Codex CLI), the npm agent frameworks of
# the framework suite (tests/e2e/frameworks), the quickstart's example
# agent, and playwright-core for the dashboard's browser test. Skipped when
# the installed copy matches the lock file.
npm_dirs=(examples/quickstart_agent)
[ "$setup_for" = all ] && npm_dirs+=(tests/parity tests/e2e/clients tests/e2e/agents tests/e2e/frameworks tests/dashboard)
for dir in "${npm_dirs[@]}"; do
  if [ ! -f "$dir/node_modules/.package-lock.json" ] || ! cmp -s "$dir/package-lock.json" "$dir/node_modules/.areal-lock-copy"; then
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error && cp package-lock.json node_modules/.areal-lock-copy)
  fi
done
# Claude Code's package carries its native binary; where npm skipped the
# package's postinstall and the binary does not run, its installer places it.
if [ "$setup_for" = all ]; then
  if ! tests/e2e/agents/node_modules/.bin/claude --version >/dev/null 2>&1; then
    (cd tests/e2e/agents/node_modules/@anthropic-ai/claude-code && node install.cjs)
  fi
  tests/e2e/agents/node_modules/.bin/claude --version >/dev/null && tests/e2e/agents/node_modules/.bin/codex --version >/dev/null
fi

# The test suite's pinned Python environments (issue #28), every package at
# the version its lock file names, installed without resolving (--no-deps)
# and never at run time; re-made when the lock changes. Only when the tests
# ask (scripts/test.sh sets AREAL_TEST_PYTHON=1): the quickstart needs none.
#   .venv-tests  agent frameworks, Hugging Face transformers/tokenizers (pip)
#   .venv-vllm   real vLLM on CPU and AReaL's own code: torch 2.x, 188
#                packages, about 3 GB, so by uv (pinned), which fetches in
#                parallel where pip takes minutes
#   .venv-nvcc   nvcc and CUDA's headers (NVIDIA's wheels, about 270 MB), to
#                compile areal's own CUDA kernels where there is no GPU
# Both are byte-compiled at install: uv does not by default, and with
# PYTHONDONTWRITEBYTECODE set nothing else would (docs/backends.md, "Real vLLM
# on CPU", has what that costs). The stamp names the recipe as well as the
# lock, so a venv made by an older recipe is made again.
install_locked_venv() {  # install_locked_venv VENV LOCK pip|uv
  local venv=$1 lock=$2
  local stamp
  stamp="$(cat "$lock")
# recipe 2: byte-compiled"
  [ "$stamp" = "$(cat "$venv/.areal-lock-copy" 2>/dev/null)" ] && return 0
  echo "setup: installing $lock into $venv"
  rm -rf "$venv"
  /usr/bin/python3 -m venv "$venv"
  if [ "$3" = uv ]; then
    "$venv/bin/pip" install --quiet --disable-pip-version-check uv==0.13.8
    "$venv/bin/uv" pip install --quiet --no-deps --compile-bytecode --python "$venv/bin/python" -r "$lock"
  else
    "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps --compile -r "$lock"
  fi
  printf '%s\n' "$stamp" > "$venv/.areal-lock-copy"
}
if [ "${AREAL_TEST_PYTHON:-0}" = 1 ]; then
  install_locked_venv .venv-tests tests/python/requirements.lock pip
  install_locked_venv .venv-vllm tests/python/vllm/requirements.lock uv
  install_locked_venv .venv-nvcc tests/python/nvcc/requirements.lock pip
fi

# libtorch: the one inside an installed PyTorch with CUDA when there is one
# (GPU training and serving), else Debian's CPU build. AREAL_TORCH=pytorch or
# AREAL_TORCH=debian forces either; PYTHON names the PyTorch's interpreter.
torch_args=()
torch_choice=${AREAL_TORCH:-auto}
case "$torch_choice" in auto|pytorch|debian) ;; *) echo "setup: AREAL_TORCH must be auto, pytorch or debian, got '$torch_choice'" >&2; exit 1 ;; esac
if [ "$torch_choice" != debian ]; then
  py=${PYTHON:-python3}
  # Usable only with the C++11 ABI (as Debian's libraries) and a CUDA toolkit (its CMake package needs nvcc).
  prefix=$("$py" -c 'import torch; assert torch.version.cuda and torch.compiled_with_cxx11_abi(); print(torch.utils.cmake_prefix_path)' 2>/dev/null || true)
  if [ -n "$prefix" ] && ! command -v nvcc >/dev/null && [ ! -x /usr/local/cuda/bin/nvcc ]; then
    echo "setup: $py has PyTorch with CUDA, but no CUDA toolkit (nvcc) is installed: using Debian's libtorch" >&2
    [ "$torch_choice" = pytorch ] && exit 1
    prefix=""
  fi
  if [ -n "$prefix" ]; then
    echo "setup: building against the libtorch of $("$py" -c 'import torch; print("PyTorch", torch.__version__)') ($prefix)"
    torch_args=(-DTorch_DIR="$prefix/Torch" -DCMAKE_POLICY_VERSION_MINIMUM=3.5)
  elif [ "$torch_choice" = pytorch ]; then
    echo "setup: AREAL_TORCH=pytorch, but $py has no PyTorch built with CUDA and the C++11 ABI" >&2
    exit 1
  fi
fi
[ ${#torch_args[@]} -gt 0 ] || torch_args=(-DTorch_DIR=/usr/lib/x86_64-linux-gnu/cmake/Torch)

build_dir=${BUILD_DIR:-build}
jobs=${JOBS:-$(nproc)}
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
# Paths relative to the checkout in ccache's hashes, so another clone of the
# repository (CI's fresh one) reuses what this one compiled.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-true}
# Another libtorch than the build folder was configured with: its cached
# library paths would be stale, so configure afresh (ccache keeps it cheap).
want_torch_dir=${torch_args[0]#-DTorch_DIR=}
if [ -f "$build_dir/CMakeCache.txt" ] && ! grep -qx "Torch_DIR:PATH=$want_torch_dir" "$build_dir/CMakeCache.txt"; then
  echo "setup: $build_dir was configured with another libtorch; configuring it afresh"
  rm -rf "$build_dir/CMakeCache.txt" "$build_dir/CMakeFiles"
fi
# The quickstart builds no tests, benchmarks or python_inline (its CPython
# embedding), and builds in unity mode (eight sources a compiler run: the
# JSON and libtorch templates they share are compiled once, not eight times;
# a cold build of what it needs takes about 3 minutes on 2 cores instead of
# 6). The full setup turns them back on, one source a compiler run (what
# ccache and an edit-compile loop want), in the same build folder: its first
# build after a quickstart compiles everything once more. The quickstart
# also compiles at -O1: a third less compile time (2 min 40 s -> 1 min 56 s
# cold), for about 10% more time a training step (libtorch does the numeric
# work either way); the full setup compiles at CMake's Release -O3.
scope_args=(-DAREAL_BUILD_TESTS=ON -DAREAL_BUILD_BENCHMARKS=ON -DAREAL_WITH_PYTHON_INLINE=ON -DCMAKE_UNITY_BUILD=OFF
            "-DCMAKE_CXX_FLAGS_RELEASE=-O3 -DNDEBUG")
[ "$setup_for" = quickstart ] && scope_args=(-DAREAL_BUILD_TESTS=OFF -DAREAL_BUILD_BENCHMARKS=OFF -DAREAL_WITH_PYTHON_INLINE=OFF
                                             -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=8
                                             "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -DNDEBUG")
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "${torch_args[@]}" "${scope_args[@]}"
build_target=()
[ "$setup_for" = quickstart ] && build_target=(--target areal_quickstart)  # CMakeLists.txt says what it holds
cmake --build "$build_dir" -j "$jobs" "${build_target[@]}"
command -v ccache >/dev/null && ccache --show-stats 2>/dev/null | grep -iE "hits|misses" | head -3 || true
