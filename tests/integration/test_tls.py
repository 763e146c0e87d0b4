"""TLS on the client port: secureClientPort and ZooKeeper's ssl.* keys.

Certificates are made by `openssl` into a temporary directory: a CA, a
server certificate (CN=localhost, IP:127.0.0.1), client certificates, a
second CA nothing trusts, and the stores built from them (PEM with the key
in the clear or encrypted, PKCS12 with passwords). kazoo (use_ssl=True)
reads and writes through the secure port; `openssl s_client` checks the
handshake's rules (protocols, suites, client certificates) by asking ruok:
"imok" means the session was served. Where practical the same checks run
against stock ZooKeeper 3.8 (Debian's, with its Netty factory), which has
the same rules for the settings they use.
"""

import os
import re
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
import unittest

from harness import (ENOAUTH, ESESSIONCLOSEDREQUIRESASL, HOST, OK, PERM_ALL, PERM_READ,
                     RawClient, Server, ServerError, free_port, larchd_path, sut_kind,
                     unique_path)

try:
    from kazoo.client import KazooClient
    from kazoo.exceptions import NoAuthError
except ImportError:  # pragma: no cover - Debian's python3 has it
    KazooClient = None

OPENSSL_TIMEOUT_S = 20
PROCESS_TIMEOUT_S = 20
NETTY = "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory"
CLIENT_DN = "CN=client one,OU=Test,O=Larch,C=US"


def zookeeper_installed():
    return os.path.exists("/usr/share/java/zookeeper.jar") and os.path.exists("/usr/bin/java")


