"""Differential test: one scripted scenario against stock ZooKeeper and larchd.

The same ~120 steps (errors, sequential creates, multi success and failure,
ACL ops, auth, watches, containers, TTL nodes, ephemerals, session close) run
on a fresh ZooKeeper and a fresh server under test. Each reply is reduced to
what must match between two correct servers: error code, paths, data,
children (sorted), ACLs, the deterministic Stat fields (version, cversion,
aversion, dataLength, numChildren, ephemeralOwner zero or not) and the ORDER
of zxids (every czxid/mzxid/pzxid seen in a Stat is replaced by its rank
among all of them), never absolute zxids or times. Watch notifications each
session received after each step are compared too. Any difference fails the
test with a table of mismatches.

The second server is larchd; with LARCH_SUT=zookeeper it is a second
ZooKeeper, which checks the scenario itself is deterministic.

EnsembleDifferentialTest does the same for replication: one script of ~100
steps against a stock ZooKeeper 3-server ensemble (stock_ensemble.py) and a
larchd 3-member ensemble (harness.Ensemble), both with tickTime 2000,
initLimit 10, syncLimit 5. kazoo clients are pinned to different members (a on
1, b on 2, c and the ephemeral owner e on 3), plus raw sessions: p on member 3
for persistent recursive watches, m on member 1, which moves to member 2 with
its ephemerals. Writes through one member are read, watched, version-checked,
ACL-checked (digest auth) and multi'd through the others; sequential names,
ephemeral owners, session close and sync answers are compared too. After
every step each session syncs: a member answers sync only after applying
every txn committed before it, and sends a txn's notifications before any
later reply, so all watch events of the step have arrived (and ran through
kazoo's callback queue) before they are compared. "readall"/"readchildren"
steps read a node through every member and record whether all members
answer the very same bytes and Stat (absolute zxids and times included).
Results are normalised as above (zxids as ranks; ephemeralOwner as the name
of the owning session). With LARCH_SUT=zookeeper both ensembles are stock
ZooKeeper.
"""

import threading
import unittest

from harness import (ADD_WATCH_PERSISTENT, ADD_WATCH_PERSISTENT_RECURSIVE,
                     CONTAINER, EPHEMERAL, EPHEMERAL_SEQUENTIAL, OPEN_ACL,
                     PERM_ADMIN, PERM_ALL, PERM_CREATE, PERM_READ, PERM_WRITE,
                     PERSISTENT, PERSISTENT_SEQUENTIAL, PERSISTENT_WITH_TTL,
                     WATCHER_ANY, WATCHER_CHILDREN, WATCHER_DATA,
                     TICK_TIME_MS, ConnectionClosed, DecodeError, Ensemble, RawClient,
                     Server, ServerError, Stat, connect_raw, err_name, sut_kind,
                     wait_until)
from stock_ensemble import StockEnsemble, session_ok

R = "/d"
READ_ADMIN = [(PERM_READ | PERM_ADMIN, "world", "anyone")]
READ_ONLY = [(PERM_READ, "world", "anyone")]


