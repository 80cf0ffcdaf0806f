/*
 * mcfile.c: memcached 1.6's restart file and its .meta, read (mcfile.h).
 *
 * memcached's item header on a 64-bit machine (48 bytes):
 *
 *    0 next   8 prev   16 h_next   (pointers of the old mapping)
 *   24 time   28 exptime           (seconds of memcached's clock)
 *   32 nbytes (value with its "\r\n")   36 refcount   38 it_flags
 *   40 slabs_clsid (low 6 bits the class, high 2 the LRU)   41 nkey
 *   48 [8-byte CAS] key, one byte (not always a NUL: memcached leaves
 *      what the chunk held there), [4-byte client flags], value "\r\n"
 *
 * A chunked item's header holds, after the client flags, a chunk header
 * of its own (used 0) that starts its chain.  A chunk (48-byte header):
 *
 *    0 next   8 prev   16 head (the header item)   24 size   28 used
 *   38 it_flags (ITEM_CHUNK)   40 slabs_clsid   41 orig_clsid
 *   42 data, `used` bytes of the value
 *
 * The header's own class is orig_clsid in that first chunk header;
 * slabs_clsid names the class whose LRU the item is on (the largest).
 * Integers are the machine's (little-endian here); everything is read
 * by memcpy, nothing through a cast of the file's bytes.
 */
#include "config.h"

#include "memcached-pm/migrate/mcfile.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HDR         48                  /* sizeof(item) */
#define CH_HDR      48                  /* sizeof(item_chunk) */
#define CH_DATA     42                  /* offsetof(item_chunk, data) */
#define KEY_MAX     250
#define ALIGN       8                   /* CHUNK_ALIGN_BYTES */
#define LAST_CLASS  (MCFILE_CLASSES - 1)

enum {
    F_LINKED = 1, F_CAS = 2, F_SLABBED = 4, F_CHUNKED = 32, F_CHUNK = 64,
    F_CFLAGS = 256, F_KEY_BINARY = 4096,
};

static void
say(char *why, size_t whylen, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(why, whylen, fmt, ap);
    va_end(ap);
}

/* ---- .meta -------------------------------------------------------------- */

enum meta_key {
    M_SLAB_CONFIG, M_MAXBYTES, M_CHUNK_SIZE, M_ITEM_SIZE_MAX,
    M_SLAB_CHUNK_MAX, M_SLAB_PAGE_SIZE, M_USE_CAS, M_SLAB_REASSIGN,
    M_CURRENT_TIME, M_PROCESS_STARTED, M_STOP_TIME, M_CURRENT_CAS,
    M_LOGGER_GID, M_HASHPOWER, M_OLDEST_LIVE, M_MMAP_OLDBASE,
    M_OLDEST_CAS, M_KEYS
};

static const char *const meta_names[M_KEYS] = {
    "slab_config", "maxbytes", "chunk_size", "item_size_max",
    "slab_chunk_size_max", "slab_page_size", "use_cas", "slab_reassign",
    "current_time", "process_started", "stop_time", "current_cas",
    "logger_gid", "hashpower", "oldest_live", "mmap_oldbase", "oldest_cas",
};

/* Every key but oldest_cas, which only some versions write. */
#define META_NEEDED ((1u << M_OLDEST_CAS) - 1)

static bool
parse_u64(const char *s, int base, uint64_t max, uint64_t *out)
{
    char *end;
    unsigned long long v;

    if (*s == '\0' || *s == '-' || *s == ' ') {
        return false;
    }
    errno = 0;
    v = strtoull(s, &end, base);
    if (errno != 0 || *end != '\0' || v > max) {
        return false;
    }
    *out = v;
    return true;
}

/* The number a numeric key holds (up to max), into its field: 32-bit
 * fields, the signed stop time, and 64-bit ones; keys memcached writes
 * that are not needed here are parsed and dropped.  false: no number. */
