/* End to end: the remote cache on a real redis-server (docs/cache.md, "The remote cache on
 * Redis"), started by each test on a private unix socket. Two daemons with their own local caches
 * share a compile; a corrupt or truncated remote entry is a miss and is replaced; Redis killed,
 * restarted and stalled never fails a compile and is warned about once; a bad address stops
 * tthd at startup with the reason. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "harness.h"
#include "redis_server.h"

static redisReply *redis_cmd(redis *r, const char *fmt, ...)
{
    redisContext *c = redisConnectUnix(r->sock);
    cr_assert(c && !c->err, "cannot connect to redis: %s", c ? c->errstr : "");
    va_list ap;
    va_start(ap, fmt);
    redisReply *rep = redisvCommand(c, fmt, ap);
    va_end(ap);
    redisFree(c);
    cr_assert_not_null(rep);
    return rep;
}

/* The daemons of a test (A, B, C) and its Redis */
static e2e_fixture A, B, C;
static redis rd;

/* f: a daemon with the real plugins and the remote cache at address (one worker), a client, the model */
static void open_on(e2e_fixture *f, const char *address)
{
    const char *args[] = {"--workers", "1", "--cache-redis", address, NULL};
    e2e_open(f, NULL, args);
}

/* Close the daemons a test opened (asserting their clean exit), then stop Redis */
static void close_all(void)
{
    e2e_close(&A);
    e2e_close(&B);
    e2e_close(&C);
    redis_stop(&rd);
}

static json_t *remote_status(e2e_client *c)
{
    json_t *r = e2e_call(c, 90, "status", NULL);
    json_t *rc = json_incref(json_object_get(json_object_get(r, "result"), "remoteCache"));
    json_decref(r);
    cr_assert(json_is_object(rc), "status has no remoteCache object");
    return rc;
}

static json_int_t remote_count(e2e_client *c, const char *what)
{
    json_t *rc = remote_status(c);
    json_int_t v = json_integer_value(json_object_get(rc, what));
    json_decref(rc);
    return v;
}

/* Assert status.remoteCache.state of c's daemon, and that its lastError says `why` (unless NULL) */
static void expect_state(e2e_client *c, const char *state, const char *why)
{
    json_t *st = remote_status(c);
    cr_assert_str_eq(json_string_value(json_object_get(st, "state")), state);
    const char *err = json_string_value(json_object_get(st, "lastError"));
    if (why)
        cr_assert(err && strstr(err, why), "lastError: %s", err ? err : "(none)");
    json_decref(st);
}

/* Stores are written after the answer: wait until the daemon has stored n entries. */
static void wait_stores(e2e_client *c, json_int_t n)
{
    for (int i = 0; i < 200 && remote_count(c, "stores") < n; i++)
        usleep(25000);
    cr_assert_eq(remote_count(c, "stores"), n, "the remote store did not complete");
}

/* Compile f's model and return the artifact's XXH64 text, asserting success, the cache state and
 * where a hit came from (NULL: a miss has none) */
static char *compile_expect(e2e_fixture *f, json_int_t id, const char *target, const char *cache, const char *source)
{
    json_t *r = e2e_compile_expect(f, id, target, NULL, cache);
    const char *src = e2e_result_str(r, "cacheSource", NULL);
    if (source)
        cr_assert(src && strcmp(src, source) == 0, "compile %lld: cacheSource %s, expected %s", (long long)id,
                  src ? src : "(none)", source);
    else
        cr_assert_null(src, "a miss has no cacheSource");
    char *sum = strdup(e2e_result_str(r, "artifact", "xxh64"));
    json_decref(r);
    return sum;
}

/* Redis (retry=1), and daemons A and B using it */
static void two_on_redis(void)
{
    redis_start(&rd, "retry=1");
    open_on(&A, rd.url);
    open_on(&B, rd.url);
}

