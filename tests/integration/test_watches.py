"""Watches: one-shot semantics, ordering against replies, persistent watches,
checkWatches/removeWatches, and setWatches/setWatches2 on reconnect."""

import threading
import time
import unittest

from harness import (ADD_WATCH_PERSISTENT, ADD_WATCH_PERSISTENT_RECURSIVE,
                     EVENT_CHILD_CHANGED, EVENT_CREATED, EVENT_DATA_CHANGED,
                     EVENT_DELETED, ENONODE, ENOWATCHER, OK, OP,
                     STATE_SYNC_CONNECTED, WATCHER_ANY, WATCHER_CHILDREN,
                     WATCHER_DATA, RawClient, Reply, ServerTestCase, Writer,
                     sut_kind, unique_path)


def kinds(events):
    return [(e.type, e.path) for e in events]


class OneShotWatchTest(ServerTestCase, unittest.TestCase):

    def test_data_watch_fires_exactly_once(self):
        a, b = self.raw(), self.raw()
        p = unique_path("dw")
        b.create(p, b"0")
        self.assertEqual(a.get_data(p, watch=True).err, OK)
        b.set_data(p, b"1")
        b.set_data(p, b"2")
        events = a.drain_events()
        self.assertEqual(kinds(events), [(EVENT_DATA_CHANGED, p)])
        self.assertEqual(events[0].state, STATE_SYNC_CONNECTED)

    def test_exists_watch_on_missing_node(self):
        a, b = self.raw(), self.raw()
        p = unique_path("ew")
        self.assertEqual(a.exists(p, watch=True).err, ENONODE)
        b.create(p)
        b.delete(p)
        self.assertEqual(kinds(a.drain_events()), [(EVENT_CREATED, p)])

    def test_exists_watch_on_existing_node_is_a_data_watch(self):
        a, b = self.raw(), self.raw()
        p = unique_path("ew2")
        b.create(p)
        self.assertEqual(a.exists(p, watch=True).err, OK)
        b.set_data(p, b"x")
        b.delete(p)
        self.assertEqual(kinds(a.drain_events()), [(EVENT_DATA_CHANGED, p)])

    def test_child_watch_fires_once(self):
        a, b = self.raw(), self.raw()
        p = unique_path("cw")
        b.create(p)
        self.assertEqual(a.get_children(p, watch=True).err, OK)
        b.create(p + "/k1")
        b.set_data(p, b"data change is not a child change")
        b.create(p + "/k2")
        self.assertEqual(kinds(a.drain_events()), [(EVENT_CHILD_CHANGED, p)])
        self.assertEqual(a.get_children2(p, watch=True).err, OK)
        b.delete(p + "/k1")
        self.assertEqual(kinds(a.drain_events()), [(EVENT_CHILD_CHANGED, p)])

    def test_delete_fires_data_and_parent_child_watches(self):
        a, b = self.raw(), self.raw()
        p = unique_path("delw")
        b.create(p)
        b.create(p + "/k")
        a.get_data(p + "/k", watch=True)
        a.get_children(p + "/k", watch=True)
        a.get_children(p, watch=True)
        b.delete(p + "/k")
        # One NodeDeleted for the node even though both a data and a child
        # watch were set on it by the same client, one ChildrenChanged for p.
        self.assertEqual(sorted(kinds(a.drain_events())),
                         sorted([(EVENT_DELETED, p + "/k"), (EVENT_CHILD_CHANGED, p)]))

    def test_own_write_triggers_own_watch_before_reply(self):
        a = self.raw()
        p = unique_path("own")
        a.create(p)
        a.get_data(p, watch=True)
        xid = a.send_request(OP["setData"], Writer().string(p).buffer(b"v").int(-1).bytes())
        a.wait_reply(xid)
        kinds_in_order = [(k, getattr(f, "xid", None)) for k, f in a.log[-2:]]
        self.assertEqual(kinds_in_order, [("event", None), ("reply", xid)],
                         "notification precedes the reply of the write that fired it")

    def test_kazoo_watch_callback(self):
        zk, other = self.kazoo(), self.kazoo()
        p = unique_path("kz")
        zk.create(p, b"a")
        fired = []
        done = threading.Event()

        def watcher(event):
            fired.append((event.type, event.path))
            done.set()
        zk.get(p, watch=watcher)
        other.set(p, b"b")
        other.set(p, b"c")
        self.assertTrue(done.wait(5.0))
        zk.sync(p)
        zk.get(p)
        self.assertEqual(fired, [("CHANGED", p)])


