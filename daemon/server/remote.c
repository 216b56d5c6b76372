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
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <unistd.h>

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
    char *local_path;           /* where a value found goes in the local cache, or NULL */
    char *model_dir;            /* where the model's external data files are, or NULL */
    char *file;                 /* a store of a local cache file: read in the thread pool */
    int untried;                /* that file could not be sent (unreadable, too big): Redis not asked */
    int on_disk;                /* it went there */
    json_t *metadata;
    size_t art_offset, art_len;
    uint64_t sum;
    /* the value: a store's, or the lookup's found */
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

/* ---- the value's bytes, straight between the socket and our buffer ---------------------- *
 * hiredis 0.14 reads a reply 16 KiB at a time into a buffer that grows by 1 MiB steps once past
 * 1 MiB, copying it each time: a 70 MB value took 0.6 s to GET. So GET and SET of a value write the
 * command (RESP: "*N\r\n" then "$len\r\nbytes\r\n" per argument) and read the answer on the
 * connection's socket themselves, the value read in one buffer of its announced size. The
 * socket's timeouts (redisSetTimeout) still apply; hiredis's own buffers are empty between
 * commands, so the connection stays usable for hiredis afterwards. */

/* -1, or -2 when the socket's timeout ended the wait (then the connection is not retried: a
 * stalled Redis would cost a second timeout; docs/cache.md) */
static int raw_fail(char *err, size_t len, const char *what, int e)
{
    int timed_out = e == EAGAIN || e == EWOULDBLOCK;
    snprintf(err, len, "%s: %s", what, timed_out ? "timed out" : e ? strerror(e) : "connection closed");
    return timed_out ? -2 : -1;
}

static int raw_write(int fd, const char *const *argv, const size_t *lens, int argc, char *err, size_t len)
{
    char heads[8][48];
    struct iovec iov[2 + 3 * 8];
    int n = 0, h = 0;
    int k = snprintf(heads[h], sizeof heads[h], "*%d\r\n", argc);
    iov[n++] = (struct iovec){heads[h++], (size_t)k};
    for (int i = 0; i < argc && i < 7; i++) {
        k = snprintf(heads[h], sizeof heads[h], "$%zu\r\n", lens[i]);
        iov[n++] = (struct iovec){heads[h++], (size_t)k};
        iov[n++] = (struct iovec){(void *)argv[i], lens[i]};
        iov[n++] = (struct iovec){"\r\n", 2};
    }
    struct iovec *v = iov;
    while (n > 0) {
        ssize_t w = writev(fd, v, n > IOV_MAX ? IOV_MAX : n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return raw_fail(err, len, argv[0], w < 0 ? errno : 0);
        while (n > 0 && (size_t)w >= v->iov_len) {
            w -= (ssize_t)v->iov_len;
            v++;
            n--;
        }
        if (n > 0) {
            v->iov_base = (char *)v->iov_base + w;
            v->iov_len -= (size_t)w;
        }
    }
    return 0;
}

static int raw_read(int fd, char *buf, size_t n, const char *what, char *err, size_t len)
{
    while (n) {
        ssize_t r = read(fd, buf, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return raw_fail(err, len, what, r < 0 ? errno : 0);
        buf += r;
        n -= (size_t)r;
    }
    return 0;
}

/* One reply line (without its CRLF), a byte at a time so nothing after it is consumed */
static int raw_line(int fd, char *line, size_t cap, const char *what, char *err, size_t len)
{
    size_t n = 0;
    for (;;) {
        int rc = raw_read(fd, line + n, 1, what, err, len);
        if (rc != 0)
            return rc;
        if (line[n] == '\n' && n > 0 && line[n - 1] == '\r') {
            line[n - 1] = '\0';
            return 0;
        }
        if (++n == cap) {
            snprintf(err, len, "%s: an answer line too long", what);
            return -1;
        }
    }
}

/* Take a connection for a raw command (as command() does); NULL with err */
static redisContext *take(tthd_remote *r, int *reused, char *err, size_t len)
{
    redisContext *c = NULL;
    uv_mutex_lock(&r->lock);
    if (r->n_idle)
        c = r->idle[--r->n_idle];
    uv_mutex_unlock(&r->lock);
    *reused = c != NULL;
    return c ? c : connect_new(r->cfg, err, len);
}

static void give(tthd_remote *r, redisContext *c)
{
    uv_mutex_lock(&r->lock);
    if (r->n_idle < (int)(sizeof r->idle / sizeof *r->idle)) {
        r->idle[r->n_idle++] = c;
        c = NULL;
    }
    uv_mutex_unlock(&r->lock);
    if (c)
        redisFree(c);
}

/* Write a raw command and read the first line of its answer, on a connection taken as command()
 * takes one (a reused one found broken is replaced once, a stalled one is not): the connection,
 * its answer's rest unread, or NULL with err. */
static redisContext *raw_command(tthd_remote *r, const char *const *argv, const size_t *lens, int argc, char *line,
                                 size_t cap, char *err, size_t len)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        int reused;
        redisContext *c = take(r, &reused, err, len);
        if (!c)
            return NULL;
        int rc = raw_write(c->fd, argv, lens, argc, err, len);
        if (rc == 0)
            rc = raw_line(c->fd, line, cap, argv[0], err, len);
        if (rc == 0)
            return c;
        redisFree(c);
        if (!reused || rc == -2) /* a stalled Redis, not a stale connection: no second try */
            return NULL;
    }
    return NULL;
}

