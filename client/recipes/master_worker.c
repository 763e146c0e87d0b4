/*
 * master_worker.c — see master_worker.h. Seed 004: "The Master-Worker
 * Example", "Has my sequential znode been created?", "An Alternative Way:
 * Multiop".
 */
#include "client/recipes/master_worker.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/recipes/rcp.h"

/* How long a lost create or completion waits for a reconnect before it
 * looks again. */
#define SLICE_MS 1000
/* How long stop spends resigning or unregistering. */
#define LEAVE_MS 2000
/* Pause between scans for a submitted task after a lost reply. */
#define SCAN_PAUSE_MS 20
#define TASK_PREFIX "task-"

/* The znodes under the root (see master_worker.h). */
struct layout {
    char *root, *master, *workers, *assign, *tasks, *status, *receipts;
};

struct mw_master {
    struct larch *lh;
    struct layout p;
    char *id;
    struct rcp_wake *wake; /* the thread's watches and stop flag */
    struct rcp_runner thread;
    /* thread-only state */
    struct larch_strings workers; /* last listing, sorted */
    bool recovery_due;            /* worker list changed: look for orphans */
    uint32_t next_worker;         /* round-robin cursor */
    /* shared state */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool leader;
    int err; /* the thread's terminal error */
};

struct mw_worker {
    struct larch *lh;
    struct layout p;
    char *id;
    char *my_assign; /* R/assign/<id> */
    char *my_node;   /* R/workers/<id> */
    mw_execute_fn fn;
    void *ctx;
    struct rcp_wake *wake; /* the thread's watches and stop flag */
    struct rcp_runner thread;
    pthread_mutex_t mu;
    int64_t completed;
    int err;
};

struct mw_client {
    struct larch *lh;
    struct layout p;
    struct rcp_wake *wake;
};

/* ---- helpers ---------------------------------------------------------- */

static bool contains(const struct larch_strings *s, const char *name)
{
    for (int32_t i = 0; i < s->count; i++)
        if (strcmp(s->items[i], name) == 0)
            return true;
    return false;
}

/* getChildren, with a children watch when w is not NULL, in sequence
 * order (names without one, like worker ids, sorted by name after). */
static int list(struct larch *lh, struct rcp_wake *w, const char *path, struct larch_strings *out)
{
    *out = (struct larch_strings){ 0 };
    int rc = w != NULL ? rcp_watch_children(lh, w, path, out)
                       : larch_get_children(lh, path, NULL, NULL, out, NULL);
    if (rc == ZK_OK)
        larch_sort_by_sequence(out);
    return rc;
}

static int multi2(struct larch *lh, struct larch_op a, struct larch_op b)
{
    struct larch_op ops[2] = { a, b };
    return larch_multi(lh, ops, 2, NULL);
}

static bool sync_init(pthread_mutex_t *mu, pthread_cond_t *cv)
{
    if (pthread_mutex_init(mu, NULL) != 0)
        return false;
    if (cv == NULL || rcp_cond_init(cv))
        return true;
    pthread_mutex_destroy(mu);
    return false;
}

/* ---- layout ----------------------------------------------------------- */

static void layout_free(struct layout *p)
{
    free(p->root);
    free(p->master);
    free(p->workers);
    free(p->assign);
    free(p->tasks);
    free(p->status);
    free(p->receipts);
    *p = (struct layout){ 0 };
}

static int layout_init(struct layout *p, const char *root)
{
    *p = (struct layout){ 0 };
    if (root == NULL || !larch_path_valid(root, false) || strcmp(root, "/") == 0)
        return ZK_EBADARGUMENTS;
    p->root = strdup(root);
    p->master = larch_path_join(root, "master");
    p->workers = larch_path_join(root, "workers");
    p->assign = larch_path_join(root, "assign");
    p->tasks = larch_path_join(root, "tasks");
    p->status = larch_path_join(root, "status");
    p->receipts = larch_path_join(root, "receipts");
    if (p->root && p->master && p->workers && p->assign && p->tasks && p->status && p->receipts)
        return ZK_OK;
    layout_free(p);
    return ZK_ESYSTEMERROR;
}

/* Creates the persistent directories of the layout when absent. */
static int layout_ensure(struct larch *lh, const struct layout *p, int64_t deadline)
{
    const char *dirs[] = { p->root, p->workers, p->assign, p->tasks, p->status, p->receipts };
    int rc = ZK_OK;
    for (size_t i = 0; rc == ZK_OK && i < sizeof dirs / sizeof dirs[0]; i++)
        rc = rcp_ensure_node(lh, dirs[i], deadline);
    return rc;
}

