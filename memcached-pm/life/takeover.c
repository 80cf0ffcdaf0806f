/*
 * takeover.c: the takeover socket and its messages (takeover.h).
 */
#include "config.h"

#include "memcached-pm/life/takeover.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "memcached-pm/base/log.h"
#include "memcached-pm/base/settings.h"
#include "memcached-pm/net/fdpass.h"

#define MAGIC       "MCPM-TO"
#define FDS_PER_MSG 250         /* of FDPASS_MAX */
#define HELLO_MS    1000        /* a connector that says nothing in this
                                   long is no successor */
#define REPLY_MS    10000       /* the running node offers within this */

struct msg {
    char     magic[8];
    uint32_t type;
    uint32_t version;           /* HELLO: the oldest it reads; OFFER: the
                                   one it writes */
    uint32_t version_max;       /* HELLO: the newest it reads */
    uint32_t pid;
    uint32_t count;             /* fds that come with it */
    char     text[100];         /* REFUSE: why; HELLO: its build */
};


/* ---- messages --------------------------------------------------------- */

static int
send_msg(int sock, const struct msg *m, const int *fds, size_t n)
{
    struct iovec iov = { (void *)m, sizeof(*m) };
    struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
    union fdpass_ctl ctl;
    ssize_t rc;

    fdpass_attach(&mh, &ctl, fds, n);
    do {
        rc = sendmsg(sock, &mh, MSG_NOSIGNAL);
    } while (rc < 0 && errno == EINTR);
    return rc == (ssize_t)sizeof(*m) ? 0 : -1;
}

static void
msg_init(struct msg *m, enum takeover_msg type)
{
    memset(m, 0, sizeof(*m));
    memcpy(m->magic, MAGIC, sizeof(m->magic));
    m->type = type;
    m->pid = (uint32_t)getpid();
}

/* Wait up to ms (-1: for ever) for sock to be readable: 0, or -1. */
static int
wait_readable(int sock, int ms)
{
    struct pollfd p = { .fd = sock, .events = POLLIN };
    int rc;

    do {
        rc = poll(&p, 1, ms);
    } while (rc < 0 && errno == EINTR);
    return rc == 1 ? 0 : -1;
}

/*
 * The next message, its fds into fds (room for FDPASS_MAX; *n set).
 * 0, or -1: the other end closed, a timeout, a message that is not one
 * of ours, or fds that did not fit (then none are kept).
 */
static int
recv_msg(int sock, struct msg *m, int *fds, size_t *n, int ms)
{
    struct iovec iov = { m, sizeof(*m) };
    struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
    union fdpass_ctl ctl;
    ssize_t rc;

    *n = 0;
    if (wait_readable(sock, ms) != 0) {
        return -1;
    }
    mh.msg_control = ctl.buf;
    mh.msg_controllen = sizeof(ctl.buf);
    do {
        rc = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
    } while (rc < 0 && errno == EINTR);
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c != NULL;
         c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);

            memcpy(fds + *n, CMSG_DATA(c), k * sizeof(int));
            *n += k;
        }
    }
    if (rc != (ssize_t)sizeof(*m) || (mh.msg_flags & MSG_CTRUNC) ||
        memcmp(m->magic, MAGIC, sizeof(m->magic)) != 0 || m->count != *n) {
        for (size_t i = 0; i < *n; i++) {
            close(fds[i]);
        }
        *n = 0;
        return -1;
    }
    return 0;
}

int
takeover_send_fds(int sock, enum takeover_msg what, const int *fds, size_t n)
{
    struct msg m;

    msg_init(&m, what);
    do {
        size_t k = n < FDS_PER_MSG ? n : FDS_PER_MSG;

        m.count = (uint32_t)k;
        if (send_msg(sock, &m, fds, k) != 0) {
            return -1;
        }
        fds += k;
        n -= k;
    } while (n > 0);
    return 0;
}

