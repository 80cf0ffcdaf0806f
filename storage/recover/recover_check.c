/*
 * recover_check.c: what decides whether a head the scan found comes back
 * (recover_check.h): its chunked value's chain put together from the
 * pieces, its checksum, its value's "\r\n", its expiry and flush_all.
 *
 * Locking: none.  A piece is claimed for a chain by a compare-and-swap on
 * its flags, so two heads of the same seq never share one.
 */
#include "storage/recover/recover_check.h"
#include "storage/slab/item.h"
#include "storage/slab/persist.h"

#include <stdlib.h>
#include <string.h>

bool
recover_vec_push(struct vec *a, const void *elem)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 1024;
        void *nv = realloc(a->v, cap * a->size);

        if (nv == NULL) {
            return false;
        }
        a->v = nv;
        a->cap = cap;
    }
    memcpy((char *)a->v + a->n * a->size, elem, a->size);
    a->n++;
    return true;
}

uint64_t
recover_seq_of(const void *chunk)
{
    return __atomic_load_n(&persist_prefix_of(chunk)->commit,
                           __ATOMIC_RELAXED) >> 1;
}

/* ---- a head's chain and checks (the link phase's, and the scan's) ---- */

/* The first piece tagged with seq, or NULL. */
static const struct piece *
find_pieces(const struct recovery *rc, uint64_t seq)
{
    size_t lo = 0, hi = rc->npieces;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;

        if (rc->pieces[mid].seq < seq) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo < rc->npieces && rc->pieces[lo].seq == seq ? &rc->pieces[lo]
                                                        : NULL;
}

/* Claimed pieces go back to unclaimed (the head was dropped). */
void
recover_release_chain(struct item *it)
{
    if (!(item_flags(it) & ITEM_CHUNKED)) {
        return;
    }
    for (struct item_chunk *ch = item_first_chunk(it); ch != NULL;
         ch = ch->next) {
        __atomic_store_n(&ch->flags, 0, __ATOMIC_RELAXED);
    }
}

/* Claim one piece for a chain; false if a head claimed it already. */
static bool
claim_piece(struct item_chunk *ch)
{
    uint16_t none = 0;

    return __atomic_compare_exchange_n(&ch->flags, &none, ITEM_CHUNK, false,
                                       __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

/*
 * Put the chain of a chunked head together from the pieces tagged with its
 * seq: indexes 0..k-1 with no gap, every piece but the last a full chunk of
 * the largest class, nbytes in all.  False (nothing claimed) otherwise.
 */
static bool
build_chain(const struct recovery *rc, struct item *it, unsigned head_id)
{
    uint64_t seq = recover_seq_of(it);
    const struct piece *pc = find_pieces(rc, seq);
    const struct piece *end = rc->pieces + rc->npieces;
    struct item_chunk *prev = NULL;
    uint64_t total = 0;
    uint32_t index = 0;

    item_set_first_chunk(it, NULL);
    for (; pc != NULL && pc < end && pc->seq == seq; pc++, index++) {
        struct item_chunk *ch = pc->ch;

        if (pc->index != index || total >= it->nbytes ||
            (prev != NULL && (prev->clsid != rc->largest ||
                              prev->used != prev->size)) ||
            !claim_piece(ch)) {
            break;
        }
        ch->head = it;
        ch->prev = prev;
        ch->next = NULL;
        ch->clsid = (uint8_t)pc->clsid;
        ch->tier = TIER_PMEM;
        if (prev != NULL) {
            prev->next = ch;
        } else {
            ch->orig_clsid = (uint8_t)head_id;
            item_set_first_chunk(it, ch);
        }
        total += ch->used;
        prev = ch;
    }
    if (total != it->nbytes || (pc < end && pc != NULL &&
                                pc->seq == recover_seq_of(it))) {
        recover_release_chain(it);
        return false;
    }
    return true;
}

/* Why a head cannot come back, counted; or true if it can. */
bool
recover_head_ok(struct worker *w, struct item *it, unsigned head_id)
{
    const struct recovery *rc = w->rc;

    if ((item_flags(it) & ITEM_CHUNKED) && !build_chain(rc, it, head_id)) {
        w->torn++;
        return false;
    }
    if ((rc->check_crc && persist_crc(it) != persist_prefix_of(it)->crc) ||
        !item_value_crlf_ok(it)) {
        recover_release_chain(it);
        w->torn++;
        return false;
    }
    if (it->exptime != 0 && it->exptime <= rc->now) {
        recover_release_chain(it);
        w->expired++;
        return false;
    }
    if ((rc->flush_time != 0 && rc->flush_time <= rc->now &&
         item_time(it) <= rc->flush_time) ||
        (rc->flush_cas != 0 && item_cas(it) != 0 &&
         item_cas(it) <= rc->flush_cas &&
         item_time(it) <= rc->flush_time + 1)) {
        recover_release_chain(it);
        w->flushed++;
        return false;
    }
    return true;
}
