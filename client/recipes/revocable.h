/*
 * revocable — a revocable shared lock, seed 000 "Revocable Shared Locks".
 *
 * The queue is rwlock.h's ("read-"/"write-" nodes, the same waiting rules).
 * The seed's change: right after creating its node (step 1) a client calls
 * getData() on that node with a watch. Anyone may ask the owner of a node to
 * give the lock up by calling setData() on the node with the text "unlock":
 * the data watch fires, the owner's watcher does another getData() and,
 * seeing "unlock", marks the object revoked and calls the on_revoke
 * callback. Release stays with the holder (the seed requires consent): the
 * application notices the request (callback, larch_revocable_revoked or
 * larch_revocable_wait_revoked) and calls larch_revocable_unlock. The
 * requests come from
 *   - a writer that waits with revoke_holders set: every time it finds
 *     itself blocked it writes "unlock" on every node below its own (all of
 *     them stand between it and the lock), and
 *   - an explicit larch_revocable_revoke on a node, by anyone.
 * A request that reaches a node still waiting is remembered: that client is
 * revoked as soon as it gets the lock. The seed's forced variant (deleting
 * the node of a holder that does not consent) is not provided.
 *
 * Threading: a struct larch_revocable is used by one thread at a time, with
 * two exceptions: larch_revocable_revoked may be called from any thread, and
 * on_revoke runs on the handle's event thread (it must be short: set a flag,
 * signal a thread; it must not call into this object). on_revoke is not
 * called after larch_revocable_free returns. Free the object before closing
 * its handle. Timeouts and error codes as in lock.h.
 */
#ifndef LARCH_RECIPES_REVOCABLE_H
#define LARCH_RECIPES_REVOCABLE_H

#include <stdbool.h>
#include <stdint.h>

#include "client/larch.h"
#include "client/recipes/lock.h"
#include "client/recipes/rwlock.h"

struct larch_revocable;

/* Called on the event thread when the holder (or waiter) is asked to
 * release; ctx is the one given to larch_revocable_create. */
typedef void (*larch_revocable_fn)(void *ctx);

/* A revocable shared lock on dir; on_revoke may be NULL. */
int larch_revocable_create(struct larch *lh, const char *dir, larch_revocable_fn on_revoke,
                           void *ctx, struct larch_revocable **out);
/* Deletes the node if any (best effort, see larch_lock_free) and frees r. */
void larch_revocable_free(struct larch_revocable *r);
/* Waits up to timeout_ms for a read hold (never asks others to release).
 * ZK_EBADARGUMENTS when r already holds. On failure the node is removed. */
int larch_revocable_rdlock(struct larch_revocable *r, int32_t timeout_ms);
/* Waits up to timeout_ms for a write hold; with revoke_holders it asks
 * every node ahead of it to release (see above). */
int larch_revocable_wrlock(struct larch_revocable *r, bool revoke_holders, int32_t timeout_ms);
/* Releases the hold (deletes the node) and clears the revoked mark. */
int larch_revocable_unlock(struct larch_revocable *r);
/* Whether r's current node has been asked to release. */
bool larch_revocable_revoked(struct larch_revocable *r);
/* Waits up to timeout_ms until r's current node is asked to release:
 * ZK_OK, ZK_EOPERATIONTIMEOUT, or ZK_EBADARGUMENTS when r has no node. */
int larch_revocable_wait_revoked(struct larch_revocable *r, int32_t timeout_ms);
/* Asks the owner of dir/node to release: setData("unlock"). ZK_ENONODE when
 * the node is gone (already released). */
int larch_revocable_revoke(struct larch *lh, const char *dir, const char *node);
enum larch_rwlock_mode larch_revocable_mode(const struct larch_revocable *r);
/* The child name of r's node while it holds or waits, else NULL. */
const char *larch_revocable_node(const struct larch_revocable *r);
void larch_revocable_stats(struct larch_revocable *r, struct larch_wake_stats *out);

/* The data a revocation request writes (seed 000). */
extern const char LARCH_REVOCABLE_UNLOCK[];

#endif
