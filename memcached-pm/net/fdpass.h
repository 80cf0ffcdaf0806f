/*
 * fdpass.h: file descriptors sent beside a message as SCM_RIGHTS, the
 * way both the takeover socket (takeover.c) and systemd's notification
 * socket (sdaemon.c) carry them.
 */
#ifndef MCPM_FDPASS_H
#define MCPM_FDPASS_H

#include <stddef.h>
#include <string.h>
#include <sys/socket.h>

#define FDPASS_MAX 253          /* the kernel's SCM_MAX_FD */

/* Room for a control message of FDPASS_MAX descriptors. */
union fdpass_ctl {
    struct cmsghdr h;
    char           buf[CMSG_SPACE(sizeof(int) * FDPASS_MAX)];
};

/* Attach n descriptors (at most FDPASS_MAX) to mh, through ctl; none:
 * mh is left without a control message. */
static inline void
fdpass_attach(struct msghdr *mh, union fdpass_ctl *ctl, const int *fds,
              size_t n)
{
    if (n == 0) {
        return;
    }
    memset(ctl, 0, sizeof(*ctl));
    mh->msg_control = ctl->buf;
    mh->msg_controllen = CMSG_SPACE(sizeof(int) * n);
    ctl->h.cmsg_level = SOL_SOCKET;
    ctl->h.cmsg_type = SCM_RIGHTS;
    ctl->h.cmsg_len = CMSG_LEN(sizeof(int) * n);
    memcpy(CMSG_DATA(&ctl->h), fds, sizeof(int) * n);
}

#endif