class Pki:
    """The test's certificates and stores, made by the openssl tool."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="larch-it-pki-")
        self.serial = 100
        try:
            self._make()
        except BaseException:
            shutil.rmtree(self.dir, ignore_errors=True)
            raise

    def path(self, name):
        return os.path.join(self.dir, name)

    def _openssl(self, *args):
        subprocess.run(("openssl",) + args, check=True, cwd=self.dir, timeout=OPENSSL_TIMEOUT_S,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def _ca(self, name, subject):
        self._openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                      "-nodes", "-keyout", name + ".key", "-out", name + ".pem", "-days", "2",
                      "-subj", subject, "-addext", "basicConstraints=critical,CA:TRUE",
                      "-addext", "keyUsage=critical,keyCertSign,cRLSign")

    def _leaf(self, name, subject, eku, san, ca="ca"):
        self._openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                      "-keyout", name + ".key", "-out", name + ".csr", "-utf8",
                      "-multivalue-rdn", "-subj", subject)
        with open(self.path(name + ".ext"), "w") as f:
            f.write("basicConstraints=CA:FALSE\nextendedKeyUsage=%s\nsubjectAltName=%s\n"
                    % (eku, san))
        self.serial += 1
        self._openssl("x509", "-req", "-in", name + ".csr", "-CA", ca + ".pem", "-CAkey",
                      ca + ".key", "-set_serial", str(self.serial), "-days", "2",
                      "-extfile", name + ".ext", "-out", name + ".crt")

    def _cat(self, out, *names):
        with open(self.path(out), "wb") as f:
            for n in names:
                with open(self.path(n), "rb") as src:
                    f.write(src.read())

    def _make(self):
        self._ca("ca", "/CN=Larch Test CA")
        self._ca("other-ca", "/CN=Nobody's CA")
        self._leaf("server", "/CN=localhost", "serverAuth", "DNS:localhost,IP:127.0.0.1")
        self._leaf("client", "/C=US/O=Larch/OU=Test/CN=client one", "clientAuth", "IP:127.0.0.1")
        self._leaf("client2", "/CN=someone else", "clientAuth", "IP:127.0.0.1")
        self._leaf("elsewhere", "/CN=elsewhere", "clientAuth", "IP:198.18.1.3")
        self._leaf("rogue", "/CN=client one", "clientAuth", "IP:127.0.0.1", ca="other-ca")
        # a subject whose text takes Java's escapes, a multi-valued name,
        # UTF-8 and a type without a keyword (written as its OID and hex)
        self._leaf("tricky", '/C=DE/O=Larch\\, Inc./OU=R\\+D;Test/CN=Jos\u00e9 \\"J\\" <j@x>'
                   '+UID=j1/emailAddress=j@example.org', "clientAuth", "IP:127.0.0.1")
        # PEM key store: the chain, then the key (ZooKeeper's PemReader reads both)
        self._cat("server.pem", "server.crt", "ca.pem", "server.key")
        self._openssl("pkcs8", "-topk8", "-in", "server.key", "-out", "server-enc.key",
                      "-v2", "aes-256-cbc", "-passout", "pass:s3cret")
        self._cat("server-enc.pem", "server.crt", "server-enc.key")
        with open(self.path("pass.txt"), "w") as f:
            f.write("s3cret\n")
        self._openssl("pkcs12", "-export", "-in", "server.crt", "-inkey", "server.key",
                      "-certfile", "ca.pem", "-out", "server.p12", "-passout", "pass:p12pass")
        self._openssl("pkcs12", "-export", "-nokeys", "-in", "ca.pem", "-out", "trust.p12",
                      "-passout", "pass:trustpass")

    def remove(self):
        shutil.rmtree(self.dir, ignore_errors=True)


def s_client(port, pki, *args):
    """Asks ruok over `openssl s_client` with the test CA: the answer
    (b"imok" when the session was served) and what the tool printed."""
    p = subprocess.run(["openssl", "s_client", "-connect", "%s:%d" % (HOST, port), "-CAfile",
                        pki.path("ca.pem"), "-verify_return_error", "-quiet"] + list(args),
                       input=b"ruok", capture_output=True, timeout=OPENSSL_TIMEOUT_S)
    return p.stdout, p.stderr.decode("utf-8", "replace")


def with_cert(pki, name="client"):
    return ("-cert", pki.path(name + ".crt"), "-key", pki.path(name + ".key"))


def kazoo(port, pki, cert="client", auth=None):
    """A started kazoo client on the secure port (cert: the client
    certificate to present, None for none)."""
    kw = dict(use_ssl=True, ca=pki.path("ca.pem"), verify_certs=True)
    if cert:
        kw.update(certfile=pki.path(cert + ".crt"), keyfile=pki.path(cert + ".key"))
    zk = KazooClient(hosts="%s:%d" % (HOST, port), timeout=10, auth_data=auth, **kw)
    zk.start(timeout=20)
    return zk


def close_kazoo(zk):
    zk.stop()
    zk.close()


def tls_raw(port, pki, cert="client"):
    """A RawClient over TLS to the secure port, with its session open
    (cert: the client certificate, None for none)."""
    ctx = ssl.create_default_context(cafile=pki.path("ca.pem"))
    if cert:
        ctx.load_cert_chain(pki.path(cert + ".crt"), pki.path(cert + ".key"))
    c = RawClient(port)
    c.sock = ctx.wrap_socket(c.sock, server_hostname="localhost")
    c.connect()
    return c


def listening_ports(pid):
    """The TCP ports process pid listens on (its sockets in /proc/net/tcp*)."""
    inodes = set()
    fd_dir = "/proc/%d/fd" % pid
    for fd in os.listdir(fd_dir):
        try:
            target = os.readlink(os.path.join(fd_dir, fd))
        except OSError:
            continue
        m = re.match(r"socket:\[(\d+)\]", target)
        if m:
            inodes.add(m.group(1))
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                cols = line.split()
                if cols[3] == "0A" and cols[9] in inodes:  # LISTEN
                    ports.add(int(cols[1].rsplit(":", 1)[1], 16))
    return ports


def plain_ask(port, word=b"ruok"):
    """A four-letter word in the clear: the answer, b"" when the server
    closed (or reset) the connection."""
    with socket.create_connection((HOST, port), timeout=30) as s:
        s.sendall(word)
        try:
            return s.recv(100)
        except ConnectionResetError:
            return b""


def tls_ruok(port, pki, timeout_s=2.0):
    ctx = ssl.create_default_context(cafile=pki.path("ca.pem"))
    ctx.load_cert_chain(pki.path("client.crt"), pki.path("client.key"))
    with socket.create_connection((HOST, port), timeout=timeout_s) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            s.sendall(b"ruok")
            return s.recv(16)


class SecureOnlyServer(Server):
    """larchd from a zoo.cfg without clientPort: no --port, no --bind; ready
    when its secure port answers ruok."""

    def __init__(self, pki, cfg_lines):
        super().__init__(kind="larch", cfg_lines=cfg_lines)
        self.pki = pki
        self.secure_port = None

    def _larch_argv(self):
        argv = super()._larch_argv()
        for flag in ("--port", "--bind"):
            i = argv.index(flag)
            del argv[i:i + 2]
        return argv

    def _wait_ready(self, timeout_s):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServerError("larchd exited with %s during startup:\n%s"
                                  % (self.proc.returncode, self.stderr_tail()))
            try:
                if tls_ruok(self.secure_port, self.pki) == b"imok":
                    return
            except (OSError, ssl.SSLError):
                pass
            time.sleep(0.1)
        raise ServerError("larchd not ready within %.0f s:\n%s" % (timeout_s, self.stderr_tail()))


@unittest.skipUnless(KazooClient is not None, "kazoo is not installed")
class TlsTestBase(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.pki = Pki()

    @classmethod
    def tearDownClass(cls):
        cls.pki.remove()

    def store_lines(self, key="server.pem", trust="ca.pem"):
        lines = ["ssl.keyStore.location=" + self.pki.path(key)]
        if trust:
            lines.append("ssl.trustStore.location=" + self.pki.path(trust))
        return lines

    def start(self, lines, kind="larch", stores=True):
        """A server (larchd, or stock ZooKeeper) with a plain port and a
        secure one on 127.0.0.1; stopped at the test's end, larchd's stderr
        checked for sanitizer reports."""
        port = free_port()
        cfg = ["secureClientPort=%d" % port, "secureClientPortAddress=" + HOST, NETTY]
        cfg += (self.store_lines() if stores else []) + list(lines)
        srv = Server(kind=kind, cfg_lines=cfg)
        srv.secure_port = port
        srv.start()
        self.addCleanup(self.stop, srv)
        return srv

    def stop(self, srv):
        srv.stop()
        if srv.kind == "larch":
            self.assertEqual(srv.sanitizer_report(), [], srv.stderr_tail(40))

    def refused(self, lines):
        """Runs larchd with these zoo.cfg lines (and a secure port) and
        returns its stderr: it must exit nonzero without serving."""
        d = tempfile.mkdtemp(prefix="larch-it-tls-refused-")
        self.addCleanup(shutil.rmtree, d, True)
        cfg = os.path.join(d, "zoo.cfg")
        with open(cfg, "w") as f:
            f.write("\n".join(["secureClientPort=%d" % free_port(),
                               "secureClientPortAddress=" + HOST] + list(lines)) + "\n")
        p = subprocess.Popen([larchd_path(), "--config", cfg, "--port", str(free_port()),
                              "--bind", HOST], cwd=d, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
        try:
            _, err = p.communicate(timeout=PROCESS_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            self.fail("larchd started with: %s" % lines)
        err = err.decode("utf-8", "replace")
        self.assertNotEqual(p.returncode, 0, err)
        self.assertNotIn("serving", err)
        return err, cfg


@unittest.skipUnless(sut_kind() == "larch", "larchd's secure port (the comparisons start "
                     "ZooKeeper themselves)")
class SecurePortTest(TlsTestBase):

    def test_kazoo_reads_and_writes_beside_the_plain_port(self):
        srv = self.start([])
        zk = kazoo(srv.secure_port, self.pki)
        self.addCleanup(close_kazoo, zk)
        path = unique_path("tls")
        zk.create(path, b"over tls")
        self.assertEqual(zk.get(path)[0], b"over tls")
        big = os.urandom(300 * 1024)  # many records each way
        zk.set(path, big)
        self.assertEqual(zk.get(path)[0], big)
        seen = []
        zk.get(path, watch=seen.append)
        plain = KazooClient(hosts=srv.hosts, timeout=10)
        plain.start(timeout=20)
        self.addCleanup(close_kazoo, plain)
        plain.set(path, b"from the plain port")
        for _ in range(200):
            if seen:
                break
            time.sleep(0.05)
        self.assertEqual([e.type for e in seen], ["CHANGED"])
        self.assertEqual(zk.get(path)[0], b"from the plain port")
        self.assertIn(path.rsplit("/", 1)[1], zk.get_children("/"))

    def test_kazoo_x509_acl(self):
        """A node with an x509 ACL: its subject's client reads it, a client
        with another certificate or none gets NOAUTH."""
        from kazoo.security import make_acl
        srv = self.start(["ssl.clientAuth=want"])
        owner = kazoo(srv.secure_port, self.pki)
        self.addCleanup(close_kazoo, owner)
        path = unique_path("kazoo-x509")
        owner.create(path, b"only mine", acl=[make_acl("x509", CLIENT_DN, all=True)])
        self.assertEqual(owner.get(path)[0], b"only mine")
        self.assertEqual([(a.perms, a.id.scheme, a.id.id) for a in owner.get_acls(path)[0]],
                         [(PERM_ALL, "x509", CLIENT_DN)])
        for cert in ("client2", None):
            other = kazoo(srv.secure_port, self.pki, cert=cert)
            self.addCleanup(close_kazoo, other)
            with self.assertRaises(NoAuthError, msg=cert):
                other.get(path)

    def test_pkcs12_stores(self):
        srv = self.start(["ssl.keyStore.location=" + self.pki.path("server.p12"),
                          "ssl.keyStore.password=p12pass",
                          "ssl.trustStore.location=" + self.pki.path("trust.p12"),
                          "zookeeper.ssl.trustStore.password=trustpass"], stores=False)
        zk = kazoo(srv.secure_port, self.pki)
        self.addCleanup(close_kazoo, zk)
        path = unique_path("p12")
        zk.create(path, b"pkcs12")
        self.assertEqual(zk.get(path)[0], b"pkcs12")
        out, err = s_client(srv.secure_port, self.pki, *with_cert(self.pki))
        self.assertEqual(out, b"imok", err)

    def test_encrypted_pem_key_with_password_path(self):
        srv = self.start(["ssl.keyStore.location=" + self.pki.path("server-enc.pem"),
                          "ssl.keyStore.passwordPath=" + self.pki.path("pass.txt"),
                          "ssl.keyStore.type=PEM",
                          "ssl.trustStore.location=" + self.pki.path("ca.pem")], stores=False)
        out, err = s_client(srv.secure_port, self.pki, *with_cert(self.pki))
        self.assertEqual(out, b"imok", err)

    def test_protocols(self):
        """ssl.protocol alone is the one protocol served (ClientX509Util:
        enabledProtocols default to [protocol]); TLSv1.3 by default."""
        cases = (([], {"-tls1_3": True, "-tls1_2": False}),
                 (["ssl.protocol=TLSv1.2"], {"-tls1_3": False, "-tls1_2": True}),
                 (["ssl.enabledProtocols=TLSv1.3"], {"-tls1_3": True, "-tls1_2": False}),
                 (["ssl.protocol=TLSv1.2", "ssl.enabledProtocols=TLSv1.2,TLSv1.3"],
                  {"-tls1_3": True, "-tls1_2": True}))
        for lines, expect in cases:
            srv = self.start(lines + ["ssl.clientAuth=none"])
            for flag, served in expect.items():
                out, err = s_client(srv.secure_port, self.pki, flag)
                self.assertEqual(out == b"imok", served, "%s %s: %s" % (lines, flag, err))
                if not served:
                    self.assertIn("alert protocol version", err)
            self.stop(srv)
            if not all(expect.values()):
                self.assertIn("TLS handshake failed: unsupported protocol", srv.stderr_text)

    def test_client_auth(self):
        """need (the default): a certificate of the trusted CA is required;
        want: asked for, and checked when given; none: not asked for."""
        no_cert, good, rogue = (), with_cert(self.pki), with_cert(self.pki, "rogue")
        cases = (([], {no_cert: False, good: True, rogue: False}),
                 (["ssl.clientAuth=want"], {no_cert: True, good: True, rogue: False}),
                 (["ssl.clientAuth=none"], {no_cert: True, good: True}))
        for lines, expect in cases:
            srv = self.start(lines)
            for args, served in expect.items():
                out, err = s_client(srv.secure_port, self.pki, *args)
                self.assertEqual(out == b"imok", served, "%s %s: %s" % (lines, args, err))
            self.stop(srv)
            if lines == []:
                self.assertIn("TLS handshake failed: peer did not return a certificate",
                              srv.stderr_text)
                self.assertIn("TLS handshake failed: certificate verify failed",
                              srv.stderr_text)

    def test_ciphersuites_by_java_names(self):
        srv = self.start(["ssl.enabledProtocols=TLSv1.2", "ssl.clientAuth=none",
                          "ssl.ciphersuites=TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"])
        out, err = s_client(srv.secure_port, self.pki, "-tls1_2", "-cipher",
                            "ECDHE-ECDSA-AES256-GCM-SHA384")
        self.assertEqual(out, b"imok", err)
        out, err = s_client(srv.secure_port, self.pki, "-tls1_2", "-cipher",
                            "ECDHE-ECDSA-AES128-GCM-SHA256")
        self.assertNotEqual(out, b"imok", err)
        self.assertIn("handshake failure", err)

    def test_client_hostname_verification(self):
        """With ssl.clientHostnameVerification=true (and hostnameVerification,
        true by default) the certificate must name the client's address."""
        srv = self.start(["ssl.clientHostnameVerification=true"])
        out, err = s_client(srv.secure_port, self.pki, *with_cert(self.pki))
        self.assertEqual(out, b"imok", err)
        out, err = s_client(srv.secure_port, self.pki, *with_cert(self.pki, "elsewhere"))
        self.assertNotEqual(out, b"imok", err)
        # ZooKeeper checks a client's address only with both keys true
        srv = self.start(["ssl.clientHostnameVerification=true",
                          "ssl.hostnameVerification=false"])
        out, err = s_client(srv.secure_port, self.pki, *with_cert(self.pki, "elsewhere"))
        self.assertEqual(out, b"imok", err)

    def test_silent_handshake_is_closed_at_the_sessionless_deadline(self):
        # larchd logs such a close at debug level (a hostile client makes one
        # per connection)
        srv = self.start(["zookeeper.nio.sessionlessCnxnTimeout=1000", "ssl.clientAuth=none",
                          "larch.logLevel=debug"])
        # the start of a ClientHello, and no more: closed, not left waiting
        self.assertEqual(plain_ask(srv.secure_port, b"\x16\x03\x01"), b"")
        out, err = s_client(srv.secure_port, self.pki)
        self.assertEqual(out, b"imok", err)
        self.stop(srv)
        self.assertRegex(srv.stderr_text, r"closing 127\.0\.0\.1:\d+: no session after \d+ ms")

    def test_plain_client_on_the_secure_port_is_not_served(self):
        srv = self.start(["ssl.clientAuth=none"])
        # a TLS record header is 5 bytes: "ruok" alone would wait for more
        self.assertEqual(plain_ask(srv.secure_port, b"ruok\n"), b"")
        self.stop(srv)
        self.assertRegex(srv.stderr_text, r"closing 127\.0\.0\.1:\d+: TLS handshake failed: ")