Test(remote_cache, two_daemons_share_a_compile, .timeout = 300)
{
    two_on_redis();
    char *first = compile_expect(&A, 1, "llvm", "miss", NULL);
    wait_stores(A.c, 1);
    /* b has never compiled it: its local cache misses, the remote one answers with a's bytes */
    char *second = compile_expect(&B, 2, "llvm", "hit", "remote");
    cr_assert_str_eq(second, first, "the remote hit is a's artifact");
    {
        /* kept in b's local cache, its file written before the answer */
        json_t *st = e2e_call(B.c, 80, "status", NULL);
        cr_assert_eq(e2e_result_int(st, "cache", "entries"), 1);
        json_decref(st);
        char cmd[400];
        snprintf(cmd, sizeof cmd, "test -s \"$(ls %s/*.tthc)\"", B.d.cache);
        cr_assert_eq(system(cmd), 0, "no entry file in %s", B.d.cache);
    }
    char *third = compile_expect(&B, 3, "llvm", "hit", "local");
    cr_assert_str_eq(third, first);
    cr_assert_eq(remote_count(B.c, "hits"), 1);
    cr_assert_eq(remote_count(B.c, "stores"), 0, "a remote hit is not stored back");
    cr_assert_eq(remote_count(A.c, "misses"), 1);
    json_t *st = remote_status(B.c);
    cr_assert_str_eq(json_string_value(json_object_get(st, "state")), "up");
    cr_assert(strstr(json_string_value(json_object_get(st, "address")), rd.sock));
    json_decref(st);
    /* the entry lives with a TTL, renewed by the hit */
    redisReply *rep = redis_cmd(&rd, "KEYS tth:artifact:*");
    cr_assert_eq(rep->type, REDIS_REPLY_ARRAY);
    cr_assert_eq(rep->elements, 1);
    redisReply *ttl = redis_cmd(&rd, "TTL %s", rep->element[0]->str);
    cr_assert(ttl->integer > 600000 && ttl->integer <= 604800, "ttl %lld", (long long)ttl->integer);
    freeReplyObject(ttl);
    freeReplyObject(rep);
    free(first);
    free(second);
    free(third);
    close_all();
}

/* A miss for a client that copies files, whose worker wrote the cache entry file itself
 * (docs/cache.md, "Who writes an entry"): the daemon sends that file to the remote cache, and
 * another daemon's hit is its artifact. */
Test(remote_cache, an_entry_the_worker_wrote_is_shared, .timeout = 300)
{
    two_on_redis();
    json_t *r = e2e_compile_path(A.c, 1, A.model_path, A.len, "llvm", "file");
    cr_assert_eq(e2e_error_code(r), 0, "compile failed: %s", e2e_err_message(r));
    cr_assert_str_eq(e2e_result_str(r, "cache", NULL), "miss");
    cr_assert_eq(e2e_result_int(r, "artifact", "chunks"), 0, "the miss was streamed, not answered by file");
    char *first = strdup(e2e_result_str(r, "artifact", "xxh64"));
    json_decref(r);
    wait_stores(A.c, 1);
    char *second = compile_expect(&B, 2, "llvm", "hit", "remote");
    cr_assert_str_eq(second, first, "the remote hit is the artifact a's worker wrote");
    free(first);
    free(second);
    close_all();
}

/* Replace the only remote entry's value by a damaged copy of itself */
static void damage_entry(redis *r, int truncate)
{
    redisReply *keys = redis_cmd(r, "KEYS tth:artifact:*");
    cr_assert_eq(keys->elements, 1);
    redisReply *v = redis_cmd(r, "GET %s", keys->element[0]->str);
    cr_assert_eq(v->type, REDIS_REPLY_STRING);
    size_t n = truncate ? v->len / 2 : v->len;
    if (!truncate)
        v->str[v->len - 7] ^= 0x21;
    freeReplyObject(redis_cmd(r, "SET %s %b", keys->element[0]->str, v->str, n));
    freeReplyObject(v);
    freeReplyObject(keys);
}