def scenario():
    """The scripted steps: (session, op, *args). Sessions a, b, c."""
    s = []
    add = s.append
    # -- creates and errors
    add(("a", "create", R, b"root", OPEN_ACL, PERSISTENT))
    add(("a", "create", R, b"again", OPEN_ACL, PERSISTENT))
    add(("a", "create", R + "/missing/x", b"", OPEN_ACL, PERSISTENT))
    add(("a", "create", "d-noslash", b"", OPEN_ACL, PERSISTENT))
    add(("a", "create", R + "/", b"", OPEN_ACL, PERSISTENT))
    add(("a", "create", R + "//x", b"", OPEN_ACL, PERSISTENT))
    add(("a", "create", R + "/empty-acl", b"", [], PERSISTENT))
    add(("a", "create", R + "/a", b"A", OPEN_ACL, PERSISTENT))
    add(("a", "create2", R + "/b", b"BB", OPEN_ACL, PERSISTENT))
    add(("a", "create", R + "/nulldata", None, OPEN_ACL, PERSISTENT))
    add(("a", "getData", R + "/nulldata", False))
    add(("a", "getData", R + "/a", False))
    add(("a", "exists", R + "/a", False))
    add(("a", "exists", R + "/zz", False))
    add(("a", "getData", R + "/zz", False))
    # -- setData and versions
    add(("a", "setData", R + "/a", b"A1", 0))
    add(("a", "setData", R + "/a", b"A2", 0))
    add(("a", "setData", R + "/a", b"A2", -1))
    add(("a", "setData", R + "/a", None, -1))
    add(("a", "setData", R + "/a", b"x" * 10000, 3))
    add(("a", "setData", R + "/zz", b"", -1))
    add(("a", "getData", R + "/a", False))
    # -- sequential
    add(("a", "create", R + "/s-", b"", OPEN_ACL, PERSISTENT_SEQUENTIAL))
    add(("a", "create", R + "/s-", b"", OPEN_ACL, PERSISTENT_SEQUENTIAL))
    add(("a", "delete", R + "/s-0000000004", -1))
    add(("a", "create", R + "/s-", b"", OPEN_ACL, PERSISTENT_SEQUENTIAL))
    add(("b", "create", R + "/es-", b"", OPEN_ACL, EPHEMERAL_SEQUENTIAL))
    add(("a", "create", R + "/", b"", OPEN_ACL, PERSISTENT_SEQUENTIAL))
    add(("a", "getChildren", R, False))
    add(("a", "getChildren2", R, False))
    add(("a", "exists", R, False))
    # -- delete
    add(("a", "delete", R, -1))
    add(("a", "delete", R + "/b", 7))
    add(("a", "delete", R + "/b", 0))
    add(("a", "delete", R + "/b", 0))
    add(("a", "exists", R, False))
    # -- one-shot watches
    add(("b", "getData", R + "/a", True))
    add(("a", "setData", R + "/a", b"w1", -1))
    add(("a", "setData", R + "/a", b"w2", -1))
    add(("b", "exists", R + "/new", True))
    add(("a", "create", R + "/new", b"", OPEN_ACL, PERSISTENT))
    add(("b", "getChildren", R, True))
    add(("b", "getData", R + "/new", True))
    add(("a", "delete", R + "/new", -1))
    add(("b", "getChildren2", R + "/a", True))
    add(("a", "create", R + "/a/k", b"", OPEN_ACL, PERSISTENT))
    add(("a", "setData", R + "/a/k", b"k", -1))
    add(("b", "getData", R + "/a/k", True))
    add(("b", "getChildren", R + "/a/k", True))
    add(("a", "delete", R + "/a/k", -1))
    # -- ephemerals and session close
    add(("b", "create", R + "/eph", b"e", OPEN_ACL, EPHEMERAL))
    add(("a", "create", R + "/eph/kid", b"", OPEN_ACL, PERSISTENT))
    add(("a", "exists", R + "/eph", False))
    add(("c", "create", R + "/ceph", b"", OPEN_ACL, EPHEMERAL))
    add(("c", "create", R + "/ceph2", b"", OPEN_ACL, EPHEMERAL))
    add(("a", "getEphemerals", R))
    add(("b", "getEphemerals", R))
    add(("c", "getEphemerals", R + "/ceph2"))
    add(("a", "exists", R + "/ceph", True))
    add(("c", "closeSession"))
    add(("a", "exists", R + "/ceph", False))
    add(("a", "exists", R + "/ceph2", False))
    add(("a", "getChildren2", R, False))
    # -- ACLs
    add(("a", "create", R + "/ro", b"ro", READ_ADMIN, PERSISTENT))
    add(("b", "setData", R + "/ro", b"no", -1))
    add(("b", "getData", R + "/ro", False))
    add(("b", "create", R + "/ro/kid", b"", OPEN_ACL, PERSISTENT))
    add(("a", "getACL", R + "/ro"))
    add(("a", "setACL", R + "/ro", READ_ONLY, 5))
    add(("a", "setACL", R + "/ro", [(PERM_READ | PERM_CREATE | PERM_ADMIN, "world", "anyone")], 0))
    add(("b", "create", R + "/ro/kid", b"", OPEN_ACL, PERSISTENT))
    add(("b", "delete", R + "/ro/kid", -1))
    add(("a", "setACL", R + "/ro", READ_ONLY, 1))
    add(("a", "setACL", R + "/ro", OPEN_ACL, -1))
    add(("a", "getACL", R + "/ro"))
    add(("a", "setACL", R + "/a", [], -1))
    add(("a", "setACL", R + "/a", [(PERM_ALL, "bogus", "x")], -1))
    add(("a", "setACL", R + "/zz", OPEN_ACL, -1))
    add(("a", "getACL", R + "/zz"))
    # -- digest auth
    add(("a", "auth", "digest", b"alice:pw"))
    add(("a", "whoAmI"))
    add(("a", "create", R + "/priv", b"secret", [(PERM_ALL, "auth", "")], PERSISTENT))
    add(("a", "getACL", R + "/priv"))
    add(("b", "getData", R + "/priv", False))
    add(("b", "getACL", R + "/priv"))
    add(("b", "exists", R + "/priv", False))
    add(("b", "auth", "digest", b"alice:wrong"))
    add(("b", "getData", R + "/priv", False))
    add(("b", "auth", "digest", b"alice:pw"))
    add(("b", "getData", R + "/priv", False))
    add(("b", "whoAmI"))
    add(("a", "create", R + "/wo", b"w", [(PERM_WRITE, "world", "anyone")], PERSISTENT))
    add(("b", "getChildren", R + "/wo", False))
    add(("b", "setData", R + "/wo", b"ww", -1))
    # -- multi
    add(("a", "multi", [("create", R + "/m1", b"", OPEN_ACL, 0),
                        ("create", R + "/m1/x", b"x", OPEN_ACL, 0),
                        ("setData", R + "/m1", b"m", 0),
                        ("check", R + "/m1", 1),
                        ("delete", R + "/m1/x", 0)]))
    add(("a", "multi", [("create", R + "/m2", b"", OPEN_ACL, 0),
                        ("delete", R + "/zz", -1),
                        ("setData", R + "/a", b"never", -1)]))
    add(("a", "exists", R + "/m2", False))
    add(("a", "multi", [("setData", R + "/m1", b"n", -1),
                        ("check", R + "/m1", 99)]))
    add(("a", "multi", [("create", R + "/m3", b"", OPEN_ACL, 0),
                        ("create", R + "/m3", b"", OPEN_ACL, 0)]))
    add(("a", "multi", [("create2", R + "/m4", b"44", OPEN_ACL, 0),
                        ("create", R + "/m4/s-", b"", OPEN_ACL, PERSISTENT_SEQUENTIAL)]))
    add(("b", "multi", [("setData", R + "/ro", b"x", -1)]))
    add(("a", "multi", []))
    add(("a", "getData", R + "/m1", False))
    add(("a", "multiRead", [("getChildren", R + "/m4"), ("getData", R + "/m4"),
                            ("getData", R + "/zz"), ("getChildren", R + "/priv")]))
    add(("b", "multiRead", [("getData", R + "/wo"), ("getData", R + "/a")]))
    # -- containers and TTL
    add(("a", "createContainer", R + "/cont", b"c", OPEN_ACL, CONTAINER))
    add(("a", "create", R + "/cont/k", b"", OPEN_ACL, PERSISTENT))
    add(("a", "exists", R + "/cont", False))
    add(("a", "multi", [("delete", R + "/cont/k", -1), ("delete", R + "/cont", -1)]))
    add(("a", "createTTL", R + "/ttl", b"t", OPEN_ACL, PERSISTENT_WITH_TTL, 3600000))
    add(("a", "createTTL", R + "/ttl0", b"t", OPEN_ACL, PERSISTENT_WITH_TTL, 0))
    add(("a", "createTTL", R + "/ttlbad", b"t", OPEN_ACL, PERSISTENT, 1000))
    add(("a", "exists", R + "/ttl", False))
    # -- persistent watches
    add(("b", "addWatch", R + "/pw", ADD_WATCH_PERSISTENT))
    add(("a", "create", R + "/pw", b"", OPEN_ACL, PERSISTENT))
    add(("a", "setData", R + "/pw", b"1", -1))
    add(("a", "create", R + "/pw/k", b"", OPEN_ACL, PERSISTENT))
    add(("a", "setData", R + "/pw/k", b"1", -1))
    add(("b", "checkWatches", R + "/pw", WATCHER_ANY))
    add(("b", "removeWatches", R + "/pw", WATCHER_ANY))
    add(("b", "checkWatches", R + "/pw", WATCHER_ANY))
    add(("a", "setData", R + "/pw", b"2", -1))
    add(("b", "addWatch", R + "/rw", ADD_WATCH_PERSISTENT_RECURSIVE))
    add(("a", "create", R + "/rw", b"", OPEN_ACL, PERSISTENT))
    add(("a", "create", R + "/rw/x", b"", OPEN_ACL, PERSISTENT))
    add(("a", "create", R + "/rw/x/y", b"", OPEN_ACL, PERSISTENT))
    add(("a", "setData", R + "/rw/x/y", b"y", -1))
    add(("a", "delete", R + "/rw/x/y", -1))
    add(("b", "getChildren", R + "/rw/x", True))
    add(("b", "checkWatches", R + "/rw/x", WATCHER_CHILDREN))
    add(("b", "removeWatches", R + "/rw", WATCHER_ANY))
    add(("a", "setData", R + "/rw/x", b"quiet", -1))
    add(("a", "create", R + "/rw/x/z", b"", OPEN_ACL, PERSISTENT))
    add(("b", "removeWatches", R + "/rw/x", WATCHER_DATA))
    # -- misc reads
    add(("a", "sync", R))
    add(("a", "getAllChildrenNumber", R))
    add(("a", "getAllChildrenNumber", R + "/zz"))
    add(("a", "getChildren", "/", False))
    add(("a", "getChildren", "/zookeeper/quota", False))
    add(("a", "getChildren2", R + "/rw", False))
    add(("a", "getChildren2", R, False))
    return s


