/*
 * dataplane — the TCP front end: per-core workers that own their connections,
 * serve reads straight from the RCU tree and hand writes to the sequencer.
 *
 * Threading: dp_start spawns cfg.workers threads. Each worker runs its own
 * epoll loop over a shared listening socket (EPOLLEXCLUSIVE), its connections,
 * and its sequencer output eventfd. A worker never blocks on another thread on
 * the read path: reads run under rcu_read_lock only. Two per-worker mutexes
 * exist for administration and are never taken by a read that sets no watch:
 * conns_lock (accept/close vs. the cons/stat dumps) and watch_lock (watch
 * table changes vs. the wchc/wchp/wchs dumps).
 *
 * Ordering (DESIGN.md invariants 2 and 3): a connection with a write at the
 * sequencer queues everything after it until the write's reply arrives; a read
 * reply on a worker holding watches is sent only after the worker has
 * delivered every watch event the read could have observed.
 *
 * dp_* functions other than dp_start/dp_stop/dp_free may be called from any
 * thread (4lw handlers run on workers).
 */
#ifndef LARCH_DATAPLANE_H
#define LARCH_DATAPLANE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/proto.h"
#include "replication/replication.h"
#include "tls/tls.h"
#include "tree/tree.h"

struct dp;

#define DP_AUTH_IP 1u     /* every connection has its peer address's ip identity */
#define DP_AUTH_DIGEST 2u /* a digest identity from addauth */
#define DP_AUTH_SASL 4u   /* a sasl identity from a SASL login */
#define DP_AUTH_X509 8u   /* an x509 identity from a client certificate */

/* Four-letter-word handler: append the answer text to out. Runs on a worker.
 * word_arg: for "stmk", the 8-byte big-endian long that follows the word
 * in the same request (ZooKeeper's new trace mask); 0 for the other words,
 * which take none. */
typedef void (*dp_fourlw_fn)(void *arg, struct dp *dp, const char *word, int64_t word_arg,
                             struct zk_wbuf *out);

struct dp_cfg {
    const char *bind_addr;  /* IPv4 or IPv6 literal, or a host name */
    int port;               /* 0: any free port; -1: no plain port (TLS only) */
    /* The secure client port (secureClientPort): the same protocol over
     * TLS sessions of this context, which the caller keeps until after
     * dp_free; NULL: none. secure_port 0 takes any free port. Connections
     * of both ports share every limit, worker and budget. */
    struct tls_ctx *tls;
    const char *secure_bind_addr;
    int secure_port;
    /* X509AuthenticationProvider.superUser: the client certificate subject
     * (tls_dn_rfc2253's text) that is the super user; NULL or "": none. */
    const char *x509_super_user;
    int workers;
    int32_t max_buffer_bytes;  /* jute.maxbuffer: larger frames close the connection */
    int32_t max_client_cnxns;  /* per peer IP; 0 = unlimited */
    int32_t max_cnxns;         /* maxCnxns: all client connections; 0 = unlimited */
    int32_t max_outstanding;   /* globalOutstandingLimit: requests read and not yet
                                * answered, server-wide, before reading pauses */
    int32_t sessionless_timeout_ms; /* a connection without a session is closed after this */
    /* Memory budget (DESIGN.md invariant 6), in bytes; 0 = the default. */
    int64_t conn_max_buffer_bytes;  /* unparsed input + queued requests per connection */
    int64_t conn_out_high_water_bytes; /* unsent output above which a connection is not read */
    int64_t conn_max_unsent_bytes;  /* unsent output that closes a connection (slow consumer) */
    int64_t max_buffered_bytes;     /* everything every connection holds: memory pressure above */
    const char *super_digest;  /* "user:base64" or "" */
    /* SASL (ZooKeeperServer.processSasl): with sasl, a SASL request runs
     * a DIGEST-MD5 exchange (saslsrv, initialised by the caller) and a
     * login adds the identity ("sasl", user); without it the opcode is
     * answered UNIMPLEMENTED, as before. A user named in the super list
     * (zookeeper.superUser[.X]) becomes the super user. sasl_provider
     * goes into every tree_auth the dataplane builds (authProvider.N
     * names SASLAuthenticationProvider). The list is borrowed: it must
     * outlive the dataplane. */
    bool sasl;
    bool sasl_provider;
    const char *const *sasl_super_users;
    int32_t n_sasl_super_users;
    /* zookeeper.enforce.auth: DP_AUTH_* bits of the schemes one of whose
     * identities a connection must hold before any request but auth and
     * sasl is served (ZooKeeper's AuthenticationHelper); 0: not enforced.
     * With DP_AUTH_SASL in it a failed SASL login is answered
     * SESSIONCLOSEDREQUIRESASLAUTH rather than AUTHFAILED. The UDP path
     * holds a signed session to the same rule, and anonymous reads meet it
     * only through "ip". */
    uint32_t enforce_auth;
    /* An ensemble member's membership in ZooKeeper's text, what
     * /zookeeper/config reads as (config_membership_text); NULL: the
     * tree's node, empty, as a standalone ZooKeeper's. Borrowed: it must
     * outlive the dataplane. */
    const char *config_node;
    int64_t config_node_mtime; /* its mtime: when this server set it */
    /* The UDP read path (UDP.md): an IPv4 or IPv6 literal and a port;
     * udp_port 0: off. */
    const char *udp_host;
    int udp_port;
    dp_fourlw_fn fourlw;
    void *fourlw_arg;
    bool (*fourlw_allowed)(void *arg, const char *word);
};

