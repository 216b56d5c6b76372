/* End to end: the protocol itself against a real tthd, with raw frames. Every control method,
 * malformed frames, limits, cancellation and uploads (PROTOCOL.md). */
#include <criterion/criterion.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static const char *const basic[] = {"tp_basic", NULL};
static e2e_fixture F;

/* A fresh status request on c; asserts it succeeds. */
static json_t *status(e2e_client *c, json_int_t id)
{
    json_t *r = e2e_call(c, id, "status", NULL);
    cr_assert_not_null(r, "no answer to status");
    cr_assert_eq(e2e_error_code(r), 0, "status failed");
    return r;
}

static int has_kind(const json_t *resp, const char *kind)
{
    size_t i;
    json_t *k;
    json_array_foreach(json_object_get(json_object_get(resp, "result"), "kinds"), i, k)
        if (strcmp(json_string_value(json_object_get(k, "kind")), kind) == 0)
            return 1;
    return 0;
}

Test(protocol, initialize, .timeout = 120)
{
    e2e_open_with(&F, basic, NULL);
    e2e_client *c = e2e_client_new(&F.d); /* not initialized */

    json_t *r = e2e_call(c, 1, "status", NULL);
    cr_assert_eq(e2e_error_code(r), TTHP_NOT_INITIALIZED, "a request before initialize must be refused");
    json_decref(r);

    r = e2e_call(c, 2, "initialize", json_pack("{s:s}", "protocolVersion", "2.0"));
    cr_assert_eq(e2e_error_code(r), TTHP_VERSION_MISMATCH);
    const char *msg = json_string_value(json_object_get(json_object_get(r, "error"), "message"));
    cr_assert(strstr(msg, "2.0") && strstr(msg, TTHP_PROTOCOL_VERSION), "message must name both versions: %s", msg);
    json_decref(r);

    r = e2e_call(c, 3, "initialize", json_pack("{s:s}", "protocolVersion", "one"));
    cr_assert_eq(e2e_error_code(r), TTHP_INVALID_PARAMS);
    json_decref(r);
    r = e2e_call(c, 4, "initialize", json_pack("{s:i}", "protocolVersion", 1));
    cr_assert_eq(e2e_error_code(r), TTHP_INVALID_PARAMS);
    json_decref(r);

    r = e2e_call(c, 5, "initialize", json_pack("{s:s}", "protocolVersion", "1.7"));
    cr_assert_eq(e2e_error_code(r), 0, "a newer minor version is accepted");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(r, "result"), "protocolVersion")),
                     TTHP_PROTOCOL_VERSION);
    cr_assert_eq(e2e_result_int(r, "limits", "maxConcurrentRequests"), TTHP_DEFAULT_MAX_CONCURRENT);
    cr_assert_eq(e2e_result_int(r, "limits", "maxFrameBytes"), TTHP_DEFAULT_MAX_FRAME_BYTES);
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(json_object_get(r, "result"), "serverInfo"), "name")),
                     "tthd");
    json_decref(r);

    r = e2e_call(c, 6, "initialize", json_pack("{s:s}", "protocolVersion", "1.0"));
    cr_assert_eq(e2e_error_code(r), TTHP_INVALID_REQUEST, "a second initialize is refused");
    json_decref(r);
    json_decref(status(c, 7));
    e2e_client_free(c);
    e2e_close(&F);
}

