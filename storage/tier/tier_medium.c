/*
 * tier_medium.c: reaching the memory file's medium (tier_medium.h):
 * msync, the strict mode's line copies, the simulated power cut, and the
 * counts of what it cost.  It calls nothing else of the tier.
 */
#include "storage/tier/tier_medium.h"

#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct flush_slot *
pmem_slot(struct pmem_state *s)
{
    static unsigned next_slot;
    static __thread unsigned mine = FLUSH_SLOTS;

    if (mine == FLUSH_SLOTS) {
        mine = __atomic_fetch_add(&next_slot, 1, __ATOMIC_RELAXED) %
               FLUSH_SLOTS;
    }
    return &s->slot[mine];
}

void
pmem_count_sync(struct pmem_state *s)
{
    __atomic_add_fetch(&pmem_slot(s)->syncs, 1, __ATOMIC_RELAXED);
}

/* msync works on whole pages: the range grows to the pages it touches. */
void
pmem_msync_range(struct pmem_state *s, const char *addr, size_t len)
{
    uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t start = (uintptr_t)addr & ~(pg - 1);
    uintptr_t end = ((uintptr_t)addr + len + pg - 1) & ~(pg - 1);

    pmem_count_sync(s);
    /* Its only failure on a mapped range is EIO from the device, which
     * no caller could act on. */
    (void)msync((void *)start, end - start, MS_SYNC);
}

/*
 * Strict mode: only the covered cache lines reach the file.  The copies
 * take turns: two threads flushing lines that overlap (adjacent chunks
 * share a line) could otherwise interleave, one writing a line it read
 * before the other's store after the other's flush, and undo a flush that
 * had completed.  A cache-line write-back never does that; the copy must
 * not either.  The copy is the simulated flush; the shared mapping needs
 * none of its own (a SIGKILL keeps the page cache).
 */
void
pmem_strict_copy(struct pmem_state *s, const char *addr, size_t len)
{
    size_t off, start, end;

    if (addr < s->base || addr >= s->base + s->len) {
        return;
    }
    off = (size_t)(addr - s->base);
    start = off & ~(size_t)(PMEM_LINE - 1);
    end = off + (len < s->len - off ? len : s->len - off);
    end = (end + PMEM_LINE - 1) & ~(size_t)(PMEM_LINE - 1);
    if (end > s->len) {
        end = s->len;
    }
    pthread_mutex_lock(&s->copy_lock);
    memcpy(s->shared + start, s->base + start, end - start);
    pthread_mutex_unlock(&s->copy_lock);
}

/* A power cut armed by tier_pmem_crash_after() lands before this flush
 * point: what it covers is lost. */
void
pmem_flush_point(struct pmem_state *s)
{
    if (s->crash_at != 0 &&
        __atomic_add_fetch(&s->crash_count, 1, __ATOMIC_RELAXED) >=
        s->crash_at) {
        kill(getpid(), SIGKILL);
    }
}
