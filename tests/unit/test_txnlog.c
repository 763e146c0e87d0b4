/*
 * test_txnlog.c — txn codec, log framing, torn-tail recovery, segment
 * rolling, crash/ENOSPC/EIO simulation through the in-memory storage, purge,
 * and a smoke test of the POSIX storage on a temporary directory.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <urcu.h>

#include "replication/txnlog.h"

#define LOG_DIR "/log"

/* ---- building and comparing txns ----------------------------------------------- */

static char *xstrdup(const char *s)
{
    char *p = strdup(s);
    assert_non_null(p);
    return p;
}

static uint8_t *xbytes(const char *s, int32_t len)
{
    uint8_t *p = malloc(len > 0 ? (size_t)len : 1);
    assert_non_null(p);
    if (len > 0)
        memcpy(p, s, (size_t)len);
    return p;
}

/* A custom ACL built through the same constructor prep uses. */
static struct tree_acl *custom_acl(void)
{
    struct zk_acl items[] = {
        { ZK_PERM_READ | ZK_PERM_WRITE, { zk_str_c("digest"), zk_str_c("bob:c2VjcmV0aGFzaA==") } },
        { ZK_PERM_ALL, { zk_str_c("ip"), zk_str_c("10.0.0.0/8") } },
        { ZK_PERM_ADMIN, { zk_str_c("world"), zk_str_c("anyone") } },
    };
    struct zk_aclvec req = { 3, items };
    struct tree_auth super = { .super = true };
    struct tree_acl *acl = NULL;
    assert_int_equal(tree_acl_from_request(&req, &super, 0, &acl), ZK_OK);
    assert_int_equal(acl->count, 3);
    return acl;
}

static struct txn_op op_create(int32_t type, const char *path, const char *data, int32_t len,
                               struct tree_acl *acl, int64_t owner, int32_t pcv)
{
    return (struct txn_op){ .type = type, .client_type = ZK_OP_CREATE2, .path = xstrdup(path),
                            .data = len >= 0 ? xbytes(data, len) : NULL, .data_len = len,
                            .acl = acl, .ephemeral_owner = owner, .parent_cversion = pcv };
}

static struct txn_op op_path(int32_t type, const char *path, int32_t version, int32_t pcv)
{
    return (struct txn_op){ .type = type, .client_type = type, .path = xstrdup(path),
                            .data_len = -1, .version = version, .parent_cversion = pcv };
}

static struct txn_op op_setdata(const char *path, const char *data, int32_t len, int32_t version)
{
    struct txn_op op = op_path(TXN_SETDATA, path, version, 0);
    op.data = len >= 0 ? xbytes(data, len) : NULL;
    op.data_len = len;
    return op;
}

static struct txn_op op_error(int32_t err)
{
    return (struct txn_op){ .type = TXN_ERROR, .client_type = ZK_OP_CREATE, .data_len = -1,
                            .err = err };
}

static void txn_init(struct txn *x, int64_t zxid, int32_t type, uint32_t nops)
{
    *x = (struct txn){ .zxid = zxid, .session_id = 0x1234567890abcdefLL, .cxid = (int32_t)zxid,
                       .time_ms = 1700000000000LL + (zxid & 0xfffffff), .type = type, .nops = nops };
    x->ops = calloc(nops, sizeof *x->ops);
    assert_non_null(x->ops);
}

/* Membership number k: voters 1..3 (and 4 when k is odd), observer 9,
 * joint (leaving 1..3) when k % 3 == 1, described by server.N lines that
 * name k, so two memberships differ in their bytes. */
static void test_config(int k, struct raft_config *c)
{
    *c = (struct raft_config){ .n_members = 0 };
    for (uint32_t id = 1; id <= (k % 2 ? 4u : 3u); id++)
        c->members[c->n_members++] = (struct raft_member){ .id = id, .voter = true };
    c->members[c->n_members++] = (struct raft_member){ .id = 9, .voter = false };
    if (k % 3 == 1) {
        for (uint32_t id = 1; id <= 3; id++)
            c->old[c->n_old++] = (struct raft_member){ .id = id, .voter = true };
    }
    int n = snprintf((char *)c->extra, sizeof c->extra,
                     "server.1=a:2888:3888;2181\nserver.2=b:2888:3888;2181\n"
                     "server.3=c:2888:3888;2181\nserver.4=d:2888:3888;2181\n"
                     "server.9=e:2888:3888:observer;2181\nversion=%x", k);
    c->extra_len = (uint32_t)n;
}

static size_t config_bytes(int k, uint8_t out[RAFT_CONFIG_BYTES_MAX])
{
    struct raft_config c;
    test_config(k, &c);
    return raft_config_encode(&c, out);
}

/* Txn number k of the 14 shapes the codec must carry: one per type plus
 * the data / ACL / multi variants. */
#define SHAPES 14
#define SHAPE_CONFIG 12
static void txn_shape(int k, int64_t zxid, struct txn *x)
{
    switch (k % SHAPES) {
    case 0:
        txn_init(x, zxid, TXN_CREATE, 1);
        x->ops[0] = op_create(TXN_CREATE, "/a/node-0000000001", "hello", 5, custom_acl(),
                              0x55, 7);
        break;
    case 1: /* null data, open ACL, ephemeral */
        txn_init(x, zxid, TXN_CREATE, 1);
        x->ops[0] = op_create(TXN_CREATE, "/e", NULL, -1, tree_acl_open(), 0x1234, -1);
        break;
    case 2: /* empty (not null) data */
        txn_init(x, zxid, TXN_CREATE_CONTAINER, 1);
        x->ops[0] = op_create(TXN_CREATE_CONTAINER, "/c", "", 0, tree_acl_open(),
                              TREE_OWNER_CONTAINER, 3);
        break;
    case 3:
        txn_init(x, zxid, TXN_CREATE_TTL, 1);
        x->ops[0] = op_create(TXN_CREATE_TTL, "/ttl", "x", 1, custom_acl(),
                              TREE_OWNER_TTL_MASK | 60000, 1);
        break;
    case 4:
        txn_init(x, zxid, TXN_DELETE, 1);
        x->ops[0] = op_path(TXN_DELETE, "/a/b", 0, 12);
        break;
    case 5:
        txn_init(x, zxid, TXN_SETDATA, 1);
        x->ops[0] = op_setdata("/a", "\0binary\xff", 8, 42);
        break;
    case 6:
        txn_init(x, zxid, TXN_SETACL, 1);
        x->ops[0] = op_path(TXN_SETACL, "/a", 3, 0);
        x->ops[0].acl = custom_acl();
        break;
    case 7:
        txn_init(x, zxid, TXN_CHECK, 1);
        x->ops[0] = op_path(TXN_CHECK, "/a", -1, 0);
        break;
    case 8:
        txn_init(x, zxid, TXN_MULTI, 4);
        x->ops[0] = op_create(TXN_CREATE, "/m", "d", 1, tree_acl_open(), 0, -1);
        x->ops[1] = op_setdata("/m", NULL, -1, 1);
        x->ops[2] = op_path(TXN_CHECK, "/m", 1, 0);
        x->ops[3] = op_path(TXN_DELETE, "/m", 0, -1);
        break;
    case 9: /* failed multi: OK, the failing error, then runtime inconsistency */
        txn_init(x, zxid, TXN_MULTI, 3);
        x->ops[0] = op_error(ZK_OK);
        x->ops[1] = op_error(ZK_EBADVERSION);
        x->ops[2] = op_error(ZK_ERUNTIMEINCONSISTENCY);
        break;
    case 10:
        txn_init(x, zxid, TXN_CREATE_SESSION, 1);
        x->ops[0] = (struct txn_op){ .type = TXN_CREATE_SESSION, .client_type = TXN_CREATE_SESSION,
                                     .data_len = -1, .timeout_ms = 30000, .passwd_known = true };
        for (int i = 0; i < TREE_PASSWD_BYTES; i++)
            x->ops[0].passwd[i] = (uint8_t)(0xC0 + i + (zxid & 0xf));
        break;
    case 11: /* closeSession as tree_prep produces it: close, then its ephemerals */
        txn_init(x, zxid, TXN_CLOSE_SESSION, 3);
        x->ops[0] = (struct txn_op){ .type = TXN_CLOSE_SESSION, .client_type = TXN_CLOSE_SESSION,
                                     .data_len = -1 };
        x->ops[1] = op_path(TXN_DELETE, "/e1", 0, -1);
        x->ops[2] = op_path(TXN_DELETE, "/dir/e2", 0, 9);
        break;
    case SHAPE_CONFIG: { /* a membership change, as txnlog_append_entry logs it */
        uint8_t buf[RAFT_CONFIG_BYTES_MAX];
        int32_t n = (int32_t)config_bytes((int)zxid, buf);
        txn_init(x, zxid, TXN_CONFIG, 1);
        x->session_id = 0;
        x->cxid = 0;
        x->time_ms = 0;
        x->ops[0] = (struct txn_op){ .type = TXN_CONFIG, .client_type = ZK_OP_RECONFIG,
                                     .data = xbytes((const char *)buf, n), .data_len = n };
        break;
    }
    default: /* empty multi */
        txn_init(x, zxid, TXN_MULTI, 0);
        break;
    }
}

static void assert_acl_equal(const struct tree_acl *a, const struct tree_acl *b)
{
    if (a == NULL || b == NULL) {
        assert_ptr_equal(a, b);
        return;
    }
    assert_int_equal(a->count, b->count);
    for (int32_t i = 0; i < a->count; i++) {
        assert_int_equal(a->items[i].perms, b->items[i].perms);
        assert_string_equal(a->items[i].scheme, b->items[i].scheme);
        assert_string_equal(a->items[i].id, b->items[i].id);
    }
}

static void assert_op_equal(const struct txn_op *a, const struct txn_op *b)
{
    assert_int_equal(a->type, b->type);
    assert_int_equal(a->client_type, b->client_type);
    if (a->path == NULL || b->path == NULL)
        assert_ptr_equal(a->path, b->path);
    else
        assert_string_equal(a->path, b->path);
    assert_int_equal(a->data_len, b->data_len);
    assert_int_equal(a->data == NULL, b->data == NULL);
    if (a->data_len > 0)
        assert_memory_equal(a->data, b->data, (size_t)a->data_len);
    assert_acl_equal(a->acl, b->acl);
    assert_int_equal(a->ephemeral_owner, b->ephemeral_owner);
    assert_int_equal(a->version, b->version);
    assert_int_equal(a->parent_cversion, b->parent_cversion);
    assert_int_equal(a->timeout_ms, b->timeout_ms);
    assert_int_equal(a->err, b->err);
    assert_int_equal(a->passwd_known, b->passwd_known);
    assert_memory_equal(a->passwd, b->passwd, TREE_PASSWD_BYTES);
}

static void assert_txn_equal(const struct txn *a, const struct txn *b)
{
    assert_int_equal(a->zxid, b->zxid);
    assert_int_equal(a->session_id, b->session_id);
    assert_int_equal(a->cxid, b->cxid);
    assert_int_equal(a->time_ms, b->time_ms);
    assert_int_equal(a->type, b->type);
    assert_int_equal(a->nops, b->nops);
    for (uint32_t i = 0; i < a->nops; i++)
        assert_op_equal(&a->ops[i], &b->ops[i]);
}

/* Asserts that x equals the txn the tests wrote for its zxid. */
static void assert_is_generated(const struct txn *x)
{
    struct txn want;
    txn_shape((int)x->zxid, x->zxid, &want);
    assert_txn_equal(x, &want);
    txn_free(&want);
}

/* ---- codec --------------------------------------------------------------------- */

static void test_codec_round_trip_every_type(void **state)
{
    for (int k = 0; k < SHAPES; k++) {
        struct txn x, y;
        txn_shape(k, ((int64_t)5 << 32) | (k + 1), &x);
        struct base_buf b = { 0 };
        assert_int_equal(txn_encode(&b, &x), 0);
        assert_int_equal(txn_decode(b.data, b.len, &y), 0);
        assert_txn_equal(&x, &y);
        if (k == 1 || k == 2) /* the open list decodes to the shared one */
            assert_ptr_equal(y.ops[0].acl, tree_acl_open());
        /* re-encoding the decoded txn gives the same bytes */
        struct base_buf b2 = { 0 };
        assert_int_equal(txn_encode(&b2, &y), 0);
        assert_int_equal(b2.len, b.len);
        assert_memory_equal(b2.data, b.data, b.len);
        txn_free(&x);
        txn_free(&y);
        base_buf_free(&b);
        base_buf_free(&b2);
    }
}