/* Moves the task node from_dir/<task> to to_dir/<task>, data and all, with
 * one multi (seed 004, multiop): a task is never in both places. NONODE (it
 * moved already, or to_dir is gone) and NODEEXISTS leave things as they are
 * and count as done: the caller's next listing decides again. */
static int move_task(struct larch *lh, const char *from_dir, const char *task, const char *to_dir)
{
    char *from = larch_path_join(from_dir, task);
    char *to = larch_path_join(to_dir, task);
    char *data = NULL;
    int32_t len = -1;
    int rc = from != NULL && to != NULL ? ZK_OK : ZK_ESYSTEMERROR;
    if (rc == ZK_OK)
        rc = larch_get(lh, from, NULL, NULL, &data, &len, NULL);
    if (rc == ZK_OK)
        rc = multi2(lh, larch_op_create(to, data, len, NULL, ZK_PERSISTENT),
                    larch_op_delete(from, -1));
    free(data);
    free(from);
    free(to);
    return rc == ZK_ENONODE || rc == ZK_ENODEEXISTS ? ZK_OK : rc;
}

/* ---- master ----------------------------------------------------------- */

static void master_publish(struct mw_master *m, bool leader, int err)
{
    pthread_mutex_lock(&m->mu);
    m->leader = leader;
    if (err != ZK_OK)
        m->err = err;
    pthread_cond_broadcast(&m->cv);
    pthread_mutex_unlock(&m->mu);
}

/* Seed 004, "Mastership Changes": create R/master; on NODEEXISTS (or after
 * a lost reply: checkMaster) look at it with an exists watch. Our session
 * owning it means our lost create applied; its absence means run again;
 * someone else holding it means wait for the watch (ZK_OK, see
 * rcp_step_fn). RCP_AGAIN once we lead. */
static int run_for_master(struct mw_master *m)
{
    int rc = larch_create(m->lh, m->p.master, m->id, (int32_t)strlen(m->id), NULL, ZK_EPHEMERAL,
                          0, NULL, NULL);
    if (rc == ZK_OK) {
        master_publish(m, true, ZK_OK);
        return RCP_AGAIN;
    }
    if (rcp_outcome_unknown(rc))
        (void)larch_wait_connected(m->lh, SLICE_MS);
    else if (rc != ZK_ENODEEXISTS)
        return rc;
    struct zk_stat st;
    rc = rcp_watch_exists(m->lh, m->wake, m->p.master, &st);
    if (rc == ZK_OK && st.ephemeral_owner == larch_session_id(m->lh)) {
        master_publish(m, true, ZK_OK);
        return RCP_AGAIN;
    }
    return rc == ZK_ENONODE ? RCP_AGAIN : rc;
}

/* Moves every task of a worker that is gone back to R/tasks, then removes
 * its assign directory (NOTEMPTY: a task arrived meanwhile; next time). */
static int release_worker(struct mw_master *m, const char *worker)
{
    char *dir = larch_path_join(m->p.assign, worker);
    struct larch_strings tasks = { 0 };
    int rc = dir != NULL ? list(m->lh, NULL, dir, &tasks) : ZK_ESYSTEMERROR;
    for (int32_t i = 0; rc == ZK_OK && i < tasks.count; i++)
        rc = move_task(m->lh, dir, tasks.items[i], m->p.tasks);
    larch_strings_free(&tasks);
    if (rc == ZK_OK)
        rc = larch_delete(m->lh, dir, -1);
    free(dir);
    return rc == ZK_ENONODE || rc == ZK_ENOTEMPTY ? ZK_OK : rc;
}

/* Seed 004's reassignment of absent workers' tasks, done as a scan of
 * R/assign against the current worker list: it covers workers that died
 * while we were master and, after a takeover, those that died before. */
static int recover_orphans(struct mw_master *m)
{
    struct larch_strings dirs;
    int rc = list(m->lh, NULL, m->p.assign, &dirs);
    for (int32_t i = 0; rc == ZK_OK && i < dirs.count; i++)
        if (!contains(&m->workers, dirs.items[i]))
            rc = release_worker(m, dirs.items[i]);
    larch_strings_free(&dirs);
    return rc;
}

/* "Master Waits for Changes to the List of Workers": list with a watch;
 * a changed list calls for an orphan scan (retried until it succeeds). */
