/*
 * dp_int.h — private to dataplane/: the worker and connection structures.
 *
 * Three files share them:
 *   tcp.c    the transport: epoll loop, accept, recv/send, the connection
 *            lifecycle (close, reap), deadlines, setup and introspection;
 *   conn.c   the session logic a connection runs over any byte stream:
 *            framing, handshake, four-letter words, per-session FIFO,
 *            dispatch, auth, sequencer outputs, and the memory budget that
 *            decides when a connection may be read;
 *   reads.c  the read operations served from the RCU tree.
 *
 * Everything here runs on the worker that owns the connection, except the
 * fields marked as read by other threads (relaxed atomics, for stats).
 *
 * Connection lifetime (the rule that keeps list walks safe): conn_close only
 * marks a connection; the transport frees it in exactly one place, at the end
 * of a loop pass, after every list that may name it (dirty, resume) has been
 * walked. A connection marked dead is never put on a list again.
 */
#ifndef LARCH_DP_INT_H
#define LARCH_DP_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "dataplane/dataplane.h"
#include "saslsrv/saslsrv.h"

#define DP_AUTH_MAX 16               /* addauth identities per connection */
#define DP_PIPELINE_MAX 32           /* a connection's requests at the sequencer */
#define DP_READ_CHUNK 65536          /* one recv; the worker's receive buffer */
#define DP_HEAVY_BYTES (64u << 10)   /* under memory pressure, heavier connections are not read */
#define DP_OUT_KEEP_BYTES (64u << 10) /* a flushed output buffer above this is freed */
#define DP_DEADLINE_SCAN_MS 250      /* how often the connection deadlines are checked */
#define DP_LINGER_MS 2000            /* a soft close whose output the client does not read turns hard */

/* Adds v to a counter only its owning worker writes: a relaxed load and
 * store, no lock-prefixed add (other threads only read it, for stats). */
#define COUNTER_ADD(ctr, v) \
    atomic_store_explicit(&(ctr), atomic_load_explicit(&(ctr), memory_order_relaxed) + (v), \
                          memory_order_relaxed)

enum conn_state {
    CONN_NEW = 0,      /* waiting for ConnectRequest (or a four-letter word) */
    CONN_HANDSHAKE,    /* ConnectRequest at the sequencer */
    CONN_ACTIVE,       /* session established */
};

/* A request that arrived while an earlier write of the connection was at the
 * sequencer: replayed in order once that write is answered (invariant 2). */
struct qframe {
    struct qframe *next;
    size_t len;
    int64_t arrived_us;
    uint8_t bytes[];
};

struct conn {
    uint64_t token; /* generation << 32 | slot: stale tokens never match */
    int fd;
    struct worker *w;
    enum conn_state state;
    bool closing;           /* close once out is flushed (or at once if hard) */
    bool hard_close;
    bool dead;              /* on the worker's dead list: freed at the end of the pass */
    bool dirty;             /* on the worker's flush list */
    bool resume;            /* on the worker's resume list: queued work can run again */
    bool epollout;          /* output is waiting for the socket: EPOLLOUT wanted */
    uint32_t ev_mask;       /* the epoll interest registered now */
    bool input_full;        /* paused at conn_max_buffer_bytes until half of it is free */
    bool throttled;         /* reading is paused for a budget (counted once per pause) */
    bool client_sent_ro;
    bool read_only;         /* a read-only session: the server has no quorum */
    /* TLS (a secure port's connection; NULL: plain TCP). Owned: freed with
     * the connection. read_wants_out: the session's last read waits for the
     * socket to take output (its handshake reply did not fit), so epoll
     * watches for writability instead of input, and nothing is written
     * until that read has gone on. */
    struct tls_conn *tls;
    bool read_wants_out;
    struct conn *next_dirty;
    struct conn *next_resume;
    struct conn *next_dead;

    /* Unparsed input: empty (NULL) between frames; holds the start of a
     * frame that has not fully arrived, or frames parsing had to leave. */
    uint8_t *in;
    size_t in_len, in_cap;
    struct zk_wbuf out;
    size_t out_off;
    /* While a read reply that set a watch waits for events (worker_wait_events),
     * notifications of txns newer than fence_zxid (what the read saw) go to
     * deferred and follow the reply: the client must hold the watch before
     * its notification arrives. INT64_MAX when no reply is fenced. */
    int64_t fence_zxid;
    struct zk_wbuf deferred;

