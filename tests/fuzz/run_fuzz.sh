#!/usr/bin/env bash
# One fuzz target's ctest: replay its regressions (every input that once
# crashed it), then fuzz from its committed seed corpus for SECONDS. New
# interesting inputs go to a scratch corpus, not the repository; a crash
# leaves its input in the work dir and fails the test with the reproducer
# command (copy the input to regressions/<target>/ once fixed).
#   run_fuzz.sh TARGET_BINARY FUZZ_SOURCE_DIR SECONDS
set -euo pipefail
bin=$1 src=$2 seconds=$3
name=$(basename "$bin")
seeds="$src/corpus/$name"
[ -d "$seeds" ] && [ -n "$(ls -A "$seeds")" ] || { echo "no seed corpus at $seeds"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/corpus"
regressions=("$src/regressions/$name"/*)
if [ -e "${regressions[0]}" ]; then
  "$bin" -rss_limit_mb=2048 -timeout=10 "${regressions[@]}" > "$work/replay.log" 2>&1 ||
    { tail -40 "$work/replay.log"; echo "$name: a regression input fails again"; exit 1; }
  echo "$name: ${#regressions[@]} regression inputs pass"
fi
cd "$work"
if ! "$bin" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -max_len=65536 -print_final_stats=1 \
     "$work/corpus" "$seeds" > "$work/fuzz.log" 2>&1; then
  tail -60 "$work/fuzz.log"
  crash=$(ls "$work"/crash-* "$work"/timeout-* "$work"/oom-* "$work"/leak-* 2>/dev/null | head -1 || true)
  [ -n "$crash" ] && { mkdir -p "/tmp/areal-fuzz-findings"; cp "$crash" /tmp/areal-fuzz-findings/; echo "input kept: /tmp/areal-fuzz-findings/$(basename "$crash") (reproduce: $bin /tmp/areal-fuzz-findings/$(basename "$crash"))"; }
  echo "$name: FAILED"
  exit 1
fi
runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/fuzz.log" | grep -o '[0-9]*$' || echo "?")
cov=$(grep -o 'cov: [0-9]*' "$work/fuzz.log" | tail -1 || true)
echo "$name: $runs inputs in ${seconds} s from $(ls "$seeds" | wc -l) seeds, $cov, no crash"
