/*
 * udp.c — the UDP read path's packet handler (dataplane/UDP.md): one
 * request datagram in, one reply datagram (or nothing) out. Pure: no
 * sockets, clocks or files, so the kernel-socket and DPDK back ends share it
 * and tests drive it with crafted bytes.
 *
 * The read itself is the TCP path's (reads.c, dp_read_plain), with the
 * identity UDP.md gives: world and the source address, plus what a signed
 * session published on this server (tree_session_publish_auth).
 */
#include "dataplane/dp_int.h"

#include <string.h>

#include <urcu.h>

#define REQ_HEADER ZK_UDP_REQUEST_HEADER_BYTES

static uint8_t reply_flags(const struct zk_udp_request_header *q)
{
    return (uint8_t)(ZK_UDP_FLAG_REPLY | (q->flags & ZK_UDP_FLAG_SESSION));
}

/* A reply of headers only, in place of anything out held. */
static void put_reply(struct zk_wbuf *out, const struct zk_udp_request_header *q,
                      enum zk_udp_status status, uint32_t detail, int64_t zxid, int32_t err)
{
    zk_wbuf_reset(out);
    struct zk_reply_header h = { .xid = 0, .zxid = zxid, .err = err };
    zk_put_udp_reply_header(out, q->request_id, reply_flags(q), status, detail, &h);
}

static size_t answer(struct zk_wbuf *out, struct dp_udp_counters *ctr,
                     const struct zk_udp_request_header *q, enum zk_udp_status status,
                     uint32_t detail, int64_t zxid)
{
    put_reply(out, q, status, detail, zxid, 0);
    ctr->answered[status]++;
    return out->err ? 0 : out->len;
}

/* enforce.auth as over TCP: ZooKeeper's error code in the reply header, no
 * record (UDP.md). */
static size_t refuse_unauthenticated(struct zk_wbuf *out, struct dp_udp_counters *ctr,
                                     const struct zk_udp_request_header *q, int64_t zxid)
{
    put_reply(out, q, ZK_UDP_OK, 0, zxid, ZK_ESESSIONCLOSEDREQUIRESASL);
    ctr->answered[ZK_UDP_OK]++;
    return out->err ? 0 : out->len;
}

static size_t drop(struct dp_udp_counters *ctr, enum dp_udp_drop why)
{
    ctr->dropped[why]++;
    return 0;
}

/* A signed request's session: its identities into *auth, or the status
 * that refuses it. */
static enum zk_udp_status session_identity(struct dp *dp, const struct zk_udp_request_header *q,
                                           const uint8_t *req, size_t len,
                                           struct tree_auth *auth)
{
    const struct tree_session *s = tree_session_find(dp->tree, q->session_id);
    if (!s || !s->passwd_known)
        return ZK_UDP_NO_SESSION;
    /* one 64-bit compare: no early exit a timing could reveal */
    if (zk_udp_mac(s->passwd, req, len) != q->mac)
        return ZK_UDP_BAD_MAC;
    struct tree_session_auth sa;
    if (tree_session_auth(s, &sa)) {
        auth->ids = sa.ids;
        auth->count = sa.count;
        auth->super = sa.super;
    }
    return ZK_UDP_OK;
}

static bool all_zero(const uint8_t *p, size_t n)
{
    uint8_t acc = 0;
    for (size_t i = 0; i < n; i++)
        acc |= p[i];
    return acc == 0;
}

/* Runs the read of a checked request. Its headers are written once, over
 * the space kept for them, when the read's error code and zxid are known. */
static size_t serve(struct dp *dp, const struct zk_udp_request_header *q, const uint8_t *req,
                    size_t len, const struct tree_auth *auth, size_t datagram_max,
                    struct zk_wbuf *out, struct dp_udp_counters *ctr)
{
    zk_wbuf_reset(out);
    (void)zk_put_space(out, ZK_UDP_REPLY_HEADERS_BYTES); /* failing sets out->err: below */
    struct base_rd in;
    base_rd_init(&in, req + REQ_HEADER, len - REQ_HEADER);
    int rc = dp_read_plain(dp, auth, q->op, &in, out);
    int64_t zxid = tree_last_zxid(dp->tree);
    if (rc == DP_READ_TCP_ONLY || rc == ZK_EMARSHALLINGERROR || in.err ||
        !all_zero(in.ptr + in.pos, base_rd_left(&in)))
        return answer(out, ctr, q, ZK_UDP_BAD_REQUEST, 0, zxid);
    if (out->err)
        return drop(ctr, DP_UDP_DROP_NOMEM);
    size_t cap = ZK_UDP_AMPLIFICATION * len;
    size_t limit = cap < datagram_max ? cap : datagram_max;
    if (out->len > limit) {
        uint32_t need = out->len > UINT32_MAX ? UINT32_MAX : (uint32_t)out->len;
        return answer(out, ctr, q, ZK_UDP_TOO_BIG, need, zxid);
    }
    /* an error's reply is the headers alone (dp_read_plain wrote nothing) */
    struct zk_reply_header h = { .xid = 0, .zxid = zxid, .err = rc };
    zk_write_udp_reply_header(out->p, q->request_id, reply_flags(q), ZK_UDP_OK, 0, &h);
    ctr->answered[ZK_UDP_OK]++;
    return out->len;
}

