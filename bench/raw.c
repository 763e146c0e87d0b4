/*
 * raw.c — the built-in driver: --threads epoll loops, each owning a share of
 * the sessions on non-blocking sockets and speaking jute directly.
 *
 * A session keeps up to --outstanding requests in flight. ZooKeeper answers a
 * session's requests in the order it sent them (the per-session FIFO that
 * clients rely on), so in-flight requests sit in a ring and every reply must
 * match the ring's head; anything else is a protocol error and ends that
 * session. Closed loop refills the ring as replies arrive. Open loop gives
 * each session a fixed schedule of intended send times (rate / sessions each,
 * staggered) and measures from the intended time, so a server stall shows up
 * as latency of everything scheduled behind it (Tene's coordinated-omission
 * correction, as in wrk2) instead of as fewer samples.
 *
 * Each worker counts into its own counters and histograms; the main thread
 * reads them only after joining the worker.
 */
#include "bench/bench.h"
#include "proto/proto.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#define EVENTS_MAX 256
#define POLL_MS 20                 /* how soon a phase flip is noticed */
#define CONNECT_WAIT_S 30.0        /* bound on all handshakes completing */
#define CLOSE_WAIT_S 3.0           /* bound on closeSession replies */
#define FRAME_BYTES_MAX (64u << 20)
#define READ_CHUNK 65536

enum sess_state { SESS_HANDSHAKE, SESS_READY, SESS_CLOSING, SESS_DONE };
enum req_kind { KIND_READ, KIND_WRITE };

struct slot {
    int32_t xid;
    uint8_t kind;
    uint64_t t0_ns; /* send time (closed loop) or intended send time (open loop) */
};

struct worker;

struct session {
    struct worker *w;
    uint32_t index; /* global, for key streams and node names */
    int fd;
    enum sess_state state;
    int32_t timeout_ms; /* negotiated */
    struct zk_wbuf out;
    size_t out_off;
    bool want_out;      /* EPOLLOUT registered */
    uint8_t *in;
    size_t in_len, in_cap;
    struct slot *ring;  /* cfg->outstanding entries */
    uint32_t head, count;
    int32_t next_xid;
    int32_t close_xid;
    struct bench_rng rng;
    uint64_t last_send_ns;
    uint64_t next_intended_ns;
    uint64_t cd_seq;    /* create-delete: sequence of this session's nodes */
    bool cd_created;    /* the last write issued was a create; a delete is owed */
};

struct worker {
    const struct bench_cfg *cfg;
    const struct bench_keys *keys;
    _Atomic int *phase;
    _Atomic int ready;   /* sessions past the handshake */
    _Atomic int alive;   /* sessions not lost */
    _Atomic bool opened; /* every session of this worker had its connect attempt */
    double read_pct;
    const char *value;
    uint64_t interval_ns; /* open loop, per session */
    struct session *sessions;
    int nsessions;
    int ep, tfd;
    int cur_phase;
    pthread_t thread;
    bool started;
    char err[256];       /* first protocol error, for the report */
    struct bench_counts counts;
    struct bench_hist all, read, write;
};

static void note_error(struct worker *w, const char *what, const struct session *s)
{
    if (w->err[0] == '\0')
        snprintf(w->err, sizeof(w->err), "session %u: %s", s->index, what);
}

static void set_epollout(struct session *s, bool on)
{
    if (s->want_out == on)
        return;
    struct epoll_event ev = { .events = EPOLLIN | (on ? EPOLLOUT : 0u), .data.ptr = s };
    if (epoll_ctl(s->w->ep, EPOLL_CTL_MOD, s->fd, &ev) == 0)
        s->want_out = on;
}

/* Ends a session that failed: in-flight requests of the measured interval
 * count as CONNECTIONLOSS, as a ZooKeeper client would report them. */
static void lose(struct session *s, const char *why)
{
    struct worker *w = s->w;
    if (s->state == SESS_DONE)
        return;
    if (s->state != SESS_CLOSING) {
        note_error(w, why, s);
        w->counts.sessions_lost++;
        if (w->cur_phase == BENCH_PHASE_MEASURE)
            for (uint32_t i = 0; i < s->count; i++)
                bench_counts_error(&w->counts, ZK_ECONNECTIONLOSS);
        atomic_fetch_sub(&w->alive, 1);
    }
    s->count = 0;
    s->cd_created = false;
    close(s->fd); /* also leaves the epoll set */
    s->fd = -1;
    s->state = SESS_DONE;
}

