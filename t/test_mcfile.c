/*
 * test_mcfile.c: memcached's restart file and .meta, read (mcfile.h).
 *
 * The .meta is written here as memcached 1.6.18 and 1.6.45 write it; the
 * file is built by hand in memcached's layout (small pages, so that it
 * stays small): a plain item, a chunked one whose chain crosses pages,
 * a binary key, an expired and a flushed item, a free chunk; then each
 * kind of damage the walk must refuse.  The real files of Debian's
 * memcached are read in tests/test_from_memcached.py.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "memcached-pm/migrate/mcfile.h"
#include "t/tap.h"

#define PS      65536                   /* slab_page_size */
#define PAGES   4
#define BASE    0x7f0000000000ull       /* mmap_oldbase */
#define STOP    1800000000ll            /* stop_time */
#define NOW_REL 1000u                   /* memcached's clock at the stop */

static char meta_path[] = "/tmp/mcpm-test-mcfile-XXXXXX";

/* Write a .meta with `extra` lines after the usual ones, dropping the
 * line starting with `drop` (NULL: none). */
static void
write_meta(const char *slab_config, const char *drop, const char *extra)
{
    FILE *f = fopen(meta_path, "w");
    char lines[2048];

    snprintf(lines, sizeof(lines),
             "Tmain\n"
             "Kslab_config %s\n"
             "Kmaxbytes %d\n"
             "Kchunk_size 48\n"
             "Kitem_size_max 1048576\n"
             "Kslab_chunk_size_max %d\n"
             "Kslab_page_size %d\n"
             "Kuse_cas true\n"
             "Kslab_reassign true\n"
             "Kcurrent_time %u\n"
             "Kprocess_started %lld\n"
             "Kstop_time %lld\n"
             "Kcurrent_cas 100\n"
             "Klogger_gid 1\n"
             "Khashpower 16\n"
             "Koldest_live %u\n"
             "Kmmap_oldbase 0x%llx",
             slab_config, PS * PAGES, PS / 2, PS, NOW_REL,
             (long long)(STOP - NOW_REL), (long long)STOP, NOW_REL - 100,
             (unsigned long long)BASE);
    for (char *line = strtok(lines, "\n"); line != NULL;
         line = strtok(NULL, "\n")) {
        if (drop == NULL || strncmp(line, drop, strlen(drop)) != 0) {
            fprintf(f, "%s\n", line);
        }
    }
    fputs(extra, f);
    fclose(f);
}

static void
test_meta(void)
{
    struct mcfile_meta m;
    char why[256];

    write_meta("1.25", NULL, "");
    is_int(mcfile_meta_read(meta_path, &m, why, sizeof(why)), 1,
           "1.6.45's .meta: memcached's");
    ok(strcmp(m.slab_config, "1.25") == 0 && m.maxbytes == PS * PAGES &&
       m.slab_page_size == PS && m.use_cas && m.current_cas == 100 &&
       m.stop_time == STOP && m.mmap_oldbase == BASE &&
       !m.has_oldest_cas, "its values");
    write_meta("1.25", NULL, "Koldest_cas 7\n");
    is_int(mcfile_meta_read(meta_path, &m, why, sizeof(why)), 1,
           "1.6.18's, with oldest_cas");
    ok(m.has_oldest_cas && m.oldest_cas == 7, "oldest_cas read");
    write_meta("1.25", NULL, "Ksome_later_key 1\n");
    is_int(mcfile_meta_read(meta_path, &m, why, sizeof(why)), 1,
           "a key it does not know is passed over");
    write_meta("1.25", "Kmmap_oldbase", "");
    is_int(mcfile_meta_read(meta_path, &m, why, sizeof(why)), 0,
           "no mmap_oldbase: not memcached's");
    write_meta("1.25", "Kstop_time", "");
    is_int(mcfile_meta_read(meta_path, &m, why, sizeof(why)), -1,
           "a line missing: refused");
    ok(strstr(why, "missing some metadata lines") != NULL, why);
    write_meta("1.25", "Kcurrent_cas", "Kcurrent_cas x1\n");
    is_int(mcfile_meta_read(meta_path, &m, why, sizeof(why)), -1,
           "a value that is no number: refused");
    ok(strstr(why, "current_cas") != NULL, why);
    is_int(mcfile_meta_read("/nonexistent/x.meta", &m, why, sizeof(why)), 0,
           "no .meta: not memcached's");
}

