/* tthproto/limits.h: protocol version and the default limits (PROTOCOL.md section 9). */
#ifndef TTHPROTO_LIMITS_H
#define TTHPROTO_LIMITS_H

#define TTHP_PROTOCOL_MAJOR 1
#define TTHP_PROTOCOL_MINOR 0
#define TTHP_PROTOCOL_VERSION "1.0"

#define TTHP_MAX_HEADER_BYTES 4096                         /* header section, fixed */
#define TTHP_DEFAULT_MAX_FRAME_BYTES (4u * 1024 * 1024)     /* one frame body */
#define TTHP_DEFAULT_MAX_REQUEST_BYTES (16ull << 30)       /* JSON + upload of one request (on disk) */
#define TTHP_DEFAULT_MAX_CONCURRENT 32                     /* requests in flight per connection */
#define TTHP_CHUNK_BYTES (256u * 1024)                     /* binary chunks the server sends */
#define TTHP_MAX_MODEL_NAME 64

#endif
