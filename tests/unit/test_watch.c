/*
 * Unit tests for tree/watch.c: the per-worker watch table.
 *
 * Trigger rules follow ZooKeeper 3.6+ (DataTree + WatchManager): which kinds
 * each event fires on the node and on its ancestors, one notification per
 * connection per event, one-shot removal, persistent kinds staying, the
 * seen_zxid filter (DESIGN.md invariant 3), removeWatches/checkWatches.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tree/tree.h"

/* ---- recorder -------------------------------------------------------------- */

#define REC_MAX 64

struct fired {
    uint64_t conn;
    int32_t type;
    char path[64];
};

struct recorder {
    struct fired ev[REC_MAX];
    size_t n;
};

static void record(void *arg, uint64_t conn, int32_t type, const char *path)
{
    struct recorder *r = arg;
    assert_true(r->n < REC_MAX);
    r->ev[r->n].conn = conn;
    r->ev[r->n].type = type;
    snprintf(r->ev[r->n].path, sizeof r->ev[r->n].path, "%s", path);
    r->n++;
}

/* How many notifications went to conn. */
static size_t fired_for(const struct recorder *r, uint64_t conn)
{
    size_t n = 0;
    for (size_t i = 0; i < r->n; i++)
        n += r->ev[i].conn == conn;
    return n;
}

static int add(struct watch_table *wt, const char *path, enum watch_kind kind, uint64_t conn,
               int64_t seen)
{
    return watch_add(wt, path, strlen(path), kind, conn, seen);
}

static void fire(struct watch_table *wt, int32_t type, const char *path, int64_t zxid,
                 struct recorder *r)
{
    struct tree_event ev = { .type = type, .path = path, .zxid = zxid, .acl = NULL };
    r->n = 0;
    watch_fire(wt, &ev, record, r);
}

static int rm(struct watch_table *wt, const char *path, uint64_t conn, int32_t type, bool remove,
              struct recorder *r)
{
    if (r != NULL)
        r->n = 0;
    return watch_remove(wt, path, strlen(path), conn, type, remove, r ? record : NULL, r);
}

static struct watch_table *table(void)
{
    struct watch_table *wt = watch_table_new();
    assert_non_null(wt);
    return wt;
}

/* ---- trigger matrix ---------------------------------------------------------- */

static const int32_t events[] = { ZK_EVENT_CREATED, ZK_EVENT_DELETED, ZK_EVENT_DATA_CHANGED,
                                  ZK_EVENT_CHILD_CHANGED };
static const enum watch_kind kinds[] = { WATCH_DATA, WATCH_EXIST, WATCH_CHILD, WATCH_PERSISTENT,
                                         WATCH_PERSISTENT_RECURSIVE };

/* Expected firing of a watch of kinds[k] set on the event's own path, per
 * events[e] (rows) — DataTree.createNode/deleteNode/setData triggers. */
static const bool fires_on_path[4][5] = {
    /*               DATA   EXIST  CHILD  PERS   RECUR */
    /* CREATED */ { true, true, false, true, true },
    /* DELETED */ { true, true, true, true, true },
    /* DATA    */ { true, true, false, true, true },
    /* CHILD   */ { false, false, true, true, false },
};
/* ... and set on an ancestor of the event's path: only recursive ones, and
 * never for child-changed. */
static const bool fires_on_ancestor[4][5] = {
    { false, false, false, false, true },
    { false, false, false, false, true },
    { false, false, false, false, true },
    { false, false, false, false, false },
};
static const bool one_shot[5] = { true, true, true, false, false };

