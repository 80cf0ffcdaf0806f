/*
 * detail.h: "stats detail": gets (and hits), sets and deletes counted per
 * key prefix, the part of the key before settings.prefix_delimiter.
 *
 * Off by default; while an operator has it on, every text get, set and
 * delete takes a mutex, as in memcached.  Meta commands are not counted
 * (memcached does not count them either).  Locking: one mutex guards the
 * prefix table.
 */
#ifndef MCPM_DETAIL_H
#define MCPM_DETAIL_H

#include <stdbool.h>
#include <stddef.h>

#include "memcached-pm/conn/conn.h"
#include "proto/request.h"

enum detail_op { DETAIL_GET, DETAIL_SET, DETAIL_DELETE };

/* Count one request on key's prefix; a key with no prefix is not
 * counted. */
void detail_record(const char *key, size_t nkey, enum detail_op op,
                   bool hit);

/* "stats detail on|off|dump". */
enum process_result detail_command(struct conn *c, struct request *req);

/* The binary STAT "detail on|off|dump": arg is what follows "detail". */
void detail_command_bin(struct conn *c, const char *arg, size_t len);

/* Forget every prefix. */
void detail_clear(void);

#endif
