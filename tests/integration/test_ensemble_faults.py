"""Fault tests of larchd ensembles with real processes (issue 9): partitions
through a fault-injecting TCP proxy between every pair of members (cut,
one-way, bridge, blackhole), SIGSTOP/SIGCONT and SIGKILL of leaders and
followers, while clients write, compare-and-set and read: kazoo, and in
two scenarios liblarch too (larch-cli in its interactive --json mode, env
LARCH_CLI or <repo>/build/client/cli/larch-cli; left out if not built).

What every scenario checks, from the clients' side:
  - no acknowledged write is lost: every acknowledged create is on every
    member afterwards, and each register's history (read = sync + getData,
    write = setData, CAS = setData with a version) is linearizable under
    linearize.py, including reads of every member after the faults;
  - members converge: equal last zxid, equal tree digest at the same zxid
    (mntr zk_larch_digest / zk_larch_digest_zxid), and equal trees (data
    and Stat of every znode, read from each member after a sync);
  - a leader cut off from its quorum acknowledges nothing: no write or sync
    its clients started during the partition succeeds before the heal.
Plus sessions across a leader failover (ephemerals go only on expiry or
close) and regressions for ZOOKEEPER-3911 (an acknowledged write is on a
quorum's disks: a follower that caught up from the leader keeps what it
acknowledged through a crash of every member) and ZOOKEEPER-2845 (entries an
old leader logged but never committed are not applied on restart, and are
truncated when it rejoins), and for a follower that answers a request
with the result of an earlier request of the same session and xid that it
had already given up on.

The first two classes (the checker and the proxy) need no server.
FAULTS_VERBOSE=1 prints the workload seed, the history's size, each key's
check and the members' digests.
Every process is started and stopped by PID (harness.Ensemble), every wait
and loop is bounded.
"""

import collections
import hashlib
import json
import os
import random
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
import unittest

import linearize as lin
from faultproxy import DOWN, UP, FaultProxy
from harness import (HOST, OK, OP, REPO_ROOT, ConnectionClosed, Ensemble, RawClient,
                     ServerError, Writer, err_name, sut_kind, wait_until)

try:
    from kazoo.client import KazooClient
    from kazoo.exceptions import (BadVersionError, KazooException, NodeExistsError,
                                  NoNodeError)
    from kazoo.handlers.threading import KazooTimeoutError
except ImportError:  # only /usr/bin/python3 has kazoo; the checker tests need none
    KazooClient = None

VERBOSE = os.environ.get("FAULTS_VERBOSE") == "1"
OP_TIMEOUT_S = 3.0        # a client op unanswered this long has an unknown outcome
SESSION_TIMEOUT_S = 10.0  # workers' sessions outlive every partition here
CONNECT_TIMEOUT_S = 5.0
WAIT_S = 20.0             # bound of every wait for an election, progress, convergence
PACE_S = 0.002            # between one worker's ops: clients must not starve 2 cores
CFG = ["maxSessionTimeout=20000"]
KEYS = ["/reg/k%d" % i for i in range(3)]
WRITES_ONLY = {"write": 0.4, "cas": 0.4, "create": 0.2}
INIT = (b"init", 0)


def log(*args):
    if VERBOSE:
        print("  [faults]", *args, file=sys.stderr, flush=True)


# ---- clients ------------------------------------------------------------------
def make_client(hosts, timeout=SESSION_TIMEOUT_S, start_timeout=CONNECT_TIMEOUT_S):
    """A started kazoo client, or None when no member gave it a session in time."""
    c = KazooClient(hosts=hosts, timeout=timeout,
                    connection_retry={"max_tries": -1, "delay": 0.05, "max_delay": 0.5})
    try:
        c.start(timeout=start_timeout)
        return c
    except KazooTimeoutError:
        stop_client(c)
        return None


def need_client(hosts, **kw):
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        c = make_client(hosts, **kw)
        if c is not None:
            return c
    raise ServerError("no session from %s within %.0f s" % (hosts, WAIT_S))


def stop_client(c):
    try:
        c.stop()
    except Exception:  # noqa: BLE001 - best effort
        pass
    try:
        c.close()
    except Exception:  # noqa: BLE001
        pass


def sync_get(c, path, timeout=OP_TIMEOUT_S):
    c.sync_async(path).get(timeout=timeout)
    return c.get_async(path).get(timeout=timeout)


# ---- clients behind one interface: kazoo, and liblarch through larch-cli -------
class Refused(Exception):
    """BADVERSION: the op definitely did not take effect."""


class Unknown(Exception):
    """Connection loss, timeout, expiry: the op may or may not take effect."""


class KazooOps:
    """The workload's ops through kazoo. gen() changes whenever the
    connection's state does."""

    kind = "kazoo"

    def __init__(self, hosts):
        self.gen_ = 0
        self.c = make_client(hosts)
        if self.c is None:
            raise Unknown("no session")

        def listener(state):
            self.gen_ += 1
        self.c.add_listener(listener)

    def gen(self):
        return self.gen_

    def _do(self, fn):
        try:
            return fn().get(timeout=OP_TIMEOUT_S)
        except BadVersionError:
            raise Refused()
        except (NoNodeError, NodeExistsError):
            raise
        except (KazooException, KazooTimeoutError) as e:
            raise Unknown(repr(e))

    def create(self, path, value):
        self._do(lambda: self.c.create_async(path, value))

    def set(self, key, value, version):
        return self._do(lambda: self.c.set_async(key, value, version)).version

    def read(self, key):
        self._do(lambda: self.c.sync_async(key))
        data, stat = self._do(lambda: self.c.get_async(key))
        return data, stat.version

    def close(self):
        stop_client(self.c)

    def usable(self):
        return True


def larch_cli_path():
    return os.environ.get("LARCH_CLI", str(REPO_ROOT / "build" / "client" / "cli" / "larch-cli"))


class CliOps:
    """The workload's ops through liblarch: one larch-cli process in its
    interactive mode (--json: one line per result, flushed), fed commands on
    stdin. A command unanswered in time leaves the process out of step, so
    it is killed (by PID) and the op's outcome is unknown."""

    kind = "liblarch"

    def __init__(self, hosts):
        self.events = 0
        self.buf = b""
        self.dead = False
        self.p = subprocess.Popen([larch_cli_path(), "-server", hosts, "--json", "--timeout",
                                   str(int(SESSION_TIMEOUT_S * 1000))],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL)
        try:
            self._cmd("sync /", CONNECT_TIMEOUT_S)  # connected, with a session
        except BaseException:
            self.close()
            raise

    def gen(self):
        return self.events

    def usable(self):
        return not self.dead

    def _line(self, deadline):
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            r, _, _ = select.select([self.p.stdout], [], [], left)
            if not r:
                return None
            chunk = os.read(self.p.stdout.fileno(), 65536)
            if not chunk:
                return None  # it exited
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line

    def _cmd(self, line, timeout_s=OP_TIMEOUT_S + 2.0):
        """The JSON result of one command (events before it are counted)."""
        if self.dead:
            raise Unknown("larch-cli is gone")
        try:
            self.p.stdin.write(line.encode() + b"\n")
            self.p.stdin.flush()
        except OSError as e:
            self.dead = True
            raise Unknown(repr(e))
        deadline = time.monotonic() + timeout_s
        for _ in range(1000):
            raw = self._line(deadline)
            if raw is None:
                self.dead = True
                raise Unknown("no answer to %r" % line)
            out = json.loads(raw)
            if "cmd" in out:
                break
            self.events += 1  # a session event: the connection moved or dropped
        else:
            self.dead = True
            raise Unknown("no result among 1000 lines")
        err = out.get("error")
        if err == "BADVERSION":
            raise Refused()
        if err in ("NONODE", "NODEEXISTS"):
            raise AssertionError("larch-cli %r: %r" % (line, out))
        if err:
            raise Unknown(err)
        return out

    def create(self, path, value):
        self._cmd("create %s %s" % (path, value.decode()))

    def set(self, key, value, version):
        return self._cmd("set -v %d %s %s" % (version, key, value.decode()))["stat"]["dataVersion"]

    def read(self, key):
        self._cmd("sync %s" % key)
        out = self._cmd("get -s %s" % key)
        return out["data"].encode(), out["stat"]["dataVersion"]

    def close(self):
        if self.p.poll() is None and not self.dead:
            try:
                self.p.stdin.close()  # at EOF it closes its session and exits
            except OSError:
                pass
            try:
                self.p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        if self.p.poll() is None:  # out of step, or not exiting: by PID
            self.p.kill()
            self.p.wait(timeout=10)
        for f in (self.p.stdin, self.p.stdout):
            try:
                f.close()
            except OSError:
                pass


