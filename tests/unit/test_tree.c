/*
 * test_tree.c — the znode tree core: prep (PrepRequestProcessor semantics)
 * and apply (DataTree semantics), driven the way the sequencer drives them:
 * the test assigns zxids and times, preps requests into txns, applies them
 * and resets the pending overlay after each batch.
 *
 * Expected values come from ZooKeeper 3.8 (DataTree, PrepRequestProcessor,
 * DataNode.copyStat) and were checked against a stock 3.8.0 server.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <urcu.h>

#include "tree/tree.h"
#include "tree/tree_int.h" /* index_buckets: what tree_grow_index sized */

#define MAX_EVENTS 64

#if defined(__SANITIZE_THREAD__)
/* liburcu 0.13 is not instrumented: its rcu_barrier and lfht-destroy
 * completions are allocated by the caller and freed by liburcu's threads,
 * synchronised by futexes TSan cannot see. Ignore the library's own
 * allocations; the tree's are annotated (tree_int.h). */
const char *__tsan_default_suppressions(void);
const char *__tsan_default_suppressions(void)
{
    return "called_from_lib:liburcu.so\ncalled_from_lib:liburcu-cds.so\n";
}
#endif
#define T0_MS 1700000000000LL

/* ---- fixture -------------------------------------------------------------------- */

struct evrec {
    int32_t type;
    char path[128];
    size_t path_len; /* the whole length (path[] keeps a prefix) */
    int64_t zxid;
    int32_t acl_count; /* -1: the event carried no ACL */
    int32_t acl_perms; /* of the first entry */
    char acl_id[64];   /* of the first entry */
};

struct fx {
    struct tree *t;
    int64_t zxid;
    int64_t now_ms;
    struct tree_prep_cfg cfg;
    struct tree_auth auth;
    struct evrec ev[MAX_EVENTS];
    size_t nev;
};

static struct zk_acl world_all = { ZK_PERM_ALL, { { "world", 5 }, { "anyone", 6 } } };
static const struct zk_aclvec open_acl = { 1, &world_all };

static struct zk_str S(const char *s)
{
    return (struct zk_str){ s, (int32_t)strlen(s) };
}

static void record_event(void *arg, const struct tree_event *e)
{
    struct fx *f = arg;
    assert_true(f->nev < MAX_EVENTS);
    struct evrec *r = &f->ev[f->nev++];
    r->type = e->type;
    snprintf(r->path, sizeof r->path, "%s", e->path);
    r->path_len = strlen(e->path);
    r->zxid = e->zxid;
    /* the ACL is valid during the callback only: copy what the tests check */
    r->acl_count = e->acl != NULL ? e->acl->count : -1;
    r->acl_perms = e->acl != NULL && e->acl->count > 0 ? e->acl->items[0].perms : 0;
    snprintf(r->acl_id, sizeof r->acl_id, "%s",
             e->acl != NULL && e->acl->count > 0 ? e->acl->items[0].id : "");
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->t = tree_new();
    assert_non_null(f->t);
    f->now_ms = T0_MS;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    tree_free(f->t);
    free(f);
    return 0;
}

/* ---- driving prep and apply ---------------------------------------------------- */

/* Preps one request as the sequencer would: next zxid, the fixture's clock. */
static int prep(struct fx *f, int64_t session, const struct tree_req *r, struct txn *x)
{
    *x = (struct txn){ .zxid = ++f->zxid, .session_id = session, .cxid = 7,
                       .time_ms = f->now_ms };
    int err = tree_prep(f->t, &f->cfg, r, &f->auth, x);
    if (err != ZK_OK && x->nops == 0) {
        assert_null(x->ops);
        f->zxid--; /* nothing to log: the zxid is not used */
    }
    return err;
}

static void apply(struct fx *f, struct txn *x, struct tree_op_result *res)
{
    assert_int_equal(tree_apply(f->t, x, record_event, f, res), ZK_OK);
    assert_int_equal(tree_last_zxid(f->t), x->zxid);
}

/* One request as a batch of its own: prep, apply (failed multis too, as
 * their ErrorTxn is logged and applied), reset. res gets the results. */
static int run(struct fx *f, int64_t session, const struct tree_req *r, struct tree_op_result *res,
               uint32_t res_cap)
{
    struct txn x;
    int err = prep(f, session, r, &x);
    if (x.nops > 0 || err == ZK_OK) {
        assert_true(x.nops <= res_cap || res == NULL);
        apply(f, &x, res);
    }
    txn_free(&x);
    tree_prep_reset(f->t);
    return err;
}

static int run1(struct fx *f, int64_t session, const struct tree_req *r)
{
    struct tree_op_result res[1] = { { 0 } };
    int err = run(f, session, r, res, 1);
    tree_results_free(res, 1);
    return err;
}

static struct tree_req req_create(const char *path, const char *data, int32_t flags)
{
    struct tree_req r = { .type = ZK_OP_CREATE2 };
    r.u.create.path = S(path);
    r.u.create.data = data != NULL ? S(data) : ZK_STR_NULL;
    r.u.create.acl = open_acl;
    r.u.create.flags = flags;
    r.u.create.ttl = -1;
    return r;
}

static struct tree_req req_delete(const char *path, int32_t version)
{
    struct tree_req r = { .type = ZK_OP_DELETE };
    r.u.del.path = S(path);
    r.u.del.version = version;
    return r;
}

static struct tree_req req_check(const char *path, int32_t version)
{
    struct tree_req r = req_delete(path, version);
    r.type = ZK_OP_CHECK;
    return r;
}

static struct tree_req req_setdata(const char *path, const char *data, int32_t version)
{
    struct tree_req r = { .type = ZK_OP_SETDATA };
    r.u.setdata.path = S(path);
    r.u.setdata.data = data != NULL ? S(data) : ZK_STR_NULL;
    r.u.setdata.version = version;
    return r;
}

static struct tree_req req_setacl(const char *path, struct zk_aclvec acl, int32_t version)
{
    struct tree_req r = { .type = ZK_OP_SETACL };
    r.u.setacl.path = S(path);
    r.u.setacl.acl = acl;
    r.u.setacl.version = version;
    return r;
}

static struct tree_req req_session(int32_t type)
{
    struct tree_req r = { .type = type };
    r.u.session.timeout_ms = 30000;
    return r;
}

static int create(struct fx *f, const char *path, const char *data)
{
    struct tree_req r = req_create(path, data, ZK_PERSISTENT);
    return run1(f, 0, &r);
}

static struct zk_stat stat_of(struct fx *f, const char *path)
{
    struct tree_view v;
    rcu_read_lock();
    int err = tree_get(f->t, path, strlen(path), &v);
    rcu_read_unlock();
    assert_int_equal(err, ZK_OK);
    return v.stat;
}

static bool exists(struct fx *f, const char *path)
{
    struct tree_view v;
    rcu_read_lock();
    int err = tree_get(f->t, path, strlen(path), &v);
    rcu_read_unlock();
    return err == ZK_OK;
}

static void assert_event(const struct fx *f, size_t i, int32_t type, const char *path,
                         int64_t zxid)
{
    assert_true(i < f->nev);
    assert_int_equal(f->ev[i].type, type);
    assert_string_equal(f->ev[i].path, path);
    assert_int_equal(f->ev[i].zxid, zxid);
}

/* ---- initial tree ------------------------------------------------------------------ */

static void test_initial_tree(void **state)
{
    struct fx *f = *state;
    struct tree_view v;
    rcu_read_lock();
    assert_int_equal(tree_get(f->t, "/", 1, &v), ZK_OK);
    /* stock 3.8: "/" shows cversion -1 (0 creates, 1 child), empty data */
    assert_int_equal(v.stat.num_children, 1);
    assert_int_equal(v.stat.cversion, -1);
    assert_int_equal(v.stat.czxid, 0);
    assert_int_equal(v.data_len, 0);
    assert_non_null(v.data);
    assert_int_equal(v.acl->count, 1);
    assert_int_equal(v.acl->items[0].perms, ZK_PERM_ALL);
    assert_int_equal(tree_get(f->t, "/zookeeper", 10, &v), ZK_OK);
    assert_int_equal(v.stat.num_children, 2);
    assert_int_equal(v.stat.cversion, -2);
    assert_int_equal(tree_get(f->t, "/zookeeper/quota", 16, &v), ZK_OK);
    assert_int_equal(v.stat.aversion, 0);
    assert_int_equal(tree_get(f->t, "/zookeeper/config", 17, &v), ZK_OK);
    assert_int_equal(v.stat.aversion, -1);
    assert_int_equal(v.acl->count, 1);
    assert_int_equal(v.acl->items[0].perms, ZK_PERM_READ);
    assert_string_equal(v.acl->items[0].scheme, "world");
    assert_string_equal(v.acl->items[0].id, "anyone");
    assert_int_equal(tree_get(f->t, "/nope", 5, &v), ZK_ENONODE);
    int64_t n = -1;
    assert_int_equal(tree_count_descendants(f->t, "/", 1, &n), ZK_OK);
    assert_int_equal(n, 3);
    assert_int_equal(tree_count_descendants(f->t, "/x", 2, &n), ZK_ENONODE);
    rcu_read_unlock();
    struct tree_stats st;
    tree_stats(f->t, &st);
    assert_int_equal(st.node_count, 4);
    assert_int_equal(st.session_count, 0);
    assert_int_equal(st.last_zxid, 0);
}

/* ---- create ----------------------------------------------------------------------- */

static void test_create_stat_and_events(void **state)
{
    struct fx *f = *state;
    f->now_ms = T0_MS + 5;
    struct tree_req r = req_create("/a", "hello", ZK_PERSISTENT);
    struct tree_op_result res[1] = { { 0 } };
    assert_int_equal(run(f, 0, &r, res, 1), ZK_OK);
    assert_int_equal(res[0].err, ZK_OK);
    assert_string_equal(res[0].path, "/a");
    assert_int_equal(res[0].stat.czxid, 1);
    assert_int_equal(res[0].stat.data_length, 5);
    tree_results_free(res, 1);
    assert_null(res[0].path);

    struct zk_stat s = stat_of(f, "/a");
    assert_int_equal(s.czxid, 1);
    assert_int_equal(s.mzxid, 1);
    assert_int_equal(s.pzxid, 1);
    assert_int_equal(s.ctime, T0_MS + 5);
    assert_int_equal(s.mtime, T0_MS + 5);
    assert_int_equal(s.version, 0);
    assert_int_equal(s.cversion, 0);
    assert_int_equal(s.aversion, 0);
    assert_int_equal(s.ephemeral_owner, 0);
    assert_int_equal(s.data_length, 5);
    assert_int_equal(s.num_children, 0);

    struct zk_stat root = stat_of(f, "/");
    assert_int_equal(root.num_children, 2);
    assert_int_equal(root.cversion, 0); /* 1 create * 2 - 2 children */
    assert_int_equal(root.pzxid, 1);

    assert_int_equal(f->nev, 2);
    assert_event(f, 0, ZK_EVENT_CREATED, "/a", 1);
    assert_event(f, 1, ZK_EVENT_CHILD_CHANGED, "/", 1);

    struct tree_view v;
    rcu_read_lock();
    assert_int_equal(tree_get(f->t, "/a", 2, &v), ZK_OK);
    assert_int_equal(v.data_len, 5);
    assert_memory_equal(v.data, "hello", 5);
    rcu_read_unlock();
}

