"""Ensembles of real larchd processes on loopback (issue 9): writes through
any member, reads from every member, failures answered in order, a leader
killed (SIGKILL) or paused (SIGSTOP) while kazoo clients write, restarts that
catch up from the log, and the start-up errors a member's configuration can
have. Every check that nothing was lost compares acknowledged writes with
what every member serves afterwards.

Every process is started and stopped by PID (harness.Ensemble), every wait
is bounded. Only larchd: stock ZooKeeper ensembles are the differential
test's business.
"""

import os
import signal
import subprocess
import threading
import time
import unittest

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NodeExistsError
from kazoo.handlers.threading import KazooTimeoutError

from harness import (OP, Ensemble, RawClient, ServerError, Writer, connect_raw, four_letter,
                     free_port, larchd_path, rewrite_txnlog_bytes, sut_kind, wait_until)

CONNECT_TIMEOUT_S = 15.0


def client(hosts, **kw):
    c = KazooClient(hosts=hosts, timeout=10.0, connection_retry={"max_tries": -1, "delay": 0.05,
                                                               "max_delay": 0.5}, **kw)
    c.start(timeout=CONNECT_TIMEOUT_S)
    return c


def stop_client(c):
    try:
        c.stop()
        c.close()
    except Exception:
        pass


def children_everywhere(ens, path, ids=None):
    """{sid: sorted children of path} read from each member after a sync."""
    out = {}
    for sid in ids or ens.ids:
        c = client(ens.hosts([sid]))
        try:
            c.sync(path)
            out[sid] = sorted(c.get_children(path))
        finally:
            stop_client(c)
    return out


def assert_digests_agree(test, ens, ids=None, diverged=()):
    """Once the listed members (default: all) have applied the same zxid,
    their tree digests are equal (mntr zk_larch_digest at
    zk_larch_digest_zxid, published between applies), and none but those
    in diverged ever found its digest differ from its leader's."""
    ids = ids or ens.ids
    for sid in ids:
        if sid not in diverged:
            test.assertEqual(ens.mntr(sid).get("zk_digest_mismatches_count"), 0,
                             "server %d: %s" % (sid, ens.stderr_tail(sid)))
    seen = {}

    def same_zxid():
        seen.clear()
        for sid in ids:
            m = ens.mntr(sid)
            seen[sid] = (m["zk_larch_digest_zxid"], m["zk_larch_digest"])
        return len({z for z, _ in seen.values()}) == 1
    test.assertTrue(wait_until(same_zxid, 20.0), "members never reached one zxid: %s" % seen)
    test.assertEqual(len({d for _, d in seen.values()}), 1, "digests differ: %s" % seen)


def last_zxids(ens, ids):
    return {sid: ens.mntr(sid).get("zk_larch_last_zxid") for sid in ids}


