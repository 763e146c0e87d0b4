/*
 * crc32c.c — CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the
 * checksum of snapshot files and txn log records. Slicing by 8: about
 * 1.5 GB/s in software. The tables are built once (pthread_once) and only
 * read afterwards, so any thread may call base_crc32c.
 */
#include <pthread.h>

#include "base/base.h"

#define CRC32C_POLY 0x82F63B78u /* reflected */

static uint32_t crc_tab[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_tables_build(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t v = i;
        for (int b = 0; b < 8; b++)
            v = (v >> 1) ^ (CRC32C_POLY & (0u - (v & 1u)));
        crc_tab[0][i] = v;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int k = 1; k < 8; k++)
            crc_tab[k][i] = (crc_tab[k - 1][i] >> 8) ^ crc_tab[0][crc_tab[k - 1][i] & 0xFF];
}

uint32_t base_crc32c(uint32_t crc, const void *buf, size_t n)
{
    int rc = pthread_once(&crc_once, crc_tables_build);
    BASE_ASSERT(rc == 0);
    const uint8_t *p = buf;
    crc = ~crc;
    while (n >= 8) {
        uint32_t lo = crc ^ base_get_le32(p);
        crc = crc_tab[7][lo & 0xFF] ^ crc_tab[6][(lo >> 8) & 0xFF] ^ crc_tab[5][(lo >> 16) & 0xFF] ^
              crc_tab[4][lo >> 24] ^ crc_tab[3][p[4]] ^ crc_tab[2][p[5]] ^ crc_tab[1][p[6]] ^
              crc_tab[0][p[7]];
        p += 8;
        n -= 8;
    }
    while (n-- > 0)
        crc = (crc >> 8) ^ crc_tab[0][(crc ^ *p++) & 0xFF];
    return ~crc;
}

/* a * b modulo the CRC-32C polynomial, bit-reflected (x^0 is the top bit),
 * as zlib's multmodp. */
static uint32_t crc_mulmod(uint32_t a, uint32_t b)
{
    uint32_t p = 0;
    for (uint32_t m = 1u << 31; m != 0; m >>= 1) {
        if (a & m)
            p ^= b;
        b = b & 1 ? (b >> 1) ^ CRC32C_POLY : b >> 1;
    }
    return p;
}

/* A zero byte multiplies the (inverted) register by x^8, so n of them
 * multiply it by x^(8n) mod P (zlib's crc32_combine does the same). */
uint32_t base_crc32c_zeros(uint32_t crc, uint64_t n)
{
    uint32_t x8n = 1u << 31, x8pow = 1u << 23; /* x^0; x^(8 * 2^i) */
    for (; n != 0; n >>= 1) {
        if (n & 1)
            x8n = crc_mulmod(x8n, x8pow);
        x8pow = crc_mulmod(x8pow, x8pow);
    }
    return ~crc_mulmod(x8n, ~crc);
}
