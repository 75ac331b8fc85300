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
# The .pc file leaves the language standard to its users: weft's headers need
# C++20 or later, and a consumer on a later one must not be forced back.
if pkg-config --cflags weft | grep -q -- '-std='; then
    echo "weft.pc forces a language standard: $(pkg-config --cflags weft)" >&2
    exit 1
fi
# A consumer building with warnings as errors gets none from weft's headers.
# shellcheck disable=SC2046
g++ -std=c++20 -Wall -Wextra -Wpedantic -Werror "$src/main.cpp" -o "$work/consumer-pc" \
    $(pkg-config --cflags --libs weft)
LD_LIBRARY_PATH="$work/prefix/lib:$work/prefix/lib/$(gcc -dumpmachine)" "$work/consumer-pc"
test -x "$work/prefix/bin/weft"
"$work/prefix/bin/weft" --version
