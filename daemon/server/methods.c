/* methods.c: what each request does (PROTOCOL.md section 5). One handler per method, found
 * through a table indexed by the protocol's method ids, so the wire names live only in
 * tthproto's method table. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <unistd.h>
#include <xxhash.h>

#include "tth_config.h"
#include "../compile/code_store.h"
#include "tthd.h"

typedef void (*method_fn)(tthd_server *srv, tthd_request *req);

/* ---- describe-based lists ------------------------------------------------------------ */

/* Answer a list request from a describe document (borrowed). */
static void answer_list(tthd_server *srv, tthd_request *req, const json_t *describe)
{
    switch (req->method->id) {
    case TTHP_M_TARGETS_LIST:
        tthd_respond(req, json_pack("{s:O}", "kinds", json_object_get(describe, "kinds")));
        break;
    case TTHP_M_TAGS_LIST:
        tthd_respond(req, json_pack("{s:O}", "tags", json_object_get(describe, "tags")));
        break;
    default: {
        json_t *errors = json_deep_copy(json_object_get(describe, "errors"));
        if (!errors)
            errors = json_array();
        size_t i;
        json_t *e;
        json_array_foreach(srv->pool.load_errors, i, e)
            json_array_append_new(errors, json_pack("{s:O, s:O, s:O, s:O}", "path", json_object_get(e, "path"), "code",
                                                    json_object_get(e, "code"), "message",
                                                    json_object_get(e, "message"), "hint", json_object_get(e, "hint")));
        tthd_respond(req, json_pack("{s:s, s:o, s:i, s:O, s:o}", "directory", srv->opt.plugins_dir, "directories",
                                    tthd_plugins_path_json(srv->opt.plugins_dir), "generation",
                                    (int)srv->pool.describe_gen, "plugins", json_object_get(describe, "plugins"),
                                    "errors", errors));
        break;
    }
    }
}

/* The request a finished job answers, no longer waiting on it; NULL when the job failed (its
 * error is then the answer). */
static tthd_request *job_done(tthd_job *job)
{
    tthd_request *req = job->data;
    req->job = NULL;
    if (job->error) {
        tthd_respond_error_obj(req, job->error);
        return NULL;
    }
    return req;
}

static void on_describe_done(tthd_job *job)
{
    tthd_request *req = job_done(job);
    if (req)
        answer_list(req->conn->srv, req, job->result);
}

/* targets/list, tags/list, plugins/list: from the newest worker's describe when it is for the
 * current plugin set, else from a worker of the current set. */
static void m_list(tthd_server *srv, tthd_request *req)
{
    if (srv->pool.describe && srv->pool.describe_gen == srv->pool.generation) {
        answer_list(srv, req, srv->pool.describe);
        return;
    }
    tthd_job *job = tthd_job_new(TTHD_JOB_DESCRIBE, NULL);
    if (!job) {
        tthd_respond_error(req, TTHP_INTERNAL_ERROR, "out of memory", NULL);
        return;
    }
    job->cb = on_describe_done;
    job->data = req;
    req->job = job;
    req->state = TTHD_REQ_WORKING;
    tthd_pool_submit(&srv->pool, job);
}

/* ---- initialize, status, cache/clear, shutdown --------------------------------------- */

static void m_initialize(tthd_server *srv, tthd_request *req)
{
    const char *ver = json_string_value(json_object_get(req->params, "protocolVersion"));
    int major, minor;
    char msg[256];
    if (req->conn->initialized) {
        tthd_respond_error(req, TTHP_INVALID_REQUEST, "this connection is already initialised", NULL);
        return;
    }
    if (tthp_version_parse(ver, &major, &minor) != 0) {
        snprintf(msg, sizeof msg, "protocolVersion '%.40s' is not MAJOR.MINOR", ver);
        tthd_respond_error(req, TTHP_INVALID_PARAMS, msg, NULL);
        return;
    }
    if (major != TTHP_PROTOCOL_MAJOR) {
        snprintf(msg, sizeof msg,
                 "client speaks protocol %d.%d but this tthd %s speaks %s; use a tthctl of the same major version",
                 major, minor, TTH_VERSION, TTHP_PROTOCOL_VERSION);
        tthd_respond_error(req, TTHP_VERSION_MISMATCH, msg,
                           json_pack("{s:s, s:s}", "serverProtocolVersion", TTHP_PROTOCOL_VERSION,
                                     "clientProtocolVersion", ver));
        return;
    }
    req->conn->initialized = 1;
    json_t *methods = json_array();
    for (size_t i = 0; i < TTHP_METHOD_COUNT; i++)
        json_array_append_new(methods, json_string(tthp_methods[i].name));
    const json_t *client = json_object_get(req->params, "clientInfo");
    tthd_log(TTHD_LOG_DEBUG, "client %s %s (protocol %s) initialised",
             json_string_value(json_object_get(client, "name")) ?: "?",
             json_string_value(json_object_get(client, "version")) ?: "?", ver);
    tthd_respond(req, json_pack("{s:s, s:{s:s, s:s}, s:o, s:{s:I, s:I, s:I, s:I}, s:{s:b, s:b}}", "protocolVersion",
                                TTHP_PROTOCOL_VERSION, "serverInfo", "name", "tthd", "version", TTH_VERSION,
                                "methods", methods, "limits", "maxFrameBytes", (json_int_t)srv->opt.max_frame,
                                "maxRequestBytes", (json_int_t)srv->opt.max_request, "maxConcurrentRequests",
                                (json_int_t)srv->opt.max_concurrent, "chunkBytes", (json_int_t)TTHP_CHUNK_BYTES,
                                "capabilities", "modelPath", 1, "artifactFile", 1));
}

