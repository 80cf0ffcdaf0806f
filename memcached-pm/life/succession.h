/*
 * succession.h: a node's sockets pass to the next node on the same port,
 * so that a restart or an upgrade is a pause to its clients, never a
 * refused or a closed connection.
 *
 * What a start inherits:
 * - under systemd, the sockets it passes (sdaemon.h): a .socket unit's
 *   listeners, and out of the fd store what the last node put there (its
 *   own listeners, and at its stop its connections and their state file,
 *   handover.h);
 * - with -o takeover=<path>, from the node running there: its
 *   listeners, its connections and their state, then its memory file
 *   (takeover.h).
 * What a stop hands on:
 * - under systemd, the connections and their state into the fd store;
 * - to a successor that connects on the takeover socket, everything, at
 *   once, the node exiting when the successor serves.
 * Elsewhere a stop closes its connections as before.
 *
 * Main thread only.
 */
#ifndef MCPM_SUCCESSION_H
#define MCPM_SUCCESSION_H

#include <stdbool.h>
#include <stddef.h>

#include <event2/event.h>

#include "memcached-pm/life/respawn.h"
#include "memcached-pm/serve/listen.h"

/*
 * Take what this start is given, before the memory file opens: systemd's
 * sockets (to be called first, before a fork changes the pid), then a
 * takeover's (succession_take_over(), once the process is set up).  0,
 * or an exit status after its message; or, from succession_take_over(),
 * SUCCESSION_STOPPED: a reload's successor made the clean stop instead
 * of handing the node back (respawn.h), exit 0 without serving.
 */
#define SUCCESSION_STOPPED RESPAWN_STOPPED
int succession_from_systemd(void);
int succession_take_over(void);

/* Before privileges drop (reading another process's maps and taking its
 * sockets need them): note a process of another program that has the
 * memory file (a memcached running on it, foreign.h), and under -o
 * takeover share its listeners.  succession_take_over() then refuses
 * the file, or with -o takeover waits for that process to exit.  0. */
int succession_find_foreign(void);

/* The listening sockets given, for listen_open() to match; then whether
 * every one found its option: 0, or an exit status after a message that
 * names the socket of a .socket unit no option asks for (those of the fd
 * store or a takeover are closed). */
struct given *succession_given(size_t *n);
int succession_given_checked(void);

/* Listen on -o takeover's socket, on base: 0, or an exit status. */
int succession_listen(struct event_base *base);

/* The workers run: start the connections taken over, tell the node
 * taken over from that this one serves, keep the listeners in systemd's
 * fd store, and tell systemd that it is ready. */
void succession_serving(void);

/* The node stops (a signal, shutdown): under systemd with an fd store,
 * its connections leave for the next start (true); else false, and the
 * stop closes them. */
bool succession_store(void);

/* After cache_stop(), with the connections stored: the memory file's
 * DRAM index goes into the store too, so that the next start need not
 * scan the file. */
void succession_store_index(void);

/* This node handed everything to a successor that serves now: its stop
 * closes its copies of the sockets, removes no socket file and no pid
 * file, and leaves the memory file (closed already) alone. */
bool succession_handed_over(void);

/* ... to the successor this process started as a unit's main process,
 * which takes the node back: once everything is freed, main() becomes
 * the binary now installed (respawn_exec()). */
bool succession_returns(void);

/* Close and free what is left. */
void succession_free(void);

#endif
