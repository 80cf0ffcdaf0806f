/*
 * fuzz_udp.c: a request datagram: its frame, then what it carries
 * through the binary or the text parser (the first byte decides, as for
 * a -B auto connection), and the reply frames for a reply of its size.
 */
#include "fuzz/fuzz.h"

#include "proto/binary.h"
#include "proto/udp.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *buf = (const char *)data;
    struct udp_frame f;
    int at = udp_frame_parse(&f, buf, size);
    size_t reply = size * 97;   /* some reply longer than the request */
    uint16_t total = udp_datagrams(reply);
    char frame[UDP_HEADER_LEN];

    FUZZ_CHECK((size_t)total * UDP_PAYLOAD_MAX >= reply || total == 65535);
    FUZZ_CHECK(reply == 0 ||
               (size_t)(total - 1) * UDP_PAYLOAD_MAX < reply);
    if (at < 0) {
        return 0;
    }
    FUZZ_CHECK(at == UDP_HEADER_LEN && size > (size_t)at);
    FUZZ_CHECK(f.total == 1);
    udp_frame_compose(frame, f.id, 0, total);
    if ((uint8_t)buf[at] == BIN_MAGIC_REQ) {
        fuzz_bin_stream(buf + at, size - (size_t)at);
    } else {
        fuzz_text_stream(buf + at, size - (size_t)at);
    }
    return 0;
}
