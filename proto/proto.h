/*
 * proto — the ZooKeeper client wire protocol (jute), shared by larchd and liblarch.
 *
 * Every TCP frame is a big-endian int32 length followed by that many bytes of
 * jute records. Records here mirror ZooKeeper's zookeeper.jute field for field
 * and in wire order; the constants mirror ZooDefs.java / KeeperException.Code.
 *
 * Decoding is zero-copy: strings and buffers in decoded records point into the
 * caller's frame, which must outlive the record. A jute string is not NUL
 * terminated; use zk_str.len. A length of -1 on the wire is "null" (ptr NULL,
 * len -1); -1 is legal only where ZooKeeper allows null (buffers, strings).
 *
 * Encoding appends to a growable zk_wbuf owned by the caller. Functions are
 * pure (no I/O, no clocks, no globals) and safe to call from any thread on
 * distinct buffers.
 */
#ifndef LARCH_PROTO_H
#define LARCH_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

/* ---- limits ----------------------------------------------------------- */
/* No path length limit: as in ZooKeeper, a path is bounded only by the frame
 * it arrives in (jute.maxbuffer), and nothing here keeps one in a fixed-size
 * buffer. */
#define ZK_MAX_BUFFER_DEFAULT (1024 * 1024 - 1) /* jute.maxbuffer: 0xfffff */
#define ZK_VECTOR_MAX 1000000                  /* sanity bound on vector counts */

/* ---- opcodes (ZooDefs.OpCode) ---------------------------------------- */
enum zk_op {
    ZK_OP_NOTIFICATION = 0,
    ZK_OP_CREATE = 1,
    ZK_OP_DELETE = 2,
    ZK_OP_EXISTS = 3,
    ZK_OP_GETDATA = 4,
    ZK_OP_SETDATA = 5,
    ZK_OP_GETACL = 6,
    ZK_OP_SETACL = 7,
    ZK_OP_GETCHILDREN = 8,
    ZK_OP_SYNC = 9,
    ZK_OP_PING = 11,
    ZK_OP_GETCHILDREN2 = 12,
    ZK_OP_CHECK = 13,
    ZK_OP_MULTI = 14,
    ZK_OP_CREATE2 = 15,
    ZK_OP_RECONFIG = 16,
    ZK_OP_CHECKWATCHES = 17,
    ZK_OP_REMOVEWATCHES = 18,
    ZK_OP_CREATECONTAINER = 19,
    ZK_OP_DELETECONTAINER = 20,
    ZK_OP_CREATETTL = 21,
    ZK_OP_MULTIREAD = 22,
    ZK_OP_AUTH = 100,
    ZK_OP_SETWATCHES = 101,
    ZK_OP_SASL = 102,
    ZK_OP_GETEPHEMERALS = 103,
    ZK_OP_GETALLCHILDRENNUMBER = 104,
    ZK_OP_SETWATCHES2 = 105,
    ZK_OP_ADDWATCH = 106,
    ZK_OP_WHOAMI = 107,
    ZK_OP_CREATESESSION = -10,
    ZK_OP_CLOSESESSION = -11,
    ZK_OP_ERROR = -1,
};

/* ---- special xids ----------------------------------------------------- */
#define ZK_XID_NOTIFICATION (-1)
#define ZK_XID_PING (-2)
#define ZK_XID_AUTH (-4)
#define ZK_XID_SETWATCHES (-8)