static void test_every_event_vs_every_kind_on_path(void **state)
{
    struct recorder r;
    for (size_t e = 0; e < 4; e++) {
        for (size_t k = 0; k < 5; k++) {
            struct watch_table *wt = table();
            assert_int_equal(add(wt, "/p/q", kinds[k], 7, 1), ZK_OK);
            fire(wt, events[e], "/p/q", 2, &r);
            if (r.n != (fires_on_path[e][k] ? 1u : 0u))
                fail_msg("event %d kind %d: %zu notifications", events[e], kinds[k], r.n);
            if (r.n == 1) {
                assert_int_equal(r.ev[0].conn, 7);
                assert_int_equal(r.ev[0].type, events[e]);
                assert_string_equal(r.ev[0].path, "/p/q");
            }
            size_t left = (fires_on_path[e][k] && one_shot[k]) ? 0 : 1;
            if (watch_count(wt) != left)
                fail_msg("event %d kind %d: %zu watches left", events[e], kinds[k], watch_count(wt));
            watch_table_free(wt);
        }
    }
}

static void test_every_event_vs_every_kind_on_ancestor(void **state)
{
    struct recorder r;
    for (size_t e = 0; e < 4; e++) {
        for (size_t k = 0; k < 5; k++) {
            struct watch_table *wt = table();
            assert_int_equal(add(wt, "/p", kinds[k], 7, 1), ZK_OK);
            fire(wt, events[e], "/p/q/r", 2, &r);
            if (r.n != (fires_on_ancestor[e][k] ? 1u : 0u))
                fail_msg("event %d kind %d on ancestor: %zu", events[e], kinds[k], r.n);
            if (r.n == 1)
                assert_string_equal(r.ev[0].path, "/p/q/r"); /* the event's path, not the watch's */
            assert_int_equal(watch_count(wt), 1);
            watch_table_free(wt);
        }
    }
}

/* Unknown event types (NONE, the *_WATCH_REMOVED ones) trigger nothing. */
static void test_other_event_types_fire_nothing(void **state)
{
    struct watch_table *wt = table();
    struct recorder r;
    for (size_t k = 0; k < 5; k++)
        assert_int_equal(add(wt, "/a", kinds[k], 1, 0), ZK_OK);
    fire(wt, ZK_EVENT_NONE, "/a", 5, &r);
    assert_int_equal(r.n, 0);
    fire(wt, ZK_EVENT_DATA_WATCH_REMOVED, "/a", 5, &r);
    assert_int_equal(r.n, 0);
    assert_int_equal(watch_count(wt), 5);
    watch_table_free(wt);
}

/* ---- one notification per connection -------------------------------------------- */

static void test_deleted_data_and_child_notify_once(void **state)
{
    struct watch_table *wt = table();
    struct recorder r;
    assert_int_equal(add(wt, "/a", WATCH_DATA, 1, 0), ZK_OK);
    assert_int_equal(add(wt, "/a", WATCH_CHILD, 1, 0), ZK_OK);
    assert_int_equal(add(wt, "/a", WATCH_CHILD, 2, 0), ZK_OK);
    fire(wt, ZK_EVENT_DELETED, "/a", 5, &r);
    assert_int_equal(r.n, 2);
    assert_int_equal(fired_for(&r, 1), 1);
    assert_int_equal(fired_for(&r, 2), 1);
    assert_int_equal(watch_count(wt), 0);
    watch_table_free(wt);
}

