/*
 * dp_int.h — private to dataplane/: the worker and connection structures
 * shared by tcp.c (event loop, framing, sequencer outputs) and reads.c (the
 * read operations served from the RCU tree).
 */
#ifndef LARCH_DP_INT_H
#define LARCH_DP_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "dataplane/dataplane.h"

#define DP_AUTH_MAX 16          /* addauth identities per connection */
#define DP_OUT_MAX (64u << 20)  /* unsent bytes before a slow reader is dropped */

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
    bool epollout;          /* EPOLLOUT registered */
    bool epollin_paused;    /* too much queued: stop reading */
    bool dirty;             /* on the worker's flush list */
    bool resume;            /* queued frames can run again */
    bool client_sent_ro;
    struct conn *next_dirty;
    struct conn *next_resume;

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
    uint32_t pending; /* requests at the sequencer */
    struct qframe *q_head, *q_tail;
    uint32_t queued;
    int64_t pending_since_us; /* arrival of the oldest request at the sequencer */

    struct tree_authid auth[DP_AUTH_MAX];
    int32_t nauth;
    bool super;
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
    int64_t now_ms;         /* monotonic clock, read once per loop pass ... */
    int64_t now_us;         /* ... (arrival and latency stamps: stats are in ms) */
    struct zk_wbuf scratch; /* a read reply is built here before it is queued */
    struct zk_wbuf aux;     /* everything else (events, header-only and connect
                             * replies): those can be produced while a read
                             * reply waits in scratch (worker_wait_events) */
    struct conn *dirty;
    struct conn *resume;
    bool draining;
    bool submitted; /* requests went to the sequencer this pass: kick once at its end */

    _Atomic uint64_t st_rx, st_tx, st_reads, st_writes;
    _Atomic uint64_t st_lat_min, st_lat_max, st_lat_sum, st_lat_count;
};

struct dp {
    struct dp_cfg cfg;
    char bind_addr[256];
    char super_digest[512];
    struct tree *tree;
    struct seq *seq;
    int listen_fd;
    int port;
    int stop_efd;
    atomic_bool stop;
    struct worker *workers;
    int nworkers;
    pthread_mutex_t ip_lock; /* per-IP connection counts (accept/close only) */
    struct ip_count {
        char ip[64];
        int32_t n;
    } *ips;
    size_t nips, cap_ips;
};

/* tcp.c */
int64_t dp_now_us(void);
void conn_queue_reply(struct conn *c, const struct zk_wbuf *frame);
void conn_frame_added(struct conn *c);
void conn_close(struct conn *c, bool hard);
void worker_wait_events(struct worker *w, int64_t need_zxid);
struct tree_auth conn_auth(const struct conn *c);
void conn_note_latency(struct conn *c, int64_t arrived_us);
void conn_send_event(struct conn *c, int32_t type, const char *path);
void reply_header_only(struct conn *c, int32_t xid, int32_t err);
void worker_fire(void *arg, uint64_t conn, int32_t type, const char *path);
/* Ends c's reply fence: notifications deferred behind the reply follow it. */
void conn_fence_release(struct conn *c);
struct conn *worker_conn(struct worker *w, uint64_t token);

/* reads.c: serve one request of an active connection from the tree.
 * Returns true when the request was handled (reply queued), false when it
 * is not a local read. */
bool dp_serve_read(struct conn *c, int32_t xid, int32_t op, const uint8_t *body, size_t len,
                   int64_t arrived_us);

#endif /* LARCH_DP_INT_H */
