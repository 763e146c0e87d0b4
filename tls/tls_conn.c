/*
 * tls_conn.c — one TLS session over a non-blocking socket: the server's
 * side (tls_conn_new) or the dialler's (tls_conn_new_client).
 *
 * OpenSSL reads and writes the socket itself (a socket BIO, no read-ahead),
 * so the kernel keeps every byte not yet asked for and a level-triggered
 * epoll reports it as it would on a plain connection. Each call maps
 * OpenSSL's outcome onto recv/send's: bytes, 0 at the end, or -1 with errno
 * (EAGAIN: wait for the socket, in the direction tls_conn_wants_write says).
 */
#include "tls/tls_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/x509v3.h>

struct tls_conn {
    SSL *ssl;
    bool established; /* the handshake completed */
    bool failed;      /* a fatal error: the session is unusable, no close_notify */
    bool wants_write; /* the last EAGAIN of a read waits for the socket to take output */
    char error[128];
};

/* A client over an IPv6 socket shows an IPv4 address as ::ffff:a.b.c.d;
 * its certificate names a.b.c.d (Java's InetAddress does the same). */
static const char *plain_address(const char *ip)
{
    static const char mapped[] = "::ffff:";
    if (strncmp(ip, mapped, sizeof mapped - 1) == 0 && strchr(ip + sizeof mapped - 1, '.'))
        return ip + sizeof mapped - 1;
    return ip;
}

struct tls_conn *tls_conn_new(struct tls_ctx *ctx, int fd, const char *peer_ip)
{
    struct tls_conn *t = calloc(1, sizeof *t);
    if (t == NULL)
        return NULL;
    ERR_clear_error();
    t->ssl = SSL_new(ctx->ssl);
    if (t->ssl == NULL || SSL_set_fd(t->ssl, fd) != 1 ||
        (ctx->verify_client_address &&
         X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(t->ssl), plain_address(peer_ip)) != 1)) {
        SSL_free(t->ssl);
        free(t);
        ERR_clear_error();
        return NULL;
    }
    SSL_set_accept_state(t->ssl);
    return t;
}

/* Whether host is an IPv4 or IPv6 literal (which SNI may not carry, and
 * which a certificate names in an iPAddress entry). */
static bool is_ip_literal(const char *host)
{
    unsigned char addr[16];
    return inet_pton(AF_INET, host, addr) == 1 || inet_pton(AF_INET6, host, addr) == 1;
}

/* The dialler's checks on the server's certificate: its chain, always
 * (whatever the context's rule for client certificates), and the name,
 * when one is expected. */
static bool expect_server(SSL *ssl, const char *host)
{
    SSL_set_verify(ssl, SSL_VERIFY_PEER, NULL);
    if (host == NULL || host[0] == '\0')
        return true;
    X509_VERIFY_PARAM *param = SSL_get0_param(ssl);
    if (is_ip_literal(host))
        return X509_VERIFY_PARAM_set1_ip_asc(param, host) == 1;
    /* a name: its DNS subjectAltNames, or the CN when it has none
     * (OpenSSL's default, as Java's HostnameChecker); SNI names it too,
     * as Java's SSLSocket does for a host name */
    return X509_VERIFY_PARAM_set1_host(param, host, 0) == 1 &&
           SSL_set_tlsext_host_name(ssl, host) == 1;
}

struct tls_conn *tls_conn_new_client(struct tls_ctx *ctx, int fd, const char *expected_host)
{
    struct tls_conn *t = calloc(1, sizeof *t);
    if (t == NULL)
        return NULL;
    ERR_clear_error();
    t->ssl = SSL_new(ctx->ssl);
    if (t->ssl == NULL || SSL_set_fd(t->ssl, fd) != 1 || !expect_server(t->ssl, expected_host)) {
        SSL_free(t->ssl);
        free(t);
        ERR_clear_error();
        return NULL;
    }
    SSL_set_connect_state(t->ssl);
    t->wants_write = true; /* the ClientHello goes first */
    return t;
}

void tls_conn_free(struct tls_conn *t)
{
    if (t == NULL)
        return;
    if (t->established && !t->failed) {
        /* close_notify, as Netty sends on close; a full socket drops it */
        ERR_clear_error();
        (void)SSL_shutdown(t->ssl);
        ERR_clear_error();
    }
    SSL_free(t->ssl); /* its socket BIO leaves the descriptor open */
    free(t);
}