    int64_t session_id;
    int32_t timeout_ms;
    int64_t last_touch_ms;
    int64_t accepted_ms;      /* monotonic: the sessionless deadline counts from here */
    int64_t closing_ms;       /* monotonic: when a soft close began (it lingers at most DP_LINGER_MS) */
    /* Requests at the sequencer: writes (and syncs) pipeline, up to
     * DP_PIPELINE_MAX, because the sequencer answers a session's in the
     * order they came; anything else waits in the queue below until
     * nothing is pending (invariant 2). */
    uint32_t pending;
    size_t seq_bytes;         /* request bytes the sequencer holds for us */
    struct qframe *q_head, *q_tail;
    uint32_t queued;
    size_t q_bytes;
    int64_t pending_arrived_us[DP_PIPELINE_MAX]; /* a ring, oldest at pending_head */
    uint32_t pending_head;
    /* a sync or getEphemerals is pending: the sequencer may answer it
     * after a write that came later, so nothing follows it until it is
     * answered (it is the newest pending request: the rest went before) */
    bool pending_barrier;
    size_t mem_accounted;     /* this connection's share of w->mem_bytes */
    uint32_t outstanding_accounted; /* its share of w->outstanding */

    struct tree_authid auth[DP_AUTH_MAX];
    int32_t nauth;
    bool super;
    struct saslsrv_conn *sasl; /* a SASL exchange under way, or NULL */
    bool sasl_done;            /* it ended: a connection logs in once */
    char peer_ip[64];
    char peer[80];

    /* stats for cons / stat (relaxed atomics: read by other threads) */
    _Atomic uint64_t rx, tx;
    _Atomic int64_t last_zxid;
    _Atomic int32_t last_op;
    _Atomic int64_t lat_last_us, lat_min_us, lat_max_us, lat_sum_us, lat_count;
    int64_t established_ms;
};

struct worker {
    int id;
    struct dp *dp;
    pthread_t thread;
    int epfd;
    bool started;

    struct conn **slots;
    uint32_t nslots;
    uint32_t *gens;
    uint32_t *free_slots;
    uint32_t nfree;
    pthread_mutex_t conns_lock;

    struct watch_table *wt;
    pthread_mutex_t watch_lock;
    _Atomic size_t nwatches; /* mirror of watch_count for the lock-free fast path */

    int64_t events_through; /* events of every txn <= this were delivered */
    int64_t firing_zxid;    /* the txn whose events watch_fire is delivering */
    const struct tree_acl *firing_acl; /* READ on it is needed to hear that event */
    int64_t now_ms;         /* monotonic clock, read once per loop pass ... */
    int64_t now_us;         /* ... (arrival and latency stamps: stats are in ms) */
    int64_t next_scan_ms;   /* next sessionless-deadline scan */
    int64_t next_pressure_log_ms; /* memory pressure changes are logged at most once a second */
    uint8_t *rbuf;          /* DP_READ_CHUNK bytes: every recv lands here first */
    struct zk_wbuf scratch; /* a read reply is built here before it is queued */
    struct zk_wbuf aux;     /* everything else (events, header-only and connect
                             * replies): those can be produced while a read
                             * reply waits in scratch (worker_wait_events) */
    struct conn *dirty;
    struct conn *resume;
    struct conn *dead;
    bool draining;
    bool submitted; /* requests went to the sequencer this pass: kick once at its end */
    bool global_paused; /* a connection was paused for memory pressure or
                         * globalOutstandingLimit since they last lifted */

    /* Budget (conn.c): bytes and requests this worker's connections hold.
     * Owned by the worker; published to the st_ mirrors for other threads. */
    size_t mem_bytes;
    uint32_t outstanding;
    _Atomic size_t st_mem_bytes;
    _Atomic uint32_t st_outstanding;
    _Atomic uint32_t st_throttled; /* connections whose reading is paused now */

