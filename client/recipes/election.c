/* election.c — see election.h (seed 000 "Leader Election"). */
#include "client/recipes/election.h"

#include <stdlib.h>
#include <string.h>

#include "client/recipes/rcp.h"

/* The seed names proposals "ELECTION/guid-n_"; the brief puts the fixed
 * prefix first ("n-<guid>-") so a listing groups by kind. */
static const char CANDIDATE_PREFIX[] = "n";

struct larch_election {
    struct rcp_seq *q;
    char *id;
};

int larch_election_create(struct larch *lh, const char *dir, const char *id,
                          struct larch_election **out)
{
    if (id == NULL)
        return ZK_EBADARGUMENTS;
    struct larch_election *e = calloc(1, sizeof *e);
    if (e == NULL)
        return ZK_ESYSTEMERROR;
    e->id = strdup(id);
    int rc = e->id != NULL ? rcp_seq_create(lh, dir, &e->q) : ZK_ESYSTEMERROR;
    if (rc != ZK_OK) {
        free(e->id);
        free(e);
        return rc;
    }
    *out = e;
    return ZK_OK;
}

void larch_election_free(struct larch_election *e)
{
    if (e == NULL)
        return;
    rcp_seq_free(e->q);
    free(e->id);
    free(e);
}

int larch_election_join(struct larch_election *e, int32_t timeout_ms)
{
    int64_t deadline_ms;
    int rc = rcp_deadline(timeout_ms, &deadline_ms);
    if (rc != ZK_OK)
        return rc;
    return rcp_seq_enqueue(e->q, CANDIDATE_PREFIX, e->id, (int32_t)strlen(e->id), deadline_ms);
}

int larch_election_is_leader(struct larch_election *e, bool *leader)
{
    *leader = false;
    char *blocker = NULL;
    int64_t deadline_ms = rcp_default_deadline(rcp_seq_handle(e->q));
    int rc = rcp_seq_check(e->q, rcp_seq_rule_predecessor, deadline_ms, &blocker);
    *leader = rc == ZK_OK && blocker == NULL;
    free(blocker);
    return rc;
}

int larch_election_wait_leader(struct larch_election *e, int32_t timeout_ms)
{
    if (rcp_seq_node(e->q) == NULL)
        return ZK_EBADARGUMENTS;
    int64_t deadline_ms;
    int rc = rcp_deadline(timeout_ms, &deadline_ms);
    if (rc != ZK_OK)
        return rc;
    /* Seed steps 2-3 and "upon receiving a notification of znode deletion":
     * the predecessor rule watches the largest j < i only. */
    return rcp_seq_await(e->q, rcp_seq_rule_predecessor, NULL, NULL, deadline_ms);
}

/* Reads the id of the lowest candidate; *gone when that node vanished
 * between the listing and the read (a resignation: list again). */
static int read_lowest(struct larch *lh, const char *dir, int64_t deadline_ms, char **id,
                       bool *gone)
{
    struct larch_strings kids = { 0 };
    int rc = rcp_children(lh, dir, deadline_ms, &kids);
    if (rc != ZK_OK)
        return rc;
    *gone = false;
    int32_t lowest = -1;
    for (int32_t i = 0; i < kids.count && lowest < 0; i++) {
        if (rcp_has_prefix(kids.items[i], "n-") && larch_sequence_of(kids.items[i]) >= 0)
            lowest = i;
    }
    char *path = lowest >= 0 ? larch_path_join(dir, kids.items[lowest]) : NULL;
    larch_strings_free(&kids);
    if (lowest < 0)
        return ZK_ENONODE;
    if (path == NULL)
        return ZK_ESYSTEMERROR;
    char *data = NULL;
    int32_t len = -1;
    do {
        rc = larch_get(lh, path, NULL, NULL, &data, &len, NULL);
    } while (rc != ZK_OK && rc != ZK_ENONODE && rcp_retry(lh, &rc, deadline_ms));
    free(path);
    *gone = rc == ZK_ENONODE;
    if (rc == ZK_OK) {
        *id = data != NULL ? data : strdup("");
        rc = *id != NULL ? ZK_OK : ZK_ESYSTEMERROR;
    }
    return *gone ? ZK_OK : rc;
}

int larch_election_leader(struct larch_election *e, char **id)
{
    struct larch *lh = rcp_seq_handle(e->q);
    int64_t deadline_ms = rcp_default_deadline(lh);
    *id = NULL;
    for (;;) {
        bool gone = false;
        int rc = read_lowest(lh, rcp_seq_dir(e->q), deadline_ms, id, &gone);
        if (rc != ZK_OK || !gone)
            return rc;
        if (base_mono_ms() >= deadline_ms)
            return ZK_EOPERATIONTIMEOUT;
    }
}

int larch_election_resign(struct larch_election *e)
{
    return rcp_seq_leave(e->q, rcp_default_deadline(rcp_seq_handle(e->q)));
}

const char *larch_election_node(const struct larch_election *e)
{
    return rcp_seq_node(e->q);
}

void larch_election_stats(struct larch_election *e, struct larch_wake_stats *out)
{
    rcp_wake_stats(rcp_seq_wake(e->q), &out->watches_set, &out->wakeups);
}
