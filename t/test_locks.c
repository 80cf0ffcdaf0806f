/*
 * test_locks.c: the worker-count table, striping (hashes that share the low
 * bits share a lock, others do not), trylock under contention, mutual
 * exclusion across threads, and lock_all against a held stripe.
 */
#include "storage/base/locks.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <unistd.h>

#include "t/tap.h"

#define POWER 4
#define NTHREADS 4
#define NLOOPS 20000

static void
test_power_for(void)
{
    is_int(locks_power_for(0), 10, "0 workers: 10");
    is_int(locks_power_for(2), 10, "2 workers: 10");
    is_int(locks_power_for(3), 11, "3 workers: 11");
    is_int(locks_power_for(4), 12, "4 workers: 12");
    is_int(locks_power_for(5), 13, "5 workers: 13");
    is_int(locks_power_for(10), 13, "10 workers: 13");
    is_int(locks_power_for(11), 14, "11 workers: 14");
    is_int(locks_power_for(20), 14, "20 workers: 14");
    is_int(locks_power_for(21), 15, "21 workers: 15");
    is_int(locks_power_for(1000), 15, "1000 workers: 15");
}

static void
test_init(void)
{
    is_int(locks_power(), 0, "power is 0 before init");
    ok(locks_init(0) != 0, "power 0 is refused");
    ok(locks_init(25) != 0, "power 25 is refused");
    is_int(locks_init(POWER), 0, "init power 4");
    is_int(locks_power(), POWER, "power reads back");
    ok(locks_init(POWER) != 0, "a second init is refused");
}

/* Runs in another thread: a lock held by main must look busy. */
static void *
try_thread(void *arg)
{
    uint32_t hv = (uint32_t)(uintptr_t)arg;
    bool got = locks_trylock(hv);

    if (got) {
        locks_unlock(hv);
    }
    return (void *)(uintptr_t)got;
}

static bool
try_from_thread(uint32_t hv)
{
    pthread_t t;
    void *res;

    pthread_create(&t, NULL, try_thread, (void *)(uintptr_t)hv);
    pthread_join(t, &res);
    return res != NULL;
}

static void
test_striping(void)
{
    uint32_t hv = 0xdead0005u;

    locks_lock(hv);
    ok(!try_from_thread(hv), "same hv: busy");
    ok(!try_from_thread(hv + (1u << POWER)), "same low bits: busy");
    ok(!try_from_thread(0x5u), "only the low bits count");
    ok(try_from_thread(hv + 1), "next stripe: free");
    ok(try_from_thread(hv ^ (1u << (POWER - 1))), "top stripe bit: free");
    locks_unlock(hv);
    ok(try_from_thread(hv), "free after unlock");
    ok(locks_trylock(hv), "trylock takes a free stripe");
    locks_unlock(hv);
}

static long counter;

/* Every thread uses a different hv with the same stripe. */
static void *
count_thread(void *arg)
{
    uint32_t hv = ((uint32_t)(uintptr_t)arg << POWER) | 3u;
    int i;

    for (i = 0; i < NLOOPS; i++) {
        locks_lock(hv);
        counter++;
        locks_unlock(hv);
    }
    return NULL;
}

static void
test_exclusion(void)
{
    pthread_t t[NTHREADS];
    uintptr_t i;

    for (i = 0; i < NTHREADS; i++) {
        pthread_create(&t[i], NULL, count_thread, (void *)(i + 1));
    }
    for (i = 0; i < NTHREADS; i++) {
        pthread_join(t[i], NULL);
    }
    is_int(counter, NTHREADS * NLOOPS, "no increment lost across a stripe");
}

static atomic_int all_done;

static void *
lock_all_thread(void *arg)
{
    (void)arg;
    locks_lock_all();
    atomic_store(&all_done, 1);
    locks_unlock_all();
    return NULL;
}

static void
test_lock_all(void)
{
    pthread_t t;
    uint32_t i;
    int busy = 0;

    locks_lock(7);
    pthread_create(&t, NULL, lock_all_thread, NULL);
    usleep(50 * 1000);
    ok(!atomic_load(&all_done), "lock_all waits for a held stripe");
    locks_unlock(7);
    pthread_join(t, NULL);
    ok(atomic_load(&all_done), "lock_all completes after release");

    locks_lock_all();
    for (i = 0; i < (1u << POWER); i++) {
        busy += !try_from_thread(i);
    }
    locks_unlock_all();
    is_int(busy, 1u << POWER, "lock_all holds every stripe");
    ok(try_from_thread(7), "unlock_all frees them");
}

int
main(void)
{
    test_power_for();
    test_init();
    test_striping();
    test_exclusion();
    test_lock_all();
    locks_destroy();
    is_int(locks_power(), 0, "destroy resets the power");
    ok(locks_init(2) == 0, "init again after destroy");
    locks_destroy();
    return done_testing();
}
