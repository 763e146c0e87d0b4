/*
 * test_snapshot.c — tree/snapshot.c: the snapshot format round-trips every
 * kind of node and session, rejects any corruption without touching the
 * tree, and a fuzzy snapshot taken while the sequencer applies txns
 * converges to the live tree once the log after zxid_start is replayed.
 *
 * The main thread plays the sequencer (prep + apply with test-chosen zxids
 * and times); the fuzzy test runs the snapshot writer on a second thread
 * registered with liburcu, as the housekeeping thread will.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <urcu.h>

#include "tree/tree.h"

#define T0_MS 1700000000000LL
#define SID_A 0x1000000000000001LL
#define SID_B 0x1000000000000002LL
#define FUZZY_BASE_NODES 20000
#define FUZZY_TXNS_MAX 200000
#define FUZZY_KEYS 4000
#define FUZZY_TXNS_PER_FLUSH 40 /* txns the writer waits for at each output call */
#define WAIT_MS_MAX 5000

/* ---- output sink ------------------------------------------------------------------ */

struct mem {
    uint8_t *p;
    size_t len, cap;
    int fail_at_call; /* >0: that call returns -ENOSPC */
    int calls;
};

static int mem_out(void *arg, const void *bytes, size_t len)
{
    struct mem *m = arg;
    if (++m->calls == m->fail_at_call)
        return -ENOSPC;
    if (base_grow(&m->p, &m->cap, m->len + len, 1) != 0)
        return -ENOMEM;
    memcpy(m->p + m->len, bytes, len);
    m->len += len;
    return 0;
}

/* ---- driving the sequencer -------------------------------------------------------- */

struct fx {
    struct tree *t;
    int64_t zxid;
    int64_t now_ms;
    struct tree_prep_cfg cfg;
    struct tree_auth auth;
};

static struct zk_acl world_all = { ZK_PERM_ALL, { { "world", 5 }, { "anyone", 6 } } };
static const struct zk_aclvec open_acl = { 1, &world_all };

