/* npu_test.h: what the cmsis-nn and ethos-n tests share: the real plugins from the build tree,
 * targets parsed through them, and Relay builders for quantized patterns. The includer defines
 * NPU_KIND and NPU_TARGET (its kind, and the target text accepts and refuses ask it for). */
#ifndef TTH_TEST_NPU_H
#define TTH_TEST_NPU_H

#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tth/artifact.h>
#include <tth/registry.h>
#include <tth/relay.h>
#include <tth/target.h>
#include <tth/tir.h>

#include "helpers.h"
#include "model_fixture.h"

static tth_registry *npu_reg;

/* Fixture: the build tree's plugins (all four); npu_unload also frees what the test made with
 * test_relay_module and test_tir_module (test_cleanup). */
static void npu_load(void)
{
    npu_reg = test_registry();
    cr_assert_geq(tth_registry_count(npu_reg), 4);
}

static void npu_unload(void)
{
    test_cleanup();
    tth_registry_free(npu_reg);
    npu_reg = NULL;
}

static const tth_plugin *npu_plugin(const char *kind)
{
    const tth_plugin *p = tth_registry_find_kind(npu_reg, kind);
    cr_assert(p, "no plugin for kind %s", kind);
    return p;
}

static json_t *npu_target(const char *text)
{
    return test_target(npu_reg, text);
}

/* ---- Relay builders ---- */

static tth_diag bd;

static tth_rexpr *x_var(tth_relay_module *m, const char *name, tth_dtype dt, int rank, const int64_t *shape)
{
    tth_ttype t = {.dtype = dt, .rank = rank};
    if (rank)
        memcpy(t.shape, shape, (size_t)rank * sizeof *shape);
    tth_rexpr *v = tth_relay_var(m, name, &t);
    cr_assert(v);
    return v;
}

/* A constant of dtype with `rank` dims, values v(i) = base + (i * step) % mod. */
static tth_rexpr *k_tensor(tth_relay_module *m, tth_dtype dt, int rank, const int64_t *shape, double base, int step,
                           int mod)
{
    tth_ttype t = {.dtype = dt, .rank = rank};
    if (rank)
        memcpy(t.shape, shape, (size_t)rank * sizeof *shape);
    tth_tensor *x = tth_tensor_new(&t, NULL);
    cr_assert(x);
    int64_t n = tth_ttype_numel(&t);
    for (int64_t i = 0; i < n; i++) {
        double v = base + (mod ? (double)((i * step) % mod) : 0);
        switch (dt) {
        case TTH_I8: ((int8_t *)x->data)[i] = (int8_t)v; break;
        case TTH_U8: ((uint8_t *)x->data)[i] = (uint8_t)v; break;
        case TTH_I16: ((int16_t *)x->data)[i] = (int16_t)v; break;
        case TTH_I32: ((int32_t *)x->data)[i] = (int32_t)v; break;
        case TTH_F32: ((float *)x->data)[i] = (float)v; break;
        default: cr_assert_fail("dtype");
        }
    }
    tth_rexpr *c = tth_relay_const(m, x, NULL);
    cr_assert(c);
    return c;
}

static tth_rexpr *k_scalar(tth_relay_module *m, tth_dtype dt, double v)
{
    return k_tensor(m, dt, 0, NULL, v, 0, 0);
}

static tth_rexpr *op(tth_relay_module *m, tth_op o, json_t *attrs, size_t n, ...)
{
    tth_rexpr *args[8];
    va_list ap;
    va_start(ap, n);
    for (size_t i = 0; i < n; i++)
        args[i] = va_arg(ap, tth_rexpr *);
    va_end(ap);
    tth_diag_clear(&bd);
    tth_rexpr *e = tth_relay_call(m, o, args, n, attrs, &bd);
    cr_assert(e, "%s: %s", tth_op_name(o), bd.message);
    return e;
}

static tth_relay_function *finish(tth_relay_module *m, tth_rexpr *const *params, size_t np, tth_rexpr *body)
{
    tth_diag_clear(&bd);
    tth_relay_function *f = tth_relay_function_add(m, "main", params, np, body, NULL, &bd);
    cr_assert(f, "%s", bd.message);
    return f;
}

/* qnn.requantize of x (axis 1) from in_scale (a Relay expression: a scalar, or one per channel)
 * to out_scale and zero point zp in dtype d; the input zero point 0. */
static tth_rexpr *requant(tth_relay_module *m, tth_rexpr *x, tth_rexpr *in_scale, double out_scale, int zp, tth_dtype d)
{
    return op(m, TTH_OP_REQUANTIZE, json_pack("{s:i,s:s}", "axis", 1, "out_dtype", tth_dtype_name(d)), 5, x, in_scale,
              k_scalar(m, TTH_I32, 0), k_scalar(m, TTH_F32, out_scale), k_scalar(m, d, zp));
}

/* The conv pattern: x int8 [n, c, h, w] -> qnn.conv2d -> [add bias] -> requantize -> [clip]. */
typedef struct conv_opt {
    int64_t n, c, h, w, oc, kh, kw, stride, pad, dilation, groups;
    tth_dtype dtype;      /* int8 unless set */
    int wzp, xzp, yzp;
    int bias, clip, per_channel;
    double xs, wsc, ys;
} conv_opt;

typedef struct conv_nodes {
    tth_rexpr *x, *conv, *add, *rq, *clip;
    tth_relay_function *fn;
} conv_nodes;