static void test_codec_rejects_truncated_and_trailing(void **state)
{
    for (int k = 0; k < SHAPES; k++) {
        struct txn x, y;
        txn_shape(k, k + 1, &x);
        struct base_buf b = { 0 };
        assert_int_equal(txn_encode(&b, &x), 0);
        for (size_t n = 0; n < b.len; n++) {
            assert_int_equal(txn_decode(b.data, n, &y), -EBADMSG);
            assert_null(y.ops);
        }
        uint8_t *longer = malloc(b.len + 1); /* one trailing byte is refused too */
        assert_non_null(longer);
        memcpy(longer, b.data, b.len);
        longer[b.len] = 0;
        assert_int_equal(txn_decode(longer, b.len + 1, &y), -EBADMSG);
        free(longer);
        txn_free(&x);
        base_buf_free(&b);
    }
}

/* Lengths and counts far beyond the record are refused before allocating. */
static void test_codec_rejects_absurd_lengths(void **state)
{
    struct txn x, y;
    txn_shape(4, 1, &x); /* delete: header, op fixed part, then the path length */
    struct base_buf b = { 0 };
    assert_int_equal(txn_encode(&b, &x), 0);
    const size_t nops_at = 32, path_len_at = 36 + 9;
    base_put_be32(b.data + path_len_at, 0xFFFFFFFFu);
    assert_int_equal(txn_decode(b.data, b.len, &y), -EBADMSG);
    base_put_be32(b.data + path_len_at, (uint32_t)strlen("/a/b"));
    assert_int_equal(txn_decode(b.data, b.len, &y), 0);
    txn_free(&y);
    base_put_be32(b.data + nops_at, 0xFFFFFFFFu);
    assert_int_equal(txn_decode(b.data, b.len, &y), -EBADMSG);
    base_put_be32(b.data + nops_at, 1);
    base_put_be32(b.data + 36, 0x7777); /* unknown op type */
    assert_int_equal(txn_decode(b.data, b.len, &y), -EBADMSG);
    txn_free(&x);
    base_buf_free(&b);
}

/* Paths are bounded by the record they sit in, not by a fixed limit: a
 * create and a multi over 10,000- and 200,000-byte paths round-trip, and
 * a path length one byte past the record's end is refused. */
static void test_codec_long_paths(void **state)
{
    static const size_t lens[] = { 10000, 200000 };
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        char *p = malloc(lens[i] + 1);
        assert_non_null(p);
        memset(p, 'a', lens[i]);
        p[0] = '/';
        p[lens[i]] = '\0';
        struct txn x, y;
        txn_init(&x, 1, TXN_MULTI, 3);
        x.ops[0] = op_create(TXN_CREATE, p, "d", 1, custom_acl(), 0, 1);
        x.ops[1] = op_setdata(p, "e", 1, 1);
        x.ops[2] = op_path(TXN_DELETE, p, 0, 1);
        struct base_buf b = { 0 };
        assert_int_equal(txn_encode(&b, &x), 0);
        assert_int_equal(txn_decode(b.data, b.len, &y), 0);
        assert_txn_equal(&x, &y);
        assert_int_equal(strlen(y.ops[2].path), lens[i]);
        txn_free(&y);
        /* the last op's path length, one more than the bytes behind it */
        size_t at = b.len - lens[i] - 4 - 4 - 4; /* path, its length; version, pcversion */
        base_put_be32(b.data + at, (uint32_t)lens[i] + 4 + 4 + 1);
        assert_int_equal(txn_decode(b.data, b.len, &y), -EBADMSG);
        txn_free(&x);
        base_buf_free(&b);
        free(p);
    }
}

/* A digest id of 70,000 bytes ("u:" + 'h' x 70,000), as a client may send
 * it (ZooKeeper bounds it by nothing but the frame). */
static char *long_digest_id(void)
{
    const size_t n = 2 + 70000;
    char *id = malloc(n + 1);
    assert_non_null(id);
    memcpy(id, "u:", 2);
    memset(id + 2, 'h', n - 2);
    id[n] = '\0';
    return id;
}

/* ACL schemes and ids have no bound of their own, as paths: a create whose
 * ACL id is 70,000 bytes round-trips, and an id length one byte past the
 * record's end (or absurd) is refused without allocating it. */
static void test_codec_long_acl_ids(void **state)
{
    char *id = long_digest_id();
    struct zk_acl item = { ZK_PERM_ALL, { zk_str_c("digest"), zk_str_c(id) } };
    struct zk_aclvec req = { 1, &item };
    struct tree_acl *acl = NULL;
    assert_int_equal(tree_acl_from_request(&req, NULL, 0, &acl), ZK_OK);
    struct txn x, y;
    txn_init(&x, 1, TXN_CREATE, 1);
    x.ops[0] = op_create(TXN_CREATE, "/a", "d", 1, acl, 0, 1);
    struct base_buf b = { 0 };
    assert_int_equal(txn_encode(&b, &x), 0);
    assert_int_equal(b.len, TXNLOG_TXN_HEADER_BYTES + txn_op_encoded_bytes(&x.ops[0]));
    assert_int_equal(txn_decode(b.data, b.len, &y), 0);
    assert_txn_equal(&x, &y);
    txn_free(&y);
    /* the id's length sits before the id, which is followed by pcversion */
    size_t at = b.len - 4 - strlen(id) - 4;
    base_put_be32(b.data + at, (uint32_t)strlen(id) + 4 + 1);
    assert_int_equal(txn_decode(b.data, b.len, &y), -EBADMSG);
    assert_null(y.ops);
    base_put_be32(b.data + at, 0xFFFFFFFFu);
    assert_int_equal(txn_decode(b.data, b.len, &y), -EBADMSG);
    txn_free(&x);
    base_buf_free(&b);
    free(id);
}

/* TXNLOG_TXN_OPS_BYTES_MAX is what a record leaves for ops: ops adding up
 * to exactly that encode (to a record of exactly TXNLOG_RECORD_BYTES_MAX),
 * one byte more is refused. */
static void test_codec_ops_bound_is_exact(void **state)
{
    struct txn x;
    txn_init(&x, 1, TXN_SETDATA, 1);
    x.ops[0] = op_setdata("/a", "", 0, 1);
    size_t data_len = TXNLOG_TXN_OPS_BYTES_MAX - txn_op_encoded_bytes(&x.ops[0]);
    for (int extra = 0; extra <= 1; extra++) {
        free(x.ops[0].data);
        x.ops[0].data_len = (int32_t)(data_len + (size_t)extra);
        x.ops[0].data = calloc(1, (size_t)x.ops[0].data_len);
        assert_non_null(x.ops[0].data);
        struct base_buf b = { 0 };
        assert_int_equal(txn_encode(&b, &x), extra ? -EINVAL : 0);
        assert_int_equal(b.len, extra ? 0 : TXNLOG_RECORD_BYTES_MAX);
        base_buf_free(&b);
    }
    txn_free(&x);
}

/* ---- log helpers --------------------------------------------------------------- */

struct collect {
    struct txn *items;
    size_t n;
    size_t cap;
};

/* Takes ownership of each replayed txn (the documented way to keep one). */
static int collect_fn(void *arg, struct txn *x)
{
    struct collect *c = arg;
    assert_int_equal(base_grow(&c->items, &c->cap, c->n + 1, sizeof *c->items), 0);
    c->items[c->n++] = *x;
    x->ops = NULL;
    x->nops = 0;
    return 0;
}

static void collect_free(struct collect *c)
{
    for (size_t i = 0; i < c->n; i++)
        txn_free(&c->items[i]);
    free(c->items);
    *c = (struct collect){ 0 };
}

/* Replays dir and asserts the records are exactly zxids first..first+n-1,
 * each equal to what was written. Returns n. */
static size_t replay_check(struct storage *st, int64_t from, int64_t first,
                           struct txnlog_replay_stats *stats)
{
    struct collect c = { 0 };
    struct txnlog_replay_stats local;
    assert_int_equal(txnlog_replay(st, LOG_DIR, from, collect_fn, &c, stats ? stats : &local), 0);
    for (size_t i = 0; i < c.n; i++) {
        assert_int_equal(c.items[i].zxid, first + (int64_t)i);
        assert_is_generated(&c.items[i]);
    }
    size_t n = c.n;
    assert_int_equal((stats ? stats : &local)->records, n);
    collect_free(&c);
    return n;
}

static struct txnlog *log_open(struct storage *st, uint64_t seg_max, uint64_t prealloc)
{
    struct txnlog_opts o = { .db_id = 77, .segment_bytes_max = seg_max,
                             .prealloc_bytes = prealloc };
    struct txnlog *log = NULL;
    assert_int_equal(txnlog_open(st, LOG_DIR, &o, &log), 0);
    return log;
}

/* Appends zxids first..last, syncing after every per_sync records and at the end. */
static void log_write(struct txnlog *log, int64_t first, int64_t last, int per_sync)
{
    for (int64_t z = first; z <= last; z++) {
        struct txn x;
        txn_shape((int)z, z, &x);
        assert_int_equal(txnlog_append(log, &x), 0);
        txn_free(&x);
        if ((z - first + 1) % per_sync == 0 || z == last)
            assert_int_equal(txnlog_sync(log), 0);
    }
    assert_int_equal(txnlog_durable_zxid(log), last);
}

static void log_append_only(struct txnlog *log, int64_t first, int64_t last)
{
    for (int64_t z = first; z <= last; z++) {
        struct txn x;
        txn_shape((int)z, z, &x);
        assert_int_equal(txnlog_append(log, &x), 0);
        txn_free(&x);
    }
}

static size_t record_bytes(int64_t zxid)
{
    struct txn x;
    txn_shape((int)zxid, zxid, &x);
    struct base_buf b = { 0 };
    assert_int_equal(txn_encode(&b, &x), 0);
    size_t n = b.len + 8;
    txn_free(&x);
    base_buf_free(&b);
    return n;
}

struct names {
    int64_t zxid[256];
    size_t n;
};

static int name_fn(void *arg, const char *name)
{
    struct names *ns = arg;
    assert_true(ns->n < 256);
    assert_int_equal(strncmp(name, "log.", 4), 0);
    ns->zxid[ns->n++] = (int64_t)strtoull(name + 4, NULL, 16);
    return 0;
}

static int cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static struct names seg_names(struct storage *st)
{
    struct names ns = { .n = 0 };
    assert_int_equal(storage_list(st, LOG_DIR, name_fn, &ns), 0);
    qsort(ns.zxid, ns.n, sizeof ns.zxid[0], cmp64);
    return ns;
}

static void seg_name(int64_t zxid, char *out, size_t cap)
{
    snprintf(out, cap, LOG_DIR "/log.%llx", (unsigned long long)zxid);
}

static void flip_bit(struct storage *st, const char *path, uint64_t off, int bit)
{
    struct storage_file *f;
    assert_int_equal(storage_open(st, path, 0, &f), 0);
    uint8_t b;
    size_t got;
    assert_int_equal(storage_pread(f, &b, 1, off, &got), 0);
    assert_int_equal(got, 1);
    b ^= (uint8_t)(1u << bit);
    assert_int_equal(storage_pwrite(f, &b, 1, off), 0);
    assert_int_equal(storage_datasync(f), 0);
    assert_int_equal(storage_close(f), 0);
}

static uint64_t file_size(struct storage *st, const char *path)
{
    struct storage_file *f;
    assert_int_equal(storage_open(st, path, 0, &f), 0);
    uint64_t size;
    assert_int_equal(storage_size(f, &size), 0);
    assert_int_equal(storage_close(f), 0);
    return size;
}

/* A one-segment log of zxids 1..n, synced, writer closed. */
static struct storage *one_segment_log(int64_t n)
{
    struct storage *st = storage_mem_new();
    assert_non_null(st);
    struct txnlog *log = log_open(st, 1 << 20, 1 << 16);
    log_write(log, 1, n, 2);
    txnlog_close(log);
    return st;
}

