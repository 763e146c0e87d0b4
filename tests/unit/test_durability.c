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
#include <unistd.h>
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

/* ---- memberships: CONFIG entries in the log, memberships with snapshots ---- */

/* Membership k: voters 1..3 (and 4 when k is odd), joint (leaving 1..3)
 * when k % 3 == 1, and a description that names k. */
static void member_config(int64_t k, struct raft_config *c)
{
    *c = (struct raft_config){ .n_members = 0 };
    for (uint32_t id = 1; id <= (k % 2 ? 4u : 3u); id++)
        c->members[c->n_members++] = (struct raft_member){ .id = id, .voter = true };
    for (uint32_t id = 1; k % 3 == 1 && id <= 3; id++)
        c->old[c->n_old++] = (struct raft_member){ .id = id, .voter = true };
    c->extra_len = (uint32_t)snprintf((char *)c->extra, sizeof c->extra,
                                      "server.1=a:2888:3888;2181\nversion=%llx",
                                      (unsigned long long)k);
}

static void assert_config_is(const struct raft_config *got, int64_t k)
{
    assert_non_null(got);
    struct raft_config want;
    member_config(k, &want);
    uint8_t a[RAFT_CONFIG_BYTES_MAX], b[RAFT_CONFIG_BYTES_MAX];
    size_t alen = raft_config_encode(&want, a), blen = raft_config_encode(got, b);
    if (alen != blen || memcmp(a, b, alen) != 0)
        fail_msg("membership %.*s, want version=%llx", (int)got->extra_len,
                 (const char *)got->extra, (unsigned long long)k);
}

struct member {
    struct config cfg;
    struct tree *t;
    struct durability *d;
    struct durability_boot boot;
};

static void member_open(struct member *m, struct storage *st)
{
    config_for_test(&m->cfg);
    m->t = tree_new();
    assert_non_null(m->t);
    char err[512] = "";
    int rc = durability_open_member(&m->cfg, st, m->t, &m->d, &m->boot, err, sizeof err);
    if (rc != 0)
        fail_msg("durability_open_member: %d: %s", rc, err);
}

static void member_close(struct member *m)
{
    durability_boot_free(&m->boot);
    durability_free(m->d);
    rcu_barrier();
    tree_free(m->t);
}

/* Raft entry i of a member's log: zxid term:counter, and its bytes in b
 * (the caller's). Data: a create of /n<counter>; config: membership i. */
static struct raft_entry member_entry(uint8_t type, uint32_t term, uint32_t counter,
                                      struct base_buf *b)
{
    struct raft_entry e = { .zxid = raft_make_zxid(term, counter), .type = type };
    *b = (struct base_buf){ 0 };
    if (type == RAFT_ENTRY_DATA) {
        char path[32];
        snprintf(path, sizeof path, "/n%u-%u", term, counter);
        struct txn_op op = { .type = TXN_CREATE, .client_type = ZK_OP_CREATE, .path = path,
                             .data = (uint8_t *)"v", .data_len = 1, .acl = tree_acl_open(),
                             .parent_cversion = -1 };
        struct txn x = { .zxid = e.zxid, .time_ms = WALL, .type = TXN_CREATE, .nops = 1,
                         .ops = &op };
        assert_int_equal(txn_encode(b, &x), 0);
    } else if (type == RAFT_ENTRY_CONFIG) {
        struct raft_config c;
        member_config(e.zxid, &c);
        assert_int_equal(base_buf_reserve(b, RAFT_CONFIG_BYTES_MAX), 0);
        b->len = raft_config_encode(&c, b->data);
    }
    e.data = b->data;
    e.len = b->len;
    return e;
}

/* A member's log: term 1's no-op, a create, a joint membership, a create,
 * the final membership; term 2's no-op, a create, another membership. */
static const struct {
    uint8_t type;
    uint32_t term, counter;
} member_log[] = {
    { RAFT_ENTRY_NOOP, 1, 0 }, { RAFT_ENTRY_DATA, 1, 1 },   { RAFT_ENTRY_CONFIG, 1, 2 },
    { RAFT_ENTRY_DATA, 1, 3 }, { RAFT_ENTRY_CONFIG, 1, 4 }, { RAFT_ENTRY_NOOP, 2, 0 },
    { RAFT_ENTRY_DATA, 2, 1 }, { RAFT_ENTRY_CONFIG, 2, 2 },
};
#define MEMBER_LOG_LEN (sizeof member_log / sizeof member_log[0])

