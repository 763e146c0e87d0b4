/* revocable.c — see revocable.h (seed 000 "Revocable Shared Locks"). */
#include "client/recipes/revocable.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "client/recipes/rcp.h"

const char LARCH_REVOCABLE_UNLOCK[] = "unlock";

struct larch_revocable {
    struct rcp_seq *q;
    enum larch_rwlock_mode mode; /* what r holds; NONE while waiting */
    larch_revocable_fn on_revoke;
    void *on_revoke_ctx;
    /* Shared with the hook on the event thread. */
    pthread_mutex_t mu;
    char *node_path; /* full path of our node while queued */
    bool revoked;    /* our node has been asked to release */
    bool recheck;    /* our node's data changed to something else, or could
                      * not be read: the owner re-reads it with a new watch */
};

static bool says_unlock(const char *data, int32_t len)
{
    size_t want = sizeof LARCH_REVOCABLE_UNLOCK - 1;
    return data != NULL && len >= 0 && (size_t)len == want &&
           memcmp(data, LARCH_REVOCABLE_UNLOCK, want) == 0;
}

/* Records what a read of our node found; true when this made r revoked.
 * rearm: the read set no new watch, so unless it found "unlock" the owner
 * must read again with one. */
static bool note_data(struct larch_revocable *r, const char *path, bool unlock, bool rearm)
{
    bool newly = false;
    pthread_mutex_lock(&r->mu);
    if (r->node_path != NULL && strcmp(r->node_path, path) == 0) {
        newly = unlock && !r->revoked;
        r->revoked = r->revoked || unlock;
        r->recheck = rearm && !unlock;
    }
    pthread_mutex_unlock(&r->mu);
    return newly;
}

/* The data watch on our node fired (event thread). Seed: "it does another
 * getData() on that node ... and looks for the string unlock". The read
 * here carries no watch (watches are armed by the owner's thread only);
 * anything but "unlock" leaves recheck for the owner to re-arm. */
static void revoke_hook(struct larch *lh, const struct larch_event *ev, void *arg)
{
    struct larch_revocable *r = arg;
    if (ev->type != ZK_EVENT_DATA_CHANGED)
        return;
    char *data = NULL;
    int32_t len = -1;
    int rc = larch_get(lh, ev->path, NULL, NULL, &data, &len, NULL);
    bool unlock = rc == ZK_OK && says_unlock(data, len);
    free(data);
    if (note_data(r, ev->path, unlock, true) && r->on_revoke != NULL)
        r->on_revoke(r->on_revoke_ctx);
}

int larch_revocable_create(struct larch *lh, const char *dir, larch_revocable_fn on_revoke,
                           void *ctx, struct larch_revocable **out)
{
    struct larch_revocable *r = calloc(1, sizeof *r);
    if (r == NULL)
        return ZK_ESYSTEMERROR;
    int rc = rcp_seq_create(lh, dir, &r->q);
    if (rc != ZK_OK) {
        free(r);
        return rc;
    }
    pthread_mutex_init(&r->mu, NULL);
    r->on_revoke = on_revoke;
    r->on_revoke_ctx = ctx;
    rcp_wake_set_hook(rcp_seq_wake(r->q), revoke_hook, r);
    *out = r;
    return ZK_OK;
}

/* Forgets the node: r is neither queued nor revoked any more. */
static void forget_node(struct larch_revocable *r)
{
    pthread_mutex_lock(&r->mu);
    free(r->node_path);
    r->node_path = NULL;
    r->revoked = false;
    r->recheck = false;
    pthread_mutex_unlock(&r->mu);
}

