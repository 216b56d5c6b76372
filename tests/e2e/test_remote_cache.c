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

/* A daemon with the real plugins and this remote cache. */
static void daemon_start(e2e_daemon *d, const redis *r)
{
    const char *args[] = {"--workers", "1", "--cache-redis", r->url, NULL};
    e2e_prepare(d);
    e2e_put_real_plugins(d);
    e2e_launch(d, NULL, args);
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

/* Stores are written after the answer: wait until the daemon has stored n entries. */
static void wait_stores(e2e_client *c, json_int_t n)
{
    for (int i = 0; i < 200 && remote_count(c, "stores") < n; i++)
        usleep(25000);
    cr_assert_eq(remote_count(c, "stores"), n, "the remote store did not complete");
}

static int log_count(const e2e_daemon *d, const char *needle)
{
    FILE *f = fopen(d->log, "r");
    cr_assert_not_null(f);
    char line[4096];
    int n = 0;
    while (fgets(line, sizeof line, f))
        n += strstr(line, needle) != NULL;
    fclose(f);
    return n;
}

/* Compile and return the artifact's XXH64 text, asserting success and the cache state */
static char *compile_expect(e2e_client *c, json_int_t id, const uint8_t *model, size_t len, const char *target,
                            const char *cache, const char *source)
{
    json_t *r = e2e_compile(c, id, model, len, target, NULL);
    e2e_check_artifact(c, r);
    cr_assert_str_eq(e2e_result_str(r, "cache", NULL), cache, "compile %lld for '%s'", (long long)id, target);
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

Test(remote_cache, two_daemons_share_a_compile, .timeout = 300)
{
    redis rd;
    redis_start(&rd, "retry=1");
    e2e_daemon a, b;
    daemon_start(&a, &rd);
    daemon_start(&b, &rd);
    size_t len;
    uint8_t *model = e2e_read_digits(&len);
    e2e_client *ca = e2e_client_new(&a), *cb = e2e_client_new(&b);
    e2e_client_init(ca);
    e2e_client_init(cb);
    char *first = compile_expect(ca, 1, model, len, "llvm", "miss", NULL);
    wait_stores(ca, 1);
    /* b has never compiled it: its local cache misses, the remote one answers with a's bytes */
    char *second = compile_expect(cb, 2, model, len, "llvm", "hit", "remote");
    cr_assert_str_eq(second, first, "the remote hit is a's artifact");
    {
        /* kept in b's local cache, its file written before the answer */
        json_t *st = e2e_call(cb, 80, "status", NULL);
        cr_assert_eq(e2e_result_int(st, "cache", "entries"), 1);
        json_decref(st);
        char cmd[400];
        snprintf(cmd, sizeof cmd, "test -s \"$(ls %s/*.tthc)\"", b.cache);
        cr_assert_eq(system(cmd), 0, "no entry file in %s", b.cache);
    }
    char *third = compile_expect(cb, 3, model, len, "llvm", "hit", "local");
    cr_assert_str_eq(third, first);
    cr_assert_eq(remote_count(cb, "hits"), 1);
    cr_assert_eq(remote_count(cb, "stores"), 0, "a remote hit is not stored back");
    cr_assert_eq(remote_count(ca, "misses"), 1);
    json_t *st = remote_status(cb);
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
    free(model);
    e2e_client_free(ca);
    e2e_client_free(cb);
    e2e_stop(&a);
    e2e_stop(&b);
    redis_stop(&rd);
}

/* A miss for a client that copies files, whose worker wrote the cache entry file itself
 * (docs/cache.md, "Who writes an entry"): the daemon sends that file to the remote cache, and
 * another daemon's hit is its artifact. */
Test(remote_cache, an_entry_the_worker_wrote_is_shared, .timeout = 300)
{
    redis rd;
    redis_start(&rd, "retry=1");
    e2e_daemon a, b;
    daemon_start(&a, &rd);
    daemon_start(&b, &rd);
    size_t len;
    uint8_t *model = e2e_read_digits(&len);
    e2e_client *ca = e2e_client_new(&a), *cb = e2e_client_new(&b);
    e2e_client_init(ca);
    e2e_client_init(cb);
    char path[512];
    snprintf(path, sizeof path, "%s/examples/digits.onnx", getenv("TTH_SOURCE_ROOT"));
    e2e_send(ca, tthp_request_new(1, "compile",
                                  json_pack("{s:{s:s, s:I, s:s}, s:s, s:s}", "model", "name", "digits", "size",
                                            (json_int_t)len, "path", path, "target", "llvm", "delivery", "file")));
    json_t *r = e2e_recv_response(ca, 240000);
    cr_assert_not_null(r);
    cr_assert_eq(e2e_error_code(r), 0, "compile failed: %s", e2e_err_message(r));
    cr_assert_str_eq(e2e_result_str(r, "cache", NULL), "miss");
    cr_assert_eq(e2e_result_int(r, "artifact", "chunks"), 0, "the miss was streamed, not answered by file");
    char *first = strdup(e2e_result_str(r, "artifact", "xxh64"));
    json_decref(r);
    wait_stores(ca, 1);
    char *second = compile_expect(cb, 2, model, len, "llvm", "hit", "remote");
    cr_assert_str_eq(second, first, "the remote hit is the artifact a's worker wrote");
    free(first);
    free(second);
    free(model);
    e2e_client_free(ca);
    e2e_client_free(cb);
    e2e_stop(&a);
    e2e_stop(&b);
    redis_stop(&rd);
}

/* Replace the only remote entry's value by a damaged copy of itself */
static void damage_entry(redis *rd, int truncate)
{
    redisReply *keys = redis_cmd(rd, "KEYS tth:artifact:*");
    cr_assert_eq(keys->elements, 1);
    redisReply *v = redis_cmd(rd, "GET %s", keys->element[0]->str);
    cr_assert_eq(v->type, REDIS_REPLY_STRING);
    size_t n = truncate ? v->len / 2 : v->len;
    if (!truncate)
        v->str[v->len - 7] ^= 0x21;
    freeReplyObject(redis_cmd(rd, "SET %s %b", keys->element[0]->str, v->str, n));
    freeReplyObject(v);
    freeReplyObject(keys);
}

Test(remote_cache, corrupt_or_truncated_entries_are_misses_and_replaced, .timeout = 300)
{
    redis rd;
    redis_start(&rd, "retry=1");
    size_t len;
    uint8_t *model = e2e_read_digits(&len);
    static const char *const targets[] = {"llvm", "c"};
    for (int t = 0; t < 2; t++) {
        freeReplyObject(redis_cmd(&rd, "FLUSHALL"));
        e2e_daemon a, b, c;
        daemon_start(&a, &rd);
        e2e_client *ca = e2e_client_new(&a);
        e2e_client_init(ca);
        char *good = compile_expect(ca, 1, model, len, targets[t], "miss", NULL);
        wait_stores(ca, 1);
        damage_entry(&rd, t == 1);
        /* b gets no damaged bytes: a miss, a compile, and the entry stored again */
        daemon_start(&b, &rd);
        e2e_client *cb = e2e_client_new(&b);
        e2e_client_init(cb);
        char *again = compile_expect(cb, 2, model, len, targets[t], "miss", NULL);
        cr_assert_str_eq(again, good);
        cr_assert_eq(remote_count(cb, "corrupt"), 1);
        wait_stores(cb, 1);
        cr_assert_eq(log_count(&b, "failed its check"), 1);
        /* a third daemon is served the replaced entry */
        daemon_start(&c, &rd);
        e2e_client *cc = e2e_client_new(&c);
        e2e_client_init(cc);
        char *third = compile_expect(cc, 3, model, len, targets[t], "hit", "remote");
        cr_assert_str_eq(third, good);
        free(good);
        free(again);
        free(third);
        e2e_client_free(ca);
        e2e_client_free(cb);
        e2e_client_free(cc);
        e2e_stop(&a);
        e2e_stop(&b);
        e2e_stop(&c);
    }
    free(model);
    redis_stop(&rd);
}

/* Redis with the address parameters params, a daemon using it, and one compile of digits for
 * `llvm` stored there; the client that compiled it (the daemon's connection to Redis is back in
 * its pool) */
static e2e_client *one_stored(redis *rd, const char *params, e2e_daemon *a, uint8_t **model, size_t *len)
{
    redis_start(rd, params);
    daemon_start(a, rd);
    *model = e2e_read_digits(len);
    e2e_client *c = e2e_client_new(a);
    e2e_client_init(c);
    free(compile_expect(c, 1, *model, *len, "llvm", "miss", NULL));
    wait_stores(c, 1);
    return c;
}

Test(remote_cache, redis_killed_restarted_and_stalled, .timeout = 300)
{
    redis rd;
    e2e_daemon a;
    size_t len;
    uint8_t *model;
    e2e_client *c = one_stored(&rd, "retry=1&timeout=0.5", &a, &model, &len);
    /* killed: compiles go on with the local cache, one warning */
    redis_kill(&rd, SIGKILL);
    free(compile_expect(c, 2, model, len, "c", "miss", NULL));
    free(compile_expect(c, 3, model, len, "llvm -opt-level=1", "miss", NULL));
    free(compile_expect(c, 4, model, len, "llvm", "hit", "local"));
    json_t *st = remote_status(c);
    cr_assert_str_eq(json_string_value(json_object_get(st, "state")), "down");
    cr_assert(json_integer_value(json_object_get(st, "errors")) >= 1);
    cr_assert(strstr(json_string_value(json_object_get(st, "lastError")), "connect"), "lastError: %s",
              json_string_value(json_object_get(st, "lastError")));
    json_decref(st);
    cr_assert_eq(log_count(&a, "unreachable"), 1, "one warning while Redis is down");
    /* back: used again once the retry time has passed */
    redis_launch(&rd);
    sleep(2);
    free(compile_expect(c, 5, model, len, "llvm -opt-level=2", "miss", NULL));
    wait_stores(c, 2);
    cr_assert_eq(log_count(&a, "reachable again"), 1);
    /* stalled (stopped, so its socket accepts nothing): the timeout ends the wait, the compile
     * goes on */
    redis_kill(&rd, SIGSTOP);
    free(compile_expect(c, 6, model, len, "llvm -opt-level=0", "miss", NULL));
    st = remote_status(c);
    cr_assert_str_eq(json_string_value(json_object_get(st, "state")), "down");
    json_decref(st);
    redis_kill(&rd, SIGCONT);
    free(model);
    e2e_client_free(c);
    e2e_stop(&a);
    redis_stop(&rd);
}

/* The answer of a compile (asserted to have an artifact) */
static json_t *compile_answer(e2e_client *c, json_int_t id, const uint8_t *model, size_t len, const char *target)
{
    json_t *r = e2e_compile(c, id, model, len, target, NULL);
    e2e_check_artifact(c, r);
    return r;
}

/* A stall (Redis stopped with a pooled connection idle) costs one timeout, not one per attempt,
 * and the remote is then left alone for the retry period (docs/cache.md, "Connections") */
Test(remote_cache, a_stalled_redis_costs_one_timeout, .timeout = 300)
{
    redis rd;
    e2e_daemon a;
    size_t len;
    uint8_t *model;
    e2e_client *c = one_stored(&rd, "retry=60&timeout=1", &a, &model, &len); /* its connection idle in the pool */
    redis_kill(&rd, SIGSTOP);
    json_t *r = compile_answer(c, 2, model, len, "c");
    double waited = json_number_value(json_object_get(json_object_get(json_object_get(r, "result"), "timings"),
                                                      "remoteCacheLookup"));
    cr_assert(waited >= 0.9 && waited < 1.5, "the stalled lookup took %.2f s with timeout=1 (one timeout expected)",
              waited);
    json_decref(r);
    json_t *st = remote_status(c);
    cr_assert_str_eq(json_string_value(json_object_get(st, "state")), "down");
    cr_assert(strstr(json_string_value(json_object_get(st, "lastError")), "timed out"), "lastError: %s",
              json_string_value(json_object_get(st, "lastError")));
    json_decref(st);
    /* down: the next compile does not wait at all */
    r = compile_answer(c, 3, model, len, "llvm -opt-level=1");
    json_t *t = json_object_get(json_object_get(json_object_get(r, "result"), "timings"), "remoteCacheLookup");
    cr_assert(!t || json_number_value(t) < 0.2, "a lookup while down waited %.2f s", json_number_value(t));
    json_decref(r);
    redis_kill(&rd, SIGCONT);
    free(model);
    e2e_client_free(c);
    e2e_stop(&a);
    redis_stop(&rd);
}

/* result.remoteCache of a compile's answer: its state, asserting the error says `why` when off
 * and whether the answer reports a change */
static void expect_notice(const json_t *r, const char *state, const char *why, int changed)
{
    const json_t *rc = json_object_get(json_object_get(r, "result"), "remoteCache");
    cr_assert(json_is_object(rc), "the answer has no remoteCache");
    cr_assert_str_eq(json_string_value(json_object_get(rc, "state")), state);
    cr_assert_eq(json_is_true(json_object_get(rc, "changed")), changed, "changed should be %d", changed);
    const char *err = json_string_value(json_object_get(rc, "error"));
    if (why)
        cr_assert(err && strstr(err, why), "error '%s' does not say '%s'", err ? err : "(none)", why);
    else
        cr_assert_null(err, "an up remote cache has no error");
}

/* A daemon whose remote cache is address: the first compile's answer says `state` and `why`
 * (a change), the second the same (no change); returns the daemon and a client to go on. */
static void off_twice(e2e_daemon *d, e2e_client **c, const char *address, const char *state, const char *why,
                      const uint8_t *model, size_t len)
{
    const char *args[] = {"--workers", "1", "--cache-redis", address, NULL};
    e2e_prepare(d);
    e2e_put_real_plugins(d);
    e2e_launch(d, NULL, args);
    *c = e2e_client_new(d);
    e2e_client_init(*c);
    json_t *r = compile_answer(*c, 1, model, len, "llvm");
    expect_notice(r, state, why, 1);
    json_decref(r);
    r = compile_answer(*c, 2, model, len, "c");
    expect_notice(r, state, why, 0);
    json_decref(r);
}

/* The shared cache off for each reason a user meets: every compile's answer says so (tthctl prints
 * it, tests/client); back, the next answer says that once */
Test(remote_cache, compile_answers_say_when_the_shared_cache_is_off, .timeout = 300)
{
    size_t len;
    uint8_t *model = e2e_read_digits(&len);
    e2e_daemon d;
    e2e_client *c;
    /* no server: nothing listens on the port */
    off_twice(&d, &c, "redis://127.0.0.1:1?retry=60&timeout=1", "down", "cannot connect", model, len);
    e2e_client_free(c);
    e2e_stop(&d);
    /* a unix socket that is not there */
    off_twice(&d, &c, "unix:///nonexistent-dir/redis.sock?retry=60", "down", "No such file", model, len);
    e2e_client_free(c);
    e2e_stop(&d);
    /* a wrong password */
    redis rd;
    redis_start(&rd, "retry=1");
    freeReplyObject(redis_cmd(&rd, "CONFIG SET requirepass right"));
    char url[400];
    snprintf(url, sizeof url, "%s&password=wrong", rd.url);
    off_twice(&d, &c, url, "down", "AUTH", model, len);
    e2e_client_free(c);
    e2e_stop(&d);
    /* no password where Redis wants one: it answers, with errors */
    off_twice(&d, &c, rd.url, "failing", "NOAUTH", model, len);
    /* fixed: the next answer says it is back, once */
    redisContext *rc = redisConnectUnix(rd.sock);
    cr_assert(rc && !rc->err);
    freeReplyObject(redisCommand(rc, "AUTH right"));
    freeReplyObject(redisCommand(rc, "CONFIG SET requirepass %s", ""));
    redisFree(rc);
    json_t *r = compile_answer(c, 3, model, len, "llvm -opt-level=1");
    expect_notice(r, "up", NULL, 1);
    json_decref(r);
    r = compile_answer(c, 4, model, len, "llvm -opt-level=2");
    expect_notice(r, "up", NULL, 0);
    json_decref(r);
    e2e_client_free(c);
    e2e_stop(&d);
    redis_stop(&rd);
    free(model);
}

/* tthd --cache-redis ADDRESS with a mistake: exit 2, naming it */
static void refused(const char *url, const char *says)
{
    e2e_daemon d;
    e2e_prepare(&d);
    const char *args[] = {"--cache-redis", url, NULL};
    pid_t pid = e2e_spawn(&d, args);
    int status;
    cr_assert(e2e_wait_exit(pid, 10000, &status), "tthd did not exit for '%s'", url);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 2, "status %d for '%s'", status, url);
    cr_assert_eq(log_count(&d, says), 1, "tthd's message for '%s' does not say '%s'", url, says);
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
