/*
 * link.c: a client connection to another memcached node (link.h).
 */
#include "config.h"

#include "memcached-pm/migrate/link.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define IO_MAX (64 * 1024)              /* bytes a read asks for */

int
link_dial(const char *where)
{
    int fd = -1;

    if (where[0] == '/') {
        struct sockaddr_un a = { .sun_family = AF_UNIX };

        if (strlen(where) >= sizeof(a.sun_path)) {
            return -1;
        }
        strcpy(a.sun_path, where);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
            close(fd);
            fd = -1;
        }
    } else {
        char host[256];
        const char *colon = strrchr(where, ':');
        struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res, *r;
        size_t hl;

        if (colon == NULL || (hl = (size_t)(colon - where)) >= sizeof(host)) {
            return -1;
        }
        memcpy(host, where, hl);
        host[hl] = '\0';
        if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') {
            memmove(host, host + 1, hl - 2);
            host[hl - 2] = '\0';
        }
        if (getaddrinfo(host, colon + 1, &hints, &res) != 0) {
            return -1;
        }
        for (r = res; r != NULL && fd < 0; r = r->ai_next) {
            fd = socket(r->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
            if (fd >= 0 && connect(fd, r->ai_addr, r->ai_addrlen) != 0) {
                close(fd);
                fd = -1;
            }
        }
        freeaddrinfo(res);
    }
    if (fd >= 0) {
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    }
    return fd;
}

static bool
grow(char **buf, size_t *cap, size_t need)
{
    size_t n = *cap ? *cap : 4096;
    char *b;

    while (n < need) {
        n *= 2;
    }
    if (n == *cap) {
        return true;
    }
    if ((b = realloc(*buf, n)) == NULL) {
        return false;
    }
    *buf = b;
    *cap = n;
    return true;
}

/* Read what the socket has: false on an error (eof is set at the end). */
bool
link_read(struct link *l)
{
    if (l->in_off > 0 && l->in_off == l->in_len) {
        l->in_off = l->in_len = 0;
    } else if (l->in_off > l->in_cap / 2) {
        memmove(l->in, l->in + l->in_off, l->in_len - l->in_off);
        l->in_len -= l->in_off;
        l->in_off = 0;
    }
    if (!grow(&l->in, &l->in_cap, l->in_len + IO_MAX)) {
        return false;
    }
    for (;;) {
        ssize_t n = read(l->fd, l->in + l->in_len, l->in_cap - l->in_len);

        if (n > 0) {
            l->in_len += (size_t)n;
            return true;
        }
        if (n == 0) {
            l->eof = true;
            return true;
        }
        if (errno == EINTR) {
            continue;
        }
        if (errno == ECONNRESET) {
            l->eof = true;          /* the node went away, unread bytes
                                       and all */
            return true;
        }
        return errno == EAGAIN;
    }
}

bool
link_write(struct link *l)
{
    while (l->out_off < l->out_len) {
        ssize_t n = write(l->fd, l->out + l->out_off, l->out_len - l->out_off);

        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            if (errno == EPIPE || errno == ECONNRESET) {
                l->eof = true;
                l->out_off = l->out_len = 0;
                return true;
            }
            return errno == EAGAIN;
        }
        l->out_off += (size_t)n;
    }
    l->out_off = l->out_len = 0;
    return true;
}

bool
link_queue(struct link *l, const char *s, size_t n)
{
    if (!grow(&l->out, &l->out_cap, l->out_len + n)) {
        return false;
    }
    memcpy(l->out + l->out_len, s, n);
    l->out_len += n;
    return true;
}

/* The next whole line, without its "\r\n" or "\n", copied into dst
 * (cut to cap - 1 bytes) and NUL-terminated; NULL when none is whole.
 * *span: the bytes it takes in the buffer, for link_take(). */
char *
link_peek(const struct link *l, char *dst, size_t cap, size_t *span)
{
    const char *s, *nl;
    size_t n;

    if (l->in_off == l->in_len) {
        return NULL;
    }
    s = l->in + l->in_off;
    if ((nl = memchr(s, '\n', l->in_len - l->in_off)) == NULL) {
        return NULL;
    }
    n = (size_t)(nl - s);
    *span = n + 1;
    if (n > 0 && s[n - 1] == '\r') {
        n--;
    }
    if (n >= cap) {
        n = cap - 1;
    }
    memcpy(dst, s, n);
    dst[n] = '\0';
    return dst;
}

char *
link_line(struct link *l, char *dst, size_t cap)
{
    size_t span;
    char *s = link_peek(l, dst, cap, &span);

    if (s != NULL) {
        l->in_off += span;
    }
    return s;
}

void
link_close(struct link *l)
{
    if (l->fd >= 0) {
        close(l->fd);
    }
    free(l->in);
    free(l->out);
    memset(l, 0, sizeof(*l));
    l->fd = -1;
}

char *
link_wait_line(struct link *l, char *dst, size_t cap, atomic_bool *stop)
{
    for (int i = 0; i < 50 && !atomic_load(stop); i++) {
        struct pollfd p = { .fd = l->fd, .events = POLLIN };
        char *s = link_line(l, dst, cap);

        if (s != NULL) {
            return s;
        }
        if (l->eof || !link_write(l) ||
            (poll(&p, 1, 100) > 0 && !link_read(l))) {
            return NULL;
        }
    }
    return NULL;
}

static int
hexval(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

/* memcached's uriencode() undone: the key's bytes, or -1. */
int
link_uri_key(const char *s, size_t n, char *out)
{
    size_t o = 0;

    for (size_t i = 0; i < n; i++) {
        if (o == LINK_KEY_MAX) {
            return -1;
        }
        if (s[i] == '%') {
            int hi, lo;

            if (i + 2 >= n || (hi = hexval(s[i + 1])) < 0 ||
                (lo = hexval(s[i + 2])) < 0) {
                return -1;
            }
            out[o++] = (char)(hi << 4 | lo);
            i += 2;
        } else {
            out[o++] = s[i];
        }
    }
    return o > 0 ? (int)o : -1;
}

/* The value of `name=` among space-separated words, its length in *n. */
const char *
link_word(const char *line, const char *name, size_t *n)
{
    size_t nl = strlen(name);

    for (const char *p = line; p != NULL && *p != '\0';
         p = strchr(p, ' '), p = p != NULL ? p + 1 : NULL) {
        if (strncmp(p, name, nl) == 0) {
            const char *e = strchr(p + nl, ' ');

            *n = e != NULL ? (size_t)(e - p - nl) : strlen(p + nl);
            return p + nl;
        }
    }
    return NULL;
}
