/*
 * rwlock — a shared (read/write) lock, seed 000 "Shared Locks".
 *
 * Readers create "<dir>/read-<guid>-NNNNNNNNNN" and writers
 * "<dir>/write-<guid>-NNNNNNNNNN" (ephemeral + sequential, both steps 1),
 * then list the children without a watch (step 2). A reader holds the lock
 * when no "write-" node has a lower sequence number (step 3); otherwise it
 * exists-watches the "write-" node with the next lower number (step 4) and
 * lists again when it goes (steps 5-6). A writer holds the lock when no node
 * at all is below it; otherwise it exists-watches the node just below it.
 * Several readers may wake together when the write node they all wait for
 * goes; the seed notes this is not a herd, since all of them may proceed.
 * Node names follow rcp.h's GUID rule for lost create replies, and a queue
 * is fair: a reader that arrives after a waiting writer waits behind it.
 *
 * Threading: a struct larch_rwlock is used by one thread at a time; it holds
 * at most one node (read or write) at a time. Free it before closing its
 * handle. Timeouts and error codes as in lock.h.
 */
#ifndef LARCH_RECIPES_RWLOCK_H
#define LARCH_RECIPES_RWLOCK_H

#include <stdbool.h>
#include <stdint.h>

#include "client/larch.h"
#include "client/recipes/lock.h"

struct larch_rwlock;

enum larch_rwlock_mode { LARCH_RWLOCK_NONE = 0, LARCH_RWLOCK_READ = 1, LARCH_RWLOCK_WRITE = 2 };

/* A shared lock on dir (created with its parents on first use). */
int larch_rwlock_create(struct larch *lh, const char *dir, struct larch_rwlock **out);
/* Deletes the node if any (best effort, see larch_lock_free) and frees rw. */
void larch_rwlock_free(struct larch_rwlock *rw);
/* Waits up to timeout_ms for a read (shared) hold. On failure the node is
 * removed again. ZK_EBADARGUMENTS when rw already holds either mode. */
int larch_rwlock_rdlock(struct larch_rwlock *rw, int32_t timeout_ms);
/* Waits up to timeout_ms for a write (exclusive) hold; as rdlock. */
int larch_rwlock_wrlock(struct larch_rwlock *rw, int32_t timeout_ms);
/* Releases the hold (deletes the node). ZK_EBADARGUMENTS when none. */
int larch_rwlock_unlock(struct larch_rwlock *rw);
enum larch_rwlock_mode larch_rwlock_mode(const struct larch_rwlock *rw);
/* The child name of rw's node while it holds or waits, else NULL. */
const char *larch_rwlock_node(const struct larch_rwlock *rw);
void larch_rwlock_stats(struct larch_rwlock *rw, struct larch_wake_stats *out);

/* The two waiting rules, for recipes built on the same queue (revocable):
 * a reader waits for the closest "write-" node below it, a writer for the
 * node just below it. */
int32_t larch_rwlock_rule_read(const struct larch_strings *sorted, int32_t self);
int32_t larch_rwlock_rule_write(const struct larch_strings *sorted, int32_t self);
/* The node prefixes ("read", "write"). */
extern const char LARCH_RWLOCK_READ_PREFIX[];
extern const char LARCH_RWLOCK_WRITE_PREFIX[];

#endif
