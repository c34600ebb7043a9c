#!/usr/bin/env bash
# Regenerates the generated part of docs/configuration.md (between the
# BEGIN/END markers) from `areal-host config-reference`.
set -euo pipefail
cd "$(dirname "$0")/.."
host=${1:-build/bin/areal-host}
ref=$("$host" config-reference)
/usr/bin/python3 - docs/configuration.md "$ref" <<'PY'
import sys
path, ref = sys.argv[1], sys.argv[2]
doc = open(path).read()
begin, end = "<!-- BEGIN GENERATED: areal-host config-reference -->\n", "<!-- END GENERATED -->"
head, rest = doc.split(begin)
_, tail = rest.split(end)
open(path, "w").write(head + begin + ref.rstrip("\n") + "\n" + end + tail)
PY
echo "docs/configuration.md updated"
