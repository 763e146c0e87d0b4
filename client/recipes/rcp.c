/* rcp.c — see rcp.h: the helpers the recipes share (time, the retry and
 * GUID rules, retried node calls, one-shot watch tokens, the queue of
 * sequential nodes, the item queue). */
#include "client/recipes/rcp.h"

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ======================= time ============================================ */

void rcp_sleep_ms(int64_t ms)
{
    struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000 };
    while (ms > 0 && nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

int rcp_deadline(int32_t timeout_ms, int64_t *deadline_ms)
{
    if (timeout_ms < 0)
        return ZK_EBADARGUMENTS;
    *deadline_ms = base_mono_ms() + timeout_ms;
    return ZK_OK;
}

int64_t rcp_deadline_after(int32_t timeout_ms)
{
    return base_mono_ms() + (timeout_ms < 0 ? 0 : timeout_ms);
}

int32_t rcp_ms_left(int64_t deadline_ms)
{
    int64_t left = deadline_ms - base_mono_ms();
    return left <= 0 ? 0 : left > INT32_MAX ? INT32_MAX : (int32_t)left;
}

int64_t rcp_default_deadline(struct larch *lh)
{
    int32_t session_ms = larch_session_timeout(lh);
    if (session_ms <= 0)
        session_ms = 10000; /* not negotiated yet: liblarch's default request */
    return base_mono_ms() + 2 * (int64_t)session_ms;
}

bool rcp_cond_init(pthread_cond_t *cv)
{
    pthread_condattr_t attr;
    if (pthread_condattr_init(&attr) != 0)
        return false;
    /* Deadlines are on the monotonic clock (base_mono_ms). */
    bool ok = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) == 0 &&
              pthread_cond_init(cv, &attr) == 0;
    pthread_condattr_destroy(&attr);
    return ok;
}

int rcp_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t deadline_ms)
{
    struct timespec until = { .tv_sec = deadline_ms / 1000,
                              .tv_nsec = (deadline_ms % 1000) * 1000000 };
    return pthread_cond_timedwait(cv, mu, &until);
}

/* ======================= the retry rule ================================== */

bool rcp_outcome_unknown(int rc)
{
    /* larch.h, seed 004 "CONNECTIONLOSS"; liblarch treats SESSIONMOVED alike. */
    return rc == ZK_ECONNECTIONLOSS || rc == ZK_ESESSIONMOVED;
}

int rcp_reconnect(struct larch *lh, int64_t deadline_ms)
{
    if (rcp_ms_left(deadline_ms) == 0)
        return ZK_EOPERATIONTIMEOUT;
    /* A short pause so a connection that is failing but not yet marked
     * lost does not turn the retry into a busy loop. */
    int32_t left = rcp_ms_left(deadline_ms);
    rcp_sleep_ms(left < 10 ? left : 10);
    left = rcp_ms_left(deadline_ms);
    return left == 0 ? ZK_EOPERATIONTIMEOUT : larch_wait_connected(lh, left);
}

bool rcp_retry(struct larch *lh, int *rc, int64_t deadline_ms)
{
    if (!rcp_outcome_unknown(*rc))
        return false;
    int wc = rcp_reconnect(lh, deadline_ms);
    if (wc != ZK_OK) {
        *rc = wc;
        return false;
    }
    return true;
}

/* ======================= the GUID rule =================================== */

int rcp_guid(struct larch *lh, int64_t deadline_ms, char out[RCP_GUID_LEN])
{
    /* Process-wide so two recipe objects on one handle never share a guid;
     * the session id makes it unique across clients. */
    static atomic_uint_least32_t counter;
    int64_t sid = larch_session_id(lh);
    if (sid == 0) {
        int rc = larch_wait_connected(lh, rcp_ms_left(deadline_ms));
        if (rc != ZK_OK)
            return rc;
        sid = larch_session_id(lh);
    }
    uint32_t n = (uint32_t)atomic_fetch_add(&counter, 1);
    snprintf(out, RCP_GUID_LEN, "%016" PRIx64 "%08" PRIx32, (uint64_t)sid, n);
    return ZK_OK;
}

/* ======================= nodes =========================================== */

int rcp_ensure_node(struct larch *lh, const char *path, int64_t deadline_ms)
{
    int rc;
    do {
        rc = larch_create(lh, path, NULL, -1, NULL, ZK_PERSISTENT, 0, NULL, NULL);
        /* Also after a lost reply: a persistent node of that name is the
         * same node, whoever made it. */
        if (rc == ZK_ENODEEXISTS)
            return ZK_OK;
    } while (rc != ZK_OK && rcp_retry(lh, &rc, deadline_ms));
    return rc;
}

int rcp_ensure_path(struct larch *lh, const char *path, int64_t deadline_ms)
{
    if (!larch_path_valid(path, false))
        return ZK_EBADARGUMENTS;
    int rc = rcp_exists(lh, path, NULL, deadline_ms);
    if (rc != ZK_ENONODE)
        return rc;
    char *copy = strdup(path);
    if (copy == NULL)
        return ZK_ESYSTEMERROR;
    /* Top down: each '/' after the first ends a parent to create. */
    rc = ZK_OK;
    for (char *slash = strchr(copy + 1, '/'); rc == ZK_OK && slash != NULL;
         slash = strchr(slash + 1, '/')) {
        *slash = '\0';
        rc = rcp_ensure_node(lh, copy, deadline_ms);
        *slash = '/';
    }
    if (rc == ZK_OK)
        rc = rcp_ensure_node(lh, copy, deadline_ms);
    free(copy);
    return rc;
}

int rcp_get(struct larch *lh, const char *path, char **data, int32_t *len,
            struct zk_stat *stat, int64_t deadline_ms)
{
    int rc;
    do {
        rc = larch_get(lh, path, NULL, NULL, data, len, stat);
    } while (rc != ZK_OK && rcp_retry(lh, &rc, deadline_ms));
    return rc;
}

int rcp_exists(struct larch *lh, const char *path, struct zk_stat *stat, int64_t deadline_ms)
{
    int rc;
    do {
        rc = larch_exists(lh, path, NULL, NULL, stat);
    } while (rc != ZK_OK && rcp_retry(lh, &rc, deadline_ms));
    return rc;
}

int rcp_children(struct larch *lh, const char *dir, int64_t deadline_ms,
                 struct larch_strings *out)
{
    int rc;
    do {
        *out = (struct larch_strings){ 0 };
        rc = larch_get_children(lh, dir, NULL, NULL, out, NULL);
    } while (rc != ZK_OK && rcp_retry(lh, &rc, deadline_ms));
    if (rc == ZK_OK)
        larch_sort_by_sequence(out);
    return rc;
}

