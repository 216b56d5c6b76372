/* The ethos-n kind: every Ethos-N78 partition rule (accepted, and refused with its exact reason),
 * the compiled-network blob (deterministic, parsed back field by field), the C entry built with
 * the functional model it carries and run against a closed-form reference (unbound, then bound),
 * the cycle estimate of each configuration, constant_updater's names, and unsupported variants.
 * There is no Ethos-N driver or NPU here: the functional model (tests/plugins/ethosn/test_model.c)
 * stands in for it. */
#include <math.h>

#define N78 "ethos-n -tops=4"
#define NPU_KIND "ethos-n"
#define NPU_TARGET N78 /* what accepts and refuses ask (npu_test.h) */
#include "../cmsisnn/npu_test.h"
#include "helpers.h"

TestSuite(ethosn, .init = npu_load, .fini = npu_unload);

/* Variants of the conv pattern (npu_conv). */
static void clipped(conv_opt *o) { o->clip = 1; }
static void per_channel_scales(conv_opt *o) { o->per_channel = 1; }
static void oc64(conv_opt *o) { o->oc = 64; }

Test(ethosn, conv_accepted)
{
    tth_relay_module *m = test_relay_module();
    conv_opt o = conv_default();
    o.clip = 1;
    conv_nodes n = build_conv(m, &o);
    accepts(n.fn, n.conv);
    accepts(n.fn, n.add);
    accepts(n.fn, n.rq);
    accepts(n.fn, n.clip);
    /* depthwise, uint8, stride 2 SAME (6 -> 3, total padding 1: 0 before, 1 after) */
    m = test_relay_module();
    o = conv_default();
    o.groups = o.oc = 8;
    n = build_conv(m, &o);
    accepts(n.fn, n.conv);
}

typedef void (*tweak_fn)(conv_opt *);
static void conv_refused(tweak_fn tweak, const char *reason)
{
    conv_nodes n = npu_conv(tweak);
    refuses(n.fn, n.conv, reason);
    refuses(n.fn, n.rq, reason);
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
    tth_relay_module *m = test_relay_module();
    conv_opt o = conv_default();
    b2(&o);
    conv_nodes n = build_conv(m, &o);
    refuses(n.fn, n.conv, "qnn.conv2d input int8[2, 8, 6, 6] has batch 2: the Ethos-N78 takes batch 1");
    m = test_relay_module();
    o = conv_default();
    i16(&o);
    n = build_conv(m, &o);
    refuses(n.fn, n.conv, "qnn.conv2d input 0 is int16: the Ethos-N78 takes int8 or uint8");
    /* 5 dimensions */
    m = test_relay_module();
    int64_t xs[4] = {1, 2, 12, 5};
    tth_rexpr *x = x_var(m, "x", TTH_I8, 4, xs);
    tth_rexpr *r = op(m, TTH_OP_RESHAPE, json_pack("{s:[i,i,i,i,i]}", "newshape", 1, 2, 3, 4, 5), 1, x);
    tth_relay_function *f = finish(m, &x, 1, r);
    refuses(f, r, "reshape output int8[1, 2, 3, 4, 5] has 5 dimensions: the Ethos-N78 takes at most 4");
    /* an operator the NPU does not have */
    m = test_relay_module();
    int64_t ss[2] = {1, 10};
    x = x_var(m, "x", TTH_I8, 2, ss);
    tth_rexpr *s = op(m, TTH_OP_SOFTMAX, json_pack("{s:i}", "axis", -1), 1, dq(m, x, 0.1, 0));
    f = finish(m, &x, 1, q(m, s, 1.0 / 256, -128, TTH_I8));
    refuses(f, s, "nn.softmax is not supported by the Ethos-N78");
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
    tth_relay_module *m = test_relay_module();
    tth_relay_function *f = build_unary(m, TTH_OP_SIGMOID, 1.0 / 256, -128, TTH_I8, &e, &d, &qq);
    accepts(f, d);
    accepts(f, e);
    accepts(f, qq);
    m = test_relay_module();
    f = build_unary(m, TTH_OP_SIGMOID, 1.0 / 256, 0, TTH_U8, &e, &d, &qq);
    accepts(f, e);
    m = test_relay_module();
    f = build_unary(m, TTH_OP_SIGMOID, 1.0 / 256, 0, TTH_I8, &e, &d, &qq);
    refuses(f, e, "sigmoid quantized with scale 0.00390625 and zero point 0: the Ethos-N78 writes scale 1/256, zero "
                  "point -128");
    refuses(f, d, "sigmoid quantized with scale 0.00390625 and zero point 0: the Ethos-N78 writes scale 1/256, zero "
                  "point -128");
    m = test_relay_module();
    f = build_unary(m, TTH_OP_TANH, 1.0 / 128, 0, TTH_I8, &e, &d, &qq);
    accepts(f, e);
    m = test_relay_module();
    f = build_unary(m, TTH_OP_TANH, 1.0 / 256, 0, TTH_I8, &e, &d, &qq);
    refuses(f, e, "tanh quantized with scale 0.00390625 and zero point 0: the Ethos-N78 writes scale 1/128, zero point 0");
}

