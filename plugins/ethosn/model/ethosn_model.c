/* ethosn_model.c: tth's functional model of the Arm Ethos-N78 (the interface and its contract are
 * in ethosn_model.h; the blob format in tth's plugins/ethosn/FORMAT.md; the arithmetic of every
 * operator in docs/ethosn.md, "The functional model").
 *
 * A run goes: walk the blob once to count (and validate each field), lay out one memory block
 * (tables + every computed value), walk it again to fill the tables, link and validate every node
 * against its operator, bind the buffers, compute the nodes in order, copy the result out.
 * Nothing is written to an output before every check has passed.
 */
#include "ethosn_model.h"
/* the one reader of tth's parameters file; the copy shipped in an artifact has it inlined here */
#include "tth_params.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EM_MAX_RANK 8
#define EM_MAX_BYTES 0x7fffffffu   /* one tensor: at most 2^31 - 1 bytes */
#define EM_MAX_TYPES 4096u         /* fields of one node (a split's parts) */
#define EM_MAX_WINDOW 0x100000     /* strides, padding, dilation, kernel: at most 2^20 */
#define EM_ALIGN 16u

/* indices and counts of the blob are u32: unsigned int must hold them */
typedef char em_unsigned_holds_u32[sizeof(unsigned) >= 4 ? 1 : -1];

/* tth's dtype numbers (FORMAT.md) */
enum { DT_F32 = 1, DT_F16 = 2, DT_F64 = 3, DT_I8 = 4, DT_I16 = 5, DT_I32 = 6, DT_I64 = 7, DT_U8 = 8, DT_U16 = 9,
       DT_U32 = 10, DT_U64 = 11, DT_BOOL = 12 };

enum { K_PARAM = 1, K_CONST = 2, K_CALL = 3, K_TUPLE = 4, K_GET = 5 };

enum { A_INT = 1, A_REAL = 2, A_STR = 3, A_BOOL = 4, A_INTS = 5, A_REALS = 6, A_NULL = 7 };

typedef enum em_op {
    OP_NONE,
    OP_CONV2D, OP_MATMUL, OP_REQUANTIZE, OP_QUANTIZE, OP_DEQUANTIZE, OP_ADD, OP_MULTIPLY, OP_CLIP, OP_RELU,
    OP_LEAKY_RELU, OP_SIGMOID, OP_TANH, OP_MAX_POOL, OP_AVG_POOL, OP_GLOBAL_AVG_POOL, OP_MEAN, OP_CONCAT, OP_SPLIT,
    OP_PAD, OP_RESHAPE, OP_TRANSPOSE, OP_RESIZE
} em_op;

static const struct {
    const char *name;
    em_op op;
    int min_args, max_args;
} em_ops[] = {
    {"qnn.conv2d", OP_CONV2D, 4, 4},         {"qnn.matmul", OP_MATMUL, 4, 4},
    {"qnn.requantize", OP_REQUANTIZE, 5, 5}, {"qnn.quantize", OP_QUANTIZE, 3, 3},
    {"qnn.dequantize", OP_DEQUANTIZE, 3, 3}, {"add", OP_ADD, 2, 2},
    {"multiply", OP_MULTIPLY, 2, 2},         {"clip", OP_CLIP, 1, 1},
    {"nn.relu", OP_RELU, 1, 1},              {"nn.leaky_relu", OP_LEAKY_RELU, 1, 1},
    {"sigmoid", OP_SIGMOID, 1, 1},           {"tanh", OP_TANH, 1, 1},
    {"nn.max_pool2d", OP_MAX_POOL, 1, 1},    {"nn.avg_pool2d", OP_AVG_POOL, 1, 1},
    {"nn.global_avg_pool2d", OP_GLOBAL_AVG_POOL, 1, 1},
    {"mean", OP_MEAN, 1, 1},                 {"concatenate", OP_CONCAT, 1, 4096},
    {"split", OP_SPLIT, 1, 1},               {"nn.pad", OP_PAD, 1, 1},
    {"reshape", OP_RESHAPE, 1, 1},           {"transpose", OP_TRANSPOSE, 1, 1},
    {"image.resize2d", OP_RESIZE, 1, 1},
};

typedef struct em_type {
    int dtype, rank;
    int64_t dim[EM_MAX_RANK];
    size_t numel, nbytes;
} em_type;

typedef struct em_const {
    size_t name_off;
    unsigned name_len;
    em_type type;
    int is_inline;
    double value;
} em_const;

typedef struct em_node {
    int kind;
    em_op op;
    unsigned ref, index;   /* param/const number, or tuple node; tuple_get's field */
    unsigned nargs;
    size_t args_off;       /* nargs x u32 in the blob */
    size_t name_off;       /* the operator's name (calls) */
    unsigned name_len;
    size_t attrs_off;      /* the first attribute */
    unsigned nattrs;
    unsigned ntypes, type0; /* its types: types[type0 .. type0 + ntypes) */
} em_node;

typedef struct em_net {
    const unsigned char *blob;
    size_t len;
    unsigned tops, ple_ratio, sram_kib;
    size_t sym_off;
    unsigned sym_len;
    unsigned nparams, nconsts, nnodes, ntypes, result;
    em_type *ptypes;
    em_const *consts;
    em_node *nodes;
    em_type *types;
    unsigned char **vals;      /* per type: the value's bytes */
    unsigned char *inline_mem; /* 8 bytes per constant */
    unsigned char *value_mem;  /* computed values */
    size_t value_bytes;        /* their total size (each rounded up to EM_ALIGN) */
    char *why;
    size_t why_len;
} em_net;

static int32_t em_fail(em_net *n, int32_t status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static int32_t em_fail(em_net *n, int32_t status, const char *fmt, ...)
{
    if (n->why && n->why_len && !n->why[0]) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(n->why, n->why_len, fmt, ap);
        va_end(ap);
    }
    return status;
}

/* ---- reading the blob ------------------------------------------------------------------------ */

typedef struct em_rd {
    const unsigned char *p;
    size_t len, at;
    int bad; /* a read ran past the end */
} em_rd;

static int em_take(em_rd *r, size_t n)
{
    if (r->bad || r->len - r->at < n) {
        r->bad = 1;
        return 0;
    }
    return 1;
}

