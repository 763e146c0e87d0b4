/*
 * storage.c — the file-system interface the txn log does its I/O through:
 * a POSIX adapter over real files and an in-memory simulator that models
 * what survives a power loss (SQLite's test6.c crash VFS is the model: writes
 * stay pending until the file is synced and a crash lands, tears or drops
 * them in issue order).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "replication/txnlog.h"

/* ---- dispatchers ----------------------------------------------------------- */

int storage_open(struct storage *s, const char *path, int flags, struct storage_file **out)
{
    return s->ops->open(s, path, flags, out);
}

int storage_pwrite(struct storage_file *f, const void *buf, size_t len, uint64_t off)
{
    return f->st->ops->pwrite(f, buf, len, off);
}

int storage_pread(struct storage_file *f, void *buf, size_t len, uint64_t off, size_t *got)
{
    return f->st->ops->pread(f, buf, len, off, got);
}

int storage_datasync(struct storage_file *f)
{
    return f->st->ops->datasync(f);
}

int storage_truncate(struct storage_file *f, uint64_t size)
{
    return f->st->ops->truncate(f, size);
}

int storage_preallocate(struct storage_file *f, uint64_t off, uint64_t len)
{
    return f->st->ops->preallocate(f, off, len);
}

int storage_size(struct storage_file *f, uint64_t *out)
{
    return f->st->ops->size(f, out);
}

int storage_close(struct storage_file *f)
{
    return f->st->ops->close(f);
}

int storage_list(struct storage *s, const char *dir, storage_name_fn fn, void *arg)
{
    return s->ops->list(s, dir, fn, arg);
}

int storage_unlink(struct storage *s, const char *path)
{
    return s->ops->unlink(s, path);
}

int storage_rename(struct storage *s, const char *from, const char *to)
{
    return s->ops->rename(s, from, to);
}

int storage_sync_dir(struct storage *s, const char *dir)
{
    return s->ops->sync_dir(s, dir);
}

int storage_mkdirs(struct storage *s, const char *dir)
{
    return s->ops->mkdirs(s, dir);
}

int storage_write_whole(struct storage *s, const char *dir, const char *path, const void *buf,
                        size_t len, int flags)
{
    char tmp[PATH_MAX];
    int n = snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (n < 0 || (size_t)n >= sizeof tmp)
        return -ENAMETOOLONG;
    struct storage_file *f;
    int rc = storage_open(s, tmp, flags | STORAGE_CREATE, &f);
    if (rc != 0)
        return rc;
    rc = storage_pwrite(f, buf, len, 0);
    if (rc == 0)
        rc = storage_datasync(f);
    int crc = storage_close(f);
    if (rc == 0)
        rc = crc;
    /* the rename is the commit point; syncing the directory makes it stick */
    if (rc == 0)
        rc = storage_rename(s, tmp, path);
    if (rc == 0)
        rc = storage_sync_dir(s, dir);
    return rc;
}

void storage_destroy(struct storage *s)
{
    if (s != NULL)
        s->ops->destroy(s);
}

/* ---- POSIX ------------------------------------------------------------------ */

struct posix_file {
    struct storage_file base;
    int fd;
};

static int posix_fd(struct storage_file *f)
{
    return ((struct posix_file *)f)->fd;
}

static int posix_open(struct storage *s, const char *path, int flags, struct storage_file **out)
{
    int oflags = O_RDWR | O_CLOEXEC;
    if (flags & STORAGE_CREATE)
        oflags |= O_CREAT | O_TRUNC;
    struct posix_file *f = malloc(sizeof *f);
    if (f == NULL)
        return -ENOMEM;
    f->fd = open(path, oflags, (flags & STORAGE_PRIVATE) ? 0600 : 0644);
    /* an existing file keeps its mode through O_CREAT: set it before any
     * byte of the secret goes in */
    if (f->fd >= 0 && (flags & STORAGE_PRIVATE) && fchmod(f->fd, 0600) != 0) {
        int err = -errno;
        close(f->fd);
        f->fd = -1;
        errno = -err;
    }
    if (f->fd < 0) {
        int err = -errno;
        free(f);
        return err;
    }
    f->base.st = s;
    *out = &f->base;
    return 0;
}

/* Loops over short writes and EINTR: the caller asked for all of buf. */
static int posix_pwrite(struct storage_file *f, const void *buf, size_t len, uint64_t off)
{
    const uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = pwrite(posix_fd(f), p, len, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            return -EIO;
        p += n;
        off += (uint64_t)n;
        len -= (size_t)n;
    }
    return 0;
}

