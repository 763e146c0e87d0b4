/*
 * http.c — larchd's HTTP endpoints (server.h): a listening socket larchd
 * binds itself, so a taken port or a bad address is an error naming it,
 * handed to libmicrohttpd, which a thread of ours drives (MHD_run_wait):
 * the pages read the RCU tree, and only a thread of ours can register with
 * liburcu for its lifetime and unregister before it ends. Nothing here
 * knows what the pages say.
 */
#include "server/server.h"

#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>
#include <urcu.h>

#define HTTP_CONNECTIONS_MAX 64 /* a scraper and an operator or two, not a crowd */
#define HTTP_POLL_MS 100        /* how soon http_stop is noticed */

struct http {
    struct MHD_Daemon *daemon;
    pthread_t thread;
    atomic_bool stop;
    int port;
    http_get_fn get;
    void *arg;
};

/* Binds host:port (numeric host; port 0: any) for listening: the fd, or -1
 * with err set. */
static int bind_listener(const char *host, int port, int *bound, char *err, size_t errlen)
{
    char service[8];
    snprintf(service, sizeof service, "%d", port);
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                              .ai_flags = AI_PASSIVE | AI_NUMERICHOST | AI_NUMERICSERV };
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(host, service, &hints, &res);
    if (rc != 0) {
        snprintf(err, errlen, "'%s' is not an IP address: %s", host, gai_strerror(rc));
        return -1;
    }
    int fd = socket(res->ai_family, res->ai_socktype | SOCK_CLOEXEC, res->ai_protocol);
    int one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, 64) != 0) {
        snprintf(err, errlen, "%s:%d: %s", host, port, strerror(errno));
        if (fd >= 0)
            close(fd);
        freeaddrinfo(res);
        return -1;
    }
    freeaddrinfo(res);
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0) {
        snprintf(err, errlen, "%s:%d: %s", host, port, strerror(errno));
        close(fd);
        return -1;
    }
    *bound = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                            : ((struct sockaddr_in *)&ss)->sin_port);
    return fd;
}

static enum MHD_Result respond(struct MHD_Connection *c, int status, const void *body,
                               size_t len, const char *type)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!r)
        return MHD_NO;
    enum MHD_Result ok = MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (ok == MHD_YES)
        ok = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    return ok;
}

/* libmicrohttpd's request callback: GET and HEAD only (TRACE and the
 * rest are refused, as ZooKeeper's Jetty constrains TRACE); a body sent
 * with the request is read and dropped. */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload, size_t *upload_len, void **state)
{
    (void)version;
    (void)upload;
    struct http *h = cls;
    static int first_call;
    if (*state == NULL) { /* headers only so far: come back for the body */
        *state = &first_call;
        return MHD_YES;
    }
    if (*upload_len != 0) {
        *upload_len = 0;
        return MHD_YES;
    }
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0) {
        static const char msg[] = "only GET and HEAD are served\n";
        return respond(c, MHD_HTTP_METHOD_NOT_ALLOWED, msg, sizeof msg - 1, "text/plain");
    }
    struct zk_wbuf body;
    zk_wbuf_init(&body);
    const char *type = "text/plain; charset=utf-8";
    int status = h->get(h->arg, url, &body, &type);
    enum MHD_Result ok;
    if (body.err) {
        static const char msg[] = "out of memory\n";
        ok = respond(c, MHD_HTTP_INTERNAL_SERVER_ERROR, msg, sizeof msg - 1, "text/plain");
    } else {
        ok = respond(c, status, body.p, body.len, type);
    }
    zk_wbuf_free(&body);
    return ok;
}

static void *serve(void *arg)
{
    struct http *h = arg;
    rcu_register_thread();
    while (!atomic_load_explicit(&h->stop, memory_order_acquire))
        if (MHD_run_wait(h->daemon, HTTP_POLL_MS) != MHD_YES)
            break; /* not expected with these options: the endpoint stops answering */
    rcu_unregister_thread();
    return NULL;
}

struct http *http_start(const char *host, int port, unsigned idle_timeout_s, http_get_fn get,
                        void *arg, char *err, size_t errlen)
{
    /* 0 would be libmicrohttpd's "never": a stalled client must not hold a
     * connection slot forever */
    if (idle_timeout_s == 0)
        idle_timeout_s = 1;
    struct http *h = calloc(1, sizeof *h);
    if (!h) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    h->get = get;
    h->arg = arg;
    int fd = bind_listener(host, port, &h->port, err, errlen);
    if (fd < 0) {
        free(h);
        return NULL;
    }
    /* epoll: larchd's descriptors run past select's 1024 */
    h->daemon = MHD_start_daemon(MHD_USE_EPOLL, 0, NULL, NULL, on_request, h,
                                 MHD_OPTION_LISTEN_SOCKET, fd,
                                 MHD_OPTION_CONNECTION_LIMIT, (unsigned)HTTP_CONNECTIONS_MAX,
                                 MHD_OPTION_CONNECTION_TIMEOUT, idle_timeout_s,
                                 MHD_OPTION_END);
    if (!h->daemon) {
        snprintf(err, errlen, "%s:%d: the HTTP server did not start", host, h->port);
        close(fd);
        free(h);
        return NULL;
    }
    int rc = pthread_create(&h->thread, NULL, serve, h);
    if (rc != 0) {
        snprintf(err, errlen, "%s:%d: no thread for the HTTP server: %s", host, h->port,
                 strerror(rc));
        MHD_stop_daemon(h->daemon);
        free(h);
        return NULL;
    }
    return h;
}

int http_port(const struct http *h)
{
    return h->port;
}

void http_stop(struct http *h)
{
    if (!h)
        return;
    atomic_store_explicit(&h->stop, true, memory_order_release);
    pthread_join(h->thread, NULL);
    MHD_stop_daemon(h->daemon); /* closes the listening socket too */
    free(h);
}
