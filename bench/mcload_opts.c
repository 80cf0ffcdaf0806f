/*
 * mcload_opts.c: argv into struct opts, the one global, read-only once
 * the workers start.
 */
#include "config.h"

#include "bench/mcload_opts.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

/* The options, read-only once main() has parsed them. */
struct opts o;

const char *const proto_names[] = { "text", "meta", "binary" };

/* -------------------------------------------------------------- options */

static void
usage(FILE *f)
{
    fprintf(f,
        "usage: mcload [options]\n"
        "  --server HOST:PORT   loopback only (default 127.0.0.1:11211)\n"
        "  -c, --conns N        connections (default 50)\n"
        "  -d, --depth N        requests in flight per connection (1)\n"
        "  -t, --threads N      threads, each with its own event base (1)\n"
        "  --get-ratio F        share of requests that are gets (0.9)\n"
        "  --multiget N         keys per get request (1)\n"
        "  --keys N             key-space size (100000)\n"
        "  --dist D             uniform | zipf | seq (uniform)\n"
        "  --zipf-s F           zipf exponent (0.99)\n"
        "  --key-prefix S       key prefix (\"key:\")\n"
        "  --value-size N|A-B   value bytes, fixed or per-key range (32)\n"
        "  --duration SEC       stop after this long (10; 0 = no limit)\n"
        "  --rate N             requests a second in the run, at most (0: as\n"
        "                       fast as replies come back)\n"
        "  --requests N         stop after N requests (10000000; 0 = none)\n"
        "  --proto P            text | meta | binary (text)\n"
        "  --preload            set every key once first, pipelined\n"
        "  --udp                requests over UDP to the server's -U port,\n"
        "                       each in a datagram (text or binary)\n"
        "  --tls                TLS on every connection (any certificate)\n"
        "  --no-verify          check value sizes only, not value bytes\n"
        "  --cpu LIST           pin threads, round robin (e.g. 0 or 0,2-3)\n"
        "  --seed N             random seed (1)\n"
        "  --json               print one JSON object\n"
        "SIGINT/SIGTERM end the run early; the report is still printed.\n"
        "Exit status: 0 ok, 1 bad usage or setup, 2 the run saw errors.\n");
}

static int
parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
    char *end;
    unsigned long long v;

    if (*s == '-' || *s == '\0') {
        return -1;
    }
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < min || v > max) {
        return -1;
    }
    *out = v;
    return 0;
}

static int
parse_int(const char *s, int min, int max, int *out)
{
    uint64_t v;

    if (parse_u64(s, (uint64_t)min, (uint64_t)max, &v) < 0) {
        return -1;
    }
    *out = (int)v;
    return 0;
}

static int
parse_double(const char *s, double min, double max, double *out)
{
    char *end;
    double v;

    errno = 0;
    v = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !(v >= min && v <= max)) {
        return -1;
    }
    *out = v;
    return 0;
}

static int
parse_vsize(const char *s)
{
    char tmp[64];
    char *dash;
    uint64_t lo;
    uint64_t hi;

    if (strlen(s) >= sizeof(tmp)) {
        return -1;
    }
    strcpy(tmp, s);
    dash = strchr(tmp, '-');
    if (dash != NULL) {
        *dash = '\0';
    }
    if (parse_u64(tmp, 1, 64u << 20, &lo) < 0) {
        return -1;
    }
    hi = lo;
    if (dash != NULL && parse_u64(dash + 1, lo, 64u << 20, &hi) < 0) {
        return -1;
    }
    o.vmin = (uint32_t)lo;
    o.vmax = (uint32_t)hi;
    return 0;
}

