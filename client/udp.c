/*
 * udp.c — liblarch's UDP read transport (larch.h, "reads over UDP"): one
 * connected UDP socket to one larchd, one request in flight, re-sent until
 * its reply comes. The datagrams are proto's (zk_put_udp_request_header,
 * zk_get_udp_reply); the replies' records are decoded by codec.c, as on TCP.
 */
#include "client/lc_int.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define REPLY_BYTES_MAX 65536
#define UDP_PAYLOAD_MAX 65507     /* the largest IPv4 UDP datagram */
#define BEHIND_WAIT_FIRST_NS 1000000ll  /* 1 ms, doubling */
#define BEHIND_WAIT_MAX_NS 50000000ll   /* 50 ms */
#define NS_PER_MS 1000000ll

struct larch_udp {
    pthread_mutex_t mu; /* one read at a time; guards everything below */
    int fd;             /* connected to the server */
    struct larch *lh;   /* NULL: anonymous */
    char *chroot;       /* anonymous transports: from the address; else lh's */
    int64_t timeout_ns, retry_ns;
    uint64_t next_id;
    int64_t seen_zxid;
    struct zk_wbuf req;
    uint8_t *reply; /* REPLY_BYTES_MAX */
};

/* What a read is signed with: lh's session, copied under its lock. */
struct udp_session {
    int64_t id; /* 0: anonymous */
    uint8_t passwd[LARCH_PASSWD_LEN];
    int64_t last_zxid;
};

/* ---- opening ---------------------------------------------------------------------- */

/* "host:port" with the port given: a UDP server has no default port. */
static bool has_port(const char *address)
{
    const char *slash = strchr(address, '/');
    size_t n = slash ? (size_t)(slash - address) : strlen(address);
    size_t digits = 0;
    while (digits < n && address[n - 1 - digits] >= '0' && address[n - 1 - digits] <= '9')
        digits++;
    return digits > 0 && digits < n && address[n - 1 - digits] == ':' &&
           strchr(address, ',') == NULL;
}

static int connect_socket(const struct lc_host *h)
{
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_DGRAM };
    struct addrinfo *res = NULL;
    if (getaddrinfo(h->name, h->port, &hints, &res) != 0)
        return -1;
    int fd = -1;
    for (struct addrinfo *ai = res; ai != NULL && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    return fd;
}

int larch_udp_open(struct larch_udp **out, const char *address, struct larch *lh,
                   const struct larch_udp_options *opt)
{
    *out = NULL;
    if (address == NULL || !has_port(address))
        return ZK_EBADARGUMENTS;
    struct lc_hosts hosts;
    int rc = lc_hosts_parse(address, &hosts);
    if (rc != ZK_OK)
        return rc;
    if (hosts.count != 1 || (lh != NULL && hosts.chroot != NULL)) {
        lc_hosts_free(&hosts);
        return ZK_EBADARGUMENTS;
    }
    struct larch_udp *u = calloc(1, sizeof *u);
    if (u == NULL) {
        lc_hosts_free(&hosts);
        return ZK_ESYSTEMERROR;
    }
    u->lh = lh;
    u->fd = connect_socket(&hosts.items[0]);
    u->chroot = hosts.chroot;
    hosts.chroot = NULL;
    lc_hosts_free(&hosts);
    int32_t timeout_ms =
        opt && opt->timeout_ms > 0 ? opt->timeout_ms : LARCH_UDP_TIMEOUT_MS_DEFAULT;
    int32_t retry_ms = opt && opt->retry_ms > 0 ? opt->retry_ms : LARCH_UDP_RETRY_MS_DEFAULT;
    u->timeout_ns = timeout_ms * NS_PER_MS;
    u->retry_ns = retry_ms * NS_PER_MS;
    /* ids only need to differ from this socket's earlier requests; a clock
     * start keeps a late reply to a previous process on the same port apart */
    u->next_id = (uint64_t)base_mono_ns() << 16;
    zk_wbuf_init(&u->req);
    u->reply = malloc(REPLY_BYTES_MAX);
    if (u->fd < 0 || u->reply == NULL || pthread_mutex_init(&u->mu, NULL) != 0) {
        rc = u->fd < 0 ? ZK_EBADARGUMENTS : ZK_ESYSTEMERROR;
        if (u->fd >= 0)
            close(u->fd);
        free(u->reply);
        free(u->chroot);
        free(u);
        return rc;
    }
    *out = u;
    return ZK_OK;
}

