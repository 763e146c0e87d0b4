"""ZooKeeper's AdminServer as larchd serves it: every command read with
curl and parsed as JSON, checked for ZooKeeper 3.9's member names and
JSON types, against the four-letter words' answers, and as kazoo's
writes move it; aliases, the unknown-command answer, the command list,
the commands not served, and the configuration larchd refuses."""

import json
import os
import re
import signal
import socket
import subprocess
import tempfile
import unittest

from harness import (SANITIZER_MARKERS, Ensemble, Server, ServerTestCase, four_letter,
                     free_port,
                     larch_ensemble_size, larchd_path, parse_mntr, sut_kind, unique_path,
                     wait_until)

ADMIN_LINES = ["admin.enableServer=true", "admin.serverAddress=127.0.0.1",
               "admin.serverPort=0"]
NOT_SERVING = "This ZooKeeper instance is not currently serving requests"

# ZooKeeper 3.9's commands served: primary name -> aliases (Commands.java).
SERVED = {
    "configuration": ["conf", "config"], "connection_stat_reset": ["crst"],
    "connections": ["cons"], "dirs": [], "dump": [], "environment": ["env", "envi"],
    "get_trace_mask": ["gtmk"], "hash": [], "initial_configuration": ["icfg"],
    "is_read_only": ["isro"], "last_snapshot": ["lsnp"], "leader": ["lead"],
    "monitor": ["mntr"], "observers": ["obsr"], "ruok": [], "server_stats": ["srvr"],
    "stat_reset": ["srst"], "stats": ["stat"], "system_properties": ["sysp"],
    "voting_view": [], "watch_summary": ["wchs"], "watches": ["wchc"],
    "watches_by_path": ["wchp"], "zabstate": [],
}
# Registered by ZooKeeper 3.9, not served by larchd (README "AdminServer").
NOT_SERVED = {"snapshot": ["snap"], "restore": ["rest"], "set_trace_mask": ["stmk"],
              "observer_connection_stat_reset": ["orst"]}

INT, TEXT, BOOL, LIST, OBJ, NUM = int, str, bool, list, dict, (int, float)
# The members each command answers with and their JSON types, as
# ZooKeeper's Jackson writes them (a Java long: int, a double: float).
FIELDS = {
    "configuration": {"client_port": INT, "data_dir": TEXT, "data_log_dir": TEXT,
                      "tick_time": INT, "max_client_cnxns": INT, "min_session_timeout": INT,
                      "max_session_timeout": INT, "server_id": INT,
                      "client_port_listen_backlog": INT},
    "connections": {"connections": LIST, "secure_connections": LIST},
    "dirs": {"datadir_size": INT, "logdir_size": INT},
    "dump": {"expiry_time_to_session_ids": OBJ, "session_id_to_ephemeral_paths": OBJ},
    "environment": {"zookeeper.version": TEXT, "host.name": TEXT, "os.name": TEXT,
                    "os.arch": TEXT, "os.version": TEXT, "user.name": TEXT, "user.home": TEXT,
                    "user.dir": TEXT, "os.memory.free": TEXT},
    "get_trace_mask": {"tracemask": INT},
    "hash": {"digests": LIST},
    "initial_configuration": {"initial_configuration": TEXT},
    "is_read_only": {"read_only": BOOL},
    "last_snapshot": {"zxid": TEXT, "timestamp": INT},
    "monitor": {"version": TEXT, "server_state": TEXT, "avg_latency": float,
                "max_latency": INT, "min_latency": INT, "packets_received": INT,
                "packets_sent": INT, "num_alive_connections": INT,
                "outstanding_requests": INT, "znode_count": INT, "watch_count": INT,
                "ephemerals_count": INT, "approximate_data_size": INT,
                "open_file_descriptor_count": INT, "max_file_descriptor_count": INT,
                "global_sessions": INT},
    "observers": {"synced_observers": INT, "observers": LIST},
    "ruok": {},
    "server_stats": {"version": TEXT, "read_only": BOOL, "server_stats": OBJ,
                     "node_count": INT},
    "stats": {"version": TEXT, "read_only": BOOL, "server_stats": OBJ, "node_count": INT,
              "connections": LIST, "secure_connections": LIST},
    "connection_stat_reset": {}, "stat_reset": {},
    "system_properties": {"clientPort": TEXT, "larch.version": TEXT},
    "voting_view": {"current_config": OBJ},
    "watch_summary": {"num_connections": INT, "num_paths": INT, "num_total_watches": INT},
    "watches": {"session_id_to_watched_paths": OBJ},
    "watches_by_path": {"path_to_session_ids": OBJ},
    "zabstate": {"voting": BOOL, "zabstate": TEXT},
}
SERVER_STATS = {"packets_sent": INT, "packets_received": INT, "data_dir_size": INT,
                "log_dir_size": INT, "server_state": TEXT, "last_processed_zxid": INT,
                "outstanding_requests": INT, "avg_latency": float, "max_latency": INT,
                "min_latency": INT, "num_alive_client_connections": INT, "uptime": INT}
