/*
 * peer_link.c — the peer-I/O thread (peer_link.h): one epoll loop over the
 * quorum port's listening socket, the links to the other members, and an
 * eventfd the producer, the consumer and peer_link_stop use to wake it.
 *
 * Ownership, in one place:
 *   - struct link_peer: one per server id, member or not, in an array
 *     indexed by id, so a server's slot never moves or goes away while
 *     the member set changes under readers on other threads. Its address
 *     and socket state (member, conn, the out list, backoff) are the I/O
 *     thread's; listed is the producer's view of the member set (anyone
 *     reads it); up_gen, out_bytes and the counters are atomics the other
 *     threads read (and the producer adds to: out_bytes, the drop
 *     counters).
 *   - struct member_set: built (checked and parsed) by the producer in
 *     peer_link_set_members, carried to the I/O thread as an out_item on
 *     the frames' queue, applied and freed there.
 *   - struct conn: one per socket, the I/O thread's only. A closed conn
 *     keeps its memory until the end of the loop pass (sweep_conns), so a
 *     frame being handled never loses the buffer it points into.
 *   - struct out_item: built by the producer, owned by the out queue, then
 *     by its destination's list, freed by the I/O thread once written or
 *     dropped (or by peer_link_free).
 *   - struct rx_item: built by the I/O thread, owned by the rx queue, freed
 *     by peer_link_drain after its callback (or by peer_link_free).
 *
 * Sockets are edge-triggered: an event only sets rd_ready / wr_ready, and
 * the pass that follows reads or writes until EAGAIN (or a per-pass budget,
 * so that one busy link cannot starve the others). A read shorter than
 * asked for also ends it: the socket was empty then, and bytes that come
 * later raise a new edge. Not so once the event reported the other end's
 * close (rd_hup): the FIN raises no further edge, so such a link is read
 * until read says EOF. Nothing is closed while
 * events are being handed out, so an event never names a freed conn.
 *
 * A link's generation. Each time a link comes up its peer gets a new
 * nonzero generation, published in up_gen; the producer stamps every item
 * with the generation it saw. The I/O thread drops an item whose
 * generation is not the current link's, so frames meant for a link that
 * went down never leak onto the next one (it starts clean). The same rule
 * covers member changes: a server removed and added again before the I/O
 * thread caught up gets frames stamped with its old link's generation,
 * which the removal ended.
 */
#include "replication/peer_link.h"

#include "tls/tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define BACKOFF_MIN_MS_DEFAULT 50u
#define BACKOFF_MAX_MS_DEFAULT 2000u
#define CONNECT_TIMEOUT_MS_DEFAULT 2000u
#define CHUNK_BYTES_DEFAULT ((size_t)1 << 20)
#define OUT_BYTES_MAX_DEFAULT ((size_t)64 << 20)
#define IN_BYTES_MAX_DEFAULT ((size_t)128 << 20)
#define SNAP_BYTES_MAX_DEFAULT ((uint64_t)1 << 30)
#define LISTEN_BACKLOG 64
#define PENDING_MAX 64                 /* accepted connections awaiting a HELLO */
#define READ_BYTES ((size_t)64 << 10)  /* one read, unless a longer frame is in progress */
#define READ_PASS_BYTES_MAX ((size_t)1 << 20) /* per link per pass: links share one thread */
#define IN_KEEP_BYTES_MAX ((size_t)1 << 20)   /* an idle input buffer above this is freed */
#define PRE_HELLO_BYTES_MAX 256u /* payload before a HELLO: a HELLO is 31 bytes, so anything
                                  * longer is refused from its header, and a stranger can
                                  * make us hold no more than a read's worth */
#define WRITE_IOV_MAX 64
#define EVENTS_MAX 64
#define WAIT_MS_MAX 100 /* the clock is looked at least this often */
#define LOG_LINE_BYTES 320
#define ADDR_BYTES (PEER_LINK_HOST_BYTES_MAX + 8) /* "[host]:port" */
#define NAME_BYTES (ADDR_BYTES + 24)              /* "server 255 (<addr>)" */
#define HDR PEER_FRAME_HEADER_BYTES
#define WHY_BYTES 160 /* a close's reason: peer_link_strerror's, or OpenSSL's */

/* tls_conn_recv leaves nothing inside OpenSSL only when asked for a whole
 * record: every read of conn_read asks for at least READ_BYTES. */
_Static_assert(READ_BYTES >= TLS_RECORD_MAX, "a TLS read must take a whole record");

#define ITEM_OF(n, type) ((type *)(void *)((char *)(n) - offsetof(type, node)))

/* ---- types -------------------------------------------------------------------- */

/* One member's address, checked and parsed. */
struct member_addr {
    uint32_t id;
    struct sockaddr_storage sa;
    socklen_t sa_len;
    char addr[ADDR_BYTES];
    char tls_name[PEER_LINK_TLS_NAME_BYTES_MAX]; /* what its certificate must name */
};

/* The other members, in id order (self never in it). */
struct member_set {
    uint32_t n;
    struct member_addr m[PEER_LINK_MEMBERS_MAX];
};

struct out_item {
    struct base_mpsc_node node; /* producer -> I/O thread */
    struct out_item *next;      /* the destination's list (I/O thread) */
    uint32_t to;       /* 0: not frames but a member change (members) */
    uint64_t n_frames; /* a snapshot is many SNAP_CHUNKs, queued or dropped together */
    uint64_t gen;      /* the link generation the producer saw up */
    struct base_buf b; /* whole frames */
    struct member_set *members; /* to == 0: the set to apply, owned */
};

struct rx_item {
    struct base_mpsc_node node; /* I/O thread -> consumer */
    size_t bytes;               /* counted in in_bytes until drained */
    uint8_t *data;              /* the frame's bytes, or a snapshot's */
    struct peer_frame frame;    /* decoded view into data (not for a snapshot) */
    struct raft_config *config; /* a snapshot's membership (rx.msg.snap_config), owned */
    struct peer_link_rx rx;
};

enum conn_state {
    CONN_CONNECTING = PEER_LINK_CONNECTING,
    CONN_HELLO = PEER_LINK_HELLO, /* waiting for the other end's HELLO */
    CONN_UP = PEER_LINK_UP,
};

struct link_peer;

struct conn {
    struct conn *next; /* pl->conns */
    int fd;            /* -1: closed, freed at the end of the pass */
    enum conn_state state;
    bool dialled;
    bool rd_ready, wr_ready; /* edge-triggered readiness not used up yet */
    bool rd_hup;             /* an event reported the other end's close or an error */
    struct link_peer *peer;  /* NULL until an accepted conn's HELLO names it */
    int64_t deadline_ms;     /* CONNECTING / HELLO: given up at this time */
    char name[NAME_BYTES];   /* for log lines */
    struct base_buf in;      /* bytes read, starting at a frame boundary */
    struct base_buf hello;   /* our HELLO, written before anything else */
    size_t hello_off;
    uint64_t bytes_in_early; /* read before an accepted conn's HELLO named its peer */
    struct peer_frame scratch; /* HELLO and SNAP_CHUNK decodes */
    struct peer_snap_rx snap;
    /* cfg.tls: the session (freed before fd is closed: its close_notify
     * goes out on that socket), a copy of the first unsent bytes (the
     * HELLO's, then the queue's: at most a record's, which the next
     * tls_conn_send must be given again after EAGAIN), and whether a read
     * waits for the socket to take output. */
    struct tls_conn *tls;
    struct base_buf tls_out;
    bool tls_rd_wants_write;
};

struct peer_ctr {
    _Atomic int state; /* enum peer_link_state */
    _Atomic int64_t up_since_ms;
    _Atomic uint64_t frames_in, bytes_in, frames_out, bytes_out;
    _Atomic uint64_t dropped_no_link, dropped_full, decode_errors;
    _Atomic uint64_t connects, ups, reconnects;
    _Atomic int last_err;
};

struct link_peer {
    uint32_t id; /* its index in pl->peers: fixed */
    bool dials;  /* self_id > id: fixed */
    /* I/O thread only (and the owner's before the thread starts) */
    bool member; /* in the member set the I/O thread applied last */
    struct sockaddr_storage sa;
    socklen_t sa_len;
    char addr[ADDR_BYTES];
    char tls_name[PEER_LINK_TLS_NAME_BYTES_MAX];
    struct conn *conn; /* the socket to it, in any state; NULL: none */
    uint64_t gen;      /* the established link's generation; 0: not up */
    int64_t next_dial_ms;
    uint32_t backoff_ms;
    int logged_err; /* last connect failure logged, so retries do not repeat it */
    struct out_item *out_head, *out_tail;
    size_t out_off; /* bytes of out_head already written */
    /* shared */
    atomic_bool listed;         /* in the set the producer gave last: it writes, anyone reads */
    _Atomic uint64_t up_gen;    /* gen while up, else 0: the producer's view */
    _Atomic uint64_t out_bytes; /* producer adds, I/O thread subtracts */
    struct peer_ctr ctr;
};

struct peer_link {
    struct peer_link_cfg cfg; /* defaults filled in; members not kept */
    char self_addr[ADDR_BYTES];
    struct sockaddr_storage self_sa;
    socklen_t self_sa_len;
    /* one slot per server id ([0] and [self_id] unused): ~100 KB, for
     * pointers that stay valid whatever the member set does */
    struct link_peer peers[PEER_SERVER_ID_MAX + 1];
    /* I/O thread only: the ids of the members, in id order */
    uint32_t n_members;
    uint32_t member_ids[PEER_LINK_MEMBERS_MAX];
    int listen_fd, epfd, io_efd, rx_efd;
    pthread_t thread;
    bool started, stopped; /* owner only */
    atomic_bool stop;
    /* producer -> I/O thread */
    struct base_mpsc out_q;
    atomic_bool io_sleeping;
    bool flush_pending; /* producer only */
    /* I/O thread -> consumer */
    struct base_mpsc rx_q;
    atomic_bool rx_sleeping;
    _Atomic uint64_t in_bytes;
    atomic_bool io_paused; /* reading stopped at in_bytes_max: a drain kicks */
    /* I/O thread only */
    struct conn *conns;
    uint32_t n_pending; /* accepted conns without a HELLO yet */
    bool paused;
    size_t delivered; /* items queued for the consumer this pass */
    uint64_t gen_next;
    struct base_rng rng;
    /* stats */
    _Atomic uint64_t st_in_paused, st_accepted, st_rejected;
};

/* ---- small helpers ------------------------------------------------------------ */

