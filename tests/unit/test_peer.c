/*
 * test_peer — the quorum port's wire codec (replication/peer.h): a round
 * trip of every frame type at its boundary values, every decode error
 * (truncation at every length, every single-bit flip, each range rule on
 * both the encoder and the decoder), frame splitting, the HELLO checks, and
 * snapshot chunking and reassembly, memberships included (CONFIG entries in
 * an APPEND, the membership a snapshot carries). Frames are decoded from
 * exact-size heap copies, so the sanitizer builds catch a read one byte
 * past the end.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "replication/peer.h"

#define HDR PEER_FRAME_HEADER_BYTES
#define CLUSTER 0x1122334455667788ull

/* ---- helpers ------------------------------------------------------------------ */

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void fill_random(uint8_t *p, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)rng_next(&seed);
}

static uint8_t *dup_exact(const void *p, size_t n)
{
    uint8_t *c = malloc(n > 0 ? n : 1);
    assert_non_null(c);
    if (n > 0)
        memcpy(c, p, n);
    return c;
}

/* Decodes an exact-size copy of p[0..n) into *f; the copy is kept in *copy
 * (freed by the caller) because f borrows it. */
static int decode_copy(const uint8_t *p, size_t n, struct peer_frame *f, uint8_t **copy)
{
    *copy = dup_exact(p, n);
    return peer_decode(*copy, n, f);
}

static int decode_once(const uint8_t *p, size_t n)
{
    struct peer_frame f = { 0 };
    uint8_t *copy;
    int rc = decode_copy(p, n, &f, &copy);
    peer_frame_free(&f);
    free(copy);
    return rc;
}

/* Rewrites the header of the frame in b (starting at 0) for its payload as
 * it now is: length and CRC, so a test can reach the payload's own checks. */
static void reframe(struct base_buf *b)
{
    base_put_be32(b->data, (uint32_t)(b->len - HDR));
    base_put_be32(b->data + 4, base_crc32c(0, b->data + HDR, b->len - HDR));
}

static void frame_of_payload(struct base_buf *b, const void *payload, size_t n)
{
    b->len = 0;
    uint8_t header[HDR] = { 0 };
    assert_int_equal(base_buf_append(b, header, HDR), 0);
    assert_int_equal(base_buf_append(b, payload, n), 0);
    reframe(b);
}

/* ---- sample frames ------------------------------------------------------------ */

static const uint8_t data_a[] = { 1, 2, 3, 4, 5 };
/* raft_make_zxid(RAFT_TERM_MAX, c) as a constant expression */
#define TOP_ZXID(c) ((int64_t)(((uint64_t)RAFT_TERM_MAX << 32) | (c)))
static const struct raft_entry entries_max[] = {
    { TOP_ZXID(0), RAFT_ENTRY_NOOP, NULL, 0 },
    { TOP_ZXID(1), RAFT_ENTRY_DATA, data_a, 0 }, /* 0-length data */
    { TOP_ZXID(2), RAFT_ENTRY_DATA, data_a, sizeof data_a },
    { INT64_MAX, RAFT_ENTRY_DATA, data_a, 1 },
};
static const struct peer_auth auths[] = {
    { "digest", 6, "bob:fyVmFCwVbTJYrznoSu1koqYEYF0=", 32 },
    { "ip", 2, "198.18.1.3", 10 },
    { "x", 1, "", 0 },
};
static const int64_t touched[] = { 0x0100000000000001LL, INT64_MAX, INT64_MIN, 0, -1 };

/* A joint membership: servers 1-3 leaving for 2-4, with the driver's text. */
static struct raft_config joint_config(void)
{
    static const char extra[] = "server.4=127.0.0.4:2888:3888:participant;127.0.0.4:2181\n";
    struct raft_config c = { .n_members = 3, .n_old = 3, .extra_len = sizeof extra - 1 };
    for (uint32_t i = 0; i < 3; i++) {
        c.members[i] = (struct raft_member){ 2 + i, i != 2 };
        c.old[i] = (struct raft_member){ 1 + i, true };
    }
    memcpy(c.extra, extra, sizeof extra - 1);
    return c;
}

/* The largest membership raft_config_encode writes: RAFT_CONFIG_BYTES_MAX
 * (both halves full; their union may hold no more than RAFT_MEMBERS_MAX, so
 * they list the same servers, voting differently). */
static struct raft_config max_config(void)
{
    struct raft_config c = { .n_members = RAFT_MEMBERS_MAX, .n_old = RAFT_MEMBERS_MAX,
                             .extra_len = RAFT_CONFIG_EXTRA_MAX };
    for (uint32_t i = 0; i < RAFT_MEMBERS_MAX; i++) {
        c.members[i] = (struct raft_member){ 1 + i, true };
        c.old[i] = (struct raft_member){ 1 + i, i % 2 == 0 };
    }
    memset(c.extra, 'x', sizeof c.extra);
    return c;
}

static uint8_t joint_bytes[RAFT_CONFIG_BYTES_MAX];
static size_t joint_len; /* set by setup_joint */

static int setup_joint(void **state)
{
    (void)state;
    struct raft_config c = joint_config();
    joint_len = raft_config_encode(&c, joint_bytes);
    return 0;
}

/* An APPEND carrying a membership change between two data entries. */
static struct raft_entry entries_config[3];

#define N_SAMPLES 18

