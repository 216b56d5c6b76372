/* The tthproto library on its own: framing edge cases and the message checks of PROTOCOL.md
 * sections 2 and 3 (the e2e tests check the daemon's answers; these check the parser directly). */
#include <criterion/criterion.h>
#include <string.h>

#include <tthproto/jsonrpc.h>

/* Feed text in pieces of `step` bytes; collect up to 8 events; return the error or 0. */
static int feed(const char *text, size_t len, size_t step, size_t max_frame, tthp_frame *ev, char bodies[][64],
                size_t *n)
{
    tthp_parser p;
    tthp_parser_init(&p, max_frame);
    size_t off = 0;
    int err = 0;
    *n = 0;
    while (off < len && !err) {
        size_t piece = len - off < step ? len - off : step, used = 0;
        while (used < piece) {
            tthp_frame f;
            ssize_t r = tthp_parser_feed(&p, text + off + used, piece - used, &f);
            if (r < 0) {
                err = (int)r;
                break;
            }
            used += (size_t)r;
            if (f.type != TTHP_FRAME_NONE && *n < 8) {
                ev[*n] = f;
                snprintf(bodies[*n], 64, "%.*s", f.data ? (int)f.len : 0, f.data ? (const char *)f.data : "");
                (*n)++;
            }
        }
        off += piece;
    }
    tthp_parser_free(&p);
    return err;
}

Test(proto, frames_in_any_split)
{
    static const char text[] = "Content-Length: 2\r\n\r\n{}"
                               "content-length:3\r\nCONTENT-TYPE: application/octet-stream\r\n\r\nabc"
                               "Content-Length: 4\nContent-Type: application/vscode-jsonrpc; charset=utf-8\n\n[1,2]";
    for (size_t step = 1; step <= sizeof text; step++) {
        tthp_frame ev[8];
        char bodies[8][64];
        size_t n;
        cr_assert_eq(feed(text, sizeof text - 2, step, 1024, ev, bodies, &n), 0, "step %zu", step);
        cr_assert_eq(n, 3, "step %zu: %zu frames", step, n);
        cr_assert_eq(ev[0].type, TTHP_FRAME_JSON);
        cr_assert_str_eq(bodies[0], "{}");
        cr_assert_eq(ev[1].type, TTHP_FRAME_BINARY);
        cr_assert_str_eq(bodies[1], "abc");
        cr_assert_eq(ev[2].type, TTHP_FRAME_JSON, "bare newlines and a charset are accepted");
        cr_assert_str_eq(bodies[2], "[1,2");
    }
}

Test(proto, oversize_is_skipped_and_parsing_goes_on)
{
    static const char text[] = "Content-Length: 20\r\n\r\n01234567890123456789Content-Length: 2\r\n\r\nok";
    for (size_t step = 1; step <= 8; step++) {
        tthp_frame ev[8];
        char bodies[8][64];
        size_t n;
        cr_assert_eq(feed(text, sizeof text - 1, step, 10, ev, bodies, &n), 0);
        cr_assert_eq(n, 2);
        cr_assert_eq(ev[0].type, TTHP_FRAME_OVERSIZE);
        cr_assert_eq(ev[0].len, 20);
        cr_assert_eq(ev[1].type, TTHP_FRAME_JSON);
        cr_assert_str_eq(bodies[1], "ok");
    }
}

Test(proto, bad_headers_fail_for_good)
{
    static const struct {
        const char *text;
        int err;
    } bad[] = {
        {"Content-Length: x\r\n\r\n", TTHP_EFRAME_LENGTH},
        {"Content-Length: \r\n\r\n", TTHP_EFRAME_LENGTH},
        {"Content-Length: 12345678901234567890\r\n\r\n", TTHP_EFRAME_LENGTH},
        {"Content-Length: 1\r\nContent-Length: 1\r\n\r\n", TTHP_EFRAME_LENGTH},
        {"Content-Type: application/json\r\n\r\n", TTHP_EFRAME_LENGTH},
        {"Content-Length: 1\r\nContent-Type: image/png\r\n\r\n", TTHP_EFRAME_TYPE},
        {"garbage\r\n\r\n", TTHP_EFRAME_HEADER},
        {": empty name\r\n\r\n", TTHP_EFRAME_HEADER},
        {"\r\n", TTHP_EFRAME_HEADER},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tthp_frame ev[8];
        char bodies[8][64];
        size_t n;
        cr_assert_eq(feed(bad[i].text, strlen(bad[i].text), 3, 1024, ev, bodies, &n), bad[i].err, "'%s'", bad[i].text);
    }
    /* a header section that never ends */
    char huge[5000];
    memset(huge, 'a', sizeof huge);
    tthp_frame ev[8];
    char bodies[8][64];
    size_t n;
    cr_assert_eq(feed(huge, sizeof huge, 512, 1024, ev, bodies, &n), TTHP_EFRAME_HUGE);
}

