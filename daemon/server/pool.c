/* pool.c: the worker processes that run plugin code, and the jobs they run.
 *
 * A worker runs one job at a time. Before each plugin hook it tells us which plugin and hook it
 * enters, so when it dies (crash), overruns the job's deadline or its memory limit (we kill it),
 * the job fails with a diagnostic naming them; the worker is replaced and nothing else notices.
 * A worker is gone only once its process has exited AND its stdout reached EOF (so its last
 * words are read), or one second after the exit. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tthd.h"

enum kill_reason { KILL_NONE, KILL_TIMEOUT, KILL_MEMORY, KILL_CANCEL, KILL_PROTOCOL, KILL_SHUTDOWN, KILL_STARTUP };

/* A worker not ready within this share of the request deadline (at least TTHD_START_MIN_MS, at
 * most TTHD_START_MAX_MS) is killed as stuck while starting: a plugin's constructor that never
 * returns. The floor leaves a slow start (a sanitizer build on a busy machine) alone. */
#define TTHD_START_SHARE 0.25
#define TTHD_START_MIN_MS 10000.0
#define TTHD_START_MAX_MS 60000.0

struct tthd_worker {
    tthd_pool *pool;
    uv_process_t proc;
    uv_pipe_t to;               /* the worker's stdin */
    uv_pipe_t from;             /* the worker's stdout */
    int open_handles;           /* freed when it drops to 0 */
    int pid;
    unsigned generation;        /* plugin set it loaded */
    int ready;                  /* sent worker/ready */
    int retiring;               /* stdin closed on purpose: its exit is not a crash */
    int exited, eof, gone;
    int64_t exit_status;
    int term_signal;
    uint64_t exit_at;
    uint64_t kill_at;           /* cancelled job: SIGKILL at this time unless it answers */
    int kill_reason;
    tthp_parser parser;
    tthd_job *job;
    json_int_t job_id;          /* id of the request sent to the worker */
    int expect_binary;
    size_t expect_size;
    int in_hook;
    char plugin[128], kind[64], hook[32];
    char loading[4096];         /* the plugin file it is loading (plugin/loading), "" when none */
    uint64_t spawned_at;        /* uv_now() ms */
    tthd_worker *next;
};

/* a worker's handle finished closing; the last one frees the worker. Every handle of a worker
 * closes with it, so the worker is never freed while libuv still holds one of them. */
static void on_worker_closed(uv_handle_t *h);

static void pool_dispatch(tthd_pool *pool);
static void pool_fill(tthd_pool *pool);
static void worker_gone(tthd_worker *w);
static void pool_maybe_closed(tthd_pool *pool);
static void on_pool_timer_closed(uv_handle_t *h);

static const char *const job_methods[] = {"describe", "target/parse", "compile"};

tthd_job *tthd_job_new(tthd_job_type type, json_t *params_new)
{
    tthd_job *job = calloc(1, sizeof *job);
    if (!job) {
        json_decref(params_new);
        return NULL;
    }
    job->type = type;
    job->params = params_new ? params_new : json_object();
    return job;
}

void tthd_job_free(tthd_job *job)
{
    if (!job)
        return;
    json_decref(job->params);
    json_decref(job->result);
    json_decref(job->error);
    free(job->artifact);
    if (job->reserved)
        tthd_cache_unreserve(job->room_cache, job->reserved);
    if (job->entry_path)
        unlink(job->entry_path);
    free(job->entry_path);
    free(job);
}

/* The cache entry file a worker says it wrote: a temporary file (".tmp-w...") directly in the
 * directory the job named, nowhere else. */
static int entry_path_ok(const json_t *params, const char *path)
{
    const char *dir = json_string_value(json_object_get(params, "entry_dir"));
    size_t n = dir ? strlen(dir) : 0;
    return n && path && strncmp(path, dir, n) == 0 && strncmp(path + n, "/.tmp-w", 7) == 0 &&
           !strchr(path + n + 1, '/');
}

json_t *tthd_error_from_diag(const tth_diag *d)
{
    json_t *diags = json_array();
    json_array_append_new(diags, tthp_diagnostic_new(tth_error_name(d->code),
                                                     d->severity ? d->severity : TTH_SEV_ERROR,
                                                     d->message, d->location, d->hint));
    return json_pack("{s:i, s:s, s:{s:s, s:o}}", "code", TTHP_CODE_FROM_TTH(d->code), "message", d->message,
                     "data", "tthCode", tth_error_name(d->code), "diagnostics", diags);
}

/* ---- jobs ending ----------------------------------------------------------------------- */

static void job_finish(tthd_pool *pool, tthd_job *job)
{
    if (job->worker) {
        job->worker->job = NULL;
        job->worker->kill_at = 0;
        job->worker = NULL;
    }
    if (job->cb)
        job->cb(job);
    tthd_job_free(job);
    (void)pool;
}

