/*
 * lock — an exclusive lock without the herd effect (built, like rwlock,
 * revocable and election, on the sequential-node queue of rcp.h).
 *
 * The lock follows seed 000 "Locks" (also seed 002 "Simple locks without
 * the herd effect" and seed 004 "The Herd Effect") step by step: a client
 * creates "<dir>/lock-<guid>-NNNNNNNNNN" (ephemeral + sequential, step 1),
 * lists the children WITHOUT a watch (step 2), holds the lock when its node
 * is the lowest (step 3), otherwise sets an exists watch on the node just
 * below it (step 4) and waits for that node to go before listing again
 * (step 5). Unlock deletes the node. Each node is watched by at most one
 * client, so a release wakes exactly one waiter. A holder that dies loses
 * its node when its session expires, and the lock passes on.
 *
 * Recoverable errors (seed 000 "Recoverable Errors and the GUID", seed 004
 * "Has my sequential znode been created?"): every node name carries a guid
 * (session id + a per-process counter, in hex) unique to the recipe
 * instance and acquisition. When create() fails with ZK_ECONNECTIONLOSS the
 * recipe lists the children and adopts the node carrying its guid before
 * it tries again, so a lost reply never leaves an orphan node ahead of
 * everyone. Reads are retried on ZK_ECONNECTIONLOSS; ZK_ESESSIONEXPIRED is
 * terminal and returned.
 *
 * Threading: a recipe object (struct larch_lock, and the objects of the
 * recipes that refer here) is used by one thread at a time. Its watchers
 * run on the handle's event thread and only signal a condition variable,
 * so blocking calls wait on the caller's thread. Free recipe objects before closing their handle:
 * freeing removes the object's pending watches through the handle.
 *
 * Errors are ZooKeeper codes (proto/proto.h). Blocking calls take a
 * timeout_ms (>= 0; 0 means check once) and return ZK_EOPERATIONTIMEOUT
 * when it runs out; a single server round trip may overrun it by the time
 * the handle needs to fail that request. Calls without a timeout (unlock,
 * free) retry for twice the session timeout.
 */
#ifndef LARCH_RECIPES_LOCK_H
#define LARCH_RECIPES_LOCK_H

#include <stdbool.h>
#include <stdint.h>

#include "client/larch.h"

struct larch_lock;

/* A lock on dir (created with its parents when missing, on first use).
 * ZK_OK, ZK_EBADARGUMENTS (invalid dir) or ZK_ESYSTEMERROR. */
int larch_lock_create(struct larch *lh, const char *dir, struct larch_lock **out);
/* Deletes the lock's node if it has one (held or queued) and frees l. A
 * failed delete is not reported: the node is ephemeral and goes with the
 * session; call larch_lock_unlock first to see errors. */
void larch_lock_free(struct larch_lock *l);
/* Takes the lock if nobody holds it or waits for it, without waiting:
 * *acquired tells. ZK_EBADARGUMENTS when l already holds it. */
int larch_lock_trylock(struct larch_lock *l, bool *acquired);
/* Waits up to timeout_ms for the lock. On any failure the node is removed
 * again (ZK_EOPERATIONTIMEOUT, ZK_ESESSIONEXPIRED, ...). ZK_ENONODE when
 * someone else deleted the queued node. Not re-entrant: ZK_EBADARGUMENTS
 * when l already holds it. */
int larch_lock_lock(struct larch_lock *l, int32_t timeout_ms);
/* Releases the lock (deletes the node). ZK_EBADARGUMENTS when not held. */
int larch_lock_unlock(struct larch_lock *l);
bool larch_lock_held(const struct larch_lock *l);
/* The child name of l's node ("lock-<guid>-0000000007") while it holds or
 * waits, else NULL. Valid until the next call on l. */
const char *larch_lock_node(const struct larch_lock *l);

/* Watch statistics of a recipe object: lock, rwlock, revocable, election,
 * barrier and double_barrier report them (tests check that a release wakes
 * one waiter). */
struct larch_wake_stats {
    uint64_t watches_set; /* watches the server accepted */
    uint64_t wakeups;     /* node events delivered (not session events) */
};
void larch_lock_stats(struct larch_lock *l, struct larch_wake_stats *out);

#endif
