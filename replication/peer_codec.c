/*
 * peer_codec.c — the quorum port's frames (peer.h): framing, one table of
 * frame kinds, and per kind an encoder, a decoder and one range check that
 * both run, so the encoder refuses exactly what the decoder refuses. Then
 * the snapshot chunker and reassembler, and the names.
 *
 * Integers are big-endian through base's byte-order helpers; every read
 * goes through base's bounded reader, whose first failure sticks, so a
 * decoder reads a whole kind's fields and checks once (as txn_decode does).
 * A count is checked against the bytes still unread before anything is
 * sized from it, so garbage never allocates more than the frame could hold.
 */
#include "replication/peer.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define HDR PEER_FRAME_HEADER_BYTES
#define FLAG_PRE_VOTE 0x1u
#define FLAG_REJECT 0x2u
#define FLAG_NO_ACK 0x4u
#define ENTRY_MIN_BYTES 13u /* zxid, type, data length */
#define AUTH_MIN_BYTES 8u   /* scheme length, id length */
#define ID_BYTES 8u         /* one TOUCH session id */

/* ---- writer ------------------------------------------------------------------- */

/* Appends one frame to b and remembers the first failure, so an encoder
 * puts every field and the frame is checked once (wr_end). A field that
 * would take the frame past the max is refused before it is copied. */
struct wr {
    struct base_buf *b;
    size_t start; /* where the frame's header begins in b */
    int err;
};

static void put_bytes(struct wr *w, const void *p, size_t n)
{
    if (w->err != 0)
        return;
    if (n > HDR + PEER_FRAME_BYTES_MAX - (w->b->len - w->start)) {
        w->err = PEER_ETOOBIG;
        return;
    }
    int rc = base_buf_append(w->b, p, n);
    if (rc != 0)
        w->err = rc == -EMSGSIZE ? PEER_EFULL : PEER_ENOMEM;
}

static void put_u8(struct wr *w, uint8_t v)
{
    put_bytes(w, &v, 1);
}

static void put_u16(struct wr *w, uint16_t v)
{
    uint8_t b[2];
    base_put_be16(b, v);
    put_bytes(w, b, sizeof b);
}

static void put_u32(struct wr *w, uint32_t v)
{
    uint8_t b[4];
    base_put_be32(b, v);
    put_bytes(w, b, sizeof b);
}

static void put_u64(struct wr *w, uint64_t v)
{
    uint8_t b[8];
    base_put_be64(b, v);
    put_bytes(w, b, sizeof b);
}

/* u32 length, then the bytes (p may be NULL when n is 0). */
static void put_blob(struct wr *w, const void *p, size_t n)
{
    if (n > PEER_FRAME_BYTES_MAX && w->err == 0)
        w->err = PEER_ETOOBIG; /* before its length could be cut to 32 bits */
    put_u32(w, (uint32_t)n);
    put_bytes(w, p, n);
}

static struct wr wr_begin(struct base_buf *b, uint8_t type)
{
    struct wr w = { .b = b, .start = b->len, .err = 0 };
    uint8_t header[HDR] = { 0 };
    put_bytes(&w, header, sizeof header);
    put_u8(&w, type);
    return w;
}

/* Fills in the length and CRC, or takes the whole frame back. */
static int wr_end(struct wr *w)
{
    struct base_buf *b = w->b;
    if (w->err != 0) {
        b->len = w->start; /* base_buf never shrank: everything after start is ours */
        return w->err;
    }
    size_t plen = b->len - w->start - HDR;
    BASE_ASSERT(plen >= 1 && plen <= PEER_FRAME_BYTES_MAX);
    uint8_t *f = b->data + w->start;
    base_put_be32(f, (uint32_t)plen);
    base_put_be32(f + 4, base_crc32c(0, f + HDR, plen));
    return 0;
}

/* ---- the frame kinds ---------------------------------------------------------- */

/* Which fields a raft frame carries after its term, in this order. */
enum msg_field {
    F_FLAGS = 1u << 0, /* u8: FLAG_* bits the kind allows */
    F_LAST = 1u << 1,
    F_PREV = 1u << 2,
    F_COMMIT = 1u << 3,
    F_MATCH = 1u << 4,
    F_HINT = 1u << 5,
    F_READ_CTX = 1u << 6,
    F_ENTRIES = 1u << 7, /* u32 count, then {i64 zxid, u8 type, u32 len, data} each */
    F_WANT_SNAP = 1u << 8, /* i64 snap_zxid: a resync's lowest usable snapshot, 0: none */
    F_DIGEST = 1u << 9,    /* u64 digest, i64 digest_zxid (the driver's) */
};

struct kind;
typedef void (*encode_fn)(struct wr *w, const struct kind *k, const struct peer_frame *f);
typedef int (*decode_fn)(struct base_rd *r, const struct kind *k, struct peer_frame *f);
typedef int (*check_fn)(const struct kind *k, const struct peer_frame *f);

