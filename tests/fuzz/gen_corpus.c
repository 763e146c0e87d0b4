/*
 * gen_corpus — writes the seed corpus of the fuzz targets into
 * DIR/<target>/<name> (tests/fuzz/corpus; `scripts/fuzz --regen` runs it).
 *
 * Every input comes out of the project's own encoders: frames from zk_put_*,
 * txns from tree_prep over a tree that is really built (so they are the txns
 * larchd logs), log segments from the txn log writer over the in-memory
 * storage, snapshots from tree_snapshot_write of that tree, quorum-port
 * frames from replication/peer.h's encoders. The corpus thus follows the
 * formats when they change. Deterministic: same code, same bytes.
 * Format 1 of snapshots and log segments, which is still read, is made
 * from the same encoders' output by cutting out what format 2 added
 * (session passwords): the files named *-v1.
 * Input layouts (the mode bytes) are described in each target's header.
 */
#include <errno.h>
#include <sys/stat.h>
#include <urcu.h>

#include "dataplane/dataplane.h"
#include "replication/peer.h"
#include "replication/txnlog.h"
#include "tests/fuzz/fuzz.h"

#define SID_A 0x0100000000000001LL
#define SID_B 0x0100000000000002LL
#define T0_MS 1700000000000LL
#define BOB_ID "bob:fyVmFCwVbTJYrznoSu1koqYEYF0="

static const char *out_dir;

/* Writes DIR/target/name. */
static void emit(const char *target, const char *name, const void *p, size_t len)
{
    char path[4096];
    BASE_ASSERT(mkdir(out_dir, 0755) == 0 || errno == EEXIST);
    snprintf(path, sizeof path, "%s/%s", out_dir, target);
    BASE_ASSERT(mkdir(path, 0755) == 0 || errno == EEXIST);
    snprintf(path, sizeof path, "%s/%s/%s", out_dir, target, name);
    FILE *f = fopen(path, "wb");
    BASE_ASSERT(f != NULL && fwrite(p, 1, len, f) == len && fclose(f) == 0);
}

/* Writes mode byte + bytes. */
static void emit_mode(const char *target, const char *name, uint8_t mode, const void *p,
                      size_t len)
{
    uint8_t *b = malloc(len + 1);
    BASE_ASSERT(b != NULL);
    b[0] = mode;
    memcpy(b + 1, p, len);
    emit(target, name, b, len + 1);
    free(b);
}

static struct zk_str S(const char *s)
{
    return zk_str_c(s);
}

/* ACL lists the frames and the tree use: open, and a mix of every scheme. */
static struct zk_acl open_items[] = { { ZK_PERM_ALL, { { "world", 5 }, { "anyone", 6 } } } };
static struct zk_acl mixed_items[] = {
    { ZK_PERM_READ | ZK_PERM_WRITE, { { "digest", 6 }, { BOB_ID, sizeof BOB_ID - 1 } } },
    { ZK_PERM_READ, { { "ip", 2 }, { "198.18.0.0/16", 13 } } },
    { ZK_PERM_ALL, { { "ip", 2 }, { "fe80::1/64", 10 } } },
    { ZK_PERM_ADMIN, { { "auth", 4 }, { "", 0 } } },
};
static const struct zk_aclvec open_acl = { 1, open_items };
static const struct zk_aclvec mixed_acl = { 4, mixed_items };
static const struct tree_authid bob = { "digest", BOB_ID };
static const struct tree_auth bob_auth = { .ids = &bob, .count = 1, .peer_ip = "198.18.1.3" };

/* ---- fuzz_frame: frames as they follow the length prefix ---------------------- */

static struct zk_wbuf fw;

static void frame_start(int32_t xid, int32_t op)
{
    zk_wbuf_reset(&fw);
    struct zk_request_header h = { xid, op };
    zk_put_request_header(&fw, &h);
}

static void frame_emit(const char *name)
{
    BASE_ASSERT(!fw.err);
    emit("fuzz_frame", name, fw.p, fw.len);
}

static void sub_header(int32_t op, bool done)
{
    struct zk_multi_header h = { done ? -1 : op, done, done ? -1 : 0 };
    zk_put_multi_header(&fw, &h);
}

static void frames_connect(void)
{
    struct zk_connect_req c = { 0, 0, 30000, 0, S("\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0"),
                                false, true };
    c.passwd.len = 16;
    zk_wbuf_reset(&fw);
    zk_put_connect_req(&fw, &c);
    frame_emit("connect-new");
    c = (struct zk_connect_req){ 0, 0x1f, 4000, SID_A, S("0123456789abcdef"), true, true };
    zk_wbuf_reset(&fw);
    zk_put_connect_req(&fw, &c);
    frame_emit("connect-resume-ro");
    c.has_read_only = false;
    zk_wbuf_reset(&fw);
    zk_put_connect_req(&fw, &c);
    frame_emit("connect-3.3");
}

