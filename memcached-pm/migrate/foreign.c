/*
 * foreign.c: another program's process on the memory file (foreign.h).
 */
#include "config.h"

#include "memcached-pm/migrate/foreign.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "memcached-pm/net/given.h"

/* Does /proc/<pid>/maps map the file (dev, ino)? */
static bool
maps_file(const char *pid, dev_t dev, ino_t ino)
{
    char path[300], *line = NULL;
    size_t cap = 0;
    bool found = false;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%s/maps", pid);
    if ((f = fopen(path, "re")) == NULL) {
        return false;       /* gone, or not ours to read */
    }
    while (!found && getline(&line, &cap, f) > 0) {
        unsigned maj, min;
        uint64_t inode;

        /* start-end perms offset maj:min inode path */
        if (sscanf(line, "%*x-%*x %*s %*x %x:%x %" SCNu64, &maj, &min,
                   &inode) == 3) {
            found = inode == (uint64_t)ino && maj == major(dev) &&
                    min == minor(dev);
        }
    }
    free(line);
    fclose(f);
    return found;
}

pid_t
foreign_mapper(const char *path)
{
    struct stat st;
    struct dirent *d;
    pid_t self = getpid(), found = 0;
    DIR *proc;

    if (path == NULL || stat(path, &st) != 0 ||
        (proc = opendir("/proc")) == NULL) {
        return 0;
    }
    while (found == 0 && (d = readdir(proc)) != NULL) {
        if (!isdigit((unsigned char)d->d_name[0]) ||
            atol(d->d_name) == (long)self) {
            continue;
        }
        if (maps_file(d->d_name, st.st_dev, st.st_ino)) {
            found = (pid_t)atol(d->d_name);
        }
    }
    closedir(proc);
    return found;
}

/* The inode of the listening socket bound to addr, in /proc/net/tcp
 * or tcp6, which print an address as the 32-bit words of its bytes in
 * hex, the port in hex: 0 where none listens there. */
static uint64_t
listening_inode(const struct sockaddr *addr)
{
    char want[48], local[48], state[4], *line = NULL;
    const char *table;
    uint64_t inode, found = 0;
    size_t cap = 0;
    FILE *f;

    if (addr->sa_family == AF_INET) {
        const struct sockaddr_in *a = (const void *)addr;

        snprintf(want, sizeof(want), "%08X:%04X",
                 (unsigned)a->sin_addr.s_addr, ntohs(a->sin_port));
        table = "/proc/net/tcp";
    } else if (addr->sa_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const void *)addr;
        uint32_t w[4];

        memcpy(w, &a->sin6_addr, sizeof(w));
        snprintf(want, sizeof(want), "%08X%08X%08X%08X:%04X", w[0], w[1],
                 w[2], w[3], ntohs(a->sin6_port));
        table = "/proc/net/tcp6";
    } else {
        return 0;
    }
    if ((f = fopen(table, "re")) == NULL) {
        return 0;
    }
    /* sl local rem st tx:rx tr:when retrnsmt uid timeout inode */
    while (found == 0 && getline(&line, &cap, f) > 0) {
        if (sscanf(line, "%*s %47s %*s %3s %*s %*s %*s %*s %*s %" SCNu64,
                   local, state, &inode) == 3 &&
            strcmp(state, "0A") == 0 && strcmp(local, want) == 0) {
            found = inode;
        }
    }
    free(line);
    fclose(f);
    return found;
}

/* The next descriptor in dp (a /proc/<pid>/fd directory, at dir) that
 * is a socket: its number, with its link ("socket:[inode]") in link;
 * or -1 at the end. */
static int
next_socket(DIR *dp, const char *dir, char link[64])
{
    char path[600];
    struct dirent *d;

    while ((d = readdir(dp)) != NULL) {
        ssize_t len;

        snprintf(path, sizeof(path), "%s/%s", dir, d->d_name);
        if (isdigit((unsigned char)d->d_name[0]) &&
            (len = readlink(path, link, 63)) > 0) {
            link[len] = '\0';
            if (strncmp(link, "socket:", 7) == 0) {
                return atoi(d->d_name);
            }
        }
    }
    return -1;
}

