/*
 * test_tier_pmem.c: the PMEM tier over a file in /dev/shm: page
 * allocation, reopen, size checks, and the strict power-loss simulator.
 */
#include "storage/tier/tier.h"

#include "t/tap.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define PS      4096
#define RESERVE 8192
#define NPAGES  16
#define FSIZE   (RESERVE + NPAGES * PS + 100)   /* an unused tail, too */

static char path[128];
static char err[512];

static struct tier *
open_tier(size_t size, bool create, bool strict)
{
    struct tier_pmem_options o = {
        .path = path, .size = size, .page_size = PS, .reserve = RESERVE,
        .create = create, .strict = strict,
    };

    err[0] = '\0';
    return tier_pmem_open(&o, err, sizeof(err));
}

static size_t
count_byte(const char *p, size_t n, char c)
{
    size_t k = 0;

    for (size_t i = 0; i < n; i++) {
        k += p[i] == c;
    }
    return k;
}

static void
test_create_and_alloc(void)
{
    struct tier *t = open_tier(FSIZE, true, false);
    char *p0, *p1;

    if (!ok(t != NULL, "create a new file")) {
        printf("# %s\n", err);
        exit(1);
    }
    ok(tier_pmem_created(t), "created says so");
    is_int(tier_pmem_mapped_len(t), FSIZE, "mapped the whole file");
    is_int(tier_pmem_npages(t), NPAGES, "pages after the reserve");
    is_int(t->limit, NPAGES * PS, "limit is every page");
    is_int(t->used, 0, "nothing used");
    is_int(t->id, TIER_PMEM, "tier id");
    p0 = tier_page_alloc(t);
    p1 = tier_page_alloc(t);
    ok(p0 == tier_pmem_page(t, 0), "first page is page 0");
    ok(p0 == (char *)tier_pmem_base(t) + RESERVE, "page 0 after reserve");
    ok(p1 == tier_pmem_page(t, 1), "then page 1");
    is_int((uintptr_t)p0 % PS, 0, "pages are page aligned");
    is_int(t->used, 2 * PS, "two pages used");
    is_int(tier_pmem_index(t, p1 + 100), 1, "index of an inner address");
    is_int(tier_pmem_index(t, tier_pmem_base(t)), SIZE_MAX,
           "the reserve is no page");
    is_int(tier_pmem_index(t, (char *)tier_pmem_base(t) + FSIZE - 50),
           SIZE_MAX, "the unused tail is no page");
    ok(tier_pmem_page(t, NPAGES) == NULL, "no page past the end");
    tier_page_free(t, p0);
    is_int(t->used, PS, "free gives it back");
    tier_page_free(t, p0);
    tier_page_free(t, tier_pmem_base(t));
    is_int(t->used, PS, "a double or foreign free is ignored");
    ok(tier_page_alloc(t) == p0, "the lowest free page comes first");
    for (int i = 2; i < NPAGES; i++) {
        tier_page_alloc(t);
    }
    is_int(t->used, NPAGES * PS, "all pages used");
    ok(tier_page_alloc(t) == NULL, "none left");
    tier_page_free(t, tier_pmem_page(t, 9));
    ok(tier_page_alloc(t) == tier_pmem_page(t, 9), "a freed middle page");
    ok(!tier_set_limit(t, (NPAGES + 1) * PS), "cannot grow past the file");
    tier_destroy(&t);
    ok(t == NULL, "destroy clears the pointer");
}

static void
test_limit_and_claim(void)
{
    struct tier *t = open_tier(0, false, false);

    ok(t != NULL && !tier_pmem_created(t), "reopen an existing file");
    ok(tier_set_limit(t, 2 * PS), "lower the limit");
    ok(tier_page_alloc(t) != NULL && tier_page_alloc(t) != NULL,
       "two pages under the limit");
    ok(tier_page_alloc(t) == NULL, "the third is refused");
    ok(tier_set_limit(t, NPAGES * PS), "raise it again");
    tier_destroy(&t);

    t = open_tier(0, false, false);
    ok(tier_pmem_claim(t, 3), "claim page 3");
    ok(!tier_pmem_claim(t, 3), "claim it twice: refused");
    ok(!tier_pmem_claim(t, NPAGES), "claim past the end: refused");
    is_int(t->used, PS, "a claimed page counts as used");
    ok(tier_page_alloc(t) == tier_pmem_page(t, 0) &&
       tier_page_alloc(t) == tier_pmem_page(t, 1) &&
       tier_page_alloc(t) == tier_pmem_page(t, 2) &&
       tier_page_alloc(t) == tier_pmem_page(t, 4),
       "allocation skips the claimed page");
    tier_destroy(&t);
}

static void
test_reopen(void)
{
    struct tier *t = open_tier(0, false, false);
    char *p = tier_pmem_page(t, 5);

    strcpy(p, "page five");
    strcpy(tier_pmem_base(t), "superblock");
    tier_persist(t, p, 10);
    tier_persist(t, tier_pmem_base(t), 11);
    ok(!tier_pmem_crash(t), "crash is for strict mode only");
    tier_destroy(&t);

    t = open_tier(FSIZE, true, false);
    ok(t != NULL && !tier_pmem_created(t), "reopen with the same size");
    is_str(tier_pmem_page(t, 5), "page five", "page content kept");
    is_str(tier_pmem_base(t), "superblock", "reserve content kept");
    tier_destroy(&t);

    t = open_tier(FSIZE + PS, true, false);
    ok(t == NULL, "another size is refused, even with create");
    ok(strstr(err, "is 73828 bytes") && strstr(err, "77924 were asked"),
       "the message gives both sizes");
    printf("# %s\n", err);
}