static void frames_writes(void)
{
    struct zk_create_req cr = { S("/app"), S("v1"), open_acl, ZK_PERSISTENT, -1 };
    frame_start(1, ZK_OP_CREATE), zk_put_create_req(&fw, &cr, false), frame_emit("create");
    cr = (struct zk_create_req){ S("/app/lock-"), S(""), mixed_acl, ZK_EPHEMERAL_SEQUENTIAL, -1 };
    frame_start(2, ZK_OP_CREATE2), zk_put_create_req(&fw, &cr, false), frame_emit("create2");
    cr = (struct zk_create_req){ S("/q"), ZK_STR_NULL, open_acl, ZK_CONTAINER, -1 };
    frame_start(3, ZK_OP_CREATECONTAINER), zk_put_create_req(&fw, &cr, false);
    frame_emit("createContainer");
    cr = (struct zk_create_req){ S("/t/\xc3\xa9t\xc3\xa9"), S("x"), open_acl,
                                 ZK_PERSISTENT_SEQUENTIAL_WITH_TTL, 60000 };
    frame_start(4, ZK_OP_CREATETTL), zk_put_create_req(&fw, &cr, true), frame_emit("createTTL");
    struct zk_path_version_req pv = { S("/app/x"), 3 };
    frame_start(5, ZK_OP_DELETE), zk_put_path_version_req(&fw, &pv), frame_emit("delete");
    frame_start(6, ZK_OP_CHECK), zk_put_path_version_req(&fw, &pv), frame_emit("check");
    struct zk_setdata_req sd = { S("/app"), S("\x00\x01\xff"), -1 };
    sd.data.len = 3;
    frame_start(7, ZK_OP_SETDATA), zk_put_setdata_req(&fw, &sd), frame_emit("setData");
    struct zk_setacl_req sa = { S("/app"), mixed_acl, 0 };
    frame_start(8, ZK_OP_SETACL), zk_put_setacl_req(&fw, &sa), frame_emit("setACL");
    struct zk_path_req p = { S("/q") };
    frame_start(9, ZK_OP_DELETECONTAINER), zk_put_path_req(&fw, &p), frame_emit("deleteContainer");
    frame_start(10, ZK_OP_SYNC), zk_put_path_req(&fw, &p), frame_emit("sync");
    frame_start(11, ZK_OP_CLOSESESSION), frame_emit("closeSession");

    frame_start(12, ZK_OP_MULTI);
    cr = (struct zk_create_req){ S("/m"), S("a"), open_acl, ZK_PERSISTENT, -1 };
    sub_header(ZK_OP_CREATE, false), zk_put_create_req(&fw, &cr, false);
    sub_header(ZK_OP_SETDATA, false), zk_put_setdata_req(&fw, &sd);
    sub_header(ZK_OP_CHECK, false), zk_put_path_version_req(&fw, &pv);
    sub_header(ZK_OP_DELETE, false), zk_put_path_version_req(&fw, &pv);
    sub_header(ZK_OP_SETACL, false), zk_put_setacl_req(&fw, &sa);
    sub_header(0, true);
    frame_emit("multi");
}

static void frames_reads(void)
{
    static const int32_t pw_ops[] = { ZK_OP_EXISTS, ZK_OP_GETDATA, ZK_OP_GETCHILDREN,
                                      ZK_OP_GETCHILDREN2 };
    struct zk_path_watch_req pw = { S("/app/config"), true };
    for (size_t i = 0; i < sizeof pw_ops / sizeof pw_ops[0]; i++) {
        frame_start(20 + (int32_t)i, pw_ops[i]), zk_put_path_watch_req(&fw, &pw);
        frame_emit(zk_op_name(pw_ops[i]));
    }
    static const int32_t p_ops[] = { ZK_OP_GETACL, ZK_OP_GETALLCHILDRENNUMBER,
                                     ZK_OP_GETEPHEMERALS };
    struct zk_path_req p = { S("/") };
    for (size_t i = 0; i < sizeof p_ops / sizeof p_ops[0]; i++) {
        frame_start(30 + (int32_t)i, p_ops[i]), zk_put_path_req(&fw, &p);
        frame_emit(zk_op_name(p_ops[i]));
    }
    struct zk_path_mode_req pm = { S("/app"), ZK_ADD_WATCH_PERSISTENT_RECURSIVE };
    frame_start(40, ZK_OP_ADDWATCH), zk_put_path_mode_req(&fw, &pm), frame_emit("addWatch");
    pm.mode = ZK_WATCHER_ANY;
    frame_start(41, ZK_OP_CHECKWATCHES), zk_put_path_mode_req(&fw, &pm);
    frame_emit("checkWatches");
    frame_start(42, ZK_OP_REMOVEWATCHES), zk_put_path_mode_req(&fw, &pm);
    frame_emit("removeWatches");
    frame_start(43, ZK_OP_MULTIREAD);
    sub_header(ZK_OP_GETDATA, false), zk_put_path_watch_req(&fw, &pw);
    sub_header(ZK_OP_GETCHILDREN, false), zk_put_path_watch_req(&fw, &pw);
    sub_header(0, true);
    frame_emit("multiRead");
    frame_start(ZK_XID_PING, ZK_OP_PING), frame_emit("ping");
    frame_start(44, ZK_OP_WHOAMI), frame_emit("whoAmI");
}

static void frames_session(void)
{
    struct zk_auth_packet a = { 0, S("digest"), S("bob:secret") };
    frame_start(ZK_XID_AUTH, ZK_OP_AUTH), zk_put_auth_packet(&fw, &a), frame_emit("auth");
    struct zk_str d[] = { S("/app"), S("/app/config") }, c[] = { S("/") }, e[] = { S("/x") };
    struct zk_setwatches_req sw = { 0x100000005LL, { 2, d }, { 1, e }, { 1, c },
                                    { 1, d }, { 1, c } };
    frame_start(ZK_XID_SETWATCHES, ZK_OP_SETWATCHES), zk_put_setwatches_req(&fw, &sw, false);
    frame_emit("setWatches");
    frame_start(ZK_XID_SETWATCHES, ZK_OP_SETWATCHES2), zk_put_setwatches_req(&fw, &sw, true);
    frame_emit("setWatches2");
}

/* ---- the tree, its txns (fuzz_txnlog mode 0) and its log (mode 1) ------------- */

