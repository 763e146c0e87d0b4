"""Null strings (jute length -1) versus empty strings in every request field.

Each table row is one request with a null or "" string somewhere, the reply
error stock ZooKeeper 3.8 answers, and whether the connection stays usable
afterwards (a ping is answered) or the server closes it. The table is
ZooKeeper's behaviour, measured with LARCH_SUT=zookeeper; larchd must match.

Every row runs on a fresh RawClient session, so a row that closes the
connection cannot disturb the next one. Rows may carry a setup step (run on
the row's client before the request) and a check (run after the reply, only
when the connection stayed, with the row's client still usable).

Why the codes look the way they do in ZooKeeper: a null that reaches code
which dereferences it (PrepRequestProcessor, FinalRequestProcessor) is caught
as a generic exception and answered MARSHALLINGERROR on a live connection; a
null or "" that reaches PathUtils.validatePath is BADARGUMENTS; read paths
are not validated, so "" reads as the root.
"""

import base64
import collections
import hashlib
import unittest

from harness import (ADD_WATCH_PERSISTENT, ADD_WATCH_PERSISTENT_RECURSIVE,
                     CONTAINER, EAUTHFAILED, EVENT_CREATED, EBADARGUMENTS, EINVALIDACL,
                     EMARSHALLINGERROR, ENONODE, ENOWATCHER, EPHEMERAL, OK, OP, OPEN_ACL,
                     PERM_ALL,
                     PERSISTENT, PERSISTENT_WITH_TTL, WATCHER_ANY,
                     WATCHER_CHILDREN, WATCHER_DATA, XID_AUTH, XID_SETWATCHES,
                     ConnectionClosed, DecodeError, RawClient, ServerTestCase,
                     Writer, err_name, unique_path)

NULL = None          # a jute string/buffer of length -1
STAYS, CLOSES = True, False
TTL_MS = 60000
ROW_TIMEOUT_S = 5.0  # bound on every read of a row (reply, ping, close)

Row = collections.namedtuple("Row", "name op body err stays xid setup check")


def row(name, op, body, err, stays=STAYS, xid=None, setup=None, check=None):
    """body: bytes, or a function of the row's Ctx returning bytes."""
    return Row(name, op, body, err, stays, xid, setup, check)


def show(v):
    return "null" if v is None else repr(v)


class Ctx:
    """What a row's body, setup and check functions get."""

    def __init__(self, test, client):
        self.test, self.c = test, client

    def fresh(self, data=b"x"):
        """Creates a new open-ACL node and returns its path."""
        p = unique_path("nul")
        r = self.c.create(p, data)
        self.test.assertEqual(r.err, OK, "setup create %s: %s" % (p, err_name(r.err)))
        return p


def usable(c):
    """True if the connection still answers a ping, False if it was closed."""
    try:
        return c.ping().err == OK
    except (ConnectionClosed, OSError, DecodeError):
        return False


def digest_id(credential):
    """The id ZooKeeper's digest provider derives from an auth credential:
    user (text before the first ':') + ':' + base64(sha1(credential))."""
    user = credential.split(b":", 1)[0].decode()
    return user + ":" + base64.b64encode(hashlib.sha1(credential).digest()).decode()


class NullTableCase(ServerTestCase):
    """Runs table rows, one fresh session per row."""

    def run_rows(self, rows):
        names = [r.name for r in rows]
        self.assertEqual(len(names), len(set(names)), "row names are unique")
        for r in rows:
            with self.subTest(row=r.name):
                self.run_row(r)

    def run_row(self, r):
        c = RawClient(self.server.port, timeout_s=ROW_TIMEOUT_S)
        try:
            s = c.connect()
            self.assertGreater(s.timeout_ms, 0, "session refused")
            ctx = Ctx(self, c)
            if r.setup:
                r.setup(ctx)
            body = r.body(ctx) if callable(r.body) else r.body
            xid = c.send_request(OP[r.op], body, xid=r.xid)
            try:
                rep = c.wait_reply(xid)
                got_err = err_name(rep.err)
            except ConnectionClosed:
                rep, got_err = None, "closed without reply"
            stays = usable(c)
            self.assertEqual(
                (got_err, stays), (err_name(r.err), r.stays),
                "%s: expected %s and the connection %s; got %s, %s" % (
                    r.name, err_name(r.err), "stays" if r.stays else "closed",
                    got_err, "stays" if stays else "closed"))
            if not r.stays:
                self.assertTrue(c.wait_closed(ROW_TIMEOUT_S), "server closes")
            if r.check:
                r.check(ctx, rep)
            if stays:
                c.close_session()
        finally:
            c.close()


