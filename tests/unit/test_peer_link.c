/*
 * test_peer_link — the peer-I/O thread (replication/peer_link.h) over real
 * loopback sockets: links between three servers carrying every frame kind
 * exactly once and in order, a multi-MiB snapshot (and the membership a
 * snapshot carries), a server that restarts, hostile bytes on the quorum
 * port, bounded output and input queues, prompt stops, configuration
 * errors, member changes (servers added, removed, added again, moved; bad
 * sets; changes racing status readers), and the consumer's sleep protocol
 * across thousands of ping-pong round trips.
 *
 * Servers listen on 127.0.0.2 .. 127.0.0.8 (never 127.0.0.1, the source
 * address of every loopback connect, so that no outgoing socket can hold
 * a port a restarted server needs); raw clients bind 127.0.0.9. Ports are
 * found by binding port 0, and a server that cannot bind retries a bounded
 * number of times. Every wait polls against a deadline and fails with a
 * message naming what it waited for; none is a timed assertion.
 *
 * What a server receives is re-encoded with the codec (canonical: equal
 * bytes mean equal fields) and compared with the encoding of what was sent.
 *
 * The test_inline_* tests run the same scenarios over links without an
 * I/O thread (cfg.inline_io), as larchd's sequencer drives them: the test
 * thread does every server's I/O in pump, and sends go out from
 * peer_link_flush itself.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "replication/peer_link.h"
#include "tls/tls.h"
#include "tls_pki.h"

#define CLUSTER 0x6c61726368303031ull
#define DEADLINE_MS 10000
#define NODES_MAX 4
#define RAW_HOST "127.0.0.9"

/* ---- log capture ---------------------------------------------------------------- */

struct logcap {
    pthread_mutex_t mu;
    char *text; /* lines, '\n'-separated */
    size_t len, cap;
};

static void cap_init(struct logcap *c)
{
    pthread_mutex_init(&c->mu, NULL);
    c->text = NULL;
    c->len = c->cap = 0;
}

static void cap_free(struct logcap *c)
{
    free(c->text);
    pthread_mutex_destroy(&c->mu);
}

/* cfg.log: appends the line (bounded at 1 MiB; later lines are lost). */
static void cap_log(void *arg, int level, const char *msg)
{
    struct logcap *c = arg;
    size_t n = strlen(msg);
    (void)level;
    pthread_mutex_lock(&c->mu);
    if (c->len + n + 2 <= (1u << 20)) {
        if (c->len + n + 2 > c->cap) {
            size_t ncap = c->cap ? c->cap * 2 : 4096;
            while (ncap < c->len + n + 2)
                ncap *= 2;
            char *t = realloc(c->text, ncap);
            if (t == NULL)
                abort();
            c->text = t;
            c->cap = ncap;
        }
        memcpy(c->text + c->len, msg, n);
        c->len += n;
        c->text[c->len++] = '\n';
        c->text[c->len] = '\0';
    }
    pthread_mutex_unlock(&c->mu);
}

/* How many lines contain both a and b (b may be NULL). */
static int cap_count(struct logcap *c, const char *a, const char *b)
{
    int n = 0;
    pthread_mutex_lock(&c->mu);
    const char *p = c->text;
    while (p != NULL && *p != '\0') {
        const char *e = strchr(p, '\n');
        size_t len = e != NULL ? (size_t)(e - p) : strlen(p);
        char line[512];
        snprintf(line, sizeof line, "%.*s", (int)len, p);
        if (strstr(line, a) != NULL && (b == NULL || strstr(line, b) != NULL))
            n++;
        p = e != NULL ? e + 1 : NULL;
    }
    pthread_mutex_unlock(&c->mu);
    return n;
}

static void cap_print(struct logcap *c, const char *who)
{
    pthread_mutex_lock(&c->mu);
    fprintf(stderr, "---- log of %s ----\n%s", who, c->text != NULL ? c->text : "");
    pthread_mutex_unlock(&c->mu);
}

/* ---- messages: one generator, so sender and receiver agree -------------------------- */

/* The k-th message from -> to: every kind in turn, fields from k. */
struct gen {
    uint8_t kind; /* PEER_LINK_RX_* */
    struct raft_msg m;
    struct peer_forward f;
    struct raft_entry entries[3];
    uint8_t data[3][40];
    uint8_t body[64];
    struct peer_auth auth[2];
    char ids_text[2][32];
    int64_t ids[8];
    uint32_t n_ids;
};

static void gen_raft(struct gen *g, uint32_t k)
{
    uint32_t term = 1 + k;
    struct raft_msg *m = &g->m;
    g->kind = PEER_LINK_RX_RAFT;
    m->term = term;
    switch (k % 8) {
    case 0:
        m->type = RAFT_MSG_VOTE_REQ;
        m->pre_vote = (k / 8) & 1;
        m->last_zxid = raft_make_zxid(term - 1, k);
        break;
    case 1:
        m->type = RAFT_MSG_VOTE_RESP;
        m->pre_vote = (k / 8) & 1;
        m->reject = (k / 16) & 1;
        break;
    case 2:
        m->type = RAFT_MSG_APPEND;
        m->prev_zxid = raft_make_zxid(term - 1, 7);
        m->commit_zxid = raft_make_zxid(term - 1, 3);
        m->read_ctx = (uint64_t)k * 1000003u;
        m->n_entries = (k / 8) % 4; /* 0: a heartbeat */
        for (uint32_t i = 0; i < m->n_entries; i++) {
            struct raft_entry *e = &g->entries[i];
            e->zxid = raft_make_zxid(term, i);
            e->type = i == 0 ? RAFT_ENTRY_NOOP : RAFT_ENTRY_DATA;
            e->len = (i * 13 + k) % sizeof g->data[i];
            for (size_t j = 0; j < e->len; j++)
                g->data[i][j] = (uint8_t)(k * 7 + i * 31 + j);
            e->data = e->len > 0 ? g->data[i] : NULL;
        }
        m->entries = m->n_entries > 0 ? g->entries : NULL;
        break;
    case 3:
        m->type = RAFT_MSG_APPEND_RESP;
        m->reject = (k / 8) & 1;
        m->match_zxid = raft_make_zxid(term, k);
        m->hint_zxid = raft_make_zxid(term, k / 2);
        m->read_ctx = k;
        break;
    case 4:
        m->type = RAFT_MSG_READ_INDEX;
        m->read_ctx = ~(uint64_t)k;
        break;
    default:
        m->type = RAFT_MSG_READ_INDEX_RESP;
        m->reject = (k / 8) & 1;
        m->commit_zxid = raft_make_zxid(term, 1);
        m->read_ctx = (uint64_t)k << 20;
        break;
    }
}

static void gen_msg(struct gen *g, uint32_t from, uint32_t to, uint32_t k)
{
    memset(g, 0, sizeof *g);
    if (k % 8 == 6) {
        g->kind = PEER_LINK_RX_FORWARD;
        g->f.session_id = (int64_t)((uint64_t)from << 56 | k);
        g->f.cxid = (int32_t)k;
        g->f.op = 1 + (int32_t)(k % 20);
        g->f.body_len = (k * 5) % sizeof g->body;
        for (size_t j = 0; j < g->f.body_len; j++)
            g->body[j] = (uint8_t)(from + to + k + j);
        g->f.body = g->f.body_len > 0 ? g->body : NULL;
        g->f.n_auth = (k / 8) % 3;
        for (uint32_t i = 0; i < g->f.n_auth; i++) {
            snprintf(g->ids_text[i], sizeof g->ids_text[i], "user%u:%u", i, k);
            g->auth[i] = (struct peer_auth){ "digest", 6, g->ids_text[i],
                                              strlen(g->ids_text[i]) };
        }
        g->f.auth = g->f.n_auth > 0 ? g->auth : NULL;
    } else if (k % 8 == 7) {
        g->kind = PEER_LINK_RX_TOUCH;
        g->n_ids = (k / 8) % 9;
        for (uint32_t i = 0; i < g->n_ids; i++)
            g->ids[i] = (int64_t)((uint64_t)from << 56 | (k * 16 + i));
    } else {
        gen_raft(g, k);
    }
    g->m.from = from;
    g->m.to = to;
}

static int gen_send(struct peer_link *pl, const struct gen *g)
{
    switch (g->kind) {
    case PEER_LINK_RX_FORWARD: return peer_link_send_forward(pl, g->m.to, &g->f);
    case PEER_LINK_RX_TOUCH: return peer_link_send_touch(pl, g->m.to, g->ids, g->n_ids);
    default: return peer_link_send_msg(pl, &g->m);
    }
}

static void gen_encode(const struct gen *g, struct base_buf *b)
{
    int rc;
    switch (g->kind) {
    case PEER_LINK_RX_FORWARD: rc = peer_encode_forward(b, &g->f); break;
    case PEER_LINK_RX_TOUCH: rc = peer_encode_touch(b, g->ids, g->n_ids); break;
    default: rc = peer_encode_msg(b, &g->m); break;
    }
    assert_int_equal(rc, 0);
}

/* ---- nodes and what they receive ------------------------------------------------- */

struct got {
    uint32_t from;
    uint8_t kind;
    uint8_t raft_type;
    uint32_t msg_from, msg_to;
    uint32_t term;
    int64_t snap_zxid;
    struct base_buf bytes;  /* the canonical re-encoding, or a snapshot's bytes */
    struct base_buf config; /* a snapshot's membership, raft_config_encode'd (none: empty) */
    bool has_config;
};

struct node {
    uint32_t id;
    char host[16];
    struct peer_link_cfg cfg;
    struct peer_link *pl;
    struct logcap log;
    struct got *got;
    size_t n_got, cap_got;
};

/* peer_link_drain's callback: a deep copy of rx, as bytes. */
static void collect(void *arg, const struct peer_link_rx *rx)
{
    struct node *nd = arg;
    if (nd->n_got == nd->cap_got) {
        nd->cap_got = nd->cap_got ? nd->cap_got * 2 : 256;
        nd->got = realloc(nd->got, nd->cap_got * sizeof *nd->got);
        assert_non_null(nd->got);
    }
    struct got *g = &nd->got[nd->n_got++];
    memset(g, 0, sizeof *g);
    g->from = rx->from;
    g->kind = rx->kind;
    int rc = 0;
    if (rx->kind == PEER_LINK_RX_RAFT) {
        g->raft_type = rx->msg.type;
        g->msg_from = rx->msg.from;
        g->msg_to = rx->msg.to;
        g->term = rx->msg.term;
        g->snap_zxid = rx->msg.snap_zxid;
        if (rx->msg.type == RAFT_MSG_SNAP) {
            assert_non_null(rx->msg.snap_data);
            rc = base_buf_append(&g->bytes, rx->msg.snap_data, rx->msg.snap_len);
            if (rx->msg.snap_config != NULL) {
                uint8_t conf[RAFT_CONFIG_BYTES_MAX];
                size_t n = raft_config_encode(rx->msg.snap_config, conf);
                g->has_config = true;
                assert_int_equal(base_buf_append(&g->config, conf, n), 0);
            }
        } else {
            rc = peer_encode_msg(&g->bytes, &rx->msg);
        }
    } else if (rx->kind == PEER_LINK_RX_FORWARD) {
        rc = peer_encode_forward(&g->bytes, &rx->forward);
    } else {
        assert_int_equal(rx->kind, PEER_LINK_RX_TOUCH);
        rc = peer_encode_touch(&g->bytes, rx->touch.session_ids, rx->touch.n);
    }
    assert_int_equal(rc, 0);
}

static void node_forget(struct node *nd)
{
    for (size_t i = 0; i < nd->n_got; i++) {
        base_buf_free(&nd->got[i].bytes);
        base_buf_free(&nd->got[i].config);
    }
    nd->n_got = 0;
}

static void node_free(struct node *nd)
{
    peer_link_free(nd->pl);
    nd->pl = NULL;
    node_forget(nd);
    free(nd->got);
    nd->got = NULL;
    nd->cap_got = 0;
    cap_free(&nd->log);
}

