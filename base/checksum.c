/*
 * checksum.c — the Internet checksum (RFC 1071) of IPv4, ICMP and UDP,
 * for the DPDK read path and the clients that build its frames.
 */
#include "base/base.h"

#include <string.h>

/* Adds w to acc with the end-around carry of one's-complement arithmetic. */
static inline uint64_t add_carry(uint64_t acc, uint64_t w)
{
    acc += w;
    return acc + (acc < w);
}

/* Both sums below take eight bytes at a time, read as little-endian words:
 * a one's-complement sum of byte-swapped 16-bit words is the byte-swapped
 * sum (RFC 1071, "byte order independence"), so the folded result is
 * swapped once, here, and added to the caller's big-endian partial sum. A
 * lone last byte is the low byte of a little-endian word, which the swap
 * makes the high byte it is. */
static uint32_t fold_into(uint32_t sum, uint64_t acc)
{
    acc = (acc & 0xffffffff) + (acc >> 32);
    acc = (acc & 0xffffffff) + (acc >> 32);
    acc = (acc & 0xffff) + (acc >> 16);
    acc = (acc & 0xffff) + (acc >> 16);
    uint32_t swapped = (uint32_t)((acc & 0xff) << 8 | acc >> 8);
    uint64_t total = (uint64_t)sum + swapped;
    return (uint32_t)((total & 0xffffffff) + (total >> 32));
}

/* The last n < 8 bytes at b into acc. */
static uint64_t add_tail(uint64_t acc, const uint8_t *b, size_t n)
{
    if (n >= 4) {
        acc = add_carry(acc, base_get_le32(b));
        b += 4;
        n -= 4;
    }
    if (n >= 2) {
        acc = add_carry(acc, (uint64_t)b[0] | (uint64_t)b[1] << 8);
        b += 2;
        n -= 2;
    }
    if (n)
        acc = add_carry(acc, b[0]);
    return acc;
}

uint32_t base_csum_add(uint32_t sum, const void *p, size_t n)
{
    const uint8_t *b = p;
    uint64_t acc = 0;
    for (; n >= 8; b += 8, n -= 8)
        acc = add_carry(acc, base_get_le64(b));
    return fold_into(sum, add_tail(acc, b, n));
}

uint32_t base_csum_copy(uint32_t sum, void *dst, const void *src, size_t n)
{
    const uint8_t *s = src;
    uint8_t *d = dst;
    uint64_t acc = 0;
    for (; n >= 8; s += 8, d += 8, n -= 8) {
        uint64_t w = base_get_le64(s);
        base_put_le64(d, w);
        acc = add_carry(acc, w);
    }
    memcpy(d, s, n);
    return fold_into(sum, add_tail(acc, s, n));
}

uint16_t base_csum_fold(uint32_t sum)
{
    while (sum >> 16)
        sum = (sum & 0xffff) + (sum >> 16);
    return (uint16_t)~sum;
}
