/* code_store.c: the store of compiled code (code_store.h, docs/cache.md "Compiled code").
 *
 * An entry is the file <dir>/<32 hex digits of the key>:
 *     "TTHCODE1" | u64 length | u64 XXH64(bytes) | bytes          (little-endian)
 * written to a temporary file (".tmp-<pid>-...") and renamed into place, so a reader sees a whole
 * entry or none; a read checks length and checksum and removes an entry that fails. A read sets
 * the file's modification time to now: eviction, when a store pushes the directory past its
 * bound, removes the least recently written or read entries until it holds three quarters of it.
 * Processes share the directory through the file system alone (rename is atomic, a removal
 * racing a read is a miss). */
#include "code_store.h"
#include "file_io.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>

#define MAGIC "TTHCODE1"
#define HDR 24

struct tth_code_store {
    char *dir;
    uint64_t max_bytes;
    pthread_mutex_t lock;
    uint64_t bytes; /* in the directory, as last counted plus what this process added since */
};

static int is_entry_name(const char *n)
{
    if (strlen(n) != 32)
        return 0;
    for (int i = 0; i < 32; i++)
        if (!((n[i] >= '0' && n[i] <= '9') || (n[i] >= 'a' && n[i] <= 'f')))
            return 0;
    return 1;
}

static void entry_path(const tth_code_store *s, const uint8_t key[16], char *path, size_t len)
{
    char hex[33];
    for (int i = 0; i < 16; i++)
        snprintf(hex + 2 * i, 3, "%02x", key[i]);
    snprintf(path, len, "%s/%s", s->dir, hex);
}

static int mkdir_parents(const char *dir)
{
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", dir) >= (int)sizeof buf)
        return -1;
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0700) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    return mkdir(buf, 0700) == 0 || errno == EEXIST ? 0 : -1;
}

typedef struct scanned {
    char name[33];
    uint64_t size;
    struct timespec mtime;
} scanned;

static int older_first(const void *a, const void *b)
{
    const scanned *x = a, *y = b;
    if (x->mtime.tv_sec != y->mtime.tv_sec)
        return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
    return (x->mtime.tv_nsec > y->mtime.tv_nsec) - (x->mtime.tv_nsec < y->mtime.tv_nsec);
}

/* Every file of dir, with its path and status, to fn (each stat'able name, the entries and the
 * temporary files alike); the one walk of the directory the functions below share. */
typedef void (*walk_fn)(void *ctx, const char *name, const char *path, const struct stat *st);

static void walk(const char *dir, walk_fn fn, void *ctx)
{
    DIR *d = dir ? opendir(dir) : NULL;
    if (!d)
        return;
    char path[4400];
    for (struct dirent *de; (de = readdir(d));) {
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (stat(path, &st) == 0)
            fn(ctx, de->d_name, path, &st);
    }
    closedir(d);
}

static int is_entry(const char *name, const struct stat *st)
{
    return is_entry_name(name) && S_ISREG(st->st_mode);
}

typedef struct scan_ctx {
    scanned *v;
    size_t n, cap;
    uint64_t total;
    time_t now;
    int oom;
} scan_ctx;

static void scan_one(void *ctx, const char *name, const char *path, const struct stat *st)
{
    scan_ctx *x = ctx;
    if (strncmp(name, ".tmp-", 5) == 0) {
        if (st->st_mtime < x->now - 3600)
            unlink(path);
        return;
    }
    if (!is_entry(name, st) || x->oom)
        return;
    x->total += (uint64_t)st->st_size;
    if (x->n == x->cap) {
        size_t nc = x->cap ? 2 * x->cap : 256;
        scanned *nv = realloc(x->v, nc * sizeof *nv);
        if (!nv) {
            x->oom = 1;
            return;
        }
        x->v = nv;
        x->cap = nc;
    }
    memcpy(x->v[x->n].name, name, 33);
    x->v[x->n].size = (uint64_t)st->st_size;
    x->v[x->n].mtime = st->st_mtim;
    x->n++;
}

/* Count the entries (and remove temporary files an hour old: a process died writing them);
 * with keep > 0, remove the least recently used until at most keep bytes are left, never the
 * entry named spare (the one just written: file times are coarse, so it may tie with older
 * ones). The bytes left. Called with the lock held. */
static uint64_t scan(tth_code_store *s, uint64_t keep, const char *spare)
{
    scan_ctx x = {.now = time(NULL)};
    walk(s->dir, scan_one, &x);
    char path[4400];
    if (keep > 0 && x.total > keep && x.n > 0) {
        qsort(x.v, x.n, sizeof *x.v, older_first);
        for (size_t i = 0; i < x.n && x.total > keep; i++) {
            if (spare && strcmp(x.v[i].name, spare) == 0)
                continue;
            snprintf(path, sizeof path, "%s/%s", s->dir, x.v[i].name);
            if (unlink(path) == 0 || errno == ENOENT)
                x.total -= x.v[i].size;
        }
    }
    free(x.v);
    return x.total;
}

