/*
 * fuzz_frame — one client frame as larchd gets it after the length prefix:
 * the ConnectRequest of a new connection, or RequestHeader + body, the body
 * read by what its opcode uses (dataplane/reads.c, replication/sequencer.c,
 * tcp.c's auth). Every input is tried both ways.
 *
 * Properties of every record that decodes:
 *  - the decoder consumed exactly what the matching zk_put_* writes back, and
 *    that encoding decodes again, completely, and re-encodes to the same
 *    bytes. Jute's encoding is injective on decoded fields (a bool reads any
 *    nonzero byte but is written as 1), so equal bytes mean equal fields;
 *  - decoded paths validate (zk_path_validate) without reading past them;
 *    a valid path has no empty segment, and its parent is valid too;
 *  - decoded ACLs normalise (tree_acl_from_request) to world, digest and ip
 *    entries only, which re-encode and normalise again to the same set.
 * ASan/LSan catch reads past the frame and anything a decoder leaks.
 */
#include "tests/fuzz/fuzz.h"
#include "tree/tree.h"

#define OP_CONNECT INT32_MIN /* not an opcode: the handshake's ConnectRequest */

static bool checks_on; /* the first decode checks paths and ACLs, the re-decode not */

static void check_path(struct zk_str s)
{
    if (!checks_on || s.len < 0)
        return;
    char *p = (char *)fuzz_dup(s.ptr, (size_t)s.len);
    size_t n = (size_t)s.len;
    if (zk_path_validate(p, n) == ZK_OK) {
        BASE_ASSERT(p[0] == '/' && memchr(p, '\0', n) == NULL && memmem(p, n, "//", 2) == NULL);
        BASE_ASSERT(n == 1 || p[n - 1] != '/');
        const char *last = memrchr(p, '/', n);
        BASE_ASSERT(zk_path_validate(p, last == p ? 1 : (size_t)(last - p)) == ZK_OK);
    }
    free(p);
}

/* Every entry of a is in b. */
static bool acl_in(const struct tree_acl *a, const struct tree_acl *b)
{
    for (int32_t i = 0, j; i < a->count; i++) {
        const struct tree_acl_entry *e = &a->items[i], *f = b->items;
        for (j = 0; j < b->count; j++, f++)
            if (e->perms == f->perms && !strcmp(e->scheme, f->scheme) && !strcmp(e->id, f->id))
                break;
        if (j == b->count)
            return false;
    }
    return true;
}

/* As a connection without and with a digest identity ("auth" expands).
 * fixupACL keeps duplicates that expansion creates (ZooKeeper does too), so
 * the second pass may drop some: compare sets, not lists. */
static void check_acl(const struct zk_aclvec *v)
{
    static const struct tree_authid bob = { "digest", "bob:fyVmFCwVbTJYrznoSu1koqYEYF0=" };
    static const struct tree_auth auths[] = { { .ids = NULL, .count = 0 },
                                              { .ids = &bob, .count = 1, .peer_ip = "198.18.1.3" } };
    for (int k = 0; k < 2 && checks_on; k++) {
        struct tree_acl *a, *b;
        struct zk_wbuf w;
        struct base_rd r;
        struct zk_aclvec v2;
        int rc = tree_acl_from_request(v, &auths[k], 0, &a);
        BASE_ASSERT(rc == ZK_OK || rc == ZK_EINVALIDACL || rc == ZK_EMARSHALLINGERROR);
        if (rc != ZK_OK)
            continue;
        BASE_ASSERT(a->count >= 1 && a->count <= TREE_ACL_MAX);
        for (int32_t i = 0; i < a->count; i++) {
            const char *sc = a->items[i].scheme, *id = a->items[i].id;
            BASE_ASSERT(!strcmp(sc, "digest") || !strcmp(sc, "ip") || !strcmp(id, "anyone"));
        }
        zk_wbuf_init(&w);
        tree_acl_put(&w, a);
        base_rd_init(&r, w.p, w.len);
        BASE_ASSERT(!w.err && zk_get_aclvec(&r, &v2) && base_rd_left(&r) == 0);
        BASE_ASSERT(tree_acl_from_request(&v2, &auths[k], 0, &b) == ZK_OK && acl_in(a, b) &&
                   acl_in(b, a));
        tree_acl_unref(a);
        tree_acl_unref(b);
        zk_aclvec_free(&v2);
        zk_wbuf_free(&w);
    }
}

static void check_watches(const struct zk_setwatches_req *q)
{
    const struct zk_strvec *v[] = { &q->data, &q->exist, &q->child, &q->persistent,
                                    &q->persistent_recursive };
    for (size_t k = 0; k < sizeof v / sizeof v[0]; k++)
        for (int32_t i = 0; i < v[k]->count; i++)
            check_path(v[k]->items[i]);
}

union rec {
    struct zk_create_req create;
    struct zk_setacl_req sa;
    struct zk_setwatches_req sw;
    struct zk_path_version_req pv;
    struct zk_setdata_req sd;
    struct zk_path_watch_req pw;
    struct zk_path_req p;
    struct zk_path_mode_req pm;
    struct zk_auth_packet auth;
    struct zk_connect_req conn;
};

/* Decode, re-encode, check and free one record. */
#define REC(decoded, encode, checks)                                                         \
    do {                                                                                     \
        if (!(decoded))                                                                      \
            return false;                                                                    \
        encode;                                                                              \
        checks;                                                                              \
        return true;                                                                         \
    } while (0)

static bool multi(int32_t op, struct base_rd *r, struct zk_wbuf *w);