struct cluster {
    uint32_t n;
    struct node nodes[NODES_MAX];
    struct peer_link_member members[NODES_MAX];
    uint32_t known[NODES_MAX]; /* node i starts knowing members[0..known[i]); 0: all */
    struct peer_link_cfg tmpl; /* what each node's cfg starts from */
};

/* A port nobody listens on at host right now (bind to 0, read it back). */
static uint16_t free_port(const char *host)
{
    struct sockaddr_in sa = { .sin_family = AF_INET };
    socklen_t len = sizeof sa;
    assert_int_equal(inet_pton(AF_INET, host, &sa.sin_addr), 1);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    close(fd);
    return ntohs(sa.sin_port);
}

/* Set by the test_inline_* tests: every link they make is an inline_io
 * one. */
static bool g_inline;

static int inline_teardown(void **state)
{
    (void)state;
    g_inline = false;
    return 0;
}

/* Set by the test_tls_* tests: every link they make is a TLS one on this
 * context (tls_pki.h's peer.pem, which names every test address), but
 * node i's with g_tls_of[i] (when set) or plain with g_plain_of[i]. */
static struct tls_ctx *g_tls;
static struct tls_ctx *g_tls_of[NODES_MAX];
static bool g_plain_of[NODES_MAX];

static struct peer_link_cfg base_cfg(void)
{
    return (struct peer_link_cfg){
        .inline_io = g_inline,
        .tls = g_tls,
        .tls_verify_host = g_tls != NULL,
        .cluster_id = CLUSTER,
        .backoff_min_ms = 20,
        .backoff_max_ms = 200,
        .connect_timeout_ms = 2000,
        .seed = 42,
    };
}

static void node_cfg(struct cluster *cl, uint32_t i)
{
    struct node *nd = &cl->nodes[i];
    nd->cfg = cl->tmpl;
    nd->cfg.self_id = nd->id;
    nd->cfg.members = cl->members;
    nd->cfg.n_members = cl->known[i] != 0 ? cl->known[i] : cl->n;
    nd->cfg.seed = cl->tmpl.seed + i;
    nd->cfg.log = cap_log;
    nd->cfg.log_arg = &nd->log;
    if (g_tls_of[i] != NULL)
        nd->cfg.tls = g_tls_of[i];
    if (g_plain_of[i])
        nd->cfg.tls = NULL;
}

/* n servers, ids 1..n, on 127.0.0.(first_host + i), from tmpl; started.
 * Node i knows the first known[i] of them (known NULL or 0: all). Ports
 * are picked afresh if any server cannot bind (a bounded retry). */
static void cluster_start_known(struct cluster *cl, uint32_t n, int first_host,
                                const struct peer_link_cfg *tmpl, const uint32_t *known)
{
    memset(cl, 0, sizeof *cl);
    cl->n = n;
    cl->tmpl = *tmpl;
    for (uint32_t i = 0; known != NULL && i < n; i++)
        cl->known[i] = known[i];
    for (uint32_t i = 0; i < n; i++) {
        struct node *nd = &cl->nodes[i];
        nd->id = i + 1;
        snprintf(nd->host, sizeof nd->host, "127.0.0.%d", first_host + (int)i);
        cap_init(&nd->log);
        cl->members[i] = (struct peer_link_member){ .id = nd->id, .host = nd->host, .port = 0 };
    }
    for (int attempt = 0;; attempt++) {
        assert_true(attempt < 10);
        uint32_t made = 0;
        char err[256] = "";
        for (uint32_t i = 0; i < n; i++)
            cl->members[i].port = free_port(cl->nodes[i].host);
        for (; made < n; made++) {
            node_cfg(cl, made);
            cl->nodes[made].pl = peer_link_new(&cl->nodes[made].cfg, err, sizeof err);
            if (cl->nodes[made].pl == NULL)
                break;
        }
        if (made == n)
            break;
        fprintf(stderr, "cluster_start: %s; picking new ports\n", err);
        for (uint32_t i = 0; i < made; i++) {
            peer_link_free(cl->nodes[i].pl);
            cl->nodes[i].pl = NULL;
        }
    }
    for (uint32_t i = 0; i < n; i++)
        assert_int_equal(peer_link_start(cl->nodes[i].pl), 0);
}

static void cluster_start(struct cluster *cl, uint32_t n, int first_host,
                          const struct peer_link_cfg *tmpl)
{
    cluster_start_known(cl, n, first_host, tmpl, NULL);
}

static void cluster_free(struct cluster *cl)
{
    for (uint32_t i = 0; i < cl->n; i++)
        node_free(&cl->nodes[i]);
}

/* Inline links: one I/O pass of every node; returns the shortest wait
 * they asked for. */
static int io_passes(struct cluster *cl, int wait_ms)
{
    for (uint32_t i = 0; i < cl->n; i++)
        if (cl->nodes[i].pl != NULL) {
            int ms = peer_link_poll(cl->nodes[i].pl);
            if (ms < wait_ms)
                wait_ms = ms;
        }
    return wait_ms;
}

/* Inline links: I/O passes without draining, for about ms (what the I/O
 * thread does in the background while the test waits). */
static void io_only_for(struct cluster *cl, int ms)
{
    int64_t end = base_mono_ms() + ms;
    do {
        if (g_inline)
            (void)io_passes(cl, 0);
        poll(NULL, 0, 2);
    } while (base_mono_ms() < end);
}

/* Inline links: an I/O pass of every node, then a drain, then a sleep on
 * their epoll sets, at most wait_ms or what a pass asked for. */
static void pump_inline(struct cluster *cl, int wait_ms)
{
    struct pollfd pfd[NODES_MAX];
    uint32_t n = 0;
    wait_ms = io_passes(cl, wait_ms);
    for (uint32_t i = 0; i < cl->n; i++)
        if (cl->nodes[i].pl != NULL) {
            while (peer_link_drain(cl->nodes[i].pl, collect, &cl->nodes[i]) > 0)
                ;
            pfd[n++] = (struct pollfd){ .fd = peer_link_io_fd(cl->nodes[i].pl), .events = POLLIN };
        }
    poll(pfd, n, wait_ms);
}

/* Drains every node into its collector, then sleeps on their eventfds with
 * the idle protocol (so this also exercises it), at most wait_ms. */
static void pump(struct cluster *cl, int wait_ms)
{
    if (g_inline) {
        pump_inline(cl, wait_ms);
        return;
    }
    struct pollfd pfd[NODES_MAX];
    uint32_t n = 0;
    for (uint32_t i = 0; i < cl->n; i++)
        if (cl->nodes[i].pl != NULL)
            while (peer_link_drain(cl->nodes[i].pl, collect, &cl->nodes[i]) > 0)
                ;
    for (uint32_t i = 0; i < cl->n; i++) {
        struct peer_link *pl = cl->nodes[i].pl;
        if (pl == NULL)
            continue;
        if (!peer_link_idle_begin(pl)) {
            for (uint32_t j = 0; j < i; j++)
                if (cl->nodes[j].pl != NULL)
                    peer_link_idle_end(cl->nodes[j].pl);
            return; /* something arrived: the caller drains again */
        }
        pfd[n++] = (struct pollfd){ .fd = peer_link_fd(pl), .events = POLLIN };
    }
    poll(pfd, n, wait_ms);
    n = 0;
    for (uint32_t i = 0; i < cl->n; i++) {
        struct peer_link *pl = cl->nodes[i].pl;
        if (pl == NULL)
            continue;
        peer_link_idle_end(pl);
        if (pfd[n++].revents & POLLIN)
            peer_link_ack(pl);
    }
}

typedef bool (*cond_fn)(struct cluster *cl, void *arg);

static void pump_until(struct cluster *cl, cond_fn cond, void *arg, const char *what)
{
    int64_t end = base_mono_ms() + DEADLINE_MS;
    while (!cond(cl, arg)) {
        if (base_mono_ms() > end) {
            for (uint32_t i = 0; i < cl->n; i++)
                cap_print(&cl->nodes[i].log, cl->nodes[i].host);
            fail_msg("timed out after %d ms waiting for %s", DEADLINE_MS, what);
        }
        pump(cl, 5);
    }
}

static struct peer_link_peer_status status_of(struct node *nd, uint32_t id)
{
    struct peer_link_peer_status st;
    assert_int_equal(peer_link_status(nd->pl, id, &st), 0);
    assert_int_equal(st.id, id);
    return st;
}

static bool link_is_up(struct node *a, struct node *b)
{
    return a->pl != NULL && b->pl != NULL && status_of(a, b->id).connected &&
           status_of(b, a->id).connected;
}

static bool all_up(struct cluster *cl, void *arg)
{
    (void)arg;
    for (uint32_t i = 0; i < cl->n; i++)
        for (uint32_t j = i + 1; j < cl->n; j++)
            if (!link_is_up(&cl->nodes[i], &cl->nodes[j]))
                return false;
    return true;
}

static bool got_at_least(struct cluster *cl, void *arg)
{
    size_t want = *(size_t *)arg;
    for (uint32_t i = 0; i < cl->n; i++)
        if (cl->nodes[i].pl != NULL && cl->nodes[i].n_got < want)
            return false;
    return true;
}

/* Pumps for ms more: anything extra (a duplicate) would arrive by then. */
static void pump_for(struct cluster *cl, int ms)
{
    int64_t end = base_mono_ms() + ms;
    while (base_mono_ms() < end)
        pump(cl, 5);
}

/* Sends gen(from, to, k) for k in [k0, k0 + n) from every node to every
 * other (the main thread is every node's one producer). */
static void send_all_pairs(struct cluster *cl, uint32_t k0, uint32_t n)
{
    struct gen g;
    for (uint32_t k = k0; k < k0 + n; k++)
        for (uint32_t s = 0; s < cl->n; s++)
            for (uint32_t d = 0; d < cl->n; d++) {
                if (s == d || cl->nodes[s].pl == NULL)
                    continue;
                gen_msg(&g, cl->nodes[s].id, cl->nodes[d].id, k);
                assert_int_equal(gen_send(cl->nodes[s].pl, &g), 0);
            }
    for (uint32_t s = 0; s < cl->n; s++)
        if (cl->nodes[s].pl != NULL)
            peer_link_flush(cl->nodes[s].pl);
}

/* Node d got exactly gen(s, d, k) for k in [k0, k0 + n) from each other s,
 * in order per sender, and nothing else. */
static void check_got_all_pairs(struct cluster *cl, uint32_t d, uint32_t k0, uint32_t n)
{
    struct node *nd = &cl->nodes[d];
    assert_int_equal(nd->n_got, (size_t)n * (cl->n - 1));
    for (uint32_t s = 0; s < cl->n; s++) {
        if (s == d)
            continue;
        uint32_t from = cl->nodes[s].id;
        uint32_t k = k0;
        for (size_t i = 0; i < nd->n_got; i++) {
            const struct got *g = &nd->got[i];
            if (g->from != from)
                continue;
            struct gen want;
            struct base_buf enc = { 0 };
            gen_msg(&want, from, nd->id, k);
            gen_encode(&want, &enc);
            assert_int_equal(g->kind, want.kind);
            if (g->kind == PEER_LINK_RX_RAFT) {
                assert_int_equal(g->raft_type, want.m.type);
                assert_int_equal(g->msg_from, from);
                assert_int_equal(g->msg_to, nd->id);
            }
            assert_int_equal(g->bytes.len, enc.len);
            assert_memory_equal(g->bytes.data, enc.data, enc.len);
            base_buf_free(&enc);
            k++;
        }
        assert_int_equal(k, k0 + n);
    }
}

/* ---- raw sockets: hostile clients and fake peers ------------------------------------ */

static struct sockaddr_in sockaddr_of(const char *host, uint16_t port)
{
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
    assert_int_equal(inet_pton(AF_INET, host, &sa.sin_addr), 1);
    return sa;
}

/* A blocking client from RAW_HOST; its own address ("127.0.0.9:port", as
 * the server's log names it) in name. */
