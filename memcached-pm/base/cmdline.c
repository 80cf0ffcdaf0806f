/*
 * cmdline.c: argv into the configuration, through the table in
 * settings.h (cmdline.h): the short and long options, -o, and -h.
 *
 * Locking: none; it runs once, before any thread starts.
 */
#include "config.h"

#include "memcached-pm/base/cmdline.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>

#include "memcached-pm/base/conffile.h"
#include "memcached-pm/base/settings.h"
#include "memcached-pm/base/usage.h"
#include "storage/base/hash.h"

#define MB (1024 * 1024)
/* getopt's value for --config-file, which no short flag has */
#define OPT_CONFIG_FILE 0x100

/* ---- options with rules of their own ---------------------------------- */

/* -m <MB>, read as memcached reads it (atoi: "64m" is 64, "1g" is 1,
 * "abc" is 0, which the item size check then refuses).  A negative value,
 * which memcached wraps to an immense limit, is refused. */
static int
opt_memory(const char *val)
{
    long long mb = atoi(val);

    if (mb < 0 || (uint64_t)mb * MB > ((uint64_t)1 << 46)) {
        settings_bad_value("-m", val);
        return -EX_USAGE;
    }
    settings.cache.mem_limit = (size_t)mb * MB;
    return 0;
}

/* -I <bytes>[k|m], as memcached reads it: atoi of what comes before a
 * k or m, so "2g" is 2 bytes; the limits are checked with -m's. */
static int
opt_item_size(const char *val)
{
    size_t len = strlen(val);
    char unit = len > 0 ? val[len - 1] : '\0';
    long long v = atoi(val);

    if (unit == 'k' || unit == 'K') {
        v *= 1024;
    } else if (unit == 'm' || unit == 'M') {
        v *= MB;
    }
    if (v < 1024) {
        fprintf(stderr, "Item max size cannot be less than 1024 bytes.\n");
        return -EX_USAGE;
    }
    if (v > 1024 * (long long)MB) {
        fprintf(stderr, "Cannot set item size limit higher than a "
                "gigabyte.\n");
        return -EX_USAGE;
    }
    settings.cache.item_size_max = (size_t)v;
    return 0;
}

static int
opt_conns(const char *val)
{
    settings.maxconns = atoi(val);
    if (settings.maxconns <= 0) {
        fprintf(stderr, "Maximum connections must be greater than 0\n");
        return -1;
    }
    return 0;
}

