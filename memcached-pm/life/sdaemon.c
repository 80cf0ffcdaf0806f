/*
 * sdaemon.c: socket activation and notifications (sdaemon.h).
 */
#include "config.h"

#include "memcached-pm/life/sdaemon.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "memcached-pm/net/fdpass.h"


/* A decimal environment variable's value, or -1 when unset or not a
 * number. */
static long
env_number(const char *name)
{
    const char *s = getenv(name);
    char *end;
    long v;

    if (s == NULL || *s == '\0') {
        return -1;
    }
    errno = 0;
    v = strtol(s, &end, 10);
    return errno != 0 || *end != '\0' || v < 0 ? -1 : v;
}

/* Name i of LISTEN_FDNAMES ("a:b:c"), or "unknown" as systemd says. */
static void
fd_name(const char *names, size_t i, char *out, size_t len)
{
    const char *p = names;

    snprintf(out, len, "unknown");
    for (size_t k = 0; p != NULL && k < i; k++) {
        p = strchr(p, ':');
        p = p != NULL ? p + 1 : NULL;
    }
    if (p != NULL && *p != '\0' && *p != ':') {
        size_t n = strcspn(p, ":");

        snprintf(out, len, "%.*s", (int)(n < len - 1 ? n : len - 1), p);
    }
}

size_t
sdaemon_listen_fds(struct sdaemon_fd **out)
{
    long pid = env_number("LISTEN_PID");
    long n = env_number("LISTEN_FDS");
    const char *names = getenv("LISTEN_FDNAMES");
    struct sdaemon_fd *fds = NULL;

    *out = NULL;
    if (pid == (long)getpid() && n > 0 && n < 65536 &&
        (fds = calloc((size_t)n, sizeof(*fds))) != NULL) {
        for (long i = 0; i < n; i++) {
            fds[i].fd = SDAEMON_LISTEN_FDS_START + (int)i;
            fcntl(fds[i].fd, F_SETFD, FD_CLOEXEC);
            fd_name(names, (size_t)i, fds[i].name, sizeof(fds[i].name));
        }
        *out = fds;
    }
    unsetenv("LISTEN_PID");
    unsetenv("LISTEN_FDS");
    unsetenv("LISTEN_FDNAMES");
    return fds != NULL ? (size_t)n : 0;
}

bool
sdaemon_notifying(void)
{
    const char *s = getenv("NOTIFY_SOCKET");

    return s != NULL && (s[0] == '/' || s[0] == '@');
}

bool
sdaemon_fdstore(void)
{
    return sdaemon_notifying() && env_number("FDSTORE") != 0;
}

long
sdaemon_fdstore_max(void)
{
    return env_number("FDSTORE");
}

/* The manager's address; its length, or 0. */
static socklen_t
notify_addr(struct sockaddr_un *sun)
{
    const char *s = getenv("NOTIFY_SOCKET");
    size_t n;

    if (!sdaemon_notifying() ||
        (n = strlen(s)) >= sizeof(sun->sun_path)) {
        return 0;
    }
    memset(sun, 0, sizeof(*sun));
    sun->sun_family = AF_UNIX;
    memcpy(sun->sun_path, s, n);
    if (s[0] == '@') {
        sun->sun_path[0] = '\0';        /* abstract: no terminator */
        return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
    }
    return (socklen_t)sizeof(*sun);
}

int
sdaemon_notify(const char *state, const int *fds, size_t nfds)
{
    union fdpass_ctl ctl;
    struct sockaddr_un sun;
    struct iovec iov = { (void *)state, strlen(state) };
    struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
    socklen_t len = notify_addr(&sun);
    int sock, rc;

    if (len == 0 || nfds > FDPASS_MAX) {
        return -1;
    }
    msg.msg_name = &sun;
    msg.msg_namelen = len;
    fdpass_attach(&msg, &ctl, fds, nfds);
    sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (sock < 0) {
        return -1;
    }
    do {
        rc = (int)sendmsg(sock, &msg, MSG_NOSIGNAL);
    } while (rc < 0 && errno == EINTR);
    close(sock);
    return rc < 0 ? -1 : 0;
}

int
sdaemon_store(int fd, const char *name)
{
    char state[300];

    snprintf(state, sizeof(state), "FDSTORE=1\nFDNAME=%s", name);
    return sdaemon_notify(state, &fd, 1);
}

int
sdaemon_store_remove(const char *name)
{
    char state[300];

    snprintf(state, sizeof(state), "FDSTOREREMOVE=1\nFDNAME=%s", name);
    return sdaemon_notify(state, NULL, 0);
}

int
sdaemon_barrier(int timeout_ms)
{
    struct pollfd pfd;
    int pipefd[2], rc;

    if (pipe2(pipefd, O_CLOEXEC) != 0) {
        return -1;
    }
    /* The manager closes its copy of the write end once it has read
     * everything sent before: the read end then sees POLLHUP. */
    rc = sdaemon_notify("BARRIER=1", &pipefd[1], 1);
    close(pipefd[1]);
    if (rc == 0) {
        pfd.fd = pipefd[0];
        pfd.events = 0;
        do {
            rc = poll(&pfd, 1, timeout_ms);
        } while (rc < 0 && errno == EINTR);
        rc = rc == 1 && (pfd.revents & POLLHUP) ? 0 : -1;
    }
    close(pipefd[0]);
    return rc;
}