static void job_fail(tthd_pool *pool, tthd_job *job, const tth_diag *d)
{
    json_decref(job->error);
    job->error = tthd_error_from_diag(d);
    json_decref(job->result);
    job->result = NULL;
    job_finish(pool, job);
}

static void job_fail_code(tthd_pool *pool, tthd_job *job, int code, const char *message)
{
    json_decref(job->error);
    job->error = json_pack("{s:i, s:s}", "code", code, "message", message);
    job_finish(pool, job);
}

/* "plugin 'x' (kind 'k'), hook h", or what the worker was doing outside plugin code. */
static void where_of(const tthd_worker *w, char *buf, size_t len)
{
    if (w->in_hook)
        snprintf(buf, len, "plugin '%s' (kind '%s'), hook %s", w->plugin, w->kind, w->hook);
    else
        snprintf(buf, len, "worker %d, outside plugin hooks", w->pid);
}

/* ---- writing to a worker --------------------------------------------------------------- */

static void on_worker_written(void *data, int status)
{
    tthd_worker *w = data;
    if (status < 0 && status != UV_ECANCELED && !w->exited)
        tthd_log(TTHD_LOG_DEBUG, "write to worker %d failed: %s", w->pid, uv_strerror(status));
}

static int worker_send(tthd_worker *w, json_t *msg_new)
{
    int rc = msg_new ? tthd_write_msg((uv_stream_t *)&w->to, msg_new, on_worker_written, w) : UV_ENOMEM;
    json_decref(msg_new);
    return rc;
}

static void worker_kill(tthd_worker *w, int reason)
{
    if (w->exited)
        return;
    if (!w->kill_reason)
        w->kill_reason = reason;
    uv_process_kill(&w->proc, SIGKILL);
}

static void worker_start_job(tthd_worker *w, tthd_job *job)
{
    static json_int_t next_id = 1;
    w->job = job;
    job->worker = w;
    job->generation = w->generation;
    w->job_id = next_id++;
    w->in_hook = 0;
    int rc = worker_send(w, tthp_request_new(w->job_id, job_methods[job->type], json_incref(job->params)));
    if (rc < 0) {
        tthd_log(TTHD_LOG_WARN, "cannot write to worker %d: %s; replacing it", w->pid, uv_strerror(rc));
        worker_kill(w, KILL_PROTOCOL);
    }
}

/* ---- reading from a worker ------------------------------------------------------------- */

static void on_worker_message(tthd_worker *w, tthp_message *m)
{
    tthd_pool *pool = w->pool;
    if (m->kind == TTHP_MSG_NOTIFICATION) {
        if (strcmp(m->method, "hook/enter") == 0) {
            w->in_hook = 1;
            snprintf(w->plugin, sizeof w->plugin, "%s", json_string_value(json_object_get(m->params, "plugin")) ?: "?");
            snprintf(w->kind, sizeof w->kind, "%s", json_string_value(json_object_get(m->params, "kind")) ?: "?");
            snprintf(w->hook, sizeof w->hook, "%s", json_string_value(json_object_get(m->params, "hook")) ?: "?");
        } else if (strcmp(m->method, "hook/leave") == 0) {
            w->in_hook = 0;
        } else if (strcmp(m->method, "plugin/loading") == 0) {
            snprintf(w->loading, sizeof w->loading, "%s", json_string_value(json_object_get(m->params, "path")) ?: "");
        } else if (strcmp(m->method, "worker/ready") == 0) {
            w->ready = 1;
            pool->startup_failures = 0;
            json_t *describe = json_object_get(m->params, "describe");
            tthd_log(TTHD_LOG_DEBUG, "worker %d ready (plugin set %u)", w->pid, w->generation);
            if (w->generation == pool->generation && pool->describe && pool->describe_gen == pool->generation &&
                !json_equal(json_object_get(describe, "plugins"), json_object_get(pool->describe, "plugins"))) {
                /* it read the directory after a change the others did not see: a new set */
                tthd_pool_reload(pool);
            } else if (w->generation == pool->generation) {
                json_decref(pool->describe);
                pool->describe = json_incref(describe);
                json_decref(pool->load_errors);
                pool->load_errors = json_incref(json_object_get(m->params, "loadErrors"));
                pool->describe_gen = w->generation;
            }
            pool_dispatch(pool);
        } else if (strcmp(m->method, "$/progress") == 0) {
            if (w->job && w->job->cb && w->job->progress)
                w->job->progress(w->job, json_string_value(json_object_get(m->params, "stage")),
                                 (int)json_integer_value(json_object_get(m->params, "percentage")));
        } else if (strcmp(m->method, "$/chunk") == 0) {
            json_int_t size = json_integer_value(json_object_get(m->params, "size"));
            w->expect_binary = 1;
            w->expect_size = size > 0 ? (size_t)size : 0;
        }
        return;
    }
    if (m->kind == TTHP_MSG_REQUEST && strcmp(m->method, "cache/room") == 0) {
        /* the worker is about to write its cache entry file of `size` bytes: older entries make
         * room first (docs/cache.md, "The bound"); refused, it streams the artifact instead */
        json_int_t size = json_integer_value(json_object_get(m->params, "size"));
        tthd_job *job = w->job;
        int granted = job && job->room_cache && size > 0 && tthd_cache_reserve(job->room_cache, (uint64_t)size) == 0;
        if (granted)
            job->reserved += (uint64_t)size;
        if (worker_send(w, tthp_result_new(m->id, json_pack("{s:b}", "granted", granted))) < 0)
            worker_kill(w, KILL_PROTOCOL);
        return;
    }
    if (m->kind != TTHP_MSG_RESPONSE || !w->job || !json_is_integer(m->id) ||
        json_integer_value(m->id) != w->job_id)
        return;
    tthd_job *job = w->job;
    const json_t *entry = m->result ? json_object_get(m->result, "entry") : NULL;
    if (entry) {
        const char *path = json_string_value(json_object_get(entry, "path"));
        if (!entry_path_ok(job->params, path)) {
            tthd_log(TTHD_LOG_WARN, "worker %d named a cache file outside its cache directory; replacing it", w->pid);
            worker_kill(w, KILL_PROTOCOL);
            return;
        }
        job->entry_path = strdup(path);
    }
    if (m->result) {
        job->result = json_incref(m->result);
    } else {
        job->error = json_incref(m->error);
    }
    w->in_hook = 0;
    job_finish(pool, job);
    if (w->generation != pool->generation || pool->closing) {
        w->retiring = 1;
        if (!uv_is_closing((uv_handle_t *)&w->to))
            uv_close((uv_handle_t *)&w->to, on_worker_closed);
    }
    pool_dispatch(pool);
}