# ---- body builders ---------------------------------------------------------
def create_body(op, path, data=b"", acl=OPEN_ACL):
    flags = {"createContainer": CONTAINER, "createTTL": PERSISTENT_WITH_TTL}.get(op, PERSISTENT)
    return RawClient.create_body(path, data, acl, flags,
                                 TTL_MS if op == "createTTL" else None)


def path_body(path, *tail):
    """string(path) followed by ("int"|"bool", value) fields."""
    w = Writer().string(path)
    for kind, v in tail:
        getattr(w, kind)(v)
    return w.bytes()


CREATE_OPS = ("create", "create2", "createContainer", "createTTL")


def both(name, op, make, null_err, empty_err, **kw):
    """Two rows: make(NULL) and make("")."""
    return [row("%s null" % name, op, make(NULL), null_err, **kw),
            row("%s empty" % name, op, make(""), empty_err, **kw)]


# ---- writes ----------------------------------------------------------------
def node_data_is(expected):
    def check(ctx, rep):
        path = ctx.last_path
        r = ctx.c.get_data(path)
        ctx.test.assertEqual(r.err, OK)
        ctx.test.assertEqual(show(r.value[0]), show(expected), "getData(%s) data" % path)
    return check


def create_with_data(op, data):
    def body(ctx):
        ctx.last_path = unique_path("nul")
        return create_body(op, ctx.last_path, data)
    return body


def set_data_to(data):
    def body(ctx):
        ctx.last_path = ctx.fresh()
        return Writer().string(ctx.last_path).buffer(data).int(-1).bytes()
    return body


WRITE_ROWS = []
for _op in CREATE_OPS:
    WRITE_ROWS += both("%s path" % _op, _op, lambda v, o=_op: create_body(o, v),
                       EMARSHALLINGERROR, EBADARGUMENTS)
    for _data in (NULL, b""):
        WRITE_ROWS.append(row("%s data %s" % (_op, show(_data)), _op,
                              create_with_data(_op, _data), OK,
                              check=node_data_is(_data)))
WRITE_ROWS += both("delete path", "delete", lambda v: path_body(v, ("int", -1)),
                   EMARSHALLINGERROR, EBADARGUMENTS)
WRITE_ROWS += both("setData path", "setData",
                   lambda v: Writer().string(v).buffer(b"x").int(-1).bytes(),
                   EBADARGUMENTS, EBADARGUMENTS)
WRITE_ROWS += both("setACL path", "setACL",
                   lambda v: Writer().string(v).acls(OPEN_ACL).int(-1).bytes(),
                   EBADARGUMENTS, EBADARGUMENTS)
WRITE_ROWS += both("check path", "check", lambda v: path_body(v, ("int", -1)),
                   EBADARGUMENTS, EBADARGUMENTS)
WRITE_ROWS += both("deleteContainer path", "deleteContainer", lambda v: path_body(v),
                   EBADARGUMENTS, EBADARGUMENTS)
for _data in (NULL, b""):
    WRITE_ROWS.append(row("setData data %s" % show(_data), "setData", set_data_to(_data),
                          OK, check=node_data_is(_data)))


def reply_value(parse, expected):
    def check(ctx, rep):
        want = expected(ctx) if callable(expected) else expected
        ctx.test.assertEqual(parse(rep.body), want)
    return check


