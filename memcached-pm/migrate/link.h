/*
 * link.h: a connection to another memcached node, as a client: lines and
 * replies in, requests out, without blocking (warm.c's three).
 *
 * Bytes read wait in `in` until taken; requests queue in `out` until the
 * socket takes them.  Owned by one thread.
 */
#ifndef MCPM_LINK_H
#define MCPM_LINK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#define LINK_KEY_MAX 250

/* One connection to the node: what was read and not yet taken, and what
 * is to be written. */
struct link {
    int    fd;
    char  *in;
    size_t in_off, in_len, in_cap;
    char  *out;
    size_t out_off, out_len, out_cap;
    bool   eof;
};

/* Connect to "<host>:<port>" ("[v6]:<port>") or a unix socket's path;
 * the descriptor, non-blocking, or -1. */
int   link_dial(const char *where);

/* Read what the socket has: false on an error (eof set at the end). */
bool  link_read(struct link *l);
/* Write what is queued, as far as the socket takes it: false on an
 * error. */
bool  link_write(struct link *l);
bool  link_queue(struct link *l, const char *s, size_t n);

/* The next whole line, without its "\r\n" or "\n", copied into dst
 * (cut to cap - 1 bytes) and NUL-terminated; NULL when none is whole.
 * *span: the bytes it takes in the buffer; link_line() takes them. */
char *link_peek(const struct link *l, char *dst, size_t cap, size_t *span);
char *link_line(struct link *l, char *dst, size_t cap);
/* Up to five seconds for one line, writing what is queued (set-up
 * only): NULL at a timeout, an error, an end, or *stop. */
char *link_wait_line(struct link *l, char *dst, size_t cap,
                     atomic_bool *stop);
void  link_close(struct link *l);

/* memcached's uriencode() undone (watch and metadump keys): the key's
 * bytes into out (LINK_KEY_MAX), their count, or -1. */
int   link_uri_key(const char *s, size_t n, char *out);
/* The value of `name` among a line's space-separated words (name=...,
 * or a meta flag's letter), its length in *n; NULL when absent. */
const char *link_word(const char *line, const char *name, size_t *n);

#endif
