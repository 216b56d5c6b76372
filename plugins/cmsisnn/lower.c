/* lower.c: the cmsis-nn kind's partition_supports and relay_to_tir hooks.
 *
 * partition_supports: a call is taken when it belongs to one of pattern.h's patterns (the
 * predicate sees one call at a time, so it matches the whole pattern around it).
 *
 * relay_to_tir: one PrimFunc per region, named global_symbol. Its parameters are the region's
 * inputs then one per result tensor (each field of a tuple result). Each pattern becomes one
 * call_extern of a wrapper
 * `<global_symbol>_k<i>` that cmsis-nn's tir_to_runtime (emit.c) writes in C: it fills the CMSIS-NN
 * argument structs (which the C back-end cannot express: it knows scalars and pointers) and calls
 * the CMSIS-NN function. The wrapper's arguments are addresses of buffers the TIR declares, so the
 * memory planner sees them all:
 *   - the pattern's input(s) and output (region parameters, or LOCAL int8 buffers between patterns);
 *   - for conv/depthwise/pools on NCHW data with C > 1 and H*W > 1: LOCAL NHWC staging buffers for
 *     the input and the output (tth's IR is NCHW, CMSIS-NN's NHWC; the wrapper transposes), only
 *     at the region's edges: values passed between calls stay NHWC where choose_layouts allows;
 *   - the cmsis_nn_context buffer, a LOCAL int8 buffer of exactly cn_scratch_bytes();
 *   - weights (reordered at compile time to CMSIS-NN's OHWI / 1HWC / [N, K]) and the int32 bias as
 *     CONST buffers.
 * Everything else a wrapper needs (offsets, per-channel multipliers and shifts, dims, activation
 * range, context size) is recorded per call in the PrimFunc's attrs under "cmsis_nn", which is
 * what emit.c prints and what the tests read back.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <tth/relay.h>
#include <tth/target.h>
#include <tth/tir.h>

#include "pattern.h"
#include "quant.h"
#include "scratch.h"

static cn_features features_of(const json_t *target)
{
    const json_t *t = tth_target_member(target, "cmsis-nn");
    cn_features f = {.dsp = tth_target_has_feature(t, "has_dsp"), .mve = tth_target_has_feature(t, "has_mve")};
    return f;
}

/* The users index of the function the last question was about (tth_relay_users_of keeps it while
 * the function is unchanged): partitioning asks once per call of the same function. Freed after
 * relay_to_tir and when the plugin is unloaded. */
static tth_relay_users *users;

__attribute__((destructor)) static void users_unload(void)
{
    tth_relay_users_free(users);
}

TTH_PLUGIN_EXPORT int tth_partition_supports(const tth_host *host, const json_t *target, const tth_relay_function *fn,
                                             const tth_rexpr *call, char *why, size_t why_len)
{
    (void)host;
    (void)target;
    if (!fn || !call || call->kind != TTH_REXPR_CALL)
        return TTH_EINVAL;
    if (call->u.call.op == TTH_OP_INVALID) {
        snprintf(why, why_len, "a call of function '%s': CMSIS-NN takes operators", call->u.call.fn->name);
        return 0;
    }
    const tth_relay_users *u = tth_relay_users_of(&users, fn);
    if (!u)
        return TTH_ENOMEM;
    cn_match m;
    return cn_match_containing(u, call, &m, why, why_len);
}

/* ---- relay_to_tir ---------------------------------------------------------------------------- */

typedef struct lower_ctx {
    tth_tir_module *mod;
    const char *gsym;
    tth_diag *diag;
    tth_tbuffer **buf_of;  /* by Relay node id: the buffer holding its value */
    const uint8_t *nhwc;   /* by Relay node id: the value is kept NHWC (choose_layouts) */
    tth_tbuffer *locals[256];
    size_t nlocals;
    int limit;             /* more LOCAL buffers than `locals` holds */
} lower_ctx;

static json_t *ints(const int64_t *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        json_array_append_new(a, json_integer(v[i]));
    return a;
}

static tth_tbuffer *local(lower_ctx *c, const char *name, tth_dtype dt, int64_t numel)
{
    if (c->nlocals >= sizeof c->locals / sizeof c->locals[0]) {
        c->limit = 1;
        return NULL;
    }
    tth_tbuffer *b = tth_tir_buffer(c->mod, name, dt, 1, &numel, TTH_SCOPE_LOCAL);
    if (b)
        c->locals[c->nlocals++] = b;
    return b;
}

