/* End to end: plugins that crash, abort, hang or eat memory in a hook; hot-adding a plugin;
 * a client that disconnects mid-request. The daemon must survive each, name the plugin and hook,
 * and keep serving every other request. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

/* Parse `target`; return the response (asserts there is one). */
static json_t *parse(e2e_client *c, json_int_t id, const char *target)
{
    json_t *r = e2e_call(c, id, "target/parse", json_pack("{s:s}", "target", target));
    cr_assert_not_null(r, "no answer to target/parse '%s' (daemon down?)", target);
    return r;
}

static const json_t *first_diag(const json_t *r)
{
    return json_array_get(json_object_get(json_object_get(json_object_get(r, "error"), "data"), "diagnostics"), 0);
}

/* The daemon still does real work. */
static void assert_serving(e2e_client *c, json_int_t id)
{
    json_t *r = parse(c, id, "test-basic");
    cr_assert_eq(e2e_error_code(r), 0, "a good request failed after a bad plugin: %s",
                 json_string_value(json_object_get(json_object_get(r, "error"), "message")));
    json_decref(r);
}

/* A misbehaving target_parser fails its request with `code`, naming plugin and hook, with a hint
 * that says hint_has. */
static void check_bad_plugin(const char *plugin, const char *kind, int code, const char *hint_has,
                             const char *const *args)
{
    const char *const plugins[] = {"tp_basic", plugin, NULL};
    e2e_daemon d;
    e2e_start(&d, plugins, args);
    e2e_client *c = e2e_client_new(&d);
    e2e_client_init(c);
    assert_serving(c, 1);
    for (int round = 0; round < 2; round++) {
        json_t *r = parse(c, 10 + round, kind);
        cr_assert_eq(e2e_error_code(r), code, "%s: expected error %d, got %d (%s)", kind, code, e2e_error_code(r),
                     json_string_value(json_object_get(json_object_get(r, "error"), "message")));
        const json_t *diag = first_diag(r);
        cr_assert_not_null(diag, "%s: no diagnostic", kind);
        const char *loc = json_string_value(json_object_get(diag, "location"));
        cr_assert(loc && strstr(loc, kind) && strstr(loc, "target_parser"),
                  "%s: the diagnostic must name the plugin and the hook: '%s'", kind, loc ? loc : "(null)");
        const char *hint = json_string_value(json_object_get(diag, "hint"));
        cr_assert(hint && strstr(hint, hint_has), "%s: the hint '%s' does not say '%s'", kind, hint ? hint : "",
                  hint_has);
        json_decref(r);
        assert_serving(c, 20 + round);
    }
    json_t *r = e2e_call(c, 30, "status", NULL);
    cr_assert(e2e_result_int(r, "workers", "crashed") + e2e_result_int(r, "workers", "killed") >= 2,
              "the bad workers were not counted");
    cr_assert_eq(e2e_result_int(r, "workers", "alive"), 2, "the pool was not refilled");
    json_decref(r);
    e2e_client_free(c);
    e2e_stop(&d);
}

Test(plugins, segfault_in_target_parser, .timeout = 120)
{
    check_bad_plugin("tp_crash_segv", "test-segv", TTHP_CODE_FROM_TTH(-18), "the plugin has a bug", NULL);
}

Test(plugins, abort_in_target_parser, .timeout = 120)
{
    check_bad_plugin("tp_crash_abort", "test-abort", TTHP_CODE_FROM_TTH(-18), "the plugin has a bug", NULL);
}

Test(plugins, infinite_loop_in_target_parser, .timeout = 120)
{
    static const char *const args[] = {"--request-timeout", "2", NULL};
    check_bad_plugin("tp_crash_loop", "test-loop", TTHP_CODE_FROM_TTH(-14), "loop forever", args);
}

