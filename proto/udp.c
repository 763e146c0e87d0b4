/*
 * udp.c — the headers of Larch's UDP read datagrams (dataplane/UDP.md),
 * shared by larchd's packet handler, liblarch, larch-bench and the tests, so
 * that the format lives in one place.
 */
#include "proto/proto.h"

#include <string.h>

#define MAC_BYTES 8

const char *zk_udp_status_name(uint32_t status)
{
    static const char *const names[ZK_UDP_STATUSES] = {
        "ok", "behind", "too_big", "no_session", "bad_mac", "bad_request", "bad_version",
        "not_serving",
    };
    return status < ZK_UDP_STATUSES ? names[status] : "unknown";
}

struct zk_udp_request_header zk_get_udp_request_header(const uint8_t *p)
{
    struct base_rd r;
    base_rd_init(&r, p + 4, ZK_UDP_REQUEST_HEADER_BYTES - 4);
    struct zk_udp_request_header h;
    h.version = base_rd_u8(&r);
    h.flags = base_rd_u8(&r);
    h.header_len = base_rd_be16(&r);
    h.request_id = base_rd_be64(&r);
    h.min_zxid = (int64_t)base_rd_be64(&r);
    h.session_id = (int64_t)base_rd_be64(&r);
    h.op = (int32_t)base_rd_be32(&r);
    h.reserved = base_rd_be32(&r);
    h.mac = base_rd_be64(&r);
    return h;
}

void zk_put_udp_request_header(struct zk_wbuf *w, const struct zk_udp_request_header *h)
{
    uint8_t b[ZK_UDP_REQUEST_HEADER_BYTES];
    base_put_be32(b, ZK_UDP_MAGIC);
    b[4] = h->version ? h->version : ZK_UDP_VERSION;
    b[5] = h->flags;
    base_put_be16(b + 6, ZK_UDP_REQUEST_HEADER_BYTES);
    base_put_be64(b + 8, h->request_id);
    base_put_be64(b + 16, (uint64_t)h->min_zxid);
    base_put_be64(b + 24, (uint64_t)h->session_id);
    base_put_be32(b + 32, (uint32_t)h->op);
    base_put_be32(b + 36, h->reserved);
    base_put_be64(b + ZK_UDP_MAC_AT, h->mac);
    zk_put_raw(w, b, sizeof b);
}

uint64_t zk_udp_mac(const uint8_t passwd[16], const uint8_t *dgram, size_t len)
{
    static const uint8_t zeros[MAC_BYTES];
    struct base_sip s;
    base_sip_init(&s, passwd);
    base_sip_update(&s, dgram, ZK_UDP_MAC_AT);
    base_sip_update(&s, zeros, sizeof zeros);
    base_sip_update(&s, dgram + ZK_UDP_REQUEST_HEADER_BYTES, len - ZK_UDP_REQUEST_HEADER_BYTES);
    return base_sip_final(&s);
}

void zk_udp_sign(const uint8_t passwd[16], uint8_t *dgram, size_t len)
{
    base_put_be64(dgram + ZK_UDP_MAC_AT, zk_udp_mac(passwd, dgram, len));
}

void zk_write_udp_reply_header(uint8_t *b, uint64_t request_id, uint8_t flags, uint32_t status,
                               uint32_t detail, const struct zk_reply_header *h)
{
    base_put_be32(b, ZK_UDP_MAGIC);
    b[4] = ZK_UDP_VERSION;
    b[5] = flags;
    base_put_be16(b + 6, ZK_UDP_REPLY_HEADER_BYTES);
    base_put_be64(b + 8, request_id);
    base_put_be32(b + 16, status);
    base_put_be32(b + 20, detail);
    zk_write_reply_header(b + ZK_UDP_REPLY_HEADER_BYTES, h);
}

void zk_put_udp_reply_header(struct zk_wbuf *w, uint64_t request_id, uint8_t flags,
                             uint32_t status, uint32_t detail, const struct zk_reply_header *h)
{
    uint8_t *b = zk_put_space(w, ZK_UDP_REPLY_HEADERS_BYTES);
    if (b != NULL)
        zk_write_udp_reply_header(b, request_id, flags, status, detail, h);
}

bool zk_get_udp_reply(const uint8_t *d, size_t n, struct zk_udp_reply *out)
{
    if (n < ZK_UDP_REPLY_HEADER_BYTES || base_get_be32(d) != ZK_UDP_MAGIC)
        return false;
    memset(out, 0, sizeof *out);
    out->version = d[4];
    out->flags = d[5];
    uint16_t header_len = base_get_be16(d + 6);
    if (!(out->flags & ZK_UDP_FLAG_REPLY) || header_len < ZK_UDP_REPLY_HEADER_BYTES ||
        header_len > n)
        return false;
    out->request_id = base_get_be64(d + 8);
    out->status = base_get_be32(d + 16);
    out->detail = base_get_be32(d + 20);
    /* a newer server's longer header is skipped; the ReplyHeader follows it */
    struct base_rd r;
    base_rd_init(&r, d + header_len, n - header_len);
    if (!zk_get_reply_header(&r, &out->h)) {
        /* BAD_VERSION from a server that speaks another version may end at
         * the status; everything else carries a ReplyHeader */
        if (out->status == ZK_UDP_OK)
            return false;
        out->h = (struct zk_reply_header){ 0, 0, 0 };
        return true;
    }
    if (out->status == ZK_UDP_OK && out->h.err == ZK_OK) {
        out->record = r.ptr + r.pos;
        out->record_len = base_rd_left(&r);
    }
    return true;
}
