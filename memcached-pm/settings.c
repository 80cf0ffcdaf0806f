/*
 * settings.c: defaults and the command line, as memcached 1.6 takes them.
 *
 * Where memcached silently turns a bad number into 0 (atoi), memcached-pm
 * refuses it: every value is parsed whole, range-checked, and a bad one is a
 * message on stderr and exit status 1.  Messages reuse memcached's wording
 * where memcached has one.
 */
#include "config.h"

#include "memcached-pm/settings.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "memcached-pm/stats.h"
#include "storage/locks.h"
#include "storage/prefetch.h"

#define MB (1024 * 1024)

struct settings settings;

static void
settings_defaults(void)
{
    struct cache_options *c = &settings.cache;

    memset(&settings, 0, sizeof(settings));
    settings.port = 11211;
    settings.access = 0700;
    settings.backlog = 1024;
    settings.maxconns = 1024;
    settings.maxconns_fast = true;
    settings.reqs_per_event = 20;
    settings.binding_protocol = "auto-negotiate";
    settings.num_threads = 4;
    settings.flush_enabled = true;
    settings.dump_enabled = true;
    settings.watch_enabled = true;
    settings.prefix_delimiter = ':';
    settings.hash_algorithm = "murmur3";
    settings.watcher_logbuf_size = 256 * 1024;
    settings.lru_maintainer = true;
    settings.worker_logbuf_size = 64 * 1024;

    cache_options_defaults(c);
    settings.prefetch_batch = 16;
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

static bool
parse_int(const char *s, int lo, int hi, int *out)
{
    long long v;

    if (!parse_ll(s, lo, hi, &v)) {
        return false;
    }
    *out = (int)v;
    return true;
}

static bool
parse_uint(const char *s, unsigned lo, unsigned hi, unsigned *out)
{
    long long v;

    if (!parse_ll(s, lo, hi, &v)) {
        return false;
    }
    *out = (unsigned)v;
    return true;
}

static bool
parse_double(const char *s, double *out)
{
    char *end;

    if (s == NULL || *s == '\0') {
        return false;
    }
    errno = 0;
    *out = strtod(s, &end);
    return errno == 0 && *end == '\0';
}

/* A size with an optional k/m/g suffix, in units of `unit` when bare. */
static bool
parse_size(const char *s, uint64_t unit, uint64_t *out)
{
    char *end;
    unsigned long long v;
    uint64_t mul = unit;

    if (s == NULL || *s < '0' || *s > '9') {
        return false;
    }
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno != 0) {
        return false;
    }
    switch (*end) {
    case '\0': break;
    case 'k': case 'K': mul = 1024; end++; break;
    case 'm': case 'M': mul = MB; end++; break;
    case 'g': case 'G': mul = (uint64_t)1024 * MB; end++; break;
    default: return false;
    }
    if (*end != '\0' || v > UINT64_MAX / mul) {
        return false;
    }
    *out = v * mul;
    return true;
}

static int
bad_value(const char *opt, const char *val)
{
    fprintf(stderr, "Invalid value for %s: \"%s\"\n", opt, val ? val : "");
    return -1;
}

/* ---- -o sub-options --------------------------------------------------- */

/*
 * The -o table.  Most entries store a parsed value into a settings field;
 * the few with rules of their own (hashpower, the LRU maintainer pair,
 * tier_policy, ...) name a function.  A value outside [lo, hi] gets the
 * entry's message (memcached's wording where it has one; %s is the name),
 * or "Invalid value for <name>".
 */
enum subopt_kind {
    SO_ON,          /* bool field = true; takes no value */
    SO_OFF,         /* bool field = false; takes no value */
    SO_UINT,        /* unsigned in [lo, hi] */
    SO_KB,          /* unsigned in [lo, hi], stored times 1024 */
    SO_DOUBLE,      /* double in [lo, hi] */
    SO_STRING,      /* non-empty string, kept as given */
    SO_NOOP,        /* accepted for compatibility; takes no value */
    SO_FUNC         /* fn(value) */
};