static void test_one_notification_across_ancestors(void **state)
{
    struct watch_table *wt = table();
    struct recorder r;
    assert_int_equal(add(wt, "/", WATCH_PERSISTENT_RECURSIVE, 1, 0), ZK_OK);
    assert_int_equal(add(wt, "/a", WATCH_PERSISTENT_RECURSIVE, 1, 0), ZK_OK);
    assert_int_equal(add(wt, "/a/b", WATCH_PERSISTENT_RECURSIVE, 1, 0), ZK_OK);
    assert_int_equal(add(wt, "/a/b/c", WATCH_DATA, 1, 0), ZK_OK);
    assert_int_equal(add(wt, "/a/b/c", WATCH_PERSISTENT, 1, 0), ZK_OK);
    assert_int_equal(add(wt, "/a", WATCH_PERSISTENT_RECURSIVE, 2, 0), ZK_OK);
    assert_int_equal(add(wt, "/a/b/c", WATCH_EXIST, 3, 0), ZK_OK);
    fire(wt, ZK_EVENT_DATA_CHANGED, "/a/b/c", 9, &r);
    assert_int_equal(r.n, 3);
    assert_int_equal(fired_for(&r, 1), 1);
    assert_int_equal(fired_for(&r, 2), 1);
    assert_int_equal(fired_for(&r, 3), 1);
    /* conn 1 lost its data watch, conn 3 its exist watch. */
    assert_int_equal(watch_count(wt), 5);
    /* A second event notifies each connection once again, each fire call
     * being its own round. */
    fire(wt, ZK_EVENT_DATA_CHANGED, "/a/b/c", 10, &r);
    assert_int_equal(r.n, 2);
    assert_int_equal(fired_for(&r, 1), 1);
    assert_int_equal(fired_for(&r, 2), 1);
    watch_table_free(wt);
}

/* ---- one-shot and persistent ---------------------------------------------------- */

static void test_one_shot_fires_once_persistent_stays(void **state)
{
    struct watch_table *wt = table();
    struct recorder r;
    assert_int_equal(add(wt, "/a", WATCH_DATA, 1, 0), ZK_OK);
    assert_int_equal(add(wt, "/a", WATCH_PERSISTENT, 2, 0), ZK_OK);
    assert_int_equal(add(wt, "/a", WATCH_CHILD, 3, 0), ZK_OK);

    fire(wt, ZK_EVENT_DATA_CHANGED, "/a", 5, &r);
    assert_int_equal(fired_for(&r, 1), 1);
    assert_int_equal(fired_for(&r, 2), 1);
    assert_int_equal(fired_for(&r, 3), 0);
    fire(wt, ZK_EVENT_DATA_CHANGED, "/a", 6, &r);
    assert_int_equal(fired_for(&r, 1), 0);
    assert_int_equal(fired_for(&r, 2), 1);
    fire(wt, ZK_EVENT_CHILD_CHANGED, "/a", 7, &r);
    assert_int_equal(fired_for(&r, 2), 1);
    assert_int_equal(fired_for(&r, 3), 1);
    fire(wt, ZK_EVENT_CHILD_CHANGED, "/a", 8, &r);
    assert_int_equal(r.n, 1);
    assert_int_equal(r.ev[0].conn, 2);
    fire(wt, ZK_EVENT_DELETED, "/a", 9, &r);
    assert_int_equal(r.n, 1);
    assert_int_equal(watch_count(wt), 1);
    watch_table_free(wt);
}

/* A one-shot watch firing next to a persistent one of the same connection
 * only removes the one-shot kind. */
static void test_one_shot_removed_persistent_kept_same_conn(void **state)
{
    struct watch_table *wt = table();
    struct recorder r;
    assert_int_equal(add(wt, "/a", WATCH_DATA, 1, 0), ZK_OK);
    assert_int_equal(add(wt, "/a", WATCH_PERSISTENT_RECURSIVE, 1, 0), ZK_OK);
    fire(wt, ZK_EVENT_DATA_CHANGED, "/a", 5, &r);
    assert_int_equal(r.n, 1);
    assert_int_equal(watch_count(wt), 1);
    assert_int_equal(rm(wt, "/a", 1, ZK_WATCHER_DATA, false, NULL), ZK_ENOWATCHER);
    assert_int_equal(rm(wt, "/a", 1, ZK_WATCHER_ANY, false, NULL), ZK_OK);
    watch_table_free(wt);
}

/* ---- recursive ancestors ------------------------------------------------------------ */

