/* disk — see disk.h. */
#include "tests/sim/disk.h"

#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "tests/sim/hash.h"

static void log_free_from(struct disk_log *l, size_t from)
{
    for (size_t i = from; i < l->n; i++)
        free(l->v[i].data);
    if (from < l->n)
        l->n = from;
}

static void log_push(struct disk_log *l, struct disk_entry e)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        struct disk_entry *v = realloc(l->v, cap * sizeof(*v));
        BASE_ASSERT(v != NULL);
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = e;
}

/* How many entries of l have zxid <= zxid (l is zxid-ordered). */
static size_t log_count_through(const struct disk_log *l, int64_t zxid)
{
    size_t lo = 0, hi = l->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (l->v[mid].zxid <= zxid)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

void disk_init(struct disk *d)
{
    memset(d, 0, sizeof(*d));
    struct kv empty;
    kv_init(&empty);
    kv_save(&empty, d->snap);
}

void disk_free(struct disk *d)
{
    log_free_from(&d->log, 0);
    log_free_from(&d->pend, 0);
    free(d->log.v);
    free(d->pend.v);
    memset(d, 0, sizeof(*d));
}

void disk_save_hard(struct disk *d, const struct raft_hard_state *hs)
{
    d->hard = *hs;
}

void disk_last(const struct disk *d, int64_t *zxid, uint64_t *chain)
{
    if (d->pend.n > 0) {
        *zxid = d->pend.v[d->pend.n - 1].zxid;
        *chain = d->pend.v[d->pend.n - 1].chain;
        return;
    }
    size_t n = d->log.n;
    if (d->pend_truncate)
        n = log_count_through(&d->log, d->pend_truncate_after);
    if (n > 0) {
        *zxid = d->log.v[n - 1].zxid;
        *chain = d->log.v[n - 1].chain;
    } else {
        *zxid = d->snap_zxid;
        *chain = d->snap_chain;
    }
}

void disk_install_snapshot(struct disk *d, int64_t zxid, uint64_t chain,
                           const uint8_t *data, size_t len, const struct raft_config *conf)
{
    BASE_ASSERT(len == KV_SNAP_BYTES && conf != NULL);
    memcpy(d->snap, data, len);
    d->snap_config = *conf;
    d->snap_has_config = true;
    d->snap_zxid = zxid;
    d->snap_chain = chain;
    log_free_from(&d->log, 0);
    log_free_from(&d->pend, 0);
    d->pend_truncate = false;
}

/* Drops the first drop entries of the durable log. */
static void log_drop_front(struct disk_log *l, size_t drop)
{
    for (size_t i = 0; i < drop; i++)
        free(l->v[i].data);
    memmove(l->v, l->v + drop, (l->n - drop) * sizeof(l->v[0]));
    l->n -= drop;
}

bool disk_install_snapshot_keep(struct disk *d, int64_t zxid, uint64_t chain,
                                const uint8_t *data, size_t len, const struct raft_config *conf)
{
    BASE_ASSERT(len == KV_SNAP_BYTES && conf != NULL);
    BASE_ASSERT(d->pend.n == 0 && !d->pend_truncate);
    if (zxid < d->snap_zxid)
        return false; /* the log it dropped through its own snapshot is gone */
    log_drop_front(&d->log, log_count_through(&d->log, zxid));
    memcpy(d->snap, data, len);
    d->snap_config = *conf;
    d->snap_has_config = true;
    d->snap_zxid = zxid;
    d->snap_chain = chain;
    return true;
}

void disk_truncate(struct disk *d, int64_t after)
{
    /* The core emits truncation before this ready's entries, and every
     * earlier pending write was synced or lost in a crash. */
    BASE_ASSERT(d->pend.n == 0);
    if (!d->pend_truncate || after < d->pend_truncate_after)
        d->pend_truncate_after = after;
    d->pend_truncate = true;
}

bool disk_append(struct disk *d, const struct raft_entry *e)
{
    int64_t last;
    uint64_t chain;
    disk_last(d, &last, &chain);
    if (e->zxid <= last || (e->len > 0 && e->data == NULL))
        return false;
    struct disk_entry de = {
        .zxid = e->zxid,
        .type = e->type,
        .len = e->len,
        .chain = hash_chain(chain, e->zxid, hash_entry(e->type, e->data, e->len)),
    };
    de.data = malloc(e->len ? e->len : 1);
    BASE_ASSERT(de.data != NULL);
    if (e->len)
        memcpy(de.data, e->data, e->len);
    log_push(&d->pend, de);
    return true;
}

/* Applies the pending truncation and the first keep pending entries to
 * the durable log; the rest of the pending write is lost. */
static void land_pending(struct disk *d, size_t keep)
{
    BASE_ASSERT(keep <= d->pend.n);
    if (d->pend_truncate)
        log_free_from(&d->log, log_count_through(&d->log, d->pend_truncate_after));
    d->pend_truncate = false;
    for (size_t i = 0; i < keep; i++)
        log_push(&d->log, d->pend.v[i]);
    /* The first keep entries moved (their data with them). */
    for (size_t i = keep; i < d->pend.n; i++)
        free(d->pend.v[i].data);
    d->pend.n = 0;
}

void disk_sync(struct disk *d)
{
    land_pending(d, d->pend.n);
}

void disk_crash(struct disk *d, long keep)
{
    if (keep < 0) {
        log_free_from(&d->pend, 0);
        d->pend_truncate = false;
        return;
    }
    land_pending(d, (size_t)keep < d->pend.n ? (size_t)keep : d->pend.n);
}

const struct disk_entry *disk_find(const struct disk *d, int64_t zxid)
{
    size_t n = log_count_through(&d->log, zxid);
    if (n == 0 || d->log.v[n - 1].zxid != zxid)
        return NULL;
    return &d->log.v[n - 1];
}

bool disk_compact(struct disk *d, int64_t zxid, const uint8_t *data, size_t len,
                  const struct raft_config *conf)
{
    BASE_ASSERT(len == KV_SNAP_BYTES && conf != NULL);
    uint64_t chain = d->snap_chain;
    if (zxid != d->snap_zxid) {
        const struct disk_entry *e = disk_find(d, zxid);
        if (e == NULL)
            return false;
        chain = e->chain;
    }
    log_drop_front(&d->log, log_count_through(&d->log, zxid));
    memcpy(d->snap, data, len);
    d->snap_zxid = zxid;
    d->snap_chain = chain;
    d->snap_config = *conf;
    d->snap_has_config = true;
    return true;
}

bool disk_boot(const struct disk *d, struct raft_boot *boot, struct raft_entry **entries)
{
    BASE_ASSERT(d->pend.n == 0 && !d->pend_truncate);
    memset(boot, 0, sizeof(*boot));
    boot->hard_state = d->hard;
    boot->snap_zxid = d->snap_zxid;
    boot->snap_config = d->snap_has_config ? &d->snap_config : NULL;
    *entries = calloc(d->log.n ? d->log.n : 1, sizeof(**entries));
    if (*entries == NULL)
        return false;
    for (size_t i = 0; i < d->log.n; i++) {
        const struct disk_entry *de = &d->log.v[i];
        (*entries)[i] = (struct raft_entry){de->zxid, de->type, de->data, de->len};
    }
    boot->entries = *entries;
    boot->n_entries = d->log.n;
    return true;
}