def make_ephemeral(ctx):
    ctx.eph = unique_path("nuleph")
    ctx.test.assertEqual(ctx.c.create(ctx.eph, flags=EPHEMERAL).err, OK)


for _v in (NULL, ""):
    # sync echoes the path it was given, null included
    WRITE_ROWS.append(row("sync path %s" % show(_v), "sync", path_body(_v), OK,
                          check=reply_value(lambda r: r.string(), _v)))
    # a null or "" prefix lists all of the session's ephemerals
    WRITE_ROWS.append(row("getEphemerals prefix %s" % show(_v), "getEphemerals",
                          path_body(_v), OK, setup=make_ephemeral,
                          check=reply_value(lambda r: r.strings(), lambda ctx: [ctx.eph])))


# ---- ACLs (in create and in setACL) ----------------------------------------
def acl_create(scheme, ident):
    return lambda ctx: create_body("create", unique_path("nul"),
                                   acl=[(PERM_ALL, scheme, ident)])


def acl_set(scheme, ident):
    return lambda ctx: (Writer().string(ctx.fresh()).acls([(PERM_ALL, scheme, ident)])
                        .int(-1).bytes())


BOB = b"bob:secret"


def add_bob(ctx):
    ctx.test.assertEqual(ctx.c.auth("digest", BOB).err, OK)


ACL_ROWS = []
for _how, _mk in (("create", acl_create), ("setACL", acl_set)):
    _op = _how
    for _v in (NULL, ""):
        ACL_ROWS.append(row("%s acl scheme %s" % (_how, show(_v)), _op, _mk(_v, "anyone"),
                            EINVALIDACL))
    for _scheme in ("world", "digest", "ip"):
        ACL_ROWS.append(row("%s acl (%s, null)" % (_how, _scheme), _op, _mk(_scheme, NULL),
                            EMARSHALLINGERROR))
        ACL_ROWS.append(row("%s acl (%s, '')" % (_how, _scheme), _op, _mk(_scheme, ""),
                            EINVALIDACL))
    for _scheme in ("super", "sasl", "x509"):
        for _v in (NULL, ""):
            ACL_ROWS.append(row("%s acl (%s, %s)" % (_how, _scheme, show(_v)), _op,
                                _mk(_scheme, _v), EINVALIDACL))
    for _v in (NULL, ""):
        ACL_ROWS.append(row("%s acl (auth, %s) unauthenticated" % (_how, show(_v)), _op,
                            _mk("auth", _v), EINVALIDACL))
        ACL_ROWS.append(row("%s acl (auth, %s) after addauth digest" % (_how, show(_v)), _op,
                            _mk("auth", _v), OK, setup=add_bob))


# ---- multi -----------------------------------------------------------------
def multi_op(kind, path):
    if kind in ("create", "create2"):
        return (kind, path, b"", OPEN_ACL, PERSISTENT)
    if kind == "createContainer":
        return (kind, path, b"", OPEN_ACL, CONTAINER)
    if kind == "createTTL":
        return (kind, path, b"", OPEN_ACL, PERSISTENT_WITH_TTL, TTL_MS)
    if kind == "setData":
        return (kind, path, b"x", -1)
    if kind in ("delete", "check"):
        return (kind, path, -1)
    return (kind, path)  # getData, getChildren (multiRead)


# ZooKeeper's body for a multi/multiRead it could not run: a MultiResponse with
# no results, i.e. only the end marker (type -1, done, err -1). The C client
# parses a multi body whatever the header error, so the bytes matter.
EMPTY_MULTI_RESPONSE = Writer().int(-1).bool(True).int(-1).bytes()


