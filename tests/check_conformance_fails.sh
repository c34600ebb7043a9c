#!/usr/bin/env bash
# usage: check_conformance_fails.sh AREAL_HOST PLUGIN.so "expected detail"
# The plugin loads but misbehaves: conformance must exit 1 (not crash) and
# report a [FAIL] line carrying the plugin's own error message.
set -u
host=$1 plugin=$2 expected=$3
out=$("$host" conformance "$plugin" 2>&1); rc=$?
echo "$out"
[ "$rc" -eq 1 ] || { echo "FAIL: expected exit code 1, got $rc"; exit 1; }
grep -q "^\[FAIL\].*$expected" <<<"$out" || { echo "FAIL: no [FAIL] line with '$expected'"; exit 1; }
echo OK