Test(remote_cache, corrupt_or_truncated_entries_are_misses_and_replaced, .timeout = 300)
{
    redis_start(&rd, "retry=1");
    static const char *const targets[] = {"llvm", "c"};
    for (int t = 0; t < 2; t++) {
        freeReplyObject(redis_cmd(&rd, "FLUSHALL"));
        open_on(&A, rd.url);
        char *good = compile_expect(&A, 1, targets[t], "miss", NULL);
        wait_stores(A.c, 1);
        damage_entry(&rd, t == 1);
        /* b gets no damaged bytes: a miss, a compile, and the entry stored again */
        open_on(&B, rd.url);
        char *again = compile_expect(&B, 2, targets[t], "miss", NULL);
        cr_assert_str_eq(again, good);
        cr_assert_eq(remote_count(B.c, "corrupt"), 1);
        wait_stores(B.c, 1);
        cr_assert_eq(e2e_log_count(&B.d, "failed its check"), 1);
        /* a third daemon is served the replaced entry */
        open_on(&C, rd.url);
        char *third = compile_expect(&C, 3, targets[t], "hit", "remote");
        cr_assert_str_eq(third, good);
        free(good);
        free(again);
        free(third);
        e2e_close(&A);
        e2e_close(&B);
        e2e_close(&C);
    }
    redis_stop(&rd);
}

/* Redis with the address parameters params, daemon A using it, and one compile of digits for
 * `llvm` stored there (A's connection to Redis is back in its pool) */
static void one_stored(const char *params)
{
    redis_start(&rd, params);
    open_on(&A, rd.url);
    free(compile_expect(&A, 1, "llvm", "miss", NULL));
    wait_stores(A.c, 1);
}

Test(remote_cache, redis_killed_restarted_and_stalled, .timeout = 300)
{
    one_stored("retry=1&timeout=0.5");
    /* killed: compiles go on with the local cache, one warning */
    redis_kill(&rd, SIGKILL);
    free(compile_expect(&A, 2, "c", "miss", NULL));
    free(compile_expect(&A, 3, "llvm -opt-level=1", "miss", NULL));
    free(compile_expect(&A, 4, "llvm", "hit", "local"));
    expect_state(A.c, "down", "connect");
    cr_assert(remote_count(A.c, "errors") >= 1);
    cr_assert_eq(e2e_log_count(&A.d, "unreachable"), 1, "one warning while Redis is down");
    /* back: used again once the retry time has passed */
    redis_launch(&rd);
    sleep(2);
    free(compile_expect(&A, 5, "llvm -opt-level=2", "miss", NULL));
    wait_stores(A.c, 2);
    cr_assert_eq(e2e_log_count(&A.d, "reachable again"), 1);
    /* stalled (stopped, so its socket accepts nothing): the timeout ends the wait, the compile
     * goes on */
    redis_kill(&rd, SIGSTOP);
    free(compile_expect(&A, 6, "llvm -opt-level=0", "miss", NULL));
    expect_state(A.c, "down", NULL);
    redis_kill(&rd, SIGCONT);
    close_all();
}

/* result.timings.remoteCacheLookup of a compile's answer (NULL when there was none) */
static const json_t *lookup_time(const json_t *r)
{
    return json_object_get(json_object_get(json_object_get(r, "result"), "timings"), "remoteCacheLookup");
}

/* A stall (Redis stopped with a pooled connection idle) costs one timeout, not one per attempt,
 * and the remote is then left alone for the retry period (docs/cache.md, "Connections") */
Test(remote_cache, a_stalled_redis_costs_one_timeout, .timeout = 300)
{
    one_stored("retry=60&timeout=1"); /* its connection idle in the pool */
    redis_kill(&rd, SIGSTOP);
    json_t *r = e2e_compile_expect(&A, 2, "c", NULL, NULL);
    double waited = json_number_value(lookup_time(r));
    cr_assert(waited >= 0.9 && waited < 1.5, "the stalled lookup took %.2f s with timeout=1 (one timeout expected)",
              waited);
    json_decref(r);
    expect_state(A.c, "down", "timed out");
    /* down: the next compile does not wait at all */
    r = e2e_compile_expect(&A, 3, "llvm -opt-level=1", NULL, NULL);
    const json_t *t = lookup_time(r);
    cr_assert(!t || json_number_value(t) < 0.2, "a lookup while down waited %.2f s", json_number_value(t));
    json_decref(r);
    redis_kill(&rd, SIGCONT);
    close_all();
}

