/*
 * test_udp.c: the UDP frame (proto/udp.h): what memcached runs, what it
 * drops, and how a reply is cut.
 */
#include "proto/udp.h"
#include "t/tap.h"

#include <string.h>

static void
test_parse(void)
{
    struct udp_frame f;
    char d[16] = { 0x12, 0x34, 0x00, 0x07, 0x00, 0x01, 0x00, 0x09, 'g' };

    is_int(udp_frame_parse(&f, d, 9), UDP_HEADER_LEN,
           "a frame and one byte: run from byte 8");
    ok(f.id == 0x1234 && f.seq == 7 && f.total == 1 && f.reserved == 9,
       "... its fields, big-endian");
    is_int(udp_frame_parse(&f, d, 8), -1, "a lone frame: dropped");
    is_int(udp_frame_parse(&f, d, 3), -1, "shorter than a frame: dropped");
    is_int(udp_frame_parse(&f, d, 0), -1, "empty: dropped");
    d[5] = 2;
    is_int(udp_frame_parse(&f, d, 9), -1,
           "a request in two datagrams: dropped, as memcached");
    d[4] = 1;
    d[5] = 1;
    is_int(udp_frame_parse(&f, d, 9), -1, "total 257: dropped");
    d[4] = 0;
    d[5] = 0;
    is_int(udp_frame_parse(&f, d, 9), -1, "total 0: dropped");
}

static void
test_compose(void)
{
    char out[UDP_HEADER_LEN];
    static const char want[UDP_HEADER_LEN] = { 0x12, 0x34, 0x00, 0x02,
                                               0x01, 0x00, 0x00, 0x00 };

    udp_frame_compose(out, 0x1234, 2, 256);
    ok(memcmp(out, want, sizeof(want)) == 0, "reply frame bytes");
}

static void
test_datagrams(void)
{
    is_int(UDP_PAYLOAD_MAX, 1392, "1392 payload bytes a datagram");
    is_int(udp_datagrams(0), 0, "empty message: a lone frame, total 0");
    is_int(udp_datagrams(1), 1, "one byte: one datagram");
    is_int(udp_datagrams(1392), 1, "1392 bytes: one datagram");
    is_int(udp_datagrams(1393), 2, "1393 bytes: two");
    is_int(udp_datagrams(3025), 3, "a 3000-byte value's reply: three");
    is_int(udp_datagrams((size_t)1392 * 70000), 65535, "capped at 65535");
}

int
main(void)
{
    test_parse();
    test_compose();
    test_datagrams();
    return done_testing();
}
