"""SASL DIGEST-MD5 as ZooKeeper serves it: the JAAS file's users, kazoo's
SASL client (pure-sasl), the "sasl" ACL scheme, superUser, and
sessionRequireClientSASLAuth.

Expected values are ZooKeeper 3.8's, checked against the stock server
(LARCH_SUT=zookeeper, which reads the same JAAS file from the JVM property
java.security.auth.login.config) before being pointed at larchd.
"""

import os
import shutil
import subprocess
import tempfile
import unittest

from harness import (EAUTHFAILED, free_port, EINVALIDACL, ENOAUTH, ESESSIONCLOSEDREQUIRESASL,
                     EUNIMPLEMENTED, OK, OPEN_ACL, PERM_ALL, PERM_READ, ConnectionClosed,
                     ServerTestCase, larchd_path, sut_kind, unique_path, wait_until)

SASL_PROVIDER = "authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider"
JAAS = """// the users of the servers under test (test-only credentials)
Server {
    org.apache.zookeeper.server.auth.DigestLoginModule required
        user_bob="bobsecret"
        user_alice="alicesecret"
        /* superUser below */ user_admin="adminsecret"
        user_super="supersecret";
};
Client {
    org.apache.zookeeper.server.auth.DigestLoginModule required
        username="bob" password="bobsecret";
};
"""
BOB = {"mechanism": "DIGEST-MD5", "username": "bob", "password": "bobsecret"}
# kazoo's failed SASL login ends in this state; how long it may take
LOGIN_BOUND_S = 15.0


def sasl_kazoo(test, username, password, **kw):
    """A started kazoo client logged in over SASL (it fails the test if not)."""
    return test.kazoo(sasl_options={"mechanism": "DIGEST-MD5", "username": username,
                                    "password": password}, **kw)


class SaslServerCase(ServerTestCase):
    """One server per class with the JAAS file above: larchd names it in
    zoo.cfg (jaasLoginConfig), ZooKeeper's JVM in a system property."""

    cfg_lines = [SASL_PROVIDER, "superUser=admin"]
    jaas_key = "jaasLoginConfig"

    @classmethod
    def setUpClass(cls):
        cls.jaas_dir = tempfile.mkdtemp(prefix="larch-it-jaas-")
        cls.jaas_path = os.path.join(cls.jaas_dir, "jaas.conf")
        with open(cls.jaas_path, "w") as f:
            f.write(JAAS)
        if sut_kind() == "zookeeper":
            cls.server_options = {"cfg_lines": cls.cfg_lines, "jvm_props": {
                "java.security.auth.login.config": cls.jaas_path}}
        else:
            cls.server_options = {"cfg_lines": cls.cfg_lines + [
                "%s=%s" % (cls.jaas_key, cls.jaas_path)]}
        try:
            super().setUpClass()
        except BaseException:
            shutil.rmtree(cls.jaas_dir, ignore_errors=True)
            raise

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            shutil.rmtree(cls.jaas_dir, ignore_errors=True)

    def login_fails(self, username, password, err):
        """A raw SASL login that must be refused with err, then closed."""
        c = self.raw()
        self.assertEqual(c.sasl_login(username, password), err)
        self.assertTrue(c.wait_closed(5.0), "a failed login closes the connection")