static void m_status(tthd_server *srv, tthd_request *req)
{
    size_t active = 0;
    for (tthd_conn *c = srv->conns; c; c = c->next)
        active += c->n_reqs;
    double uptime = (double)(uv_hrtime() / 1000000 - srv->start_ms) / 1000.0;
    const tthd_pool *p = &srv->pool;
    const tthd_cache *c = &srv->cache;
    json_t *res = json_pack(
        "{s:s, s:s, s:i, s:f, s:s, s:s, s:s, s:I,"
        " s:{s:I, s:I, s:I},"
        " s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I},"
        " s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}}",
        "version", TTH_VERSION, "protocolVersion", TTHP_PROTOCOL_VERSION, "pid", (int)getpid(), "uptimeSeconds",
        uptime, "socket", srv->opt.socket_path, "pluginsDir", srv->opt.plugins_dir, "cacheDir",
        c->dir ? c->dir : "", "connections", (json_int_t)srv->n_conns,
        "requests", "served", (json_int_t)srv->served, "failed", (json_int_t)srv->failed, "active",
        (json_int_t)(active - 1),
        "cache", "hits", (json_int_t)c->hits, "misses", (json_int_t)c->misses, "bytes", (json_int_t)c->bytes,
        "entries", (json_int_t)c->entries, "maxBytes", (json_int_t)c->max_bytes, "corrupt", (json_int_t)c->corrupt,
        "storeErrors", (json_int_t)c->store_errors,
        "workers", "configured", (json_int_t)srv->opt.workers, "alive", (json_int_t)tthd_pool_alive(p), "busy",
        (json_int_t)tthd_pool_busy(p), "queued", (json_int_t)p->queued, "spawned", (json_int_t)p->spawned,
        "crashed", (json_int_t)p->crashed, "killed", (json_int_t)p->killed, "timeouts", (json_int_t)p->timeouts,
        "memoryKills", (json_int_t)p->memkills, "generation", (json_int_t)p->generation);
    if (res) {
        json_object_set_new(res, "pluginsPath", tthd_plugins_path_json(srv->opt.plugins_dir));
        json_object_set_new(res, "remoteCache", tthd_remote_status(&srv->remote));
        /* the workers' store of compiled code (docs/cache.md, "Compiled code"), when they have one */
        char dir[4200];
        if (tthd_cache_worker_dir(c) &&
            (size_t)snprintf(dir, sizeof dir, "%s/" TTHD_CODE_STORE_DIR, c->dir) < sizeof dir) {
            uint64_t bytes, n = tth_code_store_usage(dir, &bytes);
            json_object_set_new(res, "codeStore",
                                json_pack("{s:s, s:I, s:I, s:I}", "dir", dir, "entries", (json_int_t)n, "bytes",
                                          (json_int_t)bytes, "maxBytes", (json_int_t)(c->max_bytes / 4)));
        }
    }
    tthd_respond(req, res);
}

static void m_targets_recent(tthd_server *srv, tthd_request *req)
{
    tthd_respond(req, tthd_recent_list(&srv->recent));
}

static void m_cache_clear(tthd_server *srv, tthd_request *req)
{
    uint64_t n, bytes, code = 0;
    tthd_cache_clear(&srv->cache, &n, &bytes);
    char dir[4200];
    if (srv->cache.dir &&
        (size_t)snprintf(dir, sizeof dir, "%s/" TTHD_CODE_STORE_DIR, srv->cache.dir) < sizeof dir)
        code = tth_code_store_clear(dir);
    tthd_log(TTHD_LOG_INFO, "cache cleared: %" PRIu64 " entries, %" PRIu64 " bytes, %" PRIu64 " pieces of compiled code",
             n, bytes, code);
    tthd_respond(req, json_pack("{s:I, s:I, s:I}", "removedEntries", (json_int_t)n, "removedBytes", (json_int_t)bytes,
                                "removedCode", (json_int_t)code));
}

static void m_shutdown(tthd_server *srv, tthd_request *req)
{
    tthd_respond(req, json_null());
    tthd_server_stop(srv, "shutdown request");
}

/* ---- target/parse -------------------------------------------------------------------- */

static void on_parse_done(tthd_job *job)
{
    tthd_request *req = job_done(job);
    if (req)
        tthd_respond(req, json_incref(job->result));
}

static tthd_job *submit_parse(tthd_server *srv, tthd_request *req, tthd_job_cb cb)
{
    tthd_job *job = tthd_job_new(TTHD_JOB_PARSE, json_pack("{s:O}", "target", json_object_get(req->params, "target")));
    if (!job)
        return NULL;
    job->cb = cb;
    job->data = req;
    req->job = job;
    req->state = TTHD_REQ_WORKING;
    tthd_pool_submit(&srv->pool, job);
    return job;
}

static void m_target_parse(tthd_server *srv, tthd_request *req)
{
    if (!submit_parse(srv, req, on_parse_done))
        tthd_respond_error(req, TTHP_INTERNAL_ERROR, "out of memory", NULL);
}

/* ---- compile ------------------------------------------------------------------------- */

static char *options_text(const tthd_request *req)
{
    /* what shapes the artifact besides the model and the target: the options (no_cache only says
     * how to look it up) and the model's name, which its symbols and file names carry (the same
     * bytes compiled as another name are another artifact) */
    const json_t *given = json_object_get(req->params, "options");
    json_t *o = given ? json_deep_copy(given) : json_object();
    if (!o)
        return NULL;
    json_object_del(o, "no_cache");
    json_t *all = json_pack("{s:s, s:o}", "model_name", req->model_name, "options", o);
    char *text = all ? json_dumps(all, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY) : NULL;
    json_decref(all);
    return text;
}

/* The answer to a compile that produced or found an artifact of len bytes and XXH64 sum, after
 * its stream (chunks of them) or for the cache file `file` (then offset is where the artifact
 * lies in it; protocol/PROTOCOL.md, "delivery"), with the timings: the worker's stages and hooks
 * (a miss), the cache lookup, the whole request up to this answer (docs/tthctl.md, --timings). */
