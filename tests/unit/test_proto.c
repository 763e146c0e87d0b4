/*
 * test_proto — unit tests for the jute codec (proto/proto.c).
 *
 * Every record is round-tripped field by field; every proper prefix of every
 * encoded record must fail to decode without leaking (inputs are copied into
 * exact-size heap blocks so ASan catches any over-read); hostile lengths and
 * counts are rejected; and hand-written byte sequences pin the wire layout so
 * a bug shared by encoder and decoder cannot pass.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "proto/proto.h"

#define STR_INIT(lit) { (lit), (int32_t)(sizeof(lit) - 1) }
#define S(lit) ((struct zk_str)STR_INIT(lit))

/* UTF-8 path: "/café/日本/🌲" as raw bytes. */
#define UNI_PATH "/caf\xc3\xa9/\xe6\x97\xa5\xe6\x9c\xac/\xf0\x9f\x8c\xb2"
/* Binary payload with NULs and high bytes. */
#define BIN_DATA "\x00\xff\x10\x00\x7f"

/* ---- helpers ----------------------------------------------------------- */

/* Provided by the ASan runtime; absent (NULL) in plain builds. */
extern size_t __sanitizer_get_current_allocated_bytes(void) __attribute__((weak));

/* Bytes the program currently has allocated, for before/after leak checks
 * around a decoder. Exact only under ASan (how these tests are meant to
 * run); glibc's mallinfo2 counts chunks parked in the tcache as in use, so
 * plain builds return 0 and the equality checks pass trivially there. */
static size_t heap_in_use(void)
{
    if (__sanitizer_get_current_allocated_bytes)
        return __sanitizer_get_current_allocated_bytes();
    return 0;
}

/* Exact-size heap copy so that reading one byte too far trips ASan.
 * A zero-length input is passed as a NULL frame. */
static uint8_t *dup_exact(const uint8_t *p, size_t n)
{
    if (n == 0)
        return NULL;
    uint8_t *c = malloc(n);
    assert_non_null(c);
    memcpy(c, p, n);
    return c;
}

/* Checks w encoded cleanly, then points r at an exact-size copy of it. */
static uint8_t *start_read(struct base_rd *r, const struct zk_wbuf *w)
{
    assert_false(w->err);
    uint8_t *copy = dup_exact(w->p, w->len);
    base_rd_init(r, copy, w->len);
    return copy;
}

/* Checks the decoder consumed exactly what was encoded, then frees both. */
static void finish_read(struct base_rd *r, uint8_t *copy, struct zk_wbuf *w)
{
    assert_false(r->err);
    assert_int_equal(r->pos, w->len);
    assert_int_equal(base_rd_left(r), 0);
    free(copy);
    zk_wbuf_free(w);
}

static void assert_str_is(struct zk_str got, struct zk_str want)
{
    if (want.len < 0) {
        assert_int_equal(got.len, -1);
        assert_null(got.ptr);
        return;
    }
    assert_int_equal(got.len, want.len);
    assert_non_null(got.ptr);
    if (want.len > 0)
        assert_memory_equal(got.ptr, want.ptr, (size_t)want.len);
    assert_true(zk_str_eq(got, want));
}

static void assert_strvec_is(const struct zk_strvec *got, const struct zk_strvec *want)
{
    assert_int_equal(got->count, want->count);
    if (want->count <= 0) {
        assert_null(got->items);
        return;
    }
    for (int32_t i = 0; i < want->count; i++)
        assert_str_is(got->items[i], want->items[i]);
}

static void assert_aclvec_is(const struct zk_aclvec *got, const struct zk_aclvec *want)
{
    assert_int_equal(got->count, want->count);
    if (want->count <= 0) {
        assert_null(got->items);
        return;
    }
    for (int32_t i = 0; i < want->count; i++) {
        assert_int_equal(got->items[i].perms, want->items[i].perms);
        assert_str_is(got->items[i].id.scheme, want->items[i].id.scheme);
        assert_str_is(got->items[i].id.id, want->items[i].id.id);
    }
}

/* ---- sample records ---------------------------------------------------- */

static struct zk_str sample_paths[] = {
    STR_INIT("/a"), STR_INIT(""), STR_INIT(UNI_PATH), { NULL, -1 }, STR_INIT("/a/b/c"),
};
static struct zk_str sample_paths2[] = { STR_INIT("/p"), STR_INIT("/q/r") };
static struct zk_acl sample_acls[] = {
    { ZK_PERM_ALL, { STR_INIT("world"), STR_INIT("anyone") } },
    { ZK_PERM_READ | ZK_PERM_ADMIN, { STR_INIT("digest"), STR_INIT("u:h4sh=") } },
    { 0, { STR_INIT("ip"), STR_INIT("") } },
};

static struct zk_strvec sample_strvec(void)
{
    return (struct zk_strvec){ 5, sample_paths };
}

static struct zk_aclvec sample_aclvec(void)
{
    return (struct zk_aclvec){ 3, sample_acls };
}

static struct zk_stat sample_stat(void)
{
    return (struct zk_stat){
        .czxid = 0x100000001LL, .mzxid = INT64_MAX, .ctime = 1700000000123LL,
        .mtime = -1, .version = 7, .cversion = INT32_MIN, .aversion = -1,
        .ephemeral_owner = (int64_t)0x8000000000000001ULL, .data_length = 5,
        .num_children = 1000000, .pzxid = 0x0102030405060708LL,
    };
}

static struct zk_connect_req sample_connect_req(bool has_ro)
{
    return (struct zk_connect_req){
        .protocol_version = 0, .last_zxid_seen = 0x200000005LL, .timeout_ms = 30000,
        .session_id = 0x1122334455667788LL, .passwd = S("0123456789abcdef"),
        .read_only = has_ro, .has_read_only = has_ro,
    };
}

static struct zk_connect_resp sample_connect_resp(bool has_ro)
{
    return (struct zk_connect_resp){
        .protocol_version = 0, .timeout_ms = 4000, .session_id = -5,
        .passwd = S(BIN_DATA), .read_only = has_ro, .has_read_only = has_ro,
    };
}

static struct zk_create_req sample_create_req(void)
{
    return (struct zk_create_req){
        .path = S(UNI_PATH), .data = S(BIN_DATA), .acl = sample_aclvec(),
        .flags = ZK_PERSISTENT_SEQUENTIAL_WITH_TTL, .ttl = 86400000LL,
    };
}

static struct zk_setwatches_req sample_setwatches_req(void)
{
    return (struct zk_setwatches_req){
        .relative_zxid = 0x300000009LL,
        .data = sample_strvec(),
        .exist = { 0, NULL },
        .child = { 2, sample_paths2 },
        .persistent = { 1, sample_paths2 },
        .persistent_recursive = { 2, sample_paths2 },
    };
}

/* ---- round trips ------------------------------------------------------- */

static void test_roundtrip_primitives(void **state)
{
    struct zk_wbuf w;
    zk_wbuf_init(&w);
    zk_put_i32(&w, INT32_MIN);
    zk_put_i32(&w, -1);
    zk_put_i64(&w, INT64_MIN);
    zk_put_i64(&w, 0x0102030405060708LL);
    zk_put_bool(&w, true);
    zk_put_bool(&w, false);
    zk_put_str(&w, ZK_STR_NULL);
    zk_put_str(&w, S(""));
    zk_put_bytes(&w, BIN_DATA, 5);
    zk_put_raw(&w, "xyz", 3);

    struct base_rd r;
    uint8_t *copy = start_read(&r, &w);
    int32_t i32;
    int64_t i64;
    bool b;
    struct zk_str s;
    assert_true(zk_get_i32(&r, &i32));
    assert_int_equal(i32, INT32_MIN);
    assert_true(zk_get_i32(&r, &i32));
    assert_int_equal(i32, -1);
    assert_true(zk_get_i64(&r, &i64));
    assert_true(i64 == INT64_MIN);
    assert_true(zk_get_i64(&r, &i64));
    assert_true(i64 == 0x0102030405060708LL);
    assert_true(zk_get_bool(&r, &b));
    assert_true(b);
    assert_true(zk_get_bool(&r, &b));
    assert_false(b);
    assert_true(zk_get_str(&r, &s));
    assert_str_is(s, ZK_STR_NULL);
    assert_true(zk_get_str(&r, &s));
    assert_str_is(s, S(""));
    assert_true(zk_get_str(&r, &s));
    assert_str_is(s, S(BIN_DATA));
    assert_int_equal(base_rd_left(&r), 3);
    const uint8_t *raw = base_rd_take(&r, 3);
    assert_non_null(raw);
    assert_memory_equal(raw, "xyz", 3);
    finish_read(&r, copy, &w);
}

