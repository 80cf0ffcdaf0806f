/*
 * test_tier_memkind.c: the memkind tier over a directory in /dev/shm:
 * aligned pages, the limit, set_limit, the refusals, destroy.
 */
#include "storage/tier/tier.h"

#include "t/tap.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MB      ((size_t)1 << 20)
#define LIMIT   (16 * MB)

static char dir[128];
static char spec[160];
static char err[512];

static struct tier *
create(const char *s, size_t limit, size_t page_size)
{
    err[0] = '\0';
    return tier_memkind_create(s, limit, page_size, err, sizeof(err));
}

/* Entries in dir other than . and .. */
static int
dir_entries(void)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;

    if (d == NULL) {
        return -1;
    }
    while ((e = readdir(d)) != NULL) {
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    }
    closedir(d);
    return n;
}

/* Take pages until the tier says no; returns how many, kept in pages. */
static size_t
fill(struct tier *t, void **pages, size_t max)
{
    size_t n = 0;

    while (n < max && (pages[n] = tier_page_alloc(t)) != NULL) {
        n++;
    }
    return n;
}

static bool
all_aligned(void **pages, size_t n, size_t ps)
{
    for (size_t i = 0; i < n; i++) {
        if ((uintptr_t)pages[i] % ps != 0) {
            return false;
        }
    }
    return true;
}

static void
test_pages(size_t ps)
{
    size_t want = LIMIT / ps, n;
    void **pages = calloc(want + 2, sizeof(*pages));
    struct tier *t = create(spec, LIMIT, ps);

    if (!ok(t != NULL && pages != NULL, "a heap in the directory")) {
        printf("# %s\n", err);
        exit(1);
    }
    is_int(t->id, TIER_DRAM, "volatile: items see the DRAM id");
    is_str(t->ops->name, "memkind", "name");
    is_int(dir_entries(), 0, "memkind left no file in the directory");
    n = fill(t, pages, want + 2);
    is_int(n, want, "pages up to the limit, then NULL");
    is_int(t->used, LIMIT, "used counts them");
    ok(all_aligned(pages, n, ps), "every page aligned to its size");
    memset(pages[0], 0xa5, ps);
    memset(pages[n - 1], 0x5a, ps);
    ok(((unsigned char *)pages[0])[ps - 1] == 0xa5 &&
       ((unsigned char *)pages[n - 1])[0] == 0x5a, "pages are usable");
    tier_page_free(t, pages[1]);
    is_int(t->used, LIMIT - ps, "a free gives the page back");
    pages[1] = tier_page_alloc(t);
    ok(pages[1] != NULL && (uintptr_t)pages[1] % ps == 0,
       "then a page can be had again");
    ok(tier_page_alloc(t) == NULL, "and the limit holds again");
    tier_persist(t, pages[0], ps);
    ok(((unsigned char *)pages[0])[0] == 0xa5, "persist leaves the page be");
    tier_destroy(&t);
    ok(t == NULL, "destroy clears the pointer, pages and all");
    free(pages);
}

static void
test_set_limit(void)
{
    void *pages[40];
    struct tier *t = create(spec, LIMIT, MB);
    size_t n;

    if (!ok(t != NULL, "a heap for set_limit")) {
        printf("# %s\n", err);
        return;
    }
    ok(tier_set_limit(t, 4 * MB), "the limit can be lowered");
    n = fill(t, pages, 40);
    is_int(n, 4, "four pages under a 4 MiB limit");
    ok(tier_set_limit(t, 32 * MB), "and raised (nothing preallocated)");
    n += fill(t, pages + n, 40 - n);
    is_int(n, 32, "32 pages under 32 MiB");
    ok(tier_set_limit(t, 8 * MB), "lowered under what is used");
    is_int(t->used, 32 * MB, "pages handed out stay out");
    ok(tier_page_alloc(t) == NULL, "but no new page is given");
    for (size_t i = 0; i < 10; i++) {
        tier_page_free(t, pages[i]);
    }
    is_int(t->used, 22 * MB, "frees count down");
    /* The other 22 pages go with the heap: destroy_kind frees them. */
    tier_destroy(&t);
}

static void
test_refusals(void)
{
    char bad[200];
    struct tier *t;

    snprintf(bad, sizeof(bad), "dax:%s/missing", dir);
    t = create(bad, LIMIT, MB);
    ok(t == NULL, "a missing directory is refused");
    ok(strstr(err, "missing: No such file or directory") != NULL,
       "with the path and the reason");
    printf("# %s\n", err);

    snprintf(bad, sizeof(bad), "dax:%s/afile", dir);
    fclose(fopen(bad + 4, "w"));
    t = create(bad, LIMIT, MB);
    ok(t == NULL && strstr(err, "afile: not a directory") != NULL,
       "a file is not a directory");
    unlink(bad + 4);

    t = create(spec, LIMIT - MB, MB);
    ok(t == NULL && strstr(err, "below memkind's minimum of 16 MiB"),
       "a limit under 16 MiB is refused");
    printf("# %s\n", err);

    t = create("kmem", LIMIT, MB);
    ok(t == NULL, "kmem: this machine has no KMEM-DAX node");
    is_str(err, "memory_kind=kmem: this machine has no KMEM-DAX memory "
           "(memkind: Requested memory kind is not available)",
           "kmem says so, with memkind's reason");

    t = create("numa:1", LIMIT, MB);
    ok(t == NULL && strstr(err, "expected dax:<directory> or kmem"),
       "an unknown kind is refused");
    t = create("dax:", LIMIT, MB);
    ok(t == NULL && strstr(err, "no directory given"),
       "dax: needs a directory");
}

int
main(void)
{
    snprintf(dir, sizeof(dir), "/dev/shm/test_tier_memkind.%d",
             (int)getpid());
    snprintf(spec, sizeof(spec), "dax:%s", dir);
    if (mkdir(dir, 0700) != 0) {
        perror(dir);
        return 1;
    }
    test_pages(MB);
    test_pages(64 * 1024);
    test_set_limit();
    test_refusals();
    is_int(dir_entries(), 0, "nothing left in the directory");
    rmdir(dir);
    return done_testing();
}
