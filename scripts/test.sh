#!/usr/bin/env bash
# The README's second command (and what CI runs): set up, build, and run the
# whole test suite (labels unit, conformance, integration, e2e).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cd build
ctest --output-on-failure -j "${JOBS:-$(nproc)}" "$@"