/* GET key into a malloc'd buffer: 1 (*val, *n), 0 (no such key), -1 unreachable, -2 an error
 * answer (in err). */
static int raw_get(tthd_remote *r, const char *key, uint8_t **val, size_t *n, char *err, size_t len)
{
    const char *argv[] = {"GET", key};
    size_t lens[] = {3, strlen(key)};
    char line[512];
    redisContext *c = raw_command(r, argv, lens, 2, line, sizeof line, err, len);
    if (!c)
        return -1;
    if (line[0] == '-') {
        snprintf(err, len, "GET: %.160s", line + 1);
        give(r, c);
        return -2;
    }
    char *end;
    long long size = line[0] == '$' ? strtoll(line + 1, &end, 10) : -2;
    if (size == -1) {
        give(r, c);
        return 0;
    }
    /* a value is at most 512 MiB (Redis's own limit); anything else is not one of ours */
    uint8_t *buf = size >= 0 && *end == '\0' && size <= (512ll << 20) ? malloc((size_t)size + 2) : NULL;
    if (!buf) {
        snprintf(err, len, "GET: unexpected answer '%.40s'", line);
        redisFree(c); /* the rest of the answer is unread: the connection is spoiled */
        return -2;
    }
    if (raw_read(c->fd, (char *)buf, (size_t)size + 2, "GET", err, len) != 0) {
        free(buf);
        redisFree(c);
        return -1;
    }
    give(r, c);
    *val = buf;
    *n = (size_t)size;
    return 1;
}

/* SET key value EX ttl: 0, -1 unreachable, -2 an error answer */
static int raw_set(tthd_remote *r, const char *key, const uint8_t *val, size_t n, char *err, size_t len)
{
    char ttl[24];
    snprintf(ttl, sizeof ttl, "%" PRIu64, r->cfg->ttl);
    const char *argv[] = {"SET", key, (const char *)val, "EX", ttl};
    size_t lens[] = {3, strlen(key), n, 2, strlen(ttl)};
    char line[512];
    redisContext *c = raw_command(r, argv, lens, 5, line, sizeof line, err, len);
    if (!c)
        return -1;
    give(r, c);
    if (line[0] == '+')
        return 0;
    snprintf(err, len, "SET: %.160s", line[0] == '-' ? line + 1 : line);
    return -2;
}

/* Run one small command (argv form) through hiredis on an idle connection, or a new one; a
 * connection that turns out broken (Redis restarted since it was last used) is replaced once;
 * one that times out is not (Redis is stalled: a new connection would wait as long again).
 * NULL: unreachable, err says why. An error answer is returned as such. */
static redisReply *command(tthd_remote *r, int argc, const char **argv, const size_t *lens, char *err, size_t len)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        int reused;
        redisContext *c = take(r, &reused, err, len);
        if (!c)
            return NULL;
        redisReply *rep = redisCommandArgv(c, argc, argv, lens);
        if (!rep) {
            /* hiredis 0.14 reports the socket's timeout as an I/O error with errno EAGAIN */
            int timed_out = c->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK);
            snprintf(err, len, "%s: %s", argv[0],
                     timed_out ? "timed out" : c->errstr[0] ? c->errstr : "connection lost");
            redisFree(c);
            if (reused && !timed_out)
                continue;
            return NULL;
        }
        give(r, c);
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