/* ---- error codes (KeeperException.Code) ------------------------------ */
enum zk_err {
    ZK_OK = 0,
    ZK_ESYSTEMERROR = -1,
    ZK_ERUNTIMEINCONSISTENCY = -2,
    ZK_EDATAINCONSISTENCY = -3,
    ZK_ECONNECTIONLOSS = -4,
    ZK_EMARSHALLINGERROR = -5,
    ZK_EUNIMPLEMENTED = -6,
    ZK_EOPERATIONTIMEOUT = -7,
    ZK_EBADARGUMENTS = -8,
    ZK_EUNKNOWNSESSION = -12,
    ZK_ENEWCONFIGNOQUORUM = -13,
    ZK_ERECONFIGINPROGRESS = -14,
    ZK_EAPIERROR = -100,
    ZK_ENONODE = -101,
    ZK_ENOAUTH = -102,
    ZK_EBADVERSION = -103,
    ZK_ENOCHILDRENFOREPHEMERALS = -108,
    ZK_ENODEEXISTS = -110,
    ZK_ENOTEMPTY = -111,
    ZK_ESESSIONEXPIRED = -112,
    ZK_EINVALIDCALLBACK = -113,
    ZK_EINVALIDACL = -114,
    ZK_EAUTHFAILED = -115,
    ZK_ESESSIONMOVED = -118,
    ZK_ENOTREADONLY = -119,
    ZK_EEPHEMERALONLOCALSESSION = -120,
    ZK_ENOWATCHER = -121,
    ZK_EREQUESTTIMEOUT = -122,
    ZK_ERECONFIGDISABLED = -123,
    ZK_ESESSIONCLOSEDREQUIRESASL = -124,
    ZK_EQUOTAEXCEEDED = -125,
    ZK_ETHROTTLEDOP = -127,
};

/* ---- create modes (CreateMode.toFlag) -------------------------------- */
enum zk_create_mode {
    ZK_PERSISTENT = 0,
    ZK_EPHEMERAL = 1,
    ZK_PERSISTENT_SEQUENTIAL = 2,
    ZK_EPHEMERAL_SEQUENTIAL = 3,
    ZK_CONTAINER = 4,
    ZK_PERSISTENT_WITH_TTL = 5,
    ZK_PERSISTENT_SEQUENTIAL_WITH_TTL = 6,
};

/* ---- permissions (ZooDefs.Perms) ------------------------------------- */
#define ZK_PERM_READ 1
#define ZK_PERM_WRITE 2
#define ZK_PERM_CREATE 4
#define ZK_PERM_DELETE 8
#define ZK_PERM_ADMIN 16
#define ZK_PERM_ALL 31

/* ---- watcher events (Watcher.Event.EventType / KeeperState) ---------- */
enum zk_event_type {
    ZK_EVENT_NONE = -1,
    ZK_EVENT_CREATED = 1,
    ZK_EVENT_DELETED = 2,
    ZK_EVENT_DATA_CHANGED = 3,
    ZK_EVENT_CHILD_CHANGED = 4,
    ZK_EVENT_DATA_WATCH_REMOVED = 5,
    ZK_EVENT_CHILD_WATCH_REMOVED = 6,
    ZK_EVENT_PERSISTENT_WATCH_REMOVED = 7,
};
enum zk_keeper_state {
    ZK_STATE_DISCONNECTED = 0,
    ZK_STATE_SYNC_CONNECTED = 3,
    ZK_STATE_AUTH_FAILED = 4,
    ZK_STATE_CONNECTED_READONLY = 5,
    ZK_STATE_SASL_AUTHENTICATED = 6,
    ZK_STATE_EXPIRED = -112,
    ZK_STATE_CLOSED = 7,
};
/* WatcherType for checkWatches/removeWatches */
enum zk_watcher_type { ZK_WATCHER_CHILDREN = 1, ZK_WATCHER_DATA = 2, ZK_WATCHER_ANY = 3 };
/* AddWatchMode */
enum zk_add_watch_mode { ZK_ADD_WATCH_PERSISTENT = 0, ZK_ADD_WATCH_PERSISTENT_RECURSIVE = 1 };

/* ---- primitive views -------------------------------------------------- */
/* A jute string or buffer: points into the decoded frame. len -1 means null. */
struct zk_str {
    const char *ptr;
    int32_t len;
};
#define ZK_STR_NULL ((struct zk_str){ NULL, -1 })
/* Builds a zk_str over a NUL-terminated C string (NULL gives the null string). */
struct zk_str zk_str_c(const char *s);
/* True when a and b have the same bytes (null equals only null). */
bool zk_str_eq(struct zk_str a, struct zk_str b);

