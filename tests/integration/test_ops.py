"""Every client opcode against the server under test (kazoo + raw client).

Expected values are ZooKeeper 3.8 behaviour, checked against the stock server
(LARCH_SUT=zookeeper) before being pointed at larchd.
"""

import time
import unittest

from harness import (CONTAINER, EBADARGUMENTS, EBADVERSION, EINVALIDACL,
                     ENOCHILDRENFOREPHEMERALS, ENODEEXISTS, ENONODE, ENOAUTH,
                     ENOTEMPTY, EPHEMERAL, ERUNTIMEINCONSISTENCY, MAX_BUFFER, OK,
                     OP, OPEN_ACL, PERM_ALL, PERM_CREATE, PERM_READ,
                     PERSISTENT, PERSISTENT_SEQUENTIAL,
                     PERSISTENT_SEQUENTIAL_WITH_TTL, PERSISTENT_WITH_TTL,
                     RawClient, ServerTestCase, XID_PING, err_name, sut_kind,
                     unique_path, wait_until)

# Container/TTL cleanup is periodic on both servers; give it this long.
CLEANUP_WAIT_S = 10.0


class CreateTest(ServerTestCase, unittest.TestCase):

    def test_create_and_create2_return_path_and_stat(self):
        zk = self.kazoo()
        root = unique_path("create")
        self.assertEqual(zk.create(root, b"root"), root)
        path, stat = zk.create(root + "/c", b"abc", include_data=True)  # create2
        self.assertEqual(path, root + "/c")
        self.assertEqual((stat.version, stat.cversion, stat.aversion), (0, 0, 0))
        self.assertEqual((stat.dataLength, stat.numChildren, stat.ephemeralOwner), (3, 0, 0))
        self.assertEqual(stat.czxid, stat.mzxid)
        self.assertEqual(stat.czxid, stat.pzxid)
        data, pstat = zk.get(root)
        self.assertEqual(data, b"root")
        self.assertEqual((pstat.numChildren, pstat.cversion), (1, 1))
        self.assertEqual(pstat.pzxid, stat.czxid, "parent pzxid = zxid of the child create")

    def test_create_errors(self):
        from kazoo.exceptions import NodeExistsError, NoNodeError
        zk = self.kazoo()
        root = unique_path("createerr")
        zk.create(root)
        with self.assertRaises(NodeExistsError):
            zk.create(root)
        with self.assertRaises(NoNodeError):
            zk.create(root + "/missing/child")
        c = self.raw()
        for bad in ("noslash", root + "/", root + "/a\x00b"):
            self.assertEqual(c.create(bad).err, EBADARGUMENTS, "create %r" % bad)
        self.assertEqual(c.create(root + "/e", flags=EPHEMERAL).err, OK)
        self.assertEqual(c.create(root + "/e/child").err, ENOCHILDRENFOREPHEMERALS)
        self.assertEqual(c.create(root + "/badacl", acl=[]).err, EINVALIDACL)

    def test_raw_create_returns_path_and_increasing_zxids(self):
        c = self.raw()
        root = unique_path("rawcreate")
        r1 = c.create(root, b"x")
        r2 = c.create(root + "/a", b"y")
        self.assertEqual((r1.err, r1.value), (OK, root))
        self.assertEqual((r2.err, r2.value), (OK, root + "/a"))
        self.assertGreater(r2.zxid, r1.zxid, "each write gets a larger zxid")
        read = c.get_data(root)
        self.assertGreaterEqual(read.zxid, r2.zxid, "a read's header zxid is the last applied")

    def test_sequential_names_follow_parent_cversion(self):
        zk = self.kazoo()
        root = unique_path("seq")
        zk.create(root)
        names = [zk.create(root + "/n-", sequence=True) for _ in range(3)]
        self.assertEqual(names, [root + "/n-%010d" % i for i in range(3)])
        zk.create(root + "/plain")
        zk.delete(root + "/plain")
        # ZooKeeper stores the number of child creates and reports
        # cversion = 2 * creates - numChildren (DataNode.copyStat, "v3
        # semantics"); the sequence suffix is the stored create count, so the
        # delete does not advance it: 4 creates so far -> suffix 4.
        self.assertEqual(zk.get(root)[1].cversion, 5)
        self.assertEqual(zk.create(root + "/n-", sequence=True), root + "/n-0000000004")
        eph = zk.create(root + "/e-", ephemeral=True, sequence=True)
        self.assertRegex(eph, r"/e-\d{10}$")
        self.assertEqual(eph, root + "/e-0000000005")
        c = self.raw()
        r = c.create(root + "/", flags=PERSISTENT_SEQUENTIAL)
        self.assertEqual((r.err, r.value), (OK, root + "/0000000006"),
                         "a sequential name may be empty before the counter")
        self.assertEqual(c.exists(root).value.cversion, 2 * 7 - 6)


