#!/usr/bin/env bash
# The README's library sample is the examples' code, and the examples run:
#   examples.sh SOURCE_DIR BUILD_DIR
# 1. every ```cpp block the README introduces with <!-- example: PATH -->
#    is exactly the file PATH;
# 2. each lesson's server and client run together on this machine.
set -euo pipefail
src=$1
build=$2
fail() { echo "examples.sh: $*" >&2; exit 1; }

# 1. README blocks against the files.
checked=0
while read -r path; do
    block=$(awk -v p="<!-- example: $path -->" '
        $0 == p { want = 1; next }
        want && /^```cpp$/ { inside = 1; next }
        inside && /^```$/ { exit }
        inside { print }' "$src/README.md")
    [ -n "$block" ] || fail "README has no cpp block after <!-- example: $path -->"
    diff -u "$src/$path" <(printf '%s\n' "$block") >&2 ||
        fail "README's copy of $path differs from the file (diff above): update the README"
    checked=$((checked + 1))
done < <(sed -n 's/^<!-- example: \(.*\) -->$/\1/p' "$src/README.md")
[ "$checked" -gt 0 ] || fail "README names no example (<!-- example: PATH -->)"

# 2. Lesson 1: the server prints its port, the client writes, both exit 0.
out=$(mktemp -d)
trap 'kill "$server" 2>/dev/null || true; rm -rf "$out"' EXIT
"$build/examples/weft-01_write_notify-server" 0 >"$out/server" 2>&1 &
server=$!
for _ in $(seq 200); do
    port=$(sed -n 's/^listening on port \([0-9]*\)$/\1/p' "$out/server")
    [ -n "$port" ] && break
    sleep 0.05
done
[ -n "${port:-}" ] || { cat "$out/server" >&2; fail "the lesson 1 server printed no port"; }
timeout 60 "$build/examples/weft-01_write_notify-client" "127.0.0.1:$port" >"$out/client" 2>&1 ||
    { cat "$out/client" "$out/server" >&2; fail "the lesson 1 client failed"; }
wait "$server" || { cat "$out/server" >&2; fail "the lesson 1 server failed"; }
grep -q '^notified with 42: "hello from the client"$' "$out/server" ||
    { cat "$out/server" >&2; fail "the lesson 1 server did not print the client's message"; }
echo "examples.sh: $checked README blocks match their files; lesson 1 ran"