static void concat_case(int64_t c1, int64_t c2, int axis, const char *reason)
{
    tth_relay_module *m = test_relay_module();
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
    tth_relay_module *m = test_relay_module();
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
    tth_relay_module *m = test_relay_module();
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

/* What an ethos-n module must carry as ethosn_model.c (malloc'd): the source with its line
 * `#include "tth_params.h"` replaced by runtime/params/tth_params.h (plugins/ethosn/model/embed.py). */
static char *embedded_model_text(size_t *len)
{
    char path[512];
    size_t clen, hlen;
    snprintf(path, sizeof path, "%s/plugins/ethosn/model/ethosn_model.c", getenv("TTH_SOURCE_ROOT"));
    char *c = (char *)test_read_file(path, &clen);
    cr_assert(c, "%s", path);
    snprintf(path, sizeof path, "%s/runtime/params/tth_params.h", getenv("TTH_SOURCE_ROOT"));
    char *h = (char *)test_read_file(path, &hlen);
    cr_assert(h, "%s", path);
    static const char line[] = "#include \"tth_params.h\"\n";
    char *at = strstr(c, line);
    cr_assert(at, "ethosn_model.c does not include tth_params.h");
    size_t head = (size_t)(at - c), tail = clen - head - (sizeof line - 1);
    char *out = malloc(head + hlen + tail + 1);
    cr_assert(out);
    memcpy(out, c, head);
    memcpy(out + head, h, hlen);
    memcpy(out + head + hlen, at + sizeof line - 1, tail + 1);
    *len = head + hlen + tail;
    free(c);
    free(h);
    return out;
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

/* The diagnostics of the last hook called through to_runtime_of or constants_of. */
static tth_diag hd;

/* relay_to_runtime of fn for the canonical target t, which must return `expect`; the module. */
static tth_runtime_module *to_runtime_of(const json_t *t, const tth_relay_function *fn, const char *sym, int expect)
{
    tth_runtime_module *rt = tth_runtime_module_new("ethos-n");
    tth_diag_clear(&hd);
    int rc = npu_plugin("ethos-n")->relay_to_runtime(NULL, t, fn, sym, rt, &hd);
    cr_assert_eq(rc, expect, "relay_to_runtime: %s", hd.message);
    return rt;
}

/* The same for a target string. */
static tth_runtime_module *to_runtime(const char *target, const tth_relay_function *fn, const char *sym, int expect)
{
    json_t *t = npu_target(target);
    tth_runtime_module *rt = to_runtime_of(t, fn, sym, expect);
    json_decref(t);
    return rt;
}

/* constant_updater of fn for target (it must succeed): the map. */
static tth_const_map *constants_of(const char *target, const tth_relay_function *fn, const char *sym)
{
    json_t *t = npu_target(target);
    tth_const_map *cm = tth_const_map_new();
    tth_diag_clear(&hd);
    cr_assert_eq(npu_plugin("ethos-n")->constant_updater(NULL, t, fn, sym, cm, &hd), 0, "%s", hd.message);
    json_decref(t);
    return cm;
}

/* attributes (FORMAT.md, "Attributes") back into JSON */
static json_t *attrs(rd *r)
{
    json_t *o = json_object();
    uint32_t n = u32(r);
    for (uint32_t i = 0; i < n; i++) {
        char *key = str(r);
        uint8_t tag = u8(r);
        json_t *v = NULL;
        switch (tag) {
        case 1: v = json_integer((json_int_t)u64(r)); break;
        case 2: { uint64_t b = u64(r); double d; memcpy(&d, &b, 8); v = json_real(d); break; }
        case 3: { char *s = str(r); v = json_string(s); free(s); break; }
        case 4: v = json_boolean(u8(r)); break;
        case 5: case 6: {
            uint32_t k = u32(r);
            v = json_array();
            for (uint32_t e = 0; e < k; e++) {
                uint64_t b = u64(r);
                double d;
                memcpy(&d, &b, 8);
                json_array_append_new(v, tag == 5 ? json_integer((json_int_t)b) : json_real(d));
            }
            break;
        }
        case 7: v = json_null(); break;
        default: cr_assert_fail("attribute '%s' has tag %u", key, tag);
        }
        json_object_set_new(o, key, v);
        free(key);
    }
    return o;
}

/* The conv pattern's output computed here, in closed form: int32 accumulation of (x - x_zp) *
 * (w - w_zp) over the 3x3 window with padding 1, + bias, requantized with round half to even and
 * saturation, clipped to [-20, 100] (build_conv's constants: npu_test.h). */
static void conv_reference(const int8_t *x, int8_t *y)
{
    const float isc = (float)(0.05 * 0.01), osc = (float)0.1;
    for (int oc = 0; oc < 4; oc++)
        for (int oy = 0; oy < 6; oy++)
            for (int ox = 0; ox < 6; ox++) {
                int32_t acc = 0;
                for (int ic = 0; ic < 8; ic++)
                    for (int ky = 0; ky < 3; ky++)
                        for (int kx = 0; kx < 3; kx++) {
                            int iy = oy + ky - 1, ix = ox + kx - 1;
                            if (iy < 0 || iy >= 6 || ix < 0 || ix >= 6)
                                continue;
                            int wi = ((oc * 8 + ic) * 3 + ky) * 3 + kx;
                            acc += (x[(ic * 6 + iy) * 6 + ix] + 3) * (-7 + (wi * 3) % 15);
                        }
                acc += -100 + (oc * 37) % 200;
                double v = nearbyint((double)acc * ((double)isc / (double)osc)) + 5;
                v = v < -128 ? -128 : v > 127 ? 127 : v;
                v = v < -20 ? -20 : v > 100 ? 100 : v;
                y[(oc * 6 + oy) * 6 + ox] = (int8_t)v;
            }
}

Test(ethosn, blob_deterministic_and_parsed_back)
{
    conv_nodes n = npu_conv(clipped);
    tth_runtime_module *a = to_runtime("ethos-n -tops=4 -ple_ratio=4", n.fn, "t_ethos_n_main_0", 0);
    tth_runtime_module *b = to_runtime("ethos-n -tops=4 -ple_ratio=4", n.fn, "t_ethos_n_main_0", 0);
    cr_assert_eq(tth_runtime_module_count(a), 4);
    const tth_module_file *fa = tth_runtime_module_file(a, 0), *fb = tth_runtime_module_file(b, 0);
    cr_assert_str_eq(fa->name, "t_ethos_n_main_0.ethosn");
    cr_assert_eq(fa->kind, TTH_FILE_BLOB);
    cr_assert_eq(fa->len, fb->len);
    cr_assert_eq(memcmp(fa->data, fb->data, fa->len), 0, "the blob differs between two identical compiles");

    rd r = {fa->data, fa->len, 0};
    cr_assert_eq(memcmp(r.p, "TTHEN78\0", 8), 0);
    r.at = 8;
    cr_assert_eq(u32(&r), 2);
    char *s = str(&r);
    cr_assert_str_eq(s, "tth ethos-n plugin 0.1.0");
    free(s);
    s = str(&r);
    cr_assert_str_eq(s, "compiled for Ethos-N78 4TOPS (PLE ratio 4, 1024 KiB SRAM)");
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
    double out_zp = 0;
    for (uint32_t i = 0; i < nconsts; i++) {
        char *name = str(&r), *origin = str(&r);
        char want[64];
        snprintf(want, sizeof want, "t_ethos_n_main_0_const%u", i);
        cr_assert_str_eq(name, want);
        type(&r, &t);
        u64(&r);
        if (u8(&r) == 1) {
            cr_assert_eq(tth_ttype_numel(&t), 1);
            uint64_t v = u64(&r);
            memcpy(&out_zp, &v, 8); /* the last inline constant is the output zero point */
        } else {
            cr_assert_gt(tth_ttype_numel(&t), 1);
            external++;
        }
        free(name);
        free(origin);
    }
    cr_assert_eq(external, 2, "weights and bias are stored with the parameters");
    cr_assert_eq(out_zp, 5.0);
    uint32_t nnodes = u32(&r);
    int seen_conv = 0, seen_rq = 0, seen_clip = 0;
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
            json_t *j = attrs(&r);
            if (!strcmp(opn, "qnn.conv2d")) {
                seen_conv = 1;
                cr_assert_eq(json_integer_value(json_object_get(j, "groups")), 1);
                cr_assert_eq(json_integer_value(json_array_get(json_object_get(j, "padding"), 3)), 1);
            }
            if (!strcmp(opn, "qnn.requantize")) {
                seen_rq = 1;
                cr_assert_str_eq(json_string_value(json_object_get(j, "out_dtype")), "int8");
            }
            if (!strcmp(opn, "clip")) {
                seen_clip = 1;
                cr_assert_eq(json_real_value(json_object_get(j, "a_min")), -20.0);
            }
            json_decref(j);
            free(opn);
        }
        uint32_t nt = u32(&r);
        for (uint32_t k = 0; k < nt; k++)
            type(&r, &t);
    }
    cr_assert(seen_conv && seen_rq && seen_clip);
    cr_assert_eq(u32(&r), nnodes - 1);
    cr_assert_eq(r.at, r.len, "trailing bytes");

    /* the module carries the functional model */
    const tth_module_file *c = tth_runtime_module_file(a, 1), *mc = tth_runtime_module_file(a, 2),
                          *mh = tth_runtime_module_file(a, 3);
    cr_assert_str_eq(c->name, "t_ethos_n_main_0_ethosn.c");
    cr_assert_eq(c->kind, TTH_FILE_C_SOURCE);
    cr_assert_str_eq(mc->name, "ethosn_model.c");
    cr_assert_eq(mc->kind, TTH_FILE_C_SOURCE);
    cr_assert_str_eq(mh->name, "ethosn_model.h");
    cr_assert_eq(mh->kind, TTH_FILE_C_HEADER);
    size_t src_len;
    char *src = embedded_model_text(&src_len);
    cr_assert_eq(mc->len, src_len, "the embedded model is not ethosn_model.c with tth_params.h inlined");
    cr_assert_eq(memcmp(src, mc->data, mc->len), 0, "the embedded model differs from ethosn_model.c with "
                 "tth_params.h inlined");
    free(src);
    char *text = strndup((const char *)c->data, c->len);
    cr_assert(strstr(text, "int32_t t_ethos_n_main_0(const int8_t *in0, int8_t *out1, uint8_t *ws)\n{"), "%s", text);
    cr_assert(strstr(text, "int32_t t_ethos_n_main_0_bind_constants(const void *const *data, const size_t *bytes, "
                           "size_t n)\n{"));
    cr_assert(strstr(text, "int32_t t_ethos_n_main_0_bind_parameters(const void *params, size_t len)\n{"));
    cr_assert(strstr(text, "return ethosn_model_run(t_ethos_n_main_0_network"));

    /* built with the model and run: unbound first, then bound to constant_updater's tensors, the
     * output in closed form */
    tth_const_map *cm = constants_of("ethos-n -tops=4 -ple_ratio=4", n.fn, "t_ethos_n_main_0");
    char dir[256];
    test_mkdtemp(dir, sizeof dir);
    const tth_module_file *files[3] = {c, mc, mh};
    for (int f = 0; f < 3; f++) {
        test_put_file(dir, files[f]->name, files[f]->data, files[f]->len);
    }
    int8_t x[288], y[144];
    for (int i = 0; i < 288; i++)
        x[i] = (int8_t)((i * 37) % 256 - 128);
    conv_reference(x, y);
    size_t cap = 65536, len = 0;
    char *main_c = malloc(cap);
    len += (size_t)snprintf(main_c + len, cap - len, "#include <stdio.h>\n#include <stdint.h>\n#include <stddef.h>\n"
                            "int32_t t_ethos_n_main_0(const int8_t *, int8_t *, uint8_t *);\n"
                            "int32_t t_ethos_n_main_0_bind_constants(const void *const *, const size_t *, size_t);\n"
                            "static const int8_t x[288] = {");
    for (int i = 0; i < 288; i++)
        len += (size_t)snprintf(main_c + len, cap - len, "%d,", x[i]);
    len += (size_t)snprintf(main_c + len, cap - len, "};\nstatic const int8_t want[144] = {");
    for (int i = 0; i < 144; i++)
        len += (size_t)snprintf(main_c + len, cap - len, "%d,", y[i]);
    len += (size_t)snprintf(main_c + len, cap - len, "};\n");
    for (size_t k = 0; k < tth_const_map_count(cm); k++) {
        const tth_tensor *ct = tth_const_map_tensor(cm, k);
        len += (size_t)snprintf(main_c + len, cap - len, "static const unsigned char k%zu[%zu] = {", k, ct->nbytes);
        for (size_t e = 0; e < ct->nbytes; e++)
            len += (size_t)snprintf(main_c + len, cap - len, "%u,", ((const unsigned char *)ct->data)[e]);
        len += (size_t)snprintf(main_c + len, cap - len, "};\n");
    }
    len += (size_t)snprintf(main_c + len, cap - len, "int main(void)\n{\n    int8_t y[144];\n    uint8_t ws[1];\n"
                            "    const void *data[8] = {0};\n    size_t bytes[8] = {0};\n"
                            "    int32_t rc = t_ethos_n_main_0(x, y, ws);\n"
                            "    if (rc != -106) { printf(\"unbound: %%d\\n\", (int)rc); return 1; }\n"
                            "    rc = t_ethos_n_main_0_bind_constants(data, bytes, 8);\n"
                            "    if (rc != -107) { printf(\"bound to nothing: %%d\\n\", (int)rc); return 1; }\n");
    for (size_t k = 0; k < tth_const_map_count(cm); k++) {
        const char *name = tth_const_map_name(cm, k);
        int idx = atoi(strrchr(name, 't') + 1); /* ..._const<i> */
        len += (size_t)snprintf(main_c + len, cap - len, "    data[%d] = k%zu;\n    bytes[%d] = sizeof k%zu;\n", idx, k,
                                idx, k);
    }
    len += (size_t)snprintf(main_c + len, cap - len,
                            "    rc = t_ethos_n_main_0_bind_constants(data, bytes, 8);\n"
                            "    if (rc != 0) { printf(\"bind: %%d\\n\", (int)rc); return 1; }\n"
                            "    rc = t_ethos_n_main_0(x, y, ws);\n"
                            "    if (rc != 0) { printf(\"run: %%d\\n\", (int)rc); return 1; }\n"
                            "    for (int i = 0; i < 144; i++)\n"
                            "        if (y[i] != want[i]) { printf(\"y[%%d] = %%d, want %%d\\n\", i, y[i], want[i]); "
                            "return 1; }\n    return 0;\n}\n");
    cr_assert_lt(len, cap);
    test_put_file(dir, "main.c", main_c, len);
    free(main_c);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "cd %s && cc -std=c99 -O2 -Wall -Wextra -Werror -o prog main.c t_ethos_n_main_0_ethosn.c "
             "ethosn_model.c -lm > cc.log 2>&1 && ./prog > run.log 2>&1", dir);
    int st = test_run(cmd);
    if (st != 0) {
        snprintf(cmd, sizeof cmd, "cat %s/cc.log %s/run.log 1>&2", dir, dir);
        test_run(cmd);
    }
    cr_assert_eq(st, 0, "the generated entry, built with the functional model, did not give the reference output");
    test_rmtree(dir);
    tth_const_map_free(cm);
    free(text);

    /* meta: the configuration, the cycle estimate (docs/ethosn.md: 4 TOPS with PLE ratio 4 is 8
     * engines x 2 output groups, 2048 MACs/cycle; 4 output channels fit one pass of 16 groups of
     * 6*6*8*3*3 = 2592 MACs at 2048/16 MACs a cycle: ceil(2592 * 16 / 2048) = 21 cycles), the
     * constants to bind, the notes for --explain */
    const json_t *meta = tth_runtime_module_meta(a);
    const json_t *e = json_object_get(meta, "ethos-n");
    cr_assert_eq(json_integer_value(json_object_get(e, "tops")), 4);
    cr_assert_eq(json_integer_value(json_object_get(e, "format_version")), 2);
    cr_assert_null(json_object_get(e, "runtime_error"));
    const json_t *perf = json_object_get(e, "performance");
    cr_assert_eq(json_integer_value(json_object_get(perf, "engines")), 8);
    cr_assert_eq(json_integer_value(json_object_get(perf, "output_groups_per_engine")), 2);
    cr_assert_eq(json_integer_value(json_object_get(perf, "macs_per_cycle")), 2048);
    cr_assert_eq(json_integer_value(json_object_get(perf, "total_macs")), 10368);
    cr_assert_eq(json_integer_value(json_object_get(perf, "total_cycles")), 21);
    const json_t *layer = json_array_get(json_object_get(perf, "layers"), 0);
    cr_assert_eq(json_array_size(json_object_get(perf, "layers")), 1);
    cr_assert_str_eq(json_string_value(json_object_get(layer, "op")), "qnn.conv2d");
    cr_assert_eq(json_integer_value(json_object_get(layer, "passes")), 1);
    cr_assert(json_is_true(json_object_get(layer, "fits_sram")));
    const json_t *bc = json_object_get(meta, "bind_constants");
    cr_assert_str_eq(json_string_value(json_object_get(bc, "symbol")), "t_ethos_n_main_0_bind_constants");
    cr_assert_str_eq(json_string_value(json_object_get(bc, "parameters_symbol")), "t_ethos_n_main_0_bind_parameters");
    cr_assert_eq(json_integer_value(json_object_get(bc, "count")), 8);
    cr_assert_eq(json_integer_value(json_object_get(bc, "unbound_status")), -106);
    cr_assert_eq(json_array_size(json_object_get(bc, "constants")), 2);
    const json_t *c0 = json_array_get(json_object_get(bc, "constants"), 0);
    cr_assert_eq(json_integer_value(json_object_get(c0, "index")), 0);
    cr_assert_str_eq(json_string_value(json_object_get(c0, "parameter")), "ethos-n.t_ethos_n_main_0_const0");
    cr_assert_eq(json_integer_value(json_object_get(c0, "bytes")), 288);
    cr_assert_str_eq(json_string_value(json_object_get(meta, "status_text_symbol")), "ethosn_model_status_text");
    cr_assert_str_eq(json_string_value(json_array_get(json_object_get(meta, "sources"), 1)), "ethosn_model.c");
    const json_t *notes = json_object_get(meta, "explain");
    cr_assert_eq(json_array_size(notes), 2);
    cr_assert(strstr(json_string_value(json_array_get(notes, 0)), "region 't_ethos_n_main_0': 1 MAC layer, 10368 MACs, "
                                                                  "about 21 NPU cycles"),
              "%s", json_string_value(json_array_get(notes, 0)));
    tth_runtime_module_free(a);
    tth_runtime_module_free(b);
}

