/*
 * test_sequencer.c — drives the sequencer's pure core (seq_run_round,
 * seq_tick) without its thread and checks what each worker receives:
 * connect results, replies byte for byte, event batches before replies,
 * session moves, expiry and closeSession.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/hmac.h>
#include <poll.h>
#include <urcu.h>

#include "replication/replication.h"
#include "replication/seq_int.h"

#define NOW 1000000
#define WALL 1700000000000LL

struct outs {
    struct seq_out *v[64];
    size_t n;
};

static void collect(void *arg, struct seq_out *o)
{
    struct outs *s = arg;
    assert_true(s->n < 64);
    s->v[s->n++] = o;
}

static void outs_free(struct outs *s)
{
    for (size_t i = 0; i < s->n; i++)
        seq_out_free(s->v[i]);
    s->n = 0;
}

struct fx {
    struct tree *t;
    struct seq *s;
};

static int setup(void **state)
{
    static struct fx f;
    rcu_register_thread();
    f.t = tree_new();
    struct seq_cfg cfg = { .min_session_timeout_ms = 4000, .max_session_timeout_ms = 40000,
                           .container_check_ms = 60000, .ttl_enabled = true, .tick_ms = 1000 };
    f.s = seq_new(f.t, &cfg, 2);
    assert_non_null(f.t);
    assert_non_null(f.s);
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    seq_free(f->s);
    rcu_barrier();
    tree_free(f->t);
    rcu_unregister_thread();
    return 0;
}

static void run(struct fx *f, struct seq_req *r, int64_t now)
{
    struct seq_req *reqs[1] = { r };
    rcu_read_lock();
    seq_run_round(f->s, reqs, 1, now, WALL + now);
    rcu_read_unlock();
}

static void drain(struct fx *f, int w, struct outs *o)
{
    seq_worker_drain(f->s, w, collect, o);
}

static int64_t connect_session(struct fx *f, int w, uint64_t conn, int32_t timeout, uint8_t pw[16])
{
    struct seq_req *r = seq_req_new(SEQ_REQ_CONNECT, NULL, 0, NULL, 0);
    r->worker = w;
    r->conn = conn;
    r->timeout_ms = timeout;
    run(f, r, NOW);
    struct outs o = { 0 };
    drain(f, w, &o);
    /* The createSession txn advances the zxid: an (empty) event batch, then the result. */
    assert_true(o.n >= 1);
    struct seq_out *c = o.v[o.n - 1];
    assert_int_equal(c->kind, SEQ_OUT_CONNECT);
    assert_int_equal(c->conn, conn);
    int64_t id = c->session_id;
    if (pw)
        memcpy(pw, c->passwd, 16);
    outs_free(&o);
    struct outs other = { 0 };
    drain(f, 1 - w, &other);
    outs_free(&other);
    return id;
}

static struct seq_req *write_req(int w, uint64_t conn, int64_t session, int32_t xid, int32_t op,
                                 const struct zk_wbuf *body)
{
    struct seq_req *r = seq_req_new(SEQ_REQ_WRITE, body ? body->p : NULL, body ? body->len : 0, NULL, 0);
    r->worker = w;
    r->conn = conn;
    r->session_id = session;
    r->xid = xid;
    r->op = op;
    return r;
}

static void create_body(struct zk_wbuf *b, const char *path, int32_t flags)
{
    struct zk_acl open_acl = { .perms = ZK_PERM_ALL, .id = { zk_str_c("world"), zk_str_c("anyone") } };
    struct zk_create_req q = { .path = zk_str_c(path), .data = zk_str_c("v"),
                               .acl = { .count = 1, .items = &open_acl }, .flags = flags, .ttl = 0 };
    zk_put_create_req(b, &q, false);
}

/* Parses a reply frame: length prefix, ReplyHeader, and leaves r on the body. */
static struct zk_reply_header parse_reply(const struct seq_out *o, struct base_rd *r)
{
    assert_non_null(o->frame);
    base_rd_init(r, o->frame, o->frame_len);
    int32_t len;
    assert_true(zk_get_i32(r, &len));
    assert_int_equal((size_t)len, o->frame_len - 4);
    struct zk_reply_header h;
    assert_true(zk_get_reply_header(r, &h));
    return h;
}

static void test_connect_clamps_timeout(void **state)
{
    struct fx *f = *state;
    uint8_t pw[16];
    int64_t id = connect_session(f, 0, 7, 100, pw);
    assert_true(id != 0);
    rcu_read_lock();
    struct tree_session *s = tree_session_find(f->t, id);
    assert_non_null(s);
    assert_int_equal(s->timeout_ms, 4000); /* clamped up to minSessionTimeout */
    assert_int_equal(atomic_load(&s->owner_worker), 0);
    rcu_read_unlock();
}

static void test_events_precede_reply_and_reach_all_workers(void **state)
{
    struct fx *f = *state;
    int64_t id = connect_session(f, 0, 7, 10000, NULL);
    struct zk_wbuf b;
    zk_wbuf_init(&b);
    create_body(&b, "/a", ZK_PERSISTENT);
    run(f, write_req(0, 7, id, 11, ZK_OP_CREATE, &b), NOW);
    zk_wbuf_free(&b);
    struct outs o0 = { 0 }, o1 = { 0 };
    drain(f, 0, &o0);
    drain(f, 1, &o1);
    assert_int_equal(o0.n, 2);
    assert_int_equal(o0.v[0]->kind, SEQ_OUT_EVENTS);
    assert_int_equal(o0.v[1]->kind, SEQ_OUT_REPLY);
    /* The other worker gets the same batch (it may hold watches on /a). */
    assert_int_equal(o1.n, 1);
    assert_ptr_equal(o1.v[0]->events, o0.v[0]->events);
    const struct seq_events *ev = o0.v[0]->events;
    assert_int_equal(ev->count, 2);
    assert_int_equal(ev->items[0].type, ZK_EVENT_CREATED);
    assert_string_equal(ev->items[0].path, "/a");
    assert_int_equal(ev->items[1].type, ZK_EVENT_CHILD_CHANGED);
    assert_string_equal(ev->items[1].path, "/");
    struct base_rd r;
    struct zk_reply_header h = parse_reply(o0.v[1], &r);
    assert_int_equal(h.xid, 11);
    assert_int_equal(h.err, ZK_OK);
    assert_int_equal(h.zxid, ev->through_zxid);
    assert_true(o0.v[1]->pending_done);
    struct zk_str path;
    assert_true(zk_get_str(&r, &path));
    assert_int_equal(path.len, 2);
    assert_memory_equal(path.ptr, "/a", 2);
    assert_int_equal(base_rd_left(&r), 0);
    outs_free(&o0);
    outs_free(&o1);
}

static bool worker_woken(struct fx *f, int w)
{
    struct pollfd p = { .fd = seq_worker_fd(f->s, w), .events = POLLIN };
    bool woken = poll(&p, 1, 0) == 1;
    seq_worker_idle_end(f->s, w);
    if (woken)
        seq_worker_ack(f->s, w);
    return woken;
}

static void create_from(struct fx *f, int64_t id, int32_t xid, const char *path)
{
    struct zk_wbuf b;
    zk_wbuf_init(&b);
    create_body(&b, path, ZK_PERSISTENT);
    run(f, write_req(0, 7, id, xid, ZK_OP_CREATE, &b), NOW);
    zk_wbuf_free(&b);
}

/* A sleeping worker is woken for output addressed to it, and for a round's
 * watch events only when it said it wants them: a write must not wake
 * every idle worker. The batch still waits in its queue. */
