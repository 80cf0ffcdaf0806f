/*
 * item.c: item layout, accessors, allocation and references.
 *
 * An unchunked item is one slab chunk:
 *
 *   | header (48) | cas (8, if ITEM_CAS) | key | NUL |
 *   | client flags (4, if ITEM_CFLAGS) | value | \r\n |
 *
 * A chunked item (ITEM_CHUNKED) keeps the same header, key and flags in a
 * small class, and in place of the value a pointer to a chain of
 * struct item_chunk taken from the largest class.  Its clsid is the largest
 * class, so it lives (and is evicted) in that class's LRU, where evicting
 * it frees the chunks that class is short of; the class of the header's own
 * memory is kept in the first chunk's orig_clsid.
 *
 * Locking: none of its own.  The caller holds the item lock or the only
 * reference (item.h); references are atomic; memory comes from the
 * caller's item_mem_fn and goes back to slabs, which lock themselves.
 */
#include "storage/slab/item.h"
#include "storage/slab/slabs.h"

#include <assert.h>
#include <stddef.h>
#include <string.h>

/* struct item, struct item_chunk and slabs' struct slabs_chunk lie over
 * the same 48 bytes: the fields any of them reads of a chunk whose kind
 * it does not know yet sit at the same offsets in all three. */
#define SAME_AT(a, b, fa, fb) \
    _Static_assert(offsetof(a, fa) == offsetof(b, fb), #fa " of " #a)
#define SHARED_FIELDS(b)                                                    \
    SAME_AT(struct item, b, refcount, refcount);                            \
    SAME_AT(struct item, b, flags, flags);                                  \
    SAME_AT(struct item, b, clsid, clsid);                                  \
    SAME_AT(struct item, b, tier, tier)

_Static_assert(sizeof(struct item) == 48, "memcached's 48-byte header");
_Static_assert(sizeof(struct item_chunk) == 48, "chunk header size");
_Static_assert(sizeof(struct slabs_chunk) == 48, "slabs' header size");
SHARED_FIELDS(struct item_chunk);
SHARED_FIELDS(struct slabs_chunk);
SAME_AT(struct item, struct slabs_chunk, h_next, hint);
_Static_assert(ITEM_SLABBED == SLABS_FREE, "the free mark");

struct item_chunk *
item_first_chunk(const struct item *it)
{
    struct item_chunk *ch;

    memcpy(&ch, it->data + item_value_off(it), sizeof(ch));
    return ch;
}

void
item_set_first_chunk(struct item *it, struct item_chunk *ch)
{
    memcpy(it->data + item_value_off(it), &ch, sizeof(ch));
}

void
item_set_cas(struct item *it, uint64_t cas)
{
    if (item_flags(it) & ITEM_CAS) {
        memcpy(it->data, &cas, sizeof(cas));
    }
}

rel_time_t
item_exptime(const struct item *it)
{
    return it->exptime;
}

rel_time_t
item_atime(const struct item *it)
{
    return item_time(it);
}

size_t
item_ntotal(const struct item *it)
{
    return sizeof(struct item) + item_value_off(it) + it->nbytes;
}

bool
item_key_binary(const struct item *it)
{
    return (item_flags(it) & ITEM_KEY_BINARY) != 0;
}

void
item_set_key_binary(struct item *it)
{
    item_flags_set(it, ITEM_KEY_BINARY);
}

size_t
item_size(size_t nkey, uint32_t client_flags, uint32_t vlen, bool use_cas)
{
    return sizeof(struct item) + (use_cas ? sizeof(uint64_t) : 0) + nkey +
           1 + (client_flags != 0 ? sizeof(uint32_t) : 0) + vlen + 2;
}

/* ---- value access ------------------------------------------------------ */

static size_t
chunked_iov(const struct item *it, size_t off, struct iovec *iov, size_t max)
{
    const struct item_chunk *ch = item_first_chunk(it);
    size_t n = 0;

    while (ch != NULL && off >= ch->used) {
        off -= ch->used;
        ch = ch->next;
    }
    for (; ch != NULL && n < max; ch = ch->next) {
        iov[n].iov_base = (char *)ch->data + off;
        iov[n].iov_len = ch->used - off;
        off = 0;
        n++;
    }
    return n;
}

size_t
item_value_iov(const struct item *it, size_t off, struct iovec *iov,
               size_t max)
{
    if (max == 0 || off >= it->nbytes) {
        return 0;
    }
    if (item_flags(it) & ITEM_CHUNKED) {
        return chunked_iov(it, off, iov, max);
    }
    iov[0].iov_base = (char *)it->data + item_value_off(it) + off;
    iov[0].iov_len = it->nbytes - off;
    return 1;
}

size_t
item_value_copy(const struct item *it, char *buf, size_t len)
{
    size_t want = len < it->nbytes ? len : it->nbytes;
    size_t done = 0;
    struct iovec iov;

    while (done < want && item_value_iov(it, done, &iov, 1) == 1) {
        size_t n = iov.iov_len < want - done ? iov.iov_len : want - done;

        memcpy(buf + done, iov.iov_base, n);
        done += n;
    }
    return done;
}

void
item_value_fill(struct item *it, const char *src, size_t len)
{
    size_t want = len < it->nbytes ? len : it->nbytes;
    size_t done = 0;
    struct iovec iov;

    while (done < want && item_value_iov(it, done, &iov, 1) == 1) {
        size_t n = iov.iov_len < want - done ? iov.iov_len : want - done;

        memcpy(iov.iov_base, src + done, n);
        done += n;
    }
}

bool
item_value_crlf_ok(const struct item *it)
{
    char tail[2];
    struct iovec iov;
    size_t got = 0;

    if (it->nbytes < 2) {
        return false;
    }
    if (!(item_flags(it) & ITEM_CHUNKED)) {
        const char *end = it->data + item_value_off(it) + it->nbytes;

        return end[-2] == '\r' && end[-1] == '\n';
    }
    while (got < 2 &&
           item_value_iov(it, it->nbytes - 2 + got, &iov, 1) == 1) {
        tail[got++] = *(char *)iov.iov_base;
    }
    return got == 2 && tail[0] == '\r' && tail[1] == '\n';
}

void
item_value_move(struct item *dst, size_t doff, const struct item *src,
                size_t soff, size_t len)
{
    struct iovec d, s;

    while (len > 0 && item_value_iov(dst, doff, &d, 1) == 1 &&
           item_value_iov(src, soff, &s, 1) == 1) {
        size_t n = d.iov_len < s.iov_len ? d.iov_len : s.iov_len;

        if (n > len) {
            n = len;
        }
        memmove(d.iov_base, s.iov_base, n);
        doff += n;
        soff += n;
        len -= n;
    }
}

/* ---- references -------------------------------------------------------- */

uint16_t
item_ref_incr(struct item *it)
{
    return __atomic_add_fetch(&it->refcount, 1, __ATOMIC_ACQ_REL);
}

uint16_t
item_ref_decr(struct item *it)
{
    return __atomic_sub_fetch(&it->refcount, 1, __ATOMIC_ACQ_REL);
}

void
item_release(struct item *it)
{
    if (item_ref_decr(it) == 0) {
        item_free(it);
    }
}

/* Bytes the header of a chunked item takes: everything but the value,
 * which is replaced by the chunk pointer. */
size_t
item_header_size(const struct item *it)
{
    return sizeof(struct item) + item_value_off(it) +
           sizeof(struct item_chunk *);
}

static void
free_chunks(struct item_chunk *ch)
{
    while (ch != NULL) {
        struct item_chunk *next = ch->next;

        slabs_free(ch, sizeof(*ch) + ch->used,
                   SLABS_TC(ch->tier, ch->clsid));
        ch = next;
    }
}

size_t
item_alloc_size(const struct item *it)
{
    return item_ntotal(it) +
           ((item_flags(it) & ITEM_COPY) ? sizeof(struct item *) : 0);
}

struct item *
item_original(const struct item *it)
{
    struct item *orig = NULL;

    if (item_flags(it) & ITEM_COPY) {
        memcpy(&orig, (const char *)it + item_ntotal(it), sizeof(orig));
    }
    return orig;
}

void
item_set_original(struct item *it, struct item *orig)
{
    assert(item_flags(it) & ITEM_COPY);
    memcpy((char *)it + item_ntotal(it), &orig, sizeof(orig));
}

void
item_free(struct item *it)
{
    struct item *orig = item_original(it);

    assert(!(item_flags(it) & ITEM_LINKED));
    if (item_flags(it) & ITEM_CHUNKED) {
        struct item_chunk *ch = item_first_chunk(it);
        unsigned hid = ch != NULL ? ch->orig_clsid : 0;
        size_t hsize = item_header_size(it);

        free_chunks(ch);
        slabs_free(it, hsize, SLABS_TC(it->tier, hid));
        return;
    }
    slabs_free(it, item_alloc_size(it),
               SLABS_TC(it->tier, it->clsid & ITEM_CLSID_MASK));
    if (orig != NULL) {
        item_release(orig);
    }
}

/* ---- allocation -------------------------------------------------------- */

static void
fill_header(struct item *it, const char *key, size_t nkey,
            uint32_t client_flags, rel_time_t exptime, uint32_t vlen,
            bool use_cas)
{
    it->next = it->prev = it->h_next = NULL;
    item_time_store(it, clock_now());
    it->exptime = exptime;
    it->nbytes = vlen + 2;
    item_flags_store(it, (uint16_t)((use_cas ? ITEM_CAS : 0) |
                                    (client_flags ? ITEM_CFLAGS : 0)));
    it->nkey = (uint8_t)nkey;
    item_set_cas(it, 0);
    memcpy(it->data + item_cas_len(it), key, nkey);
    it->data[item_cas_len(it) + nkey] = '\0';
    if (client_flags != 0) {
        memcpy(it->data + item_cas_len(it) + nkey + 1, &client_flags,
               sizeof(client_flags));
    }
}

/* One chunk in tier t for up to `want` value bytes: a full chunk of the
 * largest class, or the smallest class that holds the rest. */
static struct item_chunk *
chunk_alloc(item_mem_fn *mem, unsigned t, size_t want)
{
    size_t cap = slabs_chunk_max() - sizeof(struct item_chunk);
    unsigned id = want >= cap ? slabs_largest()
                              : slabs_clsid(want + sizeof(struct item_chunk));
    size_t used = want < cap ? want : cap;
    /* Room is made in the chunk's own class: the tail of a value goes to
     * a smaller class than its full chunks, and evicting from the
     * largest would free chunks the tail cannot use. */
    struct item_chunk *ch = mem(sizeof(*ch) + used, SLABS_TC(t, id),
                                SLABS_TC(t, id));

    if (ch == NULL) {
        return NULL;
    }
    ch->next = ch->prev = NULL;
    ch->head = NULL;
    ch->size = (uint32_t)(slabs_size(id) - sizeof(*ch));
    ch->used = (uint32_t)used;
    __atomic_store_n(&ch->flags, ITEM_CHUNK, __ATOMIC_RELAXED);
    return ch;
}

/* Build the chain for `total` value bytes in full chunks, then `tail`
 * (or nothing); NULL (and nothing held, the tail aside) if memory runs
 * out part way. */
static struct item_chunk *
chain_alloc(item_mem_fn *mem, struct item *head, size_t total,
            struct item_chunk *tail)
{
    struct item_chunk *first = NULL, *last = NULL;

    while (total > 0 || tail != NULL) {
        struct item_chunk *ch;

        if (total > 0) {
            if ((ch = chunk_alloc(mem, head->tier, total)) == NULL) {
                free_chunks(first);
                return NULL;
            }
            total -= ch->used;
        } else {
            ch = tail;
            tail = NULL;
        }
        __atomic_store_n(&ch->head, head, __ATOMIC_RELEASE);
        ch->prev = last;
        if (last != NULL) {
            last->next = ch;
        } else {
            first = ch;
        }
        last = ch;
    }
    return first;
}

/*
 * A value over the largest chunk: a header item, then full chunks of the
 * largest class and a tail in the class that fits the rest.  The tail is
 * taken first: its class may have no page yet, and the page mover that
 * brings it one must not find this item's other chunks, held and not
 * linked anywhere, in the page it empties (it would wait on them while
 * this thread waits on it).
 */
static struct item *
alloc_chunked(item_mem_fn *mem, unsigned t, const char *key, size_t nkey,
              uint32_t client_flags, rel_time_t exptime, uint32_t vlen,
              bool use_cas)
{
    size_t htotal = item_size(nkey, client_flags, 0, use_cas) - 2 +
                    sizeof(struct item_chunk *);
    size_t cap = slabs_chunk_max() - sizeof(struct item_chunk);
    size_t total = (size_t)vlen + 2, rest = total % cap;
    unsigned hid = slabs_clsid(htotal);
    struct item_chunk *tail = NULL, *ch;
    struct item *it = NULL;

    if (hid == 0 ||
        (rest > 0 && (tail = chunk_alloc(mem, t, rest)) == NULL)) {
        return NULL;
    }
    it = mem(htotal, SLABS_TC(t, hid), SLABS_TC(t, hid));
    if (it == NULL) {
        free_chunks(tail);
        return NULL;
    }
    fill_header(it, key, nkey, client_flags, exptime, vlen, use_cas);
    item_flags_set(it, ITEM_CHUNKED);
    ch = chain_alloc(mem, it, total - rest, tail);
    if (ch == NULL) {
        free_chunks(tail);
        slabs_free(it, htotal, SLABS_TC(t, hid));
        return NULL;
    }
    ch->orig_clsid = (uint8_t)hid;
    item_set_first_chunk(it, ch);
    it->clsid = (uint8_t)slabs_largest();
    return it;
}

struct item *
item_new(item_mem_fn *mem, unsigned t, const char *key, size_t nkey,
         uint32_t client_flags, rel_time_t exptime, uint32_t vlen,
         bool use_cas)
{
    size_t ntotal = item_size(nkey, client_flags, vlen, use_cas);
    struct item *it;
    unsigned id;

    if (ntotal > slabs_chunk_max()) {
        return alloc_chunked(mem, t, key, nkey, client_flags, exptime, vlen,
                             use_cas);
    }
    id = slabs_clsid(ntotal);
    it = id != 0 ? mem(ntotal, SLABS_TC(t, id), SLABS_TC(t, id)) : NULL;
    if (it == NULL) {
        return NULL;
    }
    fill_header(it, key, nkey, client_flags, exptime, vlen, use_cas);
    it->clsid = (uint8_t)id;
    return it;
}