/* A vector of strings decoded from a frame: items point into the frame.
 * items is allocated by the decoder; free with zk_strvec_free. */
struct zk_strvec {
    int32_t count; /* -1 for a null vector */
    struct zk_str *items;
};
void zk_strvec_free(struct zk_strvec *v);

/* ---- records (zookeeper.jute) ---------------------------------------- */
struct zk_id {
    struct zk_str scheme;
    struct zk_str id;
};
struct zk_acl {
    int32_t perms;
    struct zk_id id;
};
struct zk_aclvec {
    int32_t count;
    struct zk_acl *items; /* allocated by the decoder; free with zk_aclvec_free */
};
void zk_aclvec_free(struct zk_aclvec *v);

struct zk_stat {
    int64_t czxid;
    int64_t mzxid;
    int64_t ctime;
    int64_t mtime;
    int32_t version;
    int32_t cversion;
    int32_t aversion;
    int64_t ephemeral_owner;
    int32_t data_length;
    int32_t num_children;
    int64_t pzxid;
};

struct zk_connect_req {
    int32_t protocol_version;
    int64_t last_zxid_seen;
    int32_t timeout_ms;
    int64_t session_id;
    struct zk_str passwd;
    bool read_only;     /* optional trailing field (3.4+ clients) */
    bool has_read_only; /* whether the client sent it */
};
struct zk_connect_resp {
    int32_t protocol_version;
    int32_t timeout_ms;
    int64_t session_id;
    struct zk_str passwd;
    bool read_only;
    bool has_read_only; /* encode it when the request carried it */
};
struct zk_request_header {
    int32_t xid;
    int32_t type;
};
#define ZK_REPLY_HEADER_BYTES 16
struct zk_reply_header {
    int32_t xid;
    int64_t zxid;
    int32_t err;
};
struct zk_multi_header {
    int32_t type; /* op code, or -1 when done */
    bool done;
    int32_t err;
};
struct zk_auth_packet {
    int32_t type;
    struct zk_str scheme;
    struct zk_str auth;
};
/* GetSASLRequest, the body of a ZK_OP_SASL request, and SetSASLResponse,
 * the server's answer: one jute buffer each, the mechanism's next token
 * (zookeeper.jute). Empty or null where the mechanism has nothing to say. */
struct zk_sasl_request {
    struct zk_str token;
};
struct zk_sasl_response {
    struct zk_str token;
};
struct zk_watcher_event {
    int32_t type;
    int32_t state;
    struct zk_str path;
};

/* Path + watch flag: getData, exists, getChildren, getChildren2. */
struct zk_path_watch_req {
    struct zk_str path;
    bool watch;
};
/* Path only: sync, getACL, getAllChildrenNumber, deleteContainer, getEphemerals. */
struct zk_path_req {
    struct zk_str path;
};
/* create, create2, createContainer, createTTL (ttl only for createTTL). */
struct zk_create_req {
    struct zk_str path;
    struct zk_str data;
    struct zk_aclvec acl;
    int32_t flags;
    int64_t ttl;
};
/* delete and check (CheckVersionRequest has the same layout). */
struct zk_path_version_req {
    struct zk_str path;
    int32_t version;
};
struct zk_setdata_req {
    struct zk_str path;
    struct zk_str data;
    int32_t version;
};
struct zk_setacl_req {
    struct zk_str path;
    struct zk_aclvec acl;
    int32_t version;
};
/* setWatches (op 101) carries the first three vectors; setWatches2 (105) all five. */
struct zk_setwatches_req {
    int64_t relative_zxid;
    struct zk_strvec data;
    struct zk_strvec exist;
    struct zk_strvec child;
    struct zk_strvec persistent;
    struct zk_strvec persistent_recursive;
};
/* addWatch (mode) and checkWatches/removeWatches (type share the int slot). */
struct zk_path_mode_req {
    struct zk_str path;
    int32_t mode;
};

