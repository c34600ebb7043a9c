#!/usr/bin/env bash
# The README's first command: install and build only what the quickstart
# runs (AREAL_SETUP=quickstart: no tests, benchmarks or test packages), make the quickstart's model,
# warm it up on the reply format (configs/quickstart_format.yaml), and run
# the CPU quickstart (configs/quickstart.yaml; README says what to expect).
# Extra arguments are dotted overrides of the RL run, e.g. trainer.total_steps=200.
set -euo pipefail
cd "$(dirname "$0")/.."
AREAL_SETUP=quickstart scripts/setup.sh
model=runs/quickstart-model
if [ ! -f "$model/model.safetensors" ]; then
  ./build/bin/areal-host init-model --family qwen3 --preset tiny --tokenizer bytes --out "$model" --seed 1
fi
./build/bin/areal-host sft --config configs/quickstart_format.yaml
./build/bin/areal-host run --config configs/quickstart.yaml "$@"