tth_code_store *tth_code_store_open(const char *dir, uint64_t max_bytes)
{
    if (!dir || !*dir || max_bytes == 0 || mkdir_parents(dir) != 0 || access(dir, W_OK | X_OK) != 0)
        return NULL;
    tth_code_store *s = calloc(1, sizeof *s);
    if (!s || !(s->dir = strdup(dir))) {
        free(s);
        return NULL;
    }
    s->max_bytes = max_bytes;
    pthread_mutex_init(&s->lock, NULL);
    s->bytes = scan(s, max_bytes, NULL);
    return s;
}

void tth_code_store_close(tth_code_store *s)
{
    if (!s)
        return;
    pthread_mutex_destroy(&s->lock);
    free(s->dir);
    free(s);
}

int tth_code_store_get(tth_code_store *s, const uint8_t key[16], void **data, size_t *len)
{
    *data = NULL;
    *len = 0;
    if (!s)
        return 0;
    char path[4400];
    entry_path(s, key, path, sizeof path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    struct stat st;
    uint8_t hdr[HDR];
    uint8_t *buf = NULL;
    int ok = fstat(fd, &st) == 0 && st.st_size >= HDR && read(fd, hdr, HDR) == HDR &&
             memcmp(hdr, MAGIC, 8) == 0 && tth_get_le64(hdr + 8) == (uint64_t)st.st_size - HDR;
    size_t n = ok ? (size_t)(st.st_size - HDR) : 0;
    if (ok && (buf = malloc(n ? n : 1)) != NULL) {
        size_t got = 0;
        while (got < n) {
            ssize_t r = read(fd, buf + got, n - got);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0)
                break;
            got += (size_t)r;
        }
        ok = got == n && XXH64(buf, n, 0) == tth_get_le64(hdr + 16);
    } else {
        ok = 0;
    }
    if (ok)
        futimens(fd, NULL); /* used now: the last to be evicted */
    close(fd);
    if (!ok) {
        free(buf);
        unlink(path); /* damaged (or being replaced: then it comes back) */
        return 0;
    }
    *data = buf;
    *len = n;
    return 1;
}

void tth_code_store_put(tth_code_store *s, const uint8_t key[16], const void *data, size_t len)
{
    if (!s || (uint64_t)len + HDR > s->max_bytes / 4)
        return; /* an entry that large would push out most of the others */
    char path[4400], tmp[4400];
    entry_path(s, key, path, sizeof path);
    /* mkostemp(3) makes the file and replaces the template's last six characters with its name */
    snprintf(tmp, sizeof tmp, "%s/.tmp-%d-XXXXXX", s->dir, (int)getpid());
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0)
        return;
    uint8_t hdr[HDR];
    memcpy(hdr, MAGIC, 8);
    tth_put_le64(hdr + 8, len);
    tth_put_le64(hdr + 16, XXH64(data, len, 0));
    int ok = tth_file_write_all(fd, hdr, HDR) == 0 && tth_file_write_all(fd, data, len) == 0;
    ok = close(fd) == 0 && ok && rename(tmp, path) == 0;
    if (!ok) {
        unlink(tmp);
        return;
    }
    pthread_mutex_lock(&s->lock);
    s->bytes += len + HDR;
    if (s->bytes > s->max_bytes)
        s->bytes = scan(s, s->max_bytes / 4 * 3, strrchr(path, '/') + 1);
    pthread_mutex_unlock(&s->lock);
}

typedef struct usage_ctx {
    uint64_t n, bytes;
} usage_ctx;

static void count_one(void *ctx, const char *name, const char *path, const struct stat *st)
{
    usage_ctx *x = ctx;
    (void)path;
    if (is_entry(name, st)) {
        x->n++;
        x->bytes += (uint64_t)st->st_size;
    }
}

uint64_t tth_code_store_usage(const char *dir, uint64_t *bytes)
{
    usage_ctx x = {0, 0};
    walk(dir, count_one, &x);
    *bytes = x.bytes;
    return x.n;
}

static void remove_one(void *ctx, const char *name, const char *path, const struct stat *st)
{
    if (is_entry(name, st))
        *(uint64_t *)ctx += unlink(path) == 0;
}

uint64_t tth_code_store_clear(const char *dir)
{
    uint64_t n = 0;
    walk(dir, remove_one, &n);
    return n;
}
