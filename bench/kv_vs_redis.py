#!/usr/bin/env python3
"""The KV node beside Redis, interleaved: GET and SET throughput and p50/p99 latency.

Each round runs every case once for both, in the same order, so that slow and
fast moments of a noisy machine hit both alike; the report gives the median of
the rounds and weft's ratio to Redis. Both servers run on this machine, on
loopback; weft's on every provider asked for (tcp, shm).

A case is a value size, a client count and a depth. Redis: redis-benchmark
with -c CLIENTS connections and -P DEPTH (pipelining: DEPTH requests in flight
per connection; depth 1 is no pipelining). weft: weft-kv-load with CLIENTS
processes, each DEPTH operations in flight (a GET is RMA reads, a PUT a request
to the server). Keys: KEYS of them, uniform, every one set first.

For GETs from one client, a third tool: raw libfabric (build/bench/weft-raw-bench
iops), RMA reads of VALUE bytes with DEPTH in flight from one process, no KV at
all: the most any GET made of one RMA read can do on that provider here.

With --one-process, for more than one client, weft also runs as redis-benchmark
does: one process with CLIENTS connections, polled in turn (the "1p" rows).

For every GET case with tcp, a ceiling: "tcp echo" (weft-raw-bench
--tcp-echo-ceiling), CLIENTS processes sending DEPTH requests of 64 B at once
over loopback TCP sockets to one epoll server that answers VALUE bytes each: no
KV, no libfabric, the fewest system calls a request and its answer can take.
No program whose requests and answers cross loopback TCP, Redis and libfabric's
tcp provider among them, does more here.

Needs redis-server and redis-tools (Debian), and a build (build/examples).
  bench/kv_vs_redis.py                       # 3 rounds, 64 B and 4 KiB, 1 and 8 clients, depth 1 and 16
  bench/kv_vs_redis.py --rounds 5 --providers tcp,shm --values 4096 --clients 8 --depths 16
  bench/kv_vs_redis.py --providers shm+lane,shm   # the KV node on weft's same-host lane
"""
import argparse
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def weft_env(p):
    """The environment of weft's server and clients on `p`: a provider, or one
    with "+lane" (shm+lane: shm, and weft's same-host lane, WEFT_SAME_HOST)."""
    provider, _, lane = p.partition("+")
    env = dict(os.environ, WEFT_PROVIDER=provider)
    if lane:
        env["WEFT_SAME_HOST"] = lane
    return env


def wait_port(port, proc, what):
    for _ in range(300):
        if proc.poll() is not None:
            sys.exit(f"{what} exited at start")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"{what} did not listen on port {port}")


def redis_case(port, op, value, clients, depth, ops, keys):
    """ops/s, p50 µs, p99 µs of redis-benchmark's op ('get' or 'set')."""
    out = subprocess.run(
        ["redis-benchmark", "-p", str(port), "-t", op, "-n", str(ops), "-d", str(value),
         "-c", str(clients), "-P", str(depth), "-r", str(keys), "--csv", "-q"],
        capture_output=True, text=True, timeout=600, check=True).stdout
    for line in out.splitlines():
        f = [x.strip('"') for x in line.split(",")]
        if f[0].upper() == op.upper():
            return float(f[1]), float(f[4]) * 1000, float(f[6]) * 1000
    sys.exit(f"redis-benchmark printed no {op} line: {out}")


def redis_fill(port, value, keys):
    """SET every key redis-benchmark -r KEYS names (key:%012d), through redis-cli --pipe."""
    v = "x" * value
    cmds = "".join(f"*3\r\n$3\r\nSET\r\n$16\r\nkey:{k:012d}\r\n${value}\r\n{v}\r\n"
                   for k in range(keys))
    subprocess.run(["redis-cli", "-p", str(port), "--pipe"], input=cmds, text=True,
                   capture_output=True, timeout=600, check=True)


