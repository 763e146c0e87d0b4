/*
 * fuzz_peer — the quorum port's codec (replication/peer.h): frames as a
 * link receives them, and snapshot reassembly.
 *
 * Input: a mode byte, then bytes.
 *
 * Mode bit 0 clear: the bytes are a stream of frames, cut by
 * peer_frame_split as a link cuts its receive buffer, each decoded from an
 * exact-size copy into one struct peer_frame reused for all (as a link
 * reuses it). Bit 1 rewrites each frame's CRC first, so that mutations
 * reach the payload's own checks. Properties:
 *  - split and decode agree: a split error is PEER_ETOOBIG and so is the
 *    decode of that header; a tail split calls incomplete does not decode;
 *  - a frame that decodes re-encodes (peer_encode_frame) to the same bytes,
 *    and what it holds is in range (term, zxid order, entry types, chunk
 *    inside its snapshot, auth strings without NUL); every membership in
 *    it (a CONFIG entry's data, a chunk's config, only at offset 0)
 *    decodes, and re-encodes to the same bytes;
 *  - a frame that does not decode gets one of peer.h's codes, and
 *    peer_strerror names it;
 *  - so does it through the encoder for its type (peer_encode_msg, ...);
 *  - every SNAP_CHUNK that decodes goes to a reassembler (checked below).
 *
 * Bit 0 set: the bytes are chunk pushes for a reassembler bounded at
 * RX_BOUND bytes, each [key][total][offset][len] and then len bytes of data
 * (fewer if the input ends): key bits 0-1 pick snap_zxid 1-4, bits 2-3 the
 * term, bit 4 attaches a membership (bit 6 picks which of two), bit 5 a
 * broken one, bit 7 makes snap_zxid 0 (invalid). Properties, against a
 * model that keeps the bytes of every chunk taken and the membership of
 * the chunk that started its snapshot:
 *  - a chunk is taken only at offset 0 of a new snapshot, or at the end of
 *    the bytes taken so far of the same one, and only if its total is within
 *    the bound: received bytes never exceed the bound or the total, and the
 *    buffer's capacity stays within max(64, 2 x received);
 *  - what the reassembler holds is exactly the bytes taken, in order;
 *  - it completes (1) exactly when they reach the total, and hands out those
 *    bytes with the chunk's term and snap_zxid, and the model's membership
 *    (none: NULL); the snapshot it handed out, cut again by
 *    peer_snap_encode, decoded and reassembled, is the same, membership
 *    included;
 *  - a refusal either leaves it as it was (the chunk's own range error, a
 *    stale snapshot) or empties it.
 */
#include "replication/peer.h"
#include "tests/fuzz/fuzz.h"

#define RX_BOUND 200u

/* ---- the reassembler and its model ------------------------------------------- */

struct model {
    struct peer_snap_rx rx;
    bool active;
    uint32_t term;
    int64_t snap_zxid;
    uint64_t total;
    struct base_buf bytes; /* every byte taken, in order */
    bool has_config;       /* the membership its first chunk carried: */
    uint8_t config[RAFT_CONFIG_BYTES_MAX];
    size_t config_len;
};

/* ---- memberships -------------------------------------------------------------- */

/* Whether p[0..n) is a membership, and one with no other encoding. */
static bool config_canonical(const uint8_t *p, size_t n)
{
    static struct raft_config c;
    static uint8_t again[RAFT_CONFIG_BYTES_MAX];
    if (raft_config_decode(p, n, &c) != RAFT_OK)
        return false;
    size_t m = raft_config_encode(&c, again);
    BASE_ASSERT(m == n && !memcmp(again, p, n)); /* one encoding per membership */
    return true;
}

static bool config_equal(const struct raft_config *c, const uint8_t *p, size_t n)
{
    static uint8_t enc[RAFT_CONFIG_BYTES_MAX];
    if (c == NULL || p == NULL)
        return c == NULL && p == NULL;
    size_t m = raft_config_encode(c, enc);
    return m == n && !memcmp(enc, p, n);
}

/* Mode 1's memberships: two good ones and a broken one (a bad version). */
static uint8_t configs[3][64];
static size_t config_lens[3];

