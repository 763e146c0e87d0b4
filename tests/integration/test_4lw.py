"""Four-letter words: each answers with ZooKeeper's shape."""

import os
import re
import shutil
import socket
import struct
import tempfile
import unittest

from harness import (HOST, OK, Server, ServerTestCase, connect_raw, four_letter,
                     larch_ensemble_size, sut_kind, unique_path)

# A single server says standalone; a member of an ensemble (LARCH_ENSEMBLE)
# says what it is in it.
MODES = "(leader|follower)" if larch_ensemble_size() else "standalone"


class FourLetterWordTest(ServerTestCase, unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        from harness import connect_raw
        # one client with a data watch and an ephemeral, so wchs/wchc/wchp/dump
        # and cons have something to show
        cls.client = connect_raw(cls.server.port)
        cls.path = unique_path("fourlw")
        cls.client.create(cls.path, b"x")
        cls.client.create(cls.path + "-eph", flags=1)
        cls.client.get_data(cls.path, watch=True)
        cls.sid_hex = "0x%x" % cls.client.session.session_id

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        super().tearDownClass()

    def word(self, w):
        out = four_letter(self.server.port, w).decode("utf-8", "replace")
        self.assertTrue(out, "%s: empty answer" % w)
        return out

    def test_ruok(self):
        self.assertEqual(self.word("ruok"), "imok")

    def test_isro(self):
        self.assertEqual(self.word("isro"), "rw")

    def test_srvr(self):
        out = self.word("srvr")
        self.assertRegex(out, r"^Zookeeper version: \S+")
        for key in ("Latency min/avg/max", "Received", "Sent", "Connections",
                    "Outstanding", "Zxid", "Mode", "Node count"):
            self.assertRegex(out, r"(?m)^%s: \S+" % re.escape(key))
        self.assertRegex(out, r"(?m)^Mode: %s$" % MODES)
        self.assertRegex(out, r"(?m)^Zxid: 0x[0-9a-f]+$")
        count = int(re.search(r"(?m)^Node count: (\d+)$", out).group(1))
        self.assertGreaterEqual(count, 4, "/, /zookeeper, ... and the test nodes")

    def test_stat(self):
        out = self.word("stat")
        self.assertRegex(out, r"^Zookeeper version: ")
        self.assertRegex(out, r"(?m)^Clients:$")
        self.assertRegex(out, r"(?m)^ /127\.0\.0\.1:\d+\[\d+\]\(queued=\d+,recved=\d+,sent=\d+")
        self.assertRegex(out, r"(?m)^Mode: %s$" % MODES)
        self.assertRegex(out, r"(?m)^Node count: \d+$")

    def test_mntr(self):
        out = self.word("mntr")
        lines = [l for l in out.split("\n") if l]
        for line in lines:
            self.assertRegex(line, r"^zk_[^\t ]+\t[^\t]*$", "mntr lines are key<TAB>value")
        kv = dict(l.split("\t", 1) for l in lines)
        for key in ("zk_version", "zk_server_state", "zk_znode_count", "zk_watch_count",
                    "zk_ephemerals_count", "zk_num_alive_connections",
                    "zk_outstanding_requests", "zk_avg_latency", "zk_packets_received",
                    "zk_packets_sent", "zk_approximate_data_size"):
            self.assertIn(key, kv)
        self.assertRegex(kv["zk_server_state"], "^%s$" % MODES)
        self.assertGreaterEqual(int(kv["zk_znode_count"]), 4)
        self.assertGreaterEqual(int(kv["zk_ephemerals_count"]), 1)
        self.assertGreaterEqual(int(kv["zk_watch_count"]), 1)

    def test_conf(self):
        out = self.word("conf")
        self.assertRegex(out, r"(?m)^clientPort=%d$" % self.server.port)
        self.assertRegex(out, r"(?m)^tickTime=2000$")
        self.assertRegex(out, r"(?m)^maxClientCnxns=\d+$")
        self.assertRegex(out, r"(?m)^minSessionTimeout=4000$")
        self.assertRegex(out, r"(?m)^maxSessionTimeout=40000$")
        self.assertRegex(out, r"(?m)^dataDir=\S+")

    def test_cons(self):
        out = self.word("cons")
        self.assertRegex(out, r"(?m)^ /127\.0\.0\.1:\d+\[\d+\]\(")
        self.assertIn("sid=%s" % self.sid_hex, out)

    def test_envi(self):
        out = self.word("envi")
        self.assertTrue(out.startswith("Environment:\n"))
        self.assertRegex(out, r"(?m)^zookeeper\.version=\S+")
        self.assertRegex(out, r"(?m)^host\.name=")
        self.assertRegex(out, r"(?m)^os\.name=Linux$")

    def test_wchs(self):
        out = self.word("wchs")
        m = re.match(r"^(\d+) connections watching (\d+) paths\nTotal watches:(\d+)\n", out)
        self.assertIsNotNone(m, out)
        self.assertGreaterEqual(int(m.group(1)), 1)
        self.assertGreaterEqual(int(m.group(3)), 1)

    def test_wchc(self):
        out = self.word("wchc")
        self.assertRegex(out, r"(?m)^%s\n(\t/\S*\n)*\t%s\n" % (
            re.escape(self.sid_hex), re.escape(self.path)))

    def test_wchp(self):
        out = self.word("wchp")
        self.assertRegex(out, r"(?m)^%s\n(\t0x[0-9a-f]+\n)*\t%s\n" % (
            re.escape(self.path), re.escape(self.sid_hex)))

    def test_dump(self):
        out = self.word("dump")
        self.assertRegex(out, r"(?m)^Sessions with Ephemerals \(\d+\):$")
        self.assertRegex(out, r"(?m)^%s:\n(\t/\S*\n)*\t%s-eph$" % (
            re.escape(self.sid_hex), re.escape(self.path)))


def ask(port, request, half_close=True, timeout_s=5.0):
    """Sends request (bytes), ends the output when half_close, and returns
    everything the server answers up to its close (bounded by timeout_s)."""
    with socket.create_connection((HOST, port), timeout=timeout_s) as s:
        s.sendall(request)
        if half_close:
            s.shutdown(socket.SHUT_WR)
        chunks = []
        for _ in range(10000):  # bounded: each recv waits at most timeout_s
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)


