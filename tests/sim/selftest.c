/* selftest — see selftest.h. */
#include "tests/sim/selftest.h"

#include <stdlib.h>
#include <string.h>

#include "tests/sim/disk.h"
#include "tests/sim/kv.h"
#include "tests/sim/lin.h"
#include "tests/sim/rng.h"

static int failures;

#define EXPECT(out, cond)                                                                    \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            fprintf(out, "self-test failed: %s:%d: %s\n", __FILE__, __LINE__, #cond);         \
            failures++;                                                                      \
        }                                                                                    \
    } while (0)

static struct lin_op W(int64_t v, int64_t call, int64_t ret)
{
    return (struct lin_op){.kind = LIN_WRITE, .value = v, .call = call, .ret = ret};
}

static struct lin_op R(int64_t v, int64_t call, int64_t ret)
{
    return (struct lin_op){.kind = LIN_READ, .value = v, .call = call, .ret = ret};
}

static struct lin_op CAS(int64_t expect, int64_t v, bool ok, int64_t call, int64_t ret)
{
    return (struct lin_op){.kind = LIN_CAS, .expect = expect, .value = v, .cas_ok = ok,
                           .call = call, .ret = ret};
}

static struct lin_op UNKNOWN(struct lin_op op)
{
    op.unknown = true;
    op.ret = 0;
    return op;
}

#define LIN(out, want, ...)                                                                  \
    do {                                                                                     \
        struct lin_op h_[] = {__VA_ARGS__};                                                  \
        EXPECT(out, lin_check(h_, sizeof(h_) / sizeof(h_[0]), 0) == (want));                 \
    } while (0)

/* Small histories whose verdict is known by hand. */
static void test_lin_hand_made(FILE *out)
{
    LIN(out, LIN_OK, W(1, 1, 2), R(1, 3, 4));
    /* A read that starts after a write returned must see it. */
    LIN(out, LIN_VIOLATION, W(1, 1, 2), R(0, 3, 4));
    /* Concurrent with the write: either value. */
    LIN(out, LIN_OK, W(1, 1, 6), R(0, 2, 3), R(1, 4, 5));
    LIN(out, LIN_OK, W(1, 1, 6), R(1, 2, 3));
    /* ...but once one read saw it, a later read cannot go back. */
    LIN(out, LIN_VIOLATION, W(1, 1, 6), R(1, 2, 3), R(0, 4, 5));
    /* A read of a value nobody wrote. */
    LIN(out, LIN_VIOLATION, W(1, 1, 2), R(7, 3, 4));
    /* cas: the result must fit the register. */
    LIN(out, LIN_OK, W(1, 1, 2), CAS(1, 2, true, 3, 4), R(2, 5, 6));
    LIN(out, LIN_VIOLATION, W(1, 1, 2), CAS(1, 2, false, 3, 4));
    LIN(out, LIN_VIOLATION, W(1, 1, 2), CAS(0, 2, true, 3, 4));
    LIN(out, LIN_OK, W(1, 1, 2), CAS(0, 2, false, 3, 4), R(1, 5, 6));
    /* Two cas racing on one value: only one may win. */
    LIN(out, LIN_OK, CAS(0, 1, true, 1, 4), CAS(0, 2, false, 2, 3), R(1, 5, 6));
    LIN(out, LIN_VIOLATION, CAS(0, 1, true, 1, 4), CAS(0, 2, true, 2, 3));
    /* Unknown outcome: may take effect after its call, or never. */
    LIN(out, LIN_OK, UNKNOWN(W(7, 1, 0)), R(7, 2, 3));
    LIN(out, LIN_OK, UNKNOWN(W(7, 1, 0)), R(0, 2, 3));
    LIN(out, LIN_OK, UNKNOWN(W(7, 1, 0)), R(0, 2, 3), R(7, 4, 5));
    LIN(out, LIN_VIOLATION, UNKNOWN(W(7, 1, 0)), R(7, 2, 3), R(0, 4, 5));
    LIN(out, LIN_VIOLATION, R(7, 1, 2), UNKNOWN(W(7, 3, 0)));
    LIN(out, LIN_OK, W(1, 1, 2), UNKNOWN(CAS(1, 5, false, 3, 0)), R(5, 4, 6));
    LIN(out, LIN_OK, W(1, 1, 2), UNKNOWN(CAS(9, 5, false, 3, 0)), R(1, 4, 6));
    LIN(out, LIN_VIOLATION, W(1, 1, 2), UNKNOWN(CAS(9, 5, false, 3, 0)), R(5, 4, 6));
}