class ContainerTtlTest(ServerTestCase, unittest.TestCase):

    def test_create_container_op19(self):
        c = self.raw()
        root = unique_path("cont")
        r = c.create(root, b"d", flags=CONTAINER, op="createContainer")
        self.assertEqual(r.err, OK, err_name(r.err))
        path, stat = r.value
        self.assertEqual(path, root)
        self.assertEqual((stat.version, stat.dataLength, stat.numChildren), (0, 1, 0))
        # ZooKeeper hides the container marker in ephemeralOwner from clients.
        self.assertEqual(stat.ephemeralOwner, 0)
        self.assertEqual(c.create(root + "/kid").err, OK)
        self.assertEqual(c.delete(root + "/kid").err, OK)
        gone = wait_until(lambda: c.exists(root).err == ENONODE, CLEANUP_WAIT_S)
        self.assertTrue(gone, "an emptied container is removed (waited %.0f s)" % CLEANUP_WAIT_S)

    def test_unused_container_is_kept(self):
        c = self.raw()
        root = unique_path("contkeep")
        self.assertEqual(c.create(root, flags=CONTAINER, op="createContainer").err, OK)
        time.sleep(1.5)
        self.assertEqual(c.exists(root).err, OK, "a container that never had children stays")

    def test_create_ttl_op21(self):
        c = self.raw()
        root = unique_path("ttl")
        r = c.create(root, b"t", flags=PERSISTENT_WITH_TTL, op="createTTL", ttl=300)
        self.assertEqual(r.err, OK, err_name(r.err))
        path, stat = r.value
        self.assertEqual((path, stat.ephemeralOwner, stat.dataLength), (root, 0, 1))
        keep = unique_path("ttlkeep")
        self.assertEqual(c.create(keep, flags=PERSISTENT_WITH_TTL, op="createTTL", ttl=300).err, OK)
        self.assertEqual(c.create(keep + "/child").err, OK)
        r = c.create(unique_path("ttlseq") + "-", flags=PERSISTENT_SEQUENTIAL_WITH_TTL,
                     op="createTTL", ttl=60000)
        self.assertEqual(r.err, OK, err_name(r.err))
        self.assertRegex(r.value[0], r"-\d{10}$")
        gone = wait_until(lambda: c.exists(root).err == ENONODE, CLEANUP_WAIT_S)
        self.assertTrue(gone, "an idle TTL node is removed after its TTL")
        self.assertEqual(c.exists(keep).err, OK, "a TTL node with children stays")

    def test_create_ttl_rejects_bad_arguments(self):
        c = self.raw()
        p = unique_path("ttlbad")
        cases = [("ttl 0", dict(flags=PERSISTENT_WITH_TTL, op="createTTL", ttl=0)),
                 ("negative ttl", dict(flags=PERSISTENT_WITH_TTL, op="createTTL", ttl=-5)),
                 ("non-TTL mode", dict(flags=PERSISTENT, op="createTTL", ttl=1000)),
                 ("TTL mode via create", dict(flags=PERSISTENT_WITH_TTL, op="create"))]
        for name, kw in cases:
            self.assertEqual(c.create(p, **kw).err, EBADARGUMENTS, name)
        self.assertEqual(c.exists(p).err, ENONODE)

    def test_delete_container_op20(self):
        c = self.raw()
        root = unique_path("delcont")
        self.assertEqual(c.create(root, flags=CONTAINER, op="createContainer").err, OK)
        r = c.delete_container(root)
        if sut_kind() == "zookeeper":
            # ZooKeeper 3.8.0 parses op 20 as the raw bytes of the whole frame
            # (PrepRequestProcessor: new String(request.request.array())), so a
            # client-sent deleteContainer always fails path validation. Newer
            # releases read a DeleteContainerRequest{path}, which larchd follows.
            self.assertEqual(r.err, EBADARGUMENTS)
            self.assertEqual(c.exists(root).err, OK, "connection still usable")
            return
        self.assertEqual(r.err, OK, err_name(r.err))
        self.assertEqual(c.exists(root).err, ENONODE)
        plain = unique_path("delcontplain")
        c.create(plain)
        self.assertEqual(c.delete_container(plain).err, EBADVERSION,
                         "deleteContainer refuses a normal node")
        full = unique_path("delcontfull")
        c.create(full, flags=CONTAINER, op="createContainer")
        c.create(full + "/k")
        self.assertEqual(c.delete_container(full).err, ENOTEMPTY)
        self.assertEqual(c.delete_container(unique_path("nothere")).err, ENONODE)