def cons_line(port, sid):
    """cons's line for session sid (an int), as a dict of its fields."""
    out = four_letter(port, "cons").decode()
    for line in out.splitlines():
        m = re.match(r"^ /[^(]+\((.*)\)$", line)
        if m and ("sid=0x%x," % sid) in line:
            return dict(f.split("=", 1) for f in m.group(1).split(","))
    raise AssertionError("no cons line for 0x%x in:\n%s" % (sid, out))


def srvr_fields(port):
    out = four_letter(port, "srvr").decode()
    return dict(l.split(": ", 1) for l in out.splitlines()[1:] if ": " in l)


class StatsResetTest(ServerTestCase, unittest.TestCase):
    """crst resets each connection's counters (cons) and not the server's
    (srvr); srst the server's and not the connections', as ZooKeeper's
    CnxnStatResetCommand and StatResetCommand do. A raw client sends no
    pings, so its counters move only with the requests the test sends."""

    def client_with_requests(self, n):
        c = self.raw()
        for _ in range(n):
            self.assertEqual(c.exists("/").err, OK)
        return c

    def test_crst_resets_connections_not_server(self):
        c = self.client_with_requests(3)
        sid = c.session.session_id
        before = cons_line(self.server.port, sid)
        self.assertGreaterEqual(int(before["recved"]), 4)  # connect + 3
        received = int(srvr_fields(self.server.port)["Received"])
        self.assertGreaterEqual(received, 3)
        self.assertEqual(four_letter(self.server.port, "crst"), b"Connection stats reset.\n")
        after = cons_line(self.server.port, sid)
        for key, want in (("recved", "0"), ("sent", "0"), ("lop", "NA"),
                          ("lzxid", "0xffffffffffffffff"), ("llat", "0"), ("minlat", "0"),
                          ("avglat", "0"), ("maxlat", "0")):
            self.assertEqual(after[key], want, key)
        self.assertGreaterEqual(int(srvr_fields(self.server.port)["Received"]), received)
        self.assertEqual(c.exists("/").err, OK)
        again = cons_line(self.server.port, sid)
        self.assertEqual((again["recved"], again["sent"]), ("1", "1"))

    def test_srst_resets_server_not_connections(self):
        c = self.client_with_requests(3)
        sid = c.session.session_id
        recved = cons_line(self.server.port, sid)["recved"]
        self.assertGreaterEqual(int(srvr_fields(self.server.port)["Received"]), 3)
        self.assertEqual(four_letter(self.server.port, "srst"), b"Server stats reset.\n")
        fields = srvr_fields(self.server.port)
        # ZooKeeper counts the srvr request itself; larchd counts no 4lw
        self.assertLessEqual(int(fields["Received"]), 1)
        self.assertLessEqual(int(fields["Sent"]), 1)
        self.assertEqual(fields["Latency min/avg/max"], "0/0.0/0")
        self.assertEqual(cons_line(self.server.port, sid)["recved"], recved)