int
takeover_send(int sock, enum takeover_msg what)
{
    struct msg m;

    msg_init(&m, what);
    return send_msg(sock, &m, NULL, 0);
}

/* A message that carries no fds (any that come are closed), its text
 * ended: 0, or -1 as recv_msg(). */
static int
recv_bare(int sock, struct msg *m, int ms)
{
    int fds[FDPASS_MAX];
    size_t n;

    if (recv_msg(sock, m, fds, &n, ms) != 0) {
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        close(fds[i]);
    }
    m->text[sizeof(m->text) - 1] = '\0';
    return 0;
}

int
takeover_wait(int sock, enum takeover_msg what, int ms)
{
    struct msg m;

    return recv_bare(sock, &m, ms) == 0 && m.type == what ? 0 : -1;
}

int
takeover_send_go(int sock, uint64_t room)
{
    struct msg m;

    msg_init(&m, TAKEOVER_GO);
    snprintf(m.text, sizeof(m.text), "room %llu", (unsigned long long)room);
    return send_msg(sock, &m, NULL, 0);
}

int
takeover_wait_go(int sock, int ms, uint64_t *room)
{
    struct msg m;

    if (recv_bare(sock, &m, ms) != 0) {
        return -1;
    }
    *room = strncmp(m.text, "room ", 5) == 0
            ? strtoull(m.text + 5, NULL, 10) : UINT64_MAX;
    return m.type == TAKEOVER_GO ? 0 : -1;
}

int
takeover_send_preimage(int sock, int fd, uint64_t at, uint64_t len)
{
    struct msg m;

    msg_init(&m, TAKEOVER_PREIMAGE);
    m.count = fd >= 0 ? 1 : 0;
    if (fd >= 0) {
        snprintf(m.text, sizeof(m.text), "at %llu len %llu",
                 (unsigned long long)at, (unsigned long long)len);
    }
    return send_msg(sock, &m, &fd, fd >= 0 ? 1 : 0);
}

int
takeover_wait_preimage(int sock, int ms, int *fd, uint64_t *at,
                       uint64_t *len)
{
    int fds[FDPASS_MAX];
    unsigned long long a, l;
    struct msg m;
    size_t n;

    *fd = -1;
    if (recv_msg(sock, &m, fds, &n, ms) != 0) {
        return -1;
    }
    m.text[sizeof(m.text) - 1] = '\0';
    if (m.type == TAKEOVER_PREIMAGE && n == 1 &&
        sscanf(m.text, "at %llu len %llu", &a, &l) == 2) {
        *fd = fds[0];
        *at = a;
        *len = l;
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        close(fds[i]);
    }
    return m.type == TAKEOVER_PREIMAGE ? 0 : -1;
}

int
takeover_wait_gone(int sock, int timeout_ms)
{
    char b;

    if (wait_readable(sock, timeout_ms) != 0) {
        return -1;
    }
    return recv(sock, &b, 1, MSG_DONTWAIT) <= 0 ? 0 : -1;
}

void
takeover_step(const char *side, const char *step)
{
    static struct timespec first;
    const char *at = getenv("MCPM_TAKEOVER_PAUSE");
    size_t n = strlen(side);
    struct timespec ts;

    /* -v: each step with the time since this side's first, so that an
     * operator sees where a takeover spends its pause */
    clock_gettime(CLOCK_MONOTONIC, &ts);
    if (first.tv_sec == 0 && first.tv_nsec == 0) {
        first = ts;
    }
    log_info("takeover: %s: %s (%.1f ms)", side, step,
             (double)(ts.tv_sec - first.tv_sec) * 1e3 +
             (double)(ts.tv_nsec - first.tv_nsec) / 1e6);
    if (at != NULL && strncmp(at, side, n) == 0 && at[n] == ':' &&
        strcmp(at + n + 1, step) == 0) {
        kill(getpid(), SIGSTOP);
    }
}

/* ---- trust ------------------------------------------------------------ */

