"""Bad input: seeded random garbage at a live server.

Random bytes, truncated frames, bogus/negative/huge lengths, random opcodes and
mutated requests after a valid handshake. Throughout, a well-behaved kazoo
client keeps working; at the end, when the server is larchd built with ASan
(env LARCHD_ASAN), it must exit with status 0 on SIGTERM with no sanitizer
report on stderr.

Replay a run with LARCH_FUZZ_SEED=<seed> (printed at the start). Other knobs:
LARCH_FUZZ_CASES (default 400), LARCH_FUZZ_SECONDS (time budget, default 60).
"""

import os
import random
import socket
import struct
import sys
import time
import unittest

from harness import (HOST, MAX_BUFFER, OK, OP, OPEN_ACL, RawClient, Server,
                     Writer, kazoo_client, stop_kazoo, sut_kind, unique_path)

CASES = int(os.environ.get("LARCH_FUZZ_CASES", "400"))
TIME_BUDGET_S = float(os.environ.get("LARCH_FUZZ_SECONDS", "60"))
HEALTH_EVERY = 20
READ_WAIT_S = 0.1

KNOWN_OPS = [v for v in OP.values()] + [0, 10, 23, 99, 108, 999, -2, -12, 0x7FFFFFFF, -0x80000000]
SPECIAL_XIDS = [-1, -2, -4, -8, 0, 1, 0x7FFFFFFF, -0x80000000]
LENGTHS = [-1, -0x80000000, 0, 1, 3, 4, 7, MAX_BUFFER, MAX_BUFFER + 1, 0x7FFFFFFF, 0x10000000]


def frame(body):
    return struct.pack(">i", len(body)) + body


def connect_request(timeout_ms=10000):
    return (Writer().int(0).long(0).int(timeout_ms).long(0).buffer(b"\0" * 16)
            .bool(False).bytes())


class Garbage:
    """Generators of hostile input; each returns a list of chunks to send."""

    def __init__(self, rng):
        self.rng = rng

    def rand_bytes(self, lo=0, hi=300):
        return bytes(self.rng.getrandbits(8) for _ in range(self.rng.randint(lo, hi)))

    def rand_string_field(self):
        r = self.rng.random()
        if r < 0.2:
            return struct.pack(">i", self.rng.choice([-1, -7, 0x7FFFFFFF, MAX_BUFFER + 5]))
        if r < 0.4:
            return struct.pack(">i", 0)
        s = self.rng.choice(["/", "/fuzz", "//", "/a/", "", "\x00", "/\u00e9\u00e8",
                             "/" + "x" * self.rng.randint(1, 2000), "no-slash", "/zookeeper"])
        b = s.encode("utf-8")
        return struct.pack(">i", len(b)) + b

    def valid_body(self, op):
        """A well-formed body for op (to mutate afterwards)."""
        p = "/fuzz-%d" % self.rng.randint(0, 50)
        if op in (OP["create"], OP["create2"], OP["createContainer"]):
            return RawClient.create_body(p, self.rand_bytes(0, 40), OPEN_ACL, self.rng.randint(0, 6))
        if op == OP["createTTL"]:
            return RawClient.create_body(p, b"", OPEN_ACL, 5, ttl=self.rng.choice([0, -1, 1000]))
        if op in (OP["getData"], OP["exists"], OP["getChildren"], OP["getChildren2"]):
            return Writer().string(p).bool(self.rng.random() < 0.5).bytes()
        if op == OP["setData"]:
            return Writer().string(p).buffer(self.rand_bytes(0, 40)).int(-1).bytes()
        if op in (OP["delete"], OP["check"]):
            return Writer().string(p).int(self.rng.randint(-2, 3)).bytes()
        if op in (OP["multi"], OP["multiRead"]):
            ops = [("create", p, b"", OPEN_ACL, 0), ("getData", p), ("check", p, 0)]
            return RawClient.multi_body(self.rng.sample(ops, self.rng.randint(0, 3)))
        if op in (OP["setWatches"], OP["setWatches2"]):
            w = Writer().long(self.rng.randint(-1, 1 << 40))
            for _ in range(5 if op == OP["setWatches2"] else 3):
                w.strings([p] * self.rng.randint(0, 3))
            return w.bytes()
        if op == OP["auth"]:
            return Writer().int(0).string(self.rng.choice(["digest", "ip", "x"])).buffer(
                self.rand_bytes(0, 30)).bytes()
        if op in (OP["addWatch"], OP["checkWatches"], OP["removeWatches"]):
            return Writer().string(p).int(self.rng.randint(-1, 4)).bytes()
        if op == OP["setACL"]:
            return Writer().string(p).acls(OPEN_ACL).int(-1).bytes()
        return Writer().string(p).bytes()

    def mutate(self, body):
        b = bytearray(body)
        for _ in range(self.rng.randint(1, 4)):
            kind = self.rng.randrange(5)
            if kind == 0 and b:      # flip a byte
                b[self.rng.randrange(len(b))] = self.rng.getrandbits(8)
            elif kind == 1 and b:    # truncate
                del b[self.rng.randrange(len(b)):]
            elif kind == 2:          # extend
                b += self.rand_bytes(1, 40)
            elif kind == 3 and len(b) >= 4:  # poison a 4-byte field (length/count)
                i = self.rng.randrange(len(b) - 3)
                b[i:i + 4] = struct.pack(">i", self.rng.choice(LENGTHS))
            else:                    # splice a hostile string field
                i = self.rng.randrange(len(b) + 1)
                b[i:i] = self.rand_string_field()
        return bytes(b)

    def request(self):
        op = self.rng.choice(KNOWN_OPS)
        xid = self.rng.choice(SPECIAL_XIDS) if self.rng.random() < 0.3 else self.rng.randint(1, 1000)
        r = self.rng.random()
        if r < 0.4:
            body = self.valid_body(op) if op in OP.values() else self.rand_bytes()
        elif r < 0.8:
            body = self.mutate(self.valid_body(self.rng.choice(list(OP.values()))))
        else:
            body = self.rand_bytes()
        return struct.pack(">ii", xid, op) + body

    # -- whole cases: (needs_handshake, chunks) -----------------------------
    def case(self):
        kind = self.rng.randrange(9)
        if kind == 0:   # random bytes instead of a ConnectRequest
            return "raw-bytes", False, [self.rand_bytes(1, 400)]
        if kind == 1:   # truncated ConnectRequest frame
            f = frame(connect_request())
            return "truncated-connect", False, [f[:self.rng.randrange(1, len(f))]]
        if kind == 2:   # bogus length prefix, before or after the handshake
            n = self.rng.choice(LENGTHS)
            return "bogus-length", self.rng.random() < 0.5, [struct.pack(">i", n) + self.rand_bytes(0, 64)]
        if kind == 3:   # mutated ConnectRequest
            return "mutated-connect", False, [frame(self.mutate(connect_request()))]
        if kind == 4:   # several random requests after a valid handshake
            return "random-requests", True, [frame(self.request()) for _ in range(self.rng.randint(1, 8))]
        if kind == 5:   # frame claims more than it carries, then hang up
            body = self.request()
            return "truncated-frame", True, [struct.pack(">i", len(body) + self.rng.randint(1, 500)) + body]
        if kind == 6:   # a request dripped byte by byte
            f = frame(self.request())[:64]
            return "drip", True, [f[i:i + 1] for i in range(len(f))]
        if kind == 7:   # pipelined burst, never read
            return "burst", True, [b"".join(frame(self.request()) for _ in range(self.rng.randint(10, 60)))]
        return "short-header", True, [frame(self.rand_bytes(0, 7))]


