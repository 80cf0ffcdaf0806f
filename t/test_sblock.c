/*
 * test_sblock.c: superblock commit, reload, validation and torn copies,
 * on a strict-mode PMEM file so that only what sblock persists survives
 * the simulated crashes.
 */
#include "storage/tier/sblock.h"

#include "storage/base/crc.h"
#include "storage/tier/tier.h"
#include "t/tap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PS      4096
#define NPAGES  8
#define FSIZE   (SBLOCK_SIZE + NPAGES * PS)

static char path[128];
static char err[512];
static struct tier *t;
static char *base;
static uint32_t classes[] = { 96, 120, 152, 192, 240, 304 };
static struct sblock_params params = {
    .file_size = FSIZE, .reserve = SBLOCK_SIZE, .page_size = PS,
    .chunk_max = PS / 2, .nclasses = 6, .class_sizes = classes,
    .use_cas = true,
};

static int
load(const struct sblock_params *p, struct sblock *out)
{
    err[0] = '\0';
    return sblock_load(t, base, p, out, err, sizeof(err));
}

/* Flip a byte of the copy holding generation g, durably. */
static void
tear(uint64_t g, size_t at)
{
    char *c = base + (g & 1) * 4096 + at;

    *c ^= 0x5a;
    tier_persist(t, c, 1);
}

static void
test_new_and_commit(void)
{
    struct sblock sb, got;

    is_int(load(&params, &got), SBLOCK_EMPTY, "a new file is EMPTY");
    is_int(sblock_init_new(&sb, t, base, &params, err, sizeof(err)),
           SBLOCK_OK, "init a superblock");
    is_int(sb.generation, 1, "generation 1");
    ok(tier_pmem_crash(t), "crash");
    is_int(load(&params, &got), SBLOCK_OK, "it was persisted");
    ok(!got.clean && got.cas_hwm == 0 && got.flush_time == 0,
       "a new file: not clean, no CAS, no flush");
    is_int(got.page_size, PS, "page size read back");
    is_int(got.nclasses, 6, "class count read back");
    got.cas_hwm = 12345;
    got.flush_time = 1700000000;
    got.clean = true;
    sblock_commit(&got);
    is_int(got.generation, 2, "commit adds a generation");
    got.cas_hwm = 99999;                /* changed, never committed */
    ok(tier_pmem_crash(t), "crash");
    is_int(load(&params, &sb), SBLOCK_OK, "load after commit");
    is_int(sb.generation, 2, "the committed generation");
    is_int(sb.cas_hwm, 12345, "CAS high-water mark round trip");
    is_int(sb.flush_time, 1700000000, "flush_all time round trip");
    ok(sb.clean, "clean flag round trip");
    sb.clean = false;
    sblock_commit(&sb);
    ok(tier_pmem_crash(t), "crash");
    is_int(load(&params, &got), SBLOCK_OK, "load again");
    ok(!got.clean && got.generation == 3 && got.cas_hwm == 12345,
       "clean cleared, the rest kept");
}

/* A tier whose persist reaches only the first cache line of a range: a
 * commit cut by power loss between its two lines. */
static void
first_line_persist(struct tier *tt, const void *addr, size_t len)
{
    (void)tt;
    tier_persist(t, addr, len > 64 ? 64 : len);
}

static const struct tier_ops torn_ops = {
    .name = "torn", .persist = first_line_persist,
};

static void
test_half_commit(void)
{
    struct tier torn = { .ops = &torn_ops };
    struct sblock sb, got;

    is_int(load(&params, &sb), SBLOCK_OK, "load generation 3");
    sb.tier = &torn;
    sb.cas_hwm = 55555;
    sblock_commit(&sb);
    ok(tier_pmem_crash(t), "crash after half a commit");
    is_int(load(&params, &got), SBLOCK_OK, "load after the half commit");
    ok(got.generation == 3 && got.cas_hwm == 12345,
       "the half-written copy is ignored");
}

static void
expect_incompatible(const struct sblock_params *p, const char *field)
{
    struct sblock got;
    char name[128];

    snprintf(name, sizeof(name), "%s differs: INCOMPATIBLE", field);
    is_int(load(p, &got), SBLOCK_INCOMPATIBLE, name);
    snprintf(name, sizeof(name), "the message names %s", field);
    ok(strstr(err, field) != NULL &&
       strstr(err, "-o memory_file_reinit") != NULL, name);
    printf("# %s\n", err);
}

