/*
 * peer — the wire codec of the quorum port: the frames one server sends
 * another over the single TCP link each server pair keeps (DESIGN.md,
 * "Replication (ensembles)"). It turns raft messages (raft.h), snapshot
 * chunks, forwarded writes and session touches into bytes and back. It does
 * no I/O; the peer-I/O thread owns the sockets and calls it.
 *
 * Pure: no sockets, clocks, threads or rand(). Decoding never reads outside
 * the bytes it is given: every field goes through base's bounded reader.
 * Bad input is never a crash. It is a distinct negative PEER_E* code, and
 * peer_strerror gives a short static reason the link logs before it closes.
 *
 * Threading: none. A struct peer_frame or struct peer_snap_rx belongs to one
 * thread at a time; nothing here locks or keeps global state.
 *
 * Frame (all integers big-endian, as the txn log's records):
 *
 *   u32 payload length | u32 CRC-32C of the payload | payload
 *   payload = u8 frame type | that type's fields
 *
 * The length bound (PEER_FRAME_BYTES_MAX) is checked from the header alone
 * (peer_frame_split), so a bad peer cannot make the link buffer 4 GiB.
 * Every link starts with one HELLO each way. It names the sender, the server
 * it meant to reach and the ensemble (cluster id), so a link to the wrong
 * server or ensemble is refused (peer_hello_check). After that, one frame
 * per raft message. Raft frames carry no from/to: the link knows both from
 * its HELLO, and the decoder leaves msg.from and msg.to at 0 for the link to
 * fill, so a peer cannot speak for another server over its own link.
 * Snapshots travel as SNAP_CHUNK frames, in order, and are put back together
 * by a struct peer_snap_rx.
 *
 *   type              fields after the type byte
 *   1 HELLO           u32 PEER_MAGIC, u16 version, u32 from, u32 to, u64 cluster_id
 *   2 VOTE_REQ        u32 term, u8 flags (1 pre_vote), i64 last_zxid
 *   3 VOTE_RESP       u32 term, u8 flags (1 pre_vote, 2 reject)
 *   4 APPEND          u32 term, u8 flags (4 no_ack), i64 prev_zxid, i64 commit_zxid, u64 read_ctx,
 *                     u64 digest, i64 digest_zxid,
 *                     u32 n, n * {i64 zxid, u8 type, u32 len, len bytes}
 *                     (type NOOP, DATA, or CONFIG: then the bytes are a
 *                     membership raft_config_decode accepts)
 *   5 APPEND_RESP     u32 term, u8 flags (2 reject), i64 match_zxid, i64 hint_zxid,
 *                     u64 read_ctx, i64 snap_zxid (a resync's request, 0: none)
 *   6 READ_INDEX      u32 term, u64 read_ctx
 *   7 READ_INDEX_RESP u32 term, u8 flags (2 reject), i64 commit_zxid, u64 read_ctx
 *   8 SNAP_CHUNK      u32 term, i64 snap_zxid, u64 total_bytes, u64 offset,
 *                     u32 len, len bytes, u32 config_len, config_len bytes
 *                     (raft_config_encode: the membership at snap_zxid, in
 *                     the chunk at offset 0 only; 0 there: none, i.e. the
 *                     receiver's configured members)
 *   9 FORWARD         u32 term, i64 session_id, i32 cxid, i32 op, u32 len, body,
 *                     u32 n, n * {u32 len, scheme, u32 len, id}
 *  10 TOUCH           u32 n, n * i64 session_id
 *
 * Flag bits a type does not define are an error, as are bytes after the
 * last field, so that each message has exactly one encoding. A membership
 * (a CONFIG entry's data, a chunk's config) is raft_config_encode's bytes,
 * which have one encoding too: raft_config_decode refuses every other.
 *
 * Version 2 added CONFIG entries and the SNAP_CHUNK membership; version 3
 * the FORWARD's term. A server refuses the HELLO of another version
 * (PEER_EVERSION), so two never exchange a frame the other would misread.
 *
 * Encoding is canonical: a frame that decodes re-encodes to the same bytes
 * (fuzz_peer checks it). The encoders refuse, with the decoder's own codes,
 * every value the decoder would refuse, since both run the same checks.
 */
#ifndef LARCH_PEER_H
#define LARCH_PEER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "replication/raft.h"