static struct raft_entry member_log_entry(size_t i, struct base_buf *b)
{
    return member_entry(member_log[i].type, member_log[i].term, member_log[i].counter, b);
}

/* Appends entries [from, to) of member_log to d's log and syncs. */
static void member_append(struct durability *d, size_t from, size_t to)
{
    for (size_t i = from; i < to; i++) {
        struct base_buf b;
        struct raft_entry e = member_log_entry(i, &b);
        assert_int_equal(txnlog_append_entry(durability_log(d), &e), 0);
        base_buf_free(&b);
    }
    assert_int_equal(txnlog_sync(durability_log(d)), 0);
}

/* boot's entries are member_log's from first on, n of them: same type,
 * zxid and bytes, in order. */
static void assert_boot_entries(const struct durability_boot *boot, size_t first, size_t n)
{
    assert_int_equal(boot->n_entries, n);
    for (size_t i = 0; i < n; i++) {
        struct base_buf b;
        struct raft_entry want = member_log_entry(first + i, &b);
        const struct raft_entry *got = &boot->entries[i];
        assert_true(got->zxid == want.zxid);
        assert_int_equal(got->type, want.type);
        assert_int_equal(got->len, want.len);
        if (want.len > 0)
            assert_memory_equal(got->data, want.data, want.len);
        base_buf_free(&b);
    }
}

static bool has_node(struct tree *t, const char *path)
{
    struct tree_view v;
    rcu_read_lock();
    int rc = tree_get(t, path, strlen(path), &v);
    rcu_read_unlock();
    return rc == ZK_OK;
}

/* CONFIG entries go through the log and come back to the Raft core with
 * their bytes, in order among the no-ops and data; the committed ones
 * count as reported memberships (a snapshot right after start keeps the
 * newest), and a standalone start applies them as no-ops. */
static void test_member_boots_config_entries(void **state)
{
    struct storage *st = storage_mem_new();
    struct member m;
    member_open(&m, st);
    assert_null(m.boot.snap_config);
    member_append(m.d, 0, MEMBER_LOG_LEN);
    member_close(&m);
    struct raft_hard_state hs = { .term = 2, .vote = 1, .commit_zxid = raft_make_zxid(1, 4) };
    assert_int_equal(txnlog_hard_state_write(st, SNAP_DIR, &hs), 0);

    member_open(&m, st);
    assert_boot_entries(&m.boot, 0, MEMBER_LOG_LEN);
    assert_null(m.boot.snap_config);
    assert_true(tree_last_zxid(m.t) == raft_make_zxid(1, 4));
    assert_true(has_node(m.t, "/n1-3") && !has_node(m.t, "/n2-1"));
    /* the final membership at 1:4 is committed and applied: a snapshot keeps it */
    assert_int_equal(durability_snapshot(m.d), 0);
    member_close(&m);

    member_open(&m, st);
    assert_true(m.boot.snap_zxid == raft_make_zxid(1, 4));
    assert_config_is(m.boot.snap_config, raft_make_zxid(1, 4));
    assert_boot_entries(&m.boot, 5, MEMBER_LOG_LEN - 5);
    member_close(&m);

    struct node n; /* standalone: every record applies, memberships as no-ops */
    node_open_ok(&n, st);
    assert_true(tree_last_zxid(n.t) == raft_make_zxid(2, 2));
    assert_true(has_node(n.t, "/n2-1"));
    node_close(&n);
    storage_destroy(st);
}

/* The power goes while a CONFIG record is written (its sync failed, so it
 * was never durable): cut in its frame, its txn header, its op, its
 * membership, or not at all, the member boots with the entries before it,
 * or with it whole, never with part of a membership (test_txnlog tears
 * such a record at every byte). */
static void test_member_torn_config_record(void **state)
{
    struct base_buf b;
    struct raft_entry e = member_log_entry(2, &b);
    size_t record = 8 + TXNLOG_TXN_HEADER_BYTES + 9 + 4 + e.len; /* frame, txn, op, data */
    base_buf_free(&b);
    const size_t cuts[] = { 0, 1, 7, 8, 30, 44, 50, 53, 54, record / 2, record - 1, record };
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        size_t cut = cuts[i];
        struct storage *st = storage_mem_new();
        struct member m;
        member_open(&m, st);
        member_append(m.d, 0, 2);
        e = member_log_entry(2, &b);
        assert_int_equal(txnlog_append_entry(durability_log(m.d), &e), 0);
        base_buf_free(&b);
        storage_mem_fail_sync(st, -EIO, 1);
        assert_int_equal(txnlog_sync(durability_log(m.d)), -EIO);
        storage_mem_crash(st, cut, (cut & 1) != 0);
        member_close(&m);

        member_open(&m, st);
        assert_boot_entries(&m.boot, 0, cut == record ? 3 : 2);
        member_close(&m);
        storage_destroy(st);
    }
}