static void test_create_null_and_empty_data(void **state)
{
    struct fx *f = *state;
    assert_int_equal(create(f, "/null", NULL), ZK_OK);
    assert_int_equal(create(f, "/empty", ""), ZK_OK);
    struct tree_view v;
    rcu_read_lock();
    assert_int_equal(tree_get(f->t, "/null", 5, &v), ZK_OK);
    assert_null(v.data);
    assert_int_equal(v.data_len, -1);
    assert_int_equal(v.stat.data_length, 0);
    assert_int_equal(tree_get(f->t, "/empty", 6, &v), ZK_OK);
    assert_non_null(v.data);
    assert_int_equal(v.data_len, 0);
    rcu_read_unlock();
}

static void test_create_errors(void **state)
{
    struct fx *f = *state;
    assert_int_equal(create(f, "/a", "x"), ZK_OK);
    assert_int_equal(create(f, "/a", "x"), ZK_ENODEEXISTS);
    assert_int_equal(create(f, "/", "x"), ZK_ENODEEXISTS);
    assert_int_equal(create(f, "/missing/child", "x"), ZK_ENONODE);
    /* ZooKeeper validates the full path only after the parent lookup and
     * the CREATE check (PrepRequestProcessor.pRequest2TxnCreate). */
    const char *bad[] = { "a", "/a/", "/.", "//", "/a\001" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(create(f, bad[i], "x"), ZK_EBADARGUMENTS);
    const char *no_parent[] = { "/a//b", "/a/./b", "/a/../b" };
    for (size_t i = 0; i < sizeof no_parent / sizeof no_parent[0]; i++)
        assert_int_equal(create(f, no_parent[i], "x"), ZK_ENONODE);
    /* embedded NUL */
    struct tree_req r = req_create("/a", "x", ZK_PERSISTENT);
    r.u.create.path = (struct zk_str){ "/a\0b", 4 };
    assert_int_equal(run1(f, 0, &r), ZK_EBADARGUMENTS);
    r.u.create.path = ZK_STR_NULL; /* ZooKeeper: NPE in validatePathForCreate */
    assert_int_equal(run1(f, 0, &r), ZK_EMARSHALLINGERROR);
    /* CreateMode.fromFlag */
    r = req_create("/b", "x", 7);
    assert_int_equal(run1(f, 0, &r), ZK_EBADARGUMENTS);
    r = req_create("/b", "x", -1);
    assert_int_equal(run1(f, 0, &r), ZK_EBADARGUMENTS);
    /* create with the container flag but not as createContainer */
    r = req_create("/b", "x", ZK_CONTAINER);
    assert_int_equal(run1(f, 0, &r), ZK_EBADARGUMENTS);
    assert_false(exists(f, "/b"));
    assert_int_equal(f->zxid, 1); /* failed preps consumed no zxid */
}

static void test_create_acl_errors(void **state)
{
    struct fx *f = *state;
    struct tree_req r = req_create("/a", "x", ZK_PERSISTENT);
    r.u.create.acl = (struct zk_aclvec){ 0, NULL };
    assert_int_equal(run1(f, 0, &r), ZK_EINVALIDACL);
    struct zk_acl bob = { ZK_PERM_ALL, { { "world", 5 }, { "bob", 3 } } };
    r.u.create.acl = (struct zk_aclvec){ 1, &bob };
    assert_int_equal(run1(f, 0, &r), ZK_EINVALIDACL);

    /* a parent that grants everything but CREATE */
    struct zk_acl no_create = { ZK_PERM_ALL & ~ZK_PERM_CREATE, { { "world", 5 }, { "anyone", 6 } } };
    r = req_create("/locked", "x", ZK_PERSISTENT);
    r.u.create.acl = (struct zk_aclvec){ 1, &no_create };
    assert_int_equal(run1(f, 0, &r), ZK_OK);
    assert_int_equal(create(f, "/locked/kid", "x"), ZK_ENOAUTH);
    f->auth.super = true;
    assert_int_equal(create(f, "/locked/kid", "x"), ZK_OK);
}

static void test_ephemeral_rules(void **state)
{
    struct fx *f = *state;
    const int64_t sid = 0x100;
    struct tree_req r = req_create("/e", "x", ZK_EPHEMERAL);
    /* SessionTracker.checkGlobalSession: no such session -> expired */
    assert_int_equal(run1(f, sid, &r), ZK_ESESSIONEXPIRED);
    struct tree_req cs = req_session(ZK_OP_CREATESESSION);
    assert_int_equal(run1(f, sid, &cs), ZK_OK);
    assert_int_equal(run1(f, sid, &r), ZK_OK);
    struct zk_stat s = stat_of(f, "/e");
    assert_int_equal(s.ephemeral_owner, sid);
    assert_int_equal(create(f, "/e/kid", "x"), ZK_ENOCHILDRENFOREPHEMERALS);
    /* NODEEXISTS is checked before the ephemeral parent, as in ZooKeeper */
    assert_int_equal(create(f, "/e", "x"), ZK_ENODEEXISTS);

    struct tree_session *sess;
    rcu_read_lock();
    sess = tree_session_find(f->t, sid);
    assert_non_null(sess);
    assert_int_equal(sess->timeout_ms, 30000);
    assert_int_equal(atomic_load(&sess->owner_worker), -1);
    assert_int_equal(atomic_load(&sess->last_seen_ms), T0_MS);
    assert_false(sess->closing);
    rcu_read_unlock();
    struct tree_stats st;
    tree_stats(f->t, &st);
    assert_int_equal(st.ephemeral_count, 1);
    assert_int_equal(st.session_count, 1);
}

/* ---- delete -------------------------------------------------------------------------- */

static void test_delete(void **state)
{
    struct fx *f = *state;
    assert_int_equal(create(f, "/p", "x"), ZK_OK);    /* zxid 1 */
    assert_int_equal(create(f, "/p/a", "x"), ZK_OK);  /* zxid 2 */
    assert_int_equal(create(f, "/p/b", "x"), ZK_OK);  /* zxid 3 */
    f->nev = 0;
    struct tree_req r = req_delete("/p/a", 0);
    assert_int_equal(run1(f, 0, &r), ZK_OK);          /* zxid 4 */
    assert_false(exists(f, "/p/a"));
    struct zk_stat s = stat_of(f, "/p");
    assert_int_equal(s.num_children, 1);
    assert_int_equal(s.pzxid, 4);
    assert_int_equal(s.cversion, 3); /* 2 creates + 1 delete, as stock ZooKeeper shows */
    assert_int_equal(s.mzxid, 1);
    assert_int_equal(f->nev, 2);
    assert_event(f, 0, ZK_EVENT_DELETED, "/p/a", 4);
    assert_event(f, 1, ZK_EVENT_CHILD_CHANGED, "/p", 4);
    struct tree_stats st;
    tree_stats(f->t, &st);
    assert_int_equal(st.node_count, 6);
}

static void test_delete_errors(void **state)
{
    struct fx *f = *state;
    assert_int_equal(create(f, "/p", "x"), ZK_OK);
    assert_int_equal(create(f, "/p/a", "x"), ZK_OK);
    struct tree_req r = req_delete("/p/nope", -1);
    assert_int_equal(run1(f, 0, &r), ZK_ENONODE);
    r = req_delete("/nope/x", -1);
    assert_int_equal(run1(f, 0, &r), ZK_ENONODE);
    r = req_delete("/p/a", 5);
    assert_int_equal(run1(f, 0, &r), ZK_EBADVERSION);
    r = req_delete("/p", -1);
    assert_int_equal(run1(f, 0, &r), ZK_ENOTEMPTY);
    const char *special[] = { "/", "/zookeeper", "/zookeeper/quota", "/zookeeper/config" };
    for (size_t i = 0; i < 4; i++) {
        r = req_delete(special[i], -1);
        assert_int_equal(run1(f, 0, &r), ZK_EBADARGUMENTS);
    }
    /* delete checks only the shape before its lookups (getParentPathAndValidate) */
    r = req_delete("/p/", -1);
    assert_int_equal(run1(f, 0, &r), ZK_ENONODE);
    r = req_delete("p", -1);
    assert_int_equal(run1(f, 0, &r), ZK_EBADARGUMENTS);
    /* DELETE permission comes from the parent */
    struct zk_acl no_delete = { ZK_PERM_ALL & ~ZK_PERM_DELETE, { { "world", 5 }, { "anyone", 6 } } };
    r = req_setacl("/p", (struct zk_aclvec){ 1, &no_delete }, -1);
    assert_int_equal(run1(f, 0, &r), ZK_OK);
    r = req_delete("/p/a", -1);
    assert_int_equal(run1(f, 0, &r), ZK_ENOAUTH);
    assert_true(exists(f, "/p/a"));
}

/* ---- setData / setACL / check ------------------------------------------------------ */

static void test_setdata(void **state)
{
    struct fx *f = *state;
    assert_int_equal(create(f, "/d", "one"), ZK_OK); /* zxid 1 */
    f->now_ms = T0_MS + 100;
    f->nev = 0;
    struct tree_req r = req_setdata("/d", "three", 0);
    struct tree_op_result res[1] = { { 0 } };
    assert_int_equal(run(f, 0, &r, res, 1), ZK_OK); /* zxid 2 */
    assert_int_equal(res[0].stat.version, 1);
    assert_int_equal(res[0].stat.mzxid, 2);
    assert_null(res[0].path);
    struct zk_stat s = stat_of(f, "/d");
    assert_int_equal(s.version, 1);
    assert_int_equal(s.mzxid, 2);
    assert_int_equal(s.czxid, 1);
    assert_int_equal(s.mtime, T0_MS + 100);
    assert_int_equal(s.ctime, T0_MS);
    assert_int_equal(s.data_length, 5);
    assert_int_equal(s.pzxid, 1);
    assert_int_equal(f->nev, 1);
    assert_event(f, 0, ZK_EVENT_DATA_CHANGED, "/d", 2);

    r = req_setdata("/d", "x", 0);
    assert_int_equal(run1(f, 0, &r), ZK_EBADVERSION);
    r = req_setdata("/d", NULL, -1);
    assert_int_equal(run1(f, 0, &r), ZK_OK);
    s = stat_of(f, "/d");
    assert_int_equal(s.version, 2);
    assert_int_equal(s.data_length, 0);
    r = req_setdata("/nope", "x", -1);
    assert_int_equal(run1(f, 0, &r), ZK_ENONODE);
    r = req_setdata("/d/", "x", -1);
    assert_int_equal(run1(f, 0, &r), ZK_EBADARGUMENTS);
    /* /zookeeper/config is world:anyone READ only */
    r = req_setdata("/zookeeper/config", "x", -1);
    assert_int_equal(run1(f, 0, &r), ZK_ENOAUTH);
    struct tree_stats st;
    tree_stats(f->t, &st);
    /* approximate data size: path bytes + data bytes, as DataTree counts */
    int64_t paths = 1 + 10 + 16 + 17 + 2;
    assert_int_equal(st.data_bytes, paths + 0);
}

static void test_setdata_version_wraps_past_minus_one(void **state)
{
    struct fx *f = *state;
    assert_int_equal(create(f, "/w", "x"), ZK_OK);
    /* put the node at version -2 with a raw txn (as a replayed log could) */
    struct txn_op op = { .type = TXN_SETDATA, .path = "/w", .data = NULL, .data_len = -1,
                         .version = -2 };
    struct txn x = { .zxid = ++f->zxid, .time_ms = f->now_ms, .type = TXN_SETDATA, .nops = 1,
                     .ops = &op };
    apply(f, &x, NULL);
    assert_int_equal(stat_of(f, "/w").version, -2);
    struct tree_req r = req_setdata("/w", "y", -2);
    assert_int_equal(run1(f, 0, &r), ZK_OK);
    /* ZOOKEEPER-4743: -1 is skipped, it means "any version" */
    assert_int_equal(stat_of(f, "/w").version, 0);
}

static void test_setacl(void **state)
{
    struct fx *f = *state;
    assert_int_equal(create(f, "/s", "x"), ZK_OK);
    f->nev = 0;
    struct zk_acl readonly = { ZK_PERM_READ | ZK_PERM_ADMIN, { { "world", 5 }, { "anyone", 6 } } };
    struct tree_req r = req_setacl("/s", (struct zk_aclvec){ 1, &readonly }, 0);
    assert_int_equal(run1(f, 0, &r), ZK_OK);
    assert_int_equal(f->nev, 0); /* setACL triggers no watch */
    struct tree_view v;
    rcu_read_lock();
    assert_int_equal(tree_get(f->t, "/s", 2, &v), ZK_OK);
    assert_int_equal(v.stat.aversion, 1);
    assert_int_equal(v.stat.version, 0);
    assert_int_equal(v.stat.mzxid, 1); /* ACL changes do not touch mzxid */
    assert_int_equal(v.acl->items[0].perms, ZK_PERM_READ | ZK_PERM_ADMIN);
    rcu_read_unlock();
    r = req_setacl("/s", open_acl, 0);
    assert_int_equal(run1(f, 0, &r), ZK_EBADVERSION);
    r = req_setacl("/s", (struct zk_aclvec){ 0, NULL }, -1);
    assert_int_equal(run1(f, 0, &r), ZK_EINVALIDACL);
    r = req_setacl("/nope", open_acl, -1);
    assert_int_equal(run1(f, 0, &r), ZK_ENONODE);
    r = req_setdata("/s", "y", -1);
    assert_int_equal(run1(f, 0, &r), ZK_ENOAUTH);
    /* without ADMIN the ACL cannot be changed back */
    struct zk_acl read = { ZK_PERM_READ, { { "world", 5 }, { "anyone", 6 } } };
    r = req_setacl("/s", (struct zk_aclvec){ 1, &read }, -1);
    assert_int_equal(run1(f, 0, &r), ZK_OK);
    r = req_setacl("/s", open_acl, -1);
    assert_int_equal(run1(f, 0, &r), ZK_ENOAUTH);
    assert_int_equal(stat_of(f, "/s").aversion, 2);
}

static void test_check(void **state)
{
    struct fx *f = *state;
    assert_int_equal(create(f, "/c", "x"), ZK_OK);
    struct tree_req r = req_check("/c", 0);
    assert_int_equal(run1(f, 0, &r), ZK_OK);
    r = req_check("/c", 3);
    assert_int_equal(run1(f, 0, &r), ZK_EBADVERSION);
    r = req_check("/none", -1);
    assert_int_equal(run1(f, 0, &r), ZK_ENONODE);
    assert_int_equal(stat_of(f, "/c").version, 0);
}

/* ---- sequential names ---------------------------------------------------------------- */

static void test_sequential_names(void **state)
{
    struct fx *f = *state;
    assert_int_equal(create(f, "/q", NULL), ZK_OK);
    struct tree_req r = req_create("/q/n-", "x", ZK_PERSISTENT_SEQUENTIAL);
    struct tree_op_result res[1] = { { 0 } };
    assert_int_equal(run(f, 0, &r, res, 1), ZK_OK);
    assert_string_equal(res[0].path, "/q/n-0000000000");
    tree_results_free(res, 1);
    assert_int_equal(run(f, 0, &r, res, 1), ZK_OK);
    assert_string_equal(res[0].path, "/q/n-0000000001");
    tree_results_free(res, 1);
    /* the suffix is the parent's count of creates: deletes do not reuse it */
    struct tree_req d = req_delete("/q/n-0000000001", -1);
    assert_int_equal(run1(f, 0, &d), ZK_OK);
    assert_int_equal(create(f, "/q/plain", NULL), ZK_OK);
    /* "/q/" is a legal sequential prefix */
    r = req_create("/q/", "x", ZK_PERSISTENT_SEQUENTIAL);
    assert_int_equal(run(f, 0, &r, res, 1), ZK_OK);
    assert_string_equal(res[0].path, "/q/0000000003");
    tree_results_free(res, 1);
    assert_true(exists(f, "/q/0000000003"));
}

/* ---- sessions -------------------------------------------------------------------------- */

struct paths {
    char *p[16];
    size_t n;
};

static void collect_path(void *arg, const char *path)
{
    struct paths *ps = arg;
    assert_true(ps->n < 16);
    ps->p[ps->n++] = strdup(path);
}

static void paths_free(struct paths *ps)
{
    for (size_t i = 0; i < ps->n; i++)
        free(ps->p[i]);
    ps->n = 0;
}

static bool paths_has(const struct paths *ps, const char *p)
{
    for (size_t i = 0; i < ps->n; i++) {
        if (strcmp(ps->p[i], p) == 0)
            return true;
    }
    return false;
}

static void test_close_session_deletes_ephemerals(void **state)
{
    struct fx *f = *state;
    const int64_t sid = 0x42;
    struct tree_req cs = req_session(ZK_OP_CREATESESSION);
    assert_int_equal(run1(f, sid, &cs), ZK_OK);
    assert_int_equal(create(f, "/app", NULL), ZK_OK);
    struct tree_req e1 = req_create("/app/e1", "x", ZK_EPHEMERAL);
    struct tree_req e2 = req_create("/e2", "x", ZK_EPHEMERAL);
    assert_int_equal(run1(f, sid, &e1), ZK_OK);
    assert_int_equal(run1(f, sid, &e2), ZK_OK);
    assert_int_equal(create(f, "/keep", NULL), ZK_OK);

    struct paths ps = { .n = 0 };
    tree_session_ephemerals(f->t, sid, NULL, collect_path, &ps);
    assert_int_equal(ps.n, 2);
    assert_true(paths_has(&ps, "/app/e1"));
    assert_true(paths_has(&ps, "/e2"));
    paths_free(&ps);
    tree_session_ephemerals(f->t, sid, "/app", collect_path, &ps);
    assert_int_equal(ps.n, 1);
    assert_string_equal(ps.p[0], "/app/e1");
    paths_free(&ps);

    f->nev = 0;
    struct tree_req close = req_session(ZK_OP_CLOSESESSION);
    struct tree_op_result res[4] = { { 0 } };
    assert_int_equal(run(f, sid, &close, res, 4), ZK_OK);
    tree_results_free(res, 4);
    int64_t z = f->zxid;
    assert_false(exists(f, "/app/e1"));
    assert_false(exists(f, "/e2"));
    assert_true(exists(f, "/keep"));
    /* sorted paths: /app/e1 then /e2, each DELETED then CHILD_CHANGED */
    assert_int_equal(f->nev, 4);
    assert_event(f, 0, ZK_EVENT_DELETED, "/app/e1", z);
    assert_event(f, 1, ZK_EVENT_CHILD_CHANGED, "/app", z);
    assert_event(f, 2, ZK_EVENT_DELETED, "/e2", z);
    assert_event(f, 3, ZK_EVENT_CHILD_CHANGED, "/", z);
    assert_int_equal(stat_of(f, "/app").pzxid, z);
    rcu_read_lock();
    assert_null(tree_session_find(f->t, sid));
    rcu_read_unlock();
    tree_session_ephemerals(f->t, sid, NULL, collect_path, &ps);
    assert_int_equal(ps.n, 0);
    struct tree_stats st;
    tree_stats(f->t, &st);
    assert_int_equal(st.ephemeral_count, 0);
    assert_int_equal(st.session_count, 0);
    assert_int_equal(run1(f, sid, &e2), ZK_ESESSIONEXPIRED);
    assert_int_equal(run1(f, sid, &close), ZK_ESESSIONEXPIRED);
}

/* A log replayed over a fuzzy snapshot can apply a closeSession to a tree
 * that already holds the session's next incarnation of one of its
 * ephemerals. The close must leave that node and its owner index entry
 * alone, or a later close of the session would leave the node behind. */
static void test_replayed_close_keeps_later_incarnation(void **state)
{
    struct fx *f = *state;
    const int64_t sid = 0x43;
    struct tree_req cs = req_session(ZK_OP_CREATESESSION);
    struct tree_req close = req_session(ZK_OP_CLOSESESSION);
    struct tree_req e = req_create("/e", "x", ZK_EPHEMERAL);
    struct tree_req reqs[] = { cs, e, close, cs, e };
    struct txn x[5];
    for (size_t i = 0; i < 5; i++) {
        assert_int_equal(prep(f, sid, &reqs[i], &x[i]), ZK_OK);
        apply(f, &x[i], NULL);
        tree_prep_reset(f->t);
    }
    int64_t czxid = stat_of(f, "/e").czxid;
    assert_int_equal(czxid, x[4].zxid);

    for (size_t i = 2; i < 5; i++) /* replay from the first close */
        assert_int_equal(tree_apply(f->t, &x[i], NULL, NULL, NULL), ZK_OK);
    assert_true(exists(f, "/e"));
    assert_int_equal(stat_of(f, "/e").czxid, czxid);
    struct paths ps = { .n = 0 };
    tree_session_ephemerals(f->t, sid, NULL, collect_path, &ps);
    assert_int_equal(ps.n, 1);
    assert_string_equal(ps.p[0], "/e");
    paths_free(&ps);
    struct tree_stats st;
    tree_stats(f->t, &st);
    assert_int_equal(st.ephemeral_count, 1);

    struct tree_op_result res[2] = { { 0 } };
    assert_int_equal(run(f, sid, &close, res, 2), ZK_OK);
    tree_results_free(res, 2);
    assert_false(exists(f, "/e"));
    tree_stats(f->t, &st);
    assert_int_equal(st.ephemeral_count, 0);
    for (size_t i = 0; i < 5; i++)
        txn_free(&x[i]);
}

/* Recovery applies whatever the log holds; a create whose path prep
 * would refuse must not get in: "//" would be listed under "/" as "" and
 * the snapshot walk would write it as "/" (found by fuzz_apply). */
static void test_apply_refuses_invalid_create_paths(void **state)
{
    struct fx *f = *state;
    struct tree_req r = req_create("/ok", "x", ZK_PERSISTENT);
    struct txn x;
    assert_int_equal(prep(f, 0, &r, &x), ZK_OK);
    tree_prep_reset(f->t);
    const char *bad[] = { "//", "a", "ab/c", "/ok/", "/x/../y", "/.", "/a\x01", "/\xff" };
    uint64_t digest = tree_digest(f->t);
    char *good = x.ops[0].path;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        x.ops[0].path = (char *)bad[i];
        assert_int_equal(tree_apply(f->t, &x, NULL, NULL, NULL), ZK_ERUNTIMEINCONSISTENCY);
        assert_int_equal(tree_digest(f->t), digest);
    }
    x.ops[0].path = good;
    assert_int_equal(tree_apply(f->t, &x, NULL, NULL, NULL), ZK_OK);
    assert_true(exists(f, "/ok"));
    txn_free(&x);
}

