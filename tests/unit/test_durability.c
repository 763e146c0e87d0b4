/*
 * test_durability.c — recovery (server/durability.h) over the in-memory,
 * fault-injecting storage. The sequencer writes through the durability log
 * as larchd does, the machine loses power (storage_mem_crash drops every
 * write not yet synced and tears the one in flight), and a fresh tree
 * recovered from the same storage must be the tree the acknowledged writes
 * built: same digest, same last zxid. Damage that is not a torn tail
 * refuses the start and deletes nothing.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <urcu.h>

#include "server/durability.h"

#define NOW 1000000
#define WALL 1700000000000LL
#define SNAP_DIR "/data/larch"

/* One server's life over st: a tree recovered from it, the durability that
 * recovered it, and a sequencer writing through its log. */
struct node {
    struct storage *st;
    struct config cfg;
    struct tree *t;
    struct durability *d;
    struct seq *s;
    int64_t session;
    int32_t xid;
    int acks; /* replies with err 0 seen */
    int32_t connect_timeout_ms; /* of the last ConnectResponse: 0 = refused */
    uint8_t passwd[SEQ_PASSWD_BYTES]; /* of the last ConnectResponse */
};

static void count_reply(void *arg, struct seq_out *o)
{
    struct node *n = arg;
    if (o->kind == SEQ_OUT_REPLY && o->frame != NULL) {
        struct base_rd r;
        int32_t len;
        struct zk_reply_header h;
        base_rd_init(&r, o->frame, o->frame_len);
        assert_true(zk_get_i32(&r, &len) && zk_get_reply_header(&r, &h));
        n->acks += h.err == ZK_OK;
    } else if (o->kind == SEQ_OUT_CONNECT) {
        n->session = o->session_id;
        n->connect_timeout_ms = o->timeout_ms;
        memcpy(n->passwd, o->passwd, sizeof n->passwd);
    }
    seq_out_free(o);
}

static void run(struct node *n, struct seq_req *r)
{
    struct seq_req *reqs[1] = { r };
    rcu_read_lock();
    seq_run_round(n->s, reqs, 1, NOW, WALL);
    rcu_read_unlock();
    seq_worker_drain(n->s, 0, count_reply, n);
}

static void config_for_test(struct config *c)
{
    config_defaults(c);
    snprintf(c->data_dir, sizeof c->data_dir, "/data");
    c->prealloc_kb = 4; /* small segments' chunks: the in-memory disk holds them */
}

/* Recovers a fresh tree from st; rc is durability_open's. */
static int node_open(struct node *n, struct storage *st, char *err, size_t errlen)
{
    *n = (struct node){ .st = st };
    config_for_test(&n->cfg);
    n->t = tree_new();
    assert_non_null(n->t);
    int rc = durability_open(&n->cfg, st, n->t, &n->d, err, errlen);
    if (rc != 0)
        return rc;
    struct seq_cfg scfg = { .min_session_timeout_ms = 4000, .max_session_timeout_ms = 40000,
                            .container_check_ms = 60000, .tick_ms = 1000,
                            .log = durability_log(n->d), .passwd_key_set = true };
    durability_passwd_key(n->d, scfg.passwd_key);
    n->s = seq_new(n->t, &scfg, 1);
    assert_non_null(n->s);
    return 0;
}

static void node_open_ok(struct node *n, struct storage *st)
{
    char err[512];
    int rc = node_open(n, st, err, sizeof err);
    if (rc != 0)
        fail_msg("durability_open: %d: %s", rc, err);
}

static void node_close(struct node *n)
{
    seq_free(n->s);
    durability_free(n->d);
    rcu_barrier();
    tree_free(n->t);
    *n = (struct node){ 0 };
}

static void connect(struct node *n)
{
    struct seq_req *r = seq_req_new(SEQ_REQ_CONNECT, NULL, 0, NULL, 0);
    r->worker = 0;
    r->conn = 1;
    r->timeout_ms = 10000;
    run(n, r);
    assert_true(n->session != 0);
}

