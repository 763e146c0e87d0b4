/*
 * fuzz_txnlog — the txn codec and log recovery (replication/txnlog.h).
 *
 * Input: a mode byte, then bytes. Mode bit 0 clear: the bytes are one
 * record payload for txn_decode (bit 1 set: txn_decode_version, version 1).
 * A txn that decodes re-encodes (txn_encode) to no more bytes, which decode
 * to the same txn field by field and re-encode to the same bytes; one that
 * does not is -EBADMSG, *out empty. A version-1 createSession has no
 * password (passwd_known false, zeros) and cannot be written as it is: it
 * is given one first, as recovery gives its session one, and then
 * round-trips in the current version (16 bytes longer per createSession).
 * A TXN_CONFIG txn (a membership change) holds exactly one op whose data
 * is a membership raft_config_decode accepts, and stands for a CONFIG
 * entry (txnlog_entry_type); no other txn holds such an op.
 *
 * Mode bit 0 clear and bit 4 set: the bytes are a membership file
 * (txnlog_config_file_decode). One that decodes re-encodes to a file that
 * decodes to the same zxid and re-encodes to the same bytes.
 *
 * Bit 0 set: the bytes are a log directory, split before each "LRCH" magic
 * into at most SEGS_MAX segments, stored in the in-memory storage as
 * log.<hex zxid of the segment's first record> (bit 3: log.1, log.2, ...,
 * so names and contents disagree). Bit 1 rewrites every record's CRC first,
 * so mutations reach the payloads; bit 2 replays from the first record's
 * zxid. txnlog_replay returns 0, TXNLOG_ECORRUPT or TXNLOG_EORDER and hands
 * out txns above from_zxid in increasing zxid order that round-trip as
 * above. Recovery drops only a torn tail: no intact record after it. After
 * a 0 (that left every segment in place) a second replay finds nothing to
 * repair and the same records, and the writer continues the log (see
 * append_one).
 */
#include <errno.h>

#include "replication/txnlog.h"
#include "tests/fuzz/fuzz.h"

#define SEGS_MAX 4
#define FIRST_ZXID_AT 24 /* 16-byte segment header, then length and CRC */

static bool acl_equal(const struct tree_acl *a, const struct tree_acl *b)
{
    if (a == NULL || b == NULL || a->count != b->count)
        return a == b;
    for (int32_t i = 0; i < a->count; i++) {
        const struct tree_acl_entry *e = &a->items[i], *f = &b->items[i];
        if (e->perms != f->perms || strcmp(e->scheme, f->scheme) || strcmp(e->id, f->id))
            return false;
    }
    return true;
}

static bool op_equal(const struct txn_op *a, const struct txn_op *b)
{
    bool paths = a->path == NULL ? b->path == NULL : b->path != NULL && !strcmp(a->path, b->path);
    return paths && a->type == b->type && a->client_type == b->client_type &&
           a->data_len == b->data_len &&
           (a->data_len <= 0 || !memcmp(a->data, b->data, (size_t)a->data_len)) &&
           acl_equal(a->acl, b->acl) && a->ephemeral_owner == b->ephemeral_owner &&
           a->version == b->version && a->parent_cversion == b->parent_cversion &&
           a->timeout_ms == b->timeout_ms && a->err == b->err &&
           a->passwd_known == b->passwd_known && !memcmp(a->passwd, b->passwd, sizeof a->passwd);
}

/* Only a createSession carries a password; one decoded without (version 1)
 * has zeros, and gets a made-up one here so the txn can be re-encoded.
 * Returns how many it filled in. */
