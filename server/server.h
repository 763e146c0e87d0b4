/*
 * server — larchd's wiring: the pieces main() starts, and the four-letter
 * words answered on the client port. Private to server/.
 */
#ifndef LARCH_SERVER_H
#define LARCH_SERVER_H

#include <stdatomic.h>

#include "dataplane/dataplane.h"
#include "dpdk/dpdk.h"
#include "replication/peer_link.h"
#include "replication/replication.h"
#include "server/config.h"
#include "server/durability.h"
#include "tls/tls.h"
#include "tree/tree.h"

#define LARCH_VERSION "0.1.0"
/* What clients and tools see as the server version: the ZooKeeper protocol
 * level we speak, then ours (kazoo parses the leading x.y.z). */
#define LARCH_ZK_VERSION "3.8.0-larch-" LARCH_VERSION
/* What gtmk answers until stmk sets another mask: ZooKeeper's ZooTrace
 * default, CLIENT_REQUEST | SERVER_PACKET | SESSION | WARNING
 * (2 | 16 | 32 | 256), as stock 3.8.0 answers it. */
#define LARCH_TRACE_MASK_DEFAULT 306

struct server {
    struct config cfg;
    struct tree *tree;
    struct seq *seq;
    struct dp *dp;
    struct storage *st;     /* the data dirs' files (NULL without a dataDir) */
    struct durability *dur; /* NULL without a dataDir: in memory only */
    int64_t started_ms;
    /* an ensemble member (config_is_distributed): its view of the ensemble
     * and its peer link; peers is NULL when standalone */
    bool member;
    struct config_ensemble ens;
    struct peers *peers;
    char *config_node; /* what /zookeeper/config reads as (NULL standalone) */
    int64_t config_node_mtime;
    struct ldp *ldp;   /* the UDP path on a DPDK port (dpdk/dpdk.h), NULL: none */
    struct tls_ctx *tls; /* the secure client port's (tls/tls.h), NULL: none */
    struct tls_ctx *quorum_tls; /* the quorum links' (sslQuorum), NULL: plain */
    struct http *metrics; /* /metrics (metricsProvider.*), NULL: off */
    /* ZooKeeper's text trace mask (ZooTrace): stmk sets it, gtmk reads it,
     * on any worker. larchd has no trace log for it to select from, so it
     * is kept and reported, for the tools that set and read it, and changes
     * nothing larchd does. */
    _Atomic int64_t trace_mask;
    struct admin *admin;  /* the AdminServer (admin.*), NULL: off */
    /* SASL (jaasLoginConfig): saslsrv holds the JAAS users while sasl is
     * true; the dataplane borrows the super user names (pointers into cfg) */
    bool sasl;
    const char *sasl_super_users[CONFIG_KEYED_MAX];
};

/* ---- the peer link as the sequencer's transport (peers.c) --------------- */
struct peers;
/* Resolves the members' quorum hosts and binds this server's quorum
 * address (so a taken port fails here, with a message in err). tls: the
 * quorum links' context (sslQuorum; NULL: plain), borrowed, to be freed
 * after peers_free; tls_verify_host: a dialled member's certificate must
 * name its server.N host (ssl.quorum.hostnameVerification). */
struct peers *peers_new(const struct config_ensemble *ens, struct tls_ctx *tls,
                        bool tls_verify_host, char *err, size_t errlen);
const struct seq_peer_ops *peers_ops(void);
/* The sequencer the link wakes (before peers_start). */
void peers_attach(struct peers *p, struct seq *s);
int peers_start(struct peers *p);
void peers_stop(struct peers *p);
void peers_free(struct peers *p);
/* The link to the i-th other member (0-based, in id order) of the current
 * membership, which a reconfig changes (the sequencer's membership op):
 * 0, or -ENOENT once i is past the last. Any thread; each call is
 * consistent on its own, so iterate with
 *     for (uint32_t i = 0; peers_status(p, i, &st) == 0; i++)
 * (a change between two calls may shift the indexes by one). */
int peers_status(struct peers *p, uint32_t i, struct peer_link_peer_status *st);

/* ---- dynamic reconfig (reconfig_ops.c) ---------------------------------- */
/* The sequencer's reconfig ops; arg: the struct server. */
const struct seq_reconfig_ops *reconfig_ops(void);
/* The servers of membership c (its description, or zoo.cfg's when it has
 * none), in id order, with c's roles: 0, or -1 if the description does not
 * parse. out has room for CONFIG_SERVERS_MAX. */
