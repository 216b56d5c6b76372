/* The cmsis-nn kind: every partition rule (accepted, and refused with its exact reason), the TIR
 * relay_to_tir writes (call_extern per pattern, LOCAL context buffers sized for MVE / DSP /
 * neither, an MVE fully connected layer's kernel sums), the quantization arguments against an
 * independent computation in Python, and the generated C compiled for Cortex-M55, M4 and M0 with
 * arm-none-eabi-gcc against the CMSIS-NN declarations of plugins/cmsisnn/reference. The numbers
 * the generated code computes are tested by running it: tests/plugins/cmsisnn/executed.py. */
#include <math.h>
#include <sys/stat.h>
#include <sys/wait.h>

#define M55 "cmsis-nn -mcpu=cortex-m55"
#define NPU_KIND "cmsis-nn"
#define NPU_TARGET M55 /* what accepts and refuses ask (npu_test.h) */
#include "npu_test.h"

TestSuite(cmsisnn, .init = npu_load, .fini = npu_unload);

/* Variants of the conv pattern (npu_conv). */
static void t_clip_per_channel(conv_opt *o) { o->clip = 1; o->per_channel = 1; }
static void t_depthwise(conv_opt *o) { o->groups = 8; o->oc = 8; }
static void t_pointwise(conv_opt *o) { o->kh = o->kw = 1; o->pad = 0; }

Test(cmsisnn, conv_pattern_every_op_accepted)
{
    conv_nodes n = npu_conv(t_clip_per_channel);
    accepts(n.fn, n.conv);
    accepts(n.fn, n.add);
    accepts(n.fn, n.rq);
    accepts(n.fn, n.clip);
}

/* One variant of the conv pattern and the reason every op of it is refused with. */
static void conv_refused(void (*tweak)(conv_opt *), const char *reason)
{
    conv_nodes n = npu_conv(tweak);
    refuses(n.fn, n.conv, reason);
    refuses(n.fn, n.rq, reason);
    if (n.add)
        refuses(n.fn, n.add, reason);
}

static void t_wzp(conv_opt *o) { o->wzp = 2; }
static void t_dil(conv_opt *o) { o->dilation = 2; o->pad = 2; }
static void t_batch(conv_opt *o) { o->n = 2; }
static void t_groups(conv_opt *o) { o->groups = 2; }
static void t_dw_nobias(conv_opt *o) { o->groups = 8; o->oc = 8; o->bias = 0; }
static void t_dw_mult(conv_opt *o) { o->groups = 8; o->oc = 16; }
static void t_int16(conv_opt *o) { o->dtype = TTH_I16; }
static void t_uint8(conv_opt *o) { o->dtype = TTH_U8; o->xzp = 128; }

Test(cmsisnn, conv_refusals)
{
    conv_refused(t_wzp, "qnn.conv2d with a non-zero weight zero point: CMSIS-NN needs symmetric weights (zero point 0)");
    conv_refused(t_dil, "qnn.conv2d with dilation [2, 2]: tth sizes CMSIS-NN's buffers for dilation 1");
    conv_refused(t_batch, "qnn.conv2d with batch 2: tth's NCHW->NHWC staging for CMSIS-NN takes batch 1");
    conv_refused(t_groups, "qnn.conv2d with 2 groups of 8 channels: CMSIS-NN has plain and depthwise convolutions only");
    conv_refused(t_dw_nobias, "depthwise qnn.conv2d without a bias add: CMSIS-NN's depthwise pattern needs one");
    conv_refused(t_dw_mult, "depthwise qnn.conv2d with channel multiplier 2: tth sizes CMSIS-NN's depthwise buffer for "
                            "multiplier 1");
    conv_refused(t_int16, "qnn.conv2d on int16: tth lowers CMSIS-NN's int8 convolutions only");
    conv_refused(t_uint8, "qnn.conv2d on uint8[1, 8, 6, 6]: CMSIS-NN convolves int8");
}

Test(cmsisnn, conv_tail_refusals)
{
    /* conv whose result leaves the function: no requantize */
    tth_relay_module *m = test_relay_module();
    int64_t xs[4] = {1, 4, 4, 4}, ws[4] = {4, 4, 1, 1};
    tth_rexpr *x = x_var(m, "x", TTH_I8, 4, xs);
    tth_rexpr *c = op(m, TTH_OP_QNN_CONV2D, NULL, 4, x, k_tensor(m, TTH_I8, 4, ws, 1, 1, 3), k_scalar(m, TTH_I8, 0),
                      k_scalar(m, TTH_I8, 0));
    tth_relay_function *f = finish(m, &x, 1, c);
    refuses(f, c, "qnn.conv2d not followed by qnn.requantize: CMSIS-NN computes conv/fc only with its requantization");
    /* requantize to uint8 */
    m = test_relay_module();
    x = x_var(m, "x", TTH_I8, 4, xs);
    c = op(m, TTH_OP_QNN_CONV2D, NULL, 4, x, k_tensor(m, TTH_I8, 4, ws, 1, 1, 3), k_scalar(m, TTH_I8, 0),
           k_scalar(m, TTH_I8, 0));
    tth_rexpr *rq = requant(m, c, k_scalar(m, TTH_F32, 0.001), 0.1, 128, TTH_U8);
    f = finish(m, &x, 1, rq);
    refuses(f, rq, "qnn.requantize to uint8: CMSIS-NN's kernels produce int8");
}