@unittest.skipUnless(sut_kind() == "larch", "larchd's own configurations")
class SecureOnlyTest(TlsTestBase):

    def test_secure_only_server_has_no_plain_port(self):
        port = free_port()
        srv = SecureOnlyServer(self.pki, ["secureClientPort=%d" % port,
                                          "secureClientPortAddress=" + HOST]
                               + self.store_lines())
        srv.secure_port = port
        srv.start()
        self.addCleanup(self.stop, srv)
        self.assertEqual(listening_ports(srv.proc.pid), {port})
        zk = kazoo(port, self.pki)
        self.addCleanup(close_kazoo, zk)
        path = unique_path("secure-only")
        zk.create(path, b"tls only")
        self.assertEqual(zk.get(path)[0], b"tls only")
        self.assertEqual(plain_ask(port, b"ruok\n"), b"")
        conf = tls_conf(port, self.pki)
        self.assertIn("clientPort=-1\nsecureClientPort=%d\n" % port, conf)
        self.assertNotIn("password", conf)

    def test_udp_reads_are_refused_on_a_secure_only_server(self):
        d = tempfile.mkdtemp(prefix="larch-it-tls-udp-")
        self.addCleanup(shutil.rmtree, d, True)
        cfg = os.path.join(d, "zoo.cfg")
        with open(cfg, "w") as f:
            f.write("secureClientPort=%d\nssl.clientAuth=none\nssl.keyStore.location=%s\n"
                    "larch.udp=127.0.0.1:%d\n" % (free_port(), self.pki.path("server.pem"),
                                                   free_port()))
        p = subprocess.run([larchd_path(), "--config", cfg], cwd=d, capture_output=True,
                           timeout=PROCESS_TIMEOUT_S)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn(b"larch.udp serves reads in the clear", p.stderr)


