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

# Only the verbs cells, bound to this device's address.
weft_env() {
    WEFT_TEST_ADDR=$IP WEFT_LAB_DEVICE=$DEV WEFT_LAB_TYPE=$TYPE \
        WEFT_TEST_PROVIDERS="verbs/MSG,verbs;ofi_rxm/RDM" "$@"
}
export -f weft_env

# The last line of a Catch2 run ("All tests passed (N assertions in M test cases)").
weft_catch() { weft_env "$@" 2>&1 | tail -n 40; return "${PIPESTATUS[0]}"; }
export -f weft_catch

check_weft_cells() { WEFT_TEST_REQUIRE="verbs/MSG,verbs;ofi_rxm/RDM" weft_env "$WEFT_TESTS/weft-test-cells"; }
export -f check_weft_cells
run_check "$DEV" weft_cells check_weft_cells

check_weft_verbs() { weft_catch "$WEFT_TESTS/test_verbs"; }
check_weft_matrix() { weft_catch "$WEFT_TESTS/test_matrix"; }
check_weft_memory() { weft_catch "$WEFT_TESTS/test_memory" "[matrix]"; }
check_weft_progress() { weft_catch "$WEFT_TESTS/test_progress" "[matrix]"; }
check_weft_process() { weft_catch "$WEFT_TESTS/test_process"; }
check_weft_batch() { weft_catch "$WEFT_TESTS/test_features" "[matrix]"; }
export -f check_weft_verbs check_weft_matrix check_weft_memory check_weft_progress check_weft_process \
    check_weft_batch
run_check "$DEV" weft_verbs check_weft_verbs
run_check "$DEV" weft_matrix check_weft_matrix
run_check "$DEV" weft_memory check_weft_memory
run_check "$DEV" weft_progress check_weft_progress
run_check "$DEV" weft_process check_weft_process
run_check "$DEV" weft_batch check_weft_batch

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
