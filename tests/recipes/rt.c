/* rt.c — see rt.h. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
    int rc = larch_create(lh, path, NULL, -1, NULL, ZK_PERSISTENT, 0, NULL, NULL);
    assert_int_equal(rc, ZK_OK);
    char *out = strdup(path);
    assert_non_null(out);
    return out;
}

int rt_delete_tree(struct larch *lh, const char *path)
{
    struct larch_strings kids = { 0 };
    int rc = larch_get_children(lh, path, NULL, NULL, &kids, NULL);
    if (rc == ZK_ENONODE)
        return ZK_OK;
    for (int32_t i = 0; rc == ZK_OK && i < kids.count; i++) {
        char *child = larch_path_join(path, kids.items[i]);
        rc = child != NULL ? rt_delete_tree(lh, child) : ZK_ESYSTEMERROR;
        free(child);
    }
    larch_strings_free(&kids);
    if (rc == ZK_OK)
        rc = larch_delete(lh, path, -1);
    return rc == ZK_ENONODE ? ZK_OK : rc;
}

int64_t rt_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void rt_sleep_ms(int64_t ms)
{
    struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000 };
    while (nanosleep(&ts, &ts) != 0)
        ;
}
