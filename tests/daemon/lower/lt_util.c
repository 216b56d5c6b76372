/* lt_util.c: see lt_util.h. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lt_util.h"
#include "tthrt.h"

/* The runtime's reader of ONNX TensorProto files (tthrt_pb_read), its array copied into a tensor. */
tth_tensor *lt_read_pb(const char *path, char *msg, size_t len)
{
    tthrt_array a = {0};
    tth_diag d;
    tth_diag_clear(&d);
    if (tthrt_pb_read(path, &a, &d) != 0) {
        snprintf(msg, len, "%s: %s", path, d.message);
        return NULL;
    }
    tth_ttype t;
    memset(&t, 0, sizeof t);
    t.dtype = a.dtype;
    t.rank = a.rank;
    memcpy(t.shape, a.shape, sizeof(int64_t) * (size_t)a.rank);
    tth_tensor *out = tth_tensor_new(&t, a.data);
    if (!out)
        snprintf(msg, len, "out of memory");
    tthrt_array_clear(&a);
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