/* A create or setData of path through the sequencer, as a client sends it. */
static void write_node(struct node *n, const char *path, const char *data, bool create)
{
    struct zk_wbuf b;
    zk_wbuf_init(&b);
    if (create) {
        struct zk_acl open_acl = { .perms = ZK_PERM_ALL,
                                   .id = { zk_str_c("world"), zk_str_c("anyone") } };
        struct zk_create_req q = { .path = zk_str_c(path), .data = zk_str_c(data),
                                   .acl = { .count = 1, .items = &open_acl },
                                   .flags = ZK_PERSISTENT };
        zk_put_create_req(&b, &q, false);
    } else {
        struct zk_setdata_req q = { .path = zk_str_c(path), .data = zk_str_c(data), .version = -1 };
        zk_put_setdata_req(&b, &q);
    }
    struct seq_req *r = seq_req_new(SEQ_REQ_WRITE, b.p, b.len, NULL, 0);
    zk_wbuf_free(&b);
    r->worker = 0;
    r->conn = 1;
    r->session_id = n->session;
    r->xid = ++n->xid;
    r->op = create ? ZK_OP_CREATE : ZK_OP_SETDATA;
    run(n, r);
}

static void write_many(struct node *n, const char *prefix, int count)
{
    for (int i = 0; i < count; i++) {
        char path[64], data[64];
        snprintf(path, sizeof path, "/%s%d", prefix, i);
        snprintf(data, sizeof data, "value-%d", i);
        write_node(n, path, data, true);
    }
}

struct image {
    uint64_t digest;
    int64_t zxid;
};

static struct image image_of(struct tree *t)
{
    /* recovery (snapshots, replays, tolerated repeats) keeps the running
     * digest as a walk would find it */
    assert_int_equal(tree_digest_running(t), tree_digest(t));
    return (struct image){ .digest = tree_digest(t), .zxid = tree_last_zxid(t) };
}

static void assert_recovers_to(struct storage *st, struct image want)
{
    struct node n;
    node_open_ok(&n, st);
    struct image got = image_of(n.t);
    assert_int_equal(got.zxid, want.zxid);
    assert_int_equal(got.digest, want.digest);
    node_close(&n);
}

/* The names in dir, joined, for "nothing was deleted" checks. */
static int add_name(void *arg, const char *name)
{
    char *s = arg;
    strncat(s, name, 1023 - strlen(s));
    strncat(s, " ", 1023 - strlen(s));
    return 0;
}

static void list_names(struct storage *st, char out[1024])
{
    out[0] = '\0';
    assert_int_equal(storage_list(st, SNAP_DIR, add_name, out), 0);
}

/* ---- tests ------------------------------------------------------------------ */

/* Every acknowledged write survives a power loss that drops all unsynced
 * bytes: each round was synced before it was answered. */
static void test_acknowledged_writes_survive_power_loss(void **state)
{
    struct storage *st = storage_mem_new();
    struct node n;
    node_open_ok(&n, st);
    connect(&n);
    write_many(&n, "a", 20);
    write_node(&n, "/a3", "changed", false);
    assert_int_equal(n.acks, 21);
    struct image want = image_of(n.t);
    storage_mem_crash(st, 0, true);
    node_close(&n);
    assert_recovers_to(st, want);
    storage_destroy(st);
}

/* A fuzzy snapshot plus the log after it, and the log goes on being
 * appended to after recovery: a second recovery sees both lives. */
static void test_snapshot_then_log_across_restarts(void **state)
{
    struct storage *st = storage_mem_new();
    struct node n;
    node_open_ok(&n, st);
    connect(&n);
    write_many(&n, "b", 10);
    rcu_read_lock();
    assert_int_equal(durability_snapshot(n.d), 0);
    rcu_read_unlock();
    struct durability_stats ds;
    durability_get_stats(n.d, &ds);
    assert_int_equal(ds.last_snapshot_zxid, tree_last_zxid(n.t));
    write_many(&n, "c", 10);
    struct image want = image_of(n.t);
    storage_mem_crash(st, 0, false);
    node_close(&n);

    node_open_ok(&n, st);
    assert_int_equal(image_of(n.t).digest, want.digest);
    durability_get_stats(n.d, &ds);
    assert_true(ds.last_snapshot_zxid > 0 && ds.last_snapshot_zxid < want.zxid);
    connect(&n); /* a new session, then more writes after the recovered log */
    write_many(&n, "d", 5);
    want = image_of(n.t);
    storage_mem_crash(st, 0, false);
    node_close(&n);
    assert_recovers_to(st, want);
    storage_destroy(st);
}

