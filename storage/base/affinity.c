/*
 * affinity.c: CPU lists, thread pinning and NUMA memory binding
 * (affinity.h).  Linux only: sched and pthread affinity calls, the
 * set_mempolicy system call and /sys.
 */
#include "storage/base/affinity.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <linux/mempolicy.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define NODE_DIR "/sys/devices/system/node"

static struct {
    struct cpu_list workers;
    struct cpu_list bg;
    struct cpu_list both;       /* recovery: workers then bg, merged */
    cpu_set_t       all;        /* where the process could run before */
} aff;

/* ---- lists ------------------------------------------------------------- */

static void
list_from_set(const cpu_set_t *set, struct cpu_list *out)
{
    out->n = 0;
    for (unsigned c = 0; c < AFFINITY_MAX_CPUS && c < CPU_SETSIZE; c++) {
        if (CPU_ISSET(c, set)) {
            out->cpu[out->n++] = (unsigned short)c;
        }
    }
}

static void
set_from_list(const struct cpu_list *l, cpu_set_t *set)
{
    CPU_ZERO(set);
    for (unsigned i = 0; i < l->n; i++) {
        CPU_SET(l->cpu[i], set);
    }
}

void
cpu_list_allowed(struct cpu_list *out)
{
    cpu_set_t set;

    if (sched_getaffinity(0, sizeof(set), &set) != 0) {
        CPU_ZERO(&set);
    }
    list_from_set(&set, out);
}

/* One decimal CPU number at *p, advanced past it.  false if none, or too
 * large. */
static bool
number(const char **p, unsigned *out)
{
    unsigned long v = 0;
    const char *s = *p;

    if (!isdigit((unsigned char)*s)) {
        return false;
    }
    while (isdigit((unsigned char)*s)) {
        v = v * 10 + (unsigned long)(*s++ - '0');
        if (v >= AFFINITY_MAX_CPUS) {
            return false;
        }
    }
    *p = s;
    *out = (unsigned)v;
    return true;
}

int
cpu_list_parse(const char *s, struct cpu_list *out, char *err, size_t errlen)
{
    cpu_set_t want, allowed;
    const char *p = s;

    CPU_ZERO(&want);
    if (s == NULL || *s == '\0') {
        snprintf(err, errlen, "empty CPU list");
        return -1;
    }
    for (;;) {
        unsigned lo, hi;

        if (!number(&p, &lo)) {
            snprintf(err, errlen, "malformed CPU list \"%s\"", s);
            return -1;
        }
        hi = lo;
        if (*p == '-') {
            p++;
            if (!number(&p, &hi) || hi < lo) {
                snprintf(err, errlen, "malformed CPU list \"%s\"", s);
                return -1;
            }
        }
        for (unsigned c = lo; c <= hi; c++) {
            CPU_SET(c, &want);
        }
        if (*p == '\0') {
            break;
        }
        if (*p++ != ',') {
            snprintf(err, errlen, "malformed CPU list \"%s\"", s);
            return -1;
        }
    }
    if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) {
        snprintf(err, errlen, "cannot read this process's CPUs: %s",
                 strerror(errno));
        return -1;
    }
    for (unsigned c = 0; c < AFFINITY_MAX_CPUS; c++) {
        if (CPU_ISSET(c, &want) && !CPU_ISSET(c, &allowed)) {
            struct cpu_list a;
            char have[256];

            list_from_set(&allowed, &a);
            cpu_list_format(&a, have, sizeof(have));
            snprintf(err, errlen, "CPU %u is not present (this process may "
                     "run on %s)", c, have);
            return -1;
        }
    }
    list_from_set(&want, out);
    return 0;
}

void
cpu_list_format(const struct cpu_list *l, char *buf, size_t len)
{
    size_t at = 0;

    if (len == 0) {
        return;
    }
    buf[0] = '\0';
    for (unsigned i = 0; i < l->n && at < len; ) {
        unsigned j = i;
        int w;

        while (j + 1 < l->n && l->cpu[j + 1] == l->cpu[j] + 1) {
            j++;
        }
        w = j == i ? snprintf(buf + at, len - at, "%s%u", at ? "," : "",
                              l->cpu[i])
                   : snprintf(buf + at, len - at, "%s%u-%u", at ? "," : "",
                              l->cpu[i], l->cpu[j]);
        if (w < 0) {
            return;
        }
        at += (size_t)w;
        i = j + 1;
    }
}

/* ---- threads ----------------------------------------------------------- */

void
affinity_set(const struct cpu_list *workers, const struct cpu_list *bg)
{
    cpu_set_t both;

    memset(&aff, 0, sizeof(aff));
    if (sched_getaffinity(0, sizeof(aff.all), &aff.all) != 0) {
        CPU_ZERO(&aff.all);
    }
    if (workers != NULL) {
        aff.workers = *workers;
    }
    if (bg != NULL) {
        aff.bg = *bg;
    }
    set_from_list(&aff.workers, &both);
    for (unsigned i = 0; i < aff.bg.n; i++) {
        CPU_SET(aff.bg.cpu[i], &both);
    }
    list_from_set(&both, &aff.both);
}

