/*
 * conn_handover.h: a connection leaves for the node's successor, and a
 * connection taken over takes up where it was (conn_handover.c).
 */
#ifndef MCPM_CONN_HANDOVER_H
#define MCPM_CONN_HANDOVER_H

#include <stdbool.h>
#include <stddef.h>

#include "memcached-pm/conn/conn.h"
#include "memcached-pm/conn/handover.h"

/* May c move to another process?  Not a TLS session (its keys live
 * here), nor one half through a SASL exchange. */
bool conn_can_move(const struct conn *c);

/* c is at a request boundary, its replies all written: let go of its
 * socket into its list's handover records, with what it has read and not
 * parsed, then `more` (bytes its event engine received after), and free
 * it.  A UDP socket goes as it is.  Out of memory, it is closed. */
void conn_leave(struct conn **c, const char *more, size_t nmore);

/* A connection made for a socket taken over (conn_new()) takes on the
 * state it had: its protocol, authentication, idle time, and the input
 * read and not yet parsed, which is in its read buffer after.  0, or -1
 * when out of memory (the caller closes it). */
int conn_adopt(struct conn *c, const struct handover_conn *h);

#endif
