/* The ethos-n kind: every Ethos-N78 partition rule (accepted, and refused with its exact reason),
 * the compiled-network blob (deterministic, parsed back field by field), the C entry that reports
 * the missing driver, constant_updater's names, and unsupported variants. There is no Ethos-N
 * driver or NPU here: nothing runs on an NPU. */
#include <sys/wait.h>

#include "../cmsisnn/npu_test.h"

TestSuite(ethosn, .init = npu_load, .fini = npu_unload);

#define N78 "ethos-n -tops=4"

static void accepts(const tth_relay_function *fn, const tth_rexpr *call)
{
    json_t *t = npu_target(N78);
    char why[256];
    cr_assert_eq(supports("ethos-n", t, fn, call, why, sizeof why), 1, "%s refused: %s",
                 tth_op_name(call->u.call.op), why);
    json_decref(t);
}

static void refuses(const tth_relay_function *fn, const tth_rexpr *call, const char *reason)
{
    json_t *t = npu_target(N78);
    char why[256];
    cr_assert_eq(supports("ethos-n", t, fn, call, why, sizeof why), 0, "%s accepted", tth_op_name(call->u.call.op));
    cr_assert_str_eq(why, reason);
    json_decref(t);
}

Test(ethosn, conv_accepted)
{
    tth_relay_module *m = tth_relay_module_new("t");
    conv_opt o = conv_default();
    o.clip = 1;
    conv_nodes n = build_conv(m, &o);
    accepts(n.fn, n.conv);
    accepts(n.fn, n.add);
    accepts(n.fn, n.rq);
    accepts(n.fn, n.clip);
    tth_relay_module_free(m);
    /* depthwise, uint8, stride 2 SAME (6 -> 3, total padding 1: 0 before, 1 after) */
    m = tth_relay_module_new("t");
    o = conv_default();
    o.groups = o.oc = 8;
    n = build_conv(m, &o);
    accepts(n.fn, n.conv);
    tth_relay_module_free(m);
}

typedef void (*tweak_fn)(conv_opt *);
static void conv_refused(tweak_fn tweak, const char *reason)
{
    tth_relay_module *m = tth_relay_module_new("t");
    conv_opt o = conv_default();
    tweak(&o);
    conv_nodes n = build_conv(m, &o);
    refuses(n.fn, n.conv, reason);
    refuses(n.fn, n.rq, reason);
    tth_relay_module_free(m);
}

static void k4(conv_opt *o) { o->kh = o->kw = 4; o->pad = 0; }
static void s3(conv_opt *o) { o->stride = 3; o->pad = 0; }
static void k9s2(conv_opt *o) { o->kh = o->kw = 9; o->stride = 2; o->h = o->w = 20; o->pad = 0; }
static void dil(conv_opt *o) { o->dilation = 2; o->pad = 2; }
static void pad2(conv_opt *o) { o->pad = 2; }
static void dwm(conv_opt *o) { o->groups = 8; o->oc = 16; }
static void grp(conv_opt *o) { o->groups = 2; }
static void ratio(conv_opt *o) { o->ys = 1e-9; }

Test(ethosn, conv_refusals)
{
    conv_refused(k4, "qnn.conv2d with a 4x4 kernel: the Ethos-N78 takes kernel sizes 1, 2, 3, 5, 7, 9");
    conv_refused(s3, "qnn.conv2d with strides [3, 3]: the Ethos-N78 takes stride 1 or 2");
    conv_refused(k9s2, "qnn.conv2d with a 9x9 kernel at stride [2, 2]: kernels above 7 only at stride 1");
    conv_refused(dil, "qnn.conv2d with dilation [2, 2]: the Ethos-N78 takes dilation 1");
    conv_refused(pad2, "qnn.conv2d with padding [2, 2, 2, 2]: the Ethos-N78 takes SAME or VALID padding");
    conv_refused(dwm, "depthwise qnn.conv2d with channel multiplier 2: the Ethos-N78 takes multiplier 1");
    conv_refused(grp, "qnn.conv2d with 2 groups of 8 channels: the Ethos-N78 has plain and depthwise convolutions only");
    conv_refused(ratio, "qnn.conv2d with input*weight/output scale 500000: the Ethos-N78 needs it in (0, 65536)");
}