CONNECTION_BRIEF = {"remote_socket_address": TEXT, "outstanding_requests": INT,
                    "packets_received": INT, "packets_sent": INT}
CONNECTION = dict(CONNECTION_BRIEF, session_id=INT, last_operation=TEXT, established=INT,
                  session_timeout=INT, last_zxid=INT, last_latency=INT, min_latency=INT,
                  avg_latency=INT, max_latency=INT)
ENSEMBLE_FIELDS = {
    "leader": {"is_leader": BOOL, "leader_id": INT, "leader_ip": TEXT},
    "zabstate": {"myid": INT, "is_leader": BOOL, "quorum_address": TEXT,
                 "election_address": TEXT, "client_address": TEXT, "voting": BOOL,
                 "last_zxid": TEXT, "zab_epoch": INT, "zab_counter": INT, "zabstate": TEXT},
}


def curl(url, *extra):
    """(status, headers text, body) of one request with curl."""
    p = subprocess.run(["curl", "-s", "-S", "-i", "--max-time", "10"] + list(extra) + [url],
                       capture_output=True, timeout=20)
    if p.returncode != 0:
        raise AssertionError("curl %s: %s" % (url, p.stderr.decode()))
    head, _, body = p.stdout.partition(b"\r\n\r\n")
    status = int(head.split(b" ")[1])
    return status, head.decode(), body.decode("utf-8")


def admin_url(stderr_path):
    """The AdminServer's base URL from larchd's log line (port 0: any)."""
    with open(stderr_path) as f:
        m = re.search(r"AdminServer on (127\.0\.0\.1:\d+), command URL (\S+)", f.read())
    return "http://%s%s" % (m.group(1), m.group(2)) if m else None


def config_path(server):
    """The zoo.cfg the server (or, in an ensemble, member 1) started from."""
    if server.ensemble is not None:
        return os.path.join(server.ensemble.dir_of(1), "zoo.cfg")
    return os.path.join(server.tmpdir, "zoo.cfg")


def assert_types(test, where, obj, fields):
    for key, kind in fields.items():
        test.assertIn(key, obj, "%s: no %r" % (where, key))
        value = obj[key]
        # JSON's true is no number, though Python's bool is an int
        if kind is INT or kind == NUM:
            test.assertNotIsInstance(value, bool, "%s.%s" % (where, key))
        test.assertIsInstance(value, kind, "%s.%s = %r" % (where, key, value))


