"""Sessions, ephemerals, reconnects, digest auth and ACL enforcement."""

import threading
import time
import unittest

from harness import (EAUTHFAILED, ENOAUTH, ENONODE, EPHEMERAL, ESESSIONCLOSEDREQUIRESASL,
                     OK, OPEN_ACL, PERM_ALL, PERM_CREATE, PERM_READ, SUPER_AUTH, TICK_TIME_MS,
                     ConnectionClosed, RawClient, ServerTestCase, larchd_path, sut_kind,
                     unique_path, wait_until)

MIN_SESSION_TIMEOUT_MS = 2 * TICK_TIME_MS   # ZooKeeper defaults
MAX_SESSION_TIMEOUT_MS = 20 * TICK_TIME_MS
# A session with the minimum timeout must be gone within this bound.
EXPIRY_BOUND_S = 3 * MIN_SESSION_TIMEOUT_MS / 1000.0 + 2.0


class SessionTest(ServerTestCase, unittest.TestCase):

    def test_session_ids_unique_and_password_16_bytes(self):
        clients = [self.raw() for _ in range(5)]
        ids = [c.session.session_id for c in clients]
        self.assertEqual(len(set(ids)), 5)
        self.assertNotIn(0, ids)
        for c in clients:
            self.assertEqual(len(c.session.passwd), 16)
            self.assertEqual(c.session.protocol_version, 0)

    def test_timeout_negotiation(self):
        for asked, expected in ((1000, MIN_SESSION_TIMEOUT_MS), (10000, 10000),
                                (100000, MAX_SESSION_TIMEOUT_MS)):
            with RawClient(self.server.port) as c:
                got = c.connect(timeout_ms=asked).timeout_ms
                c.close_session()
            self.assertEqual(got, expected, "asked %d ms" % asked)

    def test_ephemeral_removed_on_close(self):
        owner, observer = self.kazoo(), self.kazoo()
        p = unique_path("ephclose")
        owner.create(p, b"", ephemeral=True)
        self.assertEqual(observer.exists(p).ephemeralOwner, owner.client_id[0])
        deleted = threading.Event()

        def watch(event):
            if event.type == "DELETED":
                deleted.set()
        observer.exists(p, watch=watch)
        owner.stop()
        self.assertTrue(deleted.wait(10.0), "observer sees NodeDeleted")
        self.assertIsNone(observer.exists(p))

    def test_ephemeral_removed_on_expiry_after_disconnect(self):
        c = self.raw(timeout_ms=MIN_SESSION_TIMEOUT_MS)
        observer = self.raw()
        p = unique_path("ephexp")
        self.assertEqual(c.create(p, flags=EPHEMERAL).err, OK)
        sid, pw = c.session.session_id, c.session.passwd
        c.close()  # no closeSession: the session must expire
        t0 = time.monotonic()
        gone = wait_until(lambda: observer.exists(p).err == ENONODE, EXPIRY_BOUND_S, 0.2)
        self.assertTrue(gone, "ephemeral still there %.1f s after disconnect" % (time.monotonic() - t0))
        with RawClient(self.server.port) as again:
            s = again.connect(session_id=sid, passwd=pw)
            self.assertEqual(s.timeout_ms, 0, "an expired session is refused")
            self.assertTrue(again.wait_closed(5.0))

    def test_session_expires_without_pings_while_connected(self):
        c = self.raw(timeout_ms=MIN_SESSION_TIMEOUT_MS)
        observer = self.raw()
        p = unique_path("ephidle")
        c.create(p, flags=EPHEMERAL)
        self.assertTrue(c.wait_closed(EXPIRY_BOUND_S),
                        "an idle session's connection is closed on expiry")
        self.assertEqual(observer.exists(p).err, ENONODE)

    def test_pings_keep_session_alive(self):
        c = self.raw(timeout_ms=MIN_SESSION_TIMEOUT_MS)
        p = unique_path("ephping")
        c.create(p, flags=EPHEMERAL)
        deadline = time.monotonic() + 1.5 * MIN_SESSION_TIMEOUT_MS / 1000.0
        while time.monotonic() < deadline:
            self.assertEqual(c.ping().err, OK)
            time.sleep(MIN_SESSION_TIMEOUT_MS / 4000.0)
        self.assertEqual(c.exists(p).err, OK)

    def test_reconnect_same_session_from_second_connection(self):
        a = self.raw()
        p = unique_path("move")
        a.create(p, flags=EPHEMERAL)
        b = RawClient(self.server.port)
        self.addCleanup(b.close)
        s = b.connect(session_id=a.session.session_id, passwd=a.session.passwd,
                      last_zxid=a.last_zxid)
        self.assertEqual((s.session_id, s.passwd), (a.session.session_id, a.session.passwd))
        self.assertGreater(s.timeout_ms, 0)
        self.assertTrue(a.wait_closed(5.0), "the old connection is closed")
        st = b.exists(p)
        self.assertEqual(st.err, OK, "ephemerals survive the move")
        self.assertEqual(st.value.ephemeralOwner, s.session_id)
        self.assertEqual(b.delete(p).err, OK)

    def test_reconnect_with_wrong_password_is_refused(self):
        a = self.raw()
        p = unique_path("badpw")
        a.create(p, flags=EPHEMERAL)
        sid, pw = a.session.session_id, a.session.passwd
        a.close()
        bad = bytes(x ^ 0xFF for x in pw)
        with RawClient(self.server.port) as b:
            s = b.connect(session_id=sid, passwd=bad)
            self.assertEqual((s.timeout_ms, s.session_id), (0, 0))
            self.assertTrue(b.wait_closed(5.0))
        with RawClient(self.server.port) as c:
            s = c.connect(session_id=sid, passwd=pw)
            self.assertEqual(s.session_id, sid, "the right password still works")
            self.assertEqual(c.exists(p).err, OK)
            c.close_session()

    def test_unknown_session_is_refused(self):
        with RawClient(self.server.port) as c:
            s = c.connect(session_id=0x0123456789AB, passwd=b"\x07" * 16)
            self.assertEqual(s.timeout_ms, 0)
            self.assertTrue(c.wait_closed(5.0))


