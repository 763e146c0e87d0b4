"""The UDP read path over the kernel's sockets (larchd --udp, dataplane/UDP.md).

A client written from UDP.md alone (the header, SipHash-2-4, jute) reads
over UDP what kazoo wrote over TCP: anonymously, and signed by kazoo's own
session, whose digest identity the read then has. The minimum zxid gives
read-your-writes across the two transports; forged, tampered and stale
requests get the statuses UDP.md names, and mntr counts them.
"""

import os
import random
import socket
import struct
import time
import unittest

import subprocess

from harness import (HOST, Server, four_letter, kazoo_client, larchd_path, stop_kazoo, sut_kind,
                     unique_path)

MAGIC = 0x4C524348
FLAG_SESSION = 0x01
FLAG_REPLY = 0x80
OP_EXISTS, OP_GETDATA, OP_GETCHILDREN = 3, 4, 8
OK, BEHIND, TOO_BIG, NO_SESSION, BAD_MAC, BAD_REQUEST = 0, 1, 2, 3, 4, 5
ZNONODE, ZNOAUTH = -101, -102
STAT = struct.Struct(">qqqqiiiqiiq")
MASK = (1 << 64) - 1


def _rotl(x, b):
    return ((x << b) | (x >> (64 - b))) & MASK


def siphash24(key, data):
    """SipHash-2-4 of data under a 16-byte key (the reference algorithm)."""
    k0, k1 = struct.unpack("<QQ", key)
    v = [k0 ^ 0x736F6D6570736575, k1 ^ 0x646F72616E646F6D,
         k0 ^ 0x6C7967656E657261, k1 ^ 0x7465646279746573]

    def rounds(n):
        for _ in range(n):
            v[0] = (v[0] + v[1]) & MASK
            v[1] = _rotl(v[1], 13) ^ v[0]
            v[0] = _rotl(v[0], 32)
            v[2] = (v[2] + v[3]) & MASK
            v[3] = _rotl(v[3], 16) ^ v[2]
            v[0] = (v[0] + v[3]) & MASK
            v[3] = _rotl(v[3], 21) ^ v[0]
            v[2] = (v[2] + v[1]) & MASK
            v[1] = _rotl(v[1], 17) ^ v[2]
            v[2] = _rotl(v[2], 32)

    def absorb(m):
        v[3] ^= m
        rounds(2)
        v[0] ^= m

    whole = len(data) - len(data) % 8
    for i in range(0, whole, 8):
        absorb(struct.unpack_from("<Q", data, i)[0])
    last = (len(data) & 0xFF) << 56
    for i, b in enumerate(data[whole:]):
        last |= b << (8 * i)
    absorb(last)
    v[2] ^= 0xFF
    rounds(4)
    return v[0] ^ v[1] ^ v[2] ^ v[3]


def jute_path_watch(path):
    p = path.encode()
    return struct.pack(">i", len(p)) + p + b"\x00"


def request(rid, op, record, min_zxid=0, session=None, pad=0):
    """A request datagram; session is (id, password) to sign it."""
    sid, flags = (session[0], FLAG_SESSION) if session else (0, 0)
    head = struct.pack(">IBBHQqqiIQ", MAGIC, 1, flags, 48, rid, min_zxid, sid, op, 0, 0)
    d = head + record + b"\x00" * pad
    if session:
        mac = siphash24(session[1], d)
        d = d[:40] + struct.pack(">Q", mac) + d[48:]
    return d


def parse_reply(d):
    magic, version, flags, hlen, rid, status, detail, xid, zxid, err = struct.unpack_from(
        ">IBBHQiIiqi", d)
    assert magic == MAGIC and version == 1 and flags & FLAG_REPLY and hlen == 24
    return {"rid": rid, "status": status, "detail": detail, "zxid": zxid, "err": err,
            "record": d[40:], "flags": flags}


def get_data_record(rec):
    n = struct.unpack_from(">i", rec)[0]
    data = rec[4:4 + n] if n >= 0 else None
    stat = STAT.unpack_from(rec, 4 + max(n, 0))
    return data, stat


class UdpClient:
    """Sends a datagram and waits for the reply to its request id, sending
    again on silence (requests are idempotent): bounded tries."""

    def __init__(self, port):
        self.addr = (HOST, port)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.rid = 0

    def close(self):
        self.sock.close()

    def ask(self, op, record, tries=5, wait_s=0.5, **kw):
        self.rid += 1
        d = request(self.rid, op, record, **kw)
        return self.ask_raw(d, self.rid, tries, wait_s)

    def ask_raw(self, d, rid, tries=5, wait_s=0.5):
        for _ in range(tries):
            try:
                self.sock.sendto(d, self.addr)
            except OSError:
                pass  # dropped on the way out (a firewall says EPERM): as lost
            deadline = time.monotonic() + wait_s
            while time.monotonic() < deadline:
                self.sock.settimeout(max(deadline - time.monotonic(), 0.001))
                try:
                    r = self.sock.recv(65536)
                except socket.timeout:
                    break
                rep = parse_reply(r)
                if rep["rid"] == rid:
                    return rep
        return None

    def get(self, path, **kw):
        return self.ask(OP_GETDATA, jute_path_watch(path), **kw)


