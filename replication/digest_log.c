/*
 * digest_log.c — the digest log that the "hash" four-letter word prints
 * (replication.h): ZooKeeper's DataTree.digestLog, a ring of the last
 * SEQ_DIGEST_LOG_MAX (zxid, digest) pairs taken every
 * SEQ_DIGEST_LOG_INTERVAL zxids.
 *
 * The sequencer writes it and a worker answering "hash" copies it, so it
 * has a lock; the sequencer takes it once per SEQ_DIGEST_LOG_INTERVAL txns
 * and a copy holds it for at most 16 KiB of memcpy.
 */
#include "replication/seq_int.h"

#include <string.h>

int sq_digest_log_init(struct sq_digest_log *l)
{
    l->head = l->n = 0;
    return pthread_mutex_init(&l->lock, NULL);
}

void sq_digest_log_destroy(struct sq_digest_log *l)
{
    pthread_mutex_destroy(&l->lock);
}

void sq_digest_log_note(struct sq_digest_log *l, int64_t zxid, uint64_t digest)
{
    if (zxid % SEQ_DIGEST_LOG_INTERVAL != 0)
        return;
    pthread_mutex_lock(&l->lock);
    uint32_t newest = (l->head + SEQ_DIGEST_LOG_MAX - 1) % SEQ_DIGEST_LOG_MAX;
    BASE_ASSERT(l->n == 0 || l->ring[newest].zxid < zxid);
    l->ring[l->head] = (struct seq_digest){ .zxid = zxid, .digest = digest };
    l->head = (l->head + 1) % SEQ_DIGEST_LOG_MAX;
    if (l->n < SEQ_DIGEST_LOG_MAX)
        l->n++;
    pthread_mutex_unlock(&l->lock);
}

void sq_digest_log_forget(struct sq_digest_log *l)
{
    pthread_mutex_lock(&l->lock);
    l->head = l->n = 0;
    pthread_mutex_unlock(&l->lock);
}

size_t sq_digest_log_copy(struct sq_digest_log *l, struct seq_digest *out, size_t max)
{
    pthread_mutex_lock(&l->lock);
    size_t n = l->n < max ? l->n : max;
    /* the newest n: they start n slots behind head, and may wrap */
    uint32_t first = (l->head + SEQ_DIGEST_LOG_MAX - (uint32_t)n) % SEQ_DIGEST_LOG_MAX;
    size_t part = SEQ_DIGEST_LOG_MAX - first < n ? SEQ_DIGEST_LOG_MAX - first : n;
    memcpy(out, &l->ring[first], part * sizeof *out);
    memcpy(out + part, &l->ring[0], (n - part) * sizeof *out);
    pthread_mutex_unlock(&l->lock);
    return n;
}
