#!/usr/bin/env python3
"""Runs weft's benchmarks next to their peers, interleaved, and prints ratios.

Each round runs every measurement once, in the same order, so that slow and
fast moments of a noisy machine hit all tools alike; the report gives the
median of the rounds for each tool and the ratio to the reference. Peers:
the raw-libfabric baseline (weft-raw-bench), fi_pingpong (libfabric-bin),
ucx_perftest (ucx-utils), iperf3, and process_vm_writev (shm's ceiling).
Instructions per operation come from valgrind's callgrind, which counts
instructions rather than time and so repeats on a noisy machine.

  bench/compare.py              # 5 rounds of everything (a few minutes)
  bench/compare.py --only pair --pin           # only weft vs raw, paired

weft against the raw baseline is judged by weft-pair-bench: both connected at
once, blocks of the same iteration count alternating ABBA, one ratio per
adjacent pair; the median of those ratios cancels the drift that separate runs
of a noisy machine show (+-30 % here).
  bench/compare.py --rounds 9 --only latency,bandwidth
"""
import argparse
import glob
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEERS = {"fi_pingpong": "libfabric-bin", "ucx_perftest": "ucx-utils", "iperf3": "iperf3",
         "valgrind": "valgrind", "gnuplot": "gnuplot-nox"}


def sh(cmd, env=None, timeout=120):
    full = dict(os.environ, **(env or {}))
    p = subprocess.run(cmd, shell=True, capture_output=True, text=True, env=full, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"{cmd}: exit {p.returncode}: {p.stderr.strip()[-400:]}")
    return p.stdout


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def install_peers():
    missing = [pkg for tool, pkg in PEERS.items() if not shutil.which(tool)]
    if missing:
        print(f"compare: installing {' '.join(missing)}", file=sys.stderr)
        sudo = [] if os.geteuid() == 0 else ["sudo"]
        subprocess.run(sudo + ["apt-get", "update", "-qq"], check=True, capture_output=True)
        subprocess.run(sudo + ["apt-get", "install", "-y", "-qq", "--no-install-recommends"] + missing,
                       check=True, capture_output=True, env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))


