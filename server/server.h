/*
 * server — larchd's wiring: the pieces main() starts, and the four-letter
 * words answered on the client port. Private to server/.
 */
#ifndef LARCH_SERVER_H
#define LARCH_SERVER_H

#include "dataplane/dataplane.h"
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
};

/* dp_fourlw_fn: answers one four-letter word (runs on a worker thread). */
void fourlw_answer(void *arg, struct dp *dp, const char *word, struct zk_wbuf *out);
/* Whitelist check for the dataplane. */
bool fourlw_allowed(void *arg, const char *word);

#endif /* LARCH_SERVER_H */
