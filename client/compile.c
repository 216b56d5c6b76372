/* compile.c: `tthctl compile MODEL --target T`.
 *
 * The model goes up as the `compile` request's "model" upload (PROTOCOL.md section 6); the
 * artifact comes down as the "artifact" stream before the response, into a temporary file
 * beside OUT. The response gives the artifact's size and XXH64: both are checked before the
 * temporary file is renamed to OUT, so OUT is either the whole verified artifact or untouched. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <tthrt.h>
#include <xxhash.h>

#include <tth/diag.h>
#include <tthproto/jsonrpc.h>

#include "../daemon/compile/file_io.h"
#include "onnx_scan.h"
#include "tthctl.h"

/* The state of one compile: the upload, the download, the progress display. */
typedef struct compile_job {
    json_int_t id;
    const char *out_path;      /* OUT */
    char tmp_path[PATH_MAX];   /* the temporary file beside OUT */
    int tmp_fd;
    XXH64_state_t *hash;       /* over the received artifact bytes */
    uint64_t received;         /* artifact bytes written so far */
    uint64_t total;            /* the stream's total, from the first $/chunk (0: none yet) */
    size_t expect;             /* size of the announced binary frame, 0 when none is due */
    size_t chunks;
    int past_target;           /* progress went past target parsing: errors are the model's */
    tthctl_progress progress;
} compile_job;

static const char *jstr(const json_t *obj, const char *key)
{
    const char *s = json_string_value(json_object_get(obj, key));
    return s ? s : "";
}

/* ---- while waiting: progress, chunk announcements, chunk bytes ---- */

static int on_notification(void *ctx, const char *method, json_t *params, tthctl_error *err)
{
    compile_job *job = ctx;
    const json_t *id = json_object_get(params, "id");
    if (!json_is_integer(id) || json_integer_value(id) != job->id)
        return 0;
    if (strcmp(method, "$/progress") == 0) {
        const char *stage = jstr(params, "stage");
        static const char *const before[] = {"upload", "target", "failed", "cancelled"};
        int seen_before = !*stage;
        for (size_t i = 0; i < sizeof before / sizeof before[0]; i++)
            seen_before |= strcmp(stage, before[i]) == 0;
        if (!seen_before)
            job->past_target = 1;
        tthctl_progress_update(&job->progress, params);
        return 0;
    }
    if (strcmp(method, "$/chunk") != 0)
        return 0;
    if (strcmp(jstr(params, "stream"), "artifact") != 0)
        return tthctl_fail(err, TTHCTL_EXIT_PROTOCOL, NULL, "tthd announced a chunk of stream '%s', not 'artifact'",
                           jstr(params, "stream"));
    json_int_t offset = json_integer_value(json_object_get(params, "offset"));
    json_int_t size = json_integer_value(json_object_get(params, "size"));
    json_int_t total = json_integer_value(json_object_get(params, "total"));
    if (job->expect)
        return tthctl_fail(err, TTHCTL_EXIT_PROTOCOL, NULL, "tthd announced a chunk before sending the previous one");
    if (offset < 0 || (uint64_t)offset != job->received || size < 1 || total < 1 ||
        (uint64_t)offset + (uint64_t)size > (uint64_t)total || (job->total && (uint64_t)total != job->total))
        return tthctl_fail(err, TTHCTL_EXIT_PROTOCOL, NULL,
                           "artifact chunk (offset %lld, size %lld, total %lld) does not continue the stream "
                           "(%llu bytes received)",
                           (long long)offset, (long long)size, (long long)total, (unsigned long long)job->received);
    job->total = (uint64_t)total;
    job->expect = (size_t)size;
    return 0;
}

static int on_binary(void *ctx, const uint8_t *data, size_t len, tthctl_error *err)
{
    compile_job *job = ctx;
    if (!job->expect || len != job->expect)
        return tthctl_fail(err, TTHCTL_EXIT_PROTOCOL, NULL,
                           "tthd sent a binary frame of %zu bytes where %zu were announced", len, job->expect);
    int rc = tth_file_write_all(job->tmp_fd, data, len);
    if (rc < 0) {
        char loc[PATH_MAX + 16];
        snprintf(loc, sizeof loc, "file '%s'", job->tmp_path);
        return tthctl_fail(err, TTHCTL_EXIT_IO, loc, "cannot write the artifact: %s", strerror(-rc));
    }
    XXH64_update(job->hash, data, len);
    job->received += len;
    job->expect = 0;
    job->chunks++;
    return 0;
}

/* ---- pieces ---- */

/* The model name: --name, else the file's base name without extension, made a C identifier. */
static int model_name(const tthctl_args *a, const char *path, char *buf, size_t len, tthctl_error *err)
{
    if (a->name) {
        if (!tthp_model_name_valid(a->name)) {
            tthctl_fail(err, TTHCTL_EXIT_USAGE, NULL,
                        "--name '%s' is not a C identifier of at most %d characters", a->name,
                        TTHP_MAX_MODEL_NAME);
            tthctl_hint(err, "use letters, digits and '_', not starting with a digit");
            return -TTHCTL_EXIT_USAGE;
        }
        snprintf(buf, len, "%s", a->name);
        return 0;
    }
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t n = 0;
    if (*base >= '0' && *base <= '9' && n + 1 < len)
        buf[n++] = '_';
    for (const char *p = base; *p && *p != '.' && n + 1 < len && n < TTHP_MAX_MODEL_NAME; p++) {
        char ch = *p;
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_';
        buf[n++] = ok ? ch : '_';
    }
    buf[n] = '\0';
    if (!tthp_model_name_valid(buf))
        snprintf(buf, len, "model");
    return 0;
}

