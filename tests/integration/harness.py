"""Integration-test harness: the server under test and a raw jute client.

Server under test (SUT): env LARCH_SUT=larch (default) or zookeeper.
  larch      runs LARCHD (default <repo>/build/server/larchd).
  zookeeper  runs Debian's stock ZooKeeper 3.8 (ZooKeeperServerMain) in the
             foreground, so the harness owns its PID.
Every server listens on a free 127.0.0.1 port, lives in its own temp dir
(removed on stop) and is stopped by PID: SIGTERM, then SIGKILL after a bound.

RawClient speaks the ZooKeeper client protocol over a plain socket (record
layouts from zookeeper.jute) for the ops kazoo lacks and for byte-level checks.
It keeps every frame it reads in `log`, so tests can check the order of watch
notifications relative to replies.

Only /usr/bin/python3 has kazoo; run the tests with it.
"""

import collections
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
HOST = "127.0.0.1"

# superDigest for user "super" with password "test" (test-only credential).
SUPER_DIGEST = "super:D/InIHSb7yEEbrWz8b9l71RjZJU="
SUPER_AUTH = b"super:test"

ZK_JAVA = "/usr/bin/java"
ZK_ENV_SH = "/usr/share/zookeeper/bin/zkEnv.sh"
ZK_DEFAULT_CLASSPATH = "/etc/zookeeper/conf:/usr/share/java/zookeeper.jar"
# slf4j has no binding in Debian's zookeeper classpath; the NOP binding keeps
# the JVM quiet instead of printing the "no binding" warning.
SLF4J_NOP_JAR = "/usr/share/java/slf4j-nop.jar"
# Debian's zookeeper.jar leaves netty-codec out of its manifest's Class-Path,
# and the Netty connection factory (a secureClientPort's) needs it.
NETTY_CODEC_JAR = "/usr/share/java/netty-codec.jar"
ZK_START_TIMEOUT_S = 20.0
LARCH_START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 10.0
TICK_TIME_MS = 2000

# ---- protocol constants (ZooDefs.OpCode, KeeperException.Code) ----------
OP = dict(notification=0, create=1, delete=2, exists=3, getData=4, setData=5,
          getACL=6, setACL=7, getChildren=8, sync=9, ping=11,
          getChildren2=12, check=13, multi=14, create2=15, reconfig=16,
          checkWatches=17, removeWatches=18, createContainer=19,
          deleteContainer=20, createTTL=21, multiRead=22, auth=100,
          setWatches=101, sasl=102, getEphemerals=103,
          getAllChildrenNumber=104, setWatches2=105, addWatch=106,
          whoAmI=107, createSession=-10, closeSession=-11, error=-1)

OK = 0
ESYSTEMERROR = -1
ERUNTIMEINCONSISTENCY = -2
EMARSHALLINGERROR = -5
EUNIMPLEMENTED = -6
EBADARGUMENTS = -8
EAPIERROR = -100
ENONODE = -101
ENOAUTH = -102
EBADVERSION = -103
ENOCHILDRENFOREPHEMERALS = -108
ENODEEXISTS = -110
ENOTEMPTY = -111
ESESSIONEXPIRED = -112
EINVALIDACL = -114
EAUTHFAILED = -115
ESESSIONCLOSEDREQUIRESASL = -124  # enforce.auth: a session without the scheme
ENOWATCHER = -121

ERR_NAMES = {0: "OK", -1: "SYSTEMERROR", -2: "RUNTIMEINCONSISTENCY",
             -3: "DATAINCONSISTENCY", -4: "CONNECTIONLOSS",
             -5: "MARSHALLINGERROR", -6: "UNIMPLEMENTED",
             -7: "OPERATIONTIMEOUT", -8: "BADARGUMENTS",
             -12: "UNKNOWNSESSION", -100: "APIERROR", -101: "NONODE",
             -102: "NOAUTH", -103: "BADVERSION",
             -108: "NOCHILDRENFOREPHEMERALS", -110: "NODEEXISTS",
             -111: "NOTEMPTY", -112: "SESSIONEXPIRED",
             -113: "INVALIDCALLBACK", -114: "INVALIDACL", -115: "AUTHFAILED",
             -118: "SESSIONMOVED", -119: "NOTREADONLY",
             -120: "EPHEMERALONLOCALSESSION", -121: "NOWATCHER",
             -122: "REQUESTTIMEOUT", -123: "RECONFIGDISABLED",
             -125: "QUOTAEXCEEDED", -127: "THROTTLEDOP"}

XID_NOTIFICATION = -1
XID_PING = -2
XID_AUTH = -4
XID_SETWATCHES = -8

PERSISTENT, EPHEMERAL, PERSISTENT_SEQUENTIAL, EPHEMERAL_SEQUENTIAL = 0, 1, 2, 3
CONTAINER, PERSISTENT_WITH_TTL, PERSISTENT_SEQUENTIAL_WITH_TTL = 4, 5, 6

PERM_READ, PERM_WRITE, PERM_CREATE, PERM_DELETE, PERM_ADMIN = 1, 2, 4, 8, 16
PERM_ALL = 31
OPEN_ACL = [(PERM_ALL, "world", "anyone")]

EVENT_CREATED, EVENT_DELETED, EVENT_DATA_CHANGED, EVENT_CHILD_CHANGED = 1, 2, 3, 4
STATE_SYNC_CONNECTED = 3
WATCHER_CHILDREN, WATCHER_DATA, WATCHER_ANY = 1, 2, 3
ADD_WATCH_PERSISTENT, ADD_WATCH_PERSISTENT_RECURSIVE = 0, 1

# ephemeralOwner encodings of EphemeralType (ZooKeeper server/EphemeralType.java)
CONTAINER_EPHEMERAL_OWNER = -0x8000000000000000
TTL_EPHEMERAL_OWNER_HIGH_BYTE = 0xFF

MAX_BUFFER = 0xFFFFF  # jute.maxbuffer default (1 MiB - 1)

SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
                     "WARNING: ThreadSanitizer", "runtime error:")


def err_name(code):
    return ERR_NAMES.get(code, str(code))


def sut_kind():
    kind = os.environ.get("LARCH_SUT", "larch")
    if kind not in ("larch", "zookeeper"):
        raise ValueError("LARCH_SUT must be larch or zookeeper, not %r" % kind)
    return kind


def larch_ensemble_size():
    """LARCH_ENSEMBLE=N (N >= 2) runs every larch Server as an N-member
    ensemble: the same tests, with stock clients spread over its members."""
    n = int(os.environ.get("LARCH_ENSEMBLE", "0") or "0")
    return n if n >= 2 else 0


def larchd_path():
    return os.environ.get("LARCHD", str(REPO_ROOT / "build" / "server" / "larchd"))


_PORTS_GIVEN = set()


