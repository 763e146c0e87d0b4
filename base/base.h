/*
 * base — the primitives every module shares, one home each (DESIGN.md
 * layout): byte order, one bounded reader, a growable byte buffer, array
 * growth, CRC-32C, UTF-8 decoding, base64, clocks, log lines, and
 * assertions that stay on in release builds. Every module above (proto,
 * tree, replication, dataplane, server, client, bench, tests) uses these
 * instead of keeping its own copy, so a format's byte order or a reader's
 * bounds check is written, and tested, once (tests/unit/test_base.c).
 *
 * Threading: every function is safe from any thread on distinct objects. A
 * struct base_rd or struct base_buf belongs to one thread at a time; nothing
 * here locks. base_crc32c builds its tables once (pthread_once: the first
 * call may wait for another thread's) and only reads them afterwards. Only
 * base_grow and base_buf_* allocate, and they never abort on allocation
 * failure: they return it. base_log writes each line with one write(2), so
 * lines from different threads never interleave; its threshold is set once
 * at startup. base depends on no other module.
 */
#ifndef LARCH_BASE_H
#define LARCH_BASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

/* ---- assertions ------------------------------------------------------------------ */

/* Logs "file:line: assertion failed: expr" at BASE_LOG_ERROR (so on fd 2,
 * whatever the threshold) and aborts. */
_Noreturn void base_assert_fail(const char *file, int line, const char *expr);

/* An invariant of the replication and log code: checked in every build
 * (NDEBUG does not remove it), since a broken invariant there loses data
 * silently if the process carries on. */