/* Weights reordered for CMSIS-NN. conv OIHW -> OHWI; depthwise [C, 1, KH, KW] -> [1, KH, KW, C];
 * fc [K, N] -> [N, K]. */
static tth_tensor *reorder_weights(const cn_match *m)
{
    const int64_t *ws = m->w->type.shape;
    const int8_t *src = m->w->data;
    tth_ttype t = {.dtype = TTH_I8, .rank = m->kind == CN_FC ? 2 : 4};
    if (m->kind == CN_FC) {
        int64_t s[2] = {ws[1], ws[0]};
        memcpy(t.shape, s, sizeof s);
    } else if (m->kind == CN_DWCONV) {
        int64_t s[4] = {1, ws[2], ws[3], ws[0]};
        memcpy(t.shape, s, sizeof s);
    } else {
        int64_t s[4] = {ws[0], ws[2], ws[3], ws[1]};
        memcpy(t.shape, s, sizeof s);
    }
    tth_tensor *r = tth_tensor_new(&t, NULL);
    if (!r)
        return NULL;
    int8_t *dst = r->data;
    if (m->kind == CN_FC) {
        int64_t k = ws[0], n = ws[1];
        for (int64_t i = 0; i < k; i++)
            for (int64_t j = 0; j < n; j++)
                dst[j * k + i] = src[i * n + j];
        return r;
    }
    int64_t o = ws[0], ci = ws[1], kh = ws[2], kw = ws[3];
    for (int64_t a = 0; a < o; a++)
        for (int64_t b = 0; b < ci; b++)
            for (int64_t y = 0; y < kh; y++)
                for (int64_t x = 0; x < kw; x++) {
                    int8_t v = src[((a * ci + b) * kh + y) * kw + x];
                    if (m->kind == CN_DWCONV)
                        dst[(y * kw + x) * o + a] = v;
                    else
                        dst[((a * kh + y) * kw + x) * ci + b] = v;
                }
    return r;
}

/* The context of a fully connected call on an MVE build: CMSIS-NN reads one int32 per output from
 * ctx->buf, bias[o] + input_offset * sum_k w[o][k] (the filter offset is 0), and ignores `bias`
 * (docs/cmsisnn.md, "What a context must hold"). They are constants: computed here once. */
static tth_tensor *fc_kernel_sums(const cn_match *m, const tth_tensor *w_nk)
{
    tth_ttype t = {.dtype = TTH_I32, .rank = 1, .shape = {m->oc}};
    tth_tensor *r = tth_tensor_new(&t, NULL);
    if (!r)
        return NULL;
    int32_t *sum = r->data;
    const int8_t *w = w_nk->data;
    const int32_t *bias = m->bias ? m->bias->data : NULL;
    for (int64_t o = 0; o < m->oc; o++) {
        int64_t s = 0;
        for (int64_t k = 0; k < m->c; k++)
            s += w[o * m->c + k];
        sum[o] = (int32_t)((bias ? bias[o] : 0) + (int64_t)-m->in_zp[0] * s);
    }
    return r;
}

static int is_spatial(cn_kind k)
{
    return k == CN_CONV || k == CN_DWCONV || k == CN_MAXPOOL || k == CN_AVGPOOL;
}

/* Whether NCHW and NHWC differ for this value: 4-D with several channels and pixels. */
static int layouts_differ(const tth_rexpr *e)
{
    const tth_ttype *t = tth_rexpr_ttype(e);
    return t && t->rank == 4 && t->shape[1] > 1 && t->shape[2] * t->shape[3] > 1;
}

/* Which values between patterns stay in CMSIS-NN's NHWC instead of going back to tth's NCHW
 * (docs/cmsisnn.md, "Layouts"): a value made and used only inside the region, every user a
 * spatial kernel (which reads NHWC) or an elementwise add/mul whose other operand and result are
 * NHWC too (elementwise is the same in any layout both sides share). Softmax (last axis) and
 * fully connected read the logical layout; region inputs and results are NCHW. Starting from
 * every candidate, drop what breaks a rule until nothing changes. */
