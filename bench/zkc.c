/*
 * zkc.c — the load source users' applications look like: the official C
 * client library (libzookeeper_mt) and its asynchronous API.
 *
 * One zhandle_t per session; each handle has its own I/O and completion
 * threads inside the library. A session runs --outstanding "slots": a slot
 * issues a request, and its completion (on the handle's completion thread)
 * records the latency and issues the slot's next request, so every session
 * keeps exactly that many requests in flight (closed loop). The latency
 * therefore includes the library's queueing and its two thread hand-offs, as
 * an application would see it.
 *
 * Locking: a session's mutex guards its random stream and create/delete
 * state, which the main thread (first requests) and the completion thread
 * share. Results go to one of a few mutex-guarded shards to keep contention
 * between handles low; the main thread merges them after every handle closed.
 */
#include "bench/bench.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <zookeeper/zookeeper.h>

#define SHARDS_MAX 16
#define CONNECT_WAIT_S 30.0

enum req_kind { KIND_READ, KIND_WRITE };

struct zkc_run;
struct zkc_session;

struct zkc_slot {
    struct zkc_session *s;
    uint64_t t0_ns;
    enum req_kind kind;
};

struct zkc_shard {
    pthread_mutex_t lock;
    struct bench_counts counts;
    struct bench_hist all, read, write;
};

struct zkc_session {
    struct zkc_run *run;
    zhandle_t *zh;
    uint32_t index;
    pthread_mutex_t lock;
    struct bench_rng rng;
    uint64_t cd_seq;
    bool cd_created;
    _Atomic int inflight;
    struct zkc_slot *slots;
    struct zkc_shard *shard;
};

struct zkc_run {
    const struct bench_cfg *cfg;
    struct bench_keys keys;
    double read_pct;
    char *value;
    _Atomic int phase;
    _Atomic uint64_t notifications;
    struct zkc_session *sessions;
    struct zkc_shard *shards;
    int nshards;
};

static void issue(struct zkc_slot *slot, bool draining);

/* Session events and fired watches both arrive here; only watch events
 * (a path, type other than SESSION) are counted. */
static void on_watch(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    struct zkc_run *run = ctx;
    if (type != ZOO_SESSION_EVENT && atomic_load(&run->phase) == BENCH_PHASE_MEASURE)
        atomic_fetch_add(&run->notifications, 1);
}

static void record(struct zkc_slot *slot, int rc)
{
    struct zkc_session *s = slot->s;
    struct zkc_shard *sh = s->shard;
    uint64_t now_ns = (uint64_t)base_mono_ns();
    if (atomic_load(&s->run->phase) != BENCH_PHASE_MEASURE)
        return;
    bool write = slot->kind != KIND_READ;
    pthread_mutex_lock(&sh->lock);
    bench_record_op(&sh->counts, &sh->all, write ? &sh->write : &sh->read, write, rc, slot->t0_ns,
                    now_ns);
    pthread_mutex_unlock(&sh->lock);
}

/* Every completion ends here: record, then keep the slot busy unless the run
 * is draining (where only a delete owed by create-delete still goes out). */
static void done(int rc, const void *data)
{
    struct zkc_slot *slot = (struct zkc_slot *)data;
    struct zkc_session *s = slot->s;
    record(slot, rc);
    if (rc != ZCLOSING)
        issue(slot, atomic_load(&s->run->phase) == BENCH_PHASE_DRAIN);
    atomic_fetch_sub(&s->inflight, 1);
}

static void done_data(int rc, const char *value, int value_len, const struct Stat *stat,
                      const void *data)
{
    done(rc, data);
}

static void done_stat(int rc, const struct Stat *stat, const void *data)
{
    done(rc, data);
}

static void done_strings(int rc, const struct String_vector *strings, const void *data)
{
    done(rc, data);
}

static void done_string(int rc, const char *value, const void *data)
{
    done(rc, data);
}

static int issue_read(struct zkc_slot *slot, const char *path)
{
    struct zkc_session *s = slot->s;
    int watch = s->run->cfg->watch;
    switch (s->run->cfg->read_op) {
    case BENCH_READ_EXISTS: return zoo_aexists(s->zh, path, watch, done_stat, slot);
    case BENCH_READ_GETCHILDREN: return zoo_aget_children(s->zh, path, watch, done_strings, slot);
    case BENCH_READ_GETDATA: break;
    }
    return zoo_aget(s->zh, path, watch, done_data, slot);
}