static void test_roundtrip_strvec(void **state)
{
    struct zk_strvec vecs[] = { sample_strvec(), { 0, NULL }, { -1, NULL } };
    for (size_t i = 0; i < sizeof vecs / sizeof vecs[0]; i++) {
        struct zk_wbuf w;
        zk_wbuf_init(&w);
        zk_put_strvec(&w, &vecs[i]);
        struct base_rd r;
        uint8_t *copy = start_read(&r, &w);
        struct zk_strvec out;
        assert_true(zk_get_strvec(&r, &out));
        assert_strvec_is(&out, &vecs[i]);
        zk_strvec_free(&out);
        finish_read(&r, copy, &w);
    }
}

static void test_roundtrip_stat_id_aclvec(void **state)
{
    struct zk_wbuf w;
    zk_wbuf_init(&w);
    struct zk_stat st = sample_stat();
    struct zk_id id = { S("sasl"), S(UNI_PATH) };
    struct zk_id null_id = { ZK_STR_NULL, ZK_STR_NULL };
    struct zk_aclvec acls[] = { sample_aclvec(), { 0, NULL }, { -1, NULL } };
    zk_put_stat(&w, &st);
    zk_put_id(&w, &id);
    zk_put_id(&w, &null_id);
    for (size_t i = 0; i < 3; i++)
        zk_put_aclvec(&w, &acls[i]);
    assert_int_equal(w.len, 68 + (4 + 4 + 4 + sizeof(UNI_PATH) - 1) + 8 + 66 + 4 + 4);

    struct base_rd r;
    uint8_t *copy = start_read(&r, &w);
    struct zk_stat st2;
    assert_true(zk_get_stat(&r, &st2));
    assert_true(st2.czxid == st.czxid && st2.mzxid == st.mzxid);
    assert_true(st2.ctime == st.ctime && st2.mtime == st.mtime);
    assert_int_equal(st2.version, st.version);
    assert_int_equal(st2.cversion, st.cversion);
    assert_int_equal(st2.aversion, st.aversion);
    assert_true(st2.ephemeral_owner == st.ephemeral_owner);
    assert_int_equal(st2.data_length, st.data_length);
    assert_int_equal(st2.num_children, st.num_children);
    assert_true(st2.pzxid == st.pzxid);
    struct zk_id id2;
    assert_true(zk_get_id(&r, &id2));
    assert_str_is(id2.scheme, id.scheme);
    assert_str_is(id2.id, id.id);
    assert_true(zk_get_id(&r, &id2));
    assert_str_is(id2.scheme, ZK_STR_NULL);
    assert_str_is(id2.id, ZK_STR_NULL);
    for (size_t i = 0; i < 3; i++) {
        struct zk_aclvec out;
        assert_true(zk_get_aclvec(&r, &out));
        assert_aclvec_is(&out, &acls[i]);
        zk_aclvec_free(&out);
    }
    finish_read(&r, copy, &w);
}

static void check_connect_req(bool has_ro, bool ro)
{
    struct zk_connect_req in = sample_connect_req(has_ro), out;
    in.read_only = ro;
    struct zk_wbuf w;
    zk_wbuf_init(&w);
    zk_put_connect_req(&w, &in);
    assert_int_equal(w.len, 4 + 8 + 4 + 8 + 4 + 16 + (has_ro ? 1 : 0));
    struct base_rd r;
    uint8_t *copy = start_read(&r, &w);
    memset(&out, 0xa5, sizeof out);
    assert_true(zk_get_connect_req(&r, &out));
    assert_int_equal(out.protocol_version, in.protocol_version);
    assert_true(out.last_zxid_seen == in.last_zxid_seen);
    assert_int_equal(out.timeout_ms, in.timeout_ms);
    assert_true(out.session_id == in.session_id);
    assert_str_is(out.passwd, in.passwd);
    assert_int_equal(out.has_read_only, has_ro);
    assert_int_equal(out.read_only, has_ro && ro);
    finish_read(&r, copy, &w);
}

static void check_connect_resp(bool has_ro, bool ro)
{
    struct zk_connect_resp in = sample_connect_resp(has_ro), out;
    in.read_only = ro;
    struct zk_wbuf w;
    zk_wbuf_init(&w);
    zk_put_connect_resp(&w, &in);
    assert_int_equal(w.len, 4 + 4 + 8 + 4 + 5 + (has_ro ? 1 : 0));
    struct base_rd r;
    uint8_t *copy = start_read(&r, &w);
    memset(&out, 0xa5, sizeof out);
    assert_true(zk_get_connect_resp(&r, &out));
    assert_int_equal(out.protocol_version, in.protocol_version);
    assert_int_equal(out.timeout_ms, in.timeout_ms);
    assert_true(out.session_id == in.session_id);
    assert_str_is(out.passwd, in.passwd);
    assert_int_equal(out.has_read_only, has_ro);
    assert_int_equal(out.read_only, has_ro && ro);
    finish_read(&r, copy, &w);
}

static void test_roundtrip_connect(void **state)
{
    check_connect_req(false, false);
    check_connect_req(true, false);
    check_connect_req(true, true);
    check_connect_resp(false, false);
    check_connect_resp(true, false);
    check_connect_resp(true, true);
}

static void test_roundtrip_headers(void **state)
{
    struct zk_request_header rq = { 0x7fffffff, ZK_OP_CREATESESSION }, rq2;
    struct zk_reply_header rp = { ZK_XID_NOTIFICATION, -1, ZK_ENONODE }, rp2;
    struct zk_multi_header mh = { ZK_OP_SETDATA, false, ZK_EBADVERSION }, mh2;
    struct zk_multi_header done = { -1, true, -1 }, done2;
    struct zk_auth_packet ap = { 0, S("digest"), S("user:p\x00ss") }, ap2;
    struct zk_auth_packet ap_null = { 0, S("ip"), ZK_STR_NULL }, ap_null2;
    struct zk_watcher_event we = { ZK_EVENT_NONE, ZK_STATE_EXPIRED, S(UNI_PATH) }, we2;

    struct zk_wbuf w;
    zk_wbuf_init(&w);
    zk_put_request_header(&w, &rq);
    zk_put_reply_header(&w, &rp);
    zk_put_multi_header(&w, &mh);
    zk_put_multi_header(&w, &done);
    zk_put_auth_packet(&w, &ap);
    zk_put_auth_packet(&w, &ap_null);
    zk_put_watcher_event(&w, &we);

    struct base_rd r;
    uint8_t *copy = start_read(&r, &w);
    assert_true(zk_get_request_header(&r, &rq2));
    assert_int_equal(rq2.xid, rq.xid);
    assert_int_equal(rq2.type, rq.type);
    assert_true(zk_get_reply_header(&r, &rp2));
    assert_int_equal(rp2.xid, rp.xid);
    assert_true(rp2.zxid == rp.zxid);
    assert_int_equal(rp2.err, rp.err);
    assert_true(zk_get_multi_header(&r, &mh2));
    assert_int_equal(mh2.type, mh.type);
    assert_false(mh2.done);
    assert_int_equal(mh2.err, mh.err);
    assert_true(zk_get_multi_header(&r, &done2));
    assert_int_equal(done2.type, -1);
    assert_true(done2.done);
    assert_int_equal(done2.err, -1);
    assert_true(zk_get_auth_packet(&r, &ap2));
    assert_int_equal(ap2.type, 0);
    assert_str_is(ap2.scheme, ap.scheme);
    assert_str_is(ap2.auth, ap.auth);
    assert_true(zk_get_auth_packet(&r, &ap_null2));
    assert_str_is(ap_null2.scheme, ap_null.scheme);
    assert_str_is(ap_null2.auth, ZK_STR_NULL);
    assert_true(zk_get_watcher_event(&r, &we2));
    assert_int_equal(we2.type, we.type);
    assert_int_equal(we2.state, we.state);
    assert_str_is(we2.path, we.path);
    finish_read(&r, copy, &w);
}

