/*
 * placement.h: -o worker_cpus, bg_cpus and numa_node, from the command
 * line to the threads (storage/base/affinity.h does the pinning).
 *
 * The options are read before any thread starts; placement_start() then
 * binds memory to the node and pins the main thread, so that everything
 * started after it (recovery, storage's background threads, the workers,
 * the loggers) lands where the lists say.
 */
#ifndef MCPM_PLACEMENT_H
#define MCPM_PLACEMENT_H

/* -o worker_cpus=<list>, -o bg_cpus=<list> and -o numa_node=<n>: 0, or
 * -EX_USAGE with a message naming the option. */
int placement_opt_worker_cpus(const char *val);
int placement_opt_bg_cpus(const char *val);
int placement_opt_numa_node(const char *val);

/* "stats settings": what was applied ("unpinned", "-1": nothing). */
const char *placement_worker_cpus(void);
const char *placement_bg_cpus(void);
int placement_numa_node(void);
int placement_memory_file_node(void);

/* Bind memory and pin the calling (main) thread for the recovery that
 * follows; `memory_file` (or NULL) is looked up for its device's node.
 * 0, or -1 with a message. */
int placement_start(const char *memory_file);

/* Once the workers run: the main thread (listener, signals) joins the
 * background CPUs. */
void placement_serving(void);

#endif