@unittest.skipUnless(sut_kind() == "larch", "larchd ensembles only")
class EnsembleTest(unittest.TestCase):

    def tearDown(self):
        ens = getattr(self, "ens", None)
        if ens is not None:
            ens.stop()
            self.assertEqual(ens.sanitizer_report(), [])

    def start(self, n=3, **kw):
        self.ens = Ensemble(n=n, **kw)
        self.ens.start()
        return self.ens

    def test_every_member_serves_what_any_member_took(self):
        ens = self.start(3)
        leader = ens.wait_leader()
        follower = [i for i in ens.ids if i != leader][0]
        states = sorted(ens.state(i) for i in ens.ids)
        self.assertEqual(states, ["follower", "follower", "leader"])
        a = client(ens.hosts([follower]))
        try:
            a.create("/e", b"root")
            for i in range(50):
                a.create("/e/n%02d" % i, b"%d" % i)
            # a failure through a follower is answered, in order, by it
            with self.assertRaises(NodeExistsError):
                a.create("/e/n00", b"again")
            a.set("/e/n01", b"changed")
            eph = a.create("/e/eph", b"", ephemeral=True, sequence=True)
            # the session was made through this follower: its id names it
            self.assertEqual(a.client_id[0] >> 56, follower)
            seen = children_everywhere(ens, "/e")
            want = sorted(["n%02d" % i for i in range(50)] + [eph.rsplit("/", 1)[1]])
            self.assertEqual(seen, {sid: want for sid in ens.ids})
            for sid in ens.ids:
                c = client(ens.hosts([sid]))
                try:
                    c.sync("/")
                    self.assertEqual(c.get("/e/n01")[0], b"changed")
                finally:
                    stop_client(c)
        finally:
            stop_client(a)
        # the ephemeral went with its session, on every member
        self.assertEqual(children_everywhere(ens, "/e"),
                         {sid: ["n%02d" % i for i in range(50)] for sid in ens.ids})
        # conf names this member and lists the membership, as ZooKeeper's does
        conf = four_letter(ens.client_ports[follower], "conf").decode()
        self.assertIn("serverId=%d\n" % follower, conf)
        for sid in ens.ids:
            self.assertIn("server.%d=127.0.0.1:%d:" % (sid, ens.quorum_ports[sid]), conf)
        # /zookeeper/config reads as each member's membership, in ZooKeeper's
        # text with the version line (zkCli's "config" prints it): what a
        # stock 3.8 ensemble shows for a static membership
        for sid in ens.ids:
            want = "".join("server.%d=127.0.0.1:%d:%d:participant\n" % (
                other, ens.peer_port(sid, other), ens.election_ports[other])
                for other in ens.ids) + "version=0"
            c = client(ens.hosts([sid]))
            try:
                data, stat = c.get("/zookeeper/config")
                self.assertEqual(data.decode(), want)
                self.assertEqual(stat.dataLength, len(want))
                self.assertEqual(stat.version, -1)
                self.assertGreater(stat.mtime, 0)
            finally:
                stop_client(c)
        m = ens.mntr(leader)
        self.assertEqual(m["zk_peer_state"], "leading - broadcast")
        # synced: a follower has acked the leader's last entry, which the
        # clients' closeSession txns just moved on: true again once they ack
        synced = wait_until(lambda: ens.mntr(leader)["zk_synced_followers"] == 2, 20.0)
        self.assertTrue(synced, "followers never caught up: %s" % ens.mntr(leader))
        self.assertGreater(int(ens.mntr(follower)["zk_larch_forwards_sent"]), 50)

    def test_pipelined_writes_keep_their_order_on_every_member(self):
        # A client that does not wait for its writes' answers: through a
        # follower they go to the leader one after the other, before the
        # first is answered. They must commit in the order sent, be answered
        # in that order, and a read or a sync behind them must see them all
        # (invariant 2, DESIGN.md).
        ens = self.start(3)
        ens.wait_leader()
        for sid in ens.ids:
            c = connect_raw(ens.client_ports[sid], timeout_ms=30000)
            try:
                path = "/pipe%d" % sid
                self.assertEqual(c.create(path, b"").err, 0)
                sent = []  # (xid, what, the value a read must see)
                for i in range(1, 301):
                    if i % 50 == 25:
                        sent.append((c.send_request(OP["sync"], Writer().string(path).bytes()),
                                     "sync", None))
                    elif i % 10 == 0:
                        sent.append((c.send_request(OP["getData"],
                                                    Writer().string(path).bool(False).bytes()),
                                     "get", sent_value))
                    else:
                        sent_value = b"%d" % i
                        sent.append((c.send_request(OP["setData"], Writer().string(path)
                                                    .buffer(sent_value).int(-1).bytes()),
                                     "set", sent_value))
                version = 0
                for xid, what, value in sent:
                    rep = c.read_one(20.0)
                    self.assertEqual(rep.xid, xid, "server %d: replies out of order" % sid)
                    self.assertEqual(rep.err, 0, "server %d: %s xid %d" % (sid, what, xid))
                    if what == "set":
                        version += 1
                        self.assertEqual(rep.body.stat().version, version,
                                         "server %d: setData committed out of order" % sid)
                    elif what == "get":
                        self.assertEqual(rep.body.buffer(), value,
                                         "server %d: a read missed the writes before it" % sid)
            finally:
                c.close()
        assert_digests_agree(self, ens)

    def test_leader_killed_while_clients_write(self):
        """SIGKILL of the leader under load: writes resume through the others,
        no acknowledged write is lost, and the killed server rejoins and
        catches up from the log."""
        ens = self.start(3)
        leader = ens.wait_leader()
        others = [i for i in ens.ids if i != leader]
        acked, stop = [], threading.Event()
        failures = []

        def writer(hosts, tag):
            c = client(hosts)
            n = 0
            try:
                while not stop.is_set():
                    path = "/w/%s-%d" % (tag, n)
                    try:
                        c.create(path, b"x", makepath=True)
                        acked.append(path)
                        n += 1
                    except NodeExistsError:
                        acked.append(path)  # an earlier attempt committed
                        n += 1
                    except (KazooException, KazooTimeoutError):
                        time.sleep(0.02)
            except Exception as e:  # noqa: BLE001 - reported below
                failures.append(repr(e))
            finally:
                stop_client(c)

        threads = [threading.Thread(target=writer, args=(ens.hosts(), "t%d" % k))
                   for k in range(2)]
        for t in threads:
            t.start()
        try:
            self.assertTrue(wait_until(lambda: len(acked) >= 40, 20.0), "no writes before kill")
            ens.kill(leader)
            before = len(acked)
            new_leader = ens.wait_leader(among=others)
            self.assertNotEqual(new_leader, leader)
            self.assertTrue(wait_until(lambda: len(acked) >= before + 40, 20.0),
                            "writes did not resume after the leader died")
        finally:
            stop.set()
            for t in threads:
                t.join(timeout=30)
        self.assertEqual(failures, [])
        seen = children_everywhere(ens, "/w", others)
        want = sorted(p.rsplit("/", 1)[1] for p in acked)
        for sid in others:
            missing = set(want) - set(seen[sid])
            self.assertEqual(missing, set(), "server %d lost acknowledged writes" % sid)
        # the old leader comes back as a follower and catches up
        ens.restart(leader)
        ens.wait_leader()
        self.assertTrue(wait_until(lambda: len(set(last_zxids(ens, ens.ids).values())) == 1,
                                   20.0), last_zxids(ens, ens.ids))
        seen = children_everywhere(ens, "/w")
        self.assertEqual(seen[leader], seen[others[0]])
        self.assertEqual(ens.state(leader), "follower")
        assert_digests_agree(self, ens)

    def test_session_survives_its_servers_death(self):
        """A client whose server dies reattaches through another member with
        the same session (the password its createSession recorded is the one
        every member checks), keeps its ephemerals and goes on writing."""
        ens = self.start(3)
        leader = ens.wait_leader()
        # the client's server is the leader: its death also forces an election
        order = [leader] + [i for i in ens.ids if i != leader]
        c = client(ens.hosts(order), randomize_hosts=False)
        try:
            sid = c.client_id[0]
            self.assertEqual(sid >> 56, leader)
            c.create("/moved", b"", ephemeral=True)
            ens.kill(leader)
            others = order[1:]
            ens.wait_leader(among=others)
            self.assertTrue(wait_until(lambda: c.connected, 20.0))
            c.create("/after-move", b"")
            self.assertEqual(c.client_id[0], sid)
            self.assertIsNotNone(c.exists("/moved"))
        finally:
            stop_client(c)
        # closing it (through its new server) removes the ephemeral everywhere
        seen = children_everywhere(ens, "/", others)
        for sid_ in others:
            self.assertNotIn("moved", seen[sid_])
            self.assertIn("after-move", seen[sid_])

    def test_paused_leader_cannot_split_the_brain(self):
        """SIGSTOP of the leader: the others elect a new one and take writes;
        when the old leader resumes it steps down, learns what was written
        meanwhile, and never acknowledges a write of its own term."""
        ens = self.start(3)
        leader = ens.wait_leader()
        others = [i for i in ens.ids if i != leader]
        stale = client(ens.hosts([leader]))
        try:
            stale.create("/p", b"")
            ens.kill(leader, signal.SIGSTOP)
            new_leader = ens.wait_leader(among=others)
            c = client(ens.hosts(others))
            try:
                for i in range(20):
                    c.create("/p/during-%d" % i, b"")
            finally:
                stop_client(c)
            ens.kill(leader, signal.SIGCONT)
            # the old leader's client may write again only through the new
            # leader's log: its write lands, and nothing it wrote is lost
            self.assertTrue(wait_until(lambda: ens.state(leader) == "follower", 20.0))
            stale.create("/p/after", b"")
        finally:
            stop_client(stale)
        self.assertEqual(ens.wait_leader(), new_leader)
        seen = children_everywhere(ens, "/p")
        want = sorted(["during-%d" % i for i in range(20)] + ["after"])
        self.assertEqual(seen, {sid: want for sid in ens.ids})
        assert_digests_agree(self, ens)

    def test_follower_restart_catches_up(self):
        ens = self.start(3)
        leader = ens.wait_leader()
        f = [i for i in ens.ids if i != leader][0]
        c = client(ens.hosts([leader]))
        try:
            c.create("/r", b"")
            ens.kill(f)
            for i in range(30):
                c.create("/r/n%d" % i, b"")
            ens.restart(f)
            self.assertTrue(wait_until(lambda: ens.state(f) == "follower", 20.0))
        finally:
            stop_client(c)
        seen = children_everywhere(ens, "/r")
        self.assertEqual(seen[f], sorted("n%d" % i for i in range(30)))
        assert_digests_agree(self, ens)

    # snapCount=50: the leader snapshots every 50 txns; commitLogCount=10:
    # it keeps only 10 txns before its newest snapshot in memory, so a
    # follower 100 txns behind needs the snapshot (catch-up by SNAP).
    SNAP_CFG = ("snapCount=50", "commitLogCount=10")

    def wait_compacted_past(self, ens, leader, zxid):
        """Until the leader's in-memory log starts after zxid."""
        self.assertTrue(wait_until(
            lambda: int(ens.mntr(leader)["zk_larch_log_start_zxid"], 16) > zxid, 20.0),
            "the leader never compacted its log past 0x%x: %s" % (zxid, ens.mntr(leader)))

    def test_follower_behind_the_compacted_log_gets_a_snapshot(self):
        """A follower down while the leader wrote and compacted its log comes
        back through a snapshot transfer: it installs it durably, serves the
        same data, and recovers from it after a restart of its own."""
        ens = self.start(3, cfg_lines=self.SNAP_CFG)
        leader = ens.wait_leader()
        f = [i for i in ens.ids if i != leader][0]
        c = client(ens.hosts([leader]))
        try:
            c.create("/s", b"")
            c.sync("/s")
            self.assertTrue(wait_until(lambda: ens.mntr(f)["zk_larch_last_zxid"] ==
                                       ens.mntr(leader)["zk_larch_last_zxid"], 10.0))
            behind = int(ens.mntr(f)["zk_larch_last_zxid"], 16)
            ens.kill(f)
            for i in range(150):
                c.create("/s/n%03d" % i, b"v%d" % i)
            self.wait_compacted_past(ens, leader, behind)
            ens.restart(f)
            self.assertTrue(wait_until(
                lambda: ens.mntr(f).get("zk_larch_snapshots_installed") == 1, 20.0),
                ens.stderr_tail(f))
            # writes after the snapshot reach it as entries
            for i in range(150, 160):
                c.create("/s/n%03d" % i, b"v%d" % i)
        finally:
            stop_client(c)
        self.assertGreaterEqual(int(ens.mntr(leader)["zk_larch_snapshots_sent"]), 1)
        want = sorted("n%03d" % i for i in range(160))
        self.assertEqual(children_everywhere(ens, "/s"), {sid: want for sid in ens.ids})
        assert_digests_agree(self, ens)
        # it restarts from the snapshot it was sent, plus its log after it
        ens.kill(f)
        ens.restart(f)
        self.assertTrue(wait_until(lambda: ens.state(f) == "follower", 20.0))
        r = client(ens.hosts([f]))
        try:
            r.sync("/s")
            self.assertEqual(sorted(r.get_children("/s")), want)
            self.assertEqual(r.get("/s/n042")[0], b"v42")
            self.assertEqual(r.get("/s/n155")[0], b"v155")
        finally:
            stop_client(r)

    def test_diverged_follower_resyncs_from_the_leader(self):
        """A follower whose tree differs from the leader's at the same zxid
        finds out from the digest on the leader's APPENDs: it says so, stops
        serving, and rebuilds from the leader's snapshot (which the leader,
        holding none, takes for it), keeping its log. The divergence is made
        as a bug or a fault no checksum caught would make it: a value in the
        stopped follower's txn log is changed and its record's CRC made to
        fit, so it replays a tree the leader never had."""
        ens = self.start(3)
        leader = ens.wait_leader()
        f = [i for i in ens.ids if i != leader][0]
        c = client(ens.hosts([leader]))
        try:
            c.create("/d", b"value-GOOD-0001")
            for i in range(10):
                c.create("/d/n%02d" % i, b"x")
            c.sync("/d")
            self.assertTrue(wait_until(lambda: ens.mntr(f)["zk_larch_last_zxid"] ==
                                       ens.mntr(leader)["zk_larch_last_zxid"], 10.0))
            ens.kill(f)
            self.assertEqual(rewrite_txnlog_bytes(ens.dir_of(f), b"value-GOOD-0001",
                                                  b"value-EVIL-0001"), 1)
            ens.restart(f)
            # the digests compare past what it replayed: the next writes
            for i in range(10, 20):
                c.create("/d/n%02d" % i, b"x")
            self.assertTrue(wait_until(
                lambda: ens.mntr(f).get("zk_larch_snapshots_installed") == 1 and
                ens.mntr(f).get("zk_larch_resyncing") == 0, 30.0), ens.stderr_tail(f))
        finally:
            stop_client(c)
        m = ens.mntr(f)
        self.assertEqual(m["zk_digest_mismatches_count"], 1)
        self.assertGreaterEqual(m["zk_larch_digest_checks"], 1)
        self.assertIn("DIGEST MISMATCH", ens.stderr_tail(f))
        assert_digests_agree(self, ens, diverged=(f,))
        want = sorted("n%02d" % i for i in range(20))
        self.assertEqual(children_everywhere(ens, "/d"), {sid: want for sid in ens.ids})
        r = client(ens.hosts([f]))
        try:
            r.sync("/d")
            self.assertEqual(r.get("/d")[0], b"value-GOOD-0001")
        finally:
            stop_client(r)
        # a restart recovers from the leader's snapshot, not the bad record
        ens.kill(f)
        ens.restart(f)
        self.assertTrue(wait_until(lambda: ens.state(f) == "follower", 20.0))
        r = client(ens.hosts([f]))
        try:
            r.sync("/d")
            self.assertEqual(r.get("/d")[0], b"value-GOOD-0001")
        finally:
            stop_client(r)
        self.assertEqual(ens.mntr(f)["zk_digest_mismatches_count"], 0)

    def test_follower_with_an_empty_disk_gets_a_snapshot(self):
        """A member whose data dir was lost (disk replaced: only myid left)
        rejoins with the leader's snapshot, sessions and ephemerals included."""
        ens = self.start(3, cfg_lines=self.SNAP_CFG)
        leader = ens.wait_leader()
        f = [i for i in ens.ids if i != leader][0]
        c = client(ens.hosts([leader]))
        try:
            c.create("/e", b"")
            c.create("/e/mine", b"x", ephemeral=True)
            for i in range(120):
                c.create("/e/n%03d" % i, b"")
            self.wait_compacted_past(ens, leader, 0)
            ens.kill(f)
            data = os.path.join(ens.dir_of(f), "data")
            for name in os.listdir(data):
                if name != "myid":
                    subprocess.run(["rm", "-rf", os.path.join(data, name)], check=True)
            ens.restart(f)
            self.assertTrue(wait_until(
                lambda: ens.mntr(f).get("zk_larch_snapshots_installed") == 1, 20.0),
                ens.stderr_tail(f))
            # the session lives on the new member too: reattaching there works
            sid, passwd = c.client_id
            again = KazooClient(hosts=ens.hosts([f]), client_id=(sid, passwd), timeout=10.0)
            again.start(timeout=CONNECT_TIMEOUT_S)
            try:
                again.sync("/e")
                self.assertEqual(again.get("/e/mine")[1].ephemeralOwner, sid)
                self.assertEqual(sorted(again.get_children("/e")),
                                 sorted(["mine"] + ["n%03d" % i for i in range(120)]))
            finally:
                again.stop()
                again.close()
        finally:
            stop_client(c)
        # the session closed (through the new member): its ephemeral went everywhere
        want = sorted("n%03d" % i for i in range(120))
        self.assertEqual(children_everywhere(ens, "/e"), {sid: want for sid in ens.ids})
        assert_digests_agree(self, ens)

    def test_snapshot_is_durable_before_its_ack(self):
        """ZOOKEEPER-3642: a follower acknowledged a snapshot before it was
        on disk, so a crash lost what a quorum had acknowledged. Here the
        follower that installs the snapshot is the one the next write's
        quorum depends on; it and the leader are then SIGKILLed, and the two
        members left (one never saw the data) must serve every
        acknowledged write."""
        ens = self.start(3, cfg_lines=self.SNAP_CFG)
        leader = ens.wait_leader()
        f, g = [i for i in ens.ids if i != leader]
        c = client(ens.hosts([leader]))
        try:
            c.create("/d", b"")
            c.sync("/d")
            self.assertTrue(wait_until(lambda: ens.mntr(f)["zk_larch_last_zxid"] ==
                                       ens.mntr(leader)["zk_larch_last_zxid"], 10.0))
            behind = int(ens.mntr(f)["zk_larch_last_zxid"], 16)
            ens.kill(f)
            for i in range(150):
                c.create("/d/n%03d" % i, b"")
            self.wait_compacted_past(ens, leader, behind)
            ens.kill(g)
            ens.restart(f)  # the leader's only partner: it must take the snapshot
            self.assertTrue(wait_until(
                lambda: ens.mntr(f).get("zk_larch_snapshots_installed") == 1, 20.0),
                ens.stderr_tail(f))
            c.create("/d/after", b"")  # acknowledged by leader + f
        finally:
            stop_client(c)
        ens.kill(f)
        ens.kill(leader)
        ens.restart(g)
        ens.restart(f)
        ens.wait_leader(among=[f, g])
        want = sorted(["n%03d" % i for i in range(150)] + ["after"])
        self.assertEqual(children_everywhere(ens, "/d", ids=[f, g]), {f: want, g: want})
        assert_digests_agree(self, ens, [f, g])

    def test_watch_set_before_a_snapshot_fires_after_it(self):
        """A client of a follower that is cut off while the leader compacts
        its log past it loses its connection (no leader: the follower
        stops serving), keeps its session, and when it reattaches after the
        follower installed the snapshot, setWatches from the zxid it had
        seen fires its data watch for what changed meanwhile."""
        ens = self.start(3, cfg_lines=self.SNAP_CFG + ("minSessionTimeout=20000",
                                                      "maxSessionTimeout=30000"),
                         proxied=True)
        leader = ens.wait_leader()
        f = [i for i in ens.ids if i != leader][0]
        c = client(ens.hosts([leader]))
        try:
            c.create("/w", b"old")
            r = connect_raw(ens.client_ports[f], timeout_ms=20000)
            r.sync("/w")
            got = r.get_data("/w", watch=True)
            self.assertEqual(got.err, 0)
            seen, session = r.last_zxid, r.session
            behind = int(ens.mntr(f)["zk_larch_last_zxid"], 16)
            ens.isolate(f)
            self.assertTrue(r.wait_closed(10.0), "a follower without a leader kept serving")
            r.close()
            c.set("/w", b"new")
            for i in range(150):
                c.create("/w-n%03d" % i, b"")
            self.wait_compacted_past(ens, leader, behind)
            ens.heal()
            self.assertTrue(wait_until(
                lambda: ens.mntr(f).get("zk_larch_snapshots_installed") == 1, 20.0),
                ens.stderr_tail(f))
            self.assertTrue(wait_until(lambda: ens.state(f) == "follower", 10.0))
            r = RawClient(ens.client_ports[f])
            try:
                again = r.connect(timeout_ms=20000, session_id=session.session_id,
                                  passwd=session.passwd, last_zxid=seen)
                self.assertEqual(again.session_id, session.session_id)
                self.assertGreater(again.timeout_ms, 0)
                self.assertEqual(r.set_watches(seen, data=["/w"]).err, 0)
                ev = r.wait_event(10.0, pred=lambda e: e.path == "/w")
                self.assertIsNotNone(ev, "the watch never fired")
                self.assertEqual(ev.type, 3)  # NodeDataChanged
                self.assertEqual(r.get_data("/w").value[0], b"new")
            finally:
                r.close()
        finally:
            stop_client(c)

    def test_read_only_mode_serves_readers_of_a_cut_off_member(self):
        """readonlymode.enabled: a member cut off from the quorum serves the
        clients that allow read-only (kazoo read_only=True): reads of what it
        has, NotReadOnly for writes, isro "ro", srvr Mode: read-only. A
        client that does not allow it is refused. When the member rejoins,
        its read-only clients are dropped and reconnect read-write."""
        from kazoo.exceptions import NotReadOnlyCallError
        from kazoo.protocol.states import KeeperState
        ens = self.start(3, cfg_lines=("readonlymode.enabled=true",
                                       "minSessionTimeout=20000", "maxSessionTimeout=30000"),
                         proxied=True)
        leader = ens.wait_leader()
        f = [i for i in ens.ids if i != leader][0]
        c = client(ens.hosts([leader]))
        try:
            c.create("/ro", b"before")
            c.sync("/ro")
            self.assertTrue(wait_until(lambda: ens.mntr(f)["zk_larch_last_zxid"] ==
                                       ens.mntr(leader)["zk_larch_last_zxid"], 10.0))
            ens.isolate(f)
            self.assertTrue(wait_until(
                lambda: four_letter(ens.client_ports[f], "isro") == b"ro", 10.0))
            self.assertIn(b"Mode: read-only", four_letter(ens.client_ports[f], "srvr"))
            self.assertEqual(ens.mntr(f)["zk_server_state"], "read-only")
            ro = KazooClient(hosts=ens.hosts([f]), read_only=True, timeout=20.0)
            ro.start(timeout=CONNECT_TIMEOUT_S)
            try:
                self.assertEqual(ro.client_state, KeeperState.CONNECTED_RO)
                self.assertEqual(ro.get("/ro")[0], b"before")
                with self.assertRaises(NotReadOnlyCallError):
                    ro.create("/ro/x", b"")
                with self.assertRaises(NotReadOnlyCallError):
                    ro.set("/ro", b"no")
                # a client that does not allow read-only is refused
                rw = KazooClient(hosts=ens.hosts([f]), timeout=20.0)
                with self.assertRaises(KazooTimeoutError):
                    rw.start(timeout=2.0)
                rw.stop()
                rw.close()
                c.set("/ro", b"after")  # the majority goes on
                ens.heal()
                # dropped when the member has a leader again: it reconnects read-write
                self.assertTrue(wait_until(lambda: ro.client_state == KeeperState.CONNECTED,
                                           20.0), ro.client_state)
                ro.sync("/ro")
                self.assertEqual(ro.get("/ro")[0], b"after")
                self.assertEqual(four_letter(ens.client_ports[f], "isro"), b"rw")
            finally:
                ro.stop()
                ro.close()
        finally:
            stop_client(c)

    def test_zxid_counter_rollover_starts_a_new_term(self):
        """ZOOKEEPER-1277: when the zxid counter of an epoch runs out, the
        leader must not wrap it into the epoch bits. larch.zxidCounterLimit
        makes the limit small: the leader steps down before passing it, a
        new term starts, and writes go on; none acknowledged is lost and
        no counter passes the limit."""
        from kazoo.retry import KazooRetry
        limit = 40
        ens = self.start(3, cfg_lines=("larch.zxidCounterLimit=%d" % limit,))
        ens.wait_leader()
        c = client(ens.hosts(), command_retry={"max_tries": 50, "delay": 0.05,
                                               "max_delay": 0.5})
        retry = KazooRetry(max_tries=50, delay=0.05, max_delay=0.5)
        term0 = max(int(ens.mntr(i)["zk_larch_term"]) for i in ens.ids)
        try:
            c.create("/z", b"")
            for i in range(150):
                try:
                    retry(c.create, "/z/n%03d" % i, b"")
                except NodeExistsError:
                    pass  # an earlier try took effect; its answer was lost
        finally:
            stop_client(c)
        want = sorted("n%03d" % i for i in range(150))
        self.assertEqual(children_everywhere(ens, "/z"), {sid: want for sid in ens.ids})
        assert_digests_agree(self, ens)
        for sid in ens.ids:
            m = ens.mntr(sid)
            self.assertGreaterEqual(int(m["zk_larch_term"]), term0 + 3, m)
            self.assertLessEqual(int(m["zk_larch_last_zxid"], 16) & 0xffffffff, limit, m)

    def test_peer_links_detect_a_vanished_peer(self):
        """Peer links carry TCP keepalive (and TCP_USER_TIMEOUT) so that a
        peer gone without a FIN is noticed within two election timeouts,
        not after TCP's 15 minutes: every established peer socket, on both
        ends of every link, shows a keepalive timer in ss."""
        ens = self.start(3)
        ens.wait_leader()
        ports = sorted(ens.quorum_ports.values())
        flt = " or ".join("sport = :%d or dport = :%d" % (p, p) for p in ports)
        shown = set()
        seen_all = set()

        def every_socket_has_shown_keepalive():
            out = subprocess.run(["ss", "-tnoH", "state", "established", "( %s )" % flt],
                                 capture_output=True, text=True, timeout=10).stdout
            for line in out.splitlines():
                f = line.split()
                key = (f[2], f[3])  # local, peer address: one socket
                seen_all.add(key)
                if "timer:(keepalive" in line:
                    shown.add(key)
            # three links, both ends on this host
            return len(seen_all) >= 6 and shown >= seen_all
        self.assertTrue(wait_until(every_socket_has_shown_keepalive, 10.0, interval_s=0.2),
                        "sockets %s, with keepalive %s" % (sorted(seen_all), sorted(shown)))

    def test_sync_whose_read_index_is_lost_fails_in_time(self):
        """A follower whose messages to the leader are silently lost (it
        still hears the leader, so it keeps serving) cannot get a sync's
        ReadIndex answered: after the forwarded-request timeout it closes
        the connection, so the client goes to another member, instead of
        leaving the sync, and everything the client sends after it,
        unanswered for the whole partition."""
        ens = self.start(3, proxied=True, cfg_lines=("maxSessionTimeout=30000",))
        leader = ens.wait_leader()
        f = [i for i in ens.ids if i != leader][0]
        r = connect_raw(ens.client_ports[f], timeout_ms=30000)
        try:
            self.assertEqual(r.create("/q", b"").err, 0)
            ens.one_way([f], [leader])
            t0 = time.monotonic()
            r.send_request(OP["sync"], Writer().string("/q").bytes())
            self.assertTrue(r.wait_closed(15.0), "the sync hung with its connection open")
            self.assertLess(time.monotonic() - t0, 15.0)
        finally:
            ens.heal()
            r.close()

    def test_five_members_survive_two_failures(self):
        ens = self.start(5)
        leader = ens.wait_leader()
        down = [i for i in ens.ids if i != leader][:2]
        for sid in down:
            ens.kill(sid)
        up = [i for i in ens.ids if i not in down]
        c = client(ens.hosts(up))
        try:
            for i in range(10):
                c.create("/five-%d" % i, b"")
        finally:
            stop_client(c)
        self.assertEqual(ens.wait_leader(among=up), leader)
        # a third failure leaves no quorum: writes wait (and time out here)
        ens.kill(leader)
        survivors = [i for i in up if i != leader]
        c = KazooClient(hosts=ens.hosts(survivors), timeout=4.0)
        try:
            c.start(timeout=4.0)  # no quorum: a new session may not even be made
            with self.assertRaises((KazooException, KazooTimeoutError)):
                c.create("/no-quorum", b"")
        except KazooTimeoutError:
            pass  # no member would even take the session: as good
        finally:
            stop_client(c)
        ens.restart(down[0])
        ens.wait_leader(among=survivors + [down[0]])
        seen = children_everywhere(ens, "/", survivors + [down[0]])
        for sid, kids in seen.items():
            self.assertNotIn("no-quorum", kids)
            self.assertTrue(all("five-%d" % i in kids for i in range(10)), (sid, kids))

    def test_observer_serves_and_never_votes(self):
        """An observer (server.N ...:observer) takes reads and writes for its
        clients and follows the log, but is never counted: with two of three
        voters down there is no quorum, observer or not."""
        ens = self.start(4, observers=1)
        leader = ens.wait_leader()
        self.assertEqual(ens.state(4), "observer")
        self.assertNotEqual(leader, 4)
        o = client(ens.hosts([4]))
        try:
            for i in range(10):
                o.create("/obs-%d" % i, b"")
        finally:
            stop_client(o)
        seen = children_everywhere(ens, "/")
        for sid in ens.ids:
            self.assertTrue(all("obs-%d" % i in seen[sid] for i in range(10)), (sid, seen[sid]))
        voters = [i for i in (1, 2, 3) if i != leader]
        for sid in voters:
            ens.kill(sid)
        c = KazooClient(hosts=ens.hosts([4]), timeout=4.0)
        try:
            c.start(timeout=4.0)  # no quorum: a new session may not even be made
            with self.assertRaises((KazooException, KazooTimeoutError)):
                c.create("/obs-no-quorum", b"")
        except KazooTimeoutError:
            pass
        finally:
            stop_client(c)
        for sid in voters:
            ens.restart(sid)
        ens.wait_leader()
        seen = children_everywhere(ens, "/")
        self.assertNotIn("obs-no-quorum", seen[4])


