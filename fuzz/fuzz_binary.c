/*
 * fuzz_binary.c: the binary protocol's parser, as a connection's stream:
 * packet after packet, each value skipped, a refused packet's body
 * swallowed or the stream closed as the parser says.
 */
#include "fuzz/fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_bin_stream((const char *)data, size);
    return 0;
}
