/*
 * udp.h: memcached's UDP transport (-U <port>, off by default).
 *
 * Each worker has its own socket on the UDP port (SO_REUSEPORT, so that
 * no datagram wakes them all), and the kernel hands each datagram to one
 * of them at random (a reuseport filter; hashing senders instead left
 * some workers with more busy clients than others: p99 2.3x memcached's
 * against 0.86x, doc/BENCHMARKS.md).  A socket is served as a connection
 * (conn_new_udp()) that never closes.  A
 * datagram is a frame (proto/udp.h) and requests, text, meta or binary
 * by its first byte; they run as on TCP (machine_run_datagram()), and
 * their replies go back to the sender as memcached sends them: each
 * request's reply (each key's, in a text multiget) a message of its own,
 * cut into datagrams of at most 1400 bytes that carry the request id,
 * their sequence number and the message's datagram count.  A request cut
 * short by the end of its datagram is dropped, reply and all, and so is
 * a request sent in more than one datagram.
 *
 * Datagrams are read (recvmmsg) and replies sent (sendmmsg) in batches;
 * a full socket buffer pauses reading until the replies are out.
 */
#ifndef MCPM_UDP_H
#define MCPM_UDP_H

#include <stddef.h>

#include "memcached-pm/conn/conn.h"
#include "memcached-pm/net/given.h"

/* The sockets on each -l address at -U's port: those of the given ones
 * bound there (listen.h; marked used), and new ones up to one per worker
 * where they can share the port (main thread, before the workers
 * start).  0, or -1 with errno saying why. */
int udp_open(unsigned n_workers, struct given *g, size_t ng);

/* Give worker `id` its sockets as connections on o's base (main thread,
 * before the worker runs).  0, or -1. */
int udp_attach(unsigned id, const struct conn_owner *o);

/* The UDP sockets' fds (served by the workers or not) into out, at most
 * max: for systemd's fd store.  The count. */
size_t udp_fds(int *out, size_t max);

/* Free what udp_open() kept, closing sockets no worker took (main
 * thread, after the workers stopped). */
void udp_close(void);

#endif
