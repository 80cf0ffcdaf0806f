/*
 * process_meta.h: the meta commands, executed.
 */
#ifndef MCPM_PROCESS_META_H
#define MCPM_PROCESS_META_H

#include "memcached-pm/conn/conn.h"
#include "proto/request.h"

/* mn mg ms md ma me: check the flags, run the command, queue the reply. */
enum process_result process_meta(struct conn *c, struct request *req);

/* The data block of an ms has been read into c->nitem: store and reply. */
void process_meta_store(struct conn *c);

#endif
