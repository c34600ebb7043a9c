#!/usr/bin/env bash
# The README's first command: set up, build, and run the CPU quickstart.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
./build/bin/areal-host --config configs/quickstart.yaml "$@"