struct gen {
    struct tree *t;
    int64_t zxid, now_ms;
    int32_t cxid;
    struct txnlog *log;
    struct base_buf seq; /* [u16 length][txn]...: fuzz_apply's input */
    struct base_buf v1log; /* the logged txns as one format-1 segment */
};

/* A createSession request whose password is 16 bytes from pw_byte on. */
static struct tree_req session_req(int32_t timeout_ms, uint8_t pw_byte)
{
    struct tree_req q = { .type = ZK_OP_CREATESESSION, .u.session.timeout_ms = timeout_ms };
    for (int i = 0; i < TREE_PASSWD_BYTES; i++)
        q.u.session.passwd[i] = (uint8_t)(pw_byte + 3 * i);
    return q;
}

/* Format 1 of a txn's encoding b: a createSession without the password
 * that ends it. Returns the length of that prefix of b. */
static size_t v1_len(const struct txn *x, const struct base_buf *b)
{
    if (x->type != TXN_CREATE_SESSION)
        return b->len;
    BASE_ASSERT(x->nops == 1 && b->len > TREE_PASSWD_BYTES &&
                !memcmp(b->data + b->len - TREE_PASSWD_BYTES, x->ops[0].passwd, TREE_PASSWD_BYTES));
    return b->len - TREE_PASSWD_BYTES;
}

/* Appends a record of len payload bytes to a format-1 segment, starting
 * the segment (header: "LRCH", version 1, db id) when it is empty. */
static void v1_record(struct base_buf *seg, uint64_t db_id, const uint8_t *p, size_t len)
{
    uint8_t h[16], frame[8];
    if (seg->len == 0) {
        memcpy(h, "LRCH", 4);
        base_put_be32(h + 4, 1);
        base_put_be64(h + 8, db_id);
        BASE_ASSERT(base_buf_append(seg, h, sizeof h) == 0);
    }
    base_put_be32(frame, (uint32_t)len);
    base_put_be32(frame + 4, base_crc32c(0, p, len));
    BASE_ASSERT(base_buf_append(seg, frame, 8) == 0 && base_buf_append(seg, p, len) == 0);
}

static void seq_add(struct base_buf *s, const struct base_buf *b)
{
    BASE_ASSERT(b->len <= 0xffff);
    int rc = base_buf_put_be16(s, (uint16_t)b->len);
    if (rc == 0)
        rc = base_buf_append(s, b->data, b->len);
    BASE_ASSERT(rc == 0);
}

/* Preps q as session would send it, emits the txn, applies and logs it. */
static void run(struct gen *g, const char *name, int64_t session, struct tree_req q)
{
    struct tree_prep_cfg cfg = { .ttl_enabled = true };
    struct txn x = { .zxid = g->zxid + 1, .session_id = session, .cxid = ++g->cxid,
                     .time_ms = g->now_ms += 1000 };
    int err = tree_prep(g->t, &cfg, &q, &bob_auth, &x);
    BASE_ASSERT(x.nops > 0);
    struct base_buf b = { 0 };
    BASE_ASSERT(txn_encode(&b, &x) == 0);
    char file[64];
    snprintf(file, sizeof file, "txn-%s", name);
    emit_mode("fuzz_txnlog", file, 0, b.data, b.len);
    if (v1_len(&x, &b) != b.len) {
        snprintf(file, sizeof file, "txn-%s-v1", name);
        emit_mode("fuzz_txnlog", file, 2, b.data, v1_len(&x, &b));
    }
    seq_add(&g->seq, &b);
    if (err == ZK_OK) {
        g->zxid++;
        BASE_ASSERT(tree_apply(g->t, &x, NULL, NULL, NULL) == ZK_OK);
        BASE_ASSERT(txnlog_append(g->log, &x) == 0 && txnlog_sync(g->log) == 0);
        v1_record(&g->v1log, 7, b.data, v1_len(&x, &b));
    }
    base_buf_free(&b);
    tree_prep_reset(g->t);
    txn_free(&x);
}

static struct tree_req create_req(int32_t op, const char *path, const char *data, int32_t flags)
{
    struct tree_req q = { .type = op };
    q.u.create = (struct zk_create_req){ S(path), S(data), open_acl, flags, -1 };
    return q;
}

/* Sessions and every kind of node. */
static void build_nodes(struct gen *g)
{
    run(g, "createSession", SID_A, session_req(30000, 0x10));
    run(g, "createSession-b", SID_B, session_req(30000, 0x80));
    struct tree_req q;
    run(g, "create", 0, create_req(ZK_OP_CREATE, "/app", "cfg", ZK_PERSISTENT));
    q = create_req(ZK_OP_CREATE2, "/app/secure", "s", ZK_PERSISTENT_SEQUENTIAL);
    q.u.create.acl = mixed_acl;
    run(g, "create-acl", 0, q);
    run(g, "create-null", 0, create_req(ZK_OP_CREATE, "/app/null", NULL, ZK_PERSISTENT));
    run(g, "create-ephemeral", SID_A,
        create_req(ZK_OP_CREATE, "/app/e-", "", ZK_EPHEMERAL_SEQUENTIAL));
    run(g, "createContainer", 0, create_req(ZK_OP_CREATECONTAINER, "/locks", "", ZK_CONTAINER));
    run(g, "create-in-container", SID_B, create_req(ZK_OP_CREATE, "/locks/l", "", ZK_EPHEMERAL));
    q = create_req(ZK_OP_CREATETTL, "/ttl", "t", ZK_PERSISTENT_WITH_TTL);
    q.u.create.ttl = 60000;
    run(g, "createTTL", 0, q);
}

/* Changes to them: data, ACL, a multi that commits and one that fails,
 * a delete, a session closing (its ephemerals go). */