/* The value as the local cache's file: a temporary file renamed into place. Not fsync'd, unlike a
 * compiled entry: Redis still has it, and every read of a cache file is verified. */
static int write_local(const char *path, const uint8_t *p, size_t n)
{
    static unsigned seq;
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp-%d-%u", path, (int)getpid(), __atomic_fetch_add(&seq, 1, __ATOMIC_RELAXED));
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    int rc = 0;
    while (n && rc == 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            rc = -1;
        else {
            p += w;
            n -= (size_t)w;
        }
    }
    if (close(fd) != 0 || rc != 0 || rename(tmp, path) != 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

static void lookup_run(uv_work_t *req)
{
    remote_op *op = req->data;
    uint8_t *val = NULL;
    size_t n = 0;
    int rc = raw_get(op->r, op->key, &val, &n, op->err, sizeof op->err);
    if (rc == -1) {
        op->outcome = R_UNREACHABLE;
    } else if (rc == -2) {
        op->outcome = R_ERROR;
    } else if (rc == 0) {
        op->outcome = R_MISS;
    } else if (tthd_cache_blob_check(val, n, &op->metadata, &op->art_offset, &op->art_len) != 0) {
        op->outcome = R_CORRUPT;
        const char *del[] = {"DEL", op->key};
        size_t dlens[] = {3, strlen(op->key)};
        freeReplyObject(command(op->r, 2, del, dlens, op->err, sizeof op->err));
    } else {
        op->outcome = R_HIT;
        if (!tthd_external_data_same(op->metadata, op->model_dir)) {
            op->outcome = R_MISS; /* built from other external data than ours: good, but not for us */
            free(val);
            return;
        }
        op->sum = XXH64(val + op->art_offset, op->art_len, 0);
        op->blob = val;
        op->blob_len = n;
        val = NULL;
        set_ttl(op); /* served: it lives on; the local copy is written once the cache made room */
    }
    free(val);
}

/* A hit's local copy, after lookup_done reserved its room */
static void copy_run(uv_work_t *req)
{
    remote_op *op = req->data;
    op->on_disk = write_local(op->local_path, op->blob, op->blob_len) == 0;
}

static void answer_lookup(remote_op *op);

static void copy_done(uv_work_t *req, int status)
{
    remote_op *op = req->data;
    (void)status;
    if (op->r->room)
        tthd_cache_unreserve(op->r->room, op->blob_len); /* the entry takes it over (tthd_cache_adopt) */
    answer_lookup(op);
}

static void store_run(uv_work_t *req)
{
    remote_op *op = req->data;
    if (op->file) {
        op->blob = tth_file_read(op->file, &op->blob_len);
        if (!op->blob || op->blob_len > op->r->cfg->max_bytes) {
            op->outcome = op->blob ? R_TOO_BIG : R_ERROR;
            op->untried = 1;
            return;
        }
    }
    int rc = raw_set(op->r, op->key, op->blob, op->blob_len, op->err, sizeof op->err);
    op->outcome = rc == 0 ? R_STORED : rc == -1 ? R_UNREACHABLE : R_ERROR;
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

static const char *state_name(const tthd_remote *r)
{
    return r->down ? "down" : r->failing ? "failing" : "up";
}

/* Bookkeeping of a finished operation: the state (counting its changes) and its one warning. */
static void settle_state(tthd_remote *r, const remote_op *op);

static void settle(tthd_remote *r, const remote_op *op)
{
    int was_down = r->down, was_failing = r->failing;
    settle_state(r, op);
    if (op->outcome != R_UNREACHABLE)
        r->failing = op->outcome == R_ERROR;
    if (r->down != was_down || (!r->down && r->failing != was_failing))
        r->changes++;
}

static void settle_state(tthd_remote *r, const remote_op *op)
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
    json_decref(op->metadata);
    free(op->blob);
    free(op->local_path);
    free(op->model_dir);
    free(op->file);
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
    /* a hit for a request still waiting: copied into the local cache once older entries made
     * room (docs/cache.md, "The bound"), then answered */
    if (op->cb && op->outcome == R_HIT && op->local_path && r->room &&
        tthd_cache_reserve(r->room, op->blob_len) == 0) {
        op->req.data = op;
        if (uv_queue_work(r->loop, &op->req, copy_run, copy_done) == 0)
            return;
        tthd_cache_unreserve(r->room, op->blob_len);
    }
    answer_lookup(op);
}

/* The lookup's answer to its request (still waiting, unless cancelled), then the op is done */
static void answer_lookup(remote_op *op)
{
    if (op->cb && op->outcome == R_HIT) {
        tthd_remote_found f = {op->blob, op->blob_len, op->art_offset, op->art_len, op->sum, op->metadata,
                               op->on_disk};
        op->cb(op->data, &f);
        op->blob = f.blob;
    } else if (op->cb) {
        op->cb(op->data, NULL);
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
    if (status != UV_ECANCELED && !op->untried)
        settle(op->r, op);
    if (op->untried && op->outcome == R_ERROR)
        tthd_log(TTHD_LOG_DEBUG, "remote cache: cannot read %s to store it", op->file);
    if (op->outcome == R_STORED)
        op->r->stores++;
    else if (op->outcome == R_TOO_BIG)
        op->r->too_big++;
    op_free(op);
}

tthd_remote_get *tthd_remote_lookup(tthd_remote *r, const char *key, const char *local_path, const char *model_dir,
                                    tthd_remote_cb cb, void *data)
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
    op->local_path = local_path ? strdup(local_path) : NULL;
    op->model_dir = model_dir ? strdup(model_dir) : NULL;
    op->req.data = op;
    if (uv_queue_work(r->loop, &op->req, lookup_run, lookup_done) != 0) {
        free(op->local_path);
        free(op->model_dir);
        free(g);
        return NULL;
    }
    return g;
}

void tthd_remote_cancel(tthd_remote_get *g)
{
    if (g) {
        g->op.cb = NULL;
        g->op.data = NULL;
        uv_cancel((uv_req_t *)&g->op.req); /* fails once it runs: then its answer is dropped */
    }
}

/* A store of key's entry, to fill with its bytes (blob) or its local file (file) */
static remote_op *store_op_new(tthd_remote *r, const char *key)
{
    remote_op *op = calloc(1, sizeof *op);
    if (!op)
        return NULL;
    op->r = r;
    snprintf(op->key, sizeof op->key, KEY_PREFIX "%s", key);
    op->req.data = op;
    return op;
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
    remote_op *op = store_op_new(r, key);
    if (!op)
        return;
    op->blob = tthd_cache_blob(metadata, artifact, len, &op->blob_len, NULL);
    if (!op->blob || op->blob_len > r->cfg->max_bytes ||
        uv_queue_work(r->loop, &op->req, store_run, store_done) != 0) {
        if (op->blob)
            r->too_big++;
        op_free(op);
    }
}

void tthd_remote_store_file(tthd_remote *r, const char *key, const char *path)
{
    if (!r->cfg || !path || !usable(r))
        return;
    remote_op *op = store_op_new(r, key);
    if (!op)
        return;
    op->file = strdup(path);
    if (!op->file || uv_queue_work(r->loop, &op->req, store_run, store_done) != 0)
        op_free(op);
}

json_t *tthd_remote_status(const tthd_remote *r)
{
    if (!r->cfg)
        return json_null();
    return json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "address", r->cfg->shown,
                     "state", state_name(r), "lastError", r->last_error, "hits", (json_int_t)r->hits,
                     "misses", (json_int_t)r->misses, "stores", (json_int_t)r->stores, "errors",
                     (json_int_t)r->errors, "corrupt", (json_int_t)r->corrupt, "skipped", (json_int_t)r->skipped,
                     "tooBig", (json_int_t)r->too_big, "ttl", (json_int_t)r->cfg->ttl, "maxBytes",
                     (json_int_t)r->cfg->max_bytes);
}

json_t *tthd_remote_notice(tthd_remote *r)
{
    if (!r->cfg)
        return NULL;
    json_t *o = json_pack("{s:s, s:s, s:b}", "address", r->cfg->shown, "state", state_name(r), "changed",
                          r->changes != r->announced);
    if (o && (r->down || r->failing)) {
        json_object_set_new(o, "error", json_string(r->last_error));
        json_object_set_new(o, "retrySeconds", json_real(r->cfg->retry));
    }
    r->announced = r->changes;
    return o;
}
