/*
 * tier_group.c: group commit for a memory file flushed by msync (tier.h).
 *
 * A thread in a group notes the ranges its persist() calls cover instead
 * of syncing each.  Synchronously (tier_pmem_group_sync()) it makes them
 * durable itself, with one msync over their span.  Asynchronously it
 * hands them to the tier's flusher thread (tier_pmem_group_submit()) and
 * goes on: the flusher takes every thread's submits at once and makes
 * them durable with one msync (the round's tickets are then firm, and
 * their threads woken), and then stores the commit words' zeros the
 * submits asked for (the deaths of items the noted commits replace).
 * Those become durable with the next round's msync, which also makes
 * the round's tickets done and wakes their threads again.  While a round
 * syncs, the next submits gather: the slower the device, the more each
 * round covers.
 *
 *   worker:  note note | submit -> 7 | note note | submit -> 8 | ...
 *   flusher:   [ 5, 6: msync, zeros ]  [ 7, 8: msync, zeros ]  [ 9: ...
 *                                        firm = 8, done = 6
 *
 * So a reply that acknowledges a store waits for one msync, and one that
 * acknowledges a removal for two: before that the item a removed one
 * replaced could still come back.  With nothing more submitted, the
 * zeros' own round runs at once for a removal or a thread that waits,
 * else within ZEROS_WAIT.
 *
 * A thread's submit joins its own earlier submit while that still waits
 * in the queue, so that a thread has at most one ticket queued, one in
 * the round and one waiting for its zeros.  In strict mode (the
 * power-loss simulator) a round copies exactly the noted lines, each
 * copy a flush point, as a synchronous sync does, and each zero as it
 * stores it.
 */
#include "config.h"

#include "storage/tier/tier.h"
#include "storage/tier/tier_group_priv.h"
#include "storage/tier/tier_medium.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct span {
    const char *start;
    const char *end;
};

/* Ranges as a list, or (not strict) only the span they cover. */
struct spans {
    struct span *v;
    size_t       n;
    size_t       cap;
};

struct batch {
    struct batch *next;
    uint64_t      ticket;
    struct spans  noted;        /* durable first */
    uint64_t    **zero;         /* then these commit words zeroed */
    size_t        nzero;
    size_t        zcap;
    bool          urgent;       /* it removed items: its zeros' round
                                   runs at once */
    void        (*wake)(void *);
    void         *wake_arg;
    struct batch **owner;       /* its thread's `queued` while it waits
                                   in the queue (under the lock) */
};

struct flusher {
    struct pmem_state *s;
    pthread_t       thread;
    pthread_mutex_t lock;
    pthread_cond_t  more;       /* a submit, or stop */
    pthread_cond_t  round;      /* a round ended */
    struct batch   *head;
    struct batch  **tail;
    uint64_t        submitted;  /* the last ticket handed out */
    uint64_t        firm;       /* the last ticket whose ranges are
                                   durable */
    uint64_t        done;       /* ... whose zeros are durable too */
    uint64_t        woken;      /* ... and whose threads were woken */
    unsigned        waiters;    /* threads in wait_done() */
    bool            stop;
    /* the flusher's own: the last round's batches, whose zeros are
     * stored but not yet durable, and the span of those zeros */
    struct batch   *zeroed;
    struct span     zeros;
};

#define INFLIGHT 4              /* a thread's tickets not done yet: at most
                                   one queued, one in the round and one
                                   waiting for its zeros */
#define ZEROS_WAIT_NS 1000000   /* zeros wait this long for the next
                                   round, unless needed at once */

/* The calling thread's group.  One PMEM tier per process: a thread joins
 * at most one. */
static __thread struct {
    struct pmem_state *s;       /* the tier joined, NULL: none */
    struct spans       noted;   /* since the last sync or submit */
    uint64_t           notes;   /* ever: the clock of its stores */
    uint64_t           firm;    /* notes known durable */
    uint64_t           durable; /* ... with the zeros their tickets asked
                                   for */
    void             (*wake)(void *);   /* asynchronous: its waker */
    void              *wake_arg;
    struct batch      *queued;  /* its submit still in the queue: the
                                   flusher clears it as it takes it
                                   (both under the flusher's lock) */
    struct {
        uint64_t ticket;
        uint64_t notes;         /* what the ticket covers */
    } inflight[INFLIGHT];
    unsigned           ninflight;
} grp;

