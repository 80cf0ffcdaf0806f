/*
 * sasl_cyrus.c: -S through libsasl2 (sasl_cyrus.h).
 *
 * Locking: libsasl2 is initialised once before the workers start; each
 * connection's sasl_conn_t is used by its worker alone.
 */
#include "config.h"

#ifdef ENABLE_CYRUS_SASL

#include "memcached-pm/security/sasl_cyrus.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sasl/sasl.h>

#include "memcached-pm/base/log.h"
#include "memcached-pm/base/settings.h"

static bool in_use;

/* Where memcached.conf is: $SASL_CONF_PATH, or the first of memcached's
 * own places that has one. */
static int
get_conf_path(void *context, const char **path)
{
    static const char *const dirs[] = { "/etc/sasl2", "/etc/sasl", NULL };
    static char found[64];

    (void)context;
    *path = getenv("SASL_CONF_PATH");
    for (unsigned i = 0; *path == NULL && dirs[i] != NULL; i++) {
        snprintf(found, sizeof(found), "%s/memcached.conf", dirs[i]);
        if (access(found, F_OK) == 0) {
            snprintf(found, sizeof(found), "%s", dirs[i]);
            *path = found;
        }
    }
    log_info("SASL configuration from: <%s>", *path ? *path : "(none)");
    return *path != NULL ? SASL_OK : SASL_FAIL;
}

static int
on_log(void *context, int level, const char *message)
{
    (void)context;
    if (level <= SASL_LOG_ERR || settings.verbose > 1) {
        log_info("SASL (severity %d): %s", level, message);
    }
    return SASL_OK;
}

/* libsasl2 keeps every callback as int (*)(void); going through
 * void (*)(void) is the cast C allows between function types. */
typedef int (*sasl_fn)(void);
#define CALLBACK(f) ((sasl_fn)(void (*)(void))(f))

static const sasl_callback_t callbacks[] = {
    { SASL_CB_LOG, CALLBACK(on_log), NULL },
    { SASL_CB_GETCONFPATH, CALLBACK(get_conf_path), NULL },
    { SASL_CB_LIST_END, NULL, NULL }
};

int
cyrus_init(void)
{
    in_use = settings.sasl &&
             (settings.sasl_cyrus || getenv("MEMCACHED_SASL_PWDB") == NULL);
    if (!in_use) {
        return 0;
    }
    if (sasl_server_init(callbacks, "memcached") != SASL_OK) {
        fprintf(stderr, "Error initializing sasl.\n");
        in_use = false;
        return -1;
    }
    log_info("Initialized SASL.");
    return 0;
}

void
cyrus_done(void)
{
    if (in_use) {
        sasl_server_done();
        in_use = false;
    }
}

bool
cyrus_in_use(void)
{
    return in_use;
}

/* The connection's session, made on first use. */
static sasl_conn_t *
session_of(void **session)
{
    sasl_conn_t *sc = NULL;

    if (*session == NULL &&
        sasl_server_new("memcached", NULL, NULL, NULL, NULL, NULL, 0, &sc)
        == SASL_OK) {
        *session = sc;
    }
    return *session;
}

const char *
cyrus_mechs(void **session)
{
    sasl_conn_t *sc = session_of(session);
    const char *list;
    unsigned len;
    int n;

    if (sc == NULL ||
        sasl_listmech(sc, NULL, "", " ", "", &list, &len, &n) != SASL_OK) {
        return NULL;
    }
    return list;
}

enum cyrus_result
cyrus_auth(void **session, int fd, bool start, const char *mech,
           const char *data, unsigned len, const char **out,
           unsigned *outlen)
{
    sasl_conn_t *sc = session_of(session);
    int r;

    *out = NULL;
    *outlen = 0;
    if (sc == NULL) {
        return CYRUS_FAIL;
    }
    r = start ? sasl_server_start(sc, mech, len ? data : NULL, len, out,
                                  outlen)
              : sasl_server_step(sc, len ? data : NULL, len, out, outlen);
    switch (r) {
    case SASL_OK: return CYRUS_OK;
    case SASL_CONTINUE: return CYRUS_CONTINUE;
    default:
        log_info("<%d SASL result %d", fd, r);
        return CYRUS_FAIL;
    }
}

void
cyrus_session_free(void **session)
{
    sasl_conn_t *sc = *session;

    if (sc != NULL) {
        sasl_dispose(&sc);
        *session = NULL;
    }
}

#endif /* ENABLE_CYRUS_SASL */
