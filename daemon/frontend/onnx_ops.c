/* onnx_ops.c: one importer per ONNX operator and the table mapping op names to them.
 * Each importer's comment gives the ONNX semantics it implements. Values an op takes as
 * "attributes in inputs" (Reshape's shape, Slice's starts...) must be constants after the
 * importer's folding of shape arithmetic; otherwise the op is a dynamic-shape diagnostic. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_import.h"

#define MAXV 64 /* longest int/float list attribute or value we read */

/* ---------------------------------------------------------------- helpers */

/* The op call, type-checked and size-limited, not folded. */
static tth_rexpr *call_unfolded(tth_onnx_ctx *c, tth_op op, tth_rexpr *const *args, size_t n, json_t *attrs)
{
    for (size_t i = 0; i < n; i++)
        if (!args[i]) {
            json_decref(attrs);
            if (!c->diag || !c->diag->code)
                tth__onnx_fail(c, TTH_EINTERNAL, "missing operand for '%s'", tth_op_name(op));
            return NULL;
        }
    tth_rexpr *e = tth_relay_call(c->m, op, args, n, attrs, c->diag);
    if (!e) {
        if (c->diag && !c->diag->code)
            tth__onnx_fail(c, TTH_ETYPE, "type error in '%s'", tth_op_name(op));
        return NULL;
    }
    int big = e->type.nfields < 0 ? !tth__onnx_shape_ok(e->type.tensor.shape, e->type.tensor.rank) : 0;
    for (int32_t i = 0; i < e->type.nfields; i++)
        big |= !tth__onnx_shape_ok(e->type.fields[i].shape, e->type.fields[i].rank);
    if (big) {
        tth__onnx_fail(c, TTH_ELIMIT, "the result of '%s' has more than %lld elements", tth_op_name(op),
                       (long long)TTH_IMPORT_MAX_TENSOR);
        return NULL;
    }
    return e;
}

/* The op call, folded when its arguments are constants (small enough). */
static tth_rexpr *call(tth_onnx_ctx *c, tth_op op, tth_rexpr *const *args, size_t n, json_t *attrs)
{
    tth_rexpr *e = call_unfolded(c, op, args, n, attrs);
    return e ? tth__fold_call(c->m, e, TTH_IMPORT_FOLD_ELEMS, c->diag) : NULL;
}

static tth_rexpr *call1(tth_onnx_ctx *c, tth_op op, tth_rexpr *a, json_t *attrs) { return call(c, op, &a, 1, attrs); }

static tth_rexpr *call2(tth_onnx_ctx *c, tth_op op, tth_rexpr *a, tth_rexpr *b, json_t *attrs)
{
    tth_rexpr *args[2] = {a, b};
    return call(c, op, args, 2, attrs);
}

static const Onnx__AttributeProto *attr(tth_onnx_ctx *c, const char *name)
{
    for (size_t i = 0; i < c->node->n_attribute; i++) {
        const Onnx__AttributeProto *a = c->node->attribute[i];
        if (a && a->name && !strcmp(a->name, name))
            return a;
    }
    return NULL;
}

static int64_t ai(tth_onnx_ctx *c, const char *name, int64_t dflt)
{
    const Onnx__AttributeProto *a = attr(c, name);
    return a && a->has_i ? a->i : dflt;
}

static double af(tth_onnx_ctx *c, const char *name, double dflt)
{
    const Onnx__AttributeProto *a = attr(c, name);
    return a && a->has_f ? a->f : dflt;
}

/* String attribute (NUL-terminated copy in the module arena). */
static const char *as(tth_onnx_ctx *c, const char *name, const char *dflt)
{
    const Onnx__AttributeProto *a = attr(c, name);
    if (!a || !a->has_s)
        return dflt;
    char *s = tth_arena_alloc(c->m->arena, a->s.len + 1);
    if (!s)
        return dflt;
    if (a->s.len)
        memcpy(s, a->s.data, a->s.len);
    for (size_t i = 0; i < a->s.len; i++)
        if (!s[i])
            s[i] = '?';
    return s;
}

/* Int list attribute, borrowed: its values in *v and their count (-1 absent); -2 with diag (code)
 * when longer than max. */
static int64_t aints_view(tth_onnx_ctx *c, const char *name, size_t max, int code, const int64_t **v)
{
    const Onnx__AttributeProto *a = attr(c, name);
    if (!a || (!a->n_ints && !(a->has_type && a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS)))
        return -1;
    if (a->n_ints > max) {
        tth__onnx_fail(c, code, "attribute '%s' has %zu values (at most %zu)", name, a->n_ints, max);
        return -2;
    }
    *v = a->ints;
    return (int64_t)a->n_ints;
}

/* Int list attribute: count (-1 absent); -2 with diag when longer than max. */
static int aints(tth_onnx_ctx *c, const char *name, int64_t *out, int max)
{
    const int64_t *v = NULL;
    int64_t n = aints_view(c, name, (size_t)max, TTH_EUNSUPPORTED, &v);
    for (int64_t i = 0; i < n; i++)
        out[i] = v[i];
    return (int)n;
}

static int afloats(tth_onnx_ctx *c, const char *name, double *out, int max)
{
    const Onnx__AttributeProto *a = attr(c, name);
    if (!a || (!a->n_floats && !(a->has_type && a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS)))
        return -1;
    if (a->n_floats > (size_t)max) {
        tth__onnx_fail(c, TTH_EUNSUPPORTED, "attribute '%s' has %zu values (at most %d)", name, a->n_floats, max);
        return -2;
    }
    for (size_t i = 0; i < a->n_floats; i++)
        out[i] = a->floats[i];
    return (int)a->n_floats;
}

/* Integer values of a constant input. Returns count, or -2 with diag. */
static int vints(tth_onnx_ctx *c, tth_rexpr *e, const char *what, int64_t *out, int max)
{
    if (!e || e->kind != TTH_REXPR_CONST) {
        tth__onnx_fail(c, TTH_EUNSUPPORTED, "input '%s' is not a constant (a dynamic shape or value)", what);
        tth_diag_hint(c->diag, "tth needs static shapes: compute this input from constants only, or, when it is "
                               "a graph input, fix it at compile time: tthctl compile --bind NAME=FILE");
        return -2;
    }
    const tth_tensor *t = e->u.constant.value;
    if (tth_dtype_is_float(t->type.dtype) || t->type.rank > 1) {
        tth__onnx_fail(c, TTH_EMODEL, "input '%s' must be a 1-D integer tensor", what);
        return -2;
    }
    int64_t n = tth_ttype_numel(&t->type);
    if (n > max) {
        tth__onnx_fail(c, TTH_EUNSUPPORTED, "input '%s' has %lld values (at most %d)", what, (long long)n, max);
        return -2;
    }
    for (int64_t i = 0; i < n; i++)
        out[i] = tth__ld_i64(t, i);
    return (int)n;
}

/* A constant scalar input (any dtype) as double; returns 0 or negative with diag. */
static int vscalar(tth_onnx_ctx *c, tth_rexpr *e, const char *what, double *out)
{
    if (!e || e->kind != TTH_REXPR_CONST) {
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "input '%s' is not a constant", what);
    }
    const tth_tensor *t = e->u.constant.value;
    if (tth_ttype_numel(&t->type) != 1)
        return tth__onnx_fail(c, TTH_EMODEL, "input '%s' must hold one value", what);
    *out = tth__ld_f64(t, 0);
    return 0;
}

static tth_rexpr *k_tensor(tth_onnx_ctx *c, tth_tensor *t)
{
    if (!t) {
        tth__onnx_fail(c, TTH_ENOMEM, "out of memory");
        return NULL;
    }
    tth_rexpr *e = tth_relay_const(c->m, t, NULL);
    if (!e)
        tth__onnx_fail(c, TTH_ENOMEM, "out of memory");
    return e;
}

static tth_rexpr *k_i64(tth_onnx_ctx *c, const int64_t *v, int64_t n)
{
    tth_ttype ty = {.dtype = TTH_I64, .rank = 1, .shape = {n}};
    return k_tensor(c, tth_tensor_new(&ty, v));
}

static tth_rexpr *k_scalar(tth_onnx_ctx *c, tth_dtype dt, double v)
{
    tth_ttype ty = {.dtype = dt, .rank = 0};
    tth_tensor *t = tth_tensor_new(&ty, NULL);
    if (t)
        tth__st_f64(t, 0, v);
    return k_tensor(c, t);
}

static const tth_ttype *tt(const tth_rexpr *e) { return &e->type.tensor; }
static int rank(const tth_rexpr *e) { return e->type.tensor.rank; }

static int norm_axis(tth_onnx_ctx *c, int64_t axis, int r, int64_t *out)
{
    *out = 0; /* defined on failure too (callers return at once; the compiler cannot tell) */
    if (axis < -r || axis >= (r ? r : 1)) {
        return tth__onnx_fail(c, TTH_EMODEL, "axis %lld is out of range for rank %d", (long long)axis, r);
    }
    *out = axis < 0 ? axis + r : axis;
    return 0;
}

static tth_rexpr *reshape(tth_onnx_ctx *c, tth_rexpr *x, const int64_t *shape, int r)
{
    if (!x)
        return NULL;
    if (rank(x) == r && !memcmp(tt(x)->shape, shape, sizeof(int64_t) * (size_t)r))
        return x;
    return call1(c, TTH_OP_RESHAPE, x, json_pack("{s:o}", "newshape", tth__json_ints(shape, r)));
}

static tth_rexpr *cast_to(tth_onnx_ctx *c, tth_rexpr *x, tth_dtype dt)
{
    if (!x || tt(x)->dtype == dt)
        return x;
    return call1(c, TTH_OP_CAST, x, json_pack("{s:s}", "dtype", tth_dtype_name(dt)));
}

static int need(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, size_t k)
{
    for (size_t i = 0; i < k; i++)
        if (i >= nin || !in[i])
            return tth__onnx_fail(c, TTH_EMODEL, "'%s' needs at least %zu inputs", c->node->op_type, k);
    return 0;
}

static int tensor_input(tth_onnx_ctx *c, tth_rexpr **in, size_t nin)
{
    for (size_t i = 0; i < nin; i++)
        if (in[i] && in[i]->type.nfields >= 0)
            return tth__onnx_fail(c, TTH_EUNSUPPORTED, "input %zu is a sequence or tuple", i);
    return 0;
}

#define NEED(k)                                 \
    do {                                        \
        int rc_ = need(c, in, nin, (k));         \
        if (rc_)                                \
            return rc_;                         \
        if ((rc_ = tensor_input(c, in, nin)))   \
            return rc_;                         \
    } while (0)
#define CHECK(e)                                                             \
    do {                                                                     \
        if (!(e))                                                            \
            return c->diag && c->diag->code ? c->diag->code : TTH_EINTERNAL; \
    } while (0)

/* ---------------------------------------------------------------- elementwise */

/* Opset < 7 legacy broadcasting: broadcast=1 with axis aligns B's dims at A's axis. */
static tth_rexpr *legacy_bcast(tth_onnx_ctx *c, tth_rexpr *a, tth_rexpr *b)
{
    if (c->opset >= 7 || !ai(c, "broadcast", 0) || !attr(c, "axis"))
        return b;
    int64_t axis;
    if (norm_axis(c, ai(c, "axis", 0), rank(a), &axis))
        return NULL;
    int64_t shape[TTH_MAX_RANK];
    int r = rank(a) - (int)axis;
    if (r < rank(b) || r > TTH_MAX_RANK) {
        tth__onnx_fail(c, TTH_EMODEL, "legacy broadcast axis does not fit B's rank");
        return NULL;
    }
    for (int i = 0; i < r; i++)
        shape[i] = i < rank(b) ? tt(b)->shape[i] : 1;
    return reshape(c, b, shape, r);
}

static int bin(tth_onnx_ctx *c, tth_op op, tth_rexpr **in, size_t nin, tth_rexpr **out, json_t *attrs)
{
    if (nin < 2 || !in[0] || !in[1]) {
        json_decref(attrs);
        return tth__onnx_fail(c, TTH_EMODEL, "'%s' needs 2 inputs", c->node->op_type);
    }
    tth_rexpr *b = legacy_bcast(c, in[0], in[1]);
    if (!b) {
        json_decref(attrs);
        return c->diag->code;
    }
    CHECK(out[0] = call2(c, op, in[0], b, attrs));
    return 0;
}

#define BINARY(fname, OP)                                                                     \
    static int fname(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout) \
    {                                                                                         \
        return bin(c, OP, in, nin, out, NULL);                                                \
    }
BINARY(op_add, TTH_OP_ADD)
BINARY(op_sub, TTH_OP_SUBTRACT)
BINARY(op_mul, TTH_OP_MULTIPLY)
BINARY(op_div, TTH_OP_DIVIDE)
BINARY(op_equal, TTH_OP_EQUAL)
BINARY(op_less, TTH_OP_LESS)
BINARY(op_less_equal, TTH_OP_LESS_EQUAL)
BINARY(op_greater, TTH_OP_GREATER)
BINARY(op_greater_equal, TTH_OP_GREATER_EQUAL)
BINARY(op_and, TTH_OP_LOGICAL_AND)
BINARY(op_or, TTH_OP_LOGICAL_OR)
BINARY(op_xor, TTH_OP_LOGICAL_XOR)

/* Pow: the exponent may have another dtype than the base; it is cast to the base's. */
static int op_pow(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(2);
    tth_rexpr *e = cast_to(c, in[1], tt(in[0])->dtype);
    CHECK(e);
    tth_rexpr *args[2] = {in[0], e};
    return bin(c, TTH_OP_POWER, args, 2, out, NULL);
}

/* Mod: fmod attribute (0: sign of the divisor, 1: C fmod). */
static int op_mod(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    return bin(c, TTH_OP_MOD, in, nin, out, json_pack("{s:b}", "fmod", (int)ai(c, "fmod", 0)));
}

/* PRelu: slope broadcast to x; a 1-D slope of x's channel count on a rank>2 x is per channel. */
static int op_prelu(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(2);
    tth_rexpr *s = in[1];
    if (rank(s) == 1 && rank(in[0]) > 2 && tt(s)->shape[0] == tt(in[0])->shape[1] && tt(s)->shape[0] != 1 &&
        tt(s)->shape[0] != tt(in[0])->shape[rank(in[0]) - 1]) {
        int64_t shape[TTH_MAX_RANK];
        shape[0] = tt(s)->shape[0];
        for (int i = 1; i < rank(in[0]) - 1; i++)
            shape[i] = 1;
        CHECK(s = reshape(c, s, shape, rank(in[0]) - 1));
    }
    CHECK(out[0] = call2(c, TTH_OP_PRELU, in[0], s, NULL));
    return 0;
}

/* Max, Min, Sum, Mean: variadic with broadcasting, folded left to right. */
static int variadic(tth_onnx_ctx *c, tth_op op, tth_rexpr **in, size_t nin, tth_rexpr **out, int mean)
{
    NEED(1);
    tth_rexpr *acc = in[0];
    for (size_t i = 1; i < nin; i++) {
        if (!in[i])
            continue;
        CHECK(acc = call2(c, op, acc, in[i], NULL));
    }
    if (mean && nin > 1) {
        tth_rexpr *k = k_scalar(c, tt(acc)->dtype, (double)nin);
        CHECK(k);
        CHECK(acc = call2(c, TTH_OP_DIVIDE, acc, k, NULL));
    }
    out[0] = acc;
    return 0;
}
static int op_max(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    return variadic(c, TTH_OP_MAXIMUM, in, nin, out, 0);
}
static int op_min(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    return variadic(c, TTH_OP_MINIMUM, in, nin, out, 0);
}
static int op_sum(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    return variadic(c, TTH_OP_ADD, in, nin, out, 0);
}
static int op_mean(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    return variadic(c, TTH_OP_ADD, in, nin, out, 1);
}

static int op_where(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(3);
    CHECK(out[0] = call(c, TTH_OP_WHERE, in, 3, NULL));
    return 0;
}

/* Loop and Scan (docs/operators.md, "Control flow") are unrolled at import: the body is imported
 * once per iteration, its loop-carried values feeding the next, so the trip count must be known
 * at compile time (a constant, or a graph input bound with --bind) and is bounded. */
#define TTH_UNROLL_MAX 1024
#define TTH_UNROLL_TOTAL 8192 /* bodies in the whole model: nested loops multiply */

static int unroll_one(tth_onnx_ctx *c)
{
    if (++c->unrolled <= TTH_UNROLL_TOTAL)
        return 0;
    return tth__onnx_fail(c, TTH_ELIMIT, "the model's loops unroll into more than %d bodies (nested loops multiply)",
                          TTH_UNROLL_TOTAL);
}

/* The per-iteration values of a scan output stacked along a new axis `axis` (0 for Loop). */
static tth_rexpr *stack(tth_onnx_ctx *c, tth_rexpr **v, int64_t n, int64_t axis)
{
    tth_rexpr **parts = tth_arena_alloc(c->m->arena, sizeof *parts * (size_t)n);
    if (!parts) {
        tth__onnx_fail(c, TTH_ENOMEM, "out of memory");
        return NULL;
    }
    for (int64_t k = 0; k < n; k++) {
        const tth_ttype *t = tt(v[k]);
        int64_t shape[TTH_MAX_RANK];
        if (t->rank + 1 > TTH_MAX_RANK) {
            tth__onnx_fail(c, TTH_EUNSUPPORTED, "a scan output of rank %d is too large to stack", t->rank);
            return NULL;
        }
        for (int d = 0, j = 0; d <= t->rank; d++)
            shape[d] = d == axis ? 1 : t->shape[j++];
        if (!(parts[k] = reshape(c, v[k], shape, t->rank + 1)))
            return NULL;
    }
    return n == 1 ? parts[0] : call(c, TTH_OP_CONCATENATE, parts, (size_t)n, json_pack("{s:I}", "axis", (json_int_t)axis));
}

static int op_loop(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    const Onnx__AttributeProto *ba = attr(c, "body");
    if (!ba || !ba->g)
        return tth__onnx_fail(c, TTH_EMODEL, "Loop needs the graph attribute body");
    const Onnx__GraphProto *body = ba->g;
    size_t ncarried = nin >= 2 ? nin - 2 : 0;
    if (nin < 2 || ncarried > 32 || nout < ncarried || nout - ncarried > 32)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "Loop with %zu inputs and %zu outputs (up to 32 loop-carried values "
                                                   "and 32 scan outputs are supported)", nin, nout);
    size_t nscan = nout - ncarried;
    for (size_t i = 2; i < nin; i++)
        if (!in[i] || in[i]->type.nfields >= 0)
            return tth__onnx_fail(c, TTH_EUNSUPPORTED, "Loop's loop-carried value %zu is not a tensor", i - 2);
    const char *m_name = c->node->n_input > 0 ? c->node->input[0] : "", *cond_name = c->node->n_input > 1 ? c->node->input[1] : "";
    int64_t trips;
    if (!in[0])
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "Loop without a trip count: tth unrolls loops and needs it");
    if (vints(c, in[0], m_name, &trips, 1) != 1)
        return c->diag->code;
    if (trips < 0 || trips > TTH_UNROLL_MAX)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "Loop of %lld iterations (tth unrolls loops: 0 to %d)", (long long)trips,
                              TTH_UNROLL_MAX);
    int go = 1;
    if (in[1]) {
        double v;
        if (in[1]->kind != TTH_REXPR_CONST) {
            tth__onnx_fail(c, TTH_EUNSUPPORTED, "input '%s' is not a constant (a loop condition known only at run time)",
                           cond_name);
            tth_diag_hint(c->diag, "tth unrolls loops at compile time: when the condition is a graph input, fix it: "
                                   "tthctl compile --bind NAME=FILE");
            return TTH_EUNSUPPORTED;
        }
        if (vscalar(c, in[1], cond_name, &v))
            return c->diag->code;
        go = v != 0;
    }
    tth_rexpr *carried[32];
    tth_rexpr **scanned = tth_arena_alloc(c->m->arena, sizeof *scanned * (size_t)(nscan * (size_t)(trips ? trips : 1) + 1));
    if (!scanned)
        return tth__onnx_fail(c, TTH_ENOMEM, "out of memory");
    for (size_t i = 0; i < ncarried; i++)
        carried[i] = in[2 + i];
    int64_t done = 0;
    for (int64_t k = 0; k < trips && go; k++) {
        tth_rexpr *bin[34], *bout[65];
        CHECK(bin[0] = k_scalar(c, TTH_I64, (double)k));
        CHECK(bin[1] = k_scalar(c, TTH_BOOL, 1));
        for (size_t i = 0; i < ncarried; i++)
            bin[2 + i] = carried[i];
        int rc = unroll_one(c);
        if (!rc)
            rc = tth__onnx_import_body(c, body, bin, 2 + ncarried, bout, 1 + ncarried + nscan);
        if (rc)
            return rc;
        if (bout[0]->kind != TTH_REXPR_CONST) {
            tth__onnx_fail(c, TTH_EUNSUPPORTED, "the loop's condition is computed from the data in iteration %lld: tth "
                                                "unrolls loops and needs it known at compile time", (long long)k);
            return TTH_EUNSUPPORTED;
        }
        double v;
        if (vscalar(c, bout[0], "the body's condition", &v))
            return c->diag->code;
        for (size_t i = 0; i < ncarried; i++)
            carried[i] = bout[1 + i];
        for (size_t i = 0; i < nscan; i++)
            scanned[i * (size_t)trips + (size_t)k] = bout[1 + ncarried + i];
        done++;
        go = v != 0;
    }
    for (size_t i = 0; i < ncarried; i++)
        out[i] = carried[i];
    for (size_t i = 0; i < nscan; i++) {
        if (done == 0)
            return tth__onnx_fail(c, TTH_EUNSUPPORTED, "Loop that runs no iteration has empty scan outputs, which tth "
                                                       "does not support");
        CHECK(out[ncarried + i] = stack(c, &scanned[i * (size_t)trips], done, 0));
    }
    return 0;
}

/* What one unrolled Scan runs: the body, the counts of states, scan inputs and scan outputs, the
 * steps, and per scan input / output its axis and direction (1: reversed). */
typedef struct scan_spec {
    const Onnx__GraphProto *body;
    size_t nstate, nscan_in, nscan_out;
    int64_t trips, in_axes[32], in_dirs[32], out_axes[32], out_dirs[32];
} scan_spec;

/* The unrolled scan of in (the states, then the scan inputs): step k takes slice k of each scan
 * input along its axis (from the end when reversed); out gets the final states, then each scan
 * output's steps stacked along its axis (in reverse order when reversed). */
static int scan_unroll(tth_onnx_ctx *c, const scan_spec *s, tth_rexpr *const *in, tth_rexpr **out)
{
    size_t nstate = s->nstate, nin = nstate + s->nscan_in, nout = nstate + s->nscan_out;
    int64_t trips = s->trips;
    tth_rexpr *state[32], **scanned = tth_arena_alloc(c->m->arena, sizeof(tth_rexpr *) * (s->nscan_out * (size_t)trips + 1));
    if (!scanned)
        return tth__onnx_fail(c, TTH_ENOMEM, "out of memory");
    for (size_t i = 0; i < nstate; i++)
        state[i] = in[i];
    for (int64_t k = 0; k < trips; k++) {
        tth_rexpr *bin[32], *bout[32];
        for (size_t i = 0; i < nstate; i++)
            bin[i] = state[i];
        for (size_t j = 0; j < s->nscan_in; j++) {
            tth_rexpr *idx;
            CHECK(idx = k_scalar(c, TTH_I64, (double)(s->in_dirs[j] ? trips - 1 - k : k)));
            CHECK(bin[nstate + j] = call2(c, TTH_OP_TAKE, in[nstate + j], idx,
                                          json_pack("{s:I}", "axis", (json_int_t)s->in_axes[j])));
        }
        int rc = unroll_one(c);
        if (!rc)
            rc = tth__onnx_import_body(c, s->body, bin, nin, bout, nout);
        if (rc)
            return rc;
        for (size_t i = 0; i < nstate; i++)
            state[i] = bout[i];
        for (size_t i = 0; i < s->nscan_out; i++)
            scanned[i * (size_t)trips + (size_t)(s->out_dirs[i] ? trips - 1 - k : k)] = bout[nstate + i];
    }
    for (size_t i = 0; i < nstate; i++)
        out[i] = state[i];
    for (size_t i = 0; i < s->nscan_out; i++) {
        int64_t ax;
        if (norm_axis(c, s->out_axes[i], rank(scanned[i * (size_t)trips]) + 1, &ax))
            return c->diag->code;
        CHECK(out[nstate + i] = stack(c, &scanned[i * (size_t)trips], trips, ax));
    }
    return 0;
}

/* Scan's body, num_scan_inputs (M of the nin inputs after `first`, the rest states) and the
 * counts of s; 0 or a failure */
static int scan_counts(tth_onnx_ctx *c, size_t first, size_t nin, size_t nout, scan_spec *s)
{
    const Onnx__AttributeProto *ba = attr(c, "body");
    if (!ba || !ba->g)
        return tth__onnx_fail(c, TTH_EMODEL, "Scan needs the graph attribute body");
    int64_t nscan_in = ai(c, "num_scan_inputs", -1);
    if (nscan_in < 1 || (size_t)nscan_in > nin - first || nin - first > 32 || nout > 32)
        return tth__onnx_fail(c, TTH_EMODEL, "Scan's num_scan_inputs %lld does not fit its %zu inputs (at most 32)",
                              (long long)nscan_in, nin - first);
    memset(s, 0, sizeof *s);
    s->body = ba->g;
    s->nscan_in = (size_t)nscan_in;
    s->nstate = nin - first - s->nscan_in;
    if (nout < s->nstate)
        return tth__onnx_fail(c, TTH_EMODEL, "Scan has %zu outputs for %zu states", nout, s->nstate);
    s->nscan_out = nout - s->nstate;
    return 0;
}

/* The steps of the scan inputs xs (n of them) along their axes, all the same, within the unroll
 * limit; -1 with diag otherwise */
static int64_t scan_trips(tth_onnx_ctx *c, tth_rexpr *const *xs, size_t n, const int64_t *axes)
{
    int64_t trips = -1;
    for (size_t j = 0; j < n; j++) {
        int64_t steps = tt(xs[j])->shape[axes[j]];
        if (trips >= 0 && steps != trips) {
            tth__onnx_fail(c, TTH_EMODEL, "scan inputs of %lld and %lld steps", (long long)trips, (long long)steps);
            return -1;
        }
        trips = steps;
    }
    if (trips < 1 || trips > TTH_UNROLL_MAX) {
        tth__onnx_fail(c, TTH_EUNSUPPORTED, "Scan of %lld steps (tth unrolls scans: 1 to %d)", (long long)trips,
                       TTH_UNROLL_MAX);
        return -1;
    }
    return trips;
}

/* Scan's sequence_lens (opset 8): absent, or a constant whose every length is the full `trips` */
static int scan8_lens(tth_onnx_ctx *c, tth_rexpr *lens, int64_t batch, int64_t trips)
{
    int64_t v[TTH_UNROLL_MAX];
    if (!lens)
        return 0;
    if (lens->kind != TTH_REXPR_CONST)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: Scan's sequence_lens known only at "
                                                   "run time (tth takes it absent or all %lld, the full length)",
                              (long long)trips);
    int n = vints(c, lens, "sequence_lens", v, TTH_UNROLL_MAX);
    if (n < 0)
        return c->diag->code;
    if (n != batch)
        return tth__onnx_fail(c, TTH_EMODEL, "Scan's sequence_lens has %d values for a batch of %lld", n,
                              (long long)batch);
    for (int b = 0; b < n; b++)
        if (v[b] != trips)
            return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: Scan's sequence_lens %lld "
                                                       "(batch %d) is not the full length %lld", (long long)v[b], b,
                                  (long long)trips);
    return 0;
}

/* The batch size of Scan 8's states and scan inputs (axis 0 of each; scan inputs have a sequence
 * axis 1 too), the same for all; -1 with diag otherwise */
static int64_t scan8_batch(tth_onnx_ctx *c, tth_rexpr *const *in, const scan_spec *s)
{
    int64_t batch = -1;
    for (size_t i = 0; i < s->nstate + s->nscan_in; i++) {
        int need = i < s->nstate ? 1 : 2;
        if (rank(in[i]) < need || (batch >= 0 && tt(in[i])->shape[0] != batch)) {
            tth__onnx_fail(c, TTH_EMODEL, "Scan (opset 8): input %zu is not [batch%s, ...] with the others' batch", i + 1,
                           need == 2 ? ", sequence" : "");
            return -1;
        }
        batch = tt(in[i])->shape[0];
    }
    if (batch < 1) {
        tth__onnx_fail(c, TTH_EUNSUPPORTED, "Scan (opset 8) of an empty batch");
        return -1;
    }
    return batch;
}

/* Scan of opset 8: sequence_lens (absent or all the full length), then the states and the scan
 * inputs, each with the batch axis 0 (the scan inputs' sequence axis is 1), `directions` per scan
 * input. Each batch element is its own unrolled scan of the slices at that element (axis 0 taken
 * away, so the sequence axis becomes 0); the final states and the scan outputs of the elements
 * are stacked along axis 0 again. */
static int scan8(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    scan_spec s;
    int rc = nin ? scan_counts(c, 1, nin, nout, &s) : tth__onnx_fail(c, TTH_EMODEL, "Scan needs inputs");
    if (rc || (rc = tensor_input(c, in, nin)))
        return rc;
    tth_rexpr **xin = in + 1;
    for (size_t i = 0; i < s.nstate + s.nscan_in; i++)
        if (!xin[i])
            return tth__onnx_fail(c, TTH_EMODEL, "Scan's input %zu is missing", i + 1);
    int n;
    if (attr(c, "directions") && (n = aints(c, "directions", s.in_dirs, 32)) != (int)s.nscan_in)
        return tth__onnx_fail(c, TTH_EMODEL, "directions has %d values for %zu scan inputs", n, s.nscan_in);
    int64_t batch = scan8_batch(c, xin, &s), seq_axis[32];
    if (batch < 0)
        return c->diag->code;
    for (size_t j = 0; j < s.nscan_in; j++)
        seq_axis[j] = 1;
    if ((s.trips = scan_trips(c, xin + s.nstate, s.nscan_in, seq_axis)) < 0 || (rc = scan8_lens(c, in[0], batch, s.trips)))
        return c->diag->code;
    tth_rexpr **per = tth_arena_alloc(c->m->arena, sizeof *per * nout * (size_t)batch);
    if (!per)
        return tth__onnx_fail(c, TTH_ENOMEM, "out of memory");
    for (int64_t b = 0; b < batch; b++) {
        tth_rexpr *slice[32], *idx;
        CHECK(idx = k_scalar(c, TTH_I64, (double)b));
        for (size_t i = 0; i < s.nstate + s.nscan_in; i++)
            CHECK(slice[i] = call2(c, TTH_OP_TAKE, xin[i], idx, json_pack("{s:I}", "axis", (json_int_t)0)));
        tth_rexpr *res[32];
        if ((rc = scan_unroll(c, &s, slice, res)))
            return rc;
        for (size_t i = 0; i < nout; i++)
            per[i * (size_t)batch + (size_t)b] = res[i];
    }
    for (size_t i = 0; i < nout; i++)
        CHECK(out[i] = stack(c, &per[i * (size_t)batch], batch, 0));
    return 0;
}

/* Scan (opset 9 and later): each iteration takes slice k of every scan input along its axis;
 * opset 8 (a batch axis): scan8. */
static int op_scan(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    if (c->opset < 9)
        return scan8(c, in, nin, out, nout);
    scan_spec s;
    int rc = scan_counts(c, 0, nin, nout, &s);
    if (rc)
        return rc;
    NEED(nin);
    int n;
    if (attr(c, "scan_input_axes") && (n = aints(c, "scan_input_axes", s.in_axes, 32)) != (int)s.nscan_in)
        return tth__onnx_fail(c, TTH_EMODEL, "scan_input_axes has %d values for %zu scan inputs", n, s.nscan_in);
    if (attr(c, "scan_input_directions") && (n = aints(c, "scan_input_directions", s.in_dirs, 32)) != (int)s.nscan_in)
        return tth__onnx_fail(c, TTH_EMODEL, "scan_input_directions has %d values for %zu scan inputs", n, s.nscan_in);
    if (attr(c, "scan_output_axes") && (n = aints(c, "scan_output_axes", s.out_axes, 32)) != (int)s.nscan_out)
        return tth__onnx_fail(c, TTH_EMODEL, "scan_output_axes has %d values for %zu scan outputs", n, s.nscan_out);
    if (attr(c, "scan_output_directions") && (n = aints(c, "scan_output_directions", s.out_dirs, 32)) != (int)s.nscan_out)
        return tth__onnx_fail(c, TTH_EMODEL, "scan_output_directions has %d values for %zu scan outputs", n, s.nscan_out);
    for (size_t j = 0; j < s.nscan_in; j++)
        if (norm_axis(c, s.in_axes[j], rank(in[s.nstate + j]), &s.in_axes[j]))
            return c->diag->code;
    if ((s.trips = scan_trips(c, in + s.nstate, s.nscan_in, s.in_axes)) < 0)
        return c->diag->code;
    return scan_unroll(c, &s, in, out);
}

/* If (docs/operators.md, "Control flow"): a condition known at compile time (a constant, or a graph input
 * bound with --bind) imports only the branch it takes. Otherwise both branches are imported and
 * each output is where(cond, then, else): both are computed, and the condition picks, which ONNX's
 * side-effect-free branches allow; their outputs must then have the same dtype and shape. */
static int op_if(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    const Onnx__AttributeProto *tb = attr(c, "then_branch"), *eb = attr(c, "else_branch");
    if (!tb || !tb->g || !eb || !eb->g)
        return tth__onnx_fail(c, TTH_EMODEL, "If needs the graph attributes then_branch and else_branch");
    if (in[0]->type.nfields >= 0 || in[0]->type.tensor.dtype != TTH_BOOL || tth_ttype_numel(&in[0]->type.tensor) != 1)
        return tth__onnx_fail(c, TTH_EMODEL, "If's condition must be one bool value");
    if (nout == 0 || nout > 64)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "If with %zu outputs (1 to 64 are supported)", nout);
    if (in[0]->kind == TTH_REXPR_CONST) {
        int take = tth__ld_f64(in[0]->u.constant.value, 0) != 0;
        return tth__onnx_import_body(c, take ? tb->g : eb->g, NULL, 0, out, nout);
    }
    tth_rexpr *then_out[64], *else_out[64];
    int rc = tth__onnx_import_body(c, tb->g, NULL, 0, then_out, nout);
    if (!rc)
        rc = tth__onnx_import_body(c, eb->g, NULL, 0, else_out, nout);
    if (rc)
        return rc;
    static const int64_t scalar[1] = {0};
    tth_rexpr *cond = rank(in[0]) == 0 ? in[0] : reshape(c, in[0], scalar, 0);
    if (!cond)
        return c->diag->code;
    for (size_t i = 0; i < nout; i++) {
        const tth_ttype *t = &then_out[i]->type.tensor, *e = &else_out[i]->type.tensor;
        int same = t->dtype == e->dtype && t->rank == e->rank;
        for (int d = 0; same && d < t->rank; d++)
            same = t->shape[d] == e->shape[d];
        if (!same) {
            char ts[160], es[160];
            tth_ttype_format(t, ts, sizeof ts);
            tth_ttype_format(e, es, sizeof es);
            tth__onnx_fail(c, TTH_EUNSUPPORTED,
                           "If's output %zu is %s in then_branch and %s in else_branch, and the condition is not "
                           "known at compile time", i, ts, es);
            tth_diag_hint(c->diag, "tth compiles both branches and picks at run time, which needs equal shapes; "
                                   "if the condition is a graph input, fix it: tthctl compile --bind NAME=FILE");
            return TTH_EUNSUPPORTED;
        }
        tth_rexpr *args[3] = {cond, then_out[i], else_out[i]};
        CHECK(out[i] = call(c, TTH_OP_WHERE, args, 3, NULL));
    }
    return 0;
}

static int unary(tth_onnx_ctx *c, tth_op op, tth_rexpr **in, size_t nin, tth_rexpr **out, json_t *attrs)
{
    if (nin < 1 || !in[0]) {
        json_decref(attrs);
        return tth__onnx_fail(c, TTH_EMODEL, "'%s' needs an input", c->node->op_type);
    }
    CHECK(out[0] = call1(c, op, in[0], attrs));
    return 0;
}