class ReadWriteTest(ServerTestCase, unittest.TestCase):

    def test_delete(self):
        c = self.raw()
        root = unique_path("del")
        c.create(root)
        c.create(root + "/a")
        self.assertEqual(c.delete(root).err, ENOTEMPTY)
        self.assertEqual(c.delete(root + "/a", version=3).err, EBADVERSION)
        self.assertEqual(c.delete(root + "/zz").err, ENONODE)
        self.assertEqual(c.delete(root + "/a", version=0).err, OK)
        stat = c.exists(root).value
        self.assertEqual((stat.cversion, stat.numChildren), (2, 0))
        self.assertEqual(c.delete(root).err, OK)
        self.assertEqual(c.exists(root).err, ENONODE)

    def test_exists_get_set(self):
        c = self.raw()
        p = unique_path("rw")
        self.assertEqual(c.exists(p).err, ENONODE)
        self.assertEqual(c.get_data(p).err, ENONODE)
        self.assertEqual(c.set_data(p, b"x").err, ENONODE)
        c.create(p, b"one")
        data, st0 = c.get_data(p).value
        self.assertEqual((data, st0.version, st0.dataLength), (b"one", 0, 3))
        r = c.set_data(p, b"three", version=0)
        self.assertEqual(r.err, OK)
        self.assertEqual((r.value.version, r.value.dataLength), (1, 5))
        self.assertGreater(r.value.mzxid, r.value.czxid)
        self.assertEqual(r.value.czxid, st0.czxid)
        self.assertEqual(c.set_data(p, b"bad", version=0).err, EBADVERSION)
        self.assertEqual(c.set_data(p, b"", version=-1).value.version, 2)
        data, st = c.get_data(p).value
        self.assertEqual((data, st.dataLength), (b"", 0))
        self.assertEqual(c.exists(p).value, st)

    def test_large_data_round_trip(self):
        zk = self.kazoo()
        p = unique_path("big")
        blob = bytes(range(256)) * 2048  # 512 KiB
        zk.create(p, blob)
        data, stat = zk.get(p)
        self.assertEqual(data, blob)
        self.assertEqual(stat.dataLength, len(blob))

    def test_near_limit_data_accepted(self):
        c = self.raw()
        p = unique_path("nearmax")
        c.create(p)
        r = c.set_data(p, b"z" * (MAX_BUFFER - 1024))
        self.assertEqual(r.err, OK)
        self.assertEqual(r.value.dataLength, MAX_BUFFER - 1024)

    def test_children_and_children2(self):
        zk = self.kazoo()
        c = self.raw()
        root = unique_path("kids")
        zk.create(root)
        for n in ("b", "a", "c"):
            zk.create(root + "/" + n)
        self.assertEqual(sorted(zk.get_children(root)), ["a", "b", "c"])
        kids, stat = zk.get_children(root, include_data=True)  # getChildren2
        self.assertEqual(sorted(kids), ["a", "b", "c"])
        self.assertEqual((stat.numChildren, stat.cversion), (3, 3))
        r = c.get_children2(root)
        self.assertEqual((sorted(r.value[0]), r.value[1].numChildren), (["a", "b", "c"], 3))
        self.assertEqual(c.get_children(root + "/a").value, [])
        self.assertEqual(c.get_children(root + "/zz").err, ENONODE)
        self.assertEqual(c.get_children2(root + "/zz").err, ENONODE)

    def test_get_all_children_number_op104(self):
        c = self.raw()
        root = unique_path("allkids")
        for p in ("", "/a", "/a/b", "/a/b/c", "/d", "/d/e"):
            c.create(root + p)
        self.assertEqual(c.get_all_children_number(root).value, 5)
        self.assertEqual(c.get_all_children_number(root + "/a").value, 2)
        self.assertEqual(c.get_all_children_number(root + "/a/b/c").value, 0)
        self.assertEqual(c.get_all_children_number(root + "/zz").err, ENONODE)

    def test_get_ephemerals_op103(self):
        c = self.raw()
        other = self.raw()
        root = unique_path("ephs")
        c.create(root)
        c.create(root + "/e1", flags=EPHEMERAL)
        c.create(root + "/x1", flags=EPHEMERAL)
        c.create(root + "/p")
        c.create(root + "/p/e2", flags=EPHEMERAL)
        other.create(root + "/theirs", flags=EPHEMERAL)
        r = c.get_ephemerals(root)
        self.assertEqual(r.err, OK)
        self.assertEqual(sorted(r.value), [root + "/e1", root + "/p/e2", root + "/x1"])
        # the prefix is a plain string prefix, not a path component
        self.assertEqual(sorted(c.get_ephemerals(root + "/e").value), [root + "/e1"])
        self.assertEqual(c.get_ephemerals(root + "/nothing").value, [])
        self.assertEqual(other.get_ephemerals(root).value, [root + "/theirs"])

    def test_sync(self):
        c = self.raw()
        p = unique_path("sync")
        c.create(p)
        r = c.sync(p)
        self.assertEqual((r.err, r.value), (OK, p))

    def test_check_standalone_op13(self):
        if sut_kind() == "zookeeper":
            # ZooKeeper 3.8.0 never answers a bare check: FinalRequestProcessor
            # serializes a null Stat and the reply is lost.
            self.skipTest("stock ZooKeeper 3.8.0 does not answer op 13 outside multi")
        c = self.raw()
        p = unique_path("check")
        c.create(p)
        self.assertEqual(c.check(p, 0).err, OK)
        self.assertEqual(c.check(p, 4).err, EBADVERSION)
        self.assertEqual(c.check(p + "/zz", 0).err, ENONODE)

    def test_ping_and_unknown_path_reads(self):
        c = self.raw()
        r = c.call(OP["ping"], xid=XID_PING)
        self.assertEqual((r.xid, r.err), (XID_PING, OK))
        self.assertEqual(c.exists("/definitely/not/here").err, ENONODE)