struct kind {
    uint8_t type;      /* enum peer_frame_type */
    uint8_t raft_type; /* enum raft_msg_type; 0: not a raft frame */
    uint16_t fields;   /* enum msg_field bits (raft frames) */
    uint8_t flags;     /* FLAG_* bits allowed (raft frames with F_FLAGS) */
    const char *name;
    encode_fn encode;
    decode_fn decode;
    check_fn check;
};

static const struct kind *kind_of(uint8_t type);

/* ---- memberships -------------------------------------------------------------- */

/* Whether p[0..len) is a membership: raft_config_decode accepts it (which
 * also makes it the one encoding of that membership). The decoded struct
 * is 4.4 KB of scratch on the stack, so this sits in a function of its own
 * that only a CONFIG entry or a chunk's config calls. */
static bool config_bytes_ok(const uint8_t *p, size_t len)
{
    struct raft_config c;
    return len <= RAFT_CONFIG_BYTES_MAX && raft_config_decode(p, len, &c) == RAFT_OK;
}

/* raft_config_encode's length for c, or 0 when c is outside what it can
 * encode (the encoder would assert; the decoder refuses such bytes). */
static size_t config_encoded_len(const struct raft_config *c)
{
    if (c->n_members > RAFT_MEMBERS_MAX || c->n_old > RAFT_MEMBERS_MAX ||
        c->extra_len > RAFT_CONFIG_EXTRA_MAX)
        return 0;
    return 5 + 2 * (size_t)(c->n_members + c->n_old) + c->extra_len;
}

/* ---- raft messages ------------------------------------------------------------ */

static int check_entries(const struct raft_msg *m)
{
    if (m->n_entries > PEER_APPEND_ENTRIES_MAX)
        return PEER_ECOUNT;
    int64_t prev = m->prev_zxid;
    for (uint32_t i = 0; i < m->n_entries; i++) {
        const struct raft_entry *e = &m->entries[i];
        if (e->zxid <= prev)
            return PEER_EORDER;
        if (raft_zxid_term(e->zxid) > m->term)
            return PEER_ETERM; /* raft_step refuses it too: no leader writes ahead of its term */
        if (e->type != RAFT_ENTRY_NOOP && e->type != RAFT_ENTRY_DATA &&
            e->type != RAFT_ENTRY_CONFIG)
            return PEER_EENTRY;
        /* raft_step would refuse the whole message: refused here, with a reason */
        if (e->type == RAFT_ENTRY_CONFIG && !config_bytes_ok(e->data, e->len))
            return PEER_ECONFIG;
        prev = e->zxid;
    }
    return 0;
}

/* The ranges raft_step insists on, for the fields this kind carries. */
static int check_msg(const struct kind *k, const struct peer_frame *f)
{
    const struct raft_msg *m = &f->msg;
    if (m->type != k->raft_type)
        return PEER_ETYPE;
    if (m->term > RAFT_TERM_MAX)
        return PEER_ETERM;
    if (((k->fields & F_LAST) && m->last_zxid < 0) || ((k->fields & F_PREV) && m->prev_zxid < 0) ||
        ((k->fields & F_COMMIT) && m->commit_zxid < 0) ||
        ((k->fields & F_MATCH) && m->match_zxid < 0) || ((k->fields & F_HINT) && m->hint_zxid < 0) ||
        ((k->fields & F_WANT_SNAP) && m->snap_zxid < 0) ||
        ((k->fields & F_DIGEST) && m->digest_zxid < 0))
        return PEER_EZXID;
    return (k->fields & F_ENTRIES) ? check_entries(m) : 0;
}

static void encode_entries(struct wr *w, const struct raft_msg *m)
{
    /* a caller bug, not bad input: raft_step would refuse it as well */
    BASE_ASSERT(m->n_entries == 0 || m->entries != NULL);
    put_u32(w, m->n_entries);
    for (uint32_t i = 0; i < m->n_entries && w->err == 0; i++) {
        const struct raft_entry *e = &m->entries[i];
        BASE_ASSERT(e->len == 0 || e->data != NULL);
        put_u64(w, (uint64_t)e->zxid);
        put_u8(w, e->type);
        put_blob(w, e->data, e->len);
    }
}

