/* tthproto/jsonrpc.h: JSON-RPC 2.0 messages (PROTOCOL.md section 3).
 * Builders follow jansson's rule: a `_new` argument's reference is stolen. */
#ifndef TTHPROTO_JSONRPC_H
#define TTHPROTO_JSONRPC_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "tthproto/errors.h"
#include "tthproto/frame.h"
#include "tthproto/limits.h"
#include "tthproto/methods.h"

typedef enum tthp_msg_kind {
    TTHP_MSG_INVALID = 0,
    TTHP_MSG_REQUEST,
    TTHP_MSG_NOTIFICATION,
    TTHP_MSG_RESPONSE,
} tthp_msg_kind;

/* A received message. Pointers borrow from root. */
typedef struct tthp_message {
    tthp_msg_kind kind;
    json_t *root;           /* owned; NULL when the body was not JSON */
    json_t *id;             /* request/response id (integer or string), or NULL */
    const char *method;     /* requests and notifications */
    json_t *params;         /* object or NULL */
    json_t *result;         /* responses */
    json_t *error;          /* responses */
    int error_code;         /* why it is INVALID: TTHP_PARSE_ERROR or TTHP_INVALID_REQUEST */
    char error_message[160];
} tthp_message;

/* Parse and validate one JSON frame body. Returns 0, or the JSON-RPC error code to answer
 * (m->error_code/error_message; m->id is set when it could be read). Always call
 * tthp_message_clear afterwards. */
int tthp_message_parse(const void *body, size_t len, tthp_message *m);
void tthp_message_clear(tthp_message *m);

/* Builders (new references; NULL only when out of memory). id is borrowed (may be NULL: null). */
json_t *tthp_request_new(json_int_t id, const char *method, json_t *params_new);
json_t *tthp_notification_new(const char *method, json_t *params_new);
json_t *tthp_result_new(const json_t *id, json_t *result_new);
/* Cut s before an incomplete UTF-8 sequence at its end (what snprintf into a fixed buffer
 * leaves when it stops inside a character). */
void tthp_utf8_trim_end(char *s);
/* answer_new itself, or when it is NULL (building it failed: out of memory, or text that is not
 * UTF-8 from a source that escaped cleaning) a plain ASCII InternalError for id, so a request
 * always gets an answer. */
json_t *tthp_answer_or_internal(json_t *answer_new, const json_t *id);
json_t *tthp_error_new(const json_t *id, int code, const char *message, json_t *data_new);

/* A diagnostic object (PROTOCOL.md section 7). code is the libtth symbolic name. */
json_t *tthp_diagnostic_new(const char *code, int severity, const char *message,
                            const char *location, const char *hint);

/* Serialise compactly for a frame body (malloc'd, free()); *len gets the length. */
char *tthp_message_dump(const json_t *msg, size_t *len);

/* Encode msg and write it as one JSON frame to fd (blocking). 0 or -errno. */
int tthp_write_message_fd(int fd, const json_t *msg);

/* Write a `$/chunk` announcement and its binary frame to fd. 0 or -errno. */
int tthp_write_chunk_fd(int fd, const json_t *id, const char *stream, size_t offset,
                        const void *data, size_t size, size_t total);

/* Parse "MAJOR.MINOR" (minor optional). 0 or -1. */
int tthp_version_parse(const char *s, int *major, int *minor);

/* Is s a valid model name (C identifier, at most TTHP_MAX_MODEL_NAME chars)? */
int tthp_model_name_valid(const char *s);

/* Is loc an ONNX external data location tth accepts: a relative path inside the model's
 * directory, '/'-separated, at most 1024 bytes, no backslash, no empty or ".." part
 * (docs/tthctl.md, "ONNX external data")? The importer, tthd and tthctl share this rule. */
int tthp_data_location_valid(const char *loc);

#endif
