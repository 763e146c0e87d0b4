/*
 * fuzz_conn — the connection state machine (dataplane/conn.c over tcp.c's
 * lifecycle) fed arbitrary byte streams, half-closes and closes, through the
 * test seam in dataplane/dp_int.h: a dataplane that is created but not
 * started, one worker run pass by pass on this thread, the sequencer's
 * rounds run inline by it, clients on socketpairs.
 *
 * The input is a script. Each step is one byte op, a connection index and,
 * for sends, a length and the bytes themselves:
 *   open      a new client (up to CONNS_MAX), optionally with a tiny socket
 *             buffer on the server side so sends block (EAGAIN paths)
 *   raw       up to 255 bytes of the input, as they are, to a client
 *   frame     a well-formed request built from the input (connect, reads,
 *             writes, watches, auth, multi) so the fuzzer gets past framing
 *   pass      1-4 loop passes, each followed by the sequencer's rounds
 *   drain     the client reads what it was sent
 *   shutdown  the client half-closes (SHUT_WR)
 *   close     the client closes
 *   wait      the dataplane's clock jumps 0.5-16 s, then one pass: handshake
 *             and linger deadlines fall due
 * The tree and the sequencer live for the whole run (a tree's teardown waits
 * for an RCU grace period: ~10 ms, which would cap the target at 90 inputs a
 * second); each input gets a fresh dataplane and ends by expiring every
 * session, so the tree keeps only persistent nodes of a small path alphabet.
 * The dataplane and the sequencer run on clocks only the script moves (the
 * dataplane's 1 ms a pass, and wait), the password key is fixed, and what
 * an input freed is freed before the next (rcu_barrier), so that a seed and
 * a run count replay the same run.
 * Properties: nothing crashes or leaks (ASan/LSan); the budget never runs
 * negative; the worker's connection count matches the clients the server
 * still holds; after everything is closed and reaped, no connection, byte
 * or request is left accounted.
 */
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <urcu.h>

#include "dataplane/dp_int.h"
#include "tests/fuzz/fuzz.h"

#define CONNS_MAX 6
#define MAX_BUFFER 8192 /* jute.maxbuffer: small, so every bound is reachable */

/* The script is read with base's bounded reader; its end is the end of the
 * run, not an error. The next byte, or -1 at the end. */
static int take(struct base_rd *s)
{
    return base_rd_left(s) > 0 ? base_rd_u8(s) : -1;
}

struct world {
    struct dp *dp;
    int fds[CONNS_MAX];
    int nfds;
    int xid;
};

static struct tree *g_tree;
static struct seq *g_seq;
static int64_t g_clock_ms = 1000000; /* seq_tick's clock: jumps past every timeout */
static int64_t g_dp_us;               /* the dataplane's clock */

static int64_t dp_clock(void)
{
    return g_dp_us += 1000;
}

static int64_t seq_clock(bool wall)
{
    return wall ? 1700000000000 + g_clock_ms : g_clock_ms;
}

static void world_open(struct world *w)
{
    memset(w, 0, sizeof(*w));
    struct dp_cfg cfg = {
        .bind_addr = "127.0.0.1", .workers = 1, .max_buffer_bytes = MAX_BUFFER,
        .max_client_cnxns = 4, .max_outstanding = 16, .super_digest = "",
        .conn_out_high_water_bytes = 4096, .conn_max_unsent_bytes = 32768,
        .max_buffered_bytes = 65536,
    };
    char err[256];
    w->dp = dp_new(&cfg, g_tree, g_seq, err, sizeof(err));
    if (!w->dp) {
        fprintf(stderr, "fuzz_conn: dp_new: %s\n", err);
        abort();
    }
    g_dp_us = 1000000000;
    dp_test_set_clock(w->dp, dp_clock);
    for (int i = 0; i < CONNS_MAX; i++)
        w->fds[i] = -1;
}

static void check_budget(struct world *w)
{
    struct dp_stats st;
    dp_get_stats(w->dp, &st);
    BASE_ASSERT(st.buffered_bytes < ((uint64_t)1 << 40)); /* a wrapped subtraction */
    BASE_ASSERT(st.outstanding < ((uint64_t)1 << 30));
    BASE_ASSERT(st.connections <= CONNS_MAX);
}

static void discard(void *arg, struct seq_out *o)
{
    seq_out_free(o);
}

/* Expires every session (their ephemerals go) and drops what the sequencer
 * still had for this input's connections, so the next input starts clean. */
static void reset_sequencer(void)
{
    while (seq_run_inline(g_seq) && seq_worker_drain(g_seq, 0, discard, NULL) > 0)
        ;
    g_clock_ms += 10000000;
    rcu_read_lock();
    seq_tick(g_seq, g_clock_ms, g_clock_ms);
    rcu_read_unlock();
    seq_worker_drain(g_seq, 0, discard, NULL);
}