static void test_idle_worker_woken_only_for_its_output_or_watches(void **state)
{
    struct fx *f = *state;
    int64_t id = connect_session(f, 0, 7, 10000, NULL);
    assert_true(seq_worker_idle_begin(f->s, 0, false));
    assert_true(seq_worker_idle_begin(f->s, 1, false));
    create_from(f, id, 11, "/quiet");
    assert_true(worker_woken(f, 0)); /* the reply */
    assert_false(worker_woken(f, 1)); /* only events, and no watches */
    struct outs o0 = { 0 }, o1 = { 0 };
    drain(f, 0, &o0);
    drain(f, 1, &o1);
    assert_int_equal(o1.n, 1);
    assert_int_equal(o1.v[0]->kind, SEQ_OUT_EVENTS);
    outs_free(&o0);
    outs_free(&o1);

    assert_true(seq_worker_idle_begin(f->s, 1, true)); /* it holds watches now */
    create_from(f, id, 12, "/watched");
    assert_true(worker_woken(f, 1));
    drain(f, 0, &o0);
    drain(f, 1, &o1);
    assert_int_equal(o1.n, 1);
    outs_free(&o0);
    outs_free(&o1);
}

static void test_error_reply_has_no_body_and_no_events(void **state)
{
    struct fx *f = *state;
    int64_t id = connect_session(f, 0, 7, 10000, NULL);
    struct zk_wbuf b;
    zk_wbuf_init(&b);
    create_body(&b, "/missing/child", ZK_PERSISTENT);
    run(f, write_req(0, 7, id, 12, ZK_OP_CREATE, &b), NOW);
    zk_wbuf_free(&b);
    struct outs o = { 0 };
    drain(f, 0, &o);
    assert_int_equal(o.n, 1);
    struct base_rd r;
    struct zk_reply_header h = parse_reply(o.v[0], &r);
    assert_int_equal(h.err, ZK_ENONODE);
    assert_int_equal(base_rd_left(&r), 0);
    outs_free(&o);
}

static void test_malformed_body_is_marshalling_error(void **state)
{
    struct fx *f = *state;
    int64_t id = connect_session(f, 0, 7, 10000, NULL);
    struct zk_wbuf b;
    zk_wbuf_init(&b);
    zk_put_i32(&b, 1000); /* a string length with no bytes behind it */
    run(f, write_req(0, 7, id, 13, ZK_OP_SETDATA, &b), NOW);
    zk_wbuf_free(&b);
    struct outs o = { 0 };
    drain(f, 0, &o);
    assert_int_equal(o.n, 1);
    struct base_rd r;
    assert_int_equal(parse_reply(o.v[0], &r).err, ZK_EMARSHALLINGERROR);
    outs_free(&o);
}

static void test_failed_multi_reports_each_op(void **state)
{
    struct fx *f = *state;
    int64_t id = connect_session(f, 0, 7, 10000, NULL);
    struct zk_wbuf b;
    zk_wbuf_init(&b);
    struct zk_multi_header h1 = { .type = ZK_OP_CREATE, .done = false, .err = -1 };
    zk_put_multi_header(&b, &h1);
    create_body(&b, "/m1", ZK_PERSISTENT);
    struct zk_multi_header h2 = { .type = ZK_OP_DELETE, .done = false, .err = -1 };
    zk_put_multi_header(&b, &h2);
    struct zk_path_version_req d = { .path = zk_str_c("/nope"), .version = -1 };
    zk_put_path_version_req(&b, &d);
    struct zk_multi_header h3 = { .type = ZK_OP_CREATE, .done = false, .err = -1 };
    zk_put_multi_header(&b, &h3);
    create_body(&b, "/m3", ZK_PERSISTENT);
    zk_put_multi_end(&b);
    run(f, write_req(0, 7, id, 14, ZK_OP_MULTI, &b), NOW);
    zk_wbuf_free(&b);
    struct outs o = { 0 };
    drain(f, 0, &o);
    assert_int_equal(o.n, 1); /* nothing applied: no event batch */
    struct base_rd r;
    assert_int_equal(parse_reply(o.v[0], &r).err, ZK_OK); /* errors travel per op */
    int32_t want[3] = { ZK_OK, ZK_ENONODE, ZK_ERUNTIMEINCONSISTENCY };
    for (int i = 0; i < 3; i++) {
        struct zk_multi_header mh;
        int32_t err;
        assert_true(zk_get_multi_header(&r, &mh));
        assert_int_equal(mh.type, ZK_OP_ERROR);
        assert_false(mh.done);
        assert_true(zk_get_i32(&r, &err));
        assert_int_equal(err, want[i]);
    }
    struct zk_multi_header mh;
    assert_true(zk_get_multi_header(&r, &mh));
    assert_true(mh.done);
    outs_free(&o);
    rcu_read_lock();
    struct tree_view v;
    assert_int_equal(tree_get(f->t, "/m1", 3, &v), ZK_ENONODE);
    rcu_read_unlock();
}

static void test_reattach_moves_session_and_closes_old_conn(void **state)
{
    struct fx *f = *state;
    uint8_t pw[16];
    int64_t id = connect_session(f, 0, 7, 10000, pw);
    struct seq_req *r = seq_req_new(SEQ_REQ_CONNECT, NULL, 0, NULL, 0);
    r->worker = 1;
    r->conn = 99;
    r->session_id = id;
    r->timeout_ms = 10000;
    memcpy(r->passwd, pw, 16);
    r->passwd_len = 16;
    run(f, r, NOW + 10);
    struct outs o0 = { 0 }, o1 = { 0 };
    drain(f, 0, &o0);
    drain(f, 1, &o1);
    assert_int_equal(o0.n, 1);
    assert_int_equal(o0.v[0]->kind, SEQ_OUT_CLOSE);
    assert_int_equal(o0.v[0]->conn, 7);
    assert_int_equal(o1.n, 1);
    assert_int_equal(o1.v[0]->kind, SEQ_OUT_CONNECT);
    assert_int_equal(o1.v[0]->session_id, id);
    assert_int_equal(o1.v[0]->timeout_ms, 10000);
    assert_memory_equal(o1.v[0]->passwd, pw, 16);
    outs_free(&o0);
    outs_free(&o1);
}

static void test_wrong_password_is_expired(void **state)
{
    struct fx *f = *state;
    uint8_t pw[16];
    int64_t id = connect_session(f, 0, 7, 10000, pw);
    struct seq_req *r = seq_req_new(SEQ_REQ_CONNECT, NULL, 0, NULL, 0);
    r->worker = 1;
    r->conn = 5;
    r->session_id = id;
    pw[0] ^= 1;
    memcpy(r->passwd, pw, 16);
    r->passwd_len = 16;
    run(f, r, NOW);
    struct outs o = { 0 };
    drain(f, 1, &o);
    assert_int_equal(o.n, 1);
    assert_int_equal(o.v[0]->kind, SEQ_OUT_CONNECT);
    assert_int_equal(o.v[0]->timeout_ms, 0);
    outs_free(&o);
}

static void test_client_ahead_of_server_is_refused(void **state)
{
    struct fx *f = *state;
    struct seq_req *r = seq_req_new(SEQ_REQ_CONNECT, NULL, 0, NULL, 0);
    r->worker = 0;
    r->conn = 3;
    r->timeout_ms = 10000;
    r->last_zxid_seen = 1000000;
    run(f, r, NOW);
    struct outs o = { 0 };
    drain(f, 0, &o);
    assert_int_equal(o.n, 1);
    assert_int_equal(o.v[0]->kind, SEQ_OUT_CLOSE);
    assert_null(o.v[0]->frame);
    outs_free(&o);
}

