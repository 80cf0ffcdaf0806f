/*
 * sblock.c: the PMEM file's double-buffered superblock.
 *
 * The on-file copy is fixed-width and padded to two cache lines; its crc
 * covers every byte before the crc field, so a copy torn anywhere (a
 * commit cut short by a crash) is rejected as a whole.
 */
#include "storage/tier/sblock.h"

#include "storage/base/crc.h"

#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define SBLOCK_COPY_STRIDE  4096    /* one copy per page: msync is per page */
#define SBLOCK_F_CAS        0x1u
#define SBLOCK_F_CLEAN      0x2u

static const char sblock_magic[8] = "mcpm-sb";

struct sblock_disk {
    char        magic[8];
    uint32_t    version;
    uint32_t    disk_size;      /* sizeof(struct sblock_disk) */
    uint64_t    generation;
    uint64_t    file_size;
    uint64_t    reserve;
    uint64_t    cas_hwm;
    int64_t     flush_time;
    int64_t     epoch;
    uint32_t    page_size;
    uint32_t    nclasses;
    uint32_t    classes_crc;
    uint32_t    chunk_max;
    uint32_t    flags;          /* SBLOCK_F_* */
    uint32_t    item_max;
    int64_t     alive_time;     /* layout 3; zero in layout 2 */
    uint8_t     boot_id[16];    /* zero in files of earlier builds */
    uint64_t    flush_cas;      /* zero in files of earlier builds */
    uint32_t    unsynced_boot;  /* zero in files of earlier builds */
    uint32_t    crc;            /* crc_32c of everything above */
};

_Static_assert(sizeof(struct sblock_disk) == 128, "two cache lines");

static struct sblock_disk *
copy_at(void *base, uint64_t generation)
{
    return (struct sblock_disk *)((char *)base +
                                  (generation & 1) * SBLOCK_COPY_STRIDE);
}

static uint32_t
disk_crc(const struct sblock_disk *d)
{
    return crc_32c(0, d, offsetof(struct sblock_disk, crc));
}

static void
to_disk(const struct sblock *sb, uint64_t generation, struct sblock_disk *d)
{
    memset(d, 0, sizeof(*d));
    memcpy(d->magic, sblock_magic, sizeof(d->magic));
    d->version = SBLOCK_VERSION;     /* a layout 2 file converts here */
    d->disk_size = sizeof(*d);
    d->generation = generation;
    d->file_size = sb->file_size;
    d->reserve = sb->reserve;
    d->cas_hwm = sb->cas_hwm;
    d->flush_time = sb->flush_time;
    d->flush_cas = sb->flush_cas;
    d->epoch = sb->epoch;
    d->page_size = sb->page_size;
    d->nclasses = sb->nclasses;
    d->classes_crc = sb->classes_crc;
    d->chunk_max = sb->chunk_max;
    d->item_max = sb->item_max;
    d->alive_time = sb->alive_time;
    memcpy(d->boot_id, sb->boot_id, sizeof(d->boot_id));
    d->unsynced_boot = sb->unsynced_boot;
    d->flags = (sb->use_cas ? SBLOCK_F_CAS : 0) |
               (sb->clean ? SBLOCK_F_CLEAN : 0);
    d->crc = disk_crc(d);
}

static void
from_disk(const struct sblock_disk *d, struct sblock *sb)
{
    sb->version = d->version;
    sb->page_size = d->page_size;
    sb->file_size = d->file_size;
    sb->reserve = d->reserve;
    sb->chunk_max = d->chunk_max;
    sb->item_max = d->item_max;
    sb->nclasses = d->nclasses;
    sb->classes_crc = d->classes_crc;
    sb->use_cas = (d->flags & SBLOCK_F_CAS) != 0;
    sb->cas_hwm = d->cas_hwm;
    sb->flush_time = d->flush_time;
    sb->flush_cas = d->flush_cas;
    sb->epoch = d->epoch;
    sb->clean = (d->flags & SBLOCK_F_CLEAN) != 0;
    sb->alive_time = d->alive_time;
    memcpy(sb->boot_id, d->boot_id, sizeof(sb->boot_id));
    sb->unsynced_boot = d->unsynced_boot;
    sb->generation = d->generation;
}

static void
from_params(const struct sblock_params *p, struct sblock *sb)
{
    sb->version = SBLOCK_VERSION;
    sb->page_size = p->page_size;
    sb->file_size = p->file_size;
    sb->reserve = p->reserve;
    sb->chunk_max = p->chunk_max;
    sb->item_max = p->item_max;
    sb->nclasses = p->nclasses;
    sb->classes_crc = crc_32c(0, p->class_sizes,
                              p->nclasses * sizeof(*p->class_sizes));
    sb->use_cas = p->use_cas;
}

/* Write one copy in place and make it durable. */
static void
write_copy(const struct sblock *sb, uint64_t generation)
{
    struct sblock_disk img;
    struct sblock_disk *d = copy_at(sb->base, generation);

    to_disk(sb, generation, &img);
    memcpy(d, &img, sizeof(img));
    tier_persist(sb->tier, d, sizeof(*d));
}