static void world_close(struct world *w)
{
    for (int i = 0; i < CONNS_MAX; i++)
        if (w->fds[i] >= 0)
            close(w->fds[i]);
    for (int i = 0; i < 4; i++) {
        dp_test_pass(w->dp, 0);
        seq_run_inline(g_seq);
    }
    dp_test_close_all(w->dp, 0);
    struct dp_stats st;
    dp_get_stats(w->dp, &st);
    BASE_ASSERT(st.connections == 0 && st.buffered_bytes == 0 && st.outstanding == 0 &&
               st.throttled_connections == 0);
    dp_free(w->dp);
    reset_sequencer();
    struct tree_stats ts;
    rcu_read_lock();
    tree_stats(g_tree, &ts);
    rcu_read_unlock();
    BASE_ASSERT(ts.session_count == 0 && ts.ephemeral_count == 0);
}

static void op_open(struct world *w, struct base_rd *s)
{
    int flags = take(s);
    if (w->nfds == CONNS_MAX || flags < 0)
        return;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0)
        return;
    if (flags & 1) {
        int small = 1024; /* the kernel rounds it up; still tiny */
        setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
    }
    const char *ip = (flags & 2) ? "127.0.0.2" : "127.0.0.1";
    dp_test_adopt(w->dp, 0, sv[1], ip, 1000 + w->nfds);
    w->fds[w->nfds++] = sv[0];
}

static int pick(struct world *w, struct base_rd *s)
{
    int k = take(s);
    if (k < 0 || w->nfds == 0)
        return -1;
    int fd = w->fds[k % w->nfds];
    return fd;
}

static void send_some(int fd, const void *p, size_t n)
{
    ssize_t k = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)k; /* a full socket or a closed server end is part of the game */
}

static void op_raw(struct world *w, struct base_rd *s)
{
    int fd = pick(w, s);
    int len = take(s);
    if (fd < 0 || len < 0)
        return;
    size_t n = (size_t)len <= base_rd_left(s) ? (size_t)len : base_rd_left(s);
    send_some(fd, base_rd_take(s, n), n);
}

/* A path from the input: "/", or /a, /a/b... from a small alphabet, so
 * requests meet each other's nodes. */
static void put_path(struct zk_wbuf *b, struct base_rd *s)
{
    static const char *const paths[] = { "/", "/a", "/a/b", "/c", "/zookeeper", "/a/b/c", "/d", "" };
    int k = take(s);
    zk_put_str(b, zk_str_c(paths[(k < 0 ? 0 : k) % 8]));
}

static void put_acl(struct zk_wbuf *b, struct base_rd *s)
{
    int k = take(s);
    zk_put_i32(b, 1);
    zk_put_i32(b, ZK_PERM_ALL);
    if (k >= 0 && (k & 1)) {
        zk_put_str(b, zk_str_c("digest"));
        zk_put_str(b, zk_str_c("u:7FySzhb/lWwsuXWZWqD+bYhyWCM="));
    } else {
        zk_put_str(b, zk_str_c("world"));
        zk_put_str(b, zk_str_c("anyone"));
    }
}

/* A data field of n bytes (-1: null): up to 6 KB, near MAX_BUFFER. */
static void put_data(struct zk_wbuf *b, int n)
{
    static const char zeros[256 * 24];
    zk_put_bytes(b, n < 0 ? NULL : zeros, n);
}

/* One request body by op; returns the op or -1 for the ConnectRequest. */
static int32_t build_request(struct zk_wbuf *b, struct base_rd *s, int kind)
{
    static const int32_t ops[] = { ZK_OP_GETDATA, ZK_OP_EXISTS, ZK_OP_GETCHILDREN2, ZK_OP_CREATE,
                                   ZK_OP_SETDATA, ZK_OP_DELETE, ZK_OP_ADDWATCH, ZK_OP_AUTH,
                                   ZK_OP_SYNC, ZK_OP_PING, ZK_OP_MULTI, ZK_OP_CLOSESESSION };
    int32_t op = ops[kind % 12];
    int len = take(s);
    switch (op) {
    case ZK_OP_GETDATA: case ZK_OP_EXISTS: case ZK_OP_GETCHILDREN2:
        put_path(b, s);
        zk_put_bool(b, len & 1);
        break;
    case ZK_OP_CREATE:
        put_path(b, s);
        put_data(b, len < 0 ? -1 : len * 16);
        put_acl(b, s);
        zk_put_i32(b, (len >> 4) & 3);
        break;
    case ZK_OP_SETDATA:
        put_path(b, s);
        put_data(b, len < 0 ? 0 : len * 24);
        zk_put_i32(b, -1);
        break;
    case ZK_OP_DELETE:
        put_path(b, s);
        zk_put_i32(b, -1);
        break;
    case ZK_OP_ADDWATCH:
        put_path(b, s);
        zk_put_i32(b, len & 1);
        break;
    case ZK_OP_AUTH:
        zk_put_i32(b, 0);
        zk_put_str(b, zk_str_c(len & 1 ? "digest" : "ip"));
        zk_put_str(b, zk_str_c("u:p"));
        break;
    case ZK_OP_SYNC:
        put_path(b, s);
        break;
    case ZK_OP_MULTI:
        for (int i = 0; i < (len & 3); i++) {
            struct zk_multi_header h = { .type = ZK_OP_CHECK, .done = false, .err = -1 };
            zk_put_multi_header(b, &h);
            put_path(b, s);
            zk_put_i32(b, -1);
        }
        zk_put_multi_end(b);
        break;
    default:
        break;
    }
    return op;
}