static void test_expiry_deletes_ephemerals_and_closes_owner(void **state)
{
    struct fx *f = *state;
    int64_t id = connect_session(f, 0, 7, 4000, NULL);
    struct zk_wbuf b;
    zk_wbuf_init(&b);
    create_body(&b, "/eph", ZK_EPHEMERAL);
    run(f, write_req(0, 7, id, 1, ZK_OP_CREATE, &b), NOW);
    zk_wbuf_free(&b);
    struct outs o = { 0 };
    drain(f, 0, &o);
    outs_free(&o);
    /* Not yet due: nothing happens. */
    rcu_read_lock();
    seq_tick(f->s, NOW + 3999, WALL);
    rcu_read_unlock();
    drain(f, 0, &o);
    assert_int_equal(o.n, 0);
    rcu_read_lock();
    seq_tick(f->s, NOW + 5001, WALL);
    struct tree_view v;
    assert_int_equal(tree_get(f->t, "/eph", 4, &v), ZK_ENONODE);
    assert_null(tree_session_find(f->t, id));
    rcu_read_unlock();
    drain(f, 0, &o);
    assert_true(o.n >= 2);
    assert_int_equal(o.v[0]->kind, SEQ_OUT_EVENTS);
    assert_int_equal(o.v[o.n - 1]->kind, SEQ_OUT_CLOSE);
    assert_int_equal(o.v[o.n - 1]->conn, 7);
    outs_free(&o);
    struct seq_stats st;
    seq_get_stats(f->s, &st);
    assert_int_equal(st.sessions_expired, 1);
}

static void test_close_session_replies_then_closes(void **state)
{
    struct fx *f = *state;
    int64_t id = connect_session(f, 0, 7, 10000, NULL);
    run(f, write_req(0, 7, id, 20, ZK_OP_CLOSESESSION, NULL), NOW);
    struct outs o = { 0 };
    drain(f, 0, &o);
    struct seq_out *last = o.v[o.n - 1];
    assert_int_equal(last->kind, SEQ_OUT_CLOSE);
    struct base_rd r;
    struct zk_reply_header h = parse_reply(last, &r);
    assert_int_equal(h.xid, 20);
    assert_int_equal(h.err, ZK_OK);
    outs_free(&o);
    rcu_read_lock();
    assert_null(tree_session_find(f->t, id));
    rcu_read_unlock();
}

static void test_round_keeps_request_order(void **state)
{
    struct fx *f = *state;
    int64_t id = connect_session(f, 0, 7, 10000, NULL);
    struct seq_req *reqs[3];
    for (int i = 0; i < 3; i++) {
        struct zk_wbuf b;
        zk_wbuf_init(&b);
        char path[16];
        snprintf(path, sizeof(path), "/o%d", i);
        create_body(&b, i == 1 ? "/o0" : path, ZK_PERSISTENT); /* the second collides with the first */
        reqs[i] = write_req(0, 7, id, 100 + i, ZK_OP_CREATE, &b);
        zk_wbuf_free(&b);
    }
    rcu_read_lock();
    seq_run_round(f->s, reqs, 3, NOW, WALL);
    rcu_read_unlock();
    struct outs o = { 0 };
    drain(f, 0, &o);
    assert_int_equal(o.n, 4);
    assert_int_equal(o.v[0]->kind, SEQ_OUT_EVENTS);
    int32_t want[3] = { ZK_OK, ZK_ENODEEXISTS, ZK_OK };
    for (int i = 0; i < 3; i++) {
        struct base_rd r;
        struct zk_reply_header h = parse_reply(o.v[1 + i], &r);
        assert_int_equal(h.xid, 100 + i);
        assert_int_equal(h.err, want[i]);
    }
    outs_free(&o);
}

/* The round in steps: preparing hands out the txns to persist and changes
 * nothing a reader or a client sees; finishing applies and answers, in
 * request order. A failed create has no txn and consumes no zxid. */
static void test_round_in_steps(void **state)
{
    struct fx *f = *state;
    int64_t id = connect_session(f, 0, 7, 10000, NULL);
    struct seq_req *reqs[3];
    for (int i = 0; i < 3; i++) {
        struct zk_wbuf b;
        zk_wbuf_init(&b);
        char path[16];
        snprintf(path, sizeof(path), "/s%d", i);
        create_body(&b, i == 1 ? "/s0" : path, ZK_PERSISTENT);
        reqs[i] = write_req(0, 7, id, 200 + i, ZK_OP_CREATE, &b);
        zk_wbuf_free(&b);
    }
    rcu_read_lock();
    int64_t before = tree_last_zxid(f->t);
    struct seq_round *r = seq_round_prepare(f->s, reqs, 3, NOW, WALL);
    assert_non_null(r);
    assert_int_equal(seq_round_len(r), 3);
    const struct txn *t0 = seq_round_txn(r, 0), *t1 = seq_round_txn(r, 1), *t2 = seq_round_txn(r, 2);
    assert_non_null(t0);
    assert_null(t1); /* NODEEXISTS against the round's own first create */
    assert_non_null(t2);
    assert_int_equal(t0->zxid, before + 1);
    assert_int_equal(t2->zxid, before + 2);
    assert_string_equal(t2->ops[0].path, "/s2");
    struct tree_view v;
    assert_int_equal(tree_get(f->t, "/s0", 3, &v), ZK_ENONODE);
    assert_int_equal(tree_last_zxid(f->t), before);
    struct outs o = { 0 };
    drain(f, 0, &o);
    assert_int_equal(o.n, 0);
    seq_round_finish(f->s, r);
    assert_int_equal(tree_get(f->t, "/s2", 3, &v), ZK_OK);
    assert_int_equal(tree_last_zxid(f->t), before + 2);
    rcu_read_unlock();
    drain(f, 0, &o);
    assert_int_equal(o.n, 4);
    int32_t want[3] = { ZK_OK, ZK_ENODEEXISTS, ZK_OK };
    for (int i = 0; i < 3; i++) {
        struct base_rd rb;
        struct zk_reply_header h = parse_reply(o.v[1 + i], &rb);
        assert_int_equal(h.xid, 200 + i);
        assert_int_equal(h.err, want[i]);
    }
    outs_free(&o);
}

/* A round dropped unanswered (shutdown) releases what it held. */
static void test_round_dropped(void **state)
{
    struct fx *f = *state;
    int64_t id = connect_session(f, 0, 7, 10000, NULL);
    struct zk_wbuf b;
    zk_wbuf_init(&b);
    create_body(&b, "/dropped", ZK_PERSISTENT);
    struct seq_req *reqs[1] = { write_req(0, 7, id, 9, ZK_OP_CREATE, &b) };
    zk_wbuf_free(&b);
    rcu_read_lock();
    struct seq_round *r = seq_round_prepare(f->s, reqs, 1, NOW, WALL);
    assert_non_null(seq_round_txn(r, 0));
    seq_round_free(f->s, r);
    tree_prep_reset(f->t);
    struct tree_view v;
    assert_int_equal(tree_get(f->t, "/dropped", 8, &v), ZK_ENONODE);
    rcu_read_unlock();
    struct outs o = { 0 };
    drain(f, 0, &o);
    assert_int_equal(o.n, 0);
}

/* Invariant 4 at the sequencer: with a log, a round whose sync fails is
 * held (nothing applied, nothing answered, no new round) and finishes once
 * the disk has room again. The in-memory storage gives ENOSPC on demand. */
