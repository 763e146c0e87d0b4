/*
 * bench_snapshot.c — snapshot write and load times for a large tree (the
 * recovery target of issue 4: loading 1M nodes well under 2 s). Not part of
 * the unit suite and asserts nothing about time (STYLE.md: benches never
 * make timed assertions); it only checks that the load reproduced the tree.
 *
 *   bench_snapshot [nodes]   default 1000000, 100-byte values, 1000 per parent
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <urcu.h>

#include "tests/tree_fill.h"
#include "tree/tree.h"

#define VALUE_BYTES 100
#define PER_PARENT 1000

struct mem {
    unsigned char *p;
    size_t len, cap;
};

static int mem_out(void *arg, const void *bytes, size_t len)
{
    struct mem *m = arg;
    if (base_grow(&m->p, &m->cap, m->len + len, 1) != 0)
        return -1;
    memcpy(m->p + m->len, bytes, len);
    m->len += len;
    return 0;
}

static double now_s(void)
{
    return (double)base_mono_ns() / 1e9;
}

int main(int argc, char **argv)
{
    long nodes = argc > 1 ? atol(argv[1]) : 1000000;
    rcu_register_thread();
    struct tree *t = tree_new();
    char value[VALUE_BYTES], path[64];
    memset(value, 'v', sizeof value);
    int64_t zxid = 0;
    double t0 = now_s();
    for (long i = 0; i < nodes; i++) {
        if (i % PER_PARENT == 0) {
            snprintf(path, sizeof path, "/p%ld", i / PER_PARENT);
            tree_fill_create(t, ++zxid, path, value, VALUE_BYTES);
        }
        snprintf(path, sizeof path, "/p%ld/n%ld", i / PER_PARENT, i);
        tree_fill_create(t, ++zxid, path, value, VALUE_BYTES);
    }
    double t1 = now_s();
    struct mem m = { 0 };
    struct tree_snap_info wi, li;
    if (tree_snapshot_write(t, mem_out, &m, &wi) != 0)
        return 1;
    double t2 = now_s();
    struct tree *t3 = tree_new();
    int rc = tree_snapshot_load(t3, m.p, m.len, &li);
    double t4 = now_s();
    int ok = rc == 0 && li.digest == tree_digest(t) && tree_digest(t3) == tree_digest(t);
    printf("nodes %llu, snapshot %.1f MB: build %.2f s, write %.3f s, load %.3f s, %s\n",
           (unsigned long long)wi.node_count, (double)m.len / 1e6, t1 - t0, t2 - t1, t4 - t2,
           ok ? "digest equal" : "MISMATCH");
    free(m.p);
    tree_free(t3);
    tree_free(t);
    rcu_unregister_thread();
    return ok ? 0 : 1;
}