void larch_udp_close(struct larch_udp *u)
{
    if (u == NULL)
        return;
    close(u->fd);
    pthread_mutex_destroy(&u->mu);
    zk_wbuf_free(&u->req);
    free(u->reply);
    free(u->chroot);
    free(u);
}

int64_t larch_udp_last_zxid(struct larch_udp *u)
{
    pthread_mutex_lock(&u->mu);
    int64_t z = u->seen_zxid;
    pthread_mutex_unlock(&u->mu);
    return z;
}

/* ---- one read ----------------------------------------------------------------------- */

/* lh's session, or ZK_ECONNECTIONLOSS before it has one; terminal states
 * give their code. */
static int session_of(struct larch *lh, struct udp_session *s)
{
    *s = (struct udp_session){ 0 };
    if (lh == NULL)
        return ZK_OK;
    pthread_mutex_lock(&lh->mu);
    int32_t state = lh->state;
    s->id = lh->session_id;
    memcpy(s->passwd, lh->passwd, sizeof s->passwd);
    s->last_zxid = lh->last_zxid;
    pthread_mutex_unlock(&lh->mu);
    if (state == ZK_STATE_EXPIRED)
        return ZK_ESESSIONEXPIRED;
    if (state == ZK_STATE_AUTH_FAILED)
        return ZK_EAUTHFAILED;
    if (state == ZK_STATE_CLOSED)
        return LARCH_ECLOSING;
    return s->id != 0 ? ZK_OK : ZK_ECONNECTIONLOSS;
}

static bool session_alive(struct larch *lh)
{
    pthread_mutex_lock(&lh->mu);
    int32_t state = lh->state;
    pthread_mutex_unlock(&lh->mu);
    return state != ZK_STATE_EXPIRED && state != ZK_STATE_CLOSED &&
           state != ZK_STATE_AUTH_FAILED;
}

/* Builds the request datagram in u->req: a fresh id, the record, zero
 * padding up to pad_to bytes, the MAC. */
static void build_request(struct larch_udp *u, const struct udp_session *s, int32_t op,
                          const char *server_path, size_t pad_to)
{
    zk_wbuf_reset(&u->req);
    int64_t min_zxid = s->last_zxid > u->seen_zxid ? s->last_zxid : u->seen_zxid;
    struct zk_udp_request_header h = {
        .flags = s->id != 0 ? ZK_UDP_FLAG_SESSION : 0,
        .request_id = ++u->next_id,
        .min_zxid = min_zxid,
        .session_id = s->id,
        .op = op,
    };
    zk_put_udp_request_header(&u->req, &h);
    if (op == ZK_OP_GETALLCHILDRENNUMBER) {
        struct zk_path_req q = { .path = zk_str_c(server_path) };
        zk_put_path_req(&u->req, &q);
    } else {
        struct zk_path_watch_req q = { .path = zk_str_c(server_path), .watch = false };
        zk_put_path_watch_req(&u->req, &q);
    }
    if (u->req.len < pad_to && zk_wbuf_reserve(&u->req, pad_to - u->req.len)) {
        memset(u->req.p + u->req.len, 0, pad_to - u->req.len);
        u->req.len = pad_to;
    }
    if (!u->req.err && s->id != 0)
        zk_udp_sign(s->passwd, u->req.p, u->req.len);
}