#define UNARY(fname, OP)                                                                      \
    static int fname(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout) \
    {                                                                                         \
        return unary(c, OP, in, nin, out, NULL);                                              \
    }
UNARY(op_neg, TTH_OP_NEGATIVE)
UNARY(op_abs, TTH_OP_ABS)
UNARY(op_sqrt, TTH_OP_SQRT)
UNARY(op_reciprocal, TTH_OP_RECIPROCAL)
UNARY(op_exp, TTH_OP_EXP)
UNARY(op_log, TTH_OP_LOG)
UNARY(op_sin, TTH_OP_SIN)
UNARY(op_asin, TTH_OP_ASIN)
UNARY(op_acos, TTH_OP_ACOS)
UNARY(op_atan, TTH_OP_ATAN)
UNARY(op_asinh, TTH_OP_ASINH)
UNARY(op_acosh, TTH_OP_ACOSH)
UNARY(op_atanh, TTH_OP_ATANH)
UNARY(op_cos, TTH_OP_COS)
UNARY(op_tanh, TTH_OP_TANH)
UNARY(op_sigmoid, TTH_OP_SIGMOID)
UNARY(op_erf, TTH_OP_ERF)
UNARY(op_floor, TTH_OP_FLOOR)
UNARY(op_ceil, TTH_OP_CEIL)
UNARY(op_round, TTH_OP_ROUND)
UNARY(op_sign, TTH_OP_SIGN)
UNARY(op_not, TTH_OP_LOGICAL_NOT)
UNARY(op_relu, TTH_OP_RELU)
UNARY(op_softplus, TTH_OP_SOFTPLUS)
UNARY(op_softsign, TTH_OP_SOFTSIGN)
UNARY(op_hard_swish, TTH_OP_HARD_SWISH)

static int op_leaky_relu(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    return unary(c, TTH_OP_LEAKY_RELU, in, nin, out, json_pack("{s:f}", "alpha", af(c, "alpha", 0.01)));
}
static int op_elu(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    return unary(c, TTH_OP_ELU, in, nin, out, json_pack("{s:f}", "alpha", af(c, "alpha", 1.0)));
}
static int op_selu(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    return unary(c, TTH_OP_SELU, in, nin, out,
                 json_pack("{s:f,s:f}", "alpha", af(c, "alpha", 1.67326319217681884765625), "gamma",
                           af(c, "gamma", 1.05070102214813232421875)));
}
static int op_thresholded_relu(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    return unary(c, TTH_OP_THRESHOLDED_RELU, in, nin, out, json_pack("{s:f}", "alpha", af(c, "alpha", 1.0)));
}
static int op_hard_sigmoid(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    return unary(c, TTH_OP_HARD_SIGMOID, in, nin, out,
                 json_pack("{s:f,s:f}", "alpha", af(c, "alpha", 0.2), "beta", af(c, "beta", 0.5)));
}

/* Mish (18): x * tanh(softplus(x)) */
static int op_mish(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    tth_rexpr *t;
    CHECK(t = call1(c, TTH_OP_SOFTPLUS, in[0], NULL));
    CHECK(t = call1(c, TTH_OP_TANH, t, NULL));
    CHECK(out[0] = call2(c, TTH_OP_MULTIPLY, in[0], t, NULL));
    return 0;
}

/* Gelu (20): 0.5 x (1 + erf(x / sqrt 2)), or with approximate="tanh"
 * 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) */
static int op_gelu(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    tth_rexpr *x = in[0], *t;
    tth_dtype dt = tt(x)->dtype;
    const char *approx = as(c, "approximate", "none");
    if (!strcmp(approx, "none")) {
        CHECK(t = call2(c, TTH_OP_MULTIPLY, x, k_scalar(c, dt, 0.70710678118654752440), NULL));
        CHECK(t = call1(c, TTH_OP_ERF, t, NULL));
    } else if (!strcmp(approx, "tanh")) {
        tth_rexpr *x3;
        CHECK(x3 = call2(c, TTH_OP_MULTIPLY, x, x, NULL));
        CHECK(x3 = call2(c, TTH_OP_MULTIPLY, x3, x, NULL));
        CHECK(t = call2(c, TTH_OP_MULTIPLY, x3, k_scalar(c, dt, 0.044715), NULL));
        CHECK(t = call2(c, TTH_OP_ADD, x, t, NULL));
        CHECK(t = call2(c, TTH_OP_MULTIPLY, t, k_scalar(c, dt, 0.79788456080286535588), NULL));
        CHECK(t = call1(c, TTH_OP_TANH, t, NULL));
    } else {
        return tth__onnx_fail(c, TTH_EMODEL, "Gelu approximate '%s' is neither 'none' nor 'tanh'", approx);
    }
    CHECK(t = call2(c, TTH_OP_ADD, t, k_scalar(c, dt, 1.0), NULL));
    CHECK(t = call2(c, TTH_OP_MULTIPLY, t, x, NULL));
    CHECK(out[0] = call2(c, TTH_OP_MULTIPLY, t, k_scalar(c, dt, 0.5), NULL));
    return 0;
}

/* Clip: min/max attributes before opset 11, optional constant inputs from 11 on. An absent
 * bound is ±DBL_MAX (JSON has no infinity; converting DBL_MAX to float gives infinity). */
static int op_clip(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    double lo = -DBL_MAX, hi = DBL_MAX;
    if (c->opset < 11) {
        lo = af(c, "min", -DBL_MAX);
        hi = af(c, "max", DBL_MAX);
    } else {
        if (nin > 1 && in[1] && vscalar(c, in[1], "min", &lo))
            return c->diag->code;
        if (nin > 2 && in[2] && vscalar(c, in[2], "max", &hi))
            return c->diag->code;
    }
    CHECK(out[0] = call1(c, TTH_OP_CLIP, in[0], json_pack("{s:f,s:f}", "a_min", lo, "a_max", hi)));
    return 0;
}

/* Det: the determinant of each matrix over the last two axes (relay det). */
static int op_det(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    CHECK(out[0] = call1(c, TTH_OP_DET, in[0], NULL));
    return 0;
}

static int op_identity(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    out[0] = in[0];
    return 0;
}

/* Dropout (inference): identity; the mask output is all true. Training mode is unsupported. */
static int op_dropout(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    if (nin > 2 && in[2]) {
        double tm;
        if (vscalar(c, in[2], "training_mode", &tm))
            return c->diag->code;
        double ratio = 0.5;
        if (tm != 0 && nin > 1 && in[1] && vscalar(c, in[1], "ratio", &ratio))
            return c->diag->code;
        if (tm != 0 && ratio != 0) /* a ratio of 0 keeps everything in training too */
            return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: Dropout in training mode "
                                  "(ratio %g draws random numbers)", ratio);
    }
    out[0] = in[0];
    if (nout > 1) {
        tth_ttype ty = *tt(in[0]);
        ty.dtype = TTH_BOOL;
        if (tth_ttype_numel(&ty) > TTH_IMPORT_MAX_ELEMS)
            return tth__onnx_fail(c, TTH_ELIMIT, "Dropout mask too large");
        tth_tensor *t = tth_tensor_new(&ty, NULL);
        if (t)
            memset(t->data, 1, t->nbytes);
        CHECK(out[1] = k_tensor(c, t));
    }
    return 0;
}

/* Cast: `to` is an ONNX dtype number. */
static int op_cast(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    const Onnx__AttributeProto *a = attr(c, "to");
    if (!a)
        return tth__onnx_fail(c, TTH_EMODEL, "Cast without the 'to' attribute");
    tth_dtype dt = a->has_i ? tth__onnx_dtype((int32_t)a->i) : TTH_DTYPE_INVALID;
    if (dt == TTH_DTYPE_INVALID) {
        char type[64];
        tth__onnx_type_text(a->has_i ? (int32_t)a->i : -1, type, sizeof type);
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: Cast to %s", type);
    }
    CHECK(out[0] = call1(c, TTH_OP_CAST, in[0], json_pack("{s:s}", "dtype", tth_dtype_name(dt))));
    return 0;
}

/* ---------------------------------------------------------------- convolution and pooling */

typedef struct spatial {
    int64_t k[3], s[3], d[3], pb[3], pe[3], outpad[3];
} spatial;

/* Kernel/stride/dilation/pads for nsp (1 to 3) spatial dims, auto_pad resolved. in_hw: input
 * spatial sizes. Fills 2-D values for 1-D and 2-D (a 1-D op gets a leading size-1 dim), and
 * the three axes (depth first) for 3-D. */
static int spatial_attrs(tth_onnx_ctx *c, int nsp, const int64_t *in_hw, const int64_t *kernel, int transpose,
                         spatial *sp)
{
    int64_t v[8];
    int n;
    for (int i = 0; i < 3; i++) {
        sp->k[i] = 1;
        sp->s[i] = sp->d[i] = 1;
        sp->pb[i] = sp->pe[i] = sp->outpad[i] = 0;
    }
    int off = nsp < 2 ? 2 - nsp : 0;
    for (int i = 0; i < nsp; i++)
        sp->k[off + i] = kernel[i];
    if ((n = aints(c, "kernel_shape", v, 8)) == -2)
        return c->diag->code;
    if (n >= 0) {
        if (n != nsp)
            return tth__onnx_fail(c, TTH_EMODEL, "kernel_shape has %d values for %d spatial dims", n, nsp);
        for (int i = 0; i < nsp; i++)
            sp->k[off + i] = v[i];
    }
    const char *names[3] = {"strides", "dilations", "output_padding"};
    int64_t *dst[3] = {sp->s, sp->d, sp->outpad};
    for (int a = 0; a < 3; a++) {
        if ((n = aints(c, names[a], v, 8)) == -2)
            return c->diag->code;
        if (n >= 0 && n != nsp)
            return tth__onnx_fail(c, TTH_EMODEL, "%s has %d values for %d spatial dims", names[a], n, nsp);
        for (int i = 0; i < n; i++)
            dst[a][off + i] = v[i];
    }
    if ((n = aints(c, "pads", v, 8)) == -2)
        return c->diag->code;
    if (n >= 0) {
        if (n != 2 * nsp)
            return tth__onnx_fail(c, TTH_EMODEL, "pads has %d values for %d spatial dims", n, nsp);
        for (int i = 0; i < nsp; i++) {
            sp->pb[off + i] = v[i];
            sp->pe[off + i] = v[nsp + i];
        }
    }
    for (int i = 0; i < 3; i++) {
        const int64_t W = TTH_IMPORT_MAX_WINDOW;
        if (sp->k[i] < 1 || sp->k[i] > W || sp->s[i] < 1 || sp->s[i] > W || sp->d[i] < 1 || sp->d[i] > W ||
            sp->pb[i] < 0 || sp->pe[i] < 0 || sp->pb[i] > W || sp->pe[i] > W ||
            sp->outpad[i] < 0 || sp->outpad[i] >= (sp->s[i] > sp->d[i] ? sp->s[i] : sp->d[i]) + 1)
            return tth__onnx_fail(c, TTH_EMODEL, "kernel, strides, dilations or pads out of range");
    }
    const char *ap = as(c, "auto_pad", "NOTSET");
    if (!strcmp(ap, "NOTSET"))
        return 0;
    if (!strcmp(ap, "VALID")) {
        for (int i = 0; i < 3; i++)
            sp->pb[i] = sp->pe[i] = 0;
        return 0;
    }
    int upper = !strcmp(ap, "SAME_UPPER");
    if (!upper && strcmp(ap, "SAME_LOWER"))
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: auto_pad '%s'", ap);
    for (int i = 0; i < nsp; i++) {
        int j = off + i;
        int64_t in = in_hw[i], ext = (sp->k[j] - 1) * sp->d[j] + 1, total;
        if (!transpose) {
            int64_t o = (in + sp->s[j] - 1) / sp->s[j];
            total = (o - 1) * sp->s[j] + ext - in;
        } else {
            int64_t o = in * sp->s[j];
            total = sp->s[j] * (in - 1) + sp->outpad[j] + ext - o;
        }
        if (total < 0)
            total = 0;
        if (!transpose) {
            sp->pb[j] = upper ? total / 2 : total - total / 2;
        } else {
            /* ConvTranspose: SAME_UPPER puts the smaller half first (ONNX reference) */
            sp->pb[j] = upper ? total / 2 : total - total / 2;
        }
        sp->pe[j] = total - sp->pb[j];
    }
    return 0;
}

static json_t *pads_json(const spatial *sp)
{
    int64_t p[4] = {sp->pb[0], sp->pb[1], sp->pe[0], sp->pe[1]};
    return tth__json_ints(p, 4);
}

/* A rank-3 (N, C, L) tensor as (N, C, 1, L); rank 4 unchanged; others unsupported. */
static tth_rexpr *to4d(tth_onnx_ctx *c, tth_rexpr *x, const char *what)
{
    if (rank(x) == 4)
        return x;
    if (rank(x) == 3) {
        int64_t s[4] = {tt(x)->shape[0], tt(x)->shape[1], 1, tt(x)->shape[2]};
        return reshape(c, x, s, 4);
    }
    tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: %s of rank %d (only 1-D and 2-D are supported)",
                   what, rank(x));
    return NULL;
}

static tth_rexpr *from4d(tth_onnx_ctx *c, tth_rexpr *y, int orig_rank)
{
    if (!y || orig_rank == 4)
        return y;
    int64_t s[3] = {tt(y)->shape[0], tt(y)->shape[1], tt(y)->shape[3]};
    return reshape(c, y, s, 3);
}

/* ---- 3-D convolution and pooling, as 2-D operators over depth slices (docs/operators.md) ---- */

static tth_rexpr *slice_axis(tth_onnx_ctx *c, tth_rexpr *x, int axis, int64_t lo, int64_t hi);

typedef struct depth3 {
    int64_t k, s, d, pb, pe; /* the depth axis: kernel, stride, dilation, pads */
    int64_t in, out;
} depth3;

/* The depth axis' attributes of a rank-5 op, and the node's attributes with the depth entry
 * dropped from kernel_shape, strides, dilations and pads, for the 2-D op over each slice. */
static int depth_attrs(tth_onnx_ctx *c, const int64_t *in_dhw, int64_t kd_default, depth3 *dp, int64_t *hw_k,
                       int64_t *hw_s, int64_t *hw_d, int64_t *hw_pads)
{
    int64_t v[8];
    int n;
    dp->k = kd_default;
    dp->s = dp->d = 1;
    dp->pb = dp->pe = 0;
    hw_s[0] = hw_s[1] = hw_d[0] = hw_d[1] = 1;
    hw_pads[0] = hw_pads[1] = hw_pads[2] = hw_pads[3] = 0;
    if ((n = aints(c, "kernel_shape", v, 8)) == 3) {
        dp->k = v[0];
        hw_k[0] = v[1];
        hw_k[1] = v[2];
    } else if (n >= 0) {
        return tth__onnx_fail(c, TTH_EMODEL, "kernel_shape has %d values for 3 spatial dims", n);
    }
    if ((n = aints(c, "strides", v, 8)) == 3) {
        dp->s = v[0];
        hw_s[0] = v[1];
        hw_s[1] = v[2];
    }
    if ((n = aints(c, "dilations", v, 8)) == 3) {
        dp->d = v[0];
        hw_d[0] = v[1];
        hw_d[1] = v[2];
    }
    if ((n = aints(c, "pads", v, 8)) == 6) {
        dp->pb = v[0];
        dp->pe = v[3];
        hw_pads[0] = v[1];
        hw_pads[1] = v[2];
        hw_pads[2] = v[4];
        hw_pads[3] = v[5];
    }
    const char *ap = as(c, "auto_pad", "NOTSET");
    if (strcmp(ap, "NOTSET") && strcmp(ap, "VALID"))
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: auto_pad '%s' in 3-D", ap);
    if (!strcmp(ap, "VALID"))
        dp->pb = dp->pe = hw_pads[0] = hw_pads[1] = hw_pads[2] = hw_pads[3] = 0;
    if (ai(c, "ceil_mode", 0))
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: ceil_mode in 3-D pooling");
    const int64_t W = TTH_IMPORT_MAX_WINDOW;
    int64_t all[] = {dp->k, dp->s, dp->d, hw_k[0], hw_k[1], hw_s[0], hw_s[1], hw_d[0], hw_d[1]};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i] < 1 || all[i] > W)
            return tth__onnx_fail(c, TTH_EMODEL, "kernel, strides or dilations out of range (1 to %lld)", (long long)W);
    int64_t pads[] = {dp->pb, dp->pe, hw_pads[0], hw_pads[1], hw_pads[2], hw_pads[3]};
    for (size_t i = 0; i < sizeof pads / sizeof pads[0]; i++)
        if (pads[i] < 0 || pads[i] > W)
            return tth__onnx_fail(c, TTH_EMODEL, "pads out of range (0 to %lld)", (long long)W);
    dp->in = in_dhw[0];
    dp->out = (dp->in + dp->pb + dp->pe - dp->d * (dp->k - 1) - 1) / dp->s + 1;
    if (dp->out < 1 || dp->out * dp->k > 4096)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "3-D window over depth %lld (kernel %lld, stride %lld): more than "
                              "4096 slice operations or out of range", (long long)dp->in, (long long)dp->k,
                              (long long)dp->s);
    return 0;
}

/* x [N, C, D, H, W] at depth z as [N, C, H, W] */
static tth_rexpr *depth_slice(tth_onnx_ctx *c, tth_rexpr *x, int64_t z)
{
    const int64_t *sh = tt(x)->shape;
    int64_t s4[4] = {sh[0], sh[1], sh[3], sh[4]};
    return reshape(c, slice_axis(c, x, 2, z, z + 1), s4, 4);
}

/* the [N, C, H, W] results of each output depth stacked into [N, C, OD, H, W] */
static tth_rexpr *depth_stack(tth_onnx_ctx *c, tth_rexpr **ys, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        const int64_t *sh = tt(ys[i])->shape;
        int64_t s5[5] = {sh[0], sh[1], 1, sh[2], sh[3]};
        if (!(ys[i] = reshape(c, ys[i], s5, 5)))
            return NULL;
    }
    return n == 1 ? ys[0] : call(c, TTH_OP_CONCATENATE, ys, (size_t)n, json_pack("{s:i}", "axis", 2));
}

/* A 3-D op as 2-D ones: for each output depth, the 2-D results of the kernel's depth taps that
 * land inside the input (tap), folded with `combine`, then `finish` (may be NULL). */
typedef struct depth_op {
    const char *what; /* for the error when an output depth reads only padding */
    tth_op combine;
    tth_rexpr *(*tap)(tth_onnx_ctx *c, const struct depth_op *op, int64_t id, int64_t z);
    tth_rexpr *(*finish)(tth_onnx_ctx *c, const struct depth_op *op, tth_rexpr *acc, int64_t taps);
    tth_rexpr **in;
    size_t nin;
    json_t *at;       /* the 2-D op's attributes */
    tth_op op2d;
    int64_t w4[4];    /* conv: a weight slice's 2-D shape */
    int64_t k;        /* pooling: the depth kernel, for count_include_pad */
    int incl;
} depth_op;

static int depth_fold(tth_onnx_ctx *c, const depth3 *dp, const depth_op *op, tth_rexpr **out)
{
    tth_rexpr **ys = calloc((size_t)dp->out, sizeof *ys);
    if (!ys)
        return tth__onnx_fail(c, TTH_ENOMEM, "out of memory");
    int rc = 0;
    for (int64_t od = 0; od < dp->out && !rc; od++) {
        tth_rexpr *acc = NULL;
        int64_t taps = 0;
        for (int64_t z = 0; z < dp->k && !rc; z++) {
            int64_t id = od * dp->s + z * dp->d - dp->pb;
            if (id < 0 || id >= dp->in)
                continue;
            tth_rexpr *y = op->tap(c, op, id, z);
            acc = !y ? NULL : acc ? call2(c, op->combine, acc, y, NULL) : y;
            taps++;
            if (!acc)
                rc = c->diag->code ? c->diag->code : TTH_EINTERNAL;
        }
        if (!rc && !acc)
            rc = tth__onnx_fail(c, TTH_EUNSUPPORTED, "%s whose output depth %lld reads only padding", op->what,
                                (long long)od);
        if (!rc && op->finish && !(acc = op->finish(c, op, acc, taps)))
            rc = c->diag->code ? c->diag->code : TTH_EINTERNAL;
        ys[od] = acc;
    }
    if (!rc && !(out[0] = depth_stack(c, ys, dp->out)))
        rc = c->diag->code ? c->diag->code : TTH_EINTERNAL;
    free(ys);
    return rc;
}

/* conv: input slice id convolved with weight slice z */
static tth_rexpr *conv3d_tap(tth_onnx_ctx *c, const depth_op *op, int64_t id, int64_t z)
{
    tth_rexpr *args[2] = {depth_slice(c, op->in[0], id), reshape(c, slice_axis(c, op->in[1], 2, z, z + 1), op->w4, 4)};
    return args[0] && args[1] ? call(c, TTH_OP_CONV2D, args, 2, json_deep_copy(op->at)) : NULL;
}

/* conv: plus the bias, when there is one */
static tth_rexpr *conv3d_bias(tth_onnx_ctx *c, const depth_op *op, tth_rexpr *acc, int64_t taps)
{
    (void)taps;
    if (op->nin < 3 || !op->in[2])
        return acc;
    int64_t b4[4] = {1, op->w4[0], 1, 1};
    tth_rexpr *b = reshape(c, op->in[2], b4, 4);
    return b ? call2(c, TTH_OP_ADD, acc, b, NULL) : NULL;
}

/* pooling: the 2-D pooling of input slice id */
static tth_rexpr *pool3d_tap(tth_onnx_ctx *c, const depth_op *op, int64_t id, int64_t z)
{
    (void)z;
    tth_rexpr *sl = depth_slice(c, op->in[0], id);
    return sl ? call1(c, op->op2d, sl, json_deep_copy(op->at)) : NULL;
}

/* average pooling: the sum over depth divided by the taps counted (or the whole kernel) */
static tth_rexpr *pool3d_mean(tth_onnx_ctx *c, const depth_op *op, tth_rexpr *acc, int64_t taps)
{
    tth_rexpr *k = k_scalar(c, tt(acc)->dtype, (double)(op->incl ? op->k : taps));
    return k ? call2(c, TTH_OP_DIVIDE, acc, k, NULL) : NULL;
}

/* Conv over [N, C, D, H, W]: each output depth is the sum over the kernel's depth taps that land
 * inside the input of a 2-D convolution of that input slice with that weight slice. */
static int conv3d(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out)
{
    const int64_t *xs = tt(in[0])->shape, *ws = tt(in[1])->shape;
    depth3 dp;
    int64_t hk[2] = {ws[3], ws[4]}, hs[2], hd[2], hp[4];
    if (depth_attrs(c, xs + 2, ws[2], &dp, hk, hs, hd, hp))
        return c->diag->code;
    depth_op op = {.what = "3-D convolution", .combine = TTH_OP_ADD, .tap = conv3d_tap, .finish = conv3d_bias,
                   .in = in, .nin = nin, .w4 = {ws[0], ws[1], ws[3], ws[4]}};
    op.at = json_pack("{s:o,s:o,s:o,s:I}", "strides", tth__json_ints(hs, 2), "padding", tth__json_ints(hp, 4),
                      "dilation", tth__json_ints(hd, 2), "groups", (json_int_t)ai(c, "group", 1));
    if (!op.at)
        return tth__onnx_fail(c, TTH_ENOMEM, "out of memory");
    int rc = depth_fold(c, &dp, &op, out);
    json_decref(op.at);
    return rc;
}

/* Max/average pooling over [N, C, D, H, W]: per output depth, the max (or the sum divided by the
 * taps counted) over the depth window of the 2-D pooling of each input slice. */
static int pool3d(tth_onnx_ctx *c, tth_rexpr **in, tth_rexpr **out, int is_max)
{
    const int64_t *xs = tt(in[0])->shape;
    depth3 dp;
    int64_t hk[2] = {1, 1}, hs[2], hd[2], hp[4];
    if (depth_attrs(c, xs + 2, 1, &dp, hk, hs, hd, hp))
        return c->diag->code;
    depth_op op = {.what = "3-D pooling", .combine = is_max ? TTH_OP_MAXIMUM : TTH_OP_ADD, .tap = pool3d_tap,
                   .finish = is_max ? NULL : pool3d_mean, .in = in,
                   .op2d = is_max ? TTH_OP_MAX_POOL2D : TTH_OP_AVG_POOL2D, .k = dp.k,
                   .incl = (int)ai(c, "count_include_pad", 0)};
    op.at = json_pack("{s:o,s:o,s:o,s:o,s:b}", "pool_size", tth__json_ints(hk, 2), "strides", tth__json_ints(hs, 2),
                      "padding", tth__json_ints(hp, 4), "dilation", tth__json_ints(hd, 2), "ceil_mode", 0);
    if (op.at && !is_max)
        json_object_set_new(op.at, "count_include_pad", json_boolean(op.incl));
    if (!op.at)
        return tth__onnx_fail(c, TTH_ENOMEM, "out of memory");
    int rc = depth_fold(c, &dp, &op, out);
    json_decref(op.at);
    return rc;
}

/* Conv: 1-D (via 2-D) and 2-D; group, dilations, strides, pads, auto_pad; optional bias. */
static int op_conv(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(2);
    int r = rank(in[0]);
    if (rank(in[1]) != r)
        return tth__onnx_fail(c, TTH_EMODEL, "Conv weight rank %d differs from input rank %d", rank(in[1]), r);
    if (r == 5)
        return conv3d(c, in, nin, out);
    tth_rexpr *x = to4d(c, in[0], "Conv");
    CHECK(x);
    tth_rexpr *w = to4d(c, in[1], "Conv");
    CHECK(w);
    spatial sp;
    int nsp = r - 2;
    int rc = spatial_attrs(c, nsp, tt(in[0])->shape + 2, tt(in[1])->shape + 2, 0, &sp);
    if (rc)
        return rc;
    int64_t st[2] = {sp.s[0], sp.s[1]}, dl[2] = {sp.d[0], sp.d[1]};
    json_t *at = json_pack("{s:o,s:o,s:o,s:I}", "strides", tth__json_ints(st, 2), "padding", pads_json(&sp),
                           "dilation", tth__json_ints(dl, 2), "groups", (json_int_t)ai(c, "group", 1));
    tth_rexpr *args[3] = {x, w, nin > 2 ? in[2] : NULL};
    tth_rexpr *y = call(c, TTH_OP_CONV2D, args, args[2] ? 3 : 2, at);
    CHECK(y);
    CHECK(out[0] = from4d(c, y, r));
    return 0;
}

/* ConvTranspose over [N, C, D, H, W] (sp: the three axes resolved, depth first): output depth
 * od is the sum of the 2-D transposed convolutions of input slice id with weight slice kd over
 * the pairs with id * stride + kd * dilation = od + front padding; a depth no pair reaches is
 * zero; then the bias. */
static int convt3d(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, const spatial *sp, tth_rexpr **out)
{
    const int64_t *xs = tt(in[0])->shape, *ws = tt(in[1])->shape;
    int64_t g = ai(c, "group", 1), id_n = xs[2];
    if (g < 1 || ws[0] != xs[1] || xs[1] % g)
        return tth__onnx_fail(c, TTH_EMODEL, "ConvTranspose weight [%lld, ...] does not fit %lld channels in %lld "
                              "groups", (long long)ws[0], (long long)xs[1], (long long)g);
    int64_t od_n = sp->s[0] * (id_n - 1) + sp->outpad[0] + (ws[2] - 1) * sp->d[0] + 1 - sp->pb[0] - sp->pe[0];
    if (od_n < 1 || id_n * ws[2] > 4096)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "3-D ConvTranspose over depth %lld (kernel %lld): more than 4096 "
                              "slice operations or an empty output", (long long)id_n, (long long)ws[2]);
    int64_t st[2] = {sp->s[1], sp->s[2]}, dl[2] = {sp->d[1], sp->d[2]}, op2[2] = {sp->outpad[1], sp->outpad[2]};
    int64_t pd[4] = {sp->pb[1], sp->pb[2], sp->pe[1], sp->pe[2]}, w4[4] = {ws[0], ws[1], ws[3], ws[4]};
    int64_t y4[4] = {xs[0], ws[1] * g, st[0] * (xs[3] - 1) + op2[0] + (ws[3] - 1) * dl[0] + 1 - pd[0] - pd[2],
                     st[1] * (xs[4] - 1) + op2[1] + (ws[4] - 1) * dl[1] + 1 - pd[1] - pd[3]};
    tth_rexpr **ys = calloc((size_t)od_n, sizeof *ys);
    if (!ys)
        return tth__onnx_fail(c, TTH_ENOMEM, "out of memory");
    int rc = 0;
    for (int64_t od = 0; od < od_n && !rc; od++) {
        tth_rexpr *acc = NULL;
        for (int64_t kd = 0; kd < ws[2] && !rc; kd++) {
            int64_t p = od + sp->pb[0] - kd * sp->d[0];
            if (p < 0 || p % sp->s[0] || p / sp->s[0] >= id_n)
                continue;
            json_t *at = json_pack("{s:o,s:o,s:o,s:I,s:o}", "strides", tth__json_ints(st, 2), "padding",
                                   tth__json_ints(pd, 4), "dilation", tth__json_ints(dl, 2), "groups", (json_int_t)g,
                                   "output_padding", tth__json_ints(op2, 2));
            tth_rexpr *args[2] = {depth_slice(c, in[0], p / sp->s[0]),
                                  reshape(c, slice_axis(c, in[1], 2, kd, kd + 1), w4, 4)};
            tth_rexpr *y = call(c, TTH_OP_CONV2D_TRANSPOSE, args, 2, at); /* NULL when an operand is */
            acc = !y ? NULL : acc ? call2(c, TTH_OP_ADD, acc, y, NULL) : y;
            if (!acc)
                rc = c->diag->code ? c->diag->code : TTH_EINTERNAL;
        }
        if (!rc && !acc) /* no tap reaches this depth */
            acc = call1(c, TTH_OP_BROADCAST_TO, k_scalar(c, tt(in[0])->dtype, 0),
                        json_pack("{s:o}", "shape", tth__json_ints(y4, 4)));
        if (!rc && acc && nin > 2 && in[2]) {
            int64_t b4[4] = {1, y4[1], 1, 1};
            acc = call2(c, TTH_OP_ADD, acc, reshape(c, in[2], b4, 4), NULL);
        }
        if (!rc && !acc)
            rc = c->diag->code ? c->diag->code : TTH_EINTERNAL;
        ys[od] = acc;
    }
    if (!rc && !(out[0] = depth_stack(c, ys, od_n)))
        rc = c->diag->code ? c->diag->code : TTH_EINTERNAL;
    free(ys);
    return rc;
}

/* ConvTranspose: 1-D to 3-D; output_shape resolves the padding (a negative end padding becomes
 * output padding); auto_pad as in ONNX. 3-D goes through convt3d. */
static int op_conv_transpose(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(2);
    int r = rank(in[0]);
    if (rank(in[1]) != r)
        return tth__onnx_fail(c, TTH_EMODEL, "ConvTranspose weight rank differs from input rank");
    if (r < 3 || r > 5)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: ConvTranspose of rank %d (only 1-D, "
                              "2-D and 3-D are supported)", r);
    spatial sp;
    int nsp = r - 2, off = nsp < 2 ? 2 - nsp : 0;
    int rc = spatial_attrs(c, nsp, tt(in[0])->shape + 2, tt(in[1])->shape + 2, 1, &sp);
    if (rc)
        return rc;
    int64_t os[8];
    int n = aints(c, "output_shape", os, 8);
    if (n == -2)
        return c->diag->code;
    if (n >= 0) {
        if (n != nsp && n != nsp + 2)
            return tth__onnx_fail(c, TTH_EMODEL, "output_shape has %d values", n);
        const char *ap = as(c, "auto_pad", "NOTSET");
        int upper = !strcmp(ap, "SAME_UPPER");
        for (int i = 0; i < nsp; i++) {
            int j = off + i;
            int64_t want = os[n == nsp ? i : i + 2];
            if (want < 1 || want > TTH_IMPORT_MAX_TENSOR)
                return tth__onnx_fail(c, TTH_EMODEL, "output_shape %lld out of range", (long long)want);
            int64_t total = sp.s[j] * (tt(in[0])->shape[2 + i] - 1) + sp.outpad[j] + (sp.k[j] - 1) * sp.d[j] + 1 - want;
            int64_t b = upper ? total / 2 : total - total / 2;
            /* floor division for negative totals, as the ONNX reference does */
            int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
            b = upper ? half : total - half;
            int64_t e = total - b;
            if (e < 0) {
                sp.outpad[j] += -e;
                e = 0;
            }
            if (b < 0)
                return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: output_shape larger than the "
                                                           "convolution can produce");
            sp.pb[j] = b;
            sp.pe[j] = e;
        }
    }
    if (r == 5)
        return convt3d(c, in, nin, &sp, out);
    tth_rexpr *x = to4d(c, in[0], "ConvTranspose");
    CHECK(x);
    tth_rexpr *w = to4d(c, in[1], "ConvTranspose");
    CHECK(w);
    int64_t st[2] = {sp.s[0], sp.s[1]}, dl[2] = {sp.d[0], sp.d[1]}, op2[2] = {sp.outpad[0], sp.outpad[1]};
    json_t *at = json_pack("{s:o,s:o,s:o,s:I,s:o}", "strides", tth__json_ints(st, 2), "padding", pads_json(&sp),
                           "dilation", tth__json_ints(dl, 2), "groups", (json_int_t)ai(c, "group", 1), "output_padding",
                           tth__json_ints(op2, 2));
    tth_rexpr *args[3] = {x, w, nin > 2 ? in[2] : NULL};
    tth_rexpr *y = call(c, TTH_OP_CONV2D_TRANSPOSE, args, args[2] ? 3 : 2, at);
    CHECK(y);
    CHECK(out[0] = from4d(c, y, r));
    return 0;
}

/* MaxPool's two outputs from one nn.max_pool2d_with_argmax (at: the 2-D pooling attributes; the
 * flat indices of a 1-D pool over (N, C, 1, L) are those over (N, C, L)). */
static int max_pool_indices(tth_onnx_ctx *c, tth_rexpr *x, json_t *at, int r, tth_rexpr **out)
{
    int64_t order = ai(c, "storage_order", 0);
    if (order != 0 && order != 1) {
        json_decref(at);
        return tth__onnx_fail(c, TTH_EMODEL, "MaxPool storage_order %lld is neither 0 nor 1", (long long)order);
    }
    json_object_set_new(at, "storage_order", json_integer(order));
    tth_rexpr *t = call1(c, TTH_OP_MAX_POOL2D_ARGMAX, x, at);
    CHECK(t);
    for (int32_t i = 0; i < 2; i++) {
        tth_rexpr *g = tth_relay_tuple_get(c->m, t, i, c->diag);
        CHECK(g);
        CHECK(out[i] = from4d(c, tth__fold_call(c->m, g, TTH_IMPORT_FOLD_ELEMS, c->diag), r));
    }
    return 0;
}

static int pool(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout, int is_max)
{
    NEED(1);
    int indices = is_max && nout > 1 && c->node->output[1] && c->node->output[1][0];
    int r = rank(in[0]);
    if (!attr(c, "kernel_shape"))
        return tth__onnx_fail(c, TTH_EMODEL, "pooling without kernel_shape");
    if (r == 5 && indices)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: MaxPool's Indices output in 3-D");
    if (r == 5)
        return pool3d(c, in, out, is_max);
    tth_rexpr *x = to4d(c, in[0], is_max ? "MaxPool" : "AveragePool");
    CHECK(x);
    spatial sp;
    int64_t kdummy[2] = {1, 1};
    int rc = spatial_attrs(c, r - 2, tt(in[0])->shape + 2, kdummy, 0, &sp);
    if (rc)
        return rc;
    int64_t ps[2] = {sp.k[0], sp.k[1]}, st[2] = {sp.s[0], sp.s[1]}, dl[2] = {sp.d[0], sp.d[1]};
    json_t *at = json_pack("{s:o,s:o,s:o,s:o,s:b}", "pool_size", tth__json_ints(ps, 2), "strides",
                           tth__json_ints(st, 2), "padding", pads_json(&sp), "dilation", tth__json_ints(dl, 2),
                           "ceil_mode", (int)ai(c, "ceil_mode", 0));
    if (!is_max)
        json_object_set_new(at, "count_include_pad", json_boolean(ai(c, "count_include_pad", 0)));
    if (indices)
        return max_pool_indices(c, x, at, r, out);
    tth_rexpr *y = call1(c, is_max ? TTH_OP_MAX_POOL2D : TTH_OP_AVG_POOL2D, x, at);
    CHECK(y);
    CHECK(out[0] = from4d(c, y, r));
    return 0;
}
static int op_max_pool(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    return pool(c, in, nin, out, nout, 1);
}
static int op_avg_pool(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    return pool(c, in, nin, out, nout, 0);
}

