/*
 * peer_link — the quorum port's transport: one peer-I/O thread (or, with
 * cfg.inline_io, its consumer's thread) that owns the TCP links between
 * the servers of an ensemble (DESIGN.md,
 * "Replication (ensembles)" and "Threads"). It listens on this server's
 * quorum address, dials the servers it should dial, keeps exactly one
 * established link per server pair, and moves peer.h frames over them: raft
 * messages (snapshots cut into SNAP_CHUNKs and put back together),
 * forwarded writes and session touches. The wire format is peer.h's; this
 * module only frames bytes onto sockets and back.
 *
 * One link per pair: only the server with the HIGHER id dials; the lower
 * accepts. Each end's first frame is a HELLO (peer.h). The dialler sends
 * its HELLO as soon as the connect completes and checks the answer against
 * the id it dialled; the acceptor checks the dialler's HELLO (its cluster
 * id, that it is meant for this server, that the sender is a member with a
 * higher id) before it answers with its own. A second accepted link from
 * the same server replaces the first (that server restarted). A dialler
 * retries after a failed connect, a refused HELLO or a closed link with
 * exponential backoff, [backoff_min_ms, backoff_max_ms], jittered from a
 * generator seeded by cfg.seed. Any bad frame (peer_strerror's reasons, a
 * frame before HELLO, a second HELLO, a snapshot reassembly error) closes
 * that one link with one log line naming the peer and the reason; it is
 * never a crash. Input buffers grow with the bytes that arrive, to one
 * frame at most; before its HELLO a connection may announce no frame
 * longer than a HELLO, and at most 64 connections may wait for theirs
 * (connect_timeout_ms each), so a stranger holds next to no memory.
 *
 * Members. The set of servers starts as cfg.members and changes with
 * peer_link_set_members (a reconfig): a server added is dialled or
 * accepted from then on; a server removed has its link closed, what was
 * queued for it dropped, and its HELLO refused (PEER_LINK_ENOTMEMBER) like
 * any stranger's; a server whose address changed has its link closed and
 * dialled again at the new address. This server's own address, the
 * listening one, stays cfg's for the link's life.
 *
 * Output. The producer encodes a frame on its own thread into a buffer it
 * then hands to the I/O thread through an MPSC queue; the I/O thread writes
 * each destination's frames in the order they were sent. A frame is
 * dropped, counted and reported (PEER_LINK_ENOLINK, PEER_LINK_EFULL) when
 * its destination has no established link, or when it would take that
 * destination's unsent bytes past out_bytes_max. Raft retransmits, so a
 * dropped message costs a round trip, never correctness. Frames queued for
 * a link that drops are discarded with it, a partly written snapshot
 * included: a link that comes up later starts clean, and no half frame is
 * ever sent. A sender never blocks and makes no system call but the one
 * eventfd write in peer_link_flush (and only while the I/O thread sleeps).
 *
 * Input. The I/O thread decodes each frame, names its sender and recipient
 * from the link's HELLO (a peer cannot speak for another server), and hands
 * it to the consumer through a second MPSC queue. Snapshots are reassembled
 * per link (at most snap_bytes_max) and handed over whole, once complete.
 * Inbound bytes not yet drained are bounded by in_bytes_max: past it the
 * I/O thread stops reading its sockets (TCP pushes back on the senders)
 * until the consumer drains. No inbound frame is ever dropped silently.
 *
 * Threading. Four roles; each call below names the one it belongs to.
 *   owner:    peer_link_new, _start, _stop, _free. One thread, in that
 *             order; start at most once; free only after the producer and
 *             consumer have made their last call.
 *   producer: peer_link_send_*, peer_link_flush, peer_link_set_members.
 *             ONE thread (the sequencer) at a time. A member change goes
 *             to the I/O thread through the same queue as the frames, so
 *             it takes effect between the frames sent before it and those
 *             sent after.
 *   consumer: peer_link_drain, _idle_begin, _idle_end, _ack. ONE thread
 *             (the sequencer) at a time. It may be the producer too.
 *   anyone:   peer_link_fd, peer_link_status, peer_link_stats,
 *             peer_link_strerror (relaxed counters: each value is one the
 *             I/O thread wrote, not a snapshot of all at one instant).
 * The I/O thread calls cfg.log and cfg.notify; cfg.log is also called by
 * peer_link_new on the owner's thread.
 *
 * Inline I/O (cfg.inline_io). There is no I/O thread: the consumer's
 * thread, which must then be the producer too, does the I/O itself.
 * peer_link_flush writes what was queued straight to the sockets, and
 * peer_link_poll does a pass of everything else (accepts, dials, reads,
 * timers, what a full socket left unsent). The consumer polls
 * peer_link_io_fd beside its own descriptors, calls peer_link_poll when it
 * is readable or when the time peer_link_poll returned has passed, and
 * drains as usual. A message then costs no hand-off between threads on
 * either side: on a server whose threads share a core, the hand-offs were
 * most of a write's latency. Everything else is as with the thread,
 * ownership, ordering and bounds included; start makes no thread, and stop
 * (after the consumer's last call) closes the sockets on the owner's
 * thread.
 *
 * TLS (cfg.tls). Each link is one TLS session: the dialler runs the client
 * side once its connect completes (its socket bound to this server's
 * quorum address, so that the acceptor sees the address its certificate
 * names), the acceptor the server side from the accept on. The handshake
 * runs non-blocking within connect_timeout_ms, as the HELLO does, and both
 * HELLOs go inside the session, so a peer is named only by a verified
 * certificate's end. A handshake that fails closes that one socket with one
 * log line naming the peer (or, before its HELLO, its address) and
 * OpenSSL's reason; a dialler backs off as after a failed connect. Frames
 * move as records (at most 16 KiB each, written a record at a time from a
 * copy of the front of the queue); without cfg.tls nothing of this is on
 * the path but a pointer test.
 *
 * Waking the consumer. The I/O thread makes peer_link_fd readable only
 * while the consumer has announced that it sleeps, the same protocol the
 * sequencer's workers follow (replication.h, seq_worker_idle_begin):
 *
 *     for (;;) {
 *         peer_link_drain(pl, fn, arg);
 *         if (!peer_link_idle_begin(pl))
 *             continue;                 // something arrived meanwhile
 *         poll(peer_link_fd(pl) and whatever else, timeout);
 *         peer_link_idle_end(pl);
 *         if (the fd was readable)
 *             peer_link_ack(pl);
 *     }
 *
 * The announcement and the queue's head are seq_cst on both sides, so a
 * frame pushed while the consumer goes to sleep always wakes it, and a busy
 * consumer costs the I/O thread no system call. cfg.notify, when set, is
 * called after every batch the I/O thread queues, sleeping or not, for a
 * consumer that waits on something else (the sequencer's own eventfd).
 */
