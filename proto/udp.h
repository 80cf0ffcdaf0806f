/*
 * udp.h: memcached's UDP frame, parsed and composed.
 *
 * Pure: bytes in, a struct out; libc only.
 *
 * Every datagram, request or reply, starts with 8 bytes, four big-endian
 * 16-bit fields: the request id (a reply echoes it), the sequence number
 * of the datagram within its message (0..total-1), the total datagrams of
 * the message, and 0.  What follows is what TCP would carry: text, meta or
 * binary.  A request must fit one datagram; a reply message is cut into
 * datagrams of at most UDP_DATAGRAM_MAX bytes, header included.
 */
#ifndef MCPM_PROTO_UDP_H
#define MCPM_PROTO_UDP_H

#include <stddef.h>
#include <stdint.h>

#define UDP_HEADER_LEN   8
#define UDP_DATAGRAM_MAX 1400    /* a reply datagram, header included */
#define UDP_PAYLOAD_MAX  (UDP_DATAGRAM_MAX - UDP_HEADER_LEN)

struct udp_frame {
    uint16_t id;
    uint16_t seq;
    uint16_t total;
    uint16_t reserved;
};

/*
 * Parse a request datagram's frame: UDP_HEADER_LEN (where its request
 * starts), or -1 for a datagram memcached drops without a reply: one of
 * 8 bytes or fewer (a frame and nothing to run), or one of a request sent
 * in several datagrams (total not 1).  The sequence number and the
 * reserved field are not looked at, as memcached does not.
 */
int udp_frame_parse(struct udp_frame *f, const char *buf, size_t len);

/* Write a reply datagram's frame into out. */
void udp_frame_compose(char *out, uint16_t id, uint16_t seq, uint16_t total);

/* The datagrams a reply message of n bytes is cut into: 0 for an empty
 * message (sent as a lone frame, as memcached does), at most 65535. */
uint16_t udp_datagrams(size_t n);

#endif