static void ctr_add(_Atomic uint64_t *c, uint64_t n)
{
    atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

static uint64_t ctr_get(const _Atomic uint64_t *c)
{
    return atomic_load_explicit(c, memory_order_relaxed);
}

static int64_t now_ms(const struct peer_link *pl)
{
    return pl->cfg.clock_ms != NULL ? pl->cfg.clock_ms() : base_mono_ms();
}

static void kick(int efd)
{
    uint64_t one = 1;
    ssize_t n = write(efd, &one, sizeof one);
    (void)n; /* EAGAIN: the counter is already nonzero, the reader will wake */
}

static void eventfd_clear(int efd)
{
    uint64_t v;
    ssize_t n = read(efd, &v, sizeof v);
    (void)n; /* EAGAIN: nothing was pending */
}

/* The wake-up protocol of replication/sequencer.c: the sleeper stores
 * sleeping = true and re-checks its queue before it blocks; the producer
 * pushes (a seq_cst exchange) and then reads sleeping. In the single total
 * order of these seq_cst accesses one side sees the other, so no push is
 * missed and a busy sleeper costs no system call. */
static void wake_if_sleeping(atomic_bool *sleeping, int efd)
{
    if (atomic_load_explicit(sleeping, memory_order_seq_cst))
        kick(efd);
}

__attribute__((format(printf, 3, 4))) static void link_log(const struct peer_link *pl, int level,
                                                           const char *fmt, ...)
{
    char line[LOG_LINE_BYTES];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (pl->cfg.log != NULL)
        pl->cfg.log(pl->cfg.log_arg, level, line);
    else
        base_log(level <= PEER_LINK_LOG_ERR       ? BASE_LOG_ERROR
                 : level <= PEER_LINK_LOG_WARNING ? BASE_LOG_WARN
                                                  : BASE_LOG_INFO,
                 "larchd: peer: %s", line);
}

/* Server id's slot, member or not; NULL for self or an id outside 1..255. */
static struct link_peer *slot_of(struct peer_link *pl, uint32_t id)
{
    return id >= 1 && id <= PEER_SERVER_ID_MAX && id != pl->cfg.self_id ? &pl->peers[id] : NULL;
}

/* I/O thread: server id's slot if it is a member (of the set applied last). */
static struct link_peer *member_of(struct peer_link *pl, uint32_t id)
{
    struct link_peer *p = slot_of(pl, id);
    return p != NULL && p->member ? p : NULL;
}

/* Release, and written after the counters it goes with: a reader that
 * waits for a state (acquire, in peer_link_status) sees them too. */
static void set_state(struct link_peer *p, enum peer_link_state st)
{
    atomic_store_explicit(&p->ctr.state, (int)st, memory_order_release);
}

/* ---- addresses ---------------------------------------------------------------- */

/* host (an IPv4 or IPv6 literal; nothing is resolved) and port into *sa and
 * "host:port" / "[host]:port" into text. 0 or -EINVAL. */
static int parse_addr(const char *host, uint16_t port, struct sockaddr_storage *sa,
                      socklen_t *sa_len, char *text, size_t text_len)
{
    memset(sa, 0, sizeof *sa);
    struct sockaddr_in *v4 = (struct sockaddr_in *)(void *)sa;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)(void *)sa;
    if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons(port);
        *sa_len = sizeof *v4;
        snprintf(text, text_len, "%s:%u", host, (unsigned)port);
        return 0;
    }
    if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons(port);
        *sa_len = sizeof *v6;
        snprintf(text, text_len, "[%s]:%u", host, (unsigned)port);
        return 0;
    }
    return -EINVAL;
}

/* An accepted connection's remote address, for log lines. */
static void addr_text(const struct sockaddr_storage *sa, char *text, size_t text_len)
{
    char host[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;
    if (sa->ss_family == AF_INET) {
        const struct sockaddr_in *v4 = (const struct sockaddr_in *)(const void *)sa;
        inet_ntop(AF_INET, &v4->sin_addr, host, sizeof host);
        port = ntohs(v4->sin_port);
        snprintf(text, text_len, "%s:%u", host, port);
    } else if (sa->ss_family == AF_INET6) {
        const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)(const void *)sa;
        inet_ntop(AF_INET6, &v6->sin6_addr, host, sizeof host);
        port = ntohs(v6->sin6_port);
        snprintf(text, text_len, "[%s]:%u", host, port);
    } else {
        snprintf(text, text_len, "?");
    }
}

/* An accepted connection's remote host alone, as the TLS module checks a
 * certificate against it. */