/* A compile of f's model whose answer's result.remoteCache has this state, an error saying `why`
 * when off (none when NULL) and reports a change when `changed` */
static void expect_notice(e2e_fixture *f, json_int_t id, const char *target, const char *state, const char *why,
                          int changed)
{
    json_t *r = e2e_compile_expect(f, id, target, NULL, NULL);
    const json_t *rc = json_object_get(json_object_get(r, "result"), "remoteCache");
    cr_assert(json_is_object(rc), "the answer has no remoteCache");
    cr_assert_str_eq(json_string_value(json_object_get(rc, "state")), state);
    cr_assert_eq(json_is_true(json_object_get(rc, "changed")), changed, "changed should be %d", changed);
    const char *err = json_string_value(json_object_get(rc, "error"));
    if (why)
        cr_assert(err && strstr(err, why), "error '%s' does not say '%s'", err ? err : "(none)", why);
    else
        cr_assert_null(err, "an up remote cache has no error");
    json_decref(r);
}

/* A daemon A whose remote cache is address: the first compile's answer says `state` and `why`
 * (a change), the second the same (no change). */
static void off_twice(const char *address, const char *state, const char *why)
{
    open_on(&A, address);
    expect_notice(&A, 1, "llvm", state, why, 1);
    expect_notice(&A, 2, "c", state, why, 0);
}

/* The shared cache off for each reason a user meets: every compile's answer says so (tthctl prints
 * it, tests/client); back, the next answer says that once */
Test(remote_cache, compile_answers_say_when_the_shared_cache_is_off, .timeout = 300)
{
    /* no server: nothing listens on the port */
    off_twice("redis://127.0.0.1:1?retry=60&timeout=1", "down", "cannot connect");
    e2e_close(&A);
    /* a unix socket that is not there */
    off_twice("unix:///nonexistent-dir/redis.sock?retry=60", "down", "No such file");
    e2e_close(&A);
    /* a wrong password */
    redis_start(&rd, "retry=1");
    freeReplyObject(redis_cmd(&rd, "CONFIG SET requirepass right"));
    char url[400];
    snprintf(url, sizeof url, "%s&password=wrong", rd.url);
    off_twice(url, "down", "AUTH");
    e2e_close(&A);
    /* no password where Redis wants one: it answers, with errors */
    off_twice(rd.url, "failing", "NOAUTH");
    /* fixed: the next answer says it is back, once */
    redisContext *rc = redisConnectUnix(rd.sock);
    cr_assert(rc && !rc->err);
    freeReplyObject(redisCommand(rc, "AUTH right"));
    freeReplyObject(redisCommand(rc, "CONFIG SET requirepass %s", ""));
    redisFree(rc);
    expect_notice(&A, 3, "llvm -opt-level=1", "up", NULL, 1);
    expect_notice(&A, 4, "llvm -opt-level=2", "up", NULL, 0);
    close_all();
}

/* tthd --cache-redis ADDRESS with a mistake: exit 2, naming it once */
static void refused(const char *url, const char *says)
{
    e2e_daemon d;
    e2e_prepare(&d);
    const char *args[] = {"--cache-redis", url, NULL};
    e2e_expect_refusal(&d, args, 2, NULL);
    cr_assert_eq(e2e_log_count(&d, says), 1, "tthd's message for '%s' does not say '%s'", url, says);
    e2e_cleanup(&d);
}

Test(remote_cache, bad_addresses_stop_tthd_with_the_reason)
{
    refused("redis://localhost:6379/0?tll=60", "did you mean 'ttl'");
    refused("redis://localhost:99999", "port '99999'");
    refused("rediss://localhost", "TLS");
    refused("redis://localhost/x", "database 'x'");
    refused("localhost:6379", "not a Redis address");
    refused("unix://relative.sock", "absolute path");
    refused("redis://h?max_bytes=1G", "max_bytes '1G'");
    refused("redis://h?timeout", "has no value");
    refused("redis://u:%zz@h", "escaped");
}