/* Applies a txn at zxid to m's tree as the driver does: a membership is
 * reported before its entry is applied. */
static void member_apply(struct member *m, uint8_t type, int64_t zxid)
{
    struct base_buf b;
    (void)member_entry(type, raft_zxid_term(zxid), raft_zxid_counter(zxid), &b);
    struct txn x = { .zxid = zxid, .type = TXN_NOOP };
    if (type == RAFT_ENTRY_CONFIG) {
        struct raft_config c;
        member_config(zxid, &c);
        durability_note_membership(m->d, zxid, &c);
        struct txn_op op = { .type = TXN_CONFIG, .client_type = ZK_OP_RECONFIG,
                             .data = b.data, .data_len = (int32_t)b.len };
        x = (struct txn){ .zxid = zxid, .type = TXN_CONFIG, .nops = 1, .ops = &op };
        assert_int_equal(tree_apply(m->t, &x, NULL, NULL, NULL), ZK_OK);
    } else {
        if (type == RAFT_ENTRY_DATA)
            assert_int_equal(txn_decode(b.data, b.len, &x), 0);
        assert_int_equal(tree_apply(m->t, &x, NULL, NULL, NULL), ZK_OK);
        txn_free(&x);
    }
    base_buf_free(&b);
}

static void assert_sidecar_is(struct storage *st, int64_t snap, int64_t k)
{
    char path[128];
    snprintf(path, sizeof path, SNAP_DIR "/snapshot.%llx.config", (unsigned long long)snap);
    struct raft_config c;
    int64_t zxid = 0;
    assert_int_equal(txnlog_config_file_read(st, path, &zxid, &c), 0);
    assert_true(zxid == snap);
    assert_config_is(&c, k);
}

/* A snapshot at Z keeps the membership in effect at Z: the newest one
 * reported at or below Z, not one reported for a later zxid that the tree
 * has not reached; boot gives it back. */
static void test_snapshot_keeps_membership_at_its_zxid(void **state)
{
    struct storage *st = storage_mem_new();
    struct member m;
    member_open(&m, st);
    int64_t a = raft_make_zxid(1, 2), z = raft_make_zxid(1, 3), b = raft_make_zxid(1, 5);
    member_apply(&m, RAFT_ENTRY_NOOP, raft_make_zxid(1, 0));
    member_apply(&m, RAFT_ENTRY_DATA, raft_make_zxid(1, 1));
    assert_int_equal(durability_snapshot(m.d), 0); /* nothing reported yet: no file */
    member_apply(&m, RAFT_ENTRY_CONFIG, a);
    member_apply(&m, RAFT_ENTRY_DATA, z);
    struct raft_config c;
    member_config(b, &c);
    durability_note_membership(m.d, b, &c); /* reported, not applied yet */
    assert_int_equal(durability_snapshot(m.d), 0);
    assert_sidecar_is(st, z, a);
    member_apply(&m, RAFT_ENTRY_DATA, raft_make_zxid(1, 4));
    member_apply(&m, RAFT_ENTRY_CONFIG, b); /* reported again as it applies */
    member_apply(&m, RAFT_ENTRY_DATA, raft_make_zxid(1, 6));
    member_close(&m);

    member_open(&m, st);
    assert_true(m.boot.snap_zxid == z);
    assert_config_is(m.boot.snap_config, a);
    assert_int_equal(durability_snapshot(m.d), 0); /* the tree is at 1:3 again */
    member_apply(&m, RAFT_ENTRY_DATA, raft_make_zxid(1, 4));
    member_apply(&m, RAFT_ENTRY_CONFIG, b);
    assert_int_equal(durability_snapshot(m.d), 0);
    assert_sidecar_is(st, b, b);
    assert_sidecar_is(st, z, a);
    member_close(&m);
    member_open(&m, st);
    assert_true(m.boot.snap_zxid == b);
    assert_config_is(m.boot.snap_config, b);
    member_close(&m);
    storage_destroy(st);
}

/* More memberships reported ahead of the tree than are kept: a snapshot
 * that needed a dropped one is not taken (never kept with a wrong one),
 * and once the tree has caught up snapshots are kept again. */