static uint8_t rd_u8(em_rd *r)
{
    if (!em_take(r, 1))
        return 0;
    return r->p[r->at++];
}

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const unsigned char *p)
{
    return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

static uint32_t rd_u32(em_rd *r)
{
    if (!em_take(r, 4))
        return 0;
    r->at += 4;
    return le32(r->p + r->at - 4);
}

static uint64_t rd_u64(em_rd *r)
{
    if (!em_take(r, 8))
        return 0;
    r->at += 8;
    return le64(r->p + r->at - 8);
}

static double f64_of(uint64_t v)
{
    double d;
    memcpy(&d, &v, sizeof d);
    return d;
}

static int64_t i64_of(uint64_t v)
{
    return v <= (uint64_t)INT64_MAX ? (int64_t)v : -(int64_t)(~v) - 1;
}

/* a str: its offset and length; 0 when truncated */
static int rd_str(em_rd *r, size_t *off, unsigned *len)
{
    *off = 0;
    *len = 0;
    unsigned n = rd_u32(r);
    if (!em_take(r, n))
        return 0;
    *off = r->at;
    *len = n;
    r->at += n;
    return 1;
}

static size_t dtype_size(int dt)
{
    switch (dt) {
    case DT_I8: case DT_U8: case DT_BOOL: return 1;
    case DT_I16: case DT_U16: case DT_F16: return 2;
    case DT_F32: case DT_I32: case DT_U32: return 4;
    case DT_F64: case DT_I64: case DT_U64: return 8;
    default: return 0;
    }
}

static const char *dtype_name(int dt)
{
    static const char *const names[] = {"invalid", "float32", "float16", "float64", "int8", "int16", "int32",
                                        "int64", "uint8", "uint16", "uint32", "uint64", "bool"};
    return dt >= 0 && dt <= DT_BOOL ? names[dt] : "invalid";
}

static int is_float(int dt)
{
    return dt == DT_F32 || dt == DT_F64;
}

static int is_int(int dt)
{
    return dt == DT_I8 || dt == DT_U8 || dt == DT_I16 || dt == DT_U16 || dt == DT_I32 || dt == DT_U32 ||
           dt == DT_I64;
}

/* a type: dtype, rank, dims; sizes checked against the limits */
static int32_t rd_type(em_net *n, em_rd *r, em_type *t, const char *what, unsigned at)
{
    memset(t, 0, sizeof *t);
    t->dtype = rd_u8(r);
    t->rank = rd_u8(r);
    if (r->bad)
        return ETHOSN_MODEL_E_TRUNCATED;
    if (!dtype_size(t->dtype))
        return em_fail(n, ETHOSN_MODEL_E_CORRUPT, "%s %u has dtype %d, not a tth dtype", what, at, t->dtype);
    if (t->rank > EM_MAX_RANK)
        return em_fail(n, ETHOSN_MODEL_E_CORRUPT, "%s %u has rank %d (at most %d)", what, at, t->rank, EM_MAX_RANK);
    uint64_t numel = 1;
    for (int i = 0; i < t->rank; i++) {
        uint64_t d = rd_u64(r);
        if (r->bad)
            return ETHOSN_MODEL_E_TRUNCATED;
        if (d > EM_MAX_BYTES || (d && numel > EM_MAX_BYTES / d))
            return em_fail(n, ETHOSN_MODEL_E_CORRUPT, "%s %u has a dimension of %llu: larger than the model's limit "
                           "of 2^31 bytes a tensor", what, at, (unsigned long long)d);
        t->dim[i] = (int64_t)d;
        numel *= d;
    }
    if (numel * dtype_size(t->dtype) > EM_MAX_BYTES)
        return em_fail(n, ETHOSN_MODEL_E_CORRUPT, "%s %u needs more than 2^31 bytes", what, at);
    t->numel = (size_t)numel;
    t->nbytes = (size_t)numel * dtype_size(t->dtype);
    return 0;
}

static int type_eq(const em_type *a, const em_type *b)
{
    if (a->dtype != b->dtype || a->rank != b->rank)
        return 0;
    for (int i = 0; i < a->rank; i++)
        if (a->dim[i] != b->dim[i])
            return 0;
    return 1;
}

static void type_str(const em_type *t, char *buf, size_t len)
{
    int k = snprintf(buf, len, "%s[", dtype_name(t->dtype));
    for (int i = 0; i < t->rank && k > 0 && (size_t)k < len; i++)
        k += snprintf(buf + k, len - (size_t)k, "%s%lld", i ? ", " : "", (long long)t->dim[i]);
    if (k > 0 && (size_t)k < len)
        snprintf(buf + k, len - (size_t)k, "]");
}

/* One attribute's encoding (FORMAT.md): skips it, checking its tag and length. */
static int32_t rd_attr(em_net *n, em_rd *r, unsigned node)
{
    size_t off;
    unsigned len;
    if (!rd_str(r, &off, &len))
        return ETHOSN_MODEL_E_TRUNCATED;
    uint8_t tag = rd_u8(r);
    if (r->bad)
        return ETHOSN_MODEL_E_TRUNCATED;
    unsigned cnt;
    switch (tag) {
    case A_INT: case A_REAL: rd_u64(r); break;
    case A_STR: rd_str(r, &off, &len); break;
    case A_BOOL:
        if (rd_u8(r) > 1 && !r->bad)
            return em_fail(n, ETHOSN_MODEL_E_CORRUPT, "node %u: a bool attribute that is neither 0 nor 1", node);
        break;
    case A_INTS: case A_REALS:
        cnt = rd_u32(r);
        if (!r->bad && em_take(r, (size_t)cnt * 8))
            r->at += (size_t)cnt * 8;
        break;
    case A_NULL: break;
    default: return em_fail(n, ETHOSN_MODEL_E_CORRUPT, "node %u: attribute tag %u is not one of FORMAT.md's", node, tag);
    }
    return r->bad ? ETHOSN_MODEL_E_TRUNCATED : 0;
}

static int str_eq(const em_net *n, size_t off, unsigned len, const char *s)
{
    return strlen(s) == len && memcmp(n->blob + off, s, len) == 0;
}

/* Walk the blob: count (fill == 0) or fill the tables (fill == 1, counts known). */
static int32_t em_walk(em_net *n, int fill)
{
    em_rd r = {n->blob, n->len, 0, 0};
    int32_t rc;
    if (n->len < 8)
        return em_fail(n, ETHOSN_MODEL_E_TRUNCATED, "the network is %lu bytes, shorter than its magic",
                       (unsigned long)n->len);
    if (memcmp(n->blob, "TTHEN78\0", 8) != 0)
        return em_fail(n, ETHOSN_MODEL_E_MAGIC, "not a tth-ethosn-network blob (no TTHEN78 magic)");
    r.at = 8;
    unsigned version = rd_u32(&r);
    if (r.bad)
        return em_fail(n, ETHOSN_MODEL_E_TRUNCATED, "the network ends inside its version");
    if (version != ETHOSN_MODEL_FORMAT_VERSION)
        return em_fail(n, ETHOSN_MODEL_E_VERSION, "the network has format version %u; this functional model reads "
                       "version %u (recompile the model with the tth that made this model)",
                       version, ETHOSN_MODEL_FORMAT_VERSION);
    size_t off;
    unsigned len;
    rd_str(&r, &off, &len); /* producer */
    rd_str(&r, &off, &len); /* note */
    rd_str(&r, &off, &len); /* variant */
    n->tops = rd_u32(&r);
    n->ple_ratio = rd_u32(&r);
    n->sram_kib = rd_u32(&r);
    rd_str(&r, &n->sym_off, &n->sym_len);
    unsigned np = rd_u32(&r);
    if (r.bad)
        return em_fail(n, ETHOSN_MODEL_E_TRUNCATED, "the network ends inside its header");
    for (unsigned i = 0; i < np; i++) {
        em_type t;
        if (!rd_str(&r, &off, &len))
            return em_fail(n, ETHOSN_MODEL_E_TRUNCATED, "the network ends inside parameter %u", i);
        if ((rc = rd_type(n, &r, &t, "parameter", i)))
            return rc == ETHOSN_MODEL_E_TRUNCATED ? em_fail(n, rc, "the network ends inside parameter %u", i) : rc;
        if (fill)
            n->ptypes[i] = t;
    }
    unsigned nc = rd_u32(&r);
    if (r.bad)
        return em_fail(n, ETHOSN_MODEL_E_TRUNCATED, "the network ends before its constants");
    for (unsigned i = 0; i < nc; i++) {
        em_const c;
        memset(&c, 0, sizeof c);
        if (!rd_str(&r, &c.name_off, &c.name_len) || !rd_str(&r, &off, &len))
            return em_fail(n, ETHOSN_MODEL_E_TRUNCATED, "the network ends inside constant %u", i);
        if ((rc = rd_type(n, &r, &c.type, "constant", i)))
            return rc == ETHOSN_MODEL_E_TRUNCATED ? em_fail(n, rc, "the network ends inside constant %u", i) : rc;
        rd_u64(&r); /* hash */
        uint8_t inl = rd_u8(&r);
        if (r.bad)
            return em_fail(n, ETHOSN_MODEL_E_TRUNCATED, "the network ends inside constant %u", i);
        if (inl > 1)
            return em_fail(n, ETHOSN_MODEL_E_CORRUPT, "constant %u: inline flag %u (0 or 1)", i, inl);
        c.is_inline = inl;
        if (inl) {
            if (c.type.numel != 1)
                return em_fail(n, ETHOSN_MODEL_E_CORRUPT, "constant %u is inline but has %lu elements", i,
                               (unsigned long)c.type.numel);
            c.value = f64_of(rd_u64(&r));
            if (r.bad)
                return em_fail(n, ETHOSN_MODEL_E_TRUNCATED, "the network ends inside constant %u", i);
        }
        if (fill)
            n->consts[i] = c;
    }
    unsigned nn = rd_u32(&r), ntypes = 0;
    if (r.bad)
        return em_fail(n, ETHOSN_MODEL_E_TRUNCATED, "the network ends before its nodes");
    size_t values = 0;
    for (unsigned i = 0; i < nn; i++) {
        em_node d;
        memset(&d, 0, sizeof d);
        d.kind = rd_u8(&r);
        switch (d.kind) {
        case K_PARAM: case K_CONST: d.ref = rd_u32(&r); break;
        case K_CALL:
            if (!rd_str(&r, &d.name_off, &d.name_len))
                break;
            d.nargs = rd_u32(&r);
            if (!em_take(&r, (size_t)d.nargs * 4))
                break;
            d.args_off = r.at;
            r.at += (size_t)d.nargs * 4;
            d.nattrs = rd_u32(&r);
            d.attrs_off = r.at;
            for (unsigned a = 0; a < d.nattrs && !r.bad; a++)
                if ((rc = rd_attr(n, &r, i)) && rc != ETHOSN_MODEL_E_TRUNCATED)
                    return rc;
            break;
        case K_TUPLE:
            d.nargs = rd_u32(&r);
            if (!em_take(&r, (size_t)d.nargs * 4))
                break;
            d.args_off = r.at;
            r.at += (size_t)d.nargs * 4;
            break;
        case K_GET:
            d.ref = rd_u32(&r);
            d.index = rd_u32(&r);
            break;
        default:
            if (!r.bad)
                return em_fail(n, ETHOSN_MODEL_E_CORRUPT, "node %u has kind %d (1 to 5)", i, d.kind);
        }
        d.ntypes = rd_u32(&r);
        if (r.bad)
            return em_fail(n, ETHOSN_MODEL_E_TRUNCATED, "the network ends inside node %u", i);
        if (d.ntypes == 0 || d.ntypes > EM_MAX_TYPES)
            return em_fail(n, ETHOSN_MODEL_E_CORRUPT, "node %u has %u types (1 to %u)", i, d.ntypes, EM_MAX_TYPES);
        d.type0 = ntypes;
        for (unsigned t = 0; t < d.ntypes; t++) {
            em_type ty;
            if ((rc = rd_type(n, &r, &ty, "node", i)))
                return rc == ETHOSN_MODEL_E_TRUNCATED ? em_fail(n, rc, "the network ends inside node %u", i) : rc;
            if (fill)
                n->types[ntypes] = ty;
            ntypes++;
            if (d.kind == K_CALL) {
                size_t sz = (ty.nbytes + EM_ALIGN - 1) / EM_ALIGN * EM_ALIGN;
                if (values > (size_t)-1 - sz)
                    return em_fail(n, ETHOSN_MODEL_E_NOMEM, "the network's values need more memory than an address "
                                   "space holds");
                values += sz;
            }
        }
        if (fill)
            n->nodes[i] = d;
    }
    unsigned result = rd_u32(&r);
    if (r.bad)
        return em_fail(n, ETHOSN_MODEL_E_TRUNCATED, "the network ends before its result");
    if (r.at != n->len)
        return em_fail(n, ETHOSN_MODEL_E_CORRUPT, "%lu bytes follow the network's end",
                       (unsigned long)(n->len - r.at));
    if (result >= nn)
        return em_fail(n, ETHOSN_MODEL_E_CORRUPT, "the result is node %u of %u", result, nn);
    n->nparams = np;
    n->nconsts = nc;
    n->nnodes = nn;
    n->ntypes = ntypes;
    n->result = result;
    n->value_bytes = values;
    return 0;
}

/* ---- memory -------------------------------------------------------------------------------- */

static size_t round_up(size_t v)
{
    return (v + EM_ALIGN - 1) / EM_ALIGN * EM_ALIGN;
}

/* Bytes of the tables (and, with values, of every computed value). */
static size_t em_layout(const em_net *n, int values, unsigned char *base, em_net *out)
{
    size_t at = 0;
    size_t sz[6] = {round_up((size_t)n->nparams * sizeof(em_type)), round_up((size_t)n->nconsts * sizeof(em_const)),
                    round_up((size_t)n->nnodes * sizeof(em_node)), round_up((size_t)n->ntypes * sizeof(em_type)),
                    round_up((size_t)n->ntypes * sizeof(unsigned char *)), round_up((size_t)n->nconsts * 8)};
    void *ptr[6];
    for (int i = 0; i < 6; i++) {
        ptr[i] = base ? base + at : NULL;
        at += sz[i];
    }
    if (out) {
        out->ptypes = ptr[0];
        out->consts = ptr[1];
        out->nodes = ptr[2];
        out->types = ptr[3];
        out->vals = ptr[4];
        out->inline_mem = ptr[5];
        out->value_mem = base && values ? base + at : NULL;
    }
    return values ? at + n->value_bytes : at;
}

/* ---- attributes ------------------------------------------------------------------------------ */

typedef struct em_attr {
    int tag;
    const unsigned char *p; /* the value */
    unsigned n;             /* elements of an array, bytes of a string */
} em_attr;

static int em_attr_find(em_net *n, const em_node *d, const char *key, em_attr *a)
{
    em_rd r = {n->blob, n->len, d->attrs_off, 0};
    for (unsigned i = 0; i < d->nattrs; i++) {
        size_t koff = 0, voff = 0;
        unsigned klen = 0, vlen = 0;
        rd_str(&r, &koff, &klen);
        a->tag = rd_u8(&r);
        a->p = n->blob + r.at;
        a->n = 0;
        switch (a->tag) {
        case A_INT: case A_REAL: r.at += 8; break;
        case A_STR: rd_str(&r, &voff, &vlen); a->p = n->blob + voff; a->n = vlen; break;
        case A_BOOL: r.at += 1; break;
        case A_INTS: case A_REALS: a->n = rd_u32(&r); a->p = n->blob + r.at; r.at += (size_t)a->n * 8; break;
        default: break;
        }
        if (str_eq(n, koff, klen, key))
            return 1;
    }
    return 0;
}

static const char *node_op(em_net *n, const em_node *d, char *buf, size_t len)
{
    size_t k = d->name_len < len - 1 ? d->name_len : len - 1;
    memcpy(buf, n->blob + d->name_off, k);
    buf[k] = 0;
    return buf;
}

#define OPNAME(d) node_op(n, (d), opbuf, sizeof opbuf)

static int32_t attr_wrong(em_net *n, const em_node *d, unsigned i, const char *key, const char *want)
{
    char opbuf[64];
    return em_fail(n, ETHOSN_MODEL_E_CORRUPT, "node %u (%s): attribute '%s' must be %s", i, OPNAME(d), key, want);
}

static int32_t attr_missing(em_net *n, const em_node *d, unsigned i, const char *key)
{
    char opbuf[64];
    return em_fail(n, ETHOSN_MODEL_E_CORRUPT, "node %u (%s): the required attribute '%s' is missing", i, OPNAME(d),
                   key);
}

/* integer attribute; a missing one takes def unless required */
static int32_t attr_int(em_net *n, const em_node *d, unsigned i, const char *key, int required, int64_t def,
                        int64_t *out)
{
    em_attr a;
    if (!em_attr_find(n, d, key, &a)) {
        *out = def;
        return required ? attr_missing(n, d, i, key) : 0;
    }
    if (a.tag != A_INT)
        return attr_wrong(n, d, i, key, "an integer");
    *out = i64_of(le64(a.p));
    return 0;
}

static int32_t attr_real(em_net *n, const em_node *d, unsigned i, const char *key, int required, double def,
                         double *out)
{
    em_attr a;
    if (!em_attr_find(n, d, key, &a)) {
        *out = def;
        return required ? attr_missing(n, d, i, key) : 0;
    }
    if (a.tag == A_INT)
        *out = (double)i64_of(le64(a.p));
    else if (a.tag == A_REAL)
        *out = f64_of(le64(a.p));
    else
        return attr_wrong(n, d, i, key, "a number");
    if (*out != *out)
        return attr_wrong(n, d, i, key, "a number, not NaN");
    return 0;
}

static int32_t attr_bool(em_net *n, const em_node *d, unsigned i, const char *key, int def, int *out)
{
    em_attr a;
    *out = def;
    if (!em_attr_find(n, d, key, &a))
        return 0;
    if (a.tag == A_BOOL)
        *out = a.p[0];
    else if (a.tag == A_INT && (le64(a.p) == 0 || le64(a.p) == 1))
        *out = (int)le64(a.p);
    else
        return attr_wrong(n, d, i, key, "a bool");
    return 0;
}

/* integer array of `want` entries (-1: any up to max); def (ndef entries) when missing, or an
 * error without def */
static int32_t attr_ints(em_net *n, const em_node *d, unsigned i, const char *key, int want, int max,
                         const int64_t *def, int ndef, int64_t *out, int *count)
{
    em_attr a;
    if (!em_attr_find(n, d, key, &a)) {
        if (!def)
            return attr_missing(n, d, i, key);
        for (int k = 0; k < ndef; k++)
            out[k] = def[k];
        *count = ndef;
        return 0;
    }
    if (a.tag != A_INTS || (want >= 0 && a.n != (unsigned)want) || a.n > (unsigned)max) {
        char what[64];
        if (want >= 0)
            snprintf(what, sizeof what, "an array of %d integers", want);
        else
            snprintf(what, sizeof what, "an array of at most %d integers", max);
        return attr_wrong(n, d, i, key, what);
    }
    for (unsigned k = 0; k < a.n; k++)
        out[k] = i64_of(le64(a.p + 8 * (size_t)k));
    *count = (int)a.n;
    return 0;
}

/* a string attribute out of choices (NULL-terminated): its index; def when missing */
static int32_t attr_choice(em_net *n, const em_node *d, unsigned i, const char *key, int def,
                           const char *const *choices, int *out)
{
    em_attr a;
    *out = def;
    if (!em_attr_find(n, d, key, &a))
        return 0;
    if (a.tag == A_STR)
        for (int k = 0; choices[k]; k++)
            if (strlen(choices[k]) == a.n && memcmp(choices[k], a.p, a.n) == 0) {
                *out = k;
                return 0;
            }
    char want[160];
    int k = snprintf(want, sizeof want, "one of");
    for (int c = 0; choices[c] && k > 0 && (size_t)k < sizeof want; c++)
        k += snprintf(want + k, sizeof want - (size_t)k, "%s '%s'", c ? "," : "", choices[c]);
    return attr_wrong(n, d, i, key, want);
}

/* ---- element access -------------------------------------------------------------------------- */

/* Element i of an integer tensor (0 for other dtypes). */
static int64_t ldi(const unsigned char *p, int dt, size_t i)
{
    switch (dt) {
    case DT_I8: return p[i] < 128 ? (int64_t)p[i] : (int64_t)p[i] - 256;
    case DT_U8: case DT_BOOL: return p[i];
    case DT_I16: { int16_t v; memcpy(&v, p + 2 * i, 2); return v; }
    case DT_U16: { uint16_t v; memcpy(&v, p + 2 * i, 2); return v; }
    case DT_I32: { int32_t v; memcpy(&v, p + 4 * i, 4); return v; }
    case DT_U32: { unsigned v; memcpy(&v, p + 4 * i, 4); return v; }
    case DT_I64: { int64_t v; memcpy(&v, p + 8 * i, 8); return v; }
    default: return 0;
    }
}

/* Element i of any tensor as a double. */
static double ld(const unsigned char *p, int dt, size_t i)
{
    switch (dt) {
    case DT_F32: { float v; memcpy(&v, p + 4 * i, 4); return v; }
    case DT_F64: { double v; memcpy(&v, p + 8 * i, 8); return v; }
    default: return (double)ldi(p, dt, i);
    }
}

static double int_lo(int dt)
{
    switch (dt) {
    case DT_I8: return -128;
    case DT_I16: return -32768;
    case DT_I32: return -2147483648.0;
    default: return 0;
    }
}

static double int_hi(int dt)
{
    switch (dt) {
    case DT_I8: return 127;
    case DT_U8: return 255;
    case DT_I16: return 32767;
    case DT_U16: return 65535;
    case DT_I32: return 2147483647.0;
    default: return 0;
    }
}

/* an integral value clamped to the dtype's range (NaN as 0) */
static int64_t sat(double v, int dt)
{
    if (v != v)
        v = 0;
    if (v < int_lo(dt))
        v = int_lo(dt);
    if (v > int_hi(dt))
        v = int_hi(dt);
    return (int64_t)v;
}

/* an integer wrapped into the dtype (two's complement), as 32-bit accumulators and integer adds do */
static int64_t wrap(int64_t v, int dt)
{
    uint64_t u = (uint64_t)v;
    switch (dt) {
    case DT_I8: u &= 0xffu; return u >= 0x80u ? (int64_t)u - 0x100 : (int64_t)u;
    case DT_U8: return (int64_t)(u & 0xffu);
    case DT_I32: u &= 0xffffffffu; return u >= 0x80000000u ? (int64_t)u - 0x100000000LL : (int64_t)u;
    default: return v;
    }
}

static float to_f32(double v)
{
    if (v > FLT_MAX)
        return (float)INFINITY;
    if (v < -FLT_MAX)
        return -(float)INFINITY;
    return (float)v;
}

/* store v (already in range for integers) as element i of a computed value (f32, i8, u8, i32) */
static void st(unsigned char *p, int dt, size_t i, double v)
{
    switch (dt) {
    case DT_F32: { float f = to_f32(v); memcpy(p + 4 * i, &f, 4); break; }
    case DT_I8: { int8_t x = (int8_t)v; memcpy(p + i, &x, 1); break; }
    case DT_U8: p[i] = (unsigned char)v; break;
    case DT_I32: { int32_t x = (int32_t)v; memcpy(p + 4 * i, &x, 4); break; }
    default: break;
    }
}

/* round half to even (the current rounding mode is C's default, to nearest even) */
static double rne(double v)
{
    return nearbyint(v);
}

static int computable(int dt)
{
    return dt == DT_F32 || dt == DT_I8 || dt == DT_U8 || dt == DT_I32;
}

/* ---- linking and validating ------------------------------------------------------------------- */

#define T(k) (&n->types[n->nodes[k].type0])
#define ARG(d, k) le32(n->blob + (d)->args_off + 4 * (size_t)(k))
#define AT(d, k) T(ARG(d, k))

static void strides_of(const em_type *t, size_t *s)
{
    size_t acc = 1;
    for (int i = t->rank - 1; i >= 0; i--) {
        s[i] = acc;
        acc *= (size_t)t->dim[i];
    }
}

static int64_t conv_out(int64_t in, int64_t k, int64_t p0, int64_t p1, int64_t s, int64_t d)
{
    int64_t room = in + p0 + p1 - (d * (k - 1) + 1);
    return room < 0 ? -1 : room / s + 1;
}

static int64_t pool_out(int64_t in, int64_t k, int64_t p0, int64_t p1, int64_t s, int64_t d, int ceil_mode)
{
    int64_t room = in + p0 + p1 - (d * (k - 1) + 1);
    if (room < 0)
        return -1;
    int64_t o = (ceil_mode ? (room + s - 1) / s : room / s) + 1;
    if (ceil_mode && (o - 1) * s >= in + p0)
        o--;
    return o;
}

typedef struct em_window {
    int64_t k[2], s[2], pad[4], dil[2], groups;
    int ceil_mode, count_include_pad;
} em_window;

static int32_t window_attrs(em_net *n, const em_node *d, unsigned i, int pool, em_window *w)
{
    static const int64_t ones[2] = {1, 1}, zeros[4] = {0, 0, 0, 0};
    char opbuf[64];
    int cnt;
    int32_t rc;
    memset(w, 0, sizeof *w);
    w->k[0] = w->k[1] = 1;
    if ((pool && (rc = attr_ints(n, d, i, "pool_size", 2, 2, NULL, 0, w->k, &cnt))) ||
        (rc = attr_ints(n, d, i, "strides", 2, 2, ones, 2, w->s, &cnt)) ||
        (rc = attr_ints(n, d, i, "padding", 4, 4, zeros, 4, w->pad, &cnt)) ||
        (rc = attr_ints(n, d, i, "dilation", 2, 2, ones, 2, w->dil, &cnt)))
        return rc;
    if (pool) {
        w->groups = 1;
        if ((rc = attr_bool(n, d, i, "ceil_mode", 0, &w->ceil_mode)) ||
            (rc = attr_bool(n, d, i, "count_include_pad", 0, &w->count_include_pad)))
            return rc;
    } else if ((rc = attr_int(n, d, i, "groups", 0, 1, &w->groups))) {
        return rc;
    }
    for (int k = 0; k < 2; k++)
        if (w->k[k] < 1 || w->k[k] > EM_MAX_WINDOW || w->s[k] < 1 || w->s[k] > EM_MAX_WINDOW || w->dil[k] < 1 ||
            w->dil[k] > EM_MAX_WINDOW)
            return em_fail(n, ETHOSN_MODEL_E_CORRUPT, "node %u (%s): window, strides or dilation out of range", i,
                           OPNAME(d));
    for (int k = 0; k < 4; k++)
        if (w->pad[k] < 0 || w->pad[k] > EM_MAX_WINDOW)
            return em_fail(n, ETHOSN_MODEL_E_CORRUPT, "node %u (%s): padding out of range", i, OPNAME(d));
    if (w->groups < 1 || w->groups > EM_MAX_BYTES)
        return em_fail(n, ETHOSN_MODEL_E_CORRUPT, "node %u (%s): groups out of range", i, OPNAME(d));
    return 0;
}

/* the argument's numel is 1, or (per) when per > 0 */
static int scalar_or(const em_type *t, int64_t per)
{
    return t->numel == 1 || (per > 0 && t->rank == 1 && t->dim[0] == per);
}

/* numpy broadcast of a and b into out; 0 when they do not broadcast */
static int broadcast(const em_type *a, const em_type *b, em_type *out)
{
    int r = a->rank > b->rank ? a->rank : b->rank;
    memset(out, 0, sizeof *out);
    out->rank = r;
    out->dtype = a->dtype;
    for (int i = 0; i < r; i++) {
        int ia = i - (r - a->rank), ib = i - (r - b->rank);
        int64_t da = ia >= 0 ? a->dim[ia] : 1, db = ib >= 0 ? b->dim[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return 0;
        out->dim[i] = da == 1 ? db : da;
    }
    return 1;
}

static int32_t mismatch(em_net *n, unsigned i, const em_node *d, const em_type *want)
{
    char opbuf[64], a[160], b[160];
    type_str(want, a, sizeof a);
    type_str(T(i), b, sizeof b);
    return em_fail(n, ETHOSN_MODEL_E_CORRUPT, "node %u (%s): its type is %s but its arguments make %s", i,
                   OPNAME(d), b, a);
}

static int32_t unsupported(em_net *n, unsigned i, const em_node *d, const char *what)
{
    char opbuf[64];
    return em_fail(n, ETHOSN_MODEL_E_UNSUPPORTED, "node %u (%s): %s is not supported by tth's Ethos-N78 functional "
                   "model", i, OPNAME(d), what);
}

static int32_t bad(em_net *n, unsigned i, const em_node *d, const char *what)
{
    char opbuf[64];
    return em_fail(n, ETHOSN_MODEL_E_CORRUPT, "node %u (%s): %s", i, OPNAME(d), what);
}

/* The required attribute "axis" of a node over x, counted from the end when negative. */
static int32_t attr_axis(em_net *n, const em_node *d, unsigned i, const em_type *x, int64_t *axis)
{
    int32_t rc = attr_int(n, d, i, "axis", 1, 0, axis);
    if (rc)
        return rc;
    if (*axis < 0)
        *axis += x->rank;
    return *axis >= 0 && *axis < x->rank ? 0 : bad(n, i, d, "axis out of range");
}

static const char *const resize_methods[] = {"nearest", "linear", NULL};
static const char *const resize_ct[] = {"half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel", NULL};
static const char *const resize_nm[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil", NULL};
static const char *const pad_modes[] = {"constant", "reflect", "edge", NULL};

/* An inline constant must hold a value its dtype can: integral and in range for integers. */
static int32_t check_inline(em_net *n, unsigned c)
{
    const em_const *k = &n->consts[c];
    double v = k->value;
    int dt = k->type.dtype;
    if (is_float(dt)) {
        if (dt == DT_F32 && v == v && (v > FLT_MAX || v < -FLT_MAX) && !isinf(v))
            return em_fail(n, ETHOSN_MODEL_E_CORRUPT, "constant %u: %g does not fit float32", c, v);
        return 0;
    }
    if (dt == DT_F16 || dt == DT_U64)
        return em_fail(n, ETHOSN_MODEL_E_UNSUPPORTED, "constant %u is %s: not supported by tth's Ethos-N78 "
                       "functional model", c, dtype_name(dt));
    double lo = dt == DT_BOOL ? 0 : dt == DT_U32 ? 0 : dt == DT_I64 ? -9223372036854775808.0 : int_lo(dt);
    double hi = dt == DT_BOOL ? 1 : dt == DT_U32 ? 4294967295.0 : dt == DT_I64 ? 9223372036854774784.0 : int_hi(dt);
    if (!(v == floor(v)) || v < lo || v > hi)
        return em_fail(n, ETHOSN_MODEL_E_CORRUPT, "constant %u: %g is not a %s value", c, v, dtype_name(dt));
    return 0;
}

static int32_t link_call(em_net *n, unsigned i);

/* Link node i: its references and types; calls by their operator's rule. */
static int32_t link_node(em_net *n, unsigned i)
{
    em_node *d = &n->nodes[i];
    char a[160], b[160];
    switch (d->kind) {
    case K_PARAM:
        if (d->ref >= n->nparams)
            return em_fail(n, ETHOSN_MODEL_E_CORRUPT, "node %u names parameter %u of %u", i, d->ref, n->nparams);
        if (d->ntypes != 1 || !type_eq(T(i), &n->ptypes[d->ref]))
            return em_fail(n, ETHOSN_MODEL_E_CORRUPT, "node %u: its type differs from parameter %u's", i, d->ref);
        return 0;
    case K_CONST:
        if (d->ref >= n->nconsts)
            return em_fail(n, ETHOSN_MODEL_E_CORRUPT, "node %u names constant %u of %u", i, d->ref, n->nconsts);
        if (d->ntypes != 1 || !type_eq(T(i), &n->consts[d->ref].type))
            return em_fail(n, ETHOSN_MODEL_E_CORRUPT, "node %u: its type differs from constant %u's", i, d->ref);
        return n->consts[d->ref].is_inline ? check_inline(n, d->ref) : 0;
    case K_TUPLE:
        if (d->nargs != d->ntypes)
            return em_fail(n, ETHOSN_MODEL_E_CORRUPT, "node %u: a tuple of %u fields with %u types", i, d->nargs,
                           d->ntypes);
        for (unsigned k = 0; k < d->nargs; k++) {
            unsigned f = ARG(d, k);
            if (f >= i)
                return em_fail(n, ETHOSN_MODEL_E_CORRUPT, "node %u: field %u is node %u, not an earlier node", i, k,
                               f);
            if (n->nodes[f].ntypes != 1 || !type_eq(T(f), &n->types[d->type0 + k]))
                return em_fail(n, ETHOSN_MODEL_E_CORRUPT, "node %u: field %u's type differs from node %u's", i, k, f);
        }
        return 0;
    case K_GET:
        if (d->ref >= i)
            return em_fail(n, ETHOSN_MODEL_E_CORRUPT, "node %u takes a field of node %u, not an earlier node", i,
                           d->ref);
        if (d->index >= n->nodes[d->ref].ntypes)
            return em_fail(n, ETHOSN_MODEL_E_CORRUPT, "node %u takes field %u of node %u, which has %u", i, d->index,
                           d->ref, n->nodes[d->ref].ntypes);
        if (d->ntypes != 1 || !type_eq(T(i), &n->types[n->nodes[d->ref].type0 + d->index])) {
            type_str(T(i), a, sizeof a);
            type_str(&n->types[n->nodes[d->ref].type0 + d->index], b, sizeof b);
            return em_fail(n, ETHOSN_MODEL_E_CORRUPT, "node %u is %s but field %u of node %u is %s", i, a, d->index,
                           d->ref, b);
        }
        return 0;
    default:
        return link_call(n, i);
    }
}

static int32_t link_call(em_net *n, unsigned i)
{
    em_node *d = &n->nodes[i];
    char opbuf[64], msg[200];
    d->op = OP_NONE;
    for (size_t k = 0; k < sizeof em_ops / sizeof em_ops[0]; k++)
        if (str_eq(n, d->name_off, d->name_len, em_ops[k].name)) {
            d->op = em_ops[k].op;
            if ((int64_t)d->nargs < em_ops[k].min_args || (int64_t)d->nargs > em_ops[k].max_args)
                return em_fail(n, ETHOSN_MODEL_E_CORRUPT, "node %u (%s) has %u arguments", i, OPNAME(d), d->nargs);
        }
    if (d->op == OP_NONE) {
        char name[64];
        size_t k;
        for (k = 0; k < d->name_len && k < sizeof name - 1; k++) {
            unsigned char ch = n->blob[d->name_off + k];
            name[k] = ch >= 32 && ch < 127 ? (char)ch : '?';
        }
        name[k] = 0;
        return em_fail(n, ETHOSN_MODEL_E_UNSUPPORTED, "node %u: operator '%s' is not supported by tth's Ethos-N78 "
                       "functional model", i, name);
    }
    for (unsigned k = 0; k < d->nargs; k++) {
        unsigned a = ARG(d, k);
        if (a >= i)
            return em_fail(n, ETHOSN_MODEL_E_CORRUPT, "node %u (%s): argument %u is node %u, not an earlier node", i,
                           OPNAME(d), k, a);
        if (n->nodes[a].ntypes != 1)
            return em_fail(n, ETHOSN_MODEL_E_CORRUPT, "node %u (%s): argument %u is a tuple", i, OPNAME(d), k);
    }
    if (d->op != OP_SPLIT && d->ntypes != 1)
        return em_fail(n, ETHOSN_MODEL_E_CORRUPT, "node %u (%s) has %u result types", i, OPNAME(d), d->ntypes);
    const em_type *o = T(i), *x = AT(d, 0);
    for (unsigned f = 0; f < d->ntypes; f++)
        if (!computable(n->types[d->type0 + f].dtype)) {
            snprintf(msg, sizeof msg, "computing %s values", dtype_name(n->types[d->type0 + f].dtype));
            return unsupported(n, i, d, msg);
        }
    em_type want = *o;
    int32_t rc;
    em_window w;
    int64_t v, ax[EM_MAX_RANK];
    double r1, r2;
    int cnt, choice;
    switch (d->op) {
    case OP_CONV2D: {
        const em_type *wt = AT(d, 1), *xz = AT(d, 2), *wz = AT(d, 3);
        if ((rc = window_attrs(n, d, i, 0, &w)))
            return rc;
        if (x->rank != 4 || wt->rank != 4)
            return bad(n, i, d, "input and weights must be NCHW and OIHW");
        if (!is_int(x->dtype) || x->dtype == DT_I64 || !is_int(wt->dtype) || wt->dtype == DT_I64 ||
            !is_int(xz->dtype) || !is_int(wz->dtype))
            return bad(n, i, d, "input, weights and zero points must be integers");
        if (x->dim[1] != wt->dim[1] * w.groups || wt->dim[0] % w.groups != 0)
            return bad(n, i, d, "channels and groups disagree");
        if (!scalar_or(xz, 0) || !scalar_or(wz, wt->dim[0]))
            return bad(n, i, d, "zero points must be scalars (the weights' per output channel)");
        want.dtype = DT_I32;
        want.rank = 4;
        want.dim[0] = x->dim[0];
        want.dim[1] = wt->dim[0];
        want.dim[2] = conv_out(x->dim[2], wt->dim[2], w.pad[0], w.pad[2], w.s[0], w.dil[0]);
        want.dim[3] = conv_out(x->dim[3], wt->dim[3], w.pad[1], w.pad[3], w.s[1], w.dil[1]);
        break;
    }
    case OP_MATMUL: {
        const em_type *b = AT(d, 1), *az = AT(d, 2), *bz = AT(d, 3);
        if (x->rank != 2 || b->rank != 2) {
            if (x->rank >= 1 && b->rank >= 1 && x->rank <= 4 && b->rank <= 4)
                return unsupported(n, i, d, "a matmul whose operands are not both 2-D");
            return bad(n, i, d, "operands must be matrices");
        }
        if (!is_int(x->dtype) || !is_int(b->dtype) || !is_int(az->dtype) || !is_int(bz->dtype))
            return bad(n, i, d, "operands and zero points must be integers");
        if (x->dim[1] != b->dim[0])
            return bad(n, i, d, "inner dimensions differ");
        if (!scalar_or(az, x->dim[0]) || !scalar_or(bz, b->dim[1]))
            return bad(n, i, d, "zero points must be scalars, per row of a or per column of b");
        want.dtype = DT_I32;
        want.rank = 2;
        want.dim[0] = x->dim[0];
        want.dim[1] = b->dim[1];
        break;
    }
    case OP_REQUANTIZE: case OP_QUANTIZE: case OP_DEQUANTIZE: {
        int req = d->op == OP_REQUANTIZE;
        if ((rc = attr_int(n, d, i, "axis", 0, 1, &v)))
            return rc;
        if (v < 0)
            v += x->rank;
        int64_t per = v >= 0 && v < x->rank ? x->dim[v] : 0;
        if (d->op == OP_QUANTIZE ? !is_float(x->dtype) : !is_int(x->dtype))
            return bad(n, i, d, d->op == OP_QUANTIZE ? "its input must be float" : "its input must be an integer");
        if (!is_float(AT(d, 1)->dtype) || !is_int(AT(d, 2)->dtype) || !scalar_or(AT(d, 1), per) ||
            !scalar_or(AT(d, 2), per) || (AT(d, 1)->numel != 1 && AT(d, 2)->numel != 1 && AT(d, 1)->numel !=
                                           AT(d, 2)->numel))
            return bad(n, i, d, "scale and zero point must be a float and an integer, scalars or one per element of "
                                "the axis");
        if (req && (!is_float(AT(d, 3)->dtype) || !is_int(AT(d, 4)->dtype) || AT(d, 3)->numel != 1 ||
                    AT(d, 4)->numel != 1))
            return bad(n, i, d, "the output scale and zero point must be a float and an integer scalar");
        if (d->op == OP_DEQUANTIZE ? o->dtype != DT_F32 : !is_int(o->dtype))
            return bad(n, i, d, d->op == OP_DEQUANTIZE ? "its result must be float32" : "its result must be an "
                                                                                         "integer");
        em_attr at;
        if (d->op != OP_DEQUANTIZE && em_attr_find(n, d, "out_dtype", &at) &&
            (at.tag != A_STR || strlen(dtype_name(o->dtype)) != at.n || memcmp(at.p, dtype_name(o->dtype), at.n)))
            return bad(n, i, d, "out_dtype differs from its result's dtype");
        /* scalar scales held inline must be positive and finite */
        for (unsigned k = 1; k < d->nargs; k += 2) {
            const em_node *s = &n->nodes[ARG(d, k)];
            if (s->kind == K_CONST && n->consts[s->ref].is_inline &&
                !(n->consts[s->ref].value > 0 && n->consts[s->ref].value <= DBL_MAX))
                return bad(n, i, d, "a scale is not positive and finite");
        }
        want.dtype = o->dtype;
        want.rank = x->rank;
        memcpy(want.dim, x->dim, sizeof want.dim);
        break;
    }
    case OP_ADD: case OP_MULTIPLY:
        if (x->dtype != AT(d, 1)->dtype || !broadcast(x, AT(d, 1), &want))
            return bad(n, i, d, "operands of different dtypes or shapes that do not broadcast");
        break;
    case OP_CLIP:
        if ((rc = attr_real(n, d, i, "a_min", 1, 0, &r1)) || (rc = attr_real(n, d, i, "a_max", 1, 0, &r2)))
            return rc;
        if (r1 > r2)
            return bad(n, i, d, "a_min is greater than a_max");
        want = *x;
        break;
    case OP_LEAKY_RELU: case OP_SIGMOID: case OP_TANH:
        if (d->op == OP_LEAKY_RELU && (rc = attr_real(n, d, i, "alpha", 0, 0.01, &r1)))
            return rc;
        if (!is_float(x->dtype)) {
            snprintf(msg, sizeof msg, "%s on %s (it computes on dequantized data)", OPNAME(d), dtype_name(x->dtype));
            return unsupported(n, i, d, msg);
        }
        want = *x;
        break;
    case OP_RELU:
        want = *x;
        break;
    case OP_MAX_POOL: case OP_AVG_POOL:
        if ((rc = window_attrs(n, d, i, 1, &w)))
            return rc;
        if (x->rank != 4)
            return bad(n, i, d, "its input must be NCHW");
        if (d->op == OP_AVG_POOL && !is_float(x->dtype)) {
            snprintf(msg, sizeof msg, "an average pool of %s (it averages dequantized data)", dtype_name(x->dtype));
            return unsupported(n, i, d, msg);
        }
        want = *x;
        want.dim[2] = pool_out(x->dim[2], w.k[0], w.pad[0], w.pad[2], w.s[0], w.dil[0], w.ceil_mode);
        want.dim[3] = pool_out(x->dim[3], w.k[1], w.pad[1], w.pad[3], w.s[1], w.dil[1], w.ceil_mode);
        break;
    case OP_GLOBAL_AVG_POOL: case OP_MEAN: {
        int keep = 1, red[EM_MAX_RANK] = {0};
        cnt = 2;
        ax[0] = 2;
        ax[1] = 3;
        if (d->op == OP_MEAN) {
            static const int64_t none[1] = {0};
            if ((rc = attr_ints(n, d, i, "axis", -1, EM_MAX_RANK, none, 0, ax, &cnt)) ||
                (rc = attr_bool(n, d, i, "keepdims", 0, &keep)))
                return rc;
        } else if (x->rank != 4) {
            return bad(n, i, d, "its input must be NCHW");
        }
        if (!is_float(x->dtype)) {
            snprintf(msg, sizeof msg, "an average of %s (it averages dequantized data)", dtype_name(x->dtype));
            return unsupported(n, i, d, msg);
        }
        for (int k = 0; k < cnt; k++) {
            int64_t a = ax[k] < 0 ? ax[k] + x->rank : ax[k];
            if (a < 0 || a >= x->rank || red[a])
                return bad(n, i, d, "an axis out of range or listed twice");
            red[a] = 1;
        }
        want.dtype = x->dtype;
        want.rank = 0;
        for (int k = 0; k < x->rank; k++) {
            if (cnt && !red[k])
                want.dim[want.rank++] = x->dim[k];
            else if (keep)
                want.dim[want.rank++] = 1;
        }
        break;
    }
    case OP_CONCAT:
        if ((rc = attr_axis(n, d, i, x, &v)))
            return rc;
        want = *x;
        for (unsigned k = 1; k < d->nargs; k++) {
            const em_type *y = AT(d, k);
            if (y->dtype != x->dtype || y->rank != x->rank)
                return bad(n, i, d, "arguments of different dtypes or ranks");
            for (int q = 0; q < x->rank; q++)
                if (q != v && y->dim[q] != x->dim[q])
                    return bad(n, i, d, "arguments differ outside the axis");
            want.dim[v] += y->dim[v];
        }
        break;
    case OP_SPLIT: {
        em_attr at;
        if ((rc = attr_axis(n, d, i, x, &v)))
            return rc;
        if (!em_attr_find(n, d, "sizes", &at))
            return attr_missing(n, d, i, "sizes");
        if (at.tag != A_INTS || at.n != d->ntypes)
            return bad(n, i, d, "'sizes' must list one integer per result");
        int64_t total = 0;
        for (unsigned f = 0; f < at.n; f++) {
            int64_t s = i64_of(le64(at.p + 8 * (size_t)f));
            want = *x;
            want.dim[v] = s;
            if (s < 0 || s > x->dim[v] || !type_eq(&want, &n->types[d->type0 + f]))
                return bad(n, i, d, "a part's size or type is wrong");
            total += s;
        }
        if (total != x->dim[v])
            return bad(n, i, d, "the sizes do not add up to the axis");
        return 0;
    }
    case OP_PAD: {
        int64_t before[EM_MAX_RANK], after[EM_MAX_RANK];
        int nb, na;
        if ((rc = attr_ints(n, d, i, "pad_before", x->rank, EM_MAX_RANK, NULL, 0, before, &nb)) ||
            (rc = attr_ints(n, d, i, "pad_after", x->rank, EM_MAX_RANK, NULL, 0, after, &na)) ||
            (rc = attr_real(n, d, i, "pad_value", 0, 0, &r1)) ||
            (rc = attr_choice(n, d, i, "mode", 0, pad_modes, &choice)))
            return rc;
        if (choice != 0) {
            snprintf(msg, sizeof msg, "nn.pad in '%s' mode (the Ethos-N78 pads with a constant)", pad_modes[choice]);
            return unsupported(n, i, d, msg);
        }
        if (is_int(x->dtype) && (r1 != floor(r1) || r1 < int_lo(x->dtype) || r1 > int_hi(x->dtype)))
            return unsupported(n, i, d, "an integer pad whose value is not one of the type's");
        want = *x;
        for (int k = 0; k < x->rank; k++) {
            if (before[k] < 0 || after[k] < 0 || before[k] > EM_MAX_WINDOW || after[k] > EM_MAX_WINDOW)
                return bad(n, i, d, "padding out of range");
            want.dim[k] = x->dim[k] + before[k] + after[k];
        }
        break;
    }
    case OP_RESHAPE:
        if ((rc = attr_ints(n, d, i, "newshape", -1, EM_MAX_RANK, NULL, 0, ax, &cnt)))
            return rc;
        want.dtype = x->dtype;
        want.rank = cnt;
        for (int k = 0; k < cnt; k++)
            want.dim[k] = ax[k];
        if (o->numel != x->numel)
            return bad(n, i, d, "it changes the element count");
        break;
    case OP_TRANSPOSE: {
        int64_t rev[EM_MAX_RANK];
        int seen[EM_MAX_RANK] = {0};
        for (int k = 0; k < x->rank; k++)
            rev[k] = x->rank - 1 - k;
        if ((rc = attr_ints(n, d, i, "axes", x->rank, EM_MAX_RANK, rev, x->rank, ax, &cnt)))
            return rc;
        want = *x;
        for (int k = 0; k < cnt; k++) {
            int64_t a = ax[k] < 0 ? ax[k] + x->rank : ax[k];
            if (a < 0 || a >= x->rank || seen[a])
                return bad(n, i, d, "axes is not a permutation");
            seen[a] = 1;
            want.dim[k] = x->dim[a];
        }
        break;
    }
    case OP_RESIZE: {
        int64_t size[2];
        if ((rc = attr_ints(n, d, i, "size", 2, 2, NULL, 0, size, &cnt)) ||
            (rc = attr_choice(n, d, i, "method", 0, resize_methods, &choice)) ||
            (rc = attr_choice(n, d, i, "coordinate_transformation_mode", 0, resize_ct, &cnt)) ||
            (rc = attr_choice(n, d, i, "nearest_mode", 0, resize_nm, &cnt)))
            return rc;
        if (x->rank != 4 || x->dim[2] < 1 || x->dim[3] < 1)
            return bad(n, i, d, "its input must be NCHW and not empty");
        want = *x;
        want.dim[2] = size[0];
        want.dim[3] = size[1];
        break;
    }
    default:
        return bad(n, i, d, "an operator without a rule");
    }
    if (!type_eq(&want, o) || want.dim[0] < 0)
        return mismatch(n, i, d, &want);
    for (int k = 0; k < want.rank; k++)
        if (want.dim[k] < 0)
            return mismatch(n, i, d, &want);
    return 0;
}

/* ---- the operators ---------------------------------------------------------------------------- */

typedef struct em_val {
    const em_type *t;
    const unsigned char *p;
} em_val;

static em_val arg(const em_net *n, const em_node *d, unsigned k)
{
    unsigned a = ARG(d, k);
    em_val v = {T(a), n->vals[n->nodes[a].type0]};
    return v;
}

/* element c of a scalar or per-axis parameter */
static double par(em_val v, size_t c)
{
    return ld(v.p, v.t->dtype, v.t->numel == 1 ? 0 : c);
}

static int64_t pari(em_val v, size_t c)
{
    return ldi(v.p, v.t->dtype, v.t->numel == 1 ? 0 : c);
}

static void run_conv(em_net *n, const em_node *d, unsigned i, unsigned char *out)
{
    em_val x = arg(n, d, 0), w = arg(n, d, 1), xz = arg(n, d, 2), wz = arg(n, d, 3);
    em_window win;
    window_attrs(n, d, i, 0, &win);
    const em_type *o = T(i);
    int64_t N = x.t->dim[0], C = x.t->dim[1], H = x.t->dim[2], W = x.t->dim[3];
    int64_t O = w.t->dim[0], CG = w.t->dim[1], KH = w.t->dim[2], KW = w.t->dim[3];
    int64_t OH = o->dim[2], OW = o->dim[3], opg = O / win.groups;
    int64_t xzp = pari(xz, 0);
    size_t at = 0;
    for (int64_t b = 0; b < N; b++)
        for (int64_t oc = 0; oc < O; oc++) {
            int64_t g = oc / opg, wzp = pari(wz, (size_t)oc);
            for (int64_t oy = 0; oy < OH; oy++)
                for (int64_t ox = 0; ox < OW; ox++) {
                    int64_t acc = 0;
                    for (int64_t ic = 0; ic < CG; ic++) {
                        int64_t c = g * CG + ic;
                        for (int64_t ky = 0; ky < KH; ky++) {
                            int64_t iy = oy * win.s[0] - win.pad[0] + ky * win.dil[0];
                            if (iy < 0 || iy >= H)
                                continue;
                            for (int64_t kx = 0; kx < KW; kx++) {
                                int64_t ix = ox * win.s[1] - win.pad[1] + kx * win.dil[1];
                                if (ix < 0 || ix >= W)
                                    continue;
                                int64_t xv = ldi(x.p, x.t->dtype, (size_t)(((b * C + c) * H + iy) * W + ix));
                                int64_t wv = ldi(w.p, w.t->dtype, (size_t)(((oc * CG + ic) * KH + ky) * KW + kx));
                                acc += (xv - xzp) * (wv - wzp);
                            }
                        }
                    }
                    st(out, DT_I32, at++, (double)wrap(acc, DT_I32));
                }
        }
}

static void run_matmul(em_net *n, const em_node *d, unsigned i, unsigned char *out)
{
    em_val a = arg(n, d, 0), b = arg(n, d, 1), az = arg(n, d, 2), bz = arg(n, d, 3);
    int64_t M = a.t->dim[0], K = a.t->dim[1], N = b.t->dim[1];
    (void)i;
    for (int64_t r = 0; r < M; r++)
        for (int64_t c = 0; c < N; c++) {
            int64_t acc = 0, azp = pari(az, (size_t)r), bzp = pari(bz, (size_t)c);
            for (int64_t k = 0; k < K; k++)
                acc += (ldi(a.p, a.t->dtype, (size_t)(r * K + k)) - azp) *
                       (ldi(b.p, b.t->dtype, (size_t)(k * N + c)) - bzp);
            st(out, DT_I32, (size_t)(r * N + c), (double)wrap(acc, DT_I32));
        }
}

/* quantize, dequantize, requantize: element by element, the parameters per axis */
static void run_quant(em_net *n, const em_node *d, unsigned i, unsigned char *out)
{
    em_val x = arg(n, d, 0), s = arg(n, d, 1), z = arg(n, d, 2);
    const em_type *o = T(i);
    int64_t axis = 1;
    attr_int(n, d, i, "axis", 0, 1, &axis);
    if (axis < 0)
        axis += x.t->rank;
    size_t st_[EM_MAX_RANK], inner = 1, extent = 1;
    if (axis >= 0 && axis < x.t->rank) {
        strides_of(x.t, st_);
        inner = st_[axis];
        extent = (size_t)x.t->dim[axis];
    }
    double os = 1, oz = 0;
    if (d->op == OP_REQUANTIZE) {
        os = par(arg(n, d, 3), 0);
        oz = par(arg(n, d, 4), 0);
    }
    for (size_t e = 0; e < x.t->numel; e++) {
        size_t c = extent ? e / inner % extent : 0;
        double sc = par(s, c), zp = par(z, c), v;
        switch (d->op) {
        case OP_QUANTIZE:
            v = rne(ld(x.p, x.t->dtype, e) / sc) + zp;
            st(out, o->dtype, e, (double)sat(v, o->dtype));
            break;
        case OP_DEQUANTIZE:
            st(out, DT_F32, e, (ld(x.p, x.t->dtype, e) - zp) * sc);
            break;
        default:
            v = rne((ld(x.p, x.t->dtype, e) - zp) * (sc / os)) + oz;
            st(out, o->dtype, e, (double)sat(v, o->dtype));
            break;
        }
    }
}

/* index of element e of `out` in an operand broadcast to it */
static size_t bcast_index(const em_type *out, const em_type *in, size_t e)
{
    size_t idx = 0, mul = 1;
    for (int k = out->rank - 1, j = in->rank - 1; k >= 0; k--, j--) {
        size_t c = e % (size_t)out->dim[k];
        e /= (size_t)out->dim[k];
        if (j >= 0) {
            if (in->dim[j] != 1)
                idx += c * mul;
            mul *= (size_t)in->dim[j];
        }
    }
    return idx;
}

static void run_binary(em_net *n, const em_node *d, unsigned i, unsigned char *out)
{
    em_val a = arg(n, d, 0), b = arg(n, d, 1);
    const em_type *o = T(i);
    for (size_t e = 0; e < o->numel; e++) {
        size_t ia = bcast_index(o, a.t, e), ib = bcast_index(o, b.t, e);
        if (is_float(o->dtype)) {
            double x = ld(a.p, a.t->dtype, ia), y = ld(b.p, b.t->dtype, ib);
            st(out, o->dtype, e, d->op == OP_ADD ? x + y : x * y);
        } else {
            int64_t x = ldi(a.p, a.t->dtype, ia), y = ldi(b.p, b.t->dtype, ib);
            st(out, o->dtype, e, (double)wrap(d->op == OP_ADD ? x + y : x * y, o->dtype));
        }
    }
}

static void run_unary(em_net *n, const em_node *d, unsigned i, unsigned char *out)
{
    em_val x = arg(n, d, 0);
    const em_type *o = T(i);
    double lo = 0, hi = 0, alpha = 0.01;
    if (d->op == OP_CLIP) {
        attr_real(n, d, i, "a_min", 1, 0, &lo);
        attr_real(n, d, i, "a_max", 1, 0, &hi);
        if (!is_float(o->dtype)) { /* integer bounds: ceil(a_min), floor(a_max), in the type's range */
            lo = ceil(lo) < int_lo(o->dtype) ? int_lo(o->dtype) : ceil(lo) > int_hi(o->dtype) ? int_hi(o->dtype)
                                                                                                : ceil(lo);
            hi = floor(hi) > int_hi(o->dtype) ? int_hi(o->dtype) : floor(hi) < int_lo(o->dtype) ? int_lo(o->dtype)
                                                                                                 : floor(hi);
        }
    }
    if (d->op == OP_LEAKY_RELU)
        attr_real(n, d, i, "alpha", 0, 0.01, &alpha);
    for (size_t e = 0; e < o->numel; e++) {
        double v = ld(x.p, x.t->dtype, e);
        switch (d->op) {
        case OP_CLIP: v = v < lo ? lo : v; v = v > hi ? hi : v; break;
        case OP_RELU: v = v < 0 ? 0 : v; break;
        case OP_LEAKY_RELU: v = v < 0 ? v * alpha : v; break;
        case OP_SIGMOID: v = 1.0 / (1.0 + exp(-v)); break;
        case OP_TANH: v = tanh(v); break;
        default: break;
        }
        st(out, o->dtype, e, v);
    }
}

static void run_pool(em_net *n, const em_node *d, unsigned i, unsigned char *out)
{
    em_val x = arg(n, d, 0);
    const em_type *o = T(i);
    em_window w;
    window_attrs(n, d, i, 1, &w);
    int64_t N = x.t->dim[0], C = x.t->dim[1], H = x.t->dim[2], W = x.t->dim[3], OH = o->dim[2], OW = o->dim[3];
    int mx = d->op == OP_MAX_POOL, fl = is_float(x.t->dtype);
    size_t at = 0;
    for (int64_t p = 0; p < N * C; p++)
        for (int64_t oy = 0; oy < OH; oy++)
            for (int64_t ox = 0; ox < OW; ox++) {
                double acc = mx ? (fl ? -INFINITY : int_lo(x.t->dtype)) : 0;
                int64_t inside = 0, padded = 0;
                for (int64_t ky = 0; ky < w.k[0]; ky++) {
                    int64_t iy = oy * w.s[0] - w.pad[0] + ky * w.dil[0];
                    for (int64_t kx = 0; kx < w.k[1]; kx++) {
                        int64_t ix = ox * w.s[1] - w.pad[1] + kx * w.dil[1];
                        if (iy < H + w.pad[2] && ix < W + w.pad[3])
                            padded++; /* inside the padded image (not a ceil_mode overhang) */
                        if (iy < 0 || iy >= H || ix < 0 || ix >= W)
                            continue;
                        double v = ld(x.p, x.t->dtype, (size_t)((p * H + iy) * W + ix));
                        inside++;
                        if (mx)
                            acc = v > acc ? v : acc;
                        else
                            acc += v;
                    }
                }
                if (!mx)
                    acc = (w.count_include_pad ? padded : inside) ? acc / (double)(w.count_include_pad ? padded
                                                                                                        : inside)
                                                                  : 0;
                st(out, o->dtype, at++, acc);
            }
}

/* mean over axes (global average pool: axes 2 and 3), summed in float64 */
static void run_mean(em_net *n, const em_node *d, unsigned i, unsigned char *out)
{
    em_val x = arg(n, d, 0);
    const em_type *o = T(i);
    int64_t ax[EM_MAX_RANK] = {2, 3};
    int cnt = 2, red[EM_MAX_RANK] = {0}, kept[EM_MAX_RANK], reduced[EM_MAX_RANK], nk = 0, nr = 0;
    if (d->op == OP_MEAN) {
        static const int64_t none[1] = {0};
        attr_ints(n, d, i, "axis", -1, EM_MAX_RANK, none, 0, ax, &cnt);
    }
    for (int k = 0; k < cnt; k++)
        red[ax[k] < 0 ? ax[k] + x.t->rank : ax[k]] = 1;
    size_t xst[EM_MAX_RANK], count = 1;
    strides_of(x.t, xst);
    for (int k = 0; k < x.t->rank; k++) {
        if (!cnt || red[k]) {
            reduced[nr++] = k;
            count *= (size_t)x.t->dim[k];
        } else {
            kept[nk++] = k;
        }
    }
    for (size_t oe = 0; oe < o->numel; oe++) {
        size_t rest = oe, base = 0;
        for (int j = nk - 1; j >= 0; j--) {
            base += rest % (size_t)x.t->dim[kept[j]] * xst[kept[j]];
            rest /= (size_t)x.t->dim[kept[j]];
        }
        double sum = 0;
        for (size_t r = 0; r < count; r++) {
            size_t off = base;
            rest = r;
            for (int j = nr - 1; j >= 0; j--) {
                off += rest % (size_t)x.t->dim[reduced[j]] * xst[reduced[j]];
                rest /= (size_t)x.t->dim[reduced[j]];
            }
            sum += ld(x.p, x.t->dtype, off);
        }
        st(out, DT_F32, oe, count ? sum / (double)count : 0);
    }
}

static void run_concat(em_net *n, const em_node *d, unsigned i, unsigned char *out)
{
    const em_type *o = T(i);
    int64_t axis = 0;
    attr_int(n, d, i, "axis", 1, 0, &axis);
    if (axis < 0)
        axis += o->rank;
    size_t es = dtype_size(o->dtype), outer = 1, inner = es;
    for (int k = 0; k < axis; k++)
        outer *= (size_t)o->dim[k];
    for (int k = (int)axis + 1; k < o->rank; k++)
        inner *= (size_t)o->dim[k];
    size_t row = (size_t)o->dim[axis] * inner, at = 0;
    for (unsigned a = 0; a < d->nargs; a++) {
        em_val x = arg(n, d, a);
        size_t part = (size_t)x.t->dim[axis] * inner;
        for (size_t r = 0; r < outer; r++)
            memcpy(out + r * row + at, x.p + r * part, part);
        at += part;
    }
}

static void run_split(em_net *n, const em_node *d, unsigned i)
{
    em_val x = arg(n, d, 0);
    int64_t axis = 0;
    attr_int(n, d, i, "axis", 1, 0, &axis);
    if (axis < 0)
        axis += x.t->rank;
    size_t es = dtype_size(x.t->dtype), outer = 1, inner = es;
    for (int k = 0; k < axis; k++)
        outer *= (size_t)x.t->dim[k];
    for (int k = (int)axis + 1; k < x.t->rank; k++)
        inner *= (size_t)x.t->dim[k];
    size_t row = (size_t)x.t->dim[axis] * inner, at = 0;
    for (unsigned f = 0; f < d->ntypes; f++) {
        const em_type *t = &n->types[d->type0 + f];
        unsigned char *o = n->vals[d->type0 + f];
        size_t part = (size_t)t->dim[axis] * inner;
        for (size_t r = 0; r < outer; r++)
            memcpy(o + r * part, x.p + r * row + at, part);
        at += part;
    }
}

static void run_pad(em_net *n, const em_node *d, unsigned i, unsigned char *out)
{
    em_val x = arg(n, d, 0);
    const em_type *o = T(i);
    int64_t before[EM_MAX_RANK];
    int cnt;
    double value = 0;
    attr_ints(n, d, i, "pad_before", x.t->rank, EM_MAX_RANK, NULL, 0, before, &cnt);
    attr_real(n, d, i, "pad_value", 0, 0, &value);
    for (size_t e = 0; e < o->numel; e++)
        st(out, o->dtype, e, value);
    size_t ost[EM_MAX_RANK], es = dtype_size(o->dtype);
    strides_of(o, ost);
    for (size_t e = 0; e < x.t->numel; e++) {
        size_t rest = e, oi = 0;
        for (int k = x.t->rank - 1; k >= 0; k--) {
            oi += (rest % (size_t)x.t->dim[k] + (size_t)before[k]) * ost[k];
            rest /= (size_t)x.t->dim[k];
        }
        memcpy(out + oi * es, x.p + e * es, es);
    }
}

static void run_transpose(em_net *n, const em_node *d, unsigned i, unsigned char *out)
{
    em_val x = arg(n, d, 0);
    const em_type *o = T(i);
    int64_t ax[EM_MAX_RANK], rev[EM_MAX_RANK];
    int cnt;
    for (int k = 0; k < x.t->rank; k++)
        rev[k] = x.t->rank - 1 - k;
    attr_ints(n, d, i, "axes", x.t->rank, EM_MAX_RANK, rev, x.t->rank, ax, &cnt);
    size_t xst[EM_MAX_RANK], es = dtype_size(o->dtype);
    strides_of(x.t, xst);
    for (size_t e = 0; e < o->numel; e++) {
        size_t rest = e, xi = 0;
        for (int k = o->rank - 1; k >= 0; k--) {
            int64_t a = ax[k] < 0 ? ax[k] + x.t->rank : ax[k];
            xi += rest % (size_t)o->dim[k] * xst[a];
            rest /= (size_t)o->dim[k];
        }
        memcpy(out + e * es, x.p + xi * es, es);
    }
}

/* the source coordinate of output position x along one axis (docs/ethosn.md: resize) */
static double resize_coord(int ct, double x, int64_t in, int64_t out)
{
    double scale = (double)out / (double)in;
    switch (ct) {
    case 1: return x / scale;
    case 2: return out == 1 ? 0.0 : x * (double)(in - 1) / (double)(out - 1);
    case 3: return out == 1 ? -0.5 : (x + 0.5) / scale - 0.5;
    default: return (x + 0.5) / scale - 0.5;
    }
}

static int64_t clampi(int64_t v, int64_t n)
{
    return v < 0 ? 0 : v >= n ? n - 1 : v;
}

static int64_t resize_nearest(int nm, double x)
{
    double f = floor(x), r = x - f;
    if (x == f)
        return (int64_t)f;
    switch (nm) {
    case 1: return (int64_t)(r < 0.5 ? f : f + 1);
    case 2: return (int64_t)f;
    case 3: return (int64_t)f + 1;
    default: return (int64_t)(r <= 0.5 ? f : f + 1);
    }
}

static void run_resize(em_net *n, const em_node *d, unsigned i, unsigned char *out)
{
    em_val x = arg(n, d, 0);
    const em_type *o = T(i);
    int method = 0, ct = 0, nm = 0;
    attr_choice(n, d, i, "method", 0, resize_methods, &method);
    attr_choice(n, d, i, "coordinate_transformation_mode", 0, resize_ct, &ct);
    attr_choice(n, d, i, "nearest_mode", 0, resize_nm, &nm);
    int64_t H = x.t->dim[2], W = x.t->dim[3], OH = o->dim[2], OW = o->dim[3];
    size_t at = 0;
    for (int64_t p = 0; p < x.t->dim[0] * x.t->dim[1]; p++)
        for (int64_t oy = 0; oy < OH; oy++) {
            double cy = resize_coord(ct, (double)oy, H, OH);
            for (int64_t ox = 0; ox < OW; ox++) {
                double cx = resize_coord(ct, (double)ox, W, OW), v;
                const unsigned char *base = x.p;
                size_t plane = (size_t)(p * H * W);
                if (method == 0) {
                    int64_t y = clampi(resize_nearest(nm, cy), H), xx = clampi(resize_nearest(nm, cx), W);
                    v = ld(base, x.t->dtype, plane + (size_t)(y * W + xx));
                } else {
                    double fy = floor(cy), fx = floor(cx), ry = cy - fy, rx = cx - fx;
                    int64_t y0 = clampi((int64_t)fy, H), y1 = clampi((int64_t)fy + 1, H);
                    int64_t x0 = clampi((int64_t)fx, W), x1 = clampi((int64_t)fx + 1, W);
                    double top = ld(base, x.t->dtype, plane + (size_t)(y0 * W + x0)) * (1 - rx) +
                                 ld(base, x.t->dtype, plane + (size_t)(y0 * W + x1)) * rx;
                    double bot = ld(base, x.t->dtype, plane + (size_t)(y1 * W + x0)) * (1 - rx) +
                                 ld(base, x.t->dtype, plane + (size_t)(y1 * W + x1)) * rx;
                    v = top * (1 - ry) + bot * ry;
                    if (!is_float(o->dtype))
                        v = (double)sat(rne(v), o->dtype);
                }
                st(out, o->dtype, at++, v);
            }
        }
}

static void run_node(em_net *n, unsigned i)
{
    const em_node *d = &n->nodes[i];
    unsigned char *out = n->vals[d->type0];
    switch (d->op) {
    case OP_CONV2D: run_conv(n, d, i, out); break;
    case OP_MATMUL: run_matmul(n, d, i, out); break;
    case OP_REQUANTIZE: case OP_QUANTIZE: case OP_DEQUANTIZE: run_quant(n, d, i, out); break;
    case OP_ADD: case OP_MULTIPLY: run_binary(n, d, i, out); break;
    case OP_CLIP: case OP_RELU: case OP_LEAKY_RELU: case OP_SIGMOID: case OP_TANH: run_unary(n, d, i, out); break;
    case OP_MAX_POOL: case OP_AVG_POOL: run_pool(n, d, i, out); break;
    case OP_GLOBAL_AVG_POOL: case OP_MEAN: run_mean(n, d, i, out); break;
    case OP_CONCAT: run_concat(n, d, i, out); break;
    case OP_SPLIT: run_split(n, d, i); break;
    case OP_PAD: run_pad(n, d, i, out); break;
    case OP_RESHAPE: memcpy(out, arg(n, d, 0).p, T(i)->nbytes); break;
    case OP_TRANSPOSE: run_transpose(n, d, i, out); break;
    case OP_RESIZE: run_resize(n, d, i, out); break;
    default: break;
    }
}

/* ---- the entry points ------------------------------------------------------------------------ */

/* Parse, lay out and link: into the caller's scratch (tables, then values), or into malloc'd
 * blocks (owned[0] the tables, owned[1] the values; free both). The values' block is allocated only
 * once every node has been validated, so a damaged network never asks for memory it describes. */
static int32_t em_open(em_net *n, const void *network, size_t len, int with_values, void *scratch,
                       size_t scratch_bytes, void **owned, char *why, size_t why_len)
{
    memset(n, 0, sizeof *n);
    owned[0] = owned[1] = NULL;
    n->blob = network;
    n->len = len;
    n->why = why;
    n->why_len = why_len;
    if (why && why_len)
        why[0] = 0;
    if (!network)
        return em_fail(n, ETHOSN_MODEL_E_ARGUMENT, "no network given");
    int32_t rc = em_walk(n, 0);
    if (rc)
        return rc;
    size_t tables = em_layout(n, 0, NULL, NULL), need = em_layout(n, with_values, NULL, NULL);
    unsigned char *base = scratch;
    if (scratch) {
        if (scratch_bytes < need)
            return em_fail(n, ETHOSN_MODEL_E_NOMEM, "the scratch buffer has %lu bytes; the network needs %lu",
                           (unsigned long)scratch_bytes, (unsigned long)need);
        if ((uintptr_t)scratch % EM_ALIGN)
            return em_fail(n, ETHOSN_MODEL_E_ARGUMENT, "the scratch buffer is not aligned to %u bytes", EM_ALIGN);
        em_layout(n, with_values, base, n);
    } else {
        base = malloc(tables ? tables : 1);
        if (!base)
            return em_fail(n, ETHOSN_MODEL_E_NOMEM, "out of memory (%lu bytes)", (unsigned long)tables);
        owned[0] = base;
        em_layout(n, 0, base, n);
    }
    if ((rc = em_walk(n, 1)))
        return rc;
    for (unsigned i = 0; i < n->nnodes; i++)
        if ((rc = link_node(n, i)))
            return rc;
    if (with_values && !scratch) {
        n->value_mem = malloc(n->value_bytes ? n->value_bytes : 1);
        if (!n->value_mem)
            return em_fail(n, ETHOSN_MODEL_E_NOMEM, "out of memory (%lu bytes)", (unsigned long)n->value_bytes);
        owned[1] = n->value_mem;
    }
    return 0;
}

int32_t ethosn_model_check(const void *network, size_t len, ethosn_model_info *info, char *why, size_t why_len)
{
    em_net n;
    void *owned[2];
    int32_t rc = em_open(&n, network, len, 0, NULL, 0, owned, why, why_len);
    if (!rc && info) {
        memset(info, 0, sizeof *info);
        info->format_version = ETHOSN_MODEL_FORMAT_VERSION;
        info->tops = n.tops;
        info->ple_ratio = n.ple_ratio;
        info->sram_kib = n.sram_kib;
        info->ninputs = n.nparams;
        info->noutputs = n.nodes[n.result].ntypes;
        info->nconstants = n.nconsts;
        info->nnodes = n.nnodes;
        info->scratch_bytes = em_layout(&n, 1, NULL, NULL);
    }
    free(owned[0]);
    free(owned[1]);
    return rc;
}

static int32_t em_bind_consts(em_net *n, const void *const *data, const size_t *bytes, size_t count)
{
    if (count != n->nconsts)
        return em_fail(n, ETHOSN_MODEL_E_CONSTANT, "%lu constants given; the network has %u", (unsigned long)count,
                       n->nconsts);
    for (unsigned c = 0; c < n->nconsts; c++) {
        const em_const *k = &n->consts[c];
        if (k->is_inline)
            continue;
        if (!data || !bytes || !data[c] || bytes[c] != k->type.nbytes)
            return em_fail(n, ETHOSN_MODEL_E_CONSTANT, "constant %u (%.*s) is %s: it needs %lu bytes, %lu given", c,
                           (int)k->name_len, (const char *)n->blob + k->name_off,
                           !data || !bytes || !data[c] ? "missing" : "of the wrong size",
                           (unsigned long)k->type.nbytes, (unsigned long)(bytes && data && data[c] ? bytes[c] : 0));
    }
    return 0;
}

int32_t ethosn_model_check_constants(const void *network, size_t len, const void *const *data, const size_t *bytes,
                                     size_t count, char *why, size_t why_len)
{
    em_net n;
    void *owned[2];
    int32_t rc = em_open(&n, network, len, 0, NULL, 0, owned, why, why_len);
    if (!rc)
        rc = em_bind_consts(&n, data, bytes, count);
    free(owned[0]);
    free(owned[1]);
    return rc;
}

/* the inline value of constant c, as its dtype, at p */
static void put_inline(const em_const *k, unsigned char *p)
{
    double v = k->value;
    switch (k->type.dtype) {
    case DT_F32: { float f = to_f32(v); memcpy(p, &f, 4); break; }
    case DT_F64: memcpy(p, &v, 8); break;
    case DT_I8: { int8_t x = (int8_t)v; memcpy(p, &x, 1); break; }
    case DT_U8: case DT_BOOL: p[0] = (unsigned char)v; break;
    case DT_I16: { int16_t x = (int16_t)v; memcpy(p, &x, 2); break; }
    case DT_U16: { uint16_t x = (uint16_t)v; memcpy(p, &x, 2); break; }
    case DT_I32: { int32_t x = (int32_t)v; memcpy(p, &x, 4); break; }
    case DT_U32: { unsigned x = (unsigned)v; memcpy(p, &x, 4); break; }
    case DT_I64: { int64_t x = (int64_t)v; memcpy(p, &x, 8); break; }
    default: break;
    }
}

int32_t ethosn_model_run(const void *network, size_t len, const ethosn_model_io *io, char *why, size_t why_len)
{
    em_net n;
    void *owned[2] = {NULL, NULL};
    int32_t rc;
    if (!io) {
        if (why && why_len)
            snprintf(why, why_len, "no buffers given");
        return ETHOSN_MODEL_E_ARGUMENT;
    }
    rc = em_open(&n, network, len, 1, io->scratch, io->scratch_bytes, owned, why, why_len);
    if (rc)
        goto done;
    if ((rc = em_bind_consts(&n, io->constants, io->constant_bytes, io->nconstants)))
        goto done;
    const em_node *res = &n.nodes[n.result];
    if (io->ninputs != n.nparams || io->noutputs != res->ntypes) {
        rc = em_fail(&n, ETHOSN_MODEL_E_ARGUMENT, "%lu inputs and %lu outputs given; the network takes %u and makes "
                     "%u", (unsigned long)io->ninputs, (unsigned long)io->noutputs, n.nparams, res->ntypes);
        goto done;
    }
    for (unsigned k = 0; k < n.nparams; k++)
        if (!io->inputs || !io->input_bytes || !io->inputs[k] || io->input_bytes[k] != n.ptypes[k].nbytes) {
            rc = em_fail(&n, ETHOSN_MODEL_E_ARGUMENT, "input %u: %lu bytes expected", k,
                         (unsigned long)n.ptypes[k].nbytes);
            goto done;
        }
    for (unsigned k = 0; k < res->ntypes; k++)
        if (!io->outputs || !io->output_bytes || !io->outputs[k] ||
            io->output_bytes[k] != n.types[res->type0 + k].nbytes) {
            rc = em_fail(&n, ETHOSN_MODEL_E_ARGUMENT, "output %u: %lu bytes expected", k,
                         (unsigned long)n.types[res->type0 + k].nbytes);
            goto done;
        }
    /* every value's bytes */
    size_t at = 0;
    for (unsigned i = 0; i < n.nnodes; i++) {
        const em_node *d = &n.nodes[i];
        switch (d->kind) {
        case K_PARAM: n.vals[d->type0] = (unsigned char *)(uintptr_t)io->inputs[d->ref]; break;
        case K_CONST:
            if (n.consts[d->ref].is_inline) {
                n.vals[d->type0] = n.inline_mem + 8 * (size_t)d->ref;
                put_inline(&n.consts[d->ref], n.vals[d->type0]);
            } else {
                n.vals[d->type0] = (unsigned char *)(uintptr_t)io->constants[d->ref];
            }
            break;
        case K_CALL:
            for (unsigned f = 0; f < d->ntypes; f++) {
                n.vals[d->type0 + f] = n.value_mem + at;
                at += round_up(n.types[d->type0 + f].nbytes);
            }
            break;
        case K_TUPLE:
            for (unsigned f = 0; f < d->nargs; f++)
                n.vals[d->type0 + f] = n.vals[n.nodes[le32(n.blob + d->args_off + 4 * (size_t)f)].type0];
            break;
        default: n.vals[d->type0] = n.vals[n.nodes[d->ref].type0 + d->index]; break;
        }
    }
    for (unsigned i = 0; i < n.nnodes; i++)
        if (n.nodes[i].kind == K_CALL)
            run_node(&n, i);
    for (unsigned k = 0; k < res->ntypes; k++)
        memcpy(io->outputs[k], n.vals[res->type0 + k], n.types[res->type0 + k].nbytes);
done:
    free(owned[0]);
    free(owned[1]);
    return rc;
}

/* ---- the parameters file --------------------------------------------------------------------- */

/* Whether a parameters file's entry has constant k's dtype, shape and byte length. */
static int em_entry_fits(const tth_params_entry *e, const em_const *k)
{
    if (e->dtype != (uint32_t)k->type.dtype || e->rank != (uint32_t)k->type.rank || e->bytes != k->type.nbytes)
        return 0;
    for (uint32_t q = 0; q < e->rank; q++)
        if (tth_params_dim(e, q) != k->type.dim[q])
            return 0;
    return 1;
}

/* Constant k's bytes in the parameters file, under prefix + its name (tth_params.h reads the
 * file; the messages say what is wrong with it). */
static int32_t em_find_constant(em_net *n, const em_const *k, const void *params, size_t params_len,
                                const char *prefix, const void **data, size_t *bytes)
{
    const char *name = (const char *)n->blob + k->name_off;
    tth_params_reader r;
    tth_params_entry e;
    int st = tth_params_open(&r, params, params ? params_len : 0);
    if (st == TTH_PARAMS_E_MAGIC)
        return em_fail(n, ETHOSN_MODEL_E_PARAMETERS, "not a tth parameters file (no TTHPARAM magic)");
    if (st == TTH_PARAMS_E_VERSION)
        return em_fail(n, ETHOSN_MODEL_E_PARAMETERS, "parameters file version %u (this model reads 1)",
                       (unsigned)r.version);
    /* an error of the header stays with the reader: its first next returns it */
    while ((st = tth_params_next(&r, &e)) > 0 && !tth_params_name_is(&e, prefix, name, k->name_len))
        ;
    if (st < 0)
        return em_fail(n, ETHOSN_MODEL_E_PARAMETERS, "the parameters file is truncated or malformed (entry %u)",
                       (unsigned)r.index);
    if (st == 0)
        return em_fail(n, ETHOSN_MODEL_E_PARAMETERS, "the parameters file has no '%s%.*s'", prefix ? prefix : "",
                       (int)k->name_len, name);
    if (!em_entry_fits(&e, k)) {
        char ts[160];
        type_str(&k->type, ts, sizeof ts);
        return em_fail(n, ETHOSN_MODEL_E_PARAMETERS, "parameter '%s%.*s' is not %s", prefix ? prefix : "",
                       (int)k->name_len, name, ts);
    }
    *data = e.data;
    *bytes = e.bytes;
    return 0;
}

int32_t ethosn_model_find_constants(const void *network, size_t len, const void *params, size_t params_len,
                                    const char *prefix, const void **data, size_t *bytes, size_t count, char *why,
                                    size_t why_len)
{
    em_net n;
    void *owned[2];
    int32_t rc = em_open(&n, network, len, 0, NULL, 0, owned, why, why_len);
    if (rc)
        goto done;
    if (!data || !bytes || count != n.nconsts) {
        rc = em_fail(&n, ETHOSN_MODEL_E_ARGUMENT, "room for %lu constants given; the network has %u",
                     (unsigned long)count, n.nconsts);
        goto done;
    }
    for (unsigned c = 0; c < n.nconsts && !rc; c++) {
        data[c] = NULL;
        bytes[c] = 0;
        if (!n.consts[c].is_inline)
            rc = em_find_constant(&n, &n.consts[c], params, params_len, prefix, &data[c], &bytes[c]);
    }
done:
    free(owned[0]);
    free(owned[1]);
    return rc;
}

const char *ethosn_model_status_text(int32_t status)
{
    switch (status) {
    case ETHOSN_MODEL_OK: return "ok";
    case ETHOSN_MODEL_E_MAGIC: return "Ethos-N functional model: not a tth-ethosn-network blob";
    case ETHOSN_MODEL_E_VERSION: return "Ethos-N functional model: the network's format version is not the one it reads";
    case ETHOSN_MODEL_E_TRUNCATED: return "Ethos-N functional model: the network blob is truncated";
    case ETHOSN_MODEL_E_CORRUPT: return "Ethos-N functional model: the network blob is corrupt";
    case ETHOSN_MODEL_E_UNSUPPORTED: return "Ethos-N functional model: an operator or attribute it does not support";
    case ETHOSN_MODEL_E_UNBOUND:
        return "Ethos-N region: its constants were never bound (<symbol>_bind_parameters or _bind_constants)";
    case ETHOSN_MODEL_E_CONSTANT: return "Ethos-N functional model: a constant is missing or of the wrong size";
    case ETHOSN_MODEL_E_ARGUMENT: return "Ethos-N functional model: wrong inputs or outputs";
    case ETHOSN_MODEL_E_NOMEM: return "Ethos-N functional model: out of memory";
    case ETHOSN_MODEL_E_PARAMETERS:
        return "Ethos-N functional model: the parameters file is malformed or lacks a constant";
    default: return NULL;
    }
}
