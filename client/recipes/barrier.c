/* barrier.c — see barrier.h (seeds 000/001 "Barriers", seed 003 Barrier). */
#include "client/recipes/barrier.h"

#include <stdlib.h>
#include <string.h>

#include "client/recipes/rcp.h"

/* The flag a count barrier's first full listing leaves (see barrier.h). */
static const char READY[] = "ready";
static const char PARTICIPANT_PREFIX[] = "p-";

struct larch_barrier {
    struct rcp_member m; /* m.dir: the barrier; m.node: our participant
                          * child in a count barrier while entered */
};

int larch_barrier_create(struct larch *lh, const char *path, struct larch_barrier **out)
{
    struct larch_barrier *b = calloc(1, sizeof *b);
    if (b == NULL)
        return ZK_ESYSTEMERROR;
    int rc = rcp_member_init(&b->m, lh, path);
    if (rc != ZK_OK) {
        free(b);
        return rc;
    }
    *out = b;
    return ZK_OK;
}

void larch_barrier_free(struct larch_barrier *b)
{
    if (b == NULL)
        return;
    rcp_member_fini(&b->m);
    free(b);
}

/* ---- node barrier (seeds 000/001) ---------------------------------------- */

int larch_barrier_set(struct larch_barrier *b, int32_t timeout_ms)
{
    int64_t deadline_ms;
    int rc = rcp_deadline(timeout_ms, &deadline_ms);
    return rc == ZK_OK ? rcp_ensure_path(b->m.lh, b->m.dir, deadline_ms) : rc;
}

int larch_barrier_remove(struct larch_barrier *b, int32_t timeout_ms)
{
    int64_t deadline_ms;
    int rc = rcp_deadline(timeout_ms, &deadline_ms);
    return rc == ZK_OK ? rcp_delete(b->m.lh, b->m.dir, deadline_ms) : rc;
}

int larch_barrier_wait(struct larch_barrier *b, int32_t timeout_ms)
{
    int64_t deadline_ms;
    int rc = rcp_deadline(timeout_ms, &deadline_ms);
    for (bool first = true; rc == ZK_OK; first = false) {
        if (!first && base_mono_ms() >= deadline_ms) {
            rc = ZK_EOPERATIONTIMEOUT;
            break;
        }
        uint64_t seen = rcp_wake_generation(b->m.wake);
        bool exists = false;
        /* Step 1: exists() with watch set; a creation watch on an absent
         * node is not wanted, the barrier is already gone. */
        rc = rcp_wake_exists(b->m.lh, b->m.wake, b->m.dir, false, deadline_ms, &exists);
        if (rc != ZK_OK || !exists) /* step 2: gone, proceed */
            break;
        rc = rcp_wake_wait(b->m.wake, seen, deadline_ms); /* step 3, then 4 */
    }
    if (rc != ZK_OK)
        rcp_wake_disarm(b->m.lh, b->m.wake);
    return rc;
}

/* ---- count barrier (seed 003) -------------------------------------------- */

static int32_t count_participants(const struct larch_strings *kids, bool *ready)
{
    int32_t n = 0;
    *ready = false;
    for (int32_t i = 0; i < kids->count; i++) {
        if (rcp_has_prefix(kids->items[i], PARTICIPANT_PREFIX))
            n++;
        else if (strcmp(kids->items[i], READY) == 0)
            *ready = true;
    }
    return n;
}

/* Seed 003 enter: getChildren with a watcher; pass at `count` children. */
static int await_count(struct larch_barrier *b, int32_t count, int64_t deadline_ms)
{
    for (bool first = true;; first = false) {
        if (!first && base_mono_ms() >= deadline_ms)
            return ZK_EOPERATIONTIMEOUT;
        uint64_t seen = rcp_wake_generation(b->m.wake);
        struct larch_strings kids = { 0 };
        int rc = rcp_wake_children(b->m.lh, b->m.wake, b->m.dir, deadline_ms, &kids);
        if (rc != ZK_OK)
            return rc;
        bool ready;
        int32_t n = count_participants(&kids, &ready);
        larch_strings_free(&kids);
        if (ready)
            return ZK_OK;
        if (n >= count) {
            char *ready_path = larch_path_join(b->m.dir, READY);
            rc = ready_path != NULL ? rcp_ensure_path(b->m.lh, ready_path, deadline_ms)
                                    : ZK_ESYSTEMERROR;
            free(ready_path);
            return rc;
        }
        rc = rcp_wake_wait(b->m.wake, seen, deadline_ms);
        if (rc != ZK_OK)
            return rc;
    }
}

int larch_barrier_enter(struct larch_barrier *b, int32_t count, int32_t timeout_ms)
{
    if (b->m.node != NULL || count < 1)
        return ZK_EBADARGUMENTS;
    int64_t deadline_ms;
    int rc = rcp_deadline(timeout_ms, &deadline_ms);
    if (rc == ZK_OK)
        rc = rcp_ensure_path(b->m.lh, b->m.dir, deadline_ms);
    if (rc == ZK_OK)
        rc = rcp_create_guid_node(b->m.lh, b->m.dir, PARTICIPANT_PREFIX, ZK_EPHEMERAL, deadline_ms,
                                  &b->m.node);
    if (rc == ZK_OK)
        rc = await_count(b, count, deadline_ms);
    if (rc != ZK_OK) {
        rcp_wake_disarm(b->m.lh, b->m.wake);
        (void)rcp_member_drop(&b->m, rcp_default_deadline(b->m.lh)); /* else: with the session */
    }
    return rc;
}

int larch_barrier_leave(struct larch_barrier *b, int32_t timeout_ms)
{
    int64_t deadline_ms;
    int rc = rcp_deadline(timeout_ms, &deadline_ms);
    if (rc == ZK_OK)
        rc = rcp_member_drop(&b->m, deadline_ms);
    /* Seed 003 leave: getChildren with a watcher until none is left. */
    for (bool first = true; rc == ZK_OK; first = false) {
        if (!first && base_mono_ms() >= deadline_ms) {
            rc = ZK_EOPERATIONTIMEOUT;
            break;
        }
        uint64_t seen = rcp_wake_generation(b->m.wake);
        struct larch_strings kids = { 0 };
        rc = rcp_wake_children(b->m.lh, b->m.wake, b->m.dir, deadline_ms, &kids);
        if (rc != ZK_OK)
            break;
        bool ready;
        int32_t n = count_participants(&kids, &ready);
        larch_strings_free(&kids);
        if (n == 0)
            break;
        rc = rcp_wake_wait(b->m.wake, seen, deadline_ms);
    }
    /* The last listing's watch would only wake us for nothing later. */
    rcp_wake_disarm(b->m.lh, b->m.wake);
    return rc;
}

void larch_barrier_stats(struct larch_barrier *b, struct larch_wake_stats *out)
{
    rcp_wake_stats(b->m.wake, &out->watches_set, &out->wakeups);
}
