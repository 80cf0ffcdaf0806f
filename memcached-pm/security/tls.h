/*
 * tls.h: TLS for -Z, with OpenSSL: the server's context (certificate,
 * key, client CAs, the ssl_* options) and one session per encrypted
 * connection.
 *
 * Only transport.h calls the session functions: the rest of the daemon
 * reads and writes bytes through it and never knows whether a connection
 * is encrypted.  A session does its handshake inside its first reads, on
 * the worker that owns the connection, without blocking: a client that
 * stalls mid-handshake is an idle connection the worker's tick closes
 * (tls_expired()).
 *
 * The reads and writes follow the system calls they stand for: bytes,
 * 0 when the peer closed, or -1 with errno (EAGAIN: not now; then
 * tls_wants_write() says whether the session waits to write rather than
 * to read).
 *
 * Locking: the context is replaced whole by refresh_certs (or SIGHUP)
 * under a mutex that tls_new() also takes; a session belongs to one
 * worker thread.
 */
#ifndef MCPM_TLS_H
#define MCPM_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>

struct tls;

/* A listener's TLS, as memcached's -l prefixes set it: none ("notls:",
 * or no -Z), -Z's (ssl_verify_mode), "btls:" (no client certificate
 * asked) or "mtls:" (a client certificate required). */
enum tls_mode { TLS_OFF, TLS_ON, TLS_NOPEER, TLS_PEER };

/* The -l entry past its TLS prefix, if it has one (*mode set, and *name
 * the prefix's name in memcached's refusal without -Z: "otls" for mtls,
 * as memcached words it); else spec itself, nothing set. */
static inline const char *
tls_listen_prefix(const char *spec, enum tls_mode *mode, const char **name)
{
    static const struct {
        const char   *prefix;
        const char   *name;
        enum tls_mode mode;
    } prefixes[] = {
        { "notls:", "notls", TLS_OFF },
        { "btls:", "btls", TLS_NOPEER },
        { "mtls:", "otls", TLS_PEER },
    };

    for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
        size_t n = strlen(prefixes[i].prefix);

        if (strncmp(spec, prefixes[i].prefix, n) == 0) {
            *mode = prefixes[i].mode;
            *name = prefixes[i].name;
            return spec + n;
        }
    }
    return spec;
}

#ifdef ENABLE_TLS

/* Build the context from settings (-Z): 0, or memcached's exit status
 * (EX_USAGE) after a message on stderr. */
int tls_init(void);
void tls_shutdown(void);

/* refresh_certs: load certificate, key and CA file again into a new
 * context that sessions from now on use.  0, or -1 with memcached's
 * message in err (the old context stays). */
int tls_refresh(char *err, size_t len);

/* Seconds since the certificates were last loaded. */
uint64_t tls_since_refresh(void);

/* A session on an accepted socket (server side) of a listener in mode;
 * NULL on failure, counted as a handshake error. */
struct tls *tls_new(int fd, enum tls_mode mode);

/* Send close_notify if the socket takes it, and free the session. */
void tls_free(struct tls *t);

ssize_t tls_read(struct tls *t, void *buf, size_t n);
ssize_t tls_readv(struct tls *t, const struct iovec *iov, int n);
ssize_t tls_writev(struct tls *t, const struct iovec *iov, int n);

/* Decrypted bytes wait inside the session: a read would not block. */
bool tls_pending(const struct tls *t);

/* The last EAGAIN waits for the socket to be writable. */
bool tls_wants_write(const struct tls *t);

/* The handshake has not finished and the session is older than
 * ssl_handshake_timeout seconds (now and born in clock seconds): counted
 * as a handshake error; the caller closes it. */
bool tls_expired(struct tls *t, uint32_t born, uint32_t now);

/* The client certificate's common name into out, once the handshake is
 * done: false (out "") when the client showed none. */
bool tls_peer_cn(const struct tls *t, char *out, size_t len);

#endif /* ENABLE_TLS */

#endif