int
sblock_init_new(struct sblock *sb, struct tier *t, void *base,
                const struct sblock_params *p, char *err, size_t errlen)
{
    if (p->reserve < SBLOCK_SIZE ||
        (p->nclasses > 0 && p->class_sizes == NULL)) {
        snprintf(err, errlen, "superblock: needs %d reserved bytes and the "
                 "slab class sizes", SBLOCK_SIZE);
        return SBLOCK_EINVAL;
    }
    memset(sb, 0, sizeof(*sb));
    from_params(p, sb);
    sb->tier = t;
    sb->base = base;
    /* Wipe both copies first: were the new copy alone written and then
     * torn, an older superblock in the other copy would come back. */
    for (uint64_t g = 0; g < 2; g++) {
        memset(copy_at(base, g), 0, sizeof(struct sblock_disk));
        tier_persist(t, copy_at(base, g), sizeof(struct sblock_disk));
    }
    sb->generation = 1;
    write_copy(sb, sb->generation);
    return SBLOCK_OK;
}

void
sblock_commit(struct sblock *sb)
{
    write_copy(sb, sb->generation + 1);
    sb->generation++;
}

/* Serialises the commits made while serving (one superblock a process). */
static pthread_mutex_t sblock_lock = PTHREAD_MUTEX_INITIALIZER;

void
sblock_reserve_seq(struct sblock *sb, uint64_t seq)
{
    if (seq <= __atomic_load_n(&sb->cas_hwm, __ATOMIC_ACQUIRE)) {
        return;
    }
    pthread_mutex_lock(&sblock_lock);
    if (seq > sb->cas_hwm) {
        /* Commit a copy first: the fast path above must not see the new
         * mark before it is durable. */
        struct sblock next = *sb;

        next.cas_hwm = seq + SBLOCK_SEQ_BLOCK;
        sblock_commit(&next);
        sb->generation = next.generation;
        __atomic_store_n(&sb->cas_hwm, next.cas_hwm, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&sblock_lock);
}

/* Set one of sb's wall-clock fields and commit, against the other
 * commits made while serving. */
static void
set_time(struct sblock *sb, int64_t *field, int64_t wall)
{
    pthread_mutex_lock(&sblock_lock);
    *field = wall;
    sblock_commit(sb);
    pthread_mutex_unlock(&sblock_lock);
}

void
sblock_set_flush(struct sblock *sb, int64_t wall, uint64_t cas)
{
    pthread_mutex_lock(&sblock_lock);
    sb->flush_time = wall;
    sb->flush_cas = cas;
    sblock_commit(sb);
    pthread_mutex_unlock(&sblock_lock);
}

void
sblock_set_alive(struct sblock *sb, int64_t wall)
{
    set_time(sb, &sb->alive_time, wall);
}

void
sblock_set_boot(struct sblock *sb, const uint8_t boot_id[16])
{
    pthread_mutex_lock(&sblock_lock);
    memcpy(sb->boot_id, boot_id, sizeof(sb->boot_id));
    sblock_commit(sb);
    pthread_mutex_unlock(&sblock_lock);
}

bool
sblock_boot_now(uint8_t out[16])
{
    char text[64];
    unsigned n = 0;
    ssize_t got;
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);

    if (fd < 0) {
        return false;
    }
    got = read(fd, text, sizeof(text) - 1);
    close(fd);
    for (ssize_t i = 0; i < got && n < 32; i++) {
        char c = text[i];
        int v = c >= '0' && c <= '9' ? c - '0'
              : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;

        if (v >= 0) {
            out[n / 2] = (uint8_t)(n % 2 ? out[n / 2] | v : v << 4);
            n++;
        }
    }
    return n == 32;
}

uint32_t
sblock_boot_tag(const uint8_t boot_id[16])
{
    return crc_32c(0, boot_id, 16) | 1;
}

/* How one copy looks: absent, from another version, torn, or good. */
enum copy_state { COPY_NONE, COPY_VERSION, COPY_TORN, COPY_GOOD };

static enum copy_state
copy_check(const struct sblock_disk *d)
{
    if (memcmp(d->magic, sblock_magic, sizeof(d->magic)) != 0) {
        return COPY_NONE;
    }
    if (d->version != SBLOCK_VERSION && d->version != SBLOCK_VERSION_PREV) {
        return COPY_VERSION;
    }
    if (d->disk_size != sizeof(*d) || d->crc != disk_crc(d)) {
        return COPY_TORN;
    }
    return COPY_GOOD;
}

/* One layout field as compare() and sblock_mismatch() see it: our name
 * for it, memcached's restart key, the file's value and the current. */
struct field {
    const char *name;
    const char *key;
    uint64_t    file, now;
};

#define NFIELDS 8

