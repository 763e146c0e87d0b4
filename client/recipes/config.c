/*
 * config.c — see config.h. Seed 002, "Configuration management"; seed 000,
 * "Out of the Box Applications"; connection loss after seed 004.
 */
#include "client/recipes/config.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "client/recipes/rcp.h"

struct conf {
    struct larch *lh;
    char *path;
    conf_change_fn fn;
    void *ctx;
    struct rcp_wake *wake; /* the refresher's watches and stop flag */
    struct rcp_runner refresher;

    pthread_mutex_t mu; /* guards the cache below */
    pthread_cond_t cv;  /* signalled on every cache update */
    char *data;
    int32_t len;
    int32_t version; /* -1: absent */
    int64_t mzxid;   /* of the cached value; 0 when absent */
    bool published;  /* the cache holds a first reading */
    int err;         /* the refresher's terminal error, ZK_OK while it runs */
};

/* ---- the cache -------------------------------------------------------- */

static bool cache_init(struct conf *c)
{
    if (pthread_mutex_init(&c->mu, NULL) != 0)
        return false;
    if (!rcp_cond_init(&c->cv)) {
        pthread_mutex_destroy(&c->mu);
        return false;
    }
    c->version = -1;
    c->len = -1;
    return true;
}

/* Installs a value read from the server (data ownership moves to the cache;
 * version -1 and mzxid 0 mean absent) and tells the callback when it is the
 * first reading or differs from the cached one. A re-read that finds the
 * same mzxid (woken by a second watch on the same write) stays quiet. */
static void cache_publish(struct conf *c, char *data, int32_t len, int32_t version,
                          int64_t mzxid)
{
    pthread_mutex_lock(&c->mu);
    bool changed = !c->published || mzxid != c->mzxid;
    c->published = true;
    free(c->data);
    c->data = data;
    c->len = len;
    c->version = version;
    c->mzxid = mzxid;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    /* The refresher is the only writer of the cache, so data stays valid
     * for the call without the lock held. */
    if (changed && c->fn != NULL)
        c->fn(data, len, version, c->ctx);
}