Test(cmsisnn, depthwise_accepted)
{
    conv_nodes n = npu_conv(t_depthwise);
    accepts(n.fn, n.conv);
    accepts(n.fn, n.rq);
}

/* qnn.matmul a [2, 16] x b [16, 8] -> add bias -> requantize (scale per tensor or per column) */
static tth_relay_function *build_fc(tth_relay_module *m, int per_channel, int bzp, tth_rexpr **mm, tth_rexpr **rq)
{
    int64_t as[2] = {2, 16}, bs[2] = {16, 8}, bias[1] = {8};
    tth_rexpr *a = x_var(m, "a", TTH_I8, 2, as);
    *mm = op(m, TTH_OP_QNN_MATMUL, NULL, 4, a, k_tensor(m, TTH_I8, 2, bs, -5, 7, 11), k_scalar(m, TTH_I8, 4),
             k_scalar(m, TTH_I8, bzp));
    tth_rexpr *acc = op(m, TTH_OP_ADD, NULL, 2, *mm, k_tensor(m, TTH_I32, 1, bias, 10, 3, 50));
    tth_rexpr *s = per_channel ? k_tensor(m, TTH_F32, 1, bias, 0.001, 0, 0) : k_scalar(m, TTH_F32, 0.0007);
    if (per_channel) /* make it really per channel */
        ((float *)s->u.constant.value->data)[3] = 0.002f;
    *rq = requant(m, acc, s, 0.05, -2, TTH_I8);
    return finish(m, &a, 1, *rq);
}

Test(cmsisnn, fully_connected)
{
    tth_relay_module *m = test_relay_module();
    tth_rexpr *mm, *rq;
    tth_relay_function *f = build_fc(m, 0, 0, &mm, &rq);
    accepts(f, mm);
    accepts(f, rq);
    m = test_relay_module();
    f = build_fc(m, 1, 0, &mm, &rq);
    refuses(f, mm, "qnn.requantize with a input scale: arm_fully_connected_s8 takes one per-tensor multiplier");
    m = test_relay_module();
    f = build_fc(m, 0, 3, &mm, &rq);
    refuses(f, rq, "qnn.matmul with a non-zero weight zero point: CMSIS-NN needs symmetric weights");
}

/* dequantize -> softmax(axis) -> quantize(scale, zp) */
static tth_relay_function *build_softmax(tth_relay_module *m, int axis, double s, int zp, tth_rexpr **sm,
                                         tth_rexpr **d, tth_rexpr **qq)
{
    int64_t xs[2] = {3, 10};
    tth_rexpr *x = x_var(m, "x", TTH_I8, 2, xs);
    *d = dq(m, x, 0.125, 7);
    *sm = op(m, TTH_OP_SOFTMAX, json_pack("{s:i}", "axis", axis), 1, *d);
    *qq = q(m, *sm, s, zp, TTH_I8);
    return finish(m, &x, 1, *qq);
}

Test(cmsisnn, softmax)
{
    tth_relay_module *m = test_relay_module();
    tth_rexpr *sm, *d, *qq;
    tth_relay_function *f = build_softmax(m, -1, 1.0 / 256, -128, &sm, &d, &qq);
    accepts(f, d);
    accepts(f, sm);
    accepts(f, qq);
    m = test_relay_module();
    f = build_softmax(m, -1, 1.0 / 128, -128, &sm, &d, &qq);
    refuses(f, sm, "softmax quantized with scale 0.0078125 and zero point -128: arm_softmax_s8 writes scale 1/256, "
                      "zero point -128");
    refuses(f, d, "softmax quantized with scale 0.0078125 and zero point -128: arm_softmax_s8 writes scale 1/256, "
                     "zero point -128");
    m = test_relay_module();
    f = build_softmax(m, 0, 1.0 / 256, -128, &sm, &d, &qq);
    refuses(f, qq, "nn.softmax over axis 0 of 2: arm_softmax_s8 works on rows (the last axis)");
}

static tth_relay_function *build_binary(tth_relay_module *m, tth_op o, int broadcast, tth_rexpr **e)
{
    int64_t s1[4] = {1, 4, 5, 5}, s2[4] = {1, 4, 1, 1};
    tth_rexpr *ps[2] = {x_var(m, "a", TTH_I8, 4, s1), x_var(m, "b", TTH_I8, 4, broadcast ? s2 : s1)};
    *e = op(m, o, NULL, 2, dq(m, ps[0], 0.02, 1), dq(m, ps[1], 0.03, -4));
    return finish(m, ps, 2, q(m, *e, 0.04, 3, TTH_I8));
}

Test(cmsisnn, add_mul)
{
    tth_rexpr *e;
    tth_relay_module *m = test_relay_module();
    tth_relay_function *f = build_binary(m, TTH_OP_ADD, 0, &e);
    accepts(f, e);
    accepts(f, e->u.call.args[0]);
    m = test_relay_module();
    f = build_binary(m, TTH_OP_MULTIPLY, 0, &e);
    accepts(f, e);
    m = test_relay_module();
    f = build_binary(m, TTH_OP_ADD, 1, &e);
    refuses(f, e, "add with broadcasting: CMSIS-NN's elementwise kernels need equal shapes");
}

