/* rt.c — see rt.h. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/recipes/rt.h"

const char *rt_hosts(void)
{
    const char *h = getenv("LARCH_HOSTS");
    if (h == NULL || h[0] == '\0') {
        fprintf(stderr, "LARCH_HOSTS is not set: run me through "
                        "tests/integration/test_recipes.py or set it to host:port\n");
        exit(2);
    }
    return h;
}

struct larch *rt_open_timeout(int32_t session_timeout_ms)
{
    struct larch_options opt = { .session_timeout_ms = session_timeout_ms };
    struct larch *lh = NULL;
    assert_int_equal(larch_open(&lh, rt_hosts(), &opt), ZK_OK);
    assert_int_equal(larch_wait_connected(lh, RT_WAIT_MS), ZK_OK);
    return lh;
}

struct larch *rt_open(void)
{
    return rt_open_timeout(RT_SESSION_TIMEOUT_MS);
}

char *rt_root(struct larch *lh, const char *name)
{
    static atomic_int counter;
    char path[256];
    snprintf(path, sizeof path, "/rt-%s-%ld-%d", name, (long)getpid(),
             atomic_fetch_add(&counter, 1));
    int rc = rt_create(lh, path, NULL, -1, NULL, ZK_PERSISTENT, NULL, NULL);
    assert_int_equal(rc, ZK_OK);
    char *out = strdup(path);
    assert_non_null(out);
    return out;
}

int rt_delete_tree(struct larch *lh, const char *path)
{
    /* NOTEMPTY: a child this listing missed (another session's create
     * racing the cleanup); list again, a bounded number of times */
    int rc = ZK_ENOTEMPTY;
    for (int round = 0; round < 10 && rc == ZK_ENOTEMPTY; round++) {
        struct larch_strings kids = { 0 };
        rc = rt_children(lh, path, &kids, NULL);
        if (rc == ZK_ENONODE)
            return ZK_OK;
        for (int32_t i = 0; rc == ZK_OK && i < kids.count; i++) {
            char *child = larch_path_join(path, kids.items[i]);
            rc = child != NULL ? rt_delete_tree(lh, child) : ZK_ESYSTEMERROR;
            free(child);
        }
        larch_strings_free(&kids);
        if (rc == ZK_OK)
            rc = rt_delete(lh, path, -1);
    }
    return rc == ZK_ENONODE ? ZK_OK : rc;
}

void rt_sleep_ms(int64_t ms)
{
    struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000 };
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* ---- the tests' own calls ---------------------------------------------------- */

static bool outcome_unknown(int rc)
{
    return rc == ZK_ECONNECTIONLOSS || rc == ZK_ESESSIONMOVED;
}

bool rt_retry(struct larch *lh, int rc, int64_t *deadline_ms)
{
    if (!outcome_unknown(rc))
        return false;
    if (*deadline_ms == 0)
        *deadline_ms = base_mono_ms() + RT_WAIT_MS;
    /* a short pause, so a connection that is failing but not yet marked
     * lost does not turn the retries into a busy loop */
    rt_sleep_ms(10);
    int64_t left = *deadline_ms - base_mono_ms();
    return left > 0 && larch_wait_connected(lh, (int32_t)left) == ZK_OK;
}

int rt_sync(struct larch *lh, const char *path)
{
    int rc;
    RT_CALL(rc, lh, larch_sync(lh, path));
    return rc;
}

/* sync, then the read; a sync that fails retries the pair. */
static int synced_exists(struct larch *lh, const char *path, struct zk_stat *stat)
{
    int rc = larch_sync(lh, path);
    return rc == ZK_OK ? larch_exists(lh, path, NULL, NULL, stat) : rc;
}

int rt_exists(struct larch *lh, const char *path, struct zk_stat *stat)
{
    int rc;
    RT_CALL(rc, lh, synced_exists(lh, path, stat));
    return rc;
}

static int synced_get(struct larch *lh, const char *path, char **data, int32_t *len,
                      struct zk_stat *stat)
{
    int rc = larch_sync(lh, path);
    return rc == ZK_OK ? larch_get(lh, path, NULL, NULL, data, len, stat) : rc;
}