class TraceMaskTest(ServerTestCase, unittest.TestCase):
    """gtmk and stmk: ZooKeeper's text trace mask, printed as a decimal long
    without a newline; stmk's argument is an 8-byte big-endian long in the
    same request."""

    DEFAULT = b"306"  # ZooTrace's default, as stock 3.8.0 answers gtmk

    def stmk(self, mask):
        return ask(self.server.port, b"stmk" + struct.pack(">q", mask))

    def test_gtmk_default(self):
        self.assertEqual(four_letter(self.server.port, "gtmk"), self.DEFAULT)

    def test_stmk_sets_and_gtmk_reads_back(self):
        self.addCleanup(self.stmk, int(self.DEFAULT))
        for mask in (4095, -1, 0, 1 << 40):
            self.assertEqual(self.stmk(mask), str(mask).encode())
            self.assertEqual(four_letter(self.server.port, "gtmk"), str(mask).encode())

    def test_stmk_without_its_argument_is_not_run(self):
        """A stmk cut short gets no answer and sets nothing, and the server
        goes on answering others, also while such a connection stays open."""
        for request in (b"stmk", b"stmk\x00\x00\x00\x00\x00\x00\x0f"):
            self.assertEqual(ask(self.server.port, request), b"")
            self.assertEqual(four_letter(self.server.port, "gtmk"), self.DEFAULT)
        with socket.create_connection((HOST, self.server.port), timeout=5.0) as held:
            held.sendall(b"stmk\x00\x00")
            self.assertEqual(four_letter(self.server.port, "ruok"), b"imok")
            self.assertEqual(four_letter(self.server.port, "gtmk"), self.DEFAULT)
        self.assertEqual(four_letter(self.server.port, "ruok"), b"imok")


DIGEST_LOG_INTERVAL = 128  # ZooKeeper's DataTree.DIGEST_LOG_INTERVAL


