/* remote.c: the shared second-level cache on Redis (docs/cache.md, "The remote cache on Redis").
 *
 * Consulted after a local miss and written after every compile, so daemons on many machines
 * compile a model once between them. An entry is the local cache file's bytes (tthd_cache_blob:
 * lengths and an XXH64 over metadata and artifact) under "tth:artifact:<key>", stored with a TTL
 * that each hit renews. Everything that talks to Redis runs in libuv's thread pool with hiredis's
 * blocking calls and socket timeouts; the loop sees only results. Redis being down, slow or
 * answering errors never fails a compile: the operation counts as a miss, one warning is logged,
 * and nothing is tried again before the retry time. A value that fails its check is a miss and
 * is deleted; the compile that follows stores a good one. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include <hiredis/hiredis.h>
#include <xxhash.h>

#include "tthd.h"

#define KEY_PREFIX "tth:artifact:"

enum outcome { R_HIT, R_MISS, R_CORRUPT, R_TOO_BIG, R_STORED, R_ERROR, R_UNREACHABLE };

typedef struct remote_op {
    uv_work_t req;
    tthd_remote *r;
    char key[sizeof KEY_PREFIX + 33];
    /* a lookup */
    tthd_remote_cb cb;          /* NULL once cancelled */
    void *data;
    redisReply *reply;          /* the GET's value, kept until the answer */
    json_t *metadata;
    size_t art_offset, art_len;
    uint64_t sum;
    /* a store */
    uint8_t *blob;
    size_t blob_len;
    enum outcome outcome;
    char err[200];
} remote_op;

struct tthd_remote_get {
    remote_op op;
};

void tthd_remote_init(tthd_remote *r, uv_loop_t *loop, const tthd_remote_config *cfg)
{
    memset(r, 0, sizeof *r);
    r->loop = loop;
    r->cfg = cfg && (cfg->host || cfg->unix_path) ? cfg : NULL;
    uv_mutex_init(&r->lock);
    if (r->cfg)
        tthd_log(TTHD_LOG_INFO, "remote cache: %s (ttl %" PRIu64 " s, entries up to %" PRIu64 " bytes)",
                 r->cfg->shown, r->cfg->ttl, r->cfg->max_bytes);
}

void tthd_remote_free(tthd_remote *r)
{
    for (int i = 0; i < r->n_idle; i++)
        redisFree(r->idle[i]);
    r->n_idle = 0;
    uv_mutex_destroy(&r->lock);
}

/* ---- in the thread pool ---------------------------------------------------------------- */

static struct timeval seconds_tv(double s)
{
    struct timeval tv = {(time_t)s, (suseconds_t)((s - (double)(time_t)s) * 1e6)};
    return tv;
}

/* A reply that must be +OK, else an error text */
static int expect_ok(redisContext *c, redisReply *rep, const char *what, char *err, size_t len)
{
    int ok = rep && rep->type == REDIS_REPLY_STATUS;
    if (!ok)
        snprintf(err, len, "%s: %s", what,
                 !rep ? (c->errstr[0] ? c->errstr : "no answer")
                      : rep->type == REDIS_REPLY_ERROR ? rep->str : "unexpected answer");
    freeReplyObject(rep);
    return ok ? 0 : -1;
}

/* A new connection: connected, authenticated, its database selected; NULL with err */
static redisContext *connect_new(const tthd_remote_config *cfg, char *err, size_t len)
{
    struct timeval tv = seconds_tv(cfg->timeout);
    redisContext *c = cfg->unix_path ? redisConnectUnixWithTimeout(cfg->unix_path, tv)
                                     : redisConnectWithTimeout(cfg->host, cfg->port, tv);
    if (!c || c->err) {
        snprintf(err, len, "cannot connect: %s", c ? c->errstr : "out of memory");
        if (c)
            redisFree(c);
        return NULL;
    }
    if (redisSetTimeout(c, tv) != REDIS_OK) {
        snprintf(err, len, "cannot set the socket timeout");
        redisFree(c);
        return NULL;
    }
    if (cfg->password) {
        redisReply *rep = cfg->user ? redisCommand(c, "AUTH %s %s", cfg->user, cfg->password)
                                    : redisCommand(c, "AUTH %s", cfg->password);
        if (expect_ok(c, rep, "AUTH", err, len) != 0) {
            redisFree(c);
            return NULL;
        }
    }
    if (cfg->db && expect_ok(c, redisCommand(c, "SELECT %d", cfg->db), "SELECT", err, len) != 0) {
        redisFree(c);
        return NULL;
    }
    return c;
}

/* Run one command (argv form) on an idle connection, or a new one; a connection that turns out
 * broken (Redis restarted since it was last used) is replaced once. NULL: unreachable, err says
 * why. An error answer is returned as such (the connection stays usable). */