size_t dp_udp_handle(struct dp *dp, const uint8_t *req, size_t len, const struct tree_addr *peer,
                     size_t datagram_max, struct zk_wbuf *out, struct dp_udp_counters *ctr)
{
    ctr->datagrams++;
    zk_wbuf_reset(out);
    if (len < REQ_HEADER)
        return drop(ctr, DP_UDP_DROP_SHORT);
    if (base_get_be32(req) != ZK_UDP_MAGIC)
        return drop(ctr, DP_UDP_DROP_MAGIC);
    struct zk_udp_request_header q = zk_get_udp_request_header(req);
    if (q.flags & ZK_UDP_FLAG_REPLY)
        return drop(ctr, DP_UDP_DROP_REPLY);
    if (q.version != ZK_UDP_VERSION || (q.flags & ~ZK_UDP_FLAG_SESSION) != 0)
        return answer(out, ctr, &q, ZK_UDP_BAD_VERSION, 0, 0);
    if (q.header_len != REQ_HEADER)
        return drop(ctr, DP_UDP_DROP_HEADER);
    if (q.reserved != 0 || (!(q.flags & ZK_UDP_FLAG_SESSION) && (q.session_id != 0 || q.mac != 0)))
        return answer(out, ctr, &q, ZK_UDP_BAD_REQUEST, 0, 0);

    /* a member without a live leader serves nobody, as over TCP: its tree
     * may be arbitrarily old, and a client without a minimum zxid would
     * take it */
    if (dp->seq != NULL && !seq_serving(dp->seq))
        return answer(out, ctr, &q, ZK_UDP_NOT_SERVING, 0, tree_last_zxid(dp->tree));

    struct tree_auth auth = { .ids = NULL, .count = 0, .peer_addr = peer, .super = false,
                              .sasl_provider = dp->cfg.sasl_provider };
    int64_t zxid = tree_last_zxid(dp->tree);
    enum zk_udp_status st = ZK_UDP_OK;
    if (q.flags & ZK_UDP_FLAG_SESSION)
        st = session_identity(dp, &q, req, len, &auth);
    if (st == ZK_UDP_OK && zxid < q.min_zxid)
        st = ZK_UDP_BEHIND;
    size_t n;
    if (st != ZK_UDP_OK)
        n = answer(out, ctr, &q, st, 0, zxid);
    else if (!dp_auth_enforced_ok(dp, auth.ids, auth.count))
        n = refuse_unauthenticated(out, ctr, &q, zxid);
    else
        n = serve(dp, &q, req, len, &auth, datagram_max, out, ctr);
    return n;
}

/* The path a read request names, for the prefetch pass: { NULL } for
 * anything else. Each op served here whose record starts with the path. */
static struct tree_path_ref request_path(const uint8_t *req, size_t len)
{
    struct tree_path_ref none = { NULL, 0 };
    if (req == NULL || len < REQ_HEADER + 4 || base_get_be32(req) != ZK_UDP_MAGIC)
        return none;
    switch ((int32_t)base_get_be32(req + 32)) { /* the opcode */
    case ZK_OP_EXISTS:
    case ZK_OP_GETDATA:
    case ZK_OP_GETCHILDREN:
    case ZK_OP_GETCHILDREN2:
    case ZK_OP_GETALLCHILDRENNUMBER:
        break;
    default:
        return none;
    }
    int32_t plen = (int32_t)base_get_be32(req + REQ_HEADER);
    if (plen <= 0 || (size_t)plen > len - REQ_HEADER - 4)
        return none;
    return (struct tree_path_ref){ (const char *)req + REQ_HEADER + 4, (size_t)plen };
}

bool dp_udp_prefetch_pays(const struct dp *dp)
{
    return tree_prefetch_pays(dp->tree);
}

unsigned dp_udp_prefetch(const struct dp *dp, const uint8_t *const *reqs, const size_t *lens,
                         unsigned n)
{
    if (!tree_prefetch_pays(dp->tree))
        return 0; /* small trees: finding the paths would be all it did */
    struct tree_path_ref paths[TREE_PREFETCH_MAX];
    n = n < TREE_PREFETCH_MAX ? n : TREE_PREFETCH_MAX;
    for (unsigned i = 0; i < n; i++)
        paths[i] = request_path(reqs[i], lens[i]);
    return tree_prefetch_paths(dp->tree, paths, n);
}
