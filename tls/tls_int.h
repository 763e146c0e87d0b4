/*
 * tls_int.h — private to tls/: the context that tls_ctx.c builds and
 * tls_conn.c opens sessions on.
 */
#ifndef LARCH_TLS_INT_H
#define LARCH_TLS_INT_H

#include <openssl/ssl.h>

#include "tls/tls.h"

struct tls_ctx {
    SSL_CTX *ssl;
    bool verify_client_address;
};

/* OpenSSL's reason for the newest error on this thread's queue (or dflt
 * when the queue is empty), then the queue is emptied. A static string. */
const char *tls_take_error(const char *dflt);

#endif /* LARCH_TLS_INT_H */
