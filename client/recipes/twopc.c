/*
 * twopc.c — see twopc.h. Seed 000, "Two-phased Commit"; seed 004, multiop
 * and CONNECTIONLOSS.
 */
#include "client/recipes/twopc.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "client/recipes/rcp.h"

#define ALIVE_DIR "alive"
#define WORD_COMMIT "commit"
#define WORD_ABORT "abort"

struct twopc_coord {
    struct larch *lh;
    char *tx_path;
    char **vote_paths;  /* R/<tx>/<site> */
    char **alive_paths; /* R/alive/<site> */
    int32_t nsites;
    bool *committed; /* votes seen so far */
    struct rcp_wake *wake;
};

struct twopc_site {
    struct larch *lh;
    char *root;
    char *name;
    struct rcp_wake *wake;
};

/* ---- helpers ---------------------------------------------------------- */

/* root/a or root/a/b, NULL on a bad component or no memory. */
static char *path_of(const char *root, const char *a, const char *b)
{
    char *path = rcp_child_path(root, a);
    if (path == NULL || b == NULL)
        return path;
    char *full = rcp_child_path(path, b);
    free(path);
    return full;
}

static const char *word_of(enum twopc_decision d)
{
    return d == TWOPC_COMMIT ? WORD_COMMIT : WORD_ABORT;
}

static bool is_word(const char *data, int32_t len, const char *word)
{
    return rcp_data_equal(data, len, word, (int32_t)strlen(word));
}

/* A vote or decision as stored; anything else (empty) is undecided. */
static enum twopc_decision decision_of(const char *data, int32_t len)
{
    return is_word(data, len, WORD_COMMIT)  ? TWOPC_COMMIT
           : is_word(data, len, WORD_ABORT) ? TWOPC_ABORT
                                            : TWOPC_UNDECIDED;
}

/* getData (optionally leaving a data watch), decoded as a decision or vote. */
static int read_word(struct larch *lh, struct rcp_wake *w, const char *path,
                     enum twopc_decision *out, struct zk_stat *st)
{
    char *data = NULL;
    int32_t len = -1;
    int rc = w != NULL ? rcp_watch_get(lh, w, path, false, &data, &len, st)
                       : larch_get(lh, path, NULL, NULL, &data, &len, st);
    if (rc == ZK_OK)
        *out = decision_of(data, len);
    free(data);
    return rc;
}

/* ---- coordinator ------------------------------------------------------ */

void twopc_coord_free(struct twopc_coord *c)
{
    if (c == NULL)
        return;
    rcp_wake_free(c->lh, c->wake);
    for (int32_t i = 0; i < c->nsites; i++) {
        free(c->vote_paths != NULL ? c->vote_paths[i] : NULL);
        free(c->alive_paths != NULL ? c->alive_paths[i] : NULL);
    }
    free(c->vote_paths);
    free(c->alive_paths);
    free(c->committed);
    free(c->tx_path);
    free(c);
}

static struct twopc_coord *coord_new(struct larch *lh, const char *root, const char *tx,
                                     const char *const *sites, int32_t nsites)
{
    struct twopc_coord *c = calloc(1, sizeof *c);
    if (c == NULL)
        return NULL;
    c->lh = lh;
    c->nsites = nsites;
    c->vote_paths = calloc((size_t)nsites, sizeof *c->vote_paths);
    c->alive_paths = calloc((size_t)nsites, sizeof *c->alive_paths);
    c->committed = calloc((size_t)nsites, sizeof *c->committed);
    c->tx_path = path_of(root, tx, NULL);
    bool ok = c->vote_paths && c->alive_paths && c->committed && c->tx_path &&
              rcp_wake_create(&c->wake) == ZK_OK;
    for (int32_t i = 0; ok && i < nsites; i++) {
        c->vote_paths[i] = path_of(root, tx, sites[i]);
        c->alive_paths[i] = path_of(root, ALIVE_DIR, sites[i]);
        ok = c->vote_paths[i] != NULL && c->alive_paths[i] != NULL;
    }
    if (!ok) {
        twopc_coord_free(c);
        return NULL;
    }
    return c;
}