static void choose_layouts(const cn_match *pats, size_t npats, tth_rexpr *const *res, size_t nres, uint8_t *nhwc)
{
    for (size_t k = 0; k < npats; k++) {
        const tth_rexpr *o = pats[k].out;
        int result = 0;
        for (size_t j = 0; j < nres; j++)
            result |= res[j] == o;
        nhwc[o->id] = !result && layouts_differ(o) &&
                      (is_spatial(pats[k].kind) || pats[k].kind == CN_ADD || pats[k].kind == CN_MUL);
    }
    for (int changed = 1; changed;) {
        changed = 0;
        for (size_t k = 0; k < npats; k++) {
            const cn_match *m = &pats[k];
            if (is_spatial(m->kind))
                continue;
            if (m->kind == CN_ADD || m->kind == CN_MUL) {
                uint32_t ids[3] = {m->in[0]->id, m->in[1]->id, m->out->id};
                int all = nhwc[ids[0]] && nhwc[ids[1]] && nhwc[ids[2]];
                int any = nhwc[ids[0]] || nhwc[ids[1]] || nhwc[ids[2]];
                if (any && !all) {
                    nhwc[ids[0]] = nhwc[ids[1]] = nhwc[ids[2]] = 0;
                    changed = 1;
                }
            } else if (nhwc[m->in[0]->id]) {
                nhwc[m->in[0]->id] = 0;
                changed = 1;
            }
        }
    }
}