static bool
meta_number(struct mcfile_meta *m, enum meta_key k, const char *v)
{
    uint32_t *u32 = k == M_CHUNK_SIZE ? &m->chunk_size
                  : k == M_ITEM_SIZE_MAX ? &m->item_size_max
                  : k == M_SLAB_CHUNK_MAX ? &m->slab_chunk_size_max
                  : k == M_SLAB_PAGE_SIZE ? &m->slab_page_size
                  : k == M_CURRENT_TIME ? &m->current_time
                  : k == M_OLDEST_LIVE ? &m->oldest_live : NULL;
    bool wide = k == M_MAXBYTES || k == M_CURRENT_CAS ||
                k == M_LOGGER_GID || k == M_OLDEST_CAS;
    bool is_time = k == M_PROCESS_STARTED || k == M_STOP_TIME;
    uint64_t n;

    if (!parse_u64(v, 10, wide ? UINT64_MAX : is_time ? INT64_MAX
                                                      : UINT32_MAX, &n)) {
        return false;
    }
    if (u32 != NULL) {
        *u32 = (uint32_t)n;
    } else if (k == M_STOP_TIME) {
        m->stop_time = (int64_t)n;
    } else if (k == M_MAXBYTES) {
        m->maxbytes = n;
    } else if (k == M_CURRENT_CAS) {
        m->current_cas = n;
    } else if (k == M_OLDEST_CAS) {
        m->oldest_cas = n;
        m->has_oldest_cas = true;
    }
    return true;
}

/* One "K<key> <value>" line into m; false when its value is not one. */
static bool
meta_value(struct mcfile_meta *m, enum meta_key k, const char *v)
{
    switch (k) {
    case M_SLAB_CONFIG:
        if (strlen(v) >= sizeof(m->slab_config)) {
            return false;
        }
        strcpy(m->slab_config, v);
        return true;
    case M_USE_CAS:
    case M_SLAB_REASSIGN:
        if (strcmp(v, "true") != 0 && strcmp(v, "false") != 0) {
            return false;
        }
        if (k == M_USE_CAS) {
            m->use_cas = v[0] == 't';
        }
        return true;
    case M_MMAP_OLDBASE:
        return strncmp(v, "0x", 2) == 0 &&
               parse_u64(v + 2, 16, UINT64_MAX, &m->mmap_oldbase);
    case M_KEYS:
        return false;
    default:
        return meta_number(m, k, v);
    }
}

/* Lines of the file into m; 0, or -1 with why. *names_base: whether it
 * named mmap_oldbase (memcached's, whatever else is wrong with it). */
static int
meta_lines(FILE *fp, struct mcfile_meta *m, bool *memcached,
           char *why, size_t whylen)
{
    char line[512];
    unsigned seen = 0, lines = 0;
    int rc = 0;

    while (fgets(line, sizeof(line), fp) != NULL) {
        size_t n = strcspn(line, "\n");
        char *sp;
        int k;

        if (line[n] != '\n' && !feof(fp)) {
            say(why, whylen, "a metadata line is too long");
            return -1;
        }
        line[n] = '\0';
        if (lines++ == 0 && line[0] != 'T') {
            say(why, whylen, "corrupt metadata file");
            return -1;
        }
        if (line[0] == 'T') {
            continue;
        }
        if (line[0] != 'K' || (sp = strchr(line, ' ')) == NULL) {
            say(why, whylen, "invalid metadata line: %s", line);
            rc = -1;
            continue;
        }
        *sp = '\0';
        for (k = 0; k < M_KEYS && strcmp(line + 1, meta_names[k]) != 0;
             k++) {
        }
        if (k == M_KEYS) {
            continue;           /* a key of a later version: not needed */
        }
        if (k == M_MMAP_OLDBASE) {
            *memcached = true;
        }
        if (!meta_value(m, (enum meta_key)k, sp + 1)) {
            say(why, whylen, "failed to parse %s: %s", line + 1, sp + 1);
            rc = -1;
            continue;
        }
        seen |= 1u << k;
    }
    if (rc == 0 && (seen & META_NEEDED) != META_NEEDED) {
        say(why, whylen, "missing some metadata lines");
        rc = -1;
    }
    return rc;
}

int
mcfile_meta_read(const char *meta_path, struct mcfile_meta *m,
                 char *why, size_t whylen)
{
    FILE *fp = fopen(meta_path, "r");
    bool memcached = false;
    int rc;

    memset(m, 0, sizeof(*m));
    if (fp == NULL) {
        return 0;
    }
    rc = meta_lines(fp, m, &memcached, why, whylen);
    fclose(fp);
    if (!memcached) {
        return 0;
    }
    if (rc != 0) {
        return -1;
    }
    if (m->slab_page_size < 1024 || m->slab_chunk_size_max < HDR + CH_HDR ||
        m->slab_chunk_size_max > m->slab_page_size ||
        m->maxbytes < m->slab_page_size || m->mmap_oldbase == 0 ||
        m->mmap_oldbase % ALIGN != 0 || m->chunk_size > m->slab_page_size) {
        say(why, whylen, "its slab layout is not one memcached writes");
        return -1;
    }
    return 1;
}

/* ---- classes ------------------------------------------------------------ */