static void sleep_ns(int64_t ns)
{
    struct timespec ts = { .tv_sec = ns / 1000000000ll, .tv_nsec = ns % 1000000000ll };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Sends u->req and waits for the reply carrying its id, sending again every
 * retry period, until deadline_ns. ZK_OK with *rep pointing into u->reply,
 * or ZK_ECONNECTIONLOSS. */
static int exchange(struct larch_udp *u, int64_t deadline_ns, struct zk_udp_reply *rep)
{
    uint64_t id = base_get_be64(u->req.p + 8);
    int64_t now = base_mono_ns();
    int64_t resend_at = now; /* send at once */
    while (now < deadline_ns) {
        if (now >= resend_at) {
            /* a refused or failed send is a lost datagram: re-sent later */
            (void)send(u->fd, u->req.p, u->req.len, MSG_NOSIGNAL);
            resend_at = now + u->retry_ns;
        }
        int64_t until = resend_at < deadline_ns ? resend_at : deadline_ns;
        int wait_ms = (int)((until - now + NS_PER_MS - 1) / NS_PER_MS);
        struct pollfd p = { .fd = u->fd, .events = POLLIN };
        if (poll(&p, 1, wait_ms) > 0) {
            /* ECONNREFUSED (no server on the port yet) and foreign or late
             * datagrams are all "not the answer": keep waiting */
            ssize_t n = recv(u->fd, u->reply, REPLY_BYTES_MAX, MSG_DONTWAIT);
            if (n > 0 && zk_get_udp_reply(u->reply, (size_t)n, rep) && rep->request_id == id)
                return ZK_OK;
        }
        now = base_mono_ns();
    }
    return ZK_ECONNECTIONLOSS;
}

static int status_error(uint32_t status)
{
    switch (status) {
    case ZK_UDP_NO_SESSION: return ZK_ESESSIONEXPIRED;
    case ZK_UDP_BAD_MAC: return ZK_EAUTHFAILED;
    case ZK_UDP_BAD_REQUEST: return ZK_EBADARGUMENTS;
    default: return LARCH_EUDPVERSION; /* BAD_VERSION, or a newer server's status */
    }
}

/* Runs one read of kind/op on path over UDP and decodes its reply into
 * *out (a ZooKeeper error code in out->err). Returns ZK_OK when a reply
 * was decoded, or the transport's error (LARCH_ETOOBIG among them). */
static int udp_read(struct larch_udp *u, enum lc_kind kind, int32_t op, const char *path,
                    struct lc_reply *out)
{
    *out = (struct lc_reply){ .err = ZK_OK, .data_len = -1 };
    if (path == NULL || !larch_path_valid(path, false))
        return ZK_EBADARGUMENTS;
    struct udp_session s;
    int rc = session_of(u->lh, &s);
    if (rc != ZK_OK)
        return rc;
    const char *chroot = u->lh != NULL ? u->lh->hosts.chroot : u->chroot;
    char *server_path = lc_chroot_add(chroot, path);
    if (server_path == NULL)
        return ZK_ESYSTEMERROR;

    pthread_mutex_lock(&u->mu);
    int64_t deadline = base_mono_ns() + u->timeout_ns;
    int64_t wait = BEHIND_WAIT_FIRST_NS;
    size_t pad_to = 0;
    int retry_rc = ZK_OK; /* what a retried status gives at the deadline */
    for (;;) {
        build_request(u, &s, op, server_path, pad_to);
        if (u->req.err) {
            rc = ZK_ESYSTEMERROR;
            break;
        }
        struct zk_udp_reply rep;
        rc = exchange(u, deadline, &rep);
        if (rc != ZK_OK) {
            rc = retry_rc != ZK_OK ? retry_rc : rc;
            break;
        }
        if (rep.status == ZK_UDP_OK) {
            if (rep.h.zxid > u->seen_zxid)
                u->seen_zxid = rep.h.zxid;
            struct lc_req as_tcp = { .kind = kind, .op = op, .err = rep.h.err,
                                     .body = (uint8_t *)rep.record, .body_len = rep.record_len };
            lc_reply_decode(&as_tcp, chroot, out);
            break;
        }
        if (rep.status == ZK_UDP_TOO_BIG) {
            size_t need = (rep.detail + ZK_UDP_AMPLIFICATION - 1) / ZK_UDP_AMPLIFICATION;
            if (need > UDP_PAYLOAD_MAX || need <= pad_to || need <= u->req.len) {
                rc = LARCH_ETOOBIG; /* padded already: the server's datagram limit */
                break;
            }
            pad_to = need;
            continue;
        }
        /* "not yet" answers: the server catches up, learns the session,
         * or finds its leader again within moments */
        bool retry = rep.status == ZK_UDP_BEHIND || rep.status == ZK_UDP_NOT_SERVING ||
                     (rep.status == ZK_UDP_NO_SESSION && u->lh != NULL && session_alive(u->lh));
        if (!retry) {
            rc = status_error(rep.status);
            break;
        }
        retry_rc = rep.status == ZK_UDP_BEHIND       ? ZK_EOPERATIONTIMEOUT
                   : rep.status == ZK_UDP_NOT_SERVING ? ZK_ECONNECTIONLOSS
                                                      : ZK_ESESSIONEXPIRED;
        int64_t left = deadline - base_mono_ns();
        if (left <= 0) {
            rc = retry_rc;
            break;
        }
        sleep_ns(wait < left ? wait : left);
        wait = wait * 2 < BEHIND_WAIT_MAX_NS ? wait * 2 : BEHIND_WAIT_MAX_NS;
    }
    pthread_mutex_unlock(&u->mu);
    free(server_path);
    return rc;
}

/* ---- the operations ------------------------------------------------------------------ */

int larch_udp_exists(struct larch_udp *u, const char *path, struct zk_stat *stat)
{
    struct lc_reply rep;
    int rc = udp_read(u, LC_EXISTS, ZK_OP_EXISTS, path, &rep);
    if (rc == LARCH_ETOOBIG && u->lh != NULL)
        return larch_exists(u->lh, path, NULL, NULL, stat);
    rc = rc != ZK_OK ? rc : rep.err;
    if (rc == ZK_OK && stat != NULL)
        *stat = rep.stat;
    lc_reply_free(&rep);
    return rc;
}

int larch_udp_get(struct larch_udp *u, const char *path, char **data, int32_t *len,
                  struct zk_stat *stat)
{
    if (data != NULL)
        *data = NULL;
    if (len != NULL)
        *len = -1;
    struct lc_reply rep;
    int rc = udp_read(u, LC_GET, ZK_OP_GETDATA, path, &rep);
    if (rc == LARCH_ETOOBIG && u->lh != NULL)
        return larch_get(u->lh, path, NULL, NULL, data, len, stat);
    return lc_reply_take_data(&rep, rc != ZK_OK ? rc : rep.err, data, len, stat);
}

int larch_udp_get_children(struct larch_udp *u, const char *path, struct larch_strings *children,
                           struct zk_stat *stat)
{
    if (children != NULL)
        *children = (struct larch_strings){ 0 };
    struct lc_reply rep;
    int rc = udp_read(u, LC_CHILDREN, ZK_OP_GETCHILDREN2, path, &rep);
    if (rc == LARCH_ETOOBIG && u->lh != NULL)
        return larch_get_children(u->lh, path, NULL, NULL, children, stat);
    return lc_reply_take_children(&rep, rc != ZK_OK ? rc : rep.err, children, stat);
}

int larch_udp_get_all_children_number(struct larch_udp *u, const char *path, int32_t *number)
{
    struct lc_reply rep;
    int rc = udp_read(u, LC_CHILDCOUNT, ZK_OP_GETALLCHILDRENNUMBER, path, &rep);
    if (rc == LARCH_ETOOBIG && u->lh != NULL)
        return larch_get_all_children_number(u->lh, path, number);
    rc = rc != ZK_OK ? rc : rep.err;
    if (rc == ZK_OK && number != NULL)
        *number = rep.number;
    lc_reply_free(&rep);
    return rc;
}
