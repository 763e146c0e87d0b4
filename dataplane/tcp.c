/*
 * tcp.c — the epoll transport: accept, recv, send, the connection lifecycle,
 * deadlines, worker setup and introspection. What a connection does with
 * its bytes is conn.c's business.
 *
 * Each loop pass, redis-style: wait; read every ready socket (conn.c parses
 * and runs what arrived); drain the sequencer queue; run connections whose
 * write was answered or whose output drained; flush every connection that
 * has output, so replies produced in one pass go out in one write per
 * connection; then free the connections closed during the pass.
 *
 * Lifetime: conn_close only marks. A connection is freed in reap_dead, the
 * last step of a pass, once the dirty and resume lists no longer name it;
 * once dead it never enters a list again. (Freeing it inside the flush loop,
 * where a failed send re-queues it on the list being walked, was a
 * use-after-free and double close.)
 */
#include "dataplane/dp_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <urcu.h>

#define EV_LISTEN 0xFFFFFFFFFFFFFF01ULL
#define EV_SEQ 0xFFFFFFFFFFFFFF02ULL
#define EV_STOP 0xFFFFFFFFFFFFFF03ULL
#define EV_LISTEN_TLS 0xFFFFFFFFFFFFFF05ULL /* (04 is DP_EV_UDP) */
#define EPOLL_IDLE_MS 200 /* longest sleep: deadlines are checked at least this often */
#define PASS_TURNS_MAX 8  /* run/flush turns per pass before the loop polls again */

/* ---- connection limits (maxClientCnxns per IP, maxCnxns in all) ----------- */

static bool ip_acquire(struct dp *dp, const char *ip)
{
    bool ok = true;
    pthread_mutex_lock(&dp->ip_lock);
    size_t i;
    for (i = 0; i < dp->nips && strcmp(dp->ips[i].ip, ip) != 0; i++)
        ;
    if (i == dp->nips) {
        if (base_grow(&dp->ips, &dp->cap_ips, dp->nips + 1, sizeof *dp->ips) != 0) {
            pthread_mutex_unlock(&dp->ip_lock);
            return false;
        }
        snprintf(dp->ips[i].ip, sizeof(dp->ips[i].ip), "%s", ip);
        dp->ips[i].n = 0;
        dp->nips++;
    }
    if (dp->cfg.max_client_cnxns > 0 && dp->ips[i].n >= dp->cfg.max_client_cnxns)
        ok = false;
    else
        dp->ips[i].n++;
    pthread_mutex_unlock(&dp->ip_lock);
    return ok;
}

static void ip_release(struct dp *dp, const char *ip)
{
    pthread_mutex_lock(&dp->ip_lock);
    for (size_t i = 0; i < dp->nips; i++) {
        if (strcmp(dp->ips[i].ip, ip) == 0) {
            if (--dp->ips[i].n == 0)
                dp->ips[i] = dp->ips[--dp->nips];
            break;
        }
    }
    pthread_mutex_unlock(&dp->ip_lock);
}

/* maxCnxns: a slot in the server-wide count, or false when it is full. */
static bool cnxn_acquire(struct dp *dp)
{
    uint32_t n = atomic_fetch_add_explicit(&dp->nconns, 1, memory_order_relaxed);
    if (dp->cfg.max_cnxns > 0 && n >= (uint32_t)dp->cfg.max_cnxns) {
        atomic_fetch_sub_explicit(&dp->nconns, 1, memory_order_relaxed);
        return false;
    }
    return true;
}

static void refuse(struct dp *dp, int fd, const char *ip, const char *why, int32_t max)
{
    /* ZooKeeper: "Too many connections from <ip> - max is N": drop. */
    base_log(BASE_LOG_WARN, "larchd: too many connections %s%s - max is %d", why, ip, max);
    atomic_fetch_add_explicit(&dp->st_refused, 1, memory_order_relaxed);
    close(fd);
}

/* ---- connection table ------------------------------------------------------- */

struct conn *worker_conn(struct worker *w, uint64_t token)
{
    uint32_t slot = (uint32_t)token;
    if (slot >= w->nslots || !w->slots[slot] || w->slots[slot]->token != token)
        return NULL;
    return w->slots[slot];
}

static int slot_take(struct worker *w, uint32_t *out)
{
    if (w->nfree == 0) {
        /* three arrays of nslots each, doubled together */
        size_t want = w->nslots ? (size_t)w->nslots * 2 : 64;
        size_t cap_s = w->nslots, cap_g = w->nslots, cap_f = w->nslots;
        if (want > UINT32_MAX || base_grow(&w->slots, &cap_s, want, sizeof *w->slots) != 0 ||
            base_grow(&w->gens, &cap_g, want, sizeof *w->gens) != 0 ||
            base_grow(&w->free_slots, &cap_f, want, sizeof *w->free_slots) != 0)
            return -1;
        BASE_ASSERT(cap_s >= want && cap_g >= want && cap_f >= want);
        uint32_t ncap = (uint32_t)want;
        for (uint32_t i = w->nslots; i < ncap; i++) {
            w->slots[i] = NULL;
            w->gens[i] = 0;
        }
        for (uint32_t i = ncap; i > w->nslots; i--)
            w->free_slots[w->nfree++] = i - 1;
        w->nslots = ncap;
    }
    *out = w->free_slots[--w->nfree];
    return 0;
}