static void encode_msg(struct wr *w, const struct kind *k, const struct peer_frame *f)
{
    const struct raft_msg *m = &f->msg;
    put_u32(w, m->term);
    if (k->fields & F_FLAGS)
        put_u8(w, (uint8_t)(((m->pre_vote ? FLAG_PRE_VOTE : 0) | (m->reject ? FLAG_REJECT : 0) |
                             (m->no_ack ? FLAG_NO_ACK : 0)) &
                            k->flags));
    if (k->fields & F_LAST)
        put_u64(w, (uint64_t)m->last_zxid);
    if (k->fields & F_PREV)
        put_u64(w, (uint64_t)m->prev_zxid);
    if (k->fields & F_COMMIT)
        put_u64(w, (uint64_t)m->commit_zxid);
    if (k->fields & F_MATCH)
        put_u64(w, (uint64_t)m->match_zxid);
    if (k->fields & F_HINT)
        put_u64(w, (uint64_t)m->hint_zxid);
    if (k->fields & F_READ_CTX)
        put_u64(w, m->read_ctx);
    if (k->fields & F_WANT_SNAP)
        put_u64(w, (uint64_t)m->snap_zxid);
    if (k->fields & F_DIGEST) {
        put_u64(w, m->digest);
        put_u64(w, (uint64_t)m->digest_zxid);
    }
    if (k->fields & F_ENTRIES)
        encode_entries(w, m);
}

static int decode_entries(struct base_rd *r, struct peer_frame *f)
{
    uint32_t n = base_rd_be32(r);
    if (r->err)
        return 0; /* the caller reports the truncation */
    if (n > PEER_APPEND_ENTRIES_MAX || n > base_rd_left(r) / ENTRY_MIN_BYTES)
        return PEER_ECOUNT;
    if (base_grow(&f->entries_, &f->entries_cap_, n, sizeof *f->entries_) != 0)
        return PEER_ENOMEM;
    for (uint32_t i = 0; i < n && !r->err; i++) {
        struct raft_entry *e = &f->entries_[i];
        e->zxid = (int64_t)base_rd_be64(r);
        e->type = base_rd_u8(r);
        e->len = base_rd_be32(r);
        e->data = base_rd_take(r, e->len);
    }
    f->msg.entries = n > 0 ? f->entries_ : NULL;
    f->msg.n_entries = n;
    return 0;
}

static int decode_msg(struct base_rd *r, const struct kind *k, struct peer_frame *f)
{
    struct raft_msg *m = &f->msg;
    *m = (struct raft_msg){ .type = k->raft_type };
    m->term = base_rd_be32(r);
    if (k->fields & F_FLAGS) {
        uint8_t flags = base_rd_u8(r);
        if (flags & ~k->flags)
            return PEER_EFLAGS; /* refused, so that a round trip is byte-exact */
        m->pre_vote = (flags & FLAG_PRE_VOTE) != 0;
        m->reject = (flags & FLAG_REJECT) != 0;
        m->no_ack = (flags & FLAG_NO_ACK) != 0;
    }
    if (k->fields & F_LAST)
        m->last_zxid = (int64_t)base_rd_be64(r);
    if (k->fields & F_PREV)
        m->prev_zxid = (int64_t)base_rd_be64(r);
    if (k->fields & F_COMMIT)
        m->commit_zxid = (int64_t)base_rd_be64(r);
    if (k->fields & F_MATCH)
        m->match_zxid = (int64_t)base_rd_be64(r);
    if (k->fields & F_HINT)
        m->hint_zxid = (int64_t)base_rd_be64(r);
    if (k->fields & F_READ_CTX)
        m->read_ctx = base_rd_be64(r);
    if (k->fields & F_WANT_SNAP)
        m->snap_zxid = (int64_t)base_rd_be64(r);
    if (k->fields & F_DIGEST) {
        m->digest = base_rd_be64(r);
        m->digest_zxid = (int64_t)base_rd_be64(r);
    }
    return (k->fields & F_ENTRIES) ? decode_entries(r, f) : 0;
}

/* ---- HELLO -------------------------------------------------------------------- */
/* u32 PEER_MAGIC, u16 version, u32 from, u32 to, u64 cluster id */

static bool server_id_ok(uint32_t id)
{
    return id >= 1 && id <= PEER_SERVER_ID_MAX;
}

static int check_hello(const struct kind *k, const struct peer_frame *f)
{
    (void)k;
    const struct peer_hello *h = &f->hello;
    if (h->version < PEER_VERSION_MIN || h->version > PEER_VERSION_MAX)
        return PEER_EVERSION;
    if (!server_id_ok(h->from) || !server_id_ok(h->to) || h->from == h->to)
        return PEER_EID;
    return 0;
}

static void encode_hello(struct wr *w, const struct kind *k, const struct peer_frame *f)
{
    (void)k;
    put_u32(w, PEER_MAGIC);
    put_u16(w, f->hello.version);
    put_u32(w, f->hello.from);
    put_u32(w, f->hello.to);
    put_u64(w, f->hello.cluster_id);
}

static int decode_hello(struct base_rd *r, const struct kind *k, struct peer_frame *f)
{
    (void)k;
    /* checked first: whatever follows a wrong magic is not ours to read */
    if (base_rd_be32(r) != PEER_MAGIC && !r->err)
        return PEER_EMAGIC;
    struct peer_hello *h = &f->hello;
    h->version = base_rd_be16(r);
    h->from = base_rd_be32(r);
    h->to = base_rd_be32(r);
    h->cluster_id = base_rd_be64(r);
    return 0;
}

