#!/usr/bin/env bash
# Regenerates tests/python/requirements.lock (every package pinned) from
# tests/python/requirements.txt and overrides.txt, for Debian's Python, with
# uv's resolver in a throwaway venv. Run after editing requirements.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
/usr/bin/python3 -m venv "$tmp/venv"
"$tmp/venv/bin/pip" install --quiet --disable-pip-version-check uv==0.13.8
"$tmp/venv/bin/uv" pip compile --quiet --python /usr/bin/python3 --override tests/python/overrides.txt \
  --custom-compile-command scripts/update-python-lock.sh tests/python/requirements.txt -o tests/python/requirements.lock
echo "tests/python/requirements.lock: $(grep -c '==' tests/python/requirements.lock) packages"
