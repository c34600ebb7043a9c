#!/usr/bin/env bash
# The README's first command: install and build only what the quickstart
# runs (AREAL_SETUP=quickstart: no tests, benchmarks or test packages), make the quickstart's model,
# warm it up on the reply format (configs/quickstart_format.yaml), and run
# the CPU quickstart (configs/quickstart.yaml; README says what to expect).
# Extra arguments are dotted overrides of the RL run, e.g. trainer.total_steps=200.
# --lora first: the LoRA quickstart (configs/quickstart_lora.yaml) on the same
# base and format stage. --moe first: the quickstart on a tiny Qwen3-MoE
# model (configs/quickstart_moe.yaml).
# The base is made with --initializer-range 0.1: its token embeddings are apart,
# as a pretrained model's are, so RL leaves chance within about 50 steps
# instead of 100 to 250, and a LoRA adapter (embeddings frozen) can learn at all
# (docs/algorithms.md, "The quickstart").
set -euo pipefail
cd "$(dirname "$0")/.."
AREAL_SETUP=quickstart scripts/setup.sh
model=runs/quickstart-model format=(experiment.name=quickstart_format) config=configs/quickstart.yaml
family=qwen3 init=(--initializer-range 0.1)
if [ "${1:-}" = --lora ]; then
  shift
  config=configs/quickstart_lora.yaml
elif [ "${1:-}" = --moe ]; then
  shift
  model=runs/quickstart-moe-model format=(experiment.name=quickstart_moe_format train.model_path=../$model)
  config=configs/quickstart_moe.yaml family=qwen3_moe init=()
fi
# A model left by an older checkout (made before the wider init) is made again.
if [ ! -f "$model/model.safetensors" ] || { [ ${#init[@]} -gt 0 ] && ! grep -q '"initializer_range": 0.1' "$model/config.json"; }; then
  ./build/bin/areal-host init-model --family "$family" --preset tiny --tokenizer bytes --out "$model" --seed 1 "${init[@]}"
fi
./build/bin/areal-host sft --config configs/quickstart_format.yaml "${format[@]}"
./build/bin/areal-host run --config "$config" "$@"
