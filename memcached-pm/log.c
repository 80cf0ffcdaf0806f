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