static void test_membership_memory_is_bounded(void **state)
{
    struct storage *st = storage_mem_new();
    struct member m;
    member_open(&m, st);
    member_apply(&m, RAFT_ENTRY_NOOP, raft_make_zxid(1, 0));
    member_apply(&m, RAFT_ENTRY_CONFIG, raft_make_zxid(1, 1));
    for (uint32_t i = 2; i < 66; i++) {
        struct raft_config c;
        member_config(raft_make_zxid(1, i), &c);
        durability_note_membership(m.d, raft_make_zxid(1, i), &c);
    }
    assert_int_equal(durability_snapshot(m.d), -EAGAIN);
    char names[1024];
    list_names(st, names);
    assert_null(strstr(names, "snapshot.100000001"));
    for (uint32_t i = 2; i < 66; i++)
        member_apply(&m, RAFT_ENTRY_CONFIG, raft_make_zxid(1, i));
    assert_int_equal(durability_snapshot(m.d), 0);
    member_close(&m);
    member_open(&m, st);
    assert_config_is(m.boot.snap_config, raft_make_zxid(1, 65));
    member_close(&m);
    storage_destroy(st);
}

static int snapshot_bytes(void *arg, const void *bytes, size_t len)
{
    return base_buf_append(arg, bytes, len);
}

/* A snapshot from the leader is installed with the membership it came
 * with: boot gives both back, and the snapshots before it go with their
 * membership files. */
static void test_install_keeps_the_leaders_membership(void **state)
{
    struct storage *st = storage_mem_new();
    struct member m;
    member_open(&m, st);
    member_apply(&m, RAFT_ENTRY_NOOP, raft_make_zxid(1, 0));
    member_apply(&m, RAFT_ENTRY_CONFIG, raft_make_zxid(1, 1));
    assert_int_equal(durability_snapshot(m.d), 0);
    assert_sidecar_is(st, raft_make_zxid(1, 1), raft_make_zxid(1, 1));

    struct member leader;
    struct storage *lst = storage_mem_new();
    member_open(&leader, lst);
    member_apply(&leader, RAFT_ENTRY_NOOP, raft_make_zxid(3, 0));
    member_apply(&leader, RAFT_ENTRY_DATA, raft_make_zxid(3, 1));
    struct base_buf snap = { 0 };
    struct tree_snap_info info;
    assert_int_equal(tree_snapshot_write(leader.t, snapshot_bytes, &snap, &info), 0);
    member_close(&leader);
    storage_destroy(lst);

    int64_t z = raft_make_zxid(3, 1);
    struct raft_config c;
    member_config(7, &c);
    assert_int_equal(durability_install_snapshot(m.d, z, snap.data, snap.len, &c), 0);
    char names[1024];
    list_names(st, names);
    assert_null(strstr(names, "snapshot.100000001"));
    assert_non_null(strstr(names, "snapshot.300000001.config"));
    member_close(&m);
    member_open(&m, st);
    assert_true(m.boot.snap_zxid == z && tree_last_zxid(m.t) == z);
    assert_true(has_node(m.t, "/n3-1"));
    assert_config_is(m.boot.snap_config, 7);
    member_close(&m);
    base_buf_free(&snap);
    storage_destroy(st);
}

/* Purge removes a snapshot's membership file with it, and membership
 * files left below the oldest snapshot kept (a crash between the two). */
static void test_purge_removes_membership_files(void **state)
{
    struct storage *st = storage_mem_new();
    struct member m;
    member_open(&m, st);
    member_apply(&m, RAFT_ENTRY_NOOP, raft_make_zxid(1, 0));
    for (uint32_t i = 1; i <= 5; i++) {
        member_apply(&m, RAFT_ENTRY_CONFIG, raft_make_zxid(1, i));
        assert_int_equal(durability_snapshot(m.d), 0);
    }
    struct raft_config c;
    member_config(1, &c);
    assert_int_equal(txnlog_config_file_write(st, SNAP_DIR, SNAP_DIR "/snapshot.5.config", 5, &c), 0);
    member_close(&m);
    struct config cfg;
    config_for_test(&cfg);
    cfg.autopurge_snap_retain = 3;
    assert_int_equal(durability_purge(&cfg, st), 0);
    char names[1024];
    list_names(st, names);
    for (uint32_t i = 1; i <= 5; i++) {
        char name[64];
        snprintf(name, sizeof name, "snapshot.10000000%u ", i);
        assert_true((strstr(names, name) != NULL) == (i >= 3));
        snprintf(name, sizeof name, "snapshot.10000000%u.config ", i);
        assert_true((strstr(names, name) != NULL) == (i >= 3));
    }
    assert_null(strstr(names, "snapshot.5.config"));
    member_open(&m, st);
    assert_config_is(m.boot.snap_config, raft_make_zxid(1, 5));
    member_close(&m);
    storage_destroy(st);
}