/* A register driven by 4 overlapping clients, each op taking effect at a
 * random instant inside its interval: linearizable by construction. Then
 * one read is made to return a value that was never there. */
static size_t generate_history(struct rng *g, struct lin_op *ops, size_t n)
{
    int64_t reg = 0, t = 0;
    int64_t busy_until[4] = {0};
    for (size_t i = 0; i < n; i++) {
        int c = (int)rng_below(g, 4);
        int64_t call = (t > busy_until[c] ? t : busy_until[c]) + 1;
        int64_t point = call + rng_range(g, 1, 3);
        int64_t ret = point + rng_range(g, 1, 20);
        busy_until[c] = ret;
        t = point; /* effects happen in index order */
        uint64_t kind = rng_below(g, 3);
        if (kind == 0) {
            reg = (int64_t)i + 1;
            ops[i] = W(reg, call * 2, ret * 2 + 1);
        } else if (kind == 1) {
            bool ok = reg == (int64_t)i;
            ops[i] = CAS((int64_t)i, (int64_t)i + 100, ok, call * 2, ret * 2 + 1);
            reg = ok ? (int64_t)i + 100 : reg;
        } else {
            ops[i] = R(reg, call * 2, ret * 2 + 1);
        }
    }
    return n;
}

static void test_lin_generated(FILE *out)
{
    struct rng g;
    rng_seed(&g, 42);
    for (int round = 0; round < 50; round++) {
        struct lin_op ops[LIN_OPS_MAX];
        size_t n = generate_history(&g, ops, LIN_OPS_MAX);
        EXPECT(out, lin_check(ops, n, 0) == LIN_OK);
        for (size_t i = n; i > 0; i--) {
            if (ops[i - 1].kind == LIN_READ) {
                ops[i - 1].value = -5;
                EXPECT(out, lin_check(ops, n, 0) == LIN_VIOLATION);
                break;
            }
        }
    }
}

static struct raft_entry entry(int64_t zxid, const uint8_t *data)
{
    return (struct raft_entry){.zxid = zxid, .type = RAFT_ENTRY_DATA, .data = data, .len = 4};
}

static void append_all(struct disk *d, const int64_t *zxids, size_t n, const uint8_t *data)
{
    for (size_t i = 0; i < n; i++) {
        struct raft_entry e = entry(zxids[i], data);
        disk_append(d, &e);
    }
}

/* 1,2,3 synced; then truncate after 2 and append 10,11,12 unsynced. */
static void torn_setup(struct disk *d, const uint8_t *data)
{
    static const int64_t first[] = {1, 2, 3}, second[] = {10, 11, 12};
    disk_init(d);
    append_all(d, first, 3, data);
    disk_sync(d);
    disk_truncate(d, 2);
    append_all(d, second, 3, data);
}

static void test_disk_torn_tail(FILE *out)
{
    static const uint8_t data[4] = {1, 2, 3, 4};
    struct disk d;
    torn_setup(&d, data);
    int64_t last;
    uint64_t chain;
    disk_last(&d, &last, &chain);
    EXPECT(out, last == 12 && d.log.n == 3 && d.pend.n == 3);
    /* A torn tail: the truncation and the first pending entry survive. */
    disk_crash(&d, 1);
    EXPECT(out, d.log.n == 3 && d.log.v[0].zxid == 1 && d.log.v[1].zxid == 2);
    EXPECT(out, d.log.v[2].zxid == 10 && d.pend.n == 0);
    struct raft_boot boot;
    struct raft_entry *entries;
    EXPECT(out, disk_boot(&d, &boot, &entries) && boot.n_entries == 3);
    free(entries);
    disk_free(&d);
    /* Nothing of the pending write survives: the old log is back. */
    torn_setup(&d, data);
    disk_crash(&d, -1);
    EXPECT(out, d.log.n == 3 && d.log.v[2].zxid == 3);
    struct raft_entry stale = entry(3, data);
    EXPECT(out, !disk_append(&d, &stale)); /* zxids must increase */
    disk_free(&d);
}

/* 1,2,3 synced; then the async log thread writes two batches before one
 * fdatasync: append 4,5; truncate after 4 and append 6. */
