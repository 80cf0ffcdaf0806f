/*
 * auth.h: the credentials of -Y (ascii auth) and of -S's PLAIN mechanism
 * (MEMCACHED_SASL_PWDB): files of "user:password" lines.
 *
 * A file is read whole into a table at start; a line without a ':' or
 * with an empty user refuses the file.  -Y's file is read again on
 * SIGHUP, as memcached does; the SASL file whenever it changed on disk
 * (memcached reads it on every attempt).  A reload that fails keeps the
 * table in use.
 *
 * auth_check() compares in time that depends on the lengths of what it is
 * given and of the table, never on where the bytes differ.
 *
 * Locking: a table is replaced under its lock, which checks take too.
 */
#ifndef MCPM_AUTH_H
#define MCPM_AUTH_H

#include <stdbool.h>
#include <stddef.h>

enum auth_db {
    AUTH_ASCII,     /* -Y <file> */
    AUTH_SASL       /* $MEMCACHED_SASL_PWDB, for -S */
};

/* Read db's file (path; NULL: the environment's for AUTH_SASL): 0, or -1
 * with memcached's message in err (the table in use stays). */
int auth_load(enum auth_db db, const char *path, char *err, size_t len);

/* Do user and password match an entry of db? */
bool auth_check(enum auth_db db, const char *user, size_t ulen,
                const char *pass, size_t plen);

/* SIGHUP: read -Y's file again (a failure is logged). */
void auth_reload(void);

void auth_free(void);

#endif
