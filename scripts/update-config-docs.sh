#!/usr/bin/env bash
# Regenerates the generated parts of the docs (between BEGIN/END markers):
# docs/configuration.md from `areal-host config-reference`, and
# docs/http-api.md's compatibility tables from `areal-host api-fields`.
set -euo pipefail
cd "$(dirname "$0")/.."
host=${1:-build/bin/areal-host}
replace() {  # replace DOC COMMAND
  local doc=$1 command=$2 out
  out=$("$host" "$command")
  /usr/bin/python3 - "$doc" "$command" "$out" <<'PY'
import sys
path, command, ref = sys.argv[1:4]
doc = open(path).read()
begin, end = f"<!-- BEGIN GENERATED: areal-host {command} -->\n", "<!-- END GENERATED -->"
head, rest = doc.split(begin)
_, tail = rest.split(end, 1)
open(path, "w").write(head + begin + ref.rstrip("\n") + "\n" + end + tail)
PY
  echo "$doc updated"
}
replace docs/configuration.md config-reference
replace docs/http-api.md api-fields