/* All of the regular file at path, mapped (release_whole): the model (never empty), or, with
 * loc, one of its external data files, errors naming the model and that file. */
static int read_whole(const char *path, const char *loc, uint8_t **data, size_t *len, tthctl_error *err)
{
    const char *what = loc ? "external data file" : "model";
    char where[PATH_MAX + 16];
    snprintf(where, sizeof where, "%s '%s'", what, path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        tthctl_fail(err, TTHCTL_EXIT_IO, where, "cannot open the %s: %s", what, strerror(errno));
        if (loc)
            tthctl_hint(err, "the model's tensors name '%s' (relative to the model's directory): keep it beside the model",
                        loc);
        return -err->exit;
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        int e = errno;
        close(fd);
        return tthctl_fail(err, TTHCTL_EXIT_IO, where, "the %s is not a regular file%s%s", what,
                           S_ISREG(st.st_mode) ? ": " : "", S_ISREG(st.st_mode) ? strerror(e) : "");
    }
    if (st.st_size == 0 && !loc) {
        close(fd);
        return tthctl_fail(err, TTHCTL_EXIT_FAILED, where, "the model file is empty");
    }
    /* mapped, not read: an upload of a large model takes no memory of its own here */
    void *buf = st.st_size ? mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
    int e = errno;
    close(fd);
    if (buf == MAP_FAILED)
        return tthctl_fail(err, TTHCTL_EXIT_IO, where, "cannot map the %s (%lld bytes): %s", what,
                           (long long)st.st_size, strerror(e));
    *data = buf;
    *len = (size_t)st.st_size;
    return 0;
}

/* What read_whole gave back */
static void release_whole(uint8_t *data, size_t len)
{
    if (data && len)
        munmap(data, len);
}

static int read_file(const char *path, uint8_t **data, size_t *len, tthctl_error *err)
{
    return read_whole(path, NULL, data, len, err);
}

/* What goes up after the model when it is uploaded: its ONNX external data files (docs/tthctl.md,
 * "ONNX external data"), read from the model's directory. */
typedef struct ext_upload {
    size_t n;
    char **locs;
    uint8_t **data;
    size_t *len;
    size_t total;
} ext_upload;

static void ext_upload_free(ext_upload *x)
{
    for (size_t i = 0; i < x->n; i++) {
        free(x->locs[i]);
        if (x->data)
            release_whole(x->data[i], x->len[i]);
    }
    free(x->locs);
    free(x->data);
    free(x->len);
    memset(x, 0, sizeof *x);
}

/* The data files the model (read from model_path, a regular file) names, read; none when it
 * names none or cannot be walked (the daemon then says what is wrong with the model). */
static int read_ext_files(const char *model_path, const uint8_t *model, size_t len, ext_upload *x, tthctl_error *err)
{
    memset(x, 0, sizeof *x);
    if (tthctl_onnx_external_locations(model, len, &x->locs, &x->n) != 0 || x->n == 0)
        return 0;
    x->data = calloc(x->n, sizeof *x->data);
    x->len = calloc(x->n, sizeof *x->len);
    if (!x->data || !x->len)
        return tthctl_fail(err, TTHCTL_EXIT_FAILED, NULL, "out of memory");
    const char *slash = strrchr(model_path, '/');
    for (size_t i = 0; i < x->n; i++) {
        char where[PATH_MAX + 16], path[PATH_MAX];
        snprintf(where, sizeof where, "model '%s'", model_path);
        if (!tthp_data_location_valid(x->locs[i]))
            return tthctl_fail(err, TTHCTL_EXIT_FAILED, where,
                               "external data location '%s' is not a relative path inside the model's directory",
                               x->locs[i]);
        if (snprintf(path, sizeof path, "%.*s%s", slash ? (int)(slash - model_path + 1) : 0, model_path, x->locs[i]) >=
            (int)sizeof path)
            return tthctl_fail(err, TTHCTL_EXIT_FAILED, where, "the path of external data file '%s' is too long",
                               x->locs[i]);
        int rc = read_whole(path, x->locs[i], &x->data[i], &x->len[i], err);
        if (rc < 0)
            return rc;
        x->total += x->len[i];
    }
    return 0;
}