static tth_relay_function *build_pool(tth_relay_module *m, tth_op o, double out_scale, int ceil_mode, tth_rexpr **p)
{
    int64_t xs[4] = {1, 8, 6, 6};
    tth_rexpr *x = x_var(m, "x", TTH_I8, 4, xs);
    *p = op(m, o, json_pack("{s:[i,i],s:[i,i],s:[i,i,i,i],s:[i,i],s:b}", "pool_size", 2, 2, "strides", 2, 2, "padding",
                            0, 0, 0, 0, "dilation", 1, 1, "ceil_mode", ceil_mode),
            1, dq(m, x, 0.1, 2));
    return finish(m, &x, 1, q(m, *p, out_scale, 2, TTH_I8));
}

Test(cmsisnn, pools)
{
    tth_rexpr *p;
    tth_relay_module *m = test_relay_module();
    tth_relay_function *f = build_pool(m, TTH_OP_MAX_POOL2D, 0.1, 0, &p);
    accepts(f, p);
    m = test_relay_module();
    f = build_pool(m, TTH_OP_AVG_POOL2D, 0.1, 0, &p);
    accepts(f, p);
    m = test_relay_module();
    f = build_pool(m, TTH_OP_MAX_POOL2D, 0.2, 0, &p);
    refuses(f, p, "nn.max_pool2d requantizing (scale 0.1 -> 0.2, zero point 2 -> 2): CMSIS-NN pools keep the "
                     "input's quantization");
    m = test_relay_module();
    f = build_pool(m, TTH_OP_AVG_POOL2D, 0.1, 1, &p);
    refuses(f, p, "nn.avg_pool2d with ceil_mode: CMSIS-NN's output size rounds down");
}

Test(cmsisnn, other_ops_refused)
{
    tth_relay_module *m = test_relay_module();
    int64_t xs[2] = {2, 3};
    tth_rexpr *x = x_var(m, "x", TTH_F32, 2, xs);
    tth_rexpr *s = op(m, TTH_OP_SIGMOID, NULL, 1, x);
    tth_rexpr *r = op(m, TTH_OP_CLIP, json_pack("{s:f,s:f}", "a_min", 0.0, "a_max", 6.0), 1, s);
    tth_relay_function *f = finish(m, &x, 1, r);
    refuses(f, s, "sigmoid has no CMSIS-NN kernel");
    refuses(f, r, "clip outside a CMSIS-NN pattern (conv2d/fully connected with requantize, or dequantize -> "
                     "softmax/add/mul/pool -> quantize)");
}

/* ---- relay_to_tir ---- */

/* A stand-in for memory planning: LOCAL buffers one after another, 16-byte aligned. */
static int64_t plan_stmt(const tth_tstmt *s, int64_t at)
{
    if (!s)
        return at;
    switch (s->kind) {
    case TTH_TSTMT_SEQ:
        for (size_t i = 0; i < s->u.seq.n; i++)
            at = plan_stmt(s->u.seq.stmts[i], at);
        return at;
    case TTH_TSTMT_ALLOCATE:
        s->u.alloc.buf->offset = at;
        return plan_stmt(s->u.alloc.body, at + (int64_t)((tth_tbuffer_nbytes(s->u.alloc.buf) + 15) / 16 * 16));
    default: return at;
    }
}

/* The LOCAL buffer named `name`'s byte size in f, or -1. */
static int64_t local_bytes(const tth_tstmt *s, const char *name)
{
    if (!s)
        return -1;
    if (s->kind == TTH_TSTMT_ALLOCATE) {
        if (!strcmp(s->u.alloc.buf->name, name)) {
            cr_assert_eq(s->u.alloc.buf->scope, TTH_SCOPE_LOCAL);
            return (int64_t)tth_tbuffer_nbytes(s->u.alloc.buf);
        }
        return local_bytes(s->u.alloc.body, name);
    }
    if (s->kind == TTH_TSTMT_SEQ)
        for (size_t i = 0; i < s->u.seq.n; i++) {
            int64_t b = local_bytes(s->u.seq.stmts[i], name);
            if (b >= 0)
                return b;
        }
    return -1;
}

static const tth_texpr *first_call(const tth_tstmt *s)
{
    while (s && s->kind == TTH_TSTMT_ALLOCATE)
        s = s->u.alloc.body;
    if (s && s->kind == TTH_TSTMT_SEQ)
        s = s->u.seq.stmts[0];
    cr_assert(s && s->kind == TTH_TSTMT_EVALUATE);
    return s->u.eval.value;
}

/* The arguments of f's call number k to CMSIS-NN (its "cmsis_nn" attribute). */
static json_t *cmsis_call(const tth_prim_func *f, size_t k)
{
    return json_array_get(json_object_get(f->attrs, "cmsis_nn"), k);
}

static tth_prim_func *lower(const char *target, const tth_relay_function *fn, const char *sym, tth_tir_module *tm)
{
    json_t *t = npu_target(target);
    tth_diag d;
    tth_diag_clear(&d);
    int rc = npu_plugin("cmsis-nn")->relay_to_tir(NULL, t, fn, sym, tm, &d);
    json_decref(t);
    cr_assert_eq(rc, 0, "relay_to_tir: %s", d.message);
    tth_diag_clear(&d);
    cr_assert_eq(tth_tir_verify(tm, &d), 0, "%s", d.message);
    tth_prim_func *f = tth_tir_module_find(tm, sym);
    cr_assert(f);
    /* as the compile flow does after relay_to_tir (daemon/compile/hooks.c) */
    json_object_set_new(f->attrs, "inputs", json_integer((json_int_t)fn->nparams));
    return f;
}

