#!/usr/bin/env bash
# usage: check_refusal.sh AREAL_HOST PLUGIN.so "expected reason"
# The host must refuse the plugin: exit code 2, no crash (no signal), and a
# single stderr line "refused: <file>: <reason>" containing the reason.
set -u
host=$1 plugin=$2 expected=$3
err=$("$host" conformance "$plugin" 2>&1 >/dev/null); rc=$?
echo "exit code: $rc"; echo "stderr: $err"
[ "$rc" -eq 2 ] || { echo "FAIL: expected exit code 2"; exit 1; }
[ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] || { echo "FAIL: expected exactly one line"; exit 1; }
case "$err" in
  "refused: $plugin: "*) ;;
  *) echo "FAIL: the line must start with 'refused: $plugin: '"; exit 1 ;;
esac
case "$err" in
  *"$expected"*) echo "OK"; exit 0 ;;
  *) echo "FAIL: expected reason: $expected"; exit 1 ;;
esac
