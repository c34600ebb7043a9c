#!/usr/bin/env bash
# The docs must contain, verbatim, what `areal-host config-reference` and
# `areal-host api-fields` print, so every key, default and API field in
# docs/configuration.md and docs/http-api.md is real.
# Regenerate with: scripts/update-config-docs.sh
set -euo pipefail
host=$1 src=$2
check() {  # check COMMAND DOC
  local ref
  ref=$(mktemp); "$host" "$1" > "$ref"
  /usr/bin/python3 - "$ref" "$src/$2" "$2" <<'PY'
import sys
ref, doc, name = open(sys.argv[1]).read(), open(sys.argv[2]).read(), sys.argv[3]
if ref.strip() not in doc:
    sys.exit(f"{name} is out of date: run scripts/update-config-docs.sh")
print(f"{name} is in sync")
PY
  rm -f "$ref"
}
check config-reference docs/configuration.md
check api-fields docs/http-api.md
