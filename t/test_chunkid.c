/*
 * test_chunkid.c: 32-bit chunk ids (storage/slab/chunkid.h): the split of an
 * id into page number and index for the sizes slabs uses, every chunk of
 * the first and the last page of a memory file for the smallest and the
 * largest class, a page cut again (same number, stale ids refused by the
 * lock-free decode), a page given back (number freed and reused), and
 * the table running out of numbers.
 */
#include "storage/slab/chunkid.h"
#include "storage/tier/tier.h"

#include "t/tap.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MB      ((size_t)1 << 20)
#define PREFIX  16u             /* a commit word in front of each item */
#define SMALL   96u             /* the smallest class's chunk */
#define NPAGES  6

static char path[128];

/* Every chunk of the page as cut with `size`-byte chunks: id != 0, back
 * to its address by both decodes, distinct and in order. */
static int
roundtrip_page(char *page, uint32_t size, uint32_t n)
{
    uint32_t prev = 0;

    for (uint32_t i = 0; i < n; i++) {
        char *it = page + PREFIX + (size_t)i * size;
        uint32_t id = chunkid_of(it);

        if (id == 0 || chunkid_ptr(id) != it || chunkid_peek(id) != it ||
            (i > 0 && id != prev + 1)) {
            printf("# chunk %u of %p: id %#x\n", i, (void *)page, id);
            return 0;
        }
        prev = id;
    }
    return 1;
}

static void
test_sizes(void)
{
    ok(chunkid_init(3 * MB, 10) != 0, "a page size not a power of two is "
       "refused");
    is_int(chunkid_init(MB, (uint32_t)(MB / SMALL)), 0,
           "1 MiB pages of 96-byte chunks");
    is_int(chunkid_tab.index_bits, 14, "14 bits of chunk index");
    is_int(chunkid_capacity(), (1u << 18) - 1, "2^18 - 1 page numbers");
    ok(chunkid_init(MB, 8) != 0, "a second init is refused");
    is_int(chunkid_of(NULL), 0, "NULL is id 0");
    ok(chunkid_ptr(0) == NULL && chunkid_peek(0) == NULL, "id 0 is NULL");
}

static void
test_file_edges(void)
{
    struct tier_pmem_options o = {
        .path = path, .size = 8192 + NPAGES * MB, .page_size = MB,
        .reserve = 8192, .create = true,
    };
    char err[256];
    struct tier *t = tier_pmem_open(&o, err, sizeof(err));
    char *first, *last;
    uint32_t small_n = (uint32_t)(MB / SMALL);
    uint32_t id_last, id_big;

    if (!ok(t != NULL, "a memory file of 6 pages")) {
        printf("# %s\n", err);
        return;
    }
    first = tier_pmem_page(t, 0);
    last = tier_pmem_page(t, tier_pmem_npages(t) - 1);
    ok(first != NULL && last != NULL && first != last, "first and last page");
    is_int(chunkid_page_set(first, first + PREFIX, SMALL, small_n), 0,
           "name the first page, smallest class");
    is_int(chunkid_page_set(last, last + PREFIX, (uint32_t)MB, 1), 0,
           "name the last page, largest class (one chunk of a page)");
    is_int(chunkid_pages_named(), 2, "two pages named");
    ok(roundtrip_page(first, SMALL, small_n),
       "every chunk of the first page, first to last index");
    ok(roundtrip_page(last, (uint32_t)MB, 1), "the last page's one chunk");
    id_last = chunkid_of(first + PREFIX + (size_t)(small_n - 1) * SMALL);
    is_int(id_last & chunkid_tab.index_mask, small_n - 1,
           "the last chunk's index");
    ok(chunkid_peek(id_last + 1) == NULL,
       "an index past the page's chunks decodes to nothing");
    id_big = chunkid_of(last + PREFIX);
    ok(id_big >> chunkid_tab.index_bits !=
       id_last >> chunkid_tab.index_bits, "the pages have numbers of their "
       "own");

    /* Cut again for another class: same number, old ids past the new
     * count decode to nothing (a stale id in a lock-free reader). */
    is_int(chunkid_page_set(first, first + PREFIX, 480, (uint32_t)(MB / 480)),
           0, "the first page cut again, 480-byte chunks");
    is_int(chunkid_pages_named(), 2, "... keeping its number");
    ok(roundtrip_page(first, 480, (uint32_t)(MB / 480)),
       "every chunk of the new cut");
    ok(chunkid_peek(id_last) == NULL, "an id of the old cut past the new "
       "count decodes to nothing");

    /* Given back: the number is free, the next page gets it. */
    chunkid_page_drop(last);
    is_int(chunkid_pages_named(), 1, "the last page given back");
    ok(chunkid_peek(id_big) == NULL, "its ids decode to nothing");
    is_int(chunkid_page_set(tier_pmem_page(t, 2),
                            (char *)tier_pmem_page(t, 2) + PREFIX, SMALL,
                            small_n), 0, "another page named");
    is_int(chunkid_of((char *)tier_pmem_page(t, 2) + PREFIX) >>
           chunkid_tab.index_bits, id_big >> chunkid_tab.index_bits,
           "... with the freed number");
    tier_destroy(&t);
    unlink(path);
}

static void
test_full(void)
{
    char *pages = aligned_alloc(4096, 9 * 4096);
    int good = 1;

    chunkid_destroy();
    /* 2^29 chunks a page leave 3 bits: 7 numbers. */
    is_int(chunkid_init(4096, 1u << 29), 0, "4 KiB pages, 29 index bits");
    is_int(chunkid_capacity(), 7, "7 page numbers");
    for (int i = 0; i < 7; i++) {
        good &= chunkid_page_set(pages + i * 4096, pages + i * 4096, 64,
                                 64) == 0;
    }
    ok(good, "7 pages named");
    ok(chunkid_page_set(pages + 7 * 4096, pages + 7 * 4096, 64, 64) != 0,
       "the 8th is refused");
    chunkid_page_drop(pages + 3 * 4096);
    is_int(chunkid_page_set(pages + 7 * 4096, pages + 7 * 4096, 64, 64), 0,
           "after a page went back, it is named");
    ok(roundtrip_page(pages + 7 * 4096 - PREFIX, 64, 64),
       "and its chunks round-trip");
    chunkid_destroy();
    free(pages);
}

int
main(void)
{
    snprintf(path, sizeof(path), "/dev/shm/mcpm-test-chunkid.%d",
             (int)getpid());
    test_sizes();
    test_file_edges();
    test_full();
    return done_testing();
}
