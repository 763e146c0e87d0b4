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

from harness import (Ensemble, ServerError, four_letter, free_port, larchd_path, sut_kind,
                     wait_until)

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
        m = ens.mntr(leader)
        self.assertEqual(m["zk_peer_state"], "leading - broadcast")
        self.assertEqual(m["zk_synced_followers"], 2)
        self.assertGreater(int(ens.mntr(follower)["zk_larch_forwards_sent"]), 50)

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