/* Creates the dataplane and binds the listening socket (so a port in use is
 * reported before anything starts). Returns NULL and writes a message naming
 * the problem into err (errlen bytes) on failure. */
struct dp *dp_new(const struct dp_cfg *cfg, struct tree *t, struct seq *s, char *err, size_t errlen);
/* The bound port (useful when cfg.port was 0); -1 when there is none. */
int dp_port(const struct dp *dp);
/* The secure client port's bound port; -1 when there is none. */
int dp_secure_port(const struct dp *dp);
/* The UDP read path's port; 0 when it is off. */
int dp_udp_port(const struct dp *dp);
/* Starts the workers: 0 or -errno. */
int dp_start(struct dp *dp);
/* Stops and joins the workers, closing every connection. */
void dp_stop(struct dp *dp);
void dp_free(struct dp *dp);

/* ---- the UDP read path (dataplane/UDP.md) ---------------------------------- */

/* Why a datagram got no answer. */
enum dp_udp_drop {
    DP_UDP_DROP_SHORT,  /* shorter than a request header */
    DP_UDP_DROP_MAGIC,  /* not this protocol */
    DP_UDP_DROP_REPLY,  /* a reply (never answered: no loops between servers) */
    DP_UDP_DROP_HEADER, /* a version 1 header length other than 48 */
    DP_UDP_DROP_NOMEM,  /* no memory for the reply */
    DP_UDP_DROPS
};

/* One per thread that handles datagrams: plain counters, summed by
 * whoever reports them. */
struct dp_udp_counters {
    uint64_t datagrams;
    uint64_t answered[ZK_UDP_STATUSES];
    uint64_t dropped[DP_UDP_DROPS];
};

#define DP_STATS_WORKERS 64 /* larch.workers is at most this */
struct dp_stats {
    uint64_t packets_received;
    uint64_t packets_sent;
    uint64_t connections;      /* open now */
    uint64_t outstanding;      /* requests queued or at the sequencer */
    uint64_t watches;          /* watch table entries */
    uint64_t watch_paths;      /* distinct watched paths (approximate: per worker) */
    uint64_t latency_min_us, latency_max_us, latency_sum_us, latency_count;
    uint64_t reads, writes;
    int workers;                                  /* of which these are counted: */
    uint64_t worker_reads[DP_STATS_WORKERS];      /* reads each worker answered */
    /* the memory budget */
    uint64_t buffered_bytes;        /* held by connections now */
    uint64_t buffered_bytes_limit;  /* cfg.max_buffered_bytes */
    bool memory_pressure;
    uint64_t throttled_connections; /* reading paused now */
    uint64_t throttle_events;       /* times reading was paused for a budget */
    uint64_t slow_consumer_closes;  /* closed for unsent output */
    uint64_t sessionless_timeouts;  /* closed before completing the handshake */
    uint64_t connections_refused;   /* maxCnxns / maxClientCnxns */
    /* the UDP read path (all workers) */
    uint64_t udp_datagrams;
    uint64_t udp_answered[ZK_UDP_STATUSES];
    uint64_t udp_dropped[DP_UDP_DROPS];
    uint64_t udp_unsent;            /* replies a full socket buffer refused */
    uint64_t udp_overflows;         /* requests the kernel dropped: receive buffer full */
    uint64_t udp_rcvbuf_bytes;      /* one worker socket's receive buffer, as the kernel sized it */
};
void dp_get_stats(struct dp *dp, struct dp_stats *out);
/* The two resets of the four-letter words. Each worker alone writes its
 * counters and its connections' (relaxed atomics, read by any thread), so
 * a reset is a request that every worker carries out at the start of its
 * next pass; meanwhile dp_get_stats and dp_each_conn report what is to be
 * reset as zero, so the reset shows at once. Any thread.
 *
 * srst (ZooKeeper's ServerStats.reset): the server-wide packets received
 * and sent and the latency min/avg/max that srvr, stat and mntr print.
 * Connections' own counters are left as they are. */