int rt_get(struct larch *lh, const char *path, char **data, int32_t *len, struct zk_stat *stat)
{
    int rc;
    RT_CALL(rc, lh, synced_get(lh, path, data, len, stat));
    return rc;
}

static int synced_children(struct larch *lh, const char *path, struct larch_strings *kids,
                           struct zk_stat *stat)
{
    *kids = (struct larch_strings){ 0 };
    int rc = larch_sync(lh, path);
    return rc == ZK_OK ? larch_get_children(lh, path, NULL, NULL, kids, stat) : rc;
}

int rt_children(struct larch *lh, const char *path, struct larch_strings *kids,
                struct zk_stat *stat)
{
    int rc;
    RT_CALL(rc, lh, synced_children(lh, path, kids, stat));
    return rc;
}

static bool sequential(int32_t mode)
{
    return mode == ZK_PERSISTENT_SEQUENTIAL || mode == ZK_EPHEMERAL_SEQUENTIAL ||
           mode == ZK_PERSISTENT_SEQUENTIAL_WITH_TTL;
}

/* After a lost sequential create of path: the child of its parent whose
 * name starts with path's last component (malloc'd full path), NULL when
 * there is none; *rc gets the listing's error. */
static char *find_sequential(struct larch *lh, const char *path, int *rc)
{
    const char *slash = strrchr(path, '/');
    char *parent = strndup(path, slash == path ? 1 : (size_t)(slash - path));
    char *found = NULL;
    struct larch_strings kids = { 0 };
    *rc = parent != NULL ? rt_children(lh, parent, &kids, NULL) : ZK_ESYSTEMERROR;
    for (int32_t i = 0; *rc == ZK_OK && found == NULL && i < kids.count; i++) {
        if (rt_has_prefix(kids.items[i], slash + 1) &&
            larch_sequence_of(kids.items[i]) >= 0 &&
            strlen(kids.items[i]) == strlen(slash + 1) + 10)
            found = larch_path_join(parent, kids.items[i]);
    }
    larch_strings_free(&kids);
    free(parent);
    return found;
}

int rt_create(struct larch *lh, const char *path, const void *data, int32_t len,
              const struct larch_acl_list *acl, int32_t mode, char **created,
              struct zk_stat *stat)
{
    int64_t deadline = 0;
    bool lost = false, recovered = false;
    char *made = NULL;
    int rc;
    for (;;) {
        if (lost && sequential(mode)) {
            made = find_sequential(lh, path, &rc);
            recovered = made != NULL; /* our lost try made it */
            if (rc != ZK_OK || recovered)
                break;
        }
        rc = larch_create(lh, path, data, len, acl, mode, 0, created != NULL ? &made : NULL,
                          stat);
        if (rc == ZK_ENODEEXISTS && lost && !sequential(mode)) {
            made = strdup(path); /* our lost try made it: the name is ours alone */
            recovered = true;
            rc = made != NULL ? ZK_OK : ZK_ESYSTEMERROR;
            break;
        }
        if (!rt_retry(lh, rc, &deadline))
            break;
        lost = true;
        free(made);
        made = NULL;
    }
    if (rc == ZK_OK && recovered && stat != NULL)
        rc = rt_exists(lh, made, stat);
    if (rc == ZK_OK && created != NULL)
        *created = made;
    else
        free(made);
    return rc;
}

int rt_delete(struct larch *lh, const char *path, int32_t version)
{
    int64_t deadline = 0;
    bool lost = false;
    for (;;) {
        int rc = larch_delete(lh, path, version);
        if (rc == ZK_ENONODE && lost)
            return ZK_OK; /* our lost try applied */
        if (!rt_retry(lh, rc, &deadline))
            return rc;
        lost = true;
    }
}

int rt_set(struct larch *lh, const char *path, const void *data, int32_t len, int32_t version,
           struct zk_stat *stat)
{
    int64_t deadline = 0;
    bool lost = false;
    for (;;) {
        int rc = larch_set(lh, path, data, len, version, stat);
        if (rc == ZK_EBADVERSION && lost && version >= 0) {
            char *cur = NULL;
            int32_t clen = -1;
            struct zk_stat st;
            rc = rt_get(lh, path, &cur, &clen, &st);
            bool ours = rc == ZK_OK && st.version == version + 1 && clen == (data ? len : -1) &&
                        (clen <= 0 || memcmp(cur, data, (size_t)clen) == 0);
            free(cur);
            if (rc == ZK_OK && ours && stat != NULL)
                *stat = st;
            return rc == ZK_OK && !ours ? ZK_EBADVERSION : rc;
        }
        if (!rt_retry(lh, rc, &deadline))
            return rc;
        lost = true;
    }
}