static void test_close_session_sees_pending_changes(void **state)
{
    struct fx *f = *state;
    const int64_t sid = 0x43;
    struct tree_req cs = req_session(ZK_OP_CREATESESSION);
    struct tree_req e1 = req_create("/e1", "x", ZK_EPHEMERAL);
    struct tree_req e2 = req_create("/e2", "x", ZK_EPHEMERAL);
    struct tree_req d1 = req_delete("/e1", -1);
    struct tree_req close = req_session(ZK_OP_CLOSESESSION);
    /* one batch: session, two ephemerals, a delete, then closeSession */
    struct txn x[6];
    assert_int_equal(prep(f, sid, &cs, &x[0]), ZK_OK);
    assert_int_equal(prep(f, sid, &e1, &x[1]), ZK_OK);
    assert_int_equal(prep(f, sid, &e2, &x[2]), ZK_OK);
    assert_int_equal(prep(f, sid, &d1, &x[3]), ZK_OK);
    assert_int_equal(prep(f, sid, &close, &x[4]), ZK_OK);
    /* only /e2 is left to delete: the pending create counts, the deleted one not */
    assert_int_equal(x[4].nops, 2);
    assert_int_equal(x[4].ops[0].type, TXN_CLOSE_SESSION);
    assert_int_equal(x[4].ops[1].type, TXN_DELETE);
    assert_string_equal(x[4].ops[1].path, "/e2");
    /* the session is closing for the rest of the batch */
    assert_int_equal(prep(f, sid, &e1, &x[5]), ZK_ESESSIONEXPIRED);
    for (int i = 0; i < 5; i++) {
        apply(f, &x[i], NULL);
        txn_free(&x[i]);
    }
    tree_prep_reset(f->t);
    assert_false(exists(f, "/e1"));
    assert_false(exists(f, "/e2"));
    assert_int_equal(stat_of(f, "/").num_children, 1);
}

