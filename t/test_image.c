/*
 * test_image.c: the DRAM index a node hands its successor (cache.h
 * cache_image_write()), in one process: a cache over a memory file in
 * /dev/shm stops, writes its image into a memfd and frees everything,
 * so that the next cache_init() finds the file's old address free and
 * takes the image instead of scanning.  Every item comes back, with its
 * value and CAS, chunked values too; stores, deletes and evictions go on;
 * a scan afterwards finds the same file.  An image of another generation
 * of the file, or of a cache with items in DRAM, is not taken: the file
 * is scanned, as it is for one that points outside the file.
 */
#include "storage/cache/cache.h"
#include "storage/base/clock.h"
#include "storage/base/hash.h"
#include "storage/cache/cache_image.h"
#include "storage/cache/cache_open.h"
#include "storage/cache/cache_stats.h"
#include "storage/slab/item.h"
#include "t/cache_test.h"
#include "t/tap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define MB  ((size_t)1 << 20)
#define N   20000
#define BIG (700 * 1024)        /* a chunked value */

static struct cache_options opts;
static char path[128];
static char big[BIG];
static bool grow;               /* the table grows (its expander runs) */

static bool
put(const char *k, const char *v, size_t n)
{
    enum cache_status st;
    struct item *it = cache_alloc(k, strlen(k), test_hv(k), 7, 0,
                                  (uint32_t)n, &st);
    struct iovec iov[64];
    size_t off = 0, cnt;
    bool stored;

    if (it == NULL) {
        return false;
    }
    while (off < n && (cnt = item_value_iov(it, off, iov, 64)) > 0) {
        for (size_t i = 0; i < cnt && off < n; i++) {
            size_t take = iov[i].iov_len < n - off ? iov[i].iov_len
                                                   : n - off;

            memcpy(iov[i].iov_base, v + off, take);
            off += take;
        }
    }
    item_value_iov(it, n, iov, 1);
    memcpy(iov[0].iov_base, "\r\n", 2);
    stored = cache_store(it, CACHE_SET, 0) == CACHE_STORED;
    cache_release(it);
    return stored;
}

static void
set_opts(enum cache_tier_policy policy, int image_fd)
{
    test_cache_options(&opts);
    opts.tier_policy = policy;
    opts.memory_file = path;
    opts.memory_file_size = 64 * MB;
    opts.mem_limit = 16 * MB;
    opts.image_fd = image_fd;
    opts.hash_expand = grow;
}

/* Wait (a deadline of ten seconds) until the image would take more than
 * bytes: the expander has grown the table. */
static bool
grown_past(size_t bytes)
{
    struct timespec ms = { 0, 1000000 };

    for (int i = 0; i < 10000; i++) {
        cache_tick();
        if (cache_image_size() > bytes) {
            return true;
        }
        nanosleep(&ms, NULL);
    }
    return false;
}

/* Stop, write the image (its fd, or -1 when none was written), free. */
static int
stop_with_image(void)
{
    int fd = memfd_create("test-image", MFD_CLOEXEC);

    cache_stop(false);
    if (cache_image_write(fd, NULL) != 0) {
        close(fd);
        fd = -1;
    }
    cache_shutdown();
    return fd;
}

static void *file_range(int fd);
static size_t guard_len;

/* Start over the file, with image fd (closed after); the recovery's
 * figures.  The file's range is held first, as a successor holds it, so
 * that nothing mapped meanwhile (the image, a sanitizer's memory) takes
 * it. */
static struct cache_recovery
start(enum cache_tier_policy policy, int fd)
{
    struct cache_recovery r;
    void *guard = fd >= 0 ? file_range(fd) : MAP_FAILED;

    memset(&r, 0xff, sizeof(r));
    set_opts(policy, fd);
    if (guard != MAP_FAILED) {
        opts.image_hold_base = (uint64_t)(uintptr_t)guard;
        opts.image_hold_len = guard_len;
    }
    if (cache_init(&opts, 2) == 0) {
        cache_recovery_wait();
        cache_recovery_stats(&r);
    }
    if (fd >= 0) {
        close(fd);
    }
    return r;
}

static void
key(char *k, size_t len, int i)
{
    snprintf(k, len, "key%d", i);
}