int rt_close(struct larch *lh)
{
    int64_t sid = larch_session_id(lh);
    struct larch_options opt = { .session_timeout_ms = larch_session_timeout(lh),
                                 .session_id = sid };
    larch_session_passwd(lh, opt.passwd);
    if (opt.session_timeout_ms <= 0)
        opt.session_timeout_ms = RT_SESSION_TIMEOUT_MS;
    int rc = larch_close(lh);
    for (int64_t end = base_mono_ms() + RT_WAIT_MS;
         outcome_unknown(rc) && sid != 0 && base_mono_ms() < end;) {
        struct larch *again = NULL;
        if (larch_open(&again, rt_hosts(), &opt) != ZK_OK)
            break;
        int wc = larch_wait_connected(again, (int32_t)(end - base_mono_ms()));
        if (wc == ZK_OK) {
            rc = larch_close(again);
            continue;
        }
        larch_close(again);
        /* SESSIONEXPIRED: the server no longer has it, closed */
        rc = wc == ZK_ESESSIONEXPIRED ? ZK_OK : wc;
    }
    return rc;
}

char *rt_path(const char *parent, const char *name)
{
    char *p = larch_path_join(parent, name);
    assert_non_null(p);
    return p;
}

bool rt_eventually(bool (*cond)(void *), void *arg)
{
    for (int64_t end = base_mono_ms() + RT_WAIT_MS; base_mono_ms() < end; rt_sleep_ms(5)) {
        if (cond(arg))
            return true;
    }
    return cond(arg);
}

bool rt_await_flag(atomic_bool *flag)
{
    for (int64_t end = base_mono_ms() + RT_WAIT_MS; !atomic_load(flag); rt_sleep_ms(2)) {
        if (base_mono_ms() > end)
            return false;
    }
    return true;
}

int32_t rt_count_children(struct larch *lh, const char *dir)
{
    struct larch_strings kids = { 0 };
    /* other sessions' changes: against an ensemble this client's server may
     * not have applied them yet (ZooKeeper's guarantee is per client), so
     * rt_children syncs first, as a ZooKeeper user must */
    assert_int_equal(rt_children(lh, dir, &kids, NULL), ZK_OK);
    int32_t n = kids.count;
    larch_strings_free(&kids);
    return n;
}

int32_t rt_count_prefixed(struct larch *lh, const char *dir, const char *prefix)
{
    struct larch_strings kids = { 0 };
    /* as rt_count_children: other sessions' changes, on any server */
    int rc = rt_children(lh, dir, &kids, NULL);
    if (rc != ZK_OK)
        return rc == ZK_ENONODE ? 0 : -1;
    int32_t n = 0;
    for (int32_t i = 0; i < kids.count; i++)
        n += rt_has_prefix(kids.items[i], prefix);
    larch_strings_free(&kids);
    return n;
}

bool rt_has_prefix(const char *name, const char *prefix)
{
    return strncmp(name, prefix, strlen(prefix)) == 0;
}

void rt_finish(struct larch *lh, char *root)
{
    assert_int_equal(rt_delete_tree(lh, root), ZK_OK);
    free(root);
    rt_close(lh);
}

/* The child's side of rt_spawn; never returns. */
static void child_main(rt_child_fn child, void *arg, int fd)
{
    struct larch_options opt = { .session_timeout_ms = RT_SESSION_TIMEOUT_MS };
    struct larch *lh = NULL;
    const char *report = NULL;
    if (larch_open(&lh, rt_hosts(), &opt) == ZK_OK && larch_wait_connected(lh, RT_WAIT_MS) == ZK_OK)
        report = child(lh, arg);
    char line[256];
    snprintf(line, sizeof line, "%s\n", report != NULL ? report : "!");
    if (write(fd, line, strlen(line)) != (ssize_t)strlen(line))
        _exit(2);
    for (int64_t end = base_mono_ms() + RT_WAIT_MS; base_mono_ms() < end;) /* bounded */
        rt_sleep_ms(100);
    _exit(1); /* the parent should have killed us long before */
}