/* The layout fields in the order they are checked. */
static void
fields(const struct sblock *f, const struct sblock *now,
       struct field out[NFIELDS])
{
    struct field all[NFIELDS] = {
        { "page size", "slab_page_size", f->page_size, now->page_size },
        { "file size", "maxbytes", f->file_size, now->file_size },
        { "reserve size", "slab_page_size", f->reserve, now->reserve },
        { "slab_chunk_max", "slab_chunk_size_max", f->chunk_max,
          now->chunk_max },
        { "item size limit (-I)", "item_size_max", f->item_max,
          now->item_max },
        { "number of slab classes", "slab_config", f->nclasses,
          now->nclasses },
        { "crc of the slab class sizes", "slab_config", f->classes_crc,
          now->classes_crc },
        { "CAS setting (0 = -C)", "use_cas", f->use_cas, now->use_cas },
    };

    memcpy(out, all, sizeof(all));
}

/* The first layout field that differs, or NULL. */
static const struct field *
first_difference(const struct sblock *f, const struct sblock *now,
                 struct field all[NFIELDS])
{
    fields(f, now, all);
    for (int i = 0; i < NFIELDS; i++) {
        if (all[i].file != all[i].now) {
            return &all[i];
        }
    }
    return NULL;
}

static int
say_differs(char *err, size_t errlen, const char *field, uint64_t file,
            uint64_t now)
{
    snprintf(err, errlen, "the memory file does not match the settings: "
             "%s is %" PRIu64 " in the file, %" PRIu64 " now; start with "
             SBLOCK_REINIT " to discard its contents", field, file, now);
    return SBLOCK_INCOMPATIBLE;
}

/* The first layout field that differs decides the message. */
static int
compare(const struct sblock *f, const struct sblock *now, char *err,
        size_t errlen)
{
    struct field all[NFIELDS];
    const struct field *d = first_difference(f, now, all);

    return d == NULL ? SBLOCK_OK
                     : say_differs(err, errlen, d->name, d->file, d->now);
}

const char *
sblock_mismatch(const struct sblock *file, const struct sblock_params *p,
                char *old, size_t oldlen)
{
    struct field all[NFIELDS];
    const struct field *d;
    struct sblock now;

    memset(&now, 0, sizeof(now));
    from_params(p, &now);
    if ((d = first_difference(file, &now, all)) == NULL) {
        return NULL;
    }
    if (strcmp(d->key, "use_cas") == 0) {
        snprintf(old, oldlen, "%s", d->file ? "true" : "false");
    } else if (strcmp(d->key, "maxbytes") == 0) {
        snprintf(old, oldlen, "%" PRIu64, d->file - file->reserve);
    } else {
        snprintf(old, oldlen, "%" PRIu64, d->file);
    }
    return d->key;
}

/* Pick the newest good copy; NULL and a status when there is none. */
static const struct sblock_disk *
newest_copy(void *base, int *status, char *err, size_t errlen)
{
    const struct sblock_disk *best = NULL;
    enum copy_state st[2];

    for (uint64_t g = 0; g < 2; g++) {
        const struct sblock_disk *d = copy_at(base, g);

        st[g] = copy_check(d);
        if (st[g] == COPY_GOOD &&
            (best == NULL || d->generation > best->generation)) {
            best = d;
        }
    }
    if (best != NULL) {
        return best;
    }
    if (st[0] == COPY_VERSION || st[1] == COPY_VERSION) {
        const struct sblock_disk *d = copy_at(base, st[0] != COPY_VERSION);

        *status = say_differs(err, errlen, "layout version", d->version,
                              SBLOCK_VERSION);
    } else if (st[0] == COPY_NONE && st[1] == COPY_NONE) {
        snprintf(err, errlen, "the memory file has no superblock");
        *status = SBLOCK_EMPTY;
    } else {
        snprintf(err, errlen, "the memory file's superblock is corrupt "
                 "(no copy passes its checksum); start with " SBLOCK_REINIT
                 " to discard its contents");
        *status = SBLOCK_CORRUPT;
    }
    return NULL;
}

uint32_t
sblock_file_version(const char *path)
{
    _Alignas(struct sblock_disk) char buf[SBLOCK_COPY_STRIDE +
                                          sizeof(struct sblock_disk)];
    const struct sblock_disk *d;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    int status;
    char err[8];
    bool whole;

    if (fd < 0) {
        return 0;
    }
    whole = pread(fd, buf, sizeof(buf), 0) == (ssize_t)sizeof(buf);
    close(fd);
    d = whole ? newest_copy(buf, &status, err, sizeof(err)) : NULL;
    return d == NULL ? 0 : d->version;
}

int
sblock_load(struct tier *t, void *base, const struct sblock_params *p,
            struct sblock *out, char *err, size_t errlen)
{
    const struct sblock_disk *d;
    struct sblock now;
    int status = SBLOCK_OK;

    memset(out, 0, sizeof(*out));
    out->tier = t;
    out->base = base;
    d = newest_copy(base, &status, err, errlen);
    if (d == NULL) {
        return status;
    }
    from_disk(d, out);
    memset(&now, 0, sizeof(now));
    from_params(p, &now);
    return compare(out, &now, err, errlen);
}

void
sblock_counter_attach(struct sblock_counter *c, struct sblock *sb)
{
    c->sb = sb;
    if (sb != NULL && sb->cas_hwm > c->last) {
        c->last = sb->cas_hwm;
    }
}