Test(plugins, runaway_allocation_in_target_parser, .timeout = 120)
{
    static const char *const args[] = {"--worker-memory-limit", "400M", "--request-timeout", "30", NULL};
    const char *const plugins[] = {"tp_basic", "tp_crash_hog", NULL};
    e2e_daemon d;
    e2e_start(&d, plugins, args);
    e2e_client *c = e2e_client_new(&d);
    e2e_client_init(c);
    json_t *r = parse(c, 1, "test-hog");
    int code = e2e_error_code(r);
    /* watched RSS (sanitizer builds) → ELIMIT; RLIMIT_AS → malloc fails: the plugin returns
     * EPLUGIN or dies on it (ECRASH). Either way only this request fails. */
    cr_assert(code == TTHP_CODE_FROM_TTH(-16) || code == TTHP_CODE_FROM_TTH(-9) || code == TTHP_CODE_FROM_TTH(-18),
              "runaway allocation: unexpected answer %d", code);
    const char *loc = json_string_value(json_object_get(first_diag(r), "location"));
    cr_assert(loc && strstr(loc, "test-hog") && strstr(loc, "target_parser"), "location '%s'", loc ? loc : "");
    json_decref(r);
    assert_serving(c, 2);
    e2e_client_free(c);
    e2e_stop(&d);
}

/* A daemon with one worker, which loops in test-loop's target_parser from the request sent on c;
 * returns that worker's pid. */
static pid_t one_worker_looping(e2e_daemon *d, e2e_client **c)
{
    static const char *const args[] = {"--workers", "1", "--request-timeout", "60", NULL};
    const char *const plugins[] = {"tp_basic", "tp_crash_loop", NULL};
    e2e_start(d, plugins, args);
    *c = e2e_client_new(d);
    e2e_client_init(*c);
    e2e_send(*c, tthp_request_new(1, "target/parse", json_pack("{s:s}", "target", "test-loop")));
    e2e_client *probe = e2e_client_new(d);
    e2e_client_init(probe);
    int busy = 0;
    for (int i = 0; i < 200 && !busy; i++) {
        json_t *r = e2e_call(probe, 10 + i, "status", NULL);
        busy = e2e_result_int(r, "workers", "busy") == 1;
        json_decref(r);
        if (!busy)
            usleep(20000);
    }
    e2e_client_free(probe);
    cr_assert(busy, "the worker never entered the looping hook");
    pid_t pids[4];
    cr_assert_eq(e2e_worker_pids(d, pids, 4), 1, "expected tthd's one worker");
    return pids[0];
}

/* SIGKILL from outside (the OOM killer, a person) is not the plugin's bug: the diagnostic says where
 * it came from and what to check (daemon/README.md); SIGSEGV and SIGABRT above keep the blame. */
Test(plugins, a_worker_killed_from_outside_is_not_blamed_on_the_plugin, .timeout = 120)
{
    e2e_daemon d;
    e2e_client *c;
    pid_t worker = one_worker_looping(&d, &c);
    cr_assert_eq(kill(worker, SIGKILL), 0);
    json_t *r = e2e_recv_response(c, 10000);
    cr_assert_not_null(r, "no answer after the worker was killed");
    cr_assert_eq(e2e_error_code(r), TTHP_CODE_FROM_TTH(-18));
    const char *msg = e2e_err_message(r);
    cr_assert(msg && strstr(msg, "killed from outside tthd") && strstr(msg, "out-of-memory killer"), "message: %s",
              msg ? msg : "");
    const json_t *diag = first_diag(r);
    const char *loc = json_string_value(json_object_get(diag, "location"));
    cr_assert(loc && strstr(loc, "test-loop") && strstr(loc, "target_parser"), "location '%s'", loc ? loc : "");
    const char *hint = json_string_value(json_object_get(diag, "hint"));
    cr_assert(hint && strstr(hint, "dmesg") && strstr(hint, "memory limit") && !strstr(hint, "has a bug"),
              "hint: %s", hint ? hint : "");
    json_decref(r);
    assert_serving(c, 2);
    e2e_client_free(c);
    e2e_stop(&d);
}