static void lose_errno(struct session *s, const char *call)
{
    char what[96];
    snprintf(what, sizeof(what), "%s: %s", call, strerror(errno));
    lose(s, what);
}

static void flush(struct session *s)
{
    while (s->state != SESS_DONE && s->out_off < s->out.len) {
        ssize_t n = send(s->fd, s->out.p + s->out_off, s->out.len - s->out_off,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            s->out_off += (size_t)n;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            set_epollout(s, true);
            return;
        } else {
            lose_errno(s, "send");
            return;
        }
    }
    if (s->state == SESS_DONE)
        return;
    zk_wbuf_reset(&s->out);
    s->out_off = 0;
    set_epollout(s, false);
}

/* ---- issuing requests ------------------------------------------------- */

static void cd_path(char *buf, size_t len, const struct session *s)
{
    snprintf(buf, len, BENCH_ROOT "/c%d-%u-%llu", (int)getpid(), s->index,
             (unsigned long long)s->cd_seq);
}

/* Appends one write: setData on a chosen key, or this session's next
 * create/delete step. */
static void put_write(struct session *s, int32_t xid)
{
    const struct bench_cfg *cfg = s->w->cfg;
    char path[BENCH_PATH_MAX];
    if (cfg->write_op == BENCH_WRITE_SETDATA) {
        bench_key_path(path, sizeof(path), bench_keys_pick(s->w->keys, &s->rng));
        bench_put_setdata(&s->out, xid, path, s->w->value, cfg->value_size_bytes);
        return;
    }
    cd_path(path, sizeof(path), s);
    if (!s->cd_created) {
        bench_put_create(&s->out, xid, path, s->w->value, cfg->value_size_bytes);
        s->cd_created = true;
    } else {
        bench_put_delete(&s->out, xid, path);
        s->cd_created = false;
        s->cd_seq++;
    }
}

static void issue(struct session *s, enum req_kind kind, uint64_t t0_ns, uint64_t now_ns)
{
    const struct bench_cfg *cfg = s->w->cfg;
    int32_t xid = s->next_xid++;
    if (s->next_xid <= 0)
        s->next_xid = 1; /* negative xids are ZooKeeper's special ones */
    if (kind == KIND_READ) {
        char path[BENCH_PATH_MAX];
        bench_key_path(path, sizeof(path), bench_keys_pick(s->w->keys, &s->rng));
        bench_put_read(&s->out, xid, cfg->read_op, path, cfg->watch);
    } else {
        put_write(s, xid);
    }
    uint32_t cap = (uint32_t)cfg->outstanding;
    s->ring[(s->head + s->count) % cap] = (struct slot){ xid, (uint8_t)kind, t0_ns };
    s->count++;
    s->last_send_ns = now_ns;
}

static enum req_kind pick_kind(struct session *s)
{
    return bench_pick_read(s->w->read_pct, &s->rng) ? KIND_READ : KIND_WRITE;
}

/* Tops the session up according to the loop model and the phase. */
static void fill(struct session *s, uint64_t now_ns)
{
    struct worker *w = s->w;
    uint32_t cap = (uint32_t)w->cfg->outstanding;
    if (s->state != SESS_READY)
        return;
    if (w->cur_phase == BENCH_PHASE_DRAIN) {
        /* Leave no node behind: a created node gets its delete. */
        if (s->cd_created && s->count < cap)
            issue(s, KIND_WRITE, now_ns, now_ns);
        return;
    }
    if (w->interval_ns == 0) {
        while (s->count < cap)
            issue(s, pick_kind(s), now_ns, now_ns);
        return;
    }
    while (s->next_intended_ns <= now_ns && s->count < cap) {
        issue(s, pick_kind(s), s->next_intended_ns, now_ns);
        s->next_intended_ns += w->interval_ns;
    }
}