static void test_recursive_on_root_and_ancestors(void **state)
{
    struct watch_table *wt = table();
    struct recorder r;
    assert_int_equal(add(wt, "/", WATCH_PERSISTENT_RECURSIVE, 1, 0), ZK_OK);
    assert_int_equal(add(wt, "/a", WATCH_PERSISTENT_RECURSIVE, 2, 0), ZK_OK);
    assert_int_equal(add(wt, "/a/b", WATCH_PERSISTENT_RECURSIVE, 3, 0), ZK_OK);

    fire(wt, ZK_EVENT_CREATED, "/a/b/c", 5, &r);
    assert_int_equal(r.n, 3);
    fire(wt, ZK_EVENT_CREATED, "/a/b", 6, &r);
    assert_int_equal(r.n, 3); /* on its own path too */
    fire(wt, ZK_EVENT_DELETED, "/a", 7, &r);
    assert_int_equal(r.n, 2);
    assert_int_equal(fired_for(&r, 3), 0);
    fire(wt, ZK_EVENT_DATA_CHANGED, "/", 8, &r);
    assert_int_equal(r.n, 1);
    assert_int_equal(r.ev[0].conn, 1);
    fire(wt, ZK_EVENT_CREATED, "/zzz", 9, &r);
    assert_int_equal(r.n, 1);
    assert_int_equal(r.ev[0].conn, 1);
    /* Child events never reach recursive watches, not even on the parent. */
    fire(wt, ZK_EVENT_CHILD_CHANGED, "/a", 10, &r);
    assert_int_equal(r.n, 0);
    assert_int_equal(watch_count(wt), 3);
    watch_table_free(wt);
}

/* "/a" is a string prefix of "/ab" but not an ancestor. */
static void test_recursive_needs_segment_boundary(void **state)
{
    struct watch_table *wt = table();
    struct recorder r;
    assert_int_equal(add(wt, "/a", WATCH_PERSISTENT_RECURSIVE, 1, 0), ZK_OK);
    assert_int_equal(add(wt, "/ab/c", WATCH_PERSISTENT_RECURSIVE, 2, 0), ZK_OK);
    fire(wt, ZK_EVENT_CREATED, "/ab", 5, &r);
    assert_int_equal(r.n, 0);
    fire(wt, ZK_EVENT_CREATED, "/ab/c/d", 6, &r);
    assert_int_equal(r.n, 1);
    assert_int_equal(r.ev[0].conn, 2);
    fire(wt, ZK_EVENT_CREATED, "/ab/cd", 7, &r);
    assert_int_equal(r.n, 0);
    fire(wt, ZK_EVENT_CREATED, "/a/b", 8, &r);
    assert_int_equal(r.n, 1);
    assert_int_equal(r.ev[0].conn, 1);
    watch_table_free(wt);
}

/* ---- seen_zxid ------------------------------------------------------------------ */

static void test_seen_zxid_filters_old_events(void **state)
{
    struct watch_table *wt = table();
    struct recorder r;
    assert_int_equal(add(wt, "/a", WATCH_DATA, 1, 10), ZK_OK);
    assert_int_equal(add(wt, "/", WATCH_PERSISTENT_RECURSIVE, 2, 10), ZK_OK);
    assert_int_equal(add(wt, "/a", WATCH_PERSISTENT, 3, 12), ZK_OK);

    fire(wt, ZK_EVENT_DATA_CHANGED, "/a", 9, &r);
    assert_int_equal(r.n, 0);
    fire(wt, ZK_EVENT_DATA_CHANGED, "/a", 10, &r);
    assert_int_equal(r.n, 0);
    assert_int_equal(watch_count(wt), 3); /* the one-shot watch is still armed */
    fire(wt, ZK_EVENT_DATA_CHANGED, "/a", 11, &r);
    assert_int_equal(r.n, 2);
    assert_int_equal(fired_for(&r, 1), 1);
    assert_int_equal(fired_for(&r, 2), 1);
    fire(wt, ZK_EVENT_DATA_CHANGED, "/a", 13, &r);
    assert_int_equal(r.n, 2);
    assert_int_equal(fired_for(&r, 2), 1);
    assert_int_equal(fired_for(&r, 3), 1);
    watch_table_free(wt);
}