/* GlobalAverage/MaxPool over all spatial dims of any rank >= 3 (reshaped to N, C, 1, S). */
static int global_pool(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, int is_max)
{
    NEED(1);
    int r = rank(in[0]);
    if (r < 3)
        return tth__onnx_fail(c, TTH_EMODEL, "global pooling needs rank >= 3");
    tth_rexpr *x = in[0];
    if (r != 4) {
        int64_t s[4] = {tt(x)->shape[0], tt(x)->shape[1], 1, 1};
        for (int i = 2; i < r; i++)
            s[3] *= tt(x)->shape[i];
        CHECK(x = reshape(c, x, s, 4));
    }
    tth_rexpr *y = call1(c, is_max ? TTH_OP_GLOBAL_MAX_POOL2D : TTH_OP_GLOBAL_AVG_POOL2D, x, NULL);
    CHECK(y);
    if (r != 4) {
        int64_t s[TTH_MAX_RANK] = {tt(in[0])->shape[0], tt(in[0])->shape[1]};
        for (int i = 2; i < r; i++)
            s[i] = 1;
        CHECK(y = reshape(c, y, s, r));
    }
    out[0] = y;
    return 0;
}
static int op_global_avg_pool(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    return global_pool(c, in, nin, out, 0);
}
static int op_global_max_pool(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    return global_pool(c, in, nin, out, 1);
}

static int batch_norm_training(tth_onnx_ctx *c, tth_rexpr **in, tth_rexpr **out, size_t nout);

/* BatchNormalization (inference form): y = (x - mean) / sqrt(var + epsilon) * scale + B; with
 * training_mode=1 (opset 14 on) batch_norm_training. */
static int op_batch_norm(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(5);
    if (ai(c, "training_mode", 0)) {
        if (c->opset < 14)
            return tth__onnx_fail(c, TTH_EMODEL, "BatchNormalization of opset %lld has no training_mode (opset 14 on)",
                                  (long long)c->opset);
        return batch_norm_training(c, in, out, nout);
    }
    if (c->opset < 9 && !ai(c, "spatial", 1))
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: BatchNormalization spatial=0");
    for (size_t i = 1; i < nout; i++)
        if (c->node->output[i] && c->node->output[i][0])
            return tth__onnx_fail(c, TTH_EUNSUPPORTED,
                                  "unsupported attribute value: BatchNormalization training outputs (running mean/var)");
    CHECK(out[0] = call(c, TTH_OP_BATCH_NORM, in, 5, json_pack("{s:f}", "epsilon", af(c, "epsilon", 1e-5))));
    return 0;
}

/* Softmax/LogSoftmax: before opset 13 the input is flattened to 2-D at `axis` (default 1);
 * from 13 on it is one axis (default -1). */
static int softmax(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, tth_op op)
{
    NEED(1);
    int r = rank(in[0]);
    int64_t axis;
    if (norm_axis(c, ai(c, "axis", c->opset < 13 ? 1 : -1), r, &axis))
        return c->diag->code;
    if (c->opset >= 13 || axis == r - 1) {
        CHECK(out[0] = call1(c, op, in[0], json_pack("{s:I}", "axis", (json_int_t)axis)));
        return 0;
    }
    int64_t s[2] = {1, 1};
    for (int i = 0; i < r; i++)
        s[i < axis ? 0 : 1] *= tt(in[0])->shape[i];
    tth_rexpr *x = reshape(c, in[0], s, 2);
    CHECK(x);
    CHECK(x = call1(c, op, x, json_pack("{s:I}", "axis", (json_int_t)1)));
    CHECK(out[0] = reshape(c, x, tt(in[0])->shape, r));
    return 0;
}
static int op_softmax(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    return softmax(c, in, nin, out, TTH_OP_SOFTMAX);
}
static int op_log_softmax(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    return softmax(c, in, nin, out, TTH_OP_LOG_SOFTMAX);
}

/* ---------------------------------------------------------------- matrix products */

static int op_matmul(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(2);
    CHECK(out[0] = call2(c, TTH_OP_MATMUL, in[0], in[1], NULL));
    return 0;
}

/* Gemm: Y = alpha * A' B' + beta * C, A' = transA ? A^T : A, B' likewise; C broadcasts. */
static int op_gemm(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(2);
    tth_rexpr *a = in[0], *b = in[1];
    if (rank(a) != 2 || rank(b) != 2)
        return tth__onnx_fail(c, TTH_EMODEL, "Gemm needs 2-D A and B");
    int64_t perm[2] = {1, 0};
    if (ai(c, "transA", 0))
        CHECK(a = call1(c, TTH_OP_TRANSPOSE, a, json_pack("{s:o}", "axes", tth__json_ints(perm, 2))));
    if (ai(c, "transB", 0))
        CHECK(b = call1(c, TTH_OP_TRANSPOSE, b, json_pack("{s:o}", "axes", tth__json_ints(perm, 2))));
    tth_rexpr *y = call2(c, TTH_OP_MATMUL, a, b, NULL);
    CHECK(y);
    double alpha = af(c, "alpha", 1.0), beta = af(c, "beta", 1.0);
    if (alpha != 1.0) {
        tth_rexpr *k = k_scalar(c, tt(y)->dtype, alpha);
        CHECK(k);
        CHECK(y = call2(c, TTH_OP_MULTIPLY, y, k, NULL));
    }
    if (nin > 2 && in[2] && beta != 0.0) {
        tth_rexpr *cc = in[2];
        if (beta != 1.0) {
            tth_rexpr *k = k_scalar(c, tt(cc)->dtype, beta);
            CHECK(k);
            CHECK(cc = call2(c, TTH_OP_MULTIPLY, cc, k, NULL));
        }
        CHECK(y = call2(c, TTH_OP_ADD, y, cc, NULL));
    }
    out[0] = y;
    return 0;
}

/* ---------------------------------------------------------------- shapes */

/* Reshape: shape from the input (opset >= 5) or attribute; 0 copies the input dim unless
 * allowzero, -1 is inferred. */
static int op_reshape(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    int64_t s[MAXV];
    int n;
    if (nin > 1 && in[1])
        n = vints(c, in[1], "shape", s, MAXV);
    else
        n = aints(c, "shape", s, MAXV);
    if (n == -2)
        return c->diag->code;
    if (n < 0)
        return tth__onnx_fail(c, TTH_EMODEL, "Reshape without a shape");
    if (n > TTH_MAX_RANK)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "Reshape to rank %d (at most %d)", n, TTH_MAX_RANK);
    int allowzero = (int)ai(c, "allowzero", 0), infer = -1;
    int64_t known = 1, total = tth_ttype_numel(tt(in[0]));
    for (int i = 0; i < n; i++) {
        if (s[i] == 0 && !allowzero) {
            if (i >= rank(in[0]))
                return tth__onnx_fail(c, TTH_EMODEL, "Reshape copies dim %d the input does not have", i);
            s[i] = tt(in[0])->shape[i];
        }
        if (s[i] == -1) {
            if (infer >= 0)
                return tth__onnx_fail(c, TTH_EMODEL, "Reshape shape has more than one -1");
            infer = i;
        } else if (s[i] < 0) {
            return tth__onnx_fail(c, TTH_EMODEL, "Reshape shape has a negative dim %lld", (long long)s[i]);
        } else {
            if (s[i] > TTH_IMPORT_MAX_TENSOR || (s[i] && known > TTH_IMPORT_MAX_TENSOR / s[i]))
                return tth__onnx_fail(c, TTH_EMODEL, "Reshape shape too large");
            known *= s[i];
        }
    }
    if (infer >= 0) {
        if (known == 0 || total % known)
            return tth__onnx_fail(c, TTH_EMODEL, "Reshape cannot infer -1 (%lld elements into %lld)", (long long)total,
                                  (long long)known);
        s[infer] = total / known;
    } else if (known != total) {
        return tth__onnx_fail(c, TTH_EMODEL, "Reshape changes the element count (%lld to %lld)", (long long)total,
                              (long long)known);
    }
    CHECK(out[0] = reshape(c, in[0], s, n));
    return 0;
}

static int op_flatten(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    int r = rank(in[0]);
    int64_t axis = ai(c, "axis", 1);
    if (axis < -r || axis > r)
        return tth__onnx_fail(c, TTH_EMODEL, "Flatten axis %lld out of range", (long long)axis);
    if (axis < 0)
        axis += r;
    int64_t s[2] = {1, 1};
    for (int i = 0; i < r; i++)
        s[i < axis ? 0 : 1] *= tt(in[0])->shape[i];
    CHECK(out[0] = reshape(c, in[0], s, 2));
    return 0;
}

static int op_transpose(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    int r = rank(in[0]);
    int64_t p[TTH_MAX_RANK];
    int n = aints(c, "perm", p, TTH_MAX_RANK);
    if (n == -2)
        return c->diag->code;
    if (n < 0) {
        n = r;
        for (int i = 0; i < r; i++)
            p[i] = r - 1 - i;
    }
    if (n != r)
        return tth__onnx_fail(c, TTH_EMODEL, "Transpose perm has %d values for rank %d", n, r);
    CHECK(out[0] = call1(c, TTH_OP_TRANSPOSE, in[0], json_pack("{s:o}", "axes", tth__json_ints(p, n))));
    return 0;
}

/* Axes from the attribute (before opset 13 / 18) or the optional second input. */
static int axes_of(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, int64_t *ax, int max)
{
    if (nin > 1 && in[1])
        return vints(c, in[1], "axes", ax, max);
    return aints(c, "axes", ax, max);
}

static int op_squeeze(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    int r = rank(in[0]);
    int64_t ax[MAXV], s[TTH_MAX_RANK];
    int na = axes_of(c, in, nin, ax, MAXV), drop[TTH_MAX_RANK] = {0}, n = 0;
    if (na == -2)
        return c->diag->code;
    for (int i = 0; i < na; i++) {
        int64_t a;
        if (norm_axis(c, ax[i], r, &a))
            return c->diag->code;
        if (tt(in[0])->shape[a] != 1)
            return tth__onnx_fail(c, TTH_EMODEL, "Squeeze axis %lld has size %lld", (long long)a,
                                  (long long)tt(in[0])->shape[a]);
        drop[a] = 1;
    }
    for (int i = 0; i < r; i++)
        if (!(na > 0 ? drop[i] : tt(in[0])->shape[i] == 1))
            s[n++] = tt(in[0])->shape[i];
    CHECK(out[0] = reshape(c, in[0], s, n));
    return 0;
}

static int op_unsqueeze(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    int r = rank(in[0]);
    int64_t ax[MAXV], s[TTH_MAX_RANK];
    int na = axes_of(c, in, nin, ax, MAXV), ins[TTH_MAX_RANK] = {0};
    if (na == -2)
        return c->diag->code;
    if (na < 0)
        return tth__onnx_fail(c, TTH_EMODEL, "Unsqueeze without axes");
    int orank = r + na;
    if (orank > TTH_MAX_RANK)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "Unsqueeze to rank %d (at most %d)", orank, TTH_MAX_RANK);
    for (int i = 0; i < na; i++) {
        int64_t a;
        if (norm_axis(c, ax[i], orank, &a))
            return c->diag->code;
        if (ins[a])
            return tth__onnx_fail(c, TTH_EMODEL, "Unsqueeze repeats axis %lld", (long long)a);
        ins[a] = 1;
    }
    for (int i = 0, j = 0; i < orank; i++)
        s[i] = ins[i] ? 1 : tt(in[0])->shape[j++];
    CHECK(out[0] = reshape(c, in[0], s, orank));
    return 0;
}

static int op_concat(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    tth_rexpr *args[64];
    size_t n = 0;
    for (size_t i = 0; i < nin; i++)
        if (in[i])
            args[n++] = in[i];
    int64_t axis;
    if (!attr(c, "axis") && c->opset >= 4)
        return tth__onnx_fail(c, TTH_EMODEL, "Concat without axis");
    if (norm_axis(c, ai(c, "axis", 1), rank(args[0]), &axis))
        return c->diag->code;
    if (n == 1) {
        out[0] = args[0];
        return 0;
    }
    CHECK(out[0] = call(c, TTH_OP_CONCATENATE, args, n, json_pack("{s:I}", "axis", (json_int_t)axis)));
    return 0;
}

/* Split: sizes from the attribute (< 13) or input (>= 13), else equal parts (num_outputs or
 * the number of outputs; a smaller last part when uneven). */
static int op_split(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    int64_t axis, sz[MAXV];
    if (norm_axis(c, ai(c, "axis", 0), rank(in[0]), &axis))
        return c->diag->code;
    int64_t d = tt(in[0])->shape[axis];
    int n = (nin > 1 && in[1]) ? vints(c, in[1], "split", sz, MAXV) : aints(c, "split", sz, MAXV);
    if (n == -2)
        return c->diag->code;
    if (nout == 0 || nout > MAXV)
        return tth__onnx_fail(c, TTH_EMODEL, "Split with %zu outputs", nout);
    if (n < 0) {
        int64_t parts = ai(c, "num_outputs", (int64_t)nout);
        if (parts != (int64_t)nout)
            return tth__onnx_fail(c, TTH_EMODEL, "Split num_outputs differs from its outputs");
        int64_t each = (d + parts - 1) / parts;
        for (int64_t i = 0; i < parts; i++) {
            int64_t rest = d - i * each;
            sz[i] = rest < 0 ? 0 : rest < each ? rest : each;
        }
        if (d % parts && attr(c, "num_outputs") == NULL)
            return tth__onnx_fail(c, TTH_EMODEL, "Split of %lld into %lld equal parts", (long long)d, (long long)parts);
        n = (int)parts;
    }
    int64_t sum = 0;
    for (int i = 0; i < n; i++) {
        if (sz[i] < 0 || sz[i] > d)
            return tth__onnx_fail(c, TTH_EMODEL, "Split size %lld is out of range", (long long)sz[i]);
        sum += sz[i];
    }
    if ((size_t)n != nout || sum != d)
        return tth__onnx_fail(c, TTH_EMODEL, "Split sizes do not match the outputs or the dimension");
    tth_rexpr *t = call1(c, TTH_OP_SPLIT, in[0],
                         json_pack("{s:I,s:o}", "axis", (json_int_t)axis, "sizes", tth__json_ints(sz, n)));
    CHECK(t);
    for (size_t i = 0; i < nout; i++) {
        tth_rexpr *g = tth_relay_tuple_get(c->m, t, (int32_t)i, c->diag);
        CHECK(g);
        CHECK(out[i] = tth__fold_call(c->m, g, TTH_IMPORT_FOLD_ELEMS, c->diag));
    }
    return 0;
}

/* Slice: starts/ends/axes/steps (attributes before opset 10, inputs after), clamped per ONNX. */
static int op_slice(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    int r = rank(in[0]);
    int64_t st[MAXV], en[MAXV], ax[MAXV], sp[MAXV];
    int ns, ne, na, nsp = -1;
    if (c->opset < 10) {
        ns = aints(c, "starts", st, MAXV);
        ne = aints(c, "ends", en, MAXV);
        na = aints(c, "axes", ax, MAXV);
    } else {
        if (nin < 3 || !in[1] || !in[2])
            return tth__onnx_fail(c, TTH_EMODEL, "Slice needs starts and ends");
        ns = vints(c, in[1], "starts", st, MAXV);
        ne = ns < -1 ? -2 : vints(c, in[2], "ends", en, MAXV);
        na = ne < -1 ? -2 : (nin > 3 && in[3]) ? vints(c, in[3], "axes", ax, MAXV) : -1;
        nsp = na < -1 ? -2 : (nin > 4 && in[4]) ? vints(c, in[4], "steps", sp, MAXV) : -1;
    }
    if (ns == -2 || ne == -2 || na == -2 || nsp == -2)
        return c->diag->code;
    if (ns < 0 || ne != ns || (na >= 0 && na != ns) || (nsp >= 0 && nsp != ns))
        return tth__onnx_fail(c, TTH_EMODEL, "Slice starts/ends/axes/steps lengths differ");
    int64_t b[TTH_MAX_RANK], e[TTH_MAX_RANK], s[TTH_MAX_RANK];
    int seen[TTH_MAX_RANK] = {0};
    for (int i = 0; i < r; i++) {
        b[i] = 0;
        e[i] = tt(in[0])->shape[i];
        s[i] = 1;
    }
    for (int i = 0; i < ns; i++) {
        int64_t a;
        if (norm_axis(c, na >= 0 ? ax[i] : i, r, &a))
            return c->diag->code;
        if (seen[a])
            return tth__onnx_fail(c, TTH_EMODEL, "Slice repeats axis %lld", (long long)a);
        seen[a] = 1;
        int64_t dim = tt(in[0])->shape[a], step = nsp >= 0 ? sp[i] : 1, lo = st[i], hi = en[i];
        if (step == 0)
            return tth__onnx_fail(c, TTH_EMODEL, "Slice step is 0");
        if (lo < 0)
            lo = lo < -dim ? 0 : lo + dim;
        if (hi < 0)
            hi = hi < -dim ? -1 : hi + dim;
        if (step > 0) {
            lo = lo > dim ? dim : lo;
            hi = hi < 0 ? 0 : hi > dim ? dim : hi;
        } else {
            lo = lo > dim - 1 ? dim - 1 : lo;
            hi = hi > dim - 1 ? dim - 1 : hi;
            if (st[i] < -dim)
                lo = -1;
        }
        b[a] = lo;
        e[a] = hi;
        s[a] = step;
        /* an empty range keeps begin in bounds for the normalized form */
        if ((step > 0 && hi <= lo) || (step < 0 && hi >= lo)) {
            b[a] = 0;
            e[a] = 0;
            s[a] = 1;
        }
    }
    CHECK(out[0] = call1(c, TTH_OP_STRIDED_SLICE, in[0],
                         json_pack("{s:o,s:o,s:o}", "begin", tth__json_ints(b, r), "end", tth__json_ints(e, r),
                                   "strides", tth__json_ints(s, r))));
    return 0;
}

static int op_gather(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(2);
    int64_t axis;
    if (norm_axis(c, ai(c, "axis", 0), rank(in[0]), &axis))
        return c->diag->code;
    CHECK(out[0] = call2(c, TTH_OP_TAKE, in[0], in[1], json_pack("{s:I}", "axis", (json_int_t)axis)));
    return 0;
}

/* idx + dims where idx < 0 (dims broadcast against idx): ONNX's negative indices. */
static tth_rexpr *wrap_negative(tth_onnx_ctx *c, tth_rexpr *idx, tth_rexpr *dims)
{
    tth_rexpr *z = k_scalar(c, TTH_I64, 0);
    tth_rexpr *neg = z && dims ? call2(c, TTH_OP_LESS, idx, z, NULL) : NULL;
    tth_rexpr *plus = neg ? call2(c, TTH_OP_ADD, idx, dims, NULL) : NULL;
    if (!plus)
        return NULL;
    tth_rexpr *wa[3] = {neg, plus, idx};
    return call(c, TTH_OP_WHERE, wa, 3, NULL);
}

/* GatherElements as a gather from the flattened data: out[i] = data[i with i_axis replaced by
 * index[i]]. The flat offset of every output element but the axis' part is a constant of the
 * static shapes (a grid computed here); the index, wrapped when negative, adds index * stride.
 * docs/operators.md "Composed in the importer". */
static tth_rexpr *gather_elements(tth_onnx_ctx *c, tth_rexpr *data, tth_rexpr *index, int64_t axis)
{
    int r = rank(data);
    const tth_ttype *dt = tt(data), *it = tt(index);
    if (rank(index) != r || r < 1) {
        tth__onnx_fail(c, TTH_EMODEL, "GatherElements' indices have rank %d; the data %d", rank(index), r);
        return NULL;
    }
    int64_t st[TTH_MAX_RANK];
    for (int k = r - 1, acc = 1; k >= 0; k--) {
        st[k] = acc;
        acc *= dt->shape[k];
        if (k != axis && it->shape[k] > dt->shape[k]) {
            tth__onnx_fail(c, TTH_EMODEL, "GatherElements' indices are %lld long in axis %d; the data %lld",
                           (long long)it->shape[k], k, (long long)dt->shape[k]);
            return NULL;
        }
    }
    tth_ttype gt = {.dtype = TTH_I64, .rank = r};
    memcpy(gt.shape, it->shape, sizeof gt.shape);
    tth_tensor *grid = tth_tensor_new(&gt, NULL);
    int64_t n = tth_ttype_numel(&gt);
    for (int64_t i = 0; grid && i < n; i++) {
        int64_t rest = i, off = 0;
        for (int k = r - 1; k >= 0; k--) {
            int64_t ik = rest % it->shape[k];
            rest /= it->shape[k];
            if (k != axis)
                off += ik * st[k];
        }
        ((int64_t *)grid->data)[i] = off;
    }
    tth_rexpr *base = k_tensor(c, grid), *idx = cast_to(c, index, TTH_I64);
    tth_rexpr *dim = k_scalar(c, TTH_I64, (double)dt->shape[axis]), *stride = k_scalar(c, TTH_I64, (double)st[axis]);
    if (!base || !idx || !dim || !stride)
        return NULL;
    tth_rexpr *wrapped = wrap_negative(c, idx, dim);
    tth_rexpr *scaled = wrapped ? call2(c, TTH_OP_MULTIPLY, wrapped, stride, NULL) : NULL;
    tth_rexpr *flat = scaled ? call2(c, TTH_OP_ADD, base, scaled, NULL) : NULL;
    int64_t all = tth_ttype_numel(dt);
    tth_rexpr *d1 = flat ? reshape(c, data, &all, 1) : NULL;
    return d1 ? call2(c, TTH_OP_TAKE, d1, flat, json_pack("{s:i}", "axis", 0)) : NULL;
}

static int op_gather_elements(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(2);
    int64_t axis;
    if (norm_axis(c, ai(c, "axis", 0), rank(in[0]), &axis))
        return c->diag->code;
    CHECK(out[0] = gather_elements(c, in[0], in[1], axis));
    return 0;
}

/* The negative log-likelihood of `logp` ([N, C, d...]) at `target` ([N, d...]) with optional
 * class weights and ignore_index, reduced as ONNX says: none; sum; mean, which divides by the
 * sum of the weights that applied (the count of the targets not ignored without weights).
 * Composed of gather_elements, take, where and reductions (docs/operators.md). */
static int nll_loss(tth_onnx_ctx *c, tth_rexpr *logp, tth_rexpr *target, tth_rexpr *weight, tth_rexpr **out)
{
    const char *red = as(c, "reduction", "mean");
    if (strcmp(red, "none") && strcmp(red, "sum") && strcmp(red, "mean"))
        return tth__onnx_fail(c, TTH_EMODEL, "reduction '%s' is not none, sum or mean", red);
    int r = rank(logp);
    if (r < 2 || rank(target) != r - 1)
        return tth__onnx_fail(c, TTH_EMODEL, "the scores are [N, C, ...] (rank %d) and the target [N, ...] (rank %d)",
                              r, rank(target));
    tth_dtype fdt = tt(logp)->dtype;
    tth_rexpr *t = cast_to(c, target, TTH_I64), *eq = NULL;
    CHECK(t);
    const Onnx__AttributeProto *ig = attr(c, "ignore_index");
    if (ig && ig->has_i) {
        tth_rexpr *k = k_scalar(c, TTH_I64, (double)ig->i), *z = k_scalar(c, TTH_I64, 0);
        CHECK(k && z);
        CHECK(eq = call2(c, TTH_OP_EQUAL, t, k, NULL));
        tth_rexpr *wa[3] = {eq, z, t};
        CHECK(t = call(c, TTH_OP_WHERE, wa, 3, NULL)); /* an ignored target reads class 0, weighted 0 */
    }
    int64_t us[TTH_MAX_RANK];
    for (int i = 0, j = 0; i < r; i++)
        us[i] = i == 1 ? 1 : tt(t)->shape[j++];
    tth_rexpr *t1, *g, *loss;
    CHECK(t1 = reshape(c, t, us, r));
    CHECK(g = gather_elements(c, logp, t1, 1));
    CHECK(g = reshape(c, g, tt(t)->shape, r - 1));
    CHECK(loss = call1(c, TTH_OP_NEGATIVE, g, NULL));
    tth_rexpr *w = NULL;
    if (weight)
        CHECK(w = call2(c, TTH_OP_TAKE, weight, t, json_pack("{s:i}", "axis", 0)));
    if (eq) {
        tth_rexpr *zero = k_scalar(c, fdt, 0), *one = k_scalar(c, fdt, 1);
        CHECK(zero && one);
        tth_rexpr *wa[3] = {eq, zero, w ? w : one};
        CHECK(w = call(c, TTH_OP_WHERE, wa, 3, NULL));
    }
    if (w)
        CHECK(loss = call2(c, TTH_OP_MULTIPLY, loss, w, NULL));
    if (!strcmp(red, "none")) {
        out[0] = loss;
        return 0;
    }
    int64_t ax[TTH_MAX_RANK];
    for (int i = 0; i < r - 1; i++)
        ax[i] = i;
    json_t *all = tth__json_ints(ax, r - 1);
    tth_rexpr *sum;
    CHECK(sum = call1(c, TTH_OP_SUM, loss, json_pack("{s:O,s:b}", "axis", all, "keepdims", 0)));
    if (!strcmp(red, "sum")) {
        json_decref(all);
        out[0] = sum;
        return 0;
    }
    if (!w) {
        json_decref(all);
        CHECK(out[0] = call1(c, TTH_OP_MEAN, loss, json_pack("{s:o,s:b}", "axis", tth__json_ints(ax, r - 1),
                                                                 "keepdims", 0)));
        return 0;
    }
    tth_rexpr *wsum;
    CHECK(wsum = call1(c, TTH_OP_SUM, w, json_pack("{s:o,s:b}", "axis", all, "keepdims", 0)));
    CHECK(out[0] = call2(c, TTH_OP_DIVIDE, sum, wsum, NULL));
    return 0;
}

/* NegativeLogLikelihoodLoss(input, target[, weight]). */
static int op_nll_loss(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(2);
    return nll_loss(c, in[0], in[1], nin > 2 ? in[2] : NULL, out);
}

/* SoftmaxCrossEntropyLoss(scores, labels[, weights]): the negative log-likelihood of
 * log_softmax over the class axis 1; the optional second output is that log_softmax. */
static int op_softmax_ce_loss(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(2);
    if (rank(in[0]) < 2)
        return tth__onnx_fail(c, TTH_EMODEL, "the scores are [N, C, ...]: rank %d", rank(in[0]));
    tth_rexpr *logp;
    CHECK(logp = call1(c, TTH_OP_LOG_SOFTMAX, in[0], json_pack("{s:i}", "axis", 1)));
    if (nout > 1)
        out[1] = logp;
    return nll_loss(c, logp, in[1], nin > 2 ? in[2] : NULL, out);
}

/* Compress(x, condition[, axis]) with a constant condition: a take of the positions where it is
 * true (of the flattened input without an axis). */
static int op_compress(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(2);
    if (in[1]->kind != TTH_REXPR_CONST)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "input 'condition' is not a constant (the result's shape would "
                              "depend on it)");
    const tth_tensor *cond = in[1]->u.constant.value;
    tth_rexpr *x = in[0];
    int64_t axis = 0;
    if (attr(c, "axis")) {
        if (norm_axis(c, ai(c, "axis", 0), rank(x), &axis))
            return c->diag->code;
    } else {
        int64_t n = tth_ttype_numel(tt(x));
        CHECK(x = reshape(c, x, &n, 1));
    }
    int64_t len = tt(x)->shape[axis], nc = tth_ttype_numel(&cond->type), k = 0;
    int64_t *pos = malloc((size_t)(len + 1) * sizeof *pos);
    if (!pos)
        return tth__onnx_fail(c, TTH_ENOMEM, "out of memory");
    for (int64_t i = 0; i < nc && i < len; i++)
        if (tth_tensor_get_f64(cond, i) != 0)
            pos[k++] = i;
    tth_rexpr *kp = k_i64(c, pos, k);
    free(pos);
    CHECK(kp);
    CHECK(out[0] = call2(c, TTH_OP_TAKE, x, kp, json_pack("{s:I}", "axis", (json_int_t)axis)));
    return 0;
}

/* ReverseSequence(x, sequence_lens) with constant lengths: a take from the flattened input at a
 * constant index grid (the first len steps of each batch entry reversed, the rest kept). */
static int op_reverse_sequence(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(2);
    int64_t ba = ai(c, "batch_axis", 1), ta = ai(c, "time_axis", 0);
    const tth_ttype *xt = tt(in[0]);
    int r = xt->rank;
    if (r < 2 || ba < 0 || ta < 0 || ba >= r || ta >= r || ba == ta || (ba > 1 || ta > 1))
        return tth__onnx_fail(c, TTH_EMODEL, "ReverseSequence batch_axis %lld and time_axis %lld (0 and 1)",
                              (long long)ba, (long long)ta);
    int64_t B = xt->shape[ba], T = xt->shape[ta], lens[4096];
    if (B > 4096)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "ReverseSequence over a batch of %lld (at most 4096)", (long long)B);
    int n = vints(c, in[1], "sequence_lens", lens, 4096);
    if (n < 0)
        return c->diag->code;
    if (n != B)
        return tth__onnx_fail(c, TTH_EMODEL, "ReverseSequence has %d lengths for a batch of %lld", n, (long long)B);
    int64_t inner = 1, N = tth_ttype_numel(xt);
    for (int k = 2; k < r; k++)
        inner *= xt->shape[k];
    tth_ttype gt = *xt;
    gt.dtype = TTH_I64;
    tth_tensor *grid = tth_tensor_new(&gt, NULL);
    for (int64_t i = 0; grid && i < N; i++) {
        int64_t rest = i % inner, outer = i / inner;
        int64_t a0 = outer / xt->shape[1], a1 = outer % xt->shape[1];
        int64_t b = ba == 0 ? a0 : a1, t = ba == 0 ? a1 : a0;
        int64_t len = lens[b] < 0 ? 0 : lens[b] > T ? T : lens[b];
        int64_t src = t < len ? len - 1 - t : t;
        int64_t s0 = ba == 0 ? b : src, s1 = ba == 0 ? src : b;
        ((int64_t *)grid->data)[i] = (s0 * xt->shape[1] + s1) * inner + rest;
    }
    tth_rexpr *kg, *flat;
    CHECK(kg = k_tensor(c, grid));
    CHECK(flat = reshape(c, in[0], &N, 1));
    CHECK(out[0] = call2(c, TTH_OP_TAKE, flat, kg, json_pack("{s:i}", "axis", 0)));
    return 0;
}

/* MaxUnpool(x, indices[, output_shape]): zeros of the output's shape with x's values at the
 * (whole-tensor, flattened) indices MaxPool gave: a scatter. */
static int scatter_flat(tth_onnx_ctx *c, tth_rexpr *data2, tth_rexpr *pos, tth_rexpr *upd2, const char *red,
                        tth_rexpr **out);
static int op_max_unpool(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(2);
    const tth_ttype *xt = tt(in[0]);
    int r = xt->rank, nsp = r - 2;
    int64_t ks[MAXV], st[MAXV], pads[2 * MAXV], os[TTH_MAX_RANK];
    if (r < 3 || aints(c, "kernel_shape", ks, MAXV) != nsp)
        return tth__onnx_fail(c, TTH_EMODEL, "MaxUnpool needs a kernel_shape of %d values", nsp);
    for (int i = 0; i < nsp; i++) {
        st[i] = 1;
        pads[i] = pads[i + nsp] = 0;
    }
    if (aints(c, "strides", st, MAXV) < -1 || aints(c, "pads", pads, 2 * MAXV) < -1)
        return c->diag->code;
    /* the indices address the unpooled shape MaxPool saw (the default); a larger output_shape
     * keeps each value at its coordinates, zeros after */
    int64_t ds[TTH_MAX_RANK];
    ds[0] = xt->shape[0];
    ds[1] = xt->shape[1];
    for (int i = 0; i < nsp; i++)
        ds[2 + i] = (xt->shape[2 + i] - 1) * st[i] + ks[i] - pads[i] - pads[i + nsp];
    memcpy(os, ds, sizeof(int64_t) * (size_t)r);
    if (nin > 2 && in[2]) {
        if (vints(c, in[2], "output_shape", os, TTH_MAX_RANK) != r)
            return c->diag->code ? c->diag->code : tth__onnx_fail(c, TTH_EMODEL, "MaxUnpool output_shape rank");
        for (int i = 0; i < r; i++)
            if (os[i] < ds[i] || (i < 2 && os[i] != ds[i]))
                return tth__onnx_fail(c, TTH_EMODEL, "MaxUnpool output_shape dimension %d (%lld) below %lld", i,
                                      (long long)os[i], (long long)ds[i]);
    }
    tth_ttype ot = {.dtype = xt->dtype, .rank = r};
    memcpy(ot.shape, os, sizeof(int64_t) * (size_t)r);
    int64_t N = tth_ttype_numel(&ot), K = tth_ttype_numel(xt), k1[2] = {K, 1};
    tth_rexpr *zeros, *pos, *u2, *o;
    CHECK(zeros = k_tensor(c, tth_tensor_new(&(tth_ttype){.dtype = xt->dtype, .rank = 2, .shape = {N, 1}}, NULL)));
    CHECK(pos = reshape(c, cast_to(c, in[1], TTH_I64), &K, 1));
    if (memcmp(os, ds, sizeof(int64_t) * (size_t)r)) { /* default flat index -> output flat index */
        tth_ttype mt = {.dtype = TTH_I64, .rank = 1};
        mt.shape[0] = 1;
        for (int i = 0; i < r; i++)
            mt.shape[0] *= ds[i];
        tth_tensor *map = tth_tensor_new(&mt, NULL);
        for (int64_t f = 0; map && f < mt.shape[0]; f++) {
            int64_t rest = f, o2 = 0, scale = 1;
            for (int i = r - 1; i >= 0; i--) {
                o2 += (rest % ds[i]) * scale;
                rest /= ds[i];
                scale *= os[i];
            }
            ((int64_t *)map->data)[f] = o2;
        }
        tth_rexpr *km;
        CHECK(km = k_tensor(c, map));
        CHECK(pos = call2(c, TTH_OP_TAKE, km, pos, json_pack("{s:i}", "axis", 0)));
    }
    CHECK(u2 = reshape(c, in[0], k1, 2));
    int rc = scatter_flat(c, zeros, pos, u2, "none", &o);
    if (rc)
        return rc;
    CHECK(out[0] = reshape(c, o, os, r));
    return 0;
}

/* Einsum with one or two operands: each operand's repeated labels become a diagonal (a product
 * with an identity mask summed over the repeat), both operands are laid out over one label
 * order (the output's labels, then the summed ones) with size-1 axes for labels they lack,
 * multiplied with broadcasting, and summed over the labels the output lacks. The product holds
 * every label's extent at once: bounded at 2^24 elements. "..." takes the unnamed dimensions. */
#define EINSUM_MAX_ELEMS ((int64_t)1 << 24)

