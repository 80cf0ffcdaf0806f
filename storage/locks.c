/*
 * locks.c: the striped item lock table.
 *
 * A flat array of 2^power mutexes indexed by the low bits of the key hash.
 * The hash table uses the same low bits for its bucket index, with more of
 * them, so one stripe covers whole buckets, in the old and the new table
 * alike during a resize.
 *
 * The array is set up once before any worker runs and torn down after they
 * stop; `locks` and `mask` are not changed in between, so reading them
 * needs no synchronisation.
 */
#include "storage/locks.h"

#include <pthread.h>
#include <stdlib.h>

#define LOCKS_POWER_MIN 1
#define LOCKS_POWER_MAX 24

static pthread_mutex_t *locks;
static uint32_t mask;
static unsigned power;

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
        pthread_mutex_destroy(&locks[i]);
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
    locks = calloc(n, sizeof(*locks));
    if (locks == NULL) {
        return -1;
    }
    for (i = 0; i < n; i++) {
        if (pthread_mutex_init(&locks[i], NULL) != 0) {
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

void
locks_lock(uint32_t hv)
{
    pthread_mutex_lock(&locks[hv & mask]);
}

void
locks_prefetch(uint32_t hv)
{
    __builtin_prefetch(&locks[hv & mask], 1);
}

void
locks_unlock(uint32_t hv)
{
    pthread_mutex_unlock(&locks[hv & mask]);
}

bool
locks_trylock(uint32_t hv)
{
    return pthread_mutex_trylock(&locks[hv & mask]) == 0;
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
        pthread_mutex_lock(&locks[i]);
    }
}

void
locks_unlock_all(void)
{
    uint32_t i;

    for (i = 0; i <= mask; i++) {
        pthread_mutex_unlock(&locks[i]);
    }
}