static void test_roundtrip_simple_requests(void **state)
{
    struct zk_path_watch_req pw = { S(UNI_PATH), true }, pw2;
    struct zk_path_req p = { S("/zookeeper/quota") }, p2;
    struct zk_path_req pnull = { ZK_STR_NULL }, pnull2;
    struct zk_path_version_req pv = { S("/x"), -1 }, pv2;
    struct zk_setdata_req sd = { S("/d"), S(BIN_DATA), 42 }, sd2;
    struct zk_setdata_req sdnull = { S("/d"), ZK_STR_NULL, 0 }, sdnull2;
    struct zk_path_mode_req pm = { S("/w"), ZK_ADD_WATCH_PERSISTENT_RECURSIVE }, pm2;

    struct zk_wbuf w;
    zk_wbuf_init(&w);
    zk_put_path_watch_req(&w, &pw);
    zk_put_path_req(&w, &p);
    zk_put_path_req(&w, &pnull);
    zk_put_path_version_req(&w, &pv);
    zk_put_setdata_req(&w, &sd);
    zk_put_setdata_req(&w, &sdnull);
    zk_put_path_mode_req(&w, &pm);

    struct base_rd r;
    uint8_t *copy = start_read(&r, &w);
    assert_true(zk_get_path_watch_req(&r, &pw2));
    assert_str_is(pw2.path, pw.path);
    assert_true(pw2.watch);
    assert_true(zk_get_path_req(&r, &p2));
    assert_str_is(p2.path, p.path);
    assert_true(zk_get_path_req(&r, &pnull2));
    assert_str_is(pnull2.path, ZK_STR_NULL);
    assert_true(zk_get_path_version_req(&r, &pv2));
    assert_str_is(pv2.path, pv.path);
    assert_int_equal(pv2.version, -1);
    assert_true(zk_get_setdata_req(&r, &sd2));
    assert_str_is(sd2.path, sd.path);
    assert_str_is(sd2.data, sd.data);
    assert_int_equal(sd2.version, 42);
    assert_true(zk_get_setdata_req(&r, &sdnull2));
    assert_str_is(sdnull2.data, ZK_STR_NULL);
    assert_int_equal(sdnull2.version, 0);
    assert_true(zk_get_path_mode_req(&r, &pm2));
    assert_str_is(pm2.path, pm.path);
    assert_int_equal(pm2.mode, ZK_ADD_WATCH_PERSISTENT_RECURSIVE);
    finish_read(&r, copy, &w);
}

static void check_create(const struct zk_create_req *in, bool with_ttl)
{
    struct zk_wbuf w;
    zk_wbuf_init(&w);
    zk_put_create_req(&w, in, with_ttl);
    struct base_rd r;
    uint8_t *copy = start_read(&r, &w);
    struct zk_create_req out;
    assert_true(zk_get_create_req(&r, &out, with_ttl));
    assert_str_is(out.path, in->path);
    assert_str_is(out.data, in->data);
    assert_aclvec_is(&out.acl, &in->acl);
    assert_int_equal(out.flags, in->flags);
    /* CreateRequest has no ttl field; it reads back as -1 (no TTL). */
    assert_true(out.ttl == (with_ttl ? in->ttl : -1));
    zk_create_req_free(&out);
    finish_read(&r, copy, &w);
}

static void test_roundtrip_create(void **state)
{
    struct zk_create_req c = sample_create_req();
    check_create(&c, true);
    check_create(&c, false);
    struct zk_create_req empty = { ZK_STR_NULL, ZK_STR_NULL, { 0, NULL }, ZK_EPHEMERAL, 0 };
    check_create(&empty, false);
    struct zk_create_req nullacl = { S("/n"), S(""), { -1, NULL }, ZK_CONTAINER, -7 };
    check_create(&nullacl, true);
}

static void test_roundtrip_setacl(void **state)
{
    struct zk_setacl_req reqs[] = {
        { S(UNI_PATH), sample_aclvec(), 3 },
        { S("/e"), { 0, NULL }, -1 },
        { ZK_STR_NULL, { -1, NULL }, 0 },
    };
    for (size_t i = 0; i < 3; i++) {
        struct zk_wbuf w;
        zk_wbuf_init(&w);
        zk_put_setacl_req(&w, &reqs[i]);
        struct base_rd r;
        uint8_t *copy = start_read(&r, &w);
        struct zk_setacl_req out;
        assert_true(zk_get_setacl_req(&r, &out));
        assert_str_is(out.path, reqs[i].path);
        assert_aclvec_is(&out.acl, &reqs[i].acl);
        assert_int_equal(out.version, reqs[i].version);
        zk_setacl_req_free(&out);
        finish_read(&r, copy, &w);
    }
}

static void test_roundtrip_setwatches(void **state)
{
    struct zk_setwatches_req in = sample_setwatches_req(), out;
    struct zk_strvec empty = { 0, NULL };
    for (int v2 = 0; v2 <= 1; v2++) {
        struct zk_wbuf w;
        zk_wbuf_init(&w);
        zk_put_setwatches_req(&w, &in, v2);
        struct base_rd r;
        uint8_t *copy = start_read(&r, &w);
        assert_true(zk_get_setwatches_req(&r, &out, v2));
        assert_true(out.relative_zxid == in.relative_zxid);
        assert_strvec_is(&out.data, &in.data);
        assert_strvec_is(&out.exist, &in.exist);
        assert_strvec_is(&out.child, &in.child);
        /* SetWatches (101) has no persistent lists: they stay empty. */
        assert_strvec_is(&out.persistent, v2 ? &in.persistent : &empty);
        assert_strvec_is(&out.persistent_recursive, v2 ? &in.persistent_recursive : &empty);
        zk_setwatches_req_free(&out);
        finish_read(&r, copy, &w);
    }
    /* Null vectors survive too. */
    struct zk_setwatches_req nulls = { 1, { -1, NULL }, { -1, NULL }, { 0, NULL },
                                       { -1, NULL }, { 0, NULL } };
    struct zk_wbuf w;
    zk_wbuf_init(&w);
    zk_put_setwatches_req(&w, &nulls, true);
    assert_int_equal(w.len, 8 + 5 * 4);
    struct base_rd r;
    uint8_t *copy = start_read(&r, &w);
    assert_true(zk_get_setwatches_req(&r, &out, true));
    assert_strvec_is(&out.data, &nulls.data);
    assert_strvec_is(&out.exist, &nulls.exist);
    assert_strvec_is(&out.child, &nulls.child);
    assert_strvec_is(&out.persistent, &nulls.persistent);
    assert_strvec_is(&out.persistent_recursive, &nulls.persistent_recursive);
    zk_setwatches_req_free(&out);
    finish_read(&r, copy, &w);
}

/* ---- truncation: every proper prefix fails, without leaks ------------- */

#define PLAIN_DECODER(fn, type, getter)                                                    \
    static bool fn(struct base_rd *r)                                                      \
    {                                                                                      \
        type v;                                                                            \
        memset(&v, 0, sizeof v);                                                           \
        return getter(r, &v);                                                              \
    }
PLAIN_DECODER(dec_stat, struct zk_stat, zk_get_stat)
PLAIN_DECODER(dec_id, struct zk_id, zk_get_id)
PLAIN_DECODER(dec_connect_req, struct zk_connect_req, zk_get_connect_req)
PLAIN_DECODER(dec_connect_resp, struct zk_connect_resp, zk_get_connect_resp)
PLAIN_DECODER(dec_request_header, struct zk_request_header, zk_get_request_header)
PLAIN_DECODER(dec_reply_header, struct zk_reply_header, zk_get_reply_header)
PLAIN_DECODER(dec_multi_header, struct zk_multi_header, zk_get_multi_header)
PLAIN_DECODER(dec_auth_packet, struct zk_auth_packet, zk_get_auth_packet)
PLAIN_DECODER(dec_sasl_request, struct zk_sasl_request, zk_get_sasl_request)
PLAIN_DECODER(dec_sasl_response, struct zk_sasl_response, zk_get_sasl_response)
PLAIN_DECODER(dec_watcher_event, struct zk_watcher_event, zk_get_watcher_event)
PLAIN_DECODER(dec_path_watch, struct zk_path_watch_req, zk_get_path_watch_req)
PLAIN_DECODER(dec_path, struct zk_path_req, zk_get_path_req)
PLAIN_DECODER(dec_path_version, struct zk_path_version_req, zk_get_path_version_req)
PLAIN_DECODER(dec_setdata, struct zk_setdata_req, zk_get_setdata_req)
PLAIN_DECODER(dec_path_mode, struct zk_path_mode_req, zk_get_path_mode_req)