#define PEER_FRAME_HEADER_BYTES 8u          /* u32 length, u32 CRC-32C */
#define PEER_FRAME_BYTES_MAX (64u << 20)    /* payload bytes per frame */
#define PEER_MAGIC 0x4c525052u              /* "LRPR", first field of HELLO */
#define PEER_VERSION_MIN 3u                 /* protocol versions this code speaks */
#define PEER_VERSION_MAX 3u
#define PEER_SERVER_ID_MAX 255u             /* myid range, as raft_member.id */
#define PEER_APPEND_ENTRIES_MAX 65536u      /* per APPEND; raft_cfg.max_append_entries
                                             * must not exceed it */
#define PEER_FORWARD_AUTH_MAX 64u           /* (scheme, id) pairs per FORWARD */
#define PEER_CHUNK_OVERHEAD_BYTES 37u       /* SNAP_CHUNK payload bytes besides data and config */
/* data bytes per chunk: the first chunk's membership fits beside them */
#define PEER_SNAP_CHUNK_BYTES_MAX \
    (PEER_FRAME_BYTES_MAX - PEER_CHUNK_OVERHEAD_BYTES - RAFT_CONFIG_BYTES_MAX)

enum peer_frame_type {
    PEER_HELLO = 1,
    PEER_VOTE_REQ = 2,
    PEER_VOTE_RESP = 3,
    PEER_APPEND = 4,
    PEER_APPEND_RESP = 5,
    PEER_READ_INDEX = 6,
    PEER_READ_INDEX_RESP = 7,
    PEER_SNAP_CHUNK = 8,
    PEER_FORWARD = 9,
    PEER_TOUCH = 10,
};

/* Errors (negative, outside the errno range). peer_strerror names each. */
enum peer_err {
    PEER_OK = 0,
    PEER_ENOMEM = -100101,        /* allocation failed (encode, decode scratch, reassembly) */
    PEER_EFULL = -100102,         /* encode: the output buffer is at its max */
    PEER_ETOOBIG = -100103,       /* payload longer than PEER_FRAME_BYTES_MAX */
    PEER_ECRC = -100104,          /* payload CRC does not match the header */
    PEER_ETRUNC = -100105,        /* frame or field shorter than it says */
    PEER_ETRAILING = -100106,     /* bytes after the last field */
    PEER_ETYPE = -100107,         /* unknown frame type (or SNAP to peer_encode_msg) */
    PEER_EMAGIC = -100108,        /* HELLO without PEER_MAGIC: not a Larch peer */
    PEER_EVERSION = -100109,      /* HELLO version outside [MIN, MAX] */
    PEER_EID = -100110,           /* HELLO server id outside 1..255, or from == to */
    PEER_ETERM = -100111,         /* term above RAFT_TERM_MAX (message or entry's zxid) */
    PEER_EZXID = -100112,         /* negative zxid (or a SNAP_CHUNK snap_zxid of 0) */
    PEER_EORDER = -100113,        /* entries not strictly increasing above prev_zxid */
    PEER_EENTRY = -100114,        /* entry type neither NOOP, DATA nor CONFIG */
    PEER_ECOUNT = -100115,        /* a count above its bound or the bytes present */
    PEER_EFLAGS = -100116,        /* flag bits the type does not define */
    PEER_ECHUNK = -100117,        /* chunk outside its snapshot, or empty in a non-empty one */
    PEER_ESTRING = -100118,       /* FORWARD auth scheme empty, or a NUL in scheme or id */
    PEER_EWRONG_SERVER = -100119, /* HELLO meant for another server */
    PEER_EWRONG_CLUSTER = -100120, /* HELLO from another ensemble (cluster id) */
    PEER_EWRONG_PEER = -100121,   /* HELLO from a server other than the one expected */
    PEER_ESNAP_STALE = -100122,   /* chunk of an older snapshot than the one in progress */
    PEER_ESNAP_BOUND = -100123,   /* snapshot total above the reassembler's bound */
    PEER_ESNAP_TOTAL = -100124,   /* total changed within one snapshot */
    PEER_ESNAP_GAP = -100125,     /* chunk starts past the bytes received */
    PEER_ESNAP_OVERLAP = -100126, /* chunk starts inside the bytes received (not at 0) */
    PEER_ECONFIG = -100127,       /* a CONFIG entry or chunk membership raft_config_decode
                                   * refuses, or a membership on a chunk not at offset 0 */
};
#define PEER_ERR_LAST PEER_ECONFIG /* the lowest code: PEER_E* are [PEER_ERR_LAST, PEER_ENOMEM] */

struct peer_hello {
    uint16_t version; /* the sender's protocol version */
    uint32_t from;    /* the sender's server id */
    uint32_t to;      /* the server id the sender meant to reach */
    uint64_t cluster_id; /* the ensemble's db id: both ends must agree */
};

