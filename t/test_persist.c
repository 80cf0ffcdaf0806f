/*
 * test_persist.c: the write side of item persistence in the PMEM tier.
 * A cache over a strict-mode file in /dev/shm; after each mutation the
 * FILE (read with pread, not through the mapping) must show the commit
 * words, checksums and page table doc/PERSISTENCE.md prescribes, and a
 * simulated power cut must lose exactly what was never persisted.
 */
#include "storage/cache/cache.h"
#include "storage/base/hash.h"
#include "storage/cache/cache_delta.h"
#include "storage/cache/cache_open.h"
#include "storage/slab/item.h"
#include "storage/slab/persist.h"
#include "storage/slab/slabs.h"
#include "storage/slab/slabs_move.h"
#include "storage/tier/pagetab.h"
#include "storage/tier/tier.h"
#include "t/cache_test.h"
#include "t/tap.h"

#include <fcntl.h>
#include <time.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MB ((size_t)1 << 20)

static struct cache_options opts;
static char path[128];
static int fd = -1;

static enum cache_status
put_len(const char *k, char c, size_t vlen, enum cache_op op)
{
    enum cache_status st;
    struct item *it = cache_alloc(k, strlen(k), test_hv(k), 7, 0,
                                  (uint32_t)vlen, &st);
    struct iovec iov;
    size_t off = 0;

    if (it == NULL) {
        return st;
    }
    while (item_value_iov(it, off, &iov, 1) == 1) {
        memset(iov.iov_base, c, iov.iov_len);
        off += iov.iov_len;
    }
    item_value_iov(it, vlen, &iov, 1);
    memcpy(iov.iov_base, "\r\n", 2);
    st = cache_store(it, op, 0);
    cache_release(it);
    return st;
}

static enum cache_status
put(const char *k, const char *v, enum cache_op op)
{
    enum cache_status st;
    struct item *it = cache_alloc(k, strlen(k), test_hv(k), 0, 0,
                                  (uint32_t)strlen(v), &st);

    if (it == NULL) {
        return st;
    }
    memcpy(item_value(it), v, strlen(v));
    memcpy(item_value(it) + strlen(v), "\r\n", 2);
    st = cache_store(it, op, 0);
    cache_release(it);
    return st;
}

/* Offset in the file of a mapped address. */
static off_t
file_off(const void *p)
{
    return (off_t)((const char *)p -
                   (const char *)tier_pmem_base(slabs_tier(TIER_PMEM)));
}

/* What the file holds for an item's prefix. */
static struct persist_prefix
file_prefix(const struct item *it)
{
    struct persist_prefix p;

    memset(&p, 0xee, sizeof(p));
    if (pread(fd, &p, sizeof(p), file_off(persist_prefix_of(it))) !=
        (ssize_t)sizeof(p)) {
        memset(&p, 0xee, sizeof(p));
    }
    return p;
}

static uint64_t
file_commit(const struct item *it)
{
    return file_prefix(it).commit;
}

static unsigned
file_table(const struct item *it)
{
    struct tier *t = slabs_tier(TIER_PMEM);
    size_t i = tier_pmem_index(t, it);
    unsigned char b = 0xff;

    if (pread(fd, &b, 1, PAGETAB_OFF + (off_t)i) != 1) {
        return 0xff;
    }
    return b;
}

/* A committed item: live commit word with its seq, a matching CRC, and a
 * page table naming the class of its memory (cls; 0: its own class). */
static void
check_live(const struct item *it, const char *what, unsigned cls)
{
    struct persist_prefix p = file_prefix(it);
    char name[128];

    snprintf(name, sizeof(name), "%s: commit word is seq << 1 | 1", what);
    ok((p.commit & 1) == 1 && p.commit >> 1 != 0, name);
    snprintf(name, sizeof(name), "%s: crc in the file matches", what);
    is_int(p.crc, persist_crc(it), name);
    snprintf(name, sizeof(name), "%s: page table names the class", what);
    is_int(file_table(it), cls != 0 ? cls : item_clsid(it), name);
}

static void
test_store_and_replace(void)
{
    struct item *a1, *a2;

    is_int(put("a", "hello", CACHE_SET), CACHE_STORED, "set a");
    a1 = test_get("a");
    if (!ok(a1 != NULL, "a is there")) {
        return;
    }
    ok(item_cas(a1) != 0, "a has a cas");
    check_live(a1, "new item", 0);
    is_int(put("a", "world", CACHE_SET), CACHE_STORED, "replace a");
    a2 = test_get("a");
    ok(a2 != NULL && a2 != a1, "the new value is a new item");
    check_live(a2, "replacing item", 0);
    ok(file_prefix(a2).commit > persist_prefix_of(a1)->commit,
       "the replacing item has the higher seq");
    is_int(file_commit(a1), 0, "replaced item: commit word 0 in the file");
    cache_release(a1);
    cache_release(a2);
}