static int posix_pread(struct storage_file *f, void *buf, size_t len, uint64_t off, size_t *got)
{
    uint8_t *p = buf;
    size_t done = 0;
    while (done < len) {
        ssize_t n = pread(posix_fd(f), p + done, len - done, (off_t)(off + done));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            break;
        done += (size_t)n;
    }
    *got = done;
    return 0;
}

static int posix_datasync(struct storage_file *f)
{
    return fdatasync(posix_fd(f)) == 0 ? 0 : -errno;
}

static int posix_truncate(struct storage_file *f, uint64_t size)
{
    return ftruncate(posix_fd(f), (off_t)size) == 0 ? 0 : -errno;
}

static int posix_size(struct storage_file *f, uint64_t *out)
{
    struct stat st;
    if (fstat(posix_fd(f), &st) != 0)
        return -errno;
    *out = (uint64_t)st.st_size;
    return 0;
}

/* For file systems without fallocate: write zeros past the current end
 * only, so existing bytes are never overwritten. */
static int posix_zero_fill(struct storage_file *f, uint64_t off, uint64_t len)
{
    static const uint8_t zeros[65536];
    uint64_t size;
    int rc = posix_size(f, &size);
    uint64_t pos = off > size ? off : size;
    while (rc == 0 && pos < off + len) {
        uint64_t n = off + len - pos;
        if (n > sizeof zeros)
            n = sizeof zeros;
        rc = posix_pwrite(f, zeros, (size_t)n, pos);
        pos += n;
    }
    return rc;
}

static int posix_preallocate(struct storage_file *f, uint64_t off, uint64_t len)
{
    int rc = posix_fallocate(posix_fd(f), (off_t)off, (off_t)len);
    if (rc == EOPNOTSUPP || rc == EINVAL)
        return posix_zero_fill(f, off, len);
    return -rc;
}

static int posix_close(struct storage_file *f)
{
    int rc = close(posix_fd(f)) == 0 ? 0 : -errno;
    free(f);
    return rc;
}

static int posix_list(struct storage *s, const char *dir, storage_name_fn fn, void *arg)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return -errno;
    int rc = 0;
    for (;;) {
        errno = 0;
        struct dirent *e = readdir(d);
        if (e == NULL) {
            rc = -errno;
            break;
        }
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        rc = fn(arg, e->d_name);
        if (rc != 0)
            break;
    }
    closedir(d);
    return rc;
}

static int posix_unlink(struct storage *s, const char *path)
{
    return unlink(path) == 0 ? 0 : -errno;
}

static int posix_rename(struct storage *s, const char *from, const char *to)
{
    return rename(from, to) == 0 ? 0 : -errno;
}

/* A new or removed name is durable only once its directory is fsync'd. */
static int posix_sync_dir(struct storage *s, const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = fsync(fd) == 0 ? 0 : -errno;
    close(fd);
    return rc;
}

static void posix_destroy(struct storage *s)
{
    free(s);
}

/* mkdir -p: a data dir may be named before it exists (ZooKeeper creates it). */
static int posix_mkdirs(struct storage *s, const char *dir)
{
    size_t n = strlen(dir);
    char *tmp = malloc(n + 1);
    if (tmp == NULL)
        return -ENOMEM;
    memcpy(tmp, dir, n + 1);
    int rc = 0;
    for (char *p = tmp + 1; rc == 0 && *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
            rc = -errno;
        *p = '/';
    }
    if (rc == 0 && mkdir(tmp, 0755) != 0 && errno != EEXIST)
        rc = -errno;
    free(tmp);
    return rc;
}

static const struct storage_ops posix_ops = {
    .open = posix_open,
    .pwrite = posix_pwrite,
    .pread = posix_pread,
    .datasync = posix_datasync,
    .truncate = posix_truncate,
    .preallocate = posix_preallocate,
    .size = posix_size,
    .close = posix_close,
    .list = posix_list,
    .unlink = posix_unlink,
    .rename = posix_rename,
    .sync_dir = posix_sync_dir,
    .mkdirs = posix_mkdirs,
    .destroy = posix_destroy,
};

struct storage *storage_posix_new(void)
{
    struct storage *s = malloc(sizeof *s);
    if (s != NULL)
        s->ops = &posix_ops;
    return s;
}

/* ---- in-memory simulator ---------------------------------------------------- */

/* One file. refs: one for being linked under its name, one per handle. */
struct mem_node {
    char *path; /* NULL once unlinked */
    uint8_t *cur;
    size_t cur_len;
    uint8_t *dur;
    size_t dur_len;
    unsigned refs;
    struct mem_node *next;
};