static void sa_host(const struct sockaddr_storage *sa, char *text, size_t text_len)
{
    const void *a = sa->ss_family == AF_INET6
                        ? (const void *)&((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr
                        : (const void *)&((const struct sockaddr_in *)(const void *)sa)->sin_addr;
    if (inet_ntop(sa->ss_family, a, text, (socklen_t)text_len) == NULL)
        snprintf(text, text_len, "?");
}

/* ---- configuration ------------------------------------------------------------ */

static void cfg_defaults(struct peer_link_cfg *c)
{
    if (c->backoff_min_ms == 0)
        c->backoff_min_ms = BACKOFF_MIN_MS_DEFAULT;
    if (c->backoff_max_ms == 0)
        c->backoff_max_ms = c->backoff_min_ms > BACKOFF_MAX_MS_DEFAULT ? c->backoff_min_ms
                                                                       : BACKOFF_MAX_MS_DEFAULT;
    if (c->connect_timeout_ms == 0)
        c->connect_timeout_ms = CONNECT_TIMEOUT_MS_DEFAULT;
    if (c->chunk_bytes == 0)
        c->chunk_bytes = CHUNK_BYTES_DEFAULT;
    if (c->chunk_bytes > PEER_SNAP_CHUNK_BYTES_MAX)
        c->chunk_bytes = PEER_SNAP_CHUNK_BYTES_MAX;
    if (c->out_bytes_max == 0)
        c->out_bytes_max = OUT_BYTES_MAX_DEFAULT;
    if (c->in_bytes_max == 0)
        c->in_bytes_max = IN_BYTES_MAX_DEFAULT;
    if (c->snap_bytes_max == 0)
        c->snap_bytes_max = SNAP_BYTES_MAX_DEFAULT;
}

/* Checks one member and parses its address into *out. */
static bool member_parse(const struct peer_link_member *m, struct member_addr *out, char *err,
                         size_t err_len)
{
    if (m->id < 1 || m->id > PEER_SERVER_ID_MAX) {
        snprintf(err, err_len, "server id %u is outside 1..%u", m->id, PEER_SERVER_ID_MAX);
        return false;
    }
    out->id = m->id;
    if (m->host == NULL || strnlen(m->host, PEER_LINK_HOST_BYTES_MAX) >= PEER_LINK_HOST_BYTES_MAX ||
        parse_addr(m->host, m->port, &out->sa, &out->sa_len, out->addr, sizeof out->addr) != 0) {
        snprintf(err, err_len, "server %u: host %.64s is not an IPv4 or IPv6 literal", m->id,
                 m->host != NULL ? m->host : "(null)");
        return false;
    }
    if (m->port == 0) {
        snprintf(err, err_len, "server %u: port 0 is not a quorum port", m->id);
        return false;
    }
    const char *name = m->tls_name != NULL && m->tls_name[0] != '\0' ? m->tls_name : m->host;
    if (strlen(name) >= sizeof out->tls_name) {
        snprintf(err, err_len, "server %u: host name %.64s... is too long", m->id, name);
        return false;
    }
    memcpy(out->tls_name, name, strlen(name) + 1);
    return true;
}

/* Checks m[0..n) and parses every member but self into set, in id order.
 * Self's entry goes to *self (and *self_seen is set) when self is non-NULL;
 * with self NULL it is skipped unchecked. */
static bool members_parse(const struct peer_link *pl, const struct peer_link_member *m,
                          uint32_t n, struct member_set *set, struct member_addr *self,
                          bool *self_seen, char *err, size_t err_len)
{
    bool seen[PEER_SERVER_ID_MAX + 1] = { false };
    set->n = 0;
    for (uint32_t i = 0; i < n; i++) {
        struct member_addr a;
        if (m[i].id == pl->cfg.self_id && self == NULL)
            continue;
        if (!member_parse(&m[i], &a, err, err_len))
            return false;
        if (seen[a.id]) {
            snprintf(err, err_len, "server id %u is listed twice", a.id);
            return false;
        }
        seen[a.id] = true;
        if (a.id == pl->cfg.self_id) {
            *self = a;
            *self_seen = true;
            continue;
        }
        BASE_ASSERT(set->n < PEER_LINK_MEMBERS_MAX); /* n is bounded by the callers */
        uint32_t j = set->n++;
        for (; j > 0 && set->m[j - 1].id > a.id; j--) /* insertion: at most 32 */
            set->m[j] = set->m[j - 1];
        set->m[j] = a;
    }
    return true;
}

/* Two members at one address would be one server dialling itself. */
static bool addresses_unique(const struct peer_link *pl, const struct member_set *set, char *err,
                             size_t err_len)
{
    for (uint32_t i = 0; i < set->n; i++) {
        const struct member_addr *a = &set->m[i];
        if (strcmp(a->addr, pl->self_addr) == 0) {
            snprintf(err, err_len, "servers %u and %u share the address %s", a->id,
                     pl->cfg.self_id, pl->self_addr);
            return false;
        }
        for (uint32_t j = 0; j < i; j++)
            if (strcmp(a->addr, set->m[j].addr) == 0) {
                snprintf(err, err_len, "servers %u and %u share the address %s", set->m[j].id,
                         a->id, a->addr);
                return false;
            }
    }
    return true;
}

static void slots_init(struct peer_link *pl)
{
    for (uint32_t id = 0; id <= PEER_SERVER_ID_MAX; id++) {
        struct link_peer *p = &pl->peers[id];
        p->id = id;
        p->dials = pl->cfg.self_id > id;
        p->backoff_ms = pl->cfg.backoff_min_ms;
    }
}

static void apply_members(struct peer_link *pl, const struct member_set *set, bool initial);

static bool cfg_load(struct peer_link *pl, const struct peer_link_cfg *cfg, char *err,
                     size_t err_len)
{
    if (cfg->n_members < 1 || cfg->n_members > PEER_LINK_MEMBERS_MAX || cfg->members == NULL) {
        snprintf(err, err_len, "%u members: 1..%u are allowed", cfg->n_members,
                 PEER_LINK_MEMBERS_MAX);
        return false;
    }
    if (pl->cfg.backoff_min_ms > pl->cfg.backoff_max_ms) {
        snprintf(err, err_len, "backoff_min_ms %u is above backoff_max_ms %u",
                 pl->cfg.backoff_min_ms, pl->cfg.backoff_max_ms);
        return false;
    }
    struct member_set set;
    struct member_addr self;
    bool self_seen = false;
    if (!members_parse(pl, cfg->members, cfg->n_members, &set, &self, &self_seen, err, err_len))
        return false;
    if (!self_seen) {
        snprintf(err, err_len, "self id %u is not a member", cfg->self_id);
        return false;
    }
    memcpy(pl->self_addr, self.addr, sizeof self.addr);
    pl->self_sa = self.sa;
    pl->self_sa_len = self.sa_len;
    if (!addresses_unique(pl, &set, err, err_len))
        return false;
    slots_init(pl);
    apply_members(pl, &set, true);
    for (uint32_t i = 0; i < set.n; i++)
        atomic_store_explicit(&pl->peers[set.m[i].id].listed, true, memory_order_relaxed);
    return true;
}

/* ---- sockets ------------------------------------------------------------------ */

/* A listening socket on sa, or -errno. */
static int listen_on(const struct sockaddr_storage *sa, socklen_t sa_len)
{
    int fd = socket(sa->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int one = 1;
    /* a v6 literal means that address only, whatever bindv6only says */
    if ((sa->ss_family == AF_INET6 &&
         setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) != 0) ||
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(fd, (const struct sockaddr *)sa, sa_len) != 0 || listen(fd, LISTEN_BACKLOG) != 0) {
        int e = -errno;
        close(fd);
        return e;
    }
    return fd;
}

static int epoll_add(int epfd, int fd, uint32_t events, void *tag)
{
    struct epoll_event ev = { .events = events, .data.ptr = tag };
    return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) == 0 ? 0 : -errno;
}

/* The listening socket, the epoll set and both eventfds. */
static bool open_fds(struct peer_link *pl, char *err, size_t err_len)
{
    pl->listen_fd = listen_on(&pl->self_sa, pl->self_sa_len);
    if (pl->listen_fd < 0) {
        snprintf(err, err_len, "cannot listen on %s: %s", pl->self_addr, strerror(-pl->listen_fd));
        return false;
    }
    pl->epfd = epoll_create1(EPOLL_CLOEXEC);
    pl->io_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    pl->rx_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (pl->epfd < 0 || pl->io_efd < 0 || pl->rx_efd < 0) {
        snprintf(err, err_len, "epoll or eventfd: %s", strerror(errno));
        return false;
    }
    int rc = epoll_add(pl->epfd, pl->listen_fd, EPOLLIN | EPOLLET, &pl->listen_fd);
    if (rc == 0)
        rc = epoll_add(pl->epfd, pl->io_efd, EPOLLIN, &pl->io_efd);
    if (rc != 0) {
        snprintf(err, err_len, "epoll_ctl: %s", strerror(-rc));
        return false;
    }
    return true;
}

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

/* ---- output lists (I/O thread) ------------------------------------------------ */

static void out_item_free(struct out_item *it)
{
    base_buf_free(&it->b);
    free(it->members);
    free(it);
}

/* Drops one item, counting its frames in *why, and returns its bytes to
 * the producer's budget. */
static void out_drop(struct link_peer *p, struct out_item *it, _Atomic uint64_t *why)
{
    ctr_add(why, it->n_frames);
    /* release: whoever sees the bytes gone sees the frames counted */
    atomic_fetch_sub_explicit(&p->out_bytes, it->b.len, memory_order_release);
    out_item_free(it);
}

/* A link went down: what it had not written goes too, a partly written
 * item (a snapshot's remaining chunks, say) included. */
static void out_drop_all(struct link_peer *p)
{
    while (p->out_head != NULL) {
        struct out_item *it = p->out_head;
        p->out_head = it->next;
        out_drop(p, it, &p->ctr.dropped_no_link);
    }
    p->out_tail = NULL;
    p->out_off = 0;
}

/* Moves everything the producer queued onto its destination's list, or
 * drops it when that link is not the one the producer saw up; applies a
 * member change where it stands among the frames. */
static void take_out_items(struct peer_link *pl)
{
    struct base_mpsc_node *node;
    while ((node = base_mpsc_take(&pl->out_q)) != NULL) {
        struct out_item *it = ITEM_OF(node, struct out_item);
        if (it->to == 0) {
            BASE_ASSERT(it->members != NULL);
            apply_members(pl, it->members, false);
            out_item_free(it);
            continue;
        }
        struct link_peer *p = slot_of(pl, it->to);
        BASE_ASSERT(p != NULL); /* the producer checked it */
        if (!p->member || p->gen == 0 || it->gen != p->gen) {
            out_drop(p, it, &p->ctr.dropped_no_link);
            continue;
        }
        it->next = NULL;
        if (p->out_tail != NULL)
            p->out_tail->next = it;
        else
            p->out_head = it;
        p->out_tail = it;
    }
}

/* ---- links up and down (I/O thread) ------------------------------------------- */

/* The next attempt after a failure: [d / 2, d] from now, then d doubles up
 * to the max. The jitter keeps servers that failed together from retrying
 * in step; its generator is seeded, so a run replays. */
static void schedule_redial(struct peer_link *pl, struct link_peer *p, int64_t now)
{
    uint32_t d = p->backoff_ms;
    uint32_t jitter = (uint32_t)(base_rng_next(&pl->rng) % ((uint64_t)(d - d / 2) + 1));
    p->next_dial_ms = now + d / 2 + jitter;
    p->backoff_ms = d > pl->cfg.backoff_max_ms / 2 ? pl->cfg.backoff_max_ms : d * 2;
    BASE_ASSERT(p->next_dial_ms <= now + pl->cfg.backoff_max_ms);
}

static void link_up(struct peer_link *pl, struct conn *c)
{
    struct link_peer *p = c->peer;
    BASE_ASSERT(p != NULL && p->conn == c && p->gen == 0 && p->out_head == NULL);
    c->state = CONN_UP;
    c->deadline_ms = 0;
    p->gen = ++pl->gen_next;
    p->backoff_ms = pl->cfg.backoff_min_ms;
    p->logged_err = 0;
    atomic_store_explicit(&p->up_gen, p->gen, memory_order_relaxed);
    if (atomic_fetch_add_explicit(&p->ctr.ups, 1, memory_order_relaxed) > 0)
        ctr_add(&p->ctr.reconnects, 1);
    atomic_store_explicit(&p->ctr.up_since_ms, now_ms(pl), memory_order_relaxed);
    set_state(p, PEER_LINK_UP);
    link_log(pl, PEER_LINK_LOG_INFO, "%s: link up (%s%s%s)", c->name,
             c->dialled ? "dialled" : "accepted", c->tls != NULL ? ", " : "",
             c->tls != NULL ? tls_conn_protocol(c->tls) : "");
}

/* p's socket is gone (err says why): it sends nothing more, and a dialler
 * tries again after its backoff. */
static void link_down(struct peer_link *pl, struct link_peer *p, int err)
{
    atomic_store_explicit(&p->up_gen, 0, memory_order_relaxed);
    p->gen = 0;
    p->conn = NULL;
    out_drop_all(p);
    atomic_store_explicit(&p->ctr.last_err, err, memory_order_relaxed);
    atomic_store_explicit(&p->ctr.up_since_ms, 0, memory_order_relaxed);
    set_state(p, PEER_LINK_DOWN);
    if (p->dials)
        schedule_redial(pl, p, now_ms(pl));
}

/* One line per closed socket, except repeats of a dialler's failure to
 * connect (it retries every few seconds for as long as the peer is down),
 * and closes a member change made (apply_members says why). why: the
 * reason in words (close_reason's). */
static void log_close(struct peer_link *pl, struct conn *c, int err, const char *why)
{
    if (err == PEER_LINK_ESTOPPED || err == PEER_LINK_EREMOVED || err == PEER_LINK_EMOVED)
        return;
    if (c->peer == NULL) {
        link_log(pl, PEER_LINK_LOG_WARNING, "%s: connection closed: %s", c->name, why);
    } else if (c->state == CONN_UP) {
        link_log(pl, PEER_LINK_LOG_WARNING, "%s: link down: %s", c->name, why);
    } else if (err != c->peer->logged_err) {
        c->peer->logged_err = err;
        link_log(pl, PEER_LINK_LOG_WARNING, "%s: cannot connect: %s (retrying)", c->name, why);
    }
}

/* Why c closes, in words: OpenSSL's reason for a TLS failure (read before
 * the session goes), else peer_link_strerror's. */
static void close_reason(const struct conn *c, int err, char *why, size_t len)
{
    if (err != PEER_LINK_ETLS || c->tls == NULL)
        snprintf(why, len, "%s", peer_link_strerror(err));
    else if (!tls_conn_established(c->tls))
        snprintf(why, len, "TLS handshake failed: %s", tls_conn_error(c->tls));
    else
        snprintf(why, len, "TLS failure: %s", tls_conn_error(c->tls));
}

/* Closes c's socket now; its memory goes at the end of the pass. The log
 * line comes last, so whoever reads it sees the counters it speaks of. */
static void conn_fail(struct peer_link *pl, struct conn *c, int err)
{
    BASE_ASSERT(c->fd >= 0 && err != 0);
    char why[WHY_BYTES];
    close_reason(c, err, why, sizeof why);
    tls_conn_free(c->tls); /* its close_notify, if any, while fd is still its socket */
    c->tls = NULL;
    close_fd(&c->fd);
    if (c->peer != NULL) {
        BASE_ASSERT(c->peer->conn == c);
        link_down(pl, c->peer, err);
    } else {
        BASE_ASSERT(pl->n_pending > 0);
        pl->n_pending--;
        if (err != PEER_LINK_ESTOPPED)
            ctr_add(&pl->st_rejected, 1);
    }
    log_close(pl, c, err, why);
}

/* A bad frame from the other end (a PEER_E* or a HELLO rule). */
static void conn_fail_frame(struct peer_link *pl, struct conn *c, int err)
{
    if (c->peer != NULL)
        ctr_add(&c->peer->ctr.decode_errors, 1);
    conn_fail(pl, c, err);
}

static void conn_free(struct conn *c)
{
    BASE_ASSERT(c->tls == NULL); /* conn_fail freed it with the socket */
    base_buf_free(&c->tls_out);
    base_buf_free(&c->in);
    base_buf_free(&c->hello);
    peer_frame_free(&c->scratch);
    peer_snap_rx_reset(&c->snap);
    free(c);
}

static void sweep_conns(struct peer_link *pl)
{
    struct conn **pp = &pl->conns;
    while (*pp != NULL) {
        struct conn *c = *pp;
        if (c->fd >= 0) {
            pp = &c->next;
            continue;
        }
        *pp = c->next;
        conn_free(c);
    }
}

/* cfg.dead_link_ms on fd: unacknowledged data for that long, or silence
 * for that long (keepalive: idle a third of it, then 3 probes over the
 * rest), closes the connection. 0 or -errno. */
static int set_dead_link_timeout(int fd, uint32_t ms)
{
    if (ms == 0)
        return 0;
    int one = 1;
    unsigned int user_timeout = ms;
    int idle = (int)(ms / 3000) > 0 ? (int)(ms / 3000) : 1;
    int intvl = (int)((ms - (uint32_t)idle * 1000) / 3000) > 0
                    ? (int)((ms - (uint32_t)idle * 1000) / 3000)
                    : 1;
    int cnt = 3;
    if (setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof user_timeout) != 0 ||
        setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one) != 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle) != 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl) != 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt) != 0)
        return -errno;
    return 0;
}

