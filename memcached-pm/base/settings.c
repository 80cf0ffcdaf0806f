/*
 * settings.c: the configuration (settings.h): its defaults, the value
 * parsers every option uses, and the rules between options, checked once
 * argv has been read (cmdline.c).
 *
 * Where memcached silently turns a bad number into 0 (atoi), memcached-pm
 * refuses it: every value is parsed whole, range-checked, and a bad one is
 * a message on stderr and exit status 1.  Messages reuse memcached's
 * wording where memcached has one.
 */
#include "config.h"

#include "memcached-pm/base/settings.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>

#include "memcached-pm/base/stats.h"
#include "storage/base/locks.h"
#include "storage/cache/cache_durable.h"

#define MB (1024 * 1024)

struct settings settings;

void
settings_defaults(void)
{
#define DEFAULT_D(type, field, dflt) settings.field = (dflt);
#define DEFAULT_C(field)
#define DEFAULT_V(expr)
#define DEFAULT_ROW(s_, sh_, t_, f_, l_, o_, p_, h_) DEFAULT_##t_
    memset(&settings, 0, sizeof(settings));
    SETTINGS_OPTIONS(DEFAULT_ROW)
    cache_options_defaults(&settings.cache);
}

static const char *const policies[] = {
    [CACHE_TIER_DRAM] = "dram",
    [CACHE_TIER_PMEM] = "pmem",
    [CACHE_TIER_CACHE] = "cache",
    [CACHE_TIER_CAPACITY] = "capacity",
};
#define NPOLICIES (sizeof(policies) / sizeof(policies[0]))

int
settings_opt_tier_policy(const char *val)
{
    for (size_t i = 0; val != NULL && i < NPOLICIES; i++) {
        if (strcmp(val, policies[i]) == 0) {
            settings.tier_policy = policies[i];
            return 0;
        }
    }
    fprintf(stderr, "Invalid value for tier_policy: \"%s\" (dram, "
            "pmem, cache or capacity)\n", val ? val : "");
    return -1;
}

int
settings_opt_durability(const char *val)
{
    static const char *const names[] = {
        [CACHE_DURABLE_AUTO] = "auto",
        [CACHE_DURABLE_PROCESS] = "process",
        [CACHE_DURABLE_POWER] = "power",
    };

    for (size_t i = 0; val != NULL && i < sizeof(names) / sizeof(*names);
         i++) {
        if (strcmp(val, names[i]) == 0) {
            settings.cache.pmem_durability = (enum cache_durability)i;
            return 0;
        }
    }
    fprintf(stderr, "Invalid value for memory_file_durability: \"%s\" "
            "(auto, process or power)\n", val ? val : "");
    return -1;
}

static const char *const tls_versions[] = {
    "tlsv1.0", "tlsv1.1", "tlsv1.2", "tlsv1.3"
};

const char *
settings_ssl_version_name(void)
{
    int v = settings.ssl_min_version;

    return v >= 0 && v < 4 ? tls_versions[v] : "unknown";
}

const char *
settings_durability_name(void)
{
    const char *name = cache_durability();

    return name != NULL ? name : "(null)";
}

const char *
settings_flush_name(void)
{
    const char *name = cache_flush_method();

    return name != NULL ? name : "(null)";
}

int
settings_ssl_version(const char *name)
{
    int v;

    for (v = 0; v < 4; v++) {
        if (strcmp(name, tls_versions[v]) == 0) {
            return v;
        }
    }
    return settings_parse_int(name, 0, 3, &v) ? v : -1;
}

/* ---- value parsers: whole string, in range, or false ------------------ */

static bool
parse_ll(const char *s, long long lo, long long hi, long long *out)
{
    char *end;
    long long v;

    if (s == NULL || *s == '\0') {
        return false;
    }
    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < lo || v > hi) {
        return false;
    }
    *out = v;
    return true;
}

bool
settings_parse_int(const char *s, int lo, int hi, int *out)
{
    long long v;

    if (!parse_ll(s, lo, hi, &v)) {
        return false;
    }
    *out = (int)v;
    return true;
}

bool
settings_parse_uint(const char *s, unsigned lo, unsigned hi, unsigned *out)
{
    long long v;

    if (!parse_ll(s, lo, hi, &v)) {
        return false;
    }
    *out = (unsigned)v;
    return true;
}

bool
settings_parse_double(const char *s, double *out)
{
    char *end;

    if (s == NULL || *s == '\0') {
        return false;
    }
    errno = 0;
    *out = strtod(s, &end);
    return errno == 0 && *end == '\0';
}