/* Registering a kind again keeps one watch and the older seen_zxid, so the
 * first read's promise of a notification still holds; an event the newer
 * read already saw fires that promise but leaves the watch armed from the
 * newer view, which a later event then fires once. */
static void test_duplicate_add_keeps_one_watch_and_oldest_zxid(void **state)
{
    struct watch_table *wt = table();
    struct recorder r;
    assert_int_equal(add(wt, "/a", WATCH_DATA, 1, 10), ZK_OK);
    assert_int_equal(add(wt, "/a", WATCH_DATA, 1, 20), ZK_OK);
    assert_int_equal(watch_count(wt), 1);
    fire(wt, ZK_EVENT_DATA_CHANGED, "/a", 15, &r);
    assert_int_equal(r.n, 1);
    assert_int_equal(watch_count(wt), 1); /* the read that saw 20 still waits */
    fire(wt, ZK_EVENT_DATA_CHANGED, "/a", 18, &r);
    assert_int_equal(r.n, 0);
    fire(wt, ZK_EVENT_DATA_CHANGED, "/a", 21, &r);
    assert_int_equal(r.n, 1);
    assert_int_equal(watch_count(wt), 0);

    /* the same in the other order */
    assert_int_equal(add(wt, "/a", WATCH_DATA, 1, 20), ZK_OK);
    assert_int_equal(add(wt, "/a", WATCH_DATA, 1, 10), ZK_OK);
    fire(wt, ZK_EVENT_DATA_CHANGED, "/a", 15, &r);
    assert_int_equal(r.n, 1);
    assert_int_equal(watch_count(wt), 1);
    /* an event past both views spends it */
    fire(wt, ZK_EVENT_DELETED, "/a", 25, &r);
    assert_int_equal(r.n, 1);
    assert_int_equal(watch_count(wt), 0);
    watch_table_free(wt);
}

/* ---- remove / check ----------------------------------------------------------------- */

static void add_all_kinds(struct watch_table *wt, const char *path, uint64_t conn)
{
    for (size_t k = 0; k < 5; k++)
        assert_int_equal(add(wt, path, kinds[k], conn, 0), ZK_OK);
}

static void test_check_reports_without_removing(void **state)
{
    struct watch_table *wt = table();
    struct recorder r;
    add_all_kinds(wt, "/a", 1);
    static const int32_t types[] = { ZK_WATCHER_CHILDREN, ZK_WATCHER_DATA, ZK_WATCHER_ANY, 4, 5 };
    for (size_t i = 0; i < 5; i++) {
        assert_int_equal(rm(wt, "/a", 1, types[i], false, &r), ZK_OK);
        assert_int_equal(r.n, 0);
    }
    assert_int_equal(watch_count(wt), 5);
    assert_int_equal(rm(wt, "/a", 2, ZK_WATCHER_ANY, false, &r), ZK_ENOWATCHER);
    assert_int_equal(rm(wt, "/b", 1, ZK_WATCHER_ANY, false, &r), ZK_ENOWATCHER);
    watch_table_free(wt);
}