static void on_worker_frame(tthd_worker *w, const tthp_frame *f)
{
    if (f->type == TTHP_FRAME_BINARY) {
        tthd_job *job = w->job;
        if (!w->expect_binary || f->len != w->expect_size || !job) {
            tthd_log(TTHD_LOG_WARN, "worker %d sent an unannounced binary frame; replacing it", w->pid);
            worker_kill(w, KILL_PROTOCOL);
            return;
        }
        w->expect_binary = 0;
        if (job->artifact_len + f->len > job->artifact_cap) {
            size_t cap = job->artifact_cap ? job->artifact_cap : 65536;
            while (cap < job->artifact_len + f->len)
                cap *= 2;
            uint8_t *nb = realloc(job->artifact, cap);
            if (!nb) {
                worker_kill(w, KILL_MEMORY);
                return;
            }
            job->artifact = nb;
            job->artifact_cap = cap;
        }
        memcpy(job->artifact + job->artifact_len, f->data, f->len);
        job->artifact_len += f->len;
        return;
    }
    if (f->type != TTHP_FRAME_JSON) {
        worker_kill(w, KILL_PROTOCOL);
        return;
    }
    tthp_message m;
    if (tthp_message_parse(f->data, f->len, &m) == 0)
        on_worker_message(w, &m);
    else
        tthd_log(TTHD_LOG_WARN, "worker %d sent an invalid message: %s", w->pid, m.error_message);
    tthp_message_clear(&m);
}

static void on_worker_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    tthd_worker *w = s->data;
    if (nread < 0) {
        w->eof = 1;
        uv_read_stop(s);
        if (w->exited)
            worker_gone(w);
    }
    size_t off = 0;
    while (nread > 0 && off < (size_t)nread && !w->gone) {
        tthp_frame f;
        ssize_t n = tthp_parser_feed(&w->parser, buf->base + off, (size_t)nread - off, &f);
        if (n < 0) {
            tthd_log(TTHD_LOG_WARN, "worker %d: %s; replacing it", w->pid, w->parser.errmsg);
            worker_kill(w, KILL_PROTOCOL);
            uv_read_stop(s);
            break;
        }
        off += (size_t)n;
        if (f.type == TTHP_FRAME_OVERSIZE) {
            tthd_log(TTHD_LOG_WARN, "worker %d sent a frame larger than the limit; replacing it", w->pid);
            worker_kill(w, KILL_PROTOCOL);
            uv_read_stop(s);
            break;
        }
        if (f.type != TTHP_FRAME_NONE)
            on_worker_frame(w, &f);
    }
    free(buf->base);
}