/* A conn for a connected or connecting socket fd (taken: closed on
 * failure). TCP_NODELAY: raft messages are small and latency-bound, and
 * the write path already batches with sendmsg. */
static int conn_new(struct peer_link *pl, int fd, const char *name, struct conn **out)
{
    int one = 1;
    struct conn *c = calloc(1, sizeof *c);
    if (c == NULL) {
        close(fd);
        return -ENOMEM;
    }
    int rc = setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == 0 ? 0 : -errno;
    if (rc == 0)
        rc = set_dead_link_timeout(fd, pl->cfg.dead_link_ms);
    if (rc == 0)
        rc = epoll_add(pl->epfd, fd, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, c);
    if (rc != 0) {
        close(fd);
        free(c);
        return rc;
    }
    c->fd = fd;
    snprintf(c->name, sizeof c->name, "%s", name);
    peer_snap_rx_init(&c->snap, pl->cfg.snap_bytes_max);
    c->next = pl->conns;
    pl->conns = c;
    *out = c;
    return 0;
}

static void name_peer(struct conn *c, const struct link_peer *p)
{
    snprintf(c->name, sizeof c->name, "server %u (%s)", p->id, p->addr);
}

/* Our HELLO, to go out before anything else on c. */
static int queue_hello(struct peer_link *pl, struct conn *c)
{
    struct peer_hello h = {
        .version = PEER_VERSION_MAX,
        .from = pl->cfg.self_id,
        .to = c->peer->id,
        .cluster_id = pl->cfg.cluster_id,
    };
    BASE_ASSERT(c->hello.len == 0);
    return peer_encode_hello(&c->hello, &h);
}

/* ---- member changes (I/O thread) --------------------------------------------- */

/* p is no longer a member: its link closes, what was queued for it goes,
 * and its HELLO is refused from now on (member_of). */
static void peer_remove(struct peer_link *pl, struct link_peer *p)
{
    BASE_ASSERT(p->member);
    p->member = false;
    if (p->conn != NULL)
        conn_fail(pl, p->conn, PEER_LINK_EREMOVED);
    out_drop_all(p); /* empty already unless it was up: link_down dropped those */
    BASE_ASSERT(p->gen == 0 && p->out_head == NULL);
    link_log(pl, PEER_LINK_LOG_INFO, "server %u (%s): no longer a member", p->id, p->addr);
}

/* a is a member: a new one (dialled at the next pass if it is ours to
 * dial), or one at a new address (its link closes and is dialled there),
 * or one as it was (nothing happens). */
static void peer_place(struct peer_link *pl, const struct member_addr *a, int64_t now,
                       bool initial)
{
    struct link_peer *p = &pl->peers[a->id];
    bool moved = p->member && (p->sa_len != a->sa_len || memcmp(&p->sa, &a->sa, a->sa_len) != 0);
    memcpy(p->tls_name, a->tls_name, sizeof p->tls_name); /* checked at the next dial */
    if (p->member && !moved)
        return;
    if (moved && p->conn != NULL)
        conn_fail(pl, p->conn, PEER_LINK_EMOVED);
    if (moved)
        link_log(pl, PEER_LINK_LOG_INFO, "server %u (%s): now at %s", p->id, p->addr, a->addr);
    else if (!initial)
        link_log(pl, PEER_LINK_LOG_INFO, "server %u (%s): now a member", p->id, a->addr);
    p->sa = a->sa;
    p->sa_len = a->sa_len;
    memcpy(p->addr, a->addr, sizeof p->addr);
    p->member = true;
    p->backoff_ms = pl->cfg.backoff_min_ms;
    p->next_dial_ms = now;
    p->logged_err = 0;
    BASE_ASSERT(p->conn == NULL && p->gen == 0);
}

/* Makes set the members (peer_link_set_members): removals first, so that
 * an address a removed server held is free before another takes it. On
 * the owner's thread at peer_link_new (initial: no log lines), else on
 * the I/O thread, in queue order with the frames. */
static void apply_members(struct peer_link *pl, const struct member_set *set, bool initial)
{
    bool listed[PEER_SERVER_ID_MAX + 1] = { false };
    for (uint32_t i = 0; i < set->n; i++)
        listed[set->m[i].id] = true;
    for (uint32_t i = 0; i < pl->n_members; i++)
        if (!listed[pl->member_ids[i]])
            peer_remove(pl, &pl->peers[pl->member_ids[i]]);
    int64_t now = now_ms(pl);
    for (uint32_t i = 0; i < set->n; i++) {
        BASE_ASSERT(set->m[i].id != pl->cfg.self_id && (i == 0 || set->m[i - 1].id < set->m[i].id));
        peer_place(pl, &set->m[i], now, initial);
        pl->member_ids[i] = set->m[i].id;
    }
    pl->n_members = set->n;
}

/* ---- dialling and accepting (I/O thread) -------------------------------------- */

static void dial_failed(struct peer_link *pl, struct link_peer *p, int err, int64_t now)
{
    atomic_store_explicit(&p->ctr.last_err, err, memory_order_relaxed);
    schedule_redial(pl, p, now);
    if (err != p->logged_err) {
        p->logged_err = err;
        link_log(pl, PEER_LINK_LOG_WARNING, "server %u (%s): cannot connect: %s (retrying)",
                 p->id, p->addr, peer_link_strerror(err));
    }
}

/* With TLS, a dialled socket leaves from this server's quorum address:
 * the acceptor checks the dialler's certificate against the address it
 * sees (ssl.quorum.clientHostnameVerification), and on a host with many
 * addresses (loopback's 127/8 included) the kernel would otherwise pick
 * its own. The port is left to connect (IP_BIND_ADDRESS_NO_PORT), so
 * diallers do not use up ports early. A wildcard self address binds to
 * nothing in particular. 0 or -errno. */
static int bind_source(const struct peer_link *pl, int fd, int family)
{
    if (pl->self_sa.ss_family != family)
        return 0; /* an IPv6 member dialled from an IPv4 self: the kernel's choice */
    struct sockaddr_storage sa = pl->self_sa;
    if (family == AF_INET)
        ((struct sockaddr_in *)(void *)&sa)->sin_port = 0;
    else
        ((struct sockaddr_in6 *)(void *)&sa)->sin6_port = 0;
    int one = 1;
    if (setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one) != 0 ||
        bind(fd, (const struct sockaddr *)&sa, pl->self_sa_len) != 0)
        return -errno;
    return 0;
}

