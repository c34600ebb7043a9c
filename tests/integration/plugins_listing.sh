#!/usr/bin/env bash
# `areal-host plugins` lists every in-tree plugin with kind, name, version,
# ABI and path, and refuses nothing.
set -euo pipefail
host=$1
out=$("$host" plugins); echo "$out"
for row in "gateway +gateway +0\.1\.0 +1\.0 +<built-in>" \
           "inference +mock_inference +1\.0\.0 +1\.0 +/.*/libareal-mock_inference\.so" \
           "workflow +token_match +1\.0\.0 +1\.0 +/.*/libareal-token_match\.so" \
           "algorithm +sft +1\.0\.0 +1\.0 +/.*/libareal-sft\.so"; do
  printf '%s\n' "$out" | grep -Eq "^$row$" || { echo "FAIL: no row matching $row"; exit 1; }
done
"$host" plugins --json | /usr/bin/python3 -c "import json,sys; p=json.load(sys.stdin); assert {x['name'] for x in p} == {'gateway','mock_inference','token_match','sft'}, p"
echo OK
