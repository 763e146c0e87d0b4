/*
 * rt — shared scaffolding for the recipe tests (tests/recipes/test_*.c).
 *
 * Every test program runs against a live server named by env LARCH_HOSTS
 * (a liblarch connect string; tests/integration/test_recipes.py sets it for
 * larchd and for stock ZooKeeper in turn). Each test works under its own
 * fresh root znode so runs never see each other's nodes.
 */
#ifndef LARCH_TESTS_RT_H
#define LARCH_TESTS_RT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "client/larch.h"

/* Session timeout the tests ask for: the smallest stock ZooKeeper grants
 * with its default tickTime of 2000 ms (2 ticks), so a killed holder's
 * session expires as soon as possible. */
#define RT_SESSION_TIMEOUT_MS 4000
/* Upper bound for any wait in a test (a loop that waits longer fails). */
#define RT_WAIT_MS 30000

/* The connect string from LARCH_HOSTS; aborts with a message when unset. */
const char *rt_hosts(void);
/* A connected handle (its own session), or a failed cmocka assertion. */
struct larch *rt_open(void);
/* Same with a chosen session timeout. */
struct larch *rt_open_timeout(int32_t session_timeout_ms);
/* Creates a new persistent root "/rt-<name>-<pid>-<n>" (rt_create) and
 * returns it (malloc'd). */
char *rt_root(struct larch *lh, const char *name);
/* Deletes path and everything under it (listed after a sync and retried:
 * rt_children, rt_delete below); ZK_OK or the first error other than
 * ZK_ENONODE. */
int rt_delete_tree(struct larch *lh, const char *path);
/* Clocks: base_mono_ms (base/base.h, through client/larch.h). */
/* Sleeps ms milliseconds. */
void rt_sleep_ms(int64_t ms);

/* ---- the tests' own calls: what a correct ZooKeeper client does ------------ */
/* LARCH_HOSTS may name several members of an ensemble. A handle's server may
 * then lag behind what other sessions wrote through other members (ZooKeeper
 * promises each session only its own order), so reading another session's
 * writes takes a sync first. And a handle's connection drops when its
 * member dies or loses its leader: the request in flight and every request
 * made until the handle re-attaches fail with ZK_ECONNECTIONLOSS (or
 * ZK_ESESSIONMOVED), their outcome unknown (larch.h). The helpers below
 * sync before they read and retry after such a failure, a write first
 * finding out whether its lost try applied; every wait is bounded by
 * RT_WAIT_MS. They never call cmocka: worker threads may use them. */

/* Whether rc leaves a request's outcome unknown. If so, waits for lh to
 * re-attach and returns true (retry), unless RT_WAIT_MS have passed since
 * the first failure (*deadline_ms, 0 before it). */
bool rt_retry(struct larch *lh, int rc, int64_t *deadline_ms);
/* rc = call, tried again while rt_retry(lh, rc) says so: for reads, and for
 * writes whose answer is the same whether or not a lost try applied (ones
 * that fail and change nothing, e.g. a create of a node that exists). */
#define RT_CALL(rc, lh, call)                                                                   \
    do {                                                                                        \
        int64_t rt_deadline_ = 0;                                                               \
        do {                                                                                    \
            (rc) = (call);                                                                      \
        } while (rt_retry((lh), (rc), &rt_deadline_));                                          \
    } while (0)
/* The main thread's assertion that call, retried as by RT_CALL, returns want. */
#define RT_EXPECT(lh, call, want)                                                               \
    do {                                                                                        \
        int rt_rc_;                                                                             \
        RT_CALL(rt_rc_, lh, call);                                                              \
        assert_int_equal(rt_rc_, (want));                                                       \
    } while (0)
/* larch_sync, retried. */
int rt_sync(struct larch *lh, const char *path);
/* Reads after a sync of path (other sessions' writes included, on any
 * server), retried; arguments as for larch_exists / larch_get /
 * larch_get_children without a watch. */
int rt_exists(struct larch *lh, const char *path, struct zk_stat *stat);
int rt_get(struct larch *lh, const char *path, char **data, int32_t *len, struct zk_stat *stat);
int rt_children(struct larch *lh, const char *path, struct larch_strings *kids,
                struct zk_stat *stat);
