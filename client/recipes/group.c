/*
 * group.c — see group.h. Seed 000, "Out of the Box Applications"; seed 002,
 * "Group membership"; connection loss after seed 004.
 */
#include "client/recipes/group.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "client/recipes/rcp.h"

struct group {
    struct larch *lh;
    char *path;
    group_change_fn fn;
    void *ctx;
    struct rcp_wake *wake; /* the refresher's watch and stop flag */
    struct rcp_runner refresher;

    pthread_mutex_t mu; /* guards the list below */
    pthread_cond_t cv;  /* signalled on every change */
    struct larch_strings members; /* sorted */
    uint64_t generation;
    int err; /* the refresher's terminal error, ZK_OK while it runs */
};

/* ---- helpers ---------------------------------------------------------- */

static int copy_list(const struct larch_strings *in, struct larch_strings *out)
{
    *out = (struct larch_strings){ 0 };
    if (in->count == 0)
        return ZK_OK;
    out->items = calloc((size_t)in->count, sizeof *out->items);
    if (out->items == NULL)
        return ZK_ESYSTEMERROR;
    for (; out->count < in->count; out->count++) {
        out->items[out->count] = strdup(in->items[out->count]);
        if (out->items[out->count] == NULL) {
            larch_strings_free(out);
            return ZK_ESYSTEMERROR;
        }
    }
    return ZK_OK;
}

/* ---- the member list -------------------------------------------------- */

static bool list_init(struct group *g)
{
    if (pthread_mutex_init(&g->mu, NULL) != 0)
        return false;
    if (rcp_cond_init(&g->cv))
        return true;
    pthread_mutex_destroy(&g->mu);
    return false;
}

/* Installs a fresh listing (ownership moves in) when it differs from the
 * cached one, bumps the generation and tells the callback. Only the
 * refresher (or group_open before it starts) calls this, so the list stays
 * valid for the callback without the lock held. */
static void list_publish(struct group *g, struct larch_strings *fresh)
{
    rcp_sort_names(fresh);
    pthread_mutex_lock(&g->mu);
    bool changed = g->generation == 0 || !rcp_strings_equal(fresh, &g->members);
    uint64_t gen = g->generation;
    if (changed) {
        larch_strings_free(&g->members);
        g->members = *fresh;
        *fresh = (struct larch_strings){ 0 };
        gen = ++g->generation;
        pthread_cond_broadcast(&g->cv);
    }
    pthread_mutex_unlock(&g->mu);
    larch_strings_free(fresh);
    if (changed && g->fn != NULL)
        g->fn(&g->members, gen, g->ctx);
}

/* The refresher's end (an rcp_fail_fn): group_members reports err from
 * now on. */
static void list_fail(void *arg, int err)
{
    struct group *g = arg;
    pthread_mutex_lock(&g->mu);
    g->err = err;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

/* Seed 002 step 3: getChildren with the watch set (an rcp_step_fn: the
 * refresher re-reads the list after every notification until group_close;
 * it waits out connection loss and stops on any other error,
 * ZK_ESESSIONEXPIRED, or ZK_ENONODE when the group znode was deleted). */
static int refresh_once(void *arg)
{
    struct group *g = arg;
    struct larch_strings fresh = { 0 };
    int rc = rcp_watch_children(g->lh, g->wake, g->path, &fresh);
    if (rc == ZK_OK)
        list_publish(g, &fresh);
    return rc;
}

/* ---- public API ------------------------------------------------------- */

int group_open(struct larch *lh, const char *path, group_change_fn fn, void *ctx,
               int32_t timeout_ms, struct group **out)
{
    *out = NULL;
    if (lh == NULL || path == NULL || !larch_path_valid(path, false))
        return ZK_EBADARGUMENTS;
    int64_t deadline = rcp_deadline_after(timeout_ms);
    struct group *g = calloc(1, sizeof *g);
    if (g == NULL)
        return ZK_ESYSTEMERROR;
    if (!list_init(g)) {
        free(g);
        return ZK_ESYSTEMERROR;
    }
    g->lh = lh;
    g->fn = fn;
    g->ctx = ctx;
    g->path = strdup(path);
    int rc = g->path != NULL ? rcp_wake_create(&g->wake) : ZK_ESYSTEMERROR;
    if (rc == ZK_OK)
        rc = rcp_ensure_node(lh, path, deadline);
    if (rc == ZK_OK) /* the first listing, so the list is valid on return */
        rc = rcp_step_until(lh, refresh_once, g, deadline);
    if (rc == ZK_OK)
        rc = rcp_runner_start(&g->refresher, lh, g->wake, refresh_once, list_fail, g);
    if (rc != ZK_OK) {
        group_close(g);
        return rc;
    }
    *out = g;
    return ZK_OK;
}

void group_close(struct group *g)
{
    if (g == NULL)
        return;
    rcp_runner_stop(&g->refresher);
    rcp_wake_free(g->lh, g->wake);
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
    larch_strings_free(&g->members);
    free(g->path);
    free(g);
}

/* Seed 002 step 2: an ephemeral child per member. After a lost reply the
 * retry may find our own node: it is ours when our session owns it. */
int group_join(struct group *g, const char *member, const void *data, int32_t len,
               int32_t timeout_ms)
{
    int64_t deadline = rcp_deadline_after(timeout_ms);
    char *path = rcp_child_path(g->path, member);
    if (path == NULL)
        return ZK_EBADARGUMENTS;
    if (data == NULL)
        len = -1;
    int rc = rcp_create_ephemeral(g->lh, path, data, len, deadline);
    free(path);
    return rc;
}

/* Deletes our member node, at the version we saw it with, so another
 * session's node of the same name is never removed. */
int group_leave(struct group *g, const char *member, int32_t timeout_ms)
{
    int64_t deadline = rcp_deadline_after(timeout_ms);
    char *path = rcp_child_path(g->path, member);
    if (path == NULL)
        return ZK_EBADARGUMENTS;
    bool retried = false;
    int rc;
    for (;;) {
        struct zk_stat st;
        rc = rcp_exists(g->lh, path, &st, deadline);
        if (rc == ZK_OK && st.ephemeral_owner != larch_session_id(g->lh))
            rc = ZK_ENONODE;
        if (rc == ZK_OK)
            rc = larch_delete(g->lh, path, st.version);
        if (rc == ZK_ENONODE && retried)
            rc = ZK_OK; /* our lost delete did apply (seed 004) */
        if (!rcp_retry(g->lh, &rc, deadline))
            break;
        retried = true;
    }
    free(path);
    return rc;
}

int group_members(struct group *g, struct larch_strings *out, uint64_t *generation)
{
    *out = (struct larch_strings){ 0 };
    pthread_mutex_lock(&g->mu);
    int rc = g->err != ZK_OK ? g->err : copy_list(&g->members, out);
    if (rc == ZK_OK && generation != NULL)
        *generation = g->generation;
    pthread_mutex_unlock(&g->mu);
    return rc;
}

int group_wait_change(struct group *g, uint64_t generation, int32_t timeout_ms)
{
    int64_t deadline = rcp_deadline_after(timeout_ms);
    int rc = ZK_OK;
    pthread_mutex_lock(&g->mu);
    while (g->generation <= generation && g->err == ZK_OK && rc == ZK_OK)
        if (rcp_cond_wait_until(&g->cv, &g->mu, deadline) != 0)
            rc = ZK_EOPERATIONTIMEOUT;
    if (g->generation > generation)
        rc = ZK_OK;
    else if (g->err != ZK_OK)
        rc = g->err;
    pthread_mutex_unlock(&g->mu);
    return rc;
}
