/*
 * warm.c: copying a running memcached node, and following it (warm.h).
 */
#include "config.h"

#include "memcached-pm/migrate/warm.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memcached-pm/base/settings.h"
#include "memcached-pm/migrate/link.h"
#include "proto/meta.h"
#include "storage/base/clock.h"
#include "storage/base/hash.h"
#include "storage/cache/cache.h"
#include "storage/cache/cache_stats.h"
#include "storage/slab/item.h"

#define QUEUE_KEYS  8192            /* keys waiting for their fetch */
#define DEPTH       64              /* fetches in flight */
#define KEY_MAX     LINK_KEY_MAX
/* While following, a metadump pass this long after the last one ended:
 * in-place incr/decr and touch are in no stream memcached has, and
 * 1.6.18 streams no deletions. */
#define PASS_GAP_US (10 * 1000 * 1000)

enum state { W_CONNECTING, W_COPYING, W_FOLLOWING, W_DONE, W_FAILED };

static const char *const state_names[] = {
    "connecting", "copying", "following", "done", "failed",
};

struct key {
    uint8_t n;
    bool    changed;        /* an event or a CAS named it changed */
    char    k[KEY_MAX];
};

/* A FIFO of keys: those to fetch, and those whose fetch is in flight. */
struct fifo {
    struct key *k;
    size_t head, tail, cap;         /* count: tail - head */
};

static struct {
    pthread_t      thread;
    bool           running;
    atomic_bool    stop;
    _Atomic int    state;
    _Atomic uint64_t source_items, copied, deleted, events, skipped,
                     passes, requests;
    atomic_bool    cut_over;        /* this node took the node's port */
} w;

/* What the thread works with. */
struct warm {
    struct link  watch, dump, fetch;
    struct fifo  todo, flight;
    bool         deletions;         /* the node streams deletions */
    bool         dumping;           /* a metadump pass runs */
    bool         first_pass;        /* it is the copy, not a resync */
    bool         pass_wanted;       /* lines were skipped: pass again */
    uint64_t     pass_keys;         /* keys the running pass listed */
    uint64_t     next_pass_us;      /* the next periodic pass */
    char        *sweep;             /* this node's keys to fetch again, */
    size_t       sweep_off;         /* each a length byte and its bytes */
    size_t       sweep_len;
    size_t       sweep_cap;
    double       tokens;            /* requests the rate allows now */
    uint64_t     last_us;           /* of the token refill */
    uint64_t     retry_us;          /* a BUSY crawler: try again then */
    uint64_t     progress_us;       /* the next -v line, at the soonest */
    uint64_t     progress_sum;      /* what it said last time */
    bool         cut;               /* cut_over seen */
    bool         copy_pass;         /* the running pass is the copy's */
    unsigned     copy_passes;       /* of the copy's, applied */
    bool         ends_set;          /* a copy pass's keys are named: */
    size_t       copy_todo_end;    /* in todo up to here, */
    size_t       copy_flight_end;  /* ... then in flight */
};

/* ---- keys --------------------------------------------------------------- */

static bool
fifo_init(struct fifo *f, size_t cap)
{
    f->k = calloc(cap, sizeof(*f->k));
    f->head = f->tail = 0;
    f->cap = cap;
    return f->k != NULL;
}

static size_t
fifo_count(const struct fifo *f)
{
    return f->tail - f->head;
}

static void
fifo_push(struct fifo *f, const char *k, size_t n, bool changed)
{
    struct key *e = &f->k[f->tail++ % f->cap];

    e->n = (uint8_t)n;
    e->changed = changed;
    memcpy(e->k, k, n);
}

static struct key *
fifo_first(struct fifo *f)
{
    return &f->k[f->head % f->cap];
}

static struct key *
fifo_pop(struct fifo *f)
{
    struct key *k = fifo_first(f);

    f->head++;
    return k;
}

/* ---- the copy ----------------------------------------------------------- */

