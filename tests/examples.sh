#!/usr/bin/env bash
# The README's and docs/' code samples are the examples' code, and the
# examples run:
#   examples.sh SOURCE_DIR BUILD_DIR
# 1. every ```cpp block README.md or a docs/*.md page introduces with
#    <!-- example: PATH --> is exactly the file PATH;
# 2. each lesson that needs no launcher runs on this machine: its server, its
#    clients against it, every exit status and the lines each promises (lessons
#    4 and 5 need a launcher or etcd: tests/group*.cpp and tests/service.cpp).
set -euo pipefail
src=$1
build=$2
fail() { echo "examples.sh: $*" >&2; exit 1; }

# 1. The README's and docs/ pages' blocks against the files.
checked=0
for page in "$src/README.md" "$src"/docs/*.md; do
    name=${page#"$src/"}
    while read -r path; do
        block=$(awk -v p="<!-- example: $path -->" '
            $0 == p { want = 1; next }
            want && /^```cpp$/ { inside = 1; next }
            inside && /^```$/ { exit }
            inside { print }' "$page")
        [ -n "$block" ] || fail "$name has no cpp block after <!-- example: $path -->"
        [ -f "$src/$path" ] || fail "$name shows $path, which does not exist"
        diff -u "$src/$path" <(printf '%s\n' "$block") >&2 ||
            fail "$name's copy of $path differs from the file (diff above): update $name"
        checked=$((checked + 1))
    done < <(sed -n 's/^<!-- example: \(.*\) -->$/\1/p' "$page")
done
[ "$checked" -gt 0 ] || fail "README and docs/ name no example (<!-- example: PATH -->)"
echo "examples.sh: $checked blocks in README.md and docs/ are their files"

# 2. The lessons. Every program runs under timeout: nothing here can hang.
out=$(mktemp -d)
servers=()
trap 'for p in "${servers[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$out"' EXIT
ex=$build/examples

# start LESSON [ARGS...]: LESSON's server on a free port; sets $server and $port.
start() {
    local lesson=$1
    shift
    : >"$out/$lesson.server" # there before the loop below reads it
    timeout 120 "$ex/weft-$lesson-server" 0 "$@" >"$out/$lesson.server" 2>&1 &
    server=$!
    servers+=("$server")
    port=
    for _ in $(seq 400); do
        port=$(sed -n 's/^listening on port \([0-9]*\)$/\1/p' "$out/$lesson.server")
        [ -n "$port" ] && return
        sleep 0.05
    done
    cat "$out/$lesson.server" >&2
    fail "the $lesson server printed no port"
}
# client LESSON NAME ARGS...: runs LESSON's client, its output in $out/LESSON.NAME.
client() {
    local lesson=$1 name=$2
    shift 2
    timeout 60 "$ex/weft-$lesson-client" "$@" >"$out/$lesson.$name" 2>&1 || {
        cat "$out/$lesson.$name" "$out/$lesson.server" >&2
        fail "$lesson: $name failed"
    }
}
# finish LESSON: its server exits 0.
finish() { wait "$server" || { cat "$out/$1.server" >&2; fail "the $1 server failed"; }; }
# expect FILE LINE: FILE has LINE (a whole-line regular expression).
expect() { grep -qx -- "$2" "$1" || { cat "$1" >&2; fail "$(basename "$1") lacks the line: $2"; }; }

# Lesson 1: the client writes with a notification; the server prints the message.
start 01_write_notify
client 01_write_notify client "127.0.0.1:$port"
finish 01_write_notify
expect "$out/01_write_notify.server" 'notified with 42: "hello from the client"'

# Lesson 2: the client reads the passive server's 1 MiB and checks every byte.
start 02_passive_read
client 02_passive_read client "127.0.0.1:$port"
finish 02_passive_read
expect "$out/02_passive_read.client" 'read 1048576 bytes over .*: every byte as written'
expect "$out/02_passive_read.server" 'served 1048576 bytes without polling'

# Lesson 3: four clients at once against one server.
start 03_many_clients 4
pids=()
for id in 0 1 2 3; do
    client 03_many_clients "client$id" "127.0.0.1:$port" "$id" &
    pids+=($!)
done
for id in 0 1 2 3; do
    wait "${pids[$id]}" || exit 1 # client() said why
    expect "$out/03_many_clients.client$id" "client $id: written"
    expect "$out/03_many_clients.server" "client $id: verified"
done
finish 03_many_clients
expect "$out/03_many_clients.server" 'all 4 clients verified'
echo "examples.sh: $checked blocks of README.md and docs/ match their files; lessons 1, 2 and 3 ran"