/* ---- SNAP_CHUNK --------------------------------------------------------------- */
/* u32 term, i64 snap_zxid, u64 total bytes, u64 offset, u32 len, data,
 * u32 config_len, config (offset 0 only) */

static int check_chunk_fields(const struct peer_snap_chunk *c)
{
    if (c->term > RAFT_TERM_MAX)
        return PEER_ETERM;
    if (c->snap_zxid <= 0)
        return PEER_EZXID; /* raft_step refuses a SNAP at 0: there is nothing to install */
    if (c->offset > c->total_bytes || c->len > c->total_bytes - c->offset)
        return PEER_ECHUNK;
    if (c->len == 0 && c->total_bytes > 0)
        return PEER_ECHUNK; /* an empty chunk moves nothing: only an empty snapshot has one */
    if (c->config_len > 0 && (c->offset != 0 || !config_bytes_ok(c->config, c->config_len)))
        return PEER_ECONFIG; /* once per snapshot (or restart): one place, one encoding */
    return 0;
}

static int check_chunk(const struct kind *k, const struct peer_frame *f)
{
    (void)k;
    return check_chunk_fields(&f->chunk);
}

static void encode_chunk(struct wr *w, const struct kind *k, const struct peer_frame *f)
{
    (void)k;
    const struct peer_snap_chunk *c = &f->chunk;
    BASE_ASSERT(c->len == 0 || c->data != NULL);
    BASE_ASSERT(c->config_len == 0 || c->config != NULL);
    put_u32(w, c->term);
    put_u64(w, (uint64_t)c->snap_zxid);
    put_u64(w, c->total_bytes);
    put_u64(w, c->offset);
    put_blob(w, c->data, c->len);
    put_blob(w, c->config, c->config_len);
}

static int decode_chunk(struct base_rd *r, const struct kind *k, struct peer_frame *f)
{
    (void)k;
    struct peer_snap_chunk *c = &f->chunk;
    c->term = base_rd_be32(r);
    c->snap_zxid = (int64_t)base_rd_be64(r);
    c->total_bytes = base_rd_be64(r);
    c->offset = base_rd_be64(r);
    c->len = base_rd_be32(r);
    c->data = base_rd_take(r, c->len);
    c->config_len = base_rd_be32(r);
    c->config = c->config_len > 0 ? base_rd_take(r, c->config_len) : NULL;
    return 0;
}

/* ---- FORWARD ------------------------------------------------------------------ */
/* u32 term, i64 session, i32 cxid, i32 op, u32 len + body, u32 n, {u32 len + scheme, u32 len + id} */

/* Auth strings become C strings on the leader (struct tree_authid): a NUL
 * inside one would silently cut it, so it is refused here. */
static int check_forward(const struct kind *k, const struct peer_frame *f)
{
    (void)k;
    const struct peer_forward *fw = &f->forward;
    if (fw->n_auth > PEER_FORWARD_AUTH_MAX)
        return PEER_ECOUNT;
    for (uint32_t i = 0; i < fw->n_auth; i++) {
        const struct peer_auth *a = &fw->auth[i];
        if (a->scheme_len == 0 || memchr(a->scheme, '\0', a->scheme_len) != NULL ||
            (a->id_len > 0 && memchr(a->id, '\0', a->id_len) != NULL))
            return PEER_ESTRING;
    }
    return 0;
}

static void encode_forward(struct wr *w, const struct kind *k, const struct peer_frame *f)
{
    (void)k;
    const struct peer_forward *fw = &f->forward;
    BASE_ASSERT(fw->body_len == 0 || fw->body != NULL);
    BASE_ASSERT(fw->n_auth == 0 || fw->auth != NULL);
    put_u32(w, fw->term);
    put_u64(w, (uint64_t)fw->session_id);
    put_u32(w, (uint32_t)fw->cxid);
    put_u32(w, (uint32_t)fw->op);
    put_blob(w, fw->body, fw->body_len);
    put_u32(w, fw->n_auth);
    for (uint32_t i = 0; i < fw->n_auth; i++) {
        BASE_ASSERT(fw->auth[i].id_len == 0 || fw->auth[i].id != NULL);
        put_blob(w, fw->auth[i].scheme, fw->auth[i].scheme_len);
        put_blob(w, fw->auth[i].id, fw->auth[i].id_len);
    }
}