int reconfig_current_servers(const struct server *srv, const struct raft_config *c,
                             struct config_server *out, uint32_t *n);

/* ---- the service manager (notify.c) ------------------------------------ */
/* Sends state (sd_notify's newline-separated "VAR=value" lines, e.g.
 * "READY=1\nSTATUS=serving") as one datagram to the AF_UNIX socket addr,
 * which main takes from $NOTIFY_SOCKET: a path, or "@name" for a name in
 * the abstract namespace. A NULL or empty addr (larchd was not started by
 * a service manager that listens) sends nothing and returns 0. Otherwise
 * 0, or -errno: -EAFNOSUPPORT for an address of another form (systemd's
 * vsock:), -ENAMETOOLONG, or what socket/sendto said (-ENOENT,
 * -ECONNREFUSED: nobody listens there). Like sd_notify, it waits if the
 * receiver's queue is full (systemd drains its socket promptly). Any
 * thread; it reads no environment itself. */
int notify_service(const char *addr, const char *state);

/* dp_fourlw_fn: answers one four-letter word (runs on a worker thread). */
void fourlw_answer(void *arg, struct dp *dp, const char *word, int64_t word_arg,
                   struct zk_wbuf *out);
/* Whitelist check for the dataplane. */
bool fourlw_allowed(void *arg, const char *word);

/* ---- what the 4lw and the AdminServer report (fourlw.c) ------------------- */
/* Each fact is gathered here once: the 4lw print it as text, the
 * AdminServer (admin.c) writes it as JSON. Any thread registered with
 * liburcu (the tree is read under RCU): a worker for the 4lw, the HTTP
 * thread for the AdminServer. */

/* ZooKeeper's Version.getFullVersion: "<version>, built on <date time>". */
const char *server_full_version(void);

/* One value of a report, typed as ZooKeeper's Java objects are (a long,
 * a double, a String, a Boolean), so that JSON gets the same types. */
enum report_type { REPORT_INT, REPORT_UINT, REPORT_DOUBLE, REPORT_TEXT, REPORT_BOOL };
struct report_value {
    enum report_type type;
    union {
        int64_t i;
        uint64_t u;
        double d;
        const char *text;
        bool b;
    };
};
/* Takes one key and value; both are valid during the call only. */
typedef void (*report_fn)(void *arg, const char *key, const struct report_value *v);
/* mntr's values, in its order, keys without "zk_" (ZooKeeper's
 * dumpMonitorValues and its metrics provider's dump). zxids and digests
 * are text ("0x..."), as mntr prints them. */
void server_monitor(struct server *srv, report_fn fn, void *arg);
/* envi's entries (ZooKeeper's Environment.list), every value text. */
void server_environment(struct server *srv, report_fn fn, void *arg);

/* The tree's and the dataplane's counters, read once. */
struct server_counts {
    struct tree_stats tree;
    struct dp_stats dp;
};
void server_get_counts(struct server *srv, struct server_counts *out);
/* Request latency as mntr and srvr print it: whole milliseconds, the
 * average rounded to four decimals (as ZooKeeper's AvgMinMaxCounter). */
#define SERVER_AVG_TEXT_MAX 48
struct server_latency {
    uint64_t min_ms, max_ms;
    double avg_ms;                        /* rounded half up to four decimals */
    char avg_text[SERVER_AVG_TEXT_MAX];   /* as ZooKeeper prints it (Java's double) */
};
void server_latency(const struct dp_stats *d, struct server_latency *out);

/* ZooKeeper's server state: "standalone", "leader", "follower",
 * "observer", "read-only" or "looking" (a static string). */
const char *server_state_name(struct server *srv);
/* ZooKeeper's Zab phase of a server in that state: "" standalone,
 * "broadcast" with a leader, "election" without. */
const char *server_zab_phase(const char *state);
/* isro: serving read-only clients without a quorum (readonlymode). */
bool server_read_only(struct server *srv);
/* Clients are served: standalone, or a member with a leader or read-only
 * (ZooKeeper's zkServer.isRunning()). */
bool server_serving(struct server *srv);

/* A connection's last operation as ZooKeeper's cons and connections
 * print it: "NA" before its first request and after crst. */
const char *server_last_op_name(const struct dp_conn_info *ci);