#define BASE_ASSERT(cond)                                                                    \
    do {                                                                                     \
        if (!(cond))                                                                         \
            base_assert_fail(__FILE__, __LINE__, #cond);                                     \
    } while (0)

/* ---- byte order ------------------------------------------------------------------- */
/* Fixed-width integers to and from bytes at p, which must hold the width
 * (2, 4 or 8 bytes); no alignment needed. Big-endian is the wire's and the
 * txn log's order (jute is Java's DataOutput); little-endian is the
 * snapshot format's (tree.h). Signed values go through the unsigned type:
 * (uint32_t)v out, (int32_t)base_get_be32(p) back, two's complement both
 * ways. */

/* Each is one unaligned load or store and a byte swap. The byte-at-a-time
 * forms compile to that only sometimes: GCC's store merging gives up on a
 * run of them with values computed in between, and jute records and packet
 * headers, on every hot path, are runs of them (callgrind: 92 instructions
 * for a 20-byte IPv4 header). */
#if defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define BASE_BE16(v) __builtin_bswap16(v)
#define BASE_BE32(v) __builtin_bswap32(v)
#define BASE_BE64(v) __builtin_bswap64(v)
#define BASE_LE32(v) (v)
#define BASE_LE64(v) (v)
#elif defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define BASE_BE16(v) (v)
#define BASE_BE32(v) (v)
#define BASE_BE64(v) (v)
#define BASE_LE32(v) __builtin_bswap32(v)
#define BASE_LE64(v) __builtin_bswap64(v)
#else
#error "base.h needs GCC's or Clang's byte order macros"
#endif

static inline void base_put_be16(void *p, uint16_t v)
{
    v = BASE_BE16(v);
    memcpy(p, &v, 2);
}

static inline void base_put_be32(void *p, uint32_t v)
{
    v = BASE_BE32(v);
    memcpy(p, &v, 4);
}

static inline void base_put_be64(void *p, uint64_t v)
{
    v = BASE_BE64(v);
    memcpy(p, &v, 8);
}

static inline uint16_t base_get_be16(const void *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return BASE_BE16(v);
}

static inline uint32_t base_get_be32(const void *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return BASE_BE32(v);
}

static inline uint64_t base_get_be64(const void *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return BASE_BE64(v);
}

static inline void base_put_le32(void *p, uint32_t v)
{
    v = BASE_LE32(v);
    memcpy(p, &v, 4);
}

static inline void base_put_le64(void *p, uint64_t v)
{
    v = BASE_LE64(v);
    memcpy(p, &v, 8);
}

static inline uint32_t base_get_le32(const void *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return BASE_LE32(v);
}

static inline uint64_t base_get_le64(const void *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return BASE_LE64(v);
}

/* ---- bounded reader --------------------------------------------------------------- */
/* Reads fields off a byte range the caller owns (and keeps alive while the
 * reader is used). A read never touches a byte outside [ptr, ptr + len):
 * one that would run past the end sets err, consumes nothing and yields 0
 * (or NULL), and every read after that fails the same way, so a decoder
 * chains reads and checks err once. ptr is never NULL after init. */
struct base_rd {
    const uint8_t *ptr;
    size_t len;
    size_t pos; /* bytes consumed; pos <= len always */
    bool err;   /* a read ran past the end (or the caller failed the reader) */
};

/* p may be NULL only with len 0 (an empty range). */
static inline void base_rd_init(struct base_rd *r, const void *p, size_t len)
{
    r->ptr = p != NULL ? p : (const uint8_t *)"";
    r->len = p != NULL ? len : 0;
    r->pos = 0;
    r->err = false;
}

/* Bytes still readable; 0 once the reader has failed, since nothing after a
 * failure can be trusted to be at a field boundary. */
static inline size_t base_rd_left(const struct base_rd *r)
{
    return r->err ? 0 : r->len - r->pos;
}

/* Consumes n bytes and returns where they start (never NULL on success, even
 * for n == 0), or sets err and returns NULL when fewer than n are left. */
static inline const uint8_t *base_rd_take(struct base_rd *r, size_t n)
{
    if (r->err || n > r->len - r->pos) {
        r->err = true;
        return NULL;
    }
    const uint8_t *p = r->ptr + r->pos;
    r->pos += n;
    return p;
}

static inline uint8_t base_rd_u8(struct base_rd *r)
{
    const uint8_t *p = base_rd_take(r, 1);
    return p != NULL ? p[0] : 0;
}

static inline uint16_t base_rd_be16(struct base_rd *r)
{
    const uint8_t *p = base_rd_take(r, 2);
    return p != NULL ? base_get_be16(p) : 0;
}

static inline uint32_t base_rd_be32(struct base_rd *r)
{
    const uint8_t *p = base_rd_take(r, 4);
    return p != NULL ? base_get_be32(p) : 0;
}

static inline uint64_t base_rd_be64(struct base_rd *r)
{
    const uint8_t *p = base_rd_take(r, 8);
    return p != NULL ? base_get_be64(p) : 0;
}

static inline uint32_t base_rd_le32(struct base_rd *r)
{
    const uint8_t *p = base_rd_take(r, 4);
    return p != NULL ? base_get_le32(p) : 0;
}

static inline uint64_t base_rd_le64(struct base_rd *r)
{
    const uint8_t *p = base_rd_take(r, 8);
    return p != NULL ? base_get_le64(p) : 0;
}

/* ---- growable arrays -------------------------------------------------------------- */

/* Makes the caller's array hold at least need elements of size bytes each.
 * itemsp is the address of the caller's element pointer (T **, malloc'd or
 * NULL), passed as void * so that any element type fits; *cap is its
 * capacity in elements. Capacity doubles, starting from about 64 bytes'
 * worth of elements (at least one), so n appends cost amortised O(1)
 * reallocations; nothing happens when *cap >= need. 0, or -ENOMEM when
 * need * size overflows size_t or realloc fails: the array and *cap are
 * then unchanged and still the caller's. New elements are uninitialised;
 * the caller frees the array with free(). Not thread-safe on one array. */
int base_grow(void *itemsp, size_t *cap, size_t need, size_t size);

/* ---- growable byte buffer --------------------------------------------------------- */
/* Bytes appended at the end of one malloc'd block that the buffer owns (free
 * it with base_buf_free). Zero-initialised ({ 0 }) it is empty and has no
 * limit; max, when nonzero, bounds len: an append that would take len past
 * it is refused whole. A refused append (-EMSGSIZE past max, -ENOMEM when
 * allocation fails) leaves the buffer exactly as it was. */
struct base_buf {
    uint8_t *data; /* NULL while cap == 0 */
    size_t len;
    size_t cap;
    size_t max; /* 0: no limit but size_t */
};

/* Makes room for extra more bytes without changing len. 0, -EMSGSIZE or
 * -ENOMEM. */
int base_buf_reserve(struct base_buf *b, size_t extra);
/* Appends n bytes from p (p may be NULL when n is 0). 0, -EMSGSIZE or -ENOMEM. */
int base_buf_append(struct base_buf *b, const void *p, size_t n);
int base_buf_put_u8(struct base_buf *b, uint8_t v);
int base_buf_put_be16(struct base_buf *b, uint16_t v);
int base_buf_put_be32(struct base_buf *b, uint32_t v);
int base_buf_put_be64(struct base_buf *b, uint64_t v);
/* Frees the bytes and empties the buffer; max is kept, so it can be reused. */
void base_buf_free(struct base_buf *b);

/* ---- text encodings (text.c) ------------------------------------------------------ */

/* The length (1..4) of the well-formed UTF-8 sequence that starts at p,
 * which has avail bytes, as Unicode's table 3-7 defines it: no overlong
 * forms, no surrogates (U+D800..U+DFFF), nothing above U+10FFFF. Its code
 * point goes to *cp (cp may be NULL). 0, with *cp untouched, when the bytes
 * at p do not start one: a stray continuation byte, C0, C1, F5..FF, a
 * second byte outside the lead's range, or a sequence cut short by avail. */
size_t base_utf8_decode(const void *p, size_t avail, uint32_t *cp);
/* True when the n bytes at p are a run of well-formed UTF-8 sequences. */
bool base_utf8_valid(const void *p, size_t n);

/* Characters of the base64 form of n bytes, padding included. */
#define BASE_BASE64_LEN(n) (((n) + 2) / 3 * 4)
/* Writes n bytes at in as base64 (RFC 4648 section 4: the standard
 * alphabet, '=' padding) to out, which must hold BASE_BASE64_LEN(n) + 1
 * bytes, and a NUL after them; returns BASE_BASE64_LEN(n). */
size_t base_base64_encode(char *out, const void *in, size_t n);

/* ---- CRC-32C (crc32c.c) ----------------------------------------------------------- */

/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78, RFC 3720) of n bytes
 * at p, continuing from crc (0 to start): base_crc32c(base_crc32c(0, a, n),
 * b, m) is the CRC of a followed by b. The checksum of txn log records and
 * snapshot files; p may be NULL when n is 0. */