/* ---- framing, CRC, torn tails ------------------------------------------------------ */

static void test_bit_flip_mid_log_is_refused(void **state)
{
    struct storage *st = one_segment_log(5);
    char path[64];
    seg_name(1, path, sizeof path);
    uint64_t start = 16 + record_bytes(1) + record_bytes(2);
    uint64_t end = start + record_bytes(3);
    uint64_t used = storage_mem_used(st);
    struct collect c = { 0 };
    for (uint64_t off = start; off < end; off++) {
        for (int bit = 0; bit < 8; bit++) {
            flip_bit(st, path, off, bit);
            assert_int_equal(txnlog_replay(st, LOG_DIR, 0, collect_fn, &c, NULL), TXNLOG_ECORRUPT);
            collect_free(&c);
            flip_bit(st, path, off, bit);
        }
    }
    /* the segment header is checked too */
    for (uint64_t off = 0; off < 8; off++) {
        flip_bit(st, path, off, 3);
        assert_int_equal(txnlog_replay(st, LOG_DIR, 0, collect_fn, &c, NULL), TXNLOG_ECORRUPT);
        collect_free(&c);
        flip_bit(st, path, off, 3);
    }
    /* refusing deleted nothing, and the restored log is intact */
    assert_int_equal(storage_mem_used(st), used);
    assert_int_equal(replay_check(st, 0, 1, NULL), 5);
    storage_destroy(st);
}

static void test_bit_flip_in_last_record_is_torn_tail(void **state)
{
    uint64_t start = 16;
    for (int64_t z = 1; z < 5; z++)
        start += record_bytes(z);
    uint64_t len = record_bytes(5);
    char path[64];
    seg_name(1, path, sizeof path);
    for (uint64_t off = start; off < start + len; off++) {
        for (int bit = 0; bit < 8; bit += 3) {
            struct storage *st = one_segment_log(5);
            flip_bit(st, path, off, bit);
            struct txnlog_replay_stats s;
            assert_int_equal(replay_check(st, 0, 1, &s), 4);
            assert_true(s.torn_bytes > 0 && s.torn_bytes <= len);
            assert_int_equal(s.last_zxid, 4);
            assert_int_equal(file_size(st, path), start);
            storage_destroy(st);
        }
    }
}

/* Tears the write of record tear at every byte: replay yields 1..tear-1
 * (all of them once the whole record landed), never part of a record, and
 * the repaired log accepts new records. */
static void torn_tail_at_every_offset(int64_t tear, bool garbage)
{
    size_t len = record_bytes(tear);
    for (size_t cut = 0; cut <= len; cut++) {
        struct storage *st = storage_mem_new();
        struct txnlog *log = log_open(st, 1 << 20, 1 << 16);
        log_write(log, 1, tear - 1, 5);
        log_append_only(log, tear, tear);
        storage_mem_fail_sync(st, -EIO, 1);
        assert_int_equal(txnlog_sync(log), -EIO);
        assert_int_equal(txnlog_durable_zxid(log), tear - 1);
        storage_mem_crash(st, cut, garbage);
        txnlog_close(log);

        struct txnlog_replay_stats s;
        size_t want = cut == len ? (size_t)tear : (size_t)tear - 1;
        assert_int_equal(replay_check(st, 0, 1, &s), want);
        assert_true(s.torn_bytes <= len);
        if (garbage && cut > 0 && cut < len)
            assert_true(s.torn_bytes > 0);
        assert_int_equal(replay_check(st, 0, 1, &s), want);
        assert_int_equal(s.torn_bytes, 0); /* the repair stuck */

        log = log_open(st, 1 << 20, 1 << 16);
        assert_int_equal(txnlog_last_zxid(log), (int64_t)want);
        log_write(log, (int64_t)want + 1, (int64_t)want + 2, 1);
        txnlog_close(log);
        assert_int_equal(replay_check(st, 0, 1, NULL), want + 2);
        storage_destroy(st);
    }
}

static void test_torn_tail_every_offset(void **state)
{
    torn_tail_at_every_offset(6, false);
}

static void test_torn_tail_every_offset_garbage(void **state)
{
    torn_tail_at_every_offset(6, true);
}

/* The same for a membership change: a torn CONFIG record is a torn tail
 * like any other, never a membership half read. */
static void test_torn_config_record_every_offset(void **state)
{
    struct txn x;
    txn_shape(SHAPE_CONFIG, SHAPE_CONFIG, &x);
    assert_int_equal(x.type, TXN_CONFIG);
    txn_free(&x);
    torn_tail_at_every_offset(SHAPE_CONFIG, false);
    torn_tail_at_every_offset(SHAPE_CONFIG, true);
}

static void test_garbage_in_non_last_segment_is_refused(void **state)
{
    struct storage *st = storage_mem_new();
    struct txnlog *log = log_open(st, 300, 512);
    log_write(log, 1, 20, 1);
    txnlog_close(log);
    struct names ns = seg_names(st);
    assert_true(ns.n >= 3);
    char path[64];
    seg_name(ns.zxid[0], path, sizeof path);
    uint64_t size = file_size(st, path);
    assert_int_equal(size % 512, 0);
    flip_bit(st, path, size - 1, 0); /* in the preallocated zeros */
    struct collect c = { 0 };
    assert_int_equal(txnlog_replay(st, LOG_DIR, 0, collect_fn, &c, NULL), TXNLOG_ECORRUPT);
    collect_free(&c);
    flip_bit(st, path, size - 1, 0);
    /* damage in the last record of a non-last segment is not a torn tail */
    flip_bit(st, path, 16 + record_bytes(ns.zxid[0]) - 1, 0);
    assert_int_equal(txnlog_replay(st, LOG_DIR, 0, collect_fn, &c, NULL), TXNLOG_ECORRUPT);
    collect_free(&c);
    assert_int_equal(seg_names(st).n, ns.n);
    assert_int_equal(file_size(st, path), size);
    /* the writer only checks the last segment, which is fine */
    log = log_open(st, 300, 512);
    txnlog_close(log);
    storage_destroy(st);
}

static void test_writer_open_refuses_corrupt_last_segment(void **state)
{
    struct storage *st = one_segment_log(5);
    char path[64];
    seg_name(1, path, sizeof path);
    flip_bit(st, path, 16 + 8 + 2, 1); /* inside record 1 */
    struct txnlog *log = NULL;
    struct txnlog_opts o = { .db_id = 77 };
    assert_int_equal(txnlog_open(st, LOG_DIR, &o, &log), TXNLOG_ECORRUPT);
    assert_null(log);
    storage_destroy(st);
}

static void test_zxid_order_enforced(void **state)
{
    struct storage *st = storage_mem_new();
    struct txnlog *log = log_open(st, 1 << 20, 4096);
    log_write(log, 1, 3, 3);
    struct txn x;
    txn_shape(3, 3, &x);
    assert_int_equal(txnlog_append(log, &x), TXNLOG_EORDER);
    x.zxid = 2;
    assert_int_equal(txnlog_append(log, &x), TXNLOG_EORDER);
    txn_free(&x);
    assert_int_equal(txnlog_last_zxid(log), 3);
    txnlog_close(log);
    /* a segment whose first record is not the zxid it is named after */
    assert_int_equal(storage_rename(st, LOG_DIR "/log.1", LOG_DIR "/log.2"), 0);
    struct collect c = { 0 };
    assert_int_equal(txnlog_replay(st, LOG_DIR, 0, collect_fn, &c, NULL), TXNLOG_EORDER);
    collect_free(&c);
    storage_destroy(st);
}

/* The last zxid there is may be logged and replayed: the last segment's
 * records have no next segment name to stay below (found by fuzz_txnlog). */
static void test_log_reaches_int64_max(void **state)
{
    struct storage *st = storage_mem_new();
    struct txnlog *log = log_open(st, 1 << 20, 4096);
    log_write(log, 1, 3, 3);
    txnlog_close(log);
    log = log_open(st, 1 << 20, 4096); /* a new segment: log.7ffffffffffffffe */
    const int64_t top[] = { INT64_MAX - 1, INT64_MAX };
    for (size_t i = 0; i < 2; i++) {
        struct txn x;
        txn_shape(7, top[i], &x);
        assert_int_equal(txnlog_append(log, &x), 0);
        txn_free(&x);
    }
    assert_int_equal(txnlog_sync(log), 0);
    assert_int_equal(txnlog_durable_zxid(log), INT64_MAX);
    txnlog_close(log);
    struct collect c = { 0 };
    struct txnlog_replay_stats stats;
    assert_int_equal(txnlog_replay(st, LOG_DIR, 0, collect_fn, &c, &stats), 0);
    assert_int_equal(c.n, 5);
    assert_int_equal(c.items[3].zxid, INT64_MAX - 1);
    assert_int_equal(c.items[4].zxid, INT64_MAX);
    assert_int_equal(stats.last_zxid, INT64_MAX);
    collect_free(&c);
    /* from the snapshot just below: only the last segment is read */
    assert_int_equal(txnlog_replay(st, LOG_DIR, INT64_MAX - 1, collect_fn, &c, &stats), 0);
    assert_int_equal(c.n, 1);
    assert_int_equal(c.items[0].zxid, INT64_MAX);
    collect_free(&c);
    log = log_open(st, 1 << 20, 4096);
    assert_int_equal(txnlog_last_zxid(log), INT64_MAX);
    txnlog_close(log);
    storage_destroy(st);
}

/* ---- damage before records that end in zeros --------------------------------------- */

/* Appends a txn whose payload ends in zero bytes: a closeSession with no
 * ephemerals (its one op sets no field, so its field mask, the last byte,
 * is 0) or, when zeros > 0, a setData whose data is that many zeros. */
static void append_ending_in_zeros(struct txnlog *log, int64_t zxid, int32_t zeros)
{
    struct txn_op op = { .type = TXN_CLOSE_SESSION, .client_type = ZK_OP_CLOSESESSION,
                         .data_len = -1 };
    struct txn x = { .zxid = zxid, .session_id = zxid, .type = TXN_CLOSE_SESSION, .nops = 1,
                     .ops = &op };
    if (zeros > 0) {
        op = (struct txn_op){ .type = TXN_SETDATA, .client_type = ZK_OP_SETDATA, .path = "/z",
                              .data = calloc((size_t)zeros, 1), .data_len = zeros };
        assert_non_null(op.data);
        x.type = TXN_SETDATA;
    }
    assert_int_equal(txnlog_append(log, &x), 0);
    free(op.data);
}

static int txn_count_fn(void *arg, struct txn *x)
{
    (void)x;
    (*(size_t *)arg)++;
    return 0;
}

/* txnlog_replay's result; *n gets the records handed out. */
static int replay_count(struct storage *st, size_t *n, struct txnlog_replay_stats *stats)
{
    *n = 0;
    return txnlog_replay(st, LOG_DIR, 0, txn_count_fn, n, stats);
}

/* zxids 1..count, each ending in zeros (the last one in last_zeros of them
 * when > 0), synced into one segment. */
static struct storage *zero_ending_log(int64_t count, int32_t last_zeros)
{
    struct storage *st = storage_mem_new();
    assert_non_null(st);
    struct txnlog *log = log_open(st, 1 << 20, 1 << 16);
    for (int64_t z = 1; z <= count; z++)
        append_ending_in_zeros(log, z, z == count ? last_zeros : 0);
    assert_int_equal(txnlog_sync(log), 0);
    txnlog_close(log);
    return st;
}

/* Damage in record 2 of 3 is not a torn tail even though record 3, intact
 * after it, ends in zeros that read like preallocated space: refused, and
 * nothing is truncated (the fuzzer found record 3 silently dropped). */