/* Items 0..N-1 hold "v<i>" but every 7th, deleted, and the big one. */
static bool
all_there(void)
{
    char k[32], v[32];
    bool good = true;
    struct item *it;

    for (int i = 0; i < N && good; i++) {
        key(k, sizeof(k), i);
        snprintf(v, sizeof(v), "v%d", i);
        good = strcmp(test_val(k), i % 7 == 0 ? "" : v) == 0;
    }
    if ((it = test_get("big")) == NULL) {
        return false;
    }
    good &= item_vlen(it) == BIG;
    for (size_t off = 0; good && off < BIG;) {
        struct iovec iov[16];
        size_t cnt = item_value_iov(it, off, iov, 16);

        for (size_t i = 0; i < cnt && off < BIG; i++) {
            size_t take = iov[i].iov_len < BIG - off ? iov[i].iov_len
                                                     : BIG - off;

            good &= memcmp(iov[i].iov_base, big + off, take) == 0;
            off += take;
        }
    }
    cache_release(it);
    return good;
}

static void
fill(void)
{
    char k[32], v[32];
    bool stored = true;

    for (int i = 0; i < N; i++) {
        key(k, sizeof(k), i);
        snprintf(v, sizeof(v), "v%d", i);
        stored &= put(k, v, strlen(v));
    }
    for (int i = 0; i < N; i += 7) {
        key(k, sizeof(k), i);
        cache_delete(k, strlen(k), test_hv(k), 0, NULL);
    }
    for (size_t i = 0; i < BIG; i++) {
        big[i] = (char)('a' + i % 23);
    }
    ok(stored && put("big", big, BIG), "items stored, a chunked one too");
}

static void
test_image_taken(void)
{
    struct cache_recovery r;
    uint64_t cas = 0;
    struct item *it;
    int fd;

    fill();
    it = test_get("key1");
    if (it != NULL) {
        cas = item_cas(it);
        cache_release(it);
    }
    fd = stop_with_image();
    ok(fd >= 0, "a cache with every item in the file writes its image");
    r = start(CACHE_TIER_PMEM, fd);
    ok(r.image == 1, "the successor took the image");
    ok(r.checksummed == 0 && r.scan_seconds == 0, "no scan");
    ok(r.items == N - (N + 6) / 7 + 1, "every item counted");
    ok(all_there(), "every item there, the chunked value whole");
    it = test_get("key1");
    ok(it != NULL && item_cas(it) == cas, "its CAS kept");
    if (it != NULL) {
        cache_release(it);
    }
    /* The lists, the free lists and the table go on. */
    ok(put("after", "yes", 3) && strcmp(test_val("after"), "yes") == 0,
       "a store after");
    ok(cache_delete("key2", 4, test_hv("key2"), 0, NULL) == CACHE_DELETED &&
       put("key2", "v2", 2), "a delete and a store again");
    /* A scan now finds the same items. */
    fd = stop_with_image();
    close(fd);
    r = start(CACHE_TIER_PMEM, -1);
    ok(r.image == 0 && r.dropped_torn == 0 && r.items ==
       N - (N + 6) / 7 + 2, "a scan after finds the same file");
    ok(all_there() && strcmp(test_val("after"), "yes") == 0,
       "every item there");
}

static void
test_image_of_another_generation(void)
{
    struct cache_recovery r;
    int fd = stop_with_image();

    /* The file is opened and written in between: the image is old. */
    r = start(CACHE_TIER_PMEM, -1);
    ok(r.image == 0 && put("between", "x", 1), "a start in between");
    cache_stop(false);
    cache_shutdown();
    r = start(CACHE_TIER_PMEM, fd);
    ok(r.image == 0, "an image of an older generation is not taken");
    ok(all_there() && strcmp(test_val("between"), "x") == 0,
       "the scan brought every item back");
}

/* The room made while serving (cache_image_room()) takes the image, and
 * one outgrown meanwhile gives way to a file of the right size. */