static void dial(struct peer_link *pl, struct link_peer *p, int64_t now)
{
    char name[NAME_BYTES];
    struct conn *c;
    ctr_add(&p->ctr.connects, 1);
    snprintf(name, sizeof name, "server %u (%s)", p->id, p->addr);
    int fd = socket(p->sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int rc = fd >= 0 ? conn_new(pl, fd, name, &c) : -errno;
    if (rc != 0) {
        dial_failed(pl, p, rc, now);
        return;
    }
    c->peer = p;
    c->dialled = true;
    c->state = CONN_CONNECTING;
    c->deadline_ms = now + pl->cfg.connect_timeout_ms;
    p->conn = c;
    set_state(p, PEER_LINK_CONNECTING);
    if (pl->cfg.tls != NULL && (rc = bind_source(pl, fd, p->sa.ss_family)) != 0)
        conn_fail(pl, c, rc);
    else if (connect(fd, (const struct sockaddr *)&p->sa, p->sa_len) == 0)
        c->wr_ready = true; /* done already: finish_connects sends the HELLO */
    else if (errno != EINPROGRESS)
        conn_fail(pl, c, -errno);
}

static void dial_due(struct peer_link *pl, int64_t now)
{
    for (uint32_t i = 0; i < pl->n_members; i++) {
        struct link_peer *p = &pl->peers[pl->member_ids[i]];
        BASE_ASSERT(p->member);
        if (p->dials && p->conn == NULL && now >= p->next_dial_ms)
            dial(pl, p, now);
    }
}

/* A connect finished (writable, or an error): on success, HELLO next. */
static void finish_connect(struct peer_link *pl, struct conn *c, int64_t now)
{
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
        err = errno;
    if (err != 0) {
        conn_fail(pl, c, -err);
        return;
    }
    c->state = CONN_HELLO;
    c->deadline_ms = now + pl->cfg.connect_timeout_ms;
    set_state(c->peer, PEER_LINK_HELLO);
    if (pl->cfg.tls != NULL) {
        /* the HELLO waits in c->hello until the handshake is done */
        c->tls = tls_conn_new_client(pl->cfg.tls, c->fd,
                                     pl->cfg.tls_verify_host ? c->peer->tls_name : NULL);
        if (c->tls == NULL) {
            conn_fail(pl, c, PEER_ENOMEM);
            return;
        }
    }
    int rc = queue_hello(pl, c);
    if (rc != 0)
        conn_fail(pl, c, rc);
}

static void finish_connects(struct peer_link *pl, int64_t now)
{
    for (struct conn *c = pl->conns; c != NULL; c = c->next)
        if (c->fd >= 0 && c->state == CONN_CONNECTING && c->wr_ready)
            finish_connect(pl, c, now);
}

static void accept_one(struct peer_link *pl, int fd, const struct sockaddr_storage *sa)
{
    char name[NAME_BYTES];
    struct conn *c;
    addr_text(sa, name, sizeof name);
    ctr_add(&pl->st_accepted, 1);
    if (pl->n_pending >= PENDING_MAX) {
        /* bounded, so connections that never say HELLO cannot pile up */
        ctr_add(&pl->st_rejected, 1);
        close(fd);
        link_log(pl, PEER_LINK_LOG_WARNING, "%s: connection closed: %s", name,
                 peer_link_strerror(PEER_LINK_ETOOMANY));
        return;
    }
    int rc = conn_new(pl, fd, name, &c);
    if (rc != 0) {
        ctr_add(&pl->st_rejected, 1);
        link_log(pl, PEER_LINK_LOG_WARNING, "%s: connection closed: %s", name,
                 peer_link_strerror(rc));
        return;
    }
    pl->n_pending++;
    c->state = CONN_HELLO;
    c->deadline_ms = now_ms(pl) + pl->cfg.connect_timeout_ms;
    c->rd_ready = true; /* a HELLO (or a ClientHello) may be there already */
    if (pl->cfg.tls != NULL) {
        char ip[INET6_ADDRSTRLEN];
        sa_host(sa, ip, sizeof ip);
        c->tls = tls_conn_new(pl->cfg.tls, c->fd, ip);
        if (c->tls == NULL)
            conn_fail(pl, c, PEER_ENOMEM);
    }
}

static void accept_conns(struct peer_link *pl)
{
    for (;;) {
        struct sockaddr_storage sa;
        socklen_t len = sizeof sa;
        int fd = accept4(pl->listen_fd, (struct sockaddr *)&sa, &len,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            accept_one(pl, fd, &sa);
            continue;
        }
        if (errno == EINTR || errno == ECONNABORTED)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            link_log(pl, PEER_LINK_LOG_ERR, "accept on %s: %s", pl->self_addr, strerror(errno));
        return; /* edge-triggered: the next connection raises the edge again */
    }
}

/* Connects and HELLOs that take longer than connect_timeout_ms. */
static void expire_conns(struct peer_link *pl, int64_t now)
{
    for (struct conn *c = pl->conns; c != NULL; c = c->next)
        if (c->fd >= 0 && c->state != CONN_UP && now >= c->deadline_ms)
            conn_fail(pl, c, PEER_LINK_ETIMEDOUT);
}

/* ---- TLS handshakes (I/O thread) ---------------------------------------------- */

/* Whether c may move frames: connected, and, with TLS, past the handshake. */
static bool conn_open(const struct conn *c)
{
    return c->state != CONN_CONNECTING && (c->tls == NULL || tls_conn_established(c->tls));
}

/* A handshake step, taken when the socket is ready the way the last one
 * waited (the dialler's first step writes). On EAGAIN that readiness is
 * used up: edge-triggered, the socket's next edge brings it back. Once
 * established, the pass's reads and writes take over (the HELLO next). */
static void handshake(struct peer_link *pl, struct conn *c)
{
    bool wr = tls_conn_wants_write(c->tls);
    if (!(wr ? c->wr_ready : c->rd_ready))
        return;
    int rc = tls_conn_handshake(c->tls);
    if (rc == 1)
        return;
    if (rc == 0)
        conn_fail(pl, c, PEER_LINK_ECLOSED);
    else if (errno != EAGAIN)
        conn_fail(pl, c, errno == EPROTO ? PEER_LINK_ETLS : -errno);
    else if (tls_conn_wants_write(c->tls))
        c->wr_ready = false;
    else
        c->rd_ready = false;
}

static void handshakes(struct peer_link *pl)
{
    for (struct conn *c = pl->conns; c != NULL; c = c->next)
        if (c->fd >= 0 && c->tls != NULL && c->state == CONN_HELLO &&
            !tls_conn_established(c->tls))
            handshake(pl, c);
}

/* ---- HELLO (I/O thread) ------------------------------------------------------- */

/* The acceptor's side: the HELLO names who dialled; refuse anyone who
 * should not have, and replace an older link from the same server. */
static int hello_accepted(struct peer_link *pl, struct conn *c, const struct peer_hello *h)
{
    int rc = peer_hello_check(h, pl->cfg.self_id, pl->cfg.cluster_id, 0);
    if (rc != 0)
        return rc;
    struct link_peer *p = member_of(pl, h->from);
    if (p == NULL)
        return PEER_LINK_ENOTMEMBER;
    if (p->dials)
        return PEER_LINK_ELOWER; /* one link per pair: the higher id dials */
    if (p->conn != NULL)
        conn_fail(pl, p->conn, PEER_LINK_EREPLACED); /* it restarted: the old link is dead */
    BASE_ASSERT(pl->n_pending > 0);
    pl->n_pending--;
    c->peer = p;
    p->conn = c;
    name_peer(c, p);
    ctr_add(&p->ctr.bytes_in, c->bytes_in_early); /* its HELLO, so in == the other's out */
    rc = queue_hello(pl, c);
    if (rc == 0)
        link_up(pl, c);
    return rc;
}

/* The first frame on a link: it must be a HELLO we accept. */
static void on_hello_frame(struct peer_link *pl, struct conn *c, const uint8_t *f, size_t len)
{
    int rc = peer_decode(f, len, &c->scratch);
    if (rc == 0 && c->scratch.type != PEER_HELLO)
        rc = PEER_LINK_ENOHELLO;
    if (rc != 0) {
        conn_fail_frame(pl, c, rc);
        return;
    }
    if (!c->dialled) {
        rc = hello_accepted(pl, c, &c->scratch.hello);
    } else {
        /* the dialler knows whom it called */
        rc = peer_hello_check(&c->scratch.hello, pl->cfg.self_id, pl->cfg.cluster_id,
                              c->peer->id);
        if (rc == 0)
            link_up(pl, c);
    }
    if (rc != 0)
        conn_fail_frame(pl, c, rc);
}

/* ---- input (I/O thread) ------------------------------------------------------- */

static void rx_item_free(struct rx_item *it)
{
    peer_frame_free(&it->frame);
    free(it->data);
    free(it->config);
    free(it);
}

/* Hands an item to the consumer. in_bytes grows before the push, so the
 * consumer's subtraction after its take can never go below zero. */
static void queue_rx(struct peer_link *pl, struct rx_item *it)
{
    atomic_fetch_add_explicit(&pl->in_bytes, it->bytes, memory_order_seq_cst);
    base_mpsc_push(&pl->rx_q, &it->node);
    pl->delivered++;
}

/* A decoded raft, FORWARD or TOUCH frame as the consumer sees it. */
static void fill_rx(struct peer_link *pl, struct rx_item *it, uint32_t from)
{
    struct peer_link_rx *rx = &it->rx;
    rx->from = from;
    switch (it->frame.type) {
    case PEER_FORWARD:
        rx->kind = PEER_LINK_RX_FORWARD;
        rx->forward = it->frame.forward;
        break;
    case PEER_TOUCH:
        rx->kind = PEER_LINK_RX_TOUCH;
        rx->touch = it->frame.touch;
        break;
    default:
        BASE_ASSERT(it->frame.type >= PEER_VOTE_REQ && it->frame.type <= PEER_READ_INDEX_RESP);
        rx->kind = PEER_LINK_RX_RAFT;
        rx->msg = it->frame.msg;
        rx->msg.from = from; /* from the HELLO: a peer speaks only for itself */
        rx->msg.to = pl->cfg.self_id;
        break;
    }
}

/* A raft, FORWARD or TOUCH frame: copied into an item of its own and
 * decoded there, so everything the consumer sees lives in the item. */
static int deliver_frame(struct peer_link *pl, struct conn *c, const uint8_t *f, size_t len)
{
    struct rx_item *it = calloc(1, sizeof *it);
    uint8_t *data = malloc(len);
    if (it == NULL || data == NULL) {
        free(it);
        free(data);
        return PEER_ENOMEM;
    }
    memcpy(data, f, len);
    it->data = data;
    it->bytes = len;
    int rc = peer_decode(data, len, &it->frame);
    if (rc != 0) {
        rx_item_free(it);
        return rc;
    }
    fill_rx(pl, it, c->peer->id);
    queue_rx(pl, it);
    return 0;
}

/* A SNAP_CHUNK (decoded into c->scratch): on the last one, the whole
 * snapshot goes to the consumer. Its bytes move out of the reassembler
 * into the item (no copy) and the reassembler starts empty. */
static int on_chunk(struct peer_link *pl, struct conn *c)
{
    struct raft_msg snap;
    int rc = peer_snap_rx_push(&c->snap, &c->scratch.chunk, &snap);
    if (rc <= 0)
        return rc;
    struct rx_item *it = calloc(1, sizeof *it);
    struct raft_config *conf = snap.snap_config != NULL ? malloc(sizeof *conf) : NULL;
    if (it == NULL || (snap.snap_config != NULL && conf == NULL)) {
        free(it);
        free(conf);
        return PEER_ENOMEM;
    }
    if (conf != NULL)
        *conf = *snap.snap_config; /* out of the reassembler, which is reset next */
    it->config = conf;
    it->data = c->snap.buf.data; /* snap.snap_data points at it (or at "" when empty) */
    it->bytes = snap.snap_len + (conf != NULL ? sizeof *conf : 0);
    c->snap.buf = (struct base_buf){ 0 };
    peer_snap_rx_reset(&c->snap);
    it->rx.kind = PEER_LINK_RX_RAFT;
    it->rx.from = c->peer->id;
    it->rx.msg = snap;
    it->rx.msg.snap_config = conf;
    it->rx.msg.from = c->peer->id;
    it->rx.msg.to = pl->cfg.self_id;
    queue_rx(pl, it);
    return 0;
}

/* One whole frame f[0..len) on an established link. */
static void on_frame(struct peer_link *pl, struct conn *c, const uint8_t *f, size_t len)
{
    BASE_ASSERT(c->state == CONN_UP && c->peer != NULL);
    uint8_t type = len > HDR ? f[HDR] : 0;
    int rc;
    if (type == PEER_HELLO || type == PEER_SNAP_CHUNK) {
        rc = peer_decode(f, len, &c->scratch);
        if (rc == 0)
            rc = type == PEER_HELLO ? PEER_LINK_EHELLO_AGAIN : on_chunk(pl, c);
    } else {
        rc = deliver_frame(pl, c, f, len);
    }
    if (rc == PEER_ENOMEM) {
        conn_fail(pl, c, rc); /* ours, not the frame's: not a decode error */
        return;
    }
    if (rc != 0) {
        conn_fail_frame(pl, c, rc);
        return;
    }
    ctr_add(&c->peer->ctr.frames_in, 1);
}

/* Handles every whole frame in c->in and keeps the partial one at the
 * front. Stops at the first error (c is then closed). */
static void parse_frames(struct peer_link *pl, struct conn *c)
{
    size_t off = 0;
    while (c->fd >= 0) {
        size_t flen;
        int rc = peer_frame_split(c->in.data + off, c->in.len - off, &flen);
        if (rc == 0 && c->state == CONN_HELLO && c->in.len - off >= HDR &&
            base_get_be32(c->in.data + off) > PRE_HELLO_BYTES_MAX)
            rc = PEER_LINK_ENOHELLO; /* too long to be a HELLO */
        if (rc < 0) {
            conn_fail_frame(pl, c, rc); /* both from the header alone */
            return;
        }
        if (rc == 0)
            break;
        if (c->state == CONN_HELLO)
            on_hello_frame(pl, c, c->in.data + off, flen);
        else
            on_frame(pl, c, c->in.data + off, flen);
        off += flen;
    }
    if (c->fd < 0)
        return;
    memmove(c->in.data, c->in.data + off, c->in.len - off);
    c->in.len -= off;
}

/* How much to read next: READ_BYTES, or for a longer frame in progress as
 * much of its rest as doubles the bytes held. The buffer thus grows with
 * what actually arrives, never ahead of it on a header's word, and to one
 * frame (plus a read) at most. */
static size_t read_size(const struct conn *c)
{
    if (c->in.len < HDR)
        return READ_BYTES;
    size_t frame = HDR + (size_t)base_get_be32(c->in.data); /* split bounded it */
    size_t rest = frame > c->in.len ? frame - c->in.len : 0;
    if (rest <= READ_BYTES)
        return READ_BYTES;
    size_t step = c->in.len > READ_BYTES ? c->in.len : READ_BYTES;
    return rest < step ? rest : step;
}

/* Whether the consumer has room for more. Past in_bytes_max, announce the
 * pause and look again (the consumer subtracts, then reads io_paused: one
 * of us sees the other, as in wake_if_sleeping), so a drain that makes
 * room always restarts reading. */
static bool rx_room(struct peer_link *pl)
{
    uint64_t max = pl->cfg.in_bytes_max;
    if (atomic_load_explicit(&pl->in_bytes, memory_order_seq_cst) >= max) {
        if (!pl->paused) {
            pl->paused = true;
            atomic_store_explicit(&pl->io_paused, true, memory_order_seq_cst);
            ctr_add(&pl->st_in_paused, 1);
        }
        if (atomic_load_explicit(&pl->in_bytes, memory_order_seq_cst) >= max)
            return false;
    }
    if (pl->paused) {
        pl->paused = false;
        atomic_store_explicit(&pl->io_paused, false, memory_order_relaxed);
    }
    return true;
}

/* The socket is empty: wait for its next edge. */
static void read_drained(struct conn *c)
{
    c->rd_ready = false;
    if (c->in.len == 0 && c->in.cap > IN_KEEP_BYTES_MAX)
        base_buf_free(&c->in); /* one big frame does not pin its buffer */
}

/* read(2) on c's socket, or its TLS session's: a record's bytes at most
 * (want is at least a record's: nothing decrypted stays inside OpenSSL). */
static ssize_t conn_recv(struct conn *c, void *buf, size_t want)
{
    if (c->tls == NULL)
        return read(c->fd, buf, want);
    return tls_conn_recv(c->tls, buf, want);
}

/* A read said EAGAIN. A TLS read may wait for output (a post-handshake
 * message to answer): it resumes on the socket's next EPOLLOUT. */
static void read_blocked(struct conn *c)
{
    if (c->tls != NULL && tls_conn_wants_write(c->tls)) {
        c->rd_ready = false;
        c->tls_rd_wants_write = true;
        return;
    }
    read_drained(c);
}

/* Reads c until EAGAIN, its per-pass budget, or the consumer's bound.
 * true: it stopped with bytes perhaps left (another pass at once). */
static bool conn_read(struct peer_link *pl, struct conn *c)
{
    size_t got = 0;
    while (c->fd >= 0 && got < READ_PASS_BYTES_MAX && rx_room(pl)) {
        size_t want = read_size(c);
        if (base_buf_reserve(&c->in, want) != 0) {
            conn_fail(pl, c, PEER_ENOMEM);
            return false;
        }
        ssize_t n = conn_recv(c, c->in.data + c->in.len, want);
        if (n > 0) {
            c->in.len += (size_t)n;
            got += (size_t)n;
            if (c->peer != NULL)
                ctr_add(&c->peer->ctr.bytes_in, (uint64_t)n);
            else
                c->bytes_in_early += (uint64_t)n;
            parse_frames(pl, c);
            /* a short plain read saves the read that would say EAGAIN; a
             * TLS read is a record at most, short whatever is left */
            if ((size_t)n < want && !c->rd_hup && c->fd >= 0 && c->tls == NULL) {
                read_drained(c);
                return false;
            }
        } else if (n == 0) {
            conn_fail(pl, c, PEER_LINK_ECLOSED);
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            read_blocked(c);
            return false;
        } else if (errno != EINTR) {
            conn_fail(pl, c, errno == EPROTO && c->tls != NULL ? PEER_LINK_ETLS : -errno);
        }
    }
    return c->fd >= 0 && got >= READ_PASS_BYTES_MAX;
}

static bool read_links(struct peer_link *pl)
{
    bool more = false;
    for (struct conn *c = pl->conns; c != NULL; c = c->next)
        if (c->fd >= 0 && c->rd_ready && conn_open(c) && conn_read(pl, c))
            more = true;
    return more;
}

static void notify_consumer(struct peer_link *pl)
{
    if (pl->delivered == 0)
        return;
    pl->delivered = 0;
    if (pl->cfg.notify != NULL)
        pl->cfg.notify(pl->cfg.notify_arg);
    wake_if_sleeping(&pl->rx_sleeping, pl->rx_efd);
}

/* ---- output (I/O thread) ------------------------------------------------------ */

static bool conn_has_output(const struct conn *c)
{
    return c->hello_off < c->hello.len || (c->state == CONN_UP && c->peer->out_head != NULL);
}

/* Up to WRITE_IOV_MAX pieces: the rest of our HELLO, then queued items. */
static int gather(const struct conn *c, struct iovec *iov)
{
    int n = 0;
    if (c->hello_off < c->hello.len)
        iov[n++] = (struct iovec){ c->hello.data + c->hello_off, c->hello.len - c->hello_off };
    if (c->state != CONN_UP)
        return n;
    size_t off = c->peer->out_off;
    for (struct out_item *it = c->peer->out_head; it != NULL && n < WRITE_IOV_MAX; it = it->next) {
        iov[n++] = (struct iovec){ it->b.data + off, it->b.len - off };
        off = 0;
    }
    return n;
}

/* Accounts for w bytes written: the HELLO first, then whole items. */
static void consume(struct conn *c, size_t w)
{
    size_t h = c->hello.len - c->hello_off;
    size_t take = w < h ? w : h;
    c->hello_off += take;
    w -= take;
    if (c->hello.len > 0 && c->hello_off == c->hello.len) {
        base_buf_free(&c->hello);
        c->hello_off = 0;
    }
    struct link_peer *p = c->peer;
    while (w > 0) {
        struct out_item *it = p->out_head;
        BASE_ASSERT(it != NULL && c->state == CONN_UP);
        size_t left = it->b.len - p->out_off;
        if (w < left) {
            p->out_off += w;
            return;
        }
        w -= left;
        p->out_off = 0;
        p->out_head = it->next;
        if (p->out_head == NULL)
            p->out_tail = NULL;
        ctr_add(&p->ctr.frames_out, it->n_frames);
        atomic_fetch_sub_explicit(&p->out_bytes, it->b.len, memory_order_release);
        out_item_free(it);
    }
}

/* Tops c->tls_out up to a record's worth with the unsent bytes that follow
 * what it holds (the HELLO's rest, then the queue's), so that small
 * frames share a record and a system call as they share a sendmsg on a
 * plain link. 0 or PEER_ENOMEM. */
static int stage_output(struct conn *c)
{
    struct iovec iov[WRITE_IOV_MAX];
    int n = c->tls_out.len < TLS_RECORD_MAX ? gather(c, iov) : 0;
    size_t skip = c->tls_out.len; /* staged already: the front of the output */
    for (int i = 0; i < n && c->tls_out.len < TLS_RECORD_MAX; i++) {
        if (skip >= iov[i].iov_len) {
            skip -= iov[i].iov_len;
            continue;
        }
        size_t take = iov[i].iov_len - skip;
        if (take > TLS_RECORD_MAX - c->tls_out.len)
            take = TLS_RECORD_MAX - c->tls_out.len;
        if (base_buf_append(&c->tls_out, (const uint8_t *)iov[i].iov_base + skip, take) != 0)
            return PEER_ENOMEM;
        skip = 0;
    }
    return 0;
}

/* conn_write over TLS: a record at a time from the staged copy; bytes
 * count as written (consume) once the session took them. */
static void conn_write_tls(struct peer_link *pl, struct conn *c)
{
    while (c->fd >= 0 && conn_has_output(c)) {
        if (stage_output(c) != 0) {
            conn_fail(pl, c, PEER_ENOMEM);
            return;
        }
        ssize_t w = tls_conn_send(c->tls, c->tls_out.data, c->tls_out.len);
        if (w > 0) {
            ctr_add(&c->peer->ctr.bytes_out, (uint64_t)w);
            consume(c, (size_t)w);
            memmove(c->tls_out.data, c->tls_out.data + w, c->tls_out.len - (size_t)w);
            c->tls_out.len -= (size_t)w;
        } else if (errno == EAGAIN) {
            c->wr_ready = false;
            return;
        } else {
            conn_fail(pl, c, errno == EPROTO ? PEER_LINK_ETLS : -errno);
            return;
        }
    }
}

static void conn_write(struct peer_link *pl, struct conn *c)
{
    if (c->tls != NULL) {
        conn_write_tls(pl, c);
        return;
    }
    while (c->fd >= 0 && conn_has_output(c)) {
        struct iovec iov[WRITE_IOV_MAX];
        struct msghdr mh = { .msg_iov = iov, .msg_iovlen = (size_t)gather(c, iov) };
        ssize_t w = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w >= 0) {
            ctr_add(&c->peer->ctr.bytes_out, (uint64_t)w);
            consume(c, (size_t)w);
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            c->wr_ready = false;
        } else if (errno != EINTR) {
            conn_fail(pl, c, -errno);
        }
        if (!c->wr_ready)
            return;
    }
}