/* Seed 000: the transaction node and one child per site, all at once. */
static int create_transaction(struct twopc_coord *c, int64_t deadline)
{
    struct larch_op ops[TWOPC_SITES_MAX + 1];
    ops[0] = larch_op_create(c->tx_path, "", 0, NULL, ZK_PERSISTENT);
    for (int32_t i = 0; i < c->nsites; i++)
        ops[i + 1] = larch_op_create(c->vote_paths[i], "", 0, NULL, ZK_PERSISTENT);
    bool retried = false;
    for (;;) {
        int rc = larch_multi(c->lh, ops, c->nsites + 1, NULL);
        if (rc == ZK_ENODEEXISTS && retried)
            return ZK_OK; /* our lost multi applied (tx names are unique) */
        if (!rcp_retry(c->lh, &rc, deadline))
            return rc;
        retried = true;
    }
}

/* tx and the site names: path components, tx not the liveness directory,
 * sites distinct. */
static bool names_valid(const char *tx, const char *const *sites, int32_t nsites)
{
    bool ok = rcp_is_component(tx) && strcmp(tx, ALIVE_DIR) != 0;
    for (int32_t i = 0; ok && i < nsites; i++) {
        ok = rcp_is_component(sites[i]);
        for (int32_t j = 0; ok && j < i; j++)
            ok = strcmp(sites[i], sites[j]) != 0;
    }
    return ok;
}

int twopc_coord_begin(struct larch *lh, const char *root, const char *tx,
                      const char *const *sites, int32_t nsites, int32_t timeout_ms,
                      struct twopc_coord **out)
{
    *out = NULL;
    if (lh == NULL || root == NULL || !larch_path_valid(root, false) || sites == NULL ||
        nsites < 1 || nsites > TWOPC_SITES_MAX || !names_valid(tx, sites, nsites))
        return ZK_EBADARGUMENTS;
    int64_t deadline = rcp_deadline_after(timeout_ms);
    struct twopc_coord *c = coord_new(lh, root, tx, sites, nsites);
    if (c == NULL)
        return ZK_ESYSTEMERROR;
    int rc = rcp_ensure_node(lh, root, deadline);
    if (rc == ZK_OK)
        rc = create_transaction(c, deadline);
    if (rc != ZK_OK) {
        twopc_coord_free(c);
        return rc;
    }
    *out = c;
    return ZK_OK;
}

/* Has site i failed? Its liveness node is gone (an exists watch stays
 * behind while it is there). */
static int site_failed(struct twopc_coord *c, int32_t i, bool *failed)
{
    int rc = rcp_watch_exists(c->lh, c->wake, c->alive_paths[i], NULL);
    *failed = rc == ZK_ENONODE;
    return rc == ZK_ENONODE ? ZK_OK : rc;
}

/* One pass over the sites whose commit vote is not in yet: read the vote
 * (leaving a data watch), and for a missing vote check liveness. Sets
 * *decision once the outcome is known. */
static int tally(struct twopc_coord *c, enum twopc_decision *decision, enum twopc_reason *reason)
{
    int32_t committed = 0;
    for (int32_t i = 0; i < c->nsites; i++) {
        enum twopc_decision vote = TWOPC_UNDECIDED;
        bool failed = false;
        if (c->committed[i]) {
            committed++;
            continue;
        }
        int rc = read_word(c->lh, c->wake, c->vote_paths[i], &vote, NULL);
        if (rc == ZK_OK && vote == TWOPC_UNDECIDED)
            rc = site_failed(c, i, &failed);
        if (rc != ZK_OK)
            return rc;
        if (vote == TWOPC_ABORT || failed) {
            *decision = TWOPC_ABORT;
            *reason = failed ? TWOPC_SITE_FAILED : TWOPC_VOTED_ABORT;
            return ZK_OK;
        }
        c->committed[i] = vote == TWOPC_COMMIT;
        committed += c->committed[i];
    }
    if (committed == c->nsites) {
        *decision = TWOPC_COMMIT;
        *reason = TWOPC_ALL_COMMITTED;
    }
    return ZK_OK;
}