class WatchOrderTest(ServerTestCase, unittest.TestCase):
    ROUNDS = 30
    FENCE_SECONDS = 4.0

    def test_notification_before_reply_showing_new_data(self):
        a, b = self.raw(), self.raw()
        p = unique_path("order")
        b.create(p, b"0")
        for i in range(self.ROUNDS):
            _, st = a.get_data(p, watch=True).value
            self.assertEqual(b.set_data(p, b"%d" % (i + 1)).err, OK)
            mark = len(a.log)
            data, st2 = a.get_data(p).value
            self.assertEqual(st2.version, st.version + 1)
            seen = a.log[mark:]
            self.assertEqual([k for k, _ in seen], ["event", "reply"],
                             "round %d: notification must arrive before the read reply" % i)
            self.assertEqual((seen[0][1].type, seen[0][1].path), (EVENT_DATA_CHANGED, p))

    def test_racing_reads_never_see_new_data_before_the_event(self):
        # a polls with plain reads while b's write is in flight; the first
        # reply that shows the new version must come after the notification.
        a, b = self.raw(), self.raw()
        p = unique_path("race")
        b.create(p, b"0")
        for i in range(self.ROUNDS):
            _, st = a.get_data(p, watch=True).value
            a.events.clear()
            mark = len(a.log)
            wxid = b.send_request(OP["setData"], Writer().string(p).buffer(b"x").int(-1).bytes())
            deadline = time.monotonic() + 5.0
            while True:
                rep = a.wait_reply(a.send_request(OP["getData"], Writer().string(p).bool(False).bytes()))
                rep.body.buffer()
                version = rep.body.stat().version
                if version == st.version + 1:
                    break
                self.assertEqual(version, st.version)
                self.assertLess(time.monotonic(), deadline, "round %d: write never became visible" % i)
            self.assertTrue(any(k == "event" for k, _ in a.log[mark:-1]),
                            "round %d: a read showed v%d before its notification" % (i, version))
            self.assertEqual(kinds(a.events), [(EVENT_DATA_CHANGED, p)])
            self.assertEqual(b.wait_reply(wxid).err, OK)

    def test_no_notification_before_the_reply_that_set_its_watch(self):
        # Several sessions re-arm a data watch on a node another session
        # rewrites back to back. A client registers a watch when the reply
        # arrives, so a notification sent ahead of that reply is dropped by
        # the client and the watch is lost. (larchd once sent the event of
        # a txn newer than the read ahead of the reply while the worker
        # waited for older events; 30-50 per reader in 30k rounds.)
        p = unique_path("fence")
        w = self.raw()
        self.assertEqual(w.create(p, b"0").err, OK)
        stop = threading.Event()
        errors = []

        def writer():
            while not stop.is_set():
                w.set_data(p, b"x")

        def reader(r, counts):
            deadline = time.monotonic() + self.FENCE_SECONDS
            while time.monotonic() < deadline:
                before = len(r.events)
                self.assertEqual(r.get_data(p, watch=True).err, OK)
                if len(r.events) > before:
                    counts["early"] += 1
                    del r.events[before:]
                    continue
                if r.wait_event(5.0, pred=lambda e: e.path == p) is None:
                    counts["lost"] += 1
                counts["rounds"] += 1

        readers = [self.raw() for _ in range(3)]
        counts = [dict(early=0, lost=0, rounds=0) for _ in readers]

        def guarded(r, c):
            try:
                reader(r, c)
            except Exception as e:  # surfaced below, in the test thread
                errors.append(e)

        wt = threading.Thread(target=writer)
        wt.start()
        ts = [threading.Thread(target=guarded, args=(r, c)) for r, c in zip(readers, counts)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(self.FENCE_SECONDS + 30)
        stop.set()
        wt.join(30)
        self.assertEqual(errors, [])
        self.assertTrue(all(c["rounds"] > 0 for c in counts), counts)
        self.assertEqual([c["early"] for c in counts], [0] * 3, counts)
        self.assertEqual([c["lost"] for c in counts], [0] * 3, counts)

    def test_replies_keep_request_order(self):
        a = self.raw()
        p = unique_path("fifo")
        xids = [a.send_request(OP["create"], RawClient.create_body(p))]
        for i in range(20):
            xids.append(a.send_request(OP["getData"], Writer().string(p).bool(False).bytes()))
            xids.append(a.send_request(OP["setData"], Writer().string(p).buffer(b"%d" % i).int(-1).bytes()))
        got = []
        while len(got) < len(xids):
            f = a.read_one()
            if isinstance(f, Reply):
                got.append(f.xid)
        self.assertEqual(got, xids, "per-session FIFO: replies in request order")


class PersistentWatchTest(ServerTestCase, unittest.TestCase):

    def test_persistent_watch_op106(self):
        a, b = self.raw(), self.raw()
        p = unique_path("pw")
        b.create(p)
        self.assertEqual(a.add_watch(p, ADD_WATCH_PERSISTENT).err, OK)
        b.create(p + "/x")
        b.set_data(p, b"1")
        b.set_data(p + "/x", b"ignored: not the watched node")
        b.create(p + "/x/y")
        b.delete(p + "/x/y")
        b.delete(p + "/x")
        b.set_data(p, b"2")
        b.delete(p)
        self.assertEqual(kinds(a.drain_events()),
                         [(EVENT_CHILD_CHANGED, p), (EVENT_DATA_CHANGED, p),
                          (EVENT_CHILD_CHANGED, p), (EVENT_DATA_CHANGED, p),
                          (EVENT_DELETED, p)])
        b.create(p)
        self.assertEqual(kinds(a.drain_events()), [(EVENT_CREATED, p)],
                         "a persistent watch survives the node's deletion")

    def test_persistent_recursive_watch_op106(self):
        a, b = self.raw(), self.raw()
        p = unique_path("rw")
        b.create(p)
        self.assertEqual(a.add_watch(p, ADD_WATCH_PERSISTENT_RECURSIVE).err, OK)
        b.create(p + "/x")
        b.set_data(p, b"1")
        b.set_data(p + "/x", b"1")
        b.create(p + "/x/y")
        b.delete(p + "/x/y")
        b.delete(p + "/x")
        b.set_data(p, b"2")
        # Recursive watches report node events for the whole subtree and never
        # NodeChildrenChanged.
        self.assertEqual(kinds(a.drain_events()),
                         [(EVENT_CREATED, p + "/x"), (EVENT_DATA_CHANGED, p),
                          (EVENT_DATA_CHANGED, p + "/x"), (EVENT_CREATED, p + "/x/y"),
                          (EVENT_DELETED, p + "/x/y"), (EVENT_DELETED, p + "/x"),
                          (EVENT_DATA_CHANGED, p)])
        self.assertEqual(a.add_watch(unique_path("notyet"), ADD_WATCH_PERSISTENT).err, OK,
                         "addWatch on a missing path is allowed")

    def test_check_and_remove_watches_op17_op18(self):
        a, b = self.raw(), self.raw()
        p = unique_path("cr")
        b.create(p)
        self.assertEqual(a.check_watches(p, WATCHER_DATA).err, ENOWATCHER)
        a.get_data(p, watch=True)
        self.assertEqual(a.check_watches(p, WATCHER_DATA).err, OK)
        self.assertEqual(a.check_watches(p, WATCHER_ANY).err, OK)
        self.assertEqual(a.check_watches(p, WATCHER_CHILDREN).err, ENOWATCHER)
        if sut_kind() != "zookeeper":
            # ZooKeeper 3.8.0's WatchManager.containsWatcher answers for any
            # client watching the path (fixed in later releases).
            self.assertEqual(b.check_watches(p, WATCHER_DATA).err, ENOWATCHER,
                             "watches are per client")
        self.assertEqual(a.remove_watches(p, WATCHER_DATA).err, OK)
        self.assertEqual(a.check_watches(p, WATCHER_DATA).err, ENOWATCHER)
        self.assertEqual(a.remove_watches(p, WATCHER_DATA).err, ENOWATCHER)
        b.set_data(p, b"nobody is watching")
        a.get_children(p, watch=True)
        self.assertEqual(a.remove_watches(p, WATCHER_ANY).err, OK)
        b.create(p + "/k")
        self.assertEqual(a.drain_events(), [], "removed watches never fire")
        a.add_watch(p, ADD_WATCH_PERSISTENT_RECURSIVE)
        self.assertEqual(a.check_watches(p, WATCHER_ANY).err, OK)
        self.assertEqual(a.remove_watches(p, WATCHER_ANY).err, OK)
        self.assertEqual(a.check_watches(p, WATCHER_ANY).err, ENOWATCHER)


class ReconnectWatchTest(ServerTestCase, unittest.TestCase):

    def _reconnect(self, old):
        sid, pw = old.session.session_id, old.session.passwd
        old.close()
        c = RawClient(self.server.port)
        self.addCleanup(c.close)
        s = c.connect(session_id=sid, passwd=pw, last_zxid=old.last_zxid)
        self.assertEqual(s.session_id, sid)
        self.assertGreater(s.timeout_ms, 0)
        return c

    def test_set_watches_op101_fires_for_missed_changes(self):
        a, b = self.raw(), self.raw()
        p = unique_path("sw")
        b.create(p)
        b.create(p + "/quiet")
        a.get_data(p, watch=True)
        a.exists(p + "/new", watch=True)
        a.get_children(p, watch=True)
        rel = a.last_zxid
        a.close()
        b.set_data(p, b"changed while away")
        b.create(p + "/new")
        b.delete(p + "/quiet")
        c = self._reconnect(a)
        r = c.set_watches(rel, data=[p, p + "/quiet"], exist=[p + "/new"], child=[p])
        self.assertEqual(r.err, OK)
        self.assertEqual(sorted(kinds(c.events + c.drain_events())),
                         sorted([(EVENT_DATA_CHANGED, p), (EVENT_CREATED, p + "/new"),
                                 (EVENT_CHILD_CHANGED, p), (EVENT_DELETED, p + "/quiet")]))

    def test_set_watches_op101_rearms_unchanged_paths(self):
        a, b = self.raw(), self.raw()
        p = unique_path("sw2")
        b.create(p)
        a.get_data(p, watch=True)
        c = self._reconnect(a)
        self.assertEqual(c.set_watches(a.last_zxid, data=[p], exist=[unique_path("none")]).err, OK)
        self.assertEqual(c.drain_events(), [])
        b.set_data(p, b"now")
        self.assertEqual(kinds(c.drain_events()), [(EVENT_DATA_CHANGED, p)])

    def test_set_watches2_op105_persistent(self):
        a, b = self.raw(), self.raw()
        p = unique_path("sw3")
        b.create(p)
        b.create(p + "/sub")
        c = self._reconnect(a)
        r = c.set_watches(b.last_zxid, persistent=[p], recursive=[p + "/sub"])
        self.assertEqual(r.err, OK)
        self.assertEqual(c.drain_events(), [])
        b.set_data(p, b"1")
        b.create(p + "/sub/deep")
        b.set_data(p + "/sub/deep", b"2")
        b.set_data(p, b"3")
        # p/sub/deep is a grandchild of p: nothing for the plain persistent
        # watch on p, node events from the recursive one on p/sub.
        self.assertEqual(kinds(c.drain_events()),
                         [(EVENT_DATA_CHANGED, p), (EVENT_CREATED, p + "/sub/deep"),
                          (EVENT_DATA_CHANGED, p + "/sub/deep"), (EVENT_DATA_CHANGED, p)])


if __name__ == "__main__":
    unittest.main()