/* Create the temporary file beside out. */
static int open_tmp(compile_job *job, tthctl_error *err)
{
    const char *slash = strrchr(job->out_path, '/');
    int dirlen = slash ? (int)(slash - job->out_path) : 0;
    const char *base = slash ? slash + 1 : job->out_path;
    int n;
    if (slash)
        n = snprintf(job->tmp_path, sizeof job->tmp_path, "%.*s/.%s.XXXXXX", dirlen ? dirlen : 1,
                     dirlen ? job->out_path : "/", base);
    else
        n = snprintf(job->tmp_path, sizeof job->tmp_path, ".%s.XXXXXX", base);
    char loc[PATH_MAX + 16];
    snprintf(loc, sizeof loc, "file '%s'", job->out_path);
    if (!*base)
        return tthctl_fail(err, TTHCTL_EXIT_USAGE, loc, "the output must name a file, not a directory");
    if (n < 0 || (size_t)n >= sizeof job->tmp_path)
        return tthctl_fail(err, TTHCTL_EXIT_IO, loc, "the output path is too long");
    job->tmp_fd = mkostemp(job->tmp_path, O_CLOEXEC);
    if (job->tmp_fd < 0) {
        job->tmp_path[0] = '\0';
        return tthctl_fail(err, TTHCTL_EXIT_IO, loc, "cannot create the output: %s", strerror(errno));
    }
    return 0;
}

/* Put the file tmp in the place of out, atomically: a reader of out sees the old file or the
 * new one. Over an existing regular file the two names are exchanged and the old file, now under
 * tmp's name, is removed: the same result as rename(2), but ext4 writes a file's blocks out at
 * once when a rename replaces another file (its auto_da_alloc rule), and the exchange is not
 * such a rename (docs/tthctl.md, "compile": a 72 MiB artifact replaced in about 12 ms instead of
 * 30). Anything else (no old file, a directory or link there, a file system that cannot
 * exchange) is a plain rename. 0, or -1 with errno set. */
static int replace_file(const char *tmp, const char *out)
{
    struct stat st;
    if (lstat(out, &st) == 0 && S_ISREG(st.st_mode) &&
        renameat2(AT_FDCWD, tmp, AT_FDCWD, out, RENAME_EXCHANGE) == 0) {
        unlink(tmp);
        return 0;
    }
    return rename(tmp, out);
}

/* size bytes of fd from off into the hash, and into out_fd when it is not -1; 0 or -1 */
static int hash_copy(int fd, uint64_t off, uint64_t size, XXH64_state_t *hash, int out_fd)
{
    static uint8_t buf[1 << 20];
    for (uint64_t at = 0; at < size;) {
        ssize_t n = pread(fd, buf, size - at < sizeof buf ? (size_t)(size - at) : sizeof buf, (off_t)(off + at));
        if (n <= 0) {
            if (n < 0 && errno == EINTR)
                continue;
            return -1;
        }
        XXH64_update(hash, buf, (size_t)n);
        if (out_fd >= 0 && tth_file_write_all(out_fd, buf, (size_t)n) != 0)
            return -1;
        at += (uint64_t)n;
    }
    return 0;
}

/* copy_file_range of a region into an output, on a thread of its own */
typedef struct kcopy {
    int in, out;
    loff_t off;
    uint64_t size, done;
} kcopy;

static void *kernel_copy(void *arg)
{
    kcopy *k = arg;
    while (k->done < k->size) {
        ssize_t n = copy_file_range(k->in, &k->off, k->out, NULL, (size_t)(k->size - k->done), 0);
        if (n <= 0) {
            if (n < 0 && errno == EINTR)
                continue;
            break;
        }
        k->done += (uint64_t)n;
    }
    return NULL;
}

/* XXH64 of a region of fd, read through a read-only mapping: 0, or -1 (nothing hashed) */
static int hash_mapped(int fd, uint64_t off, uint64_t size, XXH64_state_t *hash)
{
    long page = sysconf(_SC_PAGESIZE);
    uint64_t base = off - off % (uint64_t)(page > 0 ? page : 4096);
    size_t len = (size_t)(off - base + size);
    void *m = mmap(NULL, len, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, (off_t)base);
    if (m == MAP_FAILED)
        return -1;
    XXH64_update(hash, (const uint8_t *)m + (off - base), (size_t)size);
    munmap(m, len);
    return 0;
}

/* A cache hit delivered as a file of tthd's cache (the "delivery": "file" answer): copy the
 * artifact's bytes from it into the temporary output, hashing them as the stream would be, so
 * finish_artifact checks size and XXH64 the same way. 0 on success; negative (nothing reported)
 * when the file cannot be used, for instance evicted meanwhile or damaged (its bytes do not hash
 * to the answer's XXH64): the caller asks again, streamed. */
