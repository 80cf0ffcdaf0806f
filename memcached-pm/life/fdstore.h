/*
 * fdstore.h: what a node keeps in systemd's file descriptor store
 * (sdaemon.h) across a restart, and what its next start takes back
 * (fdstore.c): its listeners (where no .socket unit holds them), so that
 * even a crash leaves its port taking connections; and at a stop the
 * connections, each at a request boundary, their state file and the
 * DRAM index, as far as the store has room.
 *
 * systemd compares each descriptor it is sent with every one in the
 * store, and keeps at most FileDescriptorStoreMax= of them (which it
 * says in $FDSTORE from version 254; a unit for an older one sets that
 * itself): connections past it are closed here, at a request boundary,
 * counted and said.  A takeover inside the unit (SIGUSR2, respawn.h)
 * carries every connection without the store.
 */
#ifndef MCPM_FDSTORE_H
#define MCPM_FDSTORE_H

#include <stdbool.h>
#include <stddef.h>

#include "memcached-pm/conn/handover.h"
#include "memcached-pm/net/given.h"

/* At start, what systemd passed (LISTEN_FDS): the last stop's
 * connections into *conns (records and sockets), its index into
 * settings.cache.image_fd, and every listener to keep(fd, origin)
 * (GIVEN_UNIT: a .socket unit's, GIVEN_STORE: the store's).  The store
 * then lets go of the connections and the index taken. */
void fdstore_take(struct handover *conns,
                  int (*keep)(int fd, enum given_origin origin));

/* While serving: the listening and UDP sockets fds[0..n) into the
 * store, but those of a .socket unit (unit(fd)). */
void fdstore_keep_listeners(const int *fds, size_t n, bool (*unit)(int fd));

/* At a stop: h's connections (all at a request boundary), its UDP
 * sockets and its state file into the store, room kept for the index to
 * come.  Connections past the store's room are closed, counted in
 * h->closed (the state file carries the count to the next start) and
 * said once. */
void fdstore_put(struct handover *h);

/* The index image fd (closed here) for the next start. */
void fdstore_put_index(int fd);

#endif
