/*
 * test_clock.c: start offset, ticking, and the exptime conversion rules
 * (never, already expired, relative, absolute, absolute before start).
 */
#include "storage/base/clock.h"

#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "t/tap.h"

/* What the cache does with an exptime: expired when set and <= now. */
static int
expired(rel_time_t exptime)
{
    return exptime != 0 && exptime <= clock_now();
}

static void
test_start(void)
{
    time_t before = time(NULL);

    clock_init();
    is_int(clock_now(), 2, "rel time starts at 2");
    ok(clock_process_started() >= before - 2 &&
       clock_process_started() <= time(NULL) - 2,
       "process_started is the wall time of rel 0");
    clock_tick();
    is_int(clock_now(), 2, "an early tick keeps rel time");
}

static void
test_relative(void)
{
    rel_time_t now = clock_now();

    is_int(clock_realtime(0), 0, "0 stays 0 (never)");
    ok(!expired(clock_realtime(0)), "0 never expires");
    is_int(clock_realtime(1), now + 1, "1 s is relative");
    is_int(clock_realtime(100), now + 100, "100 s is relative");
    is_int(clock_realtime(CLOCK_MAXDELTA), now + CLOCK_MAXDELTA,
           "30 days is still relative");
    ok(!expired(clock_realtime(1)), "a 1 s ttl is live right away");
}

static void
test_negative(void)
{
    ok(expired(clock_realtime(-1)), "-1 is expired");
    ok(expired(clock_realtime(-1000000)), "-1000000 is expired");
    ok(expired(clock_realtime(INT64_MIN)), "INT64_MIN is expired");
    ok(clock_realtime(-1) != 0, "negative is not 'never'");
}

static void
test_absolute(void)
{
    int64_t wall = (int64_t)time(NULL);
    int64_t started = (int64_t)clock_process_started();
    rel_time_t now = clock_now();
    rel_time_t r = clock_realtime(wall + 1000);

    ok(r >= now + 999 && r <= now + 1001, "absolute now+1000 converts");
    is_int(clock_realtime(started + 5), 5, "absolute start+5 is rel 5");
    ok(expired(clock_realtime(CLOCK_MAXDELTA + 1)),
       "absolute time in 1970 is expired");
    ok(expired(clock_realtime(started)), "absolute start time is expired");
    ok(expired(clock_realtime(wall - 10)), "absolute past time is expired");
    is_int(clock_realtime(INT64_MAX), UINT32_MAX,
           "far future clamps to the largest rel time");
    ok(!expired(clock_realtime(INT64_MAX)), "far future is live");
}

/* Rel time the wall clock says it is: its seconds since rel 0. */
static int64_t
wall_rel(int64_t epoch, long *ns)
{
    struct timespec w;

    clock_gettime(CLOCK_REALTIME, &w);
    *ns = w.tv_nsec;
    return (int64_t)w.tv_sec - epoch;
}

static void
test_tick(void)
{
    rel_time_t r = clock_realtime(1);
    int64_t started = (int64_t)clock_process_started();
    long ns;

    usleep(clock_until_tick_us());
    clock_tick();
    is_int(clock_now(), wall_rel(started, &ns),
           "the tick after the wall clock's second turned counts it");
    usleep(clock_until_tick_us());
    clock_tick();
    ok(expired(r), "a 1 s ttl set before two turns has expired");
    is_int(clock_now(), wall_rel(started, &ns), "another second, another "
           "step, with the wall clock");
}

/*
 * A node that adopts a file's epoch at any fraction of a second counts
 * its seconds with the wall clock, as its predecessor did: sampled over
 * a second and a half, ticked as the daemon ticks, rel time is the wall
 * clock's seconds since the epoch (but in the millisecond of a turn).
 */
static void
test_adopt_aligned(void)
{
    int64_t epoch = (int64_t)time(NULL) - 1000;
    unsigned off = 0, n = 0;
    uint64_t end;
    long ns;

    usleep(300 * 1000);             /* mid-second, whatever the phase */
    clock_adopt_epoch(epoch);
    end = clock_mono_us() + 1500 * 1000;
    while (clock_mono_us() < end) {
        int64_t want;

        if (clock_until_tick_us() <= 7000) {
            usleep(clock_until_tick_us());
            clock_tick();
        }
        want = wall_rel(epoch, &ns);
        if (ns > 3000000 && ns < 995000000) {
            off += clock_now() != want;
            n++;
        }
        usleep(5000);
    }
    ok(n > 100, "sampled the second and a half");
    is_int(off, 0, "rel time is the wall clock's second at every sample");
    is_int((int64_t)clock_process_started(), epoch,
           "and its rel 0 the epoch");
}

/* A second that turns between the start (or an adoption) and the first
 * tick is due at once: the daemon arms its first tick after start-up,
 * and a tick armed for the turn after would leave the clock a second
 * behind for a second. */
static void
test_turn_due_at_once(void)
{
    long ns;

    do {
        usleep(1000);
        (void)wall_rel(0, &ns);
    } while (ns < 900000000 || ns > 950000000);
    clock_adopt_epoch((int64_t)time(NULL) - 100);
    ok(clock_until_tick_us() >= 40000, "before the turn: due at the turn");
    do {
        usleep(1000);
        (void)wall_rel(0, &ns);
    } while (ns > 500000000);
    is_int(clock_until_tick_us(), 0, "a second turned with no tick: due");
    clock_tick();
    ok(clock_until_tick_us() > 400000, "ticked: the next turn is due");
}

int
main(void)
{
    test_start();
    test_relative();
    test_negative();
    test_absolute();
    test_tick();
    test_adopt_aligned();
    test_turn_due_at_once();
    return done_testing();
}