static conv_opt conv_default(void)
{
    conv_opt o = {.n = 1, .c = 8, .h = 6, .w = 6, .oc = 4, .kh = 3, .kw = 3, .stride = 1, .pad = 1, .dilation = 1,
                  .groups = 1, .dtype = TTH_I8, .xzp = -3, .yzp = 5, .bias = 1, .xs = 0.05, .wsc = 0.01, .ys = 0.1};
    return o;
}

static conv_nodes build_conv(tth_relay_module *m, const conv_opt *o)
{
    conv_nodes r = {0};
    int64_t xs[4] = {o->n, o->c, o->h, o->w}, ws[4] = {o->oc, o->c / o->groups, o->kh, o->kw};
    r.x = x_var(m, "x", o->dtype, 4, xs);
    tth_rexpr *w = k_tensor(m, TTH_I8, 4, ws, -7, 3, 15);
    json_t *at = json_pack("{s:[I,I],s:[I,I,I,I],s:[I,I],s:I}", "strides", (json_int_t)o->stride,
                           (json_int_t)o->stride, "padding", (json_int_t)o->pad, (json_int_t)o->pad,
                           (json_int_t)o->pad, (json_int_t)o->pad, "dilation", (json_int_t)o->dilation,
                           (json_int_t)o->dilation, "groups", (json_int_t)o->groups);
    r.conv = op(m, TTH_OP_QNN_CONV2D, at, 4, r.x, w, k_scalar(m, o->dtype, o->xzp), k_scalar(m, TTH_I8, o->wzp));
    tth_rexpr *acc = r.conv;
    if (o->bias) {
        int64_t bs[3] = {o->oc, 1, 1};
        r.add = op(m, TTH_OP_ADD, NULL, 2, acc, k_tensor(m, TTH_I32, 3, bs, -100, 37, 200));
        acc = r.add;
    }
    tth_rexpr *insc;
    if (o->per_channel) {
        int64_t s[1] = {o->oc};
        tth_ttype t = {.dtype = TTH_F32, .rank = 1, .shape = {o->oc}};
        tth_tensor *x = tth_tensor_new(&t, NULL);
        for (int64_t i = 0; i < o->oc; i++)
            ((float *)x->data)[i] = (float)(o->xs * o->wsc * (1.0 + 0.25 * (double)i));
        insc = tth_relay_const(m, x, NULL);
        (void)s;
    } else {
        insc = k_scalar(m, TTH_F32, o->xs * o->wsc);
    }
    r.rq = requant(m, acc, insc, o->ys, o->yzp, TTH_I8);
    tth_rexpr *out = r.rq;
    if (o->clip) {
        r.clip = op(m, TTH_OP_CLIP, json_pack("{s:f,s:f}", "a_min", -20.0, "a_max", 100.0), 1, r.rq);
        out = r.clip;
    }
    r.fn = finish(m, &r.x, 1, out);
    return r;
}

/* The conv pattern with conv_default's options changed by tweak (when not NULL), in a new module
 * of the test (test_relay_module). */
static __attribute__((unused)) conv_nodes npu_conv(void (*tweak)(conv_opt *))
{
    conv_opt o = conv_default();
    if (tweak)
        tweak(&o);
    return build_conv(test_relay_module(), &o);
}

/* dequantize(x int8, scale, zp) */
static tth_rexpr *dq(tth_relay_module *m, tth_rexpr *x, double s, int zp)
{
    tth_dtype d = x->type.tensor.dtype;
    return op(m, TTH_OP_DEQUANTIZE, json_pack("{s:i}", "axis", 0), 3, x, k_scalar(m, TTH_F32, s), k_scalar(m, d, zp));
}

static tth_rexpr *q(tth_relay_module *m, tth_rexpr *x, double s, int zp, tth_dtype d)
{
    return op(m, TTH_OP_QUANTIZE, json_pack("{s:i,s:s}", "axis", 0, "out_dtype", tth_dtype_name(d)), 3, x,
              k_scalar(m, TTH_F32, s), k_scalar(m, d, zp));
}

/* partition_supports of `kind` on call: 1/0 and the reason. */
static int supports(const char *kind, const json_t *target, const tth_relay_function *fn, const tth_rexpr *call,
                    char *why, size_t len)
{
    const tth_plugin *p = npu_plugin(kind);
    cr_assert(p->partition_supports, "%s exports no partition_supports", kind);
    why[0] = 0;
    int r = p->partition_supports(NULL, target, fn, call, why, len);
    cr_assert(r == 0 || r == 1, "partition_supports returned %d", r);
    return r;
}

/* partition_supports of `kind` for the target `text` takes call (reason NULL), or refuses it
 * saying exactly `reason`. */
static void npu_expect(const char *kind, const char *text, const tth_relay_function *fn, const tth_rexpr *call,
                       const char *reason)
{
    json_t *t = npu_target(text);
    char why[256];
    int r = supports(kind, t, fn, call, why, sizeof why);
    json_decref(t);
    if (!reason)
        cr_assert_eq(r, 1, "%s refused: %s", tth_op_name(call->u.call.op), why);
    else {
        cr_assert_eq(r, 0, "%s accepted", tth_op_name(call->u.call.op));
        cr_assert_str_eq(why, reason);
    }
}

/* NPU_KIND for NPU_TARGET takes call, or refuses it for `reason`. */
static __attribute__((unused)) void accepts(const tth_relay_function *fn, const tth_rexpr *call)
{
    npu_expect(NPU_KIND, NPU_TARGET, fn, call, NULL);
}

static __attribute__((unused)) void refuses(const tth_relay_function *fn, const tth_rexpr *call, const char *reason)
{
    npu_expect(NPU_KIND, NPU_TARGET, fn, call, reason);
}

#endif
