/* worker.c: tth-worker, the process that runs plugin code for tthd.
 *
 * It loads the plugins directory, tells the daemon what it found (worker/ready), then answers
 * one request at a time on its standard input/output with the protocol's framing
 * (PROTOCOL.md section 10). Before each plugin hook it announces the plugin and hook
 * (hook/enter), so that if the hook crashes, hangs or exhausts memory the daemon can name it.
 * Plugin output on stdout is redirected to stderr so it cannot corrupt the pipe. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <malloc.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <tth/diag.h>
#include <tth/registry.h>
#include <tth/target.h>
#include <tthproto/jsonrpc.h>

#include "entry_file.h"
#include "tth_config.h"
#include "trap.h"

#ifndef TTH_NO_COMPILE_FLOW
#include "code_store.h"
#include "compile.h"
#endif

#if defined(__SANITIZE_ADDRESS__)
#define TTHW_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TTHW_ASAN 1
#endif
#endif

/* The worker's whole state: one process, one request at a time. */
typedef struct tthw_state {
    int in_fd, out_fd;          /* pipe from / to the daemon */
    tthp_fd_reader reader;
    tth_registry *real;         /* the loaded plugins */
    tth_registry *shadow;       /* the same with trampolines around every hook */
    json_t *logs;               /* diagnostics the current request's hooks logged */
    json_t *hook_times;         /* {"plugin hook": {"plugin", "hook", "calls", "seconds"}} of it */
    struct timespec hook_start; /* when the running hook was entered */
    const char *hook_plugin, *hook_name;
    int verbose;
    const char **skip;          /* --skip-plugin: files tthd leaves out (their loading crashed a worker) */
    int nskip;
#ifndef TTH_NO_COMPILE_FLOW
    tth_code_store *store;      /* compiled code kept between compiles (--code-store), or NULL */
#endif
} tthw_state;

static tthw_state W;
static volatile sig_atomic_t cancel_flag;

static void on_sigusr1(int sig)
{
    (void)sig;
    cancel_flag = 1;
}

static void send_msg(json_t *msg_new)
{
    if (msg_new)
        tthp_write_message_fd(W.out_fd, msg_new);
    json_decref(msg_new);
}

/* Before each plugin file is loaded: one tthd left out is refused; any other is named to tthd
 * (plugin/loading), so that when loading it crashes this process tthd knows which file did it
 * (docs/plugin-guide.md, "A plugin that crashes as it loads"). path NULL: the loading is over. */
static int on_plugin_load(void *ctx, const char *path, tth_diag *diag)
{
    (void)ctx;
    for (int i = 0; path && i < W.nskip; i++)
        if (strcmp(W.skip[i], path) == 0) {
            tth_diag_set(diag, TTH_EPLUGIN, path, "left out: loading it crashed or stalled a tth-worker; tthd tries "
                                                  "it again when the plugins directory changes");
            tth_diag_hint(diag, "fix the plugin (a constructor of it or of a library it needs crashes or never "
                                "returns as it is loaded) or remove it from the plugins directory");
            return 1;
        }
    send_msg(tthp_notification_new("plugin/loading", json_pack("{s:s?}", "path", path)));
    return 0;
}

/* Trampoline callback: tell the daemon which hook runs now. */
/* the time between a hook's enter and leave, summed per plugin and hook for the request's
 * timings (docs/tthctl.md, --timings) */
static void time_hook(const tth_plugin *p, const char *hook)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (hook) {
        W.hook_start = now;
        W.hook_plugin = p->desc->plugin_name;
        W.hook_name = hook;
        return;
    }
    if (!W.hook_times || !W.hook_name)
        return;
    double sec = (double)(now.tv_sec - W.hook_start.tv_sec) + (now.tv_nsec - W.hook_start.tv_nsec) / 1e9;
    char key[256];
    snprintf(key, sizeof key, "%s %s", W.hook_plugin, W.hook_name);
    json_t *e = json_object_get(W.hook_times, key);
    if (!e) {
        e = json_pack("{s:s, s:s, s:i, s:f}", "plugin", W.hook_plugin, "hook", W.hook_name, "calls", 0, "seconds", 0.0);
        if (!e || json_object_set_new(W.hook_times, key, e) != 0)
            return;
    }
    json_object_set_new(e, "calls", json_integer(json_integer_value(json_object_get(e, "calls")) + 1));
    json_object_set_new(e, "seconds", json_real(json_real_value(json_object_get(e, "seconds")) + sec));
    W.hook_name = NULL;
}