static void b2(conv_opt *o) { o->n = 2; }
static void i16(conv_opt *o) { o->dtype = TTH_I16; }

Test(ethosn, general_rules)
{
    tth_relay_module *m = tth_relay_module_new("t");
    conv_opt o = conv_default();
    b2(&o);
    conv_nodes n = build_conv(m, &o);
    refuses(n.fn, n.conv, "qnn.conv2d input int8[2, 8, 6, 6] has batch 2: the Ethos-N78 takes batch 1");
    tth_relay_module_free(m);
    m = tth_relay_module_new("t");
    o = conv_default();
    i16(&o);
    n = build_conv(m, &o);
    refuses(n.fn, n.conv, "qnn.conv2d input 0 is int16: the Ethos-N78 takes int8 or uint8");
    tth_relay_module_free(m);
    /* 5 dimensions */
    m = tth_relay_module_new("t");
    int64_t xs[4] = {1, 2, 12, 5};
    tth_rexpr *x = x_var(m, "x", TTH_I8, 4, xs);
    tth_rexpr *r = op(m, TTH_OP_RESHAPE, json_pack("{s:[i,i,i,i,i]}", "newshape", 1, 2, 3, 4, 5), 1, x);
    tth_relay_function *f = finish(m, &x, 1, r);
    refuses(f, r, "reshape output int8[1, 2, 3, 4, 5] has 5 dimensions: the Ethos-N78 takes at most 4");
    tth_relay_module_free(m);
    /* an operator the NPU does not have */
    m = tth_relay_module_new("t");
    int64_t ss[2] = {1, 10};
    x = x_var(m, "x", TTH_I8, 2, ss);
    tth_rexpr *s = op(m, TTH_OP_SOFTMAX, json_pack("{s:i}", "axis", -1), 1, dq(m, x, 0.1, 0));
    f = finish(m, &x, 1, q(m, s, 1.0 / 256, -128, TTH_I8));
    refuses(f, s, "nn.softmax is not supported by the Ethos-N78");
    tth_relay_module_free(m);
}

/* dequantize -> unary -> quantize(scale, zp, dtype) */
static tth_relay_function *build_unary(tth_relay_module *m, tth_op o, double s, int zp, tth_dtype d, tth_rexpr **e,
                                       tth_rexpr **din, tth_rexpr **qout)
{
    int64_t xs[4] = {1, 16, 4, 4};
    tth_rexpr *x = x_var(m, "x", d, 4, xs);
    *din = dq(m, x, 0.1, d == TTH_U8 ? 128 : 0);
    *e = op(m, o, NULL, 1, *din);
    *qout = q(m, *e, s, zp, d);
    return finish(m, &x, 1, *qout);
}

Test(ethosn, sigmoid_tanh_output_scale)
{
    tth_rexpr *e, *d, *qq;
    tth_relay_module *m = tth_relay_module_new("t");
    tth_relay_function *f = build_unary(m, TTH_OP_SIGMOID, 1.0 / 256, -128, TTH_I8, &e, &d, &qq);
    accepts(f, d);
    accepts(f, e);
    accepts(f, qq);
    tth_relay_module_free(m);
    m = tth_relay_module_new("t");
    f = build_unary(m, TTH_OP_SIGMOID, 1.0 / 256, 0, TTH_U8, &e, &d, &qq);
    accepts(f, e);
    tth_relay_module_free(m);
    m = tth_relay_module_new("t");
    f = build_unary(m, TTH_OP_SIGMOID, 1.0 / 256, 0, TTH_I8, &e, &d, &qq);
    refuses(f, e, "sigmoid quantized with scale 0.00390625 and zero point 0: the Ethos-N78 writes scale 1/256, zero "
                  "point -128");
    refuses(f, d, "sigmoid quantized with scale 0.00390625 and zero point 0: the Ethos-N78 writes scale 1/256, zero "
                  "point -128");
    tth_relay_module_free(m);
    m = tth_relay_module_new("t");
    f = build_unary(m, TTH_OP_TANH, 1.0 / 128, 0, TTH_I8, &e, &d, &qq);
    accepts(f, e);
    tth_relay_module_free(m);
    m = tth_relay_module_new("t");
    f = build_unary(m, TTH_OP_TANH, 1.0 / 256, 0, TTH_I8, &e, &d, &qq);
    refuses(f, e, "tanh quantized with scale 0.00390625 and zero point 0: the Ethos-N78 writes scale 1/128, zero point 0");
    tth_relay_module_free(m);
}