/* memcached's restart key for the first difference, and the old value. */
static void
expect_mismatch(const struct sblock_params *p, const char *key,
                const char *old)
{
    struct sblock got;
    char value[32] = "", name[128];
    const char *k;

    load(p, &got);
    k = sblock_mismatch(&got, p, value, sizeof(value));
    snprintf(name, sizeof(name), "mismatch: [%s] [old value: %s]", key, old);
    ok(k != NULL && strcmp(k, key) == 0 && strcmp(value, old) == 0, name);
}

static char value_buf[32];

static void
test_incompatible(void)
{
    struct sblock_params p;
    uint32_t other[6];

    p = params; p.page_size = 2 * PS;
    expect_incompatible(&p, "page size");
    ok(strstr(err, "page size is 4096 in the file, 8192 now;") != NULL,
       "old and new values");
    p = params; p.file_size += PS;
    expect_incompatible(&p, "file size");
    p = params; p.reserve = 2 * SBLOCK_SIZE;
    expect_incompatible(&p, "reserve size");
    p = params; p.chunk_max = PS / 4;
    expect_incompatible(&p, "slab_chunk_max");
    p = params; p.nclasses = 5;
    expect_incompatible(&p, "number of slab classes");
    memcpy(other, classes, sizeof(other));
    other[3] = 200;
    p = params; p.class_sizes = other;
    expect_incompatible(&p, "slab class sizes");
    p = params; p.use_cas = false;
    expect_incompatible(&p, "CAS setting");
    expect_mismatch(&p, "use_cas", "true");
    p = params; p.item_max = 2 * PS;
    expect_mismatch(&p, "item_size_max", "0");    /* params have none */
    p = params; p.file_size += PS;
    snprintf(value_buf, sizeof(value_buf), "%llu",
             (unsigned long long)(params.file_size - params.reserve));
    expect_mismatch(&p, "maxbytes", value_buf);
    p = params; p.nclasses = 5;
    expect_mismatch(&p, "slab_config", "6");
    {
        struct sblock got;
        char v[32];

        load(&params, &got);
        ok(sblock_mismatch(&got, &params, v, sizeof(v)) == NULL,
           "no mismatch under the same params");
    }
}

static void
test_torn(void)
{
    struct sblock sb, got;

    is_int(load(&params, &sb), SBLOCK_OK, "load generation 3");
    sb.cas_hwm = 20000;
    sblock_commit(&sb);
    tear(4, 70);                        /* the newest copy, torn */
    ok(tier_pmem_crash(t), "crash");
    is_int(load(&params, &got), SBLOCK_OK, "a torn newest copy: OK");
    ok(got.generation == 3 && got.cas_hwm == 12345,
       "falls back to the previous generation");
    got.cas_hwm = 30000;
    sblock_commit(&got);
    ok(tier_pmem_crash(t), "crash");
    is_int(load(&params, &sb), SBLOCK_OK, "commit over the torn copy");
    ok(sb.generation == 4 && sb.cas_hwm == 30000, "it is the newest");
    tear(4, 0);                         /* even its magic */
    tear(3, 120);
    ok(tier_pmem_crash(t), "crash");
    is_int(load(&params, &sb), SBLOCK_CORRUPT, "both copies torn: CORRUPT");
    ok(strstr(err, "corrupt") != NULL, "the message says so");
}

