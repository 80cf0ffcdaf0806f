/*
 * tomb.c: the keys that left the index while a recovery runs (tomb.h).
 *
 * A chained table striped like the item locks: bucket b is guarded by
 * the item lock of every hash with b's low bits, so a caller holding
 * locks_lock(hv) may read and change hv's bucket.  The log is appended
 * to under a mutex of its own, one record a note:
 *
 *   header: "MCPMTOMB" (8) | file id (8)
 *   record: crc32c (4) | nkey (2) | 0 (2) | seq (8) | key (nkey)
 *
 * A record without a key is a flush_all: every copy up to its seq.
 * The checksum covers the record after it; a record torn by a crash ends
 * the log where it starts.
 */
#include "storage/index/tomb.h"
#include "storage/base/crc.h"
#include "storage/base/hash.h"
#include "storage/base/locks.h"
#include "storage/slab/item.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TOMB_MAGIC      "MCPMTOMB"

struct tomb {
    struct tomb    *next;
    uint64_t        seq;        /* copies up to it are older */
    uint32_t        hv;
    uint16_t        nkey;
    char            key[];
};

struct rec {
    uint32_t        crc;
    uint16_t        nkey;
    uint16_t        zero;
    uint64_t        seq;
};

static struct {
    bool            active;
    struct tomb   **b;
    uint32_t        mask;       /* buckets - 1; covers the lock mask */
    uint64_t        mark;
    uint64_t        flushed;    /* every copy up to it is gone */
    uint64_t        count;
    uint64_t       *filter;
    uint32_t        filter_mask;    /* bits - 1 */
    int             fd;         /* the log, or -1 */
    bool            sync;
    char           *path;
    pthread_mutex_t log_lock;
} tb = { .fd = -1, .log_lock = PTHREAD_MUTEX_INITIALIZER };

bool
tomb_active(void)
{
    return __atomic_load_n(&tb.active, __ATOMIC_ACQUIRE);
}

uint64_t
tomb_count(void)
{
    return __atomic_load_n(&tb.count, __ATOMIC_RELAXED);
}

static struct tomb *
find(const char *key, size_t nkey, uint32_t hv)
{
    for (struct tomb *t = tb.b[hv & tb.mask]; t != NULL; t = t->next) {
        if (t->hv == hv && t->nkey == nkey && memcmp(t->key, key, nkey) == 0) {
            return t;
        }
    }
    return NULL;
}

/* Note the key as covering seq (the higher of two notes wins).  False
 * when it was noted with that seq already, or memory ran out. */
static bool
put(const char *key, size_t nkey, uint32_t hv, uint64_t seq)
{
    struct tomb *t = find(key, nkey, hv);

    if (t != NULL) {
        if (t->seq >= seq) {
            return false;
        }
        t->seq = seq;
        return true;
    }
    t = malloc(sizeof(*t) + nkey);
    if (t == NULL) {
        return false;
    }
    t->seq = seq;
    t->hv = hv;
    t->nkey = (uint16_t)nkey;
    memcpy(t->key, key, nkey);
    t->next = tb.b[hv & tb.mask];
    tb.b[hv & tb.mask] = t;
    __atomic_add_fetch(&tb.count, 1, __ATOMIC_RELAXED);
    return true;
}

static uint32_t
rec_crc(const struct rec *r, const char *key)
{
    uint32_t c = crc_32c(0, &r->nkey, sizeof(*r) - sizeof(r->crc));

    return crc_32c(c, key, r->nkey);
}

static void
append(const char *key, size_t nkey, uint64_t seq)
{
    char buf[sizeof(struct rec) + ITEM_KEY_MAX];
    struct rec r = { .nkey = (uint16_t)nkey, .seq = seq };
    size_t len = sizeof(r) + nkey;

    if (nkey > ITEM_KEY_MAX) {
        return;
    }
    r.crc = rec_crc(&r, key);
    memcpy(buf, &r, sizeof(r));
    memcpy(buf + sizeof(r), key, nkey);
    pthread_mutex_lock(&tb.log_lock);
    if (tb.fd >= 0 && (write(tb.fd, buf, len) != (ssize_t)len ||
                       (tb.sync && fdatasync(tb.fd) != 0))) {
        fprintf(stderr, "recovery: cannot write %s (%s): a crash before "
                "recovery ends may bring back keys removed since the "
                "start\n", tb.path, strerror(errno));
        close(tb.fd);
        tb.fd = -1;
    }
    pthread_mutex_unlock(&tb.log_lock);
}


/*
 * A key's two bits in the filter, both in the word its hash's low bits
 * pick (one cache line to fetch): one at the hash's low six bits, one
 * at six bits of the hash mixed (a search is then spared for most of
 * the keys whose first bit another key set: about 7 % of heads find
 * both set at 6.4 bits a key, against 15 % for one bit).
 */
static inline uint64_t
filter_bits_of(uint32_t hv)
{
    return (uint64_t)1 << (hv & 63) |
           (uint64_t)1 << ((hv * 0x9e3779b1u) >> 26);
}

static inline uint64_t *
filter_word(uint32_t hv)
{
    return &tb.filter[(hv & tb.filter_mask) >> 6];
}

bool
tomb_test_mark(uint32_t hv)
{
    uint64_t m = filter_bits_of(hv);

    return (__atomic_fetch_or(filter_word(hv), m, __ATOMIC_RELAXED) & m) ==
           m;
}

const void *
tomb_hint(uint32_t hv)
{
    return filter_word(hv);
}

