/* tthd.h: the daemon's internals, shared by the files of daemon/server/.
 *
 * Ownership (libuv's rule): every handle lives inside a struct the daemon allocated, and that
 * struct is freed only in the close callback of its last handle. */
#ifndef TTHD_H
#define TTHD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <jansson.h>
#include <uv.h>
#include <xxhash.h>

#include <tth/diag.h>
#include <tthproto/jsonrpc.h>

#include "entry_file.h"

/* ---- log.c ---------------------------------------------------------------------------- */

enum { TTHD_LOG_ERROR = 0, TTHD_LOG_WARN = 1, TTHD_LOG_INFO = 2, TTHD_LOG_DEBUG = 3 };
extern int tthd_log_level;
void tthd_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- options (main.c) ------------------------------------------------------------------ */

#define TTHD_MAX_PLUGIN_DIRS 16
/* The directories of a plugins path, as a JSON array of strings (new reference; server.c). */
json_t *tthd_plugins_path_json(const char *path);

/* The remote cache's address and limits (options.c; docs/cache.md, "The remote cache on Redis"). */
typedef struct tthd_remote_config {
    char *shown;                /* the address as logs and status show it: never the password */
    char *host;                 /* TCP: host and port; or */
    int port;
    char *unix_path;            /* a unix socket */
    int db;                     /* SELECT'ed database */
    char *user, *password;      /* AUTH, when given */
    uint64_t ttl;               /* seconds an entry lives after it is stored or last served */
    uint64_t max_bytes;         /* larger entries are not stored there */
    double timeout;             /* seconds a connect or a read/write may stall */
    double retry;               /* seconds without trying after a failure */
} tthd_remote_config;
/* Parse TTH_CACHE_REDIS / --cache-redis: 0, or -1 with msg saying what is wrong and the forms. */
int tthd_remote_parse(const char *url, tthd_remote_config *cfg, char *msg, size_t len);
void tthd_remote_config_free(tthd_remote_config *cfg);
/* "12", "64K", "2G" into bytes; "0.5" into seconds. 0 or -1. */
int tthd_parse_size(const char *s, uint64_t *out);
int tthd_parse_seconds(const char *s, double *out);

typedef struct tthd_options {
    char *socket_path;          /* where to listen */
    int socket_default;         /* socket_path is the default: its directory must be private */
    char *plugins_dir;          /* the plugins path: trusted directories separated by ':', searched
                                   in order (--plugins-dir, else $TTH_PLUGINS_PATH, else the
                                   user's directory when it exists and the installed one) */
    char *cache_dir;            /* on-disk cache */
    char *worker_path;          /* the tth-worker executable */
    unsigned workers;           /* pool size */
    double idle_exit;           /* seconds without clients before exiting; 0: never */
    double request_timeout;     /* seconds a worker job may take */
    double shutdown_grace;      /* seconds in-flight work may take after shutdown starts */
    uint64_t cache_max_bytes;   /* on-disk cache bound */
    uint64_t worker_mem_limit;  /* bytes; 0: none */
    size_t max_frame;           /* frame body limit */
    size_t max_request;         /* request limit (JSON + upload) */
    unsigned max_concurrent;    /* requests in flight per connection */
    unsigned max_connections;   /* open client connections */
    double conn_idle;           /* seconds a connection without requests may stay silent; 0: ever */
    tthd_remote_config remote;  /* the remote cache; host and unix_path NULL: none */
    int verbose;
} tthd_options;

/* ---- wire.c: framed writes and read buffers on libuv streams --------------------------- */

/* Called when a write finished (status 0) or failed; data as given. */
typedef void (*tthd_written_cb)(void *data, int status);
/* Copy a frame and queue it on s. 0 or a negative libuv error. */
int tthd_write_frame(uv_stream_t *s, const void *body, size_t len, int binary, tthd_written_cb cb,
                     void *data);
int tthd_write_msg(uv_stream_t *s, const json_t *msg, tthd_written_cb cb, void *data);
/* The alloc callback of every stream the daemon reads (uv_read_start): a fresh buffer of the
 * suggested size, which the read callback frees. */
void tthd_read_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);

/* ---- cache.c --------------------------------------------------------------------------- */

/* The workers' store of compiled code, a directory of the cache directory (docs/cache.md,
 * "Compiled code"; daemon/compile/code_store.c) */
#define TTHD_CODE_STORE_DIR "code"

