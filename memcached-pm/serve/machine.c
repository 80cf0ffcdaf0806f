/*
 * machine.c: the connection state machine (machine.h).
 *
 * Locking: none; a connection is driven by its worker's thread only
 * (storage and the reply queue take what locks they need).
 */
#include "config.h"

#include "memcached-pm/serve/machine.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "memcached-pm/base/log.h"
#include "memcached-pm/base/settings.h"
#include "memcached-pm/base/stats.h"
#include "memcached-pm/cmd/lookahead.h"
#include "memcached-pm/cmd/process.h"
#include "memcached-pm/cmd/process_auth.h"
#include "memcached-pm/cmd/process_bin.h"
#include "memcached-pm/conn/conn_handover.h"
#include "memcached-pm/conn/conn_in.h"
#include "memcached-pm/conn/conn_out.h"
#include "memcached-pm/net/evloop.h"
#include "memcached-pm/net/ring.h"
#include "memcached-pm/net/transport.h"
#include "memcached-pm/watch/logger.h"
#include "proto/binary.h"
#include "proto/text.h"
#include "storage/cache/cache.h"
#include "storage/cache/cache_durable.h"

#define OUT_HIGH_WATER (1024 * 1024)  /* queued bytes before a forced write */

/*
 * -R counts requests per event in units: a request costs REQ_UNITS, a
 * binary quiet get one unit.  A run of GETKQ ... NOOP is the binary
 * multiget and should cost about what a text multiget costs (one
 * request, however many keys), yet a client sending nothing but quiet
 * gets must still yield in time.
 */
#define REQ_UNITS 64

static void conn_drive(struct conn *c);
static void machine_close_now(struct conn **c);

/* This worker's connections whose replies wait for their changes to be
 * durable, last parked first; and whether it is in a group at all. */
static __thread struct conn *parked;
static __thread bool grouped;
static __thread struct conn_list *resting;  /* the worker's connections */
static __thread uint64_t durable;   /* cache_group_durable() and its
                                       settled, as the last pass's end
                                       found them: they only grow */
static __thread uint64_t settled;

/* ---- events ----------------------------------------------------------- */

static void
on_event(int fd, short what, void *arg)
{
    struct conn *c = arg;

    (void)fd;
    (void)what;
    c->yielded = false;
    conn_drive(c);
}

/* Register for readability or writability, when that changes. */
static void
conn_wait_change(struct conn *c, short flags)
{
    if (c->rio != NULL) {
        ring_wait(c->rio, flags);
        return;
    }
    if (evloop_want(c->loop, &c->ev, flags) != 0) {
        log_error("conn %d: epoll_ctl: %s", c->fd, strerror(errno));
    }
}

static inline void
conn_wait(struct conn *c, short flags)
{
    if (c->rio == NULL && c->ev.want == flags) {
        return;                 /* asked already: nothing changes */
    }
    conn_wait_change(c, flags);
}

void
machine_start(struct conn *c)
{
    if (c->ring != NULL) {
        /* A TLS session does its own reads and writes: the ring only
         * tells it when the socket is ready. */
        c->rio = ring_add(c->ring, c->fd, c->tls != NULL, on_event, c);
        if (c->rio == NULL) {
            conn_free(&c);
            return;
        }
    } else {
        evsrc_init(&c->ev, c->fd, on_event, c);
    }
    conn_wait(c, EV_READ);
}

/* The ring is through with a closed connection's socket and buffers. */
static void
ring_done_close(void *arg)
{
    struct conn *c = arg;

    conn_free(&c);
}

static void
ring_done_handoff(void *arg)
{
    struct conn *c = arg;

    conn_detach(&c);
}

/* The ring is through with a connection that leaves for the successor:
 * what its receive brought in after the last read goes along. */
