/*
 * conn_handover.c: a connection leaves for the node's successor, and a
 * connection taken over takes up where it was (conn.h, handover.h).
 *
 * Locking: the connection's worker thread only, as the rest of conn.c.
 */
#include "config.h"

#include "memcached-pm/conn/conn_handover.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "memcached-pm/base/log.h"
#include "memcached-pm/base/stats.h"
#include "memcached-pm/conn/conn_in.h"

bool
conn_can_move(const struct conn *c)
{
    return c->tls == NULL && !c->sasl_started && c->sasl == NULL;
}

/* The record of c: its socket and state, the input it has not parsed
 * and then `more`; false when out of memory. */
static bool
record_of(const struct conn *c, const char *more, size_t nmore,
          struct handover_conn *h)
{
    size_t have = c->rend - c->rstart;
    rel_time_t now = clock_now();

    memset(h, 0, sizeof(*h));
    h->fd = c->fd;
    h->proto = (uint8_t)c->proto;
    h->is_unix = c->is_unix;
    h->authenticated = c->authenticated;
    h->idle = now > c->last_cmd ? now - c->last_cmd : 0;
    snprintf(h->listen_addr, sizeof(h->listen_addr), "%s",
             c->listen_addr != NULL ? c->listen_addr : "");
    h->presented = c->presented > 0 ? c->list->present_base +
                                      (int32_t)c->presented - 1
                                    : -1;
    h->busy = c->active || have + nmore > 0 || c->presented == 0;
    if (c->peer_len <= sizeof(h->peer)) {
        h->peer = c->peer;
        h->peer_len = c->peer_len;
    }
    if (have + nmore == 0) {
        return true;
    }
    if ((h->left = malloc(have + nmore)) == NULL) {
        return false;
    }
    if (have > 0) {
        memcpy(h->left, c->rbuf + c->rstart, have);
    }
    if (nmore > 0) {
        memcpy(h->left + have, more, nmore);
    }
    h->nleft = (uint32_t)(have + nmore);
    return true;
}

void
conn_leave(struct conn **cp, const char *more, size_t nmore)
{
    struct conn *c = *cp;
    struct handover *left = &c->list->left;
    struct handover_conn h;

    if (c->is_udp) {
        if (handover_add_udp(left, c->fd) != 0) {
            conn_free(cp);
            return;
        }
    } else if (!record_of(c, more, nmore, &h) || handover_add(left, &h) != 0) {
        log_error("<%d no memory to hand it over: closed", c->fd);
        free(h.left);
        conn_free(cp);
        return;
    }
    log_debug("<%d handed over", c->fd);
    conn_detach(cp);
    SERVER_STAT_DECR(curr_connections);
}

int
conn_adopt(struct conn *c, const struct handover_conn *h)
{
    rel_time_t now = clock_now();

    c->proto = (enum conn_proto)h->proto;
    c->authenticated = h->authenticated;
    c->last_cmd = now > h->idle ? now - h->idle : 0;
    if (h->nleft > 0 && conn_fill_input(c, h->left, h->nleft) != 0) {
        return -1;
    }
    return 0;
}