/* A damaged membership file makes its snapshot invalid: recovery falls
 * back to the older snapshot and its membership, deleting nothing. */
static void test_damaged_membership_file_falls_back(void **state)
{
    struct storage *st = storage_mem_new();
    struct member m;
    member_open(&m, st);
    member_apply(&m, RAFT_ENTRY_NOOP, raft_make_zxid(1, 0));
    member_apply(&m, RAFT_ENTRY_CONFIG, raft_make_zxid(1, 1));
    assert_int_equal(durability_snapshot(m.d), 0);
    member_apply(&m, RAFT_ENTRY_CONFIG, raft_make_zxid(1, 2));
    assert_int_equal(durability_snapshot(m.d), 0);
    member_close(&m);
    struct storage_file *f;
    assert_int_equal(storage_open(st, SNAP_DIR "/snapshot.100000002.config", 0, &f), 0);
    uint8_t junk = 0xee;
    assert_int_equal(storage_pwrite(f, &junk, 1, 30), 0);
    assert_int_equal(storage_datasync(f), 0);
    storage_close(f);
    char before[1024], after[1024];
    list_names(st, before);
    member_open(&m, st);
    assert_true(m.boot.snap_zxid == raft_make_zxid(1, 1));
    assert_config_is(m.boot.snap_config, raft_make_zxid(1, 1));
    member_close(&m);
    list_names(st, after);
    assert_string_equal(before, after);
    storage_destroy(st);
}

static int rm_name(void *arg, const char *name)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", (const char *)arg, name);
    return unlink(path) == 0 ? 0 : -errno;
}

/* The snapshot thread takes snapshots (on real files) while the sequencer
 * (this thread) reports a membership for every zxid and applies it: each
 * snapshot keeps exactly the one at its zxid. Run under TSan too. */
static void test_snapshot_thread_keeps_membership_at_its_zxid(void **state)
{
    char dir[] = "/tmp/larch-test-durability-XXXXXX";
    assert_non_null(mkdtemp(dir));
    struct storage *st = storage_posix_new();
    struct member m;
    config_for_test(&m.cfg);
    snprintf(m.cfg.data_dir, sizeof m.cfg.data_dir, "%s", dir);
    m.t = tree_new();
    char err[512] = "";
    assert_int_equal(durability_open_member(&m.cfg, st, m.t, &m.d, &m.boot, err, sizeof err), 0);
    assert_int_equal(durability_start(m.d), 0);
    struct durability_stats ds = { 0 };
    int64_t t0 = base_mono_ms();
    for (uint32_t i = 1; ds.snapshots < 3 && base_mono_ms() - t0 < 30000; i++) {
        member_apply(&m, RAFT_ENTRY_CONFIG, raft_make_zxid(1, i));
        if (i % 7 == 0)
            durability_want_snapshot(m.d);
        usleep(100);
        durability_get_stats(m.d, &ds);
    }
    durability_stop(m.d);
    durability_get_stats(m.d, &ds);
    assert_true(ds.snapshots >= 3);
    member_close(&m);

    m.t = tree_new();
    assert_int_equal(durability_open_member(&m.cfg, st, m.t, &m.d, &m.boot, err, sizeof err), 0);
    assert_true(m.boot.snap_zxid == ds.last_snapshot_zxid);
    assert_config_is(m.boot.snap_config, m.boot.snap_zxid);
    member_close(&m);
    char larch[4200];
    snprintf(larch, sizeof larch, "%s/larch", dir);
    assert_int_equal(storage_list(st, larch, rm_name, larch), 0);
    assert_int_equal(rmdir(larch), 0);
    assert_int_equal(rmdir(dir), 0);
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
        cmocka_unit_test(test_member_boots_config_entries),
        cmocka_unit_test(test_member_torn_config_record),
        cmocka_unit_test(test_snapshot_keeps_membership_at_its_zxid),
        cmocka_unit_test(test_membership_memory_is_bounded),
        cmocka_unit_test(test_install_keeps_the_leaders_membership),
        cmocka_unit_test(test_purge_removes_membership_files),
        cmocka_unit_test(test_damaged_membership_file_falls_back),
        cmocka_unit_test(test_snapshot_thread_keeps_membership_at_its_zxid),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    rcu_unregister_thread();
    return rc;
}
