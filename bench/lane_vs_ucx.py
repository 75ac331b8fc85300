#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""weft's same-host lane beside libfabric's shm (weft's old path) and UCX's
posix transport, across two processes, interleaved round by round.

Each round runs, in turn: weft-pair-bench (the lane against shm, its own
blocks interleaved), then ucx_perftest (UCX_TLS=posix,cma; one server and one
client process) for each size, then weft-floor-bench (two processes copying
through shared memory with no library: the floor). Reports one-way latency in
microseconds, the median of the rounds, and lane/UCX, lane/shm and lane/floor
ratios: first as each tool's mean per transfer (weft's usec/xfer, UCX's
"average", the floor's), then as the median of every iteration (UCX's
"typical"). The two differ most for ucp_get, whose bandwidth loop has a few
long iterations among many short ones.

  python3 bench/lane_vs_ucx.py --build build [--rounds 5] [--sizes 8,4096]
Needs ucx-utils (./weft.sh bench installs it).
"""
import argparse
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ucx(test, size, iters):
    """One ucx_perftest run: its typical (median) and average latency in
    microseconds (one-way for _lat)."""
    env = dict(os.environ, UCX_TLS="posix,cma", UCX_NET_DEVICES="lo")
    port = free_port()
    server = subprocess.Popen(["ucx_perftest", "-p", str(port)], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
        out = subprocess.run(["ucx_perftest", "127.0.0.1", "-p", str(port), "-t", test,
                              "-s", str(size), "-n", str(iters)],
                             env=env, capture_output=True, text=True, timeout=120).stdout
    finally:
        server.wait(timeout=30) if server.poll() is None else None
    for line in out.splitlines():
        if line.strip().startswith("Final:"):
            # Final: iterations, latency typical, average, overall, bw..., msgrate...
            return float(line.split()[2]), float(line.split()[3])
    raise RuntimeError("ucx_perftest printed no Final line:\n" + out)


def weft_pair(build, pattern, sizes, blocks):
    tool = os.path.join(build, "bench", "weft-pair-bench")
    out = subprocess.run([tool, pattern, "-p", "shm", "--rdm", "--shm", "--lane",
                          "--against", "shm", "--against-rdm", "-s", ",".join(map(str, sizes)),
                          "--blocks", str(blocks), "--json"],
                         capture_output=True, text=True, timeout=600, check=True).stdout
    j = json.loads(out.strip().splitlines()[-1])
    # Per size: the lane's and shm's mean (usec per transfer, median of the
    # blocks), and the lane's median of every iteration.
    return {row["bytes"]: (row["a"], row["b"], row["a_median_each"]) for row in j["rows"]}


def floor(build, sizes, iters):
    tool = os.path.join(build, "bench", "weft-floor-bench")
    out = subprocess.run([tool, "-s", ",".join(map(str, sizes)), "-n", str(iters)],
                         capture_output=True, text=True, timeout=600, check=True).stdout
    j = json.loads(out.strip().splitlines()[-1])
    return {(row["pattern"], row["bytes"]): row["usec"] for row in j["rows"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--sizes", default="8,4096")
    ap.add_argument("--blocks", type=int, default=4)
    ap.add_argument("--ucx-iters", type=int, default=200000)
    a = ap.parse_args()
    if not shutil.which("ucx_perftest"):
        sys.exit("lane_vs_ucx: ucx_perftest not found: apt-get install ucx-utils "
                 "(./weft.sh bench installs it)")
    sizes = [int(s) for s in a.sizes.split(",")]
    cases = [("lat-write", "ucp_put_lat"), ("lat-read", "ucp_get")]
    keys = ("lane", "shm", "ucx", "floor", "lane_med", "ucx_typ")
    got = {(p, s): {k: [] for k in keys} for p, _ in cases for s in sizes}
    for r in range(a.rounds):
        for pattern, test in cases:
            pair = weft_pair(a.build, pattern, sizes, a.blocks)
            for s in sizes:
                g = got[(pattern, s)]
                g["lane"].append(pair[s][0])
                g["shm"].append(pair[s][1])
                g["lane_med"].append(pair[s][2])
                typical, average = ucx(test, s, a.ucx_iters)
                g["ucx"].append(average)
                g["ucx_typ"].append(typical)
        for key, usec in floor(a.build, sizes, a.ucx_iters).items():
            got[key]["floor"].append(usec)
        print(f"round {r + 1} of {a.rounds} done", file=sys.stderr)

    def cell(v):
        return f"{statistics.median(v):.3f} [{min(v):.3f}, {max(v):.3f}]"

    print(f"# one-way latency, us, mean per transfer: median of {a.rounds} rounds [min, max]; "
          "lane and shm are weft's (weft-pair-bench, interleaved), UCX is posix,cma "
          "(ucx_perftest's average), floor is two processes and memcpy (weft-floor-bench)")
    print(f"{'pattern':<10}{'bytes':>7}{'lane':>22}{'shm':>22}{'UCX posix':>22}"
          f"{'floor':>22}{'lane/UCX':>10}{'lane/shm':>10}{'lane/floor':>11}")
    for pattern, _ in cases:
        for s in sizes:
            g = got[(pattern, s)]
            lane, shm, u, f = (statistics.median(g[k]) for k in ("lane", "shm", "ucx", "floor"))
            print(f"{pattern:<10}{s:>7}{cell(g['lane']):>22}{cell(g['shm']):>22}"
                  f"{cell(g['ucx']):>22}{cell(g['floor']):>22}{lane / u:>10.2f}"
                  f"{lane / shm:>10.3f}{lane / f:>11.2f}")
    print(f"# one-way latency, us, median of every iteration (ucx_perftest's typical): "
          f"median of {a.rounds} rounds [min, max]")
    print(f"{'pattern':<10}{'bytes':>7}{'lane':>22}{'UCX posix':>22}{'lane/UCX':>10}")
    for pattern, _ in cases:
        for s in sizes:
            g = got[(pattern, s)]
            lane, u = statistics.median(g["lane_med"]), statistics.median(g["ucx_typ"])
            print(f"{pattern:<10}{s:>7}{cell(g['lane_med']):>22}{cell(g['ucx_typ']):>22}"
                  f"{lane / u:>10.2f}")


if __name__ == "__main__":
    main()