static void answer_artifact(tthd_request *req, const char *cache_state, size_t len, uint64_t sum, size_t chunks,
                            const char *file, uint64_t offset, const json_t *metadata, const json_t *diagnostics,
                            const json_t *dumps, const json_t *worker_timings)
{
    char hex[17];
    snprintf(hex, sizeof hex, "%016" PRIx64, sum);
    /* "remote-hit" is a hit from the remote cache: cache "hit", cacheSource "remote" */
    int remote = strcmp(cache_state, "remote-hit") == 0;
    json_t *res = json_pack("{s:s, s:s, s:{s:I, s:s, s:I}, s:O, s:O, s:o}", "cache", remote ? "hit" : cache_state,
                            "key", req->key,
                            "artifact", "size", (json_int_t)len, "xxh64", hex, "chunks", (json_int_t)chunks, "target",
                            req->target ? req->target : json_null(), "metadata", metadata ? metadata : json_null(),
                            "diagnostics", diagnostics ? json_incref((json_t *)diagnostics) : json_array());
    if (res && file)
        json_object_set_new(json_object_get(res, "artifact"), "file",
                            json_pack("{s:s, s:I}", "path", file, "offset", (json_int_t)offset));
    if (res && strcmp(cache_state, "miss") != 0)
        json_object_set_new(res, "cacheSource", json_string(remote ? "remote" : "local"));
    if (res && json_is_object(dumps))
        json_object_set(res, "dumps", (json_t *)dumps);
    json_t *remote_notice = tthd_remote_notice(&req->conn->srv->remote);
    if (res && remote_notice) /* a shared cache that is off is said in every answer (docs/cache.md) */
        json_object_set(res, "remoteCache", remote_notice);
    json_decref(remote_notice);
    json_t *t = json_is_object(worker_timings) ? json_deep_copy(worker_timings) : json_object();
    if (res && t) {
        json_object_set_new(t, "cacheLookup", json_real(req->lookup_s));
        if (req->remote_s >= 0)
            json_object_set_new(t, "remoteCacheLookup", json_real(req->remote_s));
        json_object_set_new(t, "total", json_real((double)(uv_hrtime() - req->start_ns) / 1e9));
        json_object_set_new(res, "timings", t);
    } else {
        json_decref(t);
    }
    if (res)
        tthd_recent_note(&req->conn->srv->recent, json_object_get(req->params, "target"), req->target_string,
                         req->model_name);
    tthd_respond(req, res);
}

/* Stream an artifact (XXH64 sum, computed once by the caller), then answer. */
/* An artifact larger than this goes out paced: the next chunks are written as the client takes
 * the ones before (tthd_method_pump), so the daemon never queues a whole large artifact. */
#define TTHD_STREAM_PACE (16u * 1024 * 1024)

struct tthd_outstream {
    uint8_t *buf;               /* the artifact (owned) */
    size_t len, off, chunks;
    char state[16];
    uint64_t sum;
    json_t *metadata, *diagnostics, *dumps, *timings; /* references, for the answer */
};

void tthd_outstream_free(tthd_outstream *o)
{
    if (!o)
        return;
    free(o->buf);
    json_decref(o->metadata);
    json_decref(o->diagnostics);
    json_decref(o->dumps);
    json_decref(o->timings);
    free(o);
}

/* the chunk of art at off; returns its size */
static size_t send_chunk(tthd_request *req, const uint8_t *art, size_t off, size_t len)
{
    size_t n = len - off < TTHP_CHUNK_BYTES ? len - off : TTHP_CHUNK_BYTES;
    tthd_send(req->conn, tthp_notification_new("$/chunk", json_pack("{s:O, s:s, s:I, s:I, s:I}", "id", req->id,
                                                                      "stream", "artifact", "offset", (json_int_t)off,
                                                                      "size", (json_int_t)n, "total", (json_int_t)len)));
    tthd_send_binary(req->conn, art + off, n);
    return n;
}

void tthd_method_pump(tthd_request *req)
{
    tthd_outstream *o = req->out;
    if (!o)
        return;
    while (o->off < o->len && !req->conn->closing && !req->conn->doomed &&
           uv_stream_get_write_queue_size((uv_stream_t *)&req->conn->pipe) < TTHD_STREAM_PACE) {
        o->off += send_chunk(req, o->buf, o->off, o->len);
        o->chunks++;
    }
    if (o->off < o->len)
        return; /* on_conn_written calls again */
    req->out = NULL;
    answer_artifact(req, o->state, o->len, o->sum, o->chunks, NULL, 0, o->metadata, o->diagnostics, o->dumps,
                    o->timings);
    tthd_outstream_free(o);
}

/* The artifact to the client, and the answer. A large one goes out paced from a buffer of the
 * stream's own: *steal's (taken: set to NULL) when given, else a copy. */
static void send_artifact(tthd_request *req, const char *cache_state, const uint8_t *art, uint8_t **steal, size_t len,
                          uint64_t sum, const json_t *metadata, const json_t *diagnostics, const json_t *dumps,
                          const json_t *worker_timings)
{
    if (len > TTHD_STREAM_PACE) {
        tthd_outstream *o = calloc(1, sizeof *o);
        if (o && steal && *steal) {
            o->buf = *steal;
            *steal = NULL;
        } else if (o && (o->buf = malloc(len)) != NULL) {
            memcpy(o->buf, art, len);
        }
        if (o && o->buf) {
            o->len = len;
            o->sum = sum;
            snprintf(o->state, sizeof o->state, "%s", cache_state);
            o->metadata = json_incref((json_t *)metadata);
            o->diagnostics = json_incref((json_t *)diagnostics);
            o->dumps = json_incref((json_t *)dumps);
            o->timings = worker_timings ? json_deep_copy(worker_timings) : NULL;
            req->out = o;
            tthd_method_pump(req);
            return;
        }
        free(o);
        tthd_respond_error(req, TTHP_INTERNAL_ERROR, "out of memory for the artifact's stream", NULL);
        return;
    }
    size_t off = 0, chunks = 0;
    do {
        off += send_chunk(req, art, off, len);
        chunks++;
    } while (off < len);
    answer_artifact(req, cache_state, len, sum, chunks, NULL, 0, metadata, diagnostics, dumps, worker_timings);
}

static void on_compile_progress(tthd_job *job, const char *stage, int percent)
{
    tthd_request *req = job->data;
    /* the worker's 0..100 covers the compile step, which is 5..99 of the request */
    int p = percent < 0 ? 0 : percent > 100 ? 100 : percent;
    tthd_progress(req, "report", stage ? stage : "", 5 + p * 94 / 100);
}

/* The client takes a cache file instead of the stream ("delivery": "file", PROTOCOL.md). */
static int wants_file(const tthd_request *req)
{
    const char *delivery = json_string_value(json_object_get(req->params, "delivery"));
    return delivery && strcmp(delivery, "file") == 0;
}