/* kill -9 of tthd while a worker is busy in a hook: the worker is gone within a second */
Test(plugins, workers_die_with_their_daemon, .timeout = 120)
{
    e2e_daemon d;
    e2e_client *c;
    pid_t worker = one_worker_looping(&d, &c);
    cr_assert_eq(kill(d.pid, SIGKILL), 0);
    waitpid(d.pid, NULL, 0);
    int running = 1;
    for (int i = 0; i < 100 && running; i++) {
        running = e2e_pid_running(worker);
        if (running)
            usleep(10000);
    }
    if (running)
        kill(worker, SIGKILL);
    cr_assert(!running, "worker %d still ran 1 s after its tthd was killed", (int)worker);
    e2e_client_free(c);
    e2e_cleanup(&d);
}

/* While one worker loops, the others serve; a disconnect cancels (kills) the looping job. */
Test(plugins, other_requests_carry_on_and_disconnect_cancels, .timeout = 120)
{
    static const char *const args[] = {"--request-timeout", "60", NULL};
    const char *const plugins[] = {"tp_basic", "tp_crash_loop", NULL};
    e2e_fixture F = {0};
    e2e_open_with(&F, plugins, args);
    e2e_client *c = F.c;
    e2e_client *looper = e2e_connect(&F.d);
    e2e_send(looper, tthp_request_new(1, "target/parse", json_pack("{s:s}", "target", "test-loop")));
    for (int i = 0; i < 5; i++)
        assert_serving(c, 10 + i);
    json_t *r = e2e_call(c, 20, "status", NULL);
    cr_assert_eq(e2e_result_int(r, "workers", "busy"), 1, "one worker is stuck in the loop");
    cr_assert_eq(e2e_result_int(r, "workers", "killed"), 0);
    json_decref(r);

    e2e_client_free(looper); /* goes away mid-request */
    int killed = 0;
    for (int i = 0; i < 100 && !killed; i++) {
        usleep(100000);
        r = e2e_call(c, 30 + i, "status", NULL);
        killed = e2e_result_int(r, "workers", "killed") == 1 && e2e_result_int(r, "workers", "busy") == 0;
        json_decref(r);
    }
    cr_assert(killed, "the abandoned job's worker was not stopped");
    assert_serving(c, 200);

    /* $/cancelRequest does the same for a client that stays */
    e2e_send(c, tthp_request_new(300, "target/parse", json_pack("{s:s}", "target", "test-loop")));
    usleep(300000);
    e2e_send(c, tthp_notification_new("$/cancelRequest", json_pack("{s:i}", "id", 300)));
    r = e2e_recv_response(c, 10000);
    cr_assert_eq(e2e_error_code(r), TTHP_REQUEST_CANCELLED);
    json_decref(r);
    assert_serving(c, 301);
    e2e_close(&F);
}

static int lists_kind(e2e_client *c, json_int_t id, const char *kind)
{
    json_t *r = e2e_call(c, id, "targets/list", NULL);
    cr_assert_eq(e2e_error_code(r), 0);
    int found = 0;
    size_t i;
    json_t *k;
    json_array_foreach(json_object_get(json_object_get(r, "result"), "kinds"), i, k)
        found |= strcmp(json_string_value(json_object_get(k, "kind")), kind) == 0;
    json_decref(r);
    return found;
}

static const char *plugin_name_of_kind(e2e_client *c, json_int_t id, const char *kind, char *buf, size_t len)
{
    json_t *r = e2e_call(c, id, "plugins/list", NULL);
    cr_assert_eq(e2e_error_code(r), 0);
    buf[0] = '\0';
    size_t i;
    json_t *p;
    json_array_foreach(json_object_get(json_object_get(r, "result"), "plugins"), i, p)
        if (strcmp(json_string_value(json_object_get(p, "kind")), kind) == 0)
            snprintf(buf, len, "%s", json_string_value(json_object_get(p, "name")));
    json_decref(r);
    return buf;
}

