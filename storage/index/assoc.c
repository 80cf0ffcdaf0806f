/*
 * assoc.c: the chained hash table, grown by linear hashing.
 *
 * A bucket is a 32-bit chunk id (chunkid.h) of its chain's first item;
 * the chain goes on through item->h_next.  The table grows one bucket at a
 * time, so that it always holds about ASSOC_LOAD items per bucket and its
 * DRAM follows the item count instead of doubling:
 *
 *   buckets 0 .. n-1 | n .. n+split-1        n = 2^level
 *   bucket of hv:    b = hv mod n, and hv mod 2n if b < split
 *
 * Splitting bucket `split` moves its items whose hash has bit n set to
 * bucket split + n, then advances split (at n: level + 1, split 0, which
 * names the same buckets).  The array is reserved once at its largest
 * (2^32 buckets, 16 GiB of address space, none of it memory until used);
 * the pages of buckets not yet in use cost nothing.
 *
 * State, and who may change it:
 *
 *   shape          level << 32 | split        the holder of `grower`, under
 *                                             the item lock of the bucket
 *                                             it splits
 *   bucket chains  slot and item->h_next      the bucket's item lock
 *
 * A bucket's index for hv changes only when that very bucket is split,
 * and buckets b and b + n share b's item lock (the lock power is below
 * the table's), so a caller holding lock(hv) sees a shape either before
 * or after its bucket's split, never in between, whatever other splits
 * run meanwhile.  Lock-free readers (assoc_peek, the prefetch walk) rely
 * on the stripe's count (locks.h), which every split moves.
 *
 * Splits are done by the workers that insert: a worker that links a new
 * item while the table is short of buckets splits a run of up to
 * GROW_STEP of them, taking each bucket's lock by trylock (it holds its
 * own item's) and ending the run at the first busy one.  A split must
 * touch every item of its chain whatever it knows of their hashes: the
 * chain's links are in the items, and each moved item's is rewritten.
 * Those misses into the memory file are nearly all of its time (hashing
 * the keys, already in the line the link is read from, is about 1 % of a
 * load's profile), so a run walks its chains side by side to overlap
 * them (split_run()) rather than keeping hashes beside the slots.  The cost spreads over the inserts
 * that cause it, a few hundred nanoseconds each, instead of falling on
 * the readers in long runs of a thread of its own.  The expander thread
 * keeps the wanted size (the item count, looked at every FOLLOW_NS while
 * the table grows) and splits only what the inserts left behind (none
 * came since it last looked).  One splitter at a time: whoever holds the
 * `grower` flag, taken by exchange; a worker that finds it taken goes on.
 * assoc_walk() holds it throughout, so that a walk sees one shape.
 * Lock order: maint_lock, then item locks.
 */
#include "storage/index/assoc.h"
#include "storage/index/assoc_priv.h"
#include "storage/index/tomb.h"

#include "storage/base/affinity.h"
#include "storage/base/hash.h"
#include "storage/base/locks.h"
#include "storage/base/quiesce.h"
#include "storage/slab/chunkid.h"
#include "storage/slab/item.h"

#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define ASSOC_POWER_DEFAULT 16
#define BUSY_YIELDS         64          /* then sleep between trylocks */
#define BUSY_SLEEP_NS       (200 * 1000)
/* Buckets past this many are backed by 2 MB pages where the kernel
 * allows: a lookup in a large table misses the TLB as well as the cache.
 * Below it, 4 KB pages keep a small table small. */
#define HUGE_FROM           ((uint64_t)1 << 23)
/* While items keep coming, and for QUIET_LOOKS looks after (a client's
 * pause of a few milliseconds must not leave its inserts unsplit until
 * the next tick), the expander looks at their count this often. */
#define FOLLOW_NS           (10 * 1000 * 1000)
#define QUIET_LOOKS         20

