/*
 * tier_memkind.c: the volatile PMEM tier, pages from libmemkind.
 *
 * The only file that includes memkind.h.  Two sources of memory:
 *
 *   dax:<dir>  memkind_create_pmem(dir): a jemalloc heap over a file that
 *              memkind creates in <dir> and unlinks at once, so nothing
 *              is left behind and nothing survives the process
 *   kmem       MEMKIND_DAX_KMEM: PMEM the kernel exposes as a NUMA node
 *
 * Either way the memory is volatile: PMEM used as cheap capacity.  Pages
 * are counted against t->limit here, as tier_dram.c does, rather than by
 * memkind's own max: memkind counts whole jemalloc extents, so an aligned
 * 1 MiB page costs up to twice its size against the max (a 64 MiB heap
 * gave 30 pages), and close to the max it was seen to return pages
 * without the alignment asked for.  The heap is therefore created
 * unbounded and the tier refuses pages past the limit itself.
 *
 * Locking: none of its own; slabs calls it under the slabs lock (tier.h).
 */
#include "storage/tier/tier.h"

#include <errno.h>
#include <memkind.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* memkind refuses a bounded pmem heap smaller than this
 * (MEMKIND_PMEM_MIN_SIZE); the tier keeps the same floor. */
#define MEMKIND_MIN_LIMIT ((size_t)16 << 20)

struct memkind_state {
    memkind_t   kind;
    bool        owned;          /* a heap of ours: destroy_kind frees it */
};

static void *
memkind_page_alloc(struct tier *t)
{
    struct memkind_state *s = t->priv;
    void *page = NULL;

    if (t->used + t->page_size > t->limit) {
        return NULL;
    }
    if (memkind_posix_memalign(s->kind, &page, t->page_size,
                               t->page_size) != 0 || page == NULL) {
        return NULL;
    }
    if ((uintptr_t)page % t->page_size != 0) {
        /* Item code finds its page by masking an address: a misaligned
         * page would corrupt its neighbours. */
        memkind_free(s->kind, page);
        return NULL;
    }
    t->used += t->page_size;
    return page;
}

static void
memkind_page_free(struct tier *t, void *page)
{
    struct memkind_state *s = t->priv;

    t->used -= t->page_size;
    memkind_free(s->kind, page);
}

static void
memkind_persist(struct tier *t, const void *addr, size_t len)
{
    /* The heap dies with the process: nothing to make durable. */
    (void)t;
    (void)addr;
    (void)len;
}

static bool
memkind_set_limit(struct tier *t, size_t limit)
{
    /* Nothing is preallocated: the limit moves either way. */
    t->limit = limit;
    return true;
}

static void
memkind_destroy(struct tier *t)
{
    struct memkind_state *s = t->priv;

    if (s != NULL && s->owned) {
        /* Frees every page still handed out, and the heap's file. */
        memkind_destroy_kind(s->kind);
    }
    free(s);
    free(t);
}

static const struct tier_ops memkind_ops = {
    .name = "memkind",
    .page_alloc = memkind_page_alloc,
    .page_free = memkind_page_free,
    .persist = memkind_persist,
    .set_limit = memkind_set_limit,
    .destroy = memkind_destroy,
};

/* memkind's text for rc, without its "<memkind> " tag. */
static void
memkind_text(int rc, char *buf, size_t len)
{
    static const char tag[] = "<memkind> ";

    memkind_error_message(rc, buf, len);
    if (strncmp(buf, tag, sizeof(tag) - 1) == 0) {
        memmove(buf, buf + sizeof(tag) - 1,
                strlen(buf) - (sizeof(tag) - 1) + 1);
    }
}

static int
open_kmem(struct memkind_state *s, char *err, size_t errlen)
{
    char why[256];
    int rc = memkind_check_available(MEMKIND_DAX_KMEM);

    if (rc != 0) {
        memkind_text(rc, why, sizeof(why));
        snprintf(err, errlen, "memory_kind=kmem: this machine has no "
                 "KMEM-DAX memory (memkind: %s)", why);
        return -1;
    }
    s->kind = MEMKIND_DAX_KMEM;
    s->owned = false;
    return 0;
}

/* The directory is checked first so that the usual mistakes get a
 * message of their own: memkind says only "invalid input" for them. */
static int
open_dax(struct memkind_state *s, const char *dir, char *err, size_t errlen)
{
    struct stat st;
    char why[256];
    int rc;

    if (*dir == '\0') {
        snprintf(err, errlen, "memory_kind=dax:: no directory given "
                 "(dax:<directory>)");
        return -1;
    }
    if (stat(dir, &st) != 0) {
        snprintf(err, errlen, "memory_kind=dax:%s: %s", dir,
                 strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "memory_kind=dax:%s: not a directory", dir);
        return -1;
    }
    /* Unbounded: the tier counts its pages itself (see the top). */
    rc = memkind_create_pmem(dir, 0, &s->kind);
    if (rc != 0) {
        memkind_text(rc, why, sizeof(why));
        snprintf(err, errlen, "memory_kind=dax:%s: cannot make a heap "
                 "there (memkind: %s)", dir, why);
        return -1;
    }
    s->owned = true;
    return 0;
}

static int
open_kind(struct memkind_state *s, const char *spec, char *err,
          size_t errlen)
{
    if (strcmp(spec, "kmem") == 0) {
        return open_kmem(s, err, errlen);
    }
    if (strncmp(spec, "dax:", 4) == 0) {
        return open_dax(s, spec + 4, err, errlen);
    }
    snprintf(err, errlen, "memory_kind=%s: expected dax:<directory> or "
             "kmem", spec);
    return -1;
}

struct tier *
tier_memkind_create(const char *spec, size_t limit, size_t page_size,
                    char *err, size_t errlen)
{
    struct tier *t = NULL;
    struct memkind_state *s = NULL;

    if (limit < MEMKIND_MIN_LIMIT) {
        snprintf(err, errlen, "memory_kind=%s: the memory limit (%zu "
                 "bytes) is below memkind's minimum of 16 MiB (-m 16)",
                 spec, limit);
        goto fail;
    }
    t = calloc(1, sizeof(*t));
    s = calloc(1, sizeof(*s));
    if (t == NULL || s == NULL) {
        snprintf(err, errlen, "memory_kind=%s: out of memory", spec);
        goto fail;
    }
    if (open_kind(s, spec, err, errlen) != 0) {
        goto fail;
    }
    t->ops = &memkind_ops;
    t->id = TIER_DRAM;
    t->page_size = page_size;
    t->limit = limit;
    t->priv = s;
    return t;
fail:
    free(s);
    free(t);
    return NULL;
}
