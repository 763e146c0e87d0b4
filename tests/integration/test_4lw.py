"""Four-letter words: each answers with ZooKeeper's shape."""

import re
import unittest

from harness import ServerTestCase, four_letter, larch_ensemble_size, unique_path

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


if __name__ == "__main__":
    unittest.main()