/* Frame i of the samples: every type, boundary values. */
static struct peer_frame sample(int i)
{
    struct peer_frame f = { 0 };
    struct raft_msg m = { .term = RAFT_TERM_MAX };
    switch (i) {
    case 0:
        f.type = PEER_HELLO;
        f.hello = (struct peer_hello){ PEER_VERSION_MAX, 1, 255, UINT64_MAX };
        return f;
    case 1:
        f.type = PEER_HELLO;
        f.hello = (struct peer_hello){ PEER_VERSION_MIN, 3, 2, 0 };
        return f;
    case 2: m.type = RAFT_MSG_VOTE_REQ; m.pre_vote = true; m.last_zxid = INT64_MAX; break;
    case 3: m.type = RAFT_MSG_VOTE_REQ; m.term = 0; break;
    case 4: m.type = RAFT_MSG_VOTE_RESP; m.pre_vote = true; m.reject = true; break;
    case 5:
        m.type = RAFT_MSG_APPEND;
        m.prev_zxid = raft_make_zxid(RAFT_TERM_MAX - 1, 7);
        m.commit_zxid = INT64_MAX;
        m.read_ctx = UINT64_MAX;
        m.digest = UINT64_MAX;
        m.digest_zxid = INT64_MAX;
        m.entries = entries_max;
        m.n_entries = 4;
        break;
    case 6: /* a commit notice */
        m.type = RAFT_MSG_APPEND;
        m.term = 1;
        m.read_ctx = 9;
        m.no_ack = true;
        break;
    case 7:
        m.type = RAFT_MSG_APPEND_RESP;
        m.reject = true;
        m.match_zxid = INT64_MAX;
        m.hint_zxid = 0;
        m.read_ctx = UINT64_MAX;
        m.snap_zxid = INT64_MAX;
        break;
    case 8: m.type = RAFT_MSG_READ_INDEX; m.read_ctx = UINT64_MAX; break;
    case 9: m.type = RAFT_MSG_READ_INDEX_RESP; m.reject = true; m.commit_zxid = INT64_MAX; break;
    case 10:
        f.type = PEER_SNAP_CHUNK;
        f.chunk = (struct peer_snap_chunk){ RAFT_TERM_MAX, INT64_MAX, 8, 3, data_a, 5, NULL, 0 };
        return f;
    case 11: /* the one chunk of an empty snapshot */
        f.type = PEER_SNAP_CHUNK;
        f.chunk = (struct peer_snap_chunk){ 0, 1, 0, 0, NULL, 0, NULL, 0 };
        return f;
    case 12:
        f.type = PEER_FORWARD;
        f.forward = (struct peer_forward){ INT64_MIN, INT32_MIN, INT32_MAX, data_a, 5, auths, 3, UINT32_MAX };
        return f;
    case 13:
        f.type = PEER_FORWARD;
        f.forward = (struct peer_forward){ 1, -1, 1, NULL, 0, NULL, 0, 0 };
        return f;
    case 14: f.type = PEER_TOUCH; f.touch = (struct peer_touch){ touched, 5 }; return f;
    case 15: f.type = PEER_TOUCH; f.touch = (struct peer_touch){ NULL, 0 }; return f;
    case 16:
        m.type = RAFT_MSG_APPEND;
        m.term = 7;
        m.prev_zxid = raft_make_zxid(7, 1);
        entries_config[0] = (struct raft_entry){ raft_make_zxid(7, 2), RAFT_ENTRY_DATA, data_a, 5 };
        entries_config[1] =
            (struct raft_entry){ raft_make_zxid(7, 3), RAFT_ENTRY_CONFIG, joint_bytes, joint_len };
        entries_config[2] = (struct raft_entry){ raft_make_zxid(7, 4), RAFT_ENTRY_DATA, data_a, 1 };
        m.entries = entries_config;
        m.n_entries = 3;
        break;
    case 17: /* a snapshot's first chunk, with the membership at its zxid */
        f.type = PEER_SNAP_CHUNK;
        f.chunk = (struct peer_snap_chunk){ 7, raft_make_zxid(7, 3), 8, 0, data_a, 5,
                                            joint_bytes, joint_len };
        return f;
    default: fail();
    }
    f.type = (uint8_t)(m.type == RAFT_MSG_VOTE_REQ       ? PEER_VOTE_REQ
                       : m.type == RAFT_MSG_VOTE_RESP    ? PEER_VOTE_RESP
                       : m.type == RAFT_MSG_APPEND       ? PEER_APPEND
                       : m.type == RAFT_MSG_APPEND_RESP  ? PEER_APPEND_RESP
                       : m.type == RAFT_MSG_READ_INDEX   ? PEER_READ_INDEX
                                                         : PEER_READ_INDEX_RESP);
    f.msg = m;
    return f;
}

static void encode_sample(struct base_buf *b, int i)
{
    struct peer_frame f = sample(i);
    b->len = 0;
    /* raft frames go through peer_encode_msg, the call the link makes */
    if (f.type >= PEER_VOTE_REQ && f.type <= PEER_READ_INDEX_RESP)
        assert_int_equal(peer_encode_msg(b, &f.msg), 0);
    else
        assert_int_equal(peer_encode_frame(b, &f), 0);
}

static bool bytes_eq(const void *a, size_t an, const void *b, size_t bn)
{
    return an == bn && (an == 0 || memcmp(a, b, an) == 0);
}

static void assert_msg_equal(const struct raft_msg *a, const struct raft_msg *b)
{
    assert_int_equal(a->type, b->type);
    assert_int_equal(a->term, b->term);
    assert_int_equal(a->from, 0);
    assert_int_equal(a->to, 0);
    bool flags_carried = a->type != RAFT_MSG_APPEND && a->type != RAFT_MSG_READ_INDEX;
    assert_int_equal(a->no_ack, a->type == RAFT_MSG_APPEND && b->no_ack);
    assert_int_equal(a->pre_vote, flags_carried && b->pre_vote &&
                                      (a->type == RAFT_MSG_VOTE_REQ || a->type == RAFT_MSG_VOTE_RESP));
    assert_int_equal(a->reject, flags_carried && b->reject && a->type != RAFT_MSG_VOTE_REQ);
    assert_true(a->last_zxid == b->last_zxid && a->prev_zxid == b->prev_zxid);
    assert_true(a->commit_zxid == b->commit_zxid && a->match_zxid == b->match_zxid);
    assert_true(a->hint_zxid == b->hint_zxid && a->read_ctx == b->read_ctx);
    /* only an APPEND carries the driver's digest, only an APPEND_RESP a want */
    bool append = a->type == RAFT_MSG_APPEND;
    assert_true(a->digest == (append ? b->digest : 0));
    assert_true(a->digest_zxid == (append ? b->digest_zxid : 0));
    assert_true(a->snap_zxid == (a->type == RAFT_MSG_APPEND_RESP ? b->snap_zxid : 0));
    assert_int_equal(a->n_entries, b->n_entries);
    for (uint32_t i = 0; i < a->n_entries; i++) {
        const struct raft_entry *x = &a->entries[i], *y = &b->entries[i];
        assert_true(x->zxid == y->zxid);
        assert_int_equal(x->type, y->type);
        assert_true(bytes_eq(x->data, x->len, y->data, y->len));
    }
}

static void assert_frame_equal(const struct peer_frame *a, const struct peer_frame *b)
{
    assert_int_equal(a->type, b->type);
    switch (a->type) {
    case PEER_HELLO:
        assert_memory_equal(&a->hello, &b->hello, sizeof a->hello);
        break;
    case PEER_SNAP_CHUNK:
        assert_true(a->chunk.term == b->chunk.term && a->chunk.snap_zxid == b->chunk.snap_zxid);
        assert_true(a->chunk.total_bytes == b->chunk.total_bytes);
        assert_true(a->chunk.offset == b->chunk.offset);
        assert_true(bytes_eq(a->chunk.data, a->chunk.len, b->chunk.data, b->chunk.len));
        assert_true(bytes_eq(a->chunk.config, a->chunk.config_len, b->chunk.config,
                             b->chunk.config_len));
        break;
    case PEER_FORWARD:
        assert_true(a->forward.session_id == b->forward.session_id);
        assert_true(a->forward.cxid == b->forward.cxid && a->forward.op == b->forward.op);
        assert_true(bytes_eq(a->forward.body, a->forward.body_len, b->forward.body,
                             b->forward.body_len));
        assert_int_equal(a->forward.n_auth, b->forward.n_auth);
        for (uint32_t i = 0; i < a->forward.n_auth; i++) {
            const struct peer_auth *x = &a->forward.auth[i], *y = &b->forward.auth[i];
            assert_true(bytes_eq(x->scheme, x->scheme_len, y->scheme, y->scheme_len));
            assert_true(bytes_eq(x->id, x->id_len, y->id, y->id_len));
        }
        break;
    case PEER_TOUCH:
        assert_true(bytes_eq(a->touch.session_ids, a->touch.n * 8u, b->touch.session_ids,
                             b->touch.n * 8u));
        break;
    default:
        assert_msg_equal(&a->msg, &b->msg);
    }
}