/* A configuration's geometry in the estimate: one 3x3 convolution of 64 output channels. */
static json_int_t cycles_for(const char *target, json_int_t *engines, json_int_t *ogs)
{
    conv_nodes n = npu_conv(oc64);
    tth_runtime_module *rt = to_runtime(target, n.fn, "s", 0);
    const json_t *perf = json_object_get(json_object_get(tth_runtime_module_meta(rt), "ethos-n"), "performance");
    *engines = json_integer_value(json_object_get(perf, "engines"));
    *ogs = json_integer_value(json_object_get(perf, "output_groups_per_engine"));
    json_int_t c = json_integer_value(json_object_get(perf, "total_cycles"));
    tth_runtime_module_free(rt);
    return c;
}

Test(ethosn, cycle_estimate_follows_configuration)
{
    /* 2592 MACs per output channel (6x6 outputs of 8x3x3): passes = ceil(64 / OGs), each OG at
     * 512*TOPS/OGs MACs a cycle: cycles = ceil(passes * 2592 * OGs / (512 * TOPS)) */
    static const struct {
        const char *target;
        json_int_t engines, ogs, cycles;
    } want[] = {
        {"ethos-n -tops=1", 2, 4, 324},   /* 8 OGs, 8 passes: 8 * 2592 * 8 / 512 */
        {"ethos-n -tops=2", 4, 4, 162},   /* 16 OGs, 4 passes: 4 * 2592 * 16 / 1024 */
        {"ethos-n -tops=4", 4, 4, 81},    /* PLE ratio 2: 16 OGs, 4 passes, 2048 MACs/cycle */
        {"ethos-n -tops=4 -ple_ratio=4", 8, 2, 81},
        {"ethos-n -tops=8", 8, 4, 41},    /* 32 OGs, 2 passes: ceil(2 * 2592 * 32 / 4096) = 41 */
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        json_int_t engines, ogs, c = cycles_for(want[i].target, &engines, &ogs);
        cr_assert_eq(engines, want[i].engines, "%s", want[i].target);
        cr_assert_eq(ogs, want[i].ogs, "%s", want[i].target);
        cr_assert_eq(c, want[i].cycles, "%s: %lld cycles", want[i].target, (long long)c);
    }
}

