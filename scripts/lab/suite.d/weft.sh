# weft's own checks in the fabric lab (sourced by scripts/lab/suite once per
# device, with DEV, IP and TYPE set): the provider matrix, the memory contract,
# the progress guarantee, two processes, classification and the RMA ping-pong,
# all over verbs on this device. The same code passed on tcp and shm on the host.

export WEFT_TESTS=$WEFT_BUILD_DIR/tests
export WEFT_BIN=$WEFT_BUILD_DIR/src/tool/weft
if [[ ! -x $WEFT_TESTS/test_matrix || ! -x $WEFT_BIN ]]; then
    echo "suite.d/weft.sh: no weft build in $WEFT_BUILD_DIR (build it first: ./weft.sh build)" >&2
    run_check "$DEV" weft_build false
    return 0
fi

# Only the verbs cells, bound to this device's address. glibc overwrites
# what is freed (no per-thread cache in front of it), so that a use of freed
# memory inside libfabric crashes at once instead of now and then.
weft_env() {
    WEFT_TEST_ADDR=$IP WEFT_LAB_DEVICE=$DEV WEFT_LAB_TYPE=$TYPE \
        GLIBC_TUNABLES=glibc.malloc.tcache_count=0 MALLOC_PERTURB_=165 \
        WEFT_TEST_PROVIDERS="verbs/MSG,verbs;ofi_rxm/RDM" "$@"
}
export -f weft_env

# The last lines of a Catch2 run ("All tests passed (N assertions in M test
# cases)"), a repeated line once with its count, so that a failure's context
# is not pushed out by the same warning printed by every client.
weft_squeeze() {
    awk '$0 == prev { n++; next }
         { if (n) printf "  (the line above %d more times)\n", n; print; prev = $0; n = 0 }
         END { if (n) printf "  (the line above %d more times)\n", n }'
}
# A run that passes shows its last lines; one that fails shows what surrounds
# its first failures (a failure early in a long run is not pushed out of the
# tail by the test cases after it), then its last lines.
weft_catch() {
    local out rc
    out=$(mktemp)
    weft_env "$@" 2>&1 | weft_squeeze >"$out"
    rc=${PIPESTATUS[0]}
    if [[ $rc -ne 0 ]] && grep -q "FAILED" "$out"; then
        grep -n "FAILED" "$out" | head -n 3 | cut -d: -f1 | while read -r n; do
            echo "  --- at line $n of the run:"
            sed -n "$((n > 25 ? n - 25 : 1)),$((n + 15))p" "$out"
        done
        echo "  --- the run's last lines:"
        tail -n 15 "$out"
    else
        tail -n 60 "$out"
    fi
    rm -f "$out"
    return "$rc"
}
export -f weft_squeeze
export -f weft_catch
# TEST on both verbs cells without the cases SPECS names ('"name*","name*"'), then
# those cases on the MSG cell only: where verbs;ofi_rxm takes minutes under TCG for
# what tcp;ofi_rxm, shm and udp prove in every CI run.
weft_catch_msg_only() { # TEST SPECS
    weft_catch "$1" --durations yes "~${2//,/ ~}" &&
        weft_catch env WEFT_TEST_PROVIDERS=verbs/MSG "$1" --durations yes "$2"
}
export -f weft_catch_msg_only

check_weft_cells() { WEFT_TEST_REQUIRE="verbs/MSG,verbs;ofi_rxm/RDM" weft_env "$WEFT_TESTS/weft-test-cells"; }
export -f check_weft_cells
run_check "$DEV" weft_cells check_weft_cells

