/*
 * conn_out.h: a connection's reply queue (conn_out.c).
 *
 * Replies are queued as iovecs: small lines are copied into an output
 * arena, values are pointed at in item memory while the connection holds
 * a reference; conn_flush() sends the queue with sendmsg() and only then
 * gives the references back.
 */
#ifndef MCPM_CONN_OUT_H
#define MCPM_CONN_OUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>

#include "memcached-pm/base/log.h"
#include "memcached-pm/base/settings.h"
#include "memcached-pm/conn/conn.h"
#include "proto/response.h"

struct cache_view;

/*
 * Under -o read_buf_mem_limit a reply is built in memory the limit
 * covers, as memcached's response objects are: each request, and each
 * key of a text multiget after the first, takes a slot, held until the
 * queue is sent; a worker's slots come 13 to a 16 KB buffer (memcached's
 * count) out of the same share as its read buffers, and once it has
 * taken one it keeps a buffer for them, as memcached keeps its last.
 * false: no slot to be had, counted as response_obj_oom; the caller
 * answers as memcached does (a multiget: SERVER_ERROR out of memory
 * writing get response; a request: the connection closes).  Without the
 * limit, and on a UDP socket, always true.
 */
static inline bool
conn_resp_start(struct conn *c)
{
    if (settings.read_buf_mem_limit == 0 || c->is_udp) {
        return true;
    }
    if (!conn_buf_resp_take(&c->list->buf, c->stats)) {
        return false;
    }
    c->resp_slots++;
    return true;
}

/* Before a request's replies are queued: the queue's first block,
 * borrowed from the worker while the connection is busy and given back
 * by conn_idle().  0, or -1 out of memory (close the connection). */
int conn_out_take(struct conn *c);

static inline int
conn_out_ready(struct conn *c)
{
    return c->obuf_cur != NULL ? 0 : conn_out_take(c);
}

/* Drop the replies queued and not yet sent (none of the queue is, while
 * requests run), their slots with them. */
void conn_out_discard(struct conn *c);

/* The queue's last entry when it ends where the current block's free
 * room begins, so that bytes written there extend it; else NULL. */
static inline struct iovec *
conn_out_tail(const struct conn *c)
{
    const struct obuf *b = c->obuf_cur;
    struct iovec *last;

    if (c->iov_len == c->iov_sent) {
        return NULL;
    }
    last = &c->iov[c->iov_len - 1];
    return (const char *)last->iov_base + last->iov_len == b->data + b->used
           ? last : NULL;
}

/* Reserve room for one line of at most n bytes in the arena; the caller
 * writes it and commits the length it used.  The commit is inline for
 * the two common cases (it extends the queue's last entry, or takes a
 * free one); conn_out_commit_push() does the rest. */
char *conn_out_reserve(struct conn *c, size_t n);
void conn_out_commit_push(struct conn *c, size_t used);

static inline void
conn_out_commit(struct conn *c, size_t used)
{
    struct obuf *b = c->obuf_cur;
    struct iovec *last;

    if (c->noreply || used == 0) {
        return;
    }
    if ((last = conn_out_tail(c)) != NULL) {
        last->iov_len += used;
    } else if (c->iov_len < c->iov_cap) {
        c->iov[c->iov_len].iov_base = b->data + b->used;
        c->iov[c->iov_len].iov_len = used;
        c->iov_len++;
    } else {
        conn_out_commit_push(c, used);
        return;
    }
    b->used += used;
    c->out_bytes += used;
}

/* Queue reply bytes (copied) or a fixed reply.  They return 0, or -1 when
 * the arena cannot grow (the connection is then closed after writing what
 * it has).  A line that fits the current block is copied inline;
 * conn_out_any() takes any length. */
int conn_out_any(struct conn *c, const char *s, size_t n);

static inline int
conn_out(struct conn *c, const char *s, size_t n)
{
    struct obuf *b = c->obuf_cur;

    if (!c->noreply && n > 0 && n <= OBUF_SIZE - b->used) {
        memcpy(b->data + b->used, s, n);
        conn_out_commit(c, n);
        return 0;
    }
    return conn_out_any(c, s, n);
}