#ifndef LARCH_PEER_LINK_H
#define LARCH_PEER_LINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "replication/peer.h"
#include "replication/raft.h"

#define PEER_LINK_MEMBERS_MAX RAFT_MEMBERS_MAX /* servers in cfg.members, self included */
#define PEER_LINK_HOST_BYTES_MAX 64u           /* an IPv4 or IPv6 literal, NUL included */
#define PEER_LINK_DRAIN_MAX 4096u              /* items one peer_link_drain call hands out */

/* Link-level errors (negative, beside peer.h's PEER_E* and -errno).
 * peer_link_strerror names all three kinds. */
enum peer_link_err {
    PEER_LINK_ENOLINK = -100201,    /* send: no established link to the destination (dropped) */
    PEER_LINK_EFULL = -100202,      /* send: the destination's unsent bytes are at out_bytes_max
                                     * (dropped) */
    PEER_LINK_EDEST = -100203,      /* send: the destination is not another member */
    PEER_LINK_ECLOSED = -100204,    /* the other end closed the link */
    PEER_LINK_ETIMEDOUT = -100205,  /* connect or HELLO not done within connect_timeout_ms */
    PEER_LINK_ENOHELLO = -100206,   /* a frame other than HELLO before the HELLO */
    PEER_LINK_EHELLO_AGAIN = -100207, /* a second HELLO on one link */
    PEER_LINK_ENOTMEMBER = -100208, /* HELLO from a server id not in the member list */
    PEER_LINK_ELOWER = -100209,     /* HELLO from a lower id: that server should accept, not dial */
    PEER_LINK_EREPLACED = -100210,  /* a newer link from the same server replaced this one */
    PEER_LINK_ETOOMANY = -100211,   /* too many accepted connections waiting for a HELLO */
    PEER_LINK_ESTOPPED = -100212,   /* the link was shut down by peer_link_stop */
    PEER_LINK_EREMOVED = -100213,   /* the server left the member set (peer_link_set_members) */
    PEER_LINK_EMOVED = -100214,     /* the server's address changed (peer_link_set_members) */
    PEER_LINK_ETLS = -100215,       /* the TLS handshake or a record failed (cfg.tls) */
};

/* Log levels for cfg.log (syslog's numbers). */
enum peer_link_log_level {
    PEER_LINK_LOG_ERR = 3,
    PEER_LINK_LOG_WARNING = 4,
    PEER_LINK_LOG_INFO = 6,
};