bool
tomb_maybe(uint32_t hv)
{
    uint64_t m = filter_bits_of(hv);

    return (__atomic_load_n(filter_word(hv), __ATOMIC_RELAXED) & m) == m;
}

void
tomb_mark(uint32_t hv)
{
    if (!tomb_maybe(hv)) {      /* a bit once set stays set: no RMW */
        (void)tomb_test_mark(hv);
    }
}

void
tomb_note(const char *key, size_t nkey, uint32_t hv)
{
    tomb_mark(hv);
    if (put(key, nkey, hv, tb.mark)) {
        append(key, nkey, tb.mark);
    }
}

void
tomb_flush(void)
{
    locks_lock_all();
    if (tomb_active()) {
        __atomic_store_n(&tb.flushed, tb.mark, __ATOMIC_RELAXED);
        append("", 0, tb.mark);
    }
    locks_unlock_all();
}

bool
tomb_flushed(uint64_t seq)
{
    return seq <= __atomic_load_n(&tb.flushed, __ATOMIC_RELAXED);
}

bool
tomb_covers(const char *key, size_t nkey, uint32_t hv, uint64_t seq)
{
    const struct tomb *t;

    if (__atomic_load_n(&tb.count, __ATOMIC_RELAXED) == 0) {
        return false;
    }
    t = find(key, nkey, hv);
    return t != NULL && seq <= t->seq;
}

/* The notes of the log at tb.path, if it is the file's; the offset its
 * good records end at (where this run appends), or 0 for a log made
 * anew. */
static off_t
load(uint64_t file_id)
{
    char head[16], key[ITEM_KEY_MAX];
    struct rec r;
    off_t end = sizeof(head);
    FILE *f = fopen(tb.path, "rb");

    if (f == NULL) {
        return 0;
    }
    if (fread(head, 1, sizeof(head), f) != sizeof(head) ||
        memcmp(head, TOMB_MAGIC, 8) != 0 ||
        memcmp(head + 8, &file_id, 8) != 0) {
        fclose(f);
        return 0;
    }
    while (fread(&r, sizeof(r), 1, f) == 1 && r.nkey <= ITEM_KEY_MAX &&
           fread(key, 1, r.nkey, f) == r.nkey && rec_crc(&r, key) == r.crc) {
        uint32_t hv = hash_key(key, r.nkey);

        if (r.nkey == 0) {
            tb.flushed = r.seq > tb.flushed ? r.seq : tb.flushed;
        } else {
            tomb_mark(hv);
            (void)put(key, r.nkey, hv, r.seq);
        }
        end += (off_t)(sizeof(r) + r.nkey);
    }
    fclose(f);
    return end;
}

int
tomb_begin(const char *path, uint64_t file_id, uint64_t mark, bool sync,
           unsigned filter_bits)
{
    unsigned bits = locks_power() + 6;
    off_t end;

    filter_bits = filter_bits < 6 ? 6 : filter_bits > 32 ? 32 : filter_bits;
    tb.filter_mask = (uint32_t)((1ull << filter_bits) - 1);
    tb.filter = calloc(((size_t)1 << filter_bits) / 64, sizeof(uint64_t));
    tb.mask = (uint32_t)((1ull << bits) - 1);
    tb.b = calloc((size_t)tb.mask + 1, sizeof(*tb.b));
    if (tb.b == NULL || tb.filter == NULL) {
        fprintf(stderr, "recovery: out of memory\n");
        tomb_end(false);
        return -1;
    }
    tb.mark = mark;
    tb.flushed = 0;
    tb.sync = sync;
    tb.count = 0;
    tb.fd = -1;
    if (path != NULL) {
        tb.path = strdup(path);
        if (tb.path == NULL) {
            tomb_end(false);
            return -1;
        }
        end = load(file_id);
        tb.fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        if (tb.fd < 0 || ftruncate(tb.fd, end) != 0 ||
            lseek(tb.fd, end, SEEK_SET) != end ||
            (end == 0 && (write(tb.fd, TOMB_MAGIC, 8) != 8 ||
                          write(tb.fd, &file_id, 8) != 8)) ||
            (sync && fsync(tb.fd) != 0)) {
            fprintf(stderr, "recovery: cannot open %s: %s\n", path,
                    strerror(errno));
            tomb_end(false);
            return -1;
        }
    }
    __atomic_store_n(&tb.active, true, __ATOMIC_RELEASE);
    return 0;
}

void
tomb_end(bool done)
{
    /* Notes are made under item locks: with all of them taken once, no
     * caller is inside, and none comes in. */
    locks_lock_all();
    __atomic_store_n(&tb.active, false, __ATOMIC_RELEASE);
    locks_unlock_all();
    pthread_mutex_lock(&tb.log_lock);
    if (tb.fd >= 0) {
        close(tb.fd);
        tb.fd = -1;
    }
    pthread_mutex_unlock(&tb.log_lock);
    if (done && tb.path != NULL) {
        (void)unlink(tb.path);
    }
    free(tb.path);
    tb.path = NULL;
    for (size_t i = 0; tb.b != NULL && i <= tb.mask; i++) {
        while (tb.b[i] != NULL) {
            struct tomb *t = tb.b[i];

            tb.b[i] = t->next;
            free(t);
        }
    }
    free(tb.b);
    tb.b = NULL;
    free(tb.filter);
    tb.filter = NULL;
    __atomic_store_n(&tb.count, 0, __ATOMIC_RELAXED);
}
