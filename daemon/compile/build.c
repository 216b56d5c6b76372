/* build.c: build the host shared object from the runtime modules' C sources and objects.
 *
 * Requires: runtime modules whose TTH_FILE_C_SOURCE files are C99 that includes at most the C
 * library and the modules' TTH_FILE_C_HEADER files (by name; they are written next to the
 * sources), and whose TTH_FILE_OBJECT and TTH_FILE_LINK_OBJECT files are host objects; a source
 * the module's meta "link_replaces" names is not compiled, its link objects take its place
 * (docs/plugin-guide.md, "Objects in place of sources"). A file that several modules carry
 * byte for byte is built once. In a directory of its own, with relative file names so nothing of
 * the directory's name ends up in the output (the same sources give the same bytes): each C source
 * is compiled by `TTH_CC -std=c99 -O1 -fPIC -pthread -c` (CC_OPT: docs/artifact.md, "The host
 * library"), as many at a time as the machine has
 * CPUs (a new one as soon as one finishes), then `TTH_CC -shared -pthread -o lib.so <objects> -lm` links them with the modules'
 * objects (a single source and no object: one call that does both).
 * With the host's store of compiled code (docs/cache.md, "Compiled code"), a source's object is
 * looked up there first under a key of the compiler (its path, size and modification time), the
 * flags, the source and every header of the build, and kept there once compiled.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <xxhash.h>

#include "compile_internal.h"
#include "file_io.h"
#include "tth_config.h"

static int write_file(const char *dir, const char *name, const void *data, size_t len)
{
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    int ok = len == 0 || fwrite(data, 1, len, f) == len;
    if (fclose(f) != 0)
        ok = 0;
    return ok ? 0 : -1;
}

static void remove_tree(const char *dir, char *const *files, size_t n)
{
    char path[2048];
    for (size_t i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
        snprintf(path, sizeof path, "%s/%s.o", dir, files[i]);
        unlink(path);
        snprintf(path, sizeof path, "%s/%s.log", dir, files[i]);
        unlink(path);
    }
    snprintf(path, sizeof path, "%s/lib.so", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/cc.log", dir);
    unlink(path);
    rmdir(dir);
}

/* Start argv in dir, its output and errors into dir/log. The child's pid, or -1 with errno set
 * (ENOENT: no such compiler). Spawned, not forked: the worker maps LLVM and a model's tensors,
 * which fork would copy the page tables of, and after which each page the worker writes would
 * fault once more. */
static pid_t cc_start(const char *dir, char *const *argv, const char *log)
{
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", dir, log);
    posix_spawn_file_actions_t fa;
    int err = posix_spawn_file_actions_init(&fa);
    if (err) {
        errno = err;
        return -1;
    }
    pid_t pid = -1;
    if (!(err = posix_spawn_file_actions_addchdir_np(&fa, dir)) &&
        !(err = posix_spawn_file_actions_addopen(&fa, 1, path, O_WRONLY | O_CREAT | O_TRUNC, 0600)) &&
        !(err = posix_spawn_file_actions_adddup2(&fa, 1, 2)))
        err = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (err) {
        errno = err;
        return -1;
    }
    return pid;
}

/* The diagnostic of a compiler cc_start could not start (errno). */
static int cc_not_started(tth_diag *diag)
{
    int rc = errno == ENOENT ? tth_diag_set(diag, TTH_EIO, "build", "the C compiler '%s' was not found", TTH_CC)
                             : tth_diag_set(diag, TTH_EIO, "build", "cannot start the C compiler '%s': %s", TTH_CC,
                                            strerror(errno));
    tth_diag_hint(diag, "set build_shared to false to get the sources without a host library");
    return rc;
}

/* Wait for a cc_start'ed child; 0 when it succeeded, else a diagnostic with dir/log's start. */
static int cc_wait(pid_t pid, const char *dir, const char *log, tth_diag *diag)
{
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    char text[1024] = "", path[2048];
    snprintf(path, sizeof path, "%s/%s", dir, log);
    FILE *lf = fopen(path, "r");
    if (lf) {
        size_t n = fread(text, 1, sizeof text - 1, lf);
        text[n] = 0;
        fclose(lf);
    }
    int rc;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
        rc = tth_diag_set(diag, TTH_EIO, "build", "the C compiler '%s' was not found", TTH_CC);
    else
        rc = tth_diag_set(diag, TTH_EPLUGIN, "build", "the C compiler failed on the generated code: %s", text);
    tth_diag_hint(diag, "set build_shared to false to get the sources without a host library");
    return rc;
}