static size_t fill_passwords(struct txn *x)
{
    static const uint8_t zeros[TREE_PASSWD_BYTES];
    size_t n = 0;
    for (uint32_t i = 0; i < x->nops; i++) {
        struct txn_op *op = &x->ops[i];
        BASE_ASSERT(op->type == TXN_CREATE_SESSION ||
                    (!op->passwd_known && !memcmp(op->passwd, zeros, sizeof zeros)));
        if (op->type != TXN_CREATE_SESSION || op->passwd_known)
            continue;
        BASE_ASSERT(!memcmp(op->passwd, zeros, sizeof zeros));
        memset(op->passwd, 0xA5, sizeof op->passwd);
        op->passwd_known = true;
        n++;
    }
    return n;
}

/* x was decoded from len bytes (in the current version, once
 * fill_passwords ran). */
static void check_txn(const struct txn *x, size_t len)
{
    struct base_buf b1 = { 0 }, b2 = { 0 };
    struct txn y;
    for (uint32_t i = 0; i < x->nops; i++) {
        BASE_ASSERT((x->ops[i].data != NULL) == (x->ops[i].data_len >= 0));
        BASE_ASSERT((x->ops[i].type == TXN_CONFIG) == (x->type == TXN_CONFIG));
    }
    uint8_t entry = txnlog_entry_type(x);
    BASE_ASSERT(entry == (x->type == TXN_NOOP     ? RAFT_ENTRY_NOOP
                          : x->type == TXN_CONFIG ? RAFT_ENTRY_CONFIG
                                                  : RAFT_ENTRY_DATA));
    if (entry == RAFT_ENTRY_CONFIG) {
        struct raft_config c;
        BASE_ASSERT(x->nops == 1 && raft_config_decode(x->ops[0].data,
                                                       (size_t)x->ops[0].data_len, &c) == RAFT_OK);
    }
    BASE_ASSERT(txn_encode(&b1, x) == 0 && b1.len <= len);
    uint8_t *exact = fuzz_dup(b1.data, b1.len);
    BASE_ASSERT(txn_decode(exact, b1.len, &y) == 0);
    BASE_ASSERT(y.zxid == x->zxid && y.session_id == x->session_id && y.cxid == x->cxid &&
               y.time_ms == x->time_ms && y.type == x->type && y.nops == x->nops);
    for (uint32_t i = 0; i < x->nops; i++)
        BASE_ASSERT(op_equal(&x->ops[i], &y.ops[i]));
    BASE_ASSERT(txn_encode(&b2, &y) == 0 && b2.len == b1.len && !memcmp(b1.data, b2.data, b1.len));
    txn_free(&y);
    free(exact);
    base_buf_free(&b1);
    base_buf_free(&b2);
}

struct seen {
    int64_t from, last;
    uint64_t n;
};

static int on_txn(void *arg, struct txn *x)
{
    struct seen *s = arg;
    BASE_ASSERT(x->zxid > s->from && (s->n == 0 || x->zxid > s->last));
    fill_passwords(x); /* a record of a version-1 segment */
    check_txn(x, TXNLOG_RECORD_BYTES_MAX);
    s->last = x->zxid;
    s->n++;
    return 0;
}

static void fix_crcs(uint8_t *seg, size_t len)
{
    for (size_t off = 16, plen; off <= len && len - off >= 8; off += 8 + plen) {
        plen = (size_t)base_get_be32(seg + off);
        if (plen > len - off - 8)
            return;
        uint32_t crc = base_crc32c(0, seg + off + 8, plen);
        for (int i = 0; i < 4; i++)
            seg[off + 4 + i] = (uint8_t)(crc >> (24 - 8 * i));
    }
}

/* One stored segment, kept to check what recovery removed from it. */
struct piece {
    char path[64];
    const uint8_t *p;
    size_t n;
};