static void on_hook(const tth_plugin *p, const char *hook)
{
    time_hook(p, hook);
    if (hook)
        send_msg(tthp_notification_new("hook/enter",
                                       json_pack("{s:s, s:s, s:s}", "plugin", p->desc->plugin_name,
                                                 "kind", p->desc->kind, "hook", hook)));
    else
        send_msg(tthp_notification_new("hook/leave", json_object()));
}

static void host_log(void *ctx, int level, const char *msg)
{
    (void)ctx;
    if (W.logs && json_array_size(W.logs) < 256)
        json_array_append_new(W.logs, tthp_diagnostic_new("OK", level, msg, "", ""));
}

static int host_cancelled(void *ctx)
{
    (void)ctx;
    return cancel_flag != 0;
}

static json_t *diag_json(const tth_diag *d)
{
    return tthp_diagnostic_new(tth_error_name(d->code), d->severity ? d->severity : TTH_SEV_ERROR,
                               d->message, d->location, d->hint);
}

static void send_error(const json_t *id, const tth_diag *d)
{
    json_t *diags = json_array();
    json_array_append_new(diags, diag_json(d));
    send_msg(tthp_answer_or_internal(tthp_error_new(id, TTHP_CODE_FROM_TTH(d->code), d->message,
                                                    json_pack("{s:s, s:o}", "tthCode", tth_error_name(d->code),
                                                              "diagnostics", diags)),
                                     id));
}

/* The compiler's own identity (docs/cache.md, "The key"): the XXH64 of this worker's executable
 * and of the libtth it runs. tthd keys artifacts by it beside the plugins' identities, so a
 * rebuilt or upgraded compiler (a new lowering, a new pass) never serves the old one's artifacts. */
static char compiler_id[96];

/* a file's XXH64, or 0 when it cannot be read */
static uint64_t file_xxh64(const char *path)
{
    uint64_t h = 0;
    return path && tth_file_xxh64(path, &h) == 0 ? h : 0;
}

static void init_compiler_id(void)
{
    Dl_info di;
    const char *lib = dladdr((void *)tth_target_parse, &di) && di.dli_fname ? di.dli_fname : NULL;
    snprintf(compiler_id, sizeof compiler_id, "tth-worker#%016llx libtth#%016llx",
             (unsigned long long)file_xxh64("/proc/self/exe"), (unsigned long long)file_xxh64(lib));
}

/* Every kind a canonical target uses: itself, composite members, the host. */
static void collect_kinds(const json_t *t, json_t *out)
{
    if (!json_is_object(t))
        return;
    const char *kind = json_string_value(json_object_get(t, "kind"));
    if (kind && strcmp(kind, "composite") != 0) {
        int seen = 0;
        size_t i;
        json_t *v;
        json_array_foreach(out, i, v)
            seen |= strcmp(json_string_value(json_object_get(v, "kind")), kind) == 0;
        if (!seen) {
            const tth_plugin *p = tth_registry_find_kind(W.real, kind);
            json_array_append_new(out, json_pack("{s:s, s:s, s:s}", "kind", kind, "plugin",
                                                 p ? p->desc->plugin_name : "", "identity",
                                                 p ? p->identity : ""));
        }
    }
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(t, "targets"), i, v)
        collect_kinds(v, out);
    collect_kinds(json_object_get(t, "host"), out);
}