def free_udp_port():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def mntr(port):
    out = {}
    for line in four_letter(port, "mntr").decode().splitlines():
        k, _, v = line.partition("\t")
        out[k] = v
    return out


@unittest.skipUnless(sut_kind() == "larch", "the UDP read path is larchd's")
class UdpReadTest(unittest.TestCase):
    def setUp(self):
        self.udp_port = free_udp_port()
        self.srv = Server(cfg_lines=["larch.udp=%s:%d" % (HOST, self.udp_port)]).start()
        self.addCleanup(self.srv.stop)
        self.zk = kazoo_client(self.srv.port)
        self.addCleanup(stop_kazoo, self.zk)
        self.udp = UdpClient(self.udp_port)
        self.addCleanup(self.udp.close)

    def test_reads_what_kazoo_wrote_and_its_own_writes(self):
        base = unique_path("udp")
        self.zk.create(base + "/cfg", b"v1", makepath=True)
        self.zk.create(base + "/cfg/a", b"")
        rep = self.udp.get(base + "/cfg")
        self.assertEqual(rep["status"], OK)
        self.assertEqual(rep["err"], 0)
        data, stat = get_data_record(rep["record"])
        self.assertEqual(data, b"v1")
        self.assertEqual(stat[9], 1)  # numChildren
        # read-your-writes: the write's zxid as the minimum, over UDP
        st = self.zk.set(base + "/cfg", b"v2")
        rep = self.udp.get(base + "/cfg", min_zxid=st.mzxid)
        self.assertEqual(rep["status"], OK)
        self.assertEqual(get_data_record(rep["record"])[0], b"v2")
        self.assertGreaterEqual(rep["zxid"], st.mzxid)
        # a minimum this server has not reached: BEHIND, and where it is
        rep = self.udp.get(base + "/cfg", min_zxid=rep["zxid"] + 1000)
        self.assertEqual(rep["status"], BEHIND)
        rep = self.udp.ask(OP_GETCHILDREN, jute_path_watch(base + "/cfg"))
        self.assertEqual(rep["err"], 0)
        self.assertEqual(struct.unpack_from(">i", rep["record"])[0], 1)
        rep = self.udp.ask(OP_EXISTS, jute_path_watch(base + "/none"))
        self.assertEqual((rep["status"], rep["err"]), (OK, ZNONODE))

    def test_a_signed_session_reads_with_its_identity(self):
        from kazoo.security import make_digest_acl
        zk = kazoo_client(self.srv.port, auth_data=[("digest", "alice:secret")])
        path = unique_path("udp-acl")
        zk.create(path, b"hers", acl=[make_digest_acl("alice", "secret", read=True, all=False)])
        session = zk.client_id  # (session id, password): what the ConnectResponse gave
        self.assertEqual(len(session[1]), 16)
        anon = self.udp.get(path)
        self.assertEqual((anon["status"], anon["err"]), (OK, ZNOAUTH))
        rep = self.udp.get(path, session=session)
        self.assertEqual((rep["status"], rep["err"]), (OK, 0))
        self.assertTrue(rep["flags"] & FLAG_SESSION)
        self.assertEqual(get_data_record(rep["record"])[0], b"hers")
        # a tampered request, a wrong password, a session nobody has
        self.udp.rid += 1
        d = bytearray(request(self.udp.rid, OP_GETDATA, jute_path_watch(path), session=session))
        d[-2] ^= 0x20
        self.assertEqual(self.udp.ask_raw(bytes(d), self.udp.rid)["status"], BAD_MAC)
        wrong = (session[0], bytes(16))
        self.assertEqual(self.udp.get(path, session=wrong)["status"], BAD_MAC)
        self.assertEqual(self.udp.get(path, session=(session[0] + 1, session[1]))["status"],
                         NO_SESSION)
        # closed: the session is gone
        stop_kazoo(zk)
        self.assertEqual(self.udp.get(path, session=session)["status"], NO_SESSION)
        m = mntr(self.srv.port)
        self.assertEqual(int(m["zk_larch_udp_port"]), self.udp_port)
        self.assertGreaterEqual(int(m["zk_larch_udp_replies_bad_mac"]), 2)
        self.assertGreaterEqual(int(m["zk_larch_udp_replies_no_session"]), 2)
        self.assertGreaterEqual(int(m["zk_larch_udp_replies_ok"]), 2)

    def test_big_values_need_a_padded_request_and_garbage_gets_nothing(self):
        path = unique_path("udp-big")
        self.zk.create(path, os.urandom(3000))
        rep = self.udp.get(path)
        self.assertEqual(rep["status"], TOO_BIG)
        need = rep["detail"]
        self.assertGreater(need, 3000)
        record = jute_path_watch(path)
        rep = self.udp.ask(OP_GETDATA, record, pad=(need + 2) // 3 - 48 - len(record))
        self.assertEqual((rep["status"], rep["err"]), (OK, 0))
        self.assertEqual(len(get_data_record(rep["record"])[0]), 3000)
        # not requests: no answer at all
        before = int(mntr(self.srv.port)["zk_larch_udp_datagrams"])
        for junk in (b"", b"x" * 47, b"\x00" * 100, struct.pack(">I", MAGIC) + b"\x01\x80" + b"\x00" * 60):
            self.assertIsNone(self.udp.ask_raw(junk, 0, tries=1, wait_s=0.2))
        self.assertEqual(self.udp.ask(99, record)["status"], BAD_REQUEST)
        m = mntr(self.srv.port)
        self.assertGreaterEqual(int(m["zk_larch_udp_datagrams"]), before + 5)
        self.assertGreaterEqual(int(m["zk_larch_udp_dropped_short"]), 2)
        self.assertGreaterEqual(int(m["zk_larch_udp_dropped_not_larch"]), 1)
        self.assertGreaterEqual(int(m["zk_larch_udp_dropped_reply"]), 1)
        # the server still serves
        self.assertEqual(self.udp.get(path, pad=need)["status"], OK)

    def test_larch_bench_reads_over_udp(self):
        """larch-bench --udp (the build's, beside larchd): every read answered."""
        bench = os.path.join(os.path.dirname(os.path.dirname(larchd_path())), "bench",
                             "larch-bench")
        if not os.access(bench, os.X_OK):
            self.skipTest("no larch-bench beside %s" % larchd_path())
        r = subprocess.run([bench, "--server", "%s:%d" % (HOST, self.srv.port),
                            "--udp", "%s:%d" % (HOST, self.udp_port), "--read-ratio", "100",
                            "--keys", "50", "--sessions", "4", "--outstanding", "4",
                            "--warmup", "0.2", "--duration", "0.5", "--json"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn('"client":"udp"', r.stdout)
        self.assertIn('"errors_total":0', r.stdout)
        m = mntr(self.srv.port)
        self.assertGreater(int(m["zk_larch_udp_replies_ok"]), 100)
        self.assertEqual(int(m["zk_larch_udp_replies_bad_request"]), 0)

    def test_a_storm_of_bad_datagrams_is_counted_and_survived(self):
        """Random bytes, truncations, bit flips of good and signed requests
        and replays (LARCH_FUZZ_SEED replays a run): every one is answered
        or dropped and counted, and the server goes on serving."""
        seed = int(os.environ.get("LARCH_FUZZ_SEED", "0")) or random.randrange(1 << 30)
        rng = random.Random(seed)
        path = unique_path("udp-storm")
        self.zk.create(path, b"calm")
        session = self.zk.client_id
        good = [request(7, OP_GETDATA, jute_path_watch(path)),
                request(8, OP_GETDATA, jute_path_watch(path), session=session),
                request(9, OP_GETCHILDREN, jute_path_watch("/"), session=session)]
        before = int(mntr(self.srv.port)["zk_larch_udp_datagrams"])
        sent = 0
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            for i in range(3000):
                kind = rng.randrange(4)
                d = bytearray(rng.choice(good))
                if kind == 0:
                    d = bytearray(rng.randbytes(rng.randrange(0, 200)))
                elif kind == 1:
                    d = d[:rng.randrange(len(d))]
                elif kind == 2:
                    for _ in range(rng.randrange(1, 4)):
                        d[rng.randrange(len(d))] ^= 1 << rng.randrange(8)
                s.sendto(bytes(d), (HOST, self.udp_port))
                sent += 1
                if i % 200 == 0:
                    time.sleep(0.01)  # the socket buffer is not the thing under test
        rep = self.udp.get(path)
        self.assertIsNotNone(rep, "seed %d: the server stopped answering" % seed)
        self.assertEqual(get_data_record(rep["record"])[0], b"calm")
        m = mntr(self.srv.port)
        total = int(m["zk_larch_udp_datagrams"]) - before
        counted = sum(int(v) for k, v in m.items()
                      if k.startswith("zk_larch_udp_replies_") or k.startswith("zk_larch_udp_dropped_"))
        self.assertLessEqual(total, sent + 1, "seed %d" % seed)
        self.assertEqual(counted, int(m["zk_larch_udp_datagrams"]), "seed %d" % seed)


if __name__ == "__main__":
    unittest.main()
