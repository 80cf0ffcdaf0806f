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

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "storage/clock.h"

struct item;

const char *item_key(const struct item *it);
size_t      item_nkey(const struct item *it);
uint32_t    item_client_flags(const struct item *it);
uint64_t    item_cas(const struct item *it);         /* 0 with CAS off */
rel_time_t  item_exptime(const struct item *it);     /* 0: never */
rel_time_t  item_atime(const struct item *it);       /* last access */
unsigned    item_clsid(const struct item *it);       /* slab class id */
size_t      item_ntotal(const struct item *it);      /* bytes it takes */

/* Sub-LRU the item sits in, for hits_to_hot/warm/cold/temp; a racy read
 * that is good enough for statistics. */
enum item_lru { ITEM_LRU_HOT, ITEM_LRU_WARM, ITEM_LRU_COLD, ITEM_LRU_TEMP };
enum item_lru item_lru(const struct item *it);

/* Value length without the trailing "\r\n". */
uint32_t    item_vlen(const struct item *it);

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

#endif