Test(protocol, control_methods, .timeout = 120)
{
    e2e_open_with(&F, basic, NULL);
    e2e_put_plugin(F.d.plugins, "tp_abi", NULL); /* refused: its ABI major is 99 */
    /* the hot-plug watcher reloads; wait until the refusal shows */
    e2e_client *c = F.c;

    json_t *r = status(c, 1);
    cr_assert_eq(e2e_result_int(r, "pid", NULL), F.d.pid);
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(r, "result"), "protocolVersion")), "1.0");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(r, "result"), "socket")), F.d.sock);
    cr_assert_eq(e2e_result_int(r, "workers", "configured"), 2);
    cr_assert_eq(e2e_result_int(r, "connections", NULL), 1);
    json_t *before = json_object_get(json_object_get(r, "result"), "requests");
    cr_assert(json_integer_value(json_object_get(before, "served")) >= 1, "initialize counts as served");
    json_decref(r);

    r = e2e_call(c, 2, "targets/list", NULL);
    cr_assert_eq(e2e_error_code(r), 0);
    cr_assert(has_kind(r, "test-basic"), "targets/list lacks test-basic");
    json_t *kind0 = json_array_get(json_object_get(json_object_get(r, "result"), "kinds"), 0);
    cr_assert(json_is_array(json_object_get(kind0, "attrs")), "kinds carry their schema");
    cr_assert(json_is_array(json_object_get(kind0, "hooks")), "kinds carry their hooks");
    json_decref(r);

    r = e2e_call(c, 3, "tags/list", NULL);
    cr_assert_eq(e2e_error_code(r), 0);
    cr_assert(json_is_array(json_object_get(json_object_get(r, "result"), "tags")));
    json_decref(r);

    int found_error = 0;
    for (int tries = 0; tries < 100 && !found_error; tries++) {
        r = e2e_call(c, 4, "plugins/list", NULL);
        cr_assert_eq(e2e_error_code(r), 0);
        json_t *res = json_object_get(r, "result");
        cr_assert_str_eq(json_string_value(json_object_get(res, "directory")), F.d.plugins);
        json_t *p0 = json_array_get(json_object_get(res, "plugins"), 0);
        cr_assert_not_null(p0, "plugins/list lists no plugin");
        cr_assert(strstr(json_string_value(json_object_get(p0, "path")), "tp_basic.so"));
        cr_assert(strncmp(json_string_value(json_object_get(p0, "identity")), "tp-basic@0.0.1#", 15) == 0);
        size_t i;
        json_t *e;
        json_array_foreach(json_object_get(res, "errors"), i, e)
            if (strstr(json_string_value(json_object_get(e, "path")), "tp_abi.so")) {
                cr_assert_str_eq(json_string_value(json_object_get(e, "code")), "EABI");
                found_error = 1;
            }
        json_decref(r);
        if (!found_error)
            usleep(100000);
    }
    cr_assert(found_error, "plugins/list never reported the refused tp_abi.so");

    r = e2e_call(c, 5, "cache/clear", NULL);
    cr_assert_eq(e2e_error_code(r), 0);
    cr_assert_eq(e2e_result_int(r, "removedEntries", NULL), 0);
    json_decref(r);

    r = e2e_call(c, 6, "no/such/method", NULL);
    cr_assert_eq(e2e_error_code(r), TTHP_METHOD_NOT_FOUND);
    json_decref(r);
    r = e2e_call(c, 7, "target/parse", json_pack("{s:i}", "target", 42));
    cr_assert_eq(e2e_error_code(r), TTHP_INVALID_PARAMS, "target must be a string or an object");
    json_decref(r);
    r = e2e_call(c, 8, "target/parse", NULL);
    cr_assert_eq(e2e_error_code(r), TTHP_INVALID_PARAMS, "target is required");
    json_decref(r);
    r = e2e_call(c, 9, "compile", json_pack("{s:s}", "target", "test-basic"));
    cr_assert_eq(e2e_error_code(r), TTHP_INVALID_PARAMS, "model is required");
    json_decref(r);
    r = e2e_call(c, 10, "compile", json_pack("{s:{s:s, s:i}, s:s}", "model", "name", "9bad", "size", 10, "target", "x"));
    cr_assert_eq(e2e_error_code(r), TTHP_INVALID_PARAMS, "model.name must be a C identifier");
    json_decref(r);
    r = e2e_call(c, 11, "$/progress", NULL);
    cr_assert_eq(e2e_error_code(r), TTHP_METHOD_NOT_FOUND, "a notification name is not a request");
    json_decref(r);

    r = status(c, 12);
    cr_assert(e2e_result_int(r, "requests", "failed") >= 6, "failed requests are counted");
    json_decref(r);
    e2e_close(&F);
}