/* 32 hex digits into 16 bytes: 0, or -1 */
static int parse_digest(const char *hex, uint8_t out[16])
{
    if (!hex || strlen(hex) != 32)
        return -1;
    for (int i = 0; i < 16; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1)
            return -1;
        out[i] = (uint8_t)v;
    }
    return 0;
}

/* The file the worker wrote the artifact into as a cache entry ("entry" of its answer, params
 * "entry_dir"): taken into the cache under the key and answered with it, without the daemon
 * reading it. 1 when answered; 0 when the cache could not take it: then its bytes are in
 * job->artifact (answered the usual way), or the request failed. */
static int answer_miss_from_entry(tthd_server *srv, tthd_request *req, tthd_job *job)
{
    const json_t *r = job->result, *e = json_object_get(r, "entry");
    const json_t *meta = json_object_get(r, "metadata");
    json_int_t size = json_integer_value(json_object_get(e, "size"));
    json_int_t off = json_integer_value(json_object_get(e, "artifact_offset"));
    json_int_t alen = json_integer_value(json_object_get(e, "artifact_size"));
    const char *hex = json_string_value(json_object_get(e, "xxh64"));
    unsigned long long sum = 0;
    tthd_cache_hit hit;
    /* the room made for this file becomes the entry's own */
    tthd_cache_unreserve(&srv->cache, job->reserved);
    job->reserved = 0;
    if (size > 0 && off > 0 && alen >= 0 && hex && strlen(hex) == 16 && sscanf(hex, "%16llx", &sum) == 1 &&
        tthd_cache_adopt_file(&srv->cache, req->key, job->entry_path, (uint64_t)size, (uint64_t)off,
                              (uint64_t)alen, sum, meta, &hit) == 0) {
        free(job->entry_path); /* renamed into place, or removed for the entry already there */
        job->entry_path = NULL;
        tthd_remote_store_file(&srv->remote, req->key, hit.path);
        answer_artifact(req, "miss", hit.artifact_len, hit.xxh64, 0, hit.path, hit.offset, hit.metadata,
                        json_object_get(r, "diagnostics"), json_object_get(r, "dumps"), json_object_get(r, "timings"));
        free(hit.path);
        return 1;
    }
    /* kept nowhere (larger than the cache, say): its bytes as if streamed, for the usual way */
    size_t blob_len = 0, art_off = 0, art_len = 0;
    uint8_t *blob = tth_file_read(job->entry_path, &blob_len);
    json_t *checked = NULL;
    if (!blob || tthd_cache_blob_check(blob, blob_len, &checked, &art_off, &art_len) != 0) {
        free(blob);
        tthd_respond_error(req, TTHP_INTERNAL_ERROR, "the worker's artifact file is unreadable or damaged", NULL);
        return 1;
    }
    json_decref(checked);
    memmove(blob, blob + art_off, art_len);
    free(job->artifact);
    job->artifact = blob;
    job->artifact_len = art_len;
    return 0;
}

static void on_compile_done(tthd_job *job)
{
    tthd_request *req = job_done(job);
    if (!req)
        return;
    tthd_server *srv = req->conn->srv;
    /* the bytes the worker compiled, when it read the model file itself (it may have changed
     * since its digest was taken) */
    parse_digest(json_string_value(json_object_get(job->result, "model_digest")), req->model_digest);
    /* store under the plugins the worker really used (the set may have changed meanwhile) */
    const json_t *kinds = json_object_get(job->result, "kinds");
    if (json_is_array(kinds)) {
        char *oj = options_text(req);
        if (oj)
            tthd_cache_key(req->model_digest, req->target_text, oj, kinds,
                           json_string_value(json_object_get(job->result, "compiler")), req->key);
        free(oj);
    }
    if (job->entry_path && answer_miss_from_entry(srv, req, job))
        return;
    /* the artifact came through the pipe (an upload, a cache directory the worker may not write
     * into, or its write failed): streamed, and stored in the thread pool meanwhile */
    const json_t *meta = json_object_get(job->result, "metadata");
    uint64_t sum = XXH64(job->artifact, job->artifact_len, 0);
    tthd_remote_store(&srv->remote, req->key, job->artifact, job->artifact_len, meta);
    tthd_cache_store(&srv->cache, req->key, job->artifact, job->artifact_len, sum, meta);
    send_artifact(req, "miss", job->artifact, &job->artifact, job->artifact_len, sum, meta,
                  json_object_get(job->result, "diagnostics"),
                  json_object_get(job->result, "dumps"), json_object_get(job->result, "timings"));
}


/* The model file at path (absolute), of exactly model.size bytes: fd open on it and *st its
 * identity; 0, or -1 with msg set. */
static int open_model_file(const tthd_request *req, const char *path, int *fd, struct stat *st, char *msg, size_t len)
{
    if (path[0] != '/') {
        snprintf(msg, len, "model.path must be absolute");
        return -1;
    }
    *fd = open(path, O_RDONLY | O_CLOEXEC);
    if (*fd < 0 || fstat(*fd, st) != 0 || !S_ISREG(st->st_mode)) {
        snprintf(msg, len, "cannot read the model file %.300s: %s", path, *fd < 0 ? strerror(errno) : "not a regular file");
        if (*fd >= 0)
            close(*fd);
        return -1;
    }
    if ((uint64_t)st->st_size != req->model_size) {
        snprintf(msg, len, "the model file %.300s has %lld bytes, not model.size %zu (changed meanwhile?)", path,
                 (long long)st->st_size, req->model_size);
        close(*fd);
        return -1;
    }
    return 0;
}

static int same_identity(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
           a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* model.path's digest, taken in the thread pool (the file read in 1 MiB pieces: a large model
 * would hold the event loop for as long; its bytes are read again only by the worker that
 * compiles it, if one does: submit_compile). */
struct tthd_digest_work {
    uv_work_t work;
    tthd_request *req;          /* NULL once the request went away */
    int fd;
    struct stat st;             /* the file's identity when opened */
    size_t size;
    int64_t t0;                 /* when the read began (tthd_wall_ns) */
    uint8_t digest[16];
    int ok, unchanged;          /* the digest was taken; the identity was the same after */
};