@unittest.skipUnless(sut_kind() == "larch", "larchd ensembles only")
class MemberConfigTest(unittest.TestCase):
    """What a member's configuration can get wrong is an error naming it."""

    def run_larchd(self, lines, myid=None):
        import tempfile
        d = tempfile.mkdtemp(prefix="larch-it-member-")
        try:
            data = os.path.join(d, "data")
            os.mkdir(data)
            if myid is not None:
                with open(os.path.join(data, "myid"), "w") as f:
                    f.write(myid)
            cfg = os.path.join(d, "zoo.cfg")
            with open(cfg, "w") as f:
                f.write("\n".join(["dataDir=%s" % data, "clientPort=%d" % free_port()] + lines)
                        + "\n")
            p = subprocess.run([larchd_path(), "--config", cfg], capture_output=True,
                               timeout=20, cwd=d)
            return p.returncode, p.stderr.decode(), data
        finally:
            import shutil
            shutil.rmtree(d, ignore_errors=True)

    def servers(self):
        return ["tickTime=200", "initLimit=5", "syncLimit=2",
                "server.1=127.0.0.1:%d:%d" % (free_port(), free_port()),
                "server.2=127.0.0.1:%d:%d" % (free_port(), free_port())]

    def test_missing_myid(self):
        rc, err, data = self.run_larchd(self.servers())
        self.assertNotEqual(rc, 0)
        self.assertIn(os.path.join(data, "myid") + ": cannot open", err)

    def test_myid_not_listed(self):
        rc, err, _ = self.run_larchd(self.servers(), myid="7\n")
        self.assertNotEqual(rc, 0)
        self.assertIn("myid 7", err)
        self.assertIn("is not listed in any server.N line", err)

    def test_sync_limit_missing(self):
        lines = [l for l in self.servers() if not l.startswith("syncLimit")]
        rc, err, _ = self.run_larchd(lines, myid="1")
        self.assertNotEqual(rc, 0)
        self.assertIn("syncLimit is not set", err)


if __name__ == "__main__":
    unittest.main()
