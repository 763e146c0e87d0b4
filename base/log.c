/*
 * log.c — log lines on fd 2 (base.h, "logging"): a threshold read with one
 * relaxed load, a line formatted on the caller's stack, one write(2).
 *
 * No stdio: fprintf(stderr) takes the FILE lock and may split a long line
 * into several writes, and a FILE's buffer would not follow fd 2 when
 * base_log_open_file replaces it.
 */
#include "base/base.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define TRUNCATED_MARK "..."
#define LINE_CAP_MIN 64 /* the time, the tag and a few bytes of message */

/* Process-wide: written by base_log_set_level, read by every logging thread.
 * Relaxed is enough: nothing else is published through it. */
static _Atomic int log_threshold = BASE_LOG_INFO;

static const char *const level_tags[] = { "[ERROR]", "[WARN ]", "[INFO ]", "[DEBUG]" };

static bool level_valid(enum base_log_level level)
{
    return (int)level >= BASE_LOG_ERROR && (int)level <= BASE_LOG_DEBUG;
}

void base_log_set_level(enum base_log_level level)
{
    BASE_ASSERT(level_valid(level));
    /* localtime_r reads the zone on its first call only, on whatever thread
     * logs first; reading it here makes that main, at startup */
    tzset();
    atomic_store_explicit(&log_threshold, (int)level, memory_order_relaxed);
}

bool base_log_enabled(enum base_log_level level)
{
    return (int)level <= atomic_load_explicit(&log_threshold, memory_order_relaxed);
}

/* "2026-11-26T13:40:01.123+00:00" at out (cap >= LINE_CAP_MIN); returns its
 * length. The offset is localtime's own (tm_gmtoff), so a zone with DST
 * prints the offset in force at that instant. */
static size_t format_time(char *out, size_t cap, const struct timespec *when)
{
    struct tm tm;
    time_t sec = when->tv_sec;
    /* fails only for a year beyond int: print the epoch's fields rather
     * than lose the line */
    if (localtime_r(&sec, &tm) == NULL)
        memset(&tm, 0, sizeof tm);
    long off_min = tm.tm_gmtoff / 60;
    char sign = off_min < 0 ? '-' : '+';
    if (off_min < 0)
        off_min = -off_min;
    int n = snprintf(out, cap, "%04d-%02d-%02dT%02d:%02d:%02d.%03ld%c%02ld:%02ld",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                     tm.tm_sec, when->tv_nsec / 1000000, sign, off_min / 60, off_min % 60);
    BASE_ASSERT(n > 0 && (size_t)n < cap);
    return (size_t)n;
}

/* One record per line: a newline inside a message (an error string, a
 * value echoed from a request or a file) would start a line that looks
 * like a record of its own. */
static void flatten_newlines(char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] == '\n' || p[i] == '\r')
            p[i] = ' ';
}

size_t base_log_vformat(char *out, size_t cap, enum base_log_level level,
                        const struct timespec *when, const char *fmt, va_list ap)
{
    BASE_ASSERT(cap >= LINE_CAP_MIN && level_valid(level));
    if (cap > BASE_LOG_LINE_MAX)
        cap = BASE_LOG_LINE_MAX;
    size_t n = format_time(out, cap, when);
    int t = snprintf(out + n, cap - n, " %s ", level_tags[level]);
    BASE_ASSERT(t > 0 && (size_t)t < cap - n);
    n += (size_t)t;
    /* the message gets what is left but the '\n' and the NUL */
    size_t room = cap - n - 2;
    int m = vsnprintf(out + n, room + 1, fmt, ap);
    if (m < 0)
        m = 0; /* an unformattable message (EOVERFLOW): the prefix still says when and how bad */
    size_t len = (size_t)m;
    if (len > room) {
        len = room;
        memcpy(out + n + room - strlen(TRUNCATED_MARK), TRUNCATED_MARK, strlen(TRUNCATED_MARK));
    }
    while (len > 0 && out[n + len - 1] == '\n')
        len--; /* a caller's own trailing newline would leave an empty line */
    flatten_newlines(out + n, len);
    n += len;
    out[n++] = '\n';
    out[n] = '\0';
    BASE_ASSERT(n < cap);
    return n;
}

/* Hands the line to fd 2. One write in practice (see base.h); what the
 * kernel leaves unwritten is finished, and a line that fails is dropped. */
static void write_line(const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(STDERR_FILENO, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        p += w;
        n -= (size_t)w;
    }
}

void base_log(enum base_log_level level, const char *fmt, ...)
{
    if (!base_log_enabled(level))
        return;
    int saved_errno = errno;
    struct timespec now;
    int rc = clock_gettime(CLOCK_REALTIME, &now);
    BASE_ASSERT(rc == 0);
    char line[BASE_LOG_LINE_MAX];
    va_list ap;
    va_start(ap, fmt);
    size_t n = base_log_vformat(line, sizeof line, level, &now, fmt, ap);
    va_end(ap);
    write_line(line, n);
    errno = saved_errno;
}

int base_log_open_file(const char *path)
{
    BASE_ASSERT(path != NULL);
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
    if (fd < 0)
        return -errno;
    if (fd == STDERR_FILENO) /* fd 2 was closed: open took its place */
        return fcntl(fd, F_SETFD, 0) == 0 ? 0 : -errno;
    /* dup2 swaps fd 2 in one step: no moment where a concurrent line finds
     * it closed (close, then open, would have one) */
    int rc = dup2(fd, STDERR_FILENO) < 0 ? -errno : 0;
    close(fd);
    return rc;
}