static void digest_run(uv_work_t *w)
{
    tthd_digest_work *x = w->data;
    struct stat after;
    x->ok = tthd_model_digest_fd(x->fd, x->size, x->digest) == 0;
    x->unchanged = x->ok && fstat(x->fd, &after) == 0 && same_identity(&x->st, &after);
    close(x->fd);
}

static void model_complete(tthd_server *srv, tthd_request *req);

static void digest_done(uv_work_t *w, int status)
{
    tthd_digest_work *x = w->data;
    tthd_request *req = x->req;
    if (status != 0 && x->fd >= 0 && !x->ok)
        close(x->fd); /* cancelled before it ran */
    if (req) {
        req->digest_work = NULL;
        tthd_server *srv = req->conn->srv;
        if (status != 0 || !x->ok) {
            char msg[512];
            snprintf(msg, sizeof msg, "cannot read the model file %.300s", req->model_path);
            tthd_respond_error(req, TTHP_INVALID_PARAMS, msg, NULL);
        } else {
            memcpy(req->model_digest, x->digest, 16);
            if (x->unchanged)
                tthd_digest_memo_put(&srv->digests, req->model_path, &x->st, x->t0, req->model_digest);
            model_complete(srv, req);
        }
    }
    free(x);
}

void tthd_digest_work_cancel(tthd_digest_work *x)
{
    if (x)
        x->req = NULL;
}

/* model.path: its digest (remembered, digest.c, or taken in the thread pool), then
 * model_complete. 0, or -1 with msg set (nothing started). */
static int read_model_file(tthd_server *srv, tthd_request *req, const char *path, char *msg, size_t len)
{
    int fd;
    struct stat st;
    if (open_model_file(req, path, &fd, &st, msg, len) != 0)
        return -1;
    /* its directory, where ONNX external data is read (docs/tthctl.md, "ONNX external data") */
    const char *slash = strrchr(path, '/');
    req->model_dir = strndup(path, slash > path ? (size_t)(slash - path) : 1);
    req->model_path = strdup(path);
    if (!req->model_dir || !req->model_path) {
        close(fd);
        snprintf(msg, len, "out of memory");
        return -1;
    }
    req->state = TTHD_REQ_UPLOAD;
    tthd_progress(req, "begin", "upload", 0);
    if (tthd_digest_memo_find(&srv->digests, path, &st, req->model_digest)) {
        close(fd);
        model_complete(srv, req);
        return 0;
    }
    tthd_digest_work *x = calloc(1, sizeof *x);
    if (!x) {
        close(fd);
        snprintf(msg, len, "out of memory");
        return -1;
    }
    x->req = req;
    x->fd = fd;
    x->st = st;
    x->size = req->model_size;
    x->t0 = tthd_wall_ns();
    x->work.data = x;
    if (uv_queue_work(srv->loop, &x->work, digest_run, digest_done) != 0) {
        close(fd);
        free(x);
        snprintf(msg, len, "cannot queue the model file's digest");
        return -1;
    }
    req->digest_work = x;
    return 0;
}

/* Not in any cache: a worker compiles it. */
static void submit_compile(tthd_server *srv, tthd_request *req)
{
    const json_t *options = json_object_get(req->params, "options");
    tthd_progress(req, "report", "compile", 5);
    json_t *params = json_pack("{s:s, s:O, s:o, s:I}", "model_name", req->model_name, "target", req->target,
                               "options", options ? json_incref((json_t *)options) : json_object(), "model_size",
                               (json_int_t)req->model_size);
    if (params && req->model_dir)
        json_object_set_new(params, "model_dir", json_string(req->model_dir));
    if (params && req->model_path) {
        /* the worker reads the file itself and says which bytes it compiled (their digest) */
        char hex[33];
        tthd_digest_hex(req->model_digest, hex);
        json_object_set_new(params, "model_path", json_string(req->model_path));
        json_object_set_new(params, "model_digest", json_string(hex));
    }
    const char *entry_dir = tthd_cache_worker_dir(&srv->cache);
    if (params && entry_dir && wants_file(req))
        json_object_set_new(params, "entry_dir", json_string(entry_dir));
    tthd_job *cj = tthd_job_new(TTHD_JOB_COMPILE, params);
    if (!cj) {
        tthd_respond_error(req, TTHP_INTERNAL_ERROR, "out of memory", NULL);
        return;
    }
    cj->cb = on_compile_done;
    cj->progress = on_compile_progress;
    if (json_object_get(params, "entry_dir"))
        cj->room_cache = &srv->cache;
    cj->data = req;
    req->job = cj;
    tthd_pool_submit(&srv->pool, cj);
}

/* A hit, local or remote: the client on this machine that asked copies the cache file itself
 * (the daemon serves its own uid only), else it is streamed. */
static void answer_hit(tthd_request *req, const char *state, const tthd_cache_hit *hit, const json_t *diagnostics)
{
    tthd_log(TTHD_LOG_DEBUG, "compile %s: %s %s", req->model_name, state, req->key);
    tthd_progress(req, "report", "cache", 100);
    if (hit->path && wants_file(req))
        answer_artifact(req, state, hit->artifact_len, hit->xxh64, 0, hit->path, hit->offset, hit->metadata,
                        diagnostics, NULL, NULL);
    else
        send_artifact(req, state, hit->artifact, NULL, hit->artifact_len, hit->xxh64, hit->metadata, diagnostics, NULL,
                      NULL);
}

/* The remote cache's answer to a local miss: serve what it found (now in the local cache too), or
 * compile. */
static void on_remote_answer(void *data, tthd_remote_found *found)
{
    tthd_request *req = data;
    tthd_server *srv = req->conn->srv;
    req->remote = NULL;
    req->remote_s = (double)(uv_hrtime() - req->remote_t0) / 1e9;
    if (!found) { /* absent, corrupt, Redis unreachable, or its external data differs from ours */
        submit_compile(srv, req);
        return;
    }
    if (found->blob_len > srv->cache.max_bytes) { /* too large to keep here: just serve it */
        send_artifact(req, "remote-hit", found->blob + found->art_offset, NULL, found->art_len, found->sum,
                      found->metadata, req->parse_diagnostics, NULL, NULL);
        return;
    }
    tthd_cache_hit hit;
    tthd_cache_adopt(&srv->cache, req->key, found->blob, found->blob_len, found->art_offset, found->art_len,
                     found->sum, found->metadata, found->on_disk, &hit);
    found->blob = NULL;
    if (hit.artifact || tthd_cache_lookup(&srv->cache, req->key, !wants_file(req), &hit))
        answer_hit(req, "remote-hit", &hit, req->parse_diagnostics);
    else
        submit_compile(srv, req);
    free(hit.path);
}

