/* onnx_skeleton.c: a model's protobuf without its weights, for parsing a mapped model without
 * copying the weights (docs/tthctl.md, "Large models").
 *
 * protobuf-c copies every bytes field it parses, so parsing a mapped 500 MiB model held the
 * mapping's pages and a copy of every weight at once (twice the weights) before the importer
 * made its own tensors. The skeleton is the model's bytes with the payload of each main-graph
 * initializer's raw_data left out (the field kept, empty); the payloads stay in the mapping, where
 * the importer reads each once into its tensor and then gives the pages back.
 *
 * The wire format: pb_wire.h. ModelProto.graph is field 7, GraphProto.initializer field 5, TensorProto.raw_data field 9
 * (onnx.proto3's field numbers). Only the lengths of the graph and of each initializer change. */
#include <stdlib.h>
#include <string.h>

#include "frontend_internal.h"
#include "pb_wire.h"

enum { MODEL_GRAPH = 7, GRAPH_INITIALIZER = 5, TENSOR_RAW_DATA = 9 };
#define PAYLOAD_MIN 64 /* smaller payloads stay in the skeleton: not worth a span */

static size_t put_varint(uint8_t *out, uint64_t v)
{
    size_t n = 0;
    do {
        uint8_t b = v & 0x7f;
        v >>= 7;
        out[n++] = (uint8_t)(b | (v ? 0x80 : 0));
    } while (v);
    return n;
}

/* One field at *p: its number, wire type and, for type 2, its payload [*body, *body + *len);
 * *p moves past it. -1 on a malformed or group field (the caller parses the model as it is). */
static int next_field(const uint8_t **p, const uint8_t *end, uint32_t *num, int *type, const uint8_t **body,
                      size_t *len)
{
    uint64_t key, v;
    if (tth_pb_varint(p, end, &key) || (key >> 3) == 0 || (key >> 3) > 0x1fffffff)
        return -1;
    *num = (uint32_t)(key >> 3);
    *type = (int)(key & 7);
    switch (*type) {
    case 0:
        return tth_pb_varint(p, end, &v);
    case 1:
    case 5: {
        size_t w = *type == 1 ? 8 : 4;
        if ((size_t)(end - *p) < w)
            return -1;
        *p += w;
        return 0;
    }
    case 2:
        if (tth_pb_varint(p, end, &v) || v > (uint64_t)(end - *p))
            return -1;
        *body = *p;
        *len = (size_t)v;
        *p += v;
        return 0;
    default:
        return -1;
    }
}

typedef struct sk_out {
    uint8_t *p;
    size_t n, cap;
} sk_out;

static int sk_put(sk_out *o, const void *b, size_t n)
{
    if (o->n + n > o->cap) {
        size_t cap = o->cap ? o->cap : 4096;
        while (cap < o->n + n)
            cap *= 2;
        uint8_t *np = realloc(o->p, cap);
        if (!np)
            return -1;
        o->p = np;
        o->cap = cap;
    }
    memcpy(o->p + o->n, b, n);
    o->n += n;
    return 0;
}

/* a length-delimited field: key, length, body */
static int sk_put_len(sk_out *o, uint32_t num, const uint8_t *body, size_t len)
{
    uint8_t head[20];
    size_t h = put_varint(head, (uint64_t)num << 3 | 2);
    h += put_varint(head + h, len);
    return sk_put(o, head, h) || sk_put(o, body, len);
}

/* TensorProto [t, t + n) without a raw_data payload of PAYLOAD_MIN bytes or more (*span set) */
static int sk_tensor(sk_out *o, const uint8_t *base, const uint8_t *t, size_t n, tth__onnx_span *span)
{
    const uint8_t *p = t, *end = t + n;
    span->len = 0;
    int raw = 0;
    while (p < end) {
        const uint8_t *start = p, *body = NULL;
        uint32_t num;
        int type;
        size_t len = 0;
        if (next_field(&p, end, &num, &type, &body, &len))
            return -1;
        if (num == TENSOR_RAW_DATA && ++raw > 1)
            return -1; /* the last one counts in protobuf: parse the model as it is */
        if (num == TENSOR_RAW_DATA && type == 2 && len >= PAYLOAD_MIN) {
            span->off = (size_t)(body - base);
            span->len = len;
            if (sk_put_len(o, num, body, 0))
                return -1;
        } else if (sk_put(o, start, (size_t)(p - start))) {
            return -1;
        }
    }
    return 0;
}

int tth__onnx_skeleton(const uint8_t *bytes, size_t n, uint8_t **out, size_t *out_len, tth__onnx_span **spans,
                       size_t *nspans)
{
    *out = NULL;
    *out_len = 0;
    *spans = NULL;
    *nspans = 0;
    sk_out o = {0}, g = {0}, t = {0};
    tth__onnx_span *sp = NULL;
    size_t nsp = 0, big = 0, graphs = 0;
    const uint8_t *p = bytes, *end = bytes + n;
    int rc = 0;
    while (p < end && !rc) {
        const uint8_t *start = p, *body = NULL;
        uint32_t num;
        int type;
        size_t len = 0;
        if (next_field(&p, end, &num, &type, &body, &len)) {
            rc = -1;
            break;
        }
        if (num != MODEL_GRAPH || type != 2) {
            rc = sk_put(&o, start, (size_t)(p - start));
            continue;
        }
        if (++graphs > 1) { /* protobuf merges repeated messages: parse the model as it is */
            rc = -1;
            break;
        }
        const uint8_t *q = body, *gend = body + len;
        while (q < gend && !rc) {
            const uint8_t *gs = q, *gb = NULL;
            uint32_t gn;
            int gt;
            size_t gl = 0;
            if (next_field(&q, gend, &gn, &gt, &gb, &gl)) {
                rc = -1;
                break;
            }
            if (gn != GRAPH_INITIALIZER || gt != 2) {
                rc = sk_put(&g, gs, (size_t)(q - gs));
                continue;
            }
            tth__onnx_span *ns = realloc(sp, (nsp + 1) * sizeof *ns);
            if (!ns) {
                rc = -1;
                break;
            }
            sp = ns;
            t.n = 0;
            rc = sk_tensor(&t, bytes, gb, gl, &sp[nsp]) || sk_put_len(&g, gn, t.p ? t.p : (const uint8_t *)"", t.n);
            big += sp[nsp++].len;
        }
        if (!rc)
            rc = sk_put_len(&o, MODEL_GRAPH, g.p ? g.p : (const uint8_t *)"", g.n);
    }
    free(g.p);
    free(t.p);
    if (rc || big == 0) { /* malformed (the parser says how) or nothing to leave out */
        free(o.p);
        free(sp);
        return rc ? -1 : 1;
    }
    *out = o.p;
    *out_len = o.n;
    *spans = sp;
    *nspans = nsp;
    return 0;
}
