/*
 * sdaemon.h: systemd's two protocols with a service, written here (no
 * libsystemd): socket activation, the sockets a .socket unit and the fd
 * store pass at start (sd_listen_fds(3)), and notifications to the
 * service manager (sd_notify(3)): READY=1, STOPPING=1, and the file
 * descriptor store (FDSTORE=1 with FDNAME=, FDSTOREREMOVE=1, BARRIER=1).
 *
 * Both are plain: the passed fds start at 3, LISTEN_PID names the process
 * they are for, LISTEN_FDNAMES their names, colon-separated; a
 * notification is one datagram of NAME=value lines to the unix socket
 * $NOTIFY_SOCKET names (a leading '@': the abstract namespace), fds
 * attached as SCM_RIGHTS.  A test plays the service manager's part.
 *
 * Main thread only.
 */
#ifndef MCPM_SDAEMON_H
#define MCPM_SDAEMON_H

#include <stdbool.h>
#include <stddef.h>

#define SDAEMON_LISTEN_FDS_START 3

/* A passed fd and its name ("unknown" when systemd gave none). */
struct sdaemon_fd {
    int  fd;
    char name[256];
};

/*
 * The fds passed to this process (LISTEN_FDS, if LISTEN_PID is ours),
 * close-on-exec from now on; the variables are unset, so that nothing
 * started from here takes them for its own.  *out is malloc'd (NULL when
 * none); the count, 0 when none were passed.
 */
size_t sdaemon_listen_fds(struct sdaemon_fd **out);

/* A service manager listens for notifications ($NOTIFY_SOCKET). */
bool sdaemon_notifying(void);

/* And keeps fds for the next start: it listens, and $FDSTORE (systemd
 * 254 and later set it to FileDescriptorStoreMax=) does not say 0. */
bool sdaemon_fdstore(void);

/* How many descriptors the store keeps ($FDSTORE: systemd's
 * FileDescriptorStoreMax=), or -1 when not said. */
long sdaemon_fdstore_max(void);

/* Send a notification, state being NAME=value lines, with nfds fds.
 * 0, or -1 (no manager, or the send failed). */
int sdaemon_notify(const char *state, const int *fds, size_t nfds);

/* Put fd in the fd store under name, or take every fd of that name out
 * of it.  0 or -1. */
int sdaemon_store(int fd, const char *name);
int sdaemon_store_remove(const char *name);

/* Wait until the manager has read every notification sent before
 * (BARRIER=1), at most timeout_ms.  0, or -1 (not confirmed). */
int sdaemon_barrier(int timeout_ms);

#endif
