/*
 * test_group — group membership (seeds 000/002) against a live server
 * (env LARCH_HOSTS): joins and leaves seen by an observer, names held per
 * session, and a member process killed with SIGKILL leaving the list once
 * its session expires.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/recipes/group.h"
#include "tests/recipes/rt.h"

#define MEMBERS 3

static bool has_member(const struct larch_strings *s, const char *name)
{
    for (int32_t i = 0; i < s->count; i++)
        if (strcmp(s->items[i], name) == 0)
            return true;
    return false;
}

/* Waits (bounded by timeout_ms) until the observed list has `count`
 * members and does (present) or does not contain `name` (NULL: any). */
static bool wait_members(struct group *g, int32_t count, const char *name, bool present,
                         int64_t timeout_ms)
{
    int64_t end = base_mono_ms() + timeout_ms;
    for (;;) {
        struct larch_strings s;
        uint64_t gen = 0;
        assert_int_equal(group_members(g, &s, &gen), ZK_OK);
        bool ok = s.count == count && (name == NULL || has_member(&s, name) == present);
        larch_strings_free(&s);
        int64_t left = end - base_mono_ms();
        if (ok || left <= 0)
            return ok;
        int rc = group_wait_change(g, gen, (int32_t)left);
        if (rc != ZK_OK && rc != ZK_EOPERATIONTIMEOUT)
            fail_msg("group_wait_change: %s", larch_error(rc));
    }
}

static void test_join_leave_seen_by_observer(void **state)
{
    struct larch *lh = rt_open();
    char *root = rt_root(lh, "group");
    char *path = rt_path(root, "members");
    struct group *observer = NULL;
    assert_int_equal(group_open(lh, path, NULL, NULL, RT_WAIT_MS, &observer), ZK_OK);
    assert_true(wait_members(observer, 0, NULL, false, RT_WAIT_MS));

    struct larch *mlh[MEMBERS];
    struct group *mg[MEMBERS];
    char names[MEMBERS][16];
    for (int i = 0; i < MEMBERS; i++) {
        mlh[i] = rt_open();
        snprintf(names[i], sizeof names[i], "member-%d", i);
        assert_int_equal(group_open(mlh[i], path, NULL, NULL, RT_WAIT_MS, &mg[i]), ZK_OK);
        assert_int_equal(group_join(mg[i], names[i], "10.0.0.1:80", 11, RT_WAIT_MS), ZK_OK);
    }
    assert_true(wait_members(observer, MEMBERS, NULL, false, RT_WAIT_MS));
    struct larch_strings s;
    assert_int_equal(group_members(observer, &s, NULL), ZK_OK);
    for (int i = 0; i < MEMBERS; i++)
        assert_string_equal(s.items[i], names[i]); /* sorted */
    larch_strings_free(&s);

    /* names belong to sessions */
    assert_int_equal(group_join(mg[0], names[1], NULL, -1, RT_WAIT_MS), ZK_ENODEEXISTS);
    assert_int_equal(group_join(mg[1], names[1], NULL, -1, RT_WAIT_MS), ZK_OK);
    assert_int_equal(group_leave(mg[0], names[1], RT_WAIT_MS), ZK_ENONODE);
    assert_int_equal(group_join(mg[0], "a/b", NULL, -1, RT_WAIT_MS), ZK_EBADARGUMENTS);

    /* an orderly leave, and a member closing its session */
    assert_int_equal(group_leave(mg[1], names[1], RT_WAIT_MS), ZK_OK);
    assert_true(wait_members(observer, MEMBERS - 1, names[1], false, RT_WAIT_MS));
    group_close(mg[2]);
    assert_int_equal(rt_close(mlh[2]), ZK_OK);
    assert_true(wait_members(observer, MEMBERS - 2, names[2], false, RT_WAIT_MS));
    assert_true(wait_members(observer, 1, names[0], true, RT_WAIT_MS));

    for (int i = 0; i < 2; i++) {
        group_close(mg[i]);
        larch_close(mlh[i]);
    }
    group_close(observer);
    free(path);
    rt_finish(lh, root);
}

/* The member process (an rt_child_fn): joins as "doomed" on its own
 * session. */
static const char *member_child(struct larch *lh, void *path)
{
    struct group *g = NULL;
    if (group_open(lh, path, NULL, NULL, RT_WAIT_MS, &g) != ZK_OK ||
        group_join(g, "doomed", NULL, -1, RT_WAIT_MS) != ZK_OK)
        return NULL;
    return "joined";
}

/* A member process killed with SIGKILL leaves nothing behind but its
 * session; the observer sees it leave once that expires. */
static void test_killed_member_leaves(void **state)
{
    struct larch *lh = rt_open();
    char *root = rt_root(lh, "group");
    char *path = rt_path(root, "members");
    /* fork while this process has no handle open (no other threads) */
    larch_close(lh);
    pid_t pid = rt_spawn(member_child, path, NULL, 0);
    lh = rt_open();
    struct group *observer = NULL;
    assert_int_equal(group_open(lh, path, NULL, NULL, RT_WAIT_MS, &observer), ZK_OK);
    assert_true(wait_members(observer, 1, "doomed", true, RT_WAIT_MS));
    struct larch *slh = rt_open();
    struct group *survivor = NULL;
    assert_int_equal(group_open(slh, path, NULL, NULL, RT_WAIT_MS, &survivor), ZK_OK);
    assert_int_equal(group_join(survivor, "survivor", NULL, -1, RT_WAIT_MS), ZK_OK);
    assert_true(wait_members(observer, 2, "survivor", true, RT_WAIT_MS));

    rt_kill(pid);
    /* liveness bound: the session expires within its timeout */
    assert_true(wait_members(observer, 1, "doomed", false, RT_SESSION_TIMEOUT_MS * 3));
    assert_true(wait_members(observer, 1, "survivor", true, 0));

    group_close(survivor);
    larch_close(slh);
    group_close(observer);
    free(path);
    rt_finish(lh, root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_join_leave_seen_by_observer),
        cmocka_unit_test(test_killed_member_leaves),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
