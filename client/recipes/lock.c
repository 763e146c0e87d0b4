/* lock.c — see lock.h (seed 000 "Locks"): the exclusive lock, a queue of
 * sequential nodes (rcp.h) with the predecessor rule. */
#include "client/recipes/lock.h"

#include <stdlib.h>

#include "client/recipes/rcp.h"

struct larch_lock {
    struct rcp_seq *q;
    bool held;
};

/* Seed 000 lock step 1 names the node "<guid>-lock-"; the brief puts the
 * fixed prefix first ("lock-<guid>-") so a listing groups by kind. */
static const char LOCK_PREFIX[] = "lock";

int larch_lock_create(struct larch *lh, const char *dir, struct larch_lock **out)
{
    struct larch_lock *l = calloc(1, sizeof *l);
    if (l == NULL)
        return ZK_ESYSTEMERROR;
    int rc = rcp_seq_create(lh, dir, &l->q);
    if (rc != ZK_OK) {
        free(l);
        return rc;
    }
    *out = l;
    return ZK_OK;
}

void larch_lock_free(struct larch_lock *l)
{
    if (l == NULL)
        return;
    rcp_seq_free(l->q);
    free(l);
}

/* Gives up a node that did not (or no longer may) hold the lock. The
 * caller's deadline may have passed, so the delete gets its own. */
static void lock_abandon(struct larch_lock *l)
{
    struct larch *lh = rcp_seq_handle(l->q);
    (void)rcp_seq_leave(l->q, rcp_default_deadline(lh));
}

int larch_lock_trylock(struct larch_lock *l, bool *acquired)
{
    *acquired = false;
    if (l->held)
        return ZK_EBADARGUMENTS;
    int64_t deadline_ms = rcp_default_deadline(rcp_seq_handle(l->q));
    int rc = ZK_OK;
    if (rcp_seq_node(l->q) == NULL)
        rc = rcp_seq_enqueue(l->q, LOCK_PREFIX, NULL, -1, deadline_ms);
    char *blocker = NULL;
    if (rc == ZK_OK)
        rc = rcp_seq_check(l->q, rcp_seq_rule_predecessor, deadline_ms, &blocker);
    if (rc == ZK_OK && blocker == NULL) {
        l->held = *acquired = true;
        return ZK_OK;
    }
    free(blocker);
    /* Someone holds or waits: a trylock does not queue. lock_abandon's
     * delete failing leaves the node for the next call (or the session). */
    lock_abandon(l);
    return rc;
}

int larch_lock_lock(struct larch_lock *l, int32_t timeout_ms)
{
    if (l->held)
        return ZK_EBADARGUMENTS;
    int64_t deadline_ms;
    int rc = rcp_deadline(timeout_ms, &deadline_ms);
    if (rc != ZK_OK)
        return rc;
    if (rcp_seq_node(l->q) == NULL)
        rc = rcp_seq_enqueue(l->q, LOCK_PREFIX, NULL, -1, deadline_ms);
    if (rc == ZK_OK)
        rc = rcp_seq_await(l->q, rcp_seq_rule_predecessor, NULL, NULL, deadline_ms);
    if (rc == ZK_OK)
        l->held = true;
    else
        lock_abandon(l);
    return rc;
}

int larch_lock_unlock(struct larch_lock *l)
{
    if (!l->held)
        return ZK_EBADARGUMENTS;
    struct larch *lh = rcp_seq_handle(l->q);
    int rc = rcp_seq_leave(l->q, rcp_default_deadline(lh));
    if (rcp_seq_node(l->q) == NULL)
        l->held = false;
    return rc;
}

bool larch_lock_held(const struct larch_lock *l)
{
    return l->held;
}

const char *larch_lock_node(const struct larch_lock *l)
{
    return rcp_seq_node(l->q);
}

void larch_lock_stats(struct larch_lock *l, struct larch_wake_stats *out)
{
    rcp_wake_stats(rcp_seq_wake(l->q), &out->watches_set, &out->wakeups);
}
