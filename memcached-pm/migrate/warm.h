/*
 * warm.h: -o warm_from=<host>:<port> (or a unix socket's path): copy the
 * items of a running memcached node into this one and keep up with its
 * writes until it stops, so that the node can be replaced without a cold
 * cache.
 *
 * One thread, three connections to the node:
 *
 *   watch   `watch mutations deletions` (1.6.18, which has no deletions
 *           stream: `watch mutations`), opened before anything is read,
 *           so that every write after it is seen: each stored or deleted
 *           key is fetched again.
 *   dump    `lru_crawler metadump all`: every key with its CAS.  The
 *           first pass fetches them all; when the watch stream says it
 *           skipped lines (its buffer overflowed), another pass fetches
 *           those whose CAS differs from this node's.
 *   fetch   `mg <key> b k v f t c` in pipelined batches, keys base64, so
 *           that binary ones copy too: value, client flags, remaining
 *           TTL and CAS (kept as the node's).  A miss deletes the key
 *           here.  Replies are applied in the order the requests went,
 *           and a key is fetched again only after the event that
 *           changed it, so that the last copy of a key is never older
 *           than the event.
 *
 * -o warm_from_rate=<n> bounds the requests a second sent to the node
 * (0: none).  When the node closes the watch stream (it stopped), the
 * copy ends: what is in flight is applied, and the node serves on alone.
 * Progress is counted in `stats` (warm_*), and at -v a line a second.
 */
#ifndef MCPM_WARM_H
#define MCPM_WARM_H

#include <stdbool.h>
#include <stdint.h>

struct warm_stats {
    const char *state;      /* connecting, copying, following, done,
                               failed */
    uint64_t source_items;  /* the node's curr_items when the copy began */
    uint64_t copied;        /* items stored from the node */
    uint64_t deleted;       /* keys the node no longer has, removed */
    uint64_t events;        /* watch lines naming a stored/deleted key */
    uint64_t skipped;       /* lines the node's watch stream dropped */
    uint64_t passes;        /* metadump passes done */
    uint64_t requests;      /* requests sent to the node */
};

/* Start the copy thread when warm_from is set: 0, or -1 said. */
int  warm_start(void);
/* Stop it (at shutdown); nothing when it is not running. */
void warm_stop(void);
/* This node now listens on the node's own port (listen.c, once the node
 * let it go): clients write here, so the copy applies no more fetched
 * values; a key the stream names from now on is deleted instead. */
void warm_cut_over(void);
/* false without warm_from; else a snapshot of its counts. */
bool warm_stats(struct warm_stats *out);

#endif
