/* lt_util.c: see lt_util.h. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lt_util.h"

/* ---- protobuf wire format, just enough for TensorProto ---- */

static int pb_varint(const uint8_t *b, size_t n, size_t *i, uint64_t *out)
{
    uint64_t r = 0;
    for (int s = 0; s < 64; s += 7) {
        if (*i >= n)
            return -1;
        uint8_t c = b[(*i)++];
        r |= (uint64_t)(c & 0x7f) << s;
        if (!(c & 0x80)) {
            *out = r;
            return 0;
        }
    }
    return -1;
}

static tth_dtype onnx_dtype(uint64_t t)
{
    switch (t) {
    case 1: return TTH_F32;
    case 2: return TTH_U8;
    case 3: return TTH_I8;
    case 4: return TTH_U16;
    case 5: return TTH_I16;
    case 6: return TTH_I32;
    case 7: return TTH_I64;
    case 9: return TTH_BOOL;
    case 10: return TTH_F16;
    case 11: return TTH_F64;
    case 12: return TTH_U32;
    case 13: return TTH_U64;
    case 16: return TTH_BF16;
    default: return TTH_DTYPE_INVALID;
    }
}

typedef struct pb_vals {
    double *f;
    int64_t *i;
    size_t nf, ni, cap_f, cap_i;
} pb_vals;

static int push_f(pb_vals *v, double x)
{
    if (v->nf == v->cap_f) {
        v->cap_f = v->cap_f ? 2 * v->cap_f : 64;
        double *p = realloc(v->f, v->cap_f * sizeof *p);
        if (!p)
            return -1;
        v->f = p;
    }
    v->f[v->nf++] = x;
    return 0;
}

static int push_i(pb_vals *v, int64_t x)
{
    if (v->ni == v->cap_i) {
        v->cap_i = v->cap_i ? 2 * v->cap_i : 64;
        int64_t *p = realloc(v->i, v->cap_i * sizeof *p);
        if (!p)
            return -1;
        v->i = p;
    }
    v->i[v->ni++] = x;
    return 0;
}