static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- ranges ----------------------------------------------------------- */

/* Add a range; one that touches the last grows it (an item's prepare and
 * publish, a chunk's pieces).  False when out of memory. */
static bool
spans_add(struct spans *l, const char *start, const char *end)
{
    struct span *last = l->n > 0 ? &l->v[l->n - 1] : NULL;

    if (last != NULL && start <= last->end && end >= last->start) {
        last->start = start < last->start ? start : last->start;
        last->end = end > last->end ? end : last->end;
        return true;
    }
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 256;
        struct span *v = realloc(l->v, cap * sizeof(*v));

        if (v == NULL) {
            return false;
        }
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = (struct span){ start, end };
    return true;
}

/* The one span that covers them all (n becomes 1, or stays 0). */
static void
spans_cover(struct spans *l)
{
    for (size_t i = 1; i < l->n; i++) {
        l->v[0].start = l->v[i].start < l->v[0].start ? l->v[i].start
                                                       : l->v[0].start;
        l->v[0].end = l->v[i].end > l->v[0].end ? l->v[i].end : l->v[0].end;
    }
    l->n = l->n > 0 ? 1 : 0;
}

/* Make the ranges durable: one msync over their span, or in strict mode
 * a copy of each, each a flush point. */
static void
spans_sync(struct pmem_state *s, struct spans *l)
{
    if (l->n == 0) {
        return;
    }
    if (s->strict) {
        for (size_t i = 0; i < l->n; i++) {
            pmem_flush_point(s);
            pmem_strict_copy(s, l->v[i].start,
                             (size_t)(l->v[i].end - l->v[i].start));
        }
        pmem_count_sync(s);
        return;
    }
    spans_cover(l);
    pmem_msync_range(s, l->v[0].start, (size_t)(l->v[0].end - l->v[0].start));
}

bool
pmem_group_note(struct pmem_state *s, const char *addr, size_t len)
{
    if (grp.s != s || !spans_add(&grp.noted, addr, addr + len)) {
        return false;
    }
    grp.notes++;
    return true;
}

/* ---- the flusher ------------------------------------------------------ */

static void
batch_free(struct batch *b)
{
    free(b->noted.v);
    free(b->zero);
    free(b);
}

/* Widen the span c to cover [start, end) (c->start NULL: empty). */
static void
widen(struct span *c, const char *start, const char *end)
{
    c->start = c->start == NULL || start < c->start ? start : c->start;
    c->end = end > c->end ? end : c->end;
}

static void
sync_span(struct pmem_state *s, const struct span *c)
{
    if (c->start != NULL) {
        pmem_msync_range(s, c->start, (size_t)(c->end - c->start));
    }
}

/* One round over the batches taken (none: only the zeros): their ranges
 * and the zeros the last round stored durable (one msync over their
 * span; strict: a copy of each range), then their own zeros stored, for
 * the next round (strict: each copied at once).  Whether it stored any. */
static bool
flush_round(struct flusher *f, struct batch *list)
{
    struct pmem_state *s = f->s;
    struct span all = f->zeros;
    bool any = false;

    f->zeros = (struct span){ NULL, NULL };
    for (struct batch *b = list; b != NULL; b = b->next) {
        if (s->strict) {
            spans_sync(s, &b->noted);
            continue;
        }
        for (size_t i = 0; i < b->noted.n; i++) {
            widen(&all, b->noted.v[i].start, b->noted.v[i].end);
        }
    }
    sync_span(s, &all);
    for (struct batch *b = list; b != NULL; b = b->next) {
        for (size_t i = 0; i < b->nzero; i++) {
            uint64_t *w = b->zero[i];

            __atomic_store_n(w, 0, __ATOMIC_RELEASE);
            any = true;
            if (s->strict) {
                pmem_flush_point(s);
                pmem_strict_copy(s, (const char *)w, sizeof(*w));
            } else {
                widen(&f->zeros, (const char *)w, (const char *)(w + 1));
            }
        }
    }
    return any;
}