static void
test_classes(void)
{
    static unsigned char mem[PS * PAGES];
    struct mcfile_meta m;
    struct mcfile f;
    char why[256];

    write_meta("1.25", NULL, "");
    mcfile_meta_read(meta_path, &m, why, sizeof(why));
    m.slab_page_size = 1 << 20;
    m.slab_chunk_size_max = 1 << 19;
    m.maxbytes = sizeof(mem);
    ok(mcfile_open(&f, &m, mem, sizeof(mem), why, sizeof(why)) == 0,
       "factor 1.25, memcached's defaults");
    /* as Debian's memcached -vv lists them */
    ok(f.sizes[1] == 96 && f.sizes[2] == 120 && f.sizes[3] == 152 &&
       f.sizes[37] == 315872 && f.sizes[38] == 394840,
       "its chunk sizes, class by class");
    is_int(f.largest, 39, "39 classes, the last of half a page");
    is_int(f.sizes[39], 1 << 19, "the largest's size");
    mcfile_close(&f);
    strcpy(m.slab_config, "100-200-300");
    ok(mcfile_open(&f, &m, mem, sizeof(mem), why, sizeof(why)) == 0 &&
       f.sizes[1] == 104 && f.sizes[2] == 200 && f.sizes[3] == 304 &&
       f.largest == 4 && f.sizes[4] == 1 << 19,
       "slab_sizes: the list, aligned, then half a page");
    mcfile_close(&f);
    strcpy(m.slab_config, "300-200");
    ok(mcfile_open(&f, &m, mem, sizeof(mem), why, sizeof(why)) != 0,
       "slab_sizes not growing: refused");
    strcpy(m.slab_config, "0.9");
    ok(mcfile_open(&f, &m, mem, sizeof(mem), why, sizeof(why)) != 0,
       "a factor not above 1: refused");
    strcpy(m.slab_config, "1.25");
    ok(mcfile_open(&f, &m, mem, sizeof(mem) - 1, why, sizeof(why)) != 0 &&
       strstr(why, "the file holds") != NULL, "a size not the .meta's");
}

/* ---- a file in memcached's layout ------------------------------------- */

static unsigned char file[PS * PAGES];
static struct mcfile_meta meta;
static struct mcfile mf;

static void
put16(size_t off, uint16_t v)
{
    memcpy(file + off, &v, 2);
}

static void
put32(size_t off, uint32_t v)
{
    memcpy(file + off, &v, 4);
}

static void
put64(size_t off, uint64_t v)
{
    memcpy(file + off, &v, 8);
}

/* An item header at off: flags, class byte, key, CAS, client flags; the
 * value (nbytes with its "\r\n") follows unless chunked.  Returns the
 * offset where the value (or the chunk header) starts. */
static size_t
put_item(size_t off, uint16_t flags, uint8_t cls, const char *key,
         uint64_t cas, uint32_t cflags, int32_t nbytes, uint32_t time,
         uint32_t exptime)
{
    size_t k = off + 48 + ((flags & 2) ? 8 : 0);
    size_t nkey = strlen(key);

    put32(off + 24, time);
    put32(off + 28, exptime);
    memcpy(file + off + 32, &nbytes, 4);
    put16(off + 38, flags);
    file[off + 40] = cls;
    file[off + 41] = (uint8_t)nkey;
    if (flags & 2) {
        put64(off + 48, cas);
    }
    memcpy(file + k, key, nkey + 1);
    k += nkey + 1;
    if (flags & 256) {
        put32(k, cflags);
        k += 4;
    }
    return k;
}

/* A chunk of the chain of the header at head, in a page of class cls. */
static void
put_chunk(size_t off, uint8_t cls, uint32_t size, size_t head, uint64_t next,
          const char *data, uint32_t used)
{
    put64(off, next);
    put64(off + 16, BASE + head);
    put32(off + 24, size);
    put32(off + 28, used);
    put16(off + 38, 64);
    file[off + 40] = cls;
    memcpy(file + off + 42, data, used);
}