static void test_full_disk_holds_round_until_space_returns(void **state)
{
    struct fx *f = *state;
    struct storage *st = storage_mem_new();
    assert_non_null(st);
    struct txnlog_opts opts = { .prealloc_bytes = 4096, .segment_bytes_max = 1 << 20 };
    struct txnlog *log = NULL;
    assert_int_equal(txnlog_open(st, "/log", &opts, &log), 0);
    struct seq_cfg cfg = { .min_session_timeout_ms = 4000, .max_session_timeout_ms = 40000,
                           .container_check_ms = 60000, .tick_ms = 1000, .log = log };
    struct seq *s = seq_new(f->t, &cfg, 2);
    assert_non_null(s);
    struct fx g = { .t = f->t, .s = s };
    int64_t id = connect_session(&g, 0, 7, 10000, NULL);
    storage_mem_set_space(st, storage_mem_used(st)); /* the disk is now full */
    /* 8 KiB of data: the record outgrows the 4 KiB preallocated chunk, so the
     * log must allocate, and cannot. */
    static char big[8192];
    memset(big, 'x', sizeof(big));
    struct zk_acl open_acl = { .perms = ZK_PERM_ALL, .id = { zk_str_c("world"), zk_str_c("anyone") } };
    struct zk_create_req q = { .path = zk_str_c("/held"), .data = { big, (int32_t)sizeof(big) },
                               .acl = { .count = 1, .items = &open_acl }, .flags = ZK_PERSISTENT };
    struct zk_wbuf b;
    zk_wbuf_init(&b);
    zk_put_create_req(&b, &q, false);
    run(&g, write_req(0, 7, id, 31, ZK_OP_CREATE, &b), NOW);
    zk_wbuf_free(&b);
    struct outs o = { 0 };
    drain(&g, 0, &o);
    assert_int_equal(o.n, 0); /* not durable: no reply, no event */
    struct seq_stats stats;
    seq_get_stats(s, &stats);
    assert_int_equal(stats.log_error, -ENOSPC);
    rcu_read_lock();
    struct tree_view v;
    assert_int_equal(tree_get(f->t, "/held", 5, &v), ZK_ENONODE); /* not applied either */
    assert_false(seq_retry_held(s));
    rcu_read_unlock();
    storage_mem_set_space(st, UINT64_MAX);
    rcu_read_lock();
    assert_true(seq_retry_held(s));
    assert_int_equal(tree_get(f->t, "/held", 5, &v), ZK_OK);
    rcu_read_unlock();
    drain(&g, 0, &o);
    assert_int_equal(o.n, 2);
    struct base_rd r;
    struct zk_reply_header h = parse_reply(o.v[1], &r);
    assert_int_equal(h.xid, 31);
    assert_int_equal(h.err, ZK_OK);
    outs_free(&o);
    seq_get_stats(s, &stats);
    assert_int_equal(stats.log_error, 0);
    assert_int_equal(txnlog_durable_zxid(log), h.zxid);
    seq_free(s);
    txnlog_close(log);
    storage_destroy(st);
}

/* ---- a txn that would not fit a log record --------------------------------- */

#define BIG_IDS 8
#define BIG_ID_BYTES 150000
#define BIG_PERMS 31

/* A create of path whose ACL is BIG_PERMS "auth" entries (distinct perms,
 * so none is a duplicate), from a caller with BIG_IDS digest identities of
 * BIG_ID_BYTES: each entry becomes one digest entry per identity, so a
 * request of a few hundred bytes expands into 248 x 150 KB = 37 MB of ACL,
 * past TXNLOG_RECORD_BYTES_MAX. */
static struct seq_req *oversized_create(int64_t session, int32_t xid, const char *path)
{
    static char id_bytes[BIG_IDS][BIG_ID_BYTES + 1];
    struct tree_authid ids[BIG_IDS];
    for (int i = 0; i < BIG_IDS; i++) {
        memset(id_bytes[i], 'h', BIG_ID_BYTES);
        id_bytes[i][0] = (char)('a' + i);
        id_bytes[i][1] = ':';
        ids[i] = (struct tree_authid){ "digest", id_bytes[i] };
    }
    struct zk_acl acl[BIG_PERMS];
    for (int i = 0; i < BIG_PERMS; i++)
        acl[i] = (struct zk_acl){ i + 1, { zk_str_c("auth"), zk_str_c("") } };
    struct zk_create_req q = { .path = zk_str_c(path), .data = zk_str_c("v"),
                               .acl = { .count = BIG_PERMS, .items = acl },
                               .flags = ZK_PERSISTENT };
    struct zk_wbuf b;
    zk_wbuf_init(&b);
    zk_put_create_req(&b, &q, false);
    struct seq_req *r = seq_req_new(SEQ_REQ_WRITE, b.p, b.len, ids, BIG_IDS);
    zk_wbuf_free(&b);
    assert_non_null(r);
    r->worker = 0;
    r->conn = 7;
    r->session_id = session;
    r->xid = xid;
    r->op = ZK_OP_CREATE;
    return r;
}

/* Answers of worker 0 after one round of reqs: the reply errors by xid
 * order, and nothing else but event batches. */
static size_t round_replies(struct fx *g, struct seq_req **reqs, size_t n, int32_t *errs)
{
    rcu_read_lock();
    seq_run_round(g->s, reqs, n, NOW, WALL + NOW);
    rcu_read_unlock();
    struct outs o = { 0 }, other = { 0 };
    drain(g, 0, &o);
    drain(g, 1, &other);
    size_t k = 0;
    for (size_t i = 0; i < o.n; i++) {
        if (o.v[i]->kind == SEQ_OUT_EVENTS)
            continue;
        assert_int_equal(o.v[i]->kind, SEQ_OUT_REPLY);
        struct base_rd r;
        struct zk_reply_header h = parse_reply(o.v[i], &r);
        assert_int_equal(h.xid, 50 + (int32_t)k);
        errs[k++] = h.err;
    }
    outs_free(&o);
    outs_free(&other);
    return k;
}

/* A durable sequencer answers a request whose txn would not fit a log
 * record with BADARGUMENTS (prep refuses it) and keeps answering: the round
 * is not held, log_error stays 0, later writes of the same and the next
 * round are logged and applied. It used to hold the round forever with
 * log_error -EINVAL. */