/* Allocating decoders: on failure the record must hold no pointers. */
static bool dec_strvec(struct base_rd *r)
{
    struct zk_strvec v;
    bool ok = zk_get_strvec(r, &v);
    if (!ok)
        assert_null(v.items);
    zk_strvec_free(&v);
    return ok;
}

static bool dec_aclvec(struct base_rd *r)
{
    struct zk_aclvec v;
    bool ok = zk_get_aclvec(r, &v);
    if (!ok)
        assert_null(v.items);
    zk_aclvec_free(&v);
    return ok;
}

static bool decode_create(struct base_rd *r, bool with_ttl)
{
    struct zk_create_req v;
    bool ok = zk_get_create_req(r, &v, with_ttl);
    if (!ok)
        assert_null(v.acl.items);
    zk_create_req_free(&v);
    return ok;
}

static bool dec_create(struct base_rd *r)
{
    return decode_create(r, false);
}

static bool dec_create_ttl(struct base_rd *r)
{
    return decode_create(r, true);
}

static bool dec_setacl(struct base_rd *r)
{
    struct zk_setacl_req v;
    bool ok = zk_get_setacl_req(r, &v);
    if (!ok)
        assert_null(v.acl.items);
    zk_setacl_req_free(&v);
    return ok;
}

static bool decode_setwatches(struct base_rd *r, bool v2)
{
    struct zk_setwatches_req v;
    bool ok = zk_get_setwatches_req(r, &v, v2);
    if (!ok) {
        assert_null(v.data.items);
        assert_null(v.exist.items);
        assert_null(v.child.items);
        assert_null(v.persistent.items);
        assert_null(v.persistent_recursive.items);
    }
    zk_setwatches_req_free(&v);
    return ok;
}

static bool dec_setwatches(struct base_rd *r)
{
    return decode_setwatches(r, false);
}

static bool dec_setwatches2(struct base_rd *r)
{
    return decode_setwatches(r, true);
}

static void enc_stat(struct zk_wbuf *w)
{
    struct zk_stat v = sample_stat();
    zk_put_stat(w, &v);
}

static void enc_id(struct zk_wbuf *w)
{
    struct zk_id v = { S("digest"), S("bob:xyz") };
    zk_put_id(w, &v);
}

static void enc_strvec(struct zk_wbuf *w)
{
    struct zk_strvec v = sample_strvec();
    zk_put_strvec(w, &v);
}

static void enc_aclvec(struct zk_wbuf *w)
{
    struct zk_aclvec v = sample_aclvec();
    zk_put_aclvec(w, &v);
}

static void enc_connect_req(struct zk_wbuf *w)
{
    struct zk_connect_req v = sample_connect_req(false);
    zk_put_connect_req(w, &v);
}

static void enc_connect_req_ro(struct zk_wbuf *w)
{
    struct zk_connect_req v = sample_connect_req(true);
    zk_put_connect_req(w, &v);
}

static void enc_connect_resp(struct zk_wbuf *w)
{
    struct zk_connect_resp v = sample_connect_resp(false);
    zk_put_connect_resp(w, &v);
}

static void enc_connect_resp_ro(struct zk_wbuf *w)
{
    struct zk_connect_resp v = sample_connect_resp(true);
    zk_put_connect_resp(w, &v);
}

static void enc_request_header(struct zk_wbuf *w)
{
    struct zk_request_header v = { 9, ZK_OP_GETDATA };
    zk_put_request_header(w, &v);
}

static void enc_reply_header(struct zk_wbuf *w)
{
    struct zk_reply_header v = { 9, 0x500000001LL, ZK_OK };
    zk_put_reply_header(w, &v);
}

static void enc_multi_header(struct zk_wbuf *w)
{
    struct zk_multi_header v = { ZK_OP_CHECK, false, 0 };
    zk_put_multi_header(w, &v);
}

static void enc_auth_packet(struct zk_wbuf *w)
{
    struct zk_auth_packet v = { 0, S("digest"), S("bob:secret") };
    zk_put_auth_packet(w, &v);
}

static void enc_sasl_request(struct zk_wbuf *w)
{
    struct zk_sasl_request v = { S("username=\"bob\",nc=00000001") };
    zk_put_sasl_request(w, &v);
}

static void enc_sasl_response(struct zk_wbuf *w)
{
    struct zk_sasl_response v = { S("rspauth=0123456789abcdef") };
    zk_put_sasl_response(w, &v);
}

static void enc_watcher_event(struct zk_wbuf *w)
{
    struct zk_watcher_event v = { ZK_EVENT_CHILD_CHANGED, ZK_STATE_SYNC_CONNECTED, S(UNI_PATH) };
    zk_put_watcher_event(w, &v);
}

static void enc_path_watch(struct zk_wbuf *w)
{
    struct zk_path_watch_req v = { S(UNI_PATH), true };
    zk_put_path_watch_req(w, &v);
}

static void enc_path(struct zk_wbuf *w)
{
    struct zk_path_req v = { S("/sync/me") };
    zk_put_path_req(w, &v);
}

static void enc_create(struct zk_wbuf *w)
{
    struct zk_create_req v = sample_create_req();
    zk_put_create_req(w, &v, false);
}

static void enc_create_ttl(struct zk_wbuf *w)
{
    struct zk_create_req v = sample_create_req();
    zk_put_create_req(w, &v, true);
}

static void enc_path_version(struct zk_wbuf *w)
{
    struct zk_path_version_req v = { S("/del"), 12 };
    zk_put_path_version_req(w, &v);
}

static void enc_setdata(struct zk_wbuf *w)
{
    struct zk_setdata_req v = { S("/set"), S(BIN_DATA), 3 };
    zk_put_setdata_req(w, &v);
}

static void enc_setacl(struct zk_wbuf *w)
{
    struct zk_setacl_req v = { S("/acl"), sample_aclvec(), 1 };
    zk_put_setacl_req(w, &v);
}

static void enc_setwatches(struct zk_wbuf *w)
{
    struct zk_setwatches_req v = sample_setwatches_req();
    zk_put_setwatches_req(w, &v, false);
}

static void enc_setwatches2(struct zk_wbuf *w)
{
    struct zk_setwatches_req v = sample_setwatches_req();
    zk_put_setwatches_req(w, &v, true);
}

static void enc_path_mode(struct zk_wbuf *w)
{
    struct zk_path_mode_req v = { S("/aw"), ZK_ADD_WATCH_PERSISTENT };
    zk_put_path_mode_req(w, &v);
}

struct codec_case {
    const char *name;
    void (*encode)(struct zk_wbuf *w);
    bool (*decode)(struct base_rd *r);
    size_t optional_tail; /* trailing bytes the decoder may do without */
};

static const struct codec_case codec_cases[] = {
    { "stat", enc_stat, dec_stat, 0 },
    { "id", enc_id, dec_id, 0 },
    { "strvec", enc_strvec, dec_strvec, 0 },
    { "aclvec", enc_aclvec, dec_aclvec, 0 },
    { "connect_req", enc_connect_req, dec_connect_req, 0 },
    { "connect_req+ro", enc_connect_req_ro, dec_connect_req, 1 },
    { "connect_resp", enc_connect_resp, dec_connect_resp, 0 },
    { "connect_resp+ro", enc_connect_resp_ro, dec_connect_resp, 1 },
    { "request_header", enc_request_header, dec_request_header, 0 },
    { "reply_header", enc_reply_header, dec_reply_header, 0 },
    { "multi_header", enc_multi_header, dec_multi_header, 0 },
    { "auth_packet", enc_auth_packet, dec_auth_packet, 0 },
    { "sasl_request", enc_sasl_request, dec_sasl_request, 0 },
    { "sasl_response", enc_sasl_response, dec_sasl_response, 0 },
    { "watcher_event", enc_watcher_event, dec_watcher_event, 0 },
    { "path_watch", enc_path_watch, dec_path_watch, 0 },
    { "path", enc_path, dec_path, 0 },
    { "create", enc_create, dec_create, 0 },
    { "create_ttl", enc_create_ttl, dec_create_ttl, 0 },
    { "path_version", enc_path_version, dec_path_version, 0 },
    { "setdata", enc_setdata, dec_setdata, 0 },
    { "setacl", enc_setacl, dec_setacl, 0 },
    { "setwatches", enc_setwatches, dec_setwatches, 0 },
    { "setwatches2", enc_setwatches2, dec_setwatches2, 0 },
    { "path_mode", enc_path_mode, dec_path_mode, 0 },
};

