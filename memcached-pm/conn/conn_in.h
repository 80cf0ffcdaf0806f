/*
 * conn_in.h: a connection's input (conn_in.c): reads into its read
 * buffer, borrowed from its worker while it reads (conn_idle(), conn.h),
 * and a value read into a new item.
 */
#ifndef MCPM_CONN_IN_H
#define MCPM_CONN_IN_H

#include <stddef.h>
#include <sys/types.h>

#include "memcached-pm/conn/conn.h"

/* Read what the socket has into the read buffer, making room first (the
 * buffer may move: drop the look-ahead before).  >0 bytes, 0: would
 * block, -1: closed, an error, or a line longer than 2 MB. */
ssize_t conn_read(struct conn *c);

/* Copy buffered bytes into c->nitem's value (NREAD), then read the rest
 * of a large value straight into item memory: >0 bytes read, 0: would
 * block, -1: closed or an error.  They read conn_value_len() bytes. */
void    conn_nread_buffered(struct conn *c);
ssize_t conn_nread_direct(struct conn *c);

/* Put n bytes at the start of an empty read buffer, making room.  0 or
 * -1. */
int conn_fill_input(struct conn *c, const char *p, size_t n);

#endif