/* This node's CAS of a key, 0 when it has none. */
static uint64_t
local_cas(const char *k, size_t n)
{
    struct cache_mget a = { .peek = true, .no_bump = true };
    enum cache_status st;
    struct item *it = cache_mget(k, n, hash_key(k, n), &a, &st);
    uint64_t cas = 0;

    if (it != NULL) {
        cas = item_cas(it);
        cache_release(it);
    }
    return cas;
}

static void
forget(const char *k, size_t n)
{
    if (cache_delete(k, n, hash_key(k, n), 0, NULL) == CACHE_DELETED) {
        atomic_fetch_add(&w.deleted, 1);
    }
}

/* A watch line: a key stored or deleted is fetched again; skipped lines
 * ask for a pass.  After the cut-over, the key is deleted instead: a
 * client may have written it here since, and what the node would send
 * may be older than that. */
static void
on_watch(struct warm *m, const char *line)
{
    const char *type, *key, *status;
    size_t tn, kn, sn;
    char k[KEY_MAX];
    int n;

    if (strncmp(line, "skipped=", 8) == 0) {
        atomic_fetch_add(&w.skipped, strtoull(line + 8, NULL, 10));
        m->pass_wanted = true;
        return;
    }
    if ((type = link_word(line, "type=", &tn)) == NULL ||
        (key = link_word(line, "key=", &kn)) == NULL) {
        return;
    }
    if (tn == 10 && strncmp(type, "item_store", 10) == 0) {
        status = link_word(line, "status=", &sn);
        if (status == NULL || sn != 6 || strncmp(status, "stored", 6) != 0) {
            return;
        }
    } else if (!(tn == 7 && strncmp(type, "deleted", 7) == 0)) {
        return;
    }
    if ((n = link_uri_key(key, kn, k)) > 0) {
        atomic_fetch_add(&w.events, 1);
        if (atomic_load(&w.cut_over)) {
            forget(k, (size_t)n);   /* the node's value is no better */
        } else {
            fifo_push(&m->todo, k, (size_t)n, true);
        }
    }
}

static bool
start_pass(struct warm *m)
{
    static const char req[] = "lru_crawler metadump all\r\n";

    m->dumping = link_queue(&m->dump, req, sizeof(req) - 1);
    m->pass_wanted = false;
    m->pass_keys = 0;
    atomic_fetch_add(&w.requests, 1);
    return m->dumping;
}

static uint64_t
local_items(void)
{
    struct cache_stats st;

    cache_stats(&st);
    return st.curr_items;
}

static int
sweep_key(const struct cache_meta *k, void *ctx)
{
    struct warm *m = ctx;

    if (k->nkey > KEY_MAX) {
        return 0;
    }
    if (m->sweep_len + 1 + k->nkey > m->sweep_cap) {
        size_t cap = m->sweep_cap ? m->sweep_cap * 2 : 1 << 20;
        char *b = realloc(m->sweep, cap);

        if (b == NULL) {
            return 1;
        }
        m->sweep = b;
        m->sweep_cap = cap;
    }
    m->sweep[m->sweep_len++] = (char)k->nkey;
    memcpy(m->sweep + m->sweep_len, k->key, k->nkey);
    m->sweep_len += k->nkey;
    return 0;
}

/* This node holds more keys than the node listed, and deletions are
 * not streamed: every key here is fetched again, a miss deleting it. */
static void
start_sweep(struct warm *m)
{
    if (m->sweep_off < m->sweep_len) {
        return;                     /* one is running */
    }
    m->sweep_off = m->sweep_len = 0;
    cache_metadump(NULL, sweep_key, m);
}

/* Keys of the sweep into the queue, as room allows. */
static void
feed_sweep(struct warm *m)
{
    while (!m->cut && m->sweep_off < m->sweep_len &&
           fifo_count(&m->todo) < QUEUE_KEYS) {
        size_t n = (unsigned char)m->sweep[m->sweep_off];

        fifo_push(&m->todo, m->sweep + m->sweep_off + 1, n, false);
        m->sweep_off += 1 + n;
    }
}

