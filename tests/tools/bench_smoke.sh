#!/usr/bin/env bash
# The benchmarks run: every pattern of weft bench and of the raw baseline, a
# few iterations each, must produce a row per size. No timing is checked.
set -euo pipefail
weft=$1
raw=$2
fail=0
check() { # label command...
    local label=$1 out
    shift
    if ! out=$("$@" 2>&1); then
        echo "FAIL $label: $out" >&2
        fail=1
        return
    fi
    if ! grep -q '"rows":\[{' <<<"$out"; then
        echo "FAIL $label: no rows in: $out" >&2
        fail=1
        return
    fi
    echo "ok   $label"
}
for p in lat-write lat-read lat-notify bw-write bw-read bw-notify rate iops cpu-write; do
    check "weft $p" "$weft" bench "$p" -s 8,4k -n 50 --budget-ms 50 --json
    check "raw $p" "$raw" "$p" -s 8,4k -n 50 --budget-ms 50 --json
done
check "weft reg-cache" "$weft" bench reg-cache -s 4k -n 20 --json
check "weft pool" "$weft" bench pool -s 4k -n 20 --json
check "weft lat-notify shm" "$weft" bench lat-notify -p shm -s 8,64k -n 50 --budget-ms 50 --json
check "raw lat-notify shm" "$raw" lat-notify -p shm -s 8,64k -n 50 --budget-ms 50 --json
check "weft bw-write rdm" "$weft" bench bw-write -p "tcp;ofi_rxm" -s 64k -n 50 --budget-ms 50 --json
check "raw bw-write rdm" "$raw" bw-write -p "tcp;ofi_rxm" -s 64k -n 50 --budget-ms 50 --json
check "weft iops on a progress thread, near the device" "$weft" bench iops -s 4k -n 50 \
    --progress-thread 0 --near-device --json
# The ceilings: a JSON line with a rate above zero; bad input refused with the reason.
if out=$("$raw" --tcp-echo-ceiling 3 -s 4k -q 2 --budget-ms 50 2>&1) &&
    grep -Eq '"ops_per_s": [1-9]' <<<"$out"; then
    echo "ok   raw tcp echo ceiling"
else
    echo "FAIL raw tcp echo ceiling: $out" >&2
    fail=1
fi
if out=$("$raw" --tcp-echo-ceiling 2 -q 999 --budget-ms 50 2>&1) || ! grep -q "queue depth of 1 to 256" <<<"$out"; then
    echo "FAIL raw tcp echo ceiling, depth 999: $out" >&2
    fail=1
else
    echo "ok   raw tcp echo ceiling refuses a depth of 999"
fi
file=$(mktemp)
head -c $((64 << 20)) /dev/zero >"$file"
check "weft iops from a file" "$weft" bench iops -s 4k -n 50 --file "$file" --json
rm -f "$file"
if [ -x "$(command -v gnuplot)" ]; then
    plot=$(mktemp --suffix=.svg)
    "$weft" bench bw-write -s 8,4k,64k -n 20 --budget-ms 20 --plot "$plot" >/dev/null
    grep -q "<svg" "$plot" && echo "ok   plot" || { echo "FAIL plot" >&2; fail=1; }
    rm -f "$plot" "$plot.dat" "$plot.gp"
fi
exit $fail