def multi_results(expected):
    """Check: the per-op results as [(type, err)]; None: an empty MultiResponse."""
    def check(ctx, rep):
        if expected is None:
            ctx.test.assertEqual(rep.body.data.hex(), EMPTY_MULTI_RESPONSE.hex(),
                                 "body: a MultiResponse with no results")
            return
        got = [(t, e) for t, e, _ in RawClient.parse_multi_response(rep.body)]
        ctx.test.assertEqual(got, expected)
    return check


def multi_of(*ops):
    return lambda ctx: RawClient.multi_body([multi_op(k, p(ctx) if callable(p) else p)
                                             for k, p in ops])


def first_path(ctx):
    ctx.first = unique_path("nul")
    return ctx.first


def nothing_applied(ctx, rep):
    multi_results(None)(ctx, rep)
    ctx.test.assertEqual(err_name(ctx.c.exists(ctx.first).err), err_name(ENONODE),
                         "the valid create before the null is not applied")


MULTI_KINDS = CREATE_OPS + ("delete", "setData", "check")
MULTI_ROWS = []
for _k in MULTI_KINDS:
    MULTI_ROWS.append(row("multi %s path null" % _k, "multi", multi_of((_k, NULL)),
                          EMARSHALLINGERROR, check=multi_results(None)))
    MULTI_ROWS.append(row("multi %s path empty" % _k, "multi", multi_of((_k, "")),
                          OK, check=multi_results([(-1, EBADARGUMENTS)])))
    # the null after a valid op: still the whole request, nothing applied
    MULTI_ROWS.append(row("multi create+%s path null" % _k, "multi",
                          multi_of(("create", first_path), (_k, NULL)),
                          EMARSHALLINGERROR, check=nothing_applied))


def multiread_root(kind):
    def check(ctx, rep):
        got = RawClient.parse_multi_response(rep.body)
        root = ctx.c.multi([(kind, "/")], op="multiRead")
        ctx.test.assertEqual(root.err, OK)
        ctx.test.assertEqual(got, root.value, "multiRead %s('') answers the root" % kind)
    return check


for _k in ("getData", "getChildren"):
    MULTI_ROWS.append(row("multiRead %s path null" % _k, "multiRead", multi_of((_k, NULL)),
                          EMARSHALLINGERROR, check=multi_results(None)))
    MULTI_ROWS.append(row("multiRead %s path empty" % _k, "multiRead", multi_of((_k, "")),
                          OK, check=multiread_root(_k)))


# ---- reads -----------------------------------------------------------------
PARSE = {"exists": lambda r: r.stat(),
         "getData": lambda r: (r.buffer(), r.stat()),
         "getChildren": lambda r: sorted(r.strings()),
         "getChildren2": lambda r: (sorted(r.strings()), r.stat()),
         "getACL": lambda r: (r.acls(), r.stat()),
         "getAllChildrenNumber": lambda r: r.int()}


def read_body(op, path, watch):
    return path_body(path) if watch is None else path_body(path, ("bool", watch))


def answers_as_root(op, watch):
    def check(ctx, rep):
        got = PARSE[op](rep.body)
        root = ctx.c.call(OP[op], read_body(op, "/", watch))
        ctx.test.assertEqual(root.err, OK)
        want = PARSE[op](root.body)
        if op == "getAllChildrenNumber":
            want += 1  # ZooKeeper counts every node whose path starts with "/"
        ctx.test.assertEqual(got, want, "%s('') answers as '/'" % op)
    return check


READ_ROWS = []
for _op in PARSE:
    for _w in ((None,) if _op in ("getACL", "getAllChildrenNumber") else (False, True)):
        _name = _op if _w is None else "%s watch=%s" % (_op, _w)
        READ_ROWS.append(row("%s path null" % _name, _op, read_body(_op, NULL, _w),
                             EMARSHALLINGERROR))
        READ_ROWS.append(row("%s path empty" % _name, _op, read_body(_op, "", _w), OK,
                             check=answers_as_root(_op, _w)))