/* Decodes op's body from r and appends its re-encoding to w. False when the
 * body does not decode or op has no body decoder (larchd refuses those). */
static bool codec(int32_t op, struct base_rd *r, struct zk_wbuf *w)
{
    union rec u;
    bool ttl = op == ZK_OP_CREATETTL, v2 = op == ZK_OP_SETWATCHES2;
    switch (op) {
    case ZK_OP_CREATE: case ZK_OP_CREATE2: case ZK_OP_CREATECONTAINER: case ZK_OP_CREATETTL:
        REC(zk_get_create_req(r, &u.create, ttl), zk_put_create_req(w, &u.create, ttl),
            (check_path(u.create.path), check_acl(&u.create.acl), zk_create_req_free(&u.create)));
    case ZK_OP_SETACL:
        REC(zk_get_setacl_req(r, &u.sa), zk_put_setacl_req(w, &u.sa),
            (check_path(u.sa.path), check_acl(&u.sa.acl), zk_setacl_req_free(&u.sa)));
    case ZK_OP_SETWATCHES: case ZK_OP_SETWATCHES2:
        REC(zk_get_setwatches_req(r, &u.sw, v2), zk_put_setwatches_req(w, &u.sw, v2),
            (check_watches(&u.sw), zk_setwatches_req_free(&u.sw)));
    case ZK_OP_AUTH:
        REC(zk_get_auth_packet(r, &u.auth), zk_put_auth_packet(w, &u.auth), (void)0);
    case OP_CONNECT:
        REC(zk_get_connect_req(r, &u.conn), zk_put_connect_req(w, &u.conn), (void)0);
    case ZK_OP_DELETE: case ZK_OP_CHECK:
        REC(zk_get_path_version_req(r, &u.pv), zk_put_path_version_req(w, &u.pv),
            check_path(u.pv.path));
    case ZK_OP_SETDATA:
        REC(zk_get_setdata_req(r, &u.sd), zk_put_setdata_req(w, &u.sd), check_path(u.sd.path));
    case ZK_OP_EXISTS: case ZK_OP_GETDATA: case ZK_OP_GETCHILDREN: case ZK_OP_GETCHILDREN2:
        REC(zk_get_path_watch_req(r, &u.pw), zk_put_path_watch_req(w, &u.pw),
            check_path(u.pw.path));
    case ZK_OP_SYNC: case ZK_OP_GETACL: case ZK_OP_GETALLCHILDRENNUMBER:
    case ZK_OP_DELETECONTAINER: case ZK_OP_GETEPHEMERALS:
        REC(zk_get_path_req(r, &u.p), zk_put_path_req(w, &u.p), check_path(u.p.path));
    case ZK_OP_ADDWATCH: case ZK_OP_CHECKWATCHES: case ZK_OP_REMOVEWATCHES:
        REC(zk_get_path_mode_req(r, &u.pm), zk_put_path_mode_req(w, &u.pm),
            check_path(u.pm.path));
    case ZK_OP_MULTI: case ZK_OP_MULTIREAD:
        return multi(op, r, w);
    case ZK_OP_PING: case ZK_OP_CLOSESESSION: case ZK_OP_WHOAMI:
        return true; /* no body */
    default:
        return false;
    }
}

/* (MultiHeader, body)* up to a header with done set, with the sub-ops
 * larchd reads there: multiRead's getData/getChildren (reads.c), multi's
 * writes (sequencer.c decode_one). */
static bool multi(int32_t op, struct base_rd *r, struct zk_wbuf *w)
{
    for (int n = 0; n <= TREE_MULTI_OPS_MAX; n++) {
        struct zk_multi_header h;
        if (!zk_get_multi_header(r, &h))
            return false;
        zk_put_multi_header(w, &h);
        if (h.done)
            return true;
        bool read = h.type == ZK_OP_GETDATA || h.type == ZK_OP_GETCHILDREN;
        bool write = zk_op_is_write(h.type) && h.type != ZK_OP_MULTI &&
                     h.type != ZK_OP_CREATESESSION && h.type != ZK_OP_CLOSESESSION;
        if (!(op == ZK_OP_MULTIREAD ? read : write) || !codec(h.type, r, w))
            return false;
    }
    return false;
}

static void roundtrip(int32_t op, const uint8_t *body, size_t len)
{
    struct base_rd r;
    struct zk_wbuf e1, e2;
    base_rd_init(&r, body, len);
    zk_wbuf_init(&e1);
    zk_wbuf_init(&e2);
    checks_on = true;
    bool ok = codec(op, &r, &e1);
    checks_on = false;
    BASE_ASSERT(r.pos <= len);
    if (ok) {
        BASE_ASSERT(!r.err && !e1.err && e1.len == r.pos);
        uint8_t *copy = fuzz_dup(e1.p, e1.len);
        base_rd_init(&r, copy, e1.len);
        BASE_ASSERT(codec(op, &r, &e2) && base_rd_left(&r) == 0 && !e2.err);
        BASE_ASSERT(e2.len == e1.len && (e1.len == 0 || memcmp(e1.p, e2.p, e1.len) == 0));
        free(copy);
    }
    zk_wbuf_free(&e1);
    zk_wbuf_free(&e2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct base_rd r;
    struct zk_request_header h;
    roundtrip(OP_CONNECT, data, size);
    base_rd_init(&r, data, size);
    if (zk_get_request_header(&r, &h)) {
        BASE_ASSERT(zk_op_name(h.type) != NULL && zk_op_name(h.type)[0] != '\0');
        roundtrip(h.type, data + r.pos, size - r.pos);
    }
    return 0;
}