static int copy_artifact_file(compile_job *job, const json_t *art)
{
    const json_t *file = json_object_get(art, "file");
    const char *path = json_string_value(json_object_get(file, "path"));
    json_int_t off = json_integer_value(json_object_get(file, "offset")), size = json_integer_value(json_object_get(art, "size"));
    if (!path || path[0] != '/' || off < 0 || size < 1)
        return -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -1;
    struct stat st;
    /* only a regular file of our own: the daemon runs as us (checked when connecting) */
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
        (uint64_t)st.st_size < (uint64_t)off + (uint64_t)size) {
        close(fd);
        return -1;
    }
    /* in the kernel (no copy through this process; a reflink where the filesystem can) on a
     * thread of its own, while this one hashes the same bytes of the cache file, mapped: the
     * cache file never changes once it is in place (it is written aside and renamed), so they are
     * the bytes the copy gets */
    kcopy kc = {.in = fd, .out = job->tmp_fd, .off = (loff_t)off, .size = (uint64_t)size};
    pthread_t th;
    int threaded = pthread_create(&th, NULL, kernel_copy, &kc) == 0;
    if (!threaded)
        kernel_copy(&kc);
    int rc = hash_mapped(fd, (uint64_t)off, (uint64_t)size, job->hash);
    if (threaded)
        pthread_join(th, NULL);
    uint64_t done = kc.done;
    if (rc != 0 || done != (uint64_t)size) {
        /* no mapping, or copy_file_range is not there (or stopped early): through this
         * process, hashing on the way */
        if (ftruncate(job->tmp_fd, 0) != 0 || lseek(job->tmp_fd, 0, SEEK_SET) != 0 || XXH64_reset(job->hash, 0) != XXH_OK)
            rc = -1;
        else {
            done = (uint64_t)size;
            rc = hash_copy(fd, (uint64_t)off, done, job->hash, job->tmp_fd);
        }
    }
    close(fd);
    job->received = job->total = done;
    if (rc == 0) {
        /* the cache file damaged since the daemon checked it: ask for the stream instead */
        char got[17];
        snprintf(got, sizeof got, "%016llx", (unsigned long long)XXH64_digest(job->hash));
        const char *want = jstr(art, "xxh64");
        if (strlen(want) != 16 || strcasecmp(want, got) != 0)
            rc = -1;
    }
    return rc;
}

/* Back to an empty output and hash, for asking again. */
static int reset_output(compile_job *job)
{
    job->received = job->total = 0;
    job->expect = 0;
    job->chunks = 0;
    if (ftruncate(job->tmp_fd, 0) != 0 || lseek(job->tmp_fd, 0, SEEK_SET) != 0)
        return -1;
    return XXH64_reset(job->hash, 0) == XXH_OK ? 0 : -1;
}

static int finish_artifact(compile_job *job, const json_t *res, tthctl_error *err)
{
    const json_t *art = json_object_get(res, "artifact");
    json_int_t size = json_integer_value(json_object_get(art, "size"));
    const char *want = jstr(art, "xxh64");
    char loc[PATH_MAX + 16];
    snprintf(loc, sizeof loc, "file '%s'", job->out_path);
    if (job->expect)
        return tthctl_fail(err, TTHCTL_EXIT_PROTOCOL, loc, "tthd answered before sending an announced chunk");
    if (size < 1 || (uint64_t)size != job->received || job->received != job->total)
        return tthctl_fail(err, TTHCTL_EXIT_PROTOCOL, loc,
                           "artifact size mismatch: the response says %lld bytes, the stream announced %llu and "
                           "delivered %llu",
                           (long long)size, (unsigned long long)job->total, (unsigned long long)job->received);
    char got[17];
    snprintf(got, sizeof got, "%016llx", (unsigned long long)XXH64_digest(job->hash));
    if (strlen(want) != 16 || strcasecmp(want, got) != 0)
        return tthctl_fail(err, TTHCTL_EXIT_PROTOCOL, loc,
                           "artifact checksum mismatch: the response says xxh64 '%s', the bytes hash to '%s'", want,
                           got);
    mode_t mask = umask(0);
    umask(mask);
    /* no fsync: an output is a build product, like a compiler's (docs/tthctl.md, "compile") */
    if (fchmod(job->tmp_fd, 0666 & ~mask) < 0)
        return tthctl_fail(err, TTHCTL_EXIT_IO, loc, "cannot write the artifact: %s", strerror(errno));
    int rc = close(job->tmp_fd);
    job->tmp_fd = -1;
    if (rc < 0)
        return tthctl_fail(err, TTHCTL_EXIT_IO, loc, "cannot write the artifact: %s", strerror(errno));
    if (replace_file(job->tmp_path, job->out_path) < 0)
        return tthctl_fail(err, TTHCTL_EXIT_IO, loc, "cannot rename '%s' to the output: %s", job->tmp_path,
                           strerror(errno));
    job->tmp_path[0] = '\0';
    return 0;
}

/* "float32 [1, 1, 8, 8]" of a metadata tensor. */
static void print_tensor(const char *what, const json_t *t)
{
    char shape[256] = "";
    size_t used = 0, i;
    json_t *d;
    json_array_foreach(json_object_get(t, "shape"), i, d) {
        int n = snprintf(shape + used, sizeof shape - used, "%s%lld", i ? ", " : "", (long long)json_integer_value(d));
        if (n < 0 || (size_t)n >= sizeof shape - used)
            break;
        used += (size_t)n;
    }
    printf("  %-6s %s: %s [%s]\n", what, jstr(t, "name"), jstr(t, "dtype"), shape);
}

/* --explain: which operator went to which kind of a composite target, and why others refused. */
static void print_partition(const json_t *p)
{
    size_t i;
    json_t *o;
    if (!p)
        return;
    printf("partition (fallback %s):\n", jstr(p, "fallback"));
    json_array_foreach(json_object_get(p, "ops"), i, o) {
        const char *fn = json_string_value(json_object_get(o, "function"));
        printf("  %-24s %-20s -> %s%s%s%s\n", jstr(o, "node"), jstr(o, "op"), jstr(o, "kind"),
               fn ? " (" : "", fn ? fn : "", fn ? ")" : "");
    }
    json_array_foreach(json_object_get(p, "refusals"), i, o)
        printf("  refused %s: %s\n", jstr(o, "node"), jstr(o, "reason"));
}

