#!/usr/bin/env bash
# Every shipped config validates: its keys against the host's and each
# plugin's schema, and every plugin it names resolves. (custom_workflow.yaml
# names an out-of-tree plugin; e2e.custom_workflow_out_of_tree runs it.)
set -euo pipefail
host=$1 src=$2
n=0
for config in "$src"/configs/*.yaml; do
  [ "$(basename "$config")" = custom_workflow.yaml ] && continue
  "$host" check-config "$config" > /dev/null || { echo "FAIL: $config does not validate"; exit 1; }
  n=$((n + 1))
done
[ "$n" -ge 4 ] || { echo "FAIL: expected at least 4 configs, checked $n"; exit 1; }
echo "OK: $n configs validate"