/* A local miss: ask the remote cache, when there is one and it is not known to be down, else
 * compile. */
static void after_local_miss(tthd_server *srv, tthd_request *req, int use_cache)
{
    if (use_cache) {
        req->remote_t0 = uv_hrtime();
        char *path = tthd_cache_entry_path(&srv->cache, req->key);
        req->remote = tthd_remote_lookup(&srv->remote, req->key, path, req->model_dir, on_remote_answer, req);
        free(path);
        if (req->remote)
            return;
    }
    submit_compile(srv, req);
}

/* A local hit built from ONNX external data: the files beside the model are hashed again in the
 * thread pool, and the hit is served only when they are the ones it was built from. */
struct tthd_ext_check {
    uv_work_t work;
    tthd_request *req;          /* NULL once the request went away */
    json_t *metadata;
    char *dir;
    int same;
};

static void ext_check_run(uv_work_t *w)
{
    tthd_ext_check *x = w->data;
    x->same = tthd_external_data_same(x->metadata, x->dir);
}

static void ext_check_done(uv_work_t *w, int status)
{
    tthd_ext_check *x = w->data;
    tthd_request *req = x->req;
    json_decref(x->metadata);
    int same = status == 0 && x->same, have_dir = x->dir != NULL;
    free(x->dir);
    free(x);
    if (!req)
        return;
    req->ext_check = NULL;
    tthd_server *srv = req->conn->srv;
    tthd_cache_hit hit;
    if (same && tthd_cache_lookup(&srv->cache, req->key, !wants_file(req), &hit)) {
        srv->cache.hits--; /* the first lookup counted it */
        answer_hit(req, "hit", &hit, req->parse_diagnostics);
        free(hit.path);
        return;
    }
    if (!same) {
        /* a model uploaded without its directory cannot say: the entry stays for those who can */
        if (have_dir) {
            tthd_log(TTHD_LOG_DEBUG, "compile %s: the external data of cache entry %s changed", req->model_name,
                     req->key);
            tthd_cache_drop(&srv->cache, req->key);
        }
        srv->cache.hits--;
        srv->cache.misses++;
    }
    after_local_miss(srv, req, 1);
}

static int start_ext_check(tthd_server *srv, tthd_request *req, const json_t *metadata)
{
    tthd_ext_check *x = calloc(1, sizeof *x);
    if (!x)
        return 0;
    x->req = req;
    x->metadata = json_deep_copy(metadata);
    x->dir = req->model_dir ? strdup(req->model_dir) : NULL;
    x->work.data = x;
    if (!x->metadata || uv_queue_work(srv->loop, &x->work, ext_check_run, ext_check_done) != 0) {
        json_decref(x->metadata);
        free(x->dir);
        free(x);
        return 0;
    }
    req->ext_check = x;
    return 1;
}

void tthd_ext_check_cancel(tthd_ext_check *x)
{
    if (x)
        x->req = NULL;
}

/* The target parsed: look the artifact up, or compile it. */
static void on_compile_target(tthd_job *job)
{
    tthd_request *req = job_done(job);
    if (!req)
        return;
    tthd_server *srv = req->conn->srv;
    const char *text = json_string_value(json_object_get(job->result, "json"));
    const json_t *kinds = json_object_get(job->result, "kinds");
    req->target = json_incref(json_object_get(job->result, "target"));
    req->target_text = text ? strdup(text) : NULL;
    const char *canonical = json_string_value(json_object_get(job->result, "string"));
    req->target_string = canonical ? strdup(canonical) : NULL;
    char *oj = options_text(req);
    if (!req->target_text || !oj || !req->target) {
        free(oj);
        tthd_respond_error(req, TTHP_INTERNAL_ERROR, "the worker's target/parse answer is incomplete", NULL);
        return;
    }
    tthd_cache_key(req->model_digest, text, oj, kinds, json_string_value(json_object_get(job->result, "compiler")),
                   req->key);
    free(oj);
    /* IR dumps are a by-product the cache does not keep; no_cache asks for a fresh compile */
    const json_t *options = json_object_get(req->params, "options");
    int use_cache = !json_is_true(json_object_get(options, "no_cache")) && !json_object_get(options, "dump_ir");
    tthd_cache_hit hit;
    uint64_t l0 = uv_hrtime();
    int found = use_cache && tthd_cache_lookup(&srv->cache, req->key, !wants_file(req), &hit);
    req->lookup_s = (double)(uv_hrtime() - l0) / 1e9;
    req->parse_diagnostics = json_incref(json_object_get(job->result, "diagnostics"));
    if (found && json_array_size(json_object_get(hit.metadata, "external_data"))) {
        /* its external data files are hashed again before it is served, in the thread pool */
        free(hit.path);
        if (start_ext_check(srv, req, hit.metadata))
            return;
        found = 0;
    }
    if (found) {
        answer_hit(req, "hit", &hit, req->parse_diagnostics);
        free(hit.path);
        return;
    }
    after_local_miss(srv, req, use_cache);
}

/* The model's digest is known (uploaded, or model.path read or remembered): parse the target next. */
static void model_complete(tthd_server *srv, tthd_request *req)
{
    tthd_progress(req, "report", "target", 5);
    if (!submit_parse(srv, req, on_compile_target))
        tthd_respond_error(req, TTHP_INTERNAL_ERROR, "out of memory", NULL);
}

/* ---- ONNX external data uploaded with the model (protocol/PROTOCOL.md, compile) ---------- */

#define TTHD_MAX_EXT_FILES 4096

/* model.external_data: [{"location", "size"}], each location valid and named once, the whole
 * upload within the request limit; sets req->ext_files and req->upload_size. 0, or -1 with msg. */