uint32_t *assoc_table;
uint64_t assoc_reserved;                /* buckets the mapping holds */
_Atomic uint64_t assoc_shape;
static atomic_bool grower;              /* someone may change shape */
static unsigned bulk_move;

static pthread_mutex_t maint_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t maint_cond = PTHREAD_COND_INITIALIZER;
static _Atomic uint64_t want_buckets;   /* buckets_for(items) */
static _Atomic uint64_t last_count;     /* want_count()'s last read */
static uint64_t (*count_items)(void);   /* assoc_thread_start() */
static atomic_bool stop_thread;
static bool thread_running;             /* start/stop callers only */
static pthread_t expander;

#define RELAXED memory_order_relaxed

static inline uint64_t
bucket_index(uint32_t hv, uint64_t s)
{
    uint64_t n = (uint64_t)1 << level_of(s);
    uint64_t b = hv & (n - 1);

    return b < split_of(s) ? hv & (2 * n - 1) : b;
}

/* Buckets wanted for n items: ASSOC_LOAD_X2 / 2 items a bucket. */
static inline uint64_t
buckets_for(uint64_t n)
{
    return n * 2 / ASSOC_LOAD_X2;
}

/*
 * The key sits after the CAS value when the item has one (item.h).  Flags
 * are read atomically like everywhere else: other bits of the word may be
 * changed by threads holding only a list lock.
 */
static inline const char *
key_of(const struct item *it)
{
    return it->data + ((item_flags(it) & ITEM_CAS) ? 8 : 0);
}

/* The slot holding hv's chain; the caller holds locks_lock(hv). */
static inline uint32_t *
slot_for(uint32_t hv)
{
    uint64_t s = atomic_load_explicit(&assoc_shape, RELAXED);

    return &assoc_table[bucket_index(hv, s)];
}

static inline struct item *
item_at(uint32_t id)
{
    return chunkid_ptr(id);
}

unsigned char *assoc_written;
static size_t written_len;
bool assoc_barrier_ok;

int
assoc_written_init(uint64_t n)
{
    size_t len = (n * sizeof(uint32_t) + ((size_t)1 << ASSOC_PAGE_SHIFT) -
                  1) >> ASSOC_PAGE_SHIFT;
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

    if (p == MAP_FAILED) {
        return -1;
    }
    assoc_written = p;
    written_len = len;
    /* Without it there is no precopy: the pause copies the whole table,
     * as before (assoc_image.c). */
    assoc_barrier_ok = syscall(__NR_membarrier,
                               MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED,
                               0, 0) == 0;
    return 0;
}

void
assoc_written_free(void)
{
    if (assoc_written != NULL) {
        munmap(assoc_written, written_len);
    }
    assoc_written = NULL;
    written_len = 0;
}

/* Reserve the largest table the address space allows, down to `least`
 * buckets. */