static uint32_t
aligned(uint32_t size)
{
    return size % ALIGN ? size + ALIGN - size % ALIGN : size;
}

/* "-o slab_sizes=a-b-c": classes 1..n; the largest after them.  0 or -1. */
static int
sizes_from_list(struct mcfile *f, const char *s)
{
    unsigned i = 0;

    while (*s != '\0') {
        char *end;
        unsigned long v;

        errno = 0;
        v = strtoul(s, &end, 10);
        if (errno != 0 || end == s || (*end != '-' && *end != '\0') ||
            v < HDR || v > f->meta->slab_chunk_size_max ||
            ++i >= LAST_CLASS ||
            (i > 1 && aligned((uint32_t)v) <= f->sizes[i - 1])) {
            return -1;
        }
        f->sizes[i] = aligned((uint32_t)v);
        s = *end == '-' ? end + 1 : end;
    }
    if (i == 0) {
        return -1;
    }
    f->largest = i + 1;
    return 0;
}

/* A growth factor, as memcached's slabs_init() steps it: from the
 * header plus chunk_size, times the factor (truncated), each aligned,
 * until a step would pass slab_chunk_size_max / factor. */
static int
sizes_from_factor(struct mcfile *f, const char *s)
{
    const struct mcfile_meta *m = f->meta;
    char *end;
    double factor = strtod(s, &end);
    uint32_t size = HDR + m->chunk_size;
    unsigned i = 0;

    if (end == s || *end != '\0' || !(factor > 1.0) || factor > 1000.0) {
        return -1;
    }
    while (++i < LAST_CLASS) {
        if (size >= m->slab_chunk_size_max / factor) {
            break;
        }
        size = aligned(size);
        f->sizes[i] = size;
        size = (uint32_t)(size * factor);
    }
    f->largest = i;
    return 0;
}

int
mcfile_open(struct mcfile *f, const struct mcfile_meta *m, const void *base,
            size_t len, char *why, size_t whylen)
{
    const char *cfg = m->slab_config;
    size_t npages;
    int rc;

    memset(f, 0, sizeof(*f));
    f->meta = m;
    f->base = base;
    f->len = len;
    if ((uint64_t)len != m->maxbytes) {
        say(why, whylen, "the file holds %zu bytes, its metadata %" PRIu64,
            len, m->maxbytes);
        return -1;
    }
    rc = strchr(cfg, '-') != NULL ? sizes_from_list(f, cfg)
                                  : sizes_from_factor(f, cfg);
    if (rc != 0) {
        say(why, whylen, "slab_config %s names no slab classes", cfg);
        return -1;
    }
    f->sizes[f->largest] = m->slab_chunk_size_max;
    npages = len / m->slab_page_size;
    f->page_class = calloc(npages > 0 ? npages : 1, 1);
    if (f->page_class == NULL) {
        say(why, whylen, "out of memory");
        return -1;
    }
    return 0;
}

void
mcfile_close(struct mcfile *f)
{
    free(f->page_class);
    f->page_class = NULL;
}

/* ---- reading ------------------------------------------------------------ */

static uint64_t
rd64(const struct mcfile *f, size_t off)
{
    uint64_t v;

    memcpy(&v, f->base + off, sizeof(v));
    return v;
}

static uint32_t
rd32(const struct mcfile *f, size_t off)
{
    uint32_t v;

    memcpy(&v, f->base + off, sizeof(v));
    return v;
}

static uint16_t
rd16(const struct mcfile *f, size_t off)
{
    uint16_t v;

    memcpy(&v, f->base + off, sizeof(v));
    return v;
}

/* Where the key starts, the client flags and the chunk header are, for a
 * header with these flags and key length. */
static size_t
key_at(uint16_t flags)
{
    return HDR + ((flags & F_CAS) ? 8 : 0);
}

static size_t
suffix_end(uint16_t flags, uint8_t nkey)
{
    return key_at(flags) + nkey + 1 + ((flags & F_CFLAGS) ? 4 : 0);
}

/* The class a page is cut into, from its first chunk (memcached writes
 * every chunk of a page it cuts); 0 for a page in the global pool. */
static unsigned
class_of_page(const struct mcfile *f, size_t off)
{
    uint16_t flags = rd16(f, off + 38);
    unsigned cls = f->base[off + 40] & 63;

    if ((flags & (F_CHUNKED | F_SLABBED)) == F_CHUNKED) {
        size_t sc = suffix_end(flags, f->base[off + 41]);

        /* a chunked item's header: its own class is in its chain's head */
        if (sc + CH_HDR <= f->meta->slab_page_size) {
            cls = f->base[off + sc + 41];
        }
    }
    return cls;
}