static void test_dropped_close_reopens_session(void **state)
{
    struct fx *f = *state;
    const int64_t sid = 0x44;
    struct tree_req cs = req_session(ZK_OP_CREATESESSION);
    assert_int_equal(run1(f, sid, &cs), ZK_OK);
    struct tree_req close = req_session(ZK_OP_CLOSESESSION);
    struct txn x;
    assert_int_equal(prep(f, sid, &close, &x), ZK_OK);
    rcu_read_lock();
    assert_true(tree_session_find(f->t, sid)->closing);
    rcu_read_unlock();
    /* the batch is dropped (e.g. leadership lost before it was logged) */
    txn_free(&x);
    tree_prep_reset(f->t);
    rcu_read_lock();
    assert_false(tree_session_find(f->t, sid)->closing);
    rcu_read_unlock();
    struct tree_req e = req_create("/e", "x", ZK_EPHEMERAL);
    assert_int_equal(run1(f, sid, &e), ZK_OK);
}

/* ---- batches ----------------------------------------------------------------------------- */

static void test_consecutive_preps_see_each_other(void **state)
{
    struct fx *f = *state;
    struct tree_req a = req_create("/a", "x", ZK_PERSISTENT);
    struct tree_req ab = req_create("/a/b", "x", ZK_PERSISTENT);
    struct tree_req s1 = req_create("/a/s", "x", ZK_PERSISTENT_SEQUENTIAL);
    struct tree_req upd = req_setdata("/a/b", "y", 0);
    struct tree_req upd_again = req_setdata("/a/b", "z", 0);
    struct tree_req del = req_delete("/a", -1);
    struct txn x[8];
    size_t n = 0;
    assert_int_equal(prep(f, 0, &a, &x[n++]), ZK_OK);
    assert_int_equal(prep(f, 0, &ab, &x[n++]), ZK_OK); /* parent only pending */
    assert_int_equal(prep(f, 0, &s1, &x[n++]), ZK_OK);
    assert_string_equal(x[n - 1].ops[0].path, "/a/s0000000001");
    assert_int_equal(prep(f, 0, &s1, &x[n++]), ZK_OK);
    assert_string_equal(x[n - 1].ops[0].path, "/a/s0000000002");
    assert_int_equal(prep(f, 0, &upd, &x[n++]), ZK_OK);
    assert_int_equal(x[n - 1].ops[0].version, 1);
    struct txn bad;
    assert_int_equal(prep(f, 0, &a, &bad), ZK_ENODEEXISTS);
    assert_int_equal(prep(f, 0, &upd_again, &bad), ZK_EBADVERSION);
    assert_int_equal(prep(f, 0, &del, &bad), ZK_ENOTEMPTY);
    assert_false(exists(f, "/a")); /* prep changes nothing readers see */
    for (size_t i = 0; i < n; i++) {
        apply(f, &x[i], NULL);
        txn_free(&x[i]);
    }
    tree_prep_reset(f->t);
    struct zk_stat s = stat_of(f, "/a");
    assert_int_equal(s.num_children, 3);
    assert_int_equal(stat_of(f, "/a/b").version, 1);
    assert_true(exists(f, "/a/s0000000002"));
}

static void test_pending_delete_then_create(void **state)
{
    struct fx *f = *state;
    assert_int_equal(create(f, "/r", "old"), ZK_OK);
    struct tree_req del = req_delete("/r", -1);
    struct tree_req cr = req_create("/r", "new", ZK_PERSISTENT);
    struct tree_req upd = req_setdata("/r", "x", -1);
    struct txn x[3], bad;
    assert_int_equal(prep(f, 0, &del, &x[0]), ZK_OK);
    assert_int_equal(prep(f, 0, &upd, &bad), ZK_ENONODE); /* pending delete is seen */
    assert_int_equal(prep(f, 0, &cr, &x[1]), ZK_OK);
    for (int i = 0; i < 2; i++) {
        apply(f, &x[i], NULL);
        txn_free(&x[i]);
    }
    tree_prep_reset(f->t);
    struct zk_stat s = stat_of(f, "/r");
    assert_int_equal(s.czxid, 3);
    assert_int_equal(s.version, 0);
}

/* ---- multi --------------------------------------------------------------------------------- */

static void test_multi_success(void **state)
{
    struct fx *f = *state;
    assert_int_equal(create(f, "/m", "x"), ZK_OK); /* zxid 1 */
    f->nev = 0;
    struct tree_req ops[4] = { req_create("/m/a", "1", ZK_PERSISTENT), req_check("/m", 0),
                               req_setdata("/m/a", "2", 0), req_delete("/m/a", 1) };
    ops[0].type = ZK_OP_CREATE;
    struct tree_req multi = { .type = ZK_OP_MULTI, .ops = ops, .nops = 4 };
    struct tree_op_result res[4] = { { 0 } };
    assert_int_equal(run(f, 0, &multi, res, 4), ZK_OK);
    for (int i = 0; i < 4; i++)
        assert_int_equal(res[i].err, ZK_OK);
    assert_string_equal(res[0].path, "/m/a");
    assert_int_equal(res[2].stat.version, 1);
    assert_int_equal(res[2].stat.mzxid, 2);
    tree_results_free(res, 4);
    assert_false(exists(f, "/m/a"));
    struct zk_stat s = stat_of(f, "/m");
    assert_int_equal(s.num_children, 0);
    assert_int_equal(s.pzxid, 2);
    assert_int_equal(s.cversion, 2);
    /* one zxid for the whole multi, events in op order */
    assert_int_equal(f->nev, 5);
    assert_event(f, 0, ZK_EVENT_CREATED, "/m/a", 2);
    assert_event(f, 1, ZK_EVENT_CHILD_CHANGED, "/m", 2);
    assert_event(f, 2, ZK_EVENT_DATA_CHANGED, "/m/a", 2);
    assert_event(f, 3, ZK_EVENT_DELETED, "/m/a", 2);
    assert_event(f, 4, ZK_EVENT_CHILD_CHANGED, "/m", 2);
}

static void test_multi_failure_is_all_or_nothing(void **state)
{
    struct fx *f = *state;
    assert_int_equal(create(f, "/m", "x"), ZK_OK);
    uint64_t before = tree_digest(f->t);
    f->nev = 0;
    struct tree_req ops[4] = { req_create("/m/a", "1", ZK_PERSISTENT),
                               req_create("/m/s", "1", ZK_PERSISTENT_SEQUENTIAL),
                               req_setdata("/m", "2", 7), req_delete("/m/a", -1) };
    struct tree_req multi = { .type = ZK_OP_MULTI, .ops = ops, .nops = 4 };
    struct txn x;
    assert_int_equal(prep(f, 0, &multi, &x), ZK_EBADVERSION);
    assert_int_equal(x.type, TXN_MULTI);
    assert_int_equal(x.nops, 4);
    const int32_t want[4] = { ZK_OK, ZK_OK, ZK_EBADVERSION, ZK_ERUNTIMEINCONSISTENCY };
    for (int i = 0; i < 4; i++) {
        assert_int_equal(x.ops[i].type, TXN_ERROR);
        assert_int_equal(x.ops[i].err, want[i]);
        assert_null(x.ops[i].path);
    }
    /* the rolled-back creates are not pending for the rest of the batch:
     * /m/a can be created and the sequence number is not consumed */
    struct tree_req again = req_create("/m/s", "1", ZK_PERSISTENT_SEQUENTIAL);
    struct txn y;
    assert_int_equal(prep(f, 0, &again, &y), ZK_OK);
    assert_string_equal(y.ops[0].path, "/m/s0000000000");
    struct tree_op_result res[4] = { { 0 } };
    apply(f, &x, res);
    for (int i = 0; i < 4; i++)
        assert_int_equal(res[i].err, want[i]);
    tree_results_free(res, 4);
    assert_int_equal(f->nev, 0);
    assert_int_equal(tree_digest(f->t), before);
    apply(f, &y, NULL);
    txn_free(&x);
    txn_free(&y);
    tree_prep_reset(f->t);
    assert_false(exists(f, "/m/a"));
    assert_true(exists(f, "/m/s0000000000"));
}

static void test_multi_rejects_non_write_ops(void **state)
{
    struct fx *f = *state;
    struct tree_req ops[2] = { req_create("/a", "1", ZK_PERSISTENT), req_check("/", -1) };
    ops[1].type = ZK_OP_GETDATA;
    struct tree_req multi = { .type = ZK_OP_MULTI, .ops = ops, .nops = 2 };
    struct txn x;
    assert_int_equal(prep(f, 0, &multi, &x), ZK_EMARSHALLINGERROR);
    assert_int_equal(x.nops, 0);
    ops[1] = req_setacl("/", open_acl, -1); /* not an op MultiOperationRecord knows */
    assert_int_equal(prep(f, 0, &multi, &x), ZK_EMARSHALLINGERROR);
    assert_false(exists(f, "/a"));
    struct tree_req empty = { .type = ZK_OP_MULTI, .ops = NULL, .nops = 0 };
    assert_int_equal(run(f, 0, &empty, NULL, 0), ZK_OK);
}

/* ---- idempotent apply ----------------------------------------------------------------- */

