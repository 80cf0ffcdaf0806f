/*
 * takeover.h: a node hands its sockets to its successor without a
 * service manager (-o takeover=<path>).
 *
 * Every node started with the option listens on a unix socket at <path>
 * (SOCK_SEQPACKET, so each message arrives whole with its fds).  A new
 * node started with the same option connects there before it listens or
 * opens its memory file, and the two talk:
 *
 *   successor                          running node
 *   HELLO (versions it reads)  ----->
 *                              <-----  OFFER (the version it writes, the
 *                                      size of its DRAM index and where
 *                                      its memory file is mapped), or
 *                                      REFUSE (none: it stops plainly)
 *   holds that address range,
 *   makes room for the index
 *   GO (version 3; 4: with the
 *   connections it has room for)
 *                              ----->
 *                              <-----  PREIMAGE (version 5: the room for
 *                                      its DRAM index, the hash table
 *                                      copied into it, while it serves;
 *                                      or no fd: none)
 *   copies the table
 *   PRECOPIED                  ----->
 *                              <-----  PRECONNS (version 4: the fds of
 *                                      its connections, while it serves
 *                                      on them)
 *                                      stops accepting; its workers bring
 *                                      each connection to a request
 *                                      boundary and let go of it
 *                              <-----  UNIT_LISTENERS (version 6: those
 *                                      a .socket unit holds, which stay
 *                                      out of the fd store)
 *                              <-----  LISTENERS (fds: TCP, UDP, unix,
 *                                      this takeover socket)
 *                              <-----  CONNS (fds of the connections not
 *                                      among PRECONNS, records' order)
 *                              <-----  STATE (the records, handover.h)
 *                                      closes its memory file (clean)
 *                              <-----  IMAGE (version 2: its DRAM index;
 *                                      5: and the table's pages written
 *                                      since PREIMAGE)
 *                              <-----  RELEASED
 *   opens the memory file
 *   TAKEN                      ----->  exits
 *   serves
 *
 * Until TAKEN the running node keeps its own copies of every socket: if
 * the successor goes away before (killed, or it cannot open the file),
 * the running node opens its file again and serves on; if the running
 * node goes away, the successor serves with what it received (its file
 * then recovers as after a crash).  The successor reads nothing from a
 * connection before it sends TAKEN, and the running node touches none
 * after: at every moment one of them serves.
 *
 * Main thread only; the calls block (with the bounds given).
 */
#ifndef MCPM_TAKEOVER_H
#define MCPM_TAKEOVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "memcached-pm/conn/handover.h"
#include "memcached-pm/net/given.h"

enum takeover_msg {
    TAKEOVER_HELLO = 1,
    TAKEOVER_OFFER,
    TAKEOVER_REFUSE,
    TAKEOVER_LISTENERS,
    TAKEOVER_CONNS,
    TAKEOVER_STATE,
    TAKEOVER_RELEASED,
    TAKEOVER_TAKEN,
    TAKEOVER_IMAGE,         /* version 2: the DRAM index, a memfd */
    TAKEOVER_GO,            /* version 3: the successor is ready */
    TAKEOVER_PRECONNS,      /* version 4: sockets ahead of the pause */
    TAKEOVER_PREIMAGE,      /* version 5: the table ahead of the pause */
    TAKEOVER_PRECOPIED,     /* version 5: ... copied by the successor */
    TAKEOVER_UNIT_LISTENERS /* version 6: listeners a .socket unit holds */
};

/* The other side of a takeover. */
struct takeover_peer {
    int      fd;                /* the session's socket */
    pid_t    pid;
    uint32_t version;           /* the handover's version agreed on */
    uint64_t index_bytes;       /* OFFER: the size of the index to come */
    uint64_t file_base;         /* OFFER: where the node maps its memory */
    uint64_t file_len;          /* file, and how much (0: unknown) */
};

/* ---- the running node ------------------------------------------------- */