static int op_einsum(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    const char *eq = as(c, "equation", "");
    char eqn[256], terms[3][64], outl[64];
    size_t k = 0;
    for (const char *p = eq; *p && k < sizeof eqn - 1; p++)
        if (*p != ' ')
            eqn[k++] = *p;
    eqn[k] = 0;
    char *arrow = strstr(eqn, "->");
    if (arrow)
        *arrow = 0;
    int nt = 0;
    for (char *t = eqn, *comma; t && nt < 3; t = comma ? comma + 1 : NULL, nt++) {
        comma = strchr(t, ',');
        if (comma)
            *comma = 0;
        size_t tl = strlen(t);
        if (tl >= sizeof terms[nt])
            return tth__onnx_fail(c, TTH_EMODEL, "Einsum term '%s' is too long", t);
        memcpy(terms[nt], t, tl + 1);
    }
    if (nt < 1 || nt > 2 || (size_t)nt != nin)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "Einsum '%s' with %d operands (one or two are supported)", eq, nt);
    /* "..." becomes the digits 0-9, one per unnamed dimension (not labels ONNX allows) */
    int nell = 0;
    char lab[2][TTH_MAX_RANK + 1];
    for (int i = 0; i < nt; i++) {
        char *dots = strstr(terms[i], "...");
        int named = (int)strlen(terms[i]) - (dots ? 3 : 0);
        int e = dots ? rank(in[i]) - named : 0;
        if (e < 0 || named + e != rank(in[i]) || rank(in[i]) > TTH_MAX_RANK)
            return tth__onnx_fail(c, TTH_EMODEL, "Einsum term '%s' does not fit an operand of rank %d", terms[i],
                                  rank(in[i]));
        if (e > nell)
            nell = e;
        int n = 0;
        for (const char *p = terms[i]; *p;) {
            if (!strncmp(p, "...", 3)) {
                for (int j = 0; j < e; j++)
                    lab[i][n++] = (char)('0' + (nell - e) + j);
                p += 3;
            } else {
                if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')))
                    return tth__onnx_fail(c, TTH_EMODEL, "Einsum label '%c' in '%s'", *p, eq);
                lab[i][n++] = *p++;
            }
        }
        lab[i][n] = 0;
    }
    int no = 0;
    if (arrow) {
        for (const char *p = arrow + 2; *p;) {
            if (no + nell > TTH_MAX_RANK)
                return tth__onnx_fail(c, TTH_EUNSUPPORTED, "Einsum '%s' has more than %d output labels", eq,
                                      TTH_MAX_RANK);
            if (!strncmp(p, "...", 3)) {
                for (int j = 0; j < nell; j++)
                    outl[no++] = (char)('0' + j);
                p += 3;
            } else {
                if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')))
                    return tth__onnx_fail(c, TTH_EMODEL, "Einsum output label '%c' in '%s'", *p, eq);
                outl[no++] = *p++;
            }
        }
    } else { /* the ellipsis, then the labels seen once, alphabetically */
        for (int j = 0; j < nell; j++)
            outl[no++] = (char)('0' + j);
        for (int ch = 'A'; ch <= 'z'; ch++) {
            int seen = 0;
            for (int i = 0; i < nt; i++)
                for (const char *p = lab[i]; *p; p++)
                    seen += *p == ch;
            if (seen == 1 && no < TTH_MAX_RANK)
                outl[no++] = (char)ch;
        }
    }
    outl[no] = 0;
    /* every label's extent */
    int64_t ext[256] = {0};
    for (int i = 0; i < nt; i++)
        for (int j = 0; lab[i][j]; j++) {
            int64_t d = tt(in[i])->shape[j];
            unsigned char ch = (unsigned char)lab[i][j];
            if (ext[ch] && ext[ch] != d && d != 1 && ext[ch] != 1)
                return tth__onnx_fail(c, TTH_EMODEL, "Einsum label '%c' has extents %lld and %lld", ch,
                                      (long long)ext[ch], (long long)d);
            if (d > ext[ch])
                ext[ch] = d;
        }
    /* the label order: the output's, then those summed */
    char uni[2 * TTH_MAX_RANK + 1];
    int nu = 0;
    for (int j = 0; j < no; j++) {
        if (!ext[(unsigned char)outl[j]])
            return tth__onnx_fail(c, TTH_EMODEL, "Einsum output label '%c' is in no operand", outl[j]);
        uni[nu++] = outl[j];
    }
    for (int i = 0; i < nt; i++)
        for (int j = 0; lab[i][j]; j++)
            if (!memchr(uni, lab[i][j], (size_t)nu))
                uni[nu++] = lab[i][j];
    if (nu > TTH_MAX_RANK)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "Einsum '%s' has %d labels (at most %d)", eq, nu, TTH_MAX_RANK);
    int64_t work = 1;
    for (int j = 0; j < nu; j++)
        work *= ext[(unsigned char)uni[j]];
    if (work > EINSUM_MAX_ELEMS)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "Einsum '%s' multiplies %lld elements at once (at most 2^24)", eq,
                              (long long)work);
    tth_rexpr *acc = NULL;
    for (int i = 0; i < nt; i++) {
        tth_rexpr *x = in[i];
        char l[TTH_MAX_RANK + 1];
        memcpy(l, lab[i], sizeof l);
        /* a repeated label: keep the diagonal */
        for (int a = 0; l[a]; a++)
            for (int b = a + 1; l[b];) {
                if (l[b] != l[a]) {
                    b++;
                    continue;
                }
                int r = rank(x);
                int64_t d = tt(x)->shape[a];
                tth_ttype mt = {.dtype = tt(x)->dtype, .rank = r};
                for (int q = 0; q < r; q++)
                    mt.shape[q] = q == a || q == b ? d : 1;
                tth_tensor *eye = tth_tensor_new(&mt, NULL);
                int64_t sb = 1;
                for (int q = r - 1; q > b; q--)
                    sb *= mt.shape[q];
                int64_t sa = sb * d;
                for (int q = b - 1; q > a; q--)
                    sa *= mt.shape[q];
                for (int64_t v = 0; eye && v < d; v++)
                    tth__st_f64(eye, v * sa + v * sb, 1);
                tth_rexpr *ke;
                int64_t bb = b;
                CHECK(ke = k_tensor(c, eye));
                CHECK(x = call2(c, TTH_OP_MULTIPLY, x, ke, NULL));
                CHECK(x = call1(c, TTH_OP_SUM, x, json_pack("{s:o,s:b}", "axis", tth__json_ints(&bb, 1), "keepdims",
                                                            0)));
                memmove(l + b, l + b + 1, strlen(l + b));
            }
        /* lay it out over the label order */
        int64_t perm[TTH_MAX_RANK], shape[TTH_MAX_RANK];
        int np = 0;
        for (int u = 0; u < nu; u++) {
            const char *at = strchr(l, uni[u]);
            shape[u] = at ? tt(x)->shape[at - l] : 1;
            if (at)
                perm[np++] = at - l;
        }
        int ident = 1;
        for (int q = 0; q < np; q++)
            ident &= perm[q] == q;
        if (!ident)
            CHECK(x = call1(c, TTH_OP_TRANSPOSE, x, json_pack("{s:o}", "axes", tth__json_ints(perm, np))));
        CHECK(x = reshape(c, x, shape, nu));
        acc = acc ? call2(c, TTH_OP_MULTIPLY, acc, x, NULL) : x;
        CHECK(acc);
    }
    if (nu > no) {
        int64_t ax[TTH_MAX_RANK];
        for (int u = no; u < nu; u++)
            ax[u - no] = u;
        CHECK(acc = call1(c, TTH_OP_SUM, acc, json_pack("{s:o,s:b}", "axis", tth__json_ints(ax, nu - no), "keepdims",
                                                        0)));
    }
    out[0] = acc;
    return 0;
}

/* TopK(x, k): each element's rank along the axis is the count of elements before it in the
 * order (larger first, or smaller with largest=0; equal ones by index), and output position p
 * takes the element of rank p (values and int64 indices). O(L^2) per row: axes up to 4096. */
static int op_topk(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    int64_t k;
    if (c->opset < 10) {
        k = ai(c, "k", -1);
    } else {
        int64_t kv[1];
        if (nin < 2 || !in[1])
            return tth__onnx_fail(c, TTH_EMODEL, "TopK needs k");
        if (vints(c, in[1], "k", kv, 1) != 1)
            return c->diag->code ? c->diag->code : tth__onnx_fail(c, TTH_EMODEL, "TopK's k holds one value");
        k = kv[0];
    }
    int r = rank(in[0]);
    int64_t axis;
    if (norm_axis(c, ai(c, "axis", -1), r, &axis))
        return c->diag->code;
    const tth_ttype *xt = tt(in[0]);
    int64_t L = xt->shape[axis];
    if (k < 0 || k > L)
        return tth__onnx_fail(c, TTH_EMODEL, "TopK k = %lld for an axis of %lld", (long long)k, (long long)L);
    if (L > 4096 || r + 1 > TTH_MAX_RANK)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "TopK over an axis of %lld (at most 4096) or rank %d", (long long)L,
                              r);
    int largest = (int)ai(c, "largest", 1);
    int64_t si[TTH_MAX_RANK], sj[TTH_MAX_RANK];
    for (int q = 0; q <= r; q++) {
        si[q] = q < axis ? xt->shape[q] : q == axis ? L : q == axis + 1 ? 1 : xt->shape[q - 1];
        sj[q] = q < axis ? xt->shape[q] : q == axis ? 1 : xt->shape[q - 1];
    }
    /* before[i][j]: element j comes before element i */
    tth_ttype bt = {.dtype = TTH_BOOL, .rank = r + 1 - (int32_t)axis};
    for (int q = 0; q < bt.rank; q++)
        bt.shape[q] = q < 2 ? L : 1;
    tth_tensor *lower = tth_tensor_new(&bt, NULL);
    for (int64_t i = 0; lower && i < L; i++)
        for (int64_t j = 0; j < L; j++)
            ((uint8_t *)lower->data)[i * L + j] = j < i;
    tth_rexpr *xi, *xj, *beats, *ties, *kl, *before, *rankv;
    CHECK(xi = reshape(c, in[0], si, r + 1));
    CHECK(xj = reshape(c, in[0], sj, r + 1));
    CHECK(beats = call2(c, largest ? TTH_OP_GREATER : TTH_OP_LESS, xj, xi, NULL));
    CHECK(ties = call2(c, TTH_OP_EQUAL, xj, xi, NULL));
    CHECK(kl = k_tensor(c, lower));
    CHECK(ties = call2(c, TTH_OP_LOGICAL_AND, ties, kl, NULL));
    CHECK(before = call2(c, TTH_OP_LOGICAL_OR, beats, ties, NULL));
    int64_t aj = axis + 1;
    CHECK(rankv = call1(c, TTH_OP_SUM, cast_to(c, before, TTH_I64),
                        json_pack("{s:o,s:b}", "axis", tth__json_ints(&aj, 1), "keepdims", 1))); /* si */
    /* position p takes the element whose rank is p */
    tth_ttype pt = {.dtype = TTH_I64, .rank = r + 1 - (int32_t)axis}, it = pt;
    for (int q = 0; q < pt.rank; q++) {
        pt.shape[q] = q == 1 ? k : 1;
        it.shape[q] = q == 0 ? L : 1;
    }
    tth_tensor *pos = tth_tensor_new(&pt, NULL), *idx = tth_tensor_new(&it, NULL);
    for (int64_t p = 0; pos && p < k; p++)
        ((int64_t *)pos->data)[p] = p;
    for (int64_t i = 0; idx && i < L; i++)
        ((int64_t *)idx->data)[i] = i;
    tth_rexpr *kp, *ki, *sel, *zv, *zi, *vals, *inds;
    CHECK(kp = k_tensor(c, pos));
    CHECK(ki = k_tensor(c, idx));
    CHECK(sel = call2(c, TTH_OP_EQUAL, rankv, kp, NULL)); /* [.., L, k, ..] */
    CHECK(zv = k_scalar(c, xt->dtype, 0));
    CHECK(zi = k_scalar(c, TTH_I64, 0));
    tth_rexpr *wv[3] = {sel, xi, zv}, *wi[3] = {sel, ki, zi};
    CHECK(vals = call(c, TTH_OP_WHERE, wv, 3, NULL));
    CHECK(inds = call(c, TTH_OP_WHERE, wi, 3, NULL));
    int64_t ai_ = axis;
    CHECK(out[0] = call1(c, TTH_OP_SUM, vals, json_pack("{s:o,s:b}", "axis", tth__json_ints(&ai_, 1), "keepdims", 0)));
    if (nout > 1)
        CHECK(out[1] = call1(c, TTH_OP_SUM, inds, json_pack("{s:o,s:b}", "axis", tth__json_ints(&ai_, 1),
                                                            "keepdims", 0)));
    return 0;
}

/* Scatters as selections: for K updates into N positions (of R elements each), a [K, N] match
 * of every update's position against every position, then per position the update that hits it
 * (reduction none), their sum (add) or product (mul), or (opset 18) the larger (max) or smaller
 * (min) of their maximum (minimum) and the data, else the data. O(K * N * R): bounded. */
#define SCATTER_MAX_WORK ((int64_t)1 << 24)

static int scatter_flat(tth_onnx_ctx *c, tth_rexpr *data2, tth_rexpr *pos, tth_rexpr *upd2, const char *red,
                        tth_rexpr **out)
{
    /* data2 [N, R], pos int64 [K], upd2 [K, R] */
    int64_t N = tt(data2)->shape[0], R = tt(data2)->shape[1], K = tt(pos)->shape[0];
    if (K * N * R > SCATTER_MAX_WORK)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "%s of %lld updates into %lld positions: more than 2^24 "
                              "comparisons", c->node->op_type, (long long)K, (long long)N);
    int none = !strcmp(red, "none"), add = !strcmp(red, "add"), mul = !strcmp(red, "mul");
    int mx = !strcmp(red, "max"), mn = !strcmp(red, "min"); /* opset 18 */
    if (!none && !add && !mul && !mx && !mn)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: %s reduction '%s'", c->node->op_type,
                              red);
    if ((mx || mn) && !tth_dtype_is_float(tt(data2)->dtype))
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: %s reduction '%s' of %s data "
                              "(floating-point data only)", c->node->op_type, red, tth_dtype_name(tt(data2)->dtype));
    tth_ttype it = {.dtype = TTH_I64, .rank = 2, .shape = {1, N}};
    tth_tensor *iota = tth_tensor_new(&it, NULL);
    for (int64_t i = 0; iota && i < N; i++)
        ((int64_t *)iota->data)[i] = i;
    int64_t k1[2] = {K, 1}, kn1[3] = {K, N, 1}, k1r[3] = {K, 1, R};
    tth_rexpr *ki, *p2, *m, *m3, *u3, *fill, *sel, *acc;
    CHECK(ki = k_tensor(c, iota));
    CHECK(p2 = reshape(c, pos, k1, 2));
    CHECK(m = call2(c, TTH_OP_EQUAL, p2, ki, NULL));
    CHECK(m3 = reshape(c, m, kn1, 3));
    CHECK(u3 = reshape(c, upd2, k1r, 3));
    CHECK(fill = k_scalar(c, tt(data2)->dtype, mul ? 1 : mx ? -INFINITY : mn ? INFINITY : 0));
    tth_rexpr *wa[3] = {m3, u3, fill};
    CHECK(sel = call(c, TTH_OP_WHERE, wa, 3, NULL)); /* [K, N, R] */
    int64_t ax0 = 0;
    CHECK(acc = call1(c, mul ? TTH_OP_PROD : mx ? TTH_OP_MAX : mn ? TTH_OP_MIN : TTH_OP_SUM, sel,
                      json_pack("{s:o,s:b}", "axis", tth__json_ints(&ax0, 1), "keepdims", 0)));
    if (mx || mn) { /* positions no update hits hold -inf (+inf): the data wins there */
        tth_rexpr *better, *wm[3];
        CHECK(better = call2(c, mx ? TTH_OP_GREATER : TTH_OP_LESS, acc, data2, NULL));
        wm[0] = better;
        wm[1] = acc;
        wm[2] = data2;
        CHECK(*out = call(c, TTH_OP_WHERE, wm, 3, NULL));
        return 0;
    }
    if (add) {
        CHECK(*out = call2(c, TTH_OP_ADD, data2, acc, NULL));
        return 0;
    }
    if (mul) {
        CHECK(*out = call2(c, TTH_OP_MULTIPLY, data2, acc, NULL));
        return 0;
    }
    tth_rexpr *hits, *z, *hit, *hit2;
    int64_t n1[2] = {N, 1};
    CHECK(hits = call1(c, TTH_OP_SUM, cast_to(c, m, TTH_I32),
                       json_pack("{s:o,s:b}", "axis", tth__json_ints(&ax0, 1), "keepdims", 0)));
    CHECK(z = k_scalar(c, TTH_I32, 0));
    CHECK(hit = call2(c, TTH_OP_GREATER, hits, z, NULL));
    CHECK(hit2 = reshape(c, hit, n1, 2));
    tth_rexpr *wb[3] = {hit2, acc, data2};
    CHECK(*out = call(c, TTH_OP_WHERE, wb, 3, NULL));
    return 0;
}

/* ScatterElements (and the older Scatter): positions as GatherElements computes them. */
static int op_scatter_elements(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(3);
    int r = rank(in[0]);
    int64_t axis;
    if (norm_axis(c, ai(c, "axis", 0), r, &axis))
        return c->diag->code;
    if (rank(in[1]) != r || rank(in[2]) != r)
        return tth__onnx_fail(c, TTH_EMODEL, "%s: data, indices and updates must have one rank", c->node->op_type);
    for (int k = 0; k < r; k++)
        if (tt(in[1])->shape[k] != tt(in[2])->shape[k] || (k != axis && tt(in[1])->shape[k] > tt(in[0])->shape[k]))
            return tth__onnx_fail(c, TTH_EMODEL, "%s: the indices' and updates' shapes differ or exceed the data's",
                                  c->node->op_type);
    /* positions: gather_elements' flat offsets, computed on an iota of the data's size */
    const tth_ttype *dt = tt(in[0]);
    int64_t N = tth_ttype_numel(dt), K = tth_ttype_numel(tt(in[1]));
    tth_ttype at = {.dtype = TTH_I64, .rank = dt->rank};
    memcpy(at.shape, dt->shape, sizeof at.shape);
    tth_tensor *iota = tth_tensor_new(&at, NULL);
    for (int64_t i = 0; iota && i < N; i++)
        ((int64_t *)iota->data)[i] = i;
    tth_rexpr *ki, *pos, *d2, *u2;
    CHECK(ki = k_tensor(c, iota));
    CHECK(pos = gather_elements(c, ki, in[1], axis));
    CHECK(pos = reshape(c, pos, &K, 1));
    int64_t n1[2] = {N, 1}, k1[2] = {K, 1};
    CHECK(d2 = reshape(c, in[0], n1, 2));
    CHECK(u2 = reshape(c, in[2], k1, 2));
    tth_rexpr *o;
    int rc = scatter_flat(c, d2, pos, u2, as(c, "reduction", "none"), &o);
    if (rc)
        return rc;
    CHECK(out[0] = reshape(c, o, dt->shape, dt->rank));
    return 0;
}

/* ScatterND(data, indices[..., q], updates): updates replace (add to, multiply) the blocks of the
 * data the index tuples name. */
static int op_scatter_nd(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(3);
    const tth_ttype *dt = tt(in[0]), *it = tt(in[1]);
    int r = dt->rank, ir = it->rank;
    int64_t q = ir ? it->shape[ir - 1] : 0;
    if (ir < 1 || q < 1 || q > r)
        return tth__onnx_fail(c, TTH_EMODEL, "ScatterND with data rank %d and indices rank %d (last dimension %lld)", r,
                              ir, (long long)q);
    int64_t P = 1, R = 1, K = 1, stride[TTH_MAX_RANK], dims[TTH_MAX_RANK];
    for (int64_t j = q - 1; j >= 0; j--) {
        stride[j] = P;
        dims[j] = dt->shape[j];
        P *= dt->shape[j];
    }
    for (int k = (int)q; k < r; k++)
        R *= dt->shape[k];
    for (int k = 0; k < ir - 1; k++)
        K *= it->shape[k];
    if (tth_ttype_numel(tt(in[2])) != K * R)
        return tth__onnx_fail(c, TTH_EMODEL, "ScatterND's updates hold %lld elements, not %lld",
                              (long long)tth_ttype_numel(tt(in[2])), (long long)(K * R));
    tth_rexpr *idx = cast_to(c, in[1], TTH_I64), *kd = k_i64(c, dims, q), *ks = k_i64(c, stride, q);
    CHECK(idx && kd && ks);
    tth_rexpr *wrapped, *scaled, *pos, *d2, *u2, *o;
    CHECK(wrapped = wrap_negative(c, idx, kd));
    CHECK(scaled = call2(c, TTH_OP_MULTIPLY, wrapped, ks, NULL));
    int64_t last = ir - 1, pr[2] = {P, R}, kr[2] = {K, R};
    CHECK(pos = call1(c, TTH_OP_SUM, scaled, json_pack("{s:o,s:b}", "axis", tth__json_ints(&last, 1), "keepdims", 0)));
    CHECK(pos = reshape(c, pos, &K, 1));
    CHECK(d2 = reshape(c, in[0], pr, 2));
    CHECK(u2 = reshape(c, in[2], kr, 2));
    int rc = scatter_flat(c, d2, pos, u2, as(c, "reduction", "none"), &o);
    if (rc)
        return rc;
    CHECK(out[0] = reshape(c, o, dt->shape, r));
    return 0;
}

/* GatherND(data, indices[..., q], batch_dims b): a take from data seen as [B * P, R] (B the
 * batch dims, P the q indexed dims, R the rest) at b_index * P + sum_j wrap(index_j) * stride_j,
 * the batch part a constant grid. */
static int op_gather_nd(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(2);
    const tth_ttype *dt = tt(in[0]), *it = tt(in[1]);
    int r = dt->rank, ir = it->rank;
    int64_t b = ai(c, "batch_dims", 0);
    int64_t q = ir ? it->shape[ir - 1] : 0;
    if (ir < 1 || b < 0 || b >= ir || q < 1 || b + q > r)
        return tth__onnx_fail(c, TTH_EMODEL, "GatherND with data rank %d, indices rank %d (last dimension %lld) and "
                              "batch_dims %lld", r, ir, (long long)q, (long long)b);
    int64_t B = 1, P = 1, R = 1, stride[TTH_MAX_RANK], dims[TTH_MAX_RANK];
    for (int64_t k = 0; k < b; k++) {
        if (it->shape[k] != dt->shape[k])
            return tth__onnx_fail(c, TTH_EMODEL, "GatherND batch dimension %lld differs", (long long)k);
        B *= dt->shape[k];
    }
    for (int64_t j = q - 1; j >= 0; j--) {
        stride[j] = P;
        dims[j] = dt->shape[b + j];
        P *= dt->shape[b + j];
    }
    for (int k = (int)(b + q); k < r; k++)
        R *= dt->shape[k];
    tth_rexpr *idx = cast_to(c, in[1], TTH_I64), *kd = k_i64(c, dims, q), *ks = k_i64(c, stride, q);
    CHECK(idx && kd && ks);
    tth_rexpr *wrapped, *scaled, *flat;
    CHECK(wrapped = wrap_negative(c, idx, kd));
    CHECK(scaled = call2(c, TTH_OP_MULTIPLY, wrapped, ks, NULL));
    int64_t last = ir - 1;
    CHECK(flat = call1(c, TTH_OP_SUM, scaled, json_pack("{s:o,s:b}", "axis", tth__json_ints(&last, 1), "keepdims", 0)));
    if (b > 0) {
        tth_ttype gt = {.dtype = TTH_I64, .rank = ir - 1};
        memcpy(gt.shape, it->shape, sizeof(int64_t) * (size_t)(ir - 1));
        tth_tensor *grid = tth_tensor_new(&gt, NULL);
        int64_t n = tth_ttype_numel(&gt), per = n / B;
        for (int64_t i = 0; grid && i < n; i++)
            ((int64_t *)grid->data)[i] = i / per * P;
        tth_rexpr *base;
        CHECK(base = k_tensor(c, grid));
        CHECK(flat = call2(c, TTH_OP_ADD, flat, base, NULL));
    }
    int64_t s2[2] = {B * P, R};
    tth_rexpr *d2, *g;
    CHECK(d2 = reshape(c, in[0], s2, 2));
    CHECK(g = call2(c, TTH_OP_TAKE, d2, flat, json_pack("{s:i}", "axis", 0)));
    int64_t os[TTH_MAX_RANK];
    int orank = 0;
    for (int k = 0; k < ir - 1; k++)
        os[orank++] = it->shape[k];
    for (int k = (int)(b + q); k < r; k++)
        os[orank++] = dt->shape[k];
    if (orank > TTH_MAX_RANK)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "GatherND's result has more than %d dimensions", TTH_MAX_RANK);
    CHECK(out[0] = reshape(c, g, os, orank));
    return 0;
}

/* CumSum(x, axis): sum of x over j <= i (j < i exclusive; j >= i, j > i reversed) along the
 * axis, as a product with a constant 0/1 mask [L, L] and a sum over the second L. O(L) work per
 * element: meant for the short axes models take running sums over. */
static int op_cumsum(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(2);
    double av;
    if (vscalar(c, in[1], "axis", &av))
        return c->diag->code;
    int r = rank(in[0]);
    int64_t axis;
    if (norm_axis(c, (int64_t)av, r, &axis))
        return c->diag->code;
    const tth_ttype *xt = tt(in[0]);
    int64_t L = xt->shape[axis];
    int excl = (int)ai(c, "exclusive", 0), rev = (int)ai(c, "reverse", 0);
    if (r + 1 > TTH_MAX_RANK || L > 4096)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "CumSum over an axis of %lld (at most 4096) or rank %d",
                              (long long)L, r);
    int64_t xs[TTH_MAX_RANK];
    tth_ttype mt = {.dtype = xt->dtype, .rank = r + 1 - (int32_t)axis};
    for (int k = 0; k <= r; k++)
        xs[k] = k < axis ? xt->shape[k] : k == axis ? 1 : xt->shape[k - 1];
    for (int k = 0; k < mt.rank; k++)
        mt.shape[k] = k == 0 ? L : k == 1 ? L : 1;
    tth_tensor *mask = tth_tensor_new(&mt, NULL);
    for (int64_t i = 0; mask && i < L; i++)
        for (int64_t j = 0; j < L; j++) {
            int on = rev ? (excl ? j > i : j >= i) : (excl ? j < i : j <= i);
            tth__st_f64(mask, i * L + j, on);
        }
    tth_rexpr *x1, *km, *prod;
    CHECK(x1 = reshape(c, in[0], xs, r + 1));
    CHECK(km = k_tensor(c, mask));
    CHECK(prod = call2(c, TTH_OP_MULTIPLY, x1, km, NULL));
    int64_t sa = axis + 1;
    CHECK(out[0] = call1(c, TTH_OP_SUM, prod, json_pack("{s:o,s:b}", "axis", tth__json_ints(&sa, 1), "keepdims", 0)));
    return 0;
}

/* EyeLike(x): a constant of x's shape (2-D) with ones on diagonal k, in `dtype` (default x's). */
static int op_eyelike(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    if (rank(in[0]) != 2)
        return tth__onnx_fail(c, TTH_EMODEL, "EyeLike takes a 2-D input, not rank %d", rank(in[0]));
    const Onnx__AttributeProto *da = attr(c, "dtype");
    tth_ttype ty = *tt(in[0]);
    if (da && da->has_i && (ty.dtype = tth__onnx_dtype(da->i)) == TTH_DTYPE_INVALID)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: EyeLike dtype %lld", (long long)da->i);
    int64_t k = ai(c, "k", 0);
    tth_tensor *t = tth_tensor_new(&ty, NULL);
    for (int64_t i = 0; t && i < ty.shape[0]; i++)
        if (i + k >= 0 && i + k < ty.shape[1])
            tth__st_f64(t, i * ty.shape[1] + i + k, 1);
    CHECK(out[0] = k_tensor(c, t));
    return 0;
}

/* The output_datatype attribute (default 1, float32); TTH_DTYPE_INVALID with diag when tth has
 * no such type. */
static tth_dtype out_datatype(tth_onnx_ctx *c)
{
    tth_dtype dt = tth__onnx_dtype((int32_t)ai(c, "output_datatype", 1));
    if (dt == TTH_DTYPE_INVALID)
        tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: output_datatype %lld",
                       (long long)ai(c, "output_datatype", 1));
    return dt;
}

/* Hann, Hamming and Blackman windows of a constant size: computed here. periodic (default 1)
 * divides by N, symmetric by N - 1. */
static int window(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, const double *a, int na)
{
    NEED(1);
    double nv;
    if (vscalar(c, in[0], "size", &nv))
        return c->diag->code;
    if (nv < 0 || nv > TTH_IMPORT_MAX_ELEMS)
        return tth__onnx_fail(c, TTH_EMODEL, "window size %g", nv);
    tth_ttype ty = {.dtype = out_datatype(c), .rank = 1, .shape = {(int64_t)nv}};
    if (ty.dtype == TTH_DTYPE_INVALID)
        return c->diag->code;
    int64_t n = ty.shape[0];
    double den = ai(c, "periodic", 1) ? (double)n : (double)(n - 1);
    tth_tensor *t = tth_tensor_new(&ty, NULL);
    for (int64_t i = 0; t && i < n; i++) {
        double v = 0;
        for (int k = 0; k < na; k++)
            v += a[k] * cos(2.0 * M_PI * k * (double)i / (den > 0 ? den : 1));
        tth__st_f64(t, i, v);
    }
    CHECK(out[0] = k_tensor(c, t));
    return 0;
}
static int op_hann_window(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    static const double a[2] = {0.5, -0.5};
    return window(c, in, nin, out, a, 2);
}
static int op_hamming_window(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    static const double a[2] = {25.0 / 46, -21.0 / 46};
    return window(c, in, nin, out, a, 2);
}
static int op_blackman_window(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    static const double a[3] = {0.42, -0.5, 0.08};
    return window(c, in, nin, out, a, 3);
}

/* The mel-scale band edges' spectrogram bins (see op_mel_weight_matrix): nb + 2 edges. */
static int mel_edges(tth_onnx_ctx *c, const double *v, int64_t nb, int64_t *edge)
{
    double lo = 2595 * log10(1 + v[3] / 700), hi = 2595 * log10(1 + v[4] / 700), step = (hi - lo) / (double)(nb + 2);
    int64_t bins = (int64_t)v[1] / 2 + 1;
    for (int64_t i = 0; i < nb + 2; i++) {
        double hz = 700 * (pow(10, (lo + (double)i * step) / 2595) - 1);
        double b = floor((v[1] + 1) * hz / v[2]);
        if (!(b >= 0 && b <= (double)(i == nb + 1 ? bins : bins - 1))) /* the last edge bounds, it is not set */
            return tth__onnx_fail(c, TTH_EMODEL,
                                  "MelWeightMatrix band edge %lld (%g Hz) falls on bin %g, outside the %lld bins of "
                                  "a %lld-point DFT", (long long)i, hz, b, (long long)bins, (long long)v[1]);
        edge[i] = (int64_t)b;
    }
    return 0;
}

/* MelWeightMatrix: all five inputs constants, the [dft_length / 2 + 1, num_mel_bins] matrix
 * computed here (output_datatype, default float32). num_mel_bins + 2 band edges evenly spaced on
 * the mel scale (mel(f) = 2595 log10(1 + f / 700)) from mel(lower_edge_hertz), the step being
 * (mel(upper_edge_hertz) - mel(lower_edge_hertz)) / (num_mel_bins + 2) as in ONNX's reference,
 * each at bin floor((dft_length + 1) f / sample_rate). Band i rises linearly from 0 at edge i
 * to 1 at edge i + 1 (just 1 there when the two coincide) and falls to 0 at edge i + 2. */
static int op_mel_weight_matrix(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(5);
    static const char *names[5] = {"num_mel_bins", "dft_length", "sample_rate", "lower_edge_hertz", "upper_edge_hertz"};
    double v[5];
    for (int i = 0; i < 5; i++)
        if (vscalar(c, in[i], names[i], &v[i]))
            return c->diag->code;
    if (!(v[0] >= 1 && v[1] >= 1 && v[2] > 0 && v[0] * (v[1] / 2 + 1) <= (double)TTH_IMPORT_MAX_ELEMS))
        return tth__onnx_fail(c, TTH_EMODEL, "MelWeightMatrix of %g bins for a %g-point DFT at %g Hz", v[0], v[1],
                              v[2]);
    tth_ttype ty = {.dtype = out_datatype(c), .rank = 2, .shape = {(int64_t)v[1] / 2 + 1, (int64_t)v[0]}};
    if (ty.dtype == TTH_DTYPE_INVALID)
        return c->diag->code;
    int64_t nb = ty.shape[1], *e = malloc(sizeof(int64_t) * (size_t)(nb + 2));
    tth_tensor *t = e && !mel_edges(c, v, nb, e) ? tth_tensor_new(&ty, NULL) : NULL;
    for (int64_t i = 0; t && i < nb; i++) {
        if (e[i + 1] == e[i])
            tth__st_f64(t, e[i + 1] * nb + i, 1);
        for (int64_t j = e[i]; j <= e[i + 1] && e[i + 1] > e[i]; j++)
            tth__st_f64(t, j * nb + i, (double)(j - e[i]) / (double)(e[i + 1] - e[i]));
        for (int64_t j = e[i + 1]; j < e[i + 2]; j++)
            tth__st_f64(t, j * nb + i, (double)(e[i + 2] - j) / (double)(e[i + 2] - e[i + 1]));
    }
    free(e);
    if (!t)
        return c->diag->code ? c->diag->code : tth__onnx_fail(c, TTH_ENOMEM, "out of memory");
    CHECK(out[0] = k_tensor(c, t));
    return 0;
}

/* ---------------------------------------------------------------- Fourier transforms
 *
 * DFT and STFT of static sizes as a direct transform: the signal with the transformed axis and
 * the real/imaginary pair flattened together ([..., N * C]) times a constant [N * C, K * 2]
 * matrix of cosines and sines computed here in float64 and rounded to the compute type (float32,
 * or float64 for a float64 input). Truncation to dft_length leaves the samples past it out of the
 * matrix; zero padding needs no rows. */

typedef struct dft_spec {
    int64_t n;   /* samples along the axis */
    int64_t c;   /* 1 (real) or 2 (complex) */
    int64_t len; /* the transform's length (dft_length) */
    int64_t k;   /* output bins: len, or len / 2 + 1 when onesided */
    int inverse; /* e^{+2 pi i kn / len} / len instead of e^{-2 pi i kn / len} */
} dft_spec;

/* Row n * C + part, column 2 k + part: x[n] (re + i im) times w = cos + i sin contributes
 * re cos - im sin to the real part of bin k and re sin + im cos to its imaginary part. */
static tth_rexpr *dft_matrix(tth_onnx_ctx *c, const dft_spec *s, tth_dtype dt)
{
    int64_t rows = s->n * s->c, cols = s->k * 2;
    if (rows * cols > TTH_IMPORT_MAX_ELEMS) {
        tth__onnx_fail(c, TTH_ELIMIT,
                       "%s of %lld samples into %lld bins needs a %lld x %lld matrix (at most %lld elements)",
                       c->node->op_type, (long long)s->n, (long long)s->k, (long long)rows, (long long)cols,
                       (long long)TTH_IMPORT_MAX_ELEMS);
        return NULL;
    }
    tth_ttype ty = {.dtype = dt, .rank = 2, .shape = {rows, cols}};
    tth_tensor *t = tth_tensor_new(&ty, NULL);
    double sign = s->inverse ? 1 : -1, scale = s->inverse ? 1.0 / (double)s->len : 1;
    for (int64_t n = 0; t && n < s->n && n < s->len; n++)
        for (int64_t k = 0; k < s->k; k++) {
            double a = 2 * M_PI * (double)(n * k % s->len) / (double)s->len;
            double co = scale * cos(a), si = scale * sign * sin(a);
            int64_t re = n * s->c * cols + 2 * k;
            tth__st_f64(t, re, co);
            tth__st_f64(t, re + 1, si);
            if (s->c == 2) {
                tth__st_f64(t, re + cols, -si);
                tth__st_f64(t, re + cols + 1, co);
            }
        }
    return k_tensor(c, t);
}

/* x transposed by perm; x itself for the identity. */
static tth_rexpr *permute(tth_onnx_ctx *c, tth_rexpr *x, const int64_t *perm, int r)
{
    int id = 1;
    for (int i = 0; i < r; i++)
        id &= perm[i] == i;
    return !x || id ? x : call1(c, TTH_OP_TRANSPOSE, x, json_pack("{s:o}", "axes", tth__json_ints(perm, r)));
}

/* The transform of x [..., C] along axis (not the last): the axis moved next to the last dim,
 * flattened with it, one matmul, the [K, 2] result moved back in place of the axis. */