static void test_reapply_has_no_effect(void **state)
{
    struct fx *f = *state;
    struct tree_req reqs[] = {
        req_create("/i", "x", ZK_PERSISTENT), req_create("/i/k", "1", ZK_PERSISTENT),
        req_setdata("/i/k", "2", -1),          req_setacl("/i", open_acl, -1),
        req_create("/i/s", "x", ZK_PERSISTENT_SEQUENTIAL),
        req_delete("/i/k", -1),
    };
    for (size_t i = 0; i < sizeof reqs / sizeof reqs[0]; i++) {
        struct txn x;
        assert_int_equal(prep(f, 0, &reqs[i], &x), ZK_OK);
        apply(f, &x, NULL);
        uint64_t d = tree_digest(f->t);
        size_t nev = f->nev;
        apply(f, &x, NULL); /* the same txn again */
        assert_int_equal(tree_digest(f->t), d);
        assert_int_equal(f->nev, nev);
        txn_free(&x);
        tree_prep_reset(f->t);
    }
    assert_int_equal(stat_of(f, "/i").num_children, 1);
}

/* Replay from an older snapshot: a tree that already holds txns k..n gets
 * them again and ends equal to a tree that saw each once. */
static void test_replay_suffix_matches(void **state)
{
    struct fx *f = *state;
    struct tree *other = tree_new();
    assert_non_null(other);
    struct tree_req ops[3] = { req_create("/r/x", "1", ZK_PERSISTENT),
                               req_setdata("/r/x", "2", 0), req_setdata("/r/x", "3", 1) };
    struct tree_req multi = { .type = ZK_OP_MULTI, .ops = ops, .nops = 3 };
    struct tree_req reqs[] = { req_create("/r", "x", ZK_PERSISTENT), multi,
                               req_create("/r/e", "1", ZK_PERSISTENT_SEQUENTIAL),
                               req_delete("/r/x", -1), req_create("/r/x", "again", ZK_PERSISTENT) };
    const size_t n = sizeof reqs / sizeof reqs[0];
    struct txn x[5];
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(prep(f, 0, &reqs[i], &x[i]), ZK_OK);
        apply(f, &x[i], NULL);
        assert_int_equal(tree_apply(other, &x[i], NULL, NULL, NULL), ZK_OK);
    }
    for (size_t i = 1; i < n; i++) /* replay from txn 2 */
        assert_int_equal(tree_apply(other, &x[i], NULL, NULL, NULL), ZK_OK);
    assert_int_equal(tree_digest(other), tree_digest(f->t));
    struct tree_view v;
    rcu_read_lock();
    assert_int_equal(tree_get(other, "/r/x", 4, &v), ZK_OK);
    assert_int_equal(v.data_len, 5);
    assert_int_equal(v.stat.czxid, 5);
    rcu_read_unlock();
    for (size_t i = 0; i < n; i++)
        txn_free(&x[i]);
    tree_prep_reset(f->t);
    tree_free(other);
}

/* ---- containers and TTL ---------------------------------------------------------------- */

static void collect_into(void *arg, const char *path)
{
    collect_path(arg, path);
}

static void test_container_reaping(void **state)
{
    struct fx *f = *state;
    struct tree_req c = req_create("/c", NULL, ZK_CONTAINER);
    c.type = ZK_OP_CREATECONTAINER;
    assert_int_equal(run1(f, 0, &c), ZK_OK);
    struct zk_stat s = stat_of(f, "/c");
    assert_int_equal(s.ephemeral_owner, 0); /* clients see 0 for containers */
    struct paths ps = { .n = 0 };
    tree_reapable(f->t, T0_MS + 1000000, collect_into, &ps);
    assert_int_equal(ps.n, 0); /* never had a child */
    assert_int_equal(create(f, "/c/kid", NULL), ZK_OK);
    tree_reapable(f->t, T0_MS, collect_into, &ps);
    assert_int_equal(ps.n, 0); /* has a child */
    struct tree_req del = { .type = ZK_OP_DELETECONTAINER };
    del.u.path.path = S("/c");
    assert_int_equal(run1(f, 0, &del), ZK_ENOTEMPTY);
    struct tree_req dk = req_delete("/c/kid", -1);
    assert_int_equal(run1(f, 0, &dk), ZK_OK);
    tree_reapable(f->t, T0_MS, collect_into, &ps);
    assert_int_equal(ps.n, 1);
    assert_string_equal(ps.p[0], "/c");
    paths_free(&ps);
    assert_int_equal(run1(f, 0, &del), ZK_OK);
    assert_false(exists(f, "/c"));
    tree_reapable(f->t, T0_MS, collect_into, &ps);
    assert_int_equal(ps.n, 0);
    assert_int_equal(run1(f, 0, &del), ZK_ENONODE);
    /* createContainer with another mode is refused */
    c.u.create.flags = ZK_PERSISTENT;
    assert_int_equal(run1(f, 0, &c), ZK_EBADARGUMENTS);
}

static void test_delete_container_refuses_ephemerals(void **state)
{
    struct fx *f = *state;
    const int64_t sid = 0x77;
    struct tree_req cs = req_session(ZK_OP_CREATESESSION);
    assert_int_equal(run1(f, sid, &cs), ZK_OK);
    struct tree_req e = req_create("/e", NULL, ZK_EPHEMERAL);
    assert_int_equal(run1(f, sid, &e), ZK_OK);
    struct tree_req del = { .type = ZK_OP_DELETECONTAINER };
    del.u.path.path = S("/e");
    assert_int_equal(run1(f, 0, &del), ZK_EBADVERSION);
    /* deleteContainer skips ACLs, so it may reach only containers and TTL
     * nodes: a plain persistent node is refused as newer ZooKeeper does */
    assert_int_equal(create(f, "/plain", NULL), ZK_OK);
    del.u.path.path = S("/plain");
    assert_int_equal(run1(f, 0, &del), ZK_EBADVERSION);
    assert_true(exists(f, "/plain"));
    del.u.path.path = S("/zookeeper");
    assert_int_equal(run1(f, 0, &del), ZK_EBADARGUMENTS);
}

static struct tree_req req_ttl(const char *path, int32_t flags, int64_t ttl)
{
    struct tree_req r = req_create(path, "t", flags);
    r.type = ZK_OP_CREATETTL;
    r.u.create.ttl = ttl;
    return r;
}

static void test_ttl(void **state)
{
    struct fx *f = *state;
    struct tree_req r = req_ttl("/t", ZK_PERSISTENT_WITH_TTL, 1000);
    assert_int_equal(run1(f, 0, &r), ZK_EUNIMPLEMENTED); /* extendedTypesEnabled off */
    f->cfg.ttl_enabled = true;
    r = req_ttl("/t", ZK_PERSISTENT_WITH_TTL, 0);
    assert_int_equal(run1(f, 0, &r), ZK_EBADARGUMENTS);
    r = req_ttl("/t", ZK_PERSISTENT_WITH_TTL, TREE_TTL_MAX + 1);
    assert_int_equal(run1(f, 0, &r), ZK_EBADARGUMENTS);
    r = req_ttl("/t", ZK_PERSISTENT, 1000); /* not a TTL mode */
    assert_int_equal(run1(f, 0, &r), ZK_EBADARGUMENTS);
    struct tree_req plain = req_create("/t", "t", ZK_PERSISTENT_WITH_TTL);
    assert_int_equal(run1(f, 0, &plain), ZK_EBADARGUMENTS); /* TTL mode needs createTTL */

    f->now_ms = T0_MS;
    r = req_ttl("/t", ZK_PERSISTENT_WITH_TTL, 1000);
    assert_int_equal(run1(f, 0, &r), ZK_OK);
    r = req_ttl("/s-", ZK_PERSISTENT_SEQUENTIAL_WITH_TTL, TREE_TTL_MAX);
    assert_int_equal(run1(f, 0, &r), ZK_OK);
    assert_true(exists(f, "/s-0000000001")); /* root: one create (/t) so far */
    assert_int_equal(stat_of(f, "/t").ephemeral_owner, 0);

    struct paths ps = { .n = 0 };
    tree_reapable(f->t, T0_MS + 999, collect_into, &ps);
    assert_int_equal(ps.n, 0);
    tree_reapable(f->t, T0_MS + 1000, collect_into, &ps);
    assert_int_equal(ps.n, 1);
    assert_string_equal(ps.p[0], "/t");
    paths_free(&ps);
    /* children keep it; setData moves mtime and so the deadline */
    assert_int_equal(create(f, "/t/kid", NULL), ZK_OK);
    tree_reapable(f->t, T0_MS + 5000, collect_into, &ps);
    assert_int_equal(ps.n, 0);
    struct tree_req dk = req_delete("/t/kid", -1);
    assert_int_equal(run1(f, 0, &dk), ZK_OK);
    f->now_ms = T0_MS + 4000;
    struct tree_req touch = req_setdata("/t", "u", -1);
    assert_int_equal(run1(f, 0, &touch), ZK_OK);
    tree_reapable(f->t, T0_MS + 4999, collect_into, &ps);
    assert_int_equal(ps.n, 0);
    tree_reapable(f->t, T0_MS + 5000, collect_into, &ps);
    assert_int_equal(ps.n, 1);
    paths_free(&ps);
    struct tree_req del = { .type = ZK_OP_DELETECONTAINER };
    del.u.path.path = S("/t");
    assert_int_equal(run1(f, 0, &del), ZK_OK);
    tree_reapable(f->t, T0_MS + 5000, collect_into, &ps);
    assert_int_equal(ps.n, 0);
}

/* ---- digest --------------------------------------------------------------------------------- */

static void build(struct fx *f, struct tree *t2, const struct tree_req *reqs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        struct txn x;
        assert_int_equal(prep(f, 0, &reqs[i], &x), ZK_OK);
        apply(f, &x, NULL);
        assert_int_equal(tree_apply(t2, &x, NULL, NULL, NULL), ZK_OK);
        txn_free(&x);
        tree_prep_reset(f->t);
    }
}

static void test_digest(void **state)
{
    struct fx *f = *state;
    struct tree *t2 = tree_new();
    assert_non_null(t2);
    assert_int_equal(tree_digest(t2), tree_digest(f->t));
    struct tree_req reqs[] = { req_create("/a", "1", ZK_PERSISTENT),
                               req_create("/b", NULL, ZK_PERSISTENT),
                               req_create("/a/c", "", ZK_PERSISTENT_SEQUENTIAL),
                               req_setdata("/b", "z", -1) };
    build(f, t2, reqs, 4);
    uint64_t d = tree_digest(f->t);
    assert_int_equal(tree_digest(t2), d);
    assert_int_not_equal(d, 0);

    /* a data change and an ACL change both move it */
    struct tree_req more[] = { req_setdata("/a", "2", -1) };
    build(f, t2, more, 1);
    assert_int_not_equal(tree_digest(f->t), d);
    assert_int_equal(tree_digest(t2), tree_digest(f->t));
    d = tree_digest(f->t);
    struct zk_acl read = { ZK_PERM_READ, { { "world", 5 }, { "anyone", 6 } } };
    struct tree_req acl[] = { req_setacl("/b", (struct zk_aclvec){ 1, &read }, -1) };
    build(f, t2, acl, 1);
    assert_int_not_equal(tree_digest(f->t), d);
    assert_int_equal(tree_digest(t2), tree_digest(f->t));

    /* only one tree changes: they differ */
    d = tree_digest(f->t);
    assert_int_equal(create(f, "/only-here", NULL), ZK_OK);
    assert_int_not_equal(tree_digest(f->t), tree_digest(t2));
    tree_free(t2);
}

