/*
 * priority_queue.c — see priority_queue.h. Seed 000, "Priority Queues",
 * "Queues" and "Recoverable Errors and the GUID"; seed 004, "Has my
 * sequential znode been created?" and multiop. The engine, shared with
 * queue, is rcp.h's item queue with priorities.
 */
#include "client/recipes/priority_queue.h"

#include <stdlib.h>

#include "client/recipes/rcp.h"

_Static_assert(PQ_PRIORITY_MAX == RCP_ITEMQ_PRIORITY_MAX, "two decimal digits in the name");

struct pq {
    struct rcp_itemq *items;
};

int pq_open(struct larch *lh, const char *path, int32_t timeout_ms, struct pq **out)
{
    *out = NULL;
    struct pq *q = calloc(1, sizeof *q);
    if (q == NULL)
        return ZK_ESYSTEMERROR;
    int rc = rcp_itemq_open(lh, path, true, timeout_ms, &q->items);
    if (rc != ZK_OK) {
        free(q);
        return rc;
    }
    *out = q;
    return ZK_OK;
}

void pq_free(struct pq *q)
{
    if (q == NULL)
        return;
    rcp_itemq_free(q->items);
    free(q);
}

int pq_put(struct pq *q, int priority, const void *data, int32_t len, int32_t timeout_ms)
{
    return rcp_itemq_put(q->items, priority, data, len, timeout_ms);
}

int pq_take(struct pq *q, int *priority, char **data, int32_t *len, int32_t timeout_ms)
{
    return rcp_itemq_take(q->items, priority, data, len, timeout_ms);
}