static void handle_target_parse(const json_t *id, const json_t *params, const tth_host *host)
{
    tth_diag d;
    tth_diag_clear(&d);
    const json_t *target = json_object_get(params, "target");
    json_t *canon = json_is_string(target)
                        ? tth_target_parse(W.shadow, host, json_string_value(target), &d)
                        : tth_target_from_json(W.shadow, host, target, &d);
    if (!canon) {
        if (d.code == TTH_OK)
            tth_diag_set(&d, TTH_EINTERNAL, NULL, "the target parser failed without a diagnostic");
        size_t refused = tth_registry_error_count(W.real);
        if (d.code == TTH_EUNKNOWN && refused) {
            /* the kind may be one a refused or left-out file would have brought */
            char was[TTH_DIAG_HINT_MAX];
            snprintf(was, sizeof was, "%s", d.hint);
            tth_diag_hint(&d, "%s%s%zu plugin file%s of the plugins path %s refused ('tthctl plugins' says why)", was,
                          was[0] ? "; " : "", refused, refused == 1 ? "" : "s", refused == 1 ? "was" : "were");
        }
        send_error(id, &d);
        return;
    }
    char *str = tth_target_to_string(canon);
    char *text = tth_target_to_json_text(canon);
    json_t *kinds = json_array();
    collect_kinds(canon, kinds);
    json_t *keys = json_object_get(canon, "keys");
    json_t *res = json_pack("{s:O, s:s, s:s, s:o, s:o, s:s, s:O}", "target", canon, "string", str ? str : "",
                            "json", text ? text : "", "keys", keys ? json_incref(keys) : json_array(), "kinds", kinds,
                            "compiler", compiler_id, "diagnostics", W.logs);
    free(str);
    free(text);
    json_decref(canon);
    send_msg(tthp_answer_or_internal(tthp_result_new(id, res), id));
}

#ifndef TTH_NO_COMPILE_FLOW
static void on_progress(void *ctx, const char *stage, int percent)
{
    const json_t *id = ctx;
    send_msg(tthp_notification_new("$/progress", json_pack("{s:O, s:s, s:s, s:i}", "id", id, "kind",
                                                           "report", "stage", stage ? stage : "",
                                                           "percentage", percent)));
}
#endif

/* The model named by path ("model_path": the client's file, or the upload tthd wrote): mapped
 * here, so its bytes never pass through the daemon nor take the worker's memory twice (the
 * importer reads the protobuf from the mapping). It must still have size bytes; *digest_hex says
 * which bytes were compiled (the file may have changed since tthd took its digest). The mapping
 * (munmap it, size bytes), or NULL with d set. */
static uint8_t *map_model_path(const char *path, size_t size, char digest_hex[33], tth_diag *d)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        tth_diag_set(d, TTH_EIO, "model", "cannot read the model file %s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    if ((uint64_t)st.st_size != size) {
        close(fd);
        tth_diag_set(d, TTH_EINVAL, "model", "the model file %s changed while tthd compiled it (%lld bytes, not %zu)",
                     path, (long long)st.st_size, size);
        tth_diag_hint(d, "compile again once the file is written");
        return NULL;
    }
    void *model = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (model == MAP_FAILED) {
        tth_diag_set(d, TTH_EIO, "model", "cannot map the model file %s: %s", path, strerror(errno));
        return NULL;
    }
    uint8_t digest[16];
    tthd_model_digest(model, size, digest);
    tthd_digest_hex(digest, digest_hex);
    return model;
}

#ifndef TTH_NO_COMPILE_FLOW
/* Ask the daemon for room in its cache directory before writing an entry file of size bytes
 * (request "cache/room"; it evicts older entries first, docs/cache.md "The bound"). 1 when
 * granted; 0 when refused or unanswered, and then the artifact is streamed. */
static int room_for_entry(size_t size)
{
    if (!size)
        return 0;
    /* the worker's own requests are numbered apart from the daemon's; this is the only one */
    json_t *id = json_integer(1);
    send_msg(tthp_request_new(1, "cache/room", json_pack("{s:I}", "size", (json_int_t)size)));
    int granted = 0;
    for (;;) {
        tthp_frame f;
        if (tthp_fd_read_frame(&W.reader, &f, 10000) != 1 || f.type != TTHP_FRAME_JSON)
            break;
        tthp_message m;
        int ok = tthp_message_parse(f.data, f.len, &m) == 0;
        int mine = ok && m.kind == TTHP_MSG_RESPONSE && json_equal(m.id, id);
        if (mine)
            granted = json_is_true(json_object_get(m.result, "granted"));
        if (ok)
            tthp_message_clear(&m);
        if (mine || !ok)
            break;
    }
    json_decref(id);
    return granted;
}