struct subopt {
    const char       *name;
    enum subopt_kind  kind;
    void             *field;
    double            lo, hi;
    const char       *range_msg;
    int             (*fn)(const char *val);
};

static int
subopt_hashpower(const char *val)
{
    unsigned hp;

    if (!parse_uint(val, 0, UINT_MAX, &hp)) {
        return bad_value("hashpower", val);
    }
    if (hp < 12) {
        fprintf(stderr, "Initial hashtable multiplier of %u is too low\n", hp);
        return -1;
    }
    if (hp > 32) {
        fprintf(stderr, "Initial hashtable multiplier of %u is too high\n"
                "Choose a value based on \"STAT hash_power_level\" from a "
                "running instance\n", hp);
        return -1;
    }
    settings.hashpower_init = hp;
    settings.cache.hashpower = hp;
    return 0;
}

static int
subopt_automove(const char *val)
{
    int mode = 1;

    if (val != NULL && !parse_int(val, 0, 2, &mode)) {
        fprintf(stderr, "slab_automove must be between 0 and 2\n");
        return -1;
    }
    settings.cache.slab_automove = mode;
    return 0;
}

static int
subopt_no_automove(const char *val)
{
    settings.cache.slab_automove = 0;
    return val == NULL ? 0 : bad_value("no_slab_automove", val);
}

static int
subopt_chunk_max(const char *val)
{
    uint64_t v;

    if (!parse_size(val, 1, &v) || v < 256 || v > settings.cache.page_size) {
        return bad_value("slab_chunk_max", val);
    }
    settings.cache.slab_chunk_max = (size_t)v;
    return 0;
}

static int
subopt_no_chunked(const char *val)
{
    settings.cache.slab_chunk_max = settings.cache.page_size;
    return val == NULL ? 0 : bad_value("no_chunked_items", val);
}

static int
subopt_hash_algorithm(const char *val)
{
    /* Only murmur3 is built in; the others would change nothing a client
     * sees, so refuse them clearly rather than pretend. */
    if (val == NULL || strcmp(val, "murmur3") != 0) {
        fprintf(stderr, "Unknown hash_algorithm option (murmur3 is the only "
                "one memcached-pm provides)\n");
        return -1;
    }
    return 0;
}

static int
subopt_lru_maintainer(const char *val)
{
    settings.lru_maintainer = settings.cache.lru_segmented = true;
    return val == NULL ? 0 : bad_value("lru_maintainer", val);
}

static int
subopt_no_lru_maintainer(const char *val)
{
    settings.lru_maintainer = settings.cache.lru_segmented = false;
    return val == NULL ? 0 : bad_value("no_lru_maintainer", val);
}

static int
subopt_temporary_ttl(const char *val)
{
    settings.cache.temp_lru = true;
    return parse_uint(val, 0, UINT_MAX, &settings.cache.temporary_ttl) ? 0
           : bad_value("temporary_ttl", val);
}

static const char *const policies[] = {
    [CACHE_TIER_DRAM] = "dram",
    [CACHE_TIER_PMEM] = "pmem",
    [CACHE_TIER_CACHE] = "cache",
    [CACHE_TIER_CAPACITY] = "capacity",
};
#define NPOLICIES (sizeof(policies) / sizeof(policies[0]))

static int
subopt_policy(const char *val)
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

static int
subopt_no_modern(const char *val)
{
    struct cache_options *c = &settings.cache;

    c->slab_chunk_max = c->page_size;
    c->slab_reassign = false;
    c->slab_automove = 0;
    settings.maxconns_fast = false;
    c->lru_segmented = false;
    c->lru_crawler = false;
    settings.lru_maintainer = false;
    return val == NULL ? 0 : bad_value("no_modern", val);
}