/* Decodes the first n bytes of an encoding; returns whether it succeeded
 * and checks the heap is unchanged across the decode. */
static bool decode_prefix(const struct codec_case *c, const uint8_t *wire, size_t n, bool *err)
{
    uint8_t *copy = dup_exact(wire, n);
    struct base_rd r;
    base_rd_init(&r, copy, n);
    size_t before = heap_in_use();
    bool ok = c->decode(&r);
    size_t after = heap_in_use();
    assert_int_equal(before, after);
    assert_true(r.pos <= n);
    *err = r.err;
    free(copy);
    return ok;
}

static void test_truncated_records_fail(void **state)
{
    size_t prefixes = 0;
    for (size_t i = 0; i < sizeof codec_cases / sizeof codec_cases[0]; i++) {
        const struct codec_case *c = &codec_cases[i];
        struct zk_wbuf w;
        zk_wbuf_init(&w);
        c->encode(&w);
        assert_false(w.err);
        assert_true(w.len > c->optional_tail);
        bool err;
        for (size_t n = 0; n < w.len; n++) {
            bool ok = decode_prefix(c, w.p, n, &err);
            bool may_succeed = n >= w.len - c->optional_tail;
            if (ok != may_succeed)
                fail_msg("%s: prefix %zu of %zu decoded=%d", c->name, n, w.len, ok);
            assert_int_equal(err, !ok);
            prefixes++;
        }
        assert_true(decode_prefix(c, w.p, w.len, &err));
        assert_false(err);
        zk_wbuf_free(&w);
    }
    assert_true(prefixes > 500);
}

/* ---- hostile lengths and counts --------------------------------------- */

static void test_string_lengths(void **state)
{
    static const uint8_t neg2[] = { 0xff, 0xff, 0xff, 0xfe, 'a', 'b' };
    static const uint8_t short_body[] = { 0, 0, 0, 10, 'a', 'b', 'c', 'd', 'e' };
    static const uint8_t int_min[] = { 0x80, 0, 0, 0 };
    const uint8_t *bad[] = { neg2, short_body, int_min };
    size_t bad_len[] = { sizeof neg2, sizeof short_body, sizeof int_min };
    for (size_t i = 0; i < 3; i++) {
        struct base_rd r;
        struct zk_str s;
        base_rd_init(&r, bad[i], bad_len[i]);
        assert_false(zk_get_str(&r, &s));
        assert_true(r.err);
        assert_int_equal(base_rd_left(&r), 0);
    }

    /* No cap of its own: the frame bounds a string (jute.maxbuffer may be
     * configured above 1 MiB), so one longer than the default maxbuffer is
     * accepted when its bytes are present and refused when they are not. */
    size_t big = 4 + (size_t)ZK_MAX_BUFFER_DEFAULT + 1;
    uint8_t *buf = calloc(1, big);
    assert_non_null(buf);
    buf[1] = 0x10, buf[2] = 0, buf[3] = 0; /* 0x00100000 */
    struct base_rd r;
    struct zk_str s;
    base_rd_init(&r, buf, big);
    assert_true(zk_get_str(&r, &s));
    assert_int_equal(s.len, ZK_MAX_BUFFER_DEFAULT + 1);
    assert_ptr_equal(s.ptr, (const char *)buf + 4);
    assert_int_equal(base_rd_left(&r), 0);
    base_rd_init(&r, buf, big - 1);
    assert_false(zk_get_str(&r, &s));
    assert_true(r.err);
    free(buf);
}

static void test_vector_counts(void **state)
{
    static const uint8_t neg2[] = { 0xff, 0xff, 0xff, 0xfe, 0, 0, 0, 0 };
    static const uint8_t huge[] = { 0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0 };
    /* Claims 3 strings but only two empty ones follow. */
    static const uint8_t past_end[] = { 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0 };
    /* Claims 2 ACLs: 20 bytes cannot hold two 12-byte minimum entries. */
    static const uint8_t acl_past_end[] = { 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0,
                                            0, 0, 0, 0, 0, 0, 0, 0 };
    const uint8_t *bad[] = { neg2, huge, past_end };
    size_t bad_len[] = { sizeof neg2, sizeof huge, sizeof past_end };
    for (size_t i = 0; i < 3; i++) {
        struct base_rd r;
        struct zk_strvec v;
        base_rd_init(&r, bad[i], bad_len[i]);
        size_t before = heap_in_use();
        assert_false(zk_get_strvec(&r, &v));
        assert_int_equal(heap_in_use(), before);
        assert_true(r.err);
        assert_null(v.items);
        assert_int_equal(v.count, 0);

        struct zk_aclvec a;
        base_rd_init(&r, bad[i], bad_len[i]);
        assert_false(zk_get_aclvec(&r, &a));
        assert_true(r.err);
        assert_null(a.items);
    }
    /* A count the input cannot hold is refused right after the count, before
     * anything is allocated or any item read. */
    struct base_rd r;
    struct zk_strvec sv;
    base_rd_init(&r, past_end, sizeof past_end);
    assert_false(zk_get_strvec(&r, &sv));
    assert_int_equal(r.pos, 4);
    struct zk_aclvec a;
    base_rd_init(&r, acl_past_end, sizeof acl_past_end);
    assert_false(zk_get_aclvec(&r, &a));
    assert_int_equal(r.pos, 4);
    assert_null(a.items);

    /* ZK_VECTOR_MAX empty strings decode; one more is refused although the
     * input holds enough bytes for it. */
    size_t n = (size_t)ZK_VECTOR_MAX + 1;
    size_t len = 4 + 4 * n;
    uint8_t *buf = calloc(1, len);
    assert_non_null(buf);
    uint32_t count = ZK_VECTOR_MAX;
    base_put_be32(buf, count);
    struct zk_strvec v;
    base_rd_init(&r, buf, len);
    assert_true(zk_get_strvec(&r, &v));
    assert_int_equal(v.count, ZK_VECTOR_MAX);
    assert_int_equal(v.items[ZK_VECTOR_MAX - 1].len, 0);
    zk_strvec_free(&v);
    count++;
    base_put_be32(buf, count);
    base_rd_init(&r, buf, len);
    assert_false(zk_get_strvec(&r, &v));
    assert_null(v.items);
    free(buf);
}

/* A bad third vector must release the two decoded before it. */
static void test_setwatches_bad_late_vector(void **state)
{
    struct zk_wbuf w;
    zk_wbuf_init(&w);
    zk_put_i64(&w, 5);
    struct zk_strvec two = { 2, sample_paths2 };
    zk_put_strvec(&w, &two);
    zk_put_strvec(&w, &two);
    zk_put_i32(&w, ZK_VECTOR_MAX + 1);
    zk_put_i32(&w, 0);
    struct base_rd r;
    uint8_t *copy = start_read(&r, &w);
    size_t before = heap_in_use();
    struct zk_setwatches_req v;
    assert_false(zk_get_setwatches_req(&r, &v, false));
    assert_int_equal(heap_in_use(), before);
    assert_null(v.data.items);
    assert_null(v.exist.items);
    assert_int_equal(v.data.count, 0);
    free(copy);
    zk_wbuf_free(&w);
}

static void test_error_is_sticky(void **state)
{
    static const uint8_t in[] = { 0xff, 0xff, 0xff, 0xf0, 0, 0, 0, 1, 0, 0, 0, 2 };
    struct base_rd r;
    struct zk_str s;
    int32_t v = 99;
    int64_t v64 = 99;
    bool b = true;
    base_rd_init(&r, in, sizeof in);
    assert_false(zk_get_str(&r, &s));
    assert_true(r.err);
    /* Eight valid bytes remain, yet nothing reads after a failure. */
    assert_false(zk_get_i32(&r, &v));
    assert_int_equal(v, 99);
    assert_false(zk_get_i64(&r, &v64));
    assert_false(zk_get_bool(&r, &b));
    struct zk_connect_req cr;
    assert_false(zk_get_connect_req(&r, &cr));
    assert_true(r.err);
}