/* Test hook: while the file MCPM_FLUSH_HOLD names exists, no round
 * starts (a device that takes its time), so that a test can see the
 * workers serve on meanwhile. */
static void
held(const char *path)
{
    struct timespec tick = { 0, 1000000 };

    while (path != NULL && access(path, F_OK) == 0) {
        nanosleep(&tick, NULL);
    }
}

/* Under the lock: wait for a round to run.  One runs for submits, and
 * for the last round's zeros: at once when a removal or a waiting
 * thread needs them, else after ZEROS_WAIT_NS.  False: stopped, with
 * nothing left to make durable. */
static bool
await_round(struct flusher *f, bool zeroed_urgent)
{
    struct timespec until = { 0, 0 };

    for (;;) {
        if (f->head != NULL ||
            (f->zeroed != NULL &&
             (zeroed_urgent || f->waiters > 0 || f->stop))) {
            return true;
        }
        if (f->stop) {
            return false;
        }
        if (f->zeroed == NULL) {
            pthread_cond_wait(&f->more, &f->lock);
            continue;
        }
        if (until.tv_sec == 0) {
            clock_gettime(CLOCK_MONOTONIC, &until);
            until.tv_nsec += ZEROS_WAIT_NS;
            if (until.tv_nsec >= 1000000000) {
                until.tv_sec++;
                until.tv_nsec -= 1000000000;
            }
        }
        if (pthread_cond_timedwait(&f->more, &f->lock, &until) != 0) {
            return true;        /* timed out: the zeros go now */
        }
    }
}

/* Call the batches' threads' wakers; free them unless kept. */
static void
wake_batches(struct batch *list, bool keep)
{
    struct batch *b, *next;

    for (b = list; b != NULL; b = next) {
        next = b->next;
        if (b->wake != NULL) {
            b->wake(b->wake_arg);
        }
        if (!keep) {
            batch_free(b);
        }
    }
}

static void *
flusher_main(void *arg)
{
    struct flusher *f = arg;
    const char *hold = getenv("MCPM_FLUSH_HOLD");
    bool zeroed_urgent = false;

    pthread_mutex_lock(&f->lock);
    while (await_round(f, zeroed_urgent)) {
        struct batch *list = f->head, *zeroed = f->zeroed, *b;
        uint64_t last = f->submitted, firm = f->firm;
        bool zeros;

        f->head = NULL;
        f->tail = &f->head;
        for (b = list; b != NULL; b = b->next) {
            if (*b->owner == b) {
                *b->owner = NULL;   /* no more joins this round */
            }
        }
        pthread_mutex_unlock(&f->lock);

        held(hold);
        zeros = flush_round(f, list);

        /* The list's tickets are firm; the last round's zeros are
         * durable, and the list's too if it stored none.  Marks first,
         * so that a woken thread finds them; woken after, so that a
         * thread waiting to leave outlives its wake-ups. */
        __atomic_store_n(&f->firm, last, __ATOMIC_RELEASE);
        __atomic_store_n(&f->done, zeros ? firm : last, __ATOMIC_RELEASE);
        wake_batches(list, zeros);
        wake_batches(zeroed, false);
        zeroed_urgent = false;
        for (b = zeros ? list : NULL; b != NULL; b = b->next) {
            zeroed_urgent |= b->urgent;
        }
        pthread_mutex_lock(&f->lock);
        f->zeroed = zeros ? list : NULL;
        f->woken = zeros ? firm : last;
        pthread_cond_broadcast(&f->round);
    }
    pthread_mutex_unlock(&f->lock);
    return NULL;
}

/* The tier's flusher, started by the first thread that joins
 * asynchronously.  NULL when it cannot start. */
static struct flusher *
flusher_of(struct pmem_state *s)
{
    struct flusher *f;

    pthread_mutex_lock(&start_lock);
    f = s->flusher;
    if (f == NULL && (f = calloc(1, sizeof(*f))) != NULL) {
        f->s = s;
        f->tail = &f->head;
        pthread_mutex_init(&f->lock, NULL);
        pthread_condattr_t monotonic;

        pthread_condattr_init(&monotonic);
        pthread_condattr_setclock(&monotonic, CLOCK_MONOTONIC);
        pthread_cond_init(&f->more, &monotonic);
        pthread_condattr_destroy(&monotonic);
        pthread_cond_init(&f->round, NULL);
        if (pthread_create(&f->thread, NULL, flusher_main, f) != 0) {
            fprintf(stderr, "memory file: no flusher thread: each worker "
                    "syncs its own passes\n");
            free(f);
            f = NULL;
        }
        s->flusher = f;
    }
    pthread_mutex_unlock(&start_lock);
    return f;
}