static redisReply *command(tthd_remote *r, int argc, const char **argv, const size_t *lens, char *err, size_t len)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        redisContext *c = NULL;
        uv_mutex_lock(&r->lock);
        if (r->n_idle)
            c = r->idle[--r->n_idle];
        uv_mutex_unlock(&r->lock);
        int reused = c != NULL;
        if (!c && !(c = connect_new(r->cfg, err, len)))
            return NULL;
        redisReply *rep = redisCommandArgv(c, argc, argv, lens);
        if (!rep) {
            snprintf(err, len, "%s: %s", argv[0], c->errstr[0] ? c->errstr : "connection lost");
            redisFree(c);
            if (reused)
                continue;
            return NULL;
        }
        uv_mutex_lock(&r->lock);
        if (r->n_idle < (int)(sizeof r->idle / sizeof *r->idle)) {
            r->idle[r->n_idle++] = c;
            c = NULL;
        }
        uv_mutex_unlock(&r->lock);
        if (c)
            redisFree(c);
        return rep;
    }
    return NULL;
}

static void set_ttl(remote_op *op)
{
    char ttl[24], err[200];
    snprintf(ttl, sizeof ttl, "%" PRIu64, op->r->cfg->ttl);
    const char *argv[] = {"EXPIRE", op->key, ttl};
    size_t lens[] = {6, strlen(op->key), strlen(ttl)};
    freeReplyObject(command(op->r, 3, argv, lens, err, sizeof err));
}

static void lookup_run(uv_work_t *req)
{
    remote_op *op = req->data;
    const char *argv[] = {"GET", op->key};
    size_t lens[] = {3, strlen(op->key)};
    redisReply *rep = command(op->r, 2, argv, lens, op->err, sizeof op->err);
    if (!rep) {
        op->outcome = R_UNREACHABLE;
        return;
    }
    if (rep->type == REDIS_REPLY_NIL) {
        op->outcome = R_MISS;
    } else if (rep->type != REDIS_REPLY_STRING) {
        snprintf(op->err, sizeof op->err, "GET: %s", rep->type == REDIS_REPLY_ERROR ? rep->str : "not a string");
        op->outcome = R_ERROR;
    } else if (tthd_cache_blob_check((const uint8_t *)rep->str, rep->len, &op->metadata, &op->art_offset,
                                     &op->art_len) != 0) {
        op->outcome = R_CORRUPT;
        const char *del[] = {"DEL", op->key};
        size_t dlens[] = {3, strlen(op->key)};
        freeReplyObject(command(op->r, 2, del, dlens, op->err, sizeof op->err));
    } else {
        op->outcome = R_HIT;
        op->sum = XXH64(rep->str + op->art_offset, op->art_len, 0);
        op->reply = rep;
        rep = NULL;
        set_ttl(op); /* served: it lives on */
    }
    freeReplyObject(rep);
}

static void store_run(uv_work_t *req)
{
    remote_op *op = req->data;
    char ttl[24];
    snprintf(ttl, sizeof ttl, "%" PRIu64, op->r->cfg->ttl);
    const char *argv[] = {"SET", op->key, (const char *)op->blob, "EX", ttl};
    size_t lens[] = {3, strlen(op->key), op->blob_len, 2, strlen(ttl)};
    redisReply *rep = command(op->r, 5, argv, lens, op->err, sizeof op->err);
    if (!rep)
        op->outcome = R_UNREACHABLE;
    else if (rep->type == REDIS_REPLY_STATUS)
        op->outcome = R_STORED;
    else {
        snprintf(op->err, sizeof op->err, "SET: %s", rep->type == REDIS_REPLY_ERROR ? rep->str : "unexpected answer");
        op->outcome = R_ERROR;
    }
    freeReplyObject(rep);
}

/* ---- on the loop ----------------------------------------------------------------------- */

/* May an operation be tried now? (not while down, until the retry time) */
static int usable(tthd_remote *r)
{
    if (!r->cfg)
        return 0;
    if (r->down && uv_now(r->loop) < r->retry_at_ms) {
        r->skipped++;
        return 0;
    }
    return 1;
}

/* Bookkeeping of a finished operation: the down state and its one warning. */
static void settle(tthd_remote *r, const remote_op *op)
{
    uint64_t now = uv_now(r->loop), period = (uint64_t)(r->cfg->retry * 1000);
    if (op->outcome == R_UNREACHABLE) {
        r->errors++;
        snprintf(r->last_error, sizeof r->last_error, "%s", op->err);
        if (!r->down)
            tthd_log(TTHD_LOG_WARN, "remote cache %s unreachable (%s): compiling with the local cache only; "
                     "trying again in %g s", r->cfg->shown, op->err, r->cfg->retry);
        r->down = 1;
        r->retry_at_ms = now + period;
        return;
    }
    if (r->down)
        tthd_log(TTHD_LOG_INFO, "remote cache %s reachable again", r->cfg->shown);
    r->down = 0;
    if (op->outcome == R_ERROR) {
        r->errors++;
        snprintf(r->last_error, sizeof r->last_error, "%s", op->err);
        if (!r->warned_at_ms || now >= r->warned_at_ms + period) {
            tthd_log(TTHD_LOG_WARN, "remote cache %s: %s (further errors for %g s are only counted)",
                     r->cfg->shown, op->err, r->cfg->retry);
            r->warned_at_ms = now;
        }
    }
}