/* ---- reader ----------------------------------------------------------- */
/* A received frame is read with base's bounded reader (struct base_rd,
 * base_rd_init, base_rd_left in base/base.h). Every get returns false (and
 * sets err) once input runs out or a length is out of range; later gets
 * keep failing. */
bool zk_get_i32(struct base_rd *r, int32_t *v);
bool zk_get_i64(struct base_rd *r, int64_t *v);
bool zk_get_bool(struct base_rd *r, bool *v);
bool zk_get_str(struct base_rd *r, struct zk_str *v); /* string or buffer; bounded by the input only */
bool zk_get_strvec(struct base_rd *r, struct zk_strvec *v);

/* ---- writer ----------------------------------------------------------- */
/* Growable output buffer. On allocation failure err is set and later puts are
 * no-ops; check err once at the end. Free with zk_wbuf_free. */
struct zk_wbuf {
    uint8_t *p;
    size_t len;
    size_t cap;
    bool err;
};
void zk_wbuf_init(struct zk_wbuf *w);
void zk_wbuf_free(struct zk_wbuf *w);
void zk_wbuf_reset(struct zk_wbuf *w); /* len = 0, keeps the allocation */
bool zk_wbuf_reserve(struct zk_wbuf *w, size_t extra);
/* Appends printf-formatted text (no NUL counted in len): the text answers
 * of the four-letter words and the HTTP endpoints. */