static void
ring_done_leave(void *arg)
{
    struct conn *c = arg;
    char *more = NULL;
    size_t n = 0, cap = 0;

    while (ring_pending(c->rio)) {
        ssize_t got;

        if (n == cap) {
            char *p = realloc(more, cap ? cap * 2 : 16384);

            if (p == NULL) {
                free(more);
                machine_close_now(&c);
                return;
            }
            more = p;
            cap = cap ? cap * 2 : 16384;
        }
        if ((got = ring_read(c->rio, more + n, cap - n)) <= 0) {
            break;
        }
        n += (size_t)got;
    }
    conn_leave(&c, more, n);
    free(more);
}

static void
unpark(struct conn *c)
{
    struct conn **p = &parked;

    while (*p != NULL && *p != c) {
        p = &(*p)->park_next;
    }
    if (*p == c) {
        *p = c->park_next;
    }
    c->parked = false;
    c->park_next = NULL;
}

/* While the node hands over: one more connection is gone or going;
 * when none stays, the ring lets go of them all at once (ring_let_go()). */
static void
gone_one(struct conn *c)
{
    struct conn_list *l = c->list;

    if (!c->staying) {
        return;
    }
    c->staying = false;
    if (--l->staying == 0 && c->ring != NULL) {
        ring_let_go(c->ring);
    }
}

/* Close a connection the ring is already through with. */
static void
machine_close_now(struct conn **c)
{
    (*c)->rio = NULL;
    conn_free(c);
}

void
machine_close(struct conn **c)
{
    if (*c != NULL) {
        gone_one(*c);
        if ((*c)->parked) {
            unpark(*c);
        }
        lookahead_drop(*c);
        if ((*c)->rio != NULL) {
            /* freed once nothing of it is left in the ring */
            conn_set_state(*c, CONN_CLOSING);
            ring_remove((*c)->rio, ring_done_close, *c);
            *c = NULL;
            return;
        }
        conn_free(c);
    }
}

/* Read more: the buffer may move, so what the look-ahead parsed from it
 * goes first. */
static ssize_t
read_more(struct conn *c)
{
    lookahead_drop(c);
    return conn_read(c);
}

/* ---- the state machine ------------------------------------------------ */

static enum conn_state
after_process(struct conn *c, enum process_result r)
{
    switch (r) {
    case PROCESS_NREAD:
        return CONN_NREAD;
    case PROCESS_SWALLOW:
        return CONN_SWALLOW;
    case PROCESS_CLOSE:
        c->close_after_write = true;
        return CONN_WRITE;
    case PROCESS_HANDOFF:
        return CONN_HANDOFF;
    case PROCESS_FLUSH:
        return c->is_udp ? CONN_PARSE : CONN_WRITE;
    case PROCESS_OK:
    default:
        return CONN_PARSE;
    }
}

/* What a parser's "no request" means for the connection: PROTO_EUNFIN,
 * read more (after writing what is queued); PROTO_ECLOSE, close once the
 * queue is written. */
static enum conn_state
parse_stopped(struct conn *c, ssize_t n)
{
    if (n == PROTO_EUNFIN) {
        return c->out_bytes > 0 ? CONN_WRITE : CONN_READ;
    }
    c->close_after_write = true;
    return CONN_WRITE;
}

/* -vv: "<fd <the request line>", its "\r\n" or "\n" dropped. */
static void
log_request_line(const struct conn *c, size_t n)
{
    const char *line = c->rbuf + c->rstart;
    size_t len = n > 0 ? n - 1 : 0;

    if (len > 0 && line[len - 1] == '\r') {
        len--;
    }
    log_write("<%d %.*s", c->fd, (int)len, line);
}