#define PEER_LINK_TLS_NAME_BYTES_MAX 256u /* a server.N host as written, NUL included */

struct peer_link_member {
    uint32_t id;      /* myid, 1..PEER_SERVER_ID_MAX */
    const char *host; /* quorum address: an IPv4 or IPv6 literal (no names: nothing is
                       * resolved), copied */
    uint16_t port;    /* quorum port, 1..65535 */
    /* With cfg.tls and cfg.tls_verify_host: what the member's certificate
     * must name when this server dials it (its server.N host as written: a
     * name or a literal), copied; NULL or "": host */
    const char *tls_name;
};

struct tls_ctx;

struct peer_link_cfg {
    uint32_t self_id;
    uint64_t cluster_id; /* both ends of a link must agree (HELLO) */
    const struct peer_link_member *members; /* self included; copied */
    uint32_t n_members;                     /* 1..PEER_LINK_MEMBERS_MAX */
    /* A dialler's delay before the next attempt starts at backoff_min_ms
     * and doubles per failure up to backoff_max_ms; each delay is drawn from
     * [delay / 2, delay]. It returns to min once a link is established.
     * 0 means 50 and 2000. */
    uint32_t backoff_min_ms;
    uint32_t backoff_max_ms;
    uint32_t connect_timeout_ms; /* connect, then the other's HELLO; 0 means 2000 */
    /* A link whose sent bytes stay unacknowledged this long (TCP_USER_TIMEOUT),
     * or that stays silent this long (TCP keepalive probes), is closed by
     * the kernel and redialled: a peer that vanished without a FIN (power
     * loss, a cut cable) is not waited for until TCP gives up, some 15
     * minutes later. 0: the kernel's defaults. */
    uint32_t dead_link_ms;
    size_t chunk_bytes;    /* SNAP_CHUNK data bytes; 0 means 1 MiB (clamped to
                            * PEER_SNAP_CHUNK_BYTES_MAX) */
    size_t out_bytes_max;  /* unsent bytes per destination; 0 means 64 MiB. One
                            * message larger than this is still taken when nothing
                            * else is queued for its destination, so it should
                            * exceed the largest snapshot */
    size_t in_bytes_max;   /* inbound bytes awaiting peer_link_drain; 0 means 128 MiB */
    uint64_t snap_bytes_max; /* a snapshot's size, both ways; 0 means 1 GiB */
    uint64_t seed;           /* the backoff jitter's generator */
    /* No I/O thread: the consumer's thread does the I/O (Inline I/O above). */
    bool inline_io;
    /* Quorum TLS (ZooKeeper's sslQuorum): NULL, plain TCP. Otherwise every
     * link, dialled or accepted, is a TLS session on this context (tls.h;
     * the caller's, to outlive the link), and the HELLOs and every frame
     * after them travel inside it (see TLS below). */
    struct tls_ctx *tls;
    /* With tls: the dialler checks that the server's certificate names the
     * member it dialled (tls_name; ssl.quorum.hostnameVerification). The
     * acceptor's check of the dialler's certificate is the context's
     * (verify_client_address). */
    bool tls_verify_host;
    /* I/O thread: called after each batch of inbound items is queued. It
     * must not block or call back into the link; NULL: none. */
    void (*notify)(void *arg);
    void *notify_arg;
    /* Log lines (no newline; level is enum peer_link_log_level), from the
     * I/O thread and from peer_link_new. NULL: "larchd: peer: <msg>" lines
     * through base_log at the matching level. */
    void (*log)(void *arg, int level, const char *msg);
    void *log_arg;
    /* Monotonic ms for backoff, timeouts and up_since_ms; NULL: base_mono_ms. */
    int64_t (*clock_ms)(void);
};

/* What peer_link_drain hands out. */
enum peer_link_rx_kind {
    PEER_LINK_RX_RAFT = 1,    /* msg: any raft message, a completed snapshot included */
    PEER_LINK_RX_FORWARD = 2, /* forward */
    PEER_LINK_RX_TOUCH = 3,   /* touch */
};

/* One inbound item. from is the sending server (from its link's HELLO).
 * For RAFT, msg.from is from and msg.to is this server; a RAFT_MSG_SNAP
 * carries the whole snapshot in snap_data/snap_len (term and snap_zxid
 * set; snap_data is never NULL) and the membership that came with it in
 * snap_config (NULL: none came). Every pointer in it (entries and their
 * data, snap_data, snap_config, forward body and auth, touch ids) is owned
 * by the link and valid only during the callback: copy what you keep. */
