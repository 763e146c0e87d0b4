/*
 * fuzz.h — what every libFuzzer target in tests/fuzz shares: exact-size
 * copies of sub-slices of the input, so that ASan catches a read one byte
 * past a field, not only past the frame, and a snapshot writer into memory.
 * Properties are checked with BASE_ASSERT (base/base.h), which stays on
 * whatever NDEBUG says: a failed property must crash, so the fuzzer saves
 * the input.
 * Targets run single-threaded, one input at a time (libFuzzer's default).
 */
#ifndef LARCH_FUZZ_H
#define LARCH_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A malloc'd copy of exactly n bytes (one byte allocated for n == 0, never
 * read). The caller frees. Allocation failure is not a finding: abort. */
static inline uint8_t *fuzz_dup(const void *p, size_t n)
{
    uint8_t *c = malloc(n > 0 ? n : 1);
    BASE_ASSERT(c != NULL);
    if (n > 0)
        memcpy(c, p, n);
    return c;
}

/* A writer of the tree_snap_out_fn shape into arg, a struct base_buf (the
 * caller frees it with base_buf_free), for snapshots written to memory. */
static inline int fuzz_mem_out(void *arg, const void *bytes, size_t len)
{
    int rc = base_buf_append(arg, bytes, len);
    BASE_ASSERT(rc == 0); /* out of memory is not a finding */
    return 0;
}

#endif /* LARCH_FUZZ_H */
