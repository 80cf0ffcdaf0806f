/*
 * admin.h: the operator's commands: stats and its sub-commands,
 * cache_memlimit, slabs, lru, lru_crawler; and "stats detail" bookkeeping.
 */
#ifndef MCPM_ADMIN_H
#define MCPM_ADMIN_H

#include <stdbool.h>
#include <stddef.h>

#include "memcached-pm/process.h"
#include "storage/clock.h"

enum process_result admin_stats(struct conn *c, struct request *req);
enum process_result admin_memlimit(struct conn *c, struct request *req);
enum process_result admin_slabs(struct conn *c, struct request *req);
enum process_result admin_lru(struct conn *c, struct request *req);
enum process_result admin_lru_crawler(struct conn *c, struct request *req);

/* Listening sockets, for "stats conns". */
void admin_add_listener(int fd, const char *addr);

/* flush_all's cut-off, reported as "oldest" in stats settings. */
void admin_set_oldest(rel_time_t when);

enum detail_op { DETAIL_GET, DETAIL_SET, DETAIL_DELETE };

/*
 * "stats detail on": count gets (and hits), sets and deletes per key prefix
 * (the part before settings.prefix_delimiter).  Takes a mutex: it is off by
 * default and costs a lock per request only while an operator has it on,
 * as in memcached.
 */
void admin_detail_record(const char *key, size_t nkey, enum detail_op op,
                         bool hit);

/* Free what admin keeps (prefix table, listener list). */
void admin_shutdown(void);

#endif