/* The other side of a takeover gets every socket and the memory file:
 * it must be this node's own user, or root. */
static bool
trusted(uid_t uid)
{
    return uid == 0 || uid == geteuid();
}

/* The process at the other end of sock: 0 (its uid and pid set), or -1
 * with why when it is not to be trusted. */
static int
check_peer(int sock, uid_t *uid, pid_t *pid, char *why, size_t len)
{
    struct ucred cred;
    socklen_t n = sizeof(cred);

    if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &n) != 0) {
        snprintf(why, len, "its credentials cannot be read: %s",
                 strerror(errno));
        return -1;
    }
    *uid = cred.uid;
    *pid = cred.pid;
    if (!trusted(cred.uid)) {
        snprintf(why, len, "pid %d runs as uid %u, neither this node's "
                 "user (uid %u) nor root: refused", (int)cred.pid,
                 (unsigned)cred.uid, (unsigned)geteuid());
        return -1;
    }
    return 0;
}

/* ---- the running node ------------------------------------------------- */

static int
path_addr(const char *path, struct sockaddr_un *sun)
{
    memset(sun, 0, sizeof(*sun));
    sun->sun_family = AF_UNIX;
    if (strlen(path) >= sizeof(sun->sun_path)) {
        log_error("takeover socket path too long: %s", path);
        return -1;
    }
    strcpy(sun->sun_path, path);
    return 0;
}

int
takeover_listen(const char *path, struct given *g, size_t n)
{
    struct sockaddr_un sun;
    mode_t old;
    int fd;

    if (path_addr(path, &sun) != 0) {
        return -1;
    }
    fd = given_take(g, n, SOCK_SEQPACKET, (struct sockaddr *)&sun, false,
                    "the takeover socket");
    if (fd >= 0) {
        /* A successor's SO_PEERCRED names whoever last called listen()
         * on this socket, not whoever holds it now: say it again, so
         * that the next node waits for this process, not for an earlier
         * one (after a reload inside the unit, itself). */
        if (listen(fd, 4) != 0) {
            log_error("takeover socket %s: listen: %s", path,
                      strerror(errno));
        }
        return fd;
    }
    fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -1;
    }
    unlink(path);               /* a dead node's, or none */
    old = umask(0077);          /* whoever connects gets every socket */
    if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) != 0 ||
        listen(fd, 4) != 0) {
        umask(old);
        log_error("failed to listen on the takeover socket %s: %s", path,
                  strerror(errno));
        close(fd);
        return -1;
    }
    umask(old);
    return fd;
}

int
takeover_accept(int lfd, struct takeover_peer *p, uint64_t index_bytes,
                const uint64_t index_file[2], char *why, size_t len)
{
    int fds[FDPASS_MAX];
    struct msg m;
    size_t n;

    uid_t uid;
    pid_t pid;

    p->fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    if (p->fd < 0) {
        snprintf(why, len, "accept: %s", strerror(errno));
        return -1;
    }
    if (check_peer(p->fd, &uid, &pid, why, len) != 0) {
        /* not a word to it: not even the version */
        log_error("takeover: a successor on the takeover socket: %s", why);
        close(p->fd);
        return -1;
    }
    p->pid = pid;               /* the kernel's word, not the hello's */
    if (recv_msg(p->fd, &m, fds, &n, HELLO_MS) != 0 ||
        m.type != TAKEOVER_HELLO || n != 0) {
        snprintf(why, len, "a connection that sent no hello");
        close(p->fd);
        return -1;
    }
    if (m.version > HANDOVER_VERSION || m.version_max < HANDOVER_VERSION_MIN
        || m.version > m.version_max) {
        snprintf(why, len, "pid %d reads handover versions %u to %u, this "
                 "build writes %u to %u", (int)p->pid, m.version,
                 m.version_max, HANDOVER_VERSION_MIN, HANDOVER_VERSION);
        msg_init(&m, TAKEOVER_REFUSE);
        snprintf(m.text, sizeof(m.text), "%s", why);
        send_msg(p->fd, &m, NULL, 0);
        return 1;
    }
    /* the newest both read */
    p->version = m.version_max < HANDOVER_VERSION ? m.version_max
                                                 : HANDOVER_VERSION;
    msg_init(&m, TAKEOVER_OFFER);
    m.version = p->version;
    snprintf(m.text, sizeof(m.text), "index %llu file %llx %llx",
             (unsigned long long)index_bytes,
             (unsigned long long)index_file[0],
             (unsigned long long)index_file[1]);
    if (send_msg(p->fd, &m, NULL, 0) != 0) {
        snprintf(why, len, "pid %d went away", (int)p->pid);
        close(p->fd);
        return -1;
    }
    return 0;
}

