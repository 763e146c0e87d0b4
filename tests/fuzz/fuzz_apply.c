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
 * the same tree: node, ephemeral and session counts, digest, the sessions'
 * timeouts and recorded passwords, and a re-written snapshot of the same
 * size.
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
        n = base_get_be16(p + off);
        struct txn x;
        if (n > len - off - 2 || txn_decode(p + off + 2, n, &x) != 0) {
            n = n > len - off - 2 ? len - off - 2 : n;
            continue;
        }
        x.zxid = ++zxid;
        int rc = tree_apply(t, &x, NULL, NULL, NULL);
        BASE_ASSERT(rc <= 0 && tree_last_zxid(t) == zxid);
        txn_free(&x);
    }
}

/* Writes t as a snapshot into *m (the caller base_buf_frees it) and returns its info. */
static struct tree_snap_info snapshot(const struct tree *t, struct base_buf *m)
{
    struct tree_snap_info info;
    *m = (struct base_buf){ 0 };
    BASE_ASSERT(tree_snapshot_write(t, fuzz_mem_out, m, &info) == 0);
    BASE_ASSERT(info.size_bytes == m->len && info.digest == tree_digest(t));
    BASE_ASSERT(info.zxid_start == tree_last_zxid(t));
    return info;
}

/* Session s of one tree is in the tree arg with the same fields. */
static void same_session(void *arg, struct tree_session *s)
{
    rcu_read_lock();
    const struct tree_session *o = tree_session_find(arg, s->id);
    BASE_ASSERT(o != NULL && o->timeout_ms == s->timeout_ms);
    BASE_ASSERT(o->passwd_known == s->passwd_known);
    BASE_ASSERT(!memcmp(o->passwd, s->passwd, sizeof o->passwd));
    rcu_read_unlock();
}

static void same_tree(struct tree *a, struct tree *b)
{
    struct tree_stats sa, sb;
    tree_stats(a, &sa);
    tree_stats(b, &sb);
    BASE_ASSERT(sa.node_count == sb.node_count && sa.session_count == sb.session_count);
    BASE_ASSERT(sa.ephemeral_count == sb.ephemeral_count && sa.data_bytes == sb.data_bytes);
    BASE_ASSERT(tree_digest(a) == tree_digest(b) && tree_last_zxid(a) == tree_last_zxid(b));
    tree_session_each(a, same_session, b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool registered;
    if (!registered) {
        rcu_register_thread(); /* tree.h: every tree thread is a liburcu reader */
        registered = true;
    }
    struct tree *a = tree_new(), *b = tree_new();
    BASE_ASSERT(a != NULL && b != NULL);
    apply_all(a, data, size);
    struct base_buf m1, m2;
    struct tree_snap_info w1 = snapshot(a, &m1), loaded;
    uint8_t *exact = fuzz_dup(m1.data, m1.len);
    int rc = tree_snapshot_load(b, exact, m1.len, &loaded);
    BASE_ASSERT(rc == 0);
    BASE_ASSERT(loaded.digest == w1.digest && loaded.node_count == w1.node_count);
    same_tree(a, b);
    struct tree_snap_info w2 = snapshot(b, &m2);
    BASE_ASSERT(w2.size_bytes == w1.size_bytes && w2.session_count == w1.session_count);
    base_buf_free(&m2);
    tree_free(a);
    tree_free(b);
    free(exact);
    base_buf_free(&m1);
    return 0;
}