/* A metadump line: fetch the key if this node's copy differs. */
static bool
on_dump(struct warm *m, const char *line)
{
    const char *key, *cas;
    size_t kn, cn;
    char k[KEY_MAX];
    int n;

    if (strcmp(line, "END") == 0) {
        if (m->copy_pass) {
            m->copy_pass = false;
            m->ends_set = true;
            m->copy_todo_end = m->todo.tail;
            m->copy_flight_end = SIZE_MAX;
        }
        m->dumping = false;
        m->first_pass = false;
        m->next_pass_us = clock_mono_us() + PASS_GAP_US;
        atomic_fetch_add(&w.passes, 1);
        if (!m->deletions && local_items() > m->pass_keys) {
            start_sweep(m);
        }
        return true;
    }
    if (strcmp(line, "OK") == 0) {
        return true;                /* 1.6.45 starts the dump with it */
    }
    if (strncmp(line, "BUSY", 4) == 0) {
        m->dumping = false;         /* the crawler runs: again soon */
        m->pass_wanted = true;
        m->retry_us = clock_mono_us() + 100 * 1000;
        return true;
    }
    if ((key = link_word(line, "key=", &kn)) == NULL) {
        fprintf(stderr, "[warm] %s: %s\n", settings.warm_from, line);
        return false;
    }
    if ((n = link_uri_key(key, kn, k)) <= 0) {
        return true;
    }
    m->pass_keys++;
    cas = link_word(line, "cas=", &cn);
    if (m->first_pass) {
        fifo_push(&m->todo, k, (size_t)n, false);
    } else if (cas == NULL ||
               strtoull(cas, NULL, 10) != local_cas(k, (size_t)n)) {
        fifo_push(&m->todo, k, (size_t)n, true);
    }
    return true;
}

/* Fetches while the depth, the rate and the queue allow. */
static void
send_fetches(struct warm *m)
{
    char line[KEY_MAX * 2 + 32];

    while (fifo_count(&m->todo) > 0 && fifo_count(&m->flight) < DEPTH &&
           (settings.warm_from_rate == 0 || m->tokens >= 1.0)) {
        struct key *k = fifo_first(&m->todo);
        size_t n = (size_t)snprintf(line, sizeof(line), "mg ");

        n += meta_base64_encode(k->k, k->n, line + n, sizeof(line) - n);
        n += (size_t)snprintf(line + n, sizeof(line) - n,
                              " b k v f t c\r\n");
        if (!link_queue(&m->fetch, line, n)) {
            return;                 /* no room: the key stays queued */
        }
        fifo_pop(&m->todo);
        fifo_push(&m->flight, k->k, k->n, k->changed);
        m->tokens -= 1.0;
        atomic_fetch_add(&w.requests, 1);
    }
}

/* Store a fetched value as the node has it. */
static void
store(const struct key *k, const char *val, uint32_t len, uint32_t flags,
      long long ttl, uint64_t cas, bool binary)
{
    uint32_t hv = hash_key(k->k, k->n);
    rel_time_t exptime = ttl < 0 ? 0 : clock_now() + (rel_time_t)ttl;
    struct cache_mstore a = { .op = CACHE_SET, .new_cas = cas };
    enum cache_status st;
    struct item *it;

    if (cas != 0 && local_cas(k->k, k->n) == cas) {
        return;                     /* this node has that very value */
    }
    it = cache_alloc(k->k, k->n, hv, flags, exptime, len, &st);
    if (it == NULL) {
        return;
    }
    item_value_fill(it, val, (size_t)len + 2);
    if (binary) {
        item_set_key_binary(it);
    }
    if (cache_mstore(it, &a) == CACHE_STORED) {
        atomic_fetch_add(&w.copied, 1);
    }
    cache_release(it);
}

/* The replies that are whole, in the order of the requests: false when
 * one makes no sense (the copy stops). */