static void test_remove_each_type(void **state)
{
    struct watch_table *wt = table();
    struct recorder r;
    add_all_kinds(wt, "/a", 1);

    assert_int_equal(rm(wt, "/a", 1, ZK_WATCHER_CHILDREN, true, &r), ZK_OK);
    assert_int_equal(r.n, 1);
    assert_int_equal(r.ev[0].type, ZK_EVENT_CHILD_WATCH_REMOVED);
    assert_string_equal(r.ev[0].path, "/a");
    assert_int_equal(watch_count(wt), 4);
    assert_int_equal(rm(wt, "/a", 1, ZK_WATCHER_CHILDREN, true, &r), ZK_ENOWATCHER);
    assert_int_equal(rm(wt, "/a", 1, ZK_WATCHER_CHILDREN, false, &r), ZK_ENOWATCHER);
    assert_int_equal(r.n, 0);

    /* Data covers both data and exists watches: one event for the pair. */
    assert_int_equal(rm(wt, "/a", 1, ZK_WATCHER_DATA, true, &r), ZK_OK);
    assert_int_equal(r.n, 1);
    assert_int_equal(r.ev[0].type, ZK_EVENT_DATA_WATCH_REMOVED);
    assert_int_equal(watch_count(wt), 2);
    assert_int_equal(rm(wt, "/a", 1, ZK_WATCHER_DATA, false, &r), ZK_ENOWATCHER);

    /* Any takes the persistent modes too. */
    assert_int_equal(rm(wt, "/a", 1, ZK_WATCHER_ANY, true, &r), ZK_OK);
    assert_int_equal(r.n, 1);
    assert_int_equal(r.ev[0].type, ZK_EVENT_PERSISTENT_WATCH_REMOVED);
    assert_int_equal(watch_count(wt), 0);
    assert_int_equal(rm(wt, "/a", 1, ZK_WATCHER_ANY, true, &r), ZK_ENOWATCHER);

    /* The removed recursive watch no longer fires for descendants. */
    fire(wt, ZK_EVENT_CREATED, "/a/b", 5, &r);
    assert_int_equal(r.n, 0);
    watch_table_free(wt);
}

static void test_remove_any_reports_each_family(void **state)
{
    struct watch_table *wt = table();
    struct recorder r;
    add_all_kinds(wt, "/a", 1);
    assert_int_equal(rm(wt, "/a", 1, ZK_WATCHER_ANY, true, &r), ZK_OK);
    assert_int_equal(r.n, 3);
    assert_int_equal(r.ev[0].type, ZK_EVENT_DATA_WATCH_REMOVED);
    assert_int_equal(r.ev[1].type, ZK_EVENT_CHILD_WATCH_REMOVED);
    assert_int_equal(r.ev[2].type, ZK_EVENT_PERSISTENT_WATCH_REMOVED);
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(r.ev[i].conn, 1);
    assert_int_equal(watch_count(wt), 0);
    watch_table_free(wt);
}

/* Types 4 and 5 (WatcherType.Persistent / PersistentRecursive, ZooKeeper 3.9+)
 * take only their own mode; unknown types are bad arguments. */
static void test_remove_persistent_types(void **state)
{
    struct watch_table *wt = table();
    struct recorder r;
    add_all_kinds(wt, "/a", 1);
    assert_int_equal(rm(wt, "/a", 1, 4, true, &r), ZK_OK);
    assert_int_equal(r.n, 1);
    assert_int_equal(r.ev[0].type, ZK_EVENT_PERSISTENT_WATCH_REMOVED);
    assert_int_equal(watch_count(wt), 4);
    assert_int_equal(rm(wt, "/a", 1, 4, true, &r), ZK_ENOWATCHER);
    assert_int_equal(rm(wt, "/a", 1, 5, true, &r), ZK_OK);
    assert_int_equal(watch_count(wt), 3);
    assert_int_equal(rm(wt, "/a", 1, 5, false, &r), ZK_ENOWATCHER);
    /* Neither Data nor Children touch persistent watches. */
    assert_int_equal(add(wt, "/b", WATCH_PERSISTENT, 1, 0), ZK_OK);
    assert_int_equal(rm(wt, "/b", 1, ZK_WATCHER_DATA, true, &r), ZK_ENOWATCHER);
    assert_int_equal(rm(wt, "/b", 1, ZK_WATCHER_CHILDREN, true, &r), ZK_ENOWATCHER);
    assert_int_equal(rm(wt, "/b", 1, 0, true, &r), ZK_EBADARGUMENTS);
    assert_int_equal(rm(wt, "/b", 1, 6, true, &r), ZK_EBADARGUMENTS);
    assert_int_equal(watch_count(wt), 4);
    watch_table_free(wt);
}