Test(cmsisnn, conv_tir_and_context_sizes)
{
    /* conv 8 -> 4 channels, 3x3, pad 1: col = 72; MVE 4 * 80 = 320, otherwise 2 * 72 * 2 = 288 */
    static const struct { const char *target; int64_t ctx; } cases[] = {
        {"cmsis-nn -mcpu=cortex-m55", 320},
        {"cmsis-nn -mcpu=cortex-m55 -mattr=+nomve", 288},
        {"cmsis-nn -mcpu=cortex-m4", 288},
        {"cmsis-nn -mcpu=cortex-m0", 288},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tth_relay_module *m = test_relay_module();
        conv_opt o = conv_default();
        o.clip = 1;
        conv_nodes n = build_conv(m, &o);
        tth_tir_module *tm = test_tir_module();
        tth_prim_func *f = lower(cases[i].target, n.fn, "t_cmsis_nn_main_0", tm);
        cr_assert_str_eq(f->target_kind, "cmsis-nn");
        cr_assert_eq(f->nparams, 2);
        const tth_texpr *c = first_call(f->body);
        cr_assert_eq(c->kind, TTH_TEXPR_CALL_EXTERN);
        cr_assert_str_eq(c->u.call.name, "t_cmsis_nn_main_0_k0");
        cr_assert_eq(local_bytes(f->body, "k0_ctx"), cases[i].ctx, "%s", cases[i].target);
        cr_assert_eq(local_bytes(f->body, "k0_in_nhwc"), 8 * 6 * 6);
        cr_assert_eq(local_bytes(f->body, "k0_out_nhwc"), 4 * 6 * 6);
        json_t *d = cmsis_call(f, 0);
        cr_assert_str_eq(json_string_value(json_object_get(d, "function")), "arm_convolve_wrapper_s8");
        cr_assert_eq(json_integer_value(json_object_get(d, "input_offset")), 3);
        cr_assert_eq(json_integer_value(json_object_get(d, "output_offset")), 5);
        cr_assert_eq(json_integer_value(json_array_get(json_object_get(d, "activation"), 0)), -20);
        cr_assert_eq(json_integer_value(json_array_get(json_object_get(d, "activation"), 1)), 100);
    }
}

Test(cmsisnn, depthwise_and_fastpath_context_sizes)
{
    /* depthwise 8 channels: MVE 4 * 124 * KH * KW; DSP none for 3x3 padded by at most 1 (its own
     * kernel), else 8 * KH * KW * 2; neither none */
    static const struct { const char *target; int k; int64_t ctx; } dw[] = {
        {"cmsis-nn -mcpu=cortex-m55", 3, 4 * 124 * 9},
        {"cmsis-nn -mcpu=cortex-m7", 3, -1},
        {"cmsis-nn -mcpu=cortex-m7", 5, 8 * 25 * 2},
        {"cmsis-nn -mcpu=cortex-m3", 5, -1},
    };
    for (size_t i = 0; i < sizeof dw / sizeof dw[0]; i++) {
        tth_relay_module *m = test_relay_module();
        conv_opt o = conv_default();
        o.groups = 8;
        o.oc = 8;
        o.kh = o.kw = dw[i].k;
        o.pad = dw[i].k / 2;
        conv_nodes n = build_conv(m, &o);
        tth_tir_module *tm = test_tir_module();
        tth_prim_func *f = lower(dw[i].target, n.fn, "dw", tm);
        cr_assert_eq(local_bytes(f->body, "k0_ctx"), dw[i].ctx, "%s", dw[i].target);
        json_t *d = cmsis_call(f, 0);
        cr_assert_str_eq(json_string_value(json_object_get(d, "function")), "arm_depthwise_conv_wrapper_s8");
        cr_assert_eq(json_integer_value(json_array_get(json_object_get(d, "filter_dims"), 3)), 8);
    }
    /* 1x1, no padding, C_IN % 4 == 0, stride 1: no context on any CPU */
    conv_nodes n = npu_conv(t_pointwise);
    tth_prim_func *f = lower(M55, n.fn, "pw", test_tir_module());
    cr_assert_eq(local_bytes(f->body, "k0_ctx"), -1);
}

/* On MVE builds arm_fully_connected_s8 reads per-output kernel sums from ctx->buf and ignores the
 * bias: the context must be bias[o] + input_offset * sum_k w[k][o], a constant computed at compile
 * time (docs/cmsisnn.md, "What a context must hold"). Without MVE there is no context. */
