/*
 * persist.c: commit words and item checksums of the PMEM tier
 * (persist.h).  Every store that recovery will trust goes through
 * tier_persist() in the order doc/PERSISTENCE.md gives.
 */
#include "storage/slab/persist.h"
#include "storage/base/crc.h"
#include "storage/tier/sblock.h"

#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(struct persist_prefix) == PERSIST_PREFIX,
               "the prefix is 16 bytes");

static struct {
    struct tier           *tier;
    struct sblock_counter  seq;     /* commit sequence numbers */
} pe;

void
persist_init(struct tier *t)
{
    memset(&pe, 0, sizeof(pe));
    pe.tier = t;
}

void
persist_set_sblock(struct sblock *sb)
{
    sblock_counter_attach(&pe.seq, sb);
}

void
persist_destroy(void)
{
    memset(&pe, 0, sizeof(pe));
}

/* Bytes of data[] before the value: CAS slot, key, NUL, client flags. */
static size_t
meta_len(const struct item *it)
{
    uint16_t f = item_flags(it);

    return ((f & ITEM_CAS) ? sizeof(uint64_t) : 0) + it->nkey + 1 +
           ((f & ITEM_CFLAGS) ? sizeof(uint32_t) : 0);
}

/* The CRC of nbytes, the persisted flags, the class and the key length
 * (8 bytes, in that order), then of the meta and the value: an unchunked
 * item's lie one after the other, in one run of the CRC. */
uint32_t
persist_crc(const struct item *it)
{
    uint32_t nbytes = it->nbytes;
    uint16_t flags = (uint16_t)(item_flags(it) & PERSIST_FLAGS);
    unsigned char head[8];
    uint32_t crc;
    struct iovec iov;
    size_t off = 0;

    memcpy(head, &nbytes, 4);
    memcpy(head + 4, &flags, 2);
    head[6] = (uint8_t)(it->clsid & ITEM_CLSID_MASK);
    head[7] = it->nkey;
    crc = crc_32c(0, head, sizeof(head));
    if (!(flags & ITEM_CHUNKED)) {
        return crc_32c(crc, it->data, meta_len(it) + nbytes);
    }
    crc = crc_32c(crc, it->data, meta_len(it));
    while (item_value_iov(it, off, &iov, 1) == 1) {
        crc = crc_32c(crc, iov.iov_base, iov.iov_len);
        off += iov.iov_len;
    }
    return crc;
}

uint64_t
persist_next_seq(void)
{
    return sblock_counter_next(&pe.seq);
}

/* The head's own bytes: the prefix, header and meta, then the value or,
 * for a chunked item, the pointer to its first piece. */
static size_t
head_len(const struct item *it)
{
    size_t tail = (item_flags(it) & ITEM_CHUNKED) ? sizeof(void *)
                                                   : it->nbytes;

    return PERSIST_PREFIX + sizeof(struct item) + meta_len(it) + tail;
}

/* Tag each piece of a chunked item with the head's seq and its index, and
 * persist it whole: prefix, chunk header and data. */
static void
prepare_pieces(const struct item *it, uint64_t seq)
{
    struct item_chunk *ch = item_first_chunk(it);

    for (uint32_t i = 0; ch != NULL; ch = ch->next, i++) {
        struct persist_prefix *p = persist_prefix_of(ch);

        p->commit = seq << 1;
        p->crc = i;
        p->reserved = 0;
        tier_persist(pe.tier, p, PERSIST_PREFIX + sizeof(*ch) + ch->used);
    }
}

void
persist_prepare(struct item *it, uint64_t seq)
{
    struct persist_prefix *p = persist_prefix_of(it);

    if (item_flags(it) & ITEM_CHUNKED) {
        prepare_pieces(it, seq);
    }
    p->crc = persist_crc(it);
    p->reserved = 0;
    tier_persist(pe.tier, p, head_len(it));
}

void
persist_publish(struct item *it, uint64_t seq)
{
    struct persist_prefix *p = persist_prefix_of(it);

    __atomic_store_n(&p->commit, seq << 1 | 1, __ATOMIC_RELEASE);
    tier_persist(pe.tier, &p->commit, sizeof(p->commit));
}