static int decode_forward(struct base_rd *r, const struct kind *k, struct peer_frame *f)
{
    (void)k;
    struct peer_forward *fw = &f->forward;
    *fw = (struct peer_forward){ 0 };
    fw->term = base_rd_be32(r);
    fw->session_id = (int64_t)base_rd_be64(r);
    fw->cxid = (int32_t)base_rd_be32(r);
    fw->op = (int32_t)base_rd_be32(r);
    fw->body_len = base_rd_be32(r);
    fw->body = base_rd_take(r, fw->body_len);
    uint32_t n = base_rd_be32(r);
    if (r->err)
        return 0;
    if (n > PEER_FORWARD_AUTH_MAX || n > base_rd_left(r) / AUTH_MIN_BYTES)
        return PEER_ECOUNT;
    if (base_grow(&f->auth_, &f->auth_cap_, n, sizeof *f->auth_) != 0)
        return PEER_ENOMEM;
    for (uint32_t i = 0; i < n && !r->err; i++) {
        struct peer_auth *a = &f->auth_[i];
        a->scheme_len = base_rd_be32(r);
        a->scheme = (const char *)base_rd_take(r, a->scheme_len);
        a->id_len = base_rd_be32(r);
        a->id = (const char *)base_rd_take(r, a->id_len);
    }
    fw->auth = n > 0 ? f->auth_ : NULL;
    fw->n_auth = n;
    return 0;
}

/* ---- TOUCH -------------------------------------------------------------------- */
/* u32 n, i64 session id * n */

static int check_touch(const struct kind *k, const struct peer_frame *f)
{
    (void)k;
    (void)f;
    return 0; /* any session id: the leader ignores ones it does not hold */
}

static void encode_touch(struct wr *w, const struct kind *k, const struct peer_frame *f)
{
    (void)k;
    const struct peer_touch *t = &f->touch;
    BASE_ASSERT(t->n == 0 || t->session_ids != NULL);
    put_u32(w, t->n);
    for (uint32_t i = 0; i < t->n && w->err == 0; i++)
        put_u64(w, (uint64_t)t->session_ids[i]);
}

static int decode_touch(struct base_rd *r, const struct kind *k, struct peer_frame *f)
{
    (void)k;
    uint32_t n = base_rd_be32(r);
    if (r->err)
        return 0;
    if (n > base_rd_left(r) / ID_BYTES)
        return PEER_ECOUNT;
    if (base_grow(&f->ids_, &f->ids_cap_, n, sizeof *f->ids_) != 0)
        return PEER_ENOMEM;
    for (uint32_t i = 0; i < n; i++)
        f->ids_[i] = (int64_t)base_rd_be64(r);
    f->touch = (struct peer_touch){ .session_ids = n > 0 ? f->ids_ : NULL, .n = n };
    return 0;
}

/* ---- the table ---------------------------------------------------------------- */

static const struct kind kinds[] = {
    { PEER_HELLO, 0, 0, 0, "HELLO", encode_hello, decode_hello, check_hello },
    { PEER_VOTE_REQ, RAFT_MSG_VOTE_REQ, F_FLAGS | F_LAST, FLAG_PRE_VOTE, "VOTE_REQ", encode_msg,
      decode_msg, check_msg },
    { PEER_VOTE_RESP, RAFT_MSG_VOTE_RESP, F_FLAGS, FLAG_PRE_VOTE | FLAG_REJECT, "VOTE_RESP",
      encode_msg, decode_msg, check_msg },
    { PEER_APPEND, RAFT_MSG_APPEND, F_FLAGS | F_PREV | F_COMMIT | F_READ_CTX | F_DIGEST | F_ENTRIES,
      FLAG_NO_ACK, "APPEND", encode_msg, decode_msg, check_msg },
    { PEER_APPEND_RESP, RAFT_MSG_APPEND_RESP, F_FLAGS | F_MATCH | F_HINT | F_READ_CTX | F_WANT_SNAP,
      FLAG_REJECT, "APPEND_RESP", encode_msg, decode_msg, check_msg },
    { PEER_READ_INDEX, RAFT_MSG_READ_INDEX, F_READ_CTX, 0, "READ_INDEX", encode_msg, decode_msg,
      check_msg },
    { PEER_READ_INDEX_RESP, RAFT_MSG_READ_INDEX_RESP, F_FLAGS | F_COMMIT | F_READ_CTX,
      FLAG_REJECT, "READ_INDEX_RESP", encode_msg, decode_msg, check_msg },
    { PEER_SNAP_CHUNK, 0, 0, 0, "SNAP_CHUNK", encode_chunk, decode_chunk, check_chunk },
    { PEER_FORWARD, 0, 0, 0, "FORWARD", encode_forward, decode_forward, check_forward },
    { PEER_TOUCH, 0, 0, 0, "TOUCH", encode_touch, decode_touch, check_touch },
};

#define N_KINDS (sizeof kinds / sizeof kinds[0])

static const struct kind *kind_of(uint8_t type)
{
    for (size_t i = 0; i < N_KINDS; i++)
        if (kinds[i].type == type)
            return &kinds[i];
    return NULL;
}