Test(plugins, hot_add, .timeout = 120)
{
    static const char *const args[] = {"--request-timeout", "60", NULL};
    const char *const plugins[] = {"tp_basic", "tp_crash_loop", NULL};
    e2e_fixture F = {0};
    e2e_open_with(&F, plugins, args);
    e2e_client *c = F.c;
    /* a request in flight while the plugin set changes keeps its worker */
    e2e_client *busy = e2e_connect(&F.d);
    e2e_send(busy, tthp_request_new(1, "target/parse", json_pack("{s:s}", "target", "test-loop")));
    cr_assert(lists_kind(c, 1, "test-basic"));
    cr_assert(!lists_kind(c, 2, "test-hot"), "test-hot is not installed yet");
    json_t *r = e2e_call(c, 3, "status", NULL);
    json_int_t gen = e2e_result_int(r, "workers", "generation");
    json_decref(r);

    /* install the way package managers do: write beside, then rename into place */
    char tmp[512], final[512];
    snprintf(tmp, sizeof tmp, "%s/.tp_hot.so.tmp", F.d.plugins);
    snprintf(final, sizeof final, "%s/tp_hot.so", F.d.plugins);
    e2e_put_plugin(F.d.plugins, "tp_hot", ".tp_hot.so.tmp");
    cr_assert_eq(rename(tmp, final), 0);

    int found = 0;
    for (int i = 0; i < 100 && !found; i++) {
        found = lists_kind(c, 10 + i, "test-hot");
        if (!found)
            usleep(100000);
    }
    cr_assert(found, "the new plugin never showed in targets/list");
    r = parse(c, 200, "test-hot");
    cr_assert_eq(e2e_error_code(r), 0, "the new kind does not parse: %s",
                 json_string_value(json_object_get(json_object_get(r, "error"), "message")));
    json_decref(r);
    r = e2e_call(c, 201, "status", NULL);
    cr_assert(e2e_result_int(r, "workers", "generation") > gen, "the plugin set generation did not grow");
    cr_assert_eq(e2e_result_int(r, "workers", "busy"), 1, "the in-flight request still runs on its old worker");
    cr_assert_eq(e2e_result_int(r, "workers", "killed"), 0, "a reload kills no busy worker");
    cr_assert_eq(e2e_result_int(r, "workers", "crashed"), 0);
    json_decref(r);

    /* replace a plugin in place (same kind, another plugin file): picked up too */
    char name[64];
    cr_assert_str_eq(plugin_name_of_kind(c, 300, "test-basic", name, sizeof name), "tp-basic");
    snprintf(tmp, sizeof tmp, "%s/.tp_basic.so.new", F.d.plugins);
    snprintf(final, sizeof final, "%s/tp_basic.so", F.d.plugins);
    e2e_put_plugin(F.d.plugins, "tp_dup", ".tp_basic.so.new"); /* tp_dup: kind test-basic, named tp-dup */
    cr_assert_eq(rename(tmp, final), 0);
    int replaced = 0;
    for (int i = 0; i < 100 && !replaced; i++) {
        replaced = strcmp(plugin_name_of_kind(c, 400 + i, "test-basic", name, sizeof name), "tp-dup") == 0;
        if (!replaced)
            usleep(100000);
    }
    cr_assert(replaced, "the replaced plugin was not picked up");
    assert_serving(c, 600);

    e2e_assert_no_plugin_mapped(&F.d);

    /* the old request is still there; cancelling it ends it */
    e2e_send(busy, tthp_notification_new("$/cancelRequest", json_pack("{s:i}", "id", 1)));
    r = e2e_recv_response(busy, 10000);
    cr_assert_eq(e2e_error_code(r), TTHP_REQUEST_CANCELLED);
    json_decref(r);
    e2e_client_free(busy);
    e2e_close(&F);
}