/* Listen at path: on the socket given at start (a predecessor's) if one
 * is bound there, else a new one (a file a dead node left is replaced).
 * The listening fd, or -1 with a message. */
int takeover_listen(const char *path, struct given *g, size_t n);

/*
 * A successor connected to lfd: take its HELLO (within a second).  0: an
 * OFFER was sent, saying the index will take index_bytes and the memory
 * file is mapped at index_file[0], index_file[1] bytes (0: no index), and p
 * describes the successor; 1: it reads no version this build writes, a
 * REFUSE was sent, and why says so (the node then stops as it would
 * without a successor); -1: no successor after all (why).
 */
int takeover_accept(int lfd, struct takeover_peer *p, uint64_t index_bytes,
                    const uint64_t index_file[2], char *why, size_t len);

/* Send fds (at most 250 a message) as `what` (LISTENERS, PRECONNS or
 * CONNS), the
 * state file (STATE) or the index (IMAGE), or a message without any
 * (RELEASED, TAKEN).  0, or -1: the other side is gone. */
int takeover_send_fds(int sock, enum takeover_msg what, const int *fds,
                      size_t n);
int takeover_send(int sock, enum takeover_msg what);

/* Wait for `what` from the other side, at most ms (-1: for as long as
 * it lives).  0, or -1: it went away, said something else, or nothing
 * in time. */
int takeover_wait(int sock, enum takeover_msg what, int ms);

/* GO (version 3), saying how many connections the successor has room
 * for (version 4: its descriptors; UINT64_MAX: it does not say), and
 * waiting for it, at most ms: 0 (*room set), or -1 as takeover_wait(). */
int takeover_send_go(int sock, uint64_t room);
int takeover_wait_go(int sock, int ms, uint64_t *room);

/* PREIMAGE (version 5): the room fd (-1: none) with the table at
 * [at, at + len) of it; and the successor's side, waiting at most ms:
 * 0 (*fd -1 when none came), or -1 as takeover_wait(). */
int takeover_send_preimage(int sock, int fd, uint64_t at, uint64_t len);
int takeover_wait_preimage(int sock, int ms, int *fd, uint64_t *at,
                           uint64_t *len);

/* ---- the successor ---------------------------------------------------- */

/*
 * Connect to path and say HELLO.  0: a node there offered its sockets (p
 * set); 1: nobody serves there (no file, or a dead node's); -1: the node
 * there refused or did not answer, why says why (a refusing node stops
 * plainly: wait for it with takeover_wait_gone()).
 */
int takeover_connect(const char *path, struct takeover_peer *p, char *why,
                     size_t len);

/* What a successor receives. */
struct takeover_got {
    struct given        *given;     /* listeners, origin TAKEOVER */
    size_t               ngiven;
    int                 *conns;     /* connection fds, records' order */
    size_t               nconns;
    size_t               next_conn; /* the next CONNS a record takes */
    int                 *pre;       /* PRECONNS: by the place records
                                       name */
    size_t               npre;
    int                  state;     /* the state file, or -1 */
    int                  image;     /* the DRAM index, or -1 */
    int                  image_delta;   /* its table's pages written
                                           since PREIMAGE, or -1 */
    bool                 released;  /* the memory file is closed */
};

/*
 * Take the running node's sockets until it says RELEASED: 0.  -1: it
 * went away first (what arrived is in got all the same, to serve with:
 * its memory file recovers as after a crash).
 */
int takeover_receive(struct takeover_peer *p, struct takeover_got *got);

/* Free what got holds, closing the fds no one took. */
void takeover_got_free(struct takeover_got *got);

/* Wait until the node at the other end of sock has exited (its end
 * closes), at most timeout_ms.  0, or -1. */
int takeover_wait_gone(int sock, int timeout_ms);

/* A step of the takeover, for -v and for crash tests: with
 * MCPM_TAKEOVER_PAUSE=<side>:<step> in the environment the process
 * stops itself (SIGSTOP) there, so that a test can kill either side at
 * that moment. */
void takeover_step(const char *side, const char *step);

#endif