static int
parse_cpus(const char *s)
{
    char *copy = strdup(s);
    char *save = NULL;
    int rc = -1;

    if (copy == NULL) {
        return -1;
    }
    o.ncpus = 0;
    for (char *t = strtok_r(copy, ",", &save); t != NULL;
         t = strtok_r(NULL, ",", &save)) {
        int a;
        int b;
        char *dash = strchr(t, '-');

        if (dash != NULL) {
            *dash = '\0';
        }
        if (parse_int(t, 0, CPU_SETSIZE - 1, &a) < 0 ||
            parse_int(dash ? dash + 1 : t, a, CPU_SETSIZE - 1, &b) < 0) {
            goto out;
        }
        for (int cpu = a; cpu <= b && o.ncpus < MAX_CPUS; cpu++) {
            o.cpus[o.ncpus++] = cpu;
        }
    }
    rc = o.ncpus > 0 ? 0 : -1;
out:
    free(copy);
    return rc;
}

/* Only loopback: this tool must never be pointed at someone else. */
static int
parse_server(const char *s)
{
    char host[64];
    const char *colon = strrchr(s, ':');
    int port;

    if (colon == NULL || (size_t)(colon - s) >= sizeof(host) ||
        parse_int(colon + 1, 1, 65535, &port) < 0) {
        return -1;
    }
    memcpy(host, s, (size_t)(colon - s));
    host[colon - s] = '\0';
    if (strcmp(host, "localhost") == 0) {
        strcpy(host, "127.0.0.1");
    }
    memset(&o.addr, 0, sizeof(o.addr));
    o.addr.sin_family = AF_INET;
    o.addr.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &o.addr.sin_addr) != 1) {
        return -1;
    }
    if ((ntohl(o.addr.sin_addr.s_addr) >> 24) != 127) {
        fprintf(stderr, "mcload: %s is not a loopback address\n", host);
        return -1;
    }
    o.server = s;
    return 0;
}

enum {
    OPT_SERVER = 256, OPT_GET_RATIO, OPT_MULTIGET, OPT_KEYS, OPT_DIST,
    OPT_ZIPF_S, OPT_PREFIX, OPT_VSIZE, OPT_DURATION, OPT_RATE, OPT_REQUESTS,
    OPT_PROTO, OPT_PRELOAD, OPT_NO_VERIFY, OPT_CPU, OPT_SEED, OPT_JSON,
    OPT_UDP, OPT_TLS, OPT_HELP
};

static const struct option long_opts[] = {
    { "server", required_argument, NULL, OPT_SERVER },
    { "conns", required_argument, NULL, 'c' },
    { "depth", required_argument, NULL, 'd' },
    { "threads", required_argument, NULL, 't' },
    { "get-ratio", required_argument, NULL, OPT_GET_RATIO },
    { "multiget", required_argument, NULL, OPT_MULTIGET },
    { "keys", required_argument, NULL, OPT_KEYS },
    { "dist", required_argument, NULL, OPT_DIST },
    { "zipf-s", required_argument, NULL, OPT_ZIPF_S },
    { "key-prefix", required_argument, NULL, OPT_PREFIX },
    { "value-size", required_argument, NULL, OPT_VSIZE },
    { "duration", required_argument, NULL, OPT_DURATION },
    { "rate", required_argument, NULL, OPT_RATE },
    { "requests", required_argument, NULL, OPT_REQUESTS },
    { "proto", required_argument, NULL, OPT_PROTO },
    { "preload", no_argument, NULL, OPT_PRELOAD },
    { "no-verify", no_argument, NULL, OPT_NO_VERIFY },
    { "cpu", required_argument, NULL, OPT_CPU },
    { "seed", required_argument, NULL, OPT_SEED },
    { "json", no_argument, NULL, OPT_JSON },
    { "udp", no_argument, NULL, OPT_UDP },
    { "tls", no_argument, NULL, OPT_TLS },
    { "help", no_argument, NULL, OPT_HELP },
    { NULL, 0, NULL, 0 }
};

static int
parse_enum(const char *s, const char *a, const char *b, const char *c)
{
    if (strcmp(s, a) == 0) {
        return 0;
    }
    if (strcmp(s, b) == 0) {
        return 1;
    }
    if (c != NULL && strcmp(s, c) == 0) {
        return 2;
    }
    return -1;
}