static int check_ext_files(const tthd_server *srv, tthd_request *req, const json_t *ext, char *msg, size_t len)
{
    if (!json_is_array(ext) || json_array_size(ext) == 0 || json_array_size(ext) > TTHD_MAX_EXT_FILES) {
        snprintf(msg, len, "model.external_data must be an array of 1 to %d {\"location\", \"size\"}", TTHD_MAX_EXT_FILES);
        return -1;
    }
    size_t i, total = req->model_size;
    const json_t *f;
    json_array_foreach(ext, i, f) {
        const char *loc = json_string_value(json_object_get(f, "location"));
        const json_t *sz = json_object_get(f, "size");
        if (!tthp_data_location_valid(loc)) {
            snprintf(msg, len, "model.external_data[%zu].location %s%.200s%s is not a relative path inside the model's "
                     "directory", i, loc ? "'" : "", loc ? loc : "(missing)", loc ? "'" : "");
            return -1;
        }
        if (!json_is_integer(sz) || json_integer_value(sz) < 0 ||
            (uint64_t)json_integer_value(sz) > srv->opt.max_request - total) {
            snprintf(msg, len, "model.external_data[%zu].size must be a byte count, and the model with its data at "
                     "most the request limit (%zu)", i, srv->opt.max_request);
            return -1;
        }
        for (size_t j = 0; j < i; j++)
            if (strcmp(json_string_value(json_object_get(json_array_get(ext, j), "location")), loc) == 0) {
                snprintf(msg, len, "model.external_data names '%.200s' twice", loc);
                return -1;
            }
        total += (size_t)json_integer_value(sz);
    }
    req->ext_files = ext;
    req->upload_size = total;
    return 0;
}

/* mkdir -p of the directories in front of rel's last part, under dir */
static int make_parents(const char *dir, const char *rel)
{
    char path[PATH_MAX];
    for (const char *s = strchr(rel, '/'); s; s = strchr(s + 1, '/')) {
        if (snprintf(path, sizeof path, "%s/%.*s", dir, (int)(s - rel), rel) >= (int)sizeof path)
            return -1;
        if (mkdir(path, 0700) != 0 && errno != EEXIST)
            return -1;
    }
    return 0;
}

/* ---- an upload streamed to disk (docs/cache.md, "Uploads") ----
 * The model and its external data files go, chunk by chunk as they arrive, into a private
 * directory under $TMPDIR (/tmp): <dir>/UPLOAD_MODEL_NAME, then each file at its location; the
 * model's digest is taken on the way. The compiling worker reads them there as it reads a model
 * named by path, and the directory goes with the request. Nothing of the upload stays in memory
 * but the chunk being written. */
#define UPLOAD_MODEL_NAME ".tthd-model.onnx"

static void remove_tree(const char *dir);

/* the directory, the model's file open, the digest started: 0, or the error code with msg */
static int upload_begin(tthd_request *req, char *msg, size_t len)
{
    const char *tmp = getenv("TMPDIR");
    const char *base = tmp && *tmp ? tmp : "/tmp";
    char dir[512]; /* mkdtemp(3)'s template: it replaces the six X with a unique name */
    if (snprintf(dir, sizeof dir, "%s/tthd-upload-XXXXXX", base) >= (int)sizeof dir) {
        snprintf(msg, len, "TMPDIR is too long for the upload's directory");
        return TTHP_INTERNAL_ERROR;
    }
    struct statvfs fs;
    if (statvfs(base, &fs) == 0 &&
        (uint64_t)fs.f_bavail * fs.f_frsize < (uint64_t)req->upload_size + (64u << 20)) {
        snprintf(msg, len, "the upload (%zu bytes) does not fit the free space of %.300s (%" PRIu64 " bytes)",
                 req->upload_size, base, (uint64_t)fs.f_bavail * fs.f_frsize);
        return TTHP_REQUEST_TOO_LARGE;
    }
    if (!mkdtemp(dir)) {
        snprintf(msg, len, "cannot create a directory for the upload in %.300s: %s", dir, strerror(errno));
        return TTHP_INTERNAL_ERROR;
    }
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, UPLOAD_MODEL_NAME);
    req->ext_dir = strdup(dir); /* removed with the request (tthd_method_remove_ext_dir) */
    req->model_path = strdup(path);
    req->upload_hash = XXH3_createState();
    req->upload_fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (!req->ext_dir || !req->model_path || !req->upload_hash || XXH3_128bits_reset(req->upload_hash) != XXH_OK ||
        req->upload_fd < 0) {
        snprintf(msg, len, "cannot start the upload in %.300s: %s", dir, req->upload_fd < 0 ? strerror(errno) :
                 "out of memory");
        if (!req->ext_dir)
            remove_tree(dir);
        return TTHP_INTERNAL_ERROR;
    }
    req->upload_file = 0;
    req->upload_left = req->model_size;
    return 0;
}

/* the current file done: close it and open the next one (empty ones are made on the way).
 * 0, or -1 with msg */
static int upload_next_file(tthd_request *req, char *msg, size_t len)
{
    while (req->upload_left == 0) {
        if (req->upload_fd >= 0 && close(req->upload_fd) != 0) {
            req->upload_fd = -1;
            snprintf(msg, len, "cannot write the upload under %.300s: %s", req->ext_dir, strerror(errno));
            return -1;
        }
        req->upload_fd = -1;
        if (req->upload_file >= json_array_size(req->ext_files))
            return 0; /* all of it */
        const json_t *f = json_array_get(req->ext_files, req->upload_file++);
        const char *loc = json_string_value(json_object_get(f, "location"));
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", req->ext_dir, loc);
        req->upload_fd = make_parents(req->ext_dir, loc) == 0
                             ? open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600) : -1;
        if (req->upload_fd < 0) {
            snprintf(msg, len, "cannot write the external data file '%.200s' under %.200s: %s", loc, req->ext_dir,
                     strerror(errno));
            return -1;
        }
        req->upload_left = (size_t)json_integer_value(json_object_get(f, "size"));
    }
    return 0;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    return flag == FTW_DP ? rmdir(path) : unlink(path);
}

