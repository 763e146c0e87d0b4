/*
 * test_client_udp — liblarch's UDP read transport (client/udp.c) against a
 * scripted fake server on loopback: each datagram the client sends is
 * recorded and answered (or dropped) as the script says, so loss, stale
 * and foreign replies, BEHIND, NOT_SERVING, TOO_BIG and every other status
 * are driven exactly. Session-signed reads are checked end to end by the
 * integration tests (tests/integration/test_udp.py).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "client/larch.h"

#define STEPS_MAX 16
#define DGRAM_MAX 65536
#define SERVER_WAIT_MS 5000 /* the fake server gives up on a silent client */
#define SERVER_SLICE_MS 10  /* how often it looks at its stop flag */

enum act {
    ACT_DROP,          /* take the datagram, answer nothing */
    ACT_REPLY,         /* status, err, zxid, detail; a GetDataResponse of value for OK */
    ACT_FOREIGN_FIRST, /* send a reply with another id and some garbage, then ACT_REPLY */
};
struct step {
    enum act act;
    uint32_t status;
    int32_t err;
    int64_t zxid;
    uint32_t detail;
};

struct fake {
    int fd;
    int port;
    struct step steps[STEPS_MAX];
    int nsteps;
    const char *value; /* what getData answers */
    pthread_t thread;
    atomic_bool stop;
    /* what it received, one entry per step */
    uint8_t *got[STEPS_MAX];
    size_t got_len[STEPS_MAX];
    int ngot;
};

static void put_stat(struct zk_wbuf *w, int32_t data_len)
{
    struct zk_stat st = { .czxid = 1, .mzxid = 2, .pzxid = 1, .version = 3,
                          .data_length = data_len };
    zk_put_stat(w, &st);
}

static void send_reply(struct fake *f, const struct sockaddr_in *to, uint64_t rid,
                       const struct step *s)
{
    struct zk_wbuf w;
    zk_wbuf_init(&w);
    struct zk_reply_header h = { .xid = 0, .zxid = s->zxid, .err = s->err };
    zk_put_udp_reply_header(&w, rid, ZK_UDP_FLAG_REPLY, s->status, s->detail, &h);
    if (s->status == ZK_UDP_OK && s->err == ZK_OK) {
        zk_put_bytes(&w, f->value, (int32_t)strlen(f->value));
        put_stat(&w, (int32_t)strlen(f->value));
    }
    assert_false(w.err);
    sendto(f->fd, w.p, w.len, 0, (const struct sockaddr *)to, sizeof *to);
    zk_wbuf_free(&w);
}

static void *fake_main(void *arg)
{
    struct fake *f = arg;
    uint8_t *buf = malloc(DGRAM_MAX);
    for (int i = 0; buf != NULL && i < f->nsteps; i++) {
        struct pollfd p = { .fd = f->fd, .events = POLLIN };
        int ready = 0;
        for (int waited = 0; ready == 0 && waited < SERVER_WAIT_MS && !atomic_load(&f->stop);
             waited += SERVER_SLICE_MS)
            ready = poll(&p, 1, SERVER_SLICE_MS);
        if (ready <= 0)
            break;
        struct sockaddr_in from;
        socklen_t fl = sizeof from;
        ssize_t n = recvfrom(f->fd, buf, DGRAM_MAX, 0, (struct sockaddr *)&from, &fl);
        if (n <= 0)
            break;
        f->got[f->ngot] = malloc((size_t)n);
        memcpy(f->got[f->ngot], buf, (size_t)n);
        f->got_len[f->ngot++] = (size_t)n;
        const struct step *s = &f->steps[i];
        uint64_t rid = base_get_be64(buf + 8);
        if (s->act == ACT_FOREIGN_FIRST) {
            send_reply(f, &from, rid + 1, s);
            static const char junk[] = "not a larch reply";
            sendto(f->fd, junk, sizeof junk, 0, (struct sockaddr *)&from, sizeof from);
        }
        if (s->act != ACT_DROP)
            send_reply(f, &from, rid, s);
    }
    free(buf);
    return NULL;
}

