/*
 * test_log — unit tests for base's log lines (base/log.c): the exact line
 * format under fixed time zones, cutting and flattening of messages, which
 * lines each threshold lets through, base_log_open_file's append, rename
 * and reopen, and whole lines from threads writing at once.
 *
 * Lines are captured by pointing fd 2 at a temp file; cmocka reports a
 * failure on stderr, so fd 2 is put back before any assertion.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"

#define PREFIX_LEN 38 /* "2026-11-26T13:40:01.123+00:00 [INFO ] " */
#define CAPTURE_BYTES_MAX (1 << 20)

/* 2026-11-26T13:40:01.123456789Z */
static const struct timespec when = { .tv_sec = 1795700401, .tv_nsec = 123456789 };

static void use_zone(const char *tz)
{
    assert_int_equal(setenv("TZ", tz, 1), 0);
    base_log_set_level(BASE_LOG_INFO); /* reads the zone (tzset) */
}

static size_t format(char *out, size_t cap, enum base_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static size_t format(char *out, size_t cap, enum base_log_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t n = base_log_vformat(out, cap, level, &when, fmt, ap);
    va_end(ap);
    return n;
}

/* ---- the format ------------------------------------------------------------------- */

static void test_line_format_is_pinned(void **state)
{
    (void)state;
    char line[BASE_LOG_LINE_MAX];
    use_zone("UTC0");
    size_t n = format(line, sizeof line, BASE_LOG_INFO, "larchd: serving on %s:%d", "127.0.0.1",
                      2181);
    assert_string_equal(line, "2026-11-26T13:40:01.123+00:00 [INFO ] larchd: serving on 127.0.0.1:2181\n");
    assert_int_equal(n, strlen(line));
    /* a zone east of UTC with half an hour, one west of it: the offset is
     * always +HH:MM or -HH:MM, and the clock time is local */
    use_zone("<+0530>-5:30");
    format(line, sizeof line, BASE_LOG_ERROR, "e");
    assert_string_equal(line, "2026-11-26T19:10:01.123+05:30 [ERROR] e\n");
    use_zone("<-03>3");
    format(line, sizeof line, BASE_LOG_WARN, "w");
    assert_string_equal(line, "2026-11-26T10:40:01.123-03:00 [WARN ] w\n");
    format(line, sizeof line, BASE_LOG_DEBUG, "d");
    assert_string_equal(line, "2026-11-26T10:40:01.123-03:00 [DEBUG] d\n");
    use_zone("UTC0");
}

static void test_long_messages_are_cut(void **state)
{
    (void)state;
    use_zone("UTC0");
    char *big = malloc(3 * BASE_LOG_LINE_MAX);
    assert_non_null(big);
    memset(big, 'x', 3 * BASE_LOG_LINE_MAX - 1);
    big[3 * BASE_LOG_LINE_MAX - 1] = '\0';
    char line[BASE_LOG_LINE_MAX];
    size_t n = format(line, sizeof line, BASE_LOG_INFO, "larchd: %s", big);
    assert_int_equal(n, BASE_LOG_LINE_MAX - 1);
    assert_int_equal(strlen(line), n);
    assert_memory_equal(line + PREFIX_LEN, "larchd: xxx", 11);
    assert_string_equal(line + n - 6, "xx...\n");
    /* a buffer larger than a line still gets at most a line */
    char *wide = malloc(4 * BASE_LOG_LINE_MAX);
    assert_non_null(wide);
    n = format(wide, 4 * BASE_LOG_LINE_MAX, BASE_LOG_INFO, "%s", big);
    assert_int_equal(n, BASE_LOG_LINE_MAX - 1);
    /* the smallest buffer allowed: the prefix whole, the message cut */
    char small[64];
    n = format(small, sizeof small, BASE_LOG_ERROR, "%s", big);
    assert_int_equal(n, sizeof small - 1);
    assert_memory_equal(small, "2026-11-26T13:40:01.123+00:00 [ERROR] xx", 40);
    assert_string_equal(small + n - 4, "...\n");
    /* one byte short of cutting: whole */
    size_t fits = sizeof small - 2 - PREFIX_LEN;
    big[fits] = '\0';
    n = format(small, sizeof small, BASE_LOG_ERROR, "%s", big);
    assert_int_equal(n, sizeof small - 1);
    assert_string_equal(small + n - 4, "xxx\n");
    free(wide);
    free(big);
}

static void test_newlines_do_not_start_lines(void **state)
{
    (void)state;
    use_zone("UTC0");
    char line[BASE_LOG_LINE_MAX];
    format(line, sizeof line, BASE_LOG_WARN, "a\nb\r\n%s\n", "c");
    assert_string_equal(line + PREFIX_LEN, "a b  c\n");
    format(line, sizeof line, BASE_LOG_WARN, "%s", "");
    assert_string_equal(line + PREFIX_LEN, "\n");
}

/* ---- capturing fd 2 --------------------------------------------------------------- */

struct capture {
    char path[64];
    int saved_fd2;
};

static void capture_begin(struct capture *c)
{
    snprintf(c->path, sizeof c->path, "/tmp/test_log.XXXXXX");
    int fd = mkstemp(c->path);
    assert_true(fd >= 0);
    fflush(stderr);
    c->saved_fd2 = dup(STDERR_FILENO);
    assert_true(c->saved_fd2 >= 0);
    assert_true(dup2(fd, STDERR_FILENO) == STDERR_FILENO);
    close(fd);
}

/* Puts fd 2 back and returns what was written meanwhile (malloc'd, NUL-terminated). */
static char *capture_end(struct capture *c)
{
    assert_true(dup2(c->saved_fd2, STDERR_FILENO) == STDERR_FILENO);
    close(c->saved_fd2);
    FILE *f = fopen(c->path, "rb");
    assert_non_null(f);
    char *text = calloc(1, CAPTURE_BYTES_MAX + 1);
    assert_non_null(text);
    size_t n = fread(text, 1, CAPTURE_BYTES_MAX, f);
    assert_true(n < CAPTURE_BYTES_MAX);
    fclose(f);
    unlink(c->path);
    return text;
}

/* True when line (without its '\n') has the shape base.h documents: the
 * time with digits where digits go, a level tag, a space, then the message. */
static bool well_formed(const char *line, size_t len, const char **tag, const char **msg)
{
    static const char shape[] = "dddd-dd-ddTdd:dd:dd.ddd?dd:dd [";
    if (len < PREFIX_LEN)
        return false;
    for (size_t i = 0; i < sizeof shape - 1; i++) {
        char want = shape[i], got = line[i];
        bool ok = want == 'd' ? got >= '0' && got <= '9'
                  : want == '?' ? got == '+' || got == '-'
                                : got == want;
        if (!ok)
            return false;
    }
    static const char *const tags[] = { "[ERROR] ", "[WARN ] ", "[INFO ] ", "[DEBUG] " };
    for (size_t i = 0; i < 4; i++) {
        if (memcmp(line + 30, tags[i], 8) == 0) {
            *tag = tags[i];
            *msg = line + PREFIX_LEN;
            return true;
        }
    }
    return false;
}

/* ---- the threshold ------------------------------------------------------------------ */

/* Under each threshold, one line at each level: exactly those at the
 * threshold or more severe appear, in order, each well formed. */
static void test_threshold_lets_through_exactly(void **state)
{
    (void)state;
    use_zone("UTC0");
    static const char *const tags[] = { "[ERROR] ", "[WARN ] ", "[INFO ] ", "[DEBUG] " };
    struct capture c;
    bool enabled[4][4];
    int errno_after = 0;
    capture_begin(&c);
    for (int t = BASE_LOG_ERROR; t <= BASE_LOG_DEBUG; t++) {
        base_log_set_level((enum base_log_level)t);
        for (int l = BASE_LOG_ERROR; l <= BASE_LOG_DEBUG; l++) {
            enabled[t][l] = base_log_enabled((enum base_log_level)l);
            errno = EXDEV;
            base_log((enum base_log_level)l, "larchd: threshold %d level %d", t, l);
            if (errno != EXDEV)
                errno_after = errno;
        }
    }
    base_log_set_level(BASE_LOG_INFO);
    char *text = capture_end(&c);
    assert_int_equal(errno_after, 0);
    const char *p = text;
    for (int t = BASE_LOG_ERROR; t <= BASE_LOG_DEBUG; t++) {
        for (int l = BASE_LOG_ERROR; l <= BASE_LOG_DEBUG; l++) {
            assert_int_equal(enabled[t][l], l <= t);
            if (l > t)
                continue;
            const char *nl = strchr(p, '\n');
            assert_non_null(nl);
            const char *tag = NULL, *msg = NULL;
            assert_true(well_formed(p, (size_t)(nl - p), &tag, &msg));
            assert_string_equal(tag, tags[l]);
            char want[64];
            snprintf(want, sizeof want, "larchd: threshold %d level %d", t, l);
            assert_int_equal((size_t)(nl - msg), strlen(want));
            assert_memory_equal(msg, want, strlen(want));
            p = nl + 1;
        }
    }
    assert_string_equal(p, ""); /* nothing else: no line below its threshold */
    free(text);
}

/* ---- the log file -------------------------------------------------------------------- */

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    char *text = calloc(1, CAPTURE_BYTES_MAX + 1);
    assert_non_null(text);
    size_t n = fread(text, 1, CAPTURE_BYTES_MAX, f);
    assert_true(n < CAPTURE_BYTES_MAX);
    fclose(f);
    return text;
}