typedef struct tthd_cache_entry tthd_cache_entry;

typedef struct tthd_cache {
    uv_loop_t *loop;
    char *dir;                  /* NULL: memory only (the directory could not be created) */
    uint64_t max_bytes;         /* bound of the stored entries */
    uint64_t mem_max_bytes;     /* bound of the artifacts also kept in memory */
    tthd_cache_entry *head;     /* most recently used first */
    uint64_t bytes;             /* sum of entry sizes */
    uint64_t mem_bytes;         /* sum of in-memory artifacts */
    size_t entries;
    uint64_t reserved;          /* room made for files being written that are not entries yet */
    uint64_t hits, misses, corrupt, stores, store_errors;
    unsigned clear_gen;         /* bumped by clear: stores started before are dropped */
    unsigned writes_in_flight;
} tthd_cache;

/* A hit, borrowed from the cache until the next cache call. */
typedef struct tthd_cache_hit {
    const uint8_t *artifact;
    size_t artifact_len;
    const json_t *metadata;
    uint64_t xxh64;             /* of the artifact, computed once when it came into memory */
    char *path;                 /* the entry's file when it is written, else NULL (malloc'd: free it) */
    uint64_t offset;            /* where the artifact starts in that file */
} tthd_cache_hit;

int tthd_cache_init(tthd_cache *c, uv_loop_t *loop, const char *dir, uint64_t max_bytes);
void tthd_cache_free(tthd_cache *c);
/* The key: XXH3-128 of the inputs (the model by its digest, tthd_model_digest; the plugins of
 * `kinds`; the compiler's identity the worker gave, docs/cache.md "The key"), as 32 hex digits
 * into key[33]. */
void tthd_cache_key(const uint8_t model_digest[16], const char *target_json, const char *options_json,
                    const json_t *kinds, const char *compiler, char key[33]);

/* ---- digest.c: model digests, remembered by file identity ----------------------------- */

#define TTHD_DIGEST_MEMO 64                           /* model files remembered */
#define TTHD_DIGEST_SETTLED_NS (2 * (int64_t)1000000000) /* unchanged this long before a read */

typedef struct tthd_digest_entry {
    char *path;                 /* as the client named it (absolute); NULL: free */
    dev_t dev;
    ino_t ino;
    off_t size;
    int64_t mtime_ns, ctime_ns;
    uint64_t used;              /* tick of the last use (the least recent is replaced) */
    uint8_t digest[16];
} tthd_digest_entry;

typedef struct tthd_digest_memo {
    tthd_digest_entry e[TTHD_DIGEST_MEMO];
    uint64_t tick;
} tthd_digest_memo;

/* 1 and digest filled when path, with the identity in st, was read before and has not changed. */
int tthd_digest_memo_find(tthd_digest_memo *m, const char *path, const struct stat *st, uint8_t digest[16]);
/* Remember path's digest; st is its identity before the read that began at read_at_ns
 * (tthd_wall_ns). A file changed within TTHD_DIGEST_SETTLED_NS of the read is not remembered. */
void tthd_digest_memo_put(tthd_digest_memo *m, const char *path, const struct stat *st, int64_t read_at_ns,
                          const uint8_t digest[16]);
void tthd_digest_memo_free(tthd_digest_memo *m);
/* CLOCK_REALTIME in nanoseconds: the clock of file timestamps */
int64_t tthd_wall_ns(void);
/* 1 and *hit filled on a verified hit; 0 on a miss (a corrupt entry is dropped: a miss). With
 * need_bytes 0 (the client copies the file) an entry whose file, metadata and artifact XXH64 are
 * known is answered with its file alone (hit->artifact NULL, hit->path set), without reading it:
 * the client checks the XXH64 of what it copies. */
int tthd_cache_lookup(tthd_cache *c, const char *key, int need_bytes, tthd_cache_hit *hit);
/* Store (copies); sum is the artifact's XXH64, which hits answer with. Written to disk
 * atomically in the thread pool. */
void tthd_cache_store(tthd_cache *c, const char *key, const uint8_t *artifact, size_t len, uint64_t sum,
                      const json_t *metadata);
/* An entry as one block of bytes (the on-disk file, and the value of a remote entry) is
 * tthd_cache_blob's (entry_file.h). */
/* Take in an entry found elsewhere (the remote cache): blob, of tthd_cache_blob's form, verified
 * and taken over; on_disk when its file was already written under the key's name. *hit is
 * filled as by a lookup (artifact NULL if it could not be kept), without counting a hit. */
