/*
 * test_crc.c: CRC-32C against published vectors (RFC 3720 B.4) and
 * against a bitwise reference for every length and alignment.
 */
#include "storage/base/crc.h"

#include "t/tap.h"

#include <stdint.h>
#include <string.h>

/* The definition, one bit at a time: slow but obviously right. */
static uint32_t
bitwise_crc(const unsigned char *s, size_t n)
{
    uint32_t c = 0xffffffffu;

    for (size_t i = 0; i < n; i++) {
        c ^= s[i];
        for (int k = 0; k < 8; k++) {
            c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        }
    }
    return ~c;
}

static void
test_vectors(void)
{
    unsigned char buf[32];

    is_int(crc_32c(0, "123456789", 9), 0xE3069283u, "check value");
    is_int(crc_32c(0, "", 0), 0, "empty input");
    memset(buf, 0, sizeof(buf));
    is_int(crc_32c(0, buf, 32), 0x8A9136AAu, "32 zero bytes");
    memset(buf, 0xff, sizeof(buf));
    is_int(crc_32c(0, buf, 32), 0x62A8AB43u, "32 0xff bytes");
    for (int i = 0; i < 32; i++) {
        buf[i] = (unsigned char)i;
    }
    is_int(crc_32c(0, buf, 32), 0x46DD794Eu, "32 ascending bytes");
    for (int i = 0; i < 32; i++) {
        buf[i] = (unsigned char)(31 - i);
    }
    is_int(crc_32c(0, buf, 32), 0x113FDB5Cu, "32 descending bytes");
}

static void
test_lengths_and_alignment(void)
{
    unsigned char buf[200];
    int bad = 0;

    for (size_t i = 0; i < sizeof(buf); i++) {
        buf[i] = (unsigned char)(i * 131 + 7);
    }
    for (size_t off = 0; off < 8; off++) {
        for (size_t n = 0; n + off <= sizeof(buf); n++) {
            uint32_t want = bitwise_crc(buf + off, n);

            bad += crc_32c(0, buf + off, n) != want;
            bad += crc_32c_portable(0, buf + off, n) != want;
        }
    }
    is_int(bad, 0, "every length and offset matches the bitwise crc, "
           "with the instruction and with the tables");
}

static void
test_chaining(void)
{
    const char *s = "The quick brown fox jumps over the lazy dog";
    size_t n = strlen(s);
    uint32_t whole = crc_32c(0, s, n);
    int bad = 0;

    for (size_t cut = 0; cut <= n; cut++) {
        if (crc_32c(crc_32c(0, s, cut), s + cut, n - cut) != whole) {
            bad++;
        }
    }
    is_int(bad, 0, "crc of pieces equals crc of the whole");
    ok(crc_32c(0, "a", 1) != crc_32c(0, "b", 1), "one byte changes it");
}

int
main(void)
{
    test_vectors();
    test_lengths_and_alignment();
    test_chaining();
    return done_testing();
}
