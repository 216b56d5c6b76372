/* cache.c: the content-addressed artifact cache.
 *
 * Entries live on disk as <dir>/<key>.tthc, in entry_file.h's format. They are written in the
 * thread pool to a temporary file and renamed into place, so a reader sees a whole entry or none;
 * a worker that compiled an artifact for a client on this machine writes that file itself
 * (tthd_cache_adopt_file), so the artifact never passes through the daemon. They are not
 * fsync'd (that cost a miss 0.1 s and more for a large artifact, docs/cache.md): every read is
 * verified (length and checksum; a client given the file checks the artifact's XXH64), so a file
 * a crash left torn is a corrupt entry, deleted, a miss. The most recently used artifacts are
 * also kept in memory; an entry's metadata and artifact XXH64 stay known after its bytes leave
 * memory, so a client that copies the file needs no read of it. Eviction is least recently used,
 * by bytes. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "tthd.h"

struct tthd_cache_entry {
    char key[33];
    uint64_t size;              /* file size */
    uint8_t *artifact;          /* in memory, or NULL */
    uint8_t *mem;               /* the allocation artifact points into (a whole entry's bytes, or a copy) */
    size_t artifact_len;
    int on_disk;                /* its file is written (scanned, loaded or stored) */
    uint64_t art_sum;           /* XXH64 of the artifact alone (for every hit's answer), when sum_known */
    int sum_known;              /* art_sum, art_offset, artifact_len and metadata are known */
    uint64_t art_offset;        /* where the artifact starts in the file (known once loaded or stored) */
    json_t *metadata;           /* in memory with the artifact */
    struct store_work *writer;  /* writing mem (this entry's file) to disk, or NULL: see free_mem */
    tthd_cache_entry *prev, *next;
};

typedef struct store_work {
    uv_work_t req;
    int owns_blob;              /* the entry that owned blob let go of it while it was written */
    tthd_cache *cache;
    char key[33];
    char *path, *tmp;
    uint8_t *blob;              /* the whole file */
    size_t blob_len;
    unsigned gen;
    int err;
} store_work;

static char *entry_path(const tthd_cache *c, const char *key)
{
    size_t n = strlen(c->dir) + strlen(key) + 8;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s.tthc", c->dir, key);
    return p;
}

char *tthd_cache_entry_path(const tthd_cache *c, const char *key)
{
    return c->dir ? entry_path(c, key) : NULL;
}

static void unlink_entry(tthd_cache *c, tthd_cache_entry *e)
{
    if (e->prev)
        e->prev->next = e->next;
    else
        c->head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    c->bytes -= e->size;
    c->entries--;
    if (e->artifact)
        c->mem_bytes -= e->artifact_len;
}

static void push_front(tthd_cache *c, tthd_cache_entry *e)
{
    e->prev = NULL;
    e->next = c->head;
    if (c->head)
        c->head->prev = e;
    c->head = e;
}

/* An entry's memory: a stored entry's is the blob its file is written from, which the writing
 * thread owns from then on when the entry lets it go first. */
static void free_mem(tthd_cache_entry *e)
{
    if (e->writer) {
        e->writer->owns_blob = 1;
        e->writer = NULL;
    } else {
        free(e->mem);
    }
    e->mem = e->artifact = NULL;
}

static void free_entry(tthd_cache_entry *e)
{
    free_mem(e);
    json_decref(e->metadata);
    free(e);
}

static void drop_entry(tthd_cache *c, tthd_cache_entry *e)
{
    unlink_entry(c, e);
    if (c->dir) {
        char *p = entry_path(c, e->key);
        if (p && unlink(p) != 0 && errno != ENOENT)
            tthd_log(TTHD_LOG_WARN, "cache: cannot remove %s: %s", p, strerror(errno));
        free(p);
    }
    free_entry(e);
}