/* --timings (and --explain): where the compile's time went, in seconds */
static void print_timings(const json_t *t)
{
    if (!json_is_object(t))
        return;
    printf("timings (s): %.3f in all; cache lookup %.4f", json_number_value(json_object_get(t, "total")),
           json_number_value(json_object_get(t, "cacheLookup")));
    if (json_object_get(t, "remoteCacheLookup"))
        printf("; remote cache lookup %.4f", json_number_value(json_object_get(t, "remoteCacheLookup")));
    printf("\n");
    size_t i;
    json_t *o;
    json_array_foreach(json_object_get(t, "stages"), i, o)
        printf("  stage %-18s %8.3f\n", jstr(o, "stage"), json_number_value(json_object_get(o, "seconds")));
    json_array_foreach(json_object_get(t, "hooks"), i, o)
        printf("  hook  %-18s %8.3f  (%s, %lld call%s)\n", jstr(o, "hook"), json_number_value(json_object_get(o, "seconds")),
               jstr(o, "plugin"), (long long)json_integer_value(json_object_get(o, "calls")),
               json_integer_value(json_object_get(o, "calls")) == 1 ? "" : "s");
    const json_t *code = json_object_get(t, "code");
    if (code)
        printf("  compiled code: %lld piece%s reused from the store, %lld compiled\n",
               (long long)json_integer_value(json_object_get(code, "reused")),
               json_integer_value(json_object_get(code, "reused")) == 1 ? "" : "s",
               (long long)json_integer_value(json_object_get(code, "compiled")));
    if (json_object_get(t, "workerPeakRss"))
        printf("  the worker's peak memory (resident): %.1f MiB\n",
               (double)json_integer_value(json_object_get(t, "workerPeakRss")) / (1 << 20));
    if (!json_array_size(json_object_get(t, "stages")))
        printf("  (served from the cache: no stage ran)\n");
}

/* The shared cache's state from the answer (docs/cache.md, "What the user sees"): a warning on
 * every compile while it is off, a note once when it is back. */
static void print_remote_cache(const json_t *rc)
{
    const char *state = json_string_value(json_object_get(rc, "state"));
    if (!state)
        return;
    if (strcmp(state, "up") != 0)
        fprintf(stderr,
                "tthctl: warning: the shared cache %s is %s (%s): tthd compiles and stores with its local cache "
                "only and tries it again every %g s; check the address and password in TTH_CACHE_REDIS or "
                "--cache-redis, and that Redis runs (`tthctl status` shows the state)\n",
                jstr(rc, "address"), strcmp(state, "down") == 0 ? "unreachable" : "answering with errors",
                jstr(rc, "error"), json_number_value(json_object_get(rc, "retrySeconds")));
    else if (json_is_true(json_object_get(rc, "changed")))
        fprintf(stderr, "tthctl: note: the shared cache %s is reachable again\n", jstr(rc, "address"));
}

/* --explain: the artifact's report page with this compile's stage timings, beside the artifact
 * as <OUT without .tar>.report.html (docs/profiling.md, "The report page"); its path in
 * report_path, or "" and a warning when it could not be written (the artifact is written). */
static void write_compile_report(const char *out, const json_t *res, char *report_path, size_t len)
{
    size_t n = strlen(out);
    int tar = n > 4 && strcmp(out + n - 4, ".tar") == 0;
    snprintf(report_path, len, "%.*s.report.html", (int)(tar ? n - 4 : n), out);
    json_t *t = json_deep_copy(json_object_get(res, "timings"));
    if (t)
        json_object_set_new(t, "cache", json_string(jstr(res, "cache")));
    tth_diag d;
    tth_diag_clear(&d);
    int rc = tthctl_report_write(out, NULL, t, report_path, &d);
    json_decref(t);
    if (rc != 0) {
        fprintf(stderr, "tthctl: warning: no report page beside the artifact: %s (%s)\n", d.message,
                d.location[0] ? d.location : report_path);
        report_path[0] = 0;
    }
}

static void print_result(const compile_job *job, const json_t *res, int explain, int timings)
{
    char b[32];
    const json_t *meta = json_object_get(res, "metadata");
    printf("wrote %s (%s, cache %s%s, key %s)\n", job->out_path, tthctl_size_str((double)job->received, b, sizeof b),
           jstr(res, "cache"), strcmp(jstr(res, "cacheSource"), "remote") == 0 ? " (remote)" : "", jstr(res, "key"));
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(meta, "inputs"), i, t)
        print_tensor("input", t);
    json_array_foreach(json_object_get(meta, "outputs"), i, t)
        print_tensor("output", t);
    /* a library the artifact's code calls and tth does not ship (docs/artifact.md) */
    json_array_foreach(json_object_get(meta, "requires"), i, t)
        printf("  needs  %s (%s): set %s to its source tree when building (README.txt)\n", jstr(t, "library"),
               jstr(t, "header"), jstr(t, "root_variable"));
    if (json_string_value(json_object_get(res, "report")))
        printf("  report %s (the compile report page, with this compile's stage timings)\n", jstr(res, "report"));
    if (explain)
        print_partition(json_object_get(meta, "partition"));
    if (explain || timings)
        print_timings(json_object_get(res, "timings"));
    const json_t *dumps = json_object_get(res, "dumps");
    const char *stage;
    json_t *text;
    json_object_foreach((json_t *)dumps, stage, text) {
        if (json_is_string(text))
            printf(";; ---- IR after stage '%s' ----\n%s%s", stage, json_string_value(text),
                   json_string_length(text) && json_string_value(text)[json_string_length(text) - 1] == '\n'
                       ? ""
                       : "\n");
    }
}