static tth_rexpr *dft_along(tth_onnx_ctx *c, tth_rexpr *x, int axis, const dft_spec *s)
{
    int r = rank(x);
    tth_dtype dt = tt(x)->dtype, ct = dt == TTH_F64 ? TTH_F64 : TTH_F32;
    int64_t perm[TTH_MAX_RANK], back[TTH_MAX_RANK], shape[TTH_MAX_RANK];
    for (int i = 0, j = 0; i < r - 1; i++)
        if (i != axis)
            perm[j++] = i;
    perm[r - 2] = axis;
    perm[r - 1] = r - 1;
    for (int i = 0; i < r; i++) {
        back[perm[i]] = i;
        shape[i] = tt(x)->shape[perm[i]];
    }
    shape[r - 2] = s->n * s->c;
    tth_rexpr *w = dft_matrix(c, s, ct);
    tth_rexpr *y = w ? reshape(c, cast_to(c, permute(c, x, perm, r), ct), shape, r - 1) : NULL;
    if (!(y = y ? call2(c, TTH_OP_MATMUL, y, w, NULL) : NULL))
        return NULL;
    shape[r - 2] = s->k;
    shape[r - 1] = 2;
    return cast_to(c, permute(c, reshape(c, y, shape, r), back, r), dt);
}

/* A constant integer input of one value: 0, or negative with diag (naming the input when it is
 * not a constant). */
static int vint(tth_onnx_ctx *c, tth_rexpr *e, const char *what, int64_t *out)
{
    int n = vints(c, e, what, out, 1);
    if (n == 1)
        return 0;
    return n < 0 ? c->diag->code : tth__onnx_fail(c, TTH_EMODEL, "input '%s' holds no value", what);
}

/* onesided keeps bins 0 .. len / 2 of the forward transform of a real signal (the rest are their
 * conjugates); with a complex signal or the inverse transform it is refused. */
static int dft_bins(tth_onnx_ctx *c, dft_spec *s, int64_t onesided)
{
    if (onesided && (s->inverse || s->c == 2))
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: %s onesided 1 with %s",
                              c->node->op_type, s->inverse ? "inverse 1" : "a complex input");
    s->k = onesided ? s->len / 2 + 1 : s->len;
    return 0;
}

/* The [..., C] input of DFT and STFT: C 1 (real) or 2 (complex), a float type, rank >= min. */
static int dft_input(tth_onnx_ctx *c, tth_rexpr *x, int min, dft_spec *s)
{
    int r = rank(x);
    s->c = r ? tt(x)->shape[r - 1] : 0;
    if (r < min || (s->c != 1 && s->c != 2) || !tth_dtype_is_float(tt(x)->dtype))
        return tth__onnx_fail(c, TTH_EMODEL,
                              "%s takes a float [..., 1] (real) or [..., 2] (complex) input of rank >= %d, "
                              "not %s of rank %d, last dim %lld", c->node->op_type, min, tth_dtype_name(tt(x)->dtype),
                              r, (long long)s->c);
    return 0;
}

/* DFT: along axis (opset 17: attribute, default 1; opset 20: a constant input, default -2;
 * negative counts from the back; never the last dim, which holds the real and imaginary parts),
 * of length dft_length (a constant input, default the axis' dim; shorter truncates, longer
 * zero-pads), forward or inverse (divided by the length); output [..., K, ..., 2]. */
static int op_dft(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    int r = rank(in[0]);
    dft_spec s = {.inverse = ai(c, "inverse", 0) != 0};
    int64_t axis = c->opset >= 20 ? -2 : ai(c, "axis", 1);
    if (dft_input(c, in[0], 2, &s) || (c->opset >= 20 && nin > 2 && in[2] && vint(c, in[2], "axis", &axis)))
        return c->diag->code;
    if (axis < -r || axis > r - 2 || axis == -1)
        return tth__onnx_fail(c, TTH_EMODEL, "DFT axis %lld is out of range for rank %d (the last dim is the real and "
                                             "imaginary parts)", (long long)axis, r);
    axis = axis < 0 ? axis + r : axis;
    s.n = s.len = tt(in[0])->shape[axis];
    if (nin > 1 && in[1] && vint(c, in[1], "dft_length", &s.len))
        return c->diag->code;
    if (s.len < 1)
        return tth__onnx_fail(c, TTH_EMODEL, "DFT dft_length %lld is not positive", (long long)s.len);
    if (dft_bins(c, &s, ai(c, "onesided", 0)))
        return c->diag->code;
    CHECK(out[0] = dft_along(c, in[0], (int)axis, &s));
    return 0;
}

/* STFT: signal [B, T, C]; frames of W samples every frame_step (a constant), F = 1 + (T - W) /
 * frame_step of them; W is the window's length, else frame_length (a constant), else T (a window
 * and a frame_length that differ are refused). Each frame times the window, then its DFT of
 * length W (onesided, default 1, for a real signal): [B, F, K, 2]. The frames are a take of a
 * constant [F, W] index. */
static int op_stft(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(2);
    dft_spec s = {0};
    int64_t step, fl = -1;
    tth_rexpr *x = in[0], *win = nin > 2 ? in[2] : NULL;
    if (dft_input(c, x, 3, &s) || vint(c, in[1], "frame_step", &step) ||
        (nin > 3 && in[3] && vint(c, in[3], "frame_length", &fl)))
        return c->diag->code;
    if (rank(x) != 3 || (win && rank(win) != 1))
        return tth__onnx_fail(c, TTH_EMODEL, "STFT takes a [B, T, C] signal and a 1-D window");
    int64_t t = tt(x)->shape[1], w = win ? tt(win)->shape[0] : fl >= 0 ? fl : t;
    if (win && fl >= 0 && fl != w)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED,
                              "unsupported input value: STFT frame_length %lld with a window of %lld", (long long)fl,
                              (long long)w);
    if (step < 1 || w < 1 || w > t)
        return tth__onnx_fail(c, TTH_EMODEL, "STFT frame_step %lld and frame length %lld for a signal of %lld samples",
                              (long long)step, (long long)w, (long long)t);
    int64_t nf = 1 + (t - w) / step;
    if (nf * w > TTH_IMPORT_MAX_ELEMS)
        return tth__onnx_fail(c, TTH_ELIMIT, "STFT of %lld frames of %lld samples (at most %lld in all)", (long long)nf,
                              (long long)w, (long long)TTH_IMPORT_MAX_ELEMS);
    s.n = s.len = w;
    if (dft_bins(c, &s, ai(c, "onesided", 1)))
        return c->diag->code;
    tth_ttype ity = {.dtype = TTH_I64, .rank = 2, .shape = {nf, w}};
    tth_tensor *idx = tth_tensor_new(&ity, NULL);
    for (int64_t f = 0; idx && f < nf; f++)
        for (int64_t i = 0; i < w; i++)
            ((int64_t *)idx->data)[f * w + i] = f * step + i;
    tth_rexpr *ki = k_tensor(c, idx), *frames;
    CHECK(ki && (frames = call2(c, TTH_OP_TAKE, x, ki, json_pack("{s:i}", "axis", 1))));
    if (win) {
        int64_t ws[2] = {w, 1};
        CHECK(frames = call2(c, TTH_OP_MULTIPLY, frames, reshape(c, cast_to(c, win, tt(x)->dtype), ws, 2), NULL));
    }
    CHECK(out[0] = dft_along(c, frames, 2, &s));
    return 0;
}

/* BitShift(x, y) on unsigned integers: x * 2^y or x / 2^y, 2^y exact in float64 for y < 64
 * (the product wraps as unsigned arithmetic does). */
static int op_bitshift(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(2);
    tth_dtype d = tt(in[0])->dtype;
    if (d != TTH_U8 && d != TTH_U16 && d != TTH_U32 && d != TTH_U64)
        return tth__onnx_fail(c, TTH_EMODEL, "BitShift takes unsigned integers, not %s", tth_dtype_name(d));
    const char *dir = as(c, "direction", "");
    int left = !strcmp(dir, "LEFT");
    if (!left && strcmp(dir, "RIGHT"))
        return tth__onnx_fail(c, TTH_EMODEL, "BitShift direction '%s' is not LEFT or RIGHT", dir);
    tth_rexpr *two = k_scalar(c, TTH_F64, 2), *yf = cast_to(c, in[1], TTH_F64), *p, *pi;
    CHECK(two && yf);
    CHECK(p = call2(c, TTH_OP_POWER, two, yf, NULL));
    CHECK(pi = cast_to(c, p, d));
    CHECK(out[0] = call2(c, left ? TTH_OP_MULTIPLY : TTH_OP_DIVIDE, in[0], pi, NULL));
    return 0;
}

/* ---------------------------------------------------------------- recurrent layers
 *
 * RNN, GRU and LSTM with a static sequence length, unrolled over time into matmuls and
 * elementwise operators (docs/operators.md, "Recurrent layers"): the input projection of all
 * steps is one matmul; each step multiplies the previous hidden state by R and applies the
 * gates. Directions forward, reverse and bidirectional; initial states; biases; LSTM peepholes;
 * clip; GRU linear_before_reset; layout 0 and 1; sequence_lens, when constant, masks the steps
 * past each batch entry's length (forward direction). */

static tth_rexpr *slice_axis(tth_onnx_ctx *c, tth_rexpr *x, int axis, int64_t lo, int64_t hi)
{
    int r = rank(x);
    int64_t b[TTH_MAX_RANK], e[TTH_MAX_RANK], st[TTH_MAX_RANK];
    for (int i = 0; i < r; i++) {
        b[i] = 0;
        e[i] = tt(x)->shape[i];
        st[i] = 1;
    }
    b[axis] = lo;
    e[axis] = hi;
    return call1(c, TTH_OP_STRIDED_SLICE, x, json_pack("{s:o,s:o,s:o}", "begin", tth__json_ints(b, r), "end",
                                                       tth__json_ints(e, r), "strides", tth__json_ints(st, r)));
}

static tth_rexpr *transpose2(tth_onnx_ctx *c, tth_rexpr *x)
{
    int64_t perm[2] = {1, 0};
    return x ? call1(c, TTH_OP_TRANSPOSE, x, json_pack("{s:o}", "axes", tth__json_ints(perm, 2))) : NULL;
}

typedef struct rnn_act {
    char name[24];
    double alpha, beta;
    int has_alpha, has_beta;
} rnn_act;

static tth_rexpr *rnn_activate(tth_onnx_ctx *c, const rnn_act *a, tth_rexpr *x, double clip)
{
    if (!x)
        return NULL;
    if (clip > 0 && !(x = call1(c, TTH_OP_CLIP, x, json_pack("{s:f,s:f}", "a_min", -clip, "a_max", clip))))
        return NULL;
    if (!strcmp(a->name, "Sigmoid"))
        return call1(c, TTH_OP_SIGMOID, x, NULL);
    if (!strcmp(a->name, "Tanh"))
        return call1(c, TTH_OP_TANH, x, NULL);
    if (!strcmp(a->name, "Relu"))
        return call1(c, TTH_OP_RELU, x, NULL);
    if (!strcmp(a->name, "LeakyRelu"))
        return call1(c, TTH_OP_LEAKY_RELU, x, json_pack("{s:f}", "alpha", a->has_alpha ? a->alpha : 0.01));
    if (!strcmp(a->name, "HardSigmoid"))
        return call1(c, TTH_OP_HARD_SIGMOID, x, json_pack("{s:f,s:f}", "alpha", a->has_alpha ? a->alpha : 0.2,
                                                            "beta", a->has_beta ? a->beta : 0.5));
    if (!strcmp(a->name, "Affine")) {
        tth_rexpr *k = k_scalar(c, tt(x)->dtype, a->has_alpha ? a->alpha : 1.0);
        tth_rexpr *m = k ? call2(c, TTH_OP_MULTIPLY, x, k, NULL) : NULL;
        tth_rexpr *b = m ? k_scalar(c, tt(x)->dtype, a->has_beta ? a->beta : 0.0) : NULL;
        return b ? call2(c, TTH_OP_ADD, m, b, NULL) : NULL;
    }
    tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: recurrent activation '%s' (Sigmoid, Tanh, "
                   "Relu, LeakyRelu, HardSigmoid and Affine are)", a->name);
    return NULL;
}

enum { RNN_SIMPLE, RNN_GRU, RNN_LSTM };

/* The activations of each direction: the attribute's, else the operator's defaults. */
static int rnn_activations(tth_onnx_ctx *c, int kind, int ndir, rnn_act *acts)
{
    static const char *const dflt[3][3] = {{"Tanh"}, {"Sigmoid", "Tanh"}, {"Sigmoid", "Tanh", "Tanh"}};
    int per = kind + 1;
    const Onnx__AttributeProto *a = attr(c, "activations"), *al = attr(c, "activation_alpha"),
                               *be = attr(c, "activation_beta");
    if (a && a->n_strings && a->n_strings != (size_t)(per * ndir))
        return tth__onnx_fail(c, TTH_EMODEL, "%zu activations for %d per direction and %d directions", a->n_strings,
                              per, ndir);
    for (int i = 0; i < per * ndir; i++) {
        rnn_act *r = &acts[i];
        memset(r, 0, sizeof *r);
        if (a && a->n_strings)
            snprintf(r->name, sizeof r->name, "%.*s", (int)a->strings[i].len, (const char *)a->strings[i].data);
        else
            snprintf(r->name, sizeof r->name, "%s", dflt[kind][i % per]);
        if (al && (size_t)i < al->n_floats) {
            r->alpha = al->floats[i];
            r->has_alpha = 1;
        }
        if (be && (size_t)i < be->n_floats) {
            r->beta = be->floats[i];
            r->has_beta = 1;
        }
    }
    return 0;
}

#define RNN_MAX_STEPS 4096

static int recurrent(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout, int kind)
{
    NEED(3);
    static const int ngates[3] = {1, 3, 4};
    const char *opname = c->node->op_type;
    int G = ngates[kind];
    const char *dir = as(c, "direction", "forward");
    int ndir = !strcmp(dir, "bidirectional") ? 2 : 1, rev = !strcmp(dir, "reverse");
    if (ndir == 1 && !rev && strcmp(dir, "forward"))
        return tth__onnx_fail(c, TTH_EMODEL, "%s direction '%s'", opname, dir);
    int layout = (int)ai(c, "layout", 0);
    tth_rexpr *x = in[0];
    if (rank(x) != 3 || rank(in[1]) != 3 || rank(in[2]) != 3)
        return tth__onnx_fail(c, TTH_EMODEL, "%s takes 3-D X, W and R", opname);
    if (layout) {
        int64_t perm[3] = {1, 0, 2};
        CHECK(x = call1(c, TTH_OP_TRANSPOSE, x, json_pack("{s:o}", "axes", tth__json_ints(perm, 3))));
    }
    tth_dtype fdt = tt(x)->dtype;
    int64_t T = tt(x)->shape[0], B = tt(x)->shape[1], I = tt(x)->shape[2];
    int64_t H = ai(c, "hidden_size", tt(in[2])->shape[2]);
    const tth_ttype *wt = tt(in[1]), *rt = tt(in[2]);
    if (wt->shape[0] != ndir || wt->shape[1] != G * H || wt->shape[2] != I || rt->shape[0] != ndir ||
        rt->shape[1] != G * H || rt->shape[2] != H)
        return tth__onnx_fail(c, TTH_EMODEL, "%s's W or R do not match %d direction(s), hidden size %lld and input "
                              "size %lld", opname, ndir, (long long)H, (long long)I);
    if (T < 1 || T > RNN_MAX_STEPS)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "%s over %lld steps (1 to %d are unrolled)", opname, (long long)T,
                              RNN_MAX_STEPS);
    if (kind == RNN_LSTM && ai(c, "input_forget", 0))
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: LSTM input_forget=1");
    tth_rexpr *bias = nin > 3 ? in[3] : NULL, *hinit = nin > 5 ? in[5] : NULL;
    tth_rexpr *cinit = kind == RNN_LSTM && nin > 6 ? in[6] : NULL, *peep = kind == RNN_LSTM && nin > 7 ? in[7] : NULL;
    if (layout) { /* initial states [B, dirs, H] in layout 1 */
        int64_t perm[3] = {1, 0, 2};
        if (hinit)
            CHECK(hinit = call1(c, TTH_OP_TRANSPOSE, hinit, json_pack("{s:o}", "axes", tth__json_ints(perm, 3))));
        if (cinit)
            CHECK(cinit = call1(c, TTH_OP_TRANSPOSE, cinit, json_pack("{s:o}", "axes", tth__json_ints(perm, 3))));
    }
    const Onnx__AttributeProto *ca = attr(c, "clip");
    double clip = ca && ca->has_f ? ca->f : 0;
    int lbr = kind == RNN_GRU ? (int)ai(c, "linear_before_reset", 0) : 0;
    rnn_act acts[6];
    if (rnn_activations(c, kind, ndir, acts))
        return c->diag->code;
    /* sequence lengths: a constant; only lengths shorter than T need masks */
    int64_t lens[256];
    int masked = 0;
    if (nin > 4 && in[4]) {
        if (B > 256)
            return tth__onnx_fail(c, TTH_EUNSUPPORTED, "%s sequence_lens for a batch of %lld (at most 256)", opname,
                                  (long long)B);
        int n = vints(c, in[4], "sequence_lens", lens, 256);
        if (n < 0)
            return c->diag->code;
        if (n != B)
            return tth__onnx_fail(c, TTH_EMODEL, "%s sequence_lens holds %d values for a batch of %lld", opname, n,
                                  (long long)B);
        for (int i = 0; i < n; i++) {
            if (lens[i] < 0 || lens[i] > T)
                return tth__onnx_fail(c, TTH_EMODEL, "%s sequence length %lld outside [0, %lld]", opname,
                                      (long long)lens[i], (long long)T);
            masked |= lens[i] < T;
        }
        if (masked && (rev || ndir == 2))
            return tth__onnx_fail(c, TTH_EUNSUPPORTED, "%s with sequences shorter than %lld in the reverse direction",
                                  opname, (long long)T);
    }
    int64_t tb_i[2] = {T * B, I}, bh[2] = {B, H}, gh[1] = {G * H};
    tth_rexpr *x2;
    CHECK(x2 = reshape(c, x, tb_i, 2));
    tth_ttype zt = {.dtype = fdt, .rank = 2, .shape = {B, H}};
    tth_rexpr *ys_dir[2], *yh_dir[2], *yc_dir[2];
    tth_rexpr **ys = calloc((size_t)T, sizeof *ys);
    if (!ys)
        return tth__onnx_fail(c, TTH_ENOMEM, "out of memory");
    int rc = 0;
#define RCHECK(e)                                                                        \
    do {                                                                                 \
        if (!(e)) {                                                                      \
            rc = c->diag && c->diag->code ? c->diag->code : TTH_EINTERNAL;               \
            goto done;                                                                   \
        }                                                                                \
    } while (0)
    for (int d = 0; d < ndir; d++) {
        int backwards = rev || d == 1;
        const rnn_act *act = &acts[d * (kind + 1)];
        int64_t wshape[2] = {G * H, I}, rshape[2] = {G * H, H};
        tth_rexpr *wd, *rd, *wdt, *rdt, *xw, *xw3, *rb = NULL, *hprev, *cprev = NULL, *pi = NULL, *po = NULL, *pf = NULL;
        tth_rexpr *rht = NULL, *rzr = NULL;
        RCHECK(wd = reshape(c, slice_axis(c, in[1], 0, d, d + 1), wshape, 2));
        RCHECK(rd = reshape(c, slice_axis(c, in[2], 0, d, d + 1), rshape, 2));
        RCHECK(wdt = transpose2(c, wd));
        RCHECK(rdt = transpose2(c, rd));
        RCHECK(xw = call2(c, TTH_OP_MATMUL, x2, wdt, NULL));
        if (bias) {
            tth_rexpr *brow;
            int64_t b2[1] = {2 * G * H};
            RCHECK(brow = reshape(c, slice_axis(c, bias, 0, d, d + 1), b2, 1));
            RCHECK(xw = call2(c, TTH_OP_ADD, xw, slice_axis(c, brow, 0, 0, G * H), NULL));
            RCHECK(rb = slice_axis(c, brow, 0, G * H, 2 * G * H));
            RCHECK(rb = reshape(c, rb, gh, 1));
        }
        int64_t tbg[3] = {T, B, G * H};
        RCHECK(xw3 = reshape(c, xw, tbg, 3));
        if (kind == RNN_GRU && !lbr) { /* the hidden gate multiplies (r * H) by Rh: R's z and r rows apart */
            RCHECK(rzr = slice_axis(c, rdt, 1, 0, 2 * H));
            RCHECK(rht = slice_axis(c, rdt, 1, 2 * H, 3 * H));
        }
        if (hinit)
            RCHECK(hprev = reshape(c, slice_axis(c, hinit, 0, d, d + 1), bh, 2));
        else
            RCHECK(hprev = k_tensor(c, tth_tensor_new(&zt, NULL)));
        if (kind == RNN_LSTM) {
            if (cinit)
                RCHECK(cprev = reshape(c, slice_axis(c, cinit, 0, d, d + 1), bh, 2));
            else
                RCHECK(cprev = k_tensor(c, tth_tensor_new(&zt, NULL)));
            if (peep) {
                int64_t p3[1] = {3 * H};
                tth_rexpr *prow;
                RCHECK(prow = reshape(c, slice_axis(c, peep, 0, d, d + 1), p3, 1));
                RCHECK(pi = slice_axis(c, prow, 0, 0, H));
                RCHECK(po = slice_axis(c, prow, 0, H, 2 * H));
                RCHECK(pf = slice_axis(c, prow, 0, 2 * H, 3 * H));
            }
        }
        for (int64_t step = 0; step < T; step++) {
            int64_t t = backwards ? T - 1 - step : step;
            int64_t bgh[2] = {B, G * H};
            tth_rexpr *xt, *hn = NULL, *cn = NULL;
            RCHECK(xt = reshape(c, slice_axis(c, xw3, 0, t, t + 1), bgh, 2));
#define GATE(e, k) slice_axis(c, (e), 1, (k) * H, ((k) + 1) * H)
            if (kind == RNN_SIMPLE || kind == RNN_LSTM) {
                tth_rexpr *hr, *sum;
                RCHECK(hr = call2(c, TTH_OP_MATMUL, hprev, rdt, NULL));
                RCHECK(sum = call2(c, TTH_OP_ADD, xt, hr, NULL));
                if (rb)
                    RCHECK(sum = call2(c, TTH_OP_ADD, sum, rb, NULL));
                if (kind == RNN_SIMPLE) {
                    RCHECK(hn = rnn_activate(c, &act[0], sum, clip));
                } else { /* gates i, o, f, c */
                    tth_rexpr *gi, *go, *gf, *gc, *ig, *fg, *cg, *og;
                    RCHECK(gi = GATE(sum, 0));
                    RCHECK(go = GATE(sum, 1));
                    RCHECK(gf = GATE(sum, 2));
                    RCHECK(gc = GATE(sum, 3));
                    if (pi) {
                        RCHECK(gi = call2(c, TTH_OP_ADD, gi, call2(c, TTH_OP_MULTIPLY, pi, cprev, NULL), NULL));
                        RCHECK(gf = call2(c, TTH_OP_ADD, gf, call2(c, TTH_OP_MULTIPLY, pf, cprev, NULL), NULL));
                    }
                    RCHECK(ig = rnn_activate(c, &act[0], gi, clip));
                    RCHECK(fg = rnn_activate(c, &act[0], gf, clip));
                    RCHECK(cg = rnn_activate(c, &act[1], gc, clip));
                    RCHECK(cn = call2(c, TTH_OP_ADD, call2(c, TTH_OP_MULTIPLY, fg, cprev, NULL),
                                      call2(c, TTH_OP_MULTIPLY, ig, cg, NULL), NULL));
                    if (po)
                        RCHECK(go = call2(c, TTH_OP_ADD, go, call2(c, TTH_OP_MULTIPLY, po, cn, NULL), NULL));
                    RCHECK(og = rnn_activate(c, &act[0], go, clip));
                    RCHECK(hn = call2(c, TTH_OP_MULTIPLY, og, rnn_activate(c, &act[2], cn, 0), NULL));
                }
            } else { /* GRU: gates z, r, h */
                tth_rexpr *hz, *hr, *hh, *z, *r, *h, *one;
                if (lbr) {
                    tth_rexpr *all;
                    RCHECK(all = call2(c, TTH_OP_MATMUL, hprev, rdt, NULL));
                    if (rb)
                        RCHECK(all = call2(c, TTH_OP_ADD, all, rb, NULL));
                    RCHECK(hz = GATE(all, 0));
                    RCHECK(hr = GATE(all, 1));
                    RCHECK(hh = GATE(all, 2));
                } else {
                    tth_rexpr *zr;
                    RCHECK(zr = call2(c, TTH_OP_MATMUL, hprev, rzr, NULL));
                    if (rb)
                        RCHECK(zr = call2(c, TTH_OP_ADD, zr, slice_axis(c, rb, 0, 0, 2 * H), NULL));
                    RCHECK(hz = GATE(zr, 0));
                    RCHECK(hr = GATE(zr, 1));
                    hh = NULL;
                }
                RCHECK(z = rnn_activate(c, &act[0], call2(c, TTH_OP_ADD, GATE(xt, 0), hz, NULL), clip));
                RCHECK(r = rnn_activate(c, &act[0], call2(c, TTH_OP_ADD, GATE(xt, 1), hr, NULL), clip));
                if (lbr) {
                    RCHECK(hh = call2(c, TTH_OP_MULTIPLY, r, hh, NULL));
                } else {
                    RCHECK(hh = call2(c, TTH_OP_MATMUL, call2(c, TTH_OP_MULTIPLY, r, hprev, NULL), rht, NULL));
                    if (rb)
                        RCHECK(hh = call2(c, TTH_OP_ADD, hh, slice_axis(c, rb, 0, 2 * H, 3 * H), NULL));
                }
                RCHECK(h = rnn_activate(c, &act[1], call2(c, TTH_OP_ADD, GATE(xt, 2), hh, NULL), clip));
                RCHECK(one = k_scalar(c, fdt, 1));
                RCHECK(hn = call2(c, TTH_OP_ADD, call2(c, TTH_OP_MULTIPLY, call2(c, TTH_OP_SUBTRACT, one, z, NULL), h,
                                                       NULL),
                                  call2(c, TTH_OP_MULTIPLY, z, hprev, NULL), NULL));
            }
#undef GATE
            tth_rexpr *y = hn;
            if (masked) { /* past its length a batch entry keeps its state and outputs zeros */
                tth_ttype mt = {.dtype = TTH_BOOL, .rank = 2, .shape = {B, 1}};
                tth_tensor *mk = tth_tensor_new(&mt, NULL);
                for (int64_t b = 0; mk && b < B; b++)
                    ((uint8_t *)mk->data)[b] = t < lens[b];
                tth_rexpr *m, *zero;
                RCHECK(m = k_tensor(c, mk));
                RCHECK(zero = k_scalar(c, fdt, 0));
                tth_rexpr *a1[3] = {m, hn, hprev}, *a2[3] = {m, hn, zero};
                RCHECK(y = call(c, TTH_OP_WHERE, a2, 3, NULL));
                RCHECK(hn = call(c, TTH_OP_WHERE, a1, 3, NULL));
                if (cn) {
                    tth_rexpr *a3[3] = {m, cn, cprev};
                    RCHECK(cn = call(c, TTH_OP_WHERE, a3, 3, NULL));
                }
            }
            int64_t s4[4] = {1, 1, B, H};
            RCHECK(ys[t] = reshape(c, y, s4, 4));
            hprev = hn;
            if (cn)
                cprev = cn;
        }
        RCHECK(ys_dir[d] = T == 1 ? ys[0] : call(c, TTH_OP_CONCATENATE, ys, (size_t)T, json_pack("{s:i}", "axis", 0)));
        int64_t s3[3] = {1, B, H};
        RCHECK(yh_dir[d] = reshape(c, hprev, s3, 3));
        if (kind == RNN_LSTM)
            RCHECK(yc_dir[d] = reshape(c, cprev, s3, 3));
    }
    tth_rexpr *y, *yh, *yc = NULL;
    RCHECK(y = ndir == 1 ? ys_dir[0] : call(c, TTH_OP_CONCATENATE, ys_dir, 2, json_pack("{s:i}", "axis", 1)));
    RCHECK(yh = ndir == 1 ? yh_dir[0] : call(c, TTH_OP_CONCATENATE, yh_dir, 2, json_pack("{s:i}", "axis", 0)));
    if (kind == RNN_LSTM)
        RCHECK(yc = ndir == 1 ? yc_dir[0] : call(c, TTH_OP_CONCATENATE, yc_dir, 2, json_pack("{s:i}", "axis", 0)));
    if (layout) { /* Y [B, T, dirs, H], Y_h and Y_c [B, dirs, H] */
        int64_t p4[4] = {2, 0, 1, 3}, p3[3] = {1, 0, 2};
        RCHECK(y = call1(c, TTH_OP_TRANSPOSE, y, json_pack("{s:o}", "axes", tth__json_ints(p4, 4))));
        RCHECK(yh = call1(c, TTH_OP_TRANSPOSE, yh, json_pack("{s:o}", "axes", tth__json_ints(p3, 3))));
        if (yc)
            RCHECK(yc = call1(c, TTH_OP_TRANSPOSE, yc, json_pack("{s:o}", "axes", tth__json_ints(p3, 3))));
    }
    out[0] = y;
    if (nout > 1)
        out[1] = yh;
    if (nout > 2)
        out[2] = yc;
#undef RCHECK
done:
    free(ys);
    return rc;
}

static int op_rnn(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    return recurrent(c, in, nin, out, nout, RNN_SIMPLE);
}
static int op_gru(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    return recurrent(c, in, nin, out, nout, RNN_GRU);
}
static int op_lstm(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    return recurrent(c, in, nin, out, nout, RNN_LSTM);
}

/* Pad: pads as [x1_begin, x2_begin, ..., x1_end, ...] (attribute < 11, input >= 11); negative
 * pads crop first; modes constant, reflect, edge. */
/* Pad's axes input (18): the n pads p (begins, then ends, of those axes) spread over all r axes,
 * the others unpadded. The new count (2 r), or -2 with diag. */
static int pads_of_axes(tth_onnx_ctx *c, tth_rexpr *axes_in, int r, int64_t *p, int n)
{
    int64_t ax[MAXV], full[2 * MAXV] = {0};
    int na = vints(c, axes_in, "axes", ax, MAXV);
    if (na == -2)
        return -2;
    if (na < 0 || 2 * na != n) {
        tth__onnx_fail(c, TTH_EMODEL, "Pad has %d pads for %d axes", n, na < 0 ? 0 : na);
        return -2;
    }
    for (int i = 0; i < na; i++) {
        if (norm_axis(c, ax[i], r, &ax[i]))
            return -2;
        full[ax[i]] = p[i];
        full[r + ax[i]] = p[na + i];
    }
    memcpy(p, full, sizeof(int64_t) * 2 * (size_t)r);
    return 2 * r;
}

static int op_pad(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    int r = rank(in[0]);
    int64_t p[2 * MAXV];
    int n;
    double value = 0;
    if (c->opset < 11) {
        n = aints(c, "pads", p, 2 * MAXV);
        if (n == -1)
            n = aints(c, "paddings", p, 2 * MAXV);
        value = af(c, "value", 0.0);
    } else {
        if (nin < 2 || !in[1])
            return tth__onnx_fail(c, TTH_EMODEL, "Pad needs pads");
        n = vints(c, in[1], "pads", p, 2 * MAXV);
        if (n >= 0 && nin > 2 && in[2] && vscalar(c, in[2], "constant_value", &value))
            return c->diag->code;
        if (n >= 0 && nin > 3 && in[3] && (n = pads_of_axes(c, in[3], r, p, n)) < 0)
            return c->diag->code;
    }
    if (n == -2)
        return c->diag->code;
    if (n != 2 * r)
        return tth__onnx_fail(c, TTH_EMODEL, "Pad has %d pads for rank %d", n, r);
    const char *mode = as(c, "mode", "constant");
    if (strcmp(mode, "constant") && strcmp(mode, "reflect") && strcmp(mode, "edge"))
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: Pad mode '%s'", mode);
    tth_rexpr *x = in[0];
    int64_t pb[TTH_MAX_RANK], pe[TTH_MAX_RANK], b[TTH_MAX_RANK], e[TTH_MAX_RANK], s[TTH_MAX_RANK];
    int crop = 0, pad = 0;
    for (int i = 0; i < r; i++) {
        int64_t d = tt(x)->shape[i];
        pb[i] = p[i] > 0 ? p[i] : 0;
        pe[i] = p[r + i] > 0 ? p[r + i] : 0;
        b[i] = p[i] < 0 ? -p[i] : 0;
        e[i] = p[r + i] < 0 ? d + p[r + i] : d;
        s[i] = 1;
        if (b[i] > d || e[i] < b[i] || pb[i] > (1 << 24) || pe[i] > (1 << 24))
            return tth__onnx_fail(c, TTH_EMODEL, "Pad amounts out of range");
        if (strcmp(mode, "constant") && (pb[i] || pe[i]) && (pb[i] >= d || pe[i] >= d) && strcmp(mode, "edge"))
            return tth__onnx_fail(c, TTH_EMODEL, "reflect padding larger than the dimension");
        crop |= b[i] || e[i] != d;
        pad |= pb[i] || pe[i];
    }
    int64_t padded[TTH_MAX_RANK];
    for (int i = 0; i < r; i++)
        padded[i] = e[i] - b[i] + pb[i] + pe[i];
    if (!tth__onnx_shape_ok(padded, r))
        return tth__onnx_fail(c, TTH_ELIMIT, "Pad result too large");
    if (crop)
        CHECK(x = call1(c, TTH_OP_STRIDED_SLICE, x,
                        json_pack("{s:o,s:o,s:o}", "begin", tth__json_ints(b, r), "end", tth__json_ints(e, r), "strides",
                                  tth__json_ints(s, r))));
    if (pad || !crop)
        CHECK(x = call1(c, TTH_OP_PAD, x,
                        json_pack("{s:o,s:o,s:f,s:s}", "pad_before", tth__json_ints(pb, r), "pad_after",
                                  tth__json_ints(pe, r), "pad_value", value, "mode", mode)));
    out[0] = x;
    return 0;
}

/* CenterCropPad (18): each of `axes` (default all) cropped, or padded with zeros, to the size the
 * shape input gives, centred; of an odd difference the larger half is at the end. */
static int op_center_crop_pad(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(2);
    int r = rank(in[0]);
    int64_t sh[MAXV], axes[MAXV];
    int ns = vints(c, in[1], "shape", sh, MAXV);
    if (ns == -2)
        return c->diag->code;
    int na = aints(c, "axes", axes, MAXV);
    if (na == -2)
        return c->diag->code;
    if (na < 0)
        for (na = 0; na < r; na++)
            axes[na] = na;
    if (ns != na)
        return tth__onnx_fail(c, TTH_EMODEL, "CenterCropPad shape has %d values for %d axes", ns, na);
    int64_t b[TTH_MAX_RANK], e[TTH_MAX_RANK], st[TTH_MAX_RANK], pb[TTH_MAX_RANK] = {0}, pe[TTH_MAX_RANK] = {0};
    int crop = 0, pad = 0;
    for (int i = 0; i < r; i++) {
        b[i] = 0;
        e[i] = tt(in[0])->shape[i];
        st[i] = 1;
    }
    for (int k = 0; k < na; k++) {
        int64_t ax;
        if (norm_axis(c, axes[k], r, &ax))
            return c->diag->code;
        int64_t d = tt(in[0])->shape[ax], t = sh[k];
        if (t < 0 || t > (1 << 24))
            return tth__onnx_fail(c, TTH_EMODEL, "CenterCropPad size %lld out of range", (long long)t);
        if (t < d) {
            b[ax] = (d - t) / 2;
            e[ax] = b[ax] + t;
            crop = 1;
        } else if (t > d) {
            pb[ax] = (t - d) / 2;
            pe[ax] = t - d - pb[ax];
            pad = 1;
        }
    }
    tth_rexpr *x = in[0];
    if (crop)
        CHECK(x = call1(c, TTH_OP_STRIDED_SLICE, x,
                        json_pack("{s:o,s:o,s:o}", "begin", tth__json_ints(b, r), "end", tth__json_ints(e, r), "strides",
                                  tth__json_ints(st, r))));
    if (pad)
        CHECK(x = call1(c, TTH_OP_PAD, x,
                        json_pack("{s:o,s:o,s:f,s:s}", "pad_before", tth__json_ints(pb, r), "pad_after",
                                  tth__json_ints(pe, r), "pad_value", 0.0, "mode", "constant")));
    out[0] = x;
    return 0;
}