static int refresh_workers(struct mw_master *m)
{
    struct larch_strings fresh;
    int rc = list(m->lh, m->wake, m->p.workers, &fresh);
    if (rc != ZK_OK)
        return rc;
    if (!rcp_strings_equal(&fresh, &m->workers))
        m->recovery_due = true;
    larch_strings_free(&m->workers);
    m->workers = fresh;
    if (m->recovery_due && (rc = recover_orphans(m)) == ZK_OK)
        m->recovery_due = false;
    return rc;
}

/* "Master Waits for New Tasks to Assign": list with a watch and assign
 * each task, round-robin over the live workers (seed 004 picks at random;
 * either spreads the load). */
static int assign_pending(struct mw_master *m)
{
    struct larch_strings tasks;
    int rc = list(m->lh, m->wake, m->p.tasks, &tasks);
    for (int32_t i = 0; rc == ZK_OK && i < tasks.count && m->workers.count > 0; i++) {
        const char *worker = m->workers.items[m->next_worker++ % (uint32_t)m->workers.count];
        char *dir = larch_path_join(m->p.assign, worker);
        rc = dir != NULL ? move_task(m->lh, m->p.tasks, tasks.items[i], dir) : ZK_ESYSTEMERROR;
        free(dir);
    }
    larch_strings_free(&tasks);
    return rc;
}

/* The master thread's rcp_step_fn: one round of leadership (both lists
 * watched; a lost connection just ends the round), or of running for it. */
static int master_step(void *arg)
{
    struct mw_master *m = arg;
    if (!m->leader)
        return run_for_master(m);
    int rc = refresh_workers(m);
    return rc == ZK_OK ? assign_pending(m) : rc;
}

static void master_fail(void *arg, int err)
{
    master_publish(arg, false, err);
}

/* Frees everything of m but the thread (stopped or never started). */
static void master_free(struct mw_master *m)
{
    rcp_wake_free(m->lh, m->wake);
    pthread_cond_destroy(&m->cv);
    pthread_mutex_destroy(&m->mu);
    larch_strings_free(&m->workers);
    layout_free(&m->p);
    free(m->id);
    free(m);
}

int mw_master_start(struct larch *lh, const char *root, const char *id, int32_t timeout_ms,
                    struct mw_master **out)
{
    *out = NULL;
    if (lh == NULL || id == NULL)
        return ZK_EBADARGUMENTS;
    struct mw_master *m = calloc(1, sizeof *m);
    if (m == NULL)
        return ZK_ESYSTEMERROR;
    if (!sync_init(&m->mu, &m->cv)) {
        free(m);
        return ZK_ESYSTEMERROR;
    }
    m->lh = lh;
    m->recovery_due = true; /* a new master first looks for orphaned tasks */
    int rc = layout_init(&m->p, root);
    m->id = strdup(id);
    if (rc == ZK_OK)
        rc = m->id != NULL ? rcp_wake_create(&m->wake) : ZK_ESYSTEMERROR;
    if (rc == ZK_OK)
        rc = layout_ensure(lh, &m->p, rcp_deadline_after(timeout_ms));
    if (rc == ZK_OK)
        rc = rcp_runner_start(&m->thread, lh, m->wake, master_step, master_fail, m);
    if (rc != ZK_OK) {
        master_free(m);
        return rc;
    }
    *out = m;
    return ZK_OK;
}

int mw_master_wait_leader(struct mw_master *m, int32_t timeout_ms)
{
    int64_t deadline = rcp_deadline_after(timeout_ms);
    int rc = ZK_OK;
    pthread_mutex_lock(&m->mu);
    while (!m->leader && m->err == ZK_OK && rc == ZK_OK)
        if (rcp_cond_wait_until(&m->cv, &m->mu, deadline) != 0)
            rc = ZK_EOPERATIONTIMEOUT;
    if (m->leader)
        rc = ZK_OK;
    else if (m->err != ZK_OK)
        rc = m->err;
    pthread_mutex_unlock(&m->mu);
    return rc;
}

bool mw_master_is_leader(struct mw_master *m)
{
    pthread_mutex_lock(&m->mu);
    bool leader = m->leader;
    pthread_mutex_unlock(&m->mu);
    return leader;
}

/* Deletes R/master if our session holds it, so a backup need not wait for
 * our session to expire. */
