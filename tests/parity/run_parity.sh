#!/usr/bin/env bash
# Produces the references with Hugging Face's implementations (npm, offline
# once installed) and checks areal against them.
#   run_parity.sh TOKENIZER_PARITY_BINARY OUT_DIR [TEMPLATE_PARITY_BINARY]
set -euo pipefail
bin=$1 out=$2
here=$(cd "$(dirname "$0")" && pwd)
if [ ! -d "$here/node_modules/tokenizers" ]; then
  echo "tests/parity/node_modules is missing: run scripts/setup.sh (it runs npm ci here)" >&2
  exit 1
fi
mkdir -p "$out"
node "$here/reference.js" "$out/tokenizer_reference.jsonl" --random 500 --seed 20261121
"$bin" "$out/tokenizer_reference.jsonl"
# The same texts through Python's tokenizers (transformers' binding), from the pinned test environment.
venv_python="$here/../../.venv-tests/bin/python"
[ -x "$venv_python" ] || { echo ".venv-tests is missing: run scripts/test.sh (AREAL_TEST_PYTHON=1 scripts/setup.sh makes it)" >&2; exit 1; }
"$venv_python" "$here/reference_tokenizers_python.py" "$out/tokenizer_reference.jsonl" "$out/tokenizer_reference_python.jsonl"
"$bin" "$out/tokenizer_reference_python.jsonl"
if [ $# -ge 3 ]; then
  node "$here/reference_templates.js" "$out/template_reference.jsonl"
  "$3" "$out/template_reference.jsonl"
  # Python Jinja2 (Debian's python3-jinja2), what transformers, SGLang and vLLM render with.
  /usr/bin/python3 -c "import jinja2" 2> /dev/null || { echo "python3-jinja2 is missing: run scripts/setup.sh" >&2; exit 1; }
  /usr/bin/python3 "$here/reference_templates_jinja2.py" "$out/template_reference_jinja2.jsonl"
  "$3" "$out/template_reference_jinja2.jsonl"
  # HF transformers' apply_chat_template and Python tokenizers.
  "$venv_python" "$here/reference_templates_transformers.py" "$out/template_reference_transformers.jsonl"
  "$3" "$out/template_reference_transformers.jsonl"
fi
