/*
 * listen.h: the listening sockets (-l and -p, or -s) and the accepting of
 * connections on them, on the main thread's event loop.
 *
 * A listener is either opened here or given to the process at its start:
 * by systemd's socket activation (a .socket unit), out of systemd's file
 * descriptor store, or by the node this one takes over from (takeover.h).
 * A given socket is matched to the options by the address it is bound
 * to: it serves the -l entry (and its TLS prefix) whose address it has,
 * and what the options name that no given socket has is opened as
 * before.  A socket from a .socket unit that no option names is a
 * mistake in the units and refused; one from the fd store or a takeover
 * is only the past's (the options changed) and closed.
 *
 * Main thread only.
 */
#ifndef MCPM_LISTEN_H
#define MCPM_LISTEN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include <event2/event.h>

/* Where a given socket came from. */
enum listen_origin {
    LISTEN_FROM_UNIT,       /* systemd socket activation */
    LISTEN_FROM_STORE,      /* systemd's fd store, put there by us */
    LISTEN_FROM_TAKEOVER    /* the node taken over from */
};

/* A socket given at start, not yet matched to an option (used: it was). */
struct listen_given {
    int                fd;
    enum listen_origin origin;
    bool               used;
};

/* What a socket is: its family, type, whether it listens, its address. */
struct sock_info {
    int                     family;
    int                     type;
    bool                    listening;
    struct sockaddr_storage addr;
    socklen_t               addrlen;
};

/* Fill *si for fd: 0, or -1 (not a socket). */
int sock_info(int fd, struct sock_info *si);

/* "tcp:127.0.0.1:11211", "udp6:[::1]:11211", "unix:/path", "takeover
 * socket /path", as stats conns names them. */
void sock_info_name(const struct sock_info *si, char *out, size_t len);

/* The address one of the options asks for: does the socket have it?
 * any_port: the option's port is -1 (whatever the kernel picked). */
bool sock_info_is(const struct sock_info *si, int type,
                  const struct sockaddr *want, bool any_port);

/* The given socket of `type` bound to `want`, marked used, or -1; says
 * at -v which it took. */
int listen_take_given(struct listen_given *g, size_t n, int type,
                      const struct sockaddr *want, bool any_port,
                      const char *what);

/* Where a given socket came from, in words. */
const char *listen_origin_name(enum listen_origin o);

/*
 * Listen on what -l, -p and -s ask for, taking the given sockets that
 * match first (marking them used), and accept on base once
 * listen_start() says so.  0, or memcached's exit status after its
 * message (a port that cannot be had).
 */
int listen_open(struct event_base *base, struct listen_given *g, size_t n);

/* Stop taking connections (they wait in the backlog), or start. */
void listen_stop(void);
void listen_start(void);

/* Copy the listening sockets' fds into out (at most max): for a
 * handover, or for systemd's fd store.  The count. */
size_t listen_fds(int *out, size_t max);

/* Close the listening sockets; a graceful stop says so at -vv.  unlink:
 * remove -s's socket file (not after a handover: the successor serves
 * it). */
void listen_close(bool graceful, bool unlink_path);

#endif