Test(protocol, target_parse, .timeout = 120)
{
    e2e_open_with(&F, basic, NULL);
    e2e_client *c = F.c;
    json_t *r = e2e_call(c, 1, "target/parse", json_pack("{s:s}", "target", "test-basic -level=3"));
    cr_assert_eq(e2e_error_code(r), 0, "target/parse failed: %s",
                 json_string_value(json_object_get(json_object_get(r, "error"), "message")));
    json_t *res = json_object_get(r, "result");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(res, "target"), "kind")), "test-basic");
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(res, "target"), "level")), 3);
    cr_assert(strstr(json_string_value(json_object_get(res, "string")), "test-basic"));
    cr_assert(json_string_value(json_object_get(res, "json"))[0] == '{');
    cr_assert(json_is_array(json_object_get(res, "keys")));
    cr_assert(json_is_array(json_object_get(res, "diagnostics")));
    json_t *k0 = json_array_get(json_object_get(res, "kinds"), 0);
    cr_assert_str_eq(json_string_value(json_object_get(k0, "kind")), "test-basic");
    cr_assert(strncmp(json_string_value(json_object_get(k0, "identity")), "tp-basic@", 9) == 0);
    json_decref(r);

    /* the JSON form gives the same canonical target */
    r = e2e_call(c, 2, "target/parse", json_pack("{s:{s:s, s:i}}", "target", "kind", "test-basic", "level", 3));
    cr_assert_eq(e2e_error_code(r), 0);
    json_decref(r);

    r = e2e_call(c, 3, "target/parse", json_pack("{s:s}", "target", "test-basik"));
    int code = e2e_error_code(r);
    cr_assert(code <= -32001 && code >= -32099, "an unknown kind is a libtth error, got %d", code);
    json_t *diag = json_array_get(json_object_get(json_object_get(json_object_get(r, "error"), "data"), "diagnostics"), 0);
    cr_assert_not_null(diag, "errors carry diagnostics");
    cr_assert(json_is_string(json_object_get(diag, "code")) && json_is_integer(json_object_get(diag, "severity")) &&
              json_is_string(json_object_get(diag, "message")) && json_is_string(json_object_get(diag, "location")) &&
              json_is_string(json_object_get(diag, "hint")));
    json_decref(r);
    e2e_close(&F);
}

/* Send raw bytes, expect one error response with that code, then check the connection
 * (keep=1) still answers or (keep=0) is closed. */
static void expect_raw(e2e_daemon *d, const char *raw, size_t len, int code, int keep)
{
    e2e_client *c = e2e_client_new(d);
    e2e_client_init(c);
    e2e_send_raw(c, raw, len);
    json_t *r = e2e_recv_response(c, 10000);
    cr_assert_not_null(r, "no answer to malformed input '%.40s'", raw);
    cr_assert_eq(e2e_error_code(r), code, "input '%.40s': expected %d, got %d", raw, code, e2e_error_code(r));
    cr_assert(json_is_null(json_object_get(r, "id")) || json_is_integer(json_object_get(r, "id")));
    json_decref(r);
    if (keep) {
        r = e2e_call(c, 77, "status", NULL);
        cr_assert_not_null(r, "connection closed after '%.40s'", raw);
        cr_assert_eq(e2e_error_code(r), 0);
        json_decref(r);
    } else {
        cr_assert_null(e2e_recv(c, 10000), "connection should be closed after '%.40s'", raw);
    }
    e2e_client_free(c);
}

#define RAW(s) s, sizeof(s) - 1

/* Frame body with a correct header, then as expect_raw. */
static void expect_body(e2e_daemon *d, const char *body, int code, int keep)
{
    char buf[1024];
    int n = snprintf(buf, sizeof buf, "Content-Length: %zu\r\n\r\n%s", strlen(body), body);
    expect_raw(d, buf, (size_t)n, code, keep);
}