/* The wrapper's description in attrs and its call_extern arguments. */
static int lower_pattern(lower_ctx *c, const cn_match *m, size_t k, cn_features feat, tth_tbuffer *out,
                         tth_tstmt **seq, json_t *calls)
{
    tth_tir_module *mod = c->mod;
    tth_texpr *args[8];
    size_t na = 0;
    json_t *roles = json_array();
    json_t *d = json_object();
    if (!roles || !d) {
        json_decref(roles);
        json_decref(d);
        return TTH_ENOMEM;
    }
    char name[160];
    snprintf(name, sizeof name, "%s_k%zu", c->gsym, k);
#define ROLE(r, b)                                                         \
    do {                                                                   \
        args[na++] = tth_tir_address_of(mod, (b), tth_tir_i64(mod, 0));    \
        json_array_append_new(roles, json_string(r));                      \
    } while (0)
    ROLE("input", c->buf_of[m->in[0]->id]);
    if (m->kind == CN_ADD || m->kind == CN_MUL)
        ROLE("input2", c->buf_of[m->in[1]->id]);
    ROLE("output", out);
    int spatial = m->kind == CN_CONV || m->kind == CN_DWCONV || m->kind == CN_MAXPOOL || m->kind == CN_AVGPOOL;
    int stage_in = spatial && m->c > 1 && m->h * m->w_ > 1 && !c->nhwc[m->in[0]->id];
    int stage_out = spatial && m->oc > 1 && m->oh * m->ow > 1 && !c->nhwc[m->out->id];
    char bn[200];
    int64_t ctx = cn_scratch_bytes(m, feat);
    /* the int8 scratch buffers the wrapper needs: NHWC copies of input and output, the context */
    const struct {
        int needed;
        const char *name, *role;
        int64_t bytes;
    } scratch[] = {
        {stage_in, "in_nhwc", "input_nhwc", m->c * m->h * m->w_},
        {stage_out, "out_nhwc", "output_nhwc", m->oc * m->oh * m->ow},
        {ctx > 0, "ctx", "ctx", ctx},
    };
    for (size_t s = 0; s < sizeof scratch / sizeof scratch[0]; s++) {
        if (!scratch[s].needed)
            continue;
        snprintf(bn, sizeof bn, "k%zu_%s", k, scratch[s].name);
        tth_tbuffer *b = local(c, bn, TTH_I8, scratch[s].bytes);
        if (!b)
            goto oom;
        ROLE(scratch[s].role, b);
    }
    if (m->w) {
        tth_tensor *wt = reorder_weights(m);
        if (!wt)
            goto oom;
        snprintf(bn, sizeof bn, "%s_k%zu_filter", c->gsym, k);
        tth_tbuffer *b = tth_tir_const_buffer(mod, bn, wt);
        if (b && m->kind == CN_FC && feat.mve) {
            tth_tensor *ks = fc_kernel_sums(m, wt);
            snprintf(bn, sizeof bn, "%s_k%zu_kernel_sum", c->gsym, k);
            tth_tbuffer *kb = ks ? tth_tir_const_buffer(mod, bn, ks) : NULL;
            tth_tensor_unref(ks);
            tth_tensor_unref(wt);
            if (!kb)
                goto oom;
            ROLE("kernel_sum", kb);
            ctx = m->oc * 4;
        } else {
            tth_tensor_unref(wt);
        }
        if (!b)
            goto oom;
        ROLE("filter", b);
    }
    if (m->bias) {
        snprintf(bn, sizeof bn, "%s_k%zu_bias", c->gsym, k);
        tth_tbuffer *b = tth_tir_const_buffer(mod, bn, (tth_tensor *)m->bias);
        if (!b)
            goto oom;
        ROLE("bias", b);
    }
#undef ROLE
    static const char *const fns[] = {
        [CN_CONV] = "arm_convolve_wrapper_s8", [CN_DWCONV] = "arm_depthwise_conv_wrapper_s8",
        [CN_FC] = "arm_fully_connected_s8",    [CN_SOFTMAX] = "arm_softmax_s8",
        [CN_ADD] = "arm_elementwise_add_s8",   [CN_MUL] = "arm_elementwise_mul_s8",
        [CN_MAXPOOL] = "arm_max_pool_s8",      [CN_AVGPOOL] = "arm_avgpool_s8",
    };
    json_object_set_new(d, "wrapper", json_string(name));
    json_object_set_new(d, "function", json_string(fns[m->kind]));
    json_object_set_new(d, "pattern", json_string(cn_kind_name(m->kind)));
    json_object_set_new(d, "args", roles);
    roles = NULL;
    json_object_set_new(d, "ctx_size", json_integer(ctx));
    json_object_set_new(d, "activation", json_pack("[i,i]", m->act_min, m->act_max));
    switch (m->kind) {
    case CN_CONV:
    case CN_DWCONV:
    case CN_FC: {
        int64_t nq = m->kind == CN_FC ? 1 : m->oc;
        json_t *mu = json_array(), *sh = json_array();
        for (int64_t i = 0; i < nq; i++) {
            int64_t si = tth_ttype_numel(&m->req_scale->type) == 1 ? 0 : i;
            int32_t q, s;
            cn_quantize_multiplier(tth_tensor_get_f64(m->req_scale, si) / m->out_scale, &q, &s);
            json_array_append_new(mu, json_integer(q));
            json_array_append_new(sh, json_integer(s));
        }
        json_object_set_new(d, "multiplier", mu);
        json_object_set_new(d, "shift", sh);
        json_object_set_new(d, "input_offset", json_integer(-m->in_zp[0]));
        json_object_set_new(d, "output_offset", json_integer(m->out_zp));
        if (m->kind == CN_FC) {
            json_object_set_new(d, "filter_offset", json_integer(0));
            json_object_set_new(d, "input_dims", json_pack("[I,i,i,I]", (json_int_t)m->n, 1, 1, (json_int_t)m->c));
            json_object_set_new(d, "filter_dims", json_pack("[I,i,i,I]", (json_int_t)m->c, 1, 1, (json_int_t)m->oc));
            json_object_set_new(d, "output_dims", json_pack("[I,i,i,I]", (json_int_t)m->n, 1, 1, (json_int_t)m->oc));
        } else {
            int64_t in[4] = {m->n, m->h, m->w_, m->c}, o[4] = {m->n, m->oh, m->ow, m->oc};
            int64_t f[4] = {m->oc, m->kh, m->kw, m->c}, fd[4] = {1, m->kh, m->kw, m->oc};
            json_object_set_new(d, "input_dims", ints(in, 4));
            json_object_set_new(d, "filter_dims", ints(m->kind == CN_DWCONV ? fd : f, 4));
            json_object_set_new(d, "output_dims", ints(o, 4));
            json_object_set_new(d, "stride", json_pack("[I,I]", (json_int_t)m->stride[0], (json_int_t)m->stride[1]));
            json_object_set_new(d, "padding", json_pack("[I,I]", (json_int_t)m->pad[0], (json_int_t)m->pad[1]));
            json_object_set_new(d, "dilation", json_pack("[I,I]", (json_int_t)m->dilation[0], (json_int_t)m->dilation[1]));
            if (m->kind == CN_DWCONV)
                json_object_set_new(d, "ch_mult", json_integer(1));
        }
        json_object_set_new(d, "bias_dims", json_pack("[i,i,i,I]", 1, 1, 1, (json_int_t)m->oc));
        break;
    }
    case CN_SOFTMAX: {
        int32_t q, s, dmin;
        cn_softmax_params(m->in_scale[0], &q, &s, &dmin);
        json_object_set_new(d, "num_rows", json_integer(m->n));
        json_object_set_new(d, "row_size", json_integer(m->c));
        json_object_set_new(d, "mult", json_integer(q));
        json_object_set_new(d, "shift", json_integer(s));
        json_object_set_new(d, "diff_min", json_integer(dmin));
        break;
    }
    case CN_ADD:
    case CN_MUL: {
        json_object_set_new(d, "input_offsets", json_pack("[i,i]", -m->in_zp[0], -m->in_zp[1]));
        json_object_set_new(d, "output_offset", json_integer(m->out_zp));
        json_object_set_new(d, "block_size", json_integer(m->n));
        if (m->kind == CN_ADD) {
            int32_t q[3], s[3];
            cn_add_params(m->in_scale[0], m->in_scale[1], m->out_scale, q, s);
            json_object_set_new(d, "multiplier", json_pack("[i,i,i]", q[0], q[1], q[2]));
            json_object_set_new(d, "shift", json_pack("[i,i,i]", s[0], s[1], s[2]));
            json_object_set_new(d, "left_shift", json_integer(CN_ADD_LEFT_SHIFT));
        } else {
            int32_t q, s;
            cn_quantize_multiplier(m->in_scale[0] * m->in_scale[1] / m->out_scale, &q, &s);
            json_object_set_new(d, "multiplier", json_pack("[i]", q));
            json_object_set_new(d, "shift", json_pack("[i]", s));
        }
        break;
    }
    case CN_MAXPOOL:
    case CN_AVGPOOL: {
        int64_t in[4] = {1, m->h, m->w_, m->c}, o[4] = {1, m->oh, m->ow, m->oc}, f[4] = {1, m->kh, m->kw, 1};
        json_object_set_new(d, "input_dims", ints(in, 4));
        json_object_set_new(d, "filter_dims", ints(f, 4));
        json_object_set_new(d, "output_dims", ints(o, 4));
        json_object_set_new(d, "stride", json_pack("[I,I]", (json_int_t)m->stride[0], (json_int_t)m->stride[1]));
        json_object_set_new(d, "padding", json_pack("[I,I]", (json_int_t)m->pad[0], (json_int_t)m->pad[1]));
        break;
    }
    }
    if (json_array_append_new(calls, d) != 0) {
        d = NULL;
        goto oom;
    }
    d = NULL;
    for (size_t i = 0; i < na; i++)
        if (!args[i])
            goto oom;
    tth_texpr *call = tth_tir_call_extern(mod, TTH_I32, name, args, na);
    tth_tstmt *ev = call ? tth_tir_evaluate(mod, call) : NULL;
    if (!ev || tth_tir_seq_append(mod, seq, ev) != 0)
        goto oom;
    return 0;
oom:
    json_decref(roles);
    json_decref(d);
    return TTH_ENOMEM;
}