Test(cmsisnn, fc_kernel_sums_on_mve)
{
    static const char *const targets[] = {"cmsis-nn -mcpu=cortex-m55", "cmsis-nn -mcpu=cortex-m4"};
    for (size_t i = 0; i < 2; i++) {
        tth_relay_module *m = test_relay_module();
        tth_rexpr *mm, *rq;
        tth_relay_function *fn = build_fc(m, 0, 0, &mm, &rq);
        const tth_tensor *w = mm->u.call.args[1]->u.constant.value;               /* [16, 8] */
        const tth_rexpr *acc = rq->u.call.args[0];
        const tth_tensor *bias = acc->u.call.args[1]->u.constant.value;          /* [8] */
        tth_tir_module *tm = test_tir_module();
        tth_prim_func *f = lower(targets[i], fn, "fc", tm);
        const tth_texpr *c = first_call(f->body);
        const tth_tbuffer *ks = NULL;
        for (size_t a = 0; a < c->u.call.nargs; a++) {
            const tth_tbuffer *b = c->u.call.args[a]->u.load.buf;
            if (strstr(b->name, "kernel_sum"))
                ks = b;
        }
        json_t *d = cmsis_call(f, 0);
        if (i == 1) {
            cr_assert_null(ks, "a DSP build has no kernel sums");
            cr_assert_eq(json_integer_value(json_object_get(d, "ctx_size")), 0);
        } else {
            cr_assert(ks, "no kernel sums for the MVE build");
            cr_assert_eq(ks->scope, TTH_SCOPE_CONST);
            cr_assert_eq(ks->dtype, TTH_I32);
            cr_assert_eq(tth_tbuffer_numel(ks), 8);
            cr_assert_eq(json_integer_value(json_object_get(d, "ctx_size")), 8 * 4);
            for (int64_t o = 0; o < 8; o++) {
                int64_t want = tth_tensor_get_i64(bias, o);
                for (int64_t k = 0; k < 16; k++)
                    want += -4 * tth_tensor_get_i64(w, k * 8 + o); /* input zero point 4 */
                cr_assert_eq(tth_tensor_get_i64(ks->data, o), want, "kernel sum %lld", (long long)o);
            }
        }
    }
}

/* The CMSIS-NN call of an add (mul 0) or a multiply (mul 1) lowered for the Cortex-M55. */
static json_t *binary_call(int mul)
{
    tth_rexpr *e;
    tth_relay_function *fn = build_binary(test_relay_module(), mul ? TTH_OP_MULTIPLY : TTH_OP_ADD, 0, &e);
    return cmsis_call(lower(M55, fn, "bin", test_tir_module()), 0);
}

/* add and mul clamp to the int8 range (a zero range once made every output the zero point) */
Test(cmsisnn, elementwise_activation_is_the_int8_range)
{
    for (int mul = 0; mul < 2; mul++) {
        json_t *d = binary_call(mul);
        cr_assert_eq(json_integer_value(json_array_get(json_object_get(d, "activation"), 0)), -128);
        cr_assert_eq(json_integer_value(json_array_get(json_object_get(d, "activation"), 1)), 127);
    }
}

/* A 1x1 conv 4 -> 4 with its requantize after `x` (build_conv's result): a two-conv chain. */
static tth_rexpr *second_conv(tth_relay_module *m, tth_rexpr *x)
{
    int64_t ws[4] = {4, 4, 1, 1};
    tth_rexpr *c2 = op(m, TTH_OP_QNN_CONV2D, NULL, 4, x, k_tensor(m, TTH_I8, 4, ws, 1, 1, 3), k_scalar(m, TTH_I8, 5),
                       k_scalar(m, TTH_I8, 0));
    return requant(m, c2, k_scalar(m, TTH_F32, 0.01), 0.2, 0, TTH_I8);
}

/* conv -> conv inside one region: the value between them stays NHWC (no staging between the
 * calls); the region's input and result are NCHW, converted once each */
Test(cmsisnn, nhwc_between_offloaded_calls)
{
    tth_relay_module *m = test_relay_module();
    conv_opt o = conv_default();
    conv_nodes n = build_conv(m, &o);
    tth_rexpr *r2 = second_conv(m, n.rq);
    tth_diag_clear(&bd);
    tth_relay_function *f = tth_relay_function_add(m, "region", &n.x, 1, r2, NULL, &bd);
    cr_assert(f, "%s", bd.message);
    tth_tir_module *tm = test_tir_module();
    tth_prim_func *pf = lower(M55, f, "chain", tm);
    cr_assert_eq(local_bytes(pf->body, "k0_in_nhwc"), 8 * 6 * 6, "the region's NCHW input is converted");
    cr_assert_eq(local_bytes(pf->body, "k0_out_nhwc"), -1, "conv1 writes NHWC directly");
    cr_assert_eq(local_bytes(pf->body, "k0_out"), 4 * 6 * 6);
    cr_assert_eq(local_bytes(pf->body, "k1_in_nhwc"), -1, "conv2 reads conv1's NHWC output directly");
    cr_assert_eq(local_bytes(pf->body, "k1_out_nhwc"), 4 * 6 * 6, "the region's result is converted to NCHW");
}

Test(cmsisnn, tuple_results)
{
    /* conv1 -> conv2 where conv1's output also leaves the region: two outputs, conv1's not LOCAL */
    tth_relay_module *m = test_relay_module();
    conv_opt o = conv_default();
    conv_nodes n = build_conv(m, &o);
    tth_rexpr *r2 = second_conv(m, n.rq);
    tth_rexpr *fields[2] = {r2, n.rq};
    tth_diag_clear(&bd);
    tth_rexpr *tup = tth_relay_tuple(m, fields, 2, &bd);
    cr_assert(tup, "%s", bd.message);
    tth_diag_clear(&bd);
    tth_relay_function *f = tth_relay_function_add(m, "region", &n.x, 1, tup, NULL, &bd);
    cr_assert(f, "%s", bd.message);
    tth_tir_module *tm = test_tir_module();
    tth_prim_func *pf = lower(M55, f, "two", tm);
    cr_assert_eq(pf->nparams, 3);
    cr_assert_str_eq(pf->params[1]->name, "out0");
    cr_assert_str_eq(pf->params[2]->name, "out1");
    cr_assert_eq(local_bytes(pf->body, "k0_out"), -1, "conv1's output is the result out1, not a LOCAL");
    cr_assert_eq(json_array_size(json_object_get(pf->attrs, "cmsis_nn")), 2);
}