class SaslTest(SaslServerCase, unittest.TestCase):

    def test_kazoo_login_reads_a_sasl_acl_node(self):
        bob = sasl_kazoo(self, "bob", "bobsecret")
        p = unique_path("sasl")
        bob.create(p, b"secret", acl=[self.acl("sasl", "bob", PERM_ALL)])
        self.assertEqual(bob.get(p)[0], b"secret")
        acl = bob.get_acls(p)[0]
        self.assertEqual([(a.perms, a.id.scheme, a.id.id) for a in acl], [(PERM_ALL, "sasl", "bob")])
        # nobody else: not anonymous clients, not another SASL user
        c = self.raw()
        self.assertEqual(c.get_data(p).err, ENOAUTH)
        alice = self.raw()
        self.assertEqual(alice.sasl_login("alice", "alicesecret"), OK)
        self.assertEqual(alice.get_data(p).err, ENOAUTH)

    def test_wrong_password_or_unknown_user_fails(self):
        from kazoo.client import KazooClient
        from kazoo.protocol.states import KeeperState
        zk = KazooClient(hosts=self.server.hosts, timeout=10.0, sasl_options={
            "mechanism": "DIGEST-MD5", "username": "bob", "password": "wrong"})
        # kazoo says CONNECTED before its SASL exchange, then AUTH_FAILED
        # and CLOSED: record the states its connection reports
        states, report = [], zk._session_callback
        zk._session_callback = lambda state: (states.append(state), report(state))[1]
        try:
            try:
                zk.start(timeout=LOGIN_BOUND_S)
            except Exception:
                pass  # whether start() raises depends on that race
            self.assertTrue(wait_until(lambda: KeeperState.AUTH_FAILED in states,
                                       LOGIN_BOUND_S), "states %s" % states)
            self.assertFalse(zk.connected)
        finally:
            zk.stop()
            zk.close()
        self.login_fails("bob", "wrong", EAUTHFAILED)
        if sut_kind() != "zookeeper":
            # Debian's ZooKeeper 3.8.0 lets an unknown user in with the
            # password of the last user it looked up (its callback handler
            # kept that name: ZOOKEEPER-4839, fixed in later releases)
            self.login_fails("mallory", "bobsecret", EAUTHFAILED)
        self.assertEqual(self.raw().exists("/").err, OK, "the server keeps serving")

    def test_replies_as_zookeeper_sends_them(self):
        c = self.raw()
        rep = c.sasl(b"", xid=41)
        self.assertEqual((rep.xid, rep.zxid, rep.err), (41, 0, OK))
        challenge = rep.body.buffer()
        self.assertIn(b'realm="zk-sasl-md5"', challenge)
        self.assertIn(b"nonce=", challenge)
        # qop auth only: larchd says qop="auth", ZooKeeper leaves the default
        self.assertNotIn(b"auth-int", challenge)
        self.assertNotIn(b"auth-conf", challenge)
        rep = c.sasl(b'username="bob",realm="zk-sasl-md5",nonce="x",cnonce="y",nc=00000001,'
                     b'qop=auth,digest-uri="zookeeper/zk-sasl-md5",response=0', xid=42)
        self.assertEqual((rep.xid, rep.zxid, rep.err), (42, 0, EAUTHFAILED))
        self.assertIsNone(rep.body.buffer(), "a refusal carries a null token")
        self.assertTrue(c.wait_closed(5.0))

    def test_whoami_shows_the_sasl_identity(self):
        c = self.raw()
        self.assertEqual(c.sasl_login("bob", "bobsecret"), OK)
        ids = c.whoami().value
        self.assertIn(("sasl", "bob"), ids)
        self.assertIn(("ip", "127.0.0.1"), ids)

    def test_auth_acl_stands_for_the_sasl_identity(self):
        c = self.raw()
        self.assertEqual(c.sasl_login("bob", "bobsecret"), OK)
        p = unique_path("saslauth")
        self.assertEqual(c.create(p, b"v", acl=[(PERM_ALL, "auth", "")]).err, OK)
        self.assertEqual(c.get_acl(p).value[0], [(PERM_ALL, "sasl", "bob")])
        self.assertEqual(c.get_data(p).err, OK)
        self.assertEqual(self.raw().get_data(p).err, ENOAUTH)

    def test_sasl_acl_ids_must_be_kerberos_names(self):
        c = self.raw()
        root = unique_path("saslid")
        for ident in ("bob", "svc/host@EXAMPLE.COM", "bob@EXAMPLE.COM"):
            self.assertEqual(c.create(root + "-" + ident.replace("/", "_"), b"",
                                      acl=[(PERM_READ, "sasl", ident)]).err, OK, ident)
        for ident in ("a@b@c", "a/b/c@R", "bob@R/x"):
            self.assertEqual(c.create(root + "-bad", b"", acl=[(PERM_READ, "sasl", ident)]).err,
                             EINVALIDACL, ident)

    def test_super_users(self):
        owner = self.raw()
        self.assertEqual(owner.auth("digest", b"dora:pw").err, OK)
        digest_node, sasl_node = unique_path("digestonly"), unique_path("saslonly")
        self.assertEqual(owner.create(digest_node, b"d", acl=[(PERM_ALL, "auth", "")]).err, OK)
        self.assertEqual(owner.create(sasl_node, b"s", acl=[(PERM_ALL, "sasl", "bob")]).err, OK)
        # superUser=admin: every ACL passes
        admin = self.raw()
        self.assertEqual(admin.sasl_login("admin", "adminsecret"), OK)
        self.assertEqual(admin.get_data(digest_node).err, OK)
        self.assertEqual(admin.get_data(sasl_node).err, OK)
        # the SASL user named super matches every sasl ACL, and no other
        sup = self.raw()
        self.assertEqual(sup.sasl_login("super", "supersecret"), OK)
        self.assertEqual(sup.get_data(sasl_node).err, OK)
        self.assertEqual(sup.get_data(digest_node).err, ENOAUTH)

    def test_a_second_login_is_refused(self):
        c = self.raw()
        self.assertEqual(c.sasl_login("bob", "bobsecret"), OK)
        try:
            rep = c.sasl(b"")
            self.assertNotEqual(rep.err, OK)
        except ConnectionClosed:
            pass  # ZooKeeper closes without a reply
        self.assertTrue(c.wait_closed(5.0))

    @staticmethod
    def acl(scheme, ident, perms):
        from kazoo.security import make_acl
        return make_acl(scheme, ident, all=perms == PERM_ALL, read=bool(perms & PERM_READ))