static void test_bool_nonzero_is_true(void **state)
{
    static const uint8_t in[] = { 0x00, 0x01, 0x02, 0xff };
    static const bool want[] = { false, true, true, true };
    struct base_rd r;
    base_rd_init(&r, in, sizeof in);
    for (size_t i = 0; i < sizeof in; i++) {
        bool b;
        assert_true(zk_get_bool(&r, &b));
        assert_int_equal(b, want[i]);
    }
    bool b;
    assert_false(zk_get_bool(&r, &b));
}

/* ---- known bytes ------------------------------------------------------- */

static void test_known_bytes_connect_req(void **state)
{
    static const uint8_t wire[] = {
        0x00, 0x00, 0x00, 0x00,                         /* protocolVersion 0 */
        0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, /* lastZxidSeen */
        0x00, 0x00, 0x75, 0x30,                         /* timeOut 30000 */
        0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, /* sessionId */
        0x00, 0x00, 0x00, 0x04, 0x00, 0x01, 0xfe, 0xff, /* passwd, 4 bytes */
        0x01,                                           /* readOnly */
    };
    struct zk_connect_req in = {
        .protocol_version = 0, .last_zxid_seen = 0x0102030405060708LL,
        .timeout_ms = 30000, .session_id = (int64_t)0x8000000000000001ULL,
        .passwd = { "\x00\x01\xfe\xff", 4 }, .read_only = true, .has_read_only = true,
    };
    struct zk_wbuf w;
    zk_wbuf_init(&w);
    zk_put_connect_req(&w, &in);
    assert_false(w.err);
    assert_int_equal(w.len, sizeof wire);
    assert_memory_equal(w.p, wire, sizeof wire);
    zk_wbuf_free(&w);

    struct base_rd r;
    struct zk_connect_req out;
    base_rd_init(&r, wire, sizeof wire);
    assert_true(zk_get_connect_req(&r, &out));
    assert_int_equal(out.protocol_version, 0);
    assert_true(out.last_zxid_seen == 0x0102030405060708LL);
    assert_int_equal(out.timeout_ms, 30000);
    assert_true(out.session_id == INT64_MIN + 1);
    assert_int_equal(out.passwd.len, 4);
    assert_ptr_equal(out.passwd.ptr, (const char *)wire + 28); /* zero-copy */
    assert_true(out.has_read_only && out.read_only);

    /* An old client stops after passwd. */
    base_rd_init(&r, wire, sizeof wire - 1);
    assert_true(zk_get_connect_req(&r, &out));
    assert_false(out.has_read_only);
    assert_false(out.read_only);
}

static void test_known_bytes_reply_and_multi_header(void **state)
{
    static const uint8_t reply[] = {
        0xff, 0xff, 0xff, 0xfe,                         /* xid -2 (ping) */
        0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x02, /* zxid 0x100000002 */
        0xff, 0xff, 0xff, 0x9b,                         /* err -101 NONODE */
    };
    static const uint8_t multi_done[] = {
        0xff, 0xff, 0xff, 0xff, /* type -1 */
        0x01,                   /* done: one byte */
        0xff, 0xff, 0xff, 0xff, /* err -1 */
    };
    struct zk_reply_header rh = { ZK_XID_PING, 0x100000002LL, ZK_ENONODE };
    struct zk_multi_header mh = { -1, true, -1 };
    struct zk_wbuf w;
    zk_wbuf_init(&w);
    zk_put_reply_header(&w, &rh);
    zk_put_multi_header(&w, &mh);
    assert_false(w.err);
    assert_int_equal(w.len, sizeof reply + sizeof multi_done);
    assert_memory_equal(w.p, reply, sizeof reply);
    assert_memory_equal(w.p + sizeof reply, multi_done, sizeof multi_done);
    zk_wbuf_free(&w);

    struct base_rd r;
    struct zk_reply_header rh2;
    base_rd_init(&r, reply, sizeof reply);
    assert_true(zk_get_reply_header(&r, &rh2));
    assert_int_equal(rh2.xid, -2);
    assert_true(rh2.zxid == 0x100000002LL);
    assert_int_equal(rh2.err, -101);
    struct zk_multi_header mh2;
    base_rd_init(&r, multi_done, sizeof multi_done);
    assert_true(zk_get_multi_header(&r, &mh2));
    assert_int_equal(mh2.type, -1);
    assert_true(mh2.done);
    assert_int_equal(mh2.err, -1);
}

/* GetSASLRequest and SetSASLResponse are one jute buffer each: kazoo's
 * first DIGEST-MD5 request carries an empty token, and a server refusing
 * the exchange answers a null one (ZooKeeper's SetSASLResponse(null)). */
static void test_known_bytes_sasl_records(void **state)
{
    static const uint8_t empty_request[] = { 0x00, 0x00, 0x00, 0x00 };
    static const uint8_t null_response[] = { 0xff, 0xff, 0xff, 0xff };
    static const uint8_t token_response[] = { 0x00, 0x00, 0x00, 0x03, 'a', '\0', 'b' };
    struct zk_sasl_request empty = { { "", 0 } }, q;
    struct zk_sasl_response none = { ZK_STR_NULL }, token = { { "a\0b", 3 } }, p;
    struct zk_wbuf w;
    zk_wbuf_init(&w);
    zk_put_sasl_request(&w, &empty);
    zk_put_sasl_response(&w, &none);
    zk_put_sasl_response(&w, &token);
    assert_false(w.err);
    assert_int_equal(w.len, sizeof empty_request + sizeof null_response + sizeof token_response);
    assert_memory_equal(w.p, empty_request, sizeof empty_request);
    assert_memory_equal(w.p + 4, null_response, sizeof null_response);
    assert_memory_equal(w.p + 8, token_response, sizeof token_response);

    struct base_rd r;
    uint8_t *copy = start_read(&r, &w);
    assert_true(zk_get_sasl_request(&r, &q));
    assert_str_is(q.token, empty.token);
    assert_true(zk_get_sasl_response(&r, &p));
    assert_str_is(p.token, ZK_STR_NULL);
    assert_true(zk_get_sasl_response(&r, &p));
    assert_str_is(p.token, token.token);
    finish_read(&r, copy, &w);
}

/* ---- writer ------------------------------------------------------------ */

static void test_frame_length_patching(void **state)
{
    struct zk_wbuf w;
    zk_wbuf_init(&w);
    size_t m0 = zk_frame_begin(&w);
    zk_frame_end(&w, m0);
    assert_int_equal(m0, 0);
    assert_int_equal(w.len, 4);
    assert_int_equal(base_get_be32(w.p), 0);

    size_t m1 = zk_frame_begin(&w);
    assert_int_equal(m1, 4);
    struct zk_reply_header rh = { 1, 2, 0 };
    zk_put_reply_header(&w, &rh);
    zk_put_str(&w, S("hello"));
    zk_frame_end(&w, m1);
    assert_false(w.err);
    assert_int_equal(w.len, 4 + 4 + 16 + 9);
    assert_int_equal(base_get_be32(w.p + m1), 16 + 9);
    assert_int_equal(base_get_be32(w.p), 0); /* earlier frame untouched */

    /* A mark that leaves no room for the length is a caller bug. */
    zk_frame_end(&w, w.len - 2);
    assert_true(w.err);
    zk_wbuf_free(&w);

    /* A large frame forces reallocation between begin and end. */
    zk_wbuf_init(&w);
    size_t m = zk_frame_begin(&w);
    for (int i = 0; i < 5000; i++)
        zk_put_i32(&w, i);
    zk_frame_end(&w, m);
    assert_false(w.err);
    assert_int_equal(base_get_be32(w.p), 20000);
    assert_int_equal(base_get_be32(w.p + 4 + 4 * 4999), 4999);
    zk_wbuf_free(&w);
}