static void group_setup(struct disk *d, const uint8_t *data)
{
    static const int64_t first[] = {1, 2, 3}, second[] = {4, 5}, third[] = {6};
    disk_init(d);
    append_all(d, first, 3, data);
    disk_sync(d);
    append_all(d, second, 2, data);
    disk_truncate(d, 4);
    append_all(d, third, 1, data);
}

/* The durable log's zxids are want[0..n). */
static bool log_is(const struct disk *d, const int64_t *want, size_t n)
{
    if (d->log.n != n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (d->log.v[i].zxid != want[i])
            return false;
    return true;
}

/* A crash keeps a prefix of a group commit's writes, in order: the state
 * between two batches too (4,5 before the truncation took 5 back). */
static void test_disk_group_commit(FILE *out)
{
    static const uint8_t data[4] = {1, 2, 3, 4};
    static const int64_t two[] = {1, 2}, none[] = {1, 2, 3}, four[] = {1, 2, 3, 4},
                         five[] = {1, 2, 3, 4, 5}, six[] = {1, 2, 3, 4, 6};
    struct disk d;
    group_setup(&d, data);
    int64_t last;
    uint64_t chain;
    disk_last(&d, &last, &chain);
    /* no leading truncation: 4, 5, the truncation, 6 */
    EXPECT(out, last == 6 && disk_pending_len(&d) == 4 && disk_view_len(&d) == 5);
    EXPECT(out, disk_view_at(&d, 4)->zxid == 6 && disk_view_at(&d, 3)->zxid == 4);
    const struct {
        long keep;
        const int64_t *want;
        size_t n;
    } cases[] = {{-1, none, 3}, {0, none, 3}, {1, four, 4}, {2, five, 5}, {3, four, 4},
                 {4, six, 5}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        disk_free(&d);
        group_setup(&d, data);
        disk_crash(&d, cases[i].keep);
        EXPECT(out, log_is(&d, cases[i].want, cases[i].n) && !disk_has_pending(&d));
    }
    /* a third batch cuts into the durable log: a reader sees 1,2 only,
     * and the sync makes it so */
    disk_free(&d);
    group_setup(&d, data);
    disk_truncate(&d, 2);
    disk_last(&d, &last, &chain);
    EXPECT(out, last == 2 && disk_view_len(&d) == 2 && disk_pending_len(&d) == 5);
    disk_sync(&d);
    EXPECT(out, log_is(&d, two, 2) && !disk_has_pending(&d));
    disk_free(&d);
}

/* Equal logs have equal chains; the chain carries over a compaction. */
static void test_disk_chain(FILE *out)
{
    static const uint8_t data[4] = {1, 2, 3, 4};
    static const int64_t zxids[] = {1, 2, 3, 4};
    struct disk a, b;
    disk_init(&a);
    disk_init(&b);
    append_all(&a, zxids, 4, data);
    disk_sync(&a);
    append_all(&b, zxids, 2, data);
    disk_sync(&b);
    struct kv kv;
    kv_init(&kv);
    kv.applied_zxid = 2;
    uint8_t snap[KV_SNAP_BYTES];
    kv_save(&kv, snap);
    struct raft_config conf = {.n_members = 2, .members = {{1, true}, {4, false}}};
    EXPECT(out, disk_compact(&b, 2, snap, sizeof(snap), &conf) && b.log.n == 0);
    append_all(&b, zxids + 2, 2, data);
    disk_sync(&b);
    EXPECT(out, b.log.n == 2 && b.log.v[1].chain == a.log.v[3].chain);
    EXPECT(out, !disk_compact(&b, 7, snap, sizeof(snap), &conf));
    /* The membership travels with the snapshot into the next boot. */
    struct raft_boot boot;
    struct raft_entry *entries;
    EXPECT(out, disk_boot(&b, &boot, &entries) && boot.snap_zxid == 2);
    EXPECT(out, boot.snap_config != NULL && boot.snap_config->n_members == 2 &&
                    boot.snap_config->members[1].id == 4 && !boot.snap_config->members[1].voter);
    free(entries);
    EXPECT(out, disk_boot(&a, &boot, &entries) && boot.snap_config == NULL);
    free(entries);
    disk_free(&a);
    disk_free(&b);
}

/* A resync snapshot keeps the log after it; below the disk's own
 * snapshot, the entries it dropped go back in front, and only if they
 * lead to that snapshot's chain. */
static void test_disk_resync(FILE *out)
{
    static const uint8_t data[4] = {1, 2, 3, 4};
    static const int64_t zxids[] = {1, 2, 3, 4, 5};
    struct disk a, b;
    disk_init(&a);
    disk_init(&b);
    append_all(&a, zxids, 5, data);
    disk_sync(&a);
    append_all(&b, zxids, 5, data);
    disk_sync(&b);
    struct kv kv;
    kv_init(&kv);
    uint8_t snap[KV_SNAP_BYTES];
    struct raft_config conf = {.n_members = 1, .members = {{1, true}}};
    kv.applied_zxid = 3;
    kv_save(&kv, snap);
    EXPECT(out, disk_compact(&b, 3, snap, sizeof(snap), &conf) && b.log.n == 2);
    /* at 4, above its snapshot: the log after 4 stays */
    kv.applied_zxid = 4;
    kv_save(&kv, snap);
    struct disk c;
    disk_init(&c);
    append_all(&c, zxids, 5, data);
    disk_sync(&c);
    EXPECT(out, disk_install_snapshot_keep(&c, 4, a.log.v[3].chain, snap, sizeof(snap), &conf));
    EXPECT(out, c.snap_zxid == 4 && c.log.n == 1 && c.log.v[0].chain == a.log.v[4].chain);
    /* at 1, below b's snapshot at 3: the log through 3 is gone, refused */
    kv.applied_zxid = 1;
    kv_save(&kv, snap);
    EXPECT(out, !disk_install_snapshot_keep(&b, 1, a.log.v[0].chain, snap, sizeof(snap), &conf));
    EXPECT(out, b.snap_zxid == 3 && b.log.n == 2);
    disk_free(&a);
    disk_free(&b);
    disk_free(&c);
}

static void test_kv(FILE *out)
{
    struct kv_op op = {.kind = KV_OP_CAS, .key = 3, .op_id = 77, .value = -9, .expect = 5};
    uint8_t buf[KV_OP_BYTES];
    kv_encode_op(&op, buf);
    struct kv_op back;
    EXPECT(out, kv_decode_op(buf, sizeof(buf), &back) && back.op_id == 77 && back.value == -9);
    EXPECT(out, !kv_decode_op(buf, sizeof(buf) - 1, &back));
    struct kv kv, loaded;
    kv_init(&kv);
    struct raft_entry e = {.zxid = 5, .type = RAFT_ENTRY_DATA, .data = buf, .len = sizeof(buf)};
    struct kv_result res;
    EXPECT(out, kv_apply(&kv, &e, &res) && res.is_op && !res.cas_ok && kv.values[3] == 0);
    uint8_t snap[KV_SNAP_BYTES];
    kv_save(&kv, snap);
    EXPECT(out, kv_load(&loaded, snap, sizeof(snap)) && kv_digest(&loaded) == kv_digest(&kv));
    /* A membership entry moves the state machine past it and nothing
     * else; one that does not decode is refused. */
    struct raft_config conf = {.n_members = 1, .members = {{2, true}},
                               .n_old = 2, .old = {{1, true}, {3, true}}};
    uint8_t cbuf[RAFT_CONFIG_BYTES_MAX];
    struct raft_entry ce = {.zxid = 6, .type = RAFT_ENTRY_CONFIG, .data = cbuf,
                            .len = raft_config_encode(&conf, cbuf)};
    uint64_t before = kv.values[3];
    EXPECT(out, kv_apply(&kv, &ce, &res) && !res.is_op && kv.applied_zxid == 6 &&
                    (uint64_t)kv.values[3] == before);
    struct raft_entry bad = {.zxid = 7, .type = RAFT_ENTRY_CONFIG, .data = cbuf, .len = 2};
    EXPECT(out, !kv_apply(&kv, &bad, &res) && kv.applied_zxid == 6);
}

bool selftest_run(FILE *out)
{
    failures = 0;
    test_lin_hand_made(out);
    test_lin_generated(out);
    test_disk_torn_tail(out);
    test_disk_group_commit(out);
    test_disk_chain(out);
    test_disk_resync(out);
    test_kv(out);
    fprintf(out, "self-test: %s\n", failures ? "FAILED" : "ok");
    return failures == 0;
}
