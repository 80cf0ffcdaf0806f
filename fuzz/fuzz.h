/*
 * fuzz.h: what the libFuzzer harnesses share.
 *
 * Each harness feeds its bytes to a proto/ parser the way the daemon
 * does, request after request, and checks what the parser promises (a
 * length within the input, tokens inside the buffer, keys within
 * memcached's limit) with FUZZ_CHECK, which aborts so libFuzzer keeps the
 * input.  Built only with ./configure --enable-fuzz (clang).
 */
#ifndef MCPM_FUZZ_H
#define MCPM_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define FUZZ_CHECK(cond)                                                   \
    do {                                                                   \
        if (!(cond)) {                                                     \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__,         \
                    __LINE__, #cond);                                      \
            abort();                                                       \
        }                                                                  \
    } while (0)

/* p[0..len) lies inside buf[0..n). */
static inline int
fuzz_inside(const char *buf, size_t n, const char *p, size_t len)
{
    return len == 0 || (p >= buf && p + len <= buf + n);
}

/* The offset after skipping n bytes from off, stopping at size. */
static inline size_t
fuzz_skip(size_t off, size_t size, size_t n)
{
    return n < size - off ? off + n : size;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* streams.c: buf[0..size) as a text or a binary connection's bytes. */
void fuzz_text_stream(const char *buf, size_t size);
void fuzz_bin_stream(const char *buf, size_t size);

#endif