def short(v, n=60):
    text = repr(v)
    return text if len(text) <= n else text[:n - 3] + "..."


class Recorder:
    """Runs the scenario on one server; records raw results for normalising."""

    def __init__(self, port):
        self.port = port
        self.sessions = {}
        self.raw = []      # per step: (label, err, value)
        self.events = []   # per step: {session: [(type, state, path)]}

    def session(self, name):
        if name not in self.sessions:
            self.sessions[name] = connect_raw(self.port)
        return self.sessions[name]

    def close(self):
        for c in self.sessions.values():
            c.close()

    def run(self, steps):
        for who in ("a", "b", "c"):
            self.session(who)
        for step in steps:
            who, op, args = step[0], step[1], step[2:]
            r = self.do(self.session(who), op, args)
            self.raw.append((r.err, r.value))
            self.events.append(self.flush_events(step))

    @staticmethod
    def do(c, op, args):
        if op in ("create", "create2", "createContainer"):
            path, data, acl, flags = args
            return c.create(path, data, acl, flags, op=op)
        if op == "createTTL":
            path, data, acl, flags, ttl = args
            return c.create(path, data, acl, flags, op=op, ttl=ttl)
        method = {"delete": c.delete, "exists": c.exists, "getData": c.get_data,
                  "setData": c.set_data, "getACL": c.get_acl, "setACL": c.set_acl,
                  "getChildren": c.get_children, "getChildren2": c.get_children2,
                  "getEphemerals": c.get_ephemerals, "sync": c.sync,
                  "getAllChildrenNumber": c.get_all_children_number,
                  "addWatch": c.add_watch, "checkWatches": c.check_watches,
                  "removeWatches": c.remove_watches, "auth": c.auth,
                  "whoAmI": c.whoami, "closeSession": c.close_session}.get(op)
        if method is not None:
            return method(*args)
        if op in ("multi", "multiRead"):
            return c.multi(args[0], op=op)
        raise ValueError("unknown scenario op %s" % op)

    def flush_events(self, step):
        """A read of the step's path on every live session: ZooKeeper delivers
        a notification before any later reply on the same connection."""
        path = step[2] if len(step) > 2 and isinstance(step[2], str) and step[2].startswith("/") else "/"
        got = {}
        for who, c in sorted(self.sessions.items()):
            if who == "c" and step[1] == "closeSession" or getattr(c, "closed", False):
                c.closed = True
                continue
            before = len(c.events)
            c.exists(path)
            got[who] = [(e.type, e.state, e.path) for e in c.events[before:]]
        return got