static void concat_case(int64_t c1, int64_t c2, int axis, const char *reason)
{
    tth_relay_module *m = tth_relay_module_new("t");
    int64_t s1[4] = {1, c1, 4, 4}, s2[4] = {1, c2, 4, 4};
    if (axis == 2)
        s2[1] = c1, s2[2] = 8;
    tth_rexpr *ps[2] = {x_var(m, "a", TTH_I8, 4, s1), x_var(m, "b", TTH_I8, 4, s2)};
    tth_rexpr *c = op(m, TTH_OP_CONCATENATE, json_pack("{s:i}", "axis", axis), 2, ps[0], ps[1]);
    tth_relay_function *f = finish(m, ps, 2, c);
    if (reason)
        refuses(f, c, reason);
    else
        accepts(f, c);
    tth_relay_module_free(m);
}

Test(ethosn, concat_channels)
{
    concat_case(16, 32, 1, NULL);
    concat_case(16, 8, 1, "concatenate input 1 has 8 channels: the Ethos-N78 needs multiples of 16");
    concat_case(16, 16, 2, "concatenate along axis 2 of a 4-D tensor: the Ethos-N78 concatenates along channels (axis 1 "
                           "of NCHW)");
}

static void pool_case(tth_op o, int k, int s, int pad, int64_t width, const char *reason)
{
    tth_relay_module *m = tth_relay_module_new("t");
    int64_t xs[4] = {1, 16, k > 8 ? k : 8, width};
    tth_rexpr *x = x_var(m, "x", TTH_I8, 4, xs);
    tth_rexpr *p = op(m, o, json_pack("{s:[i,i],s:[i,i],s:[i,i,i,i],s:[i,i]}", "pool_size", k, k, "strides", s, s,
                                      "padding", pad, pad, pad, pad, "dilation", 1, 1),
                      1, dq(m, x, 0.1, 0));
    tth_relay_function *f = finish(m, &x, 1, q(m, p, 0.1, 0, TTH_I8));
    if (reason)
        refuses(f, p, reason);
    else
        accepts(f, p);
    tth_relay_module_free(m);
}

Test(ethosn, pools)
{
    pool_case(TTH_OP_MAX_POOL2D, 2, 2, 0, 8, NULL);
    pool_case(TTH_OP_MAX_POOL2D, 3, 1, 1, 8, NULL);
    pool_case(TTH_OP_MAX_POOL2D, 4, 2, 0, 8, "nn.max_pool2d 4x4 stride [2, 2]: the Ethos-N78 takes 1x1, 2x2, 3x3 at "
                                             "stride 2, or stride 1");
    pool_case(TTH_OP_MAX_POOL2D, 3, 2, 0, 419, "nn.max_pool2d 3x3 stride 2 on width 419: the Ethos-N78 takes width <= "
                                               "417");
    pool_case(TTH_OP_AVG_POOL2D, 3, 1, 1, 8, NULL);
    pool_case(TTH_OP_AVG_POOL2D, 2, 2, 0, 8, "nn.avg_pool2d 2x2 stride [2, 2]: the Ethos-N78 takes 3x3 stride 1 SAME, "
                                             "or a mean over 7x7 or 8x8");
}