static ssize_t failed(struct tls_conn *t, int err, const char *why)
{
    t->failed = true;
    snprintf(t->error, sizeof t->error, "%s", why);
    errno = err;
    return -1;
}

/* recv/send's result for an OpenSSL call that returned rc <= 0; reading:
 * whether it was a read (whose wait direction tls_conn_wants_write reports). */
static ssize_t io_result(struct tls_conn *t, int rc, bool reading)
{
    int saved = errno;
    switch (SSL_get_error(t->ssl, rc)) {
    case SSL_ERROR_WANT_READ:
        if (reading)
            t->wants_write = false;
        errno = EAGAIN;
        return -1;
    case SSL_ERROR_WANT_WRITE:
        if (reading)
            t->wants_write = true;
        errno = EAGAIN;
        return -1;
    case SSL_ERROR_ZERO_RETURN: /* close_notify, or an end of stream (IGNORE_UNEXPECTED_EOF) */
        return 0;
    case SSL_ERROR_SYSCALL: /* the socket failed: errno says how */
        ERR_clear_error();
        if (saved == 0 || saved == EAGAIN)
            saved = ECONNRESET;
        return failed(t, saved, strerror(saved));
    default:
        return failed(t, EPROTO, tls_take_error("TLS failure"));
    }
}

/* The handshake's next step, the queue and errno cleared first. */
static int handshake_step(struct tls_conn *t)
{
    ERR_clear_error(); /* SSL_get_error reads the queue: nothing stale may be on it */
    errno = 0;
    if (t->established)
        return 1;
    int rc = SSL_do_handshake(t->ssl);
    if (rc != 1)
        return (int)io_result(t, rc, true);
    t->established = true;
    t->wants_write = false;
    return 1;
}

int tls_conn_handshake(struct tls_conn *t)
{
    if (t->failed) {
        errno = EPROTO;
        return -1;
    }
    return handshake_step(t);
}

ssize_t tls_conn_recv(struct tls_conn *t, void *buf, size_t len)
{
    if (t->failed) {
        errno = EPROTO;
        return -1;
    }
    int hs = handshake_step(t);
    if (hs != 1)
        return hs;
    size_t got = 0;
    int rc = SSL_read_ex(t->ssl, buf, len, &got);
    if (rc == 1) {
        t->wants_write = false;
        return (ssize_t)got;
    }
    return io_result(t, rc, true);
}

ssize_t tls_conn_send(struct tls_conn *t, const void *buf, size_t len)
{
    if (t->failed || !t->established) {
        errno = EPROTO;
        return -1;
    }
    ERR_clear_error();
    errno = 0;
    size_t sent = 0;
    int rc = SSL_write_ex(t->ssl, buf, len, &sent);
    if (rc == 1)
        return (ssize_t)sent;
    /* Renegotiation is refused, so only a handshake could make a write
     * wait for input, and nothing is written before the handshake. */
    if (SSL_get_error(t->ssl, rc) == SSL_ERROR_WANT_READ)
        return failed(t, EPROTO, "a write waited for input");
    return io_result(t, rc, false);
}

bool tls_conn_wants_write(const struct tls_conn *t)
{
    return t->wants_write;
}

bool tls_conn_established(const struct tls_conn *t)
{
    return t->established;
}

const char *tls_conn_error(const struct tls_conn *t)
{
    return t->error;
}

const char *tls_conn_protocol(const struct tls_conn *t)
{
    return t->established ? SSL_get_version(t->ssl) : "";
}

int tls_conn_peer_dn(const struct tls_conn *t, char *out, size_t cap)
{
    X509 *cert = t->established ? SSL_get0_peer_certificate(t->ssl) : NULL;
    if (cert == NULL)
        return 0;
    const unsigned char *der = NULL;
    size_t len = 0;
    /* the subject as the certificate encodes it (OpenSSL keeps that) */
    if (X509_NAME_get0_der(X509_get_subject_name(cert), &der, &len) != 1) {
        ERR_clear_error();
        return -1;
    }
    return tls_dn_rfc2253(der, len, out, cap) < 0 ? -1 : 1;
}