/* A write whose sync failed was never acknowledged; the power goes while
 * it is in flight, its record is torn, and recovery drops the torn bytes
 * and comes back to the acknowledged state. */
static void test_unacknowledged_torn_write_is_dropped(void **state)
{
    struct storage *st = storage_mem_new();
    struct node n;
    node_open_ok(&n, st);
    connect(&n);
    write_many(&n, "e", 5);
    struct image want = image_of(n.t);
    int acks = n.acks;
    storage_mem_fail_sync(st, -EIO, 1);
    write_node(&n, "/held", "never acknowledged", true);
    assert_int_equal(n.acks, acks); /* held: not answered */
    struct seq_stats ss;
    seq_get_stats(n.s, &ss);
    assert_int_equal(ss.log_error, -EIO);
    storage_mem_crash(st, 20, true); /* 20 bytes of the pending record land */
    node_close(&n);
    assert_recovers_to(st, want);
    storage_destroy(st);
}

/* The newest snapshot is damaged: recovery falls back to the older one and
 * replays the longer log after it, to the same tree. */
static void test_damaged_newest_snapshot_falls_back(void **state)
{
    struct storage *st = storage_mem_new();
    struct node n;
    node_open_ok(&n, st);
    connect(&n);
    write_many(&n, "f", 6);
    rcu_read_lock();
    assert_int_equal(durability_snapshot(n.d), 0);
    write_many(&n, "g", 6);
    assert_int_equal(durability_snapshot(n.d), 0);
    rcu_read_unlock();
    struct durability_stats ds;
    durability_get_stats(n.d, &ds);
    write_many(&n, "h", 3);
    struct image want = image_of(n.t);
    node_close(&n);

    char path[128];
    snprintf(path, sizeof path, SNAP_DIR "/snapshot.%llx", (unsigned long long)ds.last_snapshot_zxid);
    struct storage_file *f;
    assert_int_equal(storage_open(st, path, 0, &f), 0);
    uint8_t b = 0;
    size_t got = 0;
    assert_int_equal(storage_pread(f, &b, 1, 40, &got), 0);
    b ^= 0x5a;
    assert_int_equal(storage_pwrite(f, &b, 1, 40), 0);
    assert_int_equal(storage_datasync(f), 0);
    assert_int_equal(storage_close(f), 0);
    assert_recovers_to(st, want);
    storage_destroy(st);
}

/* A flipped byte in the first of many records is lost data, not a torn
 * tail: the start is refused with a message, and nothing is deleted. */
static void test_damage_mid_log_refuses_start(void **state)
{
    struct storage *st = storage_mem_new();
    struct node n;
    node_open_ok(&n, st);
    connect(&n);
    write_many(&n, "i", 8);
    node_close(&n);
    char before[1024], after[1024];
    list_names(st, before);
    struct storage_file *f;
    assert_int_equal(storage_open(st, SNAP_DIR "/log.1", 0, &f), 0);
    uint8_t b = 0;
    size_t got = 0;
    assert_int_equal(storage_pread(f, &b, 1, 16 + 8 + 4, &got), 0); /* record 1's payload */
    b ^= 1;
    assert_int_equal(storage_pwrite(f, &b, 1, 16 + 8 + 4), 0);
    assert_int_equal(storage_datasync(f), 0);
    assert_int_equal(storage_close(f), 0);

    char err[512] = "";
    assert_int_equal(node_open(&n, st, err, sizeof err), TXNLOG_ECORRUPT);
    assert_non_null(strstr(err, "refusing to start"));
    durability_free(n.d);
    tree_free(n.t);
    list_names(st, after);
    assert_string_equal(before, after);
    storage_destroy(st);
}

