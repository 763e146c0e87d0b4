/* double_barrier.c — see double_barrier.h (seed 000/001 "Double Barriers"). */
#include "client/recipes/double_barrier.h"

#include <stdlib.h>
#include <string.h>

#include "client/recipes/rcp.h"

static const char READY[] = "ready";
static const char PARTICIPANT_PREFIX[] = "p-";

struct larch_double_barrier {
    struct rcp_member m; /* m.dir: the barrier; m.node: our participant
                          * child from enter until it is deleted */
    char *ready_path;
    int32_t count;
    bool in_round; /* entered and not yet left */
};

int larch_double_barrier_create(struct larch *lh, const char *path, int32_t count,
                                struct larch_double_barrier **out)
{
    if (count < 1)
        return ZK_EBADARGUMENTS;
    struct larch_double_barrier *d = calloc(1, sizeof *d);
    if (d == NULL)
        return ZK_ESYSTEMERROR;
    d->count = count;
    int rc = rcp_member_init(&d->m, lh, path);
    if (rc == ZK_OK && (d->ready_path = larch_path_join(path, READY)) == NULL)
        rc = ZK_ESYSTEMERROR;
    if (rc != ZK_OK) {
        rcp_member_fini(&d->m);
        free(d);
        return rc;
    }
    *out = d;
    return ZK_OK;
}

void larch_double_barrier_free(struct larch_double_barrier *d)
{
    if (d == NULL)
        return;
    rcp_member_fini(&d->m);
    free(d->ready_path);
    free(d);
}

/* The participant names under b (without "ready"), sorted by name so every
 * process agrees on the lowest and the highest. */
static int list_participants(struct larch_double_barrier *d, int64_t deadline_ms,
                             struct larch_strings *out)
{
    int rc = rcp_children(d->m.lh, d->m.dir, deadline_ms, out);
    if (rc != ZK_OK)
        return rc;
    int32_t kept = 0;
    for (int32_t i = 0; i < out->count; i++) {
        if (rcp_has_prefix(out->items[i], PARTICIPANT_PREFIX))
            out->items[kept++] = out->items[i];
        else
            free(out->items[i]);
    }
    out->count = kept;
    rcp_sort_names(out);
    return ZK_OK;
}

/* Enter step 5: wait for the ready watch; on any event look again (a plain
 * exists first, so a present "ready" gets no watch we would not need). */
static int await_ready(struct larch_double_barrier *d, uint64_t seen, int64_t deadline_ms)
{
    for (bool first = true;; first = false) {
        if (!first && base_mono_ms() >= deadline_ms)
            return ZK_EOPERATIONTIMEOUT;
        int rc = rcp_wake_wait(d->m.wake, seen, deadline_ms);
        if (rc != ZK_OK)
            return rc;
        seen = rcp_wake_generation(d->m.wake);
        do {
            rc = larch_exists(d->m.lh, d->ready_path, NULL, NULL, NULL);
        } while (rc != ZK_OK && rc != ZK_ENONODE && rcp_retry(d->m.lh, &rc, deadline_ms));
        if (rc != ZK_ENONODE)
            return rc;
        bool exists = false;
        rc = rcp_wake_exists(d->m.lh, d->m.wake, d->ready_path, true, deadline_ms, &exists);
        if (rc != ZK_OK || exists)
            return rc;
    }
}

static int enter_round(struct larch_double_barrier *d, int64_t deadline_ms)
{
    int rc = rcp_ensure_path(d->m.lh, d->m.dir, deadline_ms);
    if (rc != ZK_OK)
        return rc;
    uint64_t seen = rcp_wake_generation(d->m.wake);
    bool ready = false;
    rc = rcp_wake_exists(d->m.lh, d->m.wake, d->ready_path, true, deadline_ms, &ready); /* 2 */
    if (rc == ZK_OK) /* steps 1 and 3: our node "p-<guid>" */
        rc = rcp_create_guid_node(d->m.lh, d->m.dir, PARTICIPANT_PREFIX, ZK_EPHEMERAL, deadline_ms,
                                  &d->m.node);
    if (rc != ZK_OK || ready) /* a late joiner of a round already released */
        return rc;
    struct larch_strings kids = { 0 };
    rc = list_participants(d, deadline_ms, &kids); /* step 4 */
    if (rc != ZK_OK)
        return rc;
    int32_t n = kids.count;
    larch_strings_free(&kids);
    if (n < d->count)
        return await_ready(d, seen, deadline_ms); /* step 5 */
    return rcp_ensure_path(d->m.lh, d->ready_path, deadline_ms); /* step 6 */
}