class AuthAclTest(ServerTestCase, unittest.TestCase):

    def test_digest_auth_guards_node(self):
        from kazoo.exceptions import NoAuthError
        from kazoo.security import make_digest_acl
        owner = self.kazoo(auth_data=[("digest", "alice:secret")])
        p = unique_path("digest")
        owner.create(p, b"private", acl=[make_digest_acl("alice", "secret", all=True)])
        self.assertEqual(owner.get(p)[0], b"private")
        stranger = self.kazoo()
        with self.assertRaises(NoAuthError):
            stranger.get(p)
        with self.assertRaises(NoAuthError):
            stranger.set(p, b"x")
        with self.assertRaises(NoAuthError):
            stranger.create(p + "/kid")
        wrong = self.kazoo(auth_data=[("digest", "alice:wrong")])
        with self.assertRaises(NoAuthError):
            wrong.get(p)
        stranger.add_auth("digest", "alice:secret")
        self.assertEqual(stranger.get(p)[0], b"private")
        acl, _ = owner.get_acls(p)
        self.assertEqual([(a.perms, a.id.scheme, a.id.id.split(":")[0]) for a in acl],
                         [(PERM_ALL, "digest", "alice")])

    def test_super_digest_bypasses_acls(self):
        c = self.raw()
        p = unique_path("super")
        self.assertEqual(c.auth("digest", b"bob:pw").err, OK)
        self.assertEqual(c.create(p, b"s", acl=[(PERM_ALL, "auth", "")]).err, OK)
        other = self.raw()
        self.assertEqual(other.get_data(p).err, ENOAUTH)
        self.assertEqual(other.auth("digest", SUPER_AUTH).err, OK)
        self.assertEqual(other.get_data(p).value[0], b"s")
        self.assertEqual(other.set_acl(p, OPEN_ACL).err, OK)
        self.assertEqual(self.raw().get_data(p).err, OK)

    def test_auth_scheme_acl_records_digest_of_session(self):
        c = self.raw()
        p = unique_path("authacl")
        c.auth("digest", b"carol:pw")
        c.create(p, acl=[(PERM_ALL, "auth", "")])
        acl, _ = c.get_acl(p).value
        self.assertEqual(len(acl), 1)
        perms, scheme, ident = acl[0]
        self.assertEqual((perms, scheme), (PERM_ALL, "digest"))
        # digest id is user:base64(sha1(user:password))
        self.assertRegex(ident, r"^carol:[A-Za-z0-9+/]{27}=$")

    def test_ip_acl(self):
        c = self.raw()
        p, q = unique_path("ipok"), unique_path("ipno")
        self.assertEqual(c.create(p, b"1", acl=[(PERM_ALL, "ip", "127.0.0.1")]).err, OK)
        self.assertEqual(c.create(q, b"2", acl=[(PERM_ALL, "ip", "10.1.2.3")]).err, OK)
        self.assertEqual(c.get_data(p).value[0], b"1")
        self.assertEqual(c.get_data(q).err, ENOAUTH)
        self.assertEqual(c.create(p + "/net", acl=[(PERM_ALL, "ip", "127.0.0.0/8")]).err, OK)
        self.assertEqual(c.get_data(p + "/net").err, OK)

    def test_permission_bits(self):
        c = self.raw()
        p = unique_path("perms")
        c.create(p, b"d", acl=[(PERM_READ | PERM_CREATE, "world", "anyone")])
        self.assertEqual(c.get_data(p).err, OK)
        self.assertEqual(c.set_data(p, b"x").err, ENOAUTH)
        self.assertEqual(c.create(p + "/k").err, OK)
        self.assertEqual(c.delete(p + "/k").err, ENOAUTH)
        self.assertEqual(c.get_children(p).value, ["k"])
        w = unique_path("writeonly")
        c.create(w, b"secret", acl=[(2, "world", "anyone")])
        self.assertEqual(c.get_data(w).err, ENOAUTH)
        self.assertEqual(c.get_children(w).err, ENOAUTH)
        self.assertEqual(c.exists(w).err, OK, "exists needs no permission")
        self.assertEqual(c.set_data(w, b"new").err, OK)

    def test_bad_auth_scheme_closes_connection(self):
        c = self.raw()
        try:
            r = c.auth("nosuchscheme", b"x")
            self.assertEqual(r.err, EAUTHFAILED)
        except ConnectionClosed:
            pass
        self.assertTrue(c.wait_closed(5.0), "AUTHFAILED closes the connection")
        self.assertEqual(self.raw().exists("/").err, OK, "server keeps serving")


