#!/usr/bin/env python3
"""4 KiB random reads at queue depth 32: weft's RMA reads of a peer's memory beside fio's
reads of a tmpfs file, the local ceiling, interleaved; IOPS, medians and the ratio.

weft: `weft bench iops` (the storage pattern: 4 KiB reads at random offsets of the peer's
registered memory, 32 in flight) on each provider asked for. fio: randread, 4 KiB blocks,
iodepth 32 (libaio: on tmpfs it completes inline, the kernel's memory copy), a 256 MiB file
in /dev/shm. Needs fio (Debian) and a build.
  bench/iops_vs_fio.py [--rounds 5] [--providers tcp,shm]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def weft_iops(provider):
    args = [f"{ROOT}/build/src/tool/weft", "bench", "iops", "-q", "32", "-s", "4k", "--json",
            "--budget-ms", "2000"]
    if provider == "shm":
        args += ["--shm"]
    else:
        args += ["-p", provider]
    out = subprocess.run(args, capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        sys.exit(f"weft bench iops on {provider} failed: {out.stderr}")
    row = json.loads(out.stdout)["rows"][0]
    return float(row["mxfers_per_s"]) * 1e6


def fio_iops(path):
    out = subprocess.run(["fio", "--name=randread", f"--filename={path}", "--size=256M",
                          "--rw=randread", "--bs=4k", "--iodepth=32", "--ioengine=libaio",
                          "--time_based", "--runtime=2", "--output-format=json"],
                         capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        sys.exit(f"fio failed: {out.stderr}")
    return float(json.loads(out.stdout)["jobs"][0]["read"]["iops"])


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--providers", default="tcp,shm")
    a = ap.parse_args()
    providers = a.providers.split(",")
    results = {}
    with tempfile.NamedTemporaryFile(dir="/dev/shm", prefix="weft-fio-") as f:
        for r in range(a.rounds):
            results.setdefault("fio tmpfs", []).append(fio_iops(f.name))
            for p in providers:
                results.setdefault(f"weft {p}", []).append(weft_iops(p))
            print(f"round {r + 1} of {a.rounds} done", file=sys.stderr)
    base = statistics.median(results["fio tmpfs"])
    print(f"4 KiB random reads, queue depth 32, medians of {a.rounds} interleaved rounds; "
          f"ratio = IOPS / fio's on tmpfs")
    for tool, xs in results.items():
        print(f"{tool:12} {statistics.median(xs):>12.0f} IOPS {statistics.median(xs) / base:>6.2f}")


if __name__ == "__main__":
    main()