static int
opt_threads(const char *val)
{
    if (!settings_parse_int(val, INT_MIN, INT_MAX, &settings.num_threads)) {
        return settings_bad_value("-t", val);
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

    if (!settings_parse_double(val, &f) || f <= 1.0) {
        fprintf(stderr, "Factor must be greater than 1\n");
        return -1;
    }
    settings.cache.factor = f;
    return 0;
}

/* -p, -U: a port, or -1 for one the kernel picks (portfile.h). */
static int
parse_port(const char *val, int *out)
{
    if (!settings_parse_int(val, -1, 65535, out)) {
        fprintf(stderr, "ERROR: Invalid port number %s.\n", val);
        return -EX_USAGE;
    }
    return 0;
}

static bool port_given;     /* -p was on the command line */

static int
opt_port(const char *val)
{
    port_given = true;
    return parse_port(val, &settings.port);
}

static int
opt_udp(const char *val)
{
    return parse_port(val, &settings.udpport);
}

/* -a: the unix socket's mode, in octal. */
static int
opt_unix_mask(const char *val)
{
    char *end;
    long mode = strtol(val, &end, 8);

    if (*val == '\0' || *end != '\0' || mode < 0 || mode > 0777) {
        return settings_bad_value("-a", val);
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
        return settings_bad_value("-l", val);
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
opt_delimiter(const char *val)
{
    if (strlen(val) != 1) {
        fprintf(stderr, "No delimiter specified\n");
        return -1;
    }
    settings.prefix_delimiter = val[0];
    settings.detail_enabled = true;
    return 0;
}

static int
opt_protocol(const char *val)
{
    settings.protocol_given = true;
    if (strcmp(val, "ascii") == 0) {
        settings.binding_protocol = "ascii";
    } else if (strcmp(val, "auto") == 0) {
        settings.binding_protocol = "auto-negotiate";
    } else if (strcmp(val, "binary") == 0) {
        settings.binding_protocol = "binary";
    } else {
        fprintf(stderr, "Invalid value for binding protocol: %s\n"
                " -- should be one of auto, binary, or ascii\n", val);
        return -EX_USAGE;
    }
    return 0;
}

/* -N <n>: n NAPI ids (receive queues), each given a worker of its own
 * (worker.c); memcached's atoi, so "x" is 0. */
static int
opt_napi(const char *val)
{
    settings.num_napi_ids = atoi(val);
    if (settings.num_napi_ids <= 0) {
        fprintf(stderr, "Maximum number of NAPI IDs must be greater than "
                "0\n");
        return -1;
    }
    return 0;
}

static int
opt_hashpower(const char *val)
{
    unsigned hp;

    if (!settings_parse_uint(val, 0, UINT_MAX, &hp)) {
        return settings_bad_value("hashpower", val);
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
opt_automove(const char *val)
{
    int mode = 1;

    if (val != NULL && !settings_parse_int(val, 0, 2, &mode)) {
        fprintf(stderr, "slab_automove must be between 0 and 2\n");
        return -1;
    }
    settings.cache.slab_automove = mode;
    return 0;
}

static int
opt_no_automove(const char *val)
{
    settings.cache.slab_automove = 0;
    return val == NULL ? 0 : settings_bad_value("no_slab_automove", val);
}

static bool chunk_max_given;    /* -o slab_chunk_max was given */

/* -o slab_chunk_max=<KB>, 1 to 1024, with memcached's messages. */
static int
opt_chunk_max(const char *val)
{
    long kb;
    char *end;

    if (val == NULL) {
        fprintf(stderr, "Missing slab_chunk_max argument\n");
        return -1;
    }
    errno = 0;
    kb = strtol(val, &end, 10);
    if (end == val || (*end != '\0' && *end != ' ') || errno != 0 ||
        kb != (int)kb) {
        fprintf(stderr, "could not parse argument to slab_chunk_max\n");
        return -1;
    }
    if (kb <= 0) {
        fprintf(stderr, "slab_chunk_max must be >= 0\n");
        return -1;
    }
    if (kb > 1024) {
        fprintf(stderr, "slab_chunk_max must be specified in kilobytes.\n");
        return -1;
    }
    settings.cache.slab_chunk_max = (size_t)kb * 1024;
    chunk_max_given = true;
    return 0;
}

static int
opt_no_chunked(const char *val)
{
    settings.cache.slab_chunk_max = settings.cache.page_size;
    return val == NULL ? 0 : settings_bad_value("no_chunked_items", val);
}

/* -o read_buf_mem_limit=<MB>, kept in bytes as memcached shows it. */
static int
opt_read_buf_mem_limit(const char *val)
{
    unsigned mb;

    if (!settings_parse_uint(val, 0, UINT_MAX / MB, &mb)) {
        fprintf(stderr, "could not parse argument to read_buf_mem_limit\n");
        return -1;
    }
    settings.read_buf_mem_limit = mb * MB;
    return 0;
}

/* -e <file>: memory_file under memcached's restart rules. */
static int
opt_memory_file_e(const char *val)
{
    settings.memory_file = val;
    settings.cache.memory_file_restart = true;
    return 0;
}

/* -o ssl_min_version: memcached's 0-3, or the name it shows. */
static int
opt_ssl_min_version(const char *val)
{
    int v = settings_ssl_version(val);

    if (v < 0) {
        fprintf(stderr, "Invalid ssl_min_version. Use help to see valid "
                "options.\n");
        return -1;
    }
    settings.ssl_min_version = v;
    return 0;
}

static int
opt_hash_algorithm(const char *val)
{
    int alg = hash_by_name(val);

    if (val == NULL) {
        fprintf(stderr, "Missing hash_algorithm argument\n");
        return -1;
    }
    if (alg < 0) {
        fprintf(stderr, "Unknown hash_algorithm option (jenkins, murmur3, "
                "xxh3)\n");
        return -1;
    }
    settings.cache.hash_algorithm = (enum hash_algorithm)alg;
    return 0;
}

/* -o tail_repair_time=<s>: 10 or more (0, its default, is off). */
static int
opt_tail_repair(const char *val)
{
    if (val == NULL) {
        fprintf(stderr, "Missing numeric argument for tail_repair_time\n");
        return -1;
    }
    if (atoi(val) < 10) {
        fprintf(stderr, "Cannot set tail_repair_time to less than 10 "
                "seconds\n");
        return -1;
    }
    settings.cache.tail_repair_time = (unsigned)atoi(val);
    return 0;
}

/* -o sock_cookie_id=<n>: as memcached, a value it cannot read is 0. */
static int
opt_sock_cookie(const char *val)
{
    char *end;
    unsigned long v = val != NULL ? strtoul(val, &end, 10) : 0;

    settings.sock_cookie_id = val != NULL && *end == '\0' && v <= UINT_MAX
                              ? (unsigned)v : 0;
    return 0;
}

/* -o resp_obj_mem_limit: gone from memcached, accepted with its word. */
static int
opt_resp_obj_mem_limit(const char *val)
{
    (void)val;
    fprintf(stderr, "DEPRECATED: resp_obj_mem_limit no longer used. See "
            "read_buf_mem_limit,\n");
    return 0;
}

static int
opt_lru_maintainer(const char *val)
{
    settings.lru_maintainer = settings.cache.lru_segmented = true;
    return val == NULL ? 0 : settings_bad_value("lru_maintainer", val);
}

static int
opt_no_lru_maintainer(const char *val)
{
    settings.lru_maintainer = settings.cache.lru_segmented = false;
    return val == NULL ? 0 : settings_bad_value("no_lru_maintainer", val);
}

static int
opt_temporary_ttl(const char *val)
{
    settings.cache.temp_lru = true;
    if (!settings_parse_uint(val, 0, UINT_MAX,
                             &settings.cache.temporary_ttl)) {
        return settings_bad_value("temporary_ttl", val);
    }
    return 0;
}

static int
opt_no_modern(const char *val)
{
    struct cache_options *c = &settings.cache;

    if (!chunk_max_given) {
        c->slab_chunk_max = c->page_size;
    }
    c->hash_algorithm = HASH_JENKINS;
    c->slab_reassign = false;
    c->slab_automove = 0;
    settings.maxconns_fast = false;
    c->lru_segmented = false;
    c->lru_crawler = false;
    settings.lru_maintainer = false;
    return val == NULL ? 0 : settings_bad_value("no_modern", val);
}

static int opt_help(void);
static int opt_extended(const char *val);

static int
opt_version(void)
{
    printf("memcached-pm %s\n", MCPM_VERSION);
    return 1;
}

static int
opt_license(void)
{
    printf("memcached-pm: written from scratch; see the project's README "
           "for its license.\n");
    return 1;
}

/* ---- the table -------------------------------------------------------- */

enum kind {
    K_NONE, K_ON, K_OFF, K_ONOFF, K_COUNT, K_STR, K_NOOP, K_INT, K_UINT,
    K_KB, K_DOUBLE, K_FN, K_ACT
};

struct row {
    char         flag;
    const char  *lname;         /* "name=<value>" */
    const char  *oname;
    const char  *help;
    void        *target;
    enum kind    kind;
    double       lo, hi;
    const char  *msg;           /* a range error's message */
    int        (*fn)(const char *val);
    int        (*act)(void);
};

#define ROW_TARGET_D(type, field, dflt) &settings.field
#define ROW_TARGET_C(field) &settings.cache.field
#define ROW_TARGET_V(expr) NULL
#define P_NONE .kind = K_NONE
#define P_ON .kind = K_ON
#define P_OFF .kind = K_OFF
#define P_ONOFF .kind = K_ONOFF
#define P_COUNT .kind = K_COUNT
#define P_STR .kind = K_STR
#define P_NOOP .kind = K_NOOP
#define P_INT(l, h, m) .kind = K_INT, .lo = (l), .hi = (h), .msg = (m)
#define P_UINT(l, h, m) .kind = K_UINT, .lo = (l), .hi = (h), .msg = (m)
#define P_KB(l, h, m) .kind = K_KB, .lo = (l), .hi = (h), .msg = (m)
#define P_DOUBLE(l, h, m) .kind = K_DOUBLE, .lo = (l), .hi = (h), .msg = (m)
#define P_FN(f) .kind = K_FN, .fn = (f)
#define P_ACT(f) .kind = K_ACT, .act = (f)
#define ROW(s_, sh_, t_, f_, l_, o_, p_, h_) \
    { .flag = (f_), .lname = (l_), .oname = (o_), .help = (h_), \
      .target = ROW_TARGET_##t_, P_##p_ },

static const struct row rows[] = {
    SETTINGS_OPTIONS(ROW)
};
#define NROWS (sizeof(rows) / sizeof(rows[0]))

/* Each row's field has the type its parse stores: checked at compile
 * time, so a row can never write a double into an unsigned. */
struct opt_unchecked { int unused; };
#define CHECK_VAL_D(type, field, dflt) settings.field
#define CHECK_VAL_C(field) settings.cache.field
#define CHECK_VAL_V(expr) 0
#define T_NONE struct opt_unchecked
#define T_ON bool
#define T_OFF bool
#define T_ONOFF bool
#define T_COUNT int
#define T_STR const char *
#define T_NOOP struct opt_unchecked
#define T_INT(l, h, m) int
#define T_UINT(l, h, m) unsigned
#define T_KB(l, h, m) unsigned
#define T_DOUBLE(l, h, m) double
#define T_FN(f) struct opt_unchecked
#define T_ACT(f) struct opt_unchecked
#define ANY_NONE 1
#define ANY_ON 0
#define ANY_OFF 0
#define ANY_ONOFF 0
#define ANY_COUNT 0
#define ANY_STR 0
#define ANY_NOOP 1
#define ANY_INT(l, h, m) 0
#define ANY_UINT(l, h, m) 0
#define ANY_KB(l, h, m) 0
#define ANY_DOUBLE(l, h, m) 0
#define ANY_FN(f) 1
#define ANY_ACT(f) 1
#define CHECK_ROW(s_, sh_, t_, f_, l_, o_, p_, h_) \
    _Static_assert(_Generic(CHECK_VAL_##t_, T_##p_: 1, default: ANY_##p_), \
                   "option " #s_ " " #o_ ": field type and parse differ");
SETTINGS_OPTIONS(CHECK_ROW)

static bool
takes_value(const struct row *r)
{
    switch (r->kind) {
    case K_STR: case K_INT: case K_UINT: case K_KB: case K_DOUBLE:
    case K_FN:
        return true;
    default:
        return false;
    }
}

/* A value outside the row's range: its own message (%s is the name) or
 * the general one. */
static int
range_error(const struct row *r, const char *name, const char *val)
{
    if (r->msg == NULL) {
        return settings_bad_value(name, val);
    }
    fprintf(stderr, r->msg, name);
    fputc('\n', stderr);
    return -1;
}

/* Apply one row: `name` is how the user spelled it (for messages),
 * `on` what an ON/OFF/ONOFF row sets.  0, 1 (exit: -h) or -1. */
static int
apply(const struct row *r, const char *name, const char *val, bool on)
{
    double d;
    unsigned u;
    int i;

    switch (r->kind) {
    case K_ON: case K_OFF: case K_ONOFF:
        *(bool *)r->target = on;
        return 0;
    case K_COUNT:
        (*(int *)r->target)++;
        return 0;
    case K_STR:
        *(const char **)r->target = val;
        return 0;
    case K_INT:
        if (!settings_parse_int(val, (int)r->lo, (int)r->hi, &i)) {
            return range_error(r, name, val);
        }
        *(int *)r->target = i;
        return 0;
    case K_UINT: case K_KB:
        if (!settings_parse_uint(val, (unsigned)r->lo, (unsigned)r->hi, &u)) {
            return range_error(r, name, val);
        }
        *(unsigned *)r->target = r->kind == K_KB ? u * 1024 : u;
        return 0;
    case K_DOUBLE:
        if (!settings_parse_double(val, &d) || d < r->lo || d > r->hi) {
            return range_error(r, name, val);
        }
        *(double *)r->target = d;
        return 0;
    case K_FN:
        return r->fn(val);
    case K_ACT:
        return r->act();
    default:
        return 0;
    }
}

/* ---- -o --------------------------------------------------------------- */

/* The row -o `name` names, and what an on/off row sets. */
static const struct row *
find_sub(const char *name, bool *on)
{
    for (size_t i = 0; i < NROWS; i++) {
        const struct row *r = &rows[i];

        if (r->oname == NULL) {
            continue;
        }
        if (strcmp(name, r->oname) == 0) {
            *on = r->kind != K_OFF;
            return r;
        }
        if (r->kind == K_ONOFF && strncmp(name, "no_", 3) == 0 &&
            strcmp(name + 3, r->oname) == 0) {
            *on = false;
            return r;
        }
    }
    return NULL;
}

/* One -o item, "name" or "name=value"; *row and *value say which. */
static int
subopt_one(char *item, const struct row **row, char **value)
{
    char *val = strchr(item, '=');
    const struct row *r;
    bool on;

    if (val != NULL) {
        *val++ = '\0';
    }
    *row = r = find_sub(item, &on);
    *value = val;
    if (r == NULL) {
        fprintf(stderr, "Illegal suboption \"%s%s%s\"\n", item,
                val ? "=" : "", val ? val : "");
        return -1;
    }
    if (!takes_value(r) && r->kind != K_ACT && val != NULL) {
        fprintf(stderr, "Suboption \"%s\" takes no value\n", item);
        return -1;
    }
    if (r->kind == K_STR && (val == NULL || *val == '\0')) {
        return settings_bad_value(item, val);
    }
    return apply(r, item, val, on);
}

static bool
is_cpu_list(const struct row *r)
{
    return r != NULL && r->kind == K_FN &&
           (r->fn == placement_opt_worker_cpus ||
            r->fn == placement_opt_bg_cpus);
}

/* The list is cut up in place, in argv, as memcached does: -o values
 * (memory_file=...) keep pointing into it for the life of the process.
 * A CPU list has commas of its own (worker_cpus=0-3,8): an item that
 * starts with a digit after one is the rest of it, joined back. */
static int
opt_extended(const char *list)
{
    char *items = (char *)(uintptr_t)list, *save = NULL, *val = NULL;
    const struct row *r = NULL;

    for (char *it = strtok_r(items, ",", &save); it != NULL;
         it = strtok_r(NULL, ",", &save)) {
        if (is_cpu_list(r) && val != NULL && *it >= '0' && *it <= '9') {
            for (char *p = it - 1; p > val && (*p == '\0' || *p == ',');
                 p--) {
                *p = ',';
            }
            if (r->fn(val) != 0) {
                return -EX_USAGE;
            }
            continue;
        }
        int rc = subopt_one(it, &r, &val);

        if (rc != 0) {
            return rc;
        }
    }
    return 0;
}

/* ---- -h --------------------------------------------------------------- */

static void
usage_flag(const struct row *r)
{
    char left[64];

    if (r->lname != NULL) {
        snprintf(left, sizeof(left), "-%c, --%s", r->flag, r->lname);
    } else {
        snprintf(left, sizeof(left), "-%c <value>", r->flag);
    }
    usage_line(left, 26, r->help);
}

static int
opt_help(void)
{
    printf("memcached-pm %s\n", MCPM_VERSION);
    for (size_t i = 0; i < NROWS; i++) {
        if (rows[i].flag != 0 && rows[i].flag != 'o' &&
            rows[i].help != NULL) {
            usage_flag(&rows[i]);
        }
    }
    usage_line("--config-file=<file>", 26,
               "options from <file> first, laid out as /etc/memcached.conf "
               "(one or more to a line, # comments)");
    for (size_t i = 0; i < NROWS; i++) {
        if (rows[i].flag == 'o') {
            usage_flag(&rows[i]);
        }
    }
    for (size_t i = 0; i < NROWS; i++) {
        const struct row *r = &rows[i];

        char left[64];

        if (r->oname == NULL) {
            continue;
        }
        snprintf(left, sizeof(left), "   %s%s",
                 r->kind == K_ONOFF ? "[no_]" : "", r->oname);
        usage_line(left, 30, r->help);
    }
    return 1;
}

/* ---- the command line ------------------------------------------------- */

/* getopt's short option string, from the rows with a flag. */
static void
short_options(char *out, size_t len)
{
    size_t n = 0;

    out[n++] = ':';
    for (size_t i = 0; i < NROWS && n + 3 < len; i++) {
        if (rows[i].flag != 0) {
            out[n++] = rows[i].flag;
            if (takes_value(&rows[i])) {
                out[n++] = ':';
            }
        }
    }
    out[n] = '\0';
}

/* getopt_long's table, from the rows with a long name ("name=<value>"
 * gives "name"). */
static struct option *
long_options(void)
{
    static char names[NROWS][32];
    static struct option opts[NROWS + 2];
    size_t n = 0;

    for (size_t i = 0; i < NROWS; i++) {
        const struct row *r = &rows[i];

        if (r->flag == 0 || r->lname == NULL) {
            continue;
        }
        snprintf(names[n], sizeof(names[n]), "%.*s",
                 (int)strcspn(r->lname, "="), r->lname);
        opts[n].name = names[n];
        opts[n].has_arg = takes_value(r) ? required_argument
                        : r->kind == K_COUNT ? optional_argument
                        : no_argument;
        opts[n].flag = NULL;
        opts[n].val = r->flag;
        n++;
    }
    opts[n++] = (struct option){ "config-file", required_argument, NULL,
                                 OPT_CONFIG_FILE };
    memset(&opts[n], 0, sizeof(opts[n]));
    return opts;
}

static const struct row *
find_flag(int ch)
{
    for (size_t i = 0; i < NROWS; i++) {
        if (rows[i].flag == ch) {
            return &rows[i];
        }
    }
    return NULL;
}

/* The --config-file value cmdline_parse() read (NULL while it reads the
 * file): getopt's must be this very one, not a second, an abbreviated
 * one it would skip unread, or one inside the file. */
static const char *conf_read;

/* One command line's options (or an options file's line), applied in
 * order; 0 or the first refusal. */
static int
parse_words(int argc, char **argv)
{
    struct option *longs = long_options();
    char shorts[2 * NROWS + 2];
    int ch;

    short_options(shorts, sizeof(shorts));
    opterr = 0;
    optind = 0;                 /* GNU: start over, argv[0] skipped */
    while ((ch = getopt_long(argc, argv, shorts, longs, NULL)) != -1) {
        const struct row *r = find_flag(ch);
        char name[3] = { '-', (char)ch, '\0' };
        int rc;

        if (ch == OPT_CONFIG_FILE) {
            if (optarg != conf_read) {
                fprintf(stderr, "--config-file: once, in full, on the "
                        "command line\n");
                return -1;
            }
            continue;           /* read first (cmdline_parse()) */
        }
        if (ch == '?' || ch == ':' || r == NULL) {
            fprintf(stderr, "%s option: %s\n",
                    ch == ':' ? "Missing argument for" : "Illegal",
                    argv[optind - 1]);
            return -1;
        }
        rc = apply(r, name, optarg, r->kind != K_OFF);
        if (rc != 0) {
            return rc;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "Unexpected argument: %s\n", argv[optind]);
        return -1;
    }
    return 0;
}

int
cmdline_parse(int argc, char **argv)
{
    const char *conf = conffile_path(argc, argv);
    int rc;

    settings_defaults();
    conf_read = NULL;
    if (conf != NULL &&
        (rc = conffile_read(conf, argv[0], parse_words)) != 0) {
        return rc;
    }
    conf_read = conf;
    if ((rc = parse_words(argc, argv)) != 0) {
        return rc;
    }
    if (settings.cache.item_size_max > settings.cache.page_size &&
        !chunk_max_given) {
        settings.cache.slab_chunk_max = settings.cache.page_size / 2;
    }
    /* -U alone moves TCP to the UDP port too, as in memcached. */
    if (settings.udpport != 0 && !port_given) {
        settings.port = settings.udpport;
    }
    return settings_check();
}