static tthd_cache_entry *find(tthd_cache *c, const char *key)
{
    for (tthd_cache_entry *e = c->head; e; e = e->next)
        if (strcmp(e->key, key) == 0)
            return e;
    return NULL;
}

/* Keep the bounds: stored bytes with the room reserved for files being written (drop entries) and
 * in-memory bytes (drop artifacts). The most recently used entry is never touched: a hit being
 * answered points into it. */
static void evict(tthd_cache *c)
{
    tthd_cache_entry *tail = c->head;
    while (tail && tail->next)
        tail = tail->next;
    while (tail && tail != c->head && c->bytes + c->reserved > c->max_bytes) {
        tthd_cache_entry *prev = tail->prev;
        tthd_log(TTHD_LOG_DEBUG, "cache: evicting %s", tail->key);
        drop_entry(c, tail);
        tail = prev;
    }
    for (tthd_cache_entry *e = tail; e && e != c->head && c->mem_bytes > c->mem_max_bytes; e = e->prev) {
        if (!e->artifact || !c->dir)
            continue;
        c->mem_bytes -= e->artifact_len;
        free_mem(e); /* metadata and sum stay: a client that copies the file needs no read */
    }
}

static int is_key(const char *s, size_t n)
{
    if (n != 32)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    return 1;
}

typedef struct scan_item {
    char key[33];
    uint64_t size;
    time_t mtime;
} scan_item;

static int by_mtime_desc(const void *a, const void *b)
{
    const scan_item *x = a, *y = b;
    return (x->mtime < y->mtime) - (x->mtime > y->mtime);
}

/* Index the entries already on disk, most recently modified first; remove stale temp files. */
static void scan(tthd_cache *c)
{
    DIR *d = opendir(c->dir);
    if (!d)
        return;
    scan_item *items = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", c->dir, de->d_name);
        if (strncmp(de->d_name, ".tmp-", 5) == 0) {
            unlink(path);
            continue;
        }
        size_t len = strlen(de->d_name);
        if (len != 37 || strcmp(de->d_name + 32, ".tthc") != 0 || !is_key(de->d_name, 32))
            continue;
        struct stat st;
        if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            scan_item *ni = realloc(items, cap * sizeof *ni);
            if (!ni)
                break;
            items = ni;
        }
        memcpy(items[n].key, de->d_name, 32);
        items[n].key[32] = '\0';
        items[n].size = (uint64_t)st.st_size;
        items[n].mtime = st.st_mtime;
        n++;
    }
    closedir(d);
    if (n)
        qsort(items, n, sizeof *items, by_mtime_desc);
    for (size_t i = n; i-- > 0;) {
        tthd_cache_entry *e = calloc(1, sizeof *e);
        if (!e)
            break;
        memcpy(e->key, items[i].key, 33);
        e->size = items[i].size;
        e->on_disk = 1;
        push_front(c, e);
        c->bytes += e->size;
        c->entries++;
    }
    free(items);
    evict(c);
}

static int mkdir_p(const char *dir, mode_t mode)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", dir);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0700) != 0 && errno != EEXIST)
            return -errno;
        *p = '/';
    }
    if (mkdir(buf, mode) != 0 && errno != EEXIST)
        return -errno;
    return 0;
}

int tthd_cache_init(tthd_cache *c, uv_loop_t *loop, const char *dir, uint64_t max_bytes)
{
    memset(c, 0, sizeof *c);
    c->loop = loop;
    c->max_bytes = max_bytes;
    c->mem_max_bytes = max_bytes < 64u * 1024 * 1024 ? max_bytes : 64u * 1024 * 1024;
    if (dir) {
        int rc = mkdir_p(dir, 0700);
        if (rc < 0) {
            tthd_log(TTHD_LOG_WARN, "cache: cannot create %s (%s); caching in memory only", dir, strerror(-rc));
        } else {
            c->dir = strdup(dir);
            if (c->dir)
                scan(c);
        }
    }
    if (!c->dir)
        c->mem_max_bytes = max_bytes;
    return 0;
}