/* ---- round trips -------------------------------------------------------------- */

static void test_round_trip_every_type(void **state)
{
    (void)state;
    struct base_buf b = { 0 }, again = { 0 };
    struct peer_frame f = { 0 }; /* reused across frames, as a link does */
    for (int i = 0; i < N_SAMPLES; i++) {
        encode_sample(&b, i);
        struct peer_frame want = sample(i);
        uint8_t *copy;
        assert_int_equal(decode_copy(b.data, b.len, &f, &copy), 0);
        assert_frame_equal(&f, &want);
        again.len = 0;
        assert_int_equal(peer_encode_frame(&again, &f), 0);
        assert_true(bytes_eq(again.data, again.len, b.data, b.len));
        size_t n = 0;
        assert_int_equal(peer_frame_split(b.data, b.len, &n), 1);
        assert_int_equal(n, b.len);
        assert_string_not_equal(peer_frame_type_name(f.type), "?");
        free(copy);
    }
    peer_frame_free(&f);
    base_buf_free(&b);
    base_buf_free(&again);
}

static void test_known_bytes(void **state)
{
    (void)state;
    struct base_buf b = { 0 };
    struct raft_msg m = { .type = RAFT_MSG_READ_INDEX, .term = 2, .read_ctx = 0x0102 };
    assert_int_equal(peer_encode_msg(&b, &m), 0);
    static const uint8_t payload[] = { 6, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 1, 2 };
    assert_int_equal(b.len, HDR + sizeof payload);
    assert_int_equal(base_get_be32(b.data), sizeof payload);
    assert_int_equal(base_get_be32(b.data + 4), base_crc32c(0, payload, sizeof payload));
    assert_memory_equal(b.data + HDR, payload, sizeof payload);
    base_buf_free(&b);
}

static struct raft_entry *many_entries(uint32_t n)
{
    struct raft_entry *e = calloc(n, sizeof *e);
    assert_non_null(e);
    for (uint32_t i = 0; i < n; i++)
        e[i] = (struct raft_entry){ raft_make_zxid(5, i), i == 0 ? RAFT_ENTRY_NOOP : RAFT_ENTRY_DATA,
                                    data_a, i % 6 };
    return e;
}

static void test_max_entries(void **state)
{
    (void)state;
    struct raft_entry *e = many_entries(PEER_APPEND_ENTRIES_MAX + 1);
    struct raft_msg m = { .type = RAFT_MSG_APPEND, .term = 5, .entries = e,
                          .n_entries = PEER_APPEND_ENTRIES_MAX };
    struct base_buf b = { 0 }, again = { 0 };
    struct peer_frame f = { 0 };
    uint8_t *copy;
    assert_int_equal(peer_encode_msg(&b, &m), 0);
    assert_int_equal(decode_copy(b.data, b.len, &f, &copy), 0);
    assert_msg_equal(&f.msg, &m);
    assert_int_equal(peer_encode_frame(&again, &f), 0);
    assert_true(bytes_eq(again.data, again.len, b.data, b.len));
    free(copy);
    /* one more is refused by the encoder, and by the decoder (count patched) */
    m.n_entries++;
    size_t len = b.len;
    assert_int_equal(peer_encode_msg(&b, &m), PEER_ECOUNT);
    assert_int_equal(b.len, len);
    base_put_be32(b.data + HDR + 46, PEER_APPEND_ENTRIES_MAX + 1);
    reframe(&b);
    assert_int_equal(decode_once(b.data, b.len), PEER_ECOUNT);
    /* a small frame decoded into the same struct after the big one */
    encode_sample(&b, 6);
    assert_int_equal(decode_copy(b.data, b.len, &f, &copy), 0);
    assert_int_equal(f.msg.n_entries, 0);
    free(copy);
    peer_frame_free(&f);
    free(e);
    base_buf_free(&b);
    base_buf_free(&again);
}

/* The largest chunk, with the largest membership, fits exactly; one more
 * byte is PEER_ETOOBIG, refused before anything is copied. */
static void test_frame_size_limit(void **state)
{
    (void)state;
    uint8_t *big = calloc(PEER_SNAP_CHUNK_BYTES_MAX + 1, 1);
    assert_non_null(big);
    struct raft_config conf = max_config();
    static uint8_t conf_bytes[RAFT_CONFIG_BYTES_MAX];
    assert_int_equal(raft_config_encode(&conf, conf_bytes), RAFT_CONFIG_BYTES_MAX);
    struct peer_snap_chunk c = { 1, 1, PEER_SNAP_CHUNK_BYTES_MAX + 1, 0, big,
                                 PEER_SNAP_CHUNK_BYTES_MAX + 1, conf_bytes,
                                 RAFT_CONFIG_BYTES_MAX };
    struct base_buf b = { 0 };
    assert_int_equal(peer_encode_chunk(&b, &c), PEER_ETOOBIG);
    assert_int_equal(b.len, 0);
    c.len--;
    assert_int_equal(peer_encode_chunk(&b, &c), 0);
    assert_int_equal(b.len, HDR + PEER_FRAME_BYTES_MAX);
    assert_int_equal(decode_once(b.data, b.len), 0);
    /* peer_snap_encode clamps its chunk size to what fits beside the membership */
    struct raft_msg snap = { .type = RAFT_MSG_SNAP, .term = 1, .snap_zxid = 1, .snap_data = big,
                             .snap_len = PEER_SNAP_CHUNK_BYTES_MAX + 1, .snap_config = &conf };
    uint64_t off = 0, n_frames = 0;
    size_t want = peer_snap_frames_bytes(&snap, SIZE_MAX, &n_frames);
    assert_int_equal(n_frames, 2);
    b.len = 0;
    assert_int_equal(peer_snap_encode(&b, &snap, &off, SIZE_MAX), 0);
    assert_true(off == PEER_SNAP_CHUNK_BYTES_MAX);
    assert_int_equal(b.len, HDR + PEER_FRAME_BYTES_MAX);
    assert_int_equal(peer_snap_encode(&b, &snap, &off, SIZE_MAX), 1);
    assert_true(off == snap.snap_len);
    assert_int_equal(b.len, want);
    free(big);
    base_buf_free(&b);
}

static void test_encode_into_full_buffer(void **state)
{
    (void)state;
    struct base_buf b = { .max = 22 };
    struct peer_frame f = sample(3); /* VOTE_REQ: 8 + 14 bytes */
    assert_int_equal(base_buf_append(&b, "x", 1), 0);
    assert_int_equal(peer_encode_msg(&b, &f.msg), PEER_EFULL);
    assert_int_equal(b.len, 1);
    b.max = 23;
    assert_int_equal(peer_encode_msg(&b, &f.msg), 0);
    assert_int_equal(b.len, 23);
    base_buf_free(&b);
}

/* ---- decode errors ------------------------------------------------------------ */

