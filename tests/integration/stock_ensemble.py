"""A stock ZooKeeper N-server ensemble on 127.0.0.1, for the tests.

Debian's ZooKeeper (QuorumPeerMain on the package's jars, the classpath from
zkEnv.sh as harness.zookeeper_classpath finds it), N JVMs in the foreground
so that this module owns their PIDs. Each member has its own temp dir: zoo.cfg,
dataDir with myid, stderr log. The server.N lines name 127.0.0.1 with a free
quorum port and a free election port per member; forceSync stays as shipped
(yes). As for harness.Server's standalone ZooKeeper: TTL nodes on, the
container reaper every 500 ms, the test superDigest.

    with StockEnsemble(n=3) as zk:
        KazooClient(hosts=zk.hosts())          # every member
        KazooClient(hosts=zk.hosts([2]))       # member 2 only
        zk.client_ports[1], zk.leader(), zk.state(3)

start() returns once every member says "Mode: leader|follower" (srvr) and
accepts a real session (ZooKeeper answers ruok before it serves); every wait
is bounded. stop() stops every member by PID: SIGTERM, then SIGKILL after
harness.STOP_TIMEOUT_S. run_tests.py's signal handler stops a live ensemble
too (it joins harness's list of live ensembles).
"""

import os
import shutil
import signal
import subprocess
import tempfile
import time

import harness
from harness import (HOST, STOP_TIMEOUT_S, SUPER_DIGEST, ZK_JAVA, ConnectionClosed,
                     DecodeError, RawClient, ServerError, four_letter, free_port,
                     parse_mntr, zookeeper_classpath)

# Three JVMs on a busy two-core box, then an election: allow a minute.
START_TIMEOUT_S = 60.0
SERVING_MODES = ("leader", "follower", "observer")
START_ATTEMPTS = 3


class MemberExited(ServerError):
    """A member's JVM exited before the ensemble served."""


def srvr_mode(port, timeout_s=1.0):
    """The "Mode:" line of srvr ("leader", "follower", "standalone"), or None
    when the member does not serve (ZooKeeper then answers "This ZooKeeper
    instance is not currently serving requests")."""
    text = four_letter(port, "srvr", timeout_s=timeout_s).decode("utf-8", "replace")
    for line in text.splitlines():
        if line.startswith("Mode:"):
            return line.split(":", 1)[1].strip()
    return None


def session_ok(port, timeout_s=2.0):
    """A real session on the member: ConnectRequest answered with a positive
    timeout (in an ensemble that is a createSession the leader committed),
    then closeSession."""
    with RawClient(port, timeout_s=timeout_s) as c:
        if c.connect(timeout_ms=10000).timeout_ms <= 0:
            return False
        return c.close_session().err == 0