static void
test_delete_and_touch(void)
{
    struct item *b;
    enum cache_status st;
    rel_time_t exp = clock_now() + 1000, got = 0;

    put("b", "doomed", CACHE_SET);
    b = test_get("b");
    check_live(b, "b", 0);
    is_int(cache_delete("b", 1, test_hv("b"), 0, NULL), CACHE_DELETED,
           "delete b");
    is_int(file_commit(b), 0, "deleted item: commit word 0 in the file");
    cache_release(b);

    put("c", "touchme", CACHE_SET);
    b = cache_touch("c", 1, test_hv("c"), exp, &st);
    if (!ok(b != NULL, "touch c")) {
        return;
    }
    if (pread(fd, &got, sizeof(got), file_off(&b->exptime)) !=
        (ssize_t)sizeof(got)) {
        got = 0;
    }
    is_int(got, exp, "touch: the new exptime is in the file");
    check_live(b, "touched item (exptime outside the crc)", 0);
    cache_release(b);
}

static void
test_incr_and_invalidate(void)
{
    struct item *n1, *n2;
    struct cache_mdelete md = { .invalidate = true };
    uint64_t v = 0;
    unsigned cls = 0;
    char buf[8] = "";

    put("n", "41", CACHE_SET);
    n1 = test_get("n");
    is_int(cache_delta("n", 1, test_hv("n"), true, 1, &v, &cls), CACHE_OK,
           "incr n");
    is_int(v, 42, "incr result");
    n2 = test_get("n");
    ok(n2 != NULL && n2 != n1, "incr copies on write");
    item_value_copy(n2, buf, 2);
    is_mem(buf, 2, "42", "the copy holds the new number");
    check_live(n2, "incremented item", 0);
    is_int(file_commit(n1), 0, "the old number is dead in the file");
    cache_release(n1);
    cache_release(n2);

    /* The copy is padded as memcached's in-place write would be. */
    put("p", "100", CACHE_SET);
    is_int(cache_delta("p", 1, test_hv("p"), false, 95, &v, &cls), CACHE_OK,
           "decr p");
    n1 = test_get("p");
    is_int(item_vlen(n1), 3, "the copy keeps the old length");
    item_value_copy(n1, buf, 3);
    is_mem(buf, 3, "5  ", "padded with spaces");
    check_live(n1, "decremented item", 0);
    cache_release(n1);
    n2 = test_get("n");

    is_int(cache_mdelete("n", 1, test_hv("n"), &md), CACHE_DELETED, "md I");
    n1 = test_get("n");
    ok(n1 != NULL && n1 != n2, "md I copies on write");
    check_live(n1, "invalidated item", 0);
    is_int(file_commit(n2), 0, "the pre-invalidate item is dead");
    cache_release(n1);
    cache_release(n2);
}

static void
test_chunked(void)
{
    struct item *big;
    struct item_chunk *ch;
    struct iovec iov;
    size_t vlen = 700 * 1024;

    is_int(put_len("big", 'x', vlen, CACHE_SET), CACHE_STORED,
           "a chunked item");
    big = test_get("big");
    if (!ok(big != NULL, "big is there")) {
        return;
    }
    item_value_iov(big, 0, &iov, 1);
    ch = (struct item_chunk *)((char *)iov.iov_base -
                               offsetof(struct item_chunk, data));
    check_live(big, "chunked head", ch->orig_clsid);
    is_int(file_commit((struct item *)ch),
           persist_prefix_of(big)->commit & ~(uint64_t)1,
           "a piece's commit word is its head's seq << 1");
    is_int(file_table((struct item *)ch), slabs_largest(),
           "the piece's page belongs to the largest class");
    cache_release(big);
    is_int(cache_delete("big", 3, test_hv("big"), 0, NULL), CACHE_DELETED,
           "delete big");
}

/* The file's page table entry of page i. */
static unsigned
table_at(size_t i)
{
    unsigned char b = 0xff;

    if (pread(fd, &b, 1, PAGETAB_OFF + (off_t)i) != 1) {
        return 0xff;
    }
    return b;
}

/* The page mover: a page leaving a class is free in the table; the items
 * it rescues are committed copies. */