static const struct kind *kind_of_raft(uint8_t raft_type)
{
    for (size_t i = 0; i < N_KINDS; i++)
        if (raft_type != 0 && kinds[i].raft_type == raft_type)
            return &kinds[i];
    return NULL;
}

/* ---- framing and decoding ----------------------------------------------------- */

int peer_frame_split(const uint8_t *p, size_t len, size_t *frame_len)
{
    if (len < HDR)
        return 0;
    uint32_t plen = base_get_be32(p);
    if (plen > PEER_FRAME_BYTES_MAX)
        return PEER_ETOOBIG;
    if (len - HDR < plen)
        return 0;
    *frame_len = HDR + (size_t)plen;
    return 1;
}

/* The header against len, then the CRC; *payload and *plen on success. */
static int check_header(const uint8_t *frame, size_t len, const uint8_t **payload, size_t *plen)
{
    if (len < HDR)
        return PEER_ETRUNC;
    uint32_t n = base_get_be32(frame);
    if (n > PEER_FRAME_BYTES_MAX)
        return PEER_ETOOBIG;
    if (len - HDR < n)
        return PEER_ETRUNC;
    if (len - HDR > n)
        return PEER_ETRAILING;
    if (base_crc32c(0, frame + HDR, n) != base_get_be32(frame + 4))
        return PEER_ECRC;
    *payload = frame + HDR;
    *plen = n;
    return 0;
}

static int decode_frame(const uint8_t *frame, size_t len, struct peer_frame *out)
{
    const uint8_t *payload;
    size_t plen;
    int rc = check_header(frame, len, &payload, &plen);
    if (rc != 0)
        return rc;
    struct base_rd r;
    base_rd_init(&r, payload, plen);
    uint8_t type = base_rd_u8(&r);
    if (r.err)
        return PEER_ETRUNC;
    const struct kind *k = kind_of(type);
    if (k == NULL)
        return PEER_ETYPE;
    rc = k->decode(&r, k, out);
    if (rc == 0 && r.err)
        rc = PEER_ETRUNC;
    if (rc == 0 && base_rd_left(&r) != 0)
        rc = PEER_ETRAILING;
    if (rc == 0)
        rc = k->check(k, out);
    if (rc == 0)
        out->type = type;
    return rc;
}

int peer_decode(const uint8_t *frame, size_t len, struct peer_frame *out)
{
    BASE_ASSERT(out != NULL && (frame != NULL || len == 0));
    out->type = 0;
    int rc = decode_frame(frame, len, out);
    BASE_ASSERT((rc == 0) == (out->type != 0));
    return rc;
}

void peer_frame_free(struct peer_frame *f)
{
    free(f->entries_);
    free(f->auth_);
    free(f->ids_);
    *f = (struct peer_frame){ 0 };
}

/* ---- encoding ----------------------------------------------------------------- */

int peer_encode_frame(struct base_buf *out, const struct peer_frame *f)
{
    BASE_ASSERT(out != NULL && f != NULL);
    const struct kind *k = kind_of(f->type);
    if (k == NULL)
        return PEER_ETYPE;
    int rc = k->check(k, f);
    if (rc != 0)
        return rc;
    struct wr w = wr_begin(out, k->type);
    k->encode(&w, k, f);
    return wr_end(&w);
}

int peer_encode_hello(struct base_buf *out, const struct peer_hello *h)
{
    struct peer_frame f = { .type = PEER_HELLO, .hello = *h };
    return peer_encode_frame(out, &f);
}

int peer_encode_msg(struct base_buf *out, const struct raft_msg *m)
{
    const struct kind *k = kind_of_raft(m->type);
    if (k == NULL)
        return PEER_ETYPE;
    struct peer_frame f = { .type = k->type, .msg = *m };
    return peer_encode_frame(out, &f);
}

int peer_encode_chunk(struct base_buf *out, const struct peer_snap_chunk *c)
{
    struct peer_frame f = { .type = PEER_SNAP_CHUNK, .chunk = *c };
    return peer_encode_frame(out, &f);
}

int peer_encode_forward(struct base_buf *out, const struct peer_forward *fw)
{
    struct peer_frame f = { .type = PEER_FORWARD, .forward = *fw };
    return peer_encode_frame(out, &f);
}

int peer_encode_touch(struct base_buf *out, const int64_t *session_ids, uint32_t n)
{
    struct peer_frame f = { .type = PEER_TOUCH, .touch = { session_ids, n } };
    return peer_encode_frame(out, &f);
}

static size_t snap_chunk_max(size_t chunk_bytes)
{
    return chunk_bytes < PEER_SNAP_CHUNK_BYTES_MAX ? chunk_bytes : PEER_SNAP_CHUNK_BYTES_MAX;
}

