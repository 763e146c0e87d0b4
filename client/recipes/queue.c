/*
 * queue.c — see queue.h. Seed 000, "Queues" and "Recoverable Errors and the
 * GUID"; seed 004, "Has my sequential znode been created?" and multiop. The
 * engine, shared with priority_queue, is rcp.h's item queue.
 */
#include "client/recipes/queue.h"

#include <stdlib.h>

#include "client/recipes/rcp.h"

struct queue {
    struct rcp_itemq *items;
};

int queue_open(struct larch *lh, const char *path, int32_t timeout_ms, struct queue **out)
{
    *out = NULL;
    struct queue *q = calloc(1, sizeof *q);
    if (q == NULL)
        return ZK_ESYSTEMERROR;
    int rc = rcp_itemq_open(lh, path, false, timeout_ms, &q->items);
    if (rc != ZK_OK) {
        free(q);
        return rc;
    }
    *out = q;
    return ZK_OK;
}

void queue_free(struct queue *q)
{
    if (q == NULL)
        return;
    rcp_itemq_free(q->items);
    free(q);
}

int queue_put(struct queue *q, const void *data, int32_t len, int32_t timeout_ms)
{
    return rcp_itemq_put(q->items, 0, data, len, timeout_ms);
}

int queue_take(struct queue *q, char **data, int32_t *len, int32_t timeout_ms)
{
    return rcp_itemq_take(q->items, NULL, data, len, timeout_ms);
}
