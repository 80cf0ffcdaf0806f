/*
 * item.h: what the rest of the server may see of an item.
 *
 * An item is one allocation in a slab chunk: a header, the key and the
 * value followed by "\r\n" (so that a reply can send the value straight from
 * item memory).  Values larger than the slab chunk limit are chunked: the
 * value is a chain of chunks and is only ever reached through
 * item_value_iov(), never as one pointer.
 *
 * Everything here reads fields that do not change while the caller holds a
 * reference (from cache_get() and friends, or cache_alloc()), so no lock is
 * needed.  The layout itself is private to storage/.
 */
#ifndef MCPM_STORAGE_ITEM_H
#define MCPM_STORAGE_ITEM_H

#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>

#include "storage/base/clock.h"
#include "storage/tier/tier.h"

struct item;

/*
 * The accessors every request calls (item_key(), item_nkey(),
 * item_client_flags(), item_cas(), item_clsid(), item_lru(),
 * item_in_pmem(), item_vlen(), item_value()) are inline functions defined
 * after the layout below; they are all a caller outside storage/ uses of
 * it.
 */
rel_time_t  item_exptime(const struct item *it);     /* 0: never */
rel_time_t  item_atime(const struct item *it);       /* last access */
size_t      item_ntotal(const struct item *it);      /* bytes it takes */

/* Keys sent base64-encoded (the meta b flag) are stored decoded and marked,
 * so that replies encode them again.  Mark only a fresh item from
 * cache_alloc() that nobody else can see yet. */
bool item_key_binary(const struct item *it);
void item_set_key_binary(struct item *it);

/*
 * The value bytes plus the trailing "\r\n" (vlen + 2 in all), from byte
 * `off` on, as at most `max` iovecs.  Returns the number of iovecs filled; 0
 * when off is at the end.  For writing the value into a fresh item from
 * cache_alloc() as well as for sending it.
 */
size_t item_value_iov(const struct item *it, size_t off, struct iovec *iov,
                      size_t max);

/* True if the last two bytes of the value block are "\r\n". */
bool item_value_crlf_ok(const struct item *it);

/* Copy min(len, vlen + 2) value bytes from offset 0 into buf; returns the
 * count.  For small values (incr/decr, tests). */
size_t item_value_copy(const struct item *it, char *buf, size_t len);

/* The other way: min(len, vlen + 2) bytes of src into a fresh item's
 * value (from cache_alloc(), not yet stored), chunked or not. */
void item_value_fill(struct item *it, const char *src, size_t len);

/* ---- storage/ only ------------------------------------------------------
 *
 * The layout, 48 bytes of header as memcached's (so item sizes, and with
 * them the -I limit and the class an item lands in, are the same):
 *
 *   next, prev   LRU links                       LRU lock
 *   h_next       hash chain                      item lock
 *   time         last access (rel_time_t)        item lock
 *   exptime      0 = never                       item lock
 *   nbytes       value length + 2                item lock
 *   refcount     atomic
 *   flags        ITEM_*                          item lock
 *   clsid        slab class | sub-LRU << 6       item lock
 *   nkey         key length
 *   tier         which tier's memory holds it
 *   data[]       [cas, 8 bytes if ITEM_CAS] key NUL
 *                [client flags, 4 bytes if ITEM_CFLAGS] value "\r\n"
 *                (chunked: the value area holds the first chunk pointer)
 *                [ITEM_COPY: the original's address, 8 bytes]
 *
 * A copy (tier_policy cache) is an unchunked DRAM item standing in the
 * hash table for an original that stays committed in the memory file but
 * is on no list.  The copy holds a reference to the original through the
 * trailer; the trailer is NULL once that reference was handed back.
 */
#define ITEM_LINKED    0x0001
#define ITEM_CAS       0x0002
#define ITEM_SLABBED   0x0004  /* free in its slab (slabs.h SLABS_FREE) */
#define ITEM_FETCHED   0x0008
#define ITEM_ACTIVE    0x0010
#define ITEM_CHUNKED   0x0020
#define ITEM_CHUNK     0x0040
#define ITEM_CFLAGS    0x0100
#define ITEM_TOKEN_SENT 0x0200  /* mg handed out a win token (W) */
#define ITEM_COPY      0x0400  /* a DRAM copy of an item in the file */
#define ITEM_STALE     0x0800  /* md I or ms I: a newer value exists */
#define ITEM_KEY_BINARY 0x1000  /* the key came base64-encoded (meta b) */

