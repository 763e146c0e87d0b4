/* rwlock.c — see rwlock.h (seed 000 "Shared Locks"). */
#include "client/recipes/rwlock.h"

#include <stdlib.h>

#include "client/recipes/rcp.h"

const char LARCH_RWLOCK_READ_PREFIX[] = "read";
const char LARCH_RWLOCK_WRITE_PREFIX[] = "write";

struct larch_rwlock {
    struct rcp_seq *q;
    enum larch_rwlock_mode mode; /* what rw holds; NONE while waiting */
};

int32_t larch_rwlock_rule_read(const struct larch_strings *sorted, int32_t self)
{
    /* Read lock steps 3-4: the "write-" node with the next lowest number. */
    for (int32_t i = self - 1; i >= 0; i--) {
        if (rcp_has_prefix(sorted->items[i], "write-"))
            return i;
    }
    return -1;
}

int32_t larch_rwlock_rule_write(const struct larch_strings *sorted, int32_t self)
{
    /* Write lock steps 3-4: any node below blocks; watch the next lowest. */
    return rcp_seq_rule_predecessor(sorted, self);
}

int larch_rwlock_create(struct larch *lh, const char *dir, struct larch_rwlock **out)
{
    struct larch_rwlock *rw = calloc(1, sizeof *rw);
    if (rw == NULL)
        return ZK_ESYSTEMERROR;
    int rc = rcp_seq_create(lh, dir, &rw->q);
    if (rc != ZK_OK) {
        free(rw);
        return rc;
    }
    *out = rw;
    return ZK_OK;
}

void larch_rwlock_free(struct larch_rwlock *rw)
{
    if (rw == NULL)
        return;
    rcp_seq_free(rw->q);
    free(rw);
}

static int acquire(struct larch_rwlock *rw, const char *prefix, rcp_seq_rule_fn rule,
                   enum larch_rwlock_mode mode, int32_t timeout_ms)
{
    if (rw->mode != LARCH_RWLOCK_NONE)
        return ZK_EBADARGUMENTS;
    int64_t deadline_ms;
    int rc = rcp_deadline(timeout_ms, &deadline_ms);
    if (rc != ZK_OK)
        return rc;
    /* A node left by a failed release of the other kind must go first. */
    if (rcp_seq_node(rw->q) != NULL && !rcp_has_prefix(rcp_seq_node(rw->q), prefix))
        rc = rcp_seq_leave(rw->q, deadline_ms);
    if (rc == ZK_OK && rcp_seq_node(rw->q) == NULL)
        rc = rcp_seq_enqueue(rw->q, prefix, NULL, -1, deadline_ms);
    if (rc == ZK_OK)
        rc = rcp_seq_await(rw->q, rule, NULL, NULL, deadline_ms);
    if (rc == ZK_OK) {
        rw->mode = mode;
        return ZK_OK;
    }
    /* Give the node up; the caller's deadline may be spent, so the delete
     * gets its own. A failed delete leaves it for unlock/free or the session. */
    (void)rcp_seq_leave(rw->q, rcp_default_deadline(rcp_seq_handle(rw->q)));
    return rc;
}

int larch_rwlock_rdlock(struct larch_rwlock *rw, int32_t timeout_ms)
{
    return acquire(rw, LARCH_RWLOCK_READ_PREFIX, larch_rwlock_rule_read, LARCH_RWLOCK_READ,
                   timeout_ms);
}

int larch_rwlock_wrlock(struct larch_rwlock *rw, int32_t timeout_ms)
{
    return acquire(rw, LARCH_RWLOCK_WRITE_PREFIX, larch_rwlock_rule_write, LARCH_RWLOCK_WRITE,
                   timeout_ms);
}

int larch_rwlock_unlock(struct larch_rwlock *rw)
{
    if (rw->mode == LARCH_RWLOCK_NONE)
        return ZK_EBADARGUMENTS;
    int rc = rcp_seq_leave(rw->q, rcp_default_deadline(rcp_seq_handle(rw->q)));
    if (rcp_seq_node(rw->q) == NULL)
        rw->mode = LARCH_RWLOCK_NONE;
    return rc;
}

enum larch_rwlock_mode larch_rwlock_mode(const struct larch_rwlock *rw)
{
    return rw->mode;
}

const char *larch_rwlock_node(const struct larch_rwlock *rw)
{
    return rcp_seq_node(rw->q);
}

void larch_rwlock_stats(struct larch_rwlock *rw, struct larch_wake_stats *out)
{
    rcp_wake_stats(rcp_seq_wake(rw->q), &out->watches_set, &out->wakeups);
}