/* The epoll interest follows the connection: input only while conn.c's
 * budget allows it (and never while closing), output only while a send
 * would block. Level-triggered, so the interest must be exact; epoll_ctl
 * runs only when it changes. A TLS read that waits to write asks for
 * writability in place of input: input it cannot read yet would wake the
 * loop again and again. */
static void conn_update_events(struct conn *c)
{
    uint32_t ev = 0;
    bool in = conn_wants_input(c);
    if (in && !c->read_wants_out)
        ev |= EPOLLIN | EPOLLRDHUP;
    if (c->epollout || (in && c->read_wants_out))
        ev |= EPOLLOUT;
    if (ev == c->ev_mask)
        return;
    struct epoll_event e = { .events = ev, .data.u64 = c->token };
    if (epoll_ctl(c->w->epfd, EPOLL_CTL_MOD, c->fd, &e) == 0)
        c->ev_mask = ev;
    else
        conn_close(c, true);
}

void conn_mark_dirty(struct conn *c)
{
    if (c->dirty || c->dead)
        return;
    c->dirty = true;
    c->next_dirty = c->w->dirty;
    c->w->dirty = c;
}

void conn_mark_resume(struct conn *c)
{
    if (c->resume || c->dead)
        return;
    c->resume = true;
    c->next_resume = c->w->resume;
    c->w->resume = c;
}

void conn_close(struct conn *c, bool hard)
{
    if (!c->closing)
        c->closing_ms = c->w->now_ms;
    c->closing = true;
    c->hard_close = c->hard_close || hard;
    conn_mark_dirty(c);
}

/* Registers fd as a new connection of w (the accept path, and tests); a
 * TLS session of tls on it when tls is not NULL. */
static void conn_adopt(struct worker *w, int fd, const char *ip, int port, struct tls_ctx *tls)
{
    struct dp *dp = w->dp;
    if (!cnxn_acquire(dp)) {
        refuse(dp, fd, "", "in all", dp->cfg.max_cnxns);
        return;
    }
    if (!ip_acquire(dp, ip)) {
        atomic_fetch_sub_explicit(&dp->nconns, 1, memory_order_relaxed);
        refuse(dp, fd, "from ", ip, dp->cfg.max_client_cnxns);
        return;
    }
    uint32_t slot;
    struct conn *c = calloc(1, sizeof(*c));
    pthread_mutex_lock(&w->conns_lock);
    if (!c || slot_take(w, &slot) != 0) {
        pthread_mutex_unlock(&w->conns_lock);
        free(c);
        ip_release(dp, ip);
        atomic_fetch_sub_explicit(&dp->nconns, 1, memory_order_relaxed);
        close(fd);
        return;
    }
    c->token = ((uint64_t)++w->gens[slot] << 32) | slot;
    w->slots[slot] = c;
    pthread_mutex_unlock(&w->conns_lock);
    conn_init(c, w, fd, ip, port);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)); /* fails harmlessly off TCP */
    struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP, .data.u64 = c->token };
    if ((tls != NULL && (c->tls = tls_conn_new(tls, fd, ip)) == NULL) ||
        epoll_ctl(w->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
        c->fd = -1; /* never registered: nothing to remove */
        close(fd);
        conn_close(c, true);
        return;
    }
    c->ev_mask = ev.events;
}

static void accept_one(struct worker *w, int fd, const struct sockaddr_storage *ss,
                       struct tls_ctx *tls)
{
    char ip[64] = "?";
    int port = 0;
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
        inet_ntop(AF_INET, &a->sin_addr, ip, sizeof(ip));
        port = ntohs(a->sin_port);
    } else if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
        inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof(ip));
        port = ntohs(a->sin6_port);
    }
    conn_adopt(w, fd, ip, port, tls);
}

/* Accepts what listen_fd has (the plain port's, or the secure port's with
 * its context). */
static void accept_all(struct worker *w, int listen_fd, struct tls_ctx *tls)
{
    for (int i = 0; i < 64; i++) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        int fd = accept4(listen_fd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return; /* EAGAIN: another worker took it, or the backlog is empty */
        accept_one(w, fd, &ss, tls);
    }
}

/* Frees c: only from reap_dead. */
static void conn_destroy(struct conn *c)
{
    struct worker *w = c->w;
    struct dp *dp = w->dp;
    conn_release(c);
    tls_conn_free(c->tls); /* before the socket closes: it may send close_notify */
    c->tls = NULL;
    if (c->fd >= 0) {
        epoll_ctl(w->epfd, EPOLL_CTL_DEL, c->fd, NULL);
        close(c->fd);
    }
    ip_release(dp, c->peer_ip);
    atomic_fetch_sub_explicit(&dp->nconns, 1, memory_order_relaxed);
    uint32_t slot = (uint32_t)c->token;
    pthread_mutex_lock(&w->conns_lock);
    w->slots[slot] = NULL;
    w->free_slots[w->nfree++] = slot;
    pthread_mutex_unlock(&w->conns_lock);
    free(c);
}

