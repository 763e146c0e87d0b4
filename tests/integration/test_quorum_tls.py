"""Quorum TLS (sslQuorum=true and the ssl.quorum.* keys): ensembles of real
larchd processes whose peer links are TLS, each member's quorum port on its
own loopback address (127.0.0.1, .2, .3) with a certificate naming it.

Certificates are made by `openssl` (test_tls.Pki's helpers): one CA, a
certificate per member (serverAuth and clientAuth: each member both dials
and accepts) in the three store shapes larchd reads (PEM, PKCS12 with a
password, PKCS12 with a passwordPath), and a member certificate from a CA
nobody trusts. kazoo writes through one member and reads from the others;
the leader is stopped by PID and the other two go on; a member with an
untrusted certificate, or without sslQuorum, cannot join and the others
say why in their logs.

Every process is started and stopped by PID (harness.Ensemble), every wait
is bounded. Only larchd.
"""

import os
import shutil
import signal
import tempfile
import unittest

from harness import Ensemble, sut_kind, wait_until
from test_ensemble import client, stop_client
from test_tls import Pki

QUORUM_HOSTS = {1: "127.0.0.1", 2: "127.0.0.2", 3: "127.0.0.3"}
LOG_WAIT_S = 15.0


class QuorumPki(Pki):
    """Pki plus the quorum's: member<i>.pem (chain and key), member2.p12
    (password "p12pass"), member3.p12 (password in member3.pass) and
    rogue3.pem, member 3's address under a CA nobody trusts."""

    def _make(self):
        self._ca("ca", "/CN=Larch Test CA")
        self._ca("other-ca", "/CN=Nobody's CA")
        for sid, host in QUORUM_HOSTS.items():
            name = "member%d" % sid
            self._leaf(name, "/CN=larch member %d" % sid, "serverAuth,clientAuth",
                       "IP:%s" % host)
            self._cat(name + ".pem", name + ".crt", "ca.pem", name + ".key")
        self._openssl("pkcs12", "-export", "-in", "member2.crt", "-inkey", "member2.key",
                      "-certfile", "ca.pem", "-out", "member2.p12", "-passout", "pass:p12pass")
        with open(self.path("member3.pass"), "w") as f:
            f.write("three\n")
        self._openssl("pkcs12", "-export", "-in", "member3.crt", "-inkey", "member3.key",
                      "-certfile", "ca.pem", "-out", "member3.p12", "-passout", "pass:three")
        self._leaf("rogue3", "/CN=larch member 3", "serverAuth,clientAuth", "IP:127.0.0.3",
                   ca="other-ca")
        self._cat("rogue3.pem", "rogue3.crt", "rogue3.key")


def stores(pki, sid, rogue=False):
    """Member sid's ssl.quorum.* lines: a key store in each shape larchd
    reads, written with and without the zookeeper. prefix."""
    if rogue:
        key = ["ssl.quorum.keyStore.location=%s" % pki.path("rogue3.pem")]
    elif sid == 1:
        key = ["ssl.quorum.keyStore.location=%s" % pki.path("member1.pem")]
    elif sid == 2:
        key = ["zookeeper.ssl.quorum.keyStore.location=%s" % pki.path("member2.p12"),
               "zookeeper.ssl.quorum.keyStore.password=p12pass"]
    else:
        key = ["ssl.quorum.keyStore.location=%s" % pki.path("member3.p12"),
               "ssl.quorum.keyStore.type=PKCS12",
               "ssl.quorum.keyStore.passwordPath=%s" % pki.path("member3.pass")]
    return ["sslQuorum=true", "ssl.quorum.trustStore.location=%s" % pki.path("ca.pem"),
            "ssl.quorum.hostnameVerification=true", "ssl.quorum.clientAuth=need"] + key


def log_of(ens, sid):
    return ens.stderr_tail(sid, lines=100000)