static bool
on_fetch(struct warm *m)
{
    char line[1024];
    size_t span;

    while (fifo_count(&m->flight) > 0 &&
           link_peek(&m->fetch, line, sizeof(line), &span) != NULL) {
        struct key *k;
        const char *f, *t, *c;
        size_t fl, tl, cl, bl, body;
        unsigned long vlen;

        if (strncmp(line, "EN", 2) == 0 &&
            (line[2] == '\0' || line[2] == ' ')) {  /* 1.6.18: "EN k.." */
            m->fetch.in_off += span;
            k = fifo_pop(&m->flight);
            if (cache_delete(k->k, k->n, hash_key(k->k, k->n), 0, NULL) ==
                CACHE_DELETED) {
                atomic_fetch_add(&w.deleted, 1);
            }
            continue;
        }
        if (strncmp(line, "VA ", 3) != 0) {
            fprintf(stderr, "[warm] %s answered: %s\n", settings.warm_from,
                    line);
            return false;
        }
        vlen = strtoul(line + 3, NULL, 10);
        body = m->fetch.in_off + span;
        if (m->fetch.in_len < body + vlen + 2) {
            return true;            /* the value is not all here yet */
        }
        f = link_word(line, "f", &fl);
        t = link_word(line, "t", &tl);
        c = link_word(line, "c", &cl);
        k = fifo_pop(&m->flight);
        store(k, m->fetch.in + body, (uint32_t)vlen,
              f != NULL ? (uint32_t)strtoul(f, NULL, 10) : 0,
              t != NULL ? strtoll(t, NULL, 10) : -1,
              c != NULL ? strtoull(c, NULL, 10) : 0,
              link_word(line, "b", &bl) != NULL && bl == 0);
        m->fetch.in_off = body + vlen + 2;
    }
    return true;
}

/* ---- the thread --------------------------------------------------------- */

/* Open the three connections; the watch first, so that no write after
 * the copy begins goes unseen.  false, said, when the node is not there
 * or is not a memcached that can be followed. */
static bool
connect_all(struct warm *m)
{
    static const char both[] = "watch mutations deletions\r\n";
    static const char muts[] = "watch mutations\r\n";
    static const char stats[] = "stats\r\n";
    char line[1024];
    const char *why = NULL;

    m->watch.fd = link_dial(settings.warm_from);
    m->dump.fd = link_dial(settings.warm_from);
    m->fetch.fd = link_dial(settings.warm_from);
    if (m->watch.fd < 0 || m->dump.fd < 0 || m->fetch.fd < 0) {
        fprintf(stderr, "[warm] cannot connect to %s: %s\n",
                settings.warm_from, strerror(errno));
        return false;
    }
    link_queue(&m->watch, both, sizeof(both) - 1);
    if (link_wait_line(&m->watch, line, sizeof(line), &w.stop) != NULL &&
        strcmp(line, "ERROR") == 0) {
        link_queue(&m->watch, muts, sizeof(muts) - 1);  /* 1.6.18 */
        if (link_wait_line(&m->watch, line, sizeof(line), &w.stop) == NULL) {
            line[0] = '\0';
        }
    } else {
        m->deletions = true;
    }
    if (strcmp(line, "OK") != 0) {
        why = "watch";
    }
    link_queue(&m->fetch, stats, sizeof(stats) - 1);
    while (why == NULL) {
        if (link_wait_line(&m->fetch, line, sizeof(line), &w.stop) == NULL) {
            why = "stats";
        } else if (strncmp(line, "STAT curr_items ", 16) == 0) {
            atomic_store(&w.source_items, strtoull(line + 16, NULL, 10));
        } else if (strcmp(line, "END") == 0) {
            break;
        }
    }
    atomic_fetch_add(&w.requests, 3);
    if (why != NULL) {
        fprintf(stderr, "[warm] %s refused `%s`: %s\n", settings.warm_from,
                why, line);
        return false;
    }
    return true;
}

static void
refill(struct warm *m)
{
    uint64_t t = clock_mono_us();
    double cap = settings.warm_from_rate / 10.0 + DEPTH;

    m->tokens += (double)(t - m->last_us) * settings.warm_from_rate / 1e6;
    if (m->tokens > cap) {
        m->tokens = cap;
    }
    m->last_us = t;
}