/* One piece of the snapshot (term, snap_zxid), total_bytes long, starting at
 * offset. The chunk at offset 0 may carry the membership at snap_zxid as
 * raft_config_encode's bytes (config_len 0: none). data and config are
 * borrowed (into the frame, after a decode). */
struct peer_snap_chunk {
    uint32_t term;
    int64_t snap_zxid;
    uint64_t total_bytes;
    uint64_t offset;
    const uint8_t *data;
    size_t len;
    const uint8_t *config;
    size_t config_len;
};

/* An authenticated identity of the forwarding client's session. Borrowed
 * and not NUL-terminated. */
struct peer_auth {
    const char *scheme;
    size_t scheme_len;
    const char *id;
    size_t id_len;
};

/* A write a follower forwards to the leader: the client's request body as
 * it arrived (op is its ZooKeeper opcode), and the identities the leader
 * needs to check ACLs. body and auth are borrowed. */
struct peer_forward {
    int64_t session_id;
    int32_t cxid;
    int32_t op;
    const uint8_t *body;
    size_t body_len;
    const struct peer_auth *auth;
    uint32_t n_auth;
    /* The term of the leader it was sent to: the leader takes it only while
     * it leads that term, so a session's writes cannot commit out of order
     * around a leadership it lost and won back (replication/README.md). */
    uint32_t term;
};

/* Sessions a follower saw traffic from since its last TOUCH. Borrowed. */
struct peer_touch {
    const int64_t *session_ids;
    uint32_t n;
};

/* A decoded frame: type says which member is set. For raft frames msg is a
 * whole struct raft_msg (type, term and the fields its type carries; from
 * and to 0). Pointers in it are borrowed: entry data, chunk data, forward
 * body and auth strings point into the frame bytes given to peer_decode;
 * msg.entries, forward.auth and touch.session_ids point into scratch arrays
 * the struct owns. Both stay valid until the next peer_decode into this
 * struct or peer_frame_free, and the frame bytes must outlive them. */
struct peer_frame {
    uint8_t type; /* enum peer_frame_type; 0 after a failed decode */
    union {
        struct peer_hello hello;
        struct raft_msg msg;
        struct peer_snap_chunk chunk;
        struct peer_forward forward;
        struct peer_touch touch;
    };
    /* private: the decoder's scratch, reused across decodes so that a link
     * decoding into one struct allocates only while its frames grow */
    struct raft_entry *entries_;
    size_t entries_cap_;
    struct peer_auth *auth_;
    size_t auth_cap_;
    int64_t *ids_;
    size_t ids_cap_;
};

/* ---- framing and decoding ------------------------------------------------------ */

/* Whether p[0..len) starts with a whole frame: 0 not yet (fewer than
 * PEER_FRAME_HEADER_BYTES, or than the header's length says), 1 yes with
 * *frame_len set to its size (header included), PEER_ETOOBIG as soon as the
 * header shows a payload over PEER_FRAME_BYTES_MAX. Reads only p. */
int peer_frame_split(const uint8_t *p, size_t len, size_t *frame_len);

/* Decodes exactly one whole frame (header included) into *out, which the
 * caller zero-initialised once ({ 0 }) and may reuse for every frame of a
 * link. 0, or a PEER_E* code with out->type 0. Pointers in *out borrow
 * frame (see struct peer_frame). Checks, in order: header length against
 * len and PEER_FRAME_BYTES_MAX, CRC, type, fields (truncation, counts,
 * flags), trailing bytes, then value ranges. */
int peer_decode(const uint8_t *frame, size_t len, struct peer_frame *out);

/* Frees the decoder's scratch; *f is then zero and may be reused. */
void peer_frame_free(struct peer_frame *f);

/* ---- encoding ------------------------------------------------------------------ */
/* Each appends one whole frame to out (whose bytes stay the caller's), or
 * nothing: on an error out->len is as it was. Errors: PEER_ENOMEM,
 * PEER_EFULL (out->max reached), PEER_ETOOBIG (payload over the max), or
 * the code peer_decode would give the value. Inputs are only read. */

int peer_encode_hello(struct base_buf *out, const struct peer_hello *h);
/* A raft message of any type but RAFT_MSG_SNAP (PEER_ETYPE: send it with
 * peer_snap_encode). Only the fields m->type carries are written; from
 * and to are not. */
int peer_encode_msg(struct base_buf *out, const struct raft_msg *m);
int peer_encode_chunk(struct base_buf *out, const struct peer_snap_chunk *c);
int peer_encode_forward(struct base_buf *out, const struct peer_forward *f);
int peer_encode_touch(struct base_buf *out, const int64_t *session_ids, uint32_t n);
/* Whichever member f->type names: peer_encode_frame(peer_decode(x)) == x. */
int peer_encode_frame(struct base_buf *out, const struct peer_frame *f);

