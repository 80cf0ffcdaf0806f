/*
 * fuzz_mcfile.c: a restart file of memcached's, as the bytes of four
 * pages of its slab memory under a fixed .meta: the walk must refuse or
 * hand out items whose every byte lies in the file, and their values
 * must copy out whole.
 */
#include "fuzz/fuzz.h"

#include <stdlib.h>
#include <string.h>

#include "memcached-pm/migrate/mcfile.h"

#define PS    4096
#define PAGES 4

static unsigned char mem[PS * PAGES];
static const struct mcfile *walked;

static int
take(const struct mcfile_item *it, void *ctx)
{
    char *v = malloc((size_t)it->vlen + 1);

    (void)ctx;
    FUZZ_CHECK(v != NULL);
    FUZZ_CHECK(it->key >= (const char *)mem &&
               it->key + it->nkey <= (const char *)mem + sizeof(mem));
    mcfile_value(walked, it, v);
    free(v);
    return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct mcfile_meta m = {
        .slab_config = "1.25", .maxbytes = sizeof(mem), .chunk_size = 48,
        .item_size_max = 1 << 20, .slab_chunk_size_max = PS / 2,
        .slab_page_size = PS, .use_cas = true, .current_time = 1000,
        .stop_time = 1800000000, .oldest_live = 900,
        .mmap_oldbase = 0x7f0000000000ull,
    };
    struct mcfile f;
    char why[256];

    memset(mem, 0, sizeof(mem));
    memcpy(mem, data, size < sizeof(mem) ? size : sizeof(mem));
    if (mcfile_open(&f, &m, mem, sizeof(mem), why, sizeof(why)) != 0) {
        return 0;
    }
    walked = &f;
    mcfile_walk(&f, 1800000010, take, NULL, NULL, why, sizeof(why));
    mcfile_close(&f);
    return 0;
}
