#!/usr/bin/env python3
"""Writes the seed corpus (tests/fuzz/corpus/<target>/): valid messages of
each kind and their edge cases, in the input layout each target documents.
Re-run after changing a wire format: python3 tests/fuzz/make_corpus.py"""
import hashlib
import hmac
import os
import socket
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
MAGIC = 0x1234_5678_9ABC_DEF1
HELLO, REPLY, ERROR, RING_HELLO, P2P_HELLO, RING, P2P, BCAST, NEXT_FIRST = range(1, 10)


def header(magic, type_, tag, length):
    return struct.pack("<QIIQ", magic, type_, tag, length)


def v4(ip, port):  # SocketAddress: sockaddr_in padded to 28 bytes
    return (struct.pack("<H", socket.AF_INET) + struct.pack(">H", port) + socket.inet_aton(ip)).ljust(28, b"\0")


def v6(ip, port, scope=0):
    return (struct.pack("<H", socket.AF_INET6) + struct.pack(">H", port) + struct.pack("<I", 0)
            + socket.inet_pton(socket.AF_INET6, ip) + struct.pack("<I", scope))


def hello(rank, nranks, addr, blob, root=0, nroots=1):
    return struct.pack("<ii", rank, nranks) + addr + struct.pack("<Iii", len(blob), root, nroots) + blob


def next_first(rank, nranks, addr):
    return struct.pack("<ii", rank, nranks) + addr


def write(target, seeds):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    for old in os.listdir(d):
        os.remove(os.path.join(d, old))
    for name, data in seeds.items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)


m = struct.pack("<Q", MAGIC)
blob = bytes(range(64))
write("fuzz_header", {
    "hello": m + struct.pack("<Q", 1 << 20) + header(MAGIC, HELLO, 0, 104),
    "p2p-max": m + struct.pack("<Q", 1 << 32) + header(MAGIC, P2P, 7, 1 << 32),
    "too-long": m + struct.pack("<Q", 1 << 20) + header(MAGIC, HELLO, 0, 1 << 40),
    "wrong-magic": m + struct.pack("<Q", 1 << 20) + header(MAGIC ^ 1, HELLO, 0, 40),
    "short": m + struct.pack("<Q", 1 << 20) + header(MAGIC, HELLO, 0, 40)[:11],
    "empty": m + struct.pack("<Q", 0),
})
good = hello(1, 4, v4("127.0.0.1", 40000), blob)
write("fuzz_root_hello", {
    "v4": m + header(MAGIC, HELLO, 0, len(good)) + good,
    "v6": m + header(MAGIC, HELLO, 0, 112) + hello(0, 2, v6("::1", 5555), blob),
    "no-blob": m + header(MAGIC, HELLO, 0, 48) + hello(0, 1, v4("10.0.0.1", 1), b""),
    "root-2-of-3": m + header(MAGIC, HELLO, 0, len(good)) + hello(7, 9, v4("127.0.0.1", 40000), blob, 2, 3),
    "wrong-root": m + header(MAGIC, HELLO, 0, len(good)) + hello(1, 9, v4("127.0.0.1", 40000), blob, 2, 3),
    "more-roots-than-ranks": m + header(MAGIC, HELLO, 0, len(good)) + hello(1, 2, v4("127.0.0.1", 1), blob, 1, 3),
    # tag: nRoots = 1 + tag % 64 (3), rootIndex = (tag >> 8) % nRoots (0): rank 3 opens root 1's block of 9
    "next-first": m + header(MAGIC, NEXT_FIRST, 2, 36) + next_first(3, 9, v4("127.0.0.1", 40001)),
    "next-first-wrong-rank": m + header(MAGIC, NEXT_FIRST, 2, 36) + next_first(4, 9, v4("127.0.0.1", 40001)),
    "next-first-long": m + header(MAGIC, NEXT_FIRST, 2, 40) + next_first(3, 9, v4("127.0.0.1", 40001)) + b"xxxx",
    "rank-out-of-range": m + header(MAGIC, HELLO, 0, len(good)) + hello(4, 4, v4("127.0.0.1", 40000), blob),
    "negative-nranks": m + header(MAGIC, HELLO, 0, len(good)) + hello(0, -1, v4("127.0.0.1", 40000), blob),
    "port-0": m + header(MAGIC, HELLO, 0, len(good)) + hello(0, 2, v4("127.0.0.1", 0), blob),
    "blob-lies": m + header(MAGIC, HELLO, 0, len(good)) + good[:36] + struct.pack("<I", 0xFFFFFFFF) + good[40:],
    "bad-family": m + header(MAGIC, HELLO, 0, len(good)) + hello(0, 2, b"\x01\0" + b"A" * 26, blob),
    "wrong-type": m + header(MAGIC, REPLY, 0, len(good)) + good,
    "short-body": m + header(MAGIC, HELLO, 0, len(good)) + good[:20],
})
err = struct.pack("<i", 3) + b"rank 3 of nranks 2 is out of range\0"
write("fuzz_root_answer", {
    "successor-v4": header(MAGIC, REPLY, 0, 28) + v4("192.168.1.7", 1234),
    "successor-v6": header(MAGIC, REPLY, 0, 28) + v6("fe80::1", 1234, 2),
    "error": header(MAGIC, ERROR, 0, len(err)) + err,
    "error-no-nul": header(MAGIC, ERROR, 0, 12) + struct.pack("<i", 6) + b"ABCDEFGH",
    "error-bad-code": header(MAGIC, ERROR, 0, 9) + struct.pack("<i", -5) + b"oops\0",
    "error-code-only": header(MAGIC, ERROR, 0, 4) + struct.pack("<i", 2),
    "error-too-long": header(MAGIC, ERROR, 0, 4097) + struct.pack("<i", 2) + b"x" * 64,
    "successor-invalid": header(MAGIC, REPLY, 0, 28) + b"\0" * 28,
})
pre = m + struct.pack("<iIQ", 8, 5, 4096)
write("fuzz_link_hello", {
    "ring-hello": pre + header(MAGIC, RING_HELLO, 3, 0),
    "p2p-hello": pre + header(MAGIC, P2P_HELLO, 7, 0),
    "tag-too-big": pre + header(MAGIC, P2P_HELLO, 8, 0),
    "with-body": pre + header(MAGIC, RING_HELLO, 3, 1),
    "ring-step": pre + header(MAGIC, RING, 5, 4096),
    "ring-wrong-seq": pre + header(MAGIC, RING, 4, 4096),
    "ring-wrong-length": pre + header(MAGIC, RING, 5, 4095),
    "zero-nranks": m + struct.pack("<iIQ", 0, 0, 0) + header(MAGIC, P2P_HELLO, 0, 0),
})