static void fake_start(struct fake *f, const struct step *steps, int n, const char *value)
{
    memset(f, 0, sizeof *f);
    f->fd = socket(AF_INET, SOCK_DGRAM, 0);
    assert_true(f->fd >= 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    assert_int_equal(bind(f->fd, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t al = sizeof a;
    assert_int_equal(getsockname(f->fd, (struct sockaddr *)&a, &al), 0);
    f->port = ntohs(a.sin_port);
    memcpy(f->steps, steps, (size_t)n * sizeof *steps);
    f->nsteps = n;
    f->value = value;
    assert_int_equal(pthread_create(&f->thread, NULL, fake_main, f), 0);
}

static void fake_stop(struct fake *f)
{
    atomic_store(&f->stop, true); /* the client is done: the rest of the script is not needed */
    pthread_join(f->thread, NULL);
    close(f->fd);
}

static void fake_free(struct fake *f)
{
    for (int i = 0; i < f->ngot; i++)
        free(f->got[i]);
    f->ngot = 0;
}

static struct larch_udp *open_to(const struct fake *f, const char *chroot, int32_t timeout_ms)
{
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d%s", f->port, chroot ? chroot : "");
    struct larch_udp_options opt = { .timeout_ms = timeout_ms, .retry_ms = 20 };
    struct larch_udp *u = NULL;
    assert_int_equal(larch_udp_open(&u, addr, NULL, &opt), ZK_OK);
    return u;
}

static struct zk_udp_request_header header_of(const struct fake *f, int i)
{
    assert_true(i < f->ngot);
    assert_true(f->got_len[i] >= ZK_UDP_REQUEST_HEADER_BYTES);
    return zk_get_udp_request_header(f->got[i]);
}

/* The path in a received getData request. */
static void assert_request_path(const struct fake *f, int i, const char *path)
{
    struct base_rd r;
    base_rd_init(&r, f->got[i] + ZK_UDP_REQUEST_HEADER_BYTES,
                 f->got_len[i] - ZK_UDP_REQUEST_HEADER_BYTES);
    struct zk_path_watch_req q;
    assert_true(zk_get_path_watch_req(&r, &q));
    assert_int_equal(q.path.len, (int32_t)strlen(path));
    assert_memory_equal(q.path.ptr, path, strlen(path));
    assert_false(q.watch);
}

/* ---- the tests ------------------------------------------------------------------------ */

static void test_lost_datagrams_are_sent_again_unchanged(void **state)
{
    (void)state;
    struct step steps[] = { { ACT_DROP }, { ACT_DROP },
                            { ACT_REPLY, ZK_UDP_OK, ZK_OK, 9, 0 } };
    struct fake f;
    fake_start(&f, steps, 3, "value");
    struct larch_udp *u = open_to(&f, NULL, 5000);
    char *data = NULL;
    int32_t len = 0;
    struct zk_stat st;
    assert_int_equal(larch_udp_get(u, "/a", &data, &len, &st), ZK_OK);
    assert_string_equal(data, "value");
    assert_int_equal(len, 5);
    assert_int_equal(st.version, 3);
    assert_true(larch_udp_last_zxid(u) == 9);
    free(data);
    larch_udp_close(u);
    fake_stop(&f);
    assert_int_equal(f.ngot, 3);
    for (int i = 1; i < 3; i++) { /* a re-send is the same datagram */
        assert_int_equal(f.got_len[i], f.got_len[0]);
        assert_memory_equal(f.got[i], f.got[0], f.got_len[0]);
    }
    struct zk_udp_request_header h = header_of(&f, 0);
    assert_int_equal(h.op, ZK_OP_GETDATA);
    assert_int_equal(h.flags, 0); /* anonymous: no session, no MAC */
    assert_true(h.session_id == 0 && h.mac == 0 && h.min_zxid == 0);
    assert_request_path(&f, 0, "/a");
    fake_free(&f);
}

static void test_foreign_and_stale_replies_are_not_the_answer(void **state)
{
    (void)state;
    struct step steps[] = { { ACT_FOREIGN_FIRST, ZK_UDP_OK, ZK_OK, 4, 0 } };
    struct fake f;
    fake_start(&f, steps, 1, "right");
    struct larch_udp *u = open_to(&f, NULL, 5000);
    char *data = NULL;
    assert_int_equal(larch_udp_get(u, "/a", &data, NULL, NULL), ZK_OK);
    assert_string_equal(data, "right");
    free(data);
    larch_udp_close(u);
    fake_stop(&f);
    fake_free(&f);
}

static void test_behind_is_retried_and_the_seen_zxid_is_the_next_minimum(void **state)
{
    (void)state;
    struct step steps[] = { { ACT_REPLY, ZK_UDP_BEHIND, ZK_OK, 3, 0 },
                            { ACT_REPLY, ZK_UDP_NOT_SERVING, ZK_OK, 3, 0 },
                            { ACT_REPLY, ZK_UDP_OK, ZK_OK, 40, 0 },
                            { ACT_REPLY, ZK_UDP_OK, ZK_ENONODE, 41, 0 } };
    struct fake f;
    fake_start(&f, steps, 4, "v");
    struct larch_udp *u = open_to(&f, "/app", 5000);
    char *data = NULL;
    assert_int_equal(larch_udp_get(u, "/a", &data, NULL, NULL), ZK_OK);
    free(data);
    assert_int_equal(larch_udp_exists(u, "/b", NULL), ZK_ENONODE);
    assert_true(larch_udp_last_zxid(u) == 41);
    larch_udp_close(u);
    fake_stop(&f);
    assert_int_equal(f.ngot, 4);
    assert_request_path(&f, 0, "/app/a"); /* the address's chroot */
    assert_true(header_of(&f, 2).min_zxid == 0);
    assert_true(header_of(&f, 3).min_zxid == 40); /* what the last reply carried */
    assert_int_equal(header_of(&f, 3).op, ZK_OP_EXISTS);
    assert_true(header_of(&f, 0).request_id != header_of(&f, 1).request_id);
    fake_free(&f);
}

static void test_too_big_pads_once_then_gives_up(void **state)
{
    (void)state;
    struct step steps[] = { { ACT_REPLY, ZK_UDP_TOO_BIG, ZK_OK, 1, 3000 },
                            { ACT_REPLY, ZK_UDP_OK, ZK_OK, 1, 0 },
                            { ACT_REPLY, ZK_UDP_TOO_BIG, ZK_OK, 1, 3000 },
                            { ACT_REPLY, ZK_UDP_TOO_BIG, ZK_OK, 1, 3000 } };
    struct fake f;
    fake_start(&f, steps, 4, "big");
    struct larch_udp *u = open_to(&f, NULL, 5000);
    char *data = NULL;
    assert_int_equal(larch_udp_get(u, "/a", &data, NULL, NULL), ZK_OK);
    free(data);
    /* padded enough and still too big: the server's datagram limit (a
     * need that grew past the padding would be padded for again) */
    assert_int_equal(larch_udp_get(u, "/a", &data, NULL, NULL), LARCH_ETOOBIG);
    assert_null(data);
    larch_udp_close(u);
    fake_stop(&f);
    assert_int_equal(f.got_len[1], 1000); /* a third of what the reply needs */
    for (size_t i = f.got_len[0]; i < f.got_len[1]; i++)
        assert_int_equal(f.got[1][i], 0);
    assert_memory_equal(f.got[1] + 16, f.got[0] + 16, f.got_len[0] - 16); /* same read */
    assert_int_equal(f.got_len[3], 1000);
    fake_free(&f);
}

static void test_statuses_become_zookeeper_codes(void **state)
{
    (void)state;
    struct step steps[] = { { ACT_REPLY, ZK_UDP_BAD_MAC, ZK_OK, 1, 0 },
                            { ACT_REPLY, ZK_UDP_BAD_REQUEST, ZK_OK, 1, 0 },
                            { ACT_REPLY, ZK_UDP_BAD_VERSION, ZK_OK, 1, 0 },
                            { ACT_REPLY, 200, ZK_OK, 1, 0 } };
    struct fake f;
    fake_start(&f, steps, 4, "");
    struct larch_udp *u = open_to(&f, NULL, 5000);
    assert_int_equal(larch_udp_exists(u, "/a", NULL), ZK_EAUTHFAILED);
    assert_int_equal(larch_udp_exists(u, "/a", NULL), ZK_EBADARGUMENTS);
    assert_int_equal(larch_udp_exists(u, "/a", NULL), LARCH_EUDPVERSION);
    assert_int_equal(larch_udp_exists(u, "/a", NULL), LARCH_EUDPVERSION); /* a newer status */
    /* refused before sending: nothing reaches the server */
    assert_int_equal(larch_udp_exists(u, "a/b", NULL), ZK_EBADARGUMENTS);
    assert_int_equal(larch_udp_get(u, "/a/", NULL, NULL, NULL), ZK_EBADARGUMENTS);
    larch_udp_close(u);
    fake_stop(&f);
    assert_int_equal(f.ngot, 4);
    fake_free(&f);
}

static void test_silence_and_a_server_that_stays_away_end_at_the_timeout(void **state)
{
    (void)state;
    struct step steps[STEPS_MAX];
    for (int i = 0; i < STEPS_MAX; i++)
        steps[i] = (struct step){ ACT_REPLY, ZK_UDP_NOT_SERVING, ZK_OK, 1, 0 };
    struct fake f;
    fake_start(&f, steps, STEPS_MAX, "");
    struct larch_udp *u = open_to(&f, NULL, 150);
    assert_int_equal(larch_udp_exists(u, "/a", NULL), ZK_ECONNECTIONLOSS);
    for (int i = 0; i < STEPS_MAX; i++)
        steps[i] = (struct step){ ACT_REPLY, ZK_UDP_BEHIND, ZK_OK, 1, 0 };
    larch_udp_close(u);
    fake_stop(&f);
    assert_true(f.ngot >= 2); /* it was retried */
    fake_free(&f);

    fake_start(&f, steps, STEPS_MAX, "");
    u = open_to(&f, NULL, 150);
    assert_int_equal(larch_udp_exists(u, "/a", NULL), ZK_EOPERATIONTIMEOUT);
    larch_udp_close(u);
    fake_stop(&f);
    fake_free(&f);

    struct step drop[STEPS_MAX];
    for (int i = 0; i < STEPS_MAX; i++)
        drop[i] = (struct step){ ACT_DROP };
    fake_start(&f, drop, STEPS_MAX, "");
    u = open_to(&f, NULL, 150);
    assert_int_equal(larch_udp_exists(u, "/a", NULL), ZK_ECONNECTIONLOSS);
    larch_udp_close(u);
    fake_stop(&f);
    assert_true(f.ngot >= 3); /* re-sent every 20 ms */
    fake_free(&f);
}

static void test_addresses(void **state)
{
    (void)state;
    struct larch_udp *u = NULL;
    const char *bad[] = { "127.0.0.1", "127.0.0.1:", "127.0.0.1:1,127.0.0.2:1", ":5", "a:0",
                          "127.0.0.1:1/bad/", "" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(larch_udp_open(&u, bad[i], NULL, NULL), ZK_EBADARGUMENTS);
    assert_null(u);
    assert_int_equal(larch_udp_open(&u, "127.0.0.1:2182/app", NULL, NULL), ZK_OK);
    larch_udp_close(u);
    assert_string_equal(larch_error(LARCH_ETOOBIG), "TOOBIG");
    assert_string_equal(larch_error(LARCH_EUDPVERSION), "UDPVERSION");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lost_datagrams_are_sent_again_unchanged),
        cmocka_unit_test(test_foreign_and_stale_replies_are_not_the_answer),
        cmocka_unit_test(test_behind_is_retried_and_the_seen_zxid_is_the_next_minimum),
        cmocka_unit_test(test_too_big_pads_once_then_gives_up),
        cmocka_unit_test(test_statuses_become_zookeeper_codes),
        cmocka_unit_test(test_silence_and_a_server_that_stays_away_end_at_the_timeout),
        cmocka_unit_test(test_addresses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
