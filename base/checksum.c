/*
 * checksum.c — the Internet checksum (RFC 1071) of IPv4, ICMP and UDP,
 * for the DPDK read path and the clients that build its frames.
 */
#include "base/base.h"

/* Four bytes at a time: a*2^16 + b is a + b modulo 0xffff, which is all a
 * one's-complement sum keeps. */
uint32_t base_csum_add(uint32_t sum, const void *p, size_t n)
{
    const uint8_t *b = p;
    uint64_t acc = sum;
    for (; n >= 4; b += 4, n -= 4)
        acc += base_get_be32(b);
    if (n >= 2) {
        acc += base_get_be16(b);
        b += 2;
        n -= 2;
    }
    if (n)
        acc += (uint32_t)b[0] << 8;
    acc = (acc & 0xffffffff) + (acc >> 32);
    acc = (acc & 0xffffffff) + (acc >> 32);
    return (uint32_t)acc;
}

uint16_t base_csum_fold(uint32_t sum)
{
    while (sum >> 16)
        sum = (sum & 0xffff) + (sum >> 16);
    return (uint16_t)~sum;
}
