/*
 * given.h: sockets given to the process at start (by systemd's socket
 * activation or fd store, or by the node taken over from), and how one is
 * matched to what an option asks for: by the address it is bound to.
 *
 * Main thread only.
 */
#ifndef MCPM_GIVEN_H
#define MCPM_GIVEN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

/* Where a given socket came from. */
enum given_origin {
    GIVEN_UNIT,         /* systemd socket activation */
    GIVEN_STORE,        /* systemd's fd store, put there by us */
    GIVEN_TAKEOVER      /* the node taken over from */
};

/* A socket given at start, not yet matched to an option (used: it was). */
struct given {
    int               fd;
    enum given_origin origin;
    bool              used;
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

/* An IPv4 or IPv6 address as "stats conns" names it: "<transport>:ip:port"
 * or "<transport>6:[ip]:port" ("tcp", "udp"). */
void sock_addr_name(const struct sockaddr *sa, const char *transport,
                    char *out, size_t len);

/* -o sock_cookie_id: the mark a firewall can match (SO_MARK) on a
 * listening socket; without CAP_NET_ADMIN, memcached's "setsockopt"
 * line and the socket serves unmarked.  Nothing when the id is 0. */
void sock_cookie(int fd);

/* The address one of the options asks for: does the socket have it?
 * any_port: the option's port is -1 (whatever the kernel picked). */
bool sock_info_is(const struct sock_info *si, int type,
                  const struct sockaddr *want, bool any_port);

/* The given socket of `type` bound to `want`, marked used, or -1; says
 * at -v which it took. */
int given_take(struct given *g, size_t n, int type,
               const struct sockaddr *want, bool any_port, const char *what);

/* Where a given socket came from, in words. */
const char *given_origin_name(enum given_origin o);

#endif