void tthd_cache_adopt(tthd_cache *c, const char *key, uint8_t *blob, size_t blob_len, size_t art_offset,
                      size_t art_len, uint64_t sum, const json_t *metadata, int on_disk, tthd_cache_hit *hit);
/* Take in an entry a worker wrote (entry_file.h's format) as the file tmp in the cache directory:
 * renamed into place under key (tmp removed when the key is already stored), recorded with its
 * metadata and the artifact's XXH64 but not its bytes. 0 with *hit filled as a need_bytes-0
 * lookup fills it, without counting a hit; -1 when it cannot be kept (no absolute cache
 * directory, larger than the cache, tmp not the size said, rename failed): tmp is left to the
 * caller. */
int tthd_cache_adopt_file(tthd_cache *c, const char *key, const char *tmp, uint64_t size, uint64_t art_offset,
                          uint64_t art_len, uint64_t sum, const json_t *metadata, tthd_cache_hit *hit);
/* The directory a worker may write entries into for tthd_cache_adopt_file: the cache directory
 * when it is absolute and the cache can hold anything, else NULL. */
const char *tthd_cache_worker_dir(const tthd_cache *c);
/* The file an entry of key is written to (malloc'd), or NULL without a cache directory. */
char *tthd_cache_entry_path(const tthd_cache *c, const char *key);
/* 1 when every ONNX external data file an artifact's metadata lists ("external_data": location,
 * bytes, xxh64) still holds those bytes beside the model in dir; 1 without external data. Reads
 * and hashes the files: for the thread pool. */
int tthd_external_data_same(const json_t *metadata, const char *dir);
/* Remove one entry (a hit whose ONNX external data changed: methods.c), if present. */
void tthd_cache_drop(tthd_cache *c, const char *key);
/* Make room for a file of n bytes about to be written into the cache directory before it
 * becomes an entry (a worker's entry file, a remote hit's copy): older entries are evicted first,
 * so the directory never holds more than the bound (docs/cache.md). 0, or -1 when it can never
 * fit (no directory, larger than the bound). Undo with tthd_cache_unreserve once the file is an
 * entry or is gone. */
int tthd_cache_reserve(tthd_cache *c, uint64_t n);
void tthd_cache_unreserve(tthd_cache *c, uint64_t n);
/* Remove everything; counts what was removed. */
void tthd_cache_clear(tthd_cache *c, uint64_t *entries, uint64_t *bytes);

/* ---- remote.c: the shared second-level cache on Redis (docs/cache.md) ------------------ */

typedef struct tthd_remote {
    uv_loop_t *loop;
    const tthd_remote_config *cfg; /* NULL: no remote cache */
    struct tthd_cache *room;    /* the local cache a hit is copied into (room reserved first), or NULL */
    int down;                   /* the last operation could not reach Redis */
    int failing;                /* the last operation that reached it got an error answer */
    unsigned changes;           /* how often the state (up, down, failing) changed */
    unsigned announced;         /* `changes` when the last compile answer reported the state */
    uint64_t retry_at_ms;       /* while down, nothing is tried before this (uv_now) */
    uint64_t warned_at_ms;      /* last warning about an error answer (one per retry period) */
    char last_error[256];
    uint64_t hits, misses, stores, errors, corrupt, skipped, too_big;
    uv_mutex_t lock;            /* guards the idle connections, used by thread-pool threads */
    struct redisContext *idle[4];
    int n_idle;
} tthd_remote;

typedef struct tthd_remote_get tthd_remote_get;
/* What a lookup found: an entry of tthd_cache_blob's form, verified (blob is the callee's to take:
 * set it NULL), written to the local cache file asked for when on_disk. */
typedef struct tthd_remote_found {
    uint8_t *blob;
    size_t blob_len, art_offset, art_len;
    uint64_t sum;               /* XXH64 of the artifact */
    const json_t *metadata;
    int on_disk;
} tthd_remote_found;
/* A lookup's answer, on the loop: found, or NULL for a miss (absent, corrupt, Redis unreachable). */
typedef void (*tthd_remote_cb)(void *data, tthd_remote_found *found);