static void pad_case(int amount, const char *reason)
{
    tth_relay_module *m = tth_relay_module_new("t");
    int64_t xs[4] = {1, 16, 4, 4};
    tth_rexpr *x = x_var(m, "x", TTH_I8, 4, xs);
    tth_rexpr *p = op(m, TTH_OP_PAD, json_pack("{s:[i,i,i,i],s:[i,i,i,i],s:f,s:s}", "pad_before", 0, 0, amount, amount,
                                               "pad_after", 0, 0, amount, amount, "pad_value", 0.0, "mode", "constant"),
                      1, x);
    tth_relay_function *f = finish(m, &x, 1, p);
    if (reason)
        refuses(f, p, reason);
    else
        accepts(f, p);
    tth_relay_module_free(m);
}

Test(ethosn, pad)
{
    pad_case(7, NULL);
    pad_case(8, "nn.pad of 8 before and 8 after on axis 2: the Ethos-N78 pads at most 7 a side");
}

/* ---- relay_to_runtime, constant_updater ---- */

typedef struct rd {
    const uint8_t *p;
    size_t len, at;
} rd;

static uint32_t u32(rd *r)
{
    cr_assert(r->at + 4 <= r->len, "blob truncated");
    const uint8_t *p = r->p + r->at;
    r->at += 4;
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint8_t u8(rd *r)
{
    cr_assert(r->at < r->len);
    return r->p[r->at++];
}

static uint64_t u64(rd *r)
{
    uint64_t lo = u32(r);
    return lo | (uint64_t)u32(r) << 32;
}

static char *str(rd *r)
{
    uint32_t n = u32(r);
    cr_assert(r->at + n <= r->len);
    char *s = strndup((const char *)r->p + r->at, n);
    r->at += n;
    return s;
}

static void type(rd *r, tth_ttype *t)
{
    t->dtype = (tth_dtype)u8(r);
    t->rank = u8(r);
    for (int i = 0; i < t->rank; i++)
        t->shape[i] = (int64_t)u64(r);
}

static tth_runtime_module *to_runtime(const char *target, const tth_relay_function *fn, const char *sym, int expect)
{
    json_t *t = npu_target(target);
    tth_runtime_module *rt = tth_runtime_module_new("ethos-n");
    tth_diag d;
    tth_diag_clear(&d);
    int rc = npu_plugin("ethos-n")->relay_to_runtime(NULL, t, fn, sym, rt, &d);
    cr_assert_eq(rc, expect, "relay_to_runtime: %s", d.message);
    json_decref(t);
    return rt;
}

Test(ethosn, blob_deterministic_and_parsed_back)
{
    tth_relay_module *m = tth_relay_module_new("t");
    conv_opt o = conv_default();
    o.clip = 1;
    conv_nodes n = build_conv(m, &o);
    tth_runtime_module *a = to_runtime("ethos-n -tops=4 -ple_ratio=4", n.fn, "t_ethos_n_main_0", 0);
    tth_runtime_module *b = to_runtime("ethos-n -tops=4 -ple_ratio=4", n.fn, "t_ethos_n_main_0", 0);
    cr_assert_eq(tth_runtime_module_count(a), 2);
    const tth_module_file *fa = tth_runtime_module_file(a, 0), *fb = tth_runtime_module_file(b, 0);
    cr_assert_str_eq(fa->name, "t_ethos_n_main_0.ethosn");
    cr_assert_eq(fa->kind, TTH_FILE_BLOB);
    cr_assert_eq(fa->len, fb->len);
    cr_assert_eq(memcmp(fa->data, fb->data, fa->len), 0, "the blob differs between two identical compiles");

    rd r = {fa->data, fa->len, 0};
    cr_assert_eq(memcmp(r.p, "TTHEN78\0", 8), 0);
    r.at = 8;
    cr_assert_eq(u32(&r), 1);
    char *s = str(&r);
    cr_assert_str_eq(s, "tth ethos-n plugin 0.1.0");
    free(s);
    s = str(&r);
    cr_assert_str_eq(s, "compiled for Ethos-N78 4TOPS (PLE ratio 4, 1024 KiB SRAM); runs only with the Ethos-N driver");
    free(s);
    s = str(&r);
    cr_assert_str_eq(s, "n78");
    free(s);
    cr_assert_eq(u32(&r), 4);
    cr_assert_eq(u32(&r), 4);
    cr_assert_eq(u32(&r), 1024);
    s = str(&r);
    cr_assert_str_eq(s, "t_ethos_n_main_0");
    free(s);
    cr_assert_eq(u32(&r), 1);
    s = str(&r);
    cr_assert_str_eq(s, "x");
    free(s);
    tth_ttype t;
    type(&r, &t);
    cr_assert_eq(t.dtype, TTH_I8);
    cr_assert_eq(t.rank, 4);
    cr_assert_eq(t.shape[1], 8);
    uint32_t nconsts = u32(&r);
    cr_assert_eq(nconsts, 8); /* w, x_zp, w_zp, bias, in_scale, in_zp, out_scale, out_zp */
    int external = 0;
    for (uint32_t i = 0; i < nconsts; i++) {
        char *name = str(&r), *origin = str(&r);
        char want[64];
        snprintf(want, sizeof want, "t_ethos_n_main_0_const%u", i);
        cr_assert_str_eq(name, want);
        type(&r, &t);
        u64(&r);
        if (u8(&r) == 1) {
            cr_assert_eq(tth_ttype_numel(&t), 1);
            u64(&r);
        } else {
            cr_assert_gt(tth_ttype_numel(&t), 1);
            external++;
        }
        free(name);
        free(origin);
    }
    cr_assert_eq(external, 2, "weights and bias are stored with the parameters");
    uint32_t nnodes = u32(&r);
    int seen_conv = 0, seen_rq = 0;
    for (uint32_t i = 0; i < nnodes; i++) {
        uint8_t kind = u8(&r);
        if (kind == 1 || kind == 2) {
            u32(&r);
        } else {
            cr_assert_eq(kind, 3);
            char *opn = str(&r);
            uint32_t na = u32(&r);
            for (uint32_t k = 0; k < na; k++)
                cr_assert_lt(u32(&r), i, "arguments come before their users");
            char *attrs = str(&r);
            json_error_t je;
            json_t *j = json_loads(attrs, 0, &je);
            cr_assert(j, "attrs: %s", je.text);
            if (!strcmp(opn, "qnn.conv2d")) {
                seen_conv = 1;
                cr_assert_eq(json_integer_value(json_object_get(j, "groups")), 1);
            }
            seen_rq |= !strcmp(opn, "qnn.requantize");
            json_decref(j);
            free(opn);
            free(attrs);
        }
        uint32_t nt = u32(&r);
        for (uint32_t k = 0; k < nt; k++)
            type(&r, &t);
    }
    cr_assert(seen_conv && seen_rq);
    cr_assert_eq(u32(&r), nnodes - 1);
    cr_assert_eq(r.at, r.len, "trailing bytes");

    /* the C entry: reports the missing driver, computes nothing */
    const tth_module_file *c = tth_runtime_module_file(a, 1);
    cr_assert_str_eq(c->name, "t_ethos_n_main_0_ethosn.c");
    cr_assert_eq(c->kind, TTH_FILE_C_SOURCE);
    char *text = strndup((const char *)c->data, c->len);
    cr_assert(strstr(text, "int32_t t_ethos_n_main_0(const void *in0, void *out1, uint8_t *ws)\n{"), "%s", text);
    cr_assert(strstr(text, "return t_ethos_n_main_0_NO_DRIVER;"));
    cr_assert(strstr(text, "#define t_ethos_n_main_0_NO_DRIVER (-10)"));
    char path[128];
    snprintf(path, sizeof path, "/tmp/tth-ethosn-%d.c", (int)getpid());
    FILE *fp = fopen(path, "w");
    fputs(text, fp);
    fputs("int main(void) { char b[1] = {0}; return t_ethos_n_main_0(b, b, 0) == -10 ? 0 : 1; }\n", fp);
    fclose(fp);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "cc -std=c99 -Wall -Wextra -Werror -o %s.bin %s && %s.bin", path, path, path);
    int st = system(cmd);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the entry did not return -10");
    char bin[160];
    snprintf(bin, sizeof bin, "%s.bin", path);
    unlink(bin);
    unlink(path);
    free(text);
    const json_t *meta = tth_runtime_module_meta(a);
    const json_t *e = json_object_get(meta, "ethos-n");
    cr_assert_eq(json_integer_value(json_object_get(e, "tops")), 4);
    cr_assert_eq(json_integer_value(json_object_get(e, "runtime_error")), -10);
    tth_runtime_module_free(a);
    tth_runtime_module_free(b);
    tth_relay_module_free(m);
}