static void test_wbuf_growth_reset_and_error(void **state)
{
    struct zk_wbuf w;
    zk_wbuf_init(&w);
    assert_null(w.p);
    size_t reallocs = 0, last_cap = 0;
    for (int64_t i = 0; i < 100000; i++) {
        zk_put_i64(&w, i * 3);
        if (w.cap != last_cap) {
            /* Geometric: each growth at least doubles. */
            assert_true(last_cap == 0 || w.cap >= 2 * last_cap);
            last_cap = w.cap;
            reallocs++;
        }
    }
    assert_false(w.err);
    assert_int_equal(w.len, 800000);
    assert_true(reallocs < 20);
    struct base_rd r;
    base_rd_init(&r, w.p, w.len);
    for (int64_t i = 0; i < 100000; i++) {
        int64_t v;
        assert_true(zk_get_i64(&r, &v));
        if (v != i * 3)
            fail_msg("value %lld at %lld", (long long)v, (long long)i);
    }

    uint8_t *p = w.p;
    size_t cap = w.cap;
    zk_wbuf_reset(&w);
    assert_int_equal(w.len, 0);
    assert_ptr_equal(w.p, p);
    assert_int_equal(w.cap, cap);

    /* A reservation that cannot be satisfied fails the buffer; later puts
     * are no-ops until reset. */
    zk_put_i32(&w, 7);
    assert_false(zk_wbuf_reserve(&w, SIZE_MAX));
    assert_true(w.err);
    zk_put_i32(&w, 8);
    zk_put_str(&w, S("ignored"));
    assert_int_equal(w.len, 4);
    size_t mark = zk_frame_begin(&w);
    zk_frame_end(&w, mark);
    assert_int_equal(w.len, 4);
    assert_int_equal(base_get_be32(w.p), 7);
    zk_wbuf_reset(&w);
    assert_false(w.err);

    /* Lengths that cannot be encoded fail the buffer. */
    zk_put_bytes(&w, "x", -2);
    assert_true(w.err);
    zk_wbuf_reset(&w);
    zk_put_bytes(&w, NULL, 3);
    assert_true(w.err);
    zk_wbuf_free(&w);
    assert_null(w.p);
    assert_int_equal(w.cap, 0);
}

static void test_str_helpers(void **state)
{
    struct zk_str a = zk_str_c("/abc");
    assert_int_equal(a.len, 4);
    assert_true(zk_str_eq(a, S("/abc")));
    assert_false(zk_str_eq(a, S("/abd")));
    assert_false(zk_str_eq(a, S("/ab")));
    struct zk_str n = zk_str_c(NULL);
    assert_null(n.ptr);
    assert_int_equal(n.len, -1);
    assert_true(zk_str_eq(n, ZK_STR_NULL));
    assert_false(zk_str_eq(n, S("")));
    assert_false(zk_str_eq(S(""), n));
    assert_true(zk_str_eq(S(""), zk_str_c("")));
}

static void test_free_is_idempotent(void **state)
{
    struct zk_strvec sv;
    struct zk_aclvec av;
    struct zk_create_req cr;
    struct zk_setacl_req sa;
    struct zk_setwatches_req sw;
    memset(&sv, 0, sizeof sv);
    memset(&av, 0, sizeof av);
    memset(&cr, 0, sizeof cr);
    memset(&sa, 0, sizeof sa);
    memset(&sw, 0, sizeof sw);
    zk_strvec_free(&sv);
    zk_aclvec_free(&av);
    zk_create_req_free(&cr);
    zk_setacl_req_free(&sa);
    zk_setwatches_req_free(&sw);

    struct zk_wbuf w;
    zk_wbuf_init(&w);
    enc_setwatches2(&w);
    struct base_rd r;
    uint8_t *copy = start_read(&r, &w);
    assert_true(zk_get_setwatches_req(&r, &sw, true));
    assert_non_null(sw.data.items);
    zk_setwatches_req_free(&sw);
    assert_null(sw.data.items);
    assert_null(sw.child.items);
    assert_null(sw.persistent_recursive.items);
    assert_int_equal(sw.data.count, 0);
    zk_setwatches_req_free(&sw);
    finish_read(&r, copy, &w);

    zk_wbuf_init(&w);
    enc_create_ttl(&w);
    copy = start_read(&r, &w);
    assert_true(zk_get_create_req(&r, &cr, true));
    assert_non_null(cr.acl.items);
    zk_create_req_free(&cr);
    assert_null(cr.acl.items);
    assert_int_equal(cr.acl.count, 0);
    zk_create_req_free(&cr);
    finish_read(&r, copy, &w);

    zk_wbuf_init(&w);
    enc_setacl(&w);
    copy = start_read(&r, &w);
    assert_true(zk_get_setacl_req(&r, &sa));
    zk_setacl_req_free(&sa);
    assert_null(sa.acl.items);
    zk_setacl_req_free(&sa);
    finish_read(&r, copy, &w);
}

/* ---- names and routing ------------------------------------------------- */

static void test_names(void **state)
{
    assert_string_equal(zk_op_name(ZK_OP_GETDATA), "getData");
    assert_string_equal(zk_op_name(ZK_OP_CREATE2), "create2");
    assert_string_equal(zk_op_name(ZK_OP_MULTIREAD), "multiRead");
    assert_string_equal(zk_op_name(ZK_OP_ADDWATCH), "addWatch");
    assert_string_equal(zk_op_name(ZK_OP_WHOAMI), "whoAmI");
    assert_string_equal(zk_op_name(ZK_OP_CREATESESSION), "createSession");
    assert_string_equal(zk_op_name(ZK_OP_CLOSESESSION), "closeSession");
    assert_string_equal(zk_op_name(ZK_OP_GETALLCHILDRENNUMBER), "getAllChildrenNumber");
    assert_string_equal(zk_op_name(ZK_OP_SETWATCHES2), "setWatches2");
    assert_string_equal(zk_op_name(ZK_OP_GETACL), "getACL");
    assert_string_equal(zk_op_name(10), "unknown");
    assert_string_equal(zk_op_name(23), "unknown");
    assert_string_equal(zk_op_name(108), "unknown");
    assert_string_equal(zk_op_name(INT32_MIN), "unknown");

    assert_string_equal(zk_err_name(ZK_OK), "OK");
    assert_string_equal(zk_err_name(ZK_ENONODE), "NONODE");
    assert_string_equal(zk_err_name(ZK_ENODEEXISTS), "NODEEXISTS");
    assert_string_equal(zk_err_name(ZK_EBADVERSION), "BADVERSION");
    assert_string_equal(zk_err_name(ZK_ENOTEMPTY), "NOTEMPTY");
    assert_string_equal(zk_err_name(ZK_ENOAUTH), "NOAUTH");
    assert_string_equal(zk_err_name(ZK_EINVALIDACL), "INVALIDACL");
    assert_string_equal(zk_err_name(ZK_EBADARGUMENTS), "BADARGUMENTS");
    assert_string_equal(zk_err_name(ZK_ENOCHILDRENFOREPHEMERALS), "NOCHILDRENFOREPHEMERALS");
    assert_string_equal(zk_err_name(ZK_ESESSIONEXPIRED), "SESSIONEXPIRED");
    assert_string_equal(zk_err_name(ZK_ENOWATCHER), "NOWATCHER");
    assert_string_equal(zk_err_name(ZK_EUNIMPLEMENTED), "UNIMPLEMENTED");
    assert_string_equal(zk_err_name(ZK_ERUNTIMEINCONSISTENCY), "RUNTIMEINCONSISTENCY");
    assert_string_equal(zk_err_name(ZK_EMARSHALLINGERROR), "MARSHALLINGERROR");
    assert_string_equal(zk_err_name(ZK_ECONNECTIONLOSS), "CONNECTIONLOSS");
    assert_string_equal(zk_err_name(ZK_ETHROTTLEDOP), "THROTTLEDOP");
    assert_string_equal(zk_err_name(1), "unknown");
    assert_string_equal(zk_err_name(-9), "unknown");
    assert_string_equal(zk_err_name(-126), "unknown");
}