tth_tensor *lt_read_pb(const char *path, char *msg, size_t len)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        snprintf(msg, len, "cannot open %s", path);
        return NULL;
    }
    fseek(fp, 0, SEEK_END);
    long sz = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)sz + 1);
    if (!b || fread(b, 1, (size_t)sz, fp) != (size_t)sz) {
        fclose(fp);
        free(b);
        snprintf(msg, len, "cannot read %s", path);
        return NULL;
    }
    fclose(fp);
    size_t n = (size_t)sz, i = 0;
    tth_ttype t;
    memset(&t, 0, sizeof t);
    const uint8_t *raw = NULL;
    size_t raw_len = 0;
    uint64_t dtype = 0;
    pb_vals vals = {0};
    int bad = 0;
    while (i < n && !bad) {
        uint64_t key, v;
        if (pb_varint(b, n, &i, &key)) {
            bad = 1;
            break;
        }
        unsigned field = (unsigned)(key >> 3), wt = (unsigned)(key & 7);
        if (wt == 0) {
            if (pb_varint(b, n, &i, &v)) {
                bad = 1;
                break;
            }
            if (field == 1 && t.rank < TTH_MAX_RANK)
                t.shape[t.rank++] = (int64_t)v;
            else if (field == 2)
                dtype = v;
            else if (field == 5 || field == 7)
                bad |= push_i(&vals, field == 5 ? (int64_t)(int32_t)v : (int64_t)v);
            else if (field == 11)
                bad |= push_i(&vals, (int64_t)v);
        } else if (wt == 2) {
            if (pb_varint(b, n, &i, &v) || i + v > n) {
                bad = 1;
                break;
            }
            const uint8_t *p = b + i;
            size_t m = (size_t)v;
            i += m;
            if (field == 9) {
                raw = p;
                raw_len = m;
            } else if (field == 1 || field == 5 || field == 7 || field == 11) {
                size_t j = 0;
                while (j < m && !bad) {
                    uint64_t x;
                    if (pb_varint(p, m, &j, &x)) {
                        bad = 1;
                        break;
                    }
                    if (field == 1) {
                        if (t.rank < TTH_MAX_RANK)
                            t.shape[t.rank++] = (int64_t)x;
                    } else {
                        bad |= push_i(&vals, field == 5 ? (int64_t)(int32_t)x : (int64_t)x);
                    }
                }
            } else if (field == 4) {
                for (size_t j = 0; j + 4 <= m; j += 4) {
                    float f;
                    memcpy(&f, p + j, 4);
                    bad |= push_f(&vals, f);
                }
            } else if (field == 10) {
                for (size_t j = 0; j + 8 <= m; j += 8) {
                    double d;
                    memcpy(&d, p + j, 8);
                    bad |= push_f(&vals, d);
                }
            }
        } else if (wt == 5) {
            if (i + 4 > n) {
                bad = 1;
                break;
            }
            if (field == 4) {
                float f;
                memcpy(&f, b + i, 4);
                bad |= push_f(&vals, f);
            }
            i += 4;
        } else if (wt == 1) {
            if (i + 8 > n) {
                bad = 1;
                break;
            }
            if (field == 10) {
                double d;
                memcpy(&d, b + i, 8);
                bad |= push_f(&vals, d);
            }
            i += 8;
        } else {
            bad = 1;
        }
    }
    tth_tensor *out = NULL;
    t.dtype = onnx_dtype(dtype);
    if (bad || t.dtype == TTH_DTYPE_INVALID) {
        snprintf(msg, len, "%s: malformed TensorProto or unsupported data_type %llu", path, (unsigned long long)dtype);
    } else {
        out = tth_tensor_new(&t, NULL);
        size_t nb = tth_ttype_nbytes(&t);
        int64_t ne = tth_ttype_numel(&t);
        if (!out) {
            snprintf(msg, len, "out of memory");
        } else if (raw) {
            if (raw_len != nb) {
                snprintf(msg, len, "%s: raw_data has %zu bytes, expected %zu", path, raw_len, nb);
                tth_tensor_unref(out);
                out = NULL;
            } else {
                memcpy(out->data, raw, nb);
            }
        } else if (vals.nf == (size_t)ne || vals.ni == (size_t)ne) {
            for (int64_t k = 0; k < ne; k++) {
                void *d = out->data;
                int isf = vals.nf == (size_t)ne;
                double fv = isf ? vals.f[k] : (double)vals.i[k];
                int64_t iv = isf ? (int64_t)vals.f[k] : vals.i[k];
                switch (t.dtype) {
                case TTH_F32: ((float *)d)[k] = (float)fv; break;
                case TTH_F64: ((double *)d)[k] = fv; break;
                case TTH_I8: ((int8_t *)d)[k] = (int8_t)iv; break;
                case TTH_U8: case TTH_BOOL: ((uint8_t *)d)[k] = (uint8_t)iv; break;
                case TTH_I16: ((int16_t *)d)[k] = (int16_t)iv; break;
                case TTH_U16: ((uint16_t *)d)[k] = (uint16_t)iv; break;
                case TTH_I32: ((int32_t *)d)[k] = (int32_t)iv; break;
                case TTH_U32: ((uint32_t *)d)[k] = (uint32_t)iv; break;
                case TTH_I64: ((int64_t *)d)[k] = iv; break;
                case TTH_U64: ((uint64_t *)d)[k] = (uint64_t)iv; break;
                default: break;
                }
            }
        } else if (ne != 0) {
            snprintf(msg, len, "%s: %lld elements but %zu values", path, (long long)ne, vals.nf + vals.ni);
            tth_tensor_unref(out);
            out = NULL;
        }
    }
    free(vals.f);
    free(vals.i);
    free(b);
    return out;
}

static tth_tensor *lt_onnx_file(const char *test, const char *kind, int i)
{
    char path[1024], msg[512];
    snprintf(path, sizeof path, "%s/%s/test_data_set_0/%s_%d.pb", LT_ONNX_DIR, test, kind, i);
    struct stat st;
    if (stat(path, &st) != 0)
        return NULL;
    tth_tensor *t = lt_read_pb(path, msg, sizeof msg);
    cr_assert_not_null(t, "%s", msg);
    return t;
}

tth_tensor *lt_onnx_input(const char *test, int i)
{
    return lt_onnx_file(test, "input", i);
}

tth_tensor *lt_onnx_output(const char *test, int i)
{
    return lt_onnx_file(test, "output", i);
}