/* ---- read side helpers ----------------------------------------------------------------- */

struct names {
    char s[8][32];
    size_t n;
};

static void collect_name(void *arg, const char *name, size_t len)
{
    struct names *ns = arg;
    assert_true(ns->n < 8 && len < 32);
    memcpy(ns->s[ns->n], name, len);
    ns->s[ns->n][len] = '\0';
    ns->n++;
}

static void test_children_and_descendants(void **state)
{
    struct fx *f = *state;
    assert_int_equal(create(f, "/p", NULL), ZK_OK);
    assert_int_equal(create(f, "/p/a", NULL), ZK_OK);
    assert_int_equal(create(f, "/p/b", NULL), ZK_OK);
    assert_int_equal(create(f, "/p/a/x", NULL), ZK_OK);
    struct names ns = { .n = 0 };
    struct tree_view v;
    rcu_read_lock();
    assert_int_equal(tree_get_children(f->t, "/p", 2, &v, collect_name, &ns), ZK_OK);
    assert_int_equal(v.stat.num_children, 2);
    assert_int_equal(ns.n, 2);
    bool a = strcmp(ns.s[0], "a") == 0 || strcmp(ns.s[1], "a") == 0;
    bool b = strcmp(ns.s[0], "b") == 0 || strcmp(ns.s[1], "b") == 0;
    assert_true(a && b);
    assert_int_equal(tree_get_children(f->t, "/q", 2, &v, collect_name, &ns), ZK_ENONODE);
    int64_t n;
    assert_int_equal(tree_count_descendants(f->t, "/p", 2, &n), ZK_OK);
    assert_int_equal(n, 3);
    assert_int_equal(tree_count_descendants(f->t, "/", 1, &n), ZK_OK);
    assert_int_equal(n, 7);
    assert_int_equal(tree_count_descendants(f->t, "/p/b", 4, &n), ZK_OK);
    assert_int_equal(n, 0);
    rcu_read_unlock();
}

struct sess_seen {
    int64_t ids[4];
    size_t n;
};

static void collect_session(void *arg, struct tree_session *s)
{
    struct sess_seen *ss = arg;
    assert_true(ss->n < 4);
    ss->ids[ss->n++] = s->id;
}

static void test_session_each(void **state)
{
    struct fx *f = *state;
    struct tree_req cs = req_session(ZK_OP_CREATESESSION);
    assert_int_equal(run1(f, 11, &cs), ZK_OK);
    assert_int_equal(run1(f, 12, &cs), ZK_OK);
    struct sess_seen ss = { .n = 0 };
    tree_session_each(f->t, collect_session, &ss);
    assert_int_equal(ss.n, 2);
    assert_true((ss.ids[0] == 11 && ss.ids[1] == 12) || (ss.ids[0] == 12 && ss.ids[1] == 11));
    struct tree_stats st;
    tree_stats(f->t, &st);
    assert_int_equal(st.session_count, 2);
    assert_int_equal(st.last_zxid, 2);
}

static struct tree_req req_create_acl(const char *path, const struct zk_aclvec *acl)
{
    struct tree_req r = req_create(path, "x", ZK_PERSISTENT);
    r.u.create.acl = *acl;
    return r;
}

/* ---- watch events carry the ACL READ is checked against (DataTree.triggerWatch) -- */

static void assert_event_acl(const struct fx *f, size_t i, int32_t perms, const char *id)
{
    assert_true(i < f->nev);
    assert_int_equal(f->ev[i].acl_count, 1);
    assert_int_equal(f->ev[i].acl_perms, perms);
    assert_string_equal(f->ev[i].acl_id, id);
}

/* NodeCreated / NodeDeleted / NodeDataChanged carry the node's own ACL (for
 * a delete: the deleted node's), NodeChildrenChanged the parent's. */
static void test_events_carry_acl(void **state)
{
    struct fx *f = *state;
    struct zk_acl parent_item = { ZK_PERM_ALL, { S("digest"), S("p:x") } };
    struct zk_acl child_item = { ZK_PERM_READ | ZK_PERM_DELETE, { S("digest"), S("c:y") } };
    const struct zk_aclvec parent_acl = { 1, &parent_item }, child_acl = { 1, &child_item };
    f->auth.super = true;
    struct tree_req r = req_create_acl("/p", &parent_acl);
    assert_int_equal(run1(f, 0, &r), ZK_OK);
    assert_event_acl(f, 0, ZK_PERM_ALL, "p:x");
    assert_event_acl(f, 1, ZK_PERM_ALL, "anyone"); /* "/" */

    f->nev = 0;
    r = req_create_acl("/p/c", &child_acl);
    assert_int_equal(run1(f, 0, &r), ZK_OK);
    assert_event(f, 0, ZK_EVENT_CREATED, "/p/c", f->zxid);
    assert_event_acl(f, 0, ZK_PERM_READ | ZK_PERM_DELETE, "c:y");
    assert_event(f, 1, ZK_EVENT_CHILD_CHANGED, "/p", f->zxid);
    assert_event_acl(f, 1, ZK_PERM_ALL, "p:x");

    f->nev = 0;
    struct tree_req sd = req_setdata("/p/c", "new", -1);
    assert_int_equal(run1(f, 0, &sd), ZK_OK);
    assert_event(f, 0, ZK_EVENT_DATA_CHANGED, "/p/c", f->zxid);
    assert_event_acl(f, 0, ZK_PERM_READ | ZK_PERM_DELETE, "c:y");

    f->nev = 0;
    struct tree_req del = req_delete("/p/c", -1);
    assert_int_equal(run1(f, 0, &del), ZK_OK);
    assert_event(f, 0, ZK_EVENT_DELETED, "/p/c", f->zxid);
    assert_event_acl(f, 0, ZK_PERM_READ | ZK_PERM_DELETE, "c:y");
    assert_event(f, 1, ZK_EVENT_CHILD_CHANGED, "/p", f->zxid);
    assert_event_acl(f, 1, ZK_PERM_ALL, "p:x");

    /* a multi: each event carries the ACL of the version it is about, at
     * the time of the event (the created node's, the parent's, then the
     * same node's again for its setData and its delete) */
    f->nev = 0;
    struct tree_req ops[4] = { req_create_acl("/p/m", &child_acl), req_setdata("/p/m", "d", -1),
                               req_check("/p/m", 1), req_delete("/p/m", -1) };
    ops[0].type = ZK_OP_CREATE;
    struct tree_req multi = { .type = ZK_OP_MULTI, .ops = ops, .nops = 4 };
    struct tree_op_result res[4] = { { 0 } };
    assert_int_equal(run(f, 0, &multi, res, 4), ZK_OK);
    tree_results_free(res, 4);
    assert_int_equal(f->nev, 5);
    assert_event(f, 0, ZK_EVENT_CREATED, "/p/m", f->zxid);
    assert_event_acl(f, 0, ZK_PERM_READ | ZK_PERM_DELETE, "c:y");
    assert_event(f, 1, ZK_EVENT_CHILD_CHANGED, "/p", f->zxid);
    assert_event_acl(f, 1, ZK_PERM_ALL, "p:x");
    assert_event(f, 2, ZK_EVENT_DATA_CHANGED, "/p/m", f->zxid);
    assert_event_acl(f, 2, ZK_PERM_READ | ZK_PERM_DELETE, "c:y");
    assert_event(f, 3, ZK_EVENT_DELETED, "/p/m", f->zxid);
    assert_event_acl(f, 3, ZK_PERM_READ | ZK_PERM_DELETE, "c:y");
    assert_event(f, 4, ZK_EVENT_CHILD_CHANGED, "/p", f->zxid);
    assert_event_acl(f, 4, ZK_PERM_ALL, "p:x");

    /* after setACL the next event reports the new ACL */
    struct zk_acl open_read = { ZK_PERM_READ, { S("world"), S("anyone") } };
    const struct zk_aclvec read_acl = { 1, &open_read };
    struct tree_req sa = req_setacl("/p", read_acl, -1);
    f->nev = 0;
    assert_int_equal(run1(f, 0, &sa), ZK_OK);
    assert_int_equal(f->nev, 0); /* setACL triggers no watch */
    sd = req_setdata("/p", "x", -1);
    assert_int_equal(run1(f, 0, &sd), ZK_OK);
    assert_event_acl(f, 0, ZK_PERM_READ, "anyone");
}

/* ---- null strings (ZooKeeper 3.8 measured: see the null-vs-empty table) ---- */

/* ZooKeeper answers MARSHALLINGERROR where its prep dereferences a null
 * path (create, delete, every op of a multi) and BADARGUMENTS where it
 * validates first (setData, setACL, check alone). */
static void test_null_paths(void **state)
{
    struct fx *f = *state;
    assert_int_equal(create(f, "/p", "x"), ZK_OK);
    struct tree_req r = req_create("/x", "x", ZK_PERSISTENT);
    r.u.create.path = ZK_STR_NULL;
    assert_int_equal(run1(f, 0, &r), ZK_EMARSHALLINGERROR);
    r.type = ZK_OP_CREATETTL;
    r.u.create.flags = ZK_PERSISTENT_WITH_TTL;
    r.u.create.ttl = 1000;
    f->cfg.ttl_enabled = true;
    assert_int_equal(run1(f, 0, &r), ZK_EMARSHALLINGERROR);
    r = req_create("", "x", ZK_PERSISTENT);
    assert_int_equal(run1(f, 0, &r), ZK_EBADARGUMENTS);
    struct tree_req d = req_delete("/p", -1);
    d.u.del.path = ZK_STR_NULL;
    assert_int_equal(run1(f, 0, &d), ZK_EMARSHALLINGERROR);
    d.u.del.path = S("");
    assert_int_equal(run1(f, 0, &d), ZK_EBADARGUMENTS);
    struct tree_req s = req_setdata("/p", "y", -1);
    s.u.setdata.path = ZK_STR_NULL;
    assert_int_equal(run1(f, 0, &s), ZK_EBADARGUMENTS);
    struct tree_req c = req_check("/p", -1);
    c.u.del.path = ZK_STR_NULL;
    assert_int_equal(run1(f, 0, &c), ZK_EBADARGUMENTS);
    struct tree_req a = req_setacl("/p", open_acl, -1);
    a.u.setacl.path = ZK_STR_NULL;
    assert_int_equal(run1(f, 0, &a), ZK_EBADARGUMENTS);
    assert_true(exists(f, "/p"));
}

/* In a multi a null path anywhere fails the whole request before any op is
 * prepared (ZooKeeper's getPendingChanges walks every op's path first):
 * no per-op results, nothing to apply. */
static void test_multi_null_path_fails_whole_request(void **state)
{
    struct fx *f = *state;
    assert_int_equal(create(f, "/p", "x"), ZK_OK);
    struct tree_req ops[2] = { req_setdata("/missing", "1", -1), req_setdata("/p", "2", -1) };
    ops[1].u.setdata.path = ZK_STR_NULL;
    struct tree_req multi = { .type = ZK_OP_MULTI, .ops = ops, .nops = 2 };
    struct txn x;
    assert_int_equal(prep(f, 0, &multi, &x), ZK_EMARSHALLINGERROR);
    assert_int_equal(x.nops, 0);
    txn_free(&x);
    tree_prep_reset(f->t);
    ops[0] = req_create("/p/a", "1", ZK_PERSISTENT);
    ops[1] = req_check("/p", -1);
    ops[1].u.del.path = ZK_STR_NULL;
    assert_int_equal(prep(f, 0, &multi, &x), ZK_EMARSHALLINGERROR);
    assert_int_equal(x.nops, 0);
    txn_free(&x);
    tree_prep_reset(f->t);
    assert_false(exists(f, "/p/a"));
}

