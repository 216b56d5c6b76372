/* pb_wire.h: reading protobuf's wire format by hand, where a whole parse is not wanted: the
 * daemon's skeleton of a mapped model (onnx_skeleton.c) and tthctl's walk for external data
 * files (client/onnx_scan.c). A field is a varint key (field number << 3 | wire type), then a
 * varint (type 0), 8 bytes (1), a varint length and that many bytes (2) or 4 bytes (5). */
#ifndef TTH_PB_WIRE_H
#define TTH_PB_WIRE_H

#include <stdint.h>

/* The varint at *p (at most 10 bytes, before end); *p moves past it. -1 when it runs past end or
 * is longer. */
static inline int tth_pb_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (*p >= end)
            return -1;
        uint8_t b = *(*p)++;
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return 0;
    }
    return -1;
}

#endif
