#!/usr/bin/env python3
"""The KV node under many clients: batches of weft-kv-load, each CLIENTS client processes
DEPTH deep, against one weft-kv-server, until OPS operations in all. After each batch (its
clients gone) the server's resident memory and open descriptors are read: every endpoint,
queue and registration weft or libfabric leaked would show as growth. Fails (exit 1) on one
wrong value, a failed client, or growth past the first batch's by more than --slack.

  bench/kv_soak.py                                   # 64 clients x 16 deep, 10^6 operations, tcp
  bench/kv_soak.py --provider shm --clients 32 --ops 2000000
"""
import argparse
import os
import re
import socket
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))


def fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--provider", default="tcp")
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--depth", type=int, default=16)
    ap.add_argument("--ops", type=int, default=1_000_000)
    ap.add_argument("--batches", type=int, default=5)
    ap.add_argument("--value", type=int, default=1024)
    ap.add_argument("--keys", type=int, default=10000)
    ap.add_argument("--slack", type=float, default=0.10, help="allowed growth after batch 1")
    a = ap.parse_args()
    env = dict(os.environ, WEFT_PROVIDER=a.provider)
    port = free_port()
    log = open(f"/tmp/weft-kv-soak-{os.getpid()}.log", "w")  # the server's output
    server = subprocess.Popen([f"{ROOT}/build/examples/weft-kv-server", str(port),
                               str(4 * a.keys), str(a.value)], env=env,
                              stdout=log, stderr=subprocess.STDOUT)
    try:
        for _ in range(300):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        print(f"{a.batches} batches of {a.clients} clients x {a.depth} deep on {a.provider}, "
              f"{a.ops} operations in all, {a.value} B values")
        total, wrong, first = 0, 0, None
        ok = True
        for b in range(a.batches):
            ops = a.ops // a.batches
            t0 = time.time()
            out = subprocess.run([f"{ROOT}/build/examples/weft-kv-load", f"127.0.0.1:{port}",
                                  "--csv", "--clients", str(a.clients), "--depth", str(a.depth),
                                  "--ops", str(ops), "--keys", str(a.keys), "--value", str(a.value),
                                  "--get", "0.9", "--zipf", "0.99"] + (["--no-fill"] if b else []),
                                 env=env, capture_output=True, text=True, timeout=1800)
            m = re.search(r"^\d+,\d+,\d+,[\d.]+,[\d.]+,(\d+),[\d.]+,(\d+),([\d.]+),([\d.]+),(\d+),"
                          r"(\d+),(\d+)$", out.stdout, re.M)
            if out.returncode != 0 or not m:
                print(f"batch {b + 1}: weft-kv-load failed ({out.returncode}):\n{out.stdout}{out.stderr}")
                ok = False
                break
            total += int(m.group(1))
            wrong += int(m.group(5))
            time.sleep(0.5)  # the server sweeps the departed clients every 100 ms
            rss, fd = rss_kib(server.pid), fds(server.pid)
            first = first or (rss, fd)
            print(f"batch {b + 1}: {m.group(1)} ops in {time.time() - t0:.1f} s, {m.group(2)} ops/s, "
                  f"p50 {m.group(3)} us, p99 {m.group(4)} us, {m.group(5)} wrong, "
                  f"{m.group(6)} torn; server RSS {rss} KiB, {fd} descriptors")
        if first:
            grew_rss = rss / first[0] - 1
            print(f"{total} operations, {wrong} wrong; after batch 1 the server's RSS grew "
                  f"{grew_rss * 100:+.1f} %, its descriptors {fd - first[1]:+d}")
            ok = ok and wrong == 0 and grew_rss <= a.slack and fd <= first[1]
    finally:
        server.terminate()
        status = server.wait(timeout=30)
    print(f"server ended with status {status} (its output: {log.name})")
    sys.exit(0 if ok and status == 0 else 1)


if __name__ == "__main__":
    main()