static void
test_mover(void)
{
    char key[32];
    size_t npages = tier_pmem_npages(slabs_tier(TIER_PMEM));
    unsigned cls, before = 0, freed = 0, live = 0, bad = 0;
    bool had[64] = { false };
    struct item *it;

    if (!ok(npages <= 64, "a small file")) {
        return;
    }

    for (int i = 0; i < 1200; i++) {
        snprintf(key, sizeof(key), "mv%d", i);
        put_len(key, 'm', 1000, CACHE_SET);
    }
    it = test_get("mv0");
    cls = item_clsid(it);
    cache_release(it);
    for (size_t i = 0; i < npages; i++) {
        had[i] = table_at(i) == cls;
        before += had[i];
    }
    ok(before >= 2, "the class holds two pages or more");
    is_int(cache_slabs_reassign((int)cls, 0), CACHE_OK, "move a page");
    slabs_mover_wait();
    /* Rescues may take a new page for the class; the moved one is free. */
    for (size_t i = 0; i < npages; i++) {
        freed += had[i] && table_at(i) == 0;
    }
    is_int(freed, 1, "the moved page is free in the file's table");
    for (int i = 0; i < 1200; i++) {
        snprintf(key, sizeof(key), "mv%d", i);
        it = test_get(key);
        if (it != NULL) {
            live++;
            bad += (file_commit(it) & 1) != 1 ||
                   file_prefix(it).crc != persist_crc(it);
            cache_release(it);
        }
    }
    ok(live > 0, "items survive the move");
    is_int(bad, 0, "every surviving item is committed in the file");
}

/* The chunk an item of k and v gets now (given straight back: the next
 * call of the same size gets it again, unless a chunk freed meanwhile is
 * ahead of it). */
static struct item *
alloc_like(const char *k, const char *v)
{
    enum cache_status st;
    struct item *it = cache_alloc(k, strlen(k), test_hv(k), 0, 0,
                                  (uint32_t)strlen(v), &st);

    if (it != NULL) {
        cache_release(it);
    }
    return it;
}

/* A worker that groups its flushes, with its cache of free chunks as a
 * worker has: a chunk killed in the group is not reused before the
 * group's sync makes the death durable, or the new item's lines could
 * reach the medium before the old commit word's zero (a cut between the
 * two left a torn item). */
static void
test_group_reuse(void)
{
    struct item *g, *n;
    bool reused = false;

    cache_thread_cache(true);
    if (!ok(persist_group_join(NULL, NULL), "the strict file on tmpfs groups "
            "(msync)")) {
        cache_thread_cache(false);
        return;
    }
    put("grp", "0123456789", CACHE_SET);
    persist_group_sync();
    g = test_get("grp");
    if (!ok(g != NULL, "grp stored and synced")) {
        persist_group_leave();
        cache_thread_cache(false);
        return;
    }
    cache_release(g);
    is_int(cache_delete("grp", 3, test_hv("grp"), 0, NULL), CACHE_DELETED,
           "delete grp in the group");
    ok(persist_group_holds() && persist_group_pending(),
       "the group holds the killed item");
    ok((file_commit(g) & 1) == 1, "its death is not yet in the file");
    for (int i = 0; i < 8; i++) {
        char k[16];

        snprintf(k, sizeof(k), "grq%d", i);
        reused |= alloc_like(k, "abcdefghij") == g;
    }
    ok(!reused, "its chunk is not handed out before the sync");
    persist_group_sync();
    is_int(file_commit(g), 0, "after the sync its death is in the file");
    ok(!persist_group_holds(), "and the group holds nothing");
    n = alloc_like("grr", "abcdefghij");
    ok(n == g, "its chunk is the next one handed out");
    persist_group_leave();
    cache_thread_cache(false);
}

static unsigned wakes;

static void
count_wake(void *arg)
{
    (void)arg;
    __atomic_add_fetch(&wakes, 1, __ATOMIC_RELAXED);
}

/* Wait (5 s at most) for the thread's group to reach `notes`: durable,
 * or settled (the zeros its tickets asked for durable too). */
static bool
reaches(uint64_t notes, bool settled)
{
    struct timespec tick = { 0, 100000 };

    for (int i = 0; i < 50000; i++) {
        uint64_t both[2];

        both[0] = persist_group_durable(&both[1]);
        if (both[settled] >= notes) {
            return true;
        }
        nanosleep(&tick, NULL);
    }
    return false;
}