enum { F_LINKED = 1, F_CAS = 2, F_SLABBED = 4, F_CHUNKED = 32,
       F_CFLAGS = 256, F_BIN = 4096 };

/* Factor 2 from 96 with 32 KB chunks at most: classes 96, 192, 384, ...
 * 12288, then 32768 (class 9).  Page 0: class 1; page 1: class 2 with a
 * chunked item's header; page 2: class 9, its chunks; page 3: unused. */
#define BIG_LEN 40000

static size_t big_head;
static char big_value[BIG_LEN + 2];

static void
build_file(void)
{
    size_t v;

    memset(file, 0, sizeof(file));
    /* page 0, class 1 (96 bytes): a free chunk first, then items */
    put16(38, F_SLABBED);
    file[40] = 1;
    v = put_item(96, F_LINKED | F_CAS | F_CFLAGS, 1 | (1 << 6), "plain", 5,
                 77, 7, 990, 0);
    file[96 + 56 + 5] = ':';        /* memcached writes no NUL after keys */
    memcpy(file + v, "hello\r\n", 7);
    v = put_item(192, F_LINKED | F_CAS | F_BIN, 1, "\x01\x02", 6, 0, 3, 990,
                 NOW_REL + 50);
    memcpy(file + v, "b\r\n", 3);
    v = put_item(288, F_LINKED | F_CAS, 1, "gone", 7, 0, 3, 990, NOW_REL);
    memcpy(file + v, "x\r\n", 3);                    /* expired at stop */
    v = put_item(384, F_LINKED | F_CAS, 1, "old", 8, 0, 3, 800, 0);
    memcpy(file + v, "y\r\n", 3);                    /* before the flush */
    /* page 1, class 2 (192): the chunked item's header */
    big_head = PS;
    for (int i = 0; i < BIG_LEN; i++) {
        big_value[i] = (char)('a' + i % 26);
    }
    memcpy(big_value + BIG_LEN, "\r\n", 2);
    v = put_item(big_head, F_LINKED | F_CAS | F_CHUNKED, 9, "big", 9, 0,
                 BIG_LEN + 2, 990, 0);
    put64(v, BASE + 2 * PS);                         /* first chunk */
    put64(v + 16, BASE + big_head);
    file[v + 41] = 2;                                /* orig_clsid */
    /* page 2, class 9 (32768): two chunks of 32726 bytes at most */
    put_chunk(2 * PS, 9, 32768 - 48, big_head, BASE + 2 * PS + 32768,
              big_value, 32720);
    put_chunk(2 * PS + 32768, 9, 32768 - 48, big_head, 0,
              big_value + 32720, BIG_LEN + 2 - 32720);
}

struct seen {
    int n;
    char keys[8][16];
    struct mcfile_item items[8];
};

static int
collect(const struct mcfile_item *it, void *ctx)
{
    struct seen *s = ctx;

    if (s->n < 8) {
        memcpy(s->keys[s->n], it->key, it->nkey);
        s->keys[s->n][it->nkey] = '\0';
        s->items[s->n] = *it;
    }
    s->n++;
    return 0;
}

static int
walk(struct seen *s, struct mcfile_counts *c, char *why, size_t whylen)
{
    memset(s, 0, sizeof(*s));
    return mcfile_walk(&mf, STOP + 10, collect, s, c, why, whylen);
}

