#!/usr/bin/env bash
# weft.sh: set up, build and run weft on Debian 12 (as root, or a user with sudo).
#
#   ./weft.sh demo [ARGS]  install what is needed, build the weft program, run the RMA
#                          ping-pong (both ends here; ARGS go to `weft pingpong`)
#   ./weft.sh test         install what is needed, build everything, run every test
#   ./weft.sh build        install and build everything
#   ./weft.sh lab          install, build, run the fabric lab (verbs over rxe and siw)
#   ./weft.sh bench [WHAT] install the tools weft is compared with, build, and run
#                          bench/compare.py, kv_vs_redis.py, allreduce_vs_mpi.py or
#                          iops_vs_fio.py (WHAT: transport, kv, allreduce or iops; ARGS
#                          after it go to the script)
#
# Idempotent, and quiet on success apart from results: the output of package
# installs and builds is shown only when they fail.
#
# What runs where: everything on this machine, with the packages it installs
# here from the lists below, except the fabric lab (`lab`, the end of `test`),
# which boots Debian's kernel in a QEMU guest over this machine's root file
# system, read-only (scripts/lab). CI (.ci/run) runs `demo`, `test` and `demo`
# again in a freshly made Debian 12 root (scripts/ci/fresh-root), so a package
# missing from the lists fails CI. A test that skips itself because a program
# these lists should have brought is missing fails `test` too (run_ctest).
set -euo pipefail
cd "$(dirname "$0")"
root=$PWD
build=${WEFT_BUILD_DIR:-$root/build}
export DEBIAN_FRONTEND=noninteractive

# Everything weft builds with, from Debian's archive (see docs/building.md: Dependencies).
# libasio-dev: header-only, for the opt-in Asio adapter (weft/asio.hpp) and its tests.
# mount (Priority: required, but not in a container's minimal root): the fabric
# lab's guest mounts its file systems with it, and `weft doctor`'s tests their
# mount namespaces.
packages=(build-essential cmake pkg-config git
          libfabric-dev libfabric-bin libibverbs-dev librdmacm-dev ibverbs-providers rdma-core
          catch2 libfmt-dev libcli11-dev nlohmann-json3-dev libnuma-dev libssl-dev gnuplot-nox
          iproute2 libpmix-dev libcurl4-openssl-dev libasio-dev mount)
# For `./weft.sh test` only: libFuzzer (clang) for the fuzz targets, and
# Open MPI's mpirun to launch groups through PMIx, and etcd for the etcd store,
# and Slurm with munge (its authentication) so that a test can start a one-node
# cluster of its own and launch a group with srun --mpi=pmix (its mpi_pmix_v4
# plugin, in slurm-wlm-basic-plugins, dlopens libpmix.so from libpmix-dev).
# libc6-dbg: ld.so's symbols, without which ThreadSanitizer cannot name
# _dl_call_fini in its report of libfabric's destructor unlocking a mutex it
# never locked at exit, tests/tsan.supp's suppression does not match, and
# every TSan test fails at exit.
test_packages=(clang libclang-rt-14-dev openmpi-bin etcd-server slurm-wlm munge libc6-dbg)
# For `./weft.sh bench` only: what the benchmarks run beside weft (bench/README.md).
bench_packages=(libfabric-bin ucx-utils iperf3 valgrind redis-server redis-tools fio
                openmpi-bin libopenmpi-dev python3)

log=$(mktemp)
trap 'rm -f "$log"' EXIT

quietly() {
    if ! "$@" >"$log" 2>&1; then
        cat "$log" >&2
        echo "weft.sh: failed: $*" >&2
        exit 1
    fi
}

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo --preserve-env=DEBIAN_FRONTEND "$@"; fi
}

