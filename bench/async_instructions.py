#!/usr/bin/env python3
"""Instructions per completed write: a coroutine (co_await node.write, resumed by
Node::dispatch) and the Asio adapter (async_write with use_awaitable) against the
blocking path (post, then Node::wait), counted by valgrind's callgrind on the
posting thread only; the target is a process of its own, not under valgrind
(bench/async_remote.hpp). Instructions, not time, so a noisy machine repeats
them, except for spins (a full queue to the target): the least of 3 runs.

  bench/async_instructions.py [--build build] [--providers tcp/msg,shm/rdm]
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def count(exe, kind, size, depth, provider, ep, runs=3):
    """The least of `runs` counts: what a cell adds beside the work is spinning
    (a full queue to the target, a socket not yet writable), never less."""
    return min(count_once(exe, kind, size, depth, provider, ep) for _ in range(runs))


def count_once(exe, kind, size, depth, provider, ep):
    with tempfile.TemporaryDirectory() as d:
        p = subprocess.run(
            ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--separate-threads=yes",
             "--fair-sched=yes",
             f"--callgrind-out-file={d}/cg.%p", exe, "--instructions", kind, str(size), str(depth),
             provider, ep],
            capture_output=True, text=True, timeout=900)
        if p.returncode != 0:
            raise RuntimeError(f"{kind} {size} {depth} {provider}: {p.stderr.strip()[-600:]}")
        ops = json.loads(p.stdout.strip().splitlines()[-1])["ops"]
        for f in glob.glob(f"{d}/cg.*-01"):
            text = open(f).read()
            if "timed loop" not in text[:4096]:
                continue
            for line in text.splitlines():
                if line.startswith("totals:"):
                    return int(line.split()[1]) / ops
        raise RuntimeError("no callgrind dump of the posting thread's timed loop")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--providers", default="tcp/msg,shm/rdm")
    args = ap.parse_args()
    exe = os.path.join(args.build, "bench", "weft-async-bench")
    print(f"{'cell':<22} {'blocking':>9} {'coroutine':>10} {'asio':>7} {'asio floor':>11} "
          f"{'co/bl':>6} {'asio/bl':>8} {'asio/floor':>11}")
    for cell in args.providers.split(","):
        provider, ep = cell.split("/")
        for size in (8, 65536):
            for depth in (1, 64):
                got = {k: count(exe, k, size, depth, provider, ep) for k in ("blocking", "coroutine")}
                # The Asio pump sleeps on the Node's descriptor: not where the provider has
                # none (shm: FI_WAIT_FD is not offered; the pump refuses it by name).
                # Its floor: the blocking write plus one handler posted and resumed.
                try:
                    got["asio"] = count(exe, "asio", size, depth, provider, ep)
                    got["floor"] = count(exe, "asio-post", size, depth, provider, ep)
                    asio = (f"{got['asio']:7.0f} {got['floor']:11.0f} ", f"{got['asio'] / got['blocking']:8.3f} "
                            f"{got['asio'] / got['floor']:11.3f}")
                except RuntimeError:
                    asio = (f"{'-':>7} {'-':>11} ", f"{'-':>8} {'-':>11}")
                print(f"{provider + ' ' + str(size) + ' B x' + str(depth):<22} "
                      f"{got['blocking']:9.0f} {got['coroutine']:10.0f} {asio[0]}"
                      f"{got['coroutine'] / got['blocking']:6.3f} {asio[1]}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