/* ---- worker life ----------------------------------------------------------------------- */

static void on_worker_closed(uv_handle_t *h)
{
    tthd_worker *w = h->data;
    if (--w->open_handles > 0)
        return;
    tthd_pool *pool = w->pool;
    tthp_parser_free(&w->parser);
    free(w);
    pool->handles_open--;
    pool_maybe_closed(pool);
}

/* A worker ended while it loaded the plugin file w->loading: that file is left out of the
 * workers started from now on (--skip-plugin), which report it refused, until the plugins
 * directory changes (docs/plugin-guide.md, "A plugin that crashes as it loads"). Not a startup
 * failure: the next worker starts at once without it. */
static void leave_out(tthd_pool *pool, const tthd_worker *w)
{
    size_t i;
    json_t *e;
    json_array_foreach(pool->left_out, i, e)
        if (strcmp(json_string_value(e), w->loading) == 0)
            return; /* a worker started before the first crash was counted */
    json_array_append_new(pool->left_out, json_string(w->loading));
    if (w->kill_reason == KILL_STARTUP)
        tthd_log(TTHD_LOG_ERROR, "plugin %s stalled worker %d as it was loaded (not ready in time, killed): it is left "
                 "out until the plugins directory changes", w->loading, w->pid);
    else if (w->term_signal)
        tthd_log(TTHD_LOG_ERROR, "plugin %s crashed worker %d as it was loaded (signal %d, %s): it is left out until "
                 "the plugins directory changes", w->loading, w->pid, w->term_signal, strsignal(w->term_signal));
    else
        tthd_log(TTHD_LOG_ERROR, "plugin %s made worker %d exit (status %" PRId64 ") as it was loaded: it is left out "
                 "until the plugins directory changes", w->loading, w->pid, w->exit_status);
}

/* A worker ended before it was ready, not while loading a plugin (its executable cannot run, a
 * library it needs is missing): counted, and what happened kept for the error queued requests
 * get once TTHD_START_FAILS_MAX of them failed in a row (fail_queue_cannot_start). */
static void startup_failed(tthd_pool *pool, const tthd_worker *w)
{
    pool->startup_failures++;
    if (w->kill_reason == KILL_STARTUP)
        snprintf(pool->start_error, sizeof pool->start_error, "it was not ready in time and was killed");
    else if (w->term_signal)
        snprintf(pool->start_error, sizeof pool->start_error, "it crashed (signal %d, %s) as it started",
                 w->term_signal, strsignal(w->term_signal));
    else if (w->exit_status == 127)
        snprintf(pool->start_error, sizeof pool->start_error,
                 "the system could not run it (exit status 127: the file, or a shared library it needs, is missing)");
    else if (w->exit_status == 126)
        snprintf(pool->start_error, sizeof pool->start_error, "the system could not run it (exit status 126: it is "
                 "not executable)");
    else
        snprintf(pool->start_error, sizeof pool->start_error, "it exited with status %" PRId64 " as it started",
                 w->exit_status);
}

/* Workers keep ending before they are ready (TTHD_START_FAILS_MAX in a row) and none is: the
 * queued jobs fail at once with why instead of waiting out their deadline (the pool keeps trying
 * to start workers, with its backoff, and serves again as soon as one is ready). */
#define TTHD_START_FAILS_MAX 3

static void fail_queue_cannot_start(tthd_pool *pool)
{
    if (pool->startup_failures < TTHD_START_FAILS_MAX || !pool->queue)
        return;
    for (const tthd_worker *w = pool->workers; w; w = w->next)
        if (w->ready && !w->exited && !w->retiring)
            return;
    tth_diag d;
    tth_diag_clear(&d);
    tth_diag_set(&d, TTH_ECRASH, "worker pool", "tthd cannot start its workers: %u tries of %s in a row failed "
                 "before one was ready (the last: %s)", pool->startup_failures, pool->opt->worker_path,
                 pool->start_error);
    tth_diag_hint(&d, "run '%s --help' to see its own message (tthd's log has the workers' messages too), repair "
                      "the installation, then retry: tthd keeps trying to start workers and serves as soon as one "
                      "starts", pool->opt->worker_path);
    while (pool->queue) {
        tthd_job *job = pool->queue;
        pool->queue = job->next;
        pool->queued--;
        job->next = NULL;
        job_fail(pool, job, &d);
    }
    pool->queue_tail = NULL;
}

static void on_worker_exit(uv_process_t *proc, int64_t status, int term_signal)
{
    tthd_worker *w = proc->data;
    w->exited = 1;
    w->exit_status = status;
    w->term_signal = term_signal;
    w->exit_at = uv_now(w->pool->loop);
    if (w->eof)
        worker_gone(w);
}