#define C(f) (&settings.cache.f)
#define S(f) (&settings.f)
#define PCT_MSG "%s must be > 1 and < 80"

static const struct subopt subopt_table[] = {
    { "maxconns_fast", SO_ON, S(maxconns_fast), 0, 0, NULL, NULL },
    { "no_maxconns_fast", SO_OFF, S(maxconns_fast), 0, 0, NULL, NULL },
    { "hashpower", SO_FUNC, NULL, 0, 0, NULL, subopt_hashpower },
    { "no_hashexpand", SO_OFF, C(hash_expand), 0, 0, NULL, NULL },
    { "hash_bulk_move", SO_UINT, C(hash_bulk_move), 1, 1 << 20, NULL, NULL },
    { "hash_algorithm", SO_FUNC, NULL, 0, 0, NULL, subopt_hash_algorithm },
    { "item_lock_power", SO_UINT, C(lock_power), 1, 20, NULL, NULL },
    { "slab_reassign", SO_ON, C(slab_reassign), 0, 0, NULL, NULL },
    { "no_slab_reassign", SO_OFF, C(slab_reassign), 0, 0, NULL, NULL },
    { "slab_automove", SO_FUNC, NULL, 0, 0, NULL, subopt_automove },
    { "no_slab_automove", SO_FUNC, NULL, 0, 0, NULL, subopt_no_automove },
    { "slab_automove_ratio", SO_DOUBLE, C(automove_ratio), 0.01, 1.0,
      NULL, NULL },
    { "slab_automove_window", SO_UINT, C(automove_window), 3, 1800,
      NULL, NULL },
    { "slab_automove_freeratio", SO_DOUBLE, C(automove_freeratio), 0, 1,
      NULL, NULL },
    { "slab_sizes", SO_STRING, C(slab_sizes), 0, 0, NULL, NULL },
    { "slab_chunk_max", SO_FUNC, NULL, 0, 0, NULL, subopt_chunk_max },
    { "no_chunked_items", SO_FUNC, NULL, 0, 0, NULL, subopt_no_chunked },
    /* memcached-pm has no tail repair and no global read buffer cap:
     * only their "off" values are accepted, never ignored. */
    { "tail_repair_time", SO_UINT, C(tail_repair_time), 0, 0,
      "%s is not supported: only 0 (off) is accepted", NULL },
    { "prefetch_batch", SO_UINT, S(prefetch_batch), 0, PREFETCH_BATCH_MAX,
      NULL, NULL },
    { "read_buf_mem_limit", SO_UINT, S(read_buf_mem_limit), 0, 0,
      "%s is not supported: only 0 (no limit) is accepted", NULL },
    { "lru_crawler", SO_ON, C(lru_crawler), 0, 0, NULL, NULL },
    { "no_lru_crawler", SO_OFF, C(lru_crawler), 0, 0, NULL, NULL },
    { "lru_crawler_sleep", SO_UINT, C(crawler_sleep_us), 0, 1000000,
      "LRU crawler sleep must be between 0 and 1 second", NULL },
    { "lru_crawler_tocrawl", SO_UINT, C(crawler_tocrawl), 0, UINT_MAX,
      NULL, NULL },
    { "lru_maintainer", SO_FUNC, NULL, 0, 0, NULL, subopt_lru_maintainer },
    { "no_lru_maintainer", SO_FUNC, NULL, 0, 0, NULL,
      subopt_no_lru_maintainer },
    { "hot_lru_pct", SO_UINT, C(hot_lru_pct), 2, 79, PCT_MSG, NULL },
    { "warm_lru_pct", SO_UINT, C(warm_lru_pct), 2, 79, PCT_MSG, NULL },
    { "hot_max_factor", SO_DOUBLE, C(hot_max_factor), 0.0001, 1e6,
      NULL, NULL },
    { "warm_max_factor", SO_DOUBLE, C(warm_max_factor), 0.0001, 1e6,
      NULL, NULL },
    { "temporary_ttl", SO_FUNC, NULL, 0, 0, NULL, subopt_temporary_ttl },
    { "idle_timeout", SO_UINT, S(idle_timeout), 0, UINT_MAX, NULL, NULL },
    { "watcher_logbuf_size", SO_KB, S(watcher_logbuf_size), 0,
      UINT_MAX / 1024, NULL, NULL },
    { "worker_logbuf_size", SO_KB, S(worker_logbuf_size), 0,
      UINT_MAX / 1024, NULL, NULL },
    { "track_sizes", SO_ON, C(track_sizes), 0, 0, NULL, NULL },
    { "modern", SO_NOOP, NULL, 0, 0, NULL, NULL },
    { "no_modern", SO_FUNC, NULL, 0, 0, NULL, subopt_no_modern },
    { "inline_ascii_resp", SO_NOOP, NULL, 0, 0, NULL, NULL },
    { "no_inline_ascii_resp", SO_NOOP, NULL, 0, 0, NULL, NULL },
    { "drop_privileges", SO_NOOP, NULL, 0, 0, NULL, NULL },
    { "no_drop_privileges", SO_NOOP, NULL, 0, 0, NULL, NULL },
    { "memory_file", SO_STRING, S(memory_file), 0, 0, NULL, NULL },
    { "memory_file_size", SO_UINT, S(memory_file_mb), 1, 1u << 24,
      NULL, NULL },
    { "memory_file_reinit", SO_ON, C(memory_file_reinit), 0, 0, NULL, NULL },
    { "memory_file_strict", SO_ON, C(pmem_strict), 0, 0, NULL, NULL },
    { "memory_file_crash_after", SO_UINT, C(pmem_crash_after), 1,
      UINT_MAX, NULL, NULL },
    { "tier_policy", SO_FUNC, NULL, 0, 0, NULL, subopt_policy },
    { "memory_kind", SO_STRING, C(memory_kind), 0, 0, NULL, NULL },
};

