/*
 * test_recover.c: the durable state a restart of the PMEM tier needs.
 * A cache over a strict-mode file in /dev/shm; the superblock is read
 * back from the FILE (its own shared mapping, not the cache's view), so
 * only what was persisted counts: the CAS high-water mark covers every
 * CAS handed out (and the -C sequence), flush_all's cut-off is there in
 * wall-clock seconds before cache_flush returns, and a clean shutdown
 * says so.
 */
#include "storage/cache.h"
#include "storage/clock.h"
#include "storage/hash.h"
#include "storage/item.h"
#include "storage/sblock.h"
#include "t/cache_test.h"
#include "t/tap.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define MB ((size_t)1 << 20)

static struct cache_options opts;
static char path[128];

/* The superblock state as the file holds it; false if unreadable. */
static bool
file_sblock(struct sblock *out)
{
    /* Params that cannot match: the load reports INCOMPATIBLE but still
     * fills *out with what the file says. */
    uint32_t size = 1;
    struct sblock_params p = { .page_size = 1, .nclasses = 1,
                               .class_sizes = &size };
    char err[512];
    int fd = open(path, O_RDONLY);
    void *base;
    int st;

    if (fd < 0) {
        return false;
    }
    base = mmap(NULL, SBLOCK_SIZE, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (base == MAP_FAILED) {
        return false;
    }
    st = sblock_load(NULL, base, &p, out, err, sizeof(err));
    munmap(base, SBLOCK_SIZE);
    return st == SBLOCK_OK || st == SBLOCK_INCOMPATIBLE;
}

static uint64_t
put(const char *k, const char *v)
{
    enum cache_status st;
    uint32_t hv = hash_murmur3(k, strlen(k));
    struct item *it = cache_alloc(k, strlen(k), hv, 0, 0,
                                  (uint32_t)strlen(v), &st);
    uint64_t cas = 0;

    if (it == NULL) {
        return 0;
    }
    memcpy(item_value(it), v, strlen(v));
    memcpy(item_value(it) + strlen(v), "\r\n", 2);
    if (cache_store(it, CACHE_SET, 0) == CACHE_STORED) {
        cas = item_cas(it);
    }
    cache_release(it);
    return cas;
}

static void
set_opts(bool use_cas, bool reinit)
{
    test_cache_options(&opts);
    opts.memory_file_reinit = reinit;
    opts.tier_policy = CACHE_TIER_PMEM;
    opts.memory_file = path;
    opts.memory_file_size = 16 * MB;
    opts.pmem_strict = true;
    opts.use_cas = use_cas;
}

static bool
start_opts(bool use_cas, bool reinit)
{
    set_opts(use_cas, reinit);
    return cache_init(&opts, 2) == 0;
}

static bool
start(bool use_cas)
{
    return start_opts(use_cas, false);
}

static void
test_cas_hwm(void)
{
    struct sblock sb;
    uint64_t last = 0;
    char k[32];

    for (int i = 0; i < 100; i++) {
        snprintf(k, sizeof(k), "key%d", i);
        last = put(k, "value");
    }
    ok(last > 0, "100 stores got a CAS");
    ok(file_sblock(&sb), "superblock readable from the file");
    ok(sb.cas_hwm >= last, "the file's cas_hwm covers the last CAS");
    ok(sb.cas_hwm <= last + SBLOCK_SEQ_BLOCK,
       "raised by one block, not more");
    ok(!sb.clean, "a serving cache is not clean");
}

static void
test_flush_time(void)
{
    struct sblock sb;
    rel_time_t when = clock_now() - 1;
    int64_t wall = (int64_t)clock_process_started() + when;

    cache_flush(when);
    ok(file_sblock(&sb), "superblock readable after flush_all");
    is_int(sb.flush_time, wall, "flush cut-off durable in wall seconds");
    ok(sb.flush_time > (int64_t)time(NULL) - 120 &&
       sb.flush_time <= (int64_t)time(NULL), "and it is about now");
}

static void
test_clean_shutdown(void)
{
    struct sblock sb;

    cache_shutdown();
    ok(file_sblock(&sb), "superblock readable after shutdown");
    ok(sb.clean, "a clean shutdown is recorded");
}

/* -C: the sequence numbers of commits are covered the same way (the
 * file was written with CAS: only memory_file_reinit takes it). */
static void
test_seq_hwm(void)
{
    struct sblock sb;

    if (!ok(start_opts(false, true), "-C with memory_file_reinit")) {
        return;
    }
    ok(file_sblock(&sb) && sb.cas_hwm == 0, "fresh file, no mark yet");
    put("a", "1");
    ok(file_sblock(&sb) && sb.cas_hwm >= 1 &&
       sb.cas_hwm <= 1 + SBLOCK_SEQ_BLOCK, "first -C commit raised it");
    cache_shutdown();
}

/* A restart on the same file hands out only CAS values above the last. */
static void
test_cas_after_restart(void)
{
    uint64_t before, after;

    if (!ok(start(true), "restart on the file")) {
        return;
    }
    before = put("x", "1");
    cache_shutdown();
    if (!ok(start(true), "and again")) {
        return;
    }
    after = put("y", "2");
    ok(before > 0 && after > before, "CAS after the restart is higher");
    cache_shutdown();
}

/* The same under -C for the sequence counter: the mark only grows. */
static void
test_cas_after_restart_seq(void)
{
    struct sblock a, b;

    ok(file_sblock(&a), "mark before a -C restart");
    if (!ok(start(false), "-C restart")) {
        return;
    }
    put("z", "1");
    cache_shutdown();
    ok(file_sblock(&b) && b.cas_hwm > a.cas_hwm,
       "the first -C commit after it raised the mark above the old one");
}

/* Another CAS setting is another item layout: refused, unless asked to
 * discard the file. */
static void
test_incompatible(void)
{
    struct sblock sb;

    ok(!start(false), "a file written with CAS is refused under -C");
    ok(file_sblock(&sb) && sb.use_cas, "and left as it was");
    if (!ok(start_opts(false, true), "memory_file_reinit discards it")) {
        return;
    }
    cache_shutdown();
    ok(file_sblock(&sb) && !sb.use_cas, "the file now says -C");
}

/* Both superblock copies torn: corrupt, refused the same way. */
static void
test_corrupt(void)
{
    int fd = open(path, O_RDWR);
    bool wrote = fd >= 0 && pwrite(fd, "XX", 2, 40) == 2 &&
                 pwrite(fd, "XX", 2, 4096 + 40) == 2;

    if (fd >= 0) {
        close(fd);
    }
    ok(wrote, "both superblock copies damaged");
    ok(!start(false), "a corrupt superblock is refused");
    if (ok(start_opts(false, true), "memory_file_reinit discards it")) {
        cache_shutdown();
    }
}

/* -I does not change the classes, but items above the new limit could
 * come back: refused too. */
static void
test_item_max(void)
{
    set_opts(false, false);
    opts.item_size_max = 2 * MB;
    ok(cache_init(&opts, 2) != 0, "a file written under another -I is "
       "refused");
    if (ok(start(false), "the old -I still takes it")) {
        cache_shutdown();
    }
}

int
main(void)
{
    snprintf(path, sizeof(path), "/dev/shm/mcpm-test-recover.%d",
             (int)getpid());
    unlink(path);
    clock_init();
    if (!ok(start(true), "cache on a strict memory file")) {
        unlink(path);
        return done_testing();
    }
    test_cas_hwm();
    test_flush_time();
    test_clean_shutdown();
    test_seq_hwm();
    test_cas_after_restart_seq();
    unlink(path);
    test_cas_after_restart();
    test_incompatible();
    test_corrupt();
    test_item_max();
    unlink(path);
    return done_testing();
}