static void change_nodes(struct gen *g)
{
    struct tree_req q = { .type = ZK_OP_SETDATA };
    q.u.setdata = (struct zk_setdata_req){ S("/app"), S("cfg-v2"), -1 };
    run(g, "setData", 0, q);
    q = (struct tree_req){ .type = ZK_OP_SETACL };
    q.u.setacl = (struct zk_setacl_req){ S("/app/null"), mixed_acl, -1 };
    run(g, "setACL", 0, q);
    struct tree_req subs[3] = { create_req(ZK_OP_CREATE, "/app/m", "m", ZK_PERSISTENT),
                                { .type = ZK_OP_CHECK }, { .type = ZK_OP_DELETE } };
    subs[1].u.del = (struct zk_path_version_req){ S("/app"), 1 };
    subs[2].u.del = (struct zk_path_version_req){ S("/app/m"), -1 };
    run(g, "multi", 0, (struct tree_req){ .type = ZK_OP_MULTI, .ops = subs, .nops = 3 });
    subs[1].u.del.version = 42; /* fails: the multi becomes error ops */
    run(g, "multi-error", 0, (struct tree_req){ .type = ZK_OP_MULTI, .ops = subs, .nops = 3 });
    q = (struct tree_req){ .type = ZK_OP_DELETE };
    q.u.del = (struct zk_path_version_req){ S("/app/null"), -1 };
    run(g, "delete", 0, q);
    run(g, "closeSession", SID_B, (struct tree_req){ .type = ZK_OP_CLOSESESSION });
}

/* A membership change (number k: voters 1..3 and an observer, joint with
 * 1..2 when k is odd) logged as the ensemble driver logs it, after the
 * tree's txns (it moves no zxid the other targets' seeds hold); its txn
 * and the membership file a snapshot at it would keep are seeds too. */
static void log_config(struct gen *g, int64_t zxid, int k, const char *name)
{
    struct raft_config c = { .n_members = 0 };
    for (uint32_t id = 1; id <= 4; id++)
        c.members[c.n_members++] = (struct raft_member){ .id = id, .voter = id < 4 };
    for (uint32_t id = 1; k % 2 && id <= 2; id++)
        c.old[c.n_old++] = (struct raft_member){ .id = id, .voter = true };
    c.extra_len = (uint32_t)snprintf((char *)c.extra, sizeof c.extra,
                                     "server.1=a:2888:3888;2181\nserver.2=b:2888:3888;2181\n"
                                     "server.3=c:2888:3888;2181\n"
                                     "server.4=d:2888:3888:observer;2181\nversion=%x", k);
    uint8_t bytes[RAFT_CONFIG_BYTES_MAX];
    struct raft_entry e = { .zxid = zxid, .type = RAFT_ENTRY_CONFIG, .data = bytes,
                            .len = raft_config_encode(&c, bytes) };
    BASE_ASSERT(txnlog_append_entry(g->log, &e) == 0 && txnlog_sync(g->log) == 0);
    struct txn_op op = { .type = TXN_CONFIG, .client_type = ZK_OP_RECONFIG, .data = bytes,
                         .data_len = (int32_t)e.len };
    struct txn x = { .zxid = zxid, .type = TXN_CONFIG, .nops = 1, .ops = &op };
    struct base_buf b = { 0 };
    char file[64];
    BASE_ASSERT(txn_encode(&b, &x) == 0);
    snprintf(file, sizeof file, "txn-%s", name);
    emit_mode("fuzz_txnlog", file, 0, b.data, b.len);
    base_buf_free(&b);
    uint8_t cf[TXNLOG_CONFIG_FILE_BYTES_MAX];
    snprintf(file, sizeof file, "file-%s", name);
    emit_mode("fuzz_txnlog", file, 16, cf, txnlog_config_file_encode(zxid, &c, cf));
}

/* Collects the names of the log's segments. */
struct seg_names {
    char names[64][64];
    int n;
};

static int add_name(void *arg, const char *name)
{
    struct seg_names *s = arg;
    BASE_ASSERT(s->n < 64);
    snprintf(s->names[s->n++], sizeof s->names[0], "%s", name);
    return 0;
}

static int by_zxid(const void *a, const void *b)
{
    unsigned long long x = strtoull((const char *)a + 4, NULL, 16);
    unsigned long long y = strtoull((const char *)b + 4, NULL, 16);
    return x < y ? -1 : x > y;
}

/* Concatenates the segments in zxid order into *out (malloc'd). */
static size_t log_bytes(struct storage *st, uint8_t **out)
{
    struct seg_names s = { .n = 0 };
    BASE_ASSERT(storage_list(st, "log", add_name, &s) == 0 && s.n > 1);
    qsort(s.names, (size_t)s.n, sizeof s.names[0], by_zxid);
    size_t len = 0, cap = 0;
    *out = NULL;
    for (int i = 0; i < s.n; i++) {
        char path[128];
        struct storage_file *f;
        uint64_t size;
        size_t got;
        snprintf(path, sizeof path, "log/%s", s.names[i]);
        BASE_ASSERT(storage_open(st, path, 0, &f) == 0 && storage_size(f, &size) == 0);
        BASE_ASSERT(base_grow(out, &cap, len + size, 1) == 0);
        BASE_ASSERT(storage_pread(f, *out + len, size, 0, &got) == 0);
        BASE_ASSERT(got == size && storage_close(f) == 0);
        len += size;
    }
    return len;
}

/* A log an upgraded server leaves: the format-1 segment v1 up to the
 * records of the second segment of the format-2 log b, then b from there
 * (the writer goes on in a new segment after the old ones). */