void tthd_cache_free(tthd_cache *c)
{
    while (c->head) {
        tthd_cache_entry *e = c->head;
        c->head = e->next;
        free_entry(e);
    }
    free(c->dir);
    c->dir = NULL;
}

void tthd_cache_key(const uint8_t model_digest[16], const char *target_json, const char *options_json,
                    const json_t *kinds, const char *compiler, char key[33])
{
    XXH3_state_t *st = XXH3_createState();
    if (!st) {
        snprintf(key, 33, "%016" PRIx64 "%016" PRIx64, XXH3_64bits(model_digest, 16),
                 XXH3_64bits(target_json, strlen(target_json)));
        return;
    }
    XXH3_128bits_reset(st);
    uint8_t len[8];
#define FIELD(p, n)                        \
    do {                                   \
        tth_put_le64(len, (uint64_t)(n)); \
        XXH3_128bits_update(st, len, 8);   \
        XXH3_128bits_update(st, p, n);     \
    } while (0)
    FIELD("tth-cache-3", 11);
    FIELD(compiler ? compiler : "", compiler ? strlen(compiler) : 0);
    FIELD(model_digest, 16);
    FIELD(target_json, strlen(target_json));
    FIELD(options_json, strlen(options_json));
    size_t i;
    json_t *k;
    json_array_foreach(kinds, i, k) {
        const char *id = json_string_value(json_object_get(k, "identity"));
        if (!id)
            id = "";
        FIELD(id, strlen(id));
    }
#undef FIELD
    XXH128_hash_t h = XXH3_128bits_digest(st);
    XXH3_freeState(st);
    snprintf(key, 33, "%016" PRIx64 "%016" PRIx64, (uint64_t)h.high64, (uint64_t)h.low64);
}

/* Read and verify an entry's file into memory. 0, or -1 if missing or corrupt. */
static int load(tthd_cache *c, tthd_cache_entry *e)
{
    char *path = entry_path(c, e->key);
    if (!path)
        return -1;
    FILE *f = fopen(path, "rb");
    free(path);
    if (!f)
        return -1;
    struct stat st;
    uint8_t *blob = NULL;
    size_t off, alen;
    json_t *meta = NULL;
    int rc = -1;
    if (fstat(fileno(f), &st) == 0 && st.st_size >= TTHD_ENTRY_HDR && (uint64_t)st.st_size < (1ull << 40) &&
        (blob = malloc((size_t)st.st_size)) && fread(blob, 1, (size_t)st.st_size, f) == (size_t)st.st_size &&
        tthd_cache_blob_check(blob, (size_t)st.st_size, &meta, &off, &alen) == 0) {
        e->mem = blob; /* the artifact stays where it was read */
        e->artifact = blob + off;
        blob = NULL;
        json_decref(e->metadata);
        e->metadata = meta;
        e->artifact_len = alen;
        e->art_offset = off;
        e->art_sum = XXH64(e->artifact, alen, 0);
        e->sum_known = 1;
        c->mem_bytes += alen;
        rc = 0;
    }
    free(blob);
    fclose(f);
    return rc;
}

/* The path of e's file when a client can be given it (an absolute cache directory) and it is
 * still the file written (the size it had); NULL otherwise. */
static char *usable_file(tthd_cache *c, tthd_cache_entry *e)
{
    if (!e->on_disk || !e->art_offset || !c->dir || c->dir[0] != '/')
        return NULL;
    char *path = entry_path(c, e->key);
    struct stat st;
    if (path && (stat(path, &st) != 0 || (uint64_t)st.st_size != e->size)) {
        e->on_disk = 0; /* removed or replaced behind our back */
        free(path);
        path = NULL;
    }
    return path;
}