@unittest.skipUnless(sut_kind() == "larch", "stock ZooKeeper runs with its AdminServer off")
class AdminServerTest(ServerTestCase, unittest.TestCase):

    server_options = {"cfg_lines": ADMIN_LINES}

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.url = admin_url(cls.server.stderr_path)

    def get(self, name, status=200):
        """One command's JSON answer (name: a command or an alias)."""
        self.assertIsNotNone(self.url, "larchd did not say where the AdminServer is")
        code, head, body = curl("%s/%s" % (self.url, name))
        self.assertEqual(code, status, body)
        self.assertIn("Content-Type: application/json", head)
        return json.loads(body)

    def command(self, name, aliases=()):
        """A served command's answer, with ZooKeeper's command and error."""
        out = self.get(name)
        self.assertEqual(out["command"], name)
        if not (name == "leader" and not larch_ensemble_size()):
            self.assertIsNone(out["error"], "%s: %s" % (name, out["error"]))
        return out

    def word(self, w):
        return four_letter(self.server.port, w).decode("utf-8")

    def test_command_list_links_every_served_command(self):
        for url in (self.url, self.url + "/"):
            code, head, body = curl(url)
            self.assertEqual(code, 200)
            self.assertIn("Content-Type: text/html", head)
            links = re.findall(r'<a href="([^"]+)">([^<]+)</a>\n<br/>\n', body)
            self.assertEqual([n for _, n in links], sorted(SERVED), "sorted primary names")
            for href, name in links:
                self.assertEqual(href, "/commands/" + name)

    def test_every_command_answers_zookeepers_json(self):
        for name in sorted(SERVED):
            out = self.command(name)
            fields = dict(FIELDS.get(name, {}))
            if larch_ensemble_size():
                fields.update(ENSEMBLE_FIELDS.get(name, {}))
            assert_types(self, name, out, fields)
        stats = self.command("stats")
        assert_types(self, "stats.server_stats", stats["server_stats"], SERVER_STATS)
        for c in stats["connections"]:
            assert_types(self, "stats.connections[]", c, CONNECTION_BRIEF)
        zk = self.kazoo()
        sid = zk.client_id[0]
        conns = self.command("connections")["connections"]
        for c in conns:
            assert_types(self, "connections[]", c, CONNECTION)
        self.assertIn(sid, [c["session_id"] for c in conns], "kazoo's session")

    def test_aliases_answer_as_their_command(self):
        for name, aliases in SERVED.items():
            if name in ("connection_stat_reset", "stat_reset"):
                continue  # they reset what other tests compare
            for alias in aliases:
                out = self.get(alias)
                self.assertEqual(out["command"], name, alias)
                self.assertEqual(sorted(out), sorted(self.get(name)), alias)

    def test_unknown_command_gets_zookeepers_error(self):
        for name in ("nosuch", "ruok/x", "RUOK", "mntr2"):
            out = self.get(name)
            self.assertEqual(out, {"command": name, "error": "Unknown command: " + name})
        # the name comes back escaped, whatever it holds
        out = self.get("%22%5C%01%E2%82%AC")
        self.assertEqual(out["command"], "\"\\\x01\u20ac")

    def test_commands_not_served_say_why(self):
        for name, aliases in NOT_SERVED.items():
            for n in [name] + aliases:
                out = self.get(n, status=503)
                self.assertEqual(out["command"], name)
                self.assertIn("not served by larchd", out["error"])
        self.assertNotIn(">snapshot<", curl(self.url)[2])

    def test_other_paths_and_methods(self):
        base = self.url.rsplit("/", 1)[0]
        self.assertEqual(curl(base + "/")[0], 404)
        self.assertEqual(curl(base + "/commandsx")[0], 404)
        self.assertEqual(curl(self.url + "/ruok", "-X", "POST", "-d", "x")[0], 405)
        self.assertEqual(curl(self.url + "/ruok", "-X", "TRACE")[0], 405)
        self.assertEqual(curl(self.url + "/ruok", "-I")[0], 200)

    def test_monitor_agrees_with_mntr(self):
        zk = self.kazoo()
        zk.create(unique_path("admin-mntr"), b"12345")
        before = parse_mntr(self.word("mntr"))
        mon = self.command("monitor")
        after = parse_mntr(self.word("mntr"))
        self.assertEqual(sorted("zk_" + k for k in mon if k not in ("command", "error")),
                         sorted(after), "the same keys")
        # what no 4lw or HTTP request moves is equal; counters lie between
        for key in ("version", "server_state", "znode_count", "ephemerals_count",
                    "approximate_data_size", "global_sessions", "watch_count",
                    "max_file_descriptor_count", "larch_workers"):
            self.assertEqual(str(mon[key]), str(after["zk_" + key]), key)
        self.assertEqual(mon["larch_durable"], after["zk_larch_durable"] == "true")
        for key in ("packets_received", "larch_reads", "larch_writes"):
            self.assertLessEqual(before["zk_" + key], mon[key], key)
            self.assertLessEqual(mon[key], after["zk_" + key], key)
        self.assertAlmostEqual(mon["avg_latency"], float(after["zk_avg_latency"]), delta=1.0)

    def test_server_stats_agree_with_srvr(self):
        srvr = self.word("srvr")
        out = self.command("server_stats")
        node_count = int(re.search(r"(?m)^Node count: (\d+)$", srvr).group(1))
        zxid = int(re.search(r"(?m)^Zxid: 0x([0-9a-f]+)$", srvr).group(1), 16)
        mode = re.search(r"(?m)^Mode: (\S+)$", srvr).group(1)
        self.assertEqual(out["node_count"], node_count)
        self.assertEqual(out["server_stats"]["last_processed_zxid"], zxid)
        self.assertEqual(out["server_stats"]["server_state"], mode)
        self.assertTrue(srvr.startswith("Zookeeper version: %s\n" % out["version"]))
        self.assertEqual(out["read_only"], self.word("isro") == "ro")
        self.assertEqual(self.command("is_read_only")["read_only"], out["read_only"])
        self.assertGreater(out["server_stats"]["uptime"], 0)

    def test_configuration_and_environment_agree_with_conf_and_envi(self):
        conf = dict(l.split("=", 1) for l in self.word("conf").splitlines() if "=" in l)
        out = self.command("configuration")
        for key, name in (("client_port", "clientPort"), ("data_dir", "dataDir"),
                          ("data_log_dir", "dataLogDir"), ("tick_time", "tickTime"),
                          ("max_client_cnxns", "maxClientCnxns"),
                          ("min_session_timeout", "minSessionTimeout"),
                          ("max_session_timeout", "maxSessionTimeout"),
                          ("server_id", "serverId")):
            self.assertEqual(str(out[key]), conf[name], key)
        self.assertEqual(out["client_port"], self.server.port)
        props = self.command("system_properties")
        for name, value in conf.items():
            self.assertEqual(props[name], value, name)
        keys = [k for k in props if k not in ("command", "error")]
        self.assertEqual(keys, sorted(keys), "sorted, as ZooKeeper's TreeMap")
        envi = dict(l.split("=", 1) for l in self.word("envi").splitlines()[1:])
        env = self.command("environment")
        del envi["os.memory.free"], env["os.memory.free"]  # moves between the two
        self.assertEqual({k: v for k, v in env.items() if k not in ("command", "error")}, envi)

    def test_initial_configuration_is_the_config_file(self):
        with open(config_path(self.server)) as f:
            text = f.read()
        self.assertEqual(self.command("initial_configuration")["initial_configuration"], text)
        self.assertIn("admin.serverPort=0\n", text)

    def test_dirs_and_last_snapshot(self):
        dirs = self.command("dirs")
        word = dict(l.split(": ") for l in self.word("dirs").splitlines())
        self.assertEqual(dirs["datadir_size"], int(word["datadir_size"]))
        self.assertEqual(dirs["logdir_size"], int(word["logdir_size"]))
        if larch_ensemble_size() or os.environ.get("LARCHD_IN_MEMORY") != "1":
            self.assertGreater(dirs["logdir_size"], 0, "the txn log is in the data dir")
        snap = self.command("last_snapshot")
        mntr = parse_mntr(self.word("mntr"))
        if snap["timestamp"] == -1:  # none yet: ZooKeeper's answer without one
            self.assertEqual(snap["zxid"], "ffffffffffffffff")
        else:
            self.assertEqual(int(snap["zxid"], 16),
                             int(mntr["zk_larch_last_snapshot_zxid"], 16))
            self.assertGreater(snap["timestamp"], 1500000000, "seconds since the epoch")

    def test_sessions_watches_and_ephemerals_follow_kazoo(self):
        zk = self.kazoo()
        sid = zk.client_id[0]
        base = unique_path("admin")
        before = self.command("monitor")["znode_count"]
        zk.create(base)
        zk.create(base + "/e1", ephemeral=True)
        zk.create(base + "/e2", ephemeral=True)
        zk.get(base, watch=lambda e: None)
        zk.get_children(base, watch=lambda e: None)
        zk.exists(base + "/e1", watch=lambda e: None)
        self.assertEqual(self.command("monitor")["znode_count"], before + 3)
        self.assertEqual(self.command("server_stats")["node_count"], before + 3)

        dump = self.command("dump")
        self.assertEqual(dump["session_id_to_ephemeral_paths"][str(sid)],
                         [base + "/e1", base + "/e2"])
        expiring = [s for ids in dump["expiry_time_to_session_ids"].values() for s in ids]
        self.assertIn(sid, expiring)
        word = self.word("dump")
        self.assertIn("0x%x:\n\t%s/e1\n\t%s/e2\n" % (sid, base, base), word)

        # a data and a child watch on base are one path in ZooKeeper's sets
        self.assertEqual(self.command("watches")["session_id_to_watched_paths"][str(sid)],
                         sorted([base, base + "/e1"]))
        by_path = self.command("watches_by_path")["path_to_session_ids"]
        self.assertEqual(by_path[base], [sid])
        self.assertEqual(by_path[base + "/e1"], [sid])
        summary = self.command("watch_summary")
        wchs = re.match(r"(\d+) connections watching (\d+) paths\nTotal watches:(\d+)",
                        self.word("wchs"))
        self.assertEqual([summary["num_connections"], summary["num_paths"],
                          summary["num_total_watches"]], [int(g) for g in wchs.groups()])

        zk.stop()  # closeSession: its ephemerals go before the reply
        self.assertNotIn(str(sid), self.command("dump")["session_id_to_ephemeral_paths"])
        self.assertEqual(self.command("monitor")["znode_count"], before + 1)
        # the watches go with the connection, which the server closes after
        gone = wait_until(lambda: str(sid) not in
                          self.command("watches")["session_id_to_watched_paths"], timeout_s=10.0)
        self.assertTrue(gone, "the closed session's watches are still listed")

    def test_stat_reset_clears_the_counters(self):
        zk = self.kazoo()
        for i in range(5):
            zk.exists("/")
        self.assertGreater(self.command("server_stats")["server_stats"]["packets_received"], 4)
        self.command("stat_reset")
        # only this test's kazoo may have pinged since
        self.assertLess(self.command("server_stats")["server_stats"]["packets_received"], 4)
        self.command("connection_stat_reset")
        self.assertLess(parse_mntr(self.word("mntr"))["zk_packets_received"], 4)

    def test_ensemble_commands(self):
        leader, zab = self.get("leader"), self.command("zabstate")
        view = self.command("voting_view")["current_config"]
        digests = self.command("hash")["digests"]
        if not larch_ensemble_size():
            self.assertEqual(leader, {"command": "leader", "error": "server is not initialized"})
            self.assertEqual(zab, {"voting": False, "zabstate": "", "command": "zabstate",
                                   "error": None})
            self.assertEqual(view, {})
            self.assertEqual(digests, [])
            return
        mntr = parse_mntr(self.word("mntr"))
        self.assertIsNone(leader["error"])
        self.assertEqual(leader["is_leader"], mntr["zk_server_state"] == "leader")
        self.assertEqual(leader["leader_id"], mntr["zk_larch_leader_id"])
        self.assertEqual(leader["leader_ip"], "127.0.0.1")
        self.assertEqual(zab["zabstate"], "broadcast")
        self.assertEqual(zab["myid"], 1)
        self.assertTrue(zab["voting"])
        self.assertEqual(zab["client_address"], "127.0.0.1:%d" % self.server.port)
        self.assertEqual(sorted(view), [str(i) for i in range(1, larch_ensemble_size() + 1)])
        for member in view.values():
            self.assertEqual(member["learner_type"], "participant")
            self.assertRegex(member["server_addresses"][0], r"^127\.0\.0\.1:\d+$")
        self.assertLessEqual(len(digests), 1)
        obs = self.command("observers")
        self.assertEqual((obs["synced_observers"], obs["observers"]), (0, []))


