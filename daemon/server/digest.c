/* digest.c: a model's digest (XXH3-128 of its bytes, the model's part of the cache key), and the
 * digests of model files remembered by the files' identity, so that a cache hit for a model named
 * by its path does not read the model again (docs/cache.md, "The key").
 *
 * A remembered digest is used only while the file's device, inode, size, mtime and ctime are
 * those seen when it was read, and it is remembered only when the file had not changed for
 * TTHD_DIGEST_SETTLED_NS before that read: every later change of its bytes sets ctime to a
 * later time (no call sets ctime back), so it is seen as different, even on file systems whose
 * timestamps are coarse. A file being written while tthd reads it is never remembered.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <xxhash.h>

#include "tthd.h"

static int64_t ns_of(struct timespec t) { return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec; }

static int same_file(const tthd_digest_entry *e, const char *path, const struct stat *st)
{
    return e->path && strcmp(e->path, path) == 0 && e->dev == st->st_dev && e->ino == st->st_ino &&
           e->size == st->st_size && e->mtime_ns == ns_of(st->st_mtim) && e->ctime_ns == ns_of(st->st_ctim);
}

int tthd_digest_memo_find(tthd_digest_memo *m, const char *path, const struct stat *st, uint8_t digest[16])
{
    for (size_t i = 0; i < TTHD_DIGEST_MEMO; i++) {
        tthd_digest_entry *e = &m->e[i];
        if (same_file(e, path, st)) {
            e->used = ++m->tick;
            memcpy(digest, e->digest, 16);
            return 1;
        }
    }
    return 0;
}

void tthd_digest_memo_put(tthd_digest_memo *m, const char *path, const struct stat *st, int64_t read_at_ns,
                          const uint8_t digest[16])
{
    if (read_at_ns - ns_of(st->st_mtim) < TTHD_DIGEST_SETTLED_NS || read_at_ns - ns_of(st->st_ctim) < TTHD_DIGEST_SETTLED_NS)
        return; /* changed lately: a change within its timestamp's granularity would not show */
    tthd_digest_entry *slot = &m->e[0];
    for (size_t i = 0; i < TTHD_DIGEST_MEMO; i++) {
        tthd_digest_entry *e = &m->e[i];
        if (e->path && strcmp(e->path, path) == 0) {
            slot = e; /* the same path read again: its old identity is stale */
            break;
        }
        if (e->used < slot->used)
            slot = e;
    }
    char *p = strdup(path);
    if (!p)
        return;
    free(slot->path);
    *slot = (tthd_digest_entry){.path = p, .dev = st->st_dev, .ino = st->st_ino, .size = st->st_size,
                                .mtime_ns = ns_of(st->st_mtim), .ctime_ns = ns_of(st->st_ctim), .used = ++m->tick};
    memcpy(slot->digest, digest, 16);
}

void tthd_digest_memo_free(tthd_digest_memo *m)
{
    for (size_t i = 0; i < TTHD_DIGEST_MEMO; i++)
        free(m->e[i].path);
    memset(m, 0, sizeof *m);
}

int64_t tthd_wall_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return ns_of(t);
}