/* A write (bytes != NULL) or a resize to off (bytes == NULL) not yet synced. */
struct mem_op {
    struct mem_node *node;
    uint64_t off;
    size_t len;
    uint8_t *bytes;
};

struct mem_storage {
    struct storage base;
    struct mem_node *nodes;
    struct mem_op *ops; /* pending operations of every file, in issue order */
    size_t nops;
    size_t ops_cap;
    uint64_t space_max;
    int sync_err;
    unsigned sync_fail_count;
};

struct mem_file {
    struct storage_file base;
    struct mem_node *node;
};

static struct mem_storage *mem_of(struct storage *s)
{
    return (struct mem_storage *)s;
}

static struct mem_node *mem_node_of(struct storage_file *f)
{
    return ((struct mem_file *)f)->node;
}

static struct mem_node *mem_find(struct mem_storage *m, const char *path)
{
    for (struct mem_node *n = m->nodes; n != NULL; n = n->next) {
        if (n->path != NULL && strcmp(n->path, path) == 0)
            return n;
    }
    return NULL;
}

uint64_t storage_mem_used(const struct storage *s)
{
    const struct mem_storage *m = (const struct mem_storage *)s;
    uint64_t used = 0;
    for (const struct mem_node *n = m->nodes; n != NULL; n = n->next)
        used += n->cur_len;
    return used;
}

/* Resizes a byte image, zero-filling growth. */
static int image_resize(uint8_t **p, size_t *len, size_t new_len)
{
    if (new_len > *len) {
        uint8_t *q = realloc(*p, new_len);
        if (q == NULL)
            return -ENOMEM;
        memset(q + *len, 0, new_len - *len);
        *p = q;
    }
    *len = new_len;
    return 0;
}

static void mem_drop_ops_of(struct mem_storage *m, const struct mem_node *node)
{
    size_t kept = 0;
    for (size_t i = 0; i < m->nops; i++) {
        if (m->ops[i].node == node)
            free(m->ops[i].bytes);
        else
            m->ops[kept++] = m->ops[i];
    }
    m->nops = kept;
}

static void mem_node_unref(struct mem_storage *m, struct mem_node *node)
{
    if (--node->refs > 0)
        return;
    mem_drop_ops_of(m, node);
    for (struct mem_node **pp = &m->nodes; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == node) {
            *pp = node->next;
            break;
        }
    }
    free(node->path);
    free(node->cur);
    free(node->dur);
    free(node);
}

static int mem_record_op(struct mem_storage *m, struct mem_node *node, uint64_t off,
                         const void *bytes, size_t len)
{
    if (base_grow(&m->ops, &m->ops_cap, m->nops + 1, sizeof *m->ops) != 0)
        return -ENOMEM;
    struct mem_op op = { .node = node, .off = off, .len = len };
    if (bytes != NULL) {
        op.bytes = malloc(len > 0 ? len : 1);
        if (op.bytes == NULL)
            return -ENOMEM;
        memcpy(op.bytes, bytes, len);
    }
    m->ops[m->nops++] = op;
    return 0;
}

static int mem_open(struct storage *s, const char *path, int flags, struct storage_file **out)
{
    struct mem_storage *m = mem_of(s);
    struct mem_node *node = mem_find(m, path);
    if (node == NULL && !(flags & STORAGE_CREATE))
        return -ENOENT;
    struct mem_file *f = calloc(1, sizeof *f);
    if (f == NULL)
        return -ENOMEM;
    if (node == NULL) {
        node = calloc(1, sizeof *node);
        char *copy = strdup(path);
        if (node == NULL || copy == NULL) {
            free(node);
            free(copy);
            free(f);
            return -ENOMEM;
        }
        node->path = copy;
        node->refs = 1;
        node->next = m->nodes;
        m->nodes = node;
    } else if (flags & STORAGE_CREATE) {
        /* O_TRUNC: a metadata change that is durable at once here */
        mem_drop_ops_of(m, node);
        node->cur_len = 0;
        node->dur_len = 0;
    }
    node->refs++;
    f->node = node;
    f->base.st = s;
    *out = &f->base;
    return 0;
}

/* Space left before the simulated disk is full, given a file growing to end. */
static uint64_t mem_room(struct mem_storage *m, const struct mem_node *node, uint64_t end)
{
    uint64_t used = storage_mem_used(&m->base);
    if (end <= node->cur_len || m->space_max == UINT64_MAX)
        return UINT64_MAX;
    uint64_t growth = end - node->cur_len;
    if (used + growth <= m->space_max)
        return UINT64_MAX;
    return used < m->space_max ? m->space_max - used : 0;
}

