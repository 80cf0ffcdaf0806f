/*
 * given.c: sockets given to the process at start, matched by address
 * (given.h).
 */
#include "config.h"

#include "memcached-pm/net/given.h"

#include <stdio.h>
#include <string.h>
#include <sys/un.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include "memcached-pm/base/log.h"
#include "memcached-pm/base/settings.h"

int
sock_info(int fd, struct sock_info *si)
{
    socklen_t len = sizeof(si->type);
    int on = 0;

    memset(si, 0, sizeof(*si));
    si->addrlen = sizeof(si->addr);
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &si->type, &len) != 0 ||
        getsockname(fd, (struct sockaddr *)&si->addr, &si->addrlen) != 0) {
        return -1;
    }
    si->family = si->addr.ss_family;
    len = sizeof(on);
    si->listening = getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &on, &len) ==
                    0 && on;
    return 0;
}

bool
sock_info_is(const struct sock_info *si, int type, const struct sockaddr *want,
             bool any_port)
{
    const struct sockaddr *have = (const struct sockaddr *)&si->addr;

    if (si->type != type || si->family != want->sa_family ||
        (type == SOCK_STREAM && !si->listening)) {
        return false;
    }
    switch (want->sa_family) {
    case AF_INET: {
        const struct sockaddr_in *a = (const void *)have,
                                 *b = (const void *)want;

        return a->sin_addr.s_addr == b->sin_addr.s_addr &&
               (any_port || a->sin_port == b->sin_port);
    }
    case AF_INET6: {
        const struct sockaddr_in6 *a = (const void *)have,
                                  *b = (const void *)want;

        return memcmp(&a->sin6_addr, &b->sin6_addr, sizeof(a->sin6_addr))
               == 0 && (any_port || a->sin6_port == b->sin6_port);
    }
    case AF_UNIX:
        return strncmp(((const struct sockaddr_un *)have)->sun_path,
                       ((const struct sockaddr_un *)want)->sun_path,
                       sizeof(((struct sockaddr_un *)0)->sun_path)) == 0;
    default:
        return false;
    }
}

void
sock_info_name(const struct sock_info *si, char *out, size_t len)
{
    const struct sockaddr *sa = (const struct sockaddr *)&si->addr;

    if (si->family == AF_UNIX) {
        snprintf(out, len, "%s%s", si->type == SOCK_SEQPACKET
                 ? "takeover socket " : "unix:",
                 ((const struct sockaddr_un *)sa)->sun_path);
    } else if (si->family == AF_INET || si->family == AF_INET6) {
        sock_addr_name(sa, si->type == SOCK_DGRAM ? "udp" : "tcp", out,
                       len);
    } else {
        snprintf(out, len, "a socket of family %d", si->family);
    }
}

const char *
given_origin_name(enum given_origin o)
{
    switch (o) {
    case GIVEN_UNIT: return "systemd socket activation";
    case GIVEN_STORE: return "systemd's fd store";
    default: return "the node taken over";
    }
}

int
given_take(struct given *g, size_t n, int type, const struct sockaddr *want,
           bool any_port, const char *what)
{
    for (size_t i = 0; i < n; i++) {
        struct sock_info si;

        if (g[i].used || sock_info(g[i].fd, &si) != 0 ||
            !sock_info_is(&si, type, want, any_port)) {
            continue;
        }
        g[i].used = true;
        log_info("fd %d from %s: %s", g[i].fd,
                 given_origin_name(g[i].origin), what);
        return g[i].fd;
    }
    return -1;
}

void
sock_addr_name(const struct sockaddr *sa, const char *transport,
               char *out, size_t len)
{
    char host[INET6_ADDRSTRLEN] = "?";

    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const void *)sa;

        inet_ntop(AF_INET6, &s6->sin6_addr, host, sizeof(host));
        snprintf(out, len, "%s6:[%s]:%d", transport, host,
                 ntohs(s6->sin6_port));
    } else {
        const struct sockaddr_in *s4 = (const void *)sa;

        inet_ntop(AF_INET, &s4->sin_addr, host, sizeof(host));
        snprintf(out, len, "%s:%s:%d", transport, host, ntohs(s4->sin_port));
    }
}

void
sock_cookie(int fd)
{
    unsigned id = settings.sock_cookie_id;

    if (id != 0 &&
        setsockopt(fd, SOL_SOCKET, SO_MARK, &id, sizeof(id)) != 0) {
        perror("setsockopt");
    }
}
