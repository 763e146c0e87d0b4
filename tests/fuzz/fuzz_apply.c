/*
 * fuzz_apply — txns through tree_apply, then the tree they built through a
 * snapshot (tree/tree.h; the txn codec of replication/txnlog.h).
 *
 * Input: [u16 length][txn_encode bytes]..., each decoded with txn_decode
 * and applied in order to a fresh tree, zxids renumbered 1, 2, ... Recovery
 * applies whatever the log holds, so tree_apply meets txns prep never makes:
 * it returns ZK_OK or an error, never crashes or leaks, and never lets in
 * a path prep would refuse. Whatever it built is then written as a
 * snapshot carrying the live tree's digest, and loads into a fresh tree as
 * the same tree: node, ephemeral and session counts, digest, and a
 * re-written snapshot of the same size.
 *
 * Slow by nature (tens of inputs a second): every input frees two trees,
 * and tree_free waits in rcu_barrier for liburcu's call_rcu thread, which
 * naps 10 ms after each wake-up. fuzz_snapshot fuzzes the loader fast.
 */
#include <errno.h>
#include <urcu.h>

#include "replication/txnlog.h"
#include "tests/fuzz/fuzz.h"

/* Applies the txns of p to t. */
static void apply_all(struct tree *t, const uint8_t *p, size_t len)
{
    int64_t zxid = 0;
    for (size_t off = 0, n; len - off >= 2; off += 2 + n) {
        n = (size_t)(p[off] << 8 | p[off + 1]);
        struct txn x;
        if (n > len - off - 2 || txn_decode(p + off + 2, n, &x) != 0) {
            n = n > len - off - 2 ? len - off - 2 : n;
            continue;
        }
        x.zxid = ++zxid;
        int rc = tree_apply(t, &x, NULL, NULL, NULL);
        FUZZ_CHECK(rc <= 0 && tree_last_zxid(t) == zxid);
        txn_free(&x);
    }
}

/* Writes t as a snapshot into *m (malloc'd) and returns its info. */
static struct tree_snap_info snapshot(const struct tree *t, struct fuzz_mem *m)
{
    struct tree_snap_info info;
    *m = (struct fuzz_mem){ NULL, 0 };
    FUZZ_CHECK(tree_snapshot_write(t, fuzz_mem_out, m, &info) == 0);
    FUZZ_CHECK(info.size_bytes == m->len && info.digest == tree_digest(t));
    FUZZ_CHECK(info.zxid_start == tree_last_zxid(t));
    return info;
}

static void same_tree(const struct tree *a, const struct tree *b)
{
    struct tree_stats sa, sb;
    tree_stats(a, &sa);
    tree_stats(b, &sb);
    FUZZ_CHECK(sa.node_count == sb.node_count && sa.session_count == sb.session_count);
    FUZZ_CHECK(sa.ephemeral_count == sb.ephemeral_count && sa.data_bytes == sb.data_bytes);
    FUZZ_CHECK(tree_digest(a) == tree_digest(b) && tree_last_zxid(a) == tree_last_zxid(b));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool registered;
    if (!registered) {
        rcu_register_thread(); /* tree.h: every tree thread is a liburcu reader */
        registered = true;
    }
    struct tree *a = tree_new(), *b = tree_new();
    FUZZ_CHECK(a != NULL && b != NULL);
    apply_all(a, data, size);
    struct fuzz_mem m1, m2;
    struct tree_snap_info w1 = snapshot(a, &m1), loaded;
    uint8_t *exact = fuzz_dup(m1.p, m1.len);
    int rc = tree_snapshot_load(b, exact, m1.len, &loaded);
    FUZZ_CHECK(rc == 0);
    FUZZ_CHECK(loaded.digest == w1.digest && loaded.node_count == w1.node_count);
    same_tree(a, b);
    struct tree_snap_info w2 = snapshot(b, &m2);
    FUZZ_CHECK(w2.size_bytes == w1.size_bytes && w2.session_count == w1.session_count);
    free(m2.p);
    tree_free(a);
    tree_free(b);
    free(exact);
    free(m1.p);
    return 0;
}
