/*
 * larch-logdump — prints larchd's txn log segments and snapshots, as
 * ZooKeeper's LogFormatter and SnapshotFormatter do for theirs.
 *
 *   larch-logdump DIR_OR_SEGMENT...   every record of log.* segments
 *   larch-logdump SNAPSHOT_FILE       every node and session of a snapshot
 *   larch-logdump SNAPSHOT.config     the membership kept with a snapshot
 *
 * Read-only: unlike recovery it never truncates a torn tail; it reports
 * where the readable records end and why. Segment format: replication/txnlog.h.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <urcu.h>

#include "replication/replication.h"
#include "replication/txnlog.h"
#include "tree/tree.h"

#define SEG_HEADER_BYTES 16u /* "LRCH", u32 version, u64 db id */

static int read_all(const char *path, uint8_t **out, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -errno;
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || st.st_size < 0) {
        fclose(f);
        return -EIO;
    }
    uint8_t *buf = malloc((size_t)st.st_size + 1);
    size_t got = buf ? fread(buf, 1, (size_t)st.st_size, f) : 0;
    fclose(f);
    if (!buf || got != (size_t)st.st_size) {
        free(buf);
        return buf ? -EIO : -ENOMEM;
    }
    *out = buf;
    *len = got;
    return 0;
}

static const char *txn_name(int32_t type)
{
    switch (type) {
    case TXN_CREATE: return "create";
    case TXN_DELETE: return "delete";
    case TXN_SETDATA: return "setData";
    case TXN_SETACL: return "setACL";
    case TXN_CHECK: return "check";
    case TXN_MULTI: return "multi";
    case TXN_CREATE_CONTAINER: return "createContainer";
    case TXN_CREATE_TTL: return "createTTL";
    case TXN_CREATE_SESSION: return "createSession";
    case TXN_CLOSE_SESSION: return "closeSession";
    case TXN_ERROR: return "error";
    case TXN_NOOP: return "noop";
    case TXN_CONFIG: return "config";
    default: return "unknown";
    }
}

static void print_members(const char *what, const struct raft_member *m, uint32_t n)
{
    printf("      %s:", what);
    for (uint32_t i = 0; i < n; i++)
        printf(" %u (%s)", m[i].id, m[i].voter ? "voter" : "observer");
    printf("\n");
}

/* A membership: who, whether a change is under way, and the driver's
 * description (larchd: server.N lines), a line at a time. */
static void print_config(const struct raft_config *c)
{
    printf("      %s\n", c->n_old ? "joint: a change under way (needs a majority of each)"
                                   : "final");
    print_members(c->n_old ? "new" : "members", c->members, c->n_members);
    if (c->n_old)
        print_members("old", c->old, c->n_old);
    const char *p = (const char *)c->extra, *end = p + c->extra_len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        int n = (int)((nl ? nl : end) - p);
        printf("      | %.*s\n", n, p);
        p += n + (nl != NULL);
    }
}

static void print_config_op(const struct txn_op *op)
{
    struct raft_config *c = malloc(sizeof(*c));
    if (!c || raft_config_decode(op->data, (size_t)op->data_len, c) != RAFT_OK)
        printf(" (%d bytes: %s)\n", op->data_len, c ? "does not decode" : "out of memory");
    else {
        printf(" (%d bytes)\n", op->data_len);
        print_config(c);
    }
    free(c);
}

static void print_op(const struct txn_op *op)
{
    printf("    %s", txn_name(op->type));
    if (op->path)
        printf(" %s", op->path);
    if (op->type == TXN_CREATE || op->type == TXN_CREATE_CONTAINER || op->type == TXN_CREATE_TTL ||
        op->type == TXN_SETDATA)
        printf(" data=%d bytes", op->data_len);
    if (op->ephemeral_owner)
        printf(" owner=0x%" PRIx64, (uint64_t)op->ephemeral_owner);
    if (op->type == TXN_SETDATA || op->type == TXN_SETACL || op->type == TXN_CHECK)
        printf(" version=%d", op->version);
    /* the password is a secret: whether it is there, not what it is */
    if (op->type == TXN_CREATE_SESSION)
        printf(" timeout=%dms passwd=%s", op->timeout_ms,
               op->passwd_known ? "recorded" : "none (format 1)");
    if (op->type == TXN_ERROR)
        printf(" err=%d", op->err);
    /* an ensemble's move marker: the session moved to the member it came from */
    if (op->type == TXN_ERROR && op->client_type == SEQ_OP_REATTACH)
        printf(" (session moved%s)", op->err == 0 ? "" : ": refused");
    if (op->type == TXN_CONFIG) {
        print_config_op(op);
        return;
    }
    printf("\n");
}

