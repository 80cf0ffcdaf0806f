/*
 * image.c: the DRAM index across a takeover (image.h).
 */
#include "config.h"

#include "memcached-pm/life/image.h"

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "memcached-pm/base/settings.h"
#include "storage/cache/cache_image.h"

int
image_precopy(const struct takeover_peer *p, int room, int ms)
{
    uint64_t at = 0, len = 0;
    int fd = room >= 0 && cache_image_precopy(&at, &len) == 0 ? room : -1;

    if (takeover_send_preimage(p->fd, fd, at, len) != 0 ||
        takeover_wait(p->fd, TAKEOVER_PRECOPIED, ms) != 0) {
        return -1;
    }
    takeover_step("old", "precopied");
    return 0;
}

int
image_written(int fd, int *delta)
{
    if (delta != NULL) {
        *delta = -1;
    }
    if (fd >= 0 && cache_image_write(fd, delta) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

int
image_send(int sock, int room)
{
    int fds[2] = { -1, -1 }, rc = 0;

    fds[0] = image_written(room, &fds[1]);
    if (fds[0] >= 0) {
        rc = takeover_send_fds(sock, TAKEOVER_IMAGE, fds,
                               fds[1] >= 0 ? 2 : 1);
    }
    for (unsigned i = 0; i < 2; i++) {
        if (fds[i] >= 0) {
            close(fds[i]);
        }
    }
    return rc;
}

void
image_precopy_take(int sock)
{
    uint64_t at = 0, len = 0;
    int fd;

    if (takeover_wait_preimage(sock, -1, &fd, &at, &len) != 0) {
        return;                 /* it went away: takeover_receive() says */
    }
    if (fd >= 0) {
        cache_image_prefill(fd, at, len);
        close(fd);
    }
    takeover_step("new", "precopied");
    takeover_send(sock, TAKEOVER_PRECOPIED);
}

static void *
close_both(void *arg)
{
    int *fds = arg;

    for (unsigned i = 0; i < 2; i++) {
        if (fds[i] >= 0) {
            close(fds[i]);
        }
    }
    free(fds);
    return NULL;
}

void
image_let_go(void)
{
    int *fds;
    pthread_t t;

    if (settings.cache.image_fd < 0 && settings.cache.image_delta_fd < 0) {
        return;
    }
    if ((fds = malloc(2 * sizeof(*fds))) == NULL) {
        int now[2] = { settings.cache.image_fd,
                       settings.cache.image_delta_fd };

        for (unsigned i = 0; i < 2; i++) {
            if (now[i] >= 0) {
                close(now[i]);
            }
        }
    } else {
        fds[0] = settings.cache.image_fd;
        fds[1] = settings.cache.image_delta_fd;
        if (pthread_create(&t, NULL, close_both, fds) == 0) {
            pthread_detach(t);
        } else {
            close_both(fds);
        }
    }
    settings.cache.image_fd = settings.cache.image_delta_fd = -1;
}