static void test_oversized_txn_is_refused_not_held(void **state)
{
    struct fx *f = *state;
    struct storage *st = storage_mem_new();
    assert_non_null(st);
    struct txnlog_opts opts = { .prealloc_bytes = 4096, .segment_bytes_max = 1 << 20 };
    struct txnlog *log = NULL;
    assert_int_equal(txnlog_open(st, "/log", &opts, &log), 0);
    struct seq_cfg cfg = { .min_session_timeout_ms = 4000, .max_session_timeout_ms = 40000,
                           .container_check_ms = 60000, .tick_ms = 1000, .log = log };
    struct seq *s = seq_new(f->t, &cfg, 2);
    assert_non_null(s);
    struct fx g = { .t = f->t, .s = s };
    int64_t id = connect_session(&g, 0, 7, 10000, NULL);
    struct zk_wbuf b;
    zk_wbuf_init(&b);
    create_body(&b, "/after", ZK_PERSISTENT);
    struct seq_req *reqs[2] = { oversized_create(id, 50, "/big"),
                                write_req(0, 7, id, 51, ZK_OP_CREATE, &b) };
    int32_t errs[2] = { 0 };
    assert_int_equal(round_replies(&g, reqs, 2, errs), 2);
    assert_int_equal(errs[0], ZK_EBADARGUMENTS);
    assert_int_equal(errs[1], ZK_OK);
    struct seq_stats stats;
    seq_get_stats(s, &stats);
    assert_int_equal(stats.log_error, 0);
    assert_true(seq_retry_held(s)); /* nothing held */
    zk_wbuf_free(&b);
    zk_wbuf_init(&b);
    create_body(&b, "/next", ZK_PERSISTENT);
    reqs[0] = write_req(0, 7, id, 50, ZK_OP_CREATE, &b);
    zk_wbuf_free(&b);
    assert_int_equal(round_replies(&g, reqs, 1, errs), 1);
    assert_int_equal(errs[0], ZK_OK);
    rcu_read_lock();
    struct tree_view v;
    assert_int_equal(tree_get(f->t, "/big", 4, &v), ZK_ENONODE);
    assert_int_equal(tree_get(f->t, "/after", 6, &v), ZK_OK);
    assert_int_equal(tree_get(f->t, "/next", 5, &v), ZK_OK);
    assert_int_equal(txnlog_durable_zxid(log), v.stat.mzxid);
    rcu_read_unlock();
    seq_free(s);
    txnlog_close(log);
    storage_destroy(st);
}

/* ---- session passwords ---------------------------------------------------- */

static struct seq_req *reattach_req(int w, uint64_t conn, int64_t id, const uint8_t *pw,
                                    int32_t pw_len)
{
    struct seq_req *r = seq_req_new(SEQ_REQ_CONNECT, NULL, 0, NULL, 0);
    r->worker = w;
    r->conn = conn;
    r->session_id = id;
    r->timeout_ms = 10000;
    memcpy(r->passwd, pw, pw_len < 16 ? (size_t)pw_len : 16);
    r->passwd_len = pw_len;
    return r;
}

static struct seq_cfg keyed_cfg(uint8_t first_key_byte)
{
    struct seq_cfg cfg = { .min_session_timeout_ms = 4000, .max_session_timeout_ms = 40000,
                           .container_check_ms = 60000, .tick_ms = 1000,
                           .passwd_key_set = true };
    for (int i = 0; i < 32; i++)
        cfg.passwd_key[i] = (uint8_t)(first_key_byte + i);
    return cfg;
}

/* A reattach through g to session id with pw: the CONNECT worker 1 gets
 * (the caller frees o). Drains worker 0 too, into owner. */
static void reattach_outs(struct fx *g, int64_t id, const uint8_t *pw, struct outs *o,
                          struct outs *owner)
{
    run(g, reattach_req(1, 9, id, pw, 16), NOW + 5);
    drain(g, 1, o);
    assert_int_equal(o->n, 1);
    assert_int_equal(o->v[0]->kind, SEQ_OUT_CONNECT);
    drain(g, 0, owner);
}

/* A new session's password is HMAC-SHA-256(key, id as 8 big-endian bytes),
 * first 16 bytes (without the key it cannot be derived from the id), and
 * the createSession txn records it in the session. */
static void test_password_is_hmac_of_session_id(void **state)
{
    struct fx *f = *state;
    struct seq_cfg cfg = keyed_cfg(0xA0);
    struct seq *s = seq_new(f->t, &cfg, 2);
    assert_non_null(s);
    struct fx g = { .t = f->t, .s = s };
    uint8_t pw[16];
    int64_t id = connect_session(&g, 0, 7, 10000, pw);
    uint8_t msg[8], mac[32];
    base_put_be64(msg, (uint64_t)id);
    unsigned int mac_len = 0;
    assert_non_null(HMAC(EVP_sha256(), cfg.passwd_key, 32, msg, 8, mac, &mac_len));
    assert_int_equal(mac_len, 32);
    assert_memory_equal(pw, mac, 16);
    uint8_t derived[16];
    assert_true(seq_passwd_derive(cfg.passwd_key, id, derived));
    assert_memory_equal(derived, mac, 16);
    rcu_read_lock();
    struct tree_session *ts = tree_session_find(f->t, id);
    assert_non_null(ts);
    assert_true(ts->passwd_known);
    assert_memory_equal(ts->passwd, pw, 16);
    rcu_read_unlock();
    seq_free(s);
}

/* The ensemble case: a session created through a server with key K2 and
 * reattached through one with key K1 (here, a second sequencer over the
 * same tree, as a follower has applied the same createSession). K1's server
 * checks the password the txn recorded: the client's (K2-derived) password
 * is accepted and handed back, the one K1 would derive is refused, and the
 * refusal changes nothing for the owner. */
static void test_password_recorded_not_rederived(void **state)
{
    struct fx *f = *state;
    struct seq_cfg k2 = keyed_cfg(0x20), k1 = keyed_cfg(0x10);
    struct seq *a = seq_new(f->t, &k2, 2);
    assert_non_null(a);
    struct fx ga = { .t = f->t, .s = a };
    uint8_t pw[16];
    int64_t id = connect_session(&ga, 0, 7, 10000, pw);
    seq_free(a);

    struct seq *b = seq_new(f->t, &k1, 2);
    assert_non_null(b);
    struct fx gb = { .t = f->t, .s = b };
    uint8_t k1_pw[16];
    assert_true(seq_passwd_derive(k1.passwd_key, id, k1_pw));
    assert_memory_not_equal(k1_pw, pw, 16);
    struct outs o = { 0 }, owner = { 0 };
    reattach_outs(&gb, id, k1_pw, &o, &owner);
    assert_int_equal(o.v[0]->timeout_ms, 0);
    assert_int_equal(o.v[0]->session_id, 0);
    assert_int_equal(owner.n, 0); /* no CLOSE for the owner */
    outs_free(&o);
    rcu_read_lock();
    struct tree_session *ts = tree_session_find(f->t, id);
    assert_non_null(ts);
    assert_int_equal(atomic_load(&ts->owner_conn), 7);
    rcu_read_unlock();

    reattach_outs(&gb, id, pw, &o, &owner);
    assert_int_equal(o.v[0]->timeout_ms, 10000);
    assert_int_equal(o.v[0]->session_id, id);
    assert_memory_equal(o.v[0]->passwd, pw, 16);
    assert_int_equal(owner.n, 1); /* the old connection is told to close */
    assert_int_equal(owner.v[0]->kind, SEQ_OUT_CLOSE);
    outs_free(&o);
    outs_free(&owner);
    seq_free(b);
}

/* Every byte of the password counts: a password off in any one bit of any
 * one of its 16 bytes is refused. (That the compare takes the same time
 * wherever the difference is comes from CRYPTO_memcmp, which no test here
 * can time reliably.) */
static void test_password_compare_covers_every_byte(void **state)
{
    struct fx *f = *state;
    uint8_t pw[16];
    int64_t id = connect_session(f, 0, 7, 10000, pw);
    struct outs o = { 0 }, owner = { 0 };
    for (int i = 0; i < 16; i++) {
        for (int bit = 0; bit < 8; bit += 7) {
            uint8_t wrong[16];
            memcpy(wrong, pw, 16);
            wrong[i] ^= (uint8_t)(1u << bit);
            reattach_outs(f, id, wrong, &o, &owner);
            assert_int_equal(o.v[0]->timeout_ms, 0);
            assert_int_equal(owner.n, 0);
            outs_free(&o);
        }
    }
    reattach_outs(f, id, pw, &o, &owner);
    assert_int_equal(o.v[0]->timeout_ms, 10000);
    outs_free(&o);
    outs_free(&owner);
}