static void op_free(remote_op *op)
{
    freeReplyObject(op->reply);
    json_decref(op->metadata);
    free(op->blob);
    free(op);
}

static void lookup_done(uv_work_t *req, int status)
{
    remote_op *op = req->data;
    tthd_remote *r = op->r;
    if (status == UV_ECANCELED) { /* cancelled before it ran: nothing happened */
        op_free(op);
        return;
    }
    if (status != 0) {
        op->outcome = R_ERROR;
        snprintf(op->err, sizeof op->err, "%s", uv_strerror(status));
    }
    settle(r, op);
    switch (op->outcome) {
    case R_HIT: r->hits++; break;
    case R_CORRUPT:
        r->corrupt++;
        r->misses++;
        tthd_log(TTHD_LOG_WARN, "remote cache %s: entry %s failed its check; deleted, compiling it again",
                 r->cfg->shown, op->key + strlen(KEY_PREFIX));
        break;
    default: r->misses++; break;
    }
    if (op->cb) {
        int hit = op->outcome == R_HIT;
        op->cb(op->data, hit ? (const uint8_t *)op->reply->str + op->art_offset : NULL, hit ? op->art_len : 0,
               op->sum, hit ? op->metadata : NULL);
    }
    op_free(op);
}

static void store_done(uv_work_t *req, int status)
{
    remote_op *op = req->data;
    if (status != 0) {
        op->outcome = R_ERROR;
        snprintf(op->err, sizeof op->err, "%s", uv_strerror(status));
    }
    if (status != UV_ECANCELED)
        settle(op->r, op);
    if (op->outcome == R_STORED)
        op->r->stores++;
    op_free(op);
}

tthd_remote_get *tthd_remote_lookup(tthd_remote *r, const char *key, tthd_remote_cb cb, void *data)
{
    if (!usable(r))
        return NULL;
    tthd_remote_get *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    remote_op *op = &g->op;
    op->r = r;
    snprintf(op->key, sizeof op->key, KEY_PREFIX "%s", key);
    op->cb = cb;
    op->data = data;
    op->req.data = op;
    if (uv_queue_work(r->loop, &op->req, lookup_run, lookup_done) != 0) {
        free(g);
        return NULL;
    }
    return g;
}

void tthd_remote_cancel(tthd_remote_get *g)
{
    g->op.cb = NULL;
    g->op.data = NULL;
    uv_cancel((uv_req_t *)&g->op.req); /* fails once it runs: then its answer is dropped */
}

void tthd_remote_store(tthd_remote *r, const char *key, const uint8_t *artifact, size_t len, const json_t *metadata)
{
    if (!r->cfg)
        return;
    if (len > r->cfg->max_bytes) {
        r->too_big++;
        tthd_log(TTHD_LOG_DEBUG, "remote cache: %s not stored: %zu bytes, above max_bytes %" PRIu64, key, len,
                 r->cfg->max_bytes);
        return;
    }
    if (!usable(r))
        return;
    remote_op *op = calloc(1, sizeof *op);
    if (!op)
        return;
    op->r = r;
    snprintf(op->key, sizeof op->key, KEY_PREFIX "%s", key);
    op->blob = tthd_cache_blob(metadata, artifact, len, &op->blob_len, NULL);
    op->req.data = op;
    if (!op->blob || op->blob_len > r->cfg->max_bytes ||
        uv_queue_work(r->loop, &op->req, store_run, store_done) != 0) {
        if (op->blob)
            r->too_big++;
        op_free(op);
    }
}

json_t *tthd_remote_status(const tthd_remote *r)
{
    if (!r->cfg)
        return json_null();
    return json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "address", r->cfg->shown,
                     "state", r->down ? "down" : "up", "lastError", r->last_error, "hits", (json_int_t)r->hits,
                     "misses", (json_int_t)r->misses, "stores", (json_int_t)r->stores, "errors",
                     (json_int_t)r->errors, "corrupt", (json_int_t)r->corrupt, "skipped", (json_int_t)r->skipped,
                     "tooBig", (json_int_t)r->too_big, "ttl", (json_int_t)r->cfg->ttl, "maxBytes",
                     (json_int_t)r->cfg->max_bytes);
}