static void op_frame(struct world *w, struct base_rd *s)
{
    int fd = pick(w, s);
    int kind = take(s);
    if (fd < 0 || kind < 0)
        return;
    struct zk_wbuf b;
    zk_wbuf_init(&b);
    size_t m = zk_frame_begin(&b);
    if (kind >= 240) {
        static const char pw[16];
        struct zk_connect_req q = { .timeout_ms = 10000, .passwd = { pw, 16 } };
        zk_put_connect_req(&b, &q);
    } else {
        struct zk_request_header h = { .xid = ++w->xid, .type = 0 };
        size_t at = b.len;
        zk_put_request_header(&b, &h);
        h.type = build_request(&b, s, kind);
        size_t end = b.len;
        b.len = at;
        zk_put_request_header(&b, &h); /* patch the op in */
        b.len = end;
    }
    zk_frame_end(&b, m);
    if (!b.err)
        send_some(fd, b.p, b.len);
    zk_wbuf_free(&b);
}

static void op_drain(struct world *w, struct base_rd *s)
{
    int fd = pick(w, s);
    uint8_t buf[65536];
    for (int i = 0; fd >= 0 && i < 64 && recv(fd, buf, sizeof(buf), MSG_DONTWAIT) > 0; i++)
        ;
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
static unsigned g_barrier_every = 1; /* inputs per rcu_barrier() */
static unsigned long g_inputs;

static void teardown(void)
{
    seq_free(g_seq);
    tree_free(g_tree); /* LeakSanitizer runs after atexit handlers */
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    const char *every = getenv("LARCH_FUZZ_CONN_BARRIER_EVERY");
    if (every != NULL && atoi(every) >= 1 && atoi(every) <= 1000000)
        g_barrier_every = (unsigned)atoi(every);
    rcu_register_thread();
    g_tree = tree_new();
    struct seq_cfg scfg = { .min_session_timeout_ms = 4000, .max_session_timeout_ms = 40000,
                            .container_check_ms = 60000, .ttl_enabled = true, .tick_ms = 1000,
                            .inline_rounds = true, .clock_ms = seq_clock,
                            .passwd_key_set = true }; /* a zero key: same passwords each run */
    g_seq = g_tree ? seq_new(g_tree, &scfg, 1) : NULL;
    BASE_ASSERT(g_tree != NULL && g_seq != NULL);
    atexit(teardown);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct world w;
    world_open(&w);
    struct base_rd s;
    base_rd_init(&s, data, size);
    for (int steps = 0; steps < 512; steps++) {
        int op = take(&s);
        if (op < 0)
            break;
        int fd;
        switch (op % 8) {
        case 0: op_open(&w, &s); break;
        case 1: op_raw(&w, &s); break;
        case 2: op_frame(&w, &s); break;
        case 3:
            for (int i = 0; i <= (op >> 3) % 4; i++) {
                dp_test_pass(w.dp, 0);
                seq_run_inline(g_seq); /* the sequencer thread's share */
            }
            check_budget(&w);
            break;
        case 4: op_drain(&w, &s); break;
        case 5:
            if ((fd = pick(&w, &s)) >= 0)
                shutdown(fd, SHUT_WR);
            break;
        case 6:
            if ((fd = pick(&w, &s)) >= 0)
                shutdown(fd, SHUT_RDWR); /* the fd stays ours to close */
            break;
        default:
            g_dp_us += ((op >> 3) + 1) * 500000;
            dp_test_pass(w.dp, 0);
            seq_run_inline(g_seq);
            check_budget(&w);
            break;
        }
    }
    world_close(&w);
    /* What the input freed is freed now: call_rcu's share of the coverage
     * counts for this input, not a later one. liburcu's call_rcu worker
     * sleeps 10 ms between batches, so this barrier is most of an input's
     * time; long campaigns trade that exactness for speed with
     * LARCH_FUZZ_CONN_BARRIER_EVERY (scripts/fuzz sets it unless --seed). */
    if (++g_inputs % g_barrier_every == 0)
        rcu_barrier();
    return 0;
}