Test(protocol, malformed_frames, .timeout = 120)
{
    static const char *const args[] = {"--max-frame-bytes", "65536", NULL};
    e2e_open_with(&F, basic, args);
    e2e_daemon *d = &F.d;
    expect_body(d, "{x}", TTHP_PARSE_ERROR, 1);
    expect_body(d, "[1,2]", TTHP_INVALID_REQUEST, 1);
    expect_body(d, "42", TTHP_INVALID_REQUEST, 1);
    expect_body(d, "{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"status\"       }",
               TTHP_INVALID_REQUEST, 1);
    expect_body(d, "{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"status\"}",
               TTHP_INVALID_REQUEST, 1);
    expect_body(d, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":7   }",
               TTHP_INVALID_REQUEST, 1);
    expect_body(d, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"status\",\"params\":[]}",
               TTHP_INVALID_REQUEST, 1);
    expect_raw(d, RAW("Content-Length: 52\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n"
                       "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"nope\",\"params\":{}}"),
               TTHP_METHOD_NOT_FOUND, 1);
    /* announced binary frame with a wrong length, and one never announced */
    expect_raw(d, RAW("Content-Length: 4\r\nContent-Type: application/octet-stream\r\n\r\nabcd"),
               TTHP_UNEXPECTED_BINARY, 1);
    /* fatal headers */
    expect_raw(d, RAW("Content-Length: abc\r\n\r\n{}"), TTHP_BAD_FRAME, 0);
    expect_raw(d, RAW("Content-Length: -5\r\n\r\n{}"), TTHP_BAD_FRAME, 0);
    expect_raw(d, RAW("Foo: bar\r\n\r\n{}"), TTHP_BAD_FRAME, 0);
    expect_raw(d, RAW("no colon here\r\n\r\n"), TTHP_BAD_FRAME, 0);
    expect_raw(d, RAW("Content-Length: 2\r\nContent-Length: 2\r\n\r\n{}"), TTHP_BAD_FRAME, 0);
    expect_raw(d, RAW("Content-Length: 2\r\nContent-Type: text/html\r\n\r\n{}"), TTHP_BAD_FRAME, 0);
    {
        char huge[6000];
        memset(huge, 'a', sizeof huge);
        memcpy(huge, "X-Pad: ", 7);
        expect_raw(d, huge, sizeof huge, TTHP_BAD_FRAME, 0);
    }
    /* oversized frame: answered, discarded, connection kept */
    {
        size_t body = 100000;
        char *big = malloc(body + 64);
        int n = snprintf(big, 64, "Content-Length: %zu\r\n\r\n", body);
        memset(big + n, ' ', body);
        expect_raw(d, big, (size_t)n + body, TTHP_FRAME_TOO_LARGE, 1);
        free(big);
    }
    /* a truncated body, then the client goes away: the daemon does not care */
    {
        e2e_client *c = e2e_client_new(d);
        e2e_send_raw(c, RAW("Content-Length: 100\r\n\r\n{\"jsonrpc\":"));
        e2e_client_free(c);
    }
    /* unknown notifications are ignored, the connection goes on */
    e2e_send(F.c, tthp_notification_new("$/somethingElse", json_object()));
    e2e_send(F.c, tthp_notification_new("$/cancelRequest", json_pack("{s:i}", "id", 12345)));
    json_t *r = status(F.c, 5);
    cr_assert(e2e_result_int(r, "requests", "failed") >= 10, "each malformed message counts as failed");
    json_decref(r);
    e2e_close(&F);
}

/* A request quoting long non-ASCII text (or invalid UTF-8) gets its error answer within a second:
 * messages cut inside a character or quoting bytes that are not UTF-8 once left the daemon with
 * an answer it could not encode, and the client waited for its timeout. */
static void answered_fast(e2e_client *c, json_int_t id, const char *method, json_t *params_new, int code)
{
    e2e_send(c, tthp_request_new(id, method, params_new));
    json_t *r = e2e_recv_response(c, 1000);
    cr_assert_not_null(r, "no answer within a second to %s", method);
    cr_assert_eq(e2e_error_code(r), code, "%s: expected %d, got %d", method, code, e2e_error_code(r));
    const char *msg = json_string_value(json_object_get(json_object_get(r, "error"), "message"));
    cr_assert(msg && *msg, "%s: an error answer says what was wrong", method);
    json_decref(r);
}

Test(protocol, non_ascii_text_is_always_answered, .timeout = 120)
{
    e2e_open_with(&F, basic, NULL);
    char e300[601 + 32];
    for (int i = 0; i < 300; i++)
        memcpy(e300 + 2 * i, "\xc3\xa9", 2);
    e300[600] = 0;
    char cpu[700];
    snprintf(cpu, sizeof cpu, "test-basic -mcpu=%s", e300);

    e2e_client *c = e2e_client_new(&F.d);
    /* before initialize, then initialize with such a version */
    answered_fast(c, 1, "initialize", json_pack("{s:s}", "protocolVersion", e300), TTHP_INVALID_PARAMS);
    e2e_client_init(c);
    answered_fast(c, 2, e300, json_object(), TTHP_METHOD_NOT_FOUND);
    e2e_send(c, tthp_request_new(3, "target/parse", json_pack("{s:s}", "target", e300)));
    json_t *r = e2e_recv_response(c, 1000);
    cr_assert_not_null(r, "no answer within a second to target/parse of 300 non-ASCII characters");
    cr_assert_neq(e2e_error_code(r), 0);
    json_decref(r);
    e2e_send(c, tthp_request_new(4, "target/parse", json_pack("{s:s}", "target", cpu)));
    r = e2e_recv_response(c, 1000);
    cr_assert_not_null(r, "no answer within a second to a target with a non-ASCII CPU");
    json_decref(r);
    json_decref(status(c, 5));
    e2e_client_free(c);

    /* raw bytes that are not UTF-8 inside a request, and in a frame header */
    expect_raw(&F.d, RAW("Content-Length: 42\r\n\r\n{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"st\xfa\xfb\xfc\xc3\"}"),
               TTHP_PARSE_ERROR, 1);
    expect_raw(&F.d, RAW("Content-Length: 2\r\nX-\xc3\xa9\xff: \xfe\r\n\r\n{}"), TTHP_INVALID_REQUEST, 1);
    expect_raw(&F.d, RAW("Content-Length: 2\r\nContent-Type: text/\xc3\xa9\xc3\r\n\r\n{}"), TTHP_BAD_FRAME, 0);
    e2e_close(&F);
}

