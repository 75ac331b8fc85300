#!/usr/bin/env bash
# weft.sh: `demo` builds only the weft program (a fresh machine need not
# compile every test to run the ping-pong), `build` builds everything, both
# quietly. cmake and dpkg-query are stubs that record what weft.sh asks for;
# the target demo names must be a real target of the build in BUILD.
set -euo pipefail
src=$1
build=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/bin"
cat >"$work/bin/cmake" <<'STUB'
#!/usr/bin/env bash
echo "$*" >>"$WEFT_TEST_LOG"
# A build makes the program demo runs.
if [ "$1" = --build ]; then
    mkdir -p "$2/src/tool"
    printf '#!/bin/sh\necho "weft $*"\n' >"$2/src/tool/weft"
    chmod +x "$2/src/tool/weft"
fi
STUB
printf '#!/bin/sh\nprintf "install ok installed"\n' >"$work/bin/dpkg-query"
chmod +x "$work/bin/cmake" "$work/bin/dpkg-query"
fail=0
run() { # MODE ARGS...: weft.sh's output into $work/out, its cmake calls into $work/log
    : >"$work/log"
    WEFT_TEST_LOG=$work/log WEFT_BUILD_DIR=$work/build PATH="$work/bin:$PATH" \
        "$src/weft.sh" "$@" >"$work/out" 2>&1
}

run demo --max-size 8
builds=$(grep -- '^--build' "$work/log" || true)
if [ "$(grep -c . <<<"$builds")" != 1 ] || ! grep -q -- '--target weft-cli$' <<<"$builds"; then
    echo "FAIL demo: expected one build of --target weft-cli, got: $builds" >&2
    fail=1
fi
if [ "$(cat "$work/out")" != "weft pingpong --max-size 8" ]; then
    echo "FAIL demo: expected only the ping-pong's output, got: $(cat "$work/out")" >&2
    fail=1
fi

run build
builds=$(grep -- '^--build' "$work/log" || true)
if [ -z "$builds" ] || grep -q -- '--target' <<<"$builds"; then
    echo "FAIL build: expected a build of everything, got: $builds" >&2
    fail=1
fi
if [ -s "$work/out" ]; then
    echo "FAIL build: expected no output, got: $(cat "$work/out")" >&2
    fail=1
fi

# The target demo builds exists (and is the weft program).
if [ -f "$build/Makefile" ]; then
    targets=$(cmake --build "$build" --target help)
    if ! grep -qw weft-cli <<<"$targets"; then
        echo "FAIL: the build in $build has no target weft-cli" >&2
        fail=1
    fi
fi
grep -q 'add_executable(weft-cli ' "$src/src/tool/CMakeLists.txt" ||
    { echo "FAIL: src/tool/CMakeLists.txt does not define weft-cli" >&2; fail=1; }
[ $fail = 0 ] && echo "ok   weft.sh demo builds weft-cli only; build builds everything"
exit $fail