struct peer_link_rx {
    uint8_t kind; /* enum peer_link_rx_kind */
    uint32_t from;
    union {
        struct raft_msg msg;
        struct peer_forward forward;
        struct peer_touch touch;
    };
};

enum peer_link_state {
    PEER_LINK_DOWN = 0,       /* no socket (a dialler waits out its backoff) */
    PEER_LINK_CONNECTING = 1, /* dialled, connect in progress */
    PEER_LINK_HELLO = 2,      /* connected, waiting for the other's HELLO */
    PEER_LINK_UP = 3,         /* established: frames flow both ways */
};

/* One peer's link as the I/O thread last wrote it. Counters start at 0 and
 * only grow, for the link's life: a server removed and added again goes on
 * from where its counters were. */
struct peer_link_peer_status {
    uint32_t id;
    bool dials;              /* this server dials it (self_id > id) */
    uint8_t state;           /* enum peer_link_state */
    bool connected;          /* state == PEER_LINK_UP */
    int64_t up_since_ms;     /* cfg clock when the link came up; 0 while not up */
    uint64_t frames_in;      /* frames decoded after the HELLO (chunks counted each) */
    uint64_t bytes_in;       /* bytes read from its sockets (with TLS: decrypted) */
    uint64_t frames_out;     /* frames written whole */
    uint64_t bytes_out;      /* bytes written (with TLS: before encryption) */
    uint64_t dropped_no_link; /* frames dropped: no established link */
    uint64_t dropped_full;   /* frames dropped: out_bytes_max reached */
    uint64_t decode_errors;  /* links closed for a bad frame from it */
    uint64_t connects;       /* connection attempts (dialler) */
    uint64_t ups;            /* times a link to it was established */
    uint64_t reconnects;     /* ... after the first */
    uint64_t out_queued_bytes; /* encoded, not yet written (or dropped) */
    bool tls;                /* the link is a TLS session (cfg.tls) */
    int last_err;            /* why the last link (or attempt) ended: PEER_LINK_E*,
                              * PEER_E* or -errno; 0: none yet */
};

/* The link as a whole. */
struct peer_link_stats {
    uint64_t in_queued_bytes;  /* inbound bytes awaiting peer_link_drain */
    uint64_t in_paused;        /* times reading stopped at in_bytes_max */
    uint64_t accepted;         /* connections accepted on the quorum port */
    uint64_t rejected;         /* accepted connections closed before a valid HELLO */
};

struct peer_link;

/* ---- owner -------------------------------------------------------------------- */

/* Checks cfg (self a member; ids 1..255 and unique; host literals IPv4 or
 * IPv6; ports 1..65535; no two members at one address; backoff_min_ms <=
 * backoff_max_ms) and binds and listens on self's address at once
 * (SO_REUSEADDR), so a taken port fails here. NULL on error, with a
 * message in err (naming host:port and strerror for a socket error); the
 * message is logged too. Starts no thread. */
struct peer_link *peer_link_new(const struct peer_link_cfg *cfg, char *err, size_t err_len);

/* Starts the I/O thread (inline_io: none, and nothing to fail). 0, or
 * -errno (pthread_create) with nothing started. At most once per link. */
int peer_link_start(struct peer_link *pl);

/* Stops the I/O thread (an eventfd wake: prompt, whatever its sockets are
 * doing) and joins it, closes every socket, the listening one included,
 * and discards what was queued for sending. Inbound items already queued
 * stay for peer_link_drain. Sends after it are dropped. Safe without
 * start, and twice. */
void peer_link_stop(struct peer_link *pl);

/* Stops the link if needed and frees everything, queued items both ways
 * included. pl may be NULL. */
void peer_link_free(struct peer_link *pl);

/* ---- producer ------------------------------------------------------------------ */
/* Each encodes one message to one destination and queues it for the I/O
 * thread, which writes it after peer_link_flush (or within its next timer
 * pass, 100 ms at most). All inputs are only read, and are free to reuse on
 * return. Returns 0 (queued), PEER_LINK_ENOLINK (no established link, or
 * a server not in the member set) or PEER_LINK_EFULL (dropped and counted
 * in the destination's status), PEER_LINK_EDEST (self, or an id outside
 * 1..255), PEER_ENOMEM, or the code peer_encode_* gives a value it refuses
 * (nothing queued or counted). */

/* To m->to. A RAFT_MSG_SNAP carries its snapshot in snap_data/snap_len
 * (and its membership in snap_config, NULL: none) and goes out as
 * SNAP_CHUNKs of cfg.chunk_bytes (PEER_ESNAP_BOUND above
 * cfg.snap_bytes_max, which the other side would refuse); all of its
 * chunks are queued or dropped together. */