static void print_txn(const struct txn *x)
{
    time_t secs = (time_t)(x->time_ms / 1000);
    struct tm tm;
    char when[32];
    strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", gmtime_r(&secs, &tm));
    printf("%s.%03d session 0x%" PRIx64 " cxid 0x%x zxid 0x%" PRIx64 " %s\n", when, (int)(x->time_ms % 1000),
           (uint64_t)x->session_id, (unsigned)x->cxid, (uint64_t)x->zxid, txn_name(x->type));
    for (uint32_t i = 0; i < x->nops; i++)
        print_op(&x->ops[i]);
}

/* Prints one segment; returns the records read or -1 when it could not be read. */
static long dump_segment(const char *path)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc = read_all(path, &buf, &len);
    if (rc != 0) {
        fprintf(stderr, "larch-logdump: %s: %s\n", path, strerror(-rc));
        return -1;
    }
    if (len < SEG_HEADER_BYTES || memcmp(buf, "LRCH", 4) != 0) {
        fprintf(stderr, "larch-logdump: %s: not a larch txn log segment\n", path);
        free(buf);
        return -1;
    }
    uint32_t version = base_get_be32(buf + 4);
    printf("# %s: version %u\n", path, version);
    if (version < TXNLOG_VERSION_MIN || version > TXNLOG_VERSION) {
        fprintf(stderr, "larch-logdump: %s: version %u is not one this build reads (%u to %u)\n",
                path, version, TXNLOG_VERSION_MIN, TXNLOG_VERSION);
        free(buf);
        return -1;
    }
    size_t off = SEG_HEADER_BYTES;
    long n = 0;
    while (off + 8 <= len) {
        uint32_t rlen = base_get_be32(buf + off), crc = base_get_be32(buf + off + 4);
        if (rlen == 0 && crc == 0)
            break; /* preallocated zeros: the end of the data */
        struct txn x;
        if (rlen > len - off - 8 || base_crc32c(0, buf + off + 8, rlen) != crc ||
            txn_decode_version(buf + off + 8, rlen, version, &x) != 0) {
            printf("# record at offset %zu is torn or corrupt: %zu bytes after it are unreadable\n", off, len - off);
            break;
        }
        print_txn(&x);
        txn_free(&x);
        off += 8 + rlen;
        n++;
    }
    printf("# %ld records\n", n);
    free(buf);
    return n;
}

static int by_name_zxid(const void *a, const void *b)
{
    unsigned long long x = strtoull(*(char *const *)a + 4, NULL, 16);
    unsigned long long y = strtoull(*(char *const *)b + 4, NULL, 16);
    return x < y ? -1 : x > y;
}

static int dump_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "larch-logdump: %s: %s\n", dir, strerror(errno));
        return 1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, "log.", 4) != 0)
            continue;
        if (base_grow(&names, &cap, n + 1, sizeof *names) != 0 ||
            !(names[n] = strdup(e->d_name)))
            break;
        n++;
    }
    closedir(d);
    qsort(names, n, sizeof(*names), by_name_zxid);
    int status = n ? 0 : 1;
    if (!n)
        fprintf(stderr, "larch-logdump: %s holds no log.* segments\n", dir);
    for (size_t i = 0; i < n; i++) {
        char path[8192];
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        if (dump_segment(path) < 0)
            status = 1;
        free(names[i]);
    }
    free(names);
    return status;
}

/* Depth-first from "/": every node with its Stat, as SnapshotFormatter.
 * An explicit stack of heap paths, no recursion and no fixed buffers: a
 * path may be as long as a frame, a tree hundreds of thousands deep. */
struct walk {
    char **paths; /* to visit, the next one last */
    size_t n, cap;
    const char *parent; /* the node whose children collect_kid pushes */
    size_t first;       /* where its children start in paths */
    bool oom;
};

static bool walk_push(struct walk *w, char *path)
{
    if (!path) {
        w->oom = true;
        return false;
    }
    if (base_grow(&w->paths, &w->cap, w->n + 1, sizeof *w->paths) != 0) {
        free(path);
        w->oom = true;
        return false;
    }
    w->paths[w->n++] = path;
    return true;
}

/* parent + "/" + name (no doubled slash under "/"), on the heap. */
static char *child_path(const char *parent, const char *name, size_t len)
{
    size_t plen = strcmp(parent, "/") == 0 ? 0 : strlen(parent);
    char *p = malloc(plen + 1 + len + 1);
    if (p) {
        memcpy(p, parent, plen);
        p[plen] = '/';
        memcpy(p + plen + 1, name, len);
        p[plen + 1 + len] = '\0';
    }
    return p;
}

static void collect_kid(void *arg, const char *name, size_t len)
{
    struct walk *w = arg;
    if (!w->oom)
        walk_push(w, child_path(w->parent, name, len));
}

