/*
 * tls — TLS over OpenSSL 3 for the secure client port and the quorum links,
 * configured as ZooKeeper configures its Netty server and its quorum
 * sockets (ClientX509Util, QuorumX509Util, X509Util): a key store and a
 * trust store in PEM or PKCS12, the enabled protocols, the cipher suites by
 * their Java/IANA names, and the client-certificate rule (none/want/need).
 *
 * Two objects, and one pure function. A tls_ctx holds everything loaded at
 * startup (certificate, key, trusted CAs, protocol and cipher policy):
 * tls_ctx_new reads and checks every file before anything is served, so a
 * missing store, a wrong password or a key that does not match its
 * certificate is reported then, in a message that names the setting and
 * the file. One context serves both roles: the quorum links accept and
 * dial on one, presenting the same certificate either way, as ZooKeeper's
 * quorum sockets do. A tls_conn is one session over a non-blocking socket
 * the caller owns: the server's side (tls_conn_new), whose client's
 * certificate names the client as tls_dn_rfc2253 writes a subject (the
 * identity ZooKeeper's X509AuthenticationProvider gives it), or the
 * dialler's (tls_conn_new_client), which verifies the server's chain and
 * name.
 *
 * Threading: tls_ctx_new and tls_ctx_free run on one thread while no
 * tls_conn of the context exists (larchd: main, before the workers and the
 * sequencer start and after they stop). In between a context is shared
 * read-only: any number of threads may call tls_conn_new and
 * tls_conn_new_client on it at once (OpenSSL locks its session cache). A
 * tls_conn belongs to one thread at a time (larchd: the worker that owns
 * the connection, or the thread doing the peer link's I/O); its functions
 * never block and never call into the caller. OpenSSL's error queue is per
 * thread: every function here leaves it empty. OpenSSL writes the socket
 * with write(2): the process must ignore SIGPIPE (larchd does), or a peer
 * that vanished kills it.
 */
#ifndef LARCH_TLS_H
#define LARCH_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define TLS_MSG_MAX 512 /* tls_ctx_new's messages fit this */

/* A key store or trust store file, as ZooKeeper's KeyStoreFileType names
 * them; JKS and BCFKS are Java's own formats, which larchd cannot read (the
 * configuration refuses them before a store is loaded). */
enum tls_store_type {
    TLS_STORE_PEM,    /* certificates and (key store) one private key, PKCS#8 or
                       * traditional, optionally encrypted with the password */
    TLS_STORE_PKCS12, /* a .p12/.pfx file protected by the password */
};

/* The enabled protocols: ssl.enabledProtocols, or ssl.protocol alone when
 * that is unset (ClientX509Util.getEnabledProtocols). */
#define TLS_PROTO_1_2 1u
#define TLS_PROTO_1_3 2u

/* ssl.clientAuth (X509Util.ClientAuth). */
enum tls_client_auth {
    TLS_CLIENT_AUTH_NONE, /* no certificate is asked for */
    TLS_CLIENT_AUTH_WANT, /* asked for; a client without one is served, one
                           * whose chain does not verify is refused */
    TLS_CLIENT_AUTH_NEED, /* the handshake fails without a verified one */
};

/* One store. what_path and what_password say where the settings came from
 * ("zoo.cfg:7: ssl.keyStore.location"): messages about the store begin with
 * them. password_path, when set, is read instead of password (ZooKeeper's
 * passwordPath: the file's text, one trailing newline dropped). */
struct tls_store {
    const char *path;          /* NULL or "": no store */
    const char *password;      /* NULL or "": none */
    const char *password_path; /* NULL or "": none */
    enum tls_store_type type;
    const char *what_path;
    const char *what_password;
};

struct tls_settings {
    struct tls_store key;   /* required: the server's certificate chain and key */
    struct tls_store trust; /* the CAs client certificates (and, dialling, the
                             * server's) must chain to; required unless
                             * client_auth is NONE and nothing is dialled */
    unsigned protocols;     /* TLS_PROTO_* bits, at least one */
    /* ssl.ciphersuites: comma-separated Java/IANA names
     * ("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_AES_128_GCM_SHA256"),
     * mapped to OpenSSL's; NULL or "": ZooKeeper's default list (the
     * ECDHE AES-GCM and AES-CBC suites, then TLS 1.3's three). */
    const char *ciphers;
    const char *what_ciphers;
    enum tls_client_auth client_auth;
    /* ssl.clientHostnameVerification with ssl.hostnameVerification: a
     * client certificate must name the client's address in a
     * subjectAltName iPAddress entry (ZKTrustManager's check without its
     * reverse DNS lookup). */
    bool verify_client_address;
};

struct tls_ctx;
struct tls_conn;

/* Loads and checks everything settings name. Returns NULL with a message
 * in err (errlen bytes, TLS_MSG_MAX is enough) naming the setting, the file
 * and the problem. settings and its strings are not kept. */