Test(ethosn, tuple_results)
{
    /* the conv's requantized value and the clip after it both leave the region */
    tth_relay_module *m = tth_relay_module_new("t");
    conv_opt o = conv_default();
    o.clip = 1;
    conv_nodes n = build_conv(m, &o);
    tth_rexpr *fields[2] = {n.clip, n.rq};
    tth_diag_clear(&bd);
    tth_rexpr *tup = tth_relay_tuple(m, fields, 2, &bd);
    cr_assert(tup, "%s", bd.message);
    tth_relay_function *f = tth_relay_function_add(m, "region", &n.x, 1, tup, NULL, &bd);
    cr_assert(f, "%s", bd.message);
    tth_runtime_module *rt = to_runtime(N78, f, "tup", 0);
    const tth_module_file *c = tth_runtime_module_file(rt, 1);
    char *text = strndup((const char *)c->data, c->len);
    cr_assert(strstr(text, "int32_t tup(const void *in0, void *out1, void *out2, uint8_t *ws)\n{"), "%s", text);
    free(text);
    tth_runtime_module_free(rt);
    tth_relay_module_free(m);
}

Test(ethosn, blob_follows_configuration)
{
    tth_relay_module *m = tth_relay_module_new("t");
    conv_opt o = conv_default();
    conv_nodes n = build_conv(m, &o);
    tth_runtime_module *a = to_runtime("ethos-n -tops=1", n.fn, "s", 0);
    tth_runtime_module *b = to_runtime("ethos-n -tops=8", n.fn, "s", 0);
    const tth_module_file *fa = tth_runtime_module_file(a, 0), *fb = tth_runtime_module_file(b, 0);
    cr_assert(fa->len != fb->len || memcmp(fa->data, fb->data, fa->len) != 0);
    tth_runtime_module_free(a);
    tth_runtime_module_free(b);
    tth_relay_module_free(m);
}