class Normaliser:
    """Turns raw results into comparable strings, zxids into ranks."""

    def __init__(self, raw):
        zxids = set()
        for _, value in raw:
            for st in self.stats_in(value):
                zxids.update((st.czxid, st.mzxid, st.pzxid))
        self.rank = {z: i for i, z in enumerate(sorted(zxids))}

    @classmethod
    def stats_in(cls, v):
        if isinstance(v, Stat):
            yield v
        elif isinstance(v, (list, tuple)):
            for x in v:
                yield from cls.stats_in(x)

    def stat(self, st):
        return ("stat(v%d cv%d av%d len%d nc%d eph=%s cz#%d mz#%d pz#%d)" % (
            st.version, st.cversion, st.aversion, st.dataLength, st.numChildren,
            "Y" if st.ephemeralOwner else "N", self.rank[st.czxid],
            self.rank[st.mzxid], self.rank[st.pzxid]))

    def value(self, v):
        if isinstance(v, Stat):
            return self.stat(v)
        if isinstance(v, bytes):
            return short(v, 24)
        if isinstance(v, list):
            if all(isinstance(x, str) for x in v):
                return "[" + ",".join(sorted(v)) + "]"
            return "[" + ", ".join(self.value(x) for x in v) + "]"
        if isinstance(v, tuple):
            return "(" + " ".join(self.value(x) for x in v) + ")"
        return str(v)

    def result(self, err, value):
        text = err_name(err)
        if value is not None:
            text += " " + self.value(value)
        return text


def describe(step):
    who, op, args = step[0], step[1], step[2:]
    if op in ("multi", "multiRead"):
        args = ["%s %s" % (o[0], o[1]) for o in args[0]]
        return "%s %s [%s]" % (who, op, "; ".join(args))
    shown = []
    for a in args:
        if isinstance(a, bytes) and len(a) > 12:
            a = "<%d bytes>" % len(a)
        shown.append(str(a))
    return "%s %s %s" % (who, op, " ".join(shown))


def run_on(server):
    rec = Recorder(server.port)
    try:
        rec.run(scenario())
    finally:
        rec.close()
    norm = Normaliser(rec.raw)
    results = [norm.result(err, value) for err, value in rec.raw]
    events = [{w: sorted(e) for w, e in ev.items()} for ev in rec.events]
    return results, events


class DifferentialTest(unittest.TestCase):

    def test_scenario_matches_stock_zookeeper(self):
        other_kind = sut_kind()
        with Server(kind="zookeeper") as zk:
            ref_results, ref_events = run_on(zk)
        with Server(kind=other_kind) as sut:
            results, events = run_on(sut)
        self.assertEqual(sut.sanitizer_report(), [], sut.stderr_tail(60))
        steps = scenario()
        rows = []
        for i, step in enumerate(steps):
            if ref_results[i] != results[i]:
                rows.append((i + 1, describe(step), ref_results[i], results[i]))
            if ref_events[i] != events[i]:
                rows.append((i + 1, "  events after: " + describe(step),
                             str(ref_events[i]), str(events[i])))
        if rows:
            lines = ["%d of %d steps differ (zookeeper vs %s):" % (
                len({r[0] for r in rows}), len(steps), other_kind)]
            for n, what, want, got in rows:
                lines.append("#%-3d %s\n       zookeeper: %s\n       %-9s: %s" % (
                    n, what, want, other_kind, got))
            self.fail("\n".join(lines))
        self.assertGreaterEqual(len(steps), 100)
        # The figure the closing notes quote: every step matched.
        print("\ndifferential: %d of %d steps identical (zookeeper vs %s), %d watch events compared"
              % (len(steps), len(steps), other_kind, sum(len(e) for e in ref_events)), flush=True)


# ---- ensembles: stock ZooKeeper 3-server vs larchd 3-member ----------------

E = "/dx"
ENSEMBLE_SIZE = 3
# session -> member it connects to: kazoo sessions a, b, c, e; raw sessions p
# and m (m moves to member 2 halfway)
KAZOO_MEMBERS = {"a": 1, "b": 2, "c": 3, "e": 3}
RAW_MEMBERS = {"p": 3, "m": 1}
EVENT_NAMES = {1: "CREATED", 2: "DELETED", 3: "CHANGED", 4: "CHILD"}
FLUSH_TIMEOUT_S = 10.0


