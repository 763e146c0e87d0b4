"""larch-cli (client/cli/) against the server under test.

Scripts on stdin, one-shot commands, --json output, a pty session with line
editing, watch delivery, and the exit-status contract (0 ok, 1 server error,
2 malformed command, 3 no connection). The binary comes from env LARCH_CLI
(default <repo>/build/client/cli/larch-cli); when LARCH_CLI is set a missing
binary fails the tests, otherwise they are skipped. Every larch-cli process
is stopped by PID with a bounded wait.
"""

import base64
import json
import os
import re
import select
import signal
import subprocess
import time
import unittest

from harness import REPO_ROOT, HOST, ServerTestCase, free_port, unique_path

CLI_TIMEOUT_S = 30   # upper bound for one larch-cli run
READ_TIMEOUT_S = 10  # upper bound for one expected piece of output
STOP_TIMEOUT_S = 5

STAT_RE = re.compile(
    r"cZxid = (0x[0-9a-f]+)\nctime = .+\nmZxid = (0x[0-9a-f]+)\nmtime = .+\n"
    r"pZxid = (0x[0-9a-f]+)\ncversion = (\d+)\ndataVersion = (\d+)\n"
    r"aclVersion = (\d+)\nephemeralOwner = (0x[0-9a-f]+)\ndataLength = (\d+)\n"
    r"numChildren = (\d+)\n")


def cli_path():
    return os.environ.get("LARCH_CLI", str(REPO_ROOT / "build" / "client" / "cli" / "larch-cli"))


