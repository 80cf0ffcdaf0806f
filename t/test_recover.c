/*
 * test_recover.c: the durable state a restart of the PMEM tier needs.
 * A cache over a strict-mode file in /dev/shm; the superblock is read
 * back from the FILE (its own shared mapping, not the cache's view), so
 * only what was persisted counts: the CAS high-water mark covers every
 * CAS handed out (and the -C sequence), flush_all's cut-off is there in
 * wall-clock seconds before cache_flush returns, and a clean shutdown
 * says so.
 *
 * Then the scan itself: items come back after a clean and an unclean
 * restart; torn, expired, flushed and replaced copies planted in the file
 * (by writing its bytes directly) stay dropped, and so do chains with a
 * missing piece.
 */
#include "storage/cache/cache.h"
#include "storage/base/clock.h"
#include "storage/base/hash.h"
#include "storage/cache/cache_open.h"
#include "storage/cache/cache_stats.h"
#include "storage/slab/item.h"
#include "storage/slab/persist.h"
#include "storage/slab/slabs.h"
#include "storage/tier/sblock.h"
#include "storage/tier/tier.h"
#include "t/cache_test.h"
#include "t/tap.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
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
    uint32_t hv = hash_key(k, strlen(k));
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
    opts.memory_file_size = 64 * MB;
    opts.pmem_strict = true;
    opts.use_cas = use_cas;
}