def free_port():
    """Returns a port that was free on 127.0.0.1 a moment ago and that this
    process has not been given before: the kernel may hand the port it just
    released straight back, so two calls in a row (a server's quorum and
    election ports) could otherwise return the same number."""
    for _ in range(1000):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((HOST, 0))
            port = s.getsockname()[1]
        if port not in _PORTS_GIVEN:
            _PORTS_GIVEN.add(port)
            return port
    raise RuntimeError("no unused free port after 1000 tries")


def four_letter(port, word, timeout_s=5.0, source_addr=None):
    """Sends a four-letter word and returns the whole answer (bytes);
    source_addr picks another local address (one IP may be at its limit)."""
    source = (source_addr, 0) if source_addr else None
    with socket.create_connection((HOST, port), timeout=timeout_s,
                                  source_address=source) as s:
        s.sendall(word.encode() if isinstance(word, str) else word)
        chunks = []
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)


def zookeeper_classpath():
    """CLASSPATH from Debian's zkEnv.sh (the package's own launcher settings)."""
    classpath = ZK_DEFAULT_CLASSPATH
    try:
        text = Path(ZK_ENV_SH).read_text()
        m = re.search(r'^CLASSPATH="?([^"\n]+)"?', text, re.M)
        if m:
            classpath = m.group(1)
    except OSError:
        pass
    for jar in (SLF4J_NOP_JAR, NETTY_CODEC_JAR):
        if os.path.exists(jar):
            classpath += ":" + jar
    return classpath


class ServerError(Exception):
    pass


_LIVE_SERVERS = set()


def stop_all_servers(grace_s=2.0):
    """Emergency stop of every server this process started (SIGTERM, then
    SIGKILL after grace_s); for signal handlers, where cleanups never run."""
    for server in list(_LIVE_SERVERS):
        proc = server.proc
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                proc.kill()
        if server.tmpdir is not None:
            shutil.rmtree(server.tmpdir, ignore_errors=True)
        _LIVE_SERVERS.discard(server)
    for ensemble in list(_LIVE_ENSEMBLES):
        ensemble.stop()