/* larch_create, retried. The node must be the caller's alone: after a lost
 * try, ZK_ENODEEXISTS means that try made it (*created and stat are then
 * read back). With a sequential mode the last component of path must be a
 * prefix no other node of the parent starts with: after a lost try the
 * parent is listed (after a sync) for it (the GUID rule, seed 004). */
int rt_create(struct larch *lh, const char *path, const void *data, int32_t len,
              const struct larch_acl_list *acl, int32_t mode, char **created,
              struct zk_stat *stat);
/* larch_delete, retried: after a lost try, ZK_ENONODE means it applied. */
int rt_delete(struct larch *lh, const char *path, int32_t version);
/* larch_set, retried. With a version, a ZK_EBADVERSION after a lost try is
 * checked: the node holding our data at version + 1 means it applied (stat
 * read back). Without one (-1) a lost try may have applied as well: the
 * version may then have moved by two. */
int rt_set(struct larch *lh, const char *path, const void *data, int32_t len, int32_t version,
           struct zk_stat *stat);
/* larch_close that ends the session for sure: when the closeSession's
 * outcome is unknown (the connection dropped), re-attaches the session
 * with its id and password and closes it again, until the server says it
 * is gone. ZK_OK then; else the last error (its ephemerals then go when
 * it expires). */
int rt_close(struct larch *lh);

/* ---- shared by several test programs ------------------------------------- */
/* parent/name (malloc'd), or a failed cmocka assertion. */
char *rt_path(const char *parent, const char *name);
/* Polls cond(arg) every 5 ms for at most RT_WAIT_MS; its last answer. */
bool rt_eventually(bool (*cond)(void *), void *arg);
/* Waits until *flag is set, polling every 2 ms for at most RT_WAIT_MS;
 * whether it was. No cmocka: worker threads call it. */
bool rt_await_flag(atomic_bool *flag);
/* The number of children of dir, which must exist (cmocka assertion), read
 * after a sync: other sessions' changes included, on any server (rt_children). */
int32_t rt_count_children(struct larch *lh, const char *dir);
/* The number of children of dir whose name begins with prefix, after a
 * sync: 0 when dir does not exist, -1 on another error. No cmocka: worker
 * threads may call it. */
int32_t rt_count_prefixed(struct larch *lh, const char *dir, const char *prefix);
/* Whether name begins with prefix. */
bool rt_has_prefix(const char *name, const char *prefix);
/* The end of a test: deletes root and everything under it (a cmocka
 * assertion), frees root and closes lh (rt_close). */
void rt_finish(struct larch *lh, char *root);

/* ---- exactly-once delivery through a queue recipe -------------------------- */
/* How rt_check_delivery drives a queue recipe (q is its object). */
struct rt_queue_ops {
    int (*open)(struct larch *lh, const char *path, void **q);
    void (*free)(void *q);
    /* Puts len bytes with priority (a FIFO queue ignores it). */
    int (*put)(void *q, int priority, const char *item, int32_t len);
    /* Takes one item within timeout_ms; *priority gets its priority (0 for
     * a FIFO queue). */
    int (*take)(void *q, int *priority, char **data, int32_t *len, int32_t timeout_ms);
    int levels; /* a producer's item i goes in with priority i % levels */
};
/* Producers and consumers, each on its own handle and thread, move items
 * through the queue at path, optionally while their connections are
 * dropped one after another every 25 ms. Then asserts: every item delivered
 * exactly once, each consumer saw each producer's items of one priority in
 * put order, and the queue is empty. */
void rt_check_delivery(const struct rt_queue_ops *ops, const char *path, int producers,
                       int consumers, int items, bool chaos);

/* ---- a client in a child process (to be killed) ---------------------------- */
/* Runs in the child, on its own connected handle: sets up what the test
 * needs and returns a one-line report for the parent (no newline), or NULL
 * when the setup failed. No cmocka here. */
typedef const char *(*rt_child_fn)(struct larch *lh, void *arg);
/* Forks a child that opens its own handle, runs child(lh, arg), reports
 * the line to the parent and then waits (at most RT_WAIT_MS) to be killed.
 * Returns the child's pid once its report is in, copied to line (cap bytes;
 * may be NULL); a child whose setup failed fails a cmocka assertion. Fork
 * only while this process has no handle open: no thread may live across
 * fork(). */
pid_t rt_spawn(rt_child_fn child, void *arg, char *line, size_t cap);
/* Kills a child with SIGKILL and reaps it (cmocka assertions). */
void rt_kill(pid_t pid);

#endif