/* The artifact written as a cache entry file in dir (params "entry_dir", docs/cache.md): a new
 * temporary file there, which the daemon renames into place. The answer's "entry", or NULL when
 * it could not be written (then the artifact is streamed). */
static json_t *write_entry(const char *dir, const json_t *metadata, const uint8_t *art, size_t len)
{
    if (!room_for_entry(tthd_entry_size(metadata, len)))
        return NULL;
    char path[4096]; /* mkostemp(3)'s template: it replaces the six X with the file's name */
    if ((size_t)snprintf(path, sizeof path, "%s/.tmp-w%d-XXXXXX", dir, (int)getpid()) >= sizeof path)
        return NULL;
    int fd = mkostemp(path, O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "tth-worker[%d]: cannot create a file in %s (%s); streaming the artifact\n", (int)getpid(),
                dir, strerror(errno));
        return NULL;
    }
    uint64_t off = 0, size = 0, sum = 0;
    int rc = tthd_entry_write(fd, metadata, art, len, &off, &size, &sum);
    if (close(fd) != 0 && rc == 0)
        rc = -errno;
    if (rc != 0) {
        fprintf(stderr, "tth-worker[%d]: cannot write %s (%s); streaming the artifact\n", (int)getpid(), path,
                strerror(-rc));
        unlink(path);
        return NULL;
    }
    char hex[17];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)sum);
    json_t *e = json_pack("{s:s, s:I, s:I, s:I, s:s}", "path", path, "size", (json_int_t)size, "artifact_offset",
                          (json_int_t)off, "artifact_size", (json_int_t)len, "xxh64", hex);
    if (!e)
        unlink(path);
    return e;
}

static int host_store_get(void *ctx, const uint8_t key[16], void **data, size_t *len)
{
    (void)ctx;
    return tth_code_store_get(W.store, key, data, len);
}

static void host_store_put(void *ctx, const uint8_t key[16], const void *data, size_t len)
{
    (void)ctx;
    tth_code_store_put(W.store, key, data, len);
}

/* the store of a no_cache compile: never has anything */
static int no_store_get(void *ctx, const uint8_t key[16], void **data, size_t *len)
{
    (void)ctx;
    (void)key;
    *data = NULL;
    *len = 0;
    return 0;
}
#endif

/* The worker's peak resident memory is measured per compile: Linux's VmHWM (/proc/self/status),
 * set back to the current RSS by writing 5 to /proc/self/clear_refs before each compile. */
static void peak_rss_reset(void)
{
    int fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
        if (write(fd, "5", 1) != 1)
            (void)0; /* an older kernel: the peak is then the worker's whole life's */
        close(fd);
    }
}

/* VmHWM in bytes, or -1 */
static long long peak_rss(void)
{
    FILE *f = fopen("/proc/self/status", "re");
    char line[256];
    long long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %lld kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb < 0 ? -1 : kb * 1024;
}