static void damage_before_zero_ending_record(int32_t last_zeros)
{
    struct storage *st = zero_ending_log(3, last_zeros);
    char path[64];
    seg_name(1, path, sizeof path);
    uint64_t size = file_size(st, path), used = storage_mem_used(st);
    uint64_t start = 16 + 53, end = start + 53; /* closeSession: 8 + 36 + 9 bytes */
    size_t n;
    for (uint64_t off = start; off < end; off++) {
        for (int bit = 0; bit < 8; bit += 7) {
            flip_bit(st, path, off, bit);
            assert_int_equal(replay_count(st, &n, NULL), TXNLOG_ECORRUPT);
            assert_int_equal(file_size(st, path), size);
            flip_bit(st, path, off, bit);
        }
    }
    assert_int_equal(storage_mem_used(st), used);
    struct txnlog_replay_stats s;
    assert_int_equal(replay_count(st, &n, &s), 0);
    assert_int_equal(n, 3);
    assert_int_equal(s.torn_bytes, 0);
    /* damage in record 3 itself is still a torn tail */
    flip_bit(st, path, end + 8, 0);
    assert_int_equal(replay_count(st, &n, &s), 0);
    assert_int_equal(n, 2);
    assert_true(s.torn_bytes > 0);
    assert_int_equal(file_size(st, path), end);
    storage_destroy(st);
}

static void test_damage_before_close_session_is_refused(void **state)
{
    damage_before_zero_ending_record(0);
}

/* A record ending in a long run of zeros, well past a chunk of garbage. */
static void test_damage_before_zero_data_is_refused(void **state)
{
    damage_before_zero_ending_record(70000);
}

/* A last segment whose header is damaged but which holds an intact record
 * (ending in a zero) is not a header that never landed: refused, kept. */
static void test_bad_header_over_zero_ending_record_is_refused(void **state)
{
    struct storage *st = zero_ending_log(1, 0);
    char path[64];
    seg_name(1, path, sizeof path);
    uint64_t size = file_size(st, path);
    size_t n;
    for (uint64_t off = 0; off < 8; off++) {
        flip_bit(st, path, off, 2);
        assert_int_equal(replay_count(st, &n, NULL), TXNLOG_ECORRUPT);
        assert_int_equal(seg_names(st).n, 1);
        assert_int_equal(file_size(st, path), size);
        struct txnlog *log = NULL;
        struct txnlog_opts o = { .db_id = 77 };
        assert_int_equal(txnlog_open(st, LOG_DIR, &o, &log), TXNLOG_ECORRUPT);
        assert_int_equal(seg_names(st).n, 1);
        flip_bit(st, path, off, 2);
    }
    assert_int_equal(replay_count(st, &n, NULL), 0);
    assert_int_equal(n, 1);
    storage_destroy(st);
}

/* ---- the writer opening a log that was not replayed first -------------------------- */

static void write_file(struct storage *st, const char *path, const void *p, size_t len)
{
    struct storage_file *f;
    assert_int_equal(storage_open(st, path, STORAGE_CREATE, &f), 0);
    if (len > 0)
        assert_int_equal(storage_pwrite(f, p, len, 0), 0);
    assert_int_equal(storage_datasync(f), 0);
    assert_int_equal(storage_close(f), 0);
}

/* A last segment whose header never landed ("LRC"), after one with
 * records: open removes it and takes the last zxid from the one before
 * (it used to rescan a list still naming the removed file: -ENOENT). */
static void test_open_drops_torn_header_segment(void **state)
{
    struct storage *st = one_segment_log(5);
    char torn[64];
    seg_name(6, torn, sizeof torn);
    write_file(st, torn, "LRC", 3);
    struct txnlog *log = log_open(st, 1 << 20, 1 << 16);
    assert_int_equal(txnlog_last_zxid(log), 5);
    assert_int_equal(seg_names(st).n, 1);
    log_write(log, 6, 7, 1);
    txnlog_close(log);
    assert_int_equal(replay_check(st, 0, 1, NULL), 7);
    storage_destroy(st);
}

/* Open refuses damage in a segment it reads before removing anything, as
 * replay does: the torn segment after the damaged one stays. */
static void test_open_refuses_before_dropping_torn_segment(void **state)
{
    struct storage *st = storage_mem_new();
    struct txnlog *log = log_open(st, 1 << 20, 512);
    log_write(log, 1, 3, 3);
    txnlog_close(log);
    char path[64], torn[64];
    seg_name(1, path, sizeof path);
    seg_name(4, torn, sizeof torn);
    write_file(st, torn, "LRC", 3);
    flip_bit(st, path, file_size(st, path) - 1, 0); /* a non-last segment's zeros */
    size_t n;
    assert_int_equal(replay_count(st, &n, NULL), TXNLOG_ECORRUPT);
    assert_int_equal(seg_names(st).n, 2);
    struct txnlog_opts o = { .db_id = 77 };
    assert_int_equal(txnlog_open(st, LOG_DIR, &o, &log), TXNLOG_ECORRUPT);
    assert_int_equal(seg_names(st).n, 2);
    assert_int_equal(file_size(st, torn), 3);
    storage_destroy(st);
}

/* A last segment created but never written (a crash right after its name
 * became durable) goes, as any header that never landed: left behind, it
 * would sit in the middle of the log once the writer starts a segment
 * with a higher zxid (a new epoch), and every later replay would refuse. */
static void test_empty_last_segment_is_removed(void **state)
{
    struct storage *st = one_segment_log(5);
    char empty[64];
    seg_name(6, empty, sizeof empty);
    write_file(st, empty, NULL, 0);
    size_t n;
    assert_int_equal(replay_count(st, &n, NULL), 0);
    assert_int_equal(n, 5);
    assert_int_equal(seg_names(st).n, 1);
    /* the writer's open removes it too */
    write_file(st, empty, NULL, 0);
    struct txnlog *log = log_open(st, 1 << 20, 1 << 16);
    assert_int_equal(seg_names(st).n, 1);
    append_ending_in_zeros(log, 9, 0);
    assert_int_equal(txnlog_sync(log), 0);
    txnlog_close(log);
    assert_int_equal(replay_count(st, &n, NULL), 0);
    assert_int_equal(n, 6);
    storage_destroy(st);
}

/* ---- segments ---------------------------------------------------------------------- */

static void test_segments_roll_and_replay_across(void **state)
{
    struct storage *st = storage_mem_new();
    struct txnlog *log = log_open(st, 600, 256);
    log_write(log, 1, 60, 7);
    txnlog_close(log);
    struct names ns = seg_names(st);
    assert_true(ns.n >= 4);
    assert_int_equal(ns.zxid[0], 1);
    for (size_t i = 0; i < ns.n; i++) {
        char path[64];
        seg_name(ns.zxid[i], path, sizeof path);
        uint64_t size = file_size(st, path);
        assert_int_equal(size % 256, 0); /* grown in preallocation chunks */
        assert_true(size <= 600 + 2 * 256);
    }
    struct txnlog_replay_stats s;
    assert_int_equal(replay_check(st, 0, 1, &s), 60);
    assert_int_equal(s.last_zxid, 60);
    assert_int_equal(replay_check(st, 25, 26, NULL), 35);
    assert_int_equal(replay_check(st, ns.zxid[2] - 1, ns.zxid[2], NULL), 61 - ns.zxid[2]);
    assert_int_equal(replay_check(st, 60, 61, NULL), 0);

    /* a restarted writer starts a new segment, as ZooKeeper does */
    log = log_open(st, 600, 256);
    assert_int_equal(txnlog_last_zxid(log), 60);
    log_write(log, 61, 65, 5);
    txnlog_close(log);
    struct names after = seg_names(st);
    assert_int_equal(after.n, ns.n + 1);
    assert_int_equal(after.zxid[after.n - 1], 61);
    assert_int_equal(replay_check(st, 0, 1, NULL), 65);
    storage_destroy(st);
}

/* A segment's preallocated zeros after its last record go at the first
 * replay: the writer never appends to an existing segment, so each restart
 * would otherwise leave one more preallocation for every later recovery to
 * read. The records stay, and a later writer and replay are unaffected. */
static void test_replay_trims_preallocated_zeros(void **state)
{
    (void)state;
    struct storage *st = storage_mem_new();
    struct txnlog *log = log_open(st, 1 << 20, 1 << 16);
    log_write(log, 1, 20, 4);
    txnlog_close(log);
    char path[64];
    seg_name(1, path, sizeof path);
    assert_int_equal(file_size(st, path), 1 << 16);
    struct txnlog_replay_stats s;
    assert_int_equal(replay_check(st, 0, 1, &s), 20);
    assert_int_equal(s.torn_bytes, 0); /* zeros are not a torn tail */
    uint64_t trimmed = file_size(st, path);
    assert_true(trimmed > 0 && trimmed < (1 << 16));
    assert_int_equal(replay_check(st, 0, 1, NULL), 20);
    assert_int_equal(file_size(st, path), trimmed);
    /* a crash now loses nothing: the cut was synced */
    storage_mem_crash(st, 0, false);
    assert_int_equal(replay_check(st, 0, 1, NULL), 20);
    log = log_open(st, 1 << 20, 1 << 16);
    log_write(log, 21, 30, 5);
    txnlog_close(log);
    assert_int_equal(file_size(st, path), trimmed);
    assert_int_equal(replay_check(st, 0, 1, NULL), 30);
    storage_destroy(st);
}

static void test_purge_keeps_what_it_must(void **state)
{
    struct storage *st = storage_mem_new();
    struct txnlog *log = log_open(st, 400, 512);
    log_write(log, 1, 40, 3);
    txnlog_close(log);
    struct names ns = seg_names(st);
    assert_true(ns.n >= 5);
    assert_true(ns.zxid[3] + 1 < ns.zxid[4]);

    assert_int_equal(txnlog_purge(st, LOG_DIR, ns.zxid[2]), 2);
    struct names left = seg_names(st);
    assert_int_equal(left.n, ns.n - 2);
    assert_int_equal(left.zxid[0], ns.zxid[2]);
    /* keep_from inside segment 3: segment 2 goes, 3 (holding it) stays */
    assert_int_equal(txnlog_purge(st, LOG_DIR, ns.zxid[3] + 1), 1);
    left = seg_names(st);
    assert_int_equal(left.zxid[0], ns.zxid[3]);
    assert_int_equal(replay_check(st, ns.zxid[3], ns.zxid[3] + 1, NULL), 40 - ns.zxid[3]);
    assert_int_equal(replay_check(st, 0, ns.zxid[3], NULL), 41 - ns.zxid[3]);
    /* nothing to do is fine; the last segment always stays */
    assert_int_equal(txnlog_purge(st, LOG_DIR, ns.zxid[3]), 0);
    assert_int_equal(txnlog_purge(st, LOG_DIR, INT64_MAX), (int)(ns.n - 4));
    left = seg_names(st);
    assert_int_equal(left.n, 1);
    assert_int_equal(left.zxid[0], ns.zxid[ns.n - 1]);
    assert_int_equal(replay_check(st, 0, ns.zxid[ns.n - 1], NULL), 41 - ns.zxid[ns.n - 1]);
    storage_destroy(st);
}

/* ---- truncate-after-zxid (Raft's follower cutting an uncommitted tail) ------------- */

/* Replays dir and asserts the zxids are exactly want[0..n), each record
 * the generated shape for its zxid. */
static void replay_expect(struct storage *st, const int64_t *want, size_t n)
{
    struct collect c = { 0 };
    struct txnlog_replay_stats stats;
    assert_int_equal(txnlog_replay(st, LOG_DIR, 0, collect_fn, &c, &stats), 0);
    assert_int_equal(c.n, n);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(c.items[i].zxid, want[i]);
        assert_is_generated(&c.items[i]);
    }
    collect_free(&c);
}

static void append_one(struct txnlog *log, int64_t zxid)
{
    struct txn x;
    txn_shape((int)zxid, zxid, &x);
    assert_int_equal(txnlog_append(log, &x), 0);
    txn_free(&x);
}

/* A cut inside the last segment, then a new term's records after it: the
 * old tail never comes back, and the next sync starts a new segment. */
static void test_truncate_after_then_new_term(void **state)
{
    struct storage *st = storage_mem_new();
    struct txnlog *log = log_open(st, 1 << 20, 256);
    log_write(log, 1, 9, 4);
    assert_int_equal(txnlog_truncate_after(log, 5), 0);
    assert_int_equal(txnlog_last_zxid(log), 5);
    assert_int_equal(txnlog_durable_zxid(log), 5);
    const int64_t cut[] = { 1, 2, 3, 4, 5 };
    replay_expect(st, cut, 5);
    int64_t t2 = (int64_t)2 << 32;
    assert_int_equal(txnlog_truncate_after(log, 7), 0); /* nothing above 5: no-op */
    append_one(log, t2);
    append_one(log, t2 + 1);
    assert_int_equal(txnlog_sync(log), 0);
    txnlog_close(log);
    struct names ns = seg_names(st);
    assert_int_equal(ns.n, 2);
    assert_int_equal(ns.zxid[1], t2);
    const int64_t want[] = { 1, 2, 3, 4, 5, t2, t2 + 1 };
    replay_expect(st, want, 7);
    log = log_open(st, 1 << 20, 256);
    assert_int_equal(txnlog_last_zxid(log), t2 + 1);
    txnlog_close(log);
    storage_destroy(st);
}