static struct zk_str S(const char *s)
{
    return (struct zk_str){ s, (int32_t)strlen(s) };
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->t = tree_new();
    assert_non_null(f->t);
    f->now_ms = T0_MS;
    f->cfg.ttl_enabled = true;
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

/* Preps and applies one request; on success *keep (when not NULL) receives
 * the txn for a later replay, else it is freed. Returns prep's result. */
static int run_keep(struct fx *f, int64_t session, const struct tree_req *r, struct txn *keep)
{
    struct txn x = { .zxid = f->zxid + 1, .session_id = session, .cxid = 1,
                     .time_ms = f->now_ms++ };
    int err = tree_prep(f->t, &f->cfg, r, &f->auth, &x);
    if (err == ZK_OK) {
        f->zxid++;
        assert_int_equal(tree_apply(f->t, &x, NULL, NULL, NULL), ZK_OK);
    }
    tree_prep_reset(f->t);
    if (err == ZK_OK && keep != NULL)
        *keep = x;
    else
        txn_free(&x);
    return err;
}

static int run1(struct fx *f, int64_t session, const struct tree_req *r)
{
    return run_keep(f, session, r, NULL);
}

static struct tree_req req_create(const char *path, const uint8_t *data, int32_t len,
                                  int32_t flags, struct zk_aclvec acl)
{
    struct tree_req r = { .type = ZK_OP_CREATE2 };
    r.u.create.path = S(path);
    r.u.create.data = (struct zk_str){ (const char *)data, len };
    r.u.create.acl = acl;
    r.u.create.flags = flags;
    r.u.create.ttl = -1;
    return r;
}

static int create(struct fx *f, int64_t session, const char *path, const char *data, int32_t flags)
{
    struct tree_req r = req_create(path, (const uint8_t *)data,
                                   data != NULL ? (int32_t)strlen(data) : -1, flags, open_acl);
    return run1(f, session, &r);
}

/* A createSession (or closeSession) request; a created session's password
 * is 16 bytes of pw_byte, pw_byte + 1, ... */
static struct tree_req req_session_pw(int32_t type, int32_t timeout_ms, uint8_t pw_byte)
{
    struct tree_req r = { .type = type };
    r.u.session.timeout_ms = timeout_ms;
    for (int i = 0; i < TREE_PASSWD_BYTES; i++)
        r.u.session.passwd[i] = (uint8_t)(pw_byte + i);
    return r;
}

static struct tree_req req_session(int32_t type, int32_t timeout_ms)
{
    return req_session_pw(type, timeout_ms, 0x5A);
}

static struct tree_req req_setdata(const char *path, const char *data)
{
    struct tree_req r = { .type = ZK_OP_SETDATA };
    r.u.setdata.path = S(path);
    r.u.setdata.data = S(data);
    r.u.setdata.version = -1;
    return r;
}

static struct tree_req req_delete(const char *path)
{
    struct tree_req r = { .type = ZK_OP_DELETE };
    r.u.del.path = S(path);
    r.u.del.version = -1;
    return r;
}

/* Every kind of node the tree keeps: persistent, ephemeral (two sessions),
 * sequential, container, TTL; null, empty and binary data; digest and ip
 * ACLs; and stats moved by setData, setACL, deletes and child creations. */
static void build_rich_tree(struct fx *f)
{
    struct tree_req cs = req_session_pw(ZK_OP_CREATESESSION, 30000, 0xA0);
    assert_int_equal(run1(f, SID_A, &cs), ZK_OK);
    cs = req_session_pw(ZK_OP_CREATESESSION, 4000, 0xB0);
    assert_int_equal(run1(f, SID_B, &cs), ZK_OK);

    assert_int_equal(create(f, 0, "/app", "cfg", ZK_PERSISTENT), ZK_OK);
    assert_int_equal(create(f, 0, "/app/null", NULL, ZK_PERSISTENT), ZK_OK);
    assert_int_equal(create(f, 0, "/app/empty", "", ZK_PERSISTENT), ZK_OK);
    static const uint8_t bin[] = { 0, 1, 2, 0xff, 0, 'z', 0x80 };
    struct tree_req r = req_create("/app/bin", bin, sizeof bin, ZK_PERSISTENT, open_acl);
    assert_int_equal(run1(f, 0, &r), ZK_OK);

    char digest_id[64] = "bob:";
    zk_digest_of("bob:secret", 10, digest_id + 4);
    struct zk_acl custom[] = {
        { ZK_PERM_READ | ZK_PERM_WRITE, { S("digest"), S(digest_id) } },
        { ZK_PERM_READ, { S("ip"), S("10.1.0.0/16") } },
        { ZK_PERM_ALL, { S("ip"), S("192.168.1.7") } },
    };
    struct zk_aclvec acl = { 3, custom };
    r = req_create("/app/secure", (const uint8_t *)"s", 1, ZK_PERSISTENT, acl);
    assert_int_equal(run1(f, 0, &r), ZK_OK);
    r = req_create("/app/secure2", (const uint8_t *)"t", 1, ZK_PERSISTENT, acl);
    assert_int_equal(run1(f, 0, &r), ZK_OK);

    for (int i = 0; i < 3; i++)
        assert_int_equal(create(f, 0, "/app/seq-", "q", ZK_PERSISTENT_SEQUENTIAL), ZK_OK);
    assert_int_equal(create(f, SID_A, "/app/eph-a", "a", ZK_EPHEMERAL), ZK_OK);
    assert_int_equal(create(f, SID_A, "/app/eseq-", "a", ZK_EPHEMERAL_SEQUENTIAL), ZK_OK);
    assert_int_equal(create(f, SID_B, "/app/eph-b", "b", ZK_EPHEMERAL), ZK_OK);

    struct tree_req c = req_create("/locks", (const uint8_t *)"", 0, ZK_CONTAINER, open_acl);
    c.type = ZK_OP_CREATECONTAINER;
    assert_int_equal(run1(f, 0, &c), ZK_OK);
    assert_int_equal(create(f, SID_A, "/locks/l-", "", ZK_EPHEMERAL_SEQUENTIAL), ZK_OK);
    struct tree_req ttl = req_create("/ttl", (const uint8_t *)"t", 1, ZK_PERSISTENT_WITH_TTL,
                                     open_acl);
    ttl.type = ZK_OP_CREATETTL;
    ttl.u.create.ttl = 60000;
    assert_int_equal(run1(f, 0, &ttl), ZK_OK);

    struct tree_req sd = req_setdata("/app", "cfg-v2");
    assert_int_equal(run1(f, 0, &sd), ZK_OK);
    assert_int_equal(create(f, 0, "/app/gone", "x", ZK_PERSISTENT), ZK_OK);
    struct tree_req del = req_delete("/app/gone");
    assert_int_equal(run1(f, 0, &del), ZK_OK);
    struct tree_req sa = { .type = ZK_OP_SETACL };
    sa.u.setacl.path = S("/app/null");
    sa.u.setacl.acl = acl;
    sa.u.setacl.version = -1;
    assert_int_equal(run1(f, 0, &sa), ZK_OK);
}

/* ---- comparing trees -------------------------------------------------------------- */

struct names {
    char **v;
    size_t n, cap;
};

static void collect_name(void *arg, const char *name, size_t len)
{
    struct names *ns = arg;
    assert_int_equal(base_grow(&ns->v, &ns->cap, ns->n + 1, sizeof *ns->v), 0);
    ns->v[ns->n] = strndup(name, len);
    assert_non_null(ns->v[ns->n]);
    ns->n++;
}

static void assert_acl_equal(const struct tree_acl *a, const struct tree_acl *b)
{
    assert_true((a == NULL) == (b == NULL));
    if (a == NULL)
        return;
    assert_int_equal(a->count, b->count);
    for (int32_t i = 0; i < a->count; i++) {
        assert_int_equal(a->items[i].perms, b->items[i].perms);
        assert_string_equal(a->items[i].scheme, b->items[i].scheme);
        assert_string_equal(a->items[i].id, b->items[i].id);
    }
}

/* Compares path in a and b (views, data, ACLs, child names) and recurses.
 * Returns the number of nodes compared. */
static size_t assert_subtree_equal(struct tree *a, struct tree *b, const char *path)
{
    struct tree_view va, vb;
    struct names na = { 0 }, nb = { 0 };
    rcu_read_lock();
    assert_int_equal(tree_get_children(a, path, strlen(path), &va, collect_name, &na), ZK_OK);
    assert_int_equal(tree_get_children(b, path, strlen(path), &vb, collect_name, &nb), ZK_OK);
    assert_memory_equal(&va.stat, &vb.stat, sizeof va.stat);
    assert_int_equal(va.data_len, vb.data_len);
    assert_true((va.data == NULL) == (vb.data == NULL));
    if (va.data_len > 0)
        assert_memory_equal(va.data, vb.data, (size_t)va.data_len);
    assert_acl_equal(va.acl, vb.acl);
    rcu_read_unlock();
    assert_int_equal(na.n, nb.n);
    size_t count = 1;
    for (size_t i = 0; i < na.n; i++) {
        bool found = false;
        for (size_t j = 0; j < nb.n && !found; j++)
            found = strcmp(na.v[i], nb.v[j]) == 0;
        assert_true(found);
        size_t len = strlen(path) + 1 + strlen(na.v[i]) + 1;
        char *child = malloc(len);
        assert_non_null(child);
        snprintf(child, len, "%s/%s", strcmp(path, "/") == 0 ? "" : path, na.v[i]);
        count += assert_subtree_equal(a, b, child);
        free(child);
    }
    for (size_t i = 0; i < na.n; i++)
        free(na.v[i]);
    for (size_t i = 0; i < nb.n; i++)
        free(nb.v[i]);
    free(na.v);
    free(nb.v);
    return count;
}

/* Every session of the tree in arg is in s's tree with the same fields. */
static void assert_session_in(void *arg, struct tree_session *s)
{
    struct tree_session *o = tree_session_find(arg, s->id);
    assert_non_null(o);
    assert_int_equal(o->timeout_ms, s->timeout_ms);
    assert_int_equal(o->passwd_known, s->passwd_known);
    assert_memory_equal(o->passwd, s->passwd, TREE_PASSWD_BYTES);
}

static void assert_trees_equal(struct tree *a, struct tree *b)
{
    struct tree_stats sa, sb;
    tree_stats(a, &sa);
    tree_stats(b, &sb);
    assert_int_equal(sa.node_count, sb.node_count);
    assert_int_equal(sa.data_bytes, sb.data_bytes);
    assert_int_equal(sa.ephemeral_count, sb.ephemeral_count);
    assert_int_equal(sa.session_count, sb.session_count);
    assert_int_equal(assert_subtree_equal(a, b, "/"), (size_t)sa.node_count);
    assert_int_equal(tree_digest(a), tree_digest(b));
    /* the running digest, kept up change by change, is the walked one */
    assert_int_equal(tree_digest_running(a), tree_digest(a));
    assert_int_equal(tree_digest_running(b), tree_digest(b));
    tree_session_each(a, assert_session_in, b); /* sessions are not in the digest */
}

static struct tree *load_fresh(const struct mem *m, struct tree_snap_info *info)
{
    struct tree *t = tree_new();
    assert_non_null(t);
    assert_int_equal(tree_snapshot_load(t, m->p, m->len, info), 0);
    return t;
}

/* ---- tests ------------------------------------------------------------------------ */

static void test_round_trip(void **state)
{
    struct fx *f = *state;
    build_rich_tree(f);
    struct mem m = { 0 };
    struct tree_snap_info wi, li;
    assert_int_equal(tree_snapshot_write(f->t, mem_out, &m, &wi), 0);
    assert_int_equal(wi.zxid_start, f->zxid);
    assert_int_equal(wi.size_bytes, m.len);
    assert_int_equal(wi.digest, tree_digest(f->t)); /* nothing ran during the walk */
    assert_memory_equal(m.p, TREE_SNAP_MAGIC, 4);

    struct tree *t2 = load_fresh(&m, &li);
    assert_memory_equal(&wi, &li, sizeof wi);
    assert_trees_equal(f->t, t2);
    struct tree_stats st;
    tree_stats(t2, &st);
    assert_int_equal(st.last_zxid, f->zxid);
    assert_int_equal(st.session_count, 2);
    assert_int_equal(st.ephemeral_count, 4);
    assert_int_equal((uint64_t)st.node_count, li.node_count);

    /* a snapshot of the loaded tree is byte-for-byte the same */
    struct mem m2 = { 0 };
    assert_int_equal(tree_snapshot_write(t2, mem_out, &m2, NULL), 0);
    assert_int_equal(m2.len, m.len);
    assert_memory_equal(m2.p, m.p, m.len);
    tree_free(t2);
    free(m.p);
    free(m2.p);
}

static void collect_path(void *arg, const char *path)
{
    collect_name(arg, path, strlen(path));
}

static void test_sessions_survive_and_close(void **state)
{
    struct fx *f = *state;
    build_rich_tree(f);
    struct mem m = { 0 };
    assert_int_equal(tree_snapshot_write(f->t, mem_out, &m, NULL), 0);
    struct tree *t2 = load_fresh(&m, NULL);

    rcu_read_lock();
    struct tree_session *a = tree_session_find(t2, SID_A), *b = tree_session_find(t2, SID_B);
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(a->timeout_ms, 30000);
    assert_int_equal(b->timeout_ms, 4000);
    /* the passwords their createSession txns recorded */
    assert_true(a->passwd_known && b->passwd_known);
    assert_int_equal(a->passwd[0], 0xA0);
    assert_int_equal(a->passwd[15], 0xAF);
    assert_int_equal(b->passwd[0], 0xB0);
    assert_int_equal(atomic_load(&a->owner_worker), -1);
    rcu_read_unlock();
    struct names owned = { 0 };
    tree_session_ephemerals(t2, SID_A, NULL, collect_path, &owned);
    assert_int_equal(owned.n, 3);
    for (size_t i = 0; i < owned.n; i++)
        free(owned.v[i]);
    free(owned.v);

    /* closeSession of A on both trees: A's ephemerals go, B's stay */
    struct tree_req close = req_session(ZK_OP_CLOSESESSION, 0);
    struct txn x;
    assert_int_equal(run_keep(f, SID_A, &close, &x), ZK_OK);
    assert_int_equal(tree_apply(t2, &x, NULL, NULL, NULL), ZK_OK);
    txn_free(&x);
    struct tree_view v;
    rcu_read_lock();
    assert_int_equal(tree_get(t2, "/app/eph-a", 10, &v), ZK_ENONODE);
    assert_int_equal(tree_get(t2, "/app/eph-b", 10, &v), ZK_OK);
    assert_int_equal(v.stat.ephemeral_owner, SID_B);
    assert_null(tree_session_find(t2, SID_A));
    rcu_read_unlock();
    assert_trees_equal(f->t, t2);
    tree_free(t2);
    free(m.p);
}

/* The fresh tree must look exactly as tree_new made it after a failure. */
static void assert_untouched(struct tree *t, uint64_t fresh_digest)
{
    struct tree_stats st;
    tree_stats(t, &st);
    assert_int_equal(st.node_count, 4);
    assert_int_equal(st.session_count, 0);
    assert_int_equal(st.ephemeral_count, 0);
    assert_int_equal(st.last_zxid, 0);
    assert_int_equal(tree_digest(t), fresh_digest);
}

static void test_every_flip_and_truncation_rejected(void **state)
{
    struct fx *f = *state;
    build_rich_tree(f);
    struct mem m = { 0 };
    assert_int_equal(tree_snapshot_write(f->t, mem_out, &m, NULL), 0);
    struct tree *t2 = tree_new();
    assert_non_null(t2);
    uint64_t fresh = tree_digest(t2);
    /* one fresh tree for every attempt: each failure must leave it as it was */
    for (size_t i = 0; i < m.len; i++) {
        for (int bit = 0; bit < 8; bit += 3) {
            m.p[i] ^= (uint8_t)(1u << bit);
            int rc = tree_snapshot_load(t2, m.p, m.len, NULL);
            m.p[i] ^= (uint8_t)(1u << bit);
            int want = i < 4 ? TREE_SNAP_EMAGIC : i < 8 ? TREE_SNAP_EVERSION : TREE_SNAP_ECRC;
            if (rc != want)
                fail_msg("flip of bit %d at byte %zu: got %d, want %d", bit, i, rc, want);
        }
    }
    assert_untouched(t2, fresh);
    for (size_t len = 0; len < m.len; len++) {
        int rc = tree_snapshot_load(t2, m.p, len, NULL);
        int want = len < 45 ? TREE_SNAP_ETRUNC : TREE_SNAP_ECRC;
        if (rc != want)
            fail_msg("truncation to %zu bytes: got %d, want %d", len, rc, want);
    }
    assert_untouched(t2, fresh);
    /* and the intact buffer still loads into that same tree */
    assert_int_equal(tree_snapshot_load(t2, m.p, m.len, NULL), 0);
    assert_trees_equal(f->t, t2);
    tree_free(t2);
    free(m.p);
}

static void reseal(struct mem *m)
{
    base_put_le32(m->p + m->len - 4, base_crc32c(0, m->p, m->len - 4));
}

static void test_valid_crc_bad_content_rejected(void **state)
{
    struct fx *f = *state;
    /* base_crc32c itself is checked against known vectors in test_base */
    assert_int_equal(create(f, 0, "/a", "x", ZK_PERSISTENT), ZK_OK);
    struct mem m = { 0 };
    assert_int_equal(tree_snapshot_write(f->t, mem_out, &m, NULL), 0);
    struct tree *t2 = tree_new();
    assert_non_null(t2);
    uint64_t fresh = tree_digest(t2);

    /* the record of "/a": tag, u32 length 2, path; its children count
     * follows the stat (6 x i64, 3 x i32) */
    static const uint8_t a_rec[] = { 'N', 2, 0, 0, 0, '/', 'a' };
    const uint8_t *a = memmem(m.p, m.len, a_rec, sizeof a_rec);
    assert_non_null(a);
    size_t a_off = (size_t)(a - m.p), kids_at = a_off + 7 + 48 + 12, mzxid_at = a_off + 7 + 8;
    assert_int_equal(m.p[kids_at], 0);
    m.p[kids_at] = 1;
    reseal(&m);
    assert_int_equal(tree_snapshot_load(t2, m.p, m.len, NULL), TREE_SNAP_EFORMAT);
    m.p[kids_at] = 0;
    /* a changed mzxid parses but no longer hashes to the trailer's digest */
    m.p[mzxid_at] ^= 1;
    reseal(&m);
    assert_int_equal(tree_snapshot_load(t2, m.p, m.len, NULL), TREE_SNAP_EDIGEST);
    m.p[mzxid_at] ^= 1;
    reseal(&m);
    assert_untouched(t2, fresh);
    /* a tree that already holds something is refused */
    assert_int_equal(tree_snapshot_load(f->t, m.p, m.len, NULL), TREE_SNAP_ENOTFRESH);
    assert_int_equal(tree_snapshot_load(t2, m.p, m.len, NULL), 0);
    assert_int_equal(tree_snapshot_load(t2, m.p, m.len, NULL), TREE_SNAP_ENOTFRESH);
    assert_trees_equal(f->t, t2);
    tree_free(t2);
    free(m.p);
}

/* fuzz_snapshot found it: a snapshot listing one session id twice loaded
 * with one session fewer than its trailer counts. Refused now, tree
 * untouched. */
static void test_duplicate_session_id_rejected(void **state)
{
    struct fx *f = *state;
    /* two sessions, no ephemerals: nothing else ties SID_B to the tree */
    struct tree_req cs = req_session(ZK_OP_CREATESESSION, 30000);
    assert_int_equal(run1(f, SID_A, &cs), ZK_OK);
    assert_int_equal(run1(f, SID_B, &cs), ZK_OK);
    struct mem m = { 0 };
    assert_int_equal(tree_snapshot_write(f->t, mem_out, &m, NULL), 0);
    uint8_t rec_a[9] = { 'S' }, rec_b[9] = { 'S' };
    base_put_le64(rec_a + 1, (uint64_t)SID_A);
    base_put_le64(rec_b + 1, (uint64_t)SID_B);
    uint8_t *b = memmem(m.p, m.len, rec_b, sizeof rec_b);
    assert_non_null(b);
    assert_non_null(memmem(m.p, m.len, rec_a, sizeof rec_a));
    memcpy(b + 1, rec_a + 1, 8); /* SID_B's record now names SID_A */
    reseal(&m);
    struct tree *t2 = tree_new();
    assert_non_null(t2);
    uint64_t fresh = tree_digest(t2);
    assert_int_equal(tree_snapshot_load(t2, m.p, m.len, NULL), TREE_SNAP_EFORMAT);
    assert_untouched(t2, fresh);
    tree_free(t2);
    free(m.p);
}

/* A session record's flags and password: flags 0 ("not known") with zeros
 * loads a session without a password, and writes back byte for byte; an
 * unknown flag, or a password beside flags 0, is refused. */
static void test_session_record_flags(void **state)
{
    struct fx *f = *state;
    struct tree_req cs = req_session_pw(ZK_OP_CREATESESSION, 30000, 0x11);
    assert_int_equal(run1(f, SID_A, &cs), ZK_OK);
    struct mem m = { 0 };
    assert_int_equal(tree_snapshot_write(f->t, mem_out, &m, NULL), 0);
    assert_int_equal(base_get_le32(m.p + 4), TREE_SNAP_VERSION);
    uint8_t rec[9] = { 'S' };
    base_put_le64(rec + 1, (uint64_t)SID_A);
    uint8_t *r = memmem(m.p, m.len, rec, sizeof rec);
    assert_non_null(r);
    uint8_t *flags = r + 13, *pw = r + 14;
    assert_int_equal(*flags, 1);
    assert_int_equal(pw[0], 0x11);
    struct tree *t2 = tree_new();
    assert_non_null(t2);
    *flags = 3;
    reseal(&m);
    assert_int_equal(tree_snapshot_load(t2, m.p, m.len, NULL), TREE_SNAP_EFORMAT);
    *flags = 0;
    reseal(&m);
    assert_int_equal(tree_snapshot_load(t2, m.p, m.len, NULL), TREE_SNAP_EFORMAT);
    memset(pw, 0, TREE_PASSWD_BYTES);
    reseal(&m);
    assert_int_equal(tree_snapshot_load(t2, m.p, m.len, NULL), 0);
    rcu_read_lock();
    struct tree_session *s = tree_session_find(t2, SID_A);
    assert_non_null(s);
    assert_false(s->passwd_known);
    rcu_read_unlock();
    struct mem m2 = { 0 };
    assert_int_equal(tree_snapshot_write(t2, mem_out, &m2, NULL), 0);
    assert_int_equal(m2.len, m.len);
    assert_memory_equal(m2.p, m.p, m.len);
    tree_free(t2);
    free(m.p);
    free(m2.p);
}

/* Reads a whole fixture file (tests/fixtures) into m. */
static void read_fixture(const char *rel, struct mem *m)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", LARCH_FIXTURES, rel);
    FILE *fp = fopen(path, "rb");
    if (fp == NULL)
        fail_msg("%s: cannot open", path);
    uint8_t buf[4096];
    size_t n;
    *m = (struct mem){ 0 };
    while ((n = fread(buf, 1, sizeof buf, fp)) > 0)
        assert_int_equal(mem_out(m, buf, n), 0);
    assert_int_equal(ferror(fp), 0);
    fclose(fp);
}