static void
test_version_and_reinit(void)
{
    struct sblock sb, got;
    uint32_t v = SBLOCK_VERSION + 1;
    char want[64];

    is_int(sblock_init_new(&sb, t, base, &params, err, sizeof(err)),
           SBLOCK_OK, "reinit a corrupt file");
    sblock_commit(&sb);
    sblock_commit(&sb);
    ok(tier_pmem_crash(t), "crash");
    is_int(load(&params, &got), SBLOCK_OK, "reinit then commits: OK");
    is_int(got.generation, 3, "generations restart from 1");
    memcpy(base + 8, &v, 4);
    memcpy(base + 4096 + 8, &v, 4);
    expect_incompatible(&params, "layout version");
    snprintf(want, sizeof(want), "version is %d in the file, %d now;",
             SBLOCK_VERSION + 1, SBLOCK_VERSION);
    ok(strstr(err, want) != NULL, "names both versions");
    is_int(sblock_init_new(&sb, t, base, &params, err, sizeof(err)),
           SBLOCK_OK, "init over a newer layout");
    is_int(load(&params, &got), SBLOCK_OK, "then it loads");
    is_int(got.generation, 1, "as generation 1");
    params.reserve = SBLOCK_SIZE - 1;
    is_int(sblock_init_new(&sb, t, base, &params, err, sizeof(err)),
           SBLOCK_EINVAL, "a reserve too small is refused");
    params.reserve = SBLOCK_SIZE;
    memset(base, 0, SBLOCK_SIZE);
    is_int(load(&params, &got), SBLOCK_EMPTY, "a wiped file is EMPTY");
}

/* Rewrite the copy holding generation g as the previous layout wrote
 * it: its version, no alive_time (bytes 88-95), its crc (bytes 124-127
 * over the 124 before). */
static void
as_previous(uint64_t g)
{
    char *c = base + (g & 1) * 4096;
    uint32_t v = SBLOCK_VERSION_PREV, crc;

    memcpy(c + 8, &v, 4);
    memset(c + 88, 0, 8);
    crc = crc_32c(0, c, 124);
    memcpy(c + 124, &crc, 4);
    tier_persist(t, c, 128);
}

static void
test_previous_layout(void)
{
    struct sblock sb, got;

    is_int(sblock_init_new(&sb, t, base, &params, err, sizeof(err)),
           SBLOCK_OK, "a new superblock");
    sblock_set_alive(&sb, 1234567);
    ok(tier_pmem_crash(t), "crash");
    is_int(load(&params, &got), SBLOCK_OK, "alive_time committed");
    ok(got.version == SBLOCK_VERSION && got.alive_time == 1234567,
       "read back with the layout version");
    is_int(sblock_file_version(path), SBLOCK_VERSION,
           "sblock_file_version reads the file");
    as_previous(1);
    as_previous(2);
    ok(tier_pmem_crash(t), "crash");
    is_int(load(&params, &got), SBLOCK_OK, "the previous layout loads");
    ok(got.version == SBLOCK_VERSION_PREV && got.alive_time == 0 &&
       got.generation == 2, "as it is: its version, no alive_time");
    is_int(sblock_file_version(path), SBLOCK_VERSION_PREV,
           "sblock_file_version says which");
    got.alive_time = 99;
    sblock_commit(&got);
    ok(tier_pmem_crash(t), "crash");
    is_int(load(&params, &sb), SBLOCK_OK, "the first commit converts");
    ok(sb.version == SBLOCK_VERSION && sb.generation == 3 &&
       sb.alive_time == 99, "to the current layout");
    tear(3, 40);
    ok(tier_pmem_crash(t), "crash");
    is_int(load(&params, &sb), SBLOCK_OK, "a converting commit torn");
    ok(sb.version == SBLOCK_VERSION_PREV && sb.generation == 2,
       "leaves the previous layout's copy");
    as_previous(2);
    memcpy(base + 8, &(uint32_t){ SBLOCK_VERSION_PREV - 1 }, 4);
    tier_persist(t, base, 128);
    ok(tier_pmem_crash(t), "crash");
    expect_incompatible(&params, "layout version");
    is_int(sblock_file_version(path), 0, "older layouts are not read");
}

int
main(void)
{
    struct tier_pmem_options o = {
        .size = FSIZE, .page_size = PS, .reserve = SBLOCK_SIZE,
        .create = true, .strict = true,
    };

    snprintf(path, sizeof(path), "/dev/shm/mcpm-test-sblock.%d",
             (int)getpid());
    unlink(path);
    o.path = path;
    t = tier_pmem_open(&o, err, sizeof(err));
    if (!ok(t != NULL, "open a strict PMEM file")) {
        printf("# %s\n", err);
        return done_testing();
    }
    base = tier_pmem_base(t);
    test_new_and_commit();
    test_half_commit();
    test_incompatible();
    test_torn();
    test_version_and_reinit();
    test_previous_layout();
    tier_destroy(&t);
    unlink(path);
    return done_testing();
}