uint32_t base_crc32c(uint32_t crc, const void *p, size_t n);
/* base_crc32c(crc, <n zero bytes>, n) in O(log n) time, without the bytes: a
 * torn log tail is checked against its preallocated zeros for free. */
uint32_t base_crc32c_zeros(uint32_t crc, uint64_t n);

/* ---- the Internet checksum (RFC 1071; checksum.c) -------------------------------- */

/* Adds n bytes at p, read as big-endian 16-bit words (an odd last byte
 * padded with zero), to the partial sum; pieces of even length chain. The
 * partial sum means something only to base_csum_fold (it is kept modulo
 * 0xffff, not as the 16-bit word sum). */
uint32_t base_csum_add(uint32_t sum, const void *p, size_t n);
/* Copies n bytes from src to dst (not overlapping) and adds them to sum
 * as base_csum_add does, in one pass: a checksum of what was just copied
 * would read it back from stores still in flight. */
uint32_t base_csum_copy(uint32_t sum, void *dst, const void *src, size_t n);
/* The checksum a header carries: the sum folded to 16 bits, complemented.
 * Over data that includes a correct checksum it is 0. */
uint16_t base_csum_fold(uint32_t sum);

/* ---- SipHash-2-4 (siphash.c) ------------------------------------------------------ */

#define BASE_SIPHASH_KEY_BYTES 16
/* SipHash-2-4 of n bytes at p under the 128-bit key (k0 = key[0..7], k1 =
 * key[8..15], little-endian, as the reference reads them). The MAC of a
 * signed UDP read (dataplane/UDP.md); p may be NULL when n is 0. */
uint64_t base_siphash24(const uint8_t key[BASE_SIPHASH_KEY_BYTES], const void *p, size_t n);
/* The same over pieces: init, update any number of times (p may be NULL
 * when n is 0), final; the result equals base_siphash24 of the pieces put
 * together. */
struct base_sip {
    uint64_t v[4];
    uint64_t total;
    uint8_t buf[8];
    size_t nbuf;
};
void base_sip_init(struct base_sip *s, const uint8_t key[BASE_SIPHASH_KEY_BYTES]);
void base_sip_update(struct base_sip *s, const void *p, size_t n);
uint64_t base_sip_final(struct base_sip *s);

