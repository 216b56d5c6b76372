/* libFuzzer target: the JSON-RPC dispatch path every frame body takes in tthd and tthctl
 * (protocol/src/jsonrpc.c, methods.c): validation and classification of a message, method
 * lookup in the method table, the parameter check of that method, the version and model-name
 * checks of initialize and compile, and the answer built from it. Invariants checked:
 *   - a message is either valid (request, notification or response) or gets a JSON-RPC error
 *     code of the protocol's table, with a NUL-terminated message;
 *   - a valid request's id is an integer or a string;
 *   - the answer the server would send (result or error for that id) serialises and parses
 *     back as a valid response with the same id. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <tthproto/jsonrpc.h>

static void check_answer(const json_t *answer, const json_t *id)
{
    size_t len;
    char *text = tthp_message_dump(answer, &len);
    if (!text)
        abort();
    tthp_message m;
    if (tthp_message_parse(text, len, &m) != 0 || m.kind != TTHP_MSG_RESPONSE)
        abort();
    if (id && !json_equal(m.id, id))
        abort();
    tthp_message_clear(&m);
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tthp_message m;
    int code = tthp_message_parse(data, size, &m);
    if (code != 0) {
        if (m.kind != TTHP_MSG_INVALID || code != m.error_code || strcmp(tthp_error_name(code), "unknown") == 0)
            abort();
        if (memchr(m.error_message, 0, sizeof m.error_message) == NULL)
            abort();
        json_t *err = tthp_error_new(m.id, code, m.error_message, NULL);
        check_answer(err, m.id);
        json_decref(err);
        tthp_message_clear(&m);
        return 0;
    }
    if (m.kind == TTHP_MSG_REQUEST && !(json_is_integer(m.id) || json_is_string(m.id)))
        abort();
    if ((m.kind == TTHP_MSG_REQUEST || m.kind == TTHP_MSG_NOTIFICATION) && (!m.method || (m.params && !json_is_object(m.params))))
        abort();
    if (m.kind == TTHP_MSG_REQUEST) {
        const tthp_method *method = tthp_method_find(m.method);
        json_t *answer;
        char msg[256];
        if (!method) {
            answer = tthp_error_new(m.id, TTHP_METHOD_NOT_FOUND, "no such method", NULL);
        } else if (tthp_params_check(method, m.params, msg, sizeof msg) != 0) {
            if (!memchr(msg, 0, sizeof msg))
                abort();
            answer = tthp_error_new(m.id, TTHP_INVALID_PARAMS, msg, NULL);
        } else {
            /* the checks initialize and compile make after the spec */
            int major, minor;
            const char *ver = json_string_value(json_object_get(m.params, "protocolVersion"));
            if (method->id == TTHP_M_INITIALIZE && !ver)
                abort(); /* the spec requires it */
            if (ver && tthp_version_parse(ver, &major, &minor) == 0 && (major < 0 || minor < 0))
                abort();
            const char *name = json_string_value(json_object_get(json_object_get(m.params, "model"), "name"));
            if (name && tthp_model_name_valid(name) && strlen(name) > TTHP_MAX_MODEL_NAME)
                abort();
            answer = tthp_result_new(m.id, json_pack("{s:s}", "method", method->name));
        }
        check_answer(answer, m.id);
        json_decref(answer);
    }
    tthp_message_clear(&m);
    return 0;
}