/* ---- the successor ---------------------------------------------------- */

/* Connect to the node at path, if it is one of this user's (or
 * root's): 0 (*fd, and *pid the kernel's word for it), 1 (nobody
 * serves there), or -1 with why. */
static int
dial(const char *path, int *fd, pid_t *pid, char *why, size_t len)
{
    struct sockaddr_un sun;
    struct stat st;
    uid_t uid;

    if (path_addr(path, &sun) != 0) {
        snprintf(why, len, "the path is too long");
        return -1;
    }
    if (lstat(path, &st) == 0 && !trusted(st.st_uid)) {
        /* another user's file: whoever listens there is not our node */
        snprintf(why, len, "%s belongs to uid %u, neither this node's user "
                 "(uid %u) nor root: refusing it (remove it, or choose "
                 "another path)", path, (unsigned)st.st_uid,
                 (unsigned)geteuid());
        return -1;
    }
    if ((*fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0)) < 0) {
        snprintf(why, len, "socket: %s", strerror(errno));
        return -1;
    }
    if (connect(*fd, (struct sockaddr *)&sun, sizeof(sun)) != 0) {
        int e = errno;

        close(*fd);
        *fd = -1;
        if (e == ENOENT || e == ECONNREFUSED) {
            return 1;
        }
        snprintf(why, len, "connect: %s", strerror(e));
        return -1;
    }
    if (check_peer(*fd, &uid, pid, why, len) != 0) {
        close(*fd);
        *fd = -1;
        return -1;
    }
    return 0;
}

int
takeover_connect(const char *path, struct takeover_peer *p, char *why,
                 size_t len)
{
    unsigned long long bytes, base = 0, flen = 0;
    int fds[FDPASS_MAX];
    struct msg m;
    size_t n = 0;
    pid_t pid;
    int rc = dial(path, &p->fd, &pid, why, len);

    if (rc != 0) {
        return rc;
    }
    p->pid = pid;               /* the kernel's word, not the offer's */
    msg_init(&m, TAKEOVER_HELLO);
    m.version = HANDOVER_VERSION_MIN;
    m.version_max = HANDOVER_VERSION;
    snprintf(m.text, sizeof(m.text), "%s", MCPM_VERSION);
    if (send_msg(p->fd, &m, NULL, 0) != 0 ||
        recv_msg(p->fd, &m, fds, &n, REPLY_MS) != 0 || n != 0) {
        while (n > 0) {
            close(fds[--n]);
        }
        snprintf(why, len, "the node there did not answer");
        return -1;
    }
    m.text[sizeof(m.text) - 1] = '\0';
    if (m.type == TAKEOVER_REFUSE) {
        snprintf(why, len, "pid %d refused: %s", (int)p->pid, m.text);
        return -1;
    }
    if (m.type != TAKEOVER_OFFER) {
        snprintf(why, len, "the node there said something else");
        return -1;
    }
    if (m.version < HANDOVER_VERSION_MIN || m.version > HANDOVER_VERSION) {
        snprintf(why, len, "pid %d offered handover version %u",
                 (int)p->pid, m.version);
        return -1;
    }
    p->version = m.version;
    if (sscanf(m.text, "index %llu file %llx %llx", &bytes, &base,
               &flen) >= 1) {
        p->index_bytes = bytes;
        p->file_base = base;
        p->file_len = flen;
    }
    return 0;
}

