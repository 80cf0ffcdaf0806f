/*
 * mcload_conn.h: a connection to the server and the worker thread that owns
 * it, as mcload_send.c, mcload_recv.c and mcload.c share them.  Types
 * only.
 */
#ifndef MCPM_BENCH_MCLOAD_CONN_H
#define MCPM_BENCH_MCLOAD_CONN_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <event2/event.h>

#include "bench/mcload_hist.h"
#include "bench/mcload_keys.h"
#include "bench/mcload_opts.h"
#include "bench/tls_client.h"

struct counters {
    uint64_t requests;
    uint64_t get_reqs;
    uint64_t get_keys;
    uint64_t hits;
    uint64_t misses;
    uint64_t sets;
    uint64_t errors;
    uint64_t timeouts;
    uint64_t conn_errors;
};

/* One request in flight.  keys points into the connection's key pool. */
struct req {
    uint64_t sent;
    uint64_t *keys;
    enum op op;
    int nkeys;
    int cur;            /* text get: next candidate; meta: next reply */
    int nhits;
    int nerrs;          /* meta: keys answered with an error line */
};

struct buf {
    char *data;
    size_t off;
    size_t len;
    size_t cap;
};

struct worker;

struct conn {
    struct worker *w;
    int fd;
    struct tls_client *tls;
    bool active;
    bool want_write;
    struct event *ev_read;
    struct event *ev_write;
    struct buf in;
    struct buf out;
    struct req *ring;
    uint64_t *keypool;
    int head;
    int inflight;
    uint16_t udp_id;    /* the next request's UDP request id */
};

struct worker {
    int id;
    pthread_t tid;
    struct event_base *base;
    struct conn *conns;
    int nconns;
    int active;
    enum phase phase;
    bool stopping;
    uint64_t budget;
    uint64_t seq_lo;
    uint64_t seq_hi;
    uint64_t seq_next;
    uint64_t rng;
    struct zipf zipf;
    struct event *ev_deadline;
    struct event *ev_grace;
    struct event *ev_stop;
    struct event *ev_pace;  /* --rate: lets the next requests out */
    uint64_t paced;         /* requests sent in the run under --rate */
    int stop_fd;        /* eventfd: the signal thread asks us to stop */
    uint64_t t_start;
    uint64_t t_last;    /* when the last reply of the phase was parsed */
    uint64_t pre_ns;
    struct counters run;
    struct counters pre;
    struct hist hist;
};

#endif
