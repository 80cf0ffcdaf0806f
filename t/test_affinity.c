/*
 * test_affinity.c: the cpu-list parser and formatter, and pinning a
 * thread by role.  Lists name only CPUs this process may run on (read
 * first), so the test holds on any machine with at least one CPU.
 */
#include "storage/base/affinity.h"

#include "t/tap.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

static struct cpu_list allowed;

static int
parse(const char *s, struct cpu_list *l, char *err)
{
    return cpu_list_parse(s, l, err, 256);
}

/* A list's text after a parse and a format. */
static const char *
round_trip(const char *s)
{
    static char out[512];
    struct cpu_list l;
    char err[256];

    if (parse(s, &l, err) != 0) {
        snprintf(out, sizeof(out), "error: %s", err);
    } else {
        cpu_list_format(&l, out, sizeof(out));
    }
    return out;
}

static void
test_syntax(void)
{
    char first[16], s[64], want[64];
    unsigned c0 = allowed.cpu[0];

    snprintf(first, sizeof(first), "%u", c0);
    is_str(round_trip(first), first, "one CPU");
    snprintf(s, sizeof(s), "%u-%u", c0, c0);
    is_str(round_trip(s), first, "a range of one");
    snprintf(s, sizeof(s), "%u,%u,%u-%u", c0, c0, c0, c0);
    is_str(round_trip(s), first, "repeats fold into one");
    if (allowed.n >= 2) {
        unsigned c1 = allowed.cpu[1];
        struct cpu_list l;
        char err[256];

        snprintf(s, sizeof(s), "%u,%u", c1, c0);
        ok(parse(s, &l, err) == 0 && l.n == 2 && l.cpu[0] == c0 &&
           l.cpu[1] == c1, "kept ascending whatever the order given");
        snprintf(want, sizeof(want), c1 == c0 + 1 ? "%u-%u" : "%u,%u",
                 c0, c1);
        is_str(round_trip(s), want, "neighbours fold into a range");
    }
}

static void
test_refusals(void)
{
    static const char *const bad[] = {
        "", ",", "0,", ",0", "0,,0", "-", "0-", "-0", "1-0", "a", "0a",
        "0 ", " 0", "0-1-2", "0:1", "+0", "0x1", "1024", "99999999999",
    };
    struct cpu_list l;
    char err[256];

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char name[64];

        snprintf(name, sizeof(name), "refused: \"%s\"", bad[i]);
        ok(parse(bad[i], &l, err) != 0 && err[0] != '\0', name);
    }
    ok(cpu_list_parse(NULL, &l, err, sizeof(err)) != 0, "refused: NULL");
    parse("", &l, err);
    is_str(err, "empty CPU list", "the empty list's message");
    parse("1-0", &l, err);
    is_str(err, "malformed CPU list \"1-0\"", "a backwards range's message");
}

static void
test_not_present(void)
{
    struct cpu_list l;
    char err[256], s[16], have[200], want[300];
    unsigned c = 0;

    /* The first CPU number this process may not run on. */
    for (unsigned i = 0; i < allowed.n && allowed.cpu[i] == c; i++) {
        c++;
    }
    snprintf(s, sizeof(s), "%u", c);
    cpu_list_format(&allowed, have, sizeof(have));
    snprintf(want, sizeof(want), "CPU %u is not present (this process may "
             "run on %s)", c, have);
    ok(parse(s, &l, err) != 0, "a CPU the process may not use is refused");
    is_str(err, want, "and named, with the CPUs it may use");
}

static void
test_format(void)
{
    struct cpu_list l = { .n = 6, .cpu = { 0, 1, 2, 3, 8, 10 } };
    char buf[64];

    cpu_list_format(&l, buf, sizeof(buf));
    is_str(buf, "0-3,8,10", "ranges folded, singles kept");
    l.n = 0;
    cpu_list_format(&l, buf, sizeof(buf));
    is_str(buf, "", "an empty list is empty text");
}

/* A thread that waits until `release` is posted, so that it is alive
 * while it is pinned and read back. */
static pthread_mutex_t hold = PTHREAD_MUTEX_INITIALIZER;

static void *
idle(void *arg)
{
    pthread_mutex_lock(&hold);
    pthread_mutex_unlock(&hold);
    return arg;
}

static unsigned
only_cpu(pthread_t t)
{
    cpu_set_t set;

    pthread_getaffinity_np(t, sizeof(set), &set);
    for (unsigned c = 0; c < CPU_SETSIZE; c++) {
        if (CPU_ISSET(c, &set)) {
            return CPU_COUNT(&set) == 1 ? c : 9999;
        }
    }
    return 9999;
}

static void
test_pinning(void)
{
    struct cpu_list workers = allowed, bg = { .n = 1 };
    pthread_t t;
    cpu_set_t set;

    bg.cpu[0] = allowed.cpu[allowed.n - 1];
    affinity_set(&workers, &bg);
    pthread_mutex_lock(&hold);
    pthread_create(&t, NULL, idle, NULL);
    for (unsigned i = 0; i < 2 * allowed.n; i++) {
        ok(affinity_apply(t, AFFINITY_WORKER, i) == 0 &&
           only_cpu(t) == allowed.cpu[i % allowed.n],
           "the i-th worker on the i-th CPU, round robin");
    }
    ok(affinity_apply(t, AFFINITY_BG, 0) == 0 && only_cpu(t) == bg.cpu[0],
       "a background thread on the background list");
    /* Without a worker list a worker goes back to every CPU, not to the
     * list of the thread that started it. */
    affinity_set(NULL, &bg);
    affinity_apply(t, AFFINITY_WORKER, 0);
    pthread_getaffinity_np(t, sizeof(set), &set);
    is_int(CPU_COUNT(&set), allowed.n, "no worker list: every CPU");
    pthread_mutex_unlock(&hold);
    pthread_join(t, NULL);
    affinity_set(NULL, NULL);
}

int
main(void)
{
    cpu_list_allowed(&allowed);
    ok(allowed.n > 0, "this process may run somewhere");
    test_syntax();
    test_refusals();
    test_not_present();
    test_format();
    test_pinning();
    ok(affinity_node_exists(0), "node 0 exists");
    ok(!affinity_node_exists(AFFINITY_MAX_CPUS), "node 1024 does not");
    ok(affinity_node_count() >= 1, "at least one node");
    ok(affinity_path_node("/no/such/file") == -1, "no file: no node");
    return done_testing();
}