#define V1_SID_A 0x008bcfe568000000LL /* tests/fixtures/datadir-v1/sessions.txt */

static int fill_pattern(void *arg, int64_t id, uint8_t out[TREE_PASSWD_BYTES])
{
    int *calls = arg;
    (*calls)++;
    for (int i = 0; i < TREE_PASSWD_BYTES; i++)
        out[i] = (uint8_t)(id + i);
    return 0;
}

static int fill_fails(void *arg, int64_t id, uint8_t out[TREE_PASSWD_BYTES])
{
    memset(out, 0xEE, TREE_PASSWD_BYTES); /* a half-done result must not stay */
    return -EIO;
}

static void assert_v1_session(struct tree *t, bool known)
{
    rcu_read_lock();
    struct tree_session *s = tree_session_find(t, V1_SID_A);
    assert_non_null(s);
    assert_int_equal(s->timeout_ms, 40000);
    assert_int_equal(s->passwd_known, known);
    if (known)
        assert_int_equal(s->passwd[1], (uint8_t)(V1_SID_A + 1));
    else
        assert_int_equal(s->passwd[1], 0);
    rcu_read_unlock();
}

/* A version-1 snapshot written by the code before passwords were recorded
 * (tests/fixtures/datadir-v1) still loads: its session has no known
 * password until the key's owner fills it in. A tree loaded from it writes
 * version 2, one flags byte and 16 password bytes more per session, which
 * keeps "not known" until the fill, and the filled password after it. */