void tthd_remote_init(tthd_remote *r, uv_loop_t *loop, const tthd_remote_config *cfg);
/* After the loop ended (no operation in flight). */
void tthd_remote_free(tthd_remote *r);
/* Look key up in the thread pool; cb comes later. A value found whose ONNX external data files
 * are those beside the model in model_dir (tthd_external_data_same) is also written to local_path
 * (a temporary file renamed into place; may be NULL); one whose files differ is a miss. NULL: not
 * tried (no remote cache, or it is down until its retry time): a miss, now. */
tthd_remote_get *tthd_remote_lookup(tthd_remote *r, const char *key, const char *local_path, const char *model_dir,
                                    tthd_remote_cb cb, void *data);
/* The request went away: cb will not be called (NULL: nothing to cancel, as for the cancels
 * of methods.c). */
void tthd_remote_cancel(tthd_remote_get *g);
/* Store an artifact (copied) in the thread pool, unless too large or Redis is down. */
void tthd_remote_store(tthd_remote *r, const char *key, const uint8_t *artifact, size_t len,
                       const json_t *metadata);
/* The same for an entry already in a local cache file (entry_file.h's format), read in the
 * thread pool. */
void tthd_remote_store_file(tthd_remote *r, const char *key, const char *path);
/* Counters and state for `status` (new reference), or JSON null without a remote cache. */
json_t *tthd_remote_status(const tthd_remote *r);
/* What a compile's answer says about the remote cache ("remoteCache": address, state, why it is
 * off, whether the state changed since the previous answer said it; docs/cache.md), or NULL
 * without a remote cache. New reference; marks the state as announced. */
json_t *tthd_remote_notice(tthd_remote *r);

/* ---- methods.c ---- */

/* Each cancel takes NULL as nothing under way. */
typedef struct tthd_ext_check tthd_ext_check;
/* The request went away while its hit's external data was being hashed. */
void tthd_ext_check_cancel(tthd_ext_check *x);
typedef struct tthd_outstream tthd_outstream;
/* A large artifact being streamed to the client at its pace (methods.c): freed with its request */
void tthd_outstream_free(tthd_outstream *o);
typedef struct tthd_digest_work tthd_digest_work;
/* The request went away while its model file's digest was being taken. */
void tthd_digest_work_cancel(tthd_digest_work *x);
/* ---- pool.c: worker processes ---------------------------------------------------------- */

typedef struct tthd_pool tthd_pool;
typedef struct tthd_worker tthd_worker;
typedef struct tthd_job tthd_job;

typedef enum tthd_job_type { TTHD_JOB_DESCRIBE, TTHD_JOB_PARSE, TTHD_JOB_COMPILE } tthd_job_type;

/* Called once when the job ends. job->result or job->error (a JSON-RPC error object) is set;
 * the callee may steal them (set to NULL). The job is freed after the callback returns. */
typedef void (*tthd_job_cb)(tthd_job *job);
typedef void (*tthd_job_progress_cb)(tthd_job *job, const char *stage, int percent);

struct tthd_job {
    tthd_job_type type;
    json_t *params;             /* sent to the worker (owned) */
    tthd_job_cb cb;             /* NULL once the requester detached (cancelled) */
    tthd_job_progress_cb progress;
    void *data;                 /* the requester's */
    json_t *result;             /* on success */
    json_t *error;              /* on failure: {"code","message","data"} */
    uint8_t *artifact;          /* compile: streamed back by the worker */
    size_t artifact_len, artifact_cap;
    char *entry_path;           /* compile: the cache entry file the worker wrote instead (params
                                   "entry_dir"), removed with the job unless taken */
    struct tthd_cache *room_cache; /* compile with "entry_dir": where the worker asks for room
                                   (cache/room) before it writes that file */
    uint64_t reserved;          /* room granted so far, given back when the job is freed */
    uint64_t deadline;          /* uv_now() ms */
    unsigned generation;        /* plugin set it ran with */
    tthd_worker *worker;        /* running on, or NULL while queued */
    tthd_job *next;             /* queue link */
};

struct tthd_pool {
    uv_loop_t *loop;
    const tthd_options *opt;
    tthd_worker *workers;       /* every live worker */
    tthd_job *queue, *queue_tail;
    size_t queued;
    unsigned generation;        /* bumped when the plugins directory changes */
    json_t *describe;           /* tth_registry_describe of the newest ready worker */
    unsigned describe_gen;
    json_t *load_errors;        /* [{path, code, message, hint}]: directories of the plugins path
                                   refused as a whole, or NULL */
    uv_timer_t tick;            /* deadlines, memory watch, kill grace: every 100 ms */
    uv_timer_t respawn;         /* backoff after workers fail to start */
    unsigned startup_failures;  /* workers that ended before they were ready, in a row */
    char start_error[256];      /* how the last of them ended */
    json_t *left_out;           /* plugin files whose loading crashed a worker: not loaded by the
                                   next workers until the plugins directory changes */
    int respawn_now;            /* the backoff delay is over */
    int closing;
    uint64_t closing_at;
    int handles_open;
    void (*on_closed)(tthd_pool *pool);
    void *data;
    uint64_t spawned, crashed, killed, timeouts, memkills;
};