struct tls_ctx *tls_ctx_new(const struct tls_settings *settings, char *err, size_t errlen);
void tls_ctx_free(struct tls_ctx *ctx);

/* Maps one Java/IANA cipher suite name (len bytes at name) to OpenSSL's:
 * writes it to out (cap bytes) and returns 1 for a TLS 1.3 suite, 0 for an
 * older one; -1 when this OpenSSL has no such suite. Java's legacy "SSL_"
 * spellings map as their "TLS_" twins. Pure but for OpenSSL's cipher table. */
int tls_cipher_to_openssl(const char *name, size_t len, char *out, size_t cap);

/* A server-side session on fd (non-blocking, connected; the caller keeps
 * owning it and closes it after tls_conn_free). peer_ip is the client's
 * address, for verify_client_address. NULL without memory. */
struct tls_conn *tls_conn_new(struct tls_ctx *ctx, int fd, const char *peer_ip);
/* A dialler's session on fd (non-blocking, connected; the caller keeps
 * owning it and closes it after tls_conn_free). The server's chain must
 * verify against the context's trust store, whatever the context's
 * client_auth, and the context's certificate is presented when the server
 * asks for one. expected_host, unless NULL or "", must be named by the
 * server's certificate (ZooKeeper's ssl.hostnameVerification): an IPv4 or
 * IPv6 literal by a subjectAltName iPAddress, a name by a DNS
 * subjectAltName (or its CN when it has none), which SNI carries too. NULL
 * without memory. The first step writes: tls_conn_wants_write is true
 * until tls_conn_handshake says otherwise. */
struct tls_conn *tls_conn_new_client(struct tls_ctx *ctx, int fd, const char *expected_host);
/* Sends close_notify when the session is established and sound (once,
 * without waiting for the socket), then frees the session. NULL: no-op. */
void tls_conn_free(struct tls_conn *t);

/* Reads decrypted bytes, running the handshake first. As recv(2): > 0
 * bytes; 0 when the client closed (close_notify or end of stream); -1 with
 * errno EAGAIN when the session must wait for the socket (tls_conn_wants_write
 * says which way), or another errno when it failed (EPROTO for a TLS
 * failure: tls_conn_error says what). Returns at most one record's bytes
 * (16 KiB); with len >= TLS_RECORD_MAX nothing it decrypted is left inside
 * OpenSSL, so a caller that stops reading can rely on the socket's
 * readiness to come back. */
#define TLS_RECORD_MAX 16384
ssize_t tls_conn_recv(struct tls_conn *t, void *buf, size_t len);
/* Runs the handshake as far as the socket allows, reading nothing past
 * it: 1 once established (at once, after that); as tls_conn_recv
 * otherwise (0: closed; -1 with EAGAIN, tls_conn_wants_write telling the
 * direction, or with EPROTO and tls_conn_error saying why). For a caller
 * that must not read application data yet, or that has nothing to read
 * but must complete the handshake first (a dialler before its first
 * send). */
int tls_conn_handshake(struct tls_conn *t);
/* Encrypts and sends up to len bytes. As send(2): > 0 bytes taken (a record
 * at a time: call again for the rest); -1 with errno EAGAIN when the socket
 * is full, EPROTO when the session failed or is not established. After
 * EAGAIN, call again with the same bytes at the front of buf (buf may move
 * and len may grow). */
ssize_t tls_conn_send(struct tls_conn *t, const void *buf, size_t len);
/* After tls_conn_recv's or tls_conn_handshake's EAGAIN: true when it waits
 * for the socket to take output (the handshake's next flight did not fit),
 * false when it waits for input. */
bool tls_conn_wants_write(const struct tls_conn *t);
/* True once the handshake has completed (the other end's certificate, if
 * it sent one, verified). */
bool tls_conn_established(const struct tls_conn *t);
/* Why the session failed ("" while it has not): OpenSSL's reason, such as
 * "peer did not return a certificate" or "certificate verify failed". */
const char *tls_conn_error(const struct tls_conn *t);
/* The negotiated protocol ("TLSv1.3"), for logs; "" before the handshake. */
const char *tls_conn_protocol(const struct tls_conn *t);

#define TLS_DN_MAX 4096 /* a subject's text, NUL included, fits this */

/* The client certificate's subject as tls_dn_rfc2253 writes it, into out
 * (cap bytes): 1, or 0 when the client presented no certificate, or -1
 * when the subject cannot be written (malformed, or longer than cap - 1).
 * Only once established: the chain has been verified then. */
int tls_conn_peer_dn(const struct tls_conn *t, char *out, size_t cap);

/* A distinguished name (the DER of an X.501 Name, len bytes) as Java's
 * X500Principal.getName() writes it (RFC 2253, with Java's choices: see
 * dn.c), NUL-terminated into out (cap bytes). Returns its length, or -1
 * when the DER is malformed or the text needs more than cap - 1 bytes.
 * Pure. */
int tls_dn_rfc2253(const uint8_t *der, size_t len, char *out, size_t cap);

#endif /* LARCH_TLS_H */
