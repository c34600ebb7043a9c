#!/usr/bin/env bash
# Programs linked against libtorch must name libstdc++ before it: PyTorch
# 2.11's libtorch.so exports a copy of std::filesystem built against a newer
# libstdc++, and the loader binds a program's calls to the first library that
# defines them. On Debian 12 that copy crashed in fs::remove_all
# (cmake/AREALTorch.cmake names libstdc++ first).
#   link_order.sh PROGRAM...
set -euo pipefail
command -v readelf > /dev/null || { echo "link_order: readelf is missing (binutils)" >&2; exit 1; }
[ $# -gt 0 ] || { echo "link_order: no program named" >&2; exit 1; }
for prog in "$@"; do
  needed=$(readelf -d "$prog" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  first_torch=$(grep -n -m1 -E '^lib(torch|c10)' <<< "$needed" | cut -d: -f1 || true)
  stdcxx=$(grep -n -m1 '^libstdc++\.so' <<< "$needed" | cut -d: -f1 || true)
  [ -n "$first_torch" ] || { echo "link_order: $prog links no libtorch; NEEDED: $(echo $needed)" >&2; exit 1; }
  [ -n "$stdcxx" ] || { echo "link_order: $prog does not name libstdc++; NEEDED: $(echo $needed)" >&2; exit 1; }
  [ "$stdcxx" -lt "$first_torch" ] || { echo "link_order: $prog names libtorch before libstdc++; NEEDED: $(echo $needed)" >&2; exit 1; }
done
echo "link order: libstdc++ before libtorch in $# programs"