static void
progress(struct warm *m)
{
    uint64_t t = clock_mono_us();

    uint64_t sum = atomic_load(&w.copied) + atomic_load(&w.deleted) +
                   atomic_load(&w.passes);

    if (settings.verbose == 0 || t < m->progress_us ||
        sum == m->progress_sum) {
        return;
    }
    m->progress_us = t + 1000 * 1000;
    m->progress_sum = sum;
    fprintf(stderr, "[warm] %s: %s, %" PRIu64 " of %" PRIu64 " items "
            "copied, %" PRIu64 " deleted, %" PRIu64 " events, %" PRIu64
            " requests\n", settings.warm_from,
            state_names[atomic_load(&w.state)], atomic_load(&w.copied),
            atomic_load(&w.source_items), atomic_load(&w.deleted),
            atomic_load(&w.events), atomic_load(&w.requests));
}

/* Read and act on whatever a connection has; false when the copy must
 * stop (the node went away, or said something that makes no sense). */
static bool
serve(struct warm *m, struct pollfd *p)
{
    char line[4096];

    if ((p[0].revents & (POLLIN | POLLHUP | POLLERR)) &&
        !link_read(&m->watch)) {
        return false;
    }
    while (fifo_count(&m->todo) < QUEUE_KEYS &&
           link_line(&m->watch, line, sizeof(line)) != NULL) {
        on_watch(m, line);
    }
    if ((p[1].revents & (POLLIN | POLLHUP | POLLERR)) &&
        !link_read(&m->dump)) {
        return false;
    }
    while (m->dumping && fifo_count(&m->todo) < QUEUE_KEYS &&
           link_line(&m->dump, line, sizeof(line)) != NULL) {
        if (!on_dump(m, line)) {
            return false;
        }
    }
    if ((p[2].revents & (POLLIN | POLLHUP | POLLERR)) &&
        !link_read(&m->fetch)) {
        return false;
    }
    if ((p[2].revents & POLLOUT) && !link_write(&m->fetch)) {
        return false;
    }
    if ((p[1].revents & POLLOUT) && !link_write(&m->dump)) {
        return false;
    }
    /* a connection closed: the node is going away */
    return on_fetch(m) && !m->watch.eof && !m->dump.eof && !m->fetch.eof;
}

/* Keys whose last change was seen but whose value could not be fetched
 * (the node went away first): what this node holds of them may be older
 * than the node's last write, so a miss is served instead. */
static void
forget_unfetched(struct warm *m)
{
    struct fifo *qs[2] = { &m->flight, &m->todo };

    for (int i = 0; i < 2; i++) {
        while (fifo_count(qs[i]) > 0) {
            struct key *k = fifo_pop(qs[i]);

            if (k->changed) {
                forget(k->k, k->n);
            }
        }
    }
}

/* Following once two passes' keys are all fetched and applied: those
 * queued before each one's END, whatever the stream queued since.  The
 * second, started once the first's keys are in, fetches what its
 * listing finds missing or changed here: memcached's crawl can miss an
 * item that its LRU maintainer moves from list to list meanwhile (under
 * load, right after a bulk fill). */
static void
copied_yet(struct warm *m)
{
    if (!m->ends_set || atomic_load(&w.state) != W_COPYING) {
        return;
    }
    if (m->copy_flight_end == SIZE_MAX &&
        m->todo.head >= m->copy_todo_end) {
        m->copy_flight_end = m->flight.tail;
    }
    if (m->copy_flight_end == SIZE_MAX ||
        m->flight.head < m->copy_flight_end) {
        return;
    }
    m->ends_set = false;
    if (++m->copy_passes == 2) {
        atomic_store(&w.state, W_FOLLOWING);
        return;
    }
    m->copy_pass = true;            /* the next pass to start: at once */
    m->pass_wanted = true;
}

