/*
 * process_bin.h: the binary protocol's requests, run and answered.
 *
 * A parsed request (proto/binary.h) is mapped onto exec.h's calls, the
 * same the text and meta commands make, and their results onto
 * memcached's reply packets: the opcode and opaque echoed, the status and
 * error text memcached sends, the quiet forms silent on success (and
 * GETQ/GETKQ/GATQ/GATKQ on a miss).
 * On the connection's worker thread; storage locks for itself.
 */
#ifndef MCPM_PROCESS_BIN_H
#define MCPM_PROCESS_BIN_H

#include "memcached-pm/conn/conn.h"
#include "proto/binary.h"

/* Execute one request.  r's key points into c's read buffer and stays
 * valid for the call only. */
enum process_result process_bin(struct conn *c, const struct bin_request *r);

/* The value of c->nitem (a binary store) has been read in full: store
 * it, reply, and release the item. */
void process_bin_store(struct conn *c);

#endif