/* A session whose password is not known (created by a format-1 record and
 * not filled in by recovery) can be reattached with nothing: not zeros,
 * not the password this server's key derives. */
static void test_unknown_password_opens_nothing(void **state)
{
    struct fx *f = *state;
    const int64_t id = 0x77;
    struct txn_op op = { .type = TXN_CREATE_SESSION, .client_type = ZK_OP_CREATESESSION,
                         .data_len = -1, .timeout_ms = 10000 };
    struct txn x = { .zxid = tree_last_zxid(f->t) + 1, .session_id = id,
                     .type = TXN_CREATE_SESSION, .nops = 1, .ops = &op };
    assert_int_equal(tree_apply(f->t, &x, NULL, NULL, NULL), ZK_OK);
    struct seq_cfg cfg = keyed_cfg(0x30);
    struct seq *s = seq_new(f->t, &cfg, 2);
    assert_non_null(s);
    struct fx g = { .t = f->t, .s = s };
    uint8_t zeros[16] = { 0 }, derived[16];
    assert_true(seq_passwd_derive(cfg.passwd_key, id, derived));
    const uint8_t *tries[] = { zeros, derived };
    for (size_t i = 0; i < 2; i++) {
        struct outs o = { 0 }, owner = { 0 };
        reattach_outs(&g, id, tries[i], &o, &owner);
        assert_int_equal(o.v[0]->timeout_ms, 0);
        outs_free(&o);
        outs_free(&owner);
    }
    seq_free(s);
}

/* A reattach with a wrong password (wrong bytes, or any length but 16,
 * even with the right 16 bytes first) gets timeout 0 and changes nothing
 * for the owner: it keeps its connection, session and ephemerals. */
static void test_wrong_password_reattach_is_harmless(void **state)
{
    struct fx *f = *state;
    uint8_t pw[16];
    int64_t id = connect_session(f, 0, 7, 10000, pw);
    struct zk_wbuf b;
    zk_wbuf_init(&b);
    create_body(&b, "/owned", ZK_EPHEMERAL);
    run(f, write_req(0, 7, id, 1, ZK_OP_CREATE, &b), NOW);
    zk_wbuf_free(&b);
    struct outs o = { 0 };
    drain(f, 0, &o);
    outs_free(&o);
    drain(f, 1, &o);
    outs_free(&o);

    uint8_t wrong[17];
    memcpy(wrong, pw, 16);
    wrong[16] = 0;
    const int32_t lens[] = { 0, 15, 17, 16 };
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        if (lens[i] == 16)
            wrong[15] ^= 0x80;
        run(f, reattach_req(1, 50 + i, id, wrong, lens[i]), NOW + 10);
        drain(f, 1, &o);
        assert_int_equal(o.n, 1);
        assert_int_equal(o.v[0]->kind, SEQ_OUT_CONNECT);
        assert_int_equal(o.v[0]->timeout_ms, 0);
        assert_int_equal(o.v[0]->session_id, 0);
        outs_free(&o);
        drain(f, 0, &o);
        assert_int_equal(o.n, 0); /* no CLOSE for the owner */
    }
    rcu_read_lock();
    struct tree_session *ts = tree_session_find(f->t, id);
    assert_non_null(ts);
    assert_false(ts->closing);
    assert_int_equal(atomic_load(&ts->owner_worker), 0);
    assert_int_equal(atomic_load(&ts->owner_conn), 7);
    struct tree_view v;
    assert_int_equal(tree_get(f->t, "/owned", 6, &v), ZK_OK);
    assert_int_equal(v.stat.ephemeral_owner, id);
    rcu_read_unlock();
    /* the owner's own password still works */
    run(f, reattach_req(0, 7, id, pw, 16), NOW + 20);
    drain(f, 0, &o);
    assert_int_equal(o.n, 1);
    assert_int_equal(o.v[0]->timeout_ms, 10000);
    outs_free(&o);
}

/* ---- watch events carry the ACL READ is checked against ------------------ */

static void create_body_acl(struct zk_wbuf *b, const char *path, struct zk_acl *acl)
{
    struct zk_create_req q = { .path = zk_str_c(path), .data = zk_str_c("v"),
                               .acl = { .count = 1, .items = acl }, .flags = ZK_PERSISTENT };
    zk_put_create_req(b, &q, false);
}

/* Each event of a batch holds one reference to its ACL, so the ACL of a
 * node deleted (and freed by the tree after a grace period) stays readable
 * until the last worker frees the batch, which drops it (ASan: no leak, no
 * use after free). */
static void test_event_batch_holds_acl_references(void **state)
{
    struct fx *f = *state;
    int64_t id = connect_session(f, 0, 7, 10000, NULL);
    struct zk_acl secret = { ZK_PERM_ALL, { zk_str_c("digest"), zk_str_c("u:h") } };
    struct zk_wbuf b;
    zk_wbuf_init(&b);
    create_body_acl(&b, "/s", &secret);
    run(f, write_req(0, 7, id, 1, ZK_OP_CREATE, &b), NOW);
    zk_wbuf_free(&b);
    struct outs o0 = { 0 }, o1 = { 0 };
    drain(f, 0, &o0);
    drain(f, 1, &o1);
    const struct seq_events *ev = o0.v[0]->events;
    assert_int_equal(ev->count, 2);
    assert_int_equal(ev->items[0].type, ZK_EVENT_CREATED);
    assert_string_equal(ev->items[0].acl->items[0].id, "u:h");
    assert_ptr_equal(ev->items[1].acl, tree_acl_open()); /* "/": the parent's */
    outs_free(&o0);
    outs_free(&o1);

    zk_wbuf_init(&b);
    struct zk_path_version_req d = { .path = zk_str_c("/s"), .version = -1 };
    zk_put_path_version_req(&b, &d);
    run(f, write_req(0, 7, id, 2, ZK_OP_DELETE, &b), NOW);
    zk_wbuf_free(&b);
    drain(f, 0, &o0);
    drain(f, 1, &o1);
    rcu_barrier(); /* the tree's version of /s, and its reference, are gone */
    ev = o1.v[0]->events;
    assert_int_equal(ev->items[0].type, ZK_EVENT_DELETED);
    struct tree_acl *acl = ev->items[0].acl;
    assert_int_equal(acl->refs_, 1); /* the batch's, shared by both workers */
    assert_false(tree_acl_permits(acl, ZK_PERM_READ, NULL));
    outs_free(&o0);
    assert_string_equal(acl->items[0].scheme, "digest"); /* still held */
    outs_free(&o1); /* the last drain frees the batch and drops the reference */
}

/* ---- error txns: every answered write is a txn a follower can answer from -- */

/* A follower that holds only the log must answer its own clients exactly
 * as the server that prepped the writes did. With cfg.error_txns every
 * write but sync gets a txn (failures as ErrorTxn), and the reply rebuilt
 * from the txn (after a trip through the log's encoding) and a replica's
 * apply results must be the sequencer's reply, byte for byte. */
struct replica {
    struct tree *t;
    struct base_buf enc;
};

/* Sends txn x through txn_encode/txn_decode, applies it on the replica and
 * returns the reply a follower would build for (op, xid), framed. */