Test(ethosn, region_without_outside_constants_runs_unbound)
{
    /* a transpose of int8 data: no constant to bind, so the entry runs at once */
    tth_relay_module *m = test_relay_module();
    int64_t xs[4] = {1, 16, 2, 3};
    tth_rexpr *x = x_var(m, "x", TTH_I8, 4, xs);
    tth_rexpr *t = op(m, TTH_OP_TRANSPOSE, json_pack("{s:[i,i,i,i]}", "axes", 0, 2, 3, 1), 1, x);
    tth_relay_function *f = finish(m, &x, 1, t);
    accepts(f, t);
    tth_runtime_module *rt = to_runtime(N78, f, "z", 0);
    const json_t *bc = json_object_get(tth_runtime_module_meta(rt), "bind_constants");
    cr_assert_eq(json_integer_value(json_object_get(bc, "count")), 0);
    cr_assert_eq(json_array_size(json_object_get(bc, "constants")), 0);
    char dir[256], cmd[1024];
    test_mkdtemp(dir, sizeof dir);
    for (size_t i = 1; i < tth_runtime_module_count(rt); i++) {
        const tth_module_file *file = tth_runtime_module_file(rt, i);
        test_put_file(dir, file->name, file->data, file->len);
    }
    static const char main_c[] =
        "#include <stdint.h>\n#include <stddef.h>\n"
        "int32_t z(const int8_t *, int8_t *, uint8_t *);\n"
        "int32_t z_bind_parameters(const void *, size_t);\n"
        "int main(void)\n{\n    int8_t x[96], y[96];\n    for (int i = 0; i < 96; i++)\n        x[i] = (int8_t)(i - 50);\n"
        "    if (z(x, y, 0) != 0)\n        return 1;\n"
        "    for (int c = 0; c < 16; c++)\n        for (int p = 0; p < 6; p++)\n"
        "            if (y[p * 16 + c] != x[c * 6 + p])\n                return 2;\n"
        "    /* a parameters file without any entry is enough for it */\n"
        "    static const unsigned char params[16] = {'T', 'T', 'H', 'P', 'A', 'R', 'A', 'M', 1};\n"
        "    return z_bind_parameters(params, sizeof params) == 0 ? 0 : 3;\n}\n";
    test_put_file(dir, "main.c", main_c, strlen(main_c));
    snprintf(cmd, sizeof cmd, "cd %s && cc -std=c99 -O2 -Wall -Wextra -Werror -o prog main.c z_ethosn.c ethosn_model.c "
             "-lm && ./prog", dir);
    cr_assert_eq(test_run(cmd), 0, "%s", cmd);
    test_rmtree(dir);
    tth_runtime_module_free(rt);
}