/* Cuts across segment boundaries at every zxid of a 40-record log, each
 * followed by a crash that keeps nothing unsynced: what is left is exactly
 * 1..cut, and the writer goes on after it. */
static void test_truncate_after_every_zxid_survives_crash(void **state)
{
    for (int64_t cut = 0; cut <= 40; cut++) {
        struct storage *st = storage_mem_new();
        struct txnlog *log = log_open(st, 400, 128);
        log_write(log, 1, 40, 3);
        assert_true(seg_names(st).n >= 4);
        assert_int_equal(txnlog_truncate_after(log, cut), 0);
        storage_mem_crash(st, 0, false);
        int64_t want[48];
        for (int64_t z = 1; z <= cut; z++)
            want[z - 1] = z;
        replay_expect(st, want, (size_t)cut);
        append_one(log, 100);
        assert_int_equal(txnlog_sync(log), 0);
        txnlog_close(log);
        want[cut] = 100;
        replay_expect(st, want, (size_t)cut + 1);
        storage_destroy(st);
    }
}

/* Records never synced are cut in memory only; durable ones stay. */
static void test_truncate_after_buffered_only(void **state)
{
    struct storage *st = storage_mem_new();
    struct txnlog *log = log_open(st, 1 << 20, 256);
    log_write(log, 1, 4, 4);
    log_append_only(log, 5, 8);
    assert_int_equal(txnlog_truncate_after(log, 6), 0);
    assert_int_equal(txnlog_last_zxid(log), 6);
    assert_int_equal(txnlog_durable_zxid(log), 4);
    assert_int_equal(txnlog_sync(log), 0);
    const int64_t want[] = { 1, 2, 3, 4, 5, 6 };
    replay_expect(st, want, 6);
    log_append_only(log, 7, 9);
    assert_int_equal(txnlog_truncate_after(log, 3), 0); /* buffered and durable */
    assert_int_equal(txnlog_last_zxid(log), 3);
    assert_int_equal(txnlog_sync(log), 0); /* nothing buffered */
    txnlog_close(log);
    replay_expect(st, want, 3);
    storage_destroy(st);
}

/* A sync failing under the cut leaves the log refusing work: what is on
 * disk is some prefix of the old log, and only a restart may say which. */
static void test_truncate_after_failure_stops_the_writer(void **state)
{
    struct storage *st = storage_mem_new();
    struct txnlog *log = log_open(st, 1 << 20, 256);
    log_write(log, 1, 6, 6);
    storage_mem_fail_sync(st, -EIO, 1);
    assert_int_equal(txnlog_truncate_after(log, 2), -EIO);
    struct txn x;
    txn_shape(3, 3, &x);
    assert_int_equal(txnlog_append(log, &x), -EIO);
    txn_free(&x);
    assert_int_equal(txnlog_sync(log), -EIO);
    assert_int_equal(txnlog_truncate_after(log, 1), -EIO);
    txnlog_close(log);
    storage_mem_crash(st, 0, false);
    struct collect c = { 0 };
    assert_int_equal(txnlog_replay(st, LOG_DIR, 0, collect_fn, &c, NULL), 0);
    assert_true(c.n >= 2 && c.n <= 6); /* a prefix, never less than the cut */
    for (size_t i = 0; i < c.n; i++)
        assert_int_equal(c.items[i].zxid, (int64_t)i + 1);
    collect_free(&c);
    storage_destroy(st);
}

/* ---- term and vote file ------------------------------------------------------------ */

static void test_hard_state_round_trip_and_crash(void **state)
{
    struct storage *st = storage_mem_new();
    struct raft_hard_state hs = { 0 };
    assert_int_equal(txnlog_hard_state_read(st, LOG_DIR, &hs), -ENOENT);
    struct raft_hard_state a = { .term = 7, .vote = 3, .commit_zxid = ((int64_t)7 << 32) | 12 };
    assert_int_equal(txnlog_hard_state_write(st, LOG_DIR, &a), 0);
    storage_mem_crash(st, 0, false); /* durable once written: nothing pending is needed */
    assert_int_equal(txnlog_hard_state_read(st, LOG_DIR, &hs), 0);
    assert_int_equal(hs.term, 7);
    assert_int_equal(hs.vote, 3);
    assert_int_equal(hs.commit_zxid, a.commit_zxid);

    /* a write whose sync fails leaves the old state in place, before and after a crash */
    struct raft_hard_state b = { .term = RAFT_TERM_MAX, .vote = 0, .commit_zxid = 0 };
    storage_mem_fail_sync(st, -EIO, 1);
    assert_int_equal(txnlog_hard_state_write(st, LOG_DIR, &b), -EIO);
    assert_int_equal(txnlog_hard_state_read(st, LOG_DIR, &hs), 0);
    assert_int_equal(hs.term, 7);
    storage_mem_crash(st, SIZE_MAX, true);
    assert_int_equal(txnlog_hard_state_read(st, LOG_DIR, &hs), 0);
    assert_int_equal(hs.term, 7);
    assert_int_equal(txnlog_hard_state_write(st, LOG_DIR, &b), 0);
    assert_int_equal(txnlog_hard_state_read(st, LOG_DIR, &hs), 0);
    assert_int_equal(hs.term, RAFT_TERM_MAX);
    assert_int_equal(hs.vote, 0);
    storage_destroy(st);
}

static void test_hard_state_damage_is_refused(void **state)
{
    struct storage *st = storage_mem_new();
    struct raft_hard_state a = { .term = 2, .vote = 1, .commit_zxid = 5 }, hs;
    assert_int_equal(txnlog_hard_state_write(st, LOG_DIR, &a), 0);
    char path[64];
    snprintf(path, sizeof path, "%s/%s", LOG_DIR, TXNLOG_HARD_STATE_FILE);
    for (uint64_t off = 0; off < 28; off++) {
        flip_bit(st, path, off, (int)(off % 8));
        assert_int_equal(txnlog_hard_state_read(st, LOG_DIR, &hs), TXNLOG_ECORRUPT);
        flip_bit(st, path, off, (int)(off % 8));
    }
    assert_int_equal(txnlog_hard_state_read(st, LOG_DIR, &hs), 0);
    /* one byte more or less is not a state this code wrote */
    struct storage_file *f;
    assert_int_equal(storage_open(st, path, 0, &f), 0);
    assert_int_equal(storage_pwrite(f, "", 1, 28), 0);
    assert_int_equal(storage_datasync(f), 0);
    assert_int_equal(txnlog_hard_state_read(st, LOG_DIR, &hs), TXNLOG_ECORRUPT);
    assert_int_equal(storage_truncate(f, 27), 0);
    assert_int_equal(storage_datasync(f), 0);
    assert_int_equal(txnlog_hard_state_read(st, LOG_DIR, &hs), TXNLOG_ECORRUPT);
    assert_int_equal(storage_close(f), 0);
    storage_destroy(st);
}

/* ---- crashes and disk errors ---------------------------------------------------------- */

static uint32_t next_rand(uint32_t *s)
{
    *s = *s * 1103515245u + 12345u;
    return *s >> 16;
}

/* Random group commits, then a sync that fails and a crash at a random
 * point: every synced record survives, unsynced ones survive only as a
 * prefix of whole records, and the log keeps working afterwards. */
static void test_crash_keeps_synced_records(void **state)
{
    for (uint32_t seed = 1; seed <= 300; seed++) {
        uint32_t r = seed;
        struct storage *st = storage_mem_new();
        struct txnlog *log = log_open(st, 500 + next_rand(&r) % 500, 128 << (next_rand(&r) % 3));
        int64_t synced = next_rand(&r) % 25;
        if (synced > 0)
            log_write(log, 1, synced, 1 + (int)(next_rand(&r) % 6));
        int64_t extra = 1 + next_rand(&r) % 12;
        log_append_only(log, synced + 1, synced + extra);
        storage_mem_fail_sync(st, -EIO, 1);
        assert_int_equal(txnlog_sync(log), -EIO);
        size_t keep = next_rand(&r) % (size_t)(extra * 120 + 64);
        storage_mem_crash(st, keep, (seed & 1) != 0);
        txnlog_close(log);

        size_t n = replay_check(st, 0, 1, NULL);
        if (n < (size_t)synced || n > (size_t)(synced + extra))
            fail_msg("seed %u: %zu records, synced %lld, extra %lld", seed, n,
                     (long long)synced, (long long)extra);
        log = log_open(st, 700, 256);
        assert_int_equal(txnlog_last_zxid(log), (int64_t)n);
        log_write(log, (int64_t)n + 1, (int64_t)n + 3, 2);
        txnlog_close(log);
        assert_int_equal(replay_check(st, 0, 1, NULL), n + 3);
        storage_destroy(st);
    }
}

static void test_crash_after_sync_keeps_everything(void **state)
{
    struct storage *st = storage_mem_new();
    struct txnlog *log = log_open(st, 400, 256);
    log_write(log, 1, 30, 4);
    storage_mem_crash(st, 0, true); /* nothing pending: nothing lost */
    txnlog_close(log);
    assert_int_equal(replay_check(st, 0, 1, NULL), 30);
    storage_destroy(st);
}

static void test_enospc_then_space_returns(void **state)
{
    struct storage *st = storage_mem_new();
    struct txnlog *log = log_open(st, 1 << 20, 1024);
    log_write(log, 1, 5, 5);
    storage_mem_set_space(st, storage_mem_used(st)); /* the disk is full */
    log_append_only(log, 6, 25);                     /* more than the 1 KiB chunk */
    assert_int_equal(txnlog_sync(log), -ENOSPC);
    assert_int_equal(txnlog_durable_zxid(log), 5);
    assert_int_equal(txnlog_last_zxid(log), 25);
    assert_int_equal(txnlog_sync(log), -ENOSPC); /* still full: still refused */
    storage_mem_set_space(st, UINT64_MAX);
    assert_int_equal(txnlog_sync(log), 0);
    assert_int_equal(txnlog_durable_zxid(log), 25);
    log_write(log, 26, 27, 1);
    txnlog_close(log);
    assert_int_equal(replay_check(st, 0, 1, NULL), 27);
    storage_destroy(st);
}

/* ENOSPC while creating the next segment: the half-made segment goes away
 * and the retry rolls again. */
static void test_enospc_on_roll(void **state)
{
    struct storage *st = storage_mem_new();
    struct txnlog *log = log_open(st, 300, 512);
    log_write(log, 1, 6, 6);
    size_t before = seg_names(st).n;
    storage_mem_set_space(st, storage_mem_used(st) + 100);
    log_append_only(log, 7, 12);
    assert_int_equal(txnlog_sync(log), -ENOSPC);
    assert_int_equal(seg_names(st).n, before);
    storage_mem_crash(st, 0, false); /* crash now: exactly the synced records */
    txnlog_close(log);
    assert_int_equal(replay_check(st, 0, 1, NULL), 6);

    log = log_open(st, 300, 512);
    storage_mem_set_space(st, storage_mem_used(st) + 100);
    log_append_only(log, 7, 12);
    assert_int_equal(txnlog_sync(log), -ENOSPC);
    storage_mem_set_space(st, UINT64_MAX);
    assert_int_equal(txnlog_sync(log), 0);
    txnlog_close(log);
    assert_true(seg_names(st).n > before);
    assert_int_equal(replay_check(st, 0, 1, NULL), 12);
    storage_destroy(st);
}