static int issue_write(struct zkc_slot *slot, char *path, size_t path_len)
{
    struct zkc_session *s = slot->s;
    const struct bench_cfg *cfg = s->run->cfg;
    int len = (int)cfg->value_size_bytes;
    if (cfg->write_op == BENCH_WRITE_SETDATA) {
        bench_key_path(path, path_len, bench_keys_pick(&s->run->keys, &s->rng));
        return zoo_aset(s->zh, path, s->run->value, len, -1, done_stat, slot);
    }
    snprintf(path, path_len, BENCH_ROOT "/z%d-%u-%llu", (int)getpid(), s->index,
             (unsigned long long)s->cd_seq);
    if (!s->cd_created) {
        s->cd_created = true;
        return zoo_acreate(s->zh, path, s->run->value, len, &ZOO_OPEN_ACL_UNSAFE, 0, done_string,
                           slot);
    }
    s->cd_created = false;
    s->cd_seq++;
    return zoo_adelete(s->zh, path, -1, done, slot);
}

/* Starts the slot's next request: a read or a write as the ratio says, or
 * when draining only the delete that create-delete still owes. The library
 * serialises path and value before zoo_a* returns, so stack buffers do. */
static void issue(struct zkc_slot *slot, bool draining)
{
    struct zkc_session *s = slot->s;
    char path[BENCH_PATH_MAX];
    int rc = ZOK;
    pthread_mutex_lock(&s->lock);
    if (draining && !s->cd_created) {
        pthread_mutex_unlock(&s->lock);
        return;
    }
    slot->kind = draining || !bench_pick_read(s->run->read_pct, &s->rng) ? KIND_WRITE : KIND_READ;
    slot->t0_ns = (uint64_t)base_mono_ns();
    atomic_fetch_add(&s->inflight, 1);
    if (slot->kind == KIND_READ) {
        bench_key_path(path, sizeof(path), bench_keys_pick(&s->run->keys, &s->rng));
        rc = issue_read(slot, path);
    } else {
        rc = issue_write(slot, path, sizeof(path));
    }
    pthread_mutex_unlock(&s->lock);
    if (rc != ZOK) {
        /* Not queued (e.g. the session expired): the slot stops; the code is counted. */
        atomic_fetch_sub(&s->inflight, 1);
        record(slot, rc);
    }
}

/* ---- run ---------------------------------------------------------------- */

static bool any_connected(void *arg)
{
    struct zkc_run *run = arg;
    for (int i = 0; i < run->cfg->sessions; i++)
        if (run->sessions[i].zh && zoo_state(run->sessions[i].zh) == ZOO_CONNECTED_STATE)
            return true;
    return false;
}

static bool wait_until(bool (*cond)(struct zkc_run *run), struct zkc_run *run, double seconds)
{
    uint64_t end_ns = (uint64_t)base_mono_ns() + (uint64_t)(seconds * 1e9);
    while (!cond(run)) {
        if ((uint64_t)base_mono_ns() >= end_ns)
            return false;
        usleep(2000);
    }
    return true;
}

static bool all_connected(struct zkc_run *run)
{
    for (int i = 0; i < run->cfg->sessions; i++)
        if (zoo_state(run->sessions[i].zh) != ZOO_CONNECTED_STATE)
            return false;
    return true;
}

static bool all_idle(struct zkc_run *run)
{
    for (int i = 0; i < run->cfg->sessions; i++)
        if (atomic_load(&run->sessions[i].inflight) > 0)
            return false;
    return true;
}

static int open_sessions(struct zkc_run *run, char *err, size_t err_len)
{
    const struct bench_cfg *cfg = run->cfg;
    char hosts[300];
    snprintf(hosts, sizeof(hosts), "%s:%u", cfg->host, cfg->port);
    for (int i = 0; i < cfg->sessions; i++) {
        struct zkc_session *s = &run->sessions[i];
        s->zh = zookeeper_init(hosts, on_watch, cfg->timeout_ms, NULL, run, 0);
        if (!s->zh) {
            snprintf(err, err_len, "zookeeper_init(%s) failed", hosts);
            return -1;
        }
    }
    if (!wait_until(all_connected, run, CONNECT_WAIT_S)) {
        snprintf(err, err_len, "sessions did not connect to %s within %.0f s", hosts,
                 CONNECT_WAIT_S);
        return -1;
    }
    return 0;
}