Test(ethosn, region_the_model_cannot_run_is_refused)
{
    /* relay_to_runtime validates what it wrote with the functional model: a softmax (which the
     * partitioner never gives the kind) stops the compile with the model's reason */
    tth_relay_module *m = test_relay_module();
    int64_t ss[2] = {1, 10};
    tth_rexpr *x = x_var(m, "x", TTH_I8, 2, ss);
    tth_rexpr *sm = op(m, TTH_OP_SOFTMAX, json_pack("{s:i}", "axis", -1), 1, dq(m, x, 0.1, 0));
    tth_relay_function *f = finish(m, &x, 1, q(m, sm, 1.0 / 256, -128, TTH_I8));
    tth_runtime_module *rt = to_runtime(N78, f, "s", TTH_EUNSUPPORTED);
    cr_assert(strstr(hd.message, "region 's' cannot run on the Ethos-N78 functional model: node 4: operator "
                                 "'nn.softmax' is not supported by tth's Ethos-N78 functional model"), "%s", hd.message);
    cr_assert_eq(tth_runtime_module_count(rt), 0);
    tth_runtime_module_free(rt);
}

Test(ethosn, tuple_results)
{
    /* the conv's requantized value and the clip after it both leave the region */
    conv_nodes n = npu_conv(clipped);
    tth_relay_module *m = n.fn->module;
    tth_rexpr *fields[2] = {n.clip, n.rq};
    tth_diag_clear(&bd);
    tth_rexpr *tup = tth_relay_tuple(m, fields, 2, &bd);
    cr_assert(tup, "%s", bd.message);
    tth_relay_function *f = tth_relay_function_add(m, "region", &n.x, 1, tup, NULL, &bd);
    cr_assert(f, "%s", bd.message);
    tth_runtime_module *rt = to_runtime(N78, f, "tup", 0);
    const tth_module_file *c = tth_runtime_module_file(rt, 1);
    char *text = strndup((const char *)c->data, c->len);
    cr_assert(strstr(text, "int32_t tup(const int8_t *in0, int8_t *out1, int8_t *out2, uint8_t *ws)\n{"), "%s", text);
    free(text);
    tth_runtime_module_free(rt);
}