/* dirs: the bytes of the files in larchd's data dirs, which stand where
 * ZooKeeper's version-2 directories do, under ZooKeeper's names: its
 * datadir_size is the txn log's directory (<dataLogDir>/larch), its
 * logdir_size the snapshots' (<dataDir>/larch); one number twice when they
 * are one directory. 0 without a dataDir, or for a directory that cannot
 * be read (logged). Runs a bounded directory walk: any thread. */
void server_dir_sizes(struct server *srv, uint64_t *datadir_size, uint64_t *logdir_size);

/* (session, path) pairs: watches, or ephemeral nodes by owner. */
struct server_path_entry {
    int64_t session;
    char *path;
};
struct server_paths {
    struct server_path_entry *v;
    size_t n, cap;
    bool oom;
};
void server_paths_free(struct server_paths *l);
enum server_order { SERVER_BY_SESSION, SERVER_BY_PATH };
/* Every watch of every connection (a data and a child watch on one path
 * are two), sorted by session then path or by path then session: 0, or
 * -ENOMEM with *out empty. Free with server_paths_free. */
int server_watches(struct server *srv, enum server_order order, struct server_paths *out);
/* wchs: sessions watching, distinct paths watched, watches. 0 or -ENOMEM. */
struct server_watch_summary {
    size_t connections, paths, watches;
};
int server_watch_summary(struct server *srv, struct server_watch_summary *out);

/* dump: every session, with the time (base_mono_ms) past which the
 * sequencer expires it if it stays silent, and the ephemeral nodes by
 * owner (sorted by session, then path). 0, or -ENOMEM with *out empty.
 * Free with server_sessions_free. */
struct server_session_entry {
    int64_t id;
    int32_t timeout_ms;
    int64_t expires_ms;
};
struct server_sessions {
    struct server_session_entry *v; /* in the tree's order */
    size_t n, cap;
    struct server_paths ephemerals;
};
int server_sessions(struct server *srv, struct server_sessions *out);
void server_sessions_free(struct server_sessions *s);

/* ---- HTTP endpoints (http.c) ---------------------------------------------- */
struct http;
/* Answers one GET of url (path only): the HTTP status, the body appended
 * to out, *type its content type (preset to text/plain). Runs on the HTTP
 * server's thread. */
typedef int (*http_get_fn)(void *arg, const char *url, struct zk_wbuf *out, const char **type);
/* Binds host (an IP literal):port (0: any free one) and serves GET and
 * HEAD through get on a thread of its own, registered with liburcu (get
 * may read the tree); a connection idle for idle_timeout_s (at least 1)
 * is closed. NULL with err naming the address and the problem. */
struct http *http_start(const char *host, int port, unsigned idle_timeout_s, http_get_fn get,
                        void *arg, char *err, size_t errlen);
int http_port(const struct http *h); /* the bound port */
/* Stops the thread and closes the socket; NULL is a no-op. */
void http_stop(struct http *h);

/* ---- /metrics in Prometheus's text format (metrics.c) ---------------------- */
/* metricsProvider.className=...PrometheusMetricsProvider: ZooKeeper's
 * metric names (what mntr reports, without "zk_"), its fsynctime and
 * snapshottime summaries, the process metrics Prometheus clients export,
 * and larchd's own (larch_*). Any thread. */
void metrics_prometheus(struct server *srv, struct zk_wbuf *out);
/* An http_get_fn (arg: the struct server) serving /metrics. */
int metrics_http_get(void *arg, const char *url, struct zk_wbuf *out, const char **type);

/* ---- ZooKeeper's AdminServer (admin.c) ------------------------------------ */
/* admin.enableServer: JSON answers to the four-letter words at
 * http://admin.serverAddress:admin.serverPort<admin.commandURL>/<command>,
 * the commands ZooKeeper 3.9's Commands registers (README "AdminServer"
 * lists which differ and why). srv must be started (the dataplane up):
 * the answers read it. Reads the --config file's text once, for
 * initial_configuration. NULL with err naming the problem (a taken port:
 * the address). */
struct admin;
struct admin *admin_start(struct server *srv, char *err, size_t errlen);
int admin_port(const struct admin *a); /* the bound port */
/* Stops answering (joins the HTTP thread) and frees a; NULL is a no-op. */
void admin_stop(struct admin *a);

#endif /* LARCH_SERVER_H */