static int raw_connect(const char *host, uint16_t port, char *name, size_t name_len)
{
    struct sockaddr_in me = sockaddr_of(RAW_HOST, 0);
    struct sockaddr_in to = sockaddr_of(host, port);
    socklen_t len = sizeof me;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&me, sizeof me), 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&to, sizeof to), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&me, &len), 0);
    snprintf(name, name_len, "%s:%u", RAW_HOST, (unsigned)ntohs(me.sin_port));
    return fd;
}

static int raw_listen(const char *host, uint16_t port, int backlog)
{
    struct sockaddr_in sa = sockaddr_of(host, port);
    int one = 1;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one), 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(listen(fd, backlog), 0);
    return fd;
}

static void raw_send(int fd, const void *p, size_t n)
{
    const uint8_t *b = p;
    while (n > 0) {
        ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
        assert_true(w > 0);
        b += w;
        n -= (size_t)w;
    }
}

/* Reads (and discards) until the other end closes: true if it did within
 * ms (EOF or ECONNRESET), false at the deadline. */
static bool raw_wait_closed(int fd, int ms)
{
    int64_t end = base_mono_ms() + ms;
    for (;;) {
        int64_t left = end - base_mono_ms();
        if (left <= 0)
            return false;
        struct pollfd pfd = { .fd = fd, .events = POLLIN };
        if (poll(&pfd, 1, (int)left) <= 0)
            continue;
        char buf[4096];
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n == 0 || (n < 0 && errno == ECONNRESET))
            return true;
        assert_true(n > 0 || errno == EINTR || errno == EAGAIN);
    }
}

/* Reads one whole frame into b (cleared first) within the deadline. */
static void raw_read_frame(int fd, struct base_buf *b)
{
    int64_t end = base_mono_ms() + DEADLINE_MS;
    size_t flen = 0;
    b->len = 0;
    while (peer_frame_split(b->data, b->len, &flen) != 1) {
        int64_t left = end - base_mono_ms();
        assert_true(left > 0);
        struct pollfd pfd = { .fd = fd, .events = POLLIN };
        if (poll(&pfd, 1, (int)left) <= 0)
            continue;
        uint8_t c;
        ssize_t n = recv(fd, &c, 1, 0); /* one byte at a time: never past the frame */
        assert_int_equal(n, 1);
        assert_int_equal(base_buf_append(b, &c, 1), 0);
    }
    assert_int_equal(flen, b->len);
}

static int accept_within(int lfd)
{
    struct pollfd pfd = { .fd = lfd, .events = POLLIN };
    assert_int_equal(poll(&pfd, 1, DEADLINE_MS), 1);
    int fd = accept(lfd, NULL, NULL);
    assert_true(fd >= 0);
    return fd;
}

static void hello_frame(struct base_buf *b, uint32_t from, uint32_t to, uint64_t cluster)
{
    struct peer_hello h = { PEER_VERSION_MAX, from, to, cluster };
    assert_int_equal(peer_encode_hello(b, &h), 0);
}

/* ---- 1. three links, every kind ----------------------------------------------------- */

static void test_three_links_every_kind(void **state)
{
    (void)state;
    struct cluster cl;
    struct peer_link_cfg cfg = base_cfg();
    const uint32_t n = 96; /* 12 of each of the 8 kinds per ordered pair */
    cluster_start(&cl, 3, 2, &cfg);
    pump_until(&cl, all_up, NULL, "three links up");
    /* exactly one link per pair: the higher id dialled, the lower accepted */
    for (uint32_t i = 0; i < 3; i++)
        for (uint32_t j = 0; j < 3; j++) {
            if (i == j)
                continue;
            struct peer_link_peer_status st = status_of(&cl.nodes[i], cl.nodes[j].id);
            assert_int_equal(st.dials, cl.nodes[i].id > cl.nodes[j].id);
            assert_int_equal(st.ups, 1);
            assert_int_equal(st.reconnects, 0);
            assert_int_equal(st.connects, st.dials ? 1 : 0);
            assert_true(st.up_since_ms > 0);
        }
    send_all_pairs(&cl, 0, n);
    size_t want = 2 * (size_t)n;
    pump_until(&cl, got_at_least, &want, "every message at every server");
    pump_for(&cl, 100);
    for (uint32_t d = 0; d < 3; d++)
        check_got_all_pairs(&cl, d, 0, n);
    for (uint32_t i = 0; i < 3; i++)
        for (uint32_t j = 0; j < 3; j++) {
            if (i == j)
                continue;
            struct peer_link_peer_status st = status_of(&cl.nodes[i], cl.nodes[j].id);
            assert_int_equal(st.frames_out, n);
            assert_int_equal(st.frames_in, n);
            assert_int_equal(st.dropped_no_link + st.dropped_full + st.decode_errors, 0);
            assert_int_equal(st.out_queued_bytes, 0);
            assert_int_equal(st.bytes_in, status_of(&cl.nodes[j], cl.nodes[i].id).bytes_out);
        }
    /* EDEST: self and ids no server has are no destination; a server that
     * is not a member is dropped as if its link were down */
    struct gen g;
    gen_msg(&g, 1, 1, 0);
    assert_int_equal(peer_link_send_msg(cl.nodes[0].pl, &g.m), PEER_LINK_EDEST);
    assert_int_equal(peer_link_send_touch(cl.nodes[0].pl, 0, NULL, 0), PEER_LINK_EDEST);
    assert_int_equal(peer_link_send_touch(cl.nodes[0].pl, 256, NULL, 0), PEER_LINK_EDEST);
    assert_int_equal(peer_link_send_touch(cl.nodes[0].pl, 9, NULL, 0), PEER_LINK_ENOLINK);
    struct peer_link_peer_status st;
    assert_int_equal(peer_link_status(cl.nodes[0].pl, 1, &st), -ENOENT);
    assert_int_equal(peer_link_status(cl.nodes[0].pl, 300, &st), -ENOENT);
    cluster_free(&cl);
}

/* ---- 2. a large snapshot ------------------------------------------------------------ */

static void fill_pattern(uint8_t *p, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(base_splitmix64(&seed) >> 56);
}

static void test_large_snapshot(void **state)
{
    (void)state;
    struct cluster cl;
    struct peer_link_cfg cfg = base_cfg();
    const size_t snap_len = (size_t)5 << 20, chunk = (size_t)256 << 10;
    cfg.chunk_bytes = chunk;
    cfg.snap_bytes_max = (uint64_t)8 << 20;
    cluster_start(&cl, 2, 2, &cfg);
    pump_until(&cl, all_up, NULL, "link up");
    uint8_t *snap = malloc(snap_len);
    assert_non_null(snap);
    fill_pattern(snap, snap_len, 7);
    /* the membership at the snapshot: 1 and 2 joined by 3, with the text */
    struct raft_config conf = { .n_members = 3, .n_old = 2, .extra_len = 5 };
    for (uint32_t i = 0; i < 3; i++)
        conf.members[i] = (struct raft_member){ i + 1, i < 2 };
    conf.old[0] = (struct raft_member){ 1, true };
    conf.old[1] = (struct raft_member){ 2, true };
    memcpy(conf.extra, "lines", 5);
    uint8_t conf_bytes[RAFT_CONFIG_BYTES_MAX];
    size_t conf_len = raft_config_encode(&conf, conf_bytes);
    struct raft_msg m = { .type = RAFT_MSG_SNAP, .from = 2, .to = 1, .term = 9,
                          .snap_zxid = raft_make_zxid(9, 1234), .snap_data = snap,
                          .snap_len = snap_len, .snap_config = &conf };
    struct raft_msg empty = { .type = RAFT_MSG_SNAP, .to = 1, .term = 9,
                              .snap_zxid = raft_make_zxid(9, 1300) };
    struct raft_msg big = m;
    big.snap_len = (size_t)cfg.snap_bytes_max + 1; /* refused before anything is read */
    struct gen g;
    gen_msg(&g, 2, 1, 0);
    assert_int_equal(peer_link_send_msg(cl.nodes[1].pl, &m), 0);
    assert_int_equal(peer_link_send_msg(cl.nodes[1].pl, &g.m), 0);
    assert_int_equal(peer_link_send_msg(cl.nodes[1].pl, &empty), 0);
    assert_int_equal(peer_link_send_msg(cl.nodes[1].pl, &big), PEER_ESNAP_BOUND);
    peer_link_flush(cl.nodes[1].pl);
    size_t want = 3;
    struct node *r = &cl.nodes[0]; /* only server 1 receives */
    int64_t end = base_mono_ms() + DEADLINE_MS;
    while (r->n_got < want) {
        assert_true(base_mono_ms() < end);
        pump(&cl, 5);
    }
    pump_for(&cl, 50);
    assert_int_equal(r->n_got, 3);
    assert_int_equal(r->got[0].kind, PEER_LINK_RX_RAFT);
    assert_int_equal(r->got[0].raft_type, RAFT_MSG_SNAP);
    assert_int_equal(r->got[0].from, 2);
    assert_int_equal(r->got[0].msg_from, 2);
    assert_int_equal(r->got[0].msg_to, 1);
    assert_int_equal(r->got[0].term, 9);
    assert_int_equal(r->got[0].snap_zxid, raft_make_zxid(9, 1234));
    assert_int_equal(r->got[0].bytes.len, snap_len);
    assert_memory_equal(r->got[0].bytes.data, snap, snap_len);
    assert_true(r->got[0].has_config);
    assert_int_equal(r->got[0].config.len, conf_len);
    assert_memory_equal(r->got[0].config.data, conf_bytes, conf_len);
    assert_false(r->got[2].has_config); /* sent without one */
    assert_int_equal(r->got[1].raft_type, RAFT_MSG_VOTE_REQ); /* in order after it */
    assert_int_equal(r->got[2].raft_type, RAFT_MSG_SNAP);
    assert_int_equal(r->got[2].snap_zxid, raft_make_zxid(9, 1300));
    assert_int_equal(r->got[2].bytes.len, 0);
    /* 20 chunks + the vote + the empty snapshot's one chunk */
    assert_int_equal(status_of(r, 2).frames_in, snap_len / chunk + 2);
    assert_int_equal(status_of(&cl.nodes[1], 1).frames_out, snap_len / chunk + 2);
    struct peer_link_stats ls;
    peer_link_stats(r->pl, &ls);
    assert_int_equal(ls.in_queued_bytes, 0);
    free(snap);
    cluster_free(&cl);
}

/* ---- 3. reconnect ------------------------------------------------------------------- */

/* A new instance of node i on its old address, retrying while the port is
 * still held (bounded). */
static void node_restart(struct cluster *cl, uint32_t i)
{
    struct node *nd = &cl->nodes[i];
    char err[256];
    int64_t end = base_mono_ms() + DEADLINE_MS;
    cap_init(&nd->log);
    node_cfg(cl, i);
    while ((nd->pl = peer_link_new(&nd->cfg, err, sizeof err)) == NULL) {
        assert_non_null(strstr(err, strerror(EADDRINUSE)));
        assert_true(base_mono_ms() < end);
        poll(NULL, 0, 20);
    }
    assert_int_equal(peer_link_start(nd->pl), 0);
}

static bool down_at_others(struct cluster *cl, void *arg)
{
    uint32_t id = *(uint32_t *)arg;
    for (uint32_t i = 0; i < cl->n; i++)
        if (cl->nodes[i].pl != NULL && cl->nodes[i].id != id &&
            status_of(&cl->nodes[i], id).connected)
            return false;
    return true;
}