static void test_version_1_snapshot_loads(void **state)
{
    struct mem v1;
    read_fixture("datadir-v1/larch/snapshot.3", &v1);
    assert_int_equal(base_get_le32(v1.p + 4), 1);
    struct tree *t = load_fresh(&v1, NULL);
    struct tree_stats st;
    tree_stats(t, &st);
    assert_int_equal(st.session_count, 1);
    assert_int_equal(st.ephemeral_count, 1);
    assert_int_equal(st.last_zxid, 3);
    assert_v1_session(t, false);

    struct mem v2 = { 0 };
    assert_int_equal(tree_snapshot_write(t, mem_out, &v2, NULL), 0);
    assert_int_equal(base_get_le32(v2.p + 4), 2);
    assert_int_equal(v2.len, v1.len + 17);
    struct tree *t2 = load_fresh(&v2, NULL);
    assert_trees_equal(t, t2);
    assert_v1_session(t2, false);

    int calls = 0;
    uint64_t filled = 9;
    assert_int_equal(tree_sessions_fill_passwd(t2, fill_fails, NULL, &filled), -EIO);
    assert_int_equal(filled, 0);
    assert_v1_session(t2, false);
    assert_int_equal(tree_sessions_fill_passwd(t2, fill_pattern, &calls, &filled), 0);
    assert_int_equal(filled, 1);
    assert_v1_session(t2, true);
    assert_int_equal(tree_sessions_fill_passwd(t2, fill_pattern, &calls, &filled), 0);
    assert_int_equal(filled, 0); /* only sessions without one */
    assert_int_equal(calls, 1);
    struct mem v2b = { 0 };
    assert_int_equal(tree_snapshot_write(t2, mem_out, &v2b, NULL), 0);
    struct tree *t3 = load_fresh(&v2b, NULL);
    assert_v1_session(t3, true);
    tree_free(t3);
    tree_free(t2);
    tree_free(t);
    free(v1.p);
    free(v2.p);
    free(v2b.p);
}