check_weft_verbs() { weft_catch "$WEFT_TESTS/test_verbs"; }
check_weft_matrix() { weft_catch "$WEFT_TESTS/test_matrix"; }
check_weft_memory() { weft_catch "$WEFT_TESTS/test_memory" "[matrix]"; }
check_weft_progress() { weft_catch "$WEFT_TESTS/test_progress" "[matrix]"; }
check_weft_process() { weft_catch "$WEFT_TESTS/test_process"; }
check_weft_batch() { weft_catch "$WEFT_TESTS/test_features" "[matrix]"; }
# Reliability over verbs: edges and least privilege, the soak (4 x 10^4
# verified operations here: 10^5 took 37 s on siw under TCG; they run in every
# CI run on tcp and shm), a peer killed mid-stream.
check_weft_edges() { weft_catch "$WEFT_TESTS/test_edges"; }
check_weft_soak() {
    WEFT_SOAK_OPS=40000 weft_env "$WEFT_TESTS/test_soak" --durations yes 2>&1 |
        grep -E "^soak|threads verbs|^[0-9.]+ s: |passed|failed|FAILED|Address|error"
    return "${PIPESTATUS[0]}"
}
check_weft_faults() { weft_catch "$WEFT_TESTS/test_faults" --durations yes "[process]"; }
# What a completion means, many clients on one server, lost peers, lifetimes.
check_weft_contract() { weft_catch "$WEFT_TESTS/test_contract"; }
# Idle and garbage connections, and threads accepting at once, run on the MSG
# cell only: over verbs;ofi_rxm they took 15 and 18 s on rxe under TCG (2.4 and
# 1.6 over MSG), for what is the Server's own logic, not the provider's; they
# run over tcp;ofi_rxm, shm and udp in every CI run.
check_weft_server() {
    weft_catch_msg_only "$WEFT_TESTS/test_server" '"server: idle and garbage*","server: several threads accept*"'
}
check_weft_peer_lost() { weft_catch "$WEFT_TESTS/test_peer_lost" --durations yes; }
check_weft_lifetimes() { weft_catch "$WEFT_TESTS/test_lifetimes"; }
# Many peers on one Node (one domain, one queue), every completion naming its peer.
# 32 peers run on the MSG cell only: over verbs;ofi_rxm they took 127 s on rxe
# under TCG (5.5 s over MSG), nine tenths of the lab's longest check. RDM over
# verbs meets 8 peers here (the notification case), and 32 RDM peers run over
# tcp, shm and udp in every CI run.
check_weft_node() { weft_catch_msg_only "$WEFT_TESTS/test_node" '"node: 32 peers*"'; }
check_weft_node_sleep() { weft_catch "$WEFT_TESTS/test_node_sleep"; }
# Ranks as threads on the verbs cells: every link of a ring connects from
# both ends at once, then a mesh connects on first use.
check_weft_group() { weft_catch "$WEFT_TESTS/test_group" "[group][threads]"; }
# Transfers on the verbs cells: 1, 17 and 1,024 blocks to 1, 3 and 8 peers, each target
# checking its bytes when its one notification arrives (on iWARP a framed message after
# the writes), with payloads and after completion; a count of notifications from 8 writers.
# The whole grid passed on both (stop 39: 251 s on rxe under TCG, 260 on siw), more than
# CI's time allows: each device runs it up to 17 blocks and 3 peers (WEFT_TEST_ASYNC_SMALL;
# every CI cell on the host runs it whole), and WEFT_LAB_EVERY_DEVICE=1 runs it whole here.
check_weft_async() {
    if [[ ${WEFT_LAB_EVERY_DEVICE:-0} != 1 && $TYPE != hw ]]; then
        WEFT_TEST_ASYNC_SMALL=1 weft_catch "$WEFT_TESTS/test_async" --durations yes "[transfer],[notify]"
    else
        weft_catch "$WEFT_TESTS/test_async" --durations yes "[transfer],[notify]"
    fi
}
export -f check_weft_node check_weft_node_sleep check_weft_group check_weft_async
export -f check_weft_verbs check_weft_matrix check_weft_memory check_weft_progress check_weft_process \
    check_weft_batch check_weft_edges check_weft_soak check_weft_faults check_weft_contract \
    check_weft_server check_weft_peer_lost check_weft_lifetimes
