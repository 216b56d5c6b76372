/* onnx_scan.c: the external data files an ONNX model names, found by walking its protobuf wire
 * format (docs/tthctl.md, "ONNX external data"), so that tthctl can upload them with a model it
 * streams.
 *
 * Only the messages that can hold a tensor are entered: ModelProto.graph and .functions,
 * GraphProto.node, .initializer and .sparse_initializer, NodeProto.attribute, AttributeProto's
 * tensor, graph and sparse tensor values (single and repeated), FunctionProto.node,
 * SparseTensorProto.values and .indices; in a TensorProto, every external_data entry whose key is
 * "location". Everything else is skipped by its wire type. Nesting is bounded (If and Loop bodies
 * nest graphs), and a malformed buffer is an error, never a read past its end.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_scan.h"
#include "../daemon/frontend/pb_wire.h"

#define MAX_DEPTH 64

enum msg { M_MODEL, M_GRAPH, M_NODE, M_ATTR, M_FUNC, M_TENSOR, M_SPARSE, M_ENTRY, M_NONE };

typedef struct scan {
    char **locs;
    size_t n;
    int oom;
} scan;

/* The message type of field `field` (length-delimited) inside a message of type m. */
static enum msg child(enum msg m, uint64_t field)
{
    switch (m) {
    case M_MODEL:
        return field == 7 ? M_GRAPH : field == 25 ? M_FUNC : M_NONE;
    case M_GRAPH:
        return field == 1 ? M_NODE : field == 5 ? M_TENSOR : field == 15 ? M_SPARSE : M_NONE;
    case M_NODE:
        return field == 5 ? M_ATTR : M_NONE;
    case M_ATTR:
        return field == 5 || field == 10   ? M_TENSOR
               : field == 6 || field == 11 ? M_GRAPH
               : field == 22 || field == 23 ? M_SPARSE
                                            : M_NONE;
    case M_FUNC:
        return field == 7 ? M_NODE : M_NONE;
    case M_TENSOR:
        return field == 13 ? M_ENTRY : M_NONE;
    case M_SPARSE:
        return field == 1 || field == 2 ? M_TENSOR : M_NONE;
    default:
        return M_NONE;
    }
}

static void add_location(scan *s, const uint8_t *v, size_t len)
{
    for (size_t i = 0; i < s->n; i++)
        if (strlen(s->locs[i]) == len && memcmp(s->locs[i], v, len) == 0)
            return;
    char **nl = realloc(s->locs, (s->n + 1) * sizeof *nl);
    char *str = nl ? malloc(len + 1) : NULL;
    if (nl)
        s->locs = nl;
    if (!str) {
        s->oom = 1;
        return;
    }
    memcpy(str, v, len);
    str[len] = 0;
    s->locs[s->n++] = str;
}

/* One StringStringEntryProto: a location's value is recorded. */
static int entry(scan *s, const uint8_t *p, const uint8_t *end)
{
    const uint8_t *key = NULL, *val = NULL;
    uint64_t klen = 0, vlen = 0;
    while (p < end) {
        uint64_t tag, len;
        if (tth_pb_varint(&p, end, &tag) != 0 || (tag & 7) != 2 || tth_pb_varint(&p, end, &len) != 0 ||
            len > (uint64_t)(end - p))
            return -1;
        if (tag >> 3 == 1)
            key = p, klen = len;
        else if (tag >> 3 == 2)
            val = p, vlen = len;
        p += len;
    }
    if (key && val && klen == 8 && memcmp(key, "location", 8) == 0)
        add_location(s, val, (size_t)vlen);
    return 0;
}

static int message(scan *s, enum msg m, const uint8_t *p, const uint8_t *end, int depth)
{
    if (depth > MAX_DEPTH)
        return -1;
    if (m == M_ENTRY)
        return entry(s, p, end);
    while (p < end && !s->oom) {
        uint64_t tag, v;
        if (tth_pb_varint(&p, end, &tag) != 0)
            return -1;
        switch (tag & 7) {
        case 0:
            if (tth_pb_varint(&p, end, &v) != 0)
                return -1;
            break;
        case 1:
        case 5: {
            size_t w = (tag & 7) == 1 ? 8 : 4;
            if ((size_t)(end - p) < w)
                return -1;
            p += w;
            break;
        }
        case 2: {
            if (tth_pb_varint(&p, end, &v) != 0 || v > (uint64_t)(end - p))
                return -1;
            enum msg c = child(m, tag >> 3);
            if (c != M_NONE && message(s, c, p, p + v, depth + 1) != 0)
                return -1;
            p += v;
            break;
        }
        default:
            return -1; /* groups (3, 4) are not in ONNX's schema; 6 and 7 do not exist */
        }
    }
    return 0;
}

int tthctl_onnx_external_locations(const uint8_t *model, size_t len, char ***locs, size_t *n)
{
    scan s = {0};
    int rc = message(&s, M_MODEL, model, model + len, 0);
    if (rc != 0 || s.oom) {
        for (size_t i = 0; i < s.n; i++)
            free(s.locs[i]);
        free(s.locs);
        *locs = NULL;
        *n = 0;
        return -1;
    }
    *locs = s.locs;
    *n = s.n;
    return 0;
}