static void
follow(struct warm *m)
{
    m->first_pass = true;
    m->copy_pass = true;
    m->last_us = clock_mono_us();
    start_pass(m);
    atomic_store(&w.state, W_COPYING);
    while (!atomic_load(&w.stop)) {
        struct pollfd p[3] = {
            { .fd = m->watch.fd, .events = 0 },
            { .fd = m->dump.fd, .events = 0 },
            { .fd = m->fetch.fd, .events = 0 },
        };
        bool room = fifo_count(&m->todo) < QUEUE_KEYS;

        if (!m->dumping && !m->cut && clock_mono_us() >= m->retry_us &&
            (m->pass_wanted || (!m->first_pass &&
                                clock_mono_us() >= m->next_pass_us))) {
            start_pass(m);
        }
        feed_sweep(m);
        refill(m);
        send_fetches(m);
        p[0].events = room ? POLLIN : 0;
        p[1].events = (m->dumping && room ? POLLIN : 0) |
                      (m->dump.out_len > 0 ? POLLOUT : 0);
        p[2].events = (fifo_count(&m->flight) > 0 ? POLLIN : 0) |
                      (m->fetch.out_len > 0 ? POLLOUT : 0);
        poll(p, 3, fifo_count(&m->todo) > 0 || m->pass_wanted ? 10 : 500);
        if (!serve(m, p)) {
            break;
        }
        copied_yet(m);
        if (atomic_load(&w.cut_over) && !m->cut) {
            /* clients write here now: no fetched value may land over
             * theirs, so what is pending is deleted, and from here on
             * the stream only deletes */
            m->cut = true;
            forget_unfetched(m);
            m->dumping = false;
            m->pass_wanted = false;
            m->next_pass_us = UINT64_MAX;
            m->sweep_off = m->sweep_len;
        }
        progress(m);
    }
}

static void *
warm_main(void *arg)
{
    struct warm m;
    bool gone;

    (void)arg;
    memset(&m, 0, sizeof(m));
    m.watch.fd = m.dump.fd = m.fetch.fd = -1;
    if (!fifo_init(&m.todo, QUEUE_KEYS + 1024) ||
        !fifo_init(&m.flight, DEPTH) || !connect_all(&m)) {
        atomic_store(&w.state, W_FAILED);
    } else {
        follow(&m);
        forget_unfetched(&m);
        gone = m.watch.eof || m.dump.eof || m.fetch.eof;
        atomic_store(&w.state, gone ? W_DONE : W_FAILED);
        if (settings.verbose > 0 || !gone) {
            m.progress_us = 0;
            fprintf(stderr, "[warm] %s %s: %" PRIu64 " items copied, %"
                    PRIu64 " deleted, %" PRIu64 " events followed\n",
                    settings.warm_from, gone ? "stopped" :
                    "is not followed any more", atomic_load(&w.copied),
                    atomic_load(&w.deleted), atomic_load(&w.events));
        }
    }
    link_close(&m.watch);
    link_close(&m.dump);
    link_close(&m.fetch);
    free(m.todo.k);
    free(m.flight.k);
    free(m.sweep);
    return NULL;
}

int
warm_start(void)
{
    if (settings.warm_from == NULL || w.running) {
        return 0;
    }
    atomic_store(&w.stop, false);
    atomic_store(&w.state, W_CONNECTING);
    if (pthread_create(&w.thread, NULL, warm_main, NULL) != 0) {
        fprintf(stderr, "[warm] cannot start its thread\n");
        return -1;
    }
    pthread_setname_np(w.thread, "mc-warm");
    w.running = true;
    return 0;
}

void
warm_stop(void)
{
    if (!w.running) {
        return;
    }
    atomic_store(&w.stop, true);
    pthread_join(w.thread, NULL);
    w.running = false;
}

void
warm_cut_over(void)
{
    atomic_store(&w.cut_over, true);
}

bool
warm_stats(struct warm_stats *out)
{
    if (settings.warm_from == NULL) {
        return false;
    }
    out->state = state_names[atomic_load(&w.state)];
    out->source_items = atomic_load(&w.source_items);
    out->copied = atomic_load(&w.copied);
    out->deleted = atomic_load(&w.deleted);
    out->events = atomic_load(&w.events);
    out->skipped = atomic_load(&w.skipped);
    out->passes = atomic_load(&w.passes);
    out->requests = atomic_load(&w.requests);
    return true;
}