static void emit_upgraded_log(const struct base_buf *v1, const uint8_t *b, size_t len)
{
    const uint8_t *second = memmem(b + 1, len - 1, "LRCH", 4);
    BASE_ASSERT(second != NULL && (size_t)(second - b) + 32 <= len);
    int64_t next = (int64_t)base_get_be64(second + 24); /* its first record's zxid */
    size_t end = 16;
    while (end + 16 <= v1->len && (int64_t)base_get_be64(v1->data + end + 8) < next)
        end += 8 + base_get_be32(v1->data + end);
    struct base_buf m = { 0 };
    BASE_ASSERT(base_buf_append(&m, v1->data, end) == 0);
    BASE_ASSERT(base_buf_append(&m, second, len - (size_t)(second - b)) == 0);
    emit_mode("fuzz_txnlog", "log-v1-then-v2", 1, m.data, m.len);
    base_buf_free(&m);
}

/* The log as format 2 wrote it (format 3 only added membership records):
 * the log so far, before any, with every segment header saying 2. */
static void emit_v2_log(struct storage *st)
{
    uint8_t *b;
    size_t len = log_bytes(st, &b);
    for (uint8_t *h = b; h != NULL && (size_t)(h - b) + 8 <= len;
         h = memmem(h + 1, len - (size_t)(h - b) - 1, "LRCH", 4)) {
        BASE_ASSERT(!memcmp(h, "LRCH", 4) && base_get_be32(h + 4) == TXNLOG_VERSION);
        base_put_be32(h + 4, 2);
    }
    emit_mode("fuzz_txnlog", "log-v2", 1, b, len);
    free(b);
}

/* Mode bits: see fuzz_txnlog.c. */
static void emit_logs(struct storage *st, const struct base_buf *v1)
{
    emit_mode("fuzz_txnlog", "log-v1", 1, v1->data, v1->len);
    emit_mode("fuzz_txnlog", "log-v1-torn", 1, v1->data, v1->len - 7);
    uint8_t *b;
    size_t len = log_bytes(st, &b);
    emit_upgraded_log(v1, b, len);
    emit_mode("fuzz_txnlog", "log-all", 1, b, len);
    emit_mode("fuzz_txnlog", "log-all-from", 1 | 4, b, len);
    emit_mode("fuzz_txnlog", "log-misnamed", 1 | 8, b, len);
    size_t end = len; /* the last record ends where the preallocated zeros start */
    while (end > 0 && b[end - 1] == 0)
        end--;
    emit_mode("fuzz_txnlog", "log-torn", 1, b, end - 5);
    b[len / 2] ^= 0x55;
    emit_mode("fuzz_txnlog", "log-bitflip", 1, b, len);
    emit_mode("fuzz_txnlog", "log-bitflip-recrc", 1 | 2, b, len);
    free(b);
}

/* ---- fuzz_snapshot: mode byte 0 (as written) or 1 (target re-CRCs) ------------- */

#define SNAP_TRAILER_BYTES 29u /* 'T', node count, session count, digest, CRC */
#define SNAP_SESSION_BYTES 30u /* 'S', id, timeout, flags, password */
#define SNAP_V1_SESSION_BYTES 13u

/* Format 1 of snapshot m (written with sessions sessions): the session
 * records, which are last before the trailer, lose their flags and
 * password, and the version and CRC change with them. Sessions are not in
 * the digest, so the trailer's counts and digest stay. */
static void emit_snapshot_v1(const struct base_buf *m, uint64_t sessions, const char *name)
{
    size_t recs = (size_t)sessions * SNAP_SESSION_BYTES;
    BASE_ASSERT(m->len >= 16 + recs + SNAP_TRAILER_BYTES);
    size_t start = m->len - SNAP_TRAILER_BYTES - recs;
    struct base_buf v1 = { 0 };
    BASE_ASSERT(base_buf_append(&v1, m->data, start) == 0);
    base_put_le32(v1.data + 4, 1);
    for (size_t at = start; at < start + recs; at += SNAP_SESSION_BYTES) {
        BASE_ASSERT(m->data[at] == 'S');
        BASE_ASSERT(base_buf_append(&v1, m->data + at, SNAP_V1_SESSION_BYTES) == 0);
    }
    BASE_ASSERT(base_buf_append(&v1, m->data + m->len - SNAP_TRAILER_BYTES,
                                SNAP_TRAILER_BYTES) == 0);
    base_put_le32(v1.data + v1.len - 4, base_crc32c(0, v1.data, v1.len - 4));
    emit_mode("fuzz_snapshot", name, 0, v1.data, v1.len);
    base_buf_free(&v1);
}

static void emit_snapshot(const struct tree *t, const char *name)
{
    struct base_buf m = { 0 };
    struct tree_snap_info info;
    char file[64];
    BASE_ASSERT(tree_snapshot_write(t, fuzz_mem_out, &m, &info) == 0);
    snprintf(file, sizeof file, "%s", name);
    emit_mode("fuzz_snapshot", file, 0, m.data, m.len);
    snprintf(file, sizeof file, "%s-recrc", name);
    emit_mode("fuzz_snapshot", file, 1, m.data, m.len);
    if (info.session_count > 0) {
        snprintf(file, sizeof file, "%s-v1", name);
        emit_snapshot_v1(&m, info.session_count, file);
    }
    base_buf_free(&m);
}

/* A deep chain and a wide fan-out, with three sessions: shapes the loader's
 * child stack and the digest walk see rarely in the rich tree. */
