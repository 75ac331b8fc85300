#!/usr/bin/env bash
# Installs weft from BUILD into a scratch prefix, then builds and runs a small
# consumer against it twice: through find_package(weft) and through pkg-config.
set -euo pipefail
build=$1
work=$2
src=$(cd "$(dirname "$0")" && pwd)/consumer
rm -rf "$work"
mkdir -p "$work"
cmake --install "$build" --prefix "$work/prefix" >"$work/install.log"
cmake -S "$src" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$work/prefix" >"$work/configure.log"
cmake --build "$work/cmake" >"$work/build.log"
LD_LIBRARY_PATH="$work/prefix/lib:$work/prefix/lib/$(gcc -dumpmachine)" "$work/cmake/consumer"
export PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig:$work/prefix/lib/$(gcc -dumpmachine)/pkgconfig"
# shellcheck disable=SC2046
g++ "$src/main.cpp" -o "$work/consumer-pc" $(pkg-config --cflags --libs weft)
LD_LIBRARY_PATH="$work/prefix/lib:$work/prefix/lib/$(gcc -dumpmachine)" "$work/consumer-pc"
test -x "$work/prefix/bin/weft"
"$work/prefix/bin/weft" --version