/* The descriptor of /proc/<pid> that is the socket named want: its
 * number, or -1. */
static int
socket_fd(const char *pid, const char *want)
{
    char dir[300], link[64];
    int fdnum;
    DIR *dp;

    snprintf(dir, sizeof(dir), "/proc/%s/fd", pid);
    if ((dp = opendir(dir)) == NULL) {
        return -1;
    }
    while ((fdnum = next_socket(dp, dir, link)) >= 0 &&
           strcmp(link, want) != 0) {
    }
    closedir(dp);
    return fdnum;
}

pid_t
foreign_listener(const struct sockaddr *addr, int *fdnum)
{
    uint64_t inode = listening_inode(addr);
    char want[48];
    struct dirent *d;
    pid_t self = getpid(), found = 0;
    DIR *proc;

    if (inode == 0 || (proc = opendir("/proc")) == NULL) {
        return 0;
    }
    snprintf(want, sizeof(want), "socket:[%" PRIu64 "]", inode);
    while (found == 0 && (d = readdir(proc)) != NULL) {
        if (isdigit((unsigned char)d->d_name[0]) &&
            atol(d->d_name) != (long)self &&
            (*fdnum = socket_fd(d->d_name, want)) >= 0) {
            found = (pid_t)atol(d->d_name);
        }
    }
    closedir(proc);
    return found;
}

int
foreign_getfd(int pidfd, int fdnum)
{
    return (int)syscall(SYS_pidfd_getfd, pidfd, fdnum, 0);
}

bool
foreign_file_open(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    bool open_elsewhere;

    if (fd < 0) {
        return false;
    }
    open_elsewhere = fcntl(fd, F_SETLEASE, F_WRLCK) != 0 && errno == EAGAIN;
    if (!open_elsewhere) {
        fcntl(fd, F_SETLEASE, F_UNLCK);
    }
    close(fd);
    return open_elsewhere;
}

int
foreign_pidfd(pid_t pid)
{
    return (int)syscall(SYS_pidfd_open, pid, 0);
}

/* A listening stream socket (TCP or unix)? */
static bool
listener(int fd)
{
    struct sock_info si;

    return sock_info(fd, &si) == 0 && si.type == SOCK_STREAM &&
           si.listening;
}

int
foreign_take_listeners(pid_t pid, int pidfd, int *fds, size_t max)
{
    char dir[32], link[64];
    size_t n = 0;
    int fdnum;
    DIR *dp;

    snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
    if ((dp = opendir(dir)) == NULL) {
        return -1;
    }
    while (n < max && (fdnum = next_socket(dp, dir, link)) >= 0) {
        int fd = foreign_getfd(pidfd, fdnum);

        if (fd < 0 && errno == EPERM) {
            closedir(dp);
            while (n > 0) {
                close(fds[--n]);
            }
            errno = EPERM;
            return -1;
        }
        if (fd >= 0 && listener(fd)) {
            fds[n++] = fd;      /* close-on-exec, as pidfd_getfd sets */
        } else if (fd >= 0) {
            close(fd);
        }
    }
    closedir(dp);
    return (int)n;
}

int
foreign_wait(int pidfd)
{
    struct pollfd p = { .fd = pidfd, .events = POLLIN };
    int rc;

    while ((rc = poll(&p, 1, -1)) < 0 && errno == EINTR) {
    }
    return rc > 0 ? 0 : -1;
}

void
foreign_name(pid_t pid, char *out, size_t len)
{
    char path[64];
    FILE *f;

    snprintf(out, len, "?");
    snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
    if ((f = fopen(path, "re")) != NULL) {
        if (fgets(out, (int)len, f) != NULL) {
            out[strcspn(out, "\n")] = '\0';
        }
        fclose(f);
    }
}