static void build_shapes(void)
{
    struct storage *st = storage_mem_new();
    struct gen g = { .t = tree_new(), .now_ms = T0_MS };
    struct txnlog_opts o = { .segment_bytes_max = 1 << 20, .prealloc_bytes = 256 };
    char path[256] = "";
    BASE_ASSERT(st != NULL && g.t != NULL && txnlog_open(st, "shapes", &o, &g.log) == 0);
    for (int64_t sid = 1; sid <= 3; sid++)
        run(&g, "shape-session", SID_A + sid, session_req(6000, (uint8_t)(0x40 * sid)));
    for (int depth = 0; depth < 12; depth++) {
        strcat(path, depth == 0 ? "/deep" : "/d");
        run(&g, "shape-deep", 0, create_req(ZK_OP_CREATE, path, "", ZK_PERSISTENT));
    }
    run(&g, "shape-wide", 0, create_req(ZK_OP_CREATE, "/wide", NULL, ZK_PERSISTENT));
    for (int i = 0; i < 30; i++) {
        snprintf(path, sizeof path, "/wide/c%02d", i);
        run(&g, "shape-wide", i % 3 == 0 ? SID_A + 1 + i % 2 : 0,
            create_req(ZK_OP_CREATE, path, "w", i % 3 == 0 ? ZK_EPHEMERAL : ZK_PERSISTENT));
    }
    emit_snapshot(g.t, "snap-deep-wide");
    emit("fuzz_apply", "txns-deep-wide", g.seq.data, g.seq.len);
    base_buf_free(&g.seq);
    base_buf_free(&g.v1log);
    txnlog_close(g.log);
    tree_free(g.t);
    storage_destroy(st);
}

static void trees_and_logs(void)
{
    struct storage *st = storage_mem_new();
    struct txnlog_opts o = { .db_id = 7, .segment_bytes_max = 600, .prealloc_bytes = 256 };
    struct gen g = { .t = tree_new(), .now_ms = T0_MS };
    BASE_ASSERT(st != NULL && g.t != NULL && txnlog_open(st, "log", &o, &g.log) == 0);
    emit_snapshot(g.t, "snap-fresh");
    build_nodes(&g);
    emit_snapshot(g.t, "snap-nodes");
    emit("fuzz_apply", "txns-nodes", g.seq.data, g.seq.len);
    change_nodes(&g);
    emit_snapshot(g.t, "snap-changed");
    emit("fuzz_apply", "txns-changed", g.seq.data, g.seq.len);
    emit_v2_log(st);
    log_config(&g, g.zxid + 1, 1, "config-joint");
    log_config(&g, g.zxid + 2, 2, "config");
    base_buf_free(&g.seq);
    txnlog_close(g.log);
    emit_logs(st, &g.v1log);
    base_buf_free(&g.v1log);
    tree_free(g.t);
    storage_destroy(st);
}

/* ---- fuzz_peer: frames (mode 0, mode 2 re-CRCs) and chunk pushes (mode 1) ------ */

static const uint8_t peer_data[] = "snapshot bytes and entry data, in order";

/* Emits the frames in b under name, in mode 0 and in mode 2. */
static void emit_peer(struct base_buf *b, const char *name)
{
    char file[64];
    emit_mode("fuzz_peer", name, 0, b->data, b->len);
    snprintf(file, sizeof file, "%s-recrc", name);
    emit_mode("fuzz_peer", file, 2, b->data, b->len);
    b->len = 0;
}

/* A joint membership, 1-3 to 1-4, with the server.N lines it describes. */
static struct raft_config peer_membership(void)
{
    static const char lines[] = "server.4=127.0.0.4:2888:3888:participant;127.0.0.4:2181\n";
    struct raft_config c = { .n_members = 4, .n_old = 3, .extra_len = sizeof lines - 1 };
    for (uint32_t i = 0; i < 4; i++)
        c.members[i] = (struct raft_member){ i + 1, true };
    for (uint32_t i = 0; i < 3; i++)
        c.old[i] = (struct raft_member){ i + 1, true };
    memcpy(c.extra, lines, sizeof lines - 1);
    return c;
}

