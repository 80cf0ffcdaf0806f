/*
 * handover.c: the connections a node hands over, and their state file
 * (handover.h).
 */
#include "config.h"

#include "memcached-pm/conn/handover.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAGIC "MCPM-HO"

struct header {
    char     magic[8];
    uint32_t version;
    uint32_t nconns;
    uint64_t bytes;             /* the whole file */
};

struct record {
    uint8_t  proto;
    uint8_t  flags;
    uint16_t zero;
    uint32_t idle;
    uint32_t nleft;
    char     listen_addr[64];
};

#define REC_UNIX 1u
#define REC_AUTH 2u

/* Room for one more of size `each` in *arr (holding n of cap). */
static int
grow(void **arr, size_t n, size_t *cap, size_t each)
{
    void *p;
    size_t c;

    if (n < *cap) {
        return 0;
    }
    c = *cap ? *cap * 2 : 16;
    if ((p = realloc(*arr, c * each)) == NULL) {
        return -1;
    }
    *arr = p;
    *cap = c;
    return 0;
}

int
handover_add(struct handover *h, const struct handover_conn *c)
{
    if (grow((void **)&h->conns, h->nconns, &h->conns_cap,
             sizeof(*h->conns)) != 0) {
        return -1;
    }
    h->conns[h->nconns++] = *c;
    return 0;
}

int
handover_add_udp(struct handover *h, int fd)
{
    if (grow((void **)&h->udp, h->nudp, &h->udp_cap, sizeof(*h->udp)) != 0) {
        return -1;
    }
    h->udp[h->nudp++] = fd;
    return 0;
}

int
handover_move(struct handover *dst, struct handover *src)
{
    for (size_t i = 0; i < src->nconns; i++) {
        if (handover_add(dst, &src->conns[i]) != 0) {
            return -1;
        }
        src->conns[i].left = NULL;      /* dst owns it */
        src->conns[i].fd = -1;
    }
    for (size_t i = 0; i < src->nudp; i++) {
        if (handover_add_udp(dst, src->udp[i]) != 0) {
            return -1;
        }
        src->udp[i] = -1;
    }
    handover_free(src, false);
    return 0;
}

void
handover_free(struct handover *h, bool close_fds)
{
    for (size_t i = 0; i < h->nconns; i++) {
        if (close_fds && h->conns[i].fd >= 0) {
            close(h->conns[i].fd);
        }
        free(h->conns[i].left);
    }
    for (size_t i = 0; close_fds && i < h->nudp; i++) {
        if (h->udp[i] >= 0) {
            close(h->udp[i]);
        }
    }
    free(h->conns);
    free(h->udp);
    memset(h, 0, sizeof(*h));
}

/* ---- the state file --------------------------------------------------- */