static void write_links(struct peer_link *pl)
{
    for (struct conn *c = pl->conns; c != NULL; c = c->next)
        if (c->fd >= 0 && c->wr_ready && conn_open(c) && conn_has_output(c))
            conn_write(pl, c);
}

/* ---- the loop (I/O thread) ---------------------------------------------------- */

static void on_event(struct peer_link *pl, const struct epoll_event *ev)
{
    void *tag = ev->data.ptr;
    if (tag == &pl->listen_fd) {
        accept_conns(pl);
        return;
    }
    if (tag == &pl->io_efd) {
        eventfd_clear(pl->io_efd);
        return;
    }
    struct conn *c = tag; /* alive: conns are freed only after their fd is closed */
    if (ev->events & (EPOLLIN | EPOLLRDHUP | EPOLLERR | EPOLLHUP))
        c->rd_ready = true;
    if (ev->events & (EPOLLRDHUP | EPOLLERR | EPOLLHUP))
        c->rd_hup = true;
    if (ev->events & (EPOLLOUT | EPOLLERR | EPOLLHUP))
        c->wr_ready = true;
    if ((ev->events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) && c->tls_rd_wants_write) {
        c->tls_rd_wants_write = false; /* the read that waited for output goes on */
        c->rd_ready = true;
    }
}

