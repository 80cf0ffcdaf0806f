/*
 * affinity.h: where threads run and where memory comes from.
 *
 * CPU lists are written in Linux's cpu-list syntax, "0-3,8": numbers and
 * ranges joined by commas, as /sys/devices/system/cpu/online and taskset
 * -c print them.  A list is kept in ascending order without repeats; the
 * i-th thread of a role takes its i % n-th CPU (round robin).
 *
 * Three roles: workers (-o worker_cpus), background threads (-o bg_cpus:
 * the LRU maintainer, crawler, page mover, hash expander, loggers and the
 * listener) and recovery threads, which run before any worker serves and
 * so spread over both lists.  A role without a list is left where the
 * process may run.  Set the lists once, before the first thread starts;
 * after that the calls below only read them.
 *
 * Memory: affinity_bind_node() binds every later allocation of the
 * process (slab pages, the hash table, buffers) to one NUMA node.
 */
#ifndef MCPM_STORAGE_AFFINITY_H
#define MCPM_STORAGE_AFFINITY_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#define AFFINITY_MAX_CPUS 1024

struct cpu_list {
    unsigned        n;
    unsigned short  cpu[AFFINITY_MAX_CPUS];     /* ascending, distinct */
};

/*
 * Parse `s` into *out.  0, or -1 with why in err ("CPU 9 is not
 * present ..."): empty, malformed (a stray character, a range that runs
 * backwards, a number over AFFINITY_MAX_CPUS - 1), or a CPU this process
 * may not run on (not present, or outside its cgroup or taskset).
 */
int cpu_list_parse(const char *s, struct cpu_list *out, char *err,
                   size_t errlen);

/* The list in cpu-list syntax, ranges folded ("0-3,8"); "" when empty. */
void cpu_list_format(const struct cpu_list *l, char *buf, size_t len);

/* The CPUs this process may run on now. */
void cpu_list_allowed(struct cpu_list *out);

enum affinity_role { AFFINITY_WORKER, AFFINITY_BG, AFFINITY_RECOVERY };

/* The lists of the workers and the background threads (NULL or empty:
 * none). */
void affinity_set(const struct cpu_list *workers, const struct cpu_list *bg);

/* Pin thread t, the i-th of its role, to its CPU (the whole list for a
 * background thread).  Nothing when the role has no list.  0, or -1 if
 * the kernel refused. */
int affinity_apply(pthread_t t, enum affinity_role role, unsigned i);

/* Pin the calling thread to every CPU of `role`'s list (recovery: both
 * lists), so that threads it starts inherit it.  Nothing without a list. */
int affinity_apply_self(enum affinity_role role);

/* NUMA: how many nodes the machine has (1 when it says nothing), whether
 * node n exists, and its CPUs. */
unsigned affinity_node_count(void);
bool affinity_node_exists(int node);
int affinity_node_cpus(int node, struct cpu_list *out);

/* Bind the calling thread's later allocations, and those of threads it
 * starts, to `node` (set_mempolicy MPOL_BIND).  0, or -1 with errno. */
int affinity_bind_node(int node);

/* The NUMA node of the device holding `path`, or -1 when the machine does
 * not say (tmpfs, a single-node machine, no such file). */
int affinity_path_node(const char *path);

#endif
