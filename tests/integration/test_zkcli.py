"""zkCli.sh (the stock Java CLI) scripted against the server under test."""

import os
import re
import subprocess
import unittest

from harness import ServerTestCase, unique_path

ZKCLI = "/usr/share/zookeeper/bin/zkCli.sh"
ZKCLI_TIMEOUT_S = 60


class ZkCliTest(ServerTestCase, unittest.TestCase):

    def setUp(self):
        if not os.access(ZKCLI, os.X_OK):
            self.skipTest("%s not installed" % ZKCLI)

    def zkcli(self, commands):
        """Runs zkCli.sh with commands piped on stdin; returns (stdout, stderr)."""
        p = subprocess.run([ZKCLI, "-server", self.server.hosts],
                           input="\n".join(commands + ["quit"]) + "\n",
                           capture_output=True, text=True, timeout=ZKCLI_TIMEOUT_S)
        self.assertIn("WatchedEvent state:SyncConnected", p.stdout,
                      "zkCli.sh did not connect:\n" + p.stdout[-2000:] + p.stderr[-2000:])
        return p.stdout, p.stderr

    def test_create_get_set_stat_ls_delete(self):
        root = unique_path("cli")
        out, err = self.zkcli([
            "create %s hello" % root,
            "get %s" % root,
            "set %s world" % root,
            "get -s %s" % root,
            "create %s/kid k" % root,
            "ls %s" % root,
            "stat %s" % root,
            "getAcl %s" % root,
            "delete %s" % root,
            "delete %s/kid" % root,
            "delete %s" % root,
            "get %s" % root,
        ])
        self.assertIn("Created %s\n" % root, err)
        self.assertIn("Created %s/kid\n" % root, err)
        lines = out.splitlines()
        self.assertIn("hello", lines)
        self.assertIn("world", lines)
        stats = re.findall(r"cZxid = (0x[0-9a-f]+)\nctime = .*\nmZxid = (0x[0-9a-f]+)\n"
                           r"mtime = .*\npZxid = (0x[0-9a-f]+)\ncversion = (\d+)\n"
                           r"dataVersion = (\d+)\naclVersion = (\d+)\nephemeralOwner = (0x[0-9a-f]+)\n"
                           r"dataLength = (\d+)\nnumChildren = (\d+)", out)
        self.assertEqual(len(stats), 2, "get -s and stat print a Stat:\n" + out)
        first, second = stats
        self.assertEqual(first[3:], ("0", "1", "0", "0x0", "5", "0"))
        self.assertEqual(second[3:], ("1", "1", "0", "0x0", "5", "1"))
        self.assertGreater(int(first[1], 16), int(first[0], 16), "mZxid > cZxid after set")
        self.assertGreater(int(second[2], 16), int(first[2], 16), "pZxid moves with the child")
        self.assertIn("[kid]", lines)
        self.assertIn("'world,'anyone", lines)
        self.assertIn(": cdrwa", lines)
        self.assertIn("Node not empty: %s" % root, err)
        self.assertIn("Node does not exist: %s" % root, err)

    def test_deleteall_and_ls_root(self):
        root = unique_path("clitree")
        out, err = self.zkcli([
            "create %s" % root,
            "create %s/a" % root,
            "create %s/a/b x" % root,
            "create -e %s/eph" % root,
            "create -s %s/seq-" % root,
            "ls -R %s" % root,
            "deleteall %s" % root,
            "ls /",
        ])
        self.assertIn("Created %s/seq-0000000002" % root, err)
        self.assertIn("%s/a/b" % root, out.splitlines(), "ls -R lists the subtree")
        last_ls = [l for l in out.splitlines() if l.startswith("[")][-1]
        names = [n.strip() for n in last_ls.strip("[]").split(",")]
        self.assertIn("zookeeper", names)
        self.assertNotIn(root.lstrip("/"), names, "deleteall removed the tree")


if __name__ == "__main__":
    unittest.main()