/* ---- logging (log.c) -------------------------------------------------------------- */
/* Log lines on fd 2, in the shape of ZooKeeper's logback lines, so that one
 * grep or log shipper reads both servers' logs:
 *
 *     2026-11-26T13:40:01.123+00:00 [INFO ] larchd: serving on 127.0.0.1:2181 (...)
 *
 * that is: the local time as ISO 8601 with milliseconds and the UTC offset
 * (always "+HH:MM" or "-HH:MM", never "Z"), one space, the level tag padded
 * to seven characters ("[ERROR]", "[WARN ]", "[INFO ]", "[DEBUG]"), one
 * space, the message as formatted, '\n'. The message carries its own
 * prefix ("larchd: ..."): base adds none, so what tests and operators grep
 * for is the text the caller wrote. A '\n' or '\r' inside a message becomes
 * a space (one record per line: a client-chosen string cannot forge a
 * line), and a message longer than the line allows is cut and ends in
 * "..." (BASE_LOG_LINE_MAX bytes in all, '\n' included).
 *
 * Threading: base_log may be called from any thread at any time. Each line
 * is formatted on the caller's stack and handed to ONE write(2) on fd 2;
 * with fd 2 a regular file opened O_APPEND, or a pipe and a line of at most
 * PIPE_BUF bytes, lines of different threads never interleave. (Only a write
 * the kernel cuts short, which it does not do for those, is finished with a
 * second write.) Whatever fd 2 is (a terminal, the journal's socket, a file
 * that base_log_open_file put there) is the caller's: base_log only writes
 * to it. The threshold is one process-wide atomic read with relaxed order:
 * a line below it costs the call and that one load (its arguments are still
 * evaluated, so a caller with costly ones checks base_log_enabled first). A
 * line that cannot be written (a full disk, EIO) is dropped: there is
 * nowhere left to report it. base_log keeps errno as it found it. */
enum base_log_level {
    BASE_LOG_ERROR = 0, /* always written: the lowest threshold is ERROR */
    BASE_LOG_WARN = 1,
    BASE_LOG_INFO = 2, /* the threshold until base_log_set_level */
    BASE_LOG_DEBUG = 3,
};

#define BASE_LOG_LINE_MAX 4096 /* bytes of one line, '\n' included */

/* Sets the process-wide threshold: lines at level or more severe are
 * written. Called once at startup, before the threads that log start (a
 * later call takes effect on each thread at its next line). Also reads the
 * time zone (tzset: TZ, /etc/localtime) once, so the first line of a thread
 * does no file I/O for it. level must be one of enum base_log_level. */