int
settings_bad_value(const char *opt, const char *val)
{
    fprintf(stderr, "Invalid value for %s: \"%s\"\n", opt, val ? val : "");
    return -1;
}

/*
 * -o memory_kind: the DRAM policy's pages come from a memkind heap (sized
 * by -m, volatile), so it rules out a memory file and the other policies.
 * The tier itself checks the kind, the directory and the 16 MiB minimum.
 */
static int
settings_memory_kind(void)
{
    const char *policy = settings.tier_policy;

    if (settings.memory_file != NULL) {
        fprintf(stderr, "memory_kind and memory_file cannot be used "
                "together yet\n");
        return -1;
    }
    if (policy != NULL && strcmp(policy, "dram") != 0) {
        fprintf(stderr, "memory_kind holds the items of tier_policy=dram: "
                "it cannot be used with tier_policy=%s\n", policy);
        return -1;
    }
    if (settings.cache.prealloc) {
        fprintf(stderr, "memory_kind pages are taken as needed: -L "
                "(preallocation) cannot be used with it\n");
        return -1;
    }
    return 0;
}

/*
 * The PMEM tier: -e <file> (memcached's spelling: the file holds -m of
 * item memory) or -o memory_file=<file>[,memory_file_size=<MB>].  The file
 * is one page larger than the item memory: its first page holds the
 * superblock.
 */
static int
settings_tiers(void)
{
    struct cache_options *c = &settings.cache;
    bool pmem;

    if (c->memory_kind != NULL && settings_memory_kind() != 0) {
        return -1;
    }
    if (settings.tier_policy == NULL) {
        settings.tier_policy = settings.memory_file ? "pmem" : "dram";
    }
    for (size_t i = 0; i < NPOLICIES; i++) {
        if (strcmp(settings.tier_policy, policies[i]) == 0) {
            c->tier_policy = (enum cache_tier_policy)i;
        }
    }
    pmem = c->tier_policy != CACHE_TIER_DRAM;
    if (pmem && settings.memory_file == NULL) {
        fprintf(stderr, "tier_policy=%s needs a memory file: -e <file> "
                "or -o memory_file=<file>\n", settings.tier_policy);
        return -1;
    }
    if (!pmem && settings.memory_file != NULL) {
        fprintf(stderr, "tier_policy=dram keeps no items in the memory file "
                "%s: drop the file or use tier_policy=pmem, cache or "
                "capacity\n", settings.memory_file);
        return -1;
    }
    if (c->pmem_crash_after != 0 && !c->pmem_strict) {
        fprintf(stderr, "memory_file_crash_after needs memory_file_strict\n");
        return -1;
    }
    c->memory_file = settings.memory_file;
    if (pmem) {
        size_t items = settings.memory_file_mb ?
                       (size_t)settings.memory_file_mb * MB : c->mem_limit;

        c->memory_file_size = items + c->page_size;
    }
    return 0;
}

/* The item size and slab rules, as memcached checks them once all
 * options are read (exit 64). */
static int
check_slabs(struct cache_options *c)
{
    if (settings.num_napi_ids > settings.num_threads) {
        fprintf(stderr, "Number of napi_ids(%d) cannot be greater than "
                "number of threads(%d)\n", settings.num_napi_ids,
                settings.num_threads);
        return -EX_USAGE;
    }
    if (c->item_size_max > c->mem_limit / 2) {
        fprintf(stderr, "Cannot set item size limit higher than 1/2 of "
                "memory max.\n");
        return -EX_USAGE;
    }
    if (c->slab_chunk_max > c->item_size_max) {
        fprintf(stderr, "slab_chunk_max (bytes: %zu) cannot be larger than "
                "-I (item_size_max %zu)\n", c->slab_chunk_max,
                c->item_size_max);
        return -EX_USAGE;
    }
    if (c->item_size_max % c->slab_chunk_max != 0) {
        fprintf(stderr, "-I (item_size_max: %zu) must be evenly divisible "
                "by slab_chunk_max (bytes: %zu)\n", c->item_size_max,
                c->slab_chunk_max);
        return -EX_USAGE;
    }
    if (c->page_size % c->slab_chunk_max != 0) {
        fprintf(stderr, "slab_chunk_max (bytes: %zu) must divide evenly "
                "into %zu (slab_page_size)\n", c->slab_chunk_max,
                c->page_size);
        return -EX_USAGE;
    }
    if (c->hot_lru_pct + c->warm_lru_pct > 80) {
        fprintf(stderr, "hot_lru_pct + warm_lru_pct cannot be more than "
                "80%% combined\n");
        return -EX_USAGE;
    }
    if (c->temp_lru && !c->lru_segmented) {
        fprintf(stderr, "temporary_ttl requires lru_maintainer to be "
                "enabled\n");
        return -EX_USAGE;
    }
    return 0;
}