int tthd_cache_lookup(tthd_cache *c, const char *key, int need_bytes, tthd_cache_hit *hit)
{
    tthd_cache_entry *e = find(c, key);
    char *path = NULL;
    if (e && !e->artifact && !need_bytes && e->sum_known && e->metadata && !(path = usable_file(c, e)) &&
        !e->on_disk) {
        /* its file is gone and its bytes are not here: nothing to serve */
        drop_entry(c, e);
        e = NULL;
    }
    if (e && !e->artifact && !path && (!c->dir || load(c, e) != 0)) {
        tthd_log(TTHD_LOG_WARN, "cache: entry %s is corrupt or unreadable; dropped", key);
        c->corrupt++;
        drop_entry(c, e);
        e = NULL;
    }
    if (!e) {
        c->misses++;
        return 0;
    }
    unlink_entry(c, e);
    push_front(c, e);
    c->bytes += e->size;
    c->entries++;
    if (e->artifact)
        c->mem_bytes += e->artifact_len;
    c->hits++;
    hit->artifact = e->artifact;
    hit->artifact_len = e->artifact_len;
    hit->metadata = e->metadata;
    hit->xxh64 = e->art_sum;
    hit->offset = e->art_offset;
    hit->path = path ? path : usable_file(c, e); /* path is set when artifact is not */
    evict(c);
    return 1;
}

/* Thread pool: temp file, rename (no fsync: every read is checked, above). */
static void store_run(uv_work_t *req)
{
    store_work *sw = req->data;
    int fd = open(sw->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        sw->err = -errno;
        return;
    }
    int rc = tth_file_write_all(fd, sw->blob, sw->blob_len);
    if (close(fd) != 0 && rc == 0)
        rc = -errno;
    if (rc == 0 && rename(sw->tmp, sw->path) != 0)
        rc = -errno;
    if (rc != 0) {
        unlink(sw->tmp);
        sw->err = rc;
    }
}

static void store_done(uv_work_t *req, int status)
{
    store_work *sw = req->data;
    tthd_cache *c = sw->cache;
    c->writes_in_flight--;
    tthd_cache_entry *stored = status == 0 && sw->err == 0 && sw->gen == c->clear_gen ? find(c, sw->key) : NULL;
    tthd_cache_entry *mine = find(c, sw->key);
    if (stored) {
        stored->on_disk = 1;
    } else if (status == 0 && sw->err == 0) {
        unlink(sw->path); /* cleared or evicted while it was being written */
    } else {
        /* not stored (a full disk): not an entry either, so status counts the files there are */
        tthd_log(TTHD_LOG_WARN, "cache: cannot store %s: %s; not cached", sw->key,
                 status ? uv_strerror(status) : strerror(-sw->err));
        c->store_errors++;
        if (mine && mine->writer == sw) {
            /* no hit is being answered from its memory (hits are answered within one loop
             * callback, their bytes copied into the socket's writes): it can go */
            drop_entry(c, mine); /* with its memory, the blob this was writing */
            mine = NULL;
        }
    }
    if (mine && mine->writer == sw)
        mine->writer = NULL; /* the entry keeps its memory */
    free(sw->path);
    free(sw->tmp);
    if (sw->owns_blob)
        free(sw->blob);
    free(sw);
}