static void test_eio_on_sync_then_retry(void **state)
{
    struct storage *st = storage_mem_new();
    struct txnlog *log = log_open(st, 500, 256);
    log_write(log, 1, 10, 3);
    log_append_only(log, 11, 20);
    storage_mem_fail_sync(st, -EIO, 2);
    assert_int_equal(txnlog_sync(log), -EIO);
    assert_int_equal(txnlog_sync(log), -EIO);
    assert_int_equal(txnlog_durable_zxid(log), 10);
    log_append_only(log, 21, 22); /* appends keep buffering meanwhile */
    assert_int_equal(txnlog_sync(log), 0);
    assert_int_equal(txnlog_durable_zxid(log), 22);
    storage_mem_crash(st, 0, false);
    txnlog_close(log);
    assert_int_equal(replay_check(st, 0, 1, NULL), 22);
    storage_destroy(st);
}

/* ---- end to end with the tree ---------------------------------------------------- */

struct tree_run {
    struct tree *t;
    struct txnlog *log;
    int64_t zxid;
};

static struct zk_str S(const char *s)
{
    return (struct zk_str){ s, (int32_t)strlen(s) };
}

static struct zk_acl world_all = { ZK_PERM_ALL, { { "world", 5 }, { "anyone", 6 } } };

static struct tree_req req_create(const char *path, const char *data, int32_t flags)
{
    struct tree_req r = { .type = ZK_OP_CREATE2 };
    r.u.create.path = S(path);
    r.u.create.data = data != NULL ? S(data) : ZK_STR_NULL;
    r.u.create.acl = (struct zk_aclvec){ 1, &world_all };
    r.u.create.flags = flags;
    r.u.create.ttl = -1;
    return r;
}

/* The sequencer's order: prep, log, sync, then apply. */
static void run_logged(struct tree_run *tr, int64_t session, const struct tree_req *r)
{
    static const struct tree_prep_cfg cfg = { .ttl_enabled = true };
    static const struct tree_auth auth = { .super = true };
    struct txn x = { .zxid = tr->zxid + 1, .session_id = session, .cxid = 3,
                     .time_ms = 1700000000000LL + tr->zxid };
    int err = tree_prep(tr->t, &cfg, r, &auth, &x);
    if (err == ZK_OK || x.nops > 0) {
        tr->zxid++;
        assert_int_equal(txnlog_append(tr->log, &x), 0);
        assert_int_equal(txnlog_sync(tr->log), 0);
        assert_int_equal(tree_apply(tr->t, &x, NULL, NULL, NULL), ZK_OK);
    }
    txn_free(&x);
    tree_prep_reset(tr->t);
}

static int apply_fn(void *arg, struct txn *x)
{
    assert_int_equal(tree_apply(arg, x, NULL, NULL, NULL), ZK_OK);
    return 0;
}

/* Txns that prep produced survive the log: replaying them into a new tree
 * gives the same digest, and replaying again changes nothing. */
static void test_prepped_txns_replay_to_same_tree(void **state)
{
    struct storage *st = storage_mem_new();
    struct tree_run tr = { .t = tree_new(), .log = log_open(st, 700, 512) };
    assert_non_null(tr.t);
    struct tree_req sess = { .type = ZK_OP_CREATESESSION, .u.session.timeout_ms = 30000 };
    run_logged(&tr, 0x42, &sess);
    struct tree_req r = req_create("/app", "cfg", ZK_PERSISTENT);
    run_logged(&tr, 0x42, &r);
    r = req_create("/app/lock-", NULL, ZK_EPHEMERAL_SEQUENTIAL);
    run_logged(&tr, 0x42, &r);
    r = req_create("/app/e", "", ZK_EPHEMERAL);
    run_logged(&tr, 0x42, &r);
    r = req_create("/box", "", ZK_CONTAINER);
    r.type = ZK_OP_CREATECONTAINER;
    run_logged(&tr, 0x42, &r);
    struct tree_req sub[3] = { req_create("/app/m", "1", ZK_PERSISTENT),
                               { .type = ZK_OP_SETDATA }, { .type = ZK_OP_CHECK } };
    sub[1].u.setdata = (struct zk_setdata_req){ S("/app/m"), S("22"), 0 };
    sub[2].u.del = (struct zk_path_version_req){ S("/app/m"), 1 };
    struct tree_req multi = { .type = ZK_OP_MULTI, .ops = sub, .nops = 3 };
    run_logged(&tr, 0x42, &multi);
    /* the same multi again fails (NODEEXISTS): logged as a multi of error ops */
    run_logged(&tr, 0x42, &multi);
    struct tree_req del = { .type = ZK_OP_DELETE, .u.del = { S("/app/m"), -1 } };
    run_logged(&tr, 0x42, &del);
    struct tree_req close = { .type = ZK_OP_CLOSESESSION };
    run_logged(&tr, 0x42, &close);
    txnlog_close(tr.log);
    assert_int_equal(tr.zxid, 9);

    struct tree *t2 = tree_new();
    assert_non_null(t2);
    struct txnlog_replay_stats s;
    assert_int_equal(txnlog_replay(st, LOG_DIR, 0, apply_fn, t2, &s), 0);
    assert_int_equal(s.records, 9);
    assert_int_equal(tree_last_zxid(t2), 9);
    assert_true(tree_digest(t2) == tree_digest(tr.t));
    assert_int_equal(txnlog_replay(st, LOG_DIR, 0, apply_fn, t2, &s), 0);
    assert_true(tree_digest(t2) == tree_digest(tr.t));
    tree_free(t2);
    tree_free(tr.t);
    storage_destroy(st);
}

/* A createSession's password goes through prep, the log and replay: the
 * session a replay builds has the password the txn recorded. */
static void test_session_password_survives_replay(void **state)
{
    struct storage *st = storage_mem_new();
    struct tree_run tr = { .t = tree_new(), .log = log_open(st, 1 << 20, 512) };
    assert_non_null(tr.t);
    struct tree_req sess = { .type = ZK_OP_CREATESESSION, .u.session.timeout_ms = 30000 };
    memcpy(sess.u.session.passwd, "0123456789abcdef", TREE_PASSWD_BYTES);
    run_logged(&tr, 0x42, &sess);
    txnlog_close(tr.log);
    struct tree *t2 = tree_new();
    assert_non_null(t2);
    assert_int_equal(txnlog_replay(st, LOG_DIR, 0, apply_fn, t2, NULL), 0);
    rcu_read_lock();
    struct tree_session *s = tree_session_find(t2, 0x42);
    assert_non_null(s);
    assert_true(s->passwd_known);
    assert_memory_equal(s->passwd, "0123456789abcdef", TREE_PASSWD_BYTES);
    rcu_read_unlock();
    tree_free(t2);
    tree_free(tr.t);
    storage_destroy(st);
}

/* Reads a whole fixture file (tests/fixtures) into *b. */
static void read_fixture(const char *rel, struct base_buf *b)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", LARCH_FIXTURES, rel);
    FILE *fp = fopen(path, "rb");
    if (fp == NULL)
        fail_msg("%s: cannot open", path);
    uint8_t buf[4096];
    size_t n;
    *b = (struct base_buf){ 0 };
    while ((n = fread(buf, 1, sizeof buf, fp)) > 0)
        assert_int_equal(base_buf_append(b, buf, n), 0);
    assert_int_equal(ferror(fp), 0);
    fclose(fp);
}

struct sessions_seen {
    int n;
    int sessions;       /* createSession ops seen */
    int sessions_known; /* of which with a password */
    int64_t last_zxid;
};

static int count_sessions_fn(void *arg, struct txn *x)
{
    struct sessions_seen *c = arg;
    c->n++;
    c->last_zxid = x->zxid;
    for (uint32_t i = 0; i < x->nops; i++) {
        if (x->ops[i].type != TXN_CREATE_SESSION)
            continue;
        c->sessions++;
        c->sessions_known += x->ops[i].passwd_known;
    }
    return 0;
}

/* Format 1 is format 2 without the password after a createSession's
 * fields: such bytes decode as version 1 (no known password) and not as
 * version 2, and version 2 bytes do not decode as version 1. A txn
 * without a known password cannot be written in version 2. */
static void test_codec_version_1_create_session(void **state)
{
    struct txn x, y, z;
    txn_shape(10, 10, &x);
    assert_int_equal(txn_op_encoded_bytes(&x.ops[0]), 9 + 4 + TREE_PASSWD_BYTES);
    struct base_buf b = { 0 };
    assert_int_equal(txn_encode(&b, &x), 0);
    size_t v1_len = b.len - TREE_PASSWD_BYTES;
    assert_int_equal(txn_decode_version(b.data, v1_len, 1, &y), 0);
    assert_false(y.ops[0].passwd_known);
    assert_int_equal(y.ops[0].timeout_ms, 30000);
    assert_int_equal(y.ops[0].passwd[0], 0);
    assert_int_equal(txn_decode(b.data, v1_len, &z), -EBADMSG);
    assert_int_equal(txn_decode_version(b.data, b.len, 1, &z), -EBADMSG);
    size_t before = b.len;
    assert_int_equal(txn_encode(&b, &y), -EINVAL);
    assert_int_equal(b.len, before);
    /* other ops read the same in both versions */
    struct txn c, d;
    txn_shape(0, 1, &c);
    b.len = 0;
    assert_int_equal(txn_encode(&b, &c), 0);
    assert_int_equal(txn_decode_version(b.data, b.len, 1, &d), 0);
    assert_txn_equal(&c, &d);
    txn_free(&c);
    txn_free(&d);
    txn_free(&x);
    txn_free(&y);
    base_buf_free(&b);
}

/* A log segment written by the code before passwords were recorded
 * (tests/fixtures/datadir-v1) replays: its two createSessions come without
 * a password. A writer opened on it goes on in a version-2 segment, and
 * replay reads both. */
static void test_version_1_segment_replays(void **state)
{
    struct storage *st = storage_mem_new();
    struct base_buf seg;
    read_fixture("datadir-v1/larch/log.1", &seg);
    assert_int_equal(base_get_be32(seg.data + 4), 1);
    write_file(st, LOG_DIR "/log.1", seg.data, seg.len);
    struct sessions_seen c = { 0 };
    assert_int_equal(txnlog_replay(st, LOG_DIR, 0, count_sessions_fn, &c, NULL), 0);
    assert_int_equal(c.n, 6);
    assert_int_equal(c.sessions, 2);
    assert_int_equal(c.sessions_known, 0);

    struct txnlog_opts o = { .db_id = 0, .prealloc_bytes = 512 }; /* the fixture's db id */
    struct txnlog *log = NULL;
    assert_int_equal(txnlog_open(st, LOG_DIR, &o, &log), 0);
    struct txn x;
    txn_shape(10, 7, &x);
    assert_int_equal(txnlog_append(log, &x), 0);
    assert_int_equal(txnlog_sync(log), 0);
    txn_free(&x);
    txnlog_close(log);
    struct storage_file *f;
    uint8_t h[16];
    size_t got = 0;
    assert_int_equal(storage_open(st, LOG_DIR "/log.7", 0, &f), 0);
    assert_int_equal(storage_pread(f, h, sizeof h, 0, &got), 0);
    assert_int_equal(storage_close(f), 0);
    assert_int_equal(base_get_be32(h + 4), TXNLOG_VERSION);
    c = (struct sessions_seen){ 0 };
    assert_int_equal(txnlog_replay(st, LOG_DIR, 0, count_sessions_fn, &c, NULL), 0);
    assert_int_equal(c.n, 7);
    assert_int_equal(c.sessions, 3);
    assert_int_equal(c.sessions_known, 1);
    assert_int_equal(c.last_zxid, 7);
    base_buf_free(&seg);
    storage_destroy(st);
}

/* A create whose ACL id is 70,000 bytes (a digest id as long as a client
 * cares to send) goes through prep, the log and replay: it used to be
 * refused by txn_encode, which held every later write. */