int tthd_pool_init(tthd_pool *pool, uv_loop_t *loop, const tthd_options *opt);
/* Queue a job (takes ownership of job). */
void tthd_pool_submit(tthd_pool *pool, tthd_job *job);
/* Detach the requester: a queued job is dropped, a running one stopped (worker cancelled,
 * then killed). The callback is not called. */
void tthd_pool_cancel(tthd_pool *pool, tthd_job *job);
/* The plugins directory changed: new workers load the new set; idle old ones retire, busy ones
 * retire after their job. */
void tthd_pool_reload(tthd_pool *pool);
/* Stop every worker and close every handle; on_closed is called when done. Queued and running
 * jobs fail with ShuttingDown. */
void tthd_pool_close(tthd_pool *pool);
size_t tthd_pool_busy(const tthd_pool *pool);
size_t tthd_pool_alive(const tthd_pool *pool);
tthd_job *tthd_job_new(tthd_job_type type, json_t *params_new);
void tthd_job_free(tthd_job *job);
json_t *tthd_error_from_diag(const tth_diag *d);

/* ---- recent.c: targets/recent ------------------------------------------------------------ */

typedef struct tthd_recent {
    json_t *list;               /* [{target, string, model, lastUsed, uses}], newest first */
    char *path;                 /* <cache dir>/recent-targets.json, or NULL (in memory only) */
    uv_timer_t save_timer;      /* writes the file a second after a change, off the answer's path */
    int dirty;                  /* the list changed since the file was written */
} tthd_recent;

void tthd_recent_init(tthd_recent *r, uv_loop_t *loop, const char *cache_dir);
/* A compile of model_name for the target the client gave (a string or an object) succeeded. */
void tthd_recent_note(tthd_recent *r, const json_t *given, const char *canonical, const char *model_name);
/* {"targets": [...]}: the answer to targets/recent (new reference). */
json_t *tthd_recent_list(const tthd_recent *r);
/* Write the file if the list changed, and close the timer (the server is stopping). */
void tthd_recent_close(tthd_recent *r);
void tthd_recent_free(tthd_recent *r);

/* ---- server.c: listener, connections, requests ---------------------------------------- */

typedef struct tthd_conn tthd_conn;
typedef struct tthd_request tthd_request;
typedef struct tthd_server tthd_server;

typedef enum tthd_req_state {
    TTHD_REQ_NEW,        /* being dispatched */
    TTHD_REQ_UPLOAD,     /* compile: receiving the model */
    TTHD_REQ_WORKING,    /* a job runs for it */
} tthd_req_state;

struct tthd_request {
    tthd_conn *conn;
    json_t *id;                 /* owned */
    const tthp_method *method;
    json_t *params;             /* owned */
    tthd_req_state state;
    tthd_job *job;              /* the job running for it, or NULL */
    size_t model_size, model_got;
    size_t upload_size;         /* compile upload: model_size + the external data files' sizes */
    const json_t *ext_files;    /* compile upload: model.external_data (in params), or NULL */
    char *ext_dir;              /* compile upload: the private directory it is written to */
    int upload_fd;              /* compile upload: the file being written, or -1 */
    size_t upload_file;         /* compile upload: 0 the model, k the (k-1)th external data file */
    size_t upload_left;         /* compile upload: bytes of that file still to come */
    XXH3_state_t *upload_hash;  /* compile upload: the model's digest being taken */
    char model_name[TTHP_MAX_MODEL_NAME + 1];
    char *model_dir;            /* compile by model.path: the file's directory (ONNX external data) */
    char *model_path;           /* compile by model.path: the file, which the compiling worker reads */
    uint8_t model_digest[16];   /* compile: tthd_model_digest of the model */
    json_t *target;             /* compile: canonical target from the parse step */
    char *target_text;          /* compile: its canonical JSON text */
    char *target_string;        /* compile: its canonical string (for targets/recent) */
    char key[33];               /* compile: cache key */
    int progress_begun;
    uint64_t start_ns;          /* compile: when the request arrived (uv_hrtime) */
    double lookup_s;            /* compile: seconds the cache lookup took */
    double remote_s;            /* compile: seconds the remote cache lookup took, or -1 */
    uint64_t remote_t0;         /* compile: when the remote lookup began (uv_hrtime) */
    tthd_remote_get *remote;    /* compile: the remote lookup in flight, or NULL */
    struct tthd_ext_check *ext_check; /* compile: a hit's external data being hashed, or NULL */
    struct tthd_digest_work *digest_work; /* compile: model.path's digest being taken, or NULL */
    json_t *parse_diagnostics;  /* compile: the target parse's diagnostics, for a remote hit */
    tthd_outstream *out;        /* compile: a large artifact going out paced, or NULL */
    tthd_request *next;
};