#undef C
#undef S

static int
subopt_range_error(const struct subopt *o, const char *val)
{
    if (o->range_msg == NULL) {
        return bad_value(o->name, val);
    }
    fprintf(stderr, o->range_msg, o->name);
    fputc('\n', stderr);
    return -1;
}

static int
subopt_apply(const struct subopt *o, const char *val)
{
    double d;
    unsigned u;

    switch (o->kind) {
    case SO_ON: case SO_OFF: case SO_NOOP:
        if (val != NULL) {
            fprintf(stderr, "Suboption \"%s\" takes no value\n", o->name);
            return -1;
        }
        if (o->kind != SO_NOOP) {
            *(bool *)o->field = o->kind == SO_ON;
        }
        return 0;
    case SO_UINT: case SO_KB:
        if (!parse_uint(val, (unsigned)o->lo, (unsigned)o->hi, &u)) {
            return subopt_range_error(o, val);
        }
        *(unsigned *)o->field = o->kind == SO_KB ? u * 1024 : u;
        return 0;
    case SO_DOUBLE:
        if (!parse_double(val, &d) || d < o->lo || d > o->hi) {
            return subopt_range_error(o, val);
        }
        *(double *)o->field = d;
        return 0;
    case SO_STRING:
        if (val == NULL || *val == '\0') {
            return bad_value(o->name, val);
        }
        *(const char **)o->field = val;
        return 0;
    case SO_FUNC:
    default:
        return o->fn(val);
    }
}

/* One -o item, "name" or "name=value". */
static int
subopt_one(char *item)
{
    char *val = strchr(item, '=');

    if (val != NULL) {
        *val++ = '\0';
    }
    for (size_t i = 0; i < sizeof(subopt_table) / sizeof(*subopt_table);
         i++) {
        if (strcmp(item, subopt_table[i].name) == 0) {
            return subopt_apply(&subopt_table[i], val);
        }
    }
    fprintf(stderr, "Illegal suboption \"%s%s%s\"\n", item,
            val ? "=" : "", val ? val : "");
    return -1;
}