int rcp_delete(struct larch *lh, const char *path, int64_t deadline_ms)
{
    int rc;
    do {
        rc = larch_delete(lh, path, -1);
        if (rc == ZK_ENONODE) /* gone, possibly by our own lost first try */
            return ZK_OK;
    } while (rc != ZK_OK && rcp_retry(lh, &rc, deadline_ms));
    return rc;
}

/* Creates dir/name with mode: after a lost reply ZK_ENODEEXISTS means the
 * first try made it, which is only safe when name is unique to the caller. */
static int create_unique(struct larch *lh, const char *dir, const char *name, int32_t mode,
                         int64_t deadline_ms)
{
    char *path = larch_path_join(dir, name);
    if (path == NULL)
        return ZK_ESYSTEMERROR;
    bool retried = false;
    int rc;
    for (;;) {
        rc = larch_create(lh, path, NULL, -1, NULL, mode, 0, NULL, NULL);
        if (rc == ZK_ENODEEXISTS && retried) {
            rc = ZK_OK; /* our first try made it; the name is ours alone */
            break;
        }
        if (rc == ZK_OK || !rcp_retry(lh, &rc, deadline_ms))
            break;
        retried = true;
    }
    free(path);
    return rc;
}

int rcp_create_guid_node(struct larch *lh, const char *dir, const char *prefix, int32_t mode,
                         int64_t deadline_ms, char **name)
{
    char guid[RCP_GUID_LEN];
    *name = NULL;
    int rc = rcp_guid(lh, deadline_ms, guid);
    if (rc != ZK_OK)
        return rc;
    if (asprintf(name, "%s%s", prefix, guid) < 0) {
        *name = NULL;
        return ZK_ESYSTEMERROR;
    }
    rc = create_unique(lh, dir, *name, mode, deadline_ms);
    if (rc != ZK_OK) {
        free(*name);
        *name = NULL;
    }
    return rc;
}

int rcp_create_ephemeral(struct larch *lh, const char *path, const void *data, int32_t len,
                         int64_t deadline_ms)
{
    int rc;
    for (;;) {
        rc = larch_create(lh, path, data, len, NULL, ZK_EPHEMERAL, 0, NULL, NULL);
        if (rc == ZK_ENODEEXISTS) {
            struct zk_stat st;
            rc = rcp_exists(lh, path, &st, deadline_ms);
            if (rc == ZK_OK)
                return st.ephemeral_owner == larch_session_id(lh) ? ZK_OK : ZK_ENODEEXISTS;
            if (rc == ZK_ENONODE) { /* its holder left between create and exists */
                if (rcp_ms_left(deadline_ms) > 0)
                    continue;
                rc = ZK_EOPERATIONTIMEOUT;
            }
        }
        if (!rcp_retry(lh, &rc, deadline_ms))
            return rc;
    }
}

int rcp_proof_exists(struct larch *lh, const char *sync_path, const char *proof,
                     int64_t deadline_ms)
{
    int rc;
    do {
        struct zk_stat st;
        rc = larch_sync(lh, sync_path);
        if (rc == ZK_OK)
            rc = larch_exists(lh, proof, NULL, NULL, &st);
        if (rc == ZK_OK && st.ephemeral_owner != larch_session_id(lh))
            rc = ZK_ENONODE;
    } while (rc != ZK_OK && rc != ZK_ENONODE && rcp_retry(lh, &rc, deadline_ms));
    return rc;
}

/* The last component of a created path, malloc'd (NULL for no path or no
 * memory). */
static char *base_name(const char *created)
{
    if (created == NULL)
        return NULL;
    const char *slash = strrchr(created, '/');
    return strdup(slash != NULL ? slash + 1 : created);
}

/* One multi of rcp_create_receipted: ZK_OK (with the name if asked) or
 * the multi's error. */
static int create_receipted_once(struct larch *lh, const struct larch_op ops[2], char **name)
{
    struct larch_op_result res[2];
    memset(res, 0, sizeof res);
    int rc = larch_multi(lh, ops, 2, res);
    if (rc == ZK_OK && name != NULL) {
        *name = base_name(res[0].path);
        rc = *name != NULL ? ZK_OK : ZK_ESYSTEMERROR;
    }
    larch_op_results_free(res, 2);
    return rc;
}

int rcp_create_receipted(struct larch *lh, const char *item_base, const char *receipt,
                         const void *data, int32_t len, int64_t deadline_ms, char **name)
{
    struct larch_op ops[2] = {
        larch_op_create(item_base, data, len, NULL, ZK_PERSISTENT_SEQUENTIAL),
        larch_op_create(receipt, NULL, -1, NULL, ZK_EPHEMERAL),
    };
    char *dir = strdup(item_base);
    if (dir == NULL)
        return ZK_ESYSTEMERROR;
    char *slash = strrchr(dir, '/');
    if (slash != NULL)
        slash[slash == dir ? 1 : 0] = '\0'; /* sync the item's directory */
    if (name != NULL)
        *name = NULL;
    int rc;
    for (;;) {
        rc = create_receipted_once(lh, ops, name);
        if (!rcp_retry(lh, &rc, deadline_ms))
            break;
        rc = rcp_proof_exists(lh, dir, receipt, deadline_ms);
        if (rc != ZK_ENONODE) /* ZK_OK: it applied, its reply was lost */
            break;
        if (rcp_ms_left(deadline_ms) == 0) {
            rc = ZK_EOPERATIONTIMEOUT;
            break;
        }
    }
    free(dir);
    return rc;
}

/* ======================= names and lists ================================= */

bool rcp_has_prefix(const char *name, const char *prefix)
{
    return strncmp(name, prefix, strlen(prefix)) == 0;
}

bool rcp_is_component(const char *name)
{
    return name != NULL && name[0] != '\0' && strchr(name, '/') == NULL &&
           strcmp(name, ".") != 0 && strcmp(name, "..") != 0;
}

char *rcp_child_path(const char *parent, const char *name)
{
    if (!rcp_is_component(name))
        return NULL;
    char *path = larch_path_join(parent, name);
    if (path != NULL && !larch_path_valid(path, false)) {
        free(path);
        return NULL;
    }
    return path;
}

bool rcp_data_equal(const char *a, int32_t alen, const void *b, int32_t blen)
{
    if (alen < 0 || blen < 0)
        return alen < 0 && blen < 0;
    return alen == blen && (alen == 0 || memcmp(a, b, (size_t)alen) == 0);
}