int larch_double_barrier_enter(struct larch_double_barrier *d, int32_t timeout_ms)
{
    if (d->in_round || d->m.node != NULL)
        return ZK_EBADARGUMENTS;
    int64_t deadline_ms;
    int rc = rcp_deadline(timeout_ms, &deadline_ms);
    if (rc == ZK_OK)
        rc = enter_round(d, deadline_ms);
    /* A ready watch still pending (ready existed, or we created it) would
     * only wake a later wait for nothing. */
    rcp_wake_disarm(d->m.lh, d->m.wake);
    if (rc == ZK_OK)
        d->in_round = true;
    else
        (void)rcp_member_drop(&d->m, rcp_default_deadline(d->m.lh)); /* else: with the session */
    return rc;
}

/* Leave steps 1-5: *watch gets the node to wait on, or NULL when we are
 * done (steps 2-3). Deletes our node where the seed says so. */
static int leave_step(struct larch_double_barrier *d, int64_t deadline_ms, char **watch)
{
    struct larch_strings kids = { 0 };
    *watch = NULL;
    int rc = list_participants(d, deadline_ms, &kids); /* step 1 */
    if (rc != ZK_OK)
        return rc;
    int32_t n = kids.count;
    bool lowest = n > 0 && d->m.node != NULL && strcmp(kids.items[0], d->m.node) == 0;
    bool only = n == 1 && lowest;
    if (n == 0 || only) {
        rc = rcp_member_drop(&d->m, deadline_ms); /* steps 2-3: nobody else is left */
    } else if (lowest) {
        *watch = strdup(kids.items[n - 1]); /* step 4: the lowest waits on the highest */
    } else {
        rc = rcp_member_drop(&d->m, deadline_ms); /* step 5: delete ours, wait on the lowest */
        if (rc == ZK_OK)
            *watch = strdup(kids.items[0]);
    }
    larch_strings_free(&kids);
    if (rc == ZK_OK && n > 0 && !only && *watch == NULL)
        rc = ZK_ESYSTEMERROR;
    return rc;
}

int larch_double_barrier_leave(struct larch_double_barrier *d, int32_t timeout_ms)
{
    int64_t deadline_ms;
    int rc = rcp_deadline(timeout_ms, &deadline_ms);
    for (bool first = true; rc == ZK_OK; first = false) {
        if (!first && base_mono_ms() >= deadline_ms) {
            rc = ZK_EOPERATIONTIMEOUT;
            break;
        }
        uint64_t seen = rcp_wake_generation(d->m.wake);
        char *watch = NULL;
        rc = leave_step(d, deadline_ms, &watch);
        if (rc != ZK_OK || watch == NULL)
            break;
        char *path = larch_path_join(d->m.dir, watch);
        free(watch);
        if (path == NULL) {
            rc = ZK_ESYSTEMERROR;
            break;
        }
        bool exists = false;
        rc = rcp_wake_exists(d->m.lh, d->m.wake, path, false, deadline_ms, &exists);
        free(path);
        if (rc == ZK_OK && exists)
            rc = rcp_wake_wait(d->m.wake, seen, deadline_ms); /* then step 6 */
    }
    if (rc != ZK_OK)
        rcp_wake_disarm(d->m.lh, d->m.wake);
    else
        d->in_round = false;
    return rc;
}

const char *larch_double_barrier_node(const struct larch_double_barrier *d)
{
    return d->m.node;
}

void larch_double_barrier_stats(struct larch_double_barrier *d, struct larch_wake_stats *out)
{
    rcp_wake_stats(d->m.wake, &out->watches_set, &out->wakeups);
}
