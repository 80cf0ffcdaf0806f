/*
 * persist.c: commit words and item checksums of the PMEM tier
 * (persist.h).  Every store that recovery will trust goes through
 * tier_persist() in the order doc/PERSISTENCE.md gives.
 */
#include "storage/persist.h"
#include "storage/crc.h"
#include "storage/sblock.h"

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

uint32_t
persist_crc(const struct item *it)
{
    uint32_t nbytes = it->nbytes;
    uint16_t flags = (uint16_t)(item_flags(it) & PERSIST_FLAGS);
    uint8_t small[2] = { (uint8_t)(it->clsid & ITEM_CLSID_MASK), it->nkey };
    uint32_t crc = crc_32c(0, &nbytes, sizeof(nbytes));
    struct iovec iov;
    size_t off = 0;

    crc = crc_32c(crc, &flags, sizeof(flags));
    crc = crc_32c(crc, small, sizeof(small));
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

void
persist_kill(struct item *it)
{
    struct persist_prefix *p = persist_prefix_of(it);

    if (__atomic_load_n(&p->commit, __ATOMIC_RELAXED) == 0) {
        return;
    }
    __atomic_store_n(&p->commit, 0, __ATOMIC_RELEASE);
    tier_persist(pe.tier, &p->commit, sizeof(p->commit));
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