static void configs_init(void)
{
    if (config_lens[0] != 0)
        return;
    for (int i = 0; i < 2; i++) {
        struct raft_config c = { .n_members = 2u + (uint32_t)i, .extra_len = 4 };
        for (uint32_t j = 0; j < c.n_members; j++)
            c.members[j] = (struct raft_member){ j + 1, j != 2 };
        memcpy(c.extra, i ? "more" : "text", 4);
        BASE_ASSERT(5 + 2 * c.n_members + c.extra_len <= sizeof configs[i]);
        config_lens[i] = raft_config_encode(&c, configs[i]);
    }
    memcpy(configs[2], configs[0], config_lens[0]);
    config_lens[2] = config_lens[0];
    configs[2][0] ^= 0x40;
}

static bool newer(const struct model *m, const struct peer_snap_chunk *c)
{
    if (!m->active || c->term != m->term)
        return !m->active || c->term > m->term;
    return c->snap_zxid > m->snap_zxid;
}

static bool chunk_in_range(const struct peer_snap_chunk *c)
{
    return c->term <= RAFT_TERM_MAX && c->snap_zxid > 0 && c->offset <= c->total_bytes &&
           c->len <= c->total_bytes - c->offset && (c->len > 0 || c->total_bytes == 0) &&
           (c->config_len == 0 || (c->offset == 0 && config_canonical(c->config, c->config_len)));
}

static void check_rx_matches(const struct model *m)
{
    const struct peer_snap_rx *rx = &m->rx;
    BASE_ASSERT(rx->active == m->active && rx->buf.len == m->bytes.len);
    BASE_ASSERT(rx->buf.len <= RX_BOUND && (!rx->active || rx->buf.len <= rx->total_bytes));
    BASE_ASSERT(rx->buf.cap <= 64 || rx->buf.cap <= 2 * rx->buf.len);
    BASE_ASSERT(m->bytes.len == 0 || !memcmp(rx->buf.data, m->bytes.data, m->bytes.len));
    if (m->active)
        BASE_ASSERT(rx->term == m->term && rx->snap_zxid == m->snap_zxid &&
                    rx->total_bytes == m->total &&
                    config_equal(rx->has_config ? &rx->config : NULL,
                                 m->has_config ? m->config : NULL, m->config_len));
}

/* The model's side of a push the reassembler took. */
static void model_take(struct model *m, const struct peer_snap_chunk *c)
{
    bool restart = newer(m, c) || c->offset == 0;
    BASE_ASSERT(c->total_bytes <= RX_BOUND);
    BASE_ASSERT(restart ? c->offset == 0 : c->total_bytes == m->total && c->offset == m->bytes.len);
    if (restart) {
        m->bytes.len = 0;
        m->active = true;
        m->term = c->term;
        m->snap_zxid = c->snap_zxid;
        m->total = c->total_bytes;
        m->has_config = c->config_len > 0;
        m->config_len = c->config_len;
        BASE_ASSERT(c->config_len <= sizeof m->config); /* the reassembler took it: it decodes */
        if (c->config_len > 0)
            memcpy(m->config, c->config, c->config_len);
    } else {
        BASE_ASSERT(c->config_len == 0); /* only a chunk at 0 carries one */
    }
    BASE_ASSERT(base_buf_append(&m->bytes, c->data, c->len) == 0);
}

/* A completed snapshot goes out again through peer_snap_encode, in chunks
 * of a size the input picked, and must come back whole from a second
 * reassembler, each chunk through the decoder. */
static void resend(const struct raft_msg *snap, size_t chunk)
{
    struct peer_snap_rx rx;
    struct base_buf b = { 0 };
    struct peer_frame f = { 0 };
    struct raft_msg out = { 0 };
    uint64_t off = 0;
    int rc, pushed;
    peer_snap_rx_init(&rx, snap->snap_len);
    do {
        b.len = 0;
        rc = peer_snap_encode(&b, snap, &off, chunk);
        BASE_ASSERT(rc == 0 || rc == 1);
        BASE_ASSERT(peer_decode(b.data, b.len, &f) == 0 && f.type == PEER_SNAP_CHUNK);
        pushed = peer_snap_rx_push(&rx, &f.chunk, &out);
        BASE_ASSERT(pushed == rc);
    } while (rc == 0);
    BASE_ASSERT(off == snap->snap_len && out.snap_len == snap->snap_len);
    BASE_ASSERT(out.snap_len == 0 || !memcmp(out.snap_data, snap->snap_data, out.snap_len));
    BASE_ASSERT((out.snap_config == NULL) == (snap->snap_config == NULL));
    if (snap->snap_config != NULL) {
        uint8_t enc[RAFT_CONFIG_BYTES_MAX];
        size_t n = raft_config_encode(snap->snap_config, enc);
        BASE_ASSERT(config_equal(out.snap_config, enc, n));
    }
    peer_frame_free(&f);
    base_buf_free(&b);
    peer_snap_rx_reset(&rx);
}

