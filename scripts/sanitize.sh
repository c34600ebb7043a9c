#!/usr/bin/env bash
# The sanitizer job (part of scripts/test.sh, so of CI): builds the unit
# tests and the libFuzzer targets with clang, AddressSanitizer and
# UndefinedBehaviorSanitizer into ./build-sanitize (ccache'd), then runs the
# unit tests (any sanitizer report fails them) and each fuzz target for a
# bounded time (tests/fuzz/run_fuzz.sh; AREAL_FUZZ_SECONDS, default 20).
# Needs what scripts/setup.sh installs (clang, libclang-rt-14-dev).
#   scripts/sanitize.sh [extra ctest args]
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${SANITIZE_BUILD_DIR:-build-sanitize}
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-true}  # clones share hits (setup.sh)
for tool in clang clang++; do
  command -v $tool > /dev/null || { echo "sanitize: $tool is missing: run scripts/setup.sh" >&2; exit 1; }
done
mkdir -p "$dir"
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Sanitize -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DAREAL_SANITIZE=ON -DAREAL_FUZZ_SECONDS="${AREAL_FUZZ_SECONDS:-20}" > "$dir/configure.log" 2>&1 ||
  { tail -30 "$dir/configure.log"; exit 1; }
# Only what the sanitized tests run: the unit tests and the fuzz targets (no libtorch, no e2e).
ninja -C "$dir" areal_unit_tests areal_fuzz_targets
cd "$dir"
# halt_on_error: the first report fails the test; detect_leaks stays on (LeakSanitizer).
export ASAN_OPTIONS=halt_on_error=1:abort_on_error=1:detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
ctest --output-on-failure -j "${JOBS:-$(nproc)}" -L "^(unit|fuzz)$" "$@"