void
pmem_group_stop(struct pmem_state *s)
{
    struct flusher *f = s->flusher;

    if (f == NULL) {
        return;
    }
    pthread_mutex_lock(&f->lock);
    f->stop = true;
    pthread_cond_signal(&f->more);
    pthread_mutex_unlock(&f->lock);
    pthread_join(f->thread, NULL);
    pthread_mutex_destroy(&f->lock);
    pthread_cond_destroy(&f->more);
    pthread_cond_destroy(&f->round);
    free(f);
    s->flusher = NULL;
}

/* ---- a thread's group ------------------------------------------------- */

bool
tier_pmem_group_join(struct tier *t, void (*wake)(void *), void *arg)
{
    struct pmem_state *s = state(t);

    if (s->flush != TIER_FLUSH_MSYNC) {
        return false;
    }
    grp.s = s;
    if (wake != NULL && flusher_of(s) != NULL) {
        grp.wake = wake;
        grp.wake_arg = arg;
    }
    return true;
}

bool
tier_pmem_group_pending(const struct tier *t)
{
    return grp.s == state(t) && grp.noted.n > 0;
}

uint64_t
tier_pmem_group_noted(void)
{
    return grp.notes;
}

/* Note how far the tickets firm made the thread's notes durable, and
 * forget the tickets done. */
static void
settle(struct flusher *f)
{
    /* done first: the flusher stores firm before done, so firm is at
     * least the done read */
    uint64_t done = __atomic_load_n(&f->done, __ATOMIC_ACQUIRE);
    uint64_t firm = __atomic_load_n(&f->firm, __ATOMIC_ACQUIRE);
    unsigned i = 0;

    for (unsigned j = 0; j < grp.ninflight && grp.inflight[j].ticket <= firm;
         j++) {
        grp.firm = grp.inflight[j].notes;
        if (grp.inflight[j].ticket <= done) {
            grp.durable = grp.inflight[j].notes;
            i = j + 1;
        }
    }
    if (i > 0) {
        memmove(grp.inflight, grp.inflight + i,
                (grp.ninflight - i) * sizeof(grp.inflight[0]));
        grp.ninflight -= i;
    }
}

uint64_t
tier_pmem_group_durable(const struct tier *t, uint64_t *settled)
{
    struct pmem_state *s = state(t);

    if (grp.s == s && s->flusher != NULL) {
        settle(s->flusher);
    }
    *settled = grp.durable;
    return grp.firm;
}

/* Wait until the thread's tickets up to `ticket` are done. */
static void
wait_done(struct flusher *f, uint64_t ticket)
{
    pthread_mutex_lock(&f->lock);
    f->waiters++;               /* the zeros' round runs at once */
    pthread_cond_signal(&f->more);
    while (f->woken < ticket) {
        pthread_cond_wait(&f->round, &f->lock);
    }
    f->waiters--;
    pthread_mutex_unlock(&f->lock);
    settle(f);
}

void
tier_pmem_group_sync(struct tier *t)
{
    struct pmem_state *s = state(t);

    if (grp.s != s) {
        return;
    }
    tier_pmem_group_wait(t);    /* after what the thread submitted: a
                                   barrier, not a race with it */
    spans_sync(s, &grp.noted);
    grp.noted.n = 0;
    if (grp.ninflight == 0) {
        grp.firm = grp.durable = grp.notes;
    }
}