/* The worker's process is dead and its output read: fail its job, close its handles, and
 * replace it. */
static void worker_gone(tthd_worker *w)
{
    if (w->gone)
        return;
    w->gone = 1;
    tthd_pool *pool = w->pool;
    for (tthd_worker **pp = &pool->workers; *pp; pp = &(*pp)->next)
        if (*pp == w) {
            *pp = w->next;
            break;
        }
    int crashed = !w->retiring && !w->kill_reason && !pool->closing;
    if (crashed || (w->term_signal && !w->kill_reason && !w->retiring))
        pool->crashed++;
    if (w->kill_reason && w->kill_reason != KILL_SHUTDOWN)
        pool->killed++;
    pool->timeouts += w->kill_reason == KILL_TIMEOUT;
    pool->memkills += w->kill_reason == KILL_MEMORY;
    if (!w->ready && !w->retiring && !pool->closing) {
        if (w->loading[0] && (!w->kill_reason || w->kill_reason == KILL_STARTUP))
            leave_out(pool, w);
        else
            startup_failed(pool, w);
    }
    char where[256];
    where_of(w, where, sizeof where);
    if (crashed || w->kill_reason)
        tthd_log(w->kill_reason == KILL_SHUTDOWN ? TTHD_LOG_DEBUG : TTHD_LOG_WARN,
                 "worker %d ended (status %" PRId64 ", signal %d) %s%s in %s", w->pid, w->exit_status,
                 w->term_signal, w->kill_reason ? "killed" : "unexpectedly",
                 w->kill_reason == KILL_TIMEOUT ? " (deadline)" : w->kill_reason == KILL_MEMORY ? " (memory)" : "",
                 where);
    else if (w->exit_status || w->term_signal)
        tthd_log(TTHD_LOG_WARN, "worker %d exited with status %" PRId64 " (signal %d) after it was retired", w->pid,
                 w->exit_status, w->term_signal);
    tthd_job *job = w->job;
    if (job) {
        tth_diag d;
        tth_diag_clear(&d);
        const char *plugin_hint = w->in_hook ? "the plugin has a bug; the daemon and other requests are fine: "
                                               "report it to the plugin's authors or remove the plugin"
                                             : "this is a bug in tth; the daemon is fine, retry the request";
        switch (w->kill_reason) {
        case KILL_TIMEOUT:
            tth_diag_set(&d, TTH_ETIMEOUT, where, "the request took longer than %g s in %s; its worker was killed",
                         pool->opt->request_timeout, where);
            tth_diag_hint(&d, "a plugin hook may loop forever; raise tthd's --request-timeout if the work is "
                              "really that long");
            break;
        case KILL_MEMORY:
            tth_diag_set(&d, TTH_ELIMIT, where, "the worker exceeded its memory limit (%" PRIu64 " MiB) in %s; it was killed",
                         pool->opt->worker_mem_limit >> 20, where);
            tth_diag_hint(&d, "raise tthd's --worker-memory-limit, or report the plugin's allocation to its authors");
            break;
        case KILL_PROTOCOL:
            tth_diag_set(&d, TTH_EINTERNAL, where, "the worker broke the pipe protocol in %s and was replaced", where);
            tth_diag_hint(&d, "%s", plugin_hint);
            break;
        case KILL_SHUTDOWN:
            tth_diag_set(&d, TTH_ECANCELLED, where, "tthd is shutting down");
            break;
        default:
            if (w->term_signal == SIGKILL || w->term_signal == SIGTERM) {
                /* not a fault the worker raised: someone outside stopped it (daemon/README.md) */
                tth_diag_set(&d, TTH_ECRASH, where,
                             "the worker was killed from outside tthd (signal %d, %s) in %s: the kernel's "
                             "out-of-memory killer, a container's memory limit or a person sent it",
                             w->term_signal, strsignal(w->term_signal), where);
                tth_diag_hint(&d, "the plugin did not cause this; check the machine's free memory and the memory "
                                  "limit of the container or service tthd runs in (`dmesg` or `journalctl -k` names "
                                  "what the out-of-memory killer stopped), then retry; tthd's "
                                  "--worker-memory-limit stops a compile that grows too large first, with its own "
                                  "message");
                break;
            }
            if (w->term_signal)
                tth_diag_set(&d, TTH_ECRASH, where, "the worker crashed (signal %d, %s) in %s", w->term_signal,
                             strsignal(w->term_signal), where);
            else
                tth_diag_set(&d, TTH_ECRASH, where, "the worker exited (status %" PRId64 ") in %s", w->exit_status,
                             where);
            tth_diag_hint(&d, "%s", plugin_hint);
            break;
        }
        if (w->kill_reason == KILL_SHUTDOWN)
            job_fail_code(pool, job, TTHP_SHUTTING_DOWN, "tthd is shutting down");
        else
            job_fail(pool, job, &d);
    }
    uv_close((uv_handle_t *)&w->proc, on_worker_closed);
    if (!uv_is_closing((uv_handle_t *)&w->to))
        uv_close((uv_handle_t *)&w->to, on_worker_closed); /* else closed earlier, its callback counts it */
    uv_close((uv_handle_t *)&w->from, on_worker_closed);
    if (!pool->closing) {
        pool_fill(pool);
        pool_dispatch(pool);
    } else if (!pool->workers && !uv_is_closing((uv_handle_t *)&pool->tick)) {
        uv_close((uv_handle_t *)&pool->tick, on_pool_timer_closed);
    }
}