/* An idle session pings at a third of its timeout, as ZooKeeper's clients do. */
static void maybe_ping(struct session *s, uint64_t now_ns)
{
    if (s->state != SESS_READY || s->count > 0 || s->timeout_ms <= 0)
        return;
    if (now_ns - s->last_send_ns < (uint64_t)s->timeout_ms * 1000000u / 3)
        return;
    bench_put_ping(&s->out);
    s->last_send_ns = now_ns;
}

/* ---- replies ---------------------------------------------------------- */

static void complete(struct session *s, int32_t code, uint64_t now_ns)
{
    struct worker *w = s->w;
    uint32_t cap = (uint32_t)w->cfg->outstanding;
    struct slot sl = s->ring[s->head];
    s->head = (s->head + 1) % cap;
    s->count--;
    if (w->cur_phase != BENCH_PHASE_MEASURE)
        return;
    bool write = sl.kind != KIND_READ;
    bench_record_op(&w->counts, &w->all, write ? &w->write : &w->read, write, code, sl.t0_ns,
                    now_ns);
}

static void on_handshake(struct session *s, struct base_rd *r, uint64_t now_ns)
{
    struct zk_connect_resp resp;
    if (!zk_get_connect_resp(r, &resp)) {
        lose(s, "malformed ConnectResponse");
        return;
    }
    if (resp.timeout_ms <= 0) {
        lose(s, "server refused the session");
        return;
    }
    struct worker *w = s->w;
    s->timeout_ms = resp.timeout_ms;
    s->state = SESS_READY;
    s->last_send_ns = now_ns;
    if (w->interval_ns) {
        /* Stagger the schedules so the sessions do not send in lockstep. */
        uint64_t offset_ns = w->interval_ns * s->index / (uint64_t)w->cfg->sessions;
        s->next_intended_ns = now_ns + offset_ns;
    }
    atomic_fetch_add(&w->ready, 1);
}

static void on_frame(struct session *s, const uint8_t *p, size_t len, uint64_t now_ns)
{
    struct base_rd r;
    base_rd_init(&r, p, len);
    if (s->state == SESS_HANDSHAKE) {
        on_handshake(s, &r, now_ns);
        return;
    }
    struct zk_reply_header h;
    if (!zk_get_reply_header(&r, &h)) {
        lose(s, "malformed reply header");
        return;
    }
    if (h.xid == ZK_XID_NOTIFICATION) {
        if (s->w->cur_phase == BENCH_PHASE_MEASURE)
            s->w->counts.notifications++;
        return;
    }
    if (h.xid == ZK_XID_PING)
        return;
    if (s->state == SESS_CLOSING && h.xid == s->close_xid) {
        close(s->fd);
        s->fd = -1;
        s->state = SESS_DONE;
        return;
    }
    if (s->count == 0 || s->ring[s->head].xid != h.xid) {
        char what[96];
        snprintf(what, sizeof(what), "reply xid %d out of order (expected %d)", h.xid,
                 s->count ? s->ring[s->head].xid : 0);
        lose(s, what);
        return;
    }
    complete(s, h.err, now_ns);
}

/* Parses every whole frame in the input buffer and keeps the partial tail. */
static void parse_input(struct session *s, uint64_t now_ns)
{
    size_t off = 0;
    while (s->state != SESS_DONE && s->in_len - off >= 4) {
        const uint8_t *p = s->in + off;
        uint32_t n = base_get_be32(p);
        if (n > FRAME_BYTES_MAX) {
            lose(s, "oversized frame");
            return;
        }
        if (s->in_len - off - 4 < n)
            break;
        on_frame(s, p + 4, n, now_ns);
        off += 4 + (size_t)n;
    }
    if (s->state == SESS_DONE)
        return;
    memmove(s->in, s->in + off, s->in_len - off);
    s->in_len -= off;
}

static bool grow_input(struct session *s)
{
    /* a quarter chunk free at least; the first buffer is a whole chunk */
    size_t need = s->in_len + READ_CHUNK / 4;
    return base_grow(&s->in, &s->in_cap, need > READ_CHUNK ? need : READ_CHUNK, 1) == 0;
}

