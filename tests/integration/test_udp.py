"""The UDP read path over the kernel's sockets (larchd --udp, dataplane/UDP.md).

A client written from UDP.md alone (the header, SipHash-2-4, jute) reads
over UDP what kazoo wrote over TCP: anonymously, and signed by kazoo's own
session, whose digest identity the read then has. The minimum zxid gives
read-your-writes across the two transports; forged, tampered and stale
requests get the statuses UDP.md names, and mntr counts them.
"""

import json
import os
import random
import re
import signal
import socket
import struct
import time
import unittest

import subprocess

from harness import (HOST, Ensemble, Server, four_letter, kazoo_client, larchd_path, stop_kazoo,
                     sut_kind, unique_path, wait_until)
from test_cli import cli_path

CLI_TIMEOUT_S = 60  # one larch-cli run, bounded

MAGIC = 0x4C524348
FLAG_SESSION = 0x01
FLAG_REPLY = 0x80
OP_EXISTS, OP_GETDATA, OP_GETCHILDREN = 3, 4, 8
OK, BEHIND, TOO_BIG, NO_SESSION, BAD_MAC, BAD_REQUEST, NOT_SERVING = 0, 1, 2, 3, 4, 5, 7
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

    def __init__(self, port, source=None):
        self.addr = (HOST, port)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        if source is not None:
            self.sock.bind((source, 0))  # another loopback address: another peer
        self.rid = 0

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

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

    def test_ip_acls_match_the_datagram_source(self):
        from kazoo.security import ACL, Id
        path = unique_path("udp-ip")
        self.zk.create(path, b"lab", acl=[ACL(1, Id("ip", "127.0.0.2/32")),  # READ
                                          ACL(31, Id("ip", "127.0.0.64/26"))])
        rep = self.udp.get(path)  # from 127.0.0.1
        self.assertEqual((rep["status"], rep["err"]), (OK, ZNOAUTH))
        for source in ("127.0.0.2", "127.0.0.100"):
            with UdpClient(self.udp_port, source=source) as other:
                rep = other.get(path)
                self.assertEqual((rep["status"], rep["err"]), (OK, 0), source)
                self.assertEqual(get_data_record(rep["record"])[0], b"lab")
        with UdpClient(self.udp_port, source="127.0.0.128") as outside:
            self.assertEqual(outside.get(path)["err"], ZNOAUTH)

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
        srvr = four_letter(self.srv.port, "srvr").decode()
        line = re.search(r"^UDP reads \(sockets\): (\S+) received=(\d+) served=(\d+) "
                         r"refused=(\d+) dropped=(\d+)$", srvr, re.M)
        self.assertIsNotNone(line, srvr)
        self.assertEqual(line.group(1), "%s:%d" % (HOST, self.udp_port))
        self.assertGreaterEqual(int(line.group(3)), 2)
        self.assertGreaterEqual(int(line.group(4)), 4)  # two bad MACs, two unknown sessions

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
        """larch-bench --udp (the build's, beside larchd): every read answered,
        and in a 90 % mix the writes go over TCP."""
        bench = os.path.join(os.path.dirname(os.path.dirname(larchd_path())), "bench",
                             "larch-bench")
        if not os.access(bench, os.X_OK):
            self.skipTest("no larch-bench beside %s" % larchd_path())
        r = subprocess.run([bench, "--server", "%s:%d" % (HOST, self.srv.port),
                            "--udp", "%s:%d" % (HOST, self.udp_port), "--read-ratio", "100,90",
                            "--keys", "50", "--sessions", "4", "--outstanding", "4",
                            "--warmup", "0.2", "--duration", "0.5", "--json"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        runs = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
        self.assertEqual([x["read_ratio"] for x in runs], [100, 90])
        for x in runs:
            self.assertEqual(x["client"], "udp")
            self.assertEqual(x["errors_total"], 0)
            self.assertGreater(x["reads"], 0)
        self.assertEqual(runs[0]["writes"], 0)
        self.assertGreater(runs[1]["writes"], 0)  # the mix's writes, over TCP
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

    def test_a_full_socket_buffer_is_counted(self):
        """While larchd is stopped (SIGSTOP), a flood of reads overflows its
        sockets' receive buffers. Once it runs again every read of the flood
        was either served or counted as an overflow (mntr), and it reads on.
        The kernel reports drops with the next datagram that gets in: the
        read after the flood."""
        path = unique_path("udp-flood")
        self.zk.create(path, b"afloat")
        m = mntr(self.srv.port)
        size = int(m["zk_larch_udp_socket_buffer_bytes"])
        if os.geteuid() == 0:  # past net.core.rmem_max: larchd asks for 8 MiB, the kernel doubles it
            self.assertGreaterEqual(size, 8 << 20, m)
        self.assertGreater(size, 0, m)
        before = (int(m["zk_larch_udp_datagrams"]),
                  int(m["zk_larch_udp_socket_buffer_overflows"]))
        flood = request(1, OP_GETDATA, jute_path_watch(path))
        # every datagram costs the buffer far more than 256 bytes (its skb)
        n = size // 256
        os.kill(self.srv.proc.pid, signal.SIGSTOP)
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                for _ in range(n):
                    s.sendto(flood, (HOST, self.udp_port))
        finally:
            os.kill(self.srv.proc.pid, signal.SIGCONT)

        def drained():  # what got in is served: the count stands still
            a = int(mntr(self.srv.port)["zk_larch_udp_datagrams"])
            time.sleep(0.2)
            return a == int(mntr(self.srv.port)["zk_larch_udp_datagrams"]) and a > before[0]
        self.assertTrue(wait_until(drained, 30))
        rep = self.udp.get(path, tries=1, wait_s=10)  # one datagram, into an empty buffer
        self.assertIsNotNone(rep, "no answer after the flood")
        self.assertEqual(get_data_record(rep["record"])[0], b"afloat")

        def accounted():
            m = mntr(self.srv.port)
            return (int(m["zk_larch_udp_datagrams"]) - before[0],
                    int(m["zk_larch_udp_socket_buffer_overflows"]) - before[1])
        self.assertTrue(wait_until(lambda: sum(accounted()) == n + 1, 20), accounted())
        served, overflowed = accounted()
        self.assertGreater(overflowed, 0)
        self.assertGreater(served, 1)


def run_cli(args, script=None):
    """larch-cli with args (and a script on stdin): (exit status, stdout, stderr)."""
    r = subprocess.run([cli_path()] + args, input=script, capture_output=True, text=True,
                       timeout=CLI_TIMEOUT_S)
    return r.returncode, r.stdout, r.stderr


def udp_counter(port, name):
    return int(mntr(port)["zk_larch_udp_" + name])


@unittest.skipUnless(sut_kind() == "larch", "the UDP read path is larchd's")
class CliUdpTest(unittest.TestCase):
    """larch-cli -udp: get, ls and stat over the UDP read path through
    liblarch's UDP transport, anonymously or as a -server session."""

    def setUp(self):
        if not os.access(cli_path(), os.X_OK):
            self.skipTest("no larch-cli at %s" % cli_path())
        self.udp_port = free_udp_port()
        self.srv = Server(cfg_lines=["larch.udp=%s:%d" % (HOST, self.udp_port)]).start()
        self.addCleanup(self.srv.stop)
        self.zk = kazoo_client(self.srv.port)
        self.addCleanup(stop_kazoo, self.zk)
        self.udp = ["-udp", "%s:%d" % (HOST, self.udp_port)]
        self.tcp = ["-server", "%s:%d" % (HOST, self.srv.port)]

    def test_anonymous_reads_print_what_zkcli_would(self):
        base = unique_path("cli-udp")
        self.zk.create(base + "/cfg", b"v1", makepath=True)
        self.zk.create(base + "/cfg/a", b"")
        before = udp_counter(self.srv.port, "replies_ok")
        for cmd in (["get", "-s", base + "/cfg"], ["ls", "-s", base + "/cfg"],
                    ["stat", base + "/cfg"], ["ls", "-R", base]):
            over_udp = run_cli(self.udp + cmd)
            self.assertEqual(over_udp[0], 0, over_udp)
            self.assertEqual(over_udp, run_cli(self.tcp + cmd), cmd)
        self.assertIn("v1\ncZxid = ", run_cli(self.udp + ["get", "-s", base + "/cfg"])[1])
        # four commands, ls -R reading three nodes and an exists: all over UDP
        self.assertGreaterEqual(udp_counter(self.srv.port, "replies_ok") - before, 8)
        rc, out, err = run_cli(self.udp + ["stat", base + "/none"])
        self.assertEqual((rc, out), (1, ""))
        self.assertIn("Node does not exist: %s/none" % base, err)
        # what needs a TCP session is refused, plainly
        rc, _, err = run_cli(self.udp + ["create", base + "/b"])
        self.assertEqual(rc, 3)
        self.assertIn("only get, ls and stat", err)
        rc, _, err = run_cli(self.udp + ["get", "-w", base + "/cfg"])
        self.assertEqual(rc, 3)
        self.assertIn("needs -server", err)
        rc, _, err = run_cli(["-udp", HOST, "get", base + "/cfg"])
        self.assertEqual(rc, 2)
        self.assertIn("bad -udp address", err)
        self.assertFalse(self.zk.exists(base + "/b"))

    def test_a_session_reads_as_itself_and_sees_its_writes(self):
        path = unique_path("cli-udp-acl")
        before = udp_counter(self.srv.port, "replies_ok")
        script = ("addauth digest alice:secret\n"
                  "create %s first digest:alice:%s:cdrwa\n"
                  "get %s\nset %s second\nget %s\nstat %s\n"
                  % (path, digest("alice", "secret"), path, path, path, path))
        rc, out, err = run_cli(self.tcp + self.udp, script)
        self.assertEqual(rc, 0, err)
        self.assertIn("first\n", out)
        self.assertIn("second\n", out)
        self.assertIn("dataVersion = 1", out)
        # the three reads went over UDP, signed: the node is alice's only
        self.assertGreaterEqual(udp_counter(self.srv.port, "replies_ok") - before, 3)
        rc, out, err = run_cli(self.udp + ["get", path])
        self.assertEqual(rc, 1)
        self.assertIn("Insufficient permission : %s" % path, err)

    def test_big_values_pad_the_request_or_go_over_tcp(self):
        path = unique_path("cli-udp-big")
        self.zk.create(path, b"x" * 3000)
        before = udp_counter(self.srv.port, "replies_too_big")
        rc, out, err = run_cli(self.udp + ["get", path])
        self.assertEqual((rc, out), (0, "x" * 3000 + "\n"), err)
        self.assertEqual(udp_counter(self.srv.port, "replies_too_big") - before, 1)
        # beyond one datagram: an error alone, the session's TCP with -server
        self.zk.set(path, b"y" * 100000)
        rc, out, err = run_cli(self.udp + ["get", path])
        self.assertEqual((rc, out), (1, ""))
        self.assertIn("does not fit a UDP datagram", err)
        rc, out, err = run_cli(self.tcp + self.udp + ["get", path])
        self.assertEqual((rc, out), (0, "y" * 100000 + "\n"), err)


def digest(user, password):
    import base64
    import hashlib
    return base64.b64encode(hashlib.sha1(("%s:%s" % (user, password)).encode()).digest()).decode()


@unittest.skipUnless(sut_kind() == "larch", "the UDP read path is larchd's")
class UdpEnsembleTest(unittest.TestCase):
    """Every member serves its own tree over UDP; the minimum zxid gives
    read-your-writes across members and transports."""

    def setUp(self):
        self.udp_ports = {}

        def udp_line(sid):
            self.udp_ports[sid] = free_udp_port()
            return ["larch.udp=%s:%d" % (HOST, self.udp_ports[sid])]
        self.ens = Ensemble(n=3, proxied=True, member_lines=udp_line)
        self.ens.start()
        self.addCleanup(self.check_stopped)

    def check_stopped(self):
        self.ens.stop()
        self.assertEqual(self.ens.sanitizer_report(), [])

    def waiting_reads(self, sid):
        """Reads sid answered with "not yet" (behind, session not known, not serving)."""
        m = self.ens.mntr(sid)
        return sum(int(m["zk_larch_udp_replies_" + k])
                   for k in ("behind", "no_session", "not_serving"))

    def test_a_cut_off_follower_serves_nobody_and_a_session_reads_its_write_after_the_heal(self):
        leader = self.ens.wait_leader()
        follower = [s for s in self.ens.ids if s != leader][0]
        zk = kazoo_client(self.ens.client_ports[leader])
        self.addCleanup(stop_kazoo, zk)
        path = unique_path("udp-ens")
        zk.create(path, b"v0")
        udp = UdpClient(self.udp_ports[follower])
        self.addCleanup(udp.close)
        self.assertTrue(wait_until(lambda: (udp.get(path) or {}).get("err") == 0, timeout_s=10),
                        "the follower never served the node")
        # every member answers from its own tree
        for sid in self.ens.ids:
            with UdpClient(self.udp_ports[sid]) as c:
                rep = c.get(path, min_zxid=zk.exists(path).mzxid)
                self.assertIn(rep["status"], (OK, BEHIND))
        self.ens.isolate(follower)
        st = zk.set(path, b"v1")  # the leader and the other follower commit it
        # once it has given its leader up it answers nobody, as over TCP:
        # its tree is old and a client without a minimum would take it
        self.assertTrue(wait_until(lambda: self.ens.mntr(follower)["zk_larch_serving"] == 0,
                                   timeout_s=20), "the cut-off follower kept serving")
        rep = udp.get(path)
        self.assertEqual(rep["status"], NOT_SERVING)
        self.assertLess(rep["zxid"], st.mzxid)
        # larch-cli: a write through the leader's session, then a read over
        # the cut-off follower's UDP: it waits until the heal, then sees it
        cli = subprocess.Popen(
            [cli_path(), "-server", "%s:%d" % (HOST, self.ens.client_ports[leader]),
             "-udp", "%s:%d" % (HOST, self.udp_ports[follower]), "--timeout", "30000"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(stop_process, cli)
        before = self.waiting_reads(follower)
        cli.stdin.write("set %s v2\nget %s\n" % (path, path))
        cli.stdin.close()
        self.assertTrue(wait_until(lambda: self.waiting_reads(follower) > before, timeout_s=20),
                        "larch-cli's read never reached the follower")
        self.assertIsNone(cli.poll(), "the read finished while the follower was cut off")
        self.ens.heal()
        cli.wait(timeout=CLI_TIMEOUT_S)  # its output is a few lines: no pipe fills
        out, err = cli.stdout.read(), cli.stderr.read()
        self.assertEqual((cli.returncode, out), (0, "v2\n"), err)
        rep = udp.get(path, min_zxid=st.mzxid)
        self.assertEqual((rep["status"], get_data_record(rep["record"])[0]), (OK, b"v2"))


def stop_process(p):
    if p.poll() is None:
        p.kill()
        p.wait(timeout=10)
    for f in (p.stdin, p.stdout, p.stderr):
        if f is not None and not f.closed:
            f.close()

if __name__ == "__main__":
    unittest.main()