static void worker_spawn(tthd_pool *pool)
{
    const tthd_options *opt = pool->opt;
    /* the plugins whose loading crashed a worker: --skip-plugin each (leave_out) */
    size_t nleft = json_array_size(pool->left_out);
    char **args = calloc(14 + 2 * nleft, sizeof *args);
    tthd_worker *w = args ? calloc(1, sizeof *w) : NULL;
    if (!w) {
        free(args);
        return;
    }
    w->pool = pool;
    w->generation = pool->generation;
    tthp_parser_init(&w->parser, 64u * 1024 * 1024);
    uv_pipe_init(pool->loop, &w->to, 0);
    uv_pipe_init(pool->loop, &w->from, 0);
    w->to.data = w->from.data = w->proc.data = w;
    char mem[32], store_max[32], store[4200], self[24];
    snprintf(mem, sizeof mem, "%" PRIu64, opt->worker_mem_limit);
    snprintf(self, sizeof self, "%d", (int)getpid());
    /* --daemon-pid: the worker dies with us (uv_spawn forks on this, the loop's thread) */
    int na = 0;
    args[na++] = opt->worker_path;
    args[na++] = "--plugins-dir";
    args[na++] = opt->plugins_dir;
    args[na++] = "--memory-limit";
    args[na++] = mem;
    args[na++] = "--daemon-pid";
    args[na++] = self;
    for (size_t i = 0; i < nleft; i++) {
        args[na++] = "--skip-plugin";
        args[na++] = (char *)json_string_value(json_array_get(pool->left_out, i));
    }
    /* compiled code kept between compiles beside the artifact cache, in a quarter of its bound
     * (docs/cache.md, "Compiled code") */
    if (opt->cache_dir && opt->cache_dir[0] == '/' && opt->cache_max_bytes >= 4 &&
        (size_t)snprintf(store, sizeof store, "%s/" TTHD_CODE_STORE_DIR, opt->cache_dir) < sizeof store) {
        snprintf(store_max, sizeof store_max, "%" PRIu64, opt->cache_max_bytes / 4);
        args[na++] = "--code-store";
        args[na++] = store;
        args[na++] = "--code-store-max-bytes";
        args[na++] = store_max;
    }
    if (opt->verbose)
        args[na++] = "--verbose";
    args[na] = NULL;
    uv_stdio_container_t stdio[3] = {
        {.flags = UV_CREATE_PIPE | UV_READABLE_PIPE, .data.stream = (uv_stream_t *)&w->to},
        {.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE, .data.stream = (uv_stream_t *)&w->from},
        {.flags = UV_INHERIT_FD, .data.fd = 2},
    };
    uv_process_options_t po = {
        .exit_cb = on_worker_exit,
        .file = opt->worker_path,
        .args = args,
        .stdio_count = 3,
        .stdio = stdio,
    };
    pool->handles_open++;
    int rc = uv_spawn(pool->loop, &w->proc, &po);
    free(args);
    if (rc < 0) {
        tthd_log(TTHD_LOG_ERROR, "cannot start worker %s: %s", opt->worker_path, uv_strerror(rc));
        pool->startup_failures++;
        snprintf(pool->start_error, sizeof pool->start_error, "it could not be started: %s", uv_strerror(rc));
        w->open_handles = 3;
        w->gone = 1;
        uv_close((uv_handle_t *)&w->proc, on_worker_closed);
        uv_close((uv_handle_t *)&w->to, on_worker_closed);
        uv_close((uv_handle_t *)&w->from, on_worker_closed);
        return;
    }
    w->open_handles = 3;
    w->pid = w->proc.pid;
    w->spawned_at = uv_now(pool->loop);
    pool->spawned++;
    w->next = pool->workers;
    pool->workers = w;
    uv_read_start((uv_stream_t *)&w->from, tthd_read_alloc, on_worker_read);
    tthd_log(TTHD_LOG_DEBUG, "started worker %d", w->pid);
}

