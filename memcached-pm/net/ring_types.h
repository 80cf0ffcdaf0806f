/*
 * ring_types.h: the state of a worker's ring and of its sources, which
 * ring.c and ring_io.c share (through ring_priv.h); no one else includes
 * it.
 */
#ifndef MCPM_RING_TYPES_H
#define MCPM_RING_TYPES_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include <liburing.h>

struct thread_stats;

/* ring.h's ring_cb, spelled out: this header sits below ring.h */
typedef void (*ring_types_cb)(int fd, short what, void *arg);

enum op { OP_NONE, OP_RECV, OP_SEND, OP_POLL, OP_TIMER };
#define OP_MASK 7u

#define BGID 0                  /* the worker's one buffer group */
#define RING_REG_MAX 256        /* files registered in one call */
#define NO_BUF (-1)

struct ring_io {
    struct ring    *r;
    int             fd;
    int             slot;           /* its registered file, or -1 */
    ring_types_cb   cb;
    void           *arg;            /* cb's; once removed, done's */
    void          (*done)(void *arg);
    short           want;           /* what the owner waits for */
    short           fired;          /* what became ready since it ran */
    short           polled;         /* poll: what the armed poll asks */
    bool            poll;           /* a readiness source */
    bool            poll_armed;
    bool            poll_cancelled;
    bool            recv_armed;
    bool            recv_paused;    /* its inbox is full: drain first */
    bool            send_busy;      /* a send is in the ring */
    bool            send_done;      /* ... and its result waits here */
    bool            eof;
    bool            removed;
    bool            keep_inbox;     /* removed, its data kept for done() */
    bool            queued;         /* on the ready list */
    bool            starved;        /* on the starved list */
    int             err;            /* the receive's error, positive */
    int             send_res;
    uint32_t        send_asked;     /* the send's bytes (at most
                                       what one send takes) */
    unsigned        inflight;       /* operations in the ring */

    /* the inbox: received buffers in order, chained by r->buf_next */
    int             in_head;
    int             in_tail;
    unsigned        in_off;         /* bytes of in_head already taken */
    unsigned        in_bufs;

    struct ring_io *ready_next;
    struct ring_io *starved_next;
    struct ring_io *removed_next;
};

struct ring {
    struct io_uring           uring;
    struct thread_stats      *stats;

    /* registered files: the free slots of the table, a stack; and the
     * sources given slots from reg_first on, their files registered in
     * one call before the next submission (ring_add()) */
    int                      *slots;
    unsigned                  nslots;
    struct ring_io           *reg[RING_REG_MAX];
    unsigned                  nreg;
    int                       reg_first;

    /* provided receive buffers */
    struct io_uring_buf_ring *br;
    size_t                    br_bytes;
    char                     *bufs;
    size_t                    buf_size;
    unsigned                  nbufs;
    unsigned                  provided;     /* handed out so far: 8 at
                                               first, doubled as
                                               receives run out, up to
                                               nbufs (provide_more()) */
    unsigned                  free_bufs;    /* as far as we know */
    unsigned                  returned;     /* added, not yet published */
    int                      *buf_next;
    unsigned                 *buf_len;
    unsigned                  inbox_max;    /* buffers one source holds
                                               before its receive pauses */

    struct ring_io           *ready;
    struct ring_io          **ready_tail;
    struct ring_io           *starved;
    struct ring_io           *removed;

    ring_types_cb             tick;
    void                     *tick_arg;
    struct __kernel_timespec  tick_ts;
    bool                      tick_armed;
    bool                      tick_due;
    bool                      stop;
    bool                      leaving;      /* ring_leave(): removals
                                               cancel nothing */
    bool                      let_go;       /* ring_let_go(): no buffer
                                               for a receive any more */
    struct ring_io           *husks;        /* let go of, freed with the
                                               ring: their receives may
                                               still complete */
    bool                      reaping;
    bool                      enabled;      /* taken over by its thread */
};

static inline uint64_t
ud(const void *p, enum op op)
{
    return (uint64_t)(uintptr_t)p | op;
}

/* The descriptor an operation on io names: its registered file's slot
 * (then with IOSQE_FIXED_FILE), or its fd. */
static inline int
ring_target(const struct ring_io *io)
{
    return io->slot >= 0 ? io->slot : io->fd;
}

static inline void
ring_fixed(struct io_uring_sqe *sqe, const struct ring_io *io)
{
    if (io->slot >= 0) {
        sqe->flags |= IOSQE_FIXED_FILE;
    }
}

#endif