/* The first chunk's membership: snap_config's encoding into buf, or none. */
static size_t snap_config_bytes(const struct raft_msg *snap, uint8_t buf[RAFT_CONFIG_BYTES_MAX],
                                int *err)
{
    *err = 0;
    if (snap->snap_config == NULL)
        return 0;
    if (config_encoded_len(snap->snap_config) == 0) {
        *err = PEER_ECONFIG; /* raft_config_encode cannot even write it */
        return 0;
    }
    size_t n = raft_config_encode(snap->snap_config, buf);
    BASE_ASSERT(n == config_encoded_len(snap->snap_config));
    return n;
}

int peer_snap_encode(struct base_buf *out, const struct raft_msg *snap, uint64_t *offset,
                     size_t chunk_bytes)
{
    BASE_ASSERT(snap != NULL && offset != NULL && chunk_bytes > 0);
    BASE_ASSERT(snap->snap_len == 0 || snap->snap_data != NULL);
    if (snap->type != RAFT_MSG_SNAP)
        return PEER_ETYPE;
    if (*offset > snap->snap_len)
        return PEER_ECHUNK;
    size_t left = snap->snap_len - (size_t)*offset;
    size_t n = snap_chunk_max(chunk_bytes);
    n = left < n ? left : n;
    uint8_t config[RAFT_CONFIG_BYTES_MAX];
    int rc = 0;
    size_t config_len = *offset == 0 ? snap_config_bytes(snap, config, &rc) : 0;
    if (rc != 0)
        return rc;
    struct peer_snap_chunk c = {
        .term = snap->term,
        .snap_zxid = snap->snap_zxid,
        .total_bytes = snap->snap_len,
        .offset = *offset,
        .data = n > 0 ? snap->snap_data + *offset : NULL,
        .len = n,
        .config = config_len > 0 ? config : NULL,
        .config_len = config_len,
    };
    size_t before = out->len;
    rc = peer_encode_chunk(out, &c);
    if (rc != 0)
        return rc;
    /* PEER_SNAP_CHUNK_BYTES_MAX is derived from this layout: keep them paired */
    BASE_ASSERT(out->len - before == HDR + PEER_CHUNK_OVERHEAD_BYTES + n + config_len);
    *offset += n;
    BASE_ASSERT(*offset <= snap->snap_len);
    return *offset == snap->snap_len ? 1 : 0;
}

size_t peer_snap_frames_bytes(const struct raft_msg *snap, size_t chunk_bytes,
                              uint64_t *n_frames)
{
    BASE_ASSERT(snap != NULL && n_frames != NULL && chunk_bytes > 0);
    size_t chunk = snap_chunk_max(chunk_bytes);
    uint64_t n = snap->snap_len == 0 ? 1 : (snap->snap_len - 1) / chunk + 1;
    size_t config_len = snap->snap_config != NULL ? config_encoded_len(snap->snap_config) : 0;
    *n_frames = n;
    /* snap_data holds snap_len bytes in memory: far below where this could wrap */
    BASE_ASSERT(snap->snap_len <= (SIZE_MAX >> 8));
    return snap->snap_len + (size_t)n * (HDR + PEER_CHUNK_OVERHEAD_BYTES) + config_len;
}

/* ---- HELLO check -------------------------------------------------------------- */

int peer_hello_check(const struct peer_hello *h, uint32_t self_id, uint64_t cluster_id,
                     uint32_t expect_from)
{
    if (h->to != self_id)
        return PEER_EWRONG_SERVER;
    if (h->cluster_id != cluster_id)
        return PEER_EWRONG_CLUSTER;
    if (h->from == self_id || (expect_from != 0 && h->from != expect_from))
        return PEER_EWRONG_PEER;
    return 0;
}

/* ---- snapshot reassembly ------------------------------------------------------ */

void peer_snap_rx_init(struct peer_snap_rx *rx, uint64_t bytes_max)
{
    *rx = (struct peer_snap_rx){ .bytes_max = bytes_max };
}

void peer_snap_rx_reset(struct peer_snap_rx *rx)
{
    uint64_t bytes_max = rx->bytes_max;
    base_buf_free(&rx->buf);
    *rx = (struct peer_snap_rx){ .bytes_max = bytes_max };
}

/* <0: c belongs to an older snapshot than rx holds; 0: the same; >0: a
 * newer one, or rx holds none. Term first: a new leader's snapshot
 * replaces a deposed one's even at a lower zxid. */
static int rx_order(const struct peer_snap_rx *rx, const struct peer_snap_chunk *c)
{
    if (!rx->active || c->term != rx->term)
        return !rx->active || c->term > rx->term ? 1 : -1;
    return c->snap_zxid > rx->snap_zxid ? 1 : c->snap_zxid < rx->snap_zxid ? -1 : 0;
}

