/*
 * detail.c: "stats detail": gets, hits, sets and deletes per key prefix
 * (detail.h).
 */
#include "config.h"

#include "memcached-pm/admin/detail.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memcached-pm/base/settings.h"
#include "memcached-pm/conn/conn_out.h"
#include "proto/binary.h"
#include "proto/response.h"
#include "proto/token.h"

#define LINE_MAX_LEN 1200

#define DETAIL_BUCKETS 256
#define DETAIL_MAX     4096     /* prefixes tracked at most */

struct prefix {
    struct prefix *next;
    uint64_t       gets, hits, sets, dels;
    size_t         len;
    char           name[];
};

static struct prefix *detail[DETAIL_BUCKETS];
static unsigned detail_count;
static pthread_mutex_t detail_lock = PTHREAD_MUTEX_INITIALIZER;

static unsigned
detail_bucket(const char *p, size_t n)
{
    unsigned h = 5381;

    while (n-- > 0) {
        h = h * 33 + (unsigned char)*p++;
    }
    return h % DETAIL_BUCKETS;
}

/* The prefix's record, created on first sight; detail_lock held. */
static struct prefix *
detail_find(const char *p, size_t n)
{
    unsigned b = detail_bucket(p, n);
    struct prefix *x;

    for (x = detail[b]; x != NULL; x = x->next) {
        if (x->len == n && memcmp(x->name, p, n) == 0) {
            return x;
        }
    }
    if (detail_count >= DETAIL_MAX || (x = calloc(1, sizeof(*x) + n + 1))
        == NULL) {
        return NULL;
    }
    memcpy(x->name, p, n);
    x->len = n;
    x->next = detail[b];
    detail[b] = x;
    detail_count++;
    return x;
}

void
detail_record(const char *key, size_t nkey, enum detail_op op,
                    bool hit)
{
    const char *d = memchr(key, settings.prefix_delimiter, nkey);
    struct prefix *x;

    if (d == NULL) {
        return;     /* no prefix, not counted (as memcached) */
    }
    pthread_mutex_lock(&detail_lock);
    if ((x = detail_find(key, (size_t)(d - key))) != NULL) {
        switch (op) {
        case DETAIL_GET: x->gets++; x->hits += hit; break;
        case DETAIL_SET: x->sets++; break;
        case DETAIL_DELETE: x->dels++; break;
        }
    }
    pthread_mutex_unlock(&detail_lock);
}

void
detail_clear(void)
{
    pthread_mutex_lock(&detail_lock);
    for (unsigned b = 0; b < DETAIL_BUCKETS; b++) {
        while (detail[b] != NULL) {
            struct prefix *x = detail[b];
            detail[b] = x->next;
            free(x);
        }
    }
    detail_count = 0;
    pthread_mutex_unlock(&detail_lock);
}

/* Queue the dump, a line per prefix then "END\r\n"; the bytes queued. */
static size_t
detail_dump(struct conn *c)
{
    char line[LINE_MAX_LEN];
    size_t total = 0;

    pthread_mutex_lock(&detail_lock);
    for (unsigned b = 0; b < DETAIL_BUCKETS; b++) {
        for (struct prefix *x = detail[b]; x != NULL; x = x->next) {
            int n = snprintf(line, sizeof(line),
                             "PREFIX %.*s get %llu hit %llu set %llu "
                             "del %llu\r\n", (int)x->len, x->name,
                             (unsigned long long)x->gets,
                             (unsigned long long)x->hits,
                             (unsigned long long)x->sets,
                             (unsigned long long)x->dels);
            conn_out(c, line, (size_t)n);
            total += (size_t)n;
        }
    }
    pthread_mutex_unlock(&detail_lock);
    conn_out_rsp(c, RSP_END);
    return total + 5;
}

/* Binary: the dump is the value of one STAT packet keyed "detailed"; its
 * header is filled in once the length is known (the arena keeps its
 * place). */
static void
detail_dump_bin(struct conn *c)
{
    static const char key[] = "detailed";
    size_t head = BIN_HEADER_LEN + sizeof(key) - 1;
    char *h = conn_out_reserve(c, head);
    size_t n;

    if (h == NULL) {
        return;
    }
    conn_out_commit(c, head);
    n = detail_dump(c);
    bin_compose_header(h, c->bin_opcode, BIN_SUCCESS, c->bin_opaque, 0, 0,
                       sizeof(key) - 1, (uint32_t)(sizeof(key) - 1 + n));
    memcpy(h + BIN_HEADER_LEN, key, sizeof(key) - 1);
}

enum process_result
detail_command(struct conn *c, struct request *req)
{
    static const char usage[] = "CLIENT_ERROR usage: stats detail on|off|dump"
                                "\r\n";
    const struct token *arg = &req->tokens[2];

    if (req->ntokens != 3) {
        conn_out(c, usage, sizeof(usage) - 1);
    } else if (token_eq(arg, "on")) {
        settings.detail_enabled = true;
        conn_out_rsp(c, RSP_OK);
    } else if (token_eq(arg, "off")) {
        settings.detail_enabled = false;
        conn_out_rsp(c, RSP_OK);
    } else if (token_eq(arg, "dump")) {
        if (!settings.dump_enabled) {
            conn_out_rsp(c, RSP_ERROR);
        } else {
            (void)detail_dump(c);
        }
    } else {
        conn_out(c, usage, sizeof(usage) - 1);
    }
    return PROCESS_OK;
}

/* What follows "detail" in a binary STAT key, matched as memcached
 * matches it. */
static bool
arg_is(const char *arg, size_t len, const char *word)
{
    size_t n = strlen(word);

    return len >= n && memcmp(arg, word, n) == 0;
}

void
detail_command_bin(struct conn *c, const char *arg, size_t len)
{
    if (!settings.dump_enabled) {
        conn_out_bin(c, BIN_KEY_ENOENT, 0, NULL, 0, NULL, 0, "Not found", 9);
        return;
    }
    if (arg_is(arg, len, " dump")) {
        detail_dump_bin(c);
    } else if (arg_is(arg, len, " on")) {
        settings.detail_enabled = true;
    } else if (arg_is(arg, len, " off")) {
        settings.detail_enabled = false;
    } else {
        conn_out_bin(c, BIN_KEY_ENOENT, 0, NULL, 0, NULL, 0, "Not found", 9);
        return;
    }
    conn_out_bin(c, BIN_SUCCESS, 0, NULL, 0, NULL, 0, NULL, 0);
}