@unittest.skipUnless(sut_kind() == "larch", "larchd's own configuration")
class AdminServerConfigTest(unittest.TestCase):

    def run_larchd(self, lines):
        """(exit status, stderr, zoo.cfg path) of a larchd that should not start."""
        d = tempfile.mkdtemp(prefix="larch-it-admin-")
        cfg = os.path.join(d, "zoo.cfg")
        with open(cfg, "w") as f:
            f.write("\n".join(["clientPortAddress=127.0.0.1", "clientPort=%d" % free_port()]
                              + lines) + "\n")
        p = subprocess.Popen([larchd_path(), "--config", cfg], stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, cwd=d)
        try:
            _, err = p.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGKILL)
            p.communicate()
            raise AssertionError("larchd started with %r" % lines)
        finally:
            os.unlink(cfg)
            os.rmdir(d)
        err = err.decode()
        self.assertFalse([l for l in err.splitlines() if any(m in l for m in SANITIZER_MARKERS)],
                         err)
        return p.returncode, err, cfg

    def test_https_and_client_certificates_are_refused_by_line(self):
        rc, err, cfg = self.run_larchd(["admin.enableServer=true", "admin.forceHttps=true",
                                        "zookeeper.admin.portUnification=true",
                                        "admin.needClientAuth=true",
                                        "ssl.quorum.keyStore.type=JKS",
                                        "admin.snapshot.enabled=true"])
        self.assertNotEqual(rc, 0)
        self.assertIn("%s:4: admin.forceHttps='true' cannot be honoured: larchd has no TLS "
                      "for the AdminServer" % cfg, err)
        self.assertIn("%s:5: zookeeper.admin.portUnification='true' cannot be honoured" % cfg,
                      err)
        self.assertIn("%s:6: admin.needClientAuth='true' cannot be honoured" % cfg, err)
        self.assertIn("%s:7: ssl.quorum.keyStore.type: larchd cannot read Java keystores" % cfg,
                      err)
        self.assertIn("%s:8: admin.snapshot.enabled='true' cannot be honoured" % cfg, err)

    def test_taken_port_stops_larchd(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        try:
            port = s.getsockname()[1]
            rc, err, _ = self.run_larchd(["admin.enableServer=true",
                                          "admin.serverAddress=127.0.0.1",
                                          "admin.serverPort=%d" % port])
        finally:
            s.close()
        self.assertNotEqual(rc, 0)
        self.assertIn("larchd: AdminServer: admin.serverAddress/serverPort 127.0.0.1:%d: "
                      "Address already in use" % port, err)

    @unittest.skipIf(larch_ensemble_size(), "one server is enough to show the default")
    def test_off_unless_enabled(self):
        with Server(cfg_lines=["admin.serverAddress=127.0.0.1", "admin.serverPort=0"]) as s:
            self.assertEqual(four_letter(s.port, "ruok"), b"imok")
        self.assertNotIn("AdminServer", s.stderr_text)
        self.assertEqual(s.sanitizer_report(), [])


@unittest.skipUnless(sut_kind() == "larch", "an ensemble of larchd")
@unittest.skipIf(larch_ensemble_size(), "starts its own ensemble: once is enough")
class AdminServerWithoutQuorumTest(unittest.TestCase):
    """A member without a leader answers the commands ZooKeeper marks
    serverRequired with its "not currently serving" error, and the others
    (monitor, environment, zabstate, ...) as usual."""

    def test_member_without_a_leader(self):
        with Ensemble(n=3, cfg_lines=ADMIN_LINES) as ens:
            ens.wait_leader()
            url = admin_url(os.path.join(ens.dir_of(1), "stderr.log"))
            self.assertIsNotNone(url)
            self.assertIsNone(json.loads(curl(url + "/ruok")[2])["error"])
            ens.kill(2)
            ens.kill(3)
            # member 1 loses its leader (or, leading, its quorum) within an
            # election timeout or two
            lost = wait_until(lambda: json.loads(curl(url + "/ruok")[2])["error"] is not None,
                              timeout_s=30.0, interval_s=0.2)
            self.assertTrue(lost, "member 1 still serving without a quorum")
            for name in ("ruok", "isro", "stats", "dump"):
                self.assertEqual(json.loads(curl(url + "/" + name)[2]),
                                 {"command": name, "error": NOT_SERVING})
            mon = json.loads(curl(url + "/monitor")[2])
            self.assertIsNone(mon["error"])
            self.assertEqual(mon["server_state"], "looking")
            zab = json.loads(curl(url + "/zabstate")[2])
            self.assertEqual(zab["zabstate"], "election")
        self.assertEqual(ens.sanitizer_report(), [])


if __name__ == "__main__":
    unittest.main()