def stop_process(proc):
    """SIGTERM, then SIGKILL after a bound; always reaps."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=STOP_TIMEOUT_S)


class StreamReader:
    """Bounded reads from a file descriptor (a pipe or a pty master)."""

    def __init__(self, fd):
        self.fd = fd
        self.data = b""

    def wait_for(self, pattern, timeout_s=READ_TIMEOUT_S, start=0):
        """Reads until pattern (bytes regex) matches data[start:]; returns the match."""
        deadline = time.monotonic() + timeout_s
        while True:
            m = re.search(pattern, self.data[start:])
            if m:
                return m
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([self.fd], [], [], min(left, 0.2))
            if ready:
                try:
                    chunk = os.read(self.fd, 65536)
                except OSError:  # pty closed: the child is gone
                    chunk = b""
                if not chunk:
                    m = re.search(pattern, self.data[start:])
                    return m
                self.data += chunk

    def drain(self, quiet_s):
        """Reads whatever arrives within quiet_s."""
        deadline = time.monotonic() + quiet_s
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.fd], [], [], 0.05)
            if ready:
                try:
                    chunk = os.read(self.fd, 65536)
                except OSError:
                    return
                if not chunk:
                    return
                self.data += chunk


class CliTestCase(ServerTestCase):

    def setUp(self):
        self.cli = cli_path()
        self.kazoos = []
        if not os.access(self.cli, os.X_OK):
            if "LARCH_CLI" in os.environ:
                self.fail("LARCH_CLI=%s is not an executable" % self.cli)
            self.skipTest("larch-cli not built (%s)" % self.cli)

    def kazoo(self, **kw):
        zk = super().kazoo(**kw)
        self.kazoos.append(zk)
        return zk

    def settle(self):
        """A larch-cli about to start may talk to another ensemble member
        than the test's kazoo clients: let every member apply what they
        wrote first, as the tests read it back through the CLI."""
        seen = [zk.last_zxid for zk in self.kazoos]
        if seen:
            self.server.wait_applied(max(seen))

    def run_cli(self, args=(), script=None, server=None, input_bytes=None):
        """Runs larch-cli to completion; returns CompletedProcess (text)."""
        self.settle()
        argv = [self.cli, "-server", server or self.server.hosts] + list(args)
        data = input_bytes if input_bytes is not None else (
            ("\n".join(script) + "\n").encode() if script is not None else b"")
        p = subprocess.run(argv, input=data, capture_output=True, timeout=CLI_TIMEOUT_S)
        p.stdout = p.stdout.decode("utf-8", "replace")
        p.stderr = p.stderr.decode("utf-8", "replace")
        return p

    def start_cli(self, args=()):
        """A long-lived larch-cli reading a pipe; stopped by PID on cleanup."""
        self.settle()
        proc = subprocess.Popen([self.cli, "-server", self.server.hosts] + list(args),
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        self.addCleanup(stop_process, proc)
        self.addCleanup(proc.stdout.close)
        self.addCleanup(proc.stderr.close)
        return proc

    def assert_status(self, p, code):
        self.assertEqual(p.returncode, code,
                         "exit %s, wanted %s\nstdout:\n%s\nstderr:\n%s" % (
                             p.returncode, code, p.stdout[-3000:], p.stderr[-3000:]))


class ScriptTest(CliTestCase, unittest.TestCase):

    def test_script_create_get_set_ls_stat_delete(self):
        root = unique_path("cli")
        p = self.run_cli(script=[
            "create %s hello" % root,
            "get %s" % root,
            "set %s world" % root,
            "get -s %s" % root,
            "create %s/kid k" % root,
            "create %s/kid/grand g" % root,
            "create -s %s/seq- s" % root,
            "ls %s" % root,
            "ls -R %s" % root,
            "stat %s" % root,
            "delete %s/kid/grand" % root,
            "ls %s/kid" % root,
            "deleteall %s" % root,
            "ls /",
        ])
        self.assert_status(p, 0)
        lines = p.stdout.splitlines()
        self.assertEqual(p.stderr, "")
        self.assertIn("Created %s" % root, lines)
        self.assertIn("Created %s/seq-0000000001" % root, lines)
        self.assertIn("hello", lines)
        self.assertIn("world", lines)
        self.assertIn("[kid, seq-0000000001]", lines)
        self.assertIn("[]", lines, "ls of the emptied /kid")
        recursive = [l for l in lines if l.startswith(root)]
        self.assertEqual(recursive, [root, root + "/kid", root + "/kid/grand",
                                     root + "/seq-0000000001"])
        stats = STAT_RE.findall(p.stdout)
        self.assertEqual(len(stats), 2, p.stdout)
        get_stat, stat = stats
        # get -s after one set: dataVersion 1, 5 bytes, no children yet
        self.assertEqual(get_stat[3:], ("0", "1", "0", "0x0", "5", "0"))
        # stat after three children were created (kid, seq; grand is deeper)
        self.assertEqual(stat[3:], ("2", "1", "0", "0x0", "5", "2"))
        self.assertGreater(int(get_stat[1], 16), int(get_stat[0], 16))
        last_ls = [l for l in lines if l.startswith("[")][-1]
        names = [n.strip() for n in last_ls.strip("[]").split(",")]
        self.assertIn("zookeeper", names)
        self.assertNotIn(root.lstrip("/"), names)
        self.assertIsNone(self.kazoo().exists(root))

    def test_null_empty_and_quoted_data(self):
        root = unique_path("cliq")
        p = self.run_cli(script=[
            "create %s" % root,
            "get %s" % root,
            "create %s/e \"\"" % root,
            "create %s/sp \"hello world\"" % root,
            "create %s/sq 'single \"quoted\"'" % root,
            r'create %s/esc "tab\there \"q\" back\\slash nl\n hex\x41"' % root,
            "create %s/dash \"-5\"" % root,
            "set -- %s/e -7" % root,
        ])
        self.assert_status(p, 0)
        self.assertIn("null", p.stdout.splitlines(), "a node created without data is null")
        zk = self.kazoo()
        self.assertEqual(zk.get(root)[0], None)
        self.assertEqual(zk.get(root + "/sp")[0], b"hello world")
        self.assertEqual(zk.get(root + "/sq")[0], b'single "quoted"')
        self.assertEqual(zk.get(root + "/esc")[0], b'tab\there "q" back\\slash nl\n hexA')
        self.assertEqual(zk.get(root + "/dash")[0], b"-5")
        self.assertEqual(zk.get(root + "/e")[0], b"-7")

    def test_ephemeral_sequential_container_ttl(self):
        root = unique_path("clie")
        p = self.run_cli(script=[
            "create %s" % root,
            "create -e %s/eph" % root,
            "create -e -s %s/es-" % root,
            "create -c %s/cont" % root,
            "create -t 600000 %s/ttl" % root,
            "stat %s/eph" % root,
        ])
        self.assert_status(p, 0)
        for name in ("eph", "es-0000000001", "cont", "ttl"):
            self.assertIn("Created %s/%s" % (root, name), p.stdout.splitlines())
        owner = STAT_RE.search(p.stdout).group(7)
        self.assertNotEqual(owner, "0x0", "an ephemeral has an owner")
        zk = self.kazoo()
        # the session ended with larch-cli, and its ephemerals with it
        self.assertEqual(sorted(zk.get_children(root)), ["cont", "ttl"])

    def test_txn_commits_all_or_nothing(self):
        root = unique_path("clitxn")
        zk = self.kazoo()
        zk.create(root, b"v0")
        p = self.run_cli(script=[
            "txn {",
            "create %s/a one" % root,
            "set -v 0 %s v1" % root,
            "check -v 1 %s" % root,
            "create %s/b two" % root,
            "}",
            "txn { create %s/c ; delete %s/a ; check -v 0 %s }" % (root, root, root),
            "get %s/a" % root,
        ])
        self.assert_status(p, 1)
        lines = p.stdout.splitlines()
        self.assertIn("create %s/a: Created %s/a" % (root, root), lines)
        self.assertIn("set %s: OK" % root, lines)
        self.assertIn("check %s: OK" % root, lines)
        self.assertIn("create %s/c: OK (rolled back)" % root, lines)
        self.assertIn("delete %s/a: OK (rolled back)" % root, lines)
        self.assertIn("check %s: version No is not valid : %s" % (root, root), lines)
        self.assertIn("Transaction failed at op 2", p.stderr)
        self.assertEqual(lines[-1], "one", "the failed txn left /a alone")
        self.assertEqual(zk.get(root)[0], b"v1")
        self.assertEqual(sorted(zk.get_children(root)), ["a", "b"])

    def test_txn_block_errors_consume_the_block(self):
        root = unique_path("clitxnbad")
        p = self.run_cli(script=[
            "txn {",
            "create %s" % root,
            "frobnicate %s" % root,
            "create %s/x" % root,
            "}",
            "create %s-after" % root,
        ])
        self.assert_status(p, 2)
        self.assertIn("unknown transaction op 'frobnicate'", p.stderr)
        zk = self.kazoo()
        self.assertIsNone(zk.exists(root), "nothing of a malformed txn runs")
        self.assertIsNone(zk.exists(root + "/x"), "block lines never run as commands")
        self.assertIsNotNone(zk.exists(root + "-after"), "the script goes on after the block")

    def test_acl_and_auth(self):
        root = unique_path("cliacl")
        p = self.run_cli(script=[
            "addauth digest bob:secret",
            "create %s d auth::cdrwa" % root,
            "getAcl %s" % root,
            "create %s-open x" % root,
            "setAcl %s-open world:anyone:ra" % root,
            "getAcl -s %s-open" % root,
            "setAcl -v 0 %s-open world:anyone:cdrwa" % root,
        ])
        self.assert_status(p, 1)
        lines = p.stdout.splitlines()
        self.assertIn("'digest,'bob:", p.stdout)
        self.assertIn("'world,'anyone", lines)
        self.assertIn(": ra", lines)
        self.assertIn(": cdrwa", lines)
        stat = STAT_RE.search(p.stdout)
        self.assertEqual(stat.group(6), "1", "aclVersion after one setAcl")
        self.assertIn("version No is not valid : %s-open" % root, p.stderr)
        # without bob's credentials the node cannot be read
        q = self.run_cli(script=["get %s" % root, "set %s-open y" % root])
        self.assert_status(q, 1)
        self.assertIn("Insufficient permission : %s" % root, q.stderr)
        self.assertIn("Insufficient permission : %s-open" % root, q.stderr)
        r = self.run_cli(script=["addauth digest bob:secret", "get %s" % root])
        self.assert_status(r, 0)
        self.assertEqual(r.stdout.splitlines(), ["d"])

    def test_set_acl_recursive(self):
        root = unique_path("cliaclr")
        zk = self.kazoo()
        zk.create(root + "/a/b", b"", makepath=True)
        p = self.run_cli(script=["setAcl -R %s world:anyone:rw" % root])
        self.assert_status(p, 0)
        for path in (root, root + "/a", root + "/a/b"):
            acl, _ = zk.get_acls(path)
            self.assertEqual([(a.perms, a.id.scheme, a.id.id) for a in acl],
                             [(3, "world", "anyone")], path)

    def test_deleteall_in_batches(self):
        root = unique_path("clidel")
        zk = self.kazoo()
        for leaf in ("a/b/c", "a/d", "e/f", "g"):
            zk.create("%s/%s" % (root, leaf), b"", makepath=True)
        zk.create(root + "-sibling")
        p = self.run_cli(["--json", "deleteall", "-b", "3", root])
        self.assert_status(p, 0)
        self.assertEqual(json.loads(p.stdout), {"cmd": "deleteall", "path": root, "deleted": 8})
        self.assertIsNone(zk.exists(root))
        self.assertIsNotNone(zk.exists(root + "-sibling"), "only the named subtree goes")
        p = self.run_cli(["deleteall", root])
        self.assert_status(p, 1)
        self.assertEqual(p.stderr, "Node does not exist: %s\n" % root)

    def test_sync_and_counting_commands(self):
        root = unique_path("clisync")
        p = self.run_cli(script=[
            "create %s" % root,
            "create %s/a" % root,
            "create %s/a/b" % root,
            "create -e %s/e" % root,
            "sync %s" % root,
            "getAllChildrenNumber %s" % root,
            "getEphemerals %s" % root,
        ])
        self.assert_status(p, 0)
        self.assertEqual(p.stdout.splitlines()[-3:],
                         ["Sync is OK", "3", "[%s/e]" % root])

    def test_history_and_redo(self):
        root = unique_path("clihist")
        p = self.run_cli(script=[
            "create %s a" % root,      # 0
            "get %s" % root,           # 1
            "set %s b" % root,         # 2
            "history",                 # 3
            "redo 1",                  # 4: get again
            "history",                 # 5
        ])
        self.assert_status(p, 0)
        lines = p.stdout.splitlines()
        self.assertEqual(lines[1], "a")
        self.assertIn("1 - get %s" % root, lines)
        self.assertIn("3 - history", lines)
        self.assertEqual(lines.count("b"), 1, "redo 1 ran the get again:\n" + p.stdout)
        self.assertIn("4 - get %s" % root, lines, "redo records the command it ran")

    def test_errors_do_not_stop_a_script_but_set_the_status(self):
        root = unique_path("clierr")
        p = self.run_cli(script=[
            "delete %s" % root,
            "create %s x" % root,
            "create %s x" % root,
            "get %s" % root,
        ])
        self.assert_status(p, 1)
        self.assertEqual(p.stderr.splitlines(), ["Node does not exist: %s" % root,
                                                 "Node already exists: %s" % root])
        self.assertEqual(p.stdout.splitlines(), ["Created %s" % root, "x"])

    def test_worst_status_wins(self):
        root = unique_path("cliworst")
        p = self.run_cli(script=["get %s" % root, "get", "get %s" % root])
        self.assert_status(p, 2)

    def test_exit_on_error_stops_at_the_first_failure(self):
        root = unique_path("cliexit")
        p = self.run_cli(args=["-e"], script=["create %s" % root, "delete %s/none" % root,
                                              "delete %s" % root])
        self.assert_status(p, 1)
        self.assertIsNotNone(self.kazoo().exists(root), "the line after the error did not run")

    def test_chroot(self):
        root = unique_path("clichroot")
        zk = self.kazoo()
        zk.create(root)
        p = self.run_cli(server=self.server.hosts + root, script=["create /inside x", "ls /"])
        self.assert_status(p, 0)
        self.assertEqual(p.stdout.splitlines(), ["Created /inside", "[inside]"])
        self.assertEqual(zk.get(root + "/inside")[0], b"x")


class OneShotTest(CliTestCase, unittest.TestCase):

    def test_command_line_mode(self):
        root = unique_path("clione")
        p = self.run_cli(["create", root, "two words"])
        self.assert_status(p, 0)
        self.assertEqual(p.stdout, "Created %s\n" % root)
        p = self.run_cli(["get", "-s", root])
        self.assert_status(p, 0)
        self.assertEqual(p.stdout.splitlines()[0], "two words")
        self.assertEqual(STAT_RE.search(p.stdout).group(8), "9")
        p = self.run_cli(["set", "-v", "0", root, "new"])
        self.assert_status(p, 0)
        p = self.run_cli(["set", "-v", "0", root, "newer"])
        self.assert_status(p, 1)
        self.assertEqual(p.stderr, "version No is not valid : %s\n" % root)
        self.assertEqual(self.kazoo().get(root)[0], b"new")

    def test_one_shot_txn(self):
        root = unique_path("clionetxn")
        p = self.run_cli(["txn", "{", "create", root, "x", ";", "create", root + "/k", "}"])
        self.assert_status(p, 0)
        self.assertEqual(self.kazoo().get_children(root), ["k"])

    def test_server_error_exit_1(self):
        p = self.run_cli(["get", unique_path("clinone")])
        self.assert_status(p, 1)
        self.assertRegex(p.stderr, r"^Node does not exist: /clinone-")

    def test_help_needs_no_server(self):
        p = self.run_cli(["help"], server="%s:%d" % (HOST, free_port()))
        self.assert_status(p, 0)
        self.assertIn("create [-e] [-s] [-c] [-t ttl] path [data] [acl]", p.stdout)
        p = subprocess.run([self.cli, "--help"], capture_output=True, text=True,
                           timeout=CLI_TIMEOUT_S)
        self.assertEqual(p.returncode, 0)
        self.assertIn("Exit status", p.stdout)
        self.assertIn("worst", p.stdout)

    def test_unreachable_server_exit_3(self):
        dead = "%s:%d" % (HOST, free_port())
        start = time.monotonic()
        p = self.run_cli(["--timeout", "1000", "ls", "/"], server=dead)
        self.assert_status(p, 3)
        self.assertIn("Could not connect to %s" % dead, p.stderr)
        p = self.run_cli(["--timeout", "1000"], server=dead, script=["ls /", "ls /"])
        self.assert_status(p, 3)
        self.assertEqual(p.stdout, "")
        self.assertLess(time.monotonic() - start, CLI_TIMEOUT_S)

    def test_bad_global_options_exit_2(self):
        for args in (["--frob"], ["--timeout", "soon"], ["-server"]):
            p = subprocess.run([self.cli] + args, capture_output=True, text=True,
                               timeout=CLI_TIMEOUT_S, stdin=subprocess.DEVNULL)
            self.assertEqual(p.returncode, 2, args)
            self.assertTrue(p.stderr.startswith("larch-cli: "), p.stderr)


class MalformedTest(CliTestCase, unittest.TestCase):

    # (line, message fragment, usage line or None)
    CASES = [
        ("frobnicate /a", "unknown command 'frobnicate'", None),
        ("get", "get: missing argument: path", "usage: get [-s] [-w] path"),
        ("set /a", "set: missing argument: data", "usage: set [-s] [-v version] path data"),
        ("get -x /a", "get: unknown option -x", "usage: get [-s] [-w] path"),
        ("get /a /b", "get: too many arguments ('/b')", "usage: get [-s] [-w] path"),
        ("set -v abc /a x", "set: bad version 'abc'", "usage: set [-s] [-v version] path data"),
        ("delete -v 1.5 /a", "delete: bad version '1.5'", "usage: delete [-v version] path"),
        ("delete -v", "delete: option -v needs a value", "usage: delete [-v version] path"),
        ("setAcl /a world:anyone", "setAcl: bad ACL 'world:anyone'",
         "usage: setAcl [-s] [-v version] [-R] path acl"),
        ("create /a x world:anyone:xyz", "create: bad ACL 'world:anyone:xyz'",
         "usage: create [-e] [-s] [-c] [-t ttl] path [data] [acl]"),
        ("create relative", "create: invalid path 'relative'",
         "usage: create [-e] [-s] [-c] [-t ttl] path [data] [acl]"),
        ("create -c -e /a", "create: -c cannot be combined",
         "usage: create [-e] [-s] [-c] [-t ttl] path [data] [acl]"),
        ("create -t x /a", "create: bad ttl 'x'",
         "usage: create [-e] [-s] [-c] [-t ttl] path [data] [acl]"),
        ("create /a \"open", "syntax error: unterminated double quote", None),
        ("addWatch -m SOMETIMES /a", "addWatch: bad mode 'SOMETIMES'",
         "usage: addWatch [-m mode] path"),
        ("removewatches /a -c -d", "removewatches: only one of -c, -d and -a",
         "usage: removewatches path [-c|-d|-a] [-l]"),
        ("printwatches maybe", "printwatches: expected on or off", "usage: printwatches on|off"),
        ("redo 99", "redo: no command number 99 in history", "usage: redo cmdno"),
        ("txn create /a", "txn: expected '{' after txn", None),
        ("txn { create /a ; explode /b }", "unknown transaction op 'explode'", None),
        ("txn { }", "txn: empty transaction", None),
    ]

    def test_each_malformed_line_exits_2_with_a_clear_message(self):
        for line, fragment, usage in self.CASES:
            with self.subTest(line=line):
                p = self.run_cli(script=[line])
                self.assert_status(p, 2)
                self.assertIn(fragment, p.stderr)
                if usage is not None:
                    self.assertIn(usage + "\n", p.stderr)
                self.assertEqual(p.stdout, "")

    def test_malformed_one_shot_exits_2(self):
        p = self.run_cli(["delete", "-v", "x", "/a"])
        self.assert_status(p, 2)
        self.assertIn("delete: bad version 'x'", p.stderr)
        p = self.run_cli(["nosuchcommand"])
        self.assert_status(p, 2)

    def test_unclosed_txn_at_end_of_script(self):
        root = unique_path("cliopen")
        p = self.run_cli(script=["txn {", "create %s" % root])
        self.assert_status(p, 2)
        self.assertIn("txn: missing '}' at end of input", p.stderr)
        self.assertIsNone(self.kazoo().exists(root))


class JsonTest(CliTestCase, unittest.TestCase):

    def json_lines(self, p):
        out = []
        for line in p.stdout.splitlines():
            out.append(json.loads(line))
        return out

    def test_json_results_field_by_field(self):
        root = unique_path("clijson")
        zk = self.kazoo()
        p = self.run_cli(["--json"], script=[
            "create %s caf\u00e9" % root,
            "create %s/k1" % root,
            "get %s" % root,
            "ls %s" % root,
            "stat %s" % root,
            "getAcl %s" % root,
            "get %s/missing" % root,
            "txn { create %s/k2 x ; set %s/k2 y ; check -v 7 %s }" % (root, root, root),
            "txn { create %s/k3 ; set -v 0 %s/k1 z }" % (root, root),
            "get",
        ])
        self.assert_status(p, 2)
        r = self.json_lines(p)
        self.assertEqual(len(r), 10, p.stdout)
        self.assertEqual(r[0], {"cmd": "create", "path": root, "created": root})
        self.assertEqual(r[2]["cmd"], "get")
        self.assertEqual(r[2]["path"], root)
        self.assertEqual(r[2]["data"], "caf\u00e9")
        self.assertNotIn("data_b64", r[2])
        _, zstat = zk.get(root)
        st = r[2]["stat"]
        self.assertEqual(st["cZxid"], zstat.czxid)
        self.assertEqual(st["mZxid"], zstat.mzxid)
        self.assertEqual(st["ctime"], zstat.ctime)
        self.assertEqual(st["dataVersion"], 0)
        self.assertEqual(st["dataLength"], len("caf\u00e9".encode()))
        self.assertEqual(st["ephemeralOwner"], "0x0")
        self.assertEqual(r[3], {"cmd": "ls", "path": root, "children": ["k1"]})
        self.assertEqual(r[4]["stat"]["numChildren"], 1)
        self.assertEqual(r[4]["stat"]["pZxid"], zk.exists(root + "/k1").czxid)
        self.assertEqual(r[5]["acl"], [{"scheme": "world", "id": "anyone", "perms": "cdrwa"}])
        self.assertEqual(r[6], {"cmd": "get", "error": "NONODE", "code": -101,
                                "message": "Node does not exist: %s/missing" % root,
                                "path": root + "/missing"})
        failed = r[7]
        self.assertEqual((failed["cmd"], failed["ok"], failed["error"], failed["code"],
                          failed["failed_op"]), ("txn", False, "BADVERSION", -103, 2))
        self.assertEqual([(x["op"], x["code"]) for x in failed["results"]],
                         [("create", 0), ("set", 0), ("check", -103)])
        ok = r[8]
        self.assertTrue(ok["ok"])
        self.assertEqual(ok["results"][0]["created"], root + "/k3")
        self.assertEqual(ok["results"][1]["stat"]["dataVersion"], 1)
        self.assertEqual(r[9]["error"], "USAGE")
        self.assertEqual(r[9]["usage"], "get [-s] [-w] path")
        p = self.run_cli(["--json", "deleteall", root])
        self.assert_status(p, 0)
        self.assertEqual(json.loads(p.stdout), {"cmd": "deleteall", "path": root, "deleted": 3})

    def test_json_data_escaping_and_base64(self):
        root = unique_path("cliesc")
        zk = self.kazoo()
        values = {
            "quotes": b'say "hi" \\ back',
            "control": b"nl\n cr\r tab\t bell\x07 nul\x00 esc\x1b del\x7f",
            "unicode": "\u00e9\u4e2d\U0001f600 \u2028\u2029\u0085".encode(),
            "empty": b"",
            "binary": b"\xff\xfe\x00\x80",
            "overlong": b"\xc0\xaf",
            "surrogate": b"\xed\xa0\x80",
            "truncated": "\u4e2d".encode()[:2],
        }
        zk.create(root)
        for name, value in values.items():
            zk.create("%s/%s" % (root, name), value)
        p = self.run_cli(["--json"], script=["get %s/%s" % (root, n) for n in values])
        self.assert_status(p, 0)
        # splitlines() also breaks at U+2028 and NEL: one object per line
        # means those must be escaped too.
        lines = p.stdout.splitlines()
        self.assertEqual(len(lines), len(values), "one line per result:\n" + p.stdout)
        for (name, value), line in zip(values.items(), lines):
            with self.subTest(name=name):
                obj = json.loads(line)
                if "data" in obj:
                    self.assertEqual(obj["data"].encode("utf-8"), value)
                else:
                    self.assertIn(name, ("binary", "overlong", "surrogate", "truncated"))
                    self.assertEqual(base64.b64decode(obj["data_b64"]), value)
        self.assertNotIn("data_b64", json.loads(lines[2]), "valid UTF-8 stays text")

    def test_json_null_data_and_odd_paths(self):
        root = unique_path("clinull")
        p = self.run_cli(["--json"], script=[
            "create %s" % root, "get %s" % root,
            "create \"%s/sp ace\" x" % root, "ls %s" % root])
        self.assert_status(p, 0)
        r = self.json_lines(p)
        self.assertIsNone(r[1]["data"])
        self.assertEqual(r[3]["children"], ["sp ace"])

    def test_json_connect_error(self):
        p = self.run_cli(["--json", "--timeout", "1000", "ls", "/"],
                         server="%s:%d" % (HOST, free_port()))
        self.assert_status(p, 3)
        obj = json.loads(p.stdout)
        self.assertEqual(obj["error"], "CONNECT")


class WatchTest(CliTestCase, unittest.TestCase):

    def send(self, proc, line):
        proc.stdin.write((line + "\n").encode())
        proc.stdin.flush()

    def test_printwatches_on_and_off(self):
        root = unique_path("cliwatch")
        zk = self.kazoo()
        zk.create(root, b"0")
        proc = self.start_cli()
        out = StreamReader(proc.stdout.fileno())
        self.send(proc, "get -w %s" % root)
        self.assertIsNotNone(out.wait_for(rb"^0\n", start=0))
        zk.set(root, b"1")
        event = (b"WATCHER::\n\nWatchedEvent state:SyncConnected type:NodeDataChanged path:"
                 + root.encode() + b"\n")
        self.assertIsNotNone(out.wait_for(re.escape(event)),
                             "event printed while larch-cli waits for input:\n%r" % out.data)
        mark = len(out.data)
        self.send(proc, "printwatches off")
        self.send(proc, "ls -w %s" % root)
        self.assertIsNotNone(out.wait_for(rb"\[\]\n", start=mark))
        zk.create(root + "/kid", b"kidval")
        # kazoo and larch-cli may talk to different ensemble members: the
        # sync makes the CLI's member hold the child before the CLI reads it
        self.send(proc, "sync %s" % root)
        self.send(proc, "get %s/kid" % root)  # a reply after the event was sent
        self.assertIsNotNone(out.wait_for(rb"kidval\n", start=mark))
        out.drain(0.5)
        self.assertNotIn(b"WATCHER::", out.data[mark:], "printwatches off hides events")
        self.send(proc, "quit")
        proc.wait(timeout=READ_TIMEOUT_S)
        self.assertEqual(proc.returncode, 0)

    def test_persistent_recursive_watch_and_json_events(self):
        root = unique_path("clipw")
        zk = self.kazoo()
        zk.create(root)
        proc = self.start_cli(["--json"])
        out = StreamReader(proc.stdout.fileno())
        self.send(proc, "addWatch %s" % root)
        self.assertIsNotNone(out.wait_for(rb'"cmd":"addWatch"'))
        zk.create(root + "/a/b", makepath=True)
        m = out.wait_for(rb'\{"event":"NodeCreated"[^\n]*"path":"' + re.escape(root.encode())
                         + rb'/a/b"\}\n')
        self.assertIsNotNone(m, out.data)
        events = [json.loads(l) for l in out.data.decode().splitlines() if '"event"' in l]
        self.assertEqual([(e["event"], e["path"]) for e in events],
                         [("NodeCreated", root + "/a"), ("NodeCreated", root + "/a/b")])
        self.assertEqual({e["state"] for e in events}, {"SyncConnected"})

    def test_watch_command_waits_for_one_event(self):
        root = unique_path("cliwcmd")
        zk = self.kazoo()
        zk.create(root, b"0")
        proc = subprocess.Popen([self.cli, "-server", self.server.hosts, "watch", "-t", "20000",
                                 root], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL)
        self.addCleanup(stop_process, proc)
        self.addCleanup(proc.stdout.close)
        self.addCleanup(proc.stderr.close)
        # The watch is armed some time after start: keep changing the node
        # until larch-cli reports a change (bounded by the deadline).
        deadline = time.monotonic() + READ_TIMEOUT_S
        n = 0
        while proc.poll() is None and time.monotonic() < deadline:
            n += 1
            zk.set(root, str(n).encode())
            time.sleep(0.2)
        proc.wait(timeout=STOP_TIMEOUT_S)
        out = proc.stdout.read().decode()
        self.assertEqual(proc.returncode, 0, proc.stderr.read())
        self.assertEqual(out, "WatchedEvent state:SyncConnected type:NodeDataChanged path:%s\n"
                         % root)

    def test_watch_command_timeout_and_missing_node(self):
        root = unique_path("cliwto")
        p = self.run_cli(["watch", "-t", "300", root])
        self.assert_status(p, 1)
        self.assertIn("No event on %s within 300 ms" % root, p.stderr)
        proc = self.start_cli()
        out = StreamReader(proc.stdout.fileno())
        self.send(proc, "watch -t 20000 %s" % root)
        zk = self.kazoo()
        # The node is briefly created and deleted until larch-cli reports it:
        # armed while the node is absent (nearly always) the exists watch
        # sees NodeCreated; armed in the short window it existed, NodeDeleted.
        event = rb"WatchedEvent state:SyncConnected type:Node(Created|Deleted) path:"
        deadline = time.monotonic() + READ_TIMEOUT_S
        while time.monotonic() < deadline and not out.wait_for(event, timeout_s=0.3):
            zk.create(root)
            zk.delete(root)
        self.assertIsNotNone(out.wait_for(event + re.escape(root.encode()) + rb"\n"), out.data)
        self.send(proc, "quit")
        proc.wait(timeout=READ_TIMEOUT_S)
        self.assertEqual(proc.returncode, 0)

    def test_removewatches(self):
        root = unique_path("clirw")
        zk = self.kazoo()
        zk.create(root, b"v")
        p = self.run_cli(["removewatches", root])
        self.assert_status(p, 1)
        self.assertEqual(p.stderr, "KeeperErrorCode = No such watcher for %s\n" % root)
        proc = self.start_cli()
        out = StreamReader(proc.stdout.fileno())
        self.send(proc, "get -w %s" % root)
        self.send(proc, "removewatches %s -d" % root)
        removed = (b"WatchedEvent state:SyncConnected type:DataWatchRemoved path:"
                   + root.encode() + b"\n")
        self.assertIsNotNone(out.wait_for(re.escape(removed)), out.data)
        mark = len(out.data)
        zk.set(root, b"w")  # the removed watch must not fire
        self.send(proc, "addWatch -m PERSISTENT %s" % root)
        self.send(proc, "removewatches %s" % root)
        self.assertIsNotNone(out.wait_for(rb"type:PersistentWatchRemoved", start=mark), out.data)
        self.assertNotIn(b"NodeDataChanged", out.data)
        self.send(proc, "quit")
        proc.wait(timeout=READ_TIMEOUT_S)
        self.assertEqual(proc.returncode, 0)


class PtyTest(CliTestCase, unittest.TestCase):
    """An interactive session on a pseudo-terminal, typed key by key."""

    def start_pty(self):
        master, slave = os.openpty()
        # the same server as self.kazoo(): against an ensemble, what one
        # client wrote is visible at once to another only on the same member
        proc = subprocess.Popen([self.cli, "-server", "%s:%d" % (HOST, self.server.port)],
                                stdin=slave,
                                stdout=slave, stderr=slave, close_fds=True)
        os.close(slave)
        self.addCleanup(stop_process, proc)
        self.addCleanup(os.close, master)
        return proc, master, StreamReader(master)

    def prompt(self, out, n):
        m = out.wait_for(rb"\[larch: [^\]]*\(CONNECTED\) %d\] " % n)
        self.assertIsNotNone(m, "no prompt %d in:\n%r" % (n, out.data[-2000:]))

    def test_line_editing_and_history(self):
        root = unique_path("clipty")
        zk = self.kazoo()
        proc, master, out = self.start_pty()
        self.prompt(out, 0)
        os.write(master, b"create %s hello\r" % root.encode())
        self.prompt(out, 1)
        # "et <path>", ctrl-a, "g": the g goes in at the start of the line
        os.write(master, b"et %s\x01g\r" % root.encode())
        self.prompt(out, 2)
        self.assertIn(b"\r\nhello\r\n", out.data)
        # typo fixed with left arrows: "set P wrld", 3x left, "o" -> world
        os.write(master, b"set %s wrld\x1b[D\x1b[D\x1b[Do\r" % root.encode())
        self.prompt(out, 3)
        self.assertEqual(zk.get(root)[0], b"world")
        # up twice recalls the get; end + backspace-free edit via ctrl-e
        mark = len(out.data)
        os.write(master, b"\x1b[A\x1b[A\r")
        self.prompt(out, 4)
        self.assertIn(b"\r\nworld\r\n", out.data[mark:])
        # ctrl-u clears a half-typed line; ctrl-w deletes the word before the cursor
        os.write(master, b"garbage words\x15set %s junk\x17edited\r" % root.encode())
        self.prompt(out, 5)
        self.assertEqual(zk.get(root)[0], b"edited")
        # home and end keys
        os.write(master, b"et %s X\x1b[Hs\x1b[F2\r" % root.encode())
        self.prompt(out, 6)
        self.assertEqual(zk.get(root)[0], b"X2")
        # backspace, and delete under the cursor
        os.write(master, b"set %s abcX\x7fd\x1b[D\x1b[D\x1b[3~\r" % root.encode())
        self.prompt(out, 7)
        self.assertEqual(zk.get(root)[0], b"abd")
        # ctrl-k kills to the end of the line
        os.write(master, b"set %s keep\x1b[D\x1b[D\x0bXY\r" % root.encode())
        self.prompt(out, 8)
        self.assertEqual(zk.get(root)[0], b"keXY")
        # down arrow past the newest entry restores the line being typed
        mark = len(out.data)
        os.write(master, b"get %s\x1b[A\x1b[B\r" % root.encode())
        self.prompt(out, 9)
        self.assertIn(b"\r\nkeXY\r\n", out.data[mark:])
        # errors do not end an interactive session
        os.write(master, b"get /no/such/node\r")
        self.prompt(out, 10)
        self.assertIn(b"Node does not exist: /no/such/node", out.data)
        os.write(master, b"quit\r")
        proc.wait(timeout=STOP_TIMEOUT_S)
        self.assertEqual(proc.returncode, 1, "the worst status of the session")

    def test_event_redraws_the_line_being_typed(self):
        root = unique_path("clityev")
        zk = self.kazoo()
        zk.create(root, b"0")
        proc, master, out = self.start_pty()
        self.prompt(out, 0)
        os.write(master, b"get -w %s\r" % root.encode())
        self.prompt(out, 1)
        os.write(master, b"get %s" % root.encode())  # half a command, no Enter
        self.assertIsNotNone(out.wait_for(re.escape(b"get " + root.encode())))
        mark = len(out.data)
        zk.set(root, b"1")
        self.assertIsNotNone(out.wait_for(rb"type:NodeDataChanged", start=mark))
        # after the event the prompt and the typed text are drawn again
        self.assertIsNotNone(out.wait_for(rb"NodeDataChanged[^\n]*\r?\n.*\(CONNECTED\) 1\] get "
                                          + re.escape(root.encode()), start=mark), out.data)
        os.write(master, b"\r")
        self.prompt(out, 2)
        self.assertIn(b"\r\n1\r\n", out.data[mark:])
        os.write(master, b"\x04")  # ctrl-d on an empty line ends the session
        proc.wait(timeout=STOP_TIMEOUT_S)
        self.assertEqual(proc.returncode, 0)


if __name__ == "__main__":
    unittest.main()
