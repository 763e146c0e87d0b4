/*
 * base.c — assertions, array growth, the byte buffer and clocks (base.h).
 * CRC-32C lives in crc32c.c, log lines in log.c; byte order and the reader are inline in base.h.
 */
#include "base/base.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GROW_FIRST_BYTES 64u /* first allocation, about a cache line */

_Noreturn void base_assert_fail(const char *file, int line, const char *expr)
{
    /* base_log asserts too: a failure inside it must not come back here */
    static _Thread_local bool failing;
    if (!failing) {
        failing = true;
        base_log(BASE_LOG_ERROR, "%s:%d: assertion failed: %s", file, line, expr);
    } else {
        fprintf(stderr, "%s:%d: assertion failed: %s\n", file, line, expr);
    }
    abort();
}

/* ---- growable arrays -------------------------------------------------------------- */

/* The capacity to grow to: doubled until it covers need, or need itself
 * once doubling would overflow the byte count. need * size fits (checked). */
static size_t grow_target(size_t cap, size_t need, size_t size)
{
    size_t ncap = cap > 0 ? cap : size < GROW_FIRST_BYTES ? GROW_FIRST_BYTES / size : 1;
    while (ncap < need)
        ncap = ncap > SIZE_MAX / 2 / size ? need : ncap * 2;
    return ncap;
}

int base_grow(void *itemsp, size_t *cap, size_t need, size_t size)
{
    BASE_ASSERT(itemsp != NULL && cap != NULL && size > 0);
    if (need <= *cap)
        return 0;
    if (need > SIZE_MAX / size)
        return -ENOMEM;
    size_t ncap = grow_target(*cap, need, size);
    /* itemsp points at a T *; copied through memcpy rather than read as a
     * void * lvalue, which strict aliasing would not allow */
    void *items;
    memcpy(&items, itemsp, sizeof items);
    void *grown = realloc(items, ncap * size);
    if (grown == NULL)
        return -ENOMEM;
    memcpy(itemsp, &grown, sizeof grown);
    *cap = ncap;
    BASE_ASSERT(*cap >= need);
    return 0;
}

/* ---- growable byte buffer --------------------------------------------------------- */

int base_buf_reserve(struct base_buf *b, size_t extra)
{
    size_t max = b->max > 0 ? b->max : SIZE_MAX;
    if (extra > max - b->len)
        return -EMSGSIZE;
    return base_grow(&b->data, &b->cap, b->len + extra, 1);
}

int base_buf_append(struct base_buf *b, const void *p, size_t n)
{
    int rc = base_buf_reserve(b, n);
    if (rc != 0)
        return rc;
    if (n > 0)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    return 0;
}

int base_buf_put_u8(struct base_buf *b, uint8_t v)
{
    return base_buf_append(b, &v, 1);
}

int base_buf_put_be16(struct base_buf *b, uint16_t v)
{
    uint8_t bytes[2];
    base_put_be16(bytes, v);
    return base_buf_append(b, bytes, sizeof bytes);
}

int base_buf_put_be32(struct base_buf *b, uint32_t v)
{
    uint8_t bytes[4];
    base_put_be32(bytes, v);
    return base_buf_append(b, bytes, sizeof bytes);
}

int base_buf_put_be64(struct base_buf *b, uint64_t v)
{
    uint8_t bytes[8];
    base_put_be64(bytes, v);
    return base_buf_append(b, bytes, sizeof bytes);
}

void base_buf_free(struct base_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
}

/* ---- clocks ----------------------------------------------------------------------- */

/* clock_gettime fails only for a bad clock id or pointer: a bug here. */
static struct timespec clock_now(clockid_t clock)
{
    struct timespec ts;
    int rc = clock_gettime(clock, &ts);
    BASE_ASSERT(rc == 0);
    return ts;
}

int64_t base_mono_ns(void)
{
    struct timespec ts = clock_now(CLOCK_MONOTONIC);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t base_mono_us(void)
{
    struct timespec ts = clock_now(CLOCK_MONOTONIC);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t base_mono_ms(void)
{
    struct timespec ts = clock_now(CLOCK_MONOTONIC);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t base_wall_ms(void)
{
    struct timespec ts = clock_now(CLOCK_REALTIME);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct timespec base_deadline(clockid_t clock, int64_t ms)
{
    struct timespec ts = clock_now(clock);
    if (ms < 0)
        ms = 0; /* a past deadline: already due, and still normalised */
    ts.tv_sec += (time_t)(ms / 1000);
    ts.tv_nsec += (long)(ms % 1000) * 1000000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    return ts;
}
