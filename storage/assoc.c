/*
 * assoc.c: the chained hash table and its background expansion.
 *
 * State, and who may change it:
 *
 *   primary        bucket array, 2^hashpower heads    swap: all item locks
 *   old_table      2^(hashpower-1) heads, expanding   swap: all item locks
 *   hashpower      log2 of primary's size             swap: all item locks
 *   expanding      old_table still holds buckets      swap / expander
 *   expand_bucket  old buckets below it are moved     expander, under the
 *                                                     item lock of the
 *                                                     bucket it moves
 *   bucket chains  item->h_next                       the bucket's item lock
 *
 * A reader holds the item lock of its key, i.e. of old bucket
 * ob = hv & oldmask.  The expander moves ob and advances expand_bucket past
 * it under that same lock, so what the reader sees of expand_bucket is
 * either before the move (ob >= expand_bucket: old table) or after it
 * (ob < expand_bucket: new table), never in between.  That is why plain
 * relaxed atomic loads are enough on every locked path; the atomics only
 * serve the lock-free readers (stats, the prefetch hint).
 *
 * The expander thread holds maint_lock for a whole expansion and lets go
 * only while it waits for work.  assoc_walk() takes it too, so a walk waits
 * for a running expansion and holds the next one off; assoc_maybe_expand()
 * only trylocks it.  Lock order: maint_lock, then item locks.
 */
#include "storage/assoc.h"

#include "storage/hash.h"
#include "storage/item.h"
#include "storage/locks.h"
#include "storage/quiesce.h"
#include "storage/affinity.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <string.h>
#include <time.h>

#define ASSOC_POWER_DEFAULT 16
#define ASSOC_POWER_MAX     32
#define BUSY_YIELDS         64          /* then sleep between trylocks */
#define BUSY_SLEEP_NS       (200 * 1000)

static struct item **_Atomic primary;
static struct item **_Atomic old_table;
static _Atomic unsigned hashpower;
static atomic_bool expanding;
static _Atomic uint64_t expand_bucket;
static unsigned bulk_move;

static pthread_mutex_t maint_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t maint_cond = PTHREAD_COND_INITIALIZER;
static bool want_expand;                /* maint_lock */
static uint64_t want_items;             /* maint_lock */
static atomic_bool stop_thread;
static bool thread_running;             /* start/stop callers only */
static pthread_t expander;

#define RELAXED memory_order_relaxed

static inline uint64_t
hashsize(unsigned power)
{
    return (uint64_t)1 << power;
}