static void push(struct model *m, const struct peer_snap_chunk *c)
{
    struct raft_msg out = { 0 };
    bool keeps = !chunk_in_range(c) || (m->active && !newer(m, c) &&
                                        (c->term != m->term || c->snap_zxid != m->snap_zxid));
    int rc = peer_snap_rx_push(&m->rx, c, &out);
    if (rc >= 0) {
        model_take(m, c);
        BASE_ASSERT((rc == 1) == (m->bytes.len == m->total));
    } else if (keeps) {
        BASE_ASSERT(rc == PEER_ESNAP_STALE || !chunk_in_range(c));
    } else {
        BASE_ASSERT(rc == PEER_ESNAP_BOUND || rc == PEER_ESNAP_TOTAL || rc == PEER_ESNAP_GAP ||
                    rc == PEER_ESNAP_OVERLAP);
        m->active = false;
        m->has_config = false;
        m->bytes.len = 0;
    }
    check_rx_matches(m);
    if (rc == 1) {
        BASE_ASSERT(out.type == RAFT_MSG_SNAP && out.term == c->term &&
                    out.snap_zxid == c->snap_zxid && out.snap_len == m->total);
        BASE_ASSERT(out.snap_data != NULL &&
                    (out.snap_len == 0 || !memcmp(out.snap_data, m->bytes.data, out.snap_len)));
        BASE_ASSERT(config_equal(out.snap_config, m->has_config ? m->config : NULL,
                                 m->config_len));
        resend(&out, 1 + c->len); /* chunk sizes the input picked, rarely tiny */
    }
}

static void run_chunks(struct model *m, const uint8_t *p, size_t n)
{
    while (n >= 4) {
        uint8_t key = p[0];
        size_t len = p[3] < n - 4 ? p[3] : n - 4;
        uint8_t *data = fuzz_dup(p + 4, len);
        int which = (key & 0x20) ? 2 : (key & 0x10) ? (key >> 6) & 1 : -1;
        uint8_t *conf = which >= 0 ? fuzz_dup(configs[which], config_lens[which]) : NULL;
        struct peer_snap_chunk c = {
            .term = (key >> 2) & 3u,
            .snap_zxid = (key & 0x80) ? 0 : 1 + (key & 3),
            .total_bytes = p[1],
            .offset = p[2],
            .data = data,
            .len = len,
            .config = conf,
            .config_len = which >= 0 ? config_lens[which] : 0,
        };
        push(m, &c);
        free(conf);
        free(data);
        p += 4 + len;
        n -= 4 + len;
    }
}

/* ---- frames ------------------------------------------------------------------- */

static void check_in_range(const struct peer_frame *f)
{
    const struct raft_msg *m = &f->msg;
    switch (f->type) {
    case PEER_HELLO:
        BASE_ASSERT(f->hello.from != f->hello.to && f->hello.version >= PEER_VERSION_MIN &&
                    f->hello.version <= PEER_VERSION_MAX);
        (void)peer_hello_check(&f->hello, f->hello.to, f->hello.cluster_id, f->hello.from);
        break;
    case PEER_SNAP_CHUNK:
        BASE_ASSERT(chunk_in_range(&f->chunk));
        break;
    case PEER_FORWARD:
        BASE_ASSERT(f->forward.n_auth <= PEER_FORWARD_AUTH_MAX);
        for (uint32_t i = 0; i < f->forward.n_auth; i++)
            BASE_ASSERT(f->forward.auth[i].scheme_len > 0 &&
                        !memchr(f->forward.auth[i].scheme, 0, f->forward.auth[i].scheme_len));
        break;
    case PEER_TOUCH:
        break;
    default:
        BASE_ASSERT(m->term <= RAFT_TERM_MAX && m->from == 0 && m->to == 0);
        for (uint32_t i = 0; i < m->n_entries; i++) {
            const struct raft_entry *e = &m->entries[i];
            BASE_ASSERT(e->zxid > (i > 0 ? m->entries[i - 1].zxid : m->prev_zxid));
            BASE_ASSERT(e->type == RAFT_ENTRY_NOOP || e->type == RAFT_ENTRY_DATA ||
                        (e->type == RAFT_ENTRY_CONFIG && config_canonical(e->data, e->len)));
        }
    }
}