/* The next SNAP_CHUNK of snap (a RAFT_MSG_SNAP with snap_data/snap_len
 * attached) from *offset, at most chunk_bytes of data (clamped to
 * PEER_SNAP_CHUNK_BYTES_MAX; must be > 0). Advances *offset past it. 1: that
 * was the last chunk; 0: more remain; <0: nothing appended, *offset kept.
 * An empty snapshot is one empty chunk. The chunk at offset 0 carries
 * snap->snap_config (NULL: none); PEER_ECONFIG when that is not a
 * membership raft_config_decode would accept. Send as:
 *     uint64_t off = 0; while ((rc = peer_snap_encode(b, m, &off, 1 << 20)) == 0) flush(b);
 */
int peer_snap_encode(struct base_buf *out, const struct raft_msg *snap, uint64_t *offset,
                     size_t chunk_bytes);

/* What the whole of snap takes through peer_snap_encode with chunk_bytes:
 * its frames' bytes (headers included), and their count in *n_frames. For
 * sizing a buffer before encoding; exact whenever the encoding succeeds. */
size_t peer_snap_frames_bytes(const struct raft_msg *snap, size_t chunk_bytes,
                              uint64_t *n_frames);

/* ---- HELLO --------------------------------------------------------------------- */

/* Whether a decoded HELLO h may open a link at server self_id of ensemble
 * cluster_id: PEER_EWRONG_SERVER (h->to is not self_id), PEER_EWRONG_CLUSTER,
 * PEER_EWRONG_PEER (h->from is self_id, or expect_from is nonzero and
 * h->from is not it: the connecting side knows whom it dialled; the
 * accepting side passes 0 and checks membership itself), else 0. */
int peer_hello_check(const struct peer_hello *h, uint32_t self_id, uint64_t cluster_id,
                     uint32_t expect_from);

/* ---- snapshot reassembly ------------------------------------------------------- */

/* Puts SNAP_CHUNKs back together, for one snapshot (term, snap_zxid) at a
 * time, into a buffer it owns. Received bytes never exceed bytes_max or the
 * snapshot's total; the buffer's capacity grows by doubling with them, so a
 * small frame claiming a huge total allocates nothing ahead of its bytes.
 * Set up with peer_snap_rx_init; free with peer_snap_rx_reset. */
struct peer_snap_rx {
    uint64_t bytes_max;
    bool active; /* a snapshot is in progress or complete */
    bool done;   /* ... and complete */
    uint32_t term;
    int64_t snap_zxid;
    uint64_t total_bytes;
    struct base_buf buf; /* the bytes received, in order */
    bool has_config;     /* the first chunk carried a membership: */
    struct raft_config config;
};

void peer_snap_rx_init(struct peer_snap_rx *rx, uint64_t bytes_max);

/* Takes the next chunk c (data and config copied). A chunk of a newer
 * snapshot (higher term, or same term and higher snap_zxid) than the one
 * held, or one at offset 0 of the same (the leader re-sends an
 * unacknowledged SNAP from the start), drops what was held and starts
 * again. Returns 0 (taken, more to come), 1 (taken, and it completed the
 * snapshot: *out is a RAFT_MSG_SNAP with term, snap_zxid, snap_data/snap_len
 * pointing into rx's buffer and snap_config at rx->config, or NULL when the
 * first chunk carried none, valid until the next push or reset, from/to 0
 * for the link to fill), or
 * an error. Two leave rx as it was: the chunk's own range error (the code
 * peer_decode gives it) and PEER_ESNAP_STALE (an older snapshot's chunk).
 * After the others rx holds nothing: PEER_ESNAP_BOUND (total above
 * bytes_max), _TOTAL, _GAP (also a snapshot whose first chunk is not at 0),
 * _OVERLAP (also any chunk but a restart after completion), PEER_ENOMEM. */
int peer_snap_rx_push(struct peer_snap_rx *rx, const struct peer_snap_chunk *c,
                      struct raft_msg *out);

/* Frees the bytes and forgets the snapshot; bytes_max is kept. */
void peer_snap_rx_reset(struct peer_snap_rx *rx);

/* ---- names --------------------------------------------------------------------- */

/* A short static reason for err (0 and unknown codes included). */
const char *peer_strerror(int err);
/* "HELLO", "APPEND", ...; "?" for an unknown type. */
const char *peer_frame_type_name(uint8_t type);

#endif