static int mem_apply_write(struct mem_node *node, const void *buf, size_t len, uint64_t off)
{
    if (off + len > node->cur_len) {
        int rc = image_resize(&node->cur, &node->cur_len, (size_t)(off + len));
        if (rc != 0)
            return rc;
    }
    if (len > 0)
        memcpy(node->cur + off, buf, len);
    return 0;
}

/* Like a real disk running full: the bytes that fit land, then ENOSPC. */
static int mem_pwrite(struct storage_file *f, const void *buf, size_t len, uint64_t off)
{
    struct mem_storage *m = mem_of(f->st);
    struct mem_node *node = mem_node_of(f);
    uint64_t room = mem_room(m, node, off + len);
    int result = 0;
    if (room != UINT64_MAX) {
        uint64_t fits = node->cur_len + room > off ? node->cur_len + room - off : 0;
        len = fits < len ? (size_t)fits : len;
        result = -ENOSPC;
    }
    if (len == 0)
        return result;
    int rc = mem_record_op(m, node, off, buf, len);
    if (rc == 0)
        rc = mem_apply_write(node, buf, len, off);
    return rc != 0 ? rc : result;
}

static int mem_pread(struct storage_file *f, void *buf, size_t len, uint64_t off, size_t *got)
{
    struct mem_node *node = mem_node_of(f);
    size_t n = 0;
    if (off < node->cur_len)
        n = node->cur_len - off < len ? (size_t)(node->cur_len - off) : len;
    if (n > 0)
        memcpy(buf, node->cur + off, n);
    *got = n;
    return 0;
}

static int mem_datasync(struct storage_file *f)
{
    struct mem_storage *m = mem_of(f->st);
    struct mem_node *node = mem_node_of(f);
    if (m->sync_fail_count > 0) {
        m->sync_fail_count--;
        return m->sync_err;
    }
    uint8_t *copy = malloc(node->cur_len > 0 ? node->cur_len : 1);
    if (copy == NULL)
        return -ENOMEM;
    if (node->cur_len > 0)
        memcpy(copy, node->cur, node->cur_len);
    free(node->dur);
    node->dur = copy;
    node->dur_len = node->cur_len;
    mem_drop_ops_of(m, node);
    return 0;
}

static int mem_resize(struct storage_file *f, uint64_t size)
{
    struct mem_storage *m = mem_of(f->st);
    struct mem_node *node = mem_node_of(f);
    int rc = mem_record_op(m, node, size, NULL, 0);
    if (rc == 0)
        rc = image_resize(&node->cur, &node->cur_len, (size_t)size);
    return rc;
}

static int mem_truncate(struct storage_file *f, uint64_t size)
{
    struct mem_node *node = mem_node_of(f);
    if (size > node->cur_len && mem_room(mem_of(f->st), node, size) != UINT64_MAX)
        return -ENOSPC;
    return mem_resize(f, size);
}

static int mem_preallocate(struct storage_file *f, uint64_t off, uint64_t len)
{
    struct mem_node *node = mem_node_of(f);
    if (off + len <= node->cur_len)
        return 0;
    if (mem_room(mem_of(f->st), node, off + len) != UINT64_MAX)
        return -ENOSPC;
    return mem_resize(f, off + len);
}

static int mem_size(struct storage_file *f, uint64_t *out)
{
    *out = mem_node_of(f)->cur_len;
    return 0;
}

static int mem_close(struct storage_file *f)
{
    mem_node_unref(mem_of(f->st), mem_node_of(f));
    free(f);
    return 0;
}

/* True when path is dir + "/" + a name without further slashes; *name set. */
static bool mem_in_dir(const char *path, const char *dir, const char **name)
{
    size_t n = strlen(dir);
    if (strncmp(path, dir, n) != 0 || path[n] != '/' || strchr(path + n + 1, '/') != NULL)
        return false;
    *name = path + n + 1;
    return **name != '\0';
}