    _Atomic uint64_t st_rx, st_tx, st_reads, st_writes;
    _Atomic uint64_t st_lat_min, st_lat_max, st_lat_sum, st_lat_count;
    _Atomic uint64_t st_throttle_events, st_slow_closes, st_sessionless_closes;
    /* The resets (dp_reset_stats, dp_reset_conn_stats) this worker has
     * carried out, as dp's epochs stood then: written by the worker only,
     * after the counters (release), so a reader that finds them equal to
     * dp's sees the counters as reset or newer. */
    _Atomic uint64_t server_reset_done, conn_reset_done;

    /* The UDP read path over the kernel (udp_sock.c); udp_fd -1: off. The
     * counters are the worker's own, published to the st_udp mirrors. */
    int udp_fd;
    struct udp_batch *udp;
    struct dp_udp_counters udp_ctr;
    uint64_t udp_unsent; /* replies a full socket buffer refused */
    uint32_t udp_ovfl_seen; /* the kernel's count (SO_RXQ_OVFL, 32 bits), last seen */
    uint64_t udp_overflows; /* its increments, summed */
    uint64_t udp_rcvbuf_bytes; /* set once at open */
    _Atomic uint64_t st_udp_datagrams, st_udp_unsent, st_udp_overflows;
    _Atomic uint64_t st_udp_answered[ZK_UDP_STATUSES];
    _Atomic uint64_t st_udp_dropped[DP_UDP_DROPS];
};

struct dp {
    struct dp_cfg cfg;
    char bind_addr[256];
    char super_digest[512];
    char x509_super_user[TLS_DN_MAX];
    struct tree *tree;
    struct seq *seq;
    int listen_fd;          /* -1: no plain port */
    int port;
    char secure_bind_addr[256];
    int secure_listen_fd;   /* -1: no secure port */
    int secure_port;
    int stop_efd;
    atomic_bool stop;
    struct worker *workers;
    int nworkers;
    int64_t (*clock_us)(void);  /* the loop's monotonic clock: base_mono_us, or a test's */
    atomic_bool pressure;       /* buffered bytes passed cfg.max_buffered_bytes */
    _Atomic uint32_t nconns;    /* open connections, for maxCnxns */
    _Atomic uint64_t st_refused; /* connections refused by maxCnxns / maxClientCnxns */
    /* Resets asked for (srst, crst), counted: the workers carry them out
     * (struct worker, *_reset_done). */
    _Atomic uint64_t server_reset_epoch, conn_reset_epoch;
    int udp_port;                /* the UDP read path's, 0: off */
    pthread_mutex_t ip_lock; /* per-IP connection counts (accept/close only) */
    struct ip_count {
        char ip[64];
        int32_t n;
    } *ips;
    size_t nips, cap_ips;
};

/* ---- udp_sock.c: the UDP read path over the kernel's sockets ------------- */
#define DP_EV_UDP 0xFFFFFFFFFFFFFF04ULL /* a worker's epoll key for its UDP socket */
/* Opens a socket per worker on cfg.udp_host:udp_port and adds each to its
 * worker's epoll set. 0, or -1 with a message in err. */
int udp_sock_open(struct dp *dp, char *err, size_t errlen);
/* The worker's socket is readable: a few batches of requests answered. */
void udp_sock_pass(struct worker *w);
void udp_sock_close(struct worker *w);

/* ---- tcp.c: the transport ------------------------------------------------ */
/* Marks c for closing. hard: drop unsent output; otherwise flush it first.
 * Never frees: the connection is reaped at the end of the loop pass. */
void conn_close(struct conn *c, bool hard);
/* Puts c on the pass's flush list (output to send, interest to update). */
void conn_mark_dirty(struct conn *c);
/* Puts c on the resume list: its queued requests or buffered input can run. */
void conn_mark_resume(struct conn *c);
struct conn *worker_conn(struct worker *w, uint64_t token);

/* The test seam: tests and the connection fuzzer drive a dataplane that was
 * created (dp_new) but not started, from one registered RCU thread. adopt
 * registers fd (any stream socket) as a connection of that worker; pass runs
 * one loop pass without blocking; close_all closes and frees every
 * connection; set_clock replaces the loop's clock (before the first adopt),
 * so that deadlines fall where the test puts them, run after run. */