int peer_link_send_msg(struct peer_link *pl, const struct raft_msg *m);
int peer_link_send_forward(struct peer_link *pl, uint32_t to, const struct peer_forward *f);
int peer_link_send_touch(struct peer_link *pl, uint32_t to, const int64_t *session_ids,
                         uint32_t n);
/* The generation of the link to `to` that a frame sent now is stamped
 * with; 0 when none is up. Frames of one generation arrive in the order
 * they were sent, or, from the first one lost on, not at all; a later
 * generation starts clean. So two frames sent under one generation that
 * did not change between them cannot arrive the other way round, or the
 * second without the first. */
uint64_t peer_link_gen(struct peer_link *pl, uint32_t to);
/* Wakes the I/O thread if anything was queued since the last flush and it
 * sleeps: at most one eventfd write. Call once per batch. inline_io: writes
 * what was queued to its sockets now, as far as they take it. */
void peer_link_flush(struct peer_link *pl);

/* Makes m[0..n) the other members (an entry for self_id is skipped: the
 * listening address is cfg's for good), checked as peer_link_new checks
 * cfg.members: ids 1..255 and unique, address literals, ports 1..65535, no
 * two servers (self included) at one address, n <= PEER_LINK_MEMBERS_MAX.
 * 0; or -EINVAL with a reason in err (when err_len > 0) and nothing
 * changed; or -ENOMEM. Inputs are copied. Takes effect at once for the
 * producer and for peer_link_status (a server not listed: sends to it are
 * PEER_LINK_ENOLINK, its status -ENOENT), and on the I/O thread in order
 * with the frames around it, woken as by peer_link_flush: links of servers
 * not listed close (PEER_LINK_EREMOVED) and their queued frames are
 * dropped; a server newly listed is dialled at once (higher ids dial) or
 * accepted; a listed server at a new address is closed (PEER_LINK_EMOVED)
 * and dialled there. Listing the same set again changes nothing. */
int peer_link_set_members(struct peer_link *pl, const struct peer_link_member *m, uint32_t n,
                          char *err, size_t err_len);

/* ---- consumer ------------------------------------------------------------------ */

/* Calls fn(arg, rx) for each queued inbound item, oldest first (arrival
 * order at the I/O thread: per sender, the order it sent), at most
 * PEER_LINK_DRAIN_MAX of them, and frees each after its call. Returns the
 * count. fn may send (when the consumer is also the producer) but must not
 * call peer_link_drain. No system call unless the I/O thread had stopped
 * reading at in_bytes_max and this drain made room (one eventfd write). */
typedef void (*peer_link_rx_fn)(void *arg, const struct peer_link_rx *rx);
size_t peer_link_drain(struct peer_link *pl, peer_link_rx_fn fn, void *arg);

/* The sleep protocol (see the top of this file). idle_begin announces
 * sleep and returns true when nothing is queued (the consumer may block on
 * peer_link_fd), false when something is (it must drain first, and the
 * announcement is withdrawn). idle_end after waking; ack when the fd was
 * readable (it reads the eventfd). */
bool peer_link_idle_begin(struct peer_link *pl);
void peer_link_idle_end(struct peer_link *pl);
void peer_link_ack(struct peer_link *pl);

/* inline_io only. One pass of the I/O: what arrived is read and queued
 * for peer_link_drain, connections are accepted, dialled, timed out, and
 * what a full socket left unsent is written. Returns how many ms may pass
 * before the next pass is due (0: at once, input is left) if
 * peer_link_io_fd does not become readable first. No-op after stop. */
int peer_link_poll(struct peer_link *pl);
/* inline_io only: readable when peer_link_poll has work (an epoll set,
 * owned by the link). */
int peer_link_io_fd(const struct peer_link *pl);

/* ---- anyone -------------------------------------------------------------------- */

/* An eventfd (non-blocking) that becomes readable when inbound items are
 * queued while the consumer sleeps. Owned by the link. */
int peer_link_fd(const struct peer_link *pl);

/* The link to server id: 0, or -ENOENT when id is not another member (of
 * the set the producer last gave: cfg's, or peer_link_set_members'). */
int peer_link_status(const struct peer_link *pl, uint32_t id, struct peer_link_peer_status *st);
void peer_link_stats(const struct peer_link *pl, struct peer_link_stats *st);

/* A short reason for a PEER_LINK_E*, PEER_E* or -errno code (0: "ok"). */
const char *peer_link_strerror(int err);

#endif
