/*
 * process_auth.h: a client proving who it is, on the connection's worker
 * thread, against auth.h's credentials.
 *
 * -Y (text protocol): until a client authenticates, its only command is
 * "set <any> <any> <any> <n>" whose n bytes of data are "user password";
 * the reply is STORED, or memcached's CLIENT_ERROR lines.  Everything
 * else gets "CLIENT_ERROR unauthenticated".
 *
 * -S (binary protocol): SASL_LIST_MECHS, SASL_AUTH and SASL_STEP with the
 * PLAIN mechanism; any other command before a successful AUTH gets status
 * 0x20 and the connection closes, as memcached does (VERSION aside).  As
 * in memcached, every AUTH or STEP starts over: a failed one leaves the
 * connection unauthenticated.
 */
#ifndef MCPM_PROCESS_AUTH_H
#define MCPM_PROCESS_AUTH_H

#include <stdbool.h>
#include <sys/types.h>

#include "memcached-pm/conn/conn.h"
#include "proto/binary.h"

/* SASL data longer than this is refused without being read into the
 * buffer (it is dropped as it arrives). */
#define SASL_DATA_MAX 4096

/* -Y: answer the authentication exchange at the start of c's buffer.
 * The bytes it took (reply queued; c->proto becomes CONN_TEXT on
 * success), PROTO_EUNFIN when the line or its data is not all in, or
 * PROTO_ECLOSE (a line that cannot be a command). */
ssize_t process_auth_text(struct conn *c);

/* -S: may r run on c yet? */
static inline bool
process_sasl_allowed(const struct conn *c, const struct bin_request *r)
{
    return c->authenticated || r->cmd == BIN_CMD_SASL ||
           r->cmd == BIN_CMD_VERSION;
}

/* -S: a SASL request, its data (r->vlen bytes, all buffered when at most
 * SASL_DATA_MAX) at the start of c's buffer. */
enum process_result process_sasl(struct conn *c, const struct bin_request *r);

#endif
