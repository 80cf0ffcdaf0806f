/*
 * clock.h: the cache's coarse clock, in seconds since the process started
 * (memcached's rel_time_t), and the conversion of protocol exptimes to it.
 *
 * The daemon calls clock_tick() once a second from its main loop; readers
 * call clock_now() freely (a relaxed atomic load).  Like memcached, time
 * starts at a small positive value so that 0 can mean "never".
 */
#ifndef MCPM_STORAGE_CLOCK_H
#define MCPM_STORAGE_CLOCK_H

#include <stdint.h>
#include <time.h>

typedef uint32_t rel_time_t;

#define CLOCK_MAXDELTA (60 * 60 * 24 * 30)   /* larger exptimes are absolute */

/* Start the clock: now becomes a small positive rel_time_t. */
void clock_init(void);

/* With a memory file, items carry times from earlier runs: count rel time
 * from the file's epoch (wall-clock seconds of its rel 0) instead.  Call
 * after clock_init(), before serving. */
void clock_adopt_epoch(int64_t epoch);

/* Refresh now from the system clock; called once a second. */
void clock_tick(void);

/* Microseconds from now until just after the clock's next second: when
 * to call clock_tick() next (its seconds turn with the wall clock's); 0
 * when a second turned since the last tick. */
uint64_t clock_until_tick_us(void);

/* Seconds since start (or since the adopted epoch), plus the start
 * offset. */
rel_time_t clock_now(void);

/* Seconds the process has run, plus the start offset ("uptime"). */
rel_time_t clock_uptime(void);

/* Wall-clock time of rel_time_t 0, for "time" in stats and absolute TTLs. */
time_t clock_process_started(void);

/*
 * A protocol exptime to rel_time_t: 0 stays 0 (never expires), a negative
 * value gives an already-expired time, a value up to CLOCK_MAXDELTA is
 * relative to now, a larger one an absolute Unix time.
 */
rel_time_t clock_realtime(int64_t exptime);

/* Microseconds of the monotonic clock, for measuring durations. */
uint64_t clock_mono_us(void);

/* The CLOCK_REALTIME instant `us` microseconds from now: a deadline for
 * pthread_cond_timedwait(). */
void clock_deadline(struct timespec *ts, uint64_t us);

#endif