static void on_respawn(uv_timer_t *t)
{
    tthd_pool *pool = t->data;
    pool->respawn_now = 1;
    pool_fill(pool);
    pool_dispatch(pool);
}

/* Keep opt->workers workers of the current plugin set alive; after workers failed to start,
 * wait (100 ms doubling, at most 5 s) before trying again. */
static void pool_fill(tthd_pool *pool)
{
    if (pool->closing)
        return;
    if (pool->startup_failures && !pool->respawn_now) {
        if (!uv_is_active((uv_handle_t *)&pool->respawn)) {
            unsigned shift = pool->startup_failures > 6 ? 6 : pool->startup_failures;
            uint64_t delay = 100u << shift;
            uv_timer_start(&pool->respawn, on_respawn, delay > 5000 ? 5000 : delay, 0);
        }
    } else {
        pool->respawn_now = 0;
        unsigned n = 0;
        for (tthd_worker *w = pool->workers; w; w = w->next)
            n += w->generation == pool->generation && !w->retiring;
        while (n++ < pool->opt->workers)
            worker_spawn(pool);
        if (pool->startup_failures && !uv_is_active((uv_handle_t *)&pool->respawn))
            uv_timer_start(&pool->respawn, on_respawn, 1000, 0);
    }
    /* every path that can leave workers unable to start ends here: a worker gone before it was
     * ready (worker_gone), a spawn that failed (above), a job queued meanwhile (submit) */
    fail_queue_cannot_start(pool);
}

static void pool_dispatch(tthd_pool *pool)
{
    while (pool->queue && !pool->closing) {
        tthd_worker *idle = NULL;
        for (tthd_worker *w = pool->workers; w && !idle; w = w->next)
            if (w->ready && !w->job && !w->retiring && !w->kill_reason && !w->exited &&
                w->generation == pool->generation)
                idle = w;
        if (!idle)
            return;
        tthd_job *job = pool->queue;
        pool->queue = job->next;
        if (!pool->queue)
            pool->queue_tail = NULL;
        pool->queued--;
        job->next = NULL;
        worker_start_job(idle, job);
    }
}

static uint64_t worker_rss(int pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/statm", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    unsigned long long size = 0, resident = 0;
    int n = fscanf(f, "%llu %llu", &size, &resident);
    fclose(f);
    return n == 2 ? (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE) : 0;
}

/* Every 100 ms: deadlines, memory, cancel grace, workers whose output never closed. */
static void on_tick(uv_timer_t *t)
{
    tthd_pool *pool = t->data;
    uint64_t now = uv_now(pool->loop);
    double start_share = pool->opt->request_timeout * 1000.0 * TTHD_START_SHARE;
    uint64_t start_ms = (uint64_t)(start_share < TTHD_START_MIN_MS   ? TTHD_START_MIN_MS
                                   : start_share > TTHD_START_MAX_MS ? TTHD_START_MAX_MS
                                                                     : start_share);
    for (tthd_worker *w = pool->workers, *next; w; w = next) {
        next = w->next;
        if (w->exited) {
            if (now - w->exit_at > 1000)
                worker_gone(w);
            continue;
        }
        if (pool->closing && now - pool->closing_at > 2000)
            worker_kill(w, KILL_SHUTDOWN);
        else if (w->kill_at && now >= w->kill_at)
            worker_kill(w, KILL_CANCEL);
        else if (!w->ready && !w->retiring && now - w->spawned_at > start_ms)
            worker_kill(w, KILL_STARTUP);
        else if (w->job && now >= w->job->deadline)
            worker_kill(w, KILL_TIMEOUT);
        else if (w->job && pool->opt->worker_mem_limit && worker_rss(w->pid) > pool->opt->worker_mem_limit)
            worker_kill(w, KILL_MEMORY);
    }
    /* queued jobs that waited past their deadline */
    for (tthd_job **pp = &pool->queue; *pp;) {
        tthd_job *job = *pp;
        if (now < job->deadline) {
            pp = &job->next;
            continue;
        }
        *pp = job->next;
        pool->queued--;
        job->next = NULL;
        tth_diag d;
        tth_diag_clear(&d);
        tth_diag_set(&d, TTH_ETIMEOUT, "worker pool", "no worker was free within %g s",
                     pool->opt->request_timeout);
        tth_diag_hint(&d, "all workers are busy or cannot start; see tthd's log");
        job_fail(pool, job, &d);
    }
    pool->queue_tail = NULL;
    for (tthd_job *j = pool->queue; j; j = j->next)
        pool->queue_tail = j;
}

/* ---- public ---------------------------------------------------------------------------- */