Test(ethosn, blob_follows_configuration)
{
    conv_nodes n = npu_conv(NULL);
    tth_runtime_module *a = to_runtime("ethos-n -tops=1", n.fn, "s", 0);
    tth_runtime_module *b = to_runtime("ethos-n -tops=8", n.fn, "s", 0);
    const tth_module_file *fa = tth_runtime_module_file(a, 0), *fb = tth_runtime_module_file(b, 0);
    cr_assert(fa->len != fb->len || memcmp(fa->data, fb->data, fa->len) != 0);
    tth_runtime_module_free(a);
    tth_runtime_module_free(b);
}

Test(ethosn, constant_updater_names)
{
    conv_nodes n = npu_conv(per_channel_scales);
    tth_const_map *cm = constants_of(N78, n.fn, "sym");
    /* weights (const0), bias (const3), per-channel input scale (const4); scalars stay in the blob */
    cr_assert_eq(tth_const_map_count(cm), 3);
    cr_assert_str_eq(tth_const_map_name(cm, 0), "sym_const0");
    cr_assert_str_eq(tth_const_map_name(cm, 1), "sym_const3");
    cr_assert_str_eq(tth_const_map_name(cm, 2), "sym_const4");
    cr_assert_eq(tth_const_map_tensor(cm, 0), n.conv->u.call.args[1]->u.constant.value);
    cr_assert_eq(tth_const_map_tensor(cm, 1), n.add->u.call.args[1]->u.constant.value);
    tth_const_map_free(cm);
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
    conv_nodes n = npu_conv(NULL);
    json_t *t = json_pack("{s:s,s:s,s:i,s:i,s:i}", "kind", "ethos-n", "variant", "n77", "tops", 4, "ple_ratio", 2,
                          "sram_size", 1024);
    tth_runtime_module *rt = to_runtime_of(t, n.fn, "s", TTH_EUNSUPPORTED);
    json_decref(t);
    cr_assert_str_eq(hd.message, "Ethos-N variant 'n77' is not supported; tth compiles for the Ethos-N78 only");
    cr_assert_eq(tth_runtime_module_count(rt), 0);
    tth_runtime_module_free(rt);
}