# ---- the workload: registers, CAS and unique creates ---------------------------
class Worker:
    def __init__(self, name, hosts, member, seed, mix, client):
        self.name, self.hosts, self.member = name, hosts, member
        self.rng = random.Random(seed)
        self.mix = mix
        self.client = client  # KazooOps or CliOps
        self.n = 0
        self.versions = {}  # key -> the last version this worker saw


class Workload:
    """Worker threads, each with its own client and session, recording a
    history.

    ops: linearize.Op for the registers (process = worker name);
    creates: (worker, member, path, status, invoke, complete) of unique znodes
    under /acked. A worker bound to one member (hosts = that member) shows
    what that member acknowledges.
    """

    MIX = {"read": 0.35, "write": 0.2, "cas": 0.3, "create": 0.15}

    def __init__(self, ens, keys=KEYS, seed=0):
        self.ens = ens
        self.keys = list(keys)
        self.seed = seed
        self.ops = []
        self.creates = []
        self.ended = []  # (member, time) of every op's end, whatever its outcome
        self.errors = []
        self.workers = []
        self.threads = []
        self.stop_event = threading.Event()
        self.members = {}  # worker name -> member id (or None)

    def setup(self):
        c = need_client(self.ens.hosts())
        try:
            c.ensure_path("/acked")
            for k in self.keys:
                c.create(k, INIT[0], makepath=True)
        finally:
            stop_client(c)

    def add(self, member=None, hosts=None, mix=None, client=KazooOps):
        tag = "c" if client is CliOps else "w"
        name = "%s%d%s" % (tag, len(self.workers), "" if member is None else "@%d" % member)
        hosts = hosts or (self.ens.hosts([member]) if member else self.ens.hosts())
        w = Worker(name, hosts, member, self.seed * 1000 + len(self.workers), mix or self.MIX,
                   client)
        self.workers.append(w)
        self.members[name] = member
        return w

    def start(self):
        for w in self.workers:
            t = threading.Thread(target=self._run, args=(w,), name="worker " + w.name,
                                 daemon=True)
            self.threads.append(t)
            t.start()

    def halt(self, timeout_s=40.0):
        """Stops the workers (each closes its session) and waits for them."""
        self.stop_event.set()
        deadline = time.monotonic() + timeout_s
        for t in self.threads:
            t.join(timeout=max(0.1, deadline - time.monotonic()))
        alive = [t.name for t in self.threads if t.is_alive()]
        if alive:
            raise AssertionError("workers still running after %.0f s: %s" % (timeout_s, alive))

    # -- counting ------------------------------------------------------------
    def acked(self, since=None, members=None, kinds=("write", "cas", "create")):
        """Acknowledged writes that completed after `since`, by workers bound
        to `members` (None: any worker)."""
        n = 0
        for o in list(self.ops):
            if (o.kind in kinds and o.status == lin.OK and (since is None or o.complete > since)
                    and (members is None or self.members[o.process] in members)):
                n += 1
        if "create" in kinds:
            for (wname, member, _p, status, _i, complete) in list(self.creates):
                if (status == lin.OK and (since is None or complete > since)
                        and (members is None or member in members)):
                    n += 1
        return n

    def attempts(self, member, since):
        """Ops (any outcome) by workers bound to member, ended after since."""
        return sum(1 for m, t in list(self.ended) if m == member and t > since)

    def acked_creates(self):
        return sorted(c[2] for c in self.creates if c[3] == lin.OK)

    def by_client(self):
        """{client kind: acknowledged ops}"""
        kinds = {w.name: w.client.kind for w in self.workers}
        out = collections.Counter(kinds.get(o.process, "final") for o in self.ops
                                  if o.status == lin.OK)
        out.update(kinds[c[0]] for c in self.creates if c[3] == lin.OK)
        return dict(out)

    # -- the worker loop -----------------------------------------------------
    def _run(self, w):
        c = None
        try:
            while not self.stop_event.is_set():
                if c is None or not c.usable():
                    if c is not None:
                        c.close()
                        c = None
                    try:
                        c = w.client(w.hosts)
                    except Unknown:
                        self.stop_event.wait(0.1)
                        continue
                ok = self._one(w, c)
                self.ended.append((w.member, time.monotonic()))
                self.stop_event.wait(PACE_S if ok else 0.02)
        except Exception:  # noqa: BLE001 - reported by the test
            self.errors.append("%s: %s" % (w.name, traceback.format_exc()))
        finally:
            if c is not None:
                c.close()

    def _pick(self, w):
        r, acc = w.rng.random(), 0.0
        for kind, p in w.mix.items():
            acc += p
            if r < acc:
                return kind
        return "read"

    def _one(self, w, c):
        """One operation; False when it did not succeed."""
        kind = self._pick(w)
        key = w.rng.choice(self.keys)
        w.n += 1
        value = ("%s-%d" % (w.name, w.n)).encode()
        t0 = time.monotonic()
        if kind == "create":
            path = "/acked/%s-%d" % (w.name.replace("@", "_"), w.n)
            try:
                c.create(path, value)
            except NodeExistsError:
                raise AssertionError("%s: %s already exists: it was never sent before" % (
                    w.name, path))
            except Unknown:
                self.creates.append((w.name, w.member, path, lin.INFO, t0, None))
                return False
            except Refused:
                raise AssertionError("%s: create %s was answered BADVERSION, which only a "
                                     "setData can get: another request's reply" % (w.name, path))
            self.creates.append((w.name, w.member, path, lin.OK, t0, time.monotonic()))
            return True
        if kind == "read":
            gen = c.gen()
            try:
                data, version = c.read(key)
            except Unknown:
                return False  # a read that failed says nothing
            t1 = time.monotonic()
            if gen != c.gen():
                return True  # the connection moved between sync and get: not one read
            w.versions[key] = version
            self.ops.append(lin.Op(w.name, key, lin.READ, None, lin.OK, (data, version), t0, t1))
            return True
        if kind == "write":
            version, op_kind, op_value = -1, lin.WRITE, value
        else:
            version = w.versions.get(key, 0)
            op_kind, op_value = lin.CAS, (version, value)
        try:
            new_version = c.set(key, value, version)
        except Refused:
            self.ops.append(lin.Op(w.name, key, lin.CAS, op_value, lin.FAIL, None, t0,
                                   time.monotonic()))
            w.versions.pop(key, None)
            return False
        except Unknown:
            self.ops.append(lin.Op(w.name, key, op_kind, op_value, lin.INFO, None, t0, None))
            return False
        t1 = time.monotonic()
        w.versions[key] = new_version
        self.ops.append(lin.Op(w.name, key, op_kind, op_value, lin.OK, new_version, t0, t1))
        return True

    # -- after the faults ----------------------------------------------------
    def final_reads(self, ids):
        """Reads every register through every listed member (recorded as ops)."""
        self.members.update({"final@%d" % sid: sid for sid in ids})
        for sid in ids:
            c = need_client(self.ens.hosts([sid]))
            try:
                for key in self.keys:
                    t0 = time.monotonic()
                    data, stat = sync_get(c, key, timeout=10.0)
                    self.ops.append(lin.Op("final@%d" % sid, key, lin.READ, None, lin.OK,
                                           (data, stat.version), t0, time.monotonic()))
            finally:
                stop_client(c)

    def summary(self):
        by = collections.Counter((o.kind, o.status) for o in self.ops)
        cr = collections.Counter(c[3] for c in self.creates)
        return "ops %s creates %s by client %s" % (dict(by), dict(cr), self.by_client())


