#!/usr/bin/env python3
"""weft's all-reduce beside Open MPI's MPI_Allreduce, interleaved: time per call.

Both are launched by mpirun on the same ranks, each round running every rank count
for both, so that slow and fast moments of a noisy machine hit both alike; the
report gives the median of the rounds and weft's time as a multiple of MPI's
(below 1: weft is faster). Floats, summed; both programs check the sums of a first
call at each size, then time calls on zeros. weft runs on the providers asked for (shm: the
same host's shared memory, as Open MPI's default vader; tcp, beside Open MPI
restricted to its TCP transport, --mca btl tcp,self); where the ranks outnumber
the cores, weft's waits yield the core (--yield), as Open MPI's do when
oversubscribed. weft's schedule is its default (the ring for 3 ranks, else
halving) unless --schedules names them; --mpi-ring adds Open MPI forced
to its ring (coll_tuned_allreduce_algorithm 4), the same schedule as weft's ring.

Needs openmpi-bin and libopenmpi-dev (build/bench/weft-allreduce-mpi).
  bench/allreduce_vs_mpi.py                        # 3 rounds, 2 and 4 ranks, 1 KiB .. 64 MiB
  bench/allreduce_vs_mpi.py --rounds 5 --ranks 2 --providers shm --sizes 1M,4M
  bench/allreduce_vs_mpi.py --ranks 4 --providers shm --schedules ring,halving --mpi-ring
  bench/allreduce_vs_mpi.py --providers shm+lane,shm   # weft on its same-host lane
"""
import argparse
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WEFT = f"{ROOT}/build/examples/weft-allreduce"
MPI = f"{ROOT}/build/bench/weft-allreduce-mpi"


def run(ranks, program, args, env=(), mca=()):
    cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(ranks)] + list(mca)
    for e in env:
        cmd += ["-x", e]
    out = subprocess.run(cmd + [program] + args + ["--csv"], capture_output=True, text=True,
                         timeout=1800)
    if out.returncode != 0 or "WRONG" in out.stdout:
        sys.exit(f"{' '.join(cmd + [program] + args)} failed ({out.returncode}):\n"
                 f"{out.stdout}{out.stderr}")
    times = {}
    for line in out.stdout.splitlines():
        f = line.split(",")
        if len(f) == 4 and f[0] in ("weft", "mpi"):
            times[int(f[1])] = float(f[3])
    return times


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--ranks", default="2,4")
    ap.add_argument("--providers", default="shm,tcp")
    ap.add_argument("--sizes", default="1K,64K,1M,4M,16M,64M")
    ap.add_argument("--schedules", default="",
                    help="weft's schedules to run, e.g. ring,halving (default: its own choice)")
    ap.add_argument("--mpi-ring", action="store_true",
                    help="also Open MPI forced to its ring algorithm")
    a = ap.parse_args()
    for p in (WEFT, MPI):
        if not os.access(p, os.X_OK):
            sys.exit(f"{p} is missing: build with libopenmpi-dev installed (./weft.sh bench)")
    sizes = a.sizes.split(",")
    cores = os.cpu_count() or 1
    results = {}  # (tool, ranks, bytes) -> [us]
    for r in range(a.rounds):
        for n in [int(x) for x in a.ranks.split(",")]:
            for b, us in run(n, MPI, sizes).items():
                results.setdefault(("MPI_Allreduce", n, b), []).append(us)
            if a.mpi_ring:
                ring = ["--mca", "coll_tuned_use_dynamic_rules", "1",
                        "--mca", "coll_tuned_allreduce_algorithm", "4"]
                for b, us in run(n, MPI, sizes, mca=ring).items():
                    results.setdefault(("MPI ring", n, b), []).append(us)
            if "tcp" in a.providers.split(","):  # Open MPI over its TCP transport, beside weft's tcp
                for b, us in run(n, MPI, sizes, mca=["--mca", "btl", "tcp,self"]).items():
                    results.setdefault(("MPI tcp btl", n, b), []).append(us)
            for p in a.providers.split(","):
                extra = ["--yield"] if n > cores else []
                for sched in a.schedules.split(",") if a.schedules else [""]:
                    how = [f"--schedule={sched}"] if sched else []
                    tool = f"weft {p} {sched}".strip()
                    provider, _, lane = p.partition("+")  # shm+lane: weft's same-host lane
                    env = [f"WEFT_PROVIDER={provider}"] + ([f"WEFT_SAME_HOST={lane}"] if lane else [])
                    for b, us in run(n, WEFT, sizes + extra + how, env).items():
                        results.setdefault((tool, n, b), []).append(us)
        print(f"round {r + 1} of {a.rounds} done", file=sys.stderr)
    print(f"all-reduce of floats, medians of {a.rounds} interleaved rounds, {cores} cores; "
          f"ratio = the time over MPI_Allreduce's (weft tcp's: over the tcp btl's)")
    print(f"{'ranks':>5} {'bytes':>10} {'tool':18} {'us/call':>10} {'ratio':>6}")
    for (tool, n, b) in sorted(results, key=lambda k: (k[1], k[2], k[0] != "MPI_Allreduce", k[0])):
        us = statistics.median(results[(tool, n, b)])
        ref = "MPI tcp btl" if tool.startswith("weft tcp") else "MPI_Allreduce"
        base = statistics.median(results[(ref, n, b)])
        print(f"{n:>5} {b:>10} {tool:18} {us:>10.1f} {us / base:>6.2f}")


if __name__ == "__main__":
    main()