/* Expand: bidirectional broadcast of the input with the given shape. */
static int op_expand(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(2);
    int64_t s[MAXV], o[TTH_MAX_RANK];
    int n = vints(c, in[1], "shape", s, MAXV);
    if (n == -2)
        return c->diag->code;
    int r = rank(in[0]), orank = n > r ? n : r;
    if (orank > TTH_MAX_RANK)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "Expand to rank %d", orank);
    for (int i = 0; i < orank; i++) {
        int ia = i - (orank - r), ib = i - (orank - n);
        int64_t da = ia >= 0 ? tt(in[0])->shape[ia] : 1, db = ib >= 0 ? s[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return tth__onnx_fail(c, TTH_EMODEL, "Expand shape does not broadcast with the input");
        if (db < 0)
            return tth__onnx_fail(c, TTH_EMODEL, "Expand shape has a negative dim");
        o[i] = da == 1 ? db : da;
    }
    tth_ttype ot = {.dtype = tt(in[0])->dtype, .rank = orank};
    memcpy(ot.shape, o, sizeof(int64_t) * (size_t)orank);
    if (!tth__onnx_shape_ok(o, orank))
        return tth__onnx_fail(c, TTH_ELIMIT, "Expand result too large");
    if (tth_ttype_equal(&ot, tt(in[0]))) {
        out[0] = in[0];
        return 0;
    }
    CHECK(out[0] = call1(c, TTH_OP_BROADCAST_TO, in[0], json_pack("{s:o}", "shape", tth__json_ints(o, orank))));
    return 0;
}

/* Shape: the static shape as an int64 constant (start/end of opset 15). */
static int op_shape(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    int r = rank(in[0]);
    int64_t st = ai(c, "start", 0), en = ai(c, "end", r);
    if (st < 0)
        st += r;
    if (en < 0)
        en += r;
    st = st < 0 ? 0 : st > r ? r : st;
    en = en < 0 ? 0 : en > r ? r : en;
    if (en < st)
        en = st;
    CHECK(out[0] = k_i64(c, tt(in[0])->shape + st, en - st));
    return 0;
}

static int op_size(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    CHECK(out[0] = k_scalar(c, TTH_I64, (double)tth_ttype_numel(tt(in[0]))));
    return 0;
}

/* Constant: value (tensor) or value_float(s) / value_int(s); strings and sparse unsupported. */
static int op_constant(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    const Onnx__AttributeProto *a;
    tth_tensor *t = NULL;
    if ((a = attr(c, "value"))) {
        int rc = tth__onnx_tensor_from_proto(a->t, c->where, c->ext, &t, c->diag);
        if (rc)
            return rc;
    } else if ((a = attr(c, "value_float")) || (a = attr(c, "value_int"))) {
        int isf = !strcmp(a->name, "value_float");
        tth_ttype ty = {.dtype = isf ? TTH_F32 : TTH_I64, .rank = 0};
        t = tth_tensor_new(&ty, NULL);
        if (t && isf)
            ((float *)t->data)[0] = a->f;
        else if (t)
            ((int64_t *)t->data)[0] = a->i;
    } else if ((a = attr(c, "value_floats")) || (a = attr(c, "value_ints"))) {
        int isf = !strcmp(a->name, "value_floats");
        tth_ttype ty = {.dtype = isf ? TTH_F32 : TTH_I64, .rank = 1, .shape = {isf ? (int64_t)a->n_floats : (int64_t)a->n_ints}};
        t = tth_tensor_new(&ty, isf ? (const void *)a->floats : (const void *)a->ints);
    } else if (attr(c, "sparse_value") || attr(c, "value_string") || attr(c, "value_strings")) {
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: Constant of strings or sparse tensors");
    } else {
        return tth__onnx_fail(c, TTH_EMODEL, "Constant without a value");
    }
    CHECK(out[0] = k_tensor(c, t));
    return 0;
}

/* ConstantOfShape: shape from the input; value a one-element tensor (default float32 0). */
static int op_constant_of_shape(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    int64_t s[MAXV];
    int n = vints(c, in[0], "input", s, MAXV);
    if (n == -2)
        return c->diag->code;
    if (n > TTH_MAX_RANK)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "ConstantOfShape of rank %d", n);
    tth_ttype ty = {.dtype = TTH_F32, .rank = n};
    int64_t total = 1;
    for (int i = 0; i < n; i++) {
        if (s[i] < 0)
            return tth__onnx_fail(c, TTH_EMODEL, "ConstantOfShape has a negative dim");
        ty.shape[i] = s[i];
        total = (s[i] && total > TTH_IMPORT_MAX_ELEMS / s[i]) ? TTH_IMPORT_MAX_ELEMS + 1 : total * s[i];
    }
    if (total > TTH_IMPORT_MAX_ELEMS)
        return tth__onnx_fail(c, TTH_ELIMIT, "ConstantOfShape result too large");
    tth_tensor *v = NULL;
    const Onnx__AttributeProto *a = attr(c, "value");
    if (a) {
        int rc = tth__onnx_tensor_from_proto(a->t, c->where, c->ext, &v, c->diag);
        if (rc)
            return rc;
        if (tth_ttype_numel(&v->type) != 1) {
            tth_tensor_unref(v);
            return tth__onnx_fail(c, TTH_EMODEL, "ConstantOfShape value must hold one element");
        }
        ty.dtype = v->type.dtype;
    }
    tth_tensor *t = tth_tensor_new(&ty, NULL);
    if (t && v) {
        size_t es = tth_dtype_size(ty.dtype);
        for (int64_t i = 0; i < total; i++)
            memcpy((char *)t->data + (size_t)i * es, v->data, es);
    }
    if (v)
        tth_tensor_unref(v);
    CHECK(out[0] = k_tensor(c, t));
    return 0;
}

/* Range: start, limit, delta constants → a constant. */
static int op_range(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(3);
    double st, li, de;
    if (vscalar(c, in[0], "start", &st) || vscalar(c, in[1], "limit", &li) || vscalar(c, in[2], "delta", &de))
        return c->diag->code;
    if (de == 0)
        return tth__onnx_fail(c, TTH_EMODEL, "Range delta is 0");
    double nd = ceil((li - st) / de);
    if (!(nd <= (double)TTH_IMPORT_MAX_ELEMS))
        return tth__onnx_fail(c, TTH_ELIMIT, "Range result too large");
    int64_t n = nd > 0 ? (int64_t)nd : 0;
    tth_ttype ty = {.dtype = tt(in[0])->dtype, .rank = 1, .shape = {n}};
    tth_tensor *t = tth_tensor_new(&ty, NULL);
    int isf = tth_dtype_is_float(ty.dtype);
    int64_t ist = tth__ld_i64(in[0]->u.constant.value, 0), ide = tth__ld_i64(in[2]->u.constant.value, 0);
    for (int64_t i = 0; t && i < n; i++) {
        int64_t step, v;
        if (isf) {
            tth__st_f64(t, i, st + (double)i * de);
        } else if (__builtin_mul_overflow(i, ide, &step) || __builtin_add_overflow(ist, step, &v)) {
            tth_tensor_unref(t);
            return tth__onnx_fail(c, TTH_EMODEL, "Range overflows its integer type");
        } else {
            tth__st_i64(t, i, v);
        }
    }
    CHECK(out[0] = k_tensor(c, t));
    return 0;
}

/* ---------------------------------------------------------------- reductions */

static int reduce(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, tth_op op, tth_rexpr *x)
{
    NEED(1);
    int r = rank(in[0]);
    int64_t ax[MAXV];
    int na = (nin > 1 && in[1]) ? vints(c, in[1], "axes", ax, MAXV) : aints(c, "axes", ax, MAXV);
    if (na == -2)
        return c->diag->code;
    if (na <= 0 && ai(c, "noop_with_empty_axes", 0)) {
        out[0] = x;
        return 0;
    }
    for (int i = 0; i < na; i++)
        if (norm_axis(c, ax[i], r, &ax[i]))
            return c->diag->code;
    CHECK(out[0] = call1(c, op, x,
                         json_pack("{s:o,s:b}", "axis", tth__json_ints(ax, na > 0 ? na : 0), "keepdims",
                                   (int)ai(c, "keepdims", 1))));
    return 0;
}
#define REDUCE(fname, OP)                                                                     \
    static int fname(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout) \
    {                                                                                         \
        if (nin < 1 || !in[0])                                                                \
            return tth__onnx_fail(c, TTH_EMODEL, "reduction without input");                   \
        return reduce(c, in, nin, out, OP, in[0]);                                            \
    }
REDUCE(op_reduce_mean, TTH_OP_MEAN)
REDUCE(op_reduce_sum, TTH_OP_SUM)
REDUCE(op_reduce_max, TTH_OP_MAX)
REDUCE(op_reduce_min, TTH_OP_MIN)
REDUCE(op_reduce_prod, TTH_OP_PROD)

/* ReduceSumSquare, ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp from elementwise ops + sum. */
static int reduce_composite(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, tth_op pre, int square,
                            tth_op post)
{
    NEED(1);
    tth_rexpr *x = in[0];
    if (square)
        CHECK(x = call2(c, TTH_OP_MULTIPLY, x, x, NULL));
    else if (pre != TTH_OP_INVALID)
        CHECK(x = call1(c, pre, x, NULL));
    int rc = reduce(c, in, nin, out, TTH_OP_SUM, x);
    if (rc)
        return rc;
    if (post != TTH_OP_INVALID)
        CHECK(out[0] = call1(c, post, out[0], NULL));
    return 0;
}
static int op_reduce_sum_square(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    return reduce_composite(c, in, nin, out, TTH_OP_INVALID, 1, TTH_OP_INVALID);
}
static int op_reduce_l1(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    return reduce_composite(c, in, nin, out, TTH_OP_ABS, 0, TTH_OP_INVALID);
}
static int op_reduce_l2(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    return reduce_composite(c, in, nin, out, TTH_OP_INVALID, 1, TTH_OP_SQRT);
}
static int op_reduce_log_sum(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    return reduce_composite(c, in, nin, out, TTH_OP_INVALID, 0, TTH_OP_LOG);
}
static int op_reduce_log_sum_exp(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    return reduce_composite(c, in, nin, out, TTH_OP_EXP, 0, TTH_OP_LOG);
}

static int argx(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, tth_op op)
{
    NEED(1);
    int64_t axis;
    if (norm_axis(c, ai(c, "axis", 0), rank(in[0]), &axis))
        return c->diag->code;
    CHECK(out[0] = call1(c, op, in[0],
                         json_pack("{s:I,s:b,s:b}", "axis", (json_int_t)axis, "keepdims", (int)ai(c, "keepdims", 1),
                                   "select_last_index", (int)ai(c, "select_last_index", 0))));
    return 0;
}
static int op_argmax(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    return argx(c, in, nin, out, TTH_OP_ARGMAX);
}
static int op_argmin(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    return argx(c, in, nin, out, TTH_OP_ARGMIN);
}

/* ---------------------------------------------------------------- resize */

/* Resize's roi input (opset 11+) as resize2d's "roi" [h0, w0, h1, w1]: a constant of 8 values,
 * the starts then the ends of N, C, H, W, with N and C whole (0 to 1). 0 or negative with diag. */
static int resize_roi(tth_onnx_ctx *c, tth_rexpr *r, json_t *attrs)
{
    if (!r || tth_ttype_numel(tt(r)) == 0)
        return tth__onnx_fail(c, TTH_EMODEL, "coordinate_transformation_mode tf_crop_and_resize needs input 'roi'");
    if (r->kind != TTH_REXPR_CONST) {
        tth__onnx_fail(c, TTH_EUNSUPPORTED, "input 'roi' is not a constant (a dynamic value)");
        tth_diag_hint(c->diag, "when it is a graph input, fix it at compile time: tthctl compile --bind NAME=FILE");
        return c->diag->code;
    }
    if (tth_ttype_numel(tt(r)) != 8)
        return tth__onnx_fail(c, TTH_EMODEL, "input 'roi' must hold 8 values (the starts and ends of 4 axes)");
    double v[8];
    for (int i = 0; i < 8; i++)
        v[i] = tth__ld_f64(r->u.constant.value, i);
    if (v[0] != 0 || v[1] != 0 || v[4] != 1 || v[5] != 1)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: roi must keep N and C whole");
    json_object_set_new(attrs, "roi", json_pack("[f,f,f,f]", v[2], v[3], v[6], v[7]));
    json_object_set_new(attrs, "extrapolation_value", json_real(af(c, "extrapolation_value", 0.0)));
    return 0;
}

/* Resize's mode (nearest, linear or bilinear, cubic with cubic_coeff_a and exclude_outside) and,
 * from opset 11, coordinate_transformation_mode (tf_crop_and_resize with its roi and
 * extrapolation_value: only given sizes) and nearest_mode, into resize2d's attrs. Upsample and
 * Resize-10 are asymmetric with floor. exclude_outside is kept for cubic only: nearest and
 * linear read the same values with it (docs/operators.md "Resize"). 0 or negative with diag. */
static int resize_modes(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, int upsample, int by_sizes, json_t *attrs)
{
    static const char *const ctms[] = {"half_pixel",         "asymmetric",           "align_corners",
                                       "pytorch_half_pixel", "tf_half_pixel_for_nn", "tf_crop_and_resize"};
    const char *mode = as(c, "mode", "nearest"), *ctm = "asymmetric", *nm = "floor";
    if (!strcmp(mode, "bilinear"))
        mode = "linear";
    if (strcmp(mode, "nearest") && strcmp(mode, "linear") && strcmp(mode, "cubic"))
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: resize mode '%s'", mode);
    if (!upsample && c->opset >= 11) {
        ctm = as(c, "coordinate_transformation_mode", "half_pixel");
        nm = as(c, "nearest_mode", "round_prefer_floor");
        size_t i = 0;
        while (i < sizeof ctms / sizeof ctms[0] && strcmp(ctm, ctms[i]))
            i++;
        if (i == sizeof ctms / sizeof ctms[0])
            return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: coordinate_transformation_mode '%s'",
                                  ctm);
        if (strcmp(nm, "round_prefer_floor") && strcmp(nm, "round_prefer_ceil") && strcmp(nm, "floor") &&
            strcmp(nm, "ceil"))
            return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: nearest_mode '%s'", nm);
    }
    if (ai(c, "antialias", 0))
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: Resize antialias=1 (opset 18)");
    json_object_set_new(attrs, "method", json_string(mode));
    json_object_set_new(attrs, "coordinate_transformation_mode", json_string(ctm));
    json_object_set_new(attrs, "nearest_mode", json_string(nm));
    if (!strcmp(mode, "cubic")) {
        json_object_set_new(attrs, "cubic_coeff_a", json_real(af(c, "cubic_coeff_a", -0.75)));
        json_object_set_new(attrs, "exclude_outside", json_boolean(ai(c, "exclude_outside", 0) != 0));
    }
    if (strcmp(ctm, "tf_crop_and_resize"))
        return 0;
    if (!by_sizes)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED,
                              "unsupported attribute value: tf_crop_and_resize with scales (only with sizes)");
    return resize_roi(c, nin > 1 ? in[1] : NULL, attrs);
}

/* Resize's axes and keep_aspect_ratio_policy (18), on the scales (*nsc of them) or sizes (*nsz)
 * given for those axes: both spread over all 4 axes (1 and the input's size elsewhere); with sizes
 * and the policy not_larger (not_smaller), one scale for those axes, the smallest (largest) of
 * size / input, the sizes round(scale * input) and the coordinates computed with that scale
 * (then *keep_scale, and scales hold it). 0 or the diag's code. */
static int resize_axes(tth_onnx_ctx *c, const int64_t *in_shape, double *scales, int *nsc, int64_t *sizes, int *nsz,
                       int *keep_scale)
{
    int64_t ax[MAXV];
    int na = aints(c, "axes", ax, MAXV);
    if (na == -2)
        return c->diag->code;
    const char *policy = as(c, "keep_aspect_ratio_policy", "stretch");
    if (strcmp(policy, "stretch") && strcmp(policy, "not_larger") && strcmp(policy, "not_smaller"))
        return tth__onnx_fail(c, TTH_EMODEL, "Resize keep_aspect_ratio_policy '%s' is not stretch, not_larger or "
                              "not_smaller", policy);
    if (na < 0)
        for (na = 0; na < 4; na++)
            ax[na] = na;
    int given = *nsz >= 0 ? *nsz : *nsc;
    if (given >= 0 && given != na)
        return tth__onnx_fail(c, TTH_EMODEL, "Resize has %d %s for %d axes", given, *nsz >= 0 ? "sizes" : "scales", na);
    double sc[4] = {1, 1, 1, 1};
    int64_t sz[4] = {in_shape[0], in_shape[1], in_shape[2], in_shape[3]};
    for (int i = 0; i < na; i++) {
        if (norm_axis(c, ax[i], 4, &ax[i]))
            return c->diag->code;
        if (*nsz >= 0)
            sz[ax[i]] = sizes[i];
        else if (*nsc >= 0)
            sc[ax[i]] = scales[i];
    }
    if (*nsz >= 0 && strcmp(policy, "stretch")) {
        double s = strcmp(policy, "not_larger") ? 0 : INFINITY;
        for (int i = 0; i < na; i++) {
            double q = (double)sizes[i] / (double)in_shape[ax[i]];
            s = strcmp(policy, "not_larger") ? fmax(s, q) : fmin(s, q);
        }
        for (int i = 0; i < na; i++) {
            sz[ax[i]] = (int64_t)llround(s * (double)in_shape[ax[i]]);
            sc[ax[i]] = s;
        }
        *keep_scale = 1;
    }
    for (int i = 0; i < 4; i++) {
        scales[i] = sc[i];
        sizes[i] = sz[i];
    }
    if (*nsz >= 0)
        *nsz = 4;
    if (*nsc >= 0 || *keep_scale)
        *nsc = 4;
    return 0;
}

/* Resize (10: X, scales; 11+: X, roi, scales, sizes) and Upsample (7: scales attribute; 9:
 * scales input). 4-D NCHW only, N and C unscaled; nearest, linear and cubic. Given scales, the output
 * sizes are floor(input * scale) and the coordinates use the scales themselves (resize2d's
 * "scale" attribute), as ONNX says. */
static int resize(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, int upsample)
{
    NEED(1);
    tth_rexpr *x = in[0];
    if (rank(x) != 4)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: %s of a rank-%d tensor (4-D only)",
                              c->node->op_type, rank(x));
    double scales[MAXV];
    int64_t sizes[MAXV];
    int nsc = -1, nsz = -1;
    tth_rexpr *sc_in = NULL, *sz_in = NULL;
    if (upsample && c->opset < 9) {
        nsc = afloats(c, "scales", scales, MAXV);
        if (nsc == -2)
            return c->diag->code;
    } else if (upsample || c->opset < 11) {
        sc_in = nin > 1 ? in[1] : NULL;
    } else {
        sc_in = nin > 2 ? in[2] : NULL;
        sz_in = nin > 3 ? in[3] : NULL;
    }
    if (sc_in && tth_ttype_numel(tt(sc_in)) > 0) {
        if (sc_in->kind != TTH_REXPR_CONST)
            return tth__onnx_fail(c, TTH_EUNSUPPORTED, "input 'scales' is not a constant (a dynamic shape)");
        nsc = (int)tth_ttype_numel(tt(sc_in));
        if (nsc > MAXV)
            return tth__onnx_fail(c, TTH_EMODEL, "too many scales");
        for (int i = 0; i < nsc; i++)
            scales[i] = tth__ld_f64(sc_in->u.constant.value, i);
    }
    if (sz_in && tth_ttype_numel(tt(sz_in)) > 0) {
        nsz = vints(c, sz_in, "sizes", sizes, MAXV);
        if (nsz == -2)
            return c->diag->code;
    }
    int keep_scale = 0;
    if (!upsample && c->opset >= 18) {
        int rc = resize_axes(c, tt(x)->shape, scales, &nsc, sizes, &nsz, &keep_scale);
        if (rc)
            return rc;
    }
    int64_t oh, ow;
    if (nsz >= 0) {
        if (nsz != 4 || sizes[0] != tt(x)->shape[0] || sizes[1] != tt(x)->shape[1])
            return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: sizes must keep N and C");
        oh = sizes[2];
        ow = sizes[3];
    } else if (nsc >= 0) {
        if (nsc != 4 || scales[0] != 1.0 || scales[1] != 1.0)
            return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: scales must keep N and C");
        double fh = (double)tt(x)->shape[2] * scales[2], fw = (double)tt(x)->shape[3] * scales[3];
        if (!(fh >= 0 && fw >= 0 && fh < 1e9 && fw < 1e9))
            return tth__onnx_fail(c, TTH_EMODEL, "bad resize scales");
        oh = (int64_t)floor(fh);
        ow = (int64_t)floor(fw);
    } else {
        return tth__onnx_fail(c, TTH_EMODEL, "%s needs scales or sizes", c->node->op_type);
    }
    if (oh <= 0 || ow <= 0)
        return tth__onnx_fail(c, TTH_EMODEL, "resize to an empty output");
    int64_t os4[4] = {tt(x)->shape[0], tt(x)->shape[1], oh, ow};
    if (oh > TTH_IMPORT_MAX_TENSOR || ow > TTH_IMPORT_MAX_TENSOR || !tth__onnx_shape_ok(os4, 4))
        return tth__onnx_fail(c, TTH_ELIMIT, "resize result too large");
    int64_t sz[2] = {oh, ow};
    json_t *attrs = json_pack("{s:o}", "size", tth__json_ints(sz, 2));
    if (!attrs)
        return tth__onnx_fail(c, TTH_ENOMEM, "out of memory");
    int rc = resize_modes(c, in, nin, upsample, nsz >= 0, attrs);
    if (rc) {
        json_decref(attrs);
        return rc;
    }
    if ((nsz < 0 || keep_scale) && ((double)oh != (double)tt(x)->shape[2] * scales[2] ||
                                    (double)ow != (double)tt(x)->shape[3] * scales[3]))
        json_object_set_new(attrs, "scale", json_pack("[f,f]", scales[2], scales[3]));
    CHECK(out[0] = call1(c, TTH_OP_RESIZE2D, x, attrs));
    return 0;
}
static int op_resize(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    return resize(c, in, nin, out, 0);
}
static int op_upsample(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    return resize(c, in, nin, out, 1);
}

/* RoiAlign (opset 10, 16): vision.roi_align of X, rois and batch_indices (run-time tensors). The
 * coordinate_transformation_mode of opset 16 (default half_pixel) is the relay op's `aligned`;
 * opset 10 has none and behaves as output_half_pixel. */
static int op_roi_align(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(3);
    const char *mode = as(c, "mode", "avg");
    const char *ctm = c->opset >= 16 ? as(c, "coordinate_transformation_mode", "half_pixel") : "output_half_pixel";
    if (strcmp(mode, "avg") && strcmp(mode, "max"))
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: RoiAlign mode '%s'", mode);
    if (strcmp(ctm, "half_pixel") && strcmp(ctm, "output_half_pixel"))
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: RoiAlign coordinate_transformation_mode '%s'",
                              ctm);
    int64_t oh = ai(c, "output_height", 1), ow = ai(c, "output_width", 1), ratio = ai(c, "sampling_ratio", 0);
    if (oh < 1 || ow < 1 || ratio < 0)
        return tth__onnx_fail(c, TTH_EMODEL, "RoiAlign output_height %lld, output_width %lld, sampling_ratio %lld: "
                              "the sizes must be positive, the ratio not negative", (long long)oh, (long long)ow,
                              (long long)ratio);
    json_t *attrs = json_pack("{s:[I,I],s:f,s:I,s:s,s:b}", "pooled_size", (json_int_t)oh, (json_int_t)ow,
                              "spatial_scale", af(c, "spatial_scale", 1.0), "sampling_ratio", (json_int_t)ratio,
                              "mode", mode, "aligned", !strcmp(ctm, "half_pixel"));
    CHECK(out[0] = call(c, TTH_OP_ROI_ALIGN, in, 3, attrs));
    return 0;
}

/* ---------------------------------------------------------------- grid sample */

/* GridSample (16: 4-D, modes bilinear, nearest, bicubic; 20: N-D, linear, nearest, cubic; either
 * spelling is taken at any opset): image.grid_sample. X and grid float32 or float64, 1 to 3
 * spatial axes; integer and 16-bit float X, and more axes, are refused by name. */
static int op_grid_sample(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(2);
    const char *mode = as(c, "mode", "linear"), *pad = as(c, "padding_mode", "zeros");
    if (!strcmp(mode, "bilinear") || !strcmp(mode, "bicubic"))
        mode = mode[2] == 'l' ? "linear" : "cubic";
    if (strcmp(mode, "nearest") && strcmp(mode, "linear") && strcmp(mode, "cubic"))
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: GridSample mode '%s'", mode);
    if (strcmp(pad, "zeros") && strcmp(pad, "border") && strcmp(pad, "reflection"))
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: GridSample padding_mode '%s'", pad);
    for (int i = 0; i < 2; i++)
        if (tt(in[i])->dtype != TTH_F32 && tt(in[i])->dtype != TTH_F64)
            return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: GridSample %s of element type %s "
                                  "(float32 and float64 only)", i ? "grid" : "X", tth_dtype_name(tt(in[i])->dtype));
    if (rank(in[0]) < 3 || rank(in[0]) > 5)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: GridSample of a rank-%d X (1 to 3 "
                              "spatial axes: ranks 3 to 5)", rank(in[0]));
    json_t *attrs = json_pack("{s:s,s:s,s:b}", "method", mode, "padding_mode", pad, "align_corners",
                              ai(c, "align_corners", 0) != 0);
    CHECK(out[0] = call2(c, TTH_OP_GRID_SAMPLE, in[0], in[1], attrs));
    return 0;
}

/* ---------------------------------------------------------------- quantization */

static tth_rexpr *zero_like(tth_onnx_ctx *c, tth_rexpr *shape_of, tth_dtype dt)
{
    tth_ttype ty = *tt(shape_of);
    ty.dtype = dt;
    return k_tensor(c, tth_tensor_new(&ty, NULL));
}

/* QuantizeLinear: y = saturate(round_half_even(x / scale) + zero_point); uint8 by default. */
/* Blocked quantization (opset 21's block_size): refused by name */
static int no_blocks(tth_onnx_ctx *c)
{
    if (ai(c, "block_size", 0) != 0)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: %s block_size %lld (blocked "
                              "quantization, opset 21)", c->node->op_type, (long long)ai(c, "block_size", 0));
    return 0;
}

static int op_quantize(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(2);
    if (no_blocks(c))
        return c->diag->code;
    tth_rexpr *zp = nin > 2 ? in[2] : NULL;
    int64_t odt = ai(c, "output_dtype", 0); /* opset 21: the type when there is no zero point */
    tth_dtype want = odt ? tth__onnx_dtype((int32_t)odt) : TTH_U8;
    if (odt && want != TTH_U8 && want != TTH_I8 && want != TTH_U16 && want != TTH_I16) {
        char type[64];
        tth__onnx_type_text((int32_t)odt, type, sizeof type);
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: QuantizeLinear output_dtype %s",
                              want == TTH_DTYPE_INVALID ? type : tth_dtype_name(want));
    }
    if (zp && odt && tt(zp)->dtype != want)
        return tth__onnx_fail(c, TTH_EMODEL, "QuantizeLinear output_dtype %s differs from its zero point's %s",
                              tth_dtype_name(want), tth_dtype_name(tt(zp)->dtype));
    if (!zp)
        CHECK(zp = zero_like(c, in[1], want));
    int64_t axis = 0;
    if (rank(in[1]) > 0 && norm_axis(c, ai(c, "axis", 1), rank(in[0]), &axis))
        return c->diag->code;
    tth_rexpr *args[3] = {in[0], in[1], zp};
    CHECK(out[0] = call(c, TTH_OP_QUANTIZE, args, 3,
                        json_pack("{s:I,s:s}", "axis", (json_int_t)axis, "out_dtype", tth_dtype_name(tt(zp)->dtype))));
    return 0;
}

/* DequantizeLinear: y = (x - zero_point) * scale, float32. */
static int op_dequantize(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(2);
    if (no_blocks(c))
        return c->diag->code;
    tth_rexpr *zp = nin > 2 ? in[2] : NULL;
    if (!zp)
        CHECK(zp = zero_like(c, in[1], tt(in[0])->dtype));
    int64_t axis = 0;
    if (rank(in[1]) > 0 && norm_axis(c, ai(c, "axis", 1), rank(in[0]), &axis))
        return c->diag->code;
    tth_rexpr *args[3] = {in[0], in[1], zp};
    json_t *at = json_pack("{s:I}", "axis", (json_int_t)axis);
    /* A dequantized constant tensor (QDQ weights, biases) stays a call: the QDQ pass
     * (qdq.c) computes the layer in integers from it; constant folding after that pass folds what
     * it leaves. Scalars still fold here (they can be operands that must be constant). */
    if (in[0]->kind == TTH_REXPR_CONST && rank(in[0]) >= 1)
        CHECK(out[0] = call_unfolded(c, TTH_OP_DEQUANTIZE, args, 3, at));
    else
        CHECK(out[0] = call(c, TTH_OP_DEQUANTIZE, args, 3, at));
    return 0;
}

/* acc (int32) requantized with in_scale = a_scale * b_scale, zero point 0, to y_scale/y_zp. */
static tth_rexpr *requant(tth_onnx_ctx *c, tth_rexpr *acc, tth_rexpr *as_, tth_rexpr *bs, tth_rexpr *ys, tth_rexpr *yz,
                          int axis)
{
    tth_rexpr *insc = call2(c, TTH_OP_MULTIPLY, as_, bs, NULL);
    if (!insc)
        return NULL;
    tth_rexpr *zero = k_scalar(c, TTH_I32, 0);
    if (!zero)
        return NULL;
    tth_rexpr *args[5] = {acc, insc, zero, ys, yz};
    return call(c, TTH_OP_REQUANTIZE, args, 5,
                json_pack("{s:I,s:s}", "axis", (json_int_t)axis, "out_dtype", tth_dtype_name(tt(yz)->dtype)));
}

/* QLinearConv: x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, [B int32]. */
static int op_qlinear_conv(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(8);
    int r = rank(in[0]);
    tth_rexpr *x = to4d(c, in[0], "QLinearConv");
    CHECK(x);
    tth_rexpr *w = to4d(c, in[3], "QLinearConv");
    CHECK(w);
    spatial sp;
    int rc = spatial_attrs(c, r - 2, tt(in[0])->shape + 2, tt(in[3])->shape + 2, 0, &sp);
    if (rc)
        return rc;
    int64_t st[2] = {sp.s[0], sp.s[1]}, dl[2] = {sp.d[0], sp.d[1]};
    json_t *at = json_pack("{s:o,s:o,s:o,s:I}", "strides", tth__json_ints(st, 2), "padding", pads_json(&sp),
                           "dilation", tth__json_ints(dl, 2), "groups", (json_int_t)ai(c, "group", 1));
    tth_rexpr *args[4] = {x, w, in[2], in[5]};
    tth_rexpr *acc = call(c, TTH_OP_QNN_CONV2D, args, 4, at);
    CHECK(acc);
    if (nin > 8 && in[8]) {
        int64_t bs[3] = {tt(in[8])->shape[0], 1, 1};
        tth_rexpr *b = rank(in[8]) == 1 ? reshape(c, in[8], bs, 3) : in[8];
        CHECK(b);
        CHECK(acc = call2(c, TTH_OP_ADD, acc, b, NULL));
    }
    tth_rexpr *y = requant(c, acc, in[1], in[4], in[6], in[7], 1);
    CHECK(y);
    CHECK(out[0] = from4d(c, y, r));
    return 0;
}

/* QLinearMatMul: a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp. */
static int op_qlinear_matmul(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(8);
    tth_rexpr *args[4] = {in[0], in[3], in[2], in[5]};
    tth_rexpr *acc = call(c, TTH_OP_QNN_MATMUL, args, 4, NULL);
    CHECK(acc);
    CHECK(out[0] = requant(c, acc, in[1], in[4], in[6], in[7], rank(acc) - 1));
    return 0;
}

/* ---------------------------------------------------------------- cheap compositions */

/* Tile: reshape to interleave a size-1 axis before each dim, broadcast, reshape back. */
static int op_tile(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(2);
    int r = rank(in[0]);
    int64_t rep[MAXV];
    int n = vints(c, in[1], "repeats", rep, MAXV);
    if (n == -2)
        return c->diag->code;
    if (n != r)
        return tth__onnx_fail(c, TTH_EMODEL, "Tile repeats has %d values for rank %d", n, r);
    if (2 * r > TTH_MAX_RANK)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: Tile of rank %d", r);
    int64_t s1[TTH_MAX_RANK], s2[TTH_MAX_RANK], s3[TTH_MAX_RANK];
    for (int i = 0; i < r; i++) {
        if (rep[i] < 0)
            return tth__onnx_fail(c, TTH_EMODEL, "Tile repeat is negative");
        s1[2 * i] = 1;
        s1[2 * i + 1] = tt(in[0])->shape[i];
        s2[2 * i] = rep[i];
        s2[2 * i + 1] = tt(in[0])->shape[i];
        s3[i] = rep[i] > TTH_IMPORT_MAX_TENSOR ? -1 : rep[i] * tt(in[0])->shape[i];
    }
    if (!tth__onnx_shape_ok(s2, 2 * r) || !tth__onnx_shape_ok(s3, r))
        return tth__onnx_fail(c, TTH_ELIMIT, "Tile result too large");
    tth_rexpr *x = reshape(c, in[0], s1, 2 * r);
    CHECK(x);
    CHECK(x = call1(c, TTH_OP_BROADCAST_TO, x, json_pack("{s:o}", "shape", tth__json_ints(s2, 2 * r))));
    CHECK(out[0] = reshape(c, x, s3, r));
    return 0;
}

/* DepthToSpace (DCR/CRD) and SpaceToDepth as reshape-transpose-reshape. */
static int d2s(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, int to_space)
{
    NEED(1);
    if (rank(in[0]) != 4)
        return tth__onnx_fail(c, TTH_EMODEL, "needs a 4-D input");
    int64_t b = ai(c, "blocksize", 0), N = tt(in[0])->shape[0], C = tt(in[0])->shape[1], H = tt(in[0])->shape[2],
            W = tt(in[0])->shape[3];
    if (b <= 0 || b > 1 << 16)
        return tth__onnx_fail(c, TTH_EMODEL, "bad blocksize");
    int64_t s6[6], perm[6], s4[4];
    if (to_space) {
        if (C % (b * b))
            return tth__onnx_fail(c, TTH_EMODEL, "channels not divisible by blocksize^2");
        int crd = !strcmp(as(c, "mode", "DCR"), "CRD");
        int64_t cc = C / (b * b);
        int64_t a[6] = {N, b, b, cc, H, W}, pa[6] = {0, 3, 4, 1, 5, 2};
        int64_t bcrd[6] = {N, cc, b, b, H, W}, pcrd[6] = {0, 1, 4, 2, 5, 3};
        memcpy(s6, crd ? bcrd : a, sizeof s6);
        memcpy(perm, crd ? pcrd : pa, sizeof perm);
        int64_t o[4] = {N, cc, H * b, W * b};
        memcpy(s4, o, sizeof s4);
    } else {
        if (H % b || W % b)
            return tth__onnx_fail(c, TTH_EMODEL, "spatial dims not divisible by blocksize");
        int64_t a[6] = {N, C, H / b, b, W / b, b}, pa[6] = {0, 3, 5, 1, 2, 4};
        memcpy(s6, a, sizeof s6);
        memcpy(perm, pa, sizeof perm);
        int64_t o[4] = {N, C * b * b, H / b, W / b};
        memcpy(s4, o, sizeof s4);
    }
    tth_rexpr *x = reshape(c, in[0], s6, 6);
    CHECK(x);
    CHECK(x = call1(c, TTH_OP_TRANSPOSE, x, json_pack("{s:o}", "axes", tth__json_ints(perm, 6))));
    CHECK(out[0] = reshape(c, x, s4, 4));
    return 0;
}
static int op_depth_to_space(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    return d2s(c, in, nin, out, 1);
}
static int op_space_to_depth(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    return d2s(c, in, nin, out, 0);
}

/* ---------------------------------------------------------------- more compositions */

static tth_rexpr *kx(tth_onnx_ctx *c, tth_rexpr *like, double v) { return k_scalar(c, tt(like)->dtype, v); }