/* One option; returns -1 on a bad value, 1 for --help. */
static int
parse_one(int ch, const char *arg)
{
    int v;

    switch (ch) {
    case OPT_SERVER: return parse_server(arg);
    case 'c': return parse_int(arg, 1, 100000, &o.conns);
    case 'd': return parse_int(arg, 1, MAX_DEPTH, &o.depth);
    case 't': return parse_int(arg, 1, 1024, &o.threads);
    case OPT_GET_RATIO: return parse_double(arg, 0, 1, &o.get_ratio);
    case OPT_MULTIGET: return parse_int(arg, 1, MAX_MULTIGET, &o.multiget);
    case OPT_KEYS: return parse_u64(arg, 1, UINT64_MAX / 2, &o.keys);
    case OPT_ZIPF_S: return parse_double(arg, 0.01, 10, &o.zipf_s);
    case OPT_VSIZE: return parse_vsize(arg);
    case OPT_DURATION: return parse_double(arg, 0, 1e6, &o.duration);
    case OPT_RATE: return parse_double(arg, 0, 1e9, &o.rate);
    case OPT_REQUESTS: return parse_u64(arg, 0, UINT64_MAX, &o.requests);
    case OPT_CPU: return parse_cpus(arg);
    case OPT_SEED: return parse_u64(arg, 0, UINT64_MAX, &o.seed);
    case OPT_PRELOAD: o.preload = true; return 0;
    case OPT_NO_VERIFY: o.verify = false; return 0;
    case OPT_JSON: o.json = true; return 0;
    case OPT_UDP: o.udp = true; return 0;
    case OPT_TLS: o.tls = true; return 0;
    case OPT_HELP: return 1;
    case OPT_PREFIX:
        o.prefix = arg;
        return strlen(arg) <= 200 && strpbrk(arg, " \r\n") == NULL ? 0 : -1;
    case OPT_DIST:
        v = parse_enum(arg, "uniform", "zipf", "seq");
        o.dist = (enum dist)v;
        return v < 0 ? -1 : 0;
    case OPT_PROTO:
        v = parse_enum(arg, "text", "meta", "binary");
        o.proto = (enum proto)v;
        return v < 0 ? -1 : 0;
    default: return -1;
    }
}

static void
opts_defaults(void)
{
    o.conns = 50;
    o.depth = 1;
    o.threads = 1;
    o.get_ratio = 0.9;
    o.multiget = 1;
    o.keys = 100000;
    o.dist = DIST_UNIFORM;
    o.zipf_s = 0.99;
    o.prefix = "key:";
    o.vmin = o.vmax = 32;
    o.duration = 10;
    o.requests = 10000000;
    o.proto = PROTO_TEXT;
    o.verify = true;
    o.seed = 1;
}

int
opts_parse(int argc, char **argv)
{
    int ch;

    opts_defaults();
    if (parse_server("127.0.0.1:11211") < 0) {
        return -1;
    }
    while ((ch = getopt_long(argc, argv, "c:d:t:h", long_opts, NULL)) != -1) {
        int rc = ch == 'h' ? 1 : parse_one(ch, optarg);

        if (rc == 1) {
            usage(stdout);
            exit(0);
        }
        if (rc < 0) {
            if (ch != '?') {
                fprintf(stderr, "mcload: bad value '%s'\n",
                        optarg ? optarg : "");
            }
            return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "mcload: unexpected argument '%s'\n", argv[optind]);
        return -1;
    }
    if (o.duration <= 0 && o.requests == 0) {
        fprintf(stderr, "mcload: --duration 0 needs --requests N > 0\n");
        return -1;
    }
    if (o.threads > o.conns) {
        o.threads = o.conns;
    }
    if (o.tls && o.udp) {
        fprintf(stderr, "mcload: --tls is for TCP, not --udp\n");
        return -1;
    }
    return 0;
}