static void test_reconnect(void **state)
{
    (void)state;
    struct cluster cl;
    struct peer_link_cfg cfg = base_cfg();
    cfg.backoff_max_ms = 300;
    cluster_start(&cl, 3, 2, &cfg);
    pump_until(&cl, all_up, NULL, "three links up");
    send_all_pairs(&cl, 0, 16);
    size_t want = 32;
    pump_until(&cl, got_at_least, &want, "the first round");
    for (uint32_t d = 0; d < 3; d++)
        check_got_all_pairs(&cl, d, 0, 16);

    /* server 2 goes away: its links drop, sends to it are dropped and counted */
    node_free(&cl.nodes[1]);
    uint32_t gone = 2;
    pump_until(&cl, down_at_others, &gone, "the links to server 2 to drop");
    struct gen g;
    for (uint32_t k = 0; k < 10; k++) {
        gen_msg(&g, 1, 2, k);
        assert_int_equal(gen_send(cl.nodes[0].pl, &g), PEER_LINK_ENOLINK);
        gen_msg(&g, 3, 2, k);
        assert_int_equal(gen_send(cl.nodes[2].pl, &g), PEER_LINK_ENOLINK);
    }
    for (uint32_t i = 0; i < 3; i += 2) {
        struct peer_link_peer_status st = status_of(&cl.nodes[i], 2);
        assert_int_equal(st.dropped_no_link, 10);
        assert_int_equal(st.out_queued_bytes, 0);
        assert_int_not_equal(st.state, PEER_LINK_UP);
        assert_int_not_equal(st.last_err, 0);
    }

    /* a new server 2 on the same address: both links come back */
    int64_t t0 = base_mono_ms();
    node_restart(&cl, 1);
    pump_until(&cl, all_up, NULL, "the links to the new server 2");
    int64_t took = base_mono_ms() - t0;
    /* 3 dials 2 within its backoff bound; 2 dials 1 at once. Slack for slow
     * sanitizer builds; the deadline above is what fails a hang. */
    assert_true(took <= (int64_t)cfg.backoff_max_ms + 3000);
    assert_int_equal(status_of(&cl.nodes[2], 2).reconnects, 1);
    assert_int_equal(status_of(&cl.nodes[0], 2).reconnects, 1);
    assert_int_equal(status_of(&cl.nodes[1], 1).ups, 1);

    /* messages flow both ways again; the new server saw none of the dropped ones */
    for (uint32_t i = 0; i < 3; i++)
        node_forget(&cl.nodes[i]);
    send_all_pairs(&cl, 100, 24);
    want = 48;
    pump_until(&cl, got_at_least, &want, "the round after the restart");
    pump_for(&cl, 50);
    for (uint32_t d = 0; d < 3; d++)
        check_got_all_pairs(&cl, d, 100, 24);
    cluster_free(&cl);
}

/* ---- 4. hostile bytes --------------------------------------------------------------- */

struct hostile {
    const char *what;
    struct base_buf bytes;
    const char *reason; /* in the server's log line; NULL: any */
};

/* Sends h's bytes to node nd from a raw client, expects the server to
 * close the connection and log one line naming the client and the reason. */
static void expect_refused(struct cluster *cl, struct node *nd, struct hostile *h)
{
    char name[64];
    uint16_t port = 0;
    for (uint32_t i = 0; i < cl->n; i++)
        if (cl->members[i].id == nd->id)
            port = cl->members[i].port;
    int fd = raw_connect(nd->host, port, name, sizeof name);
    if (h->bytes.len > 0)
        raw_send(fd, h->bytes.data, h->bytes.len);
    if (!raw_wait_closed(fd, DEADLINE_MS))
        fail_msg("%s: the server did not close the connection", h->what);
    close(fd);
    int64_t end = base_mono_ms() + DEADLINE_MS;
    while (cap_count(&nd->log, name, h->reason) == 0) {
        if (base_mono_ms() > end) {
            cap_print(&nd->log, nd->host);
            fail_msg("%s: no log line names %s and \"%s\"", h->what, name,
                     h->reason ? h->reason : "");
        }
        pump(cl, 5);
    }
    assert_int_equal(cap_count(&nd->log, name, NULL), 1);
    base_buf_free(&h->bytes);
}

/* What a stranger may send server 2 (a member of 1, 2, 3), and the reason
 * it must be refused with: (a) garbage, (b) a bad CRC, (c) HELLOs for the
 * wrong cluster / target / from a non-member / from a lower id, (d) a
 * length over the maximum, a frame too long to be a HELLO, (e) a raft
 * frame before HELLO, and nothing at all. Returns the count (at most 12). */
static int hostile_cases(struct hostile *h)
{
    int nh = 0;
    h[nh] = (struct hostile){ .what = "garbage" };
    uint8_t junk[200];
    fill_pattern(junk, sizeof junk, 99);
    junk[0] = 0; /* a small length, so the bytes are read and checked, not refused on size */
    junk[1] = 0;
    junk[2] = 0;
    junk[3] = 100;
    assert_int_equal(base_buf_append(&h[nh].bytes, junk, sizeof junk), 0);
    h[nh++].reason = peer_strerror(PEER_ECRC);

    h[nh] = (struct hostile){ .what = "bad CRC", .reason = peer_strerror(PEER_ECRC) };
    hello_frame(&h[nh].bytes, 3, 2, CLUSTER);
    h[nh++].bytes.data[5] ^= 0x40;

    h[nh] = (struct hostile){ .what = "wrong cluster",
                              .reason = peer_strerror(PEER_EWRONG_CLUSTER) };
    hello_frame(&h[nh++].bytes, 3, 2, CLUSTER + 1);
    h[nh] = (struct hostile){ .what = "wrong target",
                              .reason = peer_strerror(PEER_EWRONG_SERVER) };
    hello_frame(&h[nh++].bytes, 3, 5, CLUSTER);
    h[nh] = (struct hostile){ .what = "non-member",
                              .reason = peer_link_strerror(PEER_LINK_ENOTMEMBER) };
    hello_frame(&h[nh++].bytes, 9, 2, CLUSTER);
    h[nh] = (struct hostile){ .what = "lower id", .reason = peer_link_strerror(PEER_LINK_ELOWER) };
    hello_frame(&h[nh++].bytes, 1, 2, CLUSTER);

    h[nh] = (struct hostile){ .what = "oversized header", .reason = peer_strerror(PEER_ETOOBIG) };
    uint8_t hdr[PEER_FRAME_HEADER_BYTES] = { 0 };
    base_put_be32(hdr, PEER_FRAME_BYTES_MAX + 1);
    assert_int_equal(base_buf_append(&h[nh++].bytes, hdr, sizeof hdr), 0);

    h[nh] = (struct hostile){ .what = "long frame before HELLO",
                              .reason = peer_link_strerror(PEER_LINK_ENOHELLO) };
    base_put_be32(hdr, 1u << 20); /* legal size, but not a HELLO's: refused unread */
    assert_int_equal(base_buf_append(&h[nh++].bytes, hdr, sizeof hdr), 0);

    h[nh] = (struct hostile){ .what = "raft before HELLO",
                              .reason = peer_link_strerror(PEER_LINK_ENOHELLO) };
    struct raft_msg vote = { .type = RAFT_MSG_VOTE_REQ, .term = 3, .last_zxid = 5 };
    assert_int_equal(peer_encode_msg(&h[nh++].bytes, &vote), 0);

    h[nh++] = (struct hostile){ .what = "silent client",
                                .reason = peer_link_strerror(PEER_LINK_ETIMEDOUT) };
    return nh;
}

static void test_hostile_bytes(void **state)
{
    (void)state;
    struct cluster cl;
    struct peer_link_cfg cfg = base_cfg();
    cfg.connect_timeout_ms = 300; /* the silent client's wait */
    cluster_start(&cl, 3, 2, &cfg);
    pump_until(&cl, all_up, NULL, "three links up");
    struct node *target = &cl.nodes[1]; /* server 2: one lower member, one higher */
    struct hostile h[12] = { 0 };
    int nh = hostile_cases(h);
    for (int i = 0; i < nh; i++)
        expect_refused(&cl, target, &h[i]);
    struct peer_link_stats ls;
    peer_link_stats(target->pl, &ls);
    assert_int_equal(ls.rejected, (uint64_t)nh);

    /* the real links were never touched, and still carry traffic */
    for (uint32_t i = 0; i < 3; i++)
        for (uint32_t j = 0; j < 3; j++)
            if (i != j) {
                struct peer_link_peer_status st = status_of(&cl.nodes[i], cl.nodes[j].id);
                assert_int_equal(st.ups, 1);
                assert_int_equal(st.decode_errors, 0);
            }
    send_all_pairs(&cl, 0, 16);
    size_t want = 32;
    pump_until(&cl, got_at_least, &want, "traffic after the hostile clients");
    pump_for(&cl, 50);
    for (uint32_t d = 0; d < 3; d++)
        check_got_all_pairs(&cl, d, 0, 16);
    cluster_free(&cl);
}

/* The real server ids[0] has dialled ids[1] again since its link was
 * replaced, and every link is up: only then is "up" the real link. */
static bool redialled(struct cluster *cl, void *arg)
{
    const uint32_t *ids = arg;
    return status_of(&cl->nodes[ids[0] - 1], ids[1]).ups >= 2 && all_up(cl, NULL);
}

/* A client that says it is server 3 (HELLO is not authentication): the
 * server answers with its own HELLO and replaces server 3's link; a second
 * HELLO closes it; the real server 3 then dials back in. */
static void test_impostor_replaces_and_second_hello(void **state)
{
    (void)state;
    struct cluster cl;
    struct peer_link_cfg cfg = base_cfg();
    cluster_start(&cl, 3, 2, &cfg);
    pump_until(&cl, all_up, NULL, "three links up");
    struct node *target = &cl.nodes[1];
    char name[64];
    struct base_buf b = { 0 };
    struct peer_frame f = { 0 };

    int fd = raw_connect(target->host, cl.members[1].port, name, sizeof name);
    hello_frame(&b, 3, 2, CLUSTER);
    raw_send(fd, b.data, b.len);
    raw_read_frame(fd, &b);
    assert_int_equal(peer_decode(b.data, b.len, &f), 0);
    assert_int_equal(f.type, PEER_HELLO);
    assert_int_equal(f.hello.from, 2);
    assert_int_equal(f.hello.to, 3);
    assert_int_equal(f.hello.cluster_id, CLUSTER);
    assert_int_equal(f.hello.version, PEER_VERSION_MAX);
    b.len = 0;
    hello_frame(&b, 3, 2, CLUSTER); /* a second HELLO: refused (unless the real server 3
                                     * has replaced us already: closed either way) */
    send(fd, b.data, b.len, MSG_NOSIGNAL);
    assert_true(raw_wait_closed(fd, DEADLINE_MS));
    close(fd);
    uint32_t ids[2] = { 3, 2 };
    pump_until(&cl, redialled, ids, "server 3 back after the impostor");
    assert_true(cap_count(&target->log, "server 3",
                          peer_link_strerror(PEER_LINK_EREPLACED)) >= 1);
    struct peer_link_peer_status st = status_of(target, 3);
    assert_true(st.ups >= 3); /* real, impostor, real again */
    assert_int_equal(st.reconnects, st.ups - 1);
    assert_true(status_of(&cl.nodes[2], 2).reconnects >= 1);

    send_all_pairs(&cl, 0, 16);
    size_t want = 32;
    pump_until(&cl, got_at_least, &want, "traffic after the impostor");
    pump_for(&cl, 50);
    for (uint32_t d = 0; d < 3; d++)
        check_got_all_pairs(&cl, d, 0, 16);
    peer_frame_free(&f);
    base_buf_free(&b);
    cluster_free(&cl);
}

/* A second HELLO in the same segment as the first: it is the second frame
 * the server parses, so the reason is deterministic. */