/* A pointer of the old mapping to a chunk of the file: its offset, if it
 * is the start of a chunk of a page cut into a class; else SIZE_MAX. */
static size_t
chunk_offset(const struct mcfile *f, uint64_t ptr, unsigned *cls)
{
    const uint32_t ps = f->meta->slab_page_size;
    uint64_t off;
    size_t page, in;

    if (ptr < f->meta->mmap_oldbase) {
        return SIZE_MAX;
    }
    off = ptr - f->meta->mmap_oldbase;
    if (off >= f->len) {
        return SIZE_MAX;
    }
    page = (size_t)(off / ps);
    in = (size_t)(off % ps);
    if (page >= f->len / ps || (*cls = f->page_class[page]) == 0 ||
        in % f->sizes[*cls] != 0 || in / f->sizes[*cls] >=
        ps / f->sizes[*cls]) {
        return SIZE_MAX;
    }
    return (size_t)off;
}

/* Follow a chunked item's chain (the header at off, its chunk header at
 * sc) and check it: every chunk where a chunk can be, marked a chunk of
 * this item, inside its class, the bytes adding up to nbytes, the value
 * ending in "\r\n".  true if sound. */
static bool
chain_ok(const struct mcfile *f, size_t off, size_t sc, uint32_t nbytes)
{
    const uint64_t self = f->meta->mmap_oldbase + off;
    uint64_t next = rd64(f, off + sc);
    uint64_t total = 0;
    size_t last = SIZE_MAX, hops = 0;
    uint32_t last_used = 0;

    if (rd64(f, off + sc + 16) != self || rd32(f, off + sc + 28) != 0) {
        return false;
    }
    while (next != 0) {
        unsigned cls;
        size_t c = chunk_offset(f, next, &cls);
        uint32_t size, used;

        if (c == SIZE_MAX || ++hops > nbytes ||
            rd16(f, c + 38) != F_CHUNK || f->base[c + 40] != cls ||
            rd64(f, c + 16) != self) {
            return false;
        }
        size = rd32(f, c + 24);
        used = rd32(f, c + 28);
        if (used > size || (uint64_t)CH_DATA + size > f->sizes[cls] ||
            (total += used) > nbytes) {
            return false;
        }
        if (used > 0) {
            last = c;
            last_used = used;
        }
        next = rd64(f, c);
    }
    if (total != nbytes || last == SIZE_MAX) {
        return false;
    }
    /* the "\r\n" may straddle two chunks when the last holds one byte */
    if (last_used >= 2) {
        return memcmp(f->base + last + CH_DATA + last_used - 2, "\r\n", 2)
               == 0;
    }
    return f->base[last + CH_DATA] == '\n';
}

/* Would memcached serve it at its clock `now_rel`? */
static bool
is_flushed(const struct mcfile_meta *m, uint32_t time, uint64_t cas,
           uint32_t now_rel)
{
    if (m->oldest_live == 0 || m->oldest_live > now_rel) {
        return false;
    }
    return time <= m->oldest_live ||
           (m->has_oldest_cas && m->oldest_cas != 0 && cas != 0 &&
            cas < m->oldest_cas);
}

/* The item at off of a page of class cls, checked: 1 live (it filled),
 * 0 not an item to restore, -1 unsound. */
static int
read_item(const struct mcfile *f, size_t off, unsigned cls,
          struct mcfile_item *it, uint32_t *time, uint32_t *exptime)
{
    const uint32_t stride = f->sizes[cls];
    uint16_t flags = rd16(f, off + 38);
    uint8_t nkey = f->base[off + 41];
    unsigned lru_cls = f->base[off + 40] & 63;
    int32_t nbytes;
    size_t ke, se;