class EnforceAuthTest(ServerTestCase, unittest.TestCase):
    """zookeeper.enforce.auth (ZooKeeper's AuthenticationHelper): a session
    without a digest identity is refused at its first request."""

    server_options = {"cfg_lines": ["enforce.auth.enabled=true", "enforce.auth.schemes=digest"]}

    def test_anonymous_session_is_refused_and_closed(self):
        c = self.raw()
        self.assertEqual(c.exists("/").err, ESESSIONCLOSEDREQUIRESASL)
        self.assertTrue(c.wait_closed(5.0))

    def test_wrong_scheme_is_not_enough(self):
        c = self.raw()
        self.assertEqual(c.auth("ip", b"127.0.0.1").err, OK)
        self.assertEqual(c.get_data("/").err, ESESSIONCLOSEDREQUIRESASL)
        self.assertTrue(c.wait_closed(5.0))

    def test_digest_session_is_served(self):
        c = self.raw()
        self.assertEqual(c.auth("digest", b"dora:pw").err, OK)
        p = unique_path("enforced")
        self.assertEqual(c.create(p, b"v").err, OK)
        self.assertEqual(c.get_data(p).value[0], b"v")
        zk = self.kazoo(auth_data=[("digest", "erin:pw")])
        self.assertEqual(zk.get(p)[0], b"v")
        zk.set(p, b"w")
        self.assertEqual(c.get_data(p).value[0], b"w")


@unittest.skipUnless(sut_kind() == "larch", "larchd's own configuration errors")
class RefusedConfigTest(unittest.TestCase):
    """A security line larchd cannot honour stops it, naming the line."""

    def test_unhonoured_lines_are_errors(self):
        import os
        import subprocess
        import tempfile
        d = tempfile.mkdtemp(prefix="larch-it-refused-")
        cfg = os.path.join(d, "zoo.cfg")
        with open(cfg, "w") as f:
            f.write("tickTime=2000\nsslQuorumReloadCertFiles=true\n"
                    "authProvider.1=com.example.KerberosAuthenticationProvider\n"
                    "allowSaslFailedClients=true\nclientPortAddress=127.0.0.1\n")
        try:
            p = subprocess.run([larchd_path(), "--config", cfg, "--port", "0"],
                               capture_output=True, timeout=20, cwd=d)
        finally:
            os.unlink(cfg)
            os.rmdir(d)
        err = p.stderr.decode()
        self.assertNotEqual(p.returncode, 0, err)
        for line, key in ((2, "sslQuorumReloadCertFiles"), (3, "authProvider.1"),
                          (4, "allowSaslFailedClients")):
            self.assertIn("%s:%d: %s=" % (cfg, line, key), err)
            self.assertIn("cannot be honoured", err)

if __name__ == "__main__":
    unittest.main()