static void
test_walk(void)
{
    struct mcfile_counts c;
    struct seen s;
    char why[256] = "", *val;

    write_meta("2", NULL, "");
    mcfile_meta_read(meta_path, &meta, why, sizeof(why));
    build_file();
    ok(mcfile_open(&mf, &meta, file, sizeof(file), why, sizeof(why)) == 0,
       "opened");
    is_int(walk(&s, &c, why, sizeof(why)), 0, "walked");
    is_int(s.n, 3, "three items to restore");
    ok(strcmp(s.keys[0], "plain") == 0 && s.items[0].cas == 5 &&
       s.items[0].client_flags == 77 && s.items[0].vlen == 5 &&
       s.items[0].expires == 0 && !s.items[0].binary_key, "the plain one");
    ok(s.items[1].nkey == 2 && s.items[1].binary_key &&
       s.items[1].expires == STOP + 50 && s.items[1].client_flags == 0,
       "the binary key, its expiry on the wall clock");
    ok(strcmp(s.keys[2], "big") == 0 && s.items[2].vlen == BIG_LEN &&
       s.items[2].cas == 9, "the chunked one");
    val = malloc(BIG_LEN);
    mcfile_value(&mf, &s.items[2], val);
    ok(memcmp(val, big_value, BIG_LEN) == 0, "its value, across chunks");
    mcfile_value(&mf, &s.items[0], val);
    ok(memcmp(val, "hello", 5) == 0, "the plain value");
    free(val);
    ok(c.items == 3 && c.expired == 1 && c.flushed == 1 && c.chunked == 1 &&
       c.value_bytes == 5 + 1 + BIG_LEN, "counts: expired, flushed, chunked");
    is_int(mcfile_pending_flush(&meta, STOP + 10), 0, "no flush pending");
    meta.oldest_live = NOW_REL + 20;
    is_int(mcfile_pending_flush(&meta, STOP + 10), STOP + 20,
           "a delayed flush, on the wall clock");
    is_int(walk(&s, &c, why, sizeof(why)), 0, "walked again");
    is_int(c.flushed, 0, "its items not flushed before its time");
    meta.oldest_live = NOW_REL - 100;
    meta.has_oldest_cas = true;
    meta.oldest_cas = 6;
    walk(&s, &c, why, sizeof(why));
    is_int(c.flushed, 2, "1.6.18's rule: a lower CAS is flushed too");
    meta.has_oldest_cas = false;
    mcfile_close(&mf);
}

/* Damage one thing; the walk must refuse the file, handing out nothing. */
static void
refused(const char *what, void (*damage)(void))
{
    struct seen s;
    char why[256] = "";
    int rc;

    build_file();
    damage();
    mcfile_open(&mf, &meta, file, sizeof(file), why, sizeof(why));
    memset(&s, 0, sizeof(s));
    rc = mcfile_walk(&mf, STOP + 10, NULL, NULL, NULL, why, sizeof(why));
    ok(rc == -1 && why[0] != '\0', what);
    mcfile_close(&mf);
}

static void key_len0(void) { file[96 + 41] = 0; }
static void key_long(void) { file[96 + 41] = 251; }
static void no_crlf(void) { file[96 + 56 + 6 + 4 + 5] = 'x'; }
static void too_big(void) { put32(96 + 32, 100); }
static void wrong_class(void) { file[96 + 40] = 2; }
static void no_cas(void) { put16(96 + 38, F_LINKED | F_CFLAGS); }
static void page_class(void) { file[3 * PS + 40] = 40; }
static void chain_out(void) { put64(2 * PS, BASE + 10 * PS); }
static void chain_mid(void) { put64(2 * PS, BASE + 2 * PS + 8); }
static void chain_loop(void) { put64(2 * PS + 32768, BASE + 2 * PS); }
static void chain_head(void) { put64(2 * PS + 16, BASE + 96); }
static void chain_short(void) { put32(2 * PS + 28, 100); }
static void chain_used(void) { put32(2 * PS + 28, 40000); }
static void chain_flag(void) { put16(2 * PS + 38, 1); }

static void
test_damage(void)
{
    refused("a key of length 0", key_len0);
    refused("a key over 250 bytes", key_long);
    refused("a value without its \\r\\n", no_crlf);
    refused("a value past its chunk", too_big);
    refused("an item in another class's page", wrong_class);
    refused("no CAS where the file has them", no_cas);
    refused("a page cut for a class that is not", page_class);
    refused("a chain out of the file", chain_out);
    refused("a chain into the middle of a chunk", chain_mid);
    refused("a chain looping back", chain_loop);
    refused("a chunk of another item", chain_head);
    refused("a chain short of the value", chain_short);
    refused("a chunk holding more than its size", chain_used);
    refused("a chunk not marked a chunk", chain_flag);
}

int
main(void)
{
    int fd = mkstemp(meta_path);

    if (fd < 0) {
        return 1;
    }
    close(fd);
    test_meta();
    test_classes();
    test_walk();
    test_damage();
    unlink(meta_path);
    return done_testing();
}
