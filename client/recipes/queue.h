/*
 * queue — a distributed FIFO queue on liblarch (seed 000, "Queues").
 *
 * The queue is a znode P. A producer adds an item by creating
 * P/qn-<guid>-<seq> with the SEQUENCE flag (seed 000 step: create() with a
 * name ending in "queue-" and the sequence flag). A consumer lists P's
 * children with a watch, sorts them by sequence number and works through
 * that list from the lowest number without listing again until it is used
 * up (seed 000); an empty list makes it wait for the watch. For each name
 * it reads the item, then deletes it: the delete succeeding means the
 * consumer owns the item, NONODE means another consumer took it first.
 * So every item is delivered once, and each consumer receives any one
 * producer's items in the order they were put.
 *
 * PERSISTENT_SEQUENTIAL, not seed 000's EPHEMERAL|SEQUENCE: with ephemeral
 * items a queue loses everything a producer put when that producer leaves
 * or crashes; a durable queue keeps items until a consumer takes them.
 *
 * Connection loss (seed 000 "Recoverable Errors and the GUID"; seed 004
 * "Has my sequential znode been created?"): the item name carries a guid
 * (session id and a counter, hex), and each put is one multi that also
 * creates the ephemeral receipt P/receipts/<guid>. After a lost reply the
 * producer syncs and looks for its guid: listing P alone would not do,
 * since a fast consumer may already have removed the item, but the receipt
 * lives until the producer deletes it. A take deletes the item in a multi
 * that creates the ephemeral claim P/claims/<item>, so a consumer whose
 * delete reply was lost can tell "I took it" (our claim exists) from
 * "another consumer took it". Reads are retried. ZK_ESESSIONEXPIRED is
 * terminal (an item claimed in a multi whose reply was lost when the
 * session expired is then lost: the only case of "at most once").
 *
 * Threading: a struct queue is used by one thread at a time (one per
 * producer or consumer thread; they may share a handle). Its watcher runs
 * on the handle's event thread and only signals a condition variable. Free
 * the queue before closing its handle (queue_free removes watchers that
 * have not fired).
 */
#ifndef LARCH_RECIPES_QUEUE_H
#define LARCH_RECIPES_QUEUE_H

#include <stdint.h>

#include "client/larch.h"

struct queue;

/* Opens the queue at path, creating it (persistent; its parent must exist)
 * and its receipts/ and claims/ children when absent. lh must outlive q. */
int queue_open(struct larch *lh, const char *path, int32_t timeout_ms, struct queue **out);
void queue_free(struct queue *q);

/* Adds an item (len bytes; NULL/-1 for none) at the tail. */
int queue_put(struct queue *q, const void *data, int32_t len, int32_t timeout_ms);
/* Removes the item at the head, waiting up to timeout_ms for one (0: do
 * not wait). *data is malloc'd and NUL-terminated (NULL, *len -1 for a
 * null item). ZK_EOPERATIONTIMEOUT when the queue stayed empty. */
int queue_take(struct queue *q, char **data, int32_t *len, int32_t timeout_ms);

#endif