Test(cmsisnn, pool_and_fc_context_sizes)
{
    /* avg pool: DSP without MVE C_IN * 4, else 0; max pool never; fc: never scratch (on MVE the
     * context holds the kernel sums, a constant: fc_kernel_sums_on_mve) */
    static const struct { const char *target; int64_t avg, fc; } cases[] = {
        {"cmsis-nn -mcpu=cortex-m55", -1, -1},
        {"cmsis-nn -mcpu=cortex-m33", 8 * 4, -1},
        {"cmsis-nn -mcpu=cortex-m0plus", -1, -1},
    };
    for (size_t i = 0; i < 3; i++) {
        tth_rexpr *e, *a, *b;
        tth_relay_module *m = test_relay_module();
        tth_tir_module *tm = test_tir_module();
        tth_prim_func *f = lower(cases[i].target, build_pool(m, TTH_OP_AVG_POOL2D, 0.1, 0, &e), "avg", tm);
        cr_assert_eq(local_bytes(f->body, "k0_ctx"), cases[i].avg, "%s", cases[i].target);
        m = test_relay_module();
        f = lower(cases[i].target, build_pool(m, TTH_OP_MAX_POOL2D, 0.1, 0, &e), "max", tm);
        cr_assert_eq(local_bytes(f->body, "k0_ctx"), -1);
        m = test_relay_module();
        f = lower(cases[i].target, build_fc(m, 0, 0, &a, &b), "fc", tm);
        cr_assert_eq(local_bytes(f->body, "k0_ctx"), cases[i].fc, "%s", cases[i].target);
        json_t *d = cmsis_call(f, 0);
        cr_assert_eq(json_integer_value(json_object_get(d, "input_offset")), -4);
        cr_assert_eq(json_integer_value(json_array_get(json_object_get(d, "filter_dims"), 0)), 16);
        cr_assert_eq(json_integer_value(json_array_get(json_object_get(d, "filter_dims"), 3)), 8);
    }
}

Test(cmsisnn, bias_add_either_order)
{
    tth_relay_module *m = test_relay_module();
    int64_t xs[4] = {1, 4, 4, 4}, ws[4] = {4, 4, 1, 1}, bs[3] = {4, 1, 1};
    tth_rexpr *x = x_var(m, "x", TTH_I8, 4, xs);
    tth_rexpr *c = op(m, TTH_OP_QNN_CONV2D, NULL, 4, x, k_tensor(m, TTH_I8, 4, ws, 1, 1, 3), k_scalar(m, TTH_I8, 0),
                      k_scalar(m, TTH_I8, 0));
    tth_rexpr *add = op(m, TTH_OP_ADD, NULL, 2, k_tensor(m, TTH_I32, 3, bs, 5, 1, 4), c);
    tth_rexpr *rq = requant(m, add, k_scalar(m, TTH_F32, 0.001), 0.1, 0, TTH_I8);
    tth_relay_function *f = finish(m, &x, 1, rq);
    accepts(f, c);
    accepts(f, add);
    accepts(f, rq);
}

/* Run python3 with a script and argv; its stdout as JSON. */
static json_t *python(const char *script, const char *args)
{
    char path[] = "/tmp/tth-cmsisnn-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    cr_assert_eq(write(fd, script, strlen(script)), (ssize_t)strlen(script));
    close(fd);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s %s", path, args);
    FILE *p = popen(cmd, "r");
    cr_assert(p);
    json_error_t e;
    json_t *j = json_loadf(p, 0, &e);
    cr_assert_eq(pclose(p), 0);
    unlink(path);
    cr_assert(j, "python output: %s", e.text);
    return j;
}

/* Q31 multiplier and shift by exact rational arithmetic: real = m * 2^(shift - 31), m in [2^30, 2^31),
 * rounding half away from zero: a different route from the plugin's frexp. */
static const char py_quant[] =
    "import sys, json\n"
    "from fractions import Fraction\n"
    "import numpy as np\n"
    "out = []\n"
    "for a in sys.argv[1:]:\n"
    "    real = Fraction(float(np.float64(a)))\n"
    "    shift = 0\n"
    "    while real * Fraction(2) ** -shift >= 1: shift += 1\n"
    "    while real * Fraction(2) ** -shift < Fraction(1, 2): shift -= 1\n"
    "    x = real * Fraction(2) ** (31 - shift)\n"
    "    m = int(x + Fraction(1, 2))\n"
    "    if m == 2 ** 31: m //= 2; shift += 1\n"
    "    out.append([m, shift])\n"
    "print(json.dumps(out))\n";