# The five longest checks (about a minute each under TCG) run on one kind of
# device each, so that the lab fits CI's time: many peers and many clients on
# Soft-RoCE; killed and lost peers, and the soak, on soft-iWARP (its
# connections are TCP's, and its reads have a quirk the soak watches). Every
# other check runs on both; WEFT_LAB_EVERY_DEVICE=1, or --device, runs all
# five on every device (and a real device runs them all).
on_type() { # TYPE NAME: true where NAME runs on this device
    [[ $TYPE == "$1" || $TYPE == hw || ${WEFT_LAB_EVERY_DEVICE:-0} == 1 || ${#ONLY_DEVS[@]} -gt 0 ]] && return 0
    echo "LAB-NOTE $DEV $2: runs on the $1 device only (WEFT_LAB_EVERY_DEVICE=1: on every device)"
    return 1
}
run_check "$DEV" weft_verbs check_weft_verbs
run_check "$DEV" weft_matrix check_weft_matrix
run_check "$DEV" weft_memory check_weft_memory
run_check "$DEV" weft_progress check_weft_progress
run_check "$DEV" weft_process check_weft_process
run_check "$DEV" weft_batch check_weft_batch
run_check "$DEV" weft_edges check_weft_edges
on_type siw weft_soak && WEFT_LAB_CHECK_TIMEOUT=600 run_check --show "$DEV" weft_soak check_weft_soak
on_type siw weft_faults && run_check "$DEV" weft_faults check_weft_faults
run_check "$DEV" weft_contract check_weft_contract
on_type rxe weft_server && run_check "$DEV" weft_server check_weft_server
on_type siw weft_peer_lost && run_check "$DEV" weft_peer_lost check_weft_peer_lost
run_check "$DEV" weft_lifetimes check_weft_lifetimes
on_type rxe weft_node && WEFT_LAB_CHECK_TIMEOUT=600 run_check "$DEV" weft_node check_weft_node
run_check "$DEV" weft_node_sleep check_weft_node_sleep
run_check "$DEV" weft_group check_weft_group
WEFT_LAB_CHECK_TIMEOUT=600 run_check "$DEV" weft_async check_weft_async

# The main job over verbs: MSG (the fast path) and RDM, both ends on this device.
check_weft_pingpong() { # msg|rdm
    local kind=$1
    "$WEFT_BIN" pingpong --provider verbs "--$kind" --bind "$IP" --max-size 65536 \
        --budget-ms 300 --timeout 60 >"$WEFT_LAB_OUT/$DEV-pingpong-$kind.txt" 2>&1 || {
        cat "$WEFT_LAB_OUT/$DEV-pingpong-$kind.txt"
        return 1
    }
    cat "$WEFT_LAB_OUT/$DEV-pingpong-$kind.txt"
    # detail: one-way latency at 8 B and 4 KiB
    awk '$1=="8"{a=$6} $1=="4k"{b=$6} END{printf "8 B %s us, 4 KiB %s us one-way\n", a, b}' \
        "$WEFT_LAB_OUT/$DEV-pingpong-$kind.txt" >"$WEFT_LAB_DETAIL_FILE"
}
export -f check_weft_pingpong
run_check --show "$DEV" weft_pingpong_msg check_weft_pingpong msg
run_check --show "$DEV" weft_pingpong_rdm check_weft_pingpong rdm

# weft info and weft doctor on a machine with RDMA: doctor's exit status 0 says
# weft can run RDMA here; info shows the classification.
check_weft_doctor() { "$WEFT_BIN" doctor && "$WEFT_BIN" info | sed -n '/RDMA devices/,/^$/p'; }
export -f check_weft_doctor
run_check "$DEV" weft_doctor check_weft_doctor

# Network faults on the tcp path (once, not per device): this guest's kernel has
# sch_netem, the host's does not. A namespace and a veth pair made by the test.
if [[ $DEV == "${WEFT_LAB_FIRST_DEVICE:-rxe0}" ]]; then
    check_weft_netfaults() {
        modprobe -q sch_netem 2>/dev/null
        modprobe -q veth 2>/dev/null
        "$WEFT_TESTS/test_netfaults" 2>&1 | grep -E "loss|link down|passed|failed|FAILED|skipped|netem" | head -n 20
        return "${PIPESTATUS[0]}"
    }
    export -f check_weft_netfaults
    run_check --show net weft_netfaults check_weft_netfaults
    # Loss on one rank's link of a ring and a mesh of 4 ranks, each in a namespace
    # behind a bridge (tests/groups/topologies.cpp): every block still verified.
    check_weft_topology_netem() {
        modprobe -q sch_netem 2>/dev/null
        modprobe -q veth 2>/dev/null
        modprobe -q bridge 2>/dev/null
        local out rc
        out=$("$WEFT_TESTS/test_topologies" "[netem]" 2>&1)
        rc=$?
        printf '%s\n' "$out" | weft_squeeze | tail -n 30
        [[ $rc -eq 0 && $out != *SKIPPED* ]] # here netem must run, not skip
    }
    export -f check_weft_topology_netem
    WEFT_LAB_CHECK_TIMEOUT=600 run_check --show net weft_topology_netem check_weft_topology_netem
fi
