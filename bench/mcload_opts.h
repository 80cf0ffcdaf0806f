/*
 * mcload_opts.h: mcload's options (mcload_opts.c): one global, read-only once
 * the workers start, and the limits they are checked against.
 */
#ifndef MCPM_BENCH_MCLOAD_OPTS_H
#define MCPM_BENCH_MCLOAD_OPTS_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>

#define MAX_KEY_LEN 250
#define MAX_DEPTH 4096
#define MAX_MULTIGET 1024
#define MAX_CPUS 256
/* A reply line longer than this without a newline means a lost frame. */
#define MAX_LINE 4096
#define READ_CHUNK 65536
/* Requests still unanswered this long after the deadline are timeouts. */
#define DRAIN_GRACE_SEC 5
/* Binary protocol: header size and the opcodes mcload sends. */
#define BIN_HDR 24
#define BIN_SET 0x01
#define BIN_NOOP 0x0a
#define BIN_GETK 0x0c
#define BIN_GETKQ 0x0d
/* UDP: the frame before each datagram's request or reply bytes. */
#define UDP_FRAME 8
#define UDP_READ_MAX 65536

enum proto { PROTO_TEXT, PROTO_META, PROTO_BINARY };

enum dist { DIST_UNIFORM, DIST_ZIPF, DIST_SEQ };
enum op { OP_GET, OP_SET };
enum phase { PHASE_PRELOAD, PHASE_RUN };

struct opts {
    struct sockaddr_in addr;
    const char *server;
    int conns;
    int depth;
    int threads;
    double get_ratio;
    int multiget;
    uint64_t keys;
    enum dist dist;
    double zipf_s;
    const char *prefix;
    uint32_t vmin;
    uint32_t vmax;
    double duration;
    double rate;        /* requests a second in the run, all threads (0: any) */
    uint64_t requests;
    enum proto proto;
    bool preload;
    bool verify;
    bool json;
    bool udp;           /* requests over UDP, one datagram each */
    bool tls;           /* TLS (tls_client.h) on every connection */
    int cpus[MAX_CPUS];
    int ncpus;
    uint64_t seed;
};

extern struct opts o;
extern const char *const proto_names[];

/* argv into o: 0, or -1 with a message on stderr. */
int opts_parse(int argc, char **argv);

#endif
