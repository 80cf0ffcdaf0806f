/*
 * sasl_cyrus.h: -S through Cyrus SASL (libsasl2), as Debian's memcached
 * authenticates: mechanisms and users from its configuration
 * ("memcached.conf" in $SASL_CONF_PATH, /etc/sasl2 or /etc/sasl; a sasldb
 * made with saslpasswd2, for example).
 *
 * Used when the build has libsasl2 and either -o sasl_cyrus asks for it
 * or $MEMCACHED_SASL_PWDB is not set; otherwise process_auth.c checks
 * PLAIN against that file itself.  A connection's Cyrus session lives as
 * long as the connection, as memcached's does.
 */
#ifndef MCPM_SASL_CYRUS_H
#define MCPM_SASL_CYRUS_H

#include <stdbool.h>

enum cyrus_result {
    CYRUS_OK,           /* authenticated */
    CYRUS_CONTINUE,     /* send out, wait for a SASL_STEP */
    CYRUS_FAIL
};

#ifdef ENABLE_CYRUS_SASL

/* sasl_server_init: 0, or -1 with a message on stderr. */
int cyrus_init(void);
void cyrus_done(void);

/* Does this server use Cyrus for -S (decided once, by cyrus_init)? */
bool cyrus_in_use(void);

/* A connection's session is *session, made on first use (NULL at
 * first); fd names the connection in log lines. */

/* The mechanisms, space-separated; NULL if Cyrus cannot say. */
const char *cyrus_mechs(void **session);

/* SASL_AUTH (start) and SASL_STEP: the verdict, and the data to send
 * back (valid until the next call on this session). */
enum cyrus_result cyrus_auth(void **session, int fd, bool start,
                             const char *mech, const char *data,
                             unsigned len, const char **out,
                             unsigned *outlen);

void cyrus_session_free(void **session);

#else

static inline bool cyrus_in_use(void) { return false; }
static inline void cyrus_session_free(void **session) { (void)session; }

#endif

#endif
