/*
 * recover_check.h: the state of one recovery, shared by its three files
 * and nothing else, and the checks a head must pass to come back.
 * recover.c runs the phases (claim; each page scanned, freed and linked;
 * the chunked values), recover_link.c puts the heads into the hash table
 * and COLD, or drops them, and recover_check.c (here) decides which heads
 * may come back.  Every function here runs in the recovery's threads.
 */
#ifndef MCPM_STORAGE_RECOVER_CHECK_H
#define MCPM_STORAGE_RECOVER_CHECK_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/base/clock.h"
#include "storage/base/metrics.h"
#include "storage/slab/item.h"

struct recover_params;
struct tier;

#define MAX_THREADS     16
/* Workers that help the recovery at once (recover_help()). */
#define HELPERS         4

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

/* A head the scan found, and what linking it needs. */
struct head {
    struct item        *it;
    uint32_t            hv;         /* its key's hash */
    unsigned            clsid;      /* of the page it sits in */
};

/* What one recovery thread works on and finds.  The counts are written
 * by its thread alone and read by recover_progress() (relaxed). */
struct worker {
    struct recovery    *rc;
    unsigned            id;
    struct vec          page;       /* struct head: the unchunked heads
                                       of its page that passed their
                                       checks */
    struct vec          busy;       /* struct head: of those, the ones
                                       whose item lock was busy */
    struct vec          later;      /* struct head: a helper's busy ones,
                                       for the end */
    struct vec          heads;      /* struct head: chunked, for the end */
    struct vec          pieces;     /* struct piece */
    uint64_t            linked;
    uint64_t            torn, expired, flushed, replaced, removed;
    bool                oom;
    pthread_mutex_t     help;       /* a helper's: one at a time */
};

struct recovery {
    const struct recover_params *p;     /* recover.c's; what the checks
                                           and links read of it: */
    bool                check_crc;
    rel_time_t          now;
    rel_time_t          flush_time;
    uint64_t            flush_cas;
    struct tier        *tier;
    struct page_ref    *pages;
    size_t              npages;
    unsigned            largest;
    unsigned            nthreads;
    unsigned            nworkers;   /* nthreads, then the HELPERS' */
    struct worker      *w;
    struct piece       *pieces;     /* all of them, sorted */
    size_t              npieces;
    size_t              next_page;  /* the next page a thread takes */
    unsigned char      *taken;      /* a page's: a thread took it */
    unsigned            helping;    /* helpers on a page now */
    bool                spent[64];  /* a class's: no page left to help
                                       with */
    size_t              scanned;    /* pages done */
    bool                stop;       /* recover_finish() asked */
    bool                running;    /* until the last item is linked */
    bool                complete;   /* every page was read back */
    pthread_t           thread;
    struct cache_recovery out;      /* the figures, once it ended */
    uint64_t            started_us; /* clock_mono_us() at the start */
    uint64_t            start_len_us;   /* until the threads started */
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
