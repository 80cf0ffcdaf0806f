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

static void
test_tick(void)
{
    rel_time_t r = clock_realtime(1);

    usleep(1100 * 1000);
    clock_tick();
    is_int(clock_now(), 3, "a tick after a second advances to 3");
    ok(expired(r), "a 1 s ttl set before the tick has expired");
    usleep(1000 * 1000);
    clock_tick();
    is_int(clock_now(), 4, "another second, another step");
    ok((int64_t)clock_process_started() + clock_now() >=
       (int64_t)time(NULL) - 1, "started + now tracks the wall clock");
}

int
main(void)
{
    test_start();
    test_relative();
    test_negative();
    test_absolute();
    test_tick();
    return done_testing();
}