static void test_second_hello_same_read(void **state)
{
    (void)state;
    struct cluster cl;
    struct peer_link_cfg cfg = base_cfg();
    cluster_start(&cl, 2, 5, &cfg);
    pump_until(&cl, all_up, NULL, "link up");
    /* one member server 1 at 127.0.0.5; the impostor claims to be server 2 */
    struct node *target = &cl.nodes[0];
    char name[64];
    struct base_buf b = { 0 };
    int fd = raw_connect(target->host, cl.members[0].port, name, sizeof name);
    hello_frame(&b, 2, 1, CLUSTER);
    hello_frame(&b, 2, 1, CLUSTER);
    raw_send(fd, b.data, b.len);
    assert_true(raw_wait_closed(fd, DEADLINE_MS));
    close(fd);
    uint32_t ids[2] = { 2, 1 };
    pump_until(&cl, redialled, ids, "server 2 back after the impostor");
    int64_t end = base_mono_ms() + DEADLINE_MS;
    while (cap_count(&target->log, "server 2",
                     peer_link_strerror(PEER_LINK_EHELLO_AGAIN)) != 1) {
        assert_true(base_mono_ms() < end);
        pump(&cl, 5);
    }
    assert_int_equal(status_of(target, 2).decode_errors, 1);
    base_buf_free(&b);
    cluster_free(&cl);
}

/* ---- 5. bounded output -------------------------------------------------------------- */

static bool connects_at_least(struct cluster *cl, void *arg)
{
    return status_of(&cl->nodes[0], 1).connects >= *(uint64_t *)arg;
}

static bool peer1_up(struct cluster *cl, void *arg)
{
    (void)arg;
    return status_of(&cl->nodes[0], 1).connected;
}

static bool peer1_down_and_empty(struct cluster *cl, void *arg)
{
    (void)arg;
    struct peer_link_peer_status st = status_of(&cl->nodes[0], 1);
    return !st.connected && st.out_queued_bytes == 0;
}

/* Server 2 alone, with server 1 at a fake address this test controls. */
static void start_lone_server2(struct cluster *cl, const struct peer_link_cfg *cfg,
                               uint16_t fake_port)
{
    char err[256];
    memset(cl, 0, sizeof *cl);
    cl->n = 1; /* only node 0 (server 2) is a real link; member 1 is the fake */
    cl->tmpl = *cfg;
    struct node *nd = &cl->nodes[0];
    nd->id = 2;
    snprintf(nd->host, sizeof nd->host, "127.0.0.7");
    cap_init(&nd->log);
    cl->members[0] = (struct peer_link_member){ .id = 2, .host = nd->host, .port = 0 };
    cl->members[1] = (struct peer_link_member){ .id = 1, .host = "127.0.0.8", .port = fake_port };
    for (int attempt = 0; nd->pl == NULL; attempt++) {
        assert_true(attempt < 10);
        cl->members[0].port = free_port(nd->host);
        node_cfg(cl, 0);
        nd->cfg.n_members = 2;
        nd->pl = peer_link_new(&nd->cfg, err, sizeof err);
    }
    assert_int_equal(peer_link_start(nd->pl), 0);
}

/* The fake server 1 answers server 2's HELLO, then reads nothing. */
static int fake_peer_accept(int lfd)
{
    struct base_buf b = { 0 };
    struct peer_frame f = { 0 };
    int fd = accept_within(lfd);
    raw_read_frame(fd, &b);
    assert_int_equal(peer_decode(b.data, b.len, &f), 0);
    assert_int_equal(f.type, PEER_HELLO);
    assert_int_equal(f.hello.from, 2);
    assert_int_equal(f.hello.to, 1);
    b.len = 0;
    hello_frame(&b, 1, 2, CLUSTER);
    raw_send(fd, b.data, b.len);
    peer_frame_free(&f);
    base_buf_free(&b);
    return fd;
}

static void test_bounded_output(void **state)
{
    (void)state;
    struct cluster cl;
    struct peer_link_cfg cfg = base_cfg();
    cfg.out_bytes_max = (size_t)1 << 20;
    uint16_t fake_port = free_port("127.0.0.8");
    start_lone_server2(&cl, &cfg, fake_port);
    struct node *nd = &cl.nodes[0];

    /* nobody listens: every send is dropped (no link), nothing is queued,
     * and the failing dials are logged once, not once per retry */
    uint64_t three = 3;
    pump_until(&cl, connects_at_least, &three, "three connect attempts");
    struct gen g;
    for (uint32_t k = 0; k < 5000; k++) {
        gen_msg(&g, 2, 1, k);
        assert_int_equal(gen_send(nd->pl, &g), PEER_LINK_ENOLINK);
    }
    peer_link_flush(nd->pl);
    struct peer_link_peer_status st = status_of(nd, 1);
    assert_int_equal(st.dropped_no_link, 5000);
    assert_int_equal(st.out_queued_bytes, 0);
    assert_int_equal(st.last_err, -ECONNREFUSED);
    assert_int_equal(cap_count(&nd->log, "cannot connect", strerror(ECONNREFUSED)), 1);

    /* a peer that stops reading: the queue stops at out_bytes_max */
    int lfd = raw_listen("127.0.0.8", fake_port, 4);
    int fd = fake_peer_accept(lfd);
    pump_until(&cl, peer1_up, NULL, "the link to the fake server 1");
    static uint8_t body[64 << 10];
    struct peer_forward fw = { .session_id = 5, .cxid = 1, .op = 1, .body = body,
                               .body_len = sizeof body };
    uint64_t ok = 0, full = 0;
    for (uint32_t k = 0; k < 2000; k++) {
        fw.cxid = (int32_t)k;
        int rc = peer_link_send_forward(nd->pl, 1, &fw);
        assert_true(rc == 0 || rc == PEER_LINK_EFULL);
        ok += rc == 0;
        full += rc == PEER_LINK_EFULL;
        peer_link_flush(nd->pl);
        assert_true(status_of(nd, 1).out_queued_bytes <= cfg.out_bytes_max);
    }
    st = status_of(nd, 1);
    assert_true(full > 0);
    assert_int_equal(st.dropped_full, full);
    assert_int_equal(ok + full, 2000);

    /* the fake goes away: what was queued is dropped, every frame accounted */
    close(fd);
    close(lfd);
    pump_until(&cl, peer1_down_and_empty, NULL, "the queue to empty after the link drops");
    st = status_of(nd, 1);
    assert_int_equal(st.frames_out + (st.dropped_no_link - 5000), ok);
    cluster_free(&cl);
}

/* ---- inbound backpressure ------------------------------------------------------------ */

static bool paused_and_full(struct cluster *cl, void *arg)
{
    struct peer_link_stats ls;
    peer_link_stats(cl->nodes[0].pl, &ls);
    return ls.in_paused >= 1 && ls.in_queued_bytes >= *(size_t *)arg;
}

static void test_inbound_backpressure(void **state)
{
    (void)state;
    struct cluster cl;
    struct peer_link_cfg cfg = base_cfg();
    const size_t max = (size_t)64 << 10;
    const uint32_t n = 2000;
    cfg.in_bytes_max = max;
    cluster_start(&cl, 2, 3, &cfg);
    pump_until(&cl, all_up, NULL, "link up");
    static uint8_t body[1000];
    struct peer_forward fw = { .session_id = 77, .op = 1, .body = body, .body_len = sizeof body };
    for (uint32_t k = 0; k < n; k++) {
        fw.cxid = (int32_t)k;
        body[0] = (uint8_t)k;
        assert_int_equal(peer_link_send_forward(cl.nodes[1].pl, 1, &fw), 0);
    }
    peer_link_flush(cl.nodes[1].pl);

    /* nobody drains: server 1 stops reading at its bound */
    int64_t end = base_mono_ms() + DEADLINE_MS;
    size_t want = max;
    while (!paused_and_full(&cl, &want)) {
        assert_true(base_mono_ms() < end);
        io_only_for(&cl, 5);
    }
    io_only_for(&cl, 100);
    struct peer_link_stats ls;
    peer_link_stats(cl.nodes[0].pl, &ls);
    /* one read (64 KiB) of whole frames past the bound at most */
    assert_true(ls.in_queued_bytes <= max + ((size_t)64 << 10) + 2 * sizeof body);
    assert_true(status_of(&cl.nodes[0], 2).frames_in < n);

    /* draining restarts reading; everything arrives, in order, once */
    size_t all = n;
    end = base_mono_ms() + DEADLINE_MS;
    while (cl.nodes[0].n_got < all) {
        assert_true(base_mono_ms() < end);
        pump(&cl, 5);
    }
    pump_for(&cl, 50);
    assert_int_equal(cl.nodes[0].n_got, n);
    for (uint32_t k = 0; k < n; k++) {
        struct base_buf enc = { 0 };
        fw.cxid = (int32_t)k;
        body[0] = (uint8_t)k;
        assert_int_equal(peer_encode_forward(&enc, &fw), 0);
        assert_int_equal(cl.nodes[0].got[k].kind, PEER_LINK_RX_FORWARD);
        assert_int_equal(cl.nodes[0].got[k].bytes.len, enc.len);
        assert_memory_equal(cl.nodes[0].got[k].bytes.data, enc.data, enc.len);
        base_buf_free(&enc);
    }
    peer_link_stats(cl.nodes[0].pl, &ls);
    assert_int_equal(ls.in_queued_bytes, 0);
    cluster_free(&cl);
}

/* ---- 6. stop, config errors --------------------------------------------------------- */

static int64_t timed_stop(struct peer_link *pl)
{
    int64_t t0 = base_mono_ms();
    peer_link_stop(pl);
    return base_mono_ms() - t0;
}

static void test_stop_with_links_up(void **state)
{
    (void)state;
    struct cluster cl;
    struct peer_link_cfg cfg = base_cfg();
    cluster_start(&cl, 3, 2, &cfg);
    pump_until(&cl, all_up, NULL, "three links up");
    send_all_pairs(&cl, 0, 8); /* some of it may still be queued */
    for (uint32_t i = 0; i < 3; i++) {
        int64_t ms = timed_stop(cl.nodes[i].pl);
        assert_true(ms < 2000);
        peer_link_stop(cl.nodes[i].pl); /* twice is fine */
    }
    struct gen g;
    gen_msg(&g, 1, 2, 0);
    assert_int_equal(peer_link_send_msg(cl.nodes[0].pl, &g.m), PEER_LINK_ENOLINK);
    cluster_free(&cl); /* frees what was queued both ways */
}

static bool connect_pending(struct cluster *cl, void *arg)
{
    (void)arg;
    struct peer_link_peer_status st = status_of(&cl->nodes[0], 1);
    return st.state == PEER_LINK_CONNECTING || st.state == PEER_LINK_HELLO;
}

static bool timed_out(struct cluster *cl, void *arg)
{
    (void)arg;
    return status_of(&cl->nodes[0], 1).last_err == PEER_LINK_ETIMEDOUT;
}

/* Server 1 is a listener that never accepts, its backlog filled: server
 * 2's connect (or HELLO) hangs. Stop must not wait for it; with a short
 * timeout it is given up. */
