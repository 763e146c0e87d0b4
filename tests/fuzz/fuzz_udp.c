/*
 * fuzz_udp — the UDP read path's packet handler (dp_udp_handle,
 * dataplane/UDP.md) on arbitrary datagrams.
 *
 * Input: [mode][datagram]. Mode bits help the fuzzer past the checks it
 * cannot guess: bit 0 writes a valid header's magic, version, flags and
 * header length over the datagram's (when it is long enough); bit 1 signs
 * it as the one open session (its id at offset 24, the SESSION flag, the
 * MAC); bit 2 gives the handler an Ethernet frame's datagram limit (1,472)
 * instead of the kernel's (65,507); bit 3 sends it from 198.18.0.9 instead
 * of 127.0.0.1. The world is built once: a session that authenticated as
 * bob, nodes open to all, to bob only, to 198.18.0.0/15 only, one of
 * 1,000 bytes, children to list, and enough others that the prefetch pass
 * (dp_udp_prefetch), which runs on each datagram first, does its work.
 * Properties: nothing crashes, leaks or reads past the datagram (it is an
 * exact-size copy); a reply fits the limit and three times the request,
 * starts with the magic and the REPLY flag, echoes the request id, and
 * carries a status the protocol defines; a datagram that is not a request
 * gets no reply.
 */
#include <urcu.h>

#include "dataplane/dp_int.h"
#include "tests/fuzz/fuzz.h"

#define BOB_ID "bob:fyVmFCwVbTJYrznoSu1koqYEYF0="

static struct tree *g_tree;
static struct seq *g_seq;
static struct dp *g_dp;
static int64_t g_sid;
static uint8_t g_pw[16];
static struct zk_wbuf g_out;
static struct dp_udp_counters g_ctr;

static void run(struct seq_req *r)
{
    struct seq_req *reqs[1] = { r };
    rcu_read_lock();
    seq_run_round(g_seq, reqs, 1, 1000000, 1700000000000);
    rcu_read_unlock();
}

/* Takes worker 0's outputs: the connect result's session, if there is one. */
static void drain_one(void *arg, struct seq_out *o)
{
    (void)arg;
    if (o->kind == SEQ_OUT_CONNECT) {
        g_sid = o->session_id;
        memcpy(g_pw, o->passwd, sizeof g_pw);
    }
    seq_out_free(o);
}

static void create(const char *path, size_t len, const char *scheme, const char *id, int32_t perms)
{
    static uint8_t data[1000];
    struct zk_acl acl = { perms, { zk_str_c(scheme), zk_str_c(id) } };
    struct zk_create_req q = { .path = zk_str_c(path), .data = { (const char *)data, (int32_t)len },
                               .acl = { 1, &acl }, .flags = ZK_PERSISTENT };
    struct zk_wbuf b;
    zk_wbuf_init(&b);
    zk_put_create_req(&b, &q, false);
    BASE_ASSERT(!b.err);
    struct seq_req *r = seq_req_new(SEQ_REQ_WRITE, b.p, b.len, NULL, 0);
    BASE_ASSERT(r != NULL);
    r->worker = 0;
    r->conn = 1;
    r->session_id = g_sid;
    r->op = ZK_OP_CREATE;
    run(r);
    zk_wbuf_free(&b);
    seq_worker_drain(g_seq, 0, drain_one, NULL);
}