def ensemble_scenario():
    """(session, op, *args). Writes go through one member and are read,
    watched and version-checked through the others."""
    s = []
    add = s.append
    # -- creates from every member; the leader decides the errors
    add(("a", "create", E, b"root"))
    add(("b", "create", E, b"again"))
    add(("c", "create", E + "/a", b"A"))
    add(("b", "create", E + "/missing/x", b""))
    add(("a", "create2", E + "/b", b"BB"))
    add(("c", "create", E + "/a", b"dup"))
    add(("b", "readall", E + "/a"))
    # -- conditional writes from another member than the last writer
    add(("a", "set", E + "/a", b"A1", 0))
    add(("b", "set", E + "/a", b"A2", 0))
    add(("c", "set", E + "/a", b"A2", 1))
    add(("b", "get", E + "/a", False))
    add(("c", "set", E + "/zz", b"", -1))
    add(("a", "readall", E + "/a"))
    # -- sequential names come from the leader, whoever asks
    add(("a", "create", E + "/s-", b"", "sequence"))
    add(("b", "create", E + "/s-", b"", "sequence"))
    add(("c", "create", E + "/s-", b"", "sequence"))
    add(("b", "delete", E + "/s-0000000004", -1))
    add(("c", "create", E + "/s-", b"", "sequence"))
    add(("a", "children2", E, False))
    add(("c", "readall", E))
    add(("b", "readchildren", E))
    # -- one-shot watches set on one member, fired by writes through another
    add(("b", "get", E + "/a", True))
    add(("c", "exists", E + "/new", True))
    add(("a", "children", E, True))
    add(("a", "set", E + "/a", b"w1", -1))
    add(("c", "create", E + "/new", b"n"))
    add(("a", "set", E + "/a", b"w2", -1))
    add(("b", "exists", E + "/new", True))
    add(("c", "get", E + "/new", True))
    add(("a", "children", E, True))
    add(("b", "delete", E + "/new", -1))
    add(("b", "children2", E + "/a", True))
    add(("c", "create", E + "/a/k", b""))
    add(("a", "delete", E + "/a", 3))
    add(("a", "delete", E + "/a", 4))
    add(("b", "get", E + "/a/k", True))
    add(("c", "set", E + "/a/k", b"k", -1))
    add(("a", "delete", E + "/a/k", 1))
    add(("c", "readall", E + "/a"))
    # -- a session's ephemerals on member 3, seen and watched from 1 and 2
    add(("e", "create", E + "/eph", b"e", "ephemeral"))
    add(("a", "exists", E + "/eph", True))
    add(("b", "get", E + "/eph", True))
    add(("b", "create", E + "/eph/kid", b""))
    add(("e", "create", E + "/es-", b"", "ephemeral sequence"))
    add(("b", "children", E, True))
    add(("c", "readall", E + "/eph"))
    add(("a", "readchildren", E))
    add(("e", "close"))
    add(("a", "exists", E + "/eph", False))
    add(("b", "children", E, False))
    add(("c", "readall", E))
    # -- multi through different members
    add(("a", "multi", [("create", E + "/m1", b""), ("create", E + "/m1/x", b"x"),
                        ("set", E + "/m1", b"m", 0), ("check", E + "/m1", 1),
                        ("delete", E + "/m1/x", 0)]))
    add(("b", "multi", [("create", E + "/m2", b""), ("delete", E + "/zz", -1),
                        ("set", E + "/a", b"never", -1)]))
    add(("c", "exists", E + "/m2", False))
    add(("c", "get", E + "/m1", True))
    add(("b", "multi", [("set", E + "/m1", b"n", -1), ("check", E + "/m1", 99)]))
    add(("b", "multi", [("set", E + "/m1", b"n", 1), ("check", E + "/m1", 2),
                        ("create", E + "/m1/s-", b"", "sequence")]))
    add(("c", "multi", [("create", E + "/m3", b""), ("create", E + "/m3", b"")]))
    add(("a", "readall", E + "/m1"))
    add(("c", "readchildren", E + "/m1"))
    # -- a persistent recursive watch of the raw session on member 3
    add(("p", "addWatch", E + "/pw", ADD_WATCH_PERSISTENT_RECURSIVE))
    add(("a", "create", E + "/pw", b""))
    add(("b", "create", E + "/pw/x", b""))
    add(("c", "set", E + "/pw/x", b"x", -1))
    add(("a", "create", E + "/pw/x/y", b""))
    add(("b", "delete", E + "/pw/x/y", -1))
    add(("p", "checkWatches", E + "/pw", WATCHER_ANY))
    add(("p", "removeWatches", E + "/pw", WATCHER_ANY))
    add(("p", "removeWatches", E + "/pw", WATCHER_ANY))
    add(("a", "set", E + "/pw/x", b"quiet", -1))
    # -- digest auth on one member; every member enforces the ACL
    add(("b", "auth", "digest", "alice:pw"))
    add(("b", "create", E + "/priv", b"secret", "creator-acl"))
    add(("c", "get", E + "/priv", False))
    add(("c", "getacl", E + "/priv"))
    add(("b", "getacl", E + "/priv"))
    add(("a", "auth", "digest", "alice:wrong"))
    add(("a", "get", E + "/priv", False))
    add(("a", "auth", "digest", "alice:pw"))
    add(("a", "get", E + "/priv", False))
    add(("a", "setacl", E + "/priv", "world-read", 1))
    add(("a", "setacl", E + "/priv", "world-read", 0))
    add(("c", "get", E + "/priv", False))
    add(("c", "set", E + "/priv", b"no", -1))
    add(("c", "readall", E + "/priv"))
    # -- a session moves from member 1 to member 2 and keeps its ephemerals
    add(("m", "create", E + "/meph", b"m", EPHEMERAL))
    add(("a", "exists", E + "/meph", True))
    add(("m", "move", 2))
    add(("m", "create", E + "/meph2", b"", EPHEMERAL))
    add(("m", "exists", E + "/meph", False))
    add(("c", "readall", E + "/meph"))
    add(("m", "closeSession"))
    add(("b", "readchildren", E))
    # -- deletes with versions from different members
    add(("a", "delete", E + "/b", 7))
    add(("b", "delete", E + "/b", 0))
    add(("c", "delete", E + "/b", 0))
    # -- sync answers, then the final state on every member
    add(("a", "sync", E))
    add(("b", "sync", E + "/a"))
    add(("c", "sync", "/"))
    add(("a", "readchildren", E))
    add(("b", "readall", E + "/a"))
    add(("c", "readall", E + "/pw/x"))
    add(("a", "readall", E + "/es-0000000008"))
    return s