class StockEnsemble:
    """N stock ZooKeeper servers (QuorumPeerMain) forming one ensemble.

    tick_ms/init_limit/sync_limit go to every zoo.cfg; cfg_lines are appended
    verbatim. heap and jvm_args shape each JVM (default: small heap, C1-only
    JIT, which starts fastest). wrap is an argv prefix for every member (e.g.
    ["taskset", "-c", "1"]).
    """

    def __init__(self, n=3, tick_ms=2000, init_limit=10, sync_limit=5, cfg_lines=(),
                 heap="256m", jvm_args=None, wrap=(), start_timeout_s=START_TIMEOUT_S):
        if n < 1:
            raise ValueError("n must be >= 1")
        self.n = n
        self.tick_ms = tick_ms
        self.init_limit = init_limit
        self.sync_limit = sync_limit
        self.cfg_lines = list(cfg_lines)
        self.heap = heap
        self.jvm_args = list(jvm_args) if jvm_args is not None else [
            "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]
        self.wrap = list(wrap)
        self.start_timeout_s = start_timeout_s
        self.root = None
        self.client_ports = {}
        self.quorum_ports = {}
        self.election_ports = {}
        self.procs = {}
        self.stderr_texts = {}

    def __enter__(self):
        # StockEnsemble(...).start() may come first: never start twice
        return self if self.root is not None else self.start()

    def __exit__(self, *exc):
        self.stop()
        return False

    @property
    def ids(self):
        return list(range(1, self.n + 1))

    @property
    def pids(self):
        return {sid: p.pid for sid, p in self.procs.items()}

    def hosts(self, ids=None):
        """Connect string of the listed members (default: all)."""
        return ",".join("%s:%d" % (HOST, self.client_ports[i]) for i in (ids or self.ids))

    def dir_of(self, sid):
        return os.path.join(self.root, "s%d" % sid)

    # -- start -----------------------------------------------------------
    def start(self):
        """Starts every member and waits until all serve. A member that exits
        during startup (a free port taken by another process meanwhile:
        ZooKeeper's logging is off, so the reason is not shown) makes it start
        over on fresh ports, up to START_ATTEMPTS times."""
        for attempt in range(1, START_ATTEMPTS + 1):
            try:
                return self._start_once()
            except MemberExited:
                if attempt == START_ATTEMPTS:
                    raise
        return self

    def _start_once(self):
        self.procs = {}
        self.root = tempfile.mkdtemp(prefix="larch-it-zk-ensemble-")
        harness._LIVE_ENSEMBLES.add(self)
        try:
            for sid in self.ids:
                self.client_ports[sid] = free_port()
                self.quorum_ports[sid] = free_port()
                self.election_ports[sid] = free_port()
            if len(set(self.client_ports.values()) | set(self.quorum_ports.values())
                   | set(self.election_ports.values())) != 3 * self.n:
                raise ServerError("free_port handed out one port twice; try again")
            for sid in self.ids:
                data = os.path.join(self.dir_of(sid), "data")
                os.makedirs(data)
                with open(os.path.join(data, "myid"), "w") as f:
                    f.write("%d\n" % sid)
                with open(self.cfg_path(sid), "w") as f:
                    f.write("\n".join(self.cfg_text(sid)) + "\n")
            for sid in self.ids:
                self.spawn(sid)
            self.wait_serving(timeout_s=self.start_timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def cfg_path(self, sid):
        return os.path.join(self.dir_of(sid), "zoo.cfg")

    def cfg_text(self, sid):
        lines = ["tickTime=%d" % self.tick_ms, "initLimit=%d" % self.init_limit,
                 "syncLimit=%d" % self.sync_limit,
                 "dataDir=%s" % os.path.join(self.dir_of(sid), "data"),
                 "clientPort=%d" % self.client_ports[sid], "clientPortAddress=%s" % HOST,
                 "4lw.commands.whitelist=*", "admin.enableServer=false",
                 "maxClientCnxns=0"]
        for other in self.ids:
            lines.append("server.%d=%s:%d:%d" % (other, HOST, self.quorum_ports[other],
                                                 self.election_ports[other]))
        return lines + self.cfg_lines

    def argv(self, sid):
        return self.wrap + [
            ZK_JAVA, "-Xms" + self.heap, "-Xmx" + self.heap] + self.jvm_args + [
            "-Dzookeeper.admin.enableServer=false",
            "-Dzookeeper.DigestAuthenticationProvider.superDigest=" + SUPER_DIGEST,
            "-Dzookeeper.extendedTypesEnabled=true", "-Dznode.container.checkIntervalMs=500",
            "-cp", zookeeper_classpath(),
            "org.apache.zookeeper.server.quorum.QuorumPeerMain", self.cfg_path(sid)]

    def spawn(self, sid):
        err = open(os.path.join(self.dir_of(sid), "stderr.log"), "ab")
        with err, open(os.devnull, "wb") as out:
            self.procs[sid] = subprocess.Popen(self.argv(sid), stdout=out, stderr=err,
                                               stdin=subprocess.DEVNULL, cwd=self.dir_of(sid))

    def wait_serving(self, ids=None, timeout_s=START_TIMEOUT_S):
        """Waits until every listed member serves: a leader/follower mode in
        srvr and a session it accepts. Raises ServerError after timeout_s."""
        pending = list(ids or self.ids)
        deadline = time.monotonic() + timeout_s
        while pending and time.monotonic() < deadline:
            for sid in list(pending):
                if self.procs[sid].poll() is not None:
                    raise MemberExited("zookeeper %d exited with %s:\n%s" % (
                        sid, self.procs[sid].returncode, self.stderr_tail(sid)))
                try:
                    if (srvr_mode(self.client_ports[sid]) in SERVING_MODES
                            and session_ok(self.client_ports[sid])):
                        pending.remove(sid)
                except (OSError, ConnectionClosed, DecodeError):
                    pass
            if pending:
                time.sleep(0.1)
        if pending:
            raise ServerError("zookeeper members %s not serving within %.0f s: %s\n%s" % (
                pending, timeout_s, {i: self.state(i) for i in self.ids},
                "\n".join("-- %d:\n%s" % (i, self.stderr_tail(i)) for i in pending)))

    # -- state -------------------------------------------------------------
    def alive(self, sid):
        p = self.procs.get(sid)
        return p is not None and p.poll() is None

    def state(self, sid):
        """"leader", "follower", ... from srvr; "down" when it does not answer,
        "not serving" while it has no quorum."""
        try:
            return srvr_mode(self.client_ports[sid]) or "not serving"
        except OSError:
            return "down"

    def leader(self):
        """The id of the member that says it leads (None if none does)."""
        leaders = [sid for sid in self.ids if self.state(sid) == "leader"]
        return leaders[0] if len(leaders) == 1 else None

    def followers(self):
        return [sid for sid in self.ids if self.state(sid) == "follower"]

    def mntr(self, sid, timeout_s=2.0):
        return parse_mntr(four_letter(self.client_ports[sid], "mntr", timeout_s))

    def stderr_tail(self, sid, lines=30):
        try:
            with open(os.path.join(self.dir_of(sid), "stderr.log"), "rb") as f:
                text = f.read().decode("utf-8", "replace")
        except (OSError, TypeError):
            text = self.stderr_texts.get(sid, "")
        return "\n".join(text.splitlines()[-lines:])

    # -- stop ----------------------------------------------------------------
    def kill(self, sid, sig=signal.SIGKILL):
        """Signals one member by PID; SIGKILL/SIGTERM also reap it."""
        p = self.procs[sid]
        if p.poll() is None:
            p.send_signal(sig)
            if sig in (signal.SIGKILL, signal.SIGTERM):
                p.wait(timeout=STOP_TIMEOUT_S)

    def stop(self):
        """SIGTERM to every member (all first, then wait), SIGKILL to those
        still alive after STOP_TIMEOUT_S; keeps stderr in stderr_texts and
        removes the dirs."""
        live = [p for p in self.procs.values() if p.poll() is None]
        for p in live:
            try:
                p.send_signal(signal.SIGCONT)
                p.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for p in live:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=STOP_TIMEOUT_S)
        if self.root is not None:
            for sid in self.ids:
                try:
                    with open(os.path.join(self.dir_of(sid), "stderr.log"), "rb") as f:
                        self.stderr_texts[sid] = f.read().decode("utf-8", "replace")
                except OSError:
                    pass
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None
        harness._LIVE_ENSEMBLES.discard(self)