class AclTest(ServerTestCase, unittest.TestCase):

    def test_get_and_set_acl(self):
        c = self.raw()
        p = unique_path("acl")
        c.create(p)
        acl, stat = c.get_acl(p).value
        self.assertEqual(acl, OPEN_ACL)
        self.assertEqual(stat.aversion, 0)
        self.assertEqual(c.set_acl(p, OPEN_ACL, version=3).err, EBADVERSION)
        r = c.set_acl(p, [(PERM_READ | PERM_CREATE, "world", "anyone")], version=0)
        self.assertEqual(r.err, OK)
        self.assertEqual(r.value.aversion, 1)
        self.assertEqual(c.get_acl(p).value[0], [(PERM_READ | PERM_CREATE, "world", "anyone")])
        self.assertEqual(c.set_acl(p, OPEN_ACL, version=1).err, ENOAUTH,
                         "the ACL check comes before the version check")
        self.assertEqual(c.set_data(p, b"x").err, ENOAUTH)
        self.assertEqual(c.set_acl(p, OPEN_ACL).err, ENOAUTH, "setACL needs ADMIN")
        self.assertEqual(c.create(p + "/kid").err, OK, "CREATE is granted")
        self.assertEqual(c.delete(p + "/kid").err, ENOAUTH, "DELETE is not")
        self.assertEqual(c.get_acl(p + "/zz").err, ENONODE)

    def test_invalid_acls(self):
        c = self.raw()
        p = unique_path("aclbad")
        c.create(p)
        self.assertEqual(c.set_acl(p, []).err, EINVALIDACL)
        self.assertEqual(c.set_acl(p, [(PERM_ALL, "auth", "")]).err, EINVALIDACL,
                         "auth scheme without any authenticated id")
        self.assertEqual(c.set_acl(p, [(PERM_ALL, "nosuchscheme", "x")]).err, EINVALIDACL)
        self.assertEqual(c.create(p + "/k", acl=[(PERM_ALL, "ip", "not-an-ip")]).err, EINVALIDACL)