static uint32_t *
table_reserve(uint64_t least, uint64_t *n)
{
    for (uint64_t want = (uint64_t)1 << ASSOC_POWER_MAX; want >= least;
         want /= 2) {
        void *t = mmap(NULL, want * sizeof(uint32_t),
                       PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

        if (t != MAP_FAILED) {
            if (want > HUGE_FROM) {
                madvise((char *)t + HUGE_FROM * sizeof(uint32_t),
                        (want - HUGE_FROM) * sizeof(uint32_t),
                        MADV_HUGEPAGE);
            }
            *n = want;
            return t;
        }
    }
    return NULL;
}

int
assoc_init(unsigned power, unsigned bulk)
{
    if (power == 0) {
        power = ASSOC_POWER_DEFAULT;
    }
    /* Each stripe must cover whole buckets of every shape. */
    if (assoc_table != NULL || power > ASSOC_POWER_MAX ||
        locks_power() == 0 || power <= locks_power()) {
        return -1;
    }
    assoc_table = table_reserve((uint64_t)1 << power, &assoc_reserved);
    if (assoc_table == NULL) {
        return -1;
    }
    if (assoc_written_init(assoc_reserved) != 0) {
        munmap(assoc_table, assoc_reserved * sizeof(uint32_t));
        assoc_table = NULL;
        return -1;
    }
    atomic_store(&assoc_shape, (uint64_t)power << 32);
    atomic_store(&grower, false);
    bulk_move = bulk > 0 ? bulk : 1;
    atomic_store(&want_buckets, 0);
    atomic_store(&last_count, 0);
    return 0;
}

void
assoc_destroy(void)
{
    assoc_thread_stop();
    if (assoc_table != NULL) {
        munmap(assoc_table, assoc_reserved * sizeof(uint32_t));
    }
    assoc_table = NULL;
    assoc_reserved = 0;
    assoc_written_free();
    atomic_store(&assoc_shape, 0);
    atomic_store(&grower, false);
    atomic_store(&want_buckets, 0);
    atomic_store(&last_count, 0);
}

void
assoc_presize(uint64_t items)
{
    uint64_t n = buckets_for(items), s = atomic_load(&assoc_shape);
    unsigned level = level_of(s);

    if (n > assoc_reserved) {
        n = assoc_reserved;
    }
    if (n <= buckets_of(s)) {
        return;
    }
    while (level < ASSOC_POWER_MAX && ((uint64_t)2 << level) <= n) {
        level++;
    }
    s = (uint64_t)level << 32 | (n - ((uint64_t)1 << level));
    atomic_store(&assoc_shape, s);
}

struct item *
assoc_find(const char *key, size_t nkey, uint32_t hv)
{
    struct item *it = item_at(*slot_for(hv));

    for (; it != NULL; it = it->h_next) {
        if (it->nkey == nkey && memcmp(key_of(it), key, nkey) == 0) {
            return it;
        }
    }
    return NULL;
}

/* Items a lock-free lookup looks at before it takes the lock instead. */
#define PEEK_CHAIN_MAX 8

static inline bool
peek_key_is(const struct item *it, const char *key, size_t nkey,
            uint32_t hv, uint32_t seq, bool *ok)
{
    uint8_t n = __atomic_load_n(&it->nkey, __ATOMIC_RELAXED);
    uint16_t f = item_flags(it);
    const char *k = it->data + ((f & ITEM_CAS) ? 8 : 0);

    if (!(*ok = locks_seq_same(hv, seq)) || n != nkey) {
        return false;
    }
    return item_key_equal_relaxed(k, key, nkey);
}

struct item *
assoc_peek(const char *key, size_t nkey, uint32_t hv, uint32_t seq, bool *ok)
{
    uint64_t s = atomic_load_explicit(&assoc_shape, memory_order_acquire);
    uint32_t id = __atomic_load_n(&assoc_table[bucket_index(hv, s)],
                                  __ATOMIC_RELAXED);
    struct item *it = chunkid_peek(id);

    *ok = false;
    for (unsigned hops = 0; locks_seq_same(hv, seq); hops++) {
        if (it == NULL) {
            /* an empty bucket, or an id gone stale: the count says */
            *ok = id == 0 || hops > 0;
            return NULL;
        }
        if (hops == PEEK_CHAIN_MAX) {
            return NULL;
        }
        if (peek_key_is(it, key, nkey, hv, seq, ok)) {
            return it;
        }
        if (!*ok) {
            return NULL;
        }
        it = __atomic_load_n(&it->h_next, __ATOMIC_RELAXED);
        *ok = false;
    }
    return NULL;
}

void
assoc_insert(struct item *it, uint32_t hv)
{
    uint32_t *slot = slot_for(hv);

    it->h_next = item_at(*slot);
    __atomic_store_n(slot, chunkid_of(it), __ATOMIC_RELAXED);
    assoc_mark(slot);
    if (tomb_active()) {
        tomb_mark(hv);          /* a recovery runs: the key is known */
    }
}

void
assoc_delete(const char *key, size_t nkey, uint32_t hv)
{
    uint32_t *slot = slot_for(hv);
    struct item *it = item_at(*slot), *prev = NULL;

    for (; it != NULL; prev = it, it = it->h_next) {
        if (it->nkey == nkey && memcmp(key_of(it), key, nkey) == 0) {
            if (prev == NULL) {
                __atomic_store_n(slot, chunkid_of(it->h_next),
                                 __ATOMIC_RELAXED);
                assoc_mark(slot);
            } else {
                prev->h_next = it->h_next;
            }
            it->h_next = NULL;
            return;
        }
    }
}

/* ---- growth ----------------------------------------------------------- */

/*
 * Trylock with backoff, as memcached does; gives up when asked to stop so
 * that a stop never waits on a worker.
 */
static bool
lock_bucket(uint64_t b)
{
    struct timespec nap = { 0, BUSY_SLEEP_NS };
    unsigned tries = 0;

    while (!locks_trylock((uint32_t)b)) {
        if (atomic_load(&stop_thread)) {
            return false;
        }
        if (++tries < BUSY_YIELDS) {
            sched_yield();
        } else {
            nanosleep(&nap, NULL);
        }
    }
    return true;
}

static uint64_t
next_shape(uint64_t s)
{
    uint64_t split = split_of(s) + 1;
    unsigned level = level_of(s);

    if (split == (uint64_t)1 << level) {
        return (uint64_t)(level + 1) << 32;
    }
    return (uint64_t)level << 32 | split;
}

/* May the table take one more bucket? */
static bool
can_grow(uint64_t s)
{
    return level_of(s) < ASSOC_POWER_MAX && buckets_of(s) < assoc_reserved;
}

static bool
behind(uint64_t s)
{
    return can_grow(s) &&
           buckets_of(s) < atomic_load_explicit(&want_buckets, RELAXED);
}

/* Buckets of shape s that one run may split, at most k: wanted, within
 * the reservation, and of one level (a run ends where the level does). */
static unsigned
run_room(uint64_t s, unsigned k)
{
    uint64_t have = buckets_of(s);
    uint64_t want = atomic_load_explicit(&want_buckets, RELAXED);
    uint64_t left = ((uint64_t)1 << level_of(s)) - split_of(s);

    if (!can_grow(s) || want <= have) {
        return 0;
    }
    left = want - have < left ? want - have : left;
    left = assoc_reserved - have < left ? assoc_reserved - have : left;
    return left < k ? (unsigned)left : k;
}

static void
prefetch_item(const struct item *it)
{
    if (it != NULL) {
        __builtin_prefetch(it, 1);
        __builtin_prefetch((const char *)it + 64);
    }
}

/* Fetch the first items of the k buckets from shape s's split on, ahead
 * of the run that will split them.  Slots are read without the lock, in
 * a read section: hints (a stale one costs a wasted prefetch). */
static void
prefetch_run(uint64_t s, unsigned k)
{
    uint64_t b = split_of(s), n = (uint64_t)1 << level_of(s);

    quiesce_enter();            /* the pages stay mapped (quiesce.h) */
    for (unsigned i = 0; i < k && b + i < n; i++) {
        uint32_t id = __atomic_load_n(&assoc_table[b + i], __ATOMIC_RELAXED);

        prefetch_item(chunkid_peek(id));
    }
    quiesce_exit();
}

/*
 * A split moves the items of bucket b whose hash has bit n set to bucket
 * b + n.  It must read every item of the chain (its link and its key are
 * in the item), and each is a cache miss into the memory file, often a
 * TLB miss too: nearly all of a split's time.  So buckets are split in
 * runs, their chains walked side by side, a step of each in turn, with
 * each chain's next item fetched a round ahead: the misses of a run
 * overlap instead of following one another.
 */
#define RUN_MAX 16

struct split_walk {
    struct item *it;            /* next item to place */
    struct item *lo, *hi;       /* the two chains built */
    struct item **lt, **ht;     /* their tails' links */
};

static void
walk_runs(struct split_walk *w, unsigned k, uint64_t n)
{
    for (bool more = true; more;) {
        more = false;
        for (unsigned i = 0; i < k; i++) {
            struct item *it = w[i].it;

            if (it == NULL) {
                continue;
            }
            w[i].it = it->h_next;
            prefetch_item(w[i].it);
            if (hash_key(key_of(it), it->nkey) & n) {
                *w[i].ht = it;
                w[i].ht = &it->h_next;
            } else {
                *w[i].lt = it;
                w[i].lt = &it->h_next;
            }
            more = true;
        }
    }
}

/* Split the locked buckets b .. b+k-1 of a level of n buckets. */
static void
split_locked(uint64_t b, unsigned k, uint64_t n)
{
    struct split_walk w[RUN_MAX];

    for (unsigned i = 0; i < k; i++) {
        w[i].it = item_at(assoc_table[b + i]);
        w[i].lo = w[i].hi = NULL;
        w[i].lt = &w[i].lo;
        w[i].ht = &w[i].hi;
        prefetch_item(w[i].it);
    }
    walk_runs(w, k, n);
    for (unsigned i = 0; i < k; i++) {
        *w[i].lt = *w[i].ht = NULL;
        __atomic_store_n(&assoc_table[b + i], chunkid_of(w[i].lo),
                         __ATOMIC_RELAXED);
        __atomic_store_n(&assoc_table[b + n + i], chunkid_of(w[i].hi),
                         __ATOMIC_RELAXED);
        assoc_mark(&assoc_table[b + i]);
        assoc_mark(&assoc_table[b + n + i]);
    }
}

/*
 * Split up to k buckets of shape *s from its split on and advance *s;
 * grower held.  The first bucket's lock is waited for when `wait` (false:
 * a stop was asked for), taken by trylock otherwise (the calling worker
 * may hold it); the run ends at the first other lock found busy.  The
 * shape moves past the whole run while every lock of it is held, so a
 * caller holding lock(hv) sees its bucket before or after its split.
 * Returns the buckets split.
 */
static unsigned
split_run(uint64_t *s, unsigned k, bool wait)
{
    uint64_t b = split_of(*s), n = (uint64_t)1 << level_of(*s);
    unsigned got = 0;

    k = run_room(*s, k);
    /* the new buckets' page is faulted in before the locks */
    for (unsigned i = 0; i < k; i++) {
        __atomic_store_n(&assoc_table[b + n + i], 0, __ATOMIC_RELAXED);
    }
    while (got < k && (got == 0 && wait ? lock_bucket(b)
                                         : locks_trylock((uint32_t)(b + got)))) {
        got++;
    }
    if (got == 0) {
        return 0;
    }
    split_locked(b, got, n);
    for (unsigned i = 0; i < got; i++) {
        *s = next_shape(*s);
    }
    atomic_store_explicit(&assoc_shape, *s, memory_order_release);
    for (unsigned i = 0; i < got; i++) {
        locks_unlock((uint32_t)(b + i));
    }
    return got;
}

static bool
grower_try(void)
{
    return !atomic_load_explicit(&grower, RELAXED) &&
           !atomic_exchange_explicit(&grower, true, memory_order_acquire);
}

static void
grower_drop(void)
{
    atomic_store_explicit(&grower, false, memory_order_release);
}

/* Buckets a worker splits at most per item it links: more than the
 * 2 / ASSOC_LOAD_X2 a new item needs, so that inserts catch up with the
 * count the expander last read. */
#define GROW_STEP 4

void
assoc_grow_step(void)
{
    uint64_t s = atomic_load_explicit(&assoc_shape, RELAXED);

    if (!behind(s) || !grower_try()) {
        return;
    }
    s = atomic_load_explicit(&assoc_shape, RELAXED);
    split_run(&s, GROW_STEP, false);
    /* the next step's first items, on their way while the worker
     * answers: a split otherwise waits on each item it hashes */
    if (behind(s)) {
        prefetch_run(s, GROW_STEP);
    }
    grower_drop();
}

/* What the inserts left: split until the table fits want_buckets, a
 * stop is asked for, or someone else holds grower (a walk, a worker);
 * maint_lock held.  Batches of bulk_move buckets in runs of RUN_MAX,
 * the next run's first items fetched while one is split. */
static void
grow(void)
{
    uint64_t s;

    if (!grower_try()) {
        return;
    }
    s = atomic_load(&assoc_shape);
    prefetch_run(s, RUN_MAX);
    while (behind(s) && !atomic_load(&stop_thread)) {
        for (unsigned done = 0; done < bulk_move && behind(s);) {
            unsigned got;

            prefetch_run(s + RUN_MAX, RUN_MAX);
            got = split_run(&s, RUN_MAX, true);
            if (got == 0) {
                grower_drop();
                return;
            }
            done += got;
        }
        /* a worker may take over between batches */
        grower_drop();
        if (!grower_try()) {
            return;
        }
        s = atomic_load(&assoc_shape);
    }
    grower_drop();
}

/*
 * Fault in the table's pages that the next splits will use, up to a page
 * past the buckets wanted (a 2 MB one where the table has them), so that
 * a worker's split does not stop for the kernel (a 2 MB page is zeroed on
 * its first touch) while it holds an item lock.  An atomic add of 0
 * touches a slot without changing it: a splitter may be filling it.
 */
static void
prefault_ahead(void)
{
    const uint64_t per_page = 4096 / sizeof(uint32_t);
    uint64_t from = buckets_of(atomic_load(&assoc_shape));
    uint64_t to = atomic_load_explicit(&want_buckets, RELAXED);

    to += to >= HUGE_FROM ? ((uint64_t)2 << 20) / sizeof(uint32_t)
                          : per_page;

    if (to > assoc_reserved) {
        to = assoc_reserved;
    }
    for (uint64_t b = from; b < to; b += per_page) {
        __atomic_fetch_add(&assoc_table[b], 0, __ATOMIC_RELAXED);
    }
}

/*
 * want_buckets from an item count read now; it only grows.  The count
 * sums lists that threads move items between (a copy promoted, a page
 * moved), so a read may be a few items high for a moment: the smaller of
 * this read and the one before counts, so that a moment's excess is
 * never split for.
 */
static void
want_count(uint64_t n)
{
    uint64_t prev = atomic_exchange_explicit(&last_count, n, RELAXED);
    uint64_t want = buckets_for(n < prev ? n : prev);

    if (want > atomic_load_explicit(&want_buckets, RELAXED)) {
        atomic_store_explicit(&want_buckets, want, RELAXED);
    }
}

static void
follow_count(void)
{
    want_count(count_items != NULL ? count_items() : 0);
}

static void
wait_follow(void)
{
    struct timespec dl;

    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_nsec += FOLLOW_NS;
    if (dl.tv_nsec >= 1000000000) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000;
    }
    pthread_cond_timedwait(&maint_cond, &maint_lock, &dl);
}

