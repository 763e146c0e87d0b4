"""Dynamic reconfig (ZooKeeper's opcode 16) on larchd ensembles (issue 9):
kazoo's reconfig adds a server that was started outside the ensemble and
removes members (the leader among them), /zookeeper/config follows on every
member with ZooKeeper's text and version, the membership survives restarts
of every member, and refused requests get ZooKeeper's error codes and change
nothing.

Every process is started and stopped by PID (harness.Ensemble), every wait
is bounded.
"""

import os
import subprocess
import unittest

from kazoo.exceptions import BadArgumentsError, BadVersionError, NoAuthError

from harness import OP, SUPER_AUTH, Ensemble, Writer, connect_raw, sut_kind, wait_until
from test_ensemble import assert_digests_agree, stop_client
from test_ensemble import client as ensemble_client

RECONFIG_CFG = ["reconfigEnabled=true"]
ZKCLI = "/usr/share/zookeeper/bin/zkCli.sh"
ZKCLI_TIMEOUT_S = 60


def client(hosts, superuser=False):
    auth = [("digest", SUPER_AUTH.decode())] if superuser else None
    return ensemble_client(hosts, auth_data=auth)


def config_lines(data):
    """The server.N lines of /zookeeper/config's text, and its version."""
    lines = data.decode().splitlines()
    version = [l for l in lines if l.startswith("version=")]
    return sorted(l for l in lines if l.startswith("server.")), (
        version[0].split("=", 1)[1] if version else None)


