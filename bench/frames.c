/*
 * frames.c — the few request frames larch-bench sends, encoded with the
 * shared jute codec (proto/proto.h). Each function appends one whole
 * length-prefixed frame; encoding errors surface as w->err.
 */
#include "bench/bench.h"
#include "proto/proto.h"

#include <string.h>

static size_t begin(struct zk_wbuf *w, int32_t xid, int32_t op)
{
    size_t mark = zk_frame_begin(w);
    struct zk_request_header h = { .xid = xid, .type = op };
    zk_put_request_header(w, &h);
    return mark;
}

/* Protocol version 0, fresh session, the 16 zero bytes ZooKeeper's own
 * clients send as the password of a new session, readOnly false. */
void bench_put_connect(struct zk_wbuf *w, int32_t timeout_ms)
{
    static const char zero_passwd[16];
    size_t mark = zk_frame_begin(w);
    struct zk_connect_req req = {
        .protocol_version = 0,
        .last_zxid_seen = 0,
        .timeout_ms = timeout_ms,
        .session_id = 0,
        .passwd = { zero_passwd, (int32_t)sizeof(zero_passwd) },
        .read_only = false,
        .has_read_only = true,
    };
    zk_put_connect_req(w, &req);
    zk_frame_end(w, mark);
}

int32_t bench_read_opcode(enum bench_read_op op)
{
    switch (op) {
    case BENCH_READ_EXISTS: return ZK_OP_EXISTS;
    case BENCH_READ_GETCHILDREN: return ZK_OP_GETCHILDREN;
    default: return ZK_OP_GETDATA;
    }
}

void bench_put_read(struct zk_wbuf *w, int32_t xid, enum bench_read_op op, const char *path,
                    bool watch)
{
    size_t mark = begin(w, xid, bench_read_opcode(op));
    struct zk_path_watch_req req = { .path = zk_str_c(path), .watch = watch };
    zk_put_path_watch_req(w, &req);
    zk_frame_end(w, mark);
}

void bench_put_udp_read(struct zk_wbuf *w, uint64_t request_id, enum bench_read_op op,
                        const char *path)
{
    struct zk_udp_request_header h = { .request_id = request_id, .op = bench_read_opcode(op) };
    zk_put_udp_request_header(w, &h);
    struct zk_path_watch_req req = { .path = zk_str_c(path), .watch = false };
    zk_put_path_watch_req(w, &req);
}

void bench_put_setdata(struct zk_wbuf *w, int32_t xid, const char *path, const void *value,
                       uint32_t value_len)
{
    size_t mark = begin(w, xid, ZK_OP_SETDATA);
    struct zk_setdata_req req = {
        .path = zk_str_c(path),
        .data = { value, (int32_t)value_len },
        .version = -1,
    };
    zk_put_setdata_req(w, &req);
    zk_frame_end(w, mark);
}

/* Persistent node, world:anyone with all permissions (ZooDefs.Ids.OPEN_ACL_UNSAFE). */
void bench_put_create(struct zk_wbuf *w, int32_t xid, const char *path, const void *value,
                      uint32_t value_len)
{
    static const char scheme[] = "world", id[] = "anyone";
    struct zk_acl open_acl = {
        .perms = ZK_PERM_ALL,
        .id = { { scheme, (int32_t)strlen(scheme) }, { id, (int32_t)strlen(id) } },
    };
    size_t mark = begin(w, xid, ZK_OP_CREATE);
    struct zk_create_req req = {
        .path = zk_str_c(path),
        .data = { value, (int32_t)value_len },
        .acl = { 1, &open_acl },
        .flags = ZK_PERSISTENT,
    };
    zk_put_create_req(w, &req, false);
    zk_frame_end(w, mark);
}

void bench_put_delete(struct zk_wbuf *w, int32_t xid, const char *path)
{
    size_t mark = begin(w, xid, ZK_OP_DELETE);
    struct zk_path_version_req req = { .path = zk_str_c(path), .version = -1 };
    zk_put_path_version_req(w, &req);
    zk_frame_end(w, mark);
}

void bench_put_children(struct zk_wbuf *w, int32_t xid, const char *path)
{
    bench_put_read(w, xid, BENCH_READ_GETCHILDREN, path, false);
}

void bench_put_close(struct zk_wbuf *w, int32_t xid)
{
    size_t mark = begin(w, xid, ZK_OP_CLOSESESSION);
    zk_frame_end(w, mark);
}

void bench_put_ping(struct zk_wbuf *w)
{
    size_t mark = begin(w, ZK_XID_PING, ZK_OP_PING);
    zk_frame_end(w, mark);
}