static void world_build(void)
{
    rcu_register_thread(); /* tree.h: every tree thread is a liburcu reader */
    g_tree = tree_new();
    struct seq_cfg scfg = { .min_session_timeout_ms = 4000, .max_session_timeout_ms = 40000,
                            .container_check_ms = 60000, .tick_ms = 1000,
                            .passwd_key_set = true };
    g_seq = seq_new(g_tree, &scfg, 1);
    BASE_ASSERT(g_tree != NULL && g_seq != NULL);
    struct seq_req *c = seq_req_new(SEQ_REQ_CONNECT, NULL, 0, NULL, 0);
    BASE_ASSERT(c != NULL);
    c->worker = 0;
    c->conn = 1;
    c->timeout_ms = 30000;
    run(c);
    seq_worker_drain(g_seq, 0, drain_one, NULL);
    BASE_ASSERT(g_sid != 0);
    create("/a", 5, "world", "anyone", ZK_PERM_ALL);
    create("/a/b", 0, "world", "anyone", ZK_PERM_ALL);
    create("/a/c", 0, "world", "anyone", ZK_PERM_ALL);
    create("/bob", 3, "digest", BOB_ID, ZK_PERM_READ);
    create("/lab", 3, "ip", "198.18.0.0/15", ZK_PERM_READ);
    create("/big", 1000, "world", "anyone", ZK_PERM_ALL);
    /* enough nodes that the prefetch pass runs (tree_prefetch_pays) */
    create("/many", 0, "world", "anyone", ZK_PERM_ALL);
    for (int i = 0; !tree_prefetch_pays(g_tree); i++) {
        char path[32];
        snprintf(path, sizeof path, "/many/n%05d", i);
        create(path, 8, "world", "anyone", ZK_PERM_ALL);
    }
    struct tree_authid bob = { "digest", BOB_ID };
    BASE_ASSERT(tree_session_publish_auth(g_tree, g_sid, &bob, 1, false, 0, 1) == 0);
    struct dp_cfg cfg = { .bind_addr = "127.0.0.1", .workers = 1,
                          .max_buffer_bytes = ZK_MAX_BUFFER_DEFAULT, .super_digest = "" };
    char err[256];
    g_dp = dp_new(&cfg, g_tree, g_seq, err, sizeof err);
    if (g_dp == NULL) {
        fprintf(stderr, "fuzz_udp: %s\n", err);
        abort();
    }
    zk_wbuf_init(&g_out);
}

static void fix_header(uint8_t *d, size_t n, uint8_t mode)
{
    if (n < ZK_UDP_REQUEST_HEADER_BYTES)
        return;
    if (mode & 1) {
        base_put_be32(d, ZK_UDP_MAGIC);
        d[4] = ZK_UDP_VERSION;
        d[5] &= ZK_UDP_FLAG_SESSION;
        base_put_be16(d + 6, ZK_UDP_REQUEST_HEADER_BYTES);
    }
    if (mode & 2) {
        d[5] |= ZK_UDP_FLAG_SESSION;
        base_put_be64(d + 24, (uint64_t)g_sid);
        memset(d + 40, 0, 8);
        base_put_be64(d + 40, base_siphash24(g_pw, d, n));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (g_dp == NULL)
        world_build();
    if (size == 0)
        return 0;
    uint8_t mode = data[0];
    uint8_t *d = fuzz_dup(data + 1, size - 1);
    size_t n = size - 1;
    fix_header(d, n, mode);
    size_t max = (mode & 4) ? 1472 : 65507;
    struct tree_addr peer = { .len = 4, .b = { 127, 0, 0, 1 } };
    if (mode & 8)
        peer = (struct tree_addr){ .len = 4, .b = { 198, 18, 0, 9 } };
    rcu_read_lock();
    const uint8_t *batch[1] = { d };
    (void)dp_udp_prefetch(g_dp, batch, &n, 1); /* as a back end runs it before a batch */
    size_t len = dp_udp_handle(g_dp, d, n, &peer, max, &g_out, &g_ctr);
    rcu_read_unlock();
    if (n < ZK_UDP_REQUEST_HEADER_BYTES || base_get_be32(d) != ZK_UDP_MAGIC ||
        (d[5] & ZK_UDP_FLAG_REPLY))
        BASE_ASSERT(len == 0);
    if (len > 0) {
        BASE_ASSERT(len == g_out.len && len <= max && len <= 3 * n);
        BASE_ASSERT(len >= ZK_UDP_REPLY_HEADER_BYTES + 16);
        BASE_ASSERT(base_get_be32(g_out.p) == ZK_UDP_MAGIC);
        BASE_ASSERT(g_out.p[5] & ZK_UDP_FLAG_REPLY);
        BASE_ASSERT(memcmp(g_out.p + 8, d + 8, 8) == 0);
        uint32_t status = base_get_be32(g_out.p + 16);
        BASE_ASSERT(status < ZK_UDP_STATUSES);
        if (status != ZK_UDP_OK)
            BASE_ASSERT(len == ZK_UDP_REPLY_HEADER_BYTES + 16);
    }
    free(d);
    return 0;
}
