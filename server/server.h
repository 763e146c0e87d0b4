/*
 * server — larchd's wiring: the pieces main() starts, and the four-letter
 * words answered on the client port. Private to server/.
 */
#ifndef LARCH_SERVER_H
#define LARCH_SERVER_H

#include "dataplane/dataplane.h"
#include "dpdk/dpdk.h"
#include "replication/peer_link.h"
#include "replication/replication.h"
#include "server/config.h"
#include "server/durability.h"
#include "tree/tree.h"

#define LARCH_VERSION "0.1.0"
/* What clients and tools see as the server version: the ZooKeeper protocol
 * level we speak, then ours (kazoo parses the leading x.y.z). */
#define LARCH_ZK_VERSION "3.8.0-larch-" LARCH_VERSION

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
void fourlw_answer(void *arg, struct dp *dp, const char *word, struct zk_wbuf *out);
/* Whitelist check for the dataplane. */
bool fourlw_allowed(void *arg, const char *word);

#endif /* LARCH_SERVER_H */
