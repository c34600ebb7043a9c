#!/usr/bin/env bash
# docs/configuration.md must contain, verbatim, what `areal-host
# config-reference` prints, so every key and default in the docs is real.
# Regenerate with: scripts/update-config-docs.sh
set -euo pipefail
host=$1 src=$2
ref=$(mktemp); "$host" config-reference > "$ref"
/usr/bin/python3 - "$ref" "$src/docs/configuration.md" <<'PY'
import sys
ref, doc = open(sys.argv[1]).read(), open(sys.argv[2]).read()
if ref not in doc:
    sys.exit("docs/configuration.md is out of date: run scripts/update-config-docs.sh")
print("configuration reference is in sync")
PY