struct tthd_conn {
    tthd_server *srv;
    uv_pipe_t pipe;
    tthp_parser parser;
    int initialized;
    int closing;                /* uv_close called */
    int close_when_flushed;     /* close once pending writes are done */
    int doomed;                 /* does not read its answers: closed by the reaper */
    unsigned writes;            /* uv_write requests in flight */
    uid_t uid;
    pid_t pid;
    tthd_request *reqs;
    unsigned n_reqs;
    /* the binary frame announced by the last $/chunk */
    int expect_binary;
    size_t expect_size;
    tthd_request *expect_req;   /* NULL: discard it */
    uint64_t last_ms;           /* when the client last sent a byte (or connected) */
    tthd_conn *next;
};

struct tthd_server {
    uv_loop_t *loop;
    tthd_options opt;
    uv_pipe_t listener;
    int listening;              /* listener handle initialised */
    int systemd;                /* socket inherited: do not unlink */
    uv_signal_t sigterm, sigint;
    uv_timer_t idle_timer;
    uv_timer_t stop_timer;      /* shutdown grace */
    uv_timer_t rescan_timer;    /* debounce of the plugins directory watch */
    uv_timer_t conn_idle_timer; /* closes idle connections (opt.conn_idle) */
    uv_timer_t reap_timer;      /* closes doomed connections outside request processing */
    uv_fs_event_t watch[TTHD_MAX_PLUGIN_DIRS]; /* one per directory of the plugins path */
    int watching;               /* how many of watch[] are initialized */
    tthd_conn *conns;
    unsigned n_conns;
    tthd_pool pool;
    tthd_cache cache;
    tthd_remote remote;
    tthd_digest_memo digests;   /* of model files named by path */
    tthd_recent recent;         /* targets of the last compiles (recent.c) */
    uint64_t served, failed;
    uint64_t start_ms;
    int stopping;
    int exit_code;
};

int tthd_server_start(tthd_server *srv, uv_loop_t *loop);
void tthd_server_stop(tthd_server *srv, const char *why);
/* Called after the loop ended. */
void tthd_server_free(tthd_server *srv);

/* Used by methods.c. */
void tthd_send(tthd_conn *conn, json_t *msg_new);
void tthd_send_binary(tthd_conn *conn, const uint8_t *data, size_t len);
void tthd_respond(tthd_request *req, json_t *result_new);
void tthd_respond_error(tthd_request *req, int code, const char *message, json_t *data_new);
/* Answer with an error object {"code","message","data"} (borrowed). */
void tthd_respond_error_obj(tthd_request *req, const json_t *error);
void tthd_progress(tthd_request *req, const char *kind, const char *stage, int percent);

/* ---- methods.c ------------------------------------------------------------------------- */

/* Run a request (state NEW). It answers now or later through tthd_respond*. */
void tthd_method_dispatch(tthd_server *srv, tthd_request *req);
/* Write more of req's artifact stream while the connection's queue is short; the answer at its end */
void tthd_method_pump(tthd_request *req);
/* Remove the directory an upload was written to, if any. */
void tthd_method_remove_ext_dir(tthd_request *req);
/* A $/chunk's binary frame arrived for req (upload). */
void tthd_method_upload(tthd_server *srv, tthd_request *req, const uint8_t *data, size_t len);
/* Validate a $/chunk for req; 0 if it continues the upload. */
int tthd_method_chunk_ok(tthd_request *req, json_int_t offset, json_int_t size, json_int_t total,
                         char *msg, size_t len);

#endif
