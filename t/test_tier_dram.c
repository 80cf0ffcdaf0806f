/*
 * test_tier_dram.c: the DRAM tier.  Pages come from 2 MB extents (two
 * 1 MB pages each), or from one preallocated block (-L); the limit holds,
 * pages given back are handed out again, and an extent whose pages are
 * all back goes back to the heap (ASan's leak check sees the rest).
 */
#include "storage/tier/tier.h"

#include "t/tap.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define MB      ((size_t)1 << 20)

static uintptr_t
extent_of(const void *p)
{
    return (uintptr_t)p & ~(uintptr_t)(2 * MB - 1);
}

static void
test_extents(void)
{
    struct tier *t = tier_dram_create(5 * MB, MB, false);
    void *p[6];
    bool aligned = true;

    ok(t != NULL, "heap tier created");
    for (int i = 0; i < 5; i++) {
        p[i] = tier_page_alloc(t);
        aligned = aligned && p[i] != NULL && (uintptr_t)p[i] % MB == 0;
        if (p[i] != NULL) {
            memset(p[i], 0xa5, MB);
        }
    }
    ok(aligned, "five pages, each 1 MB aligned (and writable)");
    ok(tier_page_alloc(t) == NULL, "the sixth page is over the limit");
    is_int(t->used, 5 * MB, "5 MB in use");
    ok(extent_of(p[0]) == extent_of(p[1]) && (uintptr_t)p[0] % (2 * MB) == 0,
       "pages 0 and 1 share a 2 MB aligned extent");
    ok(extent_of(p[2]) == extent_of(p[3]) && extent_of(p[1]) != extent_of(p[2]),
       "pages 2 and 3 share the next");

    /* Half an extent back: its page is the next one handed out. */
    tier_page_free(t, p[1]);
    is_int(t->used, 4 * MB, "4 MB in use after one page back");
    p[5] = tier_page_alloc(t);
    ok(p[5] == p[1], "a page given back is handed out again");

    /* A whole extent back, and the limit lowered: no page is lost. */
    tier_page_free(t, p[2]);
    tier_page_free(t, p[3]);
    ok(tier_set_limit(t, 3 * MB), "limit lowered");
    is_int(t->used, 3 * MB, "3 MB in use");
    ok(tier_page_alloc(t) == NULL, "a fourth page is over the new limit");
    ok(tier_set_limit(t, 5 * MB), "limit raised again");
    p[2] = tier_page_alloc(t);
    ok(p[2] != NULL && p[2] != p[4] && extent_of(p[2]) == extent_of(p[4]),
       "the spare half of page 4's extent goes before a new extent");
    p[3] = tier_page_alloc(t);
    ok(p[3] != NULL && (uintptr_t)p[3] % (2 * MB) == 0 &&
       extent_of(p[3]) != extent_of(p[0]) &&
       extent_of(p[3]) != extent_of(p[4]), "then a new extent");

    for (int i = 0; i < 6; i++) {
        if (i != 1) {
            tier_page_free(t, p[i]);
        }
    }
    is_int(t->used, 0, "every page back");
    tier_destroy(&t);
}

static void
test_prealloc(void)
{
    struct tier *t = tier_dram_create(3 * MB, MB, true);
    void *p[3];

    ok(t != NULL, "preallocated tier created");
    for (int i = 0; i < 3; i++) {
        p[i] = tier_page_alloc(t);
    }
    ok(p[0] != NULL && p[1] == (char *)p[0] + MB &&
       p[2] == (char *)p[1] + MB, "pages carved off the block in order");
    ok(tier_page_alloc(t) == NULL, "the block is used up");
    tier_page_free(t, p[1]);
    ok(tier_page_alloc(t) == p[1], "a page given back is reused");
    ok(!tier_set_limit(t, 4 * MB), "a preallocated block cannot grow");
    ok(tier_set_limit(t, 2 * MB), "but its limit can be lowered");
    for (int i = 0; i < 3; i++) {
        tier_page_free(t, p[i]);
    }
    tier_destroy(&t);
}

int
main(void)
{
    test_extents();
    test_prealloc();
    return done_testing();
}