static int mem_list(struct storage *s, const char *dir, storage_name_fn fn, void *arg)
{
    struct mem_storage *m = mem_of(s);
    for (struct mem_node *n = m->nodes; n != NULL; n = n->next) {
        const char *name;
        if (n->path == NULL || !mem_in_dir(n->path, dir, &name))
            continue;
        int rc = fn(arg, name);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static int mem_unlink(struct storage *s, const char *path)
{
    struct mem_storage *m = mem_of(s);
    struct mem_node *node = mem_find(m, path);
    if (node == NULL)
        return -ENOENT;
    free(node->path);
    node->path = NULL;
    mem_node_unref(m, node);
    return 0;
}

static int mem_rename(struct storage *s, const char *from, const char *to)
{
    struct mem_storage *m = mem_of(s);
    struct mem_node *node = mem_find(m, from);
    if (node == NULL)
        return -ENOENT;
    char *copy = strdup(to);
    if (copy == NULL)
        return -ENOMEM;
    struct mem_node *old = mem_find(m, to);
    if (old != NULL && old != node) {
        free(old->path);
        old->path = NULL;
        mem_node_unref(m, old);
    }
    free(node->path);
    node->path = copy;
    return 0;
}

static int mem_sync_dir(struct storage *s, const char *dir)
{
    return 0; /* names are durable at once in this model */
}

static int mem_mkdirs(struct storage *s, const char *dir)
{
    return 0; /* directories exist implicitly in this model */
}

static void mem_destroy(struct storage *s)
{
    struct mem_storage *m = mem_of(s);
    for (size_t i = 0; i < m->nops; i++)
        free(m->ops[i].bytes);
    free(m->ops);
    while (m->nodes != NULL) {
        struct mem_node *n = m->nodes;
        m->nodes = n->next;
        free(n->path);
        free(n->cur);
        free(n->dur);
        free(n);
    }
    free(m);
}

static const struct storage_ops mem_ops = {
    .open = mem_open,
    .pwrite = mem_pwrite,
    .pread = mem_pread,
    .datasync = mem_datasync,
    .truncate = mem_truncate,
    .preallocate = mem_preallocate,
    .size = mem_size,
    .close = mem_close,
    .list = mem_list,
    .unlink = mem_unlink,
    .rename = mem_rename,
    .sync_dir = mem_sync_dir,
    .mkdirs = mem_mkdirs,
    .destroy = mem_destroy,
};

struct storage *storage_mem_new(void)
{
    struct mem_storage *m = calloc(1, sizeof *m);
    if (m == NULL)
        return NULL;
    m->base.ops = &mem_ops;
    m->space_max = UINT64_MAX;
    return &m->base;
}

void storage_mem_set_space(struct storage *s, uint64_t bytes_max)
{
    mem_of(s)->space_max = bytes_max;
}

void storage_mem_fail_sync(struct storage *s, int err, unsigned count)
{
    mem_of(s)->sync_err = err;
    mem_of(s)->sync_fail_count = count;
}

/* A test harness out of memory cannot simulate anything: stop loudly. */
static void crash_resize(uint8_t **p, size_t *len, size_t new_len)
{
    if (image_resize(p, len, new_len) != 0) {
        base_log(BASE_LOG_ERROR, "storage_mem_crash: out of memory");
        abort();
    }
}

/* Lands the first keep bytes of a pending write on the durable image; the
 * rest of the write keeps the old bytes or, with garbage, gets junk (a
 * sector written half-way). */
static void crash_land_write(struct mem_node *n, const struct mem_op *op, size_t keep, bool garbage)
{
    size_t span = garbage ? op->len : keep;
    if (op->off + span > n->dur_len)
        crash_resize(&n->dur, &n->dur_len, (size_t)(op->off + span));
    memcpy(n->dur + op->off, op->bytes, keep);
    for (size_t i = keep; garbage && i < op->len; i++)
        n->dur[op->off + i] = (uint8_t)(0xA5u ^ (i * 131u));
}

void storage_mem_crash(struct storage *s, size_t keep_bytes, bool garbage)
{
    struct mem_storage *m = mem_of(s);
    size_t budget = keep_bytes;
    for (size_t i = 0; i < m->nops; i++) {
        const struct mem_op *op = &m->ops[i];
        struct mem_node *n = op->node;
        if (op->bytes == NULL) {
            if (budget > 0)
                crash_resize(&n->dur, &n->dur_len, (size_t)op->off);
        } else if (budget > 0) {
            size_t keep = op->len < budget ? op->len : budget;
            crash_land_write(n, op, keep, garbage && keep < op->len);
            budget -= keep;
        }
        free(m->ops[i].bytes);
    }
    m->nops = 0;
    for (struct mem_node *n = m->nodes; n != NULL; n = n->next) {
        n->cur_len = 0;
        crash_resize(&n->cur, &n->cur_len, n->dur_len);
        if (n->dur_len > 0)
            memcpy(n->cur, n->dur, n->dur_len);
    }
}
