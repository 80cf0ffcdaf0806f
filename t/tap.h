/*
 * tap.h: the smallest TAP producer that the unit tests need.
 *
 * Each test file calls ok()/is_int()/is_str() and ends with done_testing(),
 * which prints the plan and returns the exit status.  Failures print the
 * file and line as TAP diagnostics so that `make check` shows where.
 */
#ifndef MCPM_T_TAP_H
#define MCPM_T_TAP_H

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static int tap_count;
static int tap_failed;

static inline int
tap_ok(int cond, const char *file, int line, const char *name)
{
    tap_count++;
    if (!cond) {
        tap_failed++;
    }
    printf("%sok %d - %s\n", cond ? "" : "not ", tap_count, name);
    if (!cond) {
        printf("#   failed at %s:%d\n", file, line);
    }
    fflush(stdout);
    return cond;
}

#define ok(cond, name) tap_ok(!!(cond), __FILE__, __LINE__, (name))

#define is_int(got, want, name) do {                                        \
    int64_t got_ = (int64_t)(got), want_ = (int64_t)(want);                 \
    if (!tap_ok(got_ == want_, __FILE__, __LINE__, (name))) {               \
        printf("#   got %" PRId64 ", want %" PRId64 "\n", got_, want_);     \
    }                                                                       \
} while (0)

#define is_mem(got, gotlen, want, name) do {                                \
    size_t gl_ = (size_t)(gotlen), wl_ = strlen(want);                      \
    int eq_ = gl_ == wl_ && memcmp((got), (want), wl_) == 0;                \
    if (!tap_ok(eq_, __FILE__, __LINE__, (name))) {                         \
        printf("#   got  '%.*s'\n#   want '%s'\n", (int)gl_,                \
               (const char *)(got), (want));                               \
    }                                                                       \
} while (0)

#define is_str(got, want, name) is_mem((got), strlen(got), (want), (name))

static inline int
done_testing(void)
{
    printf("1..%d\n", tap_count);
    return tap_failed == 0 ? 0 : 1;
}

#endif