static int
write_all(int fd, const void *p, size_t n)
{
    const char *b = p;

    while (n > 0) {
        ssize_t w = write(fd, b, n);

        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            return -1;
        }
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

int
handover_save(const struct handover *h)
{
    struct header hd = { MAGIC, HANDOVER_VERSION, (uint32_t)h->nconns,
                         sizeof(hd) };
    int fd = memfd_create("mcpm-handover", MFD_CLOEXEC);

    if (fd < 0) {
        return -1;
    }
    for (size_t i = 0; i < h->nconns; i++) {
        hd.bytes += sizeof(struct record) + h->conns[i].nleft;
    }
    if (write_all(fd, &hd, sizeof(hd)) != 0) {
        goto fail;
    }
    for (size_t i = 0; i < h->nconns; i++) {
        const struct handover_conn *c = &h->conns[i];
        struct record r = {
            .proto = c->proto,
            .flags = (uint8_t)((c->is_unix ? REC_UNIX : 0) |
                               (c->authenticated ? REC_AUTH : 0)),
            .idle = c->idle,
            .nleft = c->nleft,
        };

        memcpy(r.listen_addr, c->listen_addr, sizeof(r.listen_addr));
        if (write_all(fd, &r, sizeof(r)) != 0 ||
            (c->nleft > 0 && write_all(fd, c->left, c->nleft) != 0)) {
            goto fail;
        }
    }
    if (lseek(fd, 0, SEEK_SET) != 0) {
        goto fail;
    }
    return fd;
fail:
    close(fd);
    return -1;
}

/* Record i at *off of the mapped file (size n) into c; false when it
 * runs past the end. */
static bool
read_record(const char *base, size_t n, size_t *off, struct handover_conn *c)
{
    struct record r;

    if (n - *off < sizeof(r)) {
        return false;
    }
    memcpy(&r, base + *off, sizeof(r));
    *off += sizeof(r);
    if (n - *off < r.nleft) {
        return false;
    }
    memset(c, 0, sizeof(*c));
    c->proto = r.proto;
    c->is_unix = (r.flags & REC_UNIX) != 0;
    c->authenticated = (r.flags & REC_AUTH) != 0;
    c->idle = r.idle;
    memcpy(c->listen_addr, r.listen_addr, sizeof(c->listen_addr));
    c->listen_addr[sizeof(c->listen_addr) - 1] = '\0';
    c->nleft = r.nleft;
    c->left = (char *)base + *off;      /* copied by the caller */
    *off += r.nleft;
    return true;
}

/* The mapped file's records into h; -1 with err on a garbled one. */
static int
load_records(const char *base, size_t n, struct handover *h,
             int (*fd_of)(unsigned i, void *arg), void *arg,
             char *err, size_t len)
{
    struct header hd;
    struct handover got = { 0 };
    size_t off = sizeof(hd);

    memcpy(&hd, base, sizeof(hd));
    if (memcmp(hd.magic, MAGIC, sizeof(hd.magic)) != 0 || hd.bytes != n) {
        snprintf(err, len, "not a handover state file");
        return -1;
    }
    if (hd.version < HANDOVER_VERSION_MIN || hd.version > HANDOVER_VERSION) {
        snprintf(err, len, "its layout is version %u, this build reads "
                 "%u to %u", hd.version, HANDOVER_VERSION_MIN,
                 HANDOVER_VERSION);
        return -1;
    }
    for (uint32_t i = 0; i < hd.nconns; i++) {
        struct handover_conn c;
        char *copy = NULL;

        if (!read_record(base, n, &off, &c)) {
            snprintf(err, len, "record %u runs past its end", i);
            handover_free(&got, true);
            return -1;
        }
        if ((c.fd = fd_of(i, arg)) < 0) {
            continue;           /* its socket did not come */
        }
        if (c.nleft > 0 && (copy = malloc(c.nleft)) == NULL) {
            close(c.fd);
            continue;
        }
        if (copy != NULL) {
            memcpy(copy, c.left, c.nleft);
        }
        c.left = copy;
        if (handover_add(&got, &c) != 0) {
            close(c.fd);
            free(copy);
        }
    }
    if (handover_move(h, &got) != 0) {
        handover_free(&got, true);
        snprintf(err, len, "out of memory");
        return -1;
    }
    return 0;
}

int
handover_load(int memfd, struct handover *h,
              int (*fd_of)(unsigned i, void *arg), void *arg,
              char *err, size_t len)
{
    struct stat st;
    void *base;
    int rc;

    if (fstat(memfd, &st) != 0 || (size_t)st.st_size < sizeof(struct header)) {
        snprintf(err, len, "the state file is short");
        return -1;
    }
    base = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, memfd, 0);
    if (base == MAP_FAILED) {
        snprintf(err, len, "cannot map the state file: %s", strerror(errno));
        return -1;
    }
    rc = load_records(base, (size_t)st.st_size, h, fd_of, arg, err, len);
    munmap(base, (size_t)st.st_size);
    return rc;
}
