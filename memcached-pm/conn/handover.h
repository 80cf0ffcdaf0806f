/*
 * handover.h: what a node hands its successor besides its listening
 * sockets: its client connections, each stopped at a request boundary
 * with the little state it needs (the protocol it speaks, whether it has
 * authenticated, the input read and not yet parsed), and its UDP sockets.
 *
 * The records travel in a memfd (a state file), the sockets beside it:
 * over the takeover socket (takeover.h), or through systemd's fd store,
 * each under a name that gives its place ("mcpm-c<i>").  A takeover
 * sends most sockets ahead of the pause, while the node still serves
 * (version 4): a record then names the one it is by its place among
 * those (`presented`), and the sockets sent in the pause are those of
 * the records that name none, in their order.  The state file starts
 * with a magic and its layout version: a build reads its own version
 * and the older ones it lists, and a node hands over only to a build
 * that reads its version.
 *
 *   header   "MCPM-HO" NUL, u32 version, u32 connections, u64 bytes;
 *            version 4: then u32 the connections the node could not
 *            carry and closed (handover.closed), u32 0
 *   per connection, in order (versions 1 to 3):
 *            u8 protocol (enum conn_proto), u8 flags (1: a unix socket,
 *            2: authenticated), u16 0, u32 seconds idle, u32 input
 *            bytes, 64 bytes: the listener's name; then the input
 *   version 4: the same, then i32 presented (-1: none), u32 the peer's
 *            address length, 28 bytes: the peer's address; flags 4: it
 *            was busy (a request since it was sent, or input)
 *
 * Native byte order: both nodes run on one host.
 */
#ifndef MCPM_HANDOVER_H
#define MCPM_HANDOVER_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * The handover's versions: this build writes HANDOVER_VERSION, or an
 * older one its successor asks for, and reads them all from
 * HANDOVER_VERSION_MIN.
 *   1  the state file, the sockets
 *   2  and, in a takeover, the DRAM index of the memory file (IMAGE,
 *      storage/cache/cache.h cache_image_write())
 *   3  and the successor makes room for the index (OFFER says its size)
 *      before the node stops (GO)
 *   4  and the connections' sockets go before the node stops
 *      (PRECONNS), the records name them; a record has the peer's
 *      address, and says whether the connection was busy
 *   5  and the hash table goes before the node stops too (PREIMAGE),
 *      the pause copying only its pages written since
 *   6  and a .socket unit's listeners go apart (UNIT_LISTENERS); the
 *      successor a unit's main process started hands the node back to
 *      that process (life/respawn.h) and never names itself MAINPID=
 */
#define HANDOVER_VERSION     6
#define HANDOVER_VERSION_MIN 1


/* The fd store's names: the state file, the connections, the listeners
 * a node put there itself, its UDP sockets. */
#define HANDOVER_STATE_NAME  "mcpm-state"
#define HANDOVER_CONN_PREFIX "mcpm-c"
#define HANDOVER_LISTEN_NAME "mcpm-listen"
#define HANDOVER_INDEX_NAME  "mcpm-index"

struct handover_conn {
    int      fd;
    uint8_t  proto;             /* enum conn_proto */
    bool     is_unix;
    bool     authenticated;     /* -S: its SASL AUTH succeeded */
    uint32_t idle;              /* seconds since its last request */
    char     listen_addr[64];
    uint32_t nleft;
    char    *left;              /* input not yet parsed (malloc'd), or
                                   NULL */
    int32_t  presented;         /* its place among the sockets sent ahead
                                   of the pause, or -1 */
    bool     busy;              /* a request since then, or input */
    uint32_t peer_len;          /* 0: unknown (get it from the socket) */
    struct sockaddr_in6 peer;
};

/* A node's connections and UDP sockets, as its workers left them; and
 * the sockets sent ahead of the pause whose connections closed since
 * (shut down; their descriptors closed with h). */
struct handover {
    struct handover_conn *conns;
    size_t                nconns, conns_cap;
    int                  *udp;
    size_t                nudp, udp_cap;
    int                  *dead;
    size_t                ndead, dead_cap;
    uint32_t              closed;   /* connections that could not come:
                                       closed at a request boundary */
};

/* Append a connection (taking its input buffer) or a UDP socket.  0, or
 * -1 when out of memory (the caller still owns what it passed). */
int handover_add(struct handover *h, const struct handover_conn *c);
int handover_add_udp(struct handover *h, int fd);
int handover_add_dead(struct handover *h, int fd);

/* Room for n more connections, its memory touched: 0 or -1. */
int handover_reserve(struct handover *h, size_t n);

/* Move everything of src to the end of dst (src is left empty; the
 * counts of closed ones add up).  0 or -1. */
int handover_move(struct handover *dst, struct handover *src);

/* Free what h holds, closing its sockets when close_fds (its dead ones
 * always). */
void handover_free(struct handover *h, bool close_fds);

/* h's connection records in a new memfd, in the layout of `version`,
 * read from its start: its fd, or -1. */
int handover_save(const struct handover *h, uint32_t version);

/*
 * Read the records of a state file into h (appended): fd_of(c, i, arg)
 * is the socket of record i (c: what it says), or -1 when it did not
 * arrive (that record is dropped).  h->closed adds the file's count.  0, or -1 with the reason in err (another layout version, a
 * short or garbled file): then nothing is added.
 */
int handover_load(int memfd, struct handover *h,
                  int (*fd_of)(const struct handover_conn *c, unsigned i,
                               void *arg),
                  void *arg, char *err, size_t len);

#endif