static void resign(struct mw_master *m)
{
    int64_t deadline = rcp_deadline_after(LEAVE_MS);
    for (;;) {
        struct zk_stat st;
        int rc = larch_exists(m->lh, m->p.master, NULL, NULL, &st);
        if (rc == ZK_OK && st.ephemeral_owner == larch_session_id(m->lh))
            rc = larch_delete(m->lh, m->p.master, st.version);
        if (!rcp_retry(m->lh, &rc, deadline))
            return;
    }
}

void mw_master_stop(struct mw_master *m)
{
    if (m == NULL)
        return;
    rcp_runner_stop(&m->thread);
    if (m->leader)
        resign(m);
    master_free(m);
}

/* ---- worker ----------------------------------------------------------- */

/* One multi creates R/assign/<id> and the ephemeral R/workers/<id>. After a
 * lost reply, NODEEXISTS on retry is ours when our session owns the
 * worker node. */
static int register_worker(struct mw_worker *w, int64_t deadline)
{
    bool retried = false;
    for (;;) {
        int rc = multi2(w->lh, larch_op_create(w->my_assign, NULL, -1, NULL, ZK_PERSISTENT),
                        larch_op_create(w->my_node, NULL, -1, NULL, ZK_EPHEMERAL));
        if (rc == ZK_ENODEEXISTS && retried) {
            struct zk_stat st;
            rc = larch_exists(w->lh, w->my_node, NULL, NULL, &st);
            if (rc == ZK_OK && st.ephemeral_owner != larch_session_id(w->lh))
                rc = ZK_ENODEEXISTS;
            else if (rc == ZK_ENONODE)
                rc = ZK_ENODEEXISTS; /* only the assign directory exists */
        }
        if (!rcp_retry(w->lh, &rc, deadline))
            return rc;
        retried = true;
    }
}

/* After a lost completion whose retry found a status: is it our result? */
static bool status_is(struct larch *lh, const char *status, const char *result, int32_t rlen)
{
    char *data = NULL;
    int32_t len = -1;
    bool same = larch_get(lh, status, NULL, NULL, &data, &len, NULL) == ZK_OK &&
                rcp_data_equal(data, len, result, rlen);
    free(data);
    return same;
}

/* Completes a task: one multi writes its status and removes the
 * assignment. NODEEXISTS (completed already) and NONODE (the master moved
 * the task away: we were taken for dead) drop it. */
static int complete(struct mw_worker *w, const char *assigned, const char *status,
                    const char *result, int32_t rlen)
{
    bool retried = false;
    for (;;) {
        int rc = multi2(w->lh, larch_op_create(status, result, rlen, NULL, ZK_PERSISTENT),
                        larch_op_delete(assigned, -1));
        bool ours = rc == ZK_OK ||
                    (rc == ZK_ENODEEXISTS && retried && status_is(w->lh, status, result, rlen));
        if (ours) {
            pthread_mutex_lock(&w->mu);
            w->completed++;
            pthread_mutex_unlock(&w->mu);
        }
        if (!rcp_outcome_unknown(rc))
            return rc == ZK_ENODEEXISTS || rc == ZK_ENONODE ? ZK_OK : rc;
        if (rcp_wake_stopping(w->wake))
            return rc;
        (void)larch_wait_connected(w->lh, SLICE_MS);
        retried = true;
    }
}

/* Reads an assigned task, executes it on this thread, completes it. */
static int run_task(struct mw_worker *w, const char *task)
{
    char *assigned = larch_path_join(w->my_assign, task);
    char *status = larch_path_join(w->p.status, task);
    char *data = NULL, *result = NULL;
    int32_t len = -1, rlen = -1;
    int rc = assigned != NULL && status != NULL ? ZK_OK : ZK_ESYSTEMERROR;
    if (rc == ZK_OK)
        rc = larch_get(w->lh, assigned, NULL, NULL, &data, &len, NULL);
    if (rc == ZK_OK) {
        w->fn(task, data, len, &result, &rlen, w->ctx);
        if (result == NULL)
            rlen = -1;
        rc = complete(w, assigned, status, result, rlen);
    }
    free(result);
    free(data);
    free(assigned);
    free(status);
    return rc == ZK_ENONODE ? ZK_OK : rc; /* moved away before we read it */
}

/* The worker thread's end (an rcp_fail_fn): mw_worker_error reports err. */
static void worker_fail(void *arg, int err)
{
    struct mw_worker *w = arg;
    pthread_mutex_lock(&w->mu);
    w->err = err;
    pthread_mutex_unlock(&w->mu);
}

