/*
 * admin.h: the operator's commands besides "stats" (admin_stats.h):
 * cache_memlimit, slabs, lru, lru_crawler, watch and refresh_certs.  On
 * the connection's worker thread; storage locks for itself.
 */
#ifndef MCPM_ADMIN_H
#define MCPM_ADMIN_H

#include "memcached-pm/conn/conn.h"
#include "proto/request.h"

enum process_result admin_memlimit(struct conn *c, struct request *req);
enum process_result admin_slabs(struct conn *c, struct request *req);
enum process_result admin_lru(struct conn *c, struct request *req);
enum process_result admin_lru_crawler(struct conn *c, struct request *req);

/* watch [streams...]: the connection becomes a watcher of memcached's log
 * streams (logger.h), its socket handed to the mc-log thread. */
enum process_result admin_watch(struct conn *c, struct request *req);

/* refresh_certs: reload the TLS certificate, key and CAs (tls.h); OK, or
 * memcached's message on a line. */
enum process_result admin_refresh_certs(struct conn *c);

#endif