/* Blocks up to wait_ms for sockets or a kick. The producer's flush kicks
 * only while io_sleeping is set, so the queue is looked at after setting
 * it (the protocol of wake_if_sleeping). */
static void io_wait(struct peer_link *pl, int wait_ms)
{
    struct epoll_event evs[EVENTS_MAX];
    if (wait_ms > 0) {
        atomic_store_explicit(&pl->io_sleeping, true, memory_order_seq_cst);
        if (!base_mpsc_empty(&pl->out_q) || atomic_load(&pl->stop))
            wait_ms = 0;
    }
    int n = epoll_wait(pl->epfd, evs, EVENTS_MAX, wait_ms);
    atomic_store_explicit(&pl->io_sleeping, false, memory_order_relaxed);
    BASE_ASSERT(n >= 0 || errno == EINTR); /* our own epoll set: nothing else can fail */
    for (int i = 0; i < n; i++)
        on_event(pl, &evs[i]);
}

/* How long the loop may sleep: until the next deadline or dial, at most
 * WAIT_MS_MAX. */
static int next_wait_ms(const struct peer_link *pl, int64_t now)
{
    int64_t next = now + WAIT_MS_MAX;
    for (const struct conn *c = pl->conns; c != NULL; c = c->next)
        if (c->fd >= 0 && c->state != CONN_UP && c->deadline_ms < next)
            next = c->deadline_ms;
    for (uint32_t i = 0; i < pl->n_members; i++) {
        const struct link_peer *p = &pl->peers[pl->member_ids[i]];
        if (p->dials && p->conn == NULL && p->next_dial_ms < next)
            next = p->next_dial_ms;
    }
    return next <= now ? 0 : (int)(next - now);
}

/* One pass: timers, the producer's items, connects, reads (which may
 * queue HELLO answers), writes, then the consumer's wake-up. */
static int io_pass(struct peer_link *pl)
{
    int64_t now = now_ms(pl);
    expire_conns(pl, now);
    dial_due(pl, now);
    take_out_items(pl);
    finish_connects(pl, now);
    if (pl->cfg.tls != NULL)
        handshakes(pl);
    bool more = read_links(pl);
    write_links(pl);
    notify_consumer(pl);
    sweep_conns(pl);
    return more ? 0 : next_wait_ms(pl, now);
}

/* Closes everything; items still queued are dropped (no link). */
static void io_shutdown(struct peer_link *pl)
{
    for (uint32_t id = 0; id <= PEER_SERVER_ID_MAX; id++)
        atomic_store_explicit(&pl->peers[id].up_gen, 0, memory_order_relaxed);
    for (struct conn *c = pl->conns; c != NULL; c = c->next)
        if (c->fd >= 0)
            conn_fail(pl, c, PEER_LINK_ESTOPPED);
    take_out_items(pl);
    notify_consumer(pl);
    sweep_conns(pl);
}

static void *io_main(void *arg)
{
    struct peer_link *pl = arg;
    int wait_ms = 0;
    pthread_setname_np(pthread_self(), "larch-peer");
    while (!atomic_load_explicit(&pl->stop, memory_order_acquire)) {
        io_wait(pl, wait_ms);
        wait_ms = io_pass(pl);
    }
    io_shutdown(pl);
    return NULL;
}

/* ---- owner -------------------------------------------------------------------- */

struct peer_link *peer_link_new(const struct peer_link_cfg *cfg, char *err, size_t err_len)
{
    char msg[LOG_LINE_BYTES] = "";
    struct peer_link *pl = calloc(1, sizeof *pl);
    if (pl == NULL) {
        if (err != NULL && err_len > 0)
            snprintf(err, err_len, "peer link: out of memory");
        return NULL;
    }
    pl->cfg = *cfg;
    pl->cfg.members = NULL; /* copied into pl->peers */
    pl->cfg.n_members = 0;
    cfg_defaults(&pl->cfg);
    pl->listen_fd = pl->epfd = pl->io_efd = pl->rx_efd = -1;
    base_mpsc_init(&pl->out_q);
    base_mpsc_init(&pl->rx_q);
    /* the self id mixed in: servers that share a seed still jitter apart */
    base_rng_seed(&pl->rng, cfg->seed ^ ((uint64_t)cfg->self_id << 56));
    if (cfg_load(pl, cfg, msg, sizeof msg) && open_fds(pl, msg, sizeof msg))
        return pl;
    link_log(pl, PEER_LINK_LOG_ERR, "%s", msg);
    if (err != NULL && err_len > 0)
        snprintf(err, err_len, "%s", msg);
    close_fd(&pl->rx_efd);
    close_fd(&pl->io_efd);
    close_fd(&pl->epfd);
    close_fd(&pl->listen_fd);
    free(pl);
    return NULL;
}

int peer_link_start(struct peer_link *pl)
{
    BASE_ASSERT(!pl->started && !pl->stopped);
    if (!pl->cfg.inline_io) {
        int rc = pthread_create(&pl->thread, NULL, io_main, pl);
        if (rc != 0)
            return -rc;
    }
    pl->started = true;
    return 0;
}

void peer_link_stop(struct peer_link *pl)
{
    if (pl->stopped)
        return;
    pl->stopped = true;
    if (pl->cfg.inline_io) {
        /* the consumer made its last call: its thread's role is ours */
        atomic_store_explicit(&pl->stop, true, memory_order_release);
        io_shutdown(pl);
    } else if (pl->started) {
        atomic_store_explicit(&pl->stop, true, memory_order_release);
        kick(pl->io_efd); /* whatever it is waiting for */
        pthread_join(pl->thread, NULL);
    }
    close_fd(&pl->listen_fd);
}

void peer_link_free(struct peer_link *pl)
{
    if (pl == NULL)
        return;
    peer_link_stop(pl);
    struct base_mpsc_node *node;
    while ((node = base_mpsc_take(&pl->out_q)) != NULL)
        out_item_free(ITEM_OF(node, struct out_item));
    while ((node = base_mpsc_take(&pl->rx_q)) != NULL)
        rx_item_free(ITEM_OF(node, struct rx_item));
    BASE_ASSERT(pl->conns == NULL);
    close_fd(&pl->rx_efd);
    close_fd(&pl->io_efd);
    close_fd(&pl->epfd);
    free(pl);
}

/* ---- producer ----------------------------------------------------------------- */

/* The destination, if its link is up; otherwise the n_frames are counted
 * dropped. Checked before encoding, so a down link costs no copy. */
static int out_begin(struct peer_link *pl, uint32_t to, uint64_t n_frames,
                     struct link_peer **pp, uint64_t *gen)
{
    struct link_peer *p = slot_of(pl, to);
    if (p == NULL)
        return PEER_LINK_EDEST;
    /* not listed: dropped as for a down link (a member change raced the
     * sender's view; Raft retransmits to whoever is a member) */
    bool listed = atomic_load_explicit(&p->listed, memory_order_relaxed);
    *gen = listed ? atomic_load_explicit(&p->up_gen, memory_order_relaxed) : 0;
    if (*gen == 0) {
        ctr_add(&p->ctr.dropped_no_link, n_frames);
        return PEER_LINK_ENOLINK;
    }
    *pp = p;
    return 0;
}

/* Whether bytes more fit under out_bytes_max (a message alone always fits:
 * a snapshot above the bound would otherwise never be sent); if not, the
 * n_frames are counted dropped. The I/O thread only ever lowers out_bytes,
 * and there is one producer, so the answer cannot go stale in between. */
static bool out_fits(const struct peer_link *pl, struct link_peer *p, size_t bytes,
                     uint64_t n_frames)
{
    uint64_t queued = atomic_load_explicit(&p->out_bytes, memory_order_relaxed);
    if (queued == 0 || (bytes <= pl->cfg.out_bytes_max && queued <= pl->cfg.out_bytes_max - bytes))
        return true;
    ctr_add(&p->ctr.dropped_full, n_frames);
    return false;
}

static struct out_item *out_item_new(uint32_t to, uint64_t gen, uint64_t n_frames)
{
    struct out_item *it = calloc(1, sizeof *it);
    if (it != NULL) {
        it->to = to;
        it->gen = gen;
        it->n_frames = n_frames;
    }
    return it;
}

/* Queues an encoded item (rc: the encoder's result) or frees it. */
static int out_commit(struct peer_link *pl, struct link_peer *p, struct out_item *it, int rc)
{
    if (rc == 0 && !out_fits(pl, p, it->b.len, it->n_frames))
        rc = PEER_LINK_EFULL;
    if (rc != 0) {
        out_item_free(it);
        return rc;
    }
    atomic_fetch_add_explicit(&p->out_bytes, it->b.len, memory_order_relaxed);
    base_mpsc_push(&pl->out_q, &it->node);
    pl->flush_pending = true;
    return 0;
}

/* All of a snapshot's chunks in one item: they are queued, written in
 * order and dropped together, so the other side never sees a snapshot
 * with a hole in it (a link that drops mid-way discards the rest). */
static int send_snap(struct peer_link *pl, const struct raft_msg *m)
{
    if (m->snap_len > pl->cfg.snap_bytes_max)
        return PEER_ESNAP_BOUND; /* the other side would refuse it and close the link */
    size_t chunk = pl->cfg.chunk_bytes;
    uint64_t n;
    size_t bytes = peer_snap_frames_bytes(m, chunk, &n); /* its membership included */
    struct link_peer *p;
    uint64_t gen;
    int rc = out_begin(pl, m->to, n, &p, &gen);
    if (rc != 0)
        return rc;
    if (!out_fits(pl, p, bytes, n))
        return PEER_LINK_EFULL;
    struct out_item *it = out_item_new(m->to, gen, n);
    if (it == NULL || base_buf_reserve(&it->b, bytes) != 0) {
        free(it);
        return PEER_ENOMEM;
    }
    uint64_t off = 0;
    while ((rc = peer_snap_encode(&it->b, m, &off, chunk)) == 0)
        ;
    if (rc == 1) {
        BASE_ASSERT(it->b.len == bytes && off == m->snap_len);
        rc = 0;
    }
    return out_commit(pl, p, it, rc);
}