    if (!(flags & F_LINKED) || (flags & (F_SLABBED | F_CHUNK))) {
        return 0;
    }
    memcpy(&nbytes, f->base + off + 32, sizeof(nbytes));
    ke = key_at(flags);
    se = suffix_end(flags, nkey);
    if (nkey == 0 || nkey > KEY_MAX || nbytes < 2 ||
        (uint32_t)nbytes > f->meta->item_size_max ||
        (f->meta->use_cas != ((flags & F_CAS) != 0))) {
        return -1;
    }
    if (flags & F_CHUNKED) {
        if (lru_cls != f->largest || se + CH_HDR > stride ||
            f->base[off + se + 41] != cls ||
            !chain_ok(f, off, se, (uint32_t)nbytes)) {
            return -1;
        }
    } else if (lru_cls != cls || se + (uint32_t)nbytes > stride ||
               memcmp(f->base + off + se + nbytes - 2, "\r\n", 2) != 0) {
        return -1;
    }
    it->key = (const char *)f->base + off + ke;
    it->nkey = nkey;
    it->binary_key = (flags & F_KEY_BINARY) != 0;
    it->client_flags = (flags & F_CFLAGS) ? rd32(f, off + ke + nkey + 1) : 0;
    it->cas = (flags & F_CAS) ? rd64(f, off + HDR) : 0;
    it->vlen = (uint32_t)nbytes - 2;
    it->off = off;
    *time = rd32(f, off + 24);
    *exptime = rd32(f, off + 28);
    return 1;
}

/* Each page's class, checked against the classes the .meta gives. */
static int
cut_pages(const struct mcfile *f, char *why, size_t whylen)
{
    const uint32_t ps = f->meta->slab_page_size;

    for (size_t p = 0; p < f->len / ps; p++) {
        unsigned cls = class_of_page(f, p * ps);

        if (cls > f->largest || (cls != 0 && f->sizes[cls] == 0)) {
            say(why, whylen, "page %zu is cut for slab class %u, which its "
                "metadata does not have", p, cls);
            return -1;
        }
        f->page_class[p] = (uint8_t)cls;
    }
    return 0;
}

int
mcfile_walk(const struct mcfile *f, int64_t now,
            int (*fn)(const struct mcfile_item *it, void *ctx), void *ctx,
            struct mcfile_counts *counts, char *why, size_t whylen)
{
    const struct mcfile_meta *m = f->meta;
    const uint32_t ps = m->slab_page_size;
    struct mcfile_counts c = { 0, 0, 0, 0, 0 };
    int64_t rel = (int64_t)m->current_time + (now - m->stop_time);
    uint32_t now_rel = rel < 0 ? 0 : rel > UINT32_MAX ? UINT32_MAX
                                                       : (uint32_t)rel;
    int rc = 0;

    if (cut_pages(f, why, whylen) != 0) {
        return -1;
    }
    for (size_t p = 0; p < f->len / ps && rc == 0; p++) {
        unsigned cls = f->page_class[p];

        for (uint32_t i = 0; cls != 0 && i < ps / f->sizes[cls] && rc == 0;
             i++) {
            size_t off = p * ps + (size_t)i * f->sizes[cls];
            struct mcfile_item it;
            uint32_t time, exptime;
            int r = read_item(f, off, cls, &it, &time, &exptime);

            if (r < 0) {
                say(why, whylen, "the item at offset %zu is not whole", off);
                rc = -1;
                break;
            }
            if (r == 0) {
                continue;
            }
            if (exptime != 0 && exptime <= now_rel) {
                c.expired++;
                continue;
            }
            if (is_flushed(m, time, it.cas, now_rel)) {
                c.flushed++;
                continue;
            }
            it.expires = exptime == 0 ? 0 : m->stop_time -
                         (int64_t)m->current_time + exptime;
            c.items++;
            c.value_bytes += it.vlen;
            if (rd16(f, off + 38) & F_CHUNKED) {
                c.chunked++;
            }
            if (fn != NULL) {
                rc = fn(&it, ctx);
            }
        }
    }
    if (counts != NULL) {
        *counts = c;
    }
    return rc;
}

void
mcfile_value(const struct mcfile *f, const struct mcfile_item *it, char *dst)
{
    uint16_t flags = rd16(f, it->off + 38);
    size_t se = suffix_end(flags, it->nkey);
    uint32_t left = it->vlen;
    uint64_t next;

    if (!(flags & F_CHUNKED)) {
        memcpy(dst, f->base + it->off + se, left);
        return;
    }
    for (next = rd64(f, it->off + se); next != 0 && left > 0;
         next = rd64(f, next - f->meta->mmap_oldbase)) {
        size_t c = (size_t)(next - f->meta->mmap_oldbase);
        uint32_t used = rd32(f, c + 28);
        uint32_t n = used < left ? used : left;

        memcpy(dst, f->base + c + CH_DATA, n);
        dst += n;
        left -= n;
    }
}

int64_t
mcfile_pending_flush(const struct mcfile_meta *m, int64_t now)
{
    int64_t at;

    if (m->oldest_live == 0) {
        return 0;
    }
    at = m->stop_time - (int64_t)m->current_time + m->oldest_live;
    return at > now ? at : 0;
}