static int store_log(struct storage *st, uint8_t *p, size_t len, uint8_t mode, struct piece *pc)
{
    int k = 0;
    for (size_t start = 0, end; k < SEGS_MAX && start < len; k++, start = end) {
        const uint8_t *next = memmem(p + start + 1, len - start - 1, "LRCH", 4);
        end = next != NULL && k + 1 < SEGS_MAX ? (size_t)(next - p) : len;
        if (mode & 2)
            fix_crcs(p + start, end - start);
        bool named = !(mode & 8) && end - start >= FIRST_ZXID_AT + 8;
        snprintf(pc[k].path, sizeof pc[k].path, "log/log.%llx",
                 named ? (unsigned long long)base_get_be64(p + start + FIRST_ZXID_AT) : k + 1ull);
        pc[k].p = p + start;
        pc[k].n = end - start;
        struct storage_file *f;
        BASE_ASSERT(storage_open(st, pc[k].path, STORAGE_CREATE, &f) == 0);
        BASE_ASSERT(storage_pwrite(f, pc[k].p, pc[k].n, 0) == 0 && storage_close(f) == 0);
        for (int j = 0; j < k; j++)
            if (strcmp(pc[j].path, pc[k].path) == 0)
                pc[j].n = 0; /* overwritten: nothing of it left to check */
    }
    return k;
}

/* True when a frame with a sane length and a matching CRC starts at or after from. */
static bool frame_after(const uint8_t *b, size_t len, size_t from)
{
    for (size_t off = from; off + 8 <= len; off++) {
        uint64_t plen = base_get_be32(b + off);
        if (plen >= 36 && plen <= len - off - 8 &&
            base_crc32c(0, b + off + 8, plen) == (uint32_t)base_get_be32(b + off + 4))
            return true;
    }
    return false;
}

/* A torn tail ends where the crash cut the last write: no intact record
 * follows it. Recovery may only have removed bytes of that kind (else it
 * had to refuse with TXNLOG_ECORRUPT). Sets *db to the db id of the
 * segment with the highest name that is left, which the writer continues.
 * Returns whether a whole segment went (a header that never became
 * durable): then a segment recovery skipped unread may be the last now. */
static bool check_repair(struct storage *st, const struct piece *pc, int k, uint64_t *db)
{
    bool dropped = false;
    bool found = false; /* not a sentinel: a segment may be named log.8000000000000000 */
    int64_t newest = 0;
    for (int i = 0; i < k; i++) {
        struct storage_file *f;
        uint64_t size = 0;
        uint8_t h[16];
        size_t got;
        if (pc[i].n == 0)
            continue;
        bool kept = storage_open(st, pc[i].path, 0, &f) == 0;
        BASE_ASSERT(!kept || (storage_size(f, &size) == 0 && size <= pc[i].n));
        if (size < pc[i].n)
            BASE_ASSERT(!frame_after(pc[i].p, pc[i].n, size == 0 ? 0 : size + 1));
        dropped |= !kept;
        int64_t zxid = (int64_t)strtoull(pc[i].path + 8, NULL, 16);
        if (kept && (!found || zxid > newest) && storage_pread(f, h, 16, 0, &got) == 0 && got == 16) {
            found = true;
            newest = zxid;
            *db = base_get_be64(h + 8);
        }
        BASE_ASSERT(!kept || storage_close(f) == 0);
    }
    return dropped;
}

/* The writer takes over a recovered log. Open reads back past segments
 * replay skipped when the last one holds no record, so it may refuse what
 * replay accepted (with segments of different db ids it even repairs what
 * replay accepted: its error is not checked). It appends after the snapshot
 * (from) and the log's end, and the next replay sees that. */
