/*
 * crc.c: CRC-32C, reflected polynomial 0x82F63B78, slice-by-8.
 *
 * Slice-by-8 reads eight bytes per step through eight 256-entry tables:
 * table[0] is the classic byte-at-a-time table, table[k][b] is the CRC of
 * byte b followed by k zero bytes.  Item values are checksummed on every
 * PMEM store, so the 8x speedup over the plain table is worth 8 KiB.
 */
#include "storage/base/crc.h"

#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#define CRC_POLY 0x82F63B78u

static uint32_t crc_table[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void
crc_build(void)
{
    for (unsigned b = 0; b < 256; b++) {
        uint32_t c = b;

        for (int i = 0; i < 8; i++) {
            c = (c & 1) ? (c >> 1) ^ CRC_POLY : c >> 1;
        }
        crc_table[0][b] = c;
    }
    for (unsigned b = 0; b < 256; b++) {
        for (int k = 1; k < 8; k++) {
            uint32_t c = crc_table[k - 1][b];

            crc_table[k][b] = (c >> 8) ^ crc_table[0][c & 0xff];
        }
    }
}

static uint32_t
crc_bytes(uint32_t c, const unsigned char *s, size_t n)
{
    while (n-- > 0) {
        c = (c >> 8) ^ crc_table[0][(c ^ *s++) & 0xff];
    }
    return c;
}

/* Eight bytes at a time; the loads go through memcpy so that any
 * alignment is fine.  Little-endian byte order is assumed by the table
 * indexing below, as on every machine this server targets. */
static uint32_t
crc_words(uint32_t c, const unsigned char *s, size_t nwords)
{
    for (size_t i = 0; i < nwords; i++, s += 8) {
        uint32_t lo, hi;

        memcpy(&lo, s, 4);
        memcpy(&hi, s + 4, 4);
        lo ^= c;
        c = crc_table[7][lo & 0xff] ^ crc_table[6][(lo >> 8) & 0xff] ^
            crc_table[5][(lo >> 16) & 0xff] ^ crc_table[4][lo >> 24] ^
            crc_table[3][hi & 0xff] ^ crc_table[2][(hi >> 8) & 0xff] ^
            crc_table[1][(hi >> 16) & 0xff] ^ crc_table[0][hi >> 24];
    }
    return c;
}

/* SSE 4.2's crc32 instruction computes this same CRC-32C, eight bytes an
 * instruction: used when the CPU has it (recovery checks every item). */
#if defined(__x86_64__)
#include <nmmintrin.h>

__attribute__((target("sse4.2")))
static uint32_t
crc_hw(uint32_t c, const unsigned char *s, size_t n)
{
    for (; n >= 8; n -= 8, s += 8) {
        uint64_t w;

        memcpy(&w, s, sizeof(w));
        c = (uint32_t)_mm_crc32_u64(c, w);
    }
    for (; n > 0; n--) {
        c = _mm_crc32_u8(c, *s++);
    }
    return c;
}

static bool
crc_hw_ok(void)
{
    return __builtin_cpu_supports("sse4.2");
}
#else
static uint32_t
crc_hw(uint32_t c, const unsigned char *s, size_t n)
{
    (void)s;
    (void)n;
    return c;
}

static bool
crc_hw_ok(void)
{
    return false;
}
#endif

/* Set once by crc_init(); read without pthread_once() on the hot path
 * once it says the tables are built. */
static bool use_hw;
static bool crc_ready;

static void
crc_init(void)
{
    crc_build();
    use_hw = crc_hw_ok();
    __atomic_store_n(&crc_ready, true, __ATOMIC_RELEASE);
}

static inline void
crc_setup(void)
{
    if (!__atomic_load_n(&crc_ready, __ATOMIC_ACQUIRE)) {
        pthread_once(&crc_once, crc_init);
    }
}

uint32_t
crc_32c_portable(uint32_t crc, const void *p, size_t n)
{
    const unsigned char *s = p;
    uint32_t c = ~crc;

    crc_setup();
    c = crc_words(c, s, n / 8);
    c = crc_bytes(c, s + (n & ~(size_t)7), n & 7);
    return ~c;
}

uint32_t
crc_32c(uint32_t crc, const void *p, size_t n)
{
    crc_setup();
    if (use_hw) {
        return ~crc_hw(~crc, p, n);
    }
    return crc_32c_portable(crc, p, n);
}
