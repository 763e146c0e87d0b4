/*
 * larch.c — liblarch's handle and API: building requests, queueing them for
 * the I/O thread (conn.c), waiting for synchronous ones, and the event
 * thread that runs asynchronous completions and watchers in arrival order.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client/lc_int.h"

#define DEFAULT_TIMEOUT_MS 10000
#define CLOSE_WAIT_MS 3000 /* how long close waits for the closeSession reply */

/* An event-thread work item: a completion, or one event for a set of watchers. */
struct lc_item {
    struct lc_item *next;
    struct lc_req *req;
    struct lc_wset set;
    int32_t type, state;
    char *path;
};

void larch_default_watcher(struct larch *lh, const struct larch_event *ev, void *ctx)
{
    (void)ctx;
    if (lh->default_fn != NULL)
        lh->default_fn(lh, ev, lh->default_ctx);
}

void lc_req_free(struct lc_req *r)
{
    if (r == NULL)
        return;
    zk_wbuf_free(&r->frame);
    free(r->wpath);
    free(r->body);
    free(r);
}

/* ---- the event thread ---------------------------------------------------------- */

static void item_push(struct larch *lh, struct lc_item *it)
{
    if (lh->ev_tail != NULL)
        lh->ev_tail->next = it;
    else
        lh->ev_head = it;
    lh->ev_tail = it;
    pthread_cond_signal(&lh->ev_cv);
}

void lc_queue_event(struct larch *lh, const struct lc_wset *set, int32_t type, int32_t state,
                    const char *path)
{
    struct lc_item *it = calloc(1, sizeof *it);
    if (it == NULL)
        return; /* out of memory: the event is lost, as a dropped packet would be */
    it->type = type;
    it->state = state;
    it->path = strdup(path);
    it->set.items = malloc(set->count * sizeof *it->set.items);
    if (it->path == NULL || it->set.items == NULL) {
        free(it->path);
        free(it->set.items);
        free(it);
        return;
    }
    memcpy(it->set.items, set->items, set->count * sizeof *set->items);
    it->set.count = it->set.cap = set->count;
    item_push(lh, it);
}

void lc_session_event(struct larch *lh, int32_t state, bool clear_watches)
{
    struct lc_wset set = { 0 };
    if (lc_watches_all(&lh->watches, &set, clear_watches) == 0 &&
        lc_wset_add(&set, larch_default_watcher, NULL) == 0)
        lc_queue_event(lh, &set, ZK_EVENT_NONE, state, "");
    lc_wset_free(&set);
}

void lc_complete(struct larch *lh, struct lc_req *req)
{
    if (req->sync != NULL) {
        req->sync->done = true;
        pthread_cond_broadcast(&lh->cv);
        return; /* the waiting caller owns req */
    }
    struct lc_item *it = calloc(1, sizeof *it);
    if (it == NULL) {
        lc_req_free(req); /* out of memory: done cannot run */
        return;
    }
    it->req = req;
    item_push(lh, it);
}

static void fail_list(struct larch *lh, struct lc_req *r, int32_t err)
{
    while (r != NULL) {
        struct lc_req *next = r->next;
        r->next = NULL;
        r->err = err;
        lc_complete(lh, r);
        r = next;
    }
}

void lc_fail_all(struct larch *lh, int32_t err)
{
    struct lc_req *pend = lh->pend_head, *send = lh->send_head;
    lh->pend_head = lh->pend_tail = NULL;
    lh->send_head = lh->send_tail = NULL;
    fail_list(lh, pend, err);
    fail_list(lh, send, err);
}

static void run_completion(struct larch *lh, struct lc_req *req)
{
    if (req->done != NULL) {
        struct lc_reply rep;
        struct larch_result res;
        lc_reply_decode(req, lh->hosts.chroot, &rep);
        lc_reply_result(&rep, &res);
        req->done(lh, &res, req->ctx);
        lc_reply_free(&rep);
    }
    lc_req_free(req);
}

static void run_item(struct larch *lh, struct lc_item *it)
{
    if (it->req != NULL) {
        run_completion(lh, it->req);
    } else {
        struct larch_event ev = { .type = it->type, .state = it->state, .path = it->path };
        for (size_t i = 0; i < it->set.count; i++)
            it->set.items[i].fn(lh, &ev, it->set.items[i].ctx);
    }
    lc_wset_free(&it->set);
    free(it->path);
    free(it);
}

/* Runs items until told to stop and the queue is empty. */
static void *event_main(void *arg)
{
    struct larch *lh = arg;
    pthread_mutex_lock(&lh->mu);
    for (;;) {
        while (lh->ev_head == NULL && !lh->stop_ev)
            pthread_cond_wait(&lh->ev_cv, &lh->mu);
        struct lc_item *it = lh->ev_head;
        if (it == NULL)
            break; /* stop_ev and drained */
        lh->ev_head = it->next;
        if (lh->ev_head == NULL)
            lh->ev_tail = NULL;
        pthread_mutex_unlock(&lh->mu);
        run_item(lh, it);
        pthread_mutex_lock(&lh->mu);
    }
    pthread_mutex_unlock(&lh->mu);
    return NULL;
}

/* ---- lifecycle --------------------------------------------------------------------- */