/* A plugin whose loading crashes the worker (a constructor that segfaults, a library it needs
 * aborting as it loads) is named in tthd's log and left out of the next workers, which start
 * without it and serve every other kind; the plugins list says why it is missing
 * (docs/plugin-guide.md, "A plugin that crashes as it loads"). */
Test(plugins, a_plugin_that_crashes_as_it_loads_is_left_out, .timeout = 120)
{
    const char *const plugins[] = {"tp_basic", "tp_crash_load", NULL};
    e2e_daemon d;
    e2e_start(&d, plugins, NULL);
    e2e_client *c = e2e_client_new(&d);
    e2e_client_init(c);
    assert_serving(c, 1);
    assert_serving(c, 2);
    /* a crash (signal), or under UBSan's halt_on_error its exit status */
    int named = e2e_log_count(&d, "tp_crash_load.so crashed worker") + e2e_log_count(&d, "tp_crash_load.so made worker");
    if (named < 1)
        e2e_dump_log(&d);
    cr_assert_geq(named, 1, "the log does not name the plugin");
    json_t *r = e2e_call(c, 3, "plugins/list", NULL);
    cr_assert_eq(e2e_error_code(r), 0);
    int listed = 0, refused = 0;
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(json_object_get(r, "result"), "plugins"), i, e)
        listed += strcmp(json_string_value(json_object_get(e, "kind")), "test-segv-load") == 0;
    json_array_foreach(json_object_get(json_object_get(r, "result"), "errors"), i, e) {
        const char *path = json_string_value(json_object_get(e, "path"));
        const char *msg = json_string_value(json_object_get(e, "message"));
        refused += path && strstr(path, "tp_crash_load.so") && msg && strstr(msg, "left out");
    }
    json_decref(r);
    cr_assert_eq(listed, 0, "the crashing plugin is listed as loaded");
    cr_assert_eq(refused, 1, "the plugins list does not say why tp_crash_load.so is missing");
    r = parse(c, 4, "test-segv-load");
    cr_assert_eq(e2e_error_code(r), TTHP_CODE_FROM_TTH(-6), "its kind is unknown, not a crash");
    const char *hint = json_string_value(json_object_get(first_diag(r), "hint"));
    cr_assert(hint && strstr(hint, "1 plugin file of the plugins path was refused") && strstr(hint, "tthctl plugins"),
              "the unknown kind's hint does not point to the refused file: %s", hint ? hint : "");
    json_decref(r);
    r = e2e_call(c, 5, "status", NULL);
    cr_assert_eq(e2e_result_int(r, "workers", "alive"), 2, "the pool was not refilled");
    json_decref(r);
    e2e_client_free(c);
    e2e_stop(&d);
}

static double seconds_since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

/* Parse `target` on a tthd whose workers cannot start: the answer comes within `within` seconds
 * and is the pool's error naming `worker` (the message returned for more checks). */
static json_t *parse_without_workers(e2e_client *c, json_int_t id, const char *target, const char *worker,
                                     double within)
{
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    json_t *r = parse(c, id, target);
    double s = seconds_since(&t0);
    cr_assert_eq(e2e_error_code(r), TTHP_CODE_FROM_TTH(-18), "expected a worker error, got %d", e2e_error_code(r));
    const char *msg = e2e_err_message(r);
    cr_assert(msg && strstr(msg, "cannot start its workers") && strstr(msg, worker), "message: %s", msg ? msg : "");
    cr_assert_lt(s, within, "the request waited %.1f s for workers that cannot start", s);
    return r;
}

/* tthd started with --worker `worker` (after e2e_prepare; the file is the caller's to make, or
 * not) and a long request deadline, and a client connected to it */
static e2e_client *launch_with_worker(e2e_daemon *d, const char *worker, const char *const *plugins)
{
    const char *const args[] = {"--worker", worker, "--request-timeout", "300", NULL};
    e2e_launch(d, plugins, args);
    e2e_client *c = e2e_client_new(d);
    e2e_client_init(c);
    return c;
}