static void remove_tree(const char *dir)
{
    if (nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
        tthd_log(TTHD_LOG_WARN, "cannot remove %s: %s", dir, strerror(errno));
}

void tthd_method_remove_ext_dir(tthd_request *req)
{
    if (!req->ext_dir)
        return;
    remove_tree(req->ext_dir);
    free(req->ext_dir);
    req->ext_dir = NULL;
}

static void m_compile(tthd_server *srv, tthd_request *req)
{
    req->start_ns = uv_hrtime();
    const json_t *model = json_object_get(req->params, "model");
    const char *name = json_string_value(json_object_get(model, "name"));
    const json_t *size = json_object_get(model, "size");
    char msg[512];
    if (!tthp_model_name_valid(name)) {
        snprintf(msg, sizeof msg, "model.name must be a C identifier of at most %d characters", TTHP_MAX_MODEL_NAME);
        tthd_respond_error(req, TTHP_INVALID_PARAMS, msg, NULL);
        return;
    }
    if (!json_is_integer(size) || json_integer_value(size) < 1) {
        tthd_respond_error(req, TTHP_INVALID_PARAMS, "model.size must be a positive integer", NULL);
        return;
    }
    const char *path = json_string_value(json_object_get(model, "path"));
    /* the limit is on what comes through the socket: a model read by path has none but ONNX's */
    if (!path && (uint64_t)json_integer_value(size) > srv->opt.max_request) {
        snprintf(msg, sizeof msg, "model of %" JSON_INTEGER_FORMAT " bytes is larger than the request limit (%zu)",
                 json_integer_value(size), srv->opt.max_request);
        tthd_respond_error(req, TTHP_REQUEST_TOO_LARGE, msg, NULL);
        return;
    }
    snprintf(req->model_name, sizeof req->model_name, "%s", name);
    req->model_size = req->upload_size = (size_t)json_integer_value(size);
    const json_t *ext = json_object_get(model, "external_data");
    if (ext && (path || check_ext_files(srv, req, ext, msg, sizeof msg) != 0)) {
        tthd_respond_error(req, TTHP_INVALID_PARAMS,
                           path ? "model.external_data comes with an upload, not with model.path" : msg, NULL);
        return;
    }
    if (path) {
        /* a client on this machine names the model file instead of uploading it (the daemon
         * serves its own user only, who may read it anyway) */
        if (read_model_file(srv, req, path, msg, sizeof msg) != 0)
            tthd_respond_error(req, TTHP_INVALID_PARAMS, msg, NULL);
        return;
    }
    int code = upload_begin(req, msg, sizeof msg);
    if (code != 0) {
        tthd_respond_error(req, code, msg, NULL);
        return;
    }
    req->state = TTHD_REQ_UPLOAD;
    tthd_progress(req, "begin", "upload", 0);
}

int tthd_method_chunk_ok(tthd_request *req, json_int_t offset, json_int_t size, json_int_t total, char *msg,
                         size_t len)
{
    if (total != (json_int_t)req->upload_size) {
        snprintf(msg, len, "upload total %" JSON_INTEGER_FORMAT " differs from model.size %zu%s", total,
                 req->upload_size, req->ext_files ? " plus the external data's sizes" : "");
        return -1;
    }
    if (offset != (json_int_t)req->model_got) {
        snprintf(msg, len, "upload chunk at offset %" JSON_INTEGER_FORMAT ", expected %zu", offset, req->model_got);
        return -1;
    }
    if (size < 1 || (size_t)size > req->upload_size - req->model_got) {
        snprintf(msg, len, "upload chunk of %" JSON_INTEGER_FORMAT " bytes does not fit the model", size);
        return -1;
    }
    return 0;
}

void tthd_method_upload(tthd_server *srv, tthd_request *req, const uint8_t *data, size_t len)
{
    char msg[600];
    req->model_got += len;
    while (len > 0) {
        size_t n = len < req->upload_left ? len : req->upload_left;
        int rc = tth_file_write_all(req->upload_fd, data, n);
        if (rc != 0) {
            snprintf(msg, sizeof msg, "cannot write the upload under %.300s: %s", req->ext_dir, strerror(-rc));
            tthd_respond_error(req, TTHP_INTERNAL_ERROR, msg, NULL);
            return;
        }
        if (req->upload_file == 0) /* the model itself: its digest */
            XXH3_128bits_update(req->upload_hash, data, n);
        data += n;
        len -= n;
        req->upload_left -= n;
        if (req->upload_left == 0) {
            if (req->upload_file == 0)
                XXH128_canonicalFromHash((XXH128_canonical_t *)req->model_digest, XXH3_128bits_digest(req->upload_hash));
            if (upload_next_file(req, msg, sizeof msg) != 0) {
                tthd_respond_error(req, TTHP_INTERNAL_ERROR, msg, NULL);
                return;
            }
        }
    }
    if (req->model_got < req->upload_size) {
        tthd_progress(req, "report", "upload", (int)(req->model_got * 5 / req->upload_size));
        return;
    }
    /* the files' directory is the model's directory when there is external data: the worker
     * reads it there (a model uploaded without its data has none, as before) */
    if (req->ext_files && !(req->model_dir = strdup(req->ext_dir))) {
        tthd_respond_error(req, TTHP_INTERNAL_ERROR, "out of memory", NULL);
        return;
    }
    model_complete(srv, req);
}

/* ---- dispatch ------------------------------------------------------------------------ */

static const method_fn handlers[TTHP_METHOD_COUNT] = {
    [TTHP_M_INITIALIZE] = m_initialize,
    [TTHP_M_SHUTDOWN] = m_shutdown,
    [TTHP_M_STATUS] = m_status,
    [TTHP_M_TARGET_PARSE] = m_target_parse,
    [TTHP_M_TARGETS_LIST] = m_list,
    [TTHP_M_TAGS_LIST] = m_list,
    [TTHP_M_PLUGINS_LIST] = m_list,
    [TTHP_M_TARGETS_RECENT] = m_targets_recent,
    [TTHP_M_CACHE_CLEAR] = m_cache_clear,
    [TTHP_M_COMPILE] = m_compile,
};

void tthd_method_dispatch(tthd_server *srv, tthd_request *req)
{
    method_fn fn = handlers[req->method->id];
    if (!fn) {
        tthd_respond_error(req, TTHP_METHOD_NOT_FOUND, "not a request method", NULL);
        return;
    }
    fn(srv, req);
}