static void
test_bad_opens(void)
{
    struct tier_pmem_options o = {
        .path = path, .size = FSIZE, .page_size = 3000, .create = true,
    };
    char missing[160];

    ok(tier_pmem_open(&o, err, sizeof(err)) == NULL, "page size 3000");
    ok(strstr(err, "power of two") != NULL, "says why");
    snprintf(missing, sizeof(missing), "%s.missing", path);
    o.path = missing;
    o.page_size = PS;
    o.create = false;
    ok(tier_pmem_open(&o, err, sizeof(err)) == NULL, "missing, no create");
    ok(strstr(err, "does not exist") != NULL, "says it does not exist");
    o.create = true;
    o.size = 0;
    ok(tier_pmem_open(&o, err, sizeof(err)) == NULL, "create needs a size");
    o.size = PS;
    o.reserve = RESERVE;
    ok(tier_pmem_open(&o, err, sizeof(err)) == NULL, "too small for a page");
    ok(strstr(err, "hold no page") != NULL, "says it is too small");
    ok(access(missing, F_OK) != 0, "and makes no file");
}

static void
test_strict_lines(void)
{
    struct tier *t = open_tier(0, false, true);
    char *base, *p;

    ok(t != NULL, "open in strict mode");
    base = tier_pmem_base(t);
    p = tier_page_alloc(t);
    memset(p, 0, PS);
    tier_persist(t, p, PS);
    strcpy(p, "persisted");
    tier_persist(t, p, 10);
    strcpy(p + 128, "not persisted");
    memset(p + 1000, 'x', 256);
    tier_persist(t, p + 1030, 10);      /* the line [1024, 1088) only */
    memset(p + 2047, 'y', 2);           /* straddles two lines */
    tier_persist(t, p + 2048, 1);       /* persist the second only */
    is_str(p + 128, "not persisted", "before the crash it reads back");
    ok(tier_pmem_crash(t), "crash");
    ok(tier_pmem_base(t) == base, "same base address after the crash");
    is_int(t->used, 0, "all pages free after the crash");
    is_str(p, "persisted", "a persisted store survives");
    is_int(p[128], 0, "an unpersisted line is lost");
    is_int(count_byte(p + 1000, 256, 'x'), 64,
           "exactly the covering line of a partial persist survives");
    is_int(count_byte(p + 1024, 64, 'x'), 64, "and it is that line");
    is_int(p[2047], 0, "a line not covered is lost");
    is_int(p[2048], 'y', "the covered neighbour survives");
    tier_destroy(&t);

    t = open_tier(0, false, false);
    p = tier_pmem_page(t, 0);
    ok(strcmp(p, "persisted") == 0 && p[128] == 0 && p[1023] == 0 &&
       p[1024] == 'x' && p[1088] == 0, "the file holds the same");
    tier_destroy(&t);
}

/* A child writes through strict mode and dies without cleanup: only what
 * it persisted may be in the file. */
static void
test_strict_kill(void)
{
    struct tier *t;
    char *p;
    pid_t pid = fork();
    int status = 0;

    if (pid == 0) {
        t = open_tier(0, false, true);
        p = tier_pmem_page(t, 7);
        strcpy(p, "acked");
        tier_persist(t, p, 6);
        strcpy(p + 64, "lost");
        _exit(0);
    }
    waitpid(pid, &status, 0);
    ok(WIFEXITED(status), "the child died");
    t = open_tier(0, false, false);
    p = tier_pmem_page(t, 7);
    is_str(p, "acked", "its persisted store is in the file");
    is_int(p[64], 0, "its unpersisted store is not");
    tier_destroy(&t);
}

/* Slab-sized pages: the reserve rounds up to one page and every page is
 * aligned to its size, in both modes. */
static void
test_big_pages(void)
{
    size_t mb = 1024 * 1024;
    struct tier_pmem_options o = {
        .path = path, .size = 8 * mb, .page_size = mb, .reserve = 8192,
        .create = true,
    };
    struct tier *t;

    unlink(path);
    for (int strict = 0; strict < 2; strict++) {
        o.strict = strict;
        t = tier_pmem_open(&o, err, sizeof(err));
        if (!ok(t != NULL, strict ? "1 MiB pages, strict" : "1 MiB pages")) {
            printf("# %s\n", err);
            continue;
        }
        is_int(tier_pmem_npages(t), 7, "the reserve takes one page");
        ok((char *)tier_pmem_page(t, 0) == (char *)tier_pmem_base(t) + mb,
           "page 0 at 1 MiB");
        is_int((uintptr_t)tier_pmem_page(t, 3) % mb, 0, "aligned to 1 MiB");
        tier_destroy(&t);
    }
    unlink(path);
}

int
main(void)
{
    snprintf(path, sizeof(path), "/dev/shm/mcpm-test-tier-pmem.%d",
             (int)getpid());
    unlink(path);
    test_create_and_alloc();
    test_limit_and_claim();
    test_reopen();
    test_bad_opens();
    test_strict_lines();
    test_strict_kill();
    test_big_pages();
    unlink(path);
    return done_testing();
}