/* Parse and execute one request from the buffer. */
static enum conn_state
parse_one(struct conn *c)
{
    struct ahead_req *a = lookahead_take(c);
    struct request local, *req = &local;
    ssize_t n;

    if (a != NULL) {
        req = &a->req;
        n = (ssize_t)a->len;
    } else {
        lookahead_done(c);
        n = text_parse(&local, c->rbuf + c->rstart, c->rend - c->rstart);
        if (n < 0) {
            return parse_stopped(c, n);
        }
        /* More bytes after this request's line, none looked at yet: a
         * pipeline.  Parse the requests after this one and walk their
         * keys side by side (lookahead_pipeline); they then run one by
         * one from what was parsed. */
        if ((size_t)n < c->rend - c->rstart && c->rstart >= c->pf_end) {
            c->pf_end = c->rstart + lookahead_pipeline(c, &local, (size_t)n);
        }
    }
    if (settings.verbose > 1) {
        log_request_line(c, (size_t)n);
    }
    if (!conn_resp_start(c)) {
        lookahead_done(c);
        return CONN_CLOSING;    /* as memcached: nothing more is sent */
    }
    c->rstart += (size_t)n;
    c->last_cmd = clock_now();
    c->noreply = req->noreply;
    n = after_process(c, process_request(c, req));
    c->answered = true;
    lookahead_done(c);
    c->noreply = false;
    return (enum conn_state)n;
}

/* -Y: the authentication exchange, until it succeeds. */
static enum conn_state
parse_auth(struct conn *c)
{
    ssize_t n = process_auth_text(c);

    if (n < 0) {
        return parse_stopped(c, n);
    }
    c->rstart += (size_t)n;
    c->last_cmd = clock_now();
    c->answered = true;
    return CONN_PARSE;
}

/* Parse and execute one binary request. */
static enum conn_state
parse_binary(struct conn *c)
{
    struct ahead_req *a = lookahead_take(c);
    struct bin_request local, *r = &local;
    ssize_t n;

    if (a != NULL) {
        r = &a->bin;
        n = (ssize_t)a->len;
    } else {
        lookahead_done(c);
        n = bin_parse(&local, c->rbuf + c->rstart, c->rend - c->rstart);
        if (n < 0) {
            return parse_stopped(c, n);
        }
        if (local.cmd == BIN_CMD_SASL && settings.sasl &&
            local.vlen <= SASL_DATA_MAX &&
            c->rend - c->rstart - (size_t)n < local.vlen) {
            /* credentials come whole (one parsed ahead came whole) */
            return parse_stopped(c, PROTO_EUNFIN);
        }
        /* More bytes after this request, none looked at yet: a
         * pipeline, parsed and its keys walked side by side before the
         * requests run. */
        if ((size_t)n < c->rend - c->rstart && c->rstart >= c->pf_end) {
            c->pf_end = c->rstart +
                        lookahead_pipeline_bin(c, &local, (size_t)n);
        }
    }
    if (settings.verbose > 1) {
        log_bin_header(c->fd, '<', "Read binary protocol data:",
                       (const unsigned char *)c->rbuf + c->rstart);
    }
    if (!conn_resp_start(c)) {
        lookahead_done(c);
        return CONN_CLOSING;
    }
    c->rstart += (size_t)n;
    c->last_cmd = clock_now();
    n = after_process(c, process_bin(c, r));
    lookahead_done(c);
    return (enum conn_state)n;
}

/* What the next request costs of the -R budget. */
static int
request_cost(const struct conn *c)
{
    const unsigned char *p = (const unsigned char *)c->rbuf + c->rstart;

    if (c->proto != CONN_BINARY || c->rend - c->rstart < 2 ||
        p[0] != BIN_MAGIC_REQ) {
        return REQ_UNITS;
    }
    switch (p[1]) {
    case BIN_OP_GETQ: case BIN_OP_GETKQ: case BIN_OP_GATQ: case BIN_OP_GATKQ:
        return 1;
    default:
        return REQ_UNITS;
    }
}

/* Every byte read was parsed: the buffer starts over. */
static bool
drained(struct conn *c)
{
    if (c->rstart != c->rend) {
        return false;
    }
    c->rstart = c->rend = c->pf_end = 0;
    return true;
}