static void test_stop_with_connect_pending(void **state)
{
    (void)state;
    uint16_t port = free_port("127.0.0.8");
    int lfd = raw_listen("127.0.0.8", port, 0);
    int fill[2];
    for (int i = 0; i < 2; i++) {
        fill[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        struct sockaddr_in sa = sockaddr_of("127.0.0.8", port);
        connect(fill[i], (struct sockaddr *)&sa, sizeof sa);
    }
    struct cluster cl;
    struct peer_link_cfg cfg = base_cfg();
    cfg.connect_timeout_ms = 5000;
    start_lone_server2(&cl, &cfg, port);
    pump_until(&cl, connect_pending, NULL, "a pending connect");
    assert_true(timed_stop(cl.nodes[0].pl) < 2000);
    assert_false(status_of(&cl.nodes[0], 1).connected);
    cluster_free(&cl);

    cfg.connect_timeout_ms = 150;
    start_lone_server2(&cl, &cfg, port);
    pump_until(&cl, timed_out, NULL, "the connect timeout");
    assert_true(cap_count(&cl.nodes[0].log, "server 1",
                          peer_link_strerror(PEER_LINK_ETIMEDOUT)) >= 1);
    assert_true(timed_stop(cl.nodes[0].pl) < 2000);
    cluster_free(&cl);
    for (int i = 0; i < 2; i++)
        close(fill[i]);
    close(lfd);
}

static void test_lifecycle_without_peers(void **state)
{
    (void)state;
    struct logcap log;
    cap_init(&log);
    char err[256];
    struct peer_link_member self = { .id = 1, .host = "127.0.0.6",
                                     .port = free_port("127.0.0.6") };
    struct peer_link_cfg cfg = base_cfg();
    cfg.self_id = 1;
    cfg.members = &self;
    cfg.n_members = 1;
    cfg.log = cap_log;
    cfg.log_arg = &log;
    struct peer_link *pl = peer_link_new(&cfg, err, sizeof err);
    assert_non_null(pl);
    assert_int_equal(peer_link_start(pl), 0);
    assert_true(timed_stop(pl) < 2000);
    peer_link_free(pl);
    pl = peer_link_new(&cfg, err, sizeof err); /* never started */
    assert_non_null(pl);
    peer_link_free(pl);
    pl = peer_link_new(&cfg, err, sizeof err);
    assert_non_null(pl);
    peer_link_stop(pl);
    peer_link_stop(pl);
    peer_link_free(pl);
    peer_link_free(NULL);
    assert_int_equal(cap_count(&log, "", NULL), 0); /* nothing worth a line happened */
    cap_free(&log);
}

static void test_port_taken(void **state)
{
    (void)state;
    struct logcap log;
    cap_init(&log);
    uint16_t port = free_port("127.0.0.6");
    int lfd = raw_listen("127.0.0.6", port, 4);
    struct peer_link_member m[2] = { { .id = 1, .host = "127.0.0.6", .port = port },
                                     { .id = 2, .host = "127.0.0.7", .port = 9 } };
    struct peer_link_cfg cfg = base_cfg();
    cfg.self_id = 1;
    cfg.members = m;
    cfg.n_members = 2;
    cfg.log = cap_log;
    cfg.log_arg = &log;
    char err[256] = "";
    char want[64];
    snprintf(want, sizeof want, "127.0.0.6:%u", (unsigned)port);
    assert_null(peer_link_new(&cfg, err, sizeof err));
    assert_non_null(strstr(err, want));
    assert_non_null(strstr(err, strerror(EADDRINUSE)));
    assert_int_equal(cap_count(&log, want, strerror(EADDRINUSE)), 1);
    close(lfd);
    cap_free(&log);
}

static void expect_bad_cfg(const struct peer_link_cfg *cfg, const char *words)
{
    char err[256] = "";
    struct peer_link *pl = peer_link_new(cfg, err, sizeof err);
    if (pl != NULL) {
        peer_link_free(pl);
        fail_msg("accepted a config that should fail with \"%s\"", words);
    }
    if (strstr(err, words) == NULL)
        fail_msg("error \"%s\" does not say \"%s\"", err, words);
}

static void test_bad_configs(void **state)
{
    (void)state;
    struct logcap log;
    cap_init(&log);
    struct peer_link_member m[3] = { { .id = 1, .host = "127.0.0.6", .port = 2888 },
                                     { .id = 2, .host = "127.0.0.7", .port = 2888 },
                                     { .id = 3, .host = "::1", .port = 2888 } };
    struct peer_link_cfg cfg = base_cfg();
    cfg.self_id = 1;
    cfg.members = m;
    cfg.n_members = 3;
    cfg.log = cap_log;
    cfg.log_arg = &log;
    struct peer_link_cfg c = cfg;
    c.self_id = 4;
    expect_bad_cfg(&c, "not a member");
    c = cfg;
    c.n_members = 0;
    expect_bad_cfg(&c, "members");
    m[1].id = 1;
    expect_bad_cfg(&cfg, "listed twice");
    m[1].id = 0;
    expect_bad_cfg(&cfg, "outside 1..255");
    m[1].id = 256;
    expect_bad_cfg(&cfg, "outside 1..255");
    m[1].id = 2;
    m[1].host = "localhost";
    expect_bad_cfg(&cfg, "not an IPv4 or IPv6 literal");
    m[1].host = NULL;
    expect_bad_cfg(&cfg, "not an IPv4 or IPv6 literal");
    m[1].host = "127.0.0.7";
    m[1].port = 0;
    expect_bad_cfg(&cfg, "port 0");
    m[1].port = 2888;
    m[2].host = "127.0.0.7";
    expect_bad_cfg(&cfg, "share the address 127.0.0.7:2888");
    m[2].host = "::1";
    c = cfg;
    c.backoff_min_ms = 500;
    c.backoff_max_ms = 100;
    expect_bad_cfg(&c, "backoff_min_ms");
    /* and the same config, fixed, is fine (an IPv6 member included; it is never dialled:
     * its id is higher, and this link never starts) */
    m[0].port = free_port("127.0.0.6");
    char err[256];
    struct peer_link *pl = peer_link_new(&cfg, err, sizeof err);
    assert_non_null(pl);
    peer_link_free(pl);
    assert_int_equal(cap_count(&log, "", NULL), 10); /* one line per refusal */
    cap_free(&log);
}

/* ---- 7. the consumer's wake-up: ping-pong -------------------------------------------- */

#define PINGS 4000u /* messages in all: 2,000 round trips */

struct pinger {
    struct peer_link *pl;
    uint32_t self, other;
    uint32_t next;        /* the value expected next */
    uint32_t last;        /* the last value this side receives or sends */
    uint32_t bad;         /* values out of sequence */
    uint32_t sleeps;      /* times it blocked in poll */
    uint32_t lost;        /* polls that timed out: a lost wake-up */
    bool done;
};

static atomic_uint notified; /* cfg.notify calls, both links */

static void ping(struct pinger *p, uint32_t v)
{
    struct raft_msg m = { .type = RAFT_MSG_READ_INDEX, .to = p->other, .term = 1, .read_ctx = v };
    if (peer_link_send_msg(p->pl, &m) != 0)
        p->bad++;
    peer_link_flush(p->pl);
}

static void on_ping(void *arg, const struct peer_link_rx *rx)
{
    struct pinger *p = arg;
    if (rx->kind != PEER_LINK_RX_RAFT || rx->msg.type != RAFT_MSG_READ_INDEX ||
        rx->from != p->other || rx->msg.read_ctx != p->next) {
        p->bad++;
        p->done = true;
        return;
    }
    uint32_t v = (uint32_t)rx->msg.read_ctx;
    p->next = v + 2;
    if (v + 1 < PINGS)
        ping(p, v + 1);
    if (v == p->last || v + 1 == p->last)
        p->done = true;
}

static void notify_count(void *arg)
{
    BASE_ASSERT(arg == &notified); /* the I/O thread: no cmocka here */
    atomic_fetch_add_explicit(&notified, 1, memory_order_relaxed);
}

/* The consumer loop of peer_link.h, verbatim. A lost wake-up shows as a
 * poll that runs into its 5 s timeout. */
static void *pinger_main(void *arg)
{
    struct pinger *p = arg;
    int64_t end = base_mono_ms() + 30000;
    if (p->self == 1)
        ping(p, 0);
    while (!p->done && base_mono_ms() < end) {
        peer_link_drain(p->pl, on_ping, p);
        if (p->done || !peer_link_idle_begin(p->pl))
            continue;
        struct pollfd pfd = { .fd = peer_link_fd(p->pl), .events = POLLIN };
        p->sleeps++;
        int n = poll(&pfd, 1, 5000);
        peer_link_idle_end(p->pl);
        if (n == 0) {
            p->lost++;
            break;
        }
        if (pfd.revents & POLLIN)
            peer_link_ack(p->pl);
    }
    return NULL;
}

static void test_wakeup_ping_pong(void **state)
{
    (void)state;
    struct cluster cl;
    struct peer_link_cfg cfg = base_cfg();
    struct pinger pg[2] = { 0 };
    cfg.notify = notify_count;
    cfg.notify_arg = &notified;
    atomic_store(&notified, 0);
    cluster_start(&cl, 2, 6, &cfg);
    pump_until(&cl, all_up, NULL, "link up");
    assert_int_equal(cl.nodes[0].n_got + cl.nodes[1].n_got, 0);
    for (int i = 0; i < 2; i++) {
        pg[i].pl = cl.nodes[i].pl;
        pg[i].self = (uint32_t)i + 1;
        pg[i].other = 2 - (uint32_t)i;
        pg[i].next = (uint32_t)i == 0 ? 1 : 0; /* 1 receives odd values, 2 even */
        pg[i].last = PINGS - 1;
    }
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&t[i], NULL, pinger_main, &pg[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(pg[i].bad, 0);
        assert_int_equal(pg[i].lost, 0);
        assert_true(pg[i].done);
    }
    assert_int_equal(pg[0].next, PINGS + 1); /* received 1, 3, ..., 3999 */
    assert_int_equal(pg[1].next, PINGS);     /* received 0, 2, ..., 3998 */
    assert_int_equal(status_of(&cl.nodes[0], 2).frames_in, PINGS / 2);
    assert_int_equal(status_of(&cl.nodes[1], 1).frames_in, PINGS / 2);
    fprintf(stderr, "ping-pong: %u round trips; consumers slept %u and %u times\n",
            PINGS / 2, pg[0].sleeps, pg[1].sleeps);
    assert_true(pg[0].sleeps + pg[1].sleeps > 0);
    assert_true(atomic_load(&notified) >= PINGS); /* once per batch, every message its own */
    cluster_free(&cl);
}

/* ---- 8. member changes ---------------------------------------------------------------- */

/* Node i's view: the members of cl whose bit is set in mask (bit j: node j),
 * itself left out (peer_link_set_members skips it anyway). */
static uint32_t others(const struct cluster *cl, uint32_t i, uint32_t mask,
                       struct peer_link_member *out)
{
    uint32_t n = 0;
    for (uint32_t j = 0; j < cl->n; j++)
        if (j != i && (mask & (1u << j)))
            out[n++] = cl->members[j];
    return n;
}

static void set_members(struct cluster *cl, uint32_t i, uint32_t mask)
{
    struct peer_link_member m[NODES_MAX];
    char err[256] = "";
    uint32_t n = others(cl, i, mask, m);
    if (peer_link_set_members(cl->nodes[i].pl, m, n, err, sizeof err) != 0)
        fail_msg("set_members on server %u: %s", cl->nodes[i].id, err);
}

struct pair {
    uint32_t a, b; /* node indexes */
    bool up;
};

static bool pair_is(struct cluster *cl, void *arg)
{
    struct pair *p = arg;
    struct peer_link_peer_status sa, sb;
    bool a_up = peer_link_status(cl->nodes[p->a].pl, cl->nodes[p->b].id, &sa) == 0 && sa.connected;
    bool b_up = peer_link_status(cl->nodes[p->b].pl, cl->nodes[p->a].id, &sb) == 0 && sb.connected;
    return p->up ? a_up && b_up : !a_up && !b_up;
}

struct logwait {
    uint32_t node;
    const char *a, *b;
    int at_least;
};

static bool logged(struct cluster *cl, void *arg)
{
    struct logwait *w = arg;
    return cap_count(&cl->nodes[w->node].log, w->a, w->b) >= w->at_least;
}

static bool each_got(struct cluster *cl, void *arg)
{
    const size_t *want = arg; /* per node */
    for (uint32_t i = 0; i < cl->n; i++)
        if (cl->nodes[i].n_got < want[i])
            return false;
    return true;
}

/* How many of what node d got came from node s. */
static size_t got_from(const struct cluster *cl, uint32_t d, uint32_t s)
{
    size_t n = 0;
    for (size_t i = 0; i < cl->nodes[d].n_got; i++)
        n += cl->nodes[d].got[i].from == cl->nodes[s].id;
    return n;
}

/* Server 3, unknown to 1 and 2, is refused; added, its links come up and
 * carry everything. */
static void members_add(struct cluster *cl)
{
    struct pair p12 = { 0, 1, true };
    pump_until(cl, pair_is, &p12, "the link 1-2");
    /* 3 dials 1 and 2, which refuse it: a stranger's HELLO */
    struct logwait w1 = { 0, "not a member", NULL, 1 }, w2 = { 1, "not a member", NULL, 1 };
    pump_until(cl, logged, &w1, "server 1 to refuse server 3");
    pump_until(cl, logged, &w2, "server 2 to refuse server 3");
    struct peer_link_peer_status st;
    assert_int_equal(peer_link_status(cl->nodes[0].pl, 3, &st), -ENOENT);
    assert_int_equal(peer_link_send_touch(cl->nodes[0].pl, 3, NULL, 0), PEER_LINK_ENOLINK);
    assert_false(status_of(&cl->nodes[2], 1).connected);

    /* added at 1 and 2: listed at once (down), then up */
    set_members(cl, 0, 0x7);
    set_members(cl, 1, 0x7);
    assert_int_equal(peer_link_status(cl->nodes[0].pl, 3, &st), 0);
    assert_int_equal(st.dials, false);
    pump_until(cl, all_up, NULL, "the links to server 3");
    pump_for(cl, 50);
    for (uint32_t i = 0; i < 3; i++)
        node_forget(&cl->nodes[i]);
    send_all_pairs(cl, 0, 16);
    size_t want = 32;
    pump_until(cl, got_at_least, &want, "every message, server 3 included");
    pump_for(cl, 50);
    for (uint32_t d = 0; d < 3; d++)
        check_got_all_pairs(cl, d, 0, 16);
}

/* Server 3 removed at 1: frames queued for it just before, and every one
 * sent after, are dropped or were written before the close (none is lost
 * from the count: the caller checks it once 3 is back); 1 refuses 3's
 * HELLO again; 2-3 and 1-2 carry on. Returns the frames sent 1 -> 3. */
static uint32_t members_remove(struct cluster *cl)
{
    struct peer_link_peer_status st;
    struct gen g;
    uint32_t sent = 0;
    for (uint32_t k = 200; k < 240; k++, sent++) {
        gen_msg(&g, 1, 3, k);
        assert_int_equal(gen_send(cl->nodes[0].pl, &g), 0);
    }
    set_members(cl, 0, 0x3);
    assert_int_equal(peer_link_status(cl->nodes[0].pl, 3, &st), -ENOENT);
    for (uint32_t k = 240; k < 250; k++, sent++) {
        gen_msg(&g, 1, 3, k);
        assert_int_equal(gen_send(cl->nodes[0].pl, &g), PEER_LINK_ENOLINK);
    }
    struct pair p13 = { 0, 2, false };
    pump_until(cl, pair_is, &p13, "the link 1-3 to close");
    struct logwait gone = { 0, "server 3", "no longer a member", 1 };
    pump_until(cl, logged, &gone, "server 1 to log the removal"); /* after it closed */
    /* 3 still lists 1 and redials: refused again */
    int refused = cap_count(&cl->nodes[0].log, "not a member", NULL);
    struct logwait again = { 0, "not a member", NULL, refused + 1 };
    pump_until(cl, logged, &again, "server 1 to refuse server 3 again");
    assert_int_equal(gen_send(cl->nodes[2].pl, &g), PEER_LINK_EDEST); /* g is 1 -> 3: to self */
    gen_msg(&g, 3, 1, 0);
    assert_int_equal(gen_send(cl->nodes[2].pl, &g), PEER_LINK_ENOLINK);
    /* 2-3 and 1-2 carry on */
    pump_for(cl, 50);
    for (uint32_t i = 0; i < 3; i++)
        node_forget(&cl->nodes[i]);
    for (uint32_t k = 300; k < 308; k++) {
        gen_msg(&g, 2, 3, k);
        assert_int_equal(gen_send(cl->nodes[1].pl, &g), 0);
        gen_msg(&g, 3, 2, k);
        assert_int_equal(gen_send(cl->nodes[2].pl, &g), 0);
        gen_msg(&g, 1, 2, k);
        assert_int_equal(gen_send(cl->nodes[0].pl, &g), 0);
    }
    for (uint32_t i = 0; i < 3; i++)
        peer_link_flush(cl->nodes[i].pl);
    size_t each[3] = { 0, 16, 8 };
    pump_until(cl, each_got, each, "2-3 and 1-2 after the removal");
    pump_for(cl, 100);
    assert_int_equal(got_from(cl, 1, 2), 8);
    assert_int_equal(got_from(cl, 1, 0), 8);
    assert_int_equal(got_from(cl, 2, 1), 8);
    assert_int_equal(got_from(cl, 2, 0), 0);
    assert_int_equal(cl->nodes[0].n_got, 0);
    return sent;
}

/* Server 3 added again at 1: up, its counters going on from before. */
static void members_readd(struct cluster *cl, const struct peer_link_peer_status *before,
                          uint32_t sent)
{
    struct peer_link_peer_status st;
    size_t want;
    set_members(cl, 0, 0x7);
    pump_until(cl, all_up, NULL, "the link 1-3 again");
    st = status_of(&cl->nodes[0], 3);
    assert_int_equal(st.ups, before->ups + 1);
    assert_int_equal(st.frames_out - before->frames_out + st.dropped_no_link -
                         before->dropped_no_link,
                     sent);
    assert_int_equal(st.last_err, PEER_LINK_EREMOVED);
    pump_for(cl, 50);
    for (uint32_t i = 0; i < 3; i++)
        node_forget(&cl->nodes[i]);
    send_all_pairs(cl, 400, 16);
    want = 32;
    pump_until(cl, got_at_least, &want, "every message after the re-add");
    pump_for(cl, 50);
    for (uint32_t d = 0; d < 3; d++)
        check_got_all_pairs(cl, d, 400, 16);
    /* listing the same set again changes nothing */
    uint64_t ups = status_of(&cl->nodes[0], 3).ups + status_of(&cl->nodes[0], 2).ups;
    set_members(cl, 0, 0x7);
    pump_for(cl, 100);
    assert_true(all_up(cl, NULL));
    assert_int_equal(status_of(&cl->nodes[0], 3).ups + status_of(&cl->nodes[0], 2).ups, ups);
}

/* Server 3 starts unknown to 1 and 2 and is refused; added, its links come
 * up and carry everything; removed at 1, that link closes and frames to it
 * are dropped while 2-3 carries on; added again, it comes back clean. */
static void test_members_add_remove_readd(void **state)
{
    (void)state;
    struct cluster cl;
    struct peer_link_cfg cfg = base_cfg();
    const uint32_t known[3] = { 2, 2, 3 };
    cluster_start_known(&cl, 3, 2, &cfg, known);
    members_add(&cl);
    struct peer_link_peer_status before = status_of(&cl.nodes[0], 3);
    uint32_t sent = members_remove(&cl);
    members_readd(&cl, &before, sent);
    cluster_free(&cl);
}

struct dialled {
    uint32_t node, id;
    uint64_t connects;
};

static bool dialled_again(struct cluster *cl, void *arg)
{
    struct dialled *d = arg;
    struct peer_link_peer_status st = status_of(&cl->nodes[d->node], d->id);
    return !st.connected && st.connects >= d->connects;
}

/* Server 2 dials 1. Told 1 moved to where nobody listens, it closes the
 * link and dials there in vain; when 1 does come up there, they link. */
static void test_members_address_change(void **state)
{
    (void)state;
    struct cluster cl;
    struct peer_link_cfg cfg = base_cfg();
    cluster_start(&cl, 2, 2, &cfg);
    pump_until(&cl, all_up, NULL, "the link 1-2");
    uint64_t connects = status_of(&cl.nodes[1], 1).connects;
    struct peer_link_member moved = { .id = 1, .host = "127.0.0.4",
                                      .port = free_port("127.0.0.4") };
    char err[256] = "";
    assert_int_equal(peer_link_set_members(cl.nodes[1].pl, &moved, 1, err, sizeof err), 0);
    struct dialled d = { 1, 1, connects + 2 };
    pump_until(&cl, dialled_again, &d, "server 2 to dial the new address twice");
    struct logwait w = { 1, "server 1 (127.0.0.2:", "now at 127.0.0.4:", 1 };
    assert_true(logged(&cl, &w));
    struct peer_link_peer_status st = status_of(&cl.nodes[1], 1);
    assert_int_equal(st.last_err, -ECONNREFUSED);
    struct gen g;
    gen_msg(&g, 2, 1, 0);
    assert_int_equal(gen_send(cl.nodes[1].pl, &g), PEER_LINK_ENOLINK);
    /* server 1 restarts there */
    node_free(&cl.nodes[0]);
    snprintf(cl.nodes[0].host, sizeof cl.nodes[0].host, "%s", moved.host);
    cl.members[0].port = moved.port;
    node_restart(&cl, 0);
    pump_until(&cl, all_up, NULL, "the link to server 1 at its new address");
    send_all_pairs(&cl, 0, 16);
    size_t want = 16;
    pump_until(&cl, got_at_least, &want, "every message");
    pump_for(&cl, 50);
    for (uint32_t i = 0; i < 2; i++)
        check_got_all_pairs(&cl, i, 0, 16);
    cluster_free(&cl);
}

static void expect_bad_set(struct peer_link *pl, const struct peer_link_member *m, uint32_t n,
                           const char *words)
{
    char err[256] = "";
    int rc = peer_link_set_members(pl, m, n, err, sizeof err);
    if (rc != -EINVAL)
        fail_msg("set_members gave %d for a set that should fail with \"%s\"", rc, words);
    if (strstr(err, words) == NULL)
        fail_msg("error \"%s\" does not say \"%s\"", err, words);
}

/* A bad set changes nothing; an entry for self is skipped; the empty set
 * closes every link. */
static void test_members_bad_sets(void **state)
{
    (void)state;
    struct cluster cl;
    struct peer_link_cfg cfg = base_cfg();
    cluster_start(&cl, 3, 2, &cfg);
    pump_until(&cl, all_up, NULL, "three links up");
    struct peer_link *pl = cl.nodes[1].pl; /* server 2 */
    struct peer_link_member m[PEER_LINK_MEMBERS_MAX + 1];
    memcpy(m, cl.members, 3 * sizeof m[0]);
    struct peer_link_member keep0 = m[0], keep2 = m[2];
    m[2].id = 1;
    expect_bad_set(pl, m, 3, "listed twice");
    m[2] = keep2;
    m[0].id = 0;
    expect_bad_set(pl, m, 3, "outside 1..255");
    m[0].id = 256;
    expect_bad_set(pl, m, 3, "outside 1..255");
    m[0] = keep0;
    m[0].host = "localhost";
    expect_bad_set(pl, m, 3, "not an IPv4 or IPv6 literal");
    m[0].host = NULL;
    expect_bad_set(pl, m, 3, "not an IPv4 or IPv6 literal");
    m[0] = keep0;
    m[0].port = 0;
    expect_bad_set(pl, m, 3, "port 0");
    m[0] = keep0;
    m[2].host = m[0].host; /* 3 at 1's address */
    m[2].port = m[0].port;
    expect_bad_set(pl, m, 3, "share the address");
    m[2] = keep2;
    m[2].host = cl.members[1].host; /* 3 at this server's own */
    m[2].port = cl.members[1].port;
    expect_bad_set(pl, m, 3, "share the address");
    m[2] = keep2;
    for (uint32_t i = 0; i <= PEER_LINK_MEMBERS_MAX; i++)
        m[i] = (struct peer_link_member){ .id = 10 + i, .host = "127.0.0.9",
                                          .port = (uint16_t)(1000 + i) };
    expect_bad_set(pl, m, PEER_LINK_MEMBERS_MAX + 1, "members");
    expect_bad_set(pl, NULL, 1, "members");
    /* nothing changed */
    pump_for(&cl, 100);
    assert_true(all_up(&cl, NULL));
    for (uint32_t i = 0; i < 3; i++)
        assert_int_equal(status_of(&cl.nodes[i], cl.nodes[(i + 1) % 3].id).ups, 1);
    /* self listed at another address: skipped (the listening address stays) */
    memcpy(m, cl.members, 3 * sizeof m[0]);
    m[1].host = "127.0.0.9";
    char err[256];
    assert_int_equal(peer_link_set_members(pl, m, 3, err, sizeof err), 0);
    pump_for(&cl, 100);
    assert_true(all_up(&cl, NULL));
    assert_int_equal(status_of(&cl.nodes[1], 1).ups, 1);
    /* nobody: every link of server 2 closes */
    assert_int_equal(peer_link_set_members(pl, NULL, 0, err, sizeof err), 0);
    struct peer_link_peer_status st;
    assert_int_equal(peer_link_status(pl, 1, &st), -ENOENT);
    assert_int_equal(peer_link_status(pl, 3, &st), -ENOENT);
    struct pair p21 = { 1, 0, false }, p23 = { 1, 2, false };
    pump_until(&cl, pair_is, &p21, "the link 2-1 to close");
    pump_until(&cl, pair_is, &p23, "the link 2-3 to close");
    assert_true(link_is_up(&cl.nodes[0], &cl.nodes[2]));
    cluster_free(&cl);
}

/* Member changes race status readers on another thread and the I/O
 * thread's own work (the TSan build checks the races), and end with every
 * link up and carrying everything. */
struct reader {
    struct peer_link *pl;
    atomic_bool stop;
    uint64_t reads;
};

static void *reader_main(void *arg)
{
    struct reader *r = arg;
    while (!atomic_load(&r->stop)) {
        for (uint32_t id = 1; id <= 4; id++) {
            struct peer_link_peer_status st;
            if (peer_link_status(r->pl, id, &st) == 0) {
                assert_int_equal(st.id, id);
                r->reads++;
            }
        }
    }
    return NULL;
}

static void test_members_churn(void **state)
{
    (void)state;
    struct cluster cl;
    struct peer_link_cfg cfg = base_cfg();
    cluster_start(&cl, 4, 2, &cfg);
    pump_until(&cl, all_up, NULL, "six links up");
    struct reader r = { .pl = cl.nodes[1].pl };
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, reader_main, &r), 0);
    uint64_t seed = 5;
    struct gen g;
    for (uint32_t round = 0; round < 200; round++) {
        uint32_t mask = (uint32_t)(base_splitmix64(&seed) & 0xf);
        set_members(&cl, 1, mask);
        for (uint32_t d = 0; d < 4; d++) {
            if (d == 1)
                continue;
            gen_msg(&g, 2, cl.nodes[d].id, round);
            int rc = gen_send(cl.nodes[1].pl, &g);
            assert_true(rc == 0 || rc == PEER_LINK_ENOLINK);
        }
        peer_link_flush(cl.nodes[1].pl);
        if (round % 16 == 0)
            pump(&cl, 1);
    }
    set_members(&cl, 1, 0xf);
    pump_until(&cl, all_up, NULL, "six links up after the churn");
    atomic_store(&r.stop, true);
    pthread_join(t, NULL);
    assert_true(r.reads > 0);
    pump_for(&cl, 100);
    for (uint32_t i = 0; i < 4; i++)
        node_forget(&cl.nodes[i]);
    send_all_pairs(&cl, 1000, 8);
    size_t want = 24;
    pump_until(&cl, got_at_least, &want, "every message after the churn");
    pump_for(&cl, 50);
    for (uint32_t d = 0; d < 4; d++)
        check_got_all_pairs(&cl, d, 1000, 8);
    cluster_free(&cl);
}