static void test_remove_other_conn_untouched_and_null_fire(void **state)
{
    struct watch_table *wt = table();
    assert_int_equal(add(wt, "/a", WATCH_DATA, 1, 0), ZK_OK);
    assert_int_equal(add(wt, "/a", WATCH_DATA, 2, 0), ZK_OK);
    assert_int_equal(rm(wt, "/a", 3, ZK_WATCHER_ANY, true, NULL), ZK_ENOWATCHER);
    assert_int_equal(rm(wt, "/a", 1, ZK_WATCHER_DATA, true, NULL), ZK_OK);
    assert_int_equal(watch_count(wt), 1);
    assert_int_equal(rm(wt, "/a", 2, ZK_WATCHER_DATA, false, NULL), ZK_OK);
    watch_table_free(wt);
}

/* ---- remove_conn, counts, each ---------------------------------------------------- */

static void test_remove_conn(void **state)
{
    struct watch_table *wt = table();
    struct recorder r;
    add_all_kinds(wt, "/a", 1);
    add_all_kinds(wt, "/b", 1);
    assert_int_equal(add(wt, "/", WATCH_PERSISTENT_RECURSIVE, 1, 0), ZK_OK);
    assert_int_equal(add(wt, "/a", WATCH_DATA, 2, 0), ZK_OK);
    assert_int_equal(watch_count(wt), 12);

    watch_remove_conn(wt, 1);
    assert_int_equal(watch_count(wt), 1);
    fire(wt, ZK_EVENT_DELETED, "/a", 5, &r);
    assert_int_equal(r.n, 1);
    assert_int_equal(r.ev[0].conn, 2);
    fire(wt, ZK_EVENT_CREATED, "/b/c", 6, &r);
    assert_int_equal(r.n, 0);
    watch_remove_conn(wt, 99); /* unknown: no effect */
    watch_remove_conn(wt, 1);
    assert_int_equal(watch_count(wt), 0);

    /* The connection can watch again afterwards. */
    assert_int_equal(add(wt, "/a", WATCH_CHILD, 1, 0), ZK_OK);
    fire(wt, ZK_EVENT_CHILD_CHANGED, "/a", 7, &r);
    assert_int_equal(r.n, 1);
    watch_table_free(wt);
}

struct tally {
    size_t n;
    size_t per_kind[6];
    size_t conn1_on_a;
};

static void tally_visit(void *arg, uint64_t conn, enum watch_kind kind, const char *path)
{
    struct tally *t = arg;
    t->n++;
    t->per_kind[kind]++;
    if (conn == 1 && strcmp(path, "/a") == 0)
        t->conn1_on_a++;
}

static void test_count_and_each(void **state)
{
    struct watch_table *wt = table();
    struct tally t = { 0 };
    assert_int_equal(watch_count(wt), 0);
    add_all_kinds(wt, "/a", 1);
    assert_int_equal(add(wt, "/a", WATCH_DATA, 2, 0), ZK_OK);
    assert_int_equal(add(wt, "/b", WATCH_CHILD, 1, 0), ZK_OK);
    assert_int_equal(add(wt, "/b", WATCH_CHILD, 1, 5), ZK_OK); /* same triple */
    assert_int_equal(watch_count(wt), 7);
    watch_each(wt, tally_visit, &t);
    assert_int_equal(t.n, 7);
    assert_int_equal(t.per_kind[WATCH_DATA], 2);
    assert_int_equal(t.per_kind[WATCH_CHILD], 2);
    assert_int_equal(t.per_kind[WATCH_EXIST], 1);
    assert_int_equal(t.per_kind[WATCH_PERSISTENT], 1);
    assert_int_equal(t.per_kind[WATCH_PERSISTENT_RECURSIVE], 1);
    assert_int_equal(t.conn1_on_a, 5);
    watch_table_free(wt);
}