static enum conn_state
parse_next(struct conn *c, int64_t *budget)
{
    if (drained(c)) {
        return c->out_bytes > 0 ? CONN_WRITE : CONN_READ;
    }
    if (c->out_bytes > OUT_HIGH_WATER) {
        return CONN_WRITE;
    }
    if (conn_out_ready(c) != 0) {
        return CONN_CLOSING;
    }
    if (*budget <= 0) {
        /* Let the worker's other connections in; come back next turn. */
        STAT_INCR(c->stats->conn_yields);
        c->yielded = true;
        return CONN_WRITE;
    }
    *budget -= request_cost(c);
    if (c->proto == CONN_NEGOTIATE) {
        /* -B auto: the first byte says, for the connection's life. */
        c->proto = (unsigned char)c->rbuf[c->rstart] == BIN_MAGIC_REQ
                   ? CONN_BINARY : CONN_TEXT;
        log_debug("%d: Client using the %s protocol", c->fd,
                  c->proto == CONN_BINARY ? "binary" : "ascii");
    }
    switch (c->proto) {
    case CONN_BINARY: return parse_binary(c);
    case CONN_TEXT_AUTH: return parse_auth(c);
    default: return parse_one(c);
    }
}

/* The requests in the read buffer, one after another, without a turn of
 * conn_drive()'s loop each. */
static enum conn_state
state_parse(struct conn *c, int64_t *budget)
{
    enum conn_state next;

    do {
        next = parse_next(c, budget);
    } while (next == CONN_PARSE && !c->list->leaving);
    return next;
}

static enum conn_state
state_nread(struct conn *c, bool *stop)
{
    size_t total = conn_value_len(c, c->nitem);

    conn_nread_buffered(c);
    if (c->nread_off == total) {
        if (c->proto == CONN_BINARY) {
            process_bin_store(c);
        } else {
            process_store(c);
        }
        return CONN_PARSE;
    }
    switch (conn_nread_direct(c)) {
    case -1: return CONN_CLOSING;
    case 0: *stop = true; conn_wait(c, io_wait_for(c->tls, EV_READ));
        return CONN_NREAD;
    default: return CONN_NREAD;
    }
}

static enum conn_state
state_swallow(struct conn *c, bool *stop)
{
    size_t have = c->rend - c->rstart;
    size_t take = c->swallow < have ? (size_t)c->swallow : have;

    c->rstart += take;
    c->swallow -= take;
    if (c->swallow == 0) {
        return CONN_PARSE;
    }
    switch (read_more(c)) {
    case -1: return CONN_CLOSING;
    case 0: *stop = true; conn_wait(c, io_wait_for(c->tls, EV_READ));
        return CONN_SWALLOW;
    default: return CONN_SWALLOW;
    }
}

/* The last read drained the socket: poll before reading again (the
 * event is level-triggered, so nothing is missed). */
static enum conn_state
wait_read(struct conn *c, bool *stop)
{
    c->read_short = false;
    *stop = true;
    conn_rest(c);
    conn_wait(c, EV_READ);
    return CONN_READ;
}

static enum conn_state
state_read(struct conn *c, bool *stop)
{
    if (c->read_short) {
        return wait_read(c, stop);
    }
    switch (read_more(c)) {
    case -1:
        return CONN_CLOSING;
    case 0:
        *stop = true;
        conn_rest(c);
        conn_wait(c, io_wait_for(c->tls, EV_READ));
        return CONN_READ;
    default:
        return CONN_PARSE;
    }
}

/* Group commit: note when c last changed something (since it was
 * driven last). */
static void
note_changes(struct conn *c)
{
    uint64_t now = cache_group_noted();

    if (now != c->drive_note) {
        uint64_t killed = cache_group_killed();

        if (killed > c->drive_note) {
            c->last_kill = killed;
        }
        c->last_note = now;
        c->drive_note = now;
    }
}

/* Whether all c's replies acknowledge is durable (as the last pass's end
 * found it). */
static bool
changes_durable(const struct conn *c)
{
    return c->last_note <= durable && c->last_kill <= settled;
}

