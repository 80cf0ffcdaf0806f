/*
 * tls.c: the OpenSSL context and sessions behind -Z (tls.h).
 *
 * Reads use read-ahead: one read() system call takes in every record the
 * socket holds, and a read stops as soon as OpenSSL has nothing buffered,
 * so a drained socket costs no extra EAGAIN round.  Writes gather the
 * reply queue into a buffer of ssl_wbuf_size bytes per worker thread and
 * hand it to one SSL_write (one record per 16 KB), as a sendmsg() would.
 *
 * Locking: ctx_lock guards the context pointer (refresh_certs swaps it);
 * a session belongs to its worker thread; the counters are the shared
 * server counters (stats.h).
 */
#include "config.h"

#ifdef ENABLE_TLS

#include "memcached-pm/security/tls.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "memcached-pm/base/log.h"
#include "memcached-pm/base/settings.h"
#include "memcached-pm/base/stats.h"
#include "storage/base/clock.h"

#define SESSION_CONTEXT "memcached"

struct tls {
    SSL  *ssl;
    bool  want_write;       /* the last EAGAIN waits for POLLOUT */
    bool  established;      /* the handshake finished */
};

static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static SSL_CTX *ctx;
static rel_time_t loaded_at;    /* clock seconds of the last load */

/* Each worker's gather buffer for SSL_write, freed when its thread ends. */
static pthread_key_t wbuf_key;
static pthread_once_t wbuf_once = PTHREAD_ONCE_INIT;

static void
wbuf_key_make(void)
{
    (void)pthread_key_create(&wbuf_key, free);
}

static char *
wbuf(void)
{
    char *b;

    pthread_once(&wbuf_once, wbuf_key_make);
    b = pthread_getspecific(wbuf_key);
    if (b == NULL && (b = malloc(settings.ssl_wbuf_size)) != NULL) {
        pthread_setspecific(wbuf_key, b);
    }
    return b;
}

/* The first error OpenSSL queued, as text; the queue is emptied. */
static void
ssl_error_text(char *out, size_t len)
{
    unsigned long e = ERR_get_error();

    if (e != 0) {
        ERR_error_string_n(e, out, len);
    } else {
        snprintf(out, len, "%s", strerror(errno));
    }
    ERR_clear_error();
}

/* -o ssl_min_version's 0-3 as OpenSSL's protocol numbers. */
static int
version_code(int v)
{
    static const int codes[] = {
        TLS1_VERSION, TLS1_1_VERSION, TLS1_2_VERSION, TLS1_3_VERSION
    };

    return codes[v >= 0 && v < 4 ? v : 2];
}

static int
on_new_session(SSL *ssl, SSL_SESSION *sess)
{
    (void)ssl;
    (void)sess;
    SERVER_STAT_INCR(ssl_new_sessions);
    return 0;       /* the cache keeps its own reference */
}

/* Load certificate chain, key and CA file into x: 0, or -1 with
 * memcached's message in err. */
static int
load_certs(SSL_CTX *x, char *err, size_t len)
{
    const char *key = settings.ssl_key ? settings.ssl_key
                      : settings.ssl_chain_cert;
    char why[256];

    if (settings.ssl_chain_cert == NULL) {
        snprintf(err, len, "Error loading the certificate chain: (null) : "
                 "-o ssl_chain_cert=<file> is needed with -Z");
        return -1;
    }
    if (SSL_CTX_use_certificate_chain_file(x, settings.ssl_chain_cert) != 1) {
        ssl_error_text(why, sizeof(why));
        snprintf(err, len, "Error loading the certificate chain: %s : %s",
                 settings.ssl_chain_cert, why);
        return -1;
    }
    if (SSL_CTX_use_PrivateKey_file(x, key, settings.ssl_keyformat) != 1) {
        ssl_error_text(why, sizeof(why));
        snprintf(err, len, "Error loading the key: %s : %s", key, why);
        return -1;
    }
    if (SSL_CTX_check_private_key(x) != 1) {
        ssl_error_text(why, sizeof(why));
        snprintf(err, len, "Error validating the certificate: %s", why);
        return -1;
    }
    if (settings.ssl_ca_cert != NULL) {
        STACK_OF(X509_NAME) *names;

        if (SSL_CTX_load_verify_locations(x, settings.ssl_ca_cert,
                                          NULL) != 1 ||
            (names = SSL_load_client_CA_file(settings.ssl_ca_cert)) == NULL) {
            ssl_error_text(why, sizeof(why));
            snprintf(err, len, "Error loading the CA certificate: %s : %s",
                     settings.ssl_ca_cert, why);
            return -1;
        }
        SSL_CTX_set_client_CA_list(x, names);
    }
    return 0;
}