/* ---- 8. inline I/O: the scenarios above with no I/O thread ------------------------ */

static void test_inline_every_kind(void **state)
{
    g_inline = true;
    test_three_links_every_kind(state);
}

/* A frame leaves in peer_link_flush: its receiver gets it although the
 * sender never makes another I/O pass. */
static void test_inline_flush_writes_at_once(void **state)
{
    (void)state;
    g_inline = true;
    struct cluster cl;
    struct peer_link_cfg cfg = base_cfg();
    cluster_start(&cl, 2, 2, &cfg);
    pump_until(&cl, all_up, NULL, "link up");
    struct gen g;
    for (uint32_t k = 0; k < 8; k++) {
        gen_msg(&g, 2, 1, k);
        assert_int_equal(gen_send(cl.nodes[1].pl, &g), 0);
    }
    peer_link_flush(cl.nodes[1].pl);
    assert_int_equal(status_of(&cl.nodes[1], 1).out_queued_bytes, 0);
    assert_int_equal(status_of(&cl.nodes[1], 1).frames_out, 8);
    struct node *rcv = &cl.nodes[0];
    int64_t end = base_mono_ms() + DEADLINE_MS;
    while (rcv->n_got < 8) {
        assert_true(base_mono_ms() < end);
        (void)peer_link_poll(rcv->pl); /* the receiver only */
        while (peer_link_drain(rcv->pl, collect, rcv) > 0)
            ;
        struct pollfd pfd = { .fd = peer_link_io_fd(rcv->pl), .events = POLLIN };
        poll(&pfd, 1, 5);
    }
    check_got_all_pairs(&cl, 0, 0, 8);
    cluster_free(&cl);
}