static void test_truncated_at_every_length(void **state)
{
    (void)state;
    struct base_buf b = { 0 }, cut = { 0 };
    for (int i = 0; i < N_SAMPLES; i++) {
        encode_sample(&b, i);
        for (size_t n = 0; n < b.len; n++) {
            assert_int_equal(decode_once(b.data, n), PEER_ETRUNC);
            size_t got = 99;
            assert_int_equal(peer_frame_split(b.data, n, &got), 0);
            assert_int_equal(got, 99);
        }
        /* the payload cut short under a header that matches it */
        for (size_t n = 0; n < b.len - HDR; n++) {
            frame_of_payload(&cut, b.data + HDR, n);
            int rc = decode_once(cut.data, cut.len);
            assert_true(rc == PEER_ETRUNC || rc == PEER_ECOUNT);
        }
        /* and one byte too many, outside the frame and inside it */
        assert_int_equal(base_buf_append(&b, "", 1), 0);
        assert_int_equal(decode_once(b.data, b.len), PEER_ETRAILING);
        reframe(&b);
        assert_int_equal(decode_once(b.data, b.len), PEER_ETRAILING);
    }
    base_buf_free(&b);
    base_buf_free(&cut);
}

/* CRC-32C catches every single-bit error in the payload; a flip in the
 * header breaks the length or the CRC. So every flip is an error. */