/*
 * Woken when the table falls short (assoc_maybe_expand(), each clock
 * tick); then, for as long as the table keeps growing (and QUIET_LOOKS
 * after), it reads the item count again every FOLLOW_NS, so that the
 * inserts' splits follow a fast load, and splits itself only when no
 * insert moved the table since its last look.
 */
static void *
expander_main(void *arg)
{
    unsigned quiet = QUIET_LOOKS;

    (void)arg;
    pthread_mutex_lock(&maint_lock);
    while (!atomic_load(&stop_thread)) {
        uint64_t s = atomic_load(&assoc_shape);

        if (quiet >= QUIET_LOOKS && !behind(s)) {
            pthread_cond_wait(&maint_cond, &maint_lock);
            quiet = 0;
            continue;
        }
        wait_follow();
        follow_count();
        prefault_ahead();
        if (atomic_load(&assoc_shape) == s && behind(s)) {
            grow();
        }
        quiet = behind(atomic_load(&assoc_shape)) ||
                atomic_load(&assoc_shape) != s ? 0 : quiet + 1;
    }
    pthread_mutex_unlock(&maint_lock);
    return NULL;
}

int
assoc_thread_start(uint64_t (*items)(void))
{
    if (thread_running) {
        return 0;
    }
    if (assoc_table == NULL) {
        return -1;
    }
    count_items = items;
    atomic_store(&stop_thread, false);
    if (pthread_create(&expander, NULL, expander_main, NULL) != 0) {
        return -1;
    }
    pthread_setname_np(expander, "mc-assocmaint");
    affinity_apply(expander, AFFINITY_BG, 0);
    thread_running = true;
    return 0;
}

