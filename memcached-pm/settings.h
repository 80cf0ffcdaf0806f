/*
 * settings.h: the server's configuration, one of its two globals.
 *
 * Filled once from argv by settings_parse() before any thread starts; after
 * that only the admin commands (verbosity, lru tune, slabs automove,
 * lru_crawler sleep, cache_memlimit, stats detail) change a few fields, and
 * readers in other threads take what they see.  storage/ receives
 * &settings.cache and reads its runtime fields the same way.
 */
#ifndef MCPM_SETTINGS_H
#define MCPM_SETTINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/cache.h"

#define MCPM_VERSION "1.6.45-pm-" PACKAGE_VERSION

struct settings {
    /* network */
    int         port;               /* -p, 0: no TCP */
    int         udpport;            /* -U, only 0 is supported */
    char       *inter;              /* -l, comma list; NULL: 127.0.0.1 */
    char       *socketpath;         /* -s */
    int         access;             /* -a, octal umask of the socket */
    int         backlog;            /* -b */
    int         maxconns;           /* -c */
    bool        maxconns_fast;
    int         reqs_per_event;     /* -R */
    const char *binding_protocol;   /* -B: "auto-negotiate" or "ascii" */

    /* process */
    bool        daemonize;          /* -d */
    char       *pidfile;            /* -P */
    char       *username;           /* -u */
    int         verbose;            /* -v, runtime */
    bool        lock_memory;        /* -k */
    bool        coredumps;          /* -r */
    int         num_threads;        /* -t */

    /* commands */
    bool        shutdown_command;   /* -A */
    bool        flush_enabled;      /* not -F */
    bool        dump_enabled;       /* not -X */
    bool        watch_enabled;      /* not -W */
    char        prefix_delimiter;   /* -D */
    bool        detail_enabled;     /* runtime: stats detail on|off */
    unsigned    idle_timeout;       /* seconds, 0 off */
    bool        lru_maintainer;     /* the maintainer thread runs */
    unsigned    read_buf_mem_limit; /* MB, 0 unlimited */
    unsigned    prefetch_batch;     /* keys walked side by side, 0 off */
    unsigned    hashpower_init;     /* as given, 0 = default */
    const char *hash_algorithm;
    const char *memory_file;        /* -e or -o memory_file: PMEM tier */
    unsigned    memory_file_mb;     /* -o memory_file_size, 0: as -m */
    const char *tier_policy;        /* -o tier_policy: "dram", "pmem" */
    unsigned    watcher_logbuf_size;
    unsigned    worker_logbuf_size;

    /* storage/ options, handed to cache_init() */
    struct cache_options cache;
};

extern struct settings settings;

/*
 * Fill `settings` from the command line.  Returns 0 to run, 1 when an
 * option asked for output and a clean exit (-h, -V, -i), and -1 after
 * printing a message on stderr for an unknown option or a bad value: the
 * caller exits with status 1 then, never falling back to a default.
 */
int settings_parse(int argc, char **argv);

#endif
