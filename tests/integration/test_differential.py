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
"""

import unittest

from harness import (ADD_WATCH_PERSISTENT, ADD_WATCH_PERSISTENT_RECURSIVE,
                     CONTAINER, EPHEMERAL, EPHEMERAL_SEQUENTIAL, OPEN_ACL,
                     PERM_ADMIN, PERM_ALL, PERM_CREATE, PERM_READ, PERM_WRITE,
                     PERSISTENT, PERSISTENT_SEQUENTIAL, PERSISTENT_WITH_TTL,
                     WATCHER_ANY, WATCHER_CHILDREN, WATCHER_DATA,
                     Server, Stat, connect_raw, err_name, sut_kind)

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


if __name__ == "__main__":
    unittest.main()