/* Reads one line (newline dropped) from fd, each byte within RT_WAIT_MS. */
static void read_line(int fd, char *buf, size_t cap)
{
    size_t n = 0;
    while (n + 1 < cap) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        assert_int_equal(poll(&p, 1, RT_WAIT_MS), 1);
        assert_int_equal(read(fd, buf + n, 1), 1);
        if (buf[n] == '\n')
            break;
        n++;
    }
    buf[n] = '\0';
}

pid_t rt_spawn(rt_child_fn child, void *arg, char *line, size_t cap)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        child_main(child, arg, fds[1]);
    }
    close(fds[1]);
    char report[256];
    read_line(fds[0], report, sizeof report);
    close(fds[0]);
    assert_string_not_equal(report, "!");
    if (line != NULL)
        snprintf(line, cap, "%s", report);
    return pid;
}

void rt_kill(pid_t pid)
{
    assert_int_equal(kill(pid, SIGKILL), 0);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
}

/* ---- rt_check_delivery ----------------------------------------------------- */

#define TAKE_SLICE_MS 200
#define CHAOS_PERIOD_MS 25

/* What the threads of one delivery check share. */
struct delivery {
    const struct rt_queue_ops *ops;
    const char *path;
    int producers, items;
    atomic_int taken;       /* items delivered so far, all consumers */
    atomic_bool chaos_stop; /* tells the disconnect thread to stop */
    pthread_mutex_t mu;
    int *delivered; /* [producer * items + index]: how often it was delivered */
};

/* One producer or consumer; threads never call cmocka. */
struct client {
    struct delivery *d;
    struct larch *lh;
    pthread_t thread;
    int id; /* producer */
    int rc;
    int count;     /* consumer: items taken */
    bool in_order; /* consumer: each producer's items of one priority in order */
    int *last;     /* consumer: [producer * levels + priority], last index seen */
};

static void *produce(void *arg)
{
    struct client *p = arg;
    const struct rt_queue_ops *ops = p->d->ops;
    void *q = NULL;
    p->rc = ops->open(p->lh, p->d->path, &q);
    for (int i = 0; i < p->d->items && p->rc == ZK_OK; i++) {
        char item[32];
        int n = snprintf(item, sizeof item, "%d:%d", p->id, i);
        p->rc = ops->put(q, i % ops->levels, item, n);
    }
    if (q != NULL)
        ops->free(q);
    return NULL;
}

static void record(struct client *c, int priority, const char *data)
{
    struct delivery *d = c->d;
    int pid = -1, idx = -1;
    if (data == NULL || sscanf(data, "%d:%d", &pid, &idx) != 2 || pid < 0 ||
        pid >= d->producers || idx < 0 || idx >= d->items || priority != idx % d->ops->levels) {
        c->in_order = false;
        return;
    }
    int *last = &c->last[pid * d->ops->levels + priority];
    if (idx <= *last)
        c->in_order = false;
    *last = idx;
    c->count++;
    pthread_mutex_lock(&d->mu);
    d->delivered[pid * d->items + idx]++;
    pthread_mutex_unlock(&d->mu);
    atomic_fetch_add(&d->taken, 1);
}

/* Takes until every item was delivered (by anyone), within RT_WAIT_MS. */
static void *consume(void *arg)
{
    struct client *c = arg;
    const struct rt_queue_ops *ops = c->d->ops;
    void *q = NULL;
    c->rc = ops->open(c->lh, c->d->path, &q);
    int total = c->d->producers * c->d->items;
    for (int64_t end = base_mono_ms() + RT_WAIT_MS;
         c->rc == ZK_OK && atomic_load(&c->d->taken) < total && base_mono_ms() < end;) {
        char *data = NULL;
        int32_t len = -1;
        int priority = -1;
        int rc = ops->take(q, &priority, &data, &len, TAKE_SLICE_MS);
        if (rc == ZK_OK)
            record(c, priority, data);
        else if (rc != ZK_EOPERATIONTIMEOUT)
            c->rc = rc;
        free(data);
    }
    if (q != NULL)
        ops->free(q);
    return NULL;
}