static int init_sync(struct larch *lh)
{
    pthread_condattr_t ca;
    if (pthread_condattr_init(&ca) != 0)
        return -1;
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(&lh->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (rc != 0)
        return -1;
    if (pthread_cond_init(&lh->ev_cv, NULL) != 0) {
        pthread_cond_destroy(&lh->cv);
        return -1;
    }
    pthread_mutex_init(&lh->mu, NULL);
    return 0;
}

static void free_auths(struct larch *lh)
{
    while (lh->auths != NULL) {
        struct lc_auth *a = lh->auths;
        lh->auths = a->next;
        free(a->scheme);
        free(a->cred);
        free(a);
    }
}

static void handle_free(struct larch *lh)
{
    lc_hosts_free(&lh->hosts);
    lc_watches_free(&lh->watches);
    free_auths(lh);
    close(lh->wake[0]);
    close(lh->wake[1]);
    pthread_cond_destroy(&lh->cv);
    pthread_cond_destroy(&lh->ev_cv);
    pthread_mutex_destroy(&lh->mu);
    free(lh);
}

static uint64_t clock_seed(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ ((uint64_t)getpid() << 40);
}

static void apply_options(struct larch *lh, const struct larch_options *opt)
{
    lh->requested_timeout_ms = opt != NULL && opt->session_timeout_ms > 0
                                   ? opt->session_timeout_ms
                                   : DEFAULT_TIMEOUT_MS;
    if (opt == NULL)
        return;
    lh->default_fn = opt->watcher;
    lh->default_ctx = opt->watcher_ctx;
    lh->session_id = opt->session_id;
    memcpy(lh->passwd, opt->passwd, LARCH_PASSWD_LEN);
    lh->read_only = opt->read_only;
}

int larch_open(struct larch **out, const char *connect_string, const struct larch_options *opt)
{
    *out = NULL;
    struct larch *lh = calloc(1, sizeof *lh);
    if (lh == NULL)
        return ZK_ESYSTEMERROR;
    int rc = lc_hosts_parse(connect_string, &lh->hosts);
    if (rc != ZK_OK) {
        free(lh);
        return rc;
    }
    if (opt == NULL || !opt->no_shuffle)
        lc_hosts_shuffle(&lh->hosts, opt != NULL && opt->seed != 0 ? opt->seed : clock_seed());
    if (pipe2(lh->wake, O_NONBLOCK | O_CLOEXEC) != 0) {
        lc_hosts_free(&lh->hosts);
        free(lh);
        return ZK_ESYSTEMERROR;
    }
    if (init_sync(lh) != 0) {
        lh->wake[0] = lh->wake[1] = -1;
        lc_hosts_free(&lh->hosts);
        free(lh);
        return ZK_ESYSTEMERROR;
    }
    apply_options(lh, opt);
    lc_watches_init(&lh->watches);
    lh->state = LARCH_STATE_CONNECTING;
    lh->next_xid = 1;
    if (pthread_create(&lh->ev_thread, NULL, event_main, lh) != 0) {
        handle_free(lh);
        return ZK_ESYSTEMERROR;
    }
    if (pthread_create(&lh->io_thread, NULL, lc_io_main, lh) != 0) {
        pthread_mutex_lock(&lh->mu);
        lh->stop_ev = true;
        pthread_cond_signal(&lh->ev_cv);
        pthread_mutex_unlock(&lh->mu);
        pthread_join(lh->ev_thread, NULL);
        handle_free(lh);
        return ZK_ESYSTEMERROR;
    }
    *out = lh;
    return ZK_OK;
}

static bool connected(int32_t s)
{
    return s == ZK_STATE_SYNC_CONNECTED || s == ZK_STATE_CONNECTED_READONLY;
}

static int terminal_error(int32_t s)
{
    switch (s) {
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

int larch_wait_connected(struct larch *lh, int32_t timeout_ms)
{
    struct timespec ts = base_deadline(CLOCK_MONOTONIC, timeout_ms);
    pthread_mutex_lock(&lh->mu);
    int rc = ZK_OK;
    while (!connected(lh->state) && (rc = terminal_error(lh->state)) == ZK_OK && !lh->stop_io) {
        if (pthread_cond_timedwait(&lh->cv, &lh->mu, &ts) == ETIMEDOUT) {
            rc = connected(lh->state) ? ZK_OK : ZK_EOPERATIONTIMEOUT;
            break;
        }
    }
    if (lh->stop_io && rc == ZK_OK && !connected(lh->state))
        rc = LARCH_ECLOSING;
    pthread_mutex_unlock(&lh->mu);
    return rc;
}

/* Stops both threads; with close_session, first ends the session. */
static int shut_down(struct larch *lh, bool close_session);

int larch_close(struct larch *lh)
{
    if (lh == NULL)
        return ZK_EBADARGUMENTS;
    if (pthread_equal(pthread_self(), lh->ev_thread) || pthread_equal(pthread_self(), lh->io_thread))
        return ZK_EAPIERROR; /* joining our own thread would hang */
    return shut_down(lh, true);
}

void larch_detach(struct larch *lh)
{
    if (lh != NULL && !pthread_equal(pthread_self(), lh->ev_thread))
        shut_down(lh, false);
}

int32_t larch_state(struct larch *lh)
{
    pthread_mutex_lock(&lh->mu);
    int32_t s = lh->state;
    pthread_mutex_unlock(&lh->mu);
    return s;
}

int64_t larch_session_id(struct larch *lh)
{
    pthread_mutex_lock(&lh->mu);
    int64_t id = lh->session_id;
    pthread_mutex_unlock(&lh->mu);
    return id;
}

void larch_session_passwd(struct larch *lh, uint8_t out[LARCH_PASSWD_LEN])
{
    pthread_mutex_lock(&lh->mu);
    memcpy(out, lh->passwd, LARCH_PASSWD_LEN);
    pthread_mutex_unlock(&lh->mu);
}

int32_t larch_session_timeout(struct larch *lh)
{
    pthread_mutex_lock(&lh->mu);
    int32_t t = lh->timeout_ms;
    pthread_mutex_unlock(&lh->mu);
    return t;
}

int64_t larch_last_zxid(struct larch *lh)
{
    pthread_mutex_lock(&lh->mu);
    int64_t z = lh->last_zxid;
    pthread_mutex_unlock(&lh->mu);
    return z;
}

int larch_server(struct larch *lh, char *out, size_t cap)
{
    pthread_mutex_lock(&lh->mu);
    int rc = connected(lh->state) && lh->server[0] != '\0' ? ZK_OK : ZK_ECONNECTIONLOSS;
    if (rc == ZK_OK && (size_t)snprintf(out, cap, "%s", lh->server) >= cap)
        rc = ZK_EBADARGUMENTS;
    pthread_mutex_unlock(&lh->mu);
    return rc;
}

void larch_disconnect(struct larch *lh)
{
    pthread_mutex_lock(&lh->mu);
    lh->drop_conn = true;
    pthread_mutex_unlock(&lh->mu);
    lc_wake_io(lh);
}

/* ---- building and submitting requests ------------------------------------------------- */

/* A request with its frame started: length, xid 0 (submit patches in the
 * real one under the lock, so xids go out in queue order), the opcode. */
static struct lc_req *req_new(enum lc_kind kind, int32_t op)
{
    struct lc_req *r = calloc(1, sizeof *r);
    if (r == NULL)
        return NULL;
    r->kind = kind;
    r->op = op;
    r->wkind = LC_W_NONE;
    zk_wbuf_init(&r->frame);
    zk_frame_begin(&r->frame);
    struct zk_request_header h = { .xid = 0, .type = op };
    zk_put_request_header(&r->frame, &h);
    return r;
}

/* Finishes r's frame with its xid and queues it; on error r is freed and
 * the code returned. Takes ownership of r. */
static int submit(struct larch *lh, struct lc_req *r)
{
    zk_frame_end(&r->frame, 0);
    if (r->frame.err) {
        lc_req_free(r);
        return ZK_ESYSTEMERROR;
    }
    if (r->frame.len > (size_t)ZK_MAX_BUFFER_DEFAULT) {
        lc_req_free(r);
        return ZK_EBADARGUMENTS; /* the server would drop the connection */
    }
    pthread_mutex_lock(&lh->mu);
    int rc = terminal_error(lh->state);
    if (rc == ZK_OK && lh->stop_io)
        rc = LARCH_ECLOSING;
    if (rc != ZK_OK) {
        pthread_mutex_unlock(&lh->mu);
        lc_req_free(r);
        return rc;
    }
    if (r->kind == LC_AUTH) {
        r->xid = ZK_XID_AUTH;
    } else {
        r->xid = lh->next_xid;
        lh->next_xid = lh->next_xid == INT32_MAX ? 1 : lh->next_xid + 1;
    }
    base_put_be32(r->frame.p + 4, (uint32_t)r->xid);
    if (lh->send_tail != NULL)
        lh->send_tail->next = r;
    else
        lh->send_head = r;
    lh->send_tail = r;
    pthread_mutex_unlock(&lh->mu);
    lc_wake_io(lh);
    return ZK_OK;
}

/* Submits r and waits for its reply, decoded into rep (free with
 * lc_reply_free). Returns the reply's error code. */
static int call(struct larch *lh, struct lc_req *r, struct lc_reply *rep)
{
    struct lc_sync s = { .done = false };
    r->sync = &s;
    *rep = (struct lc_reply){ .data_len = -1 };
    int rc = submit(lh, r);
    if (rc != ZK_OK) {
        rep->err = rc;
        return rc;
    }
    pthread_mutex_lock(&lh->mu);
    while (!s.done)
        pthread_cond_wait(&lh->cv, &lh->mu);
    pthread_mutex_unlock(&lh->mu);
    lc_reply_decode(r, lh->hosts.chroot, rep);
    lc_req_free(r);
    return rep->err;
}

/* Submits r for done on the event thread. */
static int call_async(struct larch *lh, struct lc_req *r, larch_done_fn done, void *ctx)
{
    r->done = done;
    r->ctx = ctx;
    return submit(lh, r);
}

/* Appends the chroot-qualified path; false when path is invalid. */
static bool put_path(struct larch *lh, struct lc_req *r, const char *path, bool sequential)
{
    if (!larch_path_valid(path, sequential))
        return false;
    char *full = lc_chroot_add(lh->hosts.chroot, path);
    if (full == NULL) {
        r->frame.err = true;
        return true;
    }
    zk_put_str(&r->frame, zk_str_c(full));
    free(full);
    return true;
}

/* Remembers the watch a successful reply should register. */
static bool set_watch(struct lc_req *r, enum lc_wkind kind, const char *path, larch_watch_fn w,
                      void *wctx)
{
    if (w == NULL)
        return true;
    r->wkind = kind;
    r->wfn = w;
    r->wctx = wctx;
    r->wpath = strdup(path);
    return r->wpath != NULL;
}

static bool mode_valid(int32_t mode)
{
    return mode >= ZK_PERSISTENT && mode <= ZK_PERSISTENT_SEQUENTIAL_WITH_TTL;
}

static bool mode_sequential(int32_t mode)
{
    return mode == ZK_PERSISTENT_SEQUENTIAL || mode == ZK_EPHEMERAL_SEQUENTIAL ||
           mode == ZK_PERSISTENT_SEQUENTIAL_WITH_TTL;
}

static struct lc_req *build_create(struct larch *lh, const char *path, const void *data,
                                   int32_t len, const struct larch_acl_list *acl, int32_t mode,
                                   int64_t ttl_ms, int *err)
{
    *err = ZK_EBADARGUMENTS;
    if (!mode_valid(mode) || (data == NULL && len > 0) || len < -1)
        return NULL;
    int32_t op = lc_create_op(mode);
    if ((op == ZK_OP_CREATETTL) != (ttl_ms > 0))
        return NULL; /* TTL modes need a TTL, the others take none */
    struct lc_req *r = req_new(LC_CREATE, op);
    *err = ZK_ESYSTEMERROR;
    if (r == NULL)
        return NULL;
    if (!put_path(lh, r, path, mode_sequential(mode))) {
        lc_req_free(r);
        *err = ZK_EBADARGUMENTS;
        return NULL;
    }
    zk_put_bytes(&r->frame, data, data != NULL ? len : -1);
    lc_put_acl(&r->frame, acl);
    zk_put_i32(&r->frame, mode);
    if (op == ZK_OP_CREATETTL)
        zk_put_i64(&r->frame, ttl_ms);
    *err = ZK_OK;
    return r;
}

/* A request carrying only a path and a watch flag (exists, getData, getChildren2). */
static struct lc_req *build_path_watch(struct larch *lh, enum lc_kind kind, int32_t op,
                                       enum lc_wkind wkind, const char *path, larch_watch_fn w,
                                       void *wctx, int *err)
{
    struct lc_req *r = req_new(kind, op);
    *err = ZK_ESYSTEMERROR;
    if (r == NULL)
        return NULL;
    if (!put_path(lh, r, path, false)) {
        lc_req_free(r);
        *err = ZK_EBADARGUMENTS;
        return NULL;
    }
    zk_put_bool(&r->frame, w != NULL);
    if (!set_watch(r, wkind, path, w, wctx)) {
        lc_req_free(r);
        return NULL;
    }
    *err = ZK_OK;
    return r;
}

/* A request with a path and nothing else, or a path and an int. */
static struct lc_req *build_path(struct larch *lh, enum lc_kind kind, int32_t op, const char *path,
                                 bool with_int, int32_t v, int *err)
{
    struct lc_req *r = req_new(kind, op);
    *err = ZK_ESYSTEMERROR;
    if (r == NULL)
        return NULL;
    if (!put_path(lh, r, path, false)) {
        lc_req_free(r);
        *err = ZK_EBADARGUMENTS;
        return NULL;
    }
    if (with_int)
        zk_put_i32(&r->frame, v);
    *err = ZK_OK;
    return r;
}

static struct lc_req *build_set(struct larch *lh, const char *path, const void *data, int32_t len,
                                int32_t version, int *err)
{
    *err = ZK_EBADARGUMENTS;
    if ((data == NULL && len > 0) || len < -1)
        return NULL;
    struct lc_req *r = build_path(lh, LC_SET, ZK_OP_SETDATA, path, false, 0, err);
    if (r == NULL)
        return NULL;
    zk_put_bytes(&r->frame, data, data != NULL ? len : -1);
    zk_put_i32(&r->frame, version);
    return r;
}

static struct lc_req *build_setacl(struct larch *lh, const char *path, int32_t version,
                                   const struct larch_acl_list *acl, int *err)
{
    *err = ZK_EBADARGUMENTS;
    if (acl == NULL || acl->count <= 0)
        return NULL; /* ZooKeeper refuses an empty ACL (InvalidACL) before sending */
    struct lc_req *r = build_path(lh, LC_SETACL, ZK_OP_SETACL, path, false, 0, err);
    if (r == NULL)
        return NULL;
    lc_put_acl(&r->frame, acl);
    zk_put_i32(&r->frame, version);
    return r;
}

static struct lc_req *build_multi(struct larch *lh, const struct larch_op *ops, int32_t n, int *err)
{
    *err = ZK_EBADARGUMENTS;
    if (n < 0 || (n > 0 && ops == NULL))
        return NULL;
    struct lc_req *r = req_new(LC_MULTI, ZK_OP_MULTI);
    *err = ZK_ESYSTEMERROR;
    if (r == NULL)
        return NULL;
    for (int32_t i = 0; i < n; i++) {
        if (ops[i].type == ZK_OP_CREATE &&
            (!mode_valid(ops[i].mode) ||
             (lc_create_op(ops[i].mode) == ZK_OP_CREATETTL) != (ops[i].ttl_ms > 0))) {
            *err = ZK_EBADARGUMENTS;
            break;
        }
        *err = lc_put_multi_op(&r->frame, &ops[i], lh->hosts.chroot);
        if (*err != ZK_OK)
            break;
        *err = ZK_ESYSTEMERROR;
        if (i == n - 1)
            *err = ZK_OK;
    }
    if (n == 0)
        *err = ZK_OK;
    if (*err != ZK_OK) {
        lc_req_free(r);
        return NULL;
    }
    zk_put_multi_end(&r->frame);
    return r;
}

/* Runs a built request (or returns err when building it failed) and copies
 * the reply's Stat, for the calls that return nothing else. */
static int call_stat(struct larch *lh, struct lc_req *r, int err, struct zk_stat *stat)
{
    if (r == NULL)
        return err;
    struct lc_reply rep;
    int rc = call(lh, r, &rep);
    if (rc == ZK_OK && stat != NULL && rep.has_stat)
        *stat = rep.stat;
    lc_reply_free(&rep);
    return rc;
}

/* ---- synchronous API ------------------------------------------------------------------ */

int larch_create(struct larch *lh, const char *path, const void *data, int32_t len,
                 const struct larch_acl_list *acl, int32_t mode, int64_t ttl_ms, char **created,
                 struct zk_stat *stat)
{
    if (created != NULL)
        *created = NULL;
    int err;
    struct lc_req *r = build_create(lh, path, data, len, acl, mode, ttl_ms, &err);
    if (r == NULL)
        return err;
    struct lc_reply rep;
    int rc = call(lh, r, &rep);
    if (rc == ZK_OK && created != NULL) {
        *created = rep.path;
        rep.path = NULL;
    }
    if (rc == ZK_OK && stat != NULL)
        *stat = rep.stat;
    lc_reply_free(&rep);
    return rc;
}

int larch_delete(struct larch *lh, const char *path, int32_t version)
{
    int err;
    struct lc_req *r = build_path(lh, LC_DELETE, ZK_OP_DELETE, path, true, version, &err);
    return call_stat(lh, r, err, NULL);
}

int larch_exists(struct larch *lh, const char *path, larch_watch_fn w, void *wctx,
                 struct zk_stat *stat)
{
    int err;
    struct lc_req *r =
        build_path_watch(lh, LC_EXISTS, ZK_OP_EXISTS, LC_W_DATA, path, w, wctx, &err);
    return call_stat(lh, r, err, stat);
}

int larch_get(struct larch *lh, const char *path, larch_watch_fn w, void *wctx, char **data,
              int32_t *len, struct zk_stat *stat)
{
    if (data != NULL)
        *data = NULL;
    if (len != NULL)
        *len = -1;
    int err;
    struct lc_req *r =
        build_path_watch(lh, LC_GET, ZK_OP_GETDATA, LC_W_DATA, path, w, wctx, &err);
    if (r == NULL)
        return err;
    struct lc_reply rep;
    int rc = call(lh, r, &rep);
    return lc_reply_take_data(&rep, rc, data, len, stat);
}

int larch_set(struct larch *lh, const char *path, const void *data, int32_t len, int32_t version,
              struct zk_stat *stat)
{
    int err;
    struct lc_req *r = build_set(lh, path, data, len, version, &err);
    return call_stat(lh, r, err, stat);
}

int larch_get_children(struct larch *lh, const char *path, larch_watch_fn w, void *wctx,
                       struct larch_strings *children, struct zk_stat *stat)
{
    if (children != NULL)
        *children = (struct larch_strings){ 0 };
    int err;
    struct lc_req *r =
        build_path_watch(lh, LC_CHILDREN, ZK_OP_GETCHILDREN2, LC_W_CHILD, path, w, wctx, &err);
    if (r == NULL)
        return err;
    struct lc_reply rep;
    int rc = call(lh, r, &rep);
    return lc_reply_take_children(&rep, rc, children, stat);
}

int larch_get_acl(struct larch *lh, const char *path, struct larch_acl_list *acl,
                  struct zk_stat *stat)
{
    if (acl != NULL)
        *acl = (struct larch_acl_list){ 0 };
    int err;
    struct lc_req *r = build_path(lh, LC_GETACL, ZK_OP_GETACL, path, false, 0, &err);
    if (r == NULL)
        return err;
    struct lc_reply rep;
    int rc = call(lh, r, &rep);
    if (rc == ZK_OK && acl != NULL) {
        *acl = rep.acl;
        rep.acl = (struct larch_acl_list){ 0 };
    }
    if (rc == ZK_OK && stat != NULL)
        *stat = rep.stat;
    lc_reply_free(&rep);
    return rc;
}

int larch_set_acl(struct larch *lh, const char *path, int32_t version,
                  const struct larch_acl_list *acl)
{
    int err;
    struct lc_req *r = build_setacl(lh, path, version, acl, &err);
    return call_stat(lh, r, err, NULL);
}

int larch_sync(struct larch *lh, const char *path)
{
    int err;
    struct lc_req *r = build_path(lh, LC_SYNC, ZK_OP_SYNC, path, false, 0, &err);
    return call_stat(lh, r, err, NULL);
}

/* Remembers credentials for every later reconnect. mu held. */
static int remember_auth(struct larch *lh, const char *scheme, const void *cred, int32_t len)
{
    struct lc_auth *a = calloc(1, sizeof *a);
    if (a == NULL)
        return -1;
    a->scheme = strdup(scheme);
    a->cred = malloc(len > 0 ? (size_t)len : 1);
    if (a->scheme == NULL || a->cred == NULL) {
        free(a->scheme);
        free(a->cred);
        free(a);
        return -1;
    }
    if (len > 0)
        memcpy(a->cred, cred, (size_t)len);
    a->len = len;
    struct lc_auth **tail = &lh->auths;
    while (*tail != NULL)
        tail = &(*tail)->next;
    *tail = a;
    return 0;
}

int larch_add_auth(struct larch *lh, const char *scheme, const void *cred, int32_t len)
{
    if (scheme == NULL || scheme[0] == '\0' || len < 0 || (cred == NULL && len > 0))
        return ZK_EBADARGUMENTS;
    struct lc_req *r = req_new(LC_AUTH, ZK_OP_AUTH);
    if (r == NULL)
        return ZK_ESYSTEMERROR;
    struct zk_auth_packet p = { .type = 0, .scheme = zk_str_c(scheme),
                                .auth = { (const char *)cred, len } };
    zk_put_auth_packet(&r->frame, &p);
    pthread_mutex_lock(&lh->mu);
    int rc = remember_auth(lh, scheme, cred, len);
    pthread_mutex_unlock(&lh->mu);
    if (rc != 0) {
        lc_req_free(r);
        return ZK_ESYSTEMERROR;
    }
    return call_stat(lh, r, ZK_OK, NULL);
}

int larch_add_watch(struct larch *lh, const char *path, int32_t mode, larch_watch_fn w,
                    void *wctx)
{
    if (w == NULL ||
        (mode != ZK_ADD_WATCH_PERSISTENT && mode != ZK_ADD_WATCH_PERSISTENT_RECURSIVE))
        return ZK_EBADARGUMENTS;
    int err;
    struct lc_req *r = build_path(lh, LC_ADDWATCH, ZK_OP_ADDWATCH, path, true, mode, &err);
    if (r == NULL)
        return err;
    if (!set_watch(r, mode == ZK_ADD_WATCH_PERSISTENT ? LC_W_PERSISTENT : LC_W_RECURSIVE, path, w,
                   wctx)) {
        lc_req_free(r);
        return ZK_ESYSTEMERROR;
    }
    return call_stat(lh, r, ZK_OK, NULL);
}

/* The registry kinds a removeWatches type covers (WatcherType). */
static unsigned kinds_of_type(int32_t type)
{
    switch (type) {
    case ZK_WATCHER_CHILDREN:
        return 1u << LC_W_CHILD;
    case ZK_WATCHER_DATA:
        return 1u << LC_W_DATA | 1u << LC_W_EXIST;
    case ZK_WATCHER_ANY:
        return 1u << LC_W_DATA | 1u << LC_W_EXIST | 1u << LC_W_CHILD | 1u << LC_W_PERSISTENT |
               1u << LC_W_RECURSIVE;
    default:
        return 0;
    }
}

static int32_t removed_event_of(enum lc_wkind k)
{
    switch (k) {
    case LC_W_CHILD:
        return ZK_EVENT_CHILD_WATCH_REMOVED;
    case LC_W_PERSISTENT:
    case LC_W_RECURSIVE:
        return ZK_EVENT_PERSISTENT_WATCH_REMOVED;
    default:
        return ZK_EVENT_DATA_WATCH_REMOVED;
    }
}

/* Whether removing the matching watchers leaves none of a kind the server
 * tracks on path, so the server must be told. mu held. */
static bool server_must_forget(struct larch *lh, unsigned mask, const char *path, larch_watch_fn w,
                               void *wctx)
{
    for (int k = 0; k < LC_W_KINDS; k++) {
        enum lc_wkind kind = (enum lc_wkind)k;
        if ((mask & (1u << k)) && lc_watches_count(&lh->watches, kind, path, w, wctx) > 0 &&
            (w == NULL || lc_watches_count(&lh->watches, kind, path, NULL, NULL) == 1))
            return true;
    }
    return false;
}

/* Removes the matching watchers locally and queues their *_REMOVED events.
 * Returns how many were removed. mu held. */
static size_t remove_local(struct larch *lh, unsigned mask, const char *path, larch_watch_fn w,
                           void *wctx)
{
    size_t removed = 0;
    for (int k = 0; k < LC_W_KINDS; k++) {
        if (!(mask & (1u << k)))
            continue;
        struct lc_wset set = { 0 };
        if (lc_watches_remove(&lh->watches, 1u << k, path, w, wctx, &set) == 0 && set.count > 0) {
            lc_queue_event(lh, &set, removed_event_of((enum lc_wkind)k), ZK_STATE_SYNC_CONNECTED,
                           path);
            removed += set.count;
        }
        lc_wset_free(&set);
    }
    return removed;
}

static bool has_match(struct larch *lh, unsigned mask, const char *path, larch_watch_fn w,
                      void *wctx)
{
    for (int k = 0; k < LC_W_KINDS; k++) {
        if ((mask & (1u << k)) &&
            lc_watches_count(&lh->watches, (enum lc_wkind)k, path, w, wctx) > 0)
            return true;
    }
    return false;
}

int larch_remove_watches(struct larch *lh, const char *path, int32_t type, larch_watch_fn w,
                         void *wctx, bool local)
{
    unsigned mask = kinds_of_type(type);
    if (mask == 0 || !larch_path_valid(path, false))
        return ZK_EBADARGUMENTS;
    pthread_mutex_lock(&lh->mu);
    bool any = has_match(lh, mask, path, w, wctx);
    bool tell = any && !local && server_must_forget(lh, mask, path, w, wctx);
    pthread_mutex_unlock(&lh->mu);
    if (!any)
        return ZK_ENOWATCHER;
    if (tell) {
        int err;
        struct lc_req *r =
            build_path(lh, LC_REMOVEWATCHES, ZK_OP_REMOVEWATCHES, path, true, type, &err);
        int rc = call_stat(lh, r, err, NULL);
        /* NOWATCHER: the server's watch already fired; ours is stale */
        if (rc != ZK_OK && rc != ZK_ENOWATCHER)
            return rc;
    }
    pthread_mutex_lock(&lh->mu);
    size_t removed = remove_local(lh, mask, path, w, wctx);
    pthread_mutex_unlock(&lh->mu);
    return removed > 0 ? ZK_OK : ZK_ENOWATCHER;
}

int larch_get_ephemerals(struct larch *lh, const char *prefix, struct larch_strings *paths)
{
    if (paths != NULL)
        *paths = (struct larch_strings){ 0 };
    int err;
    struct lc_req *r = build_path(lh, LC_EPHEMERALS, ZK_OP_GETEPHEMERALS, prefix, false, 0, &err);
    if (r == NULL)
        return err;
    struct lc_reply rep;
    int rc = call(lh, r, &rep);
    if (rc == ZK_OK && paths != NULL) {
        *paths = rep.strings;
        rep.strings = (struct larch_strings){ 0 };
    }
    lc_reply_free(&rep);
    return rc;
}

int larch_get_all_children_number(struct larch *lh, const char *path, int32_t *number)
{
    int err;
    struct lc_req *r =
        build_path(lh, LC_CHILDCOUNT, ZK_OP_GETALLCHILDRENNUMBER, path, false, 0, &err);
    if (r == NULL)
        return err;
    struct lc_reply rep;
    int rc = call(lh, r, &rep);
    if (rc == ZK_OK && number != NULL)
        *number = rep.number;
    lc_reply_free(&rep);
    return rc;
}

/* ---- multi ------------------------------------------------------------------------- */

struct larch_op larch_op_create(const char *path, const void *data, int32_t len,
                                const struct larch_acl_list *acl, int32_t mode)
{
    return (struct larch_op){ .type = ZK_OP_CREATE, .path = path, .data = data, .len = len,
                              .acl = acl, .mode = mode, .version = -1 };
}

struct larch_op larch_op_delete(const char *path, int32_t version)
{
    return (struct larch_op){ .type = ZK_OP_DELETE, .path = path, .version = version };
}

struct larch_op larch_op_set(const char *path, const void *data, int32_t len, int32_t version)
{
    return (struct larch_op){ .type = ZK_OP_SETDATA, .path = path, .data = data, .len = len,
                              .version = version };
}

struct larch_op larch_op_check(const char *path, int32_t version)
{
    return (struct larch_op){ .type = ZK_OP_CHECK, .path = path, .version = version };
}

int larch_multi(struct larch *lh, const struct larch_op *ops, int32_t n,
                struct larch_op_result *results)
{
    for (int32_t i = 0; results != NULL && i < n; i++)
        results[i] = (struct larch_op_result){ .err = ZK_ERUNTIMEINCONSISTENCY };
    int err;
    struct lc_req *r = build_multi(lh, ops, n, &err);
    if (r == NULL)
        return err;
    struct lc_reply rep;
    int rc = call(lh, r, &rep);
    if (rep.nresults != n && (rc == ZK_OK || rep.nresults > 0))
        rc = rep.err = ZK_EMARSHALLINGERROR; /* one result per op, or the reply is not ours */
    for (int32_t i = 0; results != NULL && i < n && i < rep.nresults; i++) {
        results[i] = rep.results[i];
        rep.results[i].path = NULL;
    }
    lc_reply_free(&rep);
    return rc;
}

/* ---- asynchronous API --------------------------------------------------------------------- */

int larch_acreate(struct larch *lh, const char *path, const void *data, int32_t len,
                  const struct larch_acl_list *acl, int32_t mode, int64_t ttl_ms,
                  larch_done_fn done, void *ctx)
{
    int err;
    struct lc_req *r = build_create(lh, path, data, len, acl, mode, ttl_ms, &err);
    return r != NULL ? call_async(lh, r, done, ctx) : err;
}

int larch_adelete(struct larch *lh, const char *path, int32_t version, larch_done_fn done,
                  void *ctx)
{
    int err;
    struct lc_req *r = build_path(lh, LC_DELETE, ZK_OP_DELETE, path, true, version, &err);
    return r != NULL ? call_async(lh, r, done, ctx) : err;
}

int larch_aexists(struct larch *lh, const char *path, larch_watch_fn w, void *wctx,
                  larch_done_fn done, void *ctx)
{
    int err;
    struct lc_req *r =
        build_path_watch(lh, LC_EXISTS, ZK_OP_EXISTS, LC_W_DATA, path, w, wctx, &err);
    return r != NULL ? call_async(lh, r, done, ctx) : err;
}

int larch_aget(struct larch *lh, const char *path, larch_watch_fn w, void *wctx,
               larch_done_fn done, void *ctx)
{
    int err;
    struct lc_req *r =
        build_path_watch(lh, LC_GET, ZK_OP_GETDATA, LC_W_DATA, path, w, wctx, &err);
    return r != NULL ? call_async(lh, r, done, ctx) : err;
}

int larch_aset(struct larch *lh, const char *path, const void *data, int32_t len,
               int32_t version, larch_done_fn done, void *ctx)
{
    int err;
    struct lc_req *r = build_set(lh, path, data, len, version, &err);
    return r != NULL ? call_async(lh, r, done, ctx) : err;
}

int larch_aget_children(struct larch *lh, const char *path, larch_watch_fn w, void *wctx,
                        larch_done_fn done, void *ctx)
{
    int err;
    struct lc_req *r =
        build_path_watch(lh, LC_CHILDREN, ZK_OP_GETCHILDREN2, LC_W_CHILD, path, w, wctx, &err);
    return r != NULL ? call_async(lh, r, done, ctx) : err;
}

int larch_aget_acl(struct larch *lh, const char *path, larch_done_fn done, void *ctx)
{
    int err;
    struct lc_req *r = build_path(lh, LC_GETACL, ZK_OP_GETACL, path, false, 0, &err);
    return r != NULL ? call_async(lh, r, done, ctx) : err;
}

int larch_aset_acl(struct larch *lh, const char *path, int32_t version,
                   const struct larch_acl_list *acl, larch_done_fn done, void *ctx)
{
    int err;
    struct lc_req *r = build_setacl(lh, path, version, acl, &err);
    return r != NULL ? call_async(lh, r, done, ctx) : err;
}

int larch_async(struct larch *lh, const char *path, larch_done_fn done, void *ctx)
{
    int err;
    struct lc_req *r = build_path(lh, LC_SYNC, ZK_OP_SYNC, path, false, 0, &err);
    return r != NULL ? call_async(lh, r, done, ctx) : err;
}

int larch_amulti(struct larch *lh, const struct larch_op *ops, int32_t n, larch_done_fn done,
                 void *ctx)
{
    int err;
    struct lc_req *r = build_multi(lh, ops, n, &err);
    return r != NULL ? call_async(lh, r, done, ctx) : err;
}

/* ---- shutdown -------------------------------------------------------------------------- */

/* Sends closeSession and waits a bounded time for its reply. */
static int close_session(struct larch *lh)
{
    pthread_mutex_lock(&lh->mu);
    bool up = connected(lh->state);
    pthread_mutex_unlock(&lh->mu);
    if (!up)
        return ZK_ECONNECTIONLOSS;
    struct lc_req *r = req_new(LC_CLOSE, ZK_OP_CLOSESESSION);
    if (r == NULL)
        return ZK_ESYSTEMERROR;
    struct lc_sync s = { .done = false };
    r->sync = &s;
    int rc = submit(lh, r);
    if (rc != ZK_OK)
        return rc;
    struct timespec ts = base_deadline(CLOCK_MONOTONIC, CLOSE_WAIT_MS);
    pthread_mutex_lock(&lh->mu);
    int w = 0;
    while (!s.done && w != ETIMEDOUT)
        w = pthread_cond_timedwait(&lh->cv, &lh->mu, &ts);
    bool done = s.done;
    pthread_mutex_unlock(&lh->mu);
    if (!done) {
        /* stopping the I/O thread fails r; only then may it be freed */
        pthread_mutex_lock(&lh->mu);
        lh->stop_io = true;
        pthread_mutex_unlock(&lh->mu);
        lc_wake_io(lh);
        pthread_join(lh->io_thread, NULL);
        lh->io_joined = true;
    }
    rc = r->err;
    lc_req_free(r);
    return rc;
}

static int shut_down(struct larch *lh, bool end_session)
{
    int rc = end_session ? close_session(lh) : ZK_OK;
    pthread_mutex_lock(&lh->mu);
    bool io_running = !lh->io_joined;
    lh->stop_io = true;
    pthread_cond_broadcast(&lh->cv);
    pthread_mutex_unlock(&lh->mu);
    lc_wake_io(lh);
    if (io_running)
        pthread_join(lh->io_thread, NULL);
    pthread_mutex_lock(&lh->mu);
    lc_fail_all(lh, LARCH_ECLOSING);
    lh->stop_ev = true;
    pthread_cond_signal(&lh->ev_cv);
    pthread_mutex_unlock(&lh->mu);
    pthread_join(lh->ev_thread, NULL);
    handle_free(lh);
    return rc;
}