/* f through the encoder a link calls for its type. */
static int encode_typed(struct base_buf *b, const struct peer_frame *f)
{
    switch (f->type) {
    case PEER_HELLO: return peer_encode_hello(b, &f->hello);
    case PEER_SNAP_CHUNK: return peer_encode_chunk(b, &f->chunk);
    case PEER_FORWARD: return peer_encode_forward(b, &f->forward);
    case PEER_TOUCH: return peer_encode_touch(b, f->touch.session_ids, f->touch.n);
    default: return peer_encode_msg(b, &f->msg);
    }
}

/* One frame, decoded from an exact-size copy into f. */
static void one_frame(struct model *m, struct peer_frame *f, const uint8_t *p, size_t n)
{
    uint8_t *copy = fuzz_dup(p, n);
    int rc = peer_decode(copy, n, f);
    if (rc != 0) {
        BASE_ASSERT(f->type == 0 && rc <= PEER_ENOMEM && rc >= PEER_ERR_LAST);
        BASE_ASSERT(strcmp(peer_strerror(rc), "unknown peer error") != 0);
        free(copy);
        return;
    }
    check_in_range(f);
    struct base_buf again = { 0 }, typed = { 0 };
    BASE_ASSERT(peer_encode_frame(&again, f) == 0);
    BASE_ASSERT(again.len == n && !memcmp(again.data, p, n));
    BASE_ASSERT(encode_typed(&typed, f) == 0);
    BASE_ASSERT(typed.len == n && !memcmp(typed.data, p, n));
    base_buf_free(&again);
    base_buf_free(&typed);
    if (f->type == PEER_SNAP_CHUNK && f->chunk.total_bytes <= 255)
        push(m, &f->chunk); /* totals the bound can meet; larger ones are BOUND every time */
    free(copy);
}

static void run_frames(struct model *m, uint8_t *p, size_t n, bool fix_crc)
{
    struct peer_frame f = { 0 };
    while (n > 0) {
        size_t len = 0;
        int rc = peer_frame_split(p, n, &len);
        if (rc == 0) { /* the link would wait for more: what it has does not decode */
            uint8_t *copy = fuzz_dup(p, n);
            BASE_ASSERT(peer_decode(copy, n, &f) == PEER_ETRUNC);
            free(copy);
            break;
        }
        if (rc < 0) {
            BASE_ASSERT(rc == PEER_ETOOBIG && peer_decode(p, n, &f) == PEER_ETOOBIG);
            break;
        }
        BASE_ASSERT(len >= PEER_FRAME_HEADER_BYTES && len <= n);
        if (fix_crc)
            base_put_be32(p + 4, base_crc32c(0, p + PEER_FRAME_HEADER_BYTES,
                                             len - PEER_FRAME_HEADER_BYTES));
        one_frame(m, &f, p, len);
        p += len;
        n -= len;
    }
    peer_frame_free(&f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    static struct model m; /* 4 KB of membership in its reassembler: not on the stack */
    configs_init();
    m = (struct model){ 0 };
    peer_snap_rx_init(&m.rx, RX_BOUND);
    uint8_t *bytes = fuzz_dup(data + 1, size - 1);
    if (data[0] & 1)
        run_chunks(&m, bytes, size - 1);
    else
        run_frames(&m, bytes, size - 1, (data[0] & 2) != 0);
    free(bytes);
    peer_snap_rx_reset(&m.rx);
    base_buf_free(&m.bytes);
    return 0;
}
