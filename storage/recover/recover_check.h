/*
 * recover_check.h: the state of one recovery, shared by its three files
 * and nothing else, and the checks a head must pass to come back.
 * recover.c runs the phases (claim, scan, pieces, link, free, lru),
 * recover_link.c puts the heads into the hash table and the LRU runs, in
 * the scan and after it, and recover_check.c (here) decides which heads
 * may come back.  Every function here runs during recover_run(), before
 * any other storage thread.
 */
#ifndef MCPM_STORAGE_RECOVER_CHECK_H
#define MCPM_STORAGE_RECOVER_CHECK_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/base/clock.h"
#include "storage/slab/item.h"

struct recover_params;
struct tier;

#define MAX_THREADS     16

struct page_ref {
    void       *page;
    unsigned    clsid;
};

struct piece {
    uint64_t            seq;
    uint32_t            index;
    unsigned            clsid;  /* of the page it sits in */
    struct item_chunk  *ch;
};

/* A growable array of fixed-size elements. */
struct vec {
    void       *v;
    size_t      n, cap, size;
};

/* A head the scan found, and what the later phases need of it. */
struct head {
    struct item        *it;
    uint32_t            hv;         /* its key's hash */
    rel_time_t          time;
};

/* Heads a scan thread holds back, their buckets prefetched, before it
 * links them (a clean restart). */
#define RING    16

/* What one scan/link thread works on and finds. */
struct worker {
    struct recovery    *rc;
    unsigned            id;
    struct vec          heads;      /* struct head */
    struct vec          pieces;     /* struct piece */
    struct lru_runs    *runs;       /* the COLD lists it rebuilds */
    struct head         ring[RING]; /* linked in the scan, RING behind */
    uint64_t            nring;      /* heads through the ring so far */
    uint64_t            linked;     /* in the hash table and the runs;
                                       written by its thread alone, read
                                       by the progress lines (relaxed) */
    uint64_t            torn, expired, flushed, replaced;
    bool                oom;
};

struct recovery {
    const struct recover_params *p;     /* recover.c's; what the checks
                                           and links read of it: */
    bool                check_crc;
    rel_time_t          now;
    rel_time_t          flush_time;
    struct tier        *tier;
    struct page_ref    *pages;
    size_t              npages;
    unsigned            largest;
    unsigned            nthreads;
    pthread_mutex_t     unlink;     /* a twin out of the scan's runs */
    struct worker      *w;
    struct piece       *pieces;     /* all of them, sorted */
    unsigned            bucket_power;   /* the hash table's, once sized */
    uint64_t           *seen;       /* after a crash: hashes inserted */
    uint32_t            seen_mask;  /* bit of a hash in seen */
    size_t              npieces;
    size_t              scanned;    /* pages, for progress */
    uint64_t            started_us; /* clock_mono_us() at the start */
    uint64_t            next_note_us;   /* the next progress line */
    size_t              noted;      /* pages the last line said */
};

/* ---- recover_check.c -------------------------------------------------- */

/* Append elem; false when out of memory. */
bool     recover_vec_push(struct vec *a, const void *elem);
/* A chunk's commit sequence number. */
uint64_t recover_seq_of(const void *chunk);
/* A head's chunked value, let go: its pieces free for the free phase. */
void     recover_release_chain(struct item *it);
/* The checks a head must pass to be served (its chain rebuilt first if
 * chunked): checksum after a crash, the value's \r\n, expiry, flush.
 * False (and counted) drops it. */
bool     recover_head_ok(struct worker *w, struct item *it, unsigned head_id);

#endif
