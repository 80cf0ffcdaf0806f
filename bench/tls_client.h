/*
 * tls_client.h: mcload's TLS client (--tls), with OpenSSL.  A session is
 * set up on a blocking socket (the handshake is not what is measured);
 * the reads and writes after it behave as read() and write() on a
 * non-blocking one: bytes, 0 at the end, -1 with errno (EAGAIN).
 */
#ifndef MCLOAD_TLS_CLIENT_H
#define MCLOAD_TLS_CLIENT_H

#include <stdbool.h>
#include <sys/types.h>

struct tls_client;

/* The client context: 0, or -1 with a message (built without OpenSSL). */
int tls_client_init(void);
void tls_client_done(void);

/* Handshake on fd (blocking); NULL with a message on failure. */
struct tls_client *tls_client_connect(int fd);
void tls_client_free(struct tls_client *t);

ssize_t tls_client_read(struct tls_client *t, void *buf, size_t n);
ssize_t tls_client_write(struct tls_client *t, const void *buf, size_t n);

/* Decrypted bytes wait in the session (read them before polling). */
bool tls_client_pending(struct tls_client *t);

#endif