int tthd_pool_init(tthd_pool *pool, uv_loop_t *loop, const tthd_options *opt)
{
    memset(pool, 0, sizeof *pool);
    pool->loop = loop;
    pool->opt = opt;
    pool->generation = 1;
    if (!(pool->left_out = json_array()))
        return -1;
    uv_timer_init(loop, &pool->tick);
    uv_timer_init(loop, &pool->respawn);
    pool->tick.data = pool->respawn.data = pool;
    pool->handles_open = 2;
    uv_timer_start(&pool->tick, on_tick, 100, 100);
    uv_unref((uv_handle_t *)&pool->tick);
    pool_fill(pool);
    return 0;
}

void tthd_pool_submit(tthd_pool *pool, tthd_job *job)
{
    job->deadline = uv_now(pool->loop) + (uint64_t)(pool->opt->request_timeout * 1000.0);
    if (pool->closing) {
        job_fail_code(pool, job, TTHP_SHUTTING_DOWN, "tthd is shutting down");
        return;
    }
    job->next = NULL;
    if (pool->queue_tail)
        pool->queue_tail->next = job;
    else
        pool->queue = job;
    pool->queue_tail = job;
    pool->queued++;
    pool_fill(pool);
    pool_dispatch(pool);
}

void tthd_pool_cancel(tthd_pool *pool, tthd_job *job)
{
    job->cb = NULL;
    tthd_worker *w = job->worker;
    if (w) {
        /* ask the plugin to stop (tth_host.cancelled); kill the worker if it does not answer */
        if (!w->kill_at && !w->exited) {
            uv_process_kill(&w->proc, SIGUSR1);
            w->kill_at = uv_now(pool->loop) + 500;
        }
        return;
    }
    tthd_job *prev = NULL;
    for (tthd_job *j = pool->queue; j; prev = j, j = j->next)
        if (j == job) {
            if (prev)
                prev->next = j->next;
            else
                pool->queue = j->next;
            if (pool->queue_tail == j)
                pool->queue_tail = prev;
            pool->queued--;
            tthd_job_free(job);
            return;
        }
}

void tthd_pool_reload(tthd_pool *pool)
{
    if (pool->closing)
        return;
    pool->generation++;
    tthd_log(TTHD_LOG_INFO, "plugins directory changed: loading plugin set %u in new workers", pool->generation);
    json_array_clear(pool->left_out); /* a file left out may have been fixed: tried again */
    for (tthd_worker *w = pool->workers; w; w = w->next)
        if (w->generation != pool->generation && !w->job && !w->retiring) {
            w->retiring = 1;
            uv_close((uv_handle_t *)&w->to, on_worker_closed); /* EOF: the worker exits */
        }
    pool->startup_failures = 0;
    uv_timer_stop(&pool->respawn);
    pool_fill(pool);
}

size_t tthd_pool_busy(const tthd_pool *pool)
{
    size_t n = 0;
    for (const tthd_worker *w = pool->workers; w; w = w->next)
        n += w->job != NULL;
    return n;
}

size_t tthd_pool_alive(const tthd_pool *pool)
{
    size_t n = 0;
    for (const tthd_worker *w = pool->workers; w; w = w->next)
        n += !w->exited;
    return n;
}

static void on_pool_timer_closed(uv_handle_t *h)
{
    tthd_pool *pool = h->data;
    pool->handles_open--;
    pool_maybe_closed(pool);
}

static void pool_maybe_closed(tthd_pool *pool)
{
    if (pool->closing && pool->handles_open == 0) {
        json_decref(pool->describe);
        json_decref(pool->load_errors);
        json_decref(pool->left_out);
        pool->describe = pool->load_errors = pool->left_out = NULL;
        if (pool->on_closed)
            pool->on_closed(pool);
    }
}

void tthd_pool_close(tthd_pool *pool)
{
    if (pool->closing)
        return;
    pool->closing = 1;
    pool->closing_at = uv_now(pool->loop);
    while (pool->queue) {
        tthd_job *job = pool->queue;
        pool->queue = job->next;
        job->next = NULL;
        job_fail_code(pool, job, TTHP_SHUTTING_DOWN, "tthd is shutting down");
    }
    pool->queue_tail = NULL;
    pool->queued = 0;
    for (tthd_worker *w = pool->workers; w; w = w->next) {
        if (w->job) {
            worker_kill(w, KILL_SHUTDOWN);
        } else if (!w->retiring) {
            w->retiring = 1;
            uv_close((uv_handle_t *)&w->to, on_worker_closed);
        }
    }
    /* the tick keeps reaping workers until they are all gone; it is closed last */
    uv_ref((uv_handle_t *)&pool->tick);
    uv_close((uv_handle_t *)&pool->respawn, on_pool_timer_closed);
    if (!pool->workers)
        uv_close((uv_handle_t *)&pool->tick, on_pool_timer_closed);
}
