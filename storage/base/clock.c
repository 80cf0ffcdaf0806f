/*
 * clock.c: the coarse cache clock.
 *
 * Relative time comes from CLOCK_MONOTONIC so that a wall-clock step never
 * makes items expire early or live forever; it starts at CLOCK_START so
 * that 0 can mean "never".  Its seconds turn when the wall clock's do (the
 * monotonic base is set back by the wall clock's fraction of a second,
 * and the daemon ticks right after each turn, clock_until_tick_us()): a
 * node and the one that takes its file over agree on what second it is,
 * so an item never expires early across a restart (with each process's
 * seconds turning at its own start, a TTL of 2 s could end 0.1 s after a
 * set, the successor's second being one ahead of its predecessor's).  The wall time of rel 0 (`started`) is what
 * absolute exptimes are measured against; it is re-derived from the wall
 * clock on each tick, but only moved when the wall clock has stepped (by
 * more than a second), so it does not jitter as ticks and wall seconds
 * drift against each other.
 *
 * clock_tick() has one caller (the daemon's main loop); everything else only
 * reads, so plain relaxed atomics are enough.
 */
#include "storage/base/clock.h"

#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#define CLOCK_START 2          /* rel time right after clock_init() */

static _Atomic rel_time_t now_rel;
static _Atomic int64_t started;         /* wall time of rel 0 */
static struct timespec mono_start;      /* written by clock_init() only */
static struct timespec mono_base;       /* when rel was rel_base */
static rel_time_t rel_base = CLOCK_START;

static int64_t
mono_since(const struct timespec *from)
{
    struct timespec ts;
    int64_t sec;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    sec = (int64_t)ts.tv_sec - (int64_t)from->tv_sec;
    if (ts.tv_nsec < from->tv_nsec) {
        sec--;
    }
    return sec < 0 ? 0 : sec;
}

/* The monotonic time at which the wall clock's current second began;
 * that second. */
static int64_t
align(struct timespec *base)
{
    struct timespec wall;

    clock_gettime(CLOCK_REALTIME, &wall);
    clock_gettime(CLOCK_MONOTONIC, base);
    base->tv_nsec -= wall.tv_nsec;
    if (base->tv_nsec < 0) {
        base->tv_nsec += 1000000000;
        base->tv_sec--;
    }
    return (int64_t)wall.tv_sec;
}

void
clock_init(void)
{
    int64_t wall;

    clock_gettime(CLOCK_MONOTONIC, &mono_start);
    wall = align(&mono_base);
    rel_base = CLOCK_START;
    atomic_store(&now_rel, CLOCK_START);
    atomic_store(&started, wall - CLOCK_START);
}

/*
 * Rel 0 becomes `epoch`: now is the wall-clock seconds since then.  A
 * wall clock set back before epoch + CLOCK_START leaves now at
 * CLOCK_START, as if the file were new.
 */
void
clock_adopt_epoch(int64_t epoch)
{
    int64_t wall = align(&mono_base);
    int64_t rel = wall - epoch;

    if (rel < CLOCK_START) {
        rel = CLOCK_START;
    } else if (rel > (int64_t)UINT32_MAX / 2) {
        rel = (int64_t)UINT32_MAX / 2;
    }
    rel_base = (rel_time_t)rel;
    atomic_store(&now_rel, rel_base);
    atomic_store(&started, wall - rel);
}

void
clock_tick(void)
{
    rel_time_t rel = (rel_time_t)(rel_base + mono_since(&mono_base));
    int64_t want = (int64_t)time(NULL) - rel;
    int64_t have = atomic_load_explicit(&started, memory_order_relaxed);

    atomic_store_explicit(&now_rel, rel, memory_order_relaxed);
    if (want > have + 1 || want < have - 1) {
        atomic_store_explicit(&started, want, memory_order_relaxed);
    }
}

uint64_t
clock_until_tick_us(void)
{
    struct timespec ts;
    int64_t ns;

    if (rel_base + mono_since(&mono_base) >
        atomic_load_explicit(&now_rel, memory_order_relaxed)) {
        return 0;       /* a second turned with no tick (at start-up) */
    }
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ns = ((int64_t)ts.tv_nsec - mono_base.tv_nsec + 1000000000) % 1000000000;
    /* a millisecond past the turn, so that the tick sees it */
    return (uint64_t)(1000000000 - ns) / 1000 + 1000;
}

rel_time_t
clock_uptime(void)
{
    return (rel_time_t)(CLOCK_START + mono_since(&mono_start));
}

rel_time_t
clock_now(void)
{
    return atomic_load_explicit(&now_rel, memory_order_relaxed);
}

time_t
clock_process_started(void)
{
    return (time_t)atomic_load_explicit(&started, memory_order_relaxed);
}

/*
 * 1 is the "already expired" answer: it is non-zero (so not "never") and
 * never above now, which starts at CLOCK_START; an item is expired when
 * exptime != 0 && exptime <= now.
 */
rel_time_t
clock_realtime(int64_t exptime)
{
    int64_t base;

    if (exptime == 0) {
        return 0;
    }
    if (exptime < 0) {
        return 1;
    }
    if (exptime <= CLOCK_MAXDELTA) {
        return (rel_time_t)(exptime + clock_now());
    }
    base = atomic_load_explicit(&started, memory_order_relaxed);
    if (exptime <= base) {
        return 1;
    }
    /* Beyond 2^32 s past start: as good as never, but still a time. */
    if (exptime - base > (int64_t)UINT32_MAX) {
        return UINT32_MAX;
    }
    return (rel_time_t)(exptime - base);
}

uint64_t
clock_mono_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

void
clock_deadline(struct timespec *ts, uint64_t us)
{
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_sec += (time_t)(us / 1000000);
    ts->tv_nsec += (long)(us % 1000000) * 1000;
    if (ts->tv_nsec >= 1000000000) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000;
    }
}
