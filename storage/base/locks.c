/*
 * locks.c: the striped item lock table.
 *
 * A flat array of 2^power mutexes indexed by the low bits of the key hash.
 * The hash table uses the same low bits for its bucket index, with more of
 * them, so one stripe covers whole buckets, in the old and the new table
 * alike during a resize.
 *
 * Each stripe is a mutex and a sequence count on a cache line of its own
 * (no stripe shares a line with another).  Whoever takes the mutex makes
 * the count odd, and even again before letting go: a reader that takes
 * no lock (locks.h: locks_seq_begin) sees the count unchanged across its
 * reads only if no holder of the stripe ran in between.
 *
 * The array is set up once before any worker runs and torn down after they
 * stop; `locks` and `mask` are not changed in between, so reading them
 * needs no synchronisation.
 */
#include "storage/base/locks.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define LOCKS_POWER_MIN 1
#define LOCKS_POWER_MAX 24

struct stripe {
    pthread_mutex_t m;
    uint32_t        seq;        /* odd while held */
} __attribute__((aligned(64)));

static struct stripe *locks;
static uint32_t mask;
static unsigned power;

int
locks_mutex_init(pthread_mutex_t *m)
{
    pthread_mutexattr_t a;
    int rc;

    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ADAPTIVE_NP);
    rc = pthread_mutex_init(m, &a);
    pthread_mutexattr_destroy(&a);
    return rc;
}

unsigned
locks_power_for(unsigned nworkers)
{
    if (nworkers < 3) {
        return 10;
    }
    if (nworkers == 3) {
        return 11;
    }
    if (nworkers == 4) {
        return 12;
    }
    if (nworkers <= 10) {
        return 13;
    }
    if (nworkers <= 20) {
        return 14;
    }
    return 15;
}

/* Undo the first n mutex inits and free the array. */
static void
free_locks(size_t n)
{
    size_t i;

    for (i = 0; i < n; i++) {
        pthread_mutex_destroy(&locks[i].m);
    }
    free(locks);
    locks = NULL;
    mask = 0;
    power = 0;
}

int
locks_init(unsigned pow)
{
    size_t n, i;

    if (locks != NULL || pow < LOCKS_POWER_MIN || pow > LOCKS_POWER_MAX) {
        return -1;
    }
    n = (size_t)1 << pow;
    if (posix_memalign((void **)&locks, sizeof(*locks),
                       n * sizeof(*locks)) != 0) {
        locks = NULL;
        return -1;
    }
    memset(locks, 0, n * sizeof(*locks));
    for (i = 0; i < n; i++) {
        if (locks_mutex_init(&locks[i].m) != 0) {
            free_locks(i);
            return -1;
        }
    }
    mask = (uint32_t)(n - 1);
    power = pow;
    return 0;
}

void
locks_destroy(void)
{
    if (locks != NULL) {
        free_locks((size_t)mask + 1);
    }
}

unsigned
locks_power(void)
{
    return power;
}

/* The holder's changes come after the count turned odd, for a reader
 * that compares the count after its reads (locks_seq_same). */
static inline void
seq_enter(struct stripe *s)
{
    __atomic_store_n(&s->seq, s->seq + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
}

static inline void
seq_leave(struct stripe *s)
{
    __atomic_store_n(&s->seq, s->seq + 1, __ATOMIC_RELEASE);
}

void
locks_lock(uint32_t hv)
{
    struct stripe *s = &locks[hv & mask];

    pthread_mutex_lock(&s->m);
    seq_enter(s);
}

void
locks_prefetch(uint32_t hv)
{
    __builtin_prefetch(&locks[hv & mask], 1);
}

void
locks_unlock(uint32_t hv)
{
    struct stripe *s = &locks[hv & mask];

    seq_leave(s);
    pthread_mutex_unlock(&s->m);
}

bool
locks_trylock(uint32_t hv)
{
    struct stripe *s = &locks[hv & mask];

    if (pthread_mutex_trylock(&s->m) != 0) {
        return false;
    }
    seq_enter(s);
    return true;
}

uint32_t
locks_seq_begin(uint32_t hv)
{
    return __atomic_load_n(&locks[hv & mask].seq, __ATOMIC_ACQUIRE);
}

bool
locks_seq_same(uint32_t hv, uint32_t seq)
{
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    return __atomic_load_n(&locks[hv & mask].seq, __ATOMIC_RELAXED) == seq;
}

/*
 * Always in index order, so two callers cannot deadlock on each other; a
 * caller of either must hold no item lock.
 */
void
locks_lock_all(void)
{
    uint32_t i;

    for (i = 0; i <= mask; i++) {
        locks_lock(i);
    }
}

void
locks_unlock_all(void)
{
    uint32_t i;

    for (i = 0; i <= mask; i++) {
        locks_unlock(i);
    }
}