/* A closed connection whose last output is out (or dropped) becomes dead. */
static void conn_kill(struct conn *c)
{
    c->dead = true;
    c->next_dead = c->w->dead;
    c->w->dead = c;
}

/* Frees the dead. One still on the resume list (the list is walked earlier
 * in the pass, so this does not happen today) waits for the next pass. */
static void reap_dead(struct worker *w)
{
    struct conn *keep = NULL;
    while (w->dead) {
        struct conn *c = w->dead;
        w->dead = c->next_dead;
        if (c->dirty || c->resume) {
            c->next_dead = keep;
            keep = c;
            continue;
        }
        conn_destroy(c);
    }
    w->dead = keep;
}

/* ---- input and output ------------------------------------------------------- */

/* The TLS twin of read_conn: a read returns one record (16 KiB at most),
 * so a short read says nothing about the socket and the loop reads until
 * it would wait. The handshake runs inside the first reads (the sessionless
 * deadline bounds it, as it bounds a ConnectRequest that never comes); when
 * it completes, conn.c takes the client's certificate as its identity,
 * before any request is read. */
static void read_tls(struct conn *c)
{
    struct worker *w = c->w;
    bool established = tls_conn_established(c->tls);
    for (int rounds = 0; rounds < 16 && conn_wants_input(c); rounds++) {
        ssize_t n = tls_conn_recv(c->tls, w->rbuf, DP_READ_CHUNK);
        int err = errno;
        c->read_wants_out = n < 0 && err == EAGAIN && tls_conn_wants_write(c->tls);
        if (!established && tls_conn_established(c->tls)) {
            established = true;
            if (!conn_tls_established(c))
                break;
        }
        if (n > 0) {
            conn_input(c, w->rbuf, (size_t)n);
            continue;
        }
        if (n < 0 && err == EAGAIN)
            break;
        if (n < 0 && err == EPROTO && !established)
            base_log(BASE_LOG_WARN, "larchd: closing %s: TLS handshake failed: %s", c->peer,
                     tls_conn_error(c->tls));
        conn_close(c, true); /* the end, or a failure */
        break;
    }
    conn_mark_dirty(c);
}

