/*
 * foreign.h: a process of another program (memcached) on this node's
 * memory file: finding it, sharing its listening sockets, and waiting
 * for it to exit, so that a memcached-pm started beside a memcached -e
 * node takes its place with its cache and its port (-o takeover, with no
 * memcached-pm node on the takeover socket).
 *
 * Reading another process's maps and taking its descriptors need ptrace
 * rights over it (root, or CAP_SYS_PTRACE); where they are missing, the
 * process is not found, or its sockets are not shared, and the start
 * goes on as it would have.
 *
 * Main thread only, before the memory file opens.
 */
#ifndef MCPM_FOREIGN_H
#define MCPM_FOREIGN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>

/* A process other than this one that maps the file at path: its pid, or
 * 0 (none that this process may see). */
pid_t foreign_mapper(const char *path);

/* The process other than this one that listens on the TCP address addr
 * (/proc/net/tcp, tcp6): its pid, with the number of its descriptor in
 * *fdnum; or 0. */
pid_t foreign_listener(const struct sockaddr *addr, int *fdnum);

/* Duplicate descriptor fdnum of the process behind pidfd: the new fd, or
 * -1 with errno (EPERM: no ptrace rights over it). */
int foreign_getfd(int pidfd, int fdnum);

/* Does a process hold the file at path open (a write lease on it cannot
 * be had)?  Needs to own the file, or CAP_LEASE; false where it cannot
 * tell.  For a process foreign_mapper() cannot see. */
bool foreign_file_open(const char *path);

/* A descriptor that tells when pid exits (a pidfd), or -1 with errno. */
int foreign_pidfd(pid_t pid);

/* Duplicates of the listening sockets (TCP, unix) of the process behind
 * pidfd, up to max, into fds: how many, or -1 with errno (EPERM: no
 * ptrace rights over it).  The sockets stay open, and keep queueing
 * connections, after that process has gone. */
int foreign_take_listeners(pid_t pid, int pidfd, int *fds, size_t max);

/* Wait for the process behind pidfd to exit: 0, or -1 with errno. */
int foreign_wait(int pidfd);

/* The name of pid's program ("memcached"), into out. */
void foreign_name(pid_t pid, char *out, size_t len);

#endif