static void test_op_is_write_table(void **state)
{
    static const struct {
        int32_t op;
        bool write;
    } table[] = {
        { ZK_OP_CREATE, true },          { ZK_OP_CREATE2, true },
        { ZK_OP_CREATECONTAINER, true }, { ZK_OP_CREATETTL, true },
        { ZK_OP_DELETE, true },          { ZK_OP_DELETECONTAINER, true },
        { ZK_OP_SETDATA, true },         { ZK_OP_SETACL, true },
        { ZK_OP_MULTI, true },           { ZK_OP_CHECK, true },
        { ZK_OP_CREATESESSION, true },   { ZK_OP_CLOSESESSION, true },
        { ZK_OP_RECONFIG, true },        { ZK_OP_EXISTS, false },
        { ZK_OP_GETDATA, false },        { ZK_OP_GETCHILDREN, false },
        { ZK_OP_GETCHILDREN2, false },   { ZK_OP_GETACL, false },
        { ZK_OP_GETALLCHILDRENNUMBER, false }, { ZK_OP_GETEPHEMERALS, false },
        { ZK_OP_MULTIREAD, false },      { ZK_OP_SYNC, false },
        { ZK_OP_PING, false },           { ZK_OP_AUTH, false },
        { ZK_OP_SETWATCHES, false },     { ZK_OP_SETWATCHES2, false },
        { ZK_OP_ADDWATCH, false },       { ZK_OP_CHECKWATCHES, false },
        { ZK_OP_REMOVEWATCHES, false },  { ZK_OP_WHOAMI, false },
        { ZK_OP_NOTIFICATION, false },   { ZK_OP_SASL, false },
        { ZK_OP_ERROR, false },          { 999, false },
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (zk_op_is_write(table[i].op) != table[i].write)
            fail_msg("zk_op_is_write(%s=%d) should be %d", zk_op_name(table[i].op),
                     table[i].op, table[i].write);
    }
}

/* ---- Larch's UDP datagram headers (udp.c) ---- */

static void test_udp_request_header_layout_and_round_trip(void **state)
{
    (void)state;
    struct zk_wbuf w;
    zk_wbuf_init(&w);
    struct zk_udp_request_header h = {
        .flags = ZK_UDP_FLAG_SESSION, .request_id = 0x0102030405060708ull,
        .min_zxid = 0x1122334455667788ll, .session_id = -2, .op = ZK_OP_GETDATA,
        .mac = 0xA1A2A3A4A5A6A7A8ull,
    };
    zk_put_udp_request_header(&w, &h);
    assert_int_equal(w.len, ZK_UDP_REQUEST_HEADER_BYTES);
    /* the offsets UDP.md gives, byte for byte */
    static const uint8_t want[ZK_UDP_REQUEST_HEADER_BYTES] = {
        'L', 'R', 'C', 'H', 1, 0x01, 0, 48,
        1, 2, 3, 4, 5, 6, 7, 8,
        0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe,
        0, 0, 0, 4, 0, 0, 0, 0,
        0xA1, 0xA2, 0xA3, 0xA4, 0xA5, 0xA6, 0xA7, 0xA8,
    };
    assert_memory_equal(w.p, want, sizeof want);
    struct zk_udp_request_header back = zk_get_udp_request_header(w.p);
    assert_int_equal(back.version, ZK_UDP_VERSION);
    assert_int_equal(back.header_len, ZK_UDP_REQUEST_HEADER_BYTES);
    assert_true(back.request_id == h.request_id && back.min_zxid == h.min_zxid);
    assert_true(back.session_id == h.session_id && back.mac == h.mac);
    assert_int_equal(back.op, ZK_OP_GETDATA);
    assert_int_equal(back.flags, ZK_UDP_FLAG_SESSION);
    zk_wbuf_free(&w);
}

static void test_udp_mac_covers_the_datagram_but_its_own_field(void **state)
{
    (void)state;
    uint8_t pw[16];
    for (int i = 0; i < 16; i++)
        pw[i] = (uint8_t)(i * 7 + 1);
    uint8_t d[64];
    for (size_t i = 0; i < sizeof d; i++)
        d[i] = (uint8_t)(i ^ 0x5a);
    zk_udp_sign(pw, d, sizeof d);
    uint64_t mac = base_get_be64(d + ZK_UDP_MAC_AT);
    /* SipHash-2-4 of the datagram with the field zeroed, written big-endian */
    uint8_t z[64];
    memcpy(z, d, sizeof z);
    memset(z + ZK_UDP_MAC_AT, 0, 8);
    assert_true(mac == base_siphash24(pw, z, sizeof z));
    assert_true(zk_udp_mac(pw, d, sizeof d) == mac); /* the field itself is ignored */
    d[63] ^= 1; /* the padding is covered */
    assert_true(zk_udp_mac(pw, d, sizeof d) != mac);
    d[63] ^= 1;
    pw[15] ^= 1;
    assert_true(zk_udp_mac(pw, d, sizeof d) != mac);
}

static void test_udp_reply_parse(void **state)
{
    (void)state;
    struct zk_wbuf w;
    zk_wbuf_init(&w);
    struct zk_reply_header rh = { .xid = 0, .zxid = 77, .err = ZK_OK };
    zk_put_udp_reply_header(&w, 42, ZK_UDP_FLAG_REPLY, ZK_UDP_OK, 0, &rh);
    zk_put_i32(&w, 9); /* a record */
    struct zk_udp_reply r;
    assert_true(zk_get_udp_reply(w.p, w.len, &r));
    assert_true(r.request_id == 42 && r.h.zxid == 77 && r.status == ZK_UDP_OK);
    assert_int_equal(r.record_len, 4);
    assert_int_equal(base_get_be32(r.record), 9);
    /* an error code: no record */
    zk_wbuf_reset(&w);
    rh.err = ZK_ENONODE;
    zk_put_udp_reply_header(&w, 43, ZK_UDP_FLAG_REPLY, ZK_UDP_OK, 0, &rh);
    assert_true(zk_get_udp_reply(w.p, w.len, &r));
    assert_int_equal(r.h.err, ZK_ENONODE);
    assert_null(r.record);
    /* a status: detail kept, no record */
    zk_wbuf_reset(&w);
    rh.err = ZK_OK;
    zk_put_udp_reply_header(&w, 44, ZK_UDP_FLAG_REPLY, ZK_UDP_TOO_BIG, 5000, &rh);
    zk_put_i32(&w, 1);
    assert_true(zk_get_udp_reply(w.p, w.len, &r));
    assert_true(r.status == ZK_UDP_TOO_BIG && r.detail == 5000 && r.record == NULL);
    /* not replies: short, a request, another magic, a header past the end */
    assert_false(zk_get_udp_reply(w.p, ZK_UDP_REPLY_HEADER_BYTES - 1, &r));
    w.p[5] = 0;
    assert_false(zk_get_udp_reply(w.p, w.len, &r));
    w.p[5] = ZK_UDP_FLAG_REPLY;
    w.p[0] ^= 1;
    assert_false(zk_get_udp_reply(w.p, w.len, &r));
    w.p[0] ^= 1;
    base_put_be16(w.p + 6, 200);
    assert_false(zk_get_udp_reply(w.p, w.len, &r));
    /* status 0 without its ReplyHeader is malformed */
    base_put_be16(w.p + 6, ZK_UDP_REPLY_HEADER_BYTES);
    base_put_be32(w.p + 16, ZK_UDP_OK);
    assert_false(zk_get_udp_reply(w.p, ZK_UDP_REPLY_HEADER_BYTES + 8, &r));
    assert_string_equal(zk_udp_status_name(ZK_UDP_NOT_SERVING), "not_serving");
    assert_string_equal(zk_udp_status_name(99), "unknown");
    zk_wbuf_free(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_primitives),
        cmocka_unit_test(test_roundtrip_strvec),
        cmocka_unit_test(test_roundtrip_stat_id_aclvec),
        cmocka_unit_test(test_roundtrip_connect),
        cmocka_unit_test(test_roundtrip_headers),
        cmocka_unit_test(test_roundtrip_simple_requests),
        cmocka_unit_test(test_roundtrip_create),
        cmocka_unit_test(test_roundtrip_setacl),
        cmocka_unit_test(test_roundtrip_setwatches),
        cmocka_unit_test(test_truncated_records_fail),
        cmocka_unit_test(test_string_lengths),
        cmocka_unit_test(test_vector_counts),
        cmocka_unit_test(test_setwatches_bad_late_vector),
        cmocka_unit_test(test_error_is_sticky),
        cmocka_unit_test(test_bool_nonzero_is_true),
        cmocka_unit_test(test_known_bytes_connect_req),
        cmocka_unit_test(test_known_bytes_reply_and_multi_header),
        cmocka_unit_test(test_known_bytes_sasl_records),
        cmocka_unit_test(test_frame_length_patching),
        cmocka_unit_test(test_wbuf_growth_reset_and_error),
        cmocka_unit_test(test_str_helpers),
        cmocka_unit_test(test_free_is_idempotent),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_op_is_write_table),
        cmocka_unit_test(test_udp_request_header_layout_and_round_trip),
        cmocka_unit_test(test_udp_mac_covers_the_datagram_but_its_own_field),
        cmocka_unit_test(test_udp_reply_parse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