/* Move the thread's noted ranges (or their span) and the zeros into b. */
static bool
batch_add(struct batch *b, struct pmem_state *s, uint64_t *const *zero,
          size_t nzero)
{
    if (!s->strict) {
        spans_cover(&grp.noted);
    }
    for (size_t i = 0; i < grp.noted.n; i++) {
        if (!spans_add(&b->noted, grp.noted.v[i].start,
                       grp.noted.v[i].end)) {
            return false;
        }
    }
    if (!s->strict) {
        spans_cover(&b->noted);
    }
    if (b->nzero + nzero > b->zcap) {
        size_t cap = b->zcap ? b->zcap * 2 : 64;
        uint64_t **v;

        while (cap < b->nzero + nzero) {
            cap *= 2;
        }
        if ((v = realloc(b->zero, cap * sizeof(*v))) == NULL) {
            return false;
        }
        b->zero = v;
        b->zcap = cap;
    }
    if (nzero > 0) {
        memcpy(b->zero + b->nzero, zero, nzero * sizeof(*zero));
        b->nzero += nzero;
    }
    return true;
}

/* Under the flusher's lock: the thread's batch still in the queue, or a
 * new one queued, with its ticket in flight (NULL: no memory). */
static struct batch *
queued_batch(struct flusher *f)
{
    struct batch *b = grp.queued;

    if (b != NULL || (b = calloc(1, sizeof(*b))) == NULL) {
        return b;
    }
    b->ticket = ++f->submitted;
    b->wake = grp.wake;
    b->wake_arg = grp.wake_arg;
    b->owner = &grp.queued;
    *f->tail = b;
    f->tail = &b->next;
    grp.queued = b;
    grp.inflight[grp.ninflight].ticket = b->ticket;
    grp.inflight[grp.ninflight].notes =
        grp.ninflight > 0 ? grp.inflight[grp.ninflight - 1].notes
                          : grp.durable;
    grp.ninflight++;
    return b;
}

/* No flusher, or no memory for a batch: the thread syncs what it noted,
 * then stores the zeros and syncs them, itself (each on its own if even
 * a note fails). */
static void
submit_alone(struct tier *t, uint64_t *const *zero, size_t nzero)
{
    struct pmem_state *s = state(t);

    tier_pmem_group_sync(t);
    for (size_t i = 0; i < nzero; i++) {
        const char *w = (const char *)zero[i];

        __atomic_store_n(zero[i], 0, __ATOMIC_RELEASE);
        if (!pmem_group_note(s, w, sizeof(*zero[i]))) {
            struct span one = { w, w + sizeof(*zero[i]) };

            spans_sync(s, &(struct spans){ &one, 1, 1 });
        }
    }
    tier_pmem_group_sync(t);
}

uint64_t
tier_pmem_group_submit(struct tier *t, uint64_t *const *zero, size_t nzero,
                       bool urgent)
{
    struct pmem_state *s = state(t);
    struct flusher *f = s->flusher;
    struct batch *b;
    uint64_t ticket = 0;

    if (grp.s != s || (grp.noted.n == 0 && nzero == 0)) {
        return 0;
    }
    if (f == NULL || grp.wake == NULL) {
        submit_alone(t, zero, nzero);   /* joined without a flusher */
        return 0;
    }
    settle(f);
    if (grp.ninflight == INFLIGHT) {
        wait_done(f, grp.inflight[0].ticket);
    }
    pthread_mutex_lock(&f->lock);
    if ((b = queued_batch(f)) != NULL && batch_add(b, s, zero, nzero)) {
        b->urgent |= urgent;
        ticket = b->ticket;
        grp.inflight[grp.ninflight - 1].notes = grp.notes;
        grp.noted.n = 0;
    }
    pthread_cond_signal(&f->more);  /* what a batch holds goes anyway */
    pthread_mutex_unlock(&f->lock);
    if (ticket == 0) {
        submit_alone(t, zero, nzero);
    }
    return ticket;
}

void
tier_pmem_group_wait(struct tier *t)
{
    struct pmem_state *s = state(t);

    if (grp.s == s && s->flusher != NULL && grp.ninflight > 0) {
        wait_done(s->flusher, grp.inflight[grp.ninflight - 1].ticket);
    }
}

void
tier_pmem_group_leave(struct tier *t)
{
    tier_pmem_group_sync(t);
    free(grp.noted.v);
    memset(&grp, 0, sizeof(grp));
}

uint64_t
tier_pmem_group_done(const struct tier *t)
{
    const struct flusher *f = state(t)->flusher;

    return f == NULL ? 0 : __atomic_load_n(&f->done, __ATOMIC_ACQUIRE);
}