# ---- convergence ------------------------------------------------------------------
def dump_tree(ens, sid, root="/"):
    """{path: (data, stat)} of every znode below root (except /zookeeper), as
    member sid serves it after a sync."""
    c = need_client(ens.hosts([sid]))
    try:
        c.sync_async(root).get(timeout=10.0)
        out, todo = {}, [root]
        while todo:
            if len(out) > 100000:
                raise AssertionError("runaway tree on server %d" % sid)
            path = todo.pop()
            if path == "/zookeeper":
                continue
            try:
                data, stat = c.get_async(path).get(timeout=10.0)
                kids = c.get_children_async(path).get(timeout=10.0)
            except NoNodeError:
                continue  # an ephemeral that went meanwhile
            out[path] = (data, tuple(stat))
            todo += [(path.rstrip("/") + "/" + k) for k in kids]
        return out
    finally:
        stop_client(c)


def tree_sha(tree):
    """A short hash of a dumped tree, for log lines."""
    h = hashlib.sha256()
    for path in sorted(tree):
        data, stat = tree[path]
        h.update(repr((path, data, stat)).encode())
    return h.hexdigest()[:16]


def zxids(ens, ids):
    out = {}
    for sid in ids:
        try:
            m = ens.mntr(sid)
            out[sid] = (m.get("zk_larch_last_zxid"), m.get("zk_larch_commit_zxid"))
        except OSError:
            out[sid] = None
    return out


def digests(ens, ids):
    """{sid: (digest zxid, digest)} from mntr (zk_larch_digest*, published
    between applies so the pair is exact), or None if this larchd has none."""
    out = {}
    for sid in ids:
        m = ens.mntr(sid)
        if "zk_larch_digest" not in m:
            return None
        out[sid] = (m.get("zk_larch_digest_zxid"), m["zk_larch_digest"])
    return out


def wait_same_zxid(ens, ids, timeout_s=WAIT_S):
    """Waits until every listed member has committed and applied the same log."""
    def same():
        z = zxids(ens, ids)
        vals = set(z.values())
        return len(vals) == 1 and None not in vals and all(a == b for a, b in vals)
    return wait_until(same, timeout_s, 0.1)


# ---- checks shared by the scenarios -------------------------------------------------
class FaultCase(unittest.TestCase):

    def setUp(self):
        if KazooClient is None:
            self.skipTest("kazoo is only in /usr/bin/python3")
        self.ens = None
        self.load = None

    def tearDown(self):
        if self.load is not None:
            self.load.stop_event.set()
            for t in self.load.threads:
                t.join(timeout=30)
        if self.ens is not None:
            self.ens.stop()
            self.assertEqual(self.ens.sanitizer_report(), [])

    def start(self, n=3, **kw):
        kw.setdefault("cfg_lines", CFG)
        self.ens = Ensemble(n=n, **kw)
        self.ens.start()
        return self.ens.wait_leader()

    def workload(self, per_member=1, all_hosts=0, cli_members=(), seed=None, mix=None,
                 mixes=None):
        """Starts kazoo workers (per_member bound to each member, all_hosts
        free to move) and liblarch workers (larch-cli) bound to cli_members
        when larch-cli is built. mixes: {member: mix} for its bound workers."""
        if seed is None:
            seed = int(os.environ.get("FAULTS_SEED") or random.randrange(1 << 30))
        log("workload seed", seed)
        self.load = Workload(self.ens, seed=seed)
        self.load.setup()
        for sid in self.ens.ids:
            for _ in range(per_member):
                self.load.add(member=sid, mix=(mixes or {}).get(sid, mix))
        for _ in range(all_hosts):
            self.load.add(mix=mix)
        if cli_members and os.access(larch_cli_path(), os.X_OK):
            for sid in cli_members:
                self.load.add(member=sid, mix=mix, client=CliOps)
        elif cli_members:
            log("no larch-cli at %s: kazoo only" % larch_cli_path())
        self.load.start()
        return self.load

    def wait_acked(self, n, since=None, members=None, what="acknowledged writes"):
        base = self.load.acked(since=since, members=members)
        ok = wait_until(lambda: self.load.acked(since=since, members=members) >= n, WAIT_S, 0.05)
        self.assertTrue(ok, "%s: %d of %d within %.0f s (members %s; %s)" % (
            what, self.load.acked(since=since, members=members), n, WAIT_S, members,
            zxids(self.ens, self.ens.ids)))
        return base

    def pending_failed(self, sid):
        return self.ens.mntr(sid).get("zk_larch_pending_failed", 0)

    def wait_forwards_failed(self, sid, n):
        """Waits until member sid has given up on n more of its clients'
        writes (a forward unanswered for pending_timeout_ms: its connection
        closes, the client reconnects with its session and goes on)."""
        base = self.pending_failed(sid)
        self.assertTrue(wait_until(lambda: self.pending_failed(sid) >= base + n, WAIT_S, 0.1),
                        "server %d failed %d forwards, not %d" % (
                            sid, self.pending_failed(sid) - base, n))

    def assert_no_ack_from(self, member, t_from, t_to):
        """No op a client of `member` started at or after t_from succeeded
        before t_to (the member was cut off from its quorum meanwhile)."""
        bad = [o for o in self.load.ops if self.load.members.get(o.process) == member
               and o.status == lin.OK and o.invoke >= t_from and o.complete < t_to]
        bad += [c for c in self.load.creates if c[1] == member and c[3] == lin.OK
                and c[4] >= t_from and c[5] < t_to]
        self.assertEqual(bad, [], "server %d acknowledged while cut off from its quorum"
                         % member)

    def finish(self, ids=None):
        """Stops the load; then: convergence, no acknowledged create lost,
        every register linearizable. Returns the trees."""
        ids = ids or self.ens.ids
        self.load.halt()
        self.assert_no_client_errors()
        self.ens.wait_leader(among=ids)
        self.load.final_reads(ids)
        trees = self.assert_converged(ids)
        self.assert_creates_kept(trees)
        self.assert_linearizable()
        return trees

    def assert_no_client_errors(self):
        if self.load.errors:
            self.fail("clients saw what no server may answer (%s):\n%s" % (
                self.seed_text(), "\n".join(self.load.errors)))

    def seed_text(self):
        return "workload seed %d: FAULTS_SEED=%d repeats the clients' choices" % (
            self.load.seed, self.load.seed)

    def assert_same_digest(self, ids):
        """Every member publishes the same tree digest at the same zxid."""
        if digests(self.ens, ids) is None:
            log("this larchd publishes no digest: trees only")
            return
        same = wait_until(lambda: len(set(digests(self.ens, ids).values())) == 1, WAIT_S, 0.1)
        self.assertTrue(same, "members' digests differ: %s" % (digests(self.ens, ids),))
        log("digest", digests(self.ens, ids)[ids[0]])
        # and no member ever found its tree differ from its leader's
        for sid in ids:
            self.assertEqual(self.ens.mntr(sid).get("zk_digest_mismatches_count", 0), 0,
                             "server %d: %s" % (sid, self.ens.stderr_tail(sid)))

    def assert_converged(self, ids):
        """Same log, same digest, and the same tree read from every member."""
        self.assertTrue(wait_same_zxid(self.ens, ids), "members did not converge: %s" % (
            zxids(self.ens, ids),))
        self.assert_same_digest(ids)
        trees = {sid: dump_tree(self.ens, sid) for sid in ids}
        shas = {sid: tree_sha(t) for sid, t in trees.items()}
        log("trees", shas, "zxids", zxids(self.ens, ids))
        first = trees[ids[0]]
        for sid in ids[1:]:
            if trees[sid] != first:
                diff = sorted(set(trees[sid].items()) ^ set(first.items()))[:20]
                self.fail("server %d's tree differs from server %d's (%s): %s" % (
                    sid, ids[0], shas, diff))
        return trees

    def assert_creates_kept(self, trees):
        acked = self.load.acked_creates()
        for sid, tree in trees.items():
            lost = [p for p in acked if p not in tree]
            self.assertEqual(lost, [], "server %d lost acknowledged creates" % sid)

    def assert_linearizable(self):
        log(self.load.summary())
        results = lin.check_history(self.load.ops, INIT)
        for r in results.values():
            log(r.explain())
        bad = lin.failures(results)
        if bad:
            self.fail("%s\n%s" % ("\n".join(r.explain(self.load.ops) for r in bad),
                                   self.seed_text()))
        # the histories held real work, or the check says little
        writes = sum(1 for o in self.load.ops if o.kind != lin.READ and o.status == lin.OK)
        reads = sum(1 for o in self.load.ops if o.kind == lin.READ)
        self.assertGreater(writes, 20, self.load.summary())
        self.assertGreater(reads, 20, self.load.summary())