Test(ethosn, constant_updater_names)
{
    tth_relay_module *m = tth_relay_module_new("t");
    conv_opt o = conv_default();
    o.per_channel = 1;
    conv_nodes n = build_conv(m, &o);
    json_t *t = npu_target(N78);
    tth_const_map *cm = tth_const_map_new();
    tth_diag d;
    tth_diag_clear(&d);
    cr_assert_eq(npu_plugin("ethos-n")->constant_updater(NULL, t, n.fn, "sym", cm, &d), 0, "%s", d.message);
    /* weights (const0), bias (const3), per-channel input scale (const4); scalars stay in the blob */
    cr_assert_eq(tth_const_map_count(cm), 3);
    cr_assert_str_eq(tth_const_map_name(cm, 0), "sym_const0");
    cr_assert_str_eq(tth_const_map_name(cm, 1), "sym_const3");
    cr_assert_str_eq(tth_const_map_name(cm, 2), "sym_const4");
    cr_assert_eq(tth_const_map_tensor(cm, 0), n.conv->u.call.args[1]->u.constant.value);
    cr_assert_eq(tth_const_map_tensor(cm, 1), n.add->u.call.args[1]->u.constant.value);
    tth_const_map_free(cm);
    json_decref(t);
    tth_relay_module_free(m);
}