void larch_revocable_free(struct larch_revocable *r)
{
    if (r == NULL)
        return;
    /* rcp_seq_free stops the hook before the wake goes, so revoke_hook
     * never sees r after this. */
    rcp_seq_free(r->q);
    forget_node(r);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

/* Seed step 1 addition: getData() with a watch on our own node. Called
 * right after the create and whenever recheck asks for it. */
static int watch_own_node(struct larch_revocable *r, int64_t deadline_ms)
{
    pthread_mutex_lock(&r->mu);
    char *path = r->node_path != NULL ? strdup(r->node_path) : NULL;
    r->recheck = false;
    pthread_mutex_unlock(&r->mu);
    if (path == NULL)
        return ZK_ESYSTEMERROR;
    char *data = NULL;
    int32_t len = -1;
    int rc = rcp_wake_get(rcp_seq_handle(r->q), rcp_seq_wake(r->q), path, true,
                            deadline_ms, &data, &len);
    bool newly = rc == ZK_OK && note_data(r, path, says_unlock(data, len), false);
    free(data);
    free(path);
    if (newly && r->on_revoke != NULL)
        r->on_revoke(r->on_revoke_ctx);
    return rc;
}

static int enqueue(struct larch_revocable *r, const char *prefix, int64_t deadline_ms)
{
    int rc = rcp_seq_enqueue(r->q, prefix, NULL, -1, deadline_ms);
    if (rc != ZK_OK)
        return rc;
    char *path = larch_path_join(rcp_seq_dir(r->q), rcp_seq_node(r->q));
    if (path == NULL)
        return ZK_ESYSTEMERROR;
    pthread_mutex_lock(&r->mu);
    free(r->node_path);
    r->node_path = path;
    r->revoked = false;
    pthread_mutex_unlock(&r->mu);
    return watch_own_node(r, deadline_ms);
}

static int revoke_until(struct larch *lh, const char *dir, const char *node, int64_t deadline_ms)
{
    char *path = larch_path_join(dir, node);
    if (path == NULL)
        return ZK_ESYSTEMERROR;
    int rc;
    do {
        rc = larch_set(lh, path, LARCH_REVOCABLE_UNLOCK, (int32_t)strlen(LARCH_REVOCABLE_UNLOCK),
                       -1, NULL);
    } while (rc != ZK_OK && rcp_retry(lh, &rc, deadline_ms));
    free(path);
    return rc;
}

/* rcp_seq_blocked_fn of a writer with revoke_holders: every node below
 * ours stands between us and the lock, so each is asked to release. */
static int ask_nodes_below(struct rcp_seq *q, const struct larch_strings *sorted, int32_t self,
                           void *arg)
{
    int64_t deadline_ms = *(const int64_t *)arg;
    for (int32_t i = 0; i < self; i++) {
        int rc = revoke_until(rcp_seq_handle(q), rcp_seq_dir(q), sorted->items[i],
                              deadline_ms);
        if (rc != ZK_OK && rc != ZK_ENONODE) /* a node gone is a release */
            return rc;
    }
    return ZK_OK;
}

static int acquire(struct larch_revocable *r, const char *prefix, rcp_seq_rule_fn rule,
                   enum larch_rwlock_mode mode, bool revoke_holders, int32_t timeout_ms)
{
    if (r->mode != LARCH_RWLOCK_NONE)
        return ZK_EBADARGUMENTS;
    int64_t deadline_ms;
    int rc = rcp_deadline(timeout_ms, &deadline_ms);
    if (rc != ZK_OK)
        return rc;
    /* A node left by a failed release is given up before queueing anew. */
    if (rcp_seq_node(r->q) != NULL)
        rc = rcp_seq_leave(r->q, deadline_ms);
    if (rc == ZK_OK)
        rc = enqueue(r, prefix, deadline_ms);
    if (rc == ZK_OK)
        rc = rcp_seq_await(r->q, rule, revoke_holders ? ask_nodes_below : NULL, &deadline_ms,
                             deadline_ms);
    if (rc == ZK_OK) {
        r->mode = mode;
        return ZK_OK;
    }
    struct larch *lh = rcp_seq_handle(r->q);
    if (rcp_seq_leave(r->q, rcp_default_deadline(lh)) == ZK_OK)
        forget_node(r);
    return rc;
}

int larch_revocable_rdlock(struct larch_revocable *r, int32_t timeout_ms)
{
    return acquire(r, LARCH_RWLOCK_READ_PREFIX, larch_rwlock_rule_read, LARCH_RWLOCK_READ, false,
                   timeout_ms);
}

int larch_revocable_wrlock(struct larch_revocable *r, bool revoke_holders, int32_t timeout_ms)
{
    return acquire(r, LARCH_RWLOCK_WRITE_PREFIX, larch_rwlock_rule_write, LARCH_RWLOCK_WRITE,
                   revoke_holders, timeout_ms);
}

int larch_revocable_unlock(struct larch_revocable *r)
{
    if (r->mode == LARCH_RWLOCK_NONE)
        return ZK_EBADARGUMENTS;
    int rc = rcp_seq_leave(r->q, rcp_default_deadline(rcp_seq_handle(r->q)));
    if (rcp_seq_node(r->q) == NULL) {
        forget_node(r);
        r->mode = LARCH_RWLOCK_NONE;
    }
    return rc;
}

bool larch_revocable_revoked(struct larch_revocable *r)
{
    pthread_mutex_lock(&r->mu);
    bool revoked = r->revoked;
    pthread_mutex_unlock(&r->mu);
    return revoked;
}

static bool needs_recheck(struct larch_revocable *r)
{
    pthread_mutex_lock(&r->mu);
    bool recheck = r->recheck;
    pthread_mutex_unlock(&r->mu);
    return recheck;
}

int larch_revocable_wait_revoked(struct larch_revocable *r, int32_t timeout_ms)
{
    if (rcp_seq_node(r->q) == NULL)
        return ZK_EBADARGUMENTS;
    int64_t deadline_ms;
    int rc = rcp_deadline(timeout_ms, &deadline_ms);
    struct rcp_wake *wake = rcp_seq_wake(r->q);
    for (bool first = true; rc == ZK_OK; first = false) {
        if (!first && base_mono_ms() >= deadline_ms)
            return ZK_EOPERATIONTIMEOUT;
        /* Read before the flag so a request landing in between still
         * moves the generation we wait on. */
        uint64_t seen = rcp_wake_generation(wake);
        if (larch_revocable_revoked(r))
            return ZK_OK;
        if (needs_recheck(r))
            rc = watch_own_node(r, deadline_ms);
        else
            rc = rcp_wake_wait(wake, seen, deadline_ms);
    }
    return rc;
}

int larch_revocable_revoke(struct larch *lh, const char *dir, const char *node)
{
    return revoke_until(lh, dir, node, rcp_default_deadline(lh));
}

enum larch_rwlock_mode larch_revocable_mode(const struct larch_revocable *r)
{
    return r->mode;
}

const char *larch_revocable_node(const struct larch_revocable *r)
{
    return rcp_seq_node(r->q);
}

void larch_revocable_stats(struct larch_revocable *r, struct larch_wake_stats *out)
{
    rcp_wake_stats(rcp_seq_wake(r->q), &out->watches_set, &out->wakeups);
}
