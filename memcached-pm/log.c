/*
 * log.c: the one place that writes diagnostics.
 *
 * Locking: none of its own; one fprintf per message, so that lines from
 * different threads do not interleave (stdio locks the stream).
 */
#include "config.h"

#include "memcached-pm/log.h"

#include <stdarg.h>
#include <stdio.h>

void
log_write(const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
    va_end(ap);
    if (n < 0) {
        return;
    }
    if ((size_t)n > sizeof(line) - 2) {
        n = sizeof(line) - 2;
    }
    line[n++] = '\n';
    fwrite(line, 1, (size_t)n, stderr);
}

void
log_bin_header(int fd, char dir, const char *title, const unsigned char *h)
{
    char out[512];
    size_t n = (size_t)snprintf(out, sizeof(out), "%c%d %s", dir, fd, title);

    for (unsigned i = 0; i < 24 && n < sizeof(out) - 32; i++) {
        if (i % 4 == 0) {
            /* memcached's layout: a request's bytes indented one more */
            n += (size_t)snprintf(out + n, sizeof(out) - n, "\n%c%d %s", dir,
                                  fd, dir == '<' ? "  " : " ");
        }
        n += (size_t)snprintf(out + n, sizeof(out) - n, " 0x%02x", h[i]);
    }
    log_write("%s", out);
}
