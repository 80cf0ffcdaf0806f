/*
 * admin_stats.h: "stats" and its sub-commands (settings, items, slabs,
 * sizes, tiers, conns, reset, detail), over text or binary.
 */
#ifndef MCPM_ADMIN_STATS_H
#define MCPM_ADMIN_STATS_H

#include "memcached-pm/conn/conn.h"
#include "proto/request.h"

enum process_result admin_stats(struct conn *c, struct request *req);

/* The binary protocol's STAT: its key names the group (empty: the general
 * stats), matched as memcached matches it; every stat a packet, then an
 * empty one.  "conns" is text-only, as in memcached. */
enum process_result admin_stats_bin(struct conn *c, const char *group,
                                    size_t len);

/* A listening socket, for "stats conns" (main thread, at start-up). */
void admin_add_listener(int fd, const char *addr);

/* Free what "stats" keeps (the listener list, the detail table). */
void admin_stats_shutdown(void);

#endif
