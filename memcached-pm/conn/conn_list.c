/*
 * conn_list.c: the workers' connection lists, and what "stats conns" and
 * "stats" read of them: the walk, the buffer gauges summed, the names of
 * addresses and states (conn.h).
 *
 * Locking: a list's lock guards its links; its worker alone links and
 * unlinks, and "stats conns" walks under the lock.
 */
#include "config.h"

#include "memcached-pm/conn/conn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

static struct conn_list *lists;
static unsigned nlists;

struct conn_list *
conn_lists_new(unsigned n)
{
    lists = calloc(n, sizeof(*lists));
    if (lists == NULL) {
        return NULL;
    }
    for (unsigned i = 0; i < n; i++) {
        pthread_mutex_init(&lists[i].lock, NULL);
    }
    nlists = n;
    return lists;
}

void
conn_lists_free(void)
{
    for (unsigned i = 0; i < nlists; i++) {
        pthread_mutex_destroy(&lists[i].lock);
    }
    free(lists);
    lists = NULL;
    nlists = 0;
}

void
conn_list_add(struct conn_list *l, struct conn *c)
{
    pthread_mutex_lock(&l->lock);
    c->prev = NULL;
    c->next = l->head;
    if (l->head != NULL) {
        l->head->prev = c;
    }
    l->head = c;
    l->n++;
    pthread_mutex_unlock(&l->lock);
}

void
conn_list_del(struct conn_list *l, struct conn *c)
{
    bool empty;

    pthread_mutex_lock(&l->lock);
    if (c->prev != NULL) {
        c->prev->next = c->next;
    } else {
        l->head = c->next;
    }
    if (c->next != NULL) {
        c->next->prev = c->prev;
    }
    l->n--;
    empty = l->n == 0;
    pthread_mutex_unlock(&l->lock);
    if (empty && l->leaving && l->on_empty != NULL) {
        l->on_empty(l->empty_arg);
    }
}

void
conn_each(void (*fn)(struct conn *c, void *ctx), void *ctx)
{
    for (unsigned i = 0; i < nlists; i++) {
        pthread_mutex_lock(&lists[i].lock);
        for (struct conn *c = lists[i].head; c != NULL; c = c->next) {
            fn(c, ctx);
        }
        pthread_mutex_unlock(&lists[i].lock);
    }
}

#define GLOAD(f) __atomic_load_n(&(f), __ATOMIC_RELAXED)

void
conn_gauges(struct buffer_gauges *out)
{
    memset(out, 0, sizeof(*out));
    for (unsigned i = 0; i < nlists; i++) {
        const struct buffer_gauges *g = &lists[i].gauges;

        out->read_buf_count += GLOAD(g->read_buf_count);
        out->read_buf_bytes += GLOAD(g->read_buf_bytes);
        out->response_obj_count += GLOAD(g->response_obj_count);
        out->response_obj_bytes += GLOAD(g->response_obj_bytes);
    }
}

const char *
conn_state_name(const struct conn *c)
{
    enum conn_state s = __atomic_load_n(&c->state, __ATOMIC_RELAXED);

    /* memcached's name for a UDP socket, and for a connection waiting
     * for its next request (it passes conn_waiting on its way there). */
    if (c->is_udp || s == CONN_READ) {
        return "conn_read";
    }
    return conn_state_label(s);
}

const char *
conn_state_label(enum conn_state s)
{
    switch (s) {
    case CONN_READ: return "conn_waiting";
    case CONN_PARSE: return "conn_parse_cmd";
    case CONN_NREAD: return "conn_nread";
    case CONN_SWALLOW: return "conn_swallow";
    case CONN_WRITE: return "conn_mwrite";
    case CONN_HANDOFF: return "conn_watch";
    case CONN_LEAVE: return "conn_closing";
    case CONN_CLOSING: default: return "conn_closing";
    }
}

void
conn_sock_cookie(int fd)
{
    unsigned id = settings.sock_cookie_id;

    if (id != 0 &&
        setsockopt(fd, SOL_SOCKET, SO_MARK, &id, sizeof(id)) != 0) {
        perror("setsockopt");
    }
}
