/*
 * text.h: parser for memcached's classic text protocol.
 *
 * Pure: bytes in, struct request out; no allocation, no I/O, libc only.
 */
#ifndef MCPM_PROTO_TEXT_H
#define MCPM_PROTO_TEXT_H

#include "proto/request.h"

/*
 * Parse one command line from buf[0..len).
 *
 * Returns the number of bytes the line takes, including its "\n" (a bare
 * "\n" ends a line as well as "\r\n"); the data block of a storage command
 * is not included: the caller reads req->vlen + 2 more bytes.
 * Returns PROTO_EUNFIN when buf holds no complete line yet and reading more
 * may help, and PROTO_ECLOSE when memcached would close the connection
 * without a reply: no newline within PROTO_LINE_MAX bytes on a line that
 * does not start with "get " or "gets ", or the HTTP guard (an unknown
 * command of two or more tokens whose last token starts with "HTTP/").
 *
 * Any other bad line parses fine into a REQ_ERROR request carrying the reply.
 */
ssize_t text_parse(struct request *req, const char *buf, size_t len);

/*
 * Walk the keys of a get/gets/gat/gats request.  *cursor starts as
 * req->keys; each call stores the next key in *key, advances the cursor and
 * returns 1, or returns 0 when no key is left.  Returns -1 for a key longer
 * than PROTO_KEY_MAX: memcached then aborts the whole multiget with
 * CLIENT_ERROR bad command line format (replies already sent stay sent).
 */
int text_next_key(struct token *cursor, struct token *key);

#endif
