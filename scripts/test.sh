#!/usr/bin/env bash
# The README's second command (and what CI runs): set up, build, and run the
# whole test suite (labels unit, conformance, integration, e2e), then the
# sanitizer job: the unit tests under ASan + UBSan and a bounded run of each
# fuzz target (label fuzz), from a second, clang build (scripts/sanitize.sh).
# Extra arguments go to the main suite's ctest.
#
# The suite is the CPU suite, built against Debian's libtorch (its Gloo runs
# the multi-rank tests) with no GPU visible; GPUs have scripts/gpu_check.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each stage's wall time, printed at the end: CI has a time limit, and its
# log is where a slow stage shows.
stages=() start=$SECONDS
stage_done() { stages+=("$1 $((SECONDS - start)) s"); start=$SECONDS; }
AREAL_TORCH=${AREAL_TORCH:-debian} AREAL_TEST_PYTHON=1 scripts/setup.sh
stage_done "setup and build:"
status=0
(cd build && CUDA_VISIBLE_DEVICES= ctest --output-on-failure -j "${JOBS:-$(nproc)}" "$@") || status=1
stage_done "main suite:"
scripts/sanitize.sh || status=1
stage_done "sanitizer build and suite:"
echo "test.sh: ${stages[*]/%/;} $SECONDS s in all"
# Why each failed test failed, at the end of the log where CI's excerpt shows it.
[ $status = 0 ] || /usr/bin/python3 scripts/failed_test_tails.py build "${SANITIZE_BUILD_DIR:-build-sanitize}"
exit $status