static void on_readable(struct session *s)
{
    for (int round = 0; round < 16 && s->state != SESS_DONE; round++) {
        if (!grow_input(s)) {
            lose(s, "out of memory");
            return;
        }
        size_t room = s->in_cap - s->in_len;
        ssize_t n = recv(s->fd, s->in + s->in_len, room, MSG_DONTWAIT);
        if (n == 0) {
            if (s->state == SESS_CLOSING) {
                close(s->fd);
                s->fd = -1;
                s->state = SESS_DONE;
            } else {
                lose(s, "server closed the connection");
            }
            return;
        }
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                lose_errno(s, "recv");
            return;
        }
        s->in_len += (size_t)n;
        parse_input(s, (uint64_t)base_mono_ns());
        if ((size_t)n < room)
            return; /* drained the socket */
    }
}

/* ---- the loop --------------------------------------------------------- */

static int open_session(struct worker *w, struct session *s)
{
    char err[256];
    s->fd = bench_open_socket(w->cfg, err, sizeof(err));
    if (s->fd < 0) {
        snprintf(w->err, sizeof(w->err), "%s", err);
        return -1;
    }
    int flags = fcntl(s->fd, F_GETFL);
    struct epoll_event ev = { .events = EPOLLIN, .data.ptr = s };
    if (flags < 0 || fcntl(s->fd, F_SETFL, flags | O_NONBLOCK) != 0 ||
        epoll_ctl(w->ep, EPOLL_CTL_ADD, s->fd, &ev) != 0) {
        snprintf(w->err, sizeof(w->err), "socket setup: %s", strerror(errno));
        close(s->fd);
        s->fd = -1;
        return -1;
    }
    s->state = SESS_HANDSHAKE;
    atomic_fetch_add(&w->alive, 1);
    bench_put_connect(&s->out, w->cfg->timeout_ms);
    flush(s);
    return 0;
}

/* Arms the timer for the earliest intended send of any session that can send. */
static void arm_open_loop_timer(struct worker *w)
{
    uint64_t next_ns = UINT64_MAX;
    for (int i = 0; i < w->nsessions; i++) {
        struct session *s = &w->sessions[i];
        if (s->state == SESS_READY && s->count < (uint32_t)w->cfg->outstanding &&
            s->next_intended_ns < next_ns)
            next_ns = s->next_intended_ns;
    }
    struct itimerspec its = { 0 };
    if (next_ns != UINT64_MAX) {
        if (next_ns == 0)
            next_ns = 1; /* 0 would disarm */
        its.it_value.tv_sec = (time_t)(next_ns / 1000000000u);
        its.it_value.tv_nsec = (long)(next_ns % 1000000000u);
    }
    timerfd_settime(w->tfd, TFD_TIMER_ABSTIME, &its, NULL);
}

static bool drained(const struct worker *w)
{
    for (int i = 0; i < w->nsessions; i++) {
        const struct session *s = &w->sessions[i];
        if (s->state == SESS_DONE)
            continue;
        if (s->count > 0 || s->cd_created || s->out_off < s->out.len ||
            s->state == SESS_HANDSHAKE)
            return false;
    }
    return true;
}

static void poll_once(struct worker *w)
{
    struct epoll_event evs[EVENTS_MAX];
    int n = epoll_wait(w->ep, evs, EVENTS_MAX, POLL_MS);
    for (int i = 0; i < n; i++) {
        if (evs[i].data.ptr == NULL) { /* the timerfd */
            uint64_t ticks;
            if (read(w->tfd, &ticks, sizeof(ticks)) < 0 && errno != EAGAIN)
                note_error(w, "timerfd read failed", &w->sessions[0]);
            continue;
        }
        struct session *s = evs[i].data.ptr;
        if (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP))
            on_readable(s);
        if (s->state != SESS_DONE && (evs[i].events & EPOLLOUT))
            flush(s);
    }
}

static void run_loop(struct worker *w)
{
    uint64_t drain_end_ns = 0;
    for (;;) {
        w->cur_phase = atomic_load_explicit(w->phase, memory_order_acquire);
        uint64_t now_ns = (uint64_t)base_mono_ns();
        if (w->cur_phase == BENCH_PHASE_DRAIN) {
            if (drain_end_ns == 0)
                drain_end_ns = now_ns + (uint64_t)(BENCH_DRAIN_S * 1e9);
            if (drained(w) || now_ns >= drain_end_ns)
                return;
        }
        for (int i = 0; i < w->nsessions; i++) {
            struct session *s = &w->sessions[i];
            fill(s, now_ns);
            maybe_ping(s, now_ns);
            if (s->out.len > s->out_off && !s->want_out)
                flush(s);
        }
        if (w->interval_ns)
            arm_open_loop_timer(w);
        poll_once(w);
    }
}