/* ConvInteger: qnn.conv2d of x and w with their zero points (default 0) → int32. */
static int op_conv_integer(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(2);
    int r = rank(in[0]);
    tth_rexpr *x = to4d(c, in[0], "ConvInteger");
    CHECK(x);
    tth_rexpr *w = to4d(c, in[1], "ConvInteger");
    CHECK(w);
    tth_rexpr *xz = nin > 2 && in[2] ? in[2] : k_scalar(c, tt(in[0])->dtype, 0);
    tth_rexpr *wz = nin > 3 && in[3] ? in[3] : k_scalar(c, tt(in[1])->dtype, 0);
    CHECK(xz && wz);
    spatial sp;
    int rc = spatial_attrs(c, r - 2, tt(in[0])->shape + 2, tt(in[1])->shape + 2, 0, &sp);
    if (rc)
        return rc;
    int64_t st[2] = {sp.s[0], sp.s[1]}, dl[2] = {sp.d[0], sp.d[1]};
    json_t *at = json_pack("{s:o,s:o,s:o,s:I}", "strides", tth__json_ints(st, 2), "padding", pads_json(&sp),
                           "dilation", tth__json_ints(dl, 2), "groups", (json_int_t)ai(c, "group", 1));
    tth_rexpr *args[4] = {x, w, xz, wz};
    tth_rexpr *y = call(c, TTH_OP_QNN_CONV2D, args, 4, at);
    CHECK(y);
    CHECK(out[0] = from4d(c, y, r));
    return 0;
}

/* MatMulInteger: qnn.matmul with zero points (default 0) → int32. */
static int op_matmul_integer(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(2);
    tth_rexpr *az = nin > 2 && in[2] ? in[2] : k_scalar(c, tt(in[0])->dtype, 0);
    tth_rexpr *bz = nin > 3 && in[3] ? in[3] : k_scalar(c, tt(in[1])->dtype, 0);
    CHECK(az && bz);
    tth_rexpr *args[4] = {in[0], in[1], az, bz};
    CHECK(out[0] = call(c, TTH_OP_QNN_MATMUL, args, 4, NULL));
    return 0;
}

/* OneHot(indices, depth, values[off, on]; axis): values[1] where the (wrapped) index equals the
 * position along the new axis, else values[0]. depth must be a constant. */
static int op_one_hot(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(3);
    double depth_d;
    if (vscalar(c, in[1], "depth", &depth_d))
        return c->diag->code;
    if (!(depth_d >= 1 && depth_d <= (double)TTH_IMPORT_MAX_ELEMS))
        return tth__onnx_fail(c, TTH_EMODEL, "OneHot depth %g out of range", depth_d);
    int64_t depth = (int64_t)depth_d;
    int r = rank(in[0]), orank = r + 1;
    if (depth < 1 || depth > TTH_IMPORT_MAX_ELEMS || orank > TTH_MAX_RANK)
        return tth__onnx_fail(c, TTH_EMODEL, "OneHot depth %lld or rank out of range", (long long)depth);
    if (tth_ttype_numel(tt(in[2])) != 2)
        return tth__onnx_fail(c, TTH_EMODEL, "OneHot values must hold 2 elements");
    int64_t axis;
    if (norm_axis(c, ai(c, "axis", -1), orank, &axis))
        return c->diag->code;
    tth_rexpr *idx = cast_to(c, in[0], TTH_I64), *kd = k_scalar(c, TTH_I64, (double)depth), *z = k_scalar(c, TTH_I64, 0);
    CHECK(idx && kd && z);
    tth_rexpr *neg, *wrapped, *sum;
    CHECK(neg = call2(c, TTH_OP_LESS, idx, z, NULL));
    CHECK(sum = call2(c, TTH_OP_ADD, idx, kd, NULL));
    tth_rexpr *wa[3] = {neg, sum, idx};
    CHECK(wrapped = call(c, TTH_OP_WHERE, wa, 3, NULL));
    int64_t s[TTH_MAX_RANK];
    for (int i = 0, j = 0; i < orank; i++)
        s[i] = i == axis ? 1 : tt(in[0])->shape[j++];
    CHECK(wrapped = reshape(c, wrapped, s, orank));
    tth_ttype it = {.dtype = TTH_I64, .rank = orank};
    for (int i = 0; i < orank; i++)
        it.shape[i] = i == axis ? depth : 1;
    tth_tensor *iota = tth_tensor_new(&it, NULL);
    for (int64_t i = 0; iota && i < depth; i++)
        ((int64_t *)iota->data)[i] = i;
    tth_rexpr *k, *eq, *vals, *off, *on, *i0 = k_scalar(c, TTH_I64, 0), *i1 = k_scalar(c, TTH_I64, 1);
    CHECK(i0 && i1);
    CHECK(k = k_tensor(c, iota));
    CHECK(eq = call2(c, TTH_OP_EQUAL, wrapped, k, NULL));
    int64_t two[1] = {2};
    CHECK(vals = reshape(c, in[2], two, 1));
    CHECK(off = call2(c, TTH_OP_TAKE, vals, i0, json_pack("{s:i}", "axis", 0)));
    CHECK(on = call2(c, TTH_OP_TAKE, vals, i1, json_pack("{s:i}", "axis", 0)));
    tth_rexpr *args[3] = {eq, on, off};
    CHECK(out[0] = call(c, TTH_OP_WHERE, args, 3, NULL));
    return 0;
}

/* DynamicQuantizeLinear: scale = (max(x, 0) - min(x, 0)) / 255, zero point =
 * saturate(round(-min / scale)) as uint8, y = QuantizeLinear(x, scale, zero point). */
static int op_dynamic_quantize(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    tth_rexpr *x = in[0], *mn, *mx, *z = kx(c, x, 0), *k255 = kx(c, x, 255), *sc, *zp, *y;
    CHECK(z && k255);
    CHECK(mn = call1(c, TTH_OP_MIN, x, json_pack("{s:[],s:b}", "axis", "keepdims", 0)));
    CHECK(mx = call1(c, TTH_OP_MAX, x, json_pack("{s:[],s:b}", "axis", "keepdims", 0)));
    CHECK(mn = call2(c, TTH_OP_MINIMUM, mn, z, NULL));
    CHECK(mx = call2(c, TTH_OP_MAXIMUM, mx, z, NULL));
    CHECK(sc = call2(c, TTH_OP_SUBTRACT, mx, mn, NULL));
    CHECK(sc = call2(c, TTH_OP_DIVIDE, sc, k255, NULL));
    CHECK(zp = call1(c, TTH_OP_NEGATIVE, mn, NULL));
    CHECK(zp = call2(c, TTH_OP_DIVIDE, zp, sc, NULL));
    CHECK(zp = call1(c, TTH_OP_ROUND, zp, NULL));
    CHECK(zp = call1(c, TTH_OP_CLIP, zp, json_pack("{s:f,s:f}", "a_min", 0.0, "a_max", 255.0)));
    CHECK(zp = cast_to(c, zp, TTH_U8));
    tth_rexpr *args[3] = {x, sc, zp};
    CHECK(y = call(c, TTH_OP_QUANTIZE, args, 3, json_pack("{s:I,s:s}", "axis", (json_int_t)0, "out_dtype", "uint8")));
    out[0] = y;
    if (nout > 1)
        out[1] = sc;
    if (nout > 2)
        out[2] = zp;
    return 0;
}




/* CastLike: cast to the dtype of the second input. */
static int op_cast_like(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(2);
    CHECK(out[0] = call1(c, TTH_OP_CAST, in[0], json_pack("{s:s}", "dtype", tth_dtype_name(tt(in[1])->dtype))));
    return 0;
}

/* Celu: alpha * elu(x / alpha) (alpha 1 in the elu), which is x for x >= 0. */
static int op_celu(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    double alpha = af(c, "alpha", 1.0);
    if (alpha == 0)
        return tth__onnx_fail(c, TTH_EMODEL, "Celu alpha is 0");
    tth_rexpr *a = kx(c, in[0], alpha), *y;
    CHECK(a);
    CHECK(y = call2(c, TTH_OP_DIVIDE, in[0], a, NULL));
    CHECK(y = call1(c, TTH_OP_ELU, y, json_pack("{s:f}", "alpha", 1.0)));
    CHECK(out[0] = call2(c, TTH_OP_MULTIPLY, y, a, NULL));
    return 0;
}

/* Shrink: x < -lambd ? x + bias : x > lambd ? x - bias : 0. */
static int op_shrink(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    double l = af(c, "lambd", 0.5), b = af(c, "bias", 0.0);
    tth_rexpr *x = in[0], *nl = kx(c, x, -l), *pl = kx(c, x, l), *kb = kx(c, x, b), *z = kx(c, x, 0);
    CHECK(nl && pl && kb && z);
    tth_rexpr *lo, *hi, *xp, *xm, *inner;
    CHECK(lo = call2(c, TTH_OP_LESS, x, nl, NULL));
    CHECK(hi = call2(c, TTH_OP_GREATER, x, pl, NULL));
    CHECK(xp = call2(c, TTH_OP_ADD, x, kb, NULL));
    CHECK(xm = call2(c, TTH_OP_SUBTRACT, x, kb, NULL));
    tth_rexpr *a1[3] = {hi, xm, z};
    CHECK(inner = call(c, TTH_OP_WHERE, a1, 3, NULL));
    tth_rexpr *a2[3] = {lo, xp, inner};
    CHECK(out[0] = call(c, TTH_OP_WHERE, a2, 3, NULL));
    return 0;
}

/* IsNaN: not (x == x). */
static int op_isnan(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    tth_rexpr *e;
    CHECK(e = call2(c, TTH_OP_EQUAL, in[0], in[0], NULL));
    CHECK(out[0] = call1(c, TTH_OP_LOGICAL_NOT, e, NULL));
    return 0;
}

/* IsInf: x == +inf (detect_positive) or x == -inf (detect_negative). */
static int op_isinf(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    int pos = (int)ai(c, "detect_positive", 1), neg = (int)ai(c, "detect_negative", 1);
    tth_rexpr *r = NULL, *e;
    if (pos) {
        tth_rexpr *k = kx(c, in[0], INFINITY);
        CHECK(k);
        CHECK(r = call2(c, TTH_OP_EQUAL, in[0], k, NULL));
    }
    if (neg) {
        tth_rexpr *k = kx(c, in[0], -INFINITY);
        CHECK(k);
        CHECK(e = call2(c, TTH_OP_EQUAL, in[0], k, NULL));
        if (r)
            CHECK(e = call2(c, TTH_OP_LOGICAL_OR, r, e, NULL));
        r = e;
    }
    if (!r) {
        tth_ttype ty = *tt(in[0]);
        ty.dtype = TTH_BOOL;
        CHECK(r = k_tensor(c, tth_tensor_new(&ty, NULL)));
    }
    out[0] = r;
    return 0;
}

static int op_tan(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    tth_rexpr *s, *co;
    CHECK(s = call1(c, TTH_OP_SIN, in[0], NULL));
    CHECK(co = call1(c, TTH_OP_COS, in[0], NULL));
    CHECK(out[0] = call2(c, TTH_OP_DIVIDE, s, co, NULL));
    return 0;
}

/* Sinh / Cosh: (exp(x) -/+ exp(-x)) / 2. */
static int hyp(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, tth_op combine)
{
    NEED(1);
    tth_rexpr *e1, *e2, *nx, *sum, *two = kx(c, in[0], 2.0);
    CHECK(two);
    CHECK(e1 = call1(c, TTH_OP_EXP, in[0], NULL));
    CHECK(nx = call1(c, TTH_OP_NEGATIVE, in[0], NULL));
    CHECK(e2 = call1(c, TTH_OP_EXP, nx, NULL));
    CHECK(sum = call2(c, combine, e1, e2, NULL));
    CHECK(out[0] = call2(c, TTH_OP_DIVIDE, sum, two, NULL));
    return 0;
}
static int op_sinh(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    return hyp(c, in, nin, out, TTH_OP_SUBTRACT);
}
static int op_cosh(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    return hyp(c, in, nin, out, TTH_OP_ADD);
}

/* The mean of x over axes, d = x - mean and the (biased) variance mean(d * d) (keepdims). */
static int moments(tth_onnx_ctx *c, tth_rexpr *x, const int64_t *axes, int na, tth_rexpr **mean_out,
                   tth_rexpr **d_out, tth_rexpr **var_out)
{
    tth_rexpr *mean, *d, *sq;
    CHECK(mean = call1(c, TTH_OP_MEAN, x, json_pack("{s:o,s:b}", "axis", tth__json_ints(axes, na), "keepdims", 1)));
    CHECK(d = call2(c, TTH_OP_SUBTRACT, x, mean, NULL));
    CHECK(sq = call2(c, TTH_OP_MULTIPLY, d, d, NULL));
    CHECK(*var_out = call1(c, TTH_OP_MEAN, sq, json_pack("{s:o,s:b}", "axis", tth__json_ints(axes, na), "keepdims", 1)));
    *mean_out = mean;
    *d_out = d;
    return 0;
}

/* Normalize x over axes: returns d = x - mean and inv = 1 / sqrt(var + eps) (keepdims). */
static int normalize(tth_onnx_ctx *c, tth_rexpr *x, const int64_t *axes, int na, double eps, int sqrt_then_add,
                     tth_rexpr **mean_out, tth_rexpr **d_out, tth_rexpr **inv_out)
{
    tth_rexpr *var, *ke = kx(c, x, eps), *one = kx(c, x, 1.0), *den;
    CHECK(ke && one);
    int rc = moments(c, x, axes, na, mean_out, d_out, &var);
    if (rc)
        return rc;
    if (sqrt_then_add) {
        CHECK(den = call1(c, TTH_OP_SQRT, var, NULL));
        CHECK(den = call2(c, TTH_OP_ADD, den, ke, NULL));
    } else {
        CHECK(den = call2(c, TTH_OP_ADD, var, ke, NULL));
        CHECK(den = call1(c, TTH_OP_SQRT, den, NULL));
    }
    CHECK(*inv_out = call2(c, TTH_OP_DIVIDE, one, den, NULL));
    return 0;
}

/* running * momentum + batch * (1 - momentum): BatchNormalization's running statistic */
static tth_rexpr *running_stat(tth_onnx_ctx *c, tth_rexpr *running, tth_rexpr *batch, double momentum)
{
    tth_rexpr *km = kx(c, running, momentum), *k1 = kx(c, running, 1.0 - momentum);
    tth_rexpr *a = km ? call2(c, TTH_OP_MULTIPLY, running, km, NULL) : NULL;
    tth_rexpr *b = a && k1 ? call2(c, TTH_OP_MULTIPLY, cast_to(c, batch, tt(running)->dtype), k1, NULL) : NULL;
    return b ? call2(c, TTH_OP_ADD, a, b, NULL) : NULL;
}

/* BatchNormalization with training_mode=1: x normalized with the batch's own mean and biased
 * variance over every axis but 1 (nn.batch_norm with those statistics); the optional outputs 1
 * and 2 are input_mean * momentum + mean * (1 - momentum) and the same for the variance. */
static int batch_norm_training(tth_onnx_ctx *c, tth_rexpr **in, tth_rexpr **out, size_t nout)
{
    int r = rank(in[0]);
    if (r < 2)
        return tth__onnx_fail(c, TTH_EMODEL, "BatchNormalization needs rank >= 2");
    int64_t axes[TTH_MAX_RANK], C = tt(in[0])->shape[1];
    int na = 0;
    for (int i = 0; i < r; i++)
        if (i != 1)
            axes[na++] = i;
    tth_rexpr *mean, *d, *var;
    int rc = moments(c, in[0], axes, na, &mean, &d, &var);
    if (rc)
        return rc;
    CHECK((mean = reshape(c, mean, &C, 1)) && (var = reshape(c, var, &C, 1)));
    tth_rexpr *args[5] = {in[0], in[1], in[2], mean, var};
    CHECK(out[0] = call(c, TTH_OP_BATCH_NORM, args, 5, json_pack("{s:f}", "epsilon", af(c, "epsilon", 1e-5))));
    double momentum = af(c, "momentum", 0.9);
    if (nout > 1 && c->node->output[1] && c->node->output[1][0])
        CHECK(out[1] = running_stat(c, in[3], mean, momentum));
    if (nout > 2 && c->node->output[2] && c->node->output[2][0])
        CHECK(out[2] = running_stat(c, in[4], var, momentum));
    return 0;
}

/* LayerNormalization (17): normalize over axis..rank-1; Y, Mean, InvStdDev. */
static int op_layer_norm(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(2);
    int r = rank(in[0]);
    int64_t axis, axes[TTH_MAX_RANK];
    if (norm_axis(c, ai(c, "axis", -1), r, &axis))
        return c->diag->code;
    int na = 0;
    for (int64_t i = axis; i < r; i++)
        axes[na++] = i;
    if (axis == r - 1 && nout == 1 && tt(in[0])->dtype == TTH_F32) {
        /* over the last axis, only Y asked for: the one operator with a kernel of its own
         * (docs/lowering.md, "Layer normalization"); a missing B is zeros */
        tth_rexpr *b = nin > 2 && in[2] ? in[2] : k_scalar(c, TTH_F32, 0), *args[3] = {in[0], in[1], b};
        CHECK(b);
        CHECK(out[0] = call(c, TTH_OP_LAYER_NORM, args, 3, json_pack("{s:f}", "epsilon", af(c, "epsilon", 1e-5))));
        return 0;
    }
    tth_rexpr *mean, *d, *inv, *y;
    int rc = normalize(c, in[0], axes, na, af(c, "epsilon", 1e-5), 0, &mean, &d, &inv);
    if (rc)
        return rc;
    CHECK(y = call2(c, TTH_OP_MULTIPLY, d, inv, NULL));
    CHECK(y = call2(c, TTH_OP_MULTIPLY, y, in[1], NULL));
    if (nin > 2 && in[2])
        CHECK(y = call2(c, TTH_OP_ADD, y, in[2], NULL));
    out[0] = y;
    if (nout > 1)
        out[1] = mean;
    if (nout > 2)
        out[2] = inv;
    return 0;
}

/* Per-channel [C] vector as [C, 1, ...] for a rank-r activation. */
static tth_rexpr *per_channel(tth_onnx_ctx *c, tth_rexpr *v, int r)
{
    int64_t s[TTH_MAX_RANK];
    s[0] = tth_ttype_numel(tt(v));
    for (int i = 1; i < r - 1; i++)
        s[i] = 1;
    return reshape(c, v, s, r - 1 > 0 ? r - 1 : 1);
}

/* InstanceNormalization: normalize each (n, c) over the spatial dims; scale and B per channel. */
static int op_instance_norm(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(3);
    int r = rank(in[0]);
    if (r < 3)
        return tth__onnx_fail(c, TTH_EMODEL, "InstanceNormalization needs rank >= 3");
    int64_t axes[TTH_MAX_RANK];
    int na = 0;
    for (int i = 2; i < r; i++)
        axes[na++] = i;
    tth_rexpr *mean, *d, *inv, *y, *sc = per_channel(c, in[1], r), *b = per_channel(c, in[2], r);
    CHECK(sc && b);
    int rc = normalize(c, in[0], axes, na, af(c, "epsilon", 1e-5), 0, &mean, &d, &inv);
    if (rc)
        return rc;
    CHECK(y = call2(c, TTH_OP_MULTIPLY, d, inv, NULL));
    CHECK(y = call2(c, TTH_OP_MULTIPLY, y, sc, NULL));
    CHECK(out[0] = call2(c, TTH_OP_ADD, y, b, NULL));
    return 0;
}

/* GroupNormalization (18, 21): x of (N, C, ...) seen as (N, G, C/G * the rest), normalized over
 * its last axis, then scale and bias per channel: given per group at opset 18 (each repeated
 * for the group's channels), per channel from opset 21 (docs/operators.md, "Opsets 18 to 21") */
static int op_group_norm(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(3);
    const tth_ttype *xt = tt(in[0]);
    int r = xt->rank;
    int64_t G = ai(c, "num_groups", 0);
    if (r < 3)
        return tth__onnx_fail(c, TTH_EMODEL, "GroupNormalization needs rank >= 3");
    int64_t N = xt->shape[0], C = xt->shape[1], rest = 1;
    if (G < 1 || C % G)
        return tth__onnx_fail(c, TTH_EMODEL, "GroupNormalization num_groups %lld does not divide %lld channels",
                              (long long)G, (long long)C);
    for (int i = 2; i < r; i++)
        rest *= xt->shape[i];
    int64_t per = c->opset >= 21 ? C : G;
    for (int k = 1; k < 3; k++)
        if (tth_ttype_numel(tt(in[k])) != per)
            return tth__onnx_fail(c, TTH_EMODEL, "GroupNormalization %s has %lld values; opset %lld wants one per %s "
                                  "(%lld)", k == 1 ? "scale" : "bias", (long long)tth_ttype_numel(tt(in[k])),
                                  (long long)c->opset, c->opset >= 21 ? "channel" : "group", (long long)per);
    int64_t s3[3] = {N, G, C / G * rest}, axis = 2;
    tth_rexpr *x3, *mean, *d, *inv, *y, *sc = in[1], *b = in[2];
    CHECK(x3 = reshape(c, in[0], s3, 3));
    int rc = normalize(c, x3, &axis, 1, af(c, "epsilon", 1e-5), 0, &mean, &d, &inv);
    if (rc)
        return rc;
    CHECK(y = call2(c, TTH_OP_MULTIPLY, d, inv, NULL));
    CHECK(y = reshape(c, y, xt->shape, r));
    if (per == G && G != C) { /* one value per group: repeated for its C/G channels */
        int64_t g2[2] = {G, 1}, gc[2] = {G, C / G};
        for (int k = 0; k < 2; k++) {
            tth_rexpr **v = k ? &b : &sc;
            CHECK(*v = reshape(c, *v, g2, 2));
            CHECK(*v = call1(c, TTH_OP_BROADCAST_TO, *v, json_pack("{s:o}", "shape", tth__json_ints(gc, 2))));
            CHECK(*v = reshape(c, *v, &C, 1));
        }
    }
    CHECK(sc = per_channel(c, sc, r));
    CHECK(b = per_channel(c, b, r));
    CHECK(y = call2(c, TTH_OP_MULTIPLY, y, sc, NULL));
    CHECK(out[0] = call2(c, TTH_OP_ADD, y, b, NULL));
    return 0;
}

/* MeanVarianceNormalization: (x - mean) / (sqrt(var) + 1e-9) over axes (default 0, 2, 3). */
static int op_mvn(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    int r = rank(in[0]);
    int64_t axes[MAXV] = {0, 2, 3};
    int na = aints(c, "axes", axes, MAXV);
    if (na == -2)
        return c->diag->code;
    if (na < 0)
        na = 3;
    for (int i = 0; i < na; i++)
        if (norm_axis(c, axes[i], r, &axes[i]))
            return c->diag->code;
    tth_rexpr *mean, *d, *inv;
    int rc = normalize(c, in[0], axes, na, 1e-9, 1, &mean, &d, &inv);
    if (rc)
        return rc;
    CHECK(out[0] = call2(c, TTH_OP_MULTIPLY, d, inv, NULL));
    return 0;
}

/* Hardmax: 1 at the first maximum along the axis (flattened to 2-D before opset 13). */
static int op_hardmax(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    int r = rank(in[0]);
    int64_t axis;
    if (norm_axis(c, ai(c, "axis", c->opset < 13 ? 1 : -1), r, &axis))
        return c->diag->code;
    tth_rexpr *x = in[0];
    if (c->opset < 13) {
        int64_t s[2] = {1, 1};
        for (int i = 0; i < r; i++)
            s[i < axis ? 0 : 1] *= tt(x)->shape[i];
        CHECK(x = reshape(c, x, s, 2));
        axis = 1;
    }
    int xr = rank(x);
    int64_t d = tt(x)->shape[axis];
    if (d > TTH_IMPORT_MAX_ELEMS)
        return tth__onnx_fail(c, TTH_ELIMIT, "Hardmax axis too long");
    tth_ttype it = {.dtype = TTH_I64, .rank = xr};
    for (int i = 0; i < xr; i++)
        it.shape[i] = i == axis ? d : 1;
    tth_tensor *iota = tth_tensor_new(&it, NULL);
    for (int64_t i = 0; iota && i < d; i++)
        ((int64_t *)iota->data)[i] = i;
    tth_rexpr *k, *am, *eq;
    CHECK(k = k_tensor(c, iota));
    CHECK(am = call1(c, TTH_OP_ARGMAX, x,
                     json_pack("{s:I,s:b,s:b}", "axis", (json_int_t)axis, "keepdims", 1, "select_last_index", 0)));
    CHECK(eq = call2(c, TTH_OP_EQUAL, am, k, NULL));
    CHECK(eq = cast_to(c, eq, tt(x)->dtype));
    CHECK(out[0] = reshape(c, eq, tt(in[0])->shape, r));
    return 0;
}

/* Trilu: keep the upper (j - i >= k) or lower (j - i <= k) triangle of the last two dims. */
static int op_trilu(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    int r = rank(in[0]);
    if (r < 2)
        return tth__onnx_fail(c, TTH_EMODEL, "Trilu needs rank >= 2");
    double k = 0;
    if (nin > 1 && in[1] && vscalar(c, in[1], "k", &k))
        return c->diag->code;
    int upper = (int)ai(c, "upper", 1);
    int64_t M = tt(in[0])->shape[r - 2], N = tt(in[0])->shape[r - 1];
    if (M * N > TTH_IMPORT_MAX_ELEMS)
        return tth__onnx_fail(c, TTH_ELIMIT, "Trilu matrix too large");
    tth_ttype mt = {.dtype = TTH_BOOL, .rank = 2, .shape = {M, N}};
    tth_tensor *mask = tth_tensor_new(&mt, NULL);
    for (int64_t i = 0; mask && i < M; i++)
        for (int64_t j = 0; j < N; j++)
            ((uint8_t *)mask->data)[i * N + j] = upper ? (double)(j - i) >= k : (double)(j - i) <= k;
    tth_rexpr *mk, *z = kx(c, in[0], 0);
    CHECK(z);
    CHECK(mk = k_tensor(c, mask));
    tth_rexpr *args[3] = {mk, in[0], z};
    CHECK(out[0] = call(c, TTH_OP_WHERE, args, 3, NULL));
    return 0;
}

/* LRN: x / (bias + alpha / size * sum of squares over a window of channels) ^ beta; the window
 * sum is an average pool (count_include_pad) over the channel axis, times size. */
static int op_lrn(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    if (rank(in[0]) != 4)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "unsupported attribute value: LRN of rank %d (4-D only)", rank(in[0]));
    int64_t size = ai(c, "size", 0), N = tt(in[0])->shape[0], C = tt(in[0])->shape[1],
            HW = tt(in[0])->shape[2] * tt(in[0])->shape[3];
    if (size < 1 || size > 1 << 16)
        return tth__onnx_fail(c, TTH_EMODEL, "LRN size %lld out of range", (long long)size);
    double alpha = af(c, "alpha", 1e-4), beta = af(c, "beta", 0.75), bias = af(c, "bias", 1.0);
    int64_t s4[4] = {N, 1, C, HW}, lo = (size - 1) / 2, hi = size - 1 - lo;
    tth_rexpr *sq, *p, *t;
    CHECK(sq = call2(c, TTH_OP_MULTIPLY, in[0], in[0], NULL));
    CHECK(sq = reshape(c, sq, s4, 4));
    int64_t ps[2] = {size, 1}, one2[2] = {1, 1}, pad[4] = {lo, 0, hi, 0};
    CHECK(p = call1(c, TTH_OP_AVG_POOL2D, sq,
                    json_pack("{s:o,s:o,s:o,s:b}", "pool_size", tth__json_ints(ps, 2), "strides", tth__json_ints(one2, 2),
                              "padding", tth__json_ints(pad, 4), "count_include_pad", 1)));
    CHECK(p = reshape(c, p, tt(in[0])->shape, 4));
    tth_rexpr *ka = kx(c, in[0], alpha), *kb = kx(c, in[0], bias), *kbeta = kx(c, in[0], beta);
    CHECK(ka && kb && kbeta);
    CHECK(t = call2(c, TTH_OP_MULTIPLY, p, ka, NULL)); /* avg * size * alpha / size */
    CHECK(t = call2(c, TTH_OP_ADD, t, kb, NULL));
    CHECK(t = call2(c, TTH_OP_POWER, t, kbeta, NULL));
    CHECK(out[0] = call2(c, TTH_OP_DIVIDE, in[0], t, NULL));
    return 0;
}

/* ---------------------------------------------------------------- training (ai.onnx.preview.training) */

/* A float attribute the operator requires (Momentum's): 0, or a diagnostic naming it when it is
 * absent or not a float. */
static int af_required(tth_onnx_ctx *c, const char *name, double *out)
{
    const Onnx__AttributeProto *a = attr(c, name);
    if (!a || !a->has_f)
        return tth__onnx_fail(c, TTH_EMODEL, "'%s' requires the float attribute '%s'", c->node->op_type, name);
    *out = a->f;
    return 0;
}

/* x * k for a constant k of x's dtype. */
static tth_rexpr *scale_by(tth_onnx_ctx *c, tth_rexpr *x, double k)
{
    tth_rexpr *kk = x ? kx(c, x, k) : NULL;
    return kk ? call2(c, TTH_OP_MULTIPLY, x, kk, NULL) : NULL;
}

/* The optimizers' inputs R, T, then `groups` lists of n tensors each (X..., G..., V..., H...):
 * checks the counts, that R and T hold one value each (T an integer) and that the tensors of one
 * index are float of one shape. Sets *n, and R and T as rank-0 values of X's dtype (R cast). */
static int optimizer_inputs(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, size_t nout, int groups, size_t *n,
                            tth_rexpr **r, tth_rexpr **t)
{
    NEED(2);
    if (nin < 2 + (size_t)groups || (nin - 2) % (size_t)groups)
        return tth__onnx_fail(c, TTH_EMODEL, "'%s' takes R, T and %d lists of as many tensors; it has %zu inputs",
                              c->node->op_type, groups, nin);
    *n = (nin - 2) / (size_t)groups;
    if (nout != *n * (size_t)(groups - 1))
        return tth__onnx_fail(c, TTH_EMODEL, "'%s' of %zu tensors has %zu outputs; the node lists %zu",
                              c->node->op_type, *n, *n * (size_t)(groups - 1), nout);
    for (size_t i = 2; i < nin; i++) {
        tth_rexpr *x = in[2 + (i - 2) % *n];
        if (!in[i] || !tth_dtype_is_float(tt(in[i])->dtype) || tt(in[i])->dtype != tt(x)->dtype ||
            rank(in[i]) != rank(x) || memcmp(tt(in[i])->shape, tt(x)->shape, sizeof(int64_t) * (size_t)rank(x)))
            return tth__onnx_fail(c, TTH_EMODEL, "input %zu of '%s' is absent, not float, or not of the dtype and "
                                  "shape of the tensor it updates (input %zu)", i, c->node->op_type, 2 + (i - 2) % *n);
    }
    if (tth_ttype_numel(tt(in[0])) != 1 || !tth_dtype_is_float(tt(in[0])->dtype))
        return tth__onnx_fail(c, TTH_EMODEL, "the learning rate R of '%s' must be one float", c->node->op_type);
    if (tth_ttype_numel(tt(in[1])) != 1 || tth_dtype_is_float(tt(in[1])->dtype))
        return tth__onnx_fail(c, TTH_EMODEL, "the step count T of '%s' must be one integer", c->node->op_type);
    tth_dtype dt = tt(in[2])->dtype;
    int64_t scalar[1] = {1};
    CHECK(*r = cast_to(c, reshape(c, in[0], scalar, 0), dt));
    CHECK(*t = cast_to(c, reshape(c, in[1], scalar, 0), dt));
    return 0;
}

/* norm_coefficient * x + g: the gradient with the L2 regularization's term. */
static tth_rexpr *regularized(tth_onnx_ctx *c, tth_rexpr *x, tth_rexpr *g, double norm)
{
    tth_rexpr *nx = scale_by(c, x, norm);
    return nx ? call2(c, TTH_OP_ADD, nx, g, NULL) : NULL;
}

/* The scalar where(T > 0, a, b). */
static tth_rexpr *if_t_positive(tth_onnx_ctx *c, tth_rexpr *t, tth_rexpr *a, tth_rexpr *b)
{
    tth_rexpr *zero = kx(c, t, 0), *pos = zero ? call2(c, TTH_OP_GREATER, t, zero, NULL) : NULL;
    tth_rexpr *wa[3] = {pos, a, b};
    return pos && a && b ? call(c, TTH_OP_WHERE, wa, 3, NULL) : NULL;
}

/* Adagrad(R, T, X..., G..., H...) -> X_new..., H_new...: with r = R / (1 + T * decay_factor) and
 * g = norm_coefficient * X + G, H_new = H + g * g and X_new = X - r * g / (sqrt(H_new) + epsilon).
 * Defaults: decay_factor 0, epsilon 1e-6, norm_coefficient 0. */
static int op_adagrad(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    size_t n;
    tth_rexpr *r, *t, *d;
    int rc = optimizer_inputs(c, in, nin, nout, 3, &n, &r, &t);
    if (rc)
        return rc;
    double decay = af(c, "decay_factor", 0), eps = af(c, "epsilon", 1e-6), norm = af(c, "norm_coefficient", 0);
    CHECK(d = scale_by(c, t, decay));
    CHECK(d = call2(c, TTH_OP_ADD, d, kx(c, t, 1), NULL));
    CHECK(r = call2(c, TTH_OP_DIVIDE, r, d, NULL));
    for (size_t i = 0; i < n; i++) {
        tth_rexpr *x = in[2 + i], *g, *h, *s, *u;
        CHECK(g = regularized(c, x, in[2 + n + i], norm));
        CHECK(h = call2(c, TTH_OP_MULTIPLY, g, g, NULL));
        CHECK(h = call2(c, TTH_OP_ADD, in[2 + 2 * n + i], h, NULL));
        CHECK(s = call1(c, TTH_OP_SQRT, h, NULL));
        CHECK(s = call2(c, TTH_OP_ADD, s, kx(c, s, eps), NULL));
        CHECK(u = call2(c, TTH_OP_MULTIPLY, r, g, NULL));
        CHECK(u = call2(c, TTH_OP_DIVIDE, u, s, NULL));
        CHECK(out[i] = call2(c, TTH_OP_SUBTRACT, x, u, NULL));
        out[n + i] = h;
    }
    return 0;
}

/* Momentum(R, T, X..., G..., V...) -> X_new..., V_new...: with g = norm_coefficient * X + G,
 * V_new = alpha * V + beta' * g where beta' is beta when T > 0 and 1 on the first step; mode
 * "standard": X_new = X - R * V_new; "nesterov": X_new = X - R * (g + alpha * V_new). All four
 * attributes are required. */
static int op_momentum(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    size_t n;
    tth_rexpr *r, *t, *b;
    double alpha = 0, beta = 0, norm = 0;
    int rc = optimizer_inputs(c, in, nin, nout, 3, &n, &r, &t);
    if (!rc)
        rc = af_required(c, "alpha", &alpha);
    if (!rc)
        rc = af_required(c, "beta", &beta);
    if (!rc)
        rc = af_required(c, "norm_coefficient", &norm);
    if (rc)
        return rc;
    const char *mode = as(c, "mode", "");
    int nesterov = !strcmp(mode, "nesterov");
    if (!nesterov && strcmp(mode, "standard"))
        return tth__onnx_fail(c, TTH_EMODEL, "Momentum's mode '%s' is not 'standard' or 'nesterov'", mode);
    CHECK(b = if_t_positive(c, t, kx(c, t, beta), kx(c, t, 1)));
    for (size_t i = 0; i < n; i++) {
        tth_rexpr *x = in[2 + i], *g, *v, *u;
        CHECK(g = regularized(c, x, in[2 + n + i], norm));
        CHECK(u = call2(c, TTH_OP_MULTIPLY, b, g, NULL));
        CHECK(v = scale_by(c, in[2 + 2 * n + i], alpha));
        CHECK(v = call2(c, TTH_OP_ADD, v, u, NULL));
        u = v;
        if (nesterov) {
            CHECK(u = scale_by(c, v, alpha));
            CHECK(u = call2(c, TTH_OP_ADD, g, u, NULL));
        }
        CHECK(u = call2(c, TTH_OP_MULTIPLY, r, u, NULL));
        CHECK(out[i] = call2(c, TTH_OP_SUBTRACT, x, u, NULL));
        out[n + i] = v;
    }
    return 0;
}