Test(ethosn, unsupported_variants_refused)
{
    static const char *const v[] = {"n37", "n57", "n77"};
    for (size_t i = 0; i < 3; i++) {
        char text[64];
        snprintf(text, sizeof text, "ethos-n -variant=%s", v[i]);
        tth_diag d;
        tth_diag_clear(&d);
        json_t *t = tth_target_parse(npu_reg, NULL, text, &d);
        cr_assert_null(t);
        cr_assert_eq(d.code, TTH_EUNSUPPORTED);
    }
    /* a target that skipped the parser is refused by relay_to_runtime too */
    tth_relay_module *m = tth_relay_module_new("t");
    conv_opt o = conv_default();
    conv_nodes n = build_conv(m, &o);
    json_t *t = json_pack("{s:s,s:s,s:i,s:i,s:i}", "kind", "ethos-n", "variant", "n77", "tops", 4, "ple_ratio", 2,
                          "sram_size", 1024);
    tth_runtime_module *rt = tth_runtime_module_new("ethos-n");
    tth_diag d;
    tth_diag_clear(&d);
    cr_assert_eq(npu_plugin("ethos-n")->relay_to_runtime(NULL, t, n.fn, "s", rt, &d), TTH_EUNSUPPORTED);
    cr_assert_str_eq(d.message, "Ethos-N variant 'n77' is not supported; tth compiles for the Ethos-N78 only");
    cr_assert_eq(tth_runtime_module_count(rt), 0);
    tth_runtime_module_free(rt);
    json_decref(t);
    tth_relay_module_free(m);
}

Test(ethosn, fully_connected)
{
    tth_relay_module *m = tth_relay_module_new("t");
    int64_t as[2] = {1, 16}, bs[2] = {16, 8};
    tth_rexpr *a = x_var(m, "a", TTH_U8, 2, as);
    tth_rexpr *mm = op(m, TTH_OP_QNN_MATMUL, NULL, 4, a, k_tensor(m, TTH_U8, 2, bs, 100, 7, 50), k_scalar(m, TTH_U8, 128),
                       k_scalar(m, TTH_U8, 120));
    tth_rexpr *rq = op(m, TTH_OP_REQUANTIZE, json_pack("{s:i,s:s}", "axis", 1, "out_dtype", "uint8"), 5, mm,
                       k_scalar(m, TTH_F32, 0.0004), k_scalar(m, TTH_I32, 0), k_scalar(m, TTH_F32, 0.05),
                       k_scalar(m, TTH_U8, 128));
    tth_relay_function *f = finish(m, &a, 1, rq);
    accepts(f, mm);
    accepts(f, rq);
    tth_relay_module_free(m);
    /* batch 2 */
    m = tth_relay_module_new("t");
    int64_t a2[2] = {2, 16};
    a = x_var(m, "a", TTH_U8, 2, a2);
    mm = op(m, TTH_OP_QNN_MATMUL, NULL, 4, a, k_tensor(m, TTH_U8, 2, bs, 100, 7, 50), k_scalar(m, TTH_U8, 128),
            k_scalar(m, TTH_U8, 120));
    rq = op(m, TTH_OP_REQUANTIZE, json_pack("{s:i,s:s}", "axis", 1, "out_dtype", "uint8"), 5, mm,
            k_scalar(m, TTH_F32, 0.0004), k_scalar(m, TTH_I32, 0), k_scalar(m, TTH_F32, 0.05), k_scalar(m, TTH_U8, 128));
    f = finish(m, &a, 1, rq);
    refuses(f, mm, "qnn.matmul input uint8[2, 16] has batch 2: the Ethos-N78 takes batch 1");
    tth_relay_module_free(m);
}