void
persist_commit(struct item *it)
{
    uint64_t seq = persist_next_seq();

    persist_prepare(it, seq);
    persist_publish(it, seq);
}

/* Items a thread holds by a reference until its group has synced. */
struct held {
    struct item **v;
    size_t        n;
    size_t        cap;
};

/* Those this thread retires once its group's commits are durable, and
 * those it killed in its group: their chunks are not reused before the
 * death is durable, or a new item's lines could reach the medium before
 * the old commit word's zero, in the same sync, in any order. */
static __thread struct held retiring, dying;

/* The thread's group clock (tier_pmem_group_noted()) at its last kill. */
static __thread uint64_t killed;

static bool
hold(struct held *h, struct item *it)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        struct item **v = realloc(h->v, cap * sizeof(*v));

        if (v == NULL) {
            return false;
        }
        h->v = v;
        h->cap = cap;
    }
    item_ref_incr(it);
    h->v[h->n++] = it;
    return true;
}

static void
let_go(struct held *h)
{
    size_t n = h->n;

    h->n = 0;
    for (size_t i = 0; i < n; i++) {
        item_release(h->v[i]);
    }
}

static void
forget(struct held *h)
{
    free(h->v);
    memset(h, 0, sizeof(*h));
}

/* Commit word 0; true when the zero is only noted in the thread's group. */
static bool
kill_noted(struct item *it)
{
    struct persist_prefix *p = persist_prefix_of(it);

    if (__atomic_load_n(&p->commit, __ATOMIC_RELAXED) == 0) {
        return false;
    }
    __atomic_store_n(&p->commit, 0, __ATOMIC_RELEASE);
    tier_persist(pe.tier, &p->commit, sizeof(p->commit));
    return tier_pmem_group_pending(pe.tier);
}

void
persist_kill(struct item *it)
{
    if (!kill_noted(it)) {
        return;
    }
    killed = tier_pmem_group_noted();
    if (!hold(&dying, it)) {
        /* no memory to wait in: the death is durable before the chunk
         * can go back */
        tier_pmem_group_sync(pe.tier);
    }
}

void
persist_retire(struct item *it)
{
    if (__atomic_load_n(&persist_prefix_of(it)->commit,
                        __ATOMIC_RELAXED) == 0) {
        return;
    }
    if (tier_pmem_group_pending(pe.tier) && hold(&retiring, it)) {
        return;
    }
    /* Not grouped (the successor is durable already), or no memory to
     * wait in: make the successor durable, then kill. */
    tier_pmem_group_sync(pe.tier);
    persist_kill(it);
}

bool
persist_group_join(void (*wake)(void *), void *arg)
{
    return pe.tier != NULL && tier_pmem_group_join(pe.tier, wake, arg);
}

bool
persist_group_pending(void)
{
    return pe.tier != NULL &&
           (retiring.n > 0 || dying.n > 0 ||
            tier_pmem_group_pending(pe.tier));
}

/* What a thread submitted and holds until the ticket is done: the items
 * it killed, and those whose deaths the flusher stores (tier.h). */
struct waiting {
    uint64_t    ticket;
    struct held items;
};

static __thread struct {
    struct waiting *v;
    size_t          n;
    size_t          cap;
    uint64_t      **zero;       /* scratch: the retiring commit words */
    size_t          zcap;
} sent;

/* Move h's items, with their references, to the end of dst (h is left
 * empty, with dst's buffer when dst had none in use). */
static bool
held_move(struct held *dst, struct held *h)
{
    if (h->n == 0) {
        return true;
    }
    if (dst->n == 0) {
        struct held t = *dst;

        *dst = *h;
        *h = t;
        return true;
    }
    if (dst->n + h->n > dst->cap) {
        size_t cap = dst->n + h->n;
        struct item **v = realloc(dst->v, cap * sizeof(*v));

        if (v == NULL) {
            return false;
        }
        dst->v = v;
        dst->cap = cap;
    }
    memcpy(dst->v + dst->n, h->v, h->n * sizeof(*h->v));
    dst->n += h->n;
    h->n = 0;
    return true;
}