static int alloc_run(struct zkc_run *run)
{
    const struct bench_cfg *cfg = run->cfg;
    run->nshards = cfg->sessions < SHARDS_MAX ? cfg->sessions : SHARDS_MAX;
    run->value = malloc(cfg->value_size_bytes + 1);
    run->sessions = calloc((size_t)cfg->sessions, sizeof(*run->sessions));
    run->shards = calloc((size_t)run->nshards, sizeof(*run->shards));
    if (!run->value || !run->sessions || !run->shards)
        return -1;
    memset(run->value, 'v', cfg->value_size_bytes);
    for (int i = 0; i < run->nshards; i++) {
        pthread_mutex_init(&run->shards[i].lock, NULL);
        bench_hist_reset(&run->shards[i].all);
        bench_hist_reset(&run->shards[i].read);
        bench_hist_reset(&run->shards[i].write);
    }
    for (int i = 0; i < cfg->sessions; i++) /* all of them, so free_run may destroy all */
        pthread_mutex_init(&run->sessions[i].lock, NULL);
    for (int i = 0; i < cfg->sessions; i++) {
        struct zkc_session *s = &run->sessions[i];
        s->run = run;
        s->index = (uint32_t)i;
        s->shard = &run->shards[i % run->nshards];
        bench_rng_seed(&s->rng, cfg->seed * 1000003u + (uint64_t)i);
        s->slots = calloc((size_t)cfg->outstanding, sizeof(*s->slots));
        if (!s->slots)
            return -1;
        for (int k = 0; k < cfg->outstanding; k++)
            s->slots[k].s = s;
    }
    return 0;
}

/* Closes every handle (zookeeper_close sends closeSession and joins the
 * library's threads, so no completion runs afterwards), then frees. */
static void free_run(struct zkc_run *run, struct bench_result *r)
{
    for (int i = 0; run->sessions && i < run->cfg->sessions; i++) {
        struct zkc_session *s = &run->sessions[i];
        if (s->zh)
            zookeeper_close(s->zh);
        pthread_mutex_destroy(&s->lock);
        free(s->slots);
    }
    for (int i = 0; run->shards && i < run->nshards; i++) {
        struct zkc_shard *sh = &run->shards[i];
        if (r) {
            bench_counts_add(&r->counts, &sh->counts);
            bench_hist_merge(&r->all, &sh->all);
            bench_hist_merge(&r->read, &sh->read);
            bench_hist_merge(&r->write, &sh->write);
        }
        pthread_mutex_destroy(&sh->lock);
    }
    if (r)
        r->counts.notifications = atomic_load(&run->notifications);
    free(run->sessions);
    free(run->shards);
    free(run->value);
}

int bench_zkc_run(const struct bench_cfg *cfg, double read_pct, struct bench_result *r,
                  char *err, size_t err_len)
{
    struct zkc_run *run = calloc(1, sizeof(*run));
    if (!run) {
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    run->cfg = cfg;
    run->read_pct = read_pct;
    atomic_store(&run->phase, BENCH_PHASE_WARMUP);
    bench_keys_init(&run->keys, cfg);
    bench_result_reset(r, read_pct);
    zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
    int rc = -1;
    if (alloc_run(run) != 0) {
        snprintf(err, err_len, "out of memory");
    } else if (open_sessions(run, err, err_len) == 0) {
        for (int i = 0; i < cfg->sessions; i++) {
            struct zkc_session *s = &run->sessions[i];
            for (int k = 0; k < cfg->outstanding; k++)
                issue(&s->slots[k], false);
        }
        rc = bench_timeline(cfg, &run->phase, r, any_connected, run);
        if (rc != 0)
            snprintf(err, err_len, "every session lost its connection");
        if (!wait_until(all_idle, run, BENCH_DRAIN_S))
            fprintf(stderr, "larch-bench: warning: requests still in flight after %.0f s\n",
                    BENCH_DRAIN_S);
    }
    atomic_store(&run->phase, BENCH_PHASE_DRAIN);
    free_run(run, r);
    free(run);
    return rc;
}