def weft_fill(server, env, value, keys):
    """PUT every key once (weft-kv-load's fill), nothing else."""
    out = subprocess.run(
        [f"{ROOT}/build/examples/weft-kv-load", server, "--clients", "1", "--ops", "1",
         "--keys", str(keys), "--value", str(value), "--get", "1"],
        capture_output=True, text=True, timeout=600, env=env)
    if out.returncode != 0:
        sys.exit(f"filling the weft KV server failed: {out.stdout}{out.stderr}")


def weft_case(server, env, op, value, clients, depth, ops, keys, connections=1):
    """ops/s, p50 µs, p99 µs of weft-kv-load (GET: --get 1, SET: --get 0); with `connections`,
    that many connections from each client process."""
    out = subprocess.run(
        [f"{ROOT}/build/examples/weft-kv-load", server, "--csv", "--no-fill",
         "--clients", str(clients), "--connections", str(connections), "--depth", str(depth),
         "--ops", str(ops), "--keys", str(keys), "--value", str(value),
         "--get", "1" if op == "get" else "0"],
        capture_output=True, text=True, timeout=600, env=env)
    m = re.search(r"^\d+,\d+,\d+,[\d.]+,[\d.]+,(\d+),[\d.]+,(\d+),([\d.]+),([\d.]+),(\d+),\d+,(\d+)$",
                  out.stdout, re.M)
    if out.returncode != 0 or not m or m.group(5) != "0":
        sys.exit(f"weft-kv-load failed ({out.returncode}): {out.stdout}{out.stderr}")
    return float(m.group(2)), float(m.group(3)), float(m.group(4))


def raw_case(provider, value, depth):
    """ops/s of raw libfabric RMA reads of `value` bytes, `depth` in flight (one process)."""
    out = subprocess.run(
        [f"{ROOT}/build/bench/weft-raw-bench", "iops", "-p", provider, "-s", str(value),
         "-q", str(depth), "--budget-ms", "1000", "--json"],
        capture_output=True, text=True, timeout=600)
    m = re.search(r'"mxfers_per_s":([\d.e+-]+)', out.stdout)
    if out.returncode != 0 or not m:
        sys.exit(f"weft-raw-bench failed ({out.returncode}): {out.stdout}{out.stderr}")
    return float(m.group(1)) * 1e6, float("nan"), float("nan")


