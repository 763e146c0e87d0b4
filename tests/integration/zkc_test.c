/*
 * zkc_test — drives the official ZooKeeper C client (libzookeeper_mt) against
 * a server and checks every answer. Started by test_cclient.py with the
 * server address as its only argument; exit status 0 only if every check
 * passed. Each failed check prints file:line, the expression and the values.
 *
 * The expected values are stock ZooKeeper 3.8 behaviour; the same binary is
 * run against ZooKeeper and larchd.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The synchronous API is declared only for the multi-threaded library. */
#ifndef THREADED
#define THREADED
#endif
#include <zookeeper.h>

#define WAIT_MS 10000  /* bound on every wait for an event or completion */
#define SETTLE_MS 300  /* quiet period to prove that no extra event arrives */

static int checks_failed;
static int checks_run;

#define CHECK_INT(got_expr, want_expr)                                               \
    do {                                                                             \
        long long got_ = (long long)(got_expr), want_ = (long long)(want_expr);      \
        checks_run++;                                                                \
        if (got_ != want_) {                                                         \
            checks_failed++;                                                         \
            fprintf(stderr, "%s:%d: %s: got %lld, want %lld\n", __FILE__, __LINE__,  \
                    #got_expr, got_, want_);                                         \
        }                                                                            \
    } while (0)

#define CHECK_TRUE(cond) CHECK_INT(!!(cond), 1)

#define CHECK_STR(got_expr, want_expr)                                               \
    do {                                                                             \
        const char *got_ = (got_expr), *want_ = (want_expr);                         \
        checks_run++;                                                                \
        if (got_ == NULL || strcmp(got_, want_) != 0) {                              \
            checks_failed++;                                                         \
            fprintf(stderr, "%s:%d: %s: got \"%s\", want \"%s\"\n", __FILE__,        \
                    __LINE__, #got_expr, got_ ? got_ : "(null)", want_);             \
        }                                                                            \
    } while (0)

/* ---- synchronisation between the client's threads and the test ---------- */

/* Counts watcher events and async completions; the C client calls watchers and
 * completions on its completion thread, the test waits on the condition. */
struct tally {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int events;
    int last_type;
    int last_state;
    char last_path[256];
    int completions;
    int last_rc;
    char last_value[256];
    int last_version;
};

static void tally_init(struct tally *t)
{
    memset(t, 0, sizeof(*t));
    pthread_mutex_init(&t->lock, NULL);
    pthread_cond_init(&t->changed, NULL);
}

static void tally_destroy(struct tally *t)
{
    pthread_cond_destroy(&t->changed);
    pthread_mutex_destroy(&t->lock);
}

static struct timespec deadline_after_ms(int ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

/* Waits until *counter >= want or ms elapse; returns the final count. */
static int tally_wait(struct tally *t, const int *counter, int want, int ms)
{
    struct timespec until = deadline_after_ms(ms);
    pthread_mutex_lock(&t->lock);
    while (*counter < want) {
        if (pthread_cond_timedwait(&t->changed, &t->lock, &until) == ETIMEDOUT)
            break;
    }
    int got = *counter;
    pthread_mutex_unlock(&t->lock);
    return got;
}

static void counting_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    struct tally *t = ctx;
    pthread_mutex_lock(&t->lock);
    t->events++;
    t->last_type = type;
    t->last_state = state;
    snprintf(t->last_path, sizeof(t->last_path), "%s", path ? path : "");
    pthread_cond_broadcast(&t->changed);
    pthread_mutex_unlock(&t->lock);
}

/* Session watcher: records state changes so main can wait for CONNECTED. */
static void session_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    if (type == ZOO_SESSION_EVENT)
        counting_watcher(zh, type, state, path, ctx);
}

static void complete(struct tally *t, int rc, const char *value, const struct Stat *stat)
{
    pthread_mutex_lock(&t->lock);
    t->completions++;
    t->last_rc = rc;
    snprintf(t->last_value, sizeof(t->last_value), "%s", value ? value : "");
    t->last_version = stat ? stat->version : -1;
    pthread_cond_broadcast(&t->changed);
    pthread_mutex_unlock(&t->lock);
}

static void void_done(int rc, const void *data)
{
    complete((struct tally *)data, rc, NULL, NULL);
}

static void string_done(int rc, const char *value, const void *data)
{
    complete((struct tally *)data, rc, value, NULL);
}

static void stat_done(int rc, const struct Stat *stat, const void *data)
{
    complete((struct tally *)data, rc, NULL, stat);
}

static void data_done(int rc, const char *value, int len, const struct Stat *stat,
                      const void *data)
{
    char copy[256] = "";
    if (rc == ZOK && value != NULL && len > 0 && len < (int)sizeof(copy))
        memcpy(copy, value, (size_t)len);
    complete((struct tally *)data, rc, copy, stat);
}

static void strings_stat_done(int rc, const struct String_vector *strings,
                              const struct Stat *stat, const void *data)
{
    char count[32];
    snprintf(count, sizeof(count), "%d", strings ? strings->count : -1);
    complete((struct tally *)data, rc, count, stat);
}

static void acl_done(int rc, struct ACL_vector *acl, struct Stat *stat, const void *data)
{
    char count[32];
    snprintf(count, sizeof(count), "%d", acl ? acl->count : -1);
    complete((struct tally *)data, rc, count, stat);
}

/* ---- connection ----------------------------------------------------------- */

struct conn {
    zhandle_t *zh;
    struct tally session;
};

static bool conn_open(struct conn *c, const char *hosts)
{
    tally_init(&c->session);
    c->zh = zookeeper_init(hosts, session_watcher, 10000, NULL, &c->session, 0);
    if (c->zh == NULL) {
        fprintf(stderr, "zookeeper_init failed: %s\n", strerror(errno));
        tally_destroy(&c->session);
        return false;
    }
    struct timespec until = deadline_after_ms(WAIT_MS);
    pthread_mutex_lock(&c->session.lock);
    while (zoo_state(c->zh) != ZOO_CONNECTED_STATE) {
        if (pthread_cond_timedwait(&c->session.changed, &c->session.lock, &until) == ETIMEDOUT)
            break;
    }
    pthread_mutex_unlock(&c->session.lock);
    if (zoo_state(c->zh) != ZOO_CONNECTED_STATE) {
        fprintf(stderr, "not connected to %s within %d ms\n", hosts, WAIT_MS);
        zookeeper_close(c->zh);
        tally_destroy(&c->session);
        return false;
    }
    return true;
}

static void conn_close(struct conn *c)
{
    CHECK_INT(zookeeper_close(c->zh), ZOK);
    tally_destroy(&c->session);
}

/* ---- scenarios ------------------------------------------------------------ */

static bool ends_with_ten_digits(const char *s)
{
    size_t n = strlen(s);
    if (n < 10)
        return false;
    for (size_t i = n - 10; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
    }
    return true;
}

static void test_create_variants(zhandle_t *zh, const char *root)
{
    char path[512], buf[512];
    struct Stat st;

    CHECK_INT(zoo_create(zh, root, "r", 1, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, buf,
                         sizeof(buf)), ZOK);
    CHECK_STR(buf, root);
    CHECK_INT(zoo_create(zh, root, "r", 1, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, buf,
                         sizeof(buf)), ZNODEEXISTS);

    snprintf(path, sizeof(path), "%s/missing/child", root);
    CHECK_INT(zoo_create(zh, path, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, NULL, 0),
              ZNONODE);

    snprintf(path, sizeof(path), "%s/c2", root);
    memset(&st, 0, sizeof(st));
    CHECK_INT(zoo_create2(zh, path, "abc", 3, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, buf,
                          sizeof(buf), &st), ZOK);
    CHECK_STR(buf, path);
    CHECK_INT(st.version, 0);
    CHECK_INT(st.dataLength, 3);
    CHECK_INT(st.numChildren, 0);
    CHECK_INT(st.ephemeralOwner, 0);
    CHECK_TRUE(st.czxid > 0 && st.czxid == st.mzxid);

    snprintf(path, sizeof(path), "%s/container", root);
    CHECK_INT(zoo_create2(zh, path, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, ZOO_CONTAINER, buf,
                          sizeof(buf), &st), ZOK);
    CHECK_STR(buf, path);
    CHECK_INT(st.ephemeralOwner, 0); /* the container marker is not shown to clients */

    snprintf(path, sizeof(path), "%s/ttl", root);
    CHECK_INT(zoo_create2_ttl(zh, path, "t", 1, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT_WITH_TTL,
                              60000, buf, sizeof(buf), &st), ZOK);
    CHECK_STR(buf, path);
    CHECK_INT(st.dataLength, 1);

    snprintf(path, sizeof(path), "%s/ttlseq-", root);
    CHECK_INT(zoo_create_ttl(zh, path, NULL, -1, &ZOO_OPEN_ACL_UNSAFE,
                             ZOO_PERSISTENT_SEQUENTIAL_WITH_TTL, 60000, buf, sizeof(buf)), ZOK);
    CHECK_TRUE(ends_with_ten_digits(buf));

    snprintf(path, sizeof(path), "%s/seq-", root);
    CHECK_INT(zoo_create(zh, path, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT_SEQUENTIAL,
                         buf, sizeof(buf)), ZOK);
    CHECK_TRUE(strncmp(buf, path, strlen(path)) == 0 && ends_with_ten_digits(buf));

    snprintf(path, sizeof(path), "%s/eph", root);
    CHECK_INT(zoo_create(zh, path, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL, NULL, 0), ZOK);
    CHECK_INT(zoo_exists(zh, path, 0, &st), ZOK);
    CHECK_INT(st.ephemeralOwner, (long long)zoo_client_id(zh)->client_id);
    snprintf(path, sizeof(path), "%s/eph/child", root);
    CHECK_INT(zoo_create(zh, path, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, NULL, 0),
              ZNOCHILDRENFOREPHEMERALS);
}

static void test_get_set_watch(zhandle_t *zh, zhandle_t *other, const char *root)
{
    char path[512], buf[64];
    int len = sizeof(buf);
    struct Stat st;
    struct tally w;
    tally_init(&w);

    snprintf(path, sizeof(path), "%s/watched", root);
    CHECK_INT(zoo_create(zh, path, "v0", 2, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, NULL, 0), ZOK);
    CHECK_INT(zoo_wget(zh, path, counting_watcher, &w, buf, &len, &st), ZOK);
    CHECK_INT(len, 2);
    CHECK_TRUE(memcmp(buf, "v0", 2) == 0);
    CHECK_INT(st.version, 0);

    CHECK_INT(zoo_set(other, path, "v1", 2, 0), ZOK);
    CHECK_INT(zoo_set(other, path, "v2", 2, 1), ZOK);
    CHECK_INT(zoo_set(other, path, "bad", 3, 7), ZBADVERSION);
    CHECK_INT(tally_wait(&w, &w.events, 1, WAIT_MS), 1);
    usleep(SETTLE_MS * 1000);
    CHECK_INT(tally_wait(&w, &w.events, 2, 0), 1); /* one-shot: exactly one event */
    CHECK_INT(w.last_type, ZOO_CHANGED_EVENT);
    CHECK_INT(w.last_state, ZOO_CONNECTED_STATE);
    CHECK_STR(w.last_path, path);

    CHECK_INT(zoo_set2(zh, path, "v3", 2, -1, &st), ZOK);
    CHECK_INT(st.version, 3);
    len = sizeof(buf);
    CHECK_INT(zoo_get(zh, path, 0, buf, &len, &st), ZOK);
    CHECK_INT(len, 2);
    CHECK_TRUE(memcmp(buf, "v3", 2) == 0);
    CHECK_TRUE(st.mzxid > st.czxid);

    /* exists watch on a missing node fires NodeCreated */
    struct tally e;
    tally_init(&e);
    snprintf(path, sizeof(path), "%s/later", root);
    CHECK_INT(zoo_wexists(zh, path, counting_watcher, &e, &st), ZNONODE);
    CHECK_INT(zoo_create(other, path, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, NULL, 0),
              ZOK);
    CHECK_INT(tally_wait(&e, &e.events, 1, WAIT_MS), 1);
    CHECK_INT(e.last_type, ZOO_CREATED_EVENT);
    CHECK_STR(e.last_path, path);
    tally_destroy(&e);
    tally_destroy(&w);
}

static void test_children_and_delete(zhandle_t *zh, const char *root)
{
    char path[512];
    struct String_vector kids;
    struct Stat st;

    snprintf(path, sizeof(path), "%s/kids", root);
    CHECK_INT(zoo_create(zh, path, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, NULL, 0), ZOK);
    for (int i = 0; i < 3; i++) {
        char kid[600];
        snprintf(kid, sizeof(kid), "%s/k%d", path, i);
        CHECK_INT(zoo_create(zh, kid, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, NULL, 0),
                  ZOK);
    }
    memset(&kids, 0, sizeof(kids));
    CHECK_INT(zoo_get_children2(zh, path, 0, &kids, &st), ZOK);
    CHECK_INT(kids.count, 3);
    CHECK_INT(st.numChildren, 3);
    CHECK_INT(st.cversion, 3);
    deallocate_String_vector(&kids);

    CHECK_INT(zoo_delete(zh, path, -1), ZNOTEMPTY);
    char kid0[600];
    snprintf(kid0, sizeof(kid0), "%s/k0", path);
    CHECK_INT(zoo_delete(zh, kid0, 5), ZBADVERSION);
    CHECK_INT(zoo_delete(zh, kid0, 0), ZOK);
    CHECK_INT(zoo_delete(zh, kid0, -1), ZNONODE);
    CHECK_INT(zoo_exists(zh, kid0, 0, &st), ZNONODE);
}

static void test_multi(zhandle_t *zh, const char *root)
{
    char a[512], b[512], missing[512], pbuf[512];
    struct Stat st;
    zoo_op_t ops[4];
    zoo_op_result_t results[4];

    snprintf(a, sizeof(a), "%s/multi-a", root);
    snprintf(b, sizeof(b), "%s/multi-b", root);
    snprintf(missing, sizeof(missing), "%s/multi-missing", root);

    /* a failing op rolls the whole multi back */
    zoo_create_op_init(&ops[0], a, "A", 1, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, pbuf, sizeof(pbuf));
    zoo_set_op_init(&ops[1], missing, "x", 1, -1, &st);
    zoo_create_op_init(&ops[2], b, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, NULL, 0);
    CHECK_INT(zoo_multi(zh, 3, ops, results), ZNONODE);
    CHECK_INT(results[0].err, ZOK);
    CHECK_INT(results[1].err, ZNONODE);
    CHECK_INT(results[2].err, ZRUNTIMEINCONSISTENCY);
    CHECK_INT(zoo_exists(zh, a, 0, &st), ZNONODE);
    CHECK_INT(zoo_exists(zh, b, 0, &st), ZNONODE);

    /* all succeed together */
    struct Stat set_stat;
    zoo_create_op_init(&ops[0], a, "A", 1, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, pbuf, sizeof(pbuf));
    zoo_set_op_init(&ops[1], a, "AA", 2, 0, &set_stat);
    zoo_check_op_init(&ops[2], a, 1);
    zoo_delete_op_init(&ops[3], a, 1);
    CHECK_INT(zoo_multi(zh, 4, ops, results), ZOK);
    for (int i = 0; i < 4; i++)
        CHECK_INT(results[i].err, ZOK);
    CHECK_STR(pbuf, a);
    CHECK_INT(set_stat.version, 1);
    CHECK_INT(zoo_exists(zh, a, 0, &st), ZNONODE);
}

static void test_auth_and_acl(zhandle_t *zh, zhandle_t *other, const char *root)
{
    char path[512], buf[16];
    int len = sizeof(buf);
    struct Stat st;
    struct ACL_vector acl;
    struct tally t;
    tally_init(&t);

    CHECK_INT(zoo_add_auth(zh, "digest", "zkc:secret", 10, void_done, &t), ZOK);
    CHECK_INT(tally_wait(&t, &t.completions, 1, WAIT_MS), 1);
    CHECK_INT(t.last_rc, ZOK);

    snprintf(path, sizeof(path), "%s/private", root);
    CHECK_INT(zoo_create(zh, path, "p", 1, &ZOO_CREATOR_ALL_ACL, ZOO_PERSISTENT, NULL, 0), ZOK);
    CHECK_INT(zoo_get(zh, path, 0, buf, &len, &st), ZOK);
    len = sizeof(buf);
    CHECK_INT(zoo_get(other, path, 0, buf, &len, &st), ZNOAUTH);
    CHECK_INT(zoo_set(other, path, "x", 1, -1), ZNOAUTH);

    memset(&acl, 0, sizeof(acl));
    CHECK_INT(zoo_get_acl(zh, path, &acl, &st), ZOK);
    CHECK_INT(acl.count, 1);
    if (acl.count == 1) {
        CHECK_STR(acl.data[0].id.scheme, "digest");
        CHECK_TRUE(strncmp(acl.data[0].id.id, "zkc:", 4) == 0);
        CHECK_INT(acl.data[0].perms, ZOO_PERM_ALL);
    }
    deallocate_ACL_vector(&acl);

    snprintf(path, sizeof(path), "%s/readonly", root);
    CHECK_INT(zoo_create(zh, path, "r", 1, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, NULL, 0), ZOK);
    CHECK_INT(zoo_set_acl(zh, path, 3, &ZOO_READ_ACL_UNSAFE), ZBADVERSION);
    CHECK_INT(zoo_set_acl(zh, path, 0, &ZOO_READ_ACL_UNSAFE), ZOK);
    memset(&acl, 0, sizeof(acl));
    CHECK_INT(zoo_get_acl(other, path, &acl, &st), ZOK);
    CHECK_INT(st.aversion, 1);
    CHECK_INT(acl.count, 1);
    if (acl.count == 1) {
        CHECK_STR(acl.data[0].id.scheme, "world");
        CHECK_STR(acl.data[0].id.id, "anyone");
        CHECK_INT(acl.data[0].perms, ZOO_PERM_READ);
    }
    deallocate_ACL_vector(&acl);
    CHECK_INT(zoo_set(other, path, "w", 1, -1), ZNOAUTH);
    tally_destroy(&t);
}

static void test_async(zhandle_t *zh, const char *root)
{
    char path[512];
    struct tally t;
    tally_init(&t);
    int n = 0;

    snprintf(path, sizeof(path), "%s/async", root);
    CHECK_INT(zoo_acreate(zh, path, "as", 2, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, string_done, &t),
              ZOK);
    CHECK_INT(tally_wait(&t, &t.completions, ++n, WAIT_MS), n);
    CHECK_INT(t.last_rc, ZOK);
    CHECK_STR(t.last_value, path);

    CHECK_INT(zoo_aset(zh, path, "as2", 3, 0, stat_done, &t), ZOK);
    CHECK_INT(tally_wait(&t, &t.completions, ++n, WAIT_MS), n);
    CHECK_INT(t.last_rc, ZOK);
    CHECK_INT(t.last_version, 1);

    CHECK_INT(zoo_aget(zh, path, 0, data_done, &t), ZOK);
    CHECK_INT(tally_wait(&t, &t.completions, ++n, WAIT_MS), n);
    CHECK_INT(t.last_rc, ZOK);
    CHECK_STR(t.last_value, "as2");

    CHECK_INT(zoo_aexists(zh, path, 0, stat_done, &t), ZOK);
    CHECK_INT(tally_wait(&t, &t.completions, ++n, WAIT_MS), n);
    CHECK_INT(t.last_version, 1);

    CHECK_INT(zoo_aget_children2(zh, root, 0, strings_stat_done, &t), ZOK);
    CHECK_INT(tally_wait(&t, &t.completions, ++n, WAIT_MS), n);
    CHECK_INT(t.last_rc, ZOK);
    CHECK_TRUE(atoi(t.last_value) >= 1);

    CHECK_INT(zoo_aget_acl(zh, path, acl_done, &t), ZOK);
    CHECK_INT(tally_wait(&t, &t.completions, ++n, WAIT_MS), n);
    CHECK_STR(t.last_value, "1");

    CHECK_INT(zoo_adelete(zh, path, 5, void_done, &t), ZOK);
    CHECK_INT(tally_wait(&t, &t.completions, ++n, WAIT_MS), n);
    CHECK_INT(t.last_rc, ZBADVERSION);

    CHECK_INT(zoo_adelete(zh, path, 1, void_done, &t), ZOK);
    CHECK_INT(tally_wait(&t, &t.completions, ++n, WAIT_MS), n);
    CHECK_INT(t.last_rc, ZOK);

    CHECK_INT(zoo_aget(zh, path, 0, data_done, &t), ZOK);
    CHECK_INT(tally_wait(&t, &t.completions, ++n, WAIT_MS), n);
    CHECK_INT(t.last_rc, ZNONODE);
    tally_destroy(&t);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s HOST:PORT\n", argv[0]);
        return 2;
    }
    zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);

    struct conn a, b;
    if (!conn_open(&a, argv[1]))
        return 1;
    if (!conn_open(&b, argv[1])) {
        conn_close(&a);
        return 1;
    }
    char root[64];
    snprintf(root, sizeof(root), "/zkc-%ld", (long)getpid());

    test_create_variants(a.zh, root);
    test_get_set_watch(a.zh, b.zh, root);
    test_children_and_delete(a.zh, root);
    test_multi(a.zh, root);
    test_auth_and_acl(a.zh, b.zh, root);
    test_async(a.zh, root);

    conn_close(&b);
    conn_close(&a);
    printf("zkc_test: %d checks, %d failed\n", checks_run, checks_failed);
    return checks_failed == 0 ? 0 : 1;
}