# ---- the checker: it must reject what is wrong and accept what is right -----------
def W(p, v, t0, t1, status=lin.OK, version=None, key="k"):
    return lin.Op(p, key, lin.WRITE, v, status, version, t0, t1 if status != lin.INFO else None)


def R(p, v, version, t0, t1, key="k"):
    return lin.Op(p, key, lin.READ, None, lin.OK, (v, version), t0, t1)


def C(p, expect, v, t0, t1, status=lin.OK, version=None, key="k"):
    return lin.Op(p, key, lin.CAS, (expect, v), status, version, t0,
                  t1 if status != lin.INFO else None)


class LinearizeCheckerTest(unittest.TestCase):
    """linearize.py bites: known violations are rejected, concurrent but
    legal histories accepted, oversized ones refused."""

    def check(self, ops, init=INIT):
        return lin.check_register(ops, init, key="k")

    def assertRejected(self, ops):
        r = self.check(ops)
        self.assertFalse(r.ok, "accepted a non-linearizable history: %r" % (ops,))
        self.assertIn("NOT linearizable", r.explain(ops))
        return r

    def assertAccepted(self, ops):
        r = self.check(ops)
        self.assertTrue(r.ok, r.explain(ops))

    def test_stale_read_after_acknowledged_write(self):
        r = self.assertRejected([W(1, b"a", 0, 1, version=1), R(2, b"init", 0, 2, 3)])
        self.assertIn(lin.READ, [o.kind for o in [r.op] + r.blocked_by])
        # the same read overlapping the write is fine
        self.assertAccepted([W(1, b"a", 0, 2, version=1), R(2, b"init", 0, 1, 3)])

    def test_lost_acknowledged_write(self):
        # a write acknowledged, then every later read shows a history without it
        self.assertRejected([W(1, b"a", 0, 1, version=1), W(2, b"b", 2, 3, version=2),
                             R(3, b"b", 1, 4, 5)])
        # two acks for the same version: one of them was lost
        self.assertRejected([W(1, b"a", 0, 1, version=1), W(2, b"b", 2, 3, version=1)])
        # the value comes back after a later acknowledged write
        self.assertRejected([W(1, b"a", 0, 1), W(2, b"b", 2, 3), R(3, b"a", 1, 4, 5)])

    def test_cas_success_on_stale_version(self):
        r = self.assertRejected([W(1, b"a", 0, 1, version=1), C(2, 0, b"b", 2, 3, version=1)])
        self.assertIn(lin.CAS, [o.kind for o in [r.op] + r.blocked_by])
        # two CAS from one version both succeeding
        self.assertRejected([C(1, 0, b"a", 0, 5, version=1), C(2, 0, b"b", 0, 5, version=1)])
        # a CAS that failed although nothing could have changed the version
        self.assertRejected([R(1, b"init", 0, 0, 1), C(2, 0, b"x", 2, 3, status=lin.FAIL),
                             R(1, b"init", 0, 4, 5)])

    def test_read_of_a_value_never_written(self):
        self.assertRejected([W(1, b"a", 0, 1), R(2, b"zzz", 1, 2, 3)])
        self.assertRejected([R(2, b"init", 0, 0, 1), R(2, b"init", 0, 3, 4),
                             W(1, b"a", 2, 5, version=1), R(3, b"a", 7, 6, 7)])

    def test_reads_going_back_in_time(self):
        # concurrent with the write, a later read must not see the old value
        # once an earlier-finished read saw the new one
        self.assertRejected([W(1, b"a", 0, 10, version=1), R(2, b"a", 1, 1, 2),
                             R(3, b"init", 0, 3, 4)])

    def test_concurrent_histories_accepted(self):
        self.assertAccepted([W(1, b"a", 0, 10, version=1), R(2, b"init", 0, 1, 2),
                             R(3, b"a", 1, 3, 4), R(2, b"a", 1, 5, 6)])
        # CAS race: one wins, the other fails, reads in between
        self.assertAccepted([R(1, b"init", 0, 0, 1), R(2, b"init", 0, 0, 1),
                             C(1, 0, b"one", 2, 6, version=1),
                             C(2, 0, b"two", 3, 5, status=lin.FAIL),
                             R(3, b"one", 1, 7, 8)])
        # the failed CAS may be ordered first (before the winning one) too
        self.assertAccepted([C(1, 0, b"one", 2, 6, version=1),
                             C(2, 5, b"two", 1, 3, status=lin.FAIL)])
        # writes whose order is only fixed by later reads
        self.assertAccepted([W(1, b"a", 0, 5), W(2, b"b", 0, 5), W(3, b"c", 0, 5),
                             R(4, b"a", 3, 6, 7)])

    def test_unknown_outcomes(self):
        # an unknown write may take effect long after its invoke...
        self.assertAccepted([W(1, b"a", 0, None, status=lin.INFO), R(2, b"init", 0, 1, 2),
                             R(2, b"init", 0, 10, 11), R(2, b"a", 1, 20, 21)])
        # ... or never
        self.assertAccepted([W(1, b"a", 0, None, status=lin.INFO), R(2, b"init", 0, 10, 11)])
        # but not before its invoke
        self.assertRejected([R(2, b"a", 1, 0, 1), W(1, b"a", 2, None, status=lin.INFO)])
        # and only once: its version is fixed where it happens
        self.assertRejected([W(1, b"a", 0, None, status=lin.INFO), R(2, b"a", 1, 1, 2),
                             W(3, b"b", 3, 4, version=2), R(2, b"a", 3, 5, 6)])
        # an unknown CAS took effect only if the version matched there
        self.assertAccepted([C(1, 0, b"c", 0, None, status=lin.INFO), R(2, b"c", 1, 5, 6)])
        self.assertRejected([W(3, b"b", 0, 1, version=1), C(1, 0, b"c", 2, None,
                                                            status=lin.INFO),
                             R(2, b"c", 2, 5, 6)])
        # failed reads and failed writes are no evidence
        self.assertAccepted([lin.Op(1, "k", lin.READ, None, lin.INFO, None, 0, None),
                             lin.Op(1, "k", lin.WRITE, b"q", lin.FAIL, None, 0, 1),
                             R(2, b"init", 0, 2, 3)])

    def test_keys_are_checked_separately(self):
        ops = [W(1, b"a", 0, 1, key="x"), R(2, b"a", 1, 2, 3, key="x"),
               W(1, b"a", 0, 1, key="y"), R(2, b"init", 0, 2, 3, key="y")]
        results = lin.check_history(ops, INIT)
        self.assertTrue(results["x"].ok)
        self.assertFalse(results["y"].ok)
        self.assertEqual([r.key for r in lin.failures(results)], ["y"])

    def test_random_linearizable_histories_accepted(self):
        """Histories generated from a sequential run with each op's interval
        stretched around its point, some outcomes made unknown."""
        for seed in range(5):
            ops = random_history(random.Random(seed), 600, corrupt=False)
            self.assertAccepted(ops)

    def test_random_corrupted_histories_rejected(self):
        """The same histories with one read's answer made stale (the value
        before the last write that finished before the read began)."""
        for seed in range(5):
            ops = random_history(random.Random(seed), 600, corrupt=True)
            self.assertRejected(ops)

    def test_limits(self):
        ops = [W(1, b"v%d" % i, i, i + 0.5) for i in range(50)]
        with self.assertRaises(lin.HistoryTooLarge):
            lin.check_register(ops, INIT, key="k", max_ops=49)
        # many unknown writes and reads of values none of them wrote:
        # a search that would run long stops at its step bound
        ops = [W(i, b"u%d" % i, 0, None, status=lin.INFO) for i in range(18)]
        ops += [R(99, b"never", 40, 100 + i, 101 + i) for i in range(3)]
        with self.assertRaises(lin.SearchLimitExceeded):
            lin.check_register(ops, INIT, key="k", max_steps=2000)