static void peer_link(struct base_buf *b)
{
    static const struct raft_entry ents[] = {
        { 0x500000000LL, RAFT_ENTRY_NOOP, NULL, 0 },
        { 0x500000001LL, RAFT_ENTRY_DATA, peer_data, 9 },
        { 0x500000002LL, RAFT_ENTRY_DATA, peer_data, 0 },
    };
    static const struct peer_auth auth[] = { { "digest", 6, BOB_ID, sizeof BOB_ID - 1 },
                                             { "ip", 2, "198.18.1.3", 10 } };
    static const int64_t sids[] = { SID_A, SID_B };
    struct peer_hello h = { PEER_VERSION_MAX, 2, 1, 7 };
    struct raft_msg vote = { .type = RAFT_MSG_VOTE_REQ, .term = 5, .pre_vote = true,
                             .last_zxid = 0x400000003LL };
    struct raft_msg append = { .type = RAFT_MSG_APPEND, .term = 5, .prev_zxid = 0x400000003LL,
                               .commit_zxid = 0x400000003LL, .read_ctx = 3, .entries = ents,
                               .n_entries = 3 };
    struct raft_msg resp = { .type = RAFT_MSG_APPEND_RESP, .term = 5, .reject = true,
                             .match_zxid = 0x500000002LL, .hint_zxid = 0x400000001LL,
                             .read_ctx = 3 };
    struct raft_msg ri = { .type = RAFT_MSG_READ_INDEX, .term = 5, .read_ctx = 11 };
    struct raft_msg rir = { .type = RAFT_MSG_READ_INDEX_RESP, .term = 5, .reject = true,
                            .read_ctx = 11, .commit_zxid = 0x500000002LL };
    struct raft_msg vresp = { .type = RAFT_MSG_VOTE_RESP, .term = 5, .pre_vote = true };
    struct raft_msg beat = { .type = RAFT_MSG_APPEND, .term = 5, .prev_zxid = 0x500000002LL };
    struct raft_config conf = peer_membership();
    static uint8_t conf_bytes[RAFT_CONFIG_BYTES_MAX];
    struct raft_entry conf_ents[] = {
        { 0x500000003LL, RAFT_ENTRY_DATA, peer_data, 9 },
        { 0x500000004LL, RAFT_ENTRY_CONFIG, conf_bytes, raft_config_encode(&conf, conf_bytes) },
    };
    struct raft_msg append_conf = { .type = RAFT_MSG_APPEND, .term = 5,
                                    .prev_zxid = 0x500000002LL, .commit_zxid = 0x500000002LL,
                                    .entries = conf_ents, .n_entries = 2 };
    struct peer_forward fwd = { SID_A, 7, ZK_OP_CREATE, peer_data, 20, auth, 2, 5 };
    BASE_ASSERT(peer_encode_hello(b, &h) == 0);
    emit_peer(b, "hello");
    const struct raft_msg *msgs[] = { &vote, &vresp, &append, &beat, &resp, &ri, &rir,
                                      &append_conf };
    static const char *names[] = { "vote-req", "vote-resp", "append", "heartbeat",
                                   "append-resp", "read-index", "read-index-resp",
                                   "append-config" };
    for (size_t i = 0; i < sizeof msgs / sizeof msgs[0]; i++) {
        BASE_ASSERT(peer_encode_msg(b, msgs[i]) == 0);
        emit_peer(b, names[i]);
    }
    BASE_ASSERT(peer_encode_forward(b, &fwd) == 0);
    emit_peer(b, "forward");
    BASE_ASSERT(peer_encode_touch(b, sids, 2) == 0);
    emit_peer(b, "touch");
    /* a link's first frames, back to back */
    BASE_ASSERT(peer_encode_hello(b, &h) == 0 && peer_encode_msg(b, &vote) == 0 &&
                peer_encode_msg(b, &append) == 0 && peer_encode_msg(b, &resp) == 0 &&
                peer_encode_touch(b, sids, 2) == 0 && peer_encode_forward(b, &fwd) == 0);
    emit_peer(b, "link");
}

/* A snapshot in chunks of chunk bytes, as frames (with conf: its membership). */
static void peer_snap_frames(struct base_buf *b, uint32_t term, size_t len, size_t chunk,
                             const struct raft_config *conf)
{
    struct raft_msg snap = { .type = RAFT_MSG_SNAP, .term = term, .snap_zxid = 0x500000002LL,
                             .snap_data = peer_data, .snap_len = len, .snap_config = conf };
    uint64_t off = 0;
    int rc;
    while ((rc = peer_snap_encode(b, &snap, &off, chunk)) == 0)
        ;
    BASE_ASSERT(rc == 1);
}

/* Pushes for the target's mode 1: [key][total][offset][len] data. */
static void peer_push(struct base_buf *b, uint8_t key, uint8_t total, uint8_t off, uint8_t len)
{
    uint8_t op[4] = { key, total, off, len };
    BASE_ASSERT(base_buf_append(b, op, 4) == 0);
    BASE_ASSERT(len <= sizeof peer_data && base_buf_append(b, peer_data + off % 8, len) == 0);
}

static void peer_chunks(struct base_buf *b)
{
    struct raft_config conf = peer_membership();
    peer_snap_frames(b, 5, sizeof peer_data, 16, NULL);
    emit_peer(b, "snap");
    peer_snap_frames(b, 5, sizeof peer_data, 16, &conf);
    emit_peer(b, "snap-config");
    peer_snap_frames(b, 5, 0, 16, NULL);
    emit_peer(b, "snap-empty");
    peer_snap_frames(b, 5, 30, 7, &conf);
    peer_snap_frames(b, 6, sizeof peer_data, 40, NULL); /* a newer term restarts */
    emit_peer(b, "snap-restart");
    peer_push(b, 1, 30, 0, 10), peer_push(b, 1, 30, 10, 10), peer_push(b, 1, 30, 20, 10);
    emit_mode("fuzz_peer", "push-in-order", 1, b->data, b->len);
    b->len = 0;
    peer_push(b, 1, 30, 0, 10), peer_push(b, 1, 30, 15, 10), peer_push(b, 1, 30, 5, 10);
    emit_mode("fuzz_peer", "push-gap-overlap", 1, b->data, b->len);
    b->len = 0;
    peer_push(b, 2, 30, 0, 10), peer_push(b, 1, 30, 10, 10), peer_push(b, 6, 20, 0, 20);
    peer_push(b, 6, 20, 0, 5), peer_push(b, 0x80, 20, 5, 5), peer_push(b, 6, 250, 0, 5);
    emit_mode("fuzz_peer", "push-stale-newer-bound", 1, b->data, b->len);
    b->len = 0;
    /* memberships (key bit 4, bit 6 the other one, bit 5 a broken one): at
     * 0, refused past 0, a restart with the other, a broken one */
    peer_push(b, 0x11, 30, 0, 10), peer_push(b, 0x11, 30, 10, 10), peer_push(b, 1, 30, 20, 10);
    peer_push(b, 0x51, 30, 0, 30), peer_push(b, 0x21, 30, 0, 10), peer_push(b, 0x12, 0, 0, 0);
    emit_mode("fuzz_peer", "push-membership", 1, b->data, b->len);
    b->len = 0;
}

static void peer_frames(void)
{
    struct base_buf b = { 0 };
    peer_link(&b);
    peer_chunks(&b);
    base_buf_free(&b);
}

