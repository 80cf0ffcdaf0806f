/*
 * restart.c: -e's <file>.meta (restart.h).
 *
 * The format is memcached's: a tag line "T<name>", then "K<key> <value>"
 * lines.  The keys compared are the settings memcached compares; a
 * value that differs is logged with memcached's line.
 */
#include "config.h"

#include "memcached-pm/life/restart.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "memcached-pm/base/settings.h"
#include "memcached-pm/migrate/convert.h"
#include "storage/base/clock.h"
#include "storage/cache/cache.h"
#include "storage/cache/cache_open.h"

#define META_TAG    "main"
#define LINE_MAX_   512

/* The settings a reuse needs, by memcached's keys, as text. */
struct meta_key {
    const char *key;
    char        value[64];
};

enum { NKEYS = 8 };

static void
meta_keys(struct meta_key k[NKEYS])
{
    const struct cache_options *c = &settings.cache;
    int i = 0;

#define KEY(name, ...) do {                                                 \
        k[i].key = (name);                                                  \
        snprintf(k[i].value, sizeof(k[i].value), __VA_ARGS__);              \
        i++;                                                                \
    } while (0)
    if (c->slab_sizes != NULL) {
        KEY("slab_config", "%s", c->slab_sizes);
    } else {
        KEY("slab_config", "%.2f", c->factor);
    }
    KEY("maxbytes", "%zu", c->mem_limit);
    KEY("chunk_size", "%u", c->chunk_min);
    KEY("item_size_max", "%zu", c->item_size_max);
    KEY("slab_chunk_size_max", "%zu", c->slab_chunk_max);
    KEY("slab_page_size", "%zu", c->page_size);
    KEY("use_cas", "%s", c->use_cas ? "true" : "false");
    KEY("slab_reassign", "%s", c->slab_reassign ? "true" : "false");
#undef KEY
}

static char *
meta_path(void)
{
    char *p;

    return asprintf(&p, "%s.meta", settings.memory_file) < 0 ? NULL : p;
}

/* One "K<key> <value>" line against the settings: 0 if it matches or is
 * not one compared, 1 when it differs (said), -1 if it is no such line. */
static int
check_line(char *line, struct meta_key k[NKEYS], unsigned *seen)
{
    char *sp;

    line[strcspn(line, "\n")] = '\0';
    if (line[0] != 'K' || (sp = strchr(line + 1, ' ')) == NULL ||
        sp == line + 1) {
        return -1;
    }
    *sp = '\0';
    for (int i = 0; i < NKEYS; i++) {
        if (strcmp(line + 1, k[i].key) != 0) {
            continue;
        }
        *seen |= 1u << i;
        if (strcmp(sp + 1, k[i].value) != 0) {
            fprintf(stderr, "[restart] restart incompatible due to setting "
                    "for [%s] [old value: %s]\n", k[i].key, sp + 1);
            return 1;
        }
    }
    return 0;
}

/* 0: the metadata allows a reuse; else the reason was logged. */
static int
read_meta(FILE *f)
{
    struct meta_key k[NKEYS];
    char line[LINE_MAX_];
    unsigned seen = 0;

    meta_keys(k);
    if (fgets(line, sizeof(line), f) == NULL || line[0] != 'T' ||
        line[1] == '\n' || line[1] == '\0') {
        fprintf(stderr, "[restart] corrupt metadata file\n");
        return -1;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        int rc = line[0] == 'T' ? 0 : check_line(line, k, &seen);

        if (rc < 0) {
            fprintf(stderr, "[restart] invalid metadata line:\n\n%s\n\n",
                    line);
            return -1;
        }
        if (rc > 0) {
            return -1;
        }
    }
    if (seen != (1u << NKEYS) - 1) {
        fprintf(stderr, "[restart] missing some metadata lines\n");
        return -1;
    }
    return 0;
}

void
restart_meta_check(void)
{
    char *path;
    FILE *f;
    int rc;

    if (!settings.cache.memory_file_restart) {
        return;
    }
    settings.cache.memory_file_fresh = false;   /* a node that opens its
                                                   file again reads anew */
    switch (convert_memcached_file()) {
    case CONVERT_REFUSED:
        settings.cache.memory_file_fresh = true;
        return;
    case CONVERT_DONE:
        return;                 /* the .meta is written once it opens */
    case CONVERT_NONE:
        break;
    }
    if ((path = meta_path()) == NULL) {
        settings.cache.memory_file_fresh = true;
        return;
    }
    f = fopen(path, "r");
    if (f == NULL && cache_file_may_lack_meta(settings.memory_file)) {
        /* an upgrade from a build that wrote the file alone */
        fprintf(stderr, "[restart] no metadata save file; the memory file's "
                "layout is older than them: its items are kept\n");
        free(path);
        return;
    }
    if (f == NULL) {
        fprintf(stderr, "[restart] no metadata save file, starting with a "
                "clean cache\n");
        settings.cache.memory_file_fresh = true;
        free(path);
        return;
    }
    rc = read_meta(f);
    fclose(f);
    if (rc != 0) {
        fprintf(stderr, "[restart] failed to validate metadata, starting "
                "with a clean cache\n");
        settings.cache.memory_file_fresh = true;
    }
    free(path);
}

int
restart_meta_write(bool stopping)
{
    struct meta_key k[NKEYS];
    char *path, *tmp = NULL;
    FILE *f = NULL;
    int rc = -1;

    if (!settings.cache.memory_file_restart) {
        return 0;
    }
    /* Written aside and renamed: a crash mid-write leaves the old one. */
    if ((path = meta_path()) == NULL || asprintf(&tmp, "%s.tmp", path) < 0 ||
        (f = fopen(tmp, "w")) == NULL) {
        goto out;
    }
    meta_keys(k);
    fprintf(f, "T%s\n", META_TAG);
    for (int i = 0; i < NKEYS; i++) {
        fprintf(f, "K%s %s\n", k[i].key, k[i].value);
    }
    if (stopping) {
        struct timeval tv;

        gettimeofday(&tv, NULL);
        fprintf(f, "Kcurrent_time %u\n", (unsigned)clock_now());
        fprintf(f, "Kprocess_started %lld\n",
                (long long)clock_process_started());
        fprintf(f, "Kstop_time %lld\n", (long long)tv.tv_sec);
    }
    if (fflush(f) != 0 || fsync(fileno(f)) != 0) {
        goto out;
    }
    if (fclose(f) != 0) {
        f = NULL;
        goto out;
    }
    f = NULL;
    if (rename(tmp, path) == 0) {
        rc = 0;
    }
out:
    if (rc != 0) {
        fprintf(stderr, "[restart] failed to write metadata file %s: %s\n",
                path ? path : settings.memory_file, strerror(errno));
        if (f != NULL) {
            fclose(f);
        }
        if (tmp != NULL) {
            unlink(tmp);
        }
    }
    free(tmp);
    free(path);
    return rc;
}