void dp_test_set_clock(struct dp *dp, int64_t (*now_us)(void));
void dp_test_adopt(struct dp *dp, int worker, int fd, const char *ip, int port);
/* As dp_test_adopt, as a connection of the secure port (cfg.tls). */
void dp_test_adopt_tls(struct dp *dp, int worker, int fd, const char *ip, int port);
void dp_test_pass(struct dp *dp, int worker);
void dp_test_close_all(struct dp *dp, int worker);

/* ---- conn.c: the session logic ------------------------------------------- */
/* Feeds n received bytes to c: frames are parsed and run in order; what
 * cannot run yet (a frame still arriving, or output over its high-water
 * mark) is kept in c->in. False when out of memory (c is then closed). */
void conn_input(struct conn *c, const uint8_t *p, size_t n);
/* Runs what c can run now: queued requests, then frames left in c->in. */
void conn_progress(struct conn *c);
/* Whether the transport should read from c now (the budget's decision). */
bool conn_wants_input(struct conn *c);
/* True when conn_progress would run something now (after output drained). */
bool conn_has_runnable_work(const struct conn *c);
/* Unsent output bytes. */
size_t conn_unsent(const struct conn *c);
/* Bytes c holds (input, queued requests, requests at the sequencer, output
 * buffers); brings the worker's totals up to date. */
void conn_account(struct conn *c);
/* Frees c's session-side resources (queue, auth ids, buffers) and tells the
 * sequencer the session lost its connection. Called once, by the reaper. */
void conn_release(struct conn *c);
/* Starts c after accept. */
void conn_init(struct conn *c, struct worker *w, int fd, const char *ip, int port);
/* c's TLS handshake has just completed: a client certificate becomes c's
 * x509 identity (ZooKeeper's CertificateVerifier). False when c was closed. */
bool conn_tls_established(struct conn *c);
/* Takes every sequencer output for this worker. */
void worker_drain_sequencer(struct worker *w);
/* Wakes the sequencer once for everything this pass submitted. */
void worker_kick_sequencer(struct worker *w);
/* Publishes the worker's budget and decides memory pressure (once a pass);
 * connections paused for a global reason are re-examined when it clears. */
void worker_budget_pass(struct worker *w);

void conn_queue_reply(struct conn *c, const struct zk_wbuf *frame);
void conn_frame_added(struct conn *c);
void worker_wait_events(struct worker *w, int64_t need_zxid);
struct tree_auth conn_auth(const struct conn *c);
void conn_note_latency(struct conn *c, int64_t arrived_us);
/* A notification to c unless the connection's identity lacks READ on acl
 * (NULL: no check) — ZooKeeper's check that keeps ACL-hidden nodes out of
 * watch events (CVE-2024-23944). */
void conn_send_event(struct conn *c, int32_t type, struct zk_str path, const struct tree_acl *acl);
void reply_header_only(struct conn *c, int32_t xid, int32_t err);
void worker_fire(void *arg, uint64_t conn, int32_t type, const char *path);
/* Ends c's reply fence: notifications deferred behind the reply follow it. */
void conn_fence_release(struct conn *c);

/* Whether identities meet cfg.enforce_auth (true when it is off). */
bool dp_auth_enforced_ok(const struct dp *dp, const struct tree_authid *ids, int32_t count);

/* reads.c: serve one request of an active connection from the tree.
 * Returns true when the request was handled (reply queued), false when it
 * is not a local read. */
bool dp_serve_read(struct conn *c, int32_t xid, int32_t op, const uint8_t *body, size_t len,
                   int64_t arrived_us);
/* An op, or a watch flag, that only the TCP path serves (not a ZooKeeper
 * code: the UDP path answers BAD_REQUEST). */
#define DP_READ_TCP_ONLY (-1000)
/* A read without a connection, for the UDP path (udp.c): exists, getData,
 * getChildren(2), getAllChildrenNumber or multiRead, watch flags false,
 * read as auth. Writes op's response record into out and returns ZK_OK, or
 * returns a ZooKeeper error code (out as it was; a multiRead answers ZK_OK
 * with its errors inside) or DP_READ_TCP_ONLY. Inside rcu_read_lock. */
int dp_read_plain(const struct dp *dp, const struct tree_auth *auth, int32_t op,
                  struct base_rd *in, struct zk_wbuf *out);

#endif /* LARCH_DP_INT_H */
