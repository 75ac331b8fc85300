#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (tests/fuzz/corpus/*): valid
inputs and near misses, so the fuzzer starts inside the formats. Rerun after a
wire-format change; the files are committed."""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
BOOTSTRAP_VERSION = 3


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def region(base=0x7F0000001000, length=4096, key=0x1234, flags=3, version=1):
    head = b"WFRR" + bytes([version, flags]) + b"\0\0" + struct.pack("<QQQ", base, length, key)
    return head + struct.pack("<I", crc32c(head)) + b"\0\0\0\0"


def frame(ftype, payload=b"", version=BOOTSTRAP_VERSION):
    return b"WEFT" + struct.pack("<HHI", version, ftype, len(payload)) + payload


def hello(flags=0):
    return frame(1, struct.pack("<I", flags) + b"0.1.0")


def string(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<I", len(b)) + b


def node_address(kind=1, provider="tcp;ofi_rxm", fabric=b"\x02\x00\x1d\x2f\x7f\x00\x00\x01" + b"\0" * 8,
                 version=1):
    body = b"WFNA" + bytes([version, kind, 0, 0]) + struct.pack("<IQ", 2, 0x1122334455667788)
    body += string(provider) + string(fabric)
    return body + struct.pack("<I", crc32c(body))


def offer(kind=0):
    provider = "tcp" if kind == 0 else "tcp;ofi_rxm"
    return frame(2, string(b"\x01" * 16) + string(node_address(kind=kind, provider=provider))
                 + string("provider tcp, chosen because ..."))


def write(kind, name, data):
    d = os.path.join(HERE, "corpus", kind)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def main():
    write("remote_region", "valid", region())
    write("remote_region", "read-only-offset", region(base=0, flags=1))
    write("remote_region", "virt-huge", region(base=0xFFFFFFFFFFFFF000, length=0x2000, flags=7))
    write("remote_region", "bad-crc", region()[:32] + b"\0\0\0\0" + b"\0\0\0\0")
    write("remote_region", "zero-length", region(length=0))
    write("remote_region", "version-2", region(version=2))
    # handshake: byte 0 = mode (bit0 acceptor, bit1 secret), then the peer's bytes
    reg = frame(4, region())
    write("handshake", "connector", b"\0" + hello() + offer() + reg + reg)
    write("handshake", "connector-rdm", b"\0" + hello() + offer(1) + reg)
    write("handshake", "acceptor", b"\1" + hello() + frame(3) + reg)
    write("handshake", "connector-secret", b"\2" + hello(1) + frame(8, b"\x11" * 32) + frame(9, b"\x22" * 32))
    write("handshake", "acceptor-secret", b"\3" + hello(1) + frame(9, b"\x33" * 64))
    write("handshake", "error-frame", b"\0" + hello() + frame(7, b"the peer failed: because"))
    write("handshake", "old-version", b"\0" + frame(1, b"\0\0\0\0", version=1))
    write("handshake", "truncated-offer", b"\0" + hello() + offer()[:30])
    write("node_address", "rdm", node_address())
    write("node_address", "msg-tcp", node_address(kind=0, provider="tcp"))
    write("node_address", "shm", node_address(provider="shm", fabric=b"weft.4026531836.1234.5678.0\0"))
    write("node_address", "version-2", node_address(version=2))
    write("node_address", "truncated", node_address()[:20])
    # server: byte 0 = mode (bit0: the server holds a secret), then a stranger's bytes
    write("server", "hello-ready", b"\0" + hello() + frame(3))
    write("server", "hello-ready-node", b"\0" + hello() + frame(3, node_address(kind=0, provider="tcp")))
    write("server", "hello-ready-twice", b"\0" + hello() + frame(3) + frame(3))
    write("server", "secret-proof", b"\1" + hello(1) + frame(9, b"\x33" * 64))
    write("server", "secret-missing", b"\1" + hello())
    write("server", "error-frame", b"\0" + hello() + frame(7, b"the client failed: because"))
    write("server", "garbage", b"\0GET / HTTP/1.0\r\n\r\n")
    write("server", "huge-length", b"\0" + b"WEFT" + struct.pack("<HHI", BOOTSTRAP_VERSION, 1, 1 << 30))


if __name__ == "__main__":
    main()