Test(ethosn, fully_connected)
{
    tth_relay_module *m = test_relay_module();
    int64_t as[2] = {1, 16}, bs[2] = {16, 8};
    tth_rexpr *a = x_var(m, "a", TTH_U8, 2, as);
    tth_rexpr *mm = op(m, TTH_OP_QNN_MATMUL, NULL, 4, a, k_tensor(m, TTH_U8, 2, bs, 100, 7, 50), k_scalar(m, TTH_U8, 128),
                       k_scalar(m, TTH_U8, 120));
    tth_rexpr *rq = requant(m, mm, k_scalar(m, TTH_F32, 0.0004), 0.05, 128, TTH_U8);
    tth_relay_function *f = finish(m, &a, 1, rq);
    accepts(f, mm);
    accepts(f, rq);
    /* batch 2 */
    m = test_relay_module();
    int64_t a2[2] = {2, 16};
    a = x_var(m, "a", TTH_U8, 2, a2);
    mm = op(m, TTH_OP_QNN_MATMUL, NULL, 4, a, k_tensor(m, TTH_U8, 2, bs, 100, 7, 50), k_scalar(m, TTH_U8, 128),
            k_scalar(m, TTH_U8, 120));
    rq = requant(m, mm, k_scalar(m, TTH_F32, 0.0004), 0.05, 128, TTH_U8);
    f = finish(m, &a, 1, rq);
    refuses(f, mm, "qnn.matmul input uint8[2, 16] has batch 2: the Ethos-N78 takes batch 1");
}