/* Seed 004, "Worker Waits for New Task Assignments": list R/assign/<id>
 * with a watch, run what is there, sleep until the watch fires. Tasks are
 * run one by one on this thread, and each leaves the list when it
 * completes, so none runs twice. NONODE on our directory means the master
 * took us for dead and cleared it: terminal (the worker thread's
 * rcp_step_fn). */
static int worker_step(void *arg)
{
    struct mw_worker *w = arg;
    struct larch_strings tasks;
    int rc = list(w->lh, w->wake, w->my_assign, &tasks);
    for (int32_t i = 0; rc == ZK_OK && i < tasks.count && !rcp_wake_stopping(w->wake); i++)
        rc = run_task(w, tasks.items[i]);
    larch_strings_free(&tasks);
    return rc;
}

static void worker_free(struct mw_worker *w)
{
    rcp_wake_free(w->lh, w->wake);
    pthread_mutex_destroy(&w->mu);
    layout_free(&w->p);
    free(w->id);
    free(w->my_assign);
    free(w->my_node);
    free(w);
}

int mw_worker_start(struct larch *lh, const char *root, const char *id, mw_execute_fn fn,
                    void *ctx, int32_t timeout_ms, struct mw_worker **out)
{
    *out = NULL;
    if (lh == NULL || fn == NULL || !rcp_is_component(id))
        return ZK_EBADARGUMENTS;
    int64_t deadline = rcp_deadline_after(timeout_ms);
    struct mw_worker *w = calloc(1, sizeof *w);
    if (w == NULL)
        return ZK_ESYSTEMERROR;
    if (!sync_init(&w->mu, NULL)) {
        free(w);
        return ZK_ESYSTEMERROR;
    }
    w->lh = lh;
    w->fn = fn;
    w->ctx = ctx;
    int rc = layout_init(&w->p, root);
    w->id = strdup(id);
    if (rc == ZK_OK) {
        w->my_assign = larch_path_join(w->p.assign, id);
        w->my_node = larch_path_join(w->p.workers, id);
        rc = w->id && w->my_assign && w->my_node ? rcp_wake_create(&w->wake) : ZK_ESYSTEMERROR;
    }
    if (rc == ZK_OK)
        rc = layout_ensure(lh, &w->p, deadline);
    if (rc == ZK_OK)
        rc = register_worker(w, deadline);
    if (rc == ZK_OK)
        rc = rcp_runner_start(&w->thread, lh, w->wake, worker_step, worker_fail, w);
    if (rc != ZK_OK) {
        worker_free(w);
        return rc;
    }
    *out = w;
    return ZK_OK;
}

int64_t mw_worker_completed(struct mw_worker *w)
{
    pthread_mutex_lock(&w->mu);
    int64_t n = w->completed;
    pthread_mutex_unlock(&w->mu);
    return n;
}

int mw_worker_error(struct mw_worker *w)
{
    pthread_mutex_lock(&w->mu);
    int err = w->err;
    pthread_mutex_unlock(&w->mu);
    return err;
}

void mw_worker_stop(struct mw_worker *w)
{
    if (w == NULL)
        return;
    rcp_runner_stop(&w->thread);
    /* Unregister: the master hands our tasks to others. */
    (void)rcp_delete(w->lh, w->my_node, rcp_deadline_after(LEAVE_MS));
    worker_free(w);
}

/* ---- client ----------------------------------------------------------- */

int mw_client_open(struct larch *lh, const char *root, int32_t timeout_ms,
                   struct mw_client **out)
{
    *out = NULL;
    if (lh == NULL)
        return ZK_EBADARGUMENTS;
    struct mw_client *c = calloc(1, sizeof *c);
    if (c == NULL)
        return ZK_ESYSTEMERROR;
    c->lh = lh;
    int rc = layout_init(&c->p, root);
    if (rc == ZK_OK)
        rc = rcp_wake_create(&c->wake);
    if (rc == ZK_OK)
        rc = layout_ensure(lh, &c->p, rcp_deadline_after(timeout_ms));
    if (rc != ZK_OK) {
        mw_client_free(c);
        return rc;
    }
    *out = c;
    return ZK_OK;
}

void mw_client_free(struct mw_client *c)
{
    if (c == NULL)
        return;
    rcp_wake_free(c->lh, c->wake);
    layout_free(&c->p);
    free(c);
}

/* The child of dir whose name starts with prefix, if any (*name malloc'd). */
static int find_in(struct larch *lh, const char *dir, const char *prefix, char **name)
{
    struct larch_strings kids;
    int rc = list(lh, NULL, dir, &kids);
    for (int32_t i = 0; rc == ZK_OK && i < kids.count && *name == NULL; i++)
        if (rcp_has_prefix(kids.items[i], prefix))
            *name = strdup(kids.items[i]);
    larch_strings_free(&kids);
    return rc == ZK_ENONODE ? ZK_OK : rc;
}