# ---- watch management ------------------------------------------------------
WATCH_ROWS = []
for _mode in (ADD_WATCH_PERSISTENT, ADD_WATCH_PERSISTENT_RECURSIVE):
    WATCH_ROWS += both("addWatch mode %d path" % _mode, "addWatch",
                       lambda v, m=_mode: path_body(v, ("int", m)), OK, OK)
for _t in (WATCHER_CHILDREN, WATCHER_DATA, WATCHER_ANY):
    WATCH_ROWS += both("checkWatches type %d path" % _t, "checkWatches",
                       lambda v, t=_t: path_body(v, ("int", t)), EMARSHALLINGERROR, ENOWATCHER)
    WATCH_ROWS += both("removeWatches type %d path" % _t, "removeWatches",
                       lambda v, t=_t: path_body(v, ("int", t)), ENOWATCHER, ENOWATCHER)


def set_watches_body(lists, v2, relative_zxid=0, null_data_vector=False):
    """lists: {"data"|"exist"|"child"|"persistent"|"recursive": [paths]}."""
    w = Writer().long(relative_zxid)
    names = ("data", "exist", "child") + (("persistent", "recursive") if v2 else ())
    for n in names:
        if n == "data" and null_data_vector:
            w.int(-1)
        else:
            w.strings(lists.get(n, []))
    return w.bytes()


for _v2, _op in ((False, "setWatches"), (True, "setWatches2")):
    for _list in ("data", "exist", "child") + (("persistent", "recursive") if _v2 else ()):
        _null_err = OK if _list in ("persistent", "recursive") else EMARSHALLINGERROR
        WATCH_ROWS.append(row("%s %s [null]" % (_op, _list), _op,
                              set_watches_body({_list: ["/", NULL]}, _v2),
                              _null_err, xid=XID_SETWATCHES))
        WATCH_ROWS.append(row("%s %s ['']" % (_op, _list), _op,
                              set_watches_body({_list: ["/", ""]}, _v2),
                              OK, xid=XID_SETWATCHES))
    WATCH_ROWS.append(row("%s data vector null" % _op, _op,
                          set_watches_body({}, _v2, null_data_vector=True),
                          EMARSHALLINGERROR, xid=XID_SETWATCHES))


# A watch set with path "" is kept under "". ZooKeeper's checkWatches("")
# never finds it (its WatchManager.containsWatcher walks the path's parents,
# and "" has none): NOWATCHER for every type. removeWatches("") removes it,
# except after an exist watch through setWatches. (checkWatches("/") is
# not checked here: ZooKeeper answers it OK if any session watches "/".)
def watch_on_empty(how):
    def setup(ctx):
        c = ctx.c
        if how in ("exists", "getData", "getChildren"):
            r = c.call(OP[how], path_body("", ("bool", True)))
        elif how.startswith("addWatch"):
            r = c.call(OP["addWatch"], path_body("", ("int", int(how[-1]))))
        else:
            # relative zxid = the last zxid, as a reconnecting client sends:
            # "" reads as the root, which has not changed since, so data and
            # child watches register; an exist watch on a node that exists
            # fires NodeCreated at once instead.
            op, lst = how.split(" ")
            last = c.exists("/").zxid
            r = c.call(OP[op], set_watches_body({lst: [""]}, op == "setWatches2", last),
                       xid=XID_SETWATCHES)
            ctx.test.assertEqual(
                [(e.type, e.path) for e in c.events],
                [(EVENT_CREATED, "")] if lst == "exist" else [], "events of %s('')" % how)
        ctx.test.assertEqual(r.err, OK, "setup %s('')" % how)
    return setup


for _how in ("exists", "getData", "getChildren", "addWatch0", "addWatch1",
             "setWatches data", "setWatches exist", "setWatches child",
             "setWatches2 persistent", "setWatches2 recursive"):
    for _t in (WATCHER_CHILDREN, WATCHER_DATA, WATCHER_ANY):
        WATCH_ROWS.append(row("checkWatches type %d '' after %s('')" % (_t, _how),
                              "checkWatches", path_body("", ("int", _t)), ENOWATCHER,
                              setup=watch_on_empty(_how)))
    WATCH_ROWS.append(row("removeWatches any '' after %s('')" % _how, "removeWatches",
                          path_body("", ("int", WATCHER_ANY)),
                          ENOWATCHER if _how == "setWatches exist" else OK,
                          setup=watch_on_empty(_how)))