/* A reattach to session id with pw through n: the negotiated timeout, 0
 * when refused. */
static int32_t reattach(struct node *n, int64_t id, const uint8_t pw[SEQ_PASSWD_BYTES])
{
    struct seq_req *r = seq_req_new(SEQ_REQ_CONNECT, NULL, 0, NULL, 0);
    r->worker = 0;
    r->conn = 2;
    r->session_id = id;
    r->timeout_ms = 10000;
    memcpy(r->passwd, pw, SEQ_PASSWD_BYTES);
    r->passwd_len = SEQ_PASSWD_BYTES;
    run(n, r);
    return n->connect_timeout_ms;
}

/* Replaces the password key in the data dir, as a new key would be. */
static void replace_key(struct storage *st, uint8_t fill)
{
    uint8_t key[SEQ_PASSWD_KEY_BYTES];
    memset(key, fill, sizeof key);
    assert_int_equal(storage_write_whole(st, SNAP_DIR, SNAP_DIR "/secret", key, sizeof key,
                                         STORAGE_PRIVATE), 0);
}

/* The password a session was given is recorded (in its createSession txn,
 * then in snapshots): after a restart it still opens the session, also
 * when the server's key has changed in between, which shows it is the
 * recorded password that is checked and not one derived again. */
static void test_password_survives_restart_and_key_change(void **state)
{
    struct storage *st = storage_mem_new();
    struct node n;
    node_open_ok(&n, st);
    connect(&n);
    int64_t logged = n.session;
    uint8_t logged_pw[SEQ_PASSWD_BYTES];
    memcpy(logged_pw, n.passwd, sizeof logged_pw);
    rcu_read_lock();
    assert_int_equal(durability_snapshot(n.d), 0);
    rcu_read_unlock();
    connect(&n);
    int64_t snapped = logged; /* in the snapshot; the second only in the log after it */
    int64_t later = n.session;
    uint8_t later_pw[SEQ_PASSWD_BYTES];
    memcpy(later_pw, n.passwd, sizeof later_pw);
    node_close(&n);

    replace_key(st, 0x99);
    node_open_ok(&n, st);
    uint8_t wrong[SEQ_PASSWD_BYTES];
    memcpy(wrong, later_pw, sizeof wrong);
    wrong[3] ^= 4;
    assert_int_equal(reattach(&n, later, wrong), 0);
    assert_int_equal(reattach(&n, snapped, logged_pw), 10000);
    assert_memory_equal(n.passwd, logged_pw, sizeof logged_pw);
    assert_int_equal(reattach(&n, later, later_pw), 10000);
    assert_memory_equal(n.passwd, later_pw, sizeof later_pw);
    node_close(&n);
    storage_destroy(st);
}

/* Copies tests/fixtures/<rel> into st at path. */
static void copy_fixture(struct storage *st, const char *rel, const char *path)
{
    char src[4096];
    snprintf(src, sizeof src, "%s/%s", LARCH_FIXTURES, rel);
    FILE *fp = fopen(src, "rb");
    if (fp == NULL)
        fail_msg("%s: cannot open", src);
    static uint8_t buf[1 << 16];
    size_t len = fread(buf, 1, sizeof buf, fp);
    assert_true(feof(fp) && !ferror(fp));
    fclose(fp);
    assert_int_equal(storage_write_whole(st, SNAP_DIR, path, buf, len, 0), 0);
}

struct v1_session {
    int64_t id;
    uint8_t passwd[SEQ_PASSWD_BYTES];
};

/* The sessions of tests/fixtures/datadir-v1/sessions.txt. */
static size_t read_v1_sessions(struct v1_session out[2])
{
    char path[4096], line[256];
    snprintf(path, sizeof path, "%s/datadir-v1/sessions.txt", LARCH_FIXTURES);
    FILE *fp = fopen(path, "r");
    if (fp == NULL)
        fail_msg("%s: cannot open", path);
    size_t n = 0;
    while (n < 2 && fgets(line, sizeof line, fp) != NULL) {
        unsigned long long id;
        char hex[33];
        assert_int_equal(sscanf(line, "session %llx passwd %32s", &id, hex), 2);
        out[n].id = (int64_t)id;
        for (size_t i = 0; i < SEQ_PASSWD_BYTES; i++)
            assert_int_equal(sscanf(hex + 2 * i, "%2hhx", &out[n].passwd[i]), 1);
        n++;
    }
    fclose(fp);
    return n;
}