static void read_conn(struct conn *c)
{
    struct worker *w = c->w;
    if (c->tls) {
        read_tls(c);
        return;
    }
    for (int rounds = 0; rounds < 16 && conn_wants_input(c); rounds++) {
        ssize_t n = recv(c->fd, w->rbuf, DP_READ_CHUNK, 0);
        if (n > 0) {
            conn_input(c, w->rbuf, (size_t)n);
            /* A short read drained the socket: asking again would only
             * return EAGAIN (half of all recv calls, measured); the
             * level-triggered epoll reports whatever arrives next. */
            if ((size_t)n < DP_READ_CHUNK)
                break;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        conn_close(c, true); /* EOF or error */
        break;
    }
    conn_mark_dirty(c); /* the flush step brings interest and the budget up to date */
}

/* One send of c's output: to the socket, or through its TLS session (which
 * writes nothing while a read of its waits to write: that read goes first). */
static ssize_t conn_send(struct conn *c, const uint8_t *p, size_t n)
{
    if (c->tls) {
        if (c->read_wants_out) {
            errno = EAGAIN;
            return -1;
        }
        return tls_conn_send(c->tls, p, n);
    }
    return send(c->fd, p, n, MSG_NOSIGNAL);
}

static void flush_conn(struct conn *c)
{
    while (c->out_off < c->out.len && !c->hard_close) {
        ssize_t n = conn_send(c, c->out.p + c->out_off, c->out.len - c->out_off);
        if (n > 0) {
            c->out_off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            c->epollout = true;
            return;
        }
        conn_close(c, true);
        return;
    }
    c->epollout = false;
    if (c->out_off == c->out.len) {
        /* A buffer that once held a large reply is not kept: memory is
         * budgeted by allocation, and most connections need 100 bytes. */
        if (c->out.cap > DP_OUT_KEEP_BYTES)
            zk_wbuf_free(&c->out);
        zk_wbuf_reset(&c->out);
        c->out_off = 0;
    }
}

/* Flushes every dirty connection and brings its epoll interest and budget
 * up to date; a closed one whose output is out is killed. A connection whose
 * output drained enough to run its backlog goes on the resume list. */
static void flush_dirty(struct worker *w)
{
    while (w->dirty) {
        struct conn *c = w->dirty;
        w->dirty = c->next_dirty;
        c->dirty = false;
        if (c->dead)
            continue;
        flush_conn(c);
        if (c->closing && (c->hard_close || c->out_off == c->out.len)) {
            conn_kill(c);
            continue;
        }
        if (conn_has_runnable_work(c))
            conn_mark_resume(c);
        conn_account(c);
        conn_update_events(c);
    }
}

static void run_resumed(struct worker *w)
{
    while (w->resume) {
        struct conn *c = w->resume;
        w->resume = c->next_resume;
        c->resume = false;
        if (!c->closing) {
            conn_progress(c);
            conn_mark_dirty(c);
        }
    }
}

/* Flat combining: when this pass handed writes over and the sequencer role
 * is free, run the rounds here and answer them in the same pass: no wake-up
 * and no context switch (the win when the sequencer has no core of its own).
 * Replies can release queued requests that submit more: a few turns at most. */
static void run_rounds_inline(struct worker *w)
{
    for (int turns = 0; turns < 4 && w->submitted; turns++) {
        if (!seq_run_inline(w->dp->seq))
            return; /* role busy or inline off: the kick wakes the thread */
        w->submitted = false;
        worker_drain_sequencer(w);
        run_resumed(w);
    }
}

/* ---- deadlines ------------------------------------------------------------------ */

/* ZooKeeper closes a connection that has no session after
 * zookeeper.nio.sessionlessCnxnTimeout (10 s); a soft close whose output the
 * client does not read turns hard after DP_LINGER_MS. */
static void scan_deadlines(struct worker *w)
{
    if (w->now_ms < w->next_scan_ms)
        return;
    w->next_scan_ms = w->now_ms + DP_DEADLINE_SCAN_MS;
    int64_t sessionless = w->dp->cfg.sessionless_timeout_ms;
    for (uint32_t i = 0; i < w->nslots; i++) {
        struct conn *c = w->slots[i];
        if (!c || c->dead)
            continue;
        if (c->closing) {
            if (!c->hard_close && w->now_ms - c->closing_ms >= DP_LINGER_MS)
                conn_close(c, true);
            continue;
        }
        if (c->state != CONN_ACTIVE && w->now_ms - c->accepted_ms >= sessionless) {
            base_log(BASE_LOG_DEBUG, "larchd: closing %s: no session after %lld ms", c->peer,
                     (long long)(w->now_ms - c->accepted_ms));
            COUNTER_ADD(w->st_sessionless_closes, 1);
            conn_close(c, true);
        }
    }
}

/* ---- the loop ------------------------------------------------------------------ */

static void handle_conn_event(struct worker *w, uint64_t token, uint32_t events)
{
    struct conn *c = worker_conn(w, token);
    if (!c || c->dead)
        return;
    if (events & EPOLLOUT)
        conn_mark_dirty(c);
    if ((events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) || c->read_wants_out)
        read_conn(c);
    if ((events & (EPOLLHUP | EPOLLERR)) && !c->closing)
        conn_close(c, true);
}

static void pass_clock(struct worker *w)
{
    w->now_us = w->dp->clock_us();
    w->now_ms = w->now_us / 1000;
}

static void reset_server_counters(struct worker *w)
{
    atomic_store_explicit(&w->st_rx, 0, memory_order_relaxed);
    atomic_store_explicit(&w->st_tx, 0, memory_order_relaxed);
    atomic_store_explicit(&w->st_lat_min, UINT64_MAX, memory_order_relaxed);
    atomic_store_explicit(&w->st_lat_max, 0, memory_order_relaxed);
    atomic_store_explicit(&w->st_lat_sum, 0, memory_order_relaxed);
    atomic_store_explicit(&w->st_lat_count, 0, memory_order_relaxed);
}

/* What ZooKeeper's ServerCnxn.resetStats clears (lastOp "NA", lastZxid -1). */
static void reset_conn_counters(struct conn *c)
{
    atomic_store_explicit(&c->rx, 0, memory_order_relaxed);
    atomic_store_explicit(&c->tx, 0, memory_order_relaxed);
    atomic_store_explicit(&c->last_op, DP_CONN_NO_OP, memory_order_relaxed);
    atomic_store_explicit(&c->last_zxid, -1, memory_order_relaxed);
    atomic_store_explicit(&c->lat_last_us, 0, memory_order_relaxed);
    atomic_store_explicit(&c->lat_min_us, INT64_MAX, memory_order_relaxed);
    atomic_store_explicit(&c->lat_max_us, 0, memory_order_relaxed);
    atomic_store_explicit(&c->lat_sum_us, 0, memory_order_relaxed);
    atomic_store_explicit(&c->lat_count, 0, memory_order_relaxed);
}

/* Carries out the resets asked for since the last pass (srst, crst). The
 * counters are this worker's to write (COUNTER_ADD is a load and a store),
 * so a reset stored by another thread could be lost under an increment;
 * done here, at the start of a pass, nothing of this worker races with it. */
static void apply_stats_resets(struct worker *w)
{
    struct dp *dp = w->dp;
    uint64_t want = atomic_load_explicit(&dp->server_reset_epoch, memory_order_relaxed);
    if (want != atomic_load_explicit(&w->server_reset_done, memory_order_relaxed)) {
        reset_server_counters(w);
        atomic_store_explicit(&w->server_reset_done, want, memory_order_release);
    }
    want = atomic_load_explicit(&dp->conn_reset_epoch, memory_order_relaxed);
    if (want != atomic_load_explicit(&w->conn_reset_done, memory_order_relaxed)) {
        for (uint32_t i = 0; i < w->nslots; i++)
            if (w->slots[i])
                reset_conn_counters(w->slots[i]);
        atomic_store_explicit(&w->conn_reset_done, want, memory_order_release);
    }
}

/* One loop pass (see the top of the file). Blocks up to timeout_ms, or not at
 * all while work is left over from the previous pass. */
static void worker_pass(struct worker *w, int timeout_ms)
{
    struct epoll_event evs[128];
    bool wants_events = atomic_load_explicit(&w->nwatches, memory_order_relaxed) > 0;
    bool idle = !w->resume && !w->dirty && timeout_ms > 0 &&
                seq_worker_idle_begin(w->dp->seq, w->id, wants_events);
    int n = epoll_wait(w->epfd, evs, 128, idle ? timeout_ms : 0);
    if (idle)
        seq_worker_idle_end(w->dp->seq, w->id);
    pass_clock(w);
    apply_stats_resets(w);
    for (int i = 0; i < n; i++) {
        uint64_t key = evs[i].data.u64;
        if (key == EV_LISTEN)
            accept_all(w, w->dp->listen_fd, NULL);
        else if (key == EV_LISTEN_TLS)
            accept_all(w, w->dp->secure_listen_fd, w->dp->cfg.tls);
        else if (key == EV_SEQ)
            seq_worker_ack(w->dp->seq, w->id); /* drained below, once per pass */
        else if (key == DP_EV_UDP)
            udp_sock_pass(w);
        else if (key != EV_STOP)
            handle_conn_event(w, key, evs[i].events);
    }
    scan_deadlines(w);
    worker_drain_sequencer(w);
    worker_budget_pass(w);
    for (int turn = 0; turn < PASS_TURNS_MAX; turn++) {
        run_resumed(w);
        run_rounds_inline(w);
        flush_dirty(w);
        if (!w->resume)
            break;
    }
    reap_dead(w);
    worker_kick_sequencer(w); /* after reaping: closes submit DISCONNECTs too */
}

/* Closes every connection and frees them all. */
static void worker_close_all(struct worker *w)
{
    pass_clock(w);
    pthread_mutex_lock(&w->conns_lock);
    uint32_t nslots = w->nslots;
    pthread_mutex_unlock(&w->conns_lock);
    for (uint32_t i = 0; i < nslots; i++)
        if (w->slots[i])
            conn_close(w->slots[i], true);
    flush_dirty(w);
    while (w->resume) { /* closing connections run nothing */
        struct conn *c = w->resume;
        w->resume = c->next_resume;
        c->resume = false;
    }
    reap_dead(w);
    worker_kick_sequencer(w);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    pthread_setname_np(pthread_self(), "larch-worker");
    rcu_register_thread();
    while (!atomic_load(&w->dp->stop))
        worker_pass(w, EPOLL_IDLE_MS);
    worker_close_all(w);
    rcu_unregister_thread();
    return NULL;
}

/* ---- the test seam (dp_int.h) ------------------------------------------------- */

void dp_test_set_clock(struct dp *dp, int64_t (*now_us)(void))
{
    dp->clock_us = now_us;
}

void dp_test_adopt(struct dp *dp, int worker, int fd, const char *ip, int port)
{
    struct worker *w = &dp->workers[worker];
    pass_clock(w);
    conn_adopt(w, fd, ip, port, NULL);
}

void dp_test_adopt_tls(struct dp *dp, int worker, int fd, const char *ip, int port)
{
    struct worker *w = &dp->workers[worker];
    pass_clock(w);
    conn_adopt(w, fd, ip, port, dp->cfg.tls);
}

void dp_test_pass(struct dp *dp, int worker)
{
    worker_pass(&dp->workers[worker], 0);
}

void dp_test_close_all(struct dp *dp, int worker)
{
    struct worker *w = &dp->workers[worker];
    worker_close_all(w);
    worker_budget_pass(w);
}

/* ---- setup -------------------------------------------------------------------- */

/* Binds addr:port (addr "" for every interface, port 0 for any free one)
 * and listens: the descriptor and the bound port, or -1 with a message
 * that begins with what ("" or "secureClientPort: "). */
static int open_listener(const char *addr, int port, const char *what, int *bound, char *err,
                         size_t errlen)
{
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
    struct addrinfo *res = NULL;
    char port_text[16];
    snprintf(port_text, sizeof(port_text), "%d", port);
    int rc = getaddrinfo(addr[0] ? addr : NULL, port_text, &hints, &res);
    if (rc != 0) {
        snprintf(err, errlen, "%scannot resolve client address '%s': %s", what, addr, gai_strerror(rc));
        return -1;
    }
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(err, errlen, "%ssocket: %s", what, strerror(errno));
        freeaddrinfo(res);
        return -1;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, 1024) != 0) {
        snprintf(err, errlen, "%scannot listen on %s:%d: %s", what, addr, port, strerror(errno));
        close(fd);
        freeaddrinfo(res);
        return -1;
    }
    freeaddrinfo(res);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    getsockname(fd, (struct sockaddr *)&ss, &sl);
    *bound = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                            : ((struct sockaddr_in *)&ss)->sin_port);
    return fd;
}

