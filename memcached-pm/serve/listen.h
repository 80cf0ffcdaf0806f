/*
 * listen.h: the listening sockets (-l and -p, or -s) and the accepting of
 * connections on them, on the main thread's event loop.
 *
 * A listener is either opened here or given to the process at its start:
 * by systemd's socket activation (a .socket unit), out of systemd's file
 * descriptor store, or by the node this one takes over from (takeover.h).
 * A given socket is matched to the options by the address it is bound
 * to: it serves the -l entry (and its TLS prefix) whose address it has,
 * and what the options name that no given socket has is opened as
 * before.  A socket from a .socket unit that no option names is a
 * mistake in the units and refused; one from the fd store or a takeover
 * is only the past's (the options changed) and closed.
 *
 * Main thread only.
 */
#ifndef MCPM_LISTEN_H
#define MCPM_LISTEN_H

#include <stdbool.h>
#include <stddef.h>
#include <event2/event.h>

#include "memcached-pm/net/given.h"

/*
 * Listen on what -l, -p and -s ask for, taking the given sockets that
 * match first (marking them used), and accept on base once
 * listen_start() says so.  0, or memcached's exit status after its
 * message (a port that cannot be had).
 */
int listen_open(struct event_base *base, struct given *g, size_t n);

/* Stop taking connections (they wait in the backlog), or start. */
void listen_stop(void);
void listen_start(void);

/* Copy the listening sockets' fds into out (at most max): for a
 * handover, or for systemd's fd store.  The count. */
size_t listen_fds(int *out, size_t max);

/* Close the listening sockets; a graceful stop says so at -vv.  unlink:
 * remove -s's socket file (not after a handover: the successor serves
 * it). */
void listen_close(bool graceful, bool unlink_path);

#endif