/* Adam's step size: R * sqrt(1 - beta^T) / (1 - alpha^T) when T > 0, else R. */
static tth_rexpr *adam_rate(tth_onnx_ctx *c, tth_rexpr *r, tth_rexpr *t, double alpha, double beta)
{
    tth_rexpr *one = kx(c, t, 1), *pa, *pb, *q;
    if (!one || !(pa = call2(c, TTH_OP_POWER, kx(c, t, alpha), t, NULL)) ||
        !(pb = call2(c, TTH_OP_POWER, kx(c, t, beta), t, NULL)) || !(pa = call2(c, TTH_OP_SUBTRACT, one, pa, NULL)) ||
        !(pb = call2(c, TTH_OP_SUBTRACT, one, pb, NULL)) || !(pb = call1(c, TTH_OP_SQRT, pb, NULL)) ||
        !(q = call2(c, TTH_OP_MULTIPLY, r, pb, NULL)) || !(q = call2(c, TTH_OP_DIVIDE, q, pa, NULL)))
        return NULL;
    return if_t_positive(c, t, q, r);
}

/* Adam(R, T, X..., G..., V..., H...) -> X_new..., V_new..., H_new...: with g = norm_coefficient *
 * X + G, V_new = alpha * V + (1 - alpha) * g, H_new = beta * H + (1 - beta) * g * g, X_new =
 * (1 - norm_coefficient_post) * (X - adam_rate * V_new / (sqrt(H_new) + epsilon)). Defaults:
 * alpha 0.9, beta 0.999, epsilon 1e-6, both norm coefficients 0. */
static int op_adam(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    size_t n;
    tth_rexpr *r, *t;
    int rc = optimizer_inputs(c, in, nin, nout, 4, &n, &r, &t);
    if (rc)
        return rc;
    double alpha = af(c, "alpha", 0.9), beta = af(c, "beta", 0.999), eps = af(c, "epsilon", 1e-6);
    double norm = af(c, "norm_coefficient", 0), post = af(c, "norm_coefficient_post", 0);
    CHECK(r = adam_rate(c, r, t, alpha, beta));
    for (size_t i = 0; i < n; i++) {
        tth_rexpr *x = in[2 + i], *g, *v, *h, *u, *s;
        CHECK(g = regularized(c, x, in[2 + n + i], norm));
        CHECK(v = call2(c, TTH_OP_ADD, scale_by(c, in[2 + 2 * n + i], alpha), scale_by(c, g, 1 - alpha), NULL));
        CHECK(h = call2(c, TTH_OP_MULTIPLY, g, g, NULL));
        CHECK(h = call2(c, TTH_OP_ADD, scale_by(c, in[2 + 3 * n + i], beta), scale_by(c, h, 1 - beta), NULL));
        CHECK(s = call1(c, TTH_OP_SQRT, h, NULL));
        CHECK(s = call2(c, TTH_OP_ADD, s, kx(c, s, eps), NULL));
        CHECK(u = call2(c, TTH_OP_DIVIDE, v, s, NULL));
        CHECK(u = call2(c, TTH_OP_MULTIPLY, r, u, NULL));
        CHECK(u = call2(c, TTH_OP_SUBTRACT, x, u, NULL));
        CHECK(out[i] = scale_by(c, u, 1 - post));
        out[n + i] = v;
        out[2 * n + i] = h;
    }
    return 0;
}

/* ---------------------------------------------------------------- Gradient */

/* A string-list attribute as NUL-terminated copies in the module arena: the count, -1 when
 * absent or of another type, -2 with a diagnostic when longer than max. */
static int astrings(tth_onnx_ctx *c, const char *name, const char **out, int max)
{
    const Onnx__AttributeProto *a = attr(c, name);
    if (!a || !a->n_strings)
        return -1;
    if (a->n_strings > (size_t)max) {
        tth__onnx_fail(c, TTH_EUNSUPPORTED, "attribute '%s' has %zu values (at most %d)", name, a->n_strings, max);
        return -2;
    }
    for (size_t i = 0; i < a->n_strings; i++) {
        char *s = tth_arena_alloc(c->m->arena, a->strings[i].len + 1);
        if (!s) {
            tth__onnx_fail(c, TTH_ENOMEM, "out of memory");
            return -2;
        }
        if (a->strings[i].len)
            memcpy(s, a->strings[i].data, a->strings[i].len);
        s[a->strings[i].len] = 0;
        out[i] = s;
    }
    return (int)a->n_strings;
}

/* The values between the xs and y, in post-order (y last), each with its adjoint and whether it
 * depends on an x; found by pointer through an open-addressing index. */
typedef struct grad_node {
    tth_rexpr *e, *adj;
    int active, is_x;
} grad_node;

typedef struct grad_graph {
    grad_node *nodes;
    size_t n, cap;
    size_t *slots; /* index + 1, 0 when free */
    size_t nslots;
} grad_graph;

#define GRAD_MAX_NODES ((size_t)1 << 20)

static size_t grad_slot(const grad_graph *g, const tth_rexpr *e)
{
    size_t j = ((uintptr_t)e >> 4) * 0x9E3779B97F4A7C15ull & (g->nslots - 1);
    while (g->slots[j] && g->nodes[g->slots[j] - 1].e != e)
        j = (j + 1) & (g->nslots - 1);
    return j;
}

/* The index of e in g, or -1. */
static int64_t grad_find(const grad_graph *g, const tth_rexpr *e)
{
    if (!g->nslots)
        return -1;
    size_t j = grad_slot(g, e);
    return g->slots[j] ? (int64_t)g->slots[j] - 1 : -1;
}

/* Appends e (not yet in g); 0 or TTH_ENOMEM / TTH_ELIMIT. */
static int grad_add(grad_graph *g, tth_rexpr *e, int active, int is_x)
{
    if (g->n >= GRAD_MAX_NODES)
        return TTH_ELIMIT;
    if (g->n == g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 64;
        grad_node *nn = realloc(g->nodes, cap * sizeof *nn);
        if (!nn)
            return TTH_ENOMEM;
        g->nodes = nn;
        g->cap = cap;
    }
    if (2 * (g->n + 1) > g->nslots) {
        size_t ns = g->nslots ? 2 * g->nslots : 128;
        free(g->slots);
        if (!(g->slots = calloc(ns, sizeof *g->slots)))
            return TTH_ENOMEM;
        g->nslots = ns;
        for (size_t i = 0; i < g->n; i++)
            g->slots[grad_slot(g, g->nodes[i].e)] = i + 1;
    }
    g->nodes[g->n] = (grad_node){.e = e, .active = active, .is_x = is_x};
    g->slots[grad_slot(g, e)] = ++g->n;
    return 0;
}

static void grad_free(grad_graph *g)
{
    free(g->nodes);
    free(g->slots);
}

/* Walks from y down to the xs (not below them) through each value's operands (tth__node_args:
 * a call's arguments, a tuple's fields, the tuple a field is taken from), depth first without
 * recursion, adding each value after its operands; a value is active when it is an x or an
 * operand of it is. */
static int grad_collect(tth_onnx_ctx *c, grad_graph *g, tth_rexpr *y, tth_rexpr **xs, size_t nx)
{
    typedef struct { tth_rexpr *e; size_t next; } frame;
    size_t sn = 0, scap = 64;
    frame *st = malloc(scap * sizeof *st);
    int rc = st ? 0 : TTH_ENOMEM;
    if (st)
        st[sn++] = (frame){y, 0};
    while (!rc && sn) {
        frame *f = &st[sn - 1];
        int is_x = 0;
        for (size_t i = 0; i < nx; i++)
            is_x |= xs[i] == f->e;
        tth_rexpr *const *kids;
        size_t nk = is_x ? 0 : tth__node_args(f->e, &kids);
        while (f->next < nk && grad_find(g, kids[f->next]) >= 0)
            f->next++;
        if (f->next < nk) {
            tth_rexpr *k = kids[f->next];
            if (sn == scap) {
                frame *ns = realloc(st, 2 * scap * sizeof *ns);
                if (!ns) {
                    rc = TTH_ENOMEM;
                    break;
                }
                st = ns;
                scap *= 2;
            }
            st[sn++] = (frame){k, 0};
            continue;
        }
        int active = is_x;
        for (size_t i = 0; i < nk; i++)
            active |= g->nodes[grad_find(g, kids[i])].active;
        rc = grad_add(g, f->e, active, is_x);
        sn--;
    }
    free(st);
    if (rc)
        return tth__onnx_fail(c, rc, rc == TTH_ENOMEM ? "out of memory" : "the graph to differentiate has more than "
                              "%zu values", GRAD_MAX_NODES);
    return 0;
}

/* grad (of the shape of a broadcast result) summed over the axes along which `to` was broadcast,
 * reshaped to `to`'s shape. */
static tth_rexpr *unbroadcast(tth_onnx_ctx *c, tth_rexpr *grad, const tth_rexpr *to)
{
    int r = rank(grad), k = rank(to), na = 0;
    int64_t axes[TTH_MAX_RANK];
    for (int i = 0; i < r; i++)
        if (i < r - k || (tt(to)->shape[i - (r - k)] == 1 && tt(grad)->shape[i] != 1))
            axes[na++] = i;
    if (na)
        grad = call1(c, TTH_OP_SUM, grad, json_pack("{s:o,s:b}", "axis", tth__json_ints(axes, na), "keepdims", 1));
    return reshape(c, grad, tt(to)->shape, k);
}

/* The contribution to operand `arg` of the call z = e (adjoint a): the derivative of add,
 * subtract, multiply, divide and negative times a, summed back to the operand's shape (over the
 * axes it was broadcast along); a reshaped back for reshape; NULL with a diagnostic for another
 * operator. */
static tth_rexpr *grad_operand(tth_onnx_ctx *c, tth_rexpr *e, size_t arg, tth_rexpr *a)
{
    tth_rexpr **x = e->u.call.args, *d = NULL;
    switch (e->kind == TTH_REXPR_CALL && !e->u.call.fn ? e->u.call.op : TTH_OP_INVALID) {
    case TTH_OP_ADD: d = a; break;
    case TTH_OP_SUBTRACT: d = arg ? call1(c, TTH_OP_NEGATIVE, a, NULL) : a; break;
    case TTH_OP_NEGATIVE: d = call1(c, TTH_OP_NEGATIVE, a, NULL); break;
    case TTH_OP_MULTIPLY: d = call2(c, TTH_OP_MULTIPLY, a, x[1 - arg], NULL); break;
    case TTH_OP_RESHAPE: return reshape(c, a, tt(x[0])->shape, rank(x[0]));
    case TTH_OP_DIVIDE:
        if (!arg) {
            d = call2(c, TTH_OP_DIVIDE, a, x[1], NULL);
        } else { /* d(x0 / x1)/d(x1) = -x0 / x1^2 */
            tth_rexpr *q = call2(c, TTH_OP_DIVIDE, x[0], call2(c, TTH_OP_MULTIPLY, x[1], x[1], NULL), NULL);
            d = call1(c, TTH_OP_NEGATIVE, call2(c, TTH_OP_MULTIPLY, a, q, NULL), NULL);
        }
        break;
    default: {
        const char *what = e->kind == TTH_REXPR_CALL && !e->u.call.fn ? tth_op_name(e->u.call.op)
                           : e->kind == TTH_REXPR_CALL ? "a function call" : "a tuple";
        tth__onnx_fail(c, TTH_EUNSUPPORTED, "Gradient through operator '%s'%s%s%s is not supported", what,
                       e->span ? " (node '" : "", e->span ? e->span : "", e->span ? "')" : "");
        tth_diag_hint(c->diag, "tth differentiates Add, Sub, Mul, Div, Neg and Reshape (docs/operators.md "
                               "\"Training operators\")");
        return NULL;
    }
    }
    return d ? unbroadcast(c, d, x[arg]) : NULL;
}

/* Reverse-mode differentiation over g (y last): y's adjoint is `seed`, each active call passes
 * its adjoint's contributions on to its active operands, summed where a value has several
 * users. The xs' adjoints are then in g. */
static int grad_backward(tth_onnx_ctx *c, grad_graph *g, tth_rexpr *seed)
{
    g->nodes[g->n - 1].adj = seed;
    for (size_t i = g->n; i-- > 0;) {
        grad_node *v = &g->nodes[i];
        if (!v->adj || !v->active || v->is_x)
            continue;
        tth_rexpr *const *kids;
        size_t nk = tth__node_args(v->e, &kids);
        for (size_t k = 0; k < nk; k++) {
            grad_node *o = &g->nodes[grad_find(g, kids[k])];
            if (!o->active)
                continue;
            tth_rexpr *d = grad_operand(c, v->e, k, v->adj);
            CHECK(d);
            CHECK(o->adj = o->adj ? call2(c, TTH_OP_ADD, o->adj, d, NULL) : d);
        }
    }
    return 0;
}

/* The constant v broadcast to the shape of `like`. */
static tth_rexpr *filled_like(tth_onnx_ctx *c, tth_rexpr *like, double v)
{
    tth_rexpr *k = kx(c, like, v);
    return k ? call1(c, TTH_OP_BROADCAST_TO, k, json_pack("{s:o}", "shape", tth__json_ints(tt(like)->shape,
                                                                                           rank(like)))) : NULL;
}

/* The values a Gradient node names: xs (the node's first inputs must be their values), y, and
 * the count of zs (the inputs after the xs). */
static int gradient_names(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, size_t nout, const char **xs, int *nx,
                          tth_rexpr **y)
{
    const char *zs[MAXV], *yname = as(c, "y", NULL);
    *nx = astrings(c, "xs", xs, MAXV);
    int nz = astrings(c, "zs", zs, MAXV);
    if (*nx == -2 || nz == -2)
        return c->diag->code;
    if (*nx < 1 || !yname)
        return tth__onnx_fail(c, TTH_EMODEL, "Gradient needs the attributes 'xs' (names) and 'y' (a name)");
    nz = nz < 0 ? 0 : nz;
    if (nin != (size_t)(*nx + nz) || nout != (size_t)*nx)
        return tth__onnx_fail(c, TTH_EMODEL, "Gradient takes one input per name of xs and zs (%d) and gives one output "
                              "per name of xs (%d); the node has %zu inputs and %zu outputs", *nx + nz, *nx, nin, nout);
    for (int i = 0; i < *nx; i++)
        if (!in[i] || in[i] != tth__onnx_value(c, xs[i]))
            return tth__onnx_fail(c, TTH_EUNSUPPORTED, "input %d of Gradient is not the value of '%s' (xs[%d]): "
                                  "tth differentiates the graph as computed", i, xs[i], i);
    *y = tth__onnx_value(c, yname);
    if (!*y || (*y)->type.nfields >= 0 || !tth_dtype_is_float(tt(*y)->dtype))
        return tth__onnx_fail(c, TTH_EMODEL, "Gradient's y '%s' is not a float tensor computed before the node", yname);
    return 0;
}

/* Gradient (ai.onnx.preview.training): outputs dy/dx for each x of the attribute xs, y being
 * the tensor the attribute y names; reverse-mode differentiation over the values between them,
 * seeded with ones of y's shape (so each output is the gradient of the sum of y). An x y does
 * not depend on gets zeros. docs/operators.md "Training operators". */
static int op_gradient(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    const char *xs[MAXV];
    int nx = 0;
    tth_rexpr *y = NULL, *seed;
    int rc = tensor_input(c, in, nin);
    if (!rc)
        rc = gradient_names(c, in, nin, nout, xs, &nx, &y);
    if (rc)
        return rc;
    for (int i = 0; i < nx; i++) {
        if (!tth_dtype_is_float(tt(in[i])->dtype))
            return tth__onnx_fail(c, TTH_EMODEL, "Gradient with respect to '%s', which is not float", xs[i]);
        if (in[i]->kind == TTH_REXPR_CONST) /* what was computed from it is folded away */
            return tth__onnx_fail(c, TTH_EUNSUPPORTED, "Gradient with respect to '%s', a constant: the importer "
                                  "folds what is computed from constants, so tth cannot differentiate it", xs[i]);
    }
    grad_graph g = {0};
    rc = grad_collect(c, &g, y, in, (size_t)nx);
    if (!rc && !(seed = filled_like(c, y, 1)))
        rc = c->diag->code;
    if (!rc)
        rc = grad_backward(c, &g, seed);
    for (int i = 0; !rc && i < nx; i++) {
        int64_t k = grad_find(&g, in[i]);
        out[i] = k >= 0 && g.nodes[k].adj ? g.nodes[k].adj : filled_like(c, in[i], 0);
        if (!out[i] || tt(out[i])->dtype != tt(in[i])->dtype)
            rc = out[i] ? tth__onnx_fail(c, TTH_EMODEL, "the gradient of '%s' is not of its dtype", xs[i])
                        : c->diag->code;
    }
    grad_free(&g);
    return rc;
}

/* ---------------------------------------------------------------- TfIdfVectorizer */

#define TFIDF_MAX_POOL ((size_t)1 << 20)   /* pool and index lengths */
#define TFIDF_MAX_GRAM 64                  /* n-gram length */
#define TFIDF_MAX_WORK ((int64_t)1 << 24)  /* element comparisons */

/* The pool of a TfIdfVectorizer: n-grams of length n (1..ngroups) are pool[start[n-1] ..
 * start[n]) (the last up to the pool's end), each mapped to output column index[k] (k counting
 * the pool's n-grams in order); out_size is the largest column + 1. */
typedef struct tfidf_pool {
    const int64_t *pool, *start, *index;
    int64_t npool, ngroups, nindex, out_size;
    int64_t min_n, max_n, max_skip;
} tfidf_pool;

/* The end of group n's n-grams in the pool. */
static int64_t tfidf_group_end(const tfidf_pool *p, int64_t n)
{
    return n < p->ngroups ? p->start[n] : p->npool;
}

/* Reads and checks the gram lengths, the pool, ngram_counts and ngram_indexes. */
static int tfidf_read_pool(tth_onnx_ctx *c, tfidf_pool *p)
{
    if (attr(c, "pool_strings"))
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "TfIdfVectorizer over strings (pool_strings) is not supported");
    p->min_n = ai(c, "min_gram_length", 0);
    p->max_n = ai(c, "max_gram_length", 0);
    p->max_skip = ai(c, "max_skip_count", -1);
    if (p->min_n < 1 || p->max_n < p->min_n || p->max_n > TFIDF_MAX_GRAM || p->max_skip < 0 ||
        p->max_skip > TTH_IMPORT_MAX_WINDOW)
        return tth__onnx_fail(c, TTH_EMODEL, "TfIdfVectorizer needs 1 <= min_gram_length <= max_gram_length <= %d and "
                              "0 <= max_skip_count <= %d (has %lld, %lld, %lld)", TFIDF_MAX_GRAM, TTH_IMPORT_MAX_WINDOW,
                              (long long)p->min_n, (long long)p->max_n, (long long)p->max_skip);
    p->npool = aints_view(c, "pool_int64s", TFIDF_MAX_POOL, TTH_ELIMIT, &p->pool);
    p->ngroups = aints_view(c, "ngram_counts", TFIDF_MAX_POOL, TTH_ELIMIT, &p->start);
    p->nindex = aints_view(c, "ngram_indexes", TFIDF_MAX_POOL, TTH_ELIMIT, &p->index);
    if (p->npool == -2 || p->ngroups == -2 || p->nindex == -2)
        return c->diag->code;
    if (p->npool < 0 || p->ngroups < 1 || p->nindex < 0 || p->ngroups > TFIDF_MAX_GRAM || p->start[0] != 0)
        return tth__onnx_fail(c, TTH_EMODEL, "TfIdfVectorizer needs pool_int64s, ngram_counts (1 to %d starts, the "
                              "first 0) and ngram_indexes", TFIDF_MAX_GRAM);
    int64_t grams = 0;
    for (int64_t n = 1; n <= p->ngroups; n++) {
        int64_t lo = p->start[n - 1], hi = tfidf_group_end(p, n);
        if (hi < lo || hi > p->npool || (hi - lo) % n)
            return tth__onnx_fail(c, TTH_EMODEL, "ngram_counts[%lld] = %lld: the %lld-grams do not span whole n-grams "
                                  "of the pool (%lld values)", (long long)n - 1, (long long)lo, (long long)n,
                                  (long long)p->npool);
        grams += (hi - lo) / n;
    }
    if (grams != p->nindex || !grams)
        return tth__onnx_fail(c, TTH_EMODEL, "the pool holds %lld n-grams; ngram_indexes has %lld values", (long long)grams,
                              (long long)p->nindex);
    p->out_size = 0;
    for (int64_t k = 0; k < p->nindex; k++) {
        if (p->index[k] < 0 || p->index[k] >= (int64_t)TFIDF_MAX_POOL)
            return tth__onnx_fail(c, TTH_EMODEL, "ngram_indexes[%lld] = %lld is out of range", (long long)k,
                                  (long long)p->index[k]);
        p->out_size = p->index[k] + 1 > p->out_size ? p->index[k] + 1 : p->out_size;
    }
    return 0;
}

/* Element k of each of the g n-grams starting at pool[lo] as a constant [1, 1, g]. */
static tth_rexpr *tfidf_column(tth_onnx_ctx *c, const tfidf_pool *p, int64_t lo, int64_t n, int64_t g, int64_t k)
{
    tth_ttype ty = {.dtype = TTH_I64, .rank = 3, .shape = {1, 1, g}};
    tth_tensor *t = tth_tensor_new(&ty, NULL);
    for (int64_t j = 0; t && j < g; j++)
        ((int64_t *)t->data)[j] = p->pool[lo + j * n + k];
    return k_tensor(c, t);
}

/* How often each of the g n-grams of length n at pool[lo] occurs in each row of x ([B, C],
 * int64) with its elements d apart: [B, g] float32, summed over d = 1 .. max_skip + 1 (only d = 1
 * for unigrams). Adds the comparisons made to *work. */
static tth_rexpr *tfidf_count(tth_onnx_ctx *c, const tfidf_pool *p, tth_rexpr *x, int64_t lo, int64_t n, int64_t g,
                              int64_t *work)
{
    int64_t B = tt(x)->shape[0], C = tt(x)->shape[1], dmax = n == 1 ? 1 : p->max_skip + 1;
    tth_rexpr *acc = NULL;
    for (int64_t d = 1; d <= dmax && (n - 1) * d < C; d++) {
        int64_t S = C - (n - 1) * d, shp[3] = {B, S, 1};
        tth_rexpr *hit = NULL;
        *work += B * S * g * n;
        if (*work > TFIDF_MAX_WORK) {
            tth__onnx_fail(c, TTH_ELIMIT, "TfIdfVectorizer would compare more than %lld elements",
                           (long long)TFIDF_MAX_WORK);
            return NULL;
        }
        for (int64_t k = 0; k < n; k++) {
            tth_rexpr *col = reshape(c, slice_axis(c, x, 1, k * d, k * d + S), shp, 3);
            tth_rexpr *eq = col ? call2(c, TTH_OP_EQUAL, col, tfidf_column(c, p, lo, n, g, k), NULL) : NULL;
            if (!eq || !(hit = hit ? call2(c, TTH_OP_LOGICAL_AND, hit, eq, NULL) : eq))
                return NULL;
        }
        tth_rexpr *cnt = call1(c, TTH_OP_SUM, cast_to(c, hit, TTH_F32), json_pack("{s:[i],s:b}", "axis", 1, "keepdims", 0));
        if (!cnt || !(acc = acc ? call2(c, TTH_OP_ADD, acc, cnt, NULL) : cnt))
            return NULL;
    }
    if (!acc) { /* the row is too short for any such n-gram */
        tth_ttype ty = {.dtype = TTH_F32, .rank = 2, .shape = {B, g}};
        acc = k_tensor(c, tth_tensor_new(&ty, NULL));
    }
    return acc;
}

/* The constant 0/1 matrix [rows, out_size] mapping the counted n-grams (lengths min_n ..
 * max_n, in pool order) to their output columns. */
static tth_rexpr *tfidf_columns(tth_onnx_ctx *c, const tfidf_pool *p, int64_t rows)
{
    if (rows * p->out_size > TTH_IMPORT_MAX_ELEMS) {
        tth__onnx_fail(c, TTH_ELIMIT, "TfIdfVectorizer maps %lld n-grams to %lld columns (at most %lld pairs)",
                       (long long)rows, (long long)p->out_size, (long long)TTH_IMPORT_MAX_ELEMS);
        return NULL;
    }
    tth_ttype ty = {.dtype = TTH_F32, .rank = 2, .shape = {rows, p->out_size}};
    tth_tensor *m = tth_tensor_new(&ty, NULL);
    for (int64_t n = 1, r = 0, k = 0; m && n <= p->ngroups; n++) {
        int64_t g = (tfidf_group_end(p, n) - p->start[n - 1]) / n;
        for (int64_t j = 0; j < g; j++, k++)
            if (n >= p->min_n && n <= p->max_n)
                ((float *)m->data)[r++ * p->out_size + p->index[k]] = 1;
    }
    return k_tensor(c, m);
}

/* The counts of the pool's n-grams of lengths min_n .. max_n in x ([B, C]) per output column:
 * [B, out_size] float32 (the n-grams' counts, concatenated, times tfidf_columns). */
static tth_rexpr *tfidf_frequencies(tth_onnx_ctx *c, const tfidf_pool *p, tth_rexpr *x)
{
    tth_rexpr *parts[TFIDF_MAX_GRAM];
    int np = 0;
    int64_t work = 0, rows = 0;
    for (int64_t n = p->min_n; n <= p->max_n && n <= p->ngroups; n++) {
        int64_t lo = p->start[n - 1], g = (tfidf_group_end(p, n) - lo) / n;
        if (g && !(parts[np++] = tfidf_count(c, p, x, lo, n, g, &work)))
            return NULL;
        rows += g;
    }
    if (!np) {
        tth_ttype zty = {.dtype = TTH_F32, .rank = 2, .shape = {tt(x)->shape[0], p->out_size}};
        return k_tensor(c, tth_tensor_new(&zty, NULL));
    }
    tth_rexpr *f = np > 1 ? call(c, TTH_OP_CONCATENATE, parts, (size_t)np, json_pack("{s:i}", "axis", 1)) : parts[0];
    tth_rexpr *m = f ? tfidf_columns(c, p, rows) : NULL;
    return m ? call2(c, TTH_OP_MATMUL, f, m, NULL) : NULL;
}

/* The weights attribute as a constant [out_size] (the weight of each output column), NULL
 * without weights; *rc set on a malformed list. */
static tth_rexpr *tfidf_weights(tth_onnx_ctx *c, const tfidf_pool *p, int *rc)
{
    const Onnx__AttributeProto *a = attr(c, "weights");
    *rc = 0;
    if (!a || !a->n_floats)
        return NULL;
    if ((int64_t)a->n_floats != p->nindex || p->out_size > p->nindex) {
        *rc = tth__onnx_fail(c, TTH_EMODEL, "TfIdfVectorizer has %zu weights for %lld n-grams and %lld output columns",
                             a->n_floats, (long long)p->nindex, (long long)p->out_size);
        return NULL;
    }
    tth_ttype ty = {.dtype = TTH_F32, .rank = 1, .shape = {p->out_size}};
    tth_rexpr *w = k_tensor(c, tth_tensor_new(&ty, a->floats));
    *rc = w ? 0 : c->diag->code;
    return w;
}

/* TfIdfVectorizer over integers: x [C] or [B, C] (int32, int64) -> [out_size] or [B, out_size]
 * float32, the count of each pool n-gram in each row (lengths min_gram_length ..
 * max_gram_length, elements up to max_skip_count apart; a unigram counted once), put in the
 * column ngram_indexes gives it; mode TF: the counts; IDF: the weight (or 1) of each column
 * counted at least once; TFIDF: the counts times the weights. docs/operators.md. */
static int op_tfidf_vectorizer(tth_onnx_ctx *c, tth_rexpr **in, size_t nin, tth_rexpr **out, size_t nout)
{
    NEED(1);
    tfidf_pool p;
    int rc = tfidf_read_pool(c, &p);
    if (rc)
        return rc;
    tth_rexpr *x = in[0], *f, *w;
    int r = rank(x);
    if ((tt(x)->dtype != TTH_I32 && tt(x)->dtype != TTH_I64) || r < 1 || r > 2)
        return tth__onnx_fail(c, TTH_EUNSUPPORTED, "TfIdfVectorizer takes int32 or int64 [C] or [B, C]");
    const char *mode = as(c, "mode", "");
    int tf = !strcmp(mode, "TF"), idf = !strcmp(mode, "IDF");
    if (!tf && !idf && strcmp(mode, "TFIDF"))
        return tth__onnx_fail(c, TTH_EMODEL, "TfIdfVectorizer's mode '%s' is not TF, IDF or TFIDF", mode);
    int64_t s2[2] = {r == 2 ? tt(x)->shape[0] : 1, tt(x)->shape[r - 1]};
    CHECK(f = tfidf_frequencies(c, &p, reshape(c, cast_to(c, x, TTH_I64), s2, 2)));
    w = tf ? NULL : tfidf_weights(c, &p, &rc);
    if (rc)
        return rc;
    if (idf) {
        tth_rexpr *z = kx(c, f, 0), *pos = call2(c, TTH_OP_GREATER, f, z, NULL);
        tth_rexpr *wa[3] = {pos, w ? w : kx(c, f, 1), z};
        CHECK(pos && (f = call(c, TTH_OP_WHERE, wa, 3, NULL)));
    } else if (w) {
        CHECK(f = call2(c, TTH_OP_MULTIPLY, f, w, NULL));
    }
    int64_t s1[1] = {p.out_size};
    CHECK(out[0] = r == 1 ? reshape(c, f, s1, 1) : f);
    return 0;
}

/* ---------------------------------------------------------------- the table */

static const tth_onnx_op onnx_ops[] = {
    {"Abs", op_abs},
    {"Acos", op_acos},
    {"Acosh", op_acosh},
    {"Add", op_add},
    {"And", op_and},
    {"ArgMax", op_argmax},
    {"ArgMin", op_argmin},
    {"Asin", op_asin},
    {"Asinh", op_asinh},
    {"Atan", op_atan},
    {"Atanh", op_atanh},
    {"AveragePool", op_avg_pool},
    {"BatchNormalization", op_batch_norm},
    {"BitShift", op_bitshift},
    {"BlackmanWindow", op_blackman_window},
    {"Cast", op_cast},
    {"CastLike", op_cast_like},
    {"Ceil", op_ceil},
    {"Celu", op_celu},
    {"CenterCropPad", op_center_crop_pad},
    {"Clip", op_clip},
    {"Compress", op_compress},
    {"Concat", op_concat},
    {"Constant", op_constant},
    {"ConstantOfShape", op_constant_of_shape},
    {"Conv", op_conv},
    {"ConvInteger", op_conv_integer},
    {"ConvTranspose", op_conv_transpose},
    {"Cos", op_cos},
    {"Cosh", op_cosh},
    {"CumSum", op_cumsum},
    {"DFT", op_dft},
    {"DepthToSpace", op_depth_to_space},
    {"DequantizeLinear", op_dequantize},
    {"Det", op_det},
    {"Div", op_div},
    {"Dropout", op_dropout},
    {"DynamicQuantizeLinear", op_dynamic_quantize},
    {"Einsum", op_einsum},
    {"Elu", op_elu},
    {"Equal", op_equal},
    {"Erf", op_erf},
    {"Exp", op_exp},
    {"Expand", op_expand},
    {"EyeLike", op_eyelike},
    {"Flatten", op_flatten},
    {"Floor", op_floor},
    {"GRU", op_gru},
    {"Gather", op_gather},
    {"GatherElements", op_gather_elements},
    {"GatherND", op_gather_nd},
    {"Gelu", op_gelu},
    {"Gemm", op_gemm},
    {"GlobalAveragePool", op_global_avg_pool},
    {"GlobalMaxPool", op_global_max_pool},
    {"Greater", op_greater},
    {"GreaterOrEqual", op_greater_equal},
    {"GridSample", op_grid_sample},
    {"GroupNormalization", op_group_norm},
    {"HammingWindow", op_hamming_window},
    {"HannWindow", op_hann_window},
    {"HardSigmoid", op_hard_sigmoid},
    {"HardSwish", op_hard_swish},
    {"Hardmax", op_hardmax},
    {"Identity", op_identity},
    {"If", op_if},
    {"InstanceNormalization", op_instance_norm},
    {"IsInf", op_isinf},
    {"IsNaN", op_isnan},
    {"LRN", op_lrn},
    {"LSTM", op_lstm},
    {"LayerNormalization", op_layer_norm},
    {"LeakyRelu", op_leaky_relu},
    {"Less", op_less},
    {"LessOrEqual", op_less_equal},
    {"Log", op_log},
    {"LogSoftmax", op_log_softmax},
    {"Loop", op_loop},
    {"MatMul", op_matmul},
    {"MatMulInteger", op_matmul_integer},
    {"Max", op_max},
    {"MaxPool", op_max_pool},
    {"MaxUnpool", op_max_unpool},
    {"Mean", op_mean},
    {"MeanVarianceNormalization", op_mvn},
    {"MelWeightMatrix", op_mel_weight_matrix},
    {"Min", op_min},
    {"Mish", op_mish},
    {"Mod", op_mod},
    {"Mul", op_mul},
    {"Neg", op_neg},
    {"NegativeLogLikelihoodLoss", op_nll_loss},
    {"Not", op_not},
    {"OneHot", op_one_hot},
    {"Or", op_or},
    {"PRelu", op_prelu},
    {"Pad", op_pad},
    {"Pow", op_pow},
    {"QLinearConv", op_qlinear_conv},
    {"QLinearMatMul", op_qlinear_matmul},
    {"QuantizeLinear", op_quantize},
    {"RNN", op_rnn},
    {"Range", op_range},
    {"Reciprocal", op_reciprocal},
    {"ReduceL1", op_reduce_l1},
    {"ReduceL2", op_reduce_l2},
    {"ReduceLogSum", op_reduce_log_sum},
    {"ReduceLogSumExp", op_reduce_log_sum_exp},
    {"ReduceMax", op_reduce_max},
    {"ReduceMean", op_reduce_mean},
    {"ReduceMin", op_reduce_min},
    {"ReduceProd", op_reduce_prod},
    {"ReduceSum", op_reduce_sum},
    {"ReduceSumSquare", op_reduce_sum_square},
    {"Relu", op_relu},
    {"Reshape", op_reshape},
    {"Resize", op_resize},
    {"ReverseSequence", op_reverse_sequence},
    {"RoiAlign", op_roi_align},
    {"Round", op_round},
    {"STFT", op_stft},
    {"Scan", op_scan},
    {"Scatter", op_scatter_elements},
    {"ScatterElements", op_scatter_elements},
    {"ScatterND", op_scatter_nd},
    {"Selu", op_selu},
    {"Shape", op_shape},
    {"Shrink", op_shrink},
    {"Sigmoid", op_sigmoid},
    {"Sign", op_sign},
    {"Sin", op_sin},
    {"Sinh", op_sinh},
    {"Size", op_size},
    {"Slice", op_slice},
    {"Softmax", op_softmax},
    {"SoftmaxCrossEntropyLoss", op_softmax_ce_loss},
    {"Softplus", op_softplus},
    {"Softsign", op_softsign},
    {"SpaceToDepth", op_space_to_depth},
    {"Split", op_split},
    {"Sqrt", op_sqrt},
    {"Squeeze", op_squeeze},
    {"Sub", op_sub},
    {"Sum", op_sum},
    {"Tan", op_tan},
    {"Tanh", op_tanh},
    {"TfIdfVectorizer", op_tfidf_vectorizer},
    {"ThresholdedRelu", op_thresholded_relu},
    {"Tile", op_tile},
    {"TopK", op_topk},
    {"Transpose", op_transpose},
    {"Trilu", op_trilu},
    {"Unsqueeze", op_unsqueeze},
    {"Upsample", op_upsample},
    {"Where", op_where},
    {"Xor", op_xor},
};

/* The operators of the domain ai.onnx.preview.training (docs/operators.md "Training operators"). */
static const tth_onnx_op training_ops[] = {
    {"Adagrad", op_adagrad},
    {"Adam", op_adam},
    {"Gradient", op_gradient},
    {"Momentum", op_momentum},
};

/* The entry named `name` in a table sorted by name, or NULL. */
static const tth_onnx_op *op_search(const tth_onnx_op *ops, size_t n, const char *name)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(name, ops[mid].name);
        if (!c)
            return &ops[mid];
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

const tth_onnx_op *tth__onnx_op_find(const char *name)
{
    return op_search(onnx_ops, sizeof onnx_ops / sizeof onnx_ops[0], name);
}

const tth_onnx_op *tth__onnx_training_op_find(const char *name)
{
    return op_search(training_ops, sizeof training_ops / sizeof training_ops[0], name);
}