def kazoo_acls():
    from kazoo.security import ACL, ANYONE_ID_UNSAFE, CREATOR_ALL_ACL, Permissions
    return CREATOR_ALL_ACL, [ACL(Permissions.READ, ANYONE_ID_UNSAFE)]


try:
    CREATOR_ALL_ACL, WORLD_READ_ACL = kazoo_acls()
except ImportError:  # kazoo only exists for /usr/bin/python3
    CREATOR_ALL_ACL = WORLD_READ_ACL = None


class KazooError(str):
    """An error a kazoo call raised, by exception class name."""


class EnsembleRecorder:
    """Runs ensemble_scenario() on one ensemble (a hosts(ids) callable and
    its client ports) and records raw results and watch events."""

    def __init__(self, hosts_of, client_ports):
        self.hosts_of = hosts_of
        self.client_ports = client_ports
        self.kazoo = {}
        self.raw_sessions = {}
        self.closed = set()
        self.lock = threading.Lock()
        self.pending = {}   # who -> events not yet flushed
        self.owners = {}    # session id -> session name
        self.raw = []       # per step: result
        self.events = []    # per step: {session: sorted [(type, path)]}

    def start(self):
        from kazoo.client import KazooClient
        for who, sid in sorted(KAZOO_MEMBERS.items()):
            zk = KazooClient(hosts=self.hosts_of([sid]), timeout=10.0)
            self.kazoo[who] = zk
            zk.start(timeout=15)
            self.owners[zk.client_id[0]] = who
            self.pending[who] = []
        for who, sid in sorted(RAW_MEMBERS.items()):
            c = connect_raw(self.client_ports[sid])
            self.raw_sessions[who] = c
            self.owners[c.session.session_id] = who

    def close(self):
        for who, zk in self.kazoo.items():
            if who not in self.closed:
                try:
                    zk.stop()
                    zk.close()
                except Exception:
                    pass
        for c in self.raw_sessions.values():
            c.close()

    def watcher(self, who):
        def on_event(ev):
            with self.lock:
                self.pending[who].append((ev.type, ev.path))
        return on_event

    def run(self, steps):
        self.start()
        watchers = {who: self.watcher(who) for who in self.kazoo}
        for step in steps:
            who, op, args = step[0], step[1], step[2:]
            if who in self.raw_sessions:
                value = self.do_raw(who, op, args)
            else:
                value = self.do_kazoo(who, watchers[who], op, args)
            self.raw.append(value)
            self.events.append(self.flush())

    def do_raw(self, who, op, args):
        c = self.raw_sessions[who]
        if op == "move":
            return self.move(who, args[0])
        if op == "create":
            r = c.create(args[0], args[1], flags=args[2])
        else:
            method = {"addWatch": c.add_watch, "checkWatches": c.check_watches,
                      "removeWatches": c.remove_watches, "exists": c.exists,
                      "closeSession": c.close_session}[op]
            r = method(*args)
        if op == "closeSession":
            c.close()
            self.closed.add(who)
        return err_name(r.err) if r.err else ("OK", r.value)

    def move(self, who, member):
        """Drops the session's connection and reattaches the session on
        another member (its id, password and lastZxidSeen), as a client
        does when its server goes away. The previous flush synced every
        member, so the new one knows the session and its zxid."""
        old = self.raw_sessions[who]
        old.close()
        c = RawClient(self.client_ports[member])
        self.raw_sessions[who] = c
        try:
            s = c.connect(timeout_ms=10000, session_id=old.session.session_id,
                          passwd=old.session.passwd, last_zxid=old.last_zxid)
        except ConnectionClosed:
            self.closed.add(who)
            return "connection closed"
        c.last_zxid = old.last_zxid
        if s.timeout_ms <= 0:
            self.closed.add(who)
            return "expired"
        return "moved" if s.session_id == old.session.session_id else "new session"

    def do_kazoo(self, who, watch, op, args):
        from kazoo.exceptions import KazooException
        zk = self.kazoo[who]
        try:
            if op in ("create", "create2"):
                path, data = args[0], args[1]
                flags = args[2] if len(args) > 2 else ""
                acl = CREATOR_ALL_ACL if "creator-acl" in flags else None
                return zk.create(path, data, acl=acl, ephemeral="ephemeral" in flags,
                                 sequence="sequence" in flags, include_data=op == "create2")
            if op == "auth":
                return zk.add_auth(args[0], args[1])
            if op == "getacl":
                acls, stat = zk.get_acls(args[0])
                return ([(a.perms, a.id.scheme, a.id.id) for a in acls], stat)
            if op == "setacl":
                return zk.set_acls(args[0], WORLD_READ_ACL, version=args[2])
            if op == "set":
                return zk.set(args[0], args[1], version=args[2])
            if op == "delete":
                return zk.delete(args[0], version=args[1])
            if op == "get":
                return zk.get(args[0], watch=watch if args[1] else None)
            if op == "exists":
                return zk.exists(args[0], watch=watch if args[1] else None)
            if op == "children":
                return sorted(zk.get_children(args[0], watch=watch if args[1] else None))
            if op == "children2":
                children, stat = zk.get_children(args[0], watch=watch if args[1] else None,
                                                 include_data=True)
                return (sorted(children), stat)
            if op == "sync":
                return zk.sync(args[0])
            if op == "multi":
                return self.multi(zk, args[0])
            if op == "close":
                zk.stop()
                zk.close()
                self.closed.add(who)
                return "closed"
            if op in ("readall", "readchildren"):
                return self.read_everywhere(op, args[0])
        except KazooException as e:
            return KazooError(type(e).__name__)
        raise ValueError("unknown ensemble scenario op %s" % op)

    @staticmethod
    def multi(zk, ops):
        t = zk.transaction()
        for op in ops:
            kind = op[0]
            if kind == "create":
                flags = op[3] if len(op) > 3 else ""
                t.create(op[1], op[2], ephemeral="ephemeral" in flags,
                         sequence="sequence" in flags)
            elif kind == "delete":
                t.delete(op[1], version=op[2])
            elif kind == "set":
                t.set_data(op[1], op[2], version=op[3])
            elif kind == "check":
                t.check(op[1], op[2])
            else:
                raise ValueError("unsupported multi op %r" % kind)
        return [KazooError(type(r).__name__) if isinstance(r, Exception) else r
                for r in t.commit()]

    def read_everywhere(self, op, path):
        """The node (or children with Stat) as every live kazoo session reads
        it from its member; all sessions synced in the previous flush."""
        from kazoo.exceptions import KazooException
        got = []
        for who, zk in sorted(self.kazoo.items()):
            if who in self.closed:
                continue
            try:
                if op == "readall":
                    got.append(zk.get(path))
                else:
                    children, stat = zk.get_children(path, include_data=True)
                    got.append((sorted(children), stat))
            except KazooException as e:
                got.append(KazooError(type(e).__name__))
        same = all(g == got[0] for g in got)
        return ("everywhere" if same else "members differ", got[0] if same else got)

    def flush(self):
        """Every live session syncs: a member answers sync after it applied
        every txn committed before, and sends a txn's notifications before
        any later reply on the connection. kazoo runs watch callbacks on one
        queue in order, so a marker queued after the sync reply runs after
        them. Returns {session: sorted events} of this step."""
        from kazoo.protocol.states import Callback
        got = {}
        for who, zk in sorted(self.kazoo.items()):
            if who in self.closed:
                continue
            zk.sync("/")
            done = threading.Event()
            zk.handler.dispatch_callback(Callback("watch", done.set, ()))
            if not done.wait(FLUSH_TIMEOUT_S):
                raise AssertionError("kazoo callbacks of %s stuck for %.0f s" % (
                    who, FLUSH_TIMEOUT_S))
            with self.lock:
                got[who] = sorted(self.pending[who])
                self.pending[who] = []
        for who, c in sorted(self.raw_sessions.items()):
            if who in self.closed:
                continue
            before = len(c.events)
            if c.sync("/").err:
                raise AssertionError("raw session %s: sync failed" % who)
            got[who] = sorted((EVENT_NAMES.get(e.type, str(e.type)), e.path)
                              for e in c.events[before:])
        return got