void base_log_set_level(enum base_log_level level);
/* True when a line at level would be written (one relaxed atomic load). */
bool base_log_enabled(enum base_log_level level);
/* Writes one line at level if the threshold lets it through (format above). */
void base_log(enum base_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Formats the line base_log would write for level at time when into out
 * (cap bytes, at least 64; at most BASE_LOG_LINE_MAX are used), '\n' and a
 * terminating NUL included; returns its length without the NUL. Pure but
 * for the time zone (localtime_r); for tests of the format. */
size_t base_log_vformat(char *out, size_t cap, enum base_log_level level,
                        const struct timespec *when, const char *fmt, va_list ap)
    __attribute__((format(printf, 5, 0)));
/* Opens path for appending (O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC,
 * mode 0640 less the umask) and puts it on fd 2 with dup2, so that every
 * later line, and anything else written to stderr (a sanitizer's report,
 * abort messages), goes there. Called again with the same path after the
 * file was renamed (log rotation), it starts a new file; a thread writing
 * meanwhile writes its line to the old file or the new one, whole. 0, or
 * -errno from open or dup2 (fd 2 is then unchanged). Any thread, but one
 * at a time. */
int base_log_open_file(const char *path);

/* ---- clocks ----------------------------------------------------------------------- */
/* CLOCK_MONOTONIC (intervals, deadlines; never jumps) and CLOCK_REALTIME
 * (timestamps other machines read: ctime/mtime, 4lw). Both are vDSO calls
 * that cannot fail with these clock ids. Code that must replay exactly (the
 * sequencer under test, the Raft core) takes its time from a caller instead. */
int64_t base_mono_ns(void);
int64_t base_mono_us(void);
int64_t base_mono_ms(void);
int64_t base_wall_ms(void);
/* The absolute time ms milliseconds from now on clock (CLOCK_MONOTONIC or
 * CLOCK_REALTIME), normalised, for pthread_cond_timedwait and friends; the
 * condition variable must use the same clock. A negative ms counts as 0. */
struct timespec base_deadline(clockid_t clock, int64_t ms);

/* ---- latency distributions (latency.c) -------------------------------------------
 * What operators graph: how long fsyncs, snapshots and requests take, as
 * Prometheus histograms (cumulative counts below fixed bounds) and the
 * quantiles ZooKeeper's summaries report, estimated from those counts.
 * Any thread records and reads (relaxed atomics: a reader may see a value
 * without the others of the same add). A zero-filled struct is empty. For
 * what takes microseconds or more, not for a per-read path. */
#define BASE_LATENCY_BUCKETS 20
/* Upper bounds in microseconds, ascending; the last is UINT64_MAX (+Inf). */
extern const uint64_t base_latency_bound_us[BASE_LATENCY_BUCKETS];
struct base_latency {
    _Atomic uint64_t sum_us, max_us;
    _Atomic uint64_t bucket[BASE_LATENCY_BUCKETS]; /* values <= bound, not cumulative */
};
struct base_latency_snapshot {
    uint64_t count, sum_us, max_us;
    uint64_t bucket[BASE_LATENCY_BUCKETS];
};
/* Records one value. Any thread (relaxed atomic adds). */
void base_latency_add(struct base_latency *l, uint64_t us);
/* Adds l's values into out (zero it first; several structs merge). */
void base_latency_read(const struct base_latency *l, struct base_latency_snapshot *out);
/* The q-quantile (0..1) in microseconds, interpolated inside its bucket as
 * Prometheus's histogram_quantile does, never above the recorded maximum;
 * 0 when empty. */
double base_latency_quantile(const struct base_latency_snapshot *s, double q);

/* ---- seeded pseudo-random numbers ------------------------------------------
 * Not for secrets (session passwords use libcrypto). splitmix64 spreads a
 * seed or steps a one-word state; xoshiro256** (Blackman & Vigna), seeded
 * through splitmix64, is the stream the simulator and the bench draw from,
 * so a seed gives the same numbers on every machine. A struct base_rng
 * belongs to one thread. */
struct base_rng {
    uint64_t s[4];
};

static inline uint64_t base_splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline void base_rng_seed(struct base_rng *g, uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        g->s[i] = base_splitmix64(&seed);
}

static inline uint64_t base_rotl64(uint64_t v, int k)
{
    return (v << k) | (v >> (64 - k));
}

static inline uint64_t base_rng_next(struct base_rng *g)
{
    uint64_t *s = g->s;
    uint64_t result = base_rotl64(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = base_rotl64(s[3], 45);
    return result;
}

/* ---- a multi-producer, single-consumer queue -------------------------------------
 * Vyukov's intrusive MPSC queue on C11 atomics (so ThreadSanitizer sees every
 * hand-off): any number of threads push, one consumer pops. Push is wait-free
 * (one exchange and one store). The queue owns nothing: a node is embedded in
 * the producer's struct, and the consumer gets it back from base_mpsc_take.
 * push's exchange is seq_cst, so a producer that pushes and then reads a
 * consumer's "sleeping" flag, against a consumer that sets the flag and then
 * checks base_mpsc_empty, cannot both miss each other (the sleep protocols of
 * the sequencer and the peer link rely on it). */
struct base_mpsc_node {
    struct base_mpsc_node *_Atomic next;
};
struct base_mpsc {
    struct base_mpsc_node *_Atomic head;
    struct base_mpsc_node *tail; /* consumer only */
    struct base_mpsc_node stub;
};
#define BASE_MPSC_BUSY ((struct base_mpsc_node *)1)

void base_mpsc_init(struct base_mpsc *q);
/* Any thread. */
void base_mpsc_push(struct base_mpsc *q, struct base_mpsc_node *n);
/* Consumer only: the oldest node, NULL when empty, or BASE_MPSC_BUSY while a
 * producer is between its exchange and its link store (the node is next:
 * retry). */
struct base_mpsc_node *base_mpsc_pop(struct base_mpsc *q);
/* Consumer only: the oldest node or NULL, waiting out a producer caught
 * mid-push (a few instructions). */
struct base_mpsc_node *base_mpsc_take(struct base_mpsc *q);
/* Consumer only: true when nothing is queued or being pushed. */
bool base_mpsc_empty(struct base_mpsc *q);

#endif