/* closeSession on every live session, then wait (bounded) for the replies so
 * the server forgets the sessions now instead of at their timeout. */
static void close_sessions(struct worker *w)
{
    for (int i = 0; i < w->nsessions; i++) {
        struct session *s = &w->sessions[i];
        if (s->state == SESS_DONE)
            continue;
        if (s->state != SESS_READY) {
            lose(s, "still connecting at the end of the run");
            continue;
        }
        s->close_xid = s->next_xid++;
        s->state = SESS_CLOSING;
        atomic_fetch_sub(&w->alive, 1);
        bench_put_close(&s->out, s->close_xid);
        flush(s);
    }
    uint64_t end_ns = (uint64_t)base_mono_ns() + (uint64_t)(CLOSE_WAIT_S * 1e9);
    for (;;) {
        bool open = false;
        for (int i = 0; i < w->nsessions; i++)
            open |= w->sessions[i].state != SESS_DONE;
        if (!open || (uint64_t)base_mono_ns() >= end_ns)
            break;
        poll_once(w);
    }
    for (int i = 0; i < w->nsessions; i++) {
        struct session *s = &w->sessions[i];
        if (s->fd >= 0)
            close(s->fd);
        s->fd = -1;
        s->state = SESS_DONE;
    }
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    for (int i = 0; i < w->nsessions; i++)
        if (open_session(w, &w->sessions[i]) != 0)
            w->counts.sessions_lost++;
    atomic_store(&w->opened, true);
    run_loop(w);
    close_sessions(w);
    return NULL;
}

/* ---- setup and teardown of the workers --------------------------------- */

static int worker_init(struct worker *w, const struct bench_cfg *cfg, int t, int nthreads)
{
    w->ep = epoll_create1(EPOLL_CLOEXEC);
    w->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (w->ep < 0 || w->tfd < 0)
        return -1;
    struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };
    if (epoll_ctl(w->ep, EPOLL_CTL_ADD, w->tfd, &ev) != 0)
        return -1;
    /* Sessions are dealt round robin: thread t owns t, t+T, t+2T, ... */
    w->nsessions = (cfg->sessions - t + nthreads - 1) / nthreads;
    w->sessions = calloc((size_t)w->nsessions, sizeof(*w->sessions));
    if (!w->sessions)
        return -1;
    for (int i = 0; i < w->nsessions; i++) {
        w->sessions[i].fd = -1; /* so that worker_free never closes fd 0 */
        w->sessions[i].state = SESS_DONE;
    }
    for (int i = 0; i < w->nsessions; i++) {
        struct session *s = &w->sessions[i];
        s->w = w;
        s->index = (uint32_t)(t + i * nthreads);
        s->next_xid = 1;
        zk_wbuf_init(&s->out);
        bench_rng_seed(&s->rng, cfg->seed * 1000003u + s->index);
        s->ring = calloc((size_t)cfg->outstanding, sizeof(*s->ring));
        if (!s->ring)
            return -1;
    }
    return 0;
}

static void worker_free(struct worker *w)
{
    for (int i = 0; w->sessions && i < w->nsessions; i++) {
        struct session *s = &w->sessions[i];
        if (s->fd >= 0)
            close(s->fd);
        zk_wbuf_free(&s->out);
        free(s->in);
        free(s->ring);
    }
    free(w->sessions);
    if (w->ep >= 0)
        close(w->ep);
    if (w->tfd >= 0)
        close(w->tfd);
}

struct run {
    struct worker *workers;
    int nthreads;
};

static bool any_alive(void *arg)
{
    struct run *run = arg;
    for (int t = 0; t < run->nthreads; t++)
        if (atomic_load(&run->workers[t].alive) > 0)
            return true;
    return false;
}

/* Waits until every session finished its handshake or was lost; false when
 * none is left or the bound passes. */
