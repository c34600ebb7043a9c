#!/usr/bin/env bash
# Regenerates the pinned Python environments' lock files (every package
# pinned) for Debian's Python, with uv's resolver in a throwaway venv. Run
# after editing a requirements.txt:
#   tests/python/requirements.lock       agent frameworks, HF references (.venv-tests)
#   tests/python/vllm/requirements.lock  vLLM CPU and AReaL (.venv-vllm)
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
/usr/bin/python3 -m venv "$tmp/venv"
"$tmp/venv/bin/pip" install --quiet --disable-pip-version-check uv==0.13.8
"$tmp/venv/bin/uv" pip compile --quiet --python /usr/bin/python3 --override tests/python/overrides.txt \
  --custom-compile-command scripts/update-python-lock.sh tests/python/requirements.txt -o tests/python/requirements.lock
echo "tests/python/requirements.lock: $(grep -c '==' tests/python/requirements.lock) packages"
# Prereleases only where a pin names one (hydra-core, omegaconf) or a
# dependency admits nothing else.
"$tmp/venv/bin/uv" pip compile --quiet --python /usr/bin/python3 --prerelease if-necessary-or-explicit \
  --override tests/python/vllm/overrides.txt --custom-compile-command scripts/update-python-lock.sh \
  tests/python/vllm/requirements.txt -o tests/python/vllm/requirements.lock
{ echo "# Without their declared dependencies (tests/python/vllm/no-deps.txt):"; grep -v '^#' tests/python/vllm/no-deps.txt; } >> tests/python/vllm/requirements.lock
echo "tests/python/vllm/requirements.lock: $(grep -c '==' tests/python/vllm/requirements.lock) packages"