void tthd_cache_store(tthd_cache *c, const char *key, const uint8_t *artifact, size_t len, uint64_t sum,
                      const json_t *metadata)
{
    if (find(c, key))
        return;
    size_t size, art_offset;
    uint8_t *blob = tthd_cache_blob(metadata, artifact, len, &size, &art_offset);
    if (!blob)
        return;
    tthd_cache_entry *e = size <= c->max_bytes ? calloc(1, sizeof *e) : NULL;
    if (!e) {
        free(blob);
        return;
    }
    /* the entry's memory is the blob: the artifact where the file has it */
    snprintf(e->key, sizeof e->key, "%s", key);
    e->art_sum = sum;
    e->sum_known = 1;
    e->mem = blob;
    e->artifact = blob + art_offset;
    e->artifact_len = len;
    e->metadata = json_deep_copy(metadata ? metadata : json_null());
    e->size = size;
    e->art_offset = art_offset;
    push_front(c, e);
    c->bytes += size;
    c->entries++;
    c->mem_bytes += len;
    c->stores++;
    evict(c); /* room first: older files go before this one is written */
    store_work *sw = c->dir ? calloc(1, sizeof *sw) : NULL;
    if (sw) {
        static unsigned seq;
        size_t tl = strlen(c->dir) + 80;
        sw->cache = c;
        snprintf(sw->key, sizeof sw->key, "%s", key);
        sw->path = entry_path(c, key);
        sw->tmp = malloc(tl);
        sw->blob = blob;
        sw->blob_len = size;
        sw->gen = c->clear_gen;
        sw->req.data = sw;
        if (sw->tmp)
            snprintf(sw->tmp, tl, "%s/.tmp-%s-%d-%u", c->dir, key, (int)getpid(), seq++);
        if (sw->path && sw->tmp && uv_queue_work(c->loop, &sw->req, store_run, store_done) == 0) {
            c->writes_in_flight++;
            e->writer = sw;
        } else {
            free(sw->path);
            free(sw->tmp);
            free(sw);
        }
    }
}

void tthd_cache_adopt(tthd_cache *c, const char *key, uint8_t *blob, size_t blob_len, size_t art_offset,
                      size_t art_len, uint64_t sum, const json_t *metadata, int on_disk, tthd_cache_hit *hit)
{
    tthd_cache_entry *e = find(c, key);
    if (!e && !(on_disk && c->dir)) {
        tthd_cache_store(c, key, blob + art_offset, art_len, sum, metadata);
        free(blob);
        e = find(c, key);
    } else if (e) {
        free(blob); /* the same bytes (the key says so), already here */
    } else if ((e = calloc(1, sizeof *e)) != NULL) {
        snprintf(e->key, sizeof e->key, "%s", key);
        e->mem = blob;
        e->artifact = blob + art_offset;
        e->artifact_len = art_len;
        e->art_sum = sum;
        e->sum_known = 1;
        e->art_offset = art_offset;
        e->metadata = json_deep_copy(metadata);
        e->size = blob_len;
        e->on_disk = 1;
        push_front(c, e);
        c->bytes += blob_len;
        c->entries++;
        c->mem_bytes += art_len;
        c->stores++;
    } else {
        free(blob);
    }
    memset(hit, 0, sizeof *hit);
    if (!e || !e->artifact)
        return;
    if (c->head != e) { /* most recent: eviction leaves it alone while the hit is answered */
        unlink_entry(c, e);
        push_front(c, e);
        c->bytes += e->size;
        c->entries++;
        c->mem_bytes += e->artifact_len;
    }
    hit->artifact = e->artifact;
    hit->artifact_len = e->artifact_len;
    hit->metadata = e->metadata;
    hit->xxh64 = e->art_sum;
    hit->offset = e->art_offset;
    if (e->on_disk && c->dir && c->dir[0] == '/')
        hit->path = entry_path(c, e->key);
    evict(c);
}

const char *tthd_cache_worker_dir(const tthd_cache *c)
{
    return c->dir && c->dir[0] == '/' && c->max_bytes > 0 ? c->dir : NULL;
}