/* Append n fds to an array of ints or of given listeners. */
static int
keep_conns(int **arr, size_t *have, const int *fds, size_t n)
{
    int *a = realloc(*arr, (*have + n) * sizeof(*a));

    if (a == NULL) {
        return -1;
    }
    memcpy(a + *have, fds, n * sizeof(*a));
    *arr = a;
    *have += n;
    return 0;
}

static int
keep_listeners(struct takeover_got *got, const int *fds, size_t n,
               enum given_origin origin)
{
    struct given *a = realloc(got->given, (got->ngiven + n) * sizeof(*a));

    if (a == NULL) {
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        a[got->ngiven + i] = (struct given){
            .fd = fds[i], .origin = origin };
    }
    got->given = a;
    got->ngiven += n;
    return 0;
}

/* Keep what one message brought: 0, 1 at RELEASED, -1 on a fault. */
static int
keep(struct takeover_got *got, const struct msg *m, const int *fds,
     size_t n)
{
    int rc = 0;

    switch (m->type) {
    case TAKEOVER_LISTENERS:
    case TAKEOVER_UNIT_LISTENERS:
        rc = keep_listeners(got, fds, n, m->type == TAKEOVER_LISTENERS
                                         ? GIVEN_TAKEOVER : GIVEN_UNIT);
        break;
    case TAKEOVER_CONNS:
        rc = keep_conns(&got->conns, &got->nconns, fds, n);
        break;
    case TAKEOVER_PRECONNS:
        rc = keep_conns(&got->pre, &got->npre, fds, n);
        break;
    case TAKEOVER_STATE:
    case TAKEOVER_IMAGE: {
        int *slot = m->type == TAKEOVER_STATE ? &got->state : &got->image;
        size_t most = m->type == TAKEOVER_IMAGE ? 2 : 1;

        if (n == 0 || n > most || *slot >= 0) {
            rc = -1;
            break;
        }
        *slot = fds[0];
        if (n == 2) {
            got->image_delta = fds[1];
        }
        return 0;
    }
    case TAKEOVER_RELEASED:
        got->released = true;
        return n == 0 ? 1 : -1;
    default:
        rc = -1;
    }
    if (rc != 0) {
        for (size_t i = 0; i < n; i++) {
            close(fds[i]);
        }
    }
    return rc;
}

int
takeover_receive(struct takeover_peer *p, struct takeover_got *got)
{
    int fds[FDPASS_MAX];
    struct msg m;
    size_t n;

    got->state = got->image = got->image_delta = -1;
    for (;;) {
        int rc;

        /* for ever: the running node may take its drain time, and a
         * dead one closes its end */
        if (recv_msg(p->fd, &m, fds, &n, -1) != 0) {
            return -1;
        }
        if ((rc = keep(got, &m, fds, n)) != 0) {
            return rc > 0 ? 0 : -1;
        }
    }
}

void
takeover_got_free(struct takeover_got *got)
{
    for (size_t i = 0; i < got->ngiven; i++) {
        if (!got->given[i].used) {
            close(got->given[i].fd);
        }
    }
    for (size_t i = 0; i < got->nconns; i++) {
        if (got->conns[i] >= 0) {
            close(got->conns[i]);
        }
    }
    for (size_t i = 0; i < got->npre; i++) {
        if (got->pre[i] >= 0) {
            close(got->pre[i]);
        }
    }
    free(got->pre);
    if (got->state >= 0) {
        close(got->state);
    }
    if (got->image >= 0) {
        close(got->image);
    }
    if (got->image_delta >= 0) {
        close(got->image_delta);
    }
    free(got->given);
    free(got->conns);
    memset(got, 0, sizeof(*got));
    got->state = got->image = got->image_delta = -1;
}