def run_case(port, needs_handshake, chunks):
    """Sends the chunks; reads (and drops) whatever comes back for a moment."""
    s = socket.create_connection((HOST, port), timeout=2.0)
    try:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if needs_handshake:
            s.sendall(frame(connect_request()))
        for chunk in chunks:
            s.sendall(chunk)
            if len(chunks) > 1:
                time.sleep(0.002)
        deadline = time.monotonic() + READ_WAIT_S
        while time.monotonic() < deadline:
            s.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                if not s.recv(65536):
                    break
            except socket.timeout:
                break
    except (BrokenPipeError, ConnectionResetError, socket.timeout):
        pass  # the server hanging up on garbage is a fine answer
    finally:
        s.close()


class BadInputTest(unittest.TestCase):

    def setUp(self):
        self.asan = bool(os.environ.get("LARCHD_ASAN")) and sut_kind() == "larch"
        env = {}
        if self.asan:
            env = {"ASAN_OPTIONS": "detect_leaks=1:halt_on_error=1",
                   "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1"}
        self.server = Server(binary=os.environ.get("LARCHD_ASAN") if self.asan else None, env=env)
        self.server.start()
        self.addCleanup(self.server.stop)

    def check_health(self, zk, where):
        self.assertTrue(self.server.alive(), "server died %s:\n%s" % (where, self.server.stderr_tail()))
        p = unique_path("health")
        zk.create(p, b"1")
        zk.set(p, b"2")
        self.assertEqual(zk.get(p)[0], b"2", where)
        zk.delete(p)
        with RawClient(self.server.port) as c:
            self.assertGreater(c.connect().timeout_ms, 0, "fresh handshake %s" % where)
            self.assertEqual(c.close_session().err, OK)

    def test_garbage_does_not_hurt_server(self):
        seed = int(os.environ.get("LARCH_FUZZ_SEED", str(random.SystemRandom().randrange(1 << 32))))
        sys.stderr.write("\nbad-input seed %d (replay: LARCH_FUZZ_SEED=%d)\n" % (seed, seed))
        rng = random.Random(seed)
        gen = Garbage(rng)
        zk = kazoo_client(self.server.port)
        self.addCleanup(stop_kazoo, zk)
        start = time.monotonic()
        done = 0
        kinds = {}
        for i in range(CASES):
            if time.monotonic() - start > TIME_BUDGET_S:
                break
            name, handshake, chunks = gen.case()
            kinds[name] = kinds.get(name, 0) + 1
            run_case(self.server.port, handshake, chunks)
            done += 1
            if done % HEALTH_EVERY == 0:
                self.check_health(zk, "after case %d (%s, seed %d)" % (i, name, seed))
        self.check_health(zk, "at the end (seed %d)" % seed)
        sys.stderr.write("bad-input: %d cases in %.1f s: %s\n" % (
            done, time.monotonic() - start, ", ".join("%s=%d" % kv for kv in sorted(kinds.items()))))
        self.assertGreaterEqual(done, min(CASES, 50), "too few cases ran in the time budget")
        stop_kazoo(zk)
        status = self.server.stop()
        if self.asan:
            self.assertEqual(self.server.sanitizer_report(), [], "sanitizer report (seed %d):\n%s" % (
                seed, self.server.stderr_tail(60)))
            self.assertEqual(status, 0, "ASan larchd exit status on SIGTERM (seed %d):\n%s" % (
                seed, self.server.stderr_tail(30)))


if __name__ == "__main__":
    unittest.main()