void zk_wbuf_printf(struct zk_wbuf *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void zk_put_i32(struct zk_wbuf *w, int32_t v);
void zk_put_i64(struct zk_wbuf *w, int64_t v);
void zk_put_bool(struct zk_wbuf *w, bool v);
void zk_put_bytes(struct zk_wbuf *w, const void *p, int32_t len); /* len -1: null */
void zk_put_str(struct zk_wbuf *w, struct zk_str s);
void zk_put_raw(struct zk_wbuf *w, const void *p, size_t len); /* no length prefix */
/* Appends n bytes for the caller to fill in (a header written once its
 * values are known); NULL when the buffer failed. The pointer is good until
 * the next put, which may move the buffer. */
uint8_t *zk_put_space(struct zk_wbuf *w, size_t n);
void zk_put_strvec(struct zk_wbuf *w, const struct zk_strvec *v);
/* Frames: begin reserves the 4-byte length, end patches it. */
size_t zk_frame_begin(struct zk_wbuf *w);
void zk_frame_end(struct zk_wbuf *w, size_t mark);

/* ---- record codecs ---------------------------------------------------- */
/* get_* decode one record from r (false on malformed input; anything the
 * decoder allocated is freed again on failure). put_* append one record. */
bool zk_get_stat(struct base_rd *r, struct zk_stat *v);
void zk_put_stat(struct zk_wbuf *w, const struct zk_stat *v);
bool zk_get_id(struct base_rd *r, struct zk_id *v);
void zk_put_id(struct zk_wbuf *w, const struct zk_id *v);
bool zk_get_aclvec(struct base_rd *r, struct zk_aclvec *v);
void zk_put_aclvec(struct zk_wbuf *w, const struct zk_aclvec *v);

bool zk_get_connect_req(struct base_rd *r, struct zk_connect_req *v);
void zk_put_connect_req(struct zk_wbuf *w, const struct zk_connect_req *v);
bool zk_get_connect_resp(struct base_rd *r, struct zk_connect_resp *v);
void zk_put_connect_resp(struct zk_wbuf *w, const struct zk_connect_resp *v);
bool zk_get_request_header(struct base_rd *r, struct zk_request_header *v);
void zk_put_request_header(struct zk_wbuf *w, const struct zk_request_header *v);
bool zk_get_reply_header(struct base_rd *r, struct zk_reply_header *v);
void zk_put_reply_header(struct zk_wbuf *w, const struct zk_reply_header *v);
/* The same 16 bytes written at at (a header filled in after its record). */
void zk_write_reply_header(uint8_t *at, const struct zk_reply_header *v);
bool zk_get_multi_header(struct base_rd *r, struct zk_multi_header *v);
void zk_put_multi_header(struct zk_wbuf *w, const struct zk_multi_header *v);
/* The header that ends a multi request or response (type -1, done, err -1). */
void zk_put_multi_end(struct zk_wbuf *w);
bool zk_get_auth_packet(struct base_rd *r, struct zk_auth_packet *v);
void zk_put_auth_packet(struct zk_wbuf *w, const struct zk_auth_packet *v);
bool zk_get_sasl_request(struct base_rd *r, struct zk_sasl_request *v);
void zk_put_sasl_request(struct zk_wbuf *w, const struct zk_sasl_request *v);
bool zk_get_sasl_response(struct base_rd *r, struct zk_sasl_response *v);
void zk_put_sasl_response(struct zk_wbuf *w, const struct zk_sasl_response *v);
bool zk_get_watcher_event(struct base_rd *r, struct zk_watcher_event *v);
void zk_put_watcher_event(struct zk_wbuf *w, const struct zk_watcher_event *v);

bool zk_get_path_watch_req(struct base_rd *r, struct zk_path_watch_req *v);
void zk_put_path_watch_req(struct zk_wbuf *w, const struct zk_path_watch_req *v);
bool zk_get_path_req(struct base_rd *r, struct zk_path_req *v);
void zk_put_path_req(struct zk_wbuf *w, const struct zk_path_req *v);
/* with_ttl selects CreateTTLRequest (op 21) over CreateRequest. */
bool zk_get_create_req(struct base_rd *r, struct zk_create_req *v, bool with_ttl);
void zk_put_create_req(struct zk_wbuf *w, const struct zk_create_req *v, bool with_ttl);
void zk_create_req_free(struct zk_create_req *v);
bool zk_get_path_version_req(struct base_rd *r, struct zk_path_version_req *v);
void zk_put_path_version_req(struct zk_wbuf *w, const struct zk_path_version_req *v);
bool zk_get_setdata_req(struct base_rd *r, struct zk_setdata_req *v);
void zk_put_setdata_req(struct zk_wbuf *w, const struct zk_setdata_req *v);
bool zk_get_setacl_req(struct base_rd *r, struct zk_setacl_req *v);
void zk_put_setacl_req(struct zk_wbuf *w, const struct zk_setacl_req *v);
void zk_setacl_req_free(struct zk_setacl_req *v);
/* v2 selects SetWatches2 (op 105). */
bool zk_get_setwatches_req(struct base_rd *r, struct zk_setwatches_req *v, bool v2);
void zk_put_setwatches_req(struct zk_wbuf *w, const struct zk_setwatches_req *v, bool v2);
void zk_setwatches_req_free(struct zk_setwatches_req *v);
bool zk_get_path_mode_req(struct base_rd *r, struct zk_path_mode_req *v);
void zk_put_path_mode_req(struct zk_wbuf *w, const struct zk_path_mode_req *v);

/* ---- Larch's UDP read datagrams (udp.c; the format: dataplane/UDP.md) --- */
/* Not ZooKeeper's: larchd's own read path over UDP. A request is a 48-byte
 * header, then the ZooKeeper request record of its opcode and optional zero
 * padding; a reply is a 24-byte header, ZooKeeper's ReplyHeader and, when
 * status and err are both 0, the response record. */
#define ZK_UDP_MAGIC 0x4C524348u /* "LRCH" */
#define ZK_UDP_VERSION 1
#define ZK_UDP_FLAG_SESSION 0x01
#define ZK_UDP_FLAG_REPLY 0x80
#define ZK_UDP_REQUEST_HEADER_BYTES 48
#define ZK_UDP_REPLY_HEADER_BYTES 24 /* then ZooKeeper's ReplyHeader, 16 */
#define ZK_UDP_MAC_AT 40             /* the MAC's offset in a request */
#define ZK_UDP_AMPLIFICATION 3       /* a reply is at most this many times its request */

/* A reply's status (UDP.md, "Reply"). */
enum zk_udp_status {
    ZK_UDP_OK = 0,
    ZK_UDP_BEHIND = 1,
    ZK_UDP_TOO_BIG = 2,
    ZK_UDP_NO_SESSION = 3,
    ZK_UDP_BAD_MAC = 4,
    ZK_UDP_BAD_REQUEST = 5,
    ZK_UDP_BAD_VERSION = 6,
    ZK_UDP_NOT_SERVING = 7,
    ZK_UDP_STATUSES
};
/* "ok", "behind", ... "not_serving" (mntr's names); "unknown" past the end. */
const char *zk_udp_status_name(uint32_t status);

struct zk_udp_request_header {
    uint8_t version;     /* put: ZK_UDP_VERSION when 0 */
    uint8_t flags;
    uint16_t header_len; /* put: always ZK_UDP_REQUEST_HEADER_BYTES */
    uint64_t request_id;
    int64_t min_zxid;
    int64_t session_id;
    int32_t op;
    uint32_t reserved;
    uint64_t mac;
};
/* Decodes the fixed header; p has at least ZK_UDP_REQUEST_HEADER_BYTES. The
 * magic is not checked here. */
struct zk_udp_request_header zk_get_udp_request_header(const uint8_t *p);
void zk_put_udp_request_header(struct zk_wbuf *w, const struct zk_udp_request_header *h);
/* The MAC of a signed request: SipHash-2-4 keyed by the session's password
 * over the datagram (len >= the header) with the MAC field read as zeros. */
uint64_t zk_udp_mac(const uint8_t passwd[16], const uint8_t *dgram, size_t len);
/* Sets the SESSION flag's MAC of a finished request in place. */
void zk_udp_sign(const uint8_t passwd[16], uint8_t *dgram, size_t len);

struct zk_udp_reply {
    uint8_t version, flags;
    uint64_t request_id;
    uint32_t status; /* enum zk_udp_status, or a newer server's */
    uint32_t detail; /* TOO_BIG: the reply size the request would need */
    struct zk_reply_header h;
    const uint8_t *record; /* into the datagram; status 0 and err 0 only */
    size_t record_len;
};
void zk_put_udp_reply_header(struct zk_wbuf *w, uint64_t request_id, uint8_t flags,
                             uint32_t status, uint32_t detail, const struct zk_reply_header *h);
/* The same two headers written at b, which holds ZK_UDP_REPLY_HEADERS_BYTES. */
#define ZK_UDP_REPLY_HEADERS_BYTES (ZK_UDP_REPLY_HEADER_BYTES + ZK_REPLY_HEADER_BYTES)
void zk_write_udp_reply_header(uint8_t *b, uint64_t request_id, uint8_t flags, uint32_t status,
                               uint32_t detail, const struct zk_reply_header *h);
/* False when d is not a reply of this protocol (short, another magic, no
 * REPLY flag, a header length this client cannot skip). */
bool zk_get_udp_reply(const uint8_t *d, size_t n, struct zk_udp_reply *out);

/* ---- names ------------------------------------------------------------ */
/* Human names for logs, 4lw and CLIs: "getData", "NONODE"; "unknown" if out of range. */
const char *zk_op_name(int32_t op);
const char *zk_err_name(int32_t err);
/* True for ops that change the tree or session state (go to the sequencer). */
bool zk_op_is_write(int32_t op);

/* ---- paths and digests (path.c, digest.c) ----------------------------- */
/* ZooKeeper's PathUtils.validatePath: absolute, no empty, "." or ".." segment,
 * no trailing slash (except "/"), no NUL or the banned control/unicode ranges.
 * Any length (O(len), no allocation). Returns ZK_OK or ZK_EBADARGUMENTS. */
int zk_path_validate(const char *path, size_t len);
/* ZooKeeper's digest: base64(sha1("user:password")); out gets 28 chars + NUL. */
void zk_digest_of(const char *user_colon_password, size_t len, char out[29]);

#endif /* LARCH_PROTO_H */
