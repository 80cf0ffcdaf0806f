/*
 * foreign.c: another program's process on the memory file (foreign.h).
 */
#include "config.h"

#include "memcached-pm/foreign.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "memcached-pm/given.h"

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
    char dir[32], link[64], path[300];
    struct dirent *d;
    size_t n = 0;
    DIR *dp;

    snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
    if ((dp = opendir(dir)) == NULL) {
        return -1;
    }
    while (n < max && (d = readdir(dp)) != NULL) {
        ssize_t len;
        int fd;

        snprintf(path, sizeof(path), "%s/%s", dir, d->d_name);
        if (!isdigit((unsigned char)d->d_name[0]) ||
            (len = readlink(path, link, sizeof(link) - 1)) < 0) {
            continue;
        }
        link[len] = '\0';
        if (strncmp(link, "socket:", 7) != 0) {
            continue;
        }
        fd = (int)syscall(SYS_pidfd_getfd, pidfd, atoi(d->d_name), 0);
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