/* The sources being compiled: each thread of cc_compile_all takes the next until none is left, so
 * a compiler starts as soon as another finishes. */
typedef struct cc_queue {
    pthread_mutex_t lock;
    const char *dir;
    char *const *sources;
    size_t n, next;
    const tth_host *store;       /* a host with a store of compiled code, or NULL */
    const uint8_t (*keys)[16];   /* each source's key in it */
    int rc;           /* the first failure's code; its diagnostic in diag */
    tth_diag diag;
} cc_queue;

/* The C is already tiled and unrolled by tth's lowering: -O1 compiles it in three quarters of
 * -O2's time and the code runs as fast (docs/artifact.md, "The host library"). */
#define CC_OPT "-O1"
static const char *const cc_flags[] = {"-std=c99", CC_OPT, "-fPIC", "-pthread", "-c"};

/* One file of the build (its name, length and bytes; a missing one as such) into h. */
static void key_file(XXH3_state_t *h, const char *dir, const char *name)
{
    char path[2048];
    uint8_t *data = NULL;
    size_t len = 0;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    XXH3_128bits_update(h, name, strlen(name) + 1);
    uint64_t len64 = (data = tth_file_read(path, &len)) != NULL ? (uint64_t)len : UINT64_MAX;
    XXH3_128bits_update(h, &len64, sizeof len64);
    if (data)
        XXH3_128bits_update(h, data, len);
    free(data);
}

/* The key of a source's object in the store: the compiler (path, size, modification time: an
 * upgrade changes them), the flags, the source and every header beside it (which it may
 * include). 0, or -1 (out of memory: then the store is not used). */
static int object_key(const char *dir, const char *source, char *const *headers, size_t nheaders, uint8_t key[16])
{
    XXH3_state_t *h = XXH3_createState();
    if (!h)
        return -1;
    XXH3_128bits_reset(h);
    static const char tag[] = "tth build: a C source's object, 1";
    XXH3_128bits_update(h, tag, sizeof tag);
    struct stat st;
    char cc_id[1200];
    int n = stat(TTH_CC, &st) == 0 ? snprintf(cc_id, sizeof cc_id, "%s %lld %lld.%09ld", TTH_CC, (long long)st.st_size,
                                              (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec)
                                   : snprintf(cc_id, sizeof cc_id, "%s", TTH_CC);
    XXH3_128bits_update(h, cc_id, (size_t)n + 1);
    for (size_t i = 0; i < sizeof cc_flags / sizeof *cc_flags; i++)
        XXH3_128bits_update(h, cc_flags[i], strlen(cc_flags[i]) + 1);
    key_file(h, dir, source);
    for (size_t i = 0; i < nheaders; i++)
        key_file(h, dir, headers[i]);
    XXH128_canonicalFromHash((XXH128_canonical_t *)key, XXH3_128bits_digest(h));
    XXH3_freeState(h);
    return 0;
}

static void *cc_worker(void *arg)
{
    cc_queue *q = arg;
    for (;;) {
        pthread_mutex_lock(&q->lock);
        size_t i = q->next < q->n ? q->next++ : q->n;
        pthread_mutex_unlock(&q->lock);
        if (i == q->n)
            return NULL;
        char obj[1100], log[1100];
        snprintf(obj, sizeof obj, "%s.o", q->sources[i]);
        snprintf(log, sizeof log, "%s.log", q->sources[i]);
        void *kept = NULL;
        size_t kept_len = 0;
        if (q->store && q->store->store_get(q->store->ctx, q->keys[i], &kept, &kept_len)) {
            int ok = write_file(q->dir, obj, kept, kept_len) == 0;
            free(kept);
            if (ok)
                continue; /* built before from the same input */
        }
        char *argv[] = {(char *)TTH_CC, (char *)cc_flags[0], (char *)cc_flags[1], (char *)cc_flags[2],
                        (char *)cc_flags[3], (char *)cc_flags[4], q->sources[i], "-o", obj, NULL};
        tth_diag mine;
        tth_diag_clear(&mine);
        pid_t pid = cc_start(q->dir, argv, log);
        int rc = pid < 0 ? cc_not_started(&mine) : cc_wait(pid, q->dir, log, &mine);
        if (rc == 0 && q->store) {
            char path[2048];
            uint8_t *built = NULL;
            size_t built_len = 0;
            snprintf(path, sizeof path, "%s/%s", q->dir, obj);
            if ((built = tth_file_read(path, &built_len)) != NULL)
                q->store->store_put(q->store->ctx, q->keys[i], built, built_len);
            free(built);
        }
        pthread_mutex_lock(&q->lock);
        if (rc && !q->rc) {
            q->rc = rc;
            q->diag = mine;
        }
        pthread_mutex_unlock(&q->lock);
    }
}

/* Compile each of the n sources to <source>.o in dir, as many at a time as the machine has CPUs,
 * each compiler started as soon as one finishes. The first failure's diagnostic; the others are
 * still waited for. */
static int cc_compile_all(const char *dir, char *const *sources, size_t n, const tth_host *store,
                          const uint8_t (*keys)[16], tth_diag *diag)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    size_t width = cpus < 1 ? 1 : (size_t)cpus;
    pthread_t threads[64];
    if (width > sizeof threads / sizeof threads[0])
        width = sizeof threads / sizeof threads[0];
    if (width > n)
        width = n;
    cc_queue q = {.lock = PTHREAD_MUTEX_INITIALIZER, .dir = dir, .sources = sources, .n = n, .store = store,
                  .keys = keys};
    size_t started = 0;
    for (; started < width; started++)
        if (pthread_create(&threads[started], NULL, cc_worker, &q) != 0)
            break;
    if (started == 0)
        cc_worker(&q); /* no thread: one at a time on this one */
    for (size_t i = 0; i < started; i++)
        pthread_join(threads[i], NULL);
    pthread_mutex_destroy(&q.lock);
    if (q.rc)
        *diag = q.diag;
    return q.rc;
}