class SaslRequiredTest(SaslServerCase, unittest.TestCase):
    """sessionRequireClientSASLAuth=true: enforce.auth with sasl alone."""

    cfg_lines = [SASL_PROVIDER, "sessionRequireClientSASLAuth=true"]

    def test_anonymous_session_is_refused(self):
        c = self.raw()
        self.assertEqual(c.exists("/").err, ESESSIONCLOSEDREQUIRESASL)
        self.assertTrue(c.wait_closed(5.0))

    def test_digest_is_not_enough(self):
        c = self.raw()
        self.assertEqual(c.auth("digest", b"dora:pw").err, OK)
        self.assertEqual(c.get_data("/").err, ESESSIONCLOSEDREQUIRESASL)
        self.assertTrue(c.wait_closed(5.0))

    def test_sasl_client_is_served(self):
        bob = sasl_kazoo(self, "bob", "bobsecret")
        p = unique_path("required")
        bob.create(p, b"v")
        self.assertEqual(bob.get(p)[0], b"v")
        c = self.raw()
        self.assertEqual(c.sasl_login("alice", "alicesecret"), OK)
        self.assertEqual(c.get_data(p).value[0], b"v")

    def test_failed_login_says_sasl_is_required(self):
        self.login_fails("bob", "wrong", ESESSIONCLOSEDREQUIRESASL)


class SaslWithoutProviderTest(SaslServerCase, unittest.TestCase):
    """A JAAS file without authProvider.N=SASLAuthenticationProvider: logins
    work, and, as in ZooKeeper, "sasl" has no ACL provider."""

    cfg_lines = []
    jaas_key = "java.security.auth.login.config"  # larchd's other spelling

    def test_login_without_sasl_acls(self):
        c = self.raw()
        self.assertEqual(c.sasl_login("bob", "bobsecret"), OK)
        # whoAmI names a user only through the scheme's provider
        self.assertIn(("sasl", ""), c.whoami().value)
        p = unique_path("noprovider")
        self.assertEqual(c.create(p, b"", acl=[(PERM_ALL, "sasl", "bob")]).err, EINVALIDACL)
        self.assertEqual(c.create(p, b"", acl=[(PERM_ALL, "auth", "")]).err, EINVALIDACL)
        self.assertEqual(c.create(p, b"", acl=OPEN_ACL).err, OK)