class DigestLogTest(ServerTestCase, unittest.TestCase):
    """hash: "<zxid hex>: <digest>" for each txn whose zxid is a multiple of
    128 (ZooKeeper's digest log). The digests are each server's own."""

    def hash_lines(self):
        out = four_letter(self.server.port, "hash").decode()
        self.assertTrue(out == "" or out.endswith("\n"), repr(out))
        lines = []
        for line in out.splitlines():
            m = re.match(r"^([0-9a-f]+): (-?[0-9]+)$", line)
            self.assertIsNotNone(m, repr(line))
            zxid, digest = int(m.group(1), 16), int(m.group(2))
            self.assertEqual(zxid % DIGEST_LOG_INTERVAL, 0, line)
            self.assertTrue(-(1 << 63) <= digest < (1 << 63), line)  # a Java long
            lines.append((zxid, digest))
        self.assertEqual(lines, sorted(lines), "oldest first")
        return lines

    def test_hash_logs_every_128th_zxid_and_changes_with_writes(self):
        c = self.raw()
        base = unique_path("hash")
        self.assertEqual(c.create(base).err, OK)
        zxid = int(srvr_fields(self.server.port)["Zxid"], 16)
        logged = [z for z, _ in self.hash_lines()]
        self.assertTrue(all(z <= zxid for z in logged))
        # up to two multiples of 128 past now, one create (one txn) each
        first = (zxid // DIGEST_LOG_INTERVAL + 1) * DIGEST_LOG_INTERVAL
        second = first + DIGEST_LOG_INTERVAL
        for i in range(second - zxid):
            self.assertEqual(c.create("%s/n%d" % (base, i)).err, OK)
        self.assertEqual(int(srvr_fields(self.server.port)["Zxid"], 16), second)
        lines = dict(self.hash_lines())
        self.assertIn(first, lines)
        self.assertIn(second, lines)
        self.assertNotEqual(lines[first], lines[second], "writes between them change the digest")


def files_bytes(directory):
    """Bytes of the regular files in directory (0 when it does not exist)."""
    if not os.path.isdir(directory):
        return 0
    return sum(os.path.getsize(os.path.join(directory, f)) for f in os.listdir(directory)
               if os.path.isfile(os.path.join(directory, f)))


@unittest.skipIf(larch_ensemble_size(), "the members' data dirs are the ensemble's")
class DirsTest(unittest.TestCase):
    """dirs sums the files of the txn log directory (datadir_size, as
    ZooKeeper names it) and of the snapshot directory (logdir_size), here
    apart (dataLogDir), with a small preallocation so that writes show."""

    IN_MEMORY = sut_kind() == "larch" and os.environ.get("LARCHD_IN_MEMORY") == "1"

    @classmethod
    def setUpClass(cls):
        cls.log_root = tempfile.mkdtemp(prefix="larch-it-datalog-")
        lines = [] if cls.IN_MEMORY else ["dataLogDir=%s" % cls.log_root, "preAllocSize=4"]
        try:
            cls.server = Server(cfg_lines=lines).start()
        except BaseException:
            shutil.rmtree(cls.log_root, ignore_errors=True)
            raise

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        shutil.rmtree(cls.log_root, ignore_errors=True)

    def on_disk(self):
        sub = "larch" if self.server.kind == "larch" else "version-2"
        return (files_bytes(os.path.join(self.log_root, sub)),
                files_bytes(os.path.join(self.server.tmpdir, "data", sub)))

    def dirs(self):
        out = four_letter(self.server.port, "dirs").decode()
        m = re.match(r"^datadir_size: (\d+)\nlogdir_size: (\d+)\n$", out)
        self.assertIsNotNone(m, repr(out))
        return int(m.group(1)), int(m.group(2))

    def test_dirs_matches_the_files_and_grows_with_writes(self):
        if self.IN_MEMORY:
            self.assertEqual(self.dirs(), (0, 0))
            return
        before = self.dirs()
        self.assertEqual(before, self.on_disk())
        self.assertGreater(before[0], 0, "the txn log")
        c = connect_raw(self.server.port)
        self.addCleanup(c.close)
        base = unique_path("dirs")
        self.assertEqual(c.create(base).err, OK)
        for i in range(20):
            self.assertEqual(c.create("%s/n%d" % (base, i), b"x" * 1000).err, OK)
        after = self.dirs()
        self.assertEqual(after, self.on_disk())
        self.assertGreater(after[0], before[0] + 20 * 1000, "20 KB of txns past 4 KB chunks")


if __name__ == "__main__":
    unittest.main()