static void
test_image_in_its_room(void)
{
    struct cache_recovery r;
    char k[32];
    int fd = cache_image_room();
    bool stored = true;
    size_t before;

    ok(fd >= 0, "room made while serving");
    for (int i = 0; i < 200; i++) {
        snprintf(k, sizeof(k), "grown%d", i);
        stored &= put(k, "g", 1);
    }
    cache_stop(false);
    ok(stored && cache_image_write(fd, NULL) == 0, "the image written in it");
    cache_shutdown();
    r = start(CACHE_TIER_PMEM, fd);
    ok(r.image == 1 && all_there() && strcmp(test_val("grown199"), "g") == 0,
       "and taken");
    cache_stop(false);
    cache_shutdown();
    grow = true;                            /* the table may grow now */
    start(CACHE_TIER_PMEM, -1);
    fd = cache_image_room();
    before = cache_image_size();
    for (int i = 0; i < 600000; i++) {
        snprintf(k, sizeof(k), "more%d", i);
        put(k, "m", 1);
    }
    ok(grown_past(before + before / 16 + MB), "the table grew past it");
    cache_stop(false);
    ok(cache_image_write(fd, NULL) == 0, "an outgrown room: written all the same");
    cache_shutdown();
    r = start(CACHE_TIER_PMEM, fd);
    ok(r.image == 1 && strcmp(test_val("more599999"), "m") == 0 &&
       all_there(), "and taken");
}

/* A copy of the first n bytes of fd, in a memfd: the room as the
 * successor copied it ahead of the pause. */
static int
snapshot(int fd, size_t n)
{
    int snap = memfd_create("test-image-snap", MFD_CLOEXEC);
    char *buf = malloc(n);
    bool good = buf != NULL && snap >= 0 &&
                pread(fd, buf, n, 0) == (ssize_t)n &&
                write(snap, buf, n) == (ssize_t)n;

    free(buf);
    if (!good && snap >= 0) {
        close(snap);
        snap = -1;
    }
    return snap;
}

/* The address range the image says the file had, held (PROT_NONE) so
 * that nothing else is mapped there. */
