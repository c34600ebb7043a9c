#!/usr/bin/env bash
# scripts/gpu_check.sh as one call of a lent device machine (the `run` tool),
# within that machine's limits: the call copies this checkout (64 MiB at
# most, so the gpu_bundle.sh folder travels packed), runs at most 600 s, and
# brings back at most 8 files of at most 16 MiB from $OUT, which each call
# empties. So this script
#   - unpacks the packed bundle (headers, libraries, tokenizer) to /tmp;
#   - keeps the build and the models in build-gpu-check/ (ignored by git:
#     kept on the machine between calls while it stays warm, so a second call
#     builds nothing new and reuses the models);
#   - runs the check under LIMIT_S (its whole process group is stopped then),
#     so what it measured still comes back;
#   - packs the report, the log and the small result files into $OUT.
#
# Here, before the call (Debian 12, after scripts/setup.sh):
#   scripts/gpu_bundle.sh && tar -czf gpu-bundle.tar.gz -C gpu-bundle sysroot tokenizers README.txt
# The call (its environment first, as gpu_check.sh takes it):
#   run(command='PARTS="c" scripts/gpu_device_run.sh', carry=["gpu-bundle.tar.gz"], timeout_s=600)
#   then at once: 'PARTS="d e" LIMIT_S=<time left - 40> scripts/gpu_device_run.sh' (docs/gpu.md)
#
# Environment: everything gpu_check.sh reads (PARTS, GEN_CONFIGS, HF_VARIANTS,
# TRAIN_ARGS, GRPO_STEPS, ...), and
#   OUT         where the results go (the device machine sets it)
#   LIMIT_S     the check's time limit in seconds (default 560: inside a 600 s call)
#   BUNDLE_TAR  the packed bundle (default gpu-bundle.tar.gz; without it, the system's packages)
#   TAG         the result files' prefix (default: the parts, e.g. "c-d")
# Exit status: gpu_check's (124 when the limit stopped it, 137 when it had to be killed).
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:?"OUT is not set: where the results go (the device machine sets it)"}
limit=${LIMIT_S:-560}
tag=${TAG:-$(echo "${PARTS:-a b c d}" | tr -s ' ' '-')}
work=${WORK_DIR:-$src/build-gpu-check}
mkdir -p "$out" "$work"
log="$out/$tag.log"
say() { echo "gpu_device_run: $*" | tee -a "$log"; }
: > "$log"

bundle_tar=${BUNDLE_TAR:-$src/gpu-bundle.tar.gz}
if [ -f "$bundle_tar" ]; then
  export AREAL_BUNDLE=/tmp/areal-gpu-bundle
  rm -rf "$AREAL_BUNDLE" && mkdir -p "$AREAL_BUNDLE" && tar -xzf "$bundle_tar" -C "$AREAL_BUNDLE" ||
    { say "FAILED: cannot unpack $bundle_tar"; exit 1; }
  say "bundle: $(head -1 "$AREAL_BUNDLE/README.txt" 2>/dev/null || echo "$bundle_tar")"
else
  say "no $bundle_tar: the build takes its dependencies from the system"
fi
if ! command -v nvcc > /dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH="/usr/local/cuda/bin:$PATH"; fi
say "nvcc: $(nvcc --version 2>/dev/null | tail -1 || echo "none (the engine then runs libtorch's kernels only)")"
say "gpu_check.sh under a ${limit} s limit, PARTS='${PARTS:-a b c d}', WORK_DIR=$work"

t0=$(date +%s)
# timeout puts the check in a process group of its own and stops all of it.
WORK_DIR="$work" timeout -k 10 "$limit" bash "$src/scripts/gpu_check.sh" >> "$log" 2>&1
status=$?
[ $status = 124 ] || [ $status = 137 ] && say "STOPPED at the ${limit} s limit: the report holds the parts that finished"
say "gpu_check exit status $status after $(( $(date +%s) - t0 )) s"

# What comes back: the report, this log, the small files the parts wrote
# (JSON results, logs, the runs' metrics) and the traces, each under 16 MiB.
cp "$work/gpu_check_report.md" "$out/$tag.report.md" 2>/dev/null || say "no report was written"
(cd "$work" && find . -path ./build -prune -o -path ./models -prune -o -path ./profile -prune -o -type f -size -4096k \
  \( -name '*.json' -o -name '*.jsonl' -o -name '*.log' -o -name '*.md' -o -name '*.seconds' \) -print0 |
  tar --null -T - -czf "$out/$tag.results.tgz")
if compgen -G "$work/profile/*.json" > /dev/null; then
  tar -czf "$out/$tag.traces.tgz" -C "$work/profile" . || true
fi
for f in "$out"/*; do
  [ -f "$f" ] || continue
  size=$(stat -c %s "$f")
  if [ "$size" -gt $((16 * 1024 * 1024)) ]; then
    if [ "$f" = "$log" ]; then
      tail -c 8M "$log" > "$log.tail" && mv "$log.tail" "$log"
      say "the log was over 16 MiB: its last 8 MiB came back"
    else
      rm -f "$f"
      say "$(basename "$f") was $((size / 1024 / 1024)) MiB, over the 16 MiB a file may bring back: left out (it is in $work)"
    fi
  fi
done
say "back in \$OUT: $(cd "$out" && ls | tr '\n' ' ')"
exit $status