/* Prints path's node and pushes its children so they come out in order. */
static void print_node(const struct tree *t, struct walk *w, const char *path)
{
    struct tree_view v;
    w->parent = path;
    w->first = w->n;
    rcu_read_lock();
    if (tree_get_children(t, path, strlen(path), &v, collect_kid, w) != ZK_OK) {
        rcu_read_unlock();
        return;
    }
    printf("%s\n  cZxid = 0x%" PRIx64 "\n  mZxid = 0x%" PRIx64 "\n  pZxid = 0x%" PRIx64
           "\n  version = %d cversion = %d aversion = %d\n  ephemeralOwner = 0x%" PRIx64
           "\n  dataLength = %d numChildren = %d\n",
           path, (uint64_t)v.stat.czxid, (uint64_t)v.stat.mzxid, (uint64_t)v.stat.pzxid, v.stat.version,
           v.stat.cversion, v.stat.aversion, (uint64_t)v.stat.ephemeral_owner, v.stat.data_length,
           v.stat.num_children);
    rcu_read_unlock();
    /* reverse the children just pushed: the stack pops the first one next */
    for (size_t i = w->first, j = w->n; i + 1 < j; i++, j--) {
        char *tmp = w->paths[i];
        w->paths[i] = w->paths[j - 1];
        w->paths[j - 1] = tmp;
    }
}

/* 0, or -ENOMEM (the output stops short; the caller says so). */
static int print_tree(const struct tree *t)
{
    struct walk w = { 0 };
    walk_push(&w, strdup("/"));
    while (w.n > 0 && !w.oom) {
        char *path = w.paths[--w.n];
        print_node(t, &w, path);
        free(path);
    }
    while (w.n > 0)
        free(w.paths[--w.n]);
    free(w.paths);
    return w.oom ? -ENOMEM : 0;
}

static void print_session(void *arg, struct tree_session *s)
{
    (void)arg;
    printf("session 0x%" PRIx64 " timeout %dms passwd %s\n", (uint64_t)s->id, s->timeout_ms,
           s->passwd_known ? "recorded" : "none (format 1)");
}

static int dump_snapshot(const char *path)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc = read_all(path, &buf, &len);
    if (rc != 0) {
        fprintf(stderr, "larch-logdump: %s: %s\n", path, strerror(-rc));
        return 1;
    }
    struct tree *t = tree_new();
    struct tree_snap_info info;
    rc = t ? tree_snapshot_load(t, buf, len, &info) : -ENOMEM;
    free(buf);
    if (rc != 0) {
        fprintf(stderr, "larch-logdump: %s: not a valid snapshot (error %d)\n", path, rc);
        if (t)
            tree_free(t);
        return 1;
    }
    printf("# %s: zxid 0x%" PRIx64 ", %" PRIu64 " nodes, %" PRIu64 " sessions, digest %016" PRIx64 "\n", path,
           (uint64_t)info.zxid_start, info.node_count, info.session_count, info.digest);
    int walk_rc = print_tree(t);
    if (walk_rc != 0)
        fprintf(stderr, "larch-logdump: %s: out of memory walking the tree\n", path);
    tree_session_each(t, print_session, NULL);
    rcu_barrier();
    tree_free(t);
    return walk_rc != 0;
}

static int dump_config_file(const char *path)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc = read_all(path, &buf, &len);
    if (rc != 0) {
        fprintf(stderr, "larch-logdump: %s: %s\n", path, strerror(-rc));
        return 1;
    }
    struct raft_config *c = malloc(sizeof(*c));
    int64_t zxid = 0;
    rc = c ? txnlog_config_file_decode(buf, len, &zxid, c) : -ENOMEM;
    free(buf);
    if (rc != 0) {
        fprintf(stderr, "larch-logdump: %s: not a valid membership file\n", path);
        free(c);
        return 1;
    }
    printf("# %s: the membership at zxid 0x%" PRIx64 "\n", path, (uint64_t)zxid);
    print_config(c);
    free(c);
    return 0;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        fprintf(argc < 2 ? stderr : stdout,
                "usage: larch-logdump PATH...\n"
                "  PATH is a txn log directory (<dataLogDir>/larch: every log.* segment in\n"
                "  zxid order), one log.<zxid> segment, a snapshot.<zxid> file, or the\n"
                "  snapshot.<zxid>.config membership file beside it.\n"
                "  Read-only: a torn tail is reported, never truncated.\n");
        return argc < 2 ? 2 : 0;
    }
    rcu_register_thread();
    int status = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        const char *base = strrchr(argv[i], '/') ? strrchr(argv[i], '/') + 1 : argv[i];
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "larch-logdump: %s: %s\n", argv[i], strerror(errno));
            status = 1;
        } else if (S_ISDIR(st.st_mode)) {
            status |= dump_dir(argv[i]);
        } else if (strncmp(base, "snapshot.", 9) == 0 &&
                   ends_with(base, TXNLOG_CONFIG_FILE_SUFFIX)) {
            status |= dump_config_file(argv[i]);
        } else if (strncmp(base, "snapshot.", 9) == 0) {
            status |= dump_snapshot(argv[i]);
        } else if (dump_segment(argv[i]) < 0) {
            status = 1;
        }
    }
    rcu_unregister_thread();
    return status;
}