static const struct cpu_list *
list_of(enum affinity_role role)
{
    switch (role) {
    case AFFINITY_WORKER:
        return &aff.workers;
    case AFFINITY_BG:
        return &aff.bg;
    default:
        return &aff.both;
    }
}

/* The CPUs of a role's i-th thread.  A role without a list while another
 * has one runs where the process could before: it must not inherit the
 * list of the thread that started it.  false: leave it alone. */
static bool
set_of(enum affinity_role role, unsigned i, cpu_set_t *set)
{
    const struct cpu_list *l = list_of(role);

    if (l->n == 0) {
        *set = aff.all;
        return aff.both.n != 0 && CPU_COUNT(&aff.all) != 0;
    }
    if (role == AFFINITY_WORKER || (role == AFFINITY_RECOVERY && i > 0)) {
        CPU_ZERO(set);
        CPU_SET(l->cpu[i % l->n], set);
    } else {
        set_from_list(l, set);
    }
    return true;
}

int
affinity_apply(pthread_t t, enum affinity_role role, unsigned i)
{
    cpu_set_t set;

    if (!set_of(role, i, &set)) {
        return 0;
    }
    return pthread_setaffinity_np(t, sizeof(set), &set) == 0 ? 0 : -1;
}

int
affinity_apply_self(enum affinity_role role)
{
    cpu_set_t set;

    if (!set_of(role, 0, &set)) {
        return 0;
    }
    return sched_setaffinity(0, sizeof(set), &set);
}

/* ---- NUMA -------------------------------------------------------------- */

unsigned
affinity_node_count(void)
{
    unsigned n = 0;

    for (int node = 0; node < AFFINITY_MAX_CPUS; node++) {
        if (affinity_node_exists(node)) {
            n++;
        }
    }
    return n ? n : 1;
}

bool
affinity_node_exists(int node)
{
    char path[64];
    struct stat st;

    if (node < 0 || node >= AFFINITY_MAX_CPUS) {
        return false;
    }
    snprintf(path, sizeof(path), NODE_DIR "/node%d", node);
    if (stat(path, &st) == 0) {
        return true;
    }
    /* A kernel without NUMA support shows no node directory: node 0 is
     * all of memory. */
    return node == 0 && stat(NODE_DIR, &st) != 0;
}

int
affinity_node_cpus(int node, struct cpu_list *out)
{
    char path[64], line[4096], err[128];
    FILE *f;
    size_t n;

    snprintf(path, sizeof(path), NODE_DIR "/node%d/cpulist", node);
    f = fopen(path, "r");
    if (f == NULL) {
        cpu_list_allowed(out);
        return node == 0 ? 0 : -1;
    }
    n = fread(line, 1, sizeof(line) - 1, f);
    fclose(f);
    line[n] = '\0';
    line[strcspn(line, "\n")] = '\0';
    return cpu_list_parse(line, out, err, sizeof(err));
}

int
affinity_bind_node(int node)
{
    unsigned long mask[AFFINITY_MAX_CPUS / (8 * sizeof(unsigned long))];

    if (node < 0 || node >= AFFINITY_MAX_CPUS) {
        errno = EINVAL;
        return -1;
    }
    memset(mask, 0, sizeof(mask));
    mask[node / (8 * sizeof(unsigned long))] =
        1UL << (node % (8 * sizeof(unsigned long)));
    return (int)syscall(SYS_set_mempolicy, MPOL_BIND, mask,
                        (unsigned long)AFFINITY_MAX_CPUS + 1);
}

/* The numa_node a sysfs device directory, or one of its parents, reports;
 * -1 when none does. */
static int
sysfs_node(char *dir)
{
    while (strlen(dir) > strlen("/sys/devices")) {
        char path[PATH_MAX + 32];
        FILE *f;
        int node;

        snprintf(path, sizeof(path), "%s/numa_node", dir);
        f = fopen(path, "r");
        if (f != NULL) {
            bool ok = fscanf(f, "%d", &node) == 1;

            fclose(f);
            if (ok) {
                return node;
            }
        }
        *strrchr(dir, '/') = '\0';
    }
    return -1;
}

int
affinity_path_node(const char *path)
{
    char link[64], dir[PATH_MAX];
    struct stat st;

    if (stat(path, &st) != 0 || major(st.st_dev) == 0) {
        return -1;                      /* tmpfs and other memory-only fs */
    }
    snprintf(link, sizeof(link), "/sys/dev/block/%u:%u",
             major(st.st_dev), minor(st.st_dev));
    if (realpath(link, dir) == NULL) {
        return -1;
    }
    return sysfs_node(dir);
}