static void append_one(struct storage *st, const struct txnlog_replay_stats *r, int64_t from,
                       uint64_t db)
{
    struct txnlog_opts o = { .db_id = db, .segment_bytes_max = 4096, .prealloc_bytes = 512 };
    struct txnlog *log;
    struct seen s = { .from = from };
    int rc = txnlog_open(st, "log", &o, &log);
    BASE_ASSERT(rc <= 0);
    if (rc != 0)
        return;
    int64_t last = txnlog_durable_zxid(log) > from ? txnlog_durable_zxid(log) : from;
    struct txn_op op = { .type = TXN_CLOSE_SESSION, .client_type = ZK_OP_CLOSESESSION,
                         .data_len = -1 };
    bool room = last < INT64_MAX; /* a log may end at the last zxid there is */
    struct txn x = { .zxid = room ? last + 1 : last, .type = TXN_CLOSE_SESSION, .nops = 1, .ops = &op };
    BASE_ASSERT(!room || (txnlog_append(log, &x) == 0 && txnlog_sync(log) == 0));
    txnlog_close(log);
    struct txnlog_replay_stats r3;
    BASE_ASSERT(txnlog_replay(st, "log", from, on_txn, &s, &r3) == 0 && r3.torn_bytes == 0);
    BASE_ASSERT(!room || (r3.last_zxid == x.zxid && r3.records == r->records + 1));
}

static void replay(const uint8_t *data, size_t len, uint8_t mode)
{
    uint8_t *p = fuzz_dup(data, len);
    struct piece pc[SEGS_MAX];
    struct storage *st = storage_mem_new();
    BASE_ASSERT(st != NULL);
    int k = store_log(st, p, len, mode, pc);
    int64_t from =
        (mode & 4) && len >= FIRST_ZXID_AT + 8 ? (int64_t)base_get_be64(p + FIRST_ZXID_AT) : 0;
    struct seen s1 = { .from = from }, s2 = { .from = from };
    struct txnlog_replay_stats r1, r2;
    int rc = txnlog_replay(st, "log", from, on_txn, &s1, &r1);
    BASE_ASSERT(rc == 0 || rc == TXNLOG_ECORRUPT || rc == TXNLOG_EORDER);
    BASE_ASSERT(r1.records == s1.n && (rc != 0 || s1.n == 0 || r1.last_zxid == s1.last));
    uint64_t db = 0;
    if (rc == 0 && !check_repair(st, pc, k, &db)) {
        BASE_ASSERT(txnlog_replay(st, "log", from, on_txn, &s2, &r2) == 0);
        BASE_ASSERT(r2.torn_bytes == 0 && r2.records == r1.records && r2.last_zxid == r1.last_zxid);
        append_one(st, &r1, from, db);
    }
    storage_destroy(st);
    free(p);
}

/* A membership file: what decodes re-encodes to a file that decodes to
 * the same zxid and re-encodes to the same bytes. */
static void config_file(const uint8_t *p, size_t len)
{
    static struct raft_config c, d;
    static uint8_t b1[TXNLOG_CONFIG_FILE_BYTES_MAX], b2[TXNLOG_CONFIG_FILE_BYTES_MAX];
    int64_t z1 = 0, z2 = 0;
    if (txnlog_config_file_decode(p, len, &z1, &c) != 0)
        return;
    size_t n1 = txnlog_config_file_encode(z1, &c, b1);
    BASE_ASSERT(txnlog_config_file_decode(b1, n1, &z2, &d) == 0 && z2 == z1);
    size_t n2 = txnlog_config_file_encode(z2, &d, b2);
    BASE_ASSERT(n2 == n1 && !memcmp(b1, b2, n1));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    if (data[0] & 1) {
        replay(data + 1, size - 1, data[0]);
        return 0;
    }
    if (data[0] & 16) {
        config_file(data + 1, size - 1);
        return 0;
    }
    struct txn x;
    uint32_t version = (data[0] & 2) ? 1 : TXNLOG_VERSION;
    int rc = txn_decode_version(data + 1, size - 1, version, &x);
    BASE_ASSERT(rc == 0 || (rc == -EBADMSG && x.nops == 0 && x.ops == NULL));
    if (rc == 0) {
        size_t filled = fill_passwords(&x);
        BASE_ASSERT(version == 1 || filled == 0);
        check_txn(&x, size - 1 + filled * TREE_PASSWD_BYTES);
    }
    txn_free(&x);
    return 0;
}
