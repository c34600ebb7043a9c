#!/usr/bin/env bash
# Statuses cannot be dropped silently: a plugin that ignores the status a
# slot returns gets a compiler warning (AREAL_MUST_USE in plugin_api/), in C
# and in C++; the same calls with the status kept compile clean.
set -euo pipefail
cc=$1 cxx=$2 include=$3 src=$4
for compiler in "$cc -x c -std=c99" "$cxx -x c++ -std=c++17"; do
  out=$($compiler -c -o /dev/null -Wall -I "$include" "$src" 2>&1 || true)
  n=$(grep -c "ignoring return value" <<<"$out" || true)
  [ "$n" -eq 3 ] || { echo "FAIL: $compiler: $n of 3 dropped statuses warned"; echo "$out"; exit 1; }
  clean=$($compiler -c -o /dev/null -Wall -Werror -DIGNORE_NONE -I "$include" "$src" 2>&1) || { echo "FAIL: $compiler: kept statuses do not compile clean"; echo "$clean"; exit 1; }
done
echo "status_must_be_used: dropped statuses warn in C and C++, kept ones compile clean"
