/*
 * fuzz.h — what every libFuzzer target in tests/fuzz shares: a check that
 * stays on whatever NDEBUG says (a failed property must crash, so the
 * fuzzer saves the input), and exact-size copies of sub-slices of the input,
 * so that ASan catches a read one byte past a field, not only past the frame.
 * Targets run single-threaded, one input at a time (libFuzzer's default).
 */
#ifndef LARCH_FUZZ_H
#define LARCH_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_CHECK(cond)                                                                     \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            fprintf(stderr, "%s:%d: fuzz property failed: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                                         \
        }                                                                                    \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A malloc'd copy of exactly n bytes (one byte allocated for n == 0, never
 * read). The caller frees. Allocation failure is not a finding: abort. */
static inline uint8_t *fuzz_dup(const void *p, size_t n)
{
    uint8_t *c = malloc(n > 0 ? n : 1);
    FUZZ_CHECK(c != NULL);
    if (n > 0)
        memcpy(c, p, n);
    return c;
}

/* A growing byte buffer with a writer of the tree_snap_out_fn shape, for
 * snapshots written to memory. The caller frees p. */
struct fuzz_mem {
    uint8_t *p;
    size_t len;
};

static inline int fuzz_mem_out(void *arg, const void *bytes, size_t len)
{
    struct fuzz_mem *m = arg;
    m->p = realloc(m->p, m->len + len);
    FUZZ_CHECK(m->p != NULL);
    memcpy(m->p + m->len, bytes, len);
    m->len += len;
    return 0;
}

#endif /* LARCH_FUZZ_H */