/* Returns -1 when the pipe is no longer usable. */
static int handle_compile(const json_t *id, const json_t *params, const tth_host *host)
{
    json_int_t size = json_integer_value(json_object_get(params, "model_size"));
    if (size <= 0)
        return -1;
    tth_diag d;
    tth_diag_clear(&d);
    const char *model_path = json_string_value(json_object_get(params, "model_path"));
    char digest_hex[33] = "";
    peak_rss_reset();
    uint8_t *model;
    if (!model_path) /* tthd writes an upload to a file first: a model always comes by path */
        return -1;
    model = map_model_path(model_path, (size_t)size, digest_hex, &d);
    if (!model) {
        send_error(id, &d);
        return 0;
    }
#ifdef TTH_NO_COMPILE_FLOW
    tth_diag_set(&d, TTH_EUNSUPPORTED, "compile", "this build has no compile flow");
    tth_diag_hint(&d, "rebuild tth with daemon/compile/pipeline.c present");
    send_error(id, &d);
    (void)host;
#else
    /* no_cache compiles everything afresh: no code from the store either (what it compiles is
     * kept) */
    tth_host mine = *host;
    if (json_is_true(json_object_get(json_object_get(params, "options"), "no_cache")))
        mine.store_get = no_store_get;
    tth_compile_request req = {
        .model = model,
        .model_len = (size_t)size,
        .model_name = json_string_value(json_object_get(params, "model_name")),
        .target = json_object_get(params, "target"),
        .options = json_object_get(params, "options"),
        .registry = W.shadow,
        .host = &mine,
        .progress = on_progress,
        .progress_ctx = (void *)id,
        .model_dir = json_string_value(json_object_get(params, "model_dir")),
        .model_mapped = 1,
    };
    tth_compile_result res = {0};
    int rc = tth_compile(&req, &res, &d);
    if (rc != 0) {
        if (d.code == TTH_OK)
            tth_diag_set(&d, rc, NULL, "compile failed: %s", tth_strerror(rc));
        send_error(id, &d);
    } else {
        const char *entry_dir = json_string_value(json_object_get(params, "entry_dir"));
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        json_t *entry = entry_dir ? write_entry(entry_dir, res.metadata, res.artifact, res.artifact_len) : NULL;
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if (entry && res.timings) /* the cache entry's file is a stage of this compile too */
            json_array_append_new(res.timings,
                                  json_pack("{s:s, s:f}", "stage", "store", "seconds",
                                            (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9));
        size_t off = 0;
        int wrc = 0;
        while (!entry && wrc == 0) {
            size_t n = res.artifact_len - off < TTHP_CHUNK_BYTES ? res.artifact_len - off : TTHP_CHUNK_BYTES;
            wrc = tthp_write_chunk_fd(W.out_fd, id, "artifact", off, res.artifact + off, n, res.artifact_len);
            off += n;
            if (off >= res.artifact_len)
                break;
        }
        json_t *kinds = json_array();
        collect_kinds(req.target, kinds);
        json_t *hooks = json_array();
        const char *k;
        json_t *v;
        json_object_foreach(W.hook_times, k, v)
            json_array_append(hooks, v);
        json_t *stages = res.timings ? json_incref(res.timings) : json_array();
        if (wrc == 0) {
            json_t *answer = json_pack("{s:o, s:s, s:O, s:O, s:O, s:{s:o, s:o}}", "kinds", kinds, "compiler", compiler_id, "metadata",
                                       res.metadata ? res.metadata : json_null(), "dumps",
                                       res.dumps ? res.dumps : json_null(), "diagnostics", W.logs, "timings",
                                       "stages", stages, "hooks", hooks);
            if (answer && entry)
                json_object_set_new(answer, "entry", json_incref(entry));
            if (answer && res.code_reused + res.code_compiled > 0)
                json_object_set_new(json_object_get(answer, "timings"), "code",
                                    json_pack("{s:i, s:i}", "reused", (int)res.code_reused, "compiled",
                                              (int)res.code_compiled));
            if (answer && digest_hex[0])
                json_object_set_new(answer, "model_digest", json_string(digest_hex));
            long long peak = peak_rss();
            if (answer && peak > 0) /* the model mapped, the artifact built and written: the whole compile */
                json_object_set_new(json_object_get(answer, "timings"), "workerPeakRss", json_integer(peak));
            send_msg(tthp_answer_or_internal(tthp_result_new(id, answer), id));
        } else {
            json_decref(kinds);
            json_decref(stages);
            json_decref(hooks);
        }
        json_decref(entry);
        tth_compile_result_free(&res);
    }
#endif
    munmap(model, (size_t)size);
    return 0;
}


static int serve(void)
{
    char scratch[] = "/tmp/tth-worker-XXXXXX";
    const char *scratch_dir = mkdtemp(scratch);
    tth_host host = {
        .size = sizeof(tth_host),
        .abi_major = TTH_ABI_MAJOR,
        .abi_minor = TTH_ABI_MINOR,
        .ctx = NULL,
        .log = host_log,
        .cancelled = host_cancelled,
        .scratch_dir = scratch_dir ? scratch_dir : "/tmp",
    };
#ifndef TTH_NO_COMPILE_FLOW
    if (W.store) {
        host.store_get = host_store_get;
        host.store_put = host_store_put;
    }
#endif
    int rc = 0;
    for (;;) {
        tthp_frame f;
        int r = tthp_fd_read_frame(&W.reader, &f, -1);
        if (r == 0)
            break; /* the daemon closed the pipe: exit quietly */
        if (r < 0 || f.type != TTHP_FRAME_JSON) {
            fprintf(stderr, "tth-worker[%d]: bad frame from the daemon, exiting\n", (int)getpid());
            rc = 1;
            break;
        }
        tthp_message m;
        if (tthp_message_parse(f.data, f.len, &m) != 0 || m.kind != TTHP_MSG_REQUEST) {
            tthp_message_clear(&m);
            continue;
        }
        cancel_flag = 0;
        W.logs = json_array();
        W.hook_times = json_object();
        W.hook_name = NULL;
        int stop = 0;
        if (strcmp(m.method, "target/parse") == 0) {
            handle_target_parse(m.id, m.params, &host);
        } else if (strcmp(m.method, "compile") == 0) {
            stop = handle_compile(m.id, m.params, &host) != 0;
        } else if (strcmp(m.method, "describe") == 0) {
            send_msg(tthp_answer_or_internal(tthp_result_new(m.id, tth_registry_describe(W.real)), m.id));
        } else {
            send_msg(tthp_answer_or_internal(tthp_error_new(m.id, TTHP_METHOD_NOT_FOUND, "unknown worker method", NULL), m.id));
        }
        json_decref(W.logs);
        W.logs = NULL;
        json_decref(W.hook_times);
        W.hook_times = NULL;
        tthp_message_clear(&m);
        if (stop) {
            fprintf(stderr, "tth-worker[%d]: malformed compile request from the daemon (no model_size or model_path), exiting\n", (int)getpid());
            rc = 1;
            break;
        }
    }
    if (scratch_dir) {
        char cmd[64];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", scratch_dir);
        if (system(cmd) != 0)
            fprintf(stderr, "tth-worker: could not remove %s\n", scratch_dir);
    }
    return rc;
}

static void usage(FILE *out)
{
    fprintf(out, "usage: tth-worker --plugins-dir DIR[:DIR...] [--memory-limit BYTES] [--code-store DIR]\n"
                 "                  [--code-store-max-bytes N] [--daemon-pid PID] [--skip-plugin PATH]...\n"
                 "                  [--verbose]\n"
                 "Runs plugin code for tthd; started by tthd, talks framed JSON-RPC on stdin/stdout.\n");
}

int main(int argc, char **argv)
{
    /* a block of 1 MiB or more (a model's weights, the artifact) is its own mapping, given back
     * to the system when freed: glibc would otherwise raise this threshold as such blocks are
     * freed, and later weights would come from the heap, which keeps what it grew to */
    mallopt(M_MMAP_THRESHOLD, 1 << 20);
    const char *plugins_dir = NULL, *code_store = NULL;
    unsigned long long mem_limit = 0, code_store_max = 256ull << 20;
    long daemon_pid = 0;
    static const struct option opts[] = {
        {"plugins-dir", required_argument, NULL, 'p'},
        {"memory-limit", required_argument, NULL, 'm'},
        {"code-store", required_argument, NULL, 's'},
        {"code-store-max-bytes", required_argument, NULL, 'S'},
        {"daemon-pid", required_argument, NULL, 'D'},
        {"skip-plugin", required_argument, NULL, 'k'},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    /* the --skip-plugin values point into argv: at most one per argument */
    if (!(W.skip = calloc((size_t)argc, sizeof *W.skip)))
        return 1;
    int c;
    while ((c = getopt_long(argc, argv, "p:m:vh", opts, NULL)) != -1) {
        switch (c) {
        case 'p': plugins_dir = optarg; break;
        case 'm': mem_limit = strtoull(optarg, NULL, 10); break;
        case 's': code_store = optarg; break;
        case 'S': code_store_max = strtoull(optarg, NULL, 10); break;
        case 'D': daemon_pid = strtol(optarg, NULL, 10); break;
        case 'k': W.skip[W.nskip++] = optarg; break;
        case 'v': W.verbose = 1; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (!plugins_dir) {
        usage(stderr);
        return 2;
    }
    /* die with the daemon (daemon/README.md): SIGKILL when the thread that started us
     * ends, and at once when it ended before this line (we were reparented already) */
    if (daemon_pid > 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if ((long)getppid() != daemon_pid)
            return 1;
    }
    /* no core files from crashing plugins; the address-space limit is the memory limit
     * (sanitizer builds reserve terabytes of shadow memory, so there the daemon watches RSS) */
    struct rlimit rl = {0, 0};
    setrlimit(RLIMIT_CORE, &rl);
#ifdef TTHW_ASAN
    (void)mem_limit;
#else
    if (mem_limit) {
        rl.rlim_cur = rl.rlim_max = (rlim_t)mem_limit;
        setrlimit(RLIMIT_AS, &rl);
    }
#endif
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigusr1;
    sigaction(SIGUSR1, &sa, NULL);

    /* keep the pipes on private descriptors; plugins' stdout goes to stderr */
    W.in_fd = fcntl(0, F_DUPFD_CLOEXEC, 3);
    W.out_fd = fcntl(1, F_DUPFD_CLOEXEC, 3);
    if (W.in_fd < 0 || W.out_fd < 0) {
        perror("tth-worker: dup");
        return 1;
    }
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) {
        dup2(devnull, 0);
        close(devnull);
    }
    dup2(2, 1);
    tthp_fd_reader_init(&W.reader, W.in_fd, 0);

    tth_diag d;
    tth_diag_clear(&d);
    init_compiler_id();
    W.real = tth_registry_new();
    tth_registry_set_load_observer(W.real, on_plugin_load, NULL);
    json_t *load_errors = json_array();
    char *dirs = strdup(plugins_dir);
    if (!W.real || !load_errors || !dirs)
        return 1;
    /* the plugins path: directories separated by ':', searched in order, so a kind in an earlier
     * one shadows the same kind in a later one (the later file is refused as a duplicate) */
    char *save = NULL;
    for (char *dir = strtok_r(dirs, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
        if (tth_registry_load_dir(W.real, dir, &d) < 0) {
            json_t *e = diag_json(&d);
            if (e)
                json_object_set_new(e, "path", json_string(dir));
            json_array_append_new(load_errors, e);
        }
        tth_diag_clear(&d);
    }
    free(dirs);
    W.shadow = tthw_trap_registry(W.real, on_hook, &d);
    if (!W.shadow) {
        fprintf(stderr, "tth-worker: %s\n", d.message);
        tth_registry_free(W.real);
        free(W.skip);
        return 1;
    }
    json_t *ready = json_pack("{s:i, s:o, s:o}", "pid", (int)getpid(), "describe", tth_registry_describe(W.real),
                              "loadErrors", load_errors);
    send_msg(tthp_notification_new("worker/ready", ready));
    if (W.verbose)
        fprintf(stderr, "tth-worker[%d]: ready with %zu plugins from %s\n", (int)getpid(),
                tth_registry_count(W.real), plugins_dir);

#ifndef TTH_NO_COMPILE_FLOW
    if (code_store && !(W.store = tth_code_store_open(code_store, code_store_max)))
        fprintf(stderr, "tth-worker[%d]: cannot use %s for compiled code; compiling everything\n", (int)getpid(),
                code_store);
#else
    (void)code_store;
    (void)code_store_max;
#endif
    int rc = serve();
#ifndef TTH_NO_COMPILE_FLOW
    tth_code_store_close(W.store);
#endif
    tthp_fd_reader_free(&W.reader);
    tth_registry_free(W.shadow);
    tth_registry_free(W.real);
    free(W.skip);
    close(W.in_fd);
    close(W.out_fd);
    return rc;
}