/* The plain port (unless cfg.port is -1) and the secure one (with cfg.tls). */
static int open_listeners(struct dp *dp, char *err, size_t errlen)
{
    if (dp->cfg.port >= 0) {
        dp->listen_fd = open_listener(dp->bind_addr, dp->cfg.port, "", &dp->port, err, errlen);
        if (dp->listen_fd < 0)
            return -1;
    }
    if (dp->cfg.tls != NULL) {
        dp->secure_listen_fd = open_listener(dp->secure_bind_addr, dp->cfg.secure_port,
                                             "secureClientPort: ", &dp->secure_port, err, errlen);
        if (dp->secure_listen_fd < 0)
            return -1;
    }
    return 0;
}

/* Zero means the default; a per-connection input bound below two frames
 * could wedge a connection (config refuses it; here it is raised). */
static void budget_defaults(struct dp_cfg *c)
{
    int64_t two_frames = 2 * ((int64_t)c->max_buffer_bytes + 4);
    if (c->max_outstanding <= 0)
        c->max_outstanding = 1000;
    if (c->sessionless_timeout_ms <= 0)
        c->sessionless_timeout_ms = 10000;
    if (c->conn_max_buffer_bytes < two_frames)
        c->conn_max_buffer_bytes = two_frames;
    if (c->conn_out_high_water_bytes <= 0)
        c->conn_out_high_water_bytes = 1 << 20;
    if (c->conn_max_unsent_bytes <= 0)
        c->conn_max_unsent_bytes = 16 << 20;
    if (c->conn_max_unsent_bytes < c->conn_out_high_water_bytes)
        c->conn_max_unsent_bytes = c->conn_out_high_water_bytes;
    if (c->max_buffered_bytes <= 0)
        c->max_buffered_bytes = (int64_t)256 << 20;
}