/* A null ACL id where ZooKeeper's fixupACL dereferences it (world, digest,
 * ip) fails the whole multi when that op is prepared; after an earlier op
 * failed it is never prepared, so the usual per-op results come back. */
static void test_multi_null_acl_id(void **state)
{
    struct fx *f = *state;
    struct zk_acl bad = { ZK_PERM_ALL, { S("world"), ZK_STR_NULL } };
    const struct zk_aclvec bad_acl = { 1, &bad };
    struct tree_req one = req_create_acl("/n", &bad_acl);
    assert_int_equal(run1(f, 0, &one), ZK_EMARSHALLINGERROR);
    struct tree_req ops[2] = { req_create_acl("/n", &bad_acl), req_setdata("/missing", "1", -1) };
    ops[0].type = ZK_OP_CREATE;
    struct tree_req multi = { .type = ZK_OP_MULTI, .ops = ops, .nops = 2 };
    struct txn x;
    assert_int_equal(prep(f, 0, &multi, &x), ZK_EMARSHALLINGERROR);
    assert_int_equal(x.nops, 0);
    txn_free(&x);
    tree_prep_reset(f->t);
    ops[0] = req_setdata("/missing", "1", -1);
    ops[1] = req_create_acl("/n", &bad_acl);
    ops[1].type = ZK_OP_CREATE;
    assert_int_equal(prep(f, 0, &multi, &x), ZK_ENONODE);
    assert_int_equal(x.nops, 2);
    assert_int_equal(x.ops[0].err, ZK_ENONODE);
    assert_int_equal(x.ops[1].err, ZK_ERUNTIMEINCONSISTENCY);
    txn_free(&x);
    tree_prep_reset(f->t);
}

/* kazoo's CREATOR_ALL_ACL: ("auth", null id) after addauth digest. */
static void test_create_with_auth_null_id(void **state)
{
    struct fx *f = *state;
    static const struct tree_authid ids[] = { { "digest", "u:Jq7wMyA/w2Vd5WIDAKdu4OIIFEQ=" } };
    f->auth = (struct tree_auth){ .ids = ids, .count = 1 };
    struct zk_acl creator = { ZK_PERM_ALL, { S("auth"), ZK_STR_NULL } };
    const struct zk_aclvec acl = { 1, &creator };
    struct tree_req r = req_create_acl("/mine", &acl);
    assert_int_equal(run1(f, 0, &r), ZK_OK);
    struct tree_view v;
    rcu_read_lock();
    assert_int_equal(tree_get(f->t, "/mine", 5, &v), ZK_OK);
    assert_int_equal(v.acl->count, 1);
    assert_string_equal(v.acl->items[0].scheme, "digest");
    assert_string_equal(v.acl->items[0].id, ids[0].id);
    rcu_read_unlock();
}

/* ---- the txn size bound (tree_prep_cfg.max_txn_bytes) ---------------------------- */

#define SMALL_TXN_BYTES 4096
#define LONG_ID_BYTES 1500

/* A stand-in for the txn log's size rule (txn_op_encoded_bytes): prep only
 * adds up what the rule says, whatever the rule is. */
static size_t op_bytes(const struct txn_op *op)
{
    size_t n = 16 + (op->path != NULL ? strlen(op->path) : 0);
    n += op->data_len > 0 ? (size_t)op->data_len : 0;
    for (int32_t i = 0; op->acl != NULL && i < op->acl->count; i++)
        n += 8 + strlen(op->acl->items[i].scheme) + strlen(op->acl->items[i].id);
    return n;
}

/* A small bound, and a caller with four digest identities of 1,500 bytes:
 * one "auth" ACL entry (a few bytes in the request) then expands into
 * about 6 KiB of ACL, past the bound. */
static void small_bound_long_identities(struct fx *f)
{
    static char id_bytes[4][LONG_ID_BYTES + 1];
    static struct tree_authid ids[4];
    for (int i = 0; i < 4; i++) {
        memset(id_bytes[i], 'h', LONG_ID_BYTES);
        id_bytes[i][0] = (char)('a' + i);
        id_bytes[i][1] = ':';
        id_bytes[i][LONG_ID_BYTES] = '\0';
        ids[i] = (struct tree_authid){ "digest", id_bytes[i] };
    }
    f->auth = (struct tree_auth){ .ids = ids, .count = 4 };
    f->cfg = (struct tree_prep_cfg){ .max_txn_bytes = SMALL_TXN_BYTES, .op_bytes = op_bytes };
}

static struct zk_acl creator_all = { ZK_PERM_ALL, { { "auth", 4 }, { "", 0 } } };
static const struct zk_aclvec creator_acl = { 1, &creator_all };

/* An op whose txn would pass the bound is BADARGUMENTS, refused before it
 * records anything: the same create, with a short ACL, then succeeds in the
 * same batch and sees the parent as it was (cversion not bumped). */
static void test_create_past_txn_bound(void **state)
{
    struct fx *f = *state;
    small_bound_long_identities(f);
    assert_int_equal(create(f, "/p", "x"), ZK_OK);
    struct tree_req big = req_create_acl("/p/big", &creator_acl);
    struct txn x, y;
    assert_int_equal(prep(f, 0, &big, &x), ZK_EBADARGUMENTS);
    assert_int_equal(x.nops, 0);
    struct tree_req small = req_create("/p/big", "1", ZK_PERSISTENT);
    assert_int_equal(prep(f, 0, &small, &y), ZK_OK);
    assert_int_equal(y.ops[0].parent_cversion, 1);
    assert_true(op_bytes(&y.ops[0]) <= SMALL_TXN_BYTES);
    apply(f, &y, NULL);
    txn_free(&y);
    tree_prep_reset(f->t);
    assert_int_equal(stat_of(f, "/p").num_children, 1);
    assert_int_equal(stat_of(f, "/p").cversion, 1);
    /* setACL too: refused, and the node's aversion is not pending-bumped */
    struct tree_req sa = req_setacl("/p/big", creator_acl, 0);
    assert_int_equal(prep(f, 0, &sa, &x), ZK_EBADARGUMENTS);
    sa = req_setacl("/p/big", open_acl, 0);
    assert_int_equal(prep(f, 0, &sa, &y), ZK_OK);
    txn_free(&y);
    tree_prep_reset(f->t);
    /* with no bound the same request is accepted */
    f->cfg.max_txn_bytes = 0;
    assert_int_equal(run1(f, 0, &big), ZK_ENODEEXISTS);
    big.u.create.path = S("/p/big2");
    assert_int_equal(run1(f, 0, &big), ZK_OK);
}

/* In a multi the oversized op fails the multi as any failing op does
 * (earlier ops OK, it BADARGUMENTS, later ones RUNTIMEINCONSISTENCY), the
 * multi's pending changes are rolled back, and a later request of the same
 * batch works. The bound is on the whole txn: ops each under it fail at
 * the one that takes the sum past it. */
static void test_multi_past_txn_bound(void **state)
{
    struct fx *f = *state;
    small_bound_long_identities(f);
    assert_int_equal(create(f, "/m", "x"), ZK_OK);
    uint64_t before = tree_digest(f->t);
    struct tree_req ops[3] = { req_create("/m/a", "1", ZK_PERSISTENT),
                               req_create_acl("/m/b", &creator_acl), req_setdata("/m", "2", -1) };
    ops[1].type = ZK_OP_CREATE;
    struct tree_req multi = { .type = ZK_OP_MULTI, .ops = ops, .nops = 3 };
    struct txn x, y;
    assert_int_equal(prep(f, 0, &multi, &x), ZK_EBADARGUMENTS);
    assert_int_equal(x.type, TXN_MULTI);
    assert_int_equal(x.nops, 3);
    const int32_t want[3] = { ZK_OK, ZK_EBADARGUMENTS, ZK_ERUNTIMEINCONSISTENCY };
    for (int i = 0; i < 3; i++) {
        assert_int_equal(x.ops[i].type, TXN_ERROR);
        assert_int_equal(x.ops[i].err, want[i]);
    }
    struct tree_req again = req_create("/m/a", "1", ZK_PERSISTENT);
    assert_int_equal(prep(f, 0, &again, &y), ZK_OK);
    assert_int_equal(y.ops[0].parent_cversion, 1); /* /m/a of the multi is not pending */
    struct tree_op_result res[3] = { { 0 } };
    apply(f, &x, res);
    for (int i = 0; i < 3; i++)
        assert_int_equal(res[i].err, want[i]);
    tree_results_free(res, 3);
    assert_int_equal(tree_digest(f->t), before);
    apply(f, &y, NULL);
    txn_free(&x);
    txn_free(&y);
    tree_prep_reset(f->t);
    assert_true(exists(f, "/m/a"));
    assert_false(exists(f, "/m/b"));

    static char data[1500];
    memset(data, 'd', sizeof data - 1);
    struct tree_req three[3] = { req_create("/m/1", data, ZK_PERSISTENT),
                                 req_create("/m/2", data, ZK_PERSISTENT),
                                 req_create("/m/3", data, ZK_PERSISTENT) };
    multi = (struct tree_req){ .type = ZK_OP_MULTI, .ops = three, .nops = 3 };
    assert_int_equal(prep(f, 0, &multi, &x), ZK_EBADARGUMENTS);
    assert_int_equal(x.ops[0].err, ZK_OK);
    assert_int_equal(x.ops[1].err, ZK_OK);
    assert_int_equal(x.ops[2].err, ZK_EBADARGUMENTS);
    txn_free(&x);
    tree_prep_reset(f->t);
}

/* ---- paths longer than the old 4,096-byte limit ---------------------------------- */

/* "/" + 'b' x (len / 2) as the parent, then "/" + 'c' x ... up to len bytes. */
static void long_paths(size_t len, char **parent, char **child)
{
    size_t plen = len / 2;
    *parent = malloc(plen + 1);
    *child = malloc(len + 1);
    assert_non_null(*parent);
    assert_non_null(*child);
    memset(*parent, 'b', plen);
    (*parent)[0] = '/';
    (*parent)[plen] = '\0';
    memcpy(*child, *parent, plen);
    (*child)[plen] = '/';
    memset(*child + plen + 1, 'c', len - plen - 1);
    (*child)[len] = '\0';
}

struct name_count {
    size_t count;
    size_t len;
};

static void count_name(void *arg, const char *name, size_t len)
{
    struct name_count *n = arg;
    (void)name;
    n->count++;
    n->len = len;
}