int peer_link_send_msg(struct peer_link *pl, const struct raft_msg *m)
{
    if (m->type == RAFT_MSG_SNAP)
        return send_snap(pl, m);
    struct link_peer *p;
    uint64_t gen;
    int rc = out_begin(pl, m->to, 1, &p, &gen);
    if (rc != 0)
        return rc;
    struct out_item *it = out_item_new(m->to, gen, 1);
    if (it == NULL)
        return PEER_ENOMEM;
    return out_commit(pl, p, it, peer_encode_msg(&it->b, m));
}

uint64_t peer_link_gen(struct peer_link *pl, uint32_t to)
{
    struct link_peer *p = slot_of(pl, to);
    if (p == NULL || !atomic_load_explicit(&p->listed, memory_order_relaxed))
        return 0;
    return atomic_load_explicit(&p->up_gen, memory_order_relaxed);
}

int peer_link_send_forward(struct peer_link *pl, uint32_t to, const struct peer_forward *f)
{
    struct link_peer *p;
    uint64_t gen;
    int rc = out_begin(pl, to, 1, &p, &gen);
    if (rc != 0)
        return rc;
    struct out_item *it = out_item_new(to, gen, 1);
    if (it == NULL)
        return PEER_ENOMEM;
    return out_commit(pl, p, it, peer_encode_forward(&it->b, f));
}

int peer_link_send_touch(struct peer_link *pl, uint32_t to, const int64_t *session_ids,
                         uint32_t n)
{
    struct link_peer *p;
    uint64_t gen;
    int rc = out_begin(pl, to, 1, &p, &gen);
    if (rc != 0)
        return rc;
    struct out_item *it = out_item_new(to, gen, 1);
    if (it == NULL)
        return PEER_ENOMEM;
    return out_commit(pl, p, it, peer_encode_touch(&it->b, session_ids, n));
}

void peer_link_flush(struct peer_link *pl)
{
    if (!pl->flush_pending)
        return;
    pl->flush_pending = false;
    if (!pl->cfg.inline_io) {
        wake_if_sleeping(&pl->io_sleeping, pl->io_efd);
        return;
    }
    if (atomic_load_explicit(&pl->stop, memory_order_acquire))
        return;
    take_out_items(pl);
    write_links(pl);
    notify_consumer(pl); /* a link that failed writing may have queued its news */
    sweep_conns(pl);
}

int peer_link_poll(struct peer_link *pl)
{
    BASE_ASSERT(pl->cfg.inline_io);
    if (atomic_load_explicit(&pl->stop, memory_order_acquire))
        return WAIT_MS_MAX;
    io_wait(pl, 0);
    return io_pass(pl);
}

int peer_link_io_fd(const struct peer_link *pl)
{
    BASE_ASSERT(pl->cfg.inline_io);
    return pl->epfd;
}

/* m[0..n) checked and parsed into a new set, or NULL with *rc set
 * (-EINVAL with the reason in msg, or -ENOMEM). */
static struct member_set *member_set_new(const struct peer_link *pl,
                                         const struct peer_link_member *m, uint32_t n, char *msg,
                                         size_t msg_len, int *rc)
{
    *rc = -EINVAL;
    if (n > PEER_LINK_MEMBERS_MAX || (n > 0 && m == NULL)) {
        snprintf(msg, msg_len, "%u members: 0..%u are allowed", n, PEER_LINK_MEMBERS_MAX);
        return NULL;
    }
    struct member_set *set = malloc(sizeof *set);
    if (set == NULL) {
        *rc = -ENOMEM;
        return NULL;
    }
    if (members_parse(pl, m, n, set, NULL, NULL, msg, msg_len) &&
        addresses_unique(pl, set, msg, msg_len)) {
        *rc = 0;
        return set;
    }
    free(set);
    return NULL;
}

/* The set is checked and parsed here, on the producer's thread, so the I/O
 * thread only applies it. listed changes at once, so the producer's next
 * send and any status reader see the new set before the I/O thread does (a
 * send to a new member finds no link yet: ENOLINK, as for a down one). */
int peer_link_set_members(struct peer_link *pl, const struct peer_link_member *m, uint32_t n,
                          char *err, size_t err_len)
{
    char msg[LOG_LINE_BYTES] = "";
    int rc;
    struct member_set *set = member_set_new(pl, m, n, msg, sizeof msg, &rc);
    struct out_item *it = set != NULL ? out_item_new(0, 0, 0) : NULL;
    if (set != NULL && it == NULL)
        rc = -ENOMEM;
    if (rc != 0) {
        free(set);
        if (rc == -EINVAL && err != NULL && err_len > 0)
            snprintf(err, err_len, "%s", msg);
        return rc;
    }
    it->members = set;
    bool listed[PEER_SERVER_ID_MAX + 1] = { false };
    for (uint32_t i = 0; i < set->n; i++)
        listed[set->m[i].id] = true;
    for (uint32_t id = 1; id <= PEER_SERVER_ID_MAX; id++)
        if (id != pl->cfg.self_id)
            atomic_store_explicit(&pl->peers[id].listed, listed[id], memory_order_release);
    base_mpsc_push(&pl->out_q, &it->node); /* after the frames sent before this call */
    pl->flush_pending = true;
    peer_link_flush(pl); /* a member change should not wait for the next frame */
    return 0;
}

/* ---- consumer ----------------------------------------------------------------- */

/* Gives bytes back to the inbound budget; restarts a paused I/O thread
 * once there is room (the other half of rx_room's protocol). */
static void rx_release(struct peer_link *pl, uint64_t bytes)
{
    uint64_t before = atomic_fetch_sub_explicit(&pl->in_bytes, bytes, memory_order_seq_cst);
    BASE_ASSERT(before >= bytes);
    if (before - bytes < pl->cfg.in_bytes_max &&
        atomic_load_explicit(&pl->io_paused, memory_order_seq_cst))
        kick(pl->io_efd);
}

size_t peer_link_drain(struct peer_link *pl, peer_link_rx_fn fn, void *arg)
{
    size_t n = 0;
    uint64_t bytes = 0;
    struct base_mpsc_node *node;
    while (n < PEER_LINK_DRAIN_MAX && (node = base_mpsc_take(&pl->rx_q)) != NULL) {
        struct rx_item *it = ITEM_OF(node, struct rx_item);
        fn(arg, &it->rx);
        bytes += it->bytes;
        rx_item_free(it);
        n++;
    }
    if (bytes > 0)
        rx_release(pl, bytes);
    return n;
}

bool peer_link_idle_begin(struct peer_link *pl)
{
    atomic_store_explicit(&pl->rx_sleeping, true, memory_order_seq_cst);
    if (base_mpsc_empty(&pl->rx_q))
        return true;
    atomic_store_explicit(&pl->rx_sleeping, false, memory_order_relaxed);
    return false;
}

void peer_link_idle_end(struct peer_link *pl)
{
    atomic_store_explicit(&pl->rx_sleeping, false, memory_order_relaxed);
}

void peer_link_ack(struct peer_link *pl)
{
    eventfd_clear(pl->rx_efd);
}

/* ---- anyone ------------------------------------------------------------------- */

int peer_link_fd(const struct peer_link *pl)
{
    return pl->rx_efd;
}

int peer_link_status(const struct peer_link *pl, uint32_t id, struct peer_link_peer_status *st)
{
    if (id < 1 || id > PEER_SERVER_ID_MAX || id == pl->cfg.self_id)
        return -ENOENT;
    const struct link_peer *p = &pl->peers[id];
    if (!atomic_load_explicit(&p->listed, memory_order_acquire))
        return -ENOENT;
    const struct peer_ctr *k = &p->ctr;
    /* acquire: the counters written before these are at least that new */
    int state = atomic_load_explicit(&k->state, memory_order_acquire);
    uint64_t queued = atomic_load_explicit(&p->out_bytes, memory_order_acquire);
    *st = (struct peer_link_peer_status){
        .id = p->id,
        .dials = p->dials,
        .state = (uint8_t)state,
        .connected = state == PEER_LINK_UP,
        .up_since_ms = atomic_load_explicit(&k->up_since_ms, memory_order_relaxed),
        .frames_in = ctr_get(&k->frames_in),
        .bytes_in = ctr_get(&k->bytes_in),
        .frames_out = ctr_get(&k->frames_out),
        .bytes_out = ctr_get(&k->bytes_out),
        .dropped_no_link = ctr_get(&k->dropped_no_link),
        .dropped_full = ctr_get(&k->dropped_full),
        .decode_errors = ctr_get(&k->decode_errors),
        .connects = ctr_get(&k->connects),
        .ups = ctr_get(&k->ups),
        .reconnects = ctr_get(&k->reconnects),
        .out_queued_bytes = queued,
        .tls = pl->cfg.tls != NULL,
        .last_err = atomic_load_explicit(&k->last_err, memory_order_relaxed),
    };
    return 0;
}

void peer_link_stats(const struct peer_link *pl, struct peer_link_stats *st)
{
    *st = (struct peer_link_stats){
        .in_queued_bytes = ctr_get(&pl->in_bytes),
        .in_paused = ctr_get(&pl->st_in_paused),
        .accepted = ctr_get(&pl->st_accepted),
        .rejected = ctr_get(&pl->st_rejected),
    };
}

const char *peer_link_strerror(int err)
{
    switch (err) {
    case 0: return "ok";
    case PEER_LINK_ENOLINK: return "no established link (dropped)";
    case PEER_LINK_EFULL: return "send queue full (dropped)";
    case PEER_LINK_EDEST: return "not another member";
    case PEER_LINK_ECLOSED: return "closed by the other end";
    case PEER_LINK_ETIMEDOUT: return "connect or HELLO timed out";
    case PEER_LINK_ENOHELLO: return "frame before HELLO";
    case PEER_LINK_EHELLO_AGAIN: return "second HELLO on one link";
    case PEER_LINK_ENOTMEMBER: return "HELLO from a server that is not a member";
    case PEER_LINK_ELOWER: return "HELLO from a lower id (it must accept, not dial)";
    case PEER_LINK_EREPLACED: return "replaced by a newer link from the same server";
    case PEER_LINK_ETOOMANY: return "too many connections awaiting HELLO";
    case PEER_LINK_ESTOPPED: return "link stopped";
    case PEER_LINK_EREMOVED: return "server removed from the members";
    case PEER_LINK_EMOVED: return "server moved to another address";
    case PEER_LINK_ETLS: return "TLS handshake or record failed";
    default: break;
    }
    if (err <= PEER_ENOMEM && err > PEER_ENOMEM - 100)
        return peer_strerror(err);
    if (err < 0 && err > -4096)
        return strerror(-err);
    return "unknown peer link error";
}
