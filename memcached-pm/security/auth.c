/*
 * auth.c: credential files for -Y and -S (auth.h).
 *
 * A table is one block holding the file's bytes and, before them, the
 * entries pointing into them; replacing a table is swapping one pointer
 * under the lock and freeing the old block.
 */
#include "config.h"

#include "memcached-pm/security/auth.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "memcached-pm/base/log.h"
#include "memcached-pm/base/settings.h"

#define AUTH_FILE_MAX (1 << 20)     /* a password file, not a database */

struct entry {
    const char *user, *pass;
    size_t      ulen, plen;
};

struct table {
    size_t       n;
    struct entry e[];               /* then the file's bytes */
};

struct db {
    pthread_mutex_t lock;
    struct table   *t;
    char            path[4096];
    struct timespec mtime;          /* of the file the table came from */
};

static struct db dbs[2] = {
    { .lock = PTHREAD_MUTEX_INITIALIZER },
    { .lock = PTHREAD_MUTEX_INITIALIZER },
};

/* The file's lines as a table: NULL with memcached's message in err. */
static struct table *
parse(const char *path, const char *text, size_t len, char *err,
      size_t errlen)
{
    size_t lines = 1, n = 0, lineno = 0;
    struct table *t;
    char *bytes;
    const char *p, *end;

    for (size_t i = 0; i < len; i++) {
        lines += text[i] == '\n';
    }
    t = malloc(sizeof(*t) + lines * sizeof(t->e[0]) + len);
    if (t == NULL) {
        snprintf(err, errlen, "Out of memory reading password file: %s",
                 path);
        return NULL;
    }
    bytes = (char *)&t->e[lines];
    memcpy(bytes, text, len);
    for (p = bytes, end = bytes + len; p < end; ) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        const char *stop = eol ? eol : end;
        const char *colon = memchr(p, ':', (size_t)(stop - p));

        lineno++;
        if (stop > p && stop[-1] == '\r') {
            stop--;
        }
        if (stop == p) {
            p = eol ? eol + 1 : end;        /* a blank line */
            continue;
        }
        if (colon == NULL || colon == p) {
            snprintf(err, errlen, "Authfile [%s] has a malformed entry. "
                     "Should be 'user:password' (line %zu)", path, lineno);
            free(t);
            return NULL;
        }
        t->e[n].user = p;
        t->e[n].ulen = (size_t)(colon - p);
        t->e[n].pass = colon + 1;
        t->e[n].plen = (size_t)(stop - colon - 1);
        n++;
        p = eol ? eol + 1 : end;
    }
    t->n = n;
    return t;
}

int
auth_load(enum auth_db which, const char *path, char *err, size_t errlen)
{
    struct db *db = &dbs[which];
    struct table *t, *old;
    struct stat st;
    char *text;
    size_t got;
    FILE *f;

    if (path == NULL) {
        path = getenv("MEMCACHED_SASL_PWDB");
    }
    if (path == NULL) {
        snprintf(err, errlen, "MEMCACHED_SASL_PWDB is not set: no user "
                 "can authenticate");
        return -1;
    }
    if ((f = fopen(path, "r")) == NULL) {
        snprintf(err, errlen, "Could not open authfile [%s] for reading, "
                 "error %s", path, strerror(errno));
        return -1;
    }
    if (fstat(fileno(f), &st) != 0) {
        snprintf(err, errlen, "Could not stat authfile [%s], error %s", path,
                 strerror(errno));
        fclose(f);
        return -1;
    }
    if (st.st_size > AUTH_FILE_MAX) {
        snprintf(err, errlen, "Authfile [%s] is larger than %d bytes", path,
                 AUTH_FILE_MAX);
        fclose(f);
        return -1;
    }
    text = malloc((size_t)st.st_size + 1);
    if (text == NULL) {
        fclose(f);
        snprintf(err, errlen, "Out of memory reading password file: %s",
                 path);
        return -1;
    }
    got = fread(text, 1, (size_t)st.st_size, f);
    fclose(f);
    t = parse(path, text, got, err, errlen);
    free(text);
    if (t == NULL) {
        return -1;
    }
    pthread_mutex_lock(&db->lock);
    old = db->t;
    db->t = t;
    snprintf(db->path, sizeof(db->path), "%s", path);
    db->mtime = st.st_mtim;
    pthread_mutex_unlock(&db->lock);
    free(old);
    return 0;
}

/* Equal lengths and bytes, in time that depends on the lengths alone. */
static bool
same(const char *a, size_t alen, const char *b, size_t blen)
{
    unsigned char diff = alen != blen;
    size_t n = alen < blen ? alen : blen;

    for (size_t i = 0; i < n; i++) {
        diff |= (unsigned char)(a[i] ^ b[i]);
    }
    return diff == 0;
}

/* The SASL file is not read yet, or changed since it was (memcached
 * reads it on every attempt): read it now. */
static void
sasl_fresh(void)
{
    struct db *db = &dbs[AUTH_SASL];
    const char *path = getenv("MEMCACHED_SASL_PWDB");
    char err[4400];
    struct stat st;
    bool stale;

    if (path == NULL || stat(path, &st) != 0) {
        return;
    }
    pthread_mutex_lock(&db->lock);
    stale = db->t == NULL || strcmp(path, db->path) != 0 ||
            st.st_mtim.tv_sec != db->mtime.tv_sec ||
            st.st_mtim.tv_nsec != db->mtime.tv_nsec;
    pthread_mutex_unlock(&db->lock);
    if (stale && auth_load(AUTH_SASL, path, err, sizeof(err)) != 0) {
        log_info("%s", err);
    }
}

bool
auth_check(enum auth_db which, const char *user, size_t ulen,
           const char *pass, size_t plen)
{
    struct db *db = &dbs[which];
    bool ok = false;

    if (which == AUTH_SASL) {
        sasl_fresh();
    }
    pthread_mutex_lock(&db->lock);
    for (size_t i = 0; db->t != NULL && i < db->t->n; i++) {
        const struct entry *e = &db->t->e[i];
        /* both compared every time: no early exit on the user */
        bool u = same(user, ulen, e->user, e->ulen);
        bool p = same(pass, plen, e->pass, e->plen);

        ok |= u & p;
    }
    pthread_mutex_unlock(&db->lock);
    return ok;
}

void
auth_reload(void)
{
    char err[4400];

    if (settings.auth_file != NULL &&
        auth_load(AUTH_ASCII, settings.auth_file, err, sizeof(err)) != 0) {
        log_error("%s", err);
    }
}

void
auth_free(void)
{
    for (unsigned i = 0; i < 2; i++) {
        pthread_mutex_lock(&dbs[i].lock);
        free(dbs[i].t);
        dbs[i].t = NULL;
        pthread_mutex_unlock(&dbs[i].lock);
    }
}