static void test_output_error_propagates(void **state)
{
    struct fx *f = *state;
    /* enough data for several output calls, so the failure lands mid-walk */
    static uint8_t big[100000];
    char path[32];
    for (int i = 0; i < 8; i++) {
        snprintf(path, sizeof path, "/big%d", i);
        struct tree_req r = req_create(path, big, sizeof big, ZK_PERSISTENT, open_acl);
        assert_int_equal(run1(f, 0, &r), ZK_OK);
    }
    for (int at = 1; at <= 5; at++) {
        struct mem m = { .fail_at_call = at };
        assert_int_equal(tree_snapshot_write(f->t, mem_out, &m, NULL), -ENOSPC);
        assert_int_equal(m.calls, at);
        free(m.p);
    }
}

/* ---- fuzzy snapshot under concurrent apply ---------------------------------------- */

struct fuzzy {
    struct tree *t;
    struct mem m;
    struct tree_snap_info info;
    int rc;
    _Atomic uint64_t applied; /* txns the sequencer applied so far */
    _Atomic bool done;
    uint64_t waits_short; /* output calls that gave up waiting */
};

/* Each output call waits until the sequencer applied more txns, so changes
 * land between the nodes the walk has already captured and those it has
 * not: the snapshot is guaranteed fuzzy, not by luck of timing. */