/* -S needs binary, -Y ascii: bound to it unless -B said otherwise, and
 * no UDP, with memcached's messages (exit 64). */
static int
auth_protocol(const char *proto, const char *other_msg, const char *udp_msg)
{
    if (!settings.protocol_given) {
        settings.binding_protocol = proto;
    } else if (strcmp(settings.binding_protocol, proto) != 0) {
        fputs(other_msg, stderr);
        return -EX_USAGE;
    }
    if (settings.udpport != 0) {
        fputs(udp_msg, stderr);
        return -EX_USAGE;
    }
    return 0;
}

/* -S, -Y, -Z and what this build has of them. */
static int
check_security(void)
{
    int rc;

    if (settings.sasl &&
        (rc = auth_protocol("binary", "ERROR: You cannot allow the ASCII "
                            "protocol while using SASL.\n", "ERROR: Cannot "
                            "enable UDP while using binary SASL "
                            "authentication.\n")) != 0) {
        return rc;
    }
    if (settings.auth_file != NULL &&
        (rc = auth_protocol("ascii", "ERROR: You cannot allow the BINARY "
                            "protocol while using ascii authentication "
                            "tokens.\n", "Cannot use UDP with ascii "
                            "authentication enabled (-U 0 to disable)\n"))
        != 0) {
        return rc;
    }
#ifndef ENABLE_CYRUS_SASL
    if (settings.sasl_cyrus) {
        fprintf(stderr, "sasl_cyrus: this server is built without Cyrus "
                "SASL (libsasl2-dev)\n");
        return -EX_USAGE;
    }
#endif
#ifndef ENABLE_TLS
    if (settings.ssl_enabled) {
        fprintf(stderr, "This server is not built with TLS support.\n");
        return -EX_USAGE;
    }
#endif
    return 0;
}

/* Cross-option rules, checked once everything is read. */
int
settings_check(void)
{
    struct cache_options *c = &settings.cache;
    int rc;

    if (settings_tiers() != 0) {
        return -1;
    }
    if ((rc = check_slabs(c)) != 0 || (rc = check_security()) != 0) {
        return rc;
    }
    if (c->lock_power == 0) {
        c->lock_power = locks_power_for((unsigned)settings.num_threads);
    }
    if (c->lock_power >= c->hashpower) {
        fprintf(stderr, "Hash table power size (%u) cannot be equal to or "
                "less than item lock table (%u)\n", c->hashpower,
                c->lock_power);
        return -1;
    }
    if (settings.maxconns <= RESERVED_FDS + 1) {
        fprintf(stderr, "Maxconns setting is too low, use -c to "
                "increase.\n");
        return -1;
    }
    c->verbose = settings.verbose;
    return 0;
}

int
settings_opt_event_engine(const char *val)
{
    if (val != NULL && strcmp(val, "epoll") == 0) {
        settings.event_engine = ENGINE_EPOLL;
    } else if (val != NULL && strcmp(val, "io_uring") == 0) {
        settings.event_engine = ENGINE_IO_URING;
    } else if (val != NULL && strcmp(val, "auto") == 0) {
        settings.event_engine = ENGINE_AUTO;
    } else {
        fprintf(stderr, "event_engine must be io_uring, epoll or auto\n");
        return -1;
    }
    return 0;
}

int
settings_opt_ring_buffers(const char *val)
{
    unsigned n;

    if (!settings_parse_uint(val, 1, 32768, &n) || (n & (n - 1)) != 0) {
        fprintf(stderr, "ring_buffers must be a power of two from 1 to "
                "32768\n");
        return -1;
    }
    settings.ring_buffers = n;
    return 0;
}

const char *
settings_engine_name(void)
{
    return settings.event_engine == ENGINE_IO_URING ? "io_uring" : "epoll";
}

static rel_time_t oldest_live;

void
settings_set_oldest(rel_time_t when)
{
    __atomic_store_n(&oldest_live, when, __ATOMIC_RELAXED);
}

rel_time_t
settings_oldest(void)
{
    return __atomic_load_n(&oldest_live, __ATOMIC_RELAXED);
}