class EnsembleNormaliser(Normaliser):
    """Normaliser for kazoo values: ZnodeStat too, and ephemeralOwner as the
    name of the session that owns the node."""

    def __init__(self, raw, owners):
        self.owners = owners
        super().__init__([(0, v) for v in raw])

    @classmethod
    def stats_in(cls, v):
        if hasattr(v, "czxid") and hasattr(v, "pzxid"):
            yield v
        elif isinstance(v, (list, tuple)) and not isinstance(v, str):
            for x in v:
                yield from cls.stats_in(x)

    def stat(self, st):
        owner = "-" if not st.ephemeralOwner else self.owners.get(st.ephemeralOwner, "other")
        return ("stat(v%d cv%d av%d len%d nc%d owner=%s cz#%d mz#%d pz#%d)" % (
            st.version, st.cversion, st.aversion, st.dataLength, st.numChildren, owner,
            self.rank[st.czxid], self.rank[st.mzxid], self.rank[st.pzxid]))

    def value(self, v):
        if isinstance(v, KazooError):
            return "!" + v
        if hasattr(v, "czxid") and hasattr(v, "pzxid"):
            return self.stat(v)
        if v is None or v is True or v is False:
            return str(v)
        if isinstance(v, list):  # children are sorted when recorded; multi keeps its order
            return "[" + ", ".join(self.value(x) for x in v) + "]"
        return super().value(v)


