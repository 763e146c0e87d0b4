/*
 * priority_queue — a distributed priority queue on liblarch (seed 000,
 * "Priority Queues": the generic queue recipe with two changes).
 *
 * Change one: an item's name carries its priority, P/qn-PP-<guid>-<seq>,
 * PP being two decimal digits, lower numbers first ("just like UNIX").
 * Consumers order items by (priority, sequence number), so items of one
 * priority leave in the order they were put. Change two: a consumer works
 * from an up-to-date children list: the list (read with a watch) is
 * thrown away as soon as that watch fires, so an urgent item put while a
 * consumer works through older ones is taken next (pq_take also starts
 * every take from a fresh listing, so an item put before the call is
 * never passed over for a notification still in flight). Otherwise as in
 * queue.h: read the item, then delete it (success = ours, NONODE = another
 * consumer took it, move on).
 *
 * Items are PERSISTENT_SEQUENTIAL rather than seed 000's ephemeral, so a
 * producer leaving does not take its items with it (see queue.h).
 *
 * Connection loss (seed 000 "Recoverable Errors and the GUID", seed 004):
 * as in queue.h: names carry a guid (session id + counter, hex); a put is
 * one multi with the ephemeral receipt P/receipts/<guid>, a take one multi
 * with the ephemeral claim P/claims/<item>, so after a lost reply the
 * client can tell whether its request applied even when another consumer
 * already removed the item. Reads are retried; ZK_ESESSIONEXPIRED is
 * terminal.
 *
 * Threading: a struct pq is used by one thread at a time (one per producer
 * or consumer thread; they may share a handle). Its watcher runs on the
 * handle's event thread and only signals a condition variable. Free a pq
 * before closing its handle.
 */
#ifndef LARCH_RECIPES_PRIORITY_QUEUE_H
#define LARCH_RECIPES_PRIORITY_QUEUE_H

#include <stdint.h>

#include "client/larch.h"

#define PQ_PRIORITY_MAX 99

struct pq;

/* Opens the priority queue at path, creating it (persistent; its parent
 * must exist) and its receipts/ and claims/ children when absent. */
int pq_open(struct larch *lh, const char *path, int32_t timeout_ms, struct pq **out);
void pq_free(struct pq *q);

/* Adds an item with priority 0 (first) .. PQ_PRIORITY_MAX (last). */
int pq_put(struct pq *q, int priority, const void *data, int32_t len, int32_t timeout_ms);
/* Removes the first item (lowest priority value, oldest within it),
 * waiting up to timeout_ms for one. *priority (may be NULL) gets its
 * priority; *data is malloc'd and NUL-terminated. */
int pq_take(struct pq *q, int *priority, char **data, int32_t *len, int32_t timeout_ms);

#endif