install_deps() {
    local missing=() p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
            missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    echo "weft.sh: installing ${missing[*]}"
    quietly as_root apt-get update -qq
    quietly as_root apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

# weft.sh builds the library in batches of 8 files (a unity build: each batch
# parses the headers once; the sanitized library compiles in a third of the
# time), and so does the fuzz build (tests/fuzz/run). A plain cmake build
# compiles file by file; CI does not (each file must include what it uses).
configure_only() { # DIR [CMAKE ARGS...]
    local dir=$1
    shift
    quietly cmake -S "$root" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWEFT_UNITY_LIBRARY=ON "$@"
}

configure_and_build() { # DIR [CMAKE ARGS...]: everything
    configure_only "$@"
    quietly cmake --build "$1" -j "$(nproc)"
}

# The plain build ($build): optimized as users build it, with line tables only
# (-g1: a third less compile time than -g, and backtraces still name the lines).
# The same flags for every command, so that one command's build is the next
# one's (with -g for demo and -g1 for test, test after demo compiled the library
# and the weft program again).
plain="-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG"

configure_and_build_cli() { # DIR: only the weft program (src/tool) and what it links
    configure_only "$1" "$plain"
    quietly cmake --build "$1" -j "$(nproc)" --target weft-cli
}

run_ctest() { # DIR LABEL [CTEST ARGS...] (CTEST_JOBS: tests at once, one per core by default)
    local dir=$1 label=$2
    shift 2
    local out
    if ! out=$(ctest --test-dir "$dir" --output-on-failure -j "${CTEST_JOBS:-$(nproc)}" \
        --output-junit "$dir/ctest-results.xml" "$@" 2>&1); then
        echo "$out" >&2
        echo "weft.sh: $label tests failed" >&2
        exit 1
    fi
    echo "$out" | grep -E "tests passed|Total Test time" | sed "s/^/weft.sh: $label: /"
    skips "$dir/ctest-results.xml" "$label"
}

# Why tests skipped themselves (WEFT_SKIP_IF's "SKIPPED: why", which Catch wraps
# at 79 columns, in every test's output in ctest's JUnit file): one line a reason,
# with the number of tests. A reason saying a program is not installed, or that
# `./weft.sh test` installs it, fails the run: the lists above miss its package.
skips() { # JUNIT LABEL
    local reasons
    reasons=$(awk '
        /^  SKIPPED: / { if (on) print why; sub(/^  SKIPPED: /, ""); why = $0; on = 1; next }
        on && /^  [^ ]/ { sub(/^ +/, ""); why = why " " $0; next }
        on { print why; on = 0 }
        END { if (on) print why }' "$1" |
        sed "s/&quot;/\"/g; s/&apos;/'/g; s/&lt;/</g; s/&gt;/>/g; s/&amp;/\&/g" |
        sort | uniq -c | sed -E 's/^ *([0-9]+) (.*)$/\2 (\1 tests)/; s/ \(1 tests\)$/ (1 test)/')
    [ -n "$reasons" ] || return 0
    echo "$reasons" | sed "s/^/weft.sh: $2: skipped: /"
    if grep -Eq 'is not installed|weft\.sh test installs' <<<"$reasons"; then
        echo "weft.sh: $2: tests skipped for want of a program weft.sh installs (above): its package is missing from weft.sh's lists, or did not install" >&2
        exit 1
    fi
}

# "weft.sh: [12:34] what": the minutes into `weft.sh test`, so that each phase's
# share of CI's time shows.
stamp() { printf 'weft.sh: [%02d:%02d] %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*"; }

lab() {
    local out
    if ! out=$(WEFT_BUILD_DIR=$build "$root/scripts/lab/run" --timeout 1500 2>&1); then
        echo "$out" >&2
        echo "weft.sh: the fabric lab failed" >&2
        exit 1
    fi
    echo "$out" | grep -E "^LAB-RESULT|^LAB-NOTE|^LAB-SUMMARY|^lab: (PASS|FAIL)" | sed 's/^/weft.sh: lab: /'
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
demo)
    install_deps "${packages[@]}"
    configure_and_build_cli "$build"
    exec "$build/src/tool/weft" pingpong "$@"
    ;;
build)
    install_deps "${packages[@]}"
    configure_and_build "$build" "$plain"
    ;;
test)
    install_deps "${packages[@]}" "${test_packages[@]}"
    stamp "installed"
    # From the plain build only what runs from it: the weft program, the
    # benchmarks, and the tests the fabric lab runs (named in its suite); the
    # sanitized build builds every test.
    configure_only "$build" "$plain"
    mapfile -t lab_tests < <(grep -o '\$WEFT_TESTS/[A-Za-z0-9_-]*' "$root"/scripts/lab/suite.d/*.sh |
        sed 's|.*/||' | sort -u)
    quietly cmake --build "$build" -j "$(nproc)" --target weft-cli weft-benchmarks "${lab_tests[@]}"
    stamp "built the weft program, the benchmarks and the lab's tests"
    "$build/tests/weft-test-cells"
    # Every test runs once, under AddressSanitizer and UBSan (below); from the
    # plain build only what the sanitized build has not: the installed package
    # used by a project outside the tree, and the benchmark programs. The plain
    # build runs on real verbs devices in the fabric lab, last.
    run_ctest "$build" "tests" -R '^(install|bench)[.]'
    # Sanitized builds: without the benchmarks, at -O1 with line tables only, which
    # the sanitizers' stacks need (at -O0 the tests ran a quarter longer than the
    # build saved).
    sanitized=(-DWEFT_BUILD_BENCH=OFF "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG")
    configure_and_build "$build-asan" -DWEFT_SANITIZE=ON "${sanitized[@]}"
    stamp "built with ASan+UBSan"
    # One test more than cores: with one per core they left the CPUs idle 40-65 %
    # of the time (processes starting, peers and deadlines waited for).
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
        LSAN_OPTIONS=suppressions=$root/tests/lsan.supp \
        UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 CTEST_JOBS=$(($(nproc) + 1)) \
        run_ctest "$build-asan" "ASan+UBSan" -E '^install[.]'
    stamp "ran the tests with ASan+UBSan"
    # ThreadSanitizer where threads meet: progress threads, servers' accept
    # loops, threads sharing endpoints, stores' and groups' own threads. Not the
    # KV node's (one thread per process), nor tests whose threads are other
    # processes', nor the tools' (one thread; a name only matched): the weft
    # program is not built with TSan. Only the executables those tests are in
    # are built.
    tsan_tests="threads|progress|bootstrap|process|faults|server|barrier"
    # (The ASan build names them: a test is discovered once its executable is
    # built; the executables not built are listed as NAME_NOT_BUILT-HASH.)
    tsan_not="^kv:|^two processes|doctor --shm-peer|^peer lost: of three clients|writer killed mid-transfer|^tools:|_NOT_BUILT"
    configure_only "$build-tsan" -DWEFT_TSAN=ON "${sanitized[@]}"
    mapfile -t tsan_targets < <(ctest --test-dir "$build-asan" -N -V -R "$tsan_tests" -E "$tsan_not" |
        sed -n 's|^.*Test command: \([^ ]*\).*$|\1|p' | xargs -n1 basename | sort -u)
    quietly cmake --build "$build-tsan" -j "$(nproc)" --target "${tsan_targets[@]}"
    stamp "built with TSan: ${tsan_targets[*]}"
    TSAN_OPTIONS=halt_on_error=1:suppressions=$root/tests/tsan.supp \
        run_ctest "$build-tsan" "TSan" -R "$tsan_tests" -E "$tsan_not"
    stamp "ran the tests with TSan"
    # libFuzzer over what weft reads from the network: RemoteRegion decoding
    # and the bootstrap handshake (bounded run; findings fail the run).
    "$root/tests/fuzz/run" "${WEFT_FUZZ_SECONDS:-20}" | sed 's/^/weft.sh: /'
    stamp "fuzzed"
    # Real verbs devices: Soft-RoCE and soft-iWARP in a QEMU guest, running the
    # same tests over verbs, the ping-pong, and perftest for comparison.
    lab
    stamp "ran the fabric lab"
    ;;
bench)
    what=${1:-transport}
    [ $# -gt 0 ] && shift
    install_deps "${packages[@]}" "${bench_packages[@]}"
    configure_and_build "$build" "$plain"
    case "$what" in
    transport) exec "$root/bench/compare.py" "$@" ;;
    kv) exec "$root/bench/kv_vs_redis.py" "$@" ;;
    allreduce) exec "$root/bench/allreduce_vs_mpi.py" "$@" ;;
    iops) exec "$root/bench/iops_vs_fio.py" "$@" ;;
    *) echo "weft.sh bench: WHAT is transport, kv, allreduce or iops, not '$what'" >&2; exit 2 ;;
    esac
    ;;
lab)
    install_deps "${packages[@]}"
    configure_and_build "$build" "$plain"
    lab
    ;;
*)
    sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