/* A data dir written before passwords were recorded (format-1 snapshot
 * and log: tests/fixtures/datadir-v1) recovers, and its clients reattach
 * with the passwords they were given: recovery derives them from the data
 * dir's key as the old code did. Once the upgraded server has taken a
 * snapshot, it records them, and they no longer depend on the key. */
static void test_version_1_datadir_recovers(void **state)
{
    struct storage *st = storage_mem_new();
    copy_fixture(st, "datadir-v1/larch/secret", SNAP_DIR "/secret");
    copy_fixture(st, "datadir-v1/larch/snapshot.3", SNAP_DIR "/snapshot.3");
    copy_fixture(st, "datadir-v1/larch/log.1", SNAP_DIR "/log.1");
    struct v1_session v1[2];
    assert_int_equal(read_v1_sessions(v1), 2);
    struct node n;
    node_open_ok(&n, st);
    assert_int_equal(tree_last_zxid(n.t), 6);
    rcu_read_lock();
    struct tree_view v;
    assert_int_equal(tree_get(n.t, "/fixture/eph-b", 14, &v), ZK_OK);
    assert_int_equal(v.stat.ephemeral_owner, v1[1].id);
    rcu_read_unlock();
    for (size_t i = 0; i < 2; i++) {
        uint8_t wrong[SEQ_PASSWD_BYTES] = { 0 };
        assert_int_equal(reattach(&n, v1[i].id, wrong), 0);
        assert_int_equal(reattach(&n, v1[i].id, v1[i].passwd), 40000);
        assert_memory_equal(n.passwd, v1[i].passwd, SEQ_PASSWD_BYTES);
    }
    write_many(&n, "v2-", 2); /* into a new, version-2 segment */
    rcu_read_lock();
    assert_int_equal(durability_snapshot(n.d), 0);
    rcu_read_unlock();
    struct image want = image_of(n.t);
    node_close(&n);

    replace_key(st, 0x77);
    node_open_ok(&n, st);
    assert_int_equal(image_of(n.t).digest, want.digest);
    for (size_t i = 0; i < 2; i++)
        assert_int_equal(reattach(&n, v1[i].id, v1[i].passwd), 40000);
    node_close(&n);
    storage_destroy(st);
}

/* Clients reattach after a restart: the password key is kept, written so
 * that a crash leaves it whole. */
static void test_password_key_is_kept(void **state)
{
    struct storage *st = storage_mem_new();
    struct node n;
    node_open_ok(&n, st);
    uint8_t k1[SEQ_PASSWD_KEY_BYTES], k2[SEQ_PASSWD_KEY_BYTES];
    durability_passwd_key(n.d, k1);
    storage_mem_crash(st, 0, true);
    node_close(&n);
    node_open_ok(&n, st);
    durability_passwd_key(n.d, k2);
    assert_memory_equal(k1, k2, sizeof k1);
    static const uint8_t zero[SEQ_PASSWD_KEY_BYTES];
    assert_memory_not_equal(k1, zero, sizeof k1);
    node_close(&n);
    storage_destroy(st);
}

/* ---- an ensemble member's recovery ------------------------------------------ */

/* A member applies only what it knows is committed and hands the whole log
 * after the snapshot to the Raft core, which commits or truncates the rest. */
