/*
 * saslsrv — the server side of SASL DIGEST-MD5 as ZooKeeper serves it to
 * its clients: service "zookeeper", server name and realm "zk-sasl-md5"
 * (ZooKeeperSaslServer; kazoo and ZooKeeper's own client use that host
 * name in the digest-uri), qop "auth" only, and the authenticated user
 * name as the identity, whatever authorization id the client asked for
 * (SaslServerCallbackHandler sets the authorized id from the
 * authentication id). The mechanism is Cyrus libsasl2's digestmd5 plugin.
 *
 * The passwords are those saslsrv_init is given (the JAAS file's users)
 * and nothing else: Cyrus reads no configuration file (it is given no
 * application name), loads no plugin but digestmd5 (SASL_CB_VERIFYFILE),
 * and asks only an in-process auxprop plugin, "larch-jaas", for
 * userPassword (SASL_CB_GETOPT names it as auxprop_plugin). DIGEST-MD5's
 * re-authentication cache, the plugin's one piece of state shared between
 * connections, is off (reauth_timeout=0).
 *
 * Threading: saslsrv_init and saslsrv_done run once, from main: init
 * before any connection exists, done after the last is freed. A
 * saslsrv_conn is used by one thread at a time (the worker owning its
 * client connection); any number of them step at once on different
 * threads. The user table is read-only after init; Cyrus gets pthread
 * mutexes for what it locks itself.
 */
#ifndef LARCH_SASLSRV_H
#define LARCH_SASLSRV_H

#include <stdbool.h>
#include <stddef.h>

#define SASLSRV_SERVICE "zookeeper"
#define SASLSRV_SERVER_NAME "zk-sasl-md5" /* also the realm the challenge names */
#define SASLSRV_MECHANISM "DIGEST-MD5"

struct saslsrv_user {
    const char *name;     /* the identity a successful login gets */
    const char *password; /* not empty: Cyrus refuses empty secrets */
};

/* Initialises Cyrus for the server side with these users (copied; users
 * with the same name: the last one counts). 0, or -1 with a message in
 * err (Cyrus could not start, or has no DIGEST-MD5 plugin). Once. */
int saslsrv_init(const struct saslsrv_user *users, size_t count, char *err, size_t errlen);
/* Shuts Cyrus down and wipes the passwords. After every saslsrv_conn_free. */
void saslsrv_done(void);

enum saslsrv_result {
    SASLSRV_CONTINUE, /* send the token; the client answers */
    SASLSRV_DONE,     /* authenticated: send the token (rspauth), read saslsrv_user */
    SASLSRV_FAILED,   /* refused: saslsrv_error says why (for the log) */
};

struct saslsrv_conn;

/* A new exchange for one client connection; NULL without memory or when
 * Cyrus refuses (saslsrv_init not called). */
struct saslsrv_conn *saslsrv_conn_new(void);
/* Feeds the client's next token (in, len; empty for kazoo's first, as
 * DIGEST-MD5 starts with the server's challenge). On CONTINUE and DONE,
 * *out and *out_len are the token to send back, owned by c and valid
 * until the next call on c. After DONE or FAILED every call fails. */
enum saslsrv_result saslsrv_step(struct saslsrv_conn *c, const void *in, size_t len,
                                 const void **out, size_t *out_len);
/* After DONE: the authenticated user name (an entry of the table). */
const char *saslsrv_user(const struct saslsrv_conn *c);
/* After FAILED: Cyrus's reason, for the log (never the password). */
const char *saslsrv_error(const struct saslsrv_conn *c);
/* Ends the exchange; NULL is a no-op. */
void saslsrv_conn_free(struct saslsrv_conn *c);

#endif /* LARCH_SASLSRV_H */
