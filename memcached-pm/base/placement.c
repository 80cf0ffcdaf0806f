/*
 * placement.c: CPU and NUMA placement options (placement.h).
 */
#include "memcached-pm/base/placement.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>

#include "storage/base/affinity.h"

#define NODE_FILE -2            /* numa_node=file: the memory file's node */

static struct {
    struct cpu_list workers, bg;
    char workers_shown[256], bg_shown[256];
    int node;                   /* -1: not bound */
    bool node_given;
    int file_node;              /* the memory file's device, -1: unknown */
} pl = { .node = -1, .file_node = -1 };

static int
cpus_opt(const char *name, const char *val, struct cpu_list *l, char *shown,
         size_t len)
{
    char err[512];

    if (cpu_list_parse(val, l, err, sizeof(err)) != 0) {
        fprintf(stderr, "%s: %s\n", name, err);
        return -EX_USAGE;
    }
    cpu_list_format(l, shown, len);
    return 0;
}

int
placement_opt_worker_cpus(const char *val)
{
    return cpus_opt("worker_cpus", val, &pl.workers, pl.workers_shown,
                    sizeof(pl.workers_shown));
}

int
placement_opt_bg_cpus(const char *val)
{
    return cpus_opt("bg_cpus", val, &pl.bg, pl.bg_shown,
                    sizeof(pl.bg_shown));
}

int
placement_opt_numa_node(const char *val)
{
    char *end;
    long n;

    pl.node_given = true;
    if (val != NULL && strcmp(val, "file") == 0) {
        pl.node = NODE_FILE;
        return 0;
    }
    errno = 0;
    n = val != NULL ? strtol(val, &end, 10) : -1;
    if (val == NULL || *val == '\0' || *end != '\0' || errno != 0 || n < 0 ||
        n >= AFFINITY_MAX_CPUS) {
        fprintf(stderr, "numa_node: \"%s\" is not a node number or "
                "\"file\"\n", val ? val : "");
        return -EX_USAGE;
    }
    if (!affinity_node_exists((int)n)) {
        fprintf(stderr, "numa_node: node %ld is not present (this machine "
                "has %u NUMA node%s)\n", n, affinity_node_count(),
                affinity_node_count() == 1 ? "" : "s");
        return -EX_USAGE;
    }
    pl.node = (int)n;
    return 0;
}

const char *
placement_worker_cpus(void)
{
    return pl.workers.n ? pl.workers_shown : "unpinned";
}

const char *
placement_bg_cpus(void)
{
    return pl.bg.n ? pl.bg_shown : "unpinned";
}

int
placement_numa_node(void)
{
    return pl.node;
}

int
placement_memory_file_node(void)
{
    return pl.file_node;
}

/* The node of the device that holds the memory file (or, before the file
 * exists, its directory). */
static int
file_node(const char *file)
{
    char dir[PATH_MAX];
    int node;

    if (file == NULL) {
        return -1;
    }
    node = affinity_path_node(file);
    if (node < 0 && strlen(file) < sizeof(dir)) {
        strcpy(dir, file);
        node = affinity_path_node(dirname(dir));
    }
    return node;
}

/* A role without a list of its own runs on the node's CPUs. */
static void
node_cpus(struct cpu_list *l, char *shown, size_t len)
{
    if (l->n == 0 && affinity_node_cpus(pl.node, l) == 0) {
        cpu_list_format(l, shown, len);
    }
}

static int
bind_node(void)
{
    if (pl.node == NODE_FILE) {
        pl.node = pl.file_node;
        if (pl.node < 0) {
            fprintf(stderr, "numa_node=file: the machine reports no NUMA "
                    "node for the memory file; memory is not bound\n");
            return 0;
        }
    }
    if (affinity_node_count() == 1) {
        fprintf(stderr, "numa_node=%d: this machine has one NUMA node; "
                "memory and threads stay on it\n", pl.node);
    } else if (pl.file_node >= 0 && pl.file_node != pl.node) {
        fprintf(stderr, "numa_node=%d: the memory file's device is on node "
                "%d; its reads and flushes cross nodes\n", pl.node,
                pl.file_node);
    }
    node_cpus(&pl.workers, pl.workers_shown, sizeof(pl.workers_shown));
    node_cpus(&pl.bg, pl.bg_shown, sizeof(pl.bg_shown));
    if (affinity_bind_node(pl.node) != 0) {
        fprintf(stderr, "numa_node=%d: cannot bind memory: %s\n", pl.node,
                strerror(errno));
        return -1;
    }
    return 0;
}

int
placement_start(const char *memory_file)
{
    pl.file_node = file_node(memory_file);
    if (pl.node_given && bind_node() != 0) {
        return -1;
    }
    affinity_set(&pl.workers, &pl.bg);
    if (affinity_apply_self(AFFINITY_RECOVERY) != 0) {
        fprintf(stderr, "cannot pin threads: %s\n", strerror(errno));
        return -1;
    }
    return 0;
}

void
placement_serving(void)
{
    affinity_apply_self(AFFINITY_BG);
}