/* -vv: a text reply line as memcached logs the ones it sends with
 * out_string(): ">fd STORED" (the line's "\r\n" dropped).  Replies that
 * memcached writes otherwise (stats, meta results, values) are not. */
void conn_log_reply_line(const struct conn *c, const char *line, size_t n);

static inline void
conn_log_reply(const struct conn *c, const char *line, size_t n)
{
    if (settings.verbose > 1 && c->proto != CONN_BINARY) {
        conn_log_reply_line(c, line, n);
    }
}

static inline int
conn_out_rsp(struct conn *c, int rsp)           /* enum rsp_type */
{
    conn_log_reply(c, rsp_str[rsp], rsp_len[rsp]);
    return conn_out(c, rsp_str[rsp], rsp_len[rsp]);
}

/* The longest value (with its "\r\n") copied into the arena rather
 * than sent from the item by reference. */
#define CONN_VALUE_COPY_MAX 1024

/* Queue an item's value bytes (conn_value_len() of them: "<data>\r\n" on
 * text, "<data>" on binary); takes over the caller's reference.  Values
 * up to 1 KB are copied and the reference released at once; longer ones
 * are sent by reference, released once written. */
int conn_out_value(struct conn *c, struct item *it);

/* A line followed by an item's value, with one reservation: reserve room
 * for a line of at most line_max bytes (and the value, when it is short
 * enough to be copied), write the line, then queue both; the value goes
 * as conn_out_value() sends it. */
char *conn_out_reserve_value(struct conn *c, size_t line_max,
                             struct item *it);
int conn_out_line_value(struct conn *c, size_t used, struct item *it);

/*
 * A hit from cache_peek(): reserve line_max bytes and the value, let
 * line() write what goes before the value (its length back; 0: it cannot,
 * nothing is queued), copy the value behind it when with_value
 * ("<data>\r\n" on text, "<data>" on binary), and keep it all only if
 * cache_peek_end() says the item did not change.  0, or -1 with nothing
 * queued (then answer through the lock path).
 */
int conn_out_view(struct conn *c, const struct cache_view *v,
                  size_t line_max, bool with_value,
                  size_t (*line)(char *p, const struct cache_view *v,
                                 void *arg),
                  void *arg);

/* Queue one binary reply packet to the request being answered
 * (c->bin_opcode, c->bin_opaque): its header, then the extras, key and
 * value given, copied.  0, or -1 as conn_out(). */
int conn_out_bin(struct conn *c, uint16_t status, uint64_t cas,
                 const char *ext, uint8_t extlen, const char *key,
                 uint16_t nkey, const char *val, uint32_t nval);

/* Queue reply rsp and drop the next `bytes` bytes of input (the data
 * block of a refused request).  Returns PROCESS_SWALLOW. */
enum process_result conn_swallow(struct conn *c, int rsp, uint64_t bytes);

/* Send what is queued.  1: all sent (references given back, arena
 * rewound); 0: the socket is full; -1: an error. */
int conn_flush(struct conn *c);

/* UDP: the request (or multiget key) being answered is done; its reply
 * is a message of its own.  end_message() leaves no message for a
 * request that queued nothing (noreply); next_key() makes one even when
 * the key queued nothing, as memcached answers a multiget over UDP.
 * No-ops on a stream. */
void conn_msg_end(struct conn *c, bool keep_empty);

static inline void
conn_out_end_message(struct conn *c)
{
    if (c->msgs != NULL) {
        conn_msg_end(c, false);
    }
}

static inline void
conn_out_next_key(struct conn *c)
{
    if (c->msgs != NULL) {
        conn_msg_end(c, true);
    }
}

/* Copy the reply queue's bytes out in order (UDP's datagrams): up to n
 * bytes from where *pos says, which moves on; the bytes copied (dst NULL:
 * skipped). */
struct conn_out_pos {
    size_t iov;
    size_t off;
};
size_t conn_out_copy(struct conn *c, struct conn_out_pos *pos, char *dst,
                     size_t n);

/* The queue was sent by conn_out_copy()'s caller: give the references
 * back, rewind the arena, forget the messages. */
void conn_out_sent(struct conn *c);

#endif