int lt_onnx_available(const char *test)
{
    char path[1024];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s/test_data_set_0", LT_ONNX_DIR, test);
    return stat(path, &st) == 0;
}

int lt_compare(const tth_tensor *got, const tth_tensor *want, double rtol, double atol, char *msg, size_t len)
{
    if (!tth_ttype_equal(&got->type, &want->type)) {
        char a[128], b[128];
        tth_ttype_format(&got->type, a, sizeof a);
        tth_ttype_format(&want->type, b, sizeof b);
        snprintf(msg, len, "type %s, expected %s", a, b);
        return -1;
    }
    int64_t n = tth_ttype_numel(&got->type);
    int fl = tth_dtype_is_float(got->type.dtype);
    for (int64_t i = 0; i < n; i++) {
        if (fl) {
            double g = tth_tensor_get_f64(got, i), w = tth_tensor_get_f64(want, i);
            if (isnan(g) && isnan(w))
                continue;
            if (isinf(w) && g == w)
                continue;
            if (!(fabs(g - w) <= atol + rtol * fabs(w))) {
                snprintf(msg, len, "element %lld: got %.9g, expected %.9g (rtol %g, atol %g)", (long long)i, g, w,
                         rtol, atol);
                return -1;
            }
        } else {
            int64_t g = tth_tensor_get_i64(got, i), w = tth_tensor_get_i64(want, i);
            if (g != w) {
                snprintf(msg, len, "element %lld: got %lld, expected %lld", (long long)i, (long long)g, (long long)w);
                return -1;
            }
        }
    }
    return 0;
}

void lt_init(lt_fn *t)
{
    memset(t, 0, sizeof *t);
    t->rm = tth_relay_module_new("lt");
    t->tm = tth_tir_module_new();
    cr_assert(t->rm && t->tm);
}

void lt_free(lt_fn *t)
{
    tth_relay_module_free(t->rm);
    tth_tir_module_free(t->tm);
}

tth_rexpr *lt_param(lt_fn *t, const char *name, const tth_ttype *type)
{
    cr_assert_lt(t->nparams, 16);
    tth_rexpr *v = tth_relay_var(t->rm, name, type);
    cr_assert_not_null(v);
    t->params[t->nparams++] = v;
    return v;
}

tth_rexpr *lt_call(lt_fn *t, tth_op op, tth_rexpr *const *args, size_t nargs, const char *attrs)
{
    json_t *a = NULL;
    if (attrs) {
        json_error_t err;
        a = json_loads(attrs, 0, &err);
        cr_assert_not_null(a, "bad attrs JSON %s: %s", attrs, err.text);
    }
    tth_diag d;
    tth_diag_clear(&d);
    tth_rexpr *e = tth_relay_call(t->rm, op, args, nargs, a, &d);
    cr_assert_not_null(e, "building %s: %s", tth_op_name(op), d.message);
    return e;
}

int lt_lower(lt_fn *t, tth_rexpr *body)
{
    tth_diag_clear(&t->diag);
    t->fn = tth_relay_function_add(t->rm, "f", t->params, t->nparams, body, json_pack("{s:i}", "Primitive", 1),
                                   &t->diag);
    cr_assert_not_null(t->fn, "function_add: %s", t->diag.message);
    t->pf = tth_lower_primitive(t->tm, t->fn, "f", t->target, &t->diag);
    if (!t->pf)
        return t->diag.code ? t->diag.code : TTH_EINTERNAL;
    int rc = tth_tir_verify(t->tm, &t->diag);
    if (rc) {
        char *txt = tth_tir_print_func(t->pf);
        cr_log_error("TIR that failed to verify:\n%s", txt ? txt : "(no printer)");
        free(txt);
    }
    return rc;
}