def describe_ensemble(step):
    who, op, args = step[0], step[1], step[2:]
    member = KAZOO_MEMBERS.get(who) or RAW_MEMBERS.get(who)
    if op == "multi":
        shown = "[%s]" % "; ".join("%s %s" % (o[0], o[1]) for o in args[0])
    else:
        shown = " ".join("<%d bytes>" % len(a) if isinstance(a, bytes) and len(a) > 12
                         else str(a) for a in args)
    return "%s@%d %s %s" % (who, member, op, shown)


def run_on_ensemble(hosts_of, client_ports):
    rec = EnsembleRecorder(hosts_of, client_ports)
    try:
        rec.run(ensemble_scenario())
    finally:
        rec.close()
    norm = EnsembleNormaliser(rec.raw, rec.owners)
    return [norm.value(v) for v in rec.raw], rec.events


# harness.Ensemble picks each port with free_port() on its own, so two of
# them can clash (or another process takes one meanwhile); larchd then
# refuses its zoo.cfg or its bind. Such a start is retried on fresh ports.
PORT_CLASH_MARKS = ("already in use", "is also")
START_ATTEMPTS = 3


def start_larch_ensemble():
    """A started larchd ensemble with a leader, with the stock ensemble's
    timing: tickTime 2000, initLimit 10, syncLimit 5."""
    for attempt in range(1, START_ATTEMPTS + 1):
        ens = Ensemble(n=ENSEMBLE_SIZE, tick_ms=TICK_TIME_MS, sync_limit=5)
        try:
            ens.start()
        except ServerError as e:
            if attempt == START_ATTEMPTS or not any(m in str(e) for m in PORT_CLASH_MARKS):
                raise
            continue
        try:
            ens.wait_leader()
            # as StockEnsemble.start: every member takes a real session
            for sid in ens.ids:
                if not wait_until(lambda: session_taken(ens.client_ports[sid]), 10.0):
                    raise ServerError("larchd member %d takes no session" % sid)
        except BaseException:
            ens.stop()
            raise
        return ens


def session_taken(port):
    try:
        return session_ok(port)
    except (OSError, ConnectionClosed, DecodeError):
        return False


class EnsembleDifferentialTest(unittest.TestCase):

    def test_ensemble_scenario_matches_stock_zookeeper_ensemble(self):
        other_kind = sut_kind()
        with StockEnsemble(n=ENSEMBLE_SIZE, tick_ms=TICK_TIME_MS) as zk:
            ref_results, ref_events = run_on_ensemble(zk.hosts, zk.client_ports)
        if other_kind == "zookeeper":
            with StockEnsemble(n=ENSEMBLE_SIZE, tick_ms=TICK_TIME_MS) as other:
                results, events = run_on_ensemble(other.hosts, other.client_ports)
        else:
            other = start_larch_ensemble()  # started: not a context manager here
            try:
                results, events = run_on_ensemble(other.hosts, other.client_ports)
            finally:
                other.stop()
            self.assertEqual(other.sanitizer_report(), [])
        steps = ensemble_scenario()
        rows = []
        for i, step in enumerate(steps):
            if ref_results[i] != results[i]:
                rows.append((i + 1, describe_ensemble(step), ref_results[i], results[i]))
            if ref_events[i] != events[i]:
                rows.append((i + 1, "  events after: " + describe_ensemble(step),
                             str(ref_events[i]), str(events[i])))
        name = "larchd" if other_kind == "larch" else "zookeeper#2"
        if rows:
            lines = ["%d of %d steps differ (zookeeper ensemble vs %s ensemble):" % (
                len({r[0] for r in rows}), len(steps), name)]
            for n, what, want, got in rows:
                lines.append("#%-3d %s\n       zookeeper: %s\n       %-9s: %s" % (
                    n, what, want, name, got))
            self.fail("\n".join(lines))
        # every readall saw one answer on all members, in both ensembles
        for i, r in enumerate(ref_results):
            if "members differ" in r:
                self.fail("stock ZooKeeper members differ at step %d: %s" % (i + 1, r))
        n_events = sum(len(e) for ev in ref_events for e in ev.values())
        self.assertGreater(n_events, 15)
        print("\ndifferential: ensemble %d of %d steps identical (zookeeper %d-server vs %s "
              "%d-member ensemble), %d watch events compared" % (
                  len(steps), len(steps), ENSEMBLE_SIZE, name, ENSEMBLE_SIZE, n_events),
              flush=True)


if __name__ == "__main__":
    unittest.main()
