#!/usr/bin/env bash
# `areal-host conformance NAME` for every shipped plugin, by name and with no
# config, as the README shows: each run passes (exit 0) or says which
# configuration it needs (exit 3, "incomplete"); a FAIL (exit 1) would mean a
# broken plugin, so none may appear.
set -euo pipefail
host=$1
names=$("$host" plugins --json | /usr/bin/python3 -c "import json, sys; print(' '.join(x['name'] for x in json.load(sys.stdin)))")
passed=0 incomplete=0
for name in $names; do
  rc=0
  out=$("$host" conformance "$name" 2>&1) || rc=$?
  case $rc in
    0) passed=$((passed + 1)) ;;
    3) grep -q "needs configuration: missing required key" <<<"$out" || { echo "FAIL: $name exited 3 without saying what it needs"; echo "$out"; exit 1; }
       incomplete=$((incomplete + 1)) ;;
    *) echo "FAIL: conformance $name exited $rc"; echo "$out"; exit 1 ;;
  esac
done
[ $((passed + incomplete)) -ge 15 ] || { echo "FAIL: only $((passed + incomplete)) plugins listed"; exit 1; }
echo "conformance by name: $passed passed, $incomplete need configuration, 0 failed"