Test(proto, messages)
{
    static const struct {
        const char *text;
        int code;
        tthp_msg_kind kind;
    } cases[] = {
        {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"status\"}", 0, TTHP_MSG_REQUEST},
        {"{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"method\":\"status\",\"params\":{}}", 0, TTHP_MSG_REQUEST},
        {"{\"jsonrpc\":\"2.0\",\"method\":\"$/cancelRequest\",\"params\":{\"id\":1}}", 0, TTHP_MSG_NOTIFICATION},
        {"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":null}", 0, TTHP_MSG_RESPONSE},
        {"{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32600,\"message\":\"m\"}}", 0, TTHP_MSG_RESPONSE},
        {"{", TTHP_PARSE_ERROR, TTHP_MSG_INVALID},
        {"{\"a\":1,\"a\":2}", TTHP_PARSE_ERROR, TTHP_MSG_INVALID},
        {"[]", TTHP_INVALID_REQUEST, TTHP_MSG_INVALID},
        {"{\"id\":1,\"method\":\"status\"}", TTHP_INVALID_REQUEST, TTHP_MSG_INVALID},
        {"{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"status\"}", TTHP_INVALID_REQUEST, TTHP_MSG_INVALID},
        {"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":1,\"error\":{\"code\":1}}", TTHP_INVALID_REQUEST, TTHP_MSG_INVALID},
        {"{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":\"x\"}}", TTHP_INVALID_REQUEST, TTHP_MSG_INVALID},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tthp_message m;
        int code = tthp_message_parse(cases[i].text, strlen(cases[i].text), &m);
        cr_assert_eq(code, cases[i].code, "'%s': %d", cases[i].text, code);
        cr_assert_eq(m.kind, cases[i].kind, "'%s'", cases[i].text);
        tthp_message_clear(&m);
    }
}

/* An error answer quotes what it can of a client's bytes; the answer is JSON text all the same
 * (invalid UTF-8 becomes '?'): the fuzzer found a parse error whose message, quoting the input,
 * could not be encoded, so no answer was built. */
Test(proto, error_answers_are_valid_utf8)
{
    static const char bad[] = "{\"socrn6\xce\xaa\xfc\x7f\x00\x00YQ\":1";
    tthp_message m;
    int code = tthp_message_parse(bad, sizeof bad - 1, &m);
    cr_assert_neq(code, 0);
    json_t *err = tthp_error_new(m.id, code, m.error_message, NULL);
    cr_assert_not_null(err, "no answer for '%s'", m.error_message);
    tthp_message_clear(&m);
    /* a message cut inside a character, an overlong form, a surrogate, a lone continuation */
    static const char *const msgs[] = {"caf\xc3", "x\xc0\xafy", "\xed\xa0\x80", "\x80" "abc", "\xf4\x90\x80\x80", "ok \xc3\xa9"};
    static const char *const want[] = {"caf?", "x??y", "???", "?abc", "????", "ok \xc3\xa9"};
    for (size_t i = 0; i < sizeof msgs / sizeof msgs[0]; i++) {
        json_t *e = tthp_error_new(NULL, -32700, msgs[i], NULL);
        cr_assert_not_null(e, "message %zu", i);
        const char *got = json_string_value(json_object_get(json_object_get(e, "error"), "message"));
        cr_assert_str_eq(got, want[i], "message %zu", i);
        json_decref(e);
    }
    json_decref(err);
    /* a fixed buffer cut inside a character loses the partial character only */
    char cut[][16] = {"caf\xc3", "ab\xe2\x82", "x\xf0\x9f\x98", "ok \xc3\xa9", "\xe2\x82\xac", "plain"};
    static const char *const kept[] = {"caf", "ab", "x", "ok \xc3\xa9", "\xe2\x82\xac", "plain"};
    for (size_t i = 0; i < sizeof cut / sizeof cut[0]; i++) {
        tthp_utf8_trim_end(cut[i]);
        cr_assert_str_eq(cut[i], kept[i], "string %zu", i);
    }
}

Test(proto, params_spec_and_table)
{
    const tthp_method *m = tthp_method_find("compile");
    cr_assert_not_null(m);
    cr_assert_eq(m->id, TTHP_M_COMPILE);
    cr_assert_null(tthp_method_find("Compile"));
    char msg[200];
    json_t *p = json_pack("{s:{}, s:s}", "model", "target", "llvm");
    cr_assert_eq(tthp_params_check(m, p, msg, sizeof msg), 0);
    json_object_set_new(p, "target", json_integer(3));
    cr_assert_eq(tthp_params_check(m, p, msg, sizeof msg), TTHP_INVALID_PARAMS);
    cr_assert(strstr(msg, "'target'") && strstr(msg, "a string or an object"), "%s", msg);
    json_object_del(p, "model");
    cr_assert_eq(tthp_params_check(m, p, msg, sizeof msg), TTHP_INVALID_PARAMS);
    json_decref(p);
    for (size_t i = 0; i < TTHP_METHOD_COUNT; i++)
        cr_assert_eq(tthp_method_find(tthp_methods[i].name), &tthp_methods[i], "names are unique");
    int major, minor;
    cr_assert_eq(tthp_version_parse("1.0", &major, &minor), 0);
    cr_assert_eq(tthp_version_parse("12", &major, &minor), 0);
    cr_assert_eq(major, 12);
    cr_assert_neq(tthp_version_parse("1.", &major, &minor), 0);
    cr_assert_neq(tthp_version_parse("v1", &major, &minor), 0);
    cr_assert(tthp_model_name_valid("mnist_2"));
    cr_assert(!tthp_model_name_valid("2mnist"));
    cr_assert(!tthp_model_name_valid("a-b"));
    cr_assert_eq(TTHP_CODE_FROM_TTH(-5), -32005);
    cr_assert_eq(TTHP_CODE_TO_TTH(-32018), -18);
    cr_assert_eq(TTHP_CODE_TO_TTH(-32601), 0);
    cr_assert_str_eq(tthp_error_name(-32104), "TooManyRequests");
}
