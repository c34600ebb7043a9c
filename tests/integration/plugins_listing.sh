#!/usr/bin/env bash
# `areal-host plugins` lists every in-tree plugin with kind, name, version,
# ABI and path, and refuses nothing.
set -euo pipefail
host=$1
out=$("$host" plugins); echo "$out"
# In-tree plugins are built for the host's own ABI ("areal-host X (plugin ABI M.N)").
abi=$("$host" --version | sed -n 's/.*plugin ABI \([0-9]*\)\.\([0-9]*\)).*/\1\\.\2/p')
[ -n "$abi" ] || { echo "FAIL: no ABI in areal-host --version"; exit 1; }
for row in "gateway +gateway +0\.1\.0 +$abi +<built-in>" \
           "inference +mock_inference +1\.0\.0 +$abi +/.*/libareal-mock_inference\.so" \
           "inference +sglang +0\.1\.0 +$abi +/.*/libareal-sglang\.so" \
           "workflow +token_match +1\.0\.0 +$abi +/.*/libareal-token_match\.so" \
           "algorithm +sft +1\.0\.0 +$abi +/.*/libareal-sft\.so"; do
  grep -Eq "^$row$" <<<"$out" || { echo "FAIL: no row matching $row"; exit 1; }
done
# fsdp is built only where libtorch is installed.
"$host" plugins --json | /usr/bin/python3 -c "
import json, sys
names = {x['name'] for x in json.load(sys.stdin)}
core = {'gateway', 'mock_inference', 'sglang', 'vllm', 'token_match', 'rlvr_math', 'subproc', 'agent_pool', 'python_inline', 'sft', 'grpo', 'dr_grpo', 'rloo', 'ppo'}
assert core <= names <= core | {'fsdp', 'local'}, names"
if grep -q "^train " <<<"$out"; then
  grep -Eq "^train +fsdp +0\.1\.0 +$abi +/.*/libareal-fsdp\.so$" <<<"$out"
fi
echo OK
