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

#include <stdint.h>

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
/* Creates a new persistent root "/rt-<name>-<pid>-<n>" and returns it (malloc'd). */
char *rt_root(struct larch *lh, const char *name);
/* Deletes path and everything under it; ZK_OK or the first error other
 * than ZK_ENONODE. */
int rt_delete_tree(struct larch *lh, const char *path);
/* Milliseconds on the monotonic clock. */
int64_t rt_now_ms(void);
/* Sleeps ms milliseconds. */
void rt_sleep_ms(int64_t ms);

#endif