#define ITEM_LRU_SHIFT 6
#define ITEM_CLSID_MASK 0x3f

/* The longest key an item holds: memcached's KEY_MAX_LENGTH. */
#define ITEM_KEY_MAX    250

struct item {
    struct item *next;
    struct item *prev;
    struct item *h_next;
    rel_time_t   time;
    rel_time_t   exptime;
    uint32_t     nbytes;
    uint16_t     refcount;
    uint16_t     flags;
    uint8_t      clsid;
    uint8_t      nkey;
    uint8_t      tier;
    uint8_t      unused;
    char         data[];
};

/*
 * A chunk of a chunked item's value, taken from the largest slab class (the
 * last one of a chain may come from a smaller class).  refcount, flags and
 * clsid sit at the same offsets as in struct item, so that the page mover
 * can read any chunk of a page as either.  The header item's value area
 * holds the pointer to the first chunk.
 */
struct item_chunk {
    struct item_chunk *next;
    struct item_chunk *prev;
    struct item       *head;
    uint32_t     size;          /* data bytes this chunk can hold */
    uint32_t     used;          /* data bytes in use */
    uint32_t     spare;
    uint16_t     refcount;
    uint16_t     flags;         /* ITEM_CHUNK, ITEM_SLABBED when free */
    uint8_t      clsid;
    uint8_t      orig_clsid;
    uint8_t      tier;
    uint8_t      unused;
    char         data[];
};

/*
 * it->flags is changed under the item lock but read by threads that only
 * hold a reference (the layout bits CAS, CFLAGS and CHUNKED never change
 * after allocation) or a list lock, so every access is a relaxed atomic.
 */
static inline uint16_t
item_flags(const struct item *it)
{
    return __atomic_load_n(&it->flags, __ATOMIC_RELAXED);
}

static inline void
item_flags_set(struct item *it, uint16_t f)
{
    __atomic_fetch_or(&it->flags, f, __ATOMIC_RELAXED);
}

static inline void
item_flags_clear(struct item *it, uint16_t f)
{
    __atomic_fetch_and(&it->flags, (uint16_t)~f, __ATOMIC_RELAXED);
}

static inline void
item_flags_store(struct item *it, uint16_t f)
{
    __atomic_store_n(&it->flags, f, __ATOMIC_RELAXED);
}

/* it->time likewise: bumped under the item lock, read by the maintainer
 * under a list lock. */
static inline rel_time_t
item_time(const struct item *it)
{
    return __atomic_load_n(&it->time, __ATOMIC_RELAXED);
}

static inline void
item_time_store(struct item *it, rel_time_t t)
{
    __atomic_store_n(&it->time, t, __ATOMIC_RELAXED);
}

static inline size_t
item_cas_len(const struct item *it)
{
    return (item_flags(it) & ITEM_CAS) ? sizeof(uint64_t) : 0;
}

/* Offset in data[] of the value (or of a chunked item's chain pointer). */
static inline size_t
item_value_off(const struct item *it)
{
    return item_cas_len(it) + it->nkey + 1 +
           ((item_flags(it) & ITEM_CFLAGS) ? sizeof(uint32_t) : 0);
}

static inline const char *
item_key(const struct item *it)
{
    return it->data + item_cas_len(it);
}

static inline size_t
item_nkey(const struct item *it)
{
    return it->nkey;
}

/*
 * Whether the n key bytes at ik (an item's, which another thread may be
 * rewriting: a reader without the lock checks its stripe's count after)
 * are key's: relaxed loads, four bytes at a time, stopping at the first
 * word that differs.  ik is 4-aligned (the header is 44 bytes, a CAS 8,
 * chunks 8-aligned); the last word holds the key's last byte, so being
 * aligned it lies in that byte's page, and what it holds past the key
 * is masked off.
 */
static inline bool
item_key_equal_relaxed(const char *ik, const char *key, size_t n)
{
    size_t i = 0;
    uint32_t a, b = 0;

    if (((uintptr_t)ik & 3) != 0) {
        for (; i < n; i++) {
            if (__atomic_load_n(&ik[i], __ATOMIC_RELAXED) != key[i]) {
                return false;
            }
        }
        return true;
    }
    for (; i + 4 <= n; i += 4) {
        a = __atomic_load_n((const uint32_t *)(const void *)(ik + i),
                            __ATOMIC_RELAXED);
        memcpy(&b, key + i, 4);
        if (a != b) {
            return false;
        }
    }
    if (i == n) {
        return true;
    }
    a = __atomic_load_n((const uint32_t *)(const void *)(ik + i),
                        __ATOMIC_RELAXED);
    b = 0;
    memcpy(&b, key + i, n - i);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    a &= ~(uint32_t)0 << (8 * (4 - (n - i)));
#else
    a &= ~(uint32_t)0 >> (8 * (4 - (n - i)));
#endif
    return a == b;
}

