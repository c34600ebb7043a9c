#!/usr/bin/env bash
# `areal-host plugins` lists every in-tree plugin with kind, name, version,
# ABI and path, and refuses nothing.
set -euo pipefail
host=$1
out=$("$host" plugins); echo "$out"
for row in "gateway +gateway +0\.1\.0 +1\.1 +<built-in>" \
           "inference +mock_inference +1\.0\.0 +1\.1 +/.*/libareal-mock_inference\.so" \
           "workflow +token_match +1\.0\.0 +1\.1 +/.*/libareal-token_match\.so" \
           "algorithm +sft +1\.0\.0 +1\.1 +/.*/libareal-sft\.so"; do
  grep -Eq "^$row$" <<<"$out" || { echo "FAIL: no row matching $row"; exit 1; }
done
# fsdp is built only where libtorch is installed.
"$host" plugins --json | /usr/bin/python3 -c "
import json, sys
names = {x['name'] for x in json.load(sys.stdin)}
core = {'gateway', 'mock_inference', 'token_match', 'rlvr_math', 'subproc', 'sft', 'grpo', 'dr_grpo', 'rloo', 'ppo'}
assert core <= names <= core | {'fsdp', 'local'}, names"
if grep -q "^train " <<<"$out"; then
  grep -Eq "^train +fsdp +0\.1\.0 +1\.1 +/.*/libareal-fsdp\.so$" <<<"$out"
fi
echo OK