class MultiTest(ServerTestCase, unittest.TestCase):

    def test_multi_success_kazoo(self):
        zk = self.kazoo()
        root = unique_path("multi")
        zk.create(root, b"v0")
        t = zk.transaction()
        t.create(root + "/a", b"A")
        t.set_data(root, b"v1")
        t.check(root, 1)
        t.create(root + "/b")
        t.delete(root + "/b")
        results = t.commit()
        self.assertEqual(results[0], root + "/a")
        self.assertEqual(results[1].version, 1)
        self.assertEqual(results[2:], [True, root + "/b", True])
        self.assertEqual(zk.get(root)[0], b"v1")
        self.assertEqual(sorted(zk.get_children(root)), ["a"])

    def test_multi_success_raw_result_types(self):
        c = self.raw()
        root = unique_path("multiraw")
        ops = [("create", root, b"r", OPEN_ACL, 0),
               ("create2", root + "/x", b"", OPEN_ACL, 0),
               ("setData", root, b"rr", 0),
               ("check", root, 1),
               ("delete", root + "/x", 0)]
        r = c.multi(ops)
        self.assertEqual(r.err, OK)
        types = [t for t, _, _ in r.value]
        errs = [e for _, e, _ in r.value]
        # ZooKeeper reports a create2 inside multi as a plain create result
        self.assertEqual(types, [OP["create"], OP["create"], OP["setData"], OP["check"], OP["delete"]])
        self.assertEqual(errs, [OK] * 5)
        self.assertEqual(r.value[0][2], root)
        self.assertEqual(r.value[2][2].version, 1)
        self.assertEqual(c.multi([]).value, [], "an empty multi succeeds")

    def test_multi_failure_is_atomic_with_per_op_codes(self):
        c = self.raw()
        root = unique_path("multifail")
        c.create(root, b"keep")
        ops = [("create", root + "/a", b"", OPEN_ACL, 0),
               ("setData", root, b"changed", -1),
               ("setData", root + "/missing", b"", -1),
               ("check", root, 0),
               ("create", root + "/b", b"", OPEN_ACL, 0)]
        r = c.multi(ops)
        # ZooKeeper answers a failed multi with header err 0; the failure is in
        # the per-op results: ops before it OK, the failing op its code, the
        # rest RUNTIMEINCONSISTENCY, all as error results (type -1).
        self.assertEqual(r.err, OK)
        self.assertEqual(r.value, [(-1, OK, None), (-1, OK, None), (-1, ENONODE, None),
                                   (-1, ERUNTIMEINCONSISTENCY, None),
                                   (-1, ERUNTIMEINCONSISTENCY, None)])
        data, stat = c.get_data(root).value
        self.assertEqual((data, stat.version, stat.numChildren), (b"keep", 0, 0))
        self.assertEqual(c.exists(root + "/a").err, ENONODE)

    def test_multi_check_failure_and_dependent_ops(self):
        c = self.raw()
        root = unique_path("multidep")
        r = c.multi([("create", root, b"", OPEN_ACL, 0),
                     ("create", root + "/kid", b"", OPEN_ACL, 0),
                     ("check", root + "/kid", 0)])
        self.assertEqual([e for _, e, _ in r.value], [OK, OK, OK],
                         "later ops see the effects of earlier ones")
        r = c.multi([("delete", root + "/kid", -1),
                     ("check", root, 7)])
        self.assertEqual([(t, e) for t, e, _ in r.value], [(-1, OK), (-1, EBADVERSION)])
        self.assertEqual(c.exists(root + "/kid").err, OK, "rolled back")
        r = c.multi([("create", root + "/dup", b"", OPEN_ACL, 0),
                     ("create", root + "/dup", b"", OPEN_ACL, 0)])
        self.assertEqual([e for _, e, _ in r.value], [OK, ENODEEXISTS])
        self.assertEqual(c.exists(root + "/dup").err, ENONODE)

    def test_multi_read_op22(self):
        c = self.raw()
        root = unique_path("mread")
        c.create(root, b"top")
        c.create(root + "/k1", b"one")
        r = c.multi([("getChildren", root), ("getData", root + "/k1"),
                     ("getData", root + "/zz"), ("getChildren", root + "/zz")],
                    op="multiRead")
        self.assertEqual(r.err, OK)
        self.assertEqual(r.value[0][:2], (OP["getChildren"], OK))
        self.assertEqual(r.value[0][2], ["k1"])
        self.assertEqual(r.value[1][0], OP["getData"])
        self.assertEqual(r.value[1][2][0], b"one")
        self.assertEqual(r.value[1][2][1].dataLength, 3)
        self.assertEqual(r.value[2], (-1, ENONODE, None))
        self.assertEqual(r.value[3], (-1, ENONODE, None))


