/*
 * rendezvous.c — see rendezvous.h. Seed 002, "Rendezvous"; connection loss
 * after seed 004.
 */
#include "client/recipes/rendezvous.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "client/recipes/rcp.h"

struct rdv {
    struct larch *lh;
    char *path;
    struct rcp_wake *wake; /* rdv_wait's watches */
};

/* ---- public API ------------------------------------------------------- */

int rdv_open(struct larch *lh, const char *path, struct rdv **out)
{
    *out = NULL;
    if (lh == NULL || path == NULL || !larch_path_valid(path, false))
        return ZK_EBADARGUMENTS;
    struct rdv *r = calloc(1, sizeof *r);
    if (r == NULL)
        return ZK_ESYSTEMERROR;
    r->lh = lh;
    r->path = strdup(path);
    if (r->path == NULL || rcp_wake_create(&r->wake) != ZK_OK) {
        rdv_free(r);
        return ZK_ESYSTEMERROR;
    }
    *out = r;
    return ZK_OK;
}

void rdv_free(struct rdv *r)
{
    if (r == NULL)
        return;
    rcp_wake_free(r->lh, r->wake);
    free(r->path);
    free(r);
}

int rdv_create(struct rdv *r, bool ephemeral, int32_t timeout_ms)
{
    int64_t deadline = rcp_deadline_after(timeout_ms);
    int32_t mode = ephemeral ? ZK_EPHEMERAL : ZK_PERSISTENT;
    for (;;) {
        int rc = larch_create(r->lh, r->path, "", 0, NULL, mode, 0, NULL, NULL);
        if (rc == ZK_ENODEEXISTS)
            return ZK_OK;
        if (!rcp_retry(r->lh, &rc, deadline))
            return rc;
    }
}

int rdv_publish(struct rdv *r, const void *info, int32_t len, int32_t timeout_ms)
{
    if (info == NULL || len <= 0)
        return ZK_EBADARGUMENTS;
    int64_t deadline = rcp_deadline_after(timeout_ms);
    for (;;) {
        int rc = larch_set(r->lh, r->path, info, len, -1, NULL);
        if (!rcp_retry(r->lh, &rc, deadline))
            return rc;
    }
}

/* One look at the rendezvous, leaving a watch behind when there is nothing
 * to return yet: getData with a watch while it exists (step 2), exists with
 * a watch while it does not. ZK_OK with the details; ZK_ENONODE when the
 * caller should wait for the watch; RCP_AGAIN when the znode appeared between
 * the two calls; or the request's error. */
static int look(struct rdv *r, char **info, int32_t *len)
{
    char *data = NULL;
    int32_t dlen = -1;
    int rc = rcp_watch_get(r->lh, r->wake, r->path, false, &data, &dlen, NULL);
    if (rc == ZK_OK && dlen > 0) {
        *info = data;
        *len = dlen;
        return ZK_OK;
    }
    free(data);
    if (rc == ZK_OK)
        return ZK_ENONODE; /* present but empty: the data watch is armed */
    if (rc != ZK_ENONODE)
        return rc;
    rc = rcp_watch_exists(r->lh, r->wake, r->path, NULL);
    return rc == ZK_OK ? RCP_AGAIN : rc; /* created between the two calls */
}

int rdv_wait(struct rdv *r, char **info, int32_t *len, int32_t timeout_ms)
{
    int64_t deadline = rcp_deadline_after(timeout_ms);
    *info = NULL;
    *len = -1;
    for (;;) {
        uint64_t seen = rcp_wake_generation(r->wake);
        int rc = look(r, info, len);
        if (rc == ZK_ENONODE)
            rc = rcp_wake_wait(r->wake, seen, deadline);
        else if (rc == RCP_AGAIN)
            rc = rcp_ms_left(deadline) > 0 ? ZK_OK : ZK_EOPERATIONTIMEOUT;
        else if (rcp_outcome_unknown(rc))
            rc = rcp_reconnect(r->lh, deadline);
        else
            return rc;
        if (rc != ZK_OK)
            return rc;
    }
}
