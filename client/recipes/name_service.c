/*
 * name_service.c — see name_service.h. Seed 000, "Out of the Box
 * Applications"; connection loss handling after seed 004.
 */
#include "client/recipes/name_service.h"

#include <stdlib.h>
#include <string.h>

#include "client/recipes/rcp.h"

struct ns {
    struct larch *lh;
    char *root;
    struct rcp_wake *wake; /* ns_await's exists watches */
};

int ns_open(struct larch *lh, const char *root, int32_t timeout_ms, struct ns **out)
{
    *out = NULL;
    if (lh == NULL || root == NULL || !larch_path_valid(root, false))
        return ZK_EBADARGUMENTS;
    struct ns *ns = calloc(1, sizeof *ns);
    if (ns == NULL)
        return ZK_ESYSTEMERROR;
    ns->lh = lh;
    ns->root = strdup(root);
    if (ns->root == NULL || rcp_wake_create(&ns->wake) != ZK_OK) {
        ns_free(ns);
        return ZK_ESYSTEMERROR;
    }
    int rc = rcp_ensure_node(lh, root, rcp_deadline_after(timeout_ms));
    if (rc != ZK_OK) {
        ns_free(ns);
        return rc;
    }
    *out = ns;
    return ZK_OK;
}

void ns_free(struct ns *ns)
{
    if (ns == NULL)
        return;
    rcp_wake_free(ns->lh, ns->wake);
    free(ns->root);
    free(ns);
}

/* A create that came back NODEEXISTS: is the binding the one we asked for?
 * After a lost reply our own create may be what exists (seed 004). An
 * ephemeral binding is ours when our session owns it; a persistent one has
 * no owner, so holding exactly our value is the test (binding is then
 * idempotent). ZK_ENONODE when it vanished meanwhile (the caller retries). */
static int check_existing(struct ns *ns, const char *path, const void *value, int32_t len,
                          bool ephemeral, int64_t deadline_ms)
{
    char *data = NULL;
    int32_t dlen = -1;
    struct zk_stat st;
    int rc = rcp_get(ns->lh, path, &data, &dlen, &st, deadline_ms);
    if (rc != ZK_OK)
        return rc;
    bool ours = rcp_data_equal(data, dlen, value, len) &&
                (ephemeral ? st.ephemeral_owner == larch_session_id(ns->lh)
                           : st.ephemeral_owner == 0);
    free(data);
    return ours ? ZK_OK : ZK_ENODEEXISTS;
}

int ns_bind(struct ns *ns, const char *name, const void *value, int32_t len, bool ephemeral,
            int32_t timeout_ms)
{
    int64_t deadline = rcp_deadline_after(timeout_ms);
    char *path = rcp_child_path(ns->root, name);
    if (path == NULL)
        return ZK_EBADARGUMENTS;
    if (value == NULL)
        len = -1;
    int32_t mode = ephemeral ? ZK_EPHEMERAL : ZK_PERSISTENT;
    int rc;
    for (;;) {
        rc = larch_create(ns->lh, path, value, len, NULL, mode, 0, NULL, NULL);
        if (rc == ZK_ENODEEXISTS) {
            rc = check_existing(ns, path, value, len, ephemeral, deadline);
            if (rc == ZK_ENONODE) { /* unbound between our create and read */
                rc = rcp_ms_left(deadline) > 0 ? ZK_OK : ZK_EOPERATIONTIMEOUT;
                if (rc == ZK_OK)
                    continue;
            }
        }
        if (!rcp_retry(ns->lh, &rc, deadline))
            break;
    }
    free(path);
    return rc;
}

int ns_resolve(struct ns *ns, const char *name, char **value, int32_t *len, int32_t timeout_ms)
{
    char *path = rcp_child_path(ns->root, name);
    if (path == NULL)
        return ZK_EBADARGUMENTS;
    int rc = rcp_get(ns->lh, path, value, len, NULL, rcp_deadline_after(timeout_ms));
    free(path);
    return rc;
}

/* One round of ns_await: exists with a watch (seed 000's barrier pattern:
 * exists() with watch set, wait for the event, reissue). ZK_OK with the
 * value once bound; ZK_ENONODE when still unbound (the watch is armed). */
static int await_once(struct ns *ns, const char *path, char **value, int32_t *len,
                      int64_t deadline_ms)
{
    int rc = rcp_watch_exists(ns->lh, ns->wake, path, NULL);
    if (rc == ZK_OK)
        rc = rcp_get(ns->lh, path, value, len, NULL, deadline_ms);
    return rc;
}

int ns_await(struct ns *ns, const char *name, char **value, int32_t *len, int32_t timeout_ms)
{
    int64_t deadline = rcp_deadline_after(timeout_ms);
    char *path = rcp_child_path(ns->root, name);
    if (path == NULL)
        return ZK_EBADARGUMENTS;
    int rc;
    for (;;) {
        uint64_t seen = rcp_wake_generation(ns->wake);
        rc = await_once(ns, path, value, len, deadline);
        if (rc == ZK_ENONODE)
            rc = rcp_wake_wait(ns->wake, seen, deadline);
        else if (rcp_outcome_unknown(rc))
            rc = rcp_reconnect(ns->lh, deadline);
        else
            break;
        if (rc != ZK_OK)
            break;
    }
    free(path);
    return rc;
}

int ns_unbind(struct ns *ns, const char *name, int32_t timeout_ms)
{
    int64_t deadline = rcp_deadline_after(timeout_ms);
    char *path = rcp_child_path(ns->root, name);
    if (path == NULL)
        return ZK_EBADARGUMENTS;
    bool retried = false;
    int rc;
    for (;;) {
        rc = larch_delete(ns->lh, path, -1);
        if (rc == ZK_ENONODE && retried)
            rc = ZK_OK; /* our lost delete did apply (seed 004) */
        if (!rcp_retry(ns->lh, &rc, deadline))
            break;
        retried = true;
    }
    free(path);
    return rc;
}

int ns_list(struct ns *ns, struct larch_strings *names, int32_t timeout_ms)
{
    int rc = rcp_children(ns->lh, ns->root, rcp_deadline_after(timeout_ms), names);
    if (rc == ZK_OK)
        rcp_sort_names(names);
    return rc;
}
