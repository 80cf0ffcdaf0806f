/*
 * fuzz_text.c: the classic text protocol's parser, as a connection's
 * stream: line after line, each storage command's data block skipped.
 */
#include "fuzz/fuzz.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_text_stream((const char *)data, size);
    return 0;
}