/* ---- fuzz_config --------------------------------------------------------------- */

#include "tests/fuzz/gen_configs.h"

/* ---- fuzz_udp: read datagrams (mode bit 1: the target signs them) --------------- */

/* A request datagram for op with record r, padded with pad zero bytes,
 * emitted as it is and (name-signed) for the target to sign. */
static void emit_udp(const char *name, int32_t op, const struct zk_wbuf *r, size_t pad)
{
    uint8_t d[1024] = { 0 };
    BASE_ASSERT(ZK_UDP_REQUEST_HEADER_BYTES + r->len + pad <= sizeof d);
    base_put_be32(d, ZK_UDP_MAGIC);
    d[4] = ZK_UDP_VERSION;
    base_put_be16(d + 6, ZK_UDP_REQUEST_HEADER_BYTES);
    base_put_be64(d + 8, 0x1122334455667788ull);
    base_put_be32(d + 32, (uint32_t)op);
    memcpy(d + ZK_UDP_REQUEST_HEADER_BYTES, r->p, r->len);
    size_t n = ZK_UDP_REQUEST_HEADER_BYTES + r->len + pad;
    char file[64];
    emit_mode("fuzz_udp", name, 0, d, n);
    snprintf(file, sizeof file, "%s-signed", name);
    emit_mode("fuzz_udp", file, 2, d, n);
}

static void udp_datagrams(void)
{
    static const struct {
        const char *name, *path;
        int32_t op;
    } reads[] = {
        { "get-a", "/a", ZK_OP_GETDATA },          { "get-bob", "/bob", ZK_OP_GETDATA },
        { "get-lab", "/lab", ZK_OP_GETDATA },      { "exists-a", "/a", ZK_OP_EXISTS },
        { "exists-none", "/none", ZK_OP_EXISTS },  { "children-a", "/a", ZK_OP_GETCHILDREN },
        { "children2-a", "/a", ZK_OP_GETCHILDREN2 }, { "get-big", "/big", ZK_OP_GETDATA },
    };
    struct zk_wbuf r;
    zk_wbuf_init(&r);
    for (size_t i = 0; i < sizeof reads / sizeof reads[0]; i++) {
        zk_wbuf_reset(&r);
        struct zk_path_watch_req q = { .path = zk_str_c(reads[i].path), .watch = false };
        zk_put_path_watch_req(&r, &q);
        emit_udp(reads[i].name, reads[i].op, &r, 0);
    }
    emit_udp("get-big-padded", ZK_OP_GETDATA, &r, 400);
    zk_wbuf_reset(&r);
    zk_put_str(&r, zk_str_c("/a"));
    emit_udp("count-a", ZK_OP_GETALLCHILDRENNUMBER, &r, 0);
    zk_wbuf_reset(&r);
    struct zk_multi_header h = { .type = ZK_OP_GETDATA, .done = false, .err = -1 };
    zk_put_multi_header(&r, &h);
    struct zk_path_watch_req q = { .path = zk_str_c("/a"), .watch = false };
    zk_put_path_watch_req(&r, &q);
    h.type = ZK_OP_GETCHILDREN;
    zk_put_multi_header(&r, &h);
    q.path = zk_str_c("/bob");
    zk_put_path_watch_req(&r, &q);
    zk_put_multi_end(&r);
    emit_udp("multiread", ZK_OP_MULTIREAD, &r, 0);
    BASE_ASSERT(!r.err);
    zk_wbuf_free(&r);
}

/* ---- fuzz_ldp: Ethernet frames for the DPDK path (modes: see the target) ------- */

static void ldp_frames(void)
{
    static const uint8_t our_mac[6] = { 0x02, 0, 0, 0, 0, 0x01 };
    static const uint8_t peer_mac[6] = { 0x02, 0, 0, 0, 0, 0x02 };
    uint8_t f[128] = { 0 };
    memcpy(f, our_mac, 6);
    memcpy(f + 6, peer_mac, 6);
    /* ARP request (mode 4 fills it in), ICMP echo and a UDP getData of "/"
     * (mode 1 and 3 fix the IPv4 and UDP headers) */
    emit_mode("fuzz_ldp", "arp", 4, f, 42);
    base_put_be16(f + 12, 0x0800);
    f[14 + 9] = 1;
    f[34] = 8;
    memcpy(f + 42, "echo", 4);
    emit_mode("fuzz_ldp", "icmp-echo", 1, f, 46);
    memset(f + 34, 0, sizeof f - 34);
    f[14 + 9] = 17;
    base_put_be16(f + 34, 40000);
    uint8_t *d = f + 42;
    base_put_be32(d, ZK_UDP_MAGIC);
    d[4] = ZK_UDP_VERSION;
    base_put_be16(d + 6, ZK_UDP_REQUEST_HEADER_BYTES);
    base_put_be32(d + 32, ZK_OP_GETDATA);
    base_put_be32(d + 48, 1);
    d[52] = '/';
    emit_mode("fuzz_ldp", "udp-getdata", 3, f, 42 + 54);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gen_corpus DIR (writes DIR/<target>/...)\n");
        return 2;
    }
    out_dir = argv[1];
    rcu_register_thread();
    zk_wbuf_init(&fw);
    frames_connect();
    frames_writes();
    frames_reads();
    frames_session();
    zk_wbuf_free(&fw);
    trees_and_logs();
    build_shapes();
    peer_frames();
    udp_datagrams();
    ldp_frames();
    for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++)
        emit("fuzz_config", configs[i].name, configs[i].text, strlen(configs[i].text));
    rcu_unregister_thread();
    return 0;
}