void
assoc_thread_stop(void)
{
    if (!thread_running) {
        return;
    }
    atomic_store(&stop_thread, true);
    pthread_mutex_lock(&maint_lock);
    pthread_cond_signal(&maint_cond);
    pthread_mutex_unlock(&maint_lock);
    pthread_join(expander, NULL);
    thread_running = false;
}

void
assoc_maybe_expand(uint64_t curr_items)
{
    uint64_t s = atomic_load_explicit(&assoc_shape, RELAXED);

    if (!can_grow(s) || buckets_of(s) >= buckets_for(curr_items)) {
        return;
    }
    want_count(curr_items);
    /* Busy means the expander is awake: it reads the count itself. */
    if (pthread_mutex_trylock(&maint_lock) != 0) {
        return;
    }
    pthread_cond_signal(&maint_cond);
    pthread_mutex_unlock(&maint_lock);
}

/* Lock-free: a racy snapshot, good enough for "stats". */
void
assoc_stats(uint64_t *hash_power_level, uint64_t *hash_bytes,
            uint64_t *hash_is_expanding)
{
    uint64_t s = atomic_load(&assoc_shape);

    /* memcached's readers take it for the power of two of buckets the
     * table has reached: a table past 2^level has passed it */
    *hash_power_level = level_of(s) + (split_of(s) > 0 ? 1 : 0);
    *hash_bytes = assoc_table != NULL ? buckets_of(s) * sizeof(uint32_t) : 0;
    *hash_is_expanding = assoc_table != NULL && behind(s);
}