static int
subopts(char *list)
{
    char *save = NULL;

    for (char *it = strtok_r(list, ",", &save); it != NULL;
         it = strtok_r(NULL, ",", &save)) {
        if (subopt_one(it) != 0) {
            return -1;
        }
    }
    return 0;
}

/* ---- short options ---------------------------------------------------- */

static void
usage(void)
{
    printf("memcached-pm %s\n"
"-p, --port=<num>          TCP port to listen on (default: 11211)\n"
"-U, --udp-port=<num>      UDP port (default: 0, off; only 0 is supported)\n"
"-s, --unix-socket=<file>  UNIX socket to listen on (disables network)\n"
"-a, --unix-mask=<mask>    access mask for the UNIX socket, in octal (0700)\n"
"-l, --listen=<addr>       interfaces to listen on (default: 127.0.0.1)\n"
"-d, --daemon              run as a daemon\n"
"-P, --pidfile=<file>      save the PID in <file>, only with -d\n"
"-u, --user=<user>         assume the identity of <user> (only as root)\n"
"-m, --memory-limit=<num>  item memory in megabytes (default: 64)\n"
"-M, --disable-evictions   return an error when memory is full\n"
"-c, --conn-limit=<num>    max simultaneous connections (default: 1024)\n"
"-k, --lock-memory         lock down all paged memory\n"
"-v, --verbose             verbose (print errors and warnings)\n"
"-vv                       very verbose (also print client commands)\n"
"-h, --help                print this help and exit\n"
"-i, --license             print the license and exit\n"
"-V, --version             print the version and exit\n"
"-r, --enable-coredumps    maximise core file limit\n"
"-f, --slab-growth-factor=<num> chunk size growth factor (default: 1.25)\n"
"-n, --slab-min-size=<bytes> min space for key+value+flags (default: 48)\n"
"-L, --enable-largepages   preallocate item memory\n"
"-D <char>                 key prefix delimiter for stats detail (':')\n"
"-t, --threads=<num>       number of worker threads (default: 4)\n"
"-R, --max-reqs-per-event  requests per event before yielding (default: 20)\n"
"-C, --disable-cas         disable use of CAS\n"
"-b, --listen-backlog=<num> listen backlog (default: 1024)\n"
"-B, --protocol=<name>     ascii or auto (default: auto)\n"
"-I, --max-item-size=<num> max item size (default: 1m, min 1k, max 1g)\n"
"-A, --enable-shutdown     enable the ascii \"shutdown\" command\n"
"-F, --disable-flush-all   disable flush_all\n"
"-X, --disable-dumping     disable stats cachedump and lru_crawler metadump\n"
"-W, --disable-watch       disable watch commands\n"
"-e, --memory-file=<file>  keep item memory in <file> (persistent tier)\n"
"-o, --extended            comma separated extended options:\n"
"   maxconns_fast, hashpower, no_hashexpand, slab_reassign, slab_automove,\n"
"   slab_automove_ratio, slab_automove_window, slab_chunk_max, slab_sizes,\n"
"   no_chunked_items, tail_repair_time, hash_algorithm, lru_crawler,\n"
"   lru_crawler_sleep, lru_crawler_tocrawl, lru_maintainer, hot_lru_pct,\n"
"   warm_lru_pct, hot_max_factor, warm_max_factor, temporary_ttl,\n"
"   idle_timeout, track_sizes, modern, no_modern, read_buf_mem_limit,\n"
"   item_lock_power, hash_bulk_move,\n"
"   prefetch_batch=<n>      look keys up n at a time, their cache misses\n"
"                           overlapped (default 16, 0 off, at most 256)\n"
"   memory_file=<file>      keep items in this (PMEM) file\n"
"   memory_file_size=<MB>   item memory in the file (default: as -m)\n"
"   memory_file_reinit      discard a memory file the settings cannot read\n"
"   memory_file_strict      power-loss simulator for crash tests: only\n"
"                           flushed cache lines reach the file\n"
"   memory_file_crash_after=<n>  with memory_file_strict: a power cut\n"
"                           (SIGKILL) at the n-th flush once serving\n"
"   tier_policy=<policy>    where items live: dram, pmem (the default\n"
"                           with a memory file), cache (all in the file,\n"
"                           items read often copied to DRAM) or capacity\n"
"                           (new items in DRAM, its tail moved to the file)\n"
"   memory_kind=dax:<dir>|kmem  items in volatile PMEM through memkind\n",
           MCPM_VERSION);
}