static int worker_init(struct dp *dp, struct worker *w, int id)
{
    w->id = id;
    w->dp = dp;
    w->epfd = -1;
    w->udp_fd = -1;
    w->events_through = tree_last_zxid(dp->tree);
    atomic_store(&w->st_lat_min, UINT64_MAX);
    w->rbuf = malloc(DP_READ_CHUNK);
    zk_wbuf_init(&w->scratch);
    zk_wbuf_init(&w->aux);
    pthread_mutex_init(&w->conns_lock, NULL);
    pthread_mutex_init(&w->watch_lock, NULL);
    w->wt = watch_table_new();
    w->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (!w->wt || !w->rbuf || w->epfd < 0)
        return -1;
    struct epoll_event ev = { .events = EPOLLIN | EPOLLEXCLUSIVE, .data.u64 = EV_LISTEN };
    if (dp->listen_fd >= 0 && epoll_ctl(w->epfd, EPOLL_CTL_ADD, dp->listen_fd, &ev) != 0)
        return -1;
    struct epoll_event tev = { .events = EPOLLIN | EPOLLEXCLUSIVE, .data.u64 = EV_LISTEN_TLS };
    if (dp->secure_listen_fd >= 0 &&
        epoll_ctl(w->epfd, EPOLL_CTL_ADD, dp->secure_listen_fd, &tev) != 0)
        return -1;
    struct epoll_event sev = { .events = EPOLLIN, .data.u64 = EV_SEQ };
    if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, seq_worker_fd(dp->seq, id), &sev) != 0)
        return -1;
    struct epoll_event xev = { .events = EPOLLIN, .data.u64 = EV_STOP };
    if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, dp->stop_efd, &xev) != 0)
        return -1;
    return 0;
}

struct dp *dp_new(const struct dp_cfg *cfg, struct tree *t, struct seq *s, char *err, size_t errlen)
{
    struct dp *dp = calloc(1, sizeof(*dp));
    if (!dp) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    dp->cfg = *cfg;
    snprintf(dp->bind_addr, sizeof(dp->bind_addr), "%s", cfg->bind_addr ? cfg->bind_addr : "");
    snprintf(dp->super_digest, sizeof(dp->super_digest), "%s", cfg->super_digest ? cfg->super_digest : "");
    snprintf(dp->secure_bind_addr, sizeof(dp->secure_bind_addr), "%s",
             cfg->secure_bind_addr ? cfg->secure_bind_addr : "");
    snprintf(dp->x509_super_user, sizeof(dp->x509_super_user), "%s",
             cfg->x509_super_user ? cfg->x509_super_user : "");
    dp->cfg.bind_addr = dp->bind_addr;
    dp->cfg.secure_bind_addr = dp->secure_bind_addr;
    dp->cfg.x509_super_user = dp->x509_super_user;
    dp->cfg.super_digest = dp->super_digest;
    budget_defaults(&dp->cfg);
    dp->tree = t;
    dp->seq = s;
    dp->clock_us = base_mono_us;
    dp->listen_fd = -1;
    dp->secure_listen_fd = -1;
    dp->port = -1;
    dp->secure_port = -1;
    dp->stop_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    pthread_mutex_init(&dp->ip_lock, NULL);
    dp->nworkers = cfg->workers;
    dp->workers = calloc((size_t)cfg->workers, sizeof(*dp->workers));
    if (dp->stop_efd < 0 || !dp->workers) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    if (open_listeners(dp, err, errlen) != 0)
        goto fail;
    for (int i = 0; i < dp->nworkers; i++) {
        if (worker_init(dp, &dp->workers[i], i) != 0) {
            snprintf(err, errlen, "worker %d setup: %s", i, strerror(errno));
            goto fail;
        }
    }
    if (cfg->udp_port != 0 && udp_sock_open(dp, err, errlen) != 0)
        goto fail;
    return dp;
fail:
    dp_free(dp);
    return NULL;
}