/* Writes the decision into the transaction node, once: setData at version 0
 * (the undecided node's version). A BADVERSION means a decision is there
 * already, written by a try whose reply was lost (this call's, or an
 * earlier call's that returned an error): it is read back and stands. */
static int write_decision(struct twopc_coord *c, enum twopc_decision *decision, int64_t deadline)
{
    const char *word = word_of(*decision);
    for (;;) {
        int rc = larch_set(c->lh, c->tx_path, word, (int32_t)strlen(word), 0, NULL);
        if (rc == ZK_EBADVERSION) {
            enum twopc_decision stored = TWOPC_UNDECIDED;
            rc = read_word(c->lh, NULL, c->tx_path, &stored, NULL);
            if (rc == ZK_OK && stored == TWOPC_UNDECIDED)
                rc = ZK_EBADVERSION;
            if (rc == ZK_OK)
                *decision = stored;
        }
        if (!rcp_retry(c->lh, &rc, deadline))
            return rc;
    }
}

int twopc_coord_decide(struct twopc_coord *c, int32_t vote_timeout_ms,
                       enum twopc_decision *decision, enum twopc_reason *reason)
{
    int64_t deadline = rcp_deadline_after(vote_timeout_ms);
    enum twopc_decision d = TWOPC_UNDECIDED;
    enum twopc_reason why = TWOPC_TIMED_OUT;
    while (d == TWOPC_UNDECIDED) {
        uint64_t seen = rcp_wake_generation(c->wake);
        int rc = tally(c, &d, &why);
        if (rcp_outcome_unknown(rc))
            rc = rcp_reconnect(c->lh, deadline);
        else if (rc == ZK_OK && d == TWOPC_UNDECIDED)
            rc = rcp_wake_wait(c->wake, seen, deadline);
        if (rc == ZK_EOPERATIONTIMEOUT) {
            d = TWOPC_ABORT;
            why = TWOPC_TIMED_OUT;
        } else if (rc != ZK_OK) {
            return rc;
        }
    }
    /* Writing the decision must not fail for want of time: the vote
     * deadline may just have passed; allow one more vote timeout. */
    int rc = write_decision(c, &d, rcp_deadline_after(vote_timeout_ms));
    if (rc == ZK_OK) {
        *decision = d;
        if (reason != NULL)
            *reason = why;
    }
    return rc;
}

/* ---- site ------------------------------------------------------------- */

void twopc_site_free(struct twopc_site *s)
{
    if (s == NULL)
        return;
    rcp_wake_free(s->lh, s->wake);
    free(s->root);
    free(s->name);
    free(s);
}

int twopc_site_open(struct larch *lh, const char *root, const char *name, int32_t timeout_ms,
                    struct twopc_site **out)
{
    *out = NULL;
    if (lh == NULL || root == NULL || !larch_path_valid(root, false) || !rcp_is_component(name))
        return ZK_EBADARGUMENTS;
    int64_t deadline = rcp_deadline_after(timeout_ms);
    struct twopc_site *s = calloc(1, sizeof *s);
    if (s == NULL)
        return ZK_ESYSTEMERROR;
    s->lh = lh;
    s->root = strdup(root);
    s->name = strdup(name);
    char *alive_dir = path_of(root, ALIVE_DIR, NULL);
    char *alive = path_of(root, ALIVE_DIR, name);
    int rc = s->root && s->name && alive_dir && alive ? rcp_wake_create(&s->wake)
                                                       : ZK_EBADARGUMENTS;
    if (rc == ZK_OK)
        rc = rcp_ensure_node(lh, root, deadline);
    if (rc == ZK_OK)
        rc = rcp_ensure_node(lh, alive_dir, deadline);
    if (rc == ZK_OK) /* the liveness node: it vanishes with the session */
        rc = rcp_create_ephemeral(lh, alive, NULL, -1, deadline);
    free(alive_dir);
    free(alive);
    if (rc != ZK_OK) {
        twopc_site_free(s);
        return rc;
    }
    *out = s;
    return ZK_OK;
}

/* Waits until path exists (the transaction reached this site), using an
 * exists watch. */