/* The refresher's end (an rcp_fail_fn): conf_get reports err from now on. */
static void cache_fail(void *arg, int err)
{
    struct conf *c = arg;
    pthread_mutex_lock(&c->mu);
    c->err = err;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

/* ---- the refresher ---------------------------------------------------- */

/* Seed 002 step 2: getData with a watch. When the znode is absent, an exists
 * watch waits for its creation instead. Returns ZK_OK once the cache holds
 * what the server has and a watch is armed, RCP_AGAIN when the znode
 * appeared between the two calls, or the request's error (an rcp_step_fn:
 * seed 002 step 3, each notification says the cached value is stale, so
 * the refresher reads it again, re-arming the watch, until conf_close). */
static int refresh_once(void *arg)
{
    struct conf *c = arg;
    char *data = NULL;
    int32_t len = -1;
    struct zk_stat st;
    int rc = rcp_watch_get(c->lh, c->wake, c->path, false, &data, &len, &st);
    if (rc == ZK_OK) {
        cache_publish(c, data, len, st.version, st.mzxid);
        return ZK_OK;
    }
    if (rc != ZK_ENONODE)
        return rc;
    rc = rcp_watch_exists(c->lh, c->wake, c->path, NULL);
    if (rc == ZK_OK)
        return RCP_AGAIN;
    if (rc == ZK_ENONODE)
        cache_publish(c, NULL, -1, -1, 0);
    return rc == ZK_ENONODE ? ZK_OK : rc;
}

/* ---- public API ------------------------------------------------------- */

int conf_open(struct larch *lh, const char *path, conf_change_fn fn, void *ctx,
              int32_t timeout_ms, struct conf **out)
{
    *out = NULL;
    if (lh == NULL || path == NULL || !larch_path_valid(path, false))
        return ZK_EBADARGUMENTS;
    struct conf *c = calloc(1, sizeof *c);
    if (c == NULL)
        return ZK_ESYSTEMERROR;
    if (!cache_init(c)) {
        free(c);
        return ZK_ESYSTEMERROR;
    }
    c->lh = lh;
    c->fn = fn;
    c->ctx = ctx;
    c->path = strdup(path);
    int rc = c->path != NULL ? rcp_wake_create(&c->wake) : ZK_ESYSTEMERROR;
    /* The first read, in the caller's thread, so the cache is valid on return. */
    if (rc == ZK_OK)
        rc = rcp_step_until(lh, refresh_once, c, rcp_deadline_after(timeout_ms));
    if (rc == ZK_OK)
        rc = rcp_runner_start(&c->refresher, lh, c->wake, refresh_once, cache_fail, c);
    if (rc != ZK_OK) {
        conf_close(c);
        return rc;
    }
    *out = c;
    return ZK_OK;
}

void conf_close(struct conf *c)
{
    if (c == NULL)
        return;
    rcp_runner_stop(&c->refresher);
    rcp_wake_free(c->lh, c->wake);
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    free(c->data);
    free(c->path);
    free(c);
}

int conf_get(struct conf *c, char **data, int32_t *len, int32_t *version)
{
    pthread_mutex_lock(&c->mu);
    int rc = c->err != ZK_OK ? c->err : c->version < 0 ? ZK_ENONODE : ZK_OK;
    char *copy = NULL;
    if (rc == ZK_OK && c->data != NULL) {
        copy = malloc((size_t)c->len + 1);
        if (copy != NULL) {
            memcpy(copy, c->data, (size_t)c->len);
            copy[c->len] = '\0';
        } else {
            rc = ZK_ESYSTEMERROR;
        }
    }
    if (rc == ZK_OK) {
        *data = copy;
        *len = c->data != NULL ? c->len : -1;
        *version = c->version;
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}

int conf_wait_version(struct conf *c, int32_t min_version, int32_t timeout_ms)
{
    int64_t deadline = rcp_deadline_after(timeout_ms);
    int rc = ZK_OK;
    pthread_mutex_lock(&c->mu);
    while (c->version < min_version && c->err == ZK_OK && rc == ZK_OK)
        if (rcp_cond_wait_until(&c->cv, &c->mu, deadline) != 0)
            rc = ZK_EOPERATIONTIMEOUT;
    if (c->version >= min_version)
        rc = ZK_OK;
    else if (c->err != ZK_OK)
        rc = c->err;
    pthread_mutex_unlock(&c->mu);
    return rc;
}

/* After a lost reply and a BADVERSION retry: did our conditional write
 * apply? Yes when the znode now holds our data at expected_version + 1. */
static int check_applied(struct larch *lh, const char *path, const void *data, int32_t len,
                         int32_t expected_version, int32_t *new_version, int64_t deadline)
{
    char *cur = NULL;
    int32_t clen = -1;
    struct zk_stat st;
    int rc = rcp_get(lh, path, &cur, &clen, &st, deadline);
    if (rc != ZK_OK)
        return rc;
    bool same = rcp_data_equal(cur, clen, data, len);
    free(cur);
    if (!same || st.version != expected_version + 1)
        return ZK_EBADVERSION;
    *new_version = st.version;
    return ZK_OK;
}

/* Seed 002 step 1: the configuration znode does not exist yet. NODEEXISTS
 * (a concurrent writer, or our own lost create) sends the caller back to
 * setData. */
static int create_config(struct larch *lh, const char *path, const void *data, int32_t len,
                         int32_t *new_version)
{
    int rc = larch_create(lh, path, data, len, NULL, ZK_PERSISTENT, 0, NULL, NULL);
    if (rc == ZK_OK)
        *new_version = 0;
    return rc;
}

int conf_write(struct larch *lh, const char *path, const void *data, int32_t len,
               int32_t expected_version, int32_t *new_version, int32_t timeout_ms)
{
    int64_t deadline = rcp_deadline_after(timeout_ms);
    int32_t written = -1;
    bool retried = false;
    struct zk_stat st;
    if (data == NULL)
        len = -1;
    for (;;) {
        int rc = larch_set(lh, path, data, len, expected_version, &st);
        if (rc == ZK_OK)
            written = st.version;
        else if (rc == ZK_ENONODE && expected_version == -1)
            rc = create_config(lh, path, data, len, &written);
        else if (rc == ZK_EBADVERSION && retried)
            rc = check_applied(lh, path, data, len, expected_version, &written, deadline);
        if (rc == ZK_ENODEEXISTS) /* created meanwhile: set it */
            rc = rcp_ms_left(deadline) > 0 ? RCP_AGAIN : ZK_EOPERATIONTIMEOUT;
        if (rc == RCP_AGAIN)
            continue;
        if (rcp_retry(lh, &rc, deadline)) {
            retried = true;
            continue;
        }
        if (rc == ZK_OK && new_version != NULL)
            *new_version = written;
        return rc;
    }
}