Test(ethosn, means_and_stride_one_pools)
{
    pool_case(TTH_OP_MAX_POOL2D, 9, 1, 0, 12, NULL);
    pool_case(TTH_OP_MAX_POOL2D, 5, 1, 2, 8, NULL); /* SAME */
    pool_case(TTH_OP_MAX_POOL2D, 10, 1, 0, 12, "nn.max_pool2d 10x10 stride 1 with VALID padding: the Ethos-N78 pools at "
                                               "stride 1 up to 9x9");
    pool_case(TTH_OP_AVG_POOL2D, 8, 1, 0, 8, NULL); /* a mean over the whole 8x8 plane */
    /* global average over 7x7 */
    tth_relay_module *m = tth_relay_module_new("t");
    int64_t xs[4] = {1, 16, 7, 7};
    tth_rexpr *x = x_var(m, "x", TTH_I8, 4, xs);
    tth_rexpr *g = op(m, TTH_OP_GLOBAL_AVG_POOL2D, NULL, 1, dq(m, x, 0.1, 0));
    tth_relay_function *f = finish(m, &x, 1, q(m, g, 0.1, 0, TTH_I8));
    accepts(f, g);
    tth_relay_module_free(m);
    m = tth_relay_module_new("t");
    int64_t x6[4] = {1, 16, 6, 6};
    x = x_var(m, "x", TTH_I8, 4, x6);
    g = op(m, TTH_OP_GLOBAL_AVG_POOL2D, NULL, 1, dq(m, x, 0.1, 0));
    f = finish(m, &x, 1, q(m, g, 0.1, 0, TTH_I8));
    refuses(f, g, "nn.global_avg_pool2d over a 6x6 plane: the Ethos-N78 averages whole planes of 7x7 or 8x8 only");
    tth_relay_module_free(m);
}

Test(ethosn, split_channels)
{
    tth_relay_module *m = tth_relay_module_new("t");
    int64_t xs[4] = {1, 48, 4, 4};
    tth_rexpr *x = x_var(m, "x", TTH_I8, 4, xs);
    tth_rexpr *s = op(m, TTH_OP_SPLIT, json_pack("{s:i,s:[i,i]}", "axis", 1, "sizes", 16, 32), 1, x);
    tth_diag_clear(&bd);
    tth_rexpr *g = tth_relay_tuple_get(m, s, 0, &bd);
    cr_assert(g);
    tth_relay_function *f = finish(m, &x, 1, g);
    accepts(f, s);
    tth_relay_module_free(m);
    m = tth_relay_module_new("t");
    x = x_var(m, "x", TTH_I8, 4, xs);
    s = op(m, TTH_OP_SPLIT, json_pack("{s:i,s:[i,i]}", "axis", 1, "sizes", 8, 40), 1, x);
    g = tth_relay_tuple_get(m, s, 0, &bd);
    f = finish(m, &x, 1, g);
    refuses(f, s, "split part 0 has 8 channels: the Ethos-N78 needs multiples of 16");
    tth_relay_module_free(m);
}

Test(ethosn, qdq_needs_quantized_ends)
{
    /* a float op whose input is not dequantized, and a dequantize whose value leaves the function */
    tth_relay_module *m = tth_relay_module_new("t");
    int64_t xs[4] = {1, 16, 4, 4};
    tth_rexpr *x = x_var(m, "x", TTH_F32, 4, xs);
    tth_rexpr *s = op(m, TTH_OP_SIGMOID, NULL, 1, x);
    tth_relay_function *f = finish(m, &x, 1, q(m, s, 1.0 / 256, -128, TTH_I8));
    refuses(f, s, "sigmoid input 0 is float not dequantized from int8/uint8: the Ethos-N78 computes quantized data");
    tth_relay_module_free(m);
    m = tth_relay_module_new("t");
    x = x_var(m, "x", TTH_I8, 4, xs);
    tth_rexpr *d = dq(m, x, 0.1, 0);
    f = finish(m, &x, 1, d);
    refuses(f, d, "qnn.dequantize whose float result leaves the function: the Ethos-N78 returns quantized data");
    tth_relay_module_free(m);
}