static void check_long_path(struct fx *f, size_t len)
{
    char *parent, *child;
    long_paths(len, &parent, &child);
    assert_int_equal(strlen(child), len);
    assert_int_equal(create(f, parent, "p"), ZK_OK);
    struct tree_req r = req_create(child, "c", ZK_PERSISTENT);
    struct tree_op_result res[1] = { { 0 } };
    f->nev = 0;
    assert_int_equal(run(f, 0, &r, res, 1), ZK_OK);
    assert_string_equal(res[0].path, child);
    tree_results_free(res, 1);
    assert_int_equal(f->nev, 2);
    assert_int_equal(f->ev[0].path_len, len);
    assert_int_equal(f->ev[1].path_len, strlen(parent));

    struct tree_view v;
    struct name_count n = { 0 };
    rcu_read_lock();
    assert_int_equal(tree_get(f->t, child, len, &v), ZK_OK);
    assert_int_equal(v.data_len, 1);
    assert_int_equal(tree_get_children(f->t, parent, strlen(parent), &v, count_name, &n), ZK_OK);
    rcu_read_unlock();
    assert_int_equal(n.count, 1);
    assert_int_equal(n.len, len - strlen(parent) - 1);

    /* a multi over the long path: setData, check, delete; then a sequential create */
    struct tree_req ops[3] = { req_setdata(child, "d", 0), req_check(child, 1), req_delete(child, 1) };
    struct tree_req multi = { .type = ZK_OP_MULTI, .ops = ops, .nops = 3 };
    struct tree_op_result mres[3] = { { 0 } };
    assert_int_equal(run(f, 0, &multi, mres, 3), ZK_OK);
    tree_results_free(mres, 3);
    assert_false(exists(f, child));
    r = req_create(child, "s", ZK_PERSISTENT_SEQUENTIAL);
    assert_int_equal(run(f, 0, &r, res, 1), ZK_OK);
    assert_int_equal(strlen(res[0].path), len + 10);
    struct tree_req del = req_delete(res[0].path, -1);
    assert_int_equal(run1(f, 0, &del), ZK_OK);
    tree_results_free(res, 1);
    del = req_delete(parent, -1);
    assert_int_equal(run1(f, 0, &del), ZK_OK);
    assert_false(exists(f, parent));
    free(parent);
    free(child);
}

/* tree_path_hash reads a path's last 1-7 bytes with one load that starts
 * inside the words already hashed. Its values are those the byte-at-a-time
 * tail gave (taken from tmap.c at 8087352, before the change); it reads no
 * byte outside the path, and every byte of the path counts. */
static void test_path_hash_covers_every_byte(void **state)
{
    (void)state;
    static const struct {
        const char *path;
        uint64_t hash;
    } known[] = {
        { "/", 0x64fa2819ca9611fcull },
        { "/abcdef", 0x0e326850bbb0db69ull },
        { "/abcdefg", 0xab05a53dc9e31a2cull },
        { "/abcdefgh", 0x20961acae1fe21d7ull },
        { "/zookeeper/quota", 0x5c54e897152da616ull },
        { "/larch-bench/k0000012", 0xb37fc3826da746f9ull },
        { "/larch-bench/k00000123", 0x6a8bc1356ba245b1ull },
        { "/a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/q/r/s/t", 0xba1759512c25848eull },
    };
    for (size_t i = 0; i < sizeof known / sizeof *known; i++)
        assert_true(tree_path_hash(known[i].path, strlen(known[i].path)) == known[i].hash);
    char buf[64], other[64];
    for (size_t i = 0; i < sizeof buf; i++) {
        buf[i] = (char)('a' + i % 26);
        other[i] = (char)('A' + i % 26);
    }
    for (size_t len = 0; len <= 40; len++) {
        uint64_t h = tree_path_hash(buf + 8, len);
        memcpy(other + 8, buf + 8, len); /* the same path, other bytes around it */
        assert_true(tree_path_hash(other + 8, len) == h);
        for (size_t k = 0; k < len; k++) {
            char copy[64];
            memcpy(copy, buf + 8, len);
            copy[k] ^= 0x20;
            assert_true(tree_path_hash(copy, len) != h);
        }
    }
}

static void test_long_paths(void **state)
{
    check_long_path(*state, 10000);
    check_long_path(*state, 200000);
}

/* ---- children lists ------------------------------------------------------------ */

/* The current children list of path (a new reference). */
static struct zkids *kids_of(struct fx *f, const char *path)
{
    rcu_read_lock();
    struct znode *n = tree_lookup(f->t, path, strlen(path));
    assert_non_null(n);
    struct zkids *k = zkids_ref(znode_ver(n)->kids);
    rcu_read_unlock();
    return k;
}

static bool lists_child(const struct zkids *k, const char *path)
{
    for (uint32_t i = 0; k != NULL && i < k->count; i++)
        if (strcmp(k->items[i]->path, path) == 0)
            return true;
    return false;
}

static void test_children_lists_share_a_store_and_old_lists_stay(void **state)
{
    struct fx *f = *state;
    char path[32];
    assert_int_equal(create(f, "/p", NULL), ZK_OK);
    for (int i = 0; i < 70; i++) {
        snprintf(path, sizeof path, "/p/c%03d", i);
        assert_int_equal(create(f, path, NULL), ZK_OK);
        f->nev = 0;
    }
    struct zkids *old = kids_of(f, "/p");
    assert_int_equal(old->count, 70);
    for (int i = 70; i < 100; i++) {
        snprintf(path, sizeof path, "/p/c%03d", i);
        assert_int_equal(create(f, path, NULL), ZK_OK);
        f->nev = 0;
    }
    struct zkids *cur = kids_of(f, "/p");
    assert_int_equal(cur->count, 100);
    /* the creates appended in place (the store, twice 64 at the 65th child,
     * had room): one store, and the old list unchanged */
    assert_ptr_equal(cur->store, old->store);
    assert_int_equal(old->count, 70);
    for (int i = 0; i < 70; i++) {
        snprintf(path, sizeof path, "/p/c%03d", i);
        assert_string_equal(old->items[i]->path, path);
    }
    /* an extension nobody published (an apply that failed) used the next
     * slot: the next create must not write over it, nor list it */
    bool oom;
    struct zkids *ghost = zkids_with(cur, cur->items[0], &oom);
    assert_non_null(ghost);
    assert_int_equal(create(f, "/p/after", NULL), ZK_OK);
    struct zkids *next = kids_of(f, "/p");
    assert_int_equal(next->count, 101);
    assert_ptr_not_equal(next->store, cur->store); /* copied */
    assert_true(ghost->items[100] == cur->items[0]);
    assert_true(lists_child(next, "/p/after"));
    zkids_unref(ghost);
    /* a removal copies; the lists before it keep the child */
    struct tree_req del = req_delete("/p/c010", -1);
    assert_int_equal(run1(f, 0, &del), ZK_OK);
    struct zkids *after = kids_of(f, "/p");
    assert_int_equal(after->count, 100);
    assert_false(lists_child(after, "/p/c010"));
    assert_true(lists_child(next, "/p/c010") && lists_child(old, "/p/c010"));
    assert_int_equal(stat_of(f, "/p").num_children, 100);
    zkids_unref(old);
    zkids_unref(cur);
    zkids_unref(next);
    zkids_unref(after);
}

/* ---- the path index ------------------------------------------------------------ */

static void test_grow_index_sizes_the_table_to_twice_the_nodes(void **state)
{
    struct fx *f = *state;
    unsigned long first = f->t->index_buckets;
    tree_grow_index(f->t); /* a handful of nodes: nothing to do */
    assert_int_equal(f->t->index_buckets, first);
    assert_int_equal(create(f, "/g", ""), ZK_OK);
    char path[32];
    for (int i = 0; i < 3000; i++) {
        snprintf(path, sizeof path, "/g/n%05d", i);
        assert_int_equal(create(f, path, "v"), ZK_OK);
        f->nev = 0; /* the events are not under test */
    }
    struct tree_stats ts;
    tree_stats(f->t, &ts);
    int64_t nodes = ts.node_count;
    tree_grow_index(f->t);
    unsigned long grown = f->t->index_buckets;
    assert_true(grown >= 2 * (unsigned long)nodes && grown < 4 * (unsigned long)nodes);
    assert_true((grown & (grown - 1)) == 0); /* a power of two, as the table's sizes are */
    tree_grow_index(f->t);
    assert_int_equal(f->t->index_buckets, grown);
    for (int i = 0; i < 3000; i++) { /* every node still found through the new buckets */
        snprintf(path, sizeof path, "/g/n%05d", i);
        assert_true(exists(f, path));
    }
    assert_false(exists(f, "/g/n03000"));
    /* room for nodes about to come (a snapshot's); none inside a read-side
     * section, where resizing cannot wait for a grace period */
    rcu_read_lock();
    tree_reserve_index(f->t, 100000);
    rcu_read_unlock();
    assert_int_equal(f->t->index_buckets, grown);
    tree_reserve_index(f->t, 100000);
    assert_true(f->t->index_buckets >= 200000 && f->t->index_buckets < 400000);
    assert_true(exists(f, "/g/n00000") && exists(f, "/g/n02999"));
}

int main(void)
{
    rcu_register_thread();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_initial_tree, setup, teardown),
        cmocka_unit_test_setup_teardown(test_grow_index_sizes_the_table_to_twice_the_nodes, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_children_lists_share_a_store_and_old_lists_stay,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_create_stat_and_events, setup, teardown),
        cmocka_unit_test_setup_teardown(test_create_null_and_empty_data, setup, teardown),
        cmocka_unit_test_setup_teardown(test_create_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_create_acl_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ephemeral_rules, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_setdata, setup, teardown),
        cmocka_unit_test_setup_teardown(test_setdata_version_wraps_past_minus_one, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_setacl, setup, teardown),
        cmocka_unit_test_setup_teardown(test_check, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sequential_names, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_session_deletes_ephemerals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replayed_close_keeps_later_incarnation, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_apply_refuses_invalid_create_paths, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_session_sees_pending_changes, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_dropped_close_reopens_session, setup, teardown),
        cmocka_unit_test_setup_teardown(test_consecutive_preps_see_each_other, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pending_delete_then_create, setup, teardown),
        cmocka_unit_test_setup_teardown(test_multi_success, setup, teardown),
        cmocka_unit_test_setup_teardown(test_multi_failure_is_all_or_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_multi_rejects_non_write_ops, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reapply_has_no_effect, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replay_suffix_matches, setup, teardown),
        cmocka_unit_test_setup_teardown(test_container_reaping, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete_container_refuses_ephemerals, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_ttl, setup, teardown),
        cmocka_unit_test_setup_teardown(test_digest, setup, teardown),
        cmocka_unit_test_setup_teardown(test_children_and_descendants, setup, teardown),
        cmocka_unit_test_setup_teardown(test_session_each, setup, teardown),
        cmocka_unit_test_setup_teardown(test_events_carry_acl, setup, teardown),
        cmocka_unit_test_setup_teardown(test_null_paths, setup, teardown),
        cmocka_unit_test_setup_teardown(test_multi_null_path_fails_whole_request, setup, teardown),
        cmocka_unit_test_setup_teardown(test_multi_null_acl_id, setup, teardown),
        cmocka_unit_test_setup_teardown(test_create_with_auth_null_id, setup, teardown),
        cmocka_unit_test_setup_teardown(test_create_past_txn_bound, setup, teardown),
        cmocka_unit_test_setup_teardown(test_multi_past_txn_bound, setup, teardown),
        cmocka_unit_test_setup_teardown(test_long_paths, setup, teardown),
        cmocka_unit_test(test_path_hash_covers_every_byte),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    rcu_unregister_thread();
    return failed;
}