static void replica_apply(struct replica *rp, const struct txn *x, int32_t op, int32_t xid,
                          struct zk_wbuf *reply)
{
    rp->enc.len = 0;
    assert_int_equal(txn_encode(&rp->enc, x), 0);
    struct txn y;
    assert_int_equal(txn_decode(rp->enc.data, rp->enc.len, &y), 0);
    assert_true(y.zxid == x->zxid);
    struct tree_op_result *res = calloc(y.nops ? y.nops : 1, sizeof *res);
    assert_non_null(res);
    assert_int_equal(tree_apply(rp->t, &y, NULL, NULL, res), ZK_OK);
    zk_wbuf_init(reply);
    size_t mark = zk_frame_begin(reply);
    seq_put_txn_reply(reply, op, xid, y.zxid, &y, res);
    zk_frame_end(reply, mark);
    assert_false(reply->err);
    tree_results_free(res, y.nops);
    free(res);
    txn_free(&y);
}

/* Runs reqs as one round, replays each txn on the replica and checks that
 * every reply the worker got equals the replica's. Returns the replies'
 * errors in request order through errs. */
static void round_matches_replica(struct fx *f, struct replica *rp, struct seq_req **reqs, size_t n,
                                  int32_t *errs)
{
    int32_t ops[16], xids[16];
    struct zk_wbuf rebuilt[16];
    bool has[16] = { false };
    assert_true(n <= 16);
    for (size_t i = 0; i < n; i++) {
        ops[i] = reqs[i]->op;
        xids[i] = reqs[i]->xid;
    }
    rcu_read_lock();
    int64_t last = tree_last_zxid(f->t);
    struct seq_round *r = seq_round_prepare(f->s, reqs, n, NOW, WALL);
    assert_non_null(r);
    for (size_t i = 0; i < n; i++) {
        const struct txn *x = seq_round_txn(r, i);
        if (ops[i] == ZK_OP_SYNC) {
            assert_null(x); /* answered locally, never replicated */
            continue;
        }
        assert_non_null(x);
        assert_true(x->zxid == last + 1); /* failures take zxids too */
        last = x->zxid;
        replica_apply(rp, x, ops[i], xids[i], &rebuilt[i]);
        has[i] = true;
    }
    seq_round_finish(f->s, r);
    rcu_read_unlock();
    struct outs o = { 0 };
    drain(f, 0, &o);
    size_t k = 0;
    for (size_t j = 0; j < o.n; j++) {
        if (o.v[j]->kind != SEQ_OUT_REPLY && o.v[j]->kind != SEQ_OUT_CLOSE)
            continue;
        assert_true(k < n);
        struct base_rd rb;
        struct zk_reply_header h = parse_reply(o.v[j], &rb);
        assert_int_equal(h.xid, xids[k]);
        errs[k] = h.err;
        if (has[k]) {
            assert_int_equal(o.v[j]->frame_len, rebuilt[k].len);
            assert_memory_equal(o.v[j]->frame, rebuilt[k].p, rebuilt[k].len);
            zk_wbuf_free(&rebuilt[k]);
        }
        k++;
    }
    assert_int_equal(k, n);
    outs_free(&o);
}

static void put_multi_op(struct zk_wbuf *b, int32_t type)
{
    struct zk_multi_header h = { .type = type, .done = false, .err = -1 };
    zk_put_multi_header(b, &h);
}

static struct seq_req *body_req(int64_t session, int32_t xid, int32_t op, struct zk_wbuf *b)
{
    struct seq_req *r = write_req(0, 7, session, xid, op, b);
    zk_wbuf_free(b);
    zk_wbuf_init(b);
    return r;
}

static void test_error_txns_let_a_replica_answer_every_write(void **state)
{
    (void)state;
    struct tree *t = tree_new();
    struct seq_cfg cfg = { .min_session_timeout_ms = 4000, .max_session_timeout_ms = 40000,
                           .container_check_ms = 60000, .ttl_enabled = true, .tick_ms = 1000,
                           .error_txns = true };
    struct fx f = { .t = t, .s = seq_new(t, &cfg, 1) };
    assert_non_null(f.s);
    struct replica rp = { .t = tree_new() };
    assert_non_null(rp.t);

    /* the session: its createSession txn goes to the replica too */
    struct seq_req *c = seq_req_new(SEQ_REQ_CONNECT, NULL, 0, NULL, 0);
    c->worker = 0;
    c->conn = 7;
    c->timeout_ms = 10000;
    rcu_read_lock();
    struct seq_round *r = seq_round_prepare(f.s, &c, 1, NOW, WALL);
    const struct txn *cx = seq_round_txn(r, 0);
    assert_non_null(cx);
    int64_t id = cx->session_id;
    rp.enc.len = 0;
    assert_int_equal(txn_encode(&rp.enc, cx), 0);
    struct txn y;
    assert_int_equal(txn_decode(rp.enc.data, rp.enc.len, &y), 0);
    assert_int_equal(tree_apply(rp.t, &y, NULL, NULL, NULL), ZK_OK);
    txn_free(&y);
    seq_round_finish(f.s, r);
    rcu_read_unlock();
    struct outs o = { 0 };
    drain(&f, 0, &o);
    outs_free(&o);

    struct zk_wbuf b;
    zk_wbuf_init(&b);
    struct seq_req *reqs[16];
    size_t n = 0;
    create_body(&b, "/a", ZK_PERSISTENT);
    reqs[n++] = body_req(id, 1, ZK_OP_CREATE, &b);              /* ok */
    create_body(&b, "/a", ZK_PERSISTENT);
    reqs[n++] = body_req(id, 2, ZK_OP_CREATE, &b);              /* NODEEXISTS */
    create_body(&b, "/seq-", ZK_PERSISTENT_SEQUENTIAL);
    reqs[n++] = body_req(id, 3, ZK_OP_CREATE2, &b);             /* ok, with a stat */
    struct zk_setdata_req sd = { .path = zk_str_c("/a"), .data = zk_str_c("x"), .version = 0 };
    zk_put_setdata_req(&b, &sd);
    reqs[n++] = body_req(id, 4, ZK_OP_SETDATA, &b);             /* ok */
    zk_put_setdata_req(&b, &sd);
    reqs[n++] = body_req(id, 5, ZK_OP_SETDATA, &b);             /* BADVERSION */
    struct zk_path_version_req del = { .path = zk_str_c("/none"), .version = -1 };
    zk_put_path_version_req(&b, &del);
    reqs[n++] = body_req(id, 6, ZK_OP_DELETE, &b);              /* NONODE */
    put_multi_op(&b, ZK_OP_CREATE);
    create_body(&b, "/m", ZK_PERSISTENT);
    put_multi_op(&b, ZK_OP_SETDATA);
    struct zk_setdata_req msd = { .path = zk_str_c("/m"), .data = zk_str_c("y"), .version = -1 };
    zk_put_setdata_req(&b, &msd);
    zk_put_multi_end(&b);
    reqs[n++] = body_req(id, 7, ZK_OP_MULTI, &b);               /* ok multi */
    put_multi_op(&b, ZK_OP_CREATE);
    create_body(&b, "/m2", ZK_PERSISTENT);
    put_multi_op(&b, ZK_OP_DELETE);
    zk_put_path_version_req(&b, &del);
    zk_put_multi_end(&b);
    reqs[n++] = body_req(id, 8, ZK_OP_MULTI, &b);               /* failed multi */
    zk_put_multi_end(&b);
    reqs[n++] = body_req(id, 9, ZK_OP_MULTI, &b);               /* empty multi */
    zk_put_i32(&b, 3);
    reqs[n++] = body_req(id, 10, ZK_OP_CREATE, &b);             /* MARSHALLINGERROR */
    put_multi_op(&b, ZK_OP_CREATE);
    reqs[n++] = body_req(id, 11, ZK_OP_MULTI, &b);              /* marshalling multi */
    reqs[n++] = body_req(id, 12, ZK_OP_RECONFIG, &b);           /* RECONFIGDISABLED */
    create_body(&b, "/gone", ZK_PERSISTENT);
    reqs[n++] = body_req(id + 1000, 13, ZK_OP_CREATE, &b);      /* SESSIONEXPIRED */
    struct zk_path_req sp = { .path = zk_str_c("/a") };
    zk_put_path_req(&b, &sp);
    reqs[n++] = body_req(id, 14, ZK_OP_SYNC, &b);               /* local */
    struct zk_path_version_req da = { .path = zk_str_c("/a"), .version = 1 };
    zk_put_path_version_req(&b, &da);
    reqs[n++] = body_req(id, 15, ZK_OP_DELETE, &b);             /* ok */
    int32_t errs[16];
    round_matches_replica(&f, &rp, reqs, n, errs);
    int32_t want[15] = { ZK_OK, ZK_ENODEEXISTS, ZK_OK, ZK_OK, ZK_EBADVERSION, ZK_ENONODE, ZK_OK,
                         ZK_OK /* per op */, ZK_OK, ZK_EMARSHALLINGERROR, ZK_EMARSHALLINGERROR,
                         ZK_ERECONFIGDISABLED, ZK_ESESSIONEXPIRED, ZK_OK, ZK_OK };
    assert_int_equal(n, 15);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(errs[i], want[i]);

    /* closeSession, last: the replica deletes the same session */
    n = 0;
    reqs[n++] = body_req(id, 16, ZK_OP_CLOSESESSION, &b);
    round_matches_replica(&f, &rp, reqs, n, errs);
    assert_int_equal(errs[0], ZK_OK);
    zk_wbuf_free(&b);

    rcu_read_lock();
    assert_true(tree_last_zxid(f.t) == tree_last_zxid(rp.t));
    assert_true(tree_digest(f.t) == tree_digest(rp.t));
    assert_null(tree_session_find(rp.t, id));
    rcu_read_unlock();
    base_buf_free(&rp.enc);
    seq_free(f.s);
    rcu_barrier();
    tree_free(rp.t);
    tree_free(t);
}