static int rx_start(struct peer_snap_rx *rx, const struct peer_snap_chunk *c)
{
    peer_snap_rx_reset(rx);
    if (c->total_bytes > rx->bytes_max)
        return PEER_ESNAP_BOUND;
    if (c->offset != 0)
        return PEER_ESNAP_GAP; /* a snapshot's first chunk, or a restart, is at 0 */
    rx->active = true;
    rx->term = c->term;
    rx->snap_zxid = c->snap_zxid;
    rx->total_bytes = c->total_bytes;
    rx->buf.max = (size_t)c->total_bytes; /* 0 is "no limit", but then no chunk has bytes */
    if (c->config_len > 0) {
        int rc = raft_config_decode(c->config, c->config_len, &rx->config);
        BASE_ASSERT(rc == RAFT_OK); /* check_chunk_fields decoded it already */
        rx->has_config = true;
    }
    return 0;
}

/* A chunk of the snapshot in progress, not at offset 0: it must continue it. */
static int rx_follows(const struct peer_snap_rx *rx, const struct peer_snap_chunk *c)
{
    if (c->total_bytes != rx->total_bytes)
        return PEER_ESNAP_TOTAL;
    if (c->offset > rx->buf.len)
        return PEER_ESNAP_GAP;
    if (c->offset < rx->buf.len)
        return PEER_ESNAP_OVERLAP;
    return 0;
}

int peer_snap_rx_push(struct peer_snap_rx *rx, const struct peer_snap_chunk *c,
                      struct raft_msg *out)
{
    int rc = check_chunk_fields(c);
    if (rc != 0)
        return rc;
    int order = rx_order(rx, c);
    if (order < 0)
        return PEER_ESNAP_STALE;
    rc = order > 0 || c->offset == 0 ? rx_start(rx, c) : rx_follows(rx, c);
    if (rc == 0 && base_buf_append(&rx->buf, c->data, c->len) != 0)
        rc = PEER_ENOMEM; /* not past max: rx_follows placed it inside total */
    if (rc != 0) {
        peer_snap_rx_reset(rx);
        return rc;
    }
    BASE_ASSERT(rx->buf.len <= rx->total_bytes && rx->total_bytes <= rx->bytes_max);
    if (rx->buf.len < rx->total_bytes)
        return 0;
    rx->done = true;
    *out = (struct raft_msg){
        .type = RAFT_MSG_SNAP,
        .term = rx->term,
        .snap_zxid = rx->snap_zxid,
        .snap_data = rx->buf.data != NULL ? rx->buf.data : (const uint8_t *)"",
        .snap_len = rx->buf.len,
        .snap_config = rx->has_config ? &rx->config : NULL,
    };
    return 1;
}

/* ---- names -------------------------------------------------------------------- */

const char *peer_frame_type_name(uint8_t type)
{
    const struct kind *k = kind_of(type);
    return k != NULL ? k->name : "?";
}

const char *peer_strerror(int err)
{
    switch (err) {
    case PEER_OK: return "ok";
    case PEER_ENOMEM: return "out of memory";
    case PEER_EFULL: return "output buffer full";
    case PEER_ETOOBIG: return "frame longer than the maximum";
    case PEER_ECRC: return "frame CRC mismatch";
    case PEER_ETRUNC: return "frame or field truncated";
    case PEER_ETRAILING: return "trailing bytes after the last field";
    case PEER_ETYPE: return "unknown frame type";
    case PEER_EMAGIC: return "not a Larch peer (bad HELLO magic)";
    case PEER_EVERSION: return "peer protocol version not spoken";
    case PEER_EID: return "server id out of range";
    case PEER_ETERM: return "term above the maximum";
    case PEER_EZXID: return "zxid out of range";
    case PEER_EORDER: return "entries not in increasing zxid order above prev_zxid";
    case PEER_EENTRY: return "unknown entry type";
    case PEER_ECOUNT: return "count above its bound or the bytes present";
    case PEER_EFLAGS: return "unknown flag bits";
    case PEER_ECHUNK: return "snapshot chunk outside its snapshot";
    case PEER_ESTRING: return "bad auth scheme or id";
    case PEER_EWRONG_SERVER: return "HELLO meant for another server";
    case PEER_EWRONG_CLUSTER: return "HELLO from another ensemble";
    case PEER_EWRONG_PEER: return "HELLO from an unexpected server";
    case PEER_ESNAP_STALE: return "chunk of an older snapshot";
    case PEER_ESNAP_BOUND: return "snapshot larger than allowed";
    case PEER_ESNAP_TOTAL: return "snapshot size changed between chunks";
    case PEER_ESNAP_GAP: return "snapshot chunk leaves a gap";
    case PEER_ESNAP_OVERLAP: return "snapshot chunk overlaps bytes received";
    case PEER_ECONFIG: return "membership that does not decode, or on a chunk past offset 0";
    default: return "unknown peer error";
    }
}