static bool wait_connected(struct run *run)
{
    uint64_t end_ns = (uint64_t)base_mono_ns() + (uint64_t)(CONNECT_WAIT_S * 1e9);
    while ((uint64_t)base_mono_ns() < end_ns) {
        int ready = 0, alive = 0;
        bool opened = true;
        for (int t = 0; t < run->nthreads; t++) {
            opened &= atomic_load(&run->workers[t].opened);
            ready += atomic_load(&run->workers[t].ready);
            alive += atomic_load(&run->workers[t].alive);
        }
        if (opened && alive == 0)
            return false;
        if (opened && ready == alive)
            return true;
        usleep(2000);
    }
    return false;
}

static void collect(struct run *run, struct bench_result *r, char *err, size_t err_len)
{
    for (int t = 0; t < run->nthreads; t++) {
        struct worker *w = &run->workers[t];
        bench_counts_add(&r->counts, &w->counts);
        bench_hist_merge(&r->all, &w->all);
        bench_hist_merge(&r->read, &w->read);
        bench_hist_merge(&r->write, &w->write);
        if (w->err[0] && err[0] == '\0')
            snprintf(err, err_len, "%s", w->err);
    }
}

static int start_workers(struct run *run, const struct bench_cfg *cfg, _Atomic int *phase,
                         double read_pct, const struct bench_keys *keys, const char *value)
{
    for (int t = 0; t < run->nthreads; t++) {
        struct worker *w = &run->workers[t];
        w->cfg = cfg;
        w->keys = keys;
        w->phase = phase;
        w->read_pct = read_pct;
        w->value = value;
        if (cfg->rate_per_s > 0) {
            double interval = 1e9 * cfg->sessions / cfg->rate_per_s;
            w->interval_ns = interval < 1 ? 1 : (uint64_t)interval;
        }
        bench_hist_reset(&w->all);
        bench_hist_reset(&w->read);
        bench_hist_reset(&w->write);
        if (worker_init(w, cfg, t, run->nthreads) != 0)
            return -1;
    }
    for (int t = 0; t < run->nthreads; t++) {
        if (pthread_create(&run->workers[t].thread, NULL, worker_main, &run->workers[t]) != 0)
            return -1;
        run->workers[t].started = true;
    }
    return 0;
}

int bench_raw_run(const struct bench_cfg *cfg, double read_pct, struct bench_result *r,
                  char *err, size_t err_len)
{
    _Atomic int phase = BENCH_PHASE_WARMUP;
    struct bench_keys keys;
    struct run run = { .nthreads = cfg->threads };
    int rc = -1;
    err[0] = '\0';
    bench_keys_init(&keys, cfg);
    bench_result_reset(r, read_pct);
    char *value = malloc(cfg->value_size_bytes + 1);
    run.workers = calloc((size_t)run.nthreads, sizeof(*run.workers));
    if (!value || !run.workers) {
        snprintf(err, err_len, "out of memory");
        goto out;
    }
    memset(value, 'v', cfg->value_size_bytes);
    for (int t = 0; t < run.nthreads; t++)
        run.workers[t].ep = run.workers[t].tfd = -1;
    if (start_workers(&run, cfg, &phase, read_pct, &keys, value) != 0) {
        snprintf(err, err_len, "cannot start the driver threads: %s", strerror(errno));
        atomic_store(&phase, BENCH_PHASE_DRAIN);
    } else if (!wait_connected(&run)) {
        snprintf(err, err_len, "no session connected to %s:%u", cfg->host, cfg->port);
        atomic_store(&phase, BENCH_PHASE_DRAIN);
    } else if (bench_timeline(cfg, &phase, r, any_alive, &run) != 0) {
        snprintf(err, err_len, "every session was lost");
    } else {
        rc = 0;
    }
    for (int t = 0; t < run.nthreads; t++)
        if (run.workers[t].started)
            pthread_join(run.workers[t].thread, NULL);
    char detail[256] = "";
    collect(&run, r, detail, sizeof(detail));
    if (rc != 0 && detail[0]) {
        size_t used = strlen(err);
        snprintf(err + used, err_len - used, " (%s)", detail);
    } else if (rc == 0 && detail[0]) {
        fprintf(stderr, "larch-bench: warning: %s\n", detail);
    }
out:
    for (int t = 0; run.workers && t < run.nthreads; t++)
        worker_free(&run.workers[t]);
    free(run.workers);
    free(value);
    return rc;
}
