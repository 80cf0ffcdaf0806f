/*
 * logger.h: watch, memcached's live log streams, and the mc-log thread.
 *
 * `watch [streams...]` turns a connection into a watcher: it gets "OK"
 * and then one line per event of the streams it asked for, in memcached's
 * format ("ts=<sec>.<usec> gid=<n> type=item_get key=... status=...").
 * The streams with lines here: fetchers (every key lookup, as memcached's
 * do_item_get logs them), mutations (every store), evictions,
 * connevents (connections opened and closed) and deletions.  rawcmds,
 * sysevents and the proxy streams are accepted and carry nothing here
 * (memcached 1.6.45 never writes rawcmds either).
 *
 * Lossy by design, never slowing a worker: each worker writes records into
 * a ring of its own (-o worker_logbuf_size); a full ring drops the record
 * (stats log_worker_dropped).  The mc-log thread drains the rings, writes
 * each line into the buffer of every watcher that wants it (-o
 * watcher_logbuf_size) and sends the buffers; a watcher too slow to take
 * its lines loses them and is told how many ("skipped=<n>") before the
 * next line it gets.  With no watcher, an event costs a relaxed load.
 */
#ifndef MCPM_LOGGER_H
#define MCPM_LOGGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "storage/cache/cache.h"

struct tls;

/* The streams, with memcached's bits. */
#define LOG_SYSEVENTS   (1u << 1)
#define LOG_FETCHERS    (1u << 2)
#define LOG_MUTATIONS   (1u << 3)
#define LOG_CONNEVENTS  (1u << 5)
#define LOG_EVICTIONS   (1u << 6)
#define LOG_RAWCMDS     (1u << 9)
#define LOG_PROXYREQS   (1u << 10)
#define LOG_PROXYEVENTS (1u << 11)
#define LOG_PROXYUSER   (1u << 12)
#define LOG_DELETIONS   (1u << 13)

/* The streams some watcher wants. */
extern unsigned logger_flags;

static inline bool
logger_wants(unsigned stream)
{
    return (__atomic_load_n(&logger_flags, __ATOMIC_RELAXED) & stream) != 0;
}

/* Start the mc-log thread and hook the storage streams; stop it, closing
 * the watchers.  0, or -1. */
int  logger_start(void);
void logger_stop(void);

/* In a worker's thread, before it serves: its own ring.  Other threads
 * (storage's, for evictions) share one, under a lock. */
int  logger_thread_init(void);

/* The connection the calling thread serves now (cfd= in the lines). */
void logger_set_fd(int fd);

/* ---- events (each caller checks logger_wants() first) ------------------ */

/* A store: memcached's status (not_stored stored exists not_found
 * too_large no_memory) and command (add set replace append prepend cas),
 * named by cache_status and cache_op. */
void logger_store(enum cache_status st, enum cache_op op, const char *key,
                  size_t nkey, uint32_t vlen, rel_time_t exptime,
                  unsigned clsid);

/* A delete by `delete` (md: false) or by md. */
void logger_delete(bool meta, const char *key, size_t nkey, unsigned clsid,
                   uint32_t vlen);

/* Connection events.  transport: 0 local (unix), 1 tcp, 2 udp; reason,
 * memcached's: 0 error, 1 normal, 2 idle_timeout, 3 shutdown. */
#define LOG_CLOSE_ERROR    0
#define LOG_CLOSE_NORMAL   1
#define LOG_CLOSE_IDLE     2
#define LOG_CLOSE_SHUTDOWN 3
void logger_conn(bool open, int fd, const struct sockaddr *peer,
                 socklen_t len, int transport, int reason);

/* ---- watchers ---------------------------------------------------------- */

enum logger_add { LOGGER_ADDED, LOGGER_TOO_MANY, LOGGER_FAILED };

/* Parse a watch command's stream names (memcached's: a name may be cut
 * short, "fetch" is fetchers); none: fetchers.  false for an unknown
 * name. */
bool logger_parse_streams(const char *const *names, const size_t *lens,
                          unsigned n, unsigned *streams);

/* Hand the socket fd (and its TLS session, or NULL) to the mc-log thread
 * as a watcher of `streams`: it sends "OK\r\n" and the lines, and closes
 * fd when the client goes (the caller lets go of both; fd stays counted
 * in curr_connections until then).  addr and listen_addr are its stats
 * conns addresses. */
enum logger_add logger_add_watcher(int fd, struct tls *tls,
                                   unsigned streams, const char *addr,
                                   const char *listen_addr);

/* For stats conns: every watcher, with when it began watching. */
typedef void (*logger_watcher_fn)(int fd, const char *addr,
                                  const char *listen_addr, rel_time_t since,
                                  void *ctx);
void logger_each_watcher(logger_watcher_fn fn, void *ctx);

/* For stats. */
struct logger_stats {
    uint64_t log_worker_dropped;
    uint64_t log_worker_written;
    uint64_t log_watcher_skipped;
    uint64_t log_watcher_sent;
    uint64_t log_watchers;
};
void logger_stats(struct logger_stats *out);

#endif