Test(cmsisnn, requantization_multipliers_match_python)
{
    tth_relay_module *m = test_relay_module();
    conv_opt o = conv_default();
    o.per_channel = 1;
    o.oc = 6;
    conv_nodes n = build_conv(m, &o);
    tth_tir_module *tm = test_tir_module();
    tth_prim_func *f = lower(M55, n.fn, "q", tm);
    json_t *d = cmsis_call(f, 0);
    /* the real scales as the plugin sees them: float32 constants over the float32 output scale */
    const tth_tensor *s = n.rq->u.call.args[1]->u.constant.value;
    char args[2048] = "";
    for (int i = 0; i < 6; i++) {
        char one[64];
        snprintf(one, sizeof one, " %.17g", tth_tensor_get_f64(s, i) / (double)0.1f);
        strcat(args, one);
    }
    json_t *want = python(py_quant, args);
    for (size_t i = 0; i < 6; i++) {
        json_int_t mu = json_integer_value(json_array_get(json_object_get(d, "multiplier"), i));
        json_int_t sh = json_integer_value(json_array_get(json_object_get(d, "shift"), i));
        cr_assert_eq(mu, json_integer_value(json_array_get(json_array_get(want, i), 0)), "channel %zu: %lld vs %lld (%s)", i,
                     (long long)mu, (long long)json_integer_value(json_array_get(json_array_get(want, i), 0)), args);
        cr_assert_eq(sh, json_integer_value(json_array_get(json_array_get(want, i), 1)), "channel %zu", i);
    }
    json_decref(want);
}

/* softmax: mult/shift of in_scale * 2^26 and diff_min = -floor(31 * 2^26 / 2^shift). */
static const char py_softmax[] =
    "import sys, json, math\n"
    "from fractions import Fraction\n"
    "s = Fraction(float(sys.argv[1]))\n"
    "real = min(s * 2 ** 26, Fraction(2 ** 31 - 1))\n"
    "shift = 0\n"
    "while real * Fraction(2) ** -shift >= 1: shift += 1\n"
    "while real * Fraction(2) ** -shift < Fraction(1, 2): shift -= 1\n"
    "m = int(real * Fraction(2) ** (31 - shift) + Fraction(1, 2))\n"
    "if m == 2 ** 31: m //= 2; shift += 1\n"
    "diff_min = -math.floor(Fraction(31 * 2 ** 26, 2 ** shift))\n"
    "print(json.dumps([m, shift, diff_min]))\n";

Test(cmsisnn, softmax_arguments_match_python)
{
    tth_relay_module *m = test_relay_module();
    tth_rexpr *sm, *d0, *qq;
    tth_relay_function *fn = build_softmax(m, -1, 1.0 / 256, -128, &sm, &d0, &qq);
    tth_tir_module *tm = test_tir_module();
    tth_prim_func *f = lower(M55, fn, "sm", tm);
    json_t *d = cmsis_call(f, 0);
    cr_assert_str_eq(json_string_value(json_object_get(d, "function")), "arm_softmax_s8");
    cr_assert_eq(json_integer_value(json_object_get(d, "num_rows")), 3);
    cr_assert_eq(json_integer_value(json_object_get(d, "row_size")), 10);
    json_t *want = python(py_softmax, "0.125");
    cr_assert_eq(json_integer_value(json_object_get(d, "mult")), json_integer_value(json_array_get(want, 0)));
    cr_assert_eq(json_integer_value(json_object_get(d, "shift")), json_integer_value(json_array_get(want, 1)));
    cr_assert_eq(json_integer_value(json_object_get(d, "diff_min")), json_integer_value(json_array_get(want, 2)));
    json_decref(want);
}

/* add: inputs rescaled by s_i / (2 max), output by 2 max / (2^20 s_out); mul: s1 s2 / s_out. */
Test(cmsisnn, add_mul_arguments_match_python)
{
    for (int mul = 0; mul < 2; mul++) {
        json_t *d = binary_call(mul);
        cr_assert_eq(json_integer_value(json_array_get(json_object_get(d, "input_offsets"), 0)), -1);
        cr_assert_eq(json_integer_value(json_array_get(json_object_get(d, "input_offsets"), 1)), 4);
        cr_assert_eq(json_integer_value(json_object_get(d, "output_offset")), 3);
        cr_assert_eq(json_integer_value(json_object_get(d, "block_size")), 100);
        /* scales as float32 constants, widened */
        double s1 = (float)0.02, s2 = (float)0.03, so = (float)0.04;
        char args[512];
        if (mul)
            snprintf(args, sizeof args, "%.17g", s1 * s2 / so);
        else
            snprintf(args, sizeof args, "%.17g %.17g %.17g", s1 / (2 * s2), s2 / (2 * s2), 2 * s2 / (1048576.0 * so));
        json_t *want = python(py_quant, args);
        for (size_t i = 0; i < json_array_size(want); i++) {
            cr_assert_eq(json_integer_value(json_array_get(json_object_get(d, "multiplier"), i)),
                         json_integer_value(json_array_get(json_array_get(want, i), 0)));
            cr_assert_eq(json_integer_value(json_array_get(json_object_get(d, "shift"), i)),
                         json_integer_value(json_array_get(json_array_get(want, i), 1)));
        }
        json_decref(want);
    }
}

/* ---- tir_to_runtime: the C compiles for Cortex-M ---- */

static void compile_for(const char *src_path, const char *mcpu)
{
    const char *root = getenv("TTH_SOURCE_ROOT");
    cr_assert(root);
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "arm-none-eabi-gcc -std=c99 -mthumb -mcpu=%s -O2 -Wall -Wextra -Werror -I%s/plugins/cmsisnn/reference -c %s -o %s.%s.o "
             "2>&1",
             mcpu, root, src_path, src_path, mcpu);
    FILE *p = popen(cmd, "r");
    cr_assert(p);
    char out[4096];
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    int st = pclose(p);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s failed:\n%s", cmd, out);
    cr_assert_eq(n, 0, "compiler output:\n%s", out);
}

