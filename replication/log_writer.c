/*
 * log_writer.c — an ensemble member's txn log on its own thread (seq_int.h,
 * "the log writer").
 *
 * Why: a member that fdatasyncs on the sequencer thread does nothing else
 * for the whole sync: acks wait, commits wait, forwards wait, and each
 * round's requests wait for the previous round's disk. Here the sequencer
 * hands each Ready's truncation and entries over as a batch and goes on;
 * this thread writes every batch queued since its last sync and covers
 * them with one fdatasync (group commit), then tells the sequencer how many
 * batches are durable. The Raft core counts nothing durable before that
 * (raft.h, cfg.async_log).
 *
 * Batches are carried out in the order they were submitted. The txn log is
 * this thread's while it runs; the sequencer touches it only after
 * logw_wait_idle (a snapshot install), when nothing is queued or in hand.
 */
#include "replication/seq_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "replication/txnlog.h"

struct logw_batch {
    struct logw_batch *next;
    bool truncate;
    int64_t truncate_after;
    struct raft_entry *entries; /* data points into bytes */
    size_t n_entries;
    uint8_t *bytes;
};

struct logw {
    struct txnlog *log;
    void (*on_done)(void *arg);
    void *arg;
    _Atomic uint64_t *syncs; /* the sequencer's log_syncs counter */

    pthread_mutex_t lock;
    pthread_cond_t work; /* a batch queued, or stop */
    pthread_cond_t idle; /* a sync finished */
    struct logw_batch *head, *tail; /* queued, oldest first (under lock) */
    uint64_t submitted;             /* under lock */
    bool stop;                      /* under lock */
    pthread_t thread;

    _Atomic uint64_t done;     /* batches durable, written by the thread */
    _Atomic uint64_t reported; /* of them, handed to the sequencer (logw_take_done) */
};

static void batch_free(struct logw_batch *b)
{
    if (!b)
        return;
    free(b->entries);
    free(b->bytes);
    free(b);
}

/* A copy of the Ready's log work: the core's memory lasts only until
 * raft_advance. NULL without memory. */
static struct logw_batch *batch_copy(bool truncate, int64_t after,
                                     const struct raft_entry *entries, size_t n)
{
    struct logw_batch *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    b->truncate = truncate;
    b->truncate_after = after;
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += entries[i].len;
    b->entries = n ? malloc(n * sizeof *b->entries) : NULL;
    b->bytes = total ? malloc(total) : NULL;
    if ((n && !b->entries) || (total && !b->bytes)) {
        batch_free(b);
        return NULL;
    }
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        b->entries[i] = entries[i];
        if (entries[i].len) {
            memcpy(b->bytes + off, entries[i].data, entries[i].len);
            b->entries[i].data = b->bytes + off;
            off += entries[i].len;
        }
    }
    b->n_entries = n;
    return b;
}

static void batch_write(struct txnlog *log, const struct logw_batch *b)
{
    if (b->truncate) {
        int rc = txnlog_truncate_after(log, b->truncate_after);
        if (rc != 0)
            sq_ens_fatal("truncating the txn log failed", rc);
    }
    for (size_t i = 0; i < b->n_entries; i++) {
        int rc = txnlog_append_entry(log, &b->entries[i]);
        if (rc != 0)
            sq_ens_fatal("appending to the txn log failed", rc);
    }
}

/* Takes everything queued; NULL (and *stop) when there is nothing and
 * the writer is told to stop. */
static struct logw_batch *take_queued(struct logw *w, size_t *n, bool *stop)
{
    pthread_mutex_lock(&w->lock);
    while (!w->head && !w->stop)
        pthread_cond_wait(&w->work, &w->lock);
    struct logw_batch *list = w->head;
    w->head = w->tail = NULL;
    *stop = w->stop && !list;
    pthread_mutex_unlock(&w->lock);
    *n = 0;
    for (struct logw_batch *b = list; b; b = b->next)
        (*n)++;
    return list;
}

static void *logw_thread(void *arg)
{
    struct logw *w = arg;
    pthread_setname_np(pthread_self(), "larch-log");
    for (;;) {
        size_t n;
        bool stop;
        struct logw_batch *list = take_queued(w, &n, &stop);
        if (stop)
            break;
        for (struct logw_batch *b = list; b; b = b->next)
            batch_write(w->log, b);
        int rc = txnlog_sync(w->log); /* one fdatasync for the whole group */
        if (rc != 0)
            sq_ens_fatal("syncing the txn log failed", rc);
        atomic_fetch_add_explicit(w->syncs, 1, memory_order_relaxed);
        while (list) {
            struct logw_batch *next = list->next;
            batch_free(list);
            list = next;
        }
        pthread_mutex_lock(&w->lock);
        atomic_fetch_add(&w->done, n); /* seq_cst: pairs with the sequencer's sleep check */
        pthread_cond_broadcast(&w->idle);
        pthread_mutex_unlock(&w->lock);
        w->on_done(w->arg);
    }
    return NULL;
}

int logw_start(struct logw **out, struct txnlog *log, _Atomic uint64_t *syncs,
               void (*on_done)(void *arg), void *arg)
{
    struct logw *w = calloc(1, sizeof *w);
    if (!w)
        return -ENOMEM;
    w->log = log;
    w->syncs = syncs;
    w->on_done = on_done;
    w->arg = arg;
    int rc = pthread_mutex_init(&w->lock, NULL);
    if (rc == 0 && (rc = pthread_cond_init(&w->work, NULL)) != 0)
        pthread_mutex_destroy(&w->lock);
    if (rc == 0 && (rc = pthread_cond_init(&w->idle, NULL)) != 0) {
        pthread_cond_destroy(&w->work);
        pthread_mutex_destroy(&w->lock);
    }
    if (rc == 0 && (rc = pthread_create(&w->thread, NULL, logw_thread, w)) != 0) {
        pthread_cond_destroy(&w->idle);
        pthread_cond_destroy(&w->work);
        pthread_mutex_destroy(&w->lock);
    }
    if (rc != 0) {
        free(w);
        return -rc;
    }
    *out = w;
    return 0;
}

int logw_submit(struct logw *w, bool truncate, int64_t after, const struct raft_entry *entries,
                size_t n)
{
    struct logw_batch *b = batch_copy(truncate, after, entries, n);
    if (!b)
        return -ENOMEM;
    pthread_mutex_lock(&w->lock);
    if (w->tail)
        w->tail->next = b;
    else
        w->head = b;
    w->tail = b;
    w->submitted++;
    pthread_cond_signal(&w->work);
    pthread_mutex_unlock(&w->lock);
    return 0;
}

uint64_t logw_take_done(struct logw *w)
{
    uint64_t done = atomic_load(&w->done);
    uint64_t was = atomic_exchange(&w->reported, done);
    return done - was;
}

bool logw_has_done(const struct logw *w)
{
    return atomic_load(&w->done) != atomic_load(&w->reported);
}

void logw_wait_idle(struct logw *w)
{
    pthread_mutex_lock(&w->lock);
    while (atomic_load(&w->done) != w->submitted)
        pthread_cond_wait(&w->idle, &w->lock);
    pthread_mutex_unlock(&w->lock);
}

void logw_stop(struct logw *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->lock);
    w->stop = true;
    pthread_cond_signal(&w->work);
    pthread_mutex_unlock(&w->lock);
    pthread_join(w->thread, NULL); /* it writes and syncs what is queued first */
    pthread_cond_destroy(&w->idle);
    pthread_cond_destroy(&w->work);
    pthread_mutex_destroy(&w->lock);
    free(w);
}