class Server:
    """One server process on a free loopback port.

    kind: "larch" or "zookeeper" (default: LARCH_SUT). Options map onto both
    servers: max_client_cnxns, min/max_session_timeout_ms. binary overrides
    the larchd path (e.g. the ASan build). cfg_lines are appended verbatim
    ("key=value") to the generated zoo.cfg of either server (ZooKeeper turns
    keys it does not parse itself into "zookeeper.<key>" system properties).
    jvm_props ({name: value}) become -Dname=value on ZooKeeper's java command
    line, for what it reads only as a JVM property (its JAAS file,
    java.security.auth.login.config); larchd takes its equivalents from
    cfg_lines, and is given none of them.
    Use as a context manager or call start()/stop(); stop() returns the exit
    status and keeps the stderr text in self.stderr_text.
    """

    def __init__(self, kind=None, binary=None, max_client_cnxns=None,
                 min_session_timeout_ms=None, max_session_timeout_ms=None,
                 env=None, cfg_lines=(), jvm_props=None):
        self.kind = kind or sut_kind()
        self.binary = binary or larchd_path()
        self.max_client_cnxns = max_client_cnxns
        self.min_session_timeout_ms = min_session_timeout_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.extra_env = env or {}
        self.cfg_lines = list(cfg_lines)
        self.jvm_props = dict(jvm_props or {})
        self.port = None
        self.proc = None
        self.tmpdir = None
        self.stderr_path = None
        self.stderr_text = ""
        self.returncode = None
        self.ensemble = None  # LARCH_ENSEMBLE: the members behind this Server

    @property
    def hosts(self):
        if self.ensemble is not None:
            return self.ensemble.hosts()
        return "%s:%d" % (HOST, self.port)

    def wait_applied(self, zxid, timeout_s=10.0):
        """Against an ensemble, waits until every live member has applied
        zxid, so that a client of any member reads what a client of another
        wrote up to it (ZooKeeper promises that across members only after a
        sync). A standalone server has applied a write before it answers."""
        if self.ensemble is not None:
            self.ensemble.wait_applied(zxid, timeout_s)

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    # -- start ---------------------------------------------------------
    def start(self):
        self.tmpdir = tempfile.mkdtemp(prefix="larch-it-%s-" % self.kind)
        try:
            self._spawn()
        except BaseException:
            self.stop()
            raise
        return self

    def _spawn_ensemble(self, n):
        """The members of an ensemble stand in for one server: port is one
        member's client port (raw clients and 4lw go there), hosts all of
        them (kazoo and the C client spread over the members)."""
        lines = ["maxClientCnxns=%d" % self.max_client_cnxns] if self.max_client_cnxns else []
        if self.min_session_timeout_ms is not None:
            lines.append("minSessionTimeout=%d" % self.min_session_timeout_ms)
        if self.max_session_timeout_ms is not None:
            lines.append("maxSessionTimeout=%d" % self.max_session_timeout_ms)
        lines += ["zookeeper.extendedTypesEnabled=true"] + self.cfg_lines
        self.ensemble = Ensemble(n=n, binary=self.binary, tick_ms=TICK_TIME_MS, sync_limit=1,
                                 cfg_lines=lines)
        self.ensemble.start()
        self.ensemble.wait_leader()
        self.port = self.ensemble.client_ports[1]
        self.proc = self.ensemble.procs[1]
        self.stderr_path = os.path.join(self.ensemble.dir_of(1), "stderr.log")
        _LIVE_SERVERS.add(self)
        self._wait_ready(LARCH_START_TIMEOUT_S)

    def _spawn(self):
        n = larch_ensemble_size()
        if self.kind == "larch" and n:
            return self._spawn_ensemble(n)
        self.port = free_port()
        self.stderr_path = os.path.join(self.tmpdir, "stderr.log")
        if self.kind == "zookeeper":
            argv, timeout_s = self._zookeeper_argv(), ZK_START_TIMEOUT_S
        else:
            argv, timeout_s = self._larch_argv(), LARCH_START_TIMEOUT_S
        env = dict(os.environ)
        env.update(self.extra_env)
        with open(self.stderr_path, "wb") as err, open(os.devnull, "wb") as out:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=err,
                                         stdin=subprocess.DEVNULL,
                                         cwd=self.tmpdir, env=env)
        _LIVE_SERVERS.add(self)
        self._wait_ready(timeout_s)

    def _larch_argv(self):
        if not os.access(self.binary, os.X_OK):
            raise ServerError("larchd not found at %s (set LARCHD)" % self.binary)
        data_dir = os.path.join(self.tmpdir, "data")
        os.mkdir(data_dir)
        # Settings both servers get from their zoo.cfg (ZooKeeper's from a
        # system property): the container/TTL reaper scans every 500 ms, as
        # for ZooKeeper below. This also exercises larchd's --config.
        cfg_path = os.path.join(self.tmpdir, "zoo.cfg")
        with open(cfg_path, "w") as f:
            f.write("znode.container.checkIntervalMs=500\n")
            for line in self.cfg_lines:
                f.write(line + "\n")
        argv = [self.binary, "--config", cfg_path, "--port", str(self.port), "--bind", HOST,
                "--tick-time", str(TICK_TIME_MS), "--4lw", "*",
                "--super-digest", SUPER_DIGEST, "--ttl", "on"]
        # Durable by default; LARCHD_IN_MEMORY=1 runs without a data dir (the
        # only mode where write rounds may run inline on workers).
        if os.environ.get("LARCHD_IN_MEMORY") != "1":
            argv += ["--data-dir", data_dir]
        if self.max_client_cnxns is not None:
            argv += ["--max-client-cnxns", str(self.max_client_cnxns)]
        if self.min_session_timeout_ms is not None:
            argv += ["--min-session-timeout", str(self.min_session_timeout_ms)]
        if self.max_session_timeout_ms is not None:
            argv += ["--max-session-timeout", str(self.max_session_timeout_ms)]
        argv += os.environ.get("LARCHD_ARGS", "").split()
        return argv

    def _zookeeper_argv(self):
        data_dir = os.path.join(self.tmpdir, "data")
        os.mkdir(data_dir)
        cfg = ["tickTime=%d" % TICK_TIME_MS, "clientPort=%d" % self.port,
               "clientPortAddress=%s" % HOST, "dataDir=%s" % data_dir,
               "4lw.commands.whitelist=*", "admin.enableServer=false"]
        if self.max_client_cnxns is not None:
            cfg.append("maxClientCnxns=%d" % self.max_client_cnxns)
        if self.min_session_timeout_ms is not None:
            cfg.append("minSessionTimeout=%d" % self.min_session_timeout_ms)
        if self.max_session_timeout_ms is not None:
            cfg.append("maxSessionTimeout=%d" % self.max_session_timeout_ms)
        cfg += self.cfg_lines
        cfg_path = os.path.join(self.tmpdir, "zoo.cfg")
        with open(cfg_path, "w") as f:
            f.write("\n".join(cfg) + "\n")
        # Small heap and C1-only JIT: a test server starts in ~1 s this way.
        # The container manager normally scans every 60 s; 500 ms lets the
        # container/TTL expiry tests finish quickly.
        return [ZK_JAVA, "-Xmx256m", "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1",
                "-Dzookeeper.extendedTypesEnabled=true",
                "-Dzookeeper.DigestAuthenticationProvider.superDigest=" + SUPER_DIGEST,
                "-Dznode.container.checkIntervalMs=500",
                "-Dzookeeper.admin.enableServer=false"] + [
                "-D%s=%s" % kv for kv in sorted(self.jvm_props.items())] + [
                "-cp", zookeeper_classpath(),
                "org.apache.zookeeper.server.ZooKeeperServerMain", cfg_path]

    def _wait_ready(self, timeout_s):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServerError("%s exited with %s during startup:\n%s" % (
                    self.kind, self.proc.returncode, self.stderr_tail()))
            # ZooKeeper answers ruok before its request pipeline is up (early
            # sessions get dropped), so ready means: imok and a real session.
            try:
                if (four_letter(self.port, "ruok", timeout_s=1.0) == b"imok"
                        and self._handshake_ok()):
                    return
            except (OSError, ConnectionClosed, DecodeError):
                pass
            time.sleep(0.1)
        raise ServerError("%s not ready within %.0f s:\n%s" % (
            self.kind, timeout_s, self.stderr_tail()))

    def _handshake_ok(self):
        with RawClient(self.port, timeout_s=2.0) as c:
            if c.connect(timeout_ms=10000).timeout_ms <= 0:
                return False
            # under enforce.auth the refusal shows the pipeline up too
            return c.close_session().err in (OK, ESESSIONCLOSEDREQUIRESASL)

    # -- stop ----------------------------------------------------------
    def stop(self):
        """SIGTERM, wait, SIGKILL after STOP_TIMEOUT_S. Returns the exit status."""
        if self.ensemble is not None and self.returncode is None:
            self.ensemble.stop()
            self.returncode = self.proc.returncode
            self.stderr_text = "\n".join(self.ensemble.stderr_texts.get(i, "")
                                         for i in self.ensemble.ids)
        if self.proc is not None and self.returncode is None:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(timeout=STOP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(timeout=STOP_TIMEOUT_S)
            self.returncode = self.proc.returncode
            self.stderr_text = self._read_stderr()
        if self.tmpdir is not None:
            shutil.rmtree(self.tmpdir, ignore_errors=True)
            self.tmpdir = None
        _LIVE_SERVERS.discard(self)
        return self.returncode

    def sanitizer_report(self):
        """Lines of ASan/UBSan/TSan/LSan reports in the server's stderr (call after stop)."""
        return [l for l in self.stderr_text.splitlines()
                if any(m in l for m in SANITIZER_MARKERS)]

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def memory(self):
        """{"VmRSS": bytes, "VmHWM": bytes} of the live server process
        (/proc/<pid>/status; VmHWM is the peak RSS since it started)."""
        return proc_memory(self.proc.pid)

    def mntr(self, timeout_s=5.0):
        """The server's mntr answer as a dict (see parse_mntr)."""
        return parse_mntr(four_letter(self.port, "mntr", timeout_s))

    def _read_stderr(self):
        try:
            with open(self.stderr_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except (OSError, TypeError):
            return ""

    def stderr_tail(self, lines=30):
        text = self.stderr_text or self._read_stderr()
        return "\n".join(text.splitlines()[-lines:])


def proc_memory(pid):
    """VmRSS and VmHWM of a process in bytes, from /proc/<pid>/status."""
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                value, unit = rest.split()
                assert unit == "kB", line
                out[key] = int(value) * 1024
    return out


def parse_mntr(text):
    """mntr's "key<TAB>value" lines as a dict; integer values become ints."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition("\t")
        if not sep:
            continue
        value = value.strip()
        try:
            out[key.strip()] = int(value)
        except ValueError:
            out[key.strip()] = value
    return out


# ---- jute codec ----------------------------------------------------------
class Writer:
    """Appends jute primitives (big-endian) to a byte string."""

    def __init__(self):
        self.parts = []

    def int(self, v):
        self.parts.append(struct.pack(">i", v))
        return self

    def long(self, v):
        self.parts.append(struct.pack(">q", v))
        return self

    def bool(self, v):
        self.parts.append(b"\x01" if v else b"\x00")
        return self

    def buffer(self, b):
        if b is None:
            return self.int(-1)
        self.int(len(b))
        self.parts.append(bytes(b))
        return self

    def string(self, s):
        return self.buffer(None if s is None else s.encode("utf-8"))

    def strings(self, items):
        self.int(len(items))
        for s in items:
            self.string(s)
        return self

    def acls(self, acls):
        self.int(len(acls))
        for perms, scheme, ident in acls:
            self.int(perms).string(scheme).string(ident)
        return self

    def raw(self, b):
        self.parts.append(bytes(b))
        return self

    def bytes(self):
        return b"".join(self.parts)


class DecodeError(Exception):
    pass


Stat = collections.namedtuple("Stat", "czxid mzxid ctime mtime version cversion "
                              "aversion ephemeralOwner dataLength numChildren pzxid")


class Reader:
    """Reads jute primitives from a received frame body."""

    def __init__(self, data):
        self.data = data
        self.off = 0

    def _take(self, n):
        if n < 0 or self.off + n > len(self.data):
            raise DecodeError("need %d bytes at %d of %d" % (n, self.off, len(self.data)))
        chunk = self.data[self.off:self.off + n]
        self.off += n
        return chunk

    def int(self):
        return struct.unpack(">i", self._take(4))[0]

    def long(self):
        return struct.unpack(">q", self._take(8))[0]

    def bool(self):
        return self._take(1) != b"\x00"

    def buffer(self):
        n = self.int()
        return None if n == -1 else self._take(n)

    def string(self):
        b = self.buffer()
        return None if b is None else b.decode("utf-8")

    def strings(self):
        n = self.int()
        return None if n == -1 else [self.string() for _ in range(n)]

    def acls(self):
        n = self.int()
        return [(self.int(), self.string(), self.string()) for _ in range(n)]

    def stat(self):
        return Stat(self.long(), self.long(), self.long(), self.long(),
                    self.int(), self.int(), self.int(), self.long(),
                    self.int(), self.int(), self.long())

    def left(self):
        return len(self.data) - self.off


# ---- raw client ------------------------------------------------------------
class ConnectionClosed(Exception):
    pass


Reply = collections.namedtuple("Reply", "xid zxid err body")
Event = collections.namedtuple("Event", "type state path zxid")
Result = collections.namedtuple("Result", "err value zxid")
Session = collections.namedtuple("Session", "protocol_version timeout_ms session_id "
                                 "passwd read_only")


class RawClient:
    """A minimal ZooKeeper client over one TCP connection.

    Request helpers return Result(err, value, zxid); value is None on error.
    Notifications read while waiting for a reply go to `events`; `log` keeps
    every frame in arrival order as ("event", Event) or ("reply", Reply).
    """

    def __init__(self, port, host=HOST, timeout_s=10.0, source_addr=None, rcvbuf=None):
        """source_addr: local address to connect from (e.g. "127.0.0.2");
        rcvbuf: SO_RCVBUF set before connecting (bounds what the kernel
        buffers for a client that stops reading)."""
        if source_addr is None and rcvbuf is None:
            self.sock = socket.create_connection((host, port), timeout=timeout_s)
        else:
            self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                if rcvbuf is not None:
                    self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
                if source_addr is not None:
                    self.sock.bind((source_addr, 0))
                self.sock.settimeout(timeout_s)
                self.sock.connect((host, port))
            except BaseException:
                self.sock.close()
                raise
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.timeout_s = timeout_s
        self.next_xid = 1
        self.events = []
        self.log = []
        self.session = None
        self.last_zxid = 0

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    # -- framing -------------------------------------------------------
    def send_frame(self, body):
        self.sock.sendall(struct.pack(">i", len(body)) + body)

    def _recv_exact(self, n, timeout_s):
        self.sock.settimeout(timeout_s)
        chunks, got = [], 0
        while got < n:
            try:
                chunk = self.sock.recv(n - got)
            except ConnectionResetError as e:
                raise ConnectionClosed("reset: %s" % e)
            if not chunk:
                raise ConnectionClosed("EOF after %d of %d bytes" % (got, n))
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def recv_frame(self, timeout_s=None):
        timeout_s = self.timeout_s if timeout_s is None else timeout_s
        (n,) = struct.unpack(">i", self._recv_exact(4, timeout_s))
        if n < 0 or n > 64 * 1024 * 1024:
            raise DecodeError("bad frame length %d" % n)
        return self._recv_exact(n, timeout_s)

    def wait_closed(self, timeout_s=5.0):
        """True if the server closes the connection within timeout_s
        (frames arriving meanwhile are discarded)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                if not self.sock.recv(65536):
                    return True
            except socket.timeout:
                return False
            except (ConnectionResetError, BrokenPipeError):
                return True
        return False

    # -- session -------------------------------------------------------
    def connect(self, timeout_ms=10000, session_id=0, passwd=b"\0" * 16,
                last_zxid=0, read_only=False):
        """Sends ConnectRequest, returns the Session from ConnectResponse.
        A timeout_ms of 0 in the answer means the session was refused."""
        self.send_connect(timeout_ms, session_id, passwd, last_zxid, read_only)
        return self.read_connect()

    def send_connect(self, timeout_ms=10000, session_id=0, passwd=b"\0" * 16,
                     last_zxid=0, read_only=False):
        w = (Writer().int(0).long(last_zxid).int(timeout_ms).long(session_id)
             .buffer(passwd).bool(read_only))
        self.send_frame(w.bytes())

    def read_connect(self, timeout_s=None):
        """The ConnectResponse to send_connect, as connect returns it."""
        r = Reader(self.recv_frame(timeout_s))
        proto, timeout, sid, pw = r.int(), r.int(), r.long(), r.buffer()
        ro = r.bool() if r.left() >= 1 else None
        self.session = Session(proto, timeout, sid, pw, ro)
        return self.session

    # -- requests ------------------------------------------------------
    def send_request(self, op, body=b"", xid=None):
        if xid is None:
            xid = self.next_xid
            self.next_xid += 1
        self.send_frame(struct.pack(">ii", xid, op) + body)
        return xid

    def read_one(self, timeout_s=None):
        """Reads the next frame: returns an Event or a Reply."""
        r = Reader(self.recv_frame(timeout_s))
        xid, zxid, err = r.int(), r.long(), r.int()
        if xid == XID_NOTIFICATION:
            ev = Event(r.int(), r.int(), r.string(), zxid)
            self.events.append(ev)
            self.log.append(("event", ev))
            return ev
        if zxid > 0:
            self.last_zxid = max(self.last_zxid, zxid)
        rep = Reply(xid, zxid, err, Reader(r.data[r.off:]))
        self.log.append(("reply", rep))
        return rep

    def wait_reply(self, xid, timeout_s=None):
        timeout_s = self.timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise socket.timeout("no reply for xid %d" % xid)
            frame = self.read_one(left)
            if isinstance(frame, Reply):
                if frame.xid == xid:
                    return frame
                raise DecodeError("reply xid %d while waiting for %d (per-session "
                                  "FIFO broken?)" % (frame.xid, xid))

    def call(self, op, body=b"", xid=None):
        return self.wait_reply(self.send_request(op, body, xid))

    def drain_events(self, idle_s=0.2, max_s=5.0):
        """Reads frames until none arrives for idle_s; returns new events."""
        start = len(self.events)
        deadline = time.monotonic() + max_s
        while time.monotonic() < deadline:
            try:
                self.read_one(idle_s)
            except socket.timeout:
                break
        return self.events[start:]

    def wait_event(self, timeout_s=5.0, pred=None):
        """Returns the first unconsumed event matching pred within timeout_s, or None.
        Consumed events are removed from self.events."""
        deadline = time.monotonic() + timeout_s
        while True:
            for i, ev in enumerate(self.events):
                if pred is None or pred(ev):
                    return self.events.pop(i)
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            try:
                self.read_one(left)
            except socket.timeout:
                return None

    # -- op helpers ----------------------------------------------------
    @staticmethod
    def _result(rep, parse):
        if rep.err != OK:
            return Result(rep.err, None, rep.zxid)
        return Result(OK, parse(rep.body), rep.zxid)

    @staticmethod
    def create_body(path, data=b"", acl=OPEN_ACL, flags=PERSISTENT, ttl=None):
        w = Writer().string(path).buffer(data).acls(acl).int(flags)
        if ttl is not None:
            w.long(ttl)
        return w.bytes()

    def create(self, path, data=b"", acl=OPEN_ACL, flags=PERSISTENT, op="create", ttl=None):
        """op: create (value: path), create2/createContainer/createTTL
        (value: (path, Stat))."""
        if op == "createTTL" and ttl is None:
            raise ValueError("createTTL needs ttl")
        rep = self.call(OP[op], self.create_body(path, data, acl, flags, ttl))
        if op == "create":
            return self._result(rep, lambda r: r.string())
        return self._result(rep, lambda r: (r.string(), r.stat()))

    def delete(self, path, version=-1):
        rep = self.call(OP["delete"], Writer().string(path).int(version).bytes())
        return self._result(rep, lambda r: None)

    def delete_container(self, path):
        rep = self.call(OP["deleteContainer"], Writer().string(path).bytes())
        return self._result(rep, lambda r: None)

    def exists(self, path, watch=False):
        rep = self.call(OP["exists"], Writer().string(path).bool(watch).bytes())
        return self._result(rep, lambda r: r.stat())

    def get_data(self, path, watch=False):
        rep = self.call(OP["getData"], Writer().string(path).bool(watch).bytes())
        return self._result(rep, lambda r: (r.buffer(), r.stat()))

    def set_data(self, path, data, version=-1):
        rep = self.call(OP["setData"], Writer().string(path).buffer(data).int(version).bytes())
        return self._result(rep, lambda r: r.stat())

    def get_acl(self, path):
        rep = self.call(OP["getACL"], Writer().string(path).bytes())
        return self._result(rep, lambda r: (r.acls(), r.stat()))

    def set_acl(self, path, acl, version=-1):
        rep = self.call(OP["setACL"], Writer().string(path).acls(acl).int(version).bytes())
        return self._result(rep, lambda r: r.stat())

    def get_children(self, path, watch=False):
        rep = self.call(OP["getChildren"], Writer().string(path).bool(watch).bytes())
        return self._result(rep, lambda r: r.strings())

    def get_children2(self, path, watch=False):
        rep = self.call(OP["getChildren2"], Writer().string(path).bool(watch).bytes())
        return self._result(rep, lambda r: (r.strings(), r.stat()))

    def get_all_children_number(self, path):
        rep = self.call(OP["getAllChildrenNumber"], Writer().string(path).bytes())
        return self._result(rep, lambda r: r.int())

    def get_ephemerals(self, prefix):
        rep = self.call(OP["getEphemerals"], Writer().string(prefix).bytes())
        return self._result(rep, lambda r: r.strings())

    def sync(self, path):
        rep = self.call(OP["sync"], Writer().string(path).bytes())
        return self._result(rep, lambda r: r.string())

    def check(self, path, version):
        rep = self.call(OP["check"], Writer().string(path).int(version).bytes())
        return self._result(rep, lambda r: None)

    def add_watch(self, path, mode):
        rep = self.call(OP["addWatch"], Writer().string(path).int(mode).bytes())
        return self._result(rep, lambda r: None)

    def check_watches(self, path, wtype):
        rep = self.call(OP["checkWatches"], Writer().string(path).int(wtype).bytes())
        return self._result(rep, lambda r: None)

    def remove_watches(self, path, wtype):
        rep = self.call(OP["removeWatches"], Writer().string(path).int(wtype).bytes())
        return self._result(rep, lambda r: None)

    def set_watches(self, relative_zxid, data=(), exist=(), child=(),
                    persistent=None, recursive=None):
        """setWatches (101), or setWatches2 (105) when persistent/recursive given."""
        w = (Writer().long(relative_zxid).strings(list(data)).strings(list(exist))
             .strings(list(child)))
        op = OP["setWatches"]
        if persistent is not None or recursive is not None:
            w.strings(list(persistent or ())).strings(list(recursive or ()))
            op = OP["setWatches2"]
        rep = self.call(op, w.bytes(), xid=XID_SETWATCHES)
        return Result(rep.err, None, rep.zxid)

    def auth(self, scheme, credential):
        body = Writer().int(0).string(scheme).buffer(credential).bytes()
        rep = self.call(OP["auth"], body, xid=XID_AUTH)
        return Result(rep.err, None, rep.zxid)

    def sasl(self, token, xid=None):
        """One GetSASLRequest (token bytes; None sends a null buffer).
        Returns the Reply; its body is the SetSASLResponse (body.buffer())."""
        return self.call(OP["sasl"], Writer().buffer(token).bytes(), xid=xid)

    def sasl_login(self, username, password, mechanism="DIGEST-MD5"):
        """Logs in as kazoo does, with pure-sasl (only /usr/bin/python3 has
        it): service zookeeper, host zk-sasl-md5, an empty first token.
        Returns the error code of the first reply that is not OK, or OK
        once the client has checked the server's rspauth."""
        from puresasl.client import SASLClient
        cli = SASLClient("zk-sasl-md5", service="zookeeper", mechanism=mechanism,
                         username=username, password=password)
        challenge = None
        for _ in range(8):  # DIGEST-MD5 takes two round trips
            response = cli.process(challenge)
            if cli.complete:
                return OK
            rep = self.sasl(response or b"")
            if rep.err != OK:
                return rep.err
            challenge = rep.body.buffer()
        raise DecodeError("SASL exchange did not complete in 8 round trips")

    def whoami(self):
        rep = self.call(OP["whoAmI"])

        def parse(r):
            n = r.int()
            return [(r.string(), r.string()) for _ in range(n)]
        return self._result(rep, parse)

    def ping(self):
        rep = self.call(OP["ping"], xid=XID_PING)
        return Result(rep.err, None, rep.zxid)

    def close_session(self):
        rep = self.call(OP["closeSession"])
        return Result(rep.err, None, rep.zxid)

    # -- multi ---------------------------------------------------------
    @staticmethod
    def multi_body(ops):
        """ops: tuples ("create", path, data, acl, flags) | ("create2", ...)
        | ("delete", path, version) | ("setData", path, data, version)
        | ("check", path, version) | ("getChildren", path) | ("getData", path)."""
        w = Writer()
        for op in ops:
            kind = op[0]
            w.int(OP[kind]).bool(False).int(-1)
            if kind in ("create", "create2", "createContainer"):
                _, path, data, acl, flags = op
                w.string(path).buffer(data).acls(acl).int(flags)
            elif kind == "createTTL":
                _, path, data, acl, flags, ttl = op
                w.string(path).buffer(data).acls(acl).int(flags).long(ttl)
            elif kind in ("delete", "check"):
                w.string(op[1]).int(op[2])
            elif kind == "setData":
                w.string(op[1]).buffer(op[2]).int(op[3])
            elif kind in ("getChildren", "getData"):
                w.string(op[1]).bool(False)
            else:
                raise ValueError("unsupported multi op %r" % kind)
        w.int(-1).bool(True).int(-1)
        return w.bytes()

    @staticmethod
    def parse_multi_response(r):
        """Returns [(type, err, value)]: type -1 entries carry an ErrorResponse."""
        results = []
        while True:
            mtype, done, merr = r.int(), r.bool(), r.int()
            if done:
                break
            if mtype == -1:
                results.append((-1, r.int(), None))
            elif mtype == OP["create"]:
                results.append((mtype, merr, r.string()))
            elif mtype in (OP["create2"], OP["createContainer"], OP["createTTL"]):
                results.append((mtype, merr, (r.string(), r.stat())))
            elif mtype == OP["setData"]:
                results.append((mtype, merr, r.stat()))
            elif mtype in (OP["delete"], OP["check"]):
                results.append((mtype, merr, None))
            elif mtype == OP["getChildren"]:
                results.append((mtype, merr, r.strings()))
            elif mtype == OP["getData"]:
                results.append((mtype, merr, (r.buffer(), r.stat())))
            else:
                raise DecodeError("unexpected multi result type %d" % mtype)
            if len(results) > 10000:
                raise DecodeError("runaway multi response")
        return results

    def multi(self, ops, op="multi"):
        """Returns Result(header err, [(type, err, value)], zxid). The per-op
        results are parsed whatever the header error is, since a failed multi
        still carries them."""
        rep = self.call(OP[op], self.multi_body(ops))
        body = rep.body
        value = self.parse_multi_response(body) if body.left() else None
        return Result(rep.err, value, rep.zxid)


def connect_raw(port, timeout_ms=10000, **kw):
    c = RawClient(port)
    s = c.connect(timeout_ms=timeout_ms, **kw)
    if s.timeout_ms <= 0:
        c.close()
        raise ConnectionClosed("session refused: %r" % (s,))
    return c


def kazoo_client(port, **kw):
    """A started KazooClient on the server (kazoo only exists for /usr/bin/python3)."""
    from kazoo.client import KazooClient
    kw.setdefault("timeout", 10.0)
    zk = KazooClient(hosts="%s:%d" % (HOST, port), **kw)
    zk.start(timeout=15)
    return zk


def stop_kazoo(zk):
    try:
        zk.stop()
    finally:
        zk.close()


_counter = [0]


def unique_path(prefix="t"):
    """A fresh top-level test path: /<prefix>-<pid>-<n>."""
    _counter[0] += 1
    return "/%s-%d-%d" % (prefix, os.getpid(), _counter[0])


def _crc32c_table():
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC32C = _crc32c_table()


def crc32c(data):
    """CRC-32C (Castagnoli), as base_crc32c: the txn log's and peer frames'."""
    c = 0xFFFFFFFF
    for b in data:
        c = _CRC32C[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def rewrite_txnlog_bytes(data_dir, old, new):
    """Replaces old by new (same length) inside the txn log records under
    data_dir and makes each changed record's CRC fit again, as a fault no
    checksum catches would leave it. Segments: a 16-byte header, then
    records [u32 length][u32 CRC-32C][payload], big-endian (txnlog.h).
    Returns how many records changed. The server must be down."""
    assert len(old) == len(new)
    changed = 0
    for seg in sorted(Path(data_dir).rglob("log.*")):
        buf = bytearray(seg.read_bytes())
        off = 16
        while off + 8 <= len(buf):
            n, _ = struct.unpack_from(">II", buf, off)
            if n == 0 or off + 8 + n > len(buf):
                break
            payload = bytes(buf[off + 8:off + 8 + n])
            if old in payload:
                payload = payload.replace(old, new)
                buf[off + 8:off + 8 + n] = payload
                struct.pack_into(">I", buf, off + 4, crc32c(payload))
                changed += 1
            off += 8 + n
        seg.write_bytes(bytes(buf))
    return changed


def wait_until(pred, timeout_s, interval_s=0.05):
    """Polls pred until truthy or timeout; returns the last value."""
    deadline = time.monotonic() + timeout_s
    value = pred()
    while not value and time.monotonic() < deadline:
        time.sleep(interval_s)
        value = pred()
    return value


class ServerTestCase:
    """Mixin base for unittest.TestCase classes sharing one SUT per class."""

    server_options = {}
    server = None

    @classmethod
    def setUpClass(cls):
        cls.server = Server(**cls.server_options).start()

    @classmethod
    def tearDownClass(cls):
        if cls.server is not None:
            server, cls.server = cls.server, None
            server.stop()
            # A sanitizer build of larchd reports memory errors on stderr;
            # any report fails the class that provoked it.
            report = server.sanitizer_report()
            if report:
                raise AssertionError("sanitizer report from %s:\n%s" % (
                    server.kind, server.stderr_tail(60)))

    def raw(self, **kw):
        c = connect_raw(self.server.port, **kw)
        self.addCleanup(c.close)
        return c

    def kazoo(self, **kw):
        zk = kazoo_client(self.server.port, **kw)
        self.addCleanup(stop_kazoo, zk)
        return zk


class Ensemble:
    """N larchd processes forming one ensemble on 127.0.0.1 (larch only).

    Each member has its own temp dir (data dir with myid, zoo.cfg, stderr
    log), a free client port and a free quorum port; the dirs outlive a
    member's process, so kill()/restart() brings the same server back on its
    data. Timing is short so that elections take well under a second:
    tickTime=tick_ms, syncLimit=sync_limit (election after sync_limit ticks).
    Every process is stopped by PID in stop() (SIGTERM, then SIGKILL).

    proxied=True puts a fault-injecting proxy (faultproxy.FaultProxy) on
    every ordered pair of members: member i's zoo.cfg names member j at the
    port of proxy (i, j), which forwards to j's real quorum port (i's own
    line keeps its real port). Only the higher id of a pair dials (peer_link.c),
    so proxy (j, i) with j < i carries nothing; partition() and the other
    fault methods act on both proxies of a pair, whoever dialled.

    spares=k starts k more servers (ids n+1..n+k) that are no members yet:
    each one's zoo.cfg names the members and itself, the members' name only
    the members, as a server about to join by reconfig is set up. `ids` is
    every server, `members` the first n.

    quorum_hosts={sid: "127.0.0.2", ...} puts members' quorum ports on their
    own loopback addresses (the server.N hosts; clients stay on HOST), as
    quorum TLS needs for certificates that name each member's address.
    """

    def __init__(self, n=3, binary=None, tick_ms=100, sync_limit=5, cfg_lines=(),
                 session_timeout_ms=None, observers=0, proxied=False, spares=0,
                 dynamic_file=False, member_lines=None, quorum_hosts=None):
        self.n = n
        self.quorum_hosts = quorum_hosts or {}
        self.member_lines = member_lines  # sid -> zoo.cfg lines of that member only
        self.spares = spares
        self.dynamic_file = dynamic_file  # server.N lines in <dir>/zoo.cfg.dynamic
        self.proxied = proxied
        self.proxies = {}  # (i, j): the proxy i dials to reach j (proxied only)
        self.observers = observers  # the last `observers` members do not vote
        self.binary = binary or larchd_path()
        self.tick_ms = tick_ms
        self.sync_limit = sync_limit
        self.cfg_lines = list(cfg_lines)
        self.session_timeout_ms = session_timeout_ms
        self.root = None
        self.client_ports = {}
        self.quorum_ports = {}
        self.election_ports = {}
        self.procs = {}
        self.stderr_texts = {}

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    @property
    def ids(self):
        return list(range(1, self.n + self.spares + 1))

    @property
    def members(self):
        return list(range(1, self.n + 1))

    def server_line(self, sid, other):
        """server.N=... for other as sid's zoo.cfg names it."""
        role = ":observer" if self.n - self.observers < other <= self.n else ":participant"
        return "server.%d=%s:%d:%d%s;%s:%d" % (other, self.quorum_host(other),
                                              self.peer_port(sid, other),
                                              self.election_ports[other], role, HOST,
                                              self.client_ports[other])

    def quorum_host(self, sid):
        return self.quorum_hosts.get(sid, HOST)

    def hosts(self, ids=None):
        return ",".join("%s:%d" % (HOST, self.client_ports[i]) for i in (ids or self.ids))

    def dir_of(self, sid):
        return os.path.join(self.root, "s%d" % sid)

    def dynamic_path(self, sid):
        return os.path.join(self.dir_of(sid), "zoo.cfg.dynamic")

    def start(self):
        self.root = tempfile.mkdtemp(prefix="larch-it-ensemble-")
        _LIVE_ENSEMBLES.add(self)
        try:
            for sid in self.ids:
                self.client_ports[sid] = free_port()
                self.quorum_ports[sid] = free_port()
                self.election_ports[sid] = free_port()
            if self.proxied:
                self._start_proxies()
            for sid in self.ids:
                data = os.path.join(self.dir_of(sid), "data")
                os.makedirs(data)
                with open(os.path.join(data, "myid"), "w") as f:
                    f.write("%d\n" % sid)
                lines = self.cfg_text(sid)
                if self.dynamic_file:
                    dyn = self.dynamic_path(sid)
                    with open(dyn, "w") as f:
                        f.write("\n".join(l for l in lines if l.startswith("server.")) + "\n")
                    lines = [l for l in lines if not l.startswith("server.")]
                    lines.append("dynamicConfigFile=%s" % dyn)
                with open(os.path.join(self.dir_of(sid), "zoo.cfg"), "w") as f:
                    f.write("\n".join(lines) + "\n")
            for sid in self.ids:
                self.spawn(sid)
            for sid in self.ids:
                self.wait_serving(sid)
        except BaseException:
            self.stop()
            raise
        return self

    def cfg_text(self, sid):
        lines = ["tickTime=%d" % self.tick_ms, "initLimit=10", "syncLimit=%d" % self.sync_limit,
                 "dataDir=%s" % os.path.join(self.dir_of(sid), "data"),
                 "clientPort=%d" % self.client_ports[sid], "clientPortAddress=%s" % HOST,
                 "4lw.commands.whitelist=*", "znode.container.checkIntervalMs=500",
                 "DigestAuthenticationProvider.superDigest=%s" % SUPER_DIGEST]
        if self.session_timeout_ms:
            lines.append("minSessionTimeout=%d" % self.session_timeout_ms)
        named = self.members + ([sid] if sid > self.n else [])
        for other in named:
            if self.spares:
                lines.append(self.server_line(sid, other))
                continue
            role = ":observer" if other > self.n - self.observers else ""
            lines.append("server.%d=%s:%d:%d%s" % (other, self.quorum_host(other),
                                                   self.peer_port(sid, other),
                                                   self.election_ports[other], role))
        if self.n - self.observers < sid <= self.n:
            lines.append("peerType=observer")
        if self.member_lines:
            lines += self.member_lines(sid)
        return lines + self.cfg_lines

    def spawn(self, sid):
        err = open(os.path.join(self.dir_of(sid), "stderr.log"), "ab")
        with err, open(os.devnull, "wb") as out:
            self.procs[sid] = subprocess.Popen(
                [self.binary, "--config", os.path.join(self.dir_of(sid), "zoo.cfg")],
                stdout=out, stderr=err, stdin=subprocess.DEVNULL, cwd=self.dir_of(sid))

    def wait_serving(self, sid, timeout_s=LARCH_START_TIMEOUT_S):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.procs[sid].poll() is not None:
                raise ServerError("server %d exited with %s:\n%s" % (
                    sid, self.procs[sid].returncode, self.stderr_tail(sid)))
            try:
                if four_letter(self.client_ports[sid], "ruok", timeout_s=1.0) == b"imok":
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise ServerError("server %d not serving within %.0f s:\n%s" % (
            sid, timeout_s, self.stderr_tail(sid)))

    def alive(self, sid):
        p = self.procs.get(sid)
        return p is not None and p.poll() is None

    def kill(self, sid, sig=signal.SIGKILL):
        """Signals a member; SIGKILL/SIGTERM also reap it."""
        p = self.procs[sid]
        if p.poll() is None:
            p.send_signal(sig)
            if sig in (signal.SIGKILL, signal.SIGTERM):
                p.wait(timeout=STOP_TIMEOUT_S)

    def restart(self, sid):
        self.spawn(sid)
        self.wait_serving(sid)

    def state(self, sid):
        """zk_server_state from mntr ("leader", "follower", "looking"...), or
        "down" when the member does not answer."""
        try:
            return self.mntr(sid).get("zk_server_state", "down")
        except OSError:
            return "down"

    def mntr(self, sid, timeout_s=2.0):
        return parse_mntr(four_letter(self.client_ports[sid], "mntr", timeout_s))

    def applied_zxid(self, sid):
        """The last zxid member sid applied (srvr's Zxid line)."""
        text = four_letter(self.client_ports[sid], "srvr").decode()
        m = re.search(r"^Zxid: 0x([0-9a-f]+)$", text, re.M)
        if m is None:
            raise ServerError("member %d: no Zxid in srvr: %r" % (sid, text))
        return int(m.group(1), 16)

    def wait_applied(self, zxid, timeout_s=10.0):
        """Waits until every live member has applied zxid."""
        deadline = time.monotonic() + timeout_s
        behind = [i for i in self.ids if self.alive(i)]
        while behind and time.monotonic() < deadline:
            behind = [i for i in behind if self.applied_zxid(i) < zxid]
            if behind:
                time.sleep(0.01)
        if behind:
            raise ServerError("members %s had not applied 0x%x within %.0f s" % (
                behind, zxid, timeout_s))

    def wait_leader(self, among=None, timeout_s=20.0):
        """The id of the one live leader every listed member follows."""
        among = among or [i for i in self.ids if self.alive(i)]
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            states = {i: self.state(i) for i in among}
            leaders = [i for i, s in states.items() if s == "leader"]
            if len(leaders) == 1 and all(s in ("leader", "follower", "observer")
                                         for s in states.values()):
                ids = {int(self.mntr(i).get("zk_larch_leader_id", "0")) for i in among}
                if ids == {leaders[0]}:
                    return leaders[0]
            time.sleep(0.05)
        raise ServerError("no single leader among %s within %.0f s: %s" % (
            among, timeout_s, {i: self.state(i) for i in among}))

    def stderr_tail(self, sid, lines=30):
        try:
            with open(os.path.join(self.dir_of(sid), "stderr.log"), "rb") as f:
                text = f.read().decode("utf-8", "replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def sanitizer_report(self):
        out = []
        for sid in self.ids:
            out += ["server %d: %s" % (sid, l) for l in self.stderr_texts.get(sid, "").splitlines()
                    if any(m in l for m in SANITIZER_MARKERS)]
        return out

    def stop(self):
        """Stops every member by PID (continuing stopped ones first) and
        removes the dirs; keeps each member's stderr in stderr_texts."""
        for sid, p in self.procs.items():
            if p.poll() is None:
                try:
                    p.send_signal(signal.SIGCONT)
                    p.send_signal(signal.SIGTERM)
                    p.wait(timeout=STOP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(timeout=STOP_TIMEOUT_S)
        if self.root is not None:
            for sid in self.ids:
                path = os.path.join(self.dir_of(sid), "stderr.log")
                try:
                    with open(path, "rb") as f:
                        self.stderr_texts[sid] = f.read().decode("utf-8", "replace")
                except OSError:
                    pass
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None
        errors = self._close_proxies()
        _LIVE_ENSEMBLES.discard(self)
        if errors:
            raise ServerError("proxies did not close: %s" % errors)

    # -- faults between members (proxied=True) -------------------------------
    def peer_port(self, sid, other):
        """The port member sid's zoo.cfg names for member other."""
        if self.proxied and other != sid:
            return self.proxies[(sid, other)].port
        return self.quorum_ports[other]

    def _start_proxies(self):
        from faultproxy import FaultProxy
        # the members' ports are picked, not yet bound: a proxy must not get one
        taken = (set(self.client_ports.values()) | set(self.quorum_ports.values()) |
                 set(self.election_ports.values()))
        for i in self.ids:
            for j in self.ids:
                if i == j:
                    continue
                for _ in range(20):
                    proxy = FaultProxy(self.quorum_ports[j], name="%d->%d" % (i, j))
                    if proxy.port not in taken:
                        break
                    proxy.close()
                else:
                    raise ServerError("no proxy port apart from the members' ports")
                taken.add(proxy.port)
                self.proxies[(i, j)] = proxy

    def _close_proxies(self):
        proxies, self.proxies = self.proxies, {}
        errors = []
        for proxy in proxies.values():
            try:
                proxy.close()
            except Exception as e:  # noqa: BLE001 - every proxy gets closed
                errors.append(repr(e))
        return errors

    def _pair_proxies(self, a, b):
        if not self.proxied:
            raise ServerError("link faults need Ensemble(proxied=True)")
        return [self.proxies[(a, b)], self.proxies[(b, a)]]

    def links(self, sid):
        """Live peer connections through the proxies of sid's pairs, by peer."""
        return {o: sum(p.connections() for p in self._pair_proxies(sid, o))
                for o in self.ids if o != sid}

    def partition(self, group_a, group_b, mode="cut"):
        """No member of group_a hears any of group_b, nor the other way.
        mode "cut": links reset and refused; "blackhole": links stay up and
        go silent (held bytes arrive after heal()). Returns time.monotonic()
        once every proxy involved applied it."""
        for a in group_a:
            for b in group_b:
                for proxy in self._pair_proxies(a, b):
                    if mode == "cut":
                        proxy.cut()
                    elif mode == "blackhole":
                        proxy.blackhole()
                    else:
                        raise ValueError("mode must be cut or blackhole, not %r" % (mode,))
        return time.monotonic()

    def isolate(self, sid, mode="cut"):
        """Partitions sid from every other member."""
        return self.partition([sid], [o for o in self.ids if o != sid], mode)

    def one_way(self, senders, receivers):
        """What members in senders send to members in receivers is silently
        dropped (held); the other direction still flows."""
        for s in senders:
            for r in receivers:
                self._pair_proxies(s, r)
                self.proxies[(s, r)].blackhole("up")    # s dialled r: s's bytes go up
                self.proxies[(r, s)].blackhole("down")  # r dialled s: s's bytes come down
        return time.monotonic()

    def delay(self, group_a, group_b, seconds):
        """Every byte between the two groups (both ways) arrives seconds late."""
        for a in group_a:
            for b in group_b:
                for proxy in self._pair_proxies(a, b):
                    proxy.delay(seconds)
        return time.monotonic()

    def heal(self):
        """Every link forwards again. Returns time.monotonic() after."""
        for proxy in self.proxies.values():
            proxy.heal()
        return time.monotonic()

    def pause(self, sid):
        """SIGSTOP: the member holds its state and answers nothing."""
        self.kill(sid, signal.SIGSTOP)

    def resume(self, sid):
        self.kill(sid, signal.SIGCONT)


_LIVE_ENSEMBLES = set()