@unittest.skipUnless(sut_kind() == "larch", "larchd ensembles only")
class ReconfigTest(unittest.TestCase):

    def tearDown(self):
        ens = getattr(self, "ens", None)
        if ens is not None:
            ens.stop()
            self.assertEqual(ens.sanitizer_report(), [])

    def start(self, n=3, spares=1, cfg_lines=RECONFIG_CFG):
        self.ens = Ensemble(n=n, spares=spares, cfg_lines=cfg_lines)
        self.ens.start()
        return self.ens

    def config_on(self, sid):
        c = client(self.ens.hosts([sid]))
        try:
            c.sync("/zookeeper/config")
            return c.get("/zookeeper/config")
        finally:
            stop_client(c)

    def wait_member(self, sid, leader_among):
        self.assertTrue(wait_until(
            lambda: self.ens.state(sid) in ("follower", "observer", "leader") and
            int(self.ens.mntr(sid).get("zk_larch_leader_id", 0)) in leader_among, 20.0),
            self.ens.stderr_tail(sid))

    def test_a_server_joins_then_the_leader_leaves(self):
        ens = self.start()
        leader = ens.wait_leader(among=ens.members)
        su = client(ens.hosts(ens.members), superuser=True)
        try:
            su.create("/before", b"1")
            joining = ens.server_line(4, 4)
            data, stat = su.reconfig(joining=joining, leaving=None, new_members=None)
            lines, version = config_lines(data)
            want = sorted([ens.server_line(4, i) for i in (1, 2, 3, 4)])
            self.assertEqual(lines, want)
            # the version is the zxid of the reconfig's txn, as in ZooKeeper
            self.assertEqual(int(version, 16), stat.mzxid)
            self.wait_member(4, {leader})
            for sid in ens.ids:
                got, st = self.config_on(sid)
                self.assertEqual(got, data, "server %d" % sid)
                self.assertEqual(st.mzxid, stat.mzxid)
            # the new member takes writes and serves reads like the others
            c4 = client(ens.hosts([4]))
            try:
                self.assertEqual(c4.get("/before")[0], b"1")
                c4.create("/via4", b"4")
            finally:
                stop_client(c4)
            assert_digests_agree(self, ens)

            # the leader leaves: it leads the change through, then steps down
            data, stat = su.reconfig(joining=None, leaving=str(leader), new_members=None,
                                     from_config=int(version, 16))
            lines, version = config_lines(data)
            rest = [i for i in ens.ids if i != leader]
            self.assertEqual(lines, sorted(ens.server_line(4, i) for i in rest))
        finally:
            stop_client(su)
        new_leader = ens.wait_leader(among=rest)
        self.assertNotEqual(new_leader, leader)
        # the server that left serves nobody: no leader speaks to it any more
        self.assertTrue(wait_until(
            lambda: ens.mntr(leader).get("zk_larch_serving") == 0, 20.0),
            ens.stderr_tail(leader))
        c = client(ens.hosts(rest))
        try:
            c.create("/after", b"2")
            for sid in rest:
                got, _ = self.config_on(sid)
                self.assertEqual(config_lines(got)[0], lines)
        finally:
            stop_client(c)
        for sid in rest:
            r = client(ens.hosts([sid]))
            try:
                r.sync("/")
                self.assertEqual(sorted(r.get_children("/")),
                                 ["after", "before", "via4", "zookeeper"])
            finally:
                stop_client(r)
        assert_digests_agree(self, ens, ids=rest)

    def test_membership_survives_restarts(self):
        """The members' zoo.cfg still names three servers; the data dirs
        hold the reconfig, and every member comes back with four."""
        ens = self.start()
        ens.wait_leader(among=ens.members)
        su = client(ens.hosts(ens.members), superuser=True)
        try:
            data, _ = su.reconfig(joining=ens.server_line(4, 4), leaving=None,
                                  new_members=None)
            su.create("/x", b"x")
        finally:
            stop_client(su)
        for sid in ens.ids:
            ens.kill(sid)
        for sid in ens.ids:
            ens.spawn(sid)
        for sid in ens.ids:
            ens.wait_serving(sid)
        leader = ens.wait_leader(among=ens.ids)
        for sid in ens.ids:
            self.wait_member(sid, {leader})
            got, _ = self.config_on(sid)
            self.assertEqual(config_lines(got)[0], config_lines(data)[0], "server %d" % sid)
        # four voters: one down still leaves a quorum of three
        down = [i for i in ens.ids if i != leader][0]
        ens.kill(down)
        c = client(ens.hosts([i for i in ens.ids if i != down]))
        try:
            c.create("/three-of-four", b"")
        finally:
            stop_client(c)

    def test_dynamic_config_file_follows(self):
        """With dynamicConfigFile, every member rewrites it when a reconfig
        applies (ZooKeeper's text, version line included), and a member
        restarted reads the new membership from it."""
        self.ens = Ensemble(n=3, spares=1, cfg_lines=RECONFIG_CFG, dynamic_file=True)
        ens = self.ens
        ens.start()
        ens.wait_leader(among=ens.members)
        su = client(ens.hosts(ens.members), superuser=True)
        try:
            data, _ = su.reconfig(joining=ens.server_line(4, 4), leaving=None,
                                  new_members=None)
        finally:
            stop_client(su)

        def written(sid):
            with open(ens.dynamic_path(sid), "rb") as f:
                return f.read()
        for sid in ens.ids:
            self.assertTrue(wait_until(lambda: written(sid) == data, 10.0),
                            "server %d: %r" % (sid, written(sid)))
        f = ens.members[-1]
        ens.kill(f)
        ens.restart(f)
        self.wait_member(f, {ens.wait_leader(among=ens.ids)})

    def test_refused_requests_change_nothing(self):
        ens = self.start(spares=0)
        ens.wait_leader()
        su = client(ens.hosts(), superuser=True)
        plain = client(ens.hosts())
        try:
            before = su.get("/zookeeper/config")
            with self.assertRaises(NoAuthError):
                plain.reconfig(joining=None, leaving="3", new_members=None)
            with self.assertRaises(BadVersionError):
                su.reconfig(joining=None, leaving="3", new_members=None, from_config=0x1234)
            with self.assertRaises(BadArgumentsError):
                su.reconfig(joining="server.x=127.0.0.1:1:2;3", leaving=None, new_members=None)
            with self.assertRaises(BadArgumentsError):  # one voter is no ensemble
                su.reconfig(joining=None, leaving="2,3", new_members=None)
            su.sync("/zookeeper/config")
            self.assertEqual(su.get("/zookeeper/config"), before)
            # and the ensemble is as it was: a write commits
            plain.create("/still", b"")
        finally:
            stop_client(su)
            stop_client(plain)

    def test_zkcli_reconfig_and_config(self):
        """The stock Java CLI: reconfig -remove as a superuser, then config
        shows the new membership with its version."""
        if not os.access(ZKCLI, os.X_OK):
            self.skipTest("%s not installed" % ZKCLI)
        ens = self.start(spares=0)
        leader = ens.wait_leader()
        gone = [i for i in ens.ids if i != leader][0]
        p = subprocess.run([ZKCLI, "-server", ens.hosts([leader])],
                           input="addauth digest %s\nreconfig -remove %d\nconfig\nquit\n" % (
                               SUPER_AUTH.decode(), gone),
                           capture_output=True, text=True, timeout=ZKCLI_TIMEOUT_S)
        out = p.stdout
        self.assertIn("Committed new configuration:", out, out[-3000:] + p.stderr[-2000:])
        data, stat = self.config_on(leader)
        lines = config_lines(data)[0]
        self.assertEqual([int(l.split("=")[0].split(".")[1]) for l in lines],
                         [i for i in ens.ids if i != gone])
        # printed twice: by reconfig, then by config, as every member reads it
        shown = sorted(l for l in out.splitlines() if l.startswith("server."))
        self.assertEqual(shown, sorted(lines * 2))
        self.assertEqual(out.count("version=%x" % stat.mzxid), 2)

    def test_reconfig_disabled(self):
        """Without reconfigEnabled=true the request is refused with
        ZooKeeper's RECONFIGDISABLED (-123), which kazoo cannot name: a raw
        client sends it."""
        ens = self.start(spares=0, cfg_lines=[])
        ens.wait_leader()
        raw = connect_raw(ens.client_ports[1])
        try:
            w = Writer()
            w.string(None)
            w.string("3")
            w.string(None)
            w.long(-1)
            rep = raw.call(OP["reconfig"], w.bytes())
            self.assertEqual(rep.err, -123)
        finally:
            raw.close()


if __name__ == "__main__":
    unittest.main()