/* A client the daemon admits under --max-connections: connections it has not yet seen close
 * (the readiness probe, a client just freed) still count for a moment, so a refused attempt
 * (the busy error arrives within the wait) is retried. */
static e2e_client *admitted(e2e_daemon *d)
{
    for (int i = 0; i < 30; i++) {
        e2e_client *n = e2e_client_new(d);
        json_t *first = e2e_recv(n, 1000);
        if (!first) {
            e2e_client_init(n);
            return n;
        }
        cr_assert_eq(e2e_error_code(first), TTHP_TOO_MANY_REQUESTS);
        json_decref(first);
        e2e_client_free(n);
        usleep(100000);
    }
    cr_assert_fail("no connection was admitted");
    return NULL;
}

/* One connection over --max-connections is told the daemon is busy (not left waiting), and a
 * place freed by a client that leaves is taken again. */
Test(protocol, connection_limit_says_busy, .timeout = 120)
{
    static const char *const args[] = {"--max-connections", "2", NULL};
    signal(SIGPIPE, SIG_IGN); /* a refused socket is closed by the daemon: writes fail, not kill */
    e2e_daemon d; /* no fixture: its client would take one of the two places */
    e2e_start(&d, basic, args);
    e2e_client *a = admitted(&d), *b = admitted(&d);
    e2e_client *c = e2e_client_new(&d);
    json_t *r = e2e_recv_response(c, 5000);
    cr_assert_not_null(r, "the connection over the limit gets an answer");
    cr_assert_eq(e2e_error_code(r), TTHP_TOO_MANY_REQUESTS);
    const char *msg = json_string_value(json_object_get(json_object_get(r, "error"), "message"));
    cr_assert(msg && strstr(msg, "busy") && strstr(msg, "--max-connections"), "message: %s", msg ? msg : "");
    json_decref(r);
    cr_assert_null(e2e_recv(c, 5000), "and is closed");
    e2e_client_free(c);
    e2e_client_free(b);
    /* b's place is free again */
    e2e_client *n = admitted(&d);
    json_decref(status(n, 9));
    e2e_client_free(n);
    json_decref(status(a, 10));
    e2e_client_free(a);
    e2e_stop(&d);
}

/* A compile request whose upload never comes stays in flight. */
static void pending_compile(e2e_client *c, json_int_t id)
{
    e2e_send(c, tthp_request_new(id, "compile", json_pack("{s:{s:s, s:i}, s:s}", "model", "name", "m", "size", 1000,
                                                          "target", "test-basic")));
}

/* An upload is written to disk as it comes (docs/cache.md, "Uploads"): one larger than the free
 * space of the daemon's $TMPDIR is refused before its first byte, and the daemon serves on. */
Test(protocol, upload_larger_than_the_disk, .timeout = 120)
{
    static const char *const args[] = {"--max-request-bytes", "9000000000000000000", NULL};
    e2e_open_with(&F, basic, args);
    json_t *r = e2e_call(F.c, 1, "compile", json_pack("{s:{s:s, s:I}, s:s}", "model", "name", "m", "size",
                                                      (json_int_t)1 << 60, "target", "test-basic"));
    cr_assert_eq(e2e_error_code(r), TTHP_REQUEST_TOO_LARGE);
    const char *msg = json_string_value(json_object_get(json_object_get(r, "error"), "message"));
    cr_assert(msg && strstr(msg, "does not fit the free space of"), "%s", msg ? msg : "(no message)");
    json_decref(r);
    r = e2e_call(F.c, 2, "status", NULL);
    cr_assert_not_null(json_object_get(r, "result"));
    json_decref(r);
    e2e_close(&F);
}