static enum conn_state
state_write(struct conn *c, bool *stop)
{
    if (c->parked) {
        /* an event it had asked for before: it waits on */
        *stop = true;
        return CONN_WRITE;
    }
    if (grouped && c->out_bytes > 0) {
        note_changes(c);
        if (!changes_durable(c)) {
            /* The replies may acknowledge what is not durable yet: no
             * event for it until machine_end_pass() finds them durable
             * (it reads nothing meanwhile, so its requests stay in
             * order). */
            c->parked = true;
            c->park_next = parked;
            parked = c;
            conn_wait(c, 0);
            *stop = true;
            return CONN_WRITE;
        }
    }
    switch (conn_flush(c)) {
    case -1:
        return CONN_CLOSING;
    case 0:
        *stop = true;
        conn_wait(c, io_wait_for(c->tls, EV_WRITE));
        return CONN_WRITE;
    default:
        break;
    }
    c->answered = false;
    if (c->close_after_write) {
        return CONN_CLOSING;
    }
    if (c->yielded) {
        *stop = true;
        conn_wait(c, EV_READ);
        if (c->rio != NULL) {
            ring_again(c->rio, EV_READ);
        } else {
            evloop_activate(c->loop, &c->ev, EV_READ);
        }
        return CONN_PARSE;
    }
    if (!drained(c)) {
        conn_wait(c, EV_READ);
        return CONN_PARSE;
    }
    /* All read was answered and the read had drained the socket: wait
     * for the next request here, not in a turn of conn_drive() */
    if (c->read_short && !c->list->leaving) {
        return wait_read(c, stop);
    }
    conn_wait(c, EV_READ);
    return CONN_READ;
}

/* While the node hands over (its list is leaving): a connection
 * between requests, its replies written, leaves, or closes if it cannot
 * move (a TLS session). */
static enum conn_state
leave_point(struct conn *c)
{
    if (c->out_bytes > 0) {
        return CONN_WRITE;
    }
    if (conn_can_move(c)) {
        return CONN_LEAVE;
    }
    c->list->left.closed++;     /* the successor learns how many */
    return CONN_CLOSING;
}

/* Let go of the socket: on the ring once it is through with it (what
 * it received meanwhile goes along). */
static void
leave(struct conn *c)
{
    lookahead_drop(c);
    if (c->parked) {
        unpark(c);
    }
    conn_set_state(c, CONN_LEAVE);
    gone_one(c);
    if (c->rio != NULL) {
        ring_detach(c->rio, ring_done_leave, c);
        return;
    }
    conn_leave(&c, NULL, 0);
}

/* watch: the mc-log thread owns the socket now. */
static void
handoff(struct conn *c)
{
    lookahead_drop(c);
    gone_one(c);
    if (c->rio != NULL) {
        ring_remove(c->rio, ring_done_handoff, c);
    } else {
        conn_detach(&c);
    }
}

static void
conn_drive(struct conn *c)
{
    int64_t budget = (int64_t)settings.reqs_per_event * REQ_UNITS;
    bool trace = settings.verbose > 2;
    bool stop = false;

    logger_set_fd(c->fd);
    if (grouped) {
        c->drive_note = cache_group_noted();
    }
    while (!stop) {
        enum conn_state next;

        /* A request's usual way, READ to PARSE to WRITE, runs straight
         * down the first three cases; any other turn, or a trace to log,
         * goes round the loop. */
        switch (c->state) {
        case CONN_READ:
            next = c->list->leaving ? leave_point(c) : state_read(c, &stop);
            if (next != CONN_PARSE || trace) {
                break;
            }
            conn_set_state(c, next);
            /* fall through */
        case CONN_PARSE:
            next = c->list->leaving ? leave_point(c)
                                    : state_parse(c, &budget);
            if (next != CONN_WRITE || trace) {
                break;
            }
            conn_set_state(c, next);
            /* fall through */
        case CONN_WRITE: next = state_write(c, &stop); break;
        case CONN_NREAD: next = state_nread(c, &stop); break;
        case CONN_SWALLOW: next = state_swallow(c, &stop); break;
        case CONN_HANDOFF:
            handoff(c);
            return;
        case CONN_LEAVE:
            leave(c);
            return;
        case CONN_CLOSING:
        default:
            machine_close(&c);
            return;
        }
        if (trace && next != c->state) {
            log_write("%d: going from %s to %s", c->fd,
                      conn_state_label(c->state), conn_state_label(next));
        }
        conn_set_state(c, next);
    }
    if (grouped) {
        note_changes(c);        /* a noreply change: what follows waits */
    }
}