struct chaos {
    struct delivery *d;
    struct client *clients;
    int n;
    pthread_t thread;
    int drops;
};

/* Drops one client's connection after another (the GUID rule's recovery
 * paths), bounded by RT_WAIT_MS. */
static void *drop_connections(void *arg)
{
    struct chaos *ch = arg;
    for (int i = 0; !atomic_load(&ch->d->chaos_stop) && i < RT_WAIT_MS / CHAOS_PERIOD_MS; i++) {
        larch_disconnect(ch->clients[i % ch->n].lh);
        ch->drops++;
        rt_sleep_ms(CHAOS_PERIOD_MS);
    }
    return NULL;
}

/* Consumers first (they wait on an empty queue), then producers. */
static void start_clients(struct delivery *d, struct client *cl, int consumers)
{
    for (int i = 0; i < consumers + d->producers; i++) {
        bool consumer = i < consumers;
        cl[i] = (struct client){ .d = d, .lh = rt_open(), .id = i - consumers, .in_order = true };
        if (consumer) {
            cl[i].last = malloc(sizeof *cl[i].last * (size_t)(d->producers * d->ops->levels));
            assert_non_null(cl[i].last);
            memset(cl[i].last, 0xff, sizeof *cl[i].last * (size_t)(d->producers * d->ops->levels));
        }
        assert_int_equal(pthread_create(&cl[i].thread, NULL, consumer ? consume : produce, &cl[i]),
                         0);
    }
}

static void assert_delivered(struct delivery *d, struct client *cl, int consumers)
{
    int received = 0;
    for (int i = 0; i < consumers + d->producers; i++) {
        assert_int_equal(cl[i].rc, ZK_OK);
        if (i < consumers) {
            assert_true(cl[i].in_order);
            received += cl[i].count;
        }
    }
    /* name the items lost or delivered twice ("producer:index"), if any */
    for (int k = 0; k < d->producers * d->items; k++) {
        if (d->delivered[k] != 1)
            print_message("%s: item %d:%d delivered %d times\n", d->path, k / d->items,
                          k % d->items, d->delivered[k]);
    }
    assert_int_equal(received, d->producers * d->items);
    for (int k = 0; k < d->producers * d->items; k++)
        assert_int_equal(d->delivered[k], 1); /* no loss, no duplicate */
}

/* Nothing left behind: a fresh take finds the queue empty. */
static void assert_empty(const struct rt_queue_ops *ops, const char *path)
{
    struct larch *lh = rt_open();
    void *q = NULL;
    assert_int_equal(ops->open(lh, path, &q), ZK_OK);
    char *data = NULL;
    int32_t len = -1;
    int priority = -1;
    assert_int_equal(ops->take(q, &priority, &data, &len, 0), ZK_EOPERATIONTIMEOUT);
    ops->free(q);
    larch_close(lh);
}

void rt_check_delivery(const struct rt_queue_ops *ops, const char *path, int producers,
                       int consumers, int items, bool chaos)
{
    struct delivery d = { .ops = ops, .path = path, .producers = producers, .items = items };
    d.delivered = calloc((size_t)(producers * items), sizeof *d.delivered);
    struct client *cl = calloc((size_t)(producers + consumers), sizeof *cl);
    assert_non_null(d.delivered);
    assert_non_null(cl);
    pthread_mutex_init(&d.mu, NULL);
    start_clients(&d, cl, consumers);
    struct chaos ch = { .d = &d, .clients = cl, .n = producers + consumers };
    if (chaos)
        assert_int_equal(pthread_create(&ch.thread, NULL, drop_connections, &ch), 0);
    for (int i = 0; i < producers + consumers; i++)
        pthread_join(cl[i].thread, NULL);
    atomic_store(&d.chaos_stop, true);
    if (chaos) {
        pthread_join(ch.thread, NULL);
        assert_true(ch.drops > 0);
    }
    assert_delivered(&d, cl, consumers);
    assert_empty(ops, path);
    for (int i = 0; i < producers + consumers; i++) {
        larch_close(cl[i].lh);
        free(cl[i].last);
    }
    pthread_mutex_destroy(&d.mu);
    free(cl);
    free(d.delivered);
}