static const struct option long_options[] = {
    {"port", required_argument, 0, 'p'},
    {"udp-port", required_argument, 0, 'U'},
    {"unix-socket", required_argument, 0, 's'},
    {"unix-mask", required_argument, 0, 'a'},
    {"listen", required_argument, 0, 'l'},
    {"daemon", no_argument, 0, 'd'},
    {"pidfile", required_argument, 0, 'P'},
    {"user", required_argument, 0, 'u'},
    {"memory-limit", required_argument, 0, 'm'},
    {"disable-evictions", no_argument, 0, 'M'},
    {"conn-limit", required_argument, 0, 'c'},
    {"lock-memory", no_argument, 0, 'k'},
    {"verbose", optional_argument, 0, 'v'},
    {"help", no_argument, 0, 'h'},
    {"license", no_argument, 0, 'i'},
    {"version", no_argument, 0, 'V'},
    {"enable-coredumps", no_argument, 0, 'r'},
    {"slab-growth-factor", required_argument, 0, 'f'},
    {"slab-min-size", required_argument, 0, 'n'},
    {"enable-largepages", no_argument, 0, 'L'},
    {"threads", required_argument, 0, 't'},
    {"max-reqs-per-event", required_argument, 0, 'R'},
    {"disable-cas", no_argument, 0, 'C'},
    {"listen-backlog", required_argument, 0, 'b'},
    {"protocol", required_argument, 0, 'B'},
    {"max-item-size", required_argument, 0, 'I'},
    {"enable-shutdown", no_argument, 0, 'A'},
    {"disable-flush-all", no_argument, 0, 'F'},
    {"disable-dumping", no_argument, 0, 'X'},
    {"disable-watch", no_argument, 0, 'W'},
    {"memory-file", required_argument, 0, 'e'},
    {"extended", required_argument, 0, 'o'},
    {0, 0, 0, 0}
};

static int
opt_protocol(const char *val)
{
    if (strcmp(val, "ascii") == 0) {
        settings.binding_protocol = "ascii";
    } else if (strcmp(val, "auto") == 0) {
        settings.binding_protocol = "auto-negotiate";
    } else if (strcmp(val, "binary") == 0) {
        fprintf(stderr, "The binary protocol is not supported by "
                "memcached-pm: use -B ascii or -B auto\n");
        return -1;
    } else {
        fprintf(stderr, "Invalid value for binding protocol: %s\n"
                " -- should be one of auto, binary, or ascii\n", val);
        return -1;
    }
    return 0;
}

static int
opt_memory(const char *val)
{
    uint64_t v;

    if (!parse_size(val, MB, &v) || v == 0 || v > ((uint64_t)1 << 46)) {
        return bad_value("-m", val);
    }
    settings.cache.mem_limit = (size_t)v;
    return 0;
}

static int
opt_item_size(const char *val)
{
    uint64_t v;

    if (!parse_size(val, 1, &v)) {
        return bad_value("-I", val);
    }
    if (v < 1024) {
        fprintf(stderr, "Item max size cannot be less than 1024 bytes.\n");
        return -1;
    }
    if (v > 1024 * (uint64_t)MB) {
        fprintf(stderr, "Cannot set item size limit higher than a "
                "gigabyte.\n");
        return -1;
    }
    settings.cache.item_size_max = (size_t)v;
    return 0;
}