/* A new context from the settings: NULL with a message in err. */
static SSL_CTX *
ctx_build(char *err, size_t len)
{
    SSL_CTX *x = SSL_CTX_new(TLS_server_method());

    if (x == NULL) {
        snprintf(err, len, "Error creating the TLS context");
        return NULL;
    }
    SSL_CTX_set_min_proto_version(x, version_code(settings.ssl_min_version));
    if (load_certs(x, err, len) != 0) {
        SSL_CTX_free(x);
        return NULL;
    }
    SSL_CTX_set_verify(x, settings_ssl_verify_flags(), NULL);
    if (settings.ssl_ciphers != NULL &&
        SSL_CTX_set_cipher_list(x, settings.ssl_ciphers) != 1) {
        ERR_clear_error();
        snprintf(err, len, "Error setting the provided cipher(s): %s",
                 settings.ssl_ciphers);
        SSL_CTX_free(x);
        return NULL;
    }
    if (settings.ssl_session_cache) {
        SSL_CTX_sess_set_new_cb(x, on_new_session);
        SSL_CTX_set_session_cache_mode(x, SSL_SESS_CACHE_SERVER);
        SSL_CTX_set_session_id_context(x,
            (const unsigned char *)SESSION_CONTEXT, strlen(SESSION_CONTEXT));
    } else {
        SSL_CTX_set_session_cache_mode(x, SSL_SESS_CACHE_OFF);
    }
    if (settings.ssl_kernel_tls) {
        /* Taken where the kernel has the tls module; OpenSSL falls back
         * to user space where it does not. */
        SSL_CTX_set_options(x, SSL_OP_ENABLE_KTLS);
    }
    /* No renegotiation (a client could make the server do handshakes on
     * demand); a peer that hangs up without close_notify is a close, not
     * an error. */
    SSL_CTX_set_options(x, SSL_OP_NO_RENEGOTIATION |
                           SSL_OP_IGNORE_UNEXPECTED_EOF);
    SSL_CTX_set_mode(x, SSL_MODE_ENABLE_PARTIAL_WRITE |
                        SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_read_ahead(x, 1);
    return x;
}

int
tls_init(void)
{
    char err[1024];

    if (settings.port == 0) {
        fprintf(stderr, "ERROR: You cannot enable SSL without a TCP port.\n");
        return EX_USAGE;
    }
    OPENSSL_init_ssl(0, NULL);
    if ((ctx = ctx_build(err, sizeof(err))) == NULL) {
        fprintf(stderr, "%s\n", err);
        return EX_USAGE;
    }
    loaded_at = clock_now();
    return 0;
}

void
tls_shutdown(void)
{
    pthread_mutex_lock(&ctx_lock);
    SSL_CTX_free(ctx);
    ctx = NULL;
    pthread_mutex_unlock(&ctx_lock);
}

int
tls_refresh(char *err, size_t len)
{
    SSL_CTX *x, *old;

    if (ctx == NULL) {
        snprintf(err, len, "Error TLS not enabled");
        return -1;
    }
    if ((x = ctx_build(err, len)) == NULL) {
        return -1;
    }
    pthread_mutex_lock(&ctx_lock);
    old = ctx;
    ctx = x;
    __atomic_store_n(&loaded_at, clock_now(), __ATOMIC_RELAXED);
    pthread_mutex_unlock(&ctx_lock);
    SSL_CTX_free(old);      /* live sessions hold their own references */
    return 0;
}

uint64_t
tls_since_refresh(void)
{
    return clock_now() - __atomic_load_n(&loaded_at, __ATOMIC_RELAXED);
}

struct tls *
tls_new(int fd, enum tls_mode mode)
{
    struct tls *t = calloc(1, sizeof(*t));

    if (t != NULL) {
        pthread_mutex_lock(&ctx_lock);
        t->ssl = ctx != NULL ? SSL_new(ctx) : NULL;
        pthread_mutex_unlock(&ctx_lock);
    }
    if (t == NULL || t->ssl == NULL || SSL_set_fd(t->ssl, fd) != 1) {
        if (t != NULL) {
            SSL_free(t->ssl);
        }
        free(t);
        ERR_clear_error();
        SERVER_STAT_INCR(ssl_handshake_errors);
        return NULL;
    }
    if (mode == TLS_NOPEER) {
        SSL_set_verify(t->ssl, SSL_VERIFY_NONE, NULL);
    } else if (mode == TLS_PEER) {
        SSL_set_verify(t->ssl, SSL_VERIFY_PEER |
                       SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
    }
    SSL_set_accept_state(t->ssl);
    return t;
}

void
tls_free(struct tls *t)
{
    if (t == NULL) {
        return;
    }
    if (t->established) {
        (void)SSL_shutdown(t->ssl);     /* best effort: never waits */
    }
    SSL_free(t->ssl);
    ERR_clear_error();
    free(t);
}

bool
tls_peer_cn(const struct tls *t, char *out, size_t len)
{
    X509 *cert = SSL_get0_peer_certificate(t->ssl);

    out[0] = '\0';
    return cert != NULL &&
           X509_NAME_get_text_by_NID(X509_get_subject_name(cert),
                                     NID_commonName, out, (int)len) > 0;
}

/* The handshake just finished. */
static void
established(struct tls *t)
{
    char cn[64];

    t->established = true;
    if (settings.verbose > 1) {
        bool named = tls_peer_cn(t, cn, sizeof(cn));

        log_write("<%d TLS %s %s%s%s", SSL_get_fd(t->ssl),
                  SSL_get_version(t->ssl), SSL_get_cipher_name(t->ssl),
                  named ? " client " : "", cn);
    }
}

/* A call that returned r <= 0: errno set as a system call's would be. */
static ssize_t
failed(struct tls *t, int r, const char *what)
{
    int e = errno;
    char why[256];

    switch (SSL_get_error(t->ssl, r)) {
    case SSL_ERROR_WANT_READ:
        t->want_write = false;
        errno = EAGAIN;
        return -1;
    case SSL_ERROR_WANT_WRITE:
        t->want_write = true;
        errno = EAGAIN;
        return -1;
    case SSL_ERROR_ZERO_RETURN:
        ERR_clear_error();
        return 0;
    case SSL_ERROR_SYSCALL:
        if (ERR_peek_error() == 0 && (e == 0 || e == ECONNRESET)) {
            ERR_clear_error();
            return 0;       /* the peer went away */
        }
        /* fall through */
    default:
        ssl_error_text(why, sizeof(why));
        if (!t->established) {
            SERVER_STAT_INCR(ssl_handshake_errors);
        } else {
            SERVER_STAT_INCR(ssl_proto_errors);
        }
        log_info("<%d TLS %s failed%s: %s", SSL_get_fd(t->ssl), what,
                 t->established ? "" : " in the handshake", why);
        errno = EPROTO;
        return -1;
    }
}

ssize_t
tls_read(struct tls *t, void *buf, size_t n)
{
    size_t got = 0;

    while (got < n) {
        int r = SSL_read(t->ssl, (char *)buf + got,
                         n - got > INT32_MAX ? INT32_MAX : (int)(n - got));

        /* The client's last flight may end the handshake with no data
         * after it: the connection is established all the same (else a
         * client that waits before its first request would be taken for
         * one that never finished, and closed at ssl_handshake_timeout). */
        if (!t->established && SSL_is_init_finished(t->ssl)) {
            established(t);
        }
        if (r <= 0) {
            ssize_t e = failed(t, r, "read");

            if (got == 0) {
                return e;
            }
            if (e < 0 && errno != EAGAIN) {
                return -1;
            }
            break;      /* bytes in hand; EAGAIN or the end comes next */
        }
        got += (size_t)r;
        if (!SSL_has_pending(t->ssl)) {
            break;      /* what the socket had is in; do not ask again */
        }
    }
    return (ssize_t)got;
}

ssize_t
tls_readv(struct tls *t, const struct iovec *iov, int n)
{
    ssize_t total = 0;

    for (int i = 0; i < n; i++) {
        ssize_t r = tls_read(t, iov[i].iov_base, iov[i].iov_len);

        if (r <= 0) {
            return total > 0 ? total : r;
        }
        total += r;
        if ((size_t)r < iov[i].iov_len) {
            break;
        }
    }
    return total;
}

ssize_t
tls_writev(struct tls *t, const struct iovec *iov, int n)
{
    char *b = wbuf();
    size_t len = 0, cap = settings.ssl_wbuf_size;
    int r;

    if (b == NULL) {
        errno = ENOMEM;
        return -1;
    }
    for (int i = 0; i < n && len < cap; i++) {
        size_t part = iov[i].iov_len < cap - len ? iov[i].iov_len : cap - len;

        memcpy(b + len, iov[i].iov_base, part);
        len += part;
    }
    if (len == 0) {
        return 0;
    }
    r = SSL_write(t->ssl, b, (int)len);
    if (r <= 0) {
        ssize_t e = failed(t, r, "write");

        if (e == 0) {
            errno = EPIPE;
        }
        return -1;
    }
    return r;
}

bool
tls_pending(const struct tls *t)
{
    return SSL_has_pending(t->ssl);
}

bool
tls_wants_write(const struct tls *t)
{
    return t->want_write;
}

bool
tls_expired(struct tls *t, uint32_t born, uint32_t now)
{
    if (t->established || settings.ssl_handshake_timeout == 0 ||
        now - born < settings.ssl_handshake_timeout) {
        return false;
    }
    SERVER_STAT_INCR(ssl_handshake_errors);
    log_info("<%d TLS handshake timed out", SSL_get_fd(t->ssl));
    return true;
}

#endif /* ENABLE_TLS */
