/*
 * notify.c — tells a service manager how larchd is doing: systemd's
 * readiness protocol (sd_notify(3), "READY=1", "STOPPING=1", "STATUS=...")
 * without linking libsystemd. The protocol is one datagram of
 * newline-separated VAR=value lines to the AF_UNIX socket named by
 * $NOTIFY_SOCKET; systemd documents it as a stable interface for exactly
 * this use (systemd.io/NOTIFY, "sd_notify without libsystemd").
 */
#include "server/server.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* The address socket names: a path ("/run/systemd/notify") or a name in
 * the abstract namespace ("@name": the '@' stands for the leading NUL, and
 * the name's length is the address's, no NUL after it). 0, -EAFNOSUPPORT
 * for other forms (systemd's vsock: addresses, relative paths), or
 * -ENAMETOOLONG. */
static int notify_address(const char *name, struct sockaddr_un *sa, socklen_t *len)
{
    size_t n = strlen(name);
    if ((name[0] != '/' && name[0] != '@') || strcmp(name, "@") == 0)
        return -EAFNOSUPPORT;
    /* a path keeps its NUL inside sun_path; an abstract name needs none,
     * but one byte less is simpler to state than the difference */
    if (n >= sizeof sa->sun_path)
        return -ENAMETOOLONG;
    memset(sa, 0, sizeof *sa);
    sa->sun_family = AF_UNIX;
    memcpy(sa->sun_path, name, n);
    if (name[0] == '@') {
        sa->sun_path[0] = '\0';
        *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
    } else {
        *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
    }
    return 0;
}

int notify_service(const char *addr, const char *state)
{
    if (addr == NULL || addr[0] == '\0')
        return 0; /* not started by a service manager that listens */
    struct sockaddr_un sa;
    socklen_t len = 0;
    int rc = notify_address(addr, &sa, &len);
    if (rc != 0)
        return rc;
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    size_t n = strlen(state);
    /* a datagram socket: sendto either takes the whole message or fails */
    ssize_t sent = sendto(fd, state, n, MSG_NOSIGNAL, (const struct sockaddr *)&sa, len);
    rc = sent < 0 ? -errno : (size_t)sent != n ? -EMSGSIZE : 0;
    close(fd);
    return rc;
}