static void test_inline_large_snapshot(void **state)
{
    g_inline = true;
    test_large_snapshot(state);
}

static void test_inline_reconnect(void **state)
{
    g_inline = true;
    test_reconnect(state);
}

static void test_inline_backpressure(void **state)
{
    g_inline = true;
    test_inbound_backpressure(state);
}

static void test_inline_stop_with_links_up(void **state)
{
    g_inline = true;
    test_stop_with_links_up(state);
}

static void test_inline_members_add_remove_readd(void **state)
{
    g_inline = true;
    test_members_add_remove_readd(state);
}

/* ---- 9. quorum TLS: the scenarios above inside TLS sessions ----------------------- */

static struct test_pki g_pki;

static struct tls_ctx *member_ctx(const char *key_file)
{
    char key[128], trust[128], err[TLS_MSG_MAX] = "";
    test_pki_path(&g_pki, key_file, key, sizeof key);
    test_pki_path(&g_pki, "ca.pem", trust, sizeof trust);
    struct tls_settings s = {
        .key = { .path = key, .type = TLS_STORE_PEM },
        .trust = { .path = trust, .type = TLS_STORE_PEM },
        .protocols = TLS_PROTO_1_2 | TLS_PROTO_1_3,
        .client_auth = TLS_CLIENT_AUTH_NEED,
        .verify_client_address = true, /* the dialler's bound source address */
    };
    struct tls_ctx *ctx = tls_ctx_new(&s, err, sizeof err);
    if (ctx == NULL)
        fail_msg("tls_ctx_new: %s", err);
    return ctx;
}

static int pki_setup(void **state)
{
    (void)state;
    signal(SIGPIPE, SIG_IGN); /* OpenSSL writes with write(2), as larchd ignores it */
    return test_pki_make(&g_pki);
}

static int pki_teardown(void **state)
{
    (void)state;
    test_pki_free(&g_pki);
    return 0;
}

static int tls_setup(void **state)
{
    (void)state;
    g_tls = member_ctx("peer.pem");
    return 0;
}

static void reset_node_overrides(void)
{
    for (uint32_t i = 0; i < NODES_MAX; i++) {
        tls_ctx_free(g_tls_of[i]);
        g_tls_of[i] = NULL;
        g_plain_of[i] = false;
    }
}

static int tls_teardown(void **state)
{
    (void)state;
    reset_node_overrides();
    tls_ctx_free(g_tls);
    g_tls = NULL;
    g_inline = false;
    return 0;
}

static void test_tls_every_kind(void **state)
{
    test_three_links_every_kind(state);
}

/* Multi-MiB through 16 KiB records, partial writes and all. */
static void test_tls_large_snapshot(void **state)
{
    test_large_snapshot(state);
}

static void test_tls_reconnect(void **state)
{
    test_reconnect(state);
}

static void test_inline_tls_every_kind(void **state)
{
    g_inline = true;
    test_three_links_every_kind(state);
}

static void test_inline_tls_large_snapshot(void **state)
{
    g_inline = true;
    test_large_snapshot(state);
}

/* Node 2 dials node 1 and fails as it is set up; the link never comes up,
 * node 1 logs acceptor_why about the connection it closed and node 2
 * dialler_why about server 1, and node 2 retries (backs off) meanwhile. */
static void expect_no_link(const char *acceptor_why, const char *dialler_why)
{
    struct cluster cl;
    struct peer_link_cfg cfg = base_cfg();
    cluster_start(&cl, 2, 2, &cfg);
    struct logwait a = { .node = 0, .a = "connection closed", .b = acceptor_why, .at_least = 2 };
    struct logwait d = { .node = 1, .a = "server 1 (", .b = dialler_why, .at_least = 1 };
    pump_until(&cl, logged, &a, acceptor_why);
    pump_until(&cl, logged, &d, dialler_why);
    assert_false(status_of(&cl.nodes[0], 2).connected);
    assert_false(status_of(&cl.nodes[1], 1).connected);
    assert_true(status_of(&cl.nodes[1], 1).connects >= 2);
    assert_int_equal(cap_count(&cl.nodes[0].log, "link up", NULL), 0);
    cluster_free(&cl);
}

/* A dialler from a CA nobody trusts, a dialler without TLS, and an
 * acceptor whose certificate does not name the address dialled (server.pem
 * names 127.0.0.1 only; node 1 listens on 127.0.0.2). */
static void test_tls_refusals(void **state)
{
    (void)state;
    g_tls_of[1] = member_ctx("rogue-peer.pem");
    expect_no_link("TLS handshake failed: certificate verify failed", "cannot connect: TLS");
    reset_node_overrides();
    g_plain_of[1] = true;
    expect_no_link("TLS handshake failed: ", "cannot connect: ");
    reset_node_overrides();
    g_tls_of[0] = member_ctx("server.pem");
    expect_no_link("TLS handshake failed: ",
                   "cannot connect: TLS handshake failed: certificate verify failed");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_three_links_every_kind),
        cmocka_unit_test(test_large_snapshot),
        cmocka_unit_test(test_reconnect),
        cmocka_unit_test(test_hostile_bytes),
        cmocka_unit_test(test_impostor_replaces_and_second_hello),
        cmocka_unit_test(test_second_hello_same_read),
        cmocka_unit_test(test_bounded_output),
        cmocka_unit_test(test_inbound_backpressure),
        cmocka_unit_test(test_stop_with_links_up),
        cmocka_unit_test(test_stop_with_connect_pending),
        cmocka_unit_test(test_lifecycle_without_peers),
        cmocka_unit_test(test_port_taken),
        cmocka_unit_test(test_bad_configs),
        cmocka_unit_test(test_wakeup_ping_pong),
        cmocka_unit_test(test_members_add_remove_readd),
        cmocka_unit_test(test_members_address_change),
        cmocka_unit_test(test_members_bad_sets),
        cmocka_unit_test(test_members_churn),
        cmocka_unit_test_teardown(test_inline_every_kind, inline_teardown),
        cmocka_unit_test_teardown(test_inline_flush_writes_at_once, inline_teardown),
        cmocka_unit_test_teardown(test_inline_large_snapshot, inline_teardown),
        cmocka_unit_test_teardown(test_inline_reconnect, inline_teardown),
        cmocka_unit_test_teardown(test_inline_backpressure, inline_teardown),
        cmocka_unit_test_teardown(test_inline_stop_with_links_up, inline_teardown),
        cmocka_unit_test_teardown(test_inline_members_add_remove_readd, inline_teardown),
        cmocka_unit_test_setup_teardown(test_tls_every_kind, tls_setup, tls_teardown),
        cmocka_unit_test_setup_teardown(test_tls_large_snapshot, tls_setup, tls_teardown),
        cmocka_unit_test_setup_teardown(test_tls_reconnect, tls_setup, tls_teardown),
        cmocka_unit_test_setup_teardown(test_inline_tls_every_kind, tls_setup, tls_teardown),
        cmocka_unit_test_setup_teardown(test_inline_tls_large_snapshot, tls_setup, tls_teardown),
        cmocka_unit_test_setup_teardown(test_tls_refusals, tls_setup, tls_teardown),
    };
    return cmocka_run_group_tests(tests, pki_setup, pki_teardown);
}