def echo_case(value, clients, depth):
    """answers/s of the loopback TCP ceiling (build/bench/weft-raw-bench --tcp-echo-ceiling):
    CLIENTS processes send DEPTH requests at once, one epoll server answers VALUE bytes each."""
    out = subprocess.run(
        [f"{ROOT}/build/bench/weft-raw-bench", "--tcp-echo-ceiling", str(clients), "-s", str(value),
         "-q", str(depth), "--budget-ms", "1000"],
        capture_output=True, text=True, timeout=600)
    m = re.search(r'"ops_per_s": ([\d.]+)', out.stdout)
    if out.returncode != 0 or not m:
        sys.exit(f"weft-raw-bench --tcp-echo-ceiling failed ({out.returncode}): {out.stdout}{out.stderr}")
    return float(m.group(1)), float("nan"), float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--providers", default="tcp,shm")
    ap.add_argument("--values", default="64,4096")
    ap.add_argument("--clients", default="1,8")
    ap.add_argument("--depths", default="1,16")
    ap.add_argument("--ops", type=int, default=100000, help="operations per case")
    ap.add_argument("--keys", type=int, default=4000)
    ap.add_argument("--ops-set", default="get,set")
    ap.add_argument("--one-process", action="store_true",
                    help="for CLIENTS > 1, also weft with one process of CLIENTS connections, as "
                         "redis-benchmark -c CLIENTS drives them (a '1p' row)")
    a = ap.parse_args()
    for tool in ("redis-server", "redis-benchmark"):
        if not shutil.which(tool):
            sys.exit(f"{tool} is missing: apt-get install redis-server redis-tools")
    providers = a.providers.split(",")
    values = [int(v) for v in a.values.split(",")]
    clients = [int(c) for c in a.clients.split(",")]
    depths = [int(d) for d in a.depths.split(",")]
    ops_kinds = a.ops_set.split(",")

    procs = []
    try:
        rport = free_port()
        redis = subprocess.Popen(["redis-server", "--port", str(rport), "--bind", "127.0.0.1",
                                  "--save", "", "--appendonly", "no"], stdout=subprocess.DEVNULL)
        procs.append(redis)
        wait_port(rport, redis, "redis-server")

        def start_weft(value):
            """A weft-kv-server per provider whose slots fit `value`: (HOST:PORT, env) each."""
            servers = {}
            for p in providers:
                port = free_port()
                env = weft_env(p)
                s = subprocess.Popen([f"{ROOT}/build/examples/weft-kv-server", str(port),
                                      str(max(1 << 14, 4 * a.keys)), str(value)], env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                procs.append(s)
                wait_port(port, s, f"weft-kv-server on {p}")
                servers[p] = (f"127.0.0.1:{port}", env)
            return servers

        results = {}  # (tool, op, value, clients, depth) -> [(ops/s, p50, p99)]
        for value in values:  # every key set first, at this value size: no GET misses
            for p in procs[1:]:  # the last value's weft servers
                p.terminate()
                p.wait(timeout=10)
            del procs[1:]
            weft = start_weft(value)
            redis_fill(rport, value, a.keys)
            for p, (server, env) in weft.items():
                weft_fill(server, env, value, a.keys)
            for r in range(a.rounds):
                for op in ops_kinds:
                    for c in clients:
                        for d in depths:
                            k = (op, value, c, d)
                            results.setdefault(("redis",) + k, []).append(
                                redis_case(rport, op, value, c, d, a.ops, a.keys))
                            for p, (server, env) in weft.items():
                                results.setdefault((f"weft {p}",) + k, []).append(
                                    weft_case(server, env, op, value, c, d, a.ops, a.keys))
                                if a.one_process and c > 1:
                                    results.setdefault((f"weft {p} 1p",) + k, []).append(
                                        weft_case(server, env, op, value, 1, d, a.ops, a.keys, c))
                                if op == "get" and c == 1 and "+" not in p:
                                    results.setdefault((f"fi_read {p}",) + k, []).append(
                                        raw_case(p, value, d))
                            if op == "get" and "tcp" in providers:
                                results.setdefault(("tcp echo",) + k, []).append(
                                    echo_case(value, c, d))
                print(f"value {value} B: round {r + 1} of {a.rounds} done", file=sys.stderr)
    finally:
        for p in procs:
            p.terminate()
            p.wait(timeout=10)

    def med(xs, i):
        return statistics.median(x[i] for x in xs)

    print(f"KV GET/SET, medians of {a.rounds} interleaved rounds, {a.ops} operations a case, "
          f"{a.keys} keys; ratio = weft / Redis ops/s")
    print(f"{'op':4} {'value':>6} {'cl':>3} {'depth':>5} {'tool':10} {'ops/s':>10} {'p50 us':>8} "
          f"{'p99 us':>8} {'ratio':>6}")
    for op in ops_kinds:
        for value in values:
            for c in clients:
                for d in depths:
                    base = results[("redis", op, value, c, d)]
                    tools = ["redis"] + [f"{t}" for p in providers
                                         for t in (f"weft {p}", f"weft {p} 1p", f"fi_read {p}")]
                    for tool in tools + ["tcp echo"]:
                        xs = results.get((tool, op, value, c, d))
                        if not xs:
                            continue
                        ratio = med(xs, 0) / med(base, 0)
                        print(f"{op:4} {value:>6} {c:>3} {d:>5} {tool:10} {med(xs, 0):>10.0f} "
                              f"{med(xs, 1):>8.1f} {med(xs, 2):>8.1f} {ratio:>6.2f}")


if __name__ == "__main__":
    main()
