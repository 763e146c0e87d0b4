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
    struct http *metrics; /* /metrics (metricsProvider.*), NULL: off */
    /* ZooKeeper's text trace mask (ZooTrace): stmk sets it, gtmk reads it,
     * on any worker. larchd has no trace log for it to select from, so it
     * is kept and reported, for the tools that set and read it, and changes
     * nothing larchd does. */
    _Atomic int64_t trace_mask;
};

/* ---- the peer link as the sequencer's transport (peers.c) --------------- */
struct peers;
/* Resolves the members' quorum hosts and binds this server's quorum
 * address (so a taken port fails here, with a message in err). */
struct peers *peers_new(const struct config_ensemble *ens, char *err, size_t errlen);
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

/* dp_fourlw_fn: answers one four-letter word (runs on a worker thread). */
void fourlw_answer(void *arg, struct dp *dp, const char *word, int64_t word_arg,
                   struct zk_wbuf *out);
/* Whitelist check for the dataplane. */
bool fourlw_allowed(void *arg, const char *word);

/* ---- HTTP endpoints (http.c) ---------------------------------------------- */
struct http;
/* Answers one GET of url (path only): the HTTP status, the body appended
 * to out, *type its content type (preset to text/plain). Runs on the HTTP
 * server's thread. */
typedef int (*http_get_fn)(void *arg, const char *url, struct zk_wbuf *out, const char **type);
/* Binds host (an IP literal):port (0: any free one) and serves GET and
 * HEAD through get on a thread of its own, registered with liburcu (get
 * may read the tree). NULL with err naming the address and the problem. */
struct http *http_start(const char *host, int port, http_get_fn get, void *arg, char *err,
                        size_t errlen);
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

#endif /* LARCH_SERVER_H */