# ---- auth ------------------------------------------------------------------
def auth_body(scheme, credential):
    return Writer().int(0).string(scheme).buffer(credential).bytes()


def whoami_has(ident):
    def check(ctx, rep):
        r = ctx.c.whoami()
        ctx.test.assertEqual(r.err, OK)
        ctx.test.assertIn(ident, r.value)
    return check


AUTH_ROWS = [
    row("auth scheme null", "auth", auth_body(NULL, b"bob:x"), EAUTHFAILED, CLOSES, XID_AUTH),
    row("auth scheme empty", "auth", auth_body("", b"bob:x"), EAUTHFAILED, CLOSES, XID_AUTH),
    row("auth digest credential null", "auth", auth_body("digest", NULL), EAUTHFAILED,
        CLOSES, XID_AUTH),
    # whoAmI reports a digest identity by its user: the text before ':'
    row("auth digest credential empty", "auth", auth_body("digest", b""), OK, xid=XID_AUTH,
        check=whoami_has(("digest", ""))),
    row("auth digest credential ':pw'", "auth", auth_body("digest", b":pw"), OK,
        xid=XID_AUTH, check=whoami_has(("digest", ""))),
    row("auth digest credential without ':'", "auth", auth_body("digest", b"bob"), OK,
        xid=XID_AUTH, check=whoami_has(("digest", "bob"))),
    row("auth ip credential null", "auth", auth_body("ip", NULL), OK, xid=XID_AUTH),
    row("auth ip credential empty", "auth", auth_body("ip", b""), OK, xid=XID_AUTH),
]


# ---- tests -----------------------------------------------------------------
class NullWriteTest(NullTableCase, unittest.TestCase):

    def test_write_paths_and_data(self):
        self.run_rows(WRITE_ROWS)

    def test_acl_scheme_and_id(self):
        self.run_rows(ACL_ROWS)

    def test_acl_auth_after_addauth_is_the_digest_identity(self):
        c = RawClient(self.server.port, timeout_s=ROW_TIMEOUT_S)
        self.addCleanup(c.close)
        c.connect()
        self.assertEqual(c.auth("digest", BOB).err, OK)
        for v in (NULL, ""):
            p = unique_path("nul")
            self.assertEqual(c.create(p, acl=[(PERM_ALL, "auth", v)]).err, OK)
            self.assertEqual(c.get_acl(p).value[0], [(PERM_ALL, "digest", digest_id(BOB))],
                             "(auth, %s) becomes the session's digest id" % show(v))


class NullMultiTest(NullTableCase, unittest.TestCase):

    def test_multi_and_multiread(self):
        self.run_rows(MULTI_ROWS)


class NullReadWatchTest(NullTableCase, unittest.TestCase):

    def test_read_paths(self):
        self.run_rows(READ_ROWS)

    def test_watch_paths(self):
        self.run_rows(WATCH_ROWS)


class NullAuthTest(NullTableCase, unittest.TestCase):

    def test_auth_scheme_and_credential(self):
        self.run_rows(AUTH_ROWS)

    def test_connect_with_null_password_creates_a_session(self):
        c = RawClient(self.server.port, timeout_s=ROW_TIMEOUT_S)
        self.addCleanup(c.close)
        s = c.connect(session_id=0, passwd=NULL)
        self.assertGreater(s.timeout_ms, 0)
        self.assertNotEqual(s.session_id, 0)
        self.assertEqual(len(s.passwd), 16)
        self.assertEqual(c.exists("/").err, OK)
        self.assertEqual(c.close_session().err, OK)


if __name__ == "__main__":
    unittest.main()