static void test_member_applies_only_committed_and_boots_the_log(void **state)
{
    (void)state;
    struct storage *st = storage_mem_new();
    assert_non_null(st);
    struct node n;
    node_open_ok(&n, st);
    connect(&n);
    write_many(&n, "a", 5);
    assert_int_equal(durability_snapshot(n.d), 0);
    int64_t snap = tree_last_zxid(n.t);
    write_many(&n, "b", 6);
    int64_t last = tree_last_zxid(n.t);
    node_close(&n);

    /* no term/vote file yet: nothing known committed past the snapshot */
    struct config cfg;
    config_for_test(&cfg);
    struct tree *t = tree_new();
    struct durability *d = NULL;
    struct durability_boot boot;
    char err[512] = "";
    assert_int_equal(durability_open_member(&cfg, st, t, &d, &boot, err, sizeof err), 0);
    assert_true(tree_last_zxid(t) == snap);
    assert_true(boot.snap_zxid == snap);
    assert_true(boot.log_end_zxid == last);
    assert_int_equal(boot.n_entries, (size_t)(last - snap));
    for (size_t i = 0; i < boot.n_entries; i++) {
        assert_true(boot.entries[i].zxid == snap + 1 + (int64_t)i);
        assert_int_equal(boot.entries[i].type, RAFT_ENTRY_DATA);
        struct txn x;
        assert_int_equal(txn_decode(boot.entries[i].data, boot.entries[i].len, &x), 0);
        assert_true(x.zxid == boot.entries[i].zxid);
        txn_free(&x);
    }
    assert_string_equal(durability_state_dir(d), SNAP_DIR);
    durability_boot_free(&boot);
    durability_free(d);
    rcu_barrier();
    tree_free(t);

    /* commit known up to snap + 3: exactly that much is applied */
    struct raft_hard_state hs = { .term = 0, .vote = 0, .commit_zxid = snap + 3 };
    assert_int_equal(txnlog_hard_state_write(st, SNAP_DIR, &hs), 0);
    t = tree_new();
    assert_int_equal(durability_open_member(&cfg, st, t, &d, &boot, err, sizeof err), 0);
    assert_true(tree_last_zxid(t) == snap + 3);
    assert_int_equal(boot.hard_state.commit_zxid, snap + 3);
    assert_int_equal(boot.n_entries, (size_t)(last - snap));
    struct tree_view v;
    rcu_read_lock();
    assert_int_equal(tree_get(t, "/b1", 3, &v), ZK_OK);  /* snap + 2 */
    assert_int_equal(tree_get(t, "/b3", 3, &v), ZK_ENONODE); /* snap + 4: not known committed */
    rcu_read_unlock();
    durability_boot_free(&boot);
    durability_free(d);
    rcu_barrier();
    tree_free(t);

    /* a damaged term/vote file refuses the start and names the file */
    storage_mem_crash(st, 0, false);
    struct storage_file *f;
    assert_int_equal(storage_open(st, SNAP_DIR "/" TXNLOG_HARD_STATE_FILE, 0, &f), 0);
    uint8_t junk[4] = { 1, 2, 3, 4 };
    assert_int_equal(storage_pwrite(f, junk, sizeof junk, 0), 0);
    assert_int_equal(storage_datasync(f), 0);
    storage_close(f);
    t = tree_new();
    assert_true(durability_open_member(&cfg, st, t, &d, &boot, err, sizeof err) != 0);
    assert_non_null(strstr(err, TXNLOG_HARD_STATE_FILE));
    assert_non_null(strstr(err, "damaged"));
    assert_null(boot.entries);
    rcu_barrier();
    tree_free(t);
    storage_destroy(st);
}

int main(void)
{
    rcu_register_thread();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_acknowledged_writes_survive_power_loss),
        cmocka_unit_test(test_snapshot_then_log_across_restarts),
        cmocka_unit_test(test_unacknowledged_torn_write_is_dropped),
        cmocka_unit_test(test_damaged_newest_snapshot_falls_back),
        cmocka_unit_test(test_damage_mid_log_refuses_start),
        cmocka_unit_test(test_password_key_is_kept),
        cmocka_unit_test(test_member_applies_only_committed_and_boots_the_log),
        cmocka_unit_test(test_password_survives_restart_and_key_change),
        cmocka_unit_test(test_version_1_datadir_recovers),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    rcu_unregister_thread();
    return rc;
}