void dp_reset_stats(struct dp *dp);
/* crst (ZooKeeper's resetAllConnectionStats): every connection's packets
 * received and sent, last op, last zxid and latencies, which cons prints.
 * The server-wide counters are left as they are. */
void dp_reset_conn_stats(struct dp *dp);

/* dp_conn_info.last_op of a connection whose stats were reset (crst) and
 * that has sent nothing since: ZooKeeper prints "NA". Not an opcode. */
#define DP_CONN_NO_OP INT32_MIN

struct dp_conn_info {
    char peer[80]; /* "ip:port" */
    int64_t session_id;
    int32_t timeout_ms;
    uint64_t received, sent;
    uint32_t queued;
    int64_t established_ms; /* wall clock */
    int64_t last_zxid; /* -1 after a reset, until the next reply */
    int32_t last_op;   /* the last request's opcode, or DP_CONN_NO_OP */
    int64_t last_latency_us, min_latency_us, max_latency_us, avg_latency_us;
};
typedef void (*dp_conn_fn)(void *arg, const struct dp_conn_info *ci);
void dp_each_conn(struct dp *dp, dp_conn_fn fn, void *arg);

/* Visits every watch: the session of the watching connection, kind, path. */
typedef void (*dp_watch_fn)(void *arg, int64_t session_id, enum watch_kind kind, const char *path);
void dp_each_watch(struct dp *dp, dp_watch_fn fn, void *arg);

/* ---- the UDP read path's handler (dataplane/UDP.md) ----------------------- */

/* The packet handler: one request datagram (req, len) from peer (its
 * source address, as bytes) in; the reply datagram, at most datagram_max
 * bytes, built in out (reset first; the caller's, it keeps its memory for
 * the next call). Returns the reply's length, or 0 when the datagram gets
 * no answer. Counts the outcome in *ctr. No I/O and no clock. The caller
 * holds rcu_read_lock (a back end takes it once per batch of datagrams,
 * not per datagram). Any number of threads at once, each with its own out
 * and ctr. */
size_t dp_udp_handle(struct dp *dp, const uint8_t *req, size_t len, const struct tree_addr *peer,
                     size_t datagram_max, struct zk_wbuf *out, struct dp_udp_counters *ctr);

/* Before a batch of n datagrams (reqs[i], lens[i] bytes; a NULL request
 * is skipped; at most TREE_PREFETCH_MAX looked at) is handled: when the
 * tree is larger than the cache, starts loading what their reads will
 * touch, the misses of different reads overlapping (tree_prefetch_paths).
 * Any bytes at all: nothing is validated beyond finding a path, nothing is
 * counted, and what dp_udp_handle answers does not change. Returns how
 * many of the requests name a node (0 when the tree is small). Same
 * threading and rcu_read_lock rule as dp_udp_handle, the lock held until
 * the batch is handled. */
unsigned dp_udp_prefetch(const struct dp *dp, const uint8_t *const *reqs, const size_t *lens,
                         unsigned n);
/* Whether dp_udp_prefetch does anything for the tree as it is now: a back
 * end skips finding a batch's requests when it does not. Same rule. */
bool dp_udp_prefetch_pays(const struct dp *dp);

#endif /* LARCH_DATAPLANE_H */
