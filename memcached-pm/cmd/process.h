/*
 * process.h: a parsed request in, replies queued on its connection.
 *
 * process_request() takes every request the text parser (proto/text.h)
 * produces: it runs the classic text commands itself, hands the meta
 * commands to process_meta.h and the operator's commands to admin.h.  The
 * storage work and its counting are exec.h's, shared by every protocol.
 * On the connection's worker thread; storage locks for itself.
 */
#ifndef MCPM_PROCESS_H
#define MCPM_PROCESS_H

#include "memcached-pm/conn/conn.h"
#include "proto/request.h"

/* Execute one request.  req's strings point into c's read buffer and stay
 * valid for the call only. */
enum process_result process_request(struct conn *c, struct request *req);

/* The value of c->nitem has been read in full: check it, store it, reply,
 * and release the item. */
void process_store(struct conn *c);

#endif