def random_history(rng, n, corrupt):
    """A linearizable history of n ops (or, with corrupt, one read made stale)."""
    state = list(INIT)
    ops, last_write_end = [], []
    t = 0.0
    for i in range(n):
        t += rng.uniform(0.1, 1.0)
        t0, t1 = t - rng.uniform(0, 1.5), t + rng.uniform(0, 1.5)
        r = rng.random()
        if r < 0.4:
            ops.append(R(i % 5, state[0], state[1], t0, t1))
        elif r < 0.7:
            v = b"w%d" % i
            state = [v, state[1] + 1]
            op = W(i % 5, v, t0, t1, version=state[1])
            if rng.random() < 0.05:
                op = W(i % 5, v, t0, None, status=lin.INFO)
            ops.append(op)
        else:
            expect = state[1] if rng.random() < 0.6 else state[1] - 1
            v = b"c%d" % i
            if expect == state[1]:
                state = [v, state[1] + 1]
                ops.append(C(i % 5, expect, v, t0, t1, version=state[1]))
            else:
                ops.append(C(i % 5, expect, v, t0, t1, status=lin.FAIL))
        last_write_end.append((t1, tuple(state)))
    if corrupt:
        # a read well after two acknowledged writes returns the state before them
        writes = [o for o in ops if o.kind != lin.READ and o.status == lin.OK]
        w1, w2 = writes[len(writes) // 2], writes[len(writes) // 2 + 1]
        before = (w1.value if w1.kind == lin.WRITE else w1.value[1], w1.result)
        ops.append(R(9, before[0], before[1], w2.complete + 50, w2.complete + 51))
        # (w2 finished, and later, before this read began: its value is gone)
        ops.sort(key=lambda o: o.invoke)
    return ops


# ---- the proxy --------------------------------------------------------------------
class EchoServer:
    """A loopback echo server (a thread per connection, all bounded)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind((HOST, 0))
        self.sock.listen(16)
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.stop = threading.Event()
        self.conns = []
        self.threads = [threading.Thread(target=self._accept, daemon=True)]
        self.threads[0].start()

    def _accept(self):
        while not self.stop.is_set():
            try:
                c, _ = self.sock.accept()
            except OSError:
                continue
            c.settimeout(0.1)
            self.conns.append(c)
            t = threading.Thread(target=self._echo, args=(c,), daemon=True)
            self.threads.append(t)
            t.start()

    def _echo(self, c):
        while not self.stop.is_set():
            try:
                data = c.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                return
            if not data:
                return
            try:
                c.sendall(data)
            except OSError:
                return

    def close(self):
        self.stop.set()
        for t in self.threads:
            t.join(timeout=5)
        for c in self.conns + [self.sock]:
            c.close()


def recv_exactly(s, n, timeout_s):
    s.settimeout(timeout_s)
    buf = b""
    deadline = time.monotonic() + timeout_s
    while len(buf) < n and time.monotonic() < deadline:
        try:
            chunk = s.recv(n - len(buf))
        except socket.timeout:
            break
        if not chunk:
            break
        buf += chunk
    return buf


class FaultProxyTest(unittest.TestCase):

    def setUp(self):
        self.echo = EchoServer()
        self.addCleanup(self.echo.close)
        self.proxy = FaultProxy(self.echo.port, name="test")
        self.addCleanup(self.proxy.close)

    def connect(self):
        s = socket.create_connection((HOST, self.proxy.port), timeout=5)
        self.addCleanup(s.close)
        return s

    def test_pass_blackhole_and_heal(self):
        s = self.connect()
        s.sendall(b"hello")
        self.assertEqual(recv_exactly(s, 5, 5), b"hello")
        self.proxy.blackhole()
        s.sendall(b"held")
        self.assertEqual(recv_exactly(s, 4, 0.3), b"")  # silence, and no error
        self.assertEqual(self.proxy.connections(), 1)
        self.proxy.heal()
        self.assertEqual(recv_exactly(s, 4, 5), b"held")  # delivered late, in order
        self.assertGreaterEqual(self.proxy.bytes[UP], 9)

    def test_one_way(self):
        s = self.connect()
        self.proxy.blackhole(DOWN)  # the echo server still hears us
        s.sendall(b"ping")
        self.assertEqual(recv_exactly(s, 4, 0.3), b"")
        self.assertTrue(wait_until(lambda: self.proxy.bytes[UP] >= 4, 5))
        self.assertEqual(self.proxy.bytes[DOWN], 0)
        self.proxy.heal()
        self.assertEqual(recv_exactly(s, 4, 5), b"ping")

    def test_cut_resets_and_refuses(self):
        s = self.connect()
        s.sendall(b"x")
        self.assertEqual(recv_exactly(s, 1, 5), b"x")
        self.proxy.cut()
        self.assertEqual(self.proxy.connections(), 0)
        dead = False
        for _ in range(3):  # reset, or at least closed
            try:
                s.sendall(b"y")
                if recv_exactly(s, 1, 1) == b"":
                    dead = True
                    break
            except (ConnectionResetError, BrokenPipeError):
                dead = True
                break
        self.assertTrue(dead, "a cut connection still forwards")
        # a new connection is accepted, then reset at once
        try:
            t = self.connect()
            t.sendall(b"z")
            self.assertEqual(recv_exactly(t, 1, 1), b"")
        except (ConnectionResetError, BrokenPipeError):
            pass
        self.assertTrue(wait_until(lambda: self.proxy.refused >= 1, 5))
        self.proxy.heal()
        u = self.connect()
        u.sendall(b"back")
        self.assertEqual(recv_exactly(u, 4, 5), b"back")

    def test_delay(self):
        s = self.connect()
        self.proxy.delay(0.3, UP)
        t0 = time.monotonic()
        s.sendall(b"slow")
        self.assertEqual(recv_exactly(s, 4, 5), b"slow")
        self.assertGreaterEqual(time.monotonic() - t0, 0.3)

    def test_close_stops_everything(self):
        s = self.connect()
        s.sendall(b"a")
        self.assertEqual(recv_exactly(s, 1, 5), b"a")
        port, thread = self.proxy.port, self.proxy._thread
        self.proxy.close()
        self.assertFalse(thread.is_alive())
        try:
            self.assertEqual(recv_exactly(s, 1, 1), b"")
        except ConnectionResetError:
            pass
        with self.assertRaises(OSError):
            socket.create_connection((HOST, port), timeout=1).close()
        self.proxy.close()  # idempotent


# ---- ensembles under faults ----------------------------------------------------
@unittest.skipUnless(sut_kind() == "larch", "larchd ensembles only")
class PartitionTest(FaultCase):

    def test_partitioned_leader_acks_nothing_and_heals(self):
        """The leader cut off from both followers (both directions): the
        followers elect a new leader and go on; clients of the old leader get
        errors or timeouts, never an acknowledgement; after the heal it
        follows, serves its clients again, and every member has the same
        data."""
        leader = self.start(3, proxied=True)
        others = [i for i in self.ens.ids if i != leader]
        # the links really go through the proxies: the leader's pairs carry one each
        self.assertTrue(wait_until(lambda: self.ens.links(leader) == {o: 1 for o in others},
                                   WAIT_S), self.ens.links(leader))
        load = self.workload(per_member=2, cli_members=[leader, others[0]])
        self.wait_acked(30)
        t_cut = self.ens.isolate(leader)
        new_leader = self.ens.wait_leader(among=others)
        self.assertNotEqual(new_leader, leader)
        self.wait_acked(60, since=t_cut, members=others, what="writes after the election")
        self.assertTrue(wait_until(lambda: self.ens.state(leader) != "leader", WAIT_S),
                        "the cut-off leader did not step down")
        self.assertTrue(wait_until(lambda: load.attempts(leader, t_cut) >= 8, WAIT_S),
                        "the old leader's clients tried nothing during the partition")
        t_heal = self.ens.heal()
        self.assert_no_ack_from(leader, t_cut, t_heal)
        self.ens.wait_leader()
        self.assertEqual(self.ens.state(leader), "follower")
        self.wait_acked(5, since=t_heal, members=[leader], what="old leader's clients after heal")
        self.finish()


@unittest.skipUnless(sut_kind() == "larch", "larchd ensembles only")
class LinkFaultTest(FaultCase):

    def test_bridge_partition_five_members(self):
        """{leader, a} | {b, c} with one member (the bridge) hearing both
        sides: the side with the leader and the bridge holds a quorum and
        goes on; nobody on the far side becomes leader (the bridge still
        hears the leader, and its log is newer); after the heal all five
        converge."""
        leader = self.start(5, proxied=True)
        rest = [i for i in self.ens.ids if i != leader]
        side_a, bridge, side_b = [leader, rest[0]], rest[1], rest[2:]
        self.workload(per_member=1)
        self.wait_acked(20)
        t_cut = self.ens.partition(side_a, side_b)
        near = side_a + [bridge]
        self.wait_acked(30, since=t_cut, members=near, what="writes across the bridge")
        # the far side cannot have elected anyone: a leader needs 3 votes
        for sid in side_b:
            self.assertNotEqual(self.ens.state(sid), "leader")
        self.ens.heal()
        self.finish()

    def test_one_way_partition_of_the_leader(self):
        """What the leader sends is dropped (it still hears the others): the
        followers elect a new leader, the old one learns the new term from
        what it still receives and steps down; its clients get no
        acknowledgement; the stale bytes delivered at the heal change
        nothing."""
        leader = self.start(3, proxied=True)
        others = [i for i in self.ens.ids if i != leader]
        # the muted member's clients only write: a sync there is neither
        # answered nor failed while the partition lasts (its ReadIndex is
        # held and nothing times it out), and would hold up the
        # session's writes this test is about
        load = self.workload(per_member=1, all_hosts=1, mixes={leader: WRITES_ONLY})
        self.wait_acked(20)
        t_cut = self.ens.one_way([leader], others)
        new_leader = self.ens.wait_leader(among=others)
        self.assertNotEqual(new_leader, leader)
        self.wait_acked(25, since=t_cut, members=others, what="writes after the election")
        self.assertTrue(wait_until(lambda: self.ens.state(leader) != "leader", WAIT_S),
                        "the muted leader did not step down")
        # as a follower now, it forwards its clients' writes; they are held,
        # it gives up on them, its clients reconnect (kazoo starts its xids
        # at 1 again) and go on: those forwards all arrive at the heal
        self.wait_forwards_failed(leader, 1)
        t_failed = time.monotonic()
        self.assertTrue(wait_until(lambda: load.attempts(leader, t_failed) >= 2, WAIT_S))
        t_heal = self.ens.heal()
        self.assert_no_ack_from(leader, t_cut, t_heal)
        self.finish()

    def test_blackholed_follower_catches_up(self):
        """A follower's links go silent (connections stay up and TCP sees
        nothing wrong, nothing arrives either way): the leader and the
        other follower go on; at the heal the held, stale traffic arrives
        first and the follower then catches up."""
        leader = self.start(3, proxied=True)
        follower = [i for i in self.ens.ids if i != leader][0]
        load = self.workload(per_member=1)
        self.wait_acked(20)
        t_cut = self.ens.isolate(follower, mode="blackhole")
        self.wait_acked(30, since=t_cut, members=[i for i in self.ens.ids if i != follower],
                        what="writes without the follower")
        self.assertTrue(wait_until(lambda: load.attempts(follower, t_cut) >= 2, WAIT_S))
        # silent: the links are still up, nobody was told
        self.assertEqual(self.ens.links(follower), {o: 1 for o in self.ens.ids if o != follower})
        self.assertNotEqual(self.ens.state(follower), "leader")
        t_heal = self.ens.heal()
        self.assert_no_ack_from(follower, t_cut, t_heal)
        self.wait_acked(5, since=t_heal, members=[follower], what="follower's clients after heal")
        self.finish()


@unittest.skipUnless(sut_kind() == "larch", "larchd ensembles only")
class PauseTest(FaultCase):

    def test_paused_follower_then_leader_cas_history(self):
        """SIGSTOP of a follower, then of the leader, under a CAS-heavy load
        through every member: writes go on through the others, the resumed
        leader steps down, and every register's history is linearizable."""
        leader = self.start(3)
        follower = [i for i in self.ens.ids if i != leader][0]
        load = self.workload(per_member=2, cli_members=[follower, leader],
                             mix={"read": 0.35, "write": 0.1, "cas": 0.45, "create": 0.1})
        self.wait_acked(30)
        self.ens.pause(follower)
        t = time.monotonic()
        try:
            self.wait_acked(25, since=t, members=[i for i in self.ens.ids if i != follower],
                            what="writes while a follower is stopped")
        finally:
            self.ens.resume(follower)
        self.wait_acked(3, since=time.monotonic(), members=[follower],
                        what="resumed follower's clients")
        self.ens.pause(leader)
        t_stop = time.monotonic()
        others = [i for i in self.ens.ids if i != leader]
        try:
            new_leader = self.ens.wait_leader(among=others)
            self.assertNotEqual(new_leader, leader)
            self.wait_acked(25, since=t_stop, members=others, what="writes under the new leader")
        finally:
            self.ens.resume(leader)
        t_cont = time.monotonic()
        self.assertTrue(wait_until(lambda: self.ens.state(leader) == "follower", WAIT_S))
        self.wait_acked(3, since=t_cont, members=[leader], what="old leader's clients")
        self.finish()
        self.assertTrue(any(o.status == lin.FAIL for o in load.ops), "no CAS ever failed")