class SessionOpsTest(ServerTestCase, unittest.TestCase):

    def test_whoami_op107(self):
        c = self.raw()
        r = c.whoami()
        self.assertEqual((r.err, r.value), (OK, [("ip", "127.0.0.1")]))
        self.assertEqual(c.auth("digest", b"alice:secret").err, OK)
        self.assertEqual(sorted(c.whoami().value), [("digest", "alice"), ("ip", "127.0.0.1")])

    def test_close_session(self):
        c = self.raw()
        watcher = self.raw()
        p = unique_path("close")
        c.create(p, flags=EPHEMERAL)
        self.assertEqual(watcher.exists(p, watch=True).err, OK)
        sid, pw = c.session.session_id, c.session.passwd
        self.assertEqual(c.close_session().err, OK)
        self.assertTrue(c.wait_closed(5.0), "server closes the connection after closeSession")
        ev = watcher.wait_event(5.0)
        self.assertIsNotNone(ev, "NodeDeleted for the ephemeral")
        self.assertEqual((ev.type, ev.path), (2, p))
        self.assertEqual(watcher.exists(p).err, ENONODE)
        again = connect_again(self.server.port, sid, pw)
        self.assertEqual(again.timeout_ms, 0, "a closed session cannot be resumed")


def connect_again(port, sid, pw):
    with RawClient(port) as c:
        return c.connect(session_id=sid, passwd=pw)


if __name__ == "__main__":
    unittest.main()