void
machine_adopt(struct conn *c)
{
    bool input = c->rend > c->rstart;

    machine_start(c);
    if (!input) {
        return;
    }
    /* What it had read before the handover is parsed at once. */
    conn_set_state(c, CONN_PARSE);
    if (c->rio != NULL) {
        ring_again(c->rio, EV_READ);
    } else {
        evloop_activate(c->loop, &c->ev, EV_READ);
    }
}

static void
ring_done_leave_udp(void *arg)
{
    struct conn *c = arg;

    conn_leave(&c, NULL, 0);
}

void
machine_leave(struct conn *c)
{
    enum conn_state s = c->state;

    if (c->is_udp) {
        /* its socket is served between datagrams: it leaves at once */
        conn_set_state(c, CONN_LEAVE);
        gone_one(c);
        if (c->rio != NULL) {
            ring_detach(c->rio, ring_done_leave_udp, c);
        } else {
            conn_leave(&c, NULL, 0);
        }
        return;
    }
    if ((s == CONN_READ || s == CONN_PARSE) && !c->parked) {
        c->yielded = false;
        conn_drive(c);
    }
    /* Else it is in a request (or closing): it leaves at its end. */
}

void
machine_join(struct conn_list *list, void (*wake)(void *), void *arg)
{
    resting = list;
    grouped = cache_group_join(wake, arg);
}

void
machine_end_pass(void)
{
    struct conn *list, *c;

    if (resting != NULL) {
        conn_rest_end_pass(resting);
    }
    if (!grouped) {
        return;
    }
    for (;;) {
        durable = cache_group_durable(&settled);
        /* those whose changes are durable now reply and go on */
        list = parked;
        parked = NULL;
        while ((c = list) != NULL) {
            list = c->park_next;
            c->park_next = NULL;
            if (changes_durable(c)) {
                c->parked = false;
                conn_drive(c);
            } else {
                c->park_next = parked;
                parked = c;
            }
        }
        /* the pass's changes (and the items they replaced) to the
         * flusher, which wakes this worker once they are durable; or,
         * with no flusher, synced here and their replies sent now */
        if (!cache_group_pending() || cache_group_submit()) {
            return;
        }
    }
}

/* ---- datagrams -------------------------------------------------------- */

bool
machine_run_datagram(struct conn *c)
{
    enum conn_state st = CONN_PARSE;

    for (;;) {
        switch (st) {
        case CONN_PARSE:
            if (c->rstart == c->rend) {
                return false;
            }
            st = c->proto == CONN_BINARY ? parse_binary(c) : parse_one(c);
            if (st == CONN_PARSE) {
                conn_out_end_message(c);
            }
            break;
        case CONN_NREAD:
            conn_nread_buffered(c);
            if (c->nread_off < conn_value_len(c, c->nitem)) {
                return false;
            }
            if (c->proto == CONN_BINARY) {
                process_bin_store(c);
            } else {
                process_store(c);
            }
            conn_out_end_message(c);
            st = CONN_PARSE;
            break;
        case CONN_SWALLOW:
            if (c->swallow > c->rend - c->rstart) {
                return false;
            }
            c->rstart += c->swallow;
            c->swallow = 0;
            conn_out_end_message(c);
            st = CONN_PARSE;
            break;
        default:
            /* A line cut short, or a close asked for (quit): the request
             * that closes answers with a message even if it says nothing,
             * as memcached sends a lone frame for a quit. */
            if (c->close_after_write) {
                conn_msg_end(c, true);
                return true;
            }
            return false;
        }
    }
}