static void test_every_bit_flip_is_an_error(void **state)
{
    (void)state;
    struct base_buf b = { 0 };
    for (int i = 0; i < N_SAMPLES; i++) {
        encode_sample(&b, i);
        for (size_t bit = 0; bit < b.len * 8; bit++) {
            b.data[bit / 8] ^= (uint8_t)(1u << (bit % 8));
            int rc = decode_once(b.data, b.len);
            if (bit < 32)
                assert_true(rc == PEER_ETRUNC || rc == PEER_ETRAILING || rc == PEER_ETOOBIG);
            else
                assert_int_equal(rc, PEER_ECRC);
            b.data[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        }
        assert_int_equal(decode_once(b.data, b.len), 0);
    }
    base_buf_free(&b);
}

/* Sample i with the payload byte at off set to v and the header fixed. */
static int decode_patched(int i, size_t off, const void *v, size_t n)
{
    struct base_buf b = { 0 };
    encode_sample(&b, i);
    assert_true(HDR + off + n <= b.len);
    memcpy(b.data + HDR + off, v, n);
    reframe(&b);
    int rc = decode_once(b.data, b.len);
    base_buf_free(&b);
    return rc;
}

static int decode_patched32(int i, size_t off, uint32_t v)
{
    uint8_t be[4];
    base_put_be32(be, v);
    return decode_patched(i, off, be, 4);
}

static int decode_patched64(int i, size_t off, uint64_t v)
{
    uint8_t be[8];
    base_put_be64(be, v);
    return decode_patched(i, off, be, 8);
}

static void test_decode_refuses_bad_header_and_hello(void **state)
{
    (void)state;
    uint8_t v;
    /* type byte */
    for (int t = 0; t < 256; t++) {
        v = (uint8_t)t;
        int rc = decode_patched(3, 0, &v, 1);
        if (t < PEER_HELLO || t > PEER_TOUCH)
            assert_int_equal(rc, PEER_ETYPE);
        else
            assert_int_not_equal(rc, PEER_ETYPE);
    }
    struct base_buf b = { 0 };
    frame_of_payload(&b, "", 0);
    assert_int_equal(decode_once(b.data, b.len), PEER_ETRUNC);
    /* HELLO: magic, version, ids */
    assert_int_equal(decode_patched32(0, 1, 0x4c525053), PEER_EMAGIC);
    assert_int_equal(decode_patched(0, 5, "\x01", 1), PEER_EVERSION); /* version 258 */
    assert_int_equal(decode_patched(0, 6, "\x00", 1), PEER_EVERSION); /* version 0 */
    assert_int_equal(decode_patched(0, 6, "\x04", 1), PEER_EVERSION);
    /* version 1: no CONFIG entries, no membership in SNAP_CHUNK (peer.h) */
    assert_int_equal(decode_patched(0, 6, "\x01", 1), PEER_EVERSION);
    /* version 2: no term in FORWARD */
    assert_int_equal(decode_patched(0, 6, "\x02", 1), PEER_EVERSION);
    assert_int_equal(decode_patched32(0, 7, 0), PEER_EID);
    assert_int_equal(decode_patched32(0, 11, 256), PEER_EID);
    assert_int_equal(decode_patched32(0, 11, 1), PEER_EID); /* from == to */
    /* the header alone */
    encode_sample(&b, 3);
    base_put_be32(b.data, PEER_FRAME_BYTES_MAX + 1);
    assert_int_equal(decode_once(b.data, b.len), PEER_ETOOBIG);
    base_buf_free(&b);
}

static void test_decode_refuses_bad_message_fields(void **state)
{
    (void)state;
    /* terms, zxids, flags */
    assert_int_equal(decode_patched32(2, 1, RAFT_TERM_MAX + 1), PEER_ETERM);
    assert_int_equal(decode_patched64(2, 6, (uint64_t)-1), PEER_EZXID);
    assert_int_equal(decode_patched(2, 5, "\x03", 1), PEER_EFLAGS);
    assert_int_equal(decode_patched(4, 5, "\x04", 1), PEER_EFLAGS);
    assert_int_equal(decode_patched(7, 5, "\x01", 1), PEER_EFLAGS);
    assert_int_equal(decode_patched(9, 5, "\x80", 1), PEER_EFLAGS);
    assert_int_equal(decode_patched64(7, 6, (uint64_t)INT64_MIN), PEER_EZXID);
    assert_int_equal(decode_patched64(7, 14, (uint64_t)-2), PEER_EZXID);
    assert_int_equal(decode_patched64(9, 6, (uint64_t)-1), PEER_EZXID);
    /* APPEND: 1 type, 4 term, 1 flags, 8 prev, 8 commit, 8 ctx, 8 digest,
     * 8 digest zxid, 4 n, then entries */
    assert_int_equal(decode_patched(5, 5, "\x01", 1), PEER_EFLAGS); /* only no_ack */
    assert_int_equal(decode_patched(6, 5, "\x02", 1), PEER_EFLAGS);
    assert_int_equal(decode_patched64(5, 6, (uint64_t)-1), PEER_EZXID);
    assert_int_equal(decode_patched64(5, 14, (uint64_t)-1), PEER_EZXID);
    assert_int_equal(decode_patched64(5, 38, (uint64_t)-1), PEER_EZXID); /* digest zxid */
    assert_int_equal(decode_patched64(5, 6, (uint64_t)raft_make_zxid(RAFT_TERM_MAX, 0)),
                     PEER_EORDER); /* first entry not above prev */
    assert_int_equal(decode_patched64(5, 63, (uint64_t)raft_make_zxid(RAFT_TERM_MAX, 0)),
                     PEER_EORDER); /* second entry equal to the first */
    assert_int_equal(decode_patched(5, 58, "\x04", 1), PEER_EENTRY);
    assert_int_equal(decode_patched(5, 58, "\x00", 1), PEER_EENTRY);
    /* a NOOP made a CONFIG: its empty data is not a membership */
    assert_int_equal(decode_patched(5, 58, "\x03", 1), PEER_ECONFIG);
    assert_int_equal(decode_patched32(5, 1, RAFT_TERM_MAX - 1), PEER_ETERM); /* entry ahead */
    assert_int_equal(decode_patched32(5, 46, 5), PEER_ECOUNT);
    assert_int_equal(decode_patched32(5, 46, UINT32_MAX), PEER_ECOUNT);
    /* APPEND_RESP: 1, 4 term, 1 flags, 8 match, 8 hint, 8 ctx, 8 want */
    assert_int_equal(decode_patched64(7, 30, (uint64_t)-1), PEER_EZXID);
    /* SNAP_CHUNK: 1, 4 term, 8 zxid, 8 total, 8 offset, 4 len */
    assert_int_equal(decode_patched32(10, 1, UINT32_MAX), PEER_ETERM);
    assert_int_equal(decode_patched64(10, 5, 0), PEER_EZXID);
    assert_int_equal(decode_patched64(10, 13, 7), PEER_ECHUNK);  /* 3 + 5 > 7 */
    assert_int_equal(decode_patched64(10, 21, 4), PEER_ECHUNK);
    assert_int_equal(decode_patched64(10, 21, UINT64_MAX), PEER_ECHUNK);
    assert_int_equal(decode_patched64(11, 13, 1), PEER_ECHUNK); /* empty chunk, total 1 */
    assert_int_equal(decode_patched32(10, 29, 6), PEER_ETRUNC);
    /* FORWARD: 1, 4 term, 8 session, 4 cxid, 4 op, 4+5 body, 4 n, 4+6 "digest" ... */
    assert_int_equal(decode_patched32(12, 30, 10), PEER_ECOUNT); /* 73 bytes left: 9 at most */
    assert_int_equal(decode_patched32(12, 30, 4), PEER_ETRUNC);
    assert_int_equal(decode_patched32(12, 30, PEER_FORWARD_AUTH_MAX + 1), PEER_ECOUNT);
    assert_int_equal(decode_patched(12, 38, "\x00", 1), PEER_ESTRING);
    assert_int_equal(decode_patched(12, 48, "\x00", 1), PEER_ESTRING); /* in the id */
    assert_int_equal(decode_patched32(12, 21, 1000), PEER_ETRUNC); /* body runs long */
    /* TOUCH: 1, 4 n */
    assert_int_equal(decode_patched32(14, 1, 6), PEER_ECOUNT);
    assert_int_equal(decode_patched32(14, 1, 4), PEER_ETRAILING);
}

/* Every value the decoder refuses, the encoder refuses with the same code
 * and without writing anything. */
static void assert_encode_refuses(const struct peer_frame *f, int want)
{
    struct base_buf b = { 0 };
    assert_int_equal(base_buf_append(&b, "keep", 4), 0);
    assert_int_equal(peer_encode_frame(&b, f), want);
    assert_int_equal(b.len, 4);
    base_buf_free(&b);
}

static void test_encode_refuses_bad_fields(void **state)
{
    (void)state;
    struct peer_frame f = sample(0);
    f.hello.version = PEER_VERSION_MAX + 1;
    assert_encode_refuses(&f, PEER_EVERSION);
    f.hello.version = PEER_VERSION_MIN - 1;
    assert_encode_refuses(&f, PEER_EVERSION);
    f = sample(0);
    f.hello.from = 0;
    assert_encode_refuses(&f, PEER_EID);
    f.hello.from = f.hello.to;
    assert_encode_refuses(&f, PEER_EID);
    f = sample(2);
    f.msg.term = RAFT_TERM_MAX + 1;
    assert_encode_refuses(&f, PEER_ETERM);
    f = sample(2);
    f.msg.last_zxid = -1;
    assert_encode_refuses(&f, PEER_EZXID);
    f.msg.type = RAFT_MSG_APPEND; /* frame type and message type disagree */
    f.msg.last_zxid = 0;
    assert_encode_refuses(&f, PEER_ETYPE);
    f = sample(4);
    f.msg.last_zxid = -1; /* VOTE_RESP does not carry it: neither checked nor written */
    struct base_buf ok = { 0 };
    assert_int_equal(peer_encode_frame(&ok, &f), 0);
    base_buf_free(&ok);
    struct raft_entry e[4];
    memcpy(e, entries_max, sizeof e);
    f = sample(5);
    f.msg.entries = e;
    e[1].zxid = e[0].zxid;
    assert_encode_refuses(&f, PEER_EORDER);
    memcpy(e, entries_max, sizeof e);
    f.msg.prev_zxid = e[0].zxid;
    assert_encode_refuses(&f, PEER_EORDER);
    f = sample(5);
    f.msg.entries = e;
    e[2].type = 9;
    assert_encode_refuses(&f, PEER_EENTRY);
    e[2].type = RAFT_ENTRY_CONFIG; /* data_a is no membership */
    assert_encode_refuses(&f, PEER_ECONFIG);
    f = sample(10);
    f.chunk.snap_zxid = 0;
    assert_encode_refuses(&f, PEER_EZXID);
    f = sample(10);
    f.chunk.offset = 4;
    assert_encode_refuses(&f, PEER_ECHUNK);
    struct peer_auth a[2] = { auths[0], auths[1] };
    f = sample(12);
    f.forward.auth = a;
    f.forward.n_auth = 2;
    a[1].scheme_len = 0;
    assert_encode_refuses(&f, PEER_ESTRING);
    a[1] = (struct peer_auth){ "ip", 2, "1.2\0", 4 };
    assert_encode_refuses(&f, PEER_ESTRING);
    f.forward.n_auth = PEER_FORWARD_AUTH_MAX + 1;
    assert_encode_refuses(&f, PEER_ECOUNT);
    f.type = 0;
    assert_encode_refuses(&f, PEER_ETYPE);
    f.type = 11;
    assert_encode_refuses(&f, PEER_ETYPE);
    struct raft_msg snap = { .type = RAFT_MSG_SNAP, .term = 1, .snap_zxid = 1 };
    struct base_buf b = { 0 };
    assert_int_equal(peer_encode_msg(&b, &snap), PEER_ETYPE);
    snap.type = 99;
    assert_int_equal(peer_encode_msg(&b, &snap), PEER_ETYPE);
    assert_int_equal(b.len, 0);
}

static void test_frame_split(void **state)
{
    (void)state;
    struct base_buf b = { 0 };
    encode_sample(&b, 5);
    size_t one = b.len;
    struct peer_frame f = sample(8);
    assert_int_equal(peer_encode_msg(&b, &f.msg), 0);
    size_t n = 0;
    for (size_t len = 0; len < one; len++)
        assert_int_equal(peer_frame_split(b.data, len, &n), 0);
    for (size_t len = one; len <= b.len; len++) {
        assert_int_equal(peer_frame_split(b.data, len, &n), 1);
        assert_int_equal(n, one);
    }
    assert_int_equal(peer_frame_split(b.data + one, b.len - one, &n), 1);
    assert_int_equal(one + n, b.len);
    /* over the max: known from the 8 header bytes alone, before any payload */
    uint8_t hdr[HDR] = { 0 };
    base_put_be32(hdr, PEER_FRAME_BYTES_MAX + 1);
    assert_int_equal(peer_frame_split(hdr, 7, &n), 0);
    assert_int_equal(peer_frame_split(hdr, HDR, &n), PEER_ETOOBIG);
    base_put_be32(hdr, UINT32_MAX);
    assert_int_equal(peer_frame_split(hdr, HDR, &n), PEER_ETOOBIG);
    base_put_be32(hdr, PEER_FRAME_BYTES_MAX);
    assert_int_equal(peer_frame_split(hdr, HDR, &n), 0); /* the max itself is fine */
    base_buf_free(&b);
}

static void test_hello_check(void **state)
{
    (void)state;
    struct peer_hello h = { PEER_VERSION_MAX, 3, 2, CLUSTER };
    assert_int_equal(peer_hello_check(&h, 2, CLUSTER, 3), 0);
    assert_int_equal(peer_hello_check(&h, 2, CLUSTER, 0), 0);
    assert_int_equal(peer_hello_check(&h, 1, CLUSTER, 3), PEER_EWRONG_SERVER);
    assert_int_equal(peer_hello_check(&h, 2, CLUSTER + 1, 3), PEER_EWRONG_CLUSTER);
    assert_int_equal(peer_hello_check(&h, 2, CLUSTER, 4), PEER_EWRONG_PEER);
    h.from = 2;
    assert_int_equal(peer_hello_check(&h, 2, CLUSTER, 0), PEER_EWRONG_PEER);
    /* through the wire */
    struct base_buf b = { 0 };
    struct peer_frame f = { 0 };
    uint8_t *copy;
    h.from = 3;
    assert_int_equal(peer_encode_hello(&b, &h), 0);
    assert_int_equal(decode_copy(b.data, b.len, &f, &copy), 0);
    assert_int_equal(f.type, PEER_HELLO);
    assert_int_equal(peer_hello_check(&f.hello, 2, CLUSTER, 3), 0);
    free(copy);
    peer_frame_free(&f);
    base_buf_free(&b);
}

static void test_strerror_names_every_code(void **state)
{
    (void)state;
    const char *seen[32] = { 0 };
    int n = 0;
    for (int code = PEER_ERR_LAST; code <= PEER_ENOMEM; code++) {
        const char *s = peer_strerror(code);
        assert_true(strlen(s) > 0 && strcmp(s, "unknown peer error") != 0);
        for (int i = 0; i < n; i++)
            assert_string_not_equal(s, seen[i]);
        seen[n++] = s;
    }
    assert_int_equal(n, 27);
    assert_string_equal(peer_strerror(PEER_ERR_LAST - 1), "unknown peer error");
    assert_string_equal(peer_strerror(-1), "unknown peer error");
    assert_string_equal(peer_frame_type_name(0), "?");
    assert_string_equal(peer_frame_type_name(PEER_SNAP_CHUNK), "SNAP_CHUNK");
}

/* ---- snapshots ---------------------------------------------------------------- */

/* Chunks snap (chunk bytes each), decodes every frame and pushes it into
 * rx; returns the completed message (the last push's). */
static struct raft_msg send_snapshot(struct peer_snap_rx *rx, const struct raft_msg *snap,
                                     size_t chunk)
{
    struct base_buf b = { 0 };
    struct peer_frame f = { 0 };
    struct raft_msg got = { 0 };
    uint64_t off = 0;
    int rc, pushed = 0, frames = 0;
    do {
        b.len = 0;
        rc = peer_snap_encode(&b, snap, &off, chunk);
        assert_true(rc == 0 || rc == 1);
        assert_int_equal(peer_decode(b.data, b.len, &f), 0);
        assert_int_equal(f.type, PEER_SNAP_CHUNK);
        assert_true(f.chunk.len <= chunk);
        pushed = peer_snap_rx_push(rx, &f.chunk, &got);
        assert_int_equal(pushed, rc); /* complete exactly at the last chunk */
        frames++;
    } while (rc == 0);
    assert_int_equal(frames, snap->snap_len == 0 ? 1 : (snap->snap_len + chunk - 1) / chunk);
    peer_frame_free(&f);
    base_buf_free(&b);
    return got;
}

/* Two memberships are equal when they encode alike (one encoding each). */
static void assert_config_equal(const struct raft_config *a, const struct raft_config *b)
{
    static uint8_t ea[RAFT_CONFIG_BYTES_MAX], eb[RAFT_CONFIG_BYTES_MAX];
    if (a == NULL || b == NULL) {
        assert_true(a == b);
        return;
    }
    size_t na = raft_config_encode(a, ea), nb = raft_config_encode(b, eb);
    assert_true(bytes_eq(ea, na, eb, nb));
}

static void assert_snap(const struct raft_msg *got, const struct raft_msg *snap)
{
    assert_int_equal(got->type, RAFT_MSG_SNAP);
    assert_int_equal(got->term, snap->term);
    assert_true(got->snap_zxid == snap->snap_zxid);
    assert_non_null(got->snap_data);
    assert_true(bytes_eq(got->snap_data, got->snap_len, snap->snap_data, snap->snap_len));
    assert_config_equal(got->snap_config, snap->snap_config);
}

static void test_snap_in_order(void **state)
{
    (void)state;
    uint8_t data[1000];
    fill_random(data, sizeof data, 1);
    struct raft_msg snap = { .type = RAFT_MSG_SNAP, .term = 3, .snap_zxid = raft_make_zxid(3, 9),
                             .snap_data = data, .snap_len = sizeof data };
    struct peer_snap_rx rx;
    peer_snap_rx_init(&rx, sizeof data);
    static const size_t chunks[] = { 1, 7, 999, 1000, 4096 };
    for (size_t i = 0; i < sizeof chunks / sizeof chunks[0]; i++) {
        snap.snap_zxid++; /* a newer snapshot each time: restarts */
        struct raft_msg got = send_snapshot(&rx, &snap, chunks[i]);
        assert_snap(&got, &snap);
        assert_true(rx.buf.cap <= 2 * sizeof data);
    }
    /* the same snapshot sent again from the start replaces the one held */
    struct raft_msg got = send_snapshot(&rx, &snap, 300);
    assert_snap(&got, &snap);
    /* an empty snapshot is one empty chunk */
    snap.snap_data = NULL;
    snap.snap_len = 0;
    snap.term = 4;
    got = send_snapshot(&rx, &snap, 10);
    assert_snap(&got, &snap);
    peer_snap_rx_reset(&rx);
    assert_null(rx.buf.data);
    assert_false(rx.active);
    assert_true(rx.bytes_max == sizeof data);
}

static int push(struct peer_snap_rx *rx, uint32_t term, int64_t zxid, uint64_t total,
                uint64_t off, size_t len)
{
    static uint8_t data[64];
    struct raft_msg out = { 0 };
    struct peer_snap_chunk c = { term, zxid, total, off, data, len, NULL, 0 };
    return peer_snap_rx_push(rx, &c, &out);
}

static void test_snap_refusals(void **state)
{
    (void)state;
    struct peer_snap_rx rx;
    peer_snap_rx_init(&rx, 100);
    /* a gap */
    assert_int_equal(push(&rx, 2, 50, 100, 0, 10), 0);
    assert_int_equal(push(&rx, 2, 50, 100, 11, 10), PEER_ESNAP_GAP);
    assert_false(rx.active);
    assert_null(rx.buf.data);
    /* a chunk that starts mid-way with nothing held is a gap too */
    assert_int_equal(push(&rx, 2, 50, 100, 10, 10), PEER_ESNAP_GAP);
    /* an overlap */
    assert_int_equal(push(&rx, 2, 50, 100, 0, 10), 0);
    assert_int_equal(push(&rx, 2, 50, 100, 10, 10), 0);
    assert_int_equal(push(&rx, 2, 50, 100, 15, 10), PEER_ESNAP_OVERLAP);
    assert_false(rx.active);
    /* the total changes */
    assert_int_equal(push(&rx, 2, 50, 100, 0, 10), 0);
    assert_int_equal(push(&rx, 2, 50, 99, 10, 10), PEER_ESNAP_TOTAL);
    /* above the bound, even for a newer snapshot */
    assert_int_equal(push(&rx, 2, 50, 100, 0, 10), 0);
    assert_int_equal(push(&rx, 3, 50, 101, 0, 10), PEER_ESNAP_BOUND);
    assert_false(rx.active);
    /* older snapshots are refused and leave the one in progress alone */
    assert_int_equal(push(&rx, 3, 60, 100, 0, 10), 0);
    assert_int_equal(push(&rx, 3, 59, 100, 10, 10), PEER_ESNAP_STALE);
    assert_int_equal(push(&rx, 2, 99, 100, 10, 10), PEER_ESNAP_STALE);
    assert_int_equal(rx.buf.len, 10);
    /* a newer one restarts: higher zxid, then higher term at a lower zxid */
    assert_int_equal(push(&rx, 3, 61, 50, 0, 20), 0);
    assert_int_equal(rx.buf.len, 20);
    assert_int_equal(push(&rx, 4, 10, 30, 0, 5), 0);
    assert_int_equal(rx.buf.len, 5);
    assert_int_equal(push(&rx, 4, 10, 30, 5, 25), 1);
    /* after completion, only a restart is taken */
    assert_int_equal(push(&rx, 4, 10, 30, 29, 1), PEER_ESNAP_OVERLAP);
    /* the chunk's own ranges, with rx kept */
    assert_int_equal(push(&rx, 4, 10, 30, 0, 5), 0);
    assert_int_equal(push(&rx, 4, 10, 30, 28, 5), PEER_ECHUNK);
    assert_int_equal(push(&rx, 4, 0, 30, 5, 5), PEER_EZXID);
    assert_int_equal(push(&rx, RAFT_TERM_MAX + 1, 10, 30, 5, 5), PEER_ETERM);
    assert_int_equal(push(&rx, 4, 10, 30, 5, 0), PEER_ECHUNK);
    assert_int_equal(rx.buf.len, 5);
    assert_int_equal(push(&rx, 4, 10, 30, 5, 25), 1);
    peer_snap_rx_reset(&rx);
}

static void test_snap_multi_mib(void **state)
{
    (void)state;
    size_t len = (5u << 20) + 12345;
    uint8_t *data = malloc(len);
    assert_non_null(data);
    fill_random(data, len, 7);
    struct raft_msg snap = { .type = RAFT_MSG_SNAP, .term = 9, .snap_zxid = raft_make_zxid(9, 1),
                             .snap_data = data, .snap_len = len };
    struct peer_snap_rx rx;
    peer_snap_rx_init(&rx, 8u << 20);
    struct raft_msg got = send_snapshot(&rx, &snap, 4096);
    assert_snap(&got, &snap);
    assert_true(rx.buf.cap < 2 * len);
    peer_snap_rx_reset(&rx);
    /* the same bytes, one bound too small: refused at the first chunk */
    peer_snap_rx_init(&rx, len - 1);
    struct peer_snap_chunk c = { 9, 1, len, 0, data, 100, NULL, 0 };
    assert_int_equal(peer_snap_rx_push(&rx, &c, &got), PEER_ESNAP_BOUND);
    assert_null(rx.buf.data);
    free(data);
}

static void test_snap_encode_arguments(void **state)
{
    (void)state;
    uint8_t data[10] = { 0 };
    struct raft_msg snap = { .type = RAFT_MSG_SNAP, .term = 1, .snap_zxid = 1, .snap_data = data,
                             .snap_len = 10 };
    struct base_buf b = { 0 };
    uint64_t off = 11;
    assert_int_equal(peer_snap_encode(&b, &snap, &off, 4), PEER_ECHUNK);
    off = 0;
    snap.snap_zxid = 0;
    assert_int_equal(peer_snap_encode(&b, &snap, &off, 4), PEER_EZXID);
    assert_true(off == 0);
    snap.type = RAFT_MSG_APPEND;
    assert_int_equal(peer_snap_encode(&b, &snap, &off, 4), PEER_ETYPE);
    assert_int_equal(b.len, 0);
    base_buf_free(&b);
}

/* ---- memberships -------------------------------------------------------------- */

/* An APPEND carrying CONFIG entries arrives with their bytes intact; one
 * whose data raft_config_decode refuses is PEER_ECONFIG both ways. */
static void test_append_config_entries(void **state)
{
    (void)state;
    struct base_buf b = { 0 };
    struct peer_frame f = { 0 };
    uint8_t *copy;
    encode_sample(&b, 16);
    assert_int_equal(decode_copy(b.data, b.len, &f, &copy), 0);
    assert_int_equal(f.msg.n_entries, 3);
    const struct raft_entry *e = &f.msg.entries[1];
    assert_int_equal(e->type, RAFT_ENTRY_CONFIG);
    struct raft_config got, want = joint_config();
    assert_int_equal(raft_config_decode(e->data, e->len, &got), RAFT_OK);
    assert_config_equal(&got, &want);
    free(copy);
    /* the largest membership rides in an entry too */
    struct raft_config big = max_config();
    static uint8_t big_bytes[RAFT_CONFIG_BYTES_MAX];
    struct raft_entry one = { raft_make_zxid(7, 2), RAFT_ENTRY_CONFIG, big_bytes,
                              raft_config_encode(&big, big_bytes) };
    struct raft_msg m = { .type = RAFT_MSG_APPEND, .term = 7, .entries = &one, .n_entries = 1 };
    b.len = 0;
    assert_int_equal(peer_encode_msg(&b, &m), 0);
    assert_int_equal(decode_copy(b.data, b.len, &f, &copy), 0);
    assert_true(bytes_eq(f.msg.entries[0].data, f.msg.entries[0].len, big_bytes, one.len));
    free(copy);
    /* refusals, on the encoder and (the same bytes patched into the good
     * frame in b) on the decoder: the entry's data starts at payload offset
     * 1+4+1+8+8+8+8+8+4 (= 50) + 13 */
    uint8_t bad[RAFT_CONFIG_BYTES_MAX];
    memcpy(bad, big_bytes, one.len);
    one.data = bad;
    static const struct { size_t at; uint8_t v; } breaks[] = {
        { 0, 2 }, /* version */
        { 2, 0 }, /* a member id of 0 */
        { 3, 2 }, /* voter neither 0 nor 1 */
        { 4, 1 }, /* member 1 twice */
    };
    for (size_t i = 0; i < sizeof breaks / sizeof breaks[0]; i++) {
        bad[breaks[i].at] = breaks[i].v;
        struct base_buf keep = { 0 };
        assert_int_equal(peer_encode_msg(&keep, &m), PEER_ECONFIG);
        assert_int_equal(keep.len, 0);
        struct base_buf patched = { 0 };
        assert_int_equal(base_buf_append(&patched, b.data, b.len), 0);
        memcpy(patched.data + HDR + 63, bad, one.len);
        reframe(&patched);
        assert_int_equal(decode_once(patched.data, patched.len), PEER_ECONFIG);
        base_buf_free(&patched);
        bad[breaks[i].at] = big_bytes[breaks[i].at];
    }
    assert_int_equal(decode_once(b.data, b.len), 0); /* the frame itself is fine */
    /* a config cut short (its length one less) */
    one.len--;
    assert_int_equal(peer_encode_msg(&b, &m), PEER_ECONFIG);
    peer_frame_free(&f);
    base_buf_free(&b);
}

/* A snapshot carries its membership in its first chunk, and the reassembler
 * hands it out with the bytes; without one, snap_config stays NULL. */
static void test_snap_membership(void **state)
{
    (void)state;
    uint8_t data[300];
    fill_random(data, sizeof data, 3);
    struct raft_config conf = joint_config();
    struct raft_msg snap = { .type = RAFT_MSG_SNAP, .term = 7, .snap_zxid = raft_make_zxid(7, 3),
                             .snap_data = data, .snap_len = sizeof data, .snap_config = &conf };
    struct peer_snap_rx rx;
    peer_snap_rx_init(&rx, sizeof data);
    static const size_t chunks[] = { 1, 64, 299, 300, 4096 };
    for (size_t i = 0; i < sizeof chunks / sizeof chunks[0]; i++) {
        snap.snap_zxid++;
        struct raft_msg got = send_snapshot(&rx, &snap, chunks[i]);
        assert_snap(&got, &snap);
        assert_true(got.snap_config == &rx.config);
    }
    /* a newer snapshot without one: the old membership does not linger */
    snap.snap_zxid++;
    snap.snap_config = NULL;
    struct raft_msg got = send_snapshot(&rx, &snap, 100);
    assert_snap(&got, &snap);
    /* a restart of the same snapshot with one, then an empty snapshot with one */
    snap.snap_config = &conf;
    got = send_snapshot(&rx, &snap, 100);
    assert_snap(&got, &snap);
    snap.snap_data = NULL;
    snap.snap_len = 0;
    snap.term = 8;
    got = send_snapshot(&rx, &snap, 100);
    assert_snap(&got, &snap);
    peer_snap_rx_reset(&rx);
    assert_false(rx.has_config);

    /* frames_bytes is what the encoder writes, with and without it */
    struct base_buf b = { 0 };
    snap.snap_data = data;
    snap.snap_len = sizeof data;
    for (int with = 0; with < 2; with++) {
        snap.snap_config = with ? &conf : NULL;
        uint64_t n = 0, off = 0;
        size_t want = peer_snap_frames_bytes(&snap, 64, &n);
        b.len = 0;
        while (peer_snap_encode(&b, &snap, &off, 64) == 0)
            ;
        assert_int_equal(n, 5);
        assert_int_equal(b.len, want);
    }
    base_buf_free(&b);
}

static void test_snap_membership_refusals(void **state)
{
    (void)state;
    uint8_t data[10] = { 0 };
    struct base_buf b = { 0 };
    /* on the encoder: a membership raft_config_decode would refuse */
    struct raft_config conf = joint_config();
    struct raft_msg snap = { .type = RAFT_MSG_SNAP, .term = 1, .snap_zxid = 1, .snap_data = data,
                             .snap_len = 10, .snap_config = &conf };
    uint64_t off = 0;
    conf.members[2].voter = true;
    conf.old[0].voter = conf.old[1].voter = conf.old[2].voter = false; /* old has no voter */
    assert_int_equal(peer_snap_encode(&b, &snap, &off, 4), PEER_ECONFIG);
    conf = joint_config();
    conf.n_members = RAFT_MEMBERS_MAX + 1; /* more than it can even write */
    assert_int_equal(peer_snap_encode(&b, &snap, &off, 4), PEER_ECONFIG);
    conf = joint_config();
    conf.members[1].id = conf.members[0].id;
    assert_int_equal(peer_snap_encode(&b, &snap, &off, 4), PEER_ECONFIG);
    assert_int_equal(b.len, 0);
    assert_true(off == 0);
    /* a later chunk is not checked again: it carries none */
    off = 4;
    assert_int_equal(peer_snap_encode(&b, &snap, &off, 4), 0);
    b.len = 0;

    /* a chunk past offset 0 may not carry one, a chunk's one must decode */
    struct peer_frame f = sample(17);
    f.chunk.offset = 3;
    assert_encode_refuses(&f, PEER_ECONFIG);
    f = sample(17);
    f.chunk.config_len--;
    assert_encode_refuses(&f, PEER_ECONFIG);
    /* the decoder: sample 17 is 1+4+8+8+8, 4+5 data, then u32 config_len */
    assert_int_equal(decode_patched64(17, 21, 3), PEER_ECONFIG); /* offset 3, len 5, total 8 */
    assert_int_equal(decode_patched(17, 42, "\x02", 1), PEER_ECONFIG); /* config version */
    assert_int_equal(decode_patched32(17, 38, (uint32_t)joint_len + 1), PEER_ETRUNC);
    assert_int_equal(decode_patched32(17, 38, (uint32_t)joint_len - 1), PEER_ETRAILING);
    assert_int_equal(decode_patched32(17, 38, 0), PEER_ETRAILING);

    /* the reassembler refuses it too, and keeps what it held */
    struct peer_snap_rx rx;
    struct raft_msg out;
    peer_snap_rx_init(&rx, 100);
    assert_int_equal(push(&rx, 2, 50, 100, 0, 10), 0);
    struct peer_snap_chunk c = { 2, 50, 100, 10, data, 10, joint_bytes, joint_len };
    assert_int_equal(peer_snap_rx_push(&rx, &c, &out), PEER_ECONFIG);
    assert_int_equal(rx.buf.len, 10);
    assert_false(rx.has_config);
    peer_snap_rx_reset(&rx);
    base_buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_every_type),
        cmocka_unit_test(test_known_bytes),
        cmocka_unit_test(test_max_entries),
        cmocka_unit_test(test_frame_size_limit),
        cmocka_unit_test(test_encode_into_full_buffer),
        cmocka_unit_test(test_truncated_at_every_length),
        cmocka_unit_test(test_every_bit_flip_is_an_error),
        cmocka_unit_test(test_decode_refuses_bad_header_and_hello),
        cmocka_unit_test(test_decode_refuses_bad_message_fields),
        cmocka_unit_test(test_encode_refuses_bad_fields),
        cmocka_unit_test(test_frame_split),
        cmocka_unit_test(test_hello_check),
        cmocka_unit_test(test_strerror_names_every_code),
        cmocka_unit_test(test_snap_in_order),
        cmocka_unit_test(test_snap_refusals),
        cmocka_unit_test(test_snap_multi_mib),
        cmocka_unit_test(test_snap_encode_arguments),
        cmocka_unit_test(test_append_config_entries),
        cmocka_unit_test(test_snap_membership),
        cmocka_unit_test(test_snap_membership_refusals),
    };
    return cmocka_run_group_tests(tests, setup_joint, NULL);
}