static int fuzzy_out(void *arg, const void *bytes, size_t len)
{
    struct fuzzy *z = arg;
    uint64_t target = atomic_load(&z->applied) + FUZZY_TXNS_PER_FLUSH;
    int64_t deadline = base_mono_ms() + WAIT_MS_MAX;
    while (atomic_load(&z->applied) < target && base_mono_ms() < deadline) {
        struct timespec ts = { 0, 100000 };
        nanosleep(&ts, NULL);
    }
    if (atomic_load(&z->applied) < target)
        z->waits_short++;
    return mem_out(&z->m, bytes, len);
}

static void *fuzzy_writer(void *arg)
{
    struct fuzzy *z = arg;
    rcu_register_thread();
    z->rc = tree_snapshot_write(z->t, fuzzy_out, z, &z->info);
    rcu_unregister_thread();
    atomic_store(&z->done, true);
    return NULL;
}

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* One random write: create/delete/setData on /f/<key>, ephemerals of a few
 * sessions, sessions opening and closing. Errors (node exists, ...) are
 * normal and produce no txn. */
static int fuzzy_txn(struct fx *f, uint64_t *rng, struct txn *x)
{
    char path[64], data[64];
    uint64_t r = rng_next(rng);
    snprintf(path, sizeof path, "/f/d%u/k%u", (unsigned)(r % 16), (unsigned)((r >> 8) % FUZZY_KEYS));
    snprintf(data, sizeof data, "v%llu", (unsigned long long)(r >> 20));
    int64_t sid = 0x2000 + (int64_t)((r >> 40) % 8);
    struct tree_req q;
    switch ((r >> 48) % 8) {
    case 0:
    case 1:
        q = req_create(path, (const uint8_t *)data, (int32_t)strlen(data), ZK_PERSISTENT, open_acl);
        return run_keep(f, 0, &q, x);
    case 2:
        q = req_create(path, (const uint8_t *)data, (int32_t)strlen(data), ZK_EPHEMERAL, open_acl);
        return run_keep(f, sid, &q, x);
    case 3:
    case 4:
        q = req_delete(path);
        return run_keep(f, 0, &q, x);
    case 5:
    case 6:
        q = req_setdata(path, data);
        return run_keep(f, 0, &q, x);
    default:
        q = req_session((r >> 60) % 2 ? ZK_OP_CREATESESSION : ZK_OP_CLOSESESSION, 10000);
        return run_keep(f, sid, &q, x);
    }
}