/* Upload the model in chunks, handling whatever the daemon sends meanwhile. Returns 1 when the
 * response already came (it is in *res), 0 when the whole model went up. */
/* One stretch of an upload's bytes. */
static int upload_part(tthctl_conn *c, compile_job *job, const tthctl_handlers *h, json_t *id, const uint8_t *data,
                       size_t len, size_t at, size_t total, json_t **res, tthctl_error *err)
{
    size_t chunk = c->max_frame_bytes < TTHP_CHUNK_BYTES ? c->max_frame_bytes : TTHP_CHUNK_BYTES;
    for (size_t off = 0; off < len && !tthctl_interrupted; off += chunk) {
        size_t n = len - off < chunk ? len - off : chunk;
        int wrc = tthp_write_chunk_fd(c->fd, id, "model", at + off, data + off, n, total);
        if (wrc < 0) {
            /* the daemon may have answered (and closed) already: read what it said */
            int rc = tthctl_conn_wait(c, job->id, h, 1000, res, err);
            return rc ? rc : tthctl_fail(err, TTHCTL_EXIT_PROTOCOL, NULL, "cannot send the model to tthd: %s",
                                         strerror(-wrc));
        }
        int rc = tthctl_conn_wait(c, job->id, h, 0, res, err);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* The upload: the model's bytes, then its external data files' in their order (PROTOCOL.md). */
static int upload(tthctl_conn *c, compile_job *job, const tthctl_handlers *h, const uint8_t *model,
                  size_t len, const ext_upload *x, json_t **res, tthctl_error *err)
{
    json_t *id = json_integer(job->id);
    size_t total = len + x->total, at = len;
    int rc = upload_part(c, job, h, id, model, len, 0, total, res, err);
    for (size_t i = 0; i < x->n && rc == 0 && !*res; i++) {
        rc = upload_part(c, job, h, id, x->data[i], x->len[i], at, total, res, err);
        at += x->len[i];
    }
    json_decref(id);
    return rc;
}

/* options.bind from the --bind NAME=FILE arguments (docs/tthctl.md, "--bind"):
 * {NAME: {"dtype", "shape", "data"}}. NULL with err filled on a bad argument or file. */
static json_t *bind_options(const tthctl_args *a, tthctl_error *err)
{
    json_t *bind = json_object();
    for (size_t i = 0; bind && i < a->n_binds; i++) {
        const char *arg = a->binds[i], *eq = strchr(arg, '=');
        if (!eq || eq == arg || !eq[1]) {
            tthctl_fail(err, TTHCTL_EXIT_USAGE, NULL, "--bind '%s' is not NAME=FILE", arg);
            tthctl_hint(err, "for example --bind shape=shape.npy (a .npy or ONNX TensorProto .pb file)");
            goto fail;
        }
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(eq - arg), arg);
        if (json_object_get(bind, name)) {
            tthctl_fail(err, TTHCTL_EXIT_USAGE, NULL, "--bind names input '%s' twice", name);
            goto fail;
        }
        tthrt_array t = {0};
        tth_diag d;
        tth_diag_clear(&d);
        if (tthrt_array_load(eq + 1, &t, &d) != 0) {
            char loc[PATH_MAX + 16];
            snprintf(loc, sizeof loc, "--bind %s", name);
            tthctl_fail(err, TTHCTL_EXIT_IO, loc, "%s", d.message);
            goto fail;
        }
        char why[128];
        json_t *val = tthrt_array_to_bind_json(&t, TTHRT_BIND_MAX_ELEMENTS, why, sizeof why);
        tthrt_array_clear(&t);
        if (!val) {
            tthctl_fail(err, TTHCTL_EXIT_USAGE, NULL, "--bind %s: the tensor in '%s' %s", name, eq + 1, why);
            goto fail;
        }
        if (!val || json_object_set_new(bind, name, val) != 0) {
            tthctl_fail(err, TTHCTL_EXIT_FAILED, NULL, "out of memory");
            goto fail;
        }
    }
    if (!bind)
        tthctl_fail(err, TTHCTL_EXIT_FAILED, NULL, "out of memory");
    return bind;
fail:
    json_decref(bind);
    return NULL;
}

/* options.input_shapes from --input-shape NAME=D0,D1,...: {NAME: [D0, D1, ...]}. NULL with err
 * filled on a malformed argument. */
static json_t *shape_options(const tthctl_args *a, tthctl_error *err)
{
    json_t *shapes = json_object();
    for (size_t i = 0; shapes && i < a->n_shapes; i++) {
        const char *arg = a->shapes[i], *eq = strchr(arg, '=');
        json_t *dims = json_array();
        const char *p = eq ? eq + 1 : NULL;
        int ok = eq && eq != arg && *p;
        while (ok && *p) {
            char *end;
            long long d = strtoll(p, &end, 10);
            ok = end != p && d >= 0 && d <= (1LL << 32) && (*end == ',' || *end == '\0') && json_array_size(dims) < 8;
            json_array_append_new(dims, json_integer(d));
            p = *end == ',' ? end + 1 : end;
            ok = ok && !(*end == ',' && !*p);
        }
        char name[256];
        snprintf(name, sizeof name, "%.*s", eq ? (int)(eq - arg) : 0, arg);
        if (!ok || json_object_get(shapes, name)) {
            json_decref(dims);
            tthctl_fail(err, TTHCTL_EXIT_USAGE, NULL, ok ? "--input-shape names input '%s' twice"
                                                         : "--input-shape '%s' is not NAME=D0,D1,...",
                        ok ? name : arg);
            tthctl_hint(err, "for example --input-shape input=1,3,224,224 (every dimension of the input)");
            json_decref(shapes);
            return NULL;
        }
        json_object_set_new(shapes, name, dims);
    }
    if (!shapes)
        tthctl_fail(err, TTHCTL_EXIT_FAILED, NULL, "out of memory");
    return shapes;
}

int tthctl_cmd_compile(const tthctl_args *a, tthctl_error *err)
{
    const char *model_path = a->pos[0];
    char name[TTHP_MAX_MODEL_NAME + 2], out_buf[TTHP_MAX_MODEL_NAME + 8];
    if (!a->target) {
        tthctl_fail(err, TTHCTL_EXIT_USAGE, NULL, "compile needs a target: --target T");
        tthctl_hint(err, "for example --target 'llvm' or --target 'c -mcpu=cortex-m55'; 'tthctl targets' lists kinds");
        return -TTHCTL_EXIT_USAGE;
    }
    int rc = model_name(a, model_path, name, sizeof name, err);
    if (rc < 0)
        return rc;
    json_t *bind = a->n_binds ? bind_options(a, err) : NULL;
    if (a->n_binds && !bind)
        return -err->exit;
    json_t *shapes = a->n_shapes ? shape_options(a, err) : NULL;
    if (a->n_shapes && !shapes) {
        json_decref(bind);
        return -err->exit;
    }
    json_t *target = NULL;
    rc = tthctl_target_param(a->target, &target, err);
    if (rc < 0) {
        json_decref(bind);
        json_decref(shapes);
        return rc;
    }
    snprintf(out_buf, sizeof out_buf, "%s.tar", name);

    compile_job job = {.out_path = a->output ? a->output : out_buf, .tmp_fd = -1};
    uint8_t *model = NULL;
    size_t model_len = 0;
    ext_upload ext = {0};
    tthctl_conn *c = NULL;
    json_t *res = NULL;
    tthctl_progress_init(&job.progress, a->quiet);
    tthctl_handlers h = {.ctx = &job, .notification = on_notification, .binary = on_binary};

    struct stat mst;
    if (stat(model_path, &mst) != 0 || !S_ISREG(mst.st_mode)) {
        rc = read_file(model_path, &model, &model_len, err); /* says what is wrong with it */
        if (rc < 0)
            goto out;
    }
    rc = tthctl_conn_open(a, 0, &c, err);
    if (rc < 0)
        goto out;
    /* a daemon that can read the model file itself gets its path instead of an upload; tthctl
     * then only needs its size. --stream uploads, as to a remote daemon. */
    char model_abs[PATH_MAX];
    int by_path = !model && c->model_path_ok && !a->stream && mst.st_size > 0 && realpath(model_path, model_abs);
    if (by_path) {
        model_len = (size_t)mst.st_size;
    } else if (!model) {
        rc = read_file(model_path, &model, &model_len, err);
        if (rc < 0)
            goto out;
    }
    /* uploaded: its external data files go up with it */
    if (!by_path && S_ISREG(mst.st_mode)) {
        rc = read_ext_files(model_path, model, model_len, &ext, err);
        if (rc < 0)
            goto out;
    }
    rc = open_tmp(&job, err);
    if (rc < 0)
        goto out;
    job.hash = XXH64_createState();
    if (!job.hash || XXH64_reset(job.hash, 0) != XXH_OK) {
        rc = tthctl_fail(err, TTHCTL_EXIT_FAILED, NULL, "out of memory");
        goto out;
    }
    /* the request limit bounds what goes through the socket: a model named by path does not */
    if (!by_path && (model_len > c->max_request_bytes || ext.total > c->max_request_bytes - model_len)) {
        char loc[PATH_MAX + 16];
        snprintf(loc, sizeof loc, "model '%s'", model_path);
        rc = tthctl_fail(err, TTHCTL_EXIT_FAILED, loc, "the model (%zu bytes%s) is larger than the daemon accepts (%zu)",
                         model_len + ext.total, ext.n ? " with its external data" : "", c->max_request_bytes);
        tthctl_hint(err, "an upload (--stream, or a daemon that cannot read the file) is bounded by the daemon's "
                         "request limit: set TTH_MAX_REQUEST_BYTES (e.g. 2G) and run 'tthctl stop', so that the "
                         "next command starts tthd with it; or start tthd with a larger --max-request-bytes");
        goto out;
    }

    json_t *options = json_object();
    if (a->dump_ir)
        json_object_set_new(options, "dump_ir", json_string(a->dump_ir));
    if (a->explain)
        json_object_set_new(options, "explain", json_true());
    if (a->profile)
        json_object_set_new(options, "profile", json_true());
    if (a->reference)
        json_object_set_new(options, "reference", json_true());
    if (a->no_cache)
        json_object_set_new(options, "no_cache", json_true());
    if (a->shared)
        json_object_set_new(options, "build_shared", json_true());
    if (bind)
        json_object_set_new(options, "bind", bind);
    bind = NULL;
    if (shapes)
        json_object_set_new(options, "input_shapes", shapes);
    shapes = NULL;
    json_t *params = json_pack("{s:{s:s, s:I}, s:o, s:s}", "model", "name", name, "size", (json_int_t)model_len,
                               "target", target, "delivery", a->stream ? "stream" : "file");
    if (params && by_path)
        json_object_set_new(json_object_get(params, "model"), "path", json_string(model_abs));
    if (params && ext.n) {
        json_t *files = json_array();
        for (size_t i = 0; i < ext.n; i++)
            json_array_append_new(files, json_pack("{s:s, s:I}", "location", ext.locs[i], "size", (json_int_t)ext.len[i]));
        json_object_set_new(json_object_get(params, "model"), "external_data", files);
    }
    target = NULL;
    if (params && json_object_size(options))
        json_object_set_new(params, "options", options);
    else
        json_decref(options);
    /* a cache hit may come as a file of the daemon's cache (docs/tthctl.md, "compile", `--stream`); when
     * that file cannot be used (evicted meanwhile), ask once more for the streamed form */
    for (int attempt = 0;; attempt++) {
        json_t *p = json_deep_copy(params);
        if (p && attempt)
            json_object_set_new(p, "delivery", json_string("stream"));
        rc = tthctl_conn_send_request(c, "compile", p, &job.id, err);
        if (rc < 0)
            break;
        rc = by_path ? 0 : upload(c, &job, &h, model, model_len, &ext, &res, err);
        if (rc == 0)
            rc = tthctl_conn_wait(c, job.id, &h, -1, &res, err);
        if (rc < 0 || !json_object_get(json_object_get(res, "artifact"), "file"))
            break;
        if (copy_artifact_file(&job, json_object_get(res, "artifact")) == 0)
            break;
        json_decref(res);
        res = NULL;
        if (attempt || reset_output(&job) != 0) {
            rc = tthctl_fail(err, TTHCTL_EXIT_IO, NULL, "cannot copy the artifact from tthd's cache");
            break;
        }
    }
    json_decref(params);
    tthctl_progress_done(&job.progress);
    if (rc < 0) {
        /* name what the error is about: the target for the target system's codes, else the model */
        int code = err->rpc ? (int)json_integer_value(json_object_get(err->rpc, "code")) : 0;
        int tcode = TTHP_CODE_TO_TTH(code);
        if (!job.past_target && (tcode == TTH_EPARSE || tcode == TTH_EUNKNOWN || tcode == TTH_ETYPE))
            tthctl_error_context(err, "target '%.500s'", a->target);
        else
            tthctl_error_context(err, "model '%s'", model_path);
        goto out;
    }
    rc = finish_artifact(&job, res, err);
    if (rc < 0)
        goto out;
    char report_path[PATH_MAX + 16] = "";
    if (a->explain)
        write_compile_report(job.out_path, res, report_path, sizeof report_path);
    if (report_path[0])
        json_object_set_new(res, "report", json_string(report_path));
    if (a->json) {
        json_object_set_new(res, "output", json_string(job.out_path));
        tthctl_json_print(res);
    } else {
        print_result(&job, res, a->explain, a->timings);
    }
    char ctx[PATH_MAX + 16];
    snprintf(ctx, sizeof ctx, "model '%s'", model_path);
    if (a->no_cache && strcmp(jstr(res, "cache"), "hit") == 0)
        fprintf(stderr, "tthctl: warning: --no-cache was asked but tthd answered from its cache\n");
    print_remote_cache(json_object_get(res, "remoteCache"));
    tthctl_diagnostics_print(stderr, json_object_get(res, "diagnostics"), ctx);
    rc = 0;
out:
    tthctl_progress_done(&job.progress);
    if (job.tmp_fd >= 0)
        close(job.tmp_fd);
    if (job.tmp_path[0])
        unlink(job.tmp_path);
    if (job.hash)
        XXH64_freeState(job.hash);
    json_decref(target);
    json_decref(bind);
    json_decref(shapes);
    json_decref(res);
    tthctl_conn_close(c);
    release_whole(model, model_len);
    ext_upload_free(&ext);
    return rc;
}