int dp_port(const struct dp *dp)
{
    return dp->port;
}

int dp_secure_port(const struct dp *dp)
{
    return dp->secure_port;
}

int dp_udp_port(const struct dp *dp)
{
    return dp->udp_port;
}

int dp_start(struct dp *dp)
{
    for (int i = 0; i < dp->nworkers; i++) {
        int rc = pthread_create(&dp->workers[i].thread, NULL, worker_main, &dp->workers[i]);
        if (rc != 0)
            return -rc;
        dp->workers[i].started = true;
    }
    return 0;
}

void dp_stop(struct dp *dp)
{
    atomic_store(&dp->stop, true);
    uint64_t one = 1;
    ssize_t n = write(dp->stop_efd, &one, sizeof(one));
    (void)n;
    for (int i = 0; i < dp->nworkers; i++) {
        if (dp->workers[i].started) {
            pthread_join(dp->workers[i].thread, NULL);
            dp->workers[i].started = false;
        }
    }
}

void dp_free(struct dp *dp)
{
    if (!dp)
        return;
    dp_stop(dp);
    for (int i = 0; dp->workers && i < dp->nworkers; i++) {
        struct worker *w = &dp->workers[i];
        udp_sock_close(w);
        if (w->epfd >= 0)
            close(w->epfd);
        watch_table_free(w->wt);
        zk_wbuf_free(&w->scratch);
        zk_wbuf_free(&w->aux);
        free(w->rbuf);
        free(w->slots);
        free(w->gens);
        free(w->free_slots);
        pthread_mutex_destroy(&w->conns_lock);
        pthread_mutex_destroy(&w->watch_lock);
    }
    free(dp->workers);
    if (dp->listen_fd >= 0)
        close(dp->listen_fd);
    if (dp->secure_listen_fd >= 0)
        close(dp->secure_listen_fd);
    if (dp->stop_efd >= 0)
        close(dp->stop_efd);
    pthread_mutex_destroy(&dp->ip_lock);
    free(dp->ips);
    free(dp);
}

/* ---- introspection (any thread) ------------------------------------------------ */

/* Whether a reset asked for (epoch) is still to be carried out by the
 * worker that has carried out those up to done. Read done first: acquiring
 * it makes the counters the worker reset visible. */
static bool reset_pending(_Atomic uint64_t *done, _Atomic uint64_t *epoch)
{
    uint64_t d = atomic_load_explicit(done, memory_order_acquire);
    return d != atomic_load_explicit(epoch, memory_order_relaxed);
}

/* The counters srst resets; nothing when a reset of them is pending. */
static void add_server_counters(struct worker *w, struct dp_stats *out)
{
    if (reset_pending(&w->server_reset_done, &w->dp->server_reset_epoch))
        return;
    out->packets_received += atomic_load_explicit(&w->st_rx, memory_order_relaxed);
    out->packets_sent += atomic_load_explicit(&w->st_tx, memory_order_relaxed);
    uint64_t mn = atomic_load_explicit(&w->st_lat_min, memory_order_relaxed);
    uint64_t mx = atomic_load_explicit(&w->st_lat_max, memory_order_relaxed);
    if (mn < out->latency_min_us)
        out->latency_min_us = mn;
    if (mx > out->latency_max_us)
        out->latency_max_us = mx;
    out->latency_sum_us += atomic_load_explicit(&w->st_lat_sum, memory_order_relaxed);
    out->latency_count += atomic_load_explicit(&w->st_lat_count, memory_order_relaxed);
}