/* With the flusher thread: a replace is durable (its reply may go) once
 * its round's msync returns; the replaced item's death is stored after
 * that and durable by the next round, which a removal waits for.  A
 * removal's submit does not wait for more submits to be settled. */
static void
test_group_flusher(void)
{
    struct item *v1, *v2, *w1;
    uint64_t a, killed, settled;

    if (!ok(persist_group_join(count_wake, NULL), "join with a waker")) {
        return;
    }
    put("fl", "one", CACHE_SET);
    put("fm", "one", CACHE_SET);
    persist_group_sync();
    v1 = test_get("fl");
    w1 = test_get("fm");
    killed = persist_group_killed();
    put("fl", "two", CACHE_SET);
    a = persist_group_noted();
    v2 = test_get("fl");
    is_int(persist_group_killed(), killed, "a replace is no removal");
    ok(persist_group_submit(), "the replace goes to the flusher");
    ok(reaches(a, false), "the replace becomes durable");
    ok((file_commit(v2) & 1) == 1, "then its item is in the file");
    put("fm", "two", CACHE_SET);
    ok(persist_group_submit(), "a second replace, in a round of its own");
    ok(reaches(persist_group_noted(), false), "which becomes durable");
    persist_group_durable(&settled);
    ok(settled >= a,
       "and by then the first is settled: its zeros went with the second");
    is_int(file_commit(v1), 0, "the first replaced item's death is in the "
           "file");
    is_int(cache_delete("fl", 2, test_hv("fl"), 0, NULL), CACHE_DELETED,
           "delete fl");
    ok(persist_group_killed() > killed, "a delete is a removal");
    a = persist_group_noted();
    ok(persist_group_submit(), "the delete goes to the flusher");
    ok(reaches(a, true), "and is settled with nothing submitted after it");
    is_int(file_commit(v2), 0, "its death is in the file");
    is_int(file_commit(w1), 0, "so is the second replaced item's");
    ok(__atomic_load_n(&wakes, __ATOMIC_RELAXED) > 0,
       "the flusher woke the thread");
    cache_release(v1);
    cache_release(v2);
    cache_release(w1);
    persist_group_leave();
}

/* Order: the body is persisted first, the commit word last; a cut before
 * the commit word is persisted leaves the chunk free. */
static void
test_crash(void)
{
    enum cache_status st;
    struct item *d, *e;

    put("d", "durable", CACHE_SET);
    d = test_get("d");
    e = cache_alloc("e", 1, test_hv("e"), 0, 0, 4, &st);
    if (!ok(d != NULL && e != NULL, "d stored, e allocated")) {
        return;
    }
    memcpy(item_value(e), "lost\r\n", 6);
    item_set_cas(e, 999);
    persist_prepare(e, 999);
    /* Step 3 without its persist: the store stays in the CPU's view. */
    persist_prefix_of(e)->commit = 999 << 1 | 1;
    is_int(file_commit(e), 0, "an unpersisted commit word is not in the "
           "file");
    cache_release(d);
    cache_release(e);
    ok(tier_pmem_crash(slabs_tier(TIER_PMEM)), "power cut");
    /* The mapping now shows the file; the pointers still hold. */
    is_int(persist_prefix_of(e)->commit, 0, "after the cut e is free");
    is_int(persist_prefix_of(e)->crc, persist_crc(e),
           "its body and crc were persisted");
    is_int(persist_prefix_of(d)->commit & 1, 1, "d survives the cut");
    is_int(persist_prefix_of(d)->crc, persist_crc(d), "with its crc");
}

int
main(void)
{
    snprintf(path, sizeof(path), "/dev/shm/test_persist.%d", (int)getpid());
    unlink(path);
    clock_init();
    cache_options_defaults(&opts);
    opts.hash_expand = false;
    opts.lru_crawler = false;
    opts.lru_segmented = false;
    opts.slab_reassign = true;
    opts.slab_automove = 0;
    opts.tier_policy = CACHE_TIER_PMEM;
    opts.memory_file = path;
    opts.memory_file_size = 16 * MB;
    opts.pmem_strict = true;
    if (!ok(cache_init(&opts, 2) == 0, "cache on a strict memory file")) {
        unlink(path);
        return done_testing();
    }
    fd = open(path, O_RDONLY);
    ok(fd >= 0, "open the file to read it behind the mapping");
    test_store_and_replace();
    test_delete_and_touch();
    test_incr_and_invalidate();
    test_chunked();
    test_mover();
    test_group_reuse();
    test_group_flusher();
    test_crash();
    cache_shutdown();
    close(fd);
    unlink(path);
    return done_testing();
}
