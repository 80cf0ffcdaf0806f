/*
 * log.h: messages to stderr, filtered by -v.
 *
 * log_error() always prints; log_info() with -v; log_debug() with -vv (the
 * client commands, as memcached prints them).  A message is one line, whole
 * on stderr.  While the workers run (log_start() to log_stop()) lines pass
 * through a ring that a thread of its own writes out, so no worker waits
 * on stderr; a full ring drops lines and says how many.
 */
#ifndef MCPM_LOG_H
#define MCPM_LOG_H

#include "memcached-pm/base/settings.h"

void log_write(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Start and stop the writer thread (log_stop() writes out what is left).
 * log_start(): 0, or -1 (messages then go straight to stderr). */
int log_start(void);
void log_stop(void);

/* -vv: a binary packet's 24-byte header, as memcached dumps it: the
 * title after "<fd " (a request, dir '<') or ">fd " (a reply), then the
 * bytes four to a line. */
void log_bin_header(int fd, char dir, const char *title,
                    const unsigned char *h);

#define log_error(...) log_write(__VA_ARGS__)
#define log_info(...) do {                                                  \
    if (settings.verbose > 0) { log_write(__VA_ARGS__); }                   \
} while (0)
#define log_debug(...) do {                                                 \
    if (settings.verbose > 1) { log_write(__VA_ARGS__); }                   \
} while (0)

#endif