void dp_get_stats(struct dp *dp, struct dp_stats *out)
{
    memset(out, 0, sizeof(*out));
    out->latency_min_us = UINT64_MAX;
    for (int i = 0; i < dp->nworkers; i++) {
        struct worker *w = &dp->workers[i];
        add_server_counters(w, out);
        uint64_t reads = atomic_load_explicit(&w->st_reads, memory_order_relaxed);
        out->reads += reads;
        if (i < DP_STATS_WORKERS) {
            out->worker_reads[i] = reads;
            out->workers = i + 1;
        }
        out->writes += atomic_load_explicit(&w->st_writes, memory_order_relaxed);
        out->watches += atomic_load_explicit(&w->nwatches, memory_order_relaxed);
        out->outstanding += atomic_load_explicit(&w->st_outstanding, memory_order_relaxed);
        out->buffered_bytes += atomic_load_explicit(&w->st_mem_bytes, memory_order_relaxed);
        out->throttled_connections += atomic_load_explicit(&w->st_throttled, memory_order_relaxed);
        out->throttle_events += atomic_load_explicit(&w->st_throttle_events, memory_order_relaxed);
        out->slow_consumer_closes += atomic_load_explicit(&w->st_slow_closes, memory_order_relaxed);
        out->sessionless_timeouts += atomic_load_explicit(&w->st_sessionless_closes, memory_order_relaxed);
        out->udp_datagrams += atomic_load_explicit(&w->st_udp_datagrams, memory_order_relaxed);
        out->udp_unsent += atomic_load_explicit(&w->st_udp_unsent, memory_order_relaxed);
        out->udp_overflows += atomic_load_explicit(&w->st_udp_overflows, memory_order_relaxed);
        if (w->udp_rcvbuf_bytes > out->udp_rcvbuf_bytes)
            out->udp_rcvbuf_bytes = w->udp_rcvbuf_bytes;
        for (int k = 0; k < ZK_UDP_STATUSES; k++)
            out->udp_answered[k] += atomic_load_explicit(&w->st_udp_answered[k], memory_order_relaxed);
        for (int k = 0; k < DP_UDP_DROPS; k++)
            out->udp_dropped[k] += atomic_load_explicit(&w->st_udp_dropped[k], memory_order_relaxed);
    }
    if (out->latency_min_us == UINT64_MAX)
        out->latency_min_us = 0;
    out->connections = atomic_load_explicit(&dp->nconns, memory_order_relaxed);
    out->buffered_bytes_limit = (uint64_t)dp->cfg.max_buffered_bytes;
    out->memory_pressure = atomic_load_explicit(&dp->pressure, memory_order_relaxed);
    out->connections_refused = atomic_load_explicit(&dp->st_refused, memory_order_relaxed);
}

void dp_reset_stats(struct dp *dp)
{
    atomic_fetch_add(&dp->server_reset_epoch, 1);
}

void dp_reset_conn_stats(struct dp *dp)
{
    atomic_fetch_add(&dp->conn_reset_epoch, 1);
}

/* c's counters as cons reports them; as reset_conn_counters leaves them
 * while a reset is pending on its worker. */
static void conn_info(const struct conn *c, bool reset_pending, struct dp_conn_info *ci)
{
    memset(ci, 0, sizeof(*ci));
    snprintf(ci->peer, sizeof(ci->peer), "%s", c->peer);
    ci->session_id = c->session_id;
    ci->timeout_ms = c->timeout_ms;
    ci->queued = c->queued;
    ci->established_ms = c->established_ms;
    if (reset_pending) {
        ci->last_zxid = -1;
        ci->last_op = DP_CONN_NO_OP;
        return;
    }
    ci->received = atomic_load_explicit(&c->rx, memory_order_relaxed);
    ci->sent = atomic_load_explicit(&c->tx, memory_order_relaxed);
    ci->last_zxid = atomic_load_explicit(&c->last_zxid, memory_order_relaxed);
    ci->last_op = atomic_load_explicit(&c->last_op, memory_order_relaxed);
    ci->last_latency_us = atomic_load_explicit(&c->lat_last_us, memory_order_relaxed);
    int64_t cnt = atomic_load_explicit(&c->lat_count, memory_order_relaxed);
    ci->min_latency_us = cnt ? atomic_load_explicit(&c->lat_min_us, memory_order_relaxed) : 0;
    ci->max_latency_us = atomic_load_explicit(&c->lat_max_us, memory_order_relaxed);
    ci->avg_latency_us = cnt ? atomic_load_explicit(&c->lat_sum_us, memory_order_relaxed) / cnt : 0;
}

void dp_each_conn(struct dp *dp, dp_conn_fn fn, void *arg)
{
    for (int i = 0; i < dp->nworkers; i++) {
        struct worker *w = &dp->workers[i];
        pthread_mutex_lock(&w->conns_lock);
        bool pending = reset_pending(&w->conn_reset_done, &dp->conn_reset_epoch);
        for (uint32_t s = 0; s < w->nslots; s++) {
            if (!w->slots[s] || w->slots[s]->state != CONN_ACTIVE)
                continue;
            struct dp_conn_info ci;
            conn_info(w->slots[s], pending, &ci);
            fn(arg, &ci);
        }
        pthread_mutex_unlock(&w->conns_lock);
    }
}

struct watch_visit {
    struct worker *w;
    dp_watch_fn fn;
    void *arg;
};

static void visit_watch(void *arg, uint64_t token, enum watch_kind kind, const char *path)
{
    struct watch_visit *v = arg;
    struct conn *c = worker_conn(v->w, token);
    v->fn(v->arg, c ? c->session_id : 0, kind, path);
}

void dp_each_watch(struct dp *dp, dp_watch_fn fn, void *arg)
{
    for (int i = 0; i < dp->nworkers; i++) {
        struct worker *w = &dp->workers[i];
        struct watch_visit v = { .w = w, .fn = fn, .arg = arg };
        /* conns_lock keeps connections (and their session ids) alive meanwhile. */
        pthread_mutex_lock(&w->conns_lock);
        pthread_mutex_lock(&w->watch_lock);
        watch_each(w->wt, visit_watch, &v);
        pthread_mutex_unlock(&w->watch_lock);
        pthread_mutex_unlock(&w->conns_lock);
    }
}
