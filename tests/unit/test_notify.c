/*
 * test_notify — server/notify.c: the sd_notify datagram reaches a socket
 * bound at a path and one in the abstract namespace, whole; no address is
 * a no-op; addresses of other forms and unreachable ones are errors.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "server/server.h"

/* A datagram socket bound at addr (a path, or "@name"), as systemd binds
 * its notify socket. */
static int bind_receiver(const char *addr)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    size_t n = strlen(addr);
    assert_true(n < sizeof sa.sun_path);
    memcpy(sa.sun_path, addr, n);
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
    if (addr[0] == '@')
        sa.sun_path[0] = '\0';
    else
        len++;
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, len), 0);
    return fd;
}

/* The next datagram, which must already be queued (notify_service sent it
 * before returning). */
static void expect_datagram(int fd, const char *want)
{
    char buf[512];
    ssize_t n = recv(fd, buf, sizeof buf - 1, MSG_DONTWAIT);
    assert_true(n >= 0);
    buf[n] = '\0';
    assert_string_equal(buf, want);
}

static void test_path_socket_gets_the_state(void **state)
{
    (void)state;
    char dir[] = "/tmp/test_notify.XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[128];
    snprintf(path, sizeof path, "%s/notify", dir);
    int fd = bind_receiver(path);
    assert_int_equal(notify_service(path, "READY=1\nSTATUS=serving on 127.0.0.1:2181"), 0);
    expect_datagram(fd, "READY=1\nSTATUS=serving on 127.0.0.1:2181");
    assert_int_equal(notify_service(path, "STOPPING=1"), 0);
    expect_datagram(fd, "STOPPING=1");
    close(fd);
    /* nobody bound there any more */
    assert_int_equal(notify_service(path, "READY=1"), -ECONNREFUSED);
    unlink(path);
    assert_int_equal(notify_service(path, "READY=1"), -ENOENT);
    rmdir(dir);
}

static void test_abstract_socket_gets_the_state(void **state)
{
    (void)state;
    char name[64];
    snprintf(name, sizeof name, "@larch-test-notify-%ld", (long)getpid());
    int fd = bind_receiver(name);
    assert_int_equal(notify_service(name, "READY=1\nSTATUS=x"), 0);
    expect_datagram(fd, "READY=1\nSTATUS=x");
    close(fd);
    assert_int_equal(notify_service(name, "READY=1"), -ECONNREFUSED);
}

static void test_other_addresses(void **state)
{
    (void)state;
    assert_int_equal(notify_service(NULL, "READY=1"), 0); /* no manager: nothing to do */
    assert_int_equal(notify_service("", "READY=1"), 0);
    assert_int_equal(notify_service("relative/notify", "READY=1"), -EAFNOSUPPORT);
    assert_int_equal(notify_service("vsock:2:1234", "READY=1"), -EAFNOSUPPORT);
    assert_int_equal(notify_service("@", "READY=1"), -EAFNOSUPPORT);
    char longpath[200];
    memset(longpath, 'a', sizeof longpath - 1);
    longpath[0] = '/';
    longpath[sizeof longpath - 1] = '\0';
    assert_int_equal(notify_service(longpath, "READY=1"), -ENAMETOOLONG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_path_socket_gets_the_state),
        cmocka_unit_test(test_abstract_socket_gets_the_state),
        cmocka_unit_test(test_other_addresses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
