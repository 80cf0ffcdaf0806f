/*
 * cache_durable.c: what a store in the memory file survives (tier.h's
 * durabilities, as stats names them), the group commit of an event
 * loop's thread (persist.h), and what a machine restart may have done to
 * a file written without flushes (process durability).
 *
 * Such a file is whole in the page cache, so a crash of the process, a
 * restart and a takeover keep every item.  A power cut or a kernel crash
 * leaves on the disk whatever pages the kernel had written back, in any
 * order: a value overwritten or deleted before the crash could come back
 * intact, its checksum right.  So the superblock notes the boot such a
 * file is written under (sblock.h unsynced_boot), a stop writes the file
 * to its disk whole and takes the note back, and a start under another
 * boot that finds the note serves none of the file.
 */
#include "config.h"

#include "storage/cache/cache_durable.h"
#include "storage/cache/cache_priv.h"
#include "storage/slab/persist.h"
#include "storage/slab/slabs.h"
#include "storage/tier/sblock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct cache_priv *const ca = &cache_priv;

_Static_assert((int)TIER_DURABLE_PROCESS == (int)CACHE_DURABLE_PROCESS &&
               (int)TIER_DURABLE_POWER == (int)CACHE_DURABLE_POWER,
               "options.h and tier.h name the durabilities alike");

/* The PMEM tier over opts->memory_file: the superblock's reserve, then as
 * many pages as the file holds. */
/* -e, memcached's restartable cache: a file to be made anew (no valid
 * metadata), or of another size (memcached logs it as maxbytes), is
 * removed first, as memcached truncates it. */
const char *
cache_flush_name(const struct tier *t)
{
    static const char *const names[] = {
        [TIER_FLUSH_NONE] = "none",
        [TIER_FLUSH_LINES] = "cache_lines",
        [TIER_FLUSH_MSYNC] = "msync",
    };

    return names[tier_pmem_flush_kind(t)];
}

const char *
cache_durability(void)
{
    struct tier *t = slabs_tier(TIER_PMEM);

    if (t == NULL) {
        return NULL;
    }
    return tier_pmem_durability(t) == TIER_DURABLE_PROCESS ? "process"
                                                            : "power";
}

const char *
cache_flush_method(void)
{
    struct tier *t = slabs_tier(TIER_PMEM);

    return t == NULL ? NULL : cache_flush_name(t);
}

bool
cache_group_join(void (*wake)(void *), void *arg)
{
    return persist_group_join(wake, arg);
}

bool
cache_group_pending(void)
{
    return persist_group_pending();
}

void
cache_group_sync(void)
{
    persist_group_sync();
}

bool
cache_group_submit(void)
{
    return persist_group_submit();
}

uint64_t
cache_group_noted(void)
{
    return persist_group_noted();
}

uint64_t
cache_group_durable(uint64_t *settled)
{
    return persist_group_durable(settled);
}

uint64_t
cache_group_killed(void)
{
    return persist_group_killed();
}

void
cache_group_leave(void)
{
    persist_group_leave();
}


bool
cache_reboot_unproven(const struct cache_options *opts)
{
    uint8_t boot[16];

    if (ca->sb.unsynced_boot == 0 ||
        (sblock_boot_now(boot) &&
         sblock_boot_tag(boot) == ca->sb.unsynced_boot)) {
        return false;
    }
    fprintf(stderr, "memory file %s: the machine restarted while it was "
            "written without flushes (memory_file_durability=process) and "
            "before a clean stop wrote it to the disk: its pages may be "
            "old beside new, so its items are discarded\n",
            opts->memory_file);
    ca->unproven = true;
    return true;
}

void
cache_reboot_note(void)
{
    struct tier *t = ca->sb.tier;
    uint8_t boot[16];
    uint32_t tag;

    if (t == NULL || tier_pmem_durability(t) != TIER_DURABLE_PROCESS) {
        return;
    }
    tag = sblock_boot_now(boot) ? sblock_boot_tag(boot) : 1;
    if (ca->sb.unsynced_boot == tag) {
        return;                 /* a successor under the same boot */
    }
    ca->sb.unsynced_boot = tag;
    sblock_commit(&ca->sb);
    sblock_commit(&ca->sb);     /* both copies say it */
    tier_pmem_sync(t, tier_pmem_base(t), SBLOCK_SIZE);
}

/* fsync a file beside the memory file, if there is one: 0 or -1. */
static int
sync_beside(const char *suffix)
{
    size_t n = strlen(ca->opts->memory_file) + strlen(suffix) + 1;
    char *path = malloc(n);
    int fd, rc = -1;

    if (path == NULL) {
        return -1;
    }
    snprintf(path, n, "%s%s", ca->opts->memory_file, suffix);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        rc = errno == ENOENT ? 0 : -1;
    } else {
        rc = fsync(fd);
        close(fd);
    }
    free(path);
    return rc;
}

void
cache_reboot_sync(struct tier *t)
{
    if (ca->sb.unsynced_boot == 0) {
        return;
    }
    if (sync_beside(".removed") != 0 || tier_pmem_sync_all(t) != 0) {
        fprintf(stderr, "memory file %s: cannot write it to its disk: %s; "
                "a machine restart now discards its items\n",
                ca->opts->memory_file, strerror(errno));
        return;
    }
    ca->sb.unsynced_boot = 0;
}
