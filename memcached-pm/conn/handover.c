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

/* version 4: after struct header */
struct header4 {
    uint32_t closed;
    uint32_t zero;
};

static size_t
header_size(uint32_t version)
{
    return sizeof(struct header) +
           (version >= 4 ? sizeof(struct header4) : 0);
}

struct record {
    uint8_t  proto;
    uint8_t  flags;
    uint16_t zero;
    uint32_t idle;
    uint32_t nleft;
    char     listen_addr[64];
};

/* version 4: after struct record */
struct record4 {
    int32_t  presented;
    uint32_t peer_len;
    struct sockaddr_in6 peer;
};

#define REC_UNIX 1u
#define REC_AUTH 2u
#define REC_BUSY 4u

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
handover_reserve(struct handover *h, size_t n)
{
    struct handover_conn *p;

    if (h->conns_cap - h->nconns >= n) {
        return 0;
    }
    if ((p = realloc(h->conns, (h->nconns + n) * sizeof(*p))) == NULL) {
        return -1;
    }
    /* touched now: its pages' faults are no part of a pause */
    memset(p + h->nconns, 0, n * sizeof(*p));
    h->conns = p;
    h->conns_cap = h->nconns + n;
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
handover_add_dead(struct handover *h, int fd)
{
    if (grow((void **)&h->dead, h->ndead, &h->dead_cap,
             sizeof(*h->dead)) != 0) {
        return -1;
    }
    h->dead[h->ndead++] = fd;
    return 0;
}

int
handover_move(struct handover *dst, struct handover *src)
{
    if (dst->nconns == 0 && dst->nudp == 0 && dst->ndead == 0 &&
        dst->conns_cap < src->conns_cap) {
        /* all of src, as it is */
        uint32_t closed = dst->closed;

        handover_free(dst, false);
        *dst = *src;
        dst->closed += closed;
        memset(src, 0, sizeof(*src));
        return 0;
    }
    dst->closed += src->closed;
    src->closed = 0;
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
    for (size_t i = 0; i < src->ndead; i++) {
        if (handover_add_dead(dst, src->dead[i]) != 0) {
            return -1;
        }
        src->dead[i] = -1;
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
    for (size_t i = 0; i < h->ndead; i++) {
        if (h->dead[i] >= 0) {
            close(h->dead[i]);
        }
    }
    free(h->conns);
    free(h->udp);
    free(h->dead);
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

static size_t
record_size(uint32_t version)
{
    return sizeof(struct record) +
           (version >= 4 ? sizeof(struct record4) : 0);
}

int
handover_save(const struct handover *h, uint32_t version)
{
    struct header hd = { MAGIC, version, (uint32_t)h->nconns,
                         header_size(version) };
    struct header4 hd4 = { h->closed, 0 };
    int fd = memfd_create("mcpm-handover", MFD_CLOEXEC);
    char *buf, *p;
    int rc;

    if (fd < 0) {
        return -1;
    }
    for (size_t i = 0; i < h->nconns; i++) {
        hd.bytes += record_size(version) + h->conns[i].nleft;
    }
    /* written whole, in one call: thousands of records are a pause's
     * worth of system calls one by one */
    if ((buf = p = malloc(hd.bytes)) == NULL) {
        close(fd);
        return -1;
    }
    memcpy(p, &hd, sizeof(hd));
    p += sizeof(hd);
    if (version >= 4) {
        memcpy(p, &hd4, sizeof(hd4));
        p += sizeof(hd4);
    }
    for (size_t i = 0; i < h->nconns; i++) {
        const struct handover_conn *c = &h->conns[i];
        struct record r = {
            .proto = c->proto,
            .flags = (uint8_t)((c->is_unix ? REC_UNIX : 0) |
                               (c->authenticated ? REC_AUTH : 0) |
                               (version >= 4 && c->busy ? REC_BUSY : 0)),
            .idle = c->idle,
            .nleft = c->nleft,
        };
        struct record4 r4 = {
            .presented = c->presented,
            .peer_len = c->peer_len,
            .peer = c->peer,
        };

        memcpy(r.listen_addr, c->listen_addr, sizeof(r.listen_addr));
        memcpy(p, &r, sizeof(r));
        p += sizeof(r);
        if (version >= 4) {
            memcpy(p, &r4, sizeof(r4));
            p += sizeof(r4);
        }
        if (c->nleft > 0) {
            memcpy(p, c->left, c->nleft);
            p += c->nleft;
        }
    }
    rc = write_all(fd, buf, hd.bytes);
    free(buf);
    if (rc != 0 || lseek(fd, 0, SEEK_SET) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* The record at *off of the mapped file (size n, layout `version`) into
 * c; false when it runs past the end or says what cannot be. */
static bool
read_record(const char *base, size_t n, uint32_t version, size_t *off,
            struct handover_conn *c)
{
    struct record r;
    struct record4 r4 = { .presented = -1 };

    if (n - *off < record_size(version)) {
        return false;
    }
    memcpy(&r, base + *off, sizeof(r));
    *off += sizeof(r);
    if (version >= 4) {
        memcpy(&r4, base + *off, sizeof(r4));
        *off += sizeof(r4);
    }
    if (n - *off < r.nleft || r4.presented < -1 ||
        r4.peer_len > sizeof(r4.peer)) {
        return false;
    }
    memset(c, 0, sizeof(*c));
    c->proto = r.proto;
    c->is_unix = (r.flags & REC_UNIX) != 0;
    c->authenticated = (r.flags & REC_AUTH) != 0;
    c->busy = (r.flags & REC_BUSY) != 0 || version < 4;
    c->idle = r.idle;
    memcpy(c->listen_addr, r.listen_addr, sizeof(c->listen_addr));
    c->listen_addr[sizeof(c->listen_addr) - 1] = '\0';
    c->presented = r4.presented;
    c->peer_len = r4.peer_len;
    c->peer = r4.peer;
    c->nleft = r.nleft;
    c->left = (char *)base + *off;      /* copied by the caller */
    *off += r.nleft;
    return true;
}

/* The mapped file's records into h; -1 with err on a garbled one. */
static int
load_records(const char *base, size_t n, struct handover *h,
             int (*fd_of)(const struct handover_conn *c, unsigned i,
                          void *arg),
             void *arg, char *err, size_t len)
{
    struct header hd;
    struct header4 hd4 = { 0, 0 };
    struct handover got = { 0 };
    size_t off;

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
    if ((off = header_size(hd.version)) > n) {
        snprintf(err, len, "the state file is short");
        return -1;
    }
    if (hd.version >= 4) {
        memcpy(&hd4, base + sizeof(hd), sizeof(hd4));
    }
    if (hd.nconns > (n - off) / sizeof(struct record) ||
        handover_reserve(&got, hd.nconns) != 0) {
        snprintf(err, len, "%u records cannot be", hd.nconns);
        return -1;
    }
    for (uint32_t i = 0; i < hd.nconns; i++) {
        struct handover_conn c;
        char *copy = NULL;

        if (!read_record(base, n, hd.version, &off, &c)) {
            snprintf(err, len, "record %u is garbled", i);
            handover_free(&got, true);
            return -1;
        }
        if ((c.fd = fd_of(&c, i, arg)) < 0) {
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
    got.closed = hd4.closed;
    if (handover_move(h, &got) != 0) {
        handover_free(&got, true);
        snprintf(err, len, "out of memory");
        return -1;
    }
    return 0;
}

int
handover_load(int memfd, struct handover *h,
              int (*fd_of)(const struct handover_conn *c, unsigned i,
                           void *arg),
              void *arg, char *err, size_t len)
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