static void *
file_range(int fd)
{
    uint64_t h[5];

    if (pread(fd, h, sizeof(h), 0) != (ssize_t)sizeof(h)) {
        return MAP_FAILED;
    }
    guard_len = (size_t)h[4];
    return mmap((void *)(uintptr_t)h[3], guard_len, PROT_NONE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
}

/* The marks a delta file holds that are set, or -1. */
static long
marked(int fd, long *pages)
{
    uint64_t head[2];
    unsigned char m;
    long n = 0;

    if (pread(fd, head, sizeof(head), 0) != (ssize_t)sizeof(head)) {
        return -1;
    }
    *pages = (long)head[1];
    for (uint64_t i = 0; i < head[1]; i++) {
        if (pread(fd, &m, 1, (off_t)(sizeof(head) + i)) != 1) {
            return -1;
        }
        n += m != 0;
    }
    return n;
}

/* The changes test_image_precopied() makes while "serving": 40 stores
 * of new keys, 40 deletes and 40 overwrites; all made. */
static bool
change_while_serving(void)
{
    char k[32];
    bool good = true;

    for (int i = 0; i < 40; i++) {
        snprintf(k, sizeof(k), "late%d", i);
        good &= put(k, "L", 1);
        snprintf(k, sizeof(k), "more%d", i * 1000);
        good &= cache_delete(k, strlen(k), test_hv(k), 0, NULL) ==
                CACHE_DELETED;
        snprintf(k, sizeof(k), "more%d", i * 1000 + 1);
        good &= put(k, "changed", 7);
    }
    return good;
}

/* Is every one of them there (and a key beside them untouched)?  With
 * undo, put them back as the later tests count them. */
static bool
changes_there(bool undo)
{
    char k[32];
    bool good = true;

    for (int i = 0; i < 40; i++) {
        snprintf(k, sizeof(k), "late%d", i);
        good &= strcmp(test_val(k), "L") == 0;
        if (undo) {
            cache_delete(k, strlen(k), test_hv(k), 0, NULL);
        }
        snprintf(k, sizeof(k), "more%d", i * 1000);
        good &= strcmp(test_val(k), "") == 0;
        if (undo) {
            put(k, "m", 1);
        }
        snprintf(k, sizeof(k), "more%d", i * 1000 + 1);
        good &= strcmp(test_val(k), "changed") == 0;
        if (undo) {
            put(k, "m", 1);
        }
        snprintf(k, sizeof(k), "more%d", i * 1000 + 2);
        good &= strcmp(test_val(k), "m") == 0;
    }
    return good;
}

/* The table copied ahead of the pause (cache_image_precopy()), changed
 * while "serving" (stores, deletes, overwrites), then only the pages
 * written since copied again: the successor, having copied the room as
 * it was, takes the image with the marks and finds every change. */
static void
test_image_precopied(void)
{
    struct cache_recovery r;
    uint64_t at = 0, len = 0;
    long pages = 0, dirty;
    int room = cache_image_room(), snap, delta = -1;
    void *guard;
    size_t bytes = cache_image_size();

    ok(room >= 0 && cache_image_precopy(&at, &len) == 0 && len > 8,
       "the table copied into the room while serving");
    snap = snapshot(room, (size_t)(at + len));
    ok(change_while_serving(), "stores, deletes and overwrites after it");
    cache_stop(false);
    ok(cache_image_write(room, &delta) == 0 && delta >= 0,
       "the image written, with the pages written since");
    dirty = marked(delta, &pages);
    ok(dirty > 0 && dirty <= 120 && pages > 4 * dirty,
       "only the pages written since are marked");
    printf("# %ld of %ld pages marked\n", dirty, pages);
    cache_shutdown();
    /* the successor: the file's range held first, as a successor holds
     * it (so that its room does not land there), the room made and
     * filled from the room as it was; the file moves over the hold */
    guard = file_range(room);
    ok(guard != MAP_FAILED && snap >= 0 && cache_image_stage(bytes) == 0 &&
       cache_image_prefill(snap, at, len) == 0, "the successor's copy");
    close(snap);
    set_opts(CACHE_TIER_PMEM, room);
    opts.image_delta_fd = delta;
    opts.image_hold_base = (uint64_t)(uintptr_t)guard;
    opts.image_hold_len = guard_len;
    ok(cache_init(&opts, 2) == 0, "the successor starts");
    cache_recovery_wait();
    cache_recovery_stats(&r);
    close(room);
    close(delta);
    opts.image_delta_fd = -1;
    ok(opts.image_hold_len == 0, "the hold taken by the file");
    ok(r.image == 1 && all_there() && changes_there(true),
       "the image taken, every change there");
}

/* Point the first list end of the image's LRU section (a word that is
 * an address in the file) out of the file.  false when none is found. */
static bool
forge_lru_end(int fd)
{
    uint64_t h[12], len[4], base, file_len, off, word;

    if (pread(fd, h, sizeof(h), 0) != (ssize_t)sizeof(h)) {
        return false;
    }
    base = h[3];                    /* the header, as cache_image.c has it */
    file_len = h[4];
    memcpy(len, &h[8], sizeof(len));
    off = sizeof(h);
    for (int s = 0; s < 3; s++) {
        off += (len[s] + 7) & ~(uint64_t)7;
    }
    for (uint64_t at = off; at < off + len[3]; at += sizeof(word)) {
        if (pread(fd, &word, sizeof(word), (off_t)at) != sizeof(word)) {
            return false;
        }
        if (word >= base && word < base + file_len) {
            word = 4096;
            return pwrite(fd, &word, sizeof(word), (off_t)at) ==
                   sizeof(word);
        }
    }
    return false;
}

/* An image that points outside the file is not taken, nothing of it
 * loaded: the file is scanned. */
static void
test_image_out_of_the_file(void)
{
    struct cache_recovery r;
    int fd = stop_with_image();

    ok(fd >= 0 && forge_lru_end(fd), "an image with a list end outside "
       "the file");
    r = start(CACHE_TIER_PMEM, fd);
    /* the items of fill(), the big one, "after", "between", "grown*"
     * and "more*" */
    ok(r.image == 0 && r.items == N - (N + 6) / 7 + 3 + 200 + 600000,
       "is not taken: the file is scanned");
    ok(all_there() && strcmp(test_val("more599999"), "m") == 0,
       "every item there");
}

static void
test_no_image_with_items_in_dram(void)
{
    int fd;

    cache_stop(false);
    cache_shutdown();
    start(CACHE_TIER_CACHE, -1);
    fd = stop_with_image();
    ok(fd < 0, "no image of a cache with items in DRAM");
    start(CACHE_TIER_PMEM, -1);
}

int
main(void)
{
    snprintf(path, sizeof(path), "/dev/shm/mcpm-test-image.%d",
             (int)getpid());
    unlink(path);
    clock_init();
    set_opts(CACHE_TIER_PMEM, -1);
    if (!ok(cache_init(&opts, 2) == 0, "cache on a memory file")) {
        unlink(path);
        return done_testing();
    }
    test_image_taken();
    test_image_of_another_generation();
    test_image_in_its_room();
    test_image_precopied();
    test_image_out_of_the_file();
    test_no_image_with_items_in_dram();
    cache_shutdown();
    unlink(path);
    return done_testing();
}
