/*
 * udp.c: the UDP frame (udp.h).
 */
#include "proto/udp.h"

static uint16_t
get16(const char *p)
{
    const unsigned char *u = (const unsigned char *)p;

    return (uint16_t)(u[0] << 8 | u[1]);
}

static void
put16(char *p, uint16_t v)
{
    p[0] = (char)(v >> 8);
    p[1] = (char)v;
}

int
udp_frame_parse(struct udp_frame *f, const char *buf, size_t len)
{
    if (len <= UDP_HEADER_LEN) {
        return -1;
    }
    f->id = get16(buf);
    f->seq = get16(buf + 2);
    f->total = get16(buf + 4);
    f->reserved = get16(buf + 6);
    return f->total == 1 ? UDP_HEADER_LEN : -1;
}

void
udp_frame_compose(char *out, uint16_t id, uint16_t seq, uint16_t total)
{
    put16(out, id);
    put16(out + 2, seq);
    put16(out + 4, total);
    put16(out + 6, 0);
}

uint16_t
udp_datagrams(size_t n)
{
    size_t d = (n + UDP_PAYLOAD_MAX - 1) / UDP_PAYLOAD_MAX;

    return d > UINT16_MAX ? UINT16_MAX : (uint16_t)d;
}