/* Move h's items into the last waiting entry (one for ticket). */
static bool
send_held(uint64_t ticket, struct held *h)
{
    struct waiting *w = sent.n > 0 ? &sent.v[sent.n - 1] : NULL;

    if (w == NULL || w->ticket != ticket) {
        if (sent.n == sent.cap) {
            size_t cap = sent.cap ? sent.cap * 2 : 8;
            struct waiting *v = realloc(sent.v, cap * sizeof(*v));

            if (v == NULL) {
                return false;
            }
            sent.v = v;
            sent.cap = cap;
        }
        w = &sent.v[sent.n++];
        memset(w, 0, sizeof(*w));
        w->ticket = ticket;
    }
    return held_move(&w->items, h);
}

/* Let go of what tickets done covered. */
static void
settle(void)
{
    uint64_t done = tier_pmem_group_done(pe.tier);
    size_t i = 0;

    while (i < sent.n && sent.v[i].ticket <= done) {
        let_go(&sent.v[i].items);
        forget(&sent.v[i].items);
        i++;
    }
    if (i > 0) {
        memmove(sent.v, sent.v + i, (sent.n - i) * sizeof(*sent.v));
        sent.n -= i;
    }
}

bool
persist_group_submit(void)
{
    uint64_t ticket;

    if (pe.tier == NULL) {
        return false;
    }
    settle();
    if (retiring.n > sent.zcap) {
        uint64_t **v = realloc(sent.zero, retiring.n * sizeof(*v));

        if (v == NULL) {
            persist_group_sync();
            return false;
        }
        sent.zero = v;
        sent.zcap = retiring.n;
    }
    for (size_t i = 0; i < retiring.n; i++) {
        sent.zero[i] = &persist_prefix_of(retiring.v[i])->commit;
    }
    ticket = tier_pmem_group_submit(pe.tier, sent.zero, retiring.n,
                                    dying.n > 0);
    if (ticket == 0) {
        /* synced by this thread: the zeros stored and durable too */
        let_go(&retiring);
        let_go(&dying);
        return false;
    }
    if (!send_held(ticket, &retiring) || !send_held(ticket, &dying)) {
        /* no memory to wait in: wait here */
        tier_pmem_group_wait(pe.tier);
        settle();
        let_go(&retiring);
        let_go(&dying);
    }
    return true;
}

uint64_t
persist_group_noted(void)
{
    return tier_pmem_group_noted();
}

uint64_t
persist_group_killed(void)
{
    return killed;
}

uint64_t
persist_group_durable(uint64_t *settled)
{
    if (pe.tier == NULL) {
        *settled = 0;
        return 0;
    }
    settle();
    return tier_pmem_group_durable(pe.tier, settled);
}

void
persist_group_sync(void)
{
    if (pe.tier == NULL) {
        return;
    }
    tier_pmem_group_sync(pe.tier);      /* after what was submitted */
    settle();
    if (retiring.n > 0) {
        for (size_t i = 0; i < retiring.n; i++) {
            kill_noted(retiring.v[i]);
        }
        tier_pmem_group_sync(pe.tier);
        let_go(&retiring);
    }
    let_go(&dying);
}

bool
persist_group_holds(void)
{
    return dying.n > 0;
}

void
persist_group_leave(void)
{
    if (pe.tier == NULL) {
        return;
    }
    persist_group_sync();
    tier_pmem_group_leave(pe.tier);
    for (size_t i = 0; i < sent.n; i++) {
        forget(&sent.v[i].items);
    }
    free(sent.v);
    free(sent.zero);
    memset(&sent, 0, sizeof(sent));
    forget(&retiring);
    forget(&dying);
    killed = 0;
}

void
persist_exptime(struct item *it)
{
    tier_persist(pe.tier, &it->exptime, sizeof(it->exptime));
}

void
persist_flags(struct item *it)
{
    tier_persist(pe.tier, &it->flags, sizeof(it->flags));
}