def tls_conf(port, pki):
    ctx = ssl.create_default_context(cafile=pki.path("ca.pem"))
    ctx.load_cert_chain(pki.path("client.crt"), pki.path("client.key"))
    chunks = []
    with socket.create_connection((HOST, port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            s.sendall(b"conf")
            for _ in range(100):
                chunk = s.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
    return b"".join(chunks).decode()


@unittest.skipUnless(sut_kind() == "larch", "larchd's own configuration errors")
class RefusedTlsConfigTest(TlsTestBase):
    """What larchd cannot honour stops it before it serves, naming the line;
    so does a store it cannot load, naming the key and the file."""

    def test_java_keystores(self):
        err, cfg = self.refused(["ssl.keyStore.location=/etc/zk/keystore.jks",
                                 "ssl.keyStore.type=JKS"])
        self.assertIn("%s:4: ssl.keyStore.type: larchd cannot read Java keystores (JKS)" % cfg, err)
        err, cfg = self.refused(["ssl.keyStore.location=/etc/zk/keystore.jks"])
        self.assertIn("%s:3: ssl.keyStore.location: '/etc/zk/keystore.jks' is a Java keystore "
                      "(JKS, by its name)" % cfg, err)

    def test_wrong_passwords(self):
        enc = self.pki.path("server-enc.pem")
        err, cfg = self.refused(["ssl.clientAuth=none", "ssl.keyStore.location=" + enc,
                                 "ssl.keyStore.password=not-it"])
        self.assertIn("%s:4: ssl.keyStore.location: %s: wrong password (%s:5: "
                      "ssl.keyStore.password)" % (cfg, enc, cfg), err)
        p12 = self.pki.path("server.p12")
        err, cfg = self.refused(["ssl.clientAuth=none", "ssl.keyStore.location=" + p12,
                                 "zookeeper.ssl.keyStore.password=not-it"])
        self.assertIn("%s:4: ssl.keyStore.location: %s: wrong password (%s:5: "
                      "zookeeper.ssl.keyStore.password)" % (cfg, p12, cfg), err)
        trust = self.pki.path("trust.p12")
        err, cfg = self.refused(self.store_lines(trust=None) +
                                ["ssl.trustStore.location=" + trust])
        self.assertIn("%s:4: ssl.trustStore.location: %s: wrong password (ssl.trustStore."
                      "password (unset))" % (cfg, trust), err)
        self.assertNotIn("not-it", err)

    def test_missing_store_and_unknown_suite(self):
        err, cfg = self.refused(["ssl.keyStore.location=/nonexistent/server.pem",
                                 "ssl.trustStore.location=" + self.pki.path("ca.pem")])
        self.assertIn("%s:3: ssl.keyStore.location: cannot read /nonexistent/server.pem: No such "
                      "file or directory" % cfg, err)
        err, cfg = self.refused(self.store_lines() + ["ssl.ciphersuites=TLS_MADE_UP_SUITE"])
        self.assertIn("%s:5: ssl.ciphersuites: cipher suite 'TLS_MADE_UP_SUITE' is not one "
                      "OpenSSL" % cfg, err)

    def test_need_without_trust_store(self):
        err, cfg = self.refused(self.store_lines(trust=None))
        self.assertIn("ssl.clientAuth=need (ZooKeeper's default) asks clients for certificates "
                      "and needs ssl.trustStore.location", err)


@unittest.skipUnless(zookeeper_installed(), "stock ZooKeeper is not installed")
class CompareZooKeeperTest(TlsTestBase):
    """The same settings and the same clients against larchd and stock
    ZooKeeper 3.8: the same sessions served, the same ones refused. (3.8
    serves TLSv1.2 by default and has no TLSv1.3 suites in its default
    list, so the protocols are set explicitly.)"""

    def check_both(self, lines, cases):
        for kind in ("larch", "zookeeper"):
            srv = self.start(lines, kind=kind)
            for args, served in cases:
                out, err = s_client(srv.secure_port, self.pki, *args)
                self.assertEqual(out == b"imok", served, "%s %s %s: %s" % (kind, lines, args,
                                                                           err))
            self.stop(srv)

    def test_client_certificates_needed(self):
        self.check_both(["ssl.protocol=TLSv1.2"],
                        (((), False), (with_cert(self.pki), True),
                         (with_cert(self.pki, "rogue"), False)))

    def test_protocol_rules(self):
        self.check_both(["ssl.protocol=TLSv1.2"], ((("-tls1_3",) + with_cert(self.pki), False),
                                                   (("-tls1_2",) + with_cert(self.pki), True)))
        self.check_both(["ssl.enabledProtocols=TLSv1.3",
                         "ssl.ciphersuites=TLS_AES_128_GCM_SHA256,TLS_AES_256_GCM_SHA384"],
                        ((("-tls1_2",) + with_cert(self.pki), False),
                         (("-tls1_3",) + with_cert(self.pki), True)))

    def test_kazoo_with_a_certificate(self):
        for kind in ("larch", "zookeeper"):
            srv = self.start(["ssl.protocol=TLSv1.2"], kind=kind)
            zk = kazoo(srv.secure_port, self.pki)
            path = unique_path("both")
            zk.create(path, kind.encode())
            self.assertEqual(zk.get(path)[0], kind.encode())
            close_kazoo(zk)
            self.stop(srv)


@unittest.skipUnless(zookeeper_installed(), "stock ZooKeeper is not installed")
class X509Test(TlsTestBase):
    """The x509 scheme, larchd beside stock ZooKeeper 3.8 (whose provider a
    secure port registers): identities as whoAmI shows them, ACLs, the
    super user, enforce.auth. Every check runs against both and expects the
    same answer; the subjects' text is Java's own on the ZooKeeper side."""

    LINES = ["ssl.protocol=TLSv1.2"]  # ZooKeeper 3.8 has no TLSv1.3 suites by default

    def each_server(self, lines=()):
        for kind in ("larch", "zookeeper"):
            srv = self.start(self.LINES + list(lines), kind=kind)
            yield kind, srv
            self.stop(srv)

    def test_whoami_is_the_subject_as_java_writes_it(self):
        # compared as sets: ZooKeeper lists a connection's ids in the order
        # of its hash set (ServerCnxn.authInfo), larchd in arrival order
        seen = {}
        for kind, srv in self.each_server():
            for cert in ("client", "tricky"):
                with tls_raw(srv.secure_port, self.pki, cert) as c:
                    who = c.whoami()
                    self.assertEqual(who.err, OK, kind)
                    seen.setdefault(cert, {})[kind] = sorted(who.value)
        self.assertEqual(seen["client"]["larch"], [("ip", HOST), ("x509", CLIENT_DN)])
        for cert in seen:
            self.assertEqual(seen[cert]["larch"], seen[cert]["zookeeper"], cert)

    def test_x509_acl(self):
        results = {}
        for kind, srv in self.each_server():
            got = results[kind] = []
            with tls_raw(srv.secure_port, self.pki) as owner, \
                    tls_raw(srv.secure_port, self.pki, "client2") as other, \
                    RawClient(srv.port) as plain:
                plain.connect()
                path = unique_path("x509")
                got.append(owner.create(path, b"mine", acl=[(PERM_ALL, "x509", CLIENT_DN)]).err)
                got.append(owner.get_data(path).err)
                got.append(other.get_data(path).err)
                got.append(plain.get_data(path).err)
                got.append(owner.get_acl(path).value[0])
                # "auth" stands for the caller's x509 identity
                p2 = unique_path("x509-auth")
                got.append(owner.create(p2, b"", acl=[(PERM_READ, "auth", "")]).err)
                got.append(owner.get_acl(p2).value[0])
                got.append(other.get_data(p2).err)
                # an id X500Principal cannot parse
                got.append(owner.create(unique_path("bad"), b"", acl=[(PERM_ALL, "x509",
                                                                       "CN=a,,O=b")]).err)
        self.assertEqual(results["larch"][:4], [OK, OK, ENOAUTH, ENOAUTH])
        self.assertEqual(results["larch"][4], [(PERM_ALL, "x509", CLIENT_DN)])
        self.assertEqual(results["larch"], results["zookeeper"])

    def test_super_user(self):
        results = {}
        for kind, srv in self.each_server(["X509AuthenticationProvider.superUser=CN=someone else"]):
            with tls_raw(srv.secure_port, self.pki) as owner, \
                    tls_raw(srv.secure_port, self.pki, "client2") as admin:
                path = unique_path("x509-super")
                owner.create(path, b"mine", acl=[(PERM_READ, "x509", CLIENT_DN)])
                results[kind] = (sorted(admin.whoami().value), admin.get_data(path).err,
                                 admin.set_data(path, b"admin's").err)
        self.assertEqual(results["larch"], ([("ip", HOST), ("super", ""),
                                             ("x509", "CN=someone else")], OK, OK))
        self.assertEqual(results["larch"], results["zookeeper"])

    def test_enforce_auth_x509(self):
        results = {}
        for kind, srv in self.each_server(["ssl.clientAuth=want",
                                            "enforce.auth.enabled=true",
                                            "enforce.auth.schemes=x509"]):
            with tls_raw(srv.secure_port, self.pki) as good, \
                    tls_raw(srv.secure_port, self.pki, None) as anonymous, \
                    RawClient(srv.port) as plain:
                plain.connect()
                results[kind] = (good.exists("/").err, anonymous.exists("/").err,
                                 plain.exists("/").err)
        self.assertEqual(results["larch"], (OK, ESESSIONCLOSEDREQUIRESASL,
                                            ESESSIONCLOSEDREQUIRESASL))
        self.assertEqual(results["larch"], results["zookeeper"])


@unittest.skipUnless(sut_kind() == "larch", "larchd's own configurations")
class X509ProviderLineTest(TlsTestBase):
    """x509 ACLs need the provider: a secure port registers it, so does an
    authProvider line naming it; without either they are INVALIDACL."""

    def test_provider_without_secure_port(self):
        for lines, expect in (([], "INVALIDACL"),
                              (["authProvider.x509=org.apache.zookeeper.server.auth."
                                "X509AuthenticationProvider"], "OK")):
            srv = Server(kind="larch", cfg_lines=lines)
            srv.start()
            try:
                with RawClient(srv.port) as c:
                    c.connect()
                    err = c.create(unique_path("x509"), b"", acl=[(PERM_ALL, "x509",
                                                                   CLIENT_DN)]).err
            finally:
                self.stop(srv)
            self.assertEqual(err_name_of(err), expect, lines)


def err_name_of(code):
    from harness import err_name
    return err_name(code)


if __name__ == "__main__":
    unittest.main()
