/*
 * election — leader election without the herd effect, seed 000 "Leader
 * Election".
 *
 * A candidate creates "<dir>/n-<guid>-NNNNNNNNNN" (ephemeral + sequential;
 * the node's data is the candidate's id). The candidate whose node has the
 * lowest sequence number is the leader. Every other candidate watches only
 * the node just below its own (exists with a watch), never the leader's, so
 * a resignation or crash wakes exactly one candidate. When the watched node
 * goes, the candidate lists the children again: if its node is now the
 * lowest it is the leader, otherwise it watches the new node just below it.
 * Node names follow rcp.h's GUID rule for lost create replies. A leader
 * that crashes loses its node when its session expires.
 *
 * The object does not watch in the background: larch_election_wait_leader
 * runs the watch loop on the caller's thread; larch_election_is_leader
 * checks once.
 *
 * Threading: a struct larch_election is used by one thread at a time. Free
 * it before closing its handle. Timeouts and error codes as in lock.h.
 */
#ifndef LARCH_RECIPES_ELECTION_H
#define LARCH_RECIPES_ELECTION_H

#include <stdbool.h>
#include <stdint.h>

#include "client/larch.h"
#include "client/recipes/lock.h"

struct larch_election;

/* A candidate for the election under dir (created with its parents on first
 * use); id (copied, may be "") is what larch_election_leader reports. */
int larch_election_create(struct larch *lh, const char *dir, const char *id,
                          struct larch_election **out);
/* Resigns (best effort, see larch_lock_free) and frees e. */
void larch_election_free(struct larch_election *e);
/* Volunteers: creates the candidate node. ZK_EBADARGUMENTS when joined. */
int larch_election_join(struct larch_election *e, int32_t timeout_ms);
/* Whether e leads now (one listing, no watch). ZK_ENONODE when e's node is
 * gone (someone deleted it; join again), ZK_EBADARGUMENTS when not joined. */
int larch_election_is_leader(struct larch_election *e, bool *leader);
/* Waits up to timeout_ms until e leads. On ZK_EOPERATIONTIMEOUT e stays a
 * candidate (its pending watch is removed). */
int larch_election_wait_leader(struct larch_election *e, int32_t timeout_ms);
/* The id of the current leader (malloc'd), from the lowest node's data.
 * ZK_ENONODE when there is no candidate. Needs no join. */
int larch_election_leader(struct larch_election *e, char **id);
/* Withdraws (deletes the node); a leader gives up leadership. */
int larch_election_resign(struct larch_election *e);
/* The child name of e's node while a candidate, else NULL. */
const char *larch_election_node(const struct larch_election *e);
void larch_election_stats(struct larch_election *e, struct larch_wake_stats *out);

#endif