bool rcp_strings_equal(const struct larch_strings *a, const struct larch_strings *b)
{
    if (a->count != b->count)
        return false;
    for (int32_t i = 0; i < a->count; i++) {
        if (strcmp(a->items[i], b->items[i]) != 0)
            return false;
    }
    return true;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void rcp_sort_names(struct larch_strings *s)
{
    if (s->count > 1)
        qsort(s->items, (size_t)s->count, sizeof s->items[0], cmp_names);
}

/* ======================= one-shot watch tokens =========================== */

enum watch_kind { WATCH_EXISTS, WATCH_DATA, WATCH_CHILDREN };

struct wake_token {
    struct rcp_wake *wake;
    struct wake_token *next;
    char *path;
    enum watch_kind kind;
    bool hooked;   /* node events run the wake's hook */
    bool live;     /* may still be registered: its final event has not come */
    bool removing; /* asked to go: a new watch of its kind is set anyway */
};

struct rcp_wake {
    pthread_mutex_t mu; /* guards everything below except the hook */
    pthread_cond_t cv;
    unsigned refs; /* the owner's + one per live token */
    uint64_t generation;
    int terminal;  /* ZK_OK, or the session's terminal code */
    bool stopping; /* rcp_wake_stop was called */
    uint64_t watches_set, wakeups;
    /* Only the owner's thread links and unlinks tokens, so it may walk the
     * list without mu; the event thread only retires them (under mu). */
    struct wake_token *tokens;
    pthread_mutex_t hook_mu; /* held while the hook runs; free clears it */
    rcp_wake_hook_fn hook;
    void *hook_arg;
};

int rcp_wake_create(struct rcp_wake **out)
{
    struct rcp_wake *w = calloc(1, sizeof *w);
    if (w == NULL)
        return ZK_ESYSTEMERROR;
    if (!rcp_cond_init(&w->cv)) {
        free(w);
        return ZK_ESYSTEMERROR;
    }
    pthread_mutex_init(&w->mu, NULL);
    pthread_mutex_init(&w->hook_mu, NULL);
    w->refs = 1;
    *out = w;
    return ZK_OK;
}

static void token_free(struct wake_token *t)
{
    free(t->path);
    free(t);
}

/* Frees the wake once nobody can reach it: its owner let go and every
 * token has had its final event. */
static void wake_put(struct rcp_wake *w)
{
    pthread_mutex_lock(&w->mu);
    bool last = --w->refs == 0;
    pthread_mutex_unlock(&w->mu);
    if (!last)
        return;
    for (struct wake_token *t = w->tokens, *next; t != NULL; t = next) {
        next = t->next;
        token_free(t);
    }
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    pthread_mutex_destroy(&w->hook_mu);
    free(w);
}

/* Marks t as having had its final event; true when this call did it (the
 * caller then drops the token's reference). Call with w->mu held. */
static bool token_retire_locked(struct wake_token *t)
{
    if (!t->live)
        return false;
    t->live = false;
    return true;
}

static void token_retire(struct wake_token *t)
{
    struct rcp_wake *w = t->wake;
    pthread_mutex_lock(&w->mu);
    bool retired = token_retire_locked(t);
    pthread_mutex_unlock(&w->mu);
    if (retired)
        wake_put(w);
}

static int terminal_code(int32_t state)
{
    switch (state) {
    case ZK_STATE_EXPIRED:
        return ZK_ESESSIONEXPIRED;
    case ZK_STATE_AUTH_FAILED:
        return ZK_EAUTHFAILED;
    case ZK_STATE_CLOSED:
        return LARCH_ECLOSING;
    default:
        return ZK_OK;
    }
}

static bool is_node_event(int32_t type)
{
    return type == ZK_EVENT_CREATED || type == ZK_EVENT_DELETED ||
           type == ZK_EVENT_DATA_CHANGED || type == ZK_EVENT_CHILD_CHANGED;
}

static void run_hook(struct larch *lh, struct rcp_wake *w, const struct larch_event *ev)
{
    pthread_mutex_lock(&w->hook_mu);
    if (w->hook != NULL)
        w->hook(lh, ev, w->hook_arg);
    pthread_mutex_unlock(&w->hook_mu);
}

/* The watcher of every token; runs on the event thread. Disconnects and
 * reconnects are not final (the handle re-arms watches itself); a node
 * event, a *_WATCH_REMOVED event or the session's end is. After retiring
 * the token it touches only the wake (the owner may free the token). */
static void token_fire(struct larch *lh, const struct larch_event *ev, void *ctx)
{
    struct wake_token *t = ctx;
    struct rcp_wake *w = t->wake;
    int terminal = ZK_OK;
    if (ev->type == ZK_EVENT_NONE) {
        terminal = terminal_code(ev->state);
        if (terminal == ZK_OK)
            return;
    }
    bool node_event = is_node_event(ev->type);
    if (node_event && t->hooked)
        run_hook(lh, w, ev);
    pthread_mutex_lock(&w->mu);
    if (terminal != ZK_OK)
        w->terminal = terminal;
    if (node_event) {
        w->generation++;
        w->wakeups++;
    }
    bool retired = token_retire_locked(t);
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    if (retired)
        wake_put(w);
}

/* Unlinks and frees retired tokens. Owner's thread only. */
static void wake_prune(struct rcp_wake *w)
{
    pthread_mutex_lock(&w->mu);
    struct wake_token **link = &w->tokens;
    while (*link != NULL) {
        struct wake_token *t = *link;
        if (t->live) {
            link = &t->next;
        } else {
            *link = t->next;
            token_free(t);
        }
    }
    pthread_mutex_unlock(&w->mu);
}

/* Whether a watch of kind on path is still pending (and not being
 * removed): it fires on the next change, so a second one is not needed.
 * Call with w->mu held. */
static bool wake_pending_locked(const struct rcp_wake *w, enum watch_kind kind, const char *path,
                                bool hooked)
{
    for (const struct wake_token *t = w->tokens; t != NULL; t = t->next) {
        if (t->live && !t->removing && t->kind == kind && t->hooked == hooked &&
            strcmp(t->path, path) == 0)
            return true;
    }
    return false;
}

/* A token for a new watch of kind on path: *out, or NULL when such a watch
 * is still pending (the call then goes without a watcher). */
static int token_arm(struct rcp_wake *w, enum watch_kind kind, const char *path, bool hooked,
                     struct wake_token **out)
{
    wake_prune(w);
    *out = NULL;
    pthread_mutex_lock(&w->mu);
    bool pending = wake_pending_locked(w, kind, path, hooked);
    pthread_mutex_unlock(&w->mu);
    if (pending)
        return ZK_OK;
    struct wake_token *t = calloc(1, sizeof *t);
    if (t == NULL || (t->path = strdup(path)) == NULL) {
        free(t);
        return ZK_ESYSTEMERROR;
    }
    t->wake = w;
    t->kind = kind;
    t->hooked = hooked;
    t->live = true;
    pthread_mutex_lock(&w->mu);
    w->refs++;
    t->next = w->tokens;
    w->tokens = t;
    pthread_mutex_unlock(&w->mu);
    *out = t;
    return ZK_OK;
}

static larch_watch_fn watcher_of(const struct wake_token *t)
{
    return t != NULL ? token_fire : NULL;
}

/* Asks the server and the handle to forget t's watch. On success the
 * handle delivers *_WATCH_REMOVED, which retires t. When the server cannot
 * be asked, the local registration is dropped at least. ZK_ENOWATCHER means
 * the watch already fired (its event retires t). */
static void token_remove(struct larch *lh, struct wake_token *t)
{
    pthread_mutex_lock(&t->wake->mu);
    t->removing = true;
    pthread_mutex_unlock(&t->wake->mu);
    int rc = larch_remove_watches(lh, t->path, ZK_WATCHER_ANY, token_fire, t, false);
    if (rc != ZK_OK)
        (void)larch_remove_watches(lh, t->path, ZK_WATCHER_ANY, token_fire, t, true);
}

/* After the call that carried t: a registered watch is counted; a call
 * that failed most likely registered nothing, so make sure, then retire t
 * ourselves if the handle has no such watch. */
static void token_settle(struct larch *lh, struct wake_token *t, bool registered)
{
    if (t == NULL)
        return;
    struct rcp_wake *w = t->wake;
    pthread_mutex_lock(&w->mu);
    if (registered)
        w->watches_set++;
    else
        t->removing = true;
    pthread_mutex_unlock(&w->mu);
    if (!registered &&
        larch_remove_watches(lh, t->path, ZK_WATCHER_ANY, token_fire, t, true) != ZK_OK)
        token_retire(t);
}

void rcp_wake_set_hook(struct rcp_wake *w, rcp_wake_hook_fn fn, void *arg)
{
    pthread_mutex_lock(&w->hook_mu);
    w->hook = fn;
    w->hook_arg = arg;
    pthread_mutex_unlock(&w->hook_mu);
}

uint64_t rcp_wake_generation(struct rcp_wake *w)
{
    pthread_mutex_lock(&w->mu);
    uint64_t g = w->generation;
    pthread_mutex_unlock(&w->mu);
    return g;
}

int rcp_wake_wait(struct rcp_wake *w, uint64_t seen, int64_t deadline_ms)
{
    if (base_mono_ms() >= deadline_ms)
        return ZK_EOPERATIONTIMEOUT;
    pthread_mutex_lock(&w->mu);
    while (w->generation == seen && w->terminal == ZK_OK && !w->stopping) {
        if (rcp_cond_wait_until(&w->cv, &w->mu, deadline_ms) == ETIMEDOUT)
            break;
    }
    int rc = w->terminal != ZK_OK                     ? w->terminal
             : w->generation != seen || w->stopping ? ZK_OK
                                                    : ZK_EOPERATIONTIMEOUT;
    pthread_mutex_unlock(&w->mu);
    return rc;
}

int rcp_wake_idle(struct rcp_wake *w, uint64_t seen, int32_t slice_ms)
{
    int rc;
    while ((rc = rcp_wake_wait(w, seen, base_mono_ms() + slice_ms)) == ZK_EOPERATIONTIMEOUT)
        ;
    return rc;
}

void rcp_wake_stop(struct rcp_wake *w)
{
    pthread_mutex_lock(&w->mu);
    w->stopping = true;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

bool rcp_wake_stopping(struct rcp_wake *w)
{
    pthread_mutex_lock(&w->mu);
    bool s = w->stopping;
    pthread_mutex_unlock(&w->mu);
    return s;
}

/* One request with a one-shot watch through w: its kind and outputs. */
struct watch_req {
    enum watch_kind kind;
    bool hooked;         /* data: node events run the hook */
    bool keep_if_absent; /* exists: keep the creation watch on an absent node */
    struct zk_stat *stat;
    char **data;
    int32_t *len;
    struct larch_strings *children;
};

static int watch_call(struct larch *lh, struct rcp_wake *w, const char *path,
                      const struct watch_req *req)
{
    struct wake_token *t;
    int rc = token_arm(w, req->kind, path, req->hooked, &t);
    if (rc != ZK_OK)
        return rc;
    larch_watch_fn fn = watcher_of(t);
    switch (req->kind) {
    case WATCH_EXISTS:
        rc = larch_exists(lh, path, fn, t, req->stat);
        break;
    case WATCH_DATA:
        rc = larch_get(lh, path, fn, t, req->data, req->len, req->stat);
        break;
    case WATCH_CHILDREN:
        *req->children = (struct larch_strings){ 0 };
        rc = larch_get_children(lh, path, fn, t, req->children, req->stat);
        break;
    }
    /* exists() on a missing node leaves a creation watch; getData and
     * getChildren on one set none. */
    bool absent = rc == ZK_ENONODE && req->kind == WATCH_EXISTS;
    if (absent && !req->keep_if_absent && t != NULL)
        token_remove(lh, t);
    else
        token_settle(lh, t, rc == ZK_OK || absent);
    return rc;
}

/* watch_call retried under the retry rule (ZK_ENONODE is an answer). */
static int watch_call_retried(struct larch *lh, struct rcp_wake *w, const char *path,
                              const struct watch_req *req, int64_t deadline_ms)
{
    int rc;
    do {
        rc = watch_call(lh, w, path, req);
    } while (rc != ZK_OK && rcp_retry(lh, &rc, deadline_ms));
    return rc;
}

int rcp_watch_exists(struct larch *lh, struct rcp_wake *w, const char *path,
                     struct zk_stat *stat)
{
    struct watch_req req = { .kind = WATCH_EXISTS, .keep_if_absent = true, .stat = stat };
    return watch_call(lh, w, path, &req);
}

int rcp_watch_get(struct larch *lh, struct rcp_wake *w, const char *path, bool hooked,
                  char **data, int32_t *len, struct zk_stat *stat)
{
    struct watch_req req = {
        .kind = WATCH_DATA, .hooked = hooked, .stat = stat, .data = data, .len = len
    };
    return watch_call(lh, w, path, &req);
}

int rcp_watch_children(struct larch *lh, struct rcp_wake *w, const char *path,
                       struct larch_strings *out)
{
    struct watch_req req = { .kind = WATCH_CHILDREN, .children = out };
    return watch_call(lh, w, path, &req);
}

int rcp_wake_exists(struct larch *lh, struct rcp_wake *w, const char *path,
                    bool keep_if_absent, int64_t deadline_ms, bool *exists)
{
    struct watch_req req = { .kind = WATCH_EXISTS, .keep_if_absent = keep_if_absent };
    int rc = watch_call_retried(lh, w, path, &req, deadline_ms);
    if (rc != ZK_OK && rc != ZK_ENONODE)
        return rc;
    *exists = rc == ZK_OK;
    return ZK_OK;
}

int rcp_wake_get(struct larch *lh, struct rcp_wake *w, const char *path, bool hooked,
                 int64_t deadline_ms, char **data, int32_t *len)
{
    struct watch_req req = { .kind = WATCH_DATA, .hooked = hooked, .data = data, .len = len };
    return watch_call_retried(lh, w, path, &req, deadline_ms);
}

int rcp_wake_children(struct larch *lh, struct rcp_wake *w, const char *path,
                      int64_t deadline_ms, struct larch_strings *out)
{
    struct watch_req req = { .kind = WATCH_CHILDREN, .children = out };
    return watch_call_retried(lh, w, path, &req, deadline_ms);
}

/* How long disarm waits for final events already on their way. They only
 * wait for the event thread, so this bound matters only when a callback of
 * the same handle blocks that thread. */
#define QUIESCE_MS 2000

/* Waits until no token is live. Call with w->mu held. */
static void wake_quiesce_locked(struct rcp_wake *w, int64_t deadline_ms)
{
    for (;;) {
        bool live = false;
        for (struct wake_token *t = w->tokens; t != NULL && !live; t = t->next)
            live = t->live;
        if (!live || rcp_cond_wait_until(&w->cv, &w->mu, deadline_ms) == ETIMEDOUT)
            return;
    }
}

void rcp_wake_disarm(struct larch *lh, struct rcp_wake *w)
{
    for (struct wake_token *t = w->tokens; t != NULL; t = t->next) {
        pthread_mutex_lock(&w->mu);
        bool pending = t->live && !t->removing;
        pthread_mutex_unlock(&w->mu);
        if (pending)
            token_remove(lh, t);
    }
    /* A removed watch gets *_WATCH_REMOVED and one that fired meanwhile
     * (remove said ZK_ENOWATCHER) has its event queued: both reach the
     * event thread soon. Waiting for them means no stale event of an
     * abandoned wait arrives later (and the stats are final). */
    pthread_mutex_lock(&w->mu);
    wake_quiesce_locked(w, base_mono_ms() + QUIESCE_MS);
    pthread_mutex_unlock(&w->mu);
    wake_prune(w);
}

void rcp_wake_stats(struct rcp_wake *w, uint64_t *watches_set, uint64_t *wakeups)
{
    pthread_mutex_lock(&w->mu);
    *watches_set = w->watches_set;
    *wakeups = w->wakeups;
    pthread_mutex_unlock(&w->mu);
}

void rcp_wake_free(struct larch *lh, struct rcp_wake *w)
{
    if (w == NULL)
        return;
    rcp_wake_set_hook(w, NULL, NULL);
    rcp_wake_disarm(lh, w);
    wake_put(w);
}

/* ======================= a recipe's own thread =========================== */

/* How long a recipe thread sleeps between checks of its stop flag, and
 * waits at most for a reconnect before it looks again. */
#define RUNNER_SLICE_MS 1000

int rcp_step_until(struct larch *lh, rcp_step_fn step, void *arg, int64_t deadline_ms)
{
    for (;;) {
        int rc = step(arg);
        if (rc == ZK_OK)
            return ZK_OK;
        if (rc != RCP_AGAIN && !rcp_retry(lh, &rc, deadline_ms))
            return rc;
        if (rcp_ms_left(deadline_ms) == 0)
            return ZK_EOPERATIONTIMEOUT;
    }
}

static void *runner_main(void *arg)
{
    struct rcp_runner *r = arg;
    while (!rcp_wake_stopping(r->wake)) {
        uint64_t seen = rcp_wake_generation(r->wake);
        int rc = r->step(r->arg);
        if (rc == RCP_AGAIN)
            continue;
        if (rcp_outcome_unknown(rc)) {
            /* Seed 004: a disconnected client does nothing until it is back. */
            (void)larch_wait_connected(r->lh, RUNNER_SLICE_MS);
            continue;
        }
        if (rc == ZK_OK)
            rc = rcp_wake_idle(r->wake, seen, RUNNER_SLICE_MS);
        if (rc != ZK_OK) {
            r->fail(r->arg, rc);
            break;
        }
    }
    return NULL;
}

int rcp_runner_start(struct rcp_runner *r, struct larch *lh, struct rcp_wake *wake,
                     rcp_step_fn step, rcp_fail_fn fail, void *arg)
{
    *r = (struct rcp_runner){ .lh = lh, .wake = wake, .step = step, .fail = fail, .arg = arg };
    r->started = pthread_create(&r->thread, NULL, runner_main, r) == 0;
    return r->started ? ZK_OK : ZK_ESYSTEMERROR;
}

void rcp_runner_stop(struct rcp_runner *r)
{
    if (!r->started)
        return;
    rcp_wake_stop(r->wake);
    pthread_join(r->thread, NULL);
    r->started = false;
}

/* ======================= a member of a directory ========================= */

int rcp_member_init(struct rcp_member *m, struct larch *lh, const char *dir)
{
    *m = (struct rcp_member){ 0 };
    if (lh == NULL || dir == NULL || !larch_path_valid(dir, false) || strcmp(dir, "/") == 0)
        return ZK_EBADARGUMENTS;
    m->lh = lh;
    m->dir = strdup(dir);
    if (m->dir == NULL || rcp_wake_create(&m->wake) != ZK_OK) {
        free(m->dir);
        m->dir = NULL;
        return ZK_ESYSTEMERROR;
    }
    return ZK_OK;
}

int rcp_member_drop(struct rcp_member *m, int64_t deadline_ms)
{
    if (m->node == NULL)
        return ZK_OK;
    char *path = larch_path_join(m->dir, m->node);
    if (path == NULL)
        return ZK_ESYSTEMERROR;
    int rc = rcp_delete(m->lh, path, deadline_ms);
    free(path);
    if (rc == ZK_OK || rc == ZK_ESESSIONEXPIRED) {
        free(m->node);
        m->node = NULL;
    }
    return rc;
}

void rcp_member_fini(struct rcp_member *m)
{
    if (m->lh == NULL)
        return;
    /* Watches first, so deleting the node fires none of ours (and runs no
     * hook). Best effort: an ephemeral node left behind goes with the
     * session. */
    rcp_wake_set_hook(m->wake, NULL, NULL);
    rcp_wake_disarm(m->lh, m->wake);
    (void)rcp_member_drop(m, rcp_default_deadline(m->lh));
    rcp_wake_free(m->lh, m->wake);
    free(m->node);
    free(m->dir);
    *m = (struct rcp_member){ 0 };
}

/* ======================= the sequential-node queue ======================= */

struct rcp_seq {
    struct rcp_member m; /* m.node: our child name while queued */
    bool dir_ready;
};

int32_t rcp_seq_rule_predecessor(const struct larch_strings *sorted, int32_t self)
{
    (void)sorted;
    return self - 1;
}

int rcp_seq_create(struct larch *lh, const char *dir, struct rcp_seq **out)
{
    struct rcp_seq *q = calloc(1, sizeof *q);
    if (q == NULL)
        return ZK_ESYSTEMERROR;
    int rc = rcp_member_init(&q->m, lh, dir);
    if (rc != ZK_OK) {
        free(q);
        return rc;
    }
    *out = q;
    return ZK_OK;
}

void rcp_seq_free(struct rcp_seq *q)
{
    if (q == NULL)
        return;
    rcp_member_fini(&q->m);
    free(q);
}

/* Seed 000 "Recoverable Errors and the GUID": the node carrying tag, if the
 * server has it (*name NULL when not). After the lost reply the handle may
 * have moved to a server that has not applied our create yet (it may be
 * behind the one that took it, and our last zxid does not cover a create
 * whose reply never came): sync dir first, as rcp_proof_exists does. */
static int find_tagged(struct larch *lh, const char *dir, const char *tag, int64_t deadline_ms,
                       char **name)
{
    struct larch_strings kids = { 0 };
    *name = NULL;
    int rc;
    do {
        rc = larch_sync(lh, dir);
    } while (rc != ZK_OK && rcp_retry(lh, &rc, deadline_ms));
    if (rc == ZK_OK)
        rc = rcp_children(lh, dir, deadline_ms, &kids);
    if (rc != ZK_OK)
        return rc;
    for (int32_t i = 0; i < kids.count && *name == NULL; i++) {
        if (rcp_has_prefix(kids.items[i], tag)) {
            *name = strdup(kids.items[i]);
            if (*name == NULL)
                rc = ZK_ESYSTEMERROR;
        }
    }
    larch_strings_free(&kids);
    return rc;
}

static int create_tagged(struct rcp_seq *q, const char *tag, const void *data, int32_t len,
                         int64_t deadline_ms, char **name)
{
    char *base = larch_path_join(q->m.dir, tag);
    if (base == NULL)
        return ZK_ESYSTEMERROR;
    int rc;
    for (;;) {
        char *created = NULL;
        rc = larch_create(q->m.lh, base, data, len, NULL, ZK_EPHEMERAL_SEQUENTIAL, 0, &created,
                          NULL);
        if (rc == ZK_OK) {
            *name = base_name(created);
            free(created);
            rc = *name != NULL ? ZK_OK : ZK_ESYSTEMERROR;
            break;
        }
        free(created);
        if (!rcp_retry(q->m.lh, &rc, deadline_ms))
            break;
        /* The create may have happened with its reply lost: adopt our node
         * rather than queue a second one ahead of ourselves. */
        rc = find_tagged(q->m.lh, q->m.dir, tag, deadline_ms, name);
        if (rc != ZK_OK || *name != NULL)
            break;
    }
    free(base);
    return rc;
}

int rcp_seq_enqueue(struct rcp_seq *q, const char *prefix, const void *data, int32_t len,
                    int64_t deadline_ms)
{
    if (q->m.node != NULL)
        return ZK_EBADARGUMENTS;
    int rc = ZK_OK;
    if (!q->dir_ready) {
        rc = rcp_ensure_path(q->m.lh, q->m.dir, deadline_ms);
        q->dir_ready = rc == ZK_OK;
    }
    char guid[RCP_GUID_LEN];
    if (rc == ZK_OK)
        rc = rcp_guid(q->m.lh, deadline_ms, guid);
    char tag[128];
    if (rc == ZK_OK && (size_t)snprintf(tag, sizeof tag, "%s-%s-", prefix, guid) >= sizeof tag)
        rc = ZK_EBADARGUMENTS;
    if (rc == ZK_OK)
        rc = create_tagged(q, tag, data, len, deadline_ms, &q->m.node);
    return rc;
}

static int32_t index_of(const struct larch_strings *s, const char *name)
{
    for (int32_t i = 0; i < s->count; i++) {
        if (strcmp(s->items[i], name) == 0)
            return i;
    }
    return -1;
}

/* Seed 000 lock step 2: getChildren WITHOUT a watch (a watch here on the
 * directory would wake every member on every change: the herd effect). */
static int seq_list(struct rcp_seq *q, int64_t deadline_ms, struct larch_strings *sorted,
                    int32_t *self)
{
    if (q->m.node == NULL)
        return ZK_EBADARGUMENTS;
    int rc = rcp_children(q->m.lh, q->m.dir, deadline_ms, sorted);
    if (rc != ZK_OK)
        return rc;
    *self = index_of(sorted, q->m.node);
    if (*self >= 0)
        return ZK_OK;
    /* Our ephemeral node is gone while the session lives: someone deleted
     * it (seed 000 allows breaking locks). We are no longer queued. */
    larch_strings_free(sorted);
    free(q->m.node);
    q->m.node = NULL;
    return ZK_ENONODE;
}

int rcp_seq_check(struct rcp_seq *q, rcp_seq_rule_fn rule, int64_t deadline_ms, char **blocker)
{
    struct larch_strings sorted;
    int32_t self;
    *blocker = NULL;
    int rc = seq_list(q, deadline_ms, &sorted, &self);
    if (rc != ZK_OK)
        return rc;
    int32_t at = rule(&sorted, self);
    if (at >= 0) {
        *blocker = strdup(sorted.items[at]);
        if (*blocker == NULL)
            rc = ZK_ESYSTEMERROR;
    }
    larch_strings_free(&sorted);
    return rc;
}

/* One pass of the await loop: list, and either report our turn (*turn) or
 * watch the blocker. *blocker_gone when it vanished before the watch. */
static int seq_step(struct rcp_seq *q, rcp_seq_rule_fn rule, rcp_seq_blocked_fn blocked,
                    void *arg, int64_t deadline_ms, bool *turn, bool *blocker_gone)
{
    struct larch_strings sorted;
    int32_t self;
    int rc = seq_list(q, deadline_ms, &sorted, &self);
    if (rc != ZK_OK)
        return rc;
    int32_t at = rule(&sorted, self);
    *turn = at < 0;
    if (!*turn && blocked != NULL)
        rc = blocked(q, &sorted, self, arg);
    char *path = NULL;
    if (rc == ZK_OK && !*turn) {
        path = larch_path_join(q->m.dir, sorted.items[at]);
        rc = path != NULL ? ZK_OK : ZK_ESYSTEMERROR;
    }
    larch_strings_free(&sorted);
    if (rc == ZK_OK && path != NULL) {
        /* Step 4: exists() with a watch on the node we wait for, only. */
        bool exists = false;
        rc = rcp_wake_exists(q->m.lh, q->m.wake, path, false, deadline_ms, &exists);
        *blocker_gone = !exists;
    }
    free(path);
    return rc;
}

int rcp_seq_await(struct rcp_seq *q, rcp_seq_rule_fn rule, rcp_seq_blocked_fn blocked,
                  void *arg, int64_t deadline_ms)
{
    int rc;
    for (bool first = true;; first = false) {
        if (!first && base_mono_ms() >= deadline_ms) {
            rc = ZK_EOPERATIONTIMEOUT;
            break;
        }
        /* Read before the watch is set so its event cannot be missed. */
        uint64_t seen = rcp_wake_generation(q->m.wake);
        bool turn = false, blocker_gone = false;
        rc = seq_step(q, rule, blocked, arg, deadline_ms, &turn, &blocker_gone);
        if (rc != ZK_OK || turn)
            break;
        if (blocker_gone) /* step 5: exists() said false, list again */
            continue;
        rc = rcp_wake_wait(q->m.wake, seen, deadline_ms);
        if (rc != ZK_OK)
            break;
    }
    if (rc != ZK_OK)
        rcp_wake_disarm(q->m.lh, q->m.wake);
    return rc;
}

int rcp_seq_leave(struct rcp_seq *q, int64_t deadline_ms)
{
    rcp_wake_disarm(q->m.lh, q->m.wake);
    return rcp_member_drop(&q->m, deadline_ms);
}

const char *rcp_seq_node(const struct rcp_seq *q)
{
    return q->m.node;
}

const char *rcp_seq_dir(const struct rcp_seq *q)
{
    return q->m.dir;
}

struct larch *rcp_seq_handle(const struct rcp_seq *q)
{
    return q->m.lh;
}

struct rcp_wake *rcp_seq_wake(const struct rcp_seq *q)
{
    return q->m.wake;
}

/* ======================= the item queue ================================== */

struct rcp_itemq {
    struct larch *lh;
    bool by_priority;
    char *path;
    char *receipts; /* P/receipts: a producer's proof that its put applied */
    char *claims;   /* P/claims: a consumer's proof that its take applied */
    struct rcp_wake *wake;
    struct larch_strings cache; /* item names of the last listing, in take order */
    int32_t next;               /* first cache entry not tried yet */
    uint64_t listed_at;         /* wake generation when the cache was listed */
};

#define ITEM_PREFIX "qn-"
/* "qn-PP-": the prefix, two priority digits, a dash. */
#define PRIORITY_AT 3

/* The priority of an item name "qn-PP-...-<seq>", or -1 for another name. */
static int priority_of(const char *name)
{
    const char *p = name + PRIORITY_AT;
    if (!rcp_has_prefix(name, ITEM_PREFIX) || p[0] < '0' || p[0] > '9' || p[1] < '0' ||
        p[1] > '9' || p[2] != '-' || larch_sequence_of(name) < 0)
        return -1;
    return (p[0] - '0') * 10 + (p[1] - '0');
}

static bool is_item(const struct rcp_itemq *q, const char *name)
{
    if (q->by_priority)
        return priority_of(name) >= 0;
    return rcp_has_prefix(name, ITEM_PREFIX) && larch_sequence_of(name) >= 0;
}

static int cmp_sequence(const void *a, const void *b)
{
    int64_t x = larch_sequence_of(*(char *const *)a);
    int64_t y = larch_sequence_of(*(char *const *)b);
    return x < y ? -1 : x > y;
}

/* Priority first, then the sequence number: FIFO within a priority. */
static int cmp_priority(const void *a, const void *b)
{
    int px = priority_of(*(char *const *)a), py = priority_of(*(char *const *)b);
    if (px != py)
        return px < py ? -1 : 1;
    return cmp_sequence(a, b);
}

void rcp_itemq_free(struct rcp_itemq *q)
{
    if (q == NULL)
        return;
    rcp_wake_free(q->lh, q->wake);
    larch_strings_free(&q->cache);
    free(q->path);
    free(q->receipts);
    free(q->claims);
    free(q);
}

int rcp_itemq_open(struct larch *lh, const char *path, bool by_priority, int32_t timeout_ms,
                   struct rcp_itemq **out)
{
    *out = NULL;
    if (lh == NULL || path == NULL || !larch_path_valid(path, false) || strcmp(path, "/") == 0)
        return ZK_EBADARGUMENTS;
    int64_t deadline = rcp_deadline_after(timeout_ms);
    struct rcp_itemq *q = calloc(1, sizeof *q);
    if (q == NULL)
        return ZK_ESYSTEMERROR;
    q->lh = lh;
    q->by_priority = by_priority;
    q->path = strdup(path);
    q->receipts = larch_path_join(path, "receipts");
    q->claims = larch_path_join(path, "claims");
    int rc = q->path && q->receipts && q->claims ? rcp_wake_create(&q->wake) : ZK_ESYSTEMERROR;
    if (rc == ZK_OK)
        rc = rcp_ensure_node(lh, q->path, deadline);
    if (rc == ZK_OK)
        rc = rcp_ensure_node(lh, q->receipts, deadline);
    if (rc == ZK_OK)
        rc = rcp_ensure_node(lh, q->claims, deadline);
    if (rc != ZK_OK) {
        rcp_itemq_free(q);
        return rc;
    }
    *out = q;
    return ZK_OK;
}

/* Seed 000 "Queues": create() with the SEQUENCE flag under a name carrying
 * our guid (and, seed 000 "Priority Queues", the priority), with a receipt
 * in the same multi (seed 004) so a lost reply can be told apart. */
int rcp_itemq_put(struct rcp_itemq *q, int priority, const void *data, int32_t len,
                  int32_t timeout_ms)
{
    if (q->by_priority && (priority < 0 || priority > RCP_ITEMQ_PRIORITY_MAX))
        return ZK_EBADARGUMENTS;
    int64_t deadline = rcp_deadline_after(timeout_ms);
    char guid[RCP_GUID_LEN];
    int rc = rcp_guid(q->lh, deadline, guid);
    if (rc != ZK_OK)
        return rc;
    char name[sizeof ITEM_PREFIX + 4 + RCP_GUID_LEN];
    if (q->by_priority) /* seed 000: the name ends in "queue-YY", YY the priority */
        snprintf(name, sizeof name, ITEM_PREFIX "%02d-%s-", priority, guid);
    else
        snprintf(name, sizeof name, ITEM_PREFIX "%s-", guid);
    char *item_base = larch_path_join(q->path, name);
    char *receipt = larch_path_join(q->receipts, guid);
    rc = item_base != NULL && receipt != NULL ? ZK_OK : ZK_ESYSTEMERROR;
    if (data == NULL)
        len = -1;
    if (rc == ZK_OK)
        rc = rcp_create_receipted(q->lh, item_base, receipt, data, len, deadline, NULL);
    if (rc == ZK_OK) /* the receipt has done its job; it is ephemeral anyway */
        (void)rcp_delete(q->lh, receipt, deadline);
    free(item_base);
    free(receipt);
    return rc;
}

/* Lists the queue with a watch (seed 000: getChildren with watch set) into
 * the cache, items only, in take order. */
static int list_items(struct rcp_itemq *q, int64_t deadline)
{
    larch_strings_free(&q->cache);
    q->next = 0;
    int rc = rcp_wake_children(q->lh, q->wake, q->path, deadline, &q->cache);
    if (rc != ZK_OK)
        return rc;
    int32_t kept = 0;
    for (int32_t i = 0; i < q->cache.count; i++) {
        char *name = q->cache.items[i];
        if (is_item(q, name))
            q->cache.items[kept++] = name;
        else
            free(name);
    }
    q->cache.count = kept;
    qsort(q->cache.items, (size_t)kept, sizeof q->cache.items[0],
          q->by_priority ? cmp_priority : cmp_sequence);
    return ZK_OK;
}

/* Makes sure the cache has an untried name, listing again once it is used
 * up and waiting for the watch while the queue is empty. A FIFO queue
 * works through its listing (seed 000 "Queues"); a priority queue drops
 * it at the first watch notification, seed 000's second change for
 * "Priority Queues" (an item of a higher priority may have arrived). */
static int refill(struct rcp_itemq *q, int64_t deadline)
{
    for (;;) {
        uint64_t seen = rcp_wake_generation(q->wake);
        if (q->next < q->cache.count && (!q->by_priority || seen == q->listed_at))
            return ZK_OK;
        q->listed_at = seen;
        int rc = list_items(q, deadline);
        if (rc != ZK_OK)
            return rc;
        if (q->cache.count > 0)
            return ZK_OK;
        if ((rc = rcp_wake_wait(q->wake, seen, deadline)) != ZK_OK)
            return rc;
    }
}

/* Deletes the item and creates our claim in one multi. ZK_OK: we own the
 * item; ZK_ENONODE: another consumer took it; else an error. After a lost
 * reply, our claim existing means the multi applied. Until that is known
 * the item may be ours alone, deleted and not delivered: finding out does
 * not stop at the caller's deadline (a take may be shorter than a
 * reconnect) but at the session's (rcp_default_deadline; only an expired
 * session loses an item, queue.h). */
static int claim(struct rcp_itemq *q, const char *item, const char *claim_path,
                 int64_t deadline)
{
    struct larch_op ops[2] = {
        larch_op_delete(item, -1),
        larch_op_create(claim_path, NULL, -1, NULL, ZK_EPHEMERAL),
    };
    for (;;) {
        int rc = larch_multi(q->lh, ops, 2, NULL);
        if (!rcp_outcome_unknown(rc))
            return rc == ZK_ENODEEXISTS ? ZK_ENONODE : rc;
        int64_t settle = rcp_default_deadline(q->lh);
        if (settle < deadline)
            settle = deadline;
        if ((rc = rcp_reconnect(q->lh, settle)) != ZK_OK ||
            (rc = rcp_proof_exists(q->lh, q->path, claim_path, settle)) != ZK_ENONODE)
            return rc;
        /* Not applied. Retry unless the item is gone meanwhile, or our time is up. */
        rc = larch_exists(q->lh, item, NULL, NULL, NULL);
        if (rc == ZK_ENONODE)
            return rc;
        if (rcp_ms_left(deadline) == 0)
            return ZK_EOPERATIONTIMEOUT;
    }
}

/* Tries to take the item `name`: read it first, then claim it. */
static int take_one(struct rcp_itemq *q, const char *name, char **data, int32_t *len,
                    int64_t deadline)
{
    char *item = larch_path_join(q->path, name);
    char *claim_path = larch_path_join(q->claims, name);
    int rc = item != NULL && claim_path != NULL ? ZK_OK : ZK_ESYSTEMERROR;
    if (rc == ZK_OK)
        rc = rcp_get(q->lh, item, data, len, NULL, deadline);
    if (rc == ZK_OK)
        rc = claim(q, item, claim_path, deadline);
    if (rc == ZK_OK) /* the claim has done its job; it is ephemeral anyway */
        (void)rcp_delete(q->lh, claim_path, deadline);
    if (rc != ZK_OK) {
        free(*data);
        *data = NULL;
        *len = -1;
    }
    free(item);
    free(claim_path);
    return rc;
}

int rcp_itemq_take(struct rcp_itemq *q, int *priority, char **data, int32_t *len,
                   int32_t timeout_ms)
{
    int64_t deadline = rcp_deadline_after(timeout_ms);
    *data = NULL;
    *len = -1;
    /* A priority queue starts every take from a fresh listing: a watch
     * notification may still be on its way to the event thread when the
     * caller comes back for the next item, and an urgent item put before
     * this call must not wait behind the old list. */
    if (q->by_priority)
        q->next = q->cache.count;
    for (;;) {
        int rc = refill(q, deadline);
        if (rc != ZK_OK)
            return rc;
        /* Move past a name only once its fate is known: skipping one whose
         * take merely timed out would let us take a later item before it. */
        const char *name = q->cache.items[q->next];
        rc = take_one(q, name, data, len, deadline);
        if (rc == ZK_OK && priority != NULL)
            *priority = q->by_priority ? priority_of(name) : -1;
        if (rc == ZK_OK || rc == ZK_ENONODE)
            q->next++;
        if (rc != ZK_ENONODE)
            return rc;
    }
}
