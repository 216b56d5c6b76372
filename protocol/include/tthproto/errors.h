/* tthproto/errors.h: every JSON-RPC error code of the tth protocol, defined once.
 * See PROTOCOL.md section 8. libtth's TTH_E* codes travel as TTHP_CODE_FROM_TTH(code). */
#ifndef TTHPROTO_ERRORS_H
#define TTHPROTO_ERRORS_H

/* X(NAME, code, "Name in PROTOCOL.md") */
#define TTHP_ERRORS(X)                                                 \
    X(PARSE_ERROR,          -32700, "ParseError")                      \
    X(INVALID_REQUEST,      -32600, "InvalidRequest")                  \
    X(METHOD_NOT_FOUND,     -32601, "MethodNotFound")                  \
    X(INVALID_PARAMS,       -32602, "InvalidParams")                   \
    X(INTERNAL_ERROR,       -32603, "InternalError")                   \
    X(REQUEST_CANCELLED,    -32800, "RequestCancelled")                \
    X(VERSION_MISMATCH,     -32100, "ProtocolVersionMismatch")         \
    X(NOT_INITIALIZED,      -32101, "NotInitialized")                  \
    X(FRAME_TOO_LARGE,      -32102, "FrameTooLarge")                   \
    X(REQUEST_TOO_LARGE,    -32103, "RequestTooLarge")                 \
    X(TOO_MANY_REQUESTS,    -32104, "TooManyRequests")                 \
    X(PEER_REFUSED,         -32105, "PeerRefused")                     \
    X(SHUTTING_DOWN,        -32106, "ShuttingDown")                    \
    X(BAD_FRAME,            -32107, "BadFrame")                        \
    X(UNEXPECTED_BINARY,    -32108, "UnexpectedBinary")

enum tthp_error_code {
#define TTHP__ERR_ENUM(name, code, text) TTHP_##name = code,
    TTHP_ERRORS(TTHP__ERR_ENUM)
#undef TTHP__ERR_ENUM
};

/* libtth code (0 or negative TTH_E*) → JSON-RPC code: -32000 - |code|. */
#define TTHP_CODE_FROM_TTH(c) (-32000 - ((c) < 0 ? -(c) : (c)))
/* JSON-RPC code in the libtth range → libtth code; 0 when the code is outside it. */
#define TTHP_CODE_TO_TTH(c) ((c) <= -32001 && (c) >= -32099 ? (c) + 32000 : 0)

/* "ParseError", ...; "libtth" for the libtth range; "unknown" otherwise. */
const char *tthp_error_name(int code);

#endif