static int
opt_threads(const char *val)
{
    if (!parse_int(val, INT_MIN, INT_MAX, &settings.num_threads)) {
        return bad_value("-t", val);
    }
    if (settings.num_threads <= 0) {
        fprintf(stderr, "Number of threads must be greater than 0\n");
        return -1;
    }
    if (settings.num_threads > 64) {
        fprintf(stderr, "WARNING: Setting a high number of worker threads "
                "is not recommended.\n Set this value to the number of "
                "cores in your machine or less.\n");
    }
    return 0;
}

static int
opt_factor(const char *val)
{
    double f;

    if (!parse_double(val, &f) || f <= 1.0) {
        fprintf(stderr, "Factor must be greater than 1\n");
        return -1;
    }
    settings.cache.factor = f;
    return 0;
}

static int
opt_port(const char *val, int *out)
{
    if (!parse_int(val, 0, 65535, out)) {
        fprintf(stderr, "ERROR: Invalid port number %s.\n", val);
        return -1;
    }
    return 0;
}

static int
opt_udp(const char *val)
{
    if (opt_port(val, &settings.udpport) != 0) {
        return -1;
    }
    if (settings.udpport != 0) {
        fprintf(stderr, "UDP is not supported by memcached-pm: use -U 0\n");
        return -1;
    }
    return 0;
}

/* -a: the unix socket's mode, in octal. */
static int
opt_unix_mask(const char *val)
{
    char *end;
    long mode = strtol(val, &end, 8);

    if (*val == '\0' || *end != '\0' || mode < 0 || mode > 0777) {
        return bad_value("-a", val);
    }
    settings.access = (int)mode;
    return 0;
}

/* Appends to -l as memcached does when it is repeated. */
static int
opt_listen(const char *val)
{
    char *joined;

    if (*val == '\0') {
        return bad_value("-l", val);
    }
    if (settings.inter == NULL) {
        settings.inter = strdup(val);
        return settings.inter ? 0 : -1;
    }
    if (asprintf(&joined, "%s,%s", settings.inter, val) < 0) {
        return -1;
    }
    free(settings.inter);
    settings.inter = joined;
    return 0;
}