@unittest.skipUnless(sut_kind() == "larch", "larchd ensembles only")
class SessionFailoverTest(FaultCase):

    def ephemerals(self, sid):
        c = need_client(self.ens.hosts([sid]))
        try:
            c.sync_async("/s").get(timeout=10)
            return sorted(c.get_children("/s"))
        finally:
            stop_client(c)

    def test_follower_session_keeps_its_ephemeral_across_leader_failover(self):
        """Sessions on followers outlive the leader's death: the new leader
        re-arms them, their ephemerals stay for longer than a session timeout
        after the failover, on every member (the restarted old leader
        included). An ephemeral goes only when its session expires (its
        client cut off behind a blackholed proxy) or closes."""
        leader = self.start(3)
        f1, f2 = [i for i in self.ens.ids if i != leader]
        keeper = need_client(self.ens.hosts([f1]), timeout=4.0)
        self.addCleanup(stop_client, keeper)
        closer = need_client(self.ens.hosts([f2]), timeout=4.0)
        self.addCleanup(stop_client, closer)
        gate = FaultProxy(self.ens.client_ports[f2], name="client gate")
        self.addCleanup(gate.close)
        doomed = need_client("%s:%d" % (HOST, gate.port), timeout=3.0)
        self.addCleanup(stop_client, doomed)
        keeper.create("/s/keeper", b"", ephemeral=True, makepath=True)
        closer.create("/s/closer", b"", ephemeral=True)
        doomed.create("/s/doomed", b"", ephemeral=True)
        keeper_id = keeper.client_id[0]
        self.assertEqual(keeper_id >> 56, f1)
        every = ["closer", "doomed", "keeper"]
        self.assertEqual({sid: self.ephemerals(sid) for sid in self.ens.ids},
                         {sid: every for sid in self.ens.ids})

        gate.blackhole()  # the doomed client's pings no longer arrive
        self.ens.kill(leader)
        t_fail = time.monotonic()
        new_leader = self.ens.wait_leader(among=[f1, f2])
        log("new leader", new_leader, "after", time.monotonic() - t_fail)
        # the doomed session expires (the new leader times it out) ...
        self.assertTrue(wait_until(lambda: "doomed" not in self.ephemerals(f1), WAIT_S, 0.2),
                        "a session with no client did not expire after the failover")
        # ... and only it: the others stay well past their own timeout
        while time.monotonic() < t_fail + 1.5 * 4.0:
            self.assertEqual(self.ephemerals(f1), ["closer", "keeper"])
            time.sleep(0.5)
        self.assertEqual(self.ephemerals(f2), ["closer", "keeper"])
        self.assertEqual(keeper.client_id[0], keeper_id)
        keeper.create("/s/keeper-writes", b"")  # still a working session
        self.assertGreaterEqual(self.ens.mntr(new_leader).get("zk_larch_sessions_expired", 0), 1)
        # the old leader comes back and agrees
        self.ens.restart(leader)
        self.ens.wait_leader()
        self.assertEqual(self.ephemerals(leader), ["closer", "keeper", "keeper-writes"])
        # closing a session takes its ephemeral off every member
        stop_client(closer)
        for sid in self.ens.ids:
            self.assertTrue(wait_until(lambda: "closer" not in self.ephemerals(sid), WAIT_S, 0.2))
        self.assertEqual({sid: self.ephemerals(sid) for sid in self.ens.ids},
                         {sid: ["keeper", "keeper-writes"] for sid in self.ens.ids})
        stop_client(keeper)
        self.assertEqual({sid: self.ephemerals(sid) for sid in self.ens.ids},
                         {sid: ["keeper-writes"] for sid in self.ens.ids})