static inline uint64_t
hashmask(unsigned power)
{
    return hashsize(power) - 1;
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
static struct item **
bucket_for(uint32_t hv)
{
    unsigned power = atomic_load_explicit(&hashpower, RELAXED);
    uint64_t ob;

    if (atomic_load_explicit(&expanding, RELAXED)) {
        ob = hv & hashmask(power - 1);
        if (ob >= atomic_load_explicit(&expand_bucket, RELAXED)) {
            return &atomic_load_explicit(&old_table, RELAXED)[ob];
        }
    }
    return &atomic_load_explicit(&primary, RELAXED)[hv & hashmask(power)];
}

#define HUGE_PAGE ((uintptr_t)2 << 20)

/*
 * A zeroed table of n buckets.  A large one asks for transparent huge
 * pages: a lookup on a big table is a TLB miss as well as a cache miss,
 * and 2 MB pages take most of the TLB misses away.  The hint may be
 * refused (THP off); nothing else changes.
 */
static struct item **
table_calloc(uint64_t n)
{
    struct item **t = calloc((size_t)n, sizeof(*t));
    uintptr_t lo, hi;

    if (t == NULL || n * sizeof(*t) < 2 * HUGE_PAGE) {
        return t;
    }
    lo = ((uintptr_t)t + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
    hi = ((uintptr_t)t + n * sizeof(*t)) & ~(HUGE_PAGE - 1);
    if (hi > lo) {
        madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
    }
    return t;
}

int
assoc_init(unsigned power, unsigned bulk)
{
    struct item **table;

    if (power == 0) {
        power = ASSOC_POWER_DEFAULT;
    }
    /* Each stripe must cover whole buckets of the old and new table. */
    if (atomic_load(&primary) != NULL || power > ASSOC_POWER_MAX ||
        locks_power() == 0 || power <= locks_power() ||
        hashsize(power) > SIZE_MAX / sizeof(*table)) {
        return -1;
    }
    table = table_calloc(hashsize(power));
    if (table == NULL) {
        return -1;
    }
    atomic_store(&old_table, NULL);
    atomic_store(&expand_bucket, 0);
    atomic_store(&expanding, false);
    atomic_store(&hashpower, power);
    atomic_store(&primary, table);
    bulk_move = bulk > 0 ? bulk : 1;
    want_expand = false;
    return 0;
}

void
assoc_destroy(void)
{
    assoc_thread_stop();
    free(atomic_load(&primary));
    free(atomic_load(&old_table));
    atomic_store(&primary, NULL);
    atomic_store(&old_table, NULL);
    atomic_store(&expanding, false);
    atomic_store(&hashpower, 0);
}

struct item *
assoc_find(const char *key, size_t nkey, uint32_t hv)
{
    struct item *it = *bucket_for(hv);

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
    for (size_t i = 0; i < nkey; i++) {
        if (__atomic_load_n(&k[i], __ATOMIC_RELAXED) != key[i]) {
            return false;
        }
    }
    return true;
}

struct item *
assoc_peek(const char *key, size_t nkey, uint32_t hv, uint32_t seq, bool *ok)
{
    unsigned power = atomic_load_explicit(&hashpower, memory_order_acquire);
    struct item **table = atomic_load_explicit(&primary,
                                               memory_order_acquire);
    struct item *it;

    *ok = false;
    if (atomic_load_explicit(&expanding, memory_order_acquire)) {
        return NULL;
    }
    it = __atomic_load_n(&table[hv & hashmask(power)], __ATOMIC_RELAXED);
    for (unsigned hops = 0; locks_seq_same(hv, seq); hops++) {
        if (it == NULL) {
            *ok = true;
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
    struct item **slot = bucket_for(hv);

    it->h_next = *slot;
    *slot = it;
}

void
assoc_insert_shared(struct item *it, uint32_t hv)
{
    struct item **slot = bucket_for(hv);
    struct item *head = __atomic_load_n(slot, __ATOMIC_RELAXED);

    do {
        it->h_next = head;
    } while (!__atomic_compare_exchange_n(slot, &head, it, true,
                                          __ATOMIC_RELAXED,
                                          __ATOMIC_RELAXED));
}

void
assoc_delete(const char *key, size_t nkey, uint32_t hv)
{
    struct item **pp = bucket_for(hv);
    struct item *it;

    for (; (it = *pp) != NULL; pp = &it->h_next) {
        if (it->nkey == nkey && memcmp(key_of(it), key, nkey) == 0) {
            *pp = it->h_next;
            it->h_next = NULL;
            return;
        }
    }
}

/* ---- expansion ------------------------------------------------------- */

/*
 * Make a table twice the size of primary.  It is allocated before any lock
 * is taken, so workers wait only for the pointer swap (locking every stripe
 * is the cost: a few hundred microseconds at 2^15 stripes).
 */
static int
swap_tables(void)
{
    unsigned power = atomic_load(&hashpower);
    struct item **table;

    if (power >= ASSOC_POWER_MAX ||
        hashsize(power + 1) > SIZE_MAX / sizeof(*table)) {
        return -1;
    }
    table = table_calloc(hashsize(power + 1));
    if (table == NULL) {
        return -1;
    }
    locks_lock_all();
    /* Store order matters for assoc_bucket_hint(), see there. */
    atomic_store(&old_table, atomic_load(&primary));
    atomic_store(&expand_bucket, 0);
    atomic_store(&primary, table);
    atomic_store(&hashpower, power + 1);
    atomic_store(&expanding, true);
    locks_unlock_all();
    return 0;
}

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

/* Rehash old bucket b into primary; the caller holds its item lock. */
static void
move_bucket(uint64_t b)
{
    struct item **old = atomic_load_explicit(&old_table, RELAXED);
    struct item **table = atomic_load_explicit(&primary, RELAXED);
    uint64_t mask = hashmask(atomic_load_explicit(&hashpower, RELAXED));
    struct item *it, *next;
    uint64_t nb;

    for (it = old[b]; it != NULL; it = next) {
        next = it->h_next;
        nb = hash_key(key_of(it), it->nkey) & mask;
        it->h_next = table[nb];
        table[nb] = it;
    }
    old[b] = NULL;
}

/* No reader picks the old table once expand_bucket has passed the end. */
static void
finish_expansion(void)
{
    struct item **old = atomic_load(&old_table);

    atomic_store(&expanding, false);
    atomic_store(&old_table, NULL);
    quiesce_wait();         /* a walk may still read the old slots */
    free(old);
}

/* Move old buckets until done or stopped; resumes where it left off. */
static void
migrate(void)
{
    uint64_t n = hashsize(atomic_load(&hashpower) - 1);
    uint64_t b = atomic_load(&expand_bucket);
    uint64_t end;

    while (b < n) {
        end = b + bulk_move < n ? b + bulk_move : n;
        for (; b < end; b++) {
            if (!lock_bucket(b)) {
                return;
            }
            move_bucket(b);
            /* Published before the unlock: see the top of the file. */
            atomic_store(&expand_bucket, b + 1);
            locks_unlock((uint32_t)b);
        }
        if (atomic_load(&stop_thread)) {
            return;
        }
    }
    finish_expansion();
}

/* Another doubling only if the item count asked for still calls for it. */
static bool
still_wanted(void)
{
    unsigned power = atomic_load(&hashpower);

    return power < ASSOC_POWER_MAX && want_items > hashsize(power) * 3 / 2;
}

static void *
expander_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&maint_lock);
    while (!atomic_load(&stop_thread)) {
        if (atomic_load(&expanding)) {
            migrate();
            continue;
        }
        if (want_expand) {
            want_expand = false;
            if (still_wanted() && swap_tables() == 0) {
                continue;
            }
        }
        pthread_cond_wait(&maint_cond, &maint_lock);
    }
    pthread_mutex_unlock(&maint_lock);
    return NULL;
}

int
assoc_thread_start(void)
{
    if (thread_running) {
        return 0;
    }
    if (atomic_load(&primary) == NULL) {
        return -1;
    }
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
    unsigned power = atomic_load_explicit(&hashpower, RELAXED);

    if (power >= ASSOC_POWER_MAX || curr_items <= hashsize(power) * 3 / 2) {
        return;
    }
    /* Busy means an expansion or a walk is running: ask again later. */
    if (pthread_mutex_trylock(&maint_lock) != 0) {
        return;
    }
    want_expand = true;
    want_items = curr_items;
    pthread_cond_signal(&maint_cond);
    pthread_mutex_unlock(&maint_lock);
}

/* Lock-free: a racy snapshot, good enough for "stats". */
void
assoc_stats(uint64_t *hash_power_level, uint64_t *hash_bytes,
            uint64_t *hash_is_expanding)
{
    unsigned power = atomic_load(&hashpower);
    bool exp = atomic_load(&expanding);
    uint64_t bytes = hashsize(power) * sizeof(void *);

    /* Both tables are allocated until the move ends, as memcached counts. */
    if (exp && power > 0) {
        bytes += hashsize(power - 1) * sizeof(void *);
    }
    *hash_power_level = power;
    *hash_bytes = power > 0 ? bytes : 0;
    *hash_is_expanding = exp;
}

/*
 * Lock-free and may see a swap half done, so it takes care to stay in
 * bounds: hashpower is stored after primary and old_table (all seq_cst), so
 * a power read first never exceeds the tables read after it.  The slot may
 * belong to a table that is being freed; callers only prefetch it.
 */
const void *
assoc_bucket_hint(uint32_t hv)
{
    unsigned power = atomic_load(&hashpower);
    struct item **table = atomic_load(&primary);
    struct item **old = atomic_load(&old_table);
    uint64_t ob;

    if (power == 0 || table == NULL) {
        return NULL;
    }
    if (old != NULL && atomic_load_explicit(&expanding, RELAXED)) {
        ob = hv & hashmask(power - 1);
        if (ob >= atomic_load_explicit(&expand_bucket, RELAXED)) {
            return &old[ob];
        }
    }
    return &table[hv & hashmask(power)];
}

/* ---- walk ------------------------------------------------------------ */

static int
walk_chain(struct item *it, int (*fn)(struct item *, void *), void *ctx)
{
    struct item *next;
    int rc;

    for (; it != NULL; it = next) {
        next = it->h_next;
        rc = fn(it, ctx);
        if (rc != 0) {
            return rc;
        }
    }
    return 0;
}

/*
 * Old bucket b's items are either still in old[b] or were split into new
 * buckets b and b + n; all three share b's item lock.
 */
static int
walk_bucket(uint64_t b, uint64_t n, bool exp,
            int (*fn)(struct item *, void *), void *ctx)
{
    struct item **table = atomic_load_explicit(&primary, RELAXED);
    int rc;

    if (!exp) {
        return walk_chain(table[b], fn, ctx);
    }
    if (b >= atomic_load_explicit(&expand_bucket, RELAXED)) {
        return walk_chain(atomic_load(&old_table)[b], fn, ctx);
    }
    rc = walk_chain(table[b], fn, ctx);
    return rc != 0 ? rc : walk_chain(table[b + n], fn, ctx);
}

/*
 * Under maint_lock the table shape cannot change: no swap, no move.  When
 * an expansion was left half done by assoc_thread_stop(), the walk covers
 * both tables through walk_bucket().
 */
void
assoc_walk(int (*fn)(struct item *it, void *ctx), void *ctx)
{
    unsigned power;
    bool exp;
    uint64_t n, b;
    int rc = 0;

    pthread_mutex_lock(&maint_lock);
    power = atomic_load(&hashpower);
    exp = atomic_load(&expanding);
    n = exp ? hashsize(power - 1) : hashsize(power);
    if (atomic_load(&primary) == NULL) {
        n = 0;
    }
    for (b = 0; b < n && rc == 0; b++) {
        locks_lock((uint32_t)b);
        rc = walk_bucket(b, n, exp, fn, ctx);
        locks_unlock((uint32_t)b);
    }
    pthread_mutex_unlock(&maint_lock);
}
