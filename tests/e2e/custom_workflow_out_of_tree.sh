#!/usr/bin/env bash
# The plugin author's path, for real: install areal into a prefix, build the
# example workflow out of tree with find_package(areal), check it with the
# installed areal-host's conformance suite, and run it from YAML.
set -euo pipefail
src=$1 build=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
cmake --install "$build" --prefix "$work/prefix" > "$work/install.log"
test -f "$work/prefix/include/areal/sdk.hpp"
test -f "$work/prefix/lib/cmake/areal/arealConfig.cmake"
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S "$src/examples/custom_workflow" -B "$work/plugin" -DCMAKE_PREFIX_PATH="$work/prefix" \
  -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" > "$work/configure.log"
cmake --build "$work/plugin" > "$work/build.log"
so="$work/plugin/libareal-two_turn_count.so"
test -f "$so"
# Only the entry point is exported.
exported=$(nm -D --defined-only "$so" | awk '{print $3}' | sed 's/@.*//' | grep -v '^AREAL_1$' | sort -u | tr '\n' ' ')
[ "$exported" = "areal_plugin_init " ] || { echo "FAIL: exports: $exported"; exit 1; }
host="$work/prefix/bin/areal-host"
"$host" conformance "$so" | tee "$work/conformance.log"
grep -q "conformance: [0-9]* passed, 0 failed" "$work/conformance.log"
# Run from the YAML in configs/, finding the plugin by name on AREAL_PLUGIN_PATH.
AREAL_PLUGIN_PATH="$work/plugin" "$host" --config "$src/configs/custom_workflow.yaml" \
  rollout.output="$work/rollouts.jsonl" 2> "$work/run.log"
cat "$work/run.log"
grep -q "plugin workflow   two_turn_count 0.1.0 \[workflow\] ABI 1\.[0-9]* from $work/plugin/libareal-two_turn_count.so" "$work/run.log"
grep -q "done: 16 ok, 0 failed" "$work/run.log"
/usr/bin/python3 - "$work/rollouts.jsonl" <<'PY'
import json, sys
records = [json.loads(l) for l in open(sys.argv[1])]
assert len(records) == 16
for r in records:
    first, second = r["completions"]
    # Turn 2's prompt is turn 1's prompt plus turn 1's tokens, exactly.
    assert second["input_ids"] == first["input_ids"] + first["output_ids"], r
    assert abs(r["result"]["total"] - (first["reward"] + second["reward"])) < 1e-12
print("out-of-tree workflow records verified:", len(records))
PY