Test(cmsisnn, generated_c_compiles_for_cortex_m, .timeout = 120)
{
    static const char *const cpus[][2] = {{"cortex-m55", "cmsis-nn -mcpu=cortex-m55"},
                                          {"cortex-m4", "cmsis-nn -mcpu=cortex-m4"},
                                          {"cortex-m0", "cmsis-nn -mcpu=cortex-m0"}};
    for (size_t c = 0; c < 3; c++) {
        tth_relay_module *m = test_relay_module();
        tth_tir_module *tm = test_tir_module();
        conv_opt o = conv_default();
        o.clip = 1;
        o.per_channel = 1;
        lower(cpus[c][1], build_conv(m, &o).fn, "r_conv", tm);
        m = test_relay_module();
        o = conv_default();
        o.groups = o.oc = 8;
        lower(cpus[c][1], build_conv(m, &o).fn, "r_dw", tm);
        tth_rexpr *a, *b, *e;
        m = test_relay_module();
        lower(cpus[c][1], build_fc(m, 0, 0, &a, &b), "r_fc", tm);
        m = test_relay_module();
        lower(cpus[c][1], build_softmax(m, -1, 1.0 / 256, -128, &a, &b, &e), "r_sm", tm);
        m = test_relay_module();
        lower(cpus[c][1], build_binary(m, TTH_OP_ADD, 0, &e), "r_add", tm);
        m = test_relay_module();
        lower(cpus[c][1], build_binary(m, TTH_OP_MULTIPLY, 0, &e), "r_mul", tm);
        m = test_relay_module();
        lower(cpus[c][1], build_pool(m, TTH_OP_MAX_POOL2D, 0.1, 0, &e), "r_max", tm);
        m = test_relay_module();
        lower(cpus[c][1], build_pool(m, TTH_OP_AVG_POOL2D, 0.1, 0, &e), "r_avg", tm);
        /* unplanned LOCAL buffers are refused */
        tth_runtime_module *rt = tth_runtime_module_new("cmsis-nn");
        json_t *t = npu_target(cpus[c][1]);
        tth_diag d;
        tth_diag_clear(&d);
        cr_assert_eq(npu_plugin("cmsis-nn")->tir_to_runtime(NULL, t, tm, rt, &d), TTH_EINVAL);
        cr_assert(strstr(d.message, "has no workspace offset: memory planning must run first"), "%s", d.message);
        tth_runtime_module_free(rt);
        for (size_t i = 0; i < tm->nfuncs; i++)
            plan_stmt(tm->funcs[i]->body, 0);
        rt = tth_runtime_module_new("cmsis-nn");
        tth_diag_clear(&d);
        cr_assert_eq(npu_plugin("cmsis-nn")->tir_to_runtime(NULL, t, tm, rt, &d), 0, "%s", d.message);
        json_decref(t);
        cr_assert_eq(tth_runtime_module_count(rt), 1);
        const tth_module_file *file = tth_runtime_module_file(rt, 0);
        cr_assert_str_eq(file->name, "cmsisnn_lib0.c");
        cr_assert_eq(file->kind, TTH_FILE_C_SOURCE);
        char *text = strndup((const char *)file->data, file->len);
        cr_assert(strstr(text, "#include \"arm_nnfunctions.h\""));
        cr_assert(strstr(text, "arm_convolve_wrapper_s8(&ctx, &params, &quant, &input_dims, input_nhwc"));
        cr_assert(strstr(text, "arm_depthwise_conv_wrapper_s8("));
        cr_assert(strstr(text, "arm_fully_connected_s8("));
        cr_assert(strstr(text, "arm_softmax_s8(input, 3, 10, "));
        cr_assert(strstr(text, "arm_elementwise_add_s8(input, input2, -1, "));
        cr_assert(strstr(text, "arm_elementwise_mul_s8(input, input2, -1, 4, output, 3, "));
        cr_assert(strstr(text, "arm_max_pool_s8("));
        cr_assert(strstr(text, "arm_avgpool_s8("));
        cr_assert(strstr(text, "int32_t r_conv(const int8_t *restrict p0, int8_t *restrict out0, uint8_t *restrict ws)"));
        free(text);
        char path[256];
        snprintf(path, sizeof path, "/tmp/tth-cmsisnn-%d-%s.c", (int)getpid(), cpus[c][0]);
        FILE *fp = fopen(path, "wb");
        cr_assert(fp);
        fwrite(file->data, 1, file->len, fp);
        fclose(fp);
        compile_for(path, cpus[c][0]);
        /* and as portable C99 with the host's gcc and clang, warnings as errors */
        static const char *const host_cc[] = {"gcc", "clang"};
        for (size_t k = 0; k < 2; k++) {
            char cmd[1024];
            snprintf(cmd, sizeof cmd, "%s -std=c99 -Wall -Wextra -Werror -fsyntax-only -I%s/plugins/cmsisnn/reference %s",
                     host_cc[k], getenv("TTH_SOURCE_ROOT"), path);
            int st = system(cmd);
            cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s failed", cmd);
        }
        char obj[300];
        snprintf(obj, sizeof obj, "%s.%s.o", path, cpus[c][0]);
        unlink(obj);
        unlink(path);
        tth_runtime_module_free(rt);
    }
}