static void test_long_acl_id_logs_and_replays(void **state)
{
    struct storage *st = storage_mem_new();
    struct tree_run tr = { .t = tree_new(), .log = log_open(st, 1 << 20, 4096) };
    assert_non_null(tr.t);
    char *id = long_digest_id();
    struct zk_acl item = { ZK_PERM_ALL, { zk_str_c("digest"), zk_str_c(id) } };
    struct tree_req r = req_create("/secret", "s", ZK_PERSISTENT);
    r.u.create.acl = (struct zk_aclvec){ 1, &item };
    run_logged(&tr, 0x42, &r);
    assert_int_equal(tr.zxid, 1);
    txnlog_close(tr.log);

    struct tree *t2 = tree_new();
    assert_non_null(t2);
    struct txnlog_replay_stats s;
    assert_int_equal(txnlog_replay(st, LOG_DIR, 0, apply_fn, t2, &s), 0);
    assert_int_equal(s.records, 1);
    assert_true(tree_digest(t2) == tree_digest(tr.t));
    struct tree_view v;
    rcu_read_lock();
    assert_int_equal(tree_get(t2, "/secret", 7, &v), ZK_OK);
    assert_string_equal(v.acl->items[0].id, id);
    rcu_read_unlock();
    free(id);
    tree_free(t2);
    tree_free(tr.t);
    storage_destroy(st);
}

/* ---- POSIX storage ------------------------------------------------------------------ */

struct rm_ctx {
    struct storage *st;
    const char *dir;
};

static int rm_fn(void *arg, const char *name)
{
    struct rm_ctx *c = arg;
    char path[256];
    snprintf(path, sizeof path, "%s/%s", c->dir, name);
    return storage_unlink(c->st, path);
}

static int count_fn(void *arg, const char *name)
{
    (*(size_t *)arg)++;
    return 0;
}

static int count_fn_collect(void *arg, struct txn *x)
{
    assert_is_generated(x);
    (*(int64_t *)arg)++;
    return 0;
}

static void test_posix_storage_round_trip(void **state)
{
    char dir[] = "/tmp/txnlog-test-XXXXXX";
    assert_non_null(mkdtemp(dir));
    struct storage *st = storage_posix_new();
    assert_non_null(st);
    struct txnlog_opts o = { .db_id = 9, .segment_bytes_max = 2048, .prealloc_bytes = 4096 };
    struct txnlog *log = NULL;
    assert_int_equal(txnlog_open(st, dir, &o, &log), 0);
    for (int64_t z = 1; z <= 40; z++) {
        struct txn x;
        txn_shape((int)z, z, &x);
        assert_int_equal(txnlog_append(log, &x), 0);
        txn_free(&x);
        if (z % 5 == 0)
            assert_int_equal(txnlog_sync(log), 0);
    }
    txnlog_close(log);
    size_t files = 0;
    assert_int_equal(storage_list(st, dir, count_fn, &files), 0);
    assert_true(files >= 2);
    char path[256];
    snprintf(path, sizeof path, "%s/log.1", dir);
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(sb.st_size % 4096, 0);

    int64_t n = 0;
    struct txnlog_replay_stats s;
    assert_int_equal(txnlog_replay(st, dir, 0, count_fn_collect, &n, &s), 0);
    assert_int_equal(n, 40);
    assert_int_equal(s.last_zxid, 40);
    assert_int_equal(s.torn_bytes, 0);
    assert_true(txnlog_purge(st, dir, 40) >= 1);
    assert_int_equal(txnlog_open(st, dir, &o, &log), 0);
    assert_int_equal(txnlog_last_zxid(log), 40);
    txnlog_close(log);

    struct rm_ctx rc = { st, dir };
    assert_int_equal(storage_list(st, dir, rm_fn, &rc), 0);
    assert_int_equal(rmdir(dir), 0);
    storage_destroy(st);
}

/* mkdirs is mkdir -p; STORAGE_PRIVATE makes a file owner-only, an
 * existing one too, before anything is written to it. */