/* The ring on its own: only zxids that are multiples of the interval go
 * in, the newest SEQ_DIGEST_LOG_MAX stay, copies come oldest first (the
 * newest max of them when max is smaller), forget empties it. */
static void test_digest_log_ring(void **state)
{
    (void)state;
    static struct sq_digest_log l;
    static struct seq_digest got[SEQ_DIGEST_LOG_MAX + 1];
    assert_int_equal(sq_digest_log_init(&l), 0);
    assert_int_equal(sq_digest_log_copy(&l, got, SEQ_DIGEST_LOG_MAX), 0);
    const int64_t total = SEQ_DIGEST_LOG_MAX + 5; /* entries noted: the ring wraps */
    for (int64_t zxid = 1; zxid <= total * SEQ_DIGEST_LOG_INTERVAL; zxid++)
        sq_digest_log_note(&l, zxid, (uint64_t)zxid * 3);
    assert_int_equal(sq_digest_log_copy(&l, got, SEQ_DIGEST_LOG_MAX + 1), SEQ_DIGEST_LOG_MAX);
    for (size_t i = 0; i < SEQ_DIGEST_LOG_MAX; i++) {
        int64_t want = (total - SEQ_DIGEST_LOG_MAX + 1 + (int64_t)i) * SEQ_DIGEST_LOG_INTERVAL;
        assert_int_equal(got[i].zxid, want);
        assert_int_equal(got[i].digest, (uint64_t)want * 3);
    }
    assert_int_equal(sq_digest_log_copy(&l, got, 3), 3);
    assert_int_equal(got[0].zxid, (total - 2) * SEQ_DIGEST_LOG_INTERVAL);
    assert_int_equal(got[2].zxid, total * SEQ_DIGEST_LOG_INTERVAL);
    sq_digest_log_forget(&l);
    assert_int_equal(sq_digest_log_copy(&l, got, SEQ_DIGEST_LOG_MAX), 0);
    sq_digest_log_note(&l, 5 * SEQ_DIGEST_LOG_INTERVAL, 9); /* after a forget, any zxid */
    assert_int_equal(sq_digest_log_copy(&l, got, SEQ_DIGEST_LOG_MAX), 1);
    assert_int_equal(got[0].zxid, 5 * SEQ_DIGEST_LOG_INTERVAL);
    sq_digest_log_destroy(&l);
}

/* Through the sequencer: the txns applied in rounds are logged with the
 * tree's digest at their zxid (the walk, tree_digest, agrees), and only
 * those at multiples of the interval. */
static void test_rounds_log_the_digest_every_interval(void **state)
{
    struct fx *f = *state;
    int64_t id = connect_session(f, 0, 7, 10000, NULL); /* zxid 1 */
    struct seq_digest got[4];
    uint64_t want[3] = { 0 };
    for (int32_t xid = 1; tree_last_zxid(f->t) < 3 * SEQ_DIGEST_LOG_INTERVAL; xid++) {
        char path[32];
        snprintf(path, sizeof path, "/n%d", xid);
        create_from(f, id, xid, path);
        int64_t zxid = tree_last_zxid(f->t);
        assert_int_equal(zxid, xid + 1); /* one txn per create */
        if (zxid % SEQ_DIGEST_LOG_INTERVAL == 0)
            want[zxid / SEQ_DIGEST_LOG_INTERVAL - 1] = tree_digest(f->t);
        struct outs o = { 0 };
        drain(f, 0, &o);
        outs_free(&o);
        drain(f, 1, &o);
        outs_free(&o);
    }
    assert_int_equal(seq_digest_log(f->s, got, 4), 3);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(got[i].zxid, (i + 1) * SEQ_DIGEST_LOG_INTERVAL);
        assert_int_equal(got[i].digest, want[i]);
    }
    assert_int_not_equal(got[0].digest, got[1].digest);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_digest_log_ring),
        cmocka_unit_test_setup_teardown(test_rounds_log_the_digest_every_interval, setup, teardown),
        cmocka_unit_test_setup_teardown(test_connect_clamps_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_events_precede_reply_and_reach_all_workers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_idle_worker_woken_only_for_its_output_or_watches, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_error_reply_has_no_body_and_no_events, setup, teardown),
        cmocka_unit_test_setup_teardown(test_malformed_body_is_marshalling_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failed_multi_reports_each_op, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reattach_moves_session_and_closes_old_conn, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wrong_password_is_expired, setup, teardown),
        cmocka_unit_test_setup_teardown(test_password_is_hmac_of_session_id, setup, teardown),
        cmocka_unit_test_setup_teardown(test_password_recorded_not_rederived, setup, teardown),
        cmocka_unit_test_setup_teardown(test_password_compare_covers_every_byte, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unknown_password_opens_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wrong_password_reattach_is_harmless, setup, teardown),
        cmocka_unit_test_setup_teardown(test_event_batch_holds_acl_references, setup, teardown),
        cmocka_unit_test_setup_teardown(test_client_ahead_of_server_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_expiry_deletes_ephemerals_and_closes_owner, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_session_replies_then_closes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_round_keeps_request_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_round_in_steps, setup, teardown),
        cmocka_unit_test_setup_teardown(test_error_txns_let_a_replica_answer_every_write, setup, teardown),
        cmocka_unit_test_setup_teardown(test_round_dropped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_full_disk_holds_round_until_space_returns, setup, teardown),
        cmocka_unit_test_setup_teardown(test_oversized_txn_is_refused_not_held, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