static void test_add_rejects_bad_kind_and_uses_len(void **state)
{
    struct watch_table *wt = table();
    struct recorder r;
    assert_int_equal(watch_add(wt, "/a", 2, (enum watch_kind)0, 1, 0), ZK_EBADARGUMENTS);
    assert_int_equal(watch_add(wt, "/a", 2, (enum watch_kind)6, 1, 0), ZK_EBADARGUMENTS);
    assert_int_equal(watch_count(wt), 0);
    /* Only len bytes of the path count. */
    assert_int_equal(watch_add(wt, "/abc", 2, WATCH_DATA, 1, 0), ZK_OK);
    fire(wt, ZK_EVENT_DATA_CHANGED, "/abc", 5, &r);
    assert_int_equal(r.n, 0);
    fire(wt, ZK_EVENT_DATA_CHANGED, "/a", 5, &r);
    assert_int_equal(r.n, 1);
    watch_table_free(wt);
}

/* Enough paths and connections to grow both hash tables several times;
 * every watch must still be found, fire once and go away. */
static void test_many_paths_and_conns(void **state)
{
    enum { PATHS = 3000, CONNS = 3 };
    struct watch_table *wt = table();
    struct recorder r;
    char path[32];
    for (int i = 0; i < PATHS; i++) {
        snprintf(path, sizeof path, "/n/%d", i);
        for (uint64_t c = 0; c < CONNS; c++)
            assert_int_equal(add(wt, path, WATCH_DATA, c * 1000003u + (uint64_t)i, 0), ZK_OK);
    }
    assert_int_equal(watch_count(wt), PATHS * CONNS);
    for (int i = 0; i < PATHS; i++) {
        snprintf(path, sizeof path, "/n/%d", i);
        fire(wt, ZK_EVENT_DATA_CHANGED, path, 1, &r);
        assert_int_equal(r.n, CONNS);
    }
    assert_int_equal(watch_count(wt), 0);
    /* Then a connection holding many paths, dropped at once. */
    for (int i = 0; i < PATHS; i++) {
        snprintf(path, sizeof path, "/m/%d", i);
        assert_int_equal(add(wt, path, WATCH_CHILD, 42, 0), ZK_OK);
        assert_int_equal(add(wt, path, WATCH_PERSISTENT_RECURSIVE, 42, 0), ZK_OK);
    }
    assert_int_equal(watch_count(wt), 2 * PATHS);
    watch_remove_conn(wt, 42);
    assert_int_equal(watch_count(wt), 0);
    fire(wt, ZK_EVENT_CREATED, "/m/7/x", 2, &r);
    assert_int_equal(r.n, 0);
    watch_table_free(wt);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_event_vs_every_kind_on_path),
        cmocka_unit_test(test_every_event_vs_every_kind_on_ancestor),
        cmocka_unit_test(test_other_event_types_fire_nothing),
        cmocka_unit_test(test_deleted_data_and_child_notify_once),
        cmocka_unit_test(test_one_notification_across_ancestors),
        cmocka_unit_test(test_one_shot_fires_once_persistent_stays),
        cmocka_unit_test(test_one_shot_removed_persistent_kept_same_conn),
        cmocka_unit_test(test_recursive_on_root_and_ancestors),
        cmocka_unit_test(test_recursive_needs_segment_boundary),
        cmocka_unit_test(test_seen_zxid_filters_old_events),
        cmocka_unit_test(test_duplicate_add_keeps_one_watch_and_oldest_zxid),
        cmocka_unit_test(test_check_reports_without_removing),
        cmocka_unit_test(test_remove_each_type),
        cmocka_unit_test(test_remove_any_reports_each_family),
        cmocka_unit_test(test_remove_persistent_types),
        cmocka_unit_test(test_remove_other_conn_untouched_and_null_fire),
        cmocka_unit_test(test_remove_conn),
        cmocka_unit_test(test_count_and_each),
        cmocka_unit_test(test_add_rejects_bad_kind_and_uses_len),
        cmocka_unit_test(test_many_paths_and_conns),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