@unittest.skipUnless(sut_kind() == "larch", "larchd ensembles only")
class RegressionTest(FaultCase):

    def test_zk3911_caught_up_follower_keeps_what_it_acknowledged(self):
        """ZOOKEEPER-3911: a follower acknowledged entries before they were
        durable. Here: a follower is killed, misses writes, restarts and
        catches up from the leader; then the other follower is killed and
        the caught-up one is half of every quorum; then the leader and it are
        SIGKILLed together while writes are in flight. The two followers
        restarted without the leader must hold every acknowledged write:
        the newest ones only exist on the caught-up follower's disk.
        (SIGKILL leaves the page cache alone, so this catches an ack sent
        before the entry reached the follower's kernel, or on too few
        members; the order of write and fdatasync inside one server is the
        unit and simulator tests' business.)"""
        leader = self.start(3)
        f1, f2 = [i for i in self.ens.ids if i != leader]
        load = self.workload(per_member=0, all_hosts=4)
        self.wait_acked(20)
        self.ens.kill(f2)
        self.wait_acked(40, since=time.monotonic(), what="writes while a follower is down")
        self.ens.restart(f2)
        # the leader has f2 matched up to where its log was at the restart
        target = self.last_zxid(leader)
        self.assertTrue(wait_until(lambda: self.match_of(leader, f2) >= target, WAIT_S),
                        "server %d did not catch up to %#x: %s" % (
                            f2, target, self.ens.mntr(leader)))
        self.ens.kill(f1)
        t = time.monotonic()
        self.wait_acked(40, since=t, what="writes acknowledged by the leader and f2")
        # every member still running dies at once, with writes in flight
        for sid in (leader, f2):
            self.ens.procs[sid].send_signal(signal.SIGKILL)
        for sid in (leader, f2):
            self.ens.procs[sid].wait(timeout=10)
        load.halt()
        self.assert_no_client_errors()
        self.ens.restart(f1)
        self.ens.restart(f2)
        self.ens.wait_leader(among=[f1, f2])
        load.final_reads([f1, f2])
        trees = self.assert_converged([f1, f2])
        self.assert_creates_kept(trees)
        self.assert_linearizable()
        # and the old leader, back, agrees with them
        self.ens.restart(leader)
        self.ens.wait_leader()
        trees = self.assert_converged(self.ens.ids)
        self.assert_creates_kept(trees)

    def test_failed_forward_never_answers_a_later_request(self):
        """A follower gives up on a forwarded write (its link to the leader
        is silent past pending_timeout_ms), closes the client's connection,
        and the client reconnects with its session and sends another
        request with the same xid (kazoo restarts xids at 1 on every
        connection). The first write's FORWARD is held on the link; the
        reattach's move marker follows it there, so the reattach is
        answered only after the heal, and only after that write has
        committed. Its result must not answer the second request: a CAS
        that fails must be answered BADVERSION, never OK."""
        leader = self.start(3, proxied=True)
        f = [i for i in self.ens.ids if i != leader][0]
        c = RawClient(self.ens.client_ports[f])
        self.addCleanup(c.close)
        s = c.connect(timeout_ms=15000)
        self.assertEqual(c.create("/a", b"a0").err, OK)
        self.assertEqual(c.create("/b", b"b0").err, OK)
        self.ens.one_way([f], [i for i in self.ens.ids if i != f])
        xid = 1000
        c.send_request(OP["setData"], Writer().string("/a").buffer(b"OLD").int(-1).bytes(),
                       xid=xid)
        with self.assertRaises((ConnectionClosed, OSError)):
            c.read_one(timeout_s=WAIT_S)  # the follower gives up and closes
        c2 = RawClient(self.ens.client_ports[f])
        self.addCleanup(c2.close)
        c2.send_connect(timeout_ms=15000, session_id=s.session_id, passwd=s.passwd,
                        last_zxid=c.last_zxid)
        self.ens.heal()
        try:
            s2 = c2.read_connect(timeout_s=WAIT_S)
        except (ConnectionClosed, OSError):
            # the marker could not reach the leader (the link was reset
            # meanwhile): the client tries again, as every client does
            c2, s2 = self.reattach(self.ens.client_ports[f], s, c.last_zxid)
        self.assertEqual(s2.session_id, s.session_id)
        c2.send_request(OP["setData"], Writer().string("/b").buffer(b"NEW").int(99).bytes(),
                        xid=xid)  # a CAS on a version /b never had
        try:
            r = c2.read_one(timeout_s=WAIT_S)
            answer = (r.xid, err_name(r.err))
        except (ConnectionClosed, OSError):
            answer = (xid, "CONNECTIONLOSS")  # allowed: the outcome is unknown to it
        check = need_client(self.ens.hosts([leader]))
        try:
            data, stat = sync_get(check, "/b", timeout=10)
        finally:
            stop_client(check)
        self.assertEqual(data, b"b0")
        self.assertIn(answer, [(xid, "BADVERSION"), (xid, "CONNECTIONLOSS")],
                      "the CAS that failed was answered %s: the reply of the earlier, "
                      "given-up write with the same xid" % (answer,))

    def test_write_left_on_the_old_connection_never_follows_the_move(self):
        """ZooKeeper's SESSIONMOVED. A client's write is stuck on its way
        from its member f to the leader (f's outbound links hold bytes);
        the client gives up on f, reattaches through g, syncs and reads:
        the write is not there. When the held FORWARD reaches the leader
        after the heal, the leader refuses it (the session moved to g):
        the write must never appear after what the client saw through g.
        Before, it was applied then, out of the session's order."""
        leader = self.start(3, proxied=True)
        f, g = [i for i in self.ens.ids if i != leader]
        c = RawClient(self.ens.client_ports[f])
        self.addCleanup(c.close)
        s = c.connect(timeout_ms=15000)
        self.assertEqual(c.create("/moved", b"").err, OK)
        self.assertTrue(wait_same_zxid(self.ens, self.ens.ids))
        self.ens.one_way([f], [leader, g])
        c.send_request(OP["create"], c.create_body("/moved/late", b"", flags=0))
        c2, s2 = self.reattach(self.ens.client_ports[g], s, c.last_zxid)
        self.assertEqual(s2.session_id, s.session_id)
        c2.send_request(OP["sync"], Writer().string("/moved").bytes())
        self.assertEqual(c2.read_one(timeout_s=WAIT_S).err, OK)
        self.assertEqual(err_name(c2.exists("/moved/late").err), "NONODE")
        received = self.ens.mntr(leader)["zk_larch_forwards_received"]
        self.ens.heal()
        # the held FORWARD reaches the leader (the link survived the hold)
        self.assertTrue(wait_until(
            lambda: self.ens.mntr(leader)["zk_larch_forwards_received"] > received, WAIT_S, 0.1),
            "the held write never reached the leader: this test tested nothing")
        self.assertTrue(wait_same_zxid(self.ens, self.ens.ids))
        for sid in self.ens.ids:
            check = RawClient(self.ens.client_ports[sid])
            self.addCleanup(check.close)
            check.connect(timeout_ms=15000)
            self.assertEqual(err_name(check.exists("/moved/late").err), "NONODE",
                             "server %d: the write left on the old connection was applied "
                             "after the session moved" % sid)
        # the session goes on through g
        self.assertEqual(c2.create("/moved/after", b"").err, OK)

    def reattach(self, port, session, last_zxid):
        """Reattaches session through port, trying again (bounded) while the
        member cannot reach its leader yet. Returns (client, Session)."""
        deadline = time.monotonic() + WAIT_S
        while True:
            c = RawClient(port)
            self.addCleanup(c.close)
            try:
                return c, c.connect(timeout_ms=15000, session_id=session.session_id,
                                    passwd=session.passwd, last_zxid=last_zxid)
            except (ConnectionClosed, OSError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def last_zxid(self, sid):
        return int(str(self.ens.mntr(sid).get("zk_larch_last_zxid", "0")), 16)

    def match_of(self, leader, peer):
        return int(str(self.ens.mntr(leader).get("zk_larch_peer_%d_match_zxid" % peer, "0")), 16)

    def test_zk2845_old_leaders_uncommitted_entries_are_truncated(self):
        """ZOOKEEPER-2845: a server kept uncommitted transactions across an
        election. Here (5 members): the leader and one follower are cut off
        from the other three; the leader logs writes it cannot commit and
        the follower logs them too (diverging entries); neither acknowledges
        them. Both are SIGKILLed; the majority elects a leader and writes,
        one write to a path the stale log also created. Restarted while
        still cut off, the two apply nothing uncommitted; after the heal
        they truncate the stale tail and end with the majority's data."""
        leader = self.start(5, proxied=True)
        rest = [i for i in self.ens.ids if i != leader]
        minority, majority = [leader, rest[0]], rest[1:]
        old = need_client(self.ens.hosts([leader]))
        self.addCleanup(stop_client, old)
        old.create("/d", b"")
        for i in range(5):
            old.create("/d/before-%d" % i, b"")
        self.assertTrue(wait_same_zxid(self.ens, self.ens.ids))
        nodes_before = {sid: self.ens.mntr(sid)["zk_znode_count"] for sid in minority}
        committed = {sid: zxids(self.ens, [sid])[sid][1] for sid in minority}

        self.ens.partition(minority, majority)
        stale = [old.create_async("/d/stale-%d" % i, b"old") for i in range(10)]
        # the leader logged them and so did its follower, uncommitted
        self.assertTrue(wait_until(lambda: all(
            int(zxids(self.ens, [sid])[sid][0], 16) > int(committed[sid], 16)
            for sid in minority), WAIT_S), "no uncommitted entries were logged: %s (was %s)" % (
                zxids(self.ens, minority), committed))
        outcomes = []
        for r in stale:
            try:
                outcomes.append(("ok", r.get(timeout=WAIT_S)))
            except (KazooException, KazooTimeoutError) as e:
                outcomes.append(("error", type(e).__name__))
        self.assertEqual([o for o in outcomes if o[0] == "ok"], [],
                         "a leader without a quorum acknowledged writes")
        logged = zxids(self.ens, minority)
        for sid in minority:
            self.ens.kill(sid)

        new_leader = self.ens.wait_leader(among=majority)
        self.assertIn(new_leader, majority)
        c = need_client(self.ens.hosts(majority))
        try:
            c.create("/d/stale-0", b"majority")  # the path the stale log created too
            for i in range(10):
                c.create("/d/new-%d" % i, b"")
        finally:
            stop_client(c)

        # back on their old logs, still cut off: nothing uncommitted applied
        for sid in minority:
            self.ens.restart(sid)
        for sid in minority:
            m = self.ens.mntr(sid)
            # (it may apply less: the commit point on disk can lag what was applied)
            self.assertLessEqual(m["zk_znode_count"], nodes_before[sid],
                                 "server %d applied uncommitted entries at restart" % sid)
            self.assertGreaterEqual(int(m["zk_larch_last_zxid"], 16),
                                    int(logged[sid][0], 16),
                                    "server %d lost its log tail before anyone told it to" % sid)
            self.assertNotEqual(m["zk_server_state"], "leader")

        self.ens.heal()
        self.ens.wait_leader()
        self.assertTrue(wait_same_zxid(self.ens, self.ens.ids), zxids(self.ens, self.ens.ids))
        self.assert_same_digest(self.ens.ids)
        trees = {sid: dump_tree(self.ens, sid) for sid in self.ens.ids}
        want = sorted(["before-%d" % i for i in range(5)] + ["new-%d" % i for i in range(10)]
                      + ["stale-0"])
        for sid, tree in trees.items():
            kids = sorted(p[len("/d/"):] for p in tree if p.startswith("/d/"))
            self.assertEqual(kids, want, "server %d" % sid)
            self.assertEqual(tree["/d/stale-0"][0], b"majority", "server %d" % sid)
            self.assertEqual(tree, trees[new_leader], "server %d differs" % sid)


if __name__ == "__main__":
    unittest.main()
