/*
 * machine.h: the state machine that drives a connection (conn.h) from
 * its socket's events.
 *
 * Its loop:
 *
 *      +--------+  line   +---------+  storage cmd   +-------+
 *   -->|  READ  |-------->|  PARSE  |--------------->| NREAD |--+
 *      +--------+         +---------+                +-------+  |
 *          ^                |  ^   |  error with data             |
 *          | no full line,  |  |   +--------------->+---------+  |
 *          | nothing queued |  |                    | SWALLOW |  |
 *          |                v  +--------------------+---------+  |
 *      +--------+  replies queued, or the -R budget spent         |
 *      | WRITE  |<-------------------------------------------------+
 *      +--------+
 *
 * PARSE handles every complete request in the read buffer, queueing each
 * reply as iovecs: small lines are copied into an output arena, values are
 * pointed at in item memory while the connection holds a reference.  WRITE
 * sends the queue with sendmsg() and only then gives the references back;
 * under group commit it first waits for the pass's sync
 * (machine_end_pass()).
 *
 * A connection is driven by its worker's thread only: no lock.
 */
#ifndef MCPM_MACHINE_H
#define MCPM_MACHINE_H

#include "memcached-pm/conn/conn.h"

/* Start reading a new connection (conn_new()) on its worker's base. */
void machine_start(struct conn *c);

/* Close a connection whatever its state: its look-ahead is dropped, then
 * it is freed (conn_free()).  *c is NULL after. */
void machine_close(struct conn **c);

/* Start a connection taken over (conn_adopt()): as machine_start(), and
 * the input it brought is parsed at once. */
void machine_adopt(struct conn *c);

/*
 * The node hands over (c->list->leaving): a connection waiting for its
 * next request leaves now (conn_leave()), one in a request once it is
 * done and its replies are written (a TLS session then closes), a UDP
 * socket at once.
 */
void machine_leave(struct conn *c);

/*
 * A worker's thread joins with its connections' list and a waker before
 * it serves, and calls end_pass after each pass of its event loop: the
 * connections that waited for a request a whole pass give their buffers
 * back (conn_rest()).
 *
 * Group commit (storage/cache/cache_durable.h): a worker joins with a
 * waker (where the medium needs none, replies go out at once).  A connection whose replies acknowledge changes not yet durable
 * (its own, a noreply one included) waits, parked, in WRITE.  After each
 * pass of its event loop the worker calls end_pass: the parked
 * connections whose changes are durable by now send their replies and go
 * on (parking again if they made more changes), and the pass's changes
 * go to the flusher thread, whose waker wakes the loop once they are
 * durable: the worker serves other connections meanwhile.
 */
void machine_join(struct conn_list *list, void (*wake)(void *), void *arg);
void machine_end_pass(void);

/*
 * A datagram (UDP): run the requests in c's read buffer, none read from
 * its socket, until the buffer is used up or a request is cut short (a
 * line, a value or a swallow that does not end in it).  Each request's
 * reply ends a message (conn_out_end_message()); the reply of a request
 * cut short is left after the last message, for the caller to drop, with
 * the item it was reading.  Replies stay queued for the caller to send.
 * Returns true when a request asked to close (quit).
 */
bool machine_run_datagram(struct conn *c);

#endif
