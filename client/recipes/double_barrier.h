/*
 * double_barrier — a double barrier, seed 000 "Double Barriers" (seed 001
 * gives the same steps one per line): clients synchronise the beginning and
 * the end of a computation.
 *
 * Enter (seed steps 1-6): name our node n = b + "/p-<guid>" (1); set a
 * watch with exists(b + "/ready") (2); create n, ephemeral (3); list the
 * children of b (4); with fewer than `count` participants, wait for the
 * ready watch (5); else create "ready", persistent (6). Waiters wake only
 * when the last participant arrives.
 *
 * Leave (seed steps 1-6): list the participants (1); none left: done (2);
 * ours the only one: delete it, done (3); ours the lowest: wait on the
 * highest (4); else delete ours if it still exists and wait on the lowest
 * (5); repeat (6). Only one process wakes per deletion, except the last
 * (the lowest), whose deletion releases everyone. Participants that crash
 * lose their ephemeral node and do not hold the others up.
 *
 * "ready" stays after the round, so a barrier node serves ONE round; use a
 * new path per round. Participant names carry a guid (rcp.h's GUID rule),
 * so a create retried after a lost reply is recognised as our own.
 *
 * Threading: a struct larch_double_barrier is used by one thread at a time.
 * Free it before closing its handle. Timeouts and error codes as in lock.h.
 */
#ifndef LARCH_RECIPES_DOUBLE_BARRIER_H
#define LARCH_RECIPES_DOUBLE_BARRIER_H

#include <stdint.h>

#include "client/larch.h"
#include "client/recipes/lock.h"

struct larch_double_barrier;

/* A double barrier on path b (created with its parents on enter) for
 * count participants (>= 1). */
int larch_double_barrier_create(struct larch *lh, const char *path, int32_t count,
                                struct larch_double_barrier **out);
/* Deletes our node if any (best effort, see larch_lock_free) and frees d. */
void larch_double_barrier_free(struct larch_double_barrier *d);
/* Joins and waits until count participants have. On failure our node is
 * removed again. ZK_EBADARGUMENTS when d has already entered. */
int larch_double_barrier_enter(struct larch_double_barrier *d, int32_t timeout_ms);
/* Waits until every participant has left (our node included). */
int larch_double_barrier_leave(struct larch_double_barrier *d, int32_t timeout_ms);
/* The child name of d's node while entered, else NULL. */
const char *larch_double_barrier_node(const struct larch_double_barrier *d);
void larch_double_barrier_stats(struct larch_double_barrier *d, struct larch_wake_stats *out);

#endif