int tthd_cache_adopt_file(tthd_cache *c, const char *key, const char *tmp, uint64_t size, uint64_t art_offset,
                          uint64_t art_len, uint64_t sum, const json_t *metadata, tthd_cache_hit *hit)
{
    memset(hit, 0, sizeof *hit);
    struct stat st;
    if (!tthd_cache_worker_dir(c) || size > c->max_bytes || lstat(tmp, &st) != 0 || !S_ISREG(st.st_mode) ||
        (uint64_t)st.st_size != size || art_offset + art_len != size || art_offset < TTHD_ENTRY_HDR)
        return -1;
    if (find(c, key)) {
        /* the same bytes (the key says so) are here already: serve those, not counted as a hit */
        if (tthd_cache_lookup(c, key, 0, hit)) {
            c->hits--;
            unlink(tmp);
            return 0;
        }
        c->misses--; /* that entry was unreadable and is gone: take this one */
    }
    char *path = entry_path(c, key);
    tthd_cache_entry *e = calloc(1, sizeof *e);
    json_t *meta = json_deep_copy(metadata ? metadata : json_null());
    if (!path || !e || !meta || rename(tmp, path) != 0) {
        if (path && e && meta)
            tthd_log(TTHD_LOG_WARN, "cache: cannot rename %s to %s: %s", tmp, path, strerror(errno));
        free(path);
        free(e);
        json_decref(meta);
        return -1;
    }
    snprintf(e->key, sizeof e->key, "%s", key);
    e->size = size;
    e->on_disk = 1;
    e->art_offset = art_offset;
    e->artifact_len = art_len;
    e->art_sum = sum;
    e->sum_known = 1;
    e->metadata = meta;
    push_front(c, e);
    c->bytes += size;
    c->entries++;
    c->stores++;
    hit->artifact_len = art_len;
    hit->metadata = e->metadata;
    hit->xxh64 = sum;
    hit->offset = art_offset;
    hit->path = path;
    evict(c);
    return 0;
}

/* 1 when every ONNX external data file an artifact was built from (its metadata's
 * "external_data": location, bytes, xxh64) still holds those bytes beside the model in dir
 * (docs/tthctl.md, "ONNX external data"); an artifact without external data always matches.
 * Reads and hashes the files (about a second per 10 GB): call it in the thread pool. */
int tthd_external_data_same(const json_t *metadata, const char *dir)
{
    const json_t *files = json_object_get(metadata, "external_data"), *f;
    size_t i;
    if (json_array_size(files) == 0)
        return 1;
    if (!dir)
        return 0;
    json_array_foreach(files, i, f) {
        const char *loc = json_string_value(json_object_get(f, "location"));
        const char *want = json_string_value(json_object_get(f, "xxh64"));
        json_int_t bytes = json_integer_value(json_object_get(f, "bytes"));
        char path[4096];
        if (!loc || !want || (size_t)snprintf(path, sizeof path, "%s/%s", dir, loc) >= sizeof path)
            return 0;
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) != 0 || st.st_size != bytes) {
            if (fd >= 0)
                close(fd);
            return 0;
        }
        XXH64_state_t *h = XXH64_createState();
        uint8_t *buf = malloc(1 << 20);
        ssize_t n = 0;
        if (h)
            XXH64_reset(h, 0);
        while (h && buf && (n = read(fd, buf, 1 << 20)) > 0)
            XXH64_update(h, buf, (size_t)n);
        close(fd);
        if (!buf)
            n = -1;
        free(buf);
        char hex[17];
        if (h)
            snprintf(hex, sizeof hex, "%016llx", (unsigned long long)XXH64_digest(h));
        XXH64_freeState(h);
        if (!h || n < 0 || strcmp(hex, want) != 0)
            return 0;
    }
    return 1;
}

void tthd_cache_drop(tthd_cache *c, const char *key)
{
    tthd_cache_entry *e = find(c, key);
    if (e)
        drop_entry(c, e);
}

int tthd_cache_reserve(tthd_cache *c, uint64_t n)
{
    if (!c->dir || n > c->max_bytes)
        return -1;
    c->reserved += n;
    evict(c);
    return 0;
}

void tthd_cache_unreserve(tthd_cache *c, uint64_t n)
{
    c->reserved = n < c->reserved ? c->reserved - n : 0;
}

void tthd_cache_clear(tthd_cache *c, uint64_t *entries, uint64_t *bytes)
{
    *entries = c->entries;
    *bytes = c->bytes;
    while (c->head)
        drop_entry(c, c->head);
    c->clear_gen++;
}