/* A plugin whose loading never returns (a constructor that loops) stalls the worker before it is
 * ready: after a quarter of the request deadline (10 s at least) tthd kills it and leaves that
 * plugin out, as for one that crashes; the request waiting for a worker is then served. */
Test(plugins, a_plugin_that_hangs_as_it_loads_is_left_out, .timeout = 120)
{
    static const char *const args[] = {"--request-timeout", "40", NULL};
    const char *const plugins[] = {"tp_basic", "tp_crash_load_loop", NULL};
    e2e_daemon d;
    e2e_start(&d, plugins, args);
    e2e_client *c = e2e_client_new(&d);
    e2e_client_init(c);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_serving(c, 1);
    double s = seconds_since(&t0);
    cr_assert_lt(s, 30.0, "served after %.1f s (the start deadline is 10 s)", s);
    if (e2e_log_count(&d, "tp_crash_load_loop.so stalled worker") < 1)
        e2e_dump_log(&d);
    cr_assert_geq(e2e_log_count(&d, "tp_crash_load_loop.so stalled worker"), 1, "the log does not name the plugin");
    json_t *r = e2e_call(c, 2, "status", NULL);
    cr_assert_eq(e2e_result_int(r, "workers", "alive"), 2, "the pool was not refilled");
    json_decref(r);
    e2e_client_free(c);
    e2e_stop(&d);
}

/* When tth-worker itself cannot run (here a stand-in that exits 127, as the system's loader does
 * for a missing shared library), requests fail within seconds saying so, not after the request
 * deadline with "no worker was free"; tthd keeps running and answers other methods. */
Test(plugins, workers_that_cannot_start_fail_requests_at_once, .timeout = 120)
{
    e2e_daemon d;
    e2e_prepare(&d);
    char worker[300], cmd[700];
    snprintf(worker, sizeof worker, "%s/broken-worker", d.root);
    snprintf(cmd, sizeof cmd, "printf '#!/bin/sh\\necho broken-worker: a library is missing >&2\\nexit 127\\n' > '%s' && "
             "chmod 755 '%s'", worker, worker);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    const char *const plugins[] = {"tp_basic", NULL};
    e2e_client *c = launch_with_worker(&d, worker, plugins);
    json_t *r = parse_without_workers(c, 1, "test-basic", "broken-worker", 30.0);
    const char *msg = e2e_err_message(r);
    cr_assert(strstr(msg, "127"), "message: %s", msg);
    const char *hint = json_string_value(json_object_get(first_diag(r), "hint"));
    cr_assert(hint && strstr(hint, "--help"), "hint: %s", hint ? hint : "");
    json_decref(r);
    /* later requests fail at once too */
    json_decref(parse_without_workers(c, 2, "test-basic", "broken-worker", 5.0));
    r = e2e_call(c, 3, "status", NULL);
    cr_assert_eq(e2e_error_code(r), 0, "tthd stopped answering");
    json_decref(r);
    e2e_client_free(c);
    e2e_stop(&d);
}

/* The same when the worker executable is not there at all (the spawn itself fails, so no worker
 * ever exits to trigger it). */
Test(plugins, a_missing_worker_executable_fails_requests_at_once, .timeout = 120)
{
    e2e_daemon d;
    e2e_prepare(&d);
    char worker[300];
    snprintf(worker, sizeof worker, "%s/no-such-worker", d.root);
    e2e_client *c = launch_with_worker(&d, worker, NULL);
    json_t *r = parse_without_workers(c, 1, "llvm", "no-such-worker", 30.0);
    const char *msg = e2e_err_message(r);
    cr_assert(strstr(msg, "no such file"), "message: %s", msg);
    json_decref(r);
    e2e_client_free(c);
    e2e_stop(&d);
}