static inline uint32_t
item_client_flags(const struct item *it)
{
    uint32_t fl = 0;

    if (item_flags(it) & ITEM_CFLAGS) {
        memcpy(&fl, it->data + item_cas_len(it) + it->nkey + 1, sizeof(fl));
    }
    return fl;
}

/* 0 with CAS off. */
static inline uint64_t
item_cas(const struct item *it)
{
    uint64_t cas = 0;

    if (item_flags(it) & ITEM_CAS) {
        memcpy(&cas, it->data, sizeof(cas));
    }
    return cas;
}

/* The slab class id. */
static inline unsigned
item_clsid(const struct item *it)
{
    return it->clsid & ITEM_CLSID_MASK;
}

/* Sub-LRU the item sits in, for hits_to_hot/warm/cold/temp; a racy read
 * that is good enough for statistics. */
enum item_lru { ITEM_LRU_HOT, ITEM_LRU_WARM, ITEM_LRU_COLD, ITEM_LRU_TEMP };

static inline enum item_lru
item_lru(const struct item *it)
{
    return (enum item_lru)(__atomic_load_n(&it->clsid, __ATOMIC_RELAXED) >>
                           ITEM_LRU_SHIFT);
}

/* Whether the item's memory is in the persistent (PMEM) tier. */
static inline bool
item_in_pmem(const struct item *it)
{
    return it->tier == TIER_PMEM;
}

/* Value length without the trailing "\r\n". */
static inline uint32_t
item_vlen(const struct item *it)
{
    return it->nbytes - 2;
}

/* The contiguous value of an unchunked item (vlen + 2 bytes). */
static inline char *
item_value(struct item *it)
{
    assert(!(item_flags(it) & ITEM_CHUNKED));
    return it->data + item_value_off(it);
}

/*
 * storage/-internal item calls.  Unless said otherwise the caller holds the
 * item's lock or the only reference.
 */

/* Bytes an item of this shape takes: memcached's ITEM_ntotal. */
size_t item_size(size_t nkey, uint32_t client_flags, uint32_t vlen,
                 bool use_cas);

/*
 * Memory for an item or one piece of its value: `size` bytes of tier
 * class tc (slabs.h), room made in the lists of tier class lru_tc if need
 * be (by eviction or demotion: place.h); NULL when none can be had.
 */
typedef void *item_mem_fn(size_t size, unsigned tc, unsigned lru_tc);

/*
 * A new unlinked item in tier t with one reference, its memory from mem;
 * chunked when item_size() is over the slab chunk limit.  NULL when memory
 * runs out (nothing is held then).  No lock needed.
 */
struct item *item_new(item_mem_fn *mem, unsigned t, const char *key,
                      size_t nkey, uint32_t client_flags, rel_time_t exptime,
                      uint32_t vlen, bool use_cas);

/* References: atomic; item_release() frees the memory at zero.  Any thread,
 * no lock needed. */
uint16_t item_ref_incr(struct item *it);
uint16_t item_ref_decr(struct item *it);
void     item_release(struct item *it);

/* Free the item's memory now (chunks, then the header; a copy lets go
 * of its original). */
void     item_free(struct item *it);

/* Bytes the item's chunk was allocated for: item_ntotal() plus a copy's
 * trailer. */
size_t   item_alloc_size(const struct item *it);

/* A copy's original (NULL when not a copy or handed back), and setting
 * it.  Item lock held. */
struct item *item_original(const struct item *it);
void     item_set_original(struct item *it, struct item *orig);

void     item_set_cas(struct item *it, uint64_t cas);

/* A chunked item's chain: its first piece, setting it (recovery rebuilds
 * chains), and the bytes the head itself takes (all but the value, which
 * the pointer to the chain replaces). */
struct item_chunk *item_first_chunk(const struct item *it);
void     item_set_first_chunk(struct item *it, struct item_chunk *ch);
size_t   item_header_size(const struct item *it);

/* Copy src's value bytes [soff, soff + len) to dst's value at doff,
 * chunked or not on either side. */
void     item_value_move(struct item *dst, size_t doff,
                         const struct item *src, size_t soff, size_t len);

#endif