Test(protocol, limits, .timeout = 120)
{
    static const char *const args[] = {"--max-requests", "2", "--max-request-bytes", "100000", NULL};
    e2e_open_with(&F, basic, args);
    e2e_client *c = F.c;
    pending_compile(c, 1);
    pending_compile(c, 2);
    json_t *r = e2e_call(c, 3, "status", NULL);
    cr_assert_eq(e2e_error_code(r), TTHP_TOO_MANY_REQUESTS, "a third request in flight must be refused");
    json_decref(r);
    r = e2e_call(c, 5, "status", NULL);
    cr_assert_eq(e2e_error_code(r), TTHP_TOO_MANY_REQUESTS);
    json_decref(r);

    /* another connection has its own budget */
    e2e_client *c2 = e2e_connect(&F.d);
    r = e2e_call(c2, 1, "compile", json_pack("{s:{s:s, s:i}, s:s}", "model", "name", "m", "size", 200000,
                                            "target", "test-basic"));
    cr_assert_eq(e2e_error_code(r), TTHP_REQUEST_TOO_LARGE);
    json_decref(r);
    /* a request frame larger than the request limit (but within the frame limit) */
    {
        json_t *p = json_object();
        char *pad = malloc(120001);
        memset(pad, 'x', 120000);
        pad[120000] = '\0';
        json_object_set_new(p, "pad", json_string(pad));
        free(pad);
        r = e2e_call(c2, 2, "status", p);
        cr_assert_eq(e2e_error_code(r), TTHP_REQUEST_TOO_LARGE);
        json_decref(r);
    }
    r = e2e_call(c2, 3, "status", NULL);
    cr_assert_eq(e2e_error_code(r), 0);
    cr_assert_eq(e2e_result_int(r, "requests", "active"), 2, "two uploads are pending");
    json_decref(r);
    e2e_client_free(c2);

    /* cancelling frees a slot */
    e2e_send(c, tthp_notification_new("$/cancelRequest", json_pack("{s:i}", "id", 1)));
    json_t *m = e2e_recv_response(c, 10000);
    cr_assert_eq(e2e_error_code(m), TTHP_REQUEST_CANCELLED);
    cr_assert_eq(json_integer_value(json_object_get(m, "id")), 1);
    json_decref(m);
    r = e2e_call(c, 4, "status", NULL);
    cr_assert_eq(e2e_error_code(r), 0, "after a cancel there is room again");
    json_decref(r);
    e2e_client_free(c); /* closing with request 2 in flight */

    F.c = e2e_connect(&F.d);
    cr_assert_eq(e2e_status_int(F.c, "requests", "active"), 0, "a closed connection's requests are gone");
    e2e_close(&F);
}

Test(protocol, upload_errors, .timeout = 120)
{
    e2e_open_with(&F, basic, NULL);
    e2e_client *c = F.c;
    uint8_t bytes[100];
    memset(bytes, 7, sizeof bytes);
    json_t *id = json_integer(1);

    /* wrong offset */
    pending_compile(c, 1);
    cr_assert_eq(tthp_write_chunk_fd(c->fd, id, "model", 10, bytes, 100, 1000), 0);
    json_t *r = e2e_recv_response(c, 10000);
    cr_assert_eq(e2e_error_code(r), TTHP_INVALID_PARAMS, "a chunk at the wrong offset fails the upload");
    json_decref(r);
    /* wrong total */
    pending_compile(c, 1);
    cr_assert_eq(tthp_write_chunk_fd(c->fd, id, "model", 0, bytes, 100, 999), 0);
    r = e2e_recv_response(c, 10000);
    cr_assert_eq(e2e_error_code(r), TTHP_INVALID_PARAMS);
    json_decref(r);
    /* a chunk for no request is read and dropped silently */
    cr_assert_eq(tthp_write_chunk_fd(c->fd, id, "model", 0, bytes, 100, 1000), 0);
    /* a malformed announcement */
    e2e_send(c, tthp_notification_new("$/chunk", json_pack("{s:i, s:s}", "id", 1, "stream", "model")));
    r = e2e_recv_response(c, 10000);
    cr_assert_eq(e2e_error_code(r), TTHP_INVALID_PARAMS);
    json_decref(r);
    json_decref(status(c, 2));
    json_decref(id);
    e2e_close(&F);
}