@unittest.skipUnless(sut_kind() == "larch", "larchd's own configuration errors")
class SaslConfigTest(unittest.TestCase):
    """A SASL setting larchd cannot serve stops it, naming the file and line."""

    def run_larchd(self, cfg_text, jaas_text=None):
        d = tempfile.mkdtemp(prefix="larch-it-saslcfg-")
        self.addCleanup(shutil.rmtree, d, True)
        if jaas_text is not None:
            with open(os.path.join(d, "jaas.conf"), "w") as f:
                f.write(jaas_text)
        cfg = os.path.join(d, "zoo.cfg")
        with open(cfg, "w") as f:
            f.write(cfg_text.replace("JAAS", os.path.join(d, "jaas.conf")))
        # bounded by the timeout; a larchd that started would be killed there
        p = subprocess.run([larchd_path(), "--config", cfg, "--port", str(free_port()),
                            "--bind", "127.0.0.1"], capture_output=True, timeout=20, cwd=d)
        return p.returncode, p.stderr.decode(), os.path.join(d, "jaas.conf"), cfg

    def test_jaas_without_users(self):
        rc, err, jaas, _ = self.run_larchd(
            "jaasLoginConfig=JAAS\n",
            "Server {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n"
            "    username=\"bob\";\n};\n")
        self.assertEqual(rc, 2, err)
        self.assertIn("%s:1: section 'Server' has no" % jaas, err)

    def test_malformed_jaas(self):
        rc, err, jaas, _ = self.run_larchd(
            "jaasLoginConfig=JAAS\n",
            "Server {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n"
            "    user_bob=\"bobsecret\"\n};\n")
        self.assertEqual(rc, 2, err)
        self.assertIn("%s:4: expected an option name, found '}'" % jaas, err)

    def test_sasl_settings_without_jaas(self):
        rc, err, _, _ = self.run_larchd(SASL_PROVIDER + "\nsessionRequireClientSASLAuth=true\n")
        self.assertEqual(rc, 2, err)
        self.assertIn("sessionRequireClientSASLAuth=true needs the JAAS file", err)
        rc, err, jaas, _ = self.run_larchd("jaasLoginConfig=JAAS\n")
        self.assertEqual(rc, 2, err)
        self.assertIn("%s: cannot open the JAAS file" % jaas, err)

    def test_kerberos_stays_refused(self):
        rc, err, _, cfg = self.run_larchd(
            "jaasLoginConfig=JAAS\nkerberos.removeRealmFromPrincipal=true\n",
            "Server { org.apache.zookeeper.server.auth.DigestLoginModule required "
            "user_bob=\"x\"; };\n")
        self.assertEqual(rc, 2, err)
        self.assertIn("%s:2: key 'kerberos.removeRealmFromPrincipal' cannot be honoured" % cfg,
                      err)
        self.assertIn("no Kerberos (GSSAPI)", err)


@unittest.skipUnless(sut_kind() == "larch", "larchd's answer")
class UnconfiguredSaslTest(ServerTestCase, unittest.TestCase):
    """Without a JAAS file larchd does not speak SASL: the opcode is
    UNIMPLEMENTED and the connection closes (stock ZooKeeper, which has no
    SASL server then either, answers OK with a null token instead)."""

    def test_sasl_without_jaas_is_unimplemented(self):
        c = self.raw()
        self.assertEqual(c.sasl(b"").err, EUNIMPLEMENTED)
        self.assertTrue(c.wait_closed(5.0))


if __name__ == "__main__":
    unittest.main()