@unittest.skipUnless(sut_kind() == "larch", "larchd's quorum links")
class QuorumTlsTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.pki = QuorumPki()

    @classmethod
    def tearDownClass(cls):
        cls.pki.remove()

    def tearDown(self):
        ens = getattr(self, "ens", None)
        if ens is not None:
            ens.stop()
            self.assertEqual(ens.sanitizer_report(), [])

    def start(self, member_lines):
        self.ens = Ensemble(n=3, quorum_hosts=QUORUM_HOSTS, member_lines=member_lines)
        self.ens.start()
        return self.ens

    def wait_logged(self, sid, *words):
        ens = self.ens
        found = wait_until(lambda: any(all(w in l for w in words)
                                       for l in log_of(ens, sid).splitlines()), LOG_WAIT_S)
        self.assertTrue(found, "server %d never logged %s:\n%s" % (sid, words,
                                                                   ens.stderr_tail(sid)))

    def test_ensemble_serves_and_fails_over_over_tls(self):
        ens = self.start(lambda sid: stores(self.pki, sid))
        leader = ens.wait_leader()
        # every link is a TLS session: each member logged its links up as TLS
        for sid in ens.ids:
            for other in ens.ids:
                if other != sid:
                    self.wait_logged(sid, "server %d (" % other, "link up (", "TLSv1.3)")
                    self.assertEqual(ens.mntr(sid).get("zk_larch_peer_%d_tls" % other), 1)
        c = client(ens.hosts([1]))
        try:
            c.ensure_path("/qtls")
            for i in range(10):
                c.create("/qtls/n%02d" % i, b"v%d" % i)
        finally:
            stop_client(c)
        for sid in (2, 3):
            c = client(ens.hosts([sid]))
            try:
                c.sync("/qtls")
                self.assertEqual(len(c.get_children("/qtls")), 10)
                self.assertEqual(c.get("/qtls/n07")[0], b"v7")
            finally:
                stop_client(c)
        ens.kill(leader, signal.SIGTERM)  # by PID: Ensemble holds the Popen
        others = [i for i in ens.ids if i != leader]
        self.assertIn(ens.wait_leader(among=others), others)
        c = client(ens.hosts([others[0]]))
        try:
            c.create("/qtls/after", b"x")
        finally:
            stop_client(c)
        c = client(ens.hosts([others[1]]))
        try:
            c.sync("/qtls")
            self.assertEqual(c.get("/qtls/after")[0], b"x")
            self.assertEqual(len(c.get_children("/qtls")), 11)
        finally:
            stop_client(c)

    def check_outsider(self, outsider_lines, acceptor_words, outsider_words):
        """Members 1 and 2 run with good certificates; member 3 with
        outsider_lines cannot join: 1 and 2 elect and serve, each logs
        acceptor_words about a connection it closed, member 3
        outsider_words about its dial of the leader."""
        ens = self.start(lambda sid: outsider_lines if sid == 3 else stores(self.pki, sid))
        leader = ens.wait_leader(among=[1, 2])
        c = client(ens.hosts([1]))
        try:
            c.create("/two", b"ok")
        finally:
            stop_client(c)
        c = client(ens.hosts([2]))
        try:
            c.sync("/two")
            self.assertEqual(c.get("/two")[0], b"ok")
        finally:
            stop_client(c)
        for sid in (1, 2):
            self.wait_logged(sid, "connection closed", *acceptor_words)
            self.assertNotIn("server 3 (127.0.0.3", "\n".join(
                l for l in log_of(ens, sid).splitlines() if "link up" in l))
        self.wait_logged(3, "server %d (" % leader, *outsider_words)
        self.assertNotIn(ens.state(3), ("leader", "follower"))

    def test_member_with_untrusted_certificate_cannot_join(self):
        # it dials from its own address (bound for TLS), which the log names
        self.check_outsider(stores(self.pki, 3, rogue=True),
                            ("127.0.0.3:", "TLS handshake failed: certificate verify failed"),
                            ("cannot connect: TLS",))

    def test_member_without_ssl_quorum_cannot_join(self):
        self.check_outsider(["sslQuorum=false"], ("TLS handshake failed:",),
                            ("cannot connect:",))


if __name__ == "__main__":
    unittest.main()