/* Lock-free: the slot is always inside the mapping, which lives as long
 * as the table. */
const void *
assoc_bucket_hint(uint32_t hv)
{
    uint64_t s = atomic_load_explicit(&assoc_shape, RELAXED);

    if (assoc_table == NULL) {
        return NULL;
    }
    return &assoc_table[bucket_index(hv, s)];
}

const struct item *
assoc_hint_head(const void *hint, bool *empty)
{
    uint32_t id = __atomic_load_n((const uint32_t *)hint, __ATOMIC_RELAXED);

    *empty = id == 0;
    return chunkid_peek(id);
}

/* ---- walk ------------------------------------------------------------- */

/* While it holds grower the shape cannot change. */
void
assoc_walk(int (*fn)(struct item *it, void *ctx), void *ctx)
{
    uint64_t n;
    int rc = 0;

    while (!grower_try()) {
        sched_yield();
    }
    n = assoc_table != NULL ? buckets_of(atomic_load(&assoc_shape)) : 0;
    for (uint64_t b = 0; b < n && rc == 0; b++) {
        struct item *it, *next;

        locks_lock((uint32_t)b);
        for (it = item_at(assoc_table[b]); it != NULL && rc == 0; it = next) {
            next = it->h_next;
            rc = fn(it, ctx);
        }
        locks_unlock((uint32_t)b);
    }
    grower_drop();
}