static bool
start_opts(bool use_cas, bool reinit)
{
    set_opts(use_cas, reinit);
    if (cache_init(&opts, 2) != 0) {
        return false;
    }
    cache_recovery_wait();      /* read back while serving: wait for it */
    return true;
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


/* ---- the recovery scan ---------------------------------------------- */

/* Store k with `len` bytes of value: v repeated, flags fl, exptime 0. */
static uint64_t
put_full(const char *k, char v, size_t len, uint32_t fl)
{
    enum cache_status st;
    struct item *it = cache_alloc(k, strlen(k), test_hv(k), fl, 0,
                                  (uint32_t)len, &st);
    struct iovec iov;
    size_t off = 0;
    uint64_t cas = 0;

    if (it == NULL) {
        return 0;
    }
    while (item_value_iov(it, off, &iov, 1) == 1) {
        memset(iov.iov_base, v, iov.iov_len);
        off += iov.iov_len;
    }
    item_value_iov(it, len, &iov, 1);
    if (iov.iov_len == 2) {
        memcpy(iov.iov_base, "\r\n", 2);
    } else {
        /* "\r\n" split over two pieces */
        ((char *)iov.iov_base)[0] = '\r';
        item_value_iov(it, len + 1, &iov, 1);
        ((char *)iov.iov_base)[0] = '\n';
    }
    if (cache_store(it, CACHE_SET, 0) == CACHE_STORED) {
        cas = item_cas(it);
    }
    cache_release(it);
    return cas;
}

/* Does k hold len bytes of v, flags fl and cas (0: any)? */
static bool
holds(const char *k, char v, size_t len, uint32_t fl, uint64_t cas)
{
    struct item *it = test_get(k);
    struct iovec iov;
    size_t off = 0;
    bool good;

    if (it == NULL) {
        return false;
    }
    good = item_vlen(it) == len && item_client_flags(it) == fl &&
           (cas == 0 || item_cas(it) == cas) && item_value_crlf_ok(it);
    while (good && off < len && item_value_iov(it, off, &iov, 1) == 1) {
        for (size_t i = 0; i < iov.iov_len && off + i < len; i++) {
            good &= ((char *)iov.iov_base)[i] == v;
        }
        off += iov.iov_len;
    }
    cache_release(it);
    return good;
}

/* Offset in the file of an address in the cache's mapping. */
static off_t
file_off(const void *addr)
{
    return (off_t)((const char *)addr -
                   (const char *)tier_pmem_base(slabs_tier(TIER_PMEM)));
}

/* Where k's item and its prefix sit in the file; -1 if missing. */
static off_t
item_off(const char *k)
{
    struct item *it = test_get(k);
    off_t off;

    if (it == NULL) {
        return -1;
    }
    off = file_off(it);
    cache_release(it);
    return off;
}

/* Write (or read) len bytes of the file at off, behind the cache's back. */
static bool
file_io(off_t off, void *bytes, size_t len, bool write)
{
    int fd = open(path, write ? O_RDWR : O_RDONLY);
    ssize_t n = -1;

    if (fd >= 0) {
        n = write ? pwrite(fd, bytes, len, off) : pread(fd, bytes, len, off);
        close(fd);
    }
    return n == (ssize_t)len;
}

static bool
poke(off_t off, const void *bytes, size_t len)
{
    return file_io(off, (void *)(uintptr_t)bytes, len, true);
}

static bool
peek(off_t off, void *bytes, size_t len)
{
    return file_io(off, bytes, len, false);
}

/* As after a crash: the superblock says the last run did not end
 * cleanly, so the next start checks every checksum. */
static bool
mark_unclean(void)
{
    struct tier_pmem_options o = { .path = path, .page_size = MB,
                                   .reserve = MB };
    char err[256];
    struct tier *t = tier_pmem_open(&o, err, sizeof(err));
    struct sblock sb;
    uint32_t size = 1;
    struct sblock_params p = { .page_size = 1, .nclasses = 1,
                               .class_sizes = &size };
    int st;

    if (t == NULL) {
        return false;
    }
    st = sblock_load(t, tier_pmem_base(t), &p, &sb, err, sizeof(err));
    if (st == SBLOCK_OK || st == SBLOCK_INCOMPATIBLE) {
        /* as a crash under another boot: every item is checked */
        sb.clean = false;
        memset(sb.boot_id, 0, sizeof(sb.boot_id));
        sblock_commit(&sb);
    }
    tier_destroy(&t);
    return st == SBLOCK_OK || st == SBLOCK_INCOMPATIBLE;
}

static struct cache_recovery
restart(bool clean)
{
    struct cache_recovery r;

    memset(&r, 0xff, sizeof(r));
    cache_shutdown();
    if ((clean || mark_unclean()) && start(true)) {
        cache_recovery_stats(&r);
    }
    return r;
}

#define BIG (700 * 1024)        /* a chunked value */

static uint64_t cas_a, cas_big;

static void
test_recover_items(void)
{
    struct cache_recovery r;
    char k[32];

    if (!ok(start_opts(true, true), "a fresh file for the scan tests")) {
        return;
    }
    for (int i = 0; i < 300; i++) {
        snprintf(k, sizeof(k), "r%d", i);
        put_full(k, (char)('a' + i % 26), (size_t)(i * 37 % 5000), i);
    }
    cas_a = put_full("a", 'A', 10, 7);
    cas_big = put_full("big", 'B', BIG, 9);
    put_full("gone", 'g', 5, 0);
    cache_delete("gone", 4, test_hv("gone"), 0, NULL);
    put_full("twice", '1', 5, 0);
    put_full("twice", '2', 6, 0);
    r = restart(true);
    is_int(r.items, 303, "clean restart: every live item comes back");
    is_int(r.checksummed, 0, "the checksum pass is skipped");
    is_int(r.dropped_torn + r.dropped_expired + r.dropped_flushed +
           r.dropped_replaced, 0, "none dropped");
    ok(holds("a", 'A', 10, 7, cas_a), "a: value, flags and cas");
    ok(holds("big", 'B', BIG, 9, cas_big), "the chunked value is whole");
    ok(holds("r299", 'a' + 299 % 26, 299 * 37 % 5000, 299, 0), "r299");
    ok(test_get("gone") == NULL, "a deleted item stays deleted");
    ok(holds("twice", '2', 6, 0, 0), "a replaced item has its new value");
    ok(put_full("new", 'n', 1, 0) > cas_big, "new CAS values are higher");
    r = restart(false);
    is_int(r.items, 304, "unclean restart: the same items");
    is_int(r.checksummed, 1, "with the checksum pass");
    ok(holds("big", 'B', BIG, 9, cas_big), "big still whole");
}

/* A value byte changed in the file: the crc catches it. */
static void
test_recover_torn(void)
{
    struct cache_recovery r;
    off_t off = item_off("a");
    bool poked = off > 0 && poke(off + 48 + 8 + 2 + 4, "Z", 1);

    ok(poked, "a value byte of a changed in the file");
    r = restart(false);
    is_int(r.dropped_torn, 1, "one torn item");
    is_int(r.items, 303, "the others come back");
    ok(test_get("a") == NULL, "the torn item is not served");
    r = restart(false);
    is_int(r.dropped_torn, 0, "its commit word was cleared: not seen again");
}

/* Store k twice with len value bytes; the file offset of the first copy's
 * commit word, that word as it was, and the second copy's.  (The first
 * copy's chunk is free then: the next store of that class takes it.) */
static off_t
replace_twice(const char *k, size_t len, uint64_t *old, uint64_t *newer)
{
    off_t o1, o2;

    put_full(k, 'o', len, 0);
    o1 = item_off(k) - PERSIST_PREFIX;
    peek(o1, old, sizeof(*old));
    put_full(k, 'n', len, 0);
    o2 = item_off(k) - PERSIST_PREFIX;
    peek(o2, newer, sizeof(*newer));
    return o1;
}

/* The old copy of a replaced key made live again, as a crash between a
 * replace's commit and its kill leaves it: the higher seq wins, whichever
 * copy the scan meets first.  (A clean stop never leaves two copies, and
 * the restart after one does not look for them.) */
static void
test_recover_duplicate(void)
{
    struct cache_recovery r;
    struct cache_stats st;
    uint64_t old1, new1, old2, new2;
    off_t o1 = replace_twice("dup1", 3, &old1, &new1);
    off_t o2 = replace_twice("dup2", 3000, &old2, &new2);

    cache_shutdown();
    old2 = new2 + 4;
    ok((old1 & 1) && new1 > old1 && poke(o1, &old1, sizeof(old1)),
       "dup1's replaced copy is live again in the file");
    ok(poke(o2, &old2, sizeof(old2)), "dup2's, with a seq above its "
       "newer copy's");
    if (!ok(mark_unclean() && start(true), "restart after the crash")) {
        return;
    }
    cache_recovery_stats(&r);
    cache_stats(&st);
    is_int(r.dropped_replaced, 2, "one copy of each dropped");
    is_int(st.curr_items, r.items, "the items counted are the items linked "
           "(a copy the scan linked and a later one replaced is not)");
    ok(holds("dup1", 'n', 3, 0, 0), "dup1: the newer value wins");
    ok(holds("dup2", 'o', 3000, 0, 0), "dup2: the copy with the higher seq "
       "wins");
}

/* exptime is outside the crc: planted as already expired. */
static void
test_recover_expired(void)
{
    struct cache_recovery r;
    rel_time_t one = 1;
    off_t off = item_off("r5");

    ok(off > 0 && poke(off + offsetof(struct item, exptime), &one,
                       sizeof(one)), "r5 expired in the file");
    r = restart(false);
    is_int(r.dropped_expired, 1, "one expired item dropped");
    ok(test_get("r5") == NULL, "r5 is gone");
    ok(test_get("r6") != NULL, "r6 is not");
}

/* A piece of the chunked value renumbered: the chain has a gap, dropped
 * even after a clean shutdown, when no checksum is read. */
static void
test_recover_chain(void)
{
    struct cache_recovery r;
    struct item *big = test_get("big");
    struct iovec iov;
    uint32_t bad = 7;
    off_t off;

    if (!ok(big != NULL, "big is there")) {
        return;
    }
    item_value_iov(big, 0, &iov, 1);
    off = file_off(iov.iov_base) - (off_t)sizeof(struct item_chunk) -
          PERSIST_PREFIX + 8;
    cache_release(big);
    cache_shutdown();
    ok(poke(off, &bad, sizeof(bad)), "big's first piece renumbered");
    if (!ok(start(true), "clean restart")) {
        return;
    }
    cache_recovery_stats(&r);
    is_int(r.checksummed, 0, "no checksum pass");
    is_int(r.dropped_torn, 1, "the broken chain is dropped");
    ok(test_get("big") == NULL, "big is not served");
}

/* flush_all covers everything stored up to its cut-off: at once (the
 * items may already be gone before the restart), and delayed (still
 * pending at the restart, applied when its time comes after it). */
static void
test_recover_flushed(void)
{
    struct cache_recovery r;
    uint64_t items;

    cache_recovery_stats(&r);
    items = r.items;
    clock_tick();
    cache_flush(clock_now());
    r = restart(true);
    /* flush_all unlinks (and kills in the file) what it finds at once;
     * recovery drops the rest as flushed. */
    ok(r.dropped_flushed <= items,
       "no more dropped as flushed than there were");
    is_int(r.items, 0, "none of them comes back");
    put_full("late", 'l', 4, 0);
    clock_tick();               /* nothing ticks the clock in this test */
    /* Far enough ahead that a slow restart (a sanitizer build on a busy
     * machine) still comes before it. */
    cache_flush(clock_now() + 5);
    r = restart(true);
    is_int(r.items, 1, "a pending flush_all keeps the item for now");
    ok(holds("late", 'l', 4, 0, 0), "late is served");
    cache_shutdown();
    sleep(6);
    if (!ok(start(true), "restart after the flush time")) {
        return;
    }
    cache_recovery_stats(&r);
    is_int(r.dropped_flushed, 1,
           "the flush_all still applies after the restart");
    ok(test_get("late") == NULL, "late is gone");
    cache_shutdown();
}

/* One random byte changed in each of 200 items, anywhere from the commit
 * word to the end of the value: each key then holds its own value or is
 * gone, never anything else, and the scan survives every change. */
static void
test_recover_mutations(void)
{
    struct cache_recovery r;
    off_t off[200];
    size_t len[200];
    unsigned bad = 0, back = 0;
    char k[32];

    if (!ok(start_opts(true, true), "a fresh file for the mutations")) {
        return;
    }
    srandom(42);
    for (int i = 0; i < 200; i++) {
        snprintf(k, sizeof(k), "m%d", i);
        len[i] = (size_t)(i * 13 % 300);
        put_full(k, (char)('a' + i % 26), len[i], (uint32_t)i);
        off[i] = item_off(k);
    }
    cache_shutdown();
    for (int i = 0; i < 200; i++) {
        size_t span = PERSIST_PREFIX + 48 + 8 + 5 + 4 + len[i] + 2;
        off_t at = off[i] - PERSIST_PREFIX + (off_t)(random() % span);
        unsigned char b;

        peek(at, &b, 1);
        b ^= (unsigned char)(1 + random() % 255);
        poke(at, &b, 1);
    }
    ok(mark_unclean() && start(true), "restart over the changed file");
    cache_recovery_stats(&r);
    for (int i = 0; i < 200; i++) {
        struct item *it;

        snprintf(k, sizeof(k), "m%d", i);
        it = test_get(k);
        if (it != NULL) {
            cache_release(it);
            back++;
            bad += !holds(k, (char)('a' + i % 26), len[i], (uint32_t)i, 0);
        }
    }
    is_int(bad, 0, "every item that comes back is whole");
    ok(r.dropped_torn > 100, "most changes are caught as torn");
    ok(back < 100, "only changes outside the checksum come back");
    cache_shutdown();
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
    test_recover_items();
    test_recover_torn();
    test_recover_duplicate();
    test_recover_expired();
    test_recover_chain();
    test_recover_flushed();
    unlink(path);
    test_recover_mutations();
    unlink(path);
    return done_testing();
}