static void test_posix_mkdirs_and_private_files(void **state)
{
    char dir[] = "/tmp/storage-test-XXXXXX";
    assert_non_null(mkdtemp(dir));
    struct storage *st = storage_posix_new();
    assert_non_null(st);
    char deep[256], file[300], mid[256];
    snprintf(mid, sizeof mid, "%s/a", dir);
    snprintf(deep, sizeof deep, "%s/a/b", dir);
    snprintf(file, sizeof file, "%s/secret", deep);
    assert_int_equal(storage_mkdirs(st, deep), 0);
    assert_int_equal(storage_mkdirs(st, deep), 0); /* exists: fine */
    struct storage_file *f;
    assert_int_equal(storage_open(st, file, STORAGE_CREATE, &f), 0);
    assert_int_equal(storage_close(f), 0);
    assert_int_equal(chmod(file, 0644), 0); /* a leftover anyone may read */
    struct stat sb;
    assert_int_equal(storage_open(st, file, STORAGE_CREATE | STORAGE_PRIVATE, &f), 0);
    assert_int_equal(stat(file, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0600);
    assert_int_equal(storage_close(f), 0);
    assert_int_equal(unlink(file), 0);
    assert_int_equal(rmdir(deep), 0);
    assert_int_equal(rmdir(mid), 0);
    assert_int_equal(rmdir(dir), 0);
    storage_destroy(st);
}

/* ---- the ensemble's records: no-ops and pre-encoded entries ------------------------ */

/* A new leader's no-op is a txn with no ops; a no-op with ops, or a no-op
 * op inside another txn, is not something any writer produces. */
static void test_noop_txn_round_trips_and_stays_empty(void **state)
{
    struct txn x, y;
    txn_init(&x, ((int64_t)3 << 32), TXN_NOOP, 0);
    struct base_buf b = { 0 };
    assert_int_equal(txn_encode(&b, &x), 0);
    assert_int_equal(b.len, TXNLOG_TXN_HEADER_BYTES);
    assert_int_equal(txn_decode(b.data, b.len, &y), 0);
    assert_txn_equal(&x, &y);
    txn_free(&y);
    txn_free(&x);
    b.len = 0;
    txn_init(&x, 9, TXN_NOOP, 1);
    x.ops[0] = op_path(TXN_DELETE, "/a", 0, 1);
    assert_int_equal(txn_encode(&b, &x), 0);
    assert_int_equal(txn_decode(b.data, b.len, &y), -EBADMSG);
    txn_free(&x);
    b.len = 0;
    txn_init(&x, 10, TXN_MULTI, 1);
    x.ops[0] = (struct txn_op){ .type = TXN_NOOP, .client_type = TXN_NOOP, .data_len = -1 };
    assert_int_equal(txn_encode(&b, &x), 0);
    assert_int_equal(txn_decode(b.data, b.len, &y), -EBADMSG);
    txn_free(&x);
    base_buf_free(&b);
}

/* A follower logs the leader's encodings as they are: the log must read
 * back exactly what txnlog_append would have written, no-ops included. */
static void test_append_encoded_equals_append(void **state)
{
    struct storage *st = storage_mem_new();
    assert_non_null(st);
    struct txnlog *log = log_open(st, 1 << 20, 1 << 16);
    struct base_buf b = { 0 };
    struct txn x;
    txn_init(&x, 1, TXN_NOOP, 0);
    assert_int_equal(txn_encode(&b, &x), 0);
    assert_int_equal(txnlog_append_encoded(log, b.data, b.len), 0);
    txn_free(&x);
    for (int64_t z = 2; z <= 2 * SHAPES; z++) {
        b.len = 0;
        txn_shape((int)z, z, &x);
        assert_int_equal(txn_encode(&b, &x), 0);
        assert_int_equal(txnlog_append_encoded(log, b.data, b.len), 0);
        txn_free(&x);
    }
    /* an old zxid, a short record: refused, nothing buffered */
    assert_int_equal(txnlog_append_encoded(log, b.data, b.len), TXNLOG_EORDER);
    assert_int_equal(txnlog_append_encoded(log, b.data, TXNLOG_TXN_HEADER_BYTES - 1), -EINVAL);
    assert_int_equal(txnlog_sync(log), 0);
    assert_true(txnlog_durable_zxid(log) == 2 * SHAPES);
    txnlog_close(log);
    base_buf_free(&b);

    struct collect c = { 0 };
    struct txnlog_replay_stats stats;
    assert_int_equal(txnlog_replay(st, LOG_DIR, 0, collect_fn, &c, &stats), 0);
    assert_int_equal(c.n, 2 * SHAPES);
    assert_int_equal(c.items[0].type, TXN_NOOP);
    assert_int_equal(c.items[0].nops, 0);
    for (size_t i = 1; i < c.n; i++) {
        txn_shape((int)(i + 1), (int64_t)(i + 1), &x);
        assert_txn_equal(&x, &c.items[i]);
        txn_free(&x);
    }
    collect_free(&c);
    storage_destroy(st);
}

/* ---- membership changes: CONFIG entries and the file kept with a snapshot ----------- */

/* The entries a member's log holds, in zxid order: a leader's no-op, then
 * data and membership changes, a new term's no-op, and so on. */
static const uint8_t entry_types[] = {
    RAFT_ENTRY_NOOP,   RAFT_ENTRY_DATA, RAFT_ENTRY_CONFIG, RAFT_ENTRY_DATA, RAFT_ENTRY_DATA,
    RAFT_ENTRY_CONFIG, RAFT_ENTRY_NOOP, RAFT_ENTRY_CONFIG, RAFT_ENTRY_DATA, RAFT_ENTRY_CONFIG,
};
#define N_ENTRIES (sizeof entry_types / sizeof entry_types[0])

/* Entry i of entry_types: its zxid (term 1, then term 2 from the second
 * no-op) and bytes (data: txn_encode of a shape; config: a membership).
 * The bytes are the caller's (base_buf_free). */
static struct raft_entry entry_at(size_t i, struct base_buf *b)
{
    uint32_t term = i < 6 ? 1 : 2, counter = (uint32_t)(i < 6 ? i : i - 6);
    struct raft_entry e = { .zxid = raft_make_zxid(term, counter), .type = entry_types[i] };
    *b = (struct base_buf){ 0 };
    if (e.type == RAFT_ENTRY_DATA) {
        struct txn x;
        txn_shape((int)i % SHAPE_CONFIG, e.zxid, &x);
        assert_int_equal(txn_encode(b, &x), 0);
        txn_free(&x);
    } else if (e.type == RAFT_ENTRY_CONFIG) {
        assert_int_equal(base_buf_reserve(b, RAFT_CONFIG_BYTES_MAX), 0);
        b->len = config_bytes((int)i, b->data);
    }
    e.data = b->data;
    e.len = b->len;
    return e;
}

/* Every entry type goes in through txnlog_append_entry (across segment
 * rolls) and comes back out of replay as the entry it was: same type,
 * zxid and bytes, in order. */
static void test_append_entry_round_trips_every_type(void **state)
{
    struct storage *st = storage_mem_new();
    struct txnlog *log = log_open(st, 300, 256);
    for (size_t i = 0; i < N_ENTRIES; i++) {
        struct base_buf b;
        struct raft_entry e = entry_at(i, &b);
        assert_int_equal(txnlog_append_entry(log, &e), 0);
        assert_true(txnlog_last_zxid(log) == e.zxid);
        base_buf_free(&b);
        if (i % 3 == 2)
            assert_int_equal(txnlog_sync(log), 0);
    }
    assert_int_equal(txnlog_sync(log), 0);
    txnlog_close(log);
    assert_true(seg_names(st).n > 1);

    struct collect c = { 0 };
    assert_int_equal(txnlog_replay(st, LOG_DIR, 0, collect_fn, &c, NULL), 0);
    assert_int_equal(c.n, N_ENTRIES);
    for (size_t i = 0; i < N_ENTRIES; i++) {
        struct base_buf want, got = { 0 };
        struct raft_entry e = entry_at(i, &want);
        const struct txn *x = &c.items[i];
        assert_true(x->zxid == e.zxid);
        assert_int_equal(txnlog_entry_type(x), e.type);
        if (e.type == RAFT_ENTRY_NOOP) {
            assert_int_equal(x->nops, 0);
        } else if (e.type == RAFT_ENTRY_CONFIG) {
            assert_int_equal(x->ops[0].data_len, e.len);
            assert_memory_equal(x->ops[0].data, e.data, e.len);
        } else {
            assert_int_equal(txn_encode(&got, x), 0);
            assert_int_equal(got.len, e.len);
            assert_memory_equal(got.data, e.data, e.len);
        }
        base_buf_free(&want);
        base_buf_free(&got);
    }
    collect_free(&c);
    storage_destroy(st);
}

/* An entry that would come back as something else (or not at all) is
 * refused before anything is buffered. */
static void test_append_entry_refuses_what_would_not_come_back(void **state)
{
    struct storage *st = storage_mem_new();
    struct txnlog *log = log_open(st, 1 << 20, 1 << 16);
    struct base_buf b;
    struct raft_entry e = entry_at(2, &b); /* a membership at 1:2 */
    uint8_t one = 0;
    struct raft_entry bad = { .zxid = 5, .type = RAFT_ENTRY_NOOP, .data = &one, .len = 1 };
    assert_int_equal(txnlog_append_entry(log, &bad), -EINVAL);
    bad = e;
    bad.len = 0;
    assert_int_equal(txnlog_append_entry(log, &bad), -EINVAL);
    bad = e;
    b.data[0] = 9; /* not a raft_config version */
    assert_int_equal(txnlog_append_entry(log, &bad), -EINVAL);
    b.data[0] = 1;
    bad.type = 7;
    assert_int_equal(txnlog_append_entry(log, &bad), -EINVAL);
    /* data entries: their zxid is their own, and they are no no-op or membership */
    struct base_buf enc = { 0 };
    struct txn x;
    txn_shape(SHAPE_CONFIG, 9, &x);
    assert_int_equal(txn_encode(&enc, &x), 0);
    txn_free(&x);
    bad = (struct raft_entry){ .zxid = 9, .type = RAFT_ENTRY_DATA, .data = enc.data, .len = enc.len };
    assert_int_equal(txnlog_append_entry(log, &bad), -EINVAL);
    enc.len = 0;
    txn_init(&x, 9, TXN_NOOP, 0);
    assert_int_equal(txn_encode(&enc, &x), 0);
    txn_free(&x);
    bad.data = enc.data;
    bad.len = enc.len;
    assert_int_equal(txnlog_append_entry(log, &bad), -EINVAL);
    enc.len = 0;
    txn_shape(0, 9, &x);
    assert_int_equal(txn_encode(&enc, &x), 0);
    txn_free(&x);
    bad.zxid = 10;
    bad.data = enc.data;
    bad.len = enc.len;
    assert_int_equal(txnlog_append_entry(log, &bad), -EINVAL);
    bad.len = TXNLOG_TXN_HEADER_BYTES - 1;
    assert_int_equal(txnlog_append_entry(log, &bad), -EINVAL);
    assert_int_equal(txnlog_last_zxid(log), 0);
    /* the good one goes in once; again at its zxid is out of order */
    assert_int_equal(txnlog_append_entry(log, &e), 0);
    assert_int_equal(txnlog_append_entry(log, &e), TXNLOG_EORDER);
    assert_int_equal(txnlog_sync(log), 0);
    txnlog_close(log);
    size_t n = 0;
    assert_int_equal(replay_count(st, &n, NULL), 0);
    assert_int_equal(n, 1);
    base_buf_free(&enc);
    base_buf_free(&b);
    storage_destroy(st);
}

/* A TXN_CONFIG txn is one op of nothing but a membership, and no other
 * txn holds such an op: encode and decode both hold to it, and a segment
 * older than version 3 cannot hold one. */
static void test_config_txn_shape_and_version(void **state)
{
    struct txn x, y;
    struct base_buf b = { 0 };
    txn_shape(SHAPE_CONFIG, 7, &x);
    assert_int_equal(txn_encode(&b, &x), 0);
    assert_int_equal(txn_decode_version(b.data, b.len, TXNLOG_VERSION_CONFIG, &y), 0);
    txn_free(&y);
    assert_int_equal(txn_decode_version(b.data, b.len, 2, &y), -EBADMSG);
    assert_null(y.ops);
    assert_int_equal(txn_decode_version(b.data, b.len, 1, &y), -EBADMSG);
    /* a membership that does not decode, or an op inside a multi */
    b.data[TXNLOG_TXN_HEADER_BYTES + 9 + 4] = 9;
    assert_int_equal(txn_decode(b.data, b.len, &y), -EBADMSG);
    b.data[TXNLOG_TXN_HEADER_BYTES + 9 + 4] = 1;
    assert_int_equal(txn_decode(b.data, b.len, &y), 0);
    txn_free(&y);
    base_put_be32(b.data + 28, (uint32_t)TXN_MULTI);
    assert_int_equal(txn_decode(b.data, b.len, &y), -EBADMSG);
    b.len = 0;
    x.type = TXN_MULTI;
    assert_int_equal(txn_encode(&b, &x), -EINVAL);
    x.type = TXN_CONFIG;
    x.ops[0].path = xstrdup("/zookeeper/config"); /* a field a membership has not */
    assert_int_equal(txn_encode(&b, &x), -EINVAL);
    free(x.ops[0].path);
    x.ops[0].path = NULL;
    x.ops[0].data[0] = 2;
    assert_int_equal(txn_encode(&b, &x), -EINVAL);
    assert_int_equal(b.len, 0);
    txn_free(&x);
    txn_init(&x, 8, TXN_CONFIG, 0);
    assert_int_equal(txn_encode(&b, &x), -EINVAL);
    txn_free(&x);
    base_buf_free(&b);
}

/* Sets the version in the header of segment log.<name>. */
static void set_segment_version(struct storage *st, int64_t name, uint32_t version)
{
    char path[64];
    seg_name(name, path, sizeof path);
    struct storage_file *f;
    uint8_t v[4];
    base_put_be32(v, version);
    assert_int_equal(storage_open(st, path, 0, &f), 0);
    assert_int_equal(storage_pwrite(f, v, sizeof v, 4), 0);
    assert_int_equal(storage_datasync(f), 0);
    assert_int_equal(storage_close(f), 0);
}

/* Version 3 only added TXN_CONFIG: a version-2 segment (before it) reads
 * as it did, and one that claims to hold a membership is refused, with
 * nothing deleted. */
static void test_version_2_segment_reads_and_holds_no_config(void **state)
{
    struct storage *st = one_segment_log(SHAPE_CONFIG - 1);
    set_segment_version(st, 1, 2);
    assert_int_equal(replay_check(st, 0, 1, NULL), SHAPE_CONFIG - 1);
    struct txnlog *log = log_open(st, 1 << 20, 1 << 16); /* goes on in version 3 */
    log_write(log, SHAPE_CONFIG, SHAPE_CONFIG + 1, 2);
    txnlog_close(log);
    assert_int_equal(replay_check(st, 0, 1, NULL), SHAPE_CONFIG + 1);
    storage_destroy(st);

    st = one_segment_log(SHAPE_CONFIG + 1);
    set_segment_version(st, 1, 2);
    size_t n = 0;
    assert_int_equal(replay_count(st, &n, NULL), TXNLOG_ECORRUPT);
    char path[64];
    seg_name(1, path, sizeof path);
    assert_true(file_size(st, path) > 0);
    set_segment_version(st, 1, TXNLOG_VERSION);
    assert_int_equal(replay_check(st, 0, 1, NULL), SHAPE_CONFIG + 1);
    storage_destroy(st);
}

/* The membership kept with a snapshot: written whole, read back as it
 * was; any damage (a flipped bit anywhere, a short file) is
 * TXNLOG_ECORRUPT, never a different membership. */
static void test_config_file_round_trip_and_damage(void **state)
{
    struct storage *st = storage_mem_new();
    struct raft_config c, got;
    test_config(1, &c);
    const char *path = "/snap/snapshot.100000005.config";
    int64_t zxid = 0;
    assert_int_equal(txnlog_config_file_read(st, path, &zxid, &got), -ENOENT);
    assert_int_equal(txnlog_config_file_write(st, "/snap", path, 0x100000005LL, &c), 0);
    storage_mem_crash(st, 0, true); /* durable once written */
    assert_int_equal(txnlog_config_file_read(st, path, &zxid, &got), 0);
    assert_true(zxid == 0x100000005LL);
    uint8_t a[RAFT_CONFIG_BYTES_MAX], b[RAFT_CONFIG_BYTES_MAX];
    size_t alen = raft_config_encode(&c, a), blen = raft_config_encode(&got, b);
    assert_int_equal(alen, blen);
    assert_memory_equal(a, b, alen);
    assert_int_equal(got.n_old, 3);

    uint8_t file[TXNLOG_CONFIG_FILE_BYTES_MAX];
    size_t len = txnlog_config_file_encode(0x100000005LL, &c, file);
    assert_int_equal(file_size(st, path), len);
    for (size_t i = 0; i < len; i++) {
        for (int bit = 0; bit < 8; bit += 3) {
            file[i] ^= (uint8_t)(1u << bit);
            assert_int_equal(txnlog_config_file_decode(file, len, &zxid, &got), TXNLOG_ECORRUPT);
            file[i] ^= (uint8_t)(1u << bit);
        }
        assert_int_equal(txnlog_config_file_decode(file, i, &zxid, &got), TXNLOG_ECORRUPT);
    }
    assert_int_equal(txnlog_config_file_decode(file, len, &zxid, &got), 0);
    storage_destroy(st);
}

int main(void)
{
    rcu_register_thread();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_codec_round_trip_every_type),
        cmocka_unit_test(test_noop_txn_round_trips_and_stays_empty),
        cmocka_unit_test(test_append_encoded_equals_append),
        cmocka_unit_test(test_append_entry_round_trips_every_type),
        cmocka_unit_test(test_append_entry_refuses_what_would_not_come_back),
        cmocka_unit_test(test_config_txn_shape_and_version),
        cmocka_unit_test(test_version_2_segment_reads_and_holds_no_config),
        cmocka_unit_test(test_config_file_round_trip_and_damage),
        cmocka_unit_test(test_codec_rejects_truncated_and_trailing),
        cmocka_unit_test(test_codec_rejects_absurd_lengths),
        cmocka_unit_test(test_codec_long_paths),
        cmocka_unit_test(test_codec_long_acl_ids),
        cmocka_unit_test(test_codec_ops_bound_is_exact),
        cmocka_unit_test(test_codec_version_1_create_session),
        cmocka_unit_test(test_bit_flip_mid_log_is_refused),
        cmocka_unit_test(test_bit_flip_in_last_record_is_torn_tail),
        cmocka_unit_test(test_torn_tail_every_offset),
        cmocka_unit_test(test_torn_tail_every_offset_garbage),
        cmocka_unit_test(test_torn_config_record_every_offset),
        cmocka_unit_test(test_garbage_in_non_last_segment_is_refused),
        cmocka_unit_test(test_writer_open_refuses_corrupt_last_segment),
        cmocka_unit_test(test_zxid_order_enforced),
        cmocka_unit_test(test_log_reaches_int64_max),
        cmocka_unit_test(test_damage_before_close_session_is_refused),
        cmocka_unit_test(test_damage_before_zero_data_is_refused),
        cmocka_unit_test(test_bad_header_over_zero_ending_record_is_refused),
        cmocka_unit_test(test_open_drops_torn_header_segment),
        cmocka_unit_test(test_open_refuses_before_dropping_torn_segment),
        cmocka_unit_test(test_empty_last_segment_is_removed),
        cmocka_unit_test(test_segments_roll_and_replay_across),
        cmocka_unit_test(test_replay_trims_preallocated_zeros),
        cmocka_unit_test(test_purge_keeps_what_it_must),
        cmocka_unit_test(test_truncate_after_then_new_term),
        cmocka_unit_test(test_truncate_after_every_zxid_survives_crash),
        cmocka_unit_test(test_truncate_after_buffered_only),
        cmocka_unit_test(test_truncate_after_failure_stops_the_writer),
        cmocka_unit_test(test_hard_state_round_trip_and_crash),
        cmocka_unit_test(test_hard_state_damage_is_refused),
        cmocka_unit_test(test_crash_keeps_synced_records),
        cmocka_unit_test(test_crash_after_sync_keeps_everything),
        cmocka_unit_test(test_enospc_then_space_returns),
        cmocka_unit_test(test_enospc_on_roll),
        cmocka_unit_test(test_eio_on_sync_then_retry),
        cmocka_unit_test(test_prepped_txns_replay_to_same_tree),
        cmocka_unit_test(test_session_password_survives_replay),
        cmocka_unit_test(test_version_1_segment_replays),
        cmocka_unit_test(test_long_acl_id_logs_and_replays),
        cmocka_unit_test(test_posix_storage_round_trip),
        cmocka_unit_test(test_posix_mkdirs_and_private_files),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    rcu_unregister_thread();
    return failed;
}
