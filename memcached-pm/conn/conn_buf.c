/*
 * conn_buf.c: the buffers of a worker's connections (conn_buf.h).
 */
#include "config.h"

#include "memcached-pm/conn/conn_buf.h"

#include <stdlib.h>
#include <string.h>

#include "memcached-pm/base/settings.h"

#define RESP_PER_RBUF  13             /* memcached's responses per buffer */

/* Gauges: single writer, so a relaxed load and store (STAT_ADD) is
 * enough; a negative delta wraps as intended. */
void
conn_buf_gauge_rbuf(struct conn_buf *b, int64_t count, int64_t bytes)
{
    STAT_ADD(b->gauges.read_buf_count, (uint64_t)count);
    STAT_ADD(b->gauges.read_buf_bytes, (uint64_t)bytes);
}

static void
gauge_obuf(struct conn_buf *b, int64_t count)
{
    STAT_ADD(b->gauges.response_obj_count, (uint64_t)count);
    STAT_ADD(b->gauges.response_obj_bytes,
             (uint64_t)(count * (int64_t)OBUF_SIZE));
}

/* ---- -o read_buf_mem_limit -------------------------------------------- */

/* The worker's share of the limit, and what its reply slots hold of it,
 * in bytes. */
static uint64_t
worker_share(void)
{
    uint64_t share = settings.read_buf_mem_limit /
                     (unsigned)settings.num_threads;

    /* memcached's least */
    return share < CONN_RBUF_SIZE ? CONN_RBUF_SIZE : share;
}

static uint64_t
slot_bytes(const struct buffer_gauges *g, uint64_t slots)
{
    uint64_t n = (slots + RESP_PER_RBUF - 1) / RESP_PER_RBUF;

    if (n == 0 && g->resp_buffer_kept) {
        n = 1;
    }
    return n * CONN_RBUF_SIZE;
}

/* Does the worker's share hold its read buffers grown by `add` bytes
 * and its reply slots grown by `more`? */
static bool
share_holds(const struct buffer_gauges *g, size_t add, uint64_t more)
{
    return STAT_LOAD(g->read_buf_bytes) + add +
           slot_bytes(g, STAT_LOAD(g->resp_slots) + more) <= worker_share();
}

bool
conn_buf_may_grow(struct conn_buf *b, struct thread_stats *ts, size_t add)
{
    if (settings.read_buf_mem_limit == 0 ||
        share_holds(&b->gauges, add, 0)) {
        return true;
    }
    STAT_INCR(ts->read_buf_oom);
    return false;
}

bool
conn_buf_resp_take(struct conn_buf *b, struct thread_stats *ts)
{
    if (!share_holds(&b->gauges, 0, 1)) {
        STAT_INCR(ts->response_obj_oom);
        return false;
    }
    STAT_ADD(b->gauges.resp_slots, 1);
    b->gauges.resp_buffer_kept = true;
    return true;
}

void
conn_buf_resp_back(struct conn_buf *b, unsigned n)
{
    STAT_ADD(b->gauges.resp_slots, -(uint64_t)n);
}

/* ---- the spares ---------------------------------------------------------- */

/* How many of a kind the worker keeps: no buffer under -o
 * read_buf_mem_limit, whose share counts what connections hold. */
static unsigned
spare_max(bool buffer)
{
    return buffer && settings.read_buf_mem_limit > 0 ? 0 : CONN_SPARE_MAX;
}

/* Buffers: resting connections' count as spares. */
static unsigned
spare_bufs(const struct conn_buf *b)
{
    return spare_max(true) - b->resting;
}

bool
conn_buf_rest(struct conn_buf *b)
{
    if (b->resting == spare_max(true)) {
        return false;
    }
    b->resting++;
    return true;
}

void
conn_buf_unrest(struct conn_buf *b)
{
    b->resting--;
}

/* A free list of blocks chained through their first word. */
static void *
spare_pop(void **head, unsigned *n)
{
    void *p = *head;

    if (p != NULL) {
        memcpy(head, p, sizeof(*head));
        (*n)--;
    }
    return p;
}

static bool
spare_push(void **head, unsigned *n, void *p, unsigned max)
{
    if (*n >= max) {
        return false;
    }
    memcpy(p, head, sizeof(*head));
    *head = p;
    (*n)++;
    return true;
}

char *
conn_buf_rbuf(struct conn_buf *b, struct thread_stats *ts)
{
    char *p = spare_pop(&b->rbufs, &b->nrbufs);

    if (p != NULL) {
        STAT_ADD(b->gauges.read_buf_bytes_free, -(uint64_t)CONN_RBUF_SIZE);
        return p;
    }
    if (!conn_buf_may_grow(b, ts, CONN_RBUF_SIZE) ||
        (p = malloc(CONN_RBUF_SIZE)) == NULL) {
        return NULL;
    }
    conn_buf_gauge_rbuf(b, 1, CONN_RBUF_SIZE);
    return p;
}

void
conn_buf_rbuf_back(struct conn_buf *b, char *p)
{
    if (spare_push(&b->rbufs, &b->nrbufs, p, spare_bufs(b))) {
        STAT_ADD(b->gauges.read_buf_bytes_free, CONN_RBUF_SIZE);
        return;
    }
    conn_buf_gauge_rbuf(b, -1, -(int64_t)CONN_RBUF_SIZE);
    free(p);
}

struct obuf *
conn_buf_obuf(struct conn_buf *b)
{
    struct obuf *o = b->obufs;

    if (o != NULL) {
        b->obufs = o->next;
        b->nobufs--;
    } else if ((o = malloc(sizeof(*o))) != NULL) {
        gauge_obuf(b, 1);
    } else {
        return NULL;
    }
    o->next = NULL;
    o->used = 0;
    return o;
}

void
conn_buf_obuf_back(struct conn_buf *b, struct obuf *o)
{
    if (b->nobufs < spare_bufs(b)) {
        o->next = b->obufs;
        b->obufs = o;
        b->nobufs++;
        return;
    }
    free(o);
    gauge_obuf(b, -1);
}

struct iovec *
conn_buf_iov(struct conn_buf *b)
{
    struct iovec *v = spare_pop(&b->iovs, &b->niovs);

    return v != NULL ? v : malloc(CONN_IOV_MIN * sizeof(*v));
}

void
conn_buf_iov_back(struct conn_buf *b, struct iovec *v)
{
    if (!spare_push(&b->iovs, &b->niovs, v, spare_max(false))) {
        free(v);
    }
}

void
conn_buf_free(struct conn_buf *b)
{
    void *p;
    struct obuf *o;

    while ((p = spare_pop(&b->rbufs, &b->nrbufs)) != NULL) {
        free(p);
    }
    while ((p = spare_pop(&b->iovs, &b->niovs)) != NULL) {
        free(p);
    }
    while ((o = b->obufs) != NULL) {
        b->obufs = o->next;
        free(o);
    }
    b->nobufs = 0;
}