Test(ethosn, means_and_stride_one_pools)
{
    pool_case(TTH_OP_MAX_POOL2D, 9, 1, 0, 12, NULL);
    pool_case(TTH_OP_MAX_POOL2D, 5, 1, 2, 8, NULL); /* SAME */
    pool_case(TTH_OP_MAX_POOL2D, 10, 1, 0, 12, "nn.max_pool2d 10x10 stride 1 with VALID padding: the Ethos-N78 pools at "
                                               "stride 1 up to 9x9");
    pool_case(TTH_OP_AVG_POOL2D, 8, 1, 0, 8, NULL); /* a mean over the whole 8x8 plane */
    /* global average over 7x7 */
    tth_relay_module *m = test_relay_module();
    int64_t xs[4] = {1, 16, 7, 7};
    tth_rexpr *x = x_var(m, "x", TTH_I8, 4, xs);
    tth_rexpr *g = op(m, TTH_OP_GLOBAL_AVG_POOL2D, NULL, 1, dq(m, x, 0.1, 0));
    tth_relay_function *f = finish(m, &x, 1, q(m, g, 0.1, 0, TTH_I8));
    accepts(f, g);
    m = test_relay_module();
    int64_t x6[4] = {1, 16, 6, 6};
    x = x_var(m, "x", TTH_I8, 4, x6);
    g = op(m, TTH_OP_GLOBAL_AVG_POOL2D, NULL, 1, dq(m, x, 0.1, 0));
    f = finish(m, &x, 1, q(m, g, 0.1, 0, TTH_I8));
    refuses(f, g, "nn.global_avg_pool2d over a 6x6 plane: the Ethos-N78 averages whole planes of 7x7 or 8x8 only");
}

Test(ethosn, split_channels)
{
    tth_relay_module *m = test_relay_module();
    int64_t xs[4] = {1, 48, 4, 4};
    tth_rexpr *x = x_var(m, "x", TTH_I8, 4, xs);
    tth_rexpr *s = op(m, TTH_OP_SPLIT, json_pack("{s:i,s:[i,i]}", "axis", 1, "sizes", 16, 32), 1, x);
    tth_diag_clear(&bd);
    tth_rexpr *g = tth_relay_tuple_get(m, s, 0, &bd);
    cr_assert(g);
    tth_relay_function *f = finish(m, &x, 1, g);
    accepts(f, s);
    m = test_relay_module();
    x = x_var(m, "x", TTH_I8, 4, xs);
    s = op(m, TTH_OP_SPLIT, json_pack("{s:i,s:[i,i]}", "axis", 1, "sizes", 8, 40), 1, x);
    g = tth_relay_tuple_get(m, s, 0, &bd);
    f = finish(m, &x, 1, g);
    refuses(f, s, "split part 0 has 8 channels: the Ethos-N78 needs multiples of 16");
}

Test(ethosn, qdq_needs_quantized_ends)
{
    /* a float op whose input is not dequantized, and a dequantize whose value leaves the function */
    tth_relay_module *m = test_relay_module();
    int64_t xs[4] = {1, 16, 4, 4};
    tth_rexpr *x = x_var(m, "x", TTH_F32, 4, xs);
    tth_rexpr *s = op(m, TTH_OP_SIGMOID, NULL, 1, x);
    tth_relay_function *f = finish(m, &x, 1, q(m, s, 1.0 / 256, -128, TTH_I8));
    refuses(f, s, "sigmoid input 0 is float not dequantized from int8/uint8: the Ethos-N78 computes quantized data");
    m = test_relay_module();
    x = x_var(m, "x", TTH_I8, 4, xs);
    tth_rexpr *d = dq(m, x, 0.1, 0);
    f = finish(m, &x, 1, d);
    refuses(f, d, "qnn.dequantize whose float result leaves the function: the Ethos-N78 returns quantized data");
}