static void test_fuzzy_snapshot_replays_to_live_digest(void **state)
{
    struct fx *f = *state;
    uint64_t rng = 0x9E3779B97F4A7C15ULL;
    assert_int_equal(create(f, 0, "/f", "", ZK_PERSISTENT), ZK_OK);
    char dir[32];
    for (int d = 0; d < 16; d++) {
        snprintf(dir, sizeof dir, "/f/d%d", d);
        assert_int_equal(create(f, 0, dir, "", ZK_PERSISTENT), ZK_OK);
    }
    /* a base large enough that the walk makes many output calls */
    struct txn scratch;
    for (int i = 0; i < FUZZY_BASE_NODES; i++) {
        if (fuzzy_txn(f, &rng, &scratch) == ZK_OK)
            txn_free(&scratch);
    }

    struct txn *log = calloc(FUZZY_TXNS_MAX, sizeof *log);
    assert_non_null(log);
    size_t nlog = 0;
    struct fuzzy z = { .t = f->t };
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, fuzzy_writer, &z), 0);
    /* the sequencer keeps applying while the writer walks (bounded) */
    while (!atomic_load(&z.done) && nlog < FUZZY_TXNS_MAX) {
        if (fuzzy_txn(f, &rng, &log[nlog]) == ZK_OK) {
            nlog++;
            atomic_fetch_add(&z.applied, 1);
        }
    }
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(z.rc, 0);
    assert_int_equal(z.waits_short, 0);
    assert_true(z.m.calls >= 3); /* txns landed at several points of the walk */

    struct tree *t2 = load_fresh(&z.m, NULL);
    assert_int_equal(tree_last_zxid(t2), z.info.zxid_start);
    size_t replayed = 0;
    for (size_t i = 0; i < nlog; i++) {
        if (log[i].zxid <= z.info.zxid_start)
            continue;
        /* As recovery replays (durability.c, ZooKeeper's processTxn): a txn
         * may meet a node the walk saw already deleted by a later txn
         * (setData on it, a create under it) and fail; only the end state
         * counts, and it is compared below. */
        (void)tree_apply(t2, &log[i], NULL, NULL, NULL);
        replayed++;
    }
    assert_true(replayed >= (size_t)FUZZY_TXNS_PER_FLUSH * 2);
    assert_trees_equal(f->t, t2);
    assert_int_equal(tree_last_zxid(t2), tree_last_zxid(f->t));

    for (size_t i = 0; i < nlog; i++)
        txn_free(&log[i]);
    free(log);
    free(z.m.p);
    tree_free(t2);
}

/* Paths longer than the old 4,096-byte limit, and a chain deeper than a
 * 4,096-byte path could hold, survive a snapshot write and load. */
static void test_long_paths_round_trip(void **state)
{
    struct fx *f = *state;
    static const size_t lens[] = { 10000, 200000 };
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        size_t plen = lens[i] / 2;
        char *p = malloc(lens[i] + 1);
        assert_non_null(p);
        memset(p, 'a' + (char)i, lens[i]);
        p[0] = '/';
        p[plen] = '\0';
        assert_int_equal(create(f, 0, p, "parent", ZK_PERSISTENT), ZK_OK);
        p[plen] = '/';
        p[lens[i]] = '\0';
        assert_int_equal(create(f, SID_A, p, "child", ZK_PERSISTENT), ZK_OK);
        free(p);
    }
    char deep[2 * 3000 + 1];
    size_t n = 0;
    for (int level = 0; level < 3000; level++) {
        deep[n++] = '/';
        deep[n++] = 'd';
        deep[n] = '\0';
        assert_int_equal(create(f, 0, deep, NULL, ZK_PERSISTENT), ZK_OK);
    }
    struct mem m = { 0 };
    struct tree_snap_info wi, li;
    assert_int_equal(tree_snapshot_write(f->t, mem_out, &m, &wi), 0);
    struct tree *t2 = load_fresh(&m, &li);
    assert_memory_equal(&wi, &li, sizeof wi);
    assert_trees_equal(f->t, t2);
    tree_free(t2);
    free(m.p);
}

/* tree_replace: the replaced tree is the snapshot's in every respect (its
 * indexes included: a closeSession after it removes the snapshot's
 * ephemerals, the reaper sees its containers), and the source tree holds
 * the old contents, complete, to be freed after a grace period. */
