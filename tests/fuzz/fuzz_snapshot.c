/*
 * fuzz_snapshot — tree_snapshot_load (tree/tree.h) on arbitrary bytes.
 *
 * Input: a mode byte, then the snapshot. Mode bit 0 set: the target first
 * rewrites the trailer's CRC-32C to match, so mutations get past the CRC to
 * the record parser. The trailer's digest, which covers every node field,
 * still stops almost every mutated snapshot before publishing (measured:
 * none of a 5-minute run's corpus loads); publishing is fed by the seeds
 * here and by fuzz_apply, which loads snapshots of trees built from
 * arbitrary txns.
 *
 * Properties: a load that fails returns one of the documented errors and
 * leaves the tree exactly as tree_new made it (so one fresh tree serves
 * every failing input: that is also how the check is made). A load that
 * succeeds describes the tree it built: node and session counts, digest and
 * zxid_start as the trailer said; writing that tree gives a snapshot of the
 * same size (a version-1 input: 17 bytes more per session, the flags and
 * password it lacked), counts and digest, which loads again into a fresh
 * tree with the same sessions, passwords included.
 *
 * liburcu: the fuzzing thread registers itself once (tree.h threading rules).
 */
#include <errno.h>
#include <urcu.h>

#include "tests/fuzz/fuzz.h"
#include "tree/tree.h"

static struct tree *fresh; /* as tree_new made it; replaced after each load */
static uint64_t fresh_digest;

static void check_fresh(const struct tree *t)
{
    struct tree_stats st;
    tree_stats(t, &st);
    BASE_ASSERT(st.node_count == 4 && st.session_count == 0 && st.ephemeral_count == 0);
    BASE_ASSERT(st.last_zxid == 0 && tree_digest(t) == fresh_digest);
}

static void new_fresh(void)
{
    fresh = tree_new();
    BASE_ASSERT(fresh != NULL);
    if (fresh_digest == 0)
        fresh_digest = tree_digest(fresh);
    check_fresh(fresh);
}

/* The session s of one tree is in the tree arg, with the same fields. */
static void same_session(void *arg, struct tree_session *s)
{
    rcu_read_lock();
    const struct tree_session *o = tree_session_find(arg, s->id);
    BASE_ASSERT(o != NULL && o->timeout_ms == s->timeout_ms);
    BASE_ASSERT(o->passwd_known == s->passwd_known);
    BASE_ASSERT(!memcmp(o->passwd, s->passwd, sizeof o->passwd));
    rcu_read_unlock();
}

/* snap (len bytes) loaded into t as in says. */
static void check_loaded(struct tree *t, const struct tree_snap_info *in, const uint8_t *snap,
                         size_t len)
{
    struct tree_stats st;
    tree_stats(t, &st);
    BASE_ASSERT(in->size_bytes == len && tree_digest(t) == in->digest);
    BASE_ASSERT((uint64_t)st.node_count == in->node_count);
    BASE_ASSERT((uint64_t)st.session_count == in->session_count);
    BASE_ASSERT(tree_last_zxid(t) == in->zxid_start);

    struct base_buf m = { 0 };
    struct tree_snap_info out, again;
    BASE_ASSERT(tree_snapshot_write(t, fuzz_mem_out, &m, &out) == 0);
    size_t want = base_get_le32(snap + 4) == 1 ? len + 17 * in->session_count : len;
    BASE_ASSERT(out.size_bytes == m.len && m.len == want && out.digest == in->digest);
    BASE_ASSERT(out.node_count == in->node_count && out.session_count == in->session_count);
    BASE_ASSERT(out.zxid_start == in->zxid_start);
    uint8_t *exact = fuzz_dup(m.data, m.len);
    struct tree *t2 = tree_new();
    BASE_ASSERT(t2 != NULL && tree_snapshot_load(t2, exact, m.len, &again) == 0);
    BASE_ASSERT(again.digest == in->digest && tree_digest(t2) == in->digest);
    BASE_ASSERT(again.session_count == in->session_count);
    tree_session_each(t, same_session, t2);
    tree_free(t2);
    free(exact);
    base_buf_free(&m);
}

static bool documented(int rc)
{
    return rc == -ENOMEM || (rc <= TREE_SNAP_ETRUNC && rc >= TREE_SNAP_ENOTFRESH);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool registered;
    if (!registered) {
        rcu_register_thread();
        new_fresh();
        registered = true;
    }
    if (size == 0)
        return 0;
    size_t len = size - 1;
    uint8_t *snap = fuzz_dup(data + 1, len);
    if ((data[0] & 1) && len >= 4) {
        /* little-endian, as tree.h says */
        base_put_le32(snap + len - 4, base_crc32c(0, snap, len - 4));
    }
    struct tree_snap_info info;
    int rc = tree_snapshot_load(fresh, snap, len, &info);
    BASE_ASSERT(rc == 0 || (documented(rc) && rc != TREE_SNAP_ENOTFRESH));
    if (rc == 0) {
        check_loaded(fresh, &info, snap, len);
        tree_free(fresh);
        new_fresh();
    } else {
        check_fresh(fresh);
    }
    free(snap);
    return 0;
}