SECRET = bytes(range(0x40, 0x60))


def wire_magic(secret):  # unique_id.cc wireMagic: HMAC-SHA256(secret, label), first 8 bytes, never 0
    d = hmac.new(secret, b"uniccl bootstrap magic", hashlib.sha256).digest()
    return struct.unpack("<Q", d[:8])[0] or 1


def uid(version, flags, magic, addr, secret=SECRET):
    return (struct.pack("<BB6xQ", version, flags, magic) + addr + secret).ljust(128, b"\0")


GOOD = wire_magic(SECRET)
write("fuzz_unique_id", {
    "v4": uid(2, 0, GOOD, v4("10.1.2.3", 45678)),
    "v6": uid(2, 0, GOOD, v6("2001:db8::5", 45678)),
    "from-env": uid(2, 1, GOOD, v4("127.0.0.1", 29500)),
    "public-secret": uid(2, 3, GOOD, v4("127.0.0.1", 29500)),
    "version-1": uid(1, 0, GOOD, v4("10.1.2.3", 45678)),
    "wrong-magic": uid(2, 0, GOOD ^ 1, v4("10.1.2.3", 45678)),
    "magic-0": uid(2, 0, 0, v4("10.1.2.3", 45678)),
    "port-0": uid(2, 0, GOOD, v4("10.1.2.3", 0)),
    "zeros": b"\0" * 128,
    "short": uid(2, 0, GOOD, v4("10.1.2.3", 45678))[:20],
})
# piece size (1 byte) | what a peer without the secret sends the listener
write("fuzz_handshake", {
    "zero-proof": b"\x30" + b"\0" * 48,
    "int-max-hello": b"\x07" + header(MAGIC, HELLO, 0, 48) + hello(0, 0x7FFFFFFF, v4("127.0.0.1", 1), b""),
    "one-byte-at-a-time": b"\x00" + bytes(range(48)),
    "short": b"\x05" + b"partial",
    "nothing": b"\x00",
})
write("fuzz_socket_address", {
    "v4": b"\x03127.0.0.1:29500",
    "v6": b"\x05[::1]:29500",
    "v6-scope": b"\x02[fe80::1%1]:80",
    "host": b"\x04localhost:1",
    "no-port": b"\x0010.0.0.1",
    "empty-port": b"\x0010.0.0.1:",
    "big-port": b"\x0110.0.0.1:65536",
    "neg-port": b"\x0010.0.0.1:-1",
    "v6-no-brackets": b"\x00::1:80",
    "unclosed": b"\x00[::1:80",
    "ifname": b"\x05^eth0,=ib0lo",
})


def config(flags, size, magic, version, fields=b"", names=b"Socket\0myComm"):
    return struct.pack("<BQII", flags, size, magic, version) + fields.ljust(64, b"\0") + names


UNDEF = struct.pack("<i", -2147483648)
undef_fields = (UNDEF * 4 + b"\0" * 8 + UNDEF * 2 + b"\0" * 8 + UNDEF * 6)
write("fuzz_config", {
    "current": config(0, 80, 0xCAFEBEEF, 22809, undef_fields),
    "v2.14": config(0, 24, 0xCAFEBEEF, 21400, UNDEF),
    "v2.17": config(0, 48, 0xCAFEBEEF, 21700, UNDEF * 4),
    "bad-magic": config(0, 80, 0xDEADBEEF, 22809, undef_fields),
    "small-size": config(1, 16, 0, 22809),
    "huge-size": config(3, 1 << 40, 0, 0, undef_fields),
    "min-gt-max": config(3, 80, 0, 0, struct.pack("<iiii", 1, 4, 9, 2)),
    "null-names": config(1 | 2 | 8 | 16, 80, 0, 0, undef_fields),
})