static void test_replace_swaps_whole_contents(void **state)
{
    struct fx *f = *state;
    build_rich_tree(f);
    struct mem m = { 0 };
    assert_int_equal(tree_snapshot_write(f->t, mem_out, &m, NULL), 0);

    /* the tree being replaced: other nodes, another session, a pending
     * overlay (tree_replace drops it) */
    struct fx g = { .t = tree_new(), .now_ms = T0_MS, .cfg = f->cfg };
    assert_non_null(g.t);
    struct tree_req cs = req_session_pw(ZK_OP_CREATESESSION, 9000, 0xC0);
    assert_int_equal(run1(&g, 0x2000000000000003LL, &cs), ZK_OK);
    assert_int_equal(create(&g, 0x2000000000000003LL, "/old-eph", "o", ZK_EPHEMERAL), ZK_OK);
    assert_int_equal(create(&g, 0, "/old", "o", ZK_PERSISTENT), ZK_OK);
    uint64_t old_digest = tree_digest(g.t);
    uint64_t gen = tree_generation(g.t);

    struct tree *fresh = load_fresh(&m, NULL);
    tree_replace(g.t, fresh);
    assert_int_equal(tree_generation(g.t), gen + 2);
    assert_trees_equal(f->t, g.t);
    assert_int_equal(tree_last_zxid(g.t), f->zxid);
    /* the source holds the old contents, whole */
    assert_int_equal(tree_digest(fresh), old_digest);
    rcu_read_lock();
    assert_non_null(tree_session_find(fresh, 0x2000000000000003LL));
    assert_null(tree_session_find(g.t, 0x2000000000000003LL));
    rcu_read_unlock();
    synchronize_rcu();
    tree_free(fresh);

    /* the indexes came along: the same txns do the same on both trees */
    struct tree_req close = req_session(ZK_OP_CLOSESESSION, 0);
    struct txn x;
    assert_int_equal(run_keep(f, SID_A, &close, &x), ZK_OK);
    assert_int_equal(tree_apply(g.t, &x, NULL, NULL, NULL), ZK_OK);
    txn_free(&x);
    struct tree_view v;
    rcu_read_lock();
    assert_int_equal(tree_get(g.t, "/app/eph-a", 10, &v), ZK_ENONODE);
    assert_int_equal(tree_get(g.t, "/locks/l-0000000000", 19, &v), ZK_ENONODE);
    rcu_read_unlock();
    struct names reap_f = { 0 }, reap_g = { 0 };
    tree_reapable(f->t, T0_MS + 3600000, collect_path, &reap_f);
    tree_reapable(g.t, T0_MS + 3600000, collect_path, &reap_g);
    assert_int_equal(reap_g.n, reap_f.n);
    assert_true(reap_g.n >= 2); /* the emptied container, the expired TTL node */
    for (size_t i = 0; i < reap_f.n; i++) {
        assert_string_equal(reap_f.v[i], reap_g.v[i]);
        free(reap_f.v[i]);
        free(reap_g.v[i]);
    }
    free(reap_f.v);
    free(reap_g.v);
    assert_trees_equal(f->t, g.t);
    tree_free(g.t);
    free(m.p);
}

/* A snapshot walk that tree_replace crosses mixes two trees: it is refused
 * with -EAGAIN (the output callback runs between the walk's steps, so it
 * can replace the tree mid-walk). */
struct replacing_out {
    struct mem m;
    struct tree *t;
    struct tree *with; /* replaces t at the first output call; then the old contents */
};

static int replacing_out(void *arg, const void *bytes, size_t len)
{
    struct replacing_out *o = arg;
    if (o->m.calls == 0)
        tree_replace(o->t, o->with);
    return mem_out(&o->m, bytes, len);
}

static void test_walk_across_replace_refused(void **state)
{
    struct fx *f = *state;
    build_rich_tree(f);
    char data[201];
    memset(data, 'd', 200);
    data[200] = '\0';
    for (int i = 0; i < 3000; i++) { /* several output buffers: the first call is mid-walk */
        char path[32];
        snprintf(path, sizeof path, "/bulk-%d", i);
        assert_int_equal(create(f, 0, path, data, ZK_PERSISTENT), ZK_OK);
    }
    struct mem m = { 0 };
    assert_int_equal(tree_snapshot_write(f->t, mem_out, &m, NULL), 0);
    struct tree *target = tree_new();
    assert_non_null(target);
    struct replacing_out o = { .t = target, .with = load_fresh(&m, NULL) };
    assert_int_equal(tree_snapshot_write(target, replacing_out, &o, NULL), -EAGAIN);
    assert_true(o.m.calls > 1);
    /* with nothing crossing it, the same walk succeeds */
    struct mem again = { 0 };
    assert_int_equal(tree_snapshot_write(target, mem_out, &again, NULL), 0);
    synchronize_rcu();
    tree_free(o.with);
    tree_free(target);
    free(m.p);
    free(o.m.p);
    free(again.p);
}

int main(void)
{
    rcu_register_thread();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replace_swaps_whole_contents, setup, teardown),
        cmocka_unit_test_setup_teardown(test_walk_across_replace_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_long_paths_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sessions_survive_and_close, setup, teardown),
        cmocka_unit_test_setup_teardown(test_every_flip_and_truncation_rejected, setup, teardown),
        cmocka_unit_test_setup_teardown(test_valid_crc_bad_content_rejected, setup, teardown),
        cmocka_unit_test_setup_teardown(test_duplicate_session_id_rejected, setup, teardown),
        cmocka_unit_test_setup_teardown(test_session_record_flags, setup, teardown),
        cmocka_unit_test(test_version_1_snapshot_loads),
        cmocka_unit_test_setup_teardown(test_output_error_propagates, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fuzzy_snapshot_replays_to_live_digest, setup,
                                        teardown),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    rcu_unregister_thread();
    return failed;
}