class Tools:
    def __init__(self, build):
        self.weft = os.path.join(build, "src/tool/weft")
        self.raw = os.path.join(build, "bench/weft-raw-bench")
        self.pair_exe = os.path.join(build, "bench/weft-pair-bench")
        for f in (self.weft, self.raw, self.pair_exe):
            if not os.access(f, os.X_OK):
                sys.exit(f"compare: {f} is missing: build first (./weft.sh build)")

    def bench(self, tool, pattern, provider, sizes, extra=""):
        exe = self.weft + " bench" if tool == "weft" else self.raw
        out = sh(f"{exe} {pattern} -p '{provider}' -s {','.join(map(str, sizes))} --json {extra}")
        rows = json.loads(out.strip().splitlines()[-1])["rows"]
        return {r["bytes"]: r for r in rows}

    def pair(self, pattern, provider, sizes, blocks, extra=""):
        """weft and raw connected at once, blocks interleaved: per size the median
        of the per-pair ratios (weft/raw in the pattern's metric) and quartiles."""
        out = sh(f"{self.pair_exe} {pattern} -p '{provider}' -s {','.join(map(str, sizes))} "
                 f"--blocks {blocks} --json {extra}", timeout=900)
        return {r["bytes"]: r for r in json.loads(out.strip().splitlines()[-1])["rows"]}

    def fi_pingpong(self, provider, ep, size, iters=2000):
        port = free_port()
        dev = "" if provider == "shm" else "-d lo"
        srv = subprocess.Popen(f"fi_pingpong -p {provider} -e {ep} {dev} -B {port} -S {size} -I {iters}",
                               shell=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(0.3)
        try:
            out = sh(f"fi_pingpong -p {provider} -e {ep} {dev} -P {port} -S {size} -I {iters} 127.0.0.1")
        finally:
            srv.wait(timeout=30)
        fields = out.strip().splitlines()[-1].split()
        return {"usec_per_xfer": float(fields[6]), "mb_per_s": float(fields[5])}

    def ucx(self, test, size, tls, iters):
        port = free_port()
        env = {"UCX_TLS": tls, "UCX_NET_DEVICES": "lo"} if tls == "tcp" else {"UCX_TLS": tls}
        srv = subprocess.Popen(f"ucx_perftest -p {port}", shell=True, env=dict(os.environ, **env),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(0.5)
        try:
            out = sh(f"ucx_perftest 127.0.0.1 -p {port} -t {test} -s {size} -n {iters}", env=env)
        finally:
            srv.wait(timeout=30)
        final = [l for l in out.splitlines() if l.startswith("Final:")][-1].split()
        # Final: iters, latency 50%, avg, overall (usec), bandwidth avg, overall (MiB/s), rate
        return {"usec_per_xfer": float(final[3]), "mb_per_s": float(final[6]) * 1.048576}

    def iperf3(self):
        port = free_port()
        srv = subprocess.Popen(f"iperf3 -s -B 127.0.0.1 -p {port} -1", shell=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(0.3)
        try:
            out = json.loads(sh(f"iperf3 -c 127.0.0.1 -p {port} -t 2 -J"))
        finally:
            srv.wait(timeout=30)
        return {"mb_per_s": out["end"]["sum_received"]["bits_per_second"] / 8e6}

    def cma(self, size):
        return json.loads(sh(f"{self.raw} --cma-ceiling {size} --budget-ms 300"))

    def instructions(self, tool, provider, size, iters=4000):
        """Instructions per posted-and-completed write in the timed loop (callgrind)."""
        with tempfile.TemporaryDirectory() as d:
            exe = self.weft + " bench" if tool == "weft" else self.raw
            port = free_port()
            srv = subprocess.Popen(f"{exe} cpu-write -p '{provider}' --server 127.0.0.1:{port}",
                                   shell=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            time.sleep(0.5)
            try:
                sh(f"valgrind --tool=callgrind --instr-atstart=no "
                   f"--callgrind-out-file={d}/cg.%p {exe} cpu-write -s {size} -n {iters} "
                   f"--budget-ms 100000 --connect 127.0.0.1:{port} --json", timeout=600)
            finally:
                srv.wait(timeout=60)
            total = None
            for f in sorted(glob.glob(f"{d}/cg.*")):
                if "timed loop" not in open(f).read(4096):
                    continue
                for line in open(f):
                    if line.startswith("summary:") or line.startswith("totals:"):
                        total = int(line.split()[1])
            if total is None:
                raise RuntimeError("no callgrind dump of the timed loop")
            return {"instructions": total / iters}


def median_ci(xs, z=1.96):
    """A distribution-free 95 % confidence interval of the median: the order
    statistics n/2 -+ z*sqrt(n)/2 of the sorted sample."""
    v = sorted(xs)
    n = len(v)
    if n < 6:
        return (min(v), max(v)) if v else (float("nan"), float("nan"))
    half = z * (n ** 0.5) / 2
    lo = max(0, int((n - 1) / 2 - half))
    hi = min(n - 1, int((n - 1) / 2 + half + 0.999))
    return v[lo], v[hi]


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--only", default="pair,latency,bandwidth,path,cpu,rate",
                    help="comma list of: pair, latency, bandwidth, path, cpu, rate")
    ap.add_argument("--blocks", type=int, default=0,
                    help="block pairs per size in the weft/raw pair runs (default 201 for latency, 61 for bandwidth)")
    ap.add_argument("--pin", action="store_true",
                    help="pair runs: server end on CPU 0, client on CPU 1")
    ap.add_argument("--json", help="also write all samples to this file")
    args = ap.parse_args()
    install_peers()
    t = Tools(args.build)
    only = set(args.only.split(","))

    # Every measurement: (group, label, reference label, metric, better, thunk)
    plan = []
    lat_sizes = [8, 4096, 65536, 1 << 20]
    bw_sizes = [8, 4096, 65536, 1 << 20]
    if "latency" in only:
        for prov, ep, tls, extra in (("tcp", "msg", "tcp", ""), ("shm", "rdm", "posix,cma", "--shm")):
            for pat in ("lat-write", "lat-notify"):
                for tool in ("weft", "raw"):
                    plan.append(("latency", f"{tool} {pat} {prov}", f"raw {pat} {prov}", "usec_per_xfer",
                                 "lower", lambda tool=tool, pat=pat, prov=prov, extra=extra:
                                 t.bench(tool, pat, prov, lat_sizes, extra + " --budget-ms 300")))
            plan.append(("latency", f"fi_pingpong {prov}", None, "usec_per_xfer", "lower",
                         lambda prov=prov, ep=ep: {s: t.fi_pingpong(prov, ep, s) for s in lat_sizes}))
            plan.append(("latency", f"ucx put_lat {prov}", None, "usec_per_xfer", "lower",
                         lambda tls=tls: {s: t.ucx("ucp_put_lat", s, tls, 2000 if s < 65536 else 300)
                                          for s in lat_sizes}))
    if "bandwidth" in only:
        for prov, tls, extra in (("tcp", "tcp", ""), ("shm", "posix,cma", "--shm")):
            for tool in ("weft", "raw"):
                plan.append(("bandwidth", f"{tool} bw-write {prov}", f"raw bw-write {prov}", "mb_per_s",
                             "higher", lambda tool=tool, prov=prov, extra=extra:
                             t.bench(tool, "bw-write", prov, bw_sizes, extra + " --budget-ms 300")))
            plan.append(("bandwidth", f"ucx put_bw {prov}", None, "mb_per_s", "higher",
                         lambda tls=tls: {s: t.ucx("ucp_put_bw", s, tls, 20000 if s < 65536 else 2000)
                                          for s in bw_sizes}))
        plan.append(("bandwidth", "iperf3 tcp", None, "mb_per_s", "higher",
                     lambda: {1 << 20: t.iperf3()}))
        plan.append(("bandwidth", "process_vm_writev", None, "mb_per_s", "higher",
                     lambda: {1 << 20: t.cma(1 << 20)}))
    if "path" in only:
        # tcp's three ways to move RMA: MSG, RDM through ofi_rxm, and net's native RDM.
        for prov in ("tcp", "tcp;ofi_rxm", "net"):
            extra = "--rdm" if prov != "tcp" else ""
            for pat, metric, better in (("bw-write", "mb_per_s", "higher"),
                                        ("lat-write", "usec_per_xfer", "lower")):
                plan.append(("path", f"path {pat} {prov}", f"path {pat} tcp", metric, better,
                             lambda prov=prov, extra=extra, pat=pat:
                             t.bench("weft", pat, prov, [65536], extra + " --budget-ms 300")))
    if "rate" in only:
        for tool in ("weft", "raw"):
            plan.append(("rate", f"{tool} rate tcp", "raw rate tcp", "mxfers_per_s", "higher",
                         lambda tool=tool: t.bench(tool, "rate", "tcp", [8], "--budget-ms 300")))
            plan.append(("rate", f"{tool} iops tcp", "raw iops tcp", "mxfers_per_s", "higher",
                         lambda tool=tool: t.bench(tool, "iops", "tcp", [4096], "-q 32 --budget-ms 300")))

    # weft against raw libfabric: both connected at once, their blocks
    # interleaved, one ratio per adjacent pair: the targets' ratios come from
    # here (separate runs drift apart by more than the 2 % being judged).
    pairs = {}
    pin = " --pin" if args.pin else ""
    if "pair" in only:
        # Many short blocks: adjacent blocks see the same machine, and the
        # median of ~200 ratios has a standard error of ~0.4 % here.
        for prov, extra in (("tcp", ""), ("shm", " --shm")):
            for pat, sizes, blocks, block in (
                    ("lat-write", [8, 4096], args.blocks or 201, " -n 1000 --budget-ms 100"),
                    ("lat-notify", [8, 4096], args.blocks or 201, " -n 1000 --budget-ms 100"),
                    ("bw-write", [65536, 1 << 20], args.blocks or 61, " --budget-ms 60")):
                print(f"compare: pair {pat} {prov} ({blocks} block pairs per size)", file=sys.stderr)
                try:
                    for size, row in t.pair(pat, prov, sizes, blocks, extra + pin + block).items():
                        pairs[(pat, prov, int(size))] = row
                except Exception as e:
                    print(f"compare: pair {pat} {prov}: {e}", file=sys.stderr)
    # tcp's three ways to move RMA, paired the same way: MSG, RDM through
    # ofi_rxm (what weft picks for RDM), and net's native RDM.
    path_pairs = {}
    if "path" in only:
        for first, flags, other in (("tcp", "--msg", "tcp;ofi_rxm"), ("tcp", "--msg", "net"),
                                    ("tcp;ofi_rxm", "--rdm", "net")):
            for pat, block in (("bw-write", " --budget-ms 60"), ("lat-write", " -n 500 --budget-ms 100")):
                blocks = args.blocks or 61
                print(f"compare: path pair {pat} {first} vs {other} RDM", file=sys.stderr)
                try:
                    rows = t.pair(pat, first, [65536], blocks,
                                  f"{flags} --against '{other}' --against-rdm{pin}{block}")
                    path_pairs[(pat, first, other)] = rows[65536]
                except Exception as e:
                    print(f"compare: path pair {pat} {first} vs {other}: {e}", file=sys.stderr)

    samples = {}
    for r in range(args.rounds):
        print(f"compare: round {r + 1}/{args.rounds}", file=sys.stderr)
        for group, label, ref, metric, better, thunk in plan:
            try:
                res = thunk()
            except Exception as e:  # a peer that fails is reported, not fatal
                print(f"compare: {label}: {e}", file=sys.stderr)
                continue
            for size, row in res.items():
                samples.setdefault((group, label, ref, metric, better), {}).setdefault(int(size), []).append(row[metric])
    if "cpu" in only:
        for size in (8, 4096):
            for tool in ("weft", "raw"):
                print(f"compare: callgrind {tool} cpu-write {size} B", file=sys.stderr)
                try:
                    v = t.instructions(tool, "tcp", size)["instructions"]
                    samples.setdefault(("cpu", f"{tool} cpu-write tcp", "raw cpu-write tcp",
                                        "instructions", "lower"), {}).setdefault(size, []).append(v)
                except Exception as e:
                    print(f"compare: callgrind {tool}: {e}", file=sys.stderr)

    if args.json:  # first: the samples survive whatever the report does
        with open(args.json, "w") as f:
            json.dump([{"group": k[0], "tool": k[1], "metric": k[3], "bytes": s, "samples": v}
                       for k, by in samples.items() for s, v in by.items()] +
                      [{"group": "pair", "pattern": k[0], "provider": k[1], "bytes": k[2], **v}
                       for k, v in pairs.items()] +
                      [{"group": "path pair", "pattern": k[0], "first": k[1], "other": k[2], **v}
                       for k, v in path_pairs.items()], f, indent=1)
    if pairs:
        print(f"\n== weft vs raw libfabric, connected at once, blocks interleaved "
              f"(median of the per-pair ratios [quartiles])")
        print(f"  {'pattern':22s} {'bytes':>8s} {'weft':>12s} {'raw':>12s} {'ratio':>8s}  "
              f"{'quartiles':16s} 95 % CI of the median")
        for (pat, prov, size), row in pairs.items():
            unit = "us" if pat.startswith("lat") else "MB/s"
            lo, hi = median_ci(row["ratios"])
            print(f"  {pat + ' ' + prov:22s} {size:8d} {row['a']:9.3f} {unit:>2s} {row['b']:9.3f} {unit:>2s}"
                  f" {row['ratio']:8.3f}  [{row['ratio_q1']:.3f}, {row['ratio_q3']:.3f}]   "
                  f"[{lo:.3f}, {hi:.3f}] ({len(row['ratios'])} pairs)")
    med = {(k[1], s): median(v) for k, by in samples.items() for s, v in by.items()}

    def ratio_of(a, b, size):
        x, y = med.get((a, size)), med.get((b, size))
        return x / y if x is not None and y else None

    current = None
    for (group, label, ref, metric, better), by in samples.items():
        if group != current:
            current = group
            print(f"\n== {group} ({metric}, median of {args.rounds} interleaved rounds; "
                  f"{'lower' if better == 'lower' else 'higher'} is better)")
            print(f"  {'tool':34s} {'bytes':>8s} {'median':>12s} {'min':>12s} {'max':>12s} {'ratio':>8s}")
        for size in sorted(by):
            m = median(by[size])
            r = ratio_of(label, ref, size) if ref and ref != label else None
            ratio = f"{r:.3f}" if r is not None else ""
            print(f"  {label:34s} {size:8d} {m:12.3f} {min(by[size]):12.3f} {max(by[size]):12.3f} {ratio:>8s}")

    # The targets of the performance issue, each met or not, from the medians above.
    def weft_vs_raw(pat, prov, size):
        """The paired ratio and its 95 % CI when measured, else the ratio of the
        round medians."""
        if (pat, prov, size) in pairs:
            row = pairs[(pat, prov, size)]
            return row["ratio"], median_ci(row["ratios"])
        return ratio_of(f"weft {pat} {prov}", f"raw {pat} {prov}", size)

    checks = []
    for prov in ("tcp", "shm"):
        for pat in ("lat-write", "lat-notify"):
            for size in (8, 4096):
                checks.append((f"latency {pat} {prov} {size} B: weft/raw <= 1.02",
                               weft_vs_raw(pat, prov, size), "<=", 1.02))
        for size in (65536, 1 << 20):
            checks.append((f"bandwidth bw-write {prov} {size} B: weft/raw >= 0.98",
                           weft_vs_raw("bw-write", prov, size), ">=", 0.98))
    for size in (8, 4096, 65536, 1 << 20):
        checks.append((f"bandwidth tcp {size} B: weft/UCX put_bw >= 1.0",
                       ratio_of("weft bw-write tcp", "ucx put_bw tcp", size), ">=", 1.0))
    checks.append(("bandwidth shm 1 MiB: weft/process_vm_writev >= 0.8",
                   ratio_of("weft bw-write shm", "process_vm_writev", 1 << 20), ">=", 0.8))
    for size in (8, 4096):
        checks.append((f"cpu instructions per write {size} B: weft/raw <= 1.05",
                       ratio_of("weft cpu-write tcp", "raw cpu-write tcp", size), "<=", 1.05))
    print(f"\n== targets (weft/raw: paired blocks where measured; others: medians of "
          f"{args.rounds} rounds)")
    for name, r, op, bound in checks:
        ci = None
        if isinstance(r, tuple):
            r, ci = r
        if r is None:
            print(f"  {name:58s}      n/a  (not measured)")
            continue
        ok = r <= bound if op == "<=" else r >= bound
        verdict = "met" if ok else "MISSED"
        if ci is not None:
            # The median ratio of the pairs is an estimate: say when the bound
            # lies inside its 95 % confidence interval.
            if not ok and ci[0] <= bound <= ci[1]:
                verdict = "MISSED by less than the noise"
            verdict += f"  (95 % CI [{ci[0]:.3f}, {ci[1]:.3f}])"
        print(f"  {name:58s} {r:8.3f}  {verdict}")
    for (pat, first, other), row in path_pairs.items():
        lo, hi = median_ci(row["ratios"])
        unit = "MB/s" if pat.startswith("bw") else "us"
        kind = "MSG" if first == "tcp" else "RDM"
        print(f"  path pair {pat} 64 KiB: {first} {kind} {row['a']:.1f} {unit} / {other} RDM "
              f"{row['b']:.1f} {unit} = {row['ratio']:.3f} (95 % CI [{lo:.3f}, {hi:.3f}])")
    for pat, unit in (("bw-write", "MB/s"), ("lat-write", "us")):
        paths = {p: med.get((f"path {pat} {p}", 65536)) for p in ("tcp", "tcp;ofi_rxm", "net")}
        if all(paths.values()):
            print(f"  path, {pat} at 64 KiB ({unit}): " +
                  ", ".join(f"{p} {v:.1f}" for p, v in paths.items()))


if __name__ == "__main__":
    main()
