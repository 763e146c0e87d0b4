/*
 * gen_datadir — writes a small larchd data directory in the formats of the
 * code it is built with, for regression fixtures that pin an old format
 * (tests/fixtures/README.md).
 *
 *   gen_datadir DIR    writes DIR/larch/{secret,snapshot.<zxid>,log.1} and
 *                      prints one line per session to stdout:
 *                      "session <id hex> passwd <32 hex digits> timeout <ms>"
 *
 * The life it records: session A connects, creates /fixture and the
 * ephemeral /fixture/eph-a; a snapshot is taken; session B connects,
 * creates /fixture/eph-b and changes /fixture. So A is in the snapshot and
 * in the log, B only in the log. The passwords printed are the ones the
 * ConnectResponse handed out, which a client of an upgraded server must
 * still be able to reattach with.
 *
 * Deterministic: the key in DIR/larch/secret is fixed (written before
 * durability_open reads it) and the sequencer runs on a clock that only
 * this program moves, so session ids, times and bytes repeat.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <urcu.h>

#include "server/durability.h"

#define WALL_MS 1700000000000LL
#define SESSION_TIMEOUT_MS 40000

static int64_t fixed_clock_ms(bool wall)
{
    return wall ? WALL_MS : 1000000;
}

struct gen {
    struct tree *t;
    struct durability *d;
    struct seq *s;
    int64_t session;
    uint8_t passwd[16];
    int32_t timeout_ms;
    int failures;
};

static void take_output(void *arg, struct seq_out *o)
{
    struct gen *g = arg;
    if (o->kind == SEQ_OUT_CONNECT) {
        g->session = o->session_id;
        g->timeout_ms = o->timeout_ms;
        memcpy(g->passwd, o->passwd, sizeof g->passwd);
    } else if (o->kind == SEQ_OUT_REPLY && o->frame != NULL) {
        struct base_rd r;
        int32_t len;
        struct zk_reply_header h;
        base_rd_init(&r, o->frame, o->frame_len);
        if (!zk_get_i32(&r, &len) || !zk_get_reply_header(&r, &h) || h.err != ZK_OK)
            g->failures++;
    }
    seq_out_free(o);
}

static void run(struct gen *g, struct seq_req *r)
{
    struct seq_req *reqs[1] = { r };
    rcu_read_lock();
    seq_run_round(g->s, reqs, 1, fixed_clock_ms(false), fixed_clock_ms(true));
    rcu_read_unlock();
    seq_worker_drain(g->s, 0, take_output, g);
}

/* Connects a new session and prints its line. */
static void connect_session(struct gen *g)
{
    struct seq_req *r = seq_req_new(SEQ_REQ_CONNECT, NULL, 0, NULL, 0);
    if (r == NULL)
        abort();
    r->worker = 0;
    r->conn = 1;
    r->timeout_ms = SESSION_TIMEOUT_MS;
    run(g, r);
    if (g->session == 0 || g->timeout_ms == 0)
        abort();
    printf("session %016" PRIx64 " passwd ", (uint64_t)g->session);
    for (size_t i = 0; i < sizeof g->passwd; i++)
        printf("%02x", g->passwd[i]);
    printf(" timeout %d\n", g->timeout_ms);
}

static void write_req(struct gen *g, int32_t op, const struct zk_wbuf *b)
{
    static int32_t xid;
    struct seq_req *r = seq_req_new(SEQ_REQ_WRITE, b->p, b->len, NULL, 0);
    if (r == NULL)
        abort();
    r->worker = 0;
    r->conn = 1;
    r->session_id = g->session;
    r->xid = ++xid;
    r->op = op;
    run(g, r);
}

static void create(struct gen *g, const char *path, const char *data, int32_t flags)
{
    struct zk_acl open_acl = { .perms = ZK_PERM_ALL,
                               .id = { zk_str_c("world"), zk_str_c("anyone") } };
    struct zk_create_req q = { .path = zk_str_c(path), .data = zk_str_c(data),
                               .acl = { .count = 1, .items = &open_acl }, .flags = flags };
    struct zk_wbuf b;
    zk_wbuf_init(&b);
    zk_put_create_req(&b, &q, false);
    write_req(g, ZK_OP_CREATE, &b);
    zk_wbuf_free(&b);
}

static void set_data(struct gen *g, const char *path, const char *data)
{
    struct zk_setdata_req q = { .path = zk_str_c(path), .data = zk_str_c(data), .version = -1 };
    struct zk_wbuf b;
    zk_wbuf_init(&b);
    zk_put_setdata_req(&b, &q);
    write_req(g, ZK_OP_SETDATA, &b);
    zk_wbuf_free(&b);
}

/* The fixed key, written where durability_open looks for it. */
static int write_key(struct storage *st, const char *data_dir)
{
    char dir[4200], path[4300];
    uint8_t key[SEQ_PASSWD_KEY_BYTES];
    for (size_t i = 0; i < sizeof key; i++)
        key[i] = (uint8_t)(0x40 + i);
    snprintf(dir, sizeof dir, "%s/larch", data_dir);
    snprintf(path, sizeof path, "%s/secret", dir);
    int rc = storage_mkdirs(st, dir);
    return rc != 0 ? rc : storage_write_whole(st, dir, path, key, sizeof key, STORAGE_PRIVATE);
}

static int open_all(struct gen *g, struct storage *st, const char *data_dir)
{
    static struct config c;
    config_defaults(&c);
    snprintf(c.data_dir, sizeof c.data_dir, "%s", data_dir);
    c.prealloc_kb = 4; /* a fixture of kilobytes, not of a 64 MiB chunk */
    char err[512];
    g->t = tree_new();
    int rc = g->t != NULL ? write_key(st, data_dir) : -1;
    if (rc == 0)
        rc = durability_open(&c, st, g->t, &g->d, err, sizeof err);
    if (rc != 0) {
        fprintf(stderr, "gen_datadir: %s: error %d %s\n", data_dir, rc, err);
        return rc;
    }
    struct seq_cfg scfg = { .min_session_timeout_ms = 4000, .max_session_timeout_ms = 40000,
                            .container_check_ms = 60000, .tick_ms = 1000,
                            .clock_ms = fixed_clock_ms, .log = durability_log(g->d),
                            .passwd_key_set = true };
    durability_passwd_key(g->d, scfg.passwd_key);
    g->s = seq_new(g->t, &scfg, 1);
    return g->s != NULL ? 0 : -1;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gen_datadir DIR\n");
        return 2;
    }
    rcu_register_thread();
    struct storage *st = storage_posix_new();
    struct gen g = { 0 };
    if (st == NULL || open_all(&g, st, argv[1]) != 0)
        return 1;
    connect_session(&g);
    create(&g, "/fixture", "v1", ZK_PERSISTENT);
    create(&g, "/fixture/eph-a", "a", ZK_EPHEMERAL);
    int rc = durability_snapshot(g.d);
    connect_session(&g);
    create(&g, "/fixture/eph-b", "b", ZK_EPHEMERAL);
    set_data(&g, "/fixture", "v1, after the snapshot");
    seq_free(g.s);
    durability_free(g.d);
    rcu_barrier();
    tree_free(g.t);
    storage_destroy(st);
    rcu_unregister_thread();
    if (rc != 0 || g.failures != 0) {
        fprintf(stderr, "gen_datadir: snapshot %d, %d failed writes\n", rc, g.failures);
        return 1;
    }
    return 0;
}
