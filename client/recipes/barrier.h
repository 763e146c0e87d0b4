/*
 * barrier — the two barriers of the seeds.
 *
 * Node barrier (seed 000/001 "Barriers"): the barrier is in place while the
 * barrier node exists. larch_barrier_wait follows the seed's steps: exists()
 * on the node with a watch (1); if it is absent, proceed (2); otherwise
 * wait for the watch event (3) and call exists() again (4).
 * larch_barrier_set creates the node, larch_barrier_remove deletes it and
 * so releases every waiter at once (waking all of them is the point here).
 *
 * Count barrier (seed 003's Barrier class, "enter when N participants have
 * joined"): the barrier node is a directory; enter creates an ephemeral
 * child "p-<guid>" and lists the children with a watch until `count`
 * participants are there; leave deletes the child and lists with a watch
 * until no participant remains. One change to seed 003: the first
 * participant to see the count creates a persistent "ready" child, and
 * enter also passes when it sees "ready". Without it a participant that
 * lists late could see fewer than `count` children because faster ones
 * already left, and wait forever (seed 000's double barrier uses the same
 * "ready" node for the same reason). So a count barrier node serves ONE
 * round; use a new path per round. Every arrival wakes every waiter (a
 * children watch on one node); double_barrier.h avoids that on leave.
 *
 * A path is used as one kind of barrier only. Participant names carry a
 * guid (rcp.h's GUID rule), so a create retried after a lost reply is
 * recognised as our own.
 *
 * Threading: a struct larch_barrier is used by one thread at a time. Free
 * it before closing its handle. Timeouts and error codes as in lock.h.
 */
#ifndef LARCH_RECIPES_BARRIER_H
#define LARCH_RECIPES_BARRIER_H

#include <stdint.h>

#include "client/larch.h"
#include "client/recipes/lock.h"

struct larch_barrier;

/* A barrier on path (nothing is created yet). */
int larch_barrier_create(struct larch *lh, const char *path, struct larch_barrier **out);
/* Leaves a count barrier entered and not left (best effort, see
 * larch_lock_free) and frees b. */
void larch_barrier_free(struct larch_barrier *b);

/* Node barrier: put it in place (create the node and missing parents; an
 * existing node is fine). */
int larch_barrier_set(struct larch_barrier *b, int32_t timeout_ms);
/* Node barrier: lift it (delete the node; an absent node is fine). */
int larch_barrier_remove(struct larch_barrier *b, int32_t timeout_ms);
/* Node barrier: wait until the node is absent. ZK_OK at once when it is. */
int larch_barrier_wait(struct larch_barrier *b, int32_t timeout_ms);

/* Count barrier: join and wait until count participants have joined. On
 * failure our participant node is removed again. ZK_EBADARGUMENTS when b
 * has already entered or count < 1. */
int larch_barrier_enter(struct larch_barrier *b, int32_t count, int32_t timeout_ms);
/* Count barrier: withdraw and wait until every participant has. */
int larch_barrier_leave(struct larch_barrier *b, int32_t timeout_ms);

void larch_barrier_stats(struct larch_barrier *b, struct larch_wake_stats *out);

#endif