static int
opt_one(int ch, char *arg)
{
    struct cache_options *c = &settings.cache;

    switch (ch) {
    case 'p': return opt_port(arg, &settings.port);
    case 'U': return opt_udp(arg);
    case 's': settings.socketpath = arg; return 0;
    case 'a': return opt_unix_mask(arg);
    case 'l': return opt_listen(arg);
    case 'd': settings.daemonize = true; return 0;
    case 'P': settings.pidfile = arg; return 0;
    case 'u': settings.username = arg; return 0;
    case 'm': return opt_memory(arg);
    case 'M': c->evict = false; return 0;
    case 'c':
        return parse_int(arg, 1, 1 << 24, &settings.maxconns) ? 0
               : bad_value("-c", arg);
    case 'k': settings.lock_memory = true; return 0;
    case 'v': settings.verbose++; return 0;
    case 'r': settings.coredumps = true; return 0;
    case 'f': return opt_factor(arg);
    case 'n':
        if (!parse_uint(arg, 1, 1 << 20, &c->chunk_min)) {
            fprintf(stderr, "Chunk size must be greater than 0\n");
            return -1;
        }
        return 0;
    case 'L': c->prealloc = true; return 0;
    case 'D':
        if (strlen(arg) != 1) {
            fprintf(stderr, "No delimiter specified\n");
            return -1;
        }
        settings.prefix_delimiter = arg[0];
        settings.detail_enabled = true;
        return 0;
    case 't': return opt_threads(arg);
    case 'R':
        if (!parse_int(arg, 1, INT_MAX, &settings.reqs_per_event)) {
            fprintf(stderr, "Number of requests per event must be greater "
                    "than 0\n");
            return -1;
        }
        return 0;
    case 'C': c->use_cas = false; return 0;
    case 'b':
        return parse_int(arg, 1, INT_MAX, &settings.backlog) ? 0
               : bad_value("-b", arg);
    case 'B': return opt_protocol(arg);
    case 'I': return opt_item_size(arg);
    case 'A': settings.shutdown_command = true; return 0;
    case 'F': settings.flush_enabled = false; return 0;
    case 'X': settings.dump_enabled = false; return 0;
    case 'W': settings.watch_enabled = false; return 0;
    case 'e': settings.memory_file = arg; return 0;
    case 'o': return subopts(arg);
    default: return -1;
    }
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

/* Cross-option rules, checked once everything is read. */
static int
settings_check(void)
{
    struct cache_options *c = &settings.cache;

    if (settings_tiers() != 0) {
        return -1;
    }
    if (c->item_size_max > c->mem_limit / 2) {
        fprintf(stderr, "Cannot set item size limit higher than 1/2 of "
                "memory max.\n");
        return -1;
    }
    if (c->item_size_max < c->slab_chunk_max &&
        c->slab_chunk_max != c->page_size) {
        c->slab_chunk_max = c->item_size_max;
    }
    if (c->slab_chunk_max > c->item_size_max) {
        c->slab_chunk_max = c->item_size_max;
    }
    if (c->item_size_max % c->slab_chunk_max != 0) {
        fprintf(stderr, "-I (item_size_max: %zu) must be evenly divisible "
                "by slab_chunk_max (bytes: %zu)\n", c->item_size_max,
                c->slab_chunk_max);
        return -1;
    }
    if (c->page_size % c->slab_chunk_max != 0) {
        fprintf(stderr, "slab_chunk_max (bytes: %zu) must divide evenly "
                "into %zu (slab_page_size)\n", c->slab_chunk_max,
                c->page_size);
        return -1;
    }
    if (c->hot_lru_pct + c->warm_lru_pct > 80) {
        fprintf(stderr, "hot_lru_pct + warm_lru_pct cannot be more than "
                "80%% combined\n");
        return -1;
    }
    if (c->temp_lru && !c->lru_segmented) {
        fprintf(stderr, "temporary_ttl requires lru_maintainer to be "
                "enabled\n");
        return -1;
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
    if (settings.pidfile != NULL && !settings.daemonize) {
        /* memcached writes it anyway; so do we. */
    }
    c->verbose = settings.verbose;
    return 0;
}

int
settings_parse(int argc, char **argv)
{
    int ch;

    settings_defaults();
    opterr = 0;
    while ((ch = getopt_long(argc, argv,
               ":p:U:s:a:l:dP:u:m:Mc:kvhiVrf:n:LD:t:R:Cb:B:I:AFXWe:o:N:",
               long_options, NULL)) != -1) {
        if (ch == 'h') {
            usage();
            return 1;
        }
        if (ch == 'V') {
            printf("memcached-pm %s\n", MCPM_VERSION);
            return 1;
        }
        if (ch == 'i') {
            printf("memcached-pm: written from scratch; see the project's "
                   "README for its license.\n");
            return 1;
        }
        if (ch == '?' || ch == ':') {
            fprintf(stderr, "%s option: %s\n",
                    ch == ':' ? "Missing argument for" : "Illegal",
                    argv[optind - 1]);
            return -1;
        }
        if (ch == 'N') {
            fprintf(stderr, "-N (NAPI based thread selection) is not "
                    "supported: connections go to workers round robin\n");
            return -1;
        }
        if (opt_one(ch, optarg) != 0) {
            return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "Unexpected argument: %s\n", argv[optind]);
        return -1;
    }
    return settings_check();
}
