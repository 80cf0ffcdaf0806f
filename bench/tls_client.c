/*
 * tls_client.c: mcload's TLS client (tls_client.h).  It takes any server
 * certificate: a benchmark measures the server, not the trust chain.
 */
#include "config.h"

#include "bench/tls_client.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#ifdef ENABLE_TLS

#include <openssl/err.h>
#include <openssl/ssl.h>

struct tls_client {
    SSL *ssl;
};

static SSL_CTX *ctx;

int
tls_client_init(void)
{
    ctx = SSL_CTX_new(TLS_client_method());
    if (ctx == NULL) {
        fprintf(stderr, "mcload: no TLS context\n");
        return -1;
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
                          SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_read_ahead(ctx, 1);
    return 0;
}

void
tls_client_done(void)
{
    SSL_CTX_free(ctx);
    ctx = NULL;
}

struct tls_client *
tls_client_connect(int fd)
{
    struct tls_client *t = calloc(1, sizeof(*t));

    if (t == NULL || (t->ssl = SSL_new(ctx)) == NULL ||
        SSL_set_fd(t->ssl, fd) != 1 || SSL_connect(t->ssl) != 1) {
        char why[256] = "out of memory";

        if (ERR_peek_error() != 0) {
            ERR_error_string_n(ERR_get_error(), why, sizeof(why));
        }
        fprintf(stderr, "mcload: TLS handshake: %s\n", why);
        tls_client_free(t);
        return NULL;
    }
    return t;
}

void
tls_client_free(struct tls_client *t)
{
    if (t != NULL) {
        SSL_free(t->ssl);
        free(t);
    }
}

/* r <= 0 from SSL_read/SSL_write, as a system call's result. */
static ssize_t
result(struct tls_client *t, int r)
{
    switch (SSL_get_error(t->ssl, r)) {
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:
        errno = EAGAIN;
        return -1;
    case SSL_ERROR_ZERO_RETURN:
        return 0;
    default:
        ERR_clear_error();
        errno = EPROTO;
        return -1;
    }
}

ssize_t
tls_client_read(struct tls_client *t, void *buf, size_t n)
{
    int r = SSL_read(t->ssl, buf, n > 1 << 30 ? 1 << 30 : (int)n);

    return r > 0 ? r : result(t, r);
}

ssize_t
tls_client_write(struct tls_client *t, const void *buf, size_t n)
{
    int r = SSL_write(t->ssl, buf, n > 1 << 30 ? 1 << 30 : (int)n);

    return r > 0 ? r : result(t, r);
}

bool
tls_client_pending(struct tls_client *t)
{
    return SSL_has_pending(t->ssl);
}

#else /* !ENABLE_TLS */

int
tls_client_init(void)
{
    fprintf(stderr, "mcload: built without TLS (install libssl-dev)\n");
    return -1;
}

void tls_client_done(void) {}
struct tls_client *tls_client_connect(int fd) { (void)fd; return NULL; }
void tls_client_free(struct tls_client *t) { (void)t; }

ssize_t
tls_client_read(struct tls_client *t, void *buf, size_t n)
{
    (void)t, (void)buf, (void)n;
    errno = ENOTSUP;
    return -1;
}

ssize_t
tls_client_write(struct tls_client *t, const void *buf, size_t n)
{
    (void)t, (void)buf, (void)n;
    errno = ENOTSUP;
    return -1;
}

bool tls_client_pending(struct tls_client *t) { (void)t; return false; }

#endif