/* One scan for the task named prefix*: pending, assigned to any worker, or
 * completed (seed 004: find the task by the originator's id in its name). */
static int scan_for_task(struct mw_client *c, const char *prefix, char **name)
{
    struct larch_strings workers = { 0 };
    int rc = find_in(c->lh, c->p.tasks, prefix, name);
    if (rc == ZK_OK && *name == NULL)
        rc = list(c->lh, NULL, c->p.assign, &workers);
    for (int32_t i = 0; rc == ZK_OK && *name == NULL && i < workers.count; i++) {
        char *dir = larch_path_join(c->p.assign, workers.items[i]);
        rc = dir != NULL ? find_in(c->lh, dir, prefix, name) : ZK_ESYSTEMERROR;
        free(dir);
    }
    larch_strings_free(&workers);
    if (rc == ZK_OK && *name == NULL)
        rc = find_in(c->lh, c->p.status, prefix, name);
    return rc;
}

/* The receipt says our task exists; it may be moving between directories
 * while we look, so scan until found. */
static int find_task(struct mw_client *c, const char *prefix, char **name, int64_t deadline)
{
    for (;;) {
        int rc = scan_for_task(c, prefix, name);
        if (rc == ZK_OK && *name != NULL)
            return ZK_OK;
        if (rc == ZK_OK) {
            rc = rcp_ms_left(deadline) > 0 ? ZK_OK : ZK_EOPERATIONTIMEOUT;
            rcp_sleep_ms(SCAN_PAUSE_MS);
        } else if (rcp_outcome_unknown(rc)) {
            rc = rcp_reconnect(c->lh, deadline);
        }
        if (rc != ZK_OK)
            return rc;
    }
}

/* Seed 004's submit: the task and a receipt in one multi under the GUID
 * rule. When the receipt shows that a submit whose reply was lost
 * applied, the task is found by its guid. */
int mw_submit(struct mw_client *c, const void *data, int32_t len, char **task,
              int32_t timeout_ms)
{
    int64_t deadline = rcp_deadline_after(timeout_ms);
    *task = NULL;
    char guid[RCP_GUID_LEN];
    int rc = rcp_guid(c->lh, deadline, guid);
    if (rc != ZK_OK)
        return rc;
    char prefix[sizeof TASK_PREFIX + RCP_GUID_LEN];
    snprintf(prefix, sizeof prefix, TASK_PREFIX "%s-", guid);
    char *base = larch_path_join(c->p.tasks, prefix);
    char *receipt = larch_path_join(c->p.receipts, guid);
    rc = base != NULL && receipt != NULL ? ZK_OK : ZK_ESYSTEMERROR;
    if (data == NULL)
        len = -1;
    if (rc == ZK_OK)
        rc = rcp_create_receipted(c->lh, base, receipt, data, len, deadline, task);
    if (rc == ZK_OK && *task == NULL) /* it applied, its reply was lost */
        rc = find_task(c, prefix, task, deadline);
    if (rc == ZK_OK) /* the receipt has done its job; it is ephemeral anyway */
        (void)rcp_delete(c->lh, receipt, deadline);
    free(base);
    free(receipt);
    return rc;
}

int mw_wait_status(struct mw_client *c, const char *task, char **result, int32_t *len,
                   int32_t timeout_ms)
{
    if (!rcp_is_component(task))
        return ZK_EBADARGUMENTS;
    int64_t deadline = rcp_deadline_after(timeout_ms);
    char *status = larch_path_join(c->p.status, task);
    int rc = status != NULL ? ZK_OK : ZK_ESYSTEMERROR;
    *result = NULL;
    *len = -1;
    while (rc == ZK_OK) {
        uint64_t seen = rcp_wake_generation(c->wake);
        rc = rcp_watch_exists(c->lh, c->wake, status, NULL);
        if (rc == ZK_OK)
            rc = larch_get(c->lh, status, NULL, NULL, result, len, NULL);
        if (rc == ZK_OK)
            break;
        if (rc == ZK_ENONODE)
            rc = rcp_wake_wait(c->wake, seen, deadline);
        else if (rcp_outcome_unknown(rc))
            rc = rcp_reconnect(c->lh, deadline);
    }
    free(status);
    return rc;
}