TTH_PLUGIN_EXPORT int tth_relay_to_tir(const tth_host *host, const json_t *target, const tth_relay_function *fn,
                                       const char *global_symbol, tth_tir_module *mod, tth_diag *diag)
{
    (void)host;
    char where[200];
    snprintf(where, sizeof where, "cmsis-nn relay_to_tir '%s'", global_symbol ? global_symbol : "?");
    if (!fn || !global_symbol || !mod)
        return tth_diag_set(diag, TTH_EINVAL, where, "no function, symbol or module given");
    /* the results: the body, or the fields of a tuple body (one output parameter each) */
    const tth_rexpr *body = fn->body;
    int tuple = body->kind == TTH_REXPR_TUPLE;
    size_t nres = tuple ? body->u.tuple.nfields : 1;
    tth_rexpr *const *res = tuple ? body->u.tuple.fields : &fn->body;
    if (!tuple && !tth_rexpr_ttype(body))
        return tth_diag_set(diag, TTH_EUNSUPPORTED, where, "the region's result is a tuple not built in the region");
    const tth_relay_users *u = tth_relay_users_of(&users, fn);
    tth_rexpr **nodes = NULL;
    int64_t n = u ? tth_relay_topo(fn->module, fn, &nodes) : TTH_ENOMEM;
    if (n < 0)
        return tth_diag_set(diag, TTH_ENOMEM, where, "out of memory");
    uint32_t max_id = 0;
    for (int64_t i = 0; i < n; i++)
        max_id = nodes[i]->id > max_id ? nodes[i]->id : max_id;
    lower_ctx c = {.mod = mod, .gsym = global_symbol, .diag = diag};
    uint8_t *covered = calloc((size_t)max_id + 1, 1);
    c.buf_of = calloc((size_t)max_id + 1, sizeof *c.buf_of);
    cn_match *pats = calloc((size_t)n + 1, sizeof *pats);
    tth_tbuffer **params = calloc(fn->nparams + nres + 1, sizeof *params);
    json_t *calls = json_array();
    tth_tstmt *seq = NULL;
    size_t npats = 0;
    int rc = 0;
    if (!covered || !c.buf_of || !pats || !params || !calls) {
        rc = tth_diag_set(diag, TTH_ENOMEM, where, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < fn->nparams; i++) {
        const tth_ttype *t = tth_rexpr_ttype(fn->params[i]);
        char pn[32];
        snprintf(pn, sizeof pn, "p%zu", i);
        if (!t) {
            rc = tth_diag_set(diag, TTH_EUNSUPPORTED, where, "parameter %zu is a tuple", i);
            goto done;
        }
        params[i] = tth_tir_buffer(mod, pn, t->dtype, t->rank, t->shape, TTH_SCOPE_PARAM);
        if (!params[i]) {
            rc = tth_diag_set(diag, TTH_ENOMEM, where, "out of memory");
            goto done;
        }
        c.buf_of[fn->params[i]->id] = params[i];
    }
    for (size_t j = 0; j < nres; j++) {
        const tth_ttype *ot = tth_rexpr_ttype(res[j]);
        char on[32];
        snprintf(on, sizeof on, "out%zu", j);
        if (!ot) {
            rc = tth_diag_set(diag, TTH_EUNSUPPORTED, where, "result %zu is a tuple", j);
            goto done;
        }
        for (size_t k = 0; k < j; k++)
            if (res[k] == res[j]) {
                rc = tth_diag_set(diag, TTH_EUNSUPPORTED, where, "results %zu and %zu are the same tensor", k, j);
                goto done;
            }
        params[fn->nparams + j] = tth_tir_buffer(mod, on, ot->dtype, ot->rank, ot->shape, TTH_SCOPE_PARAM);
        if (!params[fn->nparams + j]) {
            rc = tth_diag_set(diag, TTH_ENOMEM, where, "out of memory");
            goto done;
        }
    }
    /* match every call, in order: a pattern's inputs come from earlier patterns or parameters */
    for (int64_t i = 0; i < n; i++) {
        const tth_rexpr *e = nodes[i];
        if (e->kind == TTH_REXPR_VAR || e->kind == TTH_REXPR_CONST || covered[e->id] || (tuple && e == body))
            continue;
        char why[256];
        if (e->kind != TTH_REXPR_CALL) {
            rc = tth_diag_set(diag, TTH_EUNSUPPORTED, where, "a tuple inside the region: CMSIS-NN patterns pass "
                              "single tensors");
            goto done;
        }
        cn_match *m = &pats[npats];
        if (!cn_match_containing(u, e, m, why, sizeof why)) {
            rc = tth_diag_set(diag, TTH_EUNSUPPORTED, where, "%s", why);
            tth_diag_hint(diag, "the partitioner gives cmsis-nn only calls its partition_supports accepts");
            goto done;
        }
        for (size_t j = 0; j < m->nnodes; j++)
            covered[m->nodes[j]->id] = 1;
        if (++npats > 256) { /* what tir_to_runtime prints in one PrimFunc */
            rc = tth_diag_set(diag, TTH_ELIMIT, where, "more than 256 CMSIS-NN calls in one region");
            goto done;
        }
    }
    /* A pattern is found from its first node, but it runs when its last one may: a residual add
     * is found from the dequantize of its earlier input, before the layers that make the later
     * one. Order the calls by where their results are in topological order (a pattern's inputs
     * are computed before any of its nodes, so before its result). */
    int64_t *pos = calloc((size_t)max_id + 1, sizeof *pos);
    if (!pos) {
        rc = tth_diag_set(diag, TTH_ENOMEM, where, "out of memory");
        goto done;
    }
    for (int64_t i = 0; i < n; i++)
        pos[nodes[i]->id] = i;
    for (size_t k = 1; k < npats; k++) {
        cn_match m = pats[k];
        size_t j = k;
        for (; j > 0 && pos[pats[j - 1].out->id] > pos[m.out->id]; j--)
            pats[j] = pats[j - 1];
        pats[j] = m;
    }
    free(pos);
    uint8_t *nhwc = calloc((size_t)max_id + 1, 1);
    if (!nhwc) {
        rc = tth_diag_set(diag, TTH_ENOMEM, where, "out of memory");
        goto done;
    }
    choose_layouts(pats, npats, res, nres, nhwc);
    c.nhwc = nhwc;
    for (size_t k = 0; k < npats && rc == 0; k++) {
        cn_match *m = &pats[k];
        int nin = (m->kind == CN_ADD || m->kind == CN_MUL) ? 2 : 1;
        for (int i = 0; i < nin; i++) {
            const tth_rexpr *in = m->in[i];
            if (!c.buf_of[in->id] && in->kind == TTH_REXPR_CONST) {
                char cn[200];
                snprintf(cn, sizeof cn, "%s_k%zu_in%d", global_symbol, k, i);
                c.buf_of[in->id] = tth_tir_const_buffer(mod, cn, in->u.constant.value);
            }
            if (!c.buf_of[in->id]) {
                rc = tth_diag_set(diag, TTH_EUNSUPPORTED, where, "the input of the %s pattern is computed outside "
                                  "CMSIS-NN patterns of this region", cn_kind_name(m->kind));
                break;
            }
        }
        if (rc)
            break;
        tth_tbuffer *out = NULL;
        for (size_t j = 0; j < nres && !out; j++)
            if (m->out == res[j])
                out = params[fn->nparams + j];
        if (!out) {
            char ln[64];
            snprintf(ln, sizeof ln, "k%zu_out", k);
            out = local(&c, ln, TTH_I8, tth_ttype_numel(tth_rexpr_ttype(m->out)));
        }
        if (!out) {
            rc = c.limit ? tth_diag_set(diag, TTH_ELIMIT, where, "more than %zu LOCAL buffers in one region",
                                        sizeof c.locals / sizeof c.locals[0])
                         : tth_diag_set(diag, TTH_ENOMEM, where, "out of memory");
            break;
        }
        c.buf_of[m->out->id] = out;
        if (lower_pattern(&c, m, k, features_of(target), out, &seq, calls) != 0)
            rc = c.limit ? tth_diag_set(diag, TTH_ELIMIT, where, "more than %zu LOCAL buffers in one region",
                                        sizeof c.locals / sizeof c.locals[0])
                         : tth_diag_set(diag, TTH_ENOMEM, where, "out of memory");
    }
    if (rc)
        goto done;
    for (size_t j = 0; j < nres; j++)
        if (c.buf_of[res[j]->id] != params[fn->nparams + j]) {
            rc = tth_diag_set(diag, TTH_EUNSUPPORTED, where, "the region's result %zu is not produced by a CMSIS-NN "
                              "pattern", j);
            goto done;
        }
    for (size_t i = c.nlocals; i-- > 0 && seq;)
        seq = tth_tir_allocate(mod, c.locals[i], seq);
    json_t *attrs = json_pack("{s:s,s:s,s:o}", "op", "cmsis-nn", "origin", "relay_to_tir", "cmsis_nn", calls);
    calls = NULL;
    if (!seq || !attrs) {
        json_decref(attrs);
        rc = tth_diag_set(diag, TTH_ENOMEM, where, "out of memory");
        goto done;
    }
    if (!tth_tir_func_add(mod, global_symbol, params, fn->nparams + nres, seq, "cmsis-nn", attrs, diag))
        rc = diag && diag->code ? diag->code : TTH_EINTERNAL;
done:
    json_decref(calls);
    free(covered);
    free((void *)c.nhwc);
    free(c.buf_of);
    free(pats);
    free(params);
    tth_relay_users_free(users);
    users = NULL;
    return rc;
}