int lt_run(lt_fn *t, tth_tensor *const *inputs, tth_tensor **outs, size_t nouts)
{
    cr_assert_not_null(t->pf);
    size_t np = t->pf->nparams;
    cr_assert_eq(np, t->nparams + nouts, "PrimFunc has %zu params, expected %zu inputs + %zu outputs", np, t->nparams,
                 nouts);
    void **bufs = calloc(np, sizeof *bufs);
    cr_assert_not_null(bufs);
    for (size_t i = 0; i < t->nparams; i++) {
        const tth_tbuffer *b = t->pf->params[i];
        cr_assert_eq(inputs[i]->type.dtype, b->dtype, "input %zu dtype", i);
        cr_assert_eq(tth_ttype_numel(&inputs[i]->type), tth_tbuffer_numel(b), "input %zu size", i);
        bufs[i] = inputs[i]->data;
    }
    for (size_t k = 0; k < nouts; k++) {
        const tth_tbuffer *b = t->pf->params[t->nparams + k];
        tth_ttype ty;
        memset(&ty, 0, sizeof ty);
        ty.dtype = b->dtype;
        ty.rank = b->rank;
        memcpy(ty.shape, b->shape, sizeof(int64_t) * (size_t)b->rank);
        outs[k] = tth_tensor_new(&ty, NULL);
        cr_assert_not_null(outs[k]);
        /* garbage, so an element the PrimFunc forgets to write shows */
        memset(outs[k]->data, 0x5A, outs[k]->nbytes);
        bufs[t->nparams + k] = outs[k]->data;
    }
    tth_diag_clear(&t->diag);
    int rc = tth_tir_eval(t->tm, "f", bufs, np, &t->diag);
    free(bufs);
    return rc;
}

tth_tensor *lt_tensor(tth_dtype dt, int rank, const int64_t *shape, const double *values)
{
    tth_ttype ty;
    memset(&ty, 0, sizeof ty);
    ty.dtype = dt;
    ty.rank = rank;
    for (int i = 0; i < rank; i++)
        ty.shape[i] = shape[i];
    tth_tensor *t = tth_tensor_new(&ty, NULL);
    cr_assert_not_null(t);
    int64_t n = tth_ttype_numel(&ty);
    for (int64_t i = 0; i < n && values; i++) {
        double v = values[i];
        void *d = t->data;
        switch (dt) {
        case TTH_F32: ((float *)d)[i] = (float)v; break;
        case TTH_F64: ((double *)d)[i] = v; break;
        case TTH_I8: ((int8_t *)d)[i] = (int8_t)v; break;
        case TTH_U8: case TTH_BOOL: ((uint8_t *)d)[i] = (uint8_t)v; break;
        case TTH_I16: ((int16_t *)d)[i] = (int16_t)v; break;
        case TTH_I32: ((int32_t *)d)[i] = (int32_t)v; break;
        case TTH_I64: ((int64_t *)d)[i] = (int64_t)v; break;
        default: cr_assert_fail("lt_tensor: dtype %s", tth_dtype_name(dt));
        }
    }
    return t;
}

/* The statements the counters below count, by tth_tir_walk. */
typedef struct lt_counter {
    int (*match)(const struct lt_counter *c, const tth_tstmt *s);
    int kind;
    const tth_ttype *type;
    int n;
} lt_counter;

static int lt_count_visit(void *ctx, const tth_tstmt *s)
{
    lt_counter *c = ctx;
    c->n += c->match(c, s);
    return 0;
}

static int lt_count(const tth_tstmt *s, lt_counter *c)
{
    tth_tir_visitor v = {.stmt = lt_count_visit, .ctx = c};
    tth_tir_walk(s, &v);
    return c->n;
}

static int is_kind(const lt_counter *c, const tth_tstmt *s)
{
    return (int)s->kind == c->kind;
}

static int is_alloc_shaped(const lt_counter *c, const tth_tstmt *s)
{
    const tth_tbuffer *b = s->kind == TTH_TSTMT_ALLOCATE ? s->u.alloc.buf : NULL;
    return b && b->rank == c->type->rank && !memcmp(b->shape, c->type->shape, (size_t)b->rank * sizeof b->shape[0]);
}

static int is_loop_kind(const lt_counter *c, const tth_tstmt *s)
{
    return s->kind == TTH_TSTMT_FOR && (int)s->u.loop.loop == c->kind;
}

int lt_count_stmts(const tth_tstmt *s, tth_tstmt_kind kind)
{
    return lt_count(s, &(lt_counter){.match = is_kind, .kind = (int)kind});
}

int lt_count_allocs_shaped(const tth_tstmt *s, const tth_ttype *type)
{
    return lt_count(s, &(lt_counter){.match = is_alloc_shaped, .type = type});
}

int lt_count_loops(const tth_tstmt *s, tth_loop_kind kind)
{
    return lt_count(s, &(lt_counter){.match = is_loop_kind, .kind = (int)kind});
}