static int await_node(struct twopc_site *s, const char *path, int64_t deadline)
{
    for (;;) {
        uint64_t seen = rcp_wake_generation(s->wake);
        int rc = rcp_watch_exists(s->lh, s->wake, path, NULL);
        if (rc == ZK_ENONODE)
            rc = rcp_wake_wait(s->wake, seen, deadline);
        else if (rcp_outcome_unknown(rc))
            rc = rcp_reconnect(s->lh, deadline);
        else
            return rc;
        if (rc != ZK_OK)
            return rc;
    }
}

/* A failed vote multi after a lost reply: did our vote land? */
static int check_vote(struct twopc_site *s, const char *vote_path, enum twopc_decision vote)
{
    enum twopc_decision stored = TWOPC_UNDECIDED;
    int rc = read_word(s->lh, NULL, vote_path, &stored, NULL);
    return rc != ZK_OK ? rc : stored == vote ? ZK_OK : ZK_EBADVERSION;
}

int twopc_site_vote(struct twopc_site *s, const char *tx, enum twopc_decision vote,
                    int32_t timeout_ms)
{
    if (vote != TWOPC_COMMIT && vote != TWOPC_ABORT)
        return ZK_EBADARGUMENTS;
    int64_t deadline = rcp_deadline_after(timeout_ms);
    char *tx_path = path_of(s->root, tx, NULL);
    char *vote_path = path_of(s->root, tx, s->name);
    const char *word = word_of(vote);
    int rc = tx_path && vote_path ? await_node(s, vote_path, deadline) : ZK_EBADARGUMENTS;
    bool retried = false;
    while (rc == ZK_OK) {
        struct larch_op ops[2] = {
            larch_op_check(tx_path, 0), /* still undecided */
            larch_op_set(vote_path, word, (int32_t)strlen(word), 0),
        };
        rc = larch_multi(s->lh, ops, 2, NULL);
        if (rc == ZK_EBADVERSION && retried)
            rc = check_vote(s, vote_path, vote);
        if (!rcp_retry(s->lh, &rc, deadline))
            break;
        retried = true;
    }
    free(tx_path);
    free(vote_path);
    return rc;
}

/* One look at the transaction node: its decision (a data watch stays
 * behind while undecided), or, while it does not exist yet, an exists
 * watch for its creation. ZK_OK with *d set (maybe undecided: wait);
 * RCP_AGAIN when it appeared between the two calls; or an error. */
static int look_at_tx(struct twopc_site *s, const char *tx_path, enum twopc_decision *d)
{
    int rc = read_word(s->lh, s->wake, tx_path, d, NULL);
    if (rc != ZK_ENONODE)
        return rc;
    rc = rcp_watch_exists(s->lh, s->wake, tx_path, NULL);
    *d = TWOPC_UNDECIDED;
    return rc == ZK_OK ? RCP_AGAIN : rc == ZK_ENONODE ? ZK_OK : rc;
}

int twopc_site_await(struct twopc_site *s, const char *tx, int32_t timeout_ms,
                     enum twopc_decision *decision)
{
    int64_t deadline = rcp_deadline_after(timeout_ms);
    char *tx_path = path_of(s->root, tx, NULL);
    if (tx_path == NULL)
        return ZK_EBADARGUMENTS;
    int rc;
    for (;;) {
        uint64_t seen = rcp_wake_generation(s->wake);
        enum twopc_decision d = TWOPC_UNDECIDED;
        rc = look_at_tx(s, tx_path, &d);
        if (rc == ZK_OK && d != TWOPC_UNDECIDED) {
            *decision = d;
            break;
        }
        if (rc == ZK_OK)
            rc = rcp_wake_wait(s->wake, seen, deadline);
        else if (rc == RCP_AGAIN)
            rc = rcp_ms_left(deadline) > 0 ? ZK_OK : ZK_EOPERATIONTIMEOUT;
        else if (rcp_outcome_unknown(rc))
            rc = rcp_reconnect(s->lh, deadline);
        if (rc != ZK_OK)
            break;
    }
    free(tx_path);
    return rc;
}