/* Appends to what is there, makes the file 0640 less the umask, follows a
 * rename with a new file, and leaves fd 2 alone when the path cannot be
 * opened. */
static void test_open_file_appends_and_reopens(void **state)
{
    (void)state;
    char dir[] = "/tmp/test_log_dir.XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[128], rotated[128], bad[128];
    snprintf(path, sizeof path, "%s/larchd.log", dir);
    snprintf(rotated, sizeof rotated, "%s/larchd.log.1", dir);
    snprintf(bad, sizeof bad, "%s/no-such-dir/larchd.log", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("an older line\n", f);
    fclose(f);
    assert_int_equal(chmod(path, 0600), 0);
    char other[128];
    snprintf(other, sizeof other, "%s/fresh.log", dir);
    mode_t mask = umask(022);

    struct capture c;
    capture_begin(&c);
    int rc_open = base_log_open_file(path);
    base_log(BASE_LOG_INFO, "larchd: first");
    int rc_rename = rename(path, rotated);
    int rc_reopen = base_log_open_file(path);
    base_log(BASE_LOG_INFO, "larchd: second");
    int rc_bad = base_log_open_file(bad);
    base_log(BASE_LOG_INFO, "larchd: third");
    int rc_fresh = base_log_open_file(other);
    char *captured = capture_end(&c);
    umask(mask);

    assert_int_equal(rc_open, 0);
    assert_int_equal(rc_rename, 0);
    assert_int_equal(rc_reopen, 0);
    assert_int_equal(rc_bad, -ENOENT);
    assert_int_equal(rc_fresh, 0);
    assert_string_equal(captured, ""); /* every line went to the files */
    char *old = slurp(rotated), *cur = slurp(path);
    assert_non_null(old);
    assert_non_null(cur);
    assert_memory_equal(old, "an older line\n", 14);
    assert_non_null(strstr(old, "[INFO ] larchd: first\n"));
    assert_null(strstr(old, "second"));
    assert_null(strstr(cur, "first"));
    assert_non_null(strstr(cur, "[INFO ] larchd: second\n"));
    assert_non_null(strstr(cur, "[INFO ] larchd: third\n")); /* the failed open changed nothing */
    struct stat st;
    assert_int_equal(stat(other, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0640 & ~022);
    assert_int_equal(stat(rotated, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600); /* an existing file keeps its mode */
    free(old);
    free(cur);
    free(captured);
    unlink(rotated);
    unlink(path);
    unlink(other);
    rmdir(dir);
}

/* ---- threads ------------------------------------------------------------------------ */

#define LOG_THREADS 4
#define LINES_PER_THREAD 2000

static void *log_lines(void *arg)
{
    int id = (int)(intptr_t)arg;
    /* long enough that a split write would show: 300 bytes of payload */
    char pad[301];
    memset(pad, 'a' + id, sizeof pad - 1);
    pad[sizeof pad - 1] = '\0';
    for (int i = 0; i < LINES_PER_THREAD; i++)
        base_log(BASE_LOG_INFO, "larchd: thread %d line %d %s", id, i, pad);
    return NULL;
}

/* Threads logging at once to an O_APPEND file: every line arrives whole,
 * and each thread's lines in its order. */
static void test_threads_write_whole_lines(void **state)
{
    (void)state;
    char dir[] = "/tmp/test_log_dir.XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[128];
    snprintf(path, sizeof path, "%s/threads.log", dir);
    struct capture c;
    capture_begin(&c);
    int rc = base_log_open_file(path);
    pthread_t th[LOG_THREADS];
    int started = 0;
    for (int i = 0; rc == 0 && i < LOG_THREADS; i++, started++)
        if (pthread_create(&th[i], NULL, log_lines, (void *)(intptr_t)i) != 0)
            break;
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    char *captured = capture_end(&c);
    assert_int_equal(rc, 0);
    assert_int_equal(started, LOG_THREADS);
    assert_string_equal(captured, "");
    free(captured);

    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char line[BASE_LOG_LINE_MAX + 2];
    int next[LOG_THREADS] = { 0 };
    int lines = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        size_t len = strlen(line);
        assert_true(len > 0 && line[len - 1] == '\n');
        const char *tag = NULL, *msg = NULL;
        assert_true(well_formed(line, len - 1, &tag, &msg));
        int id = -1, i = -1, used = 0;
        assert_int_equal(sscanf(msg, "larchd: thread %d line %d %n", &id, &i, &used), 2);
        assert_true(id >= 0 && id < LOG_THREADS);
        assert_int_equal(i, next[id]);
        next[id]++;
        assert_int_equal(strspn(msg + used, (char[]){ (char)('a' + id), '\0' }), 300);
        assert_string_equal(msg + used + 300, "\n");
        lines++;
    }
    fclose(f);
    assert_int_equal(lines, LOG_THREADS * LINES_PER_THREAD);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_line_format_is_pinned),
        cmocka_unit_test(test_long_messages_are_cut),
        cmocka_unit_test(test_newlines_do_not_start_lines),
        cmocka_unit_test(test_threshold_lets_through_exactly),
        cmocka_unit_test(test_open_file_appends_and_reopens),
        cmocka_unit_test(test_threads_write_whole_lines),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