/* Whether the module links objects (TTH_FILE_LINK_OBJECT) in place of its C source `name` (its
 * meta's "link_replaces": docs/plugin-guide.md, "Objects in place of sources"). */
static int replaced(const tth_runtime_module *mod, const char *name)
{
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(tth_runtime_module_meta(mod), "link_replaces"), i, r)
        if (json_is_string(r) && strcmp(json_string_value(r), name) == 0)
            return 1;
    return 0;
}

int tth_build_shared(tth_runtime_module *const *mods, size_t nmods, const char *scratch_dir, const tth_host *host,
                     uint8_t **so, size_t *so_len, tth_diag *diag)
{
    const tth_host *store = TTH_HOST_HAS_STORE(host) ? host : NULL;
    *so = NULL;
    *so_len = 0;
    const char *tmp = getenv("TMPDIR");
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tth-build-XXXXXX",
             scratch_dir && *scratch_dir ? scratch_dir : (tmp && *tmp ? tmp : "/tmp"));
    if (!mkdtemp(dir))
        return tth_diag_set(diag, TTH_EIO, "build", "cannot create a build directory in '%s': %s",
                            scratch_dir && *scratch_dir ? scratch_dir : "/tmp", strerror(errno));
    size_t nfiles = 0;
    for (size_t m = 0; m < nmods; m++)
        nfiles += tth_runtime_module_count(mods[m]);
    char **files = calloc(nfiles + 1, sizeof *files);
    char **headers = calloc(nfiles + 1, sizeof *headers); /* those of files that are headers */
    size_t nheaders = 0;
    char **argv = calloc(nfiles + 16, sizeof *argv);
    char *is_src = calloc(nfiles + 16, 1); /* argv[i] is a C source */
    size_t nf = 0, na = 0;
    int rc = 0;
    if (!files || !headers || !argv || !is_src) {
        rc = tth_diag_set(diag, TTH_ENOMEM, "build", "out of memory");
        goto done;
    }
    argv[na++] = (char *)TTH_CC;
    argv[na++] = "-std=c99";
    argv[na++] = CC_OPT;
    argv[na++] = "-fPIC";
    argv[na++] = "-shared";
    argv[na++] = "-pthread"; /* the llvm kind's thread pool (docs/threads.md) */
    argv[na++] = "-o";
    argv[na++] = "lib.so";
    size_t nfixed = na;
    for (size_t m = 0; m < nmods; m++) {
        for (size_t i = 0; i < tth_runtime_module_count(mods[m]); i++) {
            const tth_module_file *f = tth_runtime_module_file(mods[m], i);
            if (f->kind != TTH_FILE_C_SOURCE && f->kind != TTH_FILE_OBJECT && f->kind != TTH_FILE_C_HEADER &&
                f->kind != TTH_FILE_LINK_OBJECT)
                continue;
            if (f->kind == TTH_FILE_C_SOURCE && replaced(mods[m], f->name))
                continue; /* linked from the module's objects instead */
            if (strchr(f->name, '/') || f->name[0] == '.') {
                rc = tth_diag_set(diag, TTH_EINVAL, "build", "module file name '%s' is not a "
                                  "plain file name", f->name);
                goto done;
            }
            /* a file several modules carry alike (package.c keeps it once) is built once */
            int again = 0;
            for (size_t p = 0; p < m && !again; p++)
                for (size_t q = 0; q < tth_runtime_module_count(mods[p]) && !again; q++) {
                    const tth_module_file *g = tth_runtime_module_file(mods[p], q);
                    again = strcmp(g->name, f->name) == 0 && g->kind == f->kind && g->len == f->len &&
                            memcmp(g->data, f->data, f->len) == 0;
                }
            if (again)
                continue;
            if (write_file(dir, f->name, f->data, f->len) != 0) {
                rc = tth_diag_set(diag, TTH_EIO, "build", "cannot write '%s/%s': %s", dir, f->name,
                                  strerror(errno));
                goto done;
            }
            files[nf++] = strdup(f->name);
            if (f->kind == TTH_FILE_C_HEADER)
                headers[nheaders++] = files[nf - 1];
            /* headers sit next to the sources, which include them by name */
            if (f->kind != TTH_FILE_C_HEADER)
                argv[na++] = files[nf - 1];
            if (f->kind == TTH_FILE_C_SOURCE)
                is_src[na - 1] = 1;
        }
    }
    if (na == nfixed) {
        rc = tth_diag_set(diag, TTH_EINVAL, "build", "no C sources or objects to build a shared "
                          "library from");
        goto done;
    }
    argv[na++] = "-lm";
    argv[na] = NULL;

    char **srcs = calloc(na + 1, sizeof *srcs), **objs = calloc(na + 8, sizeof *objs);
    char *owned = calloc(na + 8, 1); /* objs[i] was malloc'd here */
    size_t nsrc = 0;
    if (!srcs || !objs || !owned) {
        free(srcs);
        free(objs);
        free(owned);
        rc = tth_diag_set(diag, TTH_ENOMEM, "build", "out of memory");
        goto done;
    }
    for (size_t i = nfixed; i < na; i++)
        if (is_src[i])
            srcs[nsrc++] = argv[i];
    /* two sources or more, or one whose object the store may have: each compiled on a CPU of
     * its own (or taken from the store), then one link */
    uint8_t (*keys)[16] = store && nsrc ? calloc(nsrc, sizeof *keys) : NULL;
    for (size_t i = 0; keys && i < nsrc; i++)
        if (object_key(dir, srcs[i], headers, nheaders, keys[i]) != 0) {
            free(keys);
            keys = NULL;
        }
    if (nsrc >= 2 || keys) {
        rc = cc_compile_all(dir, srcs, nsrc, keys ? store : NULL, (const uint8_t(*)[16])keys, diag);
        size_t nl = 0;
        char *link[] = {(char *)TTH_CC, "-shared", "-pthread", "-o", "lib.so"};
        for (size_t i = 0; i < sizeof link / sizeof link[0]; i++)
            objs[nl++] = link[i];
        for (size_t i = nfixed; !rc && i < na; i++) {
            size_t len = strlen(argv[i]);
            if (is_src[i]) {
                objs[nl] = malloc(len + 3);
                if (!objs[nl]) {
                    rc = tth_diag_set(diag, TTH_ENOMEM, "build", "out of memory");
                    break;
                }
                owned[nl] = 1;
                snprintf(objs[nl++], len + 3, "%s.o", argv[i]);
            } else {
                objs[nl++] = argv[i];
            }
        }
        objs[nl] = NULL;
        pid_t pid = rc ? -1 : cc_start(dir, objs, "cc.log");
        if (!rc && pid < 0)
            rc = cc_not_started(diag);
        if (!rc)
            rc = cc_wait(pid, dir, "cc.log", diag);
        for (size_t i = 0; i < nl; i++)
            if (owned[i])
                free(objs[i]);
    } else {
        pid_t pid = cc_start(dir, argv, "cc.log");
        if (pid < 0)
            rc = cc_not_started(diag);
        else
            rc = cc_wait(pid, dir, "cc.log", diag);
    }
    free(srcs);
    free(objs);
    free(owned);
    free(keys);
    if (rc)
        goto done;
    char path[2048];
    snprintf(path, sizeof path, "%s/lib.so", dir);
    if (!(*so = tth_file_read(path, so_len)))
        rc = tth_diag_set(diag, TTH_EIO, "build", "cannot read the built library '%s'", path);
done:
    remove_tree(dir, files, nf);
    for (size_t i = 0; i < nf; i++)
        free(files[i]);
    free(files);
    free(headers);
    free(argv);
    free(is_src);
    return rc;
}
